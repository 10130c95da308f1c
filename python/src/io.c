/* nuvec's CPython extension: files as MLX's load/save functions — .npy, .npz, safetensors
 * and GGUF — with the GIL released while the library reads or writes. load returns one array
 * for .npy, else a dict (and, with return_metadata=True, the metadata as MLX gives it:
 * strings, string lists, and numbers or number lists as arrays). */
#include <string.h>

#include "nvpy.h"

/* The path of a str or os.PathLike argument, a new bytes object. */
static PyObject *path_arg(PyObject *o) {
  PyObject *b = NULL;
  if (!PyUnicode_FSConverter(o, &b)) return NULL;
  return b;
}

static PyObject *dict_from_map(const nv_map *m) {
  PyObject *d = PyDict_New();
  for (size_t i = 0; d && i < nv_map_size(m); i++) {
    PyObject *a = nvpy_wrap(nv_retain(nv_map_value(m, i)));
    if (!a || PyDict_SetItemString(d, nv_map_key(m, i), a) < 0) Py_CLEAR(d);
    Py_XDECREF(a);
  }
  return d;
}

static PyObject *meta_value(const nv_io_metadata *m, const char *key, nv_meta_type type) {
  if (type == NV_META_STRING) {
    const char *s;
    size_t len;
    if (nv_io_metadata_get_string(m, key, &s, &len) != NV_OK) return nvpy_raise_last(NV_ERR_IO);
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "replace");
  }
  if (type == NV_META_ARRAY) {
    nv_meta_type elem;
    size_t count;
    const void *vals;
    if (nv_io_metadata_get_array(m, key, &elem, &count, &vals) != NV_OK) return nvpy_raise_last(NV_ERR_IO);
    if (elem == NV_META_STRING) {
      PyObject *l = PyList_New((Py_ssize_t)count);
      for (size_t i = 0; l && i < count; i++) {
        size_t len = 0;
        nv_io_metadata_get_array_string_len(m, key, i, &len);
        PyObject *s = PyUnicode_DecodeUTF8(((const char *const *)vals)[i], (Py_ssize_t)len, "replace");
        if (!s) Py_CLEAR(l);
        else PyList_SET_ITEM(l, (Py_ssize_t)i, s);
      }
      return l;
    }
    static const nv_dtype dts[] = {
        [NV_META_UINT8] = NV_DTYPE_UINT8,   [NV_META_INT8] = NV_DTYPE_INT8,
        [NV_META_UINT16] = NV_DTYPE_UINT16, [NV_META_INT16] = NV_DTYPE_INT16,
        [NV_META_UINT32] = NV_DTYPE_UINT32, [NV_META_INT32] = NV_DTYPE_INT32,
        [NV_META_FLOAT32] = NV_DTYPE_FLOAT32, [NV_META_BOOL] = NV_DTYPE_BOOL,
        [NV_META_UINT64] = NV_DTYPE_UINT64, [NV_META_INT64] = NV_DTYPE_INT64,
        [NV_META_FLOAT64] = NV_DTYPE_FLOAT64};
    int n = (int)count;
    return nvpy_wrap(nv_array_from_data(vals, &n, 1, dts[elem]));
  }
  if (type == NV_META_FLOAT32 || type == NV_META_FLOAT64) {
    double v;
    nv_io_metadata_get_float(m, key, &v);
    return nvpy_wrap(nv_array_scalar(v, type == NV_META_FLOAT32 ? NV_DTYPE_FLOAT32 : NV_DTYPE_FLOAT64));
  }
  if (type == NV_META_BOOL) {
    int64_t v;
    nv_io_metadata_get_int(m, key, &v);
    return nvpy_wrap(nv_array_bool(v != 0));
  }
  if (type == NV_META_UINT64) {
    uint64_t v;
    nv_io_metadata_get_uint64(m, key, &v);
    return nvpy_wrap(nv_array_uint64(v));
  }
  int64_t v;
  nv_io_metadata_get_int(m, key, &v);
  static const nv_dtype ints[] = {[NV_META_UINT8] = NV_DTYPE_UINT8, [NV_META_INT8] = NV_DTYPE_INT8,
                                  [NV_META_UINT16] = NV_DTYPE_UINT16, [NV_META_INT16] = NV_DTYPE_INT16,
                                  [NV_META_UINT32] = NV_DTYPE_UINT32, [NV_META_INT32] = NV_DTYPE_INT32,
                                  [NV_META_INT64] = NV_DTYPE_INT64};
  nv_array *x = nv_array_int64(v);
  nv_array *y = nv_astype(x, ints[type]);
  nv_release(x);
  return nvpy_wrap(y);
}

static PyObject *dict_from_meta(const nv_io_metadata *m) {
  PyObject *d = PyDict_New();
  for (size_t i = 0; d && i < nv_io_metadata_size(m); i++) {
    const char *key = nv_io_metadata_key(m, i);
    nv_meta_type type;
    nv_io_metadata_has(m, key, &type);
    PyObject *v = meta_value(m, key, type);
    if (!v || PyDict_SetItemString(d, key, v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

static PyObject *py_load(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  static char *kwlist[] = {"file", "format", "return_metadata", "stream", NULL};
  PyObject *file, *format = Py_None, *stream = Py_None;
  int ret_meta = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op$O:load", kwlist, &file, &format, &ret_meta, &stream))
    return NULL;
  PyObject *path = path_arg(file);
  if (!path) return NULL;
  const char *p = PyBytes_AS_STRING(path);
  const char *ext = strrchr(p, '.');
  if (format != Py_None) ext = PyUnicode_AsUTF8(format);
  else if (ext) ext++;
  if (!ext) {
    Py_DECREF(path);
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "[load] Could not infer file format from extension");
  }
  nv_map *arrays = NULL;
  nv_io_metadata *meta = NULL;
  nv_array *one = NULL;
  nv_status st;
  bool npy = !strcmp(ext, "npy");
  char fmt[16];
  snprintf(fmt, sizeof fmt, "%s", ext);
  Py_BEGIN_ALLOW_THREADS if (npy) st = nv_load_npy(p, &one);
  else if (!strcmp(fmt, "npz")) st = nv_load_npz(p, &arrays);
  else if (!strcmp(fmt, "safetensors")) st = nv_load_safetensors(p, &arrays, &meta);
  else if (!strcmp(fmt, "gguf")) st = nv_load_gguf(p, NV_GGUF_RAW, &arrays, &meta);
  else st = NV_ERR_INVALID_ARGUMENT;
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (st != NV_OK) {
    if (st == NV_ERR_INVALID_ARGUMENT && !npy)
      return nvpy_raise_status(st, "[load] Unknown file format; expected npy, npz, safetensors or gguf");
    return nvpy_raise_last(st);
  }
  PyObject *r;
  if (npy) {
    r = nvpy_wrap(one);
    if (r && ret_meta) {
      PyObject *t = Py_BuildValue("(N{})", r);
      r = t;
    }
    return r;
  }
  r = dict_from_map(arrays);
  if (r && ret_meta) {
    PyObject *md = meta ? dict_from_meta(meta) : PyDict_New();
    r = md ? Py_BuildValue("(NN)", r, md) : (Py_DECREF(r), NULL);
  }
  nv_map_free(arrays);
  nv_io_metadata_free(meta);
  return r;
}

/* A map of arrays from a dict (values converted to arrays). */
static nv_map *map_from_dict(PyObject *d) {
  if (!PyDict_Check(d)) {
    PyErr_SetString(PyExc_TypeError, "expected a dict of arrays");
    return NULL;
  }
  nv_map *m = nv_map_new();
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (m && PyDict_Next(d, &pos, &k, &v)) {
    const char *key = PyUnicode_AsUTF8(k);
    nv_array *x = key ? nvpy_to_array(v, -1) : NULL;
    if (!x || nv_map_set(m, key, x) != NV_OK) {
      if (x && !PyErr_Occurred()) PyErr_NoMemory();
      nv_release(x);
      nv_map_free(m);
      return NULL;
    }
    nv_release(x);
  }
  return m;
}

static PyObject *save_result(nv_status st) {
  if (st != NV_OK) return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *py_save(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *file, *arr;
  if (!PyArg_ParseTuple(args, "OO:save", &file, &arr)) return NULL;
  PyObject *path = path_arg(file);
  nv_array *x = path ? nvpy_to_array(arr, -1) : NULL;
  if (!x) {
    Py_XDECREF(path);
    return NULL;
  }
  nv_status st;
  const char *p = PyBytes_AS_STRING(path);
  Py_BEGIN_ALLOW_THREADS st = nv_save(p, x);
  Py_END_ALLOW_THREADS nv_release(x);
  Py_DECREF(path);
  return save_result(st);
}

static PyObject *savez_common(PyObject *args, PyObject *kw, bool compressed) {
  if (PyTuple_GET_SIZE(args) < 1) {
    PyErr_SetString(PyExc_TypeError, "savez: expected a file");
    return NULL;
  }
  PyObject *path = path_arg(PyTuple_GET_ITEM(args, 0));
  if (!path) return NULL;
  PyObject *d = kw ? PyDict_Copy(kw) : PyDict_New();
  for (Py_ssize_t i = 1; d && i < PyTuple_GET_SIZE(args); i++) {
    char name[32];
    snprintf(name, sizeof name, "arr_%zd", i - 1);
    if (PyDict_GetItemString(d, name)) {
      PyErr_Format(PyExc_ValueError, "savez: cannot use un-named variables and keyword %s", name);
      Py_CLEAR(d);
    } else if (PyDict_SetItemString(d, name, PyTuple_GET_ITEM(args, i)) < 0) {
      Py_CLEAR(d);
    }
  }
  nv_map *m = d ? map_from_dict(d) : NULL;
  Py_XDECREF(d);
  if (!m) {
    Py_DECREF(path);
    return NULL;
  }
  nv_status st;
  const char *p = PyBytes_AS_STRING(path);
  Py_BEGIN_ALLOW_THREADS st = compressed ? nv_savez_compressed(p, m) : nv_savez(p, m);
  Py_END_ALLOW_THREADS nv_map_free(m);
  Py_DECREF(path);
  return save_result(st);
}

static PyObject *py_savez(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  return savez_common(args, kw, false);
}
static PyObject *py_savez_compressed(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  return savez_common(args, kw, true);
}

/* One metadata value for GGUF: a string, a list of strings, or an array (0-d or 1-D). */
static int set_meta(nv_io_metadata *md, const char *key, PyObject *v) {
  nv_status st;
  if (PyUnicode_Check(v)) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(v, &len);
    if (!s) return -1;
    st = nv_io_metadata_set_string(md, key, s, (size_t)len);
  } else if (PyList_Check(v) && (PyList_GET_SIZE(v) == 0 || PyUnicode_Check(PyList_GET_ITEM(v, 0)))) {
    Py_ssize_t n = PyList_GET_SIZE(v);
    const char **ss = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ss);
    if (!ss) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < n; i++)
      if (!(ss[i] = PyUnicode_Check(PyList_GET_ITEM(v, i)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(v, i)) : NULL)) {
        PyMem_Free(ss);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "save_gguf: a list must hold strings only");
        return -1;
      }
    st = nv_io_metadata_set_string_array(md, key, ss, (size_t)n);
    PyMem_Free(ss);
  } else {
    static const nv_meta_type types[] = {
        [NV_DTYPE_BOOL] = NV_META_BOOL,     [NV_DTYPE_UINT8] = NV_META_UINT8,
        [NV_DTYPE_UINT16] = NV_META_UINT16, [NV_DTYPE_UINT32] = NV_META_UINT32,
        [NV_DTYPE_UINT64] = NV_META_UINT64, [NV_DTYPE_INT8] = NV_META_INT8,
        [NV_DTYPE_INT16] = NV_META_INT16,   [NV_DTYPE_INT32] = NV_META_INT32,
        [NV_DTYPE_INT64] = NV_META_INT64,   [NV_DTYPE_FLOAT16] = NV_META_FLOAT32,
        [NV_DTYPE_BFLOAT16] = NV_META_FLOAT32, [NV_DTYPE_FLOAT32] = NV_META_FLOAT32,
        [NV_DTYPE_FLOAT64] = NV_META_FLOAT64, [NV_DTYPE_COMPLEX64] = NV_META_FLOAT32};
    nv_array *x = nvpy_to_array(v, -1);
    if (!x) return -1;
    nv_dtype dt = nv_array_dtype(x);
    if (dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_COMPLEX64 || nv_array_ndim(x) > 1) {
      nv_release(x);
      PyErr_SetString(PyExc_ValueError, "save_gguf: metadata arrays must be 0-d or 1-D of an integer, bool, float32 or float64 dtype");
      return -1;
    }
    PyObject *r = NULL;
    if (nv_array_ndim(x) == 0) {
      PyObject *item = nvpy_item(x);
      if (!item) st = NV_ERR_INVALID_ARGUMENT;
      else if (dt == NV_DTYPE_BOOL) st = nv_io_metadata_set_bool(md, key, item == Py_True);
      else if (dt == NV_DTYPE_FLOAT32 || dt == NV_DTYPE_FLOAT64) st = nv_io_metadata_set_float(md, key, types[dt], PyFloat_AsDouble(item));
      else if (dt == NV_DTYPE_UINT64) st = nv_io_metadata_set_uint64(md, key, PyLong_AsUnsignedLongLong(item));
      else st = nv_io_metadata_set_int(md, key, types[dt], PyLong_AsLongLong(item));
      Py_XDECREF(item);
    } else {
      size_t nb = nv_array_nbytes(x);
      char *buf = PyMem_Malloc(nb ? nb : 1);
      st = buf ? nv_array_read(x, buf, nb) : NV_ERR_OUT_OF_MEMORY;
      if (st == NV_OK) st = nv_io_metadata_set_array(md, key, types[dt], buf, (size_t)nv_array_size(x));
      PyMem_Free(buf);
    }
    (void)r;
    nv_release(x);
    if (PyErr_Occurred()) return -1;
  }
  if (st != NV_OK) {
    nvpy_raise_last(st);
    return -1;
  }
  return 0;
}

static PyObject *save_dict_meta(PyObject *args, PyObject *kw, bool gguf) {
  static char *kwlist[] = {"file", "arrays", "metadata", NULL};
  PyObject *file, *arrays, *meta = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O", kwlist, &file, &arrays, &meta)) return NULL;
  PyObject *path = path_arg(file);
  if (!path) return NULL;
  nv_map *m = map_from_dict(arrays);
  nv_io_metadata *md = NULL;
  if (m && meta != Py_None) {
    md = nv_io_metadata_new();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(meta)) PyErr_SetString(PyExc_TypeError, "metadata must be a dict");
    while (md && PyDict_Check(meta) && PyDict_Next(meta, &pos, &k, &v)) {
      const char *key = PyUnicode_AsUTF8(k);
      if (!key) break;
      if (!gguf && !PyUnicode_Check(v)) {
        PyErr_SetString(PyExc_ValueError, "save_safetensors: metadata values must be strings");
        break;
      }
      if (set_meta(md, key, v) < 0) break;
    }
  }
  PyObject *r = NULL;
  if (m && !PyErr_Occurred()) {
    nv_status st;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS st = gguf ? nv_save_gguf(p, m, md) : nv_save_safetensors(p, m, md);
    Py_END_ALLOW_THREADS r = save_result(st);
  }
  nv_map_free(m);
  nv_io_metadata_free(md);
  Py_DECREF(path);
  return r;
}

static PyObject *py_save_safetensors(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  return save_dict_meta(args, kw, false);
}
static PyObject *py_save_gguf(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  return save_dict_meta(args, kw, true);
}

static PyMethodDef io_methods[] = {
    {"load", (PyCFunction)(void (*)(void))py_load, METH_VARARGS | METH_KEYWORDS,
     "load(file, format=None, return_metadata=False): arrays from .npy/.npz/.safetensors/.gguf."},
    {"save", py_save, METH_VARARGS, "save(file, arr): a .npy file."},
    {"savez", (PyCFunction)(void (*)(void))py_savez, METH_VARARGS | METH_KEYWORDS,
     "savez(file, *args, **kwargs): a .npz archive."},
    {"savez_compressed", (PyCFunction)(void (*)(void))py_savez_compressed,
     METH_VARARGS | METH_KEYWORDS, "savez_compressed(file, *args, **kwargs)."},
    {"save_safetensors", (PyCFunction)(void (*)(void))py_save_safetensors,
     METH_VARARGS | METH_KEYWORDS, "save_safetensors(file, arrays, metadata=None)."},
    {"save_gguf", (PyCFunction)(void (*)(void))py_save_gguf, METH_VARARGS | METH_KEYWORDS,
     "save_gguf(file, arrays, metadata=None)."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_io(PyObject *m) { return PyModule_AddFunctions(m, io_methods); }
