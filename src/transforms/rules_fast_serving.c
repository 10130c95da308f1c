/* Transform rules of the fast family's serving kernels. sorted_offsets is integer-valued: no
 * gradient, and vmap runs its composed count per batch (src/ops/fast_serving.c). causal_softmax
 * is a softmax over each row's seen columns with zeros elsewhere: its vjp is softmax's on the
 * output y, y (g - sum(g y)) over the last axis in the compute type (the unseen columns have
 * y = 0, so nothing flows through them); its jvp differentiates the composed form
 * (src/ops/fast_serving.c), as MLX's Custom primitives do; vmap runs the fused op with the
 * batch axis in front (the rows of a batch stay whole blocks). */
#include <stdlib.h>

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

/* y (g - sum(g y, last axis)) in y's compute type, rounded to y's dtype. */
static nv_array *softmax_cotangent(const nv_array *y, const nv_array *t) {
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
  grad[0] = softmax_cotangent(out[0], cot[0]);
  return nv_array_status(grad[0]);
}

/* The composed form as a closure over x (payload: the rows a block). */
static nv_status causal_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const int *rows = payload;
  nv_array *y = nv__fast_causal_composed(nv_vec_get(inputs, 0), *rows);
  /* The closure's scope owns y (and releases it when the call returns); outputs keeps it. */
  nv_status s = nv_array_status(y);
  return s == NV_OK ? nv_vec_push(outputs, y) : s;
}

JVP(jvp_causal) {
  if (!tan[0]) return NV_OK;
  int *rows = malloc(sizeof *rows);
  nv_closure *f = rows ? nv_closure_new(causal_call, rows, free) : NULL;
  if (!f) free(rows);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *r = nv_vec_new();
  nv_status s = f && p && t && r ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  if (s == NV_OK) {
    *rows = ((const nv__fast_causal_params *)n->params)->rows;
    s = nv_vec_push(p, in[0]);
  }
  if (s == NV_OK) s = nv_vec_push(t, tan[0]);
  if (s == NV_OK) s = nv_jvp(f, p, t, NULL, r);
  if (s == NV_OK) *ot = nv_retain(nv_vec_get(r, 0));
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(r);
  nv_closure_release(f);
  return s;
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
