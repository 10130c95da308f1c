/* The element-wise reductions the collectives combine received data with (sum, max, min over
 * every dtype the collectives carry: float16 and bfloat16 arrive widened to float32). Floats'
 * max and min propagate NaN, as NumPy's maximum and minimum; bool's sum and max are "or", its
 * min "and"; complex64 sums per part and orders lexicographically (real part, then imaginary),
 * as NumPy. Integer sums wrap. */
#include <math.h>

#include "cpu/kernels.h"
#include "distributed/dist_internal.h"

/* Sums add in the unsigned type U of T's width, so that signed sums wrap (no overflow). */
#define RED_LOOPS(T, U, NAME)                                                        \
  NV_KERNEL_CLONES static void NAME##_sum(T *d, const T *s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = (T)((U)d[i] + (U)s[i]);                    \
  }                                                                                  \
  NV_KERNEL_CLONES static void NAME##_max(T *d, const T *s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = s[i] > d[i] ? s[i] : d[i];                 \
  }                                                                                  \
  NV_KERNEL_CLONES static void NAME##_min(T *d, const T *s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] = s[i] < d[i] ? s[i] : d[i];                 \
  }

RED_LOOPS(uint8_t, uint8_t, u8)
RED_LOOPS(uint16_t, uint16_t, u16)
RED_LOOPS(uint32_t, uint32_t, u32)
RED_LOOPS(uint64_t, uint64_t, u64)
RED_LOOPS(int8_t, uint8_t, i8)
RED_LOOPS(int16_t, uint16_t, i16)
RED_LOOPS(int32_t, uint32_t, i32)
RED_LOOPS(int64_t, uint64_t, i64)

#define FLOAT_LOOPS(T, NAME)                                                         \
  NV_KERNEL_CLONES static void NAME##_sum(T *d, const T *s, size_t n) {              \
    for (size_t i = 0; i < n; i++) d[i] += s[i];                                     \
  }                                                                                  \
  static void NAME##_max(T *d, const T *s, size_t n) {                               \
    for (size_t i = 0; i < n; i++)                                                   \
      if (isnan(s[i]) || s[i] > d[i]) d[i] = s[i];                                   \
  }                                                                                  \
  static void NAME##_min(T *d, const T *s, size_t n) {                               \
    for (size_t i = 0; i < n; i++)                                                   \
      if (isnan(s[i]) || s[i] < d[i]) d[i] = s[i];                                   \
  }

FLOAT_LOOPS(float, f32)
FLOAT_LOOPS(double, f64)

NV_KERNEL_CLONES static void bool_or(uint8_t *d, const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)((d[i] | s[i]) != 0);
}
NV_KERNEL_CLONES static void bool_and(uint8_t *d, const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(d[i] && s[i]);
}

/* complex64 as (re, im) float pairs; max/min keep the lexicographically larger/smaller pair,
 * a NaN part winning as for floats. */
static bool c_nan(const float *a) { return isnan(a[0]) || isnan(a[1]); }
static bool c_less(const float *a, const float *b) {
  return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]);
}
static void c64(float *d, const float *s, size_t n, int op) {
  for (size_t i = 0; i < n; i++, d += 2, s += 2) {
    if (op == NV__RED_SUM) {
      d[0] += s[0];
      d[1] += s[1];
    } else if (!c_nan(d) && (c_nan(s) || (op == NV__RED_MAX ? c_less(d, s) : c_less(s, d)))) {
      d[0] = s[0];
      d[1] = s[1];
    }
  }
}

#define DISPATCH(NAME, T)                                        \
  do {                                                           \
    if (op == NV__RED_SUM) NAME##_sum((T *)dst, (const T *)src, count); \
    else if (op == NV__RED_MAX) NAME##_max((T *)dst, (const T *)src, count); \
    else NAME##_min((T *)dst, (const T *)src, count);            \
  } while (0)

void nv__dist_reduce(void *dst, const void *src, size_t count, nv_dtype dtype, int op) {
  switch (dtype) {
    case NV_DTYPE_BOOL:
      if (op == NV__RED_MIN) bool_and(dst, src, count);
      else bool_or(dst, src, count);
      break;
    case NV_DTYPE_UINT8: DISPATCH(u8, uint8_t); break;
    case NV_DTYPE_UINT16: DISPATCH(u16, uint16_t); break;
    case NV_DTYPE_UINT32: DISPATCH(u32, uint32_t); break;
    case NV_DTYPE_UINT64: DISPATCH(u64, uint64_t); break;
    case NV_DTYPE_INT8: DISPATCH(i8, int8_t); break;
    case NV_DTYPE_INT16: DISPATCH(i16, int16_t); break;
    case NV_DTYPE_INT32: DISPATCH(i32, int32_t); break;
    case NV_DTYPE_INT64: DISPATCH(i64, int64_t); break;
    case NV_DTYPE_FLOAT32: DISPATCH(f32, float); break;
    case NV_DTYPE_FLOAT64: DISPATCH(f64, double); break;
    case NV_DTYPE_COMPLEX64: c64(dst, src, count, op); break;
    default: break; /* float16/bfloat16 are widened by the callers */
  }
}
