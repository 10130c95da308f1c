/* Builders of the elementwise family beyond unary/binary arithmetic: where, clip, closeness
 * tests, triangular and window creation, meshgrid, real/imag views, dtype views, stop_gradient,
 * depends and number_of_elements. */
#include <stdlib.h>

#include "ops/elementwise_params.h"
#include "ops/ops_internal.h"

static nv_array *same(const nv_array *x) {
  return nv__array_new(nv__node_retain(x->node), x->idx);
}

/* Turns a failed builder result into a status (for the ops that return nv_status). */
static nv_status status_of(nv_array *f) {
  nv_status s = nv_array_status(f);
  nv_release(f);
  return s;
}

/* Hands a composed op's unscoped result `r` to the caller's scope, or, when building it failed
 * on the arguments, returns an error that names `op` too. A result that failed with its
 * metadata carries an input's error: it is passed on unchanged. */
static nv_array *rename_failure(const char *op, nv_array *r) {
  nv_status s = nv_array_status(r);
  if (s != NV_OK && !nv__meta_known(r)) {
    nv_array *e = nv__op_error(s, op, "%s", nv_array_error(r));
    nv_release(r);
    return e;
  }
  nv__scope_register(r);
  return r;
}

/* ---- where, clip ---- */

nv_array *nv_where(const nv_array *cond, const nv_array *x, const nv_array *y) {
  const nv_array *xs[3] = {cond, x, y};
  nv_array *f = nv__op_check("where", xs, 3);
  if (f) return f;
  const nv__output *oc = nv__out(cond), *ox = nv__out(x), *oy = nv__out(y);
  int s1[NV__MAX_DIMS], shape[NV__MAX_DIMS], n1, nd;
  if (!nv__broadcast_shapes(oc->shape, oc->ndim, ox->shape, ox->ndim, s1, &n1) ||
      !nv__broadcast_shapes(s1, n1, oy->shape, oy->ndim, shape, &nd)) {
    char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF], c[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "where",
                        "shapes %s, %s and %s cannot be broadcast",
                        nv__shape_str(oc->shape, oc->ndim, a, sizeof a),
                        nv__shape_str(ox->shape, ox->ndim, b, sizeof b),
                        nv__shape_str(oy->shape, oy->ndim, c, sizeof c));
  }
  nv_dtype dt = nv__result_type(x, y);
  nv_array *in[3] = {nv__cast_unscoped(cond, NV_DTYPE_BOOL), nv__cast_unscoped(x, dt),
                     nv__cast_unscoped(y, dt)};
  nv__node *n = nv__op_node(NV__PRIM_WHERE, in, 3, dt, shape, nd, 0);
  for (int i = 0; i < 3; i++) nv_release(in[i]);
  return nv__op_finish("where", n);
}

nv_array *nv_clip(const nv_array *a, const nv_array *a_min, const nv_array *a_max) {
  nv_array *f = nv__op_check("clip", &a, 1);
  if (f) return f;
  if (!a_min && !a_max)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "clip",
                        "at most one of a_min and a_max may be absent (NULL)");
  const nv_array *bounds[2] = {a_min ? a_min : a, a_max ? a_max : a};
  if ((f = nv__op_check("clip", bounds, 2))) return f;
  nv__scope_suspend();
  nv_array *lo = a_min ? nv_maximum(a, a_min) : nv_retain((nv_array *)a);
  nv_array *r = a_max ? nv_minimum(lo, a_max) : nv_retain(lo);
  nv__scope_resume();
  nv_release(lo);
  return rename_failure("clip", r);
}

nv_array *nv_clip_scalar(const nv_array *a, double a_min, double a_max) {
  nv__scope_suspend();
  nv_array *lo = nv_weak_scalar(a_min), *hi = nv_weak_scalar(a_max);
  nv__scope_resume();
  nv_array *r = nv_clip(a, lo, hi);
  nv_release(lo);
  nv_release(hi);
  return r;
}

/* ---- Closeness ---- */

static nv_array *close_node(int prim, const nv_array *a, const nv_array *b, double rtol,
                            double atol, bool equal_nan, bool reduce) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  int shape[NV__MAX_DIMS], nd;
  if (!nv__broadcast_shapes(oa->shape, oa->ndim, ob->shape, ob->ndim, shape, &nd)) {
    char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "shapes %s and %s cannot be broadcast",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  }
  nv_dtype dt = nv__result_type(a, b);
  nv_array *in[2] = {nv__cast_unscoped(a, dt), nv__cast_unscoped(b, dt)};
  nv__node *n = nv__op_node(prim, in, 2, NV_DTYPE_BOOL, shape, reduce ? 0 : nd,
                            sizeof(nv__isclose_params));
  nv_release(in[0]);
  nv_release(in[1]);
  if (n) {
    nv__isclose_params *p = n->params;
    p->rtol = rtol;
    p->atol = atol;
    p->equal_nan = equal_nan;
  }
  return nv__op_finish(op, n);
}

nv_array *nv_isclose(const nv_array *a, const nv_array *b, double rtol, double atol,
                     bool equal_nan) {
  return close_node(NV__PRIM_ISCLOSE, a, b, rtol, atol, equal_nan, false);
}

nv_array *nv_allclose(const nv_array *a, const nv_array *b, double rtol, double atol,
                      bool equal_nan) {
  return close_node(NV__PRIM_ALLCLOSE, a, b, rtol, atol, equal_nan, true);
}

nv_array *nv_array_equal(const nv_array *a, const nv_array *b, bool equal_nan) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("array_equal", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  if (oa->ndim != ob->ndim || memcmp(oa->shape, ob->shape, (size_t)oa->ndim * sizeof(int))) {
    if ((f = nv__op_inherit(xs, 2, NV_DTYPE_BOOL, NULL, 0))) return f;
    return nv_array_bool(false);
  }
  return close_node(NV__PRIM_ARRAY_EQUAL, a, b, 0, 0, equal_nan, true);
}

/* ---- Creation ---- */

nv_array *nv_tri(int n, int m, int k, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "tri", "invalid dtype %d", (int)dtype);
  if (m < 0) m = n;
  if (n < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "tri", "N must be non-negative, got %d", n);
  int shape[2] = {n, m};
  nv__node *node = nv__op_node(NV__PRIM_TRI, NULL, 0, dtype, shape, 2, sizeof(nv__tri_params));
  if (node) ((nv__tri_params *)node->params)->k = k;
  return nv__op_finish("tri", node);
}

/* tril/triu select x or zero by a bool tri mask broadcast over the leading axes. */
static nv_array *triangle(const char *op, const nv_array *x, int k, bool upper) {
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  if (o->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the array must be at least 2-D, got %d-D",
                        o->ndim);
  int rows = o->shape[o->ndim - 2], cols = o->shape[o->ndim - 1];
  /* triu(x, k) keeps column - row >= k, the complement of tri(k - 1); k - 1 saturates. */
  int tk = upper ? (k == INT32_MIN ? k : k - 1) : k;
  nv__scope_suspend();
  nv_array *mask = nv_tri(rows, cols, tk, NV_DTYPE_BOOL);
  nv_array *zero = nv_zeros(NULL, 0, o->dtype);
  nv_array *r = upper ? nv_where(mask, zero, x) : nv_where(mask, x, zero);
  nv__scope_resume();
  nv_release(mask);
  nv_release(zero);
  return rename_failure(op, r);
}

nv_array *nv_tril(const nv_array *x, int k) { return triangle("tril", x, k, false); }
nv_array *nv_triu(const nv_array *x, int k) { return triangle("triu", x, k, true); }

static nv_array *window(int prim, int m) {
  int shape[1] = {m < 0 ? 0 : m};
  return nv__op_finish(nv__prims[prim].name,
                       nv__op_node(prim, NULL, 0, NV_DTYPE_FLOAT32, shape, 1, 0));
}

nv_array *nv_hanning(int m) { return window(NV__PRIM_HANNING, m); }
nv_array *nv_hamming(int m) { return window(NV__PRIM_HAMMING, m); }
nv_array *nv_bartlett(int m) { return window(NV__PRIM_BARTLETT, m); }
nv_array *nv_blackman(int m) { return window(NV__PRIM_BLACKMAN, m); }

/* One meshgrid output: input i flattened, reshaped to size 1 on every axis but its own, then
 * (unless sparse) broadcast to the full grid. Returns an unscoped array. */
static nv_array *grid_axis(const nv_array *x, int axis, int nd, const int *full, bool sparse) {
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = 1;
  shape[axis] = -1;
  nv_array *r = nv_reshape(x, shape, nd);
  if (sparse) return r;
  nv_array *b = nv_broadcast_to(r, full, nd);
  nv_release(r);
  return b;
}

nv_status nv_meshgrid(const nv_vec *arrays, bool sparse, const char *indexing, nv_vec *out) {
  if (!arrays || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "meshgrid: NULL array list");
  bool xy = !indexing || !strcmp(indexing, "xy");
  if (!xy && strcmp(indexing, "ij"))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "meshgrid: indexing must be \"xy\" or \"ij\", got \"%s\"", indexing);
  size_t n = nv_vec_size(arrays);
  if (n > NV__MAX_DIMS)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "meshgrid: %zu arrays exceed %d dimensions", n,
                         NV__MAX_DIMS);
  nv_array *f = nv__op_check("meshgrid", (const nv_array *const *)nv_vec_data(arrays), (int)n);
  if (f) return status_of(f);
  int nd = (int)n, full[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int64_t size = nv__out(nv_vec_get(arrays, (size_t)i))->size;
    if (size > INT32_MAX)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "meshgrid: input %d is too large", i);
    full[i] = (int)size;
  }
  /* Cartesian indexing swaps the first two axes of the grid. */
  if (xy && nd >= 2) {
    int t = full[0];
    full[0] = full[1];
    full[1] = t;
  }
  nv_array *res[NV__MAX_DIMS];
  nv_status s = NV_OK;
  nv__scope_suspend();
  for (int i = 0; i < nd; i++) {
    int axis = xy && nd >= 2 && i < 2 ? 1 - i : i;
    res[i] = grid_axis(nv_vec_get(arrays, (size_t)i), axis, nd, full, sparse);
    if (s == NV_OK) s = nv_array_status(res[i]);
  }
  nv__scope_resume();
  if (s == NV_OK) s = nv__vec_push_all(out, res, (size_t)nd);
  for (int i = 0; i < nd; i++) nv_release(res[i]);
  return s;
}

/* ---- real / imag ---- */

/* A float32 view of the real or imaginary parts of a complex64 array: strides double, and the
 * kernel sets the element offset (twice the input's, plus one for the imaginary part). */
static nv_array *complex_part(int prim, const nv_array *x) {
  const nv__output *o = nv__out(x);
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(prim, in, 1, NV_DTYPE_FLOAT32, o->shape, o->ndim, 0);
  if (n) {
    int64_t st[NV__MAX_DIMS];
    for (int i = 0; i < o->ndim; i++) st[i] = o->strides[i] * 2;
    nv__output_set_strides(&n->out[0], st);
  }
  return nv__op_finish(nv__prims[prim].name, n);
}

nv_array *nv_real(const nv_array *x) {
  nv_array *f = nv__op_check("real", &x, 1);
  if (f) return f;
  if (nv__out(x)->dtype != NV_DTYPE_COMPLEX64) return same(x);
  return complex_part(NV__PRIM_REAL, x);
}

nv_array *nv_imag(const nv_array *x) {
  nv_array *f = nv__op_check("imag", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  if (o->dtype != NV_DTYPE_COMPLEX64) {
    if ((f = nv__op_inherit(&x, 1, o->dtype, o->shape, o->ndim))) return f;
    return nv_zeros(o->shape, o->ndim, o->dtype);
  }
  return complex_part(NV__PRIM_IMAG, x);
}

/* ---- view, stop_gradient ---- */

nv_array *nv_view(const nv_array *x, nv_dtype dtype) {
  nv_array *f = nv__op_check("view", &x, 1);
  if (f) return f;
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "view", "invalid dtype %d", (int)dtype);
  const nv__output *o = nv__out(x);
  int64_t ib = (int64_t)nv_dtype_size(o->dtype), ob = (int64_t)nv_dtype_size(dtype);
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) shape[i] = o->shape[i];
  if (ib != ob) {
    if (o->ndim == 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "view",
                          "a 0-d array can only change to a type of the same size (%s to %s)",
                          nv_dtype_name(o->dtype), nv_dtype_name(dtype));
    int64_t bytes = (int64_t)o->shape[o->ndim - 1] * ib;
    if (bytes % ob) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "view",
                          "the last axis of shape %s (%lld bytes of %s) is not a multiple of "
                          "the size of %s",
                          nv__shape_str(o->shape, o->ndim, s, sizeof s), (long long)bytes,
                          nv_dtype_name(o->dtype), nv_dtype_name(dtype));
    }
    if (bytes / ob > INT32_MAX)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "view", "the last axis becomes too large");
    shape[o->ndim - 1] = (int)(bytes / ob);
  }
  /* The buffer is shared when the strides stay whole in the new dtype: same item size, a
   * narrower type over a contiguous last axis, or a row-contiguous input. */
  bool share = ib == ob || (o->flags & NV__FLAG_ROW) ||
               (ob < ib && o->ndim > 0 && o->strides[o->ndim - 1] == 1);
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(NV__PRIM_VIEW_DTYPE, in, 1, dtype, shape, o->ndim,
                            sizeof(nv__view_dtype_params));
  if (!n) return nv__op_finish("view", NULL);
  ((nv__view_dtype_params *)n->params)->copy = !share;
  if (share && o->ndim > 0) {
    int64_t st[NV__MAX_DIMS];
    for (int i = 0; i < o->ndim - 1; i++) st[i] = o->strides[i] * ib / ob;
    st[o->ndim - 1] = ib == ob ? o->strides[o->ndim - 1] : 1;
    if (o->flags & NV__FLAG_ROW && o->size > 0) {
      /* Row-contiguous: the new layout is row-contiguous too. */
      int64_t acc = 1;
      for (int i = o->ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= shape[i];
      }
    }
    nv__output_set_strides(&n->out[0], st);
  }
  return nv__array_new(n, 0);
}

nv_array *nv_stop_gradient(const nv_array *x) {
  nv_array *f = nv__op_check("stop_gradient", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(NV__PRIM_STOP_GRADIENT, in, 1, o->dtype, o->shape, o->ndim, 0);
  if (n) nv__output_set_strides(&n->out[0], o->strides);
  return nv__op_finish("stop_gradient", n);
}

/* ---- depends ---- */

nv_status nv_depends(const nv_vec *inputs, const nv_vec *dependencies, nv_vec *out) {
  if (!inputs || !dependencies || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "depends: NULL array list");
  size_t ni = nv_vec_size(inputs), nd = nv_vec_size(dependencies);
  if (ni == 0) return NV_OK;
  if (ni + nd > INT32_MAX)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "depends: too many arrays");
  nv_array **all = malloc((ni + nd) * sizeof *all);
  nv_array **res = calloc(ni, sizeof *res);
  nv_status s = NV_OK;
  if (!all || !res) {
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "depends: out of memory");
    goto done;
  }
  for (size_t i = 0; i < ni; i++) all[i] = nv_vec_get(inputs, i);
  for (size_t i = 0; i < nd; i++) all[ni + i] = nv_vec_get(dependencies, i);
  nv_array *f = nv__op_check("depends", (const nv_array *const *)all, (int)(ni + nd));
  if (f) {
    s = status_of(f);
    goto done;
  }
  /* An op returning a status fails with its inputs' error, appending nothing. */
  for (size_t i = 0; i < ni + nd && s == NV_OK; i++) s = nv_array_status(all[i]);
  if (s != NV_OK) goto done;
  nv__node *n = nv__node_new(NV__PRIM_DEPENDS, all, (int)(ni + nd), (int)ni, 0);
  if (!n) {
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "depends: out of memory");
    goto done;
  }
  for (size_t i = 0; i < ni + nd; i++) nv__node_inherit_tracer(n, all[i]->node);
  for (size_t i = 0; i < ni; i++) {
    const nv__output *o = nv__out(all[i]);
    nv__output_set_shape(&n->out[i], o->dtype, o->shape, o->ndim);
    nv__output_set_strides(&n->out[i], o->strides);
  }
  nv__scope_suspend();
  for (size_t i = 0; i < ni; i++) res[i] = nv__array_new(nv__node_retain(n), (int)i);
  nv__scope_resume();
  nv__node_release(n);
  s = nv__vec_push_all(out, res, ni);
  for (size_t i = 0; i < ni; i++) nv_release(res[i]);
done:
  free(all);
  free(res);
  return s;
}

/* ---- number_of_elements ---- */

nv_array *nv_number_of_elements(const nv_array *x, const int *axes, int naxes, bool inverted,
                                nv_dtype dtype) {
  nv_array *f = nv__op_check("number_of_elements", &x, 1);
  if (f) return f;
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "number_of_elements", "invalid dtype %d",
                        (int)dtype);
  const nv__output *o = nv__out(x);
  if (naxes < 0 || (naxes && !axes))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "number_of_elements", "invalid axes");
  bool seen[NV__MAX_DIMS] = {false};
  for (int i = 0; i < naxes; i++) {
    int a = axes[i];
    if (!nv__norm_axis(&a, o->ndim) || seen[a])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "number_of_elements",
                          "invalid or repeated axis %d for %d dimensions", axes[i], o->ndim);
    seen[a] = true;
  }
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(NV__PRIM_NUMBER_OF_ELEMENTS, in, 1, dtype, NULL, 0,
                            sizeof(nv__count_params) + (size_t)naxes * sizeof(int));
  if (n) {
    nv__count_params *p = n->params;
    p->inverted = inverted;
    for (int a = 0; a < o->ndim; a++)
      if (seen[a]) p->axes[p->naxes++] = a;
  }
  return nv__op_finish("number_of_elements", n);
}
