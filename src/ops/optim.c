/* Builders of the optim family: the fused Adam/AdamW update (adam_update). The decided rules
 * are written in src/ops/optim.h. */
#include "ops/optim.h"
#include "ops/ops_internal.h"

static const char *const OP = "adam_update";

static bool real_float(nv_dtype t) {
  return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16 || t == NV_DTYPE_FLOAT32 ||
         t == NV_DTYPE_FLOAT64;
}

static bool same_shape(const nv__output *a, const nv__output *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int));
}

/* The three outputs of a builder that failed before it had a node: `f` and two more failed
 * arrays with its error, each registered with the calling thread's scope. */
static nv_status fail_all(nv_array *f, nv_array **out) {
  nv__error *err = nv__node_known_error(f->node);
  out[0] = f;
  out[1] = nv__array_failed_nometa(err);
  out[2] = nv__array_failed_nometa(err);
  return nv_array_status(f);
}

/* Checks the arrays' dtypes and shapes: NULL when they are fine, else the failed array. */
static nv_array *check(nv_array *const *xs, int nin) {
  const char *names[] = {"p", "g", "m", "v"};
  const nv__output *p = nv__out(xs[0]);
  char s0[NV__SHAPE_BUF], s1[NV__SHAPE_BUF];
  if (!real_float(p->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "p has dtype %s; the update takes float16, bfloat16, float32 or float64",
                        nv_dtype_name(p->dtype));
  for (int i = 1; i < NV__ADAM_SCALARS; i++) {
    const nv__output *o = nv__out(xs[i]);
    if (o->dtype != p->dtype)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "%s has dtype %s but p %s", names[i],
                          nv_dtype_name(o->dtype), nv_dtype_name(p->dtype));
    if (!same_shape(o, p))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "%s has shape %s but p %s", names[i],
                          nv__shape_str(o->shape, o->ndim, s0, sizeof s0),
                          nv__shape_str(p->shape, p->ndim, s1, sizeof s1));
  }
  for (int i = NV__ADAM_SCALARS; i < nin; i++) {
    const nv__output *o = nv__out(xs[i]);
    if (o->ndim != 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the scalars (lr, decay, c1, c2) must be 0-d; input %d has shape %s", i,
                          nv__shape_str(o->shape, o->ndim, s0, sizeof s0));
    if (o->dtype == NV_DTYPE_COMPLEX64)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the scalars (lr, decay, c1, c2) must be real; input %d is complex64",
                          i);
  }
  return NULL;
}

/* The node over `xs` (the scalars converted to p's dtype), or NULL (thread error set). */
static nv__node *build(nv_array *const *xs, int nin, const nv__adam_params *params) {
  const nv__output *p = nv__out(xs[0]);
  nv_array *in[NV__ADAM_SCALARS + 3];
  int bad = -1;
  for (int i = 0; i < nin; i++) {
    in[i] = nv__cast_unscoped(xs[i], p->dtype);
    if (bad < 0 && !nv__meta_known(in[i])) bad = i;
  }
  nv__node *n = NULL;
  if (bad >= 0) {
    nv_array_status(in[bad]); /* a cast that failed itself (out of memory) */
  } else {
    n = nv__node_new(NV__PRIM_ADAM_UPDATE, in, nin, 3, sizeof *params);
    if (!n) nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (n) {
    nv__node_inherit_error(n);
    *(nv__adam_params *)n->params = *params;
    for (int i = 0; n && i < 3; i++)
      if (nv__output_set_shape(&n->out[i], p->dtype, p->shape, p->ndim) != NV_OK) {
        nv__node_release(n);
        n = NULL;
      }
    for (int i = 0; n && i < nin; i++) nv__node_inherit_tracer(n, in[i]->node);
  }
  for (int i = 0; i < nin; i++) nv_release(in[i]);
  return n;
}

nv_status nv__adam_update(const nv_array *p, const nv_array *g, const nv_array *m,
                          const nv_array *v, const nv_array *lr, const nv_array *decay,
                          const nv_array *c1, const nv_array *c2, const nv__adam_params *params,
                          nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the output list is NULL", OP);
  if (!params)
    return fail_all(nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "the parameters are NULL"), out);
  nv_array *xs[NV__ADAM_SCALARS + 3] = {(nv_array *)p, (nv_array *)g, (nv_array *)m,
                                        (nv_array *)v};
  int nin = NV__ADAM_SCALARS;
  xs[nin++] = (nv_array *)(params->bias_correction ? c1 : lr);
  if (params->bias_correction) xs[nin++] = (nv_array *)c2;
  if (params->decoupled) xs[nin++] = (nv_array *)decay;
  nv_array *f = nv__op_check(OP, (const nv_array *const *)xs, nin);
  if (!f) f = check(xs, nin);
  if (f) return fail_all(f, out);
  nv__node *n = build(xs, nin, params);
  if (!n) return fail_all(nv__op_finish(OP, NULL), out);
  nv__node_retain(n);
  nv__node_retain(n);
  for (int i = 0; i < 3; i++) out[i] = nv__array_new(n, i);
  return nv_array_status(out[0]);
}
