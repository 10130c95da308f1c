/* Primitives of the distributed family (src/distributed; see src/core/prims.h for the entry
 * format). Each runs its collective over the group in its parameters (nv__dist_params):
 *   ALL_SUM, ALL_MAX, ALL_MIN  reductions over the group, in place on the output (input 0's
 *                              buffer when donated, else a copy)
 *   ALL_GATHER, SUM_SCATTER    the concatenation in rank order; the sum's part of this rank
 *   SEND                       sends input 0 to a peer; the output is the input's values
 *   RECV                       no inputs: an array of the node's dtype and shape from a peer
 *   SUM_GRADIENTS              the identity (output 0 is input 0); its vjp sums over the group */
#ifndef NUVEC_OPS_PRIMS_DISTRIBUTED_H
#define NUVEC_OPS_PRIMS_DISTRIBUTED_H

#define NV__PRIMS_DISTRIBUTED(X)                             \
  X(ALL_SUM, "all_sum", D_0, false, false)                   \
  X(ALL_MAX, "all_max", D_0, false, false)                   \
  X(ALL_MIN, "all_min", D_0, false, false)                   \
  X(ALL_GATHER, "all_gather", D_NONE, false, false)          \
  X(SUM_SCATTER, "sum_scatter", D_NONE, false, false)        \
  X(SEND, "send", D_0, false, false)                         \
  X(RECV, "recv", D_NONE, false, false)                      \
  X(SUM_GRADIENTS, "sum_gradients", D_NONE, false, false)

#endif
