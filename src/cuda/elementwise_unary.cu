/* Generic unary kernels of the real dtypes: one strided kernel per op group and dtype, the
 * primitive chosen at run time (the hot ones have dedicated kernels: elementwise_hot_*.cu). */
#include "cuda/elementwise_device.cuh"

using namespace nvew;

namespace {

const int float_ops[] = {
    NV__PRIM_NEGATIVE, NV__PRIM_ABS,     NV__PRIM_EXP,     NV__PRIM_LOG,      NV__PRIM_SQRT,
    NV__PRIM_SIGN,     NV__PRIM_RECIPROCAL, NV__PRIM_FLOOR, NV__PRIM_CEIL,    NV__PRIM_TRUNC,
    NV__PRIM_ROUND,    NV__PRIM_SQUARE,  NV__PRIM_RSQRT,   NV__PRIM_EXPM1,    NV__PRIM_LOG2,
    NV__PRIM_LOG10,    NV__PRIM_LOG1P,   NV__PRIM_SIN,     NV__PRIM_COS,      NV__PRIM_TAN,
    NV__PRIM_ARCSIN,   NV__PRIM_ARCCOS,  NV__PRIM_ARCTAN,  NV__PRIM_SINH,     NV__PRIM_COSH,
    NV__PRIM_TANH,     NV__PRIM_ARCSINH, NV__PRIM_ARCCOSH, NV__PRIM_ARCTANH,  NV__PRIM_DEGREES,
    NV__PRIM_RADIANS,  NV__PRIM_SIGMOID, NV__PRIM_ERF,     NV__PRIM_ERFINV,   NV__PRIM_NAN_TO_NUM};
const int int_ops[] = {NV__PRIM_NEGATIVE, NV__PRIM_ABS,    NV__PRIM_SIGN,
                       NV__PRIM_ROUND,    NV__PRIM_SQUARE, NV__PRIM_BITWISE_INVERT};
const int bool_ops[] = {NV__PRIM_ABS, NV__PRIM_SQUARE, NV__PRIM_BITWISE_INVERT};
const int test_ops[] = {NV__PRIM_LOGICAL_NOT, NV__PRIM_ISNAN,    NV__PRIM_ISINF,
                        NV__PRIM_ISFINITE,    NV__PRIM_ISPOSINF, NV__PRIM_ISNEGINF};

template <class S>
void set_float(nv__ew_table t, int dt) {
  typedef typename tr<S>::C C;
  nv__ew_entry e = entry1<false, UFloat<C, dyn_op>, S, S>();
  for (int p : float_ops) t[p][dt] = e;
}
template <class T>
void set_int(nv__ew_table t, int dt) {
  nv__ew_entry e = entry1<false, UInt<T, dyn_op>, T, T>();
  for (int p : int_ops) t[p][dt] = e;
}
template <class S>
void set_test(nv__ew_table t, int dt) {
  nv__ew_entry e = entry1<false, UTest<typename tr<S>::C, dyn_op>, uint8_t, S>();
  for (int p : test_ops) t[p][dt] = e;
}

}  // namespace

void nv__ew_fill_unary(nv__ew_table t) {
  set_float<h16>(t, NV_DTYPE_FLOAT16);
  set_float<b16>(t, NV_DTYPE_BFLOAT16);
  set_float<float>(t, NV_DTYPE_FLOAT32);
  set_float<double>(t, NV_DTYPE_FLOAT64);
  set_int<uint8_t>(t, NV_DTYPE_UINT8);
  set_int<uint16_t>(t, NV_DTYPE_UINT16);
  set_int<uint32_t>(t, NV_DTYPE_UINT32);
  set_int<uint64_t>(t, NV_DTYPE_UINT64);
  set_int<int8_t>(t, NV_DTYPE_INT8);
  set_int<int16_t>(t, NV_DTYPE_INT16);
  set_int<int32_t>(t, NV_DTYPE_INT32);
  set_int<int64_t>(t, NV_DTYPE_INT64);
  nv__ew_entry b = entry1<false, UBool<dyn_op>, uint8_t, uint8_t>();
  for (int p : bool_ops) t[p][NV_DTYPE_BOOL] = b;
  set_test<uint8_t>(t, NV_DTYPE_BOOL);
  set_test<uint8_t>(t, NV_DTYPE_UINT8);
  set_test<uint16_t>(t, NV_DTYPE_UINT16);
  set_test<uint32_t>(t, NV_DTYPE_UINT32);
  set_test<uint64_t>(t, NV_DTYPE_UINT64);
  set_test<int8_t>(t, NV_DTYPE_INT8);
  set_test<int16_t>(t, NV_DTYPE_INT16);
  set_test<int32_t>(t, NV_DTYPE_INT32);
  set_test<int64_t>(t, NV_DTYPE_INT64);
  set_test<h16>(t, NV_DTYPE_FLOAT16);
  set_test<b16>(t, NV_DTYPE_BFLOAT16);
  set_test<float>(t, NV_DTYPE_FLOAT32);
  set_test<double>(t, NV_DTYPE_FLOAT64);
}
