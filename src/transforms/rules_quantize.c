/* vjp, jvp and vmap rules of the quantize family's primitives (src/ops/prims_quantize.h).
 *
 * Decided rules:
 * - quantized_matmul: the cotangent of x is quantized_matmul(cot, w, scales, biases) with
 *   `transpose` flipped (MLX's rule); its jvp in x is quantized_matmul of the tangent. In the
 *   affine mode the scales and biases have MLX's vjp (qmm_scales_biases_vjp); in the fp modes
 *   their vjp is an invalid-argument error (MLX's ValueError); the quantized matrix has none
 *   (an error naming the op, as MLX).
 * - quantize and dequantize have no derivatives (an error naming the op; MLX has none either).
 * - gather_qmm: the cotangent of x is gather_qmm(cot, w, scales, biases) of the same rhs
 *   indices with `transpose` flipped, scatter-added into x's batches at the lhs indices (MLX's
 *   rule); its jvp in x is gather_qmm of the tangent; the affine scales and biases have
 *   quantized_matmul's vjp over each pair's dequantized-matrix gradient, scatter-added into
 *   the experts at the rhs indices (an invalid-argument error in the fp modes); none for w,
 *   none needed for the integer indices. vmap flattens the map into the
 *   pairs: a batched operand's V copies become V * Bx (V * E) batches and each map entry's
 *   indices move by v * Bx (v * E); an index out of range stays out of range (it is sent past
 *   the end).
 * - vmap: the batch goes in front of every batched operand; the unbatched ones among w, scales
 *   and biases are broadcast along it, and the builder's batch broadcasting does the rest.
 *   quantize and dequantize map over the batch as over any leading axis. */
#include "ops/quantize_checks.h"
#include "ops/quantize_params.h"
#include "transforms/rule_decls.h"

static const char *mode_name(int m) {
  static const char *const names[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
  return names[m];
}

static nv_array *qmm_of(const nv__node *n, const nv_array *x, nv_array *const *in, bool flip) {
  const nv__quant_params *p = n->params;
  bool affine = p->mode == NV__QMODE_AFFINE;
  return nv_quantized_matmul(x, in[1], in[2], affine ? in[3] : NULL,
                             flip ? !p->transpose : p->transpose, p->group_size, p->bits,
                             mode_name(p->mode));
}

/* The operands in[0..k) with their batch in front, the unbatched ones broadcast along it. */
static void front_all(nv_array *const *in, const int *axes, int k, int rank, nv_array **v) {
  int V = 1;
  for (int i = 0; i < k; i++) {
    v[i] = nv__tf_front(in[i], axes[i], rank);
    if (axes[i] >= 0) V = meta(v[i])->shape[0];
  }
  for (int i = 0; i < k; i++) {
    if (axes[i] >= 0) continue;
    const nv__output *o = meta(v[i]);
    int shape[NV__MAX_DIMS];
    shape[0] = V;
    memcpy(shape + 1, o->shape, sizeof(int) * (size_t)o->ndim);
    nv_array *b = nv_broadcast_to(v[i], shape, o->ndim + 1);
    nv_release(v[i]);
    v[i] = b;
  }
}

/* The cotangents of an affine quantized_matmul's scales and biases (MLX's rule): the gradient
 * of the dequantized matrix, dw = cot^T x (x^T cot without transpose) summed over the batch
 * axes it was broadcast along, grouped as the scales are; the biases' is each group's sum, the
 * scales' each group's sum weighted by the quantized values (w dequantized with unit scales
 * and zero biases). */
/* The scales' and biases' cotangents (grad[2], grad[3] where wanted) from dw, the gradient of
 * the dequantized matrix (w's shape with its last axis unpacked, as scales' times the group). */
static nv_status sb_from_dw(const nv__quant_params *p, nv_array *const *in, const nv_array *dw,
                            const bool *want, nv_array **grad) {
  const nv__output *so = meta(in[2]);
  int nd = so->ndim, gs = p->group_size, last = -1, gshape[NV__MAX_DIMS + 1];
  memcpy(gshape, so->shape, sizeof(int) * (size_t)nd);
  gshape[nd] = gs;
  nv_array *dwg = nv_reshape(dw, gshape, nd + 1);
  nv_status st = nv_array_status(dwg);
  if (st == NV_OK && want[3]) {
    nv_array *b = nv_sum(dwg, &last, 1, false);
    grad[3] = nv_astype(b, meta(in[3])->dtype);
    nv_release(b);
  }
  if (st == NV_OK && want[2]) {
    nv_array *one = nv_ones_like(in[2]), *zero = nv_zeros_like(in[3]);
    nv_array *q = nv_dequantize(in[1], one, zero, gs, p->bits, "affine", meta(dwg)->dtype);
    nv_array *qg = nv_reshape(q, gshape, nd + 1);
    nv_array *m = nv_multiply(dwg, qg);
    nv_array *sm = nv_sum(m, &last, 1, false);
    grad[2] = nv_astype(sm, so->dtype);
    nv_release(one), nv_release(zero), nv_release(q), nv_release(qg), nv_release(m);
    nv_release(sm);
  }
  nv_release(dwg);
  return st;
}

/* The gradient of the dequantized matrix of each (x, cot) pair: cot^T x with transpose, x^T cot
 * without. */
static nv_array *dw_of(bool transpose, const nv_array *x, const nv_array *ct) {
  nv_array *t = nv_swapaxes(transpose ? ct : x, -1, -2);
  nv_array *r = transpose ? nv_matmul(t, x) : nv_matmul(t, ct);
  nv_release(t);
  return r;
}

/* The cotangents of an affine quantized_matmul's scales and biases (MLX's rule): the gradient
 * of the dequantized matrix summed over the batch axes it was broadcast along, grouped as the
 * scales are; the biases' is each group's sum, the scales' each group's sum weighted by the
 * quantized values (w dequantized with unit scales and zero biases). */
static nv_status qmm_scales_biases_vjp(const nv__node *n, nv_array *const *in, const nv_array *ct,
                                       const bool *want, nv_array **grad) {
  const nv__quant_params *p = n->params;
  const nv__output *so = meta(in[2]);
  int nd = so->ndim, wshape[NV__MAX_DIMS];
  memcpy(wshape, so->shape, sizeof(int) * (size_t)nd);
  wshape[nd - 1] *= p->group_size;
  nv_array *full = dw_of(p->transpose, in[0], ct);
  nv_array *dw = nv__tf_unbroadcast(full, wshape, nd);
  nv_status st = sb_from_dw(p, in, dw, want, grad);
  nv_release(full), nv_release(dw);
  return st;
}

VJP(vjp_qmm) {
  const nv__quant_params *p = n->params;
  if (want[1])
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "quantized_matmul: no vjp with respect to the quantized matrix");
  bool sb = want[2] || (n->ninputs > 3 && want[3]);
  if (sb && p->mode != NV__QMODE_AFFINE)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "quantized_matmul: no vjp with respect to the scales in the %s mode "
                         "(only the affine mode has one)", mode_name(p->mode));
  if (sb) {
    nv_status st = qmm_scales_biases_vjp(n, in, cot[0], want, grad);
    if (st != NV_OK) return st;
  }
  if (want[0]) grad[0] = qmm_of(n, cot[0], in, true);
  return NV_OK;
}

JVP(jvp_qmm) {
  for (int i = 1; i < n->ninputs; i++)
    if (tan[i])
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "quantized_matmul: no jvp with respect to the quantized matrix, its "
                           "scales or its biases");
  if (tan[0]) ot[0] = qmm_of(n, tan[0], in, false);
  return NV_OK;
}

VMAP(vmap_qmm) {
  nv_array *v[4] = {NULL, NULL, NULL, NULL};
  v[0] = nv__tf_front(in[0], axes[0], 3);
  bool wb = false;
  for (int i = 1; i < n->ninputs; i++) wb |= axes[i] >= 0;
  if (wb)
    front_all(in + 1, axes + 1, n->ninputs - 1, 3, v + 1);
  else
    for (int i = 1; i < n->ninputs; i++) v[i] = nv_retain(in[i]);
  out[0] = qmm_of(n, v[0], v, false);
  oax[0] = 0;
  for (int i = 0; i < n->ninputs; i++) nv_release(v[i]);
  return NV_OK;
}

VMAP(vmap_quantize) {
  const nv__quant_params *p = n->params;
  nv_array *w = nv__tf_front(in[0], axes[0], n->out[0].ndim);
  nv_vec *vec = nv_vec_new();
  nv_status st = vec ? nv_quantize(w, p->group_size, p->bits, mode_name(p->mode), vec)
                     : nv__set_error(NV_ERR_OUT_OF_MEMORY, "quantize: out of memory");
  nv_release(w);
  for (int i = 0; st == NV_OK && i < n->noutputs; i++) {
    out[i] = nv_retain(nv_vec_get(vec, (size_t)i));
    oax[i] = 0;
  }
  nv_vec_free(vec);
  return st;
}

VMAP(vmap_dequantize) {
  const nv__quant_params *p = n->params;
  nv_array *v[3] = {NULL, NULL, NULL};
  front_all(in, axes, n->ninputs, n->out[0].ndim, v);
  out[0] = nv_dequantize(v[0], v[1], n->ninputs > 2 ? v[2] : NULL, p->group_size, p->bits,
                         mode_name(p->mode), n->out[0].dtype);
  oax[0] = 0;
  for (int i = 0; i < n->ninputs; i++) nv_release(v[i]);
  return NV_OK;
}

/* gather_qmm's operands: x, w, scales, biases (NULL in the fp modes), lhs, rhs. */
static void gqmm_operands(const nv__node *n, nv_array *const *in, const nv_array **op) {
  bool affine = ((const nv__gather_qmm_params *)n->params)->q.mode == NV__QMODE_AFFINE;
  op[0] = in[0], op[1] = in[1], op[2] = in[2], op[3] = affine ? in[3] : NULL;
  op[4] = in[n->ninputs - 2], op[5] = in[n->ninputs - 1];
}

VJP(vjp_gqmm) {
  const nv__gather_qmm_params *gp = n->params;
  for (int i = 2; i < n->ninputs - 2; i++)
    if (want[i] && gp->q.mode != NV__QMODE_AFFINE)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "gather_qmm: no vjp with respect to the scales in the %s mode "
                           "(only the affine mode has one)", mode_name(gp->q.mode));
  if (want[1])
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "gather_qmm: no vjp with respect to the quantized matrix");
  const nv_array *op[6];
  gqmm_operands(n, in, op);
  if (gp->q.mode == NV__QMODE_AFFINE && (want[2] || want[3])) {
    /* Each pair's dequantized-matrix gradient (x at its lhs index against its cotangent),
     * summed into w's batches at the rhs indices, then grouped as quantized_matmul's. */
    const nv__output *so = meta(in[2]);
    int nd = so->ndim, wshape[NV__MAX_DIMS], one = 1, axis = 0;
    memcpy(wshape, so->shape, sizeof(int) * (size_t)nd);
    wshape[nd - 1] *= gp->q.group_size;
    nv_array *xs = nv_take(op[0], op[4], 0);
    nv_array *dwp = dw_of(gp->q.transpose, xs, cot[0]);
    nv_array *u = nv_expand_dims(dwp, &one, 1);
    nv_array *z = nv_zeros(wshape, nd, meta(dwp)->dtype);
    const nv_array *ia[1] = {op[5]};
    nv_array *dw = nv_scatter_add(z, ia, 1, u, &axis);
    nv_status st = sb_from_dw(&gp->q, in, dw, want, grad);
    nv_release(xs), nv_release(dwp), nv_release(u), nv_release(z), nv_release(dw);
    if (st != NV_OK) return st;
  }
  if (!want[0]) return NV_OK;
  nv__gather_qmm_params p = *(const nv__gather_qmm_params *)n->params;
  p.q.transpose = !p.q.transpose;
  int L = meta(op[5])->shape[0], one = 1, axis = 0;
  nv_array *pairs = nv_arange(0, L, 1, NV_DTYPE_INT64);
  nv_array *g = nv__gather_qmm3(cot[0], op[1], op[2], op[3], pairs, op[5], &p);
  nv_array *u = nv_expand_dims(g, &one, 1); /* (L, 1, M, K): the updates of axis 0 */
  nv_array *z = nv_zeros_like(in[0]);
  const nv_array *ia[1] = {op[4]};
  grad[0] = nv_scatter_add(z, ia, 1, u, &axis);
  nv_release(pairs), nv_release(g), nv_release(u), nv_release(z);
  return NV_OK;
}

JVP(jvp_gqmm) {
  for (int i = 1; i < n->ninputs - 2; i++)
    if (tan[i])
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "gather_qmm: no jvp with respect to the quantized matrix, its "
                           "scales or its biases");
  if (!tan[0]) return NV_OK;
  const nv_array *op[6];
  gqmm_operands(n, in, op);
  ot[0] = nv__gather_qmm3(tan[0], op[1], op[2], op[3], op[4], op[5], n->params);
  return NV_OK;
}

/* The (V, L) indices of one operand side under vmap: `idx` (batched along `iax` or not) with
 * negative entries wrapped by `size` and, when the operand itself is mapped, entry v moved by
 * v * size; out-of-range entries become V * size (out of range of the V * size batches). */
static nv_array *vmap_indices(const nv_array *idx, int iax, bool mapped, int V, int size) {
  nv_array *f = nv__tf_front(idx, iax, 1);
  int shape[2] = {V, meta(f)->shape[meta(f)->ndim - 1]}; /* f: (L,) or (V, L) */
  nv_array *c = nv_astype(f, NV_DTYPE_INT64), *b = nv_broadcast_to(c, shape, 2);
  nv_array *sz = nv_full(NULL, 0, size, NV_DTYPE_INT64), *zero = nv_zeros(NULL, 0, NV_DTYPE_INT64);
  nv_array *neg = nv_less(b, zero), *bs = nv_add(b, sz), *w = nv_where(neg, bs, b);
  nv_array *lo = nv_greater_equal(w, zero), *hi = nv_less(w, sz), *ok = nv_logical_and(lo, hi);
  nv_array *moved = nv_retain(w);
  if (mapped) {
    int col = 1;
    nv_array *v = nv_arange(0, V, 1, NV_DTYPE_INT64), *v1 = nv_expand_dims(v, &col, 1);
    nv_array *off = nv_multiply(v1, sz);
    nv_release(moved);
    moved = nv_add(w, off);
    nv_release(v), nv_release(v1), nv_release(off);
  }
  nv_array *past = nv_full(NULL, 0, (double)V * size, NV_DTYPE_INT64);
  nv_array *r = nv_where(ok, moved, past);
  nv_array *tmp[] = {f, c, b, sz, zero, neg, bs, w, lo, hi, ok, moved, past};
  for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) nv_release(tmp[i]);
  return r;
}

/* A mapped operand (V, B, r, c) as (V * B, r, c). */
static nv_array *merge_front(nv_array *x) {
  const nv__output *o = meta(x);
  int s[3] = {o->shape[0] * o->shape[1], o->shape[2], o->shape[3]};
  nv_array *r = nv_reshape(x, s, 3);
  nv_release(x);
  return r;
}

VMAP(vmap_gqmm) {
  const nv_array *op[6];
  gqmm_operands(n, in, op);
  int ni = n->ninputs, V = nv__tf_batch_size(in, axes, ni);
  int nw = ni - 3; /* w, scales (, biases) */
  bool wmapped = false;
  for (int i = 1; i <= nw; i++) wmapped |= axes[i] >= 0;
  nv_array *x = axes[0] >= 0 ? merge_front(nv__tf_front(in[0], axes[0], 3))
                             : nv_retain(in[0]);
  nv_array *wv[3] = {NULL, NULL, NULL};
  if (wmapped) {
    front_all(in + 1, axes + 1, nw, 3, wv);
    for (int i = 0; i < nw; i++) wv[i] = merge_front(wv[i]);
  } else {
    for (int i = 0; i < nw; i++) wv[i] = nv_retain(in[1 + i]);
  }
  int E = wmapped ? meta(wv[0])->shape[0] / V : meta(in[1])->shape[0];
  int Bxs = axes[0] >= 0 ? meta(x)->shape[0] / V : meta(x)->shape[0];
  nv_array *li = vmap_indices(op[4], axes[ni - 2], axes[0] >= 0, V, Bxs);
  nv_array *ri = vmap_indices(op[5], axes[ni - 1], wmapped, V, E);
  bool affine = nw == 3;
  out[0] = nv__gather_qmm3(x, wv[0], wv[1], affine ? wv[2] : NULL, li, ri, n->params);
  oax[0] = 0;
  nv_release(x), nv_release(li), nv_release(ri);
  for (int i = 0; i < nw; i++) nv_release(wv[i]);
  return NV_OK;
}

VJP(vjp_none_quantize) {
  (void)cot;
  for (int i = 0; i < n->ninputs; i++)
    if (want[i])
      return nv__set_error(NV_ERR_UNSUPPORTED, "%s: not differentiable",
                           nv__prims[n->prim].name);
  return NV_OK;
}

JVP(jvp_none_quantize) {
  for (int i = 0; i < n->ninputs; i++)
    if (tan[i])
      return nv__set_error(NV_ERR_UNSUPPORTED, "%s: not differentiable",
                           nv__prims[n->prim].name);
  return NV_OK;
}

void nv__rules_register_quantize(nv__prim_rule *r) {
  r[NV__PRIM_QUANTIZED_MATMUL] = (nv__prim_rule){vjp_qmm, jvp_qmm, vmap_qmm};
  r[NV__PRIM_GATHER_QMM] = (nv__prim_rule){vjp_gqmm, jvp_gqmm, vmap_gqmm};
  r[NV__PRIM_QUANTIZE] = (nv__prim_rule){vjp_none_quantize, jvp_none_quantize, vmap_quantize};
  r[NV__PRIM_DEQUANTIZE] =
      (nv__prim_rule){vjp_none_quantize, jvp_none_quantize, vmap_dequantize};
}
