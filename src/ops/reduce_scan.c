/* Builders of the row operations whose result keeps the row: scans, softmax, sorts and
 * searchsorted. A NULL axis means the flattened array (the result is then 1-D). */
#include <limits.h>

#include "ops/reduce_internal.h"

/* The row axes for an optional single axis (NULL: all axes, flattened) and the result shape. */
static nv_array *row_axis(const char *op, const nv__output *o, const int *axis, int *ax,
                          int *nax, int *shape, int *nd) {
  *nax = *nd = 0; /* set on every path */
  if (axis) {
    int a = *axis;
    if (!nv__norm_axis(&a, o->ndim)) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shape %s",
                          *axis, nv__shape_str(o->shape, o->ndim, s, sizeof s));
    }
    ax[0] = a;
    *nax = 1;
    for (int i = 0; i < o->ndim; i++) shape[i] = o->shape[i];
    *nd = o->ndim;
    return NULL;
  }
  if (o->size > INT_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "cannot flatten %lld elements into one axis",
                        (long long)o->size);
  for (int i = 0; i < o->ndim; i++) ax[i] = i;
  *nax = o->ndim;
  shape[0] = (int)o->size;
  *nd = 1;
  return NULL;
}

/* The length of the rows: the axis's size, or the whole array's. */
static int64_t row_length(const nv__output *o, const int *ax, int nax) {
  int64_t n = 1;
  for (int i = 0; i < nax; i++) n *= o->shape[ax[i]];
  return n;
}

static nv_array *scan(int prim, const nv_array *x, const int *axis, bool reverse,
                      bool inclusive) {
  const char *op = nv__prims[prim].name;
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax, shape[NV__MAX_DIMS], nd;
  if ((f = row_axis(op, o, axis, ax, &nax, shape, &nd))) return f;
  nv_dtype dt = o->dtype;
  if (prim == NV__PRIM_CUMSUM && dt == NV_DTYPE_BOOL) dt = NV_DTYPE_INT32;
  if (prim == NV__PRIM_CUMPROD && dt == NV_DTYPE_BOOL) {
    /* MLX keeps bool: the running product of 0/1 values (a running "all"), computed in int32
     * by the existing kernel and cast back. */
    nv__scope_suspend();
    nv_array *c = nv_astype(x, NV_DTYPE_INT32);
    nv_array *i = scan(prim, c, axis, reverse, inclusive);
    nv_release(c);
    nv__scope_resume();
    nv_array *r = nv_astype(i, NV_DTYPE_BOOL);
    nv_release(i);
    return r;
  }
  if (prim == NV__PRIM_LOGCUMSUMEXP) {
    if (dt == NV_DTYPE_COMPLEX64)
      return nv__logcumsumexp_complex(x, axis ? ax[0] : -1, reverse, inclusive);
    dt = nv__at_least_float(dt);
  }
  nv__rows_params *p = NULL;
  nv_array *r = nv__rows_node(prim, (nv_array *)x, dt, shape, nd, ax, nax, &p);
  if (!nv_array_status(r)) {
    p->reverse = reverse;
    p->inclusive = inclusive;
  }
  return r;
}

nv_array *nv_cumsum(const nv_array *x, const int *axis, bool reverse, bool inclusive) {
  return scan(NV__PRIM_CUMSUM, x, axis, reverse, inclusive);
}
nv_array *nv_cumprod(const nv_array *x, const int *axis, bool reverse, bool inclusive) {
  return scan(NV__PRIM_CUMPROD, x, axis, reverse, inclusive);
}
nv_array *nv_cummax(const nv_array *x, const int *axis, bool reverse, bool inclusive) {
  return scan(NV__PRIM_CUMMAX, x, axis, reverse, inclusive);
}
nv_array *nv_cummin(const nv_array *x, const int *axis, bool reverse, bool inclusive) {
  return scan(NV__PRIM_CUMMIN, x, axis, reverse, inclusive);
}
nv_array *nv_logcumsumexp(const nv_array *x, const int *axis, bool reverse, bool inclusive) {
  return scan(NV__PRIM_LOGCUMSUMEXP, x, axis, reverse, inclusive);
}

nv_array *nv_softmax(const nv_array *x, const int *axes, int naxes, bool precise) {
  (void)precise; /* half types always compute in float32 (see the header) */
  nv_array *f = nv__op_check("softmax", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax = 0;
  if ((f = nv__reduce_axes("softmax", o, axes, naxes, ax, &nax))) return f;
  if (o->dtype == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "softmax", "complex64 is not supported");
  nv_dtype dt = nv__at_least_float(o->dtype);
  /* Cast first so that the evaluation may write the result into the cast's buffer. */
  nv_array *in = nv__cast_unscoped(x, dt);
  nv__rows_params *p = NULL;
  nv_array *r = nv__rows_node(NV__PRIM_SOFTMAX, in, dt, o->shape, o->ndim, ax, nax, &p);
  nv_release(in);
  return r;
}

static nv_array *sort_op(int prim, const nv_array *x, const int *axis, const int *kth) {
  const char *op = nv__prims[prim].name;
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax, shape[NV__MAX_DIMS], nd;
  if ((f = row_axis(op, o, axis, ax, &nax, shape, &nd))) return f;
  int64_t len = row_length(o, ax, nax);
  if (kth && (*kth < -len || *kth >= len))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "kth %d is out of range for length %lld",
                        *kth, (long long)len);
  bool arg = prim == NV__PRIM_ARGSORT || prim == NV__PRIM_ARGPARTITION;
  if (arg && len > (int64_t)UINT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "rows of %lld elements exceed uint32 indices",
                        (long long)len);
  nv__rows_params *p = NULL;
  return nv__rows_node(prim, (nv_array *)x, arg ? NV_DTYPE_UINT32 : o->dtype, shape, nd, ax, nax,
                       &p);
}

nv_array *nv_sort(const nv_array *x, const int *axis) {
  return sort_op(NV__PRIM_SORT, x, axis, NULL);
}
nv_array *nv_argsort(const nv_array *x, const int *axis) {
  return sort_op(NV__PRIM_ARGSORT, x, axis, NULL);
}
nv_array *nv_partition(const nv_array *x, int kth, const int *axis) {
  return sort_op(NV__PRIM_PARTITION, x, axis, &kth);
}
nv_array *nv_argpartition(const nv_array *x, int kth, const int *axis) {
  return sort_op(NV__PRIM_ARGPARTITION, x, axis, &kth);
}

/* Checks topk/argtopk's arguments: NULL when valid (with the row axis in *a and the result
 * shape), else the failed array naming `op`. */
static nv_array *argtopk_check(const char *op, const nv_array *x, int k, const int *axis,
                               int *ax, int *nax, int *shape, int *nd, int *a) {
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  if ((f = row_axis(op, o, axis, ax, nax, shape, nd))) return f;
  *a = axis ? ax[0] : 0;
  int len = shape[*a];
  if (k < 0 || k > len)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "k %d is out of range for length %d", k,
                        len);
  shape[*a] = k;
  return NULL;
}

static nv_array *argtopk_node(const nv_array *x, int k, const int *ax, int nax,
                              const int *shape, int nd) {
  nv__rows_params *p = NULL;
  nv_array *r = nv__rows_node(NV__PRIM_ARGTOPK, (nv_array *)x, NV_DTYPE_UINT32, shape, nd, ax,
                              nax, &p);
  if (!nv_array_status(r)) p->k = k;
  return r;
}

nv_array *nv__argtopk(const nv_array *x, int k, const int *axis) {
  int ax[NV__MAX_DIMS], nax, shape[NV__MAX_DIMS], nd, a;
  nv_array *f = argtopk_check("argtopk", x, k, axis, ax, &nax, shape, &nd, &a);
  return f ? f : argtopk_node(x, k, ax, nax, shape, nd);
}

/* The values at argtopk's indices (a selection in O(n) per row for small k, rather than a
 * sort); the gradient flows through take_along_axis. */
nv_array *nv_topk(const nv_array *x, int k, const int *axis) {
  int ax[NV__MAX_DIMS], nax, shape[NV__MAX_DIMS], nd, a;
  nv_array *f = argtopk_check("topk", x, k, axis, ax, &nax, shape, &nd, &a);
  if (f) return f;
  nv__scope_suspend();
  int flat = -1;
  nv_array *idx = argtopk_node(x, k, ax, nax, shape, nd);
  nv_array *src = axis ? nv_retain((nv_array *)x) : nv_reshape(x, &flat, 1);
  nv__scope_resume();
  nv_array *r = nv_take_along_axis(src, idx, a);
  nv_release(idx);
  nv_release(src);
  return r;
}

nv_array *nv_searchsorted(const nv_array *a, const nv_array *v, bool right) {
  const nv_array *xs[2] = {a, v};
  nv_array *f = nv__op_check("searchsorted", xs, 2);
  if (f) return f;
  nv__output *oa = nv__out(a), *ov = nv__out(v);
  if (oa->ndim != 1) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "searchsorted", "a must be 1-D, got shape %s",
                        nv__shape_str(oa->shape, oa->ndim, s, sizeof s));
  }
  nv_dtype dt = nv__result_type(a, v);
  nv_array *in[2] = {nv__cast_unscoped(a, dt), nv__cast_unscoped(v, dt)};
  nv__node *n = nv__op_node(NV__PRIM_SEARCHSORTED, in, 2, NV_DTYPE_UINT32, ov->shape, ov->ndim,
                            sizeof(nv__rows_params));
  nv_release(in[0]);
  nv_release(in[1]);
  if (n) ((nv__rows_params *)n->params)->right = right;
  return nv__op_finish("searchsorted", n);
}
