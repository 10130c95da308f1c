/* nuvec's CPython extension: files as MLX's load/save functions — .npy, .npz, safetensors
 * and GGUF — with the GIL released while the library reads or writes. A file is a path (str,
 * bytes, os.PathLike such as pathlib.Path) or a binary file object: anything with read() to
 * load from, anything with write() to save to. load returns one array for .npy, else a dict
 * (and, with return_metadata=True, the metadata as MLX gives it: strings, string lists, and
 * numbers or number lists as arrays). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvpy.h"

/* ---- File arguments: a path or a file object ---- */

/* `o` as a path (str, bytes or os.PathLike: `*path` a new bytes object), or a file object
 * with the method `method` ("read" or "write"; `*path` NULL). 0, or -1 with MLX's ValueError
 * for anything else. */
static int file_arg(PyObject *o, const char *method, const char *op, PyObject **path) {
  *path = NULL;
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyObject_HasAttrString(o, "__fspath__"))
    return PyUnicode_FSConverter(o, path) ? 0 : -1;
  if (PyObject_HasAttrString(o, method)) return 0;
  PyErr_Format(PyExc_ValueError, "[%s] Input must be a file-like object%s, or string", op,
               strcmp(method, "read") ? "" : " opened in binary mode");
  return -1;
}

/* The bytes a read() call returned, as a bytes object (a bytearray or memoryview is copied);
 * a str means a text-mode file: TypeError. Steals `r`. */
static PyObject *read_result(PyObject *r) {
  if (!r || PyBytes_Check(r)) return r;
  PyObject *b = PyObject_CheckBuffer(r) && !PyUnicode_Check(r) ? PyBytes_FromObject(r) : NULL;
  if (!b && !PyErr_Occurred())
    PyErr_Format(PyExc_TypeError,
                 "[load] Input must be a file-like object opened in binary mode (read() gave %s)",
                 Py_TYPE(r)->tp_name);
  Py_DECREF(r);
  return b;
}

/* Up to `n` bytes from the file object (fewer only at its end), read in chunks that grow with
 * what has arrived (64 KiB, then doubling up to 64 MiB): a header that declares more bytes
 * than the stream holds ends at the stream's end, having allocated about what was there, and
 * the loader reports the shortfall. A read() that returns more than it was asked for is an
 * error, as the bytes after an array belong to whatever the stream holds next. */
static PyObject *read_exact(PyObject *obj, Py_ssize_t n) {
  enum { FIRST = 1 << 16, MOST = 1 << 26 };
  PyObject *all = PyBytes_FromStringAndSize(NULL, n < FIRST ? n : FIRST);
  Py_ssize_t got = 0;
  while (all && got < n) {
    Py_ssize_t want = n - got, step = got < FIRST ? FIRST : got < MOST ? got : MOST;
    if (want > step) want = step;
    PyObject *b = read_result(PyObject_CallMethod(obj, "read", "n", want));
    Py_ssize_t k = b ? PyBytes_GET_SIZE(b) : 0;
    if (b && k > want)
      PyErr_Format(PyExc_OSError, "[load] the file object's read(%zd) returned %zd bytes", want, k);
    Py_ssize_t cap = PyBytes_GET_SIZE(all), grown = cap < n - cap ? 2 * cap : n;
    if (!b || PyErr_Occurred() || (got + k > cap && _PyBytes_Resize(&all, grown) < 0)) {
      Py_XDECREF(b);
      Py_CLEAR(all);
      break;
    }
    memcpy(PyBytes_AS_STRING(all) + got, PyBytes_AS_STRING(b), (size_t)k);
    got += k;
    Py_DECREF(b);
    if (k == 0) break;
  }
  if (all && got < PyBytes_GET_SIZE(all)) _PyBytes_Resize(&all, got);
  return all;
}

/* The data bytes an .npy header declares (its dtype's size times its shape's product), or -1
 * when the header cannot be read so (the loader then reports what is wrong with it). Headers
 * above 64 KiB are not evaluated (NumPy caps them at 10 000 bytes for the same reason: the
 * work of ast.literal_eval grows with what the file says). */
static Py_ssize_t npy_data_size(PyObject *header) {
  if (PyBytes_GET_SIZE(header) > 1 << 16) return -1;
  PyObject *ast = PyImport_ImportModule("ast");
  PyObject *s = PyUnicode_DecodeLatin1(PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header), NULL);
  PyObject *d = ast && s ? PyObject_CallMethod(ast, "literal_eval", "O", s) : NULL;
  Py_XDECREF(ast);
  Py_XDECREF(s);
  PyObject *descr = d && PyDict_Check(d) ? PyDict_GetItemString(d, "descr") : NULL;
  PyObject *shape = d && PyDict_Check(d) ? PyDict_GetItemString(d, "shape") : NULL;
  Py_ssize_t n = -1;
  const char *ds = descr && PyUnicode_Check(descr) ? PyUnicode_AsUTF8(descr) : NULL;
  if (ds && shape && PyTuple_Check(shape)) {
    const char *digits = ds + strcspn(ds, "0123456789");
    long long item = *digits ? strtoll(digits, NULL, 10) : -1; /* LLONG_MAX when too long */
    n = item >= 0 && item <= PY_SSIZE_T_MAX ? (Py_ssize_t)item : -1;
    for (Py_ssize_t i = 0; n >= 0 && i < PyTuple_GET_SIZE(shape); i++) {
      long long k = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
      n = k < 0 || (k && n > PY_SSIZE_T_MAX / k) ? -1 : n * (Py_ssize_t)k;
    }
  }
  Py_XDECREF(d);
  PyErr_Clear();
  return n;
}

/* One .npy array from a file object: its prefix, header and data and nothing after them, so
 * arrays saved one after another to one stream load one after another (as NumPy's). */
static PyObject *read_npy(PyObject *obj) {
  PyObject *all = read_exact(obj, 10);
  if (!all || PyBytes_GET_SIZE(all) < 10 || memcmp(PyBytes_AS_STRING(all), "\x93NUMPY", 6))
    return all; /* not an .npy file: the loader says so */
  const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(all);
  size_t hlen = p[8] | (size_t)p[9] << 8;
  if (p[6] >= 2) { /* versions 2 and 3: a 4-byte header length */
    PyBytes_ConcatAndDel(&all, read_exact(obj, 2));
    if (!all || PyBytes_GET_SIZE(all) < 12) return all;
    p = (const unsigned char *)PyBytes_AS_STRING(all);
    hlen |= (size_t)p[10] << 16 | (size_t)p[11] << 24;
  }
  PyObject *header = read_exact(obj, (Py_ssize_t)hlen);
  Py_ssize_t n = header ? npy_data_size(header) : -1;
  PyBytes_ConcatAndDel(&all, header);
  if (!all) return NULL;
  PyBytes_ConcatAndDel(&all, n >= 0 ? read_exact(obj, n)
                                    : read_result(PyObject_CallMethod(obj, "read", NULL)));
  return all;
}

/* d[key] = v for a name read from a file. GGUF and zip names are bytes that need not be
 * UTF-8: those decode with backslash escapes (as the error messages do), and two names that
 * decode to the same str are an error rather than one array silently replacing another. */
static int set_named(PyObject *d, const char *key, PyObject *v) {
  PyObject *k = PyUnicode_DecodeUTF8(key, (Py_ssize_t)strlen(key), "backslashreplace");
  int r = k ? PyDict_Contains(d, k) : -1;
  if (r > 0)
    PyErr_Format(PyExc_OSError, "[load] two names in the file read as the same str %R", k);
  r = r == 0 ? PyDict_SetItem(d, k, v) : -1;
  Py_XDECREF(k);
  return r;
}

static PyObject *dict_from_map(const nv_map *m) {
  PyObject *d = PyDict_New();
  for (size_t i = 0; d && i < nv_map_size(m); i++) {
    PyObject *a = nvpy_wrap(nv_retain(nv_map_value(m, i)));
    if (!a || set_named(d, nv_map_key(m, i), a) < 0) Py_CLEAR(d);
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
    if (!v || set_named(d, key, v) < 0) Py_CLEAR(d);
    Py_XDECREF(v);
  }
  return d;
}

enum { FMT_NPY, FMT_NPZ, FMT_SAFETENSORS, FMT_GGUF, FMT_COUNT };
static const char *const fmt_names[FMT_COUNT] = {"npy", "npz", "safetensors", "gguf"};

/* The format of a load: `format`, else the extension of the path or of the file object's
 * `name`. A FMT_ value, or -1 with MLX's ValueError. */
static int load_format(PyObject *format, PyObject *path, PyObject *file) {
  PyObject *name = NULL;
  const char *s = NULL;
  if (format != Py_None) {
    if (!PyUnicode_Check(format)) {
      PyErr_Format(PyExc_TypeError, "[load] format must be a str, got %s", Py_TYPE(format)->tp_name);
      return -1;
    }
    s = PyUnicode_AsUTF8(format);
  } else {
    const char *p = NULL;
    if (path) p = PyBytes_AS_STRING(path);
    else if ((name = PyObject_GetAttrString(file, "name")) && PyUnicode_Check(name))
      p = PyUnicode_AsUTF8(name);
    PyErr_Clear();
    const char *dot = p ? strrchr(p, '.') : NULL;
    if (dot && !strchr(dot, '/')) s = dot + 1;
    if (!s) {
      Py_XDECREF(name);
      PyErr_Format(PyExc_ValueError, "[load] Could not infer file format from extension%s",
                   path ? "" : " (a file object without a name: pass format=)");
      return -1;
    }
  }
  int k = 0;
  while (s && k < FMT_COUNT && strcmp(s, fmt_names[k])) k++;
  if (s && k == FMT_COUNT) PyErr_Format(PyExc_ValueError, "[load] Unknown file format %s", s);
  Py_XDECREF(name);
  return s && k < FMT_COUNT ? k : -1;
}

static PyObject *py_load(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  static char *kwlist[] = {"file", "format", "return_metadata", "stream", NULL};
  PyObject *file, *format = Py_None, *stream = Py_None, *path;
  int ret_meta = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op$O:load", kwlist, &file, &format, &ret_meta, &stream))
    return NULL;
  if (file_arg(file, "read", "load", &path) < 0) return NULL;
  int fmt = load_format(format, path, file);
  if (fmt >= 0 && ret_meta && (fmt == FMT_NPY || fmt == FMT_NPZ)) {
    PyErr_Format(PyExc_ValueError, "[load] metadata not supported for format %s", fmt_names[fmt]);
    fmt = -1;
  }
  /* A file object is read here, with the GIL; the library parses (and copies) its bytes. */
  PyObject *data = NULL;
  if (fmt >= 0 && !path)
    data = fmt == FMT_NPY ? read_npy(file) : read_result(PyObject_CallMethod(file, "read", NULL));
  if (fmt < 0 || (!path && !data)) {
    Py_XDECREF(path);
    return NULL;
  }
  nv_map *arrays = NULL;
  nv_io_metadata *meta = NULL;
  nv_array *one = NULL;
  nv_status st;
  const char *p = path ? PyBytes_AS_STRING(path) : NULL;
  const void *buf = data ? PyBytes_AS_STRING(data) : NULL;
  size_t size = data ? (size_t)PyBytes_GET_SIZE(data) : 0;
  Py_BEGIN_ALLOW_THREADS switch (fmt) {
  case FMT_NPY: st = p ? nv_load_npy(p, &one) : nv_load_npy_from_memory(buf, size, &one); break;
  case FMT_NPZ: st = p ? nv_load_npz(p, &arrays) : nv_load_npz_from_memory(buf, size, &arrays); break;
  case FMT_SAFETENSORS:
    st = p ? nv_load_safetensors(p, &arrays, &meta)
           : nv_load_safetensors_from_memory(buf, size, &arrays, &meta);
    break;
  default: /* as MLX: Q4_0 / Q4_1 / Q8_0 as affine (weight, scales, biases) */
    st = p ? nv_load_gguf(p, NV_GGUF_AFFINE, &arrays, &meta)
           : nv_load_gguf_from_memory(buf, size, NV_GGUF_AFFINE, &arrays, &meta);
  }
  Py_END_ALLOW_THREADS Py_XDECREF(path);
  Py_XDECREF(data);
  if (st != NV_OK) return nvpy_raise_last(st);
  if (fmt == FMT_NPY) return nvpy_wrap(one);
  PyObject *r = dict_from_map(arrays);
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

/* ---- Saving ---- */

enum { SAVE_NPY, SAVE_NPZ, SAVE_NPZ_COMPRESSED, SAVE_SAFETENSORS, SAVE_GGUF };
static const char *const save_ext[] = {".npy", ".npz", ".npz", ".safetensors", ".gguf"};

/* What one save writes: an array (npy) or a map and its metadata. */
typedef struct {
  int kind;
  nv_array *x;
  nv_map *m;
  nv_io_metadata *md;
} save_job;

static nv_status run_save(const save_job *j, const char *path) {
  switch (j->kind) {
  case SAVE_NPY: return nv_save(path, j->x);
  case SAVE_NPZ: return nv_savez(path, j->m);
  case SAVE_NPZ_COMPRESSED: return nv_savez_compressed(path, j->m);
  case SAVE_SAFETENSORS: return nv_save_safetensors(path, j->m, j->md);
  default: return nv_save_gguf(path, j->m, j->md);
  }
}

/* Copies the file at `path` to the file object `obj` through its write(), in chunks (a
 * write() that returns a count may take part of a chunk; one returning None takes it all). */
static int copy_to_object(const char *path, PyObject *obj) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    return -1;
  }
  enum { CHUNK = 1 << 24 };
  int rc = 0;
  for (;;) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, CHUNK);
    size_t n = b ? fread(PyBytes_AS_STRING(b), 1, CHUNK, f) : 0;
    if (!b || (n < CHUNK && _PyBytes_Resize(&b, (Py_ssize_t)n) < 0)) {
      rc = -1;
      break;
    }
    Py_ssize_t done = 0;
    while (rc == 0 && done < (Py_ssize_t)n) {
      PyObject *part = done ? PySequence_GetSlice(b, done, (Py_ssize_t)n) : (Py_INCREF(b), b);
      PyObject *r = part ? PyObject_CallMethod(obj, "write", "O", part) : NULL;
      Py_XDECREF(part);
      if (!r) rc = -1;
      else if (r == Py_None) done = (Py_ssize_t)n;
      else {
        Py_ssize_t w = PyLong_AsSsize_t(r);
        if (w <= 0) {
          if (!PyErr_Occurred())
            PyErr_SetString(PyExc_OSError, "[save] the file object's write() wrote nothing");
          rc = -1;
        }
        done += w;
      }
      Py_XDECREF(r);
    }
    Py_DECREF(b);
    if (rc < 0 || n < CHUNK) break;
  }
  if (rc == 0 && ferror(f)) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    rc = -1;
  }
  fclose(f);
  return rc;
}

/* A fresh private directory under $TMPDIR (or /tmp); PyMem-allocated, NULL with OSError. */
static char *temp_dir(void) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t n = strlen(base) + 32;
  char *d = PyMem_Malloc(n);
  if (!d) return (char *)PyErr_NoMemory();
  snprintf(d, n, "%s/nuvec-XXXXXX", base);
  if (!mkdtemp(d)) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, d);
    PyMem_Free(d);
    return NULL;
  }
  return d;
}

/* Runs a save to `file`, a path or a file object with write(). The C library writes files by
 * path, so a file object gets a file written in a private temporary directory and copied. */
static PyObject *save_file(PyObject *file, const char *op, const save_job *j) {
  PyObject *path;
  if (file_arg(file, "write", op, &path) < 0) return NULL;
  nv_status st;
  if (path) {
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS st = run_save(j, p);
    Py_END_ALLOW_THREADS Py_DECREF(path);
    if (st != NV_OK) return nvpy_raise_last(st);
    Py_RETURN_NONE;
  }
  char *dir = temp_dir();
  if (!dir) return NULL;
  size_t n = strlen(dir) + 32;
  char *p = PyMem_Malloc(n);
  if (!p) {
    rmdir(dir);
    PyMem_Free(dir);
    return PyErr_NoMemory();
  }
  snprintf(p, n, "%s/file%s", dir, save_ext[j->kind]);
  Py_BEGIN_ALLOW_THREADS st = run_save(j, p);
  Py_END_ALLOW_THREADS int rc = st != NV_OK ? (nvpy_raise_last(st), -1) : copy_to_object(p, file);
  unlink(p);
  rmdir(dir);
  PyMem_Free(p);
  PyMem_Free(dir);
  if (rc < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *py_save(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *file, *arr;
  if (!PyArg_ParseTuple(args, "OO:save", &file, &arr)) return NULL;
  save_job j = {SAVE_NPY, nvpy_to_array(arr, -1), NULL, NULL};
  if (!j.x) return NULL;
  PyObject *r = save_file(file, "save", &j);
  nv_release(j.x);
  return r;
}

static PyObject *savez_common(PyObject *args, PyObject *kw, bool compressed) {
  if (PyTuple_GET_SIZE(args) < 1) {
    PyErr_SetString(PyExc_TypeError, "savez: expected a file");
    return NULL;
  }
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
  save_job j = {compressed ? SAVE_NPZ_COMPRESSED : SAVE_NPZ, NULL, d ? map_from_dict(d) : NULL, NULL};
  Py_XDECREF(d);
  if (!j.m) return NULL;
  PyObject *r = save_file(PyTuple_GET_ITEM(args, 0), compressed ? "savez_compressed" : "savez", &j);
  nv_map_free(j.m);
  return r;
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
  save_job j = {gguf ? SAVE_GGUF : SAVE_SAFETENSORS, NULL, map_from_dict(arrays), NULL};
  if (j.m && meta != Py_None) {
    j.md = nv_io_metadata_new();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    if (!j.md) PyErr_NoMemory();
    else if (!PyDict_Check(meta)) PyErr_SetString(PyExc_TypeError, "metadata must be a dict");
    while (j.md && PyDict_Check(meta) && PyDict_Next(meta, &pos, &k, &v)) {
      const char *key = PyUnicode_AsUTF8(k);
      if (!key) break;
      if (!gguf && !PyUnicode_Check(v)) {
        PyErr_SetString(PyExc_ValueError, "save_safetensors: metadata values must be strings");
        break;
      }
      if (set_meta(j.md, key, v) < 0) break;
    }
  }
  PyObject *r = j.m && !PyErr_Occurred() ? save_file(file, gguf ? "save_gguf" : "save_safetensors", &j) : NULL;
  nv_map_free(j.m);
  nv_io_metadata_free(j.md);
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
     "load(file, format=None, return_metadata=False): arrays from .npy/.npz/.safetensors/.gguf "
     "(a path or a binary file object)."},
    {"save", py_save, METH_VARARGS, "save(file, arr): a .npy file (a path or a file object)."},
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
