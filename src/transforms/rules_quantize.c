/* vjp, jvp and vmap rules of the quantize family's primitives (src/ops/prims_quantize.h).
 *
 * Decided rules:
 * - quantized_matmul: the cotangent of x is quantized_matmul(cot, w, scales, biases) with
 *   `transpose` flipped (MLX's rule); its jvp in x is quantized_matmul of the tangent. The
 *   quantized matrix, its scales and its biases have no rules (an error naming the op, as MLX
 *   for w).
 * - quantize and dequantize have no derivatives (an error naming the op; MLX has none either).
 * - vmap: the batch goes in front of every batched operand; the unbatched ones among w, scales
 *   and biases are broadcast along it, and the builder's batch broadcasting does the rest.
 *   quantize and dequantize map over the batch as over any leading axis. */
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

VJP(vjp_qmm) {
  for (int i = 1; i < n->ninputs; i++)
    if (want[i])
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "quantized_matmul: no vjp with respect to the quantized matrix, its "
                           "scales or its biases");
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
  r[NV__PRIM_QUANTIZE] = (nv__prim_rule){vjp_none_quantize, jvp_none_quantize, vmap_quantize};
  r[NV__PRIM_DEQUANTIZE] =
      (nv__prim_rule){vjp_none_quantize, jvp_none_quantize, vmap_dequantize};
}
