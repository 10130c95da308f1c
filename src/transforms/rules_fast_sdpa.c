/* Transform rules of the fast family: each goes through the primitive's composed fallback
 * (as MLX's fast primitives do), so its results are ordinary differentiable, batchable ops. */
#include <stdlib.h>

#include "ops/fast_sdpa.h"
#include "transforms/rule_decls.h"

/* ---- scaled_dot_product_attention ---- */

/* The fallback as a closure over the node's differentiable inputs: q, k, v, then an additive
 * mask and the sinks where the node has them. A bool mask is no argument (nothing to
 * differentiate): the closure holds it. */
typedef struct sdpa_fn {
  nv__sdpa_params p;
  nv_array *bool_mask; /* held, or NULL */
  nv_dtype out;
} sdpa_fn;

static void sdpa_fn_free(void *payload) {
  sdpa_fn *c = payload;
  nv_release(c->bool_mask);
  free(c);
}

static nv_status sdpa_fn_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const sdpa_fn *c = payload;
  nv_array *const *x = nv_vec_data(inputs);
  const nv_array *mask = c->bool_mask, *sinks = NULL;
  int n = 3;
  if (c->p.mask == NV__SDPA_MASK_ADD) mask = x[n++];
  if (c->p.sinks) sinks = x[n++];
  nv__scope_suspend();
  nv_array *r = nv__sdpa_compose(x[0], x[1], x[2], &c->p, mask, sinks, c->out);
  nv__scope_resume();
  nv_status s = nv_array_status(r);
  if (s == NV_OK) s = nv_vec_push(outputs, r);
  nv_release(r);
  return s;
}

/* The closure for node `n` and how many of its inputs it takes (*nargs); the bool mask is
 * input 3 when the node has one. */
static nv_closure *sdpa_closure(const nv__node *n, nv_array *const *in, int *nargs) {
  const nv__sdpa_params *p = n->params;
  sdpa_fn *c = calloc(1, sizeof *c);
  if (!c) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "scaled_dot_product_attention: out of memory");
    return NULL;
  }
  c->p = *p;
  c->out = nv__out(in[0])->dtype;
  if (p->mask == NV__SDPA_MASK_BOOL) c->bool_mask = nv_retain(in[3]);
  *nargs = 3 + (p->mask == NV__SDPA_MASK_ADD) + p->sinks;
  nv_closure *f = nv_closure_new(sdpa_fn_call, c, sdpa_fn_free);
  if (!f) sdpa_fn_free(c);
  return f;
}

/* The node's input count. */
static int sdpa_inputs(const nv__sdpa_params *p) {
  return 3 + (p->mask != NV__SDPA_MASK_NONE) + p->sinks;
}

/* Input i of the node as argument j of the closure (-1: no argument). */
static int sdpa_arg(const nv__sdpa_params *p, int i) {
  if (i < 3) return i;
  if (i == 3 && p->mask == NV__SDPA_MASK_BOOL) return -1;
  return p->mask == NV__SDPA_MASK_BOOL ? i - 1 : i;
}

VJP(vjp_sdpa) {
  int na = 0, nin = sdpa_inputs(n->params);
  nv_closure *f = sdpa_closure(n, in, &na);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_array *args[5], *g[5] = {0};
  for (int i = 0; i < nin; i++) {
    int j = sdpa_arg(n->params, i);
    if (j >= 0) args[j] = in[i];
  }
  nv_status s = nv__tf_vjp("scaled_dot_product_attention", f, args, (size_t)na, cot, 1, NULL, g);
  for (int i = 0; s == NV_OK && i < nin; i++) {
    int j = sdpa_arg(n->params, i);
    if (j >= 0 && want[i]) {
      grad[i] = g[j];
      g[j] = NULL;
    }
  }
  nv__tf_release_all(g, (size_t)na);
  nv_closure_release(f);
  return s;
}

JVP(jvp_sdpa) {
  int na = 0, nin = sdpa_inputs(n->params);
  nv_closure *f = sdpa_closure(n, in, &na);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_vec *prim = nv_vec_new(), *tans = nv_vec_new(), *res = nv_vec_new();
  nv_status s = prim && tans && res
                    ? NV_OK
                    : nv__set_error(NV_ERR_OUT_OF_MEMORY, "scaled_dot_product_attention: out of memory");
  for (int i = 0; s == NV_OK && i < nin; i++) {
    if (sdpa_arg(n->params, i) < 0) continue;
    s = nv_vec_push(prim, in[i]);
    nv_array *t = tan[i] ? nv_retain(tan[i]) : nv_zeros_like(in[i]);
    if (s == NV_OK) s = nv_vec_push(tans, t);
    nv_release(t);
  }
  if (s == NV_OK) s = nv_jvp(f, prim, tans, NULL, res);
  if (s == NV_OK) ot[0] = nv_retain(nv_vec_get(res, 0));
  nv_vec_free(prim);
  nv_vec_free(tans);
  nv_vec_free(res);
  nv_closure_release(f);
  return s;
}

/* The fallback on the inputs with their batch axes in front (q, k, v and the mask gain a
 * leading axis; batched sinks [V, Hq] become [V, 1, Hq] so that they line up with q's
 * [V, B] in front of the heads). */
VMAP(vmap_sdpa) {
  const nv__sdpa_params *p = n->params;
  int nin = sdpa_inputs(p);
  nv_array *x[5] = {0};
  nv_status s = NV_OK;
  for (int i = 0; i < nin; i++) {
    bool is_sinks = p->sinks && i == nin - 1;
    x[i] = nv__tf_front(in[i], axes[i], is_sinks ? 1 : 4);
    if (is_sinks && axes[i] >= 0) {
      const nv__output *o = nv__out(x[i]);
      int shape[3] = {o->shape[0], 1, o->shape[1]};
      nv_array *r = nv_reshape(x[i], shape, 3);
      nv_release(x[i]);
      x[i] = r;
    }
  }
  const nv_array *mask = p->mask != NV__SDPA_MASK_NONE ? x[3] : NULL;
  const nv_array *sinks = p->sinks ? x[nin - 1] : NULL;
  out[0] = nv__sdpa_compose(x[0], x[1], x[2], p, mask, sinks, nv__out(in[0])->dtype);
  s = nv_array_status(out[0]);
  oax[0] = 0;
  nv__tf_release_all(x, (size_t)nin);
  return s;
}

void nv__rules_register_fast_sdpa(nv__prim_rule *r) {
  r[NV__PRIM_FAST_SDPA] = (nv__prim_rule){vjp_sdpa, jvp_sdpa, vmap_sdpa};
}
