/* Parameters of the convolution primitive, shared by the builder (src/ops/conv.c), the rules
 * (src/transforms/rules_conv.c) and the kernels (src/cpu/conv.c, src/cuda/conv.c).
 *
 * convolution: inputs x [N, spatial..., C_in] and w [C_out, kernel..., C_in / groups], both of
 * the output's floating dtype, any layout; output [N, out spatial..., C_out] with, per spatial
 * axis a, out = (len~ + lo + hi − ((k − 1)·kdil + 1)) / stride + 1 (floor; at least 1), where
 * len~ = (len − 1)·idil + 1 is the input-dilated length (0 for an empty axis). Output position
 * o, kernel tap t (t' = k − 1 − t when flip) reads the padded dilated position
 * p = o·stride + t'·kdil − lo, which is the input element p / idil when 0 ≤ p < len~ and
 * p % idil = 0, and a zero otherwise. Paddings may be negative (cropping). */
#ifndef NUVEC_OPS_CONV_PARAMS_H
#define NUVEC_OPS_CONV_PARAMS_H

#include <stdbool.h>

#include "nuvec/array.h"

#define NV__CONV_MAX_SPATIAL 3

typedef struct nv__conv_params {
  int nsp; /* spatial axes, 1..3 */
  int stride[NV__CONV_MAX_SPATIAL];
  int lo[NV__CONV_MAX_SPATIAL], hi[NV__CONV_MAX_SPATIAL];
  int kdil[NV__CONV_MAX_SPATIAL], idil[NV__CONV_MAX_SPATIAL];
  int groups;
  bool flip;
} nv__conv_params;

/* The input-dilated length of a spatial axis of `len` elements. */
static inline long long nv__conv_dilated(int len, int idil) {
  return len == 0 ? 0 : (long long)(len - 1) * idil + 1;
}

/* The convolution primitive of `x` and `w` with parameters `p` (p->nsp matching x), validated
 * as nv_conv_general validates its arguments: for the transforms' rules, which build the
 * gradients as convolutions with negative paddings and other dilations. A new reference,
 * registered with the caller's scope as any builder's result. */
nv_array *nv__conv(const nv_array *x, const nv_array *w, const nv__conv_params *p);

#endif
