// The fft family's kernel: the norm's scale of a cuFFT result, in place (cuFFT does not scale).
#include "cuda/fft_kernels.h"

__global__ void __launch_bounds__(NV__GPU_FFT_SCALE_THREADS)
    k_fft_scale(float *x, nv__gpu_fft_scale_params p) {
  float *d = x + p.offset;
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += step)
    d[i] *= p.scale;
}

extern "C" const void *nv__gpu_kernel_fft_scale(void) { return (const void *)&k_fft_scale; }
