/* The copy family's kernels (copy.cu) as the host code (copy.c) sees them: the by-value
 * parameter blocks, plain C structs laid out alike by the C compiler and nvcc, and the host
 * addresses of the __global__ functions to pass as nv__gpu_launch.func. Valid C11 and C++;
 * nothing of nuvec's internals, so the .cu file can include it (core/internal.h is C only).
 *
 * Every kernel takes one pointer per view (the view's start) and then one parameter block;
 * element 0 of each operand is `soff` / `doff` elements past its view's start. Kernels whose
 * block is fixed-size walk their work with grid-stride loops, so any grid is correct. */
#ifndef NUVEC_CUDA_COPY_KERNELS_H
#define NUVEC_CUDA_COPY_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of every copy-family kernel. */
#define NV__GPU_COPY_THREADS 256
/* Elements per thread of the converting kernels (astype, fp8, arange). */
#define NV__GPU_CONVERT_ELEMS 4
/* The pseudo dtype code of fp8 E4M3FN bits held in uint8 (after nv_dtype's codes). */
#define NV__GPU_DT_FP8 14
/* Dimensions of the general (unfolded) strided path. */
#define NV__GPU_COPY_BIG_DIMS 64

/* A folded layout of up to NV__GPU_MAX_DIMS (8) dims, row-major, with the source's and the
 * destination's element strides, and for 32-bit indexing the fast dividers of each dim
 * (n / shape[k] == (umulhi(n, magic[k]) + n) >> shift[k] for n < 2^31). */
typedef struct nv__gpu_nd {
  int32_t nd;
  uint32_t chunk_magic, chunk_shift; /* fast divider by `chunks` */
  int32_t pad_;
  int64_t rows;   /* the product of the outer dims (all but the last) */
  int64_t inner;  /* the last dim */
  int64_t chunks; /* work items per row: ceil(inner / elements per item) */
  int64_t items;  /* rows * chunks */
  int64_t shape[8];
  int64_t sst[8];
  int64_t dst[8];
  uint32_t magic[8];
  uint32_t shift[8];
} nv__gpu_nd;

/* A strided same-dtype copy (any source and destination strides). */
typedef struct nv__gpu_copy_params {
  int64_t soff, doff;
  nv__gpu_nd l;
} nv__gpu_copy_params;

/* The same for layouts that fold to more than 8 dims (64-bit indexing, no dividers). */
typedef struct nv__gpu_copy_big_params {
  int64_t soff, doff;
  int32_t nd;
  int32_t pad_;
  int64_t rows, inner, chunks, items;
  int64_t shape[NV__GPU_COPY_BIG_DIMS];
  int64_t sst[NV__GPU_COPY_BIG_DIMS];
  int64_t dst[NV__GPU_COPY_BIG_DIMS];
} nv__gpu_copy_big_params;

/* A fill of n contiguous elements with the one source element, or a conversion of n
 * contiguous elements. */
typedef struct nv__gpu_span_params {
  int64_t soff, doff, n;
} nv__gpu_span_params;

/* A tiled transpose-like copy: the source is unit-strided along dim J, the destination along
 * dim L; 32x32 tiles of the (J, L) plane go through shared memory, for each index of the
 * other ("batch") dims. */
typedef struct nv__gpu_tile_params {
  int64_t soff, doff;
  int64_t nj, nl;         /* sizes of J and L */
  int64_t sj, sl, dj, dl; /* element strides of J and L in the source and destination */
  int64_t tiles_j, tiles_l; /* tiles along J and L: a plane has tiles_j * tiles_l */
  int64_t tiles;            /* all tiles: a plane's times the batch size */
  int32_t nb;             /* batch dims, row-major */
  int32_t pad_;
  int64_t bshape[8], bsst[8], bdst[8];
} nv__gpu_tile_params;

/* A dtype conversion (astype, to_fp8, from_fp8) from a strided source into a row-contiguous
 * destination; `l.dst` holds the destination's (contiguous) strides. */
typedef struct nv__gpu_convert_params {
  int32_t from, to; /* nv_dtype codes, or NV__GPU_DT_FP8 */
  int64_t soff, doff;
  nv__gpu_nd l;
} nv__gpu_convert_params;

/* arange: element i = start + i * step in double, converted to `to`. */
typedef struct nv__gpu_arange_params {
  int32_t to;
  int32_t pad_;
  int64_t doff, n;
  double start, step;
} nv__gpu_arange_params;

/* `count` elements set to `value` (the element's bits) at doff + first + t * step: the
 * diagonal of eye. */
typedef struct nv__gpu_diag_params {
  int64_t doff, first, step, count;
  uint64_t value;
} nv__gpu_diag_params;

/* pad's edge, reflect and symmetric modes: each output element reads the source element its
 * position maps to on every axis (the CPU's rule); up to 64 dims. */
typedef struct nv__gpu_pad_params {
  int32_t mode, nd;
  int64_t soff, n;
  int64_t oshape[NV__GPU_COPY_BIG_DIMS];
  int64_t ishape[NV__GPU_COPY_BIG_DIMS];
  int64_t ist[NV__GPU_COPY_BIG_DIMS];
  int64_t low[NV__GPU_COPY_BIG_DIMS];
} nv__gpu_pad_params;

/* The kernels by element size in bytes (1, 2, 4 or 8). NULL for another size. */
const void *nv__gpu_kernel_fill(int esize);                           /* nv__gpu_span_params */
const void *nv__gpu_kernel_copy_nd(int esize, int index64, int unit); /* nv__gpu_copy_params */
const void *nv__gpu_kernel_copy_big(int esize);                   /* nv__gpu_copy_big_params */
const void *nv__gpu_kernel_copy_tile(int esize);                  /* nv__gpu_tile_params */
const void *nv__gpu_kernel_diag(int esize);                       /* nv__gpu_diag_params */
const void *nv__gpu_kernel_pad(int esize);                        /* nv__gpu_pad_params */
const void *nv__gpu_kernel_convert(int index64);                  /* nv__gpu_convert_params */
/* A conversion of contiguous data between two frequent dtypes (8 elements per thread), or
 * NULL when the pair has none (k_convert then does it). */
const void *nv__gpu_kernel_convert_span(int from, int to);        /* nv__gpu_span_params */
const void *nv__gpu_kernel_arange(void);                          /* nv__gpu_arange_params */

#ifdef __cplusplus
}
#endif

#endif
