/* Builders of the convolutions: conv_general is the primitive (src/ops/conv_params.h); conv1d/
 * 2d/3d and conv_transpose1d/2d/3d set its arguments as MLX does. */
#include <limits.h>
#include <stdio.h>

#include "nuvec/conv.h"
#include "ops/conv_params.h"
#include "ops/ops_internal.h"

/* "(a,b,c)" of `n` (at most 3) ints, for messages. */
static const char *ints_str(const int *v, int n, char *buf, size_t size) {
  int k = snprintf(buf, size, "(");
  for (int i = 0; i < n && k > 0 && (size_t)k < size; i++)
    k += snprintf(buf + k, size - (size_t)k, i ? ",%d" : "%d", v[i]);
  if (k > 0 && (size_t)k < size) snprintf(buf + k, size - (size_t)k, ")");
  return buf;
}

static bool floating(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT32 ||
         dt == NV_DTYPE_FLOAT64;
}

/* Checks the positivity of a stride or dilation list. */
static nv_array *check_positive(const char *op, const char *what, const int *v, int n) {
  for (int i = 0; i < n; i++)
    if (v[i] <= 0) {
      char b[64];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%s must be positive, got %s", what,
                          ints_str(v, n, b, sizeof b));
    }
  return NULL;
}

/* The convolution primitive over arguments `p` (validated here). With `mlx_pads`, a negative
 * padding is MLX's: it removes that many input elements (before the input dilation), which is
 * the primitive's padding times the input dilation; without it (the rules' convolutions) the
 * paddings are the primitive's own (in dilated positions). */
static nv_array *conv_build(const char *op, const nv_array *x, const nv_array *w,
                            nv__conv_params *p, bool mlx_pads) {
  const nv_array *xs[2] = {x, w};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *ox = nv__out(x), *ow = nv__out(w);
  char sx[NV__SHAPE_BUF], sw[NV__SHAPE_BUF];
  nv__shape_str(ox->shape, ox->ndim, sx, sizeof sx);
  nv__shape_str(ow->shape, ow->ndim, sw, sizeof sw);
  int nsp = ox->ndim - 2;
  if (nsp < 1 || nsp > NV__CONV_MAX_SPATIAL)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "only inputs with 1 to 3 spatial axes are supported, in the layout "
                        "[N, ..., C_in]; got an input of shape %s",
                        sx);
  if (p->nsp != nsp)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "%d stride/padding/dilation entries given for an input of shape %s "
                        "(%d spatial axes)",
                        p->nsp, sx, nsp);
  if (ow->ndim != ox->ndim)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the weight must have %d axes [C_out, ..., C_in] for an input of shape "
                        "%s, got a weight of shape %s",
                        ox->ndim, sx, sw);
  if (!floating(ox->dtype))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the input must be floating point, got %s (shape %s)",
                        nv_dtype_name(ox->dtype), sx);
  nv_dtype dt = nv_promote_types(ox->dtype, ow->dtype);
  if (!floating(dt))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the weight's dtype %s does not combine with the input's %s into a "
                        "floating dtype",
                        nv_dtype_name(ow->dtype), nv_dtype_name(ox->dtype));
  if ((f = check_positive(op, "strides", p->stride, nsp)) ||
      (f = check_positive(op, "kernel dilations", p->kdil, nsp)) ||
      (f = check_positive(op, "input dilations", p->idil, nsp)))
    return f;
  int G = p->groups, cin = ox->shape[ox->ndim - 1], cout = ow->shape[0];
  if (G < 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "groups must be positive, got %d", G);
  if (cin % G != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the input channels (%d, input shape %s) must be divisible by groups "
                        "(%d)",
                        cin, sx, G);
  if (G > 1 && cout % G != 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the output channels (%d, weight shape %s) must be divisible by groups "
                        "(%d)",
                        cout, sw, G);
  if ((long long)ow->shape[ow->ndim - 1] * G != cin)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the input channels must equal the weight's last axis times groups "
                        "(%d); got input shape %s and weight shape %s",
                        G, sx, sw);
  int ulo[NV__CONV_MAX_SPATIAL], uhi[NV__CONV_MAX_SPATIAL]; /* as given, for messages */
  memcpy(ulo, p->lo, sizeof ulo);
  memcpy(uhi, p->hi, sizeof uhi);
  for (int a = 0; mlx_pads && a < nsp; a++) {
    long long lo = p->lo[a] < 0 ? (long long)p->lo[a] * p->idil[a] : p->lo[a];
    long long hi = p->hi[a] < 0 ? (long long)p->hi[a] * p->idil[a] : p->hi[a];
    if (lo < INT_MIN || hi < INT_MIN)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "padding of spatial axis %d (%d, %d) is out of range", a + 1, p->lo[a],
                          p->hi[a]);
    p->lo[a] = (int)lo;
    p->hi[a] = (int)hi;
  }
  int shape[NV__MAX_DIMS];
  shape[0] = ox->shape[0];
  shape[nsp + 1] = cout;
  for (int a = 0; a < nsp; a++) {
    long long padded = nv__conv_dilated(ox->shape[a + 1], p->idil[a]) + p->lo[a] + p->hi[a];
    long long keff = (long long)(ow->shape[a + 1] - 1) * p->kdil[a] + 1;
    if (padded < keff)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "spatial axis %d of the input after dilation and padding (%lld) is "
                          "shorter than the dilated kernel (%lld): input shape %s, padding low "
                          "%d, high %d, weight shape %s",
                          a + 1, padded, keff, sx, ulo[a], uhi[a], sw);
    long long out = (padded - keff) / p->stride[a] + 1;
    if (out > INT_MAX)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "spatial axis %d of the result (%lld) is too large", a + 1, out);
    shape[a + 1] = (int)out;
  }
  nv__scope_suspend();
  nv_array *in[2] = {nv__cast_unscoped(x, dt), nv__cast_unscoped(w, dt)};
  nv__node *n = nv__op_node(NV__PRIM_CONV_GENERAL, in, 2, dt, shape, nsp + 2, sizeof *p);
  if (n) memcpy(n->params, p, sizeof *p);
  nv_release(in[0]);
  nv_release(in[1]);
  nv__scope_resume();
  return nv__op_finish(op, n);
}

nv_array *nv__conv(const nv_array *x, const nv_array *w, const nv__conv_params *p) {
  nv__conv_params q = *p;
  return conv_build("conv_general", x, w, &q, false);
}

/* Fills `p` from per-axis lists (NULL: the default `def` for every axis). */
static void fill(int *dst, const int *src, int n, int def) {
  for (int i = 0; i < n; i++) dst[i] = src ? src[i] : def;
}

/* NULL when input `x` and weight `w` of `op` (which expects `nsp` spatial axes) both have
 * nsp + 2 axes, else the failed array to return. */
static nv_array *expect_rank(const char *op, const nv_array *x, const nv_array *w, int nsp) {
  const nv_array *xs[2] = {x, w};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *ox = nv__out(x), *ow = nv__out(w);
  char s[NV__SHAPE_BUF];
  if (ox->ndim != nsp + 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "expects an input with %d axes [N, %s, C_in], got shape %s", nsp + 2,
                        nsp == 1 ? "W" : nsp == 2 ? "H, W" : "D, H, W",
                        nv__shape_str(ox->shape, ox->ndim, s, sizeof s));
  if (ow->ndim != nsp + 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "expects a weight with %d axes [C_out, %s, C_in / groups], got shape %s",
                        nsp + 2, nsp == 1 ? "W" : nsp == 2 ? "H, W" : "D, H, W",
                        nv__shape_str(ow->shape, ow->ndim, s, sizeof s));
  return NULL;
}

nv_array *nv_conv_general(const nv_array *input, const nv_array *weight, const int *stride,
                          const int *padding_lo, const int *padding_hi,
                          const int *kernel_dilation, const int *input_dilation, int groups,
                          bool flip) {
  const nv_array *xs[2] = {input, weight};
  nv_array *f = nv__op_check("conv_general", xs, 2);
  if (f) return f;
  int nsp = nv__out(input)->ndim - 2;
  nv__conv_params p = {.nsp = nsp, .groups = groups, .flip = flip};
  if (nsp >= 1 && nsp <= NV__CONV_MAX_SPATIAL) {
    fill(p.stride, stride, nsp, 1);
    fill(p.lo, padding_lo, nsp, 0);
    fill(p.hi, padding_hi, nsp, 0);
    fill(p.kdil, kernel_dilation, nsp, 1);
    fill(p.idil, input_dilation, nsp, 1);
  }
  return conv_build("conv_general", input, weight, &p, true);
}

/* conv1d/2d/3d. */
static nv_array *conv_nd(const char *op, int nsp, const nv_array *x, const nv_array *w,
                         const int *stride, const int *padding, const int *dilation, int groups) {
  nv_array *f = expect_rank(op, x, w, nsp);
  if (f) return f;
  nv__conv_params p = {.nsp = nsp, .groups = groups};
  fill(p.stride, stride, nsp, 1);
  fill(p.lo, padding, nsp, 0);
  fill(p.hi, padding, nsp, 0);
  fill(p.kdil, dilation, nsp, 1);
  fill(p.idil, NULL, nsp, 1);
  return conv_build(op, x, w, &p, true);
}

/* conv_transpose1d/2d/3d: the input dilated by stride, padded by dilation·(k − 1) − padding
 * (plus output_padding after), the kernel flipped. */
static nv_array *conv_transpose_nd(const char *op, int nsp, const nv_array *x, const nv_array *w,
                                   const int *stride, const int *padding, const int *dilation,
                                   const int *output_padding, int groups) {
  nv_array *f = expect_rank(op, x, w, nsp);
  if (f) return f;
  const nv__output *ow = nv__out(w);
  nv__conv_params p = {.nsp = nsp, .groups = groups, .flip = true};
  fill(p.idil, stride, nsp, 1);
  fill(p.kdil, dilation, nsp, 1);
  fill(p.stride, NULL, nsp, 1);
  if ((f = check_positive(op, "strides", p.idil, nsp)) ||
      (f = check_positive(op, "dilations", p.kdil, nsp)))
    return f;
  for (int a = 0; a < nsp; a++) {
    long long lo = (long long)p.kdil[a] * (ow->shape[a + 1] - 1) - (padding ? padding[a] : 0);
    long long hi = lo + (output_padding ? output_padding[a] : 0);
    if (lo < INT_MIN || lo > INT_MAX || hi < INT_MIN || hi > INT_MAX)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "padding of axis %d is out of range",
                          a + 1);
    p.lo[a] = (int)lo;
    p.hi[a] = (int)hi;
  }
  return conv_build(op, x, w, &p, true);
}

nv_array *nv_conv1d(const nv_array *input, const nv_array *weight, int stride, int padding,
                    int dilation, int groups) {
  return conv_nd("conv1d", 1, input, weight, &stride, &padding, &dilation, groups);
}

nv_array *nv_conv2d(const nv_array *input, const nv_array *weight, const int *stride,
                    const int *padding, const int *dilation, int groups) {
  return conv_nd("conv2d", 2, input, weight, stride, padding, dilation, groups);
}

nv_array *nv_conv3d(const nv_array *input, const nv_array *weight, const int *stride,
                    const int *padding, const int *dilation, int groups) {
  return conv_nd("conv3d", 3, input, weight, stride, padding, dilation, groups);
}

nv_array *nv_conv_transpose1d(const nv_array *input, const nv_array *weight, int stride,
                              int padding, int dilation, int output_padding, int groups) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, &stride, &padding, &dilation,
                           &output_padding, groups);
}

nv_array *nv_conv_transpose2d(const nv_array *input, const nv_array *weight, const int *stride,
                              const int *padding, const int *dilation, const int *output_padding,
                              int groups) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, stride, padding, dilation,
                           output_padding, groups);
}

nv_array *nv_conv_transpose3d(const nv_array *input, const nv_array *weight, const int *stride,
                              const int *padding, const int *dilation, const int *output_padding,
                              int groups) {
  return conv_transpose_nd("conv_transpose3d", 3, input, weight, stride, padding, dilation,
                           output_padding, groups);
}
