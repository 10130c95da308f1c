/* nuvec — indexing and shape ops with MLX's names and semantics: take, gather, scatter and
 * their kin, dynamic slices, diagonals; flatten, split, concatenate, pad, roll, diff, ...
 *
 * Conventions (as nuvec/ops.h): builders are lazy, borrow their inputs and return a new array
 * (owned by the caller or the innermost scope) that carries an error naming the op when the
 * arguments are bad. Axes may be negative. Multi-result ops append their results to an
 * `nv_vec *out` the caller owns and return an nv_status (and set nv_last_error); they append
 * nothing when an argument or input is bad (only running out of memory midway can leave some
 * appended).
 *
 * Indices. Index arrays may have any integer dtype (int8..int64, uint8..uint64); bool and
 * float indices are an error when the op is built. A negative index i counts from the end
 * (i + n), as MLX. An index still outside [0, n) after that — or a slice of a gather/scatter
 * that would run past the end of its axis — fails the evaluation with NV_ERR_INVALID_ARGUMENT
 * ("take: index 7 is out of range for an axis of size 5"): nuvec never reads or writes out of
 * bounds (MLX's CPU does not check and reads garbage). */
#ifndef NUVEC_INDEX_H
#define NUVEC_INDEX_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Indexing ---- */

/* Elements of `a` at `indices` along `axis`: the result has shape a.shape[:axis] +
 * indices.shape + a.shape[axis+1:] and a's dtype. Fails for a bad axis, non-integer indices,
 * or a non-empty take from an empty axis. Index rules: see the top of this header. */
NV_API nv_array *nv_take(const nv_array *a, const nv_array *indices, int axis);

/* nv_take on the flattened `a`: the result has the shape of `indices`. */
NV_API nv_array *nv_take_flat(const nv_array *a, const nv_array *indices);

/* out[..., j, ...] = a[..., indices[..., j, ...], ...] along `axis`, as MLX's
 * take_along_axis: `indices` has a's number of dimensions and broadcasts with `a` on every
 * other axis; the result has the broadcast shape with indices' size on `axis`. */
NV_API nv_array *nv_take_along_axis(const nv_array *a, const nv_array *indices, int axis);

/* A copy of `a` with values[..., j, ...] written at a[..., indices[..., j, ...], ...] along
 * `axis`, as MLX's put_along_axis. `values` (cast to a's dtype) and `indices` broadcast
 * together and with `a` on the other axes; with duplicate indices the last write in row-major
 * order of the indices wins. Written into a's buffer when the evaluation owns it outright. */
NV_API nv_array *nv_put_along_axis(const nv_array *a, const nv_array *indices,
                                   const nv_array *values, int axis);

/* MLX's general gather: the `nidx` index arrays (broadcast together to shape I) select, for
 * each position of I, the slice of `a` starting at index k on axis axes[k] (0 on the other
 * axes) with extent slice_sizes (a.ndim values, each within [0, a.shape[i]]). The result has
 * shape I + slice_sizes and a's dtype. A slice running past the end of an axis fails the
 * evaluation. nidx may be 0 (one slice at the origin). */
NV_API nv_array *nv_gather(const nv_array *a, const nv_array *const *indices, int nidx,
                           const int *axes, const int *slice_sizes, int nslice);

/* MLX's scatter: a copy of `a` where, for each position i of the broadcast index shape I, the
 * slice updates[i] (updates has shape I + S with len(S) = a.ndim and S[d] <= a.shape[d]) is
 * written at the origin given by the indices on `axes` (0 on the other axes). updates is cast
 * to a's dtype. nv_scatter assigns — with duplicate indices the last in row-major order of I
 * wins; _add accumulates (bool: or), _prod multiplies (bool: and), _max/_min keep the larger /
 * smaller value (NaN propagates; complex compare real part first; bool: or / and). Integer
 * arithmetic wraps. Written into a's buffer when the evaluation owns it outright. */
NV_API nv_array *nv_scatter(const nv_array *a, const nv_array *const *indices, int nidx,
                            const nv_array *updates, const int *axes);
NV_API nv_array *nv_scatter_add(const nv_array *a, const nv_array *const *indices, int nidx,
                                const nv_array *updates, const int *axes);
NV_API nv_array *nv_scatter_prod(const nv_array *a, const nv_array *const *indices, int nidx,
                                 const nv_array *updates, const int *axes);
NV_API nv_array *nv_scatter_max(const nv_array *a, const nv_array *const *indices, int nidx,
                                const nv_array *updates, const int *axes);
NV_API nv_array *nv_scatter_min(const nv_array *a, const nv_array *const *indices, int nidx,
                                const nv_array *updates, const int *axes);

/* MLX's masked_scatter: a copy of `a` where the positions selected by the bool `mask` take
 * consecutive rows of `src` in row-major order of the mask. mask.shape must equal the leading
 * a.shape[:mask.ndim]; a row is a[p] over the remaining axes. `src` (cast to a's dtype) has
 * at most 1 + (a.ndim - mask.ndim) dimensions: its first axis counts rows and the rest
 * broadcast to a row; with fewer dimensions every selected position takes the same row. Fails
 * the evaluation when the mask selects more rows than src has. */
NV_API nv_array *nv_masked_scatter(const nv_array *a, const nv_array *mask, const nv_array *src);

/* MLX's slice with an array start: the region of `a` of extent `slice_size` (a.ndim values,
 * each within [0, a.shape[i]]) starting at start[k] on axis axes[k] (`start` is a 0-d or 1-D
 * integer array of naxes values) and at 0 on the other axes. The start is read when the op is
 * evaluated: a negative start counts from the end, and the region is then clamped to lie
 * inside the axis (as JAX's dynamic_slice; MLX's CPU reads out of bounds instead). A copy. */
NV_API nv_array *nv_slice_dynamic(const nv_array *a, const nv_array *start, const int *axes,
                                  int naxes, const int *slice_size, int nsize);

/* MLX's slice_update with an array start: `src` with the region starting at start[k] on axis
 * axes[k] (0 on the others) replaced by `update` (cast to src's dtype). update's dimensions
 * align with src's last ones and leading missing ones are 1; each must be <= src's. The start
 * is normalized and clamped as in nv_slice_dynamic. In place when the evaluation owns src. */
NV_API nv_array *nv_slice_update_dynamic(const nv_array *src, const nv_array *update,
                                         const nv_array *start, const int *axes, int naxes);

/* nv_slice_update that combines instead of replacing: the region (given as in nv_slice) of
 * `src` becomes region + update, region * update, max(region, update), min(region, update),
 * with update cast to src's dtype and broadcast to the region. Integer arithmetic wraps; bool
 * add/max are or, prod/min are and; max/min propagate NaN. In place when the evaluation owns
 * src. */
NV_API nv_array *nv_slice_update_add(const nv_array *src, const nv_array *update,
                                     const int *start, const int *stop, const int *strides, int n);
NV_API nv_array *nv_slice_update_prod(const nv_array *src, const nv_array *update,
                                      const int *start, const int *stop, const int *strides,
                                      int n);
NV_API nv_array *nv_slice_update_max(const nv_array *src, const nv_array *update,
                                     const int *start, const int *stop, const int *strides, int n);
NV_API nv_array *nv_slice_update_min(const nv_array *src, const nv_array *update,
                                     const int *start, const int *stop, const int *strides, int n);

/* The diagonal of `a` with `offset` (> 0 above the main one) over axes axis1 and axis2, as
 * MLX's diagonal: those axes are removed and the diagonal is the last axis (length 0 when the
 * offset is past the edge). A view. Fails for fewer than 2 dimensions or axis1 == axis2. */
NV_API nv_array *nv_diagonal(const nv_array *a, int offset, int axis1, int axis2);

/* MLX's diag: for a 1-D `a` of length n, the (n+|k|)×(n+|k|) matrix with `a` on its k-th
 * diagonal and zeros elsewhere; for a 2-D `a`, its k-th diagonal (a view, nv_diagonal). Fails
 * for any other number of dimensions. */
NV_API nv_array *nv_diag(const nv_array *a, int k);

/* ---- Shapes ---- */

/* `a` with axes start_axis..end_axis (inclusive, clamped to the array) merged into one, as
 * MLX's flatten; a 0-d array becomes shape (1,). A view when the strides allow. Fails when
 * start_axis is past the last axis, end_axis before the first, or end before start. */
NV_API nv_array *nv_flatten(const nv_array *a, int start_axis, int end_axis);

/* `a` with `axis` split into `shape` (n values whose product is the axis' size; one may be
 * -1, inferred). A view when the strides allow. Fails for n == 0. */
NV_API nv_array *nv_unflatten(const nv_array *a, int axis, const int *shape, int n);

/* `a` reversed along `axes` (NULL: every axis). A negative-step view. */
NV_API nv_array *nv_flip(const nv_array *a, const int *axes, int naxes);

/* Splits `a` along `axis` into `sections` equal parts (appended to `out`, views). Fails unless
 * the axis' size divides by sections (sections >= 1). */
NV_API nv_status nv_split(const nv_array *a, int sections, int axis, nv_vec *out);

/* Splits `a` along `axis` before each of the `n` indices (NumPy's clamping and negative
 * indices; unsorted indices give empty parts), appending n + 1 views to `out`. */
NV_API nv_status nv_split_at(const nv_array *a, const int *indices, int n, int axis,
                             nv_vec *out);

/* The a.shape[axis] slices of `a` along `axis`, without that axis, appended to `out` (views).
 * Fails for a 0-d array. */
NV_API nv_status nv_unstack(const nv_array *a, int axis, nv_vec *out);

/* The `n` arrays joined along `axis`; every other dimension must match. The result dtype is
 * the promotion of all the inputs' dtypes (MLX's table), e.g. uint8 and float32 give float32.
 * Fails for n == 0 or mismatched shapes. */
NV_API nv_array *nv_concatenate(const nv_array *const *xs, int n, int axis);

/* nv_concatenate of the flattened arrays (MLX's concatenate with axis None). */
NV_API nv_array *nv_concatenate_flat(const nv_array *const *xs, int n);

/* The `n` arrays (all of one shape) stacked along a new axis `axis` of the result; dtypes
 * promote as in nv_concatenate. */
NV_API nv_array *nv_stack(const nv_array *const *xs, int n, int axis);

/* Each element of `a` repeated `repeats` times along `axis` (nv_repeat_flat: of the flattened
 * a). repeats 0 gives that axis size 0 (NumPy's shape; MLX returns shape (0,)). Fails for
 * negative repeats. */
NV_API nv_array *nv_repeat(const nv_array *a, int repeats, int axis);
NV_API nv_array *nv_repeat_flat(const nv_array *a, int repeats);

/* `a` tiled `reps` times per axis, as MLX's tile (reps and shape align from the right; the
 * shorter one is padded with 1s). Fails for a negative rep. */
NV_API nv_array *nv_tile(const nv_array *a, const int *reps, int n);

/* `a` with two axes exchanged / with axis `source` moved to position `destination`. Views. */
NV_API nv_array *nv_swapaxes(const nv_array *a, int axis1, int axis2);
NV_API nv_array *nv_moveaxis(const nv_array *a, int source, int destination);

/* How nv_pad fills: a constant, the edge values repeated, a reflection without the edge
 * (NumPy's "reflect") or with it ("symmetric"). */
typedef enum nv_pad_mode {
  NV_PAD_CONSTANT = 0,
  NV_PAD_EDGE = 1,
  NV_PAD_REFLECT = 2,
  NV_PAD_SYMMETRIC = 3,
} nv_pad_mode;

/* `a` padded with low[i] elements before and high[i] after on each axis (n == a.ndim, or
 * n == 1 for the same widths on every axis), as MLX's pad. NV_PAD_CONSTANT fills with `value`
 * (a scalar array cast to a's dtype; NULL means 0). Fails for negative widths, and for a
 * non-constant mode that must pad an empty axis. */
NV_API nv_array *nv_pad(const nv_array *a, const int *low, const int *high, int n,
                        nv_pad_mode mode, const nv_array *value);

/* Each of the `n` arrays broadcast to their common shape, appended to `out` (views). Fails
 * when the shapes do not broadcast. */
NV_API nv_status nv_broadcast_arrays(const nv_array *const *xs, int n, nv_vec *out);

/* `a` with at least 1 / 2 / 3 dimensions: a 0-d array becomes (1,) / (1,1) / (1,1,1), a 1-D
 * (n,) becomes (1,n) / (1,n,1), a 2-D (m,n) becomes (m,n,1) for 3-D. Views. */
NV_API nv_array *nv_atleast_1d(const nv_array *a);
NV_API nv_array *nv_atleast_2d(const nv_array *a);
NV_API nv_array *nv_atleast_3d(const nv_array *a);

/* `a` rolled by shift[i] along axes[i] (elements leaving one end come back at the other), as
 * MLX's roll. axes NULL rolls the flattened array by the sum of the shifts and restores the
 * shape; one shift applies to every listed axis; one axis with several shifts rolls by their
 * sum. */
NV_API nv_array *nv_roll(const nv_array *a, const int *shift, int nshift, const int *axes,
                         int naxes);

/* The n-th discrete difference along `axis`: out[i] = a[i+1] - a[i], applied n times, as
 * MLX's diff; `prepend` / `append` (NULL: none) are joined to `a` along the axis first, as
 * NumPy (a 0-d one is broadcast to length 1 on the axis). The dtype is a's (after promotion
 * with prepend/append); integers wrap, bool gives a[i+1] != a[i]. n larger than the axis
 * gives an empty axis. Fails for n < 0 or a 0-d `a`. */
NV_API nv_array *nv_diff(const nv_array *a, int n, int axis, const nv_array *prepend,
                         const nv_array *append);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_INDEX_H */
