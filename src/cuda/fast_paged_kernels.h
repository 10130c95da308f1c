/* The general paged-attention kernels (fast_paged.cu) as the host code (fast_paged.c) sees
 * them. Valid C11 and C++. (Decode of at most NV__GPU_SDPA_DECODE_ROWS query heads per
 * key/value head goes through SDPA's vectorized decode kernel in its paged form instead,
 * fast_sdpa_kernels.h.)
 *
 * ABI: seven pointers, each a view's start: out (written: [T, Hq, Dv] of the output dtype, or,
 * for the partial pass, any readable view), q [T, Hq, D], k_pool [NB, BS, Hkv, D], v_pool
 * [NB, BS, Hkv, Dv] (read, the output dtype), block_tables [S, M] and context_lens [S] (read,
 * int32), part (the split partials: written by the partial pass, read by the combine pass), all
 * row-contiguous; then one nv__gpu_pattn_params by value. Pointer k's element 0 is off[k]
 * elements further. 128 threads a block. */
#ifndef NUVEC_CUDA_FAST_PAGED_KERNELS_H
#define NUVEC_CUDA_FAST_PAGED_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_PATTN_VIEWS 7
#define NV__GPU_PATTN_THREADS 128 /* 4 warps */

enum { NV__GPU_PATTN_OUT = 0, NV__GPU_PATTN_Q, NV__GPU_PATTN_K, NV__GPU_PATTN_V,
       NV__GPU_PATTN_TABLES, NV__GPU_PATTN_LENS, NV__GPU_PATTN_PART };

typedef struct nv__gpu_pattn_params {
  int64_t off[NV__GPU_PATTN_VIEWS];
  int64_t cap; /* M x BS: the most keys a sequence has */
  int32_t T, Hq, Hkv, G, D, Dv, BS, M, NB, c;
  /* key splits of split_len keys; nsplit > 1: the first pass writes each (row, split)'s
   * partial (Dv unnormalized sums, the maximum, the denominator, in the compute type) and the
   * combine pass reduces them */
  int32_t nsplit;
  int64_t split_len;
  float scale;
  nv__gpu_bad *bad; /* raised for a bad context length or block id */
} nv__gpu_pattn_params;

/* The first pass: one block per (output row, split), grid.x = T x Hq x nsplit; dynamic shared
 * memory nv__gpu_pattn_smem bytes. The combine pass: one block per output row. Kernels for an
 * nv_dtype code (float16, bfloat16, float32, float64), else NULL. */
const void *nv__gpu_pattn_rows(int dtype);
const void *nv__gpu_pattn_combine(int dtype);
uint32_t nv__gpu_pattn_smem(int dtype, int d, int dv);

#ifdef __cplusplus
}
#endif

#endif
