/* nuvec's CPython extension: op tables. An op is one entry of a table: its MLX name, the
 * adapter for its C signature, the C builder, MLX's argument names, how many are required,
 * numeric defaults and flags. nvpy_add_ops makes each entry a module function (and, with
 * METHOD, an array method); a call parses the arguments into a `call`, enters the `stream=`
 * argument's stream, runs the adapter and releases the arrays the adapter converted. The
 * helpers below are what adapters convert arguments with (src/ops.c, src/random.c). */
#ifndef NVPY_OPTABLE_H
#define NVPY_OPTABLE_H

#include "nvpy.h"

#define MAXARGS 8

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
  PyObject *argv[MAXARGS];
  PyObject *rest; /* VARARGS: the positional arguments as a tuple */
  nv_array *held[MAXARGS + 2];
  int nheld;
};

/* ---- Argument helpers ---- */

static inline bool given(call *c, int i) { return c->argv[i] && c->argv[i] != Py_None; }

static inline nv_array *hold(call *c, nv_array *x) {
  if (x) c->held[c->nheld++] = x;
  return x;
}

/* Argument i as an array (no weak typing). */
static inline nv_array *arr(call *c, int i) { return hold(c, nvpy_to_array(c->argv[i], -1)); }

/* Arguments i and j as binary operands (Python scalars weakly typed against the other). */
static inline int pair(call *c, int i, int j, nv_array **a, nv_array **b) {
  if (nvpy_operands(c->argv[i], c->argv[j], a, b) < 0) return -1;
  hold(c, *a);
  hold(c, *b);
  return 0;
}

static inline int int_at(call *c, int i, int none_value, int *out) {
  return nvpy_int_arg(c->argv[i], none_value, out, c->op->name);
}

static inline int dflt(call *c, int k) { return (int)c->op->def[k]; }

static inline int bool_at(call *c, int i, bool dflt_v, bool *out) {
  if (!c->argv[i]) {
    *out = dflt_v;
    return 0;
  }
  int t = PyObject_IsTrue(c->argv[i]);
  if (t < 0) return -1;
  *out = t;
  return 0;
}

static inline int double_at(call *c, int i, double dflt_v, double *out) {
  if (!given(c, i)) {
    *out = dflt_v;
    return 0;
  }
  *out = PyFloat_AsDouble(c->argv[i]);
  return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* A dtype argument; `dflt_v` when absent or None. -2 with an exception. */
static inline int dtype_at(call *c, int i, int dflt_v) {
  if (!given(c, i)) return dflt_v;
  return nvpy_dtype_arg(c->argv[i], false);
}

#define FN(T) ((T)(void (*)(void))c->op->fn)
#define A1 const nv_array *
#define F(f) ((void (*)(void))(f))
#define KW(...) {__VA_ARGS__}

/* Adds a function to `m` for each of the `n` ops (and the METHOD ones to the array type). */
int nvpy_add_ops(PyObject *m, const nvpy_op *ops, size_t n);

#endif /* NVPY_OPTABLE_H */
