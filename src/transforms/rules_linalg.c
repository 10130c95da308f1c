/* vjp, jvp and vmap rules of the linalg family's primitives (src/ops/prims_linalg.h): matmul,
 * addmm and vecdot. tensordot, inner, outer and kron compose views, matmul and multiply, so
 * they need no rules of their own.
 *
 * Decided rules (also in docs/transforms.md):
 * - matmul: the cotangent of a (..., M, K) is cot @ bᵀ and of b is aᵀ @ cot (transposes, no
 *   conjugation, as MLX and JAX), each summed over the batch axes its operand was broadcast
 *   along; the primitive sees 1-D operands already as (1, K) / (K, 1), so their gradients come
 *   back through the builder's reshapes.
 * - addmm: alpha scales the product's cotangents and beta c's; alpha = 0 (beta = 0) gives a
 *   and b (c) no gradient, matching the primitive, which does not read them then.
 * - vecdot (sum(conj(a) * b)): b gets cot * conj(a) and a gets conj(cot * b); for real dtypes
 *   these are cot * a and cot * b.
 * - Integer products (nuvec computes them exactly) have no gradients.
 * - vmap: the batch goes in front of every batched operand, padded to the product's rank, and
 *   the primitive's own batch broadcasting does the rest (one batched matmul). */
#include "ops/linalg_params.h"
#include "transforms/rule_decls.h"

static bool inexact(const nv_array *x) { return nv_issubdtype(meta(x)->dtype, NV_CATEGORY_INEXACT); }
static bool is_complex(const nv_array *x) { return meta(x)->dtype == NV_DTYPE_COMPLEX64; }

/* Adds two possibly-NULL terms (taken over). */
static nv_array *add_terms(nv_array *a, nv_array *b) {
  if (!a) return b;
  if (!b) return a;
  nv_array *r = nv_add(a, b);
  nv_release(a);
  nv_release(b);
  return r;
}

/* `g` (taken over) summed down to the shape of `x`. */
static nv_array *reduce_to(nv_array *g, const nv_array *x) {
  nv_array *r = nv__tf_unbroadcast(g, meta(x)->shape, meta(x)->ndim);
  nv_release(g);
  return r;
}

/* `g` (taken over) times `s`, unless s is 1. */
static nv_array *scaled(nv_array *g, double s) {
  if (s == 1 || !g) return g;
  nv_array *r = nv_multiply_scalar(g, s);
  nv_release(g);
  return r;
}

/* `x` with its last two axes swapped. */
static nv_array *mT(const nv_array *x) { return nv_swapaxes(x, -1, -2); }

/* The cotangents of a @ b for a (want_a) and b (want_b), reduced to their shapes. */
static void matmul_vjp(const nv_array *c, const nv_array *a, const nv_array *b, bool want_a,
                       bool want_b, nv_array **ga, nv_array **gb) {
  if (want_a) {
    nv_array *bt = mT(b);
    *ga = reduce_to(nv_matmul(c, bt), a);
    nv_release(bt);
  }
  if (want_b) {
    nv_array *at = mT(a);
    *gb = reduce_to(nv_matmul(at, c), b);
    nv_release(at);
  }
}

/* ta @ b + a @ tb for the tangents that are not NULL (NULL when both are). */
static nv_array *matmul_jvp(const nv_array *a, const nv_array *b, const nv_array *ta,
                            const nv_array *tb) {
  nv_array *l = ta ? nv_matmul(ta, b) : NULL, *r = tb ? nv_matmul(a, tb) : NULL;
  return add_terms(l, r);
}

/* `t` (taken over) broadcast to the output's shape. */
static nv_array *to_out(nv_array *t, const nv__node *n) {
  if (!t) return NULL;
  const nv__output *o = &n->out[0];
  if (meta(t)->ndim == o->ndim && !memcmp(meta(t)->shape, o->shape, sizeof(int) * (size_t)o->ndim))
    return t;
  nv_array *r = nv_broadcast_to(t, o->shape, o->ndim);
  nv_release(t);
  return r;
}

/* ---- matmul ---- */

VJP(vjp_matmul) {
  if (inexact(out[0]))
    matmul_vjp(cot[0], in[0], in[1], want[0], want[1], &grad[0], &grad[1]);
  return NV_OK;
}

JVP(jvp_matmul) {
  ot[0] = to_out(matmul_jvp(in[0], in[1], tan[0], tan[1]), n);
  return NV_OK;
}

VMAP(vmap_matmul) {
  int r = n->out[0].ndim;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  out[0] = nv_matmul(a, b);
  oax[0] = 0;
  nv_release(a);
  nv_release(b);
  return NV_OK;
}

/* ---- addmm: inputs c (of the output's shape), a, b ---- */

VJP(vjp_addmm) {
  const nv__addmm_params *p = n->params;
  if (!inexact(out[0])) return NV_OK;
  if (want[0] && p->beta != 0) grad[0] = scaled(reduce_to(nv_retain(cot[0]), in[0]), p->beta);
  if (p->alpha != 0) {
    matmul_vjp(cot[0], in[1], in[2], want[1], want[2], &grad[1], &grad[2]);
    grad[1] = scaled(grad[1], p->alpha);
    grad[2] = scaled(grad[2], p->alpha);
  }
  return NV_OK;
}

JVP(jvp_addmm) {
  const nv__addmm_params *p = n->params;
  nv_array *prod = p->alpha != 0 ? scaled(matmul_jvp(in[1], in[2], tan[1], tan[2]), p->alpha) : NULL;
  nv_array *c = p->beta != 0 && tan[0] ? scaled(nv_retain(tan[0]), p->beta) : NULL;
  ot[0] = to_out(add_terms(prod, c), n);
  return NV_OK;
}

VMAP(vmap_addmm) {
  const nv__addmm_params *p = n->params;
  int r = n->out[0].ndim;
  nv_array *c = nv__tf_front(in[0], axes[0], r), *a = nv__tf_front(in[1], axes[1], r);
  nv_array *b = nv__tf_front(in[2], axes[2], r);
  if (axes[1] < 0 && axes[2] < 0) {
    /* c must broadcast to the product: give the product the batch through a. */
    const nv__output *o = meta(a);
    int shape[NV__MAX_DIMS];
    shape[0] = meta(c)->shape[0];
    for (int i = 0; i < r - o->ndim; i++) shape[1 + i] = 1;
    memcpy(shape + 1 + r - o->ndim, o->shape, sizeof(int) * (size_t)o->ndim);
    int lead[NV__MAX_DIMS];
    for (int i = 0; i <= r - o->ndim; i++) lead[i] = i;
    nv_array *e = nv_expand_dims(a, lead, r - o->ndim + 1);
    nv_release(a);
    a = nv_broadcast_to(e, shape, r + 1);
    nv_release(e);
  }
  out[0] = nv_addmm(c, a, b, p->alpha, p->beta);
  oax[0] = 0;
  nv_release(c);
  nv_release(a);
  nv_release(b);
  return NV_OK;
}

/* ---- vecdot: inputs a (..., K), b (..., K), contracted over the last axis ---- */

VJP(vjp_vecdot) {
  if (!inexact(out[0])) return NV_OK;
  int last = meta(cot[0])->ndim;
  nv_array *c = nv_expand_dims(cot[0], &last, 1);
  if (want[0]) {
    nv_array *g = nv_multiply(c, in[1]);
    if (is_complex(g)) {
      nv_array *h = nv_conjugate(g);
      nv_release(g);
      g = h;
    }
    grad[0] = reduce_to(g, in[0]);
  }
  if (want[1]) {
    nv_array *ca = is_complex(in[0]) ? nv_conjugate(in[0]) : nv_retain(in[0]);
    grad[1] = reduce_to(nv_multiply(c, ca), in[1]);
    nv_release(ca);
  }
  nv_release(c);
  return NV_OK;
}

JVP(jvp_vecdot) {
  /* d Σ conj(a) b = Σ conj(ta) b + Σ conj(a) tb: vecdot itself conjugates its first operand. */
  nv_array *l = tan[0] ? nv_vecdot(tan[0], in[1], -1) : NULL;
  nv_array *r = tan[1] ? nv_vecdot(in[0], tan[1], -1) : NULL;
  ot[0] = to_out(add_terms(l, r), n);
  return NV_OK;
}

VMAP(vmap_vecdot) {
  int ra = meta(in[0])->ndim - (axes[0] >= 0), rb = meta(in[1])->ndim - (axes[1] >= 0);
  int r = ra > rb ? ra : rb;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  out[0] = nv_vecdot(a, b, -1);
  oax[0] = 0;
  nv_release(a);
  nv_release(b);
  return NV_OK;
}

/* ---- Registration ---- */

void nv__rules_register_linalg(nv__prim_rule *r) {
  r[NV__PRIM_MATMUL] = (nv__prim_rule){vjp_matmul, jvp_matmul, vmap_matmul};
  r[NV__PRIM_ADDMM] = (nv__prim_rule){vjp_addmm, jvp_addmm, vmap_addmm};
  r[NV__PRIM_VECDOT] = (nv__prim_rule){vjp_vecdot, jvp_vecdot, vmap_vecdot};
}
