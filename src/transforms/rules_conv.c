/* vjp, jvp and vmap rules of the convolution primitive (src/ops/prims_conv.h). conv1d/2d/3d and
 * the transposed convolutions compose it, so they need no rules of their own.
 *
 * Decided rules (the derivations per spatial axis, with D the input dilation, s the stride, d
 * the kernel dilation, k the kernel length, I / O the input / output lengths, lo the low
 * padding):
 * - input cotangent: the cotangent dilated by s, convolved with the weight whose channel axes
 *   are swapped within each group, strided by D, kernel dilation d, the kernel flipped (the
 *   forward's flip negated), padded low by (k − 1)·d − lo and high so that the result has I
 *   positions (negative paddings crop).
 * - weight cotangent: the input, its channels split per group and its batch axis made the
 *   channels ([C_in/groups, I..., groups·N]), convolved with the cotangent as the kernel
 *   ([C_out, O..., N], groups as the forward), dilated by D, strided by d, kernel dilation s,
 *   padded low by lo and high so that the result has k positions; then its axes are put back as
 *   [C_out, k..., C_in/groups] and, for a flipped forward, its spatial axes reversed.
 * - An empty input, weight or cotangent gives zero gradients.
 * - jvp: the convolution is bilinear: conv(tx, w) + conv(x, tw).
 * - vmap: a batched input alone folds the batch into N; a batched weight folds the batch into
 *   the groups (the input, broadcast over the batch when unbatched, gets the batch in front of
 *   its channels), one convolution either way. */
#include "ops/conv_params.h"
#include "transforms/rule_decls.h"

/* `x` (borrowed) reshaped; a new reference. */
static nv_array *reshaped(const nv_array *x, const int *shape, int ndim) {
  return nv_reshape(x, shape, ndim);
}

/* Takes over `x` and returns op(x). */
static nv_array *then(nv_array *x, nv_array *r) {
  nv_release(x);
  return r;
}

static nv_array *input_cotangent(const nv__conv_params *p, const nv_array *x, const nv_array *w,
                                 const nv_array *cot) {
  const nv__output *ox = meta(x), *ow = meta(w), *oc = meta(cot);
  int nsp = p->nsp, G = p->groups, nd = nsp + 2;
  int cout = ow->shape[0], cin_g = ow->shape[nd - 1], cout_g = cout / G;
  /* w [C_out, K..., C_in/G] → [G, C_out/G, K..., C_in/G] → [G, C_in/G, K..., C_out/G]
   * → [C_in, K..., C_out/G]. */
  int s5[NV__MAX_DIMS], perm[NV__MAX_DIMS], s3[NV__MAX_DIMS];
  s5[0] = G;
  s5[1] = cout_g;
  for (int a = 0; a < nsp; a++) s5[2 + a] = ow->shape[1 + a];
  s5[nsp + 2] = cin_g;
  perm[0] = 0;
  perm[1] = nsp + 2;
  for (int a = 0; a < nsp; a++) perm[2 + a] = 2 + a;
  perm[nsp + 2] = 1;
  s3[0] = G * cin_g;
  for (int a = 0; a < nsp; a++) s3[1 + a] = ow->shape[1 + a];
  s3[nd - 1] = cout_g;
  nv_array *wr = reshaped(w, s5, nd + 1);
  nv_array *wt = then(wr, nv_transpose(wr, perm, nd + 1));
  nv_array *ws = then(wt, reshaped(wt, s3, nd));
  nv__conv_params q = {.nsp = nsp, .groups = G, .flip = !p->flip};
  for (int a = 0; a < nsp; a++) {
    int k = ow->shape[1 + a], I = ox->shape[1 + a], O = oc->shape[1 + a];
    long long keff = (long long)(k - 1) * p->kdil[a];
    long long ylen = nv__conv_dilated(O, p->stride[a]);
    q.stride[a] = p->idil[a];
    q.kdil[a] = p->kdil[a];
    q.idil[a] = p->stride[a];
    q.lo[a] = (int)(keff - p->lo[a]);
    q.hi[a] = (int)((long long)(I - 1) * p->idil[a] + keff + 1 - ylen - q.lo[a]);
  }
  return then(ws, nv__conv(cot, ws, &q));
}

static nv_array *weight_cotangent(const nv__conv_params *p, const nv_array *x, const nv_array *w,
                                  const nv_array *cot) {
  const nv__output *ox = meta(x), *ow = meta(w), *oc = meta(cot);
  int nsp = p->nsp, G = p->groups, nd = nsp + 2, N = ox->shape[0];
  int cin_g = ow->shape[nd - 1];
  /* x [N, I..., C_in] → [N, I..., G, C_in/G] → [C_in/G, I..., G, N] → [C_in/G, I..., G·N]. */
  int s5[NV__MAX_DIMS], perm[NV__MAX_DIMS], s3[NV__MAX_DIMS];
  s5[0] = N;
  for (int a = 0; a < nsp; a++) s5[1 + a] = ox->shape[1 + a];
  s5[nsp + 1] = G;
  s5[nsp + 2] = cin_g;
  perm[0] = nsp + 2;
  for (int a = 0; a < nsp; a++) perm[1 + a] = 1 + a;
  perm[nsp + 1] = nsp + 1;
  perm[nsp + 2] = 0;
  s3[0] = cin_g;
  for (int a = 0; a < nsp; a++) s3[1 + a] = ox->shape[1 + a];
  s3[nd - 1] = G * N;
  nv_array *xr = reshaped(x, s5, nd + 1);
  nv_array *xt = then(xr, nv_transpose(xr, perm, nd + 1));
  nv_array *xs = then(xt, reshaped(xt, s3, nd));
  /* cot [N, O..., C_out] → [C_out, O..., N]. */
  int pc[NV__MAX_DIMS];
  pc[0] = nd - 1;
  for (int a = 0; a < nsp; a++) pc[1 + a] = 1 + a;
  pc[nd - 1] = 0;
  nv_array *ct = nv_transpose(cot, pc, nd);
  nv__conv_params q = {.nsp = nsp, .groups = G};
  for (int a = 0; a < nsp; a++) {
    int k = ow->shape[1 + a], I = ox->shape[1 + a], O = oc->shape[1 + a];
    q.stride[a] = p->kdil[a];
    q.kdil[a] = p->stride[a];
    q.idil[a] = p->idil[a];
    q.lo[a] = p->lo[a];
    q.hi[a] = (int)((long long)(k - 1) * p->kdil[a] + (long long)(O - 1) * p->stride[a] + 1 -
                    nv__conv_dilated(I, p->idil[a]) - p->lo[a]);
  }
  nv_array *g = nv__conv(xs, ct, &q);
  nv_release(xs);
  nv_release(ct);
  /* [C_in/G, K..., C_out] → [C_out, K..., C_in/G], reversed spatially for a flipped forward. */
  nv_array *r = then(g, nv_transpose(g, pc, nd));
  if (p->flip) {
    int sp[NV__CONV_MAX_SPATIAL];
    for (int a = 0; a < nsp; a++) sp[a] = 1 + a;
    r = then(r, nv_flip(r, sp, nsp));
  }
  return r;
}

VJP(vjp_conv) {
  const nv__conv_params *p = n->params;
  bool empty = meta(in[0])->size == 0 || meta(in[1])->size == 0 || meta(cot[0])->size == 0;
  if (want[0])
    grad[0] = empty ? nv_zeros_like(in[0]) : input_cotangent(p, in[0], in[1], cot[0]);
  if (want[1])
    grad[1] = empty ? nv_zeros_like(in[1]) : weight_cotangent(p, in[0], in[1], cot[0]);
  return NV_OK;
}

JVP(jvp_conv) {
  const nv__conv_params *p = n->params;
  nv_array *l = tan[0] ? nv__conv(tan[0], in[1], p) : NULL;
  nv_array *r = tan[1] ? nv__conv(in[0], tan[1], p) : NULL;
  if (l && r) {
    ot[0] = nv_add(l, r);
    nv_release(l);
    nv_release(r);
  } else {
    ot[0] = l ? l : r;
  }
  return NV_OK;
}

VMAP(vmap_conv) {
  const nv__conv_params *p = n->params;
  int nsp = p->nsp, nd = nsp + 2;
  int B = nv__tf_batch_size(in, axes, 2);
  nv_array *x = axes[0] >= 0 ? nv__tf_moveaxis(in[0], axes[0], 0) : NULL;
  const nv__output *on = &n->out[0];
  if (axes[1] < 0) {
    /* [B, N, I..., C] → [B·N, I..., C]; the result back to [B, N, O..., C_out]. */
    const nv__output *o = meta(x);
    int s[NV__MAX_DIMS], so[NV__MAX_DIMS];
    s[0] = B * o->shape[1];
    for (int i = 2; i < o->ndim; i++) s[i - 1] = o->shape[i];
    nv_array *xf = then(x, reshaped(x, s, nd));
    nv_array *y = then(xf, nv__conv(xf, in[1], p));
    so[0] = B;
    for (int i = 0; i < nd; i++) so[1 + i] = on->shape[i];
    out[0] = then(y, reshaped(y, so, nd + 1));
    oax[0] = 0;
    return NV_OK;
  }
  nv_array *w = nv__tf_moveaxis(in[1], axes[1], 0);
  if (!x) {
    const nv__output *o = meta(in[0]);
    int s[NV__MAX_DIMS], zero = 0;
    s[0] = B;
    memcpy(s + 1, o->shape, sizeof(int) * (size_t)o->ndim);
    nv_array *e = nv_expand_dims(in[0], &zero, 1);
    x = then(e, nv_broadcast_to(e, s, nd + 1));
  }
  /* x [B, N, I..., C_in] → [N, I..., B, C_in] → [N, I..., B·C_in];
   * w [B, C_out, K..., C_in/G] → [B·C_out, K..., C_in/G]; groups B·G. */
  const nv__output *ox = meta(x), *ow = meta(w);
  int perm[NV__MAX_DIMS], sx[NV__MAX_DIMS], sw[NV__MAX_DIMS], so[NV__MAX_DIMS];
  for (int i = 0; i < nd - 1; i++) perm[i] = i + 1;
  perm[nd - 1] = 0;
  perm[nd] = nd;
  for (int i = 0; i < nd - 1; i++) sx[i] = ox->shape[i + 1];
  sx[nd - 1] = B * ox->shape[nd];
  sw[0] = B * ow->shape[1];
  for (int i = 1; i < nd; i++) sw[i] = ow->shape[i + 1];
  nv_array *xt = then(x, nv_transpose(x, perm, nd + 1));
  nv_array *xf = then(xt, reshaped(xt, sx, nd));
  nv_array *wf = then(w, reshaped(w, sw, nd));
  nv__conv_params q = *p;
  q.groups = B * p->groups;
  nv_array *y = nv__conv(xf, wf, &q);
  nv_release(xf);
  nv_release(wf);
  for (int i = 0; i < nd - 1; i++) so[i] = on->shape[i];
  so[nd - 1] = B;
  so[nd] = on->shape[nd - 1];
  out[0] = then(y, reshaped(y, so, nd + 1));
  oax[0] = nd - 1;
  return NV_OK;
}

void nv__rules_register_conv(nv__prim_rule *r) {
  r[NV__PRIM_CONV_GENERAL] = (nv__prim_rule){vjp_conv, jvp_conv, vmap_conv};
}
