/* Scaled dot-product attention (nv_fast_scaled_dot_product_attention): the SDPA primitive's
 * parameters and the composed fallback its transforms and float64 inputs go through. */
#ifndef NUVEC_OPS_FAST_SDPA_H
#define NUVEC_OPS_FAST_SDPA_H

#include "ops/ops_internal.h"

/* What the SDPA node's optional inputs are. Inputs: 0 q [B, Hq, Lq, D], 1 k [B, Hkv, Lk, D],
 * 2 v [B, Hkv, Lk, Dv] (all of the output dtype), then the mask when `mask` is not NONE (a view
 * broadcast to [B, Hq, Lq, Lk]: bool for BOOL, the output dtype for ADD), then the sinks when
 * `sinks` (float32 [Hq]). The output is [B, Hq, Lq, Dv], row-contiguous. */
enum { NV__SDPA_MASK_NONE = 0, NV__SDPA_MASK_ADD = 1, NV__SDPA_MASK_BOOL = 2 };

typedef struct nv__sdpa_params {
  float scale;
  bool causal; /* query i at position Lk - Lq + i sees keys at positions <= its own */
  bool sinks;
  int mask;    /* NV__SDPA_MASK_* */
} nv__sdpa_params;

/* The composition the primitive stands for, with any leading dimensions (q [..., Hq, Lq, D],
 * k [..., Hkv, Lk, D], v [..., Hkv, Lk, Dv], broadcasting; mask broadcasting to the scores
 * [..., Hq, Lq, Lk]; sinks [..., Hq]): matmuls and a softmax in float32 (float64 when `out`
 * is float64), the result in `out`. Masked scores take the compute dtype's lowest value. A
 * new reference registered with no scope; call with the scopes suspended. */
nv_array *nv__sdpa_compose(const nv_array *q, const nv_array *k, const nv_array *v,
                           const nv__sdpa_params *p, const nv_array *mask, const nv_array *sinks,
                           nv_dtype out);

#endif
