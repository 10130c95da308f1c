/* Transform rules of the optim family. adam_update is not differentiable (an optimizer step is
 * not traced for gradients; a zero gradient would be silently wrong), so its vjp and jvp fail
 * naming it. Its vmap is element-wise: the batched arrays move their batch axis to the front,
 * the others broadcast along it; a batched scalar (lr, decay, c1, c2) is not supported, since
 * the primitive takes 0-d ones. */
#include "ops/optim.h"
#include "transforms/rule_decls.h"

VJP(vjp_adam) {
  return nv__set_error(NV_ERR_UNSUPPORTED,
                       "vjp: the primitive adam_update (the fused Adam update) is not "
                       "differentiable");
}

JVP(jvp_adam) {
  return nv__set_error(NV_ERR_UNSUPPORTED,
                       "jvp: the primitive adam_update (the fused Adam update) is not "
                       "differentiable");
}

VMAP(vmap_adam) {
  const nv__adam_params *prm = n->params;
  for (int i = NV__ADAM_SCALARS; i < n->ninputs; i++)
    if (axes[i] >= 0)
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "vmap: adam_update takes 0-d scalars (lr, decay, c1, c2); input %d "
                           "is batched",
                           i);
  const nv__output *o = &n->out[0];
  int r = o->ndim, shape[NV__MAX_DIMS];
  shape[0] = nv__tf_batch_size(in, axes, NV__ADAM_SCALARS);
  for (int d = 0; d < r; d++) shape[d + 1] = o->shape[d];
  nv_array *x[NV__ADAM_SCALARS];
  for (int i = 0; i < NV__ADAM_SCALARS; i++)
    x[i] = axes[i] >= 0 ? nv__tf_front(in[i], axes[i], r) : nv_broadcast_to(in[i], shape, r + 1);
  int k = NV__ADAM_SCALARS;
  const nv_array *s1 = in[k++];
  const nv_array *c2 = prm->bias_correction ? in[k++] : NULL;
  const nv_array *decay = prm->decoupled ? in[k++] : NULL;
  nv_status s = nv__adam_update(x[0], x[1], x[2], x[3], prm->bias_correction ? NULL : s1, decay,
                                prm->bias_correction ? s1 : NULL, c2, prm, out);
  for (int i = 0; i < 3; i++) oax[i] = 0;
  for (int i = 0; i < NV__ADAM_SCALARS; i++) nv_release(x[i]);
  return s;
}

void nv__rules_register_optim(nv__prim_rule *r) {
  r[NV__PRIM_ADAM_UPDATE] = (nv__prim_rule){vjp_adam, jvp_adam, vmap_adam};
}
