/* Primitives of the fast family, MLX's mx.fast (see src/core/prims.h for the entry format):
 *   FAST_SDPA  scaled dot-product attention: inputs q, k, v, then the mask and the sinks when
 *              given (src/ops/fast_sdpa.h)
 * None donates: the outputs are new buffers. */
#ifndef NUVEC_OPS_PRIMS_FAST_H
#define NUVEC_OPS_PRIMS_FAST_H

#define NV__PRIMS_FAST(X)                                                      \
  X(FAST_SDPA, "scaled_dot_product_attention", D_NONE, false, false)

#endif
