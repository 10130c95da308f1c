/* nv_fast_scaled_dot_product_attention: argument checks (MLX's), the SDPA primitive and its
 * composed fallback (src/ops/fast_sdpa.h). */
#include <float.h>
#include <string.h>

#include "nuvec/fast.h"
#include "ops/fast_sdpa.h"

static const char *const OP = "scaled_dot_product_attention";

/* ---- The composed fallback ---- */

/* Releases *x and replaces it with r. */
static void swap(nv_array **x, nv_array *r) {
  nv_release(*x);
  *x = r;
}

/* x reshaped so that its last `keep` axes become `tail` (ntail axes), its leading axes kept. */
static nv_array *reshape_tail(const nv_array *x, int keep, const int *tail, int ntail) {
  const nv__output *o = nv__out(x);
  int shape[NV__MAX_DIMS], n = 0;
  for (int i = 0; i < o->ndim - keep; i++) shape[n++] = o->shape[i];
  for (int i = 0; i < ntail; i++) shape[n++] = tail[i];
  return nv_reshape(x, shape, n);
}

nv_array *nv__sdpa_compose(const nv_array *q, const nv_array *k, const nv_array *v,
                           const nv__sdpa_params *p, const nv_array *mask, const nv_array *sinks,
                           nv_dtype out) {
  nv_dtype w = out == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  double lowest = w == NV_DTYPE_FLOAT64 ? -DBL_MAX : -FLT_MAX;
  const nv__output *oq = nv__out(q), *ok = nv__out(k), *ov = nv__out(v);
  int Hq = oq->shape[oq->ndim - 3], Lq = oq->shape[oq->ndim - 2], D = oq->shape[oq->ndim - 1];
  int Hkv = ok->shape[ok->ndim - 3], Lk = ok->shape[ok->ndim - 2];
  int Dv = ov->shape[ov->ndim - 1], G = Hkv > 0 ? Hq / Hkv : 1;

  nv_array *qs = nv_astype(q, w), *kw = nv_astype(k, w), *vw = nv_astype(v, w);
  nv_array *sc = nv_array_scalar(p->scale, w);
  swap(&qs, nv_multiply(qs, sc));
  nv_release(sc);
  if (G > 1) { /* query heads grouped per key/value head: [..., Hkv, G, L, D] */
    int tq[4] = {Hkv, G, Lq, D};
    swap(&qs, reshape_tail(qs, 3, tq, 4));
    int ax = nv__out(kw)->ndim - 2;
    swap(&kw, nv_expand_dims(kw, &ax, 1));
    ax = nv__out(vw)->ndim - 2;
    swap(&vw, nv_expand_dims(vw, &ax, 1));
  }
  nv_array *kt = nv_swapaxes(kw, -1, -2);
  nv_array *s = nv_matmul(qs, kt);
  nv_release(kt);
  if (G > 1) {
    int ts[3] = {Hq, Lq, Lk};
    swap(&s, reshape_tail(s, 4, ts, 3));
  }
  nv_array *low = nv_array_scalar(lowest, w);
  if (p->causal) {
    nv_array *qpos = nv_arange(Lk - Lq, Lk, 1, NV_DTYPE_INT32);
    int col[2] = {Lq, 1};
    swap(&qpos, nv_reshape(qpos, col, 2));
    nv_array *kpos = nv_arange(0, Lk, 1, NV_DTYPE_INT32);
    nv_array *keep = nv_less_equal(kpos, qpos);
    swap(&s, nv_where(keep, s, low));
    nv_release(qpos);
    nv_release(kpos);
    nv_release(keep);
  } else if (p->mask == NV__SDPA_MASK_BOOL) {
    swap(&s, nv_where(mask, s, low));
  } else if (p->mask == NV__SDPA_MASK_ADD) {
    nv_array *m = nv_astype(mask, w);
    swap(&s, nv_add(s, m));
    nv_release(m);
  }
  nv_release(low);
  int last = nv__out(s)->ndim - 1;
  if (Lk > 0 && sinks) { /* softmax over the keys and one more logit per head */
    nv_array *sk = nv_astype(sinks, w);
    int sa[2] = {nv__out(sk)->ndim, nv__out(sk)->ndim + 1};
    swap(&sk, nv_expand_dims(sk, sa, 2));
    nv_array *mx = nv_max(s, &last, 1, true);
    swap(&mx, nv_maximum(mx, sk));
    swap(&mx, nv_stop_gradient(mx));
    nv_array *e = nv_subtract(s, mx);
    swap(&e, nv_exp(e));
    int elast = nv__out(e)->ndim - 1; /* batched sinks may have added leading axes */
    nv_array *den = nv_sum(e, &elast, 1, true);
    nv_array *es = nv_subtract(sk, mx);
    swap(&es, nv_exp(es));
    swap(&den, nv_add(den, es));
    swap(&s, nv_divide(e, den));
    nv_release(sk);
    nv_release(mx);
    nv_release(e);
    nv_release(es);
    nv_release(den);
  } else if (Lk > 0) {
    swap(&s, nv_softmax(s, &last, 1, false));
  }
  if (G > 1) {
    int tp[4] = {Hkv, G, Lq, Lk};
    swap(&s, reshape_tail(s, 3, tp, 4));
  }
  nv_array *o = nv_matmul(s, vw);
  if (G > 1) {
    int to[3] = {Hq, Lq, Dv};
    swap(&o, reshape_tail(o, 4, to, 3));
  }
  swap(&o, nv_astype(o, out));
  nv_release(qs);
  nv_release(kw);
  nv_release(vw);
  nv_release(s);
  return o;
}

/* ---- The builder ---- */

static bool is_float(nv_dtype d) {
  return d == NV_DTYPE_FLOAT16 || d == NV_DTYPE_BFLOAT16 || d == NV_DTYPE_FLOAT32 ||
         d == NV_DTYPE_FLOAT64;
}

/* "q (1,2,3,4)"-style text for messages. */
#define SHAPE(o, buf) nv__shape_str((o)->shape, (o)->ndim, buf, sizeof buf)

static nv_array *check_args(const nv__output *oq, const nv__output *ok, const nv__output *ov) {
  char a[96], b[96], c[96];
  const nv__output *os[3] = {oq, ok, ov};
  const char *names[3] = {"queries", "keys", "values"};
  for (int i = 0; i < 3; i++) {
    if (os[i]->ndim != 4)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "%s with shape %s expected to be rank 4",
                          names[i], SHAPE(os[i], a));
    if (!is_float(os[i]->dtype))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "%s have the unsupported dtype %s (expected a float dtype)", names[i],
                          nv_dtype_name(os[i]->dtype));
  }
  if (ok->shape[0] != oq->shape[0] || ov->shape[0] != oq->shape[0])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "mismatching batch dimension: queries %s, keys %s, values %s",
                        SHAPE(oq, a), SHAPE(ok, b), SHAPE(ov, c));
  if (ok->shape[1] != ov->shape[1])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "keys and values expected to have matching n_kv_heads; found keys %s "
                        "and values %s",
                        SHAPE(ok, a), SHAPE(ov, b));
  if (ok->shape[2] != ov->shape[2])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "keys and values expected to have matching lengths; found keys %s and "
                        "values %s",
                        SHAPE(ok, a), SHAPE(ov, b));
  if (ok->shape[3] != oq->shape[3])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "queries and keys expected to have matching last dimension; found "
                        "queries %s and keys %s",
                        SHAPE(oq, a), SHAPE(ok, b));
  if (ok->shape[1] == 0 || oq->shape[1] % ok->shape[1] != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "n_heads must be a multiple of n_kv_heads, found n_heads %d for "
                        "n_kv_heads %d (queries %s, keys %s)",
                        oq->shape[1], ok->shape[1], SHAPE(oq, a), SHAPE(ok, b));
  return NULL;
}

nv_array *nv_fast_scaled_dot_product_attention(const nv_array *q, const nv_array *k,
                                               const nv_array *v, float scale,
                                               const char *mask_mode, const nv_array *mask,
                                               const nv_array *sinks) {
  const nv_array *xs[3] = {q, k, v};
  nv_array *f = nv__op_check(OP, xs, 3);
  if (!f && mask) f = nv__op_check(OP, &mask, 1);
  if (!f && sinks) f = nv__op_check(OP, &sinks, 1);
  if (f) return f;
  bool causal = false;
  if (mask_mode && strcmp(mask_mode, "causal") == 0) {
    causal = true;
    if (mask)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the mask mode 'causal' takes no mask array");
  } else if (mask_mode && strcmp(mask_mode, "array") == 0) {
    if (!mask)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "the mask mode 'array' needs a mask array");
  } else if (mask_mode && mask_mode[0]) {
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "invalid mask option '%s'. Must be 'causal', or an array", mask_mode);
  }
  const nv__output *oq = nv__out(q), *ok = nv__out(k), *ov = nv__out(v);
  if ((f = check_args(oq, ok, ov))) return f;
  nv_dtype out = nv_promote_types(nv_promote_types(oq->dtype, ok->dtype), ov->dtype);
  int B = oq->shape[0], Hq = oq->shape[1], Lq = oq->shape[2], Lk = ok->shape[2];
  int full[4] = {B, Hq, Lq, Lk};
  char a[96], b[96];
  int kind = NV__SDPA_MASK_NONE;
  if (mask) {
    const nv__output *om = nv__out(mask);
    int bs[NV__MAX_DIMS], nb;
    if (om->ndim > 4)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the mask with shape %s expected to have at most rank 4", SHAPE(om, a));
    if (!nv__broadcast_shapes(om->shape, om->ndim, full, 4, bs, &nb) ||
        memcmp(bs, full, sizeof full) != 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the mask with shape %s does not broadcast to the scores' shape %s",
                          SHAPE(om, a), nv__shape_str(full, 4, b, sizeof b));
    if (om->dtype == NV_DTYPE_BOOL) kind = NV__SDPA_MASK_BOOL;
    else if (om->dtype != NV_DTYPE_COMPLEX64 && nv_promote_types(om->dtype, out) == out)
      kind = NV__SDPA_MASK_ADD;
    else
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "mask type %s must promote to output type %s",
                          nv_dtype_name(om->dtype), nv_dtype_name(out));
  }
  if (sinks) {
    const nv__output *os = nv__out(sinks);
    if (os->ndim != 1 || os->shape[0] != Hq)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "received invalid shape for sinks %s (expected (%d,), one per query "
                          "head)",
                          SHAPE(os, a), Hq);
    if (os->dtype == NV_DTYPE_COMPLEX64 || nv_promote_types(os->dtype, out) != out)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "type of sinks %s must promote to output type %s",
                          nv_dtype_name(os->dtype), nv_dtype_name(out));
  }
  nv__sdpa_params prm = {scale, causal, sinks != NULL, kind};
  nv__scope_suspend();
  nv_array *r;
  if (out == NV_DTYPE_FLOAT64) {
    /* float64 attention is rare: the composition computes it exactly in float64 */
    r = nv__sdpa_compose(q, k, v, &prm, mask, sinks, out);
  } else {
    nv_array *in[5];
    int n = 0;
    for (int i = 0; i < 3; i++) in[n++] = nv__cast_unscoped(xs[i], out);
    if (mask) {
      nv_array *m = nv__cast_unscoped(mask, kind == NV__SDPA_MASK_BOOL ? NV_DTYPE_BOOL : out);
      in[n++] = nv_broadcast_to(m, full, 4);
      nv_release(m);
    }
    if (sinks) in[n++] = nv__cast_unscoped(sinks, NV_DTYPE_FLOAT32);
    int shape[4] = {B, Hq, Lq, ov->shape[3]};
    nv__node *node = nv__op_node(NV__PRIM_FAST_SDPA, in, n, out, shape, 4, sizeof prm);
    if (node) *(nv__sdpa_params *)node->params = prm;
    r = nv__op_finish(OP, node);
    for (int i = 0; i < n; i++) nv_release(in[i]);
  }
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}
