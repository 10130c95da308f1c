/* The fast float32 formulas of the element-wise functions (exp, log, log1p, expm1, tanh,
 * sigmoid, erf, erfinv, sin and cos): branch-free range reductions and polynomials, every branch
 * computed and one picked, so a loop of them vectorizes. Their accuracy and special values:
 * elementwise_fast.c. Two readers: elementwise_fast.c's kernels include this file, and compile's
 * generated C carries its text (the build embeds it as nv__fast_formulas_text, see
 * src/CMakeLists.txt), so a fused chain computes each function as the unfused kernel does, bit
 * for bit. It therefore includes only the C library's headers and defines nothing else. Compile
 * it without contraction (multiply-adds meant to fuse are written as fmaf: one rounding on every
 * target) and without trapping math (both arms of a select are evaluated). */
#ifndef NUVEC_CPU_FAST_FORMULAS_H
#define NUVEC_CPU_FAST_FORMULAS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#endif
