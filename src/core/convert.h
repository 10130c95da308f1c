/* Element conversions shared by the kernels: float16/bfloat16/fp8 encodings with round-once
 * to nearest even, and the defined float → integer conversions (x86's truncating results, as
 * MLX's CPU gives them). Header-only so kernels inline them. */
#ifndef NUVEC_CORE_CONVERT_H
#define NUVEC_CORE_CONVERT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t nv__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float nv__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* float16 → float32 (exact). */
static inline float nv__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t em = h & 0x7fff;
  if (em >= 0x7c00) return nv__bits_f32(sign | 0x7f800000 | ((em & 0x3ff) << 13));
  if (em >= 0x400) return nv__bits_f32(sign | ((em << 13) + 0x38000000));
  float f = (float)em * 5.9604644775390625e-08f; /* subnormal: m × 2^-24 */
  return nv__bits_f32(sign | nv__f32_bits(f));
}

/* float32 → float16, rounding once to nearest even; NaN stays NaN (quiet), overflow → ±inf. */
static inline uint16_t nv__f32_to_f16(float f) {
  uint32_t x = nv__f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) return sign | (x > 0x7f800000 ? (uint16_t)(0x7e00 | ((x >> 13) & 0x3ff)) : 0x7c00);
  if (x >= 0x477ff000) return sign | 0x7c00; /* ≥ 65520 rounds to inf */
  if (x < 0x38800000) {                      /* below the smallest normal: subnormal or 0 */
    float g = nv__bits_f32(x) + 0.5f;        /* the FPU rounds to the 2^-24 grid */
    return sign | (uint16_t)(nv__f32_bits(g) - 0x3f000000u);
  }
  uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd; /* rebias the exponent and round to nearest even */
  return sign | (uint16_t)(x >> 13);
}

/* bfloat16 → float32 (exact). */
static inline float nv__bf16_to_f32(uint16_t h) { return nv__bits_f32((uint32_t)h << 16); }

/* float32 → bfloat16, rounding once to nearest even; NaN stays a quiet NaN. */
static inline uint16_t nv__f32_to_bf16(float f) {
  uint32_t u = nv__f32_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

/* The bits of a finite, non-negative double rounded once (to nearest even) into a binary
 * format with `ebits` exponent and `mbits` mantissa bits; sets *overflow when it rounds past
 * the largest finite exponent (the caller encodes infinity or saturates). */
static inline uint32_t nv__round_bits(double d, int ebits, int mbits, int *overflow) {
  *overflow = 0;
  if (d == 0) return 0;
  int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e;
  frexp(d, &e);
  int E = e - 1;
  if (E < emin) E = emin;
  double q = rint(ldexp(d, mbits - E));
  uint64_t qi = (uint64_t)q;
  if (qi >= (2ull << mbits)) {
    qi >>= 1;
    E += 1;
  }
  if (qi < (1ull << mbits)) return (uint32_t)qi; /* subnormal */
  int biased = E + bias;
  if (biased >= (1 << ebits) - 1) {
    *overflow = 1;
    return 0;
  }
  return ((uint32_t)biased << mbits) | (uint32_t)(qi - (1ull << mbits));
}

/* float64 → float16 directly (one rounding). */
static inline uint16_t nv__f64_to_f16(double d) {
  uint16_t sign = signbit(d) ? 0x8000 : 0;
  if (isnan(d)) return sign | 0x7e00;
  double a = fabs(d);
  if (isinf(a)) return sign | 0x7c00;
  int ovf;
  uint32_t b = nv__round_bits(a, 5, 10, &ovf);
  return sign | (ovf ? 0x7c00 : (uint16_t)b);
}

/* float64 → bfloat16 directly (one rounding). */
static inline uint16_t nv__f64_to_bf16(double d) {
  uint16_t sign = signbit(d) ? 0x8000 : 0;
  if (isnan(d)) return sign | 0x7fc0;
  double a = fabs(d);
  if (isinf(a)) return sign | 0x7f80;
  int ovf;
  uint32_t b = nv__round_bits(a, 8, 7, &ovf);
  return sign | (ovf ? 0x7f80 : (uint16_t)b);
}

/* An integer as a double that rounds the same as the integer would in a format of at most 24
 * significant bits: above 2^53 the dropped bits are folded into a sticky bit, so the double
 * rounding that follows gives the correctly rounded result. */
static inline double nv__u64_sticky(uint64_t a) {
  if (a >= (1ull << 53)) {
    int drop = 64 - 53 - __builtin_clzll(a);
    uint64_t sticky = (a & ((1ull << drop) - 1)) != 0;
    a = ((a >> drop) | sticky) << drop;
  }
  return (double)a;
}
static inline double nv__i64_sticky(int64_t v) {
  double d = nv__u64_sticky(v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
  return v < 0 ? -d : d;
}

/* OCP fp8 E4M3FN (bias 7, no infinity, max 448, NaN 0x7f): saturating as MLX's to_fp8. */
static inline uint8_t nv__f32_to_fp8(float f) {
  uint8_t sign = signbit(f) ? 0x80 : 0;
  double a = fabs((double)f);
  if (isnan(a) || a >= 448.0) return sign | 0x7e;
  if (a < 0x1p-6) return sign | (uint8_t)rint(a * 0x1p9); /* subnormal (8 is the min normal) */
  int e;
  frexp(a, &e);
  int E = e - 1;
  int q = (int)rint(ldexp(a, 3 - E)); /* 8..16 */
  if (q == 16) {
    q = 8;
    E++;
  }
  int b = ((E + 7) << 3) | (q - 8); /* exponent 15 is finite in E4M3FN; only 0x7f is NaN */
  return sign | (uint8_t)(b > 0x7e ? 0x7e : b);
}

static inline float nv__fp8_to_f32(uint8_t b) {
  int e = (b >> 3) & 0xf, m = b & 7;
  float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return sign * ldexpf((float)m, -9);
  return sign * ldexpf(1.0f + (float)m / 8.0f, e - 7);
}

/* x86's truncating conversions (cvttsd2si): NaN and out-of-range give the "integer
 * indefinite" value, the most negative integer. */
static inline int32_t nv__cvtt32(double d) {
  if (!(d > -2147483649.0 && d < 2147483648.0)) return INT32_MIN;
  return (int32_t)d;
}
static inline int64_t nv__cvtt64(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)d;
}
/* Float → each integer type as MLX's CPU (a C cast compiled for x86-64) gives it. */
static inline int8_t nv__f2i8(double d) { return (int8_t)(uint8_t)(uint32_t)nv__cvtt32(d); }
static inline int16_t nv__f2i16(double d) { return (int16_t)(uint16_t)(uint32_t)nv__cvtt32(d); }
static inline int32_t nv__f2i32(double d) { return nv__cvtt32(d); }
static inline int64_t nv__f2i64(double d) { return nv__cvtt64(d); }
static inline uint8_t nv__f2u8(double d) { return (uint8_t)(uint32_t)nv__cvtt32(d); }
static inline uint16_t nv__f2u16(double d) { return (uint16_t)(uint32_t)nv__cvtt32(d); }
static inline uint32_t nv__f2u32(double d) { return (uint32_t)(uint64_t)nv__cvtt64(d); }
static inline uint64_t nv__f2u64(double d) {
  if (d < 9223372036854775808.0) return (uint64_t)nv__cvtt64(d);
  return (uint64_t)nv__cvtt64(d - 9223372036854775808.0) ^ 0x8000000000000000ull;
}

#endif
