/* The fast family's CUDA kernels (fast_norm.cu) as the host code (fast_norm.c) sees them: the
 * parameter blocks and the kernels' host addresses. Valid C11 and C++.
 *
 * rms_norm / layer_norm ABI: four pointers, y (written), x, w, b (read; all row-contiguous in
 * the output dtype; an absent w or b may be any readable view), then nv__gpu_norm_params. A
 * block of (threads per row) x (rows per block) threads, threads per row a multiple of 32,
 * at most 1024 threads; grid.x = ceil(rows / rows per block).
 *
 * norm_vjp ABI: four pointers, dx (written), x, w, g (read; all row-contiguous in the output
 * dtype; an absent w may be any readable view), then nv__gpu_norm_params (has_b unused); the
 * block and grid as the norms'.
 *
 * rope ABI: four pointers, y (written), x (read, the output dtype), the int32 offsets and freqs
 * (read; in the compute dtype; an absent freqs may be any readable view), then
 * nv__gpu_rope_params. Any 2-D block of at most 256 threads: threadIdx.x walks a row's pairs
 * (and copied features), work items are walked grid-stride along grid.x * blockDim.y. Pointer k's element 0 is off[k] elements further. */
#ifndef NUVEC_CUDA_FAST_NORM_KERNELS_H
#define NUVEC_CUDA_FAST_NORM_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nv__gpu_norm_params {
  int64_t rows, d;
  int64_t off[4];
  double eps;
  int32_t layer; /* layer_norm (centered), else rms_norm */
  int32_t has_w, has_b;
} nv__gpu_norm_params;

#define NV__GPU_ROPE_THREADS 256

/* x is (B, M, T, D) with M the product of the middle axes (heads). A work item is one position
 * (b, t) and a chunk of `hpt` heads (nchunks chunks cover M): its threads compute each pair's
 * angle once and rotate that pair in every head of the chunk. */
typedef struct nv__gpu_rope_params {
  int64_t items;       /* B * T * nchunks */
  int64_t m, hpt, nchunks;
  int64_t t, d;        /* positions, row length */
  int64_t noff;        /* offsets: 1 or B */
  int64_t off[4];
  double scale, log2_base;
  int32_t dims, traditional, inverse, has_freqs;
} nv__gpu_rope_params;

/* The norm kernel for an nv_dtype code (float16, bfloat16, float32, float64) keeping up to
 * `k` (1, 2, 4 or 8) 16-byte vectors per thread in registers, else NULL. */
const void *nv__gpu_kernel_norm(int dtype, int k);

/* The norm_vjp kernel for an nv_dtype code, else NULL. */
const void *nv__gpu_kernel_norm_vjp(int dtype);

/* The rope kernel for an nv_dtype code, else NULL. */
const void *nv__gpu_kernel_rope(int dtype);

#ifdef __cplusplus
}
#endif

#endif
