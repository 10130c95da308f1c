/* Dedicated unary kernels (the primitive fixed at compile time; contiguous 16-byte vector path
 * and strided path) for the hot unary ops of float16/bfloat16/float32, and logical_not of
 * bool. Same semantics as the generic kernels (the shared op functions with a constant
 * primitive). */
#include "cuda/elementwise_device.cuh"

using namespace nvew;

namespace {

template <int P, class S>
void set1(nv__ew_table t, int dt) {
  t[P][dt] = entry1<true, UFloat<typename tr<S>::C, fix_op<P>>, S, S>();
}
template <int P>
void floats(nv__ew_table t) {
  set1<P, h16>(t, NV_DTYPE_FLOAT16);
  set1<P, b16>(t, NV_DTYPE_BFLOAT16);
  set1<P, float>(t, NV_DTYPE_FLOAT32);
}

}  // namespace

void nv__ew_fill_hot_unary(nv__ew_table t) {
  floats<NV__PRIM_NEGATIVE>(t);
  floats<NV__PRIM_ABS>(t);
  floats<NV__PRIM_EXP>(t);
  floats<NV__PRIM_LOG>(t);
  floats<NV__PRIM_SQRT>(t);
  floats<NV__PRIM_SQUARE>(t);
  floats<NV__PRIM_RSQRT>(t);
  floats<NV__PRIM_RECIPROCAL>(t);
  floats<NV__PRIM_SIGMOID>(t);
  floats<NV__PRIM_TANH>(t);
  floats<NV__PRIM_SIN>(t);
  floats<NV__PRIM_COS>(t);
  floats<NV__PRIM_ERF>(t);
  t[NV__PRIM_LOGICAL_NOT][NV_DTYPE_BOOL] =
      entry1<true, UTest<uint8_t, fix_op<NV__PRIM_LOGICAL_NOT>>, uint8_t, uint8_t>();
}
