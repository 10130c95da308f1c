/* Builder helpers shared by the index family (src/ops/index.c, src/ops/shape_ops.c). */
#ifndef NUVEC_OPS_INDEX_COMMON_H
#define NUVEC_OPS_INDEX_COMMON_H

#include "ops/index_params.h"
#include "ops/ops_internal.h"

/* A new handle on the same output as `x` (MLX returns the input itself for no-op cases). */
nv_array *nv__ix_same(const nv_array *x);
/* NULL if `idx` has an integer dtype, else the failed array naming `op`. */
nv_array *nv__ix_check_indices(const char *op, const nv_array *idx);
/* The failed array for an axis out of range. */
nv_array *nv__ix_bad_axis(const char *op, int axis, int ndim);
/* `x` broadcast to `shape` (itself, retained, when it has that shape); not scoped. */
nv_array *nv__ix_broadcast(const nv_array *x, const int *shape, int ndim);
/* Releases `n` arrays. */
void nv__ix_release_all(nv_array **xs, int n);
/* A view node of `x` (primitive `prim`) with the given shape and strides at `delta` elements,
 * recording `naxes` ints of parameters. */
nv_array *nv__ix_view(int prim, const nv_array *x, const int *shape, int ndim,
                      const int64_t *strides, int64_t delta, const int *axes, int naxes);

#endif
