/* Builders of the quantize family: quantize, dequantize and quantized_matmul (primitives).
 * The formats and the decided rules are written in include/nuvec/quantize.h; the kernels'
 * input layouts in src/ops/quantize_params.h. */
#include "nuvec/quantize.h"

#include "ops/ops_internal.h"
#include "ops/quantize_checks.h"
#include "ops/quantize_params.h"

/* ---- Mode, group size and bits ---- */

static bool is_float(nv_dtype t) {
  return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16 || t == NV_DTYPE_FLOAT32 ||
         t == NV_DTYPE_FLOAT64;
}

/* Parses `mode` and fills the defaults of `gs` and `bits` (0), checking them as MLX does.
 * NULL when they are fine, else the failed array naming `op`. */
static nv_array *parse_mode(const char *op, const char *mode, int *gs, int *bits,
                            nv__quant_params *p) {
  static const char *const names[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
  static const int def_gs[] = {64, 32, 32, 16}, def_bits[] = {4, 4, 8, 4};
  int m = -1;
  if (!mode) mode = "affine";
  for (int i = 0; i < 4; i++)
    if (!strcmp(mode, names[i])) m = i;
  if (m < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "invalid quantization mode '%s' (affine, mxfp4, mxfp8 or nvfp4)", mode);
  if (*gs == 0) *gs = def_gs[m];
  if (*bits == 0) *bits = def_bits[m];
  if (m == NV__QMODE_AFFINE) {
    if (*gs != 32 && *gs != 64 && *gs != 128)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "the requested group size %d is not supported; the supported group "
                          "sizes are 32, 64 and 128",
                          *gs);
    if (*bits < 1 || *bits > 8 || *bits == 7)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "the requested number of bits %d is not supported; the supported "
                          "bits are 1, 2, 3, 4, 5, 6 and 8",
                          *bits);
  } else {
    if (*gs != def_gs[m])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "%s quantization requires group size %d but got %d", names[m],
                          def_gs[m], *gs);
    if (*bits != def_bits[m])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "%s quantization requires bits to be %d but got %d", names[m],
                          def_bits[m], *bits);
  }
  p->mode = m;
  p->group_size = *gs;
  p->bits = *bits;
  return NULL;
}

/* Releases `f` and returns its status (for the builders that return a status). */
static nv_status fail_status(nv_array *f) {
  nv_status s = nv_array_status(f);
  nv_release(f);
  return s;
}

/* A node for `prim` over `in` with `nout` outputs of the given dtypes and shapes, or NULL
 * (thread error set). */
static nv__node *multi_node(int prim, nv_array *const *in, int nin, int nout,
                            const nv_dtype *dt, int (*shapes)[NV__MAX_DIMS], const int *nd,
                            const nv__quant_params *p) {
  nv__node *n = nv__node_new(prim, in, nin, nout, sizeof *p);
  if (!n) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  nv__node_inherit_error(n);
  *(nv__quant_params *)n->params = *p;
  for (int i = 0; i < nout; i++)
    if (nv__output_set_shape(&n->out[i], dt[i], shapes[i], nd[i]) != NV_OK) {
      nv__node_release(n);
      return NULL;
    }
  for (int i = 0; i < nin; i++) nv__node_inherit_tracer(n, in[i]->node);
  return n;
}

/* ---- quantize ---- */

nv_status nv_quantize(const nv_array *w, int group_size, int bits, const char *mode,
                      nv_vec *out) {
  static const char *const OP = "quantize";
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "quantize: the output list is NULL");
  nv__quant_params p = {0};
  nv_array *f = nv__op_check(OP, &w, 1);
  if (!f) f = parse_mode(OP, mode, &group_size, &bits, &p);
  if (f) return fail_status(f);
  const nv__output *o = nv__out(w);
  char s[NV__SHAPE_BUF];
  nv__shape_str(o->shape, o->ndim, s, sizeof s);
  if (!is_float(o->dtype))
    return fail_status(nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                                    "only real floating types can be quantized but w has "
                                    "dtype %s",
                                    nv_dtype_name(o->dtype)));
  if (o->ndim < 2)
    return fail_status(nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                                    "the matrix to be quantized must have at least 2 "
                                    "dimensions but it has shape %s",
                                    s));
  int K = o->shape[o->ndim - 1];
  if (K % group_size != 0)
    return fail_status(nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                                    "the last dimension of the matrix (shape %s) must be "
                                    "divisible by the group size %d",
                                    s, group_size));
  nv_status st = nv_array_status(w);
  if (st != NV_OK) return st;
  bool affine = p.mode == NV__QMODE_AFFINE;
  nv_dtype cdt = o->dtype == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT32 : o->dtype;
  nv__scope_suspend();
  nv_array *wc = nv__cast_unscoped(w, cdt);
  nv_array *wr = nv_contiguous(wc);
  int shapes[3][NV__MAX_DIMS], nd[3] = {o->ndim, o->ndim, o->ndim};
  for (int i = 0; i < 3; i++) memcpy(shapes[i], o->shape, (size_t)o->ndim * sizeof(int));
  shapes[0][o->ndim - 1] = (int)((int64_t)K * bits / 32);
  shapes[1][o->ndim - 1] = shapes[2][o->ndim - 1] = K / group_size;
  nv_dtype dts[3] = {NV_DTYPE_UINT32, affine ? cdt : NV_DTYPE_UINT8, cdt};
  int nout = affine ? 3 : 2;
  nv__node *n = nv__meta_known(wr)
                    ? multi_node(NV__PRIM_QUANTIZE, &wr, 1, nout, dts, shapes, nd, &p)
                    : NULL;
  nv_array *res[3] = {NULL, NULL, NULL};
  if (n) {
    for (int i = 1; i < nout; i++) nv__node_retain(n);
    for (int i = 0; i < nout; i++) res[i] = nv__array_new(n, i);
    /* float64 input: the scales and biases computed in float32 are given back as float64. */
    for (int i = 1; affine && i < 3 && o->dtype == NV_DTYPE_FLOAT64; i++) {
      nv_array *c = nv_astype(res[i], NV_DTYPE_FLOAT64);
      nv_release(res[i]);
      res[i] = c;
    }
  } else {
    st = nv__set_error(nv__last_status() != NV_OK ? nv__last_status() : NV_ERR_OUT_OF_MEMORY,
                       "quantize: %s", nv_last_error());
  }
  nv_release(wr);
  nv_release(wc);
  nv__scope_resume();
  if (n) st = nv__vec_push_all(out, res, (size_t)nout);
  for (int i = 0; i < nout; i++) nv_release(res[i]);
  return st;
}

/* ---- Shared checks of dequantize and quantized_matmul ---- */

/* Checks that scales (and biases) fit packed w: the same shape but the last axis, which is
 * the number of groups of a row. */
static nv_array *check_scales(const char *op, const nv__output *w, const nv__output *s,
                              const nv__output *b, const nv__quant_params *p) {
  char sw[NV__SHAPE_BUF], ss[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(w->shape, w->ndim, sw, sizeof sw);
  nv__shape_str(s->shape, s->ndim, ss, sizeof ss);
  if (w->dtype != NV_DTYPE_UINT32)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the quantized matrix must be uint32 but has dtype %s",
                        nv_dtype_name(w->dtype));
  if (p->mode == NV__QMODE_AFFINE && !b)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "affine quantization requires biases");
  if (p->mode != NV__QMODE_AFFINE && b)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "biases are only used in affine mode");
  if (b && (b->ndim != s->ndim || memcmp(b->shape, s->shape, (size_t)s->ndim * sizeof(int))))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "scales and biases should have the same shape; got scales of shape %s "
                        "and biases of shape %s",
                        ss, nv__shape_str(b->shape, b->ndim, sb, sizeof sb));
  if (p->mode == NV__QMODE_AFFINE ? !is_float(s->dtype) : s->dtype != NV_DTYPE_UINT8)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "scales of dtype %s do not fit mode %s",
                        nv_dtype_name(s->dtype),
                        p->mode == NV__QMODE_AFFINE ? "affine (a float dtype)" : "fp (uint8)");
  if (b && b->dtype != s->dtype)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "scales (%s) and biases (%s) should have the same dtype",
                        nv_dtype_name(s->dtype), nv_dtype_name(b->dtype));
  if (w->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the quantized matrix must have at least 2 dimensions, got shape %s",
                        sw);
  int64_t K = (int64_t)w->shape[w->ndim - 1] * 32 / p->bits;
  bool ok = s->ndim == w->ndim && K % p->group_size == 0 &&
            s->shape[s->ndim - 1] == K / p->group_size;
  for (int i = 0; ok && i < w->ndim - 1; i++) ok = s->shape[i] == w->shape[i];
  if (!ok || K > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the shapes of the quantized matrix %s and its scales %s do not match "
                        "with group_size=%d and bits=%d",
                        sw, ss, p->group_size, p->bits);
  return NULL;
}

/* Row-contiguous versions of xs[0..n) (new unscoped references; NULL entries stay NULL). */
static void contiguous_all(nv_array *const *xs, nv_array **out, int n) {
  for (int i = 0; i < n; i++) out[i] = xs[i] ? nv_contiguous(xs[i]) : NULL;
}

/* ---- dequantize ---- */

nv_array *nv_dequantize(const nv_array *w, const nv_array *scales, const nv_array *biases,
                        int group_size, int bits, const char *mode, nv_dtype dtype) {
  static const char *const OP = "dequantize";
  nv__quant_params p = {0};
  const nv_array *xs[3] = {w, scales, biases};
  nv_array *f = nv__op_check(OP, xs, 2);
  if (!f && biases) f = nv__op_check(OP, xs + 2, 1);
  if (!f) f = parse_mode(OP, mode, &group_size, &bits, &p);
  if (f) return f;
  const nv__output *ow = nv__out(w), *os = nv__out(scales);
  if ((f = check_scales(OP, ow, os, biases ? nv__out(biases) : NULL, &p))) return f;
  bool affine = p.mode == NV__QMODE_AFFINE;
  if (dtype == NV_DTYPE_COUNT) dtype = affine ? os->dtype : NV_DTYPE_BFLOAT16;
  if (!is_float(dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the output dtype must be a float dtype, got %s", nv_dtype_name(dtype));
  int shape[NV__MAX_DIMS];
  memcpy(shape, ow->shape, (size_t)ow->ndim * sizeof(int));
  shape[ow->ndim - 1] = (int)((int64_t)ow->shape[ow->ndim - 1] * 32 / bits);
  nv_dtype kdt = affine ? os->dtype : dtype;
  nv__scope_suspend();
  nv_array *in[3];
  contiguous_all((nv_array *const *)xs, in, 3);
  nv__node *n = nv__op_node(NV__PRIM_DEQUANTIZE, in, biases ? 3 : 2, kdt, shape, ow->ndim,
                            sizeof p);
  if (n) *(nv__quant_params *)n->params = p;
  nv_array *r = nv__op_finish(OP, n);
  if (kdt != dtype) {
    nv_array *c = nv_astype(r, dtype);
    nv_release(r);
    r = c;
  }
  for (int i = 0; i < 3; i++) nv_release(in[i]);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}

/* ---- quantized_matmul ---- */

/* Rows of x (per matrix of w) above which a GPU product dequantizes w and multiplies densely. */
#define NV__QMM_DENSE_ROWS 32

nv_array *nv_quantized_matmul(const nv_array *x, const nv_array *w, const nv_array *scales,
                              const nv_array *biases, bool transpose, int group_size, int bits,
                              const char *mode) {
  static const char *const OP = "quantized_matmul";
  nv__quant_params p = {0};
  const nv_array *xs[4] = {x, w, scales, biases};
  nv_array *f = nv__op_check(OP, xs, 3);
  if (!f && biases) f = nv__op_check(OP, xs + 3, 1);
  if (!f) f = parse_mode(OP, mode, &group_size, &bits, &p);
  if (f) return f;
  p.transpose = transpose;
  const nv__output *ox = nv__out(x), *ow = nv__out(w), *os = nv__out(scales);
  if ((f = check_scales(OP, ow, os, biases ? nv__out(biases) : NULL, &p))) return f;
  char sx[NV__SHAPE_BUF], sw[NV__SHAPE_BUF];
  nv__shape_str(ox->shape, ox->ndim, sx, sizeof sx);
  nv__shape_str(ow->shape, ow->ndim, sw, sizeof sw);
  if (ox->ndim == 0 || ox->dtype == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "x must be a real array of at least 1 dimension, got %s of shape %s",
                        nv_dtype_name(ox->dtype), sx);
  /* The dequantized matrix is (rows, cols) = (N, K) transposed, else (K, N). */
  int rows = ow->shape[ow->ndim - 2];
  int cols = (int)((int64_t)ow->shape[ow->ndim - 1] * 32 / bits);
  int K = transpose ? cols : rows, N = transpose ? rows : cols;
  if (ox->shape[ox->ndim - 1] != K)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the last dimension of x (shape %s) does not match the expanded "
                        "quantized matrix (%d, %d) computed from shape %s with group_size=%d, "
                        "bits=%d and transpose=%s",
                        sx, rows, cols, sw, group_size, bits, transpose ? "true" : "false");
  /* Batch axes: x's (..., M) against w's (...). */
  int xb = ox->ndim >= 2 ? ox->ndim - 2 : 0, wb = ow->ndim - 2, bshape[NV__MAX_DIMS], nb;
  if (!nv__broadcast_shapes(ox->shape, xb, ow->shape, wb, bshape, &nb))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "the batch axes of x (shape %s) and w (shape %s) do not broadcast", sx,
                        sw);
  nv_dtype dt;
  if (p.mode == NV__QMODE_AFFINE)
    dt = nv_promote_types(ox->dtype, os->dtype);
  else
    dt = is_float(ox->dtype) ? ox->dtype : NV_DTYPE_FLOAT32;
  if (!is_float(dt)) dt = NV_DTYPE_FLOAT32;
  int M = ox->ndim >= 2 ? ox->shape[ox->ndim - 2] : 1;
  int64_t B = 1;
  for (int i = 0; i < nb; i++) B *= bshape[i];
  int fin[NV__MAX_DIMS], nfin = nb;
  memcpy(fin, bshape, (size_t)nb * sizeof(int));
  if (ox->ndim >= 2) fin[nfin++] = M;
  fin[nfin++] = N;
  if (nfin > NV__MAX_DIMS || B * M > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "the result of x %s and w %s is too large",
                        sx, sw);
  int64_t xrows = wb == 0 ? B * M : M;
  if (nv_current_stream().device.type == NV_DEVICE_GPU && xrows > NV__QMM_DENSE_ROWS) {
    /* Prefill-shaped on the GPU: dequantize w once into the product's dtype and run the dense
     * matmul (cuBLASLt, tensor cores), faster there than any kernel reading packed words. */
    nv__scope_suspend();
    nv_array *wd = nv_dequantize(w, scales, biases, group_size, bits, mode, dt);
    nv_array *wt = transpose ? nv_swapaxes(wd, -1, -2) : nv_retain(wd);
    nv_array *xc = nv__cast_unscoped(x, dt);
    nv_array *r = nv_matmul(xc, wt);
    nv_release(wd), nv_release(wt), nv_release(xc);
    nv__scope_resume();
    nv__scope_register(r);
    return r;
  }
  nv__scope_suspend();
  nv_array *tmp[12];
  int nt = 0;
  /* x as (B, M, K), or (1, B*M, K) when w has no batch axes (one matrix serves every row). */
  int x3[3] = {(int)B, M, K};
  if (wb == 0) x3[0] = 1, x3[1] = (int)(B * M);
  int xfull[NV__MAX_DIMS];
  memcpy(xfull, bshape, (size_t)nb * sizeof(int));
  xfull[nb] = M;
  xfull[nb + 1] = K;
  nv_array *xc = tmp[nt++] = nv__cast_unscoped(x, dt);
  nv_array *xbr = tmp[nt++] = wb == 0 ? nv_retain(xc) : nv_broadcast_to(xc, xfull, nb + 2);
  nv_array *in[4];
  nv_array *xcont = tmp[nt++] = nv_contiguous(xbr);
  tmp[nt++] = in[0] = nv_reshape(xcont, x3, 3);
  const nv_array *ws[3] = {w, scales, biases};
  for (int i = 0; i < 3; i++) {
    if (!ws[i]) {
      in[1 + i] = NULL;
      continue;
    }
    const nv__output *o = nv__out(ws[i]);
    int full[NV__MAX_DIMS], w3[3] = {1, o->shape[o->ndim - 2], o->shape[o->ndim - 1]};
    nv_array *v = (nv_array *)ws[i];
    if (wb > 0) {
      memcpy(full, bshape, (size_t)nb * sizeof(int));
      full[nb] = w3[1];
      full[nb + 1] = w3[2];
      w3[0] = (int)B;
      v = tmp[nt++] = nv_broadcast_to(v, full, nb + 2);
    }
    v = tmp[nt++] = nv_contiguous(v);
    tmp[nt++] = in[1 + i] = nv_reshape(v, w3, 3);
  }
  int out3[3] = {x3[0], x3[1], N};
  nv__node *n = nv__op_node(NV__PRIM_QUANTIZED_MATMUL, in, biases ? 4 : 3, dt, out3, 3, sizeof p);
  if (n) *(nv__quant_params *)n->params = p;
  nv_array *r = nv__op_finish(OP, n);
  nv_array *res = nv_reshape(r, fin, nfin);
  nv_release(r);
  for (int i = 0; i < nt; i++) nv_release(tmp[i]);
  nv__scope_resume();
  nv__scope_register(res);
  return res;
}

/* ---- Checks shared with gather_qmm (src/ops/quantize_gather.c) ---- */

nv_array *nv__quant_parse_mode(const char *op, const char *mode, int *gs, int *bits,
                               nv__quant_params *p) {
  return parse_mode(op, mode, gs, bits, p);
}

nv_array *nv__quant_check_scales(const char *op, const nv__output *w, const nv__output *s,
                                 const nv__output *b, const nv__quant_params *p) {
  return check_scales(op, w, s, b, p);
}
