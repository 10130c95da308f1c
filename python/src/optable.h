/* nuvec's CPython extension: op tables. An op is one entry of a table: its MLX name, the
 * adapter for its C signature, the C builder, MLX's argument names, how many are required,
 * numeric defaults and flags. nvpy_add_ops makes each entry a module function (and, with
 * METHOD, an array method); a call parses the arguments into a `call`, enters the `stream=`
 * argument's stream, runs the adapter and releases the arrays the adapter converted. The
 * helpers below are what adapters convert arguments with (src/ops.c, src/random.c). */
#ifndef NVPY_OPTABLE_H
#define NVPY_OPTABLE_H

#include "nvpy.h"

#define MAXARGS 12

typedef struct nvpy_op nvpy_op;
typedef struct call call;
typedef PyObject *(*adapter_fn)(call *c);

enum { METHOD = 1, VARARGS = 2 };

struct nvpy_op {
  const char *name;
  adapter_fn sig;
  void (*fn)(void);
  const char *kw[MAXARGS]; /* argument names in positional order ("stream" is implied) */
  int nreq;                /* required arguments */
  double def[3];           /* numeric defaults the adapter reads with dflt() */
  int flags;
  const char *doc;
};

/* One call: the parsed arguments and the arrays converted from them, released afterwards. */
struct call {
  const nvpy_op *op;
  const char *prefix; /* the op's module in messages: "" or "random." */
  PyObject *argv[MAXARGS];
  PyObject *rest; /* VARARGS: the positional arguments as a tuple */
  int npos;       /* how many of argv came positionally */
  nv_array *held[MAXARGS + 2];
  int nheld;
};

/* ---- Argument helpers ----
 * Each names the op and the argument in the exceptions it raises ("zeros: shape: ...");
 * `label` buffers hold that name. */

#define NVPY_LABEL 96

static inline bool given(call *c, int i) { return c->argv[i] && c->argv[i] != Py_None; }

static inline nv_array *hold(call *c, nv_array *x) {
  if (x) c->held[c->nheld++] = x;
  return x;
}

/* "op: arg" for argument i (VARARGS ops' positional arrays are "arrays"). */
static inline const char *arg_label(call *c, int i, char *label) {
  const char *kw = i >= 0 && i < MAXARGS && c->op->kw[i] ? c->op->kw[i] : "arrays";
  snprintf(label, NVPY_LABEL, "%s%s: %s", c->prefix, c->op->name, kw);
  return label;
}

/* Names argument i in the pending exception (nvpy_error_prefix). Returns -1. */
static inline int arg_error(call *c, int i) {
  char label[NVPY_LABEL];
  nvpy_error_prefix(arg_label(c, i, label));
  return -1;
}

/* Argument i as an array (no weak typing). */
static inline nv_array *arr(call *c, int i) {
  if (!c->argv[i]) {
    char label[NVPY_LABEL];
    PyErr_Format(PyExc_TypeError, "%s: the argument is required", arg_label(c, i, label));
    return NULL;
  }
  nv_array *x = nvpy_to_array(c->argv[i], -1);
  if (!x) arg_error(c, i);
  return hold(c, x);
}

/* Argument i as a binary operand against argument j (a Python scalar is weakly typed). */
static inline nv_array *operand_at(call *c, int i, int j) {
  nv_array *x = nvpy_operand(c->argv[i], c->argv[j]);
  if (!x) arg_error(c, i);
  return hold(c, x);
}

/* Arguments i and j as binary operands (Python scalars weakly typed against the other). */
static inline int pair(call *c, int i, int j, nv_array **a, nv_array **b) {
  *a = operand_at(c, i, j);
  *b = *a ? operand_at(c, j, i) : NULL;
  return *b ? 0 : -1;
}

static inline int int_at(call *c, int i, int none_value, int *out) {
  char label[NVPY_LABEL];
  return nvpy_int_arg(c->argv[i], none_value, out, arg_label(c, i, label));
}

/* Argument i as a shape (an int or a sequence of ints): its length, or -1. */
static inline int shape_at(call *c, int i, int *shape) {
  char label[NVPY_LABEL];
  return nvpy_shape_arg(c->argv[i], shape, arg_label(c, i, label));
}

/* Argument i as axes: None (or absent) gives -2, else the count, or -1. */
static inline int axes_at(call *c, int i, int *axes) {
  char label[NVPY_LABEL];
  return nvpy_axes_arg(c->argv[i], axes, arg_label(c, i, label));
}

static inline int dflt(call *c, int k) { return (int)c->op->def[k]; }

static inline int bool_at(call *c, int i, bool dflt_v, bool *out) {
  if (!c->argv[i]) {
    *out = dflt_v;
    return 0;
  }
  int t = PyObject_IsTrue(c->argv[i]);
  if (t < 0) return arg_error(c, i);
  *out = t;
  return 0;
}

static inline int double_at(call *c, int i, double dflt_v, double *out) {
  if (!given(c, i)) {
    *out = dflt_v;
    return 0;
  }
  *out = PyFloat_AsDouble(c->argv[i]);
  return *out == -1.0 && PyErr_Occurred() ? arg_error(c, i) : 0;
}

/* A dtype argument; `dflt_v` when absent or None. -2 with an exception. */
static inline int dtype_at(call *c, int i, int dflt_v) {
  if (!given(c, i)) return dflt_v;
  char label[NVPY_LABEL];
  return nvpy_dtype_arg(c->argv[i], false, arg_label(c, i, label));
}

/* A str argument (absent or None: `dflt_v`); NULL with a TypeError naming it. */
static inline const char *str_at(call *c, int i, const char *dflt_v) {
  if (!given(c, i)) return dflt_v;
  if (!PyUnicode_Check(c->argv[i])) {
    char label[NVPY_LABEL];
    PyErr_Format(PyExc_TypeError, "%s: expected a str, got %s", arg_label(c, i, label),
                 Py_TYPE(c->argv[i])->tp_name);
    return NULL;
  }
  const char *s = PyUnicode_AsUTF8(c->argv[i]);
  if (!s) arg_error(c, i);
  return s;
}

#define FN(T) ((T)(void (*)(void))c->op->fn)
#define A1 const nv_array *
#define F(f) ((void (*)(void))(f))
#define KW(...) {__VA_ARGS__}

/* Adds a function to `m` for each of the `n` ops (and the METHOD ones to the array type);
 * `prefix` ("" or "random.") goes before their names in messages. */
int nvpy_add_ops(PyObject *m, const nvpy_op *ops, size_t n, const char *prefix);

#endif /* NVPY_OPTABLE_H */
