/* Convolutions (MLX's conv_general, conv1d/2d/3d and conv_transpose1d/2d/3d), channels last:
 * an input is [N, spatial..., C_in] and a weight [C_out, kernel spatial..., C_in / groups], with
 * 1 to 3 spatial axes; the result is [N, out spatial..., C_out].
 *
 * Every builder returns a new reference (the caller releases it) and never aborts: bad
 * arguments give a failed array (NV_ERR_INVALID_ARGUMENT) whose message names the op and the
 * shapes. Inputs must be floating point (float16, bfloat16, float32, float64); the result has
 * their promoted dtype, and float16/bfloat16 accumulate in float32. */
#ifndef NUVEC_CONV_H
#define NUVEC_CONV_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The general convolution: out[n, o, co] = Σ_{k, ci} in~[n, o·stride + k·kernel_dilation, ci] ·
 * w[co, k, ci] over each group of channels, where in~ is the input dilated by input_dilation
 * (input_dilation − 1 zeros between neighbours) and padded by padding_lo / padding_hi zeros;
 * a negative padding removes that many input elements (before the dilation), as MLX's. flip reverses the kernel's spatial axes (a true convolution rather
 * than a cross-correlation). Each array argument has one entry per spatial axis; NULL means 1
 * (stride, dilations) or 0 (padding). Fails if an axis after dilation and padding is shorter
 * than the dilated kernel, if C_in is not weight's last axis times groups, if groups does not
 * divide C_out (when groups > 1), or if a stride or dilation is not positive. */
NV_API nv_array *nv_conv_general(const nv_array *input, const nv_array *weight, const int *stride,
                                 const int *padding_lo, const int *padding_hi,
                                 const int *kernel_dilation, const int *input_dilation,
                                 int groups, bool flip);

/* 1-D, 2-D and 3-D cross-correlations (nv_conv_general with symmetric padding and no input
 * dilation). The 2-D/3-D array arguments have 2/3 entries; NULL means 1 (stride, dilation) or
 * 0 (padding). */
NV_API nv_array *nv_conv1d(const nv_array *input, const nv_array *weight, int stride, int padding,
                           int dilation, int groups);
NV_API nv_array *nv_conv2d(const nv_array *input, const nv_array *weight, const int *stride,
                           const int *padding, const int *dilation, int groups);
NV_API nv_array *nv_conv3d(const nv_array *input, const nv_array *weight, const int *stride,
                           const int *padding, const int *dilation, int groups);

/* Transposed convolutions (the gradient of conv1d/2d/3d with respect to its input), as MLX:
 * nv_conv_general with the input dilated by stride, padding dilation·(k − 1) − padding before
 * and that plus output_padding after, and the kernel flipped. The weight is
 * [C_out, kernel spatial..., C_in / groups] as for the forward ops. */
NV_API nv_array *nv_conv_transpose1d(const nv_array *input, const nv_array *weight, int stride,
                                     int padding, int dilation, int output_padding, int groups);
NV_API nv_array *nv_conv_transpose2d(const nv_array *input, const nv_array *weight,
                                     const int *stride, const int *padding, const int *dilation,
                                     const int *output_padding, int groups);
NV_API nv_array *nv_conv_transpose3d(const nv_array *input, const nv_array *weight,
                                     const int *stride, const int *padding, const int *dilation,
                                     const int *output_padding, int groups);

#ifdef __cplusplus
}
#endif

#endif
