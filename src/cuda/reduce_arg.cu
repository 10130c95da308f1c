/* Fast argmax/argmin kernels (reduce.h's nv__arg_kernels_of) for every real dtype: each thread
 * keeps a running (best value, index) in registers over many elements read with 16-byte
 * loads, and threads combine only at the end. Two layouts have kernels:
 *  - row: the reduced elements of an output are one contiguous run (group of `group` threads
 *    an output, or a piece of one when long runs are split over blocks);
 *  - col: the innermost kept dim is contiguous; each thread owns V consecutive outputs (16
 *    bytes of them, or one) and walks the reduced dims, the walk split over threadIdx.y
 *    (combined in order through shared memory) and over blockIdx.y (pieces in scratch).
 * Split pieces are combined in order by the fin kernel.
 *
 * argmin is argmax of the values with their bits flipped (p.flip, xored into every 64 bits
 * loaded): the sign bit of floats (negation, which keeps NaN a NaN and -0.0 equal to 0.0),
 * every bit of integers (~x reverses the order of signed and unsigned values alike). So the
 * one rule is argmax's, the CPU's: the largest value wins, a NaN beats any number, among
 * equals (-0.0 equals 0.0; NaNs are equal) the smallest index. Half types compare in float32,
 * integers of 1 and 2 bytes in 32 bits, all exactly. */
#include <type_traits>

#include "cuda/reduce_common.cuh"

namespace nvarg {
namespace {

using namespace nvred;
typedef nv__red_params P;

/* Per element type: U its bits, W the type values compare in, cv the conversion, low() the
 * smallest W (every element's value is >= it), FLT whether values may be NaN. */
template <class T>
struct Tr;
template <>
struct Tr<__half> {
  typedef uint16_t U;
  typedef float W;
  static constexpr bool FLT = true;
  static __device__ __forceinline__ W cv(U u) { return __half2float(__ushort_as_half(u)); }
  static __device__ __forceinline__ W low() { return -INFINITY; }
};
template <>
struct Tr<__nv_bfloat16> {
  typedef uint16_t U;
  typedef float W;
  static constexpr bool FLT = true;
  static __device__ __forceinline__ W cv(U u) {
    return __bfloat162float(__ushort_as_bfloat16(u));
  }
  static __device__ __forceinline__ W low() { return -INFINITY; }
};
template <>
struct Tr<float> {
  typedef uint32_t U;
  typedef float W;
  static constexpr bool FLT = true;
  static __device__ __forceinline__ W cv(U u) { return __uint_as_float(u); }
  static __device__ __forceinline__ W low() { return -INFINITY; }
};
template <>
struct Tr<double> {
  typedef uint64_t U;
  typedef double W;
  static constexpr bool FLT = true;
  static __device__ __forceinline__ W cv(U u) { return __longlong_as_double((long long)u); }
  static __device__ __forceinline__ W low() { return -INFINITY; }
};
/* Integers: S the signed or unsigned type of the dtype's width, W it widened. */
template <class S, class W_>
struct TrInt {
  typedef typename std::make_unsigned<S>::type U;
  typedef W_ W;
  static constexpr bool FLT = false;
  static __device__ __forceinline__ W cv(U u) { return (W)(S)u; }
  static __device__ __forceinline__ W low() {
    return std::is_signed<S>::value ? (W)(S)((U)1 << (8 * sizeof(S) - 1)) : (W)0;
  }
};
template <> struct Tr<int8_t> : TrInt<int8_t, int32_t> {};
template <> struct Tr<uint8_t> : TrInt<uint8_t, uint32_t> {};
template <> struct Tr<int16_t> : TrInt<int16_t, int32_t> {};
template <> struct Tr<uint16_t> : TrInt<uint16_t, uint32_t> {};
template <> struct Tr<int32_t> : TrInt<int32_t, int32_t> {};
template <> struct Tr<uint32_t> : TrInt<uint32_t, uint32_t> {};
template <> struct Tr<int64_t> : TrInt<int64_t, int64_t> {};
template <> struct Tr<uint64_t> : TrInt<uint64_t, uint64_t> {};

/* A running result: the best value (flipped for argmin) and its index. */
template <class W>
struct Acc {
  W v;
  uint32_t idx;
};

/* One element of a thread's walk, which visits its elements in increasing index order: a
 * later element replaces the best only when strictly better (larger, or a NaN over a
 * number), so the first extreme stays. For floats: !(v <= b) is v > b or v NaN, and a NaN
 * best stays. */
template <class T>
__device__ __forceinline__ void upd(typename Tr<T>::W &b, uint32_t &bi, typename Tr<T>::W v,
                                    uint32_t i) {
  bool take;
  if constexpr (Tr<T>::FLT) take = !(v <= b) && b == b;
  else take = v > b;
  if (take) {
    b = v;
    bi = i;
  }
}

/* Two results in any order: b wins when better, or equal (NaNs equal) with a smaller index. */
template <class T>
__device__ __forceinline__ Acc<typename Tr<T>::W> comb(Acc<typename Tr<T>::W> a,
                                                       Acc<typename Tr<T>::W> b) {
  bool better, tie;
  if constexpr (Tr<T>::FLT) {
    bool an = a.v != a.v, bn = b.v != b.v;
    better = b.v > a.v || (bn && !an);
    tie = b.v == a.v || (bn && an);
  } else {
    better = b.v > a.v;
    tie = b.v == a.v;
  }
  return better || (tie && b.idx < a.idx) ? b : a;
}

template <class T>
struct CombOp {
  __device__ __forceinline__ Acc<typename Tr<T>::W> operator()(Acc<typename Tr<T>::W> a,
                                                               Acc<typename Tr<T>::W> b) const {
    return comb<T>(a, b);
  }
};

/* The VW elements of a 16-byte load, flipped, into a thread's running result; index i0 for
 * the first. */
template <class T>
__device__ __forceinline__ void upd_vec(const P &p, typename Tr<T>::W &b, uint32_t &bi,
                                        uint4 raw, uint32_t i0) {
  typedef typename Tr<T>::U U;
  constexpr int VW = 16 / sizeof(U);
  uint64_t w[2];
  memcpy(w, &raw, sizeof w);
  w[0] ^= p.flip;
  w[1] ^= p.flip;
  U e[VW];
  memcpy(e, w, sizeof e);
#pragma unroll
  for (int k = 0; k < VW; k++) upd<T>(b, bi, Tr<T>::cv(e[k]), i0 + k);
}

/* One element at p, flipped. */
template <class T>
__device__ __forceinline__ typename Tr<T>::W ld_one(const P &p, const typename Tr<T>::U *x) {
  typedef typename Tr<T>::U U;
  return Tr<T>::cv((U)(ld(x) ^ (U)p.flip));
}

/* The result of a whole output (or piece) stored: the index, or the accumulator in scratch
 * at piece * nout + output. */
template <class T>
__device__ __forceinline__ void put(const P &p, void *out, int64_t o, int64_t s,
                                    Acc<typename Tr<T>::W> a) {
  if (p.partial) align16<Acc<typename Tr<T>::W>>(out)[s * p.nout + o] = a;
  else ((uint32_t *)out)[p.out_off + o] = a.idx;
}

/* ---- row: contiguous runs ---- */

/* Blocks of max(group, 256) threads; a group of `group` threads (a power of two) per item
 * (output o, piece s): elements [s * chunk, min(s * chunk + chunk, rsize)) of the run at the
 * output's offset. A head up to 16-byte alignment, 16-byte loads eight or four at a time
 * (piece k * group + lane), a tail, each in index order. */
template <class T>
__global__ void __launch_bounds__(1024)
    arg_row(const void *in_, void *out_, const void *, const __grid_constant__ P p) {
  typedef typename Tr<T>::U U;
  typedef typename Tr<T>::W W;
  typedef Acc<W> A;
  constexpr int VW = 16 / sizeof(U);
  __shared__ A sm[32];
  const int G = p.group;
  const int gpb = blockDim.x / G, g = threadIdx.x / G, lane = threadIdx.x & (G - 1);
  const int64_t nitems = p.nout * p.nsplit;
  const U *in = (const U *)in_ + p.in_off;
  for (int64_t base = (int64_t)blockIdx.x * gpb; base < nitems; base += (int64_t)gridDim.x * gpb) {
    int64_t w = base + g, o = 0, s = 0;
    A acc;
    acc.v = Tr<T>::low();
    acc.idx = 0xffffffffu;
    if (w < nitems) {
      o = divmod(w, p.nsplit, &s);
      const int64_t r0 = s * p.chunk;
      const int64_t n = (r0 + p.chunk < p.rsize ? r0 + p.chunk : p.rsize) - r0;
      const U *q = in + walk_offset(p.kshape, p.kst, p.nk, o) + r0;
      int64_t head = (int64_t)(((16 - ((uintptr_t)q & 15)) & 15) / sizeof(U));
      if (head > n) head = n;
      const int64_t nv = (n - head) / VW, tail0 = head + nv * VW;
      /* The first index this thread visits (past the run when it visits none: any real
       * index of the group then wins the ties of the combination). */
      int64_t first = lane < head ? lane : lane < nv ? head + (int64_t)lane * VW : tail0 + lane;
      W b = Tr<T>::low();
      uint32_t bi = (uint32_t)(r0 + first);
      for (int64_t j = lane; j < head; j += G) upd<T>(b, bi, ld_one<T>(p, q + j), (uint32_t)(r0 + j));
      const U *body = q + head;
      const uint32_t rb = (uint32_t)(r0 + head);
      int64_t i = lane;
      /* Eight loads in flight a thread where the run has them (a row of 1024 float32 in one
       * round per lane of a warp), then four, then one. */
      for (; i + 7 * (int64_t)G < nv; i += 8 * (int64_t)G) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = ld16(body + (i + u * (int64_t)G) * VW);
#pragma unroll
        for (int u = 0; u < 8; u++)
          upd_vec<T>(p, b, bi, v[u], rb + (uint32_t)((i + u * (int64_t)G) * VW));
      }
      for (; i + 3 * (int64_t)G < nv; i += 4 * (int64_t)G) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = ld16(body + (i + u * (int64_t)G) * VW);
#pragma unroll
        for (int u = 0; u < 4; u++)
          upd_vec<T>(p, b, bi, v[u], rb + (uint32_t)((i + u * (int64_t)G) * VW));
      }
      for (; i < nv; i += G) upd_vec<T>(p, b, bi, ld16(body + i * VW), rb + (uint32_t)(i * VW));
      for (int64_t j = tail0 + lane; j < n; j += G)
        upd<T>(b, bi, ld_one<T>(p, q + j), (uint32_t)(r0 + j));
      acc.v = b;
      acc.idx = bi;
    }
    acc = group_reduce(acc, G, CombOp<T>{}, sm);
    if (lane == 0 && w < nitems) put<T>(p, out_, o, s, acc);
  }
}

/* ---- col: V consecutive outputs a thread ---- */

/* Rows [a, b) of the reduced dims for the V consecutive outputs starting at x (V == VW: one
 * 16-byte load a row where `al`, the outputs' addresses and every reduced stride being
 * 16-byte aligned), into the thread's results. */
template <class T, int V>
__device__ __forceinline__ void col_walk(const P &p, const typename Tr<T>::U *x, int64_t a,
                                         int64_t b, bool al, typename Tr<T>::W (&best)[V],
                                         uint32_t (&bi)[V]) {
  typedef typename Tr<T>::U U;
  constexpr int VW = 16 / sizeof(U);
  /* One row at its element pointer: V elements, index r. */
  auto row = [&](const U *e, int64_t r) {
    if constexpr (V == VW) {
      if (al) {
        uint4 raw = ld16(e);
        uint64_t w[2];
        memcpy(w, &raw, sizeof w);
        w[0] ^= p.flip;
        w[1] ^= p.flip;
        U u[VW];
        memcpy(u, w, sizeof u);
#pragma unroll
        for (int k = 0; k < V; k++) upd<T>(best[k], bi[k], Tr<T>::cv(u[k]), (uint32_t)r);
        return;
      }
    }
#pragma unroll
    for (int k = 0; k < V; k++) upd<T>(best[k], bi[k], ld_one<T>(p, e + k), (uint32_t)r);
  };
  if (p.nr == 1) {
    const int64_t st = p.rst[0];
    const U *e = x + a * st;
    int64_t r = a;
    if (V == VW && al) {
      /* Four rows' loads in flight, then their elements in index order. */
      for (; r + 4 <= b; r += 4, e += 4 * st) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = ld16(e + u * st);
#pragma unroll
        for (int u = 0; u < 4; u++) {
          uint64_t w[2];
          memcpy(w, &v[u], sizeof w);
          w[0] ^= p.flip;
          w[1] ^= p.flip;
          U el[VW];
          memcpy(el, w, sizeof el);
#pragma unroll
          for (int k = 0; k < V; k++)
            upd<T>(best[k], bi[k], Tr<T>::cv(el[k]), (uint32_t)(r + u));
        }
      }
    } else if (V == 1) {
      for (; r + 8 <= b; r += 8, e += 8 * st) {
        U v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = ld(e + u * st);
#pragma unroll
        for (int u = 0; u < 8; u++)
          upd<T>(best[0], bi[0], Tr<T>::cv((U)(v[u] ^ (U)p.flip)), (uint32_t)(r + u));
      }
    }
    for (; r < b; r++, e += st) row(e, r);
    return;
  }
  /* Several reduced dims: runs of the innermost one. */
  const int64_t L = p.rshape[p.nr - 1], st = p.rst[p.nr - 1];
  int64_t j;
  int64_t q = divmod(a, L, &j);
  for (int64_t r = a; r < b; q++, j = 0) {
    const U *run = x + walk_offset(p.rshape, p.rst, p.nr - 1, q);
    int64_t m = L - j < b - r ? L - j : b - r;
    for (int64_t k = 0; k < m; k++) row(run + (j + k) * st, r + k);
    r += m;
  }
}

/* Blocks of blockDim.x x blockDim.y threads (256 at most): blockDim.x * V consecutive
 * outputs a block; the rows of piece blockIdx.y split evenly over threadIdx.y. Four blocks a
 * multiprocessor at least (64 registers a thread; two for the 16 outputs of 1-byte types), so
 * that a grid of a block per 1024 threads of the device runs in one wave. */
template <class T, int V>
__global__ void __launch_bounds__(256, V > 8 ? 2 : 4)
    arg_col(const void *in_, void *out_, const void *, const __grid_constant__ P p) {
  typedef typename Tr<T>::U U;
  typedef typename Tr<T>::W W;
  typedef Acc<W> A;
  __shared__ A sm[256 * V];
  const int tx = threadIdx.x, ty = threadIdx.y, BX = blockDim.x, BY = blockDim.y;
  const U *in = (const U *)in_ + p.in_off;
  const int64_t s = blockIdx.y;
  const int64_t r0 = s * p.chunk, r1 = r0 + p.chunk < p.rsize ? r0 + p.chunk : p.rsize;
  const int64_t per = (r1 - r0 + BY - 1) / BY;
  const int64_t a = r0 + ty * per, b = a + per < r1 ? a + per : r1;
  for (int64_t ob = blockIdx.x; ob * BX * V < p.nout; ob += gridDim.x) {
    const int64_t o = (ob * BX + tx) * V;
    const bool valid = o < p.nout;
    W best[V];
    uint32_t bi[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
      best[k] = Tr<T>::low();
      /* The first row this thread visits (past its piece when it visits none: the rows of
       * the other threads then win the ties of the combination). */
      bi[k] = (uint32_t)a;
    }
    if (valid && a < b) {
      const U *x = in + walk_offset(p.kshape, p.kst, p.nk, o);
      const bool al = p.vec_st && ((uintptr_t)x & 15) == 0;
      col_walk<T, V>(p, x, a, b, al, best, bi);
    }
    A acc[V];
#pragma unroll
    for (int k = 0; k < V; k++) {
      acc[k].v = best[k];
      acc[k].idx = bi[k];
    }
    if (BY > 1) {
#pragma unroll
      for (int k = 0; k < V; k++) sm[(ty * BX + tx) * V + k] = acc[k];
      __syncthreads();
      if (ty == 0)
        for (int y = 1; y < BY; y++)
#pragma unroll
          for (int k = 0; k < V; k++) acc[k] = comb<T>(acc[k], sm[(y * BX + tx) * V + k]);
      __syncthreads();
    }
    if (ty == 0 && valid)
#pragma unroll
      for (int k = 0; k < V; k++) put<T>(p, out_, o + k, s, acc[k]);
  }
}

/* ---- fin: the nsplit pieces of each output combined (one thread or one warp an output) ---- */
template <class T>
__global__ void __launch_bounds__(256)
    arg_fin(const void *part_, void *out_, const void *, const __grid_constant__ P p) {
  typedef Acc<typename Tr<T>::W> A;
  const A *part = align16<const A>(part_);
  uint32_t *out = (uint32_t *)out_ + p.out_off;
  if (p.group == 1) {
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < p.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
      A acc = part[o];
      for (int64_t s = 1; s < p.nsplit; s++) acc = comb<T>(acc, part[s * p.nout + o]);
      out[o] = acc.idx;
    }
    return;
  }
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < p.nout; o += nwarps) {
    /* Lanes past the pieces hold an index no piece has, which loses every tie. */
    A acc;
    acc.v = Tr<T>::low();
    acc.idx = 0xffffffffu;
    for (int64_t s = lane; s < p.nsplit; s += 32) acc = comb<T>(acc, part[s * p.nout + o]);
    for (int off = 16; off > 0; off >>= 1) acc = comb<T>(acc, shfl_xor(acc, off));
    if (lane == 0) out[o] = acc.idx;
  }
}

template <class T>
nv__red_kernels kernels_of() {
  constexpr int VW = 16 / sizeof(typename Tr<T>::U);
  nv__red_kernels k;
  k.row = (const void *)arg_row<T>;
  k.col = (const void *)arg_col<T, 1>;
  k.colv = (const void *)arg_col<T, VW>;
  k.fin = (const void *)arg_fin<T>;
  k.vec = VW;
  k.acc_size = sizeof(Acc<typename Tr<T>::W>);
  return k;
}

}  // namespace
}  // namespace nvarg

extern "C" nv__red_kernels nv__arg_kernels_of(nv_dtype dtype) {
  using namespace nvarg;
  switch (dtype) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_UINT8: return kernels_of<uint8_t>();
    case NV_DTYPE_INT8: return kernels_of<int8_t>();
    case NV_DTYPE_UINT16: return kernels_of<uint16_t>();
    case NV_DTYPE_INT16: return kernels_of<int16_t>();
    case NV_DTYPE_UINT32: return kernels_of<uint32_t>();
    case NV_DTYPE_INT32: return kernels_of<int32_t>();
    case NV_DTYPE_UINT64: return kernels_of<uint64_t>();
    case NV_DTYPE_INT64: return kernels_of<int64_t>();
    case NV_DTYPE_FLOAT16: return kernels_of<__half>();
    case NV_DTYPE_BFLOAT16: return kernels_of<__nv_bfloat16>();
    case NV_DTYPE_FLOAT32: return kernels_of<float>();
    case NV_DTYPE_FLOAT64: return kernels_of<double>();
    default: return nv__red_kernels{};
  }
}
