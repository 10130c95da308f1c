/* The builder of norm_rope (RMSNorm then RoPE per row, optionally into a KV cache): its
 * argument checks, the node over prepared inputs and the composed form the transforms and
 * tests use. The definition is in include/nuvec/fast.h. */
#include <math.h>

#include "nuvec/fast.h"
#include "ops/fast.h"
#include "ops/fast_serving.h"
#include "ops/fast_state.h"
#include "ops/ops_internal.h"

nv_array *nv__fast_norm_rope_node(const nv_array *x, const nv_array *pos, const nv_array *w,
                                  const nv_array *freqs, const nv_array *cache,
                                  const nv_array *cpos, const nv__fast_norm_rope_params *p) {
  const char *op = "norm_rope";
  nv_dtype dt = nv__out(x)->dtype;
  nv__scope_suspend();
  nv_array *in[6];
  int n = 0;
  if (cache) in[n++] = nv__fast_prepared(cache, dt);
  in[n++] = nv__fast_prepared(x, dt);
  in[n++] = nv__fast_prepared(pos, NV_DTYPE_INT32);
  if (cache)
    in[n++] = nv__fast_prepared(cpos, nv__out(cpos)->dtype == NV_DTYPE_INT32 ? NV_DTYPE_INT32
                                                                    : NV_DTYPE_INT64);
  if (p->has_weight) in[n++] = nv__fast_prepared(w, dt);
  if (p->has_freqs) in[n++] = nv__fast_prepared(freqs, nv__fast_compute_type(dt));
  nv_array *f = nv__op_check(op, (const nv_array *const *)in, n);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in[0]); /* the cache, or x */
    node = nv__op_node(cache ? NV__PRIM_FAST_NORM_ROPE_CACHE : NV__PRIM_FAST_NORM_ROPE, in, n,
                       dt, o->shape, o->ndim, sizeof *p);
    if (node) memcpy(node->params, p, sizeof *p);
  }
  for (int i = 0; i < n; i++) nv_release(in[i]);
  nv__scope_resume();
  return f ? f : nv__op_finish(op, node);
}

nv_array *nv_fast_norm_rope(const nv_array *x, const nv_array *weight, double eps, int dims,
                            bool traditional, double base, double scale,
                            const nv_array *positions, const nv_array *freqs,
                            const nv_array *cache, const nv_array *cache_positions) {
  const char *op = "norm_rope";
  const nv_array *xs[2] = {x, positions};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv_array *opt[4] = {weight, freqs, cache, cache_positions};
  for (int i = 0; i < 4; i++)
    if (opt[i] && (f = nv__op_check(op, &opt[i], 1))) return f;
  const nv__output *o = nv__out(x), *po = nv__out(positions);
  char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF];
  if (o->ndim < 2 || !nv__fast_real_float(o->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "x must be [T, ..., D] (at least 2-D) of a floating type but has shape %s "
                        "and dtype %s",
                        nv__shape_str(o->shape, o->ndim, a, sizeof a), nv_dtype_name(o->dtype));
  int t = o->shape[0], d = o->shape[o->ndim - 1];
  if (weight) {
    const nv__output *wo = nv__out(weight);
    if (wo->ndim != 1 || wo->shape[0] != d || !nv__fast_real_float(wo->dtype))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "weight must be a floating [D] with D = %d but has shape %s and dtype %s",
                          d, nv__shape_str(wo->shape, wo->ndim, a, sizeof a),
                          nv_dtype_name(wo->dtype));
  }
  if (dims <= 0 || dims % 2 || dims > d)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "dims must be even, positive and at most D = %d but is %d", d, dims);
  bool has_base = !isnan(base);
  if (has_base == (freqs != NULL))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "exactly one of base and freqs must be given (base %s, freqs %s)",
                        has_base ? "given" : "none", freqs ? "given" : "none");
  if (freqs) {
    const nv__output *fq = nv__out(freqs);
    if (fq->ndim != 1 || fq->shape[0] != dims / 2 || fq->dtype == NV_DTYPE_COMPLEX64 ||
        fq->dtype == NV_DTYPE_BOOL)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "freqs must be a real 1-D array of dims / 2 = %d but has shape %s and "
                          "dtype %s",
                          dims / 2, nv__shape_str(fq->shape, fq->ndim, a, sizeof a),
                          nv_dtype_name(fq->dtype));
  }
  if (!nv__fast_integer(po->dtype) || po->ndim != 1 || po->shape[0] != t)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "positions must be a 1-D integer array of T = %d (x %s) but has shape %s "
                        "and dtype %s",
                        t, nv__shape_str(o->shape, o->ndim, a, sizeof a),
                        nv__shape_str(po->shape, po->ndim, b, sizeof b), nv_dtype_name(po->dtype));
  if ((cache == NULL) != (cache_positions == NULL))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "cache and cache_positions must be given together (cache %s, "
                        "cache_positions %s)",
                        cache ? "given" : "none", cache_positions ? "given" : "none");
  if (cache) {
    const nv__output *co = nv__out(cache), *cp = nv__out(cache_positions);
    bool fits = co->ndim == o->ndim && co->dtype == o->dtype;
    for (int i = 1; fits && i < o->ndim; i++) fits = co->shape[i] == o->shape[i];
    if (!fits)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "the cache must be [S] + x's token shape (x %s) of x's dtype %s but has "
                          "shape %s and dtype %s",
                          nv__shape_str(o->shape, o->ndim, a, sizeof a), nv_dtype_name(o->dtype),
                          nv__shape_str(co->shape, co->ndim, b, sizeof b),
                          nv_dtype_name(co->dtype));
    if (!nv__fast_integer(cp->dtype) || cp->ndim != 1 || cp->shape[0] != t)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "cache_positions must be a 1-D integer array of T = %d but has shape %s "
                          "and dtype %s",
                          t, nv__shape_str(cp->shape, cp->ndim, a, sizeof a),
                          nv_dtype_name(cp->dtype));
  }
  nv__fast_norm_rope_params p = {.eps = eps,
                                 .base = has_base ? base : 0,
                                 .scale = scale,
                                 .dims = dims,
                                 .traditional = traditional,
                                 .has_weight = weight != NULL,
                                 .has_freqs = freqs != NULL};
  return nv__fast_norm_rope_node(x, positions, weight, freqs, cache, cache_positions, &p);
}

nv_array *nv__fast_norm_rope_composed(const nv_array *x, const nv_array *pos, const nv_array *w,
                                      const nv_array *freqs, const nv_array *cache,
                                      const nv_array *cpos, const nv__fast_norm_rope_params *p) {
  const nv__output *o = nv__out(x);
  nv_dtype dt = o->dtype, ct = nv__fast_compute_type(dt);
  int nd = o->ndim, t = o->shape[0], d = o->shape[nd - 1], m = 1;
  for (int i = 1; i < nd - 1; i++) m *= o->shape[i];
  /* n = x * rsqrt(mean(x^2) + eps) * w in the compute type */
  nv_array *xc = nv_astype(x, ct), *sq = nv_square(xc);
  int axis = -1;
  nv_array *ms = nv_mean(sq, &axis, 1, true);
  nv_release(sq);
  nv_array *eps = nv_array_scalar(p->eps, ct);
  ms = nv__then(ms, nv_add(ms, eps));
  nv_release(eps);
  ms = nv__then(ms, nv_rsqrt(ms));
  nv_array *n = nv_multiply(xc, ms);
  nv_release(xc);
  nv_release(ms);
  if (w) {
    nv_array *wc = nv_astype(w, ct);
    n = nv__then(n, nv_multiply(n, wc));
    nv_release(wc);
  }
  /* rope's composed form over [T, M, 1, D]: batch t (axis 0) at offset positions[t], one
   * position a batch (axis -2 of length 1). */
  int four[4] = {t, m, 1, d};
  n = nv__then(n, nv_reshape(n, four, 4));
  nv__fast_rope_params rp = {.dims = p->dims,
                             .traditional = p->traditional,
                             .has_freqs = p->has_freqs,
                             .inverse = false,
                             .base = p->base,
                             .scale = p->scale};
  nv_array *y = nv__fast_rope_composed(n, pos, freqs, &rp);
  nv_release(n);
  y = nv__then(y, nv_astype(y, dt));
  if (!cache) return nv__then(y, nv_reshape(y, o->shape, nd));
  /* into the cache: paged_write's scatter over the cache as [S, 1, M * D] */
  const nv__output *co = nv__out(cache);
  int rows[2] = {t, m * d}, pool[3] = {co->shape[0], 1, m * d};
  y = nv__then(y, nv_reshape(y, rows, 2));
  nv_array *c = nv_reshape(cache, pool, 3);
  nv_array *r = nv__fast_paged_composed(c, y, cpos);
  nv_release(c);
  nv_release(y);
  return nv__then(r, nv_reshape(r, co->shape, co->ndim));
}
