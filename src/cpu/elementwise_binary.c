/* Binary kernels of the elementwise family (FLOOR_DIVIDE .. RIGHT_SHIFT), and divmod. Integer
 * ops never hit C's undefined behaviour: wrapping arithmetic runs on unsigned types, division
 * by zero and INT_MIN / -1 are tested first, and shift amounts are checked against the width.
 * Floor division and remainder of floats follow NumPy's divmod, computed in double (float16,
 * bfloat16 and float32 values are exact in double, so the results match NumPy's float64). */
#include "cpu/elementwise_loops.h"

/* ---- Scalar helpers ---- */

/* NumPy's divmod of doubles: the floored quotient, and the remainder through *mod. */
static inline double divmod_d(double a, double b, double *mod) {
  double m = fmod(a, b);
  if (b == 0) {
    *mod = m;
    return a / b;
  }
  double div = (a - m) / b;
  if (m != 0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      div -= 1.0;
    }
  } else {
    m = copysign(0.0, b);
  }
  double fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > 0.5) fl += 1.0;
  } else {
    fl = copysign(0.0, a / b);
  }
  *mod = m;
  return fl;
}
static inline double fdiv_d(double a, double b) {
  double m;
  return divmod_d(a, b, &m);
}
static inline double fmod_d(double a, double b) {
  double m;
  divmod_d(a, b, &m);
  return m;
}

/* Signed floor division and remainder on int64 (narrower types are widened first, so only
 * int64 can meet INT64_MIN / -1). */
static inline int64_t fdiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t rem_i(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* Exponentiation by squaring with wrapping (mod 2^64, then truncated to the type). */
static inline uint64_t ipow(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    e >>= 1;
    base *= base;
  }
  return r;
}

static inline float logaddexp_f(float a, float b) {
  if (a == b) return a + 0.69314718f; /* also ±inf with itself */
  float d = a - b;
  if (d > 0) return a + log1pf(expf(-d));
  if (d <= 0) return b + log1pf(expf(d));
  return d; /* NaN */
}
static inline double logaddexp_d(double a, double b) {
  if (a == b) return a + 0.69314718055994530942;
  double d = a - b;
  if (d > 0) return a + log1p(exp(-d));
  if (d <= 0) return b + log1p(exp(d));
  return d;
}

#define CRE crealf
#define CIM cimagf
#define CGT(x, y) (CRE(x) > CRE(y) || (CRE(x) == CRE(y) && CIM(x) > CIM(y)))
#define CGE(x, y) (CRE(x) > CRE(y) || (CRE(x) == CRE(y) && CIM(x) >= CIM(y)))
#define CNZ(x) (CRE(x) != 0 || CIM(x) != 0)

/* ---- Loop families ---- */

#define HALF_BIN(OP, TO, STORE, EXPR)                                  \
  NV__BIN_HALF_FN(OP##_f16, TO, nv__f16_to_f32, STORE, EXPR)           \
  NV__BIN_HALF_FN(OP##_bf16, TO, nv__bf16_to_f32, STORE, EXPR)
#define F16_STORE(OP, EXPR)                                                        \
  NV__BIN_HALF_FN(OP##_f16, uint16_t, nv__f16_to_f32, nv__f32_to_f16, EXPR)        \
  NV__BIN_HALF_FN(OP##_bf16, uint16_t, nv__bf16_to_f32, nv__f32_to_bf16, EXPR)
/* Float ops: EXPRF on float (half types and float32), EXPRD on double. */
#define FLOAT_BIN(OP, EXPRF, EXPRD)             \
  F16_STORE(OP, EXPRF)                          \
  NV__BIN_FN(OP##_f32, float, float, EXPRF)     \
  NV__BIN_FN(OP##_f64, double, double, EXPRD)

#define UNSIGNED_BIN(OP, EXPR)                                        \
  NV__BIN_FN(OP##_u8, uint8_t, uint8_t, (uint8_t)(EXPR))              \
  NV__BIN_FN(OP##_u16, uint16_t, uint16_t, (uint16_t)(EXPR))          \
  NV__BIN_FN(OP##_u32, uint32_t, uint32_t, (uint32_t)(EXPR))          \
  NV__BIN_FN(OP##_u64, uint64_t, uint64_t, (uint64_t)(EXPR))
#define SIGNED_BIN(OP, EXPR)                                          \
  NV__BIN_FN(OP##_i8, int8_t, int8_t, (int8_t)(EXPR))                 \
  NV__BIN_FN(OP##_i16, int16_t, int16_t, (int16_t)(EXPR))             \
  NV__BIN_FN(OP##_i32, int32_t, int32_t, (int32_t)(EXPR))             \
  NV__BIN_FN(OP##_i64, int64_t, int64_t, (int64_t)(EXPR))
#define INT_BIN(OP, EXPR) UNSIGNED_BIN(OP, EXPR) SIGNED_BIN(OP, EXPR)

/* Bool-valued ops on every dtype: E on bool/integers/floats (x, y as the values), C on
 * complex64. */
#define PRED_BIN(OP, E, C)                                            \
  NV__BIN_FN(OP##_b, bool, uint8_t, E)                                \
  NV__BIN_FN(OP##_u8, bool, uint8_t, E)                               \
  NV__BIN_FN(OP##_u16, bool, uint16_t, E)                             \
  NV__BIN_FN(OP##_u32, bool, uint32_t, E)                             \
  NV__BIN_FN(OP##_u64, bool, uint64_t, E)                             \
  NV__BIN_FN(OP##_i8, bool, int8_t, E)                                \
  NV__BIN_FN(OP##_i16, bool, int16_t, E)                              \
  NV__BIN_FN(OP##_i32, bool, int32_t, E)                              \
  NV__BIN_FN(OP##_i64, bool, int64_t, E)                              \
  HALF_BIN(OP, bool, NV__KEEP, E)                                     \
  NV__BIN_FN(OP##_f32, bool, float, E)                                \
  NV__BIN_FN(OP##_f64, bool, double, E)                               \
  NV__BIN_FN(OP##_c64, bool, nv__cf, C)

/* floor_divide / remainder */
FLOAT_BIN(fdiv, (float)fdiv_d(x, y), fdiv_d(x, y))
FLOAT_BIN(fmod, (float)fmod_d(x, y), fmod_d(x, y))
UNSIGNED_BIN(fdiv, y == 0 ? 0 : x / y)
UNSIGNED_BIN(fmod, y == 0 ? x : x % y)
SIGNED_BIN(fdiv, fdiv_i(x, y))
SIGNED_BIN(fmod, rem_i(x, y))
NV__BIN_FN(fdiv_b, uint8_t, uint8_t, x && y)
NV__BIN_FN(fmod_b, uint8_t, uint8_t, x && !y)

/* power: negative integer exponents give 0 (MLX). */
FLOAT_BIN(pow, powf(x, y), pow(x, y))
NV__BIN_FN(pow_c64, nv__cf, nv__cf, (nv__cf)cpow((nv__cd)x, (nv__cd)y))
UNSIGNED_BIN(pow, ipow(x, y))
SIGNED_BIN(pow, y < 0 ? 0 : ipow((uint64_t)x, (uint64_t)y))
NV__BIN_FN(pow_b, uint8_t, uint8_t, x || !y)

FLOAT_BIN(atan2, atan2f(x, y), atan2(x, y))
FLOAT_BIN(logaddexp, logaddexp_f(x, y), logaddexp_d(x, y))

/* comparisons and logical ops */
PRED_BIN(eq, x == y, x == y)
PRED_BIN(ne, x != y, x != y)
PRED_BIN(gt, x > y, CGT(x, y))
PRED_BIN(ge, x >= y, CGE(x, y))
PRED_BIN(lt, x < y, CGT(y, x))
PRED_BIN(le, x <= y, CGE(y, x))
PRED_BIN(land, x != 0 && y != 0, CNZ(x) && CNZ(y))
PRED_BIN(lor, x != 0 || y != 0, CNZ(x) || CNZ(y))
PRED_BIN(lxor, (x != 0) != (y != 0), CNZ(x) != CNZ(y))

/* bitwise ops and shifts */
INT_BIN(band, x &y)
INT_BIN(bor, x | y)
INT_BIN(bxor, x ^ y)
NV__BIN_FN(band_b, uint8_t, uint8_t, x &y)
NV__BIN_FN(bor_b, uint8_t, uint8_t, x | y)
NV__BIN_FN(bxor_b, uint8_t, uint8_t, x ^ y)
#define W(x) ((int64_t)sizeof(x) * 8)
UNSIGNED_BIN(shl, (uint64_t)y < (uint64_t)W(x) ? (uint64_t)x << y : 0)
SIGNED_BIN(shl, y >= 0 && y < W(x) ? (uint64_t)x << y : 0)
UNSIGNED_BIN(shr, (uint64_t)y < (uint64_t)W(x) ? x >> y : 0)
SIGNED_BIN(shr, y >= 0 && y < W(x) ? x >> y : (x < 0 ? -1 : 0))

/* ---- Tables ---- */

#define FLOATS(OP)                                                                  \
  [NV_DTYPE_FLOAT16] = OP##_f16, [NV_DTYPE_BFLOAT16] = OP##_bf16,                   \
  [NV_DTYPE_FLOAT32] = OP##_f32, [NV_DTYPE_FLOAT64] = OP##_f64
#define INTS(OP)                                                                    \
  [NV_DTYPE_UINT8] = OP##_u8, [NV_DTYPE_UINT16] = OP##_u16, [NV_DTYPE_UINT32] = OP##_u32, \
  [NV_DTYPE_UINT64] = OP##_u64, [NV_DTYPE_INT8] = OP##_i8, [NV_DTYPE_INT16] = OP##_i16,   \
  [NV_DTYPE_INT32] = OP##_i32, [NV_DTYPE_INT64] = OP##_i64
#define ALL(OP) [NV_DTYPE_BOOL] = OP##_b, INTS(OP), FLOATS(OP), [NV_DTYPE_COMPLEX64] = OP##_c64
#define ROW(PRIM) [NV__PRIM_##PRIM - NV__PRIM_FLOOR_DIVIDE]
#define NBINARY (NV__PRIM_RIGHT_SHIFT - NV__PRIM_FLOOR_DIVIDE + 1)

/* Per primitive, per input dtype (the builders convert both inputs to it). */
static const nv__run_fn table[NBINARY][NV_DTYPE_COUNT] = {
    ROW(FLOOR_DIVIDE) = {[NV_DTYPE_BOOL] = fdiv_b, INTS(fdiv), FLOATS(fdiv)},
    ROW(REMAINDER) = {[NV_DTYPE_BOOL] = fmod_b, INTS(fmod), FLOATS(fmod)},
    ROW(POWER) = {[NV_DTYPE_BOOL] = pow_b, INTS(pow), FLOATS(pow),
                  [NV_DTYPE_COMPLEX64] = pow_c64},
    ROW(ARCTAN2) = {FLOATS(atan2)},
    ROW(LOGADDEXP) = {FLOATS(logaddexp)},
    ROW(EQUAL) = {ALL(eq)},
    ROW(NOT_EQUAL) = {ALL(ne)},
    ROW(GREATER) = {ALL(gt)},
    ROW(GREATER_EQUAL) = {ALL(ge)},
    ROW(LESS) = {ALL(lt)},
    ROW(LESS_EQUAL) = {ALL(le)},
    ROW(LOGICAL_AND) = {ALL(land)},
    ROW(LOGICAL_OR) = {ALL(lor)},
    ROW(LOGICAL_XOR) = {ALL(lxor)},
    ROW(BITWISE_AND) = {[NV_DTYPE_BOOL] = band_b, INTS(band)},
    ROW(BITWISE_OR) = {[NV_DTYPE_BOOL] = bor_b, INTS(bor)},
    ROW(BITWISE_XOR) = {[NV_DTYPE_BOOL] = bxor_b, INTS(bxor)},
    ROW(LEFT_SHIFT) = {INTS(shl)},
    ROW(RIGHT_SHIFT) = {INTS(shr)},
};

static nv__run_fn lookup(int prim, nv_dtype dt) {
  nv__run_fn fn = table[prim - NV__PRIM_FLOOR_DIVIDE][dt];
  if (!fn)
    nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported", nv__prims[prim].name,
                  nv_dtype_name(dt));
  return fn;
}

nv_status nv__k_ew_binary(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  nv__run_fn fn = lookup(node->prim, in[0].meta->dtype);
  if (!fn) return NV_ERR_UNSUPPORTED;
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, 2, fn, NULL);
  return NV_OK;
}

/* divmod: the quotient and the remainder, one pass each. */
nv_status nv__k_divmod(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_dtype dt = in[0].meta->dtype;
  nv__run_fn q = lookup(NV__PRIM_FLOOR_DIVIDE, dt), r = lookup(NV__PRIM_REMAINDER, dt);
  if (!q || !r) return NV_ERR_UNSUPPORTED;
  if (nv__output_alloc(&node->out[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (nv__output_alloc(&node->out[1]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(&node->out[0], in, 2, q, NULL);
  nv__cpu_map(&node->out[1], in, 2, r, NULL);
  return NV_OK;
}
