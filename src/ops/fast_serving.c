/* Builders of the fast family's serving kernels: sorted_offsets, softmax (in place) and
 * causal_softmax, their argument checks and the composed forms the transforms and tests use.
 * The definitions are in include/nuvec/fast.h. */
#include <math.h>

#include "nuvec/fast.h"
#include "ops/fast_serving.h"
#include "ops/fast.h"
#include "ops/ops_internal.h"

/* A one-input node of `prim` over x prepared in `dt`, with an output of `odt` and `shape`, and
 * params copied in. */
static nv_array *one_input_node(int prim, const nv_array *x, nv_dtype dt, nv_dtype odt,
                                const int *shape, int ndim, const void *params, size_t size) {
  const char *op = nv__prims[prim].name;
  nv__scope_suspend();
  nv_array *in = nv__fast_prepared(x, dt);
  nv_array *f = nv__op_check(op, (const nv_array *const *)&in, 1);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in);
    node = nv__op_node(prim, &in, 1, odt, shape ? shape : o->shape, shape ? ndim : o->ndim, size);
    if (node) memcpy(node->params, params, size);
  }
  nv_release(in);
  nv__scope_resume();
  return f ? f : nv__op_finish(op, node);
}

/* ---- sorted_offsets ---- */

/* The offsets' dtype for n ids: int32 while every position and n itself fit. */
static nv_dtype offsets_dtype(int64_t n) {
  return n <= INT32_MAX ? NV_DTYPE_INT32 : NV_DTYPE_INT64;
}

/* The dtype the kernels read: 32- and 64-bit integers as they are, narrower ones as int32. */
static nv_dtype ids_dtype(nv_dtype t) {
  if (t == NV_DTYPE_INT64 || t == NV_DTYPE_UINT32 || t == NV_DTYPE_UINT64) return t;
  return NV_DTYPE_INT32;
}

nv_array *nv__fast_offsets_node(const nv_array *ids, int groups) {
  const nv__output *o = nv__out(ids);
  nv__fast_offsets_params p = {.groups = groups};
  int shape[1] = {groups + 1};
  return one_input_node(NV__PRIM_FAST_SORTED_OFFSETS, ids, ids_dtype(o->dtype),
                        offsets_dtype(o->size), shape, 1, &p, sizeof p);
}

nv_array *nv_fast_sorted_offsets(const nv_array *sorted_indices, int groups) {
  const nv_array *xs[1] = {sorted_indices};
  nv_array *f = nv__op_check("sorted_offsets", xs, 1);
  if (f) return f;
  const nv__output *o = nv__out(sorted_indices);
  if (!nv__fast_integer(o->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "sorted_offsets",
                        "sorted indices must have an integer dtype but have %s",
                        nv_dtype_name(o->dtype));
  if (groups < 0 || groups == INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "sorted_offsets",
                        "groups must be in [0, %d) but is %d", INT32_MAX, groups);
  return nv__fast_offsets_node(sorted_indices, groups);
}

nv_array *nv__fast_offsets_composed(const nv_array *ids, int groups, nv_dtype dt) {
  const nv__output *o = nv__out(ids);
  int b = o->ndim ? o->shape[0] : 1;
  int64_t n = b ? o->size / b : 0;
  int shape[3] = {b, (int)n, 1};
  nv_array *x = nv_astype(ids, NV_DTYPE_INT64);
  x = nv__then(x, nv_reshape(x, shape, 3));
  nv_array *g = nv_arange(0, (double)groups + 1, 1, NV_DTYPE_INT64);
  nv_array *below = nv_less(x, g); /* [b, n, groups + 1]: id < g */
  nv_release(x);
  nv_release(g);
  int axis = 1;
  nv_array *c = nv_sum(below, &axis, 1, false);
  nv_release(below);
  return nv__then(c, nv_astype(c, dt));
}

/* ---- softmax and causal_softmax ---- */

nv_array *nv_fast_softmax(const nv_array *x) {
  int axis = -1;
  return nv_softmax(x, &axis, 1, true);
}

nv_array *nv__fast_causal_node(const nv_array *x, int rows) {
  nv__fast_causal_params p = {.rows = rows};
  nv_dtype dt = nv__out(x)->dtype;
  return one_input_node(NV__PRIM_FAST_CAUSAL_SOFTMAX, x, dt, dt, NULL, 0, &p, sizeof p);
}

nv_array *nv_fast_causal_softmax(const nv_array *x, int rows) {
  const nv_array *xs[1] = {x};
  nv_array *f = nv__op_check("causal_softmax", xs, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  char s[NV__SHAPE_BUF];
  if (o->ndim < 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "causal_softmax",
                        "input must have at least 1 dimension but got input with 0 dimensions");
  if (!nv__fast_real_float(o->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "causal_softmax",
                        "input must be a floating type (float16, bfloat16, float32 or float64) "
                        "but got %s",
                        nv_dtype_name(o->dtype));
  int64_t nrows = 1;
  for (int i = 0; i < o->ndim - 1; i++) nrows *= o->shape[i];
  if (rows < 1 || nrows % rows)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "causal_softmax",
                        "rows must be positive and divide the %lld rows of input %s but is %d",
                        (long long)nrows, nv__shape_str(o->shape, o->ndim, s, sizeof s), rows);
  return nv__fast_causal_node(x, rows);
}

nv_array *nv__fast_causal_composed(const nv_array *x, int rows) {
  const nv__output *o = nv__out(x);
  nv_dtype dt = o->dtype, ct = dt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  int nd = o->ndim, c = o->shape[nd - 1];
  int64_t nrows = 1;
  for (int i = 0; i < nd - 1; i++) nrows *= o->shape[i];
  /* seen[i, j] = j <= c - rows + i, as [rows, c] */
  nv_array *j = nv_arange(0, c, 1, NV_DTYPE_INT64);
  nv_array *i = nv_arange((double)c - rows, (double)c, 1, NV_DTYPE_INT64);
  int col[2] = {rows, 1};
  i = nv__then(i, nv_reshape(i, col, 2));
  nv_array *seen = nv_less_equal(j, i);
  nv_release(i);
  nv_release(j);
  int blocks[3] = {(int)(rows ? nrows / rows : 0), rows, c};
  nv_array *xb = nv_astype(x, ct);
  xb = nv__then(xb, nv_reshape(xb, blocks, 3));
  nv_array *lo = nv_array_scalar(-INFINITY, ct), *zero = nv_array_scalar(0, ct);
  nv_array *m = nv_where(seen, xb, lo);
  nv_release(xb);
  int axis = -1;
  m = nv__then(m, nv_softmax(m, &axis, 1, true));
  m = nv__then(m, nv_where(seen, m, zero));
  nv_release(seen);
  nv_release(lo);
  nv_release(zero);
  m = nv__then(m, nv_astype(m, dt));
  return nv__then(m, nv_reshape(m, o->shape, nd));
}

/* ---- paged_write ---- */

nv_array *nv__fast_paged_node(const nv_array *pool, const nv_array *values, const nv_array *slots) {
  const nv__output *po = nv__out(pool), *so = nv__out(slots);
  nv_dtype sdt = so->dtype == NV_DTYPE_INT32 ? NV_DTYPE_INT32 : NV_DTYPE_INT64;
  nv__scope_suspend();
  nv_array *in[3] = {nv__fast_prepared(pool, po->dtype), nv__fast_prepared(values, po->dtype),
                     nv__fast_prepared(slots, sdt)};
  nv_array *f = nv__op_check("paged_write", (const nv_array *const *)in, 3);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in[0]);
    node = nv__op_node(NV__PRIM_FAST_PAGED_WRITE, in, 3, o->dtype, o->shape, o->ndim, 0);
  }
  for (int i = 0; i < 3; i++) nv_release(in[i]);
  nv__scope_resume();
  return f ? f : nv__op_finish("paged_write", node);
}

nv_array *nv_fast_paged_write(const nv_array *cache_pool, const nv_array *values,
                              const nv_array *slot_mapping) {
  const nv_array *xs[3] = {cache_pool, values, slot_mapping};
  nv_array *f = nv__op_check("paged_write", xs, 3);
  if (f) return f;
  const nv__output *po = nv__out(cache_pool), *vo = nv__out(values), *so = nv__out(slot_mapping);
  char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF];
  if (po->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "paged_write",
                        "the cache pool must have at least 2 dimensions [num_blocks, block_size, "
                        "...] but has shape %s",
                        nv__shape_str(po->shape, po->ndim, a, sizeof a));
  if (!nv__fast_integer(so->dtype) || so->ndim != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "paged_write",
                        "slot_mapping must be a 1-D integer array but has shape %s and dtype %s",
                        nv__shape_str(so->shape, so->ndim, a, sizeof a),
                        nv_dtype_name(so->dtype));
  bool fits = vo->ndim == po->ndim - 1 && vo->shape[0] == so->shape[0];
  for (int i = 1; fits && i < vo->ndim; i++) fits = vo->shape[i] == po->shape[i + 1];
  if (!fits)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "paged_write",
                        "values must have shape [%d] + the pool's token shape (pool %s) but have "
                        "shape %s",
                        so->shape[0], nv__shape_str(po->shape, po->ndim, a, sizeof a),
                        nv__shape_str(vo->shape, vo->ndim, b, sizeof b));
  return nv__fast_paged_node(cache_pool, values, slot_mapping);
}

nv_array *nv__fast_paged_composed(const nv_array *pool, const nv_array *values,
                                  const nv_array *slots) {
  const nv__output *po = nv__out(pool);
  int64_t nslots = (int64_t)po->shape[0] * po->shape[1];
  int d = 1;
  for (int i = 2; i < po->ndim; i++) d *= po->shape[i];
  int t = nv__out(slots)->shape[0];
  int flat[2] = {(int)nslots, d}, rows[3] = {t, 1, d}, extra[2] = {1, d};
  nv_array *p = nv_reshape(pool, flat, 2);
  nv_array *pad = nv_zeros(extra, 2, po->dtype);
  const nv_array *parts[2] = {p, pad};
  nv_array *ext = nv_concatenate(parts, 2, 0);
  nv_release(p);
  nv_release(pad);
  nv_array *s = nv_astype(slots, NV_DTYPE_INT64);
  nv_array *neg = nv_less_scalar(s, 0);
  nv_array *last = nv_array_scalar((double)nslots, NV_DTYPE_INT64);
  nv_array *idx = nv_where(neg, last, s);
  nv_release(s);
  nv_release(neg);
  nv_release(last);
  nv_array *v = nv_astype(values, po->dtype);
  v = nv__then(v, nv_reshape(v, rows, 3));
  int axis = 0;
  const nv_array *idxs[1] = {idx};
  ext = nv__then(ext, nv_scatter(ext, idxs, 1, v, &axis));
  nv_release(idx);
  nv_release(v);
  int start[2] = {0, 0}, stop[2] = {(int)nslots, d};
  ext = nv__then(ext, nv_slice(ext, start, stop, NULL, 2));
  return nv__then(ext, nv_reshape(ext, po->shape, po->ndim));
}

/* ---- conv_slots ---- */

nv__node *nv__fast_conv_node(const nv_array *x, const nv_array *w, const nv_array *pool,
                             const nv_array *slots, const nv_array *bias, bool silu) {
  nv_dtype dt = nv__out(x)->dtype;
  nv_dtype sdt = nv__out(slots)->dtype == NV_DTYPE_INT32 ? NV_DTYPE_INT32 : NV_DTYPE_INT64;
  nv__scope_suspend();
  nv_array *in[5] = {nv__fast_prepared(x, dt), nv__fast_prepared(w, dt),
                     nv__fast_prepared(pool, dt), nv__fast_prepared(slots, sdt),
                     bias ? nv__fast_prepared(bias, dt) : NULL};
  int nin = bias ? 5 : 4, bad = -1;
  for (int i = 0; i < nin && bad < 0; i++)
    if (!nv__meta_known(in[i])) bad = i;
  nv__node *n = NULL;
  if (bad >= 0) {
    nv_array_status(in[bad]); /* a conversion that failed itself (out of memory) */
  } else if (!(n = nv__node_new(NV__PRIM_FAST_CONV_SLOTS, in, nin, 2,
                                sizeof(nv__fast_conv_params)))) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_slots: out of memory");
  }
  if (n) {
    nv__node_inherit_error(n);
    *(nv__fast_conv_params *)n->params = (nv__fast_conv_params){silu, bias != NULL};
    const nv__output *po = nv__out(in[2]), *xo = nv__out(in[0]);
    if (nv__output_set_shape(&n->out[0], dt, po->shape, po->ndim) != NV_OK ||
        nv__output_set_shape(&n->out[1], dt, xo->shape, xo->ndim) != NV_OK) {
      nv__node_release(n);
      n = NULL;
    }
    for (int i = 0; n && i < nin; i++) nv__node_inherit_tracer(n, in[i]->node);
  }
  for (int i = 0; i < nin; i++) nv_release(in[i]);
  nv__scope_resume();
  return n;
}

/* Both outputs of a conv_slots that failed before it had a node: f and a second failed array
 * with f's error. */
static nv_status conv_fail(nv_array *f, nv_array **out) {
  out[0] = f;
  out[1] = nv__array_failed_nometa(nv__node_known_error(f->node));
  return nv_array_status(f);
}

nv_status nv_fast_conv_slots(const nv_array *x, const nv_array *weight, const nv_array *bias,
                             const nv_array *conv_state_pool, const nv_array *slot_ids,
                             bool silu, nv_array **out) {
  const char *op = "conv_slots";
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "conv_slots: the output list is NULL");
  const nv_array *xs[5] = {x, weight, conv_state_pool, slot_ids, bias};
  nv_array *f = nv__op_check(op, xs, bias ? 5 : 4);
  if (f) return conv_fail(f, out);
  const nv__output *xo = nv__out(x), *wo = nv__out(weight), *po = nv__out(conv_state_pool),
                   *so = nv__out(slot_ids), *bo = bias ? nv__out(bias) : NULL;
  char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF], c[NV__SHAPE_BUF];
  if (xo->ndim != 2 || !nv__fast_real_float(xo->dtype))
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "x must be [N, C] of a floating type but has shape %s and dtype %s",
                     nv__shape_str(xo->shape, xo->ndim, a, sizeof a), nv_dtype_name(xo->dtype));
  else if (wo->ndim != 2 || wo->shape[0] != xo->shape[1] || wo->shape[1] < 1)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "weight must be [C, K] with C = %d and K >= 1 but has shape %s",
                     xo->shape[1], nv__shape_str(wo->shape, wo->ndim, a, sizeof a));
  else if (po->ndim != 3 || po->shape[1] != xo->shape[1] || po->shape[2] != wo->shape[1] - 1 ||
           po->dtype != xo->dtype)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "conv_state_pool must be [S, C, K - 1] of x's dtype %s (x %s, weight %s) "
                     "but has shape %s and dtype %s",
                     nv_dtype_name(xo->dtype), nv__shape_str(xo->shape, 2, a, sizeof a),
                     nv__shape_str(wo->shape, 2, b, sizeof b),
                     nv__shape_str(po->shape, po->ndim, c, sizeof c), nv_dtype_name(po->dtype));
  else if (!nv__fast_integer(so->dtype) || so->ndim != 1 || so->shape[0] != xo->shape[0])
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "slot_ids must be a 1-D integer array of N = %d slots but has shape %s and "
                     "dtype %s",
                     xo->shape[0], nv__shape_str(so->shape, so->ndim, a, sizeof a),
                     nv_dtype_name(so->dtype));
  else if (bo && (bo->ndim != 1 || bo->shape[0] != xo->shape[1]))
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "bias must be [C] with C = %d but has shape %s",
                     xo->shape[1], nv__shape_str(bo->shape, bo->ndim, a, sizeof a));
  if (f) return conv_fail(f, out);
  nv__node *n = nv__fast_conv_node(x, weight, conv_state_pool, slot_ids, bias, silu);
  if (!n) return conv_fail(nv__op_finish(op, NULL), out);
  nv__node_retain(n);
  out[0] = nv__array_new(n, 1); /* y */
  out[1] = nv__array_new(n, 0); /* the pool */
  return nv_array_status(out[0]);
}

void nv__fast_conv_composed(const nv_array *x, const nv_array *w, const nv_array *pool,
                            const nv_array *slots, const nv_array *bias, bool silu,
                            nv_array **out) {
  const nv__output *xo = nv__out(x), *po = nv__out(pool);
  nv_dtype dt = xo->dtype, ct = dt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  int nseq = xo->shape[0], ch = xo->shape[1], k = nv__out(w)->shape[1], ns = po->shape[0];
  /* Each sequence's window [N, C, K]: its slot's state (slot 0 for padding), then x. */
  nv_array *s = nv_astype(slots, NV_DTYPE_INT64);
  nv_array *pad = nv_less_scalar(s, 0);
  nv_array *zero_i = nv_array_scalar(0, NV_DTYPE_INT64);
  nv_array *last = nv_array_scalar(ns, NV_DTYPE_INT64);
  nv_array *at = nv_where(pad, zero_i, s), *to = nv_where(pad, last, s);
  nv_release(zero_i);
  nv_release(last);
  nv_release(s);
  nv_array *st = nv_take(pool, at, 0);
  nv_release(at);
  int col[3] = {nseq, ch, 1};
  nv_array *xc = nv_reshape(x, col, 3);
  const nv_array *parts[2] = {st, xc};
  nv_array *win = nv_concatenate(parts, 2, 2);
  nv_release(st);
  nv_release(xc);
  /* y = sum_k weight[c, k] win[n, c, k] (+ bias) in the compute type, silu, zero for padding */
  nv_array *wf = nv_astype(win, ct), *wc = nv_astype(w, ct);
  nv_array *prod = nv_multiply(wf, wc);
  nv_release(wf);
  nv_release(wc);
  int axis = 2;
  nv_array *y = nv_sum(prod, &axis, 1, false);
  nv_release(prod);
  if (bias) {
    nv_array *bc = nv_astype(bias, ct);
    y = nv__then(y, nv_add(y, bc));
    nv_release(bc);
  }
  if (silu) {
    nv_array *sg = nv_sigmoid(y);
    y = nv__then(y, nv_multiply(y, sg));
    nv_release(sg);
  }
  int rowcol[2] = {nseq, 1};
  nv_array *padc = nv_reshape(pad, rowcol, 2), *zero = nv_array_scalar(0, ct);
  y = nv__then(y, nv_where(padc, zero, y));
  nv_release(padc);
  nv_release(zero);
  out[1] = nv__then(y, nv_astype(y, dt));
  /* The pool: each window's last K - 1 values scattered at its slot (padding at an extra row
   * dropped afterwards). */
  int lo[3] = {0, 0, 1}, hi[3] = {nseq, ch, k};
  nv_array *shifted = nv_slice(win, lo, hi, NULL, 3);
  nv_release(win);
  int upd[4] = {nseq, 1, ch, k - 1}, extra[3] = {1, ch, k - 1};
  shifted = nv__then(shifted, nv_reshape(shifted, upd, 4));
  nv_array *padrow = nv_zeros(extra, 3, dt);
  const nv_array *pp[2] = {pool, padrow};
  nv_array *ext = nv_concatenate(pp, 2, 0);
  nv_release(padrow);
  const nv_array *idx[1] = {to};
  int ax0 = 0;
  ext = nv__then(ext, nv_scatter(ext, idx, 1, shifted, &ax0));
  nv_release(shifted);
  nv_release(to);
  nv_release(pad);
  int start[3] = {0, 0, 0}, stop[3] = {ns, ch, k - 1};
  out[0] = nv__then(ext, nv_slice(ext, start, stop, NULL, 3));
}
