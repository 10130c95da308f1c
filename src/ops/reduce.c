/* Reduction builders. */
#include "ops/ops_internal.h"

/* Normalizes `axes` (NULL: all) into sorted distinct axes; NULL on success, else the error. */
static nv_array *reduce_axes(const char *op, const nv__output *o, const int *axes, int naxes,
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

nv_array *nv_sum(const nv_array *x, const int *axes, int naxes, bool keepdims) {
  nv_array *f = nv__op_check("sum", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int ax[NV__MAX_DIMS], nax = 0;
  if ((f = reduce_axes("sum", o, axes, naxes, ax, &nax))) return f;
  nv_dtype dt = o->dtype == NV_DTYPE_BOOL ? NV_DTYPE_INT32 : o->dtype;
  int shape[NV__MAX_DIMS], nd = 0;
  for (int i = 0, j = 0; i < o->ndim; i++) {
    bool red = j < nax && ax[j] == i;
    if (red) j++;
    if (!red) shape[nd++] = o->shape[i];
    else if (keepdims) shape[nd++] = 1;
  }
  nv_array *in = nv__cast_unscoped(x, dt);
  nv__node *n = nv__op_node(NV__PRIM_SUM, &in, 1, dt, shape, nd,
                            sizeof(nv__reduce_params) + (size_t)nax * sizeof(int));
  nv_release(in);
  if (n) {
    nv__reduce_params *p = n->params;
    p->keepdims = keepdims;
    p->naxes = nax;
    for (int i = 0; i < nax; i++) p->axes[i] = ax[i];
  }
  return nv__op_finish("sum", n);
}
