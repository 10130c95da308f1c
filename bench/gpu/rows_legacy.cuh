/* The register row kernel as it was before the sweep (main at f4f86fb, src/cuda/reduce_rows.cu
 * rows_fast): `group` threads per row (a power of two, 1..512), 4 16-byte loads a thread,
 * the maximum and then the sum of exponentials reduced over the group (shared memory and
 * __syncthreads past a warp; sums in float64 across threads), the exponentials computed
 * again for the output, launch bounds (512, 2). Blocks of max(group, 128) threads (group
 * 128 when the group is at most 32), a grid of at most two waves of 2048 threads a
 * multiprocessor. bench/gpu/rows_sweep.cu runs it as the "cur" candidate. */
#ifndef NUVEC_BENCH_ROWS_LEGACY_CUH
#define NUVEC_BENCH_ROWS_LEGACY_CUH

#include "cuda/reduce_common.cuh"

namespace legacy {
using namespace nvred;
typedef nv__rows_fast_params RP;

template <class T>
__device__ __forceinline__ float ex(float x) {
  return expf(x);
}
template <>
__device__ __forceinline__ float ex<__half>(float x) {
  return __expf(x);
}
template <>
__device__ __forceinline__ float ex<__nv_bfloat16>(float x) {
  return __expf(x);
}
__device__ __forceinline__ double exd(double x) { return exp(x); }

template <class T>
struct Work {
  typedef float W;
  static __device__ __forceinline__ W e(W x) { return ex<T>(x); }
  static __device__ __forceinline__ T out(W v) { return from_float<T>(v); }
};
template <>
struct Work<double> {
  typedef double W;
  static __device__ __forceinline__ W e(W x) { return exd(x); }
  static __device__ __forceinline__ double out(W v) { return v; }
};

struct MaxNan {
  template <class W>
  __device__ __forceinline__ W operator()(W a, W b) const {
    return b > a || b != b ? b : a;
  }
};
struct Add {
  __device__ __forceinline__ double operator()(double a, double b) const { return a + b; }
};

/* Elements a thread of the row kernels holds: four 16-byte loads' worth, so that few threads
 * share a row (the reductions over the group cost little beside the elements' work) and many
 * rows are in flight on each multiprocessor. */
template <class T>
struct Held {
  static constexpr int VW = 16 / sizeof(T); /* elements of one 16-byte load */
  static constexpr int VPT = 4 * VW;
};

template <class T, bool SOFTMAX>
__global__ void __launch_bounds__(512, 2)
    rows_fast(const void *in_, void *out_, const void *, const __grid_constant__ RP p) {
  typedef typename Work<T>::W W;
  constexpr int VW = Held<T>::VW, VPT = Held<T>::VPT, NV = VPT / VW;
  __shared__ W smw[32];
  __shared__ double smd[32];
  const int G = p.group;
  const int rpb = blockDim.x / G, g = threadIdx.x / G, lane = threadIdx.x & (G - 1);
  const T *in = (const T *)in_ + p.in_off;
  T *out = (T *)out_ + p.out_off;
  const int64_t n = p.n;
  const int64_t stride = (int64_t)gridDim.x * rpb;
  const W NEG = -INFINITY;
  /* 16-byte loads and stores where every row is aligned (uniform over the launch). */
  const bool vec =
      p.vec && ((uintptr_t)in & 15) == 0 && (SOFTMAX ? ((uintptr_t)out & 15) == 0 : true);
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < p.nrows; base += stride) {
    const int64_t row = base + g;
    const bool valid = row < p.nrows;
    const T *x = in + (valid ? walk_offset(p.kshape, p.kst, p.nk, row) : 0);
    T *y = out + (valid ? row * n : 0);
    W m;
    double s;
    /* The row in registers, in its own dtype: element k * G + lane (vec: 16-byte piece
     * k * G + lane) of each thread's VPT. */
    T raw[VPT];
    const int ni = valid ? (int)n : 0; /* at most 1024 * VPT: int indices */
    auto held = [&](int k) {             /* whether raw[k] is an element of the row */
      return vec ? ((k / VW) * G + lane) * VW < ni : k * G + lane < ni;
    };
    if (vec) {
#pragma unroll
      for (int k = 0; k < NV; k++) {
        int e0 = (k * G + lane) * VW;
        if (e0 < ni) {
          uint4 v = ld16(x + e0);
          memcpy(&raw[k * VW], &v, sizeof v);
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < VPT; k++)
        if (k * G + lane < ni) raw[k] = ld(x + k * G + lane);
    }
    /* The row's maximum, then its sum of exp(x - max): two reductions of one value. */
    W mt = NEG;
#pragma unroll
    for (int k = 0; k < VPT; k++)
      if (held(k)) mt = MaxNan()(mt, to_float(raw[k]));
    m = group_reduce(mt, G, MaxNan(), smw);
    W t = 0;
    if (isfinite(m))
#pragma unroll
      for (int k = 0; k < VPT; k++)
        if (held(k)) t += Work<T>::e(to_float(raw[k]) - m);
    s = group_reduce((double)t, G, Add(), smd);
    if (SOFTMAX) {
      if (!valid) continue;
      const bool bad = !isfinite(m);
      const W inv = bad ? (W)NAN : (W)(1.0 / s);
      if (vec) {
#pragma unroll
        for (int k = 0; k < NV; k++) {
          int e0 = (k * G + lane) * VW;
          if (e0 < ni) {
            T o[VW];
#pragma unroll
            for (int j = 0; j < VW; j++)
              o[j] = Work<T>::out(bad ? (W)NAN : Work<T>::e(to_float(raw[k * VW + j]) - m) * inv);
            uint4 v;
            memcpy(&v, o, sizeof v);
            *(uint4 *)(y + e0) = v;
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < VPT; k++)
          if (k * G + lane < ni)
            y[k * G + lane] = Work<T>::out(bad ? (W)NAN : Work<T>::e(to_float(raw[k]) - m) * inv);
      }
      continue;
    }
    /* logsumexp's float64 result rounds once to the row's dtype. */
    if (!SOFTMAX && valid && lane == 0)
      store_real(out, row, p.dtype, isfinite(m) ? (double)m + log(s) : (double)m);
  }
}

}  // namespace legacy

#endif
