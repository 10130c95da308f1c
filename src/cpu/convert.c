/* astype's element conversions. A run is converted in blocks: loaded into a canonical wide
 * form chosen by the source dtype (int64, uint64, float, double or complex), then stored into
 * the target dtype with the rounding rules of src/core/convert.h. Every value rounds once. */
#include <complex.h>

#include "cpu/kernels.h"

#define BLOCK 256

typedef enum { K_I, K_U, K_F, K_D, K_C } kind;

static kind kind_of(nv_dtype d) {
  switch (d) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_INT8:
    case NV_DTYPE_INT16:
    case NV_DTYPE_INT32:
    case NV_DTYPE_INT64: return K_I;
    case NV_DTYPE_UINT8:
    case NV_DTYPE_UINT16:
    case NV_DTYPE_UINT32:
    case NV_DTYPE_UINT64: return K_U;
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16:
    case NV_DTYPE_FLOAT32: return K_F;
    case NV_DTYPE_FLOAT64: return K_D;
    default: return K_C;
  }
}

typedef union wide {
  int64_t i[BLOCK];
  uint64_t u[BLOCK];
  float f[BLOCK];
  double d[BLOCK];
  float c[2 * BLOCK];
} wide;

#define LOAD(T, FIELD, EXPR)                                   \
  do {                                                         \
    const T *s_ = (const T *)src;                              \
    for (int64_t k = 0; k < n; k++) {                          \
      T v = s_[k * ss];                                        \
      w->FIELD[k] = (EXPR);                                    \
    }                                                          \
  } while (0)

static void load(nv_dtype from, const char *src, int64_t ss, int64_t n, wide *w) {
  switch (from) {
    case NV_DTYPE_BOOL: LOAD(uint8_t, i, v != 0); break;
    case NV_DTYPE_INT8: LOAD(int8_t, i, v); break;
    case NV_DTYPE_INT16: LOAD(int16_t, i, v); break;
    case NV_DTYPE_INT32: LOAD(int32_t, i, v); break;
    case NV_DTYPE_INT64: LOAD(int64_t, i, v); break;
    case NV_DTYPE_UINT8: LOAD(uint8_t, u, v); break;
    case NV_DTYPE_UINT16: LOAD(uint16_t, u, v); break;
    case NV_DTYPE_UINT32: LOAD(uint32_t, u, v); break;
    case NV_DTYPE_UINT64: LOAD(uint64_t, u, v); break;
    case NV_DTYPE_FLOAT16: LOAD(uint16_t, f, nv__f16_to_f32(v)); break;
    case NV_DTYPE_BFLOAT16: LOAD(uint16_t, f, nv__bf16_to_f32(v)); break;
    case NV_DTYPE_FLOAT32: LOAD(float, f, v); break;
    case NV_DTYPE_FLOAT64: LOAD(double, d, v); break;
    case NV_DTYPE_COMPLEX64: {
      const float *s_ = (const float *)src;
      for (int64_t k = 0; k < n; k++) {
        w->c[2 * k] = s_[2 * k * ss];
        w->c[2 * k + 1] = s_[2 * k * ss + 1];
      }
      break;
    }
    default: break;
  }
}

#define STORE(T, EXPR)                               \
  do {                                               \
    T *d_ = (T *)dst;                                \
    for (int64_t k = 0; k < n; k++) d_[k * ds] = (EXPR); \
  } while (0)

/* Stores from one canonical kind; V is the element expression of the wide form. */
#define STORE_ALL(V, TO_F16, TO_BF16, IS_TRUE, TO_INT, TO_UINT)                      \
  switch (to) {                                                                       \
    case NV_DTYPE_BOOL: STORE(uint8_t, IS_TRUE); break;                              \
    case NV_DTYPE_INT8: STORE(int8_t, (int8_t)TO_INT(8)); break;                     \
    case NV_DTYPE_INT16: STORE(int16_t, (int16_t)TO_INT(16)); break;                 \
    case NV_DTYPE_INT32: STORE(int32_t, (int32_t)TO_INT(32)); break;                 \
    case NV_DTYPE_INT64: STORE(int64_t, (int64_t)TO_INT(64)); break;                 \
    case NV_DTYPE_UINT8: STORE(uint8_t, (uint8_t)TO_UINT(8)); break;                 \
    case NV_DTYPE_UINT16: STORE(uint16_t, (uint16_t)TO_UINT(16)); break;             \
    case NV_DTYPE_UINT32: STORE(uint32_t, (uint32_t)TO_UINT(32)); break;             \
    case NV_DTYPE_UINT64: STORE(uint64_t, (uint64_t)TO_UINT(64)); break;             \
    case NV_DTYPE_FLOAT16: STORE(uint16_t, TO_F16); break;                           \
    case NV_DTYPE_BFLOAT16: STORE(uint16_t, TO_BF16); break;                         \
    case NV_DTYPE_FLOAT32: STORE(float, (float)(V)); break;                          \
    case NV_DTYPE_FLOAT64: STORE(double, (double)(V)); break;                        \
    case NV_DTYPE_COMPLEX64: {                                                       \
      float *d_ = (float *)dst;                                                      \
      for (int64_t k = 0; k < n; k++) {                                              \
        d_[2 * k * ds] = (float)(V);                                                 \
        d_[2 * k * ds + 1] = 0;                                                      \
      }                                                                              \
      break;                                                                         \
    }                                                                                \
    default: break;                                                                  \
  }

/* Integer sources wrap into narrower integers (two's complement). */
#define WRAP_I(bits) ((uint64_t)w->i[k])
#define WRAP_U(bits) (w->u[k])
/* Float sources: x86's truncating conversions. */
#define F2I(bits) nv__f2i##bits(w->f[k])
#define F2U(bits) nv__f2u##bits(w->f[k])
#define D2I(bits) nv__f2i##bits(w->d[k])
#define D2U(bits) nv__f2u##bits(w->d[k])
#define C2I(bits) nv__f2i##bits(w->c[2 * k])
#define C2U(bits) nv__f2u##bits(w->c[2 * k])

static void store(const wide *w, kind kd, nv_dtype to, char *dst, int64_t ds, int64_t n) {
  switch (kd) {
    case K_I:
      STORE_ALL(w->i[k], nv__f64_to_f16(nv__i64_sticky(w->i[k])),
                nv__f64_to_bf16(nv__i64_sticky(w->i[k])), w->i[k] != 0, WRAP_I, WRAP_I);
      break;
    case K_U:
      STORE_ALL(w->u[k], nv__f64_to_f16(nv__u64_sticky(w->u[k])),
                nv__f64_to_bf16(nv__u64_sticky(w->u[k])), w->u[k] != 0, WRAP_U, WRAP_U);
      break;
    case K_F:
      STORE_ALL(w->f[k], nv__f32_to_f16(w->f[k]), nv__f32_to_bf16(w->f[k]), w->f[k] != 0, F2I,
                F2U);
      break;
    case K_D:
      STORE_ALL(w->d[k], nv__f64_to_f16(w->d[k]), nv__f64_to_bf16(w->d[k]), w->d[k] != 0, D2I,
                D2U);
      break;
    case K_C:
      STORE_ALL(w->c[2 * k], nv__f32_to_f16(w->c[2 * k]), nv__f32_to_bf16(w->c[2 * k]),
                w->c[2 * k] != 0 || w->c[2 * k + 1] != 0, C2I, C2U);
      break;
  }
}

void nv__convert_run(nv_dtype from, const char *src, int64_t ss, nv_dtype to, char *dst,
                     int64_t ds, int64_t n) {
  wide w;
  kind kd = kind_of(from);
  size_t fi = nv_dtype_size(from), ti = nv_dtype_size(to);
  /* Complex to complex is a plain copy. */
  if (from == to) {
    for (int64_t k = 0; k < n; k++) memcpy(dst + k * ds * (int64_t)ti, src + k * ss * (int64_t)fi, fi);
    return;
  }
  for (int64_t b = 0; b < n; b += BLOCK) {
    int64_t m = n - b < BLOCK ? n - b : BLOCK;
    load(from, src + b * ss * (int64_t)fi, ss, m, &w);
    store(&w, kd, to, dst + b * ds * (int64_t)ti, ds, m);
  }
}
