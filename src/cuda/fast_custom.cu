/* The fill of custom kernels' initialized outputs (init_value): a grid-stride loop writing one
 * element pattern of 1, 2, 4 or 8 bytes. */
#include "cuda/fast_custom_kernels.h"

template <typename T>
static __device__ void fill_as(void *dst, T v, int64_t n) {
  T *d = static_cast<T *>(dst);
  int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) d[i] = v;
}

static __global__ void ck_fill(void *dst, nv__ck_fill_params p) {
  switch (p.esize) {
    case 1: fill_as<uint8_t>(dst, (uint8_t)p.bits, p.n); break;
    case 2: fill_as<uint16_t>(dst, (uint16_t)p.bits, p.n); break;
    case 4: fill_as<uint32_t>(dst, (uint32_t)p.bits, p.n); break;
    default: fill_as<uint64_t>(dst, p.bits, p.n); break;
  }
}

extern "C" const void *nv__ck_fill_kernel(void) { return (const void *)ck_fill; }
