/* The scan family's kernels (scan_kernels.h): cumsum, cumprod, cummax, cummin and logcumsumexp
 * along one axis, forward or reversed, inclusive or exclusive, and diff.
 *
 * Semantics are the CPU's (src/cpu/scan.c): each element is converted into a wide work type
 * — float64 for the float dtypes and for every logcumsumexp, int64 for the signed integers and
 * bool (wrapping), uint64 for the unsigned ones, float64 pairs for complex64 — combined in walk
 * order, and each result converted once into the output dtype. The scans are parallel, so a
 * float sum or product is associated differently from the CPU's serial loop (in float64: the
 * rounded result rarely differs); integer results, max/min (NaN wins, the earlier of equal values
 * is kept) and the NaN/inf rules of logaddexp are the CPU's exactly. Every combination keeps the
 * earlier operand on the left.
 *
 * Row kernels: a group of G lanes scans a tile of G x ITEMS consecutive elements, loaded in
 * chunks of G x VEC (VEC elements per lane: one 16-byte load of the input where aligned), so
 * every load of a warp is contiguous, and transposed through shared memory so that each lane
 * holds ITEMS consecutive elements: a lane combines its elements serially, the group scans the
 * lanes' totals once with shuffles, and the tiles chain through a running carry. The block
 * variant adds the 8 warps' totals through shared memory. Column kernels: thread (x, y) of a
 * 16 x 16 block holds 8 consecutive positions of CV adjacent columns (one vector load per
 * position); the 16 rows' totals meet in shared memory. Both keep a tile's raw inputs in
 * registers: a lane or thread
 * combines its values into totals, the totals are scanned across lanes or threads, and it walks
 * its values again from its prefix, serially as the CPU does. Partial totals start from the
 * starting value, which is neutral on the right of any prefix (that starts from it too), so the
 * extra combinations change no integer, max/min or NaN result. Positions past the end of a
 * segment are padding, never combined; only the last tile of a row or column holds them (the
 * host makes chunks whole tiles). */
/* The scan kernels' templates, included by one .cu file per operation (scan_sum.cu, ...), so
 * that nvcc compiles their instantiations in parallel; scan.cu holds the lookup and diff. */
#ifndef NUVEC_CUDA_SCAN_IMPL_CUH
#define NUVEC_CUDA_SCAN_IMPL_CUH

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "cuda/convert.cuh"
#include "cuda/scan_kernels.h"

namespace nvscan {
namespace {

using namespace nvg;

#define DEV static __device__ __forceinline__

enum { SUM = NV__GPU_SCAN_SUM, PROD = NV__GPU_SCAN_PROD, MAX = NV__GPU_SCAN_MAX,
       MIN = NV__GPU_SCAN_MIN, LSE = NV__GPU_SCAN_LSE };

constexpr int THREADS = NV__GPU_SCAN_THREADS;
constexpr int WARPS = THREADS / 32;
constexpr int CROWS = NV__GPU_SCAN_COL_ROWS;
constexpr int CTX = NV__GPU_SCAN_COL_TX;  /* threads of a column block across the columns */
constexpr int CTY = THREADS / CTX;        /* and along the axis */

typedef nv__gpu_scan_params P;

/* complex64's work type: float64 pairs, as the CPU's. */
struct cplx {
  double re, im;
};

DEV double qnan() { return __longlong_as_double(0x7ff8000000000000ll); }

constexpr bool is_sint(int dt) {
  return dt == DT_BOOL || dt == DT_I8 || dt == DT_I16 || dt == DT_I32 || dt == DT_I64;
}
constexpr bool is_float(int dt) {
  return dt == DT_F16 || dt == DT_BF16 || dt == DT_F32 || dt == DT_F64;
}

/* The types of one (operation, input dtype): the work type W, the output dtype (the builder's:
 * bool sums and products give int32, logcumsumexp of a non-float gives float32), the stored
 * types, VEC elements per lane load (16 bytes of the wider of input and output) and K chunks
 * per tile (ITEMS = K * VEC elements per lane: 8 chunks, at most 32 elements). */
template <int OP, int IN>
struct Tr {
  static constexpr bool cpx = IN == DT_C64;
  static constexpr bool flt = !cpx && (OP == LSE || is_float(IN));
  typedef typename std::conditional<
      cpx, cplx,
      typename std::conditional<
          flt, double,
          typename std::conditional<is_sint(IN), int64_t, uint64_t>::type>::type>::type W;
  static constexpr int OUT = (OP == SUM || OP == PROD) && IN == DT_BOOL ? (int)DT_I32
                             : OP == LSE && !is_float(IN)               ? (int)DT_F32
                                                                        : IN;
  typedef typename src_t<IN>::T TI;
  typedef typename cvt<OUT>::T TO;
  static constexpr int ISZ = (int)sizeof(TI), OSZ = (int)sizeof(TO);
  static constexpr int VEC = 16 / (ISZ > OSZ ? ISZ : OSZ);
  static constexpr int K = VEC > 4 ? 32 / VEC : 8;
  static constexpr int ITEMS = K * VEC;
  /* Row kernels' blocks per SM to fit in registers (4: 1024 threads with 128 bytes of loads in
   * flight each) for 4-byte dtypes; the others, complex and logcumsumexp need more registers
   * per loaded byte. */
  static constexpr int ROW_MIN_BLOCKS = ISZ == 4 && OSZ == 4 && OP != LSE ? 4 : 1;
  /* Column kernels: CV adjacent columns per thread (at most 4 work values, one load of up to 16
   * bytes), CW per block. */
  static constexpr int CV = VEC < 4 ? VEC : 4;
  static constexpr int CW = CTX * CV;
};

/* ---- Element conversions (the CPU's nv__convert_run into and out of the work type) ---- */

template <int OP, int IN>
DEV typename Tr<OP, IN>::W load(typename Tr<OP, IN>::TI v) {
  typedef typename Tr<OP, IN>::W W;
  if constexpr (std::is_same<W, cplx>::value) {
    return cplx{f32_to_f64(v.x), f32_to_f64(v.y)};
  } else if constexpr (std::is_same<W, double>::value) {
    return narrow<DT_F64>(src_t<IN>::kind, src_t<IN>::widen(v));
  } else if constexpr (std::is_same<W, int64_t>::value) {
    return src_t<IN>::widen(v).i;
  } else {
    return src_t<IN>::widen(v).u;
  }
}

template <int OP, int IN>
DEV typename Tr<OP, IN>::TO store(typename Tr<OP, IN>::W w) {
  typedef typename Tr<OP, IN>::W W;
  constexpr int OUT = Tr<OP, IN>::OUT;
  if constexpr (std::is_same<W, cplx>::value) {
    return make_float2(f64_to_f32(w.re), f64_to_f32(w.im));
  } else if constexpr (std::is_same<W, double>::value) {
    return cvt<OUT>::from_d(w);
  } else if constexpr (std::is_same<W, int64_t>::value) {
    return cvt<OUT>::from_i(w);
  } else {
    return cvt<OUT>::from_u(w);
  }
}

/* ---- The operations: init (the CPU's starting accumulator) and comb(earlier, later) ---- */

/* The smallest and largest values of integer dtype `dt` (bool: 0 and 1), the CPU's ident_i /
 * ident_u. */
constexpr int64_t lo_of(int dt) {
  return dt == DT_I8 ? INT8_MIN : dt == DT_I16 ? INT16_MIN : dt == DT_I32 ? INT32_MIN
         : dt == DT_I64 ? INT64_MIN : 0;
}
constexpr uint64_t hi_of(int dt) {
  return dt == DT_BOOL ? 1u : dt == DT_I8 ? (uint64_t)INT8_MAX : dt == DT_I16 ? (uint64_t)INT16_MAX
         : dt == DT_I32 ? (uint64_t)INT32_MAX : dt == DT_I64 ? (uint64_t)INT64_MAX
         : dt == DT_U8 ? (uint64_t)UINT8_MAX : dt == DT_U16 ? (uint64_t)UINT16_MAX
         : dt == DT_U32 ? (uint64_t)UINT32_MAX : UINT64_MAX;
}

template <int OP, int IN>
DEV typename Tr<OP, IN>::W init() {
  typedef typename Tr<OP, IN>::W W;
  if constexpr (std::is_same<W, cplx>::value) {
    return cplx{OP == PROD ? 1.0 : OP == MAX ? -INFINITY : OP == MIN ? INFINITY : 0.0, 0.0};
  } else if constexpr (std::is_same<W, double>::value) {
    return OP == PROD ? 1.0 : OP == MAX || OP == LSE ? -INFINITY : OP == MIN ? INFINITY : 0.0;
  } else if constexpr (std::is_same<W, int64_t>::value) {
    return OP == PROD ? 1 : OP == MAX ? lo_of(IN) : OP == MIN ? (int64_t)hi_of(IN) : 0;
  } else {
    return OP == PROD ? 1u : OP == MIN ? hi_of(IN) : 0u;
  }
}

/* The CPU's logaddexp (not inlined: the unrolled tiles would hold dozens of copies). */
__device__ __noinline__ double logaddexp(double a, double b) {
  if (a != a || b != b) return qnan();
  double m = a > b ? a : b;
  if (m == -INFINITY || m == INFINITY) return m;
  return __dadd_rn(m, log1p(exp(-fabs(__dsub_rn(a, b)))));
}

template <int OP, int IN>
DEV typename Tr<OP, IN>::W comb(typename Tr<OP, IN>::W a, typename Tr<OP, IN>::W b) {
  typedef typename Tr<OP, IN>::W W;
  if constexpr (std::is_same<W, cplx>::value) {
    if constexpr (OP == SUM) {
      return cplx{__dadd_rn(a.re, b.re), __dadd_rn(a.im, b.im)};
    } else if constexpr (OP == PROD) {
      return cplx{__dsub_rn(__dmul_rn(a.re, b.re), __dmul_rn(a.im, b.im)),
                  __dadd_rn(__dmul_rn(a.re, b.im), __dmul_rn(a.im, b.re))};
    } else {
      bool nan = a.re != a.re || a.im != a.im || b.re != b.re || b.im != b.im;
      bool more = b.re > a.re || (b.re == a.re && b.im > a.im);
      bool less = b.re < a.re || (b.re == a.re && b.im < a.im);
      bool take = OP == MAX ? more : less;
      if (nan) return cplx{qnan(), qnan()};
      return take ? b : a;
    }
  } else if constexpr (std::is_same<W, double>::value) {
    if constexpr (OP == SUM) return __dadd_rn(a, b);
    else if constexpr (OP == PROD) return __dmul_rn(a, b);
    else if constexpr (OP == MAX) return a != a || b != b ? qnan() : (b > a ? b : a);
    else if constexpr (OP == MIN) return a != a || b != b ? qnan() : (b < a ? b : a);
    else return logaddexp(a, b);
  } else if constexpr (std::is_same<W, int64_t>::value) {
    if constexpr (OP == SUM) return (int64_t)((uint64_t)a + (uint64_t)b);
    else if constexpr (OP == PROD) return (int64_t)((uint64_t)a * (uint64_t)b);
    else if constexpr (OP == MAX) return b > a ? b : a;
    else return b < a ? b : a;
  } else {
    if constexpr (OP == SUM) return a + b;
    else if constexpr (OP == PROD) return a * b;
    else if constexpr (OP == MAX) return b > a ? b : a;
    else return b < a ? b : a;
  }
}

/* ---- Shuffles of the work types within groups of `width` lanes ---- */

template <class W>
DEV W shfl_up(W v, int d, int width) {
  return __shfl_up_sync(0xffffffffu, v, (unsigned)d, width);
}
DEV cplx shfl_up(cplx v, int d, int width) {
  return cplx{__shfl_up_sync(0xffffffffu, v.re, (unsigned)d, width),
              __shfl_up_sync(0xffffffffu, v.im, (unsigned)d, width)};
}
template <class W>
DEV W shfl_idx(W v, int src, int width) {
  return __shfl_sync(0xffffffffu, v, src, width);
}
DEV cplx shfl_idx(cplx v, int src, int width) {
  return cplx{__shfl_sync(0xffffffffu, v.re, src, width),
              __shfl_sync(0xffffffffu, v.im, src, width)};
}

/* ---- Vector loads and stores of N elements (N * sizeof(E) <= 16 bytes, a power of two) ---- */

template <int B> struct raw;
template <> struct raw<16> { typedef uint4 T; };
template <> struct raw<8> { typedef uint2 T; };
template <> struct raw<4> { typedef unsigned int T; };
template <> struct raw<2> { typedef unsigned short T; };
template <> struct raw<1> { typedef unsigned char T; };

template <class E, int N>
DEV bool aligned(const E *p) {
  return ((uintptr_t)p & (uintptr_t)(N * sizeof(E) - 1)) == 0;
}

template <class E, int N>
DEV void vload(const E *p, E (&e)[N]) {
  typedef typename raw<N * sizeof(E)>::T R;
  union {
    R r;
    E e[N];
  } u;
  u.r = *reinterpret_cast<const R *>(p);
#pragma unroll
  for (int i = 0; i < N; i++) e[i] = u.e[i];
}

template <class E, int N>
DEV void vstore(E *p, const E (&e)[N]) {
  typedef typename raw<N * sizeof(E)>::T R;
  union {
    R r;
    E e[N];
  } u;
#pragma unroll
  for (int i = 0; i < N; i++) u.e[i] = e[i];
  *reinterpret_cast<R *>(p) = u.r;
}

/* ---- Row scans ---- */

/* A warp's staging area in shared memory: its tile of 32 lanes x ITEMS elements of the wider of
 * the input and output types, with one pad element after every 32 (so that lanes reading their
 * ITEMS consecutive elements hit distinct banks). */
template <int OP, int IN>
struct Stage {
  static constexpr int BYTES = Tr<OP, IN>::ISZ > Tr<OP, IN>::OSZ ? Tr<OP, IN>::ISZ
                                                                  : Tr<OP, IN>::OSZ;
  static constexpr int N = 32 * Tr<OP, IN>::ITEMS;
  static constexpr int WARP_BYTES = (N + N / 32) * BYTES;
};
DEV int padded(int i) { return i + (i >> 5); }

/* Scans walk positions [s0, s1) of one row (elements in[0..len), out[0..len)) in tiles, a group
 * of G lanes (G <= 32) or the whole block (G == THREADS) per row, starting from `carry` and
 * leaving in it the combination of everything scanned. `active` false: the group has no row (it
 * still takes part in the shuffles). STORE false: nothing is written (a segment's total). `tile`
 * counts the block's tiles (the parity picks the shared buffer of warp totals); `stage` is the
 * block's staging area (Stage: WARPS of them), unused when G == 1.
 *
 * A tile gives each lane ITEMS consecutive walk positions. It is loaded coalesced — chunk k of
 * the group's tile is G x VEC consecutive positions, VEC per lane (one 16-byte load where
 * aligned) — and transposed through the warp's staging area, so each lane combines its
 * positions serially into one total, the group scans those totals once with shuffles (a block
 * adds the warps' totals through shared memory), and each lane walks its positions again from
 * its prefix, serially as the CPU does; the results go back through the staging area to
 * coalesced stores. */
template <int OP, int IN, int G, bool STORE>
DEV void row_span(const P &p, const typename Tr<OP, IN>::TI *in, typename Tr<OP, IN>::TO *out,
                  int64_t s0, int64_t s1, bool active, typename Tr<OP, IN>::W &carry,
                  typename Tr<OP, IN>::W (*s_tot)[WARPS], unsigned &tile, unsigned char *stage) {
  typedef Tr<OP, IN> T;
  typedef typename T::W W;
  typedef typename T::TI TI;
  typedef typename T::TO TO;
  constexpr int VEC = T::VEC, K = T::K, ITEMS = T::ITEMS;
  constexpr bool BLOCK = G == THREADS;
  constexpr int LANES = BLOCK ? 32 : G;
  const int lane = (int)(threadIdx.x % LANES), warp = (int)(threadIdx.x / 32);
  const int64_t len = p.len, step = (int64_t)G * ITEMS;
  const int64_t wbase = BLOCK ? (int64_t)warp * 32 * ITEMS : 0;
  const bool rev = p.reverse != 0;
  /* The group's part of its warp's staging area, as input and as output elements. */
  const int gbase = (int)(threadIdx.x % 32 / LANES) * LANES * ITEMS;
  TI *si = reinterpret_cast<TI *>(stage + (LANES > 1 ? warp * Stage<OP, IN>::WARP_BYTES : 0));
  TO *so = reinterpret_cast<TO *>(si);
  for (int64_t t0 = s0; t0 < s1; t0 += step, tile++) {
    /* n[k]: the real positions of this lane's chunk k (the rest is padding, never combined). */
    TI e[K][VEC];
    int n[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int64_t q0 = t0 + wbase + ((int64_t)k * LANES + lane) * VEC;
      n[k] = !active || q0 >= s1 ? 0 : s1 - q0 < VEC ? (int)(s1 - q0) : VEC;
      const TI *src = in + (rev ? len - q0 - VEC : q0);
      if (n[k] == VEC && aligned<TI, VEC>(src)) {
        vload<TI, VEC>(src, e[k]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
          e[k][rev ? VEC - 1 - j : j] = j < n[k] ? in[rev ? len - 1 - (q0 + j) : q0 + j] : TI{};
      }
    }
    /* e[k][j] is walk position q0 + j (reversed: element VEC - 1 - j of the load). */
#define NV_SCAN_E(k, j) e[k][rev ? VEC - 1 - (j) : (j)]
    /* v[i]: this lane's walk position t0 + wbase + lane * ITEMS + i, cnt of them real. */
    TI v[ITEMS];
    const int64_t mine = t0 + wbase + (int64_t)lane * ITEMS;
    const int cnt = !active || mine >= s1 ? 0 : s1 - mine < ITEMS ? (int)(s1 - mine) : ITEMS;
    if constexpr (LANES == 1) {
#pragma unroll
      for (int k = 0; k < K; k++)
#pragma unroll
        for (int j = 0; j < VEC; j++) v[k * VEC + j] = NV_SCAN_E(k, j);
    } else {
#pragma unroll
      for (int k = 0; k < K; k++)
#pragma unroll
        for (int j = 0; j < VEC; j++)
          si[padded(gbase + (k * LANES + lane) * VEC + j)] = NV_SCAN_E(k, j);
      __syncwarp();
#pragma unroll
      for (int i = 0; i < ITEMS; i++) v[i] = si[padded(gbase + lane * ITEMS + i)];
      __syncwarp();
    }
    W x = init<OP, IN>();
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
      if (i < cnt) x = comb<OP, IN>(x, load<OP, IN>(v[i]));
#pragma unroll
    for (int d = 1; d < LANES; d <<= 1) {
      W y = shfl_up(x, d, LANES);
      if (lane >= d) x = comb<OP, IN>(y, x);
    }
    /* x: the group's inclusive scan of the lanes' totals. The carry this lane starts from: the
     * group's, or in a block the block's carry combined with the totals of the warps before. */
    const W tot = shfl_idx(x, LANES - 1, LANES);
    W c = carry;
    if constexpr (BLOCK) {
      W (*buf)[WARPS] = s_tot + (tile & 1);
      if (lane == 0) (*buf)[warp] = tot;
      __syncthreads();
      W b = carry;
#pragma unroll
      for (int w = 0; w < WARPS; w++) {
        if (w == warp) c = b;
        b = comb<OP, IN>(b, (*buf)[w]);
      }
      carry = b;
    } else {
      carry = comb<OP, IN>(carry, tot);
    }
    if constexpr (STORE) {
      const W ex = shfl_up(x, 1, LANES);
      W pre = lane == 0 ? c : comb<OP, IN>(c, ex);
      /* The results: one group of G lanes writes them through its staging area (each lane its
       * ITEMS, read back by chunks), a lone lane keeps them in registers. */
      [[maybe_unused]] TO r[LANES == 1 ? ITEMS : 1];
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        const W nxt = i < cnt ? comb<OP, IN>(pre, load<OP, IN>(v[i])) : pre;
        const TO y = store<OP, IN>(p.inclusive ? nxt : pre);
        if constexpr (LANES == 1) r[i] = y;
        else so[padded(gbase + lane * ITEMS + i)] = y;
        pre = nxt;
      }
      if constexpr (LANES > 1) __syncwarp();
#pragma unroll
      for (int k = 0; k < K; k++) {
        TO o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) {
          if constexpr (LANES == 1) o[rev ? VEC - 1 - j : j] = r[k * VEC + j];
          else o[rev ? VEC - 1 - j : j] = so[padded(gbase + (k * LANES + lane) * VEC + j)];
        }
        const int64_t q0 = t0 + wbase + ((int64_t)k * LANES + lane) * VEC;
        TO *dst = out + (rev ? len - q0 - VEC : q0);
        if (n[k] == VEC && aligned<TO, VEC>(dst)) {
          vstore<TO, VEC>(dst, o);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; j++)
            if (j < n[k]) out[rev ? len - 1 - (q0 + j) : q0 + j] = o[rev ? VEC - 1 - j : j];
        }
      }
      if constexpr (LANES > 1) __syncwarp();
    }
#undef NV_SCAN_E
  }
}

/* The staging area of a row kernel's block (G lanes a row; none for G == 1). */
#define NV_SCAN_STAGE(G)                                                                    \
  __shared__ __align__(16) unsigned char stage[(G) > 1 ? WARPS * Stage<OP, IN>::WARP_BYTES : 16]

/* Whole rows, a group of G lanes each (outer rows of len elements, no chunks). */
template <int OP, int IN, int G>
__global__ void __launch_bounds__(THREADS, Tr<OP, IN>::ROW_MIN_BLOCKS)
    k_row(const void *vin, void *vout, const void *vtot, P p) {
  (void)vtot;
  typedef Tr<OP, IN> T;
  NV_SCAN_STAGE(G);
  const typename T::TI *in = (const typename T::TI *)vin + p.ioff;
  typename T::TO *out = (typename T::TO *)vout + p.ooff;
  constexpr int GPB = THREADS / G;
  const int group = (int)(threadIdx.x / G);
  unsigned tile = 0;
  /* The loop is block-uniform: every lane of a warp takes part in its shuffles. */
  for (int64_t r0 = (int64_t)blockIdx.x * GPB; r0 < p.outer; r0 += (int64_t)gridDim.x * GPB) {
    const int64_t r = r0 + group;
    const bool active = r < p.outer;
    const int64_t base = active ? r * p.len : 0;
    typename T::W carry = init<OP, IN>();
    row_span<OP, IN, G, true>(p, in + base, out + base, 0, p.len, active, carry, nullptr, tile,
                              stage);
  }
}

/* A block per segment, starting from the segment's carry slot when p.carry. */
template <int OP, int IN>
__global__ void __launch_bounds__(THREADS)
    k_row_block(const void *vin, void *vout, const void *vtot, P p) {
  typedef Tr<OP, IN> T;
  typedef typename T::W W;
  __shared__ W s_tot[2][WARPS];
  NV_SCAN_STAGE(THREADS);
  const typename T::TI *in = (const typename T::TI *)vin + p.ioff;
  typename T::TO *out = (typename T::TO *)vout + p.ooff;
  const W *tot = (const W *)vtot;
  unsigned tile = 0;
  for (int64_t s = blockIdx.x; s < p.segments; s += gridDim.x) {
    const int64_t r = s / p.nchunks, k = s % p.nchunks;
    const int64_t s0 = k * p.chunk, s1 = s0 + p.chunk < p.len ? s0 + p.chunk : p.len;
    W carry = p.carry ? tot[s] : init<OP, IN>();
    row_span<OP, IN, THREADS, true>(p, in + r * p.len, out + r * p.len, s0, s1, true, carry,
                                    s_tot, tile, stage);
  }
}

/* Each segment's total (from the starting value) into its slot. */
template <int OP, int IN>
__global__ void __launch_bounds__(THREADS) k_row_reduce(const void *vin, void *vtot, P p) {
  typedef Tr<OP, IN> T;
  typedef typename T::W W;
  __shared__ W s_tot[2][WARPS];
  NV_SCAN_STAGE(THREADS);
  const typename T::TI *in = (const typename T::TI *)vin + p.ioff;
  W *tot = (W *)vtot;
  unsigned tile = 0;
  for (int64_t s = blockIdx.x; s < p.segments; s += gridDim.x) {
    const int64_t r = s / p.nchunks, k = s % p.nchunks;
    const int64_t s0 = k * p.chunk, s1 = s0 + p.chunk < p.len ? s0 + p.chunk : p.len;
    W carry = init<OP, IN>();
    row_span<OP, IN, THREADS, false>(p, in + r * p.len, nullptr, s0, s1, true, carry, s_tot,
                                     tile, stage);
    if (threadIdx.x == 0) tot[s] = carry;
  }
}

/* ---- Column scans (a 1-D block of TX x TY threads) ---- */

/* Walks the segments of a column launch: thread (x, y) = (threadIdx.x % TX, threadIdx.x / TX)
 * holds CV adjacent columns (one vector load of CV elements where the columns are whole and
 * aligned) at CROWS consecutive positions of each tile of TY * CROWS positions. The raw inputs
 * stay in registers; each thread combines its CROWS values per column into a total (from the
 * starting value), the TY totals meet in shared memory and give each thread its prefix, and the
 * thread walks its values again from the prefix, serially as the CPU does, storing each result.
 * STORE false: the segments' totals into their slots (a reduce). */
template <int OP, int IN, bool STORE>
DEV void col_body(const void *vin, void *vout, void *vtot, const P &p) {
  typedef Tr<OP, IN> T;
  typedef typename T::W W;
  typedef typename T::TI TI;
  typedef typename T::TO TO;
  constexpr int CV = T::CV, CW = T::CW;
  __shared__ W s_tot[2][CTY][CV][CTX];
  const int x = (int)(threadIdx.x % CTX), y = (int)(threadIdx.x / CTX);
  const TI *in = (const TI *)vin + p.ioff;
  TO *out = STORE ? (TO *)vout + p.ooff : nullptr;
  W *tot = (W *)vtot;
  const int64_t tiles = (p.inner + CW - 1) / CW, len = p.len, inner = p.inner;
  const bool rev = p.reverse != 0;
  unsigned tile = 0;
  for (int64_t s = blockIdx.x; s < p.segments; s += gridDim.x) {
    const int64_t ct = s % tiles, rest = s / tiles;
    const int64_t k = rest % p.nchunks, o = rest / p.nchunks;
    const int64_t c0 = ct * CW + (int64_t)x * CV;
    /* Columns c0 + j < ncol of this thread are real; whole: all CV of them, vector-aligned at
     * every position (inner a multiple of CV and an aligned base). */
    const int ncol = c0 >= inner ? 0 : inner - c0 < CV ? (int)(inner - c0) : CV;
    const int64_t s0 = k * p.chunk, s1 = s0 + p.chunk < len ? s0 + p.chunk : len;
    const int64_t slot = (o * p.nchunks + k) * inner + c0;
    const int64_t base = o * len * inner + c0;
    const bool vin_ok = ncol == CV && inner % CV == 0 && aligned<TI, CV>(in + base);
    const bool vout_ok =
        STORE && ncol == CV && inner % CV == 0 && aligned<TO, CV>(out + base);
    W carry[CV];
#pragma unroll
    for (int j = 0; j < CV; j++)
      carry[j] = STORE && p.carry && j < ncol ? tot[slot + j] : init<OP, IN>();
    for (int64_t t0 = s0; t0 < s1; t0 += (int64_t)CTY * CROWS, tile++) {
      const int64_t q0 = t0 + (int64_t)y * CROWS;
      /* Positions q0 + i < s1 are real (the rest is padding, never combined). */
      const int nrow = q0 >= s1 ? 0 : s1 - q0 < CROWS ? (int)(s1 - q0) : CROWS;
      TI e[CROWS][CV];
#pragma unroll
      for (int i = 0; i < CROWS; i++) {
        const TI *src = in + base + (rev ? len - 1 - (q0 + i) : q0 + i) * inner;
        if (i < nrow && vin_ok) {
          vload<TI, CV>(src, e[i]);
        } else {
#pragma unroll
          for (int j = 0; j < CV; j++) e[i][j] = i < nrow && j < ncol ? src[j] : TI{};
        }
      }
      W t[CV];
#pragma unroll
      for (int j = 0; j < CV; j++) {
        t[j] = init<OP, IN>();
#pragma unroll
        for (int i = 0; i < CROWS; i++)
          if (i < nrow) t[j] = comb<OP, IN>(t[j], load<OP, IN>(e[i][j]));
      }
      W (*buf)[CV][CTX] = s_tot[tile & 1];
#pragma unroll
      for (int j = 0; j < CV; j++) buf[y][j][x] = t[j];
      __syncthreads();
      W pre[CV];
#pragma unroll
      for (int j = 0; j < CV; j++) {
        W b = carry[j];
        pre[j] = b;
#pragma unroll
        for (int r = 0; r < CTY; r++) {
          if (r == y) pre[j] = b;
          b = comb<OP, IN>(b, buf[r][j][x]);
        }
        carry[j] = b;
      }
      if constexpr (STORE) {
#pragma unroll
        for (int i = 0; i < CROWS; i++) {
          if (i < nrow) {
            TO ov[CV];
#pragma unroll
            for (int j = 0; j < CV; j++) {
              const W nxt = comb<OP, IN>(pre[j], load<OP, IN>(e[i][j]));
              ov[j] = store<OP, IN>(p.inclusive ? nxt : pre[j]);
              pre[j] = nxt;
            }
            TO *dst = out + base + (rev ? len - 1 - (q0 + i) : q0 + i) * inner;
            if (vout_ok) {
              vstore<TO, CV>(dst, ov);
            } else {
#pragma unroll
              for (int j = 0; j < CV; j++)
                if (j < ncol) dst[j] = ov[j];
            }
          }
        }
      }
    }
    if constexpr (!STORE) {
      if (y == 0) {
#pragma unroll
        for (int j = 0; j < CV; j++)
          if (j < ncol) tot[slot + j] = carry[j];
      }
    }
  }
}

template <int OP, int IN>
__global__ void __launch_bounds__(THREADS) k_col(const void *vin, void *vout, const void *vtot,
                                                  P p) {
  col_body<OP, IN, true>(vin, vout, (void *)vtot, p);
}

template <int OP, int IN>
__global__ void __launch_bounds__(THREADS) k_col_reduce(const void *vin, void *vtot, P p) {
  col_body<OP, IN, false>(vin, nullptr, vtot, p);
}

/* Segment totals into each segment's starting value, per row or column (outer * inner of
 * them), in chunk order. */
template <int OP, int IN>
__global__ void __launch_bounds__(THREADS) k_carry(void *vtot, P p) {
  typedef typename Tr<OP, IN>::W W;
  W *tot = (W *)vtot;
  const int64_t n = p.outer * p.inner;
  for (int64_t q = (int64_t)blockIdx.x * THREADS + threadIdx.x; q < n;
       q += (int64_t)gridDim.x * THREADS) {
    const int64_t base = (q / p.inner) * p.nchunks * p.inner + q % p.inner;
    W c = init<OP, IN>();
    for (int64_t k = 0; k < p.nchunks; k++) {
      W t = tot[base + k * p.inner];
      tot[base + k * p.inner] = c;
      c = comb<OP, IN>(c, t);
    }
  }
}

template <int OP, int IN>
void fill(nv__gpu_scan_kernels *k) {
  k->row[0] = (const void *)k_row<OP, IN, 1>;
  k->row[1] = (const void *)k_row<OP, IN, 4>;
  k->row[2] = (const void *)k_row<OP, IN, 16>;
  k->row[3] = (const void *)k_row<OP, IN, 32>;
  k->row_block = (const void *)k_row_block<OP, IN>;
  k->row_reduce = (const void *)k_row_reduce<OP, IN>;
  k->col = (const void *)k_col<OP, IN>;
  k->col_reduce = (const void *)k_col_reduce<OP, IN>;
  k->carry = (const void *)k_carry<OP, IN>;
  k->items = Tr<OP, IN>::ITEMS;
  k->col_width = Tr<OP, IN>::CW;
  k->work_size = (int)sizeof(typename Tr<OP, IN>::W);
}

template <int OP>
bool fill_op(int dt, nv__gpu_scan_kernels *k) {
  switch (dt) {
    case DT_BOOL: fill<OP, DT_BOOL>(k); return true;
    case DT_U8: fill<OP, DT_U8>(k); return true;
    case DT_U16: fill<OP, DT_U16>(k); return true;
    case DT_U32: fill<OP, DT_U32>(k); return true;
    case DT_U64: fill<OP, DT_U64>(k); return true;
    case DT_I8: fill<OP, DT_I8>(k); return true;
    case DT_I16: fill<OP, DT_I16>(k); return true;
    case DT_I32: fill<OP, DT_I32>(k); return true;
    case DT_I64: fill<OP, DT_I64>(k); return true;
    case DT_F16: fill<OP, DT_F16>(k); return true;
    case DT_BF16: fill<OP, DT_BF16>(k); return true;
    case DT_F32: fill<OP, DT_F32>(k); return true;
    case DT_F64: fill<OP, DT_F64>(k); return true;
    case DT_C64:
      if constexpr (OP != LSE) {
        fill<OP, DT_C64>(k);
        return true;
      }
      return false;
    default: return false;
  }
}

/* ---- diff ---- */

/* b - a in the dtype's own arithmetic, as the CPU's sub_table: bool differs, integers wrap,
 * halves subtract in float32 and round once, complex64 subtracts each part in float32. */
template <int DT>
DEV typename src_t<DT>::T sub(typename src_t<DT>::T b, typename src_t<DT>::T a) {
  typedef typename src_t<DT>::T E;
  if constexpr (DT == DT_BOOL) {
    return (E)(b != a);
  } else if constexpr (DT == DT_F16) {
    return f32_to_f16(__fsub_rn(f16_to_f32(b), f16_to_f32(a)));
  } else if constexpr (DT == DT_BF16) {
    return f32_to_bf16(__fsub_rn(bf16_to_f32(b), bf16_to_f32(a)));
  } else if constexpr (DT == DT_F32) {
    return __fsub_rn(b, a);
  } else if constexpr (DT == DT_F64) {
    return __dsub_rn(b, a);
  } else if constexpr (DT == DT_C64) {
    return make_float2(__fsub_rn(b.x, a.x), __fsub_rn(b.y, a.y));
  } else {
    typedef typename std::make_unsigned<E>::type U;
    return (E)(U)((U)b - (U)a);
  }
}

template <int DT, class I>
__global__ void __launch_bounds__(THREADS) k_diff(const void *vin, void *vout,
                                                   nv__gpu_diff_params p) {
  typedef typename src_t<DT>::T E;
  const E *in = (const E *)vin + p.ioff;
  E *out = (E *)vout;
  for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < p.n;
       i += (int64_t)gridDim.x * THREADS) {
    I rem = (I)i;
    int64_t off = 0;
    for (int d = p.nd - 1; d > 0; d--) {
      const I n = (I)p.shape[d];
      const I q = rem / n;
      off += (int64_t)(rem - q * n) * p.st[d];
      rem = q;
    }
    off += (int64_t)rem * p.st[0];
    out[i] = sub<DT>(in[off + p.step], in[off]);
  }
}

template <int DT>
const void *diff_of(int idx32) {
  return idx32 ? (const void *)k_diff<DT, uint32_t> : (const void *)k_diff<DT, uint64_t>;
}

} /* namespace */
} /* namespace nvscan */


#endif
