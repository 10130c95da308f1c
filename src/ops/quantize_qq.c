/* nvfp4's global scale (quantize and dequantize with a per-tensor float32 scale) and qqmm, all
 * composed of existing ops (their kernels, CPU and GPU, and their transforms), see
 * include/nuvec/quantize.h for the formulas.
 *
 * With a global scale g, MLX encodes a group's E4M3 scale as E4M3((amax / 6) * (2688 / g))
 * (2688 = 448 * 6: the largest E4M3 times the largest E2M1) and decodes it as
 * E4M3 value * (g / 2688); the elements are E2M1(w / decoded scale), ties toward zero as in
 * the plain nvfp4 kernels. The E2M1 codes are computed here by comparisons with the midpoints
 * and packed eight to a word with shifts and a sum (the bits are disjoint), so the words are
 * those of the quantize kernel's layout. */
#include "nuvec/quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec/transforms.h"
#include "ops/ops_internal.h"

/* 448 * 6. */
#define NV__NVFP4_RANGE 2688.0

/* A float32 scalar. */
static nv_array *f32(double v) { return nv_full(NULL, 0, v, NV_DTYPE_FLOAT32); }

/* Checks `g` (a float32 array of one element) for op `op`; NULL when fine. */
static nv_array *check_global(const char *op, const nv_array *g) {
  const nv__output *o = nv__out(g);
  char s[NV__SHAPE_BUF];
  if (o->dtype != NV_DTYPE_FLOAT32)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the global scale must have dtype float32 but got %s",
                        nv_dtype_name(o->dtype));
  if (o->size != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the global scale must be a scalar but got shape %s",
                        nv__shape_str(o->shape, o->ndim, s, sizeof s));
  return NULL;
}

/* NULL when `mode` names nvfp4 (the only mode with a global scale), else the failed array. */
static nv_array *check_nvfp4(const char *op, const char *mode) {
  if (mode && !strcmp(mode, "nvfp4")) return NULL;
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                      "the global scale is only supported for 'nvfp4' quantization mode, got "
                      "'%s'",
                      mode ? mode : "affine");
}

/* g as a float32 scalar (new reference in the current scope). */
static nv_array *scalar_of(const nv_array *g) { return nv_reshape(g, NULL, 0); }

/* The decoded per-group scales: from_fp8(codes) * (g / 2688), float32, in the current scope. */
static nv_array *decoded_scales(const nv_array *codes, const nv_array *g) {
  nv_array *inv = nv_divide(scalar_of(g), f32(NV__NVFP4_RANGE));
  return nv_multiply(nv_from_fp8(codes, NV_DTYPE_FLOAT32), inv);
}

/* ---- quantize with a global scale ---- */

nv_status nv_quantize_scaled(const nv_array *w, int group_size, int bits, const char *mode,
                             const nv_array *global_scale, nv_vec *out) {
  static const char *const OP = "quantize";
  if (!global_scale) return nv_quantize(w, group_size, bits, mode, out);
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "quantize: the output list is NULL");
  const nv_array *xs[2] = {w, global_scale};
  nv_array *f = nv__op_check(OP, xs, 2);
  if (!f) f = check_nvfp4(OP, mode);
  if (!f) f = check_global(OP, global_scale);
  if (f) {
    nv_status s = nv_array_status(f);
    nv_release(f);
    return s;
  }
  /* The plain quantize checks the group size, bits, dtype and shape (lazily: its arrays are
   * never evaluated). */
  nv_vec *chk = nv_vec_new();
  if (!chk) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "quantize: out of memory");
  nv_status st = nv_quantize(w, group_size, bits, mode, chk);
  nv_vec_free(chk);
  if (st != NV_OK) return st;
  if ((st = nv_scope_begin()) != NV_OK) return st;
  const nv__output *o = nv__out(w);
  int nd = o->ndim, K = o->shape[nd - 1], shp[NV__MAX_DIMS + 1];
  memcpy(shp, o->shape, (size_t)nd * sizeof(int));
  /* (..., G, 16) groups, float32. */
  shp[nd - 1] = K / 16;
  shp[nd] = 16;
  int last = -1;
  nv_array *wg = nv_reshape(nv_astype(w, NV_DTYPE_FLOAT32), shp, nd + 1);
  nv_array *g = scalar_of(global_scale);
  nv_array *amax = nv_max(nv_abs(wg), &last, 1, true);
  nv_array *enc = nv_divide(f32(NV__NVFP4_RANGE), g);
  nv_array *codes = nv_to_fp8(nv_multiply(nv_divide(amax, f32(6.0)), enc));
  nv_array *sv = decoded_scales(codes, g);
  nv_array *zero = f32(0.0);
  nv_array *q = nv_where(nv_equal(sv, zero), zero, nv_divide(wg, sv));
  /* E2M1 magnitude codes: the number of midpoints below |q| (ties go to the smaller). */
  static const double mids[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  nv_array *a = nv_abs(q), *c = nv_full(NULL, 0, 0, NV_DTYPE_UINT32);
  for (int i = 0; i < 7; i++)
    c = nv_add(c, nv_astype(nv_greater(a, f32(mids[i])), NV_DTYPE_UINT32));
  /* The sign bit for nonzero codes of negative values (a zero code is +0). */
  nv_array *u0 = nv_full(NULL, 0, 0, NV_DTYPE_UINT32), *u4 = nv_full(NULL, 0, 4, NV_DTYPE_UINT32);
  nv_array *neg = nv_logical_and(nv_less(q, zero), nv_greater(c, u0));
  c = nv_bitwise_or(c, nv_left_shift(nv_astype(neg, NV_DTYPE_UINT32),
                                     nv_full(NULL, 0, 3, NV_DTYPE_UINT32)));
  /* Eight codes a word, element j at bits [4j, 4j + 4). */
  shp[nd - 1] = K / 8;
  shp[nd] = 8;
  nv_array *c8 = nv_reshape(c, shp, nd + 1);
  nv_array *sh = nv_multiply(nv_arange(0, 8, 1, NV_DTYPE_UINT32), u4);
  nv_array *words = nv_astype(nv_sum(nv_left_shift(c8, sh), &last, 1, false), NV_DTYPE_UINT32);
  shp[nd - 1] = K / 16;
  nv_array *scales = nv_reshape(codes, shp, nd);
  nv_array *res[2] = {words, scales};
  for (int i = 0; i < 2 && st == NV_OK; i++)
    if ((st = nv_array_status(res[i])) == NV_OK) st = nv_vec_push(out, res[i]);
  nv_scope_end();
  return st;
}

/* ---- dequantize with a global scale ---- */

nv_array *nv_dequantize_scaled(const nv_array *w, const nv_array *scales, const nv_array *biases,
                               int group_size, int bits, const char *mode,
                               const nv_array *global_scale, nv_dtype dtype) {
  static const char *const OP = "dequantize";
  if (!global_scale) return nv_dequantize(w, scales, biases, group_size, bits, mode, dtype);
  const nv_array *xs[3] = {w, scales, global_scale};
  nv_array *f = nv__op_check(OP, xs, 3);
  if (!f) f = check_nvfp4(OP, mode);
  if (!f) f = check_global(OP, global_scale);
  if (f) return f;
  /* The elements' values: dequantize with every scale 1.0 (E4M3 code 56) is exact. */
  nv_array *ones = nv_full_like(scales, 56);
  nv_array *e = nv_dequantize(w, ones, biases, group_size, bits, mode, NV_DTYPE_FLOAT32);
  nv_release(ones);
  if (nv_array_status(e) != NV_OK) return e;
  if (nv_scope_begin() != NV_OK) {
    nv_release(e);
    return nv__op_error(NV_ERR_OUT_OF_MEMORY, OP, "out of memory");
  }
  const nv__output *oe = nv__out(e);
  int nd = oe->ndim, shp[NV__MAX_DIMS + 1], axis = nd;
  memcpy(shp, oe->shape, (size_t)nd * sizeof(int));
  shp[nd - 1] = oe->shape[nd - 1] / 16;
  shp[nd] = 16;
  nv_array *sv = nv_expand_dims(decoded_scales(scales, global_scale), &axis, 1);
  nv_array *r = nv_reshape(nv_multiply(nv_reshape(e, shp, nd + 1), sv), oe->shape, nd);
  /* As MLX: the product is float32 whatever dtype asks for (float64 keeps its precision). */
  if (dtype != NV_DTYPE_COUNT) r = nv_astype(r, nv_promote_types(dtype, NV_DTYPE_FLOAT32));
  nv_scope_keep(r);
  nv_scope_end();
  nv_release(e);
  return r;
}

/* ---- qqmm ---- */

/* The configuration of one qqmm call. */
typedef struct qq_cfg {
  int group_size, bits;
  char mode[8];
  bool w_quantized, global; /* w packed (with scales); global scales given (x's, w's last) */
} qq_cfg;

/* x quantized and dequantized again in its own dtype ((..., K), any rank >= 1). Through
 * stop_gradient: the quantizers have no derivatives, and qqmm's rules give its own (forward
 * mode would otherwise meet quantize on its way through the custom function's graph). */
static nv_array *qdq(const qq_cfg *c, const nv_array *x, const nv_array *gx) {
  const nv__output *o = nv__out(x);
  int K = o->shape[o->ndim - 1], two[2] = {-1, K};
  nv_array *x2 = nv_reshape(nv_stop_gradient(x), two, 2);
  nv_vec *v = nv_vec_new();
  if (!v) return nv__op_error(NV_ERR_OUT_OF_MEMORY, "qqmm", "out of memory");
  nv_status st = nv_quantize_scaled(x2, c->group_size, c->bits, c->mode, gx, v);
  if (st != NV_OK) {
    nv_vec_free(v);
    return nv__op_error(st, "qqmm", "%s", nv_last_error());
  }
  nv_array *d = nv_dequantize_scaled(nv_vec_get(v, 0), nv_vec_get(v, 1), NULL, c->group_size,
                                     c->bits, c->mode, gx, o->dtype);
  nv_vec_free(v);
  return nv_reshape(nv_astype(d, o->dtype), o->shape, o->ndim);
}

/* The packed w and its scales (borrowed or new in the current scope). */
static nv_status packed_w(const qq_cfg *c, const nv_vec *in, nv_array **wq, nv_array **ws) {
  nv_array *w = nv_vec_get(in, 1);
  if (c->w_quantized) {
    *wq = w;
    *ws = nv_vec_get(in, 2);
    return NV_OK;
  }
  nv_vec *v = nv_vec_new();
  if (!v) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "qqmm: out of memory");
  nv_array *gw = c->global ? nv_vec_get(in, nv_vec_size(in) - 1) : NULL;
  nv_status st =
      nv_quantize_scaled(nv_stop_gradient(w), c->group_size, c->bits, c->mode, gw, v);
  if (st == NV_OK) {
    /* The closure's scope owns them past the list. */
    nv__scope_register(*wq = nv_retain(nv_vec_get(v, 0)));
    nv__scope_register(*ws = nv_retain(nv_vec_get(v, 1)));
  }
  nv_vec_free(v);
  return st;
}

/* w's global-scale factor g_w / 2688 (float32 scalar), or NULL without global scales. */
static nv_array *w_factor(const qq_cfg *c, const nv_vec *in) {
  if (!c->global) return NULL;
  return nv_divide(scalar_of(nv_vec_get(in, nv_vec_size(in) - 1)), f32(NV__NVFP4_RANGE));
}

/* The forward: quantized_matmul(qdq(x), packed w) (times g_w / 2688). */
static nv_status qq_call(void *payload, const nv_vec *in, nv_vec *out) {
  const qq_cfg *c = payload;
  nv_array *x = nv_vec_get(in, 0), *wq, *ws;
  nv_status st = packed_w(c, in, &wq, &ws);
  if (st != NV_OK) return st;
  nv_array *gx = c->global ? nv_vec_get(in, nv_vec_size(in) - 2) : NULL;
  nv_array *xh = qdq(c, x, gx), *fw = w_factor(c, in), *y;
  if (fw) {
    /* In float32, scaled, then in x's dtype. */
    y = nv_quantized_matmul(nv_astype(xh, NV_DTYPE_FLOAT32), wq, ws, NULL, true, c->group_size,
                            c->bits, c->mode);
    y = nv_astype(nv_multiply(y, fw), nv__out(x)->dtype);
  } else {
    y = nv_quantized_matmul(xh, wq, ws, NULL, true, c->group_size, c->bits, c->mode);
  }
  st = nv_array_status(y);
  return st == NV_OK ? nv_vec_push(out, y) : st;
}

/* The vjp, straight through the quantizers: dx = g @ dequantize(w); dw = g^T @ qdq(x) summed
 * over x's rows (w given unquantized); zeros for the packed w, its scales and the global
 * scales. Inputs: primals, then the cotangent, then the output. */
static nv_status qq_vjp(void *payload, const nv_vec *in, nv_vec *out) {
  const qq_cfg *c = payload;
  size_t np = nv_vec_size(in) - 2;
  nv_array *x = nv_vec_get(in, 0), *w = nv_vec_get(in, 1), *g = nv_vec_get(in, np), *wq, *ws;
  nv_vec *prim = nv_vec_new();
  if (!prim) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "qqmm: out of memory");
  nv_status st = NV_OK;
  for (size_t i = 0; i < np && st == NV_OK; i++) st = nv_vec_push(prim, nv_vec_get(in, i));
  if (st == NV_OK) st = packed_w(c, prim, &wq, &ws);
  if (st != NV_OK) {
    nv_vec_free(prim);
    return st;
  }
  nv_dtype xdt = nv__out(x)->dtype;
  nv_array *fw = w_factor(c, prim);
  nv_array *gf = nv_astype(g, NV_DTYPE_FLOAT32);
  nv_array *dx = nv_quantized_matmul(gf, wq, ws, NULL, false, c->group_size, c->bits, c->mode);
  if (fw) dx = nv_multiply(dx, fw);
  st = nv_vec_push(out, nv_astype(dx, xdt));
  if (st == NV_OK && !c->w_quantized) {
    const nv__output *ox = nv__out(x), *og = nv__out(g);
    int K = ox->shape[ox->ndim - 1], N = og->shape[og->ndim - 1];
    int xs2[2] = {-1, K}, gs2[2] = {-1, N};
    nv_array *gx = c->global ? nv_vec_get(prim, np - 2) : NULL;
    nv_array *xh = nv_reshape(nv_astype(qdq(c, x, gx), NV_DTYPE_FLOAT32), xs2, 2);
    nv_array *dw = nv_matmul(nv_swapaxes(nv_reshape(gf, gs2, 2), 0, 1), xh);
    st = nv_vec_push(out, nv_astype(dw, nv__out(w)->dtype));
  } else if (st == NV_OK) {
    st = nv_vec_push(out, nv_zeros_like(w));
  }
  for (size_t i = 2; i < np && st == NV_OK; i++)
    st = nv_vec_push(out, nv_zeros_like(nv_vec_get(in, i)));
  for (size_t i = 0; i < nv_vec_size(out) && st == NV_OK; i++)
    st = nv_array_status(nv_vec_get(out, i));
  nv_vec_free(prim);
  return st;
}

/* The jvp, straight through the quantizers as the vjp: tx @ dequantize(w).T, plus
 * qdq(x) @ tw.T for an unquantized w. Inputs: primals, then one tangent per primal. */
static nv_status qq_jvp(void *payload, const nv_vec *in, nv_vec *out) {
  const qq_cfg *c = payload;
  size_t np = nv_vec_size(in) / 2;
  nv_vec *prim = nv_vec_new();
  if (!prim) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "qqmm: out of memory");
  nv_status st = NV_OK;
  for (size_t i = 0; i < np && st == NV_OK; i++) st = nv_vec_push(prim, nv_vec_get(in, i));
  nv_array *wq, *ws;
  if (st == NV_OK) st = packed_w(c, prim, &wq, &ws);
  if (st != NV_OK) {
    nv_vec_free(prim);
    return st;
  }
  nv_array *x = nv_vec_get(in, 0), *tx = nv_vec_get(in, np), *fw = w_factor(c, prim);
  nv_array *t = nv_quantized_matmul(nv_astype(tx, NV_DTYPE_FLOAT32), wq, ws, NULL, true,
                                    c->group_size, c->bits, c->mode);
  if (fw) t = nv_multiply(t, fw);
  if (!c->w_quantized) {
    nv_array *gx = c->global ? nv_vec_get(prim, np - 2) : NULL;
    nv_array *xh = nv_astype(qdq(c, x, gx), NV_DTYPE_FLOAT32);
    nv_array *tw = nv_astype(nv_vec_get(in, np + 1), NV_DTYPE_FLOAT32);
    t = nv_add(t, nv_matmul(xh, nv_swapaxes(tw, -1, -2)));
  }
  t = nv_astype(t, nv__out(x)->dtype);
  st = nv_array_status(t);
  if (st == NV_OK) st = nv_vec_push(out, t);
  nv_vec_free(prim);
  return st;
}

nv_array *nv_qqmm(const nv_array *x, const nv_array *w, const nv_array *scales, int group_size,
                  int bits, const char *mode, const nv_array *global_scale_x,
                  const nv_array *global_scale_w) {
  static const char *const OP = "qqmm";
  const nv_array *xs[2] = {x, w};
  nv_array *f = nv__op_check(OP, xs, 2);
  if (f) return f;
  if (!mode) mode = "nvfp4";
  if (strcmp(mode, "nvfp4") && strcmp(mode, "mxfp8") && strcmp(mode, "mxfp4"))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "mode '%s' is not supported; qqmm supports nvfp4, mxfp8 and mxfp4", mode);
  if (!global_scale_x != !global_scale_w)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "for nvfp4 mode, either both global_scale_x and global_scale_w must be "
                        "provided, or neither");
  if (global_scale_x && ((f = check_nvfp4(OP, mode)) || (f = check_global(OP, global_scale_x)) ||
                         (f = check_global(OP, global_scale_w))))
    return f;
  const nv__output *ox = nv__out(x), *ow = nv__out(w);
  char sx[NV__SHAPE_BUF], sw[NV__SHAPE_BUF];
  nv__shape_str(ox->shape, ox->ndim, sx, sizeof sx);
  nv__shape_str(ow->shape, ow->ndim, sw, sizeof sw);
  nv_dtype xt = ox->dtype;
  if (xt != NV_DTYPE_FLOAT16 && xt != NV_DTYPE_BFLOAT16 && xt != NV_DTYPE_FLOAT32)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "only real floating types except float64 are supported but x has dtype "
                        "%s",
                        nv_dtype_name(xt));
  if (ox->ndim < 1 || ow->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "x must have at least 1 dimension and w at least 2, got shapes %s and %s",
                        sx, sw);
  bool wq = ow->dtype == NV_DTYPE_UINT32;
  if (wq && !scales)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "scales must be provided if the second argument is quantized");
  if (!wq) {
    if (scales)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "scales were given but w (dtype %s) is not quantized",
                          nv_dtype_name(ow->dtype));
    if (ow->ndim != 2)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "an unquantized w must be a matrix (N, K), got shape %s", sw);
    if (ow->dtype != NV_DTYPE_FLOAT16 && ow->dtype != NV_DTYPE_BFLOAT16 &&
        ow->dtype != NV_DTYPE_FLOAT32)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "only real floating types except float64 are supported but w has "
                          "dtype %s",
                          nv_dtype_name(ow->dtype));
    if (ox->shape[ox->ndim - 1] != ow->shape[ow->ndim - 1])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "the last dimension of x (shape %s) must match the last dimension of "
                          "w (shape %s)",
                          sx, sw);
  }
  qq_cfg *c = calloc(1, sizeof *c);
  if (!c) return nv__op_error(NV_ERR_OUT_OF_MEMORY, OP, "out of memory");
  c->group_size = group_size;
  c->bits = bits;
  snprintf(c->mode, sizeof c->mode, "%s", mode);
  c->w_quantized = wq;
  c->global = global_scale_x != NULL;
  /* A packed w's shapes, group size and bits: quantized_matmul's checks (building its node
   * only, never evaluated), under qqmm's name. */
  if (wq) {
    nv_array *chk = nv_quantized_matmul(x, w, scales, NULL, true, group_size, bits, mode);
    nv_status s = nv_array_status(chk);
    if (s != NV_OK) {
      nv_array *e = nv__op_error(s, OP, "%s", nv_last_error());
      nv_release(chk);
      free(c);
      return e;
    }
    nv_release(chk);
  }
  nv_closure *fn = nv_closure_new(qq_call, c, free);
  if (!fn) {
    free(c);
    return nv__op_error(NV_ERR_OUT_OF_MEMORY, OP, "out of memory");
  }
  nv_closure *vj = nv_closure_new(qq_vjp, c, NULL);
  nv_closure *jv = vj ? nv_closure_new(qq_jvp, c, NULL) : NULL;
  nv_closure *cf = jv ? nv_custom_function(fn, vj, jv, NULL) : NULL;
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_status st = cf && in && out ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  const nv_array *args[5] = {x, w, scales, global_scale_x, global_scale_w};
  for (int i = 0; i < 5 && st == NV_OK; i++)
    if (args[i]) st = nv_vec_push(in, (nv_array *)args[i]);
  if (st == NV_OK) st = nv_closure_apply(cf, in, out);
  nv_array *r = NULL;
  if (st == NV_OK) nv__scope_register(r = nv_retain(nv_vec_get(out, 0)));
  nv_vec_free(in);
  nv_vec_free(out);
  /* The custom function holds fn, vj and jv (and fn owns the configuration). */
  nv_closure_release(cf);
  nv_closure_release(jv);
  nv_closure_release(vj);
  nv_closure_release(fn);
  return r ? r : nv__op_error(st, OP, "%s", nv_last_error());
}
