/* Primitives of norm_rope and gated_delta_slots (see src/core/prims.h for the entry format;
 * the definitions are in include/nuvec/fast.h, the parameters in src/ops/fast_state.h):
 *   FAST_NORM_ROPE        RMSNorm then RoPE of each row of x: inputs x, the positions, then the
 *                         weight and the freqs when given; output of x's shape
 *   FAST_NORM_ROPE_CACHE  the same rows written into a cache at the tokens' cache positions:
 *                         inputs the cache (input 0, written in place when donated, the
 *                         update-base rule), x, the positions, the cache positions, then the
 *                         weight and the freqs; output the updated cache
 *   FAST_GATED_DELTA      the gated delta rule's update per sequence over its state slot:
 *                         inputs q, k, v, g, beta, the state pool (input 5, written in place
 *                         when donated, the update-base rule), the slots; outputs the updated
 *                         pool (output 0, so that it takes a donated pool's buffer), then o */
#ifndef NUVEC_OPS_PRIMS_FAST_STATE_H
#define NUVEC_OPS_PRIMS_FAST_STATE_H

#define NV__PRIMS_FAST_STATE(X)                                       \
  X(FAST_NORM_ROPE, "norm_rope", D_NONE, false, false)               \
  X(FAST_NORM_ROPE_CACHE, "norm_rope", D_0, false, false)            \
  X(FAST_GATED_DELTA, "gated_delta_slots", D_5, false, false)

#endif
