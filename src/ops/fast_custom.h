/* The parameters of FAST_CUDA_KERNEL nodes (src/ops/fast_custom.c builds them; the kernels are
 * src/cpu/fast_custom.c and src/cuda/fast_custom.c). */
#ifndef NUVEC_OPS_FAST_CUSTOM_H
#define NUVEC_OPS_FAST_CUSTOM_H

#include <stdbool.h>
#include <stdint.h>

/* The most inputs and outputs of a custom kernel, the dimensions its Shape and Strides hold,
 * and the most scalars of a precompiled one. */
#define NV__CK_MAX_IN 24
#define NV__CK_MAX_OUT 16
#define NV__CK_MAX_NDIM 10
#define NV__CK_MAX_SCALARS 32

typedef struct nv__ck_params {
  const void *kernel; /* the cudaKernel_t: its library stays loaded for the process */
  char name[64];      /* the user's kernel name, for messages */
  uint32_t grid[3];   /* blocks; grid[0] == 0: nothing to launch */
  uint32_t block[3];
  uint32_t shared_bytes;
  bool precompiled; /* views then scalars; else views then the generated parameter block */
  bool has_init;
  int nin, nout;
  uint64_t init_bits[NV__CK_MAX_OUT]; /* each output's initial element, its dtype's bits */
  int nscalars;
  uint32_t scalar_size[NV__CK_MAX_SCALARS]; /* 4 */
  uint64_t scalar_bits[NV__CK_MAX_SCALARS];
} nv__ck_params;

/* The generated kernels' parameter block after the views, for `nin` inputs (nin > 0): element-0
 * offsets (int64 [nin]), shapes (int32 [nin][10]), strides (int64 [nin][10]), ndims
 * (int32 [nin]), padded to 8 bytes; the generator declares the same struct. */
static inline size_t nv__ck_block_size(int nin) {
  size_t n = (size_t)nin * (8 + 4 * NV__CK_MAX_NDIM + 8 * NV__CK_MAX_NDIM + 4);
  return (n + 7) / 8 * 8;
}

#endif
