/* Shape builders: flatten, unflatten, flip, split, unstack, concatenate, stack, repeat, tile,
 * swapaxes, moveaxis, pad, broadcast_arrays, atleast_*, roll, diff. Most compose the core
 * views (reshape, transpose, slice, broadcast_to, expand_dims), so they copy nothing where the
 * strides allow; concatenate, pad and diff have kernels of their own. */
#include "ops/index_common.h"

/* Re-registers an unscoped result with the caller's scope (a builder's return convention). */
static nv_array *scoped(nv_array *x) {
  nv_array *r = nv__ix_same(x);
  nv_release(x);
  return r;
}

static nv_array *shape_error(const char *op, const nv__output *o, const char *what) {
  char s[NV__SHAPE_BUF];
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s (array shape %s)", what,
                      nv__shape_str(o->shape, o->ndim, s, sizeof s));
}

/* ---- flatten / unflatten ---- */

nv_array *nv_flatten(const nv_array *a, int start_axis, int end_axis) {
  nv_array *f = nv__op_check("flatten", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int nd = o->ndim, one = 1;
  if (nd == 0) return nv_reshape(a, &one, 1);
  int s = start_axis < 0 ? start_axis + nd : start_axis;
  int e = end_axis < 0 ? end_axis + nd : end_axis;
  if (s < 0) s = 0;
  if (e > nd - 1) e = nd - 1;
  /* After clamping, an axis past either end shows up as end before start. */
  if (e < s)
    return shape_error("flatten", o, "start_axis must not come after end_axis");
  if (s == e) return nv__ix_same(a);
  int shape[NV__MAX_DIMS], k = 0;
  int64_t merged = 1;
  for (int i = 0; i < s; i++) shape[k++] = o->shape[i];
  for (int i = s; i <= e; i++) merged *= o->shape[i];
  if (merged > INT32_MAX) return shape_error("flatten", o, "the merged axis is too large");
  shape[k++] = (int)merged;
  for (int i = e + 1; i < nd; i++) shape[k++] = o->shape[i];
  return nv_reshape(a, shape, k);
}

nv_array *nv_unflatten(const nv_array *a, int axis, const int *shape, int n) {
  nv_array *f = nv__op_check("unflatten", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim)) return nv__ix_bad_axis("unflatten", axis, o->ndim);
  if (n <= 0 || !shape) return shape_error("unflatten", o, "the shape to unflatten to is empty");
  if (o->ndim - 1 + n > NV__MAX_DIMS)
    return shape_error("unflatten", o, "the result has too many dimensions");
  int out[NV__MAX_DIMS], k = 0, infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ax; i++) out[k++] = o->shape[i];
  for (int i = 0; i < n; i++) {
    if (shape[i] == -1 && infer < 0) infer = k;
    else if (shape[i] < 0) return shape_error("unflatten", o, "invalid dimension in the shape");
    else if (__builtin_mul_overflow(known, (int64_t)shape[i], &known))
      return shape_error("unflatten", o, "the shape has more than 2^63 - 1 elements");
    out[k++] = shape[i];
  }
  if (infer >= 0) {
    if (known == 0 || o->shape[ax] % known)
      return shape_error("unflatten", o, "the axis does not divide into the shape");
    out[infer] = (int)(o->shape[ax] / known);
    known *= out[infer];
  }
  if (known != o->shape[ax])
    return shape_error("unflatten", o, "the shape's size differs from the axis' size");
  for (int i = ax + 1; i < o->ndim; i++) out[k++] = o->shape[i];
  return nv_reshape(a, out, k);
}

/* ---- flip / swapaxes / moveaxis ---- */

nv_array *nv_flip(const nv_array *a, const int *axes, int naxes) {
  nv_array *f = nv__op_check("flip", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  bool rev[NV__MAX_DIMS] = {false};
  if (!axes) {
    for (int i = 0; i < o->ndim; i++) rev[i] = true;
  } else {
    for (int i = 0; i < naxes; i++) {
      int ax = axes[i];
      if (!nv__norm_axis(&ax, o->ndim) || rev[ax])
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, "flip",
                            "invalid or repeated axis %d for an array with %d dimensions",
                            axes[i], o->ndim);
      rev[ax] = true;
    }
  }
  int start[NV__MAX_DIMS], stop[NV__MAX_DIMS], step[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) {
    start[i] = rev[i] ? -1 : 0;
    stop[i] = rev[i] ? (int)(-(int64_t)o->shape[i] - 1) : o->shape[i];
    step[i] = rev[i] ? -1 : 1;
  }
  return nv_slice(a, start, stop, step, o->ndim);
}

nv_array *nv_swapaxes(const nv_array *a, int axis1, int axis2) {
  nv_array *f = nv__op_check("swapaxes", &a, 1);
  if (f) return f;
  int nd = nv__out(a)->ndim, a1 = axis1, a2 = axis2, perm[NV__MAX_DIMS];
  if (!nv__norm_axis(&a1, nd)) return nv__ix_bad_axis("swapaxes", axis1, nd);
  if (!nv__norm_axis(&a2, nd)) return nv__ix_bad_axis("swapaxes", axis2, nd);
  for (int i = 0; i < nd; i++) perm[i] = i;
  perm[a1] = a2;
  perm[a2] = a1;
  return nv_transpose(a, perm, nd);
}

nv_array *nv_moveaxis(const nv_array *a, int source, int destination) {
  nv_array *f = nv__op_check("moveaxis", &a, 1);
  if (f) return f;
  int nd = nv__out(a)->ndim, s = source, d = destination, perm[NV__MAX_DIMS], k = 0;
  if (!nv__norm_axis(&s, nd)) return nv__ix_bad_axis("moveaxis", source, nd);
  if (!nv__norm_axis(&d, nd)) return nv__ix_bad_axis("moveaxis", destination, nd);
  for (int i = 0; i < nd; i++)
    if (i != s) perm[k++] = i;
  for (int i = nd - 1; i > d; i--) perm[i] = perm[i - 1];
  perm[d] = s;
  return nv_transpose(a, perm, nd);
}

/* ---- split / unstack / broadcast_arrays (multi-result) ---- */

/* Checks a multi-result op's input and output list; NV_OK when usable. */
static nv_status multi_check(const char *op, const nv_array *const *xs, int n, nv_vec *out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the output list is NULL", op);
  if (n < 0 || (n > 0 && !xs)) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: no inputs", op);
  for (int i = 0; i < n; i++) {
    if (!xs[i]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: input %d is NULL", op, i);
    nv_status s = nv_array_status(xs[i]);
    if (s != NV_OK) return s;
  }
  return NV_OK;
}

/* Appends the `n` (unscoped) results to `out` if all of them are usable, then releases them.
 * Only running out of memory while appending can leave some appended. */
static nv_status push_all(nv_array **rs, int n, nv_vec *out) {
  nv_status s = NV_OK;
  for (int i = 0; i < n && s == NV_OK; i++) s = nv_array_status(rs[i]);
  for (int i = 0; i < n && s == NV_OK; i++) s = nv_vec_push(out, rs[i]);
  nv__ix_release_all(rs, n);
  return s;
}

nv_status nv_split_at(const nv_array *a, const int *indices, int n, int axis, nv_vec *out) {
  nv_status s = multi_check("split", &a, 1, out);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(a);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "split: invalid axis %d for an array with %d dimensions", axis, o->ndim);
  if (n < 0 || (n > 0 && !indices))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "split: invalid indices");
  nv_array **rs = nv__calloc((size_t)n + 1, sizeof *rs);
  if (!rs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "split: out of memory");
  int start[NV__MAX_DIMS], stop[NV__MAX_DIMS];
  for (int d = 0; d < o->ndim; d++) {
    start[d] = 0;
    stop[d] = o->shape[d];
  }
  nv__scope_suspend();
  for (int i = 0; i <= n; i++) {
    start[ax] = i == 0 ? 0 : indices[i - 1];
    stop[ax] = i == n ? o->shape[ax] : indices[i];
    rs[i] = nv_slice(a, start, stop, NULL, o->ndim);
  }
  nv__scope_resume();
  s = push_all(rs, n + 1, out);
  nv__free(rs);
  return s;
}

nv_status nv_split(const nv_array *a, int sections, int axis, nv_vec *out) {
  nv_status s = multi_check("split", &a, 1, out);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(a);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "split: invalid axis %d for an array with %d dimensions", axis, o->ndim);
  if (sections <= 0 || o->shape[ax] % sections)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "split: %d sections do not divide axis %d of size %d equally", sections,
                         axis, o->shape[ax]);
  int *idx = nv__malloc((size_t)sections * sizeof *idx);
  if (!idx) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "split: out of memory");
  int part = o->shape[ax] / sections;
  for (int i = 0; i < sections - 1; i++) idx[i] = (i + 1) * part;
  s = nv_split_at(a, idx, sections - 1, ax, out);
  nv__free(idx);
  return s;
}

nv_status nv_unstack(const nv_array *a, int axis, nv_vec *out) {
  nv_status s = multi_check("unstack", &a, 1, out);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(a);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "unstack: invalid axis %d for an array with %d dimensions", axis,
                         o->ndim);
  int n = o->shape[ax];
  nv_array **rs = nv__calloc(n > 0 ? (size_t)n : 1, sizeof *rs);
  if (!rs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "unstack: out of memory");
  int start[NV__MAX_DIMS], stop[NV__MAX_DIMS];
  for (int d = 0; d < o->ndim; d++) {
    start[d] = 0;
    stop[d] = o->shape[d];
  }
  nv__scope_suspend();
  for (int i = 0; i < n; i++) {
    start[ax] = i;
    stop[ax] = i + 1;
    nv_array *sl = nv_slice(a, start, stop, NULL, o->ndim);
    rs[i] = nv_squeeze(sl, &ax, 1);
    nv_release(sl);
  }
  nv__scope_resume();
  s = push_all(rs, n, out);
  nv__free(rs);
  return s;
}

nv_status nv_broadcast_arrays(const nv_array *const *xs, int n, nv_vec *out) {
  nv_status s = multi_check("broadcast_arrays", xs, n, out);
  if (s != NV_OK) return s;
  int shape[NV__MAX_DIMS], nd = 0;
  for (int i = 0; i < n; i++) {
    const nv__output *o = nv__out(xs[i]);
    int tmp[NV__MAX_DIMS], tn;
    if (!nv__broadcast_shapes(shape, nd, o->shape, o->ndim, tmp, &tn)) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "broadcast_arrays: shapes %s and %s cannot be broadcast",
                           nv__shape_str(shape, nd, s1, sizeof s1),
                           nv__shape_str(o->shape, o->ndim, s2, sizeof s2));
    }
    memcpy(shape, tmp, sizeof(int) * (size_t)tn);
    nd = tn;
  }
  nv_array **rs = nv__calloc(n > 0 ? (size_t)n : 1, sizeof *rs);
  if (!rs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "broadcast_arrays: out of memory");
  for (int i = 0; i < n; i++) rs[i] = nv__ix_broadcast(xs[i], shape, nd);
  s = push_all(rs, n, out);
  nv__free(rs);
  return s;
}

/* ---- concatenate / stack ---- */

nv_array *nv_concatenate(const nv_array *const *xs, int n, int axis) {
  const char *op = "concatenate";
  if (n <= 0 || !xs) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "no arrays to join");
  nv_array *f = nv__op_check(op, xs, n);
  if (f) return f;
  const nv__output *o0 = nv__out(xs[0]);
  int nd = o0->ndim, ax = axis, shape[NV__MAX_DIMS];
  if (!nv__norm_axis(&ax, nd)) return nv__ix_bad_axis(op, axis, nd);
  memcpy(shape, o0->shape, sizeof(int) * (size_t)nd);
  int64_t total = 0;
  nv_dtype dt = o0->dtype;
  for (int i = 0; i < n; i++) {
    const nv__output *o = nv__out(xs[i]);
    bool ok = o->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = d == ax || o->shape[d] == shape[d];
    if (!ok) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "shapes %s and %s differ off the concatenation axis %d",
                          nv__shape_str(o0->shape, nd, s1, sizeof s1),
                          nv__shape_str(o->shape, o->ndim, s2, sizeof s2), axis);
    }
    total += o->shape[ax];
    dt = nv_promote_types(dt, o->dtype);
  }
  if (total > INT32_MAX) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the result is too large");
  shape[ax] = (int)total;
  if (n == 1) return nv__ix_same(xs[0]);
  nv_array **in = nv__malloc((size_t)n * sizeof *in);
  if (!in) return nv__op_error(NV_ERR_OUT_OF_MEMORY, op, "out of memory");
  for (int i = 0; i < n; i++) in[i] = nv__cast_unscoped(xs[i], dt);
  nv__node *node = nv__op_node(NV__PRIM_CONCATENATE, in, n, dt, shape, nd, sizeof(nv__axis_params));
  nv__ix_release_all(in, n);
  nv__free(in);
  if (node) ((nv__axis_params *)node->params)->axis = ax;
  return nv__op_finish(op, node);
}

/* Applies `fn` to each input (unscoped) and concatenates the results along `axis`. */
static nv_array *join_mapped(const char *op, const nv_array *const *xs, int n, int axis,
                             nv_array *(*fn)(const nv_array *x, int arg), int arg) {
  if (n <= 0 || !xs) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "no arrays to join");
  nv_array *f = nv__op_check(op, xs, n);
  if (f) return f;
  nv_array **tmp = nv__malloc((size_t)n * sizeof *tmp);
  if (!tmp) return nv__op_error(NV_ERR_OUT_OF_MEMORY, op, "out of memory");
  nv__scope_suspend();
  for (int i = 0; i < n; i++) tmp[i] = fn(xs[i], arg);
  nv__scope_resume();
  nv_array *r = nv_concatenate((const nv_array *const *)tmp, n, axis);
  nv__ix_release_all(tmp, n);
  nv__free(tmp);
  return r;
}

static nv_array *flat_of(const nv_array *x, int unused) {
  (void)unused;
  int flat = -1;
  return nv_reshape(x, &flat, 1);
}

static nv_array *expand_at(const nv_array *x, int axis) { return nv_expand_dims(x, &axis, 1); }

nv_array *nv_concatenate_flat(const nv_array *const *xs, int n) {
  return join_mapped("concatenate", xs, n, 0, flat_of, 0);
}

nv_array *nv_stack(const nv_array *const *xs, int n, int axis) {
  if (n <= 0 || !xs) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "stack", "no arrays to stack");
  nv_array *f = nv__op_check("stack", xs, n);
  if (f) return f;
  const nv__output *o0 = nv__out(xs[0]);
  for (int i = 1; i < n; i++) {
    const nv__output *o = nv__out(xs[i]);
    if (o->ndim != o0->ndim || memcmp(o->shape, o0->shape, sizeof(int) * (size_t)o->ndim)) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "stack", "shapes %s and %s differ",
                          nv__shape_str(o0->shape, o0->ndim, s1, sizeof s1),
                          nv__shape_str(o->shape, o->ndim, s2, sizeof s2));
    }
  }
  int ax = axis;
  if (!nv__norm_axis(&ax, o0->ndim + 1)) return nv__ix_bad_axis("stack", axis, o0->ndim + 1);
  return join_mapped("stack", xs, n, ax, expand_at, ax);
}

/* ---- repeat / tile ---- */

nv_array *nv_repeat(const nv_array *a, int repeats, int axis) {
  nv_array *f = nv__op_check("repeat", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int ax = axis, nd = o->ndim;
  if (!nv__norm_axis(&ax, nd)) return nv__ix_bad_axis("repeat", axis, nd);
  if (repeats < 0) return shape_error("repeat", o, "the number of repeats is negative");
  if (repeats == 1) return nv__ix_same(a);
  if ((int64_t)o->shape[ax] * repeats > INT32_MAX || nd + 1 > NV__MAX_DIMS)
    return shape_error("repeat", o, "the result is too large");
  /* (.., n, ..) → (.., n, 1, ..) broadcast to (.., n, repeats, ..) → (.., n * repeats, ..). */
  int bshape[NV__MAX_DIMS], rshape[NV__MAX_DIMS], at = ax + 1;
  for (int d = 0, k = 0; d <= nd; d++) bshape[d] = d == at ? repeats : o->shape[k++];
  memcpy(rshape, o->shape, sizeof(int) * (size_t)nd);
  rshape[ax] = o->shape[ax] * repeats;
  nv__scope_suspend();
  nv_array *e = nv_expand_dims(a, &at, 1);
  nv_array *b = nv_broadcast_to(e, bshape, nd + 1);
  nv_array *r = nv_reshape(b, rshape, nd);
  nv__scope_resume();
  nv_release(e);
  nv_release(b);
  return scoped(r);
}

nv_array *nv_repeat_flat(const nv_array *a, int repeats) {
  nv_array *f = nv__op_check("repeat", &a, 1);
  if (f) return f;
  nv__scope_suspend();
  nv_array *x = flat_of(a, 0);
  nv__scope_resume();
  nv_array *r = nv_repeat(x, repeats, 0);
  nv_release(x);
  return r;
}

nv_array *nv_tile(const nv_array *a, const int *reps, int n) {
  nv_array *f = nv__op_check("tile", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  if (n < 0 || (n && !reps)) return shape_error("tile", o, "invalid reps");
  /* The limit is checked before any rep is read: `n` may be anything up to INT_MAX. */
  if (n > NV__MAX_DIMS / 2 || o->ndim > NV__MAX_DIMS / 2)
    return shape_error("tile", o, "too many dimensions");
  int nd = n > o->ndim ? n : o->ndim;
  int shape[NV__MAX_DIMS], rp[NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int si = d - (nd - o->ndim), ri = d - (nd - n);
    shape[d] = si >= 0 ? o->shape[si] : 1;
    rp[d] = ri >= 0 ? reps[ri] : 1;
    if (rp[d] < 0) return shape_error("tile", o, "a rep is negative");
    if ((int64_t)shape[d] * rp[d] > INT32_MAX) return shape_error("tile", o, "the result is too large");
  }
  /* Each axis d becomes (reps[d], shape[d]) broadcast from (1, shape[d]), then merged. */
  int eshape[NV__MAX_DIMS], bshape[NV__MAX_DIMS], fshape[NV__MAX_DIMS], k = 0;
  for (int d = 0; d < nd; d++) {
    eshape[k] = 1;
    bshape[k++] = rp[d];
    eshape[k] = shape[d];
    bshape[k++] = shape[d];
    fshape[d] = shape[d] * rp[d];
  }
  nv__scope_suspend();
  nv_array *e = nv_reshape(a, eshape, k);
  nv_array *b = nv_broadcast_to(e, bshape, k);
  nv_array *r = nv_reshape(b, fshape, nd);
  nv__scope_resume();
  nv_release(e);
  nv_release(b);
  return scoped(r);
}

/* ---- pad ---- */

nv_array *nv_pad(const nv_array *a, const int *low, const int *high, int n, nv_pad_mode mode,
                 const nv_array *value) {
  nv_array *f = nv__op_check("pad", &a, 1);
  if (f) return f;
  if (value && (f = nv__op_check("pad", &value, 1))) return f;
  const nv__output *o = nv__out(a);
  int nd = o->ndim;
  if ((n != nd && n != 1) || !low || !high)
    return shape_error("pad", o, "the widths must be given for every axis or once for all");
  if (mode < NV_PAD_CONSTANT || mode > NV_PAD_SYMMETRIC)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "pad", "invalid mode %d", (int)mode);
  if (value && nv__out(value)->size != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "pad", "the pad value must be a scalar");
  int shape[NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int lo = low[n == 1 ? 0 : d], hi = high[n == 1 ? 0 : d];
    if (lo < 0 || hi < 0) return shape_error("pad", o, "a pad width is negative");
    if ((int64_t)o->shape[d] + lo + hi > INT32_MAX) return shape_error("pad", o, "the result is too large");
    if (mode != NV_PAD_CONSTANT && o->shape[d] == 0 && lo + hi > 0)
      return shape_error("pad", o, "cannot extend an empty axis except with a constant");
    shape[d] = o->shape[d] + lo + hi;
  }
  nv__scope_suspend();
  nv_array *v0 = value ? nv_retain((nv_array *)value) : nv_array_scalar(0, o->dtype);
  nv_array *vc = nv__cast_unscoped(v0, o->dtype);
  nv_array *vs = nv_reshape(vc, NULL, 0);
  nv__scope_resume();
  nv_release(v0);
  nv_release(vc);
  nv_array *in[2] = {(nv_array *)a, vs};
  nv__node *node = nv__op_node(NV__PRIM_PAD, in, 2, o->dtype, shape, nd,
                               sizeof(nv__pad_params) + 2 * (size_t)nd * sizeof(int));
  nv_release(vs);
  if (node) {
    nv__pad_params *p = node->params;
    p->mode = mode;
    p->ndim = nd;
    for (int d = 0; d < nd; d++) {
      p->width[d] = low[n == 1 ? 0 : d];
      p->width[nd + d] = high[n == 1 ? 0 : d];
    }
  }
  return nv__op_finish("pad", node);
}

/* ---- atleast_* ---- */

static nv_array *atleast(const char *op, const nv_array *a, int want) {
  nv_array *f = nv__op_check(op, &a, 1);
  if (f) return f;
  int nd = nv__out(a)->ndim;
  if (nd >= want) return nv__ix_same(a);
  if (nd == 0) {
    int ones[3] = {1, 1, 1};
    return nv_reshape(a, ones, want);
  }
  /* 1-D (n,) → (1,n) or (1,n,1); 2-D (m,n) → (m,n,1). */
  int axes[2] = {0, 2};
  if (nd == 2) return nv_expand_dims(a, axes + 1, 1);
  return nv_expand_dims(a, axes, want == 2 ? 1 : 2);
}

nv_array *nv_atleast_1d(const nv_array *a) { return atleast("atleast_1d", a, 1); }
nv_array *nv_atleast_2d(const nv_array *a) { return atleast("atleast_2d", a, 2); }
nv_array *nv_atleast_3d(const nv_array *a) { return atleast("atleast_3d", a, 3); }

/* ---- roll ---- */

/* `x` rolled by `shift` along `axis` (unscoped): the last `shift` elements moved to the front,
 * as the concatenation of two slices. */
static nv_array *roll_axis(nv_array *x, int64_t shift, int axis) {
  const nv__output *o = nv__out(x);
  int64_t n = o->shape[axis];
  if (n == 0) return nv_retain(x);
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return nv_retain(x);
  int start[NV__MAX_DIMS], stop[NV__MAX_DIMS];
  for (int d = 0; d < o->ndim; d++) {
    start[d] = 0;
    stop[d] = o->shape[d];
  }
  start[axis] = (int)(n - s);
  nv_array *parts[2];
  parts[0] = nv_slice(x, start, stop, NULL, o->ndim);
  start[axis] = 0;
  stop[axis] = (int)(n - s);
  parts[1] = nv_slice(x, start, stop, NULL, o->ndim);
  nv_array *r = nv_concatenate((const nv_array *const *)parts, 2, axis);
  nv__ix_release_all(parts, 2);
  return r;
}

nv_array *nv_roll(const nv_array *a, const int *shift, int nshift, const int *axes, int naxes) {
  nv_array *f = nv__op_check("roll", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  if (nshift <= 0 || !shift) return shape_error("roll", o, "no shift given");
  if (axes && (naxes <= 0 || (nshift != naxes && nshift != 1 && naxes != 1)))
    return shape_error("roll", o, "the shifts and axes do not pair up");
  int norm[NV__MAX_DIMS];
  for (int i = 0; axes && i < naxes; i++) {
    norm[i] = axes[i];
    if (!nv__norm_axis(&norm[i], o->ndim)) return nv__ix_bad_axis("roll", axes[i], o->ndim);
  }
  int64_t total = 0;
  for (int i = 0; i < nshift; i++) total += shift[i];
  nv__scope_suspend();
  nv_array *x;
  if (!axes) {
    nv_array *flat = flat_of(a, 0);
    nv_array *r = roll_axis(flat, total, 0);
    x = nv_reshape(r, o->shape, o->ndim);
    nv_release(flat);
    nv_release(r);
  } else {
    x = nv_retain((nv_array *)a);
    for (int i = 0; i < naxes; i++) {
      int64_t s = naxes == 1 ? total : shift[nshift == 1 ? 0 : i];
      nv_array *r = roll_axis(x, s, norm[i]);
      nv_release(x);
      x = r;
    }
  }
  nv__scope_resume();
  return scoped(x);
}

/* ---- diff ---- */

/* A prepend/append value for diff: a 0-d one is broadcast to a's shape with length 1 on the
 * axis (unscoped). */
static nv_array *diff_edge(const nv_array *v, const nv__output *o, int axis) {
  if (nv__out(v)->ndim != 0) return nv_retain((nv_array *)v);
  int shape[NV__MAX_DIMS];
  memcpy(shape, o->shape, sizeof(int) * (size_t)o->ndim);
  shape[axis] = 1;
  return nv_broadcast_to(v, shape, o->ndim);
}

nv_array *nv_diff(const nv_array *a, int n, int axis, const nv_array *prepend,
                  const nv_array *append) {
  nv_array *f = nv__op_check("diff", &a, 1);
  if (f) return f;
  if (prepend && (f = nv__op_check("diff", &prepend, 1))) return f;
  if (append && (f = nv__op_check("diff", &append, 1))) return f;
  const nv__output *o = nv__out(a);
  int ax = axis;
  if (!nv__norm_axis(&ax, o->ndim)) return nv__ix_bad_axis("diff", axis, o->ndim);
  if (n < 0) return shape_error("diff", o, "the order n is negative");
  nv__scope_suspend();
  nv_array *x = nv_retain((nv_array *)a);
  if (prepend || append) {
    nv_array *parts[3];
    int k = 0;
    if (prepend) parts[k++] = diff_edge(prepend, o, ax);
    parts[k++] = nv_retain((nv_array *)a);
    if (append) parts[k++] = diff_edge(append, o, ax);
    nv_release(x);
    x = nv_concatenate((const nv_array *const *)parts, k, ax);
    nv__ix_release_all(parts, k);
  }
  for (int i = 0; i < n && nv__meta_known(x) && nv__out(x)->shape[ax] > 0; i++) {
    const nv__output *xo = nv__out(x);
    int shape[NV__MAX_DIMS];
    memcpy(shape, xo->shape, sizeof(int) * (size_t)xo->ndim);
    shape[ax] -= 1;
    nv_array *in[1] = {x};
    nv__node *node = nv__op_node(NV__PRIM_DIFF, in, 1, xo->dtype, shape, xo->ndim,
                                 sizeof(nv__axis_params));
    if (node) ((nv__axis_params *)node->params)->axis = ax;
    nv_array *r = nv__op_finish("diff", node);
    nv_release(x);
    x = r;
  }
  nv__scope_resume();
  return scoped(x);
}
