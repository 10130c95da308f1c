/* gated_delta_slots on the GPU (the CPU kernel's formulas, src/cpu/fast_delta.c). Every state
 * column j (Dk values) evolves on its own given the token's k, q, v[j], g and beta:
 *   M[:, j] *= exp(g);  u = (v[j] - M[:, j] . k) beta;  M[:, j] += k u;  o[j] = scale M[:, j] . q
 * so a block item is a (sequence, value head, chunk of columns) and needs no other block.
 *
 * Register kernel (Dk <= 1024): `lanes` consecutive threads of a warp share a column, each
 * holding rows lane + lanes * r (r < 32) in registers (zeros past Dk); the two dot products sum
 * over the lanes with xor shuffles. The token's k and q go through shared memory (one load a
 * block, stored so that a thread's rows sit at its lane plus compile-time offsets: no bank
 * conflicts, no address registers). The state
 * is read from the pool once and written once, in the compute type in between (float32, float64
 * when o or the pool is float64), as the CPU's. Wide kernel (any Dk): a thread a column, the
 * column in compute-type scratch memory between the pool's read and write. Padding slots
 * (negative) give o = 0 and leave the pool; slots past the pool raise the node's index check.
 * Two sequences on one slot race (an unspecified state, as documented). 64-bit indices. */
#include <stdint.h>

#include <type_traits>

#include "cuda/convert.cuh"
#include "cuda/fast_state_kernels.h"

using namespace nvg;

namespace {

template <int DT> using at = cio<DT>; /* convert.cuh */

__device__ __forceinline__ float exp_c(float v) { return expf(v); }
__device__ __forceinline__ double exp_c(double v) { return exp(v); }

/* The slot of sequence n. */
__device__ __forceinline__ int64_t slot_at(const void *slots, const nv__gpu_delta_params &p,
                                           int64_t n) {
  return p.slots64 ? static_cast<const int64_t *>(slots)[p.off[7] + n]
                   : (int64_t) static_cast<const int32_t *>(slots)[p.off[7] + n];
}

/* The sum of v over the `lanes` consecutive threads of a column (a power of two <= 32). */
template <class C> __device__ __forceinline__ C lanes_sum(C v, int lanes) {
  for (int o = 1; o < lanes; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int DT, int SDT>
using compute_t = typename std::conditional<DT == DT_F64 || SDT == DT_F64, double, float>::type;

/* Blocks an SM of the register kernel: registers capped (128) so that two fit when computing
 * in float32 (one in float64); the addresses of a thread's 32 state rows are recomputed for the
 * final store rather than held across the token loop. */
template <int DT, int SDT> constexpr int delta_min_blocks() {
  return DT == DT_F64 || SDT == DT_F64 ? 1 : 2;
}

template <int DT, int SDT>
__global__ void __launch_bounds__(NV__GPU_DELTA_THREADS, (delta_min_blocks<DT, SDT>()))
    k_delta_regs(typename at<SDT>::S *pool0, typename at<DT>::S *o0,
                 const typename at<DT>::S *q0, const typename at<DT>::S *k0,
                 const typename at<DT>::S *v0, const compute_t<DT, SDT> *g0,
                 const compute_t<DT, SDT> *b0, const void *slots, const void *unused,
                 nv__gpu_delta_params p) {
  (void)unused;
  typedef at<DT> A;
  typedef at<SDT> SA;
  typedef compute_t<DT, SDT> C;
  constexpr int R = NV__GPU_DELTA_ROWS;
  __shared__ C sk[NV__GPU_DELTA_MAX_DK], sq[NV__GPU_DELTA_MAX_DK];
  typename SA::S *pool = pool0 + p.off[0];
  typename A::S *o = o0 + p.off[1];
  const typename A::S *q = q0 + p.off[2], *k = k0 + p.off[3], *v = v0 + p.off[4];
  const C *g = g0 + p.off[5], *beta = b0 + p.off[6];
  const int lanes = (int)p.lanes, lane = (int)threadIdx.x & (lanes - 1);
  const int64_t cols = NV__GPU_DELTA_THREADS / lanes, dk = p.dk, dv = p.dv, hv = p.hv;
  const int64_t rep = hv / p.hk;
  const C scale = (C)p.scale;
  for (int64_t item = blockIdx.x; item < p.items; item += gridDim.x) {
    const int64_t chunk = item % p.nchunks, nh = item / p.nchunks;
    const int64_t n = nh / hv, h = nh - n * hv, hq = h / rep;
    const int64_t j = chunk * cols + threadIdx.x / lanes;
    const bool col = j < dv, writer = col && lane == 0;
    const int64_t s = slot_at(slots, p, n); /* uniform over the block */
    if (s < 0 || s >= p.nslots) {
      if (s >= p.nslots && chunk == 0 && threadIdx.x == 0) nv__gpu_raise_bad(p.bad, s, p.nslots);
      if (writer)
        for (int64_t t = 0; t < p.t; t++) o[((n * p.t + t) * hv + h) * dv + j] = A::st(0);
      continue;
    }
    /* This thread's rows lane + lanes * r, r < nr (<= R), of column j: element r at
     * sp[(uint32_t)r * step]. 32-bit row indices (dk <= 1024). */
    const int nr = col && dk > lane ? (int)((dk - lane + lanes - 1) / lanes) : 0;
    typename SA::S *sp = pool + (s * hv + h) * dk * dv + (int64_t)lane * dv + (col ? j : 0);
    const uint32_t step = (uint32_t)(lanes * dv); /* dk * dv < 2^31 (the host checks) */
    C m[R];
#pragma unroll
    for (int r = 0; r < R; r++) m[r] = r < nr ? (C)SA::ld(sp[(uint32_t)r * step]) : (C)0;
    for (int64_t t = 0; t < p.t; t++) {
      const int64_t at_qk = ((n * p.t + t) * p.hk + hq) * dk, at_v = ((n * p.t + t) * hv + h);
      __syncthreads(); /* the previous token's k and q have been read */
      /* row i = l + lanes * r (the rows thread lane l holds) at r * 32 + l: a thread's reads
       * are then its lane plus compile-time offsets */
      for (int i = threadIdx.x; i < dk; i += NV__GPU_DELTA_THREADS) {
        const int at_i = (i / lanes) * 32 + (i % lanes);
        sk[at_i] = (C)A::ld(k[at_qk + i]);
        sq[at_i] = (C)A::ld(q[at_qk + i]);
      }
      __syncthreads();
      const C e = exp_c(g[at_v]), b = beta[at_v];
      C kv = 0;
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (r < nr) {
          m[r] *= e;
          kv += m[r] * sk[lane + 32 * r];
        }
      }
      kv = lanes_sum(kv, lanes);
      const C u = ((col ? (C)A::ld(v[at_v * dv + j]) : (C)0) - kv) * b;
      C acc = 0;
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (r < nr) {
          m[r] += sk[lane + 32 * r] * u;
          acc += m[r] * sq[lane + 32 * r];
        }
      }
      acc = lanes_sum(acc, lanes);
      if (writer) o[at_v * dv + j] = A::st(acc * scale);
    }
    /* The same addresses, recomputed here: an opaque copy of the base keeps the compiler from
     * holding the 32 row addresses in registers across the token loop. */
    typename SA::S *wp = sp;
    asm volatile("" : "+l"(wp));
#pragma unroll
    for (int r = 0; r < R; r++)
      if (r < nr) wp[(uint32_t)r * step] = SA::st(m[r]);
  }
}

template <int DT, int SDT>
__global__ void __launch_bounds__(NV__GPU_DELTA_THREADS)
    k_delta_wide(typename at<SDT>::S *pool0, typename at<DT>::S *o0,
                 const typename at<DT>::S *q0, const typename at<DT>::S *k0,
                 const typename at<DT>::S *v0, const compute_t<DT, SDT> *g0,
                 const compute_t<DT, SDT> *b0, const void *slots, compute_t<DT, SDT> *scratch,
                 nv__gpu_delta_params p) {
  typedef at<DT> A;
  typedef at<SDT> SA;
  typedef compute_t<DT, SDT> C;
  typename SA::S *pool = pool0 + p.off[0];
  typename A::S *o = o0 + p.off[1];
  const typename A::S *q = q0 + p.off[2], *k = k0 + p.off[3], *v = v0 + p.off[4];
  const C *g = g0 + p.off[5], *beta = b0 + p.off[6];
  const int64_t dk = p.dk, dv = p.dv, hv = p.hv, rep = hv / p.hk;
  const C scale = (C)p.scale;
  for (int64_t item = blockIdx.x; item < p.items; item += gridDim.x) {
    const int64_t chunk = item % p.nchunks, nh = item / p.nchunks;
    const int64_t n = nh / hv, h = nh - n * hv, hq = h / rep;
    const int64_t j = chunk * NV__GPU_DELTA_THREADS + threadIdx.x;
    if (j >= dv) continue;
    const int64_t s = slot_at(slots, p, n);
    if (s < 0 || s >= p.nslots) {
      if (s >= p.nslots && chunk == 0 && threadIdx.x == 0) nv__gpu_raise_bad(p.bad, s, p.nslots);
      for (int64_t t = 0; t < p.t; t++) o[((n * p.t + t) * hv + h) * dv + j] = A::st(0);
      continue;
    }
    typename SA::S *state = pool + (s * hv + h) * dk * dv;
    C *m = scratch + nh * dk * dv;
    for (int64_t i = 0; i < dk; i++) m[i * dv + j] = (C)SA::ld(state[i * dv + j]);
    for (int64_t t = 0; t < p.t; t++) {
      const int64_t at_qk = ((n * p.t + t) * p.hk + hq) * dk, at_v = ((n * p.t + t) * hv + h);
      const C e = exp_c(g[at_v]), b = beta[at_v];
      C kv = 0;
      for (int64_t i = 0; i < dk; i++) {
        const C x = m[i * dv + j] * e;
        m[i * dv + j] = x;
        kv += x * (C)A::ld(k[at_qk + i]);
      }
      const C u = ((C)A::ld(v[at_v * dv + j]) - kv) * b;
      C acc = 0;
      for (int64_t i = 0; i < dk; i++) {
        const C x = m[i * dv + j] + (C)A::ld(k[at_qk + i]) * u;
        m[i * dv + j] = x;
        acc += x * (C)A::ld(q[at_qk + i]);
      }
      o[at_v * dv + j] = A::st(acc * scale);
    }
    for (int64_t i = 0; i < dk; i++) state[i * dv + j] = SA::st(m[i * dv + j]);
  }
}

template <int DT, int SDT> const void *delta_kernel(int wide) {
  return wide ? (const void *)&k_delta_wide<DT, SDT> : (const void *)&k_delta_regs<DT, SDT>;
}

template <int DT> const void *delta_for(int sdt, int wide) {
  switch (sdt) {
    case DT_F16: return delta_kernel<DT, DT_F16>(wide);
    case DT_BF16: return delta_kernel<DT, DT_BF16>(wide);
    case DT_F32: return delta_kernel<DT, DT_F32>(wide);
    case DT_F64: return delta_kernel<DT, DT_F64>(wide);
    default: return NULL;
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_gated_delta(int dtype, int state_dtype, int wide) {
  switch (dtype) {
    case DT_F16: return delta_for<DT_F16>(state_dtype, wide);
    case DT_BF16: return delta_for<DT_BF16>(state_dtype, wide);
    case DT_F32: return delta_for<DT_F32>(state_dtype, wide);
    case DT_F64: return delta_for<DT_F64>(state_dtype, wide);
    default: return NULL;
  }
}
