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

/* ---- Scalar formulas (inlined into the block loops) ---- */

/* Always inlined: a call left in a block loop (GCC's size limits would leave erf's) keeps it
 * from being vectorized. */
#if defined(__GNUC__)
#define FORMULA static inline __attribute__((always_inline))
#else
#define FORMULA static inline
#endif

FORMULA float bits_to_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

FORMULA uint32_t f_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The shared reduction of the exponentials: x = n ln2 + r with |r| <= ln2/2 (n by rounding
 * to nearest via 1.5 * 2^23, ln2 split in two so n ln2_hi is exact), and e^r - 1 by its
 * Taylor series to r^7 (error below 2^-24 there), returned; n in *nf. x must be finite and
 * |x| <= 104. */
FORMULA float exp_reduce(float x, float *nf) {
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.98412698e-4f;
  p = fmaf(p, r, 1.38888889e-3f);
  p = fmaf(p, r, 8.33333333e-3f);
  p = fmaf(p, r, 4.16666667e-2f);
  p = fmaf(p, r, 1.66666667e-1f);
  p = fmaf(p, r, 0.5f);
  *nf = n;
  return fmaf(r * r, p, r);
}

/* e^x: 2^n (1 + (e^r - 1)) from exp_reduce, 2^n applied in two halves so subnormal results
 * round once and n never leaves the exponent range. Within 1.5 ulp. */
FORMULA float exp_fast(float x) {
  /* NaN clamps to -104 (every comparison false) so the conversion to int stays defined. */
  float xc = x > -104.0f ? (x < 89.0f ? x : 89.0f) : -104.0f;
  float nf, p = 1.0f + exp_reduce(xc, &nf); /* the 1 added last: the only large rounding */
  int n = (int)nf, n1 = n / 2, n2 = n - n1;
  float s1 = bits_to_f((uint32_t)(n1 + 127) << 23), s2 = bits_to_f((uint32_t)(n2 + 127) << 23);
  float y = p * s1 * s2;
  y = x > 88.7228394f ? INFINITY : y;
  return x != x ? x : y;
}

/* sigmoid(x) = 1 / D, D = 1 + e^u, u = -x clamped to [-20, 104] (the result is 1 or 0 beyond;
 * the clamps keep NaN, which then runs through to the result): e^u = 2^n (1 + t) reduced as in
 * tanh_fast (n = rint(u / ln2) read from the rounding sum's low bits, r = u - n ln2 by two
 * multiply-adds, t = e^r - 1 by its degree-6 minimax fit). Everything is scaled by sc = 2^-64,
 * so that 2^n sc stays a normal float for every n and the result sc / D' is one division,
 * rounded once also where it is subnormal: D' = sc + 2^n sc (1 + t) is rounded once, as
 * (sc + 2^n sc) + 2^n sc t in one multiply-add for n <= 23 (the first sum exact for n >= -23;
 * below, the result is within an ulp of 1 either way), and beyond, where sc + 2^n sc would
 * round, with 2^n sc (1 + t) carried as hi + lo (Fast2Sum) and sc added to lo. No rounding of
 * e^u itself reaches the result. Within 2 ulp (1.69 measured over every float32), subnormal
 * results included. */
FORMULA float sigmoid_fast(float x) {
  float u = -x;
  u = u > 104.0f ? 104.0f : u;
  u = u < -20.0f ? -20.0f : u;
  float k = fmaf(u, 1.44269504f, 12583039.0f); /* 1.5 2^23 + 127 + n */
  float n = k - 12583039.0f;
  float r = fmaf(n, -0.693147182f, u);
  r = fmaf(n, 1.90465421e-9f, r);
  float p = 1.381458598e-03f;
  p = fmaf(p, r, 8.368716575e-03f);
  p = fmaf(p, r, 4.166838899e-02f);
  p = fmaf(p, r, 1.666652113e-01f);
  p = fmaf(p, r, 4.999999404e-01f);
  float t = fmaf(r * r, p, r);
  const float sc = 0x1p-64f;
  float s = bits_to_f((f_to_bits(k) - 64u) << 23); /* 2^(n - 64): n + 63 in the exponent bits */
  float st = s * t, hi = s + st, lo = (s - hi) + st;
  float d = n < 23.5f ? fmaf(s, t, sc + s) : hi + (lo + sc);
  return sc / d;
}

/* e^x for x in [-87, 88] (a normal result): exp_fast without its clamps and special cases,
 * 2^n applied at once. */
FORMULA float exp_normal(float x) {
  float nf, p = 1.0f + exp_reduce(x, &nf);
  return p * bits_to_f((uint32_t)((int)nf + 127) << 23);
}

/* tanh, on a = |x| with the sign restored at the end: a + a z Q(z), z = a^2, for a < 0.6 (Q of
 * degree 4, a minimax fit of (tanh(a)/a - 1)/z there: 3e-9 relative), and 1 - 2 / D beyond,
 * D = 1 + e^u, u = 2a (at most 20: tanh rounds to 1 past 9.01; NaN's bits clamp to 20 too):
 * e^u = 2^n (1 + t), n = rint(u / ln2) in [0, 29] read from the low bits of the rounding sum
 * (its constant carries the exponent bias), u - n ln2 by two multiply-adds, t by a degree-6
 * minimax fit (3e-9 relative), and D = (1 + 2^n) + 2^n t in one multiply-add, its first sum
 * exact for n <= 23 and beyond only off in what 2 / D < 2^-23 contributes below the result's
 * ulp. 2 / D is at most 0.46 of the result, so its rounding stays small. The multiply-adds are
 * fused (fmaf: one rounding on every clone, and libm's on the baseline one). Within 1.5 ulp
 * (1.23 measured over every float32 in [0, 10]); ±0 kept, NaN gives NaN. */
FORMULA float tanh_fast(float x) {
  float a = fabsf(x);
  uint32_t ub = f_to_bits(a + a);
  float u = bits_to_f(ub < 0x41a00000u ? ub : 0x41a00000u); /* min(u, 20) on the bits */
  float k = fmaf(u, 1.44269504f, 12583039.0f);                /* 1.5 2^23 + 127 + n */
  float n = k - 12583039.0f;
  float r = fmaf(n, -0.693147182f, u);
  r = fmaf(n, 1.90465421e-9f, r); /* ln2's float rounding and the rest */
  float p = 1.381458598e-03f;
  p = fmaf(p, r, 8.368716575e-03f);
  p = fmaf(p, r, 4.166838899e-02f);
  p = fmaf(p, r, 1.666652113e-01f);
  p = fmaf(p, r, 4.999999404e-01f);
  float t = fmaf(r * r, p, r);
  float sc = bits_to_f(f_to_bits(k) << 23); /* 2^n: the biased exponent n + 127 shifted up */
  float big = 1.0f - 2.0f / fmaf(sc, t, 1.0f + sc);
  float z = a * a;
  float q = -5.895139650e-03f;
  q = fmaf(q, z, 2.079595812e-02f);
  q = fmaf(q, z, -5.378382653e-02f);
  q = fmaf(q, z, 1.333192438e-01f);
  q = fmaf(q, z, -3.333329856e-01f);
  float small = fmaf(a * z, q, a);
  return copysignf(a >= 0.6f ? big : small, x); /* NaN: small, itself NaN */
}


/* log(1 + f) - f for f in [sqrt(1/2) - 1, sqrt(2) - 1], as f^2/2 subtracted and s (hfsq + R)
 * added back (s = f / (2 + f), R the atanh series of s past its first term, to s^12: below
 * 2^-27 relative there): the rounding errors stay small against the result. */
FORMULA float log1p_core(float f) {
  float s = f / (2.0f + f), z = s * s;
  float r = 2.0f / 11.0f;
  r = fmaf(r, z, 2.0f / 9.0f);
  r = fmaf(r, z, 2.0f / 7.0f);
  r = fmaf(r, z, 2.0f / 5.0f);
  r = fmaf(r, z, 2.0f / 3.0f);
  r = r * z;
  float hfsq = 0.5f * f * f;
  return s * (hfsq + r) - hfsq;
}

/* A positive normal float as m 2^k with m in [sqrt(1/2), sqrt(2)): returns m - 1 (exact) and
 * sets *k. */
FORMULA float split_log(float u, float *k) {
  int32_t ix = (int32_t)(f_to_bits(u) - 0x3f3504f3u);
  *k = (float)(ix >> 23);
  return bits_to_f(((uint32_t)ix & 0x7fffffu) + 0x3f3504f3u) - 1.0f;
}

/* log(x): x = m 2^k with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^25 first), f = m - 1
 * (exact), log(m) = f + f^2 Q(f) with Q a minimax fit of degree 8 of (log1p(f) - f) / f^2 there
 * (2^-27.9 relative to log(m)), and k ln2 with ln2 split in two (k ln2_hi exact): the sum
 * k ln2_hi + ((f^2 Q + k ln2_lo) + f), whose last addition is exact where it cancels (k = ±1
 * against f of the other sign). Within 1 ulp (0.88 measured over every positive float32);
 * log(0) = -inf, log(x < 0) = NaN, log(inf) = inf. */
FORMULA float log_fast(float x) {
  int sub = x < 1.17549435e-38f;
  float xs = sub ? x * 33554432.0f : x;
  int32_t ix = (int32_t)(f_to_bits(xs) - 0x3f3504f3u);
  float k = (float)(ix >> 23) - (sub ? 25.0f : 0.0f);
  float f = bits_to_f(((uint32_t)ix & 0x7fffffu) + 0x3f3504f3u) - 1.0f;
  float q = -7.62307048e-02f;
  q = fmaf(q, f, 1.29055202e-01f);
  q = fmaf(q, f, -1.32429853e-01f);
  q = fmaf(q, f, 1.41816333e-01f);
  q = fmaf(q, f, -1.66090563e-01f);
  q = fmaf(q, f, 2.00019851e-01f);
  q = fmaf(q, f, -2.50015855e-01f);
  q = fmaf(q, f, 3.33333254e-01f);
  q = fmaf(q, f, -4.99999881e-01f);
  float y = fmaf(k, 0.693145752f, fmaf(f * f, q, k * 1.42860677e-6f) + f);
  y = x == 0 ? -INFINITY : y;
  y = x < 0 ? NAN : y;
  return x == INFINITY || x != x ? x : y;
}

/* log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the second term restores what
 * the rounding of u lost. Within 1.5 ulp; ±0 and subnormals return x, -1 gives -inf, x < -1
 * NaN. */
FORMULA float log1p_fast(float x) {
  float u = 1.0f + x;
  float c = (x - (u - 1.0f)) / u;
  float k, f = split_log(u < 1.17549435e-38f ? 1.0f : u, &k);
  float y = k * 0.693145752f + ((log1p_core(f) + (k * 1.42860677e-6f + c)) + f);
  y = fabsf(x) < 1e-20f ? x : y; /* also keeps the sign of -0 */
  y = x == -1.0f ? -INFINITY : y;
  y = x < -1.0f ? NAN : y;
  return x == INFINITY || x != x ? x : y;
}

/* expm1(x): x = n ln2 + r (|r| <= ln2/2, reduced as in exp_reduce), expm1(r) = r + r^2 q(r)
 * (Taylor to r^9: below 2^-27 relative), then 2^n (expm1(r) + 1 - 2^-n) with 1 - 2^-n exact
 * (n clamped where it no longer matters) and 2^n applied in two halves. Within 2 ulp;
 * x < -30 gives -1, overflow inf, ±0 and subnormals return x. */
FORMULA float expm1_fast(float x) {
  float xc = x > -30.0f ? (x < 89.0f ? x : 89.0f) : -30.0f; /* NaN: -30 */
  float t = xc * 1.44269504088896341f + 12582912.0f;
  float nf = t - 12582912.0f;
  float r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float q = 1.0f / 362880.0f;
  q = fmaf(q, r, 1.0f / 40320.0f);
  q = fmaf(q, r, 1.0f / 5040.0f);
  q = fmaf(q, r, 1.0f / 720.0f);
  q = fmaf(q, r, 1.0f / 120.0f);
  q = fmaf(q, r, 1.0f / 24.0f);
  q = fmaf(q, r, 1.0f / 6.0f);
  q = fmaf(q, r, 0.5f);
  float pm = r + r * r * q;
  int n = (int)nf, n1 = n / 2, n2 = n - n1, nm = n > 60 ? 60 : n;
  float s1 = bits_to_f((uint32_t)(n1 + 127) << 23), s2 = bits_to_f((uint32_t)(n2 + 127) << 23);
  float tm = 1.0f - bits_to_f((uint32_t)(127 - nm) << 23);
  float y = (pm + tm) * s1 * s2;
  y = x > 88.7228394f ? INFINITY : y;
  y = fabsf(x) < 1e-20f ? x : y;
  return x != x ? x : y;
}

/* erf(x): x + x P(x^2) for |x| <= 1 (P of degree 6, a Chebyshev fit of erf(x)/x - 1 on [0, 1]:
 * 1.4e-9 relative); 1 - exp(g(t) - x^2) for 1 < |x| < 3.92 with g(t) a degree-8 fit of
 * log(erfc(x)) + x^2 in t = (x - 2.46) / 1.46 (1e-9 absolute); 1 beyond (erf rounds to 1
 * there). Within 2 ulp (tests/python/test_elementwise_ulp.py); erf(±inf) = ±1, ±0 kept. */
FORMULA float erf_fast(float x) {
  float a = fabsf(x), z = x * x;
  float p = 7.882500358e-05f;
  p = fmaf(p, z, -8.018859080e-04f);
  p = fmaf(p, z, 5.189312622e-03f);
  p = fmaf(p, z, -2.685432881e-02f);
  p = fmaf(p, z, 1.128359735e-01f);
  p = fmaf(p, z, -3.761262596e-01f);
  p = fmaf(p, z, 1.283791661e-01f);
  float small = fmaf(x, p, x); /* x (1 + p): the leading 1 added last, exactly scaled */
  float ac = a > 1.0f ? (a < 3.92f ? a : 3.92f) : 1.0f; /* the fit's range (NaN: 1) */
  float t = (ac - 2.46000004f) * 0.684931517f;
  float g = 3.396065949e-05f;
  g = fmaf(g, t, -1.952551393e-04f);
  g = fmaf(g, t, 7.852147683e-04f);
  g = fmaf(g, t, -2.913793316e-03f);
  g = fmaf(g, t, 1.022892166e-02f);
  g = fmaf(g, t, -3.489235789e-02f);
  g = fmaf(g, t, 1.224186048e-01f);
  g = fmaf(g, t, -5.215439200e-01f);
  g = fmaf(g, t, -1.542617559e+00f);
  float big = 1.0f - exp_normal(g - ac * ac); /* the argument lies in [-17, -1] */
  big = a >= 3.92f ? 1.0f : big;
  float y = a <= 1.0f ? small : copysignf(big, x);
  return x != x ? x : y;
}

/* erfinv(y): Giles' single-precision approximation ("Approximating the erfinv function",
 * 2010), a polynomial in w = -log((1 - y)(1 + y)) on w < 5 and one in sqrt(w) - 3 beyond, both
 * evaluated and one picked. Within 4 ulp (tests/python/test_elementwise.py); ±1 give ±inf,
 * |y| > 1 and NaN give NaN, ±0 kept. */
FORMULA float erfinv_fast(float y) {
  float w = -log_fast((1.0f - y) * (1.0f + y));
  float wa = w - 2.5f;
  float p = 2.81022636e-08f;
  p = fmaf(p, wa, 3.43273939e-07f);
  p = fmaf(p, wa, -3.5233877e-06f);
  p = fmaf(p, wa, -4.39150654e-06f);
  p = fmaf(p, wa, 0.00021858087f);
  p = fmaf(p, wa, -0.00125372503f);
  p = fmaf(p, wa, -0.00417768164f);
  p = fmaf(p, wa, 0.246640727f);
  p = fmaf(p, wa, 1.50140941f);
  float wb = sqrtf(w > 5.0f ? w : 5.0f) - 3.0f; /* w is NaN or inf only where y is selected away */
  float q = -0.000200214257f;
  q = fmaf(q, wb, 0.000100950558f);
  q = fmaf(q, wb, 0.00134934322f);
  q = fmaf(q, wb, -0.00367342844f);
  q = fmaf(q, wb, 0.00573950773f);
  q = fmaf(q, wb, -0.0076224613f);
  q = fmaf(q, wb, 0.00943887047f);
  q = fmaf(q, wb, 1.00167406f);
  q = fmaf(q, wb, 2.83297682f);
  float r = (w < 5.0f ? p : q) * y;
  r = fabsf(y) == 1.0f ? copysignf(INFINITY, y) : r;
  return fabsf(y) <= 1.0f ? r : NAN; /* NaN too */
}

/* sin and cos for |x| < 2^20, in float: j = rint(x 2/pi) (by the rounding of 1.5 2^23 + x c,
 * c = 2/pi rounded, so |r| <= pi/4 + 2^20 |c - 2/pi| pi/2 < 0.83), and r = x - j pi/2 as a pair
 * rh + rl with pi/2 in three floats P1 + P2 + P3 (Cody-Waite): x - j P1 is exact (one
 * multiply-add: j P1 and x are multiples of 2^-24 there and the difference is below 1), j P2 is
 * split exactly into p + pe (Dekker's product by a multiply-add), the difference with p is
 * carried as a sum and its rounding error (Knuth's 2Sum: no condition on the magnitudes, since r
 * may be far below j P2), and pe and j P3 go into rl. That leaves r within 2^-57 + j 2^-74 of
 * x - j pi/2, against |r| >= 2^-27.8 over the range. Then minimax polynomials on |r| <= 0.83:
 * sin r = rh + (rh^3 S(z) + rl cos rh) with z = rh^2, S of degree 3 in z (error 2^-36 relative),
 * rl cos rh as rl (1 - z/2); cos r = 1 + (-z/2 + (z^2 C(z) - zl/2)) with C of degree 2 (2^-32
 * absolute) and zl = (rh + rl)^2 - z to first order (z's rounding and rl), so that the only
 * large rounding is the last addition in both. Then the quadrant's swap and sign. Within 1 ulp
 * (0.83 for sin and 0.82 for cos measured over every float32 with |x| < 2^20); sin(-0) = -0,
 * infinities and NaN give NaN; |x| >= 2^20 is left to libm by the loops (TRIG_LIMIT). */
#define TRIG_LIMIT 1048576.0f
FORMULA float sincos_fast(float x, int want_cos) {
  int ok = fabsf(x) < TRIG_LIMIT;
  float xc = ok ? x : 0.0f;
  float k = fmaf(xc, 0.636619747f, 12582912.0f); /* 1.5 2^23 + j: j's low bits are the quadrant */
  float j = k - 12582912.0f;
  const float p1 = 1.57079637f, p2 = -4.37113883e-8f, p3 = -1.71512451e-15f;
  float t = fmaf(-j, p1, xc);
  float p = j * p2, pe = fmaf(j, p2, -p);
  float rh = t - p, b = rh - t, e = (t - (rh - b)) + (-p - b); /* rh + e = t - p exactly */
  float rl = fmaf(-j, p3, e - pe);
  float z = rh * rh;
  float sp = 2.7139724e-06f;
  sp = fmaf(sp, z, -1.98388588e-4f);
  sp = fmaf(sp, z, 8.33332818e-3f);
  sp = fmaf(sp, z, -1.66666672e-1f);
  float sr = rh + fmaf(rh * z, sp, fmaf(-0.5f * rl, z, rl));
  float cp = 2.4396368e-05f;
  cp = fmaf(cp, z, -1.38869940e-3f);
  cp = fmaf(cp, z, 4.16666381e-2f);
  float zl = fmaf(rh + rh, rl, fmaf(rh, rh, -z));
  float cr = 1.0f + fmaf(z, -0.5f, fmaf(z * z, cp, -0.5f * zl));
  uint32_t q = f_to_bits(k) + (uint32_t)want_cos; /* cos x = sin(x + pi/2): one quadrant on */
  float v = q & 1 ? cr : sr;
  v = bits_to_f(f_to_bits(v) ^ ((q & 2u) << 30)); /* quadrants 2 and 3: negated */
  float y = want_cos || x != 0 ? v : x;           /* sin(-0) = -0 */
  return ok ? y : x - x; /* ±inf, NaN: NaN; finite large values are replaced by the loop */
}
FORMULA float sin_fast(float x) { return sincos_fast(x, 0); }
FORMULA float cos_fast(float x) { return sincos_fast(x, 1); }

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
