/* Helpers shared by the reduce family's builders (src/ops/reduce*.c). */
#ifndef NUVEC_OPS_REDUCE_INTERNAL_H
#define NUVEC_OPS_REDUCE_INTERNAL_H

#include "ops/ops_internal.h"
#include "ops/reduce_params.h"

/* Normalizes `axes` (NULL: all) into sorted distinct axes; NULL on success, else the failed
 * array naming `op`. */
nv_array *nv__reduce_axes(const char *op, const nv__output *o, const int *axes, int naxes,
                          int *out, int *nout);

/* The shape of a reduction of `o` over the sorted axes `ax`; returns its ndim. */
int nv__reduced_shape(const nv__output *o, const int *ax, int nax, bool keepdims, int *shape);

/* MLX's at_least_float: inexact dtypes stay, integers and bool become float32. */
nv_dtype nv__at_least_float(nv_dtype dt);

/* A row-operation node of `prim` over `in` with one output (`dt`, `shape`) and the row axes
 * `ax`; on success *params points at the node's parameters for the caller to complete (before
 * the array is used). Returns the array (failed on error). */
nv_array *nv__rows_node(int prim, nv_array *in, nv_dtype dt, const int *shape, int nd,
                        const int *ax, int nax, nv__rows_params **params);

/* The indices of the k largest elements of each row along `axis` (NULL: the flattened array),
 * ordered as a stable ascending sort orders them (value, then index), as uint32. The
 * primitive behind topk (internal: topk gathers the values through take_along_axis, which
 * carries the gradient). */
nv_array *nv__argtopk(const nv_array *x, int k, const int *axis);

/* logcumsumexp of complex64 along `axis` (normalized; -1: the flattened array), composed of
 * logaddexp steps (src/ops/reduce_scan_complex.c). */
nv_array *nv__logcumsumexp_complex(const nv_array *x, int axis, bool reverse, bool inclusive);

#endif
