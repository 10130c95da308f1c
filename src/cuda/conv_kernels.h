/* The convolution family's CUDA kernels (conv.cu) as the host code (conv.c) sees them: the
 * parameter block and the kernels' host addresses. Valid C11 and C++, nothing of nuvec's
 * internals.
 *
 * Kernel ABI (nv__gpu_launch): three pointers, each a view's start: x (read, any strides), w
 * (read, any strides), and the output (written: row-contiguous [rows, C_out] of the dtype, or
 * for the split kernel [splits, rows, C_out] partial sums in float, double for float64), then
 * one nv__gpu_conv_params by value; grid.z = splits. x's element 0 is xoff elements past its
 * pointer, w's woff. The sum kernel: two pointers (the partial sums, read; the output,
 * written), the same parameters. */
#ifndef NUVEC_CUDA_CONV_KERNELS_H
#define NUVEC_CUDA_CONV_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_CONV_THREADS 256
/* A block's tile: NV__GPU_CONV_TM output rows × NV__GPU_CONV_TN output channels of one group,
 * the contraction walked NV__GPU_CONV_TK taps×channels at a time. */
#define NV__GPU_CONV_TM 64
#define NV__GPU_CONV_TN 64
#define NV__GPU_CONV_TK 16

typedef struct nv__gpu_conv_params {
  int64_t rows;    /* N × output positions */
  int64_t kc;      /* the contraction: taps × C_in / groups */
  int64_t co_tiles; /* tiles of C_out / groups */
  int64_t tiles_y;  /* co_tiles × groups: the work of grid.y's stride loop */
  int64_t kchunk;   /* the contraction slice of a block (a multiple of NV__GPU_CONV_TK) */
  int32_t splits;   /* slices (grid.z) */
  int32_t nsp, groups, cin_g, cout_g, cout, flip;
  int32_t out_sp[3], k_sp[3], stride[3], kdil[3], idil[3], lo[3];
  int64_t ilen[3]; /* input-dilated lengths */
  int64_t xoff, woff;
  int64_t xst[5], wst[5]; /* element strides: [N, spatial..., C] and [C_out, taps..., C] */
} nv__gpu_conv_params;

/* The kernels for an nv_dtype code (float16, bfloat16, float32, float64), else NULL: the
 * convolution (split: writing partial sums) and the sum of the partial sums. */
const void *nv__gpu_kernel_conv(int dtype, int split);
const void *nv__gpu_kernel_conv_sum(int dtype);

#ifdef __cplusplus
}
#endif

#endif
