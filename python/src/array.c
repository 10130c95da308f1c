/* nuvec's CPython extension: the array type — construction, properties, conversions, the
 * number protocol with MLX's weak scalars, comparisons, iteration, the buffer protocol,
 * NumPy interop and pickling. In-place operators (`x += y`) and item assignment replace the
 * array the Python object holds, as MLX does, so every reference to the object sees it. */
#include <stdlib.h>
#include <string.h>

#include "nvpy.h"
/* The array handle's scope fields (nvpy_wrap takes arrays out of scopes). */
#include "core/internal.h"

PyObject *nvpy_dlpack(PyObject *self, PyObject *args, PyObject *kw); /* dlpack.c */
PyObject *nvpy_dlpack_device(PyObject *self, PyObject *unused);

nv_array *nvpy_unscope(nv_array *a) {
  while (a && a->scope_level > 0) nv_scope_keep(a);
  return a;
}

PyObject *nvpy_wrap_unchecked(nv_array *a) {
  if (!a) return PyErr_NoMemory();
  nvpy_unscope(a);
  nvpy_array *o = PyObject_New(nvpy_array, &nvpy_array_type);
  if (!o) {
    nv_release(a);
    return NULL;
  }
  o->a = a;
  o->weakrefs = NULL;
  return (PyObject *)o;
}

PyObject *nvpy_wrap(nv_array *a) {
  if (!a) return PyErr_NoMemory();
  /* A failed op: its error is known when it is built, and raised at the call as MLX does. */
  nv_status st = nv_array_status(a);
  if (st != NV_OK) {
    nvpy_raise_status(st, nv_array_error(a));
    nv_release(a);
    return NULL;
  }
  return nvpy_wrap_unchecked(a);
}

static PyObject *array_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  (void)t;
  static char *kwlist[] = {"val", "dtype", NULL};
  PyObject *val, *dto = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:array", kwlist, &val, &dto)) return NULL;
  int dt = nvpy_dtype_arg(dto, true, "array: dtype");
  if (dt == -2) return NULL;
  nv_array *x = nvpy_to_array(val, dt);
  if (!x) return nvpy_error_prefix("array: val");
  return nvpy_wrap(x);
}

static void array_dealloc(PyObject *self) {
  nvpy_array *o = (nvpy_array *)self;
  if (o->weakrefs) PyObject_ClearWeakRefs(self);
  nv_release(o->a);
  Py_TYPE(self)->tp_free(self);
}

/* Replaces the array the object holds by `r` (taken over), as MLX's in-place updates. */
static void replace(PyObject *self, nv_array *r) {
  nv_array *old = NVPY_A(self);
  NVPY_A(self) = nvpy_unscope(r); /* held by the object, as nvpy_wrap's: no scope releases it */
  nv_release(old);
}

/* ---- Properties ---- */

static PyObject *get_shape(PyObject *self, void *c) {
  (void)c;
  nv_array *a = NVPY_A(self);
  int nd = nv_array_ndim(a);
  const int *sh = nv_array_shape(a);
  PyObject *t = PyTuple_New(nd);
  for (int i = 0; t && i < nd; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLong(sh[i]));
  return t;
}
static PyObject *get_ndim(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(nv_array_ndim(NVPY_A(self)));
}
static PyObject *get_size(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromLongLong(nv_array_size(NVPY_A(self)));
}
static PyObject *get_dtype(PyObject *self, void *c) {
  (void)c;
  return nvpy_dtype_obj(nv_array_dtype(NVPY_A(self)));
}
static PyObject *get_itemsize(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromSize_t(nv_array_itemsize(NVPY_A(self)));
}
static PyObject *get_nbytes(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromSize_t(nv_array_nbytes(NVPY_A(self)));
}
static PyObject *get_T(PyObject *self, void *c) {
  (void)c;
  return nvpy_wrap(nv_transpose(NVPY_A(self), NULL, 0));
}
static PyObject *get_at(PyObject *self, void *c) {
  (void)c;
  return nvpy_at_new(self);
}
static PyObject *get_real(PyObject *self, void *c) {
  (void)c;
  return nvpy_wrap(nv_real(NVPY_A(self)));
}
static PyObject *get_imag(PyObject *self, void *c) {
  (void)c;
  return nvpy_wrap(nv_imag(NVPY_A(self)));
}

static PyGetSetDef array_getset[] = {
    {"shape", get_shape, NULL, "The dimensions, a tuple.", NULL},
    {"ndim", get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", get_size, NULL, "Number of elements.", NULL},
    {"dtype", get_dtype, NULL, "The element type.", NULL},
    {"itemsize", get_itemsize, NULL, "Bytes per element.", NULL},
    {"nbytes", get_nbytes, NULL, "Bytes of the elements.", NULL},
    {"T", get_T, NULL, "The transpose (axes reversed).", NULL},
    {"at", get_at, NULL, "Indexed updates: x.at[idx].add(v), ...", NULL},
    {"real", get_real, NULL, "The real part.", NULL},
    {"imag", get_imag, NULL, "The imaginary part.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---- Methods ---- */

static PyObject *m_item(PyObject *self, PyObject *u) {
  (void)u;
  return nvpy_item(NVPY_A(self));
}

static PyObject *m_tolist(PyObject *self, PyObject *u) {
  (void)u;
  if (nv_array_ndim(NVPY_A(self)) == 0) return nvpy_item(NVPY_A(self));
  return nvpy_tolist(NVPY_A(self));
}

/* The array API namespace: the nuvec module (mlx.core's answer for its arrays). */
static PyObject *m_array_namespace(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kwlist[] = {"api_version", NULL};
  PyObject *version = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$O:__array_namespace__", kwlist, &version))
    return NULL;
  return PyImport_ImportModule("nuvec");
}

static PyObject *m_astype(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"dtype", "stream", NULL};
  PyObject *dto, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:astype", kwlist, &dto, &stream)) return NULL;
  int dt = nvpy_dtype_arg(dto, false, "astype: dtype");
  if (dt < 0) return NULL;
  int entered = nvpy_stream_enter(stream, "astype: stream");
  if (entered < 0) return NULL;
  nv_array *r = nv_astype(NVPY_A(self), (nv_dtype)dt);
  if (entered) nv_stream_exit();
  return nvpy_wrap(r);
}

/* Shape arguments given either as one sequence or as several ints (x.reshape(2, 3)). */
static PyObject *varargs_list(PyObject *args) {
  if (PyTuple_GET_SIZE(args) == 1 && !PyLong_Check(PyTuple_GET_ITEM(args, 0))) {
    PyObject *o = PyTuple_GET_ITEM(args, 0);
    Py_INCREF(o);
    return o;
  }
  Py_INCREF(args);
  return args;
}

static PyObject *m_reshape(PyObject *self, PyObject *args, PyObject *kw) {
  PyObject *stream = kw ? PyDict_GetItemString(kw, "stream") : NULL;
  PyObject *shape_o = varargs_list(args);
  int shape[NVPY_MAXDIM];
  int nd = nvpy_shape_arg(shape_o, shape, "reshape: shape");
  Py_DECREF(shape_o);
  if (nd < 0) return NULL;
  int entered = nvpy_stream_enter(stream, "reshape: stream");
  if (entered < 0) return NULL;
  nv_array *r = nv_reshape(NVPY_A(self), shape, nd);
  if (entered) nv_stream_exit();
  return nvpy_wrap(r);
}

static PyObject *m_transpose(PyObject *self, PyObject *args, PyObject *kw) {
  PyObject *stream = kw ? PyDict_GetItemString(kw, "stream") : NULL;
  int axes[NVPY_MAXDIM], n = -2;
  if (PyTuple_GET_SIZE(args) > 0) {
    PyObject *o = varargs_list(args);
    n = nvpy_axes_arg(o, axes, "transpose: axes");
    Py_DECREF(o);
    if (n == -1) return NULL;
  }
  int entered = nvpy_stream_enter(stream, "transpose: stream");
  if (entered < 0) return NULL;
  nv_array *r = nv_transpose(NVPY_A(self), n == -2 ? NULL : axes, n == -2 ? 0 : n);
  if (entered) nv_stream_exit();
  return nvpy_wrap(r);
}

/* numpy.asarray of an array's buffer (bfloat16 through uint16 bits and ml_dtypes). */
static PyObject *m_array(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"dtype", "copy", NULL};
  PyObject *dtype = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", kwlist, &dtype, &copy)) return NULL;
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np) return NULL;
  PyObject *src = self, *bf16 = NULL, *r = NULL;
  Py_INCREF(src);
  if (nv_array_dtype(NVPY_A(self)) == NV_DTYPE_BFLOAT16) {
    Py_DECREF(src);
    src = nvpy_wrap(nv_view(NVPY_A(self), NV_DTYPE_UINT16));
    PyObject *ml = src ? PyImport_ImportModule("ml_dtypes") : NULL;
    bf16 = ml ? PyObject_GetAttrString(ml, "bfloat16") : NULL;
    Py_XDECREF(ml);
    if (!bf16) goto done;
  }
  r = PyObject_CallMethod(np, "asarray", "O", src);
  if (r && bf16) {
    PyObject *v = PyObject_CallMethod(r, "view", "O", bf16);
    Py_SETREF(r, v);
  }
  if (r && dtype != Py_None) {
    PyObject *v = PyObject_CallMethod(r, "astype", "O", dtype);
    Py_SETREF(r, v);
  } else if (r && copy == Py_True) {
    PyObject *v = PyObject_CallMethod(r, "copy", NULL);
    Py_SETREF(r, v);
  }
done:
  Py_XDECREF(src);
  Py_XDECREF(bf16);
  Py_DECREF(np);
  return r;
}

/* Pickling: the row-major bytes, the shape and the dtype's name. */
static PyObject *m_reduce(PyObject *self, PyObject *u) {
  (void)u;
  nv_array *a = NVPY_A(self);
  size_t nb = nv_array_nbytes(a);
  PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nb);
  if (!bytes) return NULL;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = nv_array_read(a, PyBytes_AS_STRING(bytes), nb);
  Py_END_ALLOW_THREADS if (st != NV_OK) {
    Py_DECREF(bytes);
    return nvpy_raise_last(st);
  }
  PyObject *mod = PyImport_ImportModule("nuvec._core");
  PyObject *fn = mod ? PyObject_GetAttrString(mod, "_unpickle") : NULL;
  Py_XDECREF(mod);
  PyObject *shape = get_shape(self, NULL);
  PyObject *r = fn && shape ? Py_BuildValue("O(OOs)", fn, bytes, shape,
                                            nv_dtype_name(nv_array_dtype(a)))
                            : NULL;
  Py_XDECREF(fn);
  Py_XDECREF(shape);
  Py_DECREF(bytes);
  return r;
}

static PyObject *py_unpickle(PyObject *mod, PyObject *args) {
  (void)mod;
  Py_buffer data;
  PyObject *shape_o;
  const char *name;
  if (!PyArg_ParseTuple(args, "y*Os:_unpickle", &data, &shape_o, &name)) return NULL;
  int shape[NVPY_MAXDIM];
  nv_dtype dt;
  int nd = nvpy_shape_arg(shape_o, shape, "_unpickle: shape");
  PyObject *r = NULL;
  if (nd >= 0 && nv_dtype_from_name(name, &dt) != NV_OK) nvpy_raise_last(NV_ERR_INVALID_ARGUMENT);
  else if (nd >= 0) {
    size_t size = nv_dtype_size(dt);
    bool overflow = false;
    for (int i = 0; i < nd; i++)
      overflow |= shape[i] < 0 || __builtin_mul_overflow(size, (size_t)shape[i], &size);
    if (overflow || (size_t)data.len != size)
      nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "_unpickle: the data does not match the shape");
    else r = nvpy_wrap(nv_array_from_data(data.buf, shape, nd, dt));
  }
  PyBuffer_Release(&data);
  return r;
}

static PyObject *m_copy(PyObject *self, PyObject *u) {
  (void)u;
  return nvpy_wrap(nv_copy(NVPY_A(self)));
}

static PyObject *m_deepcopy(PyObject *self, PyObject *memo) {
  (void)memo;
  return nvpy_wrap(nv_copy(NVPY_A(self)));
}

static PyObject *m_format(PyObject *self, PyObject *spec) {
  if (!PyUnicode_Check(spec)) {
    PyErr_Format(PyExc_TypeError, "__format__: format_spec must be a str, got %s", Py_TYPE(spec)->tp_name);
    return NULL;
  }
  if (nv_array_size(NVPY_A(self)) == 1 && nv_array_ndim(NVPY_A(self)) == 0) {
    PyObject *item = nvpy_item(NVPY_A(self));
    if (!item) return NULL;
    PyObject *r = PyObject_Format(item, spec);
    Py_DECREF(item);
    return r;
  }
  /* As mlx.core: other arrays format only with an empty spec, as their repr. */
  if (PyUnicode_GET_LENGTH(spec) != 0) {
    PyErr_SetString(PyExc_TypeError, "unsupported format string passed to nuvec.array.__format__");
    return NULL;
  }
  return nvpy_repr(self);
}

/* complex(x) of a one-element array: its value as a Python complex, whatever its dtype. */
static PyObject *m_complex(PyObject *self, PyObject *u) {
  (void)u;
  PyObject *item = nvpy_item(NVPY_A(self));
  if (!item) return NULL;
  PyObject *r = PyObject_CallOneArg((PyObject *)&PyComplex_Type, item);
  Py_DECREF(item);
  return r;
}

static PyMethodDef array_methods[] = {
    {"item", m_item, METH_NOARGS, "The value of a one-element array as a Python scalar."},
    {"tolist", m_tolist, METH_NOARGS, "The values as nested Python lists."},
    {"astype", (PyCFunction)(void (*)(void))m_astype, METH_VARARGS | METH_KEYWORDS,
     "The array converted to a dtype."},
    {"reshape", (PyCFunction)(void (*)(void))m_reshape, METH_VARARGS | METH_KEYWORDS,
     "The array with a new shape: x.reshape(2, 3) or x.reshape((2, 3))."},
    {"transpose", (PyCFunction)(void (*)(void))m_transpose, METH_VARARGS | METH_KEYWORDS,
     "The array with its axes permuted (reversed without arguments)."},
    {"__array__", (PyCFunction)(void (*)(void))m_array, METH_VARARGS | METH_KEYWORDS,
     "A NumPy array sharing the data when it is contiguous."},
    {"__dlpack__", (PyCFunction)(void (*)(void))nvpy_dlpack, METH_VARARGS | METH_KEYWORDS,
     "A DLPack capsule viewing the data."},
    {"__dlpack_device__", nvpy_dlpack_device, METH_NOARGS, "The DLPack device: (1, 0) for the CPU, (2, index) for data on a GPU."},
    {"__array_namespace__", (PyCFunction)(void (*)(void))m_array_namespace,
     METH_VARARGS | METH_KEYWORDS, "The array API namespace (the nuvec module)."},
    {"__reduce__", m_reduce, METH_NOARGS, NULL},
    {"__copy__", m_copy, METH_NOARGS, NULL},
    {"__deepcopy__", m_deepcopy, METH_O, NULL},
    {"__format__", m_format, METH_O, NULL},
    {"__complex__", m_complex, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

/* ---- Number protocol ---- */

/* Whether `o` can be an operand of an operator: arrays, Python scalars and what converts
 * without guessing (buffers, __array__, __dlpack__), as mlx.core's operators take. Lists,
 * tuples, strings and other objects are refused (operand_refused). */
static bool acceptable(PyObject *o) {
  return NVPY_IS_ARRAY(o) || PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) ||
         PyComplex_Check(o) || PyObject_CheckBuffer(o) || PyObject_HasAttrString(o, "__array__") ||
         PyObject_HasAttrString(o, "__dlpack__");
}

/* An operator given an operand it refuses: None gives NotImplemented (Python's TypeError, as
 * mlx.core's for None), anything else MLX's ValueError naming the operation and the type. */
static PyObject *operand_refused(PyObject *a, PyObject *b, const char *what) {
  PyObject *o = acceptable(a) ? b : a;
  if (o == Py_None) Py_RETURN_NOTIMPLEMENTED;
  PyErr_Format(PyExc_ValueError, "Cannot perform %s on an array and %s", what,
               Py_TYPE(o)->tp_name);
  return NULL;
}

typedef nv_array *(*binary_fn)(const nv_array *, const nv_array *);

static nv_array *binary_raw(PyObject *a, PyObject *b, binary_fn fn) {
  nv_array *xa, *xb;
  if (nvpy_operands(a, b, &xa, &xb) < 0) return NULL;
  nv_array *r = fn(xa, xb);
  nv_release(xa);
  nv_release(xb);
  return r;
}

static PyObject *binary(PyObject *a, PyObject *b, binary_fn fn, const char *what) {
  if (!acceptable(a) || !acceptable(b)) return operand_refused(a, b, what);
  nv_array *r = binary_raw(a, b, fn);
  return r ? nvpy_wrap(r) : NULL;
}

static PyObject *inplace(PyObject *a, PyObject *b, binary_fn fn, const char *what) {
  if (!acceptable(b)) return operand_refused(a, b, what);
  nv_array *r = binary_raw(a, b, fn);
  if (!r) return NULL;
  nv_status st = nv_array_status(r);
  if (st != NV_OK) {
    nvpy_raise_status(st, nv_array_error(r));
    nv_release(r);
    return NULL;
  }
  replace(a, r);
  Py_INCREF(a);
  return a;
}

#define BINOP(name, fn, what)                                                                 \
  static PyObject *nb_##name(PyObject *a, PyObject *b) { return binary(a, b, fn, what); }    \
  static PyObject *nb_i##name(PyObject *a, PyObject *b) {                                  \
    return inplace(a, b, fn, "inplace " what);                                             \
  }
BINOP(add, nv_add, "addition")
BINOP(sub, nv_subtract, "subtraction")
BINOP(mul, nv_multiply, "multiplication")
static PyObject *nb_truediv(PyObject *a, PyObject *b) {
  return binary(a, b, nv_divide, "division");
}
/* x /= y keeps x an array of x's kind: MLX refuses it for an integer or bool x, whose
 * quotient would have to become floating point. */
static PyObject *nb_itruediv(PyObject *a, PyObject *b) {
  if (PyObject_TypeCheck(a, &nvpy_array_type) &&
      !nv_issubdtype(nv_array_dtype(NVPY_A(a)), NV_CATEGORY_INEXACT)) {
    PyErr_SetString(PyExc_ValueError, "In place division cannot cast to non-floating point type.");
    return NULL;
  }
  return inplace(a, b, nv_divide, "inplace division");
}
BINOP(floordiv, nv_floor_divide, "floor division")
BINOP(mod, nv_remainder, "remainder")
BINOP(matmul, nv_matmul, "matmul")
BINOP(and, nv_bitwise_and, "bitwise and")
BINOP(or, nv_bitwise_or, "bitwise or")
BINOP(xor, nv_bitwise_xor, "bitwise xor")
BINOP(lshift, nv_left_shift, "left shift")
BINOP(rshift, nv_right_shift, "right shift")

static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *m) {
  if (m != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return binary(a, b, nv_power, "power");
}
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *m) {
  if (m != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return inplace(a, b, nv_power, "inplace power");
}

static PyObject *nb_neg(PyObject *a) { return nvpy_wrap(nv_negative(NVPY_A(a))); }
static PyObject *nb_pos(PyObject *a) { return nvpy_wrap(nv_positive(NVPY_A(a))); }
static PyObject *nb_abs(PyObject *a) { return nvpy_wrap(nv_abs(NVPY_A(a))); }
static PyObject *nb_invert(PyObject *a) { return nvpy_wrap(nv_bitwise_invert(NVPY_A(a))); }

static int nb_bool(PyObject *a) {
  PyObject *v = nvpy_item(NVPY_A(a));
  if (!v) return -1;
  int r = PyObject_IsTrue(v);
  Py_DECREF(v);
  return r;
}

static PyObject *nb_int(PyObject *a) {
  PyObject *v = nvpy_item(NVPY_A(a));
  if (!v) return NULL;
  PyObject *r = PyNumber_Long(v);
  Py_DECREF(v);
  return r;
}

static PyObject *nb_float(PyObject *a) {
  PyObject *v = nvpy_item(NVPY_A(a));
  if (!v) return NULL;
  PyObject *r = PyNumber_Float(v);
  Py_DECREF(v);
  return r;
}

static PyObject *nb_index(PyObject *a) {
  if (!nv_issubdtype(nv_array_dtype(NVPY_A(a)), NV_CATEGORY_INTEGER)) {
    PyErr_SetString(PyExc_TypeError, "only integer arrays can be used as an index");
    return NULL;
  }
  return nvpy_item(NVPY_A(a));
}

static PyNumberMethods array_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_remainder = nb_mod,
    .nb_power = nb_pow,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_bool = nb_bool,
    .nb_invert = nb_invert,
    .nb_lshift = nb_lshift,
    .nb_rshift = nb_rshift,
    .nb_and = nb_and,
    .nb_xor = nb_xor,
    .nb_or = nb_or,
    .nb_int = nb_int,
    .nb_float = nb_float,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_remainder = nb_imod,
    .nb_inplace_power = nb_ipow,
    .nb_inplace_lshift = nb_ilshift,
    .nb_inplace_rshift = nb_irshift,
    .nb_inplace_and = nb_iand,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_or = nb_ior,
    .nb_floor_divide = nb_floordiv,
    .nb_true_divide = nb_truediv,
    .nb_inplace_floor_divide = nb_ifloordiv,
    .nb_inplace_true_divide = nb_itruediv,
    .nb_index = nb_index,
    .nb_matrix_multiply = nb_matmul,
    .nb_inplace_matrix_multiply = nb_imatmul,
};

static PyObject *array_richcompare(PyObject *a, PyObject *b, int op) {
  static const binary_fn fns[] = {[Py_LT] = nv_less,          [Py_LE] = nv_less_equal,
                                  [Py_EQ] = nv_equal,         [Py_NE] = nv_not_equal,
                                  [Py_GT] = nv_greater,       [Py_GE] = nv_greater_equal};
  static const char *names[] = {[Py_LT] = "less than",    [Py_LE] = "less than or equal",
                                [Py_EQ] = "equal",        [Py_NE] = "not equal",
                                [Py_GT] = "greater than", [Py_GE] = "greater than or equal"};
  /* An operand an operator refuses (a list, a tuple, a string, another object) makes == False
   * and != True, as MLX's x == [..]; the orderings raise its ValueError. None gives
   * NotImplemented: == and != fall back to identity, the orderings raise TypeError. */
  if (!acceptable(a) || !acceptable(b)) {
    if ((op == Py_EQ || op == Py_NE) && a != Py_None && b != Py_None)
      return PyBool_FromLong(op == Py_NE);
    return operand_refused(a, b, names[op]);
  }
  nv_array *xa, *xb;
  if (nvpy_operands(a, b, &xa, &xb) < 0) return NULL;
  nv_array *r = fns[op](xa, xb);
  nv_release(xa);
  nv_release(xb);
  return r ? nvpy_wrap(r) : NULL;
}

static Py_hash_t array_hash(PyObject *self) { return (Py_hash_t)((uintptr_t)self >> 4); }

/* ---- Sequence behaviour ---- */

static Py_ssize_t array_len(PyObject *self) {
  if (nv_array_ndim(NVPY_A(self)) == 0) {
    PyErr_SetString(PyExc_TypeError, "len() 0-dimensional array.");
    return -1;
  }
  return nv_array_dim(NVPY_A(self), 0);
}

static PyObject *array_iter(PyObject *self) {
  nv_array *a = NVPY_A(self);
  if (nv_array_ndim(a) == 0) {
    PyErr_SetString(PyExc_TypeError, "iter() 0-dimensional array.");
    return NULL;
  }
  nv_vec *v = nv_vec_new();
  if (!v) return PyErr_NoMemory();
  nv_status st = nv_unstack(a, 0, v);
  PyObject *t = st == NV_OK ? nvpy_tuple_from_vec(v) : nvpy_raise_last(st);
  nv_vec_free(v);
  if (!t) return NULL;
  PyObject *it = PyObject_GetIter(t);
  Py_DECREF(t);
  return it;
}

static int array_contains(PyObject *self, PyObject *v) {
  /* `v in x` is (x == v).any(): an object x cannot equal ("a" in x) is just not in it. */
  PyObject *eq = array_richcompare(self, v, Py_EQ);
  if (!eq) return -1;
  if (eq == Py_NotImplemented || !NVPY_IS_ARRAY(eq)) {
    /* NotImplemented (None) or False (an operand == refuses): not in x. */
    Py_DECREF(eq);
    return 0;
  }
  nv_array *any = nv_sum(NVPY_A(eq), NULL, 0, false);
  Py_DECREF(eq);
  PyObject *r = nvpy_wrap(any);
  if (!r) return -1;
  int yes = nb_bool(r);
  Py_DECREF(r);
  return yes;
}

static PySequenceMethods array_as_sequence = {.sq_contains = array_contains};
static PyMappingMethods array_as_mapping = {array_len, nvpy_getitem, nvpy_setitem};

/* ---- Buffer protocol ---- */

/* What a view keeps alive: the array whose data it exports (the Python object may be given a
 * new array meanwhile) and the shape and strides in Py_ssize_t. */
typedef struct {
  nv_array *a;
  Py_ssize_t dims[];
} export_info;

static const char *buffer_format(nv_dtype dt) {
  static const char *f[] = {"?", "B", "H", "I", "Q", "b", "h", "i", "q", "e", "H", "f", "d", "Zf"};
  return f[dt];
}

static int array_getbuffer(PyObject *self, Py_buffer *view, int flags) {
  nv_array *a = NVPY_A(self);
  int nd = nv_array_ndim(a);
  bool row = nv_array_is_row_contiguous(a), col = nv_array_is_col_contiguous(a);
  if (nv_array_dtype(a) == NV_DTYPE_BFLOAT16) {
    /* PEP 3118 has no bfloat16 format; NumPy then falls back to __array__ (ml_dtypes). */
    PyErr_SetString(PyExc_BufferError, "bfloat16 has no buffer format; use numpy.array(x)");
    return -1;
  }
  if (((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !row) ||
      ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !col) ||
      ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !row && !col) ||
      ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !row)) {
    PyErr_SetString(PyExc_BufferError, "the array is not contiguous as the buffer request needs");
    return -1;
  }
  export_info *info = PyMem_Malloc(sizeof *info + 2 * (size_t)(nd ? nd : 1) * sizeof(Py_ssize_t));
  if (!info) {
    PyErr_NoMemory();
    return -1;
  }
  const void *data;
  Py_BEGIN_ALLOW_THREADS data = nv_array_data(a);
  Py_END_ALLOW_THREADS if (!data && nv_array_size(a) != 0) {
    PyMem_Free(info);
    nvpy_raise_last(nv_array_status(a) ? nv_array_status(a) : NV_ERR_BACKEND);
    return -1;
  }
  /* The buffer is writable where the array's memory is its own and lives on the host only
   * (as MLX's buffers and NumPy views of them are): caller memory and file mappings are never
   * written, and a host write would leave a device copy stale. */
  nv__buffer *b = nv__out(a)->buf;
  bool writable = b && nv__buffer_writable(b) && !atomic_load(&b->dev);
  if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && !writable) {
    PyMem_Free(info);
    PyErr_SetString(PyExc_BufferError, "the array's memory is read-only (caller memory, a file "
                                       "mapping or a device copy)");
    return -1;
  }
  static char empty[16];
  size_t w = nv_array_itemsize(a);
  const int *sh = nv_array_shape(a);
  const int64_t *st = nv_array_strides(a);
  for (int i = 0; i < nd; i++) {
    info->dims[i] = sh[i];
    info->dims[nd + i] = (Py_ssize_t)(st[i] * (int64_t)w);
  }
  info->a = nv_retain(a);
  view->buf = data ? (void *)data : empty;
  view->obj = self;
  Py_INCREF(self);
  view->len = (Py_ssize_t)nv_array_nbytes(a);
  view->readonly = !writable;
  view->itemsize = (Py_ssize_t)w;
  view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format(nv_array_dtype(a)) : NULL;
  view->ndim = nd;
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? info->dims : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? info->dims + nd : NULL;
  view->suboffsets = NULL;
  view->internal = info;
  return 0;
}

static void array_releasebuffer(PyObject *self, Py_buffer *view) {
  (void)self;
  export_info *info = view->internal;
  if (info) {
    nv_release(info->a);
    PyMem_Free(info);
  }
}

static PyBufferProcs array_as_buffer = {array_getbuffer, array_releasebuffer};

PyTypeObject nvpy_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.array",
    .tp_basicsize = sizeof(nvpy_array),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "array(val, dtype=None): a lazy n-dimensional array, as mlx.core.array.",
    .tp_new = array_new,
    .tp_dealloc = array_dealloc,
    .tp_repr = nvpy_repr,
    .tp_hash = array_hash,
    .tp_richcompare = array_richcompare,
    .tp_iter = array_iter,
    .tp_as_number = &array_as_number,
    .tp_as_sequence = &array_as_sequence,
    .tp_as_mapping = &array_as_mapping,
    .tp_as_buffer = &array_as_buffer,
    .tp_methods = array_methods,
    .tp_getset = array_getset,
    .tp_weaklistoffset = offsetof(nvpy_array, weakrefs),
};

static PyMethodDef array_module_methods[] = {
    {"_unpickle", py_unpickle, METH_VARARGS, "Rebuilds a pickled array."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_array(PyObject *m) {
  if (PyType_Ready(&nvpy_array_type) < 0) return -1;
  Py_INCREF(&nvpy_array_type);
  if (PyModule_AddObject(m, "array", (PyObject *)&nvpy_array_type) < 0) return -1;
  return PyModule_AddFunctions(m, array_module_methods);
}
