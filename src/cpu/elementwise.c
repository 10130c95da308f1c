/* Unary and binary element-wise kernels. Integer arithmetic wraps (computed unsigned, so no C
 * undefined behaviour); float16/bfloat16 compute in float32 and round once; maximum/minimum
 * propagate NaN; complex values order lexicographically (real, then imaginary) as NumPy. */
#include <complex.h>
#include <math.h>

#include "cpu/elementwise_loops.h"

typedef nv__cf cf;

/* ---- Binary ---- */

/* The loop templates are shared with the other element-wise files (elementwise_loops.h). */
#define BIN_FN(NAME, T, EXPR) NV__BIN_FN(NAME, T, T, EXPR)
#define BIN_HALF_FN(NAME, LOAD, STORE, EXPR) NV__BIN_HALF_FN(NAME, uint16_t, LOAD, STORE, EXPR)

#define FMAXN(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))
#define FMINN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))
#define CLESS(x, y) (crealf(x) < crealf(y) || (crealf(x) == crealf(y) && cimagf(x) < cimagf(y)))
#define CNAN(x) (crealf(x) != crealf(x) || cimagf(x) != cimagf(x))

/* One family of integer functions per op: wrapping arithmetic through unsigned types. */
#define INT_FAMILY(OP, EXPR32, EXPR64)                          \
  BIN_FN(OP##_u8, uint8_t, (uint8_t)(EXPR32))                   \
  BIN_FN(OP##_u16, uint16_t, (uint16_t)(EXPR32))                \
  BIN_FN(OP##_u32, uint32_t, (uint32_t)(EXPR32))                \
  BIN_FN(OP##_u64, uint64_t, (uint64_t)(EXPR64))                \
  BIN_FN(OP##_i8, int8_t, (int8_t)(EXPR32))                     \
  BIN_FN(OP##_i16, int16_t, (int16_t)(EXPR32))                  \
  BIN_FN(OP##_i32, int32_t, (int32_t)(EXPR32))                  \
  BIN_FN(OP##_i64, int64_t, (int64_t)(EXPR64))

INT_FAMILY(add, (unsigned)x + (unsigned)y, (uint64_t)x + (uint64_t)y)
INT_FAMILY(sub, (unsigned)x - (unsigned)y, (uint64_t)x - (uint64_t)y)
INT_FAMILY(mul, (unsigned)x *(unsigned)y, (uint64_t)x *(uint64_t)y)
INT_FAMILY(max, x > y ? x : y, x > y ? x : y)
INT_FAMILY(min, x < y ? x : y, x < y ? x : y)

BIN_FN(add_b, uint8_t, x | y)
BIN_FN(mul_b, uint8_t, x &y)
BIN_FN(add_f32, float, x + y)
BIN_FN(sub_f32, float, x - y)
BIN_FN(mul_f32, float, x *y)
BIN_FN(div_f32, float, x / y)
BIN_FN(max_f32, float, FMAXN(x, y))
BIN_FN(min_f32, float, FMINN(x, y))
BIN_FN(add_f64, double, x + y)
BIN_FN(sub_f64, double, x - y)
BIN_FN(mul_f64, double, x *y)
BIN_FN(div_f64, double, x / y)
BIN_FN(max_f64, double, FMAXN(x, y))
BIN_FN(min_f64, double, FMINN(x, y))
BIN_FN(add_c64, cf, x + y)
BIN_FN(sub_c64, cf, x - y)
BIN_FN(mul_c64, cf, x *y)
BIN_FN(div_c64, cf, x / y)
BIN_FN(max_c64, cf, CNAN(x) || !CLESS(x, y) ? x : y)
BIN_FN(min_c64, cf, CNAN(x) || CLESS(x, y) ? x : y)

#define HALF_FAMILY(T, LOAD, STORE)                         \
  BIN_HALF_FN(add_##T, LOAD, STORE, x + y)                  \
  BIN_HALF_FN(sub_##T, LOAD, STORE, x - y)                  \
  BIN_HALF_FN(mul_##T, LOAD, STORE, x *y)                   \
  BIN_HALF_FN(div_##T, LOAD, STORE, x / y)                  \
  BIN_HALF_FN(max_##T, LOAD, STORE, FMAXN(x, y))            \
  BIN_HALF_FN(min_##T, LOAD, STORE, FMINN(x, y))
HALF_FAMILY(f16, nv__f16_to_f32, nv__f32_to_f16)
HALF_FAMILY(bf16, nv__bf16_to_f32, nv__f32_to_bf16)

#define INT_ROW(OP) OP##_u8, OP##_u16, OP##_u32, OP##_u64, OP##_i8, OP##_i16, OP##_i32, OP##_i64
#define FLOAT_ROW(OP) OP##_f16, OP##_bf16, OP##_f32, OP##_f64, OP##_c64

/* Per primitive, per dtype (nv_dtype order); NULL: not defined for that dtype. */
static const nv__run_fn binary_table[6][NV_DTYPE_COUNT] = {
    {add_b, INT_ROW(add), FLOAT_ROW(add)},
    {NULL, INT_ROW(sub), FLOAT_ROW(sub)},
    {mul_b, INT_ROW(mul), FLOAT_ROW(mul)},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, FLOAT_ROW(div)},
    {add_b, INT_ROW(max), FLOAT_ROW(max)},
    {mul_b, INT_ROW(min), FLOAT_ROW(min)},
};

nv_status nv__k_binary(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  nv__run_fn fn = binary_table[node->prim - NV__PRIM_ADD][out->dtype];
  if (!fn)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported",
                         nv__prims[node->prim].name, nv_dtype_name(out->dtype));
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, 2, fn, NULL);
  return NV_OK;
}

nv_status nv__k_add_multiply(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_dtype dt = node->out[0].dtype;
  nv__run_fn add = binary_table[0][dt], mul = binary_table[2][dt];
  if (!add || !mul)
    return nv__set_error(NV_ERR_UNSUPPORTED, "test_add_multiply: dtype %s", nv_dtype_name(dt));
  if (nv__output_alloc(&node->out[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (nv__output_alloc(&node->out[1]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(&node->out[0], in, 2, add, NULL);
  nv__cpu_map(&node->out[1], in, 2, mul, NULL);
  return NV_OK;
}

/* ---- Unary ---- */

#define UN_FN NV__UN_FN
#define UN_HALF_FN NV__UN_HALF_FN

#define UN_INT_FAMILY(OP, EXPR32, EXPR64)               \
  UN_FN(OP##_u8, uint8_t, uint8_t, (uint8_t)(EXPR32))    \
  UN_FN(OP##_u16, uint16_t, uint16_t, (uint16_t)(EXPR32)) \
  UN_FN(OP##_u32, uint32_t, uint32_t, (uint32_t)(EXPR32)) \
  UN_FN(OP##_u64, uint64_t, uint64_t, (uint64_t)(EXPR64)) \
  UN_FN(OP##_i8, int8_t, int8_t, (int8_t)(EXPR32))       \
  UN_FN(OP##_i16, int16_t, int16_t, (int16_t)(EXPR32))   \
  UN_FN(OP##_i32, int32_t, int32_t, (int32_t)(EXPR32))   \
  UN_FN(OP##_i64, int64_t, int64_t, (int64_t)(EXPR64))

UN_INT_FAMILY(neg, 0u - (unsigned)x, (uint64_t)0 - (uint64_t)x)
/* abs: unsigned values are their own; INT_MIN wraps to itself, as NumPy. */
UN_FN(abs_u8, uint8_t, uint8_t, x)
UN_FN(abs_u16, uint16_t, uint16_t, x)
UN_FN(abs_u32, uint32_t, uint32_t, x)
UN_FN(abs_u64, uint64_t, uint64_t, x)
UN_FN(abs_i8, int8_t, int8_t, (int8_t)(x < 0 ? 0u - (unsigned)x : (unsigned)x))
UN_FN(abs_i16, int16_t, int16_t, (int16_t)(x < 0 ? 0u - (unsigned)x : (unsigned)x))
UN_FN(abs_i32, int32_t, int32_t, (int32_t)(x < 0 ? 0u - (unsigned)x : (unsigned)x))
UN_FN(abs_i64, int64_t, int64_t, (int64_t)(x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x))
UN_FN(abs_b, uint8_t, uint8_t, x)
UN_FN(neg_f32, float, float, -x)
UN_FN(neg_f64, double, double, -x)
UN_FN(neg_c64, cf, cf, -x)
UN_FN(abs_f32, float, float, fabsf(x))
UN_FN(abs_f64, double, double, fabs(x))
UN_FN(abs_c64, float, cf, cabsf(x))
UN_FN(exp_f64, double, double, exp(x))
UN_FN(exp_c64, cf, cf, cexpf(x))
UN_FN(log_f64, double, double, log(x))
UN_FN(log_c64, cf, cf, clogf(x))
UN_FN(sqrt_f32, float, float, sqrtf(x))
UN_FN(sqrt_f64, double, double, sqrt(x))
UN_FN(sqrt_c64, cf, cf, csqrtf(x))

#define UN_HALF_FAMILY(T, LOAD, STORE)                  \
  UN_HALF_FN(neg_##T, LOAD, STORE, -x)                  \
  UN_HALF_FN(abs_##T, LOAD, STORE, fabsf(x))            \
  UN_HALF_FN(sqrt_##T, LOAD, STORE, sqrtf(x))
UN_HALF_FAMILY(f16, nv__f16_to_f32, nv__f32_to_f16)
UN_HALF_FAMILY(bf16, nv__bf16_to_f32, nv__f32_to_bf16)

#define NO_INTS NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
/* Indexed by the input dtype. */
static const nv__run_fn unary_table[5][NV_DTYPE_COUNT] = {
    {NULL, INT_ROW(neg), FLOAT_ROW(neg)},
    {abs_b, INT_ROW(abs), FLOAT_ROW(abs)},
    /* exp, log: float16/bfloat16/float32 from nv__ew_fast_unary (elementwise_fast.c). */
    {NULL, NO_INTS, NULL, NULL, NULL, exp_f64, exp_c64},
    {NULL, NO_INTS, NULL, NULL, NULL, log_f64, log_c64},
    {NULL, NO_INTS, FLOAT_ROW(sqrt)},
};

nv_status nv__k_unary(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  nv__run_fn fn = nv__ew_fast_unary(node->prim, in[0].meta->dtype);
  if (!fn) fn = unary_table[node->prim - NV__PRIM_NEGATIVE][in[0].meta->dtype];
  if (!fn)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported",
                         nv__prims[node->prim].name, nv_dtype_name(in[0].meta->dtype));
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, 1, fn, NULL);
  return NV_OK;
}
