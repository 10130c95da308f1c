/* vjp, jvp and vmap rules of the random family (src/ops/prims_random.h). Keys and bits carry
 * no gradient. vmap over keys maps to the primitives' own batched form: a key array of shape
 * (K..., 2) draws one independent stream per key into an output of shape (K..., S...), each
 * key's part equal to what that key alone draws (src/cpu/random.c), as MLX's RandomBits::vmap. */
#include "ops/random_params.h"
#include "transforms/transforms_internal.h"

static nv_status vjp_none(const nv__node *n, nv_array *const *in, nv_array *const *out,
                          nv_array *const *cot, const bool *want, nv_array **grad) {
  (void)n, (void)in, (void)out, (void)cot, (void)want, (void)grad;
  return NV_OK;
}

static nv_status jvp_none(const nv__node *n, nv_array *const *in, nv_array *const *out,
                          nv_array *const *tan, nv_array **ot) {
  (void)n, (void)in, (void)out, (void)tan, (void)ot;
  return NV_OK;
}

/* The same primitive on the key batch moved to the front: its output gains the batch axis in
 * front of the node's own shape (which already leads with any key batch axes it had). */
static nv_status vmap_random(const nv__node *n, nv_array *const *in, const int *axes,
                             nv_array **out, int *oax) {
  const char *op = nv__prims[n->prim].name;
  const nv__output *o = &n->out[0];
  oax[0] = 0;
  if (o->ndim + 1 > NV__MAX_DIMS) {
    out[0] = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "vmap: a batch of keys needs %d dimensions", o->ndim + 1);
    return NV_OK;
  }
  nv_array *key = nv__tf_moveaxis(in[0], axes[0], 0);
  if (nv_array_status(key) != NV_OK) {
    out[0] = key;
    return NV_OK;
  }
  int shape[NV__MAX_DIMS + 1];
  shape[0] = nv__out(key)->shape[0];
  for (int i = 0; i < o->ndim; i++) shape[i + 1] = o->shape[i];
  size_t psize = n->prim == NV__PRIM_RANDOM_BITS ? sizeof(nv__random_bits_params) : 0;
  nv__node *node = nv__op_node(n->prim, &key, 1, o->dtype, shape, o->ndim + 1, psize);
  if (node && psize) memcpy(node->params, n->params, psize);
  nv_release(key);
  out[0] = nv__op_finish(op, node);
  return NV_OK;
}

void nv__rules_register_random(nv__prim_rule *r) {
  r[NV__PRIM_RANDOM_BITS] = (nv__prim_rule){vjp_none, jvp_none, vmap_random};
  r[NV__PRIM_RANDOM_UNIT] = (nv__prim_rule){vjp_none, jvp_none, vmap_random};
}
