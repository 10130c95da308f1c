/* nuvec's CPython extension: questions about dtypes, as mlx.core answers them — finfo and
 * iinfo (the limits of a float or integer dtype), result_type (promotion of arrays and
 * dtypes), can_cast (whether promotion to `to` gives `to`) and isdtype (the array API's kinds:
 * "bool", "signed integer", "unsigned integer", "integral", "real floating", "complex
 * floating", "numeric"). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "nvpy.h"

/* ---- finfo / iinfo ---- */

/* One object type for both: `dtype` and the limits as Python numbers (floats for finfo, ints
 * for iinfo; eps, smallest_normal and bits are finfo's only). */
typedef struct {
  PyObject_HEAD PyObject *dtype;
  PyObject *min, *max, *eps, *smallest_normal, *bits;
} nvpy_info;

static void info_dealloc(PyObject *self) {
  nvpy_info *i = (nvpy_info *)self;
  Py_XDECREF(i->dtype);
  Py_XDECREF(i->min);
  Py_XDECREF(i->max);
  Py_XDECREF(i->eps);
  Py_XDECREF(i->smallest_normal);
  Py_XDECREF(i->bits);
  Py_TYPE(self)->tp_free(self);
}

static int info_dtype_arg(PyObject *args, const char *format, const char *what) {
  PyObject *o;
  if (!PyArg_ParseTuple(args, format, &o)) return -1;
  int dt = nvpy_dtype_arg(o, false, what);
  return dt < 0 ? -1 : dt;
}

static PyObject *finfo_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  if (kw && PyDict_Size(kw)) {
    PyErr_SetString(PyExc_TypeError, "finfo() takes no keyword arguments");
    return NULL;
  }
  int dt = info_dtype_arg(args, "O:finfo", "finfo: dtype");
  if (dt < 0) return NULL;
  /* The largest finite value, the gap above 1, the smallest positive normal, and the bits. */
  double max, eps, tiny;
  int bits;
  nv_dtype real = (nv_dtype)dt;
  switch (dt) {
  case NV_DTYPE_FLOAT16: max = 65504.0, eps = ldexp(1, -10), tiny = ldexp(1, -14), bits = 16; break;
  case NV_DTYPE_BFLOAT16: max = ldexp(255, 120), eps = ldexp(1, -7), tiny = FLT_MIN, bits = 16; break;
  case NV_DTYPE_FLOAT64: max = DBL_MAX, eps = DBL_EPSILON, tiny = DBL_MIN, bits = 64; break;
  case NV_DTYPE_FLOAT32:
  case NV_DTYPE_COMPLEX64: /* its parts' dtype, as MLX's */
    max = FLT_MAX, eps = FLT_EPSILON, tiny = FLT_MIN, bits = 32, real = NV_DTYPE_FLOAT32;
    break;
  default:
    PyErr_Format(PyExc_ValueError, "[finfo] dtype %s is not inexact.", nv_dtype_name((nv_dtype)dt));
    return NULL;
  }
  nvpy_info *i = (nvpy_info *)t->tp_alloc(t, 0);
  if (!i) return NULL;
  i->dtype = nvpy_dtype_obj(real);
  i->min = PyFloat_FromDouble(-max);
  i->max = PyFloat_FromDouble(max);
  i->eps = PyFloat_FromDouble(eps);
  i->smallest_normal = PyFloat_FromDouble(tiny);
  i->bits = PyLong_FromLong(bits);
  if (!i->dtype || !i->min || !i->max || !i->eps || !i->smallest_normal || !i->bits) Py_CLEAR(i);
  return (PyObject *)i;
}

static PyObject *iinfo_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  if (kw && PyDict_Size(kw)) {
    PyErr_SetString(PyExc_TypeError, "iinfo() takes no keyword arguments");
    return NULL;
  }
  int dt = info_dtype_arg(args, "O:iinfo", "iinfo: dtype");
  if (dt < 0) return NULL;
  if (!nv_issubdtype((nv_dtype)dt, NV_CATEGORY_INTEGER)) {
    PyErr_Format(PyExc_ValueError, "[iinfo] Only integer types supported but %s was provided",
                 dt == NV_DTYPE_BOOL ? "bool" : nv_dtype_name((nv_dtype)dt));
    return NULL;
  }
  int bits = (int)nv_dtype_size((nv_dtype)dt) * 8;
  bool sign = nv_issubdtype((nv_dtype)dt, NV_CATEGORY_SIGNED_INTEGER);
  nvpy_info *i = (nvpy_info *)t->tp_alloc(t, 0);
  if (!i) return NULL;
  i->dtype = nvpy_dtype_obj((nv_dtype)dt);
  if (sign) {
    i->min = PyLong_FromLongLong(bits == 64 ? INT64_MIN : -(1LL << (bits - 1)));
    i->max = PyLong_FromLongLong(bits == 64 ? INT64_MAX : (1LL << (bits - 1)) - 1);
  } else {
    i->min = PyLong_FromLong(0);
    i->max = PyLong_FromUnsignedLongLong(bits == 64 ? UINT64_MAX : (1ULL << bits) - 1);
  }
  if (!i->dtype || !i->min || !i->max) Py_CLEAR(i);
  return (PyObject *)i;
}

static PyObject *number_str(PyObject *v) {
  if (PyLong_Check(v)) return PyObject_Str(v);
  char *s = PyOS_double_to_string(PyFloat_AsDouble(v), 'g', 6, 0, NULL);
  if (!s) return NULL;
  PyObject *r = PyUnicode_FromString(s);
  PyMem_Free(s);
  return r;
}

/* finfo(min=-3.40282e+38, max=3.40282e+38, dtype=float32), as MLX's repr. */
static PyObject *info_repr(PyObject *self) {
  nvpy_info *i = (nvpy_info *)self;
  PyObject *lo = number_str(i->min), *hi = lo ? number_str(i->max) : NULL, *r = NULL;
  if (hi)
    r = PyUnicode_FromFormat("%s(min=%U, max=%U, dtype=%s)", i->eps ? "finfo" : "iinfo", lo, hi,
                             nv_dtype_name(((nvpy_dtype *)i->dtype)->dt));
  Py_XDECREF(lo);
  Py_XDECREF(hi);
  return r;
}

static PyMemberDef finfo_members[] = {
    {"dtype", T_OBJECT_EX, offsetof(nvpy_info, dtype), READONLY, "The dtype (complex64: float32)."},
    {"min", T_OBJECT_EX, offsetof(nvpy_info, min), READONLY, "The most negative finite value."},
    {"max", T_OBJECT_EX, offsetof(nvpy_info, max), READONLY, "The largest finite value."},
    {"eps", T_OBJECT_EX, offsetof(nvpy_info, eps), READONLY, "The gap between 1 and the next value."},
    {"smallest_normal", T_OBJECT_EX, offsetof(nvpy_info, smallest_normal), READONLY,
     "The smallest positive normal value."},
    {"bits", T_OBJECT_EX, offsetof(nvpy_info, bits), READONLY, "The bits of one value."},
    {NULL, 0, 0, 0, NULL}};

static PyMemberDef iinfo_members[] = {
    {"dtype", T_OBJECT_EX, offsetof(nvpy_info, dtype), READONLY, "The dtype."},
    {"min", T_OBJECT_EX, offsetof(nvpy_info, min), READONLY, "The smallest value."},
    {"max", T_OBJECT_EX, offsetof(nvpy_info, max), READONLY, "The largest value."},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject finfo_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.finfo",
    .tp_basicsize = sizeof(nvpy_info),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "finfo(dtype): the limits of a float dtype, as mlx.core.finfo.",
    .tp_new = finfo_new,
    .tp_dealloc = info_dealloc,
    .tp_repr = info_repr,
    .tp_members = finfo_members,
};

static PyTypeObject iinfo_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.iinfo",
    .tp_basicsize = sizeof(nvpy_info),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "iinfo(dtype): the limits of an integer dtype, as mlx.core.iinfo.",
    .tp_new = iinfo_new,
    .tp_dealloc = info_dealloc,
    .tp_repr = info_repr,
    .tp_members = iinfo_members,
};

/* ---- result_type, can_cast, isdtype ---- */

/* The dtype of an array or a Dtype; -1 with MLX's ValueError for anything else. */
static int dtype_of(PyObject *o, const char *what) {
  if (NVPY_IS_ARRAY(o)) return (int)nv_array_dtype(NVPY_A(o));
  if (PyObject_TypeCheck(o, &nvpy_dtype_type)) return (int)((nvpy_dtype *)o)->dt;
  PyErr_Format(PyExc_ValueError, "[%s] Inputs must be arrays or dtypes.", what);
  return -1;
}

static PyObject *py_result_type(PyObject *m, PyObject *args) {
  (void)m;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n == 0) {
    PyErr_SetString(PyExc_ValueError, "[result_type] At least one array or dtype is required.");
    return NULL;
  }
  int r = -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    int d = dtype_of(PyTuple_GET_ITEM(args, i), "result_type");
    if (d < 0) return NULL;
    r = r < 0 ? d : (int)nv_promote_types((nv_dtype)r, (nv_dtype)d);
  }
  return nvpy_dtype_obj((nv_dtype)r);
}

/* Whether `from_` (an array or a dtype) casts to `to` without loss: promoting the two gives
 * `to`, as MLX's can_cast. */
static PyObject *py_can_cast(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  static char *kwlist[] = {"from_", "to", NULL};
  PyObject *from, *to;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:can_cast", kwlist, &from, &to)) return NULL;
  int a = dtype_of(from, "can_cast"), b = a < 0 ? -2 : nvpy_dtype_arg(to, false, "can_cast: to");
  if (a < 0 || b < 0) return NULL;
  return PyBool_FromLong((int)nv_promote_types((nv_dtype)a, (nv_dtype)b) == b);
}

/* The array API's kinds of dtypes. */
static const struct {
  const char *name;
  int category; /* -1: bool only */
} kinds[] = {{"bool", -1},
             {"signed integer", NV_CATEGORY_SIGNED_INTEGER},
             {"unsigned integer", NV_CATEGORY_UNSIGNED_INTEGER},
             {"integral", NV_CATEGORY_INTEGER},
             {"real floating", NV_CATEGORY_FLOATING},
             {"complex floating", NV_CATEGORY_COMPLEX},
             {"numeric", NV_CATEGORY_NUMBER}};

/* Whether `dt` is of `kind` (a dtype or a kind's name): 1, 0, or -1 with an exception. */
static int is_kind(nv_dtype dt, PyObject *kind) {
  if (PyObject_TypeCheck(kind, &nvpy_dtype_type)) return ((nvpy_dtype *)kind)->dt == dt;
  if (!PyUnicode_Check(kind)) {
    PyErr_SetString(PyExc_ValueError,
                    "[isdtype] `kind` must be a dtype, a string, or a tuple of dtypes and strings.");
    return -1;
  }
  const char *s = PyUnicode_AsUTF8(kind);
  if (!s) return -1;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(s, kinds[i].name))
      return kinds[i].category < 0 ? dt == NV_DTYPE_BOOL
                                   : nv_issubdtype(dt, (nv_dtype_category)kinds[i].category);
  PyErr_Format(PyExc_ValueError, "[isdtype] Unknown data type kind: '%s'.", s);
  return -1;
}

static PyObject *py_isdtype(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  static char *kwlist[] = {"dtype", "kind", NULL};
  PyObject *dto, *kind;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O:isdtype", kwlist, &nvpy_dtype_type, &dto, &kind))
    return NULL;
  nv_dtype dt = ((nvpy_dtype *)dto)->dt;
  if (!PyTuple_Check(kind)) {
    int r = is_kind(dt, kind);
    return r < 0 ? NULL : PyBool_FromLong(r);
  }
  bool any = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kind); i++) {
    int r = is_kind(dt, PyTuple_GET_ITEM(kind, i));
    if (r < 0) return NULL;
    any = any || r;
  }
  return PyBool_FromLong(any);
}

static PyMethodDef dtypeinfo_methods[] = {
    {"result_type", py_result_type, METH_VARARGS,
     "result_type(*arrays_and_dtypes): the dtype their promotion gives."},
    {"can_cast", (PyCFunction)(void (*)(void))py_can_cast, METH_VARARGS | METH_KEYWORDS,
     "can_cast(from_, to): whether promoting from_ (an array or dtype) with to gives to."},
    {"isdtype", (PyCFunction)(void (*)(void))py_isdtype, METH_VARARGS | METH_KEYWORDS,
     "isdtype(dtype, kind): whether dtype is of kind (a dtype, a kind's name, or a tuple)."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_dtypeinfo(PyObject *m) {
  if (PyType_Ready(&finfo_type) < 0 || PyType_Ready(&iinfo_type) < 0) return -1;
  Py_INCREF(&finfo_type);
  if (PyModule_AddObject(m, "finfo", (PyObject *)&finfo_type) < 0) {
    Py_DECREF(&finfo_type);
    return -1;
  }
  Py_INCREF(&iinfo_type);
  if (PyModule_AddObject(m, "iinfo", (PyObject *)&iinfo_type) < 0) {
    Py_DECREF(&iinfo_type);
    return -1;
  }
  return PyModule_AddFunctions(m, dtypeinfo_methods);
}
