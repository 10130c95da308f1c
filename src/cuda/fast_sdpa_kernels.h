/* The CUDA kernels of scaled_dot_product_attention (fast_sdpa.cu) as the host code
 * (fast_sdpa.c) sees them. Valid C11 and C++, nothing of nuvec's internals.
 *
 * Every kernel takes seven pointers, each a view's start, then one nv__gpu_sdpa_params by
 * value: out (written: the output [B, Hq, Lq, Dv] row-contiguous, or for split_kv's partial
 * pass the partials), q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] (read,
 * row-contiguous), mask (read, strided over [B, Hq, Lq, Lk]), sinks (read, float32 [Hq],
 * strided), part (the split partials: written by the partial pass, read by the combine pass).
 * Views a kernel does not use may be any readable view. Pointer k's element 0 is `off[k]`
 * elements further. */
#ifndef NUVEC_CUDA_FAST_SDPA_KERNELS_H
#define NUVEC_CUDA_FAST_SDPA_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_SDPA_VIEWS 7
#define NV__GPU_SDPA_THREADS 128 /* every kernel: 4 warps */
#define NV__GPU_SDPA_MMA_KEYS 64 /* keys per step of the tensor-core kernel */
#define NV__GPU_SDPA_DECODE_ROWS 4 /* most query rows (G x Lq) of the decode kernel */
#define NV__GPU_SDPA_MAX_SPLITS 128 /* most key splits (partials per output row) */

enum { NV__GPU_SDPA_OUT = 0, NV__GPU_SDPA_Q, NV__GPU_SDPA_K, NV__GPU_SDPA_V, NV__GPU_SDPA_MASK,
       NV__GPU_SDPA_SINKS, NV__GPU_SDPA_PART };

typedef struct nv__gpu_sdpa_params {
  int64_t off[NV__GPU_SDPA_VIEWS];
  int64_t mst[4]; /* mask strides (elements) over [B, Hq, Lq, Lk] */
  int64_t sst;    /* sinks stride */
  int32_t B, Hq, Hkv, G, Lq, Lk, D, Dv;
  int32_t causal;     /* query i sees the keys at positions <= i + Lk - Lq */
  int32_t mask;       /* 0 none, 1 additive, 2 bool (NV__SDPA_MASK_*) */
  int32_t mask_dtype; /* nv_dtype code of the mask: bool, float16, bfloat16 or float32 */
  int32_t sinks;
  float scale;
  /* The SIMT kernel: query rows (query, head of the group) per block, keys per step, threads
   * per dot product (a power of two <= 32), row blocks per (batch, key/value head), and the
   * key splits (split_len keys each; nsplit > 1: the kernel writes partials that the combine
   * kernel reduces). The decode kernel: rows = G x Lq, and the splits. */
  int32_t rows, keys, tpd, ntiles, nsplit, split_len;
  /* Paged decode (paged_attention through nv__gpu_sdpa_decode_vec_paged; 0 elsewhere): k and v
   * are pools [NB, BS, Hkv, D | Dv] (key j of batch b in slot j % BS of block
   * tables[b, j / BS]), the mask view holds the block tables (int32 [B, M]) and the sinks view
   * the context lengths (int32 [B]); Lq = 1, Lk = M x BS (the most keys a batch has), no mask,
   * no sinks, no causal, NB x BS <= INT32_MAX; a row without keys gives 0; a context length outside [0, Lk] or a
   * block id it reads outside [0, NB) raises `bad` and reads nothing. */
  int32_t paged, BS, M, NB;
  nv__gpu_bad *bad;
} nv__gpu_sdpa_params;

/* The partial of one output row in one split: Dv unnormalized output values, the running
 * maximum, the running sum. */
#define NV__GPU_SDPA_PART_FLOATS(dv) ((int64_t)(dv) + 2)

/* Kernels for an nv_dtype code (float16, bfloat16, float32), else NULL. The SIMT kernel's
 * dynamic shared memory is nv__gpu_sdpa_simt_smem bytes; the tensor-core kernel exists for
 * float16/bfloat16 and D = Dv in {64, 80, 96, 128, 256} (nv__gpu_sdpa_mma_smem bytes). */
const void *nv__gpu_sdpa_simt(int dtype);
const void *nv__gpu_sdpa_combine(int dtype);
const void *nv__gpu_sdpa_mma(int dtype, int d);
/* Query rows per block of the tensor-core kernel for head size d: 128 for d <= 128 (32 per
 * warp), 64 for d = 256. */
int nv__gpu_sdpa_mma_rows(int d);
/* The decode kernel (float16, bfloat16, float32) for head sizes up to `d` <= 256 (D and Dv),
 * at most NV__GPU_SDPA_DECODE_ROWS rows; 16 KiB of static shared memory at most. */
const void *nv__gpu_sdpa_decode(int dtype, int d);
/* The vectorized decode kernel (float16, bfloat16, float32) for head sizes up to `d` <= 256
 * (D and Dv) and `rows` <= NV__GPU_SDPA_DECODE_ROWS query rows, else NULL. It reads q, k and v
 * in 16-byte vectors: each of D and Dv a multiple of 16 bytes' elements (8 of float16/bfloat16,
 * 4 of float32) and the three views 16-byte aligned (the caller checks). */
const void *nv__gpu_sdpa_decode_vec(int dtype, int d, int rows);
/* The same kernel reading k and v through block tables (the params' paged form), with the same
 * conditions. */
const void *nv__gpu_sdpa_decode_vec_paged(int dtype, int d, int rows);
/* The blocks per SM the vectorized decode kernel of `mr` rows (1, 2 or 4) and `nc` chunks per
 * lane (2: float32 rows of more than 128 elements, else 1) is built for: its registers per
 * thread are at most 65536 / (128 x that). */
#define NV__GPU_SDPA_DVEC_BLOCKS_PER_SM(mr, nc) \
  ((nc) == 1 ? ((mr) == 1 ? 7 : (mr) == 2 ? 5 : 4) : ((mr) == 1 ? 6 : (mr) == 2 ? 4 : 3))
uint32_t nv__gpu_sdpa_simt_smem(int rows, int keys, int d, int dv);
uint32_t nv__gpu_sdpa_mma_smem(int d);

/* Lets `func` use the device's opt-in shared memory per block on CUDA device `device` (once
 * per function and device); *limit receives that size in bytes. Returns a cudaError_t code
 * (0 on success). */
int nv__gpu_sdpa_prepare(const void *func, int device, uint32_t *limit);

#ifdef __cplusplus
}
#endif

#endif
