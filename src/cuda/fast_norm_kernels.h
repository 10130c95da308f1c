/* The fast family's CUDA kernels (fast_norm.cu) as the host code (fast_norm.c) sees them: the
 * parameter blocks and the kernels' host addresses. Valid C11 and C++.
 *
 * rms_norm / layer_norm ABI: four pointers, y (written, never overlapping the inputs), x, w, b
 * (read; all row-contiguous in the output dtype; an absent w or b may be any readable view),
 * then nv__gpu_norm_params. A block of (threads per row) x (rows per block) threads, threads
 * per row a multiple of 32 (the plan's, which a fixed-width kernel was compiled for), at most
 * the plan's block limit; any grid.x >= 1 (blocks walk the rows grid-stride, a block's rows
 * together). nv__gpu_norm_plan_of chooses all of it.
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

/* Cache hints of a norm kernel's x loads and y stores (w and b, read by every row, are always
 * loaded plainly so that they stay in L1/L2): plain; ld.global.cs / st.global.cs (evict
 * first); ld.global.nc.L1::no_allocate.L2::256B with plain stores; that load with st.global.cs. */
enum {
  NV__GPU_NORM_HINT_NONE = 0,
  NV__GPU_NORM_HINT_CS = 1,
  NV__GPU_NORM_HINT_NA = 2,
  NV__GPU_NORM_HINT_NA_CS = 3
};

/* The library's choice for the fixed-width kernels (fast_norm.cu instantiates these only):
 * their cache hint, their largest block (threads per row x rows per block), the most 16-byte
 * vectors a thread keeps in registers and the most threads per row. Rows of up to
 * NV__GPU_NORM_FIXED_TPR x NV__GPU_NORM_FIXED_K vectors, aligned and a whole number of vectors
 * long, take them; the others take the generic kernel (threads per row chosen at launch, up to
 * 1024). Chosen by bench/gpu/norm_sweep.cu on the H200: with 8 vectors a lane a bfloat16 row of
 * 2048, 4096 and 8192 took 0.155, 0.151 and 0.160 ms for 268 MB (one, two and four warps a row;
 * the copy of the bytes 0.131), against 0.158, 0.165 and 0.161 with 16 vectors a lane. */
#define NV__GPU_NORM_HINT NV__GPU_NORM_HINT_NONE
#define NV__GPU_NORM_BLOCK 256
#define NV__GPU_NORM_FIXED_K 8
#define NV__GPU_NORM_FIXED_TPR 256
/* The most blocks a norm launch has (more rows are walked grid-stride). */
#define NV__GPU_NORM_MAX_GRID (1 << 24)

/* A norm launch: threads per row (blockDim.x) and rows per block (blockDim.y), the 16-byte
 * vectors per thread kept in registers (k), whether the kernel is compiled for exactly tpr
 * threads per row (fixed: sums of one warp need no shared memory and no barrier), the cache
 * hint (NV__GPU_NORM_HINT_*) and the grid. */
typedef struct nv__gpu_norm_plan {
  int32_t tpr, rpb, k, fixed, hint;
  int64_t grid;
} nv__gpu_norm_plan;

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

/* The launch of rms_norm / layer_norm over `rows` rows of `d` elements (d, rows >= 1) of an
 * nv_dtype code (float16, bfloat16, float32, float64) into *plan. `aligned`: every view's
 * element offset is a multiple of a 16-byte vector (the kernels check the addresses too; a
 * misaligned row is correct on either kernel, only slower on a fixed one). Rows that fit the
 * fixed kernels: the fewest threads per row (32, 64, ...) whose k <= NV__GPU_NORM_FIXED_K
 * vectors each hold the row, k a power of two, and blocks of 128 threads (256 from four warps a
 * row: one row a block for eight); the others
 * (misaligned ones too): about four vectors (elements, for a length not a whole number of
 * vectors) a thread, a power of two from 32 to 1024 threads per row, k up to 8 (longer rows,
 * and misaligned ones, read memory again), rows filling blocks of 256 threads. */
void nv__gpu_norm_plan_of(int dtype, int64_t d, int64_t rows, int aligned,
                          nv__gpu_norm_plan *plan);

/* The norm kernel compiled for `plan` (the library's instantiations: generic kernels with k 1,
 * 2, 4 or 8; fixed ones as nv__gpu_norm_plan_of makes them, with NV__GPU_NORM_HINT), for an
 * nv_dtype code (float16, bfloat16, float32, float64), else NULL. */
const void *nv__gpu_kernel_norm(int dtype, const nv__gpu_norm_plan *plan);

/* The norm_vjp kernel for an nv_dtype code, else NULL. */
const void *nv__gpu_kernel_norm_vjp(int dtype);

/* The rope kernel for an nv_dtype code, else NULL. */
const void *nv__gpu_kernel_rope(int dtype);

#ifdef __cplusplus
}
#endif

#endif
