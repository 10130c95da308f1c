/* The quantize family's CUDA kernels (quantize.cu) as the host code (quantize.c) sees them:
 * the parameter block and the kernels' host addresses. Valid C11 and C++.
 *
 * Kernel ABIs (nv__gpu_launch; every view row-contiguous, element 0 `off[k]` elements after
 * pointer k's start):
 *   quantize:   packed (W), scales (W), biases (W; in the fp modes w's view again, unused), w.
 *   dequantize: out (W), packed, scales, biases (the scales' view again in the fp modes).
 *   qmm (gemv and tiled): out (W), x, packed, scales, biases (likewise).
 *   gather qmv: out (W), x, packed, scales, biases (likewise), lhs, rhs (int64).
 * Layouts are those of src/ops/quantize_params.h. */
#ifndef NUVEC_CUDA_QUANTIZE_KERNELS_H
#define NUVEC_CUDA_QUANTIZE_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_QUANT_THREADS 256
/* The decode gemv: rows of x at most, and output columns (warps) per block. */
#define NV__GPU_QMM_GEMV_MAX_M 8
#define NV__GPU_QMM_GEMV_WARPS 8
/* The streaming decode gemv (quantize_gemv.cu): warps per block. */
#define NV__GPU_QMV_WARPS 4
/* The tiled kernel: output tile (rows x columns) and K step. */
#define NV__GPU_QMM_TILE 64
#define NV__GPU_QMM_KSTEP 32

typedef struct nv__gpu_quant_params {
  int64_t off[7];
  int64_t n;      /* quantize: groups; dequantize: output elements */
  int32_t mode, group_size, bits;
  int32_t transpose, wbatch;
  int64_t B, M, K, N; /* quantized_matmul: x (B, M, K), out (B, M, N) */
  int64_t R, words, groups; /* w (Bw, R, words), scales (Bw, R, groups) */
  int32_t sdt;              /* the affine scales' nv_dtype code (qmm) */
  /* gather_qmm: x (Bx, M, K), w (E, R, words), L pairs (B = L), and the index check. */
  int64_t Bx, E;
  nv__gpu_bad *bad;
} nv__gpu_quant_params;

/* Kernels for an nv_dtype code, else NULL. quantize: w's dtype (float16, bfloat16, float32).
 * dequantize: the output's (float64 too; in affine mode also the scales'). qmm: x's and the
 * output's (float64 too; the affine scales' dtype is a parameter); the gemv for bits 1, 2, 4
 * or 8 (whole words of 16-byte loads) or any bits (0: element by element). */
const void *nv__gpu_kernel_quantize(int dtype);
const void *nv__gpu_kernel_dequantize(int dtype);
/* dequantize a packed word per thread, for bits 2, 4 and 8 (else NULL); the launch's
 * params.transpose holds log2 of the words per group (a power of two). */
const void *nv__gpu_kernel_dequantize_words(int dtype, int bits);
const void *nv__gpu_kernel_qmm_gemv(int dtype, int bits);
const void *nv__gpu_kernel_qmm_tiled(int dtype);
/* The streaming decode gemv for x's dtype (float16, bfloat16, float32), mode, bits and m rows
 * of x (1..NV__GPU_QMM_GEMV_MAX_M), else NULL; it needs K a multiple of 32 (x and w not
 * aligned for its vector loads take a slower loop). Each warp computes
 * nv__gpu_qmv_rows_per_warp(m, bits) consecutive rows of w. */
const void *nv__gpu_kernel_qmv(int dtype, int mode, int bits, int64_t m);
int nv__gpu_qmv_rows_per_warp(int64_t m, int bits);
/* The tensor-core decode gemv for 4-bit affine codes (quantize_gemv.cu): x float16 or
 * bfloat16 (the output's dtype), M <= 8 rows of x, K a multiple of 128, x and w 16-byte
 * aligned, group sizes 32, 64 or a power of two from 128; NULL otherwise. A block of
 * NV__GPU_QMV_TC_THREADS threads computes NV__GPU_QMV_TC_ROWS rows of w, grid.y walks the
 * batches; x's batch is staged in M * (K + 8)
 * 16-bit elements of dynamic shared memory beside nv__gpu_qmv_tc_static_smem() static bytes. */
#define NV__GPU_QMV_TC_THREADS 256
#define NV__GPU_QMV_TC_ROWS 16
const void *nv__gpu_kernel_qmv_tc(int dtype, int group_size);
uint32_t nv__gpu_qmv_tc_static_smem(void);
/* The split-K decode gemv for one row of x (quantize_gemv.cu; the default where it applies,
 * NUVEC_QMV_V2=0 turns it off): x float16, bfloat16 or float32 (the output's dtype), affine
 * codes of 2, 4 or 8 bits, K a multiple of 32 with K / 1024 (rounded up) warps a block, at most
 * NV__GPU_QMV_V2_MAX_WARPS (K up to 16384), x and the packed w 16-byte aligned (the caller
 * checks the mode and the alignment). gather 0: quantized_matmul's (the ABI of
 * nv__gpu_kernel_qmv, p.M == 1, grid.y walking the batches); 1: gather_qmm's by pair (that of
 * nv__gpu_kernel_gather_qmv with runs 0). grid.x blocks (any number) walk the rows of w in
 * sets of rows_per_set; grid.y (any number) walks the products.
 *
 * Two variants (config): NV__GPU_QMV_V2_R2_PF, sets of 2 rows with the next set's loads
 * issued before the current set is computed, and NV__GPU_QMV_V2_R4, sets of 4 rows without
 * the second set of registers. NV__GPU_QMV_V2_AUTO, the library's default, takes 2- and 4-bit
 * codes only (8-bit ones: 12.7 us for 4096 x 4096 on the H200 against the streaming kernel's
 * 11.4, qmv_sweep 2026-12-03) and picks the variant; NV__GPU_QMV_V2_ANY picks it for every
 * width (NUVEC_QMV_V2=1). The variant is nv__gpu_qmv_v2_config's: R2_PF
 * where the product's rows (N times the products) are at most NV__GPU_QMV_V2_PF_ROWS_PER_SM
 * an SM, R4 beyond. Few rows an SM leave each resident block one to three sets, so the launch
 * is about one memory round trip: what shortens it is having every set's loads in flight at
 * once (the prefetch) and the rows spread over more blocks (smaller sets). Many rows an SM are
 * a steady stream, where the blocks resident at once carry the bytes in flight, and the
 * prefetch's registers do not pay (on the H200, K = 4096, 4-bit, group 64: N = 4096, 31 rows
 * an SM, R2_PF 9.19 us against 10.53 for the streaming kernel; N = 14336, 109 rows an SM, R4
 * 23.39 us against 28.63, and R4 with the prefetch 29.17; the threshold lies between the two
 * measured shapes). */
#define NV__GPU_QMV_V2_MAX_WARPS 16
#define NV__GPU_QMV_V2_PF_ROWS_PER_SM 64
#define NV__GPU_QMV_V2_AUTO (-1)
#define NV__GPU_QMV_V2_ANY (-2)
#define NV__GPU_QMV_V2_R2_PF 0
#define NV__GPU_QMV_V2_R4 1
typedef struct nv__gpu_qmv_v2_launch {
  const void *func;  /* NULL: the split-K kernel does not take the product */
  uint32_t grid[2];  /* grid.x: the resident blocks shared by the products (at most the
                        sets); grid.y: the products, capped at 65535 */
  uint32_t block;    /* 32 * ceil(K / 1024) threads */
  int rows_per_set, prefetch, config;
} nv__gpu_qmv_v2_launch;
/* The variant for `rows` rows of w (N times the products) on `sms` multiprocessors. */
int nv__gpu_qmv_v2_config(int64_t rows, int sms);
/* The launch of the split-K kernel for `products` products of one row of x (K elements) by N
 * rows of w on device `device` (its multiprocessor count; the occupancy is the kernel's on the
 * current device, cached per variant), `config` a variant, NV__GPU_QMV_V2_AUTO or _ANY. A persistent
 * grid: the blocks resident at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor) times the
 * multiprocessors, divided among the products, at most the sets of a product. Returns 0 (with
 * plan->func NULL where the kernel does not apply) or the cudaError_t of a failed CUDA
 * call. */
int nv__gpu_qmv_v2_plan(int dtype, int bits, int gather, int config, int64_t K, int64_t N,
                        int64_t products, int device, nv__gpu_qmv_v2_launch *plan);
/* gather_qmm's streaming gemv (the same kernel indexed by pair), as nv__gpu_kernel_qmv.
 * runs == 0: grid.y walks the pairs, pair l being x[lhs[l]] (m rows) times w[rhs[l]]. runs
 * (4 or 8; x has one row per pair): grid.y walks chunks of `runs` consecutive pairs, each
 * chunk's runs of pairs of one (wrapped) rhs index computed together as the rows of one
 * product, so that sorted pairs read each matrix of w about once. */
const void *nv__gpu_kernel_gather_qmv(int dtype, int mode, int bits, int64_t m, int runs);

#ifdef __cplusplus
}
#endif

#endif
