/* The fill kernel of custom kernels' initialized outputs (src/cuda/fast_custom.cu), called by
 * src/cuda/fast_custom.c. */
#ifndef NUVEC_CUDA_FAST_CUSTOM_KERNELS_H
#define NUVEC_CUDA_FAST_CUSTOM_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters of the fill: `n` elements of `esize` bytes (1, 2, 4 or 8) from the view's start,
 * each the low `esize` bytes of `bits`. */
typedef struct nv__ck_fill_params {
  uint64_t bits;
  int64_t n;
  int32_t esize;
} nv__ck_fill_params;

/* The fill's __global__ function (one view, then the params). */
const void *nv__ck_fill_kernel(void);

#ifdef __cplusplus
}
#endif

#endif
