/* The fft family's CUDA kernels (fft.cu) as the host code (fft.c) sees them. Valid C11 and C++.
 *
 * The scale kernel (nv__gpu_launch ABI): one pointer (the output view's start), then one
 * nv__gpu_fft_scale_params by value: x[offset + i] *= scale for i < count (float elements; a
 * complex64 output counts two per element).
 *
 * The Hermitian kernel: one pointer (C2R's input, a scratch copy), then one
 * nv__gpu_fft_herm_params: the imaginary parts of bin 0 and, when `even`, of bin m - 1 of each
 * of `rows` rows of m complex values from float `offset` are zeroed (a Hermitian spectrum's
 * real bins, which the CPU ignores and cuFFT's C2R would not).
 *
 * The length-1 kernel: two pointers (input, output; float views), then one
 * nv__gpu_fft_one_params: each of `rows` one-point transforms of `kind` (NV__GPU_FFT_ONE_*),
 * times scale: C2C copies the complex value, R2C makes (x, 0), C2R takes the real part. */
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

typedef struct nv__gpu_fft_herm_params {
  int64_t offset, rows, m;
  int32_t even;
} nv__gpu_fft_herm_params;

enum { NV__GPU_FFT_ONE_C2C = 0, NV__GPU_FFT_ONE_R2C = 1, NV__GPU_FFT_ONE_C2R = 2 };

typedef struct nv__gpu_fft_one_params {
  int64_t in_off, out_off, rows; /* float offsets of element 0 */
  int32_t kind; /* NV__GPU_FFT_ONE_* */
  float scale;
} nv__gpu_fft_one_params;

const void *nv__gpu_kernel_fft_scale(void);
const void *nv__gpu_kernel_fft_hermitian(void);
const void *nv__gpu_kernel_fft_one(void);

#ifdef __cplusplus
}
#endif

#endif
