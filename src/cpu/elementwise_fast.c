/* Fast float32 paths of the element-wise functions (float16/bfloat16 through them) and the
 * four arithmetic ops: exp, log, log1p, expm1, tanh, sigmoid, erf, erfinv, sin and cos as
 * branch-free range reductions and polynomials (every branch computed, one picked) instead of
 * libm's scalar calls; float64 and complex64 stay on libm (elementwise.c, elementwise_unary.c).
 *
 * Contiguous runs go through blocks of 16 elements, read in place and written to a local array
 * that is copied out after the block: the block loops have a fixed trip count and no aliasing
 * (an output may be the donated input), so the compiler turns them into SIMD code (the AVX2 and
 * AVX-512 clones) without run-time alias checks. (The inputs are not copied into a local array
 * as well: GCC makes that copy of 16-byte moves, which the 32-byte loads after it cannot take
 * from the store buffer, and the stall cost as much as the formulas.) Other runs (strided or
 * broadcast inputs) use the same scalar formulas element by element and give the same bits. The
 * file is compiled without contraction (ISO C mode), and multiply-adds meant to fuse are written
 * as fmaf (one rounding on every clone), so every clone rounds alike.
 *
 * Accuracy in float32 ulp, over every float32 exponent, the edges and a dense sweep
 * (tests/python/test_elementwise_ulp.py; measured maxima in brackets, over every float32 in the
 * range for log, sigmoid, sin and cos): exp 1.5 (0.99), log 1 (0.88), log1p 1.5 (0.87), expm1 2
 * (1.38), tanh 1.5 (1.23), sigmoid 2 (1.69), erf 2 (1.24), sin and cos 1 (0.83 and 0.82 for
 * |x| < 2^20), erfinv 4 (tests/python/test_elementwise.py). Special values
 * are exact: NaN in gives NaN, ±inf and ±0 as C99 says, overflow to inf, subnormal results
 * rounded once. */
#if defined(__GNUC__) && !defined(__clang__)
/* The library never reads floating-point exception flags, so the compiler may evaluate both
 * arms of a select (GCC's default -ftrapping-math forbids that, and with it the SIMD code). */
#pragma GCC optimize("no-trapping-math")
#endif

#include <float.h>

#include "cpu/elementwise_loops.h"
#include "ops/elementwise_params.h"

#define BLOCK 16

/* Each run function also gets AVX2 (with FMA: x86-64-v3) and AVX-512 clones picked at load time
 * (NV_KERNEL_CLONES_FMA), so a baseline build runs 8- or 16-wide where the CPU allows. A formula
 * written with fmaf (the polynomials' Horner steps, tanh's reduction) gets the fused instruction
 * there; the baseline clone calls libm's fmaf, slower but rounding alike (fmaf rounds once
 * everywhere). */
#define CLONES NV_KERNEL_CLONES_FMA

#include "cpu/fast_formulas.h"


/* ---- Unary ---- */

/* A block's second pass for the functions whose formula covers only part of the range (sin
 * and cos: |x| >= 2^20 goes to libm, elements picked by a compare, rare in practice). */
#define NO_FIXUP(IN, OUT) ((void)0)
#define TRIG_FIX(IN, OUT, LIBM)                                                         \
  do {                                                                                  \
    int big_ = 0; /* one vector compare for the block first: the scalar loop is slow */ \
    for (int j = 0; j < BLOCK; j++) big_ |= fabsf(IN[j]) >= TRIG_LIMIT;                 \
    if (big_)                                                                           \
      for (int j = 0; j < BLOCK; j++)                                                   \
        if (fabsf(IN[j]) >= TRIG_LIMIT && fabsf(IN[j]) <= FLT_MAX) OUT[j] = LIBM(IN[j]); \
  } while (0)
#define SIN_FIXUP(IN, OUT) TRIG_FIX(IN, OUT, sinf)
#define COS_FIXUP(IN, OUT) TRIG_FIX(IN, OUT, cosf)
/* One element: the formula, or libm where the block pass would have used it. */
#define SCALAR(F, FIXUP, X) scalar_##FIXUP(X, F)
#define scalar_NO_FIXUP(X, F) F(X)
#define scalar_SIN_FIXUP(X, F) trig_one(X, F, sinf)
#define scalar_COS_FIXUP(X, F) trig_one(X, F, cosf)
FORMULA float trig_one(float x, float (*f)(float), float (*libm)(float)) {
  return fabsf(x) >= TRIG_LIMIT && fabsf(x) <= FLT_MAX ? libm(x) : f(x);
}

#define UNARY_FAST(NAME, F, FIXUP)                                                     \
  CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {    \
    (void)extra;                                                                  \
    float *o = (float *)p[0];                                                     \
    const float *a = (const float *)p[1];                                         \
    int64_t sa = s[1], i = 0;                                                     \
    if (sa == 1) {                                                                \
      for (; i + BLOCK <= n; i += BLOCK) {                                        \
        const float *in = a + i;                                                  \
        float out[BLOCK];                                                         \
        for (int j = 0; j < BLOCK; j++) out[j] = F(in[j]);                        \
        FIXUP(in, out);                                                           \
        memcpy(o + i, out, sizeof out);                                           \
      }                                                                           \
    }                                                                             \
    for (; i < n; i++) o[i] = SCALAR(F, FIXUP, a[i * sa]);                        \
  }
/* float16/bfloat16: blocks converted to float32, the float32 formula, one rounding back. */
#define UNARY_FAST_HALF(NAME, F, FIXUP, LOAD, STORE)                                   \
  CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {    \
    (void)extra;                                                                  \
    uint16_t *o = (uint16_t *)p[0];                                               \
    const uint16_t *a = (const uint16_t *)p[1];                                   \
    int64_t sa = s[1], i = 0;                                                     \
    for (; i + BLOCK <= n; i += BLOCK) {                                          \
      float v[BLOCK];                                                             \
      for (int j = 0; j < BLOCK; j++) v[j] = LOAD(a[(i + j) * sa]);               \
      float w[BLOCK];                                                             \
      for (int j = 0; j < BLOCK; j++) w[j] = F(v[j]);                             \
      FIXUP(v, w);                                                                \
      for (int j = 0; j < BLOCK; j++) o[i + j] = STORE(w[j]);                     \
    }                                                                             \
    for (; i < n; i++) o[i] = STORE(SCALAR(F, FIXUP, LOAD(a[i * sa])));           \
  }
#define FAST_OP(OP, F, FIXUP)                                                   \
  UNARY_FAST(OP##_f32, F, FIXUP)                                                \
  UNARY_FAST_HALF(OP##_f16, F, FIXUP, nv__f16_to_f32, nv__f32_to_f16)           \
  UNARY_FAST_HALF(OP##_bf16, F, FIXUP, nv__bf16_to_f32, nv__f32_to_bf16)
FAST_OP(exp, exp_fast, NO_FIXUP)
FAST_OP(tanh, tanh_fast, NO_FIXUP)
FAST_OP(sigmoid, sigmoid_fast, NO_FIXUP)
FAST_OP(log, log_fast, NO_FIXUP)
FAST_OP(log1p, log1p_fast, NO_FIXUP)
FAST_OP(expm1, expm1_fast, NO_FIXUP)
FAST_OP(erf, erf_fast, NO_FIXUP)
FAST_OP(erfinv, erfinv_fast, NO_FIXUP)
FAST_OP(sin, sin_fast, SIN_FIXUP)
FAST_OP(cos, cos_fast, COS_FIXUP)

/* ---- GELU and the fused activation derivatives (src/ops/elementwise_act.c) ---- */

/* x σ(v) for v = 2c (x + k x³) (gelu_approx: 0.5 x (1 + tanh(v/2)) is x σ(v), without the
 * cancellation of 1 + tanh for negative x) or v = 1.702 x (gelu_fast_approx), v given as
 * vh + vl (vh its float rounding; from double for the tanh form, Dekker's exact product for the
 * fast one): σ(vh + vl) = s + s (1 - s) vl to first order, so the rounding of v does not reach
 * the result. One exponential: e = e^-|v|, s = 1 /
 * (1 + e) or e / (1 + e), s (1 - s) = e / (1 + e)². Below v = -60, σ(v) = e^v to float
 * precision, and x e^v is formed as x e^(v + 100 ln 2) 2^-100 (the exponential's argument
 * moved, its split kept) so that e^v, subnormal past -87, keeps its digits while x e^v is still
 * normal. v is clamped to [-200, 120]; -inf gives -0 (the limit), NaN stays NaN. Within 4.5 ulp
 * for results in the normal range (4.21 measured over every float32 in [-12, -0.5], where the
 * roundings of e^-|v|, 1 / (1 + e) and the products add up); subnormal results within |x| 2^-149
 * (tests/python/test_elementwise_act.py). */
FORMULA float gelu_sig(float x, float vh, float vl) {
  /* Clamped (NaN: 120); vl stays the correction of the unclamped v, unused where σ is flat. */
  vh = vh < 120.0f ? vh : 120.0f;
  vh = vh > -200.0f ? vh : -200.0f;
  bool tail = vh < -60.0f;
  /* w = v + 100 ln 2 as wh + wl (Knuth's two-sum of vh and 100 ln 2's high part), or -|v|. */
  const float ch = 69.3147202f, cl = -2.09781406e-6f;
  float th = vh + ch, tb = th - vh, te = (vh - (th - tb)) + (ch - tb);
  float wh = tail ? th : -fabsf(vh), wl = tail ? te + cl + vl : (vh >= 0 ? -vl : vl);
  float e = exp_fast(wh), r = 1.0f / (1.0f + e);
  float s = vh >= 0 ? r : e * r, sp = e * r * r;
  float y = x * (s + sp * vl);
  float ty = (x * (e + e * wl)) * 0x1p-100f;
  y = tail ? ty : y;
  y = x == -INFINITY ? -0.0f : y;
  return x != x ? x : y;
}
#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_K 0.044715
/* v = 2c (x + k x³) in double (|x| clamped to 2^20, where v is far past the clamp), split. */
FORMULA float gelu_tanh_fast(float x) {
  float xc = x < 1048576.0f ? x : 1048576.0f;
  xc = xc > -1048576.0f ? xc : -1048576.0f;
  double d = xc, v = 2.0 * GELU_C * d * (1.0 + GELU_K * d * d);
  float vh = (float)v;
  return gelu_sig(x, vh, (float)(v - (double)vh));
}
/* v = 1.702 x exactly as vh + vl by Dekker's product (no FMA needed: this file is compiled
 * without contraction), 1.702 rounded to float32 first as the composed x * sigmoid(1.702 * x)
 * rounds its weak scalar; |x| is clamped to 2^20 so that the split cannot overflow. */
FORMULA float fast_v(float x, float *vl) {
  const float ah = 1.70214844f, al = 1.702f - 1.70214844f; /* a's top 11 bits, and the rest */
  float xc = x < 1048576.0f ? x : 1048576.0f;
  xc = xc > -1048576.0f ? xc : -1048576.0f;
  float t = xc * 4097.0f, xh = t - (t - xc), xl = xc - xh;
  float vh = 1.702f * xc;
  *vl = ((ah * xh - vh) + ah * xl + al * xh) + al * xl;
  return vh;
}
FORMULA float gelu_fast_fast(float x) {
  float vl, vh = fast_v(x, &vl);
  return gelu_sig(x, vh, vl);
}
/* x Φ(x) = h (1 + erf(x / √2)), h = x / 2: within 2 ulp for x >= 0; for x < 0 the sum
 * cancels (exactly: 1 + e is exact for e in [-1, -1/2]), leaving erf's error times h, within
 * |x| 2^-22 absolute (the composed form's, and PyTorch's, behaviour). -inf gives -0, ±0 kept. */
FORMULA float gelu_erf_fast(float x) {
  float h = 0.5f * x, e = erf_fast(x * 0.707106781f);
  float y = h * (1.0f + e);
  y = x == -INFINITY ? -0.0f : y;
  return x == 0 ? x : y;
}

/* The derivatives, as g f'(x) in one pass. The GELU forms clamp x to ±64 in the terms that
 * vanish beyond (x φ(x), x σ'(v) v'), so ±inf give f' = 1 or 0 rather than inf · 0. */
FORMULA float clamp64(float x) { return x > -64.0f ? (x < 64.0f ? x : 64.0f) : -64.0f; }
/* Φ(x) + x φ(x). Each derivative is within |g| 2^-21 absolute plus 4 ulp of the result
 * (python/tests/test_activations_fused.py). */
FORMULA float dgelu_erf(float x, float g) {
  float xt = clamp64(x);
  float cdf = 0.5f + 0.5f * erf_fast(x * 0.707106781f);
  float pdf = 0.398942280f * exp_fast(-0.5f * xt * xt);
  float d = cdf + xt * pdf;
  return x != x ? x : g * d;
}
/* s + x s (1 - s) v', s = σ(v) with v split as in gelu_sig, v' = dv/dx. s and s (1 - s) come
 * from e = e^-|v| (s = 1 / (1 + e) or e / (1 + e), s (1 - s) = e / (1 + e)²), so neither
 * loses its digits where s rounds near 1. */
FORMULA float dgelu_sig(float x, float g, float vh, float vl, float dv) {
  vh = vh < 120.0f ? vh : 120.0f;
  vh = vh > -120.0f ? vh : -120.0f;
  float e = exp_fast(-fabsf(vh)), r = 1.0f / (1.0f + e);
  float s = vh >= 0 ? r : e * r, sp = e * r * r;
  s = s + sp * vl;
  float d = s + clamp64(x) * sp * dv;
  return x != x ? x : g * d;
}
FORMULA float dgelu_tanh(float x, float g) {
  float xt = clamp64(x); /* v is past the clamp there: x beyond changes nothing */
  double d = xt;
  float dv = (float)(2.0 * GELU_C) * (1.0f + (float)(3.0 * GELU_K) * xt * xt);
  double v = 2.0 * GELU_C * d * (1.0 + GELU_K * d * d);
  float vh = (float)v;
  return dgelu_sig(x, g, vh, (float)(v - (double)vh), dv);
}
FORMULA float dgelu_fast(float x, float g) {
  float vl, vh = fast_v(x, &vl);
  return dgelu_sig(x, g, vh, vl, 1.702f);
}
/* From the output y: tanh' = (1 - y)(1 + y) (exact near |y| = 1, where 1 - y² rounds),
 * σ' = y (1 - y). */
FORMULA float dtanh_y(float y, float g) { return g * ((1.0f - y) * (1.0f + y)); }
FORMULA float dsigmoid_y(float y, float g) { return g * (y * (1.0f - y)); }

/* out = D(a, g) over two inputs with strides (0: broadcast); contiguous blocks vectorize. */
#define BINARY_FAST(NAME, D)                                                             \
  CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                     \
    float *o = (float *)p[0];                                                        \
    const float *a = (const float *)p[1], *b = (const float *)p[2];                  \
    int64_t sa = s[1], sb = s[2], i = 0;                                             \
    if (sa == 1 && sb == 1) {                                                        \
      for (; i + BLOCK <= n; i += BLOCK) {                                           \
        float out[BLOCK];                                                            \
        for (int j = 0; j < BLOCK; j++) out[j] = D(a[i + j], b[i + j]);              \
        memcpy(o + i, out, sizeof out);                                              \
      }                                                                              \
    }                                                                                \
    for (; i < n; i++) o[i] = D(a[i * sa], b[i * sb]);                               \
  }
#define BINARY_FAST_HALF(NAME, D, LOAD, STORE)                                           \
  CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                     \
    uint16_t *o = (uint16_t *)p[0];                                                  \
    const uint16_t *a = (const uint16_t *)p[1], *b = (const uint16_t *)p[2];         \
    int64_t sa = s[1], sb = s[2], i = 0;                                             \
    for (; i + BLOCK <= n; i += BLOCK) {                                             \
      float x[BLOCK], g[BLOCK], out[BLOCK];                                          \
      for (int j = 0; j < BLOCK; j++) x[j] = LOAD(a[(i + j) * sa]);                  \
      for (int j = 0; j < BLOCK; j++) g[j] = LOAD(b[(i + j) * sb]);                  \
      for (int j = 0; j < BLOCK; j++) out[j] = D(x[j], g[j]);                        \
      for (int j = 0; j < BLOCK; j++) o[i + j] = STORE(out[j]);                      \
    }                                                                                \
    for (; i < n; i++) o[i] = STORE(D(LOAD(a[i * sa]), LOAD(b[i * sb])));            \
  }
#define FAST_BINARY(OP, D)                                                      \
  BINARY_FAST(OP##_f32, D)                                                      \
  BINARY_FAST_HALF(OP##_f16, D, nv__f16_to_f32, nv__f32_to_f16)                 \
  BINARY_FAST_HALF(OP##_bf16, D, nv__bf16_to_f32, nv__f32_to_bf16)
FAST_OP(gelu_erf, gelu_erf_fast, NO_FIXUP)
FAST_OP(gelu_tanh, gelu_tanh_fast, NO_FIXUP)
FAST_OP(gelu_fast, gelu_fast_fast, NO_FIXUP)
FAST_BINARY(dgelu_erf, dgelu_erf)
FAST_BINARY(dgelu_tanh, dgelu_tanh)
FAST_BINARY(dgelu_fast, dgelu_fast)
FAST_BINARY(dtanh_y, dtanh_y)
FAST_BINARY(dsigmoid_y, dsigmoid_y)

#define PICK(OP)                                                              \
  return dtype == NV_DTYPE_FLOAT32 ? OP##_f32 : dtype == NV_DTYPE_FLOAT16 ? OP##_f16 : OP##_bf16

nv__run_fn nv__ew_fast_unary(int prim, nv_dtype dtype) {
  if (dtype != NV_DTYPE_FLOAT32 && dtype != NV_DTYPE_FLOAT16 && dtype != NV_DTYPE_BFLOAT16)
    return NULL;
  switch (prim) {
    case NV__PRIM_EXP: PICK(exp);
    case NV__PRIM_TANH: PICK(tanh);
    case NV__PRIM_SIGMOID: PICK(sigmoid);
    case NV__PRIM_LOG: PICK(log);
    case NV__PRIM_LOG1P: PICK(log1p);
    case NV__PRIM_EXPM1: PICK(expm1);
    case NV__PRIM_ERF: PICK(erf);
    case NV__PRIM_ERFINV: PICK(erfinv);
    case NV__PRIM_SIN: PICK(sin);
    case NV__PRIM_COS: PICK(cos);
    default: return NULL;
  }
}

nv__run_fn nv__ew_fast_act(int mode, bool vjp, nv_dtype dtype) {
  if (dtype != NV_DTYPE_FLOAT32 && dtype != NV_DTYPE_FLOAT16 && dtype != NV_DTYPE_BFLOAT16)
    return NULL;
  switch (mode) {
    case NV__ACT_GELU:
      if (vjp) PICK(dgelu_erf);
      PICK(gelu_erf);
    case NV__ACT_GELU_TANH:
      if (vjp) PICK(dgelu_tanh);
      PICK(gelu_tanh);
    case NV__ACT_GELU_FAST:
      if (vjp) PICK(dgelu_fast);
      PICK(gelu_fast);
    case NV__ACT_TANH:
      if (vjp) PICK(dtanh_y);
      return NULL;
    case NV__ACT_SIGMOID:
      if (vjp) PICK(dsigmoid_y);
      return NULL;
    default: return NULL;
  }
}
