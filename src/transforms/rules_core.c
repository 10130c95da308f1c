/* vjp, jvp and vmap rules of the core primitives (src/ops/prims_core.h) and of the transforms
 * family's own (src/ops/prims_transforms.h). Rules compose op builders, so they are themselves
 * differentiable and batchable. */
#include "transforms/rule_decls.h"

static bool inexact(nv_dtype d) { return nv_issubdtype(d, NV_CATEGORY_INEXACT); }

/* Binary op by primitive. */
static nv_array *binary_op(int prim, const nv_array *a, const nv_array *b) {
  switch (prim) {
    case NV__PRIM_ADD: return nv_add(a, b);
    case NV__PRIM_SUBTRACT: return nv_subtract(a, b);
    case NV__PRIM_MULTIPLY: return nv_multiply(a, b);
    case NV__PRIM_DIVIDE: return nv_divide(a, b);
    case NV__PRIM_MAXIMUM: return nv_maximum(a, b);
    default: return nv_minimum(a, b);
  }
}

/* Unary op by primitive, with the node's parameters (output dtype). */
static nv_array *unary_op(const nv__node *n, const nv_array *x) {
  nv_dtype dt = n->out[0].dtype;
  switch (n->prim) {
    case NV__PRIM_ASTYPE: return nv_astype(x, dt);
    case NV__PRIM_COPY: return nv_copy(x);
    case NV__PRIM_TO_FP8: return nv_to_fp8(x);
    case NV__PRIM_FROM_FP8: return nv_from_fp8(x, dt);
    case NV__PRIM_NEGATIVE: return nv_negative(x);
    case NV__PRIM_ABS: return nv_abs(x);
    case NV__PRIM_EXP: return nv_exp(x);
    case NV__PRIM_LOG: return nv_log(x);
    case NV__PRIM_SQRT: return nv_sqrt(x);
    default: return nv_stop_gradient(x);
  }
}

/* Takes over `a`, returns op(a, b). */
static nv_array *take_bin(nv_array *a, nv_array *(*op)(const nv_array *, const nv_array *),
                          const nv_array *b) {
  nv_array *r = op(a, b);
  nv_release(a);
  return r;
}

/* `g` reduced to the shape of `x` (taken over). */
static nv_array *reduce_to(nv_array *g, const nv_array *x) {
  nv_array *r = nv__tf_unbroadcast(g, meta(x)->shape, meta(x)->ndim);
  nv_release(g);
  return r;
}

/* `t` broadcast to the shape of `x` (taken over). */
static nv_array *bcast_to(nv_array *t, const nv_array *x) {
  if (nv__tf_same_shape(t, x)) return t;
  nv_array *r = nv_broadcast_to(t, meta(x)->shape, meta(x)->ndim);
  nv_release(t);
  return r;
}

/* Adds two possibly-NULL terms (taken over). */
static nv_array *add_terms(nv_array *a, nv_array *b) {
  if (!a) return b;
  if (!b) return a;
  nv_array *r = nv_add(a, b);
  nv_release(a);
  nv_release(b);
  return r;
}

/* sign(x) in x's dtype: 1, 0 or -1 (0 at 0 and for NaN). */
static nv_array *sign_of(const nv_array *x) {
  nv_array *zero = nv_zeros(NULL, 0, meta(x)->dtype);
  nv_array *gt = nv__tf_compare(x, zero, NV__CMP_GT), *lt = nv__tf_compare(x, zero, NV__CMP_LT);
  nv_array *pos = nv_astype(gt, meta(x)->dtype), *neg = nv_astype(lt, meta(x)->dtype);
  nv_array *r = meta(x)->dtype == NV_DTYPE_BOOL ? nv_retain(pos) : nv_subtract(pos, neg);
  nv_release(zero);
  nv_release(gt);
  nv_release(lt);
  nv_release(pos);
  nv_release(neg);
  return r;
}

/* The masks of maximum / minimum for input `arg` (MLX: ties go to the second input). */
static nv_array *minmax_mask(const nv__node *n, const nv_array *a, const nv_array *b, int arg) {
  bool max = n->prim == NV__PRIM_MAXIMUM;
  int op = arg == 0 ? (max ? NV__CMP_GT : NV__CMP_LT) : (max ? NV__CMP_LE : NV__CMP_GE);
  return nv__tf_compare(a, b, op);
}

/* conj(z) / |z| for complex z (0 where z = 0, as MLX), r = |z|: abs' derivative is the real
 * part of this times dz, so its vjp (the transpose convention of the rules) is cot times it and
 * its jvp the real part of it times the tangent. */
static nv_array *abs_unit(const nv_array *z, const nv_array *r) {
  nv_array *zero = nv_equal_scalar(r, 0.0), *one = nv_ones(NULL, 0, meta(r)->dtype);
  nv_array *safe = nv_where(zero, one, r), *cz = nv_conjugate(z);
  nv_array *u = nv_divide(cz, safe);
  nv_release(zero);
  nv_release(one);
  nv_release(safe);
  nv_release(cz);
  return u;
}

/* ---- vjp ---- */

VJP(vjp_none) { return NV_OK; }

VJP(vjp_identity) {
  if (want[0]) grad[0] = nv_retain(cot[0]);
  return NV_OK;
}

VJP(vjp_astype) {
  if (want[0] && inexact(meta(in[0])->dtype) && inexact(meta(out[0])->dtype))
    grad[0] = nv_astype(cot[0], meta(in[0])->dtype);
  return NV_OK;
}

VJP(vjp_reshape) {
  if (want[0]) grad[0] = nv_reshape(cot[0], meta(in[0])->shape, meta(in[0])->ndim);
  return NV_OK;
}

VJP(vjp_transpose) {
  const nv__view_params *p = n->params;
  int inv[NV__MAX_DIMS];
  for (int i = 0; i < p->ndim; i++) inv[p->axes[i]] = i;
  if (want[0]) grad[0] = nv_transpose(cot[0], inv, p->ndim);
  return NV_OK;
}

VJP(vjp_broadcast) {
  if (want[0]) grad[0] = nv__tf_unbroadcast(cot[0], meta(in[0])->shape, meta(in[0])->ndim);
  return NV_OK;
}

VJP(vjp_slice) {
  const nv__view_params *p = n->params;
  int nd = meta(in[0])->ndim;
  if (!want[0]) return NV_OK;
  nv_array *z = nv_zeros_like(in[0]);
  grad[0] = nv__tf_slice_update(z, cot[0], p->axes, p->axes + nd, meta(out[0])->shape);
  nv_release(z);
  return NV_OK;
}

static nv_array *as_strided_vjp(const nv_array *cot, const int *shape, int ndim,
                                const int64_t *strides, int64_t offset);

VJP(vjp_as_strided) {
  const nv__view_params *p = n->params;
  if (want[0])
    grad[0] = as_strided_vjp(cot[0], meta(in[0])->shape, meta(in[0])->ndim, meta(out[0])->strides,
                             p->delta);
  return NV_OK;
}

VJP(vjp_slice_update) {
  const nv__slice_update_params *p = n->params;
  const int *start = p->data, *step = p->data + p->ndim, *len = p->data + 2 * p->ndim;
  if (want[0]) {
    nv_array *z = nv_zeros(len, p->ndim, meta(cot[0])->dtype);
    grad[0] = nv__tf_slice_update(cot[0], z, start, step, len);
    nv_release(z);
  }
  if (want[1]) grad[1] = reduce_to(nv__tf_slice(cot[0], start, step, len), in[1]);
  return NV_OK;
}

VJP(vjp_negative) {
  if (want[0]) grad[0] = nv_negative(cot[0]);
  return NV_OK;
}

VJP(vjp_abs) {
  if (!want[0]) return NV_OK;
  bool cplx = meta(in[0])->dtype == NV_DTYPE_COMPLEX64;
  nv_array *s = cplx ? abs_unit(in[0], out[0]) : sign_of(in[0]);
  grad[0] = nv_multiply(cot[0], s);
  nv_release(s);
  return NV_OK;
}

VJP(vjp_exp) {
  if (want[0]) grad[0] = nv_multiply(cot[0], out[0]);
  return NV_OK;
}

VJP(vjp_log) {
  if (want[0]) grad[0] = nv_divide(cot[0], in[0]);
  return NV_OK;
}

VJP(vjp_sqrt) {
  if (!want[0]) return NV_OK;
  nv_array *two = nv_multiply_scalar(out[0], 2.0);
  grad[0] = nv_divide(cot[0], two);
  nv_release(two);
  return NV_OK;
}

VJP(vjp_add) {
  for (int i = 0; i < 2; i++) {
    if (!want[i]) continue;
    nv_array *g = n->prim == NV__PRIM_SUBTRACT && i == 1 ? nv_negative(cot[0]) : nv_retain(cot[0]);
    grad[i] = reduce_to(g, in[i]);
  }
  return NV_OK;
}

VJP(vjp_multiply) {
  if (want[0]) grad[0] = reduce_to(nv_multiply(cot[0], in[1]), in[0]);
  if (want[1]) grad[1] = reduce_to(nv_multiply(cot[0], in[0]), in[1]);
  return NV_OK;
}

VJP(vjp_divide) {
  if (want[0]) grad[0] = reduce_to(nv_divide(cot[0], in[1]), in[0]);
  if (want[1]) {
    nv_array *t = take_bin(nv_multiply(cot[0], out[0]), nv_divide, in[1]);
    grad[1] = reduce_to(nv_negative(t), in[1]);
    nv_release(t);
  }
  return NV_OK;
}

VJP(vjp_minmax) {
  for (int i = 0; i < 2; i++) {
    if (!want[i]) continue;
    nv_array *m = minmax_mask(n, in[0], in[1], i);
    grad[i] = reduce_to(nv__tf_mask(cot[0], m), in[i]);
    nv_release(m);
  }
  return NV_OK;
}

VJP(vjp_sum) {
  const nv__reduce_params *p = n->params;
  if (!want[0]) return NV_OK;
  nv_array *c = p->keepdims || p->naxes == 0 ? nv_retain(cot[0])
                                              : nv_expand_dims(cot[0], p->axes, p->naxes);
  grad[0] = nv_broadcast_to(c, meta(in[0])->shape, meta(in[0])->ndim);
  nv_release(c);
  return NV_OK;
}

VJP(vjp_add_multiply) {
  for (int i = 0; i < 2; i++) {
    if (!want[i]) continue;
    nv_array *g = cot[0] ? nv_retain(cot[0]) : NULL;
    if (cot[1]) g = add_terms(g, nv_multiply(cot[1], in[1 - i]));
    grad[i] = g;
  }
  return NV_OK;
}

VJP(vjp_as_strided_vjp) {
  /* The adjoint of the scatter is the view again. */
  if (want[0]) {
    const int64_t *strides = (const int64_t *)n->params + 1;
    grad[0] = nv_as_strided(cot[0], meta(in[0])->shape, meta(in[0])->ndim, strides,
                            *(const int64_t *)n->params);
  }
  return NV_OK;
}

/* ---- jvp ---- */

JVP(jvp_none) { return NV_OK; }

JVP(jvp_identity) {
  ot[0] = nv_retain(tan[0]);
  return NV_OK;
}

JVP(jvp_astype) {
  if (inexact(meta(in[0])->dtype) && inexact(meta(out[0])->dtype))
    ot[0] = nv_astype(tan[0], meta(out[0])->dtype);
  return NV_OK;
}

JVP(jvp_reshape) {
  ot[0] = nv_reshape(tan[0], meta(out[0])->shape, meta(out[0])->ndim);
  return NV_OK;
}

JVP(jvp_transpose) {
  const nv__view_params *p = n->params;
  ot[0] = nv_transpose(tan[0], p->axes, p->ndim);
  return NV_OK;
}

JVP(jvp_broadcast) {
  ot[0] = nv_broadcast_to(tan[0], meta(out[0])->shape, meta(out[0])->ndim);
  return NV_OK;
}

JVP(jvp_slice) {
  const nv__view_params *p = n->params;
  int nd = meta(in[0])->ndim;
  ot[0] = nv__tf_slice(tan[0], p->axes, p->axes + nd, meta(out[0])->shape);
  return NV_OK;
}

JVP(jvp_as_strided) {
  const nv__view_params *p = n->params;
  const nv__output *o = meta(out[0]);
  ot[0] = nv_as_strided(tan[0], o->shape, o->ndim, o->strides, p->delta);
  return NV_OK;
}

JVP(jvp_slice_update) {
  const nv__slice_update_params *p = n->params;
  nv_array *b = tan[0] ? nv_retain(tan[0]) : nv_zeros_like(in[0]);
  nv_array *u = tan[1] ? nv_retain(tan[1]) : nv_zeros_like(in[1]);
  ot[0] = nv__tf_slice_update(b, u, p->data, p->data + p->ndim, p->data + 2 * p->ndim);
  nv_release(b);
  nv_release(u);
  return NV_OK;
}

JVP(jvp_negative) {
  ot[0] = nv_negative(tan[0]);
  return NV_OK;
}

JVP(jvp_abs) {
  if (meta(in[0])->dtype == NV_DTYPE_COMPLEX64) {
    nv_array *u = abs_unit(in[0], out[0]), *p = nv_multiply(tan[0], u);
    ot[0] = nv_real(p);
    nv_release(u);
    nv_release(p);
    return NV_OK;
  }
  nv_array *s = sign_of(in[0]);
  ot[0] = nv_multiply(tan[0], s);
  nv_release(s);
  return NV_OK;
}

JVP(jvp_exp) {
  ot[0] = nv_multiply(tan[0], out[0]);
  return NV_OK;
}

JVP(jvp_log) {
  ot[0] = nv_divide(tan[0], in[0]);
  return NV_OK;
}

JVP(jvp_sqrt) {
  nv_array *two = nv_multiply_scalar(out[0], 2.0);
  ot[0] = nv_divide(tan[0], two);
  nv_release(two);
  return NV_OK;
}

JVP(jvp_add) {
  nv_array *b = NULL;
  if (tan[1]) b = n->prim == NV__PRIM_SUBTRACT ? nv_negative(tan[1]) : nv_retain(tan[1]);
  ot[0] = bcast_to(add_terms(tan[0] ? nv_retain(tan[0]) : NULL, b), out[0]);
  return NV_OK;
}

JVP(jvp_multiply) {
  nv_array *a = tan[0] ? nv_multiply(tan[0], in[1]) : NULL;
  nv_array *b = tan[1] ? nv_multiply(in[0], tan[1]) : NULL;
  ot[0] = bcast_to(add_terms(a, b), out[0]);
  return NV_OK;
}

JVP(jvp_divide) {
  nv_array *a = tan[0] ? nv_divide(tan[0], in[1]) : NULL;
  nv_array *b = NULL;
  if (tan[1]) {
    nv_array *t = take_bin(nv_multiply(tan[1], out[0]), nv_divide, in[1]);
    b = nv_negative(t);
    nv_release(t);
  }
  ot[0] = bcast_to(add_terms(a, b), out[0]);
  return NV_OK;
}

JVP(jvp_minmax) {
  nv_array *acc = NULL;
  for (int i = 0; i < 2; i++) {
    if (!tan[i]) continue;
    nv_array *m = minmax_mask(n, in[0], in[1], i);
    acc = add_terms(acc, nv__tf_mask(tan[i], m));
    nv_release(m);
  }
  ot[0] = bcast_to(acc, out[0]);
  return NV_OK;
}

JVP(jvp_sum) {
  const nv__reduce_params *p = n->params;
  ot[0] = nv_sum(tan[0], p->axes, p->naxes, p->keepdims);
  return NV_OK;
}

JVP(jvp_add_multiply) {
  nv_array *ta = tan[0] ? nv_retain(tan[0]) : nv_zeros_like(in[0]);
  nv_array *tb = tan[1] ? nv_retain(tan[1]) : nv_zeros_like(in[1]);
  ot[0] = nv_add(ta, tb);
  ot[1] = add_terms(nv_multiply(ta, in[1]), nv_multiply(in[0], tb));
  nv_release(ta);
  nv_release(tb);
  return NV_OK;
}

JVP(jvp_as_strided_vjp) {
  const int64_t *pp = n->params;
  ot[0] = as_strided_vjp(tan[0], meta(out[0])->shape, meta(out[0])->ndim, pp + 1, pp[0]);
  return NV_OK;
}

/* ---- vmap ---- */

/* `x` batched at `ax` moved to the front, or, unbatched, broadcast to a batch of `b` in front. */
static nv_array *materialize(const nv_array *x, int ax, int b) {
  if (ax >= 0) return nv__tf_moveaxis(x, ax, 0);
  const nv__output *o = meta(x);
  int shape[NV__MAX_DIMS];
  shape[0] = b;
  for (int i = 0; i < o->ndim; i++) shape[i + 1] = o->shape[i];
  return nv_broadcast_to(x, shape, o->ndim + 1);
}

/* A shape with the batch size in front. */
static void batched_shape(int b, const nv__output *o, int *shape) {
  shape[0] = b;
  for (int i = 0; i < o->ndim; i++) shape[i + 1] = o->shape[i];
}

VMAP(vmap_unary) {
  out[0] = unary_op(n, in[0]);
  oax[0] = axes[0];
  return NV_OK;
}

VMAP(vmap_binary) {
  int r = n->out[0].ndim;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  out[0] = binary_op(n->prim, a, b);
  oax[0] = 0;
  nv_release(a);
  nv_release(b);
  return NV_OK;
}

VMAP(vmap_full) {
  int b = nv__tf_batch_size(in, axes, 1), shape[NV__MAX_DIMS];
  batched_shape(b, &n->out[0], shape);
  nv_array *v = nv__tf_front(in[0], axes[0], n->out[0].ndim);
  out[0] = nv_full_array(shape, n->out[0].ndim + 1, v, n->out[0].dtype);
  oax[0] = 0;
  nv_release(v);
  return NV_OK;
}

VMAP(vmap_reshape) {
  int b = nv__tf_batch_size(in, axes, 1), shape[NV__MAX_DIMS];
  batched_shape(b, &n->out[0], shape);
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_reshape(x, shape, n->out[0].ndim + 1);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_transpose) {
  const nv__view_params *p = n->params;
  int perm[NV__MAX_DIMS];
  perm[0] = 0;
  for (int i = 0; i < p->ndim; i++) perm[i + 1] = p->axes[i] + 1;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_transpose(x, perm, p->ndim + 1);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_broadcast) {
  int b = nv__tf_batch_size(in, axes, 1), shape[NV__MAX_DIMS];
  batched_shape(b, &n->out[0], shape);
  nv_array *x = nv__tf_front(in[0], axes[0], n->out[0].ndim);
  out[0] = nv_broadcast_to(x, shape, n->out[0].ndim + 1);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_slice) {
  const nv__view_params *p = n->params;
  int nd = meta(in[0])->ndim - 1, b = nv__tf_batch_size(in, axes, 1);
  int start[NV__MAX_DIMS], step[NV__MAX_DIMS], len[NV__MAX_DIMS];
  start[0] = 0;
  step[0] = 1;
  batched_shape(b, &n->out[0], len);
  for (int i = 0; i < nd; i++) {
    start[i + 1] = p->axes[i];
    step[i + 1] = p->axes[nd + i];
  }
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv__tf_slice(x, start, step, len);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_squeeze) {
  const nv__view_params *p = n->params;
  int nd = meta(in[0])->ndim - 1, drop[NV__MAX_DIMS], nd_drop = 0;
  for (int i = 0, k = 0; i < nd; i++) {
    if (k < p->ndim && p->axes[k] == i) k++;
    else drop[nd_drop++] = i + 1;
  }
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_squeeze(x, drop, nd_drop);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_expand_dims) {
  const nv__view_params *p = n->params;
  int ins[NV__MAX_DIMS];
  for (int i = 0; i < p->ndim; i++) ins[i] = p->axes[i] + 1;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_expand_dims(x, ins, p->ndim);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_as_strided) {
  const nv__view_params *p = n->params;
  const nv__output *o = &n->out[0];
  int b = nv__tf_batch_size(in, axes, 1), shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  batched_shape(b, o, shape);
  st[0] = n->inputs[0].node->out[n->inputs[0].idx].size;
  for (int i = 0; i < o->ndim; i++) st[i + 1] = o->strides[i];
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_as_strided(x, shape, o->ndim + 1, st, p->delta);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_slice_update) {
  const nv__slice_update_params *p = n->params;
  int nd = p->ndim, b = nv__tf_batch_size(in, axes, 2);
  int start[NV__MAX_DIMS], step[NV__MAX_DIMS], len[NV__MAX_DIMS];
  start[0] = 0;
  step[0] = 1;
  len[0] = b;
  for (int i = 0; i < nd; i++) {
    start[i + 1] = p->data[i];
    step[i + 1] = p->data[nd + i];
    len[i + 1] = p->data[2 * nd + i];
  }
  nv_array *base = materialize(in[0], axes[0], b);
  nv_array *upd = nv__tf_front(in[1], axes[1], nd);
  out[0] = nv__tf_slice_update(base, upd, start, step, len);
  oax[0] = 0;
  nv_release(base);
  nv_release(upd);
  return NV_OK;
}

VMAP(vmap_sum) {
  const nv__reduce_params *p = n->params;
  int ax[NV__MAX_DIMS];
  for (int i = 0; i < p->naxes; i++) ax[i] = p->axes[i] + 1;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_sum(x, ax, p->naxes, p->keepdims);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

VMAP(vmap_add_multiply) {
  int b = nv__tf_batch_size(in, axes, 2);
  nv_array *a = materialize(in[0], axes[0], b), *c = materialize(in[1], axes[1], b);
  nv_status s = nv__test_add_multiply(a, c, &out[0], &out[1]);
  oax[0] = oax[1] = 0;
  nv_release(a);
  nv_release(c);
  return s;
}

VMAP(vmap_as_strided_vjp) {
  const int64_t *pp = n->params;
  const nv__output *o = &n->out[0];
  int b = nv__tf_batch_size(in, axes, 1), shape[NV__MAX_DIMS], nd = meta(in[0])->ndim;
  int64_t st[NV__MAX_DIMS];
  batched_shape(b, o, shape);
  st[0] = o->size;
  for (int i = 0; i < nd - 1; i++) st[i + 1] = pp[1 + i];
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = as_strided_vjp(x, shape, o->ndim + 1, st, pp[0]);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

/* ---- as_strided's adjoint ---- */

/* The scatter-sum of `cot` (a view of `shape` with `strides` at `offset`) into a zero
 * row-contiguous array of `shape`. Parameters: offset, then one stride per axis of cot. */
static nv_array *as_strided_vjp(const nv_array *cot, const int *shape, int ndim,
                                const int64_t *strides, int64_t offset) {
  nv_array *f = nv__op_check("as_strided_vjp", &cot, 1);
  if (f) return f;
  int cnd = meta(cot)->ndim;
  nv_array *in[1] = {(nv_array *)cot};
  nv__node *n = nv__op_node(NV__PRIM_AS_STRIDED_VJP, in, 1, meta(cot)->dtype, shape, ndim,
                            (size_t)(cnd + 1) * sizeof(int64_t));
  if (n) {
    int64_t *p = n->params;
    p[0] = offset;
    for (int i = 0; i < cnd; i++) p[1 + i] = strides[i];
  }
  return nv__op_finish("as_strided_vjp", n);
}

/* ---- Registration ---- */

static void set(nv__prim_rule *r, int prim, nv__vjp_rule vjp, nv__jvp_rule jvp,
                nv__vmap_rule vmap) {
  r[prim] = (nv__prim_rule){vjp, jvp, vmap};
}

void nv__rules_register_core(nv__prim_rule *r) {
  set(r, NV__PRIM_FULL, vjp_none, jvp_none, vmap_full);
  set(r, NV__PRIM_ASTYPE, vjp_astype, jvp_astype, vmap_unary);
  set(r, NV__PRIM_COPY, vjp_identity, jvp_identity, vmap_unary);
  set(r, NV__PRIM_TO_FP8, vjp_none, jvp_none, vmap_unary);
  set(r, NV__PRIM_FROM_FP8, vjp_none, jvp_none, vmap_unary);
  set(r, NV__PRIM_RESHAPE, vjp_reshape, jvp_reshape, vmap_reshape);
  set(r, NV__PRIM_TRANSPOSE, vjp_transpose, jvp_transpose, vmap_transpose);
  set(r, NV__PRIM_BROADCAST, vjp_broadcast, jvp_broadcast, vmap_broadcast);
  set(r, NV__PRIM_SLICE, vjp_slice, jvp_slice, vmap_slice);
  set(r, NV__PRIM_SQUEEZE, vjp_reshape, jvp_reshape, vmap_squeeze);
  set(r, NV__PRIM_EXPAND_DIMS, vjp_reshape, jvp_reshape, vmap_expand_dims);
  set(r, NV__PRIM_AS_STRIDED, vjp_as_strided, jvp_as_strided, vmap_as_strided);
  set(r, NV__PRIM_SLICE_UPDATE, vjp_slice_update, jvp_slice_update, vmap_slice_update);
  set(r, NV__PRIM_NEGATIVE, vjp_negative, jvp_negative, vmap_unary);
  set(r, NV__PRIM_ABS, vjp_abs, jvp_abs, vmap_unary);
  set(r, NV__PRIM_EXP, vjp_exp, jvp_exp, vmap_unary);
  set(r, NV__PRIM_LOG, vjp_log, jvp_log, vmap_unary);
  set(r, NV__PRIM_SQRT, vjp_sqrt, jvp_sqrt, vmap_unary);
  set(r, NV__PRIM_ADD, vjp_add, jvp_add, vmap_binary);
  set(r, NV__PRIM_SUBTRACT, vjp_add, jvp_add, vmap_binary);
  set(r, NV__PRIM_MULTIPLY, vjp_multiply, jvp_multiply, vmap_binary);
  set(r, NV__PRIM_DIVIDE, vjp_divide, jvp_divide, vmap_binary);
  set(r, NV__PRIM_MAXIMUM, vjp_minmax, jvp_minmax, vmap_binary);
  set(r, NV__PRIM_MINIMUM, vjp_minmax, jvp_minmax, vmap_binary);
  set(r, NV__PRIM_SUM, vjp_sum, jvp_sum, vmap_sum);
  set(r, NV__PRIM_TEST_ADD_MULTIPLY, vjp_add_multiply, jvp_add_multiply, vmap_add_multiply);
}

void nv__rules_register_transforms(nv__prim_rule *r) {
  set(r, NV__PRIM_STOP_GRADIENT, vjp_none, jvp_none, vmap_unary);
  set(r, NV__PRIM_AS_STRIDED_VJP, vjp_as_strided_vjp, jvp_as_strided_vjp, vmap_as_strided_vjp);
  nv__rules_register_custom(r);
}
