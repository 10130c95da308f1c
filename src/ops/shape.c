/* View and shape builders: reshape, transpose, broadcast_to, slice, squeeze, expand_dims,
 * as_strided, contiguous, copy; and slice_update. */
#include <stdlib.h>

#include "ops/ops_internal.h"

/* A view node of `x` with the given shape and strides (elements) at `delta` elements. */
static nv_array *make_view(int prim, const nv_array *x, const int *shape, int ndim,
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
  for (int i = 0; i < naxes; i++) p->axes[i] = axes[i];
  return nv__array_new(n, 0);
}

/* NumPy's no-copy reshape: strides for `nshape` over the layout (oshape, ostr), or false. */
static bool nocopy_reshape(const nv__output *o, const int *nshape, int nnd, int64_t *nstr) {
  if (o->size == 0 || (o->flags & NV__FLAG_ROW)) {
    int64_t s = 1;
    for (int i = nnd - 1; i >= 0; i--) {
      nstr[i] = s;
      s *= nshape[i];
    }
    return o->flags & NV__FLAG_ROW || o->size == 0;
  }
  int od[NV__MAX_DIMS];
  int64_t os[NV__MAX_DIMS];
  int ond = 0;
  for (int i = 0; i < o->ndim; i++)
    if (o->shape[i] != 1) {
      od[ond] = o->shape[i];
      os[ond++] = o->strides[i];
    }
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < nnd && oi < ond) {
    int64_t np = nshape[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= nnd) return false;
        np *= nshape[nj++];
      } else {
        if (oj >= ond) return false;
        op *= od[oj++];
      }
    }
    for (int ok = oi; ok < oj - 1; ok++)
      if (os[ok] != (int64_t)od[ok + 1] * os[ok + 1]) return false;
    nstr[nj - 1] = os[oj - 1];
    for (int nk = nj - 1; nk > ni; nk--) nstr[nk - 1] = nstr[nk] * nshape[nk];
    ni = nj++;
    oi = oj++;
  }
  for (; ni < nnd; ni++) nstr[ni] = 1;
  return true;
}

nv_array *nv_reshape(const nv_array *x, const int *shape, int ndim) {
  nv_array *f = nv__op_check("reshape", &x, 1);
  if (f) return f;
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim && !shape))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape", "invalid number of dimensions %d",
                        ndim);
  nv__output *o = nv__out(x);
  int ns[NV__MAX_DIMS];
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    ns[i] = shape[i];
    if (shape[i] == -1) {
      if (infer >= 0)
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape", "only one dimension can be -1");
      infer = i;
    } else if (shape[i] < 0) {
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape", "negative dimension %d", shape[i]);
    } else if (__builtin_mul_overflow(known, (int64_t)shape[i], &known)) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape",
                          "shape %s has more than 2^63 - 1 elements",
                          nv__shape_str(shape, ndim, s, sizeof s));
    }
  }
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  if (infer >= 0) {
    if (known == 0 || o->size % known)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape",
                          "cannot reshape an array of shape %s into %s",
                          nv__shape_str(o->shape, o->ndim, s1, sizeof s1),
                          nv__shape_str(shape, ndim, s2, sizeof s2));
    if (o->size / known > INT32_MAX)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape", "inferred dimension too large");
    ns[infer] = (int)(o->size / known);
    known *= ns[infer];
  }
  if (known != o->size)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape",
                        "cannot reshape an array of shape %s into %s",
                        nv__shape_str(o->shape, o->ndim, s1, sizeof s1),
                        nv__shape_str(ns, ndim, s2, sizeof s2));
  int64_t count;
  if (!nv__shape_size(ns, ndim, &count)) /* a zero dimension hid an overflowing product */
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "reshape",
                        "shape %s has more than 2^63 - 1 elements",
                        nv__shape_str(ns, ndim, s2, sizeof s2));
  int64_t st[NV__MAX_DIMS];
  if (nocopy_reshape(o, ns, ndim, st)) {
    nv_array *r = make_view(NV__PRIM_RESHAPE, x, ns, ndim, st, 0, NULL, 0);
    if (r && r->node->prim == NV__PRIM_RESHAPE && r->node->params)
      ((nv__view_params *)r->node->params)->infer = infer + 1;
    return r;
  }
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(NV__PRIM_RESHAPE, in, 1, o->dtype, ns, ndim, sizeof(nv__view_params));
  if (n) {
    ((nv__view_params *)n->params)->copy = true;
    ((nv__view_params *)n->params)->infer = infer + 1;
  }
  return nv__op_finish("reshape", n);
}

nv_array *nv_transpose(const nv_array *x, const int *axes, int naxes) {
  nv_array *f = nv__op_check("transpose", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int perm[NV__MAX_DIMS];
  if (!axes) {
    for (int i = 0; i < o->ndim; i++) perm[i] = o->ndim - 1 - i;
  } else {
    if (naxes != o->ndim) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "transpose",
                          "%d axes given for an array of shape %s", naxes,
                          nv__shape_str(o->shape, o->ndim, s, sizeof s));
    }
    bool seen[NV__MAX_DIMS] = {false};
    for (int i = 0; i < naxes; i++) {
      int a = axes[i];
      if (!nv__norm_axis(&a, o->ndim) || seen[a])
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, "transpose",
                            "invalid or repeated axis %d for %d dimensions", axes[i], o->ndim);
      seen[a] = true;
      perm[i] = a;
    }
  }
  int shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) {
    shape[i] = o->shape[perm[i]];
    st[i] = o->strides[perm[i]];
  }
  return make_view(NV__PRIM_TRANSPOSE, x, shape, o->ndim, st, 0, perm, o->ndim);
}

nv_array *nv_broadcast_to(const nv_array *x, const int *shape, int ndim) {
  nv_array *f = nv__op_check("broadcast_to", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  if (ndim < o->ndim || ndim > NV__MAX_DIMS || (ndim && !shape))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "broadcast_to",
                        "cannot broadcast shape %s to %d dimensions",
                        nv__shape_str(o->shape, o->ndim, s1, sizeof s1), ndim);
  int64_t st[NV__MAX_DIMS];
  int off = ndim - o->ndim;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "broadcast_to", "negative dimension %d",
                          shape[i]);
    if (i < off) {
      st[i] = 0;
      continue;
    }
    int d = o->shape[i - off];
    if (d == shape[i]) st[i] = o->strides[i - off];
    else if (d == 1) st[i] = 0;
    else
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "broadcast_to",
                          "shape %s cannot be broadcast to %s",
                          nv__shape_str(o->shape, o->ndim, s1, sizeof s1),
                          nv__shape_str(shape, ndim, s2, sizeof s2));
  }
  return make_view(NV__PRIM_BROADCAST, x, shape, ndim, st, 0, NULL, 0);
}

/* NumPy's slice normalization of one axis of size n: start, and the length. */
static int slice_axis(int n, int start, int stop, int step, int *len) {
  if (start < 0) {
    start += n;
    if (start < 0) start = step < 0 ? -1 : 0;
  } else if (start >= n) {
    start = step < 0 ? n - 1 : n;
  }
  if (stop < 0) {
    stop += n;
    if (stop < 0) stop = step < 0 ? -1 : 0;
  } else if (stop >= n) {
    stop = step < 0 ? n - 1 : n;
  }
  int64_t l;
  if (step < 0) l = stop < start ? ((int64_t)start - stop - 1) / (-(int64_t)step) + 1 : 0;
  else l = start < stop ? ((int64_t)stop - start - 1) / step + 1 : 0;
  *len = (int)l;
  return start;
}

/* Normalizes a slice spec of `x`: per-axis start, step, length. */
static nv_array *slice_spec(const char *op, const nv__output *o, const int *start,
                            const int *stop, const int *strides, int n, int *st, int *sp,
                            int *len) {
  if (n != o->ndim || (n && (!start || !stop))) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%d start/stop values for shape %s", n,
                        nv__shape_str(o->shape, o->ndim, s, sizeof s));
  }
  for (int i = 0; i < n; i++) {
    int step = strides ? strides[i] : 1;
    if (step == 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "slice step of axis %d is zero", i);
    if (step == INT32_MIN)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "slice step of axis %d is too large", i);
    sp[i] = step;
    st[i] = slice_axis(o->shape[i], start[i], stop[i], step, &len[i]);
  }
  return NULL;
}

nv_array *nv_slice(const nv_array *x, const int *start, const int *stop, const int *strides,
                   int n) {
  nv_array *f = nv__op_check("slice", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int st[NV__MAX_DIMS], sp[NV__MAX_DIMS], len[NV__MAX_DIMS];
  if ((f = slice_spec("slice", o, start, stop, strides, n, st, sp, len))) return f;
  int64_t nstr[NV__MAX_DIMS], delta = 0;
  bool empty = false;
  for (int i = 0; i < n; i++) empty |= len[i] == 0;
  for (int i = 0; i < n; i++) {
    nstr[i] = o->strides[i] * sp[i];
    if (!empty) delta += (int64_t)st[i] * o->strides[i];
  }
  int axes[2 * NV__MAX_DIMS];
  for (int i = 0; i < n; i++) {
    axes[i] = st[i];
    axes[n + i] = sp[i];
  }
  return make_view(NV__PRIM_SLICE, x, len, n, nstr, delta, axes, 2 * n);
}

nv_array *nv_slice_update(const nv_array *src, const nv_array *update, const int *start,
                          const int *stop, const int *strides, int n) {
  const nv_array *xs[2] = {src, update};
  nv_array *f = nv__op_check("slice_update", xs, 2);
  if (f) return f;
  nv__output *o = nv__out(src), *u = nv__out(update);
  int st[NV__MAX_DIMS], sp[NV__MAX_DIMS], len[NV__MAX_DIMS];
  if ((f = slice_spec("slice_update", o, start, stop, strides, n, st, sp, len))) return f;
  /* The update must broadcast to the region's shape. */
  int bs[NV__MAX_DIMS], bn;
  bool ok = u->ndim <= n && nv__broadcast_shapes(u->shape, u->ndim, len, n, bs, &bn);
  for (int i = 0; ok && i < n; i++) ok = bs[i] == len[i];
  if (!ok) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "slice_update",
                        "an update of shape %s does not broadcast to the region's shape %s",
                        nv__shape_str(u->shape, u->ndim, s1, sizeof s1),
                        nv__shape_str(len, n, s2, sizeof s2));
  }
  nv_array *upd = nv__cast_unscoped(update, o->dtype);
  nv_array *in[2] = {(nv_array *)src, upd};
  nv__node *node = nv__op_node(NV__PRIM_SLICE_UPDATE, in, 2, o->dtype, o->shape, o->ndim,
                               sizeof(nv__slice_update_params) + 3 * (size_t)n * sizeof(int));
  nv_release(upd);
  if (node) {
    nv__slice_update_params *p = node->params;
    p->ndim = n;
    for (int i = 0; i < n; i++) {
      p->data[i] = st[i];
      p->data[n + i] = sp[i];
      p->data[2 * n + i] = len[i];
    }
  }
  return nv__op_finish("slice_update", node);
}

nv_array *nv_squeeze(const nv_array *x, const int *axes, int naxes) {
  nv_array *f = nv__op_check("squeeze", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  bool drop[NV__MAX_DIMS] = {false};
  if (!axes) {
    for (int i = 0; i < o->ndim; i++) drop[i] = o->shape[i] == 1;
  } else {
    for (int i = 0; i < naxes; i++) {
      int a = axes[i];
      if (!nv__norm_axis(&a, o->ndim) || drop[a])
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, "squeeze",
                            "invalid or repeated axis %d for %d dimensions", axes[i], o->ndim);
      if (o->shape[a] != 1)
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, "squeeze",
                            "cannot squeeze axis %d of size %d", axes[i], o->shape[a]);
      drop[a] = true;
    }
  }
  int shape[NV__MAX_DIMS], nd = 0, kept[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++)
    if (!drop[i]) {
      kept[nd] = i;
      shape[nd] = o->shape[i];
      st[nd++] = o->strides[i];
    }
  return make_view(NV__PRIM_SQUEEZE, x, shape, nd, st, 0, kept, nd);
}

nv_array *nv_expand_dims(const nv_array *x, const int *axes, int naxes) {
  nv_array *f = nv__op_check("expand_dims", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  int nd = o->ndim + naxes;
  if (naxes < 0 || nd > NV__MAX_DIMS || (naxes && !axes))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "expand_dims", "invalid axes");
  bool ins[NV__MAX_DIMS] = {false};
  int norm[NV__MAX_DIMS];
  for (int i = 0; i < naxes; i++) {
    int a = axes[i];
    if (!nv__norm_axis(&a, nd) || ins[a])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "expand_dims",
                          "invalid or repeated axis %d for %d dimensions", axes[i], nd);
    ins[a] = true;
    norm[i] = a;
  }
  int shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  for (int i = 0, j = 0; i < nd; i++) {
    if (ins[i]) {
      shape[i] = 1;
      st[i] = 0;
    } else {
      shape[i] = o->shape[j];
      st[i] = o->strides[j++];
    }
  }
  /* Inserted axes take the stride their neighbour would make contiguous. */
  for (int i = nd - 1; i >= 0; i--)
    if (ins[i]) st[i] = i + 1 < nd ? st[i + 1] * shape[i + 1] : 1;
  return make_view(NV__PRIM_EXPAND_DIMS, x, shape, nd, st, 0, norm, naxes);
}

nv_array *nv_contiguous(const nv_array *x) {
  nv_array *f = nv__op_check("contiguous", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  if (o->flags & NV__FLAG_ROW) return nv__array_new(nv__node_retain(x->node), x->idx);
  return nv_copy(x);
}

nv_array *nv_copy(const nv_array *x) {
  nv_array *f = nv__op_check("copy", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  nv_array *in[1] = {(nv_array *)x};
  return nv__op_finish("copy", nv__op_node(NV__PRIM_COPY, in, 1, o->dtype, o->shape, o->ndim, 0));
}

nv_array *nv_as_strided(const nv_array *x, const int *shape, int ndim, const int64_t *strides,
                        int64_t offset) {
  nv_array *f = nv__op_check("as_strided", &x, 1);
  if (f) return f;
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim && (!shape || !strides)))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "as_strided", "invalid shape or strides");
  nv__output *o = nv__out(x);
  int64_t lo = offset, hi = offset, size = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "as_strided", "negative dimension %d",
                          shape[i]);
    int64_t ext = 0;
    bool over = __builtin_mul_overflow(size, (int64_t)shape[i], &size) ||
                __builtin_mul_overflow((int64_t)(shape[i] ? shape[i] - 1 : 0), strides[i], &ext);
    if (!over) over = ext < 0 ? __builtin_add_overflow(lo, ext, &lo)
                              : __builtin_add_overflow(hi, ext, &hi);
    if (over) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "as_strided",
                          "the view of shape %s reaches past 2^63 elements",
                          nv__shape_str(shape, ndim, s, sizeof s));
    }
  }
  if (size > 0 && (lo < 0 || hi >= o->size)) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "as_strided",
                        "the view reaches elements %lld..%lld outside the %lld elements of the "
                        "data (shape %s)",
                        (long long)lo, (long long)hi, (long long)o->size,
                        nv__shape_str(o->shape, o->ndim, s, sizeof s));
  }
  nv__scope_suspend();
  nv_array *c = nv_contiguous(x);
  nv__scope_resume();
  if (!nv__meta_known(c)) return c; /* a failed x goes on: the view takes its error */
  nv_array *r = make_view(NV__PRIM_AS_STRIDED, c, shape, ndim, strides, size > 0 ? offset : 0,
                          NULL, 0);
  nv_release(c);
  return r;
}
