/* Device twins of the CPU's element conversions (src/core/convert.h and src/cpu/convert.c),
 * for the CUDA kernels: the same bits for every input, NaN payloads included. Each function
 * is a line-by-line port of its CPU original; the GPU-specific points are
 *   - arithmetic that must not fuse into FMAs (which would round once instead of twice) uses
 *     the explicitly rounded intrinsics (__fadd_rn, __dmul_rn, ...);
 *   - float <-> double of a NaN keeps the payload and sets the quiet bit as x86's cvtss2sd /
 *     cvtsd2ss do (the CPU's results), instead of trusting the GPU's cvt with NaNs.
 * CUDA C++ (device code); included by the kernel files (.cu) only. */
#ifndef NUVEC_CUDA_CONVERT_CUH
#define NUVEC_CUDA_CONVERT_CUH

#include <stdint.h>

#define NVG_INLINE static __device__ __forceinline__

namespace nvg {

/* dtype codes: nv_dtype's values, plus a pseudo dtype for fp8 E4M3FN bits held in uint8. */
enum {
  DT_BOOL = 0, DT_U8, DT_U16, DT_U32, DT_U64, DT_I8, DT_I16, DT_I32, DT_I64,
  DT_F16, DT_BF16, DT_F32, DT_F64, DT_C64, DT_FP8
};

NVG_INLINE int dtype_size(int dt) {
  switch (dt) {
    case DT_BOOL: case DT_U8: case DT_I8: case DT_FP8: return 1;
    case DT_U16: case DT_I16: case DT_F16: case DT_BF16: return 2;
    case DT_U32: case DT_I32: case DT_F32: return 4;
    default: return 8;
  }
}

NVG_INLINE uint32_t f32_bits(float f) { return __float_as_uint(f); }
NVG_INLINE float bits_f32(uint32_t u) { return __uint_as_float(u); }

/* float -> double and double -> float with x86's NaN results (payload kept, made quiet). */
NVG_INLINE double f32_to_f64(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    uint64_t b = ((uint64_t)(u & 0x80000000u) << 32) | 0x7ff8000000000000ull |
                 ((uint64_t)(u & 0x7fffffu) << 29);
    return __longlong_as_double((long long)b);
  }
  return (double)f;
}
NVG_INLINE float f64_to_f32(double d) {
  uint64_t b = (uint64_t)__double_as_longlong(d);
  if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
    uint32_t u = (uint32_t)(b >> 32 & 0x80000000u) | 0x7fc00000u |
                 (uint32_t)((b >> 29) & 0x7fffffu);
    return bits_f32(u);
  }
  return __double2float_rn(d);
}

/* float16 -> float32 (exact). */
NVG_INLINE float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t em = h & 0x7fff;
  if (em >= 0x7c00) return bits_f32(sign | 0x7f800000u | ((em & 0x3ff) << 13));
  if (em >= 0x400) return bits_f32(sign | ((em << 13) + 0x38000000u));
  float f = __fmul_rn((float)em, 5.9604644775390625e-08f); /* subnormal: m x 2^-24 */
  return bits_f32(sign | f32_bits(f));
}

/* float32 -> float16, rounding once to nearest even; NaN stays NaN (quiet), overflow -> inf. */
NVG_INLINE uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)
    return (uint16_t)(sign | (x > 0x7f800000u ? (uint16_t)(0x7e00 | ((x >> 13) & 0x3ff)) : 0x7c00));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
  if (x < 0x38800000u) {
    float g = __fadd_rn(bits_f32(x), 0.5f); /* rounds to the 2^-24 grid */
    return (uint16_t)(sign | (uint16_t)(f32_bits(g) - 0x3f000000u));
  }
  uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd;
  return (uint16_t)(sign | (uint16_t)(x >> 13));
}

NVG_INLINE float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

NVG_INLINE uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

/* nv__round_bits: a finite, non-negative double rounded once into (ebits, mbits). */
NVG_INLINE uint32_t round_bits(double d, int ebits, int mbits, int *overflow) {
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
  if (qi < (1ull << mbits)) return (uint32_t)qi;
  int biased = E + bias;
  if (biased >= (1 << ebits) - 1) {
    *overflow = 1;
    return 0;
  }
  return ((uint32_t)biased << mbits) | (uint32_t)(qi - (1ull << mbits));
}

NVG_INLINE bool sign_of(double d) { return __double_as_longlong(d) < 0; }
NVG_INLINE bool nan_of(double d) {
  return ((uint64_t)__double_as_longlong(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
NVG_INLINE bool inf_of(double d) {
  return ((uint64_t)__double_as_longlong(d) & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
}

NVG_INLINE uint16_t f64_to_f16(double d) {
  uint16_t sign = sign_of(d) ? 0x8000 : 0;
  if (nan_of(d)) return (uint16_t)(sign | 0x7e00);
  double a = fabs(d);
  if (inf_of(a)) return (uint16_t)(sign | 0x7c00);
  int ovf;
  uint32_t b = round_bits(a, 5, 10, &ovf);
  return (uint16_t)(sign | (ovf ? 0x7c00 : (uint16_t)b));
}

NVG_INLINE uint16_t f64_to_bf16(double d) {
  uint16_t sign = sign_of(d) ? 0x8000 : 0;
  if (nan_of(d)) return (uint16_t)(sign | 0x7fc0);
  double a = fabs(d);
  if (inf_of(a)) return (uint16_t)(sign | 0x7f80);
  int ovf;
  uint32_t b = round_bits(a, 8, 7, &ovf);
  return (uint16_t)(sign | (ovf ? 0x7f80 : (uint16_t)b));
}

/* Integers as doubles that round like the integer (sticky bit above 2^53). */
NVG_INLINE double u64_sticky(uint64_t a) {
  if (a >= (1ull << 53)) {
    int drop = 64 - 53 - __clzll((long long)a);
    uint64_t sticky = (a & ((1ull << drop) - 1)) != 0;
    a = ((a >> drop) | sticky) << drop;
  }
  return __ull2double_rn(a);
}
NVG_INLINE double i64_sticky(int64_t v) {
  double d = u64_sticky(v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
  return v < 0 ? -d : d;
}

/* OCP fp8 E4M3FN, saturating as MLX's to_fp8. */
NVG_INLINE uint8_t f32_to_fp8(float f) {
  uint8_t sign = (f32_bits(f) >> 31) ? 0x80 : 0;
  double a = fabs((double)f);
  if (nan_of(a) || a >= 448.0) return (uint8_t)(sign | 0x7e);
  if (a < 0.015625) return (uint8_t)(sign | (uint8_t)rint(__dmul_rn(a, 512.0)));
  int e;
  frexp(a, &e);
  int E = e - 1;
  int q = (int)rint(ldexp(a, 3 - E));
  if (q == 16) {
    q = 8;
    E++;
  }
  int b = ((E + 7) << 3) | (q - 8);
  return (uint8_t)(sign | (uint8_t)(b > 0x7e ? 0x7e : b));
}

NVG_INLINE float fp8_to_f32(uint8_t b) {
  int e = (b >> 3) & 0xf, m = b & 7;
  float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 15 && m == 7) return bits_f32(0x7fc00000u);
  if (e == 0) return __fmul_rn(sign, ldexpf((float)m, -9));
  return __fmul_rn(sign, ldexpf(__fadd_rn(1.0f, __fmul_rn((float)m, 0.125f)), e - 7));
}

/* x86's truncating conversions: NaN and out of range give the most negative integer. */
NVG_INLINE int32_t cvtt32(double d) {
  if (!(d > -2147483649.0 && d < 2147483648.0)) return INT32_MIN;
  return (int32_t)d;
}
NVG_INLINE int64_t cvtt64(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)d;
}
NVG_INLINE int8_t f2i8(double d) { return (int8_t)(uint8_t)(uint32_t)cvtt32(d); }
NVG_INLINE int16_t f2i16(double d) { return (int16_t)(uint16_t)(uint32_t)cvtt32(d); }
NVG_INLINE int32_t f2i32(double d) { return cvtt32(d); }
NVG_INLINE int64_t f2i64(double d) { return cvtt64(d); }
NVG_INLINE uint8_t f2u8(double d) { return (uint8_t)(uint32_t)cvtt32(d); }
NVG_INLINE uint16_t f2u16(double d) { return (uint16_t)(uint32_t)cvtt32(d); }
NVG_INLINE uint32_t f2u32(double d) { return (uint32_t)(uint64_t)cvtt64(d); }
NVG_INLINE uint64_t f2u64(double d) {
  if (d < 9223372036854775808.0) return (uint64_t)cvtt64(d);
  return (uint64_t)cvtt64(__dsub_rn(d, 9223372036854775808.0)) ^ 0x8000000000000000ull;
}

/* ---- astype's canonical wide forms (src/cpu/convert.c): each source dtype loads into one
 * kind, and each target dtype stores from any kind. ---- */
enum { K_I, K_U, K_F, K_D, K_C };

union wide {
  int64_t i;
  uint64_t u;
  float f;
  double d;
  float2 c;
};

NVG_INLINE int kind_of(int dt) {
  switch (dt) {
    case DT_BOOL: case DT_I8: case DT_I16: case DT_I32: case DT_I64: return K_I;
    case DT_U8: case DT_U16: case DT_U32: case DT_U64: return K_U;
    case DT_F16: case DT_BF16: case DT_F32: case DT_FP8: return K_F;
    case DT_F64: return K_D;
    default: return K_C;
  }
}

/* Target conversions, one struct per target dtype: from_i/u/f/d/c give the stored value. */
template <int TO> struct cvt;

template <> struct cvt<DT_BOOL> {
  typedef uint8_t T;
  static __device__ T from_i(int64_t v) { return v != 0; }
  static __device__ T from_u(uint64_t v) { return v != 0; }
  static __device__ T from_f(float v) { return v != 0; }
  static __device__ T from_d(double v) { return v != 0; }
  static __device__ T from_c(float2 v) { return v.x != 0 || v.y != 0; }
};

#define NVG_INT_CVT(CODE, TYPE, BITS, F2)                                    \
  template <> struct cvt<CODE> {                                             \
    typedef TYPE T;                                                          \
    static __device__ T from_i(int64_t v) { return (T)(uint64_t)v; }         \
    static __device__ T from_u(uint64_t v) { return (T)v; }                  \
    static __device__ T from_f(float v) { return (T)F2##BITS((double)v); }       \
    static __device__ T from_d(double v) { return (T)F2##BITS(v); }          \
    static __device__ T from_c(float2 v) { return (T)F2##BITS((double)v.x); }   \
  };
NVG_INT_CVT(DT_U8, uint8_t, 8, f2u)
NVG_INT_CVT(DT_U16, uint16_t, 16, f2u)
NVG_INT_CVT(DT_U32, uint32_t, 32, f2u)
NVG_INT_CVT(DT_U64, uint64_t, 64, f2u)
NVG_INT_CVT(DT_I8, int8_t, 8, f2i)
NVG_INT_CVT(DT_I16, int16_t, 16, f2i)
NVG_INT_CVT(DT_I32, int32_t, 32, f2i)
NVG_INT_CVT(DT_I64, int64_t, 64, f2i)
#undef NVG_INT_CVT

template <> struct cvt<DT_F16> {
  typedef uint16_t T;
  static __device__ T from_i(int64_t v) { return f64_to_f16(i64_sticky(v)); }
  static __device__ T from_u(uint64_t v) { return f64_to_f16(u64_sticky(v)); }
  static __device__ T from_f(float v) { return f32_to_f16(v); }
  static __device__ T from_d(double v) { return f64_to_f16(v); }
  static __device__ T from_c(float2 v) { return f32_to_f16(v.x); }
};

template <> struct cvt<DT_BF16> {
  typedef uint16_t T;
  static __device__ T from_i(int64_t v) { return f64_to_bf16(i64_sticky(v)); }
  static __device__ T from_u(uint64_t v) { return f64_to_bf16(u64_sticky(v)); }
  static __device__ T from_f(float v) { return f32_to_bf16(v); }
  static __device__ T from_d(double v) { return f64_to_bf16(v); }
  static __device__ T from_c(float2 v) { return f32_to_bf16(v.x); }
};

template <> struct cvt<DT_F32> {
  typedef float T;
  static __device__ T from_i(int64_t v) { return __ll2float_rn(v); }
  static __device__ T from_u(uint64_t v) { return __ull2float_rn(v); }
  static __device__ T from_f(float v) { return v; }
  static __device__ T from_d(double v) { return f64_to_f32(v); }
  static __device__ T from_c(float2 v) { return v.x; }
};

template <> struct cvt<DT_F64> {
  typedef double T;
  static __device__ T from_i(int64_t v) { return __ll2double_rn(v); }
  static __device__ T from_u(uint64_t v) { return __ull2double_rn(v); }
  static __device__ T from_f(float v) { return f32_to_f64(v); }
  static __device__ T from_d(double v) { return v; }
  static __device__ T from_c(float2 v) { return f32_to_f64(v.x); }
};

template <> struct cvt<DT_C64> {
  typedef float2 T;
  static __device__ T from_i(int64_t v) { return make_float2(__ll2float_rn(v), 0.0f); }
  static __device__ T from_u(uint64_t v) { return make_float2(__ull2float_rn(v), 0.0f); }
  static __device__ T from_f(float v) { return make_float2(v, 0.0f); }
  static __device__ T from_d(double v) { return make_float2(f64_to_f32(v), 0.0f); }
  static __device__ T from_c(float2 v) { return v; }
};

/* to_fp8: through float32 first (the CPU converts to float32, then encodes). */
template <> struct cvt<DT_FP8> {
  typedef uint8_t T;
  static __device__ T from_i(int64_t v) { return f32_to_fp8(cvt<DT_F32>::from_i(v)); }
  static __device__ T from_u(uint64_t v) { return f32_to_fp8(cvt<DT_F32>::from_u(v)); }
  static __device__ T from_f(float v) { return f32_to_fp8(v); }
  static __device__ T from_d(double v) { return f32_to_fp8(cvt<DT_F32>::from_d(v)); }
  static __device__ T from_c(float2 v) { return f32_to_fp8(v.x); }
};

/* Source conversions, one struct per source dtype: the stored type, its wide kind, and the
 * widening (src/cpu/convert.c's load). */
template <int FROM> struct src_t;
#define NVG_SRC(CODE, TYPE, KIND, FIELD, EXPR)             \
  template <> struct src_t<CODE> {                         \
    typedef TYPE T;                                        \
    enum { kind = KIND };                                  \
    static __device__ wide widen(T v) {                    \
      wide w;                                              \
      w.FIELD = (EXPR);                                    \
      return w;                                            \
    }                                                      \
  };
NVG_SRC(DT_BOOL, uint8_t, K_I, i, v != 0)
NVG_SRC(DT_I8, int8_t, K_I, i, v)
NVG_SRC(DT_I16, int16_t, K_I, i, v)
NVG_SRC(DT_I32, int32_t, K_I, i, v)
NVG_SRC(DT_I64, int64_t, K_I, i, v)
NVG_SRC(DT_U8, uint8_t, K_U, u, v)
NVG_SRC(DT_U16, uint16_t, K_U, u, v)
NVG_SRC(DT_U32, uint32_t, K_U, u, v)
NVG_SRC(DT_U64, uint64_t, K_U, u, v)
NVG_SRC(DT_F16, uint16_t, K_F, f, f16_to_f32(v))
NVG_SRC(DT_BF16, uint16_t, K_F, f, bf16_to_f32(v))
NVG_SRC(DT_F32, float, K_F, f, v)
NVG_SRC(DT_F64, double, K_D, d, v)
NVG_SRC(DT_C64, float2, K_C, c, v)
NVG_SRC(DT_FP8, uint8_t, K_F, f, fp8_to_f32(v))
#undef NVG_SRC

/* Stores one value of kind `kind` as target dtype TO. */
template <int TO>
NVG_INLINE typename cvt<TO>::T narrow(int kind, wide w) {
  switch (kind) {
    case K_I: return cvt<TO>::from_i(w.i);
    case K_U: return cvt<TO>::from_u(w.u);
    case K_F: return cvt<TO>::from_f(w.f);
    case K_D: return cvt<TO>::from_d(w.d);
    default: return cvt<TO>::from_c(w.c);
  }
}


/* Per float dtype (float16, bfloat16, float32, float64): the stored type S and conversions to
 * and from float32 (to nearest even), for kernels that compute in float32. */
template <int DT> struct f32io;
template <> struct f32io<DT_F16> {
  typedef uint16_t S;
  static __device__ __forceinline__ float ld(S v) { return f16_to_f32(v); }
  static __device__ __forceinline__ S st(float v) { return f32_to_f16(v); }
};
template <> struct f32io<DT_BF16> {
  typedef uint16_t S;
  static __device__ __forceinline__ float ld(S v) { return bf16_to_f32(v); }
  static __device__ __forceinline__ S st(float v) { return f32_to_bf16(v); }
};
template <> struct f32io<DT_F32> {
  typedef float S;
  static __device__ __forceinline__ float ld(S v) { return v; }
  static __device__ __forceinline__ S st(float v) { return v; }
};
template <> struct f32io<DT_F64> {
  typedef double S;
  static __device__ __forceinline__ float ld(S v) { return f64_to_f32(v); }
  static __device__ __forceinline__ S st(float v) { return f32_to_f64(v); }
};

/* Per float dtype: the stored type S and the compute type C (float32 for float16, bfloat16 and
 * float32; float64 for float64), with the conversions (to nearest even), for kernels that
 * compute float64 in double. */
template <int DT> struct cio;
template <> struct cio<DT_F16> {
  typedef uint16_t S;
  typedef float C;
  static __device__ __forceinline__ C ld(S x) { return f16_to_f32(x); }
  static __device__ __forceinline__ S st(C x) { return f32_to_f16(x); }
};
template <> struct cio<DT_BF16> {
  typedef uint16_t S;
  typedef float C;
  static __device__ __forceinline__ C ld(S x) { return bf16_to_f32(x); }
  static __device__ __forceinline__ S st(C x) { return f32_to_bf16(x); }
};
template <> struct cio<DT_F32> {
  typedef float S;
  typedef float C;
  static __device__ __forceinline__ C ld(S x) { return x; }
  static __device__ __forceinline__ S st(C x) { return x; }
};
template <> struct cio<DT_F64> {
  typedef double S;
  typedef double C;
  static __device__ __forceinline__ C ld(S x) { return x; }
  static __device__ __forceinline__ S st(C x) { return x; }
};

} /* namespace nvg */

#endif
