/* Dedicated binary kernels (the primitive fixed at compile time; contiguous 16-byte vector
 * path and strided path) for the ops training and inference spend their element-wise time on:
 * arithmetic, maximum/minimum and comparisons on the float dtypes, int32/int64 arithmetic,
 * power on the 16/32-bit floats, and logical and/or of bools. Same semantics as the generic
 * kernels (the shared op functions with a constant primitive). */
#include "cuda/elementwise_device.cuh"

using namespace nvew;

namespace {

template <int P, class S>
void set_float(nv__ew_table t, int dt) {
  t[P][dt] = entry2<true, BFloat<typename tr<S>::C, fix_op<P>>, S, S, S>();
}
template <int P, class S>
void set_pred(nv__ew_table t, int dt) {
  t[P][dt] = entry2<true, BPred<typename tr<S>::C, fix_op<P>>, uint8_t, S, S>();
}
template <int P, class T>
void set_int(nv__ew_table t, int dt) {
  t[P][dt] = entry2<true, BInt<T, fix_op<P>>, T, T, T>();
}

template <int P>
void arith(nv__ew_table t) {
  set_float<P, h16>(t, NV_DTYPE_FLOAT16);
  set_float<P, b16>(t, NV_DTYPE_BFLOAT16);
  set_float<P, float>(t, NV_DTYPE_FLOAT32);
  set_float<P, double>(t, NV_DTYPE_FLOAT64);
}
template <int P>
void arith_int(nv__ew_table t) {
  set_int<P, int32_t>(t, NV_DTYPE_INT32);
  set_int<P, int64_t>(t, NV_DTYPE_INT64);
}
template <int P>
void compare(nv__ew_table t) {
  set_pred<P, h16>(t, NV_DTYPE_FLOAT16);
  set_pred<P, b16>(t, NV_DTYPE_BFLOAT16);
  set_pred<P, float>(t, NV_DTYPE_FLOAT32);
}

}  // namespace

void nv__ew_fill_hot_binary(nv__ew_table t) {
  arith<NV__PRIM_ADD>(t);
  arith<NV__PRIM_SUBTRACT>(t);
  arith<NV__PRIM_MULTIPLY>(t);
  arith<NV__PRIM_DIVIDE>(t);
  arith<NV__PRIM_MAXIMUM>(t);
  arith<NV__PRIM_MINIMUM>(t);
  arith_int<NV__PRIM_ADD>(t);
  arith_int<NV__PRIM_SUBTRACT>(t);
  arith_int<NV__PRIM_MULTIPLY>(t);
  arith_int<NV__PRIM_MAXIMUM>(t);
  arith_int<NV__PRIM_MINIMUM>(t);
  compare<NV__PRIM_EQUAL>(t);
  compare<NV__PRIM_NOT_EQUAL>(t);
  compare<NV__PRIM_GREATER>(t);
  compare<NV__PRIM_GREATER_EQUAL>(t);
  compare<NV__PRIM_LESS>(t);
  compare<NV__PRIM_LESS_EQUAL>(t);
  set_float<NV__PRIM_POWER, h16>(t, NV_DTYPE_FLOAT16);
  set_float<NV__PRIM_POWER, b16>(t, NV_DTYPE_BFLOAT16);
  set_float<NV__PRIM_POWER, float>(t, NV_DTYPE_FLOAT32);
  set_pred<NV__PRIM_LOGICAL_AND, uint8_t>(t, NV_DTYPE_BOOL);
  set_pred<NV__PRIM_LOGICAL_OR, uint8_t>(t, NV_DTYPE_BOOL);
}
