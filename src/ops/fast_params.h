/* Parameters of the fast family's primitives (src/ops/prims_fast.h), shared by the builders,
 * the rules and the kernels. Plain data stored inline in the node. */
#ifndef NUVEC_OPS_FAST_PARAMS_H
#define NUVEC_OPS_FAST_PARAMS_H

#include <stdbool.h>

/* rms_norm and layer_norm: eps, and which of the optional inputs the node has (weight is input
 * 1 when present; bias follows it). Every input has the output's dtype and is row-contiguous;
 * weight and bias have the length of x's last axis. norm_vjp takes the same parameters (no
 * bias) and `layer` for layer_norm's gradient (else rms_norm's); its cotangent input g follows
 * x and the weight, of x's shape:
 *   dx = r (gw - c) - (x - mu) r^3 mean(gw (x - mu)),  gw = g * weight,
 * with r = rsqrt(var + eps), and for layer_norm mu = mean(x), c = mean(gw), var the centered
 * mean of squares; for rms_norm mu = c = 0 and var = mean(x^2). */
typedef struct nv__fast_norm_params {
  double eps;
  bool has_weight, has_bias;
  bool layer;
} nv__fast_norm_params;

/* rope: the rotated features [0, dims) of each row (dims even, at most the last axis; the rest
 * is copied), rotating pairs (2i, 2i+1) when `traditional`, else (i, i + dims/2). Row t of
 * axis -2 in batch b (axis 0) has position (offset[b or 0] + t) * scale; pair i turns by
 * position * inv_freq[i], inv_freq[i] = base^(-2i/dims), or 1/freqs[i] when `has_freqs` (input
 * 2, in the compute dtype). `inverse` turns by the opposite angle (the transpose: rope's vjp).
 * x (input 0) is row-contiguous in the output dtype; offsets (input 1) are int32, row-
 * contiguous, with 1 element or one per batch. */
typedef struct nv__fast_rope_params {
  int dims;
  bool traditional, has_freqs, inverse;
  double base, scale;
} nv__fast_rope_params;

#endif
