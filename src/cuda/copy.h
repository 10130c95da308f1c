/* Copy helpers the CUDA families share beyond gpu.h's (host code; implemented in copy.c). */
#ifndef NUVEC_CUDA_COPY_H
#define NUVEC_CUDA_COPY_H

#include "cuda/gpu.h"

/* Records a copy of the `shape` elements (of `itemsize` bytes: 1, 2, 4 or 8) of `src`, read at
 * element strides `src_strides`, into `dst` at `dst_strides`, declaring `dst_access` for dst
 * (HRX_ACCESS_READ_WRITE when only part of dst's view is written). Strides may be negative or
 * zero on either side; the fastest path for the folded layout is chosen (copy.c). Nothing is
 * recorded for an empty shape. */
nv_status nv__gpu_copy_strided(nv__gpu_ctx *ctx, int itemsize, const int *shape, int ndim,
                               nv__gpu_arg src, const int64_t *src_strides, nv__gpu_arg dst,
                               const int64_t *dst_strides, hrx_access dst_access);

/* The element strides of `in` broadcast right-aligned to `shape` (0 along broadcast axes). */
void nv__gpu_broadcast_strides(const nv__output *in, const int *shape, int ndim, int64_t *st);

#endif
