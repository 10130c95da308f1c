/* nuvec's CPython extension: Python values to arrays (scalars, nested sequences, the buffer
 * protocol, DLPack, __array__) and arrays back to Python values, with mlx.core's rules:
 * ints give int32 (int64 when a value needs it), floats float32, bools bool, complex
 * complex64; mixed kinds promote; float64 buffers give float32 unless a dtype is asked for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvpy.h"

PyObject *nvpy_dlpack_to_array(PyObject *o); /* dlpack.c */

/* ---- Nested sequences ---- */

enum { KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_COMPLEX };

typedef struct {
  int ndim;   /* depth of the scalars, -1 until the first is seen */
  int depth_set;
  int shape[NVPY_MAXDIM];
  int kind;
  bool big;   /* an int outside int32 */
  bool nested_arrays; /* arrays or buffers inside the sequence: stacked instead */
} scan_state;

static int non_uniform(void) {
  PyErr_SetString(PyExc_ValueError, "Initialization encountered non-uniform length.");
  return -1;
}

static int invalid_type(PyObject *o) {
  PyErr_Format(PyExc_ValueError, "Invalid type %s received in array initialization.",
               Py_TYPE(o)->tp_name);
  return -1;
}

static bool is_seq(PyObject *o) { return PyList_Check(o) || PyTuple_Check(o); }

/* Records a leaf at `depth`: every scalar must sit at the same depth. */
static int leaf_at(scan_state *s, int depth) {
  if (s->ndim < 0) s->ndim = depth;
  else if (s->ndim != depth) return non_uniform();
  return 0;
}

static int scan(PyObject *o, int depth, scan_state *s) {
  if (is_seq(o)) {
    if (depth >= NVPY_MAXDIM) {
      PyErr_SetString(PyExc_ValueError, "array: too many dimensions");
      return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n > INT32_MAX) {
      PyErr_SetString(PyExc_ValueError, "array: a dimension is larger than 2^31 - 1");
      return -1;
    }
    if (s->depth_set > depth) {
      if (s->shape[depth] != (int)n) return non_uniform();
    } else {
      s->shape[depth] = (int)n;
      s->depth_set = depth + 1;
    }
    if (n == 0) return leaf_at(s, depth + 1);
    /* An item's __array__ (below) may change the lists: each item is read again and held. */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); i++) {
      PyObject *item = PySequence_Fast_GET_ITEM(o, i);
      Py_INCREF(item);
      int rc = scan(item, depth + 1, s);
      Py_DECREF(item);
      if (rc < 0) return -1;
    }
    return 0;
  }
  /* Scalars first: they run no Python code, so a scan that found only scalars saw the lists
   * as fill() will. Arrays, buffers and objects with __array__ are stacked instead. */
  bool scalar = PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o);
  if (!scalar && (NVPY_IS_ARRAY(o) || PyObject_CheckBuffer(o) || PyObject_HasAttrString(o, "__array__"))) {
    s->nested_arrays = true;
    return 0;
  }
  if (leaf_at(s, depth) < 0) return -1;
  if (PyBool_Check(o)) return 0;
  if (PyLong_Check(o)) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
      PyErr_SetString(PyExc_OverflowError, "array: an int does not fit in 64 bits");
      return -1;
    }
    if (v < INT32_MIN || v > INT32_MAX) s->big = true;
    if (s->kind < KIND_INT) s->kind = KIND_INT;
    return 0;
  }
  if (PyFloat_Check(o)) {
    if (s->kind < KIND_FLOAT) s->kind = KIND_FLOAT;
    return 0;
  }
  if (PyComplex_Check(o)) {
    s->kind = KIND_COMPLEX;
    return 0;
  }
  return invalid_type(o);
}

/* Writes the leaves in row-major order into `dst` as the kind's C type. */
static void fill(PyObject *o, int kind, char **dst) {
  if (is_seq(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject **items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; i++) fill(items[i], kind, dst);
    return;
  }
  switch (kind) {
  case KIND_BOOL:
    *(bool *)*dst = o == Py_True;
    *dst += sizeof(bool);
    break;
  case KIND_INT:
    *(int64_t *)*dst = PyLong_AsLongLong(o);
    *dst += sizeof(int64_t);
    break;
  case KIND_FLOAT:
    *(double *)*dst = PyFloat_Check(o) ? PyFloat_AS_DOUBLE(o) : (double)PyLong_AsLongLong(o);
    *dst += sizeof(double);
    break;
  default: {
    /* Not PyComplex_AsCComplex for the real leaves: it would call their __complex__. */
    nv_complex64 *z = (nv_complex64 *)*dst;
    z->re = (float)(PyComplex_Check(o) ? PyComplex_RealAsDouble(o)
                    : PyFloat_Check(o) ? PyFloat_AS_DOUBLE(o)
                                       : (double)PyLong_AsLongLong(o));
    z->im = PyComplex_Check(o) ? (float)PyComplex_ImagAsDouble(o) : 0.0f;
    *dst += sizeof(nv_complex64);
  }
  }
}

/* Converts `x` (taken over) to `dtype` unless it is -1 or already that dtype. */
static nv_array *cast_to(nv_array *x, int dtype) {
  if (!x || dtype < 0 || nv_array_dtype(x) == (nv_dtype)dtype) return x;
  nv_array *y = nv_astype(x, (nv_dtype)dtype);
  nv_release(x);
  return y;
}

/* `x`'s shape as "(2, 3)" in `buf` (cut short, not overflowed, past `cap`). */
static const char *shape_text(const nv_array *x, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "(");
  int nd = nv_array_ndim(x);
  for (int d = 0; d < nd && k < cap; d++)
    k += (size_t)snprintf(buf + k, cap - k, nd == 1 ? "%d," : d ? ", %d" : "%d", nv_array_shape(x)[d]);
  if (k < cap) snprintf(buf + k, cap - k, ")");
  return buf;
}

/* Arrays given inside a list are stacked, as MLX's array([array, array]). The items are read
 * from a snapshot: converting one may run its __array__, which could change the list. */
static nv_array *stack_items(PyObject *o, int dtype) {
  PyObject *t = PySequence_Tuple(o);
  if (!t) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  nv_array **xs = PyMem_Calloc(n ? n : 1, sizeof *xs);
  if (!xs) {
    Py_DECREF(t);
    return (nv_array *)PyErr_NoMemory();
  }
  nv_array *r = NULL;
  Py_ssize_t i;
  for (i = 0; i < n; i++) {
    xs[i] = nvpy_to_array(PyTuple_GET_ITEM(t, i), -1);
    if (!xs[i]) goto done;
    /* Items of unequal shapes are MLX's non-uniform-length error, not a stack error. */
    if (i > 0 && (nv_array_ndim(xs[i]) != nv_array_ndim(xs[0]) ||
                  memcmp(nv_array_shape(xs[i]), nv_array_shape(xs[0]),
                         (size_t)nv_array_ndim(xs[0]) * sizeof(int)) != 0)) {
      char si[256], s0[256];
      PyErr_Format(PyExc_ValueError,
                   "Initialization encountered non-uniform length. (item %zd has shape %s, "
                   "item 0 %s)", i, shape_text(xs[i], si, sizeof si), shape_text(xs[0], s0, sizeof s0));
      goto done;
    }
  }
  r = nv_stack((const nv_array *const *)xs, (int)n, 0);
  if (!r) PyErr_NoMemory();
  else if (nv_array_status(r) != NV_OK) {
    nvpy_raise_status(nv_array_status(r), nv_array_error(r));
    nv_release(r);
    r = NULL;
  }
done:
  for (Py_ssize_t j = 0; j < n; j++) nv_release(xs[j]);
  PyMem_Free(xs);
  Py_DECREF(t);
  return cast_to(r, dtype);
}

static nv_array *from_sequence(PyObject *o, int dtype) {
  scan_state s = {.ndim = -1, .kind = KIND_BOOL};
  if (scan(o, 0, &s) < 0) return NULL;
  if (s.nested_arrays) return stack_items(o, dtype);
  if (s.ndim < 0) s.ndim = s.depth_set;
  int64_t size = 1;
  for (int i = 0; i < s.ndim; i++) size *= s.shape[i];
  /* An empty list has no kind: MLX makes it float32. */
  if (size == 0 && s.kind == KIND_BOOL) s.kind = KIND_FLOAT;
  static const size_t width[] = {sizeof(bool), sizeof(int64_t), sizeof(double),
                                 sizeof(nv_complex64)};
  static const nv_dtype wide[] = {NV_DTYPE_BOOL, NV_DTYPE_INT64, NV_DTYPE_FLOAT64,
                                  NV_DTYPE_COMPLEX64};
  char *buf = PyMem_Malloc(size ? (size_t)size * width[s.kind] : 1);
  if (!buf) return (nv_array *)PyErr_NoMemory();
  char *p = buf;
  fill(o, s.kind, &p);
  nv_array *x = nv_array_from_data(buf, s.shape, s.ndim, wide[s.kind]);
  PyMem_Free(buf);
  if (dtype < 0) {
    if (s.kind == KIND_INT && !s.big) dtype = NV_DTYPE_INT32;
    else if (s.kind == KIND_FLOAT) dtype = NV_DTYPE_FLOAT32;
  }
  /* The conversion runs now: an array made from Python values holds its data, as MLX's does
   * (get_array_buffer_size takes it as evaluated). */
  nv_array *y = cast_to(x, dtype);
  if (y && y != x) (void)nv_eval1(y); /* a failure stays in the array, as for a lazy one */
  return y;
}

/* ---- Buffers ---- */

static int format_dtype(const char *f, Py_ssize_t itemsize, bool *swap) {
  *swap = false;
  if (*f == '<' || *f == '@' || *f == '=') f++;
  else if (*f == '>' || *f == '!') {
    *swap = itemsize > 1;
    f++;
  }
  if (f[0] && f[1] && f[0] != 'Z') return -1;
  switch (f[0]) {
  case '?': return NV_DTYPE_BOOL;
  case 'b': return NV_DTYPE_INT8;
  case 'B': case 'c': return NV_DTYPE_UINT8;
  case 'h': return NV_DTYPE_INT16;
  case 'H': return NV_DTYPE_UINT16;
  case 'i': case 'l': case 'q':
    return itemsize == 4 ? NV_DTYPE_INT32 : itemsize == 8 ? NV_DTYPE_INT64 : -1;
  case 'I': case 'L': case 'Q':
    return itemsize == 4 ? NV_DTYPE_UINT32 : itemsize == 8 ? NV_DTYPE_UINT64 : -1;
  case 'e': return NV_DTYPE_FLOAT16;
  case 'f': return NV_DTYPE_FLOAT32;
  case 'd': return NV_DTYPE_FLOAT64;
  case 'Z':
    if (f[1] == 'f' && !f[2]) return NV_DTYPE_COMPLEX64;
    if (f[1] == 'd' && !f[2]) return NV_DTYPE_COUNT; /* complex128: narrowed to complex64 */
    return -1;
  default: return -1;
  }
}

static void byteswap(char *p, size_t n, size_t w) {
  for (size_t i = 0; i < n; i++, p += w)
    for (size_t a = 0, b = w - 1; a < b; a++, b--) {
      char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* A copy of a buffer's data; `as_dtype` overrides its format (bfloat16 through uint16). */
static nv_array *from_buffer(PyObject *o, int dtype, int as_dtype) {
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) < 0) return NULL;
  nv_array *x = NULL;
  bool swap = false;
  const char *format = view.format ? view.format : "B";
  int dt = as_dtype >= 0 ? as_dtype : format_dtype(format, view.itemsize, &swap);
  int shape[NVPY_MAXDIM];
  if (dt < 0) {
    PyErr_Format(PyExc_ValueError, "array: unsupported buffer format '%s'", format);
    goto done;
  }
  if (view.ndim > NVPY_MAXDIM) {
    PyErr_SetString(PyExc_ValueError, "array: too many dimensions");
    goto done;
  }
  /* The data read is the shape's elements of the dtype's size: the buffer must hold them. */
  size_t want = dt == NV_DTYPE_COUNT ? 16 : nv_dtype_size((nv_dtype)dt);
  if ((size_t)view.itemsize != want) {
    PyErr_Format(PyExc_ValueError, "array: buffer format '%s' with item size %zd", format, view.itemsize);
    goto done;
  }
  for (int i = 0; i < view.ndim; i++) {
    if (view.shape[i] > INT32_MAX || view.shape[i] < 0) {
      PyErr_SetString(PyExc_ValueError, "array: a dimension is larger than 2^31 - 1");
      goto done;
    }
    shape[i] = (int)view.shape[i];
    want *= (size_t)shape[i];
  }
  if (want != (size_t)view.len) {
    PyErr_SetString(PyExc_ValueError, "array: the buffer's length does not match its shape");
    goto done;
  }
  char *buf = PyMem_Malloc(view.len ? (size_t)view.len : 1);
  if (!buf) {
    PyErr_NoMemory();
    goto done;
  }
  if (PyBuffer_ToContiguous(buf, &view, view.len, 'C') < 0) {
    PyMem_Free(buf);
    goto done;
  }
  size_t n = view.itemsize ? (size_t)(view.len / view.itemsize) : 0;
  if (swap) byteswap(buf, n, (size_t)view.itemsize);
  if (dt == NV_DTYPE_COUNT) {
    /* complex128 has no nuvec dtype: narrow each part to float32 (as MLX does). */
    const double *src = (const double *)buf;
    float *dst = (float *)buf;
    for (size_t i = 0; i < 2 * n; i++) dst[i] = (float)src[i];
    dt = NV_DTYPE_COMPLEX64;
  }
  x = nv_array_from_data(buf, shape, view.ndim, (nv_dtype)dt);
  PyMem_Free(buf);
  if (dtype < 0 && dt == NV_DTYPE_FLOAT64) dtype = NV_DTYPE_FLOAT32;
  x = cast_to(x, dtype);
done:
  PyBuffer_Release(&view);
  return x;
}

/* NumPy arrays of ml_dtypes' bfloat16 cannot export a buffer: read them as uint16 bits. */
static nv_array *from_bfloat16_numpy(PyObject *o, int dtype) {
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np) return NULL;
  PyObject *u16 = PyObject_GetAttrString(np, "uint16");
  Py_DECREF(np);
  if (!u16) return NULL;
  PyObject *v = PyObject_CallMethod(o, "view", "O", u16);
  Py_DECREF(u16);
  if (!v) return NULL;
  nv_array *x = from_buffer(v, dtype < 0 ? NV_DTYPE_BFLOAT16 : dtype, NV_DTYPE_BFLOAT16);
  Py_DECREF(v);
  return x;
}

static bool is_bfloat16_numpy(PyObject *o) {
  if (NVPY_IS_ARRAY(o) || !PyObject_HasAttrString(o, "dtype") || !PyObject_HasAttrString(o, "view"))
    return false;
  PyObject *d = PyObject_GetAttrString(o, "dtype");
  if (!d) {
    PyErr_Clear();
    return false;
  }
  PyObject *s = PyObject_Str(d);
  Py_DECREF(d);
  bool yes = s && PyUnicode_Check(s) && PyUnicode_CompareWithASCIIString(s, "bfloat16") == 0;
  Py_XDECREF(s);
  PyErr_Clear();
  return yes;
}

/* ---- Entry points ---- */

static nv_array *from_scalar(PyObject *o) {
  if (PyBool_Check(o)) return nv_array_bool(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0) {
      /* Above INT64_MAX: uint64 when it fits there. */
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
      return nv_array_uint64(u);
    }
    if (overflow) {
      PyErr_SetString(PyExc_OverflowError, "array: an int does not fit in 64 bits");
      return NULL;
    }
    return v >= INT32_MIN && v <= INT32_MAX ? nv_array_int((int32_t)v) : nv_array_int64(v);
  }
  if (PyFloat_Check(o)) return nv_array_float((float)PyFloat_AS_DOUBLE(o));
  Py_complex c = PyComplex_AsCComplex(o);
  return nv_array_complex((float)c.real, (float)c.imag);
}

static nv_array *convert(PyObject *o, int dtype) {
  nv_array *x;
  if (PyFloat_Check(o) && dtype == NV_DTYPE_FLOAT64) {
    /* Not through float32: array(0.1, dtype=float64) holds the Python float exactly. */
    x = nv_array_scalar(PyFloat_AS_DOUBLE(o), NV_DTYPE_FLOAT64);
  } else if (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o)) {
    x = from_scalar(o);
    if (!x) return NULL;
  } else if (is_seq(o)) {
    PyObject *f = PySequence_Fast(o, "");
    if (!f) return NULL;
    x = from_sequence(f, dtype);
    Py_DECREF(f);
    return x;
  } else if (is_bfloat16_numpy(o)) {
    return from_bfloat16_numpy(o, dtype);
  } else if (PyObject_CheckBuffer(o)) {
    return from_buffer(o, dtype, -1);
  } else if (PyObject_HasAttrString(o, "__dlpack__")) {
    PyObject *a = nvpy_dlpack_to_array(o);
    if (!a) return NULL;
    x = nv_retain(NVPY_A(a));
    Py_DECREF(a);
  } else if (PyObject_HasAttrString(o, "__array__")) {
    PyObject *a = PyObject_CallMethod(o, "__array__", NULL);
    if (!a) return NULL;
    x = nvpy_to_array(a, dtype);
    Py_DECREF(a);
    return x;
  } else {
    invalid_type(o);
    return NULL;
  }
  return cast_to(x, dtype);
}

nv_array *nvpy_to_array(PyObject *o, int dtype) {
  if (NVPY_IS_ARRAY(o) && (dtype < 0 || nv_array_dtype(NVPY_A(o)) == (nv_dtype)dtype))
    return nv_retain(NVPY_A(o));
  /* Lists holding arrays and __array__ results convert recursively: an object whose
   * __array__ returns itself ends in RecursionError, not in a C stack overflow. */
  if (Py_EnterRecursiveCall(" while converting to a nuvec array")) return NULL;
  nv_array *x = NVPY_IS_ARRAY(o) ? cast_to(nv_retain(NVPY_A(o)), dtype) : convert(o, dtype);
  Py_LeaveRecursiveCall();
  if (!x) return PyErr_Occurred() ? NULL : (nv_array *)PyErr_NoMemory();
  nv_status st = nv_array_status(x);
  if (st != NV_OK) {
    nvpy_raise_status(st, nv_array_error(x));
    nv_release(x);
    return NULL;
  }
  return x;
}

/* Whether a Python int fits in `dt` (an integer dtype). */
static bool int_fits(long long v, bool overflow, nv_dtype dt) {
  if (overflow) return false;
  switch (dt) {
  case NV_DTYPE_INT8: return v >= INT8_MIN && v <= INT8_MAX;
  case NV_DTYPE_INT16: return v >= INT16_MIN && v <= INT16_MAX;
  case NV_DTYPE_INT32: return v >= INT32_MIN && v <= INT32_MAX;
  case NV_DTYPE_UINT8: return v >= 0 && v <= UINT8_MAX;
  case NV_DTYPE_UINT16: return v >= 0 && v <= UINT16_MAX;
  case NV_DTYPE_UINT32: return v >= 0 && v <= UINT32_MAX;
  case NV_DTYPE_UINT64: return v >= 0;
  default: return true;
  }
}

nv_array *nvpy_operand(PyObject *o, PyObject *other) {
  nv_dtype odt = NV_DTYPE_COUNT;
  if (other && NVPY_IS_ARRAY(other)) odt = nv_array_dtype(NVPY_A(other));
  if (PyBool_Check(o)) {
    /* MLX's Python bool is a weak bool: with an integer or float array it takes that dtype. */
    if (odt == NV_DTYPE_COUNT || odt == NV_DTYPE_BOOL) return nv_array_bool(o == Py_True);
    return nv_weak_int(o == Py_True);
  }
  if (PyLong_Check(o)) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    bool integral = odt != NV_DTYPE_COUNT && nv_issubdtype(odt, NV_CATEGORY_INTEGER);
    if (overflow || (integral && !int_fits(v, overflow, odt))) {
      PyObject *r = PyObject_Repr(o);
      PyErr_Format(overflow ? PyExc_OverflowError : PyExc_ValueError,
                   "Converting %U to %s would result in overflow.", r,
                   odt == NV_DTYPE_COUNT ? "int64" : nv_dtype_name(odt));
      Py_XDECREF(r);
      return NULL;
    }
    return nv_weak_int(v);
  }
  if (PyFloat_Check(o)) return nv_weak_scalar(PyFloat_AS_DOUBLE(o));
  return nvpy_to_array(o, -1);
}

int nvpy_operands(PyObject *a, PyObject *b, nv_array **xa, nv_array **xb) {
  *xa = nvpy_operand(a, b);
  if (!*xa) return -1;
  *xb = nvpy_operand(b, a);
  if (!*xb) {
    nv_release(*xa);
    return -1;
  }
  return 0;
}

int nvpy_eval(nv_array *const *xs, size_t n) {
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = nv_eval(xs, n);
  Py_END_ALLOW_THREADS if (st == NV_OK) return 0;
  nvpy_raise_last(st);
  return -1;
}

/* ---- Shapes, axes, lists ---- */

static int int_from(PyObject *o, int *out, const char *what) {
  if (!PyLong_Check(o) && !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: expected an int, got %s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  /* __index__ may raise: its exception is kept, with `what` in front of the message. */
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    nvpy_error_prefix(what);
    return -1;
  }
  int overflow;
  long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  if (overflow || v < INT32_MIN || v > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: %R is out of the range of int32", what, i);
    Py_DECREF(i);
    return -1;
  }
  Py_DECREF(i);
  *out = (int)v;
  return 0;
}

int nvpy_int64_arg(PyObject *o, int64_t *out, const char *what) {
  if (!PyLong_Check(o) && !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: expected an int, got %s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    nvpy_error_prefix(what);
    return -1;
  }
  int overflow;
  long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  if (overflow) PyErr_Format(PyExc_ValueError, "%s: %R is out of the range of int64", what, i);
  Py_DECREF(i);
  if (overflow) return -1;
  *out = v;
  return 0;
}

int nvpy_int_arg(PyObject *o, int none_value, int *out, const char *what) {
  if (o == NULL || o == Py_None) {
    *out = none_value;
    return 0;
  }
  return int_from(o, out, what);
}

static PyObject *too_many(const char *what, Py_ssize_t max) {
  return PyErr_Format(PyExc_ValueError, "%s: more than %zd values", what, max);
}

PyObject *nvpy_items(PyObject *o, Py_ssize_t max, const char *what, const char *expected) {
  if (!PySequence_Check(o) && !Py_TYPE(o)->tp_iter) {
    PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", what, expected, Py_TYPE(o)->tp_name);
    return NULL;
  }
  if (max < 0 || PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    PyObject *t = PySequence_Tuple(o);
    if (!t) return nvpy_error_prefix(what);
    if (max >= 0 && PyTuple_GET_SIZE(t) > max) {
      Py_DECREF(t);
      return too_many(what, max);
    }
    return t;
  }
  PyObject *it = PyObject_GetIter(o), *l = it ? PyList_New(0) : NULL, *x;
  while (l && (x = PyIter_Next(it))) {
    if (PyList_GET_SIZE(l) == max) too_many(what, max);
    else PyList_Append(l, x);
    Py_DECREF(x);
    if (PyErr_Occurred()) Py_CLEAR(l);
  }
  Py_XDECREF(it);
  if (l && PyErr_Occurred()) Py_CLEAR(l);
  if (!l) return nvpy_error_prefix(what);
  Py_SETREF(l, PyList_AsTuple(l));
  return l;
}

static int int_list(PyObject *o, int *out, const char *what) {
  if (PyLong_Check(o) || PyIndex_Check(o)) {
    return int_from(o, out, what) < 0 ? -1 : 1;
  }
  PyObject *f = nvpy_items(o, NVPY_MAXDIM, what, "an int or a sequence of ints");
  if (!f) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(f);
  for (Py_ssize_t i = 0; i < n; i++)
    if (int_from(PyTuple_GET_ITEM(f, i), &out[i], what) < 0) {
      Py_DECREF(f);
      return -1;
    }
  Py_DECREF(f);
  return (int)n;
}

int nvpy_shape_arg(PyObject *o, int *shape, const char *what) { return int_list(o, shape, what); }

int nvpy_axes_arg(PyObject *o, int *axes, const char *what) {
  if (o == NULL || o == Py_None) return -2;
  return int_list(o, axes, what);
}

nv_vec *nvpy_vec_arg(PyObject *seq, const char *what) {
  if (NVPY_IS_ARRAY(seq)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a list of arrays, got an array", what);
    return NULL;
  }
  PyObject *f = nvpy_items(seq, -1, what, "a list of arrays");
  if (!f) return NULL;
  nv_vec *v = nv_vec_new();
  if (!v) {
    Py_DECREF(f);
    return (nv_vec *)PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f); i++) {
    nv_array *x = nvpy_to_array(PyTuple_GET_ITEM(f, i), -1);
    if (!x || nv_vec_push(v, x) != NV_OK) {
      if (x) PyErr_NoMemory();
      else nvpy_error_prefix(what);
      nv_release(x);
      nv_vec_free(v);
      Py_DECREF(f);
      return NULL;
    }
    nv_release(x);
  }
  Py_DECREF(f);
  return v;
}

PyObject *nvpy_tuple_from_vec(const nv_vec *v) {
  size_t n = nv_vec_size(v);
  PyObject *t = PyTuple_New((Py_ssize_t)n);
  for (size_t i = 0; t && i < n; i++) {
    PyObject *a = nvpy_wrap(nv_retain(nv_vec_get(v, i)));
    if (!a) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, (Py_ssize_t)i, a);
  }
  return t;
}

PyObject *nvpy_list_from_vec(const nv_vec *v) {
  PyObject *t = nvpy_tuple_from_vec(v);
  if (!t) return NULL;
  PyObject *l = PySequence_List(t);
  Py_DECREF(t);
  return l;
}

/* ---- Back to Python ---- */

/* One element at `p` of dtype `dt` (float16/bfloat16 already widened to float32). */
static PyObject *scalar_at(const char *p, nv_dtype dt) {
  switch (dt) {
  case NV_DTYPE_BOOL: return PyBool_FromLong(*(const bool *)p);
  case NV_DTYPE_UINT8: return PyLong_FromLong(*(const uint8_t *)p);
  case NV_DTYPE_UINT16: return PyLong_FromLong(*(const uint16_t *)p);
  case NV_DTYPE_UINT32: return PyLong_FromUnsignedLong(*(const uint32_t *)p);
  case NV_DTYPE_UINT64: return PyLong_FromUnsignedLongLong(*(const uint64_t *)p);
  case NV_DTYPE_INT8: return PyLong_FromLong(*(const int8_t *)p);
  case NV_DTYPE_INT16: return PyLong_FromLong(*(const int16_t *)p);
  case NV_DTYPE_INT32: return PyLong_FromLong(*(const int32_t *)p);
  case NV_DTYPE_INT64: return PyLong_FromLongLong(*(const int64_t *)p);
  case NV_DTYPE_FLOAT32: return PyFloat_FromDouble(*(const float *)p);
  case NV_DTYPE_FLOAT64: return PyFloat_FromDouble(*(const double *)p);
  case NV_DTYPE_COMPLEX64: {
    const nv_complex64 *z = (const nv_complex64 *)p;
    return PyComplex_FromDoubles(z->re, z->im);
  }
  default: return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "unexpected dtype");
  }
}

/* The elements of `a` in row-major order in a PyMem buffer, float16/bfloat16 as float32. */
char *nvpy_host_copy(nv_array *a, nv_dtype *dt) {
  nv_array *x = nv_retain(a);
  *dt = nv_array_dtype(a);
  if (*dt == NV_DTYPE_FLOAT16 || *dt == NV_DTYPE_BFLOAT16) {
    nv_release(x);
    x = nv_astype(a, NV_DTYPE_FLOAT32);
    *dt = NV_DTYPE_FLOAT32;
  }
  size_t nb = nv_array_nbytes(x);
  char *buf = PyMem_Malloc(nb ? nb : 1);
  if (!buf) {
    nv_release(x);
    return (char *)PyErr_NoMemory();
  }
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = nv_array_read(x, buf, nb);
  Py_END_ALLOW_THREADS nv_release(x);
  if (st != NV_OK) {
    PyMem_Free(buf);
    nvpy_raise_last(st);
    return NULL;
  }
  return buf;
}

static PyObject *build_list(const char **p, const int *shape, int ndim, nv_dtype dt, size_t w) {
  if (ndim == 0) {
    PyObject *s = scalar_at(*p, dt);
    *p += w;
    return s;
  }
  PyObject *l = PyList_New(shape[0]);
  for (int i = 0; l && i < shape[0]; i++) {
    PyObject *e = build_list(p, shape + 1, ndim - 1, dt, w);
    if (!e) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, i, e);
  }
  return l;
}

PyObject *nvpy_tolist(nv_array *a) {
  nv_dtype dt;
  char *buf = nvpy_host_copy(a, &dt);
  if (!buf) return NULL;
  const char *p = buf;
  PyObject *r = build_list(&p, nv_array_shape(a), nv_array_ndim(a), dt, nv_dtype_size(dt));
  PyMem_Free(buf);
  return r;
}

PyObject *nvpy_item(nv_array *a) {
  if (nv_array_size(a) != 1)
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                             "[convert] Only length-1 arrays can be converted to Python scalars.");
  nv_dtype dt;
  char *buf = nvpy_host_copy(a, &dt);
  if (!buf) return NULL;
  PyObject *r = scalar_at(buf, dt);
  PyMem_Free(buf);
  return r;
}
