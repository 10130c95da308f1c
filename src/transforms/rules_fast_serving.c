/* Transform rules of the fast family's serving kernels. sorted_offsets is integer-valued: no
 * gradient, and vmap runs its composed count per batch (src/ops/fast_serving.c). causal_softmax
 * is a softmax over each row's seen columns with zeros elsewhere: its vjp is softmax's on the
 * output y, y (g - sum(g y)) over the last axis in the compute type (the unseen columns have
 * y = 0, so nothing flows through them); its jvp differentiates the composed form
 * (src/ops/fast_serving.c), as MLX's Custom primitives do; vmap runs the fused op with the
 * batch axis in front (the rows of a batch stay whole blocks). paged_write's vjp, jvp and vmap
 * all go through its composed form, a scatter (src/ops/fast_serving.c): the slots are
 * integers, so only the pool and the values have derivatives. conv_slots's go through its
 * composed form too (a take of the states, the weighted window sum, a scatter of the shifted
 * windows), for its two outputs. */
#include <stdlib.h>

#include "ops/fast_serving.h"
#include "transforms/rule_decls.h"

VJP(vjp_none) { return NV_OK; }
JVP(jvp_none) { return NV_OK; }

VMAP(vmap_offsets) {
  const nv__fast_offsets_params *p = n->params;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0); /* the one input is the batched one */
  *out = nv__fast_offsets_composed(x, p->groups, n->out[0].dtype);
  nv_release(x);
  *oax = 0;
  return nv_array_status(*out);
}

/* y (g - sum(g y, last axis)) in y's compute type, rounded to y's dtype. */
static nv_array *softmax_cotangent(const nv_array *y, const nv_array *t) {
  nv_dtype dt = meta(y)->dtype, ct = dt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  nv_array *yc = nv_astype(y, ct), *tc = nv_astype(t, ct);
  nv_array *ty = nv_multiply(tc, yc);
  int axis = -1;
  nv_array *s = nv_sum(ty, &axis, 1, true);
  nv_release(ty);
  nv_array *d = nv_subtract(tc, s);
  nv_release(s);
  nv_release(tc);
  nv_array *r = nv_multiply(yc, d);
  nv_release(d);
  nv_release(yc);
  nv_array *o = nv_astype(r, dt);
  nv_release(r);
  return o;
}

VJP(vjp_causal) {
  if (!want[0]) return NV_OK;
  grad[0] = softmax_cotangent(out[0], cot[0]);
  return nv_array_status(grad[0]);
}

/* The composed form as a closure over x (payload: the rows a block). */
static nv_status causal_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const int *rows = payload;
  nv_array *y = nv__fast_causal_composed(nv_vec_get(inputs, 0), *rows);
  /* The closure's scope owns y (and releases it when the call returns); outputs keeps it. */
  nv_status s = nv_array_status(y);
  return s == NV_OK ? nv_vec_push(outputs, y) : s;
}

JVP(jvp_causal) {
  if (!tan[0]) return NV_OK;
  int *rows = malloc(sizeof *rows);
  nv_closure *f = rows ? nv_closure_new(causal_call, rows, free) : NULL;
  if (!f) free(rows);
  if (f) *rows = ((const nv__fast_causal_params *)n->params)->rows;
  nv_status s = nv__tf_closure_jvp(f, in, tan, 1, ot, 1);
  nv_closure_release(f);
  return s;
}

VMAP(vmap_causal) {
  const nv__fast_causal_params *p = n->params;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0); /* the one input is the batched one */
  *out = nv__fast_causal_node(x, p->rows);
  nv_release(x);
  *oax = 0;
  return nv_array_status(*out);
}

/* paged_write's composed form as a closure over (pool, values, slots). */
static nv_status paged_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  (void)payload;
  nv_array *y = nv__fast_paged_composed(nv_vec_get(inputs, 0), nv_vec_get(inputs, 1),
                                        nv_vec_get(inputs, 2));
  nv_status s = nv_array_status(y); /* the closure's scope owns y; outputs keeps it */
  return s == NV_OK ? nv_vec_push(outputs, y) : s;
}

/* The closure and a vector of the node's three inputs, or an error (thread error set). */
static nv_status paged_closure(nv_array *const *in, nv_closure **f, nv_vec **args) {
  *f = nv_closure_new(paged_call, NULL, NULL);
  *args = nv_vec_new();
  nv_status s = *f && *args ? NV_OK
                            : nv__set_error(NV_ERR_OUT_OF_MEMORY, "paged_write: out of memory");
  for (int i = 0; s == NV_OK && i < 3; i++) s = nv_vec_push(*args, in[i]);
  return s;
}

VJP(vjp_paged) {
  nv_closure *f = nv_closure_new(paged_call, NULL, NULL);
  if (!f) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vjp: out of memory");
  nv_array *g[3] = {NULL, NULL, NULL};
  nv_status s = nv__tf_vjp("vjp", f, in, 3, cot, 1, NULL, g);
  for (int i = 0; s == NV_OK && i < 2; i++) {
    if (want[i]) {
      grad[i] = g[i];
      g[i] = NULL;
    }
  }
  nv__tf_release_all(g, 3);
  nv_closure_release(f);
  return s;
}

JVP(jvp_paged) {
  nv_closure *f = nv_closure_new(paged_call, NULL, NULL);
  nv_status s = nv__tf_closure_jvp(f, in, tan, 3, ot, 1);
  nv_closure_release(f);
  return s;
}

/* The composed form mapped over the batched inputs (unbatched ones passed whole). */
VMAP(vmap_paged) {
  nv_closure *f;
  nv_vec *args, *r = nv_vec_new();
  nv_status s = paged_closure(in, &f, &args);
  int in_axes[3], zero = 0;
  for (int i = 0; i < 3; i++) in_axes[i] = axes[i] >= 0 ? axes[i] : NV_VMAP_NONE;
  nv_closure *m = s == NV_OK ? nv_vmap(f, in_axes, 3, &zero, 1) : NULL;
  if (s == NV_OK && !(m && r)) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
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

/* conv_slots's composed form as a closure over the node's inputs (x, weight, pool, slots, then
 * the bias when given), its outputs in the node's order (the pool, then y). */
static nv_status conv_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const nv__fast_conv_params *p = payload;
  nv_array *o[2];
  nv__fast_conv_composed(nv_vec_get(inputs, 0), nv_vec_get(inputs, 1), nv_vec_get(inputs, 2),
                         nv_vec_get(inputs, 3), p->has_bias ? nv_vec_get(inputs, 4) : NULL,
                         p->silu, o);
  /* The closure's scope owns o[] (and releases them when the call returns); outputs keeps
   * them. */
  nv_status s = nv_array_status(o[0]);
  if (s == NV_OK) s = nv_array_status(o[1]);
  if (s == NV_OK) s = nv_vec_push(outputs, o[0]);
  if (s == NV_OK) s = nv_vec_push(outputs, o[1]);
  return s;
}

static nv_closure *conv_closure(const nv__node *n) {
  nv__fast_conv_params *p = malloc(sizeof *p);
  nv_closure *f = p ? nv_closure_new(conv_call, p, free) : NULL;
  if (p && !f) free(p);
  if (!f) nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_slots: out of memory");
  else *p = *(const nv__fast_conv_params *)n->params;
  return f;
}

VJP(vjp_conv) {
  nv_closure *f = conv_closure(n);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_array *c[2], *g[5] = {NULL, NULL, NULL, NULL, NULL};
  for (int i = 0; i < 2; i++) c[i] = cot[i] ? nv_retain(cot[i]) : nv_zeros_like(out[i]);
  nv_status s = nv__tf_vjp("vjp", f, in, (size_t)n->ninputs, c, 2, NULL, g);
  for (int i = 0; s == NV_OK && i < n->ninputs; i++) {
    if (want[i] && i != 3) { /* the slots are integers */
      grad[i] = g[i];
      g[i] = NULL;
    }
  }
  nv__tf_release_all(g, 5);
  nv__tf_release_all(c, 2);
  nv_closure_release(f);
  return s;
}

JVP(jvp_conv) {
  nv_closure *f = conv_closure(n);
  nv_status s = nv__tf_closure_jvp(f, in, tan, n->ninputs, ot, 2);
  nv_closure_release(f);
  return s;
}

/* The composed form mapped over the batched inputs (unbatched ones passed whole). */
VMAP(vmap_conv) {
  nv_closure *f = conv_closure(n);
  nv_vec *args = nv_vec_new(), *r = nv_vec_new();
  int in_axes[5], zero[2] = {0, 0};
  for (int i = 0; i < n->ninputs; i++) in_axes[i] = axes[i] >= 0 ? axes[i] : NV_VMAP_NONE;
  nv_closure *m = f ? nv_vmap(f, in_axes, (size_t)n->ninputs, zero, 2) : NULL;
  nv_status s = m && args && r ? NV_OK
                               : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; s == NV_OK && i < n->ninputs; i++) s = nv_vec_push(args, in[i]);
  if (s == NV_OK) s = nv_closure_apply(m, args, r);
  for (int i = 0; s == NV_OK && i < 2; i++) {
    out[i] = nv_retain(nv_vec_get(r, (size_t)i));
    oax[i] = 0;
  }
  nv_vec_free(args);
  nv_vec_free(r);
  nv_closure_release(m);
  nv_closure_release(f);
  return s;
}

void nv__rules_register_fast_serving(nv__prim_rule *r) {
  r[NV__PRIM_FAST_CONV_SLOTS] = (nv__prim_rule){vjp_conv, jvp_conv, vmap_conv};
  r[NV__PRIM_FAST_PAGED_WRITE] = (nv__prim_rule){vjp_paged, jvp_paged, vmap_paged};
  r[NV__PRIM_FAST_SORTED_OFFSETS] = (nv__prim_rule){vjp_none, jvp_none, vmap_offsets};
  r[NV__PRIM_FAST_CAUSAL_SOFTMAX] = (nv__prim_rule){vjp_causal, jvp_causal, vmap_causal};
}
