/* nv_fast_paged_attention: argument checks, the paged-attention primitive and its composed form
 * (src/ops/fast_paged.h). The definition is in include/nuvec/fast.h. */
#include "nuvec/fast.h"
#include "ops/fast.h"
#include "ops/fast_paged.h"
#include "ops/fast_sdpa.h"

static const char *const OP = "paged_attention";

/* ---- The composed form ---- */

nv_array *nv__paged_compose(const nv_array *q, const nv_array *k_pool, const nv_array *v_pool,
                            const nv_array *block_tables, const nv_array *context_lens,
                            float scale, nv_dtype out) {
  const nv__output *oq = nv__out(q), *ok = nv__out(k_pool), *ov = nv__out(v_pool);
  const nv__output *ob = nv__out(block_tables);
  int T = oq->shape[0], Hq = oq->shape[1], D = oq->shape[2];
  int NB = ok->shape[0], BS = ok->shape[1], Hkv = ok->shape[2], Dv = ov->shape[3];
  int S = ob->shape[0], M = NB * BS > 0 ? ob->shape[1] : 0; /* no slots: no key to gather */
  int c = S > 0 ? T / S : 0, Lmax = M * BS;
  /* slots[s, j] = table[s, j / BS] * BS + j % BS, the ids clipped into the pool */
  nv_array *slots;
  if (M > 0) {
    nv_array *bt = nv_astype(block_tables, NV_DTYPE_INT64);
    nv_array *lo = nv_array_scalar(0, NV_DTYPE_INT64), *hi = nv_array_scalar(NB - 1, NV_DTYPE_INT64);
    bt = nv__then(bt, nv_clip(bt, lo, hi));
    nv_release(lo);
    nv_release(hi);
    int col[3] = {S, M, 1};
    bt = nv__then(bt, nv_reshape(bt, col, 3));
    nv_array *bsz = nv_array_scalar(BS, NV_DTYPE_INT64);
    bt = nv__then(bt, nv_multiply(bt, bsz));
    nv_release(bsz);
    nv_array *in_block = nv_arange(0, BS, 1, NV_DTYPE_INT64);
    slots = nv_add(bt, in_block);
    nv_release(bt);
    nv_release(in_block);
    int flat[2] = {S, Lmax};
    slots = nv__then(slots, nv_reshape(slots, flat, 2));
  } else {
    int none[2] = {S, 0};
    slots = nv_zeros(none, 2, NV_DTYPE_INT64);
  }
  /* k, v: [NB * BS, Hkv, D] taken at the slots, [S, Lmax, Hkv, D], then [S, Hkv, Lmax, D] */
  int perm[4] = {0, 2, 1, 3};
  int kf[3] = {NB * BS, Hkv, D}, vf[3] = {NB * BS, Hkv, Dv};
  nv_array *k = nv_reshape(k_pool, kf, 3), *v = nv_reshape(v_pool, vf, 3);
  k = nv__then(k, nv_take(k, slots, 0));
  v = nv__then(v, nv_take(v, slots, 0));
  nv_release(slots);
  k = nv__then(k, nv_transpose(k, perm, 4));
  v = nv__then(v, nv_transpose(v, perm, 4));
  /* q: [S, c, Hq, D], then [S, Hq, c, D] */
  int qs[4] = {S, c, Hq, D};
  nv_array *qq = nv_reshape(q, qs, 4);
  qq = nv__then(qq, nv_transpose(qq, perm, 4));
  /* query i of sequence s sits at pos[s, i] = L_s - c + i and sees the keys j <= pos */
  nv_array *L = nv_astype(context_lens, NV_DTYPE_INT64);
  int lcol[2] = {S, 1};
  L = nv__then(L, nv_reshape(L, lcol, 2));
  nv_array *ci = nv_arange(-(double)c, 0, 1, NV_DTYPE_INT64);
  nv_array *pos = nv_add(L, ci);
  nv_release(L);
  nv_release(ci);
  int p3[4] = {S, 1, c, 1};
  pos = nv__then(pos, nv_reshape(pos, p3, 4));
  nv_array *j = nv_arange(0, Lmax, 1, NV_DTYPE_INT64);
  nv_array *keep = nv_less_equal(j, pos); /* [S, 1, c, Lmax] */
  nv_release(j);
  nv__sdpa_params sp = {scale, false, false, NV__SDPA_MASK_BOOL};
  nv_array *o = nv__sdpa_compose(qq, k, v, &sp, keep, NULL, out); /* [S, Hq, c, Dv] */
  nv_release(keep);
  nv_release(qq);
  nv_release(k);
  nv_release(v);
  nv_array *seen = nv_greater_scalar(pos, -1), *zero = nv_array_scalar(0, out);
  nv_release(pos);
  o = nv__then(o, nv_where(seen, o, zero));
  nv_release(seen);
  nv_release(zero);
  o = nv__then(o, nv_transpose(o, perm, 4));
  int os[3] = {T, Hq, Dv};
  return nv__then(o, nv_reshape(o, os, 3));
}

/* ---- The builder ---- */

#define SHAPE(o, buf) nv__shape_str((o)->shape, (o)->ndim, buf, sizeof buf)

/* The argument errors, or NULL. */
static nv_array *check_args(const nv__output *const *o) {
  static const char *const names[5] = {"q", "k_pool", "v_pool", "block_tables", "context_lens"};
  static const int ranks[5] = {3, 4, 4, 2, 1};
  static const char *const forms[5] = {"[T, Hq, D]", "[NB, BS, Hkv, D]", "[NB, BS, Hkv, Dv]",
                                       "[S, M]", "[S]"};
  char a[NV__SHAPE_BUF], b[NV__SHAPE_BUF], c[NV__SHAPE_BUF];
  for (int i = 0; i < 5; i++) {
    if (o[i]->ndim != ranks[i])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "%s must be %s (rank %d) but has shape %s",
                          names[i], forms[i], ranks[i], SHAPE(o[i], a));
    if (i < 3 ? !nv__fast_real_float(o[i]->dtype) : !nv__fast_integer(o[i]->dtype))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "%s must have %s dtype but has %s",
                          names[i], i < 3 ? "a floating" : "an integer",
                          nv_dtype_name(o[i]->dtype));
  }
  const nv__output *q = o[0], *k = o[1], *v = o[2], *bt = o[3], *cl = o[4];
  if (k->shape[0] != v->shape[0] || k->shape[1] != v->shape[1] || k->shape[2] != v->shape[2])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "k_pool and v_pool must have matching [NB, BS, Hkv] but have shapes %s "
                        "and %s",
                        SHAPE(k, a), SHAPE(v, b));
  if (q->shape[2] != k->shape[3])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "q and k_pool must have matching head size D but have shapes %s and %s",
                        SHAPE(q, a), SHAPE(k, b));
  if (k->shape[2] == 0 || q->shape[1] % k->shape[2] != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the query heads (%d, q %s) must be a multiple of the key/value heads "
                        "(%d, k_pool %s)",
                        q->shape[1], SHAPE(q, a), k->shape[2], SHAPE(k, b));
  if (cl->shape[0] != bt->shape[0])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "block_tables %s and context_lens %s must have one row per sequence",
                        SHAPE(bt, a), SHAPE(cl, b));
  int S = bt->shape[0], T = q->shape[0];
  if (S > 0 ? T % S != 0 : T != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the %d query tokens of q %s must be a multiple of the %d sequences of "
                        "block_tables %s (each sequence the same number of tokens; context_lens "
                        "%s)",
                        T, SHAPE(q, a), S, SHAPE(bt, b), SHAPE(cl, c));
  return NULL;
}

nv_array *nv_fast_paged_attention(const nv_array *q, const nv_array *k_pool,
                                  const nv_array *v_pool, const nv_array *block_tables,
                                  const nv_array *context_lens, float scale) {
  const nv_array *xs[5] = {q, k_pool, v_pool, block_tables, context_lens};
  nv_array *f = nv__op_check(OP, xs, 5);
  if (f) return f;
  const nv__output *o[5];
  for (int i = 0; i < 5; i++) o[i] = nv__out(xs[i]);
  if ((f = check_args(o))) return f;
  nv_dtype out = nv_promote_types(nv_promote_types(o[0]->dtype, o[1]->dtype), o[2]->dtype);
  nv__scope_suspend();
  nv_array *in[5];
  for (int i = 0; i < 5; i++) in[i] = nv__fast_prepared(xs[i], i < 3 ? out : NV_DTYPE_INT32);
  nv__node *node = NULL;
  if (!(f = nv__op_check(OP, (const nv_array *const *)in, 5))) {
    int shape[3] = {o[0]->shape[0], o[0]->shape[1], o[2]->shape[3]};
    node = nv__op_node(NV__PRIM_FAST_PAGED_ATTENTION, in, 5, out, shape, 3,
                       sizeof(nv__paged_params));
    if (node) ((nv__paged_params *)node->params)->scale = scale;
  }
  nv_array *r = f ? f : nv__op_finish(OP, node);
  for (int i = 0; i < 5; i++) nv_release(in[i]);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}
