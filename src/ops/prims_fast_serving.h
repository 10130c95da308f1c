/* Primitives of the fast family's serving kernels (see src/core/prims.h for the entry format;
 * the definitions are in include/nuvec/fast.h, the parameters in src/ops/fast_serving.h):
 *   FAST_SORTED_OFFSETS   the group offsets of sorted group ids: input the ids (int32, int64,
 *                         uint32 or uint64, row-contiguous), output groups + 1 offsets (int32,
 *                         int64 past INT32_MAX elements)
 *   FAST_CAUSAL_SOFTMAX   the row softmax of x over the columns each row sees (the last axis),
 *                         written into x's buffer when x is donated (element-wise rule)
 *   FAST_PAGED_WRITE      the KV cache pool with token rows written at their slots: inputs the
 *                         pool (row-contiguous; written in place when donated, the update-base
 *                         rule), the values (the pool's dtype, row-contiguous) and the slots
 *                         (int32 or int64, row-contiguous)
 *   FAST_CONV_SLOTS       a causal depthwise conv1d step per sequence: inputs x, weight, the
 *                         state pool (input 2, written in place when donated, the update-base
 *                         rule), the slots, then the bias when given; outputs the updated pool
 *                         (output 0, so that it takes a donated pool's buffer), then y */
#ifndef NUVEC_OPS_PRIMS_FAST_SERVING_H
#define NUVEC_OPS_PRIMS_FAST_SERVING_H

#define NV__PRIMS_FAST_SERVING(X)                                    \
  X(FAST_SORTED_OFFSETS, "sorted_offsets", D_NONE, false, false)   \
  X(FAST_CAUSAL_SOFTMAX, "causal_softmax", D_0, true, false)       \
  X(FAST_PAGED_WRITE, "paged_write", D_0, false, false)           \
  X(FAST_CONV_SLOTS, "conv_slots", D_2, false, false)

#endif
