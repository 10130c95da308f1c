/* nuvec — fused "fast" ops with the semantics of MLX 0.32's mlx.core.fast: one primitive each,
 * with a CPU and a CUDA kernel, whose transforms (vjp, jvp, vmap) go through a composition of
 * ordinary ops (the composed fallback). Arrays passed in are borrowed; results are new
 * references owned by the caller or the innermost scope, as other op builders'. */
#ifndef NUVEC_FAST_H
#define NUVEC_FAST_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scaled dot-product attention, MLX's mx.fast.scaled_dot_product_attention:
 * softmax(scale · q·kᵀ + mask) · v per batch and head, computed in float32 (float64 in
 * float64) and returned in the promoted dtype of q, k and v. q is [B, Hq, Lq, D], k is
 * [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] with Hkv dividing Hq (grouped-query attention: query
 * head h reads key/value head h / (Hq / Hkv)). `mask_mode` is NULL or "" (no mask unless
 * `mask` is given), "causal" (query i sits at position Lk - Lq + i and sees the keys at
 * positions <= its own: with Lq < Lk the queries are the last Lq positions) or "array" (`mask`
 * required). `mask` broadcasts to [B, Hq, Lq, Lk] (rank <= 4): a bool mask keeps the scores
 * where it is true, any other dtype (which must promote to the result dtype) is added to the
 * scores. A masked score counts as float32's lowest value, not -inf, so a row with every key
 * masked averages v (as MLX). `sinks` (NULL or [Hq], promoting to the result dtype) adds one
 * logit per head to each softmax's denominator. Lk = 0 gives zeros. Errors (invalid argument,
 * naming the shapes): ranks other than 4, mismatched batch, head or length dimensions, Hq not a
 * multiple of Hkv, non-float inputs, a bad mask mode or shape, sinks of the wrong shape. */
NV_API nv_array *nv_fast_scaled_dot_product_attention(const nv_array *q, const nv_array *k,
                                                      const nv_array *v, float scale,
                                                      const char *mask_mode,
                                                      const nv_array *mask,
                                                      const nv_array *sinks);

#ifdef __cplusplus
}
#endif

#endif
