/* The scatter family's CUDA kernels: scatter / scatter_add / _prod / _max / _min and
 * put_along_axis (one walk over the updates), slice_update_add / _prod / _max / _min and
 * slice_update_dynamic (a walk over the region), masked_scatter (counts, scan, rows, copy) and
 * as_strided_vjp (accumulate, store). The host side is scatter.c; the parameter blocks are in
 * scatter_kernels.h.
 *
 * Element combination is the CPU's (src/cpu/index_common.c): integers wrap, float16/bfloat16
 * combine in float32 and round once per step, maximum/minimum keep NaN as the CPU's FMAXN /
 * FMINN, complex orders by real part first. Scatters combine with atomics: native where the
 * GPU has them (add of 32/64-bit integers, float32, float64, float16, bfloat16 and complex64
 * as two floats; max/min of 32/64-bit integers; bool's or/and on the containing word), else a
 * compare-and-swap loop of the CPU's combination (8/16-bit integers through the containing
 * 32-bit word). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/scatter_kernels.h"

using namespace nvg;

namespace {

typedef unsigned long long u64;
constexpr int T = NV__GPU_SCATTER_THREADS;
constexpr int D = NV__GPU_SCATTER_DIMS;
constexpr int PER = 4; /* elements of the last walk dim per work item */

/* n / d, through 32-bit division when both fit (the common case). */
__device__ __forceinline__ u64 udiv(u64 n, u64 d) {
  if (((n | d) >> 32) == 0) return (uint32_t)n / (uint32_t)d;
  return n / d;
}

/* An index element of integer dtype `dt`, as the CPU's nv__ix_load: uint64 values above
 * INT64_MAX saturate (so they stay out of range), a non-integer dtype reads as INT64_MAX. */
__device__ __forceinline__ long long load_index(const char *base, int dt, long long i) {
  switch (dt) {
    case DT_U8: return ((const uint8_t *)base)[i];
    case DT_U16: return ((const uint16_t *)base)[i];
    case DT_U32: return ((const uint32_t *)base)[i];
    case DT_U64: {
      u64 u = ((const u64 *)base)[i];
      return u > (u64)INT64_MAX ? INT64_MAX : (long long)u;
    }
    case DT_I8: return ((const int8_t *)base)[i];
    case DT_I16: return ((const int16_t *)base)[i];
    case DT_I32: return ((const int32_t *)base)[i];
    case DT_I64: return ((const long long *)base)[i];
    default: return INT64_MAX;
  }
}

/* ---- Element combination ---- */

/* Storage (S) and value (V, for integer comparisons) types by dtype. */
template <int DT> struct sto;
#define NVG_STO(CODE, ST, VT) \
  template <> struct sto<CODE> { typedef ST S; typedef VT V; };
NVG_STO(DT_BOOL, uint8_t, uint8_t)
NVG_STO(DT_U8, uint8_t, uint8_t)
NVG_STO(DT_U16, uint16_t, uint16_t)
NVG_STO(DT_U32, uint32_t, uint32_t)
NVG_STO(DT_U64, u64, u64)
NVG_STO(DT_I8, uint8_t, int8_t)
NVG_STO(DT_I16, uint16_t, int16_t)
NVG_STO(DT_I32, uint32_t, int32_t)
NVG_STO(DT_I64, u64, long long)
NVG_STO(DT_F16, uint16_t, float)
NVG_STO(DT_BF16, uint16_t, float)
NVG_STO(DT_F32, uint32_t, float)
NVG_STO(DT_F64, u64, double)
NVG_STO(DT_C64, u64, float)
#undef NVG_STO

/* The dtype code standing for plain element moves of `size` bytes (assignments). */
template <int SIZE> struct move_dt;
template <> struct move_dt<1> { enum { DT = DT_U8 }; };
template <> struct move_dt<2> { enum { DT = DT_U16 }; };
template <> struct move_dt<4> { enum { DT = DT_U32 }; };
template <> struct move_dt<8> { enum { DT = DT_U64 }; };

template <typename F> __device__ __forceinline__ F fmaxn(F x, F y) {
  return x > y || x != x ? x : y;
}
template <typename F> __device__ __forceinline__ F fminn(F x, F y) {
  return x < y || x != x ? x : y;
}

template <int MODE> __device__ __forceinline__ float comb_f(float a, float b) {
  if (MODE == NV__GPU_SC_ADD) return __fadd_rn(a, b);
  if (MODE == NV__GPU_SC_PROD) return __fmul_rn(a, b);
  if (MODE == NV__GPU_SC_MAX) return fmaxn(a, b);
  return fminn(a, b);
}
template <int MODE> __device__ __forceinline__ double comb_d(double a, double b) {
  if (MODE == NV__GPU_SC_ADD) return __dadd_rn(a, b);
  if (MODE == NV__GPU_SC_PROD) return __dmul_rn(a, b);
  if (MODE == NV__GPU_SC_MAX) return fmaxn(a, b);
  return fminn(a, b);
}

/* x (op) y on the storage bits: the CPU combiner of MODE for DT. */
template <int DT, int MODE>
__device__ __forceinline__ typename sto<DT>::S comb(typename sto<DT>::S x,
                                                    typename sto<DT>::S y) {
  typedef typename sto<DT>::S S;
  typedef typename sto<DT>::V V;
  if constexpr (MODE == NV__GPU_SC_ASSIGN) {
    return y;
  } else if constexpr (DT == DT_BOOL) {
    return MODE == NV__GPU_SC_ADD || MODE == NV__GPU_SC_MAX ? (S)(x | y) : (S)(x & y);
  } else if constexpr (DT == DT_F16) {
    return f32_to_f16(comb_f<MODE>(f16_to_f32(x), f16_to_f32(y)));
  } else if constexpr (DT == DT_BF16) {
    return f32_to_bf16(comb_f<MODE>(bf16_to_f32(x), bf16_to_f32(y)));
  } else if constexpr (DT == DT_F32) {
    return __float_as_uint(comb_f<MODE>(__uint_as_float(x), __uint_as_float(y)));
  } else if constexpr (DT == DT_F64) {
    return (u64)__double_as_longlong(
        comb_d<MODE>(__longlong_as_double((long long)x), __longlong_as_double((long long)y)));
  } else if constexpr (DT == DT_C64) {
    float ar = __uint_as_float((uint32_t)x), ai = __uint_as_float((uint32_t)(x >> 32));
    float br = __uint_as_float((uint32_t)y), bi = __uint_as_float((uint32_t)(y >> 32));
    if constexpr (MODE == NV__GPU_SC_MAX || MODE == NV__GPU_SC_MIN) {
      bool less = ar < br || (ar == br && ai < bi), nan = ar != ar || ai != ai;
      if (MODE == NV__GPU_SC_MAX) return nan || !less ? x : y;
      return nan || less ? x : y;
    } else {
      float rr, ri;
      if (MODE == NV__GPU_SC_ADD) {
        rr = __fadd_rn(ar, br);
        ri = __fadd_rn(ai, bi);
      } else {
        rr = __fsub_rn(__fmul_rn(ar, br), __fmul_rn(ai, bi));
        ri = __fadd_rn(__fmul_rn(ar, bi), __fmul_rn(ai, br));
      }
      return (u64)__float_as_uint(rr) | ((u64)__float_as_uint(ri) << 32);
    }
  } else {
    /* Integers: add and multiply wrap in the unsigned type (through unsigned int below 32
     * bits, so nothing overflows a signed type); max/min compare as the dtype. */
    if (MODE == NV__GPU_SC_ADD) return (S)(x + y);
    if constexpr (MODE == NV__GPU_SC_PROD) {
      if constexpr (sizeof(S) < 8) return (S)((unsigned)x * (unsigned)y);
      else return (S)(x * y);
    }
    V a = (V)x, b = (V)y;
    if (MODE == NV__GPU_SC_MAX) return a > b ? x : y;
    return a < b ? x : y;
  }
}

/* *a = comb(*a, y) by compare-and-swap on a whole word W (the element's own width). */
template <int DT, int MODE, class W>
__device__ __forceinline__ void cas_word(W *a, typename sto<DT>::S y) {
  W old = *(volatile W *)a, as;
  do {
    as = old;
    W nv = comb<DT, MODE>(as, y);
    if (nv == as) return;
    old = atomicCAS(a, as, nv);
  } while (old != as);
}

/* *p = comb(*p, y) atomically by compare-and-swap (sub-word types in their 32-bit word). */
template <int DT, int MODE>
__device__ __forceinline__ void cas_comb(typename sto<DT>::S *p, typename sto<DT>::S y) {
  typedef typename sto<DT>::S S;
  if constexpr (sizeof(S) == 8) {
    cas_word<DT, MODE>((u64 *)p, y);
  } else if constexpr (sizeof(S) == 4) {
    cas_word<DT, MODE>((unsigned *)p, y);
  } else {
    unsigned *w = (unsigned *)((uintptr_t)p & ~(uintptr_t)3);
    unsigned sh = (unsigned)((uintptr_t)p & 3) * 8u;
    unsigned m = (sizeof(S) == 1 ? 0xffu : 0xffffu) << sh;
    unsigned old = *(volatile unsigned *)w, as;
    do {
      as = old;
      S cur = (S)((as & m) >> sh);
      S nv = comb<DT, MODE>(cur, y);
      if (nv == cur) return;
      old = atomicCAS(w, as, (as & ~m) | ((unsigned)nv << sh));
    } while (old != as);
  }
}

/* *p = comb(*p, y) atomically: native atomics where the GPU has them. */
template <int DT, int MODE>
__device__ __forceinline__ void atomic_comb(typename sto<DT>::S *p, typename sto<DT>::S y) {
  constexpr bool add = MODE == NV__GPU_SC_ADD, mx = MODE == NV__GPU_SC_MAX,
                 mn = MODE == NV__GPU_SC_MIN;
  if constexpr (add && (DT == DT_U32 || DT == DT_I32)) {
    atomicAdd((unsigned *)p, (unsigned)y);
  } else if constexpr (add && (DT == DT_U64 || DT == DT_I64)) {
    atomicAdd((u64 *)p, (u64)y);
  } else if constexpr (add && DT == DT_F32) {
    atomicAdd((float *)p, __uint_as_float(y));
  } else if constexpr (add && DT == DT_F64) {
    atomicAdd((double *)p, __longlong_as_double((long long)y));
  } else if constexpr (add && DT == DT_F16) {
    atomicAdd((__half *)p, __ushort_as_half(y));
  } else if constexpr (add && DT == DT_BF16) {
    atomicAdd((__nv_bfloat16 *)p, __ushort_as_bfloat16(y));
  } else if constexpr (add && DT == DT_C64) {
    float *f = (float *)p;
    atomicAdd(f, __uint_as_float((uint32_t)y));
    atomicAdd(f + 1, __uint_as_float((uint32_t)(y >> 32)));
  } else if constexpr ((mx || mn) && DT == DT_I32) {
    if (mx) atomicMax((int *)p, (int)y);
    else atomicMin((int *)p, (int)y);
  } else if constexpr ((mx || mn) && DT == DT_U32) {
    if (mx) atomicMax((unsigned *)p, (unsigned)y);
    else atomicMin((unsigned *)p, (unsigned)y);
  } else if constexpr ((mx || mn) && DT == DT_I64) {
    if (mx) atomicMax((long long *)p, (long long)y);
    else atomicMin((long long *)p, (long long)y);
  } else if constexpr ((mx || mn) && DT == DT_U64) {
    if (mx) atomicMax((u64 *)p, (u64)y);
    else atomicMin((u64 *)p, (u64)y);
  } else if constexpr (DT == DT_BOOL) {
    unsigned *w = (unsigned *)((uintptr_t)p & ~(uintptr_t)3);
    unsigned sh = (unsigned)((uintptr_t)p & 3) * 8u;
    if (add || mx) {
      if (y) atomicOr(w, (unsigned)y << sh);
    } else {
      atomicAnd(w, ~(0xffu << sh) | ((unsigned)y << sh));
    }
  } else {
    cas_comb<DT, MODE>(p, y);
  }
}

/* ---- Scatter ---- */

/* The updates', the output's and the indices' offsets of row `row` of a walk. */
template <typename P>
__device__ __forceinline__ void locate3(const P &p, u64 row, long long &u, long long &o,
                                        long long &i) {
  u = o = i = 0;
#pragma unroll
  for (int d = D - 2; d >= 0; d--) {
    if (d > p.nd - 2) continue;
    u64 q = udiv(row, (u64)p.shape[d]);
    long long x = (long long)(row - q * (u64)p.shape[d]);
    u += x * p.ust[d];
    o += x * p.ost[d];
    i += x * p.ist[d];
    row = q;
  }
}

/* The output offset selected by the indices at index offset `io`; false (after raising the
 * record when `report`) when one is out of range. */
__device__ __forceinline__ bool index_dest(const nv__gpu_scatter_params &p, const char *idx,
                                           long long io, bool report, long long &base) {
  base = 0;
  for (int j = 0; j < p.k; j++) {
    long long raw = load_index(idx, p.idt, p.ioff[j] + io), v = raw;
    if (v < 0) v += p.n[j];
    if (!(v >= 0 && v < p.n[j] && v + p.ext[j] <= p.n[j])) {
      if (report) nv__gpu_raise_bad(p.bad, raw, p.n[j]);
      return false;
    }
    base += v * p.ast[j];
  }
  return true;
}

/* The walk over the updates, doing PHASE's work on each element: DIRECT combines (or, for
 * ASSIGN, stores), CLEAR zeroes the destination's ordinal, MARK raises it to the element's
 * ordinal + 1, WRITE stores only where the element's ordinal is the destination's. */
template <int PHASE, int DT, int MODE, typename O>
__device__ __forceinline__ void scatter_walk(typename sto<DT>::S *out,
                                             const typename sto<DT>::S *upd, const char *idx,
                                             O *ord, const nv__gpu_scatter_params &p) {
  const int L = p.nd - 1;
  const long long ul = p.ust[L], ol = p.ost[L], il = p.ist[L];
  const bool report = PHASE == NV__GPU_SC_DIRECT || PHASE == NV__GPU_SC_WRITE;
  const u64 items = (u64)p.items, chunks = (u64)p.chunks;
  for (u64 it = (u64)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (u64)gridDim.x * blockDim.x) {
    u64 row = udiv(it, chunks);
    long long col = (long long)(it - row * chunks) * PER;
    long long uo, oo, io, base = 0;
    locate3(p, row, uo, oo, io);
    int cnt = p.inner - col < PER ? (int)(p.inner - col) : PER;
    if (il == 0 && !index_dest(p, idx, io, report, base)) continue;
    for (int j = 0; j < cnt; j++) {
      long long x = col + j;
      if (il != 0 && !index_dest(p, idx, io + x * il, report, base)) continue;
      long long d = oo + x * ol + base;
      if constexpr (PHASE == NV__GPU_SC_CLEAR) {
        ord[d] = 0;
      } else if constexpr (PHASE == NV__GPU_SC_MARK) {
        atomicMax(&ord[d], (O)(row * (u64)p.inner + (u64)x + 1));
      } else if constexpr (PHASE == NV__GPU_SC_WRITE) {
        if (ord[d] == (O)(row * (u64)p.inner + (u64)x + 1)) out[d] = upd[uo + x * ul];
      } else if constexpr (MODE == NV__GPU_SC_ASSIGN) {
        out[d] = upd[uo + x * ul];
      } else {
        atomic_comb<DT, MODE>(out + d, upd[uo + x * ul]);
      }
    }
  }
}

template <int DT, int MODE>
__global__ void __launch_bounds__(T)
    k_scatter_direct(typename sto<DT>::S *out, const typename sto<DT>::S *upd,
                     const char *idx, const __grid_constant__ nv__gpu_scatter_params p) {
  scatter_walk<NV__GPU_SC_DIRECT, DT, MODE, unsigned>(out + p.ooff, upd + p.uoff, idx, nullptr,
                                                      p);
}

template <int PHASE, typename O>
__global__ void __launch_bounds__(T)
    k_scatter_mark(const char *idx, O *ord, const __grid_constant__ nv__gpu_scatter_params p) {
  scatter_walk<PHASE, DT_U8, NV__GPU_SC_ASSIGN, O>(nullptr, nullptr, idx, ord, p);
}

template <int DT, typename O>
__global__ void __launch_bounds__(T)
    k_scatter_write(typename sto<DT>::S *out, const typename sto<DT>::S *upd, const char *idx,
                    const O *ord, const __grid_constant__ nv__gpu_scatter_params p) {
  scatter_walk<NV__GPU_SC_WRITE, DT, NV__GPU_SC_ASSIGN, const O>(out + p.ooff, upd + p.uoff,
                                                                 idx, ord, p);
}

/* Index array j of a multi-array scatter as int64 in the row-major index shape. */
__global__ void __launch_bounds__(T)
    k_pack_index(const char *idx, long long *dst, const __grid_constant__ nv__gpu_pack_params p) {
  for (u64 it = (u64)blockIdx.x * blockDim.x + threadIdx.x; it < (u64)p.total;
       it += (u64)gridDim.x * blockDim.x) {
    u64 r = it;
    long long off = 0;
#pragma unroll
    for (int d = D - 1; d >= 0; d--) {
      if (d > p.nd - 1) continue;
      u64 q = udiv(r, (u64)p.shape[d]);
      off += (long long)(r - q * (u64)p.shape[d]) * p.st[d];
      r = q;
    }
    dst[p.doff + (long long)it] = load_index(idx, p.idt, p.soff + off);
  }
}

/* ---- Region updates ---- */

/* The walk over a region: out (op)= upd, the region starting `base` elements past ooff. */
template <int DT, int MODE>
__device__ __forceinline__ void region_walk(typename sto<DT>::S *out,
                                            const typename sto<DT>::S *upd, long long base,
                                            const nv__gpu_region_params &p) {
  const int L = p.nd - 1;
  const long long ul = p.ust[L], ol = p.ost[L];
  const u64 items = (u64)p.items, chunks = (u64)p.chunks;
  for (u64 it = (u64)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (u64)gridDim.x * blockDim.x) {
    u64 row = udiv(it, chunks);
    long long col = (long long)(it - row * chunks) * PER, uo = 0, oo = base;
#pragma unroll
    for (int d = D - 2; d >= 0; d--) {
      if (d > p.nd - 2) continue;
      u64 q = udiv(row, (u64)p.shape[d]);
      long long x = (long long)(row - q * (u64)p.shape[d]);
      uo += x * p.ust[d];
      oo += x * p.ost[d];
      row = q;
    }
    int cnt = p.inner - col < PER ? (int)(p.inner - col) : PER;
    typename sto<DT>::S v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++)
      if (j < cnt) v[j] = upd[uo + (col + j) * ul];
#pragma unroll
    for (int j = 0; j < PER; j++) {
      if (j >= cnt) continue;
      typename sto<DT>::S *dp = out + oo + (col + j) * ol;
      *dp = comb<DT, MODE>(*dp, v[j]);
    }
  }
}

template <int DT, int MODE>
__global__ void __launch_bounds__(T)
    k_region(typename sto<DT>::S *out, const typename sto<DT>::S *upd,
             const __grid_constant__ nv__gpu_region_params p) {
  region_walk<DT, MODE>(out + p.ooff, upd + p.uoff, 0, p);
}

/* slice_update_dynamic: the start read and clamped on the device as the CPU's dynamic_start
 * (a negative start counts from the end, below -n it is 0; then moved inside the axis). */
template <int DT>
__global__ void __launch_bounds__(T)
    k_region_dynamic(typename sto<DT>::S *out, const typename sto<DT>::S *upd,
                     const char *start, const __grid_constant__ nv__gpu_region_params p) {
  long long base = 0;
  for (int q = 0; q < p.naxes; q++) {
    long long n = p.dn[q], v = load_index(start, p.sdt, p.soff + q * p.sstep);
    if (v < 0) v = v < -n ? 0 : v + n;
    if (v > n - p.dsize[q]) v = n - p.dsize[q];
    base += v * p.dst[q];
  }
  region_walk<DT, NV__GPU_SC_ASSIGN>(out + p.ooff, upd + p.uoff, base, p);
}

/* ---- masked_scatter ---- */

/* The mask element at position `pos` (true when its byte is not 0). */
__device__ __forceinline__ bool mask_at(const uint8_t *mask, const nv__gpu_mask_params &p,
                                        u64 pos) {
  long long off = p.moff;
#pragma unroll
  for (int d = D - 1; d >= 0; d--) {
    if (d > p.nd - 1) continue;
    u64 q = udiv(pos, (u64)p.shape[d]);
    off += (long long)(pos - q * (u64)p.shape[d]) * p.st[d];
    pos = q;
  }
  return mask[off] != 0;
}

/* The exclusive prefix sum of v over the block (blockDim.x a multiple of 32, at most 1024);
 * *total gets the block's sum. */
__device__ __forceinline__ long long block_scan(long long v, long long *total) {
  __shared__ long long warp_sums[32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  long long x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    long long y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) warp_sums[w] = x;
  __syncthreads();
  if (w == 0) {
    long long s = lane < nw ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      long long y = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += y;
    }
    warp_sums[lane] = s;
  }
  __syncthreads();
  long long r = (w > 0 ? warp_sums[w - 1] : 0) + x - v;
  *total = warp_sums[nw - 1];
  __syncthreads();
  return r;
}

constexpr int MASK_PER = NV__GPU_MASK_CHUNK / T;

/* counts[b]: the true positions of chunk b. */
__global__ void __launch_bounds__(T)
    k_mask_count(const uint8_t *mask, long long *counts,
                 const __grid_constant__ nv__gpu_mask_params p) {
  for (long long b = blockIdx.x; b < p.chunks; b += gridDim.x) {
    long long c = 0, total;
    for (int i = 0; i < MASK_PER; i++) {
      long long pos = b * NV__GPU_MASK_CHUNK + (long long)i * T + threadIdx.x;
      if (pos < p.total) c += mask_at(mask, p, (u64)pos);
    }
    block_scan(c, &total);
    if (threadIdx.x == 0) counts[b] = total;
  }
}

/* The exclusive scan of the chunk counts, in place, by one block. */
__global__ void __launch_bounds__(1024)
    k_mask_scan(long long *counts, const __grid_constant__ nv__gpu_mask_params p) {
  const long long n = p.chunks, per = (n + blockDim.x - 1) / blockDim.x;
  const long long lo = (long long)threadIdx.x * per, hi = lo + per < n ? lo + per : n;
  long long s = 0, total;
  for (long long i = lo; i < hi; i++) s += counts[i];
  long long run = block_scan(s, &total);
  for (long long i = lo; i < hi; i++) {
    long long c = counts[i];
    counts[i] = run;
    run += c;
  }
}

/* rowsrc[pos]: the source row of each mask position (its rank among the true positions), or
 * -1. Each thread takes MASK_PER consecutive positions, so ranks follow the positions. */
__global__ void __launch_bounds__(T)
    k_mask_rows(const uint8_t *mask, const long long *counts, long long *rowsrc,
                const __grid_constant__ nv__gpu_mask_params p) {
  for (long long b = blockIdx.x; b < p.chunks; b += gridDim.x) {
    long long first = b * NV__GPU_MASK_CHUNK + (long long)threadIdx.x * MASK_PER, total;
    unsigned bits = 0;
    int c = 0;
    for (int i = 0; i < MASK_PER; i++) {
      long long pos = first + i;
      if (pos < p.total && mask_at(mask, p, (u64)pos)) {
        bits |= 1u << i;
        c++;
      }
    }
    long long k = counts[b] + block_scan(c, &total);
    for (int i = 0; i < MASK_PER; i++) {
      long long pos = first + i;
      if (pos >= p.total) break;
      long long r = -1;
      if (bits >> i & 1u) {
        if (k < p.rows) r = k;
        else if (k == p.rows) nv__gpu_raise_bad_kind(p.bad, NV__GPU_BAD_MASK_ROWS, k, p.rows);
        k++;
      }
      rowsrc[pos] = r;
    }
  }
}

/* The selected rows copied: output element e of position e / row from its source row. */
template <typename S>
__global__ void __launch_bounds__(T)
    k_mask_copy(S *out, const S *src, const long long *rowsrc,
                const __grid_constant__ nv__gpu_mask_params p) {
  const u64 row = (u64)p.row;
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < (u64)p.out_total;
       e += (u64)gridDim.x * blockDim.x) {
    u64 pos = udiv(e, row), r = e - pos * row;
    long long k = rowsrc[pos];
    if (k < 0) continue;
    long long off = p.soff + k * p.sst0;
#pragma unroll
    for (int d = D - 1; d >= 0; d--) {
      if (d > p.tnd - 1) continue;
      u64 q = udiv(r, (u64)p.tshape[d]);
      off += (long long)(r - q * (u64)p.tshape[d]) * p.tst[d];
      r = q;
    }
    out[p.ooff + (long long)e] = src[off];
  }
}

/* ---- as_strided_vjp ---- */

/* Cotangent element e summed into acc at its target (the CPU's accumulators: double per real
 * part for floating dtypes, wrapping uint64 for integers, or for bool). */
template <int DT>
__global__ void __launch_bounds__(T)
    k_asv_acc(const typename sto<DT>::S *cot, void *acc,
              const __grid_constant__ nv__gpu_asv_params p) {
  for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < (u64)p.total;
       e += (u64)gridDim.x * blockDim.x) {
    u64 r = e;
    long long c = p.coff, t = p.toff;
#pragma unroll
    for (int d = D - 1; d >= 0; d--) {
      if (d > p.nd - 1) continue;
      u64 q = udiv(r, (u64)p.shape[d]);
      long long x = (long long)(r - q * (u64)p.shape[d]);
      c += x * p.cst[d];
      t += x * p.tst[d];
      r = q;
    }
    if (t < 0 || t >= p.out_size) continue;
    typename sto<DT>::S v = cot[c];
    double *ad = (double *)acc;
    u64 *au = (u64 *)acc;
    if constexpr (DT == DT_C64) {
      atomicAdd(ad + 2 * t, f32_to_f64(__uint_as_float((uint32_t)v)));
      atomicAdd(ad + 2 * t + 1, f32_to_f64(__uint_as_float((uint32_t)(v >> 32))));
    } else if constexpr (DT == DT_F16) {
      atomicAdd(ad + t, (double)f16_to_f32(v));
    } else if constexpr (DT == DT_BF16) {
      atomicAdd(ad + t, (double)bf16_to_f32(v));
    } else if constexpr (DT == DT_F32) {
      atomicAdd(ad + t, f32_to_f64(__uint_as_float(v)));
    } else if constexpr (DT == DT_F64) {
      atomicAdd(ad + t, __longlong_as_double((long long)v));
    } else if constexpr (DT == DT_BOOL) {
      if (v) atomicOr(au + t, (u64)v);
    } else {
      /* Signed integers sign-extend, as the CPU's load_int. */
      atomicAdd(au + t, (u64)(long long)(typename sto<DT>::V)v);
    }
  }
}

/* The accumulators stored as the output's dtype (the CPU's store). */
template <int DT>
__global__ void __launch_bounds__(T)
    k_asv_store(const void *acc, typename sto<DT>::S *out,
                const __grid_constant__ nv__gpu_asv_params p) {
  const double *ad = (const double *)acc;
  const u64 *au = (const u64 *)acc;
  typedef typename sto<DT>::S S;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.out_size;
       i += (long long)gridDim.x * blockDim.x) {
    S v;
    if constexpr (DT == DT_C64) {
      v = (u64)__float_as_uint(f64_to_f32(ad[2 * i])) |
          ((u64)__float_as_uint(f64_to_f32(ad[2 * i + 1])) << 32);
    } else if constexpr (DT == DT_F16) {
      v = f64_to_f16(ad[i]);
    } else if constexpr (DT == DT_BF16) {
      v = f64_to_bf16(ad[i]);
    } else if constexpr (DT == DT_F32) {
      v = __float_as_uint(f64_to_f32(ad[i]));
    } else if constexpr (DT == DT_F64) {
      v = (u64)__double_as_longlong(ad[i]);
    } else if constexpr (DT == DT_BOOL) {
      v = au[i] != 0;
    } else {
      v = (S)au[i];
    }
    out[p.ooff + i] = v;
  }
}

} /* namespace */

/* ---- Kernel addresses for the host code ---- */

#define NVG_ALL_DTYPES(X, A)                                                              \
  X(DT_BOOL, A) X(DT_U8, A) X(DT_U16, A) X(DT_U32, A) X(DT_U64, A) X(DT_I8, A) X(DT_I16, A) \
  X(DT_I32, A) X(DT_I64, A) X(DT_F16, A) X(DT_BF16, A) X(DT_F32, A) X(DT_F64, A) X(DT_C64, A)

/* A kernel template K<DT, MODE> by run-time mode (ADD..MIN) and dtype. */
#define NVG_BY_MODE(K, mode, dtype)                                        \
  do {                                                                     \
    switch (mode) {                                                        \
      case NV__GPU_SC_ADD: NVG_ALL_DTYPES(NVG_CASE, NV__GPU_SC_ADD) break;  \
      case NV__GPU_SC_PROD: NVG_ALL_DTYPES(NVG_CASE, NV__GPU_SC_PROD) break; \
      case NV__GPU_SC_MAX: NVG_ALL_DTYPES(NVG_CASE, NV__GPU_SC_MAX) break;  \
      case NV__GPU_SC_MIN: NVG_ALL_DTYPES(NVG_CASE, NV__GPU_SC_MIN) break;  \
      default: break;                                                      \
    }                                                                      \
  } while (0)

/* Assignments by element size. */
#define NVG_BY_SIZE(K, size, ...)                                                  \
  do {                                                                             \
    switch (size) {                                                                \
      case 1: return (const void *)&K<move_dt<1>::DT, ##__VA_ARGS__>;              \
      case 2: return (const void *)&K<move_dt<2>::DT, ##__VA_ARGS__>;              \
      case 4: return (const void *)&K<move_dt<4>::DT, ##__VA_ARGS__>;              \
      case 8: return (const void *)&K<move_dt<8>::DT, ##__VA_ARGS__>;              \
      default: return NULL;                                                        \
    }                                                                              \
  } while (0)

static int size_of_dtype(int dtype) {
  switch (dtype) {
    case DT_BOOL: case DT_U8: case DT_I8: return 1;
    case DT_U16: case DT_I16: case DT_F16: case DT_BF16: return 2;
    case DT_U32: case DT_I32: case DT_F32: return 4;
    default: return 8;
  }
}

extern "C" const void *nv__gpu_kernel_scatter(int mode, int dtype, int phase, int wide_ord) {
  if (phase == NV__GPU_SC_CLEAR)
    return wide_ord ? (const void *)&k_scatter_mark<NV__GPU_SC_CLEAR, u64>
                    : (const void *)&k_scatter_mark<NV__GPU_SC_CLEAR, unsigned>;
  if (phase == NV__GPU_SC_MARK)
    return wide_ord ? (const void *)&k_scatter_mark<NV__GPU_SC_MARK, u64>
                    : (const void *)&k_scatter_mark<NV__GPU_SC_MARK, unsigned>;
  if (phase == NV__GPU_SC_WRITE) {
    if (wide_ord) NVG_BY_SIZE(k_scatter_write, size_of_dtype(dtype), u64);
    else NVG_BY_SIZE(k_scatter_write, size_of_dtype(dtype), unsigned);
  }
  if (mode == NV__GPU_SC_ASSIGN) NVG_BY_SIZE(k_scatter_direct, size_of_dtype(dtype), NV__GPU_SC_ASSIGN);
#define NVG_CASE(DT, MODE) \
  if (dtype == DT) return (const void *)&k_scatter_direct<DT, MODE>;
  NVG_BY_MODE(k_scatter_direct, mode, dtype);
#undef NVG_CASE
  return NULL;
}

extern "C" const void *nv__gpu_kernel_pack_index(void) { return (const void *)&k_pack_index; }

extern "C" const void *nv__gpu_kernel_region(int mode, int dtype) {
  if (mode == NV__GPU_SC_ASSIGN) NVG_BY_SIZE(k_region, size_of_dtype(dtype), NV__GPU_SC_ASSIGN);
#define NVG_CASE(DT, MODE) \
  if (dtype == DT) return (const void *)&k_region<DT, MODE>;
  NVG_BY_MODE(k_region, mode, dtype);
#undef NVG_CASE
  return NULL;
}

extern "C" const void *nv__gpu_kernel_region_dynamic(int esize) {
  NVG_BY_SIZE(k_region_dynamic, esize);
}

extern "C" const void *nv__gpu_kernel_mask_count(void) { return (const void *)&k_mask_count; }
extern "C" const void *nv__gpu_kernel_mask_scan(void) { return (const void *)&k_mask_scan; }
extern "C" const void *nv__gpu_kernel_mask_rows(void) { return (const void *)&k_mask_rows; }

extern "C" const void *nv__gpu_kernel_mask_copy(int esize) {
  switch (esize) {
    case 1: return (const void *)&k_mask_copy<uint8_t>;
    case 2: return (const void *)&k_mask_copy<uint16_t>;
    case 4: return (const void *)&k_mask_copy<uint32_t>;
    case 8: return (const void *)&k_mask_copy<u64>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_asv_acc(int dtype) {
#define NVG_CASE(DT, A) \
  if (dtype == DT) return (const void *)&k_asv_acc<DT>;
  NVG_ALL_DTYPES(NVG_CASE, 0)
#undef NVG_CASE
  return NULL;
}

extern "C" const void *nv__gpu_kernel_asv_store(int dtype) {
#define NVG_CASE(DT, A) \
  if (dtype == DT) return (const void *)&k_asv_store<DT>;
  NVG_ALL_DTYPES(NVG_CASE, 0)
#undef NVG_CASE
  return NULL;
}
