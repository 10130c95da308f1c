/* The primitive of paged attention (src/core/prims.h gives the entry format; the definition is
 * nv_fast_paged_attention's in include/nuvec/fast.h, the parameters in src/ops/fast_paged.h):
 *   FAST_PAGED_ATTENTION  attention of q over a paged KV cache: inputs q [T, Hq, D], k_pool
 *                         [NB, BS, Hkv, D], v_pool [NB, BS, Hkv, Dv] (all of the output dtype),
 *                         block_tables [S, M] and context_lens [S] (int32), each
 *                         row-contiguous; output [T, Hq, Dv]. Donates nothing. */
#ifndef NUVEC_OPS_PRIMS_FAST_PAGED_H
#define NUVEC_OPS_PRIMS_FAST_PAGED_H

#define NV__PRIMS_FAST_PAGED(X) X(FAST_PAGED_ATTENTION, "paged_attention", D_NONE, false, false)

#endif
