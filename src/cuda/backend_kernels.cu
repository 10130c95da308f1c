/* The CUDA backend's own kernels: storing a small block of host bytes (passed by value in the
 * launch) into device memory, so uploads of scalars and small arrays stay inside the recorded
 * graph as one kernel node instead of a copy region of their own. */
#include <stddef.h>
#include <stdint.h>

namespace {

template <int N>
struct Block {
  uint32_t bytes;
  uint32_t pad[3];
  unsigned char data[N];
};

template <int N>
__global__ void store_bytes(unsigned char *dst, const Block<N> p) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.bytes; i += gridDim.x * blockDim.x)
    dst[i] = p.data[i];
}

}  // namespace

extern "C" void nv__gpu_store_kernel(size_t bytes, const void **func, size_t *params_size) {
  if (bytes <= 16) {
    *func = (const void *)store_bytes<16>;
    *params_size = sizeof(Block<16>);
  } else if (bytes <= 128) {
    *func = (const void *)store_bytes<128>;
    *params_size = sizeof(Block<128>);
  } else if (bytes <= 512) {
    *func = (const void *)store_bytes<512>;
    *params_size = sizeof(Block<512>);
  } else {
    *func = (const void *)store_bytes<2048>;
    *params_size = sizeof(Block<2048>);
  }
}
