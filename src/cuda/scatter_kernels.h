/* The scatter family's kernels (scatter.cu) as the host code (scatter.c) sees them: parameter
 * blocks (plain C structs laid out alike by the C compiler and nvcc) and the host addresses of
 * the __global__ functions. Valid C11 and C++; nothing of nuvec's internals.
 *
 * Every kernel takes one pointer per view (the view's start), then its parameter block, and
 * walks its work with a grid-stride loop, so any grid is correct. Walks are row-major over up
 * to NV__GPU_SCATTER_DIMS folded dims, 4 elements of the last dim per work item. */
#ifndef NUVEC_CUDA_SCATTER_KERNELS_H
#define NUVEC_CUDA_SCATTER_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_SCATTER_THREADS 256
/* Folded dims of a walk; a layout that folds to more is copied or declined by the host. */
#define NV__GPU_SCATTER_DIMS 16
/* Index arrays of one scatter (an array's dims at most). */
#define NV__GPU_SCATTER_IDX 64
/* Mask positions per block of masked_scatter's counting passes. */
#define NV__GPU_MASK_CHUNK 4096

/* How updates combine (the CPU's NV__IX_* order). */
enum { NV__GPU_SC_ASSIGN = 0, NV__GPU_SC_ADD, NV__GPU_SC_PROD, NV__GPU_SC_MAX, NV__GPU_SC_MIN };

/* The passes of an assigning scatter with possible duplicate destinations: clear the
 * ordinals of every destination, mark each with the largest ordinal (row-major position + 1)
 * writing it, then let only that element write (the CPU's serial loop keeps the last). */
enum { NV__GPU_SC_DIRECT = 0, NV__GPU_SC_CLEAR, NV__GPU_SC_MARK, NV__GPU_SC_WRITE };

/* A scatter (or put_along_axis) walk over the updates: per walk dim, the strides of the
 * updates, of the output (0 on the index dims) and of the indices (0 on the slice dims).
 * Element e goes to out[ooff + its output offset + sum_j wrap(index_j) * ast[j]]; index j of
 * the position is read at idx[ioff[j] + its index offset] (dtype idt), wraps once when
 * negative, and must satisfy 0 <= v and v + ext[j] <= n[j], else the element is skipped and
 * the record raised with the index as given. */
typedef struct nv__gpu_scatter_params {
  int32_t mode, phase, idt, k;
  int32_t nd, wide_ord; /* wide_ord: 64-bit ordinals */
  int64_t items, inner, chunks; /* work items: rows of the last dim in chunks of 4 */
  int64_t uoff, ooff;
  int64_t shape[NV__GPU_SCATTER_DIMS];
  int64_t ust[NV__GPU_SCATTER_DIMS], ost[NV__GPU_SCATTER_DIMS], ist[NV__GPU_SCATTER_DIMS];
  nv__gpu_bad *bad;
  int64_t ioff[NV__GPU_SCATTER_IDX], n[NV__GPU_SCATTER_IDX], ext[NV__GPU_SCATTER_IDX],
      ast[NV__GPU_SCATTER_IDX];
} nv__gpu_scatter_params;

/* Index array j of a multi-array scatter written as int64 (saturated as the CPU loads it) in
 * the row-major index shape: dst[doff + position] = idx[soff + its strided offset]. */
typedef struct nv__gpu_pack_params {
  int32_t idt, nd;
  int64_t soff, doff, total;
  int64_t shape[NV__GPU_SCATTER_DIMS], st[NV__GPU_SCATTER_DIMS];
} nv__gpu_pack_params;

/* A region walk (slice_update_*): out[ooff + off(e)] = out (op) upd[uoff + uoff(e)]. With
 * naxes > 0 (slice_update_dynamic) the region starts at the device start values: start entry
 * q (dtype sdt, at soff + q * sstep) on an axis of size dn[q], for a region of dsize[q]
 * there, clamped as the CPU clamps and scaled by the axis' row stride dst[q]. */
typedef struct nv__gpu_region_params {
  int32_t mode, dtype, nd, naxes, sdt, pad_;
  int64_t items, inner, chunks;
  int64_t ooff, uoff, soff, sstep;
  int64_t shape[NV__GPU_SCATTER_DIMS], ost[NV__GPU_SCATTER_DIMS], ust[NV__GPU_SCATTER_DIMS];
  int64_t dn[NV__GPU_SCATTER_IDX], dsize[NV__GPU_SCATTER_IDX], dst[NV__GPU_SCATTER_IDX];
} nv__gpu_region_params;

/* masked_scatter: mask positions (nd folded dims, strides st from moff) in chunks of
 * NV__GPU_MASK_CHUNK; counts[b] the true positions of chunk b, then their exclusive scan;
 * rowsrc[p] the source row of mask position p (-1 when not selected). The copy walks the
 * output (row elements per position): out[ooff + e] = src[soff + rowsrc * sst0 + trailing
 * offset of e % row]. A selection past `rows` raises the record (index rows, size rows). */
typedef struct nv__gpu_mask_params {
  int32_t nd, tnd;
  int64_t total, chunks, moff;
  int64_t shape[NV__GPU_SCATTER_DIMS], st[NV__GPU_SCATTER_DIMS];
  int64_t rows, row, out_total, ooff, soff, sst0;
  int64_t tshape[NV__GPU_SCATTER_DIMS], tst[NV__GPU_SCATTER_DIMS];
  nv__gpu_bad *bad;
} nv__gpu_mask_params;

/* as_strided_vjp: element e of the cotangent (coff + strided offset) summed into acc[t],
 * t = toff + sum idx * tst (double per real part, wrapping uint64 for integers, or for bool),
 * then acc stored as the output's dtype. */
typedef struct nv__gpu_asv_params {
  int32_t dtype, nd;
  int64_t total, coff, toff, out_size, ooff;
  int64_t shape[NV__GPU_SCATTER_DIMS], cst[NV__GPU_SCATTER_DIMS], tst[NV__GPU_SCATTER_DIMS];
} nv__gpu_asv_params;

/* Kernels (NULL for a dtype or mode they do not take). */
/* Scatter walks with nv__gpu_scatter_params, by phase: DIRECT (out, upd, idx) combining by
 * mode and dtype (ASSIGN by element size); CLEAR and MARK (idx, ord); WRITE (out, upd, idx,
 * ord) by element size. Ordinals are uint32, or uint64 when `wide_ord`. */
const void *nv__gpu_kernel_scatter(int mode, int dtype, int phase, int wide_ord);
const void *nv__gpu_kernel_pack_index(void); /* (idx, dst) nv__gpu_pack_params */
/* (out, upd) by mode and dtype (ASSIGN by element size), and (out, upd, start) by element
 * size, with nv__gpu_region_params. */
const void *nv__gpu_kernel_region(int mode, int dtype);
const void *nv__gpu_kernel_region_dynamic(int esize);
const void *nv__gpu_kernel_mask_count(void); /* (mask, counts) */
const void *nv__gpu_kernel_mask_scan(void);  /* (counts), one block */
const void *nv__gpu_kernel_mask_rows(void);  /* (mask, counts, rowsrc) */
const void *nv__gpu_kernel_mask_copy(int esize); /* (out, src, rowsrc) */
const void *nv__gpu_kernel_asv_acc(int dtype);   /* (cot, acc) */
const void *nv__gpu_kernel_asv_store(int dtype); /* (acc, out) */

#ifdef __cplusplus
}
#endif

#endif
