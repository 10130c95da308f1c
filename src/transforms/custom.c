/* Custom functions and checkpoint (DESIGN §8). A custom function runs f, then wraps its outputs
 * in a CUSTOM node whose inputs are (f's outputs..., f's inputs..., keeper): output i is input
 * i (no copy), and the node's rules call the user's closures with f's inputs, or, where none is
 * given, pass through to f's outputs so the transform goes through f's own graph. The keeper is
 * an empty array whose buffer holds a reference to the closures, so they live exactly as long
 * as a node that may need them (nodes have no parameter destructors). */
#include <stdlib.h>

#include "transforms/transforms_internal.h"

typedef struct custom {
  atomic_long refs;
  nv_closure *f, *vjp, *jvp, *vmap;
  bool recompute; /* checkpoint: the vjp traces f again */
} custom;

typedef struct custom_params {
  custom *c;
  int nout, nin;
} custom_params;

static void custom_release(void *p) {
  custom *c = p;
  if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  nv_closure_release(c->f);
  nv_closure_release(c->vjp);
  nv_closure_release(c->jvp);
  nv_closure_release(c->vmap);
  nv__free(c);
}

/* An empty uint8 array whose buffer holds one reference to `c`. */
static nv_array *keeper(custom *c) {
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  nv__buffer *b = nv__buffer_wrap(c, 0, NV__BUF_NOCOPY, custom_release, c);
  if (!b) {
    custom_release(c);
    return nv__array_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  }
  int shape[1] = {0};
  nv_array *k = nv__array_from_buffer(b, 0, NV_DTYPE_UINT8, shape, 1, NULL);
  nv__buffer_release(b);
  return k;
}

/* The CUSTOM node over f's outputs `outs` and inputs `ins`; pushes its outputs. */
static nv_status wrap(custom *c, nv_array *const *outs, int nout, nv_array *const *ins, int nin,
                      nv_vec *outputs) {
  nv_array *k = keeper(c);
  nv_status s = nv_array_status(k);
  nv_array **all = calloc((size_t)(nout + nin + 1), sizeof *all);
  if (s == NV_OK && !all) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  nv__node *n = NULL;
  if (s == NV_OK) {
    for (int i = 0; i < nout; i++) all[i] = outs[i];
    for (int i = 0; i < nin; i++) all[nout + i] = ins[i];
    all[nout + nin] = k;
    n = nv__node_new(NV__PRIM_CUSTOM, all, nout + nin + 1, nout, sizeof(custom_params));
    if (!n) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  }
  for (int i = 0; s == NV_OK && i < nout; i++) {
    const nv__output *o = nv__out(outs[i]);
    s = nv__output_set_shape(&n->out[i], o->dtype, o->shape, o->ndim);
    if (s == NV_OK) nv__output_set_strides(&n->out[i], o->strides);
  }
  if (s == NV_OK) {
    for (int i = 0; i < nout + nin; i++) nv__node_inherit_tracer(n, all[i]->node);
    *(custom_params *)n->params = (custom_params){c, nout, nin};
    for (int i = 0; s == NV_OK && i < nout; i++) {
      nv_array *h = nv__tf_handle(n, i);
      s = nv_vec_push(outputs, h);
      nv_release(h);
    }
  }
  if (n) nv__node_release(n);
  free(all);
  nv_release(k);
  return s;
}

static nv_status custom_run(custom *c, const nv_vec *inputs, nv_vec *outputs) {
  nv_vec *outs = nv_vec_new();
  if (!outs) return NV_ERR_OUT_OF_MEMORY;
  size_t nin = nv_vec_size(inputs);
  nv_status s = nv__closure_call(c->f, nv_vec_data(inputs), nin, outs);
  size_t nout = nv_vec_size(outs);
  if (s == NV_OK && nout == 0)
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT, "custom_function: the function returned no outputs");
  bool failed = false;
  for (size_t i = 0; s == NV_OK && i < nout; i++)
    failed |= nv__node_known_error(nv_vec_get(outs, i)->node) != NULL;
  for (size_t i = 0; s == NV_OK && i < nin; i++)
    failed |= nv__node_known_error(nv_vec_get(inputs, i)->node) != NULL;
  if (s == NV_OK) {
    if (failed) {
      /* Failed values carry their errors; there is nothing to differentiate. */
      for (size_t i = 0; s == NV_OK && i < nout; i++) s = nv_vec_push(outputs, nv_vec_get(outs, i));
    } else {
      s = wrap(c, nv_vec_data(outs), (int)nout, nv_vec_data(inputs), (int)nin, outputs);
    }
  }
  nv_vec_free(outs);
  return s;
}

static nv_status custom_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  nv__rules_register();
  nv__scope_suspend();
  nv_status s = custom_run(payload, inputs, outputs);
  nv__scope_resume();
  return s;
}

/* ---- Rules ---- */

/* Calls a user rule on `n` arrays, expecting `want` results of the given shapes (`like`). */
static nv_status call_rule(const char *rule, const nv_closure *f, nv_array *const *args, size_t n,
                           nv_array *const *like, size_t want, nv_vec *res) {
  nv_status s = nv__closure_call(f, args, n, res);
  if (s != NV_OK) return s;
  if (nv_vec_size(res) < want)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "custom_function: the %s rule returned %zu arrays, expected %zu", rule,
                         nv_vec_size(res), want);
  for (size_t i = 0; like && i < want; i++)
    if (!nv__tf_same_shape(nv_vec_get(res, i), like[i]))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "custom_function: the %s rule's result %zu has the wrong shape", rule, i);
  return NV_OK;
}

static nv_status custom_vjp(const nv__node *n, nv_array *const *in, nv_array *const *out,
                            nv_array *const *cot, const bool *want, nv_array **grad) {
  const custom_params *p = n->params;
  int nout = p->nout, nin = p->nin;
  if (!p->c->vjp && !p->c->recompute) {
    for (int i = 0; i < nout; i++)
      if (want[i] && cot[i]) grad[i] = nv_retain(cot[i]);
    return NV_OK;
  }
  nv_array **args = calloc((size_t)(nin + 2 * nout) + 1, sizeof *args);
  nv_vec *res = nv_vec_new();
  nv_status s = args && res ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  for (int i = 0; s == NV_OK && i < nin; i++) args[i] = nv_retain(in[nout + i]);
  for (int i = 0; s == NV_OK && i < nout; i++) {
    args[nin + i] = cot[i] ? nv_retain(cot[i]) : nv_zeros_like(out[i]);
    /* A user's rule speaks the API's complex convention (MLX's: nv__tf_conj_complex). */
    if (!p->c->recompute) args[nin + i] = nv__tf_conj_complex(args[nin + i]);
    args[nin + nout + i] = nv_retain(out[i]);
  }
  if (s == NV_OK && p->c->recompute) {
    nv_array **g = calloc((size_t)nin + 1, sizeof *g);
    s = g ? nv__tf_vjp("checkpoint", p->c->f, args, (size_t)nin, args + nin, (size_t)nout, NULL, g)
          : nv__set_error(NV_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
    for (int i = 0; s == NV_OK && i < nin; i++) nv_vec_push(res, g[i]);
    if (g) nv__tf_release_all(g, (size_t)nin);
    free(g);
  } else if (s == NV_OK) {
    s = call_rule("vjp", p->c->vjp, args, (size_t)(nin + 2 * nout), in + nout, (size_t)nin, res);
  }
  for (int i = 0; s == NV_OK && i < nin; i++)
    if (want[nout + i]) {
      nv_array *r = nv_retain(nv_vec_get(res, (size_t)i));
      grad[nout + i] = p->c->recompute ? r : nv__tf_conj_complex(r);
    }
  if (args) nv__tf_release_all(args, (size_t)(nin + 2 * nout));
  free(args);
  nv_vec_free(res);
  return s;
}

static nv_status custom_jvp(const nv__node *n, nv_array *const *in, nv_array *const *out,
                            nv_array *const *tan, nv_array **ot) {
  const custom_params *p = n->params;
  int nout = p->nout, nin = p->nin;
  if (!p->c->jvp) {
    for (int i = 0; i < nout; i++) ot[i] = tan[i] ? nv_retain(tan[i]) : NULL;
    return NV_OK;
  }
  nv_array **args = calloc((size_t)(2 * nin) + 1, sizeof *args);
  nv_vec *res = nv_vec_new();
  nv_status s = args && res ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  for (int i = 0; s == NV_OK && i < nin; i++) {
    args[i] = nv_retain(in[nout + i]);
    args[nin + i] = tan[nout + i] ? nv_retain(tan[nout + i]) : nv_zeros_like(in[nout + i]);
  }
  if (s == NV_OK) s = call_rule("jvp", p->c->jvp, args, (size_t)(2 * nin), out, (size_t)nout, res);
  for (int i = 0; s == NV_OK && i < nout; i++) ot[i] = nv_retain(nv_vec_get(res, (size_t)i));
  if (args) nv__tf_release_all(args, (size_t)(2 * nin));
  free(args);
  nv_vec_free(res);
  return s;
}

/* Reads a 1-D int32 axes array of `n` entries. */
static nv_status read_axes(nv_array *a, int *axes, int n) {
  if (nv__out(a)->dtype != NV_DTYPE_INT32 || nv_array_size(a) != n)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "custom_function: the vmap rule must end with an int32 array of %d "
                         "output axes",
                         n);
  return nv_array_read(a, axes, (size_t)n * sizeof(int32_t));
}

static nv_status custom_vmap(const nv__node *n, nv_array *const *in, const int *axes,
                             nv_array **out, int *oax) {
  const custom_params *p = n->params;
  int nout = p->nout, nin = p->nin;
  if (!p->c->vmap) {
    for (int i = 0; i < nout; i++) {
      out[i] = nv_retain(in[i]);
      oax[i] = axes[i];
    }
    return NV_OK;
  }
  nv_array **args = calloc((size_t)nin + 1, sizeof *args);
  int32_t *ax = calloc((size_t)nin + 1, sizeof *ax);
  nv_vec *res = nv_vec_new();
  nv_status s = args && ax && res ? NV_OK
                                  : nv__set_error(NV_ERR_OUT_OF_MEMORY, "custom_function: out of memory");
  for (int i = 0; s == NV_OK && i < nin; i++) {
    args[i] = nv_retain(in[nout + i]);
    ax[i] = axes[nout + i];
  }
  if (s == NV_OK) {
    int shape[1] = {nin};
    args[nin] = nv_array_from_data(ax, shape, 1, NV_DTYPE_INT32);
    s = call_rule("vmap", p->c->vmap, args, (size_t)nin + 1, NULL, (size_t)nout + 1, res);
  }
  if (s == NV_OK) s = read_axes(nv_vec_get(res, (size_t)nout), oax, nout);
  for (int i = 0; s == NV_OK && i < nout; i++) {
    out[i] = nv_retain(nv_vec_get(res, (size_t)i));
    if (oax[i] < -1 || oax[i] >= nv__out(out[i])->ndim)
      s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                        "custom_function: the vmap rule gave output %d the axis %d", i, oax[i]);
  }
  if (args) nv__tf_release_all(args, (size_t)nin + 1);
  free(args);
  free(ax);
  nv_vec_free(res);
  return s;
}

void nv__rules_register_custom(nv__prim_rule *r) {
  r[NV__PRIM_CUSTOM] = (nv__prim_rule){custom_vjp, custom_jvp, custom_vmap};
}

/* ---- Constructors ---- */

static nv_closure *make_custom(const nv_closure *f, const nv_closure *vjp, const nv_closure *jvp,
                               const nv_closure *vmap, bool recompute, const char *op) {
  if (!f) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL function", op);
    return NULL;
  }
  custom *c = nv__malloc(sizeof *c);
  if (!c) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  atomic_init(&c->refs, 1);
  c->f = nv_closure_retain((nv_closure *)f);
  c->vjp = nv_closure_retain((nv_closure *)vjp);
  c->jvp = nv_closure_retain((nv_closure *)jvp);
  c->vmap = nv_closure_retain((nv_closure *)vmap);
  c->recompute = recompute;
  nv_closure *r = nv_closure_new(custom_call, c, custom_release);
  if (!r) custom_release(c);
  return r;
}

nv_closure *nv_custom_function(const nv_closure *f, const nv_closure *vjp, const nv_closure *jvp,
                               const nv_closure *vmap) {
  return make_custom(f, vjp, jvp, vmap, false, "custom_function");
}

nv_closure *nv_checkpoint(const nv_closure *f) {
  return make_custom(f, NULL, NULL, NULL, true, "checkpoint");
}
