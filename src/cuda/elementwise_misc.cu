/* where (by element size, contiguous and strided), allclose/array_equal of the real dtypes,
 * and the creation kernels: tri, the windows, and a few bytes (number_of_elements). */
#include "cuda/elementwise_device.cuh"

using namespace nvew;

namespace {

template <class S>
void set_all(nv__ew_table t, int dt) {
  typedef BPred<typename tr<S>::C, dyn_op> F;
  nv__ew_entry e = {nullptr, (const void *)k_allclose<F, S>, 0};
  t[NV__PRIM_ALLCLOSE][dt] = e;
  t[NV__PRIM_ARRAY_EQUAL][dt] = e;
}

/* tri: out[i] = one where column - row <= k. */
template <class T>
__global__ void __launch_bounds__(NV__EW_BLOCK) k_tri(T *o, nv__ew_params p) {
  const int64_t n = p.n, cols = p.extra.tri.cols, k = p.extra.tri.k;
  const T one = (T)p.extra.tri.one;
  o += p.off[0];
  for (int64_t i = (int64_t)blockIdx.x * NV__EW_BLOCK + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * NV__EW_BLOCK) {
    const int64_t r = i / cols, c = i - r * cols;
    o[i] = c - r <= k ? one : (T)0;
  }
}

/* NumPy's windows over n = 1 - m, 3 - m, ..., m - 1, in double, rounded once to float32
 * (the CPU's formula, unfused). */
__global__ void __launch_bounds__(NV__EW_BLOCK) k_window(float *o, nv__ew_params p) {
  const int64_t m = p.n;
  o += p.off[0];
  for (int64_t i = (int64_t)blockIdx.x * NV__EW_BLOCK + threadIdx.x; i < m;
       i += (int64_t)gridDim.x * NV__EW_BLOCK) {
    double v;
    if (m == 1) {
      v = 1.0;
    } else {
      double n = (double)(1 - m + 2 * i), t = NV__EW_PI * n / (double)(m - 1);
      switch (p.op) {
        case NV__PRIM_HANNING: v = __dadd_rn(0.5, __dmul_rn(0.5, cos(t))); break;
        case NV__PRIM_HAMMING: v = __dadd_rn(0.54, __dmul_rn(0.46, cos(t))); break;
        case NV__PRIM_BARTLETT: v = n <= 0 ? 1 + n / (double)(m - 1) : 1 - n / (double)(m - 1); break;
        default:
          v = __dadd_rn(__dadd_rn(0.42, __dmul_rn(0.5, cos(t))), __dmul_rn(0.08, cos(2 * t)));
          break;
      }
    }
    o[i] = (float)v;
  }
}

/* The first n (<= 8) bytes of extra.tri.one, little-endian. */
__global__ void k_bytes(uint8_t *o, nv__ew_params p) {
  const uint64_t v = p.extra.tri.one;
  o += p.off[0];
  for (int64_t i = threadIdx.x; i < p.n && i < 8; i += blockDim.x) o[i] = (uint8_t)(v >> (8 * i));
}

}  // namespace

void nv__ew_fill_misc(nv__ew_table t) {
  static const int sizes[NV_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8};
  const nv__ew_entry w1 = entry3<true, Where, uint8_t, uint8_t, uint8_t, uint8_t>();
  const nv__ew_entry w2 = entry3<true, Where, uint16_t, uint8_t, uint16_t, uint16_t>();
  const nv__ew_entry w4 = entry3<true, Where, uint32_t, uint8_t, uint32_t, uint32_t>();
  const nv__ew_entry w8 = entry3<true, Where, uint64_t, uint8_t, uint64_t, uint64_t>();
  for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) {
    int s = sizes[dt];
    t[NV__PRIM_WHERE][dt] = s == 1 ? w1 : s == 2 ? w2 : s == 4 ? w4 : w8;
  }
  set_all<uint8_t>(t, NV_DTYPE_BOOL);
  set_all<uint8_t>(t, NV_DTYPE_UINT8);
  set_all<uint16_t>(t, NV_DTYPE_UINT16);
  set_all<uint32_t>(t, NV_DTYPE_UINT32);
  set_all<uint64_t>(t, NV_DTYPE_UINT64);
  set_all<int8_t>(t, NV_DTYPE_INT8);
  set_all<int16_t>(t, NV_DTYPE_INT16);
  set_all<int32_t>(t, NV_DTYPE_INT32);
  set_all<int64_t>(t, NV_DTYPE_INT64);
  set_all<h16>(t, NV_DTYPE_FLOAT16);
  set_all<b16>(t, NV_DTYPE_BFLOAT16);
  set_all<float>(t, NV_DTYPE_FLOAT32);
  set_all<double>(t, NV_DTYPE_FLOAT64);
}

const void *nv__ew_tri_kernel(int log2_size) {
  switch (log2_size) {
    case 0: return (const void *)k_tri<uint8_t>;
    case 1: return (const void *)k_tri<uint16_t>;
    case 2: return (const void *)k_tri<uint32_t>;
    default: return (const void *)k_tri<uint64_t>;
  }
}
const void *nv__ew_window_kernel(void) { return (const void *)k_window; }
const void *nv__ew_bytes_kernel(void) { return (const void *)k_bytes; }
