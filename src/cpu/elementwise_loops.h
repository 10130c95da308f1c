/* Loop templates of the element-wise kernels, run by nv__cpu_map: operand 0 is the output
 * (row-contiguous run), operands 1.. the inputs with element strides s[1..] (0: broadcast).
 * Each template has a contiguous branch the compiler vectorizes, and reads an element before
 * writing the same index, so an output that aliases an input (donation) is safe. */
#ifndef NUVEC_CPU_ELEMENTWISE_LOOPS_H
#define NUVEC_CPU_ELEMENTWISE_LOOPS_H

#include <complex.h>
#include <math.h>

#include "cpu/kernels.h"

typedef float _Complex nv__cf;
typedef double _Complex nv__cd;

/* out[i] = EXPR(x) with x of type TI, out of type TO; `extra` is visible to EXPR. */
#define NV__UN_FN(NAME, TO, TI, EXPR)                                            \
  NV_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                 \
    TO *o = (TO *)p[0];                                                          \
    const TI *a = (const TI *)p[1];                                              \
    int64_t sa = s[1];                                                           \
    if (sa == 1) {                                                               \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI x = a[i];                                                             \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    } else {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI x = a[i * sa];                                                        \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    }                                                                            \
  }

/* float16/bfloat16 in and out: x is the float32 value; EXPR is rounded once. */
#define NV__UN_HALF_FN(NAME, LOAD, STORE, EXPR)                                  \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                 \
    uint16_t *o = (uint16_t *)p[0];                                              \
    const uint16_t *a = (const uint16_t *)p[1];                                  \
    int64_t sa = s[1];                                                           \
    for (int64_t i = 0; i < n; i++) {                                            \
      float x = LOAD(a[i * sa]);                                                 \
      o[i] = STORE(EXPR);                                                        \
    }                                                                            \
  }

/* float16/bfloat16 in, TO out (bool tests). */
#define NV__UN_HALF_TO_FN(NAME, TO, LOAD, EXPR)                                  \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                 \
    TO *o = (TO *)p[0];                                                          \
    const uint16_t *a = (const uint16_t *)p[1];                                  \
    int64_t sa = s[1];                                                           \
    for (int64_t i = 0; i < n; i++) {                                            \
      float x = LOAD(a[i * sa]);                                                 \
      o[i] = (EXPR);                                                             \
    }                                                                            \
  }

/* out[i] = EXPR(x, y), inputs of type TI, output TO, with broadcast-scalar fast paths. */
#define NV__BIN_FN(NAME, TO, TI, EXPR)                                           \
  NV_KERNEL_CLONES static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                 \
    TO *o = (TO *)p[0];                                                          \
    const TI *a = (const TI *)p[1], *b = (const TI *)p[2];                       \
    int64_t sa = s[1], sb = s[2];                                                \
    if (sa == 1 && sb == 1) {                                                    \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI x = a[i], y = b[i];                                                   \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    } else if (sa == 1 && sb == 0) {                                             \
      TI y = b[0];                                                               \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI x = a[i];                                                             \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    } else if (sa == 0 && sb == 1) {                                             \
      TI x = a[0];                                                               \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI y = b[i];                                                             \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    } else {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                          \
        TI x = a[i * sa], y = b[i * sb];                                         \
        o[i] = (EXPR);                                                           \
      }                                                                          \
    }                                                                            \
  }

/* float16/bfloat16 inputs read as float32; the output of type TO gets EXPR through STORE. */
#define NV__BIN_HALF_FN(NAME, TO, LOAD, STORE, EXPR)                             \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {   \
    (void)extra;                                                                 \
    TO *o = (TO *)p[0];                                                          \
    const uint16_t *a = (const uint16_t *)p[1], *b = (const uint16_t *)p[2];     \
    int64_t sa = s[1], sb = s[2];                                                \
    for (int64_t i = 0; i < n; i++) {                                            \
      float x = LOAD(a[i * sa]), y = LOAD(b[i * sb]);                            \
      o[i] = STORE(EXPR);                                                        \
    }                                                                            \
  }

#define NV__KEEP(v) (v)

/* Fast float32 run functions (src/cpu/elementwise_fast.c) for a primitive, or NULL. Binary
 * arithmetic needs none: the table's loops vectorize (and have AVX2/AVX-512 clones). */
nv__run_fn nv__ew_fast_unary(int prim, nv_dtype dtype);

/* The float16/bfloat16/float32 run functions of gelu (vjp false: one input) and act_vjp (vjp
 * true: inputs a, g) for an NV__ACT_* mode, or NULL (other dtypes; gelu of tanh/sigmoid). */
nv__run_fn nv__ew_fast_act(int mode, bool vjp, nv_dtype dtype);

#endif
