/* Transform rules of paged attention: its vjp, jvp and vmap all go through the composed form
 * (nv__paged_compose, src/ops/fast_paged.c: a take of the keys and values through the block
 * table, then masked attention), as MLX's fast primitives do. The block tables and context
 * lengths are integers: only q and the pools have derivatives. */
#include <stdlib.h>

#include "ops/fast_paged.h"
#include "transforms/rule_decls.h"

/* The closure's payload: the scale and the result dtype. */
typedef struct paged_fn {
  float scale;
  nv_dtype out;
} paged_fn;

static nv_status paged_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const paged_fn *c = payload;
  nv_array *const *x = nv_vec_data(inputs);
  nv__scope_suspend();
  nv_array *r = nv__paged_compose(x[0], x[1], x[2], x[3], x[4], c->scale, c->out);
  nv__scope_resume();
  nv_status s = nv_array_status(r);
  if (s == NV_OK) s = nv_vec_push(outputs, r);
  nv_release(r);
  return s;
}

/* The composed form as a closure over the node's five inputs. */
static nv_closure *paged_closure(const nv__node *n) {
  paged_fn *c = malloc(sizeof *c);
  nv_closure *f = c ? nv_closure_new(paged_call, c, free) : NULL;
  if (c && !f) free(c);
  if (!f) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "paged_attention: out of memory");
    return NULL;
  }
  c->scale = ((const nv__paged_params *)n->params)->scale;
  c->out = n->out[0].dtype;
  return f;
}

VJP(vjp_paged_attention) {
  nv_closure *f = paged_closure(n);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_array *g[5] = {NULL, NULL, NULL, NULL, NULL};
  nv_status s = nv__tf_vjp("paged_attention", f, in, 5, cot, 1, NULL, g);
  for (int i = 0; s == NV_OK && i < 3; i++) {
    if (want[i]) {
      grad[i] = g[i];
      g[i] = NULL;
    }
  }
  nv__tf_release_all(g, 5);
  nv_closure_release(f);
  return s;
}

JVP(jvp_paged_attention) {
  nv_closure *f = paged_closure(n);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = nv__tf_closure_jvp(f, in, tan, 5, ot, 1);
  nv_closure_release(f);
  return s;
}

/* The composed form mapped over the batched inputs (unbatched ones passed whole). */
VMAP(vmap_paged_attention) {
  nv_closure *f = paged_closure(n);
  nv_vec *args = nv_vec_new(), *r = nv_vec_new();
  int in_axes[5], zero = 0;
  for (int i = 0; i < 5; i++) in_axes[i] = axes[i] >= 0 ? axes[i] : NV_VMAP_NONE;
  nv_closure *m = f ? nv_vmap(f, in_axes, 5, &zero, 1) : NULL;
  nv_status s = m && args && r ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; s == NV_OK && i < 5; i++) s = nv_vec_push(args, in[i]);
  if (s == NV_OK) s = nv_closure_apply(m, args, r);
  if (s == NV_OK) {
    *out = nv_retain(nv_vec_get(r, 0));
    *oax = 0;
  }
  nv_vec_free(args);
  nv_vec_free(r);
  nv_closure_release(m);
  nv_closure_release(f);
  return s;
}

void nv__rules_register_fast_paged(nv__prim_rule *r) {
  r[NV__PRIM_FAST_PAGED_ATTENTION] =
      (nv__prim_rule){vjp_paged_attention, jvp_paged_attention, vmap_paged_attention};
}
