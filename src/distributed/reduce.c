/* The element-wise reductions the collectives combine received data with (sum, max, min over
 * every dtype the collectives carry: float16 and bfloat16 arrive widened to float32). Floats'
 * max and min propagate NaN, as NumPy's maximum and minimum; bool's sum and max are "or", its
 * min "and"; complex64 sums per part and orders lexicographically (real part, then imaginary),
 * as NumPy. Integer sums wrap. Every loop is out[i] = op(a[i], b[i]) with a as the first
 * operand, where out may be a or b itself: ranks that reduce the same pair in the same roles
 * get the same bits (a NaN's payload and a zero's sign included). */
#include <math.h>

#include "cpu/kernels.h"
#include "distributed/dist_internal.h"

/* Sums add in the unsigned type U of T's width, so that signed sums wrap (no overflow). */
#define RED_LOOPS(T, U, NAME)                                                              \
  NV_KERNEL_CLONES static void NAME##_sum(T *o, const T *a, const T *b, size_t n) {        \
    for (size_t i = 0; i < n; i++) o[i] = (T)((U)a[i] + (U)b[i]);                          \
  }                                                                                        \
  NV_KERNEL_CLONES static void NAME##_max(T *o, const T *a, const T *b, size_t n) {        \
    for (size_t i = 0; i < n; i++) o[i] = b[i] > a[i] ? b[i] : a[i];                       \
  }                                                                                        \
  NV_KERNEL_CLONES static void NAME##_min(T *o, const T *a, const T *b, size_t n) {        \
    for (size_t i = 0; i < n; i++) o[i] = b[i] < a[i] ? b[i] : a[i];                       \
  }

RED_LOOPS(uint8_t, uint8_t, u8)
RED_LOOPS(uint16_t, uint16_t, u16)
RED_LOOPS(uint32_t, uint32_t, u32)
RED_LOOPS(uint64_t, uint64_t, u64)
RED_LOOPS(int8_t, uint8_t, i8)
RED_LOOPS(int16_t, uint16_t, i16)
RED_LOOPS(int32_t, uint32_t, i32)
RED_LOOPS(int64_t, uint64_t, i64)

#define FLOAT_LOOPS(T, NAME)                                                               \
  NV_KERNEL_CLONES static void NAME##_sum(T *o, const T *a, const T *b, size_t n) {        \
    for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i];                                     \
  }                                                                                        \
  static void NAME##_max(T *o, const T *a, const T *b, size_t n) {                         \
    for (size_t i = 0; i < n; i++) o[i] = isnan(b[i]) || b[i] > a[i] ? b[i] : a[i];        \
  }                                                                                        \
  static void NAME##_min(T *o, const T *a, const T *b, size_t n) {                         \
    for (size_t i = 0; i < n; i++) o[i] = isnan(b[i]) || b[i] < a[i] ? b[i] : a[i];        \
  }

FLOAT_LOOPS(float, f32)
FLOAT_LOOPS(double, f64)

NV_KERNEL_CLONES static void bool_or(uint8_t *o, const uint8_t *a, const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) o[i] = (uint8_t)((a[i] | b[i]) != 0);
}
NV_KERNEL_CLONES static void bool_and(uint8_t *o, const uint8_t *a, const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) o[i] = (uint8_t)(a[i] && b[i]);
}

/* complex64 as (re, im) float pairs; max/min keep the lexicographically larger/smaller pair,
 * a NaN part winning as for floats. */
static bool c_nan(const float *a) { return isnan(a[0]) || isnan(a[1]); }
static bool c_less(const float *a, const float *b) {
  return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]);
}
static void c64(float *o, const float *a, const float *b, size_t n, int op) {
  for (size_t i = 0; i < n; i++, o += 2, a += 2, b += 2) {
    if (op == NV__RED_SUM) {
      o[0] = a[0] + b[0];
      o[1] = a[1] + b[1];
    } else {
      const float *w = !c_nan(a) && (c_nan(b) || (op == NV__RED_MAX ? c_less(a, b) : c_less(b, a))) ? b : a;
      float re = w[0], im = w[1];
      o[0] = re;
      o[1] = im;
    }
  }
}

#define DISPATCH(NAME, T)                                                                 \
  do {                                                                                    \
    if (op == NV__RED_SUM) NAME##_sum((T *)out, (const T *)a, (const T *)b, count);       \
    else if (op == NV__RED_MAX) NAME##_max((T *)out, (const T *)a, (const T *)b, count);  \
    else NAME##_min((T *)out, (const T *)a, (const T *)b, count);                         \
  } while (0)

void nv__dist_reduce3(void *out, const void *a, const void *b, size_t count, nv_dtype dtype,
                      int op) {
  switch (dtype) {
    case NV_DTYPE_BOOL:
      if (op == NV__RED_MIN) bool_and(out, a, b, count);
      else bool_or(out, a, b, count);
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
    case NV_DTYPE_COMPLEX64: c64(out, a, b, count, op); break;
    default: break; /* float16/bfloat16 are widened by the callers */
  }
}

void nv__dist_reduce(void *dst, const void *src, size_t count, nv_dtype dtype, int op) {
  nv__dist_reduce3(dst, dst, src, count, dtype, op);
}
