/* Transform rules of norm_rope and gated_delta_slots: their vjp, jvp and vmap all go through
 * their composed forms (src/ops/fast_norm_rope.c, src/ops/fast_delta.c), as MLX's Custom
 * primitives do, over the node's inputs in the node's order: the integer inputs (positions,
 * cache positions, slots) get no gradient. vmap maps the composed form over the batched
 * inputs (unbatched ones passed whole). */
#include <stdlib.h>
#include <string.h>

#include "ops/fast_state.h"
#include "transforms/rule_decls.h"

/* What a composed closure needs of its node: the primitive and its parameters. */
typedef struct state_payload {
  int prim, ninputs;
  union {
    nv__fast_norm_rope_params nr;
    nv__fast_delta_params delta;
  } u;
} state_payload;

/* The node's outputs from its inputs in core ops. */
static nv_status state_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const state_payload *p = payload;
  nv_array *o[2] = {NULL, NULL};
  int nout = 1;
  if (p->prim == NV__PRIM_FAST_GATED_DELTA) {
    nv__fast_delta_composed(nv_vec_get(inputs, 0), nv_vec_get(inputs, 1), nv_vec_get(inputs, 2),
                            nv_vec_get(inputs, 3), nv_vec_get(inputs, 4), nv_vec_get(inputs, 5),
                            nv_vec_get(inputs, 6), p->u.delta.scale, o);
    nout = 2;
  } else {
    const bool cache = p->prim == NV__PRIM_FAST_NORM_ROPE_CACHE;
    int i = cache ? 4 : 2;
    const nv_array *w = p->u.nr.has_weight ? nv_vec_get(inputs, (size_t)i++) : NULL;
    const nv_array *fq = p->u.nr.has_freqs ? nv_vec_get(inputs, (size_t)i) : NULL;
    o[0] = nv__fast_norm_rope_composed(nv_vec_get(inputs, cache ? 1 : 0),
                                       nv_vec_get(inputs, cache ? 2 : 1), w, fq,
                                       cache ? nv_vec_get(inputs, 0) : NULL,
                                       cache ? nv_vec_get(inputs, 3) : NULL, &p->u.nr);
  }
  /* The closure's scope owns o[] (and releases them when the call returns); outputs keeps
   * them. */
  nv_status s = NV_OK;
  for (int i = 0; s == NV_OK && i < nout; i++) s = nv_array_status(o[i]);
  for (int i = 0; s == NV_OK && i < nout; i++) s = nv_vec_push(outputs, o[i]);
  return s;
}

static nv_closure *state_closure(const nv__node *n) {
  state_payload *p = calloc(1, sizeof *p);
  nv_closure *f = p ? nv_closure_new(state_call, p, free) : NULL;
  if (p && !f) free(p);
  if (!f) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[n->prim].name);
    return NULL;
  }
  p->prim = n->prim;
  p->ninputs = n->ninputs;
  if (n->prim == NV__PRIM_FAST_GATED_DELTA)
    p->u.delta = *(const nv__fast_delta_params *)n->params;
  else
    p->u.nr = *(const nv__fast_norm_rope_params *)n->params;
  return f;
}

/* Whether input i of the node is an integer index (no gradient). */
static bool index_input(const nv__node *n, int i) {
  switch (n->prim) {
    case NV__PRIM_FAST_NORM_ROPE: return i == 1;
    case NV__PRIM_FAST_NORM_ROPE_CACHE: return i == 2 || i == 3;
    default: return i == 6; /* gated_delta_slots's slots */
  }
}

VJP(vjp_state) {
  nv_closure *f = state_closure(n);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_array *c[2] = {NULL, NULL}, *g[8] = {NULL};
  for (int i = 0; i < n->noutputs; i++) c[i] = cot[i] ? nv_retain(cot[i]) : nv_zeros_like(out[i]);
  nv_status s = nv__tf_vjp("vjp", f, in, (size_t)n->ninputs, c, (size_t)n->noutputs, NULL, g);
  for (int i = 0; s == NV_OK && i < n->ninputs; i++) {
    if (want[i] && !index_input(n, i)) {
      grad[i] = g[i];
      g[i] = NULL;
    }
  }
  nv__tf_release_all(g, 8);
  nv__tf_release_all(c, 2);
  nv_closure_release(f);
  return s;
}

JVP(jvp_state) {
  nv_closure *f = state_closure(n);
  nv_status s = nv__tf_closure_jvp(f, in, tan, n->ninputs, ot, n->noutputs);
  nv_closure_release(f);
  return s;
}

VMAP(vmap_state) {
  nv_closure *f = state_closure(n);
  nv_vec *args = nv_vec_new(), *r = nv_vec_new();
  int in_axes[8], zero[2] = {0, 0};
  for (int i = 0; i < n->ninputs; i++) in_axes[i] = axes[i] >= 0 ? axes[i] : NV_VMAP_NONE;
  nv_closure *m = f ? nv_vmap(f, in_axes, (size_t)n->ninputs, zero, (size_t)n->noutputs) : NULL;
  nv_status s = m && args && r ? NV_OK
                               : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; s == NV_OK && i < n->ninputs; i++) s = nv_vec_push(args, in[i]);
  if (s == NV_OK) s = nv_closure_apply(m, args, r);
  for (int i = 0; s == NV_OK && i < n->noutputs; i++) {
    out[i] = nv_retain(nv_vec_get(r, (size_t)i));
    oax[i] = 0;
  }
  nv_vec_free(args);
  nv_vec_free(r);
  nv_closure_release(m);
  nv_closure_release(f);
  return s;
}

void nv__rules_register_fast_state(nv__prim_rule *r) {
  r[NV__PRIM_FAST_NORM_ROPE] = (nv__prim_rule){vjp_state, jvp_state, vmap_state};
  r[NV__PRIM_FAST_NORM_ROPE_CACHE] = (nv__prim_rule){vjp_state, jvp_state, vmap_state};
  r[NV__PRIM_FAST_GATED_DELTA] = (nv__prim_rule){vjp_state, jvp_state, vmap_state};
}
