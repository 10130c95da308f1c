// The fft family's kernels: the norm's scale of a cuFFT result, in place (cuFFT does not scale);
// the zeroing of a C2R input's real bins' imaginary parts; one-point transforms (see
// fft_kernels.h for their ABI).
#include "cuda/fft_kernels.h"

__global__ void __launch_bounds__(NV__GPU_FFT_SCALE_THREADS)
    k_fft_scale(float *x, nv__gpu_fft_scale_params p) {
  float *d = x + p.offset;
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += step)
    d[i] *= p.scale;
}

__global__ void __launch_bounds__(NV__GPU_FFT_SCALE_THREADS)
    k_fft_hermitian(float *x, nv__gpu_fft_herm_params p) {
  float *d = x + p.offset;
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < p.rows; r += step) {
    d[2 * r * p.m + 1] = 0.0f;
    if (p.even) d[2 * (r * p.m + p.m - 1) + 1] = 0.0f;
  }
}

__global__ void __launch_bounds__(NV__GPU_FFT_SCALE_THREADS)
    k_fft_one(const float *in, float *out, nv__gpu_fft_one_params p) {
  const float *a = in + p.in_off;
  float *b = out + p.out_off;
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < p.rows; r += step) {
    if (p.kind == NV__GPU_FFT_ONE_R2C) {
      b[2 * r] = a[r] * p.scale;
      b[2 * r + 1] = 0.0f;
    } else if (p.kind == NV__GPU_FFT_ONE_C2R) {
      b[r] = a[2 * r] * p.scale;
    } else {
      b[2 * r] = a[2 * r] * p.scale;
      b[2 * r + 1] = a[2 * r + 1] * p.scale;
    }
  }
}

extern "C" const void *nv__gpu_kernel_fft_scale(void) { return (const void *)&k_fft_scale; }
extern "C" const void *nv__gpu_kernel_fft_hermitian(void) {
  return (const void *)&k_fft_hermitian;
}
extern "C" const void *nv__gpu_kernel_fft_one(void) { return (const void *)&k_fft_one; }
