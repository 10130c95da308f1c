/* nuvec's CPython extension: the submodule nuvec.distributed, mlx.core.distributed over
 * include/nuvec/distributed.h with MLX's names and keywords: Group (rank, size, split, and
 * nuvec's close and health), init(strict=False, backend='any'), is_available, all_sum,
 * all_max, all_min, all_gather, sum_scatter, send, recv, recv_like (each with group=None and
 * stream=None keywords), and sum_gradients. A Group prints as "Group(rank r of s)" and is
 * hashed and compared by (id, rank, size), fixed when it is made (a closed group keeps its
 * hash), so that it is a static argument of compile: a compiled function called with another
 * group is another trace (D38). Each collective's errors name the Python line that built it
 * (D34: "(all_sum called at file.py:12)"), at build and at evaluation. */
#define NV_DIST_NO_CALLER_LOCATION /* the Python caller's place is passed instead */
#include "nvpy.h"

/* Passes the calling Python frame's file and line to the next collective builder. */
static void python_caller(void) {
  PyFrameObject *f = PyEval_GetFrame(); /* borrowed; NULL outside Python code */
  if (!f) {
    nv_dist_set_caller(NULL, 0);
    return;
  }
  PyCodeObject *code = PyFrame_GetCode(f);
  PyObject *name = code ? PyObject_GetAttrString((PyObject *)code, "co_filename") : NULL;
  const char *file = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
  if (!file) PyErr_Clear();
  nv_dist_set_caller(file, PyFrame_GetLineNumber(f));
  Py_XDECREF(name);
  Py_XDECREF(code);
}

typedef struct {
  PyObject_HEAD nv_group id;
  int rank, size; /* when it was made */
} nvpy_group;

static PyTypeObject group_type;

static PyObject *group_new_obj(nv_group id) {
  int r = 0, s = 1;
  if (nv_group_rank(id, &r) != NV_OK || nv_group_size(id, &s) != NV_OK) nv_clear_error();
  nvpy_group *g = PyObject_New(nvpy_group, &group_type);
  if (g) {
    g->id = id;
    g->rank = r;
    g->size = s;
  }
  return (PyObject *)g;
}

static PyObject *raise(nv_status st) { return nvpy_raise_last(st); }

static PyObject *group_rank(PyObject *self, PyObject *unused) {
  (void)unused;
  int r;
  nv_status st = nv_group_rank(((nvpy_group *)self)->id, &r);
  return st == NV_OK ? PyLong_FromLong(r) : raise(st);
}

static PyObject *group_size(PyObject *self, PyObject *unused) {
  (void)unused;
  int s;
  nv_status st = nv_group_size(((nvpy_group *)self)->id, &s);
  return st == NV_OK ? PyLong_FromLong(s) : raise(st);
}

static PyObject *group_split(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kws[] = {"color", "key", NULL};
  int color, key = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "i|i:split", kws, &color, &key)) return NULL;
  nv_group out;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS
  st = nv_group_split(((nvpy_group *)self)->id, color, key, &out);
  Py_END_ALLOW_THREADS
  if (st != NV_OK) return raise(st);
  if (out == ((nvpy_group *)self)->id) {
    Py_INCREF(self);
    return self;
  }
  return group_new_obj(out);
}

static PyObject *group_close(PyObject *self, PyObject *unused) {
  (void)unused;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS
  st = nv_group_close(((nvpy_group *)self)->id);
  Py_END_ALLOW_THREADS
  if (st != NV_OK) return raise(st);
  Py_RETURN_NONE;
}

static PyObject *group_health(PyObject *self, PyObject *unused) {
  (void)unused;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS
  st = nv_group_health(((nvpy_group *)self)->id);
  Py_END_ALLOW_THREADS
  if (st != NV_OK) return raise(st);
  Py_RETURN_NONE;
}

static PyObject *group_repr(PyObject *self) {
  nv_group id = ((nvpy_group *)self)->id;
  int r, s;
  if (nv_group_rank(id, &r) != NV_OK || nv_group_size(id, &s) != NV_OK) {
    nv_clear_error();
    return PyUnicode_FromFormat("Group(closed, id %lld)", (long long)id);
  }
  return PyUnicode_FromFormat("Group(rank %d of %d)", r, s);
}

static Py_hash_t group_hash(PyObject *self) {
  const nvpy_group *g = (const nvpy_group *)self;
  Py_hash_t h =
      (Py_hash_t)((uint64_t)g->id * 1000003u ^ (uint64_t)g->rank * 7919u ^ (uint64_t)g->size);
  return h == -1 ? -2 : h;
}

static PyObject *group_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, &group_type) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  const nvpy_group *x = (const nvpy_group *)a, *y = (const nvpy_group *)b;
  bool eq = x->id == y->id && x->rank == y->rank && x->size == y->size;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyMethodDef group_methods[] = {
    {"rank", group_rank, METH_NOARGS, "The rank of this process in the group."},
    {"size", group_size, METH_NOARGS, "The number of processes in the group."},
    {"split", (PyCFunction)(void (*)(void))group_split, METH_VARARGS | METH_KEYWORDS,
     "split(color, key=-1): the group of the processes that passed the same color, ordered by "
     "key (-1: the rank), then rank. Every process of the group must call it."},
    {"close", group_close, METH_NOARGS,
     "Releases the group's transport once operations in progress finish; later operations on "
     "it fail."},
    {"health", group_health, METH_NOARGS,
     "Checks every peer without running a collective; raises naming a lost peer."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject group_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.distributed.Group",
    .tp_basicsize = sizeof(nvpy_group),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A group of processes that communicate (mlx.core.distributed.Group).",
    .tp_repr = group_repr,
    .tp_hash = group_hash,
    .tp_richcompare = group_richcompare,
    .tp_methods = group_methods,
};

/* The `group=` argument: None is the default group. */
static int group_arg(PyObject *o, nv_group *g, const char *fn) {
  if (!o || o == Py_None) {
    *g = NV_GROUP_DEFAULT;
    return 0;
  }
  if (!PyObject_TypeCheck(o, &group_type)) {
    PyErr_Format(PyExc_TypeError, "%s: group must be a Group or None, got %s", fn,
                 Py_TYPE(o)->tp_name);
    return -1;
  }
  *g = ((nvpy_group *)o)->id;
  return 0;
}

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kws[] = {"strict", "backend", NULL};
  int strict = 0;
  const char *backend = "any";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|ps:init", kws, &strict, &backend)) return NULL;
  nv_group g;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS
  st = nv_dist_init(backend, strict, &g);
  Py_END_ALLOW_THREADS
  if (st != NV_OK) return raise(st);
  return group_new_obj(g);
}

static PyObject *py_is_available(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kws[] = {"backend", NULL};
  const char *backend = "any";
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|s:is_available", kws, &backend)) return NULL;
  return PyBool_FromLong(nv_dist_is_available(backend));
}

/* Runs `build` inside the `stream=` argument's stream and wraps its result. */
typedef nv_array *(*coll_fn)(const nv_array *, nv_group);

static PyObject *finish(nv_array *r, int entered) {
  if (entered) nv_stream_exit();
  return nvpy_wrap(r);
}

static PyObject *collective(PyObject *args, PyObject *kw, const char *name, coll_fn fn) {
  static char *kws[] = {"x", "group", "stream", NULL};
  PyObject *xo, *go = NULL, *so = NULL;
  char fmt[64];
  snprintf(fmt, sizeof fmt, "O|$OO:%s", name);
  if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kws, &xo, &go, &so)) return NULL;
  nv_group g;
  if (group_arg(go, &g, name) < 0) return NULL;
  nv_array *x = nvpy_to_array(xo, -1);
  if (!x) return nvpy_error_prefix(name);
  int entered = nvpy_stream_enter(so, name);
  if (entered < 0) {
    nv_release(x);
    return NULL;
  }
  python_caller();
  nv_array *r = fn(x, g);
  nv_release(x);
  return finish(r, entered);
}

#define COLLECTIVE(pyname, cfn)                                              \
  static PyObject *py_##pyname(PyObject *self, PyObject *args, PyObject *kw) { \
    (void)self;                                                              \
    return collective(args, kw, #pyname, cfn);                               \
  }
COLLECTIVE(all_sum, nv_dist_all_sum)
COLLECTIVE(all_max, nv_dist_all_max)
COLLECTIVE(all_min, nv_dist_all_min)
COLLECTIVE(all_gather, nv_dist_all_gather)
COLLECTIVE(sum_scatter, nv_dist_sum_scatter)
COLLECTIVE(sum_gradients, nv_dist_sum_gradients)

static PyObject *py_send(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kws[] = {"x", "dst", "group", "stream", NULL};
  PyObject *xo, *go = NULL, *so = NULL;
  int dst;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|$OO:send", kws, &xo, &dst, &go, &so))
    return NULL;
  nv_group g;
  if (group_arg(go, &g, "send") < 0) return NULL;
  nv_array *x = nvpy_to_array(xo, -1);
  if (!x) return nvpy_error_prefix("send");
  int entered = nvpy_stream_enter(so, "send");
  if (entered < 0) {
    nv_release(x);
    return NULL;
  }
  python_caller();
  nv_array *r = nv_dist_send(x, dst, g);
  nv_release(x);
  return finish(r, entered);
}

static PyObject *py_recv(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kws[] = {"shape", "dtype", "src", "group", "stream", NULL};
  PyObject *sho, *dto, *go = NULL, *so = NULL;
  int src;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOi|$OO:recv", kws, &sho, &dto, &src, &go, &so))
    return NULL;
  int shape[64];
  int nd = nvpy_shape_arg(sho, shape, "recv: shape");
  if (nd < 0) return NULL;
  int dt = nvpy_dtype_arg(dto, false, "recv: dtype");
  if (dt < 0) return NULL;
  nv_group g;
  if (group_arg(go, &g, "recv") < 0) return NULL;
  int entered = nvpy_stream_enter(so, "recv");
  if (entered < 0) return NULL;
  python_caller();
  return finish(nv_dist_recv(shape, nd, (nv_dtype)dt, src, g), entered);
}

static PyObject *py_recv_like(PyObject *self, PyObject *args, PyObject *kw) {
  (void)self;
  static char *kws[] = {"x", "src", "group", "stream", NULL};
  PyObject *xo, *go = NULL, *so = NULL;
  int src;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi|$OO:recv_like", kws, &xo, &src, &go, &so))
    return NULL;
  nv_group g;
  if (group_arg(go, &g, "recv_like") < 0) return NULL;
  nv_array *x = nvpy_to_array(xo, -1);
  if (!x) return nvpy_error_prefix("recv_like");
  int entered = nvpy_stream_enter(so, "recv_like");
  if (entered < 0) {
    nv_release(x);
    return NULL;
  }
  python_caller();
  nv_array *r = nv_dist_recv_like(x, src, g);
  nv_release(x);
  return finish(r, entered);
}

#define KWF(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
#define DOC(s) "mlx.core.distributed." s

static PyMethodDef dist_methods[] = {
    {"init", KWF(py_init),
     DOC("init(strict=False, backend='any'): the group of every process of the job (the size-1 "
         "group without configuration, unless strict). Backends: ring, mpi, nccl, any.")},
    {"is_available", KWF(py_is_available),
     DOC("is_available(backend='any'): whether a distributed backend can be used.")},
    {"all_sum", KWF(py_all_sum), DOC("all_sum(x, *, group=None, stream=None): the sum over the group.")},
    {"all_max", KWF(py_all_max), DOC("all_max(x, *, group=None, stream=None): the maximum over the group.")},
    {"all_min", KWF(py_all_min), DOC("all_min(x, *, group=None, stream=None): the minimum over the group.")},
    {"all_gather", KWF(py_all_gather),
     DOC("all_gather(x, *, group=None, stream=None): the ranks' x concatenated along axis 0.")},
    {"sum_scatter", KWF(py_sum_scatter),
     DOC("sum_scatter(x, *, group=None, stream=None): this rank's part of the sum over the group.")},
    {"send", KWF(py_send), DOC("send(x, dst, *, group=None, stream=None): sends x to rank dst; returns x.")},
    {"recv", KWF(py_recv),
     DOC("recv(shape, dtype, src, *, group=None, stream=None): an array received from rank src.")},
    {"recv_like", KWF(py_recv_like),
     DOC("recv_like(x, src, *, group=None, stream=None): recv with x's shape and dtype.")},
    {"sum_gradients", KWF(py_sum_gradients),
     "sum_gradients(x, *, group=None, stream=None): the identity whose gradient is summed over "
     "the group (mlx's distributed sum_gradients)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef dist_def = {
    PyModuleDef_HEAD_INIT, "nuvec.distributed",
    "Communication between processes (mlx.core.distributed): groups and lazy collectives over "
    "the ring (TCP), MPI and NCCL backends.",
    -1, dist_methods, NULL, NULL, NULL, NULL};

int nvpy_init_distributed(PyObject *m) {
  if (PyType_Ready(&group_type) < 0) return -1;
  PyObject *d = PyModule_Create(&dist_def);
  if (!d) return -1;
  Py_INCREF(&group_type);
  if (PyModule_AddObject(d, "Group", (PyObject *)&group_type) < 0) {
    Py_DECREF(&group_type);
    Py_DECREF(d);
    return -1;
  }
  if (PyModule_AddObject(m, "distributed", d) < 0) {
    Py_DECREF(d);
    return -1;
  }
  return 0;
}
