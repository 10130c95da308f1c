/* nuvec's CPython extension: custom CUDA kernels in nuvec.fast, mlx.core.fast's cuda_kernel
 * (a CudaKernel object made once, called with the launch's keywords) and
 * precompiled_cuda_kernel, over include/nuvec/fast.h. Keyword names, order and defaults are
 * MLX 0.32's; a call returns the list of outputs. */
#include <string.h>

#include "nvpy.h"

typedef struct {
  PyObject_HEAD nv_cuda_kernel *k;
  int nout;
} ck_object;

static void ck_dealloc(PyObject *self) {
  nv_fast_cuda_kernel_release(((ck_object *)self)->k);
  Py_TYPE(self)->tp_free(self);
}

/* Everything a launch points into, released by launch_free. */
typedef struct {
  nv_cuda_kernel_launch l;
  int shapes[NVPY_MAXDIM * 16];
  const int *rows[16];
  int ndims[16];
  nv_dtype dtypes[16];
  nv_template_arg targs[64];
  PyObject *tnames; /* the template names' owner (a tuple of bytes) */
  nv_vec *inputs;
} launch_args;

static void launch_free(launch_args *a) {
  Py_XDECREF(a->tnames);
  nv_vec_free(a->inputs);
}

/* A 3-tuple of ints. */
static int triple(PyObject *o, int out[3], const char *what) {
  PyObject *t = nvpy_items(o, 3, what, "a tuple of 3 ints");
  if (!t) return -1;
  if (PyTuple_GET_SIZE(t) != 3) {
    Py_DECREF(t);
    PyErr_Format(PyExc_ValueError, "%s: expected 3 ints", what);
    return -1;
  }
  for (int i = 0; i < 3; i++) {
    int64_t v;
    if (nvpy_int64_arg(PyTuple_GET_ITEM(t, i), &v, what) < 0) {
      Py_DECREF(t);
      return -1;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
      Py_DECREF(t);
      PyErr_Format(PyExc_ValueError, "%s: %lld does not fit an int", what, (long long)v);
      return -1;
    }
    out[i] = (int)v;
  }
  Py_DECREF(t);
  return 0;
}

/* The launch's common arguments: inputs, output shapes and dtypes, grid, threadgroup,
 * init_value (None: none). 0, or -1 with an exception. */
static int parse_launch(launch_args *a, const char *what, PyObject *inputs, PyObject *shapes,
                        PyObject *dtypes, PyObject *grid, PyObject *tg, PyObject *init) {
  memset(a, 0, sizeof *a);
  char w[96];
  snprintf(w, sizeof w, "%s: inputs", what);
  if (!(a->inputs = nvpy_vec_arg(inputs, w))) return -1;
  snprintf(w, sizeof w, "%s: output_shapes", what);
  PyObject *st = nvpy_items(shapes, 16, w, "a list of shapes");
  if (!st) return -1;
  snprintf(w, sizeof w, "%s: output_dtypes", what);
  PyObject *dt = nvpy_items(dtypes, 16, w, "a list of dtypes");
  if (!dt) {
    Py_DECREF(st);
    return -1;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(st);
  int rc = 0;
  if (PyTuple_GET_SIZE(dt) != n) {
    PyErr_Format(PyExc_ValueError, "%s: %zd output_shapes but %zd output_dtypes", what, n,
                 PyTuple_GET_SIZE(dt));
    rc = -1;
  }
  for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
    snprintf(w, sizeof w, "%s: output_shapes", what);
    int nd = nvpy_shape_arg(PyTuple_GET_ITEM(st, i), a->shapes + i * NVPY_MAXDIM, w);
    snprintf(w, sizeof w, "%s: output_dtypes", what);
    int d = nd < 0 ? -2 : nvpy_dtype_arg(PyTuple_GET_ITEM(dt, i), false, w);
    if (nd < 0 || d < 0) {
      rc = -1;
      break;
    }
    a->rows[i] = a->shapes + i * NVPY_MAXDIM;
    a->ndims[i] = nd;
    a->dtypes[i] = (nv_dtype)d;
  }
  Py_DECREF(st);
  Py_DECREF(dt);
  if (rc < 0) return -1;
  a->l.output_shapes = a->rows;
  a->l.output_ndims = a->ndims;
  a->l.output_dtypes = a->dtypes;
  snprintf(w, sizeof w, "%s: grid", what);
  if (triple(grid, a->l.grid, w) < 0) return -1;
  snprintf(w, sizeof w, "%s: threadgroup", what);
  if (triple(tg, a->l.threadgroup, w) < 0) return -1;
  if (init && init != Py_None) {
    double v = PyFloat_AsDouble(init);
    if (v == -1 && PyErr_Occurred()) {
      snprintf(w, sizeof w, "%s: init_value", what);
      nvpy_error_prefix(w);
      return -1;
    }
    a->l.has_init = true;
    a->l.init_value = v;
  }
  return (int)n;
}

/* template=[(name, value)]: value an int, a bool or a dtype. 0, or -1 with an exception. */
static int parse_template(launch_args *a, PyObject *tmpl) {
  if (!tmpl || tmpl == Py_None) return 0;
  PyObject *t = nvpy_items(tmpl, 64, "cuda_kernel: template", "a list of (name, value) pairs");
  if (!t) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  if (!(a->tnames = PyTuple_New(n))) {
    Py_DECREF(t);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *p = PyTuple_GET_ITEM(t, i), *name, *val;
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2 ||
        !PyUnicode_Check(name = PyTuple_GET_ITEM(p, 0))) {
      Py_DECREF(t);
      PyErr_SetString(PyExc_TypeError,
                      "cuda_kernel: template: expected (name, value) pairs with str names");
      return -1;
    }
    val = PyTuple_GET_ITEM(p, 1);
    PyObject *b = PyUnicode_AsUTF8String(name);
    if (!b) {
      Py_DECREF(t);
      return -1;
    }
    PyTuple_SET_ITEM(a->tnames, i, b);
    nv_template_arg *ta = &a->targs[i];
    ta->name = PyBytes_AS_STRING(b);
    if (PyBool_Check(val)) {
      ta->kind = NV_TEMPLATE_BOOL;
      ta->value = val == Py_True;
    } else if (PyLong_Check(val)) {
      int over;
      long v = PyLong_AsLongAndOverflow(val, &over);
      if (over || v < INT32_MIN || v > INT32_MAX) {
        Py_DECREF(t);
        PyErr_Format(PyExc_ValueError, "cuda_kernel: template argument '%s' does not fit an int",
                     ta->name);
        return -1;
      }
      ta->kind = NV_TEMPLATE_INT;
      ta->value = (int)v;
    } else {
      int d = nvpy_dtype_arg(val, false, "cuda_kernel: template");
      if (d < 0) {
        Py_DECREF(t);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "cuda_kernel: template argument '%s' must be an int, a bool or a dtype",
                     ta->name);
        return -1;
      }
      ta->kind = NV_TEMPLATE_DTYPE;
      ta->value = d;
    }
  }
  Py_DECREF(t);
  a->l.template_args = a->targs;
  a->l.ntemplate = (int)n;
  return 0;
}

/* The outputs as a list, or the error they carry raised. */
static PyObject *outputs_list(nv_status st, nv_array **outs, int n) {
  PyObject *list = st == NV_OK ? PyList_New(n) : NULL;
  if (st != NV_OK) {
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", nv_array_error(outs[0]));
    for (int i = 0; i < n; i++) nv_release(outs[i]);
    return nvpy_raise_status(st, msg);
  }
  for (int i = 0; i < n; i++) {
    PyObject *o = list ? nvpy_wrap(nvpy_unscope(outs[i])) : NULL;
    if (!o) {
      for (int j = i + (list ? 1 : 0); j < n; j++) nv_release(outs[j]);
      Py_XDECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, i, o);
  }
  return list;
}

static PyObject *ck_call(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kws[] = {"inputs",   "output_shapes", "output_dtypes", "grid",   "threadgroup",
                        "template", "init_value",    "verbose",       "stream", NULL};
  PyObject *inputs, *shapes, *dtypes, *grid, *tg, *tmpl = NULL, *init = NULL, *stream = NULL;
  int verbose = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|OOpO:cuda_kernel", kws, &inputs, &shapes,
                                   &dtypes, &grid, &tg, &tmpl, &init, &verbose, &stream))
    return NULL;
  ck_object *c = (ck_object *)self;
  launch_args a;
  int n = parse_launch(&a, "cuda_kernel", inputs, shapes, dtypes, grid, tg, init);
  if (n >= 0 && n != c->nout) {
    PyErr_Format(PyExc_ValueError, "cuda_kernel: %d output_shapes for a kernel of %d outputs", n,
                 c->nout);
    n = -1;
  }
  if (n < 0 || parse_template(&a, tmpl) < 0) {
    launch_free(&a);
    return NULL;
  }
  a.l.verbose = verbose;
  int entered = nvpy_stream_enter(stream, "cuda_kernel");
  if (entered < 0) {
    launch_free(&a);
    return NULL;
  }
  nv_array *outs[16];
  nv_status st = nv_fast_cuda_kernel_call(c->k, (const nv_array *const *)nv_vec_data(a.inputs),
                                          (int)nv_vec_size(a.inputs), &a.l, outs);
  if (entered) nv_stream_exit();
  launch_free(&a);
  return outputs_list(st, outs, c->nout);
}

static PyTypeObject ck_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.fast.CudaKernel",
    .tp_basicsize = sizeof(ck_object),
    .tp_dealloc = ck_dealloc,
    .tp_call = ck_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A custom CUDA kernel made by nuvec.fast.cuda_kernel: call it with inputs, "
              "output_shapes, output_dtypes, grid, threadgroup, template, init_value, verbose "
              "and stream (keywords); returns the list of outputs.",
};

/* A list of str as UTF-8 pointers into the returned tuple of bytes (NULL with an exception). */
static PyObject *names_arg(PyObject *o, const char *what, const char **out, int max, int *n) {
  PyObject *t = nvpy_items(o, max, what, "a list of str");
  if (!t) return NULL;
  *n = (int)PyTuple_GET_SIZE(t);
  PyObject *b = PyTuple_New(*n);
  for (int i = 0; b && i < *n; i++) {
    PyObject *s = PyTuple_GET_ITEM(t, i);
    PyObject *e = PyUnicode_Check(s) ? PyUnicode_AsUTF8String(s) : NULL;
    if (!e) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: expected a list of str", what);
      Py_CLEAR(b);
      break;
    }
    PyTuple_SET_ITEM(b, i, e);
    out[i] = PyBytes_AS_STRING(e);
  }
  Py_DECREF(t);
  return b;
}

static PyObject *py_cuda_kernel(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  static char *kws[] = {"name",   "input_names",           "output_names",  "source",
                        "header", "ensure_row_contiguous", "shared_memory", NULL};
  const char *name, *source, *header = "";
  PyObject *in_o, *out_o;
  int contiguous = 1, shared = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "sOOs|spi:cuda_kernel", kws, &name, &in_o, &out_o,
                                   &source, &header, &contiguous, &shared))
    return NULL;
  const char *ins[64], *outs[64];
  int nin = 0, nout = 0;
  PyObject *bi = names_arg(in_o, "cuda_kernel: input_names", ins, 64, &nin);
  PyObject *bo = bi ? names_arg(out_o, "cuda_kernel: output_names", outs, 64, &nout) : NULL;
  if (!bo) {
    Py_XDECREF(bi);
    return NULL;
  }
  nv_cuda_kernel *k = nv_fast_cuda_kernel(name, ins, nin, outs, nout, source, header,
                                          contiguous, shared);
  Py_DECREF(bi);
  Py_DECREF(bo);
  if (!k) return nvpy_raise_last(NV_ERR_INVALID_ARGUMENT);
  ck_object *c = PyObject_New(ck_object, &ck_type);
  if (!c) {
    nv_fast_cuda_kernel_release(k);
    return NULL;
  }
  c->k = k;
  c->nout = nout;
  return (PyObject *)c;
}

static PyObject *py_precompiled(PyObject *mod, PyObject *args, PyObject *kw) {
  (void)mod;
  static char *kws[] = {"name",   "compiled_source", "inputs",        "output_shapes",
                        "output_dtypes", "scalars",  "grid",          "threadgroup",
                        "shared_memory", "init_value", "ensure_row_contiguous", "stream", NULL};
  const char *name = NULL;
  Py_buffer image = {0};
  PyObject *inputs = NULL, *shapes = NULL, *dtypes = NULL, *scalars_o = NULL, *grid = NULL,
           *tg = NULL, *init = NULL, *stream = NULL;
  int shared = 0, contiguous = 0;
  /* Keyword-only, as MLX's; PyArg takes keyword-only arguments as optional ones only. */
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$sy*OOOOOOiOpO:precompiled_cuda_kernel", kws,
                                   &name, &image, &inputs, &shapes, &dtypes, &scalars_o, &grid,
                                   &tg, &shared, &init, &contiguous, &stream))
    return NULL;
  if (!name || !image.obj || !inputs || !shapes || !dtypes || !scalars_o || !grid || !tg) {
    if (image.obj) PyBuffer_Release(&image);
    PyErr_SetString(PyExc_TypeError,
                    "precompiled_cuda_kernel: name, compiled_source, inputs, output_shapes, "
                    "output_dtypes, scalars, grid and threadgroup are required");
    return NULL;
  }
  launch_args a;
  nv_kernel_scalar sc[32];
  int nsc = 0;
  int n = parse_launch(&a, "precompiled_cuda_kernel", inputs, shapes, dtypes, grid, tg, init);
  PyObject *t = n < 0 ? NULL
                      : nvpy_items(scalars_o, 32, "precompiled_cuda_kernel: scalars",
                                   "a list of bool, int or float");
  if (t) {
    nsc = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < nsc && n >= 0; i++) {
      PyObject *s = PyTuple_GET_ITEM(t, i);
      if (PyBool_Check(s)) {
        sc[i] = (nv_kernel_scalar){NV_SCALAR_BOOL, s == Py_True};
      } else if (PyLong_Check(s)) {
        int over;
        long v = PyLong_AsLongAndOverflow(s, &over);
        if (over || v < INT32_MIN || v > INT32_MAX) {
          PyErr_Format(PyExc_ValueError, "precompiled_cuda_kernel: scalar %d does not fit an int",
                       i);
          n = -1;
        }
        sc[i] = (nv_kernel_scalar){NV_SCALAR_INT, (double)v};
      } else if (PyFloat_Check(s)) {
        sc[i] = (nv_kernel_scalar){NV_SCALAR_FLOAT, PyFloat_AS_DOUBLE(s)};
      } else {
        PyErr_Format(PyExc_TypeError,
                     "precompiled_cuda_kernel: scalar %d must be a bool, an int or a float", i);
        n = -1;
      }
    }
    Py_DECREF(t);
  } else {
    n = -1;
  }
  int entered = n >= 0 ? nvpy_stream_enter(stream, "precompiled_cuda_kernel") : -1;
  if (entered < 0) {
    PyBuffer_Release(&image);
    launch_free(&a);
    return NULL;
  }
  nv_array *outs[16];
  nv_status st = nv_fast_precompiled_cuda_kernel(
      name, image.buf, (size_t)image.len, (const nv_array *const *)nv_vec_data(a.inputs),
      (int)nv_vec_size(a.inputs), n, sc, nsc, &a.l, shared, contiguous, outs);
  if (entered) nv_stream_exit();
  PyBuffer_Release(&image);
  launch_free(&a);
  if (n < 1) return nvpy_raise_last(st); /* no outputs: only the status came back */
  return outputs_list(st, outs, n);
}

static PyMethodDef ck_methods[] = {
    {"cuda_kernel", (PyCFunction)(void (*)(void))py_cuda_kernel, METH_VARARGS | METH_KEYWORDS,
     "cuda_kernel(name, input_names, output_names, source, header='', "
     "ensure_row_contiguous=True, shared_memory=0) -> CudaKernel\n\n"
     "A custom CUDA kernel from the body `source` (MLX's mx.fast.cuda_kernel), compiled by "
     "NVRTC for sm_90 at its first call and cached. Runs on the GPU only."},
    {"precompiled_cuda_kernel", (PyCFunction)(void (*)(void))py_precompiled,
     METH_VARARGS | METH_KEYWORDS,
     "precompiled_cuda_kernel(*, name, compiled_source, inputs, output_shapes, output_dtypes, "
     "scalars, grid, threadgroup, shared_memory=0, init_value=None, "
     "ensure_row_contiguous=False, stream=None) -> list[array]\n\n"
     "Runs the extern \"C\" kernel `name` of a PTX or CUBIN image: its parameters are the "
     "inputs' and outputs' pointers, then the scalars (bool, int32, float32). GPU only."},
    {NULL, NULL, 0, NULL},
};

int nvpy_init_cuda_kernel(PyObject *fast) {
  if (PyType_Ready(&ck_type) < 0) return -1;
  Py_INCREF(&ck_type);
  if (PyModule_AddObject(fast, "CudaKernel", (PyObject *)&ck_type) < 0) {
    Py_DECREF(&ck_type);
    return -1;
  }
  return PyModule_AddFunctions(fast, ck_methods);
}
