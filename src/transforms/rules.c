/* The rule table and the helpers the rules share. Each op family fills its primitives' entries
 * from its own registration function, listed below (one line per family). */
#include <pthread.h>

#include "transforms/transforms_internal.h"

nv__prim_rule nv__prim_rules[NV__PRIM_COUNT];

/* Families register here, one line each. */
static void (*const families[])(nv__prim_rule *) = {
    nv__rules_register_core,
    nv__rules_register_transforms,
    nv__rules_register_elementwise,
    nv__rules_register_index,
    nv__rules_register_linalg,
    nv__rules_register_linalg_decomp,
    nv__rules_register_reduce,
    nv__rules_register_random,
    nv__rules_register_optim,
    nv__rules_register_conv,
    nv__rules_register_fft,
    nv__rules_register_distributed,
    nv__rules_register_fast,
    nv__rules_register_fast_sdpa,
    nv__rules_register_fast_serving,
    nv__rules_register_fast_state,
    nv__rules_register_fast_paged,
    nv__rules_register_quantize,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  for (size_t i = 0; i < sizeof families / sizeof *families; i++) families[i](nv__prim_rules);
}

void nv__rules_register(void) { pthread_once(&once, register_all); }

/* ---- Helpers ---- */

nv_array *nv__tf_handle(nv__node *node, int idx) {
  return nv__array_new(nv__node_retain(node), idx);
}

nv_array *nv__tf_unbroadcast(const nv_array *g, const int *shape, int ndim) {
  const nv__output *o = nv__out(g);
  int axes[NV__MAX_DIMS], n = 0, lead = o->ndim - ndim;
  for (int i = 0; i < o->ndim; i++)
    if (i < lead || (shape[i - lead] == 1 && o->shape[i] != 1)) axes[n++] = i;
  if (n == 0 && lead == 0) return nv_retain((nv_array *)g);
  nv_array *s = nv_sum(g, axes, n, true);
  nv_array *r = nv_reshape(s, shape, ndim);
  nv_release(s);
  return r;
}

/* A view node of `x` (as the builders in src/ops/shape.c make them). */
static nv_array *view_node(int prim, const nv_array *x, const int *shape, int ndim,
                           const int64_t *strides, int64_t delta, const int *axes, int naxes) {
  nv_array *in[1] = {(nv_array *)x};
  nv__node *n = nv__op_node(prim, in, 1, nv__out(x)->dtype, shape, ndim,
                            sizeof(nv__view_params) + (size_t)naxes * sizeof(int));
  if (!n) return nv__op_finish(nv__prims[prim].name, NULL);
  nv__output_set_strides(&n->out[0], strides);
  nv__view_params *p = n->params;
  p->delta = delta;
  p->ndim = naxes;
  for (int i = 0; i < naxes; i++) p->axes[i] = axes[i];
  return nv__array_new(n, 0);
}

nv_array *nv__tf_slice(const nv_array *x, const int *start, const int *step, const int *len) {
  nv_array *f = nv__op_check("slice", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  int n = o->ndim, axes[2 * NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS], delta = 0;
  bool empty = false;
  for (int i = 0; i < n; i++) empty |= len[i] == 0;
  for (int i = 0; i < n; i++) {
    st[i] = o->strides[i] * step[i];
    if (!empty) delta += (int64_t)start[i] * o->strides[i];
    axes[i] = start[i];
    axes[n + i] = step[i];
  }
  return view_node(NV__PRIM_SLICE, x, len, n, st, delta, axes, 2 * n);
}

nv_array *nv__tf_slice_update(const nv_array *base, const nv_array *update, const int *start,
                              const int *step, const int *len) {
  const nv_array *xs[2] = {base, update};
  nv_array *f = nv__op_check("slice_update", xs, 2);
  if (f) return f;
  const nv__output *o = nv__out(base);
  int n = o->ndim;
  nv_array *upd = nv__cast_unscoped(update, o->dtype);
  nv_array *in[2] = {(nv_array *)base, upd};
  nv__node *node = nv__op_node(NV__PRIM_SLICE_UPDATE, in, 2, o->dtype, o->shape, n,
                               sizeof(nv__slice_update_params) + 3 * (size_t)n * sizeof(int));
  nv_release(upd);
  if (node) {
    nv__slice_update_params *p = node->params;
    p->ndim = n;
    for (int i = 0; i < n; i++) {
      p->data[i] = start[i];
      p->data[n + i] = step[i];
      p->data[2 * n + i] = len[i];
    }
  }
  return nv__op_finish("slice_update", node);
}

nv_array *nv__tf_moveaxis(const nv_array *x, int from, int to) {
  int nd = nv__out(x)->ndim, perm[NV__MAX_DIMS], k = 0;
  if (from == to) return nv_retain((nv_array *)x);
  for (int i = 0; i < nd; i++)
    if (i != from) perm[k++] = i;
  for (int i = nd - 1; i > to; i--) perm[i] = perm[i - 1];
  perm[to] = from;
  return nv_transpose(x, perm, nd);
}

nv_array *nv__tf_compare(const nv_array *a, const nv_array *b, int op) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("grad_compare", xs, 2);
  if (f) return f;
  /* The masks order values: complex numbers have no order a gradient could use. */
  if (nv__result_type(a, b) == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_UNSUPPORTED, "grad_compare", "complex values are not ordered");
  switch (op) {
    case NV__CMP_GT: return nv_greater(a, b);
    case NV__CMP_GE: return nv_greater_equal(a, b);
    case NV__CMP_LT: return nv_less(a, b);
    default: return nv_less_equal(a, b);
  }
}

nv_array *nv__tf_mask(const nv_array *x, const nv_array *mask) {
  nv_array *m = nv_astype(mask, nv__out(x)->dtype);
  nv_array *r = nv_multiply(x, m);
  nv_release(m);
  return r;
}

nv_array *nv__tf_identity(const nv_array *x, bool stop, bool tracer) {
  nv_array *f = nv__op_check(stop ? "stop_gradient" : "transform", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  nv_array *r;
  if (stop) {
    nv_array *in[1] = {(nv_array *)x};
    nv__node *n = nv__op_node(NV__PRIM_STOP_GRADIENT, in, 1, o->dtype, o->shape, o->ndim, 0);
    if (n) nv__output_set_strides(&n->out[0], o->strides);
    r = nv__op_finish("stop_gradient", n);
  } else {
    r = view_node(NV__PRIM_BROADCAST, x, o->shape, o->ndim, o->strides, 0, NULL, 0);
  }
  if (tracer && nv_array_status(r) == NV_OK) nv__node_mark_tracer(r->node);
  return r;
}

nv_array *nv__tf_front(const nv_array *x, int ax, int rank) {
  if (ax < 0) return nv_retain((nv_array *)x);
  nv_array *m = nv__tf_moveaxis(x, ax, 0);
  int have = nv__out(m)->ndim - 1;
  if (have >= rank) return m;
  int axes[NV__MAX_DIMS];
  for (int i = 0; i < rank - have; i++) axes[i] = 1 + i;
  nv_array *r = nv_expand_dims(m, axes, rank - have);
  nv_release(m);
  return r;
}

int nv__tf_batch_size(nv_array *const *in, const int *axes, int n) {
  for (int i = 0; i < n; i++)
    if (axes[i] >= 0) return nv__out(in[i])->shape[axes[i]];
  return 1;
}

