/* Sortable keys: each dtype maps to unsigned integers whose order is NumPy's sort order —
 * integers by value (signed ones with the sign bit flipped), floats by the sign-flip trick
 * (negative values have every bit inverted, positive ones the sign bit set) with every NaN
 * mapped to the all-ones key so that NaN sorts last, complex64 as (real key, imaginary key),
 * float16/bfloat16 through float32. With `canon0`, -0.0 maps to +0.0's key so the two compare
 * equal (argsort's stability, argmax's first occurrence); without it the two keys differ and
 * the values round-trip bit for bit. 32-bit keys serve the dtypes of at most 32 bits, 64-bit
 * keys every dtype. */
#ifndef NUVEC_CPU_SORT_KEYS_H
#define NUVEC_CPU_SORT_KEYS_H

#include "cpu/kernels.h"

static inline uint32_t nv__fkey32(float f, bool canon0) {
  uint32_t u = nv__f32_bits(f);
  if (f != f) return UINT32_MAX;
  if (canon0 && f == 0) u = 0;
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
static inline float nv__fkey32_inv(uint32_t k) {
  return nv__bits_f32((k & 0x80000000u) ? k ^ 0x80000000u : ~k);
}
static inline uint64_t nv__fkey64(double f, bool canon0) {
  uint64_t u;
  memcpy(&u, &f, 8);
  if (f != f) return UINT64_MAX;
  if (canon0 && f == 0) u = 0;
  return (u >> 63) ? ~u : u | (1ull << 63);
}
static inline double nv__fkey64_inv(uint64_t k) {
  uint64_t u = (k >> 63) ? k ^ (1ull << 63) : ~k;
  double f;
  memcpy(&f, &u, 8);
  return f;
}

/* Whether the dtype sorts on 32-bit keys. */
static inline bool nv__key32_dtype(nv_dtype dt) {
  return nv_dtype_size(dt) <= 4 && dt != NV_DTYPE_COMPLEX64;
}

/* Whether a key of `dt` is NaN's key (the floating dtypes only). */
static inline bool nv__key_is_nan(nv_dtype dt, uint64_t k, bool key32) {
  if (!nv_issubdtype(dt, NV_CATEGORY_INEXACT)) return false;
  return key32 ? k == UINT32_MAX : k == UINT64_MAX;
}

/* Converts n contiguous elements of `dt` to keys and back. */
void nv__to_keys32(nv_dtype dt, const void *src, int64_t n, uint32_t *k, bool canon0);
void nv__from_keys32(nv_dtype dt, const uint32_t *k, int64_t n, void *dst);
void nv__to_keys64(nv_dtype dt, const void *src, int64_t n, uint64_t *k, bool canon0);
void nv__from_keys64(nv_dtype dt, const uint64_t *k, int64_t n, void *dst);

#endif
