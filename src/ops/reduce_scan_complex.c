/* logcumsumexp of complex64 (NumPy's log(cumsum(exp(z))), as MLX), composed: an inclusive
 * Hillis-Steele scan of ceil(log2(n)) steps, each combining every element with the one `s`
 * before it (-inf + 0j, the identity, where there is none) by the complex logaddexp, which
 * shifts by the larger real part, so no prefix overflows or underflows the way exp then cumsum
 * would. Its kernels (logaddexp, slices, concatenation) and transforms are those ops'. */
#include <math.h>
#include <string.h>

#include "ops/reduce_internal.h"

/* x along `axis` (of nd) from `lo` to `hi`, by `step` (views). */
static nv_array *part(nv_array *x, int axis, int nd, int lo, int hi, int step) {
  int start[NV__MAX_DIMS], stop[NV__MAX_DIMS], strides[NV__MAX_DIMS];
  const int *shape = nv_array_shape(x);
  for (int i = 0; i < nd; i++) {
    start[i] = 0;
    stop[i] = shape[i];
    strides[i] = 1;
  }
  start[axis] = lo;
  stop[axis] = hi;
  strides[axis] = step;
  return nv_slice(x, start, stop, strides, nd);
}

/* x reversed along `axis` (n elements): from n - 1 down past 0. */
static nv_array *flip(nv_array *x, int axis, int nd, int n) {
  return part(x, axis, nd, n - 1, -(n + 1), -1);
}

/* x shifted by s along `axis` (n elements): s identities, then x[0 .. n - s). */
static nv_array *shifted(nv_array *x, int axis, int nd, int n, int s) {
  int shape[NV__MAX_DIMS];
  memcpy(shape, nv_array_shape(x), (size_t)nd * sizeof(int));
  shape[axis] = s;
  nv_array *parts[2] = {nv_full(shape, nd, -INFINITY, NV_DTYPE_COMPLEX64),
                        part(x, axis, nd, 0, n - s, 1)};
  return nv_concatenate((const nv_array *const *)parts, 2, axis);
}

nv_array *nv__logcumsumexp_complex(const nv_array *x, int axis, bool reverse, bool inclusive) {
  if (nv_scope_begin() != NV_OK)
    return nv__op_error(NV_ERR_OUT_OF_MEMORY, "logcumsumexp", "out of memory");
  nv_array *y = (nv_array *)x;
  if (axis < 0) {
    int flat = -1;
    y = nv_reshape(y, &flat, 1);
    axis = 0;
  }
  int nd = nv_array_ndim(y), n = nv_array_shape(y)[axis];
  if (reverse && n > 0) y = flip(y, axis, nd, n);
  for (int s = 1; s < n; s *= 2) {
    y = nv_logaddexp(y, shifted(y, axis, nd, n, s));
    if (s > n / 2) break; /* s * 2 would reach n (and must not overflow int) */
  }
  if (!inclusive && n > 0) y = shifted(y, axis, nd, n, 1);
  if (reverse && n > 0) y = flip(y, axis, nd, n);
  /* A new handle even when nothing was computed (n <= 1, inclusive). */
  y = nv_scope_keep(y == x ? nv_astype(x, NV_DTYPE_COMPLEX64) : y);
  nv_scope_end();
  return y;
}
