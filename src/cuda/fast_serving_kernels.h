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
 * threads; row groups walked grid-stride along grid.x.
 *
 * paged_write ABI: three pointers, the pool (read and written: the output, holding the pool
 * already), the values (read; the pool's dtype) and the slots (read; int32, or int64 when
 * `slots64`), all row-contiguous, then nv__gpu_paged_params. Elements move as unsigned words
 * of the element size. 1-D blocks; a thread per element of a token row (one per token for
 * rows of 0 elements, which only check their slot), walked grid-stride.
 *
 * conv_slots ABI: six pointers, the pool (read and written: output 0, holding the pool
 * already), y (written), x, weight, the slots (int32, or int64 when `slots64`) and the bias
 * (read; an absent bias may be any readable view), all row-contiguous and, but the slots, of
 * the output dtype, then nv__gpu_conv_params. 1-D blocks; a thread per (sequence, channel),
 * walked grid-stride.
 *
 * Pointer k's element 0 is off[k] elements further. */
#ifndef NUVEC_CUDA_FAST_SERVING_KERNELS_H
#define NUVEC_CUDA_FAST_SERVING_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

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

typedef struct nv__gpu_paged_params {
  int64_t items;  /* tokens * max(row, 1) */
  int64_t row;    /* elements a token row */
  int64_t nslots; /* num_blocks * block size */
  int64_t off[3];
  nv__gpu_bad *bad; /* the node's index check (a slot >= nslots raises it) */
  int32_t slots64;
} nv__gpu_paged_params;

typedef struct nv__gpu_conv_params {
  int64_t items;  /* sequences * channels */
  int64_t c, k;   /* channels, taps (the state holds k - 1) */
  int64_t nslots; /* S */
  int64_t off[6];
  nv__gpu_bad *bad; /* the node's index check (a slot >= nslots raises it) */
  int32_t slots64, has_bias, silu;
} nv__gpu_conv_params;

/* The sorted_offsets kernel for the ids' nv_dtype code (int32, int64, uint32, uint64), else
 * NULL. */
const void *nv__gpu_kernel_sorted_offsets(int dtype);

/* The causal_softmax kernel for an nv_dtype code (float16, bfloat16, float32, float64), else
 * NULL. */
const void *nv__gpu_kernel_causal_softmax(int dtype);

/* The conv_slots kernel for an nv_dtype code (float16, bfloat16, float32, float64), else
 * NULL. */
const void *nv__gpu_kernel_conv_slots(int dtype);

/* The paged_write kernel for an element size in bytes (1, 2, 4 or 8), else NULL. */
const void *nv__gpu_kernel_paged_write(int elem_size);

#ifdef __cplusplus
}
#endif

#endif
