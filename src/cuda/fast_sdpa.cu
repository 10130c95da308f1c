/* scaled_dot_product_attention on the GPU (the CPU kernel's definition, src/cpu/fast_sdpa.c):
 * an online softmax over blocks of keys in float32, never an Lq x Lk matrix in memory.
 *   - sdpa_mma: float16/bfloat16 with D = Dv in {64, 80, 96, 128, 256}, for prefill. A block
 *     takes 128 query rows of one head for D <= 128 (32 per warp: each k and v fragment feeds
 *     two mma), 64 for D = 256 (16 per warp), and walks the keys 64 at a time: q·kᵀ and
 *     p·v on tensor cores (mma.sync m16n8k16, float32 accumulators; operands from shared
 *     memory by ldmatrix), the scores and the softmax state in registers (each thread holds
 *     two rows' values of each 16-row tile; maxima reduced over the 4 threads of a row), in
 *     log2 units so that each exponential is one ex2; k and v tiles arrive by cp.async, each
 *     overlapping the other's product. Key steps with nothing to mask (no mask array, a full
 *     tile, causal tiles left of the diagonal) skip the per-score tests. Causal blocks past
 *     the tile's last query are skipped. The output leaves through shared memory in 16-byte
 *     stores. GQA: head h reads key/value head h / G.
 *   - sdpa_decode_vec: at most 4 query rows per key/value head (decode), D, Dv <= 256 and
 *     multiples of 16 bytes' elements, q, k and v 16-byte aligned: k and v streamed from global
 *     memory in 16-byte loads by groups of D/8 (16-bit) or D/4 (float32) lanes, one key per
 *     group, blocks over splits of the keys.
 *   - sdpa_decode: the other decode cases (scalar loads): k and v streamed by warps (two keys
 *     per warp step, scores by shuffles), blocks over splits of the keys.
 *   - sdpa_simt: any float dtype and head size. A block takes `rows` query rows of one
 *     key/value head (the G query heads of the group, so they share each key block) and one
 *     split of the keys; key/value blocks go through shared memory as float32. With several
 *     splits (decode: few rows, long keys) it writes per-split partials (unnormalized output,
 *     maximum, sum) that sdpa_combine reduces, one block per output row (the decode kernels'
 *     splits too).
 * Masked scores count as float32's lowest value (a fully masked row averages v, as the CPU);
 * keys past the end are excluded (-inf, whose exponential is 0; a running maximum of -inf
 * uses 0 as its reference, so no NaN arises from -inf - -inf). Sinks start the running state
 * as one more logit with a zero value row. */
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "cuda/convert.cuh"
#include "cuda/fast_sdpa_kernels.h"

using namespace nvg;

namespace {

typedef nv__gpu_sdpa_params P;

/* One mask element (bool, float16, bfloat16 or float32). */
__device__ __forceinline__ float mask_at(const void *m, int dt, int64_t i) {
  switch (dt) {
    case DT_BOOL: return ((const uint8_t *)m)[i] ? 1.0f : 0.0f;
    case DT_F16: return f16_to_f32(((const uint16_t *)m)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)m)[i]);
    default: return ((const float *)m)[i];
  }
}

/* A score after the mask: causal or bool-masked scores become float32's lowest value,
 * additive masks add. `row` is the query position, `col` the key position. */
__device__ __forceinline__ float masked(const P &p, const void *mask, int b, int hq, int row,
                                        int col, float s) {
  if (p.causal) return col > row + (p.Lk - p.Lq) ? -FLT_MAX : s;
  if (p.mask == 0) return s;
  int64_t i = p.off[NV__GPU_SDPA_MASK] + b * p.mst[0] + hq * p.mst[1] + row * p.mst[2] +
              col * p.mst[3];
  float m = mask_at(mask, p.mask_dtype, i);
  if (p.mask == 2) return m != 0.0f ? s : -FLT_MAX;
  return s + m;
}

__device__ __forceinline__ float sink_of(const P &p, const void *sinks, int hq) {
  return ((const float *)sinks)[p.off[NV__GPU_SDPA_SINKS] + hq * p.sst];
}

/* The reference a running maximum subtracts: itself, or 0 while it is -inf. */
__device__ __forceinline__ float ref_of(float m) { return m == -INFINITY ? 0.0f : m; }

/* An output element from its weighted sum and the softmax's denominator; paged rows without
 * keys (denominator 0) give 0. */
__device__ __forceinline__ float out_of(const P &p, float acc, float L) {
  return p.paged && L == 0.0f ? 0.0f : acc / L;
}

/* Key jj's row in k and v: jj itself, or (paged) its slot through the batch's block table (the
 * pool's NB x BS slots fit int32: the host checks). */
template <bool PG>
__device__ __forceinline__ int key_row(const P &p, const int32_t *table, int jj) {
  if (!PG) return jj;
  return __ldg(table + jj / p.BS) * p.BS + jj % p.BS;
}

/* The last key (exclusive) a block of query positions [first, last] reads: causal blocks stop
 * after the last query's position unless a query sits before every key (it then sees none and
 * averages all of them). */
__device__ __forceinline__ int key_end(const P &p, int first, int last) {
  int shift = p.Lk - p.Lq;
  if (p.causal && first + shift >= 0 && last + shift + 1 < p.Lk) return last + shift + 1;
  return p.Lk;
}

/* ---- The SIMT kernel ---- */

template <int DT>
__global__ void __launch_bounds__(NV__GPU_SDPA_THREADS)
    sdpa_simt(void *out, const void *q, const void *k, const void *v, const void *mask,
              const void *sinks, void *part, P p) {
  typedef typename f32io<DT>::S S;
  extern __shared__ float smem[];
  const int R = p.rows, KB = p.keys, D = p.D, Dv = p.Dv, G = p.G;
  float *Qs = smem, *Ks = Qs + R * D, *Vs = Ks + KB * (D + 1), *Ps = Vs + KB * Dv;
  float *Os = Ps + R * KB, *Ms = Os + R * Dv, *Ls = Ms + R, *Cs = Ls + R;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
  int64_t bid = blockIdx.x;
  const int split = (int)(bid % p.nsplit);
  bid /= p.nsplit;
  const int tile = (int)(bid % p.ntiles);
  bid /= p.ntiles;
  const int hkv = (int)(bid % p.Hkv), b = (int)(bid / p.Hkv);
  const int64_t flat0 = (int64_t)tile * R, nflat = (int64_t)p.Lq * G;
  const int nr = (int)(nflat - flat0 < R ? nflat - flat0 : R);
  const S *qb = (const S *)q + p.off[NV__GPU_SDPA_Q];
  const S *kb = (const S *)k + p.off[NV__GPU_SDPA_K] + ((int64_t)b * p.Hkv + hkv) * p.Lk * D;
  const S *vb = (const S *)v + p.off[NV__GPU_SDPA_V] + ((int64_t)b * p.Hkv + hkv) * p.Lk * Dv;
  const bool final_pass = p.nsplit == 1;

  for (int e = tid; e < nr * D; e += nt) {
    int r = e / D, d = e - r * D;
    int64_t f = flat0 + r;
    int i = (int)(f / G), hq = hkv * G + (int)(f % G);
    Qs[e] = f32io<DT>::ld(qb[(((int64_t)b * p.Hq + hq) * p.Lq + i) * D + d]) * p.scale;
  }
  for (int r = tid; r < nr; r += nt) {
    float m0 = -INFINITY, l0 = 0.0f;
    if (p.sinks && final_pass) {
      m0 = sink_of(p, sinks, hkv * G + (int)((flat0 + r) % G));
      l0 = m0 == -INFINITY ? 0.0f : 1.0f;
    }
    Ms[r] = m0;
    Ls[r] = l0;
  }
  for (int e = tid; e < nr * Dv; e += nt) Os[e] = 0.0f;
  const int first = (int)(flat0 / G), last = (int)((flat0 + nr - 1) / G);
  const int kend = key_end(p, first, last);
  const int64_t ks64 = (int64_t)split * p.split_len;
  const int ks = (int)(ks64 < kend ? ks64 : kend);
  const int ke = (int)(ks64 + p.split_len < kend ? ks64 + p.split_len : kend);
  const int tpd = p.tpd, per = nt / tpd;
  __syncthreads();
  for (int j0 = ks; j0 < ke; j0 += KB) {
    const int n = ke - j0 < KB ? ke - j0 : KB;
    for (int e = tid; e < n * D; e += nt) {
      int j = e / D, d = e - j * D;
      Ks[j * (D + 1) + d] = f32io<DT>::ld(kb[(int64_t)(j0 + j) * D + d]);
    }
    for (int e = tid; e < n * Dv; e += nt) Vs[e] = f32io<DT>::ld(vb[(int64_t)j0 * Dv + e]);
    __syncthreads();
    /* scores: `tpd` threads per (row, key), each over every tpd-th element of the dot */
    const int items = nr * n, part_id = tid % tpd;
    for (int base = 0; base < items; base += per) {
      int e = base + tid / tpd;
      float acc = 0.0f;
      int r = 0, j = 0;
      if (e < items) {
        r = e / n;
        j = e - r * n;
        const float *qr = Qs + r * D, *kr = Ks + j * (D + 1);
        for (int d = part_id; d < D; d += tpd) acc = fmaf(qr[d], kr[d], acc);
      }
      for (int w = tpd >> 1; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w, tpd);
      if (e < items && part_id == 0) {
        int64_t f = flat0 + r;
        Ps[r * KB + j] = masked(p, mask, b, hkv * G + (int)(f % G), (int)(f / G), j0 + j, acc);
      }
    }
    __syncthreads();
    /* the online softmax: one warp per row */
    for (int r = warp; r < nr; r += nt >> 5) {
      float *s = Ps + r * KB, mx = -INFINITY;
      for (int j = lane; j < n; j += 32) mx = fmaxf(mx, s[j]);
      for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
      float mold = Ms[r], mnew = fmaxf(mold, mx), mu = ref_of(mnew), sum = 0.0f;
      for (int j = lane; j < n; j += 32) {
        float e = expf(s[j] - mu);
        s[j] = e;
        sum += e;
      }
      for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
      if (lane == 0) {
        float corr = expf(mold - mu);
        Ls[r] = Ls[r] * corr + sum;
        Ms[r] = mnew;
        Cs[r] = corr;
      }
    }
    __syncthreads();
    for (int e = tid; e < nr * Dv; e += nt) {
      int r = e / Dv, d = e - r * Dv;
      const float *pr = Ps + r * KB;
      float acc = Os[e] * Cs[r];
      for (int j = 0; j < n; j++) acc = fmaf(pr[j], Vs[j * Dv + d], acc);
      Os[e] = acc;
    }
    __syncthreads();
  }
  for (int e = tid; e < nr * Dv; e += nt) {
    int r = e / Dv, d = e - r * Dv;
    int64_t f = flat0 + r;
    int i = (int)(f / G), hq = hkv * G + (int)(f % G);
    int64_t orow = ((int64_t)b * p.Hq + hq) * p.Lq + i;
    if (final_pass) {
      ((S *)out)[p.off[NV__GPU_SDPA_OUT] + orow * Dv + d] = f32io<DT>::st(Os[e] / Ls[r]);
    } else {
      float *pt = (float *)part + p.off[NV__GPU_SDPA_PART] +
                  (orow * p.nsplit + split) * NV__GPU_SDPA_PART_FLOATS(Dv);
      pt[d] = Os[e];
      if (d == 0) {
        pt[Dv] = Ms[r];
        pt[Dv + 1] = Ls[r];
      }
    }
  }
}

/* The splits of each output row weighted by exp(m_s - M), with the sink as one more term of
 * the denominator. One block per output row: warp 0 finds M, the splits' weights (into shared
 * memory) and the denominator, then every thread sums the partials of its output elements. */
template <int DT>
__global__ void __launch_bounds__(NV__GPU_SDPA_THREADS)
    sdpa_combine(void *out, const void *q, const void *k, const void *v, const void *mask,
                 const void *sinks, void *part, P p) {
  (void)q;
  (void)k;
  (void)v;
  (void)mask;
  typedef typename f32io<DT>::S S;
  __shared__ float wts[NV__GPU_SDPA_MAX_SPLITS], denom;
  const int tid = threadIdx.x, lane = tid & 31, Dv = p.Dv, ns = p.nsplit;
  const int64_t row = blockIdx.x, PF = NV__GPU_SDPA_PART_FLOATS(Dv);
  const float *pt = (const float *)part + p.off[NV__GPU_SDPA_PART] + row * ns * PF;
  if (tid < 32) {
    const int hq = (int)(row / p.Lq % p.Hq);
    float M = -INFINITY, sink = -INFINITY;
    if (p.sinks) M = sink = sink_of(p, sinks, hq);
    for (int s = lane; s < ns; s += 32) M = fmaxf(M, pt[s * PF + Dv]);
    for (int w = 16; w > 0; w >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, w));
    const float mu = ref_of(M);
    float L = 0.0f;
    for (int s = lane; s < ns; s += 32) {
      const float f = expf(pt[s * PF + Dv] - mu);
      wts[s] = f;
      L = fmaf(pt[s * PF + Dv + 1], f, L);
    }
    for (int w = 16; w > 0; w >>= 1) L += __shfl_xor_sync(0xffffffffu, L, w);
    if (lane == 0) denom = p.sinks ? L + expf(sink - mu) : L;
  }
  __syncthreads();
  const float L = denom;
  for (int d = tid; d < Dv; d += NV__GPU_SDPA_THREADS) {
    float acc = 0.0f;
    for (int s = 0; s < ns; s++) acc = fmaf(pt[s * PF + d], wts[s], acc);
    ((S *)out)[p.off[NV__GPU_SDPA_OUT] + row * Dv + d] = f32io<DT>::st(out_of(p, acc, L));
  }
}

/* ---- The decode kernel ---- */

/* At most NV__GPU_SDPA_DECODE_ROWS query rows (the G heads of a group times Lq) of one
 * key/value head over one split of the keys, streamed from global memory without shared
 * tiles: each warp takes every 4th key of the split, two at a time; lane l holds q and output
 * elements l, l + 32, ... (C of them: D, Dv <= 32 C), a key's scores are warp sums
 * (shuffles), and the softmax state is per row in registers (the same in every lane). The
 * next two keys' k and v rows are loaded before the current ones are used. The block's 4 warps then merge their states
 * through shared memory into the output (one split) or the split's partial. */
/* The decode kernels' end: the warps' running states of each row (maxima, sums and output rows
 * in shared memory) merged, with the sink on the last pass, into the output (one split) or the
 * split's partial. */
template <int DT, int NW, int MR, int DM>
__device__ __forceinline__ void merge_warps(const float (&red_m)[NW][MR],
                                            const float (&red_l)[NW][MR],
                                            const float (&red_o)[NW][MR][DM], void *out,
                                            const void *sinks, void *part, const P &p, int b,
                                            int hkv, int split) {
  typedef typename f32io<DT>::S S;
  const int Dv = p.Dv, G = p.G, R = p.rows;
  const bool final_pass = p.nsplit == 1;
  for (int e = threadIdx.x; e < R * Dv; e += NV__GPU_SDPA_THREADS) {
    const int r = e / Dv, d = e - r * Dv, i = r / G, hq = hkv * G + r % G;
    float M = -INFINITY, sink = -INFINITY;
    for (int w = 0; w < NW; w++) M = fmaxf(M, red_m[w][r]);
    const float mw = M; /* the warps' maximum: the partial's reference */
    if (final_pass && p.sinks) M = fmaxf(M, sink = sink_of(p, sinks, hq));
    const float mu = ref_of(M);
    float L = final_pass && p.sinks ? expf(sink - mu) : 0.0f, acc = 0.0f;
    for (int w = 0; w < NW; w++) {
      const float f = expf(red_m[w][r] - mu);
      L += red_l[w][r] * f;
      acc += red_o[w][r][d] * f;
    }
    const int64_t orow = ((int64_t)b * p.Hq + hq) * p.Lq + i;
    if (final_pass) {
      ((S *)out)[p.off[NV__GPU_SDPA_OUT] + orow * Dv + d] = f32io<DT>::st(out_of(p, acc, L));
    } else {
      float *pt = (float *)part + p.off[NV__GPU_SDPA_PART] +
                  (orow * p.nsplit + split) * NV__GPU_SDPA_PART_FLOATS(Dv);
      pt[d] = acc;
      if (d == 0) {
        pt[Dv] = mw;
        pt[Dv + 1] = L;
      }
    }
  }
}

template <int DT, int C>
__global__ void __launch_bounds__(NV__GPU_SDPA_THREADS)
    sdpa_decode(void *out, const void *q, const void *k, const void *v, const void *mask,
                const void *sinks, void *part, P p) {
  typedef typename f32io<DT>::S S;
  constexpr int MR = NV__GPU_SDPA_DECODE_ROWS, NW = NV__GPU_SDPA_THREADS / 32;
  __shared__ float red_m[NW][MR], red_l[NW][MR], red_o[NW][MR][C * 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int D = p.D, Dv = p.Dv, G = p.G, R = p.rows;
  int64_t bid = blockIdx.x;
  const int split = (int)(bid % p.nsplit);
  bid /= p.nsplit;
  const int hkv = (int)(bid % p.Hkv), b = (int)(bid / p.Hkv);
  const S *qb = (const S *)q + p.off[NV__GPU_SDPA_Q];
  const S *kb = (const S *)k + p.off[NV__GPU_SDPA_K] + ((int64_t)b * p.Hkv + hkv) * p.Lk * D;
  const S *vb = (const S *)v + p.off[NV__GPU_SDPA_V] + ((int64_t)b * p.Hkv + hkv) * p.Lk * Dv;
  float qv[MR][C], o[MR][C], m[MR], l[MR];
#pragma unroll
  for (int r = 0; r < MR; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    const int i = r / G, hq = hkv * G + r % G;
#pragma unroll
    for (int c = 0; c < C; c++) {
      const int d = lane + 32 * c;
      o[r][c] = 0.0f;
      qv[r][c] = r < R && d < D
                     ? f32io<DT>::ld(qb[(((int64_t)b * p.Hq + hq) * p.Lq + i) * D + d]) * p.scale
                     : 0.0f;
    }
  }
  const int kend = key_end(p, 0, p.Lq - 1);
  const int64_t ks64 = (int64_t)split * p.split_len;
  const int ks = (int)(ks64 < kend ? ks64 : kend);
  const int ke = (int)(ks64 + p.split_len < kend ? ks64 + p.split_len : kend);
  /* Two keys per step (j and j + NW), the next two loading meanwhile: 4 rows of k and v in
   * flight per warp. A key past the split reads nothing and scores -inf (weight 0). */
  constexpr int U = 2;
  float kn[U][C], vn[U][C];
  int j = ks + warp;
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int c = 0; c < C; c++) {
      const int d = lane + 32 * c, jj = j + u * NW;
      kn[u][c] = jj < ke && d < D ? f32io<DT>::ld(kb[(int64_t)jj * D + d]) : 0.0f;
      vn[u][c] = jj < ke && d < Dv ? f32io<DT>::ld(vb[(int64_t)jj * Dv + d]) : 0.0f;
    }
  for (; j < ke; j += U * NW) {
    float kv[U][C], vv[U][C];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int c = 0; c < C; c++) {
        const int d = lane + 32 * c, jn = j + (U + u) * NW;
        kv[u][c] = kn[u][c];
        vv[u][c] = vn[u][c];
        kn[u][c] = jn < ke && d < D ? f32io<DT>::ld(kb[(int64_t)jn * D + d]) : 0.0f;
        vn[u][c] = jn < ke && d < Dv ? f32io<DT>::ld(vb[(int64_t)jn * Dv + d]) : 0.0f;
      }
#pragma unroll
    for (int r = 0; r < MR; r++) {
      if (r >= R) break; /* R is the same for the whole block */
      float sc[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        sc[u] = 0.0f;
#pragma unroll
        for (int c = 0; c < C; c++) sc[u] = fmaf(qv[r][c], kv[u][c], sc[u]);
      }
#pragma unroll
      for (int w = 16; w > 0; w >>= 1)
#pragma unroll
        for (int u = 0; u < U; u++) sc[u] += __shfl_xor_sync(0xffffffffu, sc[u], w);
      float mnew = m[r];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int jj = j + u * NW;
        sc[u] = jj < ke ? masked(p, mask, b, hkv * G + r % G, r / G, jj, sc[u]) : -INFINITY;
        mnew = fmaxf(mnew, sc[u]);
      }
      const float mu = ref_of(mnew), corr = expf(m[r] - mu);
      float e[U], esum = 0.0f;
#pragma unroll
      for (int u = 0; u < U; u++) {
        e[u] = expf(sc[u] - mu);
        esum += e[u];
      }
      l[r] = l[r] * corr + esum;
      m[r] = mnew;
#pragma unroll
      for (int c = 0; c < C; c++) {
        float acc = o[r][c] * corr;
#pragma unroll
        for (int u = 0; u < U; u++) acc = fmaf(e[u], vv[u][c], acc);
        o[r][c] = acc;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < MR; r++) {
    if (lane == 0) {
      red_m[warp][r] = m[r];
      red_l[warp][r] = l[r];
    }
#pragma unroll
    for (int c = 0; c < C; c++) red_o[warp][r][lane + 32 * c] = o[r][c];
  }
  __syncthreads();
  merge_warps<DT>(red_m, red_l, red_o, out, sinks, part, p, b, hkv, split);
}

/* ---- The vectorized decode kernel ---- */

/* 16 bytes of global memory read through the non-coherent (read-only) path, streamed: not kept
 * in L1, and L2 fetching the whole 256-byte block (the neighbouring lanes' and keys' bytes).
 * Volatile: issued where written, never speculated past its guard. */
__device__ __forceinline__ uint4 ld16(const void *ptr) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(ptr));
  return r;
}

/* One float16 (the low 16 bits of `h`) as float32: the hardware's exact conversion. */
__device__ __forceinline__ float h2f(uint32_t h) {
  float f;
  const unsigned short s = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(s));
  return f;
}

/* The 16 / sizeof(S) elements of one 16-byte vector as float32 (element 0 at the lowest
 * address, as the four words' little-endian halves). */
template <int DT> __device__ __forceinline__ void unpack16(const uint4 &u, float *f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  if (DT == DT_F32) {
#pragma unroll
    for (int i = 0; i < 4; i++) f[i] = __uint_as_float(w[i]);
  } else if (DT == DT_BF16) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      f[2 * i] = h2f(w[i]);
      f[2 * i + 1] = h2f(w[i] >> 16);
    }
  }
}

/* The decode kernel with 16-byte loads: at most MR (<= NV__GPU_SDPA_DECODE_ROWS) query rows of
 * one key/value head over one split of the keys, k and v streamed from global memory into
 * registers. A group of T lanes owns one key at a time: lane t of the group holds the 16-byte
 * chunks t, t + T, ... (NC of them, VE elements each) of q (every row), of the key's k and v
 * rows and of the output accumulators, so a score is the group's sum (log2 T shuffles) and
 * each group runs its own online softmax (state per row in registers, the same in the group's
 * lanes). A block step covers NG x U keys (U = 4, or 2 for more than 2 rows or two chunks per
 * lane, whose registers are more): group g takes keys j0 + g + u NG (u < U; a warp's groups
 * read consecutive rows); the next step's k rows are loaded once the scores are made and
 * its v rows once p·v is done, so 2 U vectors per lane stay in flight. At the end the groups
 * of a warp merge by shuffles, the 4 warps through shared memory, into the output (one split)
 * or the split's partial (reference: the warps' maximum; the sink joins in the combine). */
template <int DT, int T, int NC, int MR, bool PG>
__global__ void __launch_bounds__(NV__GPU_SDPA_THREADS, NV__GPU_SDPA_DVEC_BLOCKS_PER_SM(MR, NC))
    sdpa_decode_vec(void *out, const void *q, const void *k, const void *v, const void *mask,
                    const void *sinks, void *part, P p) {
  typedef typename f32io<DT>::S S;
  constexpr int VE = 16 / (int)sizeof(S), W = NC * VE; /* elements per vector, per lane */
  constexpr int NW = NV__GPU_SDPA_THREADS / 32, GPW = 32 / T, NG = NW * GPW;
  constexpr int U = NC == 1 && MR <= 2 ? 4 : 2, STEP = NG * U;
  static_assert(T >= 4 && T <= 32 && (T & (T - 1)) == 0, "T: a power of two in [4, 32]");
  __shared__ float red_m[NW][MR], red_l[NW][MR];
  __shared__ float red_o[NW][MR][T * W];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, t = lane & (T - 1);
  const int grp = warp * GPW + lane / T;
  const int D = p.D, Dv = p.Dv, G = p.G, R = p.rows;
  int64_t bid = blockIdx.x;
  const int split = (int)(bid % p.nsplit);
  bid /= p.nsplit;
  const int hkv = (int)(bid % p.Hkv), b = (int)(bid / p.Hkv);
  const S *qb = (const S *)q + p.off[NV__GPU_SDPA_Q];
  /* key jj's k row at kb + key_row(jj) kst (v likewise): [B, Hkv, Lk, D] or the pools */
  const S *kb = (const S *)k + p.off[NV__GPU_SDPA_K] +
                (PG ? (int64_t)hkv * D : ((int64_t)b * p.Hkv + hkv) * p.Lk * D);
  const S *vb = (const S *)v + p.off[NV__GPU_SDPA_V] +
                (PG ? (int64_t)hkv * Dv : ((int64_t)b * p.Hkv + hkv) * p.Lk * Dv);
  const int64_t kst = PG ? (int64_t)p.Hkv * D : D, vst = PG ? (int64_t)p.Hkv * Dv : Dv;
  const int32_t *table = PG ? (const int32_t *)mask + p.off[NV__GPU_SDPA_MASK] + (int64_t)b * p.M
                            : nullptr;
  /* chunk c of this lane: elements [e0(c), e0(c) + VE), inside k's and v's rows or not (D and
   * Dv are multiples of VE) */
  bool kin[NC], vin[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) {
    const int e0 = (c * T + t) * VE;
    kin[c] = e0 < D;
    vin[c] = e0 < Dv;
  }
  float qv[MR][W], o[MR][W], m[MR], l[MR];
#pragma unroll
  for (int r = 0; r < MR; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    const int i = r / G, hq = hkv * G + r % G;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      float f[VE];
      if (r < R && kin[c]) {
        unpack16<DT>(ld16(qb + (((int64_t)b * p.Hq + hq) * p.Lq + i) * D + (c * T + t) * VE), f);
      } else {
#pragma unroll
        for (int e = 0; e < VE; e++) f[e] = 0.0f;
      }
#pragma unroll
      for (int e = 0; e < VE; e++) {
        qv[r][c * VE + e] = f[e] * p.scale;
        o[r][c * VE + e] = 0.0f;
      }
    }
  }
  int kend = key_end(p, 0, p.Lq - 1);
  if (PG) { /* the batch's context length, checked: a bad one reads no key */
    const int L = __ldg((const int32_t *)sinks + p.off[NV__GPU_SDPA_SINKS] + b);
    kend = L >= 0 && L <= p.Lk ? L : 0;
    if (kend != L && tid == 0) nv__gpu_raise_bad(p.bad, L, (long long)p.Lk + 1);
  }
  const int64_t ks64 = (int64_t)split * p.split_len;
  const int ks = (int)(ks64 < kend ? ks64 : kend);
  int ke = (int)(ks64 + p.split_len < kend ? ks64 + p.split_len : kend);
  if (PG) { /* the block ids of the split's keys, checked: a bad one reads no key */
    __shared__ int bad_id;
    if (tid == 0) bad_id = 0;
    __syncthreads();
    if (ke > ks)
      for (int blk = ks / p.BS + tid; blk <= (ke - 1) / p.BS; blk += NV__GPU_SDPA_THREADS) {
        const int id = __ldg(table + blk);
        if (id < 0 || id >= p.NB) {
          nv__gpu_raise_bad(p.bad, id, p.NB);
          bad_id = 1;
        }
      }
    __syncthreads();
    if (bad_id) ke = ks;
  }
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  /* the first step's k and v rows; a key past the split reads nothing (zeros). rw[u]: the row
   * of key u of the step whose loads were issued last (k's, then v's) */
  uint4 kr[U][NC], vr[U][NC];
  int rw[U];
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int jj = ks + u * NG + grp;
    rw[u] = jj < ke ? key_row<PG>(p, table, jj) : 0;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      const int e0 = (c * T + t) * VE;
      kr[u][c] = jj < ke && kin[c] ? ld16(kb + (int64_t)rw[u] * kst + e0) : zero;
      vr[u][c] = jj < ke && vin[c] ? ld16(vb + (int64_t)rw[u] * vst + e0) : zero;
    }
  }
  for (int j0 = ks; j0 < ke; j0 += STEP) {
    /* the scores of the group's U keys for every row (group sums by shuffles) */
    float sc[MR][U];
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
      for (int u = 0; u < U; u++) sc[r][u] = 0.0f;
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int c = 0; c < NC; c++) {
        float f[VE];
        unpack16<DT>(kr[u][c], f);
#pragma unroll
        for (int r = 0; r < MR; r++)
#pragma unroll
          for (int e = 0; e < VE; e++) sc[r][u] = fmaf(qv[r][c * VE + e], f[e], sc[r][u]);
      }
#pragma unroll
    for (int w = T >> 1; w > 0; w >>= 1)
#pragma unroll
      for (int r = 0; r < MR; r++)
#pragma unroll
        for (int u = 0; u < U; u++) sc[r][u] += __shfl_xor_sync(0xffffffffu, sc[r][u], w);
    /* the next step's k rows, in flight during the softmax and p·v */
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int jn = j0 + STEP + u * NG + grp;
      rw[u] = jn < ke ? key_row<PG>(p, table, jn) : 0;
#pragma unroll
      for (int c = 0; c < NC; c++)
        kr[u][c] = jn < ke && kin[c] ? ld16(kb + (int64_t)rw[u] * kst + (c * T + t) * VE) : zero;
    }
    /* masks, then the online softmax per row */
#pragma unroll
    for (int r = 0; r < MR; r++) {
      if (r >= R) break; /* R is the same for the whole block */
      float mnew = m[r];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int jj = j0 + u * NG + grp;
        sc[r][u] = jj < ke ? masked(p, mask, b, hkv * G + r % G, r / G, jj, sc[r][u]) : -INFINITY;
        mnew = fmaxf(mnew, sc[r][u]);
      }
      const float mu = ref_of(mnew), corr = expf(m[r] - mu);
      float esum = 0.0f;
#pragma unroll
      for (int u = 0; u < U; u++) {
        sc[r][u] = expf(sc[r][u] - mu);
        esum += sc[r][u];
      }
      l[r] = l[r] * corr + esum;
      m[r] = mnew;
#pragma unroll
      for (int e = 0; e < W; e++) o[r][e] *= corr;
    }
    /* o += p·v */
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int c = 0; c < NC; c++) {
        float f[VE];
        unpack16<DT>(vr[u][c], f);
#pragma unroll
        for (int r = 0; r < MR; r++) {
          if (r >= R) break;
#pragma unroll
          for (int e = 0; e < VE; e++)
            o[r][c * VE + e] = fmaf(sc[r][u], f[e], o[r][c * VE + e]);
        }
      }
    /* the next step's v rows, in flight during its scores */
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int jn = j0 + STEP + u * NG + grp;
#pragma unroll
      for (int c = 0; c < NC; c++)
        vr[u][c] = jn < ke && vin[c] ? ld16(vb + (int64_t)rw[u] * vst + (c * T + t) * VE) : zero;
    }
  }
  /* the warp's groups merge pairwise (lanes l and l ^ off hold the same chunks): both sides
   * compute the same sums, so every group ends with the warp's state */
#pragma unroll
  for (int off = T; off < 32; off <<= 1)
#pragma unroll
    for (int r = 0; r < MR; r++) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[r], off);
      const float lo = __shfl_xor_sync(0xffffffffu, l[r], off);
      const float M = fmaxf(m[r], mo), mu = ref_of(M);
      const float fa = expf(m[r] - mu), fb = expf(mo - mu);
      l[r] = l[r] * fa + lo * fb;
#pragma unroll
      for (int e = 0; e < W; e++) {
        const float oo = __shfl_xor_sync(0xffffffffu, o[r][e], off);
        o[r][e] = o[r][e] * fa + oo * fb;
      }
      m[r] = M;
    }
  if (lane < T) {
#pragma unroll
    for (int r = 0; r < MR; r++) {
      if (lane == 0) {
        red_m[warp][r] = m[r];
        red_l[warp][r] = l[r];
      }
#pragma unroll
      for (int c = 0; c < NC; c++)
#pragma unroll
        for (int e = 0; e < VE; e++) red_o[warp][r][(c * T + t) * VE + e] = o[r][c * VE + e];
    }
  }
  __syncthreads();
  merge_warps<DT>(red_m, red_l, red_o, out, sinks, part, p, b, hkv, split);
}

/* ---- The tensor-core kernel ---- */

__device__ __forceinline__ uint32_t smem_addr(const void *ptr) {
  return (uint32_t)__cvta_generic_to_shared(ptr);
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                        uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1,
                                          uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

/* c += a·b for one m16n8k16 tile (float32 accumulators). */
template <int DT>
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  if (DT == DT_F16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two float32 values as one register of two 16-bit values (lo in the low half), rounded to
 * nearest even by the hardware's paired conversion. */
template <int DT> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if (DT == DT_F16)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* Asynchronous 16-byte copies into shared memory (cp.async, sm_80+): `bytes` (16 or 0: a zero
 * fill, nothing read) from `src`; the thread's copies since its last commit form a group, and
 * wait<N> returns once at most N of its groups are still in flight. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Rows [row0, row0 + n) of a row-contiguous [*, D] matrix into a shared tile of ROWS rows
 * with row stride D + 8 (rows >= n zeroed), then a commit: asynchronous 16-byte copies when the
 * rows are 16-byte aligned (visible after cp_wait and a barrier), else plain loads and stores
 * (visible after the barrier; their group is empty). */
template <int D, int ROWS>
__device__ __forceinline__ void load_tile(uint16_t *tile, const uint16_t *src, int64_t row0,
                                          int n, bool vec) {
  constexpr int C = D / 8, LDS = D + 8, T = NV__GPU_SDPA_THREADS;
  if constexpr (T % C == 0) {
    if (vec) {
      /* D = 64, 128, 256: each thread copies one 16-byte column chunk of the rows r0,
       * r0 + T / C, ...: one address pair, then constant offsets (few instructions a copy) */
      constexpr int RP = T / C;
      static_assert(ROWS % RP == 0, "whole passes over the tile");
      const int r0 = threadIdx.x / C, cc = threadIdx.x % C;
      const uint16_t *s = src + (row0 + r0) * D + cc * 8;
      const uint32_t d = smem_addr(tile + r0 * LDS + cc * 8);
      if (n >= ROWS) { /* a full tile (block-uniform): no row tests */
#pragma unroll
        for (int i = 0; i < ROWS / RP; i++)
          cp_async16(d + i * RP * LDS * 2, s + i * RP * D, 16);
      } else {
#pragma unroll
        for (int i = 0; i < ROWS / RP; i++) {
          const bool in = r0 + i * RP < n;
          cp_async16(d + i * RP * LDS * 2, in ? s + i * RP * D : src, in ? 16 : 0);
        }
      }
      cp_commit();
      return;
    }
  }
  for (int c = threadIdx.x; c < ROWS * C; c += NV__GPU_SDPA_THREADS) {
    int r = c / C, cc = c - r * C;
    uint16_t *dst = tile + r * LDS + cc * 8;
    if (vec) {
      const uint16_t *s = r < n ? src + (row0 + r) * D + cc * 8 : src;
      cp_async16(smem_addr(dst), s, r < n ? 16 : 0);
    } else if (r >= n) {
      *(uint4 *)dst = make_uint4(0, 0, 0, 0);
    } else {
      const uint16_t *s = src + (row0 + r) * D + cc * 8;
      for (int x = 0; x < 8; x++) dst[x] = s[x];
    }
  }
  cp_commit();
}

/* 2^x on the SFU (ex2.approx: relative error about 2^-22, subnormal results flushed to 0):
 * 2^-inf = 0 and NaN stays NaN. */
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* A masked score (natural units) in the tensor-core kernel's units, log2(e) times larger, so
 * that exponentials are single ex2 instructions: -inf stays -inf and NaN stays NaN, and no
 * finite score becomes -inf (float32's lowest value, a masked score, stays the lowest finite
 * value, so a fully masked row still weighs its keys equally). */
__device__ __forceinline__ float to_log2(float x) {
  float y = x * 1.4426950408889634f;
  return y < -FLT_MAX && x != -INFINITY ? -FLT_MAX : y;
}

/* 16-row tiles of queries per warp of the tensor-core kernel: two for D <= 128 (each k and v
 * fragment loaded from shared memory feeds two mma, halving the shared-memory traffic a
 * product, which bounds the kernel otherwise; 128 queries a block), one for D = 256 (whose
 * output accumulators fill the registers; 64 queries a block). */
constexpr int mma_mt(int d) { return d <= 128 ? 2 : 1; }

/* Two blocks an SM (8 warps), up to 255 registers a thread (ptxas, sm_90, CUDA 13, no spills:
 * 223 for D = 64, 239 for 80, 246 for 96, 255 for 128, 247 for 256). */
template <int DT, int D>
__global__ void __launch_bounds__(NV__GPU_SDPA_THREADS, 2)
    sdpa_mma(void *out, const void *q, const void *k, const void *v, const void *mask,
             const void *sinks, void *part, P p) {
  (void)part;
  constexpr int MT = mma_mt(D), WR = 16 * MT; /* query rows per warp */
  constexpr int BR = WR * NV__GPU_SDPA_THREADS / 32, BC = NV__GPU_SDPA_MMA_KEYS, LDS = D + 8;
  constexpr int NT = D / 8;  /* 8-wide tiles of the output row (and its 16-byte chunks) */
  constexpr int NS = BC / 8; /* 8-wide tiles of a step's scores */
  static_assert((NS & (NS - 1)) == 0, "the row reductions pair the score tiles");
  extern __shared__ __align__(16) uint16_t tiles[];
  uint16_t *Qs = tiles, *Ks = Qs + BR * LDS, *Vs = Ks + BC * LDS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int ntq = (p.Lq + BR - 1) / BR;
  int64_t bid = blockIdx.x;
  /* the longest causal tiles (the last queries) first */
  const int qt = ntq - 1 - (int)(bid % ntq);
  bid /= ntq;
  const int hq = (int)(bid % p.Hq), b = (int)(bid / p.Hq), hkv = hq / p.G;
  const int q0 = qt * BR, nq = p.Lq - q0 < BR ? p.Lq - q0 : BR, shift = p.Lk - p.Lq;
  const uint16_t *qb = (const uint16_t *)q + p.off[NV__GPU_SDPA_Q] +
                       ((int64_t)b * p.Hq + hq) * p.Lq * D;
  const uint16_t *kb = (const uint16_t *)k + p.off[NV__GPU_SDPA_K] +
                       ((int64_t)b * p.Hkv + hkv) * p.Lk * D;
  const uint16_t *vb = (const uint16_t *)v + p.off[NV__GPU_SDPA_V] +
                       ((int64_t)b * p.Hkv + hkv) * p.Lk * D;
  const bool vec = (((uintptr_t)qb | (uintptr_t)kb | (uintptr_t)vb) & 15) == 0;
  load_tile<D, BR>(Qs, qb, q0, nq, vec);

  /* Scores, maxima and m are in log2 units (natural units times log2(e)). Thread (g, t) of
   * the warp holds rows r0w + 16 mt + g and + 8 of each m-tile mt (r0w: the warp's first). */
  const float sl2 = p.scale * 1.4426950408889634f;
  const int r0w = q0 + warp * WR;
  float m[MT][2], l[MT][2];
  {
    float m0 = -INFINITY, l0 = 0.0f;
    if (p.sinks) {
      float s = sink_of(p, sinks, hq);
      m0 = to_log2(s);
      /* the row sum is split over the row's 4 threads and added up at the end: one holds it */
      l0 = (t == 0 && s != -INFINITY) ? 1.0f : 0.0f;
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      m[mt][0] = m[mt][1] = m0;
      l[mt][0] = l[mt][1] = l0;
    }
  }
  float o[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int i = 0; i < NT; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  const int kend = key_end(p, q0, q0 + nq - 1);
  /* m-tile mt's q fragments are 16 rows (16 LDS elements each) further */
  const uint32_t qaddr = smem_addr(Qs + (warp * WR + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS +
                                   (lane >> 4) * 8);
  const uint32_t kaddr = smem_addr(Ks + ((lane & 7) + (lane >> 4) * 8) * LDS +
                                   ((lane >> 3) & 1) * 8);
  const uint32_t vaddr = smem_addr(Vs + ((lane & 7) + ((lane >> 3) & 1) * 8) * LDS +
                                   (lane >> 4) * 8);

  /* Flash attention 2's overlap: v of a step loads while its scores compute, k of the next step
   * while its p·v computes. Groups in flight per thread: (q, k0); then per step v_j, k_j+1.
   * kend >= 1 (Lk = 0 never launches), so the loop runs at least once and its last step
   * waits for every group. */
  load_tile<D, BC>(Ks, kb, 0, kend < BC ? kend : BC, vec);
  for (int j0 = 0; j0 < kend; j0 += BC) {
    const int nk = kend - j0 < BC ? kend - j0 : BC;
    load_tile<D, BC>(Vs, vb, j0, nk, vec);
    cp_wait<1>(); /* q and k_j have landed (v_j may still be in flight) */
    __syncthreads();
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int i = 0; i < NS; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
        ldsm_x4(qaddr + (mt * 16 * LDS + kk * 16) * 2, a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
      for (int np = 0; np < BC / 16; np++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(kaddr + (np * 16 * LDS + kk * 16) * 2, b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma16816<DT>(s[mt][2 * np], a[mt], b0, b1);
          mma16816<DT>(s[mt][2 * np + 1], a[mt], b2, b3);
        }
      }
    }
    __syncthreads(); /* every warp is done with k_j */
    const bool more = j0 + BC < kend;
    if (more) load_tile<D, BC>(Ks, kb, j0 + BC, kend - j0 - BC < BC ? kend - j0 - BC : BC, vec);
    /* Scale and mask. A plain step (no mask array, all BC keys present, causal: its last key
     * visible to the block's first query, and a positive scale) needs no per-score test
     * (block-uniform: no divergence; rows past Lq are never stored) and keeps the raw
     * products: the maximum scales with them (rounding is monotonic) and each exponent is one
     * fma, 2^(s·sl2 - mu). Other steps scale, mask and convert each score. */
    const bool plain = p.mask == 0 && nk == BC && (!p.causal || j0 + BC - 1 <= q0 + shift) &&
                       sl2 > 0.0f;
    const float f = plain ? sl2 : 1.0f;
    if (!plain) {
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < NS; i++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            int row = r0w + mt * 16 + g + (e >> 1) * 8, col = j0 + i * 8 + 2 * t + (e & 1);
            float x = s[mt][i][e] * p.scale;
            if (col >= j0 + nk) x = -INFINITY;
            else if (row < p.Lq) x = masked(p, mask, b, hq, row, col, x);
            s[mt][i][e] = to_log2(x);
          }
    }
    /* the rows' new maxima: a tree over the thread's 16 scores of each row (short dependency
     * chains), then over the row's 4 threads */
    float corr[MT][2], mu[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float r[NS];
#pragma unroll
        for (int i = 0; i < NS; i++) r[i] = fmaxf(s[mt][i][2 * h], s[mt][i][2 * h + 1]);
#pragma unroll
        for (int w = NS / 2; w > 0; w >>= 1)
#pragma unroll
          for (int i = 0; i < w; i++) r[i] = fmaxf(r[i], r[i + w]);
        float mx = r[0];
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx *= f;
        float mnew = fmaxf(m[mt][h], mx);
        mu[mt][h] = ref_of(mnew);
        corr[mt][h] = fast_exp2(m[mt][h] - mu[mt][h]);
        m[mt][h] = mnew;
      }
    /* the output so far and (below) the sums rescaled to the new maxima */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int i = 0; i < NT; i++) {
        o[mt][i][0] *= corr[mt][0];
        o[mt][i][1] *= corr[mt][0];
        o[mt][i][2] *= corr[mt][1];
        o[mt][i][3] *= corr[mt][1];
      }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int i = 0; i < NS; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[mt][i][e] = fast_exp2(fmaf(s[mt][i][e], f, -mu[mt][e >> 1]));
    /* the rows' sums of this step, as trees */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        float r[NS];
#pragma unroll
        for (int i = 0; i < NS; i++) r[i] = s[mt][i][2 * h] + s[mt][i][2 * h + 1];
#pragma unroll
        for (int w = NS / 2; w > 0; w >>= 1)
#pragma unroll
          for (int i = 0; i < w; i++) r[i] += r[i + w];
        l[mt][h] = l[mt][h] * corr[mt][h] + r[0];
      }
    if (more) cp_wait<1>(); /* v_j has landed (k_j+1 may still be in flight) */
    else cp_wait<0>();
    __syncthreads();
    /* o += p·v: the score accumulators of key tiles 2kk and 2kk+1 are the A operand */
#pragma unroll
    for (int kk = 0; kk < BC / 16; kk++) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        a[mt][0] = pack2<DT>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack2<DT>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack2<DT>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack2<DT>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(vaddr + (kk * 16 * LDS + dp * 16) * 2, b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma16816<DT>(o[mt][2 * dp], a[mt], b0, b1);
          mma16816<DT>(o[mt][2 * dp + 1], a[mt], b2, b3);
        }
      }
    }
    __syncthreads(); /* every warp is done with v_j before v_j+1 overwrites it */
  }
  /* The output goes through the warp's own WR rows of the q tile (no other warp reads them,
   * and this warp's last read of them is behind it), then to global memory in 16-byte chunks
   * per lane (whole rows: full sectors). */
  uint16_t *os = Qs + warp * WR * LDS;
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float lh = l[mt][h];
      lh += __shfl_xor_sync(0xffffffffu, lh, 1);
      lh += __shfl_xor_sync(0xffffffffu, lh, 2);
      inv[h] = 1.0f / lh;
    }
    uint16_t *ra = os + (mt * 16 + g) * LDS, *rb = ra + 8 * LDS;
#pragma unroll
    for (int i = 0; i < NT; i++) {
      const int col = i * 8 + 2 * t;
      *(uint32_t *)(ra + col) = pack2<DT>(o[mt][i][0] * inv[0], o[mt][i][1] * inv[0]);
      *(uint32_t *)(rb + col) = pack2<DT>(o[mt][i][2] * inv[1], o[mt][i][3] * inv[1]);
    }
  }
  __syncwarp();
  uint16_t *ob = (uint16_t *)out + p.off[NV__GPU_SDPA_OUT] + ((int64_t)b * p.Hq + hq) * p.Lq * D;
  const bool ovec = ((uintptr_t)ob & 15) == 0;
  for (int c = lane; c < WR * NT; c += 32) {
    const int r = c / NT, cc = c - r * NT;
    if (r0w + r >= p.Lq) break; /* rows only grow with c */
    const uint16_t *src = os + r * LDS + cc * 8;
    uint16_t *dst = ob + (int64_t)(r0w + r) * D + cc * 8;
    if (ovec) {
      *(uint4 *)dst = *(const uint4 *)src;
    } else {
#pragma unroll
      for (int x = 0; x < 8; x++) dst[x] = src[x];
    }
  }
}

/* Functions whose shared-memory limit was raised, per device (bit d: device d). */
constexpr int NFUNC = 16;
std::atomic<const void *> prepared_func[NFUNC];
std::atomic<uint64_t> prepared_dev[NFUNC];
std::atomic<uint32_t> optin_limit[64];

}  // namespace

extern "C" {

const void *nv__gpu_sdpa_simt(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)sdpa_simt<DT_F16>;
    case DT_BF16: return (const void *)sdpa_simt<DT_BF16>;
    case DT_F32: return (const void *)sdpa_simt<DT_F32>;
    default: return NULL;
  }
}

#define NV_SDPA_DECODE_CASES(DT)                           \
  switch (c) {                                             \
    case 1: return (const void *)sdpa_decode<DT, 1>;       \
    case 2: return (const void *)sdpa_decode<DT, 2>;       \
    case 4: return (const void *)sdpa_decode<DT, 4>;       \
    case 8: return (const void *)sdpa_decode<DT, 8>;       \
    default: return NULL;                                  \
  }

const void *nv__gpu_sdpa_decode(int dtype, int d) {
  int c = d <= 32 ? 1 : d <= 64 ? 2 : d <= 128 ? 4 : d <= 256 ? 8 : 0;
  if (dtype == DT_F16) NV_SDPA_DECODE_CASES(DT_F16)
  if (dtype == DT_BF16) NV_SDPA_DECODE_CASES(DT_BF16)
  if (dtype == DT_F32) NV_SDPA_DECODE_CASES(DT_F32)
  return NULL;
}

/* The vectorized decode kernel of T lanes per key and NC chunks per lane for `mr` rows (PG:
 * paged). */
#define NV_SDPA_DVEC_ROWS(DT, T, NC)                                \
  switch (mr) {                                                      \
    case 1: return (const void *)sdpa_decode_vec<DT, T, NC, 1, PG>;  \
    case 2: return (const void *)sdpa_decode_vec<DT, T, NC, 2, PG>;  \
    default: return (const void *)sdpa_decode_vec<DT, T, NC, 4, PG>; \
  }
/* ... for `c` <= 32 chunks per row: the fewest lanes (at least 4) that hold one chunk each */
#define NV_SDPA_DVEC_CASES(DT)           \
  if (c <= 4) NV_SDPA_DVEC_ROWS(DT, 4, 1)   \
  if (c <= 8) NV_SDPA_DVEC_ROWS(DT, 8, 1)   \
  if (c <= 16) NV_SDPA_DVEC_ROWS(DT, 16, 1) \
  NV_SDPA_DVEC_ROWS(DT, 32, 1)

}  /* extern "C" */

template <bool PG> static const void *decode_vec(int dtype, int d, int rows) {
  if (d < 0 || d > 256 || rows < 1 || rows > NV__GPU_SDPA_DECODE_ROWS) return NULL;
  const int mr = rows == 1 ? 1 : rows == 2 ? 2 : 4;
  if (dtype == DT_F16) {
    const int c = (d + 7) / 8;
    NV_SDPA_DVEC_CASES(DT_F16)
  }
  if (dtype == DT_BF16) {
    const int c = (d + 7) / 8;
    NV_SDPA_DVEC_CASES(DT_BF16)
  }
  if (dtype == DT_F32) {
    const int c = (d + 3) / 4;
    if (c > 32) NV_SDPA_DVEC_ROWS(DT_F32, 32, 2) /* 129..256 float32 elements */
    NV_SDPA_DVEC_CASES(DT_F32)
  }
  return NULL;
}

extern "C" {

const void *nv__gpu_sdpa_decode_vec(int dtype, int d, int rows) {
  return decode_vec<false>(dtype, d, rows);
}

const void *nv__gpu_sdpa_decode_vec_paged(int dtype, int d, int rows) {
  return decode_vec<true>(dtype, d, rows);
}

const void *nv__gpu_sdpa_combine(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)sdpa_combine<DT_F16>;
    case DT_BF16: return (const void *)sdpa_combine<DT_BF16>;
    case DT_F32: return (const void *)sdpa_combine<DT_F32>;
    default: return NULL;
  }
}

#define NV_SDPA_MMA_CASES(DT)                              \
  switch (d) {                                             \
    case 64: return (const void *)sdpa_mma<DT, 64>;        \
    case 80: return (const void *)sdpa_mma<DT, 80>;        \
    case 96: return (const void *)sdpa_mma<DT, 96>;        \
    case 128: return (const void *)sdpa_mma<DT, 128>;      \
    case 256: return (const void *)sdpa_mma<DT, 256>;      \
    default: return NULL;                                  \
  }

const void *nv__gpu_sdpa_mma(int dtype, int d) {
  if (dtype == DT_F16) NV_SDPA_MMA_CASES(DT_F16)
  if (dtype == DT_BF16) NV_SDPA_MMA_CASES(DT_BF16)
  return NULL;
}

uint32_t nv__gpu_sdpa_simt_smem(int rows, int keys, int d, int dv) {
  uint64_t floats = (uint64_t)rows * d + (uint64_t)keys * (d + 1) + (uint64_t)keys * dv +
                    (uint64_t)rows * keys + (uint64_t)rows * dv + 3ull * rows;
  return floats * 4 > UINT32_MAX ? UINT32_MAX : (uint32_t)(floats * 4);
}

int nv__gpu_sdpa_mma_rows(int d) { return 16 * mma_mt(d) * (NV__GPU_SDPA_THREADS / 32); }

uint32_t nv__gpu_sdpa_mma_smem(int d) {
  return (uint32_t)(nv__gpu_sdpa_mma_rows(d) + 2 * NV__GPU_SDPA_MMA_KEYS) * (uint32_t)(d + 8) *
         2u;
}

int nv__gpu_sdpa_prepare(const void *func, int device, uint32_t *limit) {
  if (device < 0 || device >= 64) return (int)cudaErrorInvalidDevice;
  uint32_t lim = optin_limit[device].load(std::memory_order_acquire);
  cudaError_t e = cudaSuccess;
  if (!lim) {
    int v = 0;
    e = cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) return (int)e;
    lim = (uint32_t)v;
    optin_limit[device].store(lim, std::memory_order_release);
  }
  *limit = lim;
  int slot = -1;
  for (int i = 0; i < NFUNC && slot < 0; i++) {
    const void *cur = prepared_func[i].load(std::memory_order_acquire);
    if (cur == func) slot = i;
    else if (!cur && prepared_func[i].compare_exchange_strong(cur, func)) slot = i;
    else if (cur == func) slot = i; /* another thread claimed it for this function */
  }
  uint64_t bit = 1ull << device;
  if (slot >= 0 && (prepared_dev[slot].load(std::memory_order_acquire) & bit)) return 0;
  /* The limit is a property of the function on the device: raise it with that device
   * current, then give the thread its device back. */
  int old = 0;
  e = cudaGetDevice(&old);
  if (e == cudaSuccess && old != device) e = cudaSetDevice(device);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lim);
  if (old != device) {
    cudaError_t e2 = cudaSetDevice(old);
    if (e == cudaSuccess) e = e2;
  }
  if (e == cudaSuccess && slot >= 0) prepared_dev[slot].fetch_or(bit, std::memory_order_acq_rel);
  return (int)e;
}

}  /* extern "C" */
