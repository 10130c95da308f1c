/* Paged attention (nv_fast_paged_attention, include/nuvec/fast.h): the primitive's parameters
 * and the composed form its transforms go through, shared with its rules
 * (src/transforms/rules_fast_paged.c) and kernels. */
#ifndef NUVEC_OPS_FAST_PAGED_H
#define NUVEC_OPS_FAST_PAGED_H

#include "ops/ops_internal.h"

/* The node's inputs are 0 q [T, Hq, D], 1 k_pool [NB, BS, Hkv, D], 2 v_pool [NB, BS, Hkv, Dv]
 * (the output dtype), 3 block_tables [S, M] and 4 context_lens [S] (int32), row-contiguous;
 * each sequence has c = T / S query tokens. */
typedef struct nv__paged_params {
  float scale;
} nv__paged_params;

/* The composition the primitive stands for, over the node's shapes (vmap maps it whole): the
 * keys and values gathered by take over the flattened pools at the table's slots (block ids
 * clipped into [0, NB)), attention (nv__sdpa_compose) with the mask j <= L - c + i, and the
 * rows that see no key set to 0; the result [T, Hq, Dv] in `out`
 * (float64 computes in float64, the rest in float32). A new reference; call with the scopes
 * suspended. */
nv_array *nv__paged_compose(const nv_array *q, const nv_array *k_pool, const nv_array *v_pool,
                            const nv_array *block_tables, const nv_array *context_lens,
                            float scale, nv_dtype out);

#endif
