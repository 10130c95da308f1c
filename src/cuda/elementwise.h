/* The element-wise family's CUDA kernels as the host code sees them: the by-value parameter
 * block every kernel takes, and the tables the .cu files fill with their kernels' host
 * addresses. Valid C11 and C++ (the .cu files include it; the host side, elementwise.c, is C).
 *
 * Kernel ABI (nv__gpu_launch): one pointer per view, the output's first, then the inputs in
 * operand order, each the view's start; then one nv__ew_params by value. A kernel adds
 * `off[k]` elements to pointer k itself.
 *
 * Two kernel shapes per (primitive, input dtype):
 *   contig   ndim 0: every input is row-contiguous over the output's index space or one
 *            broadcast element (bit k of `scalar`). ndim 2 ("rows"): two folded dims, every
 *            input's inner stride 1 or 0 (bit k of `scalar`), the inner size and the row
 *            strides of inner-contiguous inputs multiples of the vector width. 16-byte vector
 *            loads and stores when every vector pointer is aligned (checked on the device),
 *            else one element per step. Grid-stride over tiles of NV__EW_BLOCK threads x
 *            `per_thread` elements.
 *   strided  the output is row-contiguous (its offset is the linear index); input k's element
 *            offset is sum(coord[d] * stride[k][d]) over the `ndim` folded dims, with 32-bit
 *            index math (magic-number division) when `idx32`, else 64-bit.
 *   tile     (binary, dedicated kernels) an input whose element along the output's last dim L
 *            is strided but unit-strided along another dim J (a transposed operand): 32 x 32
 *            output tiles of J x L, that input read coalesced along J into shared memory, the
 *            other straight (coalesced along L), the output written along L; batch dims from
 *            the grid's z index, 64-bit offsets. Blocks of NV__EW_BLOCK = 32 x 8 threads.
 * The generic kernels (one per op group and dtype, the primitive read from `op` at run time)
 * are strided only; the hot (primitive, dtype) pairs have dedicated contig and strided ones. */
#ifndef NUVEC_CUDA_ELEMENTWISE_H
#define NUVEC_CUDA_ELEMENTWISE_H

#include <stdint.h>

#include "nuvec.h"
#include "core/prims.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__EW_MAXOPS 4  /* the output and up to three inputs */
#define NV__EW_MAXDIMS 8 /* = NV__GPU_MAX_DIMS */
#define NV__EW_BLOCK 256 /* threads per block of every element-wise kernel */
#define NV__EW_STRIDED_PER_THREAD 4 /* strided kernels: elements per thread per tile */
#define NV__EW_CONTIG_UNROLL 2      /* contiguous kernels: vectors per thread per tile */

/* Per-op constants (round, nan_to_num, isclose/allclose/array_equal). */
typedef union nv__ew_extra {
  struct {
    int32_t decimals;
    double scale;
    uint64_t iscale;
  } round;
  struct {
    double nan, posinf, neginf;
  } nan_to_num;
  struct {
    double rtol, atol;
    int32_t equal_nan;
  } close;
  struct {
    uint64_t one; /* tri: the bits of 1 in the output dtype */
    int64_t k, cols;
  } tri;
} nv__ew_extra;

typedef struct nv__ew_params {
  int64_t n;                  /* elements of the index space */
  int64_t off[NV__EW_MAXOPS]; /* element offset of operand k from its pointer */
  int32_t op;                 /* the primitive (NV__PRIM_*), for the generic kernels */
  int32_t ndim;               /* strided: folded dims, 1..NV__EW_MAXDIMS */
  uint32_t scalar;            /* contig: bit k set when operand k is one broadcast element */
  int32_t idx32;              /* strided: offsets and n fit in int32 */
  nv__ew_extra extra;
  int64_t shape[NV__EW_MAXDIMS];
  int64_t stride[NV__EW_MAXOPS][NV__EW_MAXDIMS]; /* [0] (the output) is unused */
  uint32_t magic[NV__EW_MAXDIMS];                /* idx32: q = (umulhi(i, magic) + i) >> shift */
  uint32_t shift[NV__EW_MAXDIMS];
  /* tile: the output's tile space J x L (L its last folded dim, J another) in 32 x 32 tiles,
   * `batch` positions of the other dims, which are shape/stride[k][0..ndim-1] (stride[0]: the
   * output's); operand k's strides along J and L; bit k of `tiled` set when input k goes
   * through shared memory. Grid: x over L's tiles, y over J's, z over the batch. */
  int64_t nj, nl, tiles_j, tiles_l, batch;
  int64_t sj[NV__EW_MAXOPS], sl[NV__EW_MAXOPS];
  uint32_t tiled;
  int32_t pad_;
} nv__ew_params;

/* The kernels of one (primitive, input dtype). */
typedef struct nv__ew_entry {
  const void *contig;  /* NULL: the strided kernel serves contiguous operands too */
  const void *strided; /* NULL: no kernel (the dtype is not supported) */
  int per_thread;      /* contig: elements per thread per tile */
  const void *tile;    /* binary, dedicated kernels only: the tiled kernel, else NULL */
} nv__ew_entry;

/* The kernel table, [NV__PRIM_COUNT][NV_DTYPE_COUNT], indexed like the CPU's tables (by the
 * input dtype; where by the output dtype; allclose/array_equal by the inputs' dtype, whose
 * `strided` kernel is the all-elements test). Each .cu file fills the entries of its kernels;
 * the generic fills first, then the files of dedicated kernels override entries. */
typedef nv__ew_entry nv__ew_table[NV__PRIM_COUNT][NV_DTYPE_COUNT];
void nv__ew_fill_unary(nv__ew_table t);   /* generic unary kernels (elementwise_unary.cu) */
void nv__ew_fill_complex(nv__ew_table t); /* complex64 unary and binary (elementwise_complex.cu) */
void nv__ew_fill_binary(nv__ew_table t);  /* generic binary kernels (elementwise_binary.cu) */
void nv__ew_fill_hot_unary(nv__ew_table t);  /* dedicated unary kernels (elementwise_hot_unary.cu) */
void nv__ew_fill_hot_binary(nv__ew_table t); /* dedicated binary (elementwise_hot_binary.cu) */
void nv__ew_fill_misc(nv__ew_table t);    /* where, allclose, array_equal (elementwise_misc.cu) */

/* Creation kernels (elementwise_misc.cu), over a row-contiguous output of `n` elements:
 *   tri     (out, params): out[i] = extra.tri.one where (i % cols) - (i / cols) <= k, else 0;
 *           by element size (1, 2, 4, 8 bytes: index log2 of it).
 *   window  (out, params): float32 window `op` (NV__PRIM_HANNING ..) of n points.
 *   bytes   (out, params): writes the 8 bytes of extra.tri.one, n (<= 8) of them. */
const void *nv__ew_tri_kernel(int log2_size);
const void *nv__ew_window_kernel(void);
const void *nv__ew_bytes_kernel(void);

#ifdef __cplusplus
}
#endif

#endif
