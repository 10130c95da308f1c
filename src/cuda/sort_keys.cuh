/* Sortable keys on the device: the CPU's key order (src/cpu/sort_keys.h) at each dtype's own
 * width. Integers by value (signed ones with the sign bit flipped); floats by the sign-flip
 * trick (negative values have every bit inverted, others the sign bit set) with every NaN the
 * all-ones key, so NaN sorts last; float16/bfloat16 on their own 16 bits (their order is the
 * order of the float32 values the CPU keys; f16 -> f32 is exact); complex64 as (real key,
 * imaginary key), NaN when either part is. `canon0` gives -0.0 +0.0's key. Since only the
 * order matters (and each key decodes to the CPU's output bits: NaN to the canonical quiet
 * NaN the CPU's round trip gives), narrower keys sort the same as the CPU's 32/64-bit ones in
 * fewer radix passes. CUDA C++ (device code) for the sort family's .cu files. */
#ifndef NUVEC_CUDA_SORT_KEYS_CUH
#define NUVEC_CUDA_SORT_KEYS_CUH

#include <stdint.h>

#include "cuda/convert.cuh"

namespace nvs {

using namespace nvg;

/* Significant key bits of a dtype. */
static __host__ __device__ __forceinline__ int key_bits(int dt) {
  switch (dt) {
    case DT_BOOL: case DT_U8: case DT_I8: return 8;
    case DT_U16: case DT_I16: case DT_F16: case DT_BF16: return 16;
    case DT_U32: case DT_I32: case DT_F32: return 32;
    default: return 64;
  }
}

/* The raw bits of element i (of `size` bytes) of base. */
NVG_INLINE uint64_t load_bits(const void *base, int64_t i, int size) {
  switch (size) {
    case 1: return ((const uint8_t *)base)[i];
    case 2: return ((const uint16_t *)base)[i];
    case 4: return ((const uint32_t *)base)[i];
    default: return ((const unsigned long long *)base)[i];
  }
}

NVG_INLINE void store_bits(void *base, int64_t i, int size, uint64_t b) {
  switch (size) {
    case 1: ((uint8_t *)base)[i] = (uint8_t)b; break;
    case 2: ((uint16_t *)base)[i] = (uint16_t)b; break;
    case 4: ((uint32_t *)base)[i] = (uint32_t)b; break;
    default: ((unsigned long long *)base)[i] = b; break;
  }
}

/* The float key of a sign-magnitude float of B bits whose exponent-and-mantissa bits above
 * `inf` are NaNs. */
template <typename U>
NVG_INLINE U fkey(U u, U inf, bool canon0) {
  const U sign = (U)((U)1 << (sizeof(U) * 8 - 1));
  if ((U)(u & (U)~sign) > inf) return (U)~(U)0;
  if (canon0 && (U)(u & (U)~sign) == 0) u = 0;
  return (u & sign) ? (U)~u : (U)(u | sign);
}

/* The float bits of a float key (NaN's key: the quiet NaN with every mantissa bit set, as
 * the CPU's round trip gives). */
template <typename U>
NVG_INLINE U fkey_inv(U k) {
  const U sign = (U)((U)1 << (sizeof(U) * 8 - 1));
  if (k == (U)~(U)0) return (U)~sign;
  return (k & sign) ? (U)(k ^ sign) : (U)~k;
}

/* The key of element bits b of dtype dt. */
NVG_INLINE uint64_t key_of(int dt, uint64_t b, bool canon0) {
  switch (dt) {
    case DT_BOOL:
    case DT_U8: return b & 0xffu;
    case DT_I8: return (b ^ 0x80u) & 0xffu;
    case DT_U16: return b & 0xffffu;
    case DT_I16: return (b ^ 0x8000u) & 0xffffu;
    case DT_F16: return fkey<uint16_t>((uint16_t)b, 0x7c00, canon0);
    case DT_BF16: return fkey<uint16_t>((uint16_t)b, 0x7f80, canon0);
    case DT_U32: return b & 0xffffffffu;
    case DT_I32: return (b ^ 0x80000000u) & 0xffffffffu;
    case DT_F32: return fkey<uint32_t>((uint32_t)b, 0x7f800000u, canon0);
    case DT_U64: return b;
    case DT_I64: return b ^ (1ull << 63);
    case DT_F64: return fkey<unsigned long long>(b, 0x7ff0000000000000ull, canon0);
    default: { /* complex64: the real part in the low half */
      uint32_t re = (uint32_t)b, im = (uint32_t)(b >> 32);
      if ((re & 0x7fffffffu) > 0x7f800000u || (im & 0x7fffffffu) > 0x7f800000u) return ~0ull;
      return ((uint64_t)fkey<uint32_t>(re, 0x7f800000u, canon0) << 32) |
             fkey<uint32_t>(im, 0x7f800000u, canon0);
    }
  }
}

/* The element bits a key decodes to (every dtype but complex64, whose values are gathered). */
NVG_INLINE uint64_t value_of(int dt, uint64_t k) {
  switch (dt) {
    case DT_I8: return (k ^ 0x80u) & 0xffu;
    case DT_I16: return (k ^ 0x8000u) & 0xffffu;
    case DT_F16:
    case DT_BF16: return fkey_inv<uint16_t>((uint16_t)k);
    case DT_I32: return (k ^ 0x80000000u) & 0xffffffffu;
    case DT_F32: return fkey_inv<uint32_t>((uint32_t)k);
    case DT_I64: return k ^ (1ull << 63);
    case DT_F64: return fkey_inv<unsigned long long>(k);
    default: return k;
  }
}

/* Whether a key is NaN's (the floating dtypes only). */
NVG_INLINE bool key_is_nan(int dt, uint64_t k) {
  switch (dt) {
    case DT_F16: case DT_BF16: return k == 0xffffu;
    case DT_F32: return k == 0xffffffffu;
    case DT_F64: return k == ~0ull;
    default: return false;
  }
}

/* The value of a key as float64 (median: the CPU converts the decoded value to float64). */
NVG_INLINE double key_double(int dt, uint64_t k) {
  uint64_t b = value_of(dt, k);
  switch (dt) {
    case DT_BOOL:
    case DT_U8:
    case DT_U16:
    case DT_U32: return (double)b;
    case DT_I8: return (double)(int8_t)(uint8_t)b;
    case DT_I16: return (double)(int16_t)(uint16_t)b;
    case DT_I32: return (double)(int32_t)(uint32_t)b;
    case DT_U64: return __ull2double_rn(b);
    case DT_I64: return __ll2double_rn((long long)b);
    case DT_F16: return f32_to_f64(f16_to_f32((uint16_t)b));
    case DT_BF16: return f32_to_f64(bf16_to_f32((uint16_t)b));
    case DT_F32: return f32_to_f64(bits_f32((uint32_t)b));
    default: return __longlong_as_double((long long)b);
  }
}

/* The median of a row from its sorted keys at (n-1)/2, n/2 and n-1 (n >= 1), as the CPU's
 * nv__k_median: NaN when the last key is NaN's; else lo + (hi - lo) / 2, or lo when the two
 * are equal, rounded as the CPU rounds (no contraction), as the bits of `odt`. */
NVG_INLINE uint64_t median_bits(int dt, int odt, uint64_t klo, uint64_t khi, uint64_t klast,
                                bool empty) {
  double m = __longlong_as_double(0x7ff8000000000000ll); /* C's NAN */
  if (!empty && !key_is_nan(dt, klast)) {
    double lo = key_double(dt, klo), hi = key_double(dt, khi);
    m = __dadd_rn(lo, __ddiv_rn(__dsub_rn(hi, lo), 2.0));
    if (lo == hi) m = lo;
  }
  switch (odt) {
    case DT_F16: return f64_to_f16(m);
    case DT_BF16: return f64_to_bf16(m);
    case DT_F32: return f32_bits(f64_to_f32(m));
    default: return (uint64_t)__double_as_longlong(m);
  }
}

}  // namespace nvs

#endif
