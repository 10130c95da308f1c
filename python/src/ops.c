/* nuvec's CPython extension: the op table. Each op is one line of `ops[]`: its MLX name, the
 * adapter for its C signature, the C builder, MLX's argument names, how many are required,
 * integer defaults and flags (METHOD: also an array method). The table builds both the module
 * function and the array method (the array is the first argument). Adapters parse the
 * arguments an entry names, convert them (arrays, Python scalars as weak scalars, shapes,
 * axes, dtypes), call the builder and wrap the result, raising the library's error. See
 * python/README.md for how to add a binding. */
#include <math.h>
#include <string.h>

#include "optable.h"

typedef nv_array *(*f_a)(A1);
typedef nv_array *(*f_aa)(A1, A1);
typedef nv_array *(*f_ai)(A1, int);
typedef nv_array *(*f_aii)(A1, int, int);
typedef nv_array *(*f_aiii)(A1, int, int, int);
typedef nv_array *(*f_ad)(A1, nv_dtype);
typedef nv_array *(*f_shape)(A1, const int *, int);
typedef nv_array *(*f_reduce)(A1, const int *, int, bool);
typedef nv_array *(*f_fill)(const int *, int, nv_dtype);
typedef nv_array *(*f_aai)(A1, A1, int);
typedef nv_array *(*f_int)(int);

/* ---- Adapters: element-wise ---- */

static PyObject *sig_unary(call *c) {
  nv_array *a = arr(c, 0);
  return a ? nvpy_wrap(FN(f_a)(a)) : NULL;
}

static PyObject *sig_binary(call *c) {
  nv_array *a, *b;
  if (pair(c, 0, 1, &a, &b) < 0) return NULL;
  return nvpy_wrap(FN(f_aa)(a, b));
}

/* f(a, int k = def[0]): round(decimals), tril/triu(k), diag(k). */
static PyObject *sig_a_int(call *c) {
  nv_array *a = arr(c, 0);
  int k;
  if (!a || int_at(c, 1, dflt(c, 0), &k) < 0) return NULL;
  return nvpy_wrap(FN(f_ai)(a, k));
}

/* f(a, int, int) with defaults def[0], def[1] (required ones have no default: nreq says). */
static PyObject *sig_a_int_int(call *c) {
  nv_array *a = arr(c, 0);
  int i, j;
  if (!a || int_at(c, 1, dflt(c, 0), &i) < 0 || int_at(c, 2, dflt(c, 1), &j) < 0) return NULL;
  return nvpy_wrap(FN(f_aii)(a, i, j));
}

static PyObject *sig_a_3int(call *c) {
  nv_array *a = arr(c, 0);
  int i, j, k;
  if (!a || int_at(c, 1, dflt(c, 0), &i) < 0 || int_at(c, 2, dflt(c, 1), &j) < 0 ||
      int_at(c, 3, dflt(c, 2), &k) < 0)
    return NULL;
  return nvpy_wrap(FN(f_aiii)(a, i, j, k));
}

/* f(a, dtype): astype, view, from_fp8 (default def[0] when not required). */
static PyObject *sig_a_dtype(call *c) {
  nv_array *a = arr(c, 0);
  int dt = dtype_at(c, 1, dflt(c, 0));
  if (!a || dt < 0) return NULL;
  return nvpy_wrap(FN(f_ad)(a, (nv_dtype)dt));
}

static PyObject *sig_divmod(call *c) {
  nv_array *a, *b;
  if (pair(c, 0, 1, &a, &b) < 0) return NULL;
  nv_vec *v = nv_vec_new();
  if (!v) return PyErr_NoMemory();
  nv_status st = nv_divmod(a, b, v);
  PyObject *r = st == NV_OK ? nvpy_tuple_from_vec(v) : nvpy_raise_last(st);
  nv_vec_free(v);
  return r;
}

static PyObject *sig_where(call *c) {
  nv_array *cond = arr(c, 0), *x, *y;
  if (!cond || pair(c, 1, 2, &x, &y) < 0) return NULL;
  return nvpy_wrap(nv_where(cond, x, y));
}

static PyObject *sig_clip(call *c) {
  nv_array *a = arr(c, 0), *lo = NULL, *hi = NULL;
  if (!a) return NULL;
  if (given(c, 1) && !(lo = operand_at(c, 1, 0))) return NULL;
  if (given(c, 2) && !(hi = operand_at(c, 2, 0))) return NULL;
  return nvpy_wrap(nv_clip(a, lo, hi));
}

typedef nv_array *(*f_close)(A1, A1, double, double, bool);
static PyObject *sig_isclose(call *c) {
  nv_array *a, *b;
  double rtol, atol;
  bool equal_nan;
  if (pair(c, 0, 1, &a, &b) < 0 || double_at(c, 2, 1e-5, &rtol) < 0 ||
      double_at(c, 3, 1e-8, &atol) < 0 || bool_at(c, 4, false, &equal_nan) < 0)
    return NULL;
  return nvpy_wrap(FN(f_close)(a, b, rtol, atol, equal_nan));
}

static PyObject *sig_array_equal(call *c) {
  nv_array *a, *b;
  bool equal_nan;
  if (pair(c, 0, 1, &a, &b) < 0 || bool_at(c, 2, false, &equal_nan) < 0) return NULL;
  return nvpy_wrap(nv_array_equal(a, b, equal_nan));
}

static PyObject *sig_nan_to_num(call *c) {
  nv_array *a = arr(c, 0);
  double nan, pinf, ninf;
  if (!a || double_at(c, 1, 0.0, &nan) < 0 || double_at(c, 2, 0, &pinf) < 0 ||
      double_at(c, 3, 0, &ninf) < 0)
    return NULL;
  return nvpy_wrap(nv_nan_to_num(a, nan, given(c, 2) ? &pinf : NULL, given(c, 3) ? &ninf : NULL));
}

/* ---- Adapters: creation ---- */

/* The fill value of full / full_like: a Python value meant for float64 is converted to it
 * directly, not through float32 (full(2, 0.1, dtype=float64) holds 0.1 exactly). */
static nv_array *fill_value(call *c, int i, int dt, nv_array *v) {
  if (dt != NV_DTYPE_FLOAT64 || NVPY_IS_ARRAY(c->argv[i]) || nv_array_dtype(v) == NV_DTYPE_FLOAT64)
    return v;
  nv_array *x = nvpy_to_array(c->argv[i], NV_DTYPE_FLOAT64);
  if (!x) arg_error(c, i);
  return hold(c, x);
}

static PyObject *sig_fill(call *c) {
  int shape[NVPY_MAXDIM];
  int nd = shape_at(c, 0, shape);
  int dt = nd < 0 ? -2 : dtype_at(c, 1, NV_DTYPE_FLOAT32);
  if (dt < 0) return NULL;
  return nvpy_wrap(FN(f_fill)(shape, nd, (nv_dtype)dt));
}

static PyObject *sig_full(call *c) {
  int shape[NVPY_MAXDIM];
  int nd = shape_at(c, 0, shape);
  nv_array *v = nd < 0 ? NULL : arr(c, 1);
  if (!v) return NULL;
  int dt = dtype_at(c, 2, nv_array_dtype(v));
  if (dt < 0 || !(v = fill_value(c, 1, dt, v))) return NULL;
  return nvpy_wrap(nv_full_array(shape, nd, v, (nv_dtype)dt));
}

/* zeros_like / ones_like (a, dtype=None); full_like (a, vals, dtype=None). */
static PyObject *sig_like(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  bool full = c->op->fn == NULL;
  int di = full ? 2 : 1;
  int dt = dtype_at(c, di, nv_array_dtype(a));
  if (dt < 0) return NULL;
  if (full) {
    nv_array *v = arr(c, 1);
    if (!v || !(v = fill_value(c, 1, dt, v))) return NULL;
    return nvpy_wrap(nv_full_array(nv_array_shape(a), nv_array_ndim(a), v, (nv_dtype)dt));
  }
  nv_array *r = FN(f_a)(a);
  if ((nv_dtype)dt == nv_array_dtype(a)) return nvpy_wrap(r);
  nv_array *y = nv_astype(r, (nv_dtype)dt);
  nv_release(r);
  return nvpy_wrap(y);
}

static bool is_float_arg(PyObject *o) { return o && PyFloat_Check(o); }

/* A float argument of arange under the name MLX's overloads give it. */
static int arange_arg(PyObject *o, const char *name, double *out) {
  *out = PyFloat_AsDouble(o);
  if (*out == -1.0 && PyErr_Occurred()) {
    char label[NVPY_LABEL];
    snprintf(label, sizeof label, "arange: %s", name);
    nvpy_error_prefix(label);
    return -1;
  }
  return 0;
}

/* MLX's overloads: arange(start, stop[, step]), arange(stop[, step]) with stop the first
 * positional argument, and arange(stop=...[, step]); a start given by name needs a stop. */
static PyObject *sig_arange(call *c) {
  double start = 0, stop, step = 1;
  PyObject *o_start = c->argv[0], *o_stop = c->argv[1], *o_step = c->argv[2];
  if (!given(c, 1) && c->npos >= 1) { /* arange(stop) */
    o_stop = o_start;
    o_start = NULL;
  }
  if (!o_stop || o_stop == Py_None) {
    PyErr_SetString(PyExc_TypeError, "arange: expected a stop value");
    return NULL;
  }
  if ((o_start && arange_arg(o_start, "start", &start) < 0) || arange_arg(o_stop, "stop", &stop) < 0 ||
      (o_step && o_step != Py_None && arange_arg(o_step, "step", &step) < 0))
    return NULL;
  bool fl = is_float_arg(o_start) || is_float_arg(o_stop) || is_float_arg(o_step);
  /* Integer ranges take int32, or int64 where a bound or the step is past int32 (MLX). */
  bool wide = fabs(start) > INT32_MAX || fabs(stop) > INT32_MAX || fabs(step) > INT32_MAX;
  int dt = dtype_at(c, 3, fl ? NV_DTYPE_FLOAT32 : wide ? NV_DTYPE_INT64 : NV_DTYPE_INT32);
  if (dt < 0) return NULL;
  return nvpy_wrap(nv_arange(start, stop, step, (nv_dtype)dt));
}

static PyObject *sig_linspace(call *c) {
  double start, stop;
  int num;
  bool endpoint;
  if (double_at(c, 0, 0, &start) < 0 || double_at(c, 1, 0, &stop) < 0 ||
      int_at(c, 2, 50, &num) < 0 || bool_at(c, 3, true, &endpoint) < 0)
    return NULL;
  int dt = dtype_at(c, 4, NV_DTYPE_FLOAT32);
  if (dt < 0) return NULL;
  if (endpoint || num <= 0) return nvpy_wrap(nv_linspace(start, stop, num, (nv_dtype)dt));
  /* Without the endpoint: num + 1 points, the last one dropped, as NumPy. */
  nv_array *full = nv_linspace(start, stop, num + 1, (nv_dtype)dt);
  int lo = 0, hi = num;
  nv_array *r = nv_slice(full, &lo, &hi, NULL, 1);
  nv_release(full);
  return nvpy_wrap(r);
}

static PyObject *sig_eye(call *c) {
  int n, m, k;
  if (int_at(c, 0, 0, &n) < 0 || int_at(c, 1, -1, &m) < 0 || int_at(c, 2, 0, &k) < 0) return NULL;
  int dt = dtype_at(c, 3, NV_DTYPE_FLOAT32);
  if (dt < 0) return NULL;
  if (given(c, 1) && m < 0) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "eye: m must be >= 0");
  typedef nv_array *(*f_eye)(int, int, int, nv_dtype);
  return nvpy_wrap(FN(f_eye)(n, m, k, (nv_dtype)dt));
}

static PyObject *sig_identity(call *c) {
  int n;
  if (int_at(c, 0, 0, &n) < 0) return NULL;
  int dt = dtype_at(c, 1, NV_DTYPE_FLOAT32);
  if (dt < 0) return NULL;
  return nvpy_wrap(nv_identity(n, (nv_dtype)dt));
}

static PyObject *sig_window(call *c) {
  int m;
  if (int_at(c, 0, 0, &m) < 0) return NULL;
  return nvpy_wrap(FN(f_int)(m));
}

/* ---- Adapters: shapes and axes ---- */

/* f(a, shape): reshape, broadcast_to, tile. */
static PyObject *sig_shape(call *c) {
  nv_array *a = arr(c, 0);
  int shape[NVPY_MAXDIM];
  int nd = a ? shape_at(c, 1, shape) : -1;
  if (nd < 0) return NULL;
  return nvpy_wrap(FN(f_shape)(a, shape, nd));
}

/* f(a, axes or None): transpose, squeeze, flip (NULL axes: the op's default). */
static PyObject *sig_axes(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n == -1) return NULL;
  return nvpy_wrap(FN(f_shape)(a, n == -2 ? NULL : axes, n == -2 ? 0 : n));
}

/* f(a, axis=None, keepdims=False) for reductions: None reduces every axis. */
static PyObject *sig_reduce(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  bool keep;
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n == -1 || bool_at(c, 2, false, &keep) < 0) return NULL;
  return nvpy_wrap(FN(f_reduce)(a, n == -2 ? NULL : axes, n == -2 ? 0 : n, keep));
}

static PyObject *sig_as_strided(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  int shape[NVPY_MAXDIM], nd;
  int64_t strides[NVPY_MAXDIM];
  int offset;
  if (given(c, 1)) {
    if ((nd = shape_at(c, 1, shape)) < 0) return NULL;
  } else {
    nd = nv_array_ndim(a);
    if (nd) memcpy(shape, nv_array_shape(a), sizeof(int) * (size_t)nd);
  }
  if (given(c, 2)) {
    char label[NVPY_LABEL];
    arg_label(c, 2, label);
    PyObject *t = nvpy_items(c->argv[2], NVPY_MAXDIM, label, "a sequence of ints");
    if (!t) return NULL;
    int rc = PyTuple_GET_SIZE(t) == nd ? 0 : -1;
    if (rc < 0)
      PyErr_Format(PyExc_ValueError, "%s: %zd strides for %d dimensions", label, PyTuple_GET_SIZE(t), nd);
    for (int i = 0; rc == 0 && i < nd; i++) rc = nvpy_int64_arg(PyTuple_GET_ITEM(t, i), &strides[i], label);
    Py_DECREF(t);
    if (rc < 0) return NULL;
  } else {
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
      strides[i] = s;
      s *= shape[i];
    }
  }
  if (int_at(c, 3, 0, &offset) < 0) return NULL;
  return nvpy_wrap(nv_as_strided(a, shape, nd, strides, offset));
}

static PyObject *sig_contiguous(call *c) {
  nv_array *a = arr(c, 0);
  bool col;
  if (!a || bool_at(c, 1, false, &col) < 0) return NULL;
  if (col && nv_array_is_col_contiguous(a)) return nvpy_wrap(nv_retain(a));
  return nvpy_wrap(nv_contiguous(a));
}

static PyObject *sig_unflatten(call *c) {
  nv_array *a = arr(c, 0);
  int axis, shape[NVPY_MAXDIM];
  if (!a || int_at(c, 1, 0, &axis) < 0) return NULL;
  int nd = shape_at(c, 2, shape);
  if (nd < 0) return NULL;
  return nvpy_wrap(nv_unflatten(a, axis, shape, nd));
}

static PyObject *sig_expand_dims(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n < 0) return n == -2 ? nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "expand_dims: axis is required") : NULL;
  return nvpy_wrap(nv_expand_dims(a, axes, n));
}

/* A list result from a C op that appends to an nv_vec. */
static PyObject *vec_result(nv_status st, nv_vec *v, bool as_list) {
  PyObject *r = st != NV_OK ? nvpy_raise_last(st)
                : as_list   ? nvpy_list_from_vec(v)
                            : nvpy_tuple_from_vec(v);
  nv_vec_free(v);
  return r;
}

static PyObject *sig_split(call *c) {
  nv_array *a = arr(c, 0);
  int axis, idx[NVPY_MAXDIM];
  if (!a || int_at(c, 2, 0, &axis) < 0) return NULL;
  nv_vec *v = nv_vec_new();
  if (!v) return PyErr_NoMemory();
  nv_status st;
  if (PyLong_Check(c->argv[1])) {
    int sections;
    if (int_at(c, 1, 0, &sections) < 0) {
      nv_vec_free(v);
      return NULL;
    }
    st = nv_split(a, sections, axis, v);
  } else {
    int n = shape_at(c, 1, idx);
    if (n < 0) {
      nv_vec_free(v);
      return NULL;
    }
    st = nv_split_at(a, idx, n, axis, v);
  }
  return vec_result(st, v, true);
}

static PyObject *sig_unstack(call *c) {
  nv_array *a = arr(c, 0);
  int axis;
  if (!a || int_at(c, 1, 0, &axis) < 0) return NULL;
  nv_vec *v = nv_vec_new();
  if (!v) return PyErr_NoMemory();
  return vec_result(nv_unstack(a, axis, v), v, false);
}

static PyObject *sig_concatenate(call *c) {
  char label[NVPY_LABEL];
  nv_vec *v = nvpy_vec_arg(c->argv[0], arg_label(c, 0, label));
  if (!v) return NULL;
  int axis;
  nv_array *r = NULL;
  if (int_at(c, 1, 0, &axis) == 0) {
    nv_array *const *xs = nv_vec_data(v);
    int n = (int)nv_vec_size(v);
    bool flat = c->argv[1] == Py_None;
    if (c->op->fn == (void (*)(void))nv_stack) r = nv_stack((const nv_array *const *)xs, n, axis);
    else r = flat ? nv_concatenate_flat((const nv_array *const *)xs, n)
                  : nv_concatenate((const nv_array *const *)xs, n, axis);
  }
  nv_vec_free(v);
  return r ? nvpy_wrap(r) : NULL;
}

static PyObject *sig_repeat(call *c) {
  nv_array *a = arr(c, 0);
  int reps, axis;
  if (!a || int_at(c, 1, 0, &reps) < 0 || int_at(c, 2, 0, &axis) < 0) return NULL;
  return nvpy_wrap(given(c, 2) ? nv_repeat(a, reps, axis) : nv_repeat_flat(a, reps));
}

/* One axis' padding: an int (both sides) or (before, after) or (width,). 0, or -1. */
static int pad_pair(PyObject *o, int *lo, int *hi, const char *label) {
  if (PyLong_Check(o) || PyIndex_Check(o)) {
    if (nvpy_int_arg(o, 0, lo, label) < 0) return -1;
    *hi = *lo;
    return 0;
  }
  int w[NVPY_MAXDIM];
  int k = nvpy_shape_arg(o, w, label);
  if (k < 0) return -1;
  if (k < 1 || k > 2) {
    PyErr_Format(PyExc_ValueError, "%s: expected (before, after) or (width,), got %d values", label, k);
    return -1;
  }
  *lo = w[0];
  *hi = w[k - 1];
  return 0;
}

static PyObject *sig_pad(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  int low[NVPY_MAXDIM], high[NVPY_MAXDIM], n = 1;
  PyObject *pw = c->argv[1];
  char label[NVPY_LABEL];
  arg_label(c, 1, label);
  if (PyLong_Check(pw) || PyIndex_Check(pw)) {
    if (pad_pair(pw, &low[0], &high[0], label) < 0) return NULL;
  } else {
    /* A pair (or single width) for every axis, or one sequence per axis. */
    PyObject *t = nvpy_items(pw, NVPY_MAXDIM, label, "an int or a sequence");
    if (!t) return NULL;
    Py_ssize_t len = PyTuple_GET_SIZE(t);
    PyObject *first = len ? PyTuple_GET_ITEM(t, 0) : NULL;
    int rc = 0;
    if (!first || PyLong_Check(first) || PyIndex_Check(first)) {
      rc = pad_pair(t, &low[0], &high[0], label);
    } else {
      for (Py_ssize_t i = 0; rc == 0 && i < len; i++)
        rc = pad_pair(PyTuple_GET_ITEM(t, i), &low[i], &high[i], label);
      n = (int)len;
    }
    Py_DECREF(t);
    if (rc < 0) return NULL;
  }
  static const char *modes[] = {"constant", "edge", "reflect", "symmetric"};
  const char *m = str_at(c, 2, "constant");
  if (!m) return NULL;
  int mode = 0;
  while (mode < 4 && strcmp(m, modes[mode])) mode++;
  if (mode == 4) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "pad: mode: unknown mode");
  nv_array *val = NULL;
  if (given(c, 3) && !(val = operand_at(c, 3, 0))) return NULL;
  return nvpy_wrap(nv_pad(a, low, high, n, (nv_pad_mode)mode, val));
}

static PyObject *sig_roll(call *c) {
  nv_array *a = arr(c, 0);
  int shift[NVPY_MAXDIM], axes[NVPY_MAXDIM];
  int ns = a ? shape_at(c, 1, shift) : -1;
  int na = ns < 0 ? -1 : axes_at(c, 2, axes);
  if (na == -1) return NULL;
  return nvpy_wrap(nv_roll(a, shift, ns, na == -2 ? NULL : axes, na == -2 ? 0 : na));
}

static PyObject *sig_diff(call *c) {
  nv_array *a = arr(c, 0);
  int n, axis;
  if (!a || int_at(c, 1, 1, &n) < 0 || int_at(c, 2, -1, &axis) < 0) return NULL;
  return nvpy_wrap(nv_diff(a, n, axis, NULL, NULL));
}

/* ---- Adapters: indexing ---- */

static PyObject *sig_take(call *c) {
  nv_array *a = arr(c, 0), *idx = a ? arr(c, 1) : NULL;
  int axis;
  if (!idx || int_at(c, 2, 0, &axis) < 0) return NULL;
  return nvpy_wrap(given(c, 2) ? nv_take(a, idx, axis) : nv_take_flat(a, idx));
}

/* take_along_axis / put_along_axis with axis None: over the flattened array. */
static PyObject *sig_along_axis(call *c) {
  bool put = c->op->fn == (void (*)(void))nv_put_along_axis;
  nv_array *a = arr(c, 0), *idx = a ? arr(c, 1) : NULL, *vals = NULL;
  if (!idx || (put && !(vals = arr(c, 2)))) return NULL;
  int ai = put ? 3 : 2, axis;
  if (int_at(c, ai, put ? 0 : -1, &axis) < 0) return NULL;
  bool flat = put ? !given(c, ai) : (c->argv[ai] == Py_None);
  if (flat) {
    nv_array *fa = hold(c, nv_flatten(a, 0, -1)), *fi = hold(c, nv_flatten(idx, 0, -1));
    if (!put) return nvpy_wrap(nv_take_along_axis(fa, fi, 0));
    nv_array *fv = nv_array_ndim(vals) ? hold(c, nv_flatten(vals, 0, -1)) : vals;
    nv_array *r = nv_put_along_axis(fa, fi, fv, 0);
    nv_array *s = nv_reshape(r, nv_array_shape(a), nv_array_ndim(a));
    nv_release(r);
    return nvpy_wrap(s);
  }
  return nvpy_wrap(put ? nv_put_along_axis(a, idx, vals, axis) : nv_take_along_axis(a, idx, axis));
}

static PyObject *sig_slice_dyn(call *c) {
  nv_array *a = arr(c, 0), *start = a ? arr(c, 1) : NULL;
  int axes[NVPY_MAXDIM], size[NVPY_MAXDIM];
  int na = start ? shape_at(c, 2, axes) : -1;
  int ns = na < 0 ? -1 : shape_at(c, 3, size);
  if (ns < 0) return NULL;
  return nvpy_wrap(nv_slice_dynamic(a, start, axes, na, size, ns));
}

static PyObject *sig_slice_update_dyn(call *c) {
  nv_array *a = arr(c, 0), *u = a ? arr(c, 1) : NULL, *start = u ? arr(c, 2) : NULL;
  int axes[NVPY_MAXDIM];
  int na = start ? shape_at(c, 3, axes) : -1;
  if (na < 0) return NULL;
  return nvpy_wrap(nv_slice_update_dynamic(a, u, start, axes, na));
}

/* ---- Adapters: products ---- */

static PyObject *sig_addmm(call *c) {
  nv_array *cc = arr(c, 0), *a = cc ? arr(c, 1) : NULL, *b = a ? arr(c, 2) : NULL;
  double alpha, beta;
  if (!b || double_at(c, 3, 1.0, &alpha) < 0 || double_at(c, 4, 1.0, &beta) < 0) return NULL;
  return nvpy_wrap(nv_addmm(cc, a, b, alpha, beta));
}

static PyObject *sig_tensordot(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL;
  if (!b) return NULL;
  PyObject *ax = c->argv[2];
  if (!ax || PyLong_Check(ax)) {
    int n = 2;
    if (int_at(c, 2, 2, &n) < 0) return NULL;
    return nvpy_wrap(nv_tensordot(a, b, n));
  }
  char label[NVPY_LABEL];
  arg_label(c, 2, label);
  PyObject *f = nvpy_items(ax, 2, label, "an int or two lists");
  if (!f) return NULL;
  int xa[NVPY_MAXDIM], xb[NVPY_MAXDIM], na = -1, nb = -1;
  if (PyTuple_GET_SIZE(f) == 2) {
    na = nvpy_shape_arg(PyTuple_GET_ITEM(f, 0), xa, label);
    nb = na < 0 ? -1 : nvpy_shape_arg(PyTuple_GET_ITEM(f, 1), xb, label);
  } else {
    PyErr_Format(PyExc_ValueError, "%s: expected an int or two lists", label);
  }
  Py_DECREF(f);
  if (na < 0 || nb < 0) return NULL;
  if (na != nb)
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "tensordot: the two axis lists differ in length");
  return nvpy_wrap(nv_tensordot_axes(a, b, xa, xb, na));
}

static PyObject *sig_vecdot(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL;
  int axis;
  if (!b || int_at(c, 2, -1, &axis) < 0) return NULL;
  return nvpy_wrap(nv_vecdot(a, b, axis));
}

/* ---- Adapters: several arrays ---- */

typedef nv_status (*f_vec_arrays)(const nv_array *const *, int, nv_vec *);

static PyObject *sig_broadcast_arrays(call *c) {
  char label[NVPY_LABEL];
  nv_vec *in = nvpy_vec_arg(c->rest, arg_label(c, -1, label));
  if (!in) return NULL;
  nv_vec *v = nv_vec_new();
  nv_status st = v ? nv_broadcast_arrays((const nv_array *const *)nv_vec_data(in),
                                         (int)nv_vec_size(in), v)
                   : NV_ERR_OUT_OF_MEMORY;
  nv_vec_free(in);
  return vec_result(st, v, false);
}

/* atleast_1d/2d/3d(*arys): one array for one argument, else a list. */
static PyObject *sig_atleast(call *c) {
  char label[NVPY_LABEL];
  nv_vec *in = nvpy_vec_arg(c->rest, arg_label(c, -1, label));
  if (!in) return NULL;
  size_t n = nv_vec_size(in);
  PyObject *l = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; l && i < n; i++) {
    PyObject *r = nvpy_wrap(FN(f_a)(nv_vec_get(in, i)));
    if (!r) Py_CLEAR(l);
    else PyList_SET_ITEM(l, (Py_ssize_t)i, r);
  }
  nv_vec_free(in);
  if (l && n == 1) {
    PyObject *r = PyList_GET_ITEM(l, 0);
    Py_INCREF(r);
    Py_DECREF(l);
    return r;
  }
  return l;
}

static PyObject *sig_meshgrid(call *c) {
  bool sparse;
  const char *indexing = "xy";
  if (bool_at(c, 0, false, &sparse) < 0) return NULL;
  if (!(indexing = str_at(c, 1, "xy"))) return NULL;
  char label[NVPY_LABEL];
  nv_vec *in = nvpy_vec_arg(c->rest, arg_label(c, -1, label));
  if (!in) return NULL;
  nv_vec *v = nv_vec_new();
  nv_status st = v ? nv_meshgrid(in, sparse, indexing, v) : NV_ERR_OUT_OF_MEMORY;
  nv_vec_free(in);
  return vec_result(st, v, false); /* a tuple, as mlx.core's */
}

static PyObject *sig_depends(call *c) {
  bool single = NVPY_IS_ARRAY(c->argv[0]);
  PyObject *inputs = c->argv[0], *deps = c->argv[1];
  PyObject *ti = single ? PyTuple_Pack(1, inputs) : (Py_INCREF(inputs), inputs);
  PyObject *td = NVPY_IS_ARRAY(deps) ? PyTuple_Pack(1, deps) : (Py_INCREF(deps), deps);
  nv_vec *vi = ti ? nvpy_vec_arg(ti, "depends: inputs") : NULL;
  nv_vec *vd = vi && td ? nvpy_vec_arg(td, "depends: dependencies") : NULL;
  Py_XDECREF(ti);
  Py_XDECREF(td);
  PyObject *r = NULL;
  if (vd) {
    nv_vec *out = nv_vec_new();
    nv_status st = out ? nv_depends(vi, vd, out) : NV_ERR_OUT_OF_MEMORY;
    if (st == NV_OK && single) {
      r = nvpy_wrap(nv_retain(nv_vec_get(out, 0)));
      nv_vec_free(out);
    } else {
      r = vec_result(st, out, true);
    }
  }
  nv_vec_free(vi);
  nv_vec_free(vd);
  return r;
}

/* f(a, axis=None, keepdims=False, ddof=0): var, std. */
typedef nv_array *(*f_reduce_ddof)(A1, const int *, int, bool, int);
static PyObject *sig_reduce_ddof(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM], ddof;
  bool keep;
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n == -1 || bool_at(c, 2, false, &keep) < 0 || int_at(c, 3, 0, &ddof) < 0) return NULL;
  return nvpy_wrap(FN(f_reduce_ddof)(a, n == -2 ? NULL : axes, n == -2 ? 0 : n, keep, ddof));
}

/* An optional single axis: None gives NULL (the flattened array), absent gives def[0]. */
static int axis_opt(call *c, int i, int *axis, const int **p) {
  if (c->argv[i] == Py_None) {
    *p = NULL;
    return 0;
  }
  *p = axis;
  return int_at(c, i, dflt(c, 0), axis);
}

/* f(a, axis=None, keepdims=False): argmax, argmin. */
typedef nv_array *(*f_arg_reduce)(A1, const int *, bool);
static PyObject *sig_arg_reduce(call *c) {
  nv_array *a = arr(c, 0);
  int axis;
  const int *p;
  bool keep;
  if (!a || bool_at(c, 2, false, &keep) < 0) return NULL;
  if (!c->argv[1]) p = NULL;
  else if (axis_opt(c, 1, &axis, &p) < 0) return NULL;
  return nvpy_wrap(FN(f_arg_reduce)(a, p, keep));
}

/* f(a, axis=None, *, reverse=False, inclusive=True[, dtype]): the scans. */
typedef nv_array *(*f_scan)(A1, const int *, bool, bool);
static PyObject *sig_scan(call *c) {
  nv_array *a = arr(c, 0);
  int axis;
  const int *p = NULL;
  bool rev, inc;
  if (!a || (c->argv[1] && axis_opt(c, 1, &axis, &p) < 0) || bool_at(c, 2, false, &rev) < 0 ||
      bool_at(c, 3, true, &inc) < 0)
    return NULL;
  int dt = dtype_at(c, 4, -1);
  if (dt == -2) return NULL;
  nv_array *x = a;
  if (dt >= 0 && (nv_dtype)dt != nv_array_dtype(a)) x = hold(c, nv_astype(a, (nv_dtype)dt));
  return nvpy_wrap(FN(f_scan)(x, p, rev, inc));
}

/* f(a, axis=-1 | None): sort, argsort. */
typedef nv_array *(*f_axis_opt)(A1, const int *);
static PyObject *sig_sort(call *c) {
  nv_array *a = arr(c, 0);
  int axis;
  const int *p = &axis;
  axis = -1;
  if (!a || (c->argv[1] && axis_opt(c, 1, &axis, &p) < 0)) return NULL;
  return nvpy_wrap(FN(f_axis_opt)(a, p));
}

/* f(a, k, axis=-1 | None): partition, argpartition, topk. */
typedef nv_array *(*f_k_axis)(A1, int, const int *);
static PyObject *sig_k_axis(call *c) {
  nv_array *a = arr(c, 0);
  int k, axis = -1;
  const int *p = &axis;
  if (!a || int_at(c, 1, 0, &k) < 0 || (c->argv[2] && axis_opt(c, 2, &axis, &p) < 0)) return NULL;
  return nvpy_wrap(FN(f_k_axis)(a, k, p));
}

static PyObject *sig_softmax(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  bool precise;
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n == -1 || bool_at(c, 2, false, &precise) < 0) return NULL;
  return nvpy_wrap(nv_softmax(a, n == -2 ? NULL : axes, n == -2 ? 0 : n, precise));
}

static PyObject *sig_trace(call *c) {
  nv_array *a = arr(c, 0);
  int off, a1, a2;
  if (!a || int_at(c, 1, 0, &off) < 0 || int_at(c, 2, 0, &a1) < 0 || int_at(c, 3, 1, &a2) < 0)
    return NULL;
  int dt = dtype_at(c, 4, -1);
  if (dt == -2) return NULL;
  return nvpy_wrap(nv_trace(a, off, a1, a2, dt));
}

static PyObject *sig_searchsorted(call *c) {
  nv_array *a = arr(c, 0), *v = a ? arr(c, 1) : NULL;
  const char *side = v ? str_at(c, 2, "left") : NULL;
  if (!side) return NULL;
  if (strcmp(side, "left") && strcmp(side, "right"))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "searchsorted: side must be 'left' or 'right'");
  return nvpy_wrap(nv_searchsorted(a, v, !strcmp(side, "right")));
}

/* ---- Adapters: mlx.core's conveniences over the ops above ---- */

/* (min, max) over the same axes: minmax(a, axis=None, keepdims=False). */
static PyObject *sig_minmax(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  bool keep;
  int n = a ? axes_at(c, 1, axes) : -1;
  if (n == -1 || bool_at(c, 2, false, &keep) < 0) return NULL;
  const int *p = n == -2 ? NULL : axes;
  n = n == -2 ? 0 : n;
  PyObject *lo = nvpy_wrap(nv_min(a, p, n, keep)), *hi = lo ? nvpy_wrap(nv_max(a, p, n, keep)) : NULL;
  PyObject *r = hi ? PyTuple_Pack(2, lo, hi) : NULL;
  Py_XDECREF(lo);
  Py_XDECREF(hi);
  return r;
}

/* The last two axes swapped (the array API's matrix_transpose). */
static PyObject *sig_matrix_transpose(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  if (nv_array_ndim(a) < 2)
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                             "[matrix_transpose] Input array must have at least 2 dimensions.");
  return nvpy_wrap(nv_swapaxes(a, -1, -2));
}

/* MLX's form of a shape in messages: (2,3), (2), (). */
static PyObject *shape_text(const int *s, int n) {
  PyObject *r = PyUnicode_FromString("(");
  for (int i = 0; r && i < n; i++) Py_SETREF(r, PyUnicode_FromFormat("%U%s%d", r, i ? "," : "", s[i]));
  if (r) Py_SETREF(r, PyUnicode_FromFormat("%U)", r));
  return r;
}

/* broadcast_shapes(*shapes): the shape NumPy's broadcasting gives them, as a tuple. */
static PyObject *sig_broadcast_shapes(call *c) {
  Py_ssize_t n = PyTuple_GET_SIZE(c->rest);
  if (n == 0) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "[broadcast_shapes] Must provide at least one shape.");
  int acc[NVPY_MAXDIM], s[NVPY_MAXDIM], out[NVPY_MAXDIM];
  int na = nvpy_shape_arg(PyTuple_GET_ITEM(c->rest, 0), acc, "broadcast_shapes: shapes");
  for (Py_ssize_t k = 1; na >= 0 && k < n; k++) {
    int ns = nvpy_shape_arg(PyTuple_GET_ITEM(c->rest, k), s, "broadcast_shapes: shapes");
    if (ns < 0) return NULL;
    int no = na > ns ? na : ns;
    for (int i = 0; i < no; i++) {
      int x = i < no - na ? 1 : acc[i - (no - na)], y = i < no - ns ? 1 : s[i - (no - ns)];
      if (x != y && x != 1 && y != 1) {
        PyObject *ta = shape_text(acc, na), *ts = ta ? shape_text(s, ns) : NULL;
        if (ts) PyErr_Format(PyExc_ValueError, "[broadcast_shapes] Shapes %U and %U cannot be broadcast.", ta, ts);
        Py_XDECREF(ta);
        Py_XDECREF(ts);
        return NULL;
      }
      out[i] = x == 1 ? y : x;
    }
    memcpy(acc, out, sizeof(int) * (size_t)no);
    na = no;
  }
  if (na < 0) return NULL;
  PyObject *r = PyTuple_New(na);
  for (int i = 0; r && i < na; i++) PyTuple_SET_ITEM(r, i, PyLong_FromLong(acc[i]));
  return r;
}

/* asarray(a, dtype=None, copy=None): array(a, dtype). With copy=False it fails when that needs
 * a copy: anything but a nuvec array of the dtype asked for. */
static PyObject *sig_asarray(call *c) {
  PyObject *a = c->argv[0];
  int dt = dtype_at(c, 1, -1);
  if (dt == -2) return NULL;
  if (given(c, 2)) {
    int copy = PyObject_IsTrue(c->argv[2]);
    if (copy < 0) return arg_error(c, 2), NULL;
    if (!copy && !(NVPY_IS_ARRAY(a) && (dt < 0 || (nv_dtype)dt == nv_array_dtype(NVPY_A(a)))))
      return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                               "asarray: Unable to avoid copy while creating an array as requested.");
  }
  /* As array(a, dtype). */
  nv_array *x = nvpy_to_array(a, dt);
  return x ? nvpy_wrap(x) : (arg_error(c, 0), NULL);
}

/* ---- The table ---- */

#define UNARY(name, f, flags) {name, sig_unary, F(f), KW("a"), 1, {0}, flags, NULL}
#define BINARY(name, f) {name, sig_binary, F(f), KW("a", "b"), 2, {0}, 0, NULL}

static const nvpy_op ops[] = {
    /* Element-wise, unary. */
    UNARY("abs", nv_abs, METHOD),
    UNARY("negative", nv_negative, 0),
    UNARY("positive", nv_positive, 0),
    UNARY("exp", nv_exp, METHOD),
    UNARY("log", nv_log, METHOD),
    UNARY("sqrt", nv_sqrt, METHOD),
    UNARY("sign", nv_sign, 0),
    UNARY("logical_not", nv_logical_not, 0),
    UNARY("reciprocal", nv_reciprocal, METHOD),
    UNARY("floor", nv_floor, 0),
    UNARY("ceil", nv_ceil, 0),
    UNARY("trunc", nv_trunc, 0),
    UNARY("square", nv_square, METHOD),
    UNARY("rsqrt", nv_rsqrt, METHOD),
    UNARY("expm1", nv_expm1, 0),
    UNARY("log2", nv_log2, METHOD),
    UNARY("log10", nv_log10, METHOD),
    UNARY("log1p", nv_log1p, METHOD),
    UNARY("sin", nv_sin, METHOD),
    UNARY("cos", nv_cos, METHOD),
    UNARY("tan", nv_tan, 0),
    UNARY("arcsin", nv_arcsin, 0),
    UNARY("arccos", nv_arccos, 0),
    UNARY("arctan", nv_arctan, 0),
    UNARY("sinh", nv_sinh, 0),
    UNARY("cosh", nv_cosh, 0),
    UNARY("tanh", nv_tanh, 0),
    UNARY("arcsinh", nv_arcsinh, 0),
    UNARY("arccosh", nv_arccosh, 0),
    UNARY("arctanh", nv_arctanh, 0),
    UNARY("degrees", nv_degrees, 0),
    UNARY("radians", nv_radians, 0),
    UNARY("sigmoid", nv_sigmoid, 0),
    UNARY("erf", nv_erf, 0),
    UNARY("erfinv", nv_erfinv, 0),
    /* The fused GELU forms, for nuvec.nn's gelu, gelu_approx and gelu_fast_approx. */
    UNARY("_gelu", nv_gelu, 0),
    UNARY("_gelu_approx", nv_gelu_approx, 0),
    UNARY("_gelu_fast_approx", nv_gelu_fast_approx, 0),
    UNARY("isnan", nv_isnan, 0),
    UNARY("isinf", nv_isinf, 0),
    UNARY("isfinite", nv_isfinite, 0),
    UNARY("isposinf", nv_isposinf, 0),
    UNARY("isneginf", nv_isneginf, 0),
    UNARY("conjugate", nv_conjugate, 0),
    UNARY("conj", nv_conjugate, METHOD),
    UNARY("real", nv_real, 0),
    UNARY("imag", nv_imag, 0),
    UNARY("bitwise_invert", nv_bitwise_invert, 0),
    UNARY("stop_gradient", nv_stop_gradient, 0),
    UNARY("to_fp8", nv_to_fp8, 0),
    {"round", sig_a_int, F(nv_round), KW("a", "decimals"), 1, {0}, METHOD, NULL},
    {"nan_to_num", sig_nan_to_num, NULL, KW("a", "nan", "posinf", "neginf"), 1, {0}, 0, NULL},
    /* Element-wise, binary (Python scalars are weakly typed). */
    BINARY("add", nv_add),
    BINARY("subtract", nv_subtract),
    BINARY("multiply", nv_multiply),
    BINARY("divide", nv_divide),
    BINARY("maximum", nv_maximum),
    BINARY("minimum", nv_minimum),
    BINARY("floor_divide", nv_floor_divide),
    BINARY("remainder", nv_remainder),
    BINARY("power", nv_power),
    BINARY("arctan2", nv_arctan2),
    BINARY("logaddexp", nv_logaddexp),
    BINARY("equal", nv_equal),
    BINARY("not_equal", nv_not_equal),
    BINARY("greater", nv_greater),
    BINARY("greater_equal", nv_greater_equal),
    BINARY("less", nv_less),
    BINARY("less_equal", nv_less_equal),
    BINARY("logical_and", nv_logical_and),
    BINARY("logical_or", nv_logical_or),
    BINARY("logical_xor", nv_logical_xor),
    BINARY("bitwise_and", nv_bitwise_and),
    BINARY("bitwise_or", nv_bitwise_or),
    BINARY("bitwise_xor", nv_bitwise_xor),
    BINARY("left_shift", nv_left_shift),
    BINARY("right_shift", nv_right_shift),
    BINARY("matmul", nv_matmul),
    BINARY("inner", nv_inner),
    BINARY("outer", nv_outer),
    BINARY("kron", nv_kron),
    {"divmod", sig_divmod, NULL, KW("a", "b"), 2, {0}, 0, NULL},
    {"where", sig_where, NULL, KW("condition", "x", "y"), 3, {0}, 0, NULL},
    {"clip", sig_clip, NULL, KW("a", "a_min", "a_max"), 3, {0}, 0, NULL},
    {"isclose", sig_isclose, F(nv_isclose), KW("a", "b", "rtol", "atol", "equal_nan"), 2, {0}, 0, NULL},
    {"allclose", sig_isclose, F(nv_allclose), KW("a", "b", "rtol", "atol", "equal_nan"), 2, {0}, 0, NULL},
    {"array_equal", sig_array_equal, NULL, KW("a", "b", "equal_nan"), 2, {0}, 0, NULL},
    /* Creation. */
    {"zeros", sig_fill, F(nv_zeros), KW("shape", "dtype"), 1, {0}, 0, NULL},
    {"ones", sig_fill, F(nv_ones), KW("shape", "dtype"), 1, {0}, 0, NULL},
    {"full", sig_full, NULL, KW("shape", "vals", "dtype"), 2, {0}, 0, NULL},
    {"zeros_like", sig_like, F(nv_zeros_like), KW("a", "dtype"), 1, {0}, 0, NULL},
    {"ones_like", sig_like, F(nv_ones_like), KW("a", "dtype"), 1, {0}, 0, NULL},
    {"full_like", sig_like, NULL, KW("a", "vals", "dtype"), 2, {0}, 0, NULL},
    {"arange", sig_arange, NULL, KW("start", "stop", "step", "dtype"), 0, {0}, 0, NULL},
    {"linspace", sig_linspace, NULL, KW("start", "stop", "num", "endpoint", "dtype"), 2, {0}, 0, NULL},
    {"eye", sig_eye, F(nv_eye), KW("n", "m", "k", "dtype"), 1, {0}, 0, NULL},
    {"identity", sig_identity, NULL, KW("n", "dtype"), 1, {0}, 0, NULL},
    {"tri", sig_eye, F(nv_tri), KW("n", "m", "k", "dtype"), 1, {0}, 0, NULL},
    {"tril", sig_a_int, F(nv_tril), KW("x", "k"), 1, {0}, 0, NULL},
    {"triu", sig_a_int, F(nv_triu), KW("x", "k"), 1, {0}, 0, NULL},
    {"hanning", sig_window, F(nv_hanning), KW("M"), 1, {0}, 0, NULL},
    {"hamming", sig_window, F(nv_hamming), KW("M"), 1, {0}, 0, NULL},
    {"bartlett", sig_window, F(nv_bartlett), KW("M"), 1, {0}, 0, NULL},
    {"blackman", sig_window, F(nv_blackman), KW("M"), 1, {0}, 0, NULL},
    /* Types. */
    {"astype", sig_a_dtype, F(nv_astype), KW("a", "dtype"), 2, {0}, 0, NULL},
    {"view", sig_a_dtype, F(nv_view), KW("a", "dtype"), 2, {0}, METHOD, NULL},
    {"from_fp8", sig_a_dtype, F(nv_from_fp8), KW("x", "dtype"), 1, {NV_DTYPE_BFLOAT16}, 0, NULL},
    /* Shapes. */
    {"reshape", sig_shape, F(nv_reshape), KW("a", "shape"), 2, {0}, 0, NULL},
    {"broadcast_to", sig_shape, F(nv_broadcast_to), KW("a", "shape"), 2, {0}, 0, NULL},
    {"tile", sig_shape, F(nv_tile), KW("a", "reps"), 2, {0}, 0, NULL},
    {"transpose", sig_axes, F(nv_transpose), KW("a", "axes"), 1, {0}, 0, NULL},
    {"permute_dims", sig_axes, F(nv_transpose), KW("a", "axes"), 1, {0}, 0, NULL},
    {"squeeze", sig_axes, F(nv_squeeze), KW("a", "axis"), 1, {0}, METHOD, NULL},
    {"flip", sig_axes, F(nv_flip), KW("a", "axis"), 1, {0}, 0, NULL},
    {"expand_dims", sig_expand_dims, NULL, KW("a", "axis"), 2, {0}, 0, NULL},
    {"as_strided", sig_as_strided, NULL, KW("a", "shape", "strides", "offset"), 1, {0}, 0, NULL},
    {"contiguous", sig_contiguous, NULL, KW("a", "allow_col_major"), 1, {0}, 0, NULL},
    {"flatten", sig_a_int_int, F(nv_flatten), KW("a", "start_axis", "end_axis"), 1, {0, -1}, METHOD, NULL},
    {"unflatten", sig_unflatten, NULL, KW("a", "axis", "shape"), 3, {0}, 0, NULL},
    {"swapaxes", sig_a_int_int, F(nv_swapaxes), KW("a", "axis1", "axis2"), 3, {0}, METHOD, NULL},
    {"moveaxis", sig_a_int_int, F(nv_moveaxis), KW("a", "source", "destination"), 3, {0}, METHOD, NULL},
    {"split", sig_split, NULL, KW("a", "indices_or_sections", "axis"), 2, {0}, METHOD, NULL},
    {"unstack", sig_unstack, NULL, KW("x", "axis"), 1, {0}, 0, NULL},
    {"concatenate", sig_concatenate, NULL, KW("arrays", "axis"), 1, {0}, 0, NULL},
    {"concat", sig_concatenate, NULL, KW("arrays", "axis"), 1, {0}, 0, NULL},
    {"stack", sig_concatenate, F(nv_stack), KW("arrays", "axis"), 1, {0}, 0, NULL},
    {"repeat", sig_repeat, NULL, KW("array", "repeats", "axis"), 2, {0}, 0, NULL},
    {"pad", sig_pad, NULL, KW("a", "pad_width", "mode", "constant_values"), 2, {0}, 0, NULL},
    {"roll", sig_roll, NULL, KW("a", "shift", "axis"), 2, {0}, 0, NULL},
    {"diff", sig_diff, NULL, KW("a", "n", "axis"), 1, {0}, 0, NULL},
    {"broadcast_arrays", sig_broadcast_arrays, NULL, KW(NULL), 0, {0}, VARARGS, NULL},
    {"atleast_1d", sig_atleast, F(nv_atleast_1d), KW(NULL), 0, {0}, VARARGS, NULL},
    {"atleast_2d", sig_atleast, F(nv_atleast_2d), KW(NULL), 0, {0}, VARARGS, NULL},
    {"atleast_3d", sig_atleast, F(nv_atleast_3d), KW(NULL), 0, {0}, VARARGS, NULL},
    {"meshgrid", sig_meshgrid, NULL, KW("sparse", "indexing"), 0, {0}, VARARGS, NULL},
    {"depends", sig_depends, NULL, KW("inputs", "dependencies"), 2, {0}, 0, NULL},
    /* Indexing. */
    {"take", sig_take, NULL, KW("a", "indices", "axis"), 2, {0}, 0, NULL},
    {"take_along_axis", sig_along_axis, F(nv_take_along_axis), KW("a", "indices", "axis"), 2, {0}, 0, NULL},
    {"put_along_axis", sig_along_axis, F(nv_put_along_axis), KW("a", "indices", "values", "axis"), 3, {0}, 0, NULL},
    {"slice", sig_slice_dyn, NULL, KW("a", "start_indices", "axes", "slice_size"), 4, {0}, 0, NULL},
    {"slice_update", sig_slice_update_dyn, NULL, KW("a", "update", "start_indices", "axes"), 4, {0}, 0, NULL},
    {"diagonal", sig_a_3int, F(nv_diagonal), KW("a", "offset", "axis1", "axis2"), 1, {0, 0, 1}, METHOD, NULL},
    {"diag", sig_a_int, F(nv_diag), KW("a", "k"), 1, {0}, METHOD, NULL},
    /* Products. */
    {"addmm", sig_addmm, NULL, KW("c", "a", "b", "alpha", "beta"), 3, {0}, 0, NULL},
    {"tensordot", sig_tensordot, NULL, KW("a", "b", "axes"), 2, {0}, 0, NULL},
    {"vecdot", sig_vecdot, NULL, KW("a", "b", "axis"), 2, {0}, 0, NULL},
    /* Reductions. */
    {"sum", sig_reduce, F(nv_sum), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"all", sig_reduce, F(nv_all), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"any", sig_reduce, F(nv_any), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"prod", sig_reduce, F(nv_prod), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"max", sig_reduce, F(nv_max), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"min", sig_reduce, F(nv_min), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"mean", sig_reduce, F(nv_mean), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"median", sig_reduce, F(nv_median), KW("a", "axis", "keepdims"), 1, {0}, 0, NULL},
    {"logsumexp", sig_reduce, F(nv_logsumexp), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"count_nonzero", sig_reduce, F(nv_count_nonzero), KW("a", "axis", "keepdims"), 1, {0}, 0, NULL},
    {"var", sig_reduce_ddof, F(nv_var), KW("a", "axis", "keepdims", "ddof"), 1, {0}, METHOD, NULL},
    {"std", sig_reduce_ddof, F(nv_std), KW("a", "axis", "keepdims", "ddof"), 1, {0}, METHOD, NULL},
    {"argmax", sig_arg_reduce, F(nv_argmax), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"argmin", sig_arg_reduce, F(nv_argmin), KW("a", "axis", "keepdims"), 1, {0}, METHOD, NULL},
    {"cumsum", sig_scan, F(nv_cumsum), KW("a", "axis", "reverse", "inclusive", "dtype"), 1, {0}, METHOD, NULL},
    {"cumprod", sig_scan, F(nv_cumprod), KW("a", "axis", "reverse", "inclusive", "dtype"), 1, {0}, METHOD, NULL},
    {"cummax", sig_scan, F(nv_cummax), KW("a", "axis", "reverse", "inclusive"), 1, {0}, METHOD, NULL},
    {"cummin", sig_scan, F(nv_cummin), KW("a", "axis", "reverse", "inclusive"), 1, {0}, METHOD, NULL},
    {"logcumsumexp", sig_scan, F(nv_logcumsumexp), KW("a", "axis", "reverse", "inclusive"), 1, {0}, METHOD, NULL},
    {"sort", sig_sort, F(nv_sort), KW("a", "axis"), 1, {-1}, 0, NULL},
    {"argsort", sig_sort, F(nv_argsort), KW("a", "axis"), 1, {-1}, 0, NULL},
    {"partition", sig_k_axis, F(nv_partition), KW("a", "kth", "axis"), 2, {-1}, 0, NULL},
    {"argpartition", sig_k_axis, F(nv_argpartition), KW("a", "kth", "axis"), 2, {-1}, 0, NULL},
    {"topk", sig_k_axis, F(nv_topk), KW("a", "k", "axis"), 2, {-1}, 0, NULL},
    {"softmax", sig_softmax, NULL, KW("a", "axis", "precise"), 1, {0}, 0, NULL},
    {"trace", sig_trace, NULL, KW("a", "offset", "axis1", "axis2", "dtype"), 1, {0}, 0, NULL},
    {"searchsorted", sig_searchsorted, NULL, KW("sorted_sequence", "values", "side"), 2, {0}, 0, NULL},
    {"minmax", sig_minmax, NULL, KW("a", "axis", "keepdims"), 1, {0}, 0, NULL},
    {"matrix_transpose", sig_matrix_transpose, NULL, KW("a"), 1, {0}, 0, NULL},
    {"broadcast_shapes", sig_broadcast_shapes, NULL, KW(NULL), 0, {0}, VARARGS, NULL},
    {"asarray", sig_asarray, NULL, KW("a", "dtype", "copy"), 1, {0}, 0, NULL},
};

/* mlx.core's other names for ops: the same function objects, as in mlx.core. */
static const char *const aliases[][2] = {
    {"acos", "arccos"},   {"acosh", "arccosh"}, {"asin", "arcsin"},
    {"asinh", "arcsinh"}, {"atan", "arctan"},   {"atanh", "arctanh"},
    {"atan2", "arctan2"}, {"pow", "power"},     {"bitwise_left_shift", "left_shift"},
    {"bitwise_right_shift", "right_shift"},     {"cumulative_sum", "cumsum"},
    {"cumulative_prod", "cumprod"},             {"empty", "zeros"},
    {"empty_like", "zeros_like"}};

/* ---- The callable op object ---- */

typedef struct {
  PyObject_HEAD const nvpy_op *op;
  const char *prefix;
} op_object;

static int parse(const nvpy_op *op, PyObject *args, PyObject *kw, call *c, PyObject **stream) {
  Py_ssize_t npos = PyTuple_GET_SIZE(args);
  int nkw = 0;
  while (nkw < MAXARGS && op->kw[nkw]) nkw++;
  if (op->flags & VARARGS) {
    c->rest = args;
    npos = 0;
  } else if (npos > nkw) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                 op->name, nkw, npos);
    return -1;
  }
  for (Py_ssize_t i = 0; i < npos; i++) c->argv[i] = PyTuple_GET_ITEM(args, i);
  c->npos = (int)npos;
  if (kw) {
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &key, &val)) {
      const char *k = PyUnicode_AsUTF8(key);
      if (!k) return -1;
      if (!strcmp(k, "stream")) {
        *stream = val;
        continue;
      }
      int i = 0;
      while (i < nkw && strcmp(op->kw[i], k)) i++;
      if (i == nkw) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", op->name, k);
        return -1;
      }
      if (c->argv[i]) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", op->name, k);
        return -1;
      }
      c->argv[i] = val;
    }
  }
  for (int i = 0; i < op->nreq; i++)
    if (!c->argv[i]) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", op->name, op->kw[i]);
      return -1;
    }
  return 0;
}

static PyObject *op_call(PyObject *self, PyObject *args, PyObject *kw) {
  const nvpy_op *op = ((op_object *)self)->op;
  call c = {.op = op, .prefix = ((op_object *)self)->prefix};
  PyObject *stream = NULL;
  if (parse(op, args, kw, &c, &stream) < 0) return NULL;
  char label[NVPY_LABEL], stream_label[NVPY_LABEL + 16];
  snprintf(label, sizeof label, "%s%s", c.prefix, op->name);
  snprintf(stream_label, sizeof stream_label, "%s: stream", label);
  int entered = nvpy_stream_enter(stream, stream_label);
  if (entered < 0) return NULL;
  PyObject *r = op->sig(&c);
  if (entered) nv_stream_exit();
  for (int i = 0; i < c.nheld; i++) nv_release(c.held[i]);
  /* Every failure names the op (and, from the helpers, the argument). */
  if (!r) nvpy_error_prefix(label);
  return r;
}

/* Bound to an array, an op is its method: x.sum(axis=0) is sum(x, axis=0). */
static PyObject *op_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

static PyObject *op_repr(PyObject *self) {
  return PyUnicode_FromFormat("<nuvec function %s>", ((op_object *)self)->op->name);
}

static PyObject *op_name(PyObject *self, void *c) {
  (void)c;
  return PyUnicode_FromString(((op_object *)self)->op->name);
}

static PyObject *op_doc(PyObject *self, void *c) {
  (void)c;
  const nvpy_op *op = ((op_object *)self)->op;
  PyObject *args = PyUnicode_FromString("");
  for (int i = 0; args && i < MAXARGS && op->kw[i]; i++) {
    PyObject *s = PyUnicode_FromFormat("%U%s%s%s", args, i ? ", " : "", op->kw[i],
                                       i >= op->nreq ? "=..." : "");
    Py_SETREF(args, s);
  }
  if (!args) return NULL;
  PyObject *r = op->doc ? PyUnicode_FromFormat("%s(%s%U, *, stream=None): %s", op->name,
                                                op->flags & VARARGS ? "*arrays, " : "", args,
                                                op->doc)
                        : PyUnicode_FromFormat("%s(%s%U, *, stream=None): mlx.core.%s, in nuvec.",
                                               op->name, op->flags & VARARGS ? "*arrays, " : "",
                                               args, op->name);
  Py_DECREF(args);
  return r;
}

static PyGetSetDef op_getset[] = {{"__name__", op_name, NULL, NULL, NULL},
                                  {"__doc__", op_doc, NULL, NULL, NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nvpy_op_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.function",
    .tp_basicsize = sizeof(op_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_call = op_call,
    .tp_descr_get = op_descr_get,
    .tp_repr = op_repr,
    .tp_getset = op_getset,
};

int nvpy_add_ops(PyObject *m, const nvpy_op *table, size_t n, const char *prefix) {
  if (PyType_Ready(&nvpy_op_type) < 0) return -1;
  for (size_t i = 0; i < n; i++) {
    op_object *o = PyObject_New(op_object, &nvpy_op_type);
    if (!o) return -1;
    o->op = &table[i];
    o->prefix = prefix;
    if (PyModule_AddObject(m, table[i].name, (PyObject *)o) < 0) {
      Py_DECREF(o);
      return -1;
    }
    if ((table[i].flags & METHOD) &&
        PyDict_SetItemString(nvpy_array_type.tp_dict, table[i].name, (PyObject *)o) < 0)
      return -1;
  }
  PyType_Modified(&nvpy_array_type);
  return 0;
}

int nvpy_init_ops(PyObject *m) {
  if (nvpy_add_ops(m, ops, sizeof ops / sizeof ops[0], "") < 0) return -1;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    PyObject *f = PyObject_GetAttrString(m, aliases[i][1]);
    if (!f || PyModule_AddObject(m, aliases[i][0], f) < 0) {
      Py_XDECREF(f);
      return -1;
    }
  }
  return 0;
}
