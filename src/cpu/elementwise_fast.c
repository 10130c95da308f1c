/* Fast float32 paths of the hottest element-wise kernels: exp, sigmoid and tanh (vectorizable
 * branch-free formulas instead of libm's scalar calls) and the four arithmetic ops.
 *
 * Contiguous runs go through blocks of 16 elements copied into local arrays: the block loops
 * have a fixed trip count and no aliasing (an output may be the donated input), so the
 * compiler turns them into SIMD code at the baseline ISA without run-time alias checks. Other
 * runs (strided or broadcast inputs) use the same scalar formulas element by element.
 *
 * Accuracy: exp within 2 ulp over the whole range (subnormal results included, overflow to
 * inf, NaN kept); tanh and sigmoid within a few ulp (tests compare with float64 references). */
#if defined(__GNUC__) && !defined(__clang__)
/* The library never reads floating-point exception flags, so the compiler may evaluate both
 * arms of a select (GCC's default -ftrapping-math forbids that, and with it the SIMD code). */
#pragma GCC optimize("no-trapping-math")
#endif

#include "cpu/elementwise_loops.h"

#define BLOCK 16

/* Each run function also gets AVX2 and AVX-512 clones picked at load time (NV_KERNEL_CLONES),
 * so a baseline build runs 8- or 16-wide where the CPU allows. */
#define CLONES NV_KERNEL_CLONES

/* ---- Scalar formulas (inlined into the block loops) ---- */

static inline float bits_to_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* e^x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by its Taylor series to
 * r^7 (error below 2^-24 there), and 2^n applied in two halves so subnormal results round
 * once and n never leaves the exponent range. */
static inline float exp_fast(float x) {
  float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  float t = xc * 1.44269504088896341f + 12582912.0f; /* round to nearest via 1.5 * 2^23 */
  float nf = t - 12582912.0f;
  float r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float p = 1.98412698e-4f;
  p = p * r + 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int n = (int)nf, n1 = n / 2, n2 = n - n1;
  float s1 = bits_to_f((uint32_t)(n1 + 127) << 23), s2 = bits_to_f((uint32_t)(n2 + 127) << 23);
  float y = p * s1 * s2;
  y = x > 88.7228394f ? INFINITY : y;
  return x != x ? x : y;
}

/* tanh: an odd Taylor polynomial near 0 (|x| < 0.4, terms to x^17) and 1 - 2/(e^2|x| + 1)
 * elsewhere, with the sign restored. */
static inline float tanh_fast(float x) {
  float a = fabsf(x);
  float big = 1.0f - 2.0f / (exp_fast(2.0f * a) + 1.0f);
  float z = x * x;
  float q = 6404582.0f / 10854718875.0f;
  q = q * z - 929569.0f / 638512875.0f;
  q = q * z + 21844.0f / 6081075.0f;
  q = q * z - 1382.0f / 155925.0f;
  q = q * z + 62.0f / 2835.0f;
  q = q * z - 17.0f / 315.0f;
  q = q * z + 2.0f / 15.0f;
  q = q * z - 1.0f / 3.0f;
  float small = x + x * z * q;
  float r = a < 0.4f ? small : copysignf(big, x);
  return x != x ? x : r;
}

static inline float sigmoid_fast(float x) {
  float e = exp_fast(-fabsf(x));
  float r = 1.0f / (1.0f + e);
  float y = x >= 0 ? r : e * r;
  return x != x ? x : y;
}

/* ---- Unary ---- */

#define UNARY_FAST(NAME, F)                                                       \
  CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {    \
    (void)extra;                                                                  \
    float *o = (float *)p[0];                                                     \
    const float *a = (const float *)p[1];                                         \
    int64_t sa = s[1], i = 0;                                                     \
    if (sa == 1) {                                                                \
      for (; i + BLOCK <= n; i += BLOCK) {                                        \
        float in[BLOCK], out[BLOCK];                                              \
        memcpy(in, a + i, sizeof in);                                             \
        for (int j = 0; j < BLOCK; j++) out[j] = F(in[j]);                        \
        memcpy(o + i, out, sizeof out);                                           \
      }                                                                           \
    }                                                                             \
    for (; i < n; i++) o[i] = F(a[i * sa]);                                       \
  }
UNARY_FAST(exp_f32, exp_fast)
UNARY_FAST(tanh_f32, tanh_fast)
UNARY_FAST(sigmoid_f32, sigmoid_fast)

nv__run_fn nv__ew_fast_unary(int prim, nv_dtype dtype) {
  if (dtype != NV_DTYPE_FLOAT32) return NULL;
  switch (prim) {
    case NV__PRIM_EXP: return exp_f32;
    case NV__PRIM_TANH: return tanh_f32;
    case NV__PRIM_SIGMOID: return sigmoid_f32;
    default: return NULL;
  }
}

