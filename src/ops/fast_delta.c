/* The builder of gated_delta_slots (the gated delta rule's recurrent update over per-sequence
 * state slots): its argument checks, the node over prepared inputs and the composed form the
 * transforms and tests use. The definition is in include/nuvec/fast.h. */
#include <stdlib.h>

#include "nuvec/fast.h"
#include "ops/fast_state.h"
#include "ops/fast.h"
#include "ops/ops_internal.h"

nv_dtype nv__fast_delta_compute_type(nv_dtype dt, nv_dtype sdt) {
  return dt == NV_DTYPE_FLOAT64 || sdt == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
}

/* The promoted dtype of q, k and v (real floating inputs promote to a real floating type). */
static nv_dtype qkv_dtype(const nv_array *q, const nv_array *k, const nv_array *v) {
  nv_dtype a = nv_promote_types(nv__out(q)->dtype, nv__out(k)->dtype);
  return nv_promote_types(a, nv__out(v)->dtype);
}

nv__node *nv__fast_delta_node(const nv_array *q, const nv_array *k, const nv_array *v,
                              const nv_array *g, const nv_array *beta, const nv_array *pool,
                              const nv_array *slots, double scale) {
  nv_dtype dt = qkv_dtype(q, k, v), sdt = nv__out(pool)->dtype;
  nv_dtype ct = nv__fast_delta_compute_type(dt, sdt);
  nv_dtype idt = nv__out(slots)->dtype == NV_DTYPE_INT32 ? NV_DTYPE_INT32 : NV_DTYPE_INT64;
  nv__scope_suspend();
  nv_array *in[7] = {nv__fast_prepared(q, dt),     nv__fast_prepared(k, dt),
                     nv__fast_prepared(v, dt),     nv__fast_prepared(g, ct),
                     nv__fast_prepared(beta, ct),  nv__fast_prepared(pool, sdt),
                     nv__fast_prepared(slots, idt)};
  int bad = -1;
  for (int i = 0; i < 7 && bad < 0; i++)
    if (!nv__meta_known(in[i])) bad = i;
  nv__node *n = NULL;
  if (bad >= 0) {
    nv_array_status(in[bad]); /* a conversion that failed itself (out of memory) */
  } else if (!(n = nv__node_new(NV__PRIM_FAST_GATED_DELTA, in, 7, 2,
                                sizeof(nv__fast_delta_params)))) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "gated_delta_slots: out of memory");
  }
  if (n) {
    nv__node_inherit_error(n);
    ((nv__fast_delta_params *)n->params)->scale = scale;
    const nv__output *po = nv__out(in[5]), *vo = nv__out(in[2]);
    if (nv__output_set_shape(&n->out[0], sdt, po->shape, po->ndim) != NV_OK ||
        nv__output_set_shape(&n->out[1], dt, vo->shape, vo->ndim) != NV_OK) {
      nv__node_release(n);
      n = NULL;
    }
    for (int i = 0; n && i < 7; i++) nv__node_inherit_tracer(n, in[i]->node);
  }
  for (int i = 0; i < 7; i++) nv_release(in[i]);
  nv__scope_resume();
  return n;
}

/* Both outputs of a gated_delta_slots that failed before it had a node. */
static nv_status delta_fail(nv_array *f, nv_array **out) {
  out[0] = f;
  out[1] = nv__array_failed_nometa(nv__node_known_error(f->node));
  return nv_array_status(f);
}

nv_status nv_fast_gated_delta_slots(const nv_array *q, const nv_array *k, const nv_array *v,
                                    const nv_array *g, const nv_array *beta,
                                    const nv_array *state_pool, const nv_array *slot_ids,
                                    double scale, nv_array **out) {
  const char *op = "gated_delta_slots";
  if (!out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "gated_delta_slots: the output list is NULL");
  const nv_array *xs[7] = {q, k, v, g, beta, state_pool, slot_ids};
  nv_array *f = nv__op_check(op, xs, 7);
  if (f) return delta_fail(f, out);
  const nv__output *qo = nv__out(q), *ko = nv__out(k), *vo = nv__out(v), *go = nv__out(g),
                   *bo = nv__out(beta), *po = nv__out(state_pool), *so = nv__out(slot_ids);
  char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF], c[NV__SHAPE_BUF];
  bool qk = qo->ndim == 4 && ko->ndim == 4 && nv__fast_real_float(qo->dtype) &&
            nv__fast_real_float(ko->dtype);
  for (int i = 0; qk && i < 4; i++) qk = qo->shape[i] == ko->shape[i];
  if (!qk || qo->shape[2] < 1) {
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "q and k must be floating [N, T, Hk, Dk] of one shape (Hk >= 1) but have "
                     "shapes %s and %s and dtypes %s and %s",
                     nv__shape_str(qo->shape, qo->ndim, a, sizeof a),
                     nv__shape_str(ko->shape, ko->ndim, b, sizeof b), nv_dtype_name(qo->dtype),
                     nv_dtype_name(ko->dtype));
    return delta_fail(f, out);
  }
  int n = qo->shape[0], t = qo->shape[1], hk = qo->shape[2], dk = qo->shape[3];
  if (vo->ndim != 4 || !nv__fast_real_float(vo->dtype) || vo->shape[0] != n || vo->shape[1] != t ||
      vo->shape[2] % hk)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "v must be floating [N, T, Hv, Dv] with N = %d, T = %d and Hv a multiple of "
                     "Hk = %d (q %s) but has shape %s and dtype %s",
                     n, t, hk, nv__shape_str(qo->shape, 4, a, sizeof a),
                     nv__shape_str(vo->shape, vo->ndim, b, sizeof b), nv_dtype_name(vo->dtype));
  if (f) return delta_fail(f, out);
  int hv = vo->shape[2], dv = vo->shape[3];
  const nv__output *gb[2] = {go, bo};
  const char *gbn[2] = {"g", "beta"};
  for (int i = 0; i < 2 && !f; i++)
    if (gb[i]->ndim != 3 || gb[i]->shape[0] != n || gb[i]->shape[1] != t ||
        gb[i]->shape[2] != hv || !nv__fast_real_float(gb[i]->dtype))
      f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                       "%s must be floating [N, T, Hv] = [%d, %d, %d] (v %s) but has shape %s "
                       "and dtype %s",
                       gbn[i], n, t, hv, nv__shape_str(vo->shape, 4, a, sizeof a),
                       nv__shape_str(gb[i]->shape, gb[i]->ndim, b, sizeof b),
                       nv_dtype_name(gb[i]->dtype));
  if (!f && (po->ndim != 4 || po->shape[1] != hv || po->shape[2] != dk || po->shape[3] != dv ||
             !nv__fast_real_float(po->dtype)))
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "state_pool must be floating [S, Hv, Dk, Dv] with Hv = %d, Dk = %d, Dv = %d "
                     "(q %s, v %s) but has shape %s and dtype %s",
                     hv, dk, dv, nv__shape_str(qo->shape, 4, a, sizeof a),
                     nv__shape_str(vo->shape, 4, b, sizeof b),
                     nv__shape_str(po->shape, po->ndim, c, sizeof c), nv_dtype_name(po->dtype));
  if (!f && (!nv__fast_integer(so->dtype) || so->ndim != 1 || so->shape[0] != n))
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                     "slot_ids must be a 1-D integer array of N = %d slots but has shape %s and "
                     "dtype %s",
                     n, nv__shape_str(so->shape, so->ndim, a, sizeof a), nv_dtype_name(so->dtype));
  if (f) return delta_fail(f, out);
  nv__node *nd = nv__fast_delta_node(q, k, v, g, beta, state_pool, slot_ids, scale);
  if (!nd) return delta_fail(nv__op_finish(op, NULL), out);
  nv__node_retain(nd);
  out[0] = nv__array_new(nd, 1); /* o */
  out[1] = nv__array_new(nd, 0); /* the pool */
  return nv_array_status(out[0]);
}

/* x[:, t] of a [N, T, ...] array, as [N, ...] (rank nd - 1). */
static nv_array *at_time(const nv_array *x, int t) {
  const nv__output *o = nv__out(x);
  int st[NV__MAX_DIMS], sp[NV__MAX_DIMS], shape[NV__MAX_DIMS];
  for (int i = 0; i < o->ndim; i++) {
    st[i] = 0;
    sp[i] = o->shape[i];
  }
  st[1] = t;
  sp[1] = t + 1;
  nv_array *s = nv_slice(x, st, sp, NULL, o->ndim);
  shape[0] = o->shape[0];
  for (int i = 2; i < o->ndim; i++) shape[i - 1] = o->shape[i];
  return nv__then(s, nv_reshape(s, shape, o->ndim - 1));
}

/* q or k [N, T, Hk, Dk] in ct with each head repeated for the rep value heads reading it:
 * [N, T, Hk * rep, Dk]. */
static nv_array *heads_repeated(const nv_array *x, int rep, nv_dtype ct) {
  const nv__output *o = nv__out(x);
  nv_array *c = nv_astype(x, ct);
  if (rep == 1) return c;
  int five[5] = {o->shape[0], o->shape[1], o->shape[2], 1, o->shape[3]};
  c = nv__then(c, nv_reshape(c, five, 5));
  five[3] = rep;
  c = nv__then(c, nv_broadcast_to(c, five, 5));
  int four[4] = {o->shape[0], o->shape[1], o->shape[2] * rep, o->shape[3]};
  return nv__then(c, nv_reshape(c, four, 4));
}

void nv__fast_delta_composed(const nv_array *q, const nv_array *k, const nv_array *v,
                             const nv_array *g, const nv_array *beta, const nv_array *pool,
                             const nv_array *slots, double scale, nv_array **out) {
  const nv__output *qo = nv__out(q), *vo = nv__out(v), *po = nv__out(pool);
  nv_dtype dt = qkv_dtype(q, k, v), sdt = po->dtype, ct = nv__fast_delta_compute_type(dt, sdt);
  int n = qo->shape[0], t = qo->shape[1], hv = vo->shape[2], dk = qo->shape[3],
      dv = vo->shape[3], ns = po->shape[0], rep = hv / qo->shape[2];
  /* The states [N, Hv, Dk, Dv] of the sequences' slots (slot 0 for padding). */
  nv_array *s = nv_astype(slots, NV_DTYPE_INT64);
  nv_array *pad = nv_less_scalar(s, 0);
  nv_array *zero_i = nv_array_scalar(0, NV_DTYPE_INT64);
  nv_array *last = nv_array_scalar(ns, NV_DTYPE_INT64);
  nv_array *at = nv_where(pad, zero_i, s), *to = nv_where(pad, last, s);
  nv_release(zero_i);
  nv_release(last);
  nv_release(s);
  nv_array *m = nv_take(pool, at, 0);
  nv_release(at);
  m = nv__then(m, nv_astype(m, ct));
  nv_array *qc = heads_repeated(q, rep, ct), *kc = heads_repeated(k, rep, ct);
  nv_array *vc = nv_astype(v, ct), *gc = nv_astype(g, ct), *bc = nv_astype(beta, ct);
  nv_array *sc = nv_array_scalar(scale, ct);
  nv_array **os = calloc((size_t)(t > 0 ? t : 1), sizeof *os);
  int col[4] = {n, hv, dk, 1}, row[4] = {n, hv, 1, dv}, one[4] = {n, hv, 1, 1}, two = 2;
  for (int i = 0; os && i < t; i++) {
    nv_array *gt = at_time(gc, i), *bt = at_time(bc, i), *kt = at_time(kc, i),
             *qt = at_time(qc, i), *vt = at_time(vc, i);
    gt = nv__then(gt, nv_exp(gt));
    gt = nv__then(gt, nv_reshape(gt, one, 4));
    m = nv__then(m, nv_multiply(m, gt)); /* M = M exp(g) */
    nv_release(gt);
    kt = nv__then(kt, nv_reshape(kt, col, 4));
    nv_array *km = nv_multiply(m, kt);
    nv_array *kv = nv_sum(km, &two, 1, false); /* M^T k: [N, Hv, Dv] */
    nv_release(km);
    nv_array *u = nv_subtract(vt, kv);
    nv_release(kv);
    nv_release(vt);
    bt = nv__then(bt, nv_reshape(bt, one, 3));
    u = nv__then(u, nv_multiply(u, bt)); /* u = (v - M^T k) beta */
    nv_release(bt);
    u = nv__then(u, nv_reshape(u, row, 4));
    nv_array *ku = nv_multiply(kt, u);
    nv_release(kt);
    nv_release(u);
    m = nv__then(m, nv_add(m, ku)); /* M = M + k u^T */
    nv_release(ku);
    qt = nv__then(qt, nv_reshape(qt, col, 4));
    nv_array *qm = nv_multiply(m, qt);
    nv_release(qt);
    nv_array *o = nv_sum(qm, &two, 1, false);
    nv_release(qm);
    os[i] = nv__then(o, nv_multiply(o, sc)); /* o = scale M^T q */
  }
  nv_release(qc);
  nv_release(kc);
  nv_release(vc);
  nv_release(gc);
  nv_release(bc);
  nv_release(sc);
  nv_array *o;
  if (!os) {
    o = nv__op_error(NV_ERR_OUT_OF_MEMORY, "gated_delta_slots", "out of memory");
  } else if (t == 0) {
    int shape[4] = {n, 0, hv, dv};
    o = nv_zeros(shape, 4, ct);
  } else {
    o = nv_stack((const nv_array *const *)os, t, 1);
  }
  for (int i = 0; os && i < t; i++) nv_release(os[i]);
  free(os);
  int padshape[4] = {n, 1, 1, 1};
  nv_array *padc = nv_reshape(pad, padshape, 4), *zero = nv_array_scalar(0, ct);
  o = nv__then(o, nv_where(padc, zero, o));
  nv_release(padc);
  nv_release(zero);
  out[1] = nv__then(o, nv_astype(o, dt));
  /* The pool: each sequence's final state scattered at its slot (padding at an extra row
   * dropped afterwards). */
  int upd[5] = {n, 1, hv, dk, dv}, extra[4] = {1, hv, dk, dv};
  m = nv__then(m, nv_astype(m, sdt));
  m = nv__then(m, nv_reshape(m, upd, 5));
  nv_array *padrow = nv_zeros(extra, 4, sdt);
  const nv_array *pp[2] = {pool, padrow};
  nv_array *ext = nv_concatenate(pp, 2, 0);
  nv_release(padrow);
  const nv_array *idx[1] = {to};
  int ax0 = 0;
  ext = nv__then(ext, nv_scatter(ext, idx, 1, m, &ax0));
  nv_release(m);
  nv_release(to);
  nv_release(pad);
  int start[4] = {0, 0, 0, 0}, stop[4] = {ns, hv, dk, dv};
  out[0] = nv__then(ext, nv_slice(ext, start, stop, NULL, 4));
}
