/* The fused activations on the GPU: GELU's three forms (gelu, gelu_approx, gelu_fast_approx) and
 * act_vjp (g f'(x) of the GELU forms, of tanh and of sigmoid from their output), one kernel
 * pair (contiguous and strided; act_vjp also tiled) per (primitive, mode, dtype), the mode
 * fixed at compile time. Host side: k_act in elementwise.c, through the family's layouts.
 *
 * float16/bfloat16/float32 compute in float32 with the CPU's formulas of
 * src/cpu/elementwise_fast.c, operation for operation: every product goes through __fmul_rn
 * (__dmul_rn in the tanh form's double argument), which nvcc never contracts into a
 * multiply-add, as the CPU file is compiled without contraction, and each of the CPU's fmaf (the
 * polynomials' Horner steps) is __fmaf_rn, one rounding on both; division, the float <-> double
 * conversions and the bit tricks are IEEE on both. So the GPU gives the CPU's bits, and with
 * them its measured bounds (tests/python/test_elementwise_act.py, python/tests/
 * test_activations_fused.py; tests/gpu/test_gpu_act.py checks both). float64 follows
 * src/cpu/elementwise_act.c with CUDA's erf, erfc and exp in place of libm's, so its last bits
 * differ from the CPU's, within the same float64 bound (below). */
#include "cuda/elementwise_act.h"
#include "cuda/elementwise_device.cuh"
#include "ops/elementwise_params.h"

using namespace nvew;

namespace {

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float bits_f(uint32_t u) { return __uint_as_float(u); }

__device__ __forceinline__ float inf_f() { return __int_as_float(0x7f800000); }

/* ---- The float32 formulas (elementwise_fast.c; the comments there give their reasoning) ---- */

/* x = n ln2 + r, |r| <= ln2/2; returns e^r - 1, n in *nf. x finite, |x| <= 104. */
__device__ __forceinline__ float exp_reduce(float x, float *nf) {
  float n = (mul(x, 1.44269504088896341f) + 12582912.0f) - 12582912.0f;
  float r = x - mul(n, 0.693359375f);
  r = r - mul(n, -2.12194440e-4f);
  float p = 1.98412698e-4f;
  p = __fmaf_rn(p, r, 1.38888889e-3f);
  p = __fmaf_rn(p, r, 8.33333333e-3f);
  p = __fmaf_rn(p, r, 4.16666667e-2f);
  p = __fmaf_rn(p, r, 1.66666667e-1f);
  p = __fmaf_rn(p, r, 0.5f);
  *nf = n;
  return __fmaf_rn(mul(r, r), p, r);
}

/* e^x, 2^n applied in two halves (subnormal results round once). */
__device__ __forceinline__ float exp_fast(float x) {
  float xc = x > -104.0f ? (x < 89.0f ? x : 89.0f) : -104.0f; /* NaN: -104 */
  float nf, p = 1.0f + exp_reduce(xc, &nf);
  int n = (int)nf, n1 = n / 2, n2 = n - n1;
  float s1 = bits_f((uint32_t)(n1 + 127) << 23), s2 = bits_f((uint32_t)(n2 + 127) << 23);
  float y = mul(mul(p, s1), s2);
  y = x > 88.7228394f ? inf_f() : y;
  return x != x ? x : y;
}

/* e^x for x in [-87, 88]. */
__device__ __forceinline__ float exp_normal(float x) {
  float nf, p = 1.0f + exp_reduce(x, &nf);
  return mul(p, bits_f((uint32_t)((int)nf + 127) << 23));
}

/* erf: x + x P(x^2) for |x| <= 1, 1 - exp(g(t) - x^2) for 1 < |x| < 3.92, 1 beyond. */
__device__ __forceinline__ float erf_fast(float x) {
  float a = fabsf(x), z = mul(x, x);
  float p = 7.882500358e-05f;
  p = __fmaf_rn(p, z, -8.018859080e-04f);
  p = __fmaf_rn(p, z, 5.189312622e-03f);
  p = __fmaf_rn(p, z, -2.685432881e-02f);
  p = __fmaf_rn(p, z, 1.128359735e-01f);
  p = __fmaf_rn(p, z, -3.761262596e-01f);
  p = __fmaf_rn(p, z, 1.283791661e-01f);
  float small = __fmaf_rn(x, p, x);
  float ac = a > 1.0f ? (a < 3.92f ? a : 3.92f) : 1.0f; /* NaN: 1 */
  float t = mul(ac - 2.46000004f, 0.684931517f);
  float g = 3.396065949e-05f;
  g = __fmaf_rn(g, t, -1.952551393e-04f);
  g = __fmaf_rn(g, t, 7.852147683e-04f);
  g = __fmaf_rn(g, t, -2.913793316e-03f);
  g = __fmaf_rn(g, t, 1.022892166e-02f);
  g = __fmaf_rn(g, t, -3.489235789e-02f);
  g = __fmaf_rn(g, t, 1.224186048e-01f);
  g = __fmaf_rn(g, t, -5.215439200e-01f);
  g = __fmaf_rn(g, t, -1.542617559e+00f);
  float big = 1.0f - exp_normal(g - mul(ac, ac));
  big = a >= 3.92f ? 1.0f : big;
  float y = a <= 1.0f ? small : copysignf(big, x);
  return x != x ? x : y;
}

/* x σ(vh + vl): σ(v) from e = e^-|v| with vl's first-order correction, the tail below v = -60
 * as x e^(v + 100 ln 2) 2^-100; v clamped to [-200, 120], -inf gives -0, NaN stays NaN. */
__device__ __forceinline__ float gelu_sig(float x, float vh, float vl) {
  vh = vh < 120.0f ? vh : 120.0f; /* NaN: 120 */
  vh = vh > -200.0f ? vh : -200.0f;
  bool tail = vh < -60.0f;
  const float ch = 69.3147202f, cl = -2.09781406e-6f;
  float th = vh + ch, tb = th - vh, te = (vh - (th - tb)) + (ch - tb);
  float wh = tail ? th : -fabsf(vh), wl = tail ? te + cl + vl : (vh >= 0 ? -vl : vl);
  float e = exp_fast(wh), r = 1.0f / (1.0f + e);
  float s = vh >= 0 ? r : mul(e, r), sp = mul(mul(e, r), r);
  float y = mul(x, s + mul(sp, vl));
  float ty = mul(mul(x, e + mul(e, wl)), 0x1p-100f);
  y = tail ? ty : y;
  y = x == -inf_f() ? -0.0f : y;
  return x != x ? x : y;
}

#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_K 0.044715

/* v = 2c (x + k x^3) in double, |x| clamped to 2^20. */
__device__ __forceinline__ double tanh_v(double d) {
  return mul(mul(2.0 * GELU_C, d), 1.0 + mul(mul(GELU_K, d), d));
}
__device__ __forceinline__ float gelu_tanh_fast(float x) {
  float xc = x < 1048576.0f ? x : 1048576.0f;
  xc = xc > -1048576.0f ? xc : -1048576.0f;
  double v = tanh_v((double)xc);
  float vh = (float)v;
  return gelu_sig(x, vh, (float)(v - (double)vh));
}

/* v = 1.702 x as vh + vl by Dekker's product (1.702 rounded to float32 first). */
__device__ __forceinline__ float fast_v(float x, float *vl) {
  const float ah = 1.70214844f, al = 1.702f - 1.70214844f;
  float xc = x < 1048576.0f ? x : 1048576.0f;
  xc = xc > -1048576.0f ? xc : -1048576.0f;
  float t = mul(xc, 4097.0f), xh = t - (t - xc), xl = xc - xh;
  float vh = mul(1.702f, xc);
  *vl = ((mul(ah, xh) - vh) + mul(ah, xl) + mul(al, xh)) + mul(al, xl);
  return vh;
}
__device__ __forceinline__ float gelu_fast_fast(float x) {
  float vl, vh = fast_v(x, &vl);
  return gelu_sig(x, vh, vl);
}

/* h (1 + erf(x / sqrt 2)), h = x / 2; -inf gives -0, ±0 kept. */
__device__ __forceinline__ float gelu_erf_fast(float x) {
  float h = mul(0.5f, x), e = erf_fast(mul(x, 0.707106781f));
  float y = mul(h, 1.0f + e);
  y = x == -inf_f() ? -0.0f : y;
  return x == 0 ? x : y;
}

/* The derivatives g f'(x); x clamped to ±64 in the terms that vanish beyond. */
__device__ __forceinline__ float clamp64(float x) {
  return x > -64.0f ? (x < 64.0f ? x : 64.0f) : -64.0f;
}
__device__ __forceinline__ float dgelu_erf(float x, float g) {
  float xt = clamp64(x);
  float cdf = 0.5f + mul(0.5f, erf_fast(mul(x, 0.707106781f)));
  float pdf = mul(0.398942280f, exp_fast(mul(mul(-0.5f, xt), xt)));
  float d = cdf + mul(xt, pdf);
  return x != x ? x : mul(g, d);
}
/* s + x s (1 - s) v', s = σ(vh + vl), v' = dv/dx. */
__device__ __forceinline__ float dgelu_sig(float x, float g, float vh, float vl, float dv) {
  vh = vh < 120.0f ? vh : 120.0f;
  vh = vh > -120.0f ? vh : -120.0f;
  float e = exp_fast(-fabsf(vh)), r = 1.0f / (1.0f + e);
  float s = vh >= 0 ? r : mul(e, r), sp = mul(mul(e, r), r);
  s = s + mul(sp, vl);
  float d = s + mul(mul(clamp64(x), sp), dv);
  return x != x ? x : mul(g, d);
}
__device__ __forceinline__ float dgelu_tanh(float x, float g) {
  float xt = clamp64(x);
  float dv = mul((float)(2.0 * GELU_C), 1.0f + mul(mul((float)(3.0 * GELU_K), xt), xt));
  double v = tanh_v((double)xt);
  float vh = (float)v;
  return dgelu_sig(x, g, vh, (float)(v - (double)vh), dv);
}
__device__ __forceinline__ float dgelu_fast(float x, float g) {
  float vl, vh = fast_v(x, &vl);
  return dgelu_sig(x, g, vh, vl, 1.702f);
}

/* ---- float64 (src/cpu/elementwise_act.c) ----
 * CUDA's erf, erfc and exp are less accurate than glibc's (up to 2, 5 and 1 ulp against its
 * about 0.5), which the CPU's formulas pass on whole. Near x = 0, where the float64 bound
 * (4e-16 (1 + x^2) relative, tests/python/test_elementwise_act.py) is tightest, the values here
 * round about once instead: σ(v) is carried as a pair (the rounding of 1 + e kept by Fast2Sum,
 * one Newton step on the reciprocal, the product e r exact by fma) so that x σ(v) rounds once
 * and only exp's error remains, scaled by e / (1 + e) or 1 / (1 + e); the erf form is
 * h + h erf(x / sqrt 2) by one fma for x >= -0.9 (erf's error, scaled by |erf| / (1 + erf) <=
 * 1.7 there, stays below erfc's, measured against 113-bit values with libdevice's erf and
 * erfc run on the host) and h erfc(-x / sqrt 2) below. */

#define ERF_FROM -0.9 /* the erf form's switch from erf to erfc */

/* x σ(v), σ(v) = 1 / (1 + e) or e / (1 + e) with e = e^-|v|. */
__device__ __forceinline__ double xsigmoid64(double x, double v) {
  double e = exp(-fabs(v));
  double d = 1.0 + e, lo = e - (d - 1.0); /* d + lo = 1 + e exactly (1 >= e) */
  double r = 1.0 / d, c = mul(r, fma(-d, r, 1.0) - mul(r, lo)); /* 1 / (1 + e) = r + c */
  double sh = r, sl = c;
  if (v < 0) {
    sh = mul(e, r);
    sl = fma(e, r, -sh) + mul(e, c);
  }
  return isinf(x) ? mul(x, sh) : fma(x, sh, mul(x, sl));
}

/* σ(v) alone (the derivatives), from the same pair. */
__device__ __forceinline__ double sigmoid64(double v) { return xsigmoid64(1.0, v); }

/* x Φ(x) = h erfc(-x / sqrt 2) = h + h erf(x / sqrt 2), h = x / 2. */
__device__ __forceinline__ double gelu_erf64(double x) {
  double h = mul(0.5, x), t = mul(x, 0.70710678118654752440);
  return x >= ERF_FROM ? fma(h, erf(t), h) : mul(h, erfc(-t));
}

__device__ __forceinline__ double gelu64(int mode, double x) {
  if (x == -(double)inf_f()) return -0.0;
  switch (mode) {
    case NV__ACT_GELU: return x == 0 ? x : gelu_erf64(x);
    case NV__ACT_GELU_TANH: return xsigmoid64(x, tanh_v(x));
    default: return xsigmoid64(x, mul((double)1.702f, x));
  }
}

__device__ __forceinline__ double dact64(int mode, double a, double g) {
  if (a != a) return a;
  double xt = a > -64 ? (a < 64 ? a : 64) : -64;
  switch (mode) {
    case NV__ACT_GELU: {
      double cdf = mul(0.5, erfc(mul(-a, 0.70710678118654752440)));
      double q = exp(mul(mul(-0.5, xt), xt));
      return mul(g, cdf + mul(mul(xt, 0.3989422804014327), q));
    }
    case NV__ACT_GELU_TANH: {
      double c = 2 * GELU_C, k = GELU_K;
      double s = sigmoid64(tanh_v(xt));
      double sp = mul(mul(mul(xt, s), 1 - s), c);
      return mul(g, s + mul(sp, 1 + mul(mul(3 * k, xt), xt)));
    }
    case NV__ACT_GELU_FAST: {
      double s = sigmoid64(mul((double)1.702f, xt));
      return mul(g, s + mul(mul(mul(xt, s), 1 - s), (double)1.702f));
    }
    case NV__ACT_TANH: return mul(g, mul(1 - a, 1 + a));
    default: return mul(g, mul(a, 1 - a));
  }
}

/* ---- By mode and compute type ---- */

template <int M>
__device__ __forceinline__ float gelu_c(float x) {
  if constexpr (M == NV__ACT_GELU) return gelu_erf_fast(x);
  else if constexpr (M == NV__ACT_GELU_TANH) return gelu_tanh_fast(x);
  else return gelu_fast_fast(x);
}
template <int M>
__device__ __forceinline__ double gelu_c(double x) {
  return gelu64(M, x);
}

template <int M>
__device__ __forceinline__ float dact_c(float a, float g) {
  if constexpr (M == NV__ACT_GELU) return dgelu_erf(a, g);
  else if constexpr (M == NV__ACT_GELU_TANH) return dgelu_tanh(a, g);
  else if constexpr (M == NV__ACT_GELU_FAST) return dgelu_fast(a, g);
  else if constexpr (M == NV__ACT_TANH) return mul(g, mul(1.0f - a, 1.0f + a));
  else return mul(g, mul(a, 1.0f - a));
}
template <int M>
__device__ __forceinline__ double dact_c(double a, double g) {
  return dact64(M, a, g);
}

template <class C, int M>
struct Gelu {
  __device__ __forceinline__ explicit Gelu(const nv__ew_params &) {}
  __device__ __forceinline__ C operator()(C x) const { return gelu_c<M>(x); }
};
template <class C, int M>
struct ActVjp {
  __device__ __forceinline__ explicit ActVjp(const nv__ew_params &) {}
  __device__ __forceinline__ C operator()(C a, C g) const { return dact_c<M>(a, g); }
};

template <int M, class S>
void set_gelu(nv__ew_act_table t, int dt) {
  t[0][M][dt] = entry1<true, Gelu<typename tr<S>::C, M>, S, S>();
}
template <int M, class S>
void set_vjp(nv__ew_act_table t, int dt) {
  t[1][M][dt] = entry2<true, ActVjp<typename tr<S>::C, M>, S, S, S>();
}
template <int M>
void gelu_dtypes(nv__ew_act_table t) {
  set_gelu<M, h16>(t, NV_DTYPE_FLOAT16);
  set_gelu<M, b16>(t, NV_DTYPE_BFLOAT16);
  set_gelu<M, float>(t, NV_DTYPE_FLOAT32);
  set_gelu<M, double>(t, NV_DTYPE_FLOAT64);
}
template <int M>
void vjp_dtypes(nv__ew_act_table t) {
  set_vjp<M, h16>(t, NV_DTYPE_FLOAT16);
  set_vjp<M, b16>(t, NV_DTYPE_BFLOAT16);
  set_vjp<M, float>(t, NV_DTYPE_FLOAT32);
  set_vjp<M, double>(t, NV_DTYPE_FLOAT64);
}

}  // namespace

void nv__ew_fill_act(nv__ew_act_table t) {
  gelu_dtypes<NV__ACT_GELU>(t);
  gelu_dtypes<NV__ACT_GELU_TANH>(t);
  gelu_dtypes<NV__ACT_GELU_FAST>(t);
  vjp_dtypes<NV__ACT_GELU>(t);
  vjp_dtypes<NV__ACT_GELU_TANH>(t);
  vjp_dtypes<NV__ACT_GELU_FAST>(t);
  vjp_dtypes<NV__ACT_TANH>(t);
  vjp_dtypes<NV__ACT_SIGMOID>(t);
}
