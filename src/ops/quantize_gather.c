/* gather_mm (composed: the operands' matrices gathered along their flattened batch axes by
 * take and multiplied with matmul) and gather_qmm (the GATHER_QMM primitive, reading each
 * pair's matrix of w in place; on a GPU stream the products its kernel does not take are
 * composed of take and quantized_matmul), and segmented_mm (composed of masks and matmul). */
#include "nuvec/quantize.h"

#include "ops/ops_internal.h"
#include "ops/quantize_checks.h"

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

/* ---- gather_qmm ---- */

static bool is_float(nv_dtype t) {
  return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16 || t == NV_DTYPE_FLOAT32 ||
         t == NV_DTYPE_FLOAT64;
}

/* Whether the GPU's gather kernel (quantize_gemv.cu's gemv indexed by pair) takes a product
 * of `M` rows per pair over K in dtype `dt`: transposed, M <= 8, K a multiple of 32, x
 * float16, bfloat16 or float32. The rest is composed on a GPU stream. */
static bool gpu_gather_kernel(const nv__quant_params *p, int64_t M, int64_t K, nv_dtype dt) {
  return p->transpose && M <= 8 && K % 32 == 0 &&
         (dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT32);
}

static const char *mode_name(int m) {
  static const char *const names[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
  return names[m];
}

nv_array *nv__gather_qmm3(const nv_array *x3, const nv_array *w3, const nv_array *s3,
                          const nv_array *b3, const nv_array *li, const nv_array *ri,
                          const nv__gather_qmm_params *p) {
  static const char *const OP = "gather_qmm";
  const nv__output *ox = nv__out(x3), *ow = nv__out(w3), *oi = nv__out(li);
  bool affine = p->q.mode == NV__QMODE_AFFINE;
  nv_dtype dt = affine ? nv_promote_types(ox->dtype, nv__out(s3)->dtype)
                       : is_float(ox->dtype) ? ox->dtype : NV_DTYPE_FLOAT32;
  if (!is_float(dt)) dt = NV_DTYPE_FLOAT32;
  int M = ox->shape[1], K = ox->shape[2];
  int N = p->q.transpose ? ow->shape[1] : (int)((int64_t)ow->shape[2] * 32 / p->q.bits);
  int64_t L = 1;
  for (int i = 0; i < oi->ndim; i++) L *= oi->shape[i];
  int fin[NV__MAX_DIMS], nfin = oi->ndim;
  memcpy(fin, oi->shape, (size_t)oi->ndim * sizeof(int));
  fin[nfin++] = M;
  fin[nfin++] = N;
  if (nfin > NV__MAX_DIMS || L * M > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the result of %lld pairs of %d x %d products is too large",
                        (long long)L, M, N);
  nv__scope_suspend();
  nv_array *r;
  if (nv_current_stream().device.type == NV_DEVICE_GPU && !gpu_gather_kernel(&p->q, M, K, dt)) {
    /* No GPU kernel for this product: the selected matrices gathered (take) and multiplied. */
    nv_array *gx = nv_take(x3, li, 0), *gw = nv_take(w3, ri, 0), *gs = nv_take(s3, ri, 0);
    nv_array *gb = b3 ? nv_take(b3, ri, 0) : NULL;
    r = nv_quantized_matmul(gx, gw, gs, gb, p->q.transpose, p->q.group_size, p->q.bits,
                            mode_name(p->q.mode));
    nv_release(gx), nv_release(gw), nv_release(gs), nv_release(gb);
  } else {
    int flat = (int)L;
    nv_array *xc = nv__cast_unscoped(x3, dt), *in[6];
    in[0] = nv_contiguous(xc);
    in[1] = nv_contiguous(w3);
    in[2] = nv_contiguous(s3);
    int k = 3;
    if (b3) in[k++] = nv_contiguous(b3);
    const nv_array *ix[2] = {li, ri};
    for (int i = 0; i < 2; i++) {
      nv_array *c = nv_astype(ix[i], NV_DTYPE_INT64), *f = nv_reshape(c, &flat, 1);
      in[k++] = nv_contiguous(f);
      nv_release(c), nv_release(f);
    }
    int out3[3] = {flat, M, N};
    nv__node *n = nv__op_node(NV__PRIM_GATHER_QMM, in, k, dt, out3, 3, sizeof *p);
    if (n) *(nv__gather_qmm_params *)n->params = *p;
    nv_array *g = nv__op_finish(OP, n);
    r = nv_reshape(g, fin, nfin);
    nv_release(g), nv_release(xc);
    for (int i = 0; i < k; i++) nv_release(in[i]);
  }
  nv__scope_resume();
  return r;
}

nv_array *nv_gather_qmm(const nv_array *x, const nv_array *w, const nv_array *scales,
                        const nv_array *biases, const nv_array *lhs_indices,
                        const nv_array *rhs_indices, bool transpose, int group_size, int bits,
                        const char *mode, bool sorted_indices) {
  static const char *const OP = "gather_qmm";
  const nv_array *xs[6] = {x, w, scales, biases, lhs_indices, rhs_indices};
  nv_array *f = nv__op_check(OP, xs, 3);
  for (int i = 3; !f && i < 6; i++)
    if (xs[i]) f = nv__op_check(OP, xs + i, 1);
  nv__gather_qmm_params p = {.sorted = sorted_indices};
  if (!f) f = nv__quant_parse_mode(OP, mode, &group_size, &bits, &p.q);
  if (f) return f;
  p.q.transpose = transpose;
  const nv__output *ox = nv__out(x), *ow = nv__out(w), *os = nv__out(scales);
  if ((f = nv__quant_check_scales(OP, ow, os, biases ? nv__out(biases) : NULL, &p.q))) return f;
  char sx[NV__SHAPE_BUF], sw[NV__SHAPE_BUF];
  nv__shape_str(ox->shape, ox->ndim, sx, sizeof sx);
  nv__shape_str(ow->shape, ow->ndim, sw, sizeof sw);
  if (ox->ndim < 2 || ox->dtype == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "x must be a real array of at least 2 dimensions, got %s of shape %s",
                        nv_dtype_name(ox->dtype), sx);
  int rows = ow->shape[ow->ndim - 2];
  int cols = (int)((int64_t)ow->shape[ow->ndim - 1] * 32 / bits);
  int K = transpose ? cols : rows;
  if (ox->shape[ox->ndim - 1] != K)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the last dimension of x (shape %s) does not match the expanded "
                        "quantized matrix (%d, %d) computed from shape %s with group_size=%d, "
                        "bits=%d and transpose=%s",
                        sx, rows, cols, sw, group_size, bits, transpose ? "true" : "false");
  nv__scope_suspend();
  int64_t Bx, Bw, Bs;
  nv_array *fx, *fw, *li, *ri, *r;
  f = prepare(OP, x, w, lhs_indices, rhs_indices, &Bx, &Bw, &fx, &fw, &li, &ri);
  if (f) {
    r = f;
  } else {
    nv_array *fs = flat3(scales, &Bs), *fb = biases ? flat3(biases, &Bs) : NULL;
    r = nv__gather_qmm3(fx, fw, fs, fb, li, ri, &p);
    nv_release(fs), nv_release(fb), nv_release(fx), nv_release(fw), nv_release(li),
        nv_release(ri);
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

/* ---- block_masked_mm ---- */

/* Checks block mask `m` of an (R, C) operand: at least 2-D, its last two axes
 * (ceil(R / bs), ceil(C / bs)). NULL when it fits, else the failed array. */
static nv_array *check_block_mask(const char *op, const char *what, const nv_array *m, int bs,
                                  int R, int C) {
  const nv__output *o = nv__out(m);
  char sm[NV__SHAPE_BUF];
  int rb = (int)(((int64_t)R + bs - 1) / bs), cb = (int)(((int64_t)C + bs - 1) / bs);
  if (o->ndim < 2 || o->shape[o->ndim - 2] != rb || o->shape[o->ndim - 1] != cb)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "%s must have shape (..., %d, %d) for an operand of %d x %d with "
                        "block_size=%d, got %s",
                        what, rb, cb, R, C, bs, nv__shape_str(o->shape, o->ndim, sm, sizeof sm));
  if (o->dtype == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s must be bool or real, got complex64",
                        what);
  return NULL;
}

/* `x` (..., R, C) with block mask `m` applied: each mask entry repeated over its bs x bs block
 * (the last partial blocks cut), then where(mask, x, 0) for a bool mask (masked-out blocks are
 * exactly zero, whatever they hold) and x * mask otherwise (a scale per block). */
static nv_array *apply_block_mask(const nv_array *x, const nv_array *m, int bs, int R, int C) {
  const nv__output *o = nv__out(m);
  int nd = o->ndim;
  nv_array *r1 = nv_repeat(m, bs, nd - 2), *r2 = nv_repeat(r1, bs, nd - 1);
  int start[NV__MAX_DIMS] = {0}, stop[NV__MAX_DIMS], step[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) stop[i] = o->shape[i], step[i] = 1;
  stop[nd - 2] = R;
  stop[nd - 1] = C;
  nv_array *e = nv_slice(r2, start, stop, step, nd), *r;
  if (o->dtype == NV_DTYPE_BOOL) {
    nv_array *z = nv_zeros(NULL, 0, nv__out(x)->dtype);
    r = nv_where(e, x, z);
    nv_release(z);
  } else {
    nv_array *ec = nv_astype(e, nv__out(x)->dtype);
    r = nv_multiply(x, ec);
    nv_release(ec);
  }
  nv_release(r1), nv_release(r2), nv_release(e);
  return r;
}

nv_array *nv_block_masked_mm(const nv_array *a, const nv_array *b, int block_size,
                             const nv_array *mask_out, const nv_array *mask_lhs,
                             const nv_array *mask_rhs) {
  static const char *const OP = "block_masked_mm";
  const nv_array *xs[5] = {a, b, mask_out, mask_lhs, mask_rhs};
  nv_array *f = nv__op_check(OP, xs, 2);
  for (int i = 2; !f && i < 5; i++)
    if (xs[i]) f = nv__op_check(OP, xs + i, 1);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (block_size <= 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "block_size must be positive, got %d",
                        block_size);
  if (oa->ndim < 2 || ob->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the operands must have at least 2 dimensions, got shapes %s and %s",
                        sa, sb);
  int M = oa->shape[oa->ndim - 2], K = oa->shape[oa->ndim - 1], N = ob->shape[ob->ndim - 1];
  if (ob->shape[ob->ndim - 2] != K)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the inner dimensions of a (shape %s) and b (shape %s) differ", sa, sb);
  nv_dtype dt = nv_promote_types(oa->dtype, ob->dtype);
  if (!nv_issubdtype(dt, NV_CATEGORY_FLOATING))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "only floating point types are supported, got %s and %s",
                        nv_dtype_name(oa->dtype), nv_dtype_name(ob->dtype));
  if ((mask_out && (f = check_block_mask(OP, "mask_out", mask_out, block_size, M, N))) ||
      (mask_lhs && (f = check_block_mask(OP, "mask_lhs", mask_lhs, block_size, M, K))) ||
      (mask_rhs && (f = check_block_mask(OP, "mask_rhs", mask_rhs, block_size, K, N))))
    return f;
  nv__scope_suspend();
  nv_array *ac = nv__cast_unscoped(a, dt), *bc = nv__cast_unscoped(b, dt);
  nv_array *am = mask_lhs ? apply_block_mask(ac, mask_lhs, block_size, M, K) : nv_retain(ac);
  nv_array *bm = mask_rhs ? apply_block_mask(bc, mask_rhs, block_size, K, N) : nv_retain(bc);
  nv_array *p = nv_matmul(am, bm);
  nv_array *r = mask_out ? apply_block_mask(p, mask_out, block_size, M, N) : nv_retain(p);
  nv_release(ac), nv_release(bc), nv_release(am), nv_release(bm), nv_release(p);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}
