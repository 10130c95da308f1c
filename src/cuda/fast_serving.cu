/* The serving kernels on the GPU (the CPU kernels' formulas, src/cpu/fast_serving.c).
 *
 * sorted_offsets: a thread per offset g, a binary search of the ids for the first id >= g (as
 * the CPU's). causal_softmax: one row per group of threads (a warp up to a block of 1024),
 * three passes over the row's seen columns (the maximum, NaN propagating; the sum of
 * exponentials; the write), the later passes reading the row from L1/L2, and zeros written to
 * the unseen columns. float32 computes float16, bfloat16 and float32; float64 float64. Each
 * element is read and written by one thread only, so the output may be the input (donated).
 * paged_write: a thread per element of each token's row, copied to the row of its slot
 * (negative: skipped; past the pool: the node's index check raised, nothing written).
 * conv_slots: a thread per (sequence, channel), its window's weighted sum and the state shift
 * (each thread owns its slot's channel: the pool may be written in place).
 * 64-bit indices throughout. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/fast_serving_kernels.h"

using namespace nvg;

namespace {

/* ---- sorted_offsets ---- */

template <class T>
__global__ void k_sorted_offsets(void *out0, const T *ids0, nv__gpu_offsets_params p) {
  const T *ids = ids0 + p.off[1];
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < p.nout; g += step) {
    const T v = (T)g; /* g < 2^31 fits every ids dtype */
    int64_t lo = 0, hi = p.n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (ids[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (p.wide)
      static_cast<int64_t *>(out0)[p.off[0] + g] = lo;
    else
      static_cast<int32_t *>(out0)[p.off[0] + g] = (int32_t)lo;
  }
}

/* ---- causal_softmax ---- */

template <int DT> using at = cio<DT>; /* convert.cuh */

__device__ __forceinline__ float exp_c(float v) { return expf(v); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double exp_c(double v) { return exp(v); }

/* The larger of a and b, NaN when either is. */
template <class C> __device__ __forceinline__ C max_nan(C a, C b) {
  return a > b || a != a ? a : b;
}

struct op_sum {
  template <class C> __device__ __forceinline__ C operator()(C a, C b) const { return a + b; }
};
struct op_max {
  template <class C> __device__ __forceinline__ C operator()(C a, C b) const {
    return max_nan(a, b);
  }
};

/* v combined over the row's threads (threadIdx.x), the same value in each. Every thread of the
 * block calls it the same number of times (inactive rows included): it synchronizes the block
 * when a row has several warps. red holds one slot per warp of the block (<= 32). */
template <class C, class Op> __device__ __forceinline__ C row_reduce(C v, C *red, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int nw = blockDim.x >> 5;
  if (nw == 1) return v;
  const int base = threadIdx.y * nw;
  if ((threadIdx.x & 31) == 0) red[base + (threadIdx.x >> 5)] = v;
  __syncthreads();
  C t = red[base];
  for (int i = 1; i < nw; i++) t = op(t, red[base + i]);
  __syncthreads(); /* every thread has read red before the next reduction writes it */
  return t;
}

template <int DT>
__global__ void __launch_bounds__(1024)
    k_causal_softmax(typename at<DT>::S *y0, const typename at<DT>::S *x0,
                     nv__gpu_causal_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  __shared__ C red[32];
  const int64_t tpr = blockDim.x, c = p.c;
  /* Row groups grid-stride: the trip count depends on blockIdx only (uniform in the block). */
  for (int64_t grp = blockIdx.x; grp * blockDim.y < p.nrows; grp += gridDim.x) {
    const int64_t row = grp * blockDim.y + threadIdx.y;
    const bool active = row < p.nrows;
    const int64_t r = active ? row : 0;
    int64_t k = c - p.rows + r % p.rows + 1; /* columns seen */
    k = k < 0 ? 0 : k > c ? c : k;
    if (!active) k = 0;
    const S *x = x0 + p.off[1] + r * c;
    S *y = y0 + p.off[0] + r * c;
    C m = -INFINITY;
    for (int64_t i = threadIdx.x; i < k; i += tpr) m = max_nan(m, A::ld(x[i]));
    m = row_reduce(m, red, op_max());
    C s = 0;
    for (int64_t i = threadIdx.x; i < k; i += tpr) s += exp_c(A::ld(x[i]) - m);
    s = row_reduce(s, red, op_sum());
    if (!active) continue;
    const C inv = (C)1 / s;
    for (int64_t i = threadIdx.x; i < k; i += tpr) y[i] = A::st(exp_c(A::ld(x[i]) - m) * inv);
    for (int64_t i = k + threadIdx.x; i < c; i += tpr) y[i] = A::st((C)0);
  }
}

/* ---- paged_write ---- */

template <class W>
__global__ void k_paged_write(W *out0, const W *val0, const void *slots0, nv__gpu_paged_params p) {
  W *out = out0 + p.off[0];
  const W *val = val0 + p.off[1];
  const int64_t rowp = p.row > 0 ? p.row : 1;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.items; i += step) {
    const int64_t t = i / rowp, j = i - t * rowp;
    const int64_t s = p.slots64 ? static_cast<const int64_t *>(slots0)[p.off[2] + t]
                                : (int64_t) static_cast<const int32_t *>(slots0)[p.off[2] + t];
    if (s < 0) continue; /* padding: skipped */
    if (s >= p.nslots) {
      if (j == 0) nv__gpu_raise_bad(p.bad, s, p.nslots);
      continue;
    }
    if (p.row > 0) out[s * p.row + j] = val[t * p.row + j];
  }
}

/* ---- conv_slots ---- */

__device__ __forceinline__ float silu_c(float v) { return v / (1.0f + expf(-v)); }
__device__ __forceinline__ double silu_c(double v) { return v / (1.0 + exp(-v)); }

/* Thread (n, c): the window (the slot's K - 1 states, then x[n, c]) against weight[c], the
 * bias and silu into y[n, c]; then the state shifted down by one with x last. Products and
 * sums are rounded separately (no contraction), as the CPU computes them. */
template <int DT>
__global__ void k_conv_slots(typename at<DT>::S *pool0, typename at<DT>::S *y0,
                             const typename at<DT>::S *x0, const typename at<DT>::S *w0,
                             const void *slots0, const typename at<DT>::S *b0,
                             nv__gpu_conv_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  S *pool = pool0 + p.off[0], *y = y0 + p.off[1];
  const S *x = x0 + p.off[2], *w = w0 + p.off[3], *b = b0 + p.off[5];
  const int64_t step = (int64_t)gridDim.x * blockDim.x, k = p.k;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.items; i += step) {
    const int64_t n = i / p.c, c = i - n * p.c;
    const int64_t s = p.slots64 ? static_cast<const int64_t *>(slots0)[p.off[4] + n]
                                : (int64_t) static_cast<const int32_t *>(slots0)[p.off[4] + n];
    if (s < 0 || s >= p.nslots) {
      if (s >= p.nslots && c == 0) nv__gpu_raise_bad(p.bad, s, p.nslots);
      y[i] = A::st((C)0);
      continue;
    }
    S *state = pool + (s * p.c + c) * (k - 1);
    const S xs = x[i];
    C acc = 0;
    for (int64_t t = 0; t < k; t++) {
      const C v = A::ld(t < k - 1 ? state[t] : xs);
      acc = add_rn(acc, mul_rn(A::ld(w[c * k + t]), v));
    }
    if (p.has_bias) acc = add_rn(acc, A::ld(b[c]));
    if (p.silu) acc = silu_c(acc);
    y[i] = A::st(acc);
    for (int64_t t = 0; t + 1 < k - 1; t++) state[t] = state[t + 1];
    if (k > 1) state[k - 2] = xs;
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_conv_slots(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_conv_slots<DT_F16>;
    case DT_BF16: return (const void *)&k_conv_slots<DT_BF16>;
    case DT_F32: return (const void *)&k_conv_slots<DT_F32>;
    case DT_F64: return (const void *)&k_conv_slots<DT_F64>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_paged_write(int elem_size) {
  switch (elem_size) {
    case 1: return (const void *)&k_paged_write<uint8_t>;
    case 2: return (const void *)&k_paged_write<uint16_t>;
    case 4: return (const void *)&k_paged_write<uint32_t>;
    case 8: return (const void *)&k_paged_write<uint64_t>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_sorted_offsets(int dtype) {
  switch (dtype) {
    case DT_I32: return (const void *)&k_sorted_offsets<int32_t>;
    case DT_I64: return (const void *)&k_sorted_offsets<int64_t>;
    case DT_U32: return (const void *)&k_sorted_offsets<uint32_t>;
    case DT_U64: return (const void *)&k_sorted_offsets<uint64_t>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_causal_softmax(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_causal_softmax<DT_F16>;
    case DT_BF16: return (const void *)&k_causal_softmax<DT_BF16>;
    case DT_F32: return (const void *)&k_causal_softmax<DT_F32>;
    case DT_F64: return (const void *)&k_causal_softmax<DT_F64>;
    default: return NULL;
  }
}
