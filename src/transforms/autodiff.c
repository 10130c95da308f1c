/* Reverse and forward mode: vjp, jvp, grad, value_and_grad (DESIGN §8). A transform traces the
 * function with tracer copies (identity views flagged as tracers) of the inputs it
 * differentiates, then walks the traced graph (src/transforms/graph.c) applying each
 * primitive's rules. Everything between nv__tracing_enter and nv__tracing_leave keeps its
 * graph when evaluated (Retained), so a function may evaluate values while it is traced. */
#include <stdlib.h>

#include "transforms/transforms_internal.h"

/* A traced call: tracers for the active inputs, the function's outputs. */
typedef struct trace {
  size_t n;
  nv_array **args;    /* the inputs as f saw them (tracers where active) */
  nv_vec *outs;
} trace;

static void trace_free(trace *t) {
  if (t->args) nv__tf_release_all(t->args, t->n);
  free(t->args);
  nv_vec_free(t->outs);
  memset(t, 0, sizeof *t);
}

/* Calls f on the primals, replacing the active ones by tracers. Inside a tracing section. */
static nv_status trace_call(const char *op, const nv_closure *f, nv_array *const *primals,
                            size_t n, const bool *active, trace *t) {
  memset(t, 0, sizeof *t);
  t->n = n;
  t->args = calloc(n ? n : 1, sizeof *t->args);
  t->outs = nv_vec_new();
  if (!t->args || !t->outs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n; i++)
    t->args[i] = !active || active[i] ? nv__tf_identity(primals[i], false, true)
                                      : nv_retain(primals[i]);
  nv_status s = nv__closure_call(f, t->args, n, t->outs);
  if (s != NV_OK) return s;
  if (nv_vec_size(t->outs) == 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the function returned no outputs", op);
  return NV_OK;
}

static nv_status shape_mismatch(const char *op, const char *what, size_t i, const nv_array *a,
                                const char *whose, const nv_array *b) {
  char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
  const nv__output *x = nv__out(a), *y = nv__out(b);
  return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: %s %zu has shape %s but %s %zu has shape %s",
                       op, what, i, nv__shape_str(x->shape, x->ndim, s1, sizeof s1), whose, i,
                       nv__shape_str(y->shape, y->ndim, s2, sizeof s2));
}

/* A derivative taken through a failed output is missing the part that ran through the failed
 * nodes (a failed node holds no inputs to differentiate through), so it cannot be read as a
 * value: when one of `outs` has a known error, each result that does not already carry an
 * error of its own is replaced by a failed array of its metadata with the first such error. */
static void fail_with_outputs(nv_array *const *outs, size_t nout, nv_array **res, size_t nres) {
  nv__error *e = NULL;
  for (size_t i = 0; i < nout && !e; i++) e = nv__node_known_error(outs[i]->node);
  if (!e) return;
  for (size_t j = 0; j < nres; j++) {
    if (!res[j] || nv__node_known_error(res[j]->node)) continue;
    const nv__output *o = nv__out(res[j]);
    nv_array *f = nv__array_failed(e, o->dtype, o->shape, o->ndim);
    nv_release(res[j]);
    res[j] = f;
  }
}

/* The complex convention at the API (MLX's, PyTorch's): a vjp returns cot · conj(f'(z)). The
 * rules compute the transpose, cot · f'(z) (DESIGN §8; simpler to compose, and what the fast
 * ops' and checkpoint's internal vjps use), so the public entry points conjugate complex
 * cotangents on the way in and complex gradients on the way out: conj ∘ vjp ∘ conj is MLX's
 * vjp for every function, holomorphic or not. Takes `x` over; real arrays pass unchanged. */
nv_array *nv__tf_conj_complex(nv_array *x) {
  if (!x || nv__out(x)->dtype != NV_DTYPE_COMPLEX64) return x;
  nv_array *c = nv_conjugate(x);
  nv_release(x);
  return c;
}

static void conj_all(nv_array **xs, size_t n) {
  for (size_t i = 0; i < n; i++) xs[i] = nv__tf_conj_complex(xs[i]);
}

/* Appends `n` arrays to `v` (when not NULL). */
static nv_status push_all(nv_vec *v, nv_array *const *xs, size_t n) {
  for (size_t i = 0; v && i < n; i++) {
    nv_status s = nv_vec_push(v, xs[i]);
    if (s != NV_OK) return s;
  }
  return NV_OK;
}

nv_status nv__tf_vjp(const char *op, const nv_closure *f, nv_array *const *primals, size_t n,
                     nv_array *const *cots, size_t ncot, nv_vec *outputs, nv_array **grads) {
  nv__rules_register();
  nv_status s = nv__tracing_enter();
  if (s != NV_OK) return s;
  trace t;
  s = trace_call(op, f, primals, n, NULL, &t);
  size_t nout = nv_vec_size(t.outs);
  nv_array **c = calloc(nout ? nout : 1, sizeof *c);
  if (s == NV_OK && !c) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  if (s == NV_OK && ncot != nout)
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: %zu cotangents given for %zu outputs", op,
                      ncot, nout);
  for (size_t i = 0; s == NV_OK && i < nout; i++) {
    nv_array *o = nv_vec_get(t.outs, i);
    if (!cots[i]) {
      s = nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: cotangent %zu is NULL", op, i);
    } else if (!nv__tf_same_shape(cots[i], o)) {
      s = shape_mismatch(op, "cotangent", i, cots[i], "output", o);
    } else {
      c[i] = nv_astype(cots[i], nv__out(o)->dtype);
    }
  }
  if (s == NV_OK) s = nv__tf_backward(op, t.args, n, nv_vec_data(t.outs), c, nout, grads);
  if (s == NV_OK) fail_with_outputs(nv_vec_data(t.outs), nout, grads, n);
  if (s == NV_OK) s = push_all(outputs, nv_vec_data(t.outs), nout);
  if (c) nv__tf_release_all(c, nout);
  free(c);
  trace_free(&t);
  nv__tracing_leave();
  return s;
}

/* The arrays of a list, checked non-NULL. */
static nv_status vec_args(const char *op, const nv_vec *v, const char *what) {
  if (!v) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL %s list", op, what);
  return NV_OK;
}

nv_status nv_vjp(const nv_closure *f, const nv_vec *primals, const nv_vec *cotangents,
                 nv_vec *outputs, nv_vec *vjps) {
  if (!f || !vjps) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vjp: NULL argument");
  nv_status s = vec_args("vjp", primals, "primals");
  if (s == NV_OK) s = vec_args("vjp", cotangents, "cotangents");
  if (s != NV_OK) return s;
  size_t n = nv_vec_size(primals);
  nv_array **g = calloc(n ? n : 1, sizeof *g);
  if (!g) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vjp: out of memory");
  nv__scope_suspend();
  nv_vec *outs = nv_vec_new();
  size_t ncot = nv_vec_size(cotangents);
  nv_array **cc = calloc(ncot ? ncot : 1, sizeof *cc);
  for (size_t i = 0; cc && i < ncot; i++)
    cc[i] = nv_vec_get(cotangents, i) ? nv__tf_conj_complex(nv_retain(nv_vec_get(cotangents, i)))
                                      : NULL;
  s = outs && cc ? nv__tf_vjp("vjp", f, nv_vec_data(primals), n, cc, ncot, outs, g)
                 : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vjp: out of memory");
  if (cc) nv__tf_release_all(cc, ncot);
  free(cc);
  if (s == NV_OK) conj_all(g, n);
  if (s == NV_OK) s = push_all(outputs, nv_vec_data(outs), nv_vec_size(outs));
  if (s == NV_OK) s = push_all(vjps, g, n);
  nv_vec_free(outs);
  nv__tf_release_all(g, n);
  free(g);
  nv__scope_resume();
  return s;
}

nv_status nv_jvp(const nv_closure *f, const nv_vec *primals, const nv_vec *tangents,
                 nv_vec *outputs, nv_vec *jvps) {
  if (!f || !jvps) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "jvp: NULL argument");
  nv_status s = vec_args("jvp", primals, "primals");
  if (s == NV_OK) s = vec_args("jvp", tangents, "tangents");
  if (s != NV_OK) return s;
  size_t n = nv_vec_size(primals);
  if (nv_vec_size(tangents) != n)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "jvp: %zu tangents given for %zu primals",
                         nv_vec_size(tangents), n);
  for (size_t i = 0; i < n; i++)
    if (!nv__tf_same_shape(nv_vec_get(tangents, i), nv_vec_get(primals, i)))
      return shape_mismatch("jvp", "tangent", i, nv_vec_get(tangents, i), "primal",
                            nv_vec_get(primals, i));
  nv__rules_register();
  nv__scope_suspend();
  if ((s = nv__tracing_enter()) != NV_OK) {
    nv__scope_resume();
    return s;
  }
  trace t;
  s = trace_call("jvp", f, nv_vec_data(primals), n, NULL, &t);
  size_t nout = nv_vec_size(t.outs);
  nv_array **tan = calloc(n ? n : 1, sizeof *tan), **ot = calloc(nout ? nout : 1, sizeof *ot);
  if (s == NV_OK && (!tan || !ot)) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (size_t i = 0; s == NV_OK && i < n; i++)
    tan[i] = nv_astype(nv_vec_get(tangents, i), nv__out(t.args[i])->dtype);
  if (s == NV_OK) s = nv__tf_forward("jvp", t.args, tan, n, nv_vec_data(t.outs), nout, ot);
  for (size_t j = 0; s == NV_OK && j < nout; j++)
    fail_with_outputs(nv_vec_data(t.outs) + j, 1, ot + j, 1);
  if (s == NV_OK) s = push_all(outputs, nv_vec_data(t.outs), nout);
  if (s == NV_OK) s = push_all(jvps, ot, nout);
  if (tan) nv__tf_release_all(tan, n);
  if (ot) nv__tf_release_all(ot, nout);
  free(tan);
  free(ot);
  trace_free(&t);
  nv__tracing_leave();
  nv__scope_resume();
  return s;
}

nv_status nv__tf_closure_jvp(const nv_closure *f, nv_array *const *xs, nv_array *const *tan,
                            int m, nv_array **ot, int nout) {
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *r = nv_vec_new();
  nv_status s = f && p && t && r ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "jvp: out of memory");
  for (int i = 0; s == NV_OK && i < m; i++) {
    nv_array *ti = tan[i] ? nv_retain(tan[i]) : nv_zeros_like(xs[i]);
    s = nv_vec_push(p, xs[i]);
    if (s == NV_OK) s = nv_vec_push(t, ti);
    nv_release(ti);
  }
  if (s == NV_OK) s = nv_jvp(f, p, t, NULL, r);
  for (int i = 0; s == NV_OK && i < nout; i++) ot[i] = nv_retain(nv_vec_get(r, (size_t)i));
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(r);
  return s;
}

/* ---- grad and value_and_grad ---- */

typedef struct grad_fn {
  nv_closure *f;
  bool with_value;
  size_t nargs;
  int args[];
} grad_fn;

static void grad_free(void *p) {
  grad_fn *g = p;
  nv_closure_release(g->f);
  nv__free(g);
}

static nv_status grad_run(grad_fn *g, const char *op, const nv_vec *inputs, nv_vec *outputs) {
  size_t n = nv_vec_size(inputs);
  for (size_t i = 0; i < g->nargs; i++)
    if ((size_t)g->args[i] >= n)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: argnum %d is out of range for %zu inputs",
                           op, g->args[i], n);
  bool *active = calloc(n ? n : 1, sizeof *active);
  nv_array **grads = calloc(g->nargs ? g->nargs : 1, sizeof *grads);
  if (!active || !grads) {
    free(active);
    free(grads);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  for (size_t i = 0; i < g->nargs; i++) active[g->args[i]] = true;
  nv_status s = nv__tracing_enter();
  if (s != NV_OK) {
    free(active);
    free(grads);
    return s;
  }
  trace t;
  s = trace_call(op, g->f, nv_vec_data(inputs), n, active, &t);
  nv_array *value = s == NV_OK ? nv_vec_get(t.outs, 0) : NULL;
  if (s == NV_OK && nv_array_size(value) != 1) {
    char sh[NV__SHAPE_BUF];
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                      "%s: the function must return a scalar first output, got shape %s", op,
                      nv__shape_str(nv__out(value)->shape, nv__out(value)->ndim, sh, sizeof sh));
  }
  if (s == NV_OK) {
    nv_array **src = malloc(g->nargs * sizeof *src + 1);
    nv_array *one = nv_ones_like(value);
    if (!src) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    for (size_t i = 0; src && i < g->nargs; i++) src[i] = t.args[g->args[i]];
    if (s == NV_OK) s = nv__tf_backward(op, src, g->nargs, &value, &one, 1, grads);
    if (s == NV_OK) conj_all(grads, g->nargs); /* the API's convention (nv__tf_conj_complex) */
    if (s == NV_OK) fail_with_outputs(&value, 1, grads, g->nargs);
    nv_release(one);
    free(src);
  }
  if (s == NV_OK && g->with_value) s = push_all(outputs, nv_vec_data(t.outs), nv_vec_size(t.outs));
  if (s == NV_OK) s = push_all(outputs, grads, g->nargs);
  nv__tf_release_all(grads, g->nargs);
  free(grads);
  free(active);
  trace_free(&t);
  nv__tracing_leave();
  return s;
}

static nv_status grad_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  grad_fn *g = payload;
  nv__rules_register();
  nv__scope_suspend();
  nv_status s = grad_run(g, g->with_value ? "value_and_grad" : "grad", inputs, outputs);
  nv__scope_resume();
  return s;
}

static nv_closure *make_grad(const char *op, const nv_closure *f, const int *argnums,
                             size_t nargnums, bool with_value) {
  static const int zero = 0;
  if (!f) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL function", op);
    return NULL;
  }
  if (!argnums) {
    argnums = &zero;
    nargnums = 1;
  }
  for (size_t i = 0; i < nargnums; i++) {
    if (argnums[i] < 0) {
      nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: argnum %d is negative", op, argnums[i]);
      return NULL;
    }
    for (size_t j = 0; j < i; j++)
      if (argnums[j] == argnums[i]) {
        nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: argnum %d is repeated", op, argnums[i]);
        return NULL;
      }
  }
  grad_fn *g = nv__malloc(sizeof *g + nargnums * sizeof(int));
  if (!g) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  g->f = nv_closure_retain((nv_closure *)f);
  g->with_value = with_value;
  g->nargs = nargnums;
  memcpy(g->args, argnums, nargnums * sizeof(int));
  nv_closure *c = nv_closure_new(grad_call, g, grad_free);
  if (!c) grad_free(g);
  return c;
}

nv_closure *nv_grad(const nv_closure *f, const int *argnums, size_t nargnums) {
  return make_grad("grad", f, argnums, nargnums, false);
}

nv_closure *nv_value_and_grad(const nv_closure *f, const int *argnums, size_t nargnums) {
  return make_grad("value_and_grad", f, argnums, nargnums, true);
}
