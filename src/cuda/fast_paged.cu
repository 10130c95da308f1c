/* The general paged-attention kernel (the CPU kernel's definition, src/cpu/fast_paged.c): any
 * float dtype, head size, group size and chunk length (chunked prefill, and decode that SDPA's
 * paged decode kernel does not take). A block takes one query row (token, head) over one split
 * of the keys it sees: the scaled q row in shared memory, each of the 4 warps every 4th key
 * (read through the block table: the score a warp sum of the lanes' strided products, the
 * online softmax state in registers, the same in every lane, the output accumulators of the
 * warp in shared memory, element d held by lane d % 32), then the warps merge into the output
 * or the split's partial; the combine kernel reduces the partials, one block per row.
 * Computed in float32 (float64 for float64). A context length outside [0, M BS] or a block id
 * read outside [0, NB) raises the node's check record and reads nothing; a row without keys
 * (or whose scores are all -inf) gives 0. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/fast_paged_kernels.h"

using namespace nvg;

namespace {

typedef nv__gpu_pattn_params PP;
constexpr int NT = NV__GPU_PATTN_THREADS, NW = NT / 32;

__device__ __forceinline__ float exp_of(float x) { return expf(x); }
__device__ __forceinline__ double exp_of(double x) { return exp(x); }

/* The reference a running maximum subtracts: itself, or 0 while it is -inf. */
template <typename C> __device__ __forceinline__ C ref_of(C m) { return m == -INFINITY ? 0 : m; }

template <typename C> __device__ __forceinline__ C warp_sum(C x) {
#pragma unroll
  for (int w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
  return x;
}

template <int DT>
__global__ void __launch_bounds__(NT)
    pattn_rows(void *out, const void *q, const void *k, const void *v, const void *tables,
               const void *lens, void *part, PP p) {
  typedef typename cio<DT>::S S;
  typedef typename cio<DT>::C C;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ C wm[NW], wl[NW];
  __shared__ int bad_id;
  C *qs = (C *)smem, *os = qs + p.D; /* q [D], the warps' output rows [NW][Dv] */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int D = p.D, Dv = p.Dv, BS = p.BS;
  const int64_t bid = blockIdx.x, row = bid / p.nsplit; /* row = token Hq + head */
  const int split = (int)(bid % p.nsplit);
  const int64_t tok = row / p.Hq, s = tok / p.c, i = tok % p.c;
  const int hq = (int)(row % p.Hq), hkv = hq / p.G;
  const S *qr = (const S *)q + p.off[NV__GPU_PATTN_Q] + row * D;
  for (int d = tid; d < D; d += NT) qs[d] = cio<DT>::ld(qr[d]) * (C)p.scale;
  for (int e = tid; e < NW * Dv; e += NT) os[e] = 0;
  if (tid == 0) bad_id = 0;
  /* the keys this query sees: j <= L - c + i within [0, L), and this split's part of them */
  const int64_t L = __ldg((const int32_t *)lens + p.off[NV__GPU_PATTN_LENS] + s);
  int64_t kend = 0;
  if (L < 0 || L > p.cap) {
    if (tid == 0) nv__gpu_raise_bad(p.bad, L, p.cap + 1);
  } else {
    kend = L - p.c + i + 1;
    if (kend < 0) kend = 0;
  }
  const int32_t *table = (const int32_t *)tables + p.off[NV__GPU_PATTN_TABLES] + s * p.M;
  const int64_t ks64 = (int64_t)split * p.split_len;
  const int64_t ks = ks64 < kend ? ks64 : kend;
  int64_t ke = ks64 + p.split_len < kend ? ks64 + p.split_len : kend;
  __syncthreads();
  if (ke > ks)
    for (int64_t blk = ks / BS + tid; blk <= (ke - 1) / BS; blk += NT) {
      const int id = __ldg(table + blk);
      if (id < 0 || id >= p.NB) {
        nv__gpu_raise_bad(p.bad, id, p.NB);
        bad_id = 1;
      }
    }
  __syncthreads();
  if (bad_id) ke = ks;
  const S *kb = (const S *)k + p.off[NV__GPU_PATTN_K] + (int64_t)hkv * D;
  const S *vb = (const S *)v + p.off[NV__GPU_PATTN_V] + (int64_t)hkv * Dv;
  const int64_t kst = (int64_t)p.Hkv * D, vst = (int64_t)p.Hkv * Dv;
  C m = -INFINITY, l = 0, *o = os + warp * Dv;
  for (int64_t j = ks + warp; j < ke; j += NW) {
    const int64_t slot = (int64_t)__ldg(table + j / BS) * BS + j % BS;
    const S *kr = kb + slot * kst, *vr = vb + slot * vst;
    C sc = 0;
    for (int d = lane; d < D; d += 32) sc += qs[d] * cio<DT>::ld(kr[d]);
    sc = warp_sum(sc);
    /* the maximum ignores a NaN score: its exponential makes l and o NaN anyway */
    const C mnew = sc > m ? sc : m, mu = ref_of(mnew);
    const C corr = exp_of(m - mu), e = exp_of(sc - mu);
    l = l * corr + e;
    m = mnew;
    for (int d = lane; d < Dv; d += 32) o[d] = o[d] * corr + e * cio<DT>::ld(vr[d]);
  }
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
  }
  __syncthreads();
  C M = -INFINITY;
#pragma unroll
  for (int w = 0; w < NW; w++) M = wm[w] > M ? wm[w] : M;
  const C mu = ref_of(M);
  C den = 0, f[NW];
#pragma unroll
  for (int w = 0; w < NW; w++) {
    f[w] = exp_of(wm[w] - mu);
    den += wl[w] * f[w];
  }
  if (p.nsplit == 1) {
    S *orow = (S *)out + p.off[NV__GPU_PATTN_OUT] + row * Dv;
    const C inv = den == 0 ? 0 : 1 / den;
    for (int d = tid; d < Dv; d += NT) {
      C acc = 0;
#pragma unroll
      for (int w = 0; w < NW; w++) acc += os[w * Dv + d] * f[w];
      orow[d] = cio<DT>::st(acc * inv);
    }
  } else {
    C *pt = (C *)part + p.off[NV__GPU_PATTN_PART] + (row * p.nsplit + split) * (int64_t)(Dv + 2);
    for (int d = tid; d < Dv; d += NT) {
      C acc = 0;
#pragma unroll
      for (int w = 0; w < NW; w++) acc += os[w * Dv + d] * f[w];
      pt[d] = acc;
    }
    if (tid == 0) {
      pt[Dv] = M;
      pt[Dv + 1] = den;
    }
  }
}

/* Output row blockIdx.x from its splits' partials, each weighted by exp(its maximum - the
 * largest); every thread reads the splits' maxima and denominators itself. */
template <int DT>
__global__ void __launch_bounds__(NT)
    pattn_combine(void *out, const void *q, const void *k, const void *v, const void *tables,
                  const void *lens, void *part, PP p) {
  (void)q;
  (void)k;
  (void)v;
  (void)tables;
  (void)lens;
  typedef typename cio<DT>::S S;
  typedef typename cio<DT>::C C;
  const int Dv = p.Dv, ns = p.nsplit;
  const int64_t row = blockIdx.x, PF = Dv + 2;
  const C *pt = (const C *)part + p.off[NV__GPU_PATTN_PART] + row * ns * PF;
  C M = -INFINITY;
  for (int s = 0; s < ns; s++) M = pt[s * PF + Dv] > M ? pt[s * PF + Dv] : M;
  const C mu = ref_of(M);
  C den = 0;
  for (int s = 0; s < ns; s++) den += pt[s * PF + Dv + 1] * exp_of(pt[s * PF + Dv] - mu);
  const C inv = den == 0 ? 0 : 1 / den;
  S *orow = (S *)out + p.off[NV__GPU_PATTN_OUT] + row * Dv;
  for (int d = threadIdx.x; d < Dv; d += NT) {
    C acc = 0;
    for (int s = 0; s < ns; s++) acc += pt[s * PF + d] * exp_of(pt[s * PF + Dv] - mu);
    orow[d] = cio<DT>::st(acc * inv);
  }
}

}  // namespace

extern "C" {

const void *nv__gpu_pattn_rows(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)pattn_rows<DT_F16>;
    case DT_BF16: return (const void *)pattn_rows<DT_BF16>;
    case DT_F32: return (const void *)pattn_rows<DT_F32>;
    case DT_F64: return (const void *)pattn_rows<DT_F64>;
    default: return NULL;
  }
}

const void *nv__gpu_pattn_combine(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)pattn_combine<DT_F16>;
    case DT_BF16: return (const void *)pattn_combine<DT_BF16>;
    case DT_F32: return (const void *)pattn_combine<DT_F32>;
    case DT_F64: return (const void *)pattn_combine<DT_F64>;
    default: return NULL;
  }
}

uint32_t nv__gpu_pattn_smem(int dtype, int d, int dv) {
  const uint64_t es = dtype == DT_F64 ? sizeof(double) : sizeof(float);
  const uint64_t bytes = ((uint64_t)d + (uint64_t)NW * dv) * es;
  return bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

}  /* extern "C" */
