/* gather_mm and gather_qmm, composed: the operands' matrices are gathered along their
 * flattened batch axes (take) and multiplied with matmul / quantized_matmul, so their
 * transforms and kernels are those of take and the products. */
#include "nuvec/quantize.h"

#include "ops/ops_internal.h"

/* `x` (at least 2-D) with its batch axes flattened to one: (B, r, c), and B. */
static nv_array *flat3(const nv_array *x, int64_t *B) {
  const nv__output *o = nv__out(x);
  int64_t b = 1;
  for (int i = 0; i < o->ndim - 2; i++) b *= o->shape[i];
  *B = b;
  int s[3] = {(int)b, o->shape[o->ndim - 2], o->shape[o->ndim - 1]};
  return nv_reshape(x, s, 3);
}

/* The indices of one operand: `idx` itself, or arange(B) in the operand's batch shape. */
static nv_array *indices_of(const nv_array *x, const nv_array *idx, int64_t B) {
  if (idx) return nv_retain((nv_array *)idx);
  const nv__output *o = nv__out(x);
  nv_array *r = nv_arange(0, (double)B, 1, NV_DTYPE_UINT32);
  nv_array *s = nv_reshape(r, o->shape, o->ndim - 2);
  nv_release(r);
  return s;
}

/* Checks the operands' ranks and the indices' dtypes; broadcasts the two index arrays to one
 * shape (li, ri: new references) or returns the failed array. */
static nv_array *prepare(const char *op, const nv_array *a, const nv_array *b, const nv_array *lhs,
                         const nv_array *rhs, int64_t *Ba, int64_t *Bb, nv_array **fa,
                         nv_array **fb, nv_array **li, nv_array **ri) {
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  if (oa->ndim < 2 || ob->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the operands must have at least 2 dimensions, got shapes %s and %s",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  const nv_array *ix[2] = {lhs, rhs};
  for (int i = 0; i < 2; i++)
    if (ix[i] && !nv_issubdtype(nv__out(ix[i])->dtype, NV_CATEGORY_INTEGER))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s must be integers, got %s",
                          i ? "rhs_indices" : "lhs_indices",
                          nv_dtype_name(nv__out(ix[i])->dtype));
  *fa = flat3(a, Ba);
  *fb = flat3(b, Bb);
  nv_array *l = indices_of(a, lhs, *Ba), *r = indices_of(b, rhs, *Bb);
  const nv__output *ol = nv__out(l), *orr = nv__out(r);
  int shape[NV__MAX_DIMS], nd;
  if (!nv__broadcast_shapes(ol->shape, ol->ndim, orr->shape, orr->ndim, shape, &nd)) {
    nv_array *f = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                               "the indices' shapes %s and %s cannot be broadcast",
                               nv__shape_str(ol->shape, ol->ndim, sa, sizeof sa),
                               nv__shape_str(orr->shape, orr->ndim, sb, sizeof sb));
    nv_release(l), nv_release(r), nv_release(*fa), nv_release(*fb);
    return f;
  }
  *li = nv_broadcast_to(l, shape, nd);
  *ri = nv_broadcast_to(r, shape, nd);
  nv_release(l), nv_release(r);
  return NULL;
}

nv_array *nv_gather_mm(const nv_array *a, const nv_array *b, const nv_array *lhs_indices,
                       const nv_array *rhs_indices, bool sorted_indices) {
  static const char *const OP = "gather_mm";
  (void)sorted_indices; /* a hint only: the composition does not need sorted indices */
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(OP, xs, 2);
  if (f) return f;
  nv__scope_suspend();
  int64_t Ba, Bb;
  nv_array *fa, *fb, *li, *ri, *r;
  f = prepare(OP, a, b, lhs_indices, rhs_indices, &Ba, &Bb, &fa, &fb, &li, &ri);
  if (f) {
    r = f;
  } else {
    nv_array *ga = nv_take(fa, li, 0), *gb = nv_take(fb, ri, 0);
    r = nv_matmul(ga, gb);
    nv_release(ga), nv_release(gb), nv_release(fa), nv_release(fb), nv_release(li),
        nv_release(ri);
  }
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}

nv_array *nv_gather_qmm(const nv_array *x, const nv_array *w, const nv_array *scales,
                        const nv_array *biases, const nv_array *lhs_indices,
                        const nv_array *rhs_indices, bool transpose, int group_size, int bits,
                        const char *mode, bool sorted_indices) {
  static const char *const OP = "gather_qmm";
  (void)sorted_indices;
  const nv_array *xs[4] = {x, w, scales, biases};
  nv_array *f = nv__op_check(OP, xs, biases ? 4 : 3);
  if (f) return f;
  nv__scope_suspend();
  int64_t Bx, Bw, Bs;
  nv_array *fx, *fw, *li, *ri, *r;
  f = prepare(OP, x, w, lhs_indices, rhs_indices, &Bx, &Bw, &fx, &fw, &li, &ri);
  if (f) {
    r = f;
  } else {
    nv_array *fs = NULL, *fbias = NULL, *gs = NULL, *gb = NULL;
    if (nv__out(scales)->ndim >= 2) fs = flat3(scales, &Bs);
    if (biases && nv__out(biases)->ndim >= 2) fbias = flat3(biases, &Bs);
    nv_array *gx = nv_take(fx, li, 0), *gw = nv_take(fw, ri, 0);
    if (fs) gs = nv_take(fs, ri, 0);
    if (fbias) gb = nv_take(fbias, ri, 0);
    /* Scales of the wrong rank reach quantized_matmul as they are and fail there. */
    r = nv_quantized_matmul(gx, gw, gs ? gs : scales, gb ? gb : biases, transpose, group_size,
                            bits, mode);
    nv_release(gx), nv_release(gw), nv_release(gs), nv_release(gb), nv_release(fs),
        nv_release(fbias);
    nv_release(fx), nv_release(fw), nv_release(li), nv_release(ri);
  }
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}

nv_array *nv_segmented_mm(const nv_array *a, const nv_array *b, const nv_array *segments) {
  static const char *const OP = "segmented_mm";
  const nv_array *xs[3] = {a, b, segments};
  nv_array *f = nv__op_check(OP, xs, 3);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b), *os = nv__out(segments);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (oa->ndim != 2 || ob->ndim != 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "batched matmul is not supported; a and b must be 2-D, got shapes %s "
                        "and %s",
                        sa, sb);
  if (oa->shape[1] != ob->shape[0])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the inner dimensions of a (shape %s) and b (shape %s) differ", sa, sb);
  if (os->ndim < 1 || os->shape[os->ndim - 1] != 2 ||
      !nv_issubdtype(os->dtype, NV_CATEGORY_INTEGER))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "segments must be integer (start, end) pairs of shape (..., 2), got %s "
                        "of shape %s",
                        nv_dtype_name(os->dtype),
                        nv__shape_str(os->shape, os->ndim, sa, sizeof sa));
  nv__scope_suspend();
  /* Each segment as a mask over K (start <= k < end: empty where end <= start) applied to a's
   * columns, then one batched product: (..., M, K) @ (K, N). */
  int K = oa->shape[1], last = os->ndim - 1, one = os->ndim;
  nv_dtype dt = nv_promote_types(oa->dtype, ob->dtype);
  nv_array *k = nv_arange(0, K, 1, NV_DTYPE_INT64);
  nv_array *i0 = nv_full(NULL, 0, 0, NV_DTYPE_INT32), *i1 = nv_full(NULL, 0, 1, NV_DTYPE_INT32);
  nv_array *st = nv_take(segments, i0, last), *en = nv_take(segments, i1, last);
  nv_array *st1 = nv_expand_dims(st, &last, 1), *en1 = nv_expand_dims(en, &last, 1);
  nv_array *ge = nv_greater_equal(k, st1), *lt = nv_less(k, en1);
  nv_array *in = nv_logical_and(ge, lt), *mask = nv_astype(in, dt);
  int axis = one - 1; /* (..., K) -> (..., 1, K) */
  nv_array *m3 = nv_expand_dims(mask, &axis, 1);
  nv_array *am = nv_multiply(a, m3), *r = nv_matmul(am, b);
  nv_array *tmp[] = {k, i0, i1, st, en, st1, en1, ge, lt, in, mask, m3, am};
  for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) nv_release(tmp[i]);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}
