/* nuvec — op builders, with MLX's names and semantics.
 *
 * Every builder is lazy: it records the op on the current stream (nv_current_stream) and
 * returns a new array (owned by the caller, or by the innermost scope). Inputs are borrowed.
 * Builders never return NULL: arguments they can check (shapes, axes, dtypes, NULL inputs)
 * give an array that already carries an error naming the op, the problem and the shapes, and
 * an op built from a failed array carries that array's error. Axes may be negative (counted
 * from the end). Binary ops broadcast as NumPy and promote dtypes with MLX's table; C scalars
 * (the *_scalar forms and nv_weak_scalar) are weakly typed as MLX treats Python scalars. */
#ifndef NUVEC_OPS_H
#define NUVEC_OPS_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Creation ---- */

/* An array of `shape` filled with 0 / 1 / `value` (converted to `dtype` as nv_astype). */
NV_API nv_array *nv_zeros(const int *shape, int ndim, nv_dtype dtype);
NV_API nv_array *nv_ones(const int *shape, int ndim, nv_dtype dtype);
NV_API nv_array *nv_full(const int *shape, int ndim, double value, nv_dtype dtype);
/* An array of `shape` filled with the values of `vals` broadcast to it, as MLX's
 * full(shape, vals, dtype). */
NV_API nv_array *nv_full_array(const int *shape, int ndim, const nv_array *vals, nv_dtype dtype);
/* Arrays of the shape and dtype of `x`. */
NV_API nv_array *nv_zeros_like(const nv_array *x);
NV_API nv_array *nv_ones_like(const nv_array *x);
NV_API nv_array *nv_full_like(const nv_array *x, double value);

/* Values from `start` to `stop` (exclusive) by `step`, as MLX's arange: ceil((stop-start)/step)
 * elements, value i = start + i*step computed in double and converted to `dtype`; for an
 * integer dtype start and step are converted first (arange(0, 3, 0.2, int32) is 15 zeros). An
 * infinite step gives [start] toward stop and nothing away from it. Fails for step 0 or NaN,
 * non-finite bounds, or bool. */
NV_API nv_array *nv_arange(double start, double stop, double step, nv_dtype dtype);

/* `num` evenly spaced values from `start` to `stop` inclusive (num ≥ 0), as MLX's linspace. */
NV_API nv_array *nv_linspace(double start, double stop, int num, nv_dtype dtype);

/* An n×m matrix with ones on the k-th diagonal (m < 0 means m = n). Fails for n ≤ 0 as MLX's
 * eye (eye(0) is an error). */
NV_API nv_array *nv_eye(int n, int m, int k, nv_dtype dtype);

/* The n×n identity matrix, as nv_eye(n, n, 0, dtype). */
NV_API nv_array *nv_identity(int n, nv_dtype dtype);

/* A 0-d weakly typed scalar: in a binary op with an array it takes the array's dtype when the
 * kinds agree (a float scalar with a float16 array stays float16; an integer scalar with an
 * int8 array stays int8), a float scalar with an integer or bool array gives float32, and an
 * integer scalar with a bool array gives int32. Alone it is float32 / int32. */
NV_API nv_array *nv_weak_scalar(double value);
NV_API nv_array *nv_weak_int(int64_t value);

/* ---- Views and shapes (no copy where the strides allow) ---- */

/* `x` with a new shape of the same size; one dimension may be -1 (inferred). A view when the
 * strides allow, else a row-major copy. */
NV_API nv_array *nv_reshape(const nv_array *x, const int *shape, int ndim);

/* `x` with its axes permuted by `axes` (`naxes` must equal ndim); NULL reverses them. A view. */
NV_API nv_array *nv_transpose(const nv_array *x, const int *axes, int naxes);

/* `x` broadcast to `shape` by NumPy's rules. A view (zero strides). */
NV_API nv_array *nv_broadcast_to(const nv_array *x, const int *shape, int ndim);

/* The region of `x` from `start` to `stop` by `strides` per axis (each of `n` = ndim values;
 * `strides` NULL means 1), with NumPy's negative indices and clamping; negative strides walk
 * backwards. A view. Fails for a zero stride or n != ndim. */
NV_API nv_array *nv_slice(const nv_array *x, const int *start, const int *stop,
                          const int *strides, int n);

/* `src` with the region given as in nv_slice replaced by `update` (broadcast to the region's
 * shape). Written into `src`'s buffer in place when the evaluation owns it outright. */
NV_API nv_array *nv_slice_update(const nv_array *src, const nv_array *update, const int *start,
                                 const int *stop, const int *strides, int n);

/* `x` without the size-1 axes listed (NULL: all size-1 axes). Fails for an axis whose size is
 * not 1. A view. */
NV_API nv_array *nv_squeeze(const nv_array *x, const int *axes, int naxes);

/* `x` with size-1 axes inserted at the positions `axes` of the result. A view. */
NV_API nv_array *nv_expand_dims(const nv_array *x, const int *axes, int naxes);

/* A view of the row-contiguous data of `x` (made contiguous first if it is not) with the given
 * shape, element strides and element offset, as MLX's as_strided. The caller answers for the
 * view staying inside the data; a view reaching outside it fails. */
NV_API nv_array *nv_as_strided(const nv_array *x, const int *shape, int ndim,
                               const int64_t *strides, int64_t offset);

/* A row-contiguous array with the values of `x` (a view if `x` is already row-contiguous). */
NV_API nv_array *nv_contiguous(const nv_array *x);

/* A row-contiguous copy of `x` in its own buffer. */
NV_API nv_array *nv_copy(const nv_array *x);

/* ---- Type conversion ---- */

/* `x` converted to `dtype`. Floats to narrower floats round once to nearest even, from the
 * source type (float64 to float16 directly). Float to integer truncates toward zero; NaN, ±inf
 * and values out of range give what x86's truncating conversion gives, as MLX's CPU does
 * (docs/semantics.md has the table: e.g. NaN to int32 is INT32_MIN, 300.0 to int8 is 44).
 * To bool: nonzero (and NaN) is true. complex64 to a real type takes the real part. */
NV_API nv_array *nv_astype(const nv_array *x, nv_dtype dtype);

/* float → OCP fp8 E4M3FN bits as uint8 (max 448; NaN and ±inf saturate to ±448, as MLX). */
NV_API nv_array *nv_to_fp8(const nv_array *x);

/* uint8 fp8 E4M3FN bits → `dtype` (a float dtype). */
NV_API nv_array *nv_from_fp8(const nv_array *x, nv_dtype dtype);

/* ---- Element-wise ---- */

/* -x, |x|, e^x, ln x, √x. abs of an unsigned integer is itself; of INT_MIN is INT_MIN (wraps,
 * as NumPy). exp/log/sqrt of integers and bool compute in float32. negative of bool fails. */
NV_API nv_array *nv_negative(const nv_array *x);
NV_API nv_array *nv_abs(const nv_array *x);
NV_API nv_array *nv_exp(const nv_array *x);
NV_API nv_array *nv_log(const nv_array *x);
NV_API nv_array *nv_sqrt(const nv_array *x);

/* a+b, a-b, a*b, a/b, max(a,b), min(a,b), broadcasting. Integer overflow wraps. divide always
 * gives a float (integers and bool: float32, as MLX). maximum/minimum propagate NaN. bool
 * operands stay bool (as MLX): add is or, subtract is xor, multiply is and. */
NV_API nv_array *nv_add(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_subtract(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_multiply(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_divide(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_maximum(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_minimum(const nv_array *a, const nv_array *b);

/* The same ops with a weakly typed C scalar on the right (see nv_weak_scalar). */
NV_API nv_array *nv_add_scalar(const nv_array *a, double b);
NV_API nv_array *nv_subtract_scalar(const nv_array *a, double b);
NV_API nv_array *nv_multiply_scalar(const nv_array *a, double b);
NV_API nv_array *nv_divide_scalar(const nv_array *a, double b);
NV_API nv_array *nv_maximum_scalar(const nv_array *a, double b);
NV_API nv_array *nv_minimum_scalar(const nv_array *a, double b);

/* ---- Reductions ---- */

/* The sum over `axes` (`naxes` of them; NULL: all axes), keeping reduced axes as size 1 when
 * `keepdims`. Result dtype as MLX: bool sums to int32, other types keep their dtype (int8
 * stays int8 and wraps). Floats accumulate in float64 partial sums with compensated block
 * totals, and round once to the result dtype. Fails for an axis out of range or listed twice. */
NV_API nv_array *nv_sum(const nv_array *x, const int *axes, int naxes, bool keepdims);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_OPS_H */
