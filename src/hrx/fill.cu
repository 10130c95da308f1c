/* The byte-fill kernel hrx uses for fills of host-visible (mapped) memory, where graph memset
 * nodes are not allowed. Compiled by nvcc for sm_90. */
#include <stddef.h>

extern "C" __global__ void hrx__fill_bytes(unsigned char *dst, unsigned int value, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = (unsigned char)value;
}

extern "C" const void *hrx__fill_kernel(void) { return (const void *)hrx__fill_bytes; }
