/* Transform rules of the fast family's serving kernels. sorted_offsets is integer-valued: no
 * gradient, and vmap runs its composed count per batch (src/ops/fast_serving.c). causal_softmax
 * is a softmax over each row's seen columns with zeros elsewhere, so its derivatives are
 * softmax's on the output y: vjp y (g - sum(g y)) and jvp y (t - sum(t y)) over the last axis,
 * in the compute type (the unseen columns have y = 0, so nothing flows through them); vmap
 * runs the fused op with the batch axis in front (the rows of a batch stay whole blocks). */
#include "ops/fast_serving.h"
#include "transforms/rule_decls.h"

VJP(vjp_none) { return NV_OK; }
JVP(jvp_none) { return NV_OK; }

VMAP(vmap_offsets) {
  const nv__fast_offsets_params *p = n->params;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0); /* the one input is the batched one */
  *out = nv__fast_offsets_composed(x, p->groups, n->out[0].dtype);
  nv_release(x);
  *oax = 0;
  return nv_array_status(*out);
}

/* y (t - sum(t y, last axis)) in y's compute type, rounded to y's dtype. */
static nv_array *softmax_tangent(const nv_array *y, const nv_array *t) {
  nv_dtype dt = meta(y)->dtype, ct = dt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  nv_array *yc = nv_astype(y, ct), *tc = nv_astype(t, ct);
  nv_array *ty = nv_multiply(tc, yc);
  int axis = -1;
  nv_array *s = nv_sum(ty, &axis, 1, true);
  nv_release(ty);
  nv_array *d = nv_subtract(tc, s);
  nv_release(s);
  nv_release(tc);
  nv_array *r = nv_multiply(yc, d);
  nv_release(d);
  nv_release(yc);
  nv_array *o = nv_astype(r, dt);
  nv_release(r);
  return o;
}

VJP(vjp_causal) {
  if (!want[0]) return NV_OK;
  grad[0] = softmax_tangent(out[0], cot[0]);
  return nv_array_status(grad[0]);
}

JVP(jvp_causal) {
  if (!tan[0]) return NV_OK;
  *ot = softmax_tangent(out[0], tan[0]);
  return nv_array_status(*ot);
}

VMAP(vmap_causal) {
  const nv__fast_causal_params *p = n->params;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0); /* the one input is the batched one */
  *out = nv__fast_causal_node(x, p->rows);
  nv_release(x);
  *oax = 0;
  return nv_array_status(*out);
}

void nv__rules_register_fast_serving(nv__prim_rule *r) {
  r[NV__PRIM_FAST_SORTED_OFFSETS] = (nv__prim_rule){vjp_none, jvp_none, vmap_offsets};
  r[NV__PRIM_FAST_CAUSAL_SOFTMAX] = (nv__prim_rule){vjp_causal, jvp_causal, vmap_causal};
}
