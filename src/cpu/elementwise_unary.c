/* Unary kernels of the elementwise family (SIGN .. BITWISE_INVERT), one loop per primitive and
 * input dtype. float16/bfloat16 compute in float32 and round once; complex64 functions run in
 * double precision (C99's complex functions) and round once to float, so their values match
 * NumPy's complex128 references. */
#include "cpu/elementwise_loops.h"
#include "ops/elementwise_params.h"

#define PI 3.14159265358979323846

/* ---- Scalar helpers ---- */

static inline double sigmoid_d(double x) {
  double e = exp(-fabs(x));
  double r = 1.0 / (1.0 + e);
  return x >= 0 ? r : e * r;
}

/* erfinv in double: a closed-form first guess refined by Halley steps on erf (erfc near ±1,
 * where erf(x) - y would cancel). */
static double erfinv_d(double y) {
  if (isnan(y) || fabs(y) > 1) return NAN;
  if (y == 0) return y;
  if (fabs(y) == 1) return copysign(INFINITY, y);
  double w = fabs(y);
  const double a = 0.147;
  double ln = log1p(-w * w);
  double t = 2 / (PI * a) + ln / 2;
  double x = sqrt(sqrt(t * t - ln / a) - t);
  for (int it = 0; it < 4; it++) {
    double f = w > 0.5 ? (1 - w) - erfc(x) : erf(x) - w;
    double step = f / (1.1283791670955126 * exp(-x * x));
    x -= step / (1 + x * step);
  }
  return copysign(x, y);
}
static inline double sign_d(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == 0 ? 0.0 : x; }
static inline float sign_f(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x == 0 ? 0.0f : x; }

/* NumPy's round: rint(x * 10^d) / 10^d for d > 0, rint(x / 10^-d) * 10^-d for d < 0. */
static inline double round_d(double x, const void *extra) {
  const nv__round_params *p = extra;
  if (p->decimals == 0) return rint(x);
  if (p->decimals > 0) return rint(x * p->scale) / p->scale;
  return rint(x / p->scale) * p->scale;
}
static inline float round_f(float x, const void *extra) {
  const nv__round_params *p = extra;
  return p->decimals == 0 ? rintf(x) : (float)round_d((double)x, extra);
}

/* Integers rounded to a multiple of q = 10^-d, halves to even, exactly (q = 0: beyond 2^64). */
static inline uint64_t iround_u(uint64_t v, uint64_t q) {
  if (!q) return 0;
  uint64_t k = v / q, r = v % q;
  if (r > q - r || (r == q - r && (k & 1))) k++;
  return k * q;
}
static inline int64_t iround_i(int64_t v, uint64_t q) {
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  uint64_t r = iround_u(m, q);
  return v < 0 ? (int64_t)(0 - r) : (int64_t)r;
}
#define IQ (((const nv__round_params *)extra)->iscale)

static inline double nan_to_num_d(double x, const void *extra) {
  const nv__nan_to_num_params *p = extra;
  if (isnan(x)) return p->nan;
  if (isinf(x)) return x > 0 ? p->posinf : p->neginf;
  return x;
}
static inline float nan_to_num_f(float x, const void *extra) {
  return (float)nan_to_num_d((double)x, extra);
}

/* ---- Complex helpers (computed in double) ---- */

static inline nv__cd wide(nv__cf x) { return (nv__cd)x; }
static inline nv__cf narrow(nv__cd x) { return (nv__cf)x; }
/* re + im i built from its parts, as C11's CMPLX does (an infinite or NaN part stays in its
 * place, unlike re + im * I). glibc defines CMPLX only for compilers announcing GCC >= 4.7,
 * which clang 14 does not, so the parts are written through a union: C11 lays a complex out
 * as an array of its two real parts. */
static inline nv__cd cd_make(double re, double im) {
  union {
    double part[2];
    nv__cd z;
  } u = {.part = {re, im}};
  return u.z;
}
static inline nv__cf c_sign(nv__cf x) {
  double m = cabs(wide(x));
  return m == 0 ? x * 0 : narrow(wide(x) / m);
}
static inline nv__cf c_expm1(nv__cf x) {
  /* e^a cos b - 1 = expm1(a) cos b - 2 sin^2(b/2): no cancellation for small |x|. */
  double a = crealf(x), b = cimagf(x), h = sin(b / 2);
  return narrow(cd_make(expm1(a) * cos(b) - 2 * h * h, exp(a) * sin(b)));
}
static inline nv__cf c_round(nv__cf x, const void *extra) {
  return narrow(cd_make(round_d(crealf(x), extra), round_d(cimagf(x), extra)));
}
static inline nv__cf c_nan_to_num(nv__cf x, const void *extra) {
  return narrow(cd_make(nan_to_num_d(crealf(x), extra), nan_to_num_d(cimagf(x), extra)));
}
#define CW(F) narrow(F(wide(x)))
#define C_LOG2 narrow(clog(wide(x)) / 0.69314718055994530942)
#define C_LOG10 narrow(clog(wide(x)) / 2.30258509299404568402)
#define C_LOG1P narrow(clog(1 + wide(x)))
#define C_RSQRT narrow(1 / csqrt(wide(x)))
#define C_RECIP narrow(1 / wide(x))
#define CNZ(x) (crealf(x) != 0 || cimagf(x) != 0)

/* ---- Loop families ---- */

#define HALF2(OP, EXPR)                                                   \
  NV__UN_HALF_FN(OP##_f16, nv__f16_to_f32, nv__f32_to_f16, EXPR)          \
  NV__UN_HALF_FN(OP##_bf16, nv__bf16_to_f32, nv__f32_to_bf16, EXPR)
/* A float op: EXPRF over float (float16/bfloat16/float32), EXPRD over double. */
#define FLOAT_OP(OP, EXPRF, EXPRD)                 \
  HALF2(OP, EXPRF)                                 \
  NV__UN_FN(OP##_f32, float, float, EXPRF)         \
  NV__UN_FN(OP##_f64, double, double, EXPRD)
#define COMPLEX_OP(OP, EXPR) NV__UN_FN(OP##_c64, nv__cf, nv__cf, EXPR)
/* An op whose float16/bfloat16/float32 loops are elementwise_fast.c's: float64 here. */
#define F64_OP(OP, EXPRD) NV__UN_FN(OP##_f64, double, double, EXPRD)
/* An op on every integer type with one expression (T is the element type). */
#define INT_OP(OP, EXPR)                                            \
  NV__UN_FN(OP##_u8, uint8_t, uint8_t, (uint8_t)(EXPR))             \
  NV__UN_FN(OP##_u16, uint16_t, uint16_t, (uint16_t)(EXPR))         \
  NV__UN_FN(OP##_u32, uint32_t, uint32_t, (uint32_t)(EXPR))         \
  NV__UN_FN(OP##_u64, uint64_t, uint64_t, (uint64_t)(EXPR))         \
  NV__UN_FN(OP##_i8, int8_t, int8_t, (int8_t)(EXPR))                \
  NV__UN_FN(OP##_i16, int16_t, int16_t, (int16_t)(EXPR))            \
  NV__UN_FN(OP##_i32, int32_t, int32_t, (int32_t)(EXPR))            \
  NV__UN_FN(OP##_i64, int64_t, int64_t, (int64_t)(EXPR))
/* A bool-valued test on every dtype: EXACT for bool and integers, F on floats, C on complex. */
#define TEST_OP(OP, EXACT, F, C)                                             \
  NV__UN_FN(OP##_b, bool, uint8_t, ((void)x, EXACT))                        \
  NV__UN_FN(OP##_u8, bool, uint8_t, ((void)x, EXACT))                       \
  NV__UN_FN(OP##_u16, bool, uint16_t, ((void)x, EXACT))                     \
  NV__UN_FN(OP##_u32, bool, uint32_t, ((void)x, EXACT))                     \
  NV__UN_FN(OP##_u64, bool, uint64_t, ((void)x, EXACT))                     \
  NV__UN_FN(OP##_i8, bool, int8_t, ((void)x, EXACT))                        \
  NV__UN_FN(OP##_i16, bool, int16_t, ((void)x, EXACT))                      \
  NV__UN_FN(OP##_i32, bool, int32_t, ((void)x, EXACT))                      \
  NV__UN_FN(OP##_i64, bool, int64_t, ((void)x, EXACT))                      \
  NV__UN_HALF_TO_FN(OP##_f16, bool, nv__f16_to_f32, F)                      \
  NV__UN_HALF_TO_FN(OP##_bf16, bool, nv__bf16_to_f32, F)                    \
  NV__UN_FN(OP##_f32, bool, float, F)                                       \
  NV__UN_FN(OP##_f64, bool, double, F)                                      \
  NV__UN_FN(OP##_c64, bool, nv__cf, C)

/* Math functions on the float dtypes and complex64. */
#define MATH_OP(OP, FF, FD, FC) FLOAT_OP(OP, FF(x), FD(x)) COMPLEX_OP(OP, CW(FC))
F64_OP(sin, sin(x))
COMPLEX_OP(sin, CW(csin))
F64_OP(cos, cos(x))
COMPLEX_OP(cos, CW(ccos))
MATH_OP(tan, tanf, tan, ctan)
MATH_OP(arcsin, asinf, asin, casin)
MATH_OP(arccos, acosf, acos, cacos)
MATH_OP(arctan, atanf, atan, catan)
MATH_OP(sinh, sinhf, sinh, csinh)
MATH_OP(cosh, coshf, cosh, ccosh)
F64_OP(tanh, tanh(x))
COMPLEX_OP(tanh, CW(ctanh))
MATH_OP(arcsinh, asinhf, asinh, casinh)
MATH_OP(arccosh, acoshf, acosh, cacosh)
MATH_OP(arctanh, atanhf, atanh, catanh)

F64_OP(expm1, expm1(x))
COMPLEX_OP(expm1, c_expm1(x))
FLOAT_OP(log2, log2f(x), log2(x))
COMPLEX_OP(log2, C_LOG2)
FLOAT_OP(log10, log10f(x), log10(x))
COMPLEX_OP(log10, C_LOG10)
F64_OP(log1p, log1p(x))
COMPLEX_OP(log1p, C_LOG1P)
FLOAT_OP(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
COMPLEX_OP(rsqrt, C_RSQRT)
FLOAT_OP(recip, 1.0f / x, 1.0 / x)
COMPLEX_OP(recip, C_RECIP)
FLOAT_OP(degrees, (float)((double)x * (180.0 / PI)), x * (180.0 / PI))
COMPLEX_OP(degrees, narrow(wide(x) * (180.0 / PI)))
FLOAT_OP(radians, (float)((double)x * (PI / 180.0)), x * (PI / 180.0))
COMPLEX_OP(radians, narrow(wide(x) * (PI / 180.0)))
F64_OP(sigmoid, sigmoid_d(x))
F64_OP(erf, erf(x))
F64_OP(erfinv, erfinv_d(x))
FLOAT_OP(floor, floorf(x), floor(x))
FLOAT_OP(ceil, ceilf(x), ceil(x))
FLOAT_OP(trunc, truncf(x), trunc(x))
FLOAT_OP(round, round_f(x, extra), round_d(x, extra))
COMPLEX_OP(round, c_round(x, extra))
FLOAT_OP(nan_to_num, nan_to_num_f(x, extra), nan_to_num_d(x, extra))
COMPLEX_OP(nan_to_num, c_nan_to_num(x, extra))

FLOAT_OP(sign, sign_f(x), sign_d(x))
COMPLEX_OP(sign, c_sign(x))
INT_OP(sign, x > 0 ? 1 : x == 0 ? 0 : -1)

FLOAT_OP(square, x * x, x * x)
COMPLEX_OP(square, x * x)
NV__UN_FN(square_b, uint8_t, uint8_t, x)
INT_OP(square, (uint64_t)x * (uint64_t)x)

COMPLEX_OP(conj, conjf(x))
INT_OP(invert, ~x)
NV__UN_FN(invert_b, uint8_t, uint8_t, (uint8_t)!x)

/* Integer rounding to tens, hundreds, ... (decimals < 0). */
NV__UN_FN(round_u8, uint8_t, uint8_t, (uint8_t)iround_u(x, IQ))
NV__UN_FN(round_u16, uint16_t, uint16_t, (uint16_t)iround_u(x, IQ))
NV__UN_FN(round_u32, uint32_t, uint32_t, (uint32_t)iround_u(x, IQ))
NV__UN_FN(round_u64, uint64_t, uint64_t, iround_u(x, IQ))
NV__UN_FN(round_i8, int8_t, int8_t, (int8_t)iround_i(x, IQ))
NV__UN_FN(round_i16, int16_t, int16_t, (int16_t)iround_i(x, IQ))
NV__UN_FN(round_i32, int32_t, int32_t, (int32_t)iround_i(x, IQ))
NV__UN_FN(round_i64, int64_t, int64_t, iround_i(x, IQ))

TEST_OP(lnot, x == 0, x == 0, !CNZ(x))
TEST_OP(isnan, 0, isnan(x), isnan(crealf(x)) || isnan(cimagf(x)))
TEST_OP(isinf, 0, isinf(x), isinf(crealf(x)) || isinf(cimagf(x)))
TEST_OP(isfinite, 1, isfinite(x), isfinite(crealf(x)) && isfinite(cimagf(x)))
TEST_OP(isposinf, 0, x == INFINITY, crealf(x) == INFINITY && cimagf(x) == 0)
TEST_OP(isneginf, 0, x == -INFINITY, crealf(x) == -INFINITY && cimagf(x) == 0)

/* ---- Tables ---- */

#define FLOATS(OP)                                                                  \
  [NV_DTYPE_FLOAT16] = OP##_f16, [NV_DTYPE_BFLOAT16] = OP##_bf16,                   \
  [NV_DTYPE_FLOAT32] = OP##_f32, [NV_DTYPE_FLOAT64] = OP##_f64
#define INTS(OP)                                                                    \
  [NV_DTYPE_UINT8] = OP##_u8, [NV_DTYPE_UINT16] = OP##_u16, [NV_DTYPE_UINT32] = OP##_u32, \
  [NV_DTYPE_UINT64] = OP##_u64, [NV_DTYPE_INT8] = OP##_i8, [NV_DTYPE_INT16] = OP##_i16,   \
  [NV_DTYPE_INT32] = OP##_i32, [NV_DTYPE_INT64] = OP##_i64
#define CPLX(OP) [NV_DTYPE_COMPLEX64] = OP##_c64
/* float16/bfloat16/float32 from nv__ew_fast_unary (elementwise_fast.c), float64 here. */
#define FAST(OP) [NV_DTYPE_FLOAT64] = OP##_f64
#define ALL(OP) [NV_DTYPE_BOOL] = OP##_b, INTS(OP), FLOATS(OP), CPLX(OP)
#define ROW(PRIM) [NV__PRIM_##PRIM - NV__PRIM_SIGN]

#define NUNARY (NV__PRIM_BITWISE_INVERT - NV__PRIM_SIGN + 1)

/* Per primitive, per input dtype; NULL: not supported (the builders never build those). */
static const nv__run_fn table[NUNARY][NV_DTYPE_COUNT] = {
    ROW(SIGN) = {INTS(sign), FLOATS(sign), CPLX(sign)},
    ROW(LOGICAL_NOT) = {ALL(lnot)},
    ROW(RECIPROCAL) = {FLOATS(recip), CPLX(recip)},
    ROW(FLOOR) = {FLOATS(floor)},
    ROW(CEIL) = {FLOATS(ceil)},
    ROW(TRUNC) = {FLOATS(trunc)},
    ROW(ROUND) = {INTS(round), FLOATS(round), CPLX(round)},
    ROW(SQUARE) = {[NV_DTYPE_BOOL] = square_b, INTS(square), FLOATS(square), CPLX(square)},
    ROW(RSQRT) = {FLOATS(rsqrt), CPLX(rsqrt)},
    ROW(EXPM1) = {FAST(expm1), CPLX(expm1)},
    ROW(LOG2) = {FLOATS(log2), CPLX(log2)},
    ROW(LOG10) = {FLOATS(log10), CPLX(log10)},
    ROW(LOG1P) = {FAST(log1p), CPLX(log1p)},
    ROW(SIN) = {FAST(sin), CPLX(sin)},
    ROW(COS) = {FAST(cos), CPLX(cos)},
    ROW(TAN) = {FLOATS(tan), CPLX(tan)},
    ROW(ARCSIN) = {FLOATS(arcsin), CPLX(arcsin)},
    ROW(ARCCOS) = {FLOATS(arccos), CPLX(arccos)},
    ROW(ARCTAN) = {FLOATS(arctan), CPLX(arctan)},
    ROW(SINH) = {FLOATS(sinh), CPLX(sinh)},
    ROW(COSH) = {FLOATS(cosh), CPLX(cosh)},
    ROW(TANH) = {FAST(tanh), CPLX(tanh)},
    ROW(ARCSINH) = {FLOATS(arcsinh), CPLX(arcsinh)},
    ROW(ARCCOSH) = {FLOATS(arccosh), CPLX(arccosh)},
    ROW(ARCTANH) = {FLOATS(arctanh), CPLX(arctanh)},
    ROW(DEGREES) = {FLOATS(degrees), CPLX(degrees)},
    ROW(RADIANS) = {FLOATS(radians), CPLX(radians)},
    ROW(SIGMOID) = {FAST(sigmoid)},
    ROW(ERF) = {FAST(erf)},
    ROW(ERFINV) = {FAST(erfinv)},
    ROW(ISNAN) = {ALL(isnan)},
    ROW(ISINF) = {ALL(isinf)},
    ROW(ISFINITE) = {ALL(isfinite)},
    ROW(ISPOSINF) = {ALL(isposinf)},
    ROW(ISNEGINF) = {ALL(isneginf)},
    ROW(NAN_TO_NUM) = {FLOATS(nan_to_num), CPLX(nan_to_num)},
    ROW(CONJUGATE) = {CPLX(conj)},
    ROW(BITWISE_INVERT) = {[NV_DTYPE_BOOL] = invert_b, INTS(invert)},
};

nv_status nv__k_ew_unary(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  nv_dtype dt = in[0].meta->dtype;
  nv__run_fn fn = nv__ew_fast_unary(node->prim, dt);
  if (!fn) fn = table[node->prim - NV__PRIM_SIGN][dt];
  if (!fn)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported",
                         nv__prims[node->prim].name, nv_dtype_name(dt));
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, 1, fn, node->params);
  return NV_OK;
}
