/* nuvec's CPython extension: the module, errors, dtypes and their categories, devices,
 * streams and the memory functions, with mlx.core's names and reprs. */
#include <stdatomic.h>
#include <string.h>

#include "nvpy.h"

/* ---- Errors ---- */

PyObject *nvpy_raise_status(nv_status status, const char *msg) {
  PyObject *type = PyExc_RuntimeError;
  if (status == NV_ERR_INVALID_ARGUMENT) type = PyExc_ValueError;
  else if (status == NV_ERR_OUT_OF_MEMORY) type = PyExc_MemoryError;
  else if (status == NV_ERR_IO) type = PyExc_OSError;
  /* Messages quote bytes from files (names, header text) and may be cut inside a character:
   * invalid UTF-8 becomes backslash escapes rather than a UnicodeDecodeError. */
  const char *text = msg && *msg ? msg : nv_status_string(status);
  PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "backslashreplace");
  if (s) PyErr_SetObject(type, s);
  Py_XDECREF(s);
  return NULL;
}

PyObject *nvpy_raise_last(nv_status status) { return nvpy_raise_status(status, nv_last_error()); }

static bool names_one(const char *msg, const char *label) {
  size_t n = strlen(label);
  if (!strncmp(msg, label, n) && strchr(": (", msg[n])) return true;
  return msg[0] == '[' && !strncmp(msg + 1, label, n) && msg[n + 1] == ']';
}

/* A submodule's function also counts as named by its own name ("random.uniform": "uniform"). */
bool nvpy_names(const char *msg, const char *label) {
  const char *dot = strrchr(label, '.');
  return names_one(msg, label) || (dot && names_one(msg, dot + 1));
}

PyObject *nvpy_error_prefix(const char *label) {
  if (!PyErr_Occurred()) {
    PyErr_Format(PyExc_RuntimeError, "%s: failed without reporting an error", label);
    return NULL;
  }
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (t == PyExc_TypeError || t == PyExc_ValueError || t == PyExc_OverflowError ||
      t == PyExc_IndexError) {
    PyObject *s = PyObject_Str(v);
    const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
    PyObject *text = m && !nvpy_names(m, label) ? PyUnicode_FromFormat("%s: %s", label, m) : NULL;
    PyObject *e = text ? PyObject_CallFunctionObjArgs(t, text, NULL) : NULL;
    if (e) {
      PyObject *cause = PyException_GetCause(v);
      if (tb) PyException_SetTraceback(e, tb);
      if (cause) PyException_SetCause(e, cause);
      PyException_SetContext(e, PyException_GetContext(v));
      Py_SETREF(v, e);
    }
    Py_XDECREF(text);
    Py_XDECREF(s);
    PyErr_Clear();
  }
  PyErr_Restore(t, v, tb);
  return NULL;
}

/* ---- Dtypes ---- */

PyObject *nvpy_dtypes[NV_DTYPE_COUNT];

PyObject *nvpy_dtype_obj(nv_dtype dt) {
  if ((int)dt < 0 || dt >= NV_DTYPE_COUNT) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "invalid dtype");
  Py_INCREF(nvpy_dtypes[dt]);
  return nvpy_dtypes[dt];
}

int nvpy_dtype_arg(PyObject *o, bool allow_none, const char *what) {
  if (o == NULL || (o == Py_None && allow_none)) return -1;
  if (PyObject_TypeCheck(o, &nvpy_dtype_type)) return (int)((nvpy_dtype *)o)->dt;
  PyErr_Format(PyExc_TypeError, "%s: expected a nuvec Dtype, got %s", what, Py_TYPE(o)->tp_name);
  return -2;
}

static PyObject *dtype_repr(PyObject *self) {
  return PyUnicode_FromFormat("nuvec.%s", nv_dtype_name(((nvpy_dtype *)self)->dt));
}

/* str() spells a dtype as mlx.core does ("mlx.core.float32"): code written for MLX compares
 * and parses that text (dtype names in checkpoints' metadata, str(x.dtype) == ...), so a
 * drop-in must print it; repr() names the module the object comes from. */
static PyObject *dtype_str(PyObject *self) {
  return PyUnicode_FromFormat("mlx.core.%s", nv_dtype_name(((nvpy_dtype *)self)->dt));
}

static PyObject *dtype_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &nvpy_dtype_type))
    Py_RETURN_NOTIMPLEMENTED;
  bool eq = ((nvpy_dtype *)a)->dt == ((nvpy_dtype *)b)->dt;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t dtype_hash(PyObject *self) { return 0x6e76 + (Py_hash_t)((nvpy_dtype *)self)->dt; }

static PyObject *dtype_size(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromSize_t(nv_dtype_size(((nvpy_dtype *)self)->dt));
}

static PyGetSetDef dtype_getset[] = {{"size", dtype_size, NULL, "Bytes per element.", NULL},
                                     {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nvpy_dtype_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.Dtype",
    .tp_basicsize = sizeof(nvpy_dtype),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An element type (nuvec.float32, ...), as mlx.core.Dtype.",
    .tp_repr = dtype_repr,
    .tp_str = dtype_str,
    .tp_hash = dtype_hash,
    .tp_richcompare = dtype_richcompare,
    .tp_getset = dtype_getset,
};

/* ---- Enums: DtypeCategory and DeviceType ---- */

static PyObject *category_repr(PyObject *self) {
  return PyUnicode_FromFormat("DtypeCategory.%s", ((nvpy_enum *)self)->name);
}
static PyObject *devtype_repr(PyObject *self) {
  return PyUnicode_FromFormat("DeviceType.%s", ((nvpy_enum *)self)->name);
}
static Py_hash_t enum_hash(PyObject *self) { return 0x7e00 + ((nvpy_enum *)self)->value; }
static PyObject *enum_name(PyObject *self, void *c) {
  (void)c;
  return PyUnicode_FromString(((nvpy_enum *)self)->name);
}
static PyObject *enum_value(PyObject *self, void *c) {
  (void)c;
  return PyLong_FromLong(((nvpy_enum *)self)->value);
}
static PyGetSetDef enum_getset[] = {{"name", enum_name, NULL, NULL, NULL},
                                    {"value", enum_value, NULL, NULL, NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nvpy_category_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.DtypeCategory",
    .tp_basicsize = sizeof(nvpy_enum),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A category of dtypes (nuvec.floating, ...), for issubdtype.",
    .tp_repr = category_repr,
    .tp_hash = enum_hash,
    .tp_getset = enum_getset,
};

PyTypeObject nvpy_devtype_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.DeviceType",
    .tp_basicsize = sizeof(nvpy_enum),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A kind of device: nuvec.cpu or nuvec.gpu.",
    .tp_repr = devtype_repr,
    .tp_hash = enum_hash,
    .tp_getset = enum_getset,
};

static PyObject *new_enum(PyTypeObject *t, const char *name, int value) {
  nvpy_enum *e = PyObject_New(nvpy_enum, t);
  if (e) {
    e->name = name;
    e->value = value;
  }
  return (PyObject *)e;
}

/* The categories' parents, so issubdtype can compare two categories. */
static const int category_parent[] = {
    [NV_CATEGORY_GENERIC] = -1,
    [NV_CATEGORY_NUMBER] = NV_CATEGORY_GENERIC,
    [NV_CATEGORY_INTEGER] = NV_CATEGORY_NUMBER,
    [NV_CATEGORY_SIGNED_INTEGER] = NV_CATEGORY_INTEGER,
    [NV_CATEGORY_UNSIGNED_INTEGER] = NV_CATEGORY_INTEGER,
    [NV_CATEGORY_INEXACT] = NV_CATEGORY_NUMBER,
    [NV_CATEGORY_FLOATING] = NV_CATEGORY_INEXACT,
    [NV_CATEGORY_COMPLEX] = NV_CATEGORY_INEXACT,
};

static PyObject *py_issubdtype(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "OO:issubdtype", &a, &b)) return NULL;
  bool a_dt = PyObject_TypeCheck(a, &nvpy_dtype_type), b_dt = PyObject_TypeCheck(b, &nvpy_dtype_type);
  bool a_cat = PyObject_TypeCheck(a, &nvpy_category_type);
  bool b_cat = PyObject_TypeCheck(b, &nvpy_category_type);
  if (!(a_dt || a_cat) || !(b_dt || b_cat)) {
    PyErr_SetString(PyExc_TypeError, "issubdtype: arguments must be Dtype or DtypeCategory");
    return NULL;
  }
  if (b_dt) {
    /* Nothing but the dtype itself is a subtype of a dtype. */
    return PyBool_FromLong(a_dt && ((nvpy_dtype *)a)->dt == ((nvpy_dtype *)b)->dt);
  }
  int cat = ((nvpy_enum *)b)->value;
  if (a_dt) return PyBool_FromLong(nv_issubdtype(((nvpy_dtype *)a)->dt, (nv_dtype_category)cat));
  for (int c = ((nvpy_enum *)a)->value; c >= 0; c = category_parent[c])
    if (c == cat) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

/* ---- Devices ---- */

static PyObject *devtypes[2];

static PyObject *device_from(nv_device d) {
  nvpy_device *o = PyObject_New(nvpy_device, &nvpy_device_type);
  if (o) o->d = d;
  return (PyObject *)o;
}

static PyObject *stream_from(nv_stream s) {
  nvpy_stream *o = PyObject_New(nvpy_stream, &nvpy_stream_type);
  if (o) o->s = s;
  return (PyObject *)o;
}

/* A device from a Device or a DeviceType; 0 or -1 with a TypeError. */
static int device_arg(PyObject *o, nv_device *d, const char *what) {
  if (PyObject_TypeCheck(o, &nvpy_device_type)) {
    *d = ((nvpy_device *)o)->d;
    return 0;
  }
  if (PyObject_TypeCheck(o, &nvpy_devtype_type)) {
    int t = ((nvpy_enum *)o)->value;
    *d = t == NV_DEVICE_GPU ? nv_gpu(0) : nv_cpu();
    return 0;
  }
  PyErr_Format(PyExc_TypeError, "%s: expected a Device or DeviceType, got %s", what, Py_TYPE(o)->tp_name);
  return -1;
}

static PyObject *device_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  (void)t;
  static char *kwlist[] = {"type", "index", NULL};
  PyObject *type;
  int index = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|i:Device", kwlist, &nvpy_devtype_type, &type,
                                   &index))
    return nvpy_error_prefix("Device");
  if (index < 0) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "Device: negative index");
  nv_device d = ((nvpy_enum *)type)->value == NV_DEVICE_GPU ? nv_gpu(index) : nv_cpu();
  d.index = index;
  return device_from(d);
}

static PyObject *device_repr(PyObject *self) {
  nv_device d = ((nvpy_device *)self)->d;
  return PyUnicode_FromFormat("Device(%s, %d)", d.type == NV_DEVICE_GPU ? "gpu" : "cpu", d.index);
}

static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
  nv_device db;
  if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
  if (PyObject_TypeCheck(b, &nvpy_device_type)) db = ((nvpy_device *)b)->d;
  else if (PyObject_TypeCheck(b, &nvpy_devtype_type)) db = (nv_device){((nvpy_enum *)b)->value, 0};
  else Py_RETURN_NOTIMPLEMENTED;
  nv_device da = ((nvpy_device *)a)->d;
  bool eq = da.type == db.type && da.index == db.index;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t device_hash(PyObject *self) {
  nv_device d = ((nvpy_device *)self)->d;
  return 0x4400 + d.type * 1024 + d.index;
}

static PyObject *device_type_get(PyObject *self, void *c) {
  (void)c;
  PyObject *t = devtypes[((nvpy_device *)self)->d.type == NV_DEVICE_GPU];
  Py_INCREF(t);
  return t;
}

static PyGetSetDef device_getset[] = {{"type", device_type_get, NULL, NULL, NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};
static PyMemberDef device_members[] = {
    {"index", T_INT, offsetof(nvpy_device, d) + offsetof(nv_device, index), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

PyTypeObject nvpy_device_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.Device",
    .tp_basicsize = sizeof(nvpy_device),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A device: Device(nuvec.cpu) or Device(nuvec.gpu, index).",
    .tp_new = device_new,
    .tp_repr = device_repr,
    .tp_hash = device_hash,
    .tp_richcompare = device_richcompare,
    .tp_getset = device_getset,
    .tp_members = device_members,
};

/* ---- Streams ---- */

static PyObject *stream_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  (void)t;
  static char *kwlist[] = {"device", NULL};
  PyObject *dev;
  nv_device d;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Stream", kwlist, &dev)) return NULL;
  if (device_arg(dev, &d, "Stream: device") < 0) return NULL;
  return stream_from(nv_new_stream(d));
}

static PyObject *stream_repr(PyObject *self) {
  nv_stream s = ((nvpy_stream *)self)->s;
  return PyUnicode_FromFormat("Stream(Device(%s, %d), %d)",
                              s.device.type == NV_DEVICE_GPU ? "gpu" : "cpu", s.device.index,
                              s.index);
}

static PyObject *stream_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &nvpy_stream_type))
    Py_RETURN_NOTIMPLEMENTED;
  bool eq = ((nvpy_stream *)a)->s.index == ((nvpy_stream *)b)->s.index;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_hash_t stream_hash(PyObject *self) { return 0x5300 + ((nvpy_stream *)self)->s.index; }

static PyObject *stream_device_get(PyObject *self, void *c) {
  (void)c;
  return device_from(((nvpy_stream *)self)->s.device);
}

/* A stream used as a context manager (`with nuvec.stream(s):`) makes it the thread's stream. */
static PyObject *stream_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  nv_status st = nv_stream_enter(((nvpy_stream *)self)->s);
  if (st != NV_OK) return nvpy_raise_last(st);
  Py_INCREF(self);
  return self;
}

static PyObject *stream_exit(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  nv_stream_exit();
  Py_RETURN_FALSE;
}

static PyGetSetDef stream_getset[] = {{"device", stream_device_get, NULL, NULL, NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};
static PyMethodDef stream_methods[] = {{"__enter__", stream_enter, METH_NOARGS, NULL},
                                       {"__exit__", stream_exit, METH_VARARGS, NULL},
                                       {NULL, NULL, 0, NULL}};

PyTypeObject nvpy_stream_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.Stream",
    .tp_basicsize = sizeof(nvpy_stream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An ordered queue of work on a device.",
    .tp_new = stream_new,
    .tp_repr = stream_repr,
    .tp_hash = stream_hash,
    .tp_richcompare = stream_richcompare,
    .tp_getset = stream_getset,
    .tp_methods = stream_methods,
};

/* ---- Thread-local streams ---- */

/* A ThreadLocalStream (mlx.core's new_thread_local_stream): a stream per thread on one device.
 * Each thread that uses it gets its own stream, made on its first use and kept in a
 * threading.local, so it goes with the thread. `index` numbers the thread-local streams (their
 * repr, as MLX's). */
typedef struct {
  PyObject_HEAD nv_device d;
  int index;
  PyObject *local; /* a threading.local: attribute "stream", the thread's Stream */
} nvpy_tlstream;

static PyTypeObject nvpy_tlstream_type;
static atomic_int tlstream_count;

static PyObject *tlstream_make(nv_device d, const char *what) {
  if (!nv_device_is_available(d)) {
    PyErr_Format(PyExc_ValueError, "[%s] Cannot make a stream of a device that is not available",
                 what);
    return NULL;
  }
  PyObject *threading = PyImport_ImportModule("threading");
  PyObject *local = threading ? PyObject_CallMethod(threading, "local", NULL) : NULL;
  Py_XDECREF(threading);
  if (!local) return NULL;
  nvpy_tlstream *o = PyObject_New(nvpy_tlstream, &nvpy_tlstream_type);
  if (!o) {
    Py_DECREF(local);
    return NULL;
  }
  o->d = d;
  o->index = atomic_fetch_add(&tlstream_count, 1);
  o->local = local;
  return (PyObject *)o;
}

/* The calling thread's stream of a ThreadLocalStream (made on the thread's first use). */
static int tlstream_resolve(PyObject *self, nv_stream *s) {
  nvpy_tlstream *t = (nvpy_tlstream *)self;
  PyObject *st = PyObject_GetAttrString(t->local, "stream");
  if (!st) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    st = stream_from(nv_new_stream(t->d));
    if (!st || PyObject_SetAttrString(t->local, "stream", st) < 0) {
      Py_XDECREF(st);
      return -1;
    }
  }
  *s = ((nvpy_stream *)st)->s;
  Py_DECREF(st);
  return 0;
}

static PyObject *tlstream_new(PyTypeObject *t, PyObject *args, PyObject *kw) {
  (void)t;
  static char *kwlist[] = {"device", NULL};
  PyObject *dev;
  nv_device d;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:ThreadLocalStream", kwlist, &dev)) return NULL;
  if (device_arg(dev, &d, "ThreadLocalStream: device") < 0) return NULL;
  return tlstream_make(d, "ThreadLocalStream");
}

static void tlstream_dealloc(PyObject *self) {
  Py_XDECREF(((nvpy_tlstream *)self)->local);
  PyObject_Free(self);
}

static PyObject *tlstream_repr(PyObject *self) {
  nvpy_tlstream *t = (nvpy_tlstream *)self;
  return PyUnicode_FromFormat("ThreadLocalStream(Device(%s, %d), %d)",
                              t->d.type == NV_DEVICE_GPU ? "gpu" : "cpu", t->d.index, t->index);
}

static PyObject *tlstream_device_get(PyObject *self, void *c) {
  (void)c;
  return device_from(((nvpy_tlstream *)self)->d);
}

static PyGetSetDef tlstream_getset[] = {{"device", tlstream_device_get, NULL, NULL, NULL},
                                        {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject nvpy_tlstream_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.ThreadLocalStream",
    .tp_basicsize = sizeof(nvpy_tlstream),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stream that is unique per thread: each thread using it gets its own stream "
              "on the device.",
    .tp_new = tlstream_new,
    .tp_dealloc = tlstream_dealloc,
    .tp_repr = tlstream_repr,
    .tp_getset = tlstream_getset,
};

static PyObject *py_new_thread_local_stream(PyObject *self, PyObject *arg) {
  (void)self;
  nv_device d;
  if (device_arg(arg, &d, "new_thread_local_stream: device") < 0) return NULL;
  return tlstream_make(d, "new_thread_local_stream");
}

/* The stream a `stream=` argument names. */
static int stream_arg(PyObject *o, nv_stream *s, const char *what) {
  if (PyObject_TypeCheck(o, &nvpy_stream_type)) {
    *s = ((nvpy_stream *)o)->s;
    return 0;
  }
  if (PyObject_TypeCheck(o, &nvpy_tlstream_type)) return tlstream_resolve(o, s);
  nv_device d;
  if (device_arg(o, &d, what) < 0) return -1;
  *s = nv_default_stream(d);
  return 0;
}

int nvpy_stream_enter(PyObject *o, const char *what) {
  if (o == NULL || o == Py_None) return 0;
  nv_stream s;
  if (stream_arg(o, &s, what) < 0) return -1;
  nv_status st = nv_stream_enter(s);
  if (st != NV_OK) {
    nvpy_raise_last(st);
    return -1;
  }
  return 1;
}

static PyObject *py_default_device(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return device_from(nv_default_device());
}

static PyObject *py_set_default_device(PyObject *self, PyObject *arg) {
  (void)self;
  nv_device d;
  if (device_arg(arg, &d, "set_default_device: device") < 0) return NULL;
  if (!nv_device_is_available(d))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                             "[set_default_device] the device is not available in this build");
  nv_status st = nv_set_default_device(d);
  if (st != NV_OK) return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *py_default_stream(PyObject *self, PyObject *arg) {
  (void)self;
  nv_device d;
  if (device_arg(arg, &d, "default_stream: device") < 0) return NULL;
  if (!nv_device_is_available(d))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "[default_stream] Cannot get a stream "
                                                      "of a device that is not available");
  /* Inside `with nuvec.stream(s)` the thread's default stream of s's device is s (MLX's stream
   * context sets the thread's default stream). */
  nv_stream cur = nv_current_stream();
  if (cur.device.type == d.type && cur.device.index == d.index) return stream_from(cur);
  return stream_from(nv_default_stream(d));
}

static PyObject *py_set_default_stream(PyObject *self, PyObject *arg) {
  (void)self;
  if (!PyObject_TypeCheck(arg, &nvpy_stream_type)) {
    PyErr_SetString(PyExc_TypeError, "set_default_stream: expected a Stream");
    return NULL;
  }
  nv_stream s = ((nvpy_stream *)arg)->s;
  if (!nv_device_is_available(s.device))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                             "[set_default_stream] the stream's device is not available in this build");
  nv_status st = nv_set_default_stream(s);
  if (st != NV_OK) return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *py_new_stream(PyObject *self, PyObject *arg) {
  (void)self;
  nv_device d;
  if (device_arg(arg, &d, "new_stream: device") < 0) return NULL;
  if (!nv_device_is_available(d))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "[new_stream] Cannot make a stream "
                                                      "of a device that is not available");
  return stream_from(nv_new_stream(d));
}

/* nuvec.stream(s): a context manager making `s` (a Stream or Device) the current stream. */
static PyObject *py_stream(PyObject *self, PyObject *arg) {
  (void)self;
  nv_stream s;
  if (stream_arg(arg, &s, "stream: s") < 0) return NULL;
  return stream_from(s);
}

static PyObject *py_synchronize(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *o = Py_None;
  if (!PyArg_ParseTuple(args, "|O:synchronize", &o)) return NULL;
  nv_stream s = nv_current_stream();
  if (o != Py_None && stream_arg(o, &s, "synchronize: stream") < 0) return NULL;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = nv_stream_synchronize(s);
  Py_END_ALLOW_THREADS if (st != NV_OK) return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

/* The devices of a type: 1 CPU; the GPUs a backend serves (indices 0, 1, ... while available). */
static PyObject *py_device_count(PyObject *self, PyObject *arg) {
  (void)self;
  if (!PyObject_TypeCheck(arg, &nvpy_devtype_type)) {
    PyErr_Format(PyExc_TypeError, "device_count: expected a DeviceType, got %s", Py_TYPE(arg)->tp_name);
    return NULL;
  }
  if (((nvpy_enum *)arg)->value == NV_DEVICE_CPU) return PyLong_FromLong(1);
  int n = 0;
  while (n < 1024 && nv_device_is_available(nv_gpu(n))) n++;
  return PyLong_FromLong(n);
}

static PyObject *py_is_available(PyObject *self, PyObject *arg) {
  (void)self;
  nv_device d;
  if (device_arg(arg, &d, "is_available: device") < 0) return NULL;
  return PyBool_FromLong(nv_device_is_available(d));
}

/* ---- Memory ---- */

static PyObject *py_get_active_memory(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  return PyLong_FromSize_t(nv_get_active_memory());
}
static PyObject *py_get_peak_memory(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  return PyLong_FromSize_t(nv_get_peak_memory());
}
static PyObject *py_reset_peak_memory(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  nv_reset_peak_memory();
  Py_RETURN_NONE;
}
/* Adds the buffer of evaluated array x to *total unless `seen` (a set of buffer ids) holds it.
 * 0, or -1 with a ValueError for an array not evaluated. */
static int add_buffer(nv_array *x, PyObject *seen, size_t *total) {
  const void *id;
  size_t nbytes;
  /* An empty array has no buffer, evaluated or not (mx.array([]) is one already in MLX). */
  if (!nv_array_size(x)) return 0;
  if (!nv_array_is_evaluated(x)) {
    PyErr_SetString(PyExc_ValueError, "[get_array_buffer_size] arrays must be evaluated "
                                      "before their buffer sizes can be queried");
    return -1;
  }
  nv_status st = nv_array_buffer_info(x, &id, &nbytes);
  if (st != NV_OK) {
    nvpy_raise_last(st);
    return -1;
  }
  if (!id) return 0;
  PyObject *key = PyLong_FromVoidPtr((void *)id);
  int had = key ? PySet_Contains(seen, key) : -1;
  if (had == 0 && PySet_Add(seen, key) == 0) *total += nbytes;
  Py_XDECREF(key);
  return had < 0 || PyErr_Occurred() ? -1 : 0;
}

/* get_array_buffer_size(*trees): the bytes of the distinct data buffers behind the arrays of
 * the pytrees (a view and its base count once; other leaves count nothing), as mlx.core's. */
static PyObject *py_get_array_buffer_size(PyObject *s, PyObject *args) {
  (void)s;
  nv_vec *arrays = nv_vec_new();
  PyObject *seen = arrays ? PySet_New(NULL) : NULL;
  size_t total = 0;
  int r = seen ? nvpy_tree_flatten(args, arrays, "get_array_buffer_size") : -1;
  for (size_t i = 0; r == 0 && i < nv_vec_size(arrays); i++)
    r = add_buffer(nv_vec_get(arrays, i), seen, &total);
  if (!arrays) PyErr_NoMemory();
  Py_XDECREF(seen);
  nv_vec_free(arrays);
  return r < 0 ? NULL : PyLong_FromSize_t(total);
}
static PyObject *py_get_cache_memory(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  return PyLong_FromSize_t(nv_get_cache_memory());
}
static PyObject *py_clear_cache(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  nv_clear_cache();
  Py_RETURN_NONE;
}
static PyObject *py_get_memory_limit(PyObject *s, PyObject *u) {
  (void)s, (void)u;
  return PyLong_FromSize_t(nv_get_memory_limit());
}
/* A byte count argument: a non-negative int. */
static int bytes_arg(PyObject *o, size_t *out, const char *what) {
  if (!PyLong_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: expected an int, got %s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  *out = PyLong_AsSize_t(o);
  if (*out == (size_t)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %R is not a byte count in [0, 2**64)", what, o);
    return -1;
  }
  return 0;
}

static PyObject *py_set_memory_limit(PyObject *s, PyObject *arg) {
  (void)s;
  size_t v;
  if (bytes_arg(arg, &v, "set_memory_limit: limit") < 0) return NULL;
  return PyLong_FromSize_t(nv_set_memory_limit(v));
}
static PyObject *py_set_cache_limit(PyObject *s, PyObject *arg) {
  (void)s;
  size_t v;
  if (bytes_arg(arg, &v, "set_cache_limit: limit") < 0) return NULL;
  return PyLong_FromSize_t(nv_set_cache_limit(v));
}

static PyMethodDef module_methods[] = {
    {"_set_print_precision", nvpy_set_print_precision, METH_O, "Sets repr's float decimals (-1: %g)."},
    {"_get_print_precision", nvpy_get_print_precision, METH_NOARGS, "repr's float decimals (-1: %g)."},
    {"issubdtype", py_issubdtype, METH_VARARGS, "Whether a dtype or category is a subtype of another."},
    {"default_device", py_default_device, METH_NOARGS, "The default device."},
    {"set_default_device", py_set_default_device, METH_O, "Sets the default device."},
    {"default_stream", py_default_stream, METH_O, "The default stream of a device."},
    {"new_stream", py_new_stream, METH_O, "A new stream on a device."},
    {"new_thread_local_stream", py_new_thread_local_stream, METH_O,
     "A stream that is unique per thread (a ThreadLocalStream) on a device."},
    {"set_default_stream", py_set_default_stream, METH_O,
     "set_default_stream(stream): make `stream` the default of its device."},
    {"stream", py_stream, METH_O, "A context manager making a stream the current one."},
    {"synchronize", py_synchronize, METH_VARARGS, "Waits for the work of a stream."},
    {"is_available", py_is_available, METH_O, "Whether a device can run work here."},
    {"device_count", py_device_count, METH_O, "device_count(device_type): the devices of a type."},
    {"get_active_memory", py_get_active_memory, METH_NOARGS, "Bytes held by live arrays."},
    {"get_peak_memory", py_get_peak_memory, METH_NOARGS, "The peak of active memory."},
    {"reset_peak_memory", py_reset_peak_memory, METH_NOARGS, "Resets the peak memory."},
    {"get_cache_memory", py_get_cache_memory, METH_NOARGS, "Bytes in the buffer cache."},
    {"get_array_buffer_size", py_get_array_buffer_size, METH_VARARGS,
     "get_array_buffer_size(*trees): bytes of the distinct buffers behind evaluated arrays."},
    {"get_memory_limit", py_get_memory_limit, METH_NOARGS, "The memory limit in bytes."},
    {"set_memory_limit", py_set_memory_limit, METH_O, "Sets the memory limit; returns the old."},
    {"set_cache_limit", py_set_cache_limit, METH_O, "Sets the cache limit; returns the old."},
    {"clear_cache", py_clear_cache, METH_NOARGS, "Frees the buffer cache."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "nuvec._core",
                                        "nuvec: arrays with MLX's semantics, in C.", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

static int add_object(PyObject *m, const char *name, PyObject *o) {
  if (!o) return -1;
  if (PyModule_AddObject(m, name, o) < 0) {
    Py_DECREF(o);
    return -1;
  }
  return 0;
}

static int add_type(PyObject *m, const char *name, PyTypeObject *t) {
  if (PyType_Ready(t) < 0) return -1;
  Py_INCREF(t);
  return add_object(m, name, (PyObject *)t);
}

static int add_dtypes(PyObject *m) {
  for (int i = 0; i < NV_DTYPE_COUNT; i++) {
    nvpy_dtype *d = PyObject_New(nvpy_dtype, &nvpy_dtype_type);
    if (!d) return -1;
    d->dt = (nv_dtype)i;
    nvpy_dtypes[i] = (PyObject *)d;
    const char *name = i == NV_DTYPE_BOOL ? "bool_" : nv_dtype_name((nv_dtype)i);
    Py_INCREF(d);
    if (add_object(m, name, (PyObject *)d) < 0) return -1;
  }
  static const struct {
    const char *name;
    int value;
  } cats[] = {{"generic", NV_CATEGORY_GENERIC},
              {"number", NV_CATEGORY_NUMBER},
              {"integer", NV_CATEGORY_INTEGER},
              {"signedinteger", NV_CATEGORY_SIGNED_INTEGER},
              {"unsignedinteger", NV_CATEGORY_UNSIGNED_INTEGER},
              {"inexact", NV_CATEGORY_INEXACT},
              {"floating", NV_CATEGORY_FLOATING},
              {"complexfloating", NV_CATEGORY_COMPLEX}};
  for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
    if (add_object(m, cats[i].name, new_enum(&nvpy_category_type, cats[i].name, cats[i].value)) < 0)
      return -1;
  return 0;
}

/* mlx.core's constants: e, pi, inf, nan, euler_gamma as Python floats, newaxis as None. */
static int add_constants(PyObject *m) {
  static const struct {
    const char *name;
    double value;
  } c[] = {{"e", 2.718281828459045}, {"pi", 3.141592653589793}, {"euler_gamma", 0.5772156649015329}};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
    if (add_object(m, c[i].name, PyFloat_FromDouble(c[i].value)) < 0) return -1;
  if (add_object(m, "inf", PyFloat_FromDouble(Py_HUGE_VAL)) < 0 ||
      add_object(m, "nan", PyFloat_FromDouble(Py_NAN)) < 0)
    return -1;
  Py_INCREF(Py_None);
  return add_object(m, "newaxis", Py_None);
}

static int add_devices(PyObject *m) {
  devtypes[0] = new_enum(&nvpy_devtype_type, "cpu", NV_DEVICE_CPU);
  devtypes[1] = new_enum(&nvpy_devtype_type, "gpu", NV_DEVICE_GPU);
  if (!devtypes[0] || !devtypes[1]) return -1;
  Py_INCREF(devtypes[0]);
  Py_INCREF(devtypes[1]);
  return add_object(m, "cpu", devtypes[0]) < 0 || add_object(m, "gpu", devtypes[1]) < 0 ? -1 : 0;
}

PyMODINIT_FUNC PyInit__core(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (add_type(m, "Dtype", &nvpy_dtype_type) < 0 ||
      add_type(m, "DtypeCategory", &nvpy_category_type) < 0 ||
      add_type(m, "DeviceType", &nvpy_devtype_type) < 0 ||
      add_type(m, "Device", &nvpy_device_type) < 0 || add_type(m, "Stream", &nvpy_stream_type) < 0 ||
      add_type(m, "ThreadLocalStream", &nvpy_tlstream_type) < 0 ||
      add_dtypes(m) < 0 || add_devices(m) < 0 || add_constants(m) < 0 ||
      nvpy_init_dtypeinfo(m) < 0 || nvpy_init_array(m) < 0 || nvpy_init_ops(m) < 0 ||
      nvpy_init_index(m) < 0 || nvpy_init_transforms(m) < 0 || nvpy_init_export(m) < 0 || nvpy_init_io(m) < 0 || nvpy_init_dlpack(m) < 0 ||
      nvpy_init_random(m) < 0 || nvpy_init_conv(m) < 0 || nvpy_init_fft(m) < 0 ||
      nvpy_init_distributed(m) < 0 || nvpy_init_fast(m) < 0 ||
      nvpy_init_linalg(m) < 0 || nvpy_init_quantize(m) < 0 ||
      PyModule_AddStringConstant(m, "__version__", nv_version()) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
