/* Builders of the fast family: rms_norm, layer_norm and rope (MLX's mx.fast), their argument
 * checks with MLX's messages, and the composed fallbacks the transforms use. The decided rules
 * are written in include/nuvec/fast.h. */
#include <math.h>

#include "nuvec/fast.h"
#include "ops/fast.h"
#include "ops/ops_internal.h"

bool nv__fast_real_float(nv_dtype t) {
  return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16 || t == NV_DTYPE_FLOAT32 ||
         t == NV_DTYPE_FLOAT64;
}

bool nv__fast_integer(nv_dtype t) {
  return t == NV_DTYPE_INT8 || t == NV_DTYPE_INT16 || t == NV_DTYPE_INT32 ||
         t == NV_DTYPE_INT64 || t == NV_DTYPE_UINT8 || t == NV_DTYPE_UINT16 ||
         t == NV_DTYPE_UINT32 || t == NV_DTYPE_UINT64;
}

nv_dtype nv__fast_compute_type(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
}

nv_array *nv__then(nv_array *old, nv_array *next) {
  nv_release(old);
  return next;
}

nv_array *nv__fast_prepared(const nv_array *x, nv_dtype dt) {
  nv_array *c = nv__cast_unscoped(x, dt);
  if (!nv__meta_known(c) || (nv__out(c)->flags & NV__FLAG_ROW)) return c;
  return nv__then(c, nv_contiguous(c));
}

/* ---- rms_norm and layer_norm ---- */

nv_array *nv__fast_norm_node(int prim, const nv_array *x, const nv_array *w, const nv_array *b,
                             const nv__fast_norm_params *p, nv_dtype dt) {
  const char *op = nv__prims[prim].name;
  nv__scope_suspend();
  nv_array *in[3];
  int n = 0;
  in[n++] = nv__fast_prepared(x, dt);
  if (p->has_weight) in[n++] = nv__fast_prepared(w, dt);
  if (p->has_bias) in[n++] = nv__fast_prepared(b, dt);
  nv_array *f = nv__op_check(op, (const nv_array *const *)in, n);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in[0]);
    node = nv__op_node(prim, in, n, dt, o->shape, o->ndim, sizeof *p);
    if (node) *(nv__fast_norm_params *)node->params = *p;
  }
  for (int i = 0; i < n; i++) nv_release(in[i]);
  nv__scope_resume();
  return f ? f : nv__op_finish(op, node);
}

/* Checks that `v` (weight or bias) is 1-D with `d` elements: NULL, or the failed array. */
static nv_array *check_vector(const char *op, const char *what, const nv_array *v, int d) {
  const nv__output *o = nv__out(v);
  if (o->ndim != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s must have 1 dimension but has %d dimensions",
                        what, o->ndim);
  if (o->shape[0] != d)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "%s must have the same size as the last dimension of x (%d) but has %d "
                        "elements",
                        what, d, o->shape[0]);
  return NULL;
}

static nv_array *norm(int prim, const nv_array *x, const nv_array *w, const nv_array *b,
                      double eps) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[3] = {x};
  int n = 1;
  if (w) xs[n++] = w;
  if (b) xs[n++] = b;
  nv_array *f = nv__op_check(op, xs, n);
  if (f) return f;
  const nv__output *o = nv__out(x);
  if (o->ndim < 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "input must have at least 1 dimension but got input with 0 dimensions");
  int d = o->shape[o->ndim - 1];
  nv_dtype dt = o->dtype;
  if (w && (f = check_vector(op, "weight", w, d))) return f;
  if (b && (f = check_vector(op, "bias", b, d))) return f;
  if (w) dt = nv_promote_types(dt, nv__out(w)->dtype);
  if (b) dt = nv_promote_types(dt, nv__out(b)->dtype);
  if (!nv__fast_real_float(dt))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "received unsupported type %s (x %s); it takes float16, bfloat16, "
                        "float32 or float64",
                        nv_dtype_name(dt), nv_dtype_name(o->dtype));
  nv__fast_norm_params p = {.eps = eps, .has_weight = w != NULL, .has_bias = b != NULL};
  return nv__fast_norm_node(prim, x, w, b, &p, dt);
}

nv_array *nv_fast_rms_norm(const nv_array *x, const nv_array *weight, double eps) {
  return norm(NV__PRIM_FAST_RMS_NORM, x, weight, NULL, eps);
}

nv_array *nv_fast_layer_norm(const nv_array *x, const nv_array *weight, const nv_array *bias,
                             double eps) {
  return norm(NV__PRIM_FAST_LAYER_NORM, x, weight, bias, eps);
}

/* y * w + b in dt, each when given; consumes y. */
static nv_array *affine(nv_array *y, const nv_array *w, const nv_array *b, nv_dtype dt) {
  y = nv__then(y, nv_astype(y, dt));
  if (w) {
    nv_array *wc = nv_astype(w, dt);
    y = nv__then(y, nv_multiply(y, wc));
    nv_release(wc);
  }
  if (b) {
    nv_array *bc = nv_astype(b, dt);
    y = nv__then(y, nv_add(y, bc));
    nv_release(bc);
  }
  return y;
}

/* rsqrt(mean(v, last axis) + eps), keeping the axis; consumes v. */
static nv_array *inv_root_mean(nv_array *v, double eps) {
  int axis = nv__out(v)->ndim - 1;
  v = nv__then(v, nv_mean(v, &axis, 1, true));
  v = nv__then(v, nv_add_scalar(v, eps));
  return nv__then(v, nv_rsqrt(v));
}

nv_array *nv__fast_rms_composed(const nv_array *x, const nv_array *w, double eps, nv_dtype dt) {
  nv_array *xf = nv_astype(x, nv__fast_compute_type(dt));
  nv_array *r = inv_root_mean(nv_square(xf), eps);
  nv_array *y = nv_multiply(xf, r);
  nv_release(xf);
  nv_release(r);
  return affine(y, w, NULL, dt);
}

nv_array *nv__fast_layer_composed(const nv_array *x, const nv_array *w, const nv_array *b,
                                  double eps, nv_dtype dt) {
  nv_array *xf = nv_astype(x, nv__fast_compute_type(dt));
  int axis = nv__out(xf)->ndim - 1;
  nv_array *mu = nv_mean(xf, &axis, 1, true);
  nv_array *xc = nv_subtract(xf, mu);
  nv_release(xf);
  nv_release(mu);
  nv_array *r = inv_root_mean(nv_square(xc), eps);
  nv_array *y = nv_multiply(xc, r);
  nv_release(xc);
  nv_release(r);
  return affine(y, w, b, dt);
}

/* ---- rope ---- */

nv_array *nv__fast_rope_node(const nv_array *x, const nv_array *offset, const nv_array *freqs,
                             const nv__fast_rope_params *p) {
  nv_dtype dt = nv__out(x)->dtype;
  nv__scope_suspend();
  nv_array *in[3];
  int n = 0;
  in[n++] = nv__fast_prepared(x, dt);
  in[n++] = nv__fast_prepared(offset, NV_DTYPE_INT32);
  if (p->has_freqs) in[n++] = nv__fast_prepared(freqs, nv__fast_compute_type(dt));
  nv_array *f = nv__op_check("rope", (const nv_array *const *)in, n);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in[0]);
    node = nv__op_node(NV__PRIM_FAST_ROPE, in, n, dt, o->shape, o->ndim, sizeof *p);
    if (node) *(nv__fast_rope_params *)node->params = *p;
  }
  for (int i = 0; i < n; i++) nv_release(in[i]);
  nv__scope_resume();
  return f ? f : nv__op_finish("rope", node);
}

static bool is_integer(nv_dtype t) {
  return t != NV_DTYPE_BOOL && !nv__fast_real_float(t) && t != NV_DTYPE_COMPLEX64;
}

nv_array *nv_fast_rope(const nv_array *x, int dims, bool traditional, double base, double scale,
                       const nv_array *offset, const nv_array *freqs) {
  const nv_array *xs[3] = {x, offset, freqs};
  nv_array *f = nv__op_check("rope", xs, freqs ? 3 : 2);
  if (f) return f;
  const nv__output *o = nv__out(x), *of = nv__out(offset);
  char s[NV__SHAPE_BUF];
  if (o->ndim < 3)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope",
                        "input must have at least 3 dimensions but got input with %d dimensions",
                        o->ndim);
  if (!nv__fast_real_float(o->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "input must be a floating type but got %s",
                        nv_dtype_name(o->dtype));
  int d = o->shape[o->ndim - 1];
  if (dims <= 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "dims must be positive but got %d", dims);
  if (dims % 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "dims must be even but got %d", dims);
  if (dims > d)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope",
                        "dims must not exceed the input's last dimension (%d) but got %d", d, dims);
  bool has_base = !isnan(base);
  if (!has_base && !freqs)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "neither base nor freqs has a value");
  if (has_base && freqs)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "only one of base or freqs can have a value");
  if (freqs) {
    const nv__output *fq = nv__out(freqs);
    if (fq->ndim != 1 || fq->shape[0] != dims / 2)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope",
                          "freqs must be one dimensional with size %d but got shape %s", dims / 2,
                          nv__shape_str(fq->shape, fq->ndim, s, sizeof s));
    if (fq->dtype == NV_DTYPE_COMPLEX64 || fq->dtype == NV_DTYPE_BOOL)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "freqs must be real numbers but got %s",
                          nv_dtype_name(fq->dtype));
  }
  if (!is_integer(of->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope", "offset must be an integer but got type %s",
                        nv_dtype_name(of->dtype));
  if (of->ndim > 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope",
                        "offset must have at most one dimension but has shape %s",
                        nv__shape_str(of->shape, of->ndim, s, sizeof s));
  if (of->ndim == 1 && of->shape[0] != 1 && of->shape[0] != o->shape[0])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "rope",
                        "offset must be a scalar or vector with %d elements but has shape %s",
                        o->shape[0], nv__shape_str(of->shape, of->ndim, s, sizeof s));
  nv__fast_rope_params p = {.dims = dims,
                            .traditional = traditional,
                            .has_freqs = freqs != NULL,
                            .inverse = false,
                            .base = has_base ? base : 0,
                            .scale = scale};
  return nv__fast_rope_node(x, offset, freqs, &p);
}

/* The angles position * inv_freq of shape (k, 1, ..., 1, T, dims/2) in ct, rank `nd`: k is the
 * number of offsets (1 or the batch). Negated for the inverse rotation. */
static nv_array *rope_angles(const nv_array *offset, const nv_array *freqs,
                             const nv__fast_rope_params *p, int nd, int t, nv_dtype ct) {
  int half = p->dims / 2;
  nv_array *inv;
  if (p->has_freqs) {
    inv = nv_astype(freqs, ct);
    inv = nv__then(inv, nv_reciprocal(inv));
  } else {
    inv = nv_arange(0, half, 1, ct);
    inv = nv__then(inv, nv_multiply_scalar(inv, -2.0 * log(p->base) / p->dims));
    inv = nv__then(inv, nv_exp(inv));
  }
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = 1;
  shape[0] = (int)nv_array_size(offset);
  nv_array *off = nv_astype(offset, ct);
  off = nv__then(off, nv_reshape(off, shape, nd));
  int tshape[2] = {t, 1};
  nv_array *pos = nv_arange(0, t, 1, ct);
  pos = nv__then(pos, nv_reshape(pos, tshape, 2));
  pos = nv__then(pos, nv_add(pos, off));
  nv_release(off);
  pos = nv__then(pos, nv_multiply_scalar(pos, p->scale));
  nv_array *theta = nv_multiply(pos, inv);
  nv_release(pos);
  nv_release(inv);
  if (p->inverse) theta = nv__then(theta, nv_negative(theta));
  return theta;
}

/* x[..., start:stop:step] along the last axis. */
static nv_array *last_slice(const nv_array *x, int start, int stop, int step) {
  const nv__output *o = nv__out(x);
  int st[NV__MAX_DIMS], sp[NV__MAX_DIMS], sd[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) {
    st[i] = 0;
    sp[i] = o->shape[i];
    sd[i] = 1;
  }
  st[o->ndim - 1] = start;
  sp[o->ndim - 1] = stop;
  sd[o->ndim - 1] = step;
  return nv_slice(x, st, sp, sd, o->ndim);
}

nv_array *nv__fast_rope_composed(const nv_array *x, const nv_array *offset,
                                 const nv_array *freqs, const nv__fast_rope_params *p) {
  const nv__output *o = nv__out(x);
  nv_dtype dt = o->dtype, ct = nv__fast_compute_type(dt);
  int nd = o->ndim, d = o->shape[nd - 1], dims = p->dims, half = dims / 2;
  nv_array *theta = rope_angles(offset, freqs, p, nd, o->shape[nd - 2], ct);
  nv_array *c = nv_cos(theta), *s = nv_sin(theta);
  nv_release(theta);
  nv_array *xf = nv_astype(x, ct);
  nv_array *x1 = p->traditional ? last_slice(xf, 0, dims, 2) : last_slice(xf, 0, half, 1);
  nv_array *x2 = p->traditional ? last_slice(xf, 1, dims, 2) : last_slice(xf, half, dims, 1);
  nv_array *a = nv_multiply(x1, c), *b = nv_multiply(x2, s);
  nv_array *o1 = nv_subtract(a, b);
  nv_release(a);
  nv_release(b);
  a = nv_multiply(x1, s);
  b = nv_multiply(x2, c);
  nv_array *o2 = nv_add(a, b);
  nv_release(a);
  nv_release(b);
  nv_release(x1);
  nv_release(x2);
  nv_release(c);
  nv_release(s);
  nv_array *parts[3];
  int np = 0;
  if (p->traditional) {
    nv_array *pair[2] = {o1, o2};
    int shape[NV__MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i] = o->shape[i];
    shape[nd - 1] = dims;
    nv_array *st = nv_stack((const nv_array *const *)pair, 2, nd);
    parts[np++] = nv__then(st, nv_reshape(st, shape, nd));
    nv_release(o1);
    nv_release(o2);
  } else {
    parts[np++] = o1;
    parts[np++] = o2;
  }
  if (dims < d) parts[np++] = last_slice(xf, dims, d, 1);
  nv_release(xf);
  nv_array *y = np == 1 ? parts[0] : nv_concatenate((const nv_array *const *)parts, np, nd - 1);
  if (np > 1)
    for (int i = 0; i < np; i++) nv_release(parts[i]);
  return nv__then(y, nv_astype(y, dt));
}

/* ---- norm_vjp: the x gradient of the norms ---- */

nv_array *nv__fast_norm_vjp_node(const nv_array *x, const nv_array *w, const nv_array *g,
                                 const nv__fast_norm_params *p, nv_dtype dt) {
  nv__scope_suspend();
  nv_array *in[3];
  int n = 0;
  in[n++] = nv__fast_prepared(x, dt);
  if (p->has_weight) in[n++] = nv__fast_prepared(w, dt);
  in[n++] = nv__fast_prepared(g, dt);
  nv_array *f = nv__op_check("norm_vjp", (const nv_array *const *)in, n);
  nv__node *node = NULL;
  if (!f) {
    const nv__output *o = nv__out(in[0]);
    node = nv__op_node(NV__PRIM_FAST_NORM_VJP, in, n, dt, o->shape, o->ndim, sizeof *p);
    if (node) *(nv__fast_norm_params *)node->params = *p;
  }
  for (int i = 0; i < n; i++) nv_release(in[i]);
  nv__scope_resume();
  return f ? f : nv__op_finish("norm_vjp", node);
}

/* mean(v) over the last axis, kept; consumes v. */
static nv_array *row_mean(nv_array *v) {
  int axis = nv__out(v)->ndim - 1;
  return nv__then(v, nv_mean(v, &axis, 1, true));
}

nv_array *nv__fast_norm_vjp_composed(const nv_array *x, const nv_array *w, const nv_array *g,
                                     const nv__fast_norm_params *p, nv_dtype dt) {
  nv_dtype ct = nv__fast_compute_type(dt);
  nv_array *xc = nv_astype(x, ct), *gw = nv_astype(g, ct);
  if (w) {
    nv_array *wc = nv_astype(w, ct);
    gw = nv__then(gw, nv_multiply(gw, wc));
    nv_release(wc);
  }
  nv_array *c = NULL;
  if (p->layer) {
    nv_array *mu = row_mean(nv_retain(xc));
    xc = nv__then(xc, nv_subtract(xc, mu));
    nv_release(mu);
    c = row_mean(nv_retain(gw));
  }
  nv_array *r = inv_root_mean(nv_square(xc), p->eps);
  nv_array *s = row_mean(nv_multiply(gw, xc));
  nv_array *r3 = nv_multiply(r, r);
  r3 = nv__then(r3, nv_multiply(r3, r));
  s = nv__then(s, nv_multiply(s, r3));
  nv_release(r3);
  if (c) gw = nv__then(gw, nv_subtract(gw, c));
  nv_release(c);
  nv_array *a = nv_multiply(r, gw), *b = nv_multiply(xc, s);
  nv_array *dx = nv_subtract(a, b);
  nv_release(a);
  nv_release(b);
  nv_release(r);
  nv_release(s);
  nv_release(gw);
  nv_release(xc);
  return nv__then(dx, nv_astype(dx, dt));
}
