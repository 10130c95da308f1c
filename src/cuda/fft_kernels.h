/* The fft family's CUDA kernel (fft.cu) as the host code (fft.c) sees it. Valid C11 and C++.
 *
 * The scale kernel's ABI (nv__gpu_launch): one pointer (the output view's start), then one
 * nv__gpu_fft_scale_params by value: x[offset + i] *= scale for i < count (float elements; a
 * complex64 output counts two per element). */
#ifndef NUVEC_CUDA_FFT_KERNELS_H
#define NUVEC_CUDA_FFT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_FFT_SCALE_THREADS 256

typedef struct nv__gpu_fft_scale_params {
  int64_t offset, count;
  float scale;
} nv__gpu_fft_scale_params;

const void *nv__gpu_kernel_fft_scale(void);

#ifdef __cplusplus
}
#endif

#endif
