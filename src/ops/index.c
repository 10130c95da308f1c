/* Index builders: take, take_along_axis, put_along_axis, gather, scatter*, masked_scatter,
 * dynamic slices, slice_update_*, diagonal, diag. The rules are in include/nuvec/index.h. */
#include "ops/index_common.h"

nv_array *nv__ix_same(const nv_array *x) {
  return nv__array_new(nv__node_retain(x->node), x->idx);
}

nv_array *nv__ix_check_indices(const char *op, const nv_array *idx) {
  nv_dtype dt = nv__out(idx)->dtype;
  if (!nv_issubdtype(dt, NV_CATEGORY_INTEGER))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "indices must be integers, got %s",
                        nv_dtype_name(dt));
  return NULL;
}

nv_array *nv__ix_bad_axis(const char *op, int axis, int ndim) {
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid axis %d for an array with %d dimensions",
                      axis, ndim);
}

nv_array *nv__ix_broadcast(const nv_array *x, const int *shape, int ndim) {
  const nv__output *o = nv__out(x);
  nv__scope_suspend();
  nv_array *r = o->ndim == ndim && !memcmp(o->shape, shape, (size_t)ndim * sizeof(int))
                    ? nv_retain((nv_array *)x)
                    : nv_broadcast_to(x, shape, ndim);
  nv__scope_resume();
  return r;
}

void nv__ix_release_all(nv_array **xs, int n) {
  for (int i = 0; i < n; i++) nv_release(xs[i]);
}

nv_array *nv__ix_view(int prim, const nv_array *x, const int *shape, int ndim,
                      const int64_t *strides, int64_t delta, const int *axes, int naxes) {
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(prim, in, 1, nv__out(x)->dtype, shape, ndim,
                            sizeof(nv__view_params) + (size_t)naxes * sizeof(int));
  if (!n) return nv__op_finish(nv__prims[prim].name, NULL);
  nv__output_set_strides(&n->out[0], strides);
  nv__view_params *p = n->params;
  p->delta = delta;
  p->copy = false;
  p->ndim = naxes;
  memcpy(p->axes, axes, sizeof(int) * (size_t)naxes);
  return nv__array_new(n, 0);
}

/* ---- take ---- */

nv_array *nv_take(const nv_array *a, const nv_array *indices, int axis) {
  const nv_array *xs[2] = {a, indices};
  nv_array *f = nv__op_check("take", xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(a), *im = nv__out(indices);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim)) return nv__ix_bad_axis("take", axis, o->ndim);
  if ((f = nv__ix_check_indices("take", indices))) return f;
  if (o->shape[ax] == 0 && im->size != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "take",
                        "cannot take %lld elements from an empty axis", (long long)im->size);
  int nd = o->ndim - 1 + im->ndim, shape[NV__MAX_DIMS];
  if (nd > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "take", "the result has too many dimensions");
  for (int i = 0; i < ax; i++) shape[i] = o->shape[i];
  for (int i = 0; i < im->ndim; i++) shape[ax + i] = im->shape[i];
  for (int i = ax + 1; i < o->ndim; i++) shape[im->ndim + i - 1] = o->shape[i];
  /* The kernel reads the indices in row-major order. */
  nv__scope_suspend();
  nv_array *ic = nv_contiguous(indices);
  nv__scope_resume();
  nv_array *in[2] = {(nv_array *)a, ic};
  nv__node *n = nv__op_node(NV__PRIM_TAKE, in, 2, o->dtype, shape, nd, sizeof(nv__axis_params));
  nv_release(ic);
  if (n) ((nv__axis_params *)n->params)->axis = ax;
  return nv__op_finish("take", n);
}

nv_array *nv_take_flat(const nv_array *a, const nv_array *indices) {
  const nv_array *xs[2] = {a, indices};
  nv_array *f = nv__op_check("take", xs, 2);
  if (f) return f;
  int flat = -1;
  nv__scope_suspend();
  nv_array *x = nv_reshape(a, &flat, 1);
  nv__scope_resume();
  nv_array *r = nv_take(x, indices, 0);
  nv_release(x);
  return r;
}

/* ---- take_along_axis / put_along_axis ---- */

/* The shape over which `a` and the index-like arrays broadcast, except on `axis`, where the
 * entry is `axis_size`. False if a non-axis dimension does not broadcast. */
static bool along_shape(const int *a, const int *b, int nd, int axis, int axis_size, int *out) {
  for (int d = 0; d < nd; d++) {
    if (d == axis) out[d] = axis_size;
    else if (a[d] == b[d] || b[d] == 1) out[d] = a[d];
    else if (a[d] == 1) out[d] = b[d];
    else return false;
  }
  return true;
}

nv_array *nv_take_along_axis(const nv_array *a, const nv_array *indices, int axis) {
  const nv_array *xs[2] = {a, indices};
  nv_array *f = nv__op_check("take_along_axis", xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(a), *im = nv__out(indices);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim)) return nv__ix_bad_axis("take_along_axis", axis, o->ndim);
  if ((f = nv__ix_check_indices("take_along_axis", indices))) return f;
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  int oshape[NV__MAX_DIMS], ashape[NV__MAX_DIMS];
  if (im->ndim != o->ndim || !along_shape(o->shape, im->shape, o->ndim, ax, im->shape[ax], oshape))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "take_along_axis",
                        "indices of shape %s do not match an array of shape %s on axis %d",
                        nv__shape_str(im->shape, im->ndim, s1, sizeof s1),
                        nv__shape_str(o->shape, o->ndim, s2, sizeof s2), axis);
  memcpy(ashape, oshape, sizeof(int) * (size_t)o->ndim);
  ashape[ax] = o->shape[ax];
  nv_array *in[2] = {nv__ix_broadcast(a, ashape, o->ndim),
                     nv__ix_broadcast(indices, oshape, o->ndim)};
  nv__node *n = nv__op_node(NV__PRIM_GATHER_AXIS, in, 2, o->dtype, oshape, o->ndim,
                            sizeof(nv__axis_params));
  nv__ix_release_all(in, 2);
  if (n) ((nv__axis_params *)n->params)->axis = ax;
  return nv__op_finish("take_along_axis", n);
}

nv_array *nv_put_along_axis(const nv_array *a, const nv_array *indices, const nv_array *values,
                            int axis) {
  const char *op = "put_along_axis";
  const nv_array *xs[3] = {a, indices, values};
  nv_array *f = nv__op_check(op, xs, 3);
  if (f) return f;
  const nv__output *o = nv__out(a), *im = nv__out(indices), *vm = nv__out(values);
  int ax = axis, nd = o->ndim;
  if (!nv__norm_axis(&ax, nd)) return nv__ix_bad_axis(op, axis, nd);
  if ((f = nv__ix_check_indices(op, indices))) return f;
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF], s3[NV__SHAPE_BUF];
  /* Values may carry extra leading axes of size 1 (MLX squeezes them). */
  int lead = vm->ndim - nd, vshape[NV__MAX_DIMS], bshape[NV__MAX_DIMS], bn;
  bool ok = im->ndim == nd;
  for (int d = 0; ok && d < lead; d++) ok = vm->shape[d] == 1;
  int vn = lead > 0 ? nd : vm->ndim;
  for (int d = 0; d < vn; d++) vshape[d] = vm->shape[d + (lead > 0 ? lead : 0)];
  ok = ok && nv__broadcast_shapes(im->shape, nd, vshape, vn, bshape, &bn);
  int oshape[NV__MAX_DIMS], ushape[NV__MAX_DIMS];
  ok = ok && along_shape(o->shape, bshape, nd, ax, o->shape[ax], oshape);
  if (!ok)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "indices %s and values %s do not match an array of shape %s on axis %d",
                        nv__shape_str(im->shape, im->ndim, s1, sizeof s1),
                        nv__shape_str(vm->shape, vm->ndim, s2, sizeof s2),
                        nv__shape_str(o->shape, nd, s3, sizeof s3), axis);
  memcpy(ushape, oshape, sizeof(int) * (size_t)nd);
  ushape[ax] = bshape[ax];
  nv__scope_suspend();
  nv_array *vc = nv__cast_unscoped(values, o->dtype);
  nv_array *vr = nv_reshape(vc, vshape, vn);
  nv__scope_resume();
  nv_array *in[3] = {nv__ix_broadcast(a, oshape, nd), nv__ix_broadcast(indices, ushape, nd),
                     nv__ix_broadcast(vr, ushape, nd)};
  nv_release(vc);
  nv_release(vr);
  nv__node *n = nv__op_node(NV__PRIM_SCATTER_AXIS, in, 3, o->dtype, oshape, nd,
                            sizeof(nv__axis_params));
  nv__ix_release_all(in, 3);
  if (n) ((nv__axis_params *)n->params)->axis = ax;
  return nv__op_finish(op, n);
}

/* ---- gather / scatter ---- */

/* Checks the index arrays and axes of a gather or scatter of `a`; writes the normalized axes
 * and the broadcast index shape. NULL when they are valid, else the failed array. */
static nv_array *check_index_set(const char *op, const nv_array *a, const nv_array *const *idx,
                                 int nidx, const int *axes, int *naxes, int *ishape, int *ind) {
  const nv__output *o = nv__out(a);
  if (nidx < 0 || (nidx > 0 && (!idx || !axes)))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid index arrays or axes");
  if (nidx > o->ndim)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "%d index arrays for an array with %d dimensions", nidx, o->ndim);
  nv_array *f = nv__op_check(op, idx, nidx);
  if (f) return f;
  bool seen[NV__MAX_DIMS] = {false};
  *ind = 0;
  for (int j = 0; j < nidx; j++) {
    int ax = axes[j];
    if (!nv__norm_axis(&ax, o->ndim) || seen[ax])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "invalid or repeated axis %d for an array with %d dimensions", axes[j],
                          o->ndim);
    seen[ax] = true;
    naxes[j] = ax;
    if ((f = nv__ix_check_indices(op, idx[j]))) return f;
    const nv__output *im = nv__out(idx[j]);
    int tmp[NV__MAX_DIMS], tn;
    if (!nv__broadcast_shapes(ishape, *ind, im->shape, im->ndim, tmp, &tn))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the index arrays do not broadcast");
    memcpy(ishape, tmp, sizeof(int) * (size_t)tn);
    *ind = tn;
  }
  return NULL;
}

nv_array *nv_gather(const nv_array *a, const nv_array *const *indices, int nidx, const int *axes,
                    const int *slice_sizes, int nslice) {
  nv_array *f = nv__op_check("gather", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int naxes[NV__MAX_DIMS], ishape[NV__MAX_DIMS], ind;
  if ((f = check_index_set("gather", a, indices, nidx, axes, naxes, ishape, &ind))) return f;
  char s1[NV__SHAPE_BUF];
  if (nslice != o->ndim || (nslice && !slice_sizes))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "gather",
                        "%d slice sizes for an array of shape %s", nslice,
                        nv__shape_str(o->shape, o->ndim, s1, sizeof s1));
  for (int d = 0; d < o->ndim; d++)
    if (slice_sizes[d] < 0 || slice_sizes[d] > o->shape[d])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "gather",
                          "slice size %d on axis %d is outside [0, %d] (array shape %s)",
                          slice_sizes[d], d, o->shape[d],
                          nv__shape_str(o->shape, o->ndim, s1, sizeof s1));
  if (ind + o->ndim > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "gather", "the result has too many dimensions");
  int shape[NV__MAX_DIMS];
  memcpy(shape, ishape, sizeof(int) * (size_t)ind);
  memcpy(shape + ind, slice_sizes, sizeof(int) * (size_t)o->ndim);
  nv_array *in[NV__MAX_DIMS + 1];
  in[0] = (nv_array *)a;
  for (int j = 0; j < nidx; j++) in[j + 1] = (nv_array *)indices[j];
  nv__node *n = nv__op_node(NV__PRIM_GATHER, in, nidx + 1, o->dtype, shape, ind + o->ndim,
                            sizeof(nv__gather_params) + (size_t)nidx * sizeof(int));
  if (n) {
    nv__gather_params *p = n->params;
    p->naxes = nidx;
    memcpy(p->data, naxes, sizeof(int) * (size_t)nidx);
  }
  return nv__op_finish("gather", n);
}

static nv_array *scatter_impl(int prim, const nv_array *a, const nv_array *const *indices,
                              int nidx, const nv_array *updates, const int *axes) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[2] = {a, updates};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(a), *um = nv__out(updates);
  int naxes[NV__MAX_DIMS], ishape[NV__MAX_DIMS], ind;
  if ((f = check_index_set(op, a, indices, nidx, axes, naxes, ishape, &ind))) return f;
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF], s3[NV__SHAPE_BUF];
  bool ok = um->ndim == o->ndim + ind;
  for (int d = 0; ok && d < ind; d++) ok = um->shape[d] == ishape[d];
  for (int d = 0; ok && d < o->ndim; d++) ok = um->shape[ind + d] <= o->shape[d];
  if (!ok)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "updates of shape %s do not fit the index shape %s followed by a slice "
                        "of an array of shape %s",
                        nv__shape_str(um->shape, um->ndim, s1, sizeof s1),
                        nv__shape_str(ishape, ind, s2, sizeof s2),
                        nv__shape_str(o->shape, o->ndim, s3, sizeof s3));
  nv_array *in[NV__MAX_DIMS + 2];
  in[0] = (nv_array *)a;
  for (int j = 0; j < nidx; j++) in[j + 1] = (nv_array *)indices[j];
  nv_array *uc = nv__cast_unscoped(updates, o->dtype);
  in[nidx + 1] = uc;
  nv__node *n = nv__op_node(prim, in, nidx + 2, o->dtype, o->shape, o->ndim,
                            sizeof(nv__gather_params) + (size_t)nidx * sizeof(int));
  nv_release(uc);
  if (n) {
    nv__gather_params *p = n->params;
    p->naxes = nidx;
    memcpy(p->data, naxes, sizeof(int) * (size_t)nidx);
  }
  return nv__op_finish(op, n);
}

nv_array *nv_scatter(const nv_array *a, const nv_array *const *indices, int nidx,
                     const nv_array *updates, const int *axes) {
  return scatter_impl(NV__PRIM_SCATTER, a, indices, nidx, updates, axes);
}
nv_array *nv_scatter_add(const nv_array *a, const nv_array *const *indices, int nidx,
                         const nv_array *updates, const int *axes) {
  return scatter_impl(NV__PRIM_SCATTER_ADD, a, indices, nidx, updates, axes);
}
nv_array *nv_scatter_prod(const nv_array *a, const nv_array *const *indices, int nidx,
                          const nv_array *updates, const int *axes) {
  return scatter_impl(NV__PRIM_SCATTER_PROD, a, indices, nidx, updates, axes);
}
nv_array *nv_scatter_max(const nv_array *a, const nv_array *const *indices, int nidx,
                         const nv_array *updates, const int *axes) {
  return scatter_impl(NV__PRIM_SCATTER_MAX, a, indices, nidx, updates, axes);
}
nv_array *nv_scatter_min(const nv_array *a, const nv_array *const *indices, int nidx,
                         const nv_array *updates, const int *axes) {
  return scatter_impl(NV__PRIM_SCATTER_MIN, a, indices, nidx, updates, axes);
}

/* ---- masked_scatter ---- */

nv_array *nv_masked_scatter(const nv_array *a, const nv_array *mask, const nv_array *src) {
  const char *op = "masked_scatter";
  const nv_array *xs[3] = {a, mask, src};
  nv_array *f = nv__op_check(op, xs, 3);
  if (f) return f;
  const nv__output *o = nv__out(a), *mm = nv__out(mask), *sm = nv__out(src);
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  if (mm->dtype != NV_DTYPE_BOOL)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the mask must be bool, got %s",
                        nv_dtype_name(mm->dtype));
  if (mm->ndim > o->ndim || memcmp(mm->shape, o->shape, sizeof(int) * (size_t)mm->ndim))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "a mask of shape %s must equal the leading axes of the array's shape %s",
                        nv__shape_str(mm->shape, mm->ndim, s1, sizeof s1),
                        nv__shape_str(o->shape, o->ndim, s2, sizeof s2));
  int t = o->ndim - mm->ndim;
  if (sm->ndim > t + 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "src of shape %s has more than %d dimensions (rows, then the %d "
                        "unmasked axes of the array)",
                        nv__shape_str(sm->shape, sm->ndim, s1, sizeof s1), t + 1, t);
  /* The rows of src: (rows, a.shape[m:]) with src's trailing axes broadcast to a row. With
   * fewer dimensions, src is one row given to every selected position. */
  int rshape[NV__MAX_DIMS + 1];
  int64_t msize = mm->size;
  rshape[0] = sm->ndim == t + 1 ? sm->shape[0] : (int)(msize < INT32_MAX ? msize : INT32_MAX);
  for (int d = 0; d < t; d++) rshape[d + 1] = o->shape[mm->ndim + d];
  nv__scope_suspend();
  nv_array *sc = nv__cast_unscoped(src, o->dtype), *sr = NULL;
  if (sm->ndim < t + 1) {
    int pshape[NV__MAX_DIMS + 1], pn = t + 1 - sm->ndim;
    for (int d = 0; d < pn; d++) pshape[d] = 1;
    for (int d = 0; d < sm->ndim; d++) pshape[pn + d] = sm->shape[d];
    nv_array *tmp = nv_reshape(sc, pshape, t + 1);
    sr = nv_broadcast_to(tmp, rshape, t + 1);
    nv_release(tmp);
  } else {
    sr = nv_broadcast_to(sc, rshape, t + 1);
  }
  nv__scope_resume();
  nv_release(sc);
  if (!nv__meta_known(sr)) {
    nv_release(sr);
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "src of shape %s does not broadcast to rows of shape %s",
                        nv__shape_str(sm->shape, sm->ndim, s1, sizeof s1),
                        nv__shape_str(rshape + 1, t, s2, sizeof s2));
  }
  nv_array *in[3] = {(nv_array *)a, (nv_array *)mask, sr};
  nv__node *n = nv__op_node(NV__PRIM_MASKED_SCATTER, in, 3, o->dtype, o->shape, o->ndim, 0);
  nv_release(sr);
  return nv__op_finish(op, n);
}

/* ---- dynamic slices ---- */

/* Checks a start array and its axes against `a`; writes the normalized axes. */
static nv_array *check_start(const char *op, const nv_array *a, const nv_array *start,
                             const int *axes, int naxes, int *norm) {
  const nv__output *o = nv__out(a), *sm = nv__out(start);
  nv_array *f = nv__ix_check_indices(op, start);
  if (f) return f;
  if (sm->ndim > 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the start must be a 0-d or 1-D array, got %d dimensions", sm->ndim);
  if (naxes < 0 || naxes > o->ndim || sm->size != naxes || (naxes && !axes))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "%lld start values for %d axes of an array with %d dimensions",
                        (long long)sm->size, naxes, o->ndim);
  bool seen[NV__MAX_DIMS] = {false};
  for (int j = 0; j < naxes; j++) {
    int ax = axes[j];
    if (!nv__norm_axis(&ax, o->ndim) || seen[ax])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "invalid or repeated axis %d for an array with %d dimensions", axes[j],
                          o->ndim);
    seen[ax] = true;
    norm[j] = ax;
  }
  return NULL;
}

static void set_axes(nv__node *n, const int *axes, int naxes) {
  if (!n) return;
  nv__gather_params *p = n->params;
  p->naxes = naxes;
  memcpy(p->data, axes, sizeof(int) * (size_t)naxes);
}

nv_array *nv_slice_dynamic(const nv_array *a, const nv_array *start, const int *axes, int naxes,
                           const int *slice_size, int nsize) {
  const char *op = "slice_dynamic";
  const nv_array *xs[2] = {a, start};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int norm[NV__MAX_DIMS];
  if ((f = check_start(op, a, start, axes, naxes, norm))) return f;
  char s1[NV__SHAPE_BUF];
  bool ok = nsize == o->ndim && (nsize == 0 || slice_size);
  for (int d = 0; ok && d < o->ndim; d++) ok = slice_size[d] >= 0 && slice_size[d] <= o->shape[d];
  if (!ok)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the slice size must give each of the %d axes an extent within the "
                        "array's shape %s",
                        o->ndim, nv__shape_str(o->shape, o->ndim, s1, sizeof s1));
  nv_array *in[2] = {(nv_array *)a, (nv_array *)start};
  nv__node *n = nv__op_node(NV__PRIM_DYNAMIC_SLICE, in, 2, o->dtype, slice_size, o->ndim,
                            sizeof(nv__gather_params) + (size_t)naxes * sizeof(int));
  set_axes(n, norm, naxes);
  return nv__op_finish(op, n);
}

nv_array *nv_slice_update_dynamic(const nv_array *src, const nv_array *update,
                                  const nv_array *start, const int *axes, int naxes) {
  const char *op = "slice_update_dynamic";
  const nv_array *xs[3] = {src, update, start};
  nv_array *f = nv__op_check(op, xs, 3);
  if (f) return f;
  const nv__output *o = nv__out(src), *um = nv__out(update);
  int norm[NV__MAX_DIMS];
  if ((f = check_start(op, src, start, axes, naxes, norm))) return f;
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  int diff = o->ndim - um->ndim, region[NV__MAX_DIMS];
  bool ok = diff >= 0;
  for (int d = 0; ok && d < o->ndim; d++) {
    if (d < diff) {
      region[d] = o->shape[d];
      for (int j = 0; j < naxes; j++)
        if (norm[j] == d) region[d] = 1;
    } else {
      region[d] = um->shape[d - diff];
      ok = region[d] <= o->shape[d];
    }
  }
  if (!ok)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "an update of shape %s does not fit an array of shape %s",
                        nv__shape_str(um->shape, um->ndim, s1, sizeof s1),
                        nv__shape_str(o->shape, o->ndim, s2, sizeof s2));
  nv_array *uc = nv__cast_unscoped(update, o->dtype);
  nv_array *in[3] = {(nv_array *)src, nv__ix_broadcast(uc, region, o->ndim), (nv_array *)start};
  nv_release(uc);
  nv__node *n = nv__op_node(NV__PRIM_DYNAMIC_SLICE_UPDATE, in, 3, o->dtype, o->shape, o->ndim,
                            sizeof(nv__gather_params) + (size_t)naxes * sizeof(int));
  nv_release(in[1]);
  set_axes(n, norm, naxes);
  return nv__op_finish(op, n);
}

/* ---- slice_update_add / prod / max / min ---- */

static nv_array *slice_update_reduce(int prim, const nv_array *src, const nv_array *update,
                                     const int *start, const int *stop, const int *strides,
                                     int n) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[2] = {src, update};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(src), *u = nv__out(update);
  /* The region is nv_slice's: its view node holds the normalized start and step. */
  nv__scope_suspend();
  nv_array *view = nv_slice(src, start, stop, strides, n);
  nv__scope_resume();
  if (!nv__meta_known(view)) {
    const char *msg = nv_array_error(view);
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s",
                     strncmp(msg, "slice: ", 7) ? msg : msg + 7);
    nv_release(view);
    return f;
  }
  const nv__output *v = nv__out(view);
  const nv__view_params *vp = view->node->params;
  int bs[NV__MAX_DIMS], bn;
  bool ok = u->ndim <= n && nv__broadcast_shapes(u->shape, u->ndim, v->shape, n, bs, &bn);
  for (int i = 0; ok && i < n; i++) ok = bs[i] == v->shape[i];
  if (!ok) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "an update of shape %s does not broadcast to the region's shape %s",
                     nv__shape_str(u->shape, u->ndim, s1, sizeof s1),
                     nv__shape_str(v->shape, n, s2, sizeof s2));
    nv_release(view);
    return f;
  }
  nv_array *uc = nv__cast_unscoped(update, o->dtype);
  nv_array *in[2] = {(nv_array *)src, uc};
  nv__node *node = nv__op_node(prim, in, 2, o->dtype, o->shape, o->ndim,
                               sizeof(nv__slice_update_params) + 3 * (size_t)n * sizeof(int));
  nv_release(uc);
  if (node) {
    nv__slice_update_params *p = node->params;
    p->ndim = n;
    for (int i = 0; i < n; i++) {
      p->data[i] = vp->axes[i];
      p->data[n + i] = vp->axes[n + i];
      p->data[2 * n + i] = v->shape[i];
    }
  }
  nv_release(view);
  return nv__op_finish(op, node);
}

nv_array *nv_slice_update_add(const nv_array *src, const nv_array *update, const int *start,
                              const int *stop, const int *strides, int n) {
  return slice_update_reduce(NV__PRIM_SLICE_UPDATE_ADD, src, update, start, stop, strides, n);
}
nv_array *nv_slice_update_prod(const nv_array *src, const nv_array *update, const int *start,
                               const int *stop, const int *strides, int n) {
  return slice_update_reduce(NV__PRIM_SLICE_UPDATE_PROD, src, update, start, stop, strides, n);
}
nv_array *nv_slice_update_max(const nv_array *src, const nv_array *update, const int *start,
                              const int *stop, const int *strides, int n) {
  return slice_update_reduce(NV__PRIM_SLICE_UPDATE_MAX, src, update, start, stop, strides, n);
}
nv_array *nv_slice_update_min(const nv_array *src, const nv_array *update, const int *start,
                              const int *stop, const int *strides, int n) {
  return slice_update_reduce(NV__PRIM_SLICE_UPDATE_MIN, src, update, start, stop, strides, n);
}

/* ---- diagonal / diag ---- */

nv_array *nv_diagonal(const nv_array *a, int offset, int axis1, int axis2) {
  nv_array *f = nv__op_check("diagonal", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  if (o->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "diagonal",
                        "needs at least 2 dimensions, got %d", o->ndim);
  int a1 = axis1, a2 = axis2;
  if (!nv__norm_axis(&a1, o->ndim)) return nv__ix_bad_axis("diagonal", axis1, o->ndim);
  if (!nv__norm_axis(&a2, o->ndim)) return nv__ix_bad_axis("diagonal", axis2, o->ndim);
  if (a1 == a2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "diagonal",
                        "axis1 and axis2 are the same axis %d", a1);
  int64_t n1 = o->shape[a1], n2 = o->shape[a2], off = offset;
  int64_t len = off >= 0 ? (n1 < n2 - off ? n1 : n2 - off) : (n1 + off < n2 ? n1 + off : n2);
  if (len < 0) len = 0;
  int shape[NV__MAX_DIMS], nd = 0;
  int64_t st[NV__MAX_DIMS];
  for (int d = 0; d < o->ndim; d++)
    if (d != a1 && d != a2) {
      shape[nd] = o->shape[d];
      st[nd++] = o->strides[d];
    }
  shape[nd] = (int)len;
  st[nd++] = o->strides[a1] + o->strides[a2];
  int64_t delta = len > 0 ? (off >= 0 ? off * o->strides[a2] : -off * o->strides[a1]) : 0;
  int axes[3] = {offset, a1, a2};
  return nv__ix_view(NV__PRIM_DIAGONAL, a, shape, nd, st, delta, axes, 3);
}

nv_array *nv_diag(const nv_array *a, int k) {
  nv_array *f = nv__op_check("diag", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  if (o->ndim == 2) return nv_diagonal(a, k, 0, 1);
  if (o->ndim != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "diag", "needs a 1-D or 2-D array, got %d dimensions",
                        o->ndim);
  int64_t side = (int64_t)o->shape[0] + (k < 0 ? -(int64_t)k : k);
  if (side > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "diag", "the matrix side %lld is too large",
                        (long long)side);
  int shape[2] = {(int)side, (int)side};
  nv_array *in[1] = {(nv_array *)a};
  nv__node *n = nv__op_node(NV__PRIM_DIAG, in, 1, o->dtype, shape, 2, sizeof(nv__axis_params));
  if (n) ((nv__axis_params *)n->params)->axis = k;
  return nv__op_finish("diag", n);
}
