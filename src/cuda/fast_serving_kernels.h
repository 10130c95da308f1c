/* The serving kernels' CUDA kernels (fast_serving.cu) as the host code (fast_serving.c) sees
 * them: parameter blocks and the kernels' host addresses. Valid C11 and C++.
 *
 * sorted_offsets ABI: two pointers, the offsets (written: int32, or int64 when `wide`) and the
 * ids (read, row-contiguous), then nv__gpu_offsets_params. 1-D blocks; a thread per offset,
 * walked grid-stride.
 *
 * causal_softmax ABI: two pointers, y (written) and x (read; both row-contiguous in the
 * output dtype; y may be x, donated), then nv__gpu_causal_params. A block of (threads per row)
 * x (rows per block) threads, threads per row a power of two from 32 to 1024, at most 1024
 * threads; row groups walked grid-stride along grid.x. Pointer k's element 0 is off[k]
 * elements further. */
#ifndef NUVEC_CUDA_FAST_SERVING_KERNELS_H
#define NUVEC_CUDA_FAST_SERVING_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nv__gpu_offsets_params {
  int64_t n;    /* ids */
  int64_t nout; /* groups + 1 */
  int64_t off[2];
  int32_t wide;
} nv__gpu_offsets_params;

typedef struct nv__gpu_causal_params {
  int64_t nrows, c; /* rows of the last axis, columns a row */
  int64_t rows;     /* rows a block: row r sees columns j <= c - rows + r % rows */
  int64_t off[2];
} nv__gpu_causal_params;

/* The sorted_offsets kernel for the ids' nv_dtype code (int32, int64, uint32, uint64), else
 * NULL. */
const void *nv__gpu_kernel_sorted_offsets(int dtype);

/* The causal_softmax kernel for an nv_dtype code (float16, bfloat16, float32, float64), else
 * NULL. */
const void *nv__gpu_kernel_causal_softmax(int dtype);

#ifdef __cplusplus
}
#endif

#endif
