/* rms_norm, layer_norm and rope on the GPU (the CPU kernels' formulas, src/cpu/fast_norm.c).
 *
 * Norms: one row per group of threads (a warp or up to a whole block of 1024), float32
 * accumulation for float16/bfloat16/float32 and float64 for float64; sums go through warp
 * shuffles and, for groups of several warps, shared memory. Rows whose 16-byte vectors fit in
 * the threads' registers (k per thread, a template argument) are read once; longer rows, rows
 * whose length is not a multiple of a vector, and misaligned data (checked on the device) take
 * a scalar loop that reads the row again from memory (L2) for each pass. The launch (threads
 * per row, rows per block, k, the cache hint of x and y) is nv__gpu_norm_plan_of's: rows up to
 * 256 threads x 8 vectors take kernels compiled for their threads per row (one warp: shuffles
 * only, no barrier), the others a kernel whose threads per row is the block's width.
 *
 * rope: a thread per rotated pair (and per copied feature past dims) of a row, rows walked
 * grid-stride; angles as the CPU computes them (the inverse frequency in float64, the position
 * and angle in the compute type), sincos in the compute type. 64-bit indices throughout. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/fast_norm_kernels.h"

using namespace nvg;

namespace {

template <int DT> using at = cio<DT>; /* convert.cuh */

__device__ __forceinline__ float inv_sqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return 1.0 / sqrt(v); }
__device__ __forceinline__ void sin_cos(float v, float *s, float *c) { sincosf(v, s, c); }
__device__ __forceinline__ void sin_cos(double v, double *s, double *c) { sincos(v, s, c); }

template <class C> __device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* The sum of v over the row's threads (threadIdx.x), the same value in each. Every thread of
 * the block calls it the same number of times (rows past the end included): it synchronizes
 * the block when a row has several warps. red holds one slot per warp of the block (<= 32).
 * TPR: the threads per row when the kernel is compiled for them (0: blockDim.x). */
template <int TPR = 0, class C> __device__ __forceinline__ C row_sum(C v, C *red) {
  v = warp_sum(v);
  const int nw = TPR ? TPR / 32 : (int)(blockDim.x >> 5);
  if (nw == 1) return v;
  const int base = threadIdx.y * nw;
  if ((threadIdx.x & 31) == 0) red[base + (threadIdx.x >> 5)] = v;
  __syncthreads();
  C t = 0;
  for (int i = 0; i < nw; i++) t += red[base + i];
  __syncthreads(); /* every thread has read red before the next sum writes it */
  return t;
}

template <class S, int V> union vec16 {
  uint4 raw;
  S v[V];
};

/* x's 16-byte loads and y's stores with cache hint H (NV__GPU_NORM_HINT_*). The no-allocate
 * load goes through the non-coherent path: y never overlaps x (the launch's ABI). */
template <int H> __device__ __forceinline__ uint4 ld_x(const uint4 *q) {
  if (H == NV__GPU_NORM_HINT_CS) return __ldcs(q);
  if (H == NV__GPU_NORM_HINT_NA || H == NV__GPU_NORM_HINT_NA_CS) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(q));
    return v;
  }
  return *q;
}
template <int H> __device__ __forceinline__ void st_y(uint4 *q, uint4 v) {
  if (H == NV__GPU_NORM_HINT_CS || H == NV__GPU_NORM_HINT_NA_CS) __stcs(q, v);
  else *q = v;
}

/* One row held in registers: unit i (a 16-byte vector) of thread tx is tx + k * tpr. The sums
 * are over the registers (the centered one after the mean, as the CPU does); w and b are read
 * at the end, where every row of the launch reads them (L1/L2). */
template <int DT, int K, int TPR, int H>
__device__ __forceinline__ void norm_row_vec(typename at<DT>::S *y, const typename at<DT>::S *x,
                                             const typename at<DT>::S *w,
                                             const typename at<DT>::S *b, bool active, int tpr,
                                             const nv__gpu_norm_params &p,
                                             typename at<DT>::C *red) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  constexpr int V = 16 / (int)sizeof(S);
  const int units = (int)(p.d / V);
  const C eps = (C)p.eps, inv_d = (C)1 / (C)p.d;
  vec16<S, V> u[K];
  C s = 0, mu = 0;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int i = (int)threadIdx.x + k * tpr;
    u[k].raw = active && i < units ? ld_x<H>(reinterpret_cast<const uint4 *>(x) + i)
                                   : make_uint4(0, 0, 0, 0);
    if (p.layer)
#pragma unroll
      for (int j = 0; j < V; j++) s += A::ld(u[k].v[j]);
  }
  if (p.layer) mu = row_sum<TPR>(s, red) * inv_d;
  C q = 0;
#pragma unroll
  for (int k = 0; k < K; k++)
    if ((int)threadIdx.x + k * tpr < units)
#pragma unroll
      for (int j = 0; j < V; j++) {
        C t = A::ld(u[k].v[j]) - mu;
        q += t * t;
      }
  const C r = inv_sqrt(row_sum<TPR>(q, red) * inv_d + eps);
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int i = (int)threadIdx.x + k * tpr;
    if (!active || i >= units) continue;
    vec16<S, V> wv, bv, o;
    if (p.has_w) wv.raw = reinterpret_cast<const uint4 *>(w)[i];
    if (p.has_b) bv.raw = reinterpret_cast<const uint4 *>(b)[i];
#pragma unroll
    for (int j = 0; j < V; j++) {
      C t = (A::ld(u[k].v[j]) - mu) * r;
      if (p.has_w) t *= A::ld(wv.v[j]);
      if (p.has_b) t += A::ld(bv.v[j]);
      o.v[j] = A::st(t);
    }
    st_y<H>(reinterpret_cast<uint4 *>(y) + i, o.raw);
  }
}

/* Any length and alignment: element by element, a pass over the row per sum. */
template <int DT, int TPR>
__device__ __forceinline__ void norm_row_any(typename at<DT>::S *y, const typename at<DT>::S *x,
                                             const typename at<DT>::S *w,
                                             const typename at<DT>::S *b, bool active, int tpr,
                                             const nv__gpu_norm_params &p,
                                             typename at<DT>::C *red) {
  typedef at<DT> A;
  typedef typename A::C C;
  const int64_t d = p.d;
  const C eps = (C)p.eps, inv_d = (C)1 / (C)d;
  C mu = 0;
  if (p.layer) {
    C s = 0;
    if (active)
      for (int64_t i = threadIdx.x; i < d; i += tpr) s += A::ld(x[i]);
    mu = row_sum<TPR>(s, red) * inv_d;
  }
  C q = 0;
  if (active)
    for (int64_t i = threadIdx.x; i < d; i += tpr) {
      C t = A::ld(x[i]) - mu;
      q += t * t;
    }
  const C r = inv_sqrt(row_sum<TPR>(q, red) * inv_d + eps);
  if (!active) return;
  for (int64_t i = threadIdx.x; i < d; i += tpr) {
    C t = (A::ld(x[i]) - mu) * r;
    if (p.has_w) t *= A::ld(w[i]);
    if (p.has_b) t += A::ld(b[i]);
    y[i] = A::st(t);
  }
}

/* rms_norm / layer_norm. K: 16-byte vectors a thread keeps in registers; TPR: the threads per
 * row the kernel is compiled for (0: any, blockDim.x), H: x's and y's cache hint, MAXT: the
 * most threads a block (launch bounds: 65536 / MAXT registers a thread at most). The block's
 * rows advance together grid-stride, so the barriers of rows of several warps are met by every
 * thread the same number of times. */
template <int DT, int K, int TPR = 0, int H = NV__GPU_NORM_HINT_NONE, int MAXT = 1024>
__global__ void __launch_bounds__(MAXT)
    k_norm(typename at<DT>::S *y0, const typename at<DT>::S *x0, const typename at<DT>::S *w0,
           const typename at<DT>::S *b0, nv__gpu_norm_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  constexpr int V = 16 / (int)sizeof(S);
  __shared__ C red[TPR == 32 ? 1 : 32];
  const int tpr = TPR ? TPR : (int)blockDim.x;
  const int64_t d = p.d;
  const S *xb = x0 + p.off[1], *w = w0 + p.off[2], *b = b0 + p.off[3];
  S *yb = y0 + p.off[0];
  uintptr_t any = (uintptr_t)xb | (uintptr_t)yb | (p.has_w ? (uintptr_t)w : 0) |
                  (p.has_b ? (uintptr_t)b : 0);
  const bool vec = d % V == 0 && (any & 15u) == 0 && d / V <= (int64_t)K * tpr;
  const int64_t step = (int64_t)gridDim.x * blockDim.y;
  for (int64_t row0 = (int64_t)blockIdx.x * blockDim.y; row0 < p.rows; row0 += step) {
    const int64_t row = row0 + threadIdx.y;
    const bool active = row < p.rows;
    const S *x = xb + (active ? row : 0) * d;
    S *y = yb + (active ? row : 0) * d;
    if (vec) norm_row_vec<DT, K, TPR, H>(y, x, w, b, active, tpr, p, red);
    else norm_row_any<DT, TPR>(y, x, w, b, active, tpr, p, red);
  }
}

/* g w rounded on its own (never contracted into the sum's FMA): the sum of one row of d = 1 is
 * then exactly the value dx subtracts it from, so dx is 0 there, as on the CPU. */
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

/* norm_vjp (src/ops/fast_params.h): element by element, a pass for the mean (layer), a pass for
 * the three sums, a pass writing dx; the row's later passes read it from L1/L2. */
template <int DT>
__global__ void __launch_bounds__(1024)
    k_norm_vjp(typename at<DT>::S *dx0, const typename at<DT>::S *x0,
               const typename at<DT>::S *w0, const typename at<DT>::S *g0,
               nv__gpu_norm_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  __shared__ C red[32];
  const int64_t tpr = blockDim.x, d = p.d;
  const int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y;
  const bool active = row < p.rows;
  const int64_t at_row = (active ? row : 0) * d;
  const S *x = x0 + p.off[1] + at_row, *g = g0 + p.off[3] + at_row, *w = w0 + p.off[2];
  S *dx = dx0 + p.off[0] + at_row;
  const C inv_d = (C)1 / (C)d;
  C mu = 0;
  if (p.layer) {
    C s = 0;
    if (active)
      for (int64_t i = threadIdx.x; i < d; i += tpr) s += A::ld(x[i]);
    mu = row_sum(s, red) * inv_d;
  }
  C q = 0, a = 0, b = 0;
  if (active)
    for (int64_t i = threadIdx.x; i < d; i += tpr) {
      const C t = A::ld(x[i]) - mu, gw = p.has_w ? mul_rn(A::ld(g[i]), A::ld(w[i])) : A::ld(g[i]);
      q += t * t;
      a += gw;
      b += gw * t;
    }
  q = row_sum(q, red);
  a = row_sum(a, red);
  b = row_sum(b, red);
  const C r = inv_sqrt(q * inv_d + (C)p.eps);
  const C c = p.layer ? a * inv_d : (C)0, s = r * r * r * (b * inv_d);
  if (!active) return;
  for (int64_t i = threadIdx.x; i < d; i += tpr) {
    const C gw = p.has_w ? mul_rn(A::ld(g[i]), A::ld(w[i])) : A::ld(g[i]);
    dx[i] = A::st(r * (gw - c) - (A::ld(x[i]) - mu) * s);
  }
}

/* One pair of one row: (x1, x2) turned by the angle whose cosine and sine are c, s. */
template <class A>
__device__ __forceinline__ void turn(typename A::S &y1, typename A::S &y2, typename A::S x1,
                                     typename A::S x2, typename A::C c, typename A::C s) {
  const typename A::C a = A::ld(x1), b = A::ld(x2);
  y1 = A::st(a * c - b * s);
  y2 = A::st(a * s + b * c);
}

template <int DT>
__global__ void __launch_bounds__(NV__GPU_ROPE_THREADS)
    k_rope(typename at<DT>::S *y0, const typename at<DT>::S *x0, const int32_t *off0,
           const typename at<DT>::C *freqs0, nv__gpu_rope_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  const S *__restrict__ xb = x0 + p.off[1];
  S *__restrict__ yb = y0 + p.off[0];
  const int32_t *offs = off0 + p.off[2];
  const C *freqs = freqs0 + p.off[3];
  const int64_t h = p.dims / 2, slots = h + (p.d - p.dims), head = p.t * p.d;
  /* The inverse frequency of pair j (float64 math for base, rounded once to C, as the CPU
   * computes it); a thread's first pair keeps its own across the items it walks. */
  auto inv_of = [&](int64_t j) -> C {
    return p.has_freqs ? (C)1 / freqs[j]
                       : (C)exp2(-(2.0 * (double)j / (double)p.dims) * p.log2_base);
  };
  const C inv0 = (int64_t)threadIdx.x < h ? inv_of(threadIdx.x) : (C)0;
  for (int64_t q = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; q < p.items;
       q += (int64_t)gridDim.x * blockDim.y) {
    const int64_t chunk = q % p.nchunks, at_pos = q / p.nchunks;
    const int64_t bi = at_pos / p.t, t = at_pos % p.t;
    const int64_t m0 = chunk * p.hpt, m1 = m0 + p.hpt < p.m ? m0 + p.hpt : p.m;
    const C pos = (C)((int64_t)offs[p.noff == 1 ? 0 : bi] + t) * (C)p.scale;
    /* Element 0 of head m0's row at this position; head m's is `head` elements per head on. */
    const int64_t base = ((bi * p.m + m0) * p.t + t) * p.d;
    const int64_t nh = m1 - m0;
    for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) {
      if (j >= h) {
        const int64_t k = base + p.dims + (j - h);
        for (int64_t m = 0; m < nh; m++) yb[k + m * head] = xb[k + m * head];
        continue;
      }
      C s, c;
      sin_cos(pos * (j == (int64_t)threadIdx.x ? inv0 : inv_of(j)), &s, &c);
      if (p.inverse) s = -s;
      const int64_t i1 = base + (p.traditional ? 2 * j : j);
      const int64_t i2 = base + (p.traditional ? 2 * j + 1 : j + h);
      int64_t m = 0;
      /* Four heads at a time: their loads are in flight together. */
      for (; m + 4 <= nh; m += 4) {
        S a[4], b[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
          a[u] = xb[i1 + (m + u) * head];
          b[u] = xb[i2 + (m + u) * head];
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
          turn<A>(yb[i1 + (m + u) * head], yb[i2 + (m + u) * head], a[u], b[u], c, s);
      }
      for (; m < nh; m++) turn<A>(yb[i1 + m * head], yb[i2 + m * head], xb[i1 + m * head],
                                  xb[i2 + m * head], c, s);
    }
  }
}

template <int DT> const void *norm_for(const nv__gpu_norm_plan *pl) {
  if (pl->fixed) {
    if (pl->hint != NV__GPU_NORM_HINT || pl->tpr * pl->rpb > NV__GPU_NORM_BLOCK) return NULL;
    constexpr int H = NV__GPU_NORM_HINT, M = NV__GPU_NORM_BLOCK, FK = NV__GPU_NORM_FIXED_K;
    static_assert(FK == 8 && NV__GPU_NORM_FIXED_TPR == 256,
                  "norm_for instantiates the fixed kernels nv__gpu_norm_plan_of makes");
    if (pl->tpr == 32) switch (pl->k) {
        case 1: return (const void *)&k_norm<DT, 1, 32, H, M>;
        case 2: return (const void *)&k_norm<DT, 2, 32, H, M>;
        case 4: return (const void *)&k_norm<DT, 4, 32, H, M>;
        case 8: return (const void *)&k_norm<DT, 8, 32, H, M>;
        default: return NULL;
      }
    /* Past one warp a row k is always FK: the row is longer than 32 x FK / 2 vectors. */
    if (pl->k != FK) return NULL;
    switch (pl->tpr) {
      case 64: return (const void *)&k_norm<DT, FK, 64, H, M>;
      case 128: return (const void *)&k_norm<DT, FK, 128, H, M>;
      case 256: return (const void *)&k_norm<DT, FK, 256, H, M>;
      default: return NULL;
    }
  }
  if (pl->hint != NV__GPU_NORM_HINT_NONE) return NULL;
  switch (pl->k) {
    case 1: return (const void *)&k_norm<DT, 1>;
    case 2: return (const void *)&k_norm<DT, 2>;
    case 4: return (const void *)&k_norm<DT, 4>;
    case 8: return (const void *)&k_norm<DT, 8>;
    default: return NULL;
  }
}

/* The smallest power of two >= v (v >= 1). */
int64_t pow2_at_least(int64_t v) {
  int64_t q = 1;
  while (q < v) q <<= 1;
  return q;
}

}  // namespace

extern "C" void nv__gpu_norm_plan_of(int dtype, int64_t d, int64_t rows, int aligned,
                                     nv__gpu_norm_plan *pl) {
  const int64_t es = dtype == DT_F64 ? 8 : dtype == DT_F32 ? 4 : 2, v = 16 / es;
  const int64_t units = d % v == 0 ? d / v : d;
  if (aligned && d % v == 0 && units <= (int64_t)NV__GPU_NORM_FIXED_TPR * NV__GPU_NORM_FIXED_K) {
    /* The fewest threads per row whose registers hold it: a warp up to 32 x FIXED_K vectors. */
    int64_t tpr = 32;
    while (tpr * NV__GPU_NORM_FIXED_K < units) tpr <<= 1;
    pl->tpr = (int32_t)tpr;
    pl->k = (int32_t)pow2_at_least((units + tpr - 1) / tpr);
    /* 128 threads a block while a row has at most two warps (4 or 2 rows), then 256. */
    pl->rpb = (int32_t)(tpr <= 64 ? 128 / tpr : NV__GPU_NORM_BLOCK / tpr);
    pl->fixed = 1;
    pl->hint = NV__GPU_NORM_HINT;
  } else {
    /* About four vectors (or elements) a thread; k vectors a thread in registers, rounded up to
     * a power of two (rows past 8 x 1024 vectors read memory again). */
    int64_t tpr = pow2_at_least((units + 3) / 4);
    if (tpr < 32) tpr = 32;
    if (tpr > 1024) tpr = 1024;
    int64_t k = pow2_at_least((units + tpr - 1) / tpr);
    if (k > 8) k = 8;
    pl->tpr = (int32_t)tpr;
    pl->k = (int32_t)k;
    pl->rpb = (int32_t)(tpr >= 256 ? 1 : 256 / tpr);
    pl->fixed = 0;
    pl->hint = NV__GPU_NORM_HINT_NONE;
  }
  const int64_t grid = (rows + pl->rpb - 1) / pl->rpb;
  pl->grid = grid < 1 ? 1 : grid > NV__GPU_NORM_MAX_GRID ? NV__GPU_NORM_MAX_GRID : grid;
}

extern "C" const void *nv__gpu_kernel_norm(int dtype, const nv__gpu_norm_plan *plan) {
  switch (dtype) {
    case DT_F16: return norm_for<DT_F16>(plan);
    case DT_BF16: return norm_for<DT_BF16>(plan);
    case DT_F32: return norm_for<DT_F32>(plan);
    case DT_F64: return norm_for<DT_F64>(plan);
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_norm_vjp(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_norm_vjp<DT_F16>;
    case DT_BF16: return (const void *)&k_norm_vjp<DT_BF16>;
    case DT_F32: return (const void *)&k_norm_vjp<DT_F32>;
    case DT_F64: return (const void *)&k_norm_vjp<DT_F64>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_rope(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_rope<DT_F16>;
    case DT_BF16: return (const void *)&k_rope<DT_BF16>;
    case DT_F32: return (const void *)&k_rope<DT_F32>;
    case DT_F64: return (const void *)&k_rope<DT_F64>;
    default: return NULL;
  }
}
