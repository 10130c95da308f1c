/* The copy family's CUDA kernels: fills (16-byte vectors), strided copies
 * over folded layouts (32- and 64-bit indexing, fast dividers), a tiled transpose, the dtype
 * conversions of astype / to_fp8 / from_fp8, arange and eye's diagonal. The host side, which
 * chooses among them, is copy.c; the parameter blocks are in copy_kernels.h.
 *
 * Compile time stays small: same-dtype copies are instantiated per element size (4 types), not
 * per dtype, and the conversions are one kernel (per index width) with run-time switches on
 * the source and target dtypes, taken once per 8 elements. */
#include <stdint.h>
#include <string.h>

#include "cuda/convert.cuh"
#include "cuda/copy_kernels.h"

using namespace nvg;

namespace {

/* Element types by size: copies move bits. */
template <int S> struct bits_of;
template <> struct bits_of<1> { typedef uint8_t T; };
template <> struct bits_of<2> { typedef uint16_t T; };
template <> struct bits_of<4> { typedef uint32_t T; };
template <> struct bits_of<8> { typedef unsigned long long T; };

__device__ __forceinline__ bool aligned(const void *p, unsigned a) {
  return ((uintptr_t)p & (a - 1)) == 0;
}

__device__ __forceinline__ uint32_t fast_div(uint32_t n, uint32_t magic, uint32_t shift) {
  return (__umulhi(n, magic) + n) >> shift;
}

/* Index arithmetic by width: I unsigned for positions, S signed for element offsets (which may
 * be negative: strides can be). The 32-bit path is chosen by the host only when every index
 * and every offset the layout reaches fits in 31 bits. */
template <typename I> struct ix;
template <> struct ix<uint32_t> {
  typedef int32_t S;
  static __device__ __forceinline__ uint32_t div(uint32_t n, int64_t d, uint32_t m, uint32_t s) {
    (void)d;
    return fast_div(n, m, s);
  }
};
template <> struct ix<uint64_t> {
  typedef int64_t S;
  static __device__ __forceinline__ uint64_t div(uint64_t n, int64_t d, uint32_t m, uint32_t s) {
    (void)m;
    (void)s;
    return n / (uint64_t)d;
  }
};

/* Item `it` of a folded layout: its row's element offsets in the source and the destination,
 * and its chunk index within the row. */
template <typename I>
__device__ __forceinline__ void locate(const nv__gpu_nd &l, I it, typename ix<I>::S &so,
                                       typename ix<I>::S &dof, I &chunk) {
  typedef typename ix<I>::S S;
  so = 0;
  dof = 0;
  if (l.nd == 1) {
    chunk = it;
    return;
  }
  I row = ix<I>::div(it, l.chunks, l.chunk_magic, l.chunk_shift);
  chunk = it - row * (I)l.chunks;
#pragma unroll
  for (int k = 6; k >= 0; k--) {
    if (k > l.nd - 2) continue;
    I q = ix<I>::div(row, l.shape[k], l.magic[k], l.shift[k]);
    S idx = (S)(row - q * (I)l.shape[k]);
    so += idx * (S)l.sst[k];
    dof += idx * (S)l.dst[k];
    row = q;
  }
}

/* ---- Contiguous copies and fills ---- */

/* n contiguous elements set to the one source element. */
template <typename T>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_fill(const T *__restrict__ s0, T *__restrict__ d0, nv__gpu_span_params p) {
  constexpr int V = 16 / sizeof(T);
  T v = s0[p.soff];
  T *d = d0 + p.doff;
  int64_t head = (int64_t)(((16 - ((uintptr_t)d & 15)) & 15) / sizeof(T));
  if (head > p.n) head = p.n;
  int64_t nvec = (p.n - head) / V, tail = head + nvec * V;
  int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (tid < head) d[tid] = v;
  if (tid < p.n - tail) d[tail + tid] = v;
  union {
    T e[V];
    uint4 u;
  } pk;
#pragma unroll
  for (int j = 0; j < V; j++) pk.e[j] = v;
  uint4 *dv = reinterpret_cast<uint4 *>(d + head);
  for (int64_t i = tid; i < nvec; i += (int64_t)gridDim.x * blockDim.x) dv[i] = pk.u;
}

/* ---- Strided copies ---- */

/* A folded layout of up to 8 dims. Each work item is a chunk of the last dim: with UNIT (both
 * sides unit-strided there) 16 bytes, moved as one vector when both addresses are aligned; else
 * 4 elements at their strides. */
template <typename T, typename I, bool UNIT>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_copy_nd(const T *__restrict__ s0, T *__restrict__ d0, nv__gpu_copy_params p) {
  typedef typename ix<I>::S S;
  constexpr int V = UNIT ? 16 / sizeof(T) : 4;
  const T *s = s0 + p.soff;
  T *d = d0 + p.doff;
  const nv__gpu_nd &l = p.l;
  const S sin = (S)l.sst[l.nd - 1], din = (S)l.dst[l.nd - 1];
  const I items = (I)l.items, inner = (I)l.inner;
  for (I it = (I)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (I)gridDim.x * blockDim.x) {
    S so, dof;
    I c;
    locate<I>(l, it, so, dof, c);
    I col = c * V;
    int cnt = inner - col < (I)V ? (int)(inner - col) : V;
    const T *sp = s + so + (S)col * sin;
    T *dp = d + dof + (S)col * din;
    if (UNIT) {
      if (cnt == V && aligned(sp, 16) && aligned(dp, 16)) {
        *reinterpret_cast<uint4 *>(dp) = *reinterpret_cast<const uint4 *>(sp);
      } else {
        for (int j = 0; j < cnt; j++) dp[j] = sp[j];
      }
    } else {
      T v[V];
#pragma unroll
      for (int j = 0; j < V; j++)
        if (j < cnt) v[j] = sp[(S)j * sin];
#pragma unroll
      for (int j = 0; j < V; j++)
        if (j < cnt) dp[(S)j * din] = v[j];
    }
  }
}

/* Layouts that fold to more than 8 dims: the same walk over up to 64 dims. */
template <typename T>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_copy_big(const T *__restrict__ s0, T *__restrict__ d0, nv__gpu_copy_big_params p) {
  const T *s = s0 + p.soff;
  T *d = d0 + p.doff;
  const int64_t sin = p.sst[p.nd - 1], din = p.dst[p.nd - 1];
  for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < p.items;
       it += (int64_t)gridDim.x * blockDim.x) {
    int64_t row = it / p.chunks, col = (it - row * p.chunks) * 4, so = 0, dof = 0;
    for (int k = p.nd - 2; k >= 0; k--) {
      int64_t q = row / p.shape[k], idx = row - q * p.shape[k];
      so += idx * p.sst[k];
      dof += idx * p.dst[k];
      row = q;
    }
    for (int j = 0; j < 4 && col + j < p.inner; j++)
      d[dof + (col + j) * din] = s[so + (col + j) * sin];
  }
}

/* A transpose-like copy through shared memory: reads coalesced along J (unit source stride),
 * writes coalesced along L (unit destination stride). Blocks of 32 x 8 threads, 32 x 32 tiles;
 * the tile's row padding avoids bank conflicts on the transposed read. */
template <typename T>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_copy_tile(const T *__restrict__ s0, T *__restrict__ d0, nv__gpu_tile_params p) {
  __shared__ T tile[32][33];
  const T *s = s0 + p.soff;
  T *d = d0 + p.doff;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for (int64_t b = blockIdx.x; b < p.tiles; b += gridDim.x) {
    int64_t plane = p.tiles_j * p.tiles_l;
    int64_t bt = b / plane, t = b - bt * plane;
    int64_t tj = t / p.tiles_l, tl = t - tj * p.tiles_l;
    int64_t so = 0, dof = 0, r = bt;
    for (int k = p.nb - 1; k >= 0; k--) {
      int64_t q = r / p.bshape[k], idx = r - q * p.bshape[k];
      so += idx * p.bsst[k];
      dof += idx * p.bdst[k];
      r = q;
    }
    int64_t j0 = tj * 32, l0 = tl * 32;
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
      int64_t j = j0 + tx, lix = l0 + ty + k;
      if (j < p.nj && lix < p.nl) tile[ty + k][tx] = s[so + j * p.sj + lix * p.sl];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
      int64_t lix = l0 + tx, j = j0 + ty + k;
      if (j < p.nj && lix < p.nl) d[dof + j * p.dj + lix * p.dl] = tile[tx][ty + k];
    }
    __syncthreads();
  }
}

/* eye's diagonal: count elements at an arithmetic progression. */
template <typename T>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_diag(T *__restrict__ d0, nv__gpu_diag_params p) {
  T *d = d0 + p.doff + p.first;
  T v = (T)p.value;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < p.count;
       t += (int64_t)gridDim.x * blockDim.x)
    d[t * p.step] = v;
}

/* ---- pad's non-constant modes ---- */

/* The source position of output position i on an axis of n elements padded by `low` (mode 1:
 * edge, 2: reflect, 3: symmetric), as the CPU kernel's pad_source. */
__device__ __forceinline__ int64_t pad_source(int mode, int64_t i, int64_t low, int64_t n) {
  int64_t j = i - low;
  if (j >= 0 && j < n) return j;
  if (mode == 1) return j < 0 ? 0 : n - 1;
  if (mode == 2) {
    if (n == 1) return 0;
    int64_t period = 2 * (n - 1), r = ((j % period) + period) % period;
    return r < n ? r : period - r;
  }
  int64_t period = 2 * n, r = ((j % period) + period) % period;
  return r < n ? r : period - 1 - r;
}

template <typename T>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_pad(const T *__restrict__ s0, T *__restrict__ d, nv__gpu_pad_params p) {
  const T *s = s0 + p.soff;
  int last = p.nd - 1;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < p.n;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t rem = t, off = 0;
    for (int k = last; k >= 0; k--) {
      int64_t c = rem % p.oshape[k];
      rem /= p.oshape[k];
      off += pad_source(p.mode, c, p.low[k], p.ishape[k]) * p.ist[k];
    }
    d[t] = s[off];
  }
}

/* ---- Conversions ---- */

constexpr int E = NV__GPU_CONVERT_ELEMS;

/* The vector type that moves B bytes at once (B a power of two; above 16, several uint4). */
template <int B> struct vec_of { typedef uint4 T; enum { N = B / 16 }; };
template <> struct vec_of<1> { typedef uint8_t T; enum { N = 1 }; };
template <> struct vec_of<2> { typedef uint16_t T; enum { N = 1 }; };
template <> struct vec_of<4> { typedef uint32_t T; enum { N = 1 }; };
template <> struct vec_of<8> { typedef uint2 T; enum { N = 1 }; };
template <> struct vec_of<16> { typedef uint4 T; enum { N = 1 }; };

/* N elements at p (element stride `st`), as vector loads when `vec`. */
template <int N, typename T, typename S>
__device__ __forceinline__ void load_e(const char *p, S st, int cnt, bool vec, T (&v)[N]) {
  const T *q = reinterpret_cast<const T *>(p);
  if (vec) {
    typedef vec_of<(int)sizeof(T) * N> V;
    typename V::T x[V::N];
#pragma unroll
    for (int k = 0; k < V::N; k++) x[k] = reinterpret_cast<const typename V::T *>(q)[k];
    memcpy(v, x, sizeof x);
    return;
  }
#pragma unroll
  for (int e = 0; e < N; e++)
    if (e < cnt) v[e] = q[(S)e * st];
}

template <int N, typename T, typename S>
__device__ __forceinline__ void store_e(char *p, S st, int cnt, bool vec, const T (&v)[N]) {
  T *q = reinterpret_cast<T *>(p);
  if (vec) {
    typedef vec_of<(int)sizeof(T) * N> V;
    typename V::T x[V::N];
    memcpy(x, v, sizeof x);
#pragma unroll
    for (int k = 0; k < V::N; k++) reinterpret_cast<typename V::T *>(q)[k] = x[k];
    return;
  }
#pragma unroll
  for (int e = 0; e < N; e++)
    if (e < cnt) q[(S)e * st] = v[e];
}

/* Loads E elements of dtype `from` into their canonical wide kind. */
template <int FROM, typename S>
__device__ __forceinline__ void load_as(const char *p, S st, int cnt, bool vec, wide (&w)[E]) {
  typename src_t<FROM>::T v[E];
  load_e(p, st, cnt, vec, v);
#pragma unroll
  for (int e = 0; e < E; e++) w[e] = src_t<FROM>::widen(v[e]);
}

template <typename S>
__device__ __forceinline__ void load_wide(int from, const char *p, S st, int cnt, bool vec,
                                          wide (&w)[E]) {
  switch (from) {
    case DT_BOOL: load_as<DT_BOOL, S>(p, st, cnt, vec, w); break;
    case DT_U8: load_as<DT_U8, S>(p, st, cnt, vec, w); break;
    case DT_U16: load_as<DT_U16, S>(p, st, cnt, vec, w); break;
    case DT_U32: load_as<DT_U32, S>(p, st, cnt, vec, w); break;
    case DT_U64: load_as<DT_U64, S>(p, st, cnt, vec, w); break;
    case DT_I8: load_as<DT_I8, S>(p, st, cnt, vec, w); break;
    case DT_I16: load_as<DT_I16, S>(p, st, cnt, vec, w); break;
    case DT_I32: load_as<DT_I32, S>(p, st, cnt, vec, w); break;
    case DT_I64: load_as<DT_I64, S>(p, st, cnt, vec, w); break;
    case DT_F16: load_as<DT_F16, S>(p, st, cnt, vec, w); break;
    case DT_BF16: load_as<DT_BF16, S>(p, st, cnt, vec, w); break;
    case DT_F32: load_as<DT_F32, S>(p, st, cnt, vec, w); break;
    case DT_F64: load_as<DT_F64, S>(p, st, cnt, vec, w); break;
    case DT_C64: load_as<DT_C64, S>(p, st, cnt, vec, w); break;
    case DT_FP8: load_as<DT_FP8, S>(p, st, cnt, vec, w); break;
    default: break;
  }
}

/* Stores E wide values of kind `kind` as dtype TO; the kind switch is outside the loop. */
template <int TO, typename S>
__device__ __forceinline__ void store_as(int kind, const wide (&w)[E], char *p, S st, int cnt,
                                         bool vec) {
  typedef typename cvt<TO>::T T;
  T v[E];
  switch (kind) {
    case K_I:
#pragma unroll
      for (int e = 0; e < E; e++) v[e] = cvt<TO>::from_i(w[e].i);
      break;
    case K_U:
#pragma unroll
      for (int e = 0; e < E; e++) v[e] = cvt<TO>::from_u(w[e].u);
      break;
    case K_F:
#pragma unroll
      for (int e = 0; e < E; e++) v[e] = cvt<TO>::from_f(w[e].f);
      break;
    case K_D:
#pragma unroll
      for (int e = 0; e < E; e++) v[e] = cvt<TO>::from_d(w[e].d);
      break;
    default:
#pragma unroll
      for (int e = 0; e < E; e++) v[e] = cvt<TO>::from_c(w[e].c);
      break;
  }
  store_e(p, st, cnt, vec, v);
}

template <typename S>
__device__ __forceinline__ void store_wide(int kind, int to, const wide (&w)[E], char *p, S st,
                                           int cnt, bool vec) {
  switch (to) {
    case DT_BOOL: store_as<DT_BOOL, S>(kind, w, p, st, cnt, vec); break;
    case DT_U8: store_as<DT_U8, S>(kind, w, p, st, cnt, vec); break;
    case DT_U16: store_as<DT_U16, S>(kind, w, p, st, cnt, vec); break;
    case DT_U32: store_as<DT_U32, S>(kind, w, p, st, cnt, vec); break;
    case DT_U64: store_as<DT_U64, S>(kind, w, p, st, cnt, vec); break;
    case DT_I8: store_as<DT_I8, S>(kind, w, p, st, cnt, vec); break;
    case DT_I16: store_as<DT_I16, S>(kind, w, p, st, cnt, vec); break;
    case DT_I32: store_as<DT_I32, S>(kind, w, p, st, cnt, vec); break;
    case DT_I64: store_as<DT_I64, S>(kind, w, p, st, cnt, vec); break;
    case DT_F16: store_as<DT_F16, S>(kind, w, p, st, cnt, vec); break;
    case DT_BF16: store_as<DT_BF16, S>(kind, w, p, st, cnt, vec); break;
    case DT_F32: store_as<DT_F32, S>(kind, w, p, st, cnt, vec); break;
    case DT_F64: store_as<DT_F64, S>(kind, w, p, st, cnt, vec); break;
    case DT_C64: store_as<DT_C64, S>(kind, w, p, st, cnt, vec); break;
    case DT_FP8: store_as<DT_FP8, S>(kind, w, p, st, cnt, vec); break;
    default: break;
  }
}

/* Whether E elements of `size` bytes at p (unit stride, all present) can move as vectors. */
__device__ __forceinline__ bool vec_ok(const char *p, int size, int64_t st, int cnt) {
  unsigned a = size * E < 16 ? (unsigned)(size * E) : 16u;
  return st == 1 && cnt == E && aligned(p, a);
}

/* A conversion over a folded layout: work items of E consecutive elements of the last dim. */
template <typename I>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_convert(const char *__restrict__ s0, char *__restrict__ d0, nv__gpu_convert_params p) {
  typedef typename ix<I>::S S;
  const int from = p.from, to = p.to, kind = kind_of(from);
  const int fi = dtype_size(from), ti = dtype_size(to);
  const char *s = s0 + p.soff * fi;
  char *d = d0 + p.doff * ti;
  const nv__gpu_nd &l = p.l;
  const S sin = (S)l.sst[l.nd - 1], din = (S)l.dst[l.nd - 1];
  const I items = (I)l.items, inner = (I)l.inner;
  for (I it = (I)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (I)gridDim.x * blockDim.x) {
    S so, dof;
    I c;
    locate<I>(l, it, so, dof, c);
    I col = c * E;
    int cnt = inner - col < (I)E ? (int)(inner - col) : E;
    const char *sp = s + (int64_t)(so + (S)col * sin) * fi;
    char *dp = d + (int64_t)(dof + (S)col * din) * ti;
    wide w[E];
    load_wide<S>(from, sp, sin, cnt, vec_ok(sp, fi, sin, cnt), w);
    store_wide<S>(kind, to, w, dp, din, cnt, vec_ok(dp, ti, din, cnt));
  }
}

/* The frequent conversions of contiguous data, one small kernel per pair: 8 elements per
 * thread, no run-time dtype switch. The same conversion functions as k_convert. */
template <int FROM, int TO>
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_convert_span(const char *__restrict__ s0, char *__restrict__ d0, nv__gpu_span_params p) {
  typedef typename src_t<FROM>::T TS;
  typedef typename cvt<TO>::T TD;
  constexpr int N = 8;
  constexpr unsigned AS = sizeof(TS) * N < 16 ? sizeof(TS) * N : 16;
  constexpr unsigned AD = sizeof(TD) * N < 16 ? sizeof(TD) * N : 16;
  const char *s = s0 + p.soff * (int64_t)sizeof(TS);
  char *d = d0 + p.doff * (int64_t)sizeof(TD);
  const int64_t items = (p.n + N - 1) / N;
  for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (int64_t)gridDim.x * blockDim.x) {
    int64_t i0 = it * N;
    int cnt = p.n - i0 < N ? (int)(p.n - i0) : N;
    const char *sp = s + i0 * (int64_t)sizeof(TS);
    char *dp = d + i0 * (int64_t)sizeof(TD);
    TS v[N];
    TD o[N];
    load_e(sp, (int64_t)1, cnt, cnt == N && aligned(sp, AS), v);
#pragma unroll
    for (int e = 0; e < N; e++) o[e] = narrow<TO>((int)src_t<FROM>::kind, src_t<FROM>::widen(v[e]));
    store_e(dp, (int64_t)1, cnt, cnt == N && aligned(dp, AD), o);
  }
}

/* arange: start + i * step in double (multiply and add rounded separately, as the CPU's
 * unfused C), then converted as astype converts float64. */
__global__ void __launch_bounds__(NV__GPU_COPY_THREADS)
    k_arange(char *__restrict__ d0, nv__gpu_arange_params p) {
  const int ti = dtype_size(p.to);
  char *d = d0 + p.doff * ti;
  const int64_t items = (p.n + E - 1) / E;
  for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (int64_t)gridDim.x * blockDim.x) {
    int64_t i0 = it * E;
    int cnt = p.n - i0 < E ? (int)(p.n - i0) : E;
    wide w[E];
#pragma unroll
    for (int e = 0; e < E; e++) w[e].d = __dadd_rn(p.start, __dmul_rn((double)(i0 + e), p.step));
    char *dp = d + i0 * ti;
    store_wide<int64_t>(K_D, p.to, w, dp, 1, cnt, vec_ok(dp, ti, 1, cnt));
  }
}

} /* namespace */

/* ---- Kernel addresses for the host code ---- */

#define NVG_BY_SIZE(esize, KERNEL)                                  \
  switch (esize) {                                                  \
    case 1: return (const void *)&KERNEL<bits_of<1>::T>;            \
    case 2: return (const void *)&KERNEL<bits_of<2>::T>;            \
    case 4: return (const void *)&KERNEL<bits_of<4>::T>;            \
    case 8: return (const void *)&KERNEL<bits_of<8>::T>;            \
    default: return NULL;                                           \
  }

extern "C" const void *nv__gpu_kernel_fill(int esize) { NVG_BY_SIZE(esize, k_fill) }
extern "C" const void *nv__gpu_kernel_copy_big(int esize) { NVG_BY_SIZE(esize, k_copy_big) }
extern "C" const void *nv__gpu_kernel_copy_tile(int esize) { NVG_BY_SIZE(esize, k_copy_tile) }
extern "C" const void *nv__gpu_kernel_diag(int esize) { NVG_BY_SIZE(esize, k_diag) }
extern "C" const void *nv__gpu_kernel_pad(int esize) { NVG_BY_SIZE(esize, k_pad) }

template <typename T>
static const void *copy_nd_of(int index64, int unit) {
  if (index64)
    return unit ? (const void *)&k_copy_nd<T, uint64_t, true>
                : (const void *)&k_copy_nd<T, uint64_t, false>;
  return unit ? (const void *)&k_copy_nd<T, uint32_t, true>
              : (const void *)&k_copy_nd<T, uint32_t, false>;
}

extern "C" const void *nv__gpu_kernel_copy_nd(int esize, int index64, int unit) {
  switch (esize) {
    case 1: return copy_nd_of<bits_of<1>::T>(index64, unit);
    case 2: return copy_nd_of<bits_of<2>::T>(index64, unit);
    case 4: return copy_nd_of<bits_of<4>::T>(index64, unit);
    case 8: return copy_nd_of<bits_of<8>::T>(index64, unit);
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_convert(int index64) {
  return index64 ? (const void *)&k_convert<uint64_t> : (const void *)&k_convert<uint32_t>;
}

extern "C" const void *nv__gpu_kernel_arange(void) { return (const void *)&k_arange; }

/* The pairs with a k_convert_span kernel. */
#define NVG_FAST_PAIRS(X)                                                                 \
  X(DT_F32, DT_F16) X(DT_F32, DT_BF16) X(DT_F16, DT_F32) X(DT_BF16, DT_F32)                 \
  X(DT_F16, DT_BF16) X(DT_BF16, DT_F16) X(DT_F32, DT_F64) X(DT_F64, DT_F32)                 \
  X(DT_BOOL, DT_F32) X(DT_BOOL, DT_F16) X(DT_BOOL, DT_BF16) X(DT_U8, DT_F32)                \
  X(DT_I32, DT_F32) X(DT_I64, DT_F32) X(DT_F32, DT_I32) X(DT_I32, DT_I64) X(DT_I64, DT_I32)

extern "C" const void *nv__gpu_kernel_convert_span(int from, int to) {
#define NVG_PAIR(F, T) \
  if (from == F && to == T) return (const void *)&k_convert_span<F, T>;
  NVG_FAST_PAIRS(NVG_PAIR)
#undef NVG_PAIR
  return NULL;
}
