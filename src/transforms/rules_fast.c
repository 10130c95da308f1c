/* Transform rules of the fast family (rms_norm, layer_norm, rope, norm_vjp): MLX's Custom
 * pattern, where the fused primitive's transforms go through its composed fallback
 * (src/ops/fast_norm.c), on the node's inputs (which the builder converted to the output dtype,
 * so gradients reach the caller's arrays through those conversions). jvp differentiates the
 * fallback. The norms' vjp is fused, as MLX's: dx from norm_vjp (one pass per row), the
 * weight's gradient from the fused norm without weight and a sum over rows, the bias's a sum;
 * norm_vjp's own transforms (gradients of gradients) go through its formula in core ops. rope
 * is linear in x: its vjp with respect to x is the fused rope turning by the opposite angles,
 * its jvp the fused rope of the tangent; only a gradient for freqs goes through the fallback. vmap
 * runs the fused op with the batch axis moved where the op leaves it alone (the front for the
 * norms, behind the batch axis for rope) when only x is batched; batched weights and biases go
 * through the fallback, which broadcasts them; rope over batched offsets or freqs is not
 * supported. */
#include <stdlib.h>

#include "ops/fast.h"
#include "transforms/rule_decls.h"

/* The fallback as a closure over the node's inputs (for the norms: x, then weight and bias as
 * present; for rope: x, then freqs when present, the offsets held by the closure). */
typedef struct composed {
  int prim;
  nv_dtype dt;
  nv__fast_norm_params norm;
  nv__fast_rope_params rope;
  nv_array *offset;
} composed;

static void composed_free(void *p) {
  composed *c = p;
  nv_release(c->offset);
  free(c);
}

static nv_status composed_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const composed *c = payload;
  nv_array *const *in = nv_vec_data(inputs);
  nv_array *y;
  if (c->prim == NV__PRIM_FAST_ROPE) {
    y = nv__fast_rope_composed(in[0], c->offset, c->rope.has_freqs ? in[1] : NULL, &c->rope);
  } else if (c->prim == NV__PRIM_FAST_NORM_VJP) {
    const nv_array *w = c->norm.has_weight ? in[1] : NULL;
    y = nv__fast_norm_vjp_composed(in[0], w, in[c->norm.has_weight ? 2 : 1], &c->norm, c->dt);
  } else {
    int k = 1;
    const nv_array *w = c->norm.has_weight ? in[k++] : NULL;
    const nv_array *b = c->norm.has_bias ? in[k++] : NULL;
    y = c->prim == NV__PRIM_FAST_RMS_NORM ? nv__fast_rms_composed(in[0], w, c->norm.eps, c->dt)
                                          : nv__fast_layer_composed(in[0], w, b, c->norm.eps, c->dt);
  }
  /* The closure's scope owns y (and releases it when the call returns); outputs keeps it. */
  nv_status s = nv_array_status(y);
  return s == NV_OK ? nv_vec_push(outputs, y) : s;
}

/* The closure of node n's fallback, or NULL (thread error set). */
static nv_closure *fallback(const nv__node *n, nv_array *const *in) {
  composed *c = calloc(1, sizeof *c);
  if (!c) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[n->prim].name);
    return NULL;
  }
  c->prim = n->prim;
  c->dt = n->out[0].dtype;
  if (n->prim == NV__PRIM_FAST_ROPE) {
    c->rope = *(const nv__fast_rope_params *)n->params;
    c->offset = nv_retain(in[1]);
  } else {
    c->norm = *(const nv__fast_norm_params *)n->params;
  }
  nv_closure *f = nv_closure_new(composed_call, c, composed_free);
  if (!f) composed_free(c);
  return f;
}

/* The fallback's vjp: gradients of the closure's `m` inputs `xs` into g (new references). The
 * node has one output, so its cotangent is given. */
static nv_status fallback_vjp(const nv__node *n, nv_array *const *in, nv_array *const *xs, int m,
                              nv_array *const *cot, nv_array **g) {
  nv_closure *f = fallback(n, in);
  if (!f) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = nv__tf_vjp("vjp", f, xs, (size_t)m, cot, 1, NULL, g);
  nv_closure_release(f);
  return s;
}

/* The fallback's jvp along the tangents `tan` of its `m` inputs `xs` (NULL: zero): *ot. */
static nv_status fallback_jvp(const nv__node *n, nv_array *const *in, nv_array *const *xs, int m,
                              nv_array *const *tan, nv_array **ot) {
  nv_closure *f = fallback(n, in);
  nv_status s = nv__tf_closure_jvp(f, xs, tan, m, ot, 1);
  nv_closure_release(f);
  return s;
}

/* ---- rms_norm, layer_norm ---- */

/* g summed over every axis but the last (x's rows), in float32 or float64, converted to dt. */
static nv_array *sum_rows(nv_array *g, nv_dtype dt) {
  int nd = meta(g)->ndim, axes[NV__MAX_DIMS];
  for (int i = 0; i < nd - 1; i++) axes[i] = i;
  nv_array *s = nd > 1 ? nv_sum(g, axes, nd - 1, false) : nv_retain(g);
  nv_release(g);
  nv_array *r = nv_astype(s, dt);
  nv_release(s);
  return r;
}

/* The fused gradients: dx from norm_vjp (one pass per row); the weight's as the sum over rows
 * of g times the normalized x (the fused norm without weight, in the compute type), the bias's
 * as the sum of g. */
VJP(vjp_norm) {
  const nv__fast_norm_params *p = n->params;
  nv_dtype dt = n->out[0].dtype, ct = nv__fast_compute_type(dt);
  int k = 1, wi = p->has_weight ? k++ : -1, bi = p->has_bias ? k++ : -1;
  const nv_array *w = wi >= 0 ? in[wi] : NULL;
  nv_array *g = nv_astype(cot[0], dt);
  nv_status s = nv_array_status(g);
  if (s == NV_OK && want[0]) {
    nv__fast_norm_params q = {.eps = p->eps, .has_weight = w != NULL,
                              .layer = n->prim == NV__PRIM_FAST_LAYER_NORM};
    grad[0] = nv__fast_norm_vjp_node(in[0], w, g, &q, dt);
    s = nv_array_status(grad[0]);
  }
  if (s == NV_OK && wi >= 0 && want[wi]) {
    nv__fast_norm_params q = {.eps = p->eps};
    nv_array *xhat = nv__fast_norm_node(n->prim, in[0], NULL, NULL, &q, ct);
    nv_array *gc = nv_astype(g, ct);
    grad[wi] = sum_rows(nv_multiply(gc, xhat), dt);
    nv_release(xhat);
    nv_release(gc);
    s = nv_array_status(grad[wi]);
  }
  if (s == NV_OK && bi >= 0 && want[bi]) {
    grad[bi] = sum_rows(nv_astype(g, ct), dt);
    s = nv_array_status(grad[bi]);
  }
  nv_release(g);
  return s;
}

JVP(jvp_norm) { return fallback_jvp(n, in, in, n->ninputs, tan, ot); }

VMAP(vmap_norm) {
  const nv__fast_norm_params *p = n->params;
  nv_dtype dt = n->out[0].dtype;
  int k = 1, wi = p->has_weight ? k++ : -1, bi = p->has_bias ? k++ : -1;
  bool only_x = (wi < 0 || axes[wi] < 0) && (bi < 0 || axes[bi] < 0);
  if (only_x) {
    /* Rows stay rows wherever the batch axis goes: the fused op on x batched in front. */
    nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
    *out = nv__fast_norm_node(n->prim, x, wi >= 0 ? in[wi] : NULL, bi >= 0 ? in[bi] : NULL, p, dt);
    nv_release(x);
  } else {
    /* Batched vectors broadcast as (batch, 1, ..., 1, D) against x in the fallback. */
    int rank = meta(in[0])->ndim - (axes[0] >= 0);
    nv_array *x = nv__tf_front(in[0], axes[0], rank);
    nv_array *w = wi >= 0 ? nv__tf_front(in[wi], axes[wi], rank) : NULL;
    nv_array *b = bi >= 0 ? nv__tf_front(in[bi], axes[bi], rank) : NULL;
    *out = n->prim == NV__PRIM_FAST_RMS_NORM ? nv__fast_rms_composed(x, w, p->eps, dt)
                                             : nv__fast_layer_composed(x, w, b, p->eps, dt);
    nv_release(x);
    nv_release(w);
    nv_release(b);
  }
  *oax = 0;
  return nv_array_status(*out);
}

/* ---- norm_vjp (for the gradients of gradients, and batched gradients) ---- */

VJP(vjp_norm_vjp) {
  nv_array *g[3] = {NULL, NULL, NULL};
  nv_status s = fallback_vjp(n, in, in, n->ninputs, cot, g);
  for (int i = 0; i < n->ninputs; i++) {
    if (s == NV_OK && want[i])
      grad[i] = g[i];
    else
      nv_release(g[i]);
  }
  return s;
}

JVP(jvp_norm_vjp) { return fallback_jvp(n, in, in, n->ninputs, tan, ot); }

/* The formula on the inputs batched in front, the unbatched ones broadcasting against them. */
VMAP(vmap_norm_vjp) {
  const nv__fast_norm_params *p = n->params;
  int rank = -1;
  for (int i = 0; i < n->ninputs && rank < 0; i++)
    if (axes[i] >= 0 && i != (p->has_weight ? 1 : -1)) rank = meta(in[i])->ndim - 1;
  if (rank < 0) rank = meta(in[0])->ndim; /* only the weight is batched */
  nv_array *b[3] = {NULL, NULL, NULL};
  for (int i = 0; i < n->ninputs; i++) b[i] = nv__tf_front(in[i], axes[i], rank);
  *out = nv__fast_norm_vjp_composed(b[0], p->has_weight ? b[1] : NULL, b[p->has_weight ? 2 : 1],
                                    p, n->out[0].dtype);
  for (int i = 0; i < n->ninputs; i++) nv_release(b[i]);
  *oax = 0;
  return nv_array_status(*out);
}

/* ---- rope ---- */

/* The fused rope of `x` with node n's offsets, freqs and angles (negated when `flip`). */
static nv_array *rope_again(const nv__node *n, nv_array *const *in, const nv_array *x, bool flip) {
  nv__fast_rope_params p = *(const nv__fast_rope_params *)n->params;
  p.inverse = p.inverse != flip;
  nv_array *xc = nv_astype(x, n->out[0].dtype);
  nv_array *r = nv__fast_rope_node(xc, in[1], p.has_freqs ? in[2] : NULL, &p);
  nv_release(xc);
  return r;
}

VJP(vjp_rope) {
  const nv__fast_rope_params *p = n->params;
  nv_status s = NV_OK;
  if (want[0]) {
    grad[0] = rope_again(n, in, cot[0], true);
    s = nv_array_status(grad[0]);
  }
  if (s == NV_OK && p->has_freqs && want[2]) {
    nv_array *xs[2] = {in[0], in[2]}, *g[2] = {NULL, NULL};
    s = fallback_vjp(n, in, xs, 2, cot, g);
    nv_release(g[0]);
    if (s == NV_OK) grad[2] = g[1];
    else nv_release(g[1]);
  }
  return s;
}

JVP(jvp_rope) {
  const nv__fast_rope_params *p = n->params;
  if (p->has_freqs && tan[2]) {
    nv_array *xs[2] = {in[0], in[2]}, *t[2] = {tan[0], tan[2]};
    return fallback_jvp(n, in, xs, 2, t, ot);
  }
  if (!tan[0]) return NV_OK; /* only the offsets moved: they are integers */
  *ot = rope_again(n, in, tan[0], false);
  return nv_array_status(*ot);
}

VMAP(vmap_rope) {
  const nv__fast_rope_params *p = n->params;
  if (axes[1] >= 0 || (p->has_freqs && axes[2] >= 0))
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "vmap: rope over batched offsets or freqs is not supported (only x may "
                         "be batched)");
  /* Behind the batch axis (0) and before the positions (-2): the op leaves such an axis alone. */
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 1);
  *out = nv__fast_rope_node(x, in[1], p->has_freqs ? in[2] : NULL, p);
  nv_release(x);
  *oax = 1;
  return nv_array_status(*out);
}

void nv__rules_register_fast(nv__prim_rule *r) {
  r[NV__PRIM_FAST_RMS_NORM] = (nv__prim_rule){vjp_norm, jvp_norm, vmap_norm};
  r[NV__PRIM_FAST_LAYER_NORM] = (nv__prim_rule){vjp_norm, jvp_norm, vmap_norm};
  r[NV__PRIM_FAST_ROPE] = (nv__prim_rule){vjp_rope, jvp_rope, vmap_rope};
  r[NV__PRIM_FAST_NORM_VJP] = (nv__prim_rule){vjp_norm_vjp, jvp_norm_vjp, vmap_norm_vjp};
}
