/* The C layer of nuvec's export_function / exporter / import_function (python/nuvec/_export.py
 * checks the arguments' forms and holds the Python objects): handles over nv_exporter and
 * nv_imported.
 *
 * An exporter handle's closure calls the Python function of the current _export_call only (a
 * borrowed reference for the duration of the call), so the C exporter never holds a Python
 * object: a function that refers to its exporter makes a cycle Python's collector sees. */
#include "nvpy.h"

/* ---- Exporter handles ---- */

typedef struct {
  PyObject *fn;   /* the function of the running call (borrowed), or NULL */
  size_t npos;    /* its positional inputs; the keyword ones follow, sorted by name */
  PyObject *keys; /* a list of the keyword names, sorted (borrowed) */
  PyObject *exc;  /* the exception the function raised */
} export_call;

typedef struct {
  PyObject_HEAD nv_exporter *e;
  export_call call;
} nvpy_exporter;

/* The outputs MLX accepts: one array, or a list or tuple of arrays. 0, or -1 with ValueError. */
static int push_outputs(PyObject *r, nv_vec *outputs) {
  if (NVPY_IS_ARRAY(r))
    return nv_vec_push(outputs, NVPY_A(r)) == NV_OK ? 0 : (PyErr_NoMemory(), -1);
  if (PyList_Check(r) || PyTuple_Check(r)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(r);
    for (Py_ssize_t i = 0; i < n; i++)
      if (!NVPY_IS_ARRAY(PySequence_Fast_GET_ITEM(r, i)))
        goto bad;
    for (Py_ssize_t i = 0; i < n; i++)
      if (nv_vec_push(outputs, NVPY_A(PySequence_Fast_GET_ITEM(r, i))) != NV_OK) {
        PyErr_NoMemory();
        return -1;
      }
    return 0;
  }
bad:
  PyErr_Format(PyExc_ValueError,
               "[export_function] the function must return an array or a list or tuple of arrays "
               "(got %s)",
               Py_TYPE(r)->tp_name);
  return -1;
}

static nv_status export_closure(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  export_call *c = payload;
  if (!c->fn)
    return NV_ERR_INVALID_ARGUMENT;
  PyGILState_STATE g = PyGILState_Ensure();
  size_t n = nv_vec_size(inputs);
  PyObject *args = PyTuple_New((Py_ssize_t)c->npos), *kw = PyDict_New(), *r = NULL;
  int rc = args && kw ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    PyObject *a = nvpy_wrap(nv_retain(nv_vec_get(inputs, i)));
    if (!a) {
      rc = -1;
    } else if (i < c->npos) {
      PyTuple_SET_ITEM(args, (Py_ssize_t)i, a);
    } else {
      rc = PyDict_SetItem(kw, PyList_GET_ITEM(c->keys, (Py_ssize_t)(i - c->npos)), a);
      Py_DECREF(a);
    }
  }
  if (rc == 0)
    r = PyObject_Call(c->fn, args, kw);
  rc = r ? push_outputs(r, outputs) : -1;
  Py_XDECREF(r);
  Py_XDECREF(args);
  Py_XDECREF(kw);
  nv_status st = NV_OK;
  if (rc < 0) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v)
      PyException_SetTraceback(v, tb);
    Py_XSETREF(c->exc, v);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    st = NV_ERR_INVALID_ARGUMENT;
  }
  PyGILState_Release(g);
  return st;
}

static void exporter_dealloc(PyObject *self) {
  nvpy_exporter *x = (nvpy_exporter *)self;
  nv_exporter_free(x->e); /* writes the file of an exporter left open */
  Py_XDECREF(x->call.exc);
  PyObject_Free(self);
}

static PyTypeObject nvpy_exporter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec._ExporterHandle",
    .tp_basicsize = sizeof(nvpy_exporter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = exporter_dealloc,
};

/* _export_new(path, shapeless, metadata or None) -> handle */
static PyObject *py_export_new(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *path_o, *meta = Py_None;
  int shapeless = 0;
  if (!PyArg_ParseTuple(args, "O&p|O", PyUnicode_FSConverter, &path_o, &shapeless, &meta))
    return NULL;
  Py_ssize_t mlen = 0;
  const char *md = NULL;
  if (meta != Py_None) {
    if (!PyUnicode_Check(meta)) {
      Py_DECREF(path_o);
      return PyErr_Format(PyExc_TypeError, "[export_function] metadata must be a str, not %s",
                          Py_TYPE(meta)->tp_name);
    }
    md = PyUnicode_AsUTF8AndSize(meta, &mlen);
    if (!md) {
      Py_DECREF(path_o);
      return NULL;
    }
  }
  nvpy_exporter *x = PyObject_New(nvpy_exporter, &nvpy_exporter_type);
  if (!x) {
    Py_DECREF(path_o);
    return NULL;
  }
  memset(&x->call, 0, sizeof x->call);
  x->e = NULL;
  nv_closure *f = nv_closure_new(export_closure, &x->call, NULL);
  nv_export_options o = {
      .shapeless = shapeless != 0, .metadata = md ? md : NULL, .metadata_len = (size_t)mlen};
  if (md && !mlen)
    o.metadata = NULL;
  x->e = f ? nv_exporter_new(PyBytes_AS_STRING(path_o), f, &o) : NULL;
  nv_closure_release(f);
  Py_DECREF(path_o);
  if (!x->e) {
    Py_DECREF(x);
    return nvpy_raise_last(NV_ERR_OUT_OF_MEMORY);
  }
  return (PyObject *)x;
}

/* The positional arrays (a tuple) and keyword arrays (a dict) as a list and a map: 0, or -1
 * with an exception. */
static int inputs_of(PyObject *args, PyObject *kwargs, const char *tag, nv_vec **v, nv_map **mp) {
  *v = nv_vec_new();
  *mp = nv_map_new();
  if (!*v || !*mp)
    goto oom;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
    PyObject *a = PyTuple_GET_ITEM(args, i);
    if (!NVPY_IS_ARRAY(a)) {
      PyErr_Format(PyExc_ValueError, "%s positional input %zd is a %s, not an array", tag, i,
                   Py_TYPE(a)->tp_name);
      return -1;
    }
    if (nv_vec_push(*v, NVPY_A(a)) != NV_OK)
      goto oom;
  }
  PyObject *k, *a;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs, &pos, &k, &a)) {
    const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
    if (!name) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s keyword names must be str", tag);
      return -1;
    }
    if (!NVPY_IS_ARRAY(a)) {
      PyErr_Format(PyExc_ValueError, "%s keyword input '%s' is a %s, not an array", tag, name,
                   Py_TYPE(a)->tp_name);
      return -1;
    }
    if (nv_map_set(*mp, name, NVPY_A(a)) != NV_OK)
      goto oom;
  }
  return 0;
oom:
  PyErr_NoMemory();
  return -1;
}

/* _export_call(handle, fun, args: tuple, kwargs: dict): one more trace. */
static PyObject *py_export_call(PyObject *m, PyObject *args) {
  (void)m;
  nvpy_exporter *x;
  PyObject *fn, *a, *kw;
  if (!PyArg_ParseTuple(args, "O!OO!O!", &nvpy_exporter_type, &x, &fn, &PyTuple_Type, &a,
                        &PyDict_Type, &kw))
    return NULL;
  if (nv_exporter_closed(x->e))
    return PyErr_Format(PyExc_RuntimeError,
                        "[export_function] the exporter is closed: its file is written");
  if (x->call.fn)
    return PyErr_Format(PyExc_RuntimeError, "[export_function] the exporter is already tracing");
  nv_vec *v = NULL;
  nv_map *mp = NULL;
  PyObject *keys = PyDict_Keys(kw), *r = NULL;
  if (keys && PyList_Sort(keys) == 0 && inputs_of(a, kw, "[export_function]", &v, &mp) == 0) {
    x->call.fn = fn;
    x->call.npos = (size_t)PyTuple_GET_SIZE(a);
    x->call.keys = keys;
    Py_CLEAR(x->call.exc);
    nv_status st = nv_exporter_call(x->e, v, mp);
    x->call.fn = NULL;
    x->call.keys = NULL;
    if (st == NV_OK) {
      r = (Py_INCREF(Py_None), Py_None);
    } else if (x->call.exc) {
      PyErr_SetObject((PyObject *)Py_TYPE(x->call.exc), x->call.exc);
      Py_CLEAR(x->call.exc);
    } else {
      nvpy_raise_last(st);
    }
  }
  Py_XDECREF(keys);
  nv_vec_free(v);
  nv_map_free(mp);
  return r;
}

static PyObject *py_export_close(PyObject *m, PyObject *o) {
  (void)m;
  if (!PyObject_TypeCheck(o, &nvpy_exporter_type))
    return PyErr_Format(PyExc_TypeError, "_export_close: expected an exporter handle");
  nv_status st = nv_exporter_close(((nvpy_exporter *)o)->e);
  if (st != NV_OK)
    return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *py_export_discard(PyObject *m, PyObject *o) {
  (void)m;
  if (!PyObject_TypeCheck(o, &nvpy_exporter_type))
    return PyErr_Format(PyExc_TypeError, "_export_discard: expected an exporter handle");
  nv_exporter_discard(((nvpy_exporter *)o)->e);
  Py_RETURN_NONE;
}

static PyObject *py_export_closed(PyObject *m, PyObject *o) {
  (void)m;
  if (!PyObject_TypeCheck(o, &nvpy_exporter_type))
    return PyErr_Format(PyExc_TypeError, "_export_closed: expected an exporter handle");
  return PyBool_FromLong(nv_exporter_closed(((nvpy_exporter *)o)->e));
}

/* ---- Imported functions ---- */

typedef struct {
  PyObject_HEAD nv_imported *f;
} nvpy_imported;

static void imported_dealloc(PyObject *self) {
  nv_imported_release(((nvpy_imported *)self)->f);
  PyObject_Free(self);
}

static PyTypeObject nvpy_imported_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec._ImportedHandle",
    .tp_basicsize = sizeof(nvpy_imported),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = imported_dealloc,
};

/* _import_function(path) -> handle. A file that cannot be read or is not a valid function
 * file raises RuntimeError, as MLX's import does. */
static PyObject *py_import_function(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *path_o;
  if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path_o))
    return NULL;
  nv_imported *f = nv_import_function(PyBytes_AS_STRING(path_o));
  Py_DECREF(path_o);
  if (!f)
    return nvpy_raise_status(NV_ERR_BACKEND, nv_last_error());
  nvpy_imported *x = PyObject_New(nvpy_imported, &nvpy_imported_type);
  if (!x) {
    nv_imported_release(f);
    return NULL;
  }
  x->f = f;
  return (PyObject *)x;
}

/* _import_call(handle, args: tuple, kwargs: dict) -> tuple of arrays */
static PyObject *py_import_call(PyObject *m, PyObject *args) {
  (void)m;
  nvpy_imported *x;
  PyObject *a, *kw;
  if (!PyArg_ParseTuple(args, "O!O!O!", &nvpy_imported_type, &x, &PyTuple_Type, &a, &PyDict_Type,
                        &kw))
    return NULL;
  nv_vec *v = NULL, *out = NULL;
  nv_map *mp = NULL;
  PyObject *r = NULL;
  if (inputs_of(a, kw, "[import_function]", &v, &mp) == 0 && (out = nv_vec_new())) {
    nv_status st = nv_imported_call(x->f, v, mp, out);
    r = st == NV_OK ? nvpy_tuple_from_vec(out) : nvpy_raise_last(st);
  } else if (!PyErr_Occurred()) {
    PyErr_NoMemory();
  }
  nv_vec_free(v);
  nv_vec_free(out);
  nv_map_free(mp);
  return r;
}

static PyObject *py_import_metadata(PyObject *m, PyObject *o) {
  (void)m;
  if (!PyObject_TypeCheck(o, &nvpy_imported_type))
    return PyErr_Format(PyExc_TypeError, "_import_metadata: expected an imported handle");
  size_t n = 0;
  const char *s = nv_imported_metadata(((nvpy_imported *)o)->f, &n);
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
}

static PyMethodDef export_methods[] = {
    {"_export_new", py_export_new, METH_VARARGS, "_export_new(path, shapeless, metadata)."},
    {"_export_call", py_export_call, METH_VARARGS, "_export_call(handle, fun, args, kwargs)."},
    {"_export_close", py_export_close, METH_O, "Writes and closes an exporter."},
    {"_export_closed", py_export_closed, METH_O, "Whether an exporter is closed."},
    {"_export_discard", py_export_discard, METH_O, "Closes an exporter without writing."},
    {"_import_function", py_import_function, METH_VARARGS, "_import_function(path) -> handle."},
    {"_import_call", py_import_call, METH_VARARGS, "_import_call(handle, args, kwargs)."},
    {"_import_metadata", py_import_metadata, METH_O, "The metadata stored with a function."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_export(PyObject *m) {
  if (PyType_Ready(&nvpy_exporter_type) < 0 || PyType_Ready(&nvpy_imported_type) < 0)
    return -1;
  return PyModule_AddFunctions(m, export_methods);
}
