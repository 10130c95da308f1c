/* Creation builders: full, zeros, ones (+ _like), arange, linspace, eye, identity. */
#include <math.h>

#include "ops/ops_internal.h"

static nv_array *check_shape(const char *op, const int *shape, int ndim) {
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim && !shape))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid number of dimensions %d", ndim);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "negative dimension %d in axis %d",
                          shape[i], i);
  return NULL;
}

nv_array *nv_full_array(const int *shape, int ndim, const nv_array *vals, nv_dtype dtype) {
  nv_array *f = nv__op_check("full", &vals, 1);
  if (f) return f;
  if ((f = check_shape("full", shape, ndim))) return f;
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "full", "invalid dtype %d", (int)dtype);
  nv__output *v = nv__out(vals);
  int bs[NV__MAX_DIMS], bn;
  bool ok = v->ndim <= ndim && nv__broadcast_shapes(v->shape, v->ndim, shape, ndim, bs, &bn);
  for (int i = 0; ok && i < ndim; i++) ok = bs[i] == shape[i];
  if (!ok) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "full", "values of shape %s cannot fill %s",
                        nv__shape_str(v->shape, v->ndim, s1, sizeof s1),
                        nv__shape_str(shape, ndim, s2, sizeof s2));
  }
  nv_array *c = nv__cast_unscoped(vals, dtype);
  nv__node *n = nv__op_node(NV__PRIM_FULL, &c, 1, dtype, shape, ndim, 0);
  nv_release(c);
  return nv__op_finish("full", n);
}

nv_array *nv_full(const int *shape, int ndim, double value, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "full", "invalid dtype %d", (int)dtype);
  nv__scope_suspend();
  nv_array *v = nv_array_scalar(value, dtype);
  nv__scope_resume();
  nv_array *r = nv_full_array(shape, ndim, v, dtype);
  nv_release(v);
  return r;
}

nv_array *nv_zeros(const int *shape, int ndim, nv_dtype dtype) {
  return nv_full(shape, ndim, 0.0, dtype);
}
nv_array *nv_ones(const int *shape, int ndim, nv_dtype dtype) {
  return nv_full(shape, ndim, 1.0, dtype);
}

static nv_array *like(const nv_array *x, double v) {
  nv_array *f = nv__op_check("full_like", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  if ((f = nv__op_inherit(&x, 1, o->dtype, o->shape, o->ndim))) return f;
  return nv_full(o->shape, o->ndim, v, o->dtype);
}
nv_array *nv_zeros_like(const nv_array *x) { return like(x, 0.0); }
nv_array *nv_ones_like(const nv_array *x) { return like(x, 1.0); }
nv_array *nv_full_like(const nv_array *x, double value) { return like(x, value); }

nv_array *nv_arange(double start, double stop, double step, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "arange", "invalid dtype %d", (int)dtype);
  if (dtype == NV_DTYPE_BOOL)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "arange", "bool is not supported");
  if (!isfinite(start) || !isfinite(stop) || isnan(step))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "arange",
                        "start and stop must be finite and step a number");
  if (step == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "arange", "step must be nonzero");
  /* An infinite step takes one element (start) toward stop and none away from it (MLX). */
  bool inf_step = isinf(step);
  double len = inf_step ? ((stop > start && step > 0) || (stop < start && step < 0) ? 1 : 0)
                        : ceil((stop - start) / step);
  if (inf_step) step = 0; /* the one element is start + 0 * step: keep it start, not NaN */
  if (len < 0) len = 0;
  if (len > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "arange",
                        "%.0f elements exceed the largest dimension", len);
  int shape[1] = {(int)len};
  nv__node *n = nv__op_node(NV__PRIM_ARANGE, NULL, 0, dtype, shape, 1, sizeof(nv__arange_params));
  if (n) {
    /* For an integer dtype start and step are converted to it first (MLX): the length comes
     * from the real values, the elements from the converted ones, so arange(0, 3, 0.2,
     * int32) is fifteen zeros. */
    bool integral = nv_issubdtype(dtype, NV_CATEGORY_INTEGER);
    nv__arange_params *p = n->params;
    p->start = integral ? trunc(start) : start;
    p->step = integral ? trunc(step) : step;
  }
  return nv__op_finish("arange", n);
}

nv_array *nv_linspace(double start, double stop, int num, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "linspace", "invalid dtype %d", (int)dtype);
  if (num < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "linspace", "num must be non-negative, got %d",
                        num);
  /* linspace is arange(0, num) * step + start with the last value exactly `stop`, computed in
   * float64 and converted once. */
  double step = num > 1 ? (stop - start) / (num - 1) : 0;
  int shape[1] = {num};
  nv__node *n = nv__op_node(NV__PRIM_ARANGE, NULL, 0, dtype, shape, 1, sizeof(nv__arange_params));
  if (n) {
    nv__arange_params *p = n->params;
    p->start = start;
    p->step = step;
  }
  nv_array *r = nv__op_finish("linspace", n);
  if (num <= 1 || nv_array_status(r) != NV_OK) return r;
  /* The last element is `stop` itself. */
  nv__scope_suspend();
  nv_array *last = nv_array_scalar(stop, dtype);
  int s0[1] = {num - 1}, s1[1] = {num};
  nv_array *u = nv_slice_update(r, last, s0, s1, NULL, 1);
  nv__scope_resume();
  nv_release(last);
  nv_release(r);
  /* `u` is unscoped: hand it to the caller's scope like any builder result. */
  nv__scope_register(u);
  return u;
}

nv_array *nv_eye(int n, int m, int k, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "eye", "invalid dtype %d", (int)dtype);
  if (m < 0) m = n;
  if (n < 0 || m < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "eye",
                        "N and M must not be negative, got %d and %d", n, m);
  int shape[2] = {n, m};
  nv__node *node = nv__op_node(NV__PRIM_EYE, NULL, 0, dtype, shape, 2, sizeof(nv__eye_params));
  if (node) ((nv__eye_params *)node->params)->k = k;
  return nv__op_finish("eye", node);
}

nv_array *nv_identity(int n, nv_dtype dtype) { return nv_eye(n, n, 0, dtype); }
