/* Generic binary kernels of the real dtypes: one strided kernel per op group and dtype, the
 * primitive chosen at run time (the hot ones have dedicated kernels: elementwise_hot_*.cu). */
#include "cuda/elementwise_device.cuh"

using namespace nvew;

namespace {

const int float_ops[] = {NV__PRIM_ADD,          NV__PRIM_SUBTRACT,  NV__PRIM_MULTIPLY,
                         NV__PRIM_DIVIDE,       NV__PRIM_MAXIMUM,   NV__PRIM_MINIMUM,
                         NV__PRIM_FLOOR_DIVIDE, NV__PRIM_REMAINDER, NV__PRIM_POWER,
                         NV__PRIM_ARCTAN2,      NV__PRIM_LOGADDEXP};
const int int_ops[] = {NV__PRIM_ADD,         NV__PRIM_SUBTRACT,     NV__PRIM_MULTIPLY,
                       NV__PRIM_MAXIMUM,     NV__PRIM_MINIMUM,      NV__PRIM_FLOOR_DIVIDE,
                       NV__PRIM_REMAINDER,   NV__PRIM_POWER,        NV__PRIM_BITWISE_AND,
                       NV__PRIM_BITWISE_OR,  NV__PRIM_BITWISE_XOR,  NV__PRIM_LEFT_SHIFT,
                       NV__PRIM_RIGHT_SHIFT};
const int bool_ops[] = {NV__PRIM_ADD,          NV__PRIM_MULTIPLY,    NV__PRIM_MAXIMUM,
                        NV__PRIM_MINIMUM,      NV__PRIM_FLOOR_DIVIDE, NV__PRIM_REMAINDER,
                        NV__PRIM_POWER,        NV__PRIM_BITWISE_AND, NV__PRIM_BITWISE_OR,
                        NV__PRIM_BITWISE_XOR};
const int pred_ops[] = {NV__PRIM_EQUAL,        NV__PRIM_NOT_EQUAL,  NV__PRIM_GREATER,
                        NV__PRIM_GREATER_EQUAL, NV__PRIM_LESS,      NV__PRIM_LESS_EQUAL,
                        NV__PRIM_LOGICAL_AND,  NV__PRIM_LOGICAL_OR, NV__PRIM_LOGICAL_XOR,
                        NV__PRIM_ISCLOSE};

template <class S>
void set_float(nv__ew_table t, int dt) {
  nv__ew_entry e = entry2<false, BFloat<typename tr<S>::C, dyn_op>, S, S, S>();
  for (int p : float_ops) t[p][dt] = e;
}
template <class T>
void set_int(nv__ew_table t, int dt) {
  nv__ew_entry e = entry2<false, BInt<T, dyn_op>, T, T, T>();
  for (int p : int_ops) t[p][dt] = e;
}
template <class S>
void set_pred(nv__ew_table t, int dt) {
  nv__ew_entry e = entry2<false, BPred<typename tr<S>::C, dyn_op>, uint8_t, S, S>();
  for (int p : pred_ops) t[p][dt] = e;
}

}  // namespace

void nv__ew_fill_binary(nv__ew_table t) {
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
  nv__ew_entry b = entry2<false, BBool<dyn_op>, uint8_t, uint8_t, uint8_t>();
  for (int p : bool_ops) t[p][NV_DTYPE_BOOL] = b;
  set_pred<uint8_t>(t, NV_DTYPE_BOOL);
  set_pred<uint8_t>(t, NV_DTYPE_UINT8);
  set_pred<uint16_t>(t, NV_DTYPE_UINT16);
  set_pred<uint32_t>(t, NV_DTYPE_UINT32);
  set_pred<uint64_t>(t, NV_DTYPE_UINT64);
  set_pred<int8_t>(t, NV_DTYPE_INT8);
  set_pred<int16_t>(t, NV_DTYPE_INT16);
  set_pred<int32_t>(t, NV_DTYPE_INT32);
  set_pred<int64_t>(t, NV_DTYPE_INT64);
  set_pred<h16>(t, NV_DTYPE_FLOAT16);
  set_pred<b16>(t, NV_DTYPE_BFLOAT16);
  set_pred<float>(t, NV_DTYPE_FLOAT32);
  set_pred<double>(t, NV_DTYPE_FLOAT64);
}
