/* The gather family's kernels (gather.cu) as the host code (gather.c) sees them: the by-value
 * parameter blocks, plain C structs laid out alike by the C compiler and nvcc, and the host
 * addresses of the __global__ functions to pass as nv__gpu_launch.func. Valid C11 and C++;
 * nothing of nuvec's internals, so the .cu file can include it (gpu.h is C only). `bad` is the
 * device address of the node's nv__gpu_bad check record (nv__gpu_index_check).
 *
 * Every kernel takes one pointer per view (the view's start) and then one parameter block;
 * element 0 of each operand is its `*off` elements past its view's start. All kernels walk
 * their work with grid-stride loops, so any grid is correct. Index values are read on the
 * device only: an out-of-range one writes 0 for its element and raises `bad`. */
#ifndef NUVEC_CUDA_GATHER_KERNELS_H
#define NUVEC_CUDA_GATHER_KERNELS_H

#include <stdint.h>

#include "cuda/checks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of every gather-family kernel. */
#define NV__GPU_GATHER_THREADS 256
/* Folded dims of the general walks (gather, take_along_axis, strided take, slice_dynamic). */
#define NV__GPU_GATHER_DIMS 12
/* Start values of slice_dynamic (one per axis of the array sliced). */
#define NV__GPU_DYN_AXES 64

/* Index dtypes as the kernels read them (values widened to int64; uint64 values above
 * INT64_MAX saturate, as the CPU's nv__ix_load, so they stay out of range). NV__GPU_IX_OFFSET
 * is the gather's precomputed int64 element offsets (gather_offsets' output). */
enum {
  NV__GPU_IX_U8 = 0,
  NV__GPU_IX_U16,
  NV__GPU_IX_U32,
  NV__GPU_IX_U64,
  NV__GPU_IX_I8,
  NV__GPU_IX_I16,
  NV__GPU_IX_I32,
  NV__GPU_IX_I64,
  NV__GPU_IX_OFFSET
};

/* take of a row-contiguous `a` with one element per index (the axis is the last, or the
 * only, one): out[r] = a[aoff + o * n + wrap(idx[ioff + q])] for r = o * m + q < rows. */
typedef struct nv__gpu_take_elems_params {
  int64_t aoff, ioff;
  int64_t n;    /* the axis size */
  int64_t m;    /* index count */
  int64_t rows; /* outer * m: the output's size */
  nv__gpu_bad *bad;
} nv__gpu_take_elems_params;

/* take of a row-contiguous `a` with rows of `len` > 1 contiguous elements per index (an
 * embedding lookup): out row r = o * m + q is a's row o * n + wrap(idx[q]). */
typedef struct nv__gpu_take_rows_params {
  int64_t aoff, ioff;
  int64_t n, m, rows;
  int64_t len; /* elements per row */
  int32_t idt; /* NV__GPU_IX_* */
  int32_t pad_;
  nv__gpu_bad *bad;
} nv__gpu_take_rows_params;

/* The general gather walk over the row-major output (folded to nd dims): output position t at
 * coordinates c reads a[aoff + sum c*ds + wrap(idx[ioff + sum c*is]) * ast], the index checked
 * as the CPU's nv__ix_wrap (0 <= v, v < n, v + ext <= n). With idt NV__GPU_IX_OFFSET the index
 * array holds checked element offsets (INT64_MIN for a bad position: the element is 0). */
typedef struct nv__gpu_gather_params {
  int64_t aoff, ioff;
  int64_t n, ext, ast;
  int64_t size; /* output elements */
  int32_t nd, idt;
  int64_t shape[NV__GPU_GATHER_DIMS];
  int64_t ds[NV__GPU_GATHER_DIMS];
  int64_t is[NV__GPU_GATHER_DIMS];
  nv__gpu_bad *bad;
} nv__gpu_gather_params;

/* One index array of a gather with several: over the npos index positions (row-major, folded
 * to nd dims with the array's strides `is`), off[p] = wrap(idx) * ast (first array) or
 * off[p] += wrap(idx) * ast (later ones); INT64_MIN marks a bad position. */
typedef struct nv__gpu_gather_offsets_params {
  int64_t ioff;
  int64_t n, ext, ast;
  int64_t npos;
  int32_t nd, idt;
  int32_t first;
  int32_t pad_;
  int64_t shape[NV__GPU_GATHER_DIMS];
  int64_t is[NV__GPU_GATHER_DIMS];
  nv__gpu_bad *bad;
} nv__gpu_gather_offsets_params;

/* The bounds check alone of m contiguous indices (a take whose output is empty because a's
 * inner dims are: the CPU still checks every index). */
typedef struct nv__gpu_index_only_params {
  int64_t ioff, n, m;
  int32_t idt;
  int32_t pad_;
  nv__gpu_bad *bad;
} nv__gpu_index_only_params;

/* slice_dynamic: every block reads the naxes start values (element soff + q * sstep of the
 * start array, dtype sdt) and clamps each as the CPU's dynamic_start into [0, shape - size];
 * the region's element offset sum start * stride is added to aoff; then the row-major output
 * (folded to nd dims) is copied from a at strides ss. */
typedef struct nv__gpu_dyn_slice_params {
  int64_t aoff, soff, sstep;
  int64_t size; /* output elements */
  int32_t sdt, naxes;
  int32_t nd;
  int32_t pad_;
  int64_t shape[NV__GPU_GATHER_DIMS];
  int64_t ss[NV__GPU_GATHER_DIMS];
  int64_t ax_stride[NV__GPU_DYN_AXES]; /* a's stride on the q-th start's axis */
  int32_t ax_shape[NV__GPU_DYN_AXES];  /* a's size on that axis */
  int32_t ax_size[NV__GPU_DYN_AXES];   /* the region's size on that axis */
} nv__gpu_dyn_slice_params;

/* diag of a vector: the side x side output, 0 but for out[r][r + k] = v[i] (i = r for k >= 0,
 * i = r + k's column for k < 0), the vector read at soff + i * step. */
typedef struct nv__gpu_diag_vec_params {
  int64_t soff, step;
  int64_t side, k;
} nv__gpu_diag_vec_params;

/* The kernels by element size in bytes (1, 2, 4 or 8) and index width (index64: 64-bit
 * positions and offsets, else 32-bit); NULL for another size or index dtype. */
const void *nv__gpu_kernel_take_elems(int esize, int idt, int index64);
const void *nv__gpu_kernel_take_rows(int esize, int index64);
const void *nv__gpu_kernel_gather(int esize, int index64);
const void *nv__gpu_kernel_gather_offsets(void);
const void *nv__gpu_kernel_index_only(void);
const void *nv__gpu_kernel_dyn_slice(int esize, int index64);
const void *nv__gpu_kernel_diag_vec(int esize, int index64);

#ifdef __cplusplus
}
#endif

#endif
