/* The random family's samplers built on the element-wise and reduction families: normal,
 * bernoulli, truncated_normal, laplace, categorical, permutation. Each is composed of the
 * operations MLX composes, in MLX's order, so that it rounds as MLX's does. */
#include <math.h>

#include "nuvec/random.h"
#include "ops/random_internal.h"

/* Releases the `n` temporaries of a composition. */
static void release_all(nv_array **xs, int n) {
  for (int i = 0; i < n; i++) nv_release(xs[i]);
}

static bool is_real_float(nv_dtype dt) { return nv_issubdtype(dt, NV_CATEGORY_FLOATING); }

/* A float32 uniform draw on (-1, 1) — MLX's uniform(nextafter(-1, 0), 1, shape, float32), the
 * input of the inverse-CDF samplers. Scopes suspended by the caller. */
static nv_array *symmetric_unit(const int *shape, int ndim, const nv_array *key) {
  nv_array *lo = nv_array_float(nextafterf(-1.0f, 0.0f)), *hi = nv_array_float(1.0f);
  nv_array *u = nv__random_uniform(lo, hi, shape, ndim, NV_DTYPE_FLOAT32, key);
  nv_release(lo);
  nv_release(hi);
  return u;
}

/* ---- normal ---- */

/* A standard complex normal: erfinv of (shape, 2) float32 draws (each part of variance 1/2)
 * viewed as complex64. */
static nv_array *complex_normal(const int *shape, int ndim, const nv_array *key) {
  int sh[NV__MAX_DIMS + 1];
  for (int i = 0; i < ndim; i++) sh[i] = shape[i];
  sh[ndim] = 2;
  int last = -1;
  nv_array *t[3];
  t[0] = symmetric_unit(sh, ndim + 1, key);
  t[1] = nv_erfinv(t[0]);
  t[2] = nv_view(t[1], NV_DTYPE_COMPLEX64);
  nv_array *r = nv_squeeze(t[2], &last, 1);
  release_all(t, 3);
  return r;
}

/* MLX's normal with optional loc and scale (NULL: absent), checked; scopes suspended. */
static nv_array *normal_impl(const int *shape, int ndim, nv_dtype dtype, const nv_array *loc,
                             const nv_array *scale, const nv_array *key) {
  nv_array *s, *t;
  if (dtype == NV_DTYPE_COMPLEX64) {
    s = complex_normal(shape, ndim, key);
    if (scale) {
      t = nv_multiply(scale, s);
      nv_release(s);
      s = t;
    }
  } else {
    nv_array *u = symmetric_unit(shape, ndim, key);
    nv_array *applied = nv_array_scalar(sqrt(2.0), dtype);
    if (scale) {
      nv_array *sc = nv_astype(scale, dtype);
      t = nv_multiply(applied, sc);
      nv_release(sc);
      nv_release(applied);
      applied = t;
    }
    nv_array *e = nv_erfinv(u);
    nv_array *c = nv_astype(e, dtype);
    s = nv_multiply(applied, c);
    nv_array *tmp[4] = {u, applied, e, c};
    release_all(tmp, 4);
  }
  if (loc) {
    nv_array *l = dtype == NV_DTYPE_COMPLEX64 ? nv_retain((nv_array *)loc) : nv_astype(loc, dtype);
    t = nv_add(l, s);
    nv_release(l);
    nv_release(s);
    s = t;
  }
  return s;
}

static nv_array *normal_check(const int *shape, int ndim, nv_dtype dtype, const nv_array *key) {
  nv_array *f = nv__random_check("normal", shape, ndim, key);
  if (f) return f;
  if (!is_real_float(dtype) && dtype != NV_DTYPE_COMPLEX64)
    return nv__random_dtype_error("normal", dtype,
                                  "normal samples float16, bfloat16, float32, float64 or "
                                  "complex64");
  return NULL;
}

nv_array *nv_random_normal_array(const int *shape, int ndim, nv_dtype dtype, const nv_array *loc,
                                 const nv_array *scale, const nv_array *key) {
  nv_array *f = normal_check(shape, ndim, dtype, key);
  if (f) return f;
  const nv_array *ls[2] = {loc, scale};
  for (int i = 0; i < 2; i++) {
    if (ls[i] && (f = nv__op_check("normal", &ls[i], 1))) return f;
    if (!ls[i]) continue;
    /* loc and scale broadcast with the samples (the result takes the broadcast shape). */
    const nv__output *o = nv__out(ls[i]);
    int b[NV__MAX_DIMS], nb;
    if (!nv__broadcast_shapes(shape, ndim, o->shape, o->ndim, b, &nb)) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "normal",
                          "%s of shape %s does not broadcast with the shape %s",
                          i ? "scale" : "loc", nv__shape_str(o->shape, o->ndim, s1, sizeof s1),
                          nv__shape_str(shape, ndim, s2, sizeof s2));
    }
  }
  nv__scope_suspend();
  nv_array *r = normal_impl(shape, ndim, dtype, loc, scale, key);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_normal(const int *shape, int ndim, nv_dtype dtype, double loc, double scale,
                           const nv_array *key) {
  nv_array *f = normal_check(shape, ndim, dtype, key);
  if (f) return f;
  nv__scope_suspend();
  /* loc 0 and scale 1 are left out as MLX leaves out absent ones: adding 0 and multiplying
   * sqrt(2) by 1 change no sample (the draws are never -0). */
  nv_array *l = loc != 0.0 ? nv_weak_scalar(loc) : NULL;
  nv_array *s = scale != 1.0 ? nv_weak_scalar(scale) : NULL;
  nv_array *r = normal_impl(shape, ndim, dtype, l, s, key);
  nv_release(l);
  nv_release(s);
  nv__scope_resume();
  return nv__random_scoped(r);
}

/* ---- bernoulli ---- */

nv_array *nv_random_bernoulli(const nv_array *p, const int *shape, int ndim,
                              const nv_array *key) {
  nv_array *f = nv__op_check("bernoulli", &p, 1);
  if (f) return f;
  const nv__output *o = nv__out(p);
  if (!shape && ndim == 0) {
    shape = o->shape;
    ndim = o->ndim;
  }
  if ((f = nv__random_check("bernoulli", shape, ndim, key))) return f;
  if (!is_real_float(o->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "bernoulli",
                        "the probability p must be a float array, got %s",
                        nv_dtype_name(o->dtype));
  if (!nv__random_fits("bernoulli", shape, ndim, &p, 1, &f)) return f;
  nv__scope_suspend();
  /* p scaled to [0, the float32 above 2^32 - 1], so p >= 1 is always true, p <= 0 never. */
  nv_array *t[3];
  t[0] = nv_array_float(nextafterf((float)UINT32_MAX, INFINITY));
  t[1] = nv_multiply(p, t[0]);
  t[2] = nv__random_bits_unscoped(shape, ndim, 4, key);
  nv_array *r = nv_less(t[2], t[1]);
  release_all(t, 3);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_bernoulli_scalar(double p, const int *shape, int ndim, const nv_array *key) {
  nv__scope_suspend();
  nv_array *pa = nv_weak_scalar(p);
  nv__scope_resume();
  nv_array *r = nv_random_bernoulli(pa, shape, ndim, key);
  nv_release(pa);
  return r;
}

/* ---- truncated_normal ---- */

nv_array *nv_random_truncated_normal(const nv_array *lower, const nv_array *upper,
                                     const int *shape, int ndim, nv_dtype dtype,
                                     const nv_array *key) {
  const char *op = "truncated_normal";
  const nv_array *b[2] = {lower, upper};
  nv_array *f = nv__op_check(op, b, 2);
  if (f) return f;
  int bs[NV__MAX_DIMS], nb;
  if (!shape && ndim == 0) {
    const nv__output *l = nv__out(lower), *u = nv__out(upper);
    if (!nv__broadcast_shapes(l->shape, l->ndim, u->shape, u->ndim, bs, &nb)) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "bounds of shapes %s and %s cannot be "
                          "broadcast", nv__shape_str(l->shape, l->ndim, s1, sizeof s1),
                          nv__shape_str(u->shape, u->ndim, s2, sizeof s2));
    }
    shape = bs;
    ndim = nb;
  }
  if ((f = nv__random_check(op, shape, ndim, key))) return f;
  if (!nv__random_uniform_dtype(dtype))
    return nv__random_dtype_error(op, dtype, "truncated_normal samples float16, bfloat16 or "
                                  "float32");
  if (!nv__random_fits(op, shape, ndim, b, 2, &f)) return f;
  nv__scope_suspend();
  nv_array *t[9];
  t[0] = nv_array_scalar(sqrt(2.0), dtype);
  t[1] = nv_astype(lower, dtype);
  t[2] = nv_astype(upper, dtype);
  nv_array *q = nv_divide(t[1], t[0]);
  t[3] = nv_erf(q);
  nv_release(q);
  q = nv_divide(t[2], t[0]);
  t[4] = nv_erf(q);
  nv_release(q);
  t[5] = nv__random_uniform(t[3], t[4], shape, ndim, dtype, key);
  t[6] = nv_erfinv(t[5]);
  t[7] = nv_multiply(t[0], t[6]);
  t[8] = nv_minimum(t[2], t[7]);
  /* Clipped into the bounds: rounding can step just past them. */
  nv_array *r = nv_maximum(t[8], t[1]);
  release_all(t, 9);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_truncated_normal_scalar(double lower, double upper, const int *shape,
                                            int ndim, nv_dtype dtype, const nv_array *key) {
  nv__scope_suspend();
  nv_array *l = nv_weak_scalar(lower), *u = nv_weak_scalar(upper);
  nv__scope_resume();
  nv_array *r = nv_random_truncated_normal(l, u, shape, ndim, dtype, key);
  nv_release(l);
  nv_release(u);
  return r;
}

/* ---- laplace ---- */

nv_array *nv_random_laplace(const int *shape, int ndim, nv_dtype dtype, double loc, double scale,
                            const nv_array *key) {
  nv_array *f = nv__random_check("laplace", shape, ndim, key);
  if (f) return f;
  if (!is_real_float(dtype))
    return nv__random_dtype_error("laplace", dtype, "laplace samples real float dtypes");
  nv__scope_suspend();
  /* The inverse CDF: sign(u) * log1p(-|u|), computed in float32 (float64 for float64). */
  nv_array *t[7];
  t[0] = symmetric_unit(shape, ndim, key);
  t[1] = nv_array_scalar(-1.0, dtype);
  t[2] = nv_abs(t[0]);
  t[3] = nv_multiply(t[1], t[2]);
  t[4] = nv_log1p(t[3]);
  t[5] = nv_sign(t[0]);
  t[6] = nv_multiply(t[5], t[4]);
  nv_array *r = nv_astype(t[6], dtype);
  release_all(t, 7);
  if (scale != 1.0) {
    nv_array *s = nv_array_scalar(scale, dtype), *m = nv_multiply(s, r);
    nv_release(s);
    nv_release(r);
    r = m;
  }
  if (loc != 0.0) {
    nv_array *l = nv_array_scalar(loc, dtype), *a = nv_add(l, r);
    nv_release(l);
    nv_release(r);
    r = a;
  }
  nv__scope_resume();
  return nv__random_scoped(r);
}

/* ---- categorical ---- */

/* argmax over the class axis of logits plus Gumbel noise of `shape` with the class axis
 * inserted where it lines up with logits' (MLX's categorical_impl). Scopes suspended. */
static nv_array *categorical_impl(const nv_array *logits, int axis, const int *shape, int ndim,
                                  const nv_array *key) {
  const nv__output *o = nv__out(logits);
  int offset = axis + ndim - o->ndim + 1;
  int gs[NV__MAX_DIMS];
  for (int i = 0, j = 0; i <= ndim; i++) gs[i] = i == offset ? o->shape[axis] : shape[j++];
  nv_array *u = nv__random_unit(gs, ndim + 1, NV_DTYPE_FLOAT32, key);
  nv_array *t[5];
  t[0] = nv_log(u);
  t[1] = nv_negative(t[0]);
  t[2] = nv_log(t[1]);
  t[3] = nv_negative(t[2]);
  t[4] = nv_add(t[3], logits);
  nv_array *r = nv_argmax(t[4], &offset, false);
  nv_release(u);
  release_all(t, 5);
  return r;
}

/* Checks logits and the axis (normalized in place). */
static nv_array *categorical_check(const nv_array *logits, int *axis, const nv_array *key) {
  nv_array *f = nv__op_check("categorical", &logits, 1);
  if (f) return f;
  if ((f = nv__random_check("categorical", NULL, 0, key))) return f;
  const nv__output *o = nv__out(logits);
  int a = *axis;
  if (!nv__norm_axis(axis, o->ndim))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "categorical",
                        "invalid axis %d for logits with %d dimensions", a, o->ndim);
  if (o->ndim >= NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "categorical", "too many dimensions");
  return NULL;
}

nv_array *nv_random_categorical(const nv_array *logits, int axis, const int *shape, int ndim,
                                const nv_array *key) {
  nv_array *f = categorical_check(logits, &axis, key);
  if (f) return f;
  const nv__output *o = nv__out(logits);
  int reduced[NV__MAX_DIMS], nr = 0;
  for (int i = 0; i < o->ndim; i++)
    if (i != axis) reduced[nr++] = o->shape[i];
  if (!shape && ndim == 0) {
    shape = reduced;
    ndim = nr;
  }
  if ((f = nv__random_check("categorical", shape, ndim, NULL))) return f;
  int b[NV__MAX_DIMS], nb;
  if (ndim >= NV__MAX_DIMS || !nv__broadcast_shapes(shape, ndim, reduced, nr, b, &nb) ||
      nb != ndim || memcmp(b, shape, (size_t)ndim * sizeof(int))) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "categorical",
                        "shape %s is not broadcast compatible with the reduced logits shape %s",
                        nv__shape_str(shape, ndim, s1, sizeof s1),
                        nv__shape_str(reduced, nr, s2, sizeof s2));
  }
  nv__scope_suspend();
  nv_array *r = categorical_impl(logits, axis, shape, ndim, key);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_categorical_samples(const nv_array *logits, int axis, int num_samples,
                                        const nv_array *key) {
  nv_array *f = categorical_check(logits, &axis, key);
  if (f) return f;
  if (num_samples < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "categorical",
                        "num_samples must be >= 0, got %d", num_samples);
  const nv__output *o = nv__out(logits);
  /* MLX: logits get a trailing axis of 1 that the samples fill. */
  int shape[NV__MAX_DIMS], nd = 0;
  for (int i = 0; i < o->ndim; i++)
    if (i != axis) shape[nd++] = o->shape[i];
  shape[nd++] = num_samples;
  nv__scope_suspend();
  int last = o->ndim;
  nv_array *l = nv_expand_dims(logits, &last, 1);
  nv_array *r = categorical_impl(l, axis, shape, nd, key);
  nv_release(l);
  nv__scope_resume();
  return nv__random_scoped(r);
}

/* ---- permutation ---- */

nv_array *nv_random_permutation_n(int n, const nv_array *key) {
  if (n < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "permutation", "n must be >= 0, got %d", n);
  nv_array *f = nv__random_check("permutation", &n, 1, key);
  if (f) return f;
  nv__scope_suspend();
  nv_array *b = nv__random_bits_unscoped(&n, 1, 4, key);
  int axis = 0;
  nv_array *r = nv_argsort(b, &axis);
  nv_release(b);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_permutation(const nv_array *x, int axis, const nv_array *key) {
  nv_array *f = nv__op_check("permutation", &x, 1);
  if (f) return f;
  if ((f = nv__random_check("permutation", NULL, 0, key))) return f;
  const nv__output *o = nv__out(x);
  int a = axis;
  if (!nv__norm_axis(&a, o->ndim))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "permutation",
                        "invalid axis %d for an array with %d dimensions", axis, o->ndim);
  nv__scope_suspend();
  nv_array *p = nv_random_permutation_n(o->shape[a], key);
  nv_array *r = nv_take(x, p, a);
  nv_release(p);
  nv__scope_resume();
  return nv__random_scoped(r);
}
