/* The sort family's CUDA kernels (sort_block.cu, sort_device.cu, sort.cu) as the host code
 * (sort.c) sees them: the by-value parameter blocks, plain C structs laid out alike by the C
 * compiler and nvcc, the host addresses of the __global__ functions, and the wrapper of CUB's
 * device-wide radix sort that the capture function calls. Valid C11 and C++; nothing of
 * nuvec's internals, so the .cu files can include it.
 *
 * Every kernel sorts rows of sortable keys (sort_keys.cuh): unsigned integers of the dtype's
 * width (8, 16, 32 or 64 significant bits) whose order is the CPU's key order (src/cpu/
 * sort_keys.h: NaN last and all NaNs equal, -0.0 before +0.0 unless `canon0` makes them equal,
 * complex64 by (real, imaginary)). Rows are contiguous: row r of the input is elements
 * soff + r * len ... of the source view. What is written per row is the mode's (below). */
#ifndef NUVEC_CUDA_SORT_KERNELS_H
#define NUVEC_CUDA_SORT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a sort writes (nv__sort_params.mode), each row-contiguous from doff:
 *   VALUES   the sorted row, in the input dtype (decoded from the keys, so every NaN is the
 *            CPU's canonical quiet NaN; complex64 values are gathered through the sorted
 *            positions instead, bits kept)
 *   INDICES  the sorted positions, uint32 (stable)
 *   TOPK     the last k positions of the stable order, uint32, k a row
 *   MEDIAN   one value a row in `odtype`: the middle of the sorted keys (NaN when the row has
 *            a NaN or is empty) */
enum { NV__SORT_VALUES, NV__SORT_INDICES, NV__SORT_TOPK, NV__SORT_MEDIAN };

/* The longest row the block kernels sort (one block a row); longer rows take CUB's
 * device-wide sort. */
#define NV__SORT_BLOCK_MAX 4096

typedef struct nv__sort_params {
  int32_t dtype;  /* input nv_dtype */
  int32_t odtype; /* MEDIAN's output nv_dtype */
  int32_t mode;   /* NV__SORT_* */
  int32_t bits;   /* significant key bits: 8, 16, 32 or 64 */
  int32_t canon0; /* -0.0 and +0.0 get one key (argsort's stability) */
  int32_t k;      /* TOPK */
  int64_t nrows, len;
  int64_t soff, doff; /* elements from the source / destination view's start to element 0 */
} nv__sort_params;

/* Block kernels, `void k(const void *src, void *dst, nv__sort_params p)`: one block a row
 * (blocks loop over rows), cub::BlockRadixSort of the row's keys, with the positions as
 * payload when `pairs`. `threads` is the block size to launch with. key64: 64-bit keys (bits
 * 64), else 32-bit (bits <= 32). Rows of at most `capacity` elements; NULL past
 * NV__SORT_BLOCK_MAX. */
typedef struct nv__sort_block_kernel {
  const void *func;
  int32_t threads, capacity;
} nv__sort_block_kernel;
nv__sort_block_kernel nv__sort_block_kernel_for(int64_t len, int key64, int pairs);

/* The device-wide path's parameter block: the rows flattened into n = nrows * len sort items.
 * Keys of one sort are uint64 when key64, else uint32; a composite key puts the row above the
 * element's key ((row << bits) | key) so that one stable sort orders rows and, within each,
 * elements. */
typedef struct nv__sort_dev_params {
  nv__sort_params s;
  int32_t key64;   /* the sort's keys are uint64 (else uint32) */
  int32_t payload; /* values written by k_keys: 0 none, 1 the position in the row, 2 the global
                      index */
  int32_t gidx;    /* finish: vals hold global indices (the two-sort path); keys are unused */
  int32_t pad_;
  int64_t n;
} nv__sort_dev_params;

/* `void k(const void *src, void *keys, void *vals, nv__sort_dev_params p)`: the composite keys
 * (row << s.bits | key; just the key when bits is 64) of every item, and the payload. */
const void *nv__sort_kernel_keys(void);
/* `void k(const void *vals, void *rkeys, nv__sort_dev_params p)`: the two-sort path's second
 * keys, uint32 row numbers of the globally sorted items (global index / len). */
const void *nv__sort_kernel_row_keys(void);
/* `void k(const void *src, const void *keys, const void *vals, void *dst,
 * nv__sort_dev_params p)`: the sorted items to the mode's output (a thread an output element;
 * grid-stride). */
const void *nv__sort_kernel_finish(void);

/* argtopk by selection (32-bit keys, k <= NV__TOPK_SELECT_MAX): each warp keeps the best
 * (key << 32 | position) composites of a chunk of a row (`chunks` per row, `chunk` elements
 * each) and writes them either as the row's answer (chunks == 1: uint32 positions, ascending)
 * or as k composites (uint64) into scratch at (row * chunks + c) * k; the merge kernel then
 * selects each row's answer from its chunks * k composites. Blocks of NV__TOPK_THREADS,
 * warps loop over their work: any grid works. */
#define NV__TOPK_SELECT_MAX 32
#define NV__TOPK_THREADS 256
typedef struct nv__topk_params {
  int32_t dtype, k;
  int64_t nrows, len;
  int64_t chunks, chunk;
  int64_t soff, doff;
} nv__topk_params;
/* `void k(const void *src, void *dst, nv__topk_params p)` for k <= kmax (8 or 32). */
const void *nv__topk_kernel_select(int kmax);
/* `void k(const void *cand, void *dst, nv__topk_params p)`: src are the composites. */
const void *nv__topk_kernel_merge(int kmax);

/* searchsorted: `void k(const void *a, const void *v, void *out, nv__search_params p)`, a
 * thread a value: the first (right: past the last) position of a whose key is not below (not
 * above) the value's key, keys with -0.0 equal to +0.0 as on the CPU. */
typedef struct nv__search_params {
  int32_t dtype, right;
  int64_t na, a_off, a_st; /* a: length, element offset, element stride */
  int64_t nv, v_off;       /* v: contiguous */
  int64_t out_off;
} nv__search_params;
const void *nv__search_kernel(void);

/* CUB's stable device-wide radix sort of n uint32 (key64 0) or uint64 keys over bits
 * [0, end_bit), with uint32 values when `pairs`, from kin/vin into kout/vout, on `stream`.
 * With temp NULL it only sets *bytes (the temporary storage it needs) and enqueues nothing.
 * Returns the cudaError_t. */
int nv__sort_device_radix(void *temp, size_t *bytes, int key64, int pairs, const void *kin,
                          void *kout, const void *vin, void *vout, int n, int end_bit,
                          void *stream);

#ifdef __cplusplus
}
#endif

#endif
