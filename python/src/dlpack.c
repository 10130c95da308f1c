/* nuvec's CPython extension: DLPack — __dlpack__ exports (GPU-resident arrays as CUDA memory) an array's data without
 * a copy (the capsule holds a reference to the array), and from_dlpack views another
 * library's tensor without a copy (strided tensors through as_strided over their span). The
 * structures are DLPack's (version 0.8 ABI, the unversioned "dltensor" capsule). */
#include <stdlib.h>
#include <string.h>

#include "nvpy.h"

typedef struct {
  int32_t device_type;
  int32_t device_id;
} dl_device;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} dl_dtype;

typedef struct {
  void *data;
  dl_device device;
  int32_t ndim;
  dl_dtype dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
  dl_tensor t;
  void *ctx;
  void (*deleter)(struct dl_managed *self);
} dl_managed;

enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_COMPLEX = 5, DL_BOOL = 6 };
enum { DL_CPU = 1, DL_CUDA = 2 };

static const dl_dtype dl_types[NV_DTYPE_COUNT] = {
    [NV_DTYPE_BOOL] = {DL_BOOL, 8, 1},      [NV_DTYPE_UINT8] = {DL_UINT, 8, 1},
    [NV_DTYPE_UINT16] = {DL_UINT, 16, 1},   [NV_DTYPE_UINT32] = {DL_UINT, 32, 1},
    [NV_DTYPE_UINT64] = {DL_UINT, 64, 1},   [NV_DTYPE_INT8] = {DL_INT, 8, 1},
    [NV_DTYPE_INT16] = {DL_INT, 16, 1},     [NV_DTYPE_INT32] = {DL_INT, 32, 1},
    [NV_DTYPE_INT64] = {DL_INT, 64, 1},     [NV_DTYPE_FLOAT16] = {DL_FLOAT, 16, 1},
    [NV_DTYPE_BFLOAT16] = {DL_BFLOAT, 16, 1}, [NV_DTYPE_FLOAT32] = {DL_FLOAT, 32, 1},
    [NV_DTYPE_FLOAT64] = {DL_FLOAT, 64, 1}, [NV_DTYPE_COMPLEX64] = {DL_COMPLEX, 64, 1}};

static void export_deleter(dl_managed *m) {
  nv_release(m->ctx);
  free(m);
}

static void capsule_destructor(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: the consumer deletes it */
  dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
  if (m && m->deleter) m->deleter(m);
}

PyObject *nvpy_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *maxv = Py_None, *dev = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream, &maxv, &dev, &copy))
    return NULL;
  nv_array *a = NVPY_A(self);
  int nd = nv_array_ndim(a);
  dl_managed *m = calloc(1, sizeof *m + 2 * (size_t)(nd ? nd : 1) * sizeof(int64_t));
  if (!m) return PyErr_NoMemory();
  const void *data = NULL;
  nv_device where = nv_cpu();
  nv_status st;
  /* GPU-resident data is exported as CUDA memory (kDLCUDA) once the GPU work writing it has
   * finished, so any consumer stream may read it. */
  Py_BEGIN_ALLOW_THREADS st = nv_array_device_data(a, &where, &data);
  Py_END_ALLOW_THREADS if (st != NV_OK) {
    free(m);
    return nvpy_raise_last(st);
  }
  static char empty[16];
  int64_t *dims = (int64_t *)(m + 1);
  for (int i = 0; i < nd; i++) {
    dims[i] = nv_array_shape(a)[i];
    dims[nd + i] = nv_array_strides(a)[i];
  }
  dl_device dd = {where.type == NV_DEVICE_GPU ? DL_CUDA : DL_CPU, where.type == NV_DEVICE_GPU ? where.index : 0};
  m->t = (dl_tensor){data ? (void *)data : empty, dd, nd, dl_types[nv_array_dtype(a)],
                     dims, dims + nd, 0};
  m->ctx = nv_retain(a);
  m->deleter = export_deleter;
  PyObject *cap = PyCapsule_New(m, "dltensor", capsule_destructor);
  if (!cap) export_deleter(m);
  return cap;
}

PyObject *nvpy_dlpack_device(PyObject *self, PyObject *unused) {
  (void)unused;
  const void *data = NULL;
  nv_device where = nv_cpu();
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = nv_array_device_data(NVPY_A(self), &where, &data);
  Py_END_ALLOW_THREADS if (st != NV_OK) return nvpy_raise_last(st);
  if (where.type == NV_DEVICE_GPU) return Py_BuildValue("(ii)", DL_CUDA, where.index);
  return Py_BuildValue("(ii)", DL_CPU, 0);
}

static void import_destroy(void *ctx) {
  dl_managed *m = ctx;
  if (m->deleter) m->deleter(m);
}

/* The array of a DLPack capsule's tensor, viewing its memory. */
static PyObject *from_capsule(PyObject *cap) {
  dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
  if (!m) return NULL;
  dl_tensor *t = &m->t;
  if (t->device.device_type != DL_CPU)
    return nvpy_raise_status(NV_ERR_UNSUPPORTED, "from_dlpack: only CPU tensors are supported");
  int dt = -1;
  for (int i = 0; i < NV_DTYPE_COUNT; i++)
    if (dl_types[i].code == t->dtype.code && dl_types[i].bits == t->dtype.bits && t->dtype.lanes == 1) dt = i;
  if (dt < 0 && t->dtype.code == DL_UINT && t->dtype.bits == 8) dt = NV_DTYPE_UINT8;
  if (dt < 0) return nvpy_raise_status(NV_ERR_UNSUPPORTED, "from_dlpack: unsupported dtype");
  if (t->ndim < 0 || t->ndim > NVPY_MAXDIM)
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "from_dlpack: too many dimensions");
  int shape[NVPY_MAXDIM];
  int64_t strides[NVPY_MAXDIM], lo = 0, hi = 0, size = 1;
  bool row = true;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] < 0 || t->shape[i] > INT32_MAX)
      return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "from_dlpack: a dimension is negative or too large");
    shape[i] = (int)t->shape[i];
    strides[i] = t->strides ? t->strides[i] : expect;
    if (shape[i] != 1 && strides[i] != expect) row = false;
    expect *= shape[i];
    size *= shape[i];
    /* The span the strides reach, checked: a producer's strides are not trusted. */
    int64_t reach;
    bool overflow = __builtin_mul_overflow(strides[i], (int64_t)(shape[i] > 0 ? shape[i] - 1 : 0), &reach);
    overflow = overflow || __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
    if (overflow || hi >= INT32_MAX || lo <= -INT32_MAX || hi - lo >= INT32_MAX)
      return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "from_dlpack: the strides reach too far");
  }
  char *data = (char *)t->data + t->byte_offset;
  size_t w = nv_dtype_size((nv_dtype)dt);
  if (PyCapsule_SetName(cap, "used_dltensor") < 0) return NULL;
  nv_array *x;
  if (row || size == 0) {
    x = nv_array_from_data_nocopy(data, shape, t->ndim, (nv_dtype)dt, import_destroy, m);
  } else {
    /* A strided tensor: a flat view of its span, then the strides over it. */
    int span = (int)(hi - lo + 1);
    nv_array *flat = nv_array_from_data_nocopy(data + lo * (int64_t)w, &span, 1, (nv_dtype)dt,
                                               import_destroy, m);
    x = nv_as_strided(flat, shape, t->ndim, strides, -lo);
    nv_release(flat);
  }
  return nvpy_wrap(x);
}

PyObject *nvpy_dlpack_to_array(PyObject *o) {
  PyObject *cap = PyObject_CallMethod(o, "__dlpack__", NULL);
  if (!cap) return NULL;
  PyObject *r = from_capsule(cap);
  Py_DECREF(cap);
  return r;
}

/* from_dlpack(x, /, *, copy=None) as mlx.core's: copy None or False views the tensor (the CPU
 * tensors it takes are always shareable), True returns a copy of it. */
static PyObject *py_from_dlpack(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  static char *kwlist[] = {"", "copy", NULL};
  PyObject *o, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O:from_dlpack", kwlist, &o, &copy)) return NULL;
  int want_copy = 0;
  if (copy != Py_None && (want_copy = PyObject_IsTrue(copy)) < 0) return NULL;
  PyObject *r = PyCapsule_CheckExact(o) ? from_capsule(o) : nvpy_dlpack_to_array(o);
  if (!r || !want_copy) return r;
  /* Evaluated now: the copy must hold the tensor's values of this moment, not of a later
   * read of memory its owner may have changed. */
  nv_array *c = nv_copy(NVPY_A(r));
  Py_DECREF(r);
  nv_status st = c ? nv_eval1(c) : NV_OK;
  if (st != NV_OK) {
    nv_release(c);
    return nvpy_raise_last(st);
  }
  return nvpy_wrap(c);
}

static PyMethodDef dlpack_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))py_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(x, /, *, copy=None): an array viewing a DLPack tensor (copy=True: a copy)."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_dlpack(PyObject *m) { return PyModule_AddFunctions(m, dlpack_methods); }
