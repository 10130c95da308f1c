/* Reduction builders: the plain reductions that share the CPU reduction engine (sum, prod, max,
 * min, all, any, mean, count_nonzero) and the row reductions (var, std, median, logsumexp,
 * argmax, argmin), plus trace composed from them. Dtype rules are MLX's (include/nuvec/reduce.h). */
#include <math.h>

#include "ops/ops_internal.h"
#include "ops/reduce_internal.h"

nv_array *nv__reduce_axes(const char *op, const nv__output *o, const int *axes, int naxes,
                          int *out, int *nout) {
  bool seen[NV__MAX_DIMS] = {false};
  if (!axes) {
    for (int i = 0; i < o->ndim; i++) seen[i] = true;
  } else {
    if (naxes < 0 || naxes > NV__MAX_DIMS)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid number of axes %d", naxes);
    for (int i = 0; i < naxes; i++) {
      int a = axes[i];
      if (!nv__norm_axis(&a, o->ndim)) {
        char s[NV__SHAPE_BUF];
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shape %s",
                            axes[i], nv__shape_str(o->shape, o->ndim, s, sizeof s));
      }
      if (seen[a])
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is repeated", axes[i]);
      seen[a] = true;
    }
  }
  int n = 0;
  for (int i = 0; i < o->ndim; i++)
    if (seen[i]) out[n++] = i;
  *nout = n;
  return NULL;
}

int nv__reduced_shape(const nv__output *o, const int *ax, int nax, bool keepdims, int *shape) {
  int nd = 0;
  for (int i = 0, j = 0; i < o->ndim; i++) {
    bool red = j < nax && ax[j] == i;
    if (red) j++;
    if (!red) shape[nd++] = o->shape[i];
    else if (keepdims) shape[nd++] = 1;
  }
  return nd;
}

nv_dtype nv__at_least_float(nv_dtype dt) {
  return nv_issubdtype(dt, NV_CATEGORY_INEXACT) ? dt : NV_DTYPE_FLOAT32;
}

nv_array *nv__rows_node(int prim, nv_array *in, nv_dtype dt, const int *shape, int nd,
                        const int *ax, int nax, nv__rows_params **params) {
  const char *op = nv__prims[prim].name;
  nv__node *n = nv__op_node(prim, &in, 1, dt, shape, nd,
                            sizeof(nv__rows_params) + (size_t)nax * sizeof(int));
  if (!n) return nv__op_finish(op, NULL);
  nv__rows_params *p = n->params;
  p->naxes = nax;
  for (int i = 0; i < nax; i++) p->axes[i] = ax[i];
  *params = p;
  return nv__op_finish(op, n);
}

/* The dtype MLX sums and multiplies `dt` in: bool, int8 and int16 widen to int32, uint8 and
 * uint16 to uint32; wider types keep theirs. */
static nv_dtype sum_dtype(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_INT8:
    case NV_DTYPE_INT16: return NV_DTYPE_INT32;
    case NV_DTYPE_UINT8:
    case NV_DTYPE_UINT16: return NV_DTYPE_UINT32;
    default: return dt;
  }
}

/* The plain reductions: one node over the reduction engine, the input cast where MLX's result
 * dtype asks for it (small integers sum in 32 bits; integer means compute in float32), so the
 * kernels only ever see their result dtype. */
static nv_array *plain_reduce(int prim, const nv_array *x, const int *axes, int naxes,
                              bool keepdims) {
  const char *op = nv__prims[prim].name;
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax = 0;
  if ((f = nv__reduce_axes(op, o, axes, naxes, ax, &nax))) return f;
  nv_dtype in_dt = o->dtype, out_dt = o->dtype;
  switch (prim) {
    case NV__PRIM_SUM:
    case NV__PRIM_PROD:
      in_dt = out_dt = sum_dtype(in_dt);
      break;
    case NV__PRIM_MAX:
    case NV__PRIM_MIN: {
      /* An empty reduced axis has no maximum (NumPy, MLX); empty rows over a non-empty axis
       * give an empty result. */
      int64_t len = 1;
      for (int i = 0; i < nax; i++) len *= o->shape[ax[i]];
      if (len == 0)
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "cannot %s-reduce an empty axis", op);
      break;
    }
    case NV__PRIM_ALL:
    case NV__PRIM_ANY: out_dt = NV_DTYPE_BOOL; break;
    case NV__PRIM_MEAN: in_dt = out_dt = nv__at_least_float(in_dt); break;
    case NV__PRIM_COUNT_NONZERO: out_dt = NV_DTYPE_INT32; break;
    default: break;
  }
  int shape[NV__MAX_DIMS];
  int nd = nv__reduced_shape(o, ax, nax, keepdims, shape);
  nv_array *in = nv__cast_unscoped(x, in_dt);
  nv__node *n = nv__op_node(prim, &in, 1, out_dt, shape, nd,
                            sizeof(nv__reduce_params) + (size_t)nax * sizeof(int));
  nv_release(in);
  if (n) {
    nv__reduce_params *p = n->params;
    p->keepdims = keepdims;
    p->naxes = nax;
    for (int i = 0; i < nax; i++) p->axes[i] = ax[i];
  }
  return nv__op_finish(op, n);
}

nv_array *nv_sum(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_SUM, x, axes, naxes, keepdims);
}
nv_array *nv_prod(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_PROD, x, axes, naxes, keepdims);
}
nv_array *nv_max(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_MAX, x, axes, naxes, keepdims);
}
nv_array *nv_min(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_MIN, x, axes, naxes, keepdims);
}
nv_array *nv_all(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_ALL, x, axes, naxes, keepdims);
}
nv_array *nv_any(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_ANY, x, axes, naxes, keepdims);
}
nv_array *nv_mean(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_MEAN, x, axes, naxes, keepdims);
}
nv_array *nv_count_nonzero(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return plain_reduce(NV__PRIM_COUNT_NONZERO, x, axes, naxes, keepdims);
}

/* Row reductions: each output reduces one row (the elements over the reduced axes, in
 * row-major order); the kernel gathers rows as it needs them, so the input is never cast. */
static nv_array *row_reduce(int prim, const nv_array *x, const int *axes, int naxes,
                            bool keepdims, int ddof) {
  const char *op = nv__prims[prim].name;
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax = 0;
  if ((f = nv__reduce_axes(op, o, axes, naxes, ax, &nax))) return f;
  nv_dtype dt = nv__at_least_float(o->dtype);
  bool arg = prim == NV__PRIM_ARGMAX || prim == NV__PRIM_ARGMIN;
  if (arg) dt = NV_DTYPE_UINT32;
  if (o->dtype == NV_DTYPE_COMPLEX64 && !arg)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "complex64 is not supported");
  int64_t len = 1;
  for (int i = 0; i < nax; i++) len *= o->shape[ax[i]];
  /* logsumexp of an empty array fails (MLX); argmax/argmin only over an empty axis (NumPy). */
  if ((prim == NV__PRIM_LOGSUMEXP && o->size == 0) || (arg && len == 0))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "cannot reduce an empty %s",
                        arg ? "axis" : "array");
  if (arg && len > (int64_t)UINT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "reductions of %lld elements exceed uint32 indices", (long long)len);
  int shape[NV__MAX_DIMS];
  int nd = nv__reduced_shape(o, ax, nax, keepdims, shape);
  nv__rows_params *p = NULL;
  nv_array *r = nv__rows_node(prim, (nv_array *)x, dt, shape, nd, ax, nax, &p);
  if (!nv_array_status(r)) {
    p->keepdims = keepdims;
    p->ddof = ddof;
  }
  return r;
}

/* The variance of a complex64 `x`, as NumPy's and MLX's: the mean of |x - mean|^2, a float32,
 * which is var(real(x)) + var(imag(x)) — composed, so no kernel takes complex rows. */
static nv_array *complex_var(const nv_array *x, const int *axes, int naxes, bool keepdims,
                             int ddof) {
  nv__scope_suspend();
  nv_array *re = nv_real(x), *im = nv_imag(x);
  nv_array *vr = row_reduce(NV__PRIM_VAR, re, axes, naxes, keepdims, ddof);
  nv_array *vi = row_reduce(NV__PRIM_VAR, im, axes, naxes, keepdims, ddof);
  nv_release(re);
  nv_release(im);
  nv__scope_resume();
  nv_array *r = nv_add(vr, vi);
  nv_release(vr);
  nv_release(vi);
  return r;
}

static bool is_complex(const nv_array *x) {
  return nv_array_status(x) == NV_OK && nv_array_dtype(x) == NV_DTYPE_COMPLEX64;
}

nv_array *nv_var(const nv_array *x, const int *axes, int naxes, bool keepdims, int ddof) {
  if (x && is_complex(x)) return complex_var(x, axes, naxes, keepdims, ddof);
  return row_reduce(NV__PRIM_VAR, x, axes, naxes, keepdims, ddof);
}
nv_array *nv_std(const nv_array *x, const int *axes, int naxes, bool keepdims, int ddof) {
  if (x && is_complex(x)) {
    nv__scope_suspend();
    nv_array *v = complex_var(x, axes, naxes, keepdims, ddof);
    nv__scope_resume();
    nv_array *r = nv_sqrt(v);
    nv_release(v);
    return r;
  }
  return row_reduce(NV__PRIM_STD, x, axes, naxes, keepdims, ddof);
}
/* The median of a complex64 `x`, as MLX's: the reduced axes moved last and flattened, sorted
 * (lexicographically, real part first), the middle element or the mean of the two middle ones;
 * NaN when a row holds a NaN or is empty, as NumPy. Composed from existing ops. */
static nv_array *complex_median(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax = 0;
  nv_array *f = nv__reduce_axes("median", o, axes, naxes, ax, &nax);
  if (f) return f;
  int perm[NV__MAX_DIMS], rows[NV__MAX_DIMS + 1], nkeep = 0, out[NV__MAX_DIMS];
  bool red[NV__MAX_DIMS] = {false};
  for (int i = 0; i < nax; i++) red[ax[i]] = true;
  int64_t len = 1;
  for (int i = 0; i < o->ndim; i++)
    if (!red[i]) {
      perm[nkeep] = i;
      rows[nkeep++] = o->shape[i];
    } else {
      len *= o->shape[i];
    }
  for (int i = 0; i < nax; i++) perm[nkeep + i] = ax[i];
  if (len > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "median", "a reduction of %lld elements is too long",
                        (long long)len);
  rows[nkeep] = (int)len;
  int nd = nv__reduced_shape(o, ax, nax, keepdims, out), last = -1;
  nv__scope_suspend();
  nv_array *t = nv_transpose(x, perm, o->ndim);
  nv_array *flat = nv_reshape(t, rows, nkeep + 1);
  nv_array *sorted = nv_sort(flat, &last);
  int start[NV__MAX_DIMS + 1] = {0}, stop[NV__MAX_DIMS + 1], step[NV__MAX_DIMS + 1];
  for (int i = 0; i <= nkeep; i++) stop[i] = rows[i], step[i] = 1;
  /* The middle pair (one element twice for an odd count); an empty row takes none. */
  int64_t lo = len ? (len - 1) / 2 : 0, hi = len ? len / 2 : 0;
  start[nkeep] = (int)lo, stop[nkeep] = len ? (int)lo + 1 : 0;
  nv_array *a = nv_slice(sorted, start, stop, step, nkeep + 1);
  start[nkeep] = (int)hi, stop[nkeep] = len ? (int)hi + 1 : 0;
  nv_array *b = nv_slice(sorted, start, stop, step, nkeep + 1);
  nv_array *sum = nv_add(a, b), *half = nv_array_scalar(0.5, NV_DTYPE_COMPLEX64);
  nv_array *mid = nv_multiply(sum, half);
  /* A NaN anywhere in the row (or an empty row) gives NaN. */
  nv_array *isn = nv_isnan(flat);
  nv_array *anyn = nv_any(isn, &last, 1, true);
  nv_array *empty = nv_array_scalar(len == 0, NV_DTYPE_BOOL);
  nv_array *bad = nv_logical_or(anyn, empty);
  nv_array *nan = nv_array_scalar(NAN, NV_DTYPE_COMPLEX64);
  nv_array *m = nv_where(bad, nan, len ? mid : nan);
  nv_array *rel[] = {t, flat, sorted, a, b, sum, half, mid, isn, anyn, empty, bad, nan};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) nv_release(rel[i]);
  nv__scope_resume();
  nv_array *r = nv_reshape(m, out, nd);
  nv_release(m);
  return r;
}

nv_array *nv_median(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  if (x && is_complex(x)) return complex_median(x, axes, naxes, keepdims);
  return row_reduce(NV__PRIM_MEDIAN, x, axes, naxes, keepdims, 0);
}
nv_array *nv_logsumexp(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  return row_reduce(NV__PRIM_LOGSUMEXP, x, axes, naxes, keepdims, 0);
}
nv_array *nv_argmax(const nv_array *x, const int *axis, bool keepdims) {
  return row_reduce(NV__PRIM_ARGMAX, x, axis, axis ? 1 : 0, keepdims, 0);
}
nv_array *nv_argmin(const nv_array *x, const int *axis, bool keepdims) {
  return row_reduce(NV__PRIM_ARGMIN, x, axis, axis ? 1 : 0, keepdims, 0);
}

/* trace = sum over the last axis of the diagonal view: an as_strided view of x (cast to
 * `dtype` first, so the sum accumulates in it) whose last axis steps along both axes at once. */
nv_array *nv_trace(const nv_array *x, int offset, int axis1, int axis2, int dtype) {
  nv_array *f = nv__op_check("trace", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  char s[NV__SHAPE_BUF];
  if (o->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "trace", "needs at least 2 dimensions, got %s",
                        nv__shape_str(o->shape, o->ndim, s, sizeof s));
  int a1 = axis1, a2 = axis2;
  if (!nv__norm_axis(&a1, o->ndim) || !nv__norm_axis(&a2, o->ndim))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "trace", "axes (%d, %d) out of range for %s",
                        axis1, axis2, nv__shape_str(o->shape, o->ndim, s, sizeof s));
  if (a1 == a2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "trace", "axis1 and axis2 are both %d", a1);
  if (dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "trace", "invalid dtype %d", dtype);
  nv_dtype dt = dtype < 0 ? o->dtype : (nv_dtype)dtype;
  int64_t st[NV__MAX_DIMS];
  int shape[NV__MAX_DIMS], nd = 0;
  int64_t row = 1;
  for (int i = o->ndim - 1; i >= 0; i--) {
    st[i] = row;
    row *= o->shape[i];
  }
  int64_t sh[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) sh[i] = st[i];
  for (int i = 0; i < o->ndim; i++)
    if (i != a1 && i != a2) {
      shape[nd] = o->shape[i];
      st[nd++] = sh[i];
    }
  /* The diagonal starts at (0, offset) for offset >= 0, at (-offset, 0) below it. */
  int64_t r0 = offset < 0 ? -(int64_t)offset : 0, c0 = offset > 0 ? offset : 0;
  int64_t len = 0;
  if (r0 < o->shape[a1] && c0 < o->shape[a2]) {
    len = o->shape[a1] - r0 < o->shape[a2] - c0 ? o->shape[a1] - r0 : o->shape[a2] - c0;
  }
  int64_t start = len ? r0 * sh[a1] + c0 * sh[a2] : 0;
  shape[nd] = (int)len;
  st[nd++] = sh[a1] + sh[a2];
  /* The diagonal cast to `dt` and summed, so the result has sum's dtype for `dt` (a bool or
   * int8 trace is int32, as MLX's). */
  nv__scope_suspend();
  nv_array *c = nv_astype(x, dt);
  nv_array *d = nv_as_strided(c, shape, nd, st, start);
  nv_release(c);
  nv__scope_resume();
  int last = -1;
  nv_array *r = nv_sum(d, &last, 1, false);
  nv_release(d);
  return r;
}
