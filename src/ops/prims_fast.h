/* Primitives of the fast family, MLX's mx.fast (see src/core/prims.h for the entry format):
 *   FAST_RMS_NORM    x * rsqrt(mean(x^2) + eps) [* weight] over the last axis: inputs x, then
 *                    weight when given (src/ops/fast_params.h)
 *   FAST_LAYER_NORM  (x - mean) * rsqrt(var + eps) [* weight] [+ bias] over the last axis:
 *                    inputs x, then weight and bias when given
 *   FAST_ROPE        rotary position encoding of the first `dims` features of x: inputs x, the
 *                    int32 offsets (1 or one per batch), then freqs when given
 *   FAST_NORM_VJP    the x gradient of rms_norm or layer_norm in one pass per row: inputs x,
 *                    weight when given, then the cotangent g (the vjp rules build it)
 *   FAST_SDPA        scaled dot-product attention: inputs q, k, v, then the mask and the sinks
 *                    when given (src/ops/fast_sdpa.h)
 * None donates: their outputs are new buffers. */
#ifndef NUVEC_OPS_PRIMS_FAST_H
#define NUVEC_OPS_PRIMS_FAST_H

#define NV__PRIMS_FAST(X)                                      \
  X(FAST_RMS_NORM, "rms_norm", D_NONE, false, false)           \
  X(FAST_LAYER_NORM, "layer_norm", D_NONE, false, false)       \
  X(FAST_ROPE, "rope", D_NONE, false, false)                   \
  X(FAST_NORM_VJP, "norm_vjp", D_NONE, false, false)           \
  X(FAST_SDPA, "scaled_dot_product_attention", D_NONE, false, false)

#endif
