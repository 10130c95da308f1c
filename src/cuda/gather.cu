/* The gather family's CUDA kernels: take (one element per index, or whole rows per index),
 * the general gather walk (gather, take_along_axis, take of a strided array), the per-array
 * offsets of a gather with several index arrays, slice_dynamic and diag. The host side, which
 * chooses among them, is gather.c; the parameter blocks are in gather_kernels.h.
 *
 * Data moves as raw bits by element size (4 types), never per dtype. Index values are read on
 * the device in any integer dtype, wrapped once when negative and checked as the CPU's
 * nv__ix_wrap; an out-of-range index writes 0 and raises the node's check record. */
#include <stdint.h>

#include "cuda/gather_kernels.h"

namespace {

constexpr int THREADS = NV__GPU_GATHER_THREADS;
constexpr long long BAD_OFFSET = (-0x7fffffffffffffffll - 1);

/* Element types by size: gathers move bits. */
template <int S> struct bits_of;
template <> struct bits_of<1> { typedef uint8_t T; };
template <> struct bits_of<2> { typedef uint16_t T; };
template <> struct bits_of<4> { typedef uint32_t T; };
template <> struct bits_of<8> { typedef unsigned long long T; };

/* Position (I) and signed offset (S) types by index width: the host takes the 32-bit one only
 * when every position and offset it reaches fits in 31 bits. */
template <typename I> struct ix;
template <> struct ix<uint32_t> { typedef int32_t S; };
template <> struct ix<uint64_t> { typedef int64_t S; };

__device__ __forceinline__ bool aligned(const void *p, unsigned a) {
  return ((uintptr_t)p & (a - 1)) == 0;
}

/* The cold path of a bad index, out of line (cuda/checks.h's raise: the first wins). */
__device__ __noinline__ void raise_bad(nv__gpu_bad *b, long long value, long long size) {
  nv__gpu_raise_bad(b, value, size);
}

/* An index value as int64: uint64 values above INT64_MAX saturate (out of range). */
template <typename X> __device__ __forceinline__ long long widen(X x) { return (long long)x; }
template <> __device__ __forceinline__ long long widen<unsigned long long>(unsigned long long x) {
  return x > 0x7fffffffffffffffull ? 0x7fffffffffffffffll : (long long)x;
}

__device__ __forceinline__ int ix_size(int idt) {
  switch (idt) {
    case NV__GPU_IX_U8:
    case NV__GPU_IX_I8: return 1;
    case NV__GPU_IX_U16:
    case NV__GPU_IX_I16: return 2;
    case NV__GPU_IX_U32:
    case NV__GPU_IX_I32: return 4;
    default: return 8;
  }
}

/* Element i of an index array of dtype idt starting at p. */
__device__ __forceinline__ long long load_index(const char *p, int idt, long long i) {
  switch (idt) {
    case NV__GPU_IX_U8: return widen(reinterpret_cast<const uint8_t *>(p)[i]);
    case NV__GPU_IX_U16: return widen(reinterpret_cast<const uint16_t *>(p)[i]);
    case NV__GPU_IX_U32: return widen(reinterpret_cast<const uint32_t *>(p)[i]);
    case NV__GPU_IX_U64: return widen(reinterpret_cast<const unsigned long long *>(p)[i]);
    case NV__GPU_IX_I8: return widen(reinterpret_cast<const int8_t *>(p)[i]);
    case NV__GPU_IX_I16: return widen(reinterpret_cast<const int16_t *>(p)[i]);
    case NV__GPU_IX_I32: return widen(reinterpret_cast<const int32_t *>(p)[i]);
    default: return reinterpret_cast<const long long *>(p)[i];
  }
}

/* The CPU's nv__ix_wrap: a negative index wraps once; valid when 0 <= v < n and v + ext <= n. */
__device__ __forceinline__ bool wrap(long long &v, long long n, long long ext) {
  if (v < 0) v += n;
  return v >= 0 && v < n && v + ext <= n;
}

/* ---- take, one element per index ---- */

/* Each thread gathers V consecutive outputs: it loads their indices (16-byte loads where they
 * allow), then issues all V
 * independent random reads (predicated, no branch between them), then stores the V elements
 * as 16-byte vectors. */
template <typename T, typename X, typename I>
__global__ void __launch_bounds__(THREADS)
    k_take_elems(const T *__restrict__ a0, const X *__restrict__ i0, T *__restrict__ out,
                 nv__gpu_take_elems_params p) {
  typedef typename ix<I>::S S;
  constexpr int V = sizeof(T) >= 4 ? 4 : 16 / (int)sizeof(T);
  const T *a = a0 + p.aoff;
  const X *idx = i0 + p.ioff;
  const I rows = (I)p.rows, m = (I)p.m;
  const long long n = p.n;
  const I items = (rows + (I)V - 1) / (I)V;
  for (I it = (I)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (I)gridDim.x * blockDim.x) {
    const I r0 = it * (I)V;
    const int cnt = rows - r0 < (I)V ? (int)(rows - r0) : V;
    I q = r0;
    S base = 0;
    if (m != rows) {
      I o = r0 / m;
      q = r0 - o * m;
      base = (S)o * (S)n;
    }
    /* The V indices: 16-byte loads when they are one aligned run, else one by one. */
    union {
      X e[V];
      uint4 u[(V * sizeof(X) + 15) / 16];
    } xi;
    if (m == rows && cnt == V && (V * sizeof(X)) % 16 == 0 && aligned(idx + q, 16)) {
#pragma unroll
      for (int k = 0; k < (int)(V * sizeof(X) / 16); k++)
        xi.u[k] = reinterpret_cast<const uint4 *>(idx + q)[k];
    } else {
      I qq = q;
#pragma unroll
      for (int j = 0; j < V; j++)
        if (j < cnt) {
          xi.e[j] = idx[qq];
          if (++qq == m) qq = 0;
        }
    }
    S off[V];
    bool bad = false;
    long long bad_raw = 0;
#pragma unroll
    for (int j = 0; j < V; j++) {
      off[j] = -1;
      if (j < cnt) {
        long long raw = widen(xi.e[j]), w = raw < 0 ? raw + n : raw;
        if (w >= 0 && w < n) {
          off[j] = base + (S)w;
        } else if (!bad) {
          bad = true;
          bad_raw = raw;
        }
        if (++q == m) {
          q = 0;
          base += (S)n;
        }
      }
    }
    union {
      T e[V];
      uint4 u[V * sizeof(T) / 16];
    } v;
#pragma unroll
    for (int j = 0; j < V; j++) v.e[j] = off[j] >= 0 ? a[off[j]] : (T)0;
    if (bad) raise_bad(p.bad, bad_raw, n);
    T *d = out + r0;
    if (cnt == V && aligned(d, 16)) {
#pragma unroll
      for (int k = 0; k < (int)(V * sizeof(T) / 16); k++) reinterpret_cast<uint4 *>(d)[k] = v.u[k];
    } else {
      for (int j = 0; j < cnt; j++) d[j] = v.e[j];
    }
  }
}

/* ---- take, whole rows per index ---- */

/* Output row r (of upr units U) is a's row o * n + wrap(idx[q]); one unit per work item, so
 * the copy is coalesced on both sides and the index is a broadcast load within a row. */
template <typename U, typename I>
__device__ __forceinline__ void take_rows_by(const U *__restrict__ a, const char *__restrict__ idx,
                                             U *__restrict__ out, I upr,
                                             const nv__gpu_take_rows_params &p) {
  typedef typename ix<I>::S S;
  const I rows = (I)p.rows, m = (I)p.m;
  const I items = rows * upr;
  for (I it = (I)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (I)gridDim.x * blockDim.x) {
    I r = it / upr, c = it - r * upr, o = 0, q = r;
    if (m != rows) {
      o = r / m;
      q = r - o * m;
    }
    long long raw = load_index(idx, p.idt, (long long)q), w = raw < 0 ? raw + p.n : raw;
    U v{};
    if (w >= 0 && w < p.n)
      v = a[((S)o * (S)p.n + (S)w) * (S)upr + (S)c];
    else
      raise_bad(p.bad, raw, p.n);
    out[it] = v;
  }
}

template <typename T, typename I>
__global__ void __launch_bounds__(THREADS)
    k_take_rows(const T *__restrict__ a0, const char *__restrict__ i0, T *__restrict__ out,
                nv__gpu_take_rows_params p) {
  const T *a = a0 + p.aoff;
  const char *idx = i0 + p.ioff * ix_size(p.idt);
  const long long bytes = p.len * (long long)sizeof(T);
  /* 16-byte units when every row starts 16-byte aligned on both sides (a uniform test). */
  if (bytes % 16 == 0 && aligned(a, 16) && aligned(out, 16))
    take_rows_by<uint4, I>(reinterpret_cast<const uint4 *>(a), idx, reinterpret_cast<uint4 *>(out),
                           (I)(bytes / 16), p);
  else
    take_rows_by<T, I>(a, idx, out, (I)p.len, p);
}

/* ---- the general gather walk ---- */

template <typename T, typename I>
__global__ void __launch_bounds__(THREADS)
    k_gather(const T *__restrict__ a0, const char *__restrict__ i0, T *__restrict__ out,
             nv__gpu_gather_params p) {
  typedef typename ix<I>::S S;
  const T *a = a0 + p.aoff;
  const char *idx = i0 + p.ioff * ix_size(p.idt);
  const I size = (I)p.size;
  for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < size;
       t += (I)gridDim.x * blockDim.x) {
    I r = t;
    S doff = 0, xoff = 0;
#pragma unroll
    for (int k = NV__GPU_GATHER_DIMS - 1; k > 0; k--) {
      if (k >= p.nd) continue;
      I q = r / (I)p.shape[k];
      S c = (S)(r - q * (I)p.shape[k]);
      doff += c * (S)p.ds[k];
      xoff += c * (S)p.is[k];
      r = q;
    }
    doff += (S)r * (S)p.ds[0];
    xoff += (S)r * (S)p.is[0];
    T v = 0;
    if (p.idt == NV__GPU_IX_OFFSET) {
      long long off = reinterpret_cast<const long long *>(idx)[xoff];
      if (off != BAD_OFFSET) v = a[doff + (S)off];
    } else {
      long long raw = load_index(idx, p.idt, (long long)xoff), w = raw;
      if (wrap(w, p.n, p.ext))
        v = a[doff + (S)w * (S)p.ast];
      else
        raise_bad(p.bad, raw, p.n);
    }
    out[t] = v;
  }
}

/* One index array's term of a several-array gather's element offsets (64-bit). */
__global__ void __launch_bounds__(THREADS)
    k_gather_offsets(const char *__restrict__ i0, long long *__restrict__ off,
                     nv__gpu_gather_offsets_params p) {
  const char *idx = i0 + p.ioff * ix_size(p.idt);
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < p.npos;
       t += (long long)gridDim.x * blockDim.x) {
    long long r = t, xoff = 0;
    for (int k = p.nd - 1; k > 0; k--) {
      long long q = r / p.shape[k];
      xoff += (r - q * p.shape[k]) * p.is[k];
      r = q;
    }
    xoff += r * p.is[0];
    long long raw = load_index(idx, p.idt, xoff), w = raw;
    bool ok = wrap(w, p.n, p.ext);
    if (!ok) raise_bad(p.bad, raw, p.n);
    long long prev = p.first ? 0 : off[t];
    off[t] = !ok || prev == BAD_OFFSET ? BAD_OFFSET : prev + w * p.ast;
  }
}

/* The bounds check of m contiguous indices; the empty output's placeholder is not touched. */
__global__ void __launch_bounds__(THREADS)
    k_index_only(const char *__restrict__ i0, char *out, nv__gpu_index_only_params p) {
  (void)out;
  const char *idx = i0 + p.ioff * ix_size(p.idt);
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < p.m;
       t += (long long)gridDim.x * blockDim.x) {
    long long raw = load_index(idx, p.idt, t), w = raw;
    if (!wrap(w, p.n, 1)) raise_bad(p.bad, raw, p.n);
  }
}

/* ---- slice_dynamic ---- */

template <typename T, typename I>
__global__ void __launch_bounds__(THREADS)
    k_dyn_slice(const T *__restrict__ a0, const char *__restrict__ s0, T *__restrict__ out,
                nv__gpu_dyn_slice_params p) {
  typedef typename ix<I>::S S;
  __shared__ long long start_off;
  if (threadIdx.x == 0) {
    /* The CPU's dynamic_start: a negative start counts from the end (clamped at 0), then the
     * region is moved inside the axis. */
    long long off = 0;
    for (int q = 0; q < p.naxes; q++) {
      long long v = load_index(s0, p.sdt, p.soff + (long long)q * p.sstep);
      long long sh = p.ax_shape[q], sz = p.ax_size[q];
      if (v < 0) v = v < -sh ? 0 : v + sh;
      if (v > sh - sz) v = sh - sz;
      off += v * p.ax_stride[q];
    }
    start_off = off;
  }
  __syncthreads();
  const T *a = a0 + p.aoff + start_off;
  const I size = (I)p.size;
  for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < size;
       t += (I)gridDim.x * blockDim.x) {
    I r = t;
    S so = 0;
#pragma unroll
    for (int k = NV__GPU_GATHER_DIMS - 1; k > 0; k--) {
      if (k >= p.nd) continue;
      I q = r / (I)p.shape[k];
      so += (S)(r - q * (I)p.shape[k]) * (S)p.ss[k];
      r = q;
    }
    so += (S)r * (S)p.ss[0];
    out[t] = a[so];
  }
}

/* ---- diag of a vector ---- */

template <typename T, typename I>
__global__ void __launch_bounds__(THREADS)
    k_diag_vec(const T *__restrict__ s0, T *__restrict__ out, nv__gpu_diag_vec_params p) {
  typedef typename ix<I>::S S;
  const T *s = s0 + p.soff;
  const I side = (I)p.side, total = side * side;
  for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (I)gridDim.x * blockDim.x) {
    I r = t / side, c = t - r * side;
    T v = 0;
    if ((long long)c - (long long)r == p.k) v = s[(S)(p.k >= 0 ? r : c) * (S)p.step];
    out[t] = v;
  }
}

}  // namespace

/* ---- Kernel addresses for the host code ---- */

template <typename T, typename X>
static const void *take_elems_of(int index64) {
  return index64 ? (const void *)&k_take_elems<T, X, uint64_t>
                 : (const void *)&k_take_elems<T, X, uint32_t>;
}

template <typename T>
static const void *take_elems_by_index(int idt, int index64) {
  switch (idt) {
    case NV__GPU_IX_U8: return take_elems_of<T, uint8_t>(index64);
    case NV__GPU_IX_U16: return take_elems_of<T, uint16_t>(index64);
    case NV__GPU_IX_U32: return take_elems_of<T, uint32_t>(index64);
    case NV__GPU_IX_U64: return take_elems_of<T, unsigned long long>(index64);
    case NV__GPU_IX_I8: return take_elems_of<T, int8_t>(index64);
    case NV__GPU_IX_I16: return take_elems_of<T, int16_t>(index64);
    case NV__GPU_IX_I32: return take_elems_of<T, int32_t>(index64);
    case NV__GPU_IX_I64: return take_elems_of<T, long long>(index64);
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_take_elems(int esize, int idt, int index64) {
  switch (esize) {
    case 1: return take_elems_by_index<bits_of<1>::T>(idt, index64);
    case 2: return take_elems_by_index<bits_of<2>::T>(idt, index64);
    case 4: return take_elems_by_index<bits_of<4>::T>(idt, index64);
    case 8: return take_elems_by_index<bits_of<8>::T>(idt, index64);
    default: return NULL;
  }
}

#define NVG_BY_SIZE_WIDTH(esize, index64, KERNEL)                                           \
  switch (esize) {                                                                          \
    case 1:                                                                                 \
      return index64 ? (const void *)&KERNEL<bits_of<1>::T, uint64_t>                       \
                     : (const void *)&KERNEL<bits_of<1>::T, uint32_t>;                      \
    case 2:                                                                                 \
      return index64 ? (const void *)&KERNEL<bits_of<2>::T, uint64_t>                       \
                     : (const void *)&KERNEL<bits_of<2>::T, uint32_t>;                      \
    case 4:                                                                                 \
      return index64 ? (const void *)&KERNEL<bits_of<4>::T, uint64_t>                       \
                     : (const void *)&KERNEL<bits_of<4>::T, uint32_t>;                      \
    case 8:                                                                                 \
      return index64 ? (const void *)&KERNEL<bits_of<8>::T, uint64_t>                       \
                     : (const void *)&KERNEL<bits_of<8>::T, uint32_t>;                      \
    default: return NULL;                                                                   \
  }

extern "C" const void *nv__gpu_kernel_take_rows(int esize, int index64) {
  NVG_BY_SIZE_WIDTH(esize, index64, k_take_rows)
}
extern "C" const void *nv__gpu_kernel_gather(int esize, int index64) {
  NVG_BY_SIZE_WIDTH(esize, index64, k_gather)
}
extern "C" const void *nv__gpu_kernel_dyn_slice(int esize, int index64) {
  NVG_BY_SIZE_WIDTH(esize, index64, k_dyn_slice)
}
extern "C" const void *nv__gpu_kernel_diag_vec(int esize, int index64) {
  NVG_BY_SIZE_WIDTH(esize, index64, k_diag_vec)
}
extern "C" const void *nv__gpu_kernel_gather_offsets(void) {
  return (const void *)&k_gather_offsets;
}
extern "C" const void *nv__gpu_kernel_index_only(void) { return (const void *)&k_index_only; }
