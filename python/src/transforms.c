/* nuvec's CPython extension: eval over pytrees and the function transforms — grad,
 * value_and_grad, vjp, jvp, vmap, custom_function and checkpoint — through the C closures of
 * nuvec/transforms.h. A Python function becomes a closure whose body rebuilds the arguments
 * from the tracers it is given, calls the function with the GIL held, and pushes the arrays
 * of its result (lists, tuples and dicts are pytrees; other leaves are carried unchanged). An
 * exception the function raises is kept and raised again when the transform returns. */
#include <string.h>

#include "nvpy.h"

/* ---- Pytrees ---- */

/* A walk over a pytree: lists, tuples and dicts are its nodes, everything else a leaf. The
 * nodes on the path from the root are kept, so a tree that contains itself raises ValueError,
 * and the walk's depth counts as recursion, so one nested deeper than the interpreter's
 * recursion limit raises RecursionError; `what` names the function in both messages. A list
 * or tuple is read through a snapshot of its items (PySequence_Tuple: a subclass's __iter__
 * is honoured and may raise), and dict items are held while they are used, so Python code
 * that runs meanwhile (a key's __hash__) cannot free what the walk reads. */
typedef struct {
  const char *what;
  PyObject **path;
  size_t depth, cap;
  bool arrays_only; /* a leaf that is not an array raises ValueError (grad's arguments, as MLX) */
  bool keep_types;  /* a dict subclass (an nn.Module) is rebuilt as a shallow copy of itself */
} tree_walk;

static bool is_node(PyObject *o) { return PyList_Check(o) || PyTuple_Check(o) || PyDict_Check(o); }

static int walk_enter(tree_walk *w, PyObject *node) {
  for (size_t i = 0; i < w->depth; i++)
    if (w->path[i] == node) {
      PyErr_Format(PyExc_ValueError, "%s: the pytree contains itself (a %s is inside itself)",
                   w->what, Py_TYPE(node)->tp_name);
      return -1;
    }
  /* The depth is checked against the recursion limit itself: since Python 3.12 the C-level
   * check of Py_EnterRecursiveCall follows the stack, not the limit, and lets a walk go far
   * deeper than sys.getrecursionlimit() (the same tree must fail the same on every Python). */
  if (w->depth >= (size_t)Py_GetRecursionLimit() || Py_EnterRecursiveCall("")) {
    PyErr_Clear();
    PyErr_Format(PyExc_RecursionError, "%s: the pytree is nested deeper than the recursion limit (%d)",
                 w->what, Py_GetRecursionLimit());
    return -1;
  }
  if (w->depth == w->cap) {
    size_t cap = w->cap * 2 + 16;
    PyObject **p = PyMem_Realloc(w->path, cap * sizeof *p);
    if (!p) {
      Py_LeaveRecursiveCall();
      PyErr_NoMemory();
      return -1;
    }
    w->path = p;
    w->cap = cap;
  }
  w->path[w->depth++] = node;
  return 0;
}

static void walk_leave(tree_walk *w) {
  w->depth--;
  Py_LeaveRecursiveCall();
}

static void walk_free(tree_walk *w) { PyMem_Free(w->path); }

static int flatten_rec(tree_walk *w, PyObject *o, nv_vec *v) {
  if (NVPY_IS_ARRAY(o)) return nv_vec_push(v, NVPY_A(o)) == NV_OK ? 0 : (PyErr_NoMemory(), -1);
  if (!is_node(o)) {
    if (!w->arrays_only) return 0;
    PyErr_Format(PyExc_ValueError,
                 "[tree_flatten] The argument should contain only arrays (%s got a %s leaf)",
                 w->what, Py_TYPE(o)->tp_name);
    return -1;
  }
  if (walk_enter(w, o) < 0) return -1;
  int rc = 0;
  if (PyDict_Check(o)) {
    PyObject *k, *val;
    Py_ssize_t pos = 0;
    while (rc == 0 && PyDict_Next(o, &pos, &k, &val)) {
      Py_INCREF(val);
      rc = flatten_rec(w, val, v);
      Py_DECREF(val);
    }
  } else {
    PyObject *t = PySequence_Tuple(o);
    if (!t) rc = -1;
    for (Py_ssize_t i = 0; t && rc == 0 && i < PyTuple_GET_SIZE(t); i++)
      rc = flatten_rec(w, PyTuple_GET_ITEM(t, i), v);
    Py_XDECREF(t);
  }
  walk_leave(w);
  return rc;
}

int nvpy_tree_flatten(PyObject *o, nv_vec *v, const char *what) {
  tree_walk w = {what, NULL, 0, 0, false};
  int rc = flatten_rec(&w, o, v);
  walk_free(&w);
  return rc;
}

/* As tree_flatten, but every leaf must be an array (MLX's rule for differentiated arguments). */
static int tree_flatten_arrays(PyObject *o, nv_vec *v, const char *what) {
  tree_walk w = {what, NULL, 0, 0, true};
  int rc = flatten_rec(&w, o, v);
  walk_free(&w);
  return rc;
}

static PyObject *unflatten_rec(tree_walk *w, PyObject *tmpl, const nv_vec *v, size_t *pos) {
  if (NVPY_IS_ARRAY(tmpl)) {
    if (*pos >= nv_vec_size(v)) return PyErr_Format(PyExc_ValueError, "%s: pytree: too few arrays", w->what);
    return nvpy_wrap_unchecked(nv_retain(nv_vec_get(v, (*pos)++)));
  }
  if (!is_node(tmpl)) {
    Py_INCREF(tmpl);
    return tmpl;
  }
  if (walk_enter(w, tmpl) < 0) return NULL;
  PyObject *r;
  if (PyDict_Check(tmpl)) {
    PyObject *k, *val;
    Py_ssize_t p = 0;
    /* MLX hands a transformed function its own dict subclasses (it swaps the arrays in place),
     * so a module argument keeps its attributes: a shallow copy of the same type does that. */
    if (w->keep_types && !PyDict_CheckExact(tmpl)) {
      PyObject *copy = PyImport_ImportModule("copy");
      r = copy ? PyObject_CallMethod(copy, "copy", "O", tmpl) : NULL;
      Py_XDECREF(copy);
      if (r && !PyDict_Check(r)) Py_CLEAR(r);
    } else {
      r = PyDict_New();
    }
    while (r && PyDict_Next(tmpl, &p, &k, &val)) {
      Py_INCREF(k);
      Py_INCREF(val);
      PyObject *e = unflatten_rec(w, val, v, pos);
      if (!e || PyDict_SetItem(r, k, e) < 0) Py_CLEAR(r);
      Py_XDECREF(e);
      Py_DECREF(k);
      Py_DECREF(val);
    }
  } else {
    PyObject *t = PySequence_Tuple(tmpl);
    Py_ssize_t n = t ? PyTuple_GET_SIZE(t) : 0;
    r = t ? PyList_New(n) : NULL;
    for (Py_ssize_t i = 0; r && i < n; i++) {
      PyObject *e = unflatten_rec(w, PyTuple_GET_ITEM(t, i), v, pos);
      if (!e) Py_CLEAR(r);
      else PyList_SET_ITEM(r, i, e);
    }
    Py_XDECREF(t);
    if (r && PyTuple_Check(tmpl)) Py_SETREF(r, PyList_AsTuple(r));
  }
  walk_leave(w);
  return r;
}

/* `tmpl` with its arrays replaced, in flatten order, by arrays of `v` from `*pos`. */
static PyObject *tree_unflatten(PyObject *tmpl, const nv_vec *v, size_t *pos, const char *what) {
  tree_walk w = {what, NULL, 0, 0, false};
  PyObject *r = unflatten_rec(&w, tmpl, v, pos);
  walk_free(&w);
  return r;
}

/* As tree_unflatten, for the arguments a transformed function is called with: dict subclasses
 * keep their type (keep_types). */
static PyObject *tree_unflatten_args(PyObject *tmpl, const nv_vec *v, size_t *pos,
                                     const char *what) {
  tree_walk w = {what, NULL, 0, 0, false, true};
  PyObject *r = unflatten_rec(&w, tmpl, v, pos);
  walk_free(&w);
  return r;
}

static nv_vec *flatten_new(PyObject *o, const char *what) {
  nv_vec *v = nv_vec_new();
  if (!v) return (nv_vec *)PyErr_NoMemory();
  if (nvpy_tree_flatten(o, v, what) < 0) {
    nv_vec_free(v);
    return NULL;
  }
  return v;
}

static PyObject *eval_common(PyObject *args, bool async) {
  nv_vec *v = flatten_new(args, async ? "async_eval" : "eval");
  if (!v) return NULL;
  nv_status st;
  Py_BEGIN_ALLOW_THREADS st = async ? nv_async_eval(nv_vec_data(v), nv_vec_size(v))
                                    : nv_eval(nv_vec_data(v), nv_vec_size(v));
  Py_END_ALLOW_THREADS nv_vec_free(v);
  if (st != NV_OK) return nvpy_raise_last(st);
  Py_RETURN_NONE;
}

static PyObject *py_eval(PyObject *m, PyObject *args) {
  (void)m;
  return eval_common(args, false);
}
static PyObject *py_async_eval(PyObject *m, PyObject *args) {
  (void)m;
  return eval_common(args, true);
}

/* ---- Python functions as closures ---- */

/* A Python function traced with some of its arguments replaced by tracers: `traced[i]` says
 * whether positional argument i's arrays are the closure's inputs (in order), and the keyword
 * arguments named in `kw_names` (a tuple, or NULL) give the inputs after those. */
typedef struct {
  PyObject *fn, *args, *kwargs;
  bool *traced;
  PyObject *kw_names;
  PyObject *out_tmpl; /* the structure of the last result */
  PyObject *exc;      /* the exception the function raised, kept for the caller */
  int mode;           /* PLAIN, or the custom_function rule the payload calls */
  int check;          /* grad/value_and_grad: the result rule checked (CHECK_*) */
  int n_in;           /* for rules: the number of primal arrays */
  PyObject *in_tmpl;  /* for rules: the primals' structure (a tuple of args) */
  const char *what;   /* the transform, for messages */
} py_fn;

enum { PLAIN, RULE_VJP, RULE_JVP, RULE_VMAP };
enum { CHECK_NONE, CHECK_GRAD, CHECK_VALUE_AND_GRAD };

static void py_fn_free(void *p) {
  py_fn *f = p;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF(f->fn);
  Py_XDECREF(f->args);
  Py_XDECREF(f->kwargs);
  Py_XDECREF(f->kw_names);
  Py_XDECREF(f->out_tmpl);
  Py_XDECREF(f->exc);
  Py_XDECREF(f->in_tmpl);
  PyMem_Free(f->traced);
  PyMem_Free(f);
  PyGILState_Release(g);
}

/* The positional arguments with the traced ones rebuilt from `inputs` from `*pos`. */
static PyObject *rebuild_args(py_fn *f, const nv_vec *inputs, size_t *pos) {
  Py_ssize_t n = PyTuple_GET_SIZE(f->args);
  PyObject *t = PyTuple_New(n);
  for (Py_ssize_t i = 0; t && i < n; i++) {
    PyObject *a = PyTuple_GET_ITEM(f->args, i);
    PyObject *e = f->traced[i] ? tree_unflatten_args(a, inputs, pos, f->what) : (Py_INCREF(a), a);
    if (!e) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, e);
  }
  return t;
}

/* The keyword arguments (a new reference in `*out`, NULL when there are none) with those of
 * `kw_names` rebuilt from `inputs` from `*pos`. 0, or -1 with an exception. */
static int rebuild_kwargs(py_fn *f, const nv_vec *inputs, size_t *pos, PyObject **out) {
  *out = NULL;
  if (!f->kwargs) return 0;
  if (!f->kw_names) {
    Py_INCREF(f->kwargs);
    *out = f->kwargs;
    return 0;
  }
  PyObject *d = PyDict_Copy(f->kwargs);
  for (Py_ssize_t i = 0; d && i < PyTuple_GET_SIZE(f->kw_names); i++) {
    PyObject *name = PyTuple_GET_ITEM(f->kw_names, i);
    PyObject *a = PyDict_GetItem(f->kwargs, name);
    PyObject *e = a ? tree_unflatten_args(a, inputs, pos, f->what)
                    : PyErr_Format(PyExc_ValueError, "%s: keyword argument %R is missing", f->what, name);
    if (!e || PyDict_SetItem(d, name, e) < 0) Py_CLEAR(d);
    Py_XDECREF(e);
  }
  *out = d;
  return d ? 0 : -1;
}

/* Writes what the function changed in the rebuilt argument `copy` back into the caller's
 * `orig` (MLX passes the caller's containers themselves, so `model[1] = x` inside a grad
 * stays): a list item or dict value that was an array and is now another array. The tree's
 * structure stays (grad's result follows it): added or removed keys, other replacements and
 * lists whose length changed are not written back. `*pos` walks `inputs` as the rebuild did.
 * 0, or -1 with an exception. */
static int sync_back(tree_walk *w, PyObject *orig, PyObject *copy, const nv_vec *inputs,
                     size_t *pos);

/* The item `o` of the caller's tree beside `c` of the rebuilt one: recurses into containers,
 * and says in *changed whether `c` is no longer what the rebuild put there. */
static int sync_item(tree_walk *w, PyObject *o, PyObject *c, const nv_vec *inputs, size_t *pos,
                     bool *changed) {
  *changed = false;
  if (NVPY_IS_ARRAY(o)) {
    nv_array *put = *pos < nv_vec_size(inputs) ? nv_vec_get(inputs, (*pos)++) : NULL;
    *changed = NVPY_IS_ARRAY(c) && NVPY_A(c) != put;
    return 0;
  }
  if (is_node(o) && Py_TYPE(o) == Py_TYPE(c))
    return sync_back(w, o, c, inputs, pos);
  return 0;
}

static int sync_back(tree_walk *w, PyObject *orig, PyObject *copy, const nv_vec *inputs,
                     size_t *pos) {
  if (!is_node(orig) || Py_TYPE(orig) != Py_TYPE(copy)) return 0;
  if (walk_enter(w, orig) < 0) return -1;
  int rc = 0;
  bool changed;
  if (PyDict_Check(orig)) {
    PyObject *k, *o;
    PyObject *keys = PyDict_Keys(orig);
    for (Py_ssize_t i = 0; keys && rc == 0 && i < PyList_GET_SIZE(keys); i++) {
      k = PyList_GET_ITEM(keys, i);
      o = PyDict_GetItem(orig, k);
      PyObject *c = PyDict_GetItem(copy, k);
      if (!o || !c) {
        /* A key the function removed: its arrays are skipped as the rebuild placed them. */
        if (o) {
          nv_vec *skip = nv_vec_new();
          rc = skip && flatten_rec(w, o, skip) == 0 ? 0 : -1;
          if (skip) *pos += nv_vec_size(skip);
          nv_vec_free(skip);
        }
        continue;
      }
      Py_INCREF(o);
      Py_INCREF(c);
      rc = sync_item(w, o, c, inputs, pos, &changed);
      if (rc == 0 && changed) rc = PyDict_SetItem(orig, k, c);
      Py_DECREF(o);
      Py_DECREF(c);
    }
    rc = keys ? rc : -1;
    Py_XDECREF(keys);
  } else {
    PyObject *to = PySequence_Tuple(orig), *tc = PySequence_Tuple(copy);
    if (!to || !tc) {
      rc = -1;
    } else if (PyTuple_GET_SIZE(to) == PyTuple_GET_SIZE(tc)) {
      for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(to); i++) {
        PyObject *o = PyTuple_GET_ITEM(to, i), *c = PyTuple_GET_ITEM(tc, i);
        rc = sync_item(w, o, c, inputs, pos, &changed);
        if (rc == 0 && changed && PyList_Check(orig) && PyList_GET_SIZE(orig) > i) {
          Py_INCREF(c);
          rc = PyList_SetItem(orig, i, c);
        }
      }
    }
    Py_XDECREF(to);
    Py_XDECREF(tc);
  }
  walk_leave(w);
  return rc;
}

/* After grad's call: the function's changes to its differentiated arguments' containers
 * written back into the caller's (sync_back). */
static int sync_args(py_fn *f, PyObject *args, PyObject *kwargs, const nv_vec *inputs) {
  tree_walk w = {f->what, NULL, 0, 0, false};
  size_t pos = 0;
  int rc = 0;
  for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(f->args); i++)
    if (f->traced[i])
      rc = sync_back(&w, PyTuple_GET_ITEM(f->args, i), PyTuple_GET_ITEM(args, i), inputs, &pos);
  for (Py_ssize_t i = 0; rc == 0 && f->kw_names && kwargs && i < PyTuple_GET_SIZE(f->kw_names); i++) {
    PyObject *name = PyTuple_GET_ITEM(f->kw_names, i);
    PyObject *o = PyDict_GetItem(f->kwargs, name), *c = PyDict_GetItem(kwargs, name);
    if (o && c) rc = sync_back(&w, o, c, inputs, &pos);
  }
  walk_free(&w);
  return rc;
}

/* Pushes the arrays of `r` and keeps its structure. */
static int push_result(py_fn *f, PyObject *r, nv_vec *outputs) {
  Py_XSETREF(f->out_tmpl, r);
  Py_INCREF(r);
  return nvpy_tree_flatten(r, outputs, f->what);
}

/* A custom_function rule's call: its inputs split into the structures MLX passes. */
/* The rule's view of a tuple of arguments: MLX passes a function of one argument that
 * argument itself (an array, or its tree), and a tuple only for several. Steals `t`. */
static PyObject *rule_args(PyObject *t) {
  if (!t || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 1) return t;
  PyObject *one = PyTuple_GET_ITEM(t, 0);
  Py_INCREF(one);
  Py_DECREF(t);
  return one;
}

static PyObject *call_rule(py_fn *f, const nv_vec *inputs) {
  size_t n = nv_vec_size(inputs), pos = 0;
  PyObject *primals = rule_args(tree_unflatten(f->in_tmpl, inputs, &pos, f->what)), *r = NULL;
  if (!primals) return NULL;
  if (f->mode == RULE_VMAP) {
    nv_array *ax = nv_vec_get(inputs, n - 1);
    PyObject *axes = nvpy_tolist(ax);
    if (axes) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(axes); i++)
        if (PyLong_AsLong(PyList_GET_ITEM(axes, i)) < 0) {
          Py_INCREF(Py_None);
          PyList_SetItem(axes, i, Py_None);
        }
      Py_SETREF(axes, rule_args(PyList_AsTuple(axes)));
      if (axes) r = PyObject_CallFunctionObjArgs(f->fn, primals, axes, NULL);
      Py_XDECREF(axes);
    }
  } else {
    /* The other arrays are one (vjp: two) groups shaped as the outputs. */
    size_t groups = f->mode == RULE_VJP ? 2 : 0, per = groups ? (n - pos) / groups : 0;
    PyObject *g[2] = {NULL, NULL};
    for (size_t k = 0; k < groups; k++) {
      nv_vec *part = nv_vec_new();
      for (size_t i = 0; part && i < per; i++) nv_vec_push(part, nv_vec_get(inputs, pos + i));
      size_t p = 0;
      g[k] = part ? tree_unflatten(f->out_tmpl, part, &p, f->what) : NULL;
      nv_vec_free(part);
      pos += per;
    }
    if (f->mode == RULE_JVP) {
      /* jvp gets the primals and the tangents, both shaped as the arguments. */
      nv_vec *tv = nv_vec_new();
      for (size_t i = 0; tv && i < (size_t)f->n_in; i++) nv_vec_push(tv, nv_vec_get(inputs, f->n_in + i));
      size_t p = 0;
      Py_XDECREF(g[0]);
      g[0] = tv ? rule_args(tree_unflatten(f->in_tmpl, tv, &p, f->what)) : NULL;
      nv_vec_free(tv);
      if (g[0]) r = PyObject_CallFunctionObjArgs(f->fn, primals, g[0], NULL);
    } else if (g[0] && g[1]) {
      r = PyObject_CallFunctionObjArgs(f->fn, primals, g[0], g[1], NULL);
    }
    Py_XDECREF(g[0]);
    Py_XDECREF(g[1]);
  }
  Py_DECREF(primals);
  return r;
}

/* MLX's rule for what a differentiated function returns: grad wants a 0-d array, and
 * value_and_grad one or a tuple starting with one (the rest is auxiliary). A size-1 array of
 * another shape is no scalar. 0, or -1 with MLX's ValueError. */
static int check_grad_result(const py_fn *f, PyObject *r) {
  const char *tag = f->check == CHECK_GRAD ? "[grad]" : "[value_and_grad]";
  PyObject *first = r;
  if (f->check == CHECK_VALUE_AND_GRAD && PyTuple_Check(r) && PyTuple_GET_SIZE(r) > 0)
    first = PyTuple_GET_ITEM(r, 0);
  if (!PyObject_TypeCheck(first, &nvpy_array_type)) {
    if (f->check == CHECK_GRAD)
      PyErr_Format(PyExc_ValueError,
                   "[grad] The return value of the function whose gradient we want to compute "
                   "should be a scalar array; but %s was returned.", Py_TYPE(first)->tp_name);
    else
      PyErr_Format(PyExc_ValueError,
                   "[value_and_grad] The return value of the function whose gradient we want to "
                   "compute should be either a scalar array or a tuple with the first value being "
                   "a scalar array (Union[array, tuple[array, Any, ...]]); but %s was returned.",
                   Py_TYPE(first)->tp_name);
    return -1;
  }
  nv_array *a = NVPY_A(first);
  int nd = nv_array_ndim(a);
  if (nd == 0) return 0;
  PyObject *shape = PyTuple_New(nd);
  for (int i = 0; shape && i < nd; i++)
    PyTuple_SET_ITEM(shape, i, PyLong_FromLong(nv_array_dim(a, i)));
  if (shape)
    PyErr_Format(PyExc_ValueError,
                 "%s The function must return a scalar (0-d) array to differentiate, got one of "
                 "shape %R.", tag, shape);
  Py_XDECREF(shape);
  return -1;
}

static nv_status py_fn_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  py_fn *f = payload;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *r = NULL;
  if (f->mode == PLAIN) {
    size_t pos = 0;
    PyObject *args = rebuild_args(f, inputs, &pos), *kwargs = NULL;
    if (args && rebuild_kwargs(f, inputs, &pos, &kwargs) == 0) r = PyObject_Call(f->fn, args, kwargs);
    if (r && f->check != CHECK_NONE && sync_args(f, args, kwargs, inputs) < 0) Py_CLEAR(r);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    if (r && f->check != CHECK_NONE && check_grad_result(f, r) < 0) Py_CLEAR(r);
  } else {
    r = call_rule(f, inputs);
  }
  int rc = -1;
  if (r && f->mode == RULE_VMAP) {
    /* (outputs, out_axes): the arrays, then the axes as one int32 array. */
    PyObject *outs, *axes;
    if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
      outs = PyTuple_GET_ITEM(r, 0);
      axes = PyTuple_GET_ITEM(r, 1);
      if (push_result(f, outs, outputs) == 0) {
        PyObject *al = PyTuple_Check(axes) || PyList_Check(axes) ? PySequence_List(axes)
                                                                 : Py_BuildValue("[O]", axes);
        for (Py_ssize_t i = 0; al && i < PyList_GET_SIZE(al); i++)
          if (PyList_GET_ITEM(al, i) == Py_None) PyList_SetItem(al, i, PyLong_FromLong(-1));
        nv_array *ax = al ? nvpy_unscope(nvpy_to_array(al, NV_DTYPE_INT32)) : NULL;
        Py_XDECREF(al);
        if (ax) {
          rc = nv_vec_push(outputs, ax) == NV_OK ? 0 : -1;
          nv_release(ax);
        }
      }
    } else {
      PyErr_SetString(PyExc_ValueError, "custom_function: vmap must return (outputs, out_axes)");
    }
  } else if (r) {
    rc = push_result(f, r, outputs);
  }
  Py_XDECREF(r);
  nv_status st = NV_OK;
  if (rc < 0) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb) PyException_SetTraceback(v, tb);
    Py_XSETREF(f->exc, v);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    st = NV_ERR_INVALID_ARGUMENT;
  }
  PyGILState_Release(g);
  return st;
}

/* A closure for `fn` called with `args` (positional, a tuple), the ones with traced[i] given
 * by the closure's inputs. The payload is returned through `pf` (owned by the closure). */
static nv_closure *make_closure(PyObject *fn, PyObject *args, PyObject *kwargs, const bool *traced,
                                const char *what, py_fn **pf) {
  py_fn *f = PyMem_Calloc(1, sizeof *f);
  Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
  if (!f || !(f->traced = PyMem_Calloc(n ? (size_t)n : 1, sizeof(bool)))) {
    PyMem_Free(f);
    return (nv_closure *)PyErr_NoMemory();
  }
  if (traced) memcpy(f->traced, traced, (size_t)n * sizeof(bool));
  f->what = what;
  Py_INCREF(fn);
  f->fn = fn;
  f->args = args ? (Py_INCREF(args), args) : PyTuple_New(0);
  if (!f->args) {
    py_fn_free(f);
    return NULL;
  }
  f->kwargs = kwargs ? (Py_INCREF(kwargs), kwargs) : NULL;
  nv_closure *c = nv_closure_new(py_fn_call, f, py_fn_free);
  if (!c) {
    py_fn_free(f);
    return (nv_closure *)nvpy_raise_last(NV_ERR_OUT_OF_MEMORY);
  }
  *pf = f;
  return c;
}

/* Raises the exception the function raised, or the library's error. */
static PyObject *transform_error(py_fn *f, nv_status st) {
  if (f && f->exc) {
    PyErr_SetObject((PyObject *)Py_TYPE(f->exc), f->exc);
    Py_CLEAR(f->exc);
    return NULL;
  }
  return nvpy_raise_last(st);
}

/* ---- Transformed functions: one Python type, one call function per transform ---- */

typedef struct nvpy_function nvpy_function;
typedef PyObject *(*fn_call)(nvpy_function *self, PyObject *args, PyObject *kw);

struct nvpy_function {
  PyObject_HEAD fn_call call;
  PyObject *fn;
  PyObject *argnums;            /* grad: a tuple of ints; vmap: in_axes */
  PyObject *argnames;           /* grad: a tuple of keyword names (NULL: none) */
  PyObject *out_axes;           /* vmap */
  bool single;                  /* grad: one argnum, whose gradient is returned alone */
  bool value;                   /* value_and_grad */
  PyObject *vjp, *jvp, *vmap;   /* custom_function rules */
  nv_closure *closure;          /* _compile_flat: the compiled closure */
  py_fn *payload;               /* and its Python function's payload (owned by it) */
};

static void function_dealloc(PyObject *self) {
  nvpy_function *f = (nvpy_function *)self;
  Py_XDECREF(f->fn);
  Py_XDECREF(f->argnums);
  Py_XDECREF(f->argnames);
  Py_XDECREF(f->out_axes);
  Py_XDECREF(f->vjp);
  Py_XDECREF(f->jvp);
  Py_XDECREF(f->vmap);
  nv_closure_release(f->closure);
  PyObject_Free(self);
}

static PyObject *function_call(PyObject *self, PyObject *args, PyObject *kw) {
  nvpy_function *f = (nvpy_function *)self;
  return f->call(f, args, kw);
}

static PyObject *function_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
  (void)type;
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

static nvpy_function *function_new(fn_call call, PyObject *fn, const char *what) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "%s: fun: expected a callable, got %s", what, Py_TYPE(fn)->tp_name);
    return NULL;
  }
  nvpy_function *f = PyObject_New(nvpy_function, &nvpy_function_type);
  if (!f) return NULL;
  f->call = call;
  Py_INCREF(fn);
  f->fn = fn;
  f->argnums = f->argnames = f->out_axes = f->vjp = f->jvp = f->vmap = NULL;
  f->single = f->value = false;
  f->closure = NULL;
  f->payload = NULL;
  return f;
}

/* ---- grad / value_and_grad ---- */

static const char *grad_tag(nvpy_function *self) { return self->value ? "[value_and_grad]" : "[grad]"; }
static const char *grad_name(nvpy_function *self) { return self->value ? "value_and_grad" : "grad"; }

/* Checks that the call has every argument to differentiate: 0, or -1 with MLX's ValueError. */
static int grad_check_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->argnums); i++) {
    long k = PyLong_AsLong(PyTuple_GET_ITEM(self->argnums, i));
    if (k >= nargs) {
      PyErr_Format(PyExc_ValueError,
                   "%s Can't compute the gradient of argument index %ld because the function is "
                   "called with only %zd positional arguments.",
                   grad_tag(self), k, nargs);
      return -1;
    }
  }
  for (Py_ssize_t i = 0; self->argnames && i < PyTuple_GET_SIZE(self->argnames); i++) {
    PyObject *name = PyTuple_GET_ITEM(self->argnames, i);
    if (kw && PyDict_GetItem(kw, name)) continue;
    PyObject *have = PyUnicode_FromString(""), *k, *v;
    Py_ssize_t pos = 0;
    while (have && kw && PyDict_Next(kw, &pos, &k, &v))
      Py_SETREF(have, PyUnicode_FromFormat("%U%U,", have, k));
    if (have)
      PyErr_Format(PyExc_ValueError,
                   "%s Can't compute the gradient of keyword argument '%U' because the function "
                   "is called with the following keyword arguments {%U}",
                   grad_tag(self), name, have);
    Py_XDECREF(have);
    return -1;
  }
  return 0;
}

/* The gradients as MLX returns them: the argnums' trees (one alone, several in a tuple, None
 * for none), and with argnames the pair (that, {name: tree}). */
static PyObject *grad_result(nvpy_function *self, PyObject *args, PyObject *kw, const nv_vec *grads,
                             const size_t *starts, size_t kw_start) {
  Py_ssize_t nnums = PyTuple_GET_SIZE(self->argnums);
  PyObject *gt = PyTuple_New(nnums);
  for (Py_ssize_t i = 0; gt && i < nnums; i++) {
    long k = PyLong_AsLong(PyTuple_GET_ITEM(self->argnums, i));
    size_t pos = starts[k];
    PyObject *e = tree_unflatten(PyTuple_GET_ITEM(args, k), grads, &pos, grad_name(self));
    if (!e) Py_CLEAR(gt);
    else PyTuple_SET_ITEM(gt, i, e);
  }
  if (gt && nnums == 0) Py_SETREF(gt, (Py_INCREF(Py_None), Py_None));
  else if (gt && self->single) {
    PyObject *one = PyTuple_GET_ITEM(gt, 0);
    Py_INCREF(one);
    Py_SETREF(gt, one);
  }
  if (!gt || !self->argnames) return gt;
  PyObject *d = PyDict_New();
  for (Py_ssize_t i = 0; d && i < PyTuple_GET_SIZE(self->argnames); i++) {
    PyObject *name = PyTuple_GET_ITEM(self->argnames, i);
    PyObject *e = tree_unflatten(PyDict_GetItem(kw, name), grads, &kw_start, grad_name(self));
    if (!e || PyDict_SetItem(d, name, e) < 0) Py_CLEAR(d);
    Py_XDECREF(e);
  }
  PyObject *r = d ? PyTuple_Pack(2, gt, d) : NULL;
  Py_DECREF(gt);
  Py_XDECREF(d);
  return r;
}

/* grad_call's transform over the flattened primals. */
static PyObject *grad_run(nvpy_function *self, PyObject *args, PyObject *kw, nv_vec *primals,
                          const bool *traced, const size_t *starts, const char *what) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  py_fn *pf = NULL;
  nv_closure *c = make_closure(self->fn, args, kw, traced, what, &pf);
  if (!c) return NULL;
  pf->kw_names = self->argnames;
  Py_XINCREF(pf->kw_names);
  pf->check = self->value ? CHECK_VALUE_AND_GRAD : CHECK_GRAD;
  size_t np = nv_vec_size(primals);
  int *nums = PyMem_Malloc((np ? np : 1) * sizeof(int));
  for (size_t i = 0; nums && i < np; i++) nums[i] = (int)i;
  nv_closure *g = nums ? (self->value ? nv_value_and_grad(c, nums, np) : nv_grad(c, nums, np)) : NULL;
  PyMem_Free(nums);
  nv_vec *out = nv_vec_new();
  nv_status st = g && out ? nv_closure_apply(g, primals, out) : NV_ERR_OUT_OF_MEMORY;
  PyObject *r = NULL;
  if (st != NV_OK) {
    r = transform_error(pf, st);
  } else {
    size_t nout = nv_vec_size(out) - np;
    nv_vec *grads = nv_vec_new();
    for (size_t i = 0; grads && i < np; i++) nv_vec_push(grads, nv_vec_get(out, nout + i));
    PyObject *gt = grads ? grad_result(self, args, kw, grads, starts, starts[nargs]) : PyErr_NoMemory();
    nv_vec_free(grads);
    if (gt && self->value) {
      size_t pos = 0;
      PyObject *value = tree_unflatten(pf->out_tmpl, out, &pos, what);
      r = value ? PyTuple_Pack(2, value, gt) : NULL;
      Py_XDECREF(value);
      Py_DECREF(gt);
    } else {
      r = gt;
    }
  }
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(c);
  return r;
}

static PyObject *grad_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args), nnums = PyTuple_GET_SIZE(self->argnums);
  if (grad_check_call(self, args, kw) < 0) return NULL;
  const char *what = grad_name(self);
  /* Which arguments are differentiated, and where each one's primals start. */
  bool *traced = PyMem_Calloc((size_t)nargs + 1, sizeof(bool));
  size_t *starts = PyMem_Calloc((size_t)nargs + 1, sizeof(size_t));
  nv_vec *primals = traced && starts ? nv_vec_new() : NULL;
  if (!primals) goto oom;
  for (Py_ssize_t i = 0; i < nnums; i++) traced[PyLong_AsLong(PyTuple_GET_ITEM(self->argnums, i))] = true;
  /* Primals in argument order, then the keyword arguments' in argnames order (the closure
   * rebuilds them so); grads are reordered by grad_result. */
  for (Py_ssize_t k = 0; k < nargs; k++) {
    starts[k] = nv_vec_size(primals);
    if (traced[k] && tree_flatten_arrays(PyTuple_GET_ITEM(args, k), primals, what) < 0) goto fail;
  }
  starts[nargs] = nv_vec_size(primals);
  for (Py_ssize_t i = 0; self->argnames && i < PyTuple_GET_SIZE(self->argnames); i++)
    if (tree_flatten_arrays(PyDict_GetItem(kw, PyTuple_GET_ITEM(self->argnames, i)), primals, what) < 0)
      goto fail;
  PyObject *r = grad_run(self, args, kw, primals, traced, starts, what);
  PyMem_Free(traced);
  PyMem_Free(starts);
  nv_vec_free(primals);
  return r;
oom:
  PyErr_NoMemory();
fail:
  PyMem_Free(traced);
  PyMem_Free(starts);
  nv_vec_free(primals);
  return NULL;
}

/* argnames as a tuple of distinct names (a str is one name); NULL with a TypeError. */
static PyObject *argnames_tuple(PyObject *o, const char *tag) {
  if (!o) return PyTuple_New(0);
  if (PyUnicode_Check(o)) return PyTuple_Pack(1, o);
  PyObject *f = PySequence_Check(o) ? PySequence_Fast(o, "") : NULL;
  PyObject *l = f ? PyList_New(0) : NULL;
  for (Py_ssize_t i = 0; l && i < PySequence_Fast_GET_SIZE(f); i++) {
    PyObject *s = PySequence_Fast_GET_ITEM(f, i);
    int seen = PyUnicode_Check(s) ? PySequence_Contains(l, s) : -1;
    if (seen < 0 || (!seen && PyList_Append(l, s) < 0)) Py_CLEAR(l);
  }
  Py_XDECREF(f);
  if (!l) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s argnames must be a str or a sequence of str, got %s", tag,
                 Py_TYPE(o)->tp_name);
    return NULL;
  }
  Py_SETREF(l, PyList_AsTuple(l));
  return l;
}

/* argnums as a sorted tuple of distinct non-negative ints, checked as MLX checks them. */
static PyObject *argnums_tuple(PyObject *o, bool has_names, const char *tag, bool *single) {
  *single = o != Py_None && PyLong_Check(o);
  PyObject *t;
  if (o == Py_None) t = has_names ? PyTuple_New(0) : Py_BuildValue("(i)", 0);
  else if (PyLong_Check(o)) t = PyTuple_Pack(1, o);
  else t = PySequence_Check(o) ? PySequence_Tuple(o) : NULL;
  if (!t) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s argnums must be an int, a sequence of ints or None, got %s",
                 tag, Py_TYPE(o)->tp_name);
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  if (n == 1) *single = true;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *e = PyTuple_GET_ITEM(t, i);
    long k = PyLong_Check(e) ? PyLong_AsLong(e) : -1;
    if (!PyLong_Check(e)) {
      PyErr_Format(PyExc_TypeError, "%s argnums must be ints, got %s", tag, Py_TYPE(e)->tp_name);
    } else if (k == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "%s argument index %R is beyond the %d arguments nuvec differentiates",
                   tag, e, NVPY_MAXDIM);
    } else if (k < 0 && !PyErr_Occurred()) {
      PyErr_Format(PyExc_ValueError, "%s Can't compute the gradient of negative argument index %ld", tag, k);
    } else if (k >= NVPY_MAXDIM && !PyErr_Occurred()) {
      PyErr_Format(PyExc_ValueError, "%s argument index %ld is beyond the %d arguments nuvec differentiates",
                   tag, k, NVPY_MAXDIM);
    }
    for (Py_ssize_t j = 0; j < i && !PyErr_Occurred(); j++)
      if (PyLong_AsLong(PyTuple_GET_ITEM(t, j)) == k)
        PyErr_Format(PyExc_ValueError, "%s Duplicate argument index %ld is not allowed.", tag, k);
    if (PyErr_Occurred()) {
      Py_DECREF(t);
      return NULL;
    }
  }
  /* MLX returns the gradients in increasing argument order, whatever the order given. */
  PyObject *l = PySequence_List(t);
  Py_DECREF(t);
  if (!l || PyList_Sort(l) < 0) {
    Py_XDECREF(l);
    return NULL;
  }
  Py_SETREF(l, PyList_AsTuple(l));
  return l;
}

static PyObject *make_grad(PyObject *args, PyObject *kw, bool value) {
  static char *kwlist[] = {"fun", "argnums", "argnames", NULL};
  const char *tag = value ? "[value_and_grad]" : "[grad]";
  PyObject *fn, *argnums = Py_None, *argnames = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, value ? "O|OO:value_and_grad" : "O|OO:grad", kwlist, &fn,
                                   &argnums, &argnames))
    return NULL;
  PyObject *names = argnames_tuple(argnames, tag);
  if (!names) return NULL;
  bool single;
  PyObject *nums = argnums_tuple(argnums, PyTuple_GET_SIZE(names) > 0, tag, &single);
  if (nums && PyTuple_GET_SIZE(nums) == 0 && PyTuple_GET_SIZE(names) == 0) {
    PyErr_Format(PyExc_ValueError, "%s Gradient wrt no argument requested", tag);
    Py_CLEAR(nums);
  }
  nvpy_function *f = nums ? function_new(grad_call, fn, value ? "value_and_grad" : "grad") : NULL;
  if (!f) {
    Py_XDECREF(nums);
    Py_DECREF(names);
    return NULL;
  }
  f->value = value;
  f->single = single;
  f->argnums = nums;
  if (PyTuple_GET_SIZE(names)) f->argnames = names;
  else Py_DECREF(names);
  return (PyObject *)f;
}

static PyObject *py_grad(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  return make_grad(args, kw, false);
}
static PyObject *py_value_and_grad(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  return make_grad(args, kw, true);
}

/* ---- vjp / jvp ---- */

static PyObject *vjp_jvp(PyObject *args, PyObject *kw, bool is_vjp) {
  static char *kwlist_v[] = {"fun", "primals", "cotangents", NULL};
  static char *kwlist_j[] = {"fun", "primals", "tangents", NULL};
  PyObject *fn, *po, *to;
  if (!PyArg_ParseTupleAndKeywords(args, kw, is_vjp ? "OOO:vjp" : "OOO:jvp", is_vjp ? kwlist_v : kwlist_j,
                                   &fn, &po, &to))
    return NULL;
  const char *what = is_vjp ? "vjp" : "jvp";
  nv_vec *primals = nvpy_vec_arg(po, is_vjp ? "vjp: primals" : "jvp: primals");
  nv_vec *tans = primals ? nvpy_vec_arg(to, is_vjp ? "vjp: cotangents" : "jvp: tangents") : NULL;
  if (!tans) {
    nv_vec_free(primals);
    return NULL;
  }
  /* The function receives the primals as separate arguments, each of them traced. */
  size_t n = nv_vec_size(primals);
  PyObject *targs = PyTuple_New((Py_ssize_t)n);
  bool *traced = targs ? PyMem_Malloc(n + 1) : NULL;
  if (targs && !traced) Py_CLEAR(targs);
  for (size_t i = 0; targs && i < n; i++) {
    PyObject *a = nvpy_wrap_unchecked(nv_retain(nv_vec_get(primals, i)));
    if (!a) Py_CLEAR(targs);
    else PyTuple_SET_ITEM(targs, (Py_ssize_t)i, a);
    traced[i] = true;
  }
  if (!targs && !PyErr_Occurred()) PyErr_NoMemory();
  py_fn *pf = NULL;
  nv_closure *c = targs ? make_closure(fn, targs, NULL, traced, what, &pf) : NULL;
  PyMem_Free(traced);
  Py_XDECREF(targs);
  PyObject *r = NULL;
  nv_vec *outs = nv_vec_new(), *res = nv_vec_new();
  if (c && outs && res) {
    nv_status st = is_vjp ? nv_vjp(c, primals, tans, outs, res) : nv_jvp(c, primals, tans, outs, res);
    if (st != NV_OK) r = transform_error(pf, st);
    else {
      PyObject *a = nvpy_list_from_vec(outs), *b = a ? nvpy_list_from_vec(res) : NULL;
      r = b ? PyTuple_Pack(2, a, b) : NULL;
      Py_XDECREF(a);
      Py_XDECREF(b);
    }
  } else if (c) {
    PyErr_NoMemory();
  }
  nv_vec_free(outs);
  nv_vec_free(res);
  nv_vec_free(primals);
  nv_vec_free(tans);
  nv_closure_release(c);
  return r;
}

static PyObject *py_vjp(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  return vjp_jvp(args, kw, true);
}
static PyObject *py_jvp(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  return vjp_jvp(args, kw, false);
}

/* ---- vmap ---- */

static int axis_value(PyObject *o, int *out, const char *what) {
  if (o == Py_None) {
    *out = NV_VMAP_NONE;
    return 0;
  }
  return nvpy_int_arg(o, 0, out, what);
}

static int push_axis(int a, int **ax, size_t *n, size_t *cap) {
  if (*n == *cap) {
    *cap = *cap * 2 + 8;
    int *p = PyMem_Realloc(*ax, *cap * sizeof(int));
    if (!p) {
      PyErr_NoMemory();
      return -1;
    }
    *ax = p;
  }
  (*ax)[(*n)++] = a;
  return 0;
}

/* The axis of each array leaf of `tree` from the prefix `spec` (an int or None for the whole
 * subtree, else a list/tuple/dict matching it), appended to `*ax` (a PyMem array). */
static int expand_axes(PyObject *spec, PyObject *tree, int **ax, size_t *n, size_t *cap,
                       const char *what);

/* expand_axes over matching lists or tuples, read through snapshots. */
static int expand_seq(PyObject *spec, PyObject *tree, int **ax, size_t *n, size_t *cap, const char *what) {
  PyObject *ts = PySequence_Tuple(spec), *tt = ts ? PySequence_Tuple(tree) : NULL;
  int rc = tt ? 0 : -1;
  if (tt && PyTuple_GET_SIZE(ts) != PyTuple_GET_SIZE(tt)) {
    PyErr_Format(PyExc_ValueError, "%s: %zd axes for a sequence of %zd items", what, PyTuple_GET_SIZE(ts),
                 PyTuple_GET_SIZE(tt));
    rc = -1;
  }
  for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(ts); i++)
    rc = expand_axes(PyTuple_GET_ITEM(ts, i), PyTuple_GET_ITEM(tt, i), ax, n, cap, what);
  Py_XDECREF(ts);
  Py_XDECREF(tt);
  return rc;
}

static int expand_dict(PyObject *spec, PyObject *tree, int **ax, size_t *n, size_t *cap, const char *what) {
  PyObject *k, *val;
  Py_ssize_t pos = 0;
  int rc = 0;
  while (rc == 0 && PyDict_Next(tree, &pos, &k, &val)) {
    Py_INCREF(k);
    Py_INCREF(val);
    PyObject *sub = PyDict_GetItemWithError(spec, k);
    if (!sub && !PyErr_Occurred())
      PyErr_Format(PyExc_ValueError, "%s: the axes dict has no key %R of the argument", what, k);
    Py_XINCREF(sub);
    rc = sub ? expand_axes(sub, val, ax, n, cap, what) : -1;
    Py_XDECREF(sub);
    Py_DECREF(k);
    Py_DECREF(val);
  }
  return rc;
}

static int expand_axes(PyObject *spec, PyObject *tree, int **ax, size_t *n, size_t *cap, const char *what) {
  if (!is_node(spec)) { /* an axis (or None) for the whole subtree */
    int a;
    if (axis_value(spec, &a, what) < 0) return -1;
    nv_vec *v = flatten_new(tree, what);
    if (!v) return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nv_vec_size(v); i++) rc = push_axis(a, ax, n, cap);
    nv_vec_free(v);
    return rc;
  }
  bool seqs = (PyList_Check(spec) || PyTuple_Check(spec)) && (PyList_Check(tree) || PyTuple_Check(tree));
  bool dicts = PyDict_Check(spec) && PyDict_Check(tree);
  if (!seqs && !dicts) {
    PyErr_Format(PyExc_ValueError, "%s: the axes do not match the structure of the arguments", what);
    return -1;
  }
  /* A spec that contains itself (matched by a tree that does) ends in RecursionError. */
  if (Py_EnterRecursiveCall(" in vmap's axes")) return -1;
  int rc = seqs ? expand_seq(spec, tree, ax, n, cap, what) : expand_dict(spec, tree, ax, n, cap, what);
  Py_LeaveRecursiveCall();
  return rc;
}

/* Moves each output's batch axis (0) to its out axis (None takes one slice). 0, or -1 with an
 * exception. */
static int apply_out_axes(PyObject *out_axes, PyObject *out_tmpl, nv_vec *out) {
  int *oax = NULL;
  size_t no = 0, ocap = 0;
  /* A one-element tuple of axes for a function returning one array names that array's axis
   * (MLX: out_axes=(1,) for f(x) -> array). */
  if (PyTuple_Check(out_axes) && PyTuple_GET_SIZE(out_axes) == 1 && !is_node(out_tmpl))
    out_axes = PyTuple_GET_ITEM(out_axes, 0);
  int rc = expand_axes(out_axes, out_tmpl, &oax, &no, &ocap, "vmap: out_axes");
  if (rc == 0 && no != nv_vec_size(out)) {
    PyErr_SetString(PyExc_ValueError, "vmap: out_axes do not match the outputs");
    rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < no; i++) {
    nv_array *x = nv_vec_get(out, i), *y;
    if (oax[i] == NV_VMAP_NONE) {
      nv_array *zero = nv_array_int(0);
      y = nv_take(x, zero, 0);
      nv_release(zero);
    } else {
      y = nv_moveaxis(x, 0, oax[i]);
    }
    if (!y || nv_array_status(y) != NV_OK) {
      if (y) nvpy_raise_status(nv_array_status(y), nv_array_error(y));
      else PyErr_NoMemory();
      rc = -1;
    } else {
      nv_vec_set(out, i, y);
    }
    nv_release(y);
  }
  PyMem_Free(oax);
  return rc;
}

/* `n` (and one more) true flags: every positional argument traced. NULL with MemoryError. */
static bool *all_traced(Py_ssize_t n) {
  bool *t = PyMem_Malloc((size_t)n + 1);
  if (!t) return (bool *)PyErr_NoMemory();
  memset(t, 1, (size_t)n + 1);
  return t;
}

static PyObject *vmap_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  int *in_ax = NULL;
  size_t nin = 0, cap = 0;
  PyObject *spec = self->argnums;
  int rc;
  if (spec == Py_None || PyLong_Check(spec)) rc = expand_axes(spec, args, &in_ax, &nin, &cap, "vmap: in_axes");
  else if (PyTuple_Check(spec) || PyList_Check(spec)) {
    if (PySequence_Size(spec) != nargs) {
      PyErr_Format(PyExc_ValueError, "[vmap] The number of in axes (%zd) must match the number of arguments (%zd).",
                   PySequence_Size(spec), nargs);
      return NULL;
    }
    rc = expand_axes(spec, args, &in_ax, &nin, &cap, "vmap: in_axes");
  } else if (PyDict_Check(spec)) {
    /* A dict is a prefix of each positional argument's tree, as in MLX (one tree argument
     * with in_axes={"a": 0, "b": 1}). */
    PyObject *per = PyTuple_New(nargs);
    for (Py_ssize_t i = 0; per && i < nargs; i++) {
      Py_INCREF(spec);
      PyTuple_SET_ITEM(per, i, spec);
    }
    rc = per ? expand_axes(per, args, &in_ax, &nin, &cap, "vmap: in_axes") : -1;
    Py_XDECREF(per);
  } else {
    PyErr_SetString(PyExc_ValueError, "vmap: in_axes must be an int, None, a dict or a sequence");
    return NULL;
  }
  int out1 = 0;
  bool seq_out = !(self->out_axes == Py_None || PyLong_Check(self->out_axes));
  bool *traced = rc == 0 ? all_traced(nargs) : NULL;
  nv_vec *inputs = traced ? flatten_new(args, "vmap") : NULL;
  py_fn *pf = NULL;
  nv_closure *c = inputs ? make_closure(self->fn, args, kw, traced, "vmap", &pf) : NULL;
  PyMem_Free(traced);
  /* A single out axis goes to the C transform; a sequence is applied per output afterwards. */
  if (c && !seq_out && axis_value(self->out_axes, &out1, "vmap: out_axes") < 0)
    c = (nv_closure_release(c), NULL);
  nv_closure *vm = c ? nv_vmap(c, in_ax, nin, &out1, 1) : NULL;
  PyMem_Free(in_ax);
  nv_vec *out = vm ? nv_vec_new() : NULL;
  PyObject *r = NULL;
  if (out) {
    nv_status st = nv_closure_apply(vm, inputs, out);
    if (st != NV_OK) r = transform_error(pf, st);
    else if (!seq_out || apply_out_axes(self->out_axes, pf->out_tmpl, out) == 0) {
      size_t pos = 0;
      r = tree_unflatten(pf->out_tmpl, out, &pos, "vmap");
    }
  } else if (c) {
    PyErr_NoMemory();
  }
  nv_vec_free(out);
  nv_vec_free(inputs);
  nv_closure_release(vm);
  nv_closure_release(c);
  return r;
}

static PyObject *py_vmap(PyObject *m, PyObject *args, PyObject *kw) {
  (void)m;
  static char *kwlist[] = {"fun", "in_axes", "out_axes", NULL};
  PyObject *fn, *in_axes = NULL, *out_axes = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:vmap", kwlist, &fn, &in_axes, &out_axes)) return NULL;
  nvpy_function *f = function_new(vmap_call, fn, "vmap");
  if (!f) return NULL;
  f->argnums = in_axes ? (Py_INCREF(in_axes), in_axes) : PyLong_FromLong(0);
  f->out_axes = out_axes ? (Py_INCREF(out_axes), out_axes) : PyLong_FromLong(0);
  return (PyObject *)f;
}

/* ---- custom_function and checkpoint ---- */

/* A closure for a custom rule: inputs as the rule expects them (see call_rule). */
static nv_closure *rule_closure(PyObject *fn, int mode, PyObject *in_tmpl, int n_in,
                                PyObject *out_tmpl) {
  if (!fn) return NULL;
  py_fn *f = NULL;
  nv_closure *c = make_closure(fn, NULL, NULL, NULL, "custom_function", &f);
  if (!c) return NULL;
  f->mode = mode;
  f->n_in = n_in;
  Py_INCREF(in_tmpl);
  f->in_tmpl = in_tmpl;
  Py_XINCREF(out_tmpl);
  f->out_tmpl = out_tmpl;
  return c;
}

static PyObject *custom_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  bool *traced = all_traced(nargs);
  nv_vec *inputs = traced ? flatten_new(args, "custom_function") : NULL;
  py_fn *pf = NULL;
  nv_closure *c = inputs ? make_closure(self->fn, args, kw, traced, "custom_function", &pf) : NULL;
  PyMem_Free(traced);
  if (!c) {
    nv_vec_free(inputs);
    return NULL;
  }
  PyObject *r = NULL;
  nv_vec *out = nv_vec_new();
  /* The output structure is needed by the rules: trace f once for it (no values computed). */
  nv_status st = out ? nv_closure_apply(c, inputs, out) : NV_ERR_OUT_OF_MEMORY;
  if (st != NV_OK) {
    r = transform_error(pf, st);
    goto done;
  }
  int n_in = (int)nv_vec_size(inputs);
  nv_closure *rv = rule_closure(self->vjp, RULE_VJP, args, n_in, pf->out_tmpl);
  nv_closure *rj = rule_closure(self->jvp, RULE_JVP, args, n_in, pf->out_tmpl);
  nv_closure *rm = rule_closure(self->vmap, RULE_VMAP, args, n_in, pf->out_tmpl);
  nv_closure *cf = PyErr_Occurred() ? NULL : nv_custom_function(c, rv, rj, rm);
  nv_vec_clear(out);
  st = cf ? nv_closure_apply(cf, inputs, out) : NV_ERR_OUT_OF_MEMORY;
  if (PyErr_Occurred()) r = NULL;
  else if (st != NV_OK) r = transform_error(pf, st);
  else {
    size_t pos = 0;
    r = tree_unflatten(pf->out_tmpl, out, &pos, "custom_function");
  }
  nv_closure_release(rv);
  nv_closure_release(rj);
  nv_closure_release(rm);
  nv_closure_release(cf);
done:
  nv_vec_free(out);
  nv_vec_free(inputs);
  nv_closure_release(c);
  return r;
}

/* f.vjp(rule) / f.jvp(rule) / f.vmap(rule): decorators recording a rule. */
static PyObject *set_rule(PyObject *self, PyObject *rule, size_t off) {
  if (!PyCallable_Check(rule)) {
    PyErr_SetString(PyExc_TypeError, "custom_function: a rule must be callable");
    return NULL;
  }
  PyObject **slot = (PyObject **)((char *)self + off);
  Py_INCREF(rule);
  Py_XSETREF(*slot, rule);
  Py_INCREF(rule);
  return rule;
}
static PyObject *cf_vjp(PyObject *s, PyObject *r) { return set_rule(s, r, offsetof(nvpy_function, vjp)); }
static PyObject *cf_jvp(PyObject *s, PyObject *r) { return set_rule(s, r, offsetof(nvpy_function, jvp)); }
static PyObject *cf_vmap(PyObject *s, PyObject *r) { return set_rule(s, r, offsetof(nvpy_function, vmap)); }

static PyObject *py_custom_function(PyObject *m, PyObject *fn) {
  (void)m;
  return (PyObject *)function_new(custom_call, fn, "custom_function");
}

static PyObject *checkpoint_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  bool *traced = all_traced(nargs);
  nv_vec *inputs = traced ? flatten_new(args, "checkpoint") : NULL;
  py_fn *pf = NULL;
  nv_closure *c = inputs ? make_closure(self->fn, args, kw, traced, "checkpoint", &pf) : NULL;
  PyMem_Free(traced);
  if (!c) {
    nv_vec_free(inputs);
    return NULL;
  }
  nv_closure *cp = nv_checkpoint(c);
  nv_vec *out = nv_vec_new();
  PyObject *r = NULL;
  nv_status st = cp && out ? nv_closure_apply(cp, inputs, out) : NV_ERR_OUT_OF_MEMORY;
  if (st != NV_OK) r = transform_error(pf, st);
  else {
    size_t pos = 0;
    r = tree_unflatten(pf->out_tmpl, out, &pos, "checkpoint");
  }
  nv_vec_free(out);
  nv_vec_free(inputs);
  nv_closure_release(cp);
  nv_closure_release(c);
  return r;
}

static PyObject *py_checkpoint(PyObject *m, PyObject *fn) {
  (void)m;
  return (PyObject *)function_new(checkpoint_call, fn, "checkpoint");
}

/* ---- compile ----
 * The C layer of nuvec.compile (python/nuvec/_compile.py holds the pytrees, constants and
 * captured state): _compile_flat(fun, template, shapeless) compiles fun, which takes one list
 * of arrays shaped as `template` and returns a list of arrays, with nv_compile; the result is
 * called with such a list and returns the list of outputs. */

static PyObject *compile_flat_call(nvpy_function *self, PyObject *args, PyObject *kw) {
  PyObject *list;
  if (kw && PyDict_GET_SIZE(kw)) return PyErr_Format(PyExc_TypeError, "compile: no keyword arguments");
  if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
  nv_vec *in = flatten_new(list, "compile");
  nv_vec *out = in ? nv_vec_new() : NULL;
  if (!out) {
    nv_vec_free(in);
    return in ? PyErr_NoMemory() : NULL;
  }
  nv_status st = nv_closure_apply(self->closure, in, out);
  PyObject *r = st == NV_OK ? nvpy_list_from_vec(out) : transform_error(self->payload, st);
  nv_vec_free(in);
  nv_vec_free(out);
  return r;
}

static PyObject *py_compile_flat(PyObject *m, PyObject *args) {
  (void)m;
  PyObject *fn, *tmpl;
  int shapeless;
  if (!PyArg_ParseTuple(args, "OO!p", &fn, &PyList_Type, &tmpl, &shapeless)) return NULL;
  nvpy_function *self = function_new(compile_flat_call, fn, "compile");
  if (!self) return NULL;
  bool traced = true;
  PyObject *a = PyTuple_Pack(1, tmpl);
  py_fn *pf = NULL;
  nv_closure *c = a ? make_closure(fn, a, NULL, &traced, "compile", &pf) : NULL;
  Py_XDECREF(a);
  nv_compile_options o = {.shapeless = shapeless != 0};
  self->closure = c ? nv_compile(c, &o) : NULL;
  nv_closure_release(c);
  if (!self->closure) {
    Py_DECREF(self);
    return PyErr_Occurred() ? NULL : nvpy_raise_last(NV_ERR_OUT_OF_MEMORY);
  }
  self->payload = pf;
  return (PyObject *)self;
}

static PyObject *py_compile_stats(PyObject *m, PyObject *o) {
  (void)m;
  if (Py_TYPE(o) != &nvpy_function_type || !((nvpy_function *)o)->closure)
    return PyErr_Format(PyExc_TypeError, "_compile_stats: expected a compiled function");
  nv_compile_stats st;
  nv_status s = nv_compile_get_stats(((nvpy_function *)o)->closure, &st);
  if (s != NV_OK) return nvpy_raise_last(s);
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n}", "calls", (Py_ssize_t)st.calls, "traces",
                       (Py_ssize_t)st.traces, "entries", (Py_ssize_t)st.entries, "traced_nodes",
                       (Py_ssize_t)st.traced_nodes, "nodes", (Py_ssize_t)st.nodes, "fused",
                       (Py_ssize_t)st.fused, "fused_layouts", (Py_ssize_t)st.fused_layouts);
}

/* _export_to_dot(path, outputs, names, named): nv_export_to_dot over lists. */
static PyObject *py_export_to_dot(PyObject *m, PyObject *args) {
  (void)m;
  const char *path;
  PyObject *outs, *names, *named;
  if (!PyArg_ParseTuple(args, "sO!O!O!", &path, &PyList_Type, &outs, &PyList_Type, &names,
                        &PyList_Type, &named))
    return NULL;
  Py_ssize_t nn = PyList_GET_SIZE(names);
  if (nn != PyList_GET_SIZE(named)) return PyErr_Format(PyExc_ValueError, "export_to_dot: names");
  nv_vec *o = flatten_new(outs, "export_to_dot"), *a = o ? flatten_new(named, "export_to_dot") : NULL;
  const char **nm = PyMem_Calloc((size_t)nn + 1, sizeof *nm);
  PyObject *r = NULL;
  if (o && a && nm && nv_vec_size(a) == (size_t)nn) {
    bool ok = true;
    for (Py_ssize_t i = 0; ok && i < nn; i++) ok = (nm[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(names, i))) != NULL;
    if (ok) {
      nv_status st = nv_export_to_dot(path, nv_vec_data(o), nv_vec_size(o), nm, nv_vec_data(a), (size_t)nn);
      r = st == NV_OK ? (Py_INCREF(Py_None), Py_None) : nvpy_raise_last(st);
    }
  } else if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_TypeError, "export_to_dot: arrays expected");
  }
  PyMem_Free(nm);
  nv_vec_free(o);
  nv_vec_free(a);
  return r;
}

static PyObject *py_disable_compile(PyObject *m, PyObject *unused) {
  (void)m;
  (void)unused;
  nv_disable_compile();
  Py_RETURN_NONE;
}

static PyObject *py_enable_compile(PyObject *m, PyObject *unused) {
  (void)m;
  (void)unused;
  nv_enable_compile();
  Py_RETURN_NONE;
}

static PyObject *py_compile_mode(PyObject *m, PyObject *args) {
  (void)m;
  int mode = -1;
  if (!PyArg_ParseTuple(args, "|i", &mode)) return NULL;
  if (mode >= 0) nv_set_compile_mode((nv_compile_mode)mode);
  return PyLong_FromLong((long)nv_get_compile_mode());
}

static PyMethodDef function_methods[] = {
    {"vjp", cf_vjp, METH_O, "custom_function: sets the vjp rule (a decorator)."},
    {"jvp", cf_jvp, METH_O, "custom_function: sets the jvp rule (a decorator)."},
    {"vmap", cf_vmap, METH_O, "custom_function: sets the vmap rule (a decorator)."},
    {NULL, NULL, 0, NULL}};

PyTypeObject nvpy_function_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.TransformedFunction",
    .tp_basicsize = sizeof(nvpy_function),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = function_dealloc,
    .tp_call = function_call,
    .tp_descr_get = function_descr_get,
    .tp_methods = function_methods,
};

static PyMethodDef transform_methods[] = {
    {"eval", py_eval, METH_VARARGS, "Evaluates the arrays of pytrees."},
    {"async_eval", py_async_eval, METH_VARARGS, "Starts evaluating the arrays of pytrees."},
    {"grad", (PyCFunction)(void (*)(void))py_grad, METH_VARARGS | METH_KEYWORDS,
     "grad(fun, argnums=None, argnames=[]): a function computing fun's gradient."},
    {"value_and_grad", (PyCFunction)(void (*)(void))py_value_and_grad,
     METH_VARARGS | METH_KEYWORDS, "value_and_grad(fun, argnums=None, argnames=[])."},
    {"vjp", (PyCFunction)(void (*)(void))py_vjp, METH_VARARGS | METH_KEYWORDS,
     "vjp(fun, primals, cotangents) -> (outputs, vjps)."},
    {"jvp", (PyCFunction)(void (*)(void))py_jvp, METH_VARARGS | METH_KEYWORDS,
     "jvp(fun, primals, tangents) -> (outputs, jvps)."},
    {"vmap", (PyCFunction)(void (*)(void))py_vmap, METH_VARARGS | METH_KEYWORDS,
     "vmap(fun, in_axes=0, out_axes=0): fun vectorized over an axis."},
    {"custom_function", py_custom_function, METH_O, "A function with custom vjp/jvp/vmap rules."},
    {"checkpoint", py_checkpoint, METH_O, "fun recomputed in the backward pass."},
    {"_compile_flat", py_compile_flat, METH_VARARGS, "_compile_flat(fun, template, shapeless)."},
    {"_compile_stats", py_compile_stats, METH_O, "The counters of a _compile_flat function."},
    {"_compile_mode", py_compile_mode, METH_VARARGS, "_compile_mode(mode=-1): sets (>= 0) and returns the mode."},
    {"disable_compile", py_disable_compile, METH_NOARGS, "Makes compiled functions run uncompiled."},
    {"_export_to_dot", py_export_to_dot, METH_VARARGS, "_export_to_dot(path, outputs, names, named)."},
    {"enable_compile", py_enable_compile, METH_NOARGS, "Compiles compiled functions again."},
    {NULL, NULL, 0, NULL}};

int nvpy_init_transforms(PyObject *m) {
  if (PyType_Ready(&nvpy_function_type) < 0) return -1;
  return PyModule_AddFunctions(m, transform_methods);
}
