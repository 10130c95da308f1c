/* The CUDA kernels of norm_rope and gated_delta_slots (fast_norm_rope.cu, fast_delta.cu) as
 * the host code (fast_norm_rope.c, fast_delta.c) sees them: parameter blocks and the kernels'
 * host addresses. Valid C11 and C++.
 *
 * norm_rope ABI: six pointers, the output (written: the rows of x's shape, or the cache,
 * holding the cache already, rows written at their cache positions), x (read), the positions
 * (int32), the cache positions (int32, or int64 when `cpos64`; any readable view without a
 * cache), the weight and the freqs (the compute dtype; any readable view when absent), all
 * row-contiguous and, but the positions and freqs, of the output dtype; then
 * nv__gpu_norm_rope_params. 1-D blocks of NV__GPU_NR_THREADS: a warp a row, a block walking
 * groups of `tpb` tokens grid-stride (their angles shared through shared memory).
 *
 * gated_delta_slots ABI: nine pointers, the pool (read and written: output 0, holding the pool
 * already), o (written), q, k, v (read; o's dtype), g, beta (read; the compute dtype: float64
 * when o or the pool is float64, else float32), the slots (int32, or int64 when `slots64`), all
 * row-contiguous, and the wide kernel's scratch (any view for the register kernel), then
 * nv__gpu_delta_params. The register kernel (dk <= 32 * 32, dk * dv < 2^31): 1-D blocks
 * of NV__GPU_DELTA_THREADS, `lanes` (a power of two up to 32) threads a state column, each
 * holding rows lane + lanes * r (r < 32) of it in registers; a block item is a (sequence, value
 * head, chunk of NV__GPU_DELTA_THREADS / lanes columns), walked grid-stride. The wide kernel
 * (any dk): a thread a column, the state in the scratch (compute dtype, [N * Hv, dk, dv]).
 *
 * Pointer k's element 0 is off[k] elements further. */
#ifndef NUVEC_CUDA_FAST_STATE_KERNELS_H
#define NUVEC_CUDA_FAST_STATE_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_NR_THREADS 256
/* Angle pairs a block keeps in shared memory: tpb * dims/2 up to this, else computed per
 * element. */
#define NV__GPU_NR_TABLE 1024

typedef struct nv__gpu_norm_rope_params {
  int64_t ntok, m, d; /* tokens, rows a token, row length */
  int64_t tpb;        /* tokens a block item */
  int64_t items;      /* ceil(ntok / tpb) */
  int64_t nslots;     /* rows of the cache (with a cache) */
  int64_t off[6];
  double eps, scale, log2_base;
  nv__gpu_bad *bad; /* the node's index check (a cache position >= nslots raises it) */
  int32_t dims, traditional, has_w, has_freqs, cache, cpos64;
} nv__gpu_norm_rope_params;

#define NV__GPU_DELTA_THREADS 256
/* Rows of the state column a thread of the register kernel holds. */
#define NV__GPU_DELTA_ROWS 32
/* Rows of k and q a block of the register kernel keeps in shared memory (32 lanes x rows). */
#define NV__GPU_DELTA_MAX_DK (32 * NV__GPU_DELTA_ROWS)

typedef struct nv__gpu_delta_params {
  int64_t n, t, hk, hv, dk, dv; /* sequences, tokens, q/k heads, value heads, key and value dims */
  int64_t nslots;               /* S */
  int64_t lanes;                /* threads a column (register kernel), else 1 */
  int64_t nchunks;              /* column chunks a (sequence, head) */
  int64_t items;                /* n * hv * nchunks */
  int64_t off[8];
  double scale;
  nv__gpu_bad *bad; /* the node's index check (a slot >= nslots raises it) */
  int32_t slots64;
} nv__gpu_delta_params;

/* The gated_delta_slots kernel for the nv_dtype codes of o and of the pool (float16, bfloat16,
 * float32, float64 each), the register kernel (`wide` 0) or the wide one (1); else NULL. */
const void *nv__gpu_kernel_gated_delta(int dtype, int state_dtype, int wide);

/* The norm_rope kernel for an nv_dtype code (float16, bfloat16, float32, float64) and a row
 * vector width v: 0 (any row), or 2, 4 or 8 for rows of d = 32 v elements rotated whole
 * (dims == d; float16, bfloat16 and float32 only: a warp holds the row in registers, v
 * elements a lane). NULL for others. */
const void *nv__gpu_kernel_norm_rope(int dtype, int v);

#ifdef __cplusplus
}
#endif

#endif
