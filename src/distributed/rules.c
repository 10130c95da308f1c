/* Transform rules of the distributed family. Every rank differentiates the same program, so
 * a rule may itself run collectives (they pair up across ranks):
 *   all_sum        vjp: all_sum of the cotangent; jvp: all_sum of the tangent
 *   all_max/min    vjp: all_sum of the cotangent where x equals the result (the ranks holding
 *                  the extreme, each tie counted); no jvp (as MLX: it is not defined)
 *   all_gather     vjp: this rank's rows of the cotangent; jvp: all_gather of the tangent
 *   sum_scatter    vjp: all_gather of the cotangent; jvp: sum_scatter of the tangent
 *   send           the identity (the result is x)
 *   sum_gradients  vjp: all_sum of the cotangent; jvp: the tangent
 * vmap: reductions, send and sum_gradients keep the batch axis where it is; all_gather and
 * sum_scatter work on the first unbatched axis, so the batch axis moves to position 1 (a
 * batched scalar is made (1, B) for all_gather) and the result is batched along axis 1. */
#define NV_DIST_NO_CALLER_LOCATION /* a rule's collectives take their node's caller */
#include "distributed/dist_internal.h"
#include "distributed/dist_ops.h"
#include "transforms/rule_decls.h"

/* The node's group, for a rule's collective of it: that collective's errors name the place
 * the node's own builder was called from. */
static nv_group group_of(const nv__node *n) {
  const nv__dist_params *p = n->params;
  nv_dist_set_caller(p->file, p->line);
  return p->group;
}

typedef nv_array *(*coll_fn)(const nv_array *, nv_group);

static coll_fn reduce_fn(int prim) {
  return prim == NV__PRIM_ALL_MAX ? nv_dist_all_max
         : prim == NV__PRIM_ALL_MIN ? nv_dist_all_min
                                    : nv_dist_all_sum;
}

VJP(vjp_all_sum) {
  if (want[0]) grad[0] = nv_dist_all_sum(cot[0], group_of(n));
  return NV_OK;
}

JVP(jvp_all_sum) {
  ot[0] = nv_dist_all_sum(tan[0], group_of(n));
  return NV_OK;
}

VJP(vjp_all_extreme) {
  if (!want[0]) return NV_OK;
  nv_array *mask = nv_equal(in[0], out[0]);
  nv_array *total = nv_dist_all_sum(cot[0], group_of(n));
  grad[0] = nv__tf_mask(total, mask);
  nv_release(mask);
  nv_release(total);
  return NV_OK;
}

JVP(jvp_all_extreme) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "jvp: %s has no forward-mode derivative",
                       nv__prims[n->prim].name);
}

VMAP(vmap_same_axis) {
  nv_group g = group_of(n);
  switch (n->prim) {
    case NV__PRIM_SEND: out[0] = nv_dist_send(in[0], ((const nv__dist_params *)n->params)->peer, g); break;
    case NV__PRIM_SUM_GRADIENTS: out[0] = nv_dist_sum_gradients(in[0], g); break;
    default: out[0] = reduce_fn(n->prim)(in[0], g); break;
  }
  oax[0] = axes[0];
  return NV_OK;
}

VJP(vjp_all_gather) {
  if (!want[0]) return NV_OK;
  int rank = 0;
  nv_status st = nv_group_rank(((const nv__dist_params *)n->params)->group, &rank);
  if (st != NV_OK) return st;
  const nv__output *c = meta(cot[0]), *x = meta(in[0]);
  int start[NV__MAX_DIMS] = {0}, step[NV__MAX_DIMS], len[NV__MAX_DIMS];
  int rows = x->ndim ? x->shape[0] : 1;
  for (int i = 0; i < c->ndim; i++) {
    step[i] = 1;
    len[i] = c->shape[i];
  }
  start[0] = rank * rows;
  len[0] = rows;
  nv_array *part = nv__tf_slice(cot[0], start, step, len);
  grad[0] = nv_reshape(part, x->shape, x->ndim);
  nv_release(part);
  return NV_OK;
}

JVP(jvp_all_gather) {
  ot[0] = nv_dist_all_gather(tan[0], group_of(n));
  return NV_OK;
}

VMAP(vmap_all_gather) {
  const nv__output *x = meta(in[0]);
  nv_array *moved;
  if (x->ndim == 1) { /* a batch of scalars: (1, B) */
    int shape[2] = {1, x->shape[0]};
    moved = nv_reshape(in[0], shape, 2);
  } else {
    moved = nv__tf_moveaxis(in[0], axes[0], 1);
  }
  out[0] = nv_dist_all_gather(moved, group_of(n));
  nv_release(moved);
  oax[0] = 1;
  return NV_OK;
}

VJP(vjp_sum_scatter) {
  if (want[0]) grad[0] = nv_dist_all_gather(cot[0], group_of(n));
  return NV_OK;
}

JVP(jvp_sum_scatter) {
  ot[0] = nv_dist_sum_scatter(tan[0], group_of(n));
  return NV_OK;
}

VMAP(vmap_sum_scatter) {
  if (meta(in[0])->ndim < 2)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "vmap: sum_scatter needs a first axis besides the batch axis");
  nv_array *moved = nv__tf_moveaxis(in[0], axes[0], 1);
  out[0] = nv_dist_sum_scatter(moved, group_of(n));
  nv_release(moved);
  oax[0] = 1;
  return NV_OK;
}

VJP(vjp_identity) {
  if (want[0]) grad[0] = nv_retain(cot[0]);
  return NV_OK;
}

JVP(jvp_identity) {
  ot[0] = nv_retain(tan[0]);
  return NV_OK;
}

void nv__rules_register_distributed(nv__prim_rule *r) {
  r[NV__PRIM_ALL_SUM] = (nv__prim_rule){vjp_all_sum, jvp_all_sum, vmap_same_axis};
  r[NV__PRIM_ALL_MAX] = (nv__prim_rule){vjp_all_extreme, jvp_all_extreme, vmap_same_axis};
  r[NV__PRIM_ALL_MIN] = (nv__prim_rule){vjp_all_extreme, jvp_all_extreme, vmap_same_axis};
  r[NV__PRIM_ALL_GATHER] = (nv__prim_rule){vjp_all_gather, jvp_all_gather, vmap_all_gather};
  r[NV__PRIM_SUM_SCATTER] = (nv__prim_rule){vjp_sum_scatter, jvp_sum_scatter, vmap_sum_scatter};
  r[NV__PRIM_SEND] = (nv__prim_rule){vjp_identity, jvp_identity, vmap_same_axis};
  r[NV__PRIM_SUM_GRADIENTS] = (nv__prim_rule){vjp_all_sum, jvp_identity, vmap_same_axis};
}
