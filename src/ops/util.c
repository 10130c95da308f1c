/* Shared builder helpers. */
#include <stdio.h>

#include "ops/ops_internal.h"

nv_array *nv__op_error(nv_status status, const char *op, const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nv__array_error(status, "%s: %s", op, msg);
}

nv_array *nv__op_check(const char *op, const nv_array *const *xs, int n) {
  for (int i = 0; i < n; i++)
    if (!xs[i]) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "input %d is NULL", i);
  /* A failed input with its op's metadata goes through the builder like a healthy one: the
   * result's metadata is this op's own and the node takes the input's error (nv__op_node).
   * One without metadata cannot be checked against: the builder stops here with the first
   * input error, so that it, not a shape check on a stand-in shape, is what comes through. */
  nv__error *first = NULL;
  bool nometa = false;
  for (int i = 0; i < n; i++) {
    nv__error *e = nv__node_known_error(xs[i]->node);
    if (e && !first) first = e;
    if (e && !nv__meta_known(xs[i])) nometa = true;
  }
  return nometa ? nv__array_failed_nometa(first) : NULL;
}

bool nv__broadcast_shapes(const int *a, int na, const int *b, int nb, int *out, int *nout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int da = i < n - na ? 1 : a[i - (n - na)];
    int db = i < n - nb ? 1 : b[i - (n - nb)];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  *nout = n;
  return true;
}

nv__node *nv__op_node(int prim, nv_array *const *xs, int n, nv_dtype dtype, const int *shape,
                      int ndim, size_t params_size) {
  nv__node *node = nv__node_new(prim, xs, n, 1, params_size);
  if (!node) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  nv__node_inherit_error(node);
  if (nv__output_set_shape(&node->out[0], dtype, shape, ndim) != NV_OK) {
    nv__node_release(node);
    return NULL;
  }
  /* A node computed from tracers is a tracer (transforms keep its graph while they run). */
  for (int i = 0; i < n; i++) nv__node_inherit_tracer(node, xs[i]->node);
  return node;
}

nv_array *nv__op_finish(const char *op, nv__node *node) {
  if (!node) {
    nv_status s = !nv_last_error()[0]            ? NV_ERR_OUT_OF_MEMORY
                  : nv__last_status() != NV_OK ? nv__last_status()
                                               : NV_ERR_INVALID_ARGUMENT;
    /* Builders that fail on a failed temporary pass its message on, prefixed by its op. */
    if (strstr(nv_last_error(), "out of memory")) s = NV_ERR_OUT_OF_MEMORY;
    return nv__op_error(s, op, "%s", nv_last_error());
  }
  return nv__array_new(node, 0);
}

nv_array *nv__op_inherit(const nv_array *const *xs, int n, nv_dtype dtype, const int *shape,
                         int ndim) {
  for (int i = 0; i < n; i++) {
    nv__error *e = xs[i] ? nv__node_known_error(xs[i]->node) : NULL;
    if (e) return nv__array_failed(e, dtype, shape, ndim);
  }
  return NULL;
}

bool nv__norm_axis(int *axis, int ndim) {
  int a = *axis < 0 ? *axis + ndim : *axis;
  if (a < 0 || a >= ndim) return false;
  *axis = a;
  return true;
}

static bool is_float_kind(nv_dtype d) { return nv_issubdtype(d, NV_CATEGORY_INEXACT); }

nv_dtype nv__result_type(const nv_array *a, const nv_array *b) {
  bool wa = nv__is_weak(a), wb = nv__is_weak(b);
  nv_dtype da = nv__out(a)->dtype, db = nv__out(b)->dtype;
  if (wa == wb) return nv_promote_types(da, db);
  const nv_array *weak = wa ? a : b;
  nv_dtype strong = wa ? db : da;
  const nv__constant_params *p = weak->node->params;
  bool weak_int = p && p->is_int;
  if (weak_int) return strong == NV_DTYPE_BOOL ? NV_DTYPE_INT32 : strong;
  return is_float_kind(strong) ? strong : NV_DTYPE_FLOAT32;
}

