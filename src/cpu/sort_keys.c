/* Conversions between values and their sortable keys (sort_keys.h). */
#include "cpu/sort_keys.h"

#define TO_KEYS(T, KT, EXPR)                     \
  {                                              \
    const T *s = (const T *)src;                 \
    for (int64_t i = 0; i < n; i++) {            \
      T v = s[i];                                \
      k[i] = (KT)(EXPR);                         \
    }                                            \
    break;                                       \
  }
#define FROM_KEYS(T, EXPR)                       \
  {                                              \
    T *d = (T *)dst;                             \
    for (int64_t i = 0; i < n; i++) {            \
      uint64_t v = k[i];                         \
      d[i] = (T)(EXPR);                          \
    }                                            \
    break;                                       \
  }

void nv__to_keys32(nv_dtype dt, const void *src, int64_t n, uint32_t *k, bool canon0) {
  switch (dt) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_UINT8: TO_KEYS(uint8_t, uint32_t, v)
    case NV_DTYPE_UINT16: TO_KEYS(uint16_t, uint32_t, v)
    case NV_DTYPE_UINT32: TO_KEYS(uint32_t, uint32_t, v)
    case NV_DTYPE_INT8: TO_KEYS(int8_t, uint32_t, (uint32_t)(int32_t)v ^ 0x80000000u)
    case NV_DTYPE_INT16: TO_KEYS(int16_t, uint32_t, (uint32_t)(int32_t)v ^ 0x80000000u)
    case NV_DTYPE_INT32: TO_KEYS(int32_t, uint32_t, (uint32_t)v ^ 0x80000000u)
    case NV_DTYPE_FLOAT16: TO_KEYS(uint16_t, uint32_t, nv__fkey32(nv__f16_to_f32(v), canon0))
    case NV_DTYPE_BFLOAT16: TO_KEYS(uint16_t, uint32_t, nv__fkey32(nv__bf16_to_f32(v), canon0))
    case NV_DTYPE_FLOAT32: TO_KEYS(float, uint32_t, nv__fkey32(v, canon0))
    default: break;
  }
}

void nv__from_keys32(nv_dtype dt, const uint32_t *k, int64_t n, void *dst) {
  switch (dt) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_UINT8: FROM_KEYS(uint8_t, v)
    case NV_DTYPE_UINT16: FROM_KEYS(uint16_t, v)
    case NV_DTYPE_UINT32: FROM_KEYS(uint32_t, v)
    case NV_DTYPE_INT8: FROM_KEYS(int8_t, (uint8_t)(v ^ 0x80000000u))
    case NV_DTYPE_INT16: FROM_KEYS(int16_t, (uint16_t)(v ^ 0x80000000u))
    case NV_DTYPE_INT32: FROM_KEYS(int32_t, (uint32_t)(v ^ 0x80000000u))
    case NV_DTYPE_FLOAT16: FROM_KEYS(uint16_t, nv__f32_to_f16(nv__fkey32_inv((uint32_t)v)))
    case NV_DTYPE_BFLOAT16: FROM_KEYS(uint16_t, nv__f32_to_bf16(nv__fkey32_inv((uint32_t)v)))
    case NV_DTYPE_FLOAT32: FROM_KEYS(float, nv__fkey32_inv((uint32_t)v))
    default: break;
  }
}

void nv__to_keys64(nv_dtype dt, const void *src, int64_t n, uint64_t *k, bool canon0) {
  switch (dt) {
    case NV_DTYPE_UINT64: TO_KEYS(uint64_t, uint64_t, v)
    case NV_DTYPE_INT64: TO_KEYS(int64_t, uint64_t, (uint64_t)v ^ (1ull << 63))
    case NV_DTYPE_FLOAT64: TO_KEYS(double, uint64_t, nv__fkey64(v, canon0))
    case NV_DTYPE_COMPLEX64: {
      const float *s = (const float *)src;
      for (int64_t i = 0; i < n; i++) {
        float re = s[2 * i], im = s[2 * i + 1];
        k[i] = re != re || im != im
                   ? UINT64_MAX
                   : ((uint64_t)nv__fkey32(re, canon0) << 32) | nv__fkey32(im, canon0);
      }
      break;
    }
    default: {
      /* The 32-bit keys, widened (order is kept; NaN becomes the 64-bit all-ones key). */
      uint32_t tmp[256];
      for (int64_t b = 0; b < n; b += 256) {
        int64_t m = n - b < 256 ? n - b : 256;
        nv__to_keys32(dt, (const char *)src + b * (int64_t)nv_dtype_size(dt), m, tmp, canon0);
        for (int64_t i = 0; i < m; i++)
          k[b + i] = tmp[i] == UINT32_MAX && nv_issubdtype(dt, NV_CATEGORY_INEXACT) ? UINT64_MAX
                                                                                    : tmp[i];
      }
    }
  }
}

void nv__from_keys64(nv_dtype dt, const uint64_t *k, int64_t n, void *dst) {
  switch (dt) {
    case NV_DTYPE_UINT64: FROM_KEYS(uint64_t, v)
    case NV_DTYPE_INT64: FROM_KEYS(int64_t, v ^ (1ull << 63))
    case NV_DTYPE_FLOAT64: FROM_KEYS(double, nv__fkey64_inv(v))
    case NV_DTYPE_COMPLEX64: {
      float *d = (float *)dst;
      for (int64_t i = 0; i < n; i++) {
        d[2 * i] = k[i] == UINT64_MAX ? NAN : nv__fkey32_inv((uint32_t)(k[i] >> 32));
        d[2 * i + 1] = k[i] == UINT64_MAX ? NAN : nv__fkey32_inv((uint32_t)k[i]);
      }
      break;
    }
    default: {
      uint32_t tmp[256];
      for (int64_t b = 0; b < n; b += 256) {
        int64_t m = n - b < 256 ? n - b : 256;
        for (int64_t i = 0; i < m; i++)
          tmp[i] = k[b + i] == UINT64_MAX ? UINT32_MAX : (uint32_t)k[b + i];
        nv__from_keys32(dt, tmp, m, (char *)dst + b * (int64_t)nv_dtype_size(dt));
      }
    }
  }
}
