/* nuvec — reductions, scans, softmax, sorting and searching, with MLX's names and semantics.
 *
 * Every builder is lazy and borrows its inputs; it returns a new array (owned by the caller,
 * or by the innermost scope) and never NULL. Bad arguments (an axis out of range or repeated,
 * a dtype the op does not take, an empty reduction MLX refuses) give an array that already
 * carries an error naming the op and the problem. `axes` lists `naxes` axes, negative ones
 * counted from the end; NULL means every axis. A single optional axis is passed as a pointer:
 * NULL means "the flattened array", as MLX's axis=None. With `keepdims` the reduced axes stay
 * as size 1. Values follow NumPy computed in float64; result dtypes follow MLX (0.32):
 *   - floats accumulate accurately (blocked and compensated); float16/bfloat16 compute in
 *     float32 or wider and round once;
 *   - sums and products of bool, int8 and int16 give int32, of uint8 and uint16 uint32; wider
 *     integers wrap in their own type;
 *   - max/min/argmax/argmin/cummax/cummin propagate NaN as NumPy (argmax/argmin return the
 *     first NaN); sorts put NaN last;
 *   - complex64 orders lexicographically (real part, then imaginary part), as NumPy.
 * Under the transforms (nuvec/transforms.h; docs/transforms.md lists every rule): max/min
 * split the cotangent evenly among tied extremes, cummax/cummin give it to the latest tied
 * element in scan order, prod and cumprod are exact with zeros, sorts pass it through the
 * stable argsort, logsumexp's gradient is softmax(x) with +inf ties split evenly and rows of
 * only -inf getting 0; arg*, searchsorted, count_nonzero, all and any have none. */
#ifndef NUVEC_REDUCE_H
#define NUVEC_REDUCE_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Reductions ---- */

/* Whether every (all) / some (any) element over `axes` is nonzero (NaN counts as nonzero).
 * The result is bool; an empty reduction gives true (all) / false (any). */
NV_API nv_array *nv_all(const nv_array *x, const int *axes, int naxes, bool keepdims);
NV_API nv_array *nv_any(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* The product over `axes`. bool/int8/int16 give int32, uint8/uint16 uint32, other dtypes keep
 * theirs (integers wrap); an empty product is 1. Floats multiply in float64 and round once. */
NV_API nv_array *nv_prod(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* The maximum / minimum over `axes`, in the input's dtype. NaN propagates. Fails, as MLX, when
 * `x` has no elements. */
NV_API nv_array *nv_max(const nv_array *x, const int *axes, int naxes, bool keepdims);
NV_API nv_array *nv_min(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* The mean over `axes`. Integers and bool give float32 (MLX); float and complex dtypes keep
 * theirs. The mean of an empty reduction is NaN (0/0), as NumPy. */
NV_API nv_array *nv_mean(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* The variance / standard deviation over `axes` with `ddof` delta degrees of freedom: the sum
 * of squared deviations from the mean (computed in two passes in float64) divided by
 * max(N - ddof, 0), so N <= ddof gives inf (or NaN for 0/0), as NumPy. Result dtype as
 * nv_mean, but complex64 gives float32, the mean of |x - mean|^2 (NumPy's and MLX's), composed
 * as var(real(x)) + var(imag(x)). */
NV_API nv_array *nv_var(const nv_array *x, const int *axes, int naxes, bool keepdims, int ddof);
NV_API nv_array *nv_std(const nv_array *x, const int *axes, int naxes, bool keepdims, int ddof);

/* The median over `axes`: the middle value of the sorted reduction (the mean of the two middle
 * values for an even count), NaN if any value is NaN or the reduction is empty, as NumPy.
 * Result dtype as nv_mean; complex64 keeps its dtype, ordered lexicographically (real part
 * first) as MLX's, composed from sort. */
NV_API nv_array *nv_median(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* The number of nonzero elements over `axes` (NaN counts), as int32 — the dtype MLX gives the
 * sum of a bool mask. */
NV_API nv_array *nv_count_nonzero(const nv_array *x, const int *axes, int naxes,
                                  bool keepdims);

/* The index of the first maximum / minimum along `axis` (NULL: of the flattened array), as
 * uint32 (MLX). A NaN counts as the extreme (the first NaN's index is returned), as NumPy;
 * -0.0 equals +0.0. Fails, as MLX, when `x` has no elements, or when the reduction is longer
 * than uint32 can index. */
NV_API nv_array *nv_argmax(const nv_array *x, const int *axis, bool keepdims);
NV_API nv_array *nv_argmin(const nv_array *x, const int *axis, bool keepdims);

/* log(sum(exp(x))) over `axes`, computed stably (shifted by the maximum): a +inf element gives
 * +inf, a slice of only -inf gives -inf, NaN propagates. Integers and bool give float32.
 * Fails, as MLX, when `x` has no elements. */
NV_API nv_array *nv_logsumexp(const nv_array *x, const int *axes, int naxes, bool keepdims);

/* exp(x - max) / sum(exp(x - max)) over `axes`, in one fused pass per slice. The result has
 * x's shape; integers and bool give float32 (MLX gives float32 on its fused path).
 * float16/bfloat16 always compute in float32 and round once, so `precise` (MLX's flag asking
 * for exactly that) changes nothing. A slice holding +inf or NaN, or only -inf, gives NaN, as
 * NumPy's composed form. An empty `x` gives an empty result. */
NV_API nv_array *nv_softmax(const nv_array *x, const int *axes, int naxes, bool precise);

/* The sum of the diagonal at `offset` of the planes spanned by `axis1` and `axis2`, as MLX's
 * trace(a, offset, axis1, axis2, dtype); `dtype` < 0 means x's dtype. The diagonal is cast to `dtype` and summed, so the
 * result has nv_sum's dtype for it, as MLX's (a bool or int8 trace is int32). Fails for fewer than 2 dimensions or equal
 * axes; an offset past the matrix gives 0. */
NV_API nv_array *nv_trace(const nv_array *x, int offset, int axis1, int axis2, int dtype);

/* ---- Scans ---- */

/* The cumulative sum / product / maximum / minimum / log-sum-exp along `axis` (NULL: of the
 * flattened array). `reverse` scans from the end; without `inclusive` each element holds the
 * scan of the elements before it (the first holds the identity: 0, 1, the dtype's lowest /
 * highest value (-inf / +inf for floats), -inf). Dtypes: cumsum of bool gives int32, cumprod of
 * bool is bool (MLX), other dtypes keep theirs (integers wrap); cummax/cummin keep the dtype; logcumsumexp gives
 * float32 for integers and bool. Floats accumulate in float64. */
NV_API nv_array *nv_cumsum(const nv_array *x, const int *axis, bool reverse, bool inclusive);
NV_API nv_array *nv_cumprod(const nv_array *x, const int *axis, bool reverse, bool inclusive);
NV_API nv_array *nv_cummax(const nv_array *x, const int *axis, bool reverse, bool inclusive);
NV_API nv_array *nv_cummin(const nv_array *x, const int *axis, bool reverse, bool inclusive);
NV_API nv_array *nv_logcumsumexp(const nv_array *x, const int *axis, bool reverse,
                                 bool inclusive);

/* ---- Sorting and searching ---- */

/* `x` sorted along `axis` (NULL: the flattened array), ascending, NaN last, -0.0 before +0.0
 * (both kept), by stable radix sorts for every dtype. */
NV_API nv_array *nv_sort(const nv_array *x, const int *axis);

/* The indices (uint32, as MLX) that sort `x` stably along `axis` (NULL: flattened), NaN last;
 * -0.0 and +0.0 compare equal, so they keep their order. */
NV_API nv_array *nv_argsort(const nv_array *x, const int *axis);

/* `x` rearranged along `axis` (NULL: flattened) so that the element at position `kth`
 * (negative: from the end) is the one a sort would put there, no element before it is larger
 * and none after it is smaller (NaN last). nuvec returns the fully sorted order, which is one
 * such arrangement. Fails for kth out of range. */
NV_API nv_array *nv_partition(const nv_array *x, int kth, const int *axis);
/* The indices (uint32) of nv_partition's arrangement. */
NV_API nv_array *nv_argpartition(const nv_array *x, int kth, const int *axis);

/* The `k` largest elements along `axis` (NULL: the flattened array), as MLX's topk: the last k
 * elements of partition(x, -k); nuvec returns them in ascending order (those of a stable
 * sort's last k: equal values by index, NaN largest), selected without sorting the row when k
 * is small. Fails unless 0 <= k <= the axis's size. */
NV_API nv_array *nv_topk(const nv_array *x, int k, const int *axis);

/* For each element of `v`, the index (uint32, MLX's index dtype) at which inserting it into the
 * sorted 1-D array `a` keeps the order, as NumPy's searchsorted: the first such index when
 * `right` is false, the last when true. NaN sorts last. `a` and `v` are compared in their
 * promoted dtype. The result has v's shape. Fails unless `a` is 1-D. */
NV_API nv_array *nv_searchsorted(const nv_array *a, const nv_array *v, bool right);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_REDUCE_H */
