/* softmax and logsumexp over contiguous float rows, and the general softmax's normalization
 * (reduce.h). The register kernel (rows_reg) gives each row a group of threads (a power of
 * two; blocks loop over rows) that holds the row in registers, packed in its own dtype as
 * 16-byte pieces (piece k * group + thread of a row: every warp's load is contiguous), so a
 * row is read once and written once:
 *  1. each thread's maximum (packed pairs for the half types), then the warp's by shuffles;
 *  2. exp(x - the warp's maximum) of every element, kept in registers (or computed again at
 *     the end: the RECOMPUTE kernels, whose registers hold only the packed row), summed per
 *     thread over eight partial sums, then over the warp by shuffles;
 *  3. groups of more than a warp: one exchange through shared memory (one barrier): every
 *     warp's (maximum, sum) read by every warp, the row's maximum m and its sum rescaled to it
 *     (each warp's sum times exp(its maximum - m));
 *  4. softmax: each kept exponential times exp(warp maximum - m) / sum, packed and stored;
 *     logsumexp: m + log(sum) in float64, rounded once to the dtype.
 * There is no other synchronization: groups of up to a warp never wait on each other, larger
 * groups once per row. Longer rows (rows_long) keep an online maximum and sum per thread
 * (logsumexp's only pass; softmax then reads the row again to write it). float16/bfloat16
 * compute in float32 (exp2 of x * log2(e) - m * log2(e) on the hardware unit, far below
 * their precision), float32 in float32 with expf (sums across threads in float64), float64
 * in float64.
 * As the CPU's kernels (src/cpu/reduce_softmax.c): a row whose maximum is NaN or infinite is
 * all NaN (softmax) or that maximum (logsumexp); -inf elements give 0. */
#include <type_traits>

#include "cuda/reduce_common.cuh"

namespace nvred {
namespace {

typedef nv__rows_fast_params RP;

/* ---- the register kernel ---- */

/* Compile-time variants of the register kernel (the sweep bench/gpu/rows_sweep.cu times
 * them; the library's choices are the table at the end of this file). */
enum {
  ROWS_RECOMPUTE = 1, /* registers hold only the packed row; exp computed twice */
  ROWS_SUM64 = 2,     /* sums across threads in float64 (per thread always in W) */
  ROWS_STREAM = 4,    /* softmax's stores streaming (st.global.cs) */
  ROWS_PREFETCH = 8,  /* the next row's loads issued before this row's work (persistent grids) */
  ROWS_LDHINT = 16,   /* loads with L1::no_allocate and an L2 256-byte prefetch */
  ROWS_VEC_ONLY = 32  /* no scalar path: every launch 16-byte aligned (the sweep's own inputs) */
};

constexpr float kLog2e = 1.4426950408889634f;

/* max with NaN winning (one instruction; the portable form for host compilers). */
__device__ __forceinline__ float max_nan(float a, float b) {
#ifdef __CUDA_ARCH__
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return a != a || b != b ? NAN : a > b ? a : b;
#endif
}
__device__ __forceinline__ double max_nan(double a, double b) { return b > a || b != b ? b : a; }

/* 2^x on the special function unit (2 ulp; 0 below 2^-126). */
__device__ __forceinline__ float ex2_fast(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
#endif
}

/* The element types: W the work type; a 16-byte piece holds VW elements; neg() is a piece of
 * -inf (what a thread holds past its row's end); lmax the maximum over pieces (NaN wins);
 * unpack / pack convert a piece; ex(x, prep(mu)) is exp(x - mu) for mu finite, ex1(d) exp(d)
 * for d <= 0. */
template <class T>
struct Elt;

/* The largest of V 16-byte loads of packed half pairs (H2: __half2 or __nv_bfloat162), a NaN
 * winning: pairwise __hmax2_nan over the loads, then across the pair. */
template <class H2, int V>
__device__ __forceinline__ float lmax_pairs(const uint4 (&v)[V]) {
  H2 a = bit_cast<H2>(v[0].x), b = bit_cast<H2>(v[0].y), c = bit_cast<H2>(v[0].z),
     d = bit_cast<H2>(v[0].w);
#pragma unroll
  for (int k = 1; k < V; k++) {
    a = __hmax2_nan(a, bit_cast<H2>(v[k].x));
    b = __hmax2_nan(b, bit_cast<H2>(v[k].y));
    c = __hmax2_nan(c, bit_cast<H2>(v[k].z));
    d = __hmax2_nan(d, bit_cast<H2>(v[k].w));
  }
  a = __hmax2_nan(__hmax2_nan(a, b), __hmax2_nan(c, d));
  return max_nan(__low2float(a), __high2float(a));
}

template <>
struct Elt<__nv_bfloat16> {
  typedef float W;
  static constexpr int VW = 8;
  static __device__ __forceinline__ uint4 neg() {
    return make_uint4(0xff80ff80u, 0xff80ff80u, 0xff80ff80u, 0xff80ff80u);
  }
  template <int V>
  static __device__ __forceinline__ float lmax(const uint4 (&v)[V]) {
    return lmax_pairs<__nv_bfloat162>(v);
  }
  static __device__ __forceinline__ void unpack(uint4 v, float (&x)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      x[2 * i] = __uint_as_float(w[i] << 16);
      x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  static __device__ __forceinline__ uint4 pack(const float (&y)[8]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      w[i] = bit_cast<uint32_t>(__floats2bfloat162_rn(y[2 * i], y[2 * i + 1]));
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
  static __device__ __forceinline__ float prep(float mu) { return mu * kLog2e; }
  static __device__ __forceinline__ float ex(float x, float pc) {
    return ex2_fast(fmaf(x, kLog2e, -pc));
  }
  static __device__ __forceinline__ float ex1(float d) { return ex2_fast(d * kLog2e); }
};

template <>
struct Elt<__half> {
  typedef float W;
  static constexpr int VW = 8;
  static __device__ __forceinline__ uint4 neg() {
    return make_uint4(0xfc00fc00u, 0xfc00fc00u, 0xfc00fc00u, 0xfc00fc00u);
  }
  static __device__ __forceinline__ __half2 h2(uint32_t u) { return bit_cast<__half2>(u); }
  template <int V>
  static __device__ __forceinline__ float lmax(const uint4 (&v)[V]) {
    return lmax_pairs<__half2>(v);
  }
  static __device__ __forceinline__ void unpack(uint4 v, float (&x)[8]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 f = __half22float2(h2(w[i]));
      x[2 * i] = f.x;
      x[2 * i + 1] = f.y;
    }
  }
  static __device__ __forceinline__ uint4 pack(const float (&y)[8]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      w[i] = bit_cast<uint32_t>(__floats2half2_rn(y[2 * i], y[2 * i + 1]));
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
  static __device__ __forceinline__ float prep(float mu) { return mu * kLog2e; }
  static __device__ __forceinline__ float ex(float x, float pc) {
    return ex2_fast(fmaf(x, kLog2e, -pc));
  }
  static __device__ __forceinline__ float ex1(float d) { return ex2_fast(d * kLog2e); }
};

template <>
struct Elt<float> {
  typedef float W;
  static constexpr int VW = 4;
  static __device__ __forceinline__ uint4 neg() {
    return make_uint4(0xff800000u, 0xff800000u, 0xff800000u, 0xff800000u);
  }
  template <int V>
  static __device__ __forceinline__ float lmax(const uint4 (&v)[V]) {
    float a = __uint_as_float(v[0].x), b = __uint_as_float(v[0].y), c = __uint_as_float(v[0].z),
          d = __uint_as_float(v[0].w);
#pragma unroll
    for (int k = 1; k < V; k++) {
      a = max_nan(a, __uint_as_float(v[k].x));
      b = max_nan(b, __uint_as_float(v[k].y));
      c = max_nan(c, __uint_as_float(v[k].z));
      d = max_nan(d, __uint_as_float(v[k].w));
    }
    return max_nan(max_nan(a, b), max_nan(c, d));
  }
  static __device__ __forceinline__ void unpack(uint4 v, float (&x)[4]) {
    x[0] = __uint_as_float(v.x);
    x[1] = __uint_as_float(v.y);
    x[2] = __uint_as_float(v.z);
    x[3] = __uint_as_float(v.w);
  }
  static __device__ __forceinline__ uint4 pack(const float (&y)[4]) {
    return make_uint4(__float_as_uint(y[0]), __float_as_uint(y[1]), __float_as_uint(y[2]),
                      __float_as_uint(y[3]));
  }
  static __device__ __forceinline__ float prep(float mu) { return mu; }
  static __device__ __forceinline__ float ex(float x, float mu) { return expf(x - mu); }
  static __device__ __forceinline__ float ex1(float d) { return expf(d); }
};

template <>
struct Elt<double> {
  typedef double W;
  static constexpr int VW = 2;
  static __device__ __forceinline__ uint4 neg() {
    return make_uint4(0u, 0xfff00000u, 0u, 0xfff00000u);
  }
  template <int V>
  static __device__ __forceinline__ double lmax(const uint4 (&v)[V]) {
    double a = bit_cast<double>(make_uint2(v[0].x, v[0].y));
    double b = bit_cast<double>(make_uint2(v[0].z, v[0].w));
#pragma unroll
    for (int k = 1; k < V; k++) {
      a = max_nan(a, bit_cast<double>(make_uint2(v[k].x, v[k].y)));
      b = max_nan(b, bit_cast<double>(make_uint2(v[k].z, v[k].w)));
    }
    return max_nan(a, b);
  }
  static __device__ __forceinline__ void unpack(uint4 v, double (&x)[2]) {
    x[0] = bit_cast<double>(make_uint2(v.x, v.y));
    x[1] = bit_cast<double>(make_uint2(v.z, v.w));
  }
  static __device__ __forceinline__ uint4 pack(const double (&y)[2]) {
    uint2 a = bit_cast<uint2>(y[0]), b = bit_cast<uint2>(y[1]);
    return make_uint4(a.x, a.y, b.x, b.y);
  }
  static __device__ __forceinline__ double prep(double mu) { return mu; }
  static __device__ __forceinline__ double ex(double x, double mu) { return exp(x - mu); }
  static __device__ __forceinline__ double ex1(double d) { return exp(d); }
};

/* The sums' type across threads. */
template <class W, int FL>
struct SumOf {
  typedef typename std::conditional<(FL & ROWS_SUM64) != 0, double, W>::type type;
};

template <class W, class S>
struct Xch {
  W m;
  S s;
};

template <int FL>
__device__ __forceinline__ uint4 ldv(const void *p) {
#ifdef __CUDA_ARCH__
  if constexpr ((FL & ROWS_LDHINT) != 0) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  }
#endif
  return ld16(p);
}

template <int FL>
__device__ __forceinline__ void stv(void *p, uint4 v) {
  if constexpr ((FL & ROWS_STREAM) != 0) __stcs((uint4 *)p, v);
  else *(uint4 *)p = v;
}

/* One piece from elements one at a time (rows not 16-byte aligned): the first `rem` of its
 * elements, -inf after them. The words are packed explicitly, so that the half types' pieces
 * take four registers as the aligned path's. */
template <class T>
__device__ __forceinline__ uint4 ld_piece(const T *x, int rem) {
  constexpr int VW = Elt<T>::VW;
  const uint4 neg = Elt<T>::neg();
  uint32_t w[4] = {neg.x, neg.y, neg.z, neg.w};
  if constexpr (sizeof(T) == 2) {
    const unsigned short *h = (const unsigned short *)x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t lo = w[i] & 0xffffu, hi = w[i] >> 16;
      if (2 * i < rem) lo = __ldg(h + 2 * i);
      if (2 * i + 1 < rem) hi = __ldg(h + 2 * i + 1);
      w[i] = __byte_perm(lo, hi, 0x5410);
    }
  } else if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++)
      if (i < rem) w[i] = __ldg((const unsigned int *)x + i);
  } else {
#pragma unroll
    for (int i = 0; i < VW; i++)
      if (i < rem) {
        uint2 d = __ldg((const uint2 *)x + i);
        w[2 * i] = d.x;
        w[2 * i + 1] = d.y;
      }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The first `rem` elements of a piece stored one at a time. */
template <class T>
__device__ __forceinline__ void st_piece(T *y, int rem, uint4 v) {
  constexpr int VW = Elt<T>::VW;
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(T) == 2) {
    unsigned short *h = (unsigned short *)y;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      if (2 * i < rem) h[2 * i] = (unsigned short)(w[i] & 0xffffu);
      if (2 * i + 1 < rem) h[2 * i + 1] = (unsigned short)(w[i] >> 16);
    }
  } else if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++)
      if (i < rem) ((unsigned int *)y)[i] = w[i];
  } else {
#pragma unroll
    for (int i = 0; i < VW; i++)
      if (i < rem) ((uint2 *)y)[i] = make_uint2(w[2 * i], w[2 * i + 1]);
  }
}

/* A thread's pieces of a row (x; -inf past its end, or everywhere for an invalid row). */
template <class T, int VPL, int FL, bool VEC>
__device__ __forceinline__ void load_row(uint4 (&v)[VPL], const T *x, bool valid, int t, int G,
                                         int n) {
  constexpr int VW = Elt<T>::VW;
#pragma unroll
  for (int k = 0; k < VPL; k++) {
    const int e0 = (k * G + t) * VW;
    if (VEC) {
      v[k] = Elt<T>::neg();
      if (valid && e0 < n) v[k] = ldv<FL>(x + e0);
    } else {
      v[k] = ld_piece(x + e0, valid ? n - e0 : 0);
    }
  }
}

template <class T, int VPL, int FL, bool VEC>
__device__ __forceinline__ void store_piece(T *y, int e0, int n, uint4 v) {
  if (VEC) {
    if (e0 < n) stv<FL>(y + e0, v);
  } else {
    st_piece(y + e0, n - e0, v);
  }
}

template <class T, int FL>
using XchOf = Xch<typename Elt<T>::W, typename SumOf<typename Elt<T>::W, FL>::type>;

/* The register kernel's work for aligned (VEC) or unaligned rows. */
template <class T, bool SOFTMAX, int VPL, int MAXT, int FL, bool VEC>
__device__ __forceinline__ void rows_reg_run(const void *in_, void *out_, const RP &p,
                                             XchOf<T, FL> *xs) {
  typedef Elt<T> E;
  typedef typename E::W W;
  typedef typename SumOf<W, FL>::type S;
  constexpr bool KEEP = (FL & ROWS_RECOMPUTE) == 0, PF = (FL & ROWS_PREFETCH) != 0;
  constexpr int VW = E::VW, NE = VPL * VW, NA = NE < 8 ? NE : 8, NW = MAXT / 32;
  const int G = p.group;
  const int rpb = G <= 32 ? (int)blockDim.x / G : 1;
  const int g = G <= 32 ? (int)threadIdx.x / G : 0, t = threadIdx.x & (G - 1);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wpr = G >> 5;
  const int span = G < 32 ? G : 32;
  const T *in = (const T *)in_ + p.in_off;
  T *out = (T *)out_ + p.out_off;
  const int n = (int)p.n; /* at most NV__ROWS_MAX_GROUP * NE */
  const int64_t stride = (int64_t)gridDim.x * rpb;
  int buf = 0;
  uint4 nxt[VPL];
  int64_t base = (int64_t)blockIdx.x * rpb;
  if (PF) {
    const bool ok = base + g < p.nrows;
    load_row<T, VPL, FL, VEC>(nxt, in + (ok ? walk_offset(p.kshape, p.kst, p.nk, base + g) : 0),
                              ok, t, G, n);
  }
  for (; base < p.nrows; base += stride) {
    const int64_t row = base + g;
    const bool valid = row < p.nrows;
    uint4 v[VPL];
    if (PF) {
#pragma unroll
      for (int k = 0; k < VPL; k++) v[k] = nxt[k];
      if (base + stride < p.nrows) {
        const int64_t r2 = row + stride;
        const bool ok = r2 < p.nrows;
        load_row<T, VPL, FL, VEC>(nxt, in + (ok ? walk_offset(p.kshape, p.kst, p.nk, r2) : 0), ok,
                                  t, G, n);
      }
    } else {
      load_row<T, VPL, FL, VEC>(v, in + (valid ? walk_offset(p.kshape, p.kst, p.nk, row) : 0),
                                valid, t, G, n);
    }
    /* 1. The warp's (or sub-warp group's) maximum. */
    W m = E::lmax(v);
    for (int o = span >> 1; o > 0; o >>= 1) m = max_nan(m, shfl_xor(m, o));
    /* 2. exp(x - m) and its sums; an all -inf part sums exp(-inf) = 0 (m not finite is a NaN
     * row or an infinite maximum: its sums are not used). */
    const W pc = E::prep(isfinite(m) ? m : (W)0);
    W acc[NA];
#pragma unroll
    for (int i = 0; i < NA; i++) acc[i] = 0;
    W e[KEEP ? NE : 1];
#pragma unroll
    for (int k = 0; k < VPL; k++) {
      W x[VW];
      E::unpack(v[k], x);
#pragma unroll
      for (int j = 0; j < VW; j++) {
        const W y = E::ex(x[j], pc);
        if (KEEP) e[k * VW + j] = y;
        acc[(k * VW + j) % NA] += y;
      }
    }
#pragma unroll
    for (int w = NA / 2; w > 0; w >>= 1)
#pragma unroll
      for (int i = 0; i < w; i++) acc[i] += acc[i + w];
    S s = (S)acc[0];
    for (int o = span >> 1; o > 0; o >>= 1) s += shfl_xor(s, o);
    /* 3. The row's maximum and sum from its warps' (the block is the group). */
    W f = 1; /* exp(the warp's maximum - the row's) */
    if (G > 32) {
      if (lane == 0) xs[buf * NW + warp] = Xch<W, S>{m, s};
      __syncthreads();
      const Xch<W, S> q = xs[buf * NW + (lane & (wpr - 1))];
      W mm = q.m;
      for (int o = wpr >> 1; o > 0; o >>= 1) mm = max_nan(mm, shfl_xor(mm, o));
      const W fj = isfinite(mm) ? E::ex1(q.m - mm) : (W)0;
      S sj = q.s * (S)fj;
      for (int o = wpr >> 1; o > 0; o >>= 1) sj += shfl_xor(sj, o);
      f = __shfl_sync(0xffffffffu, fj, warp); /* lane `warp` read entry `warp` */
      m = mm;
      s = sj;
      buf ^= 1; /* a warp rewrites this buffer only after the next barrier */
    }
    const bool bad = !isfinite(m);
    if (SOFTMAX) {
      if (!valid) continue;
      T *y = out + row * p.n;
      if (KEEP) {
        const W c = bad ? (W)NAN : (W)((S)f / s);
#pragma unroll
        for (int k = 0; k < VPL; k++) {
          W z[VW];
#pragma unroll
          for (int j = 0; j < VW; j++) z[j] = e[k * VW + j] * c;
          store_piece<T, VPL, FL, VEC>(y, (k * G + t) * VW, n, E::pack(z));
        }
      } else {
        const W inv = bad ? (W)NAN : (W)((S)1 / s);
        const W pm = E::prep(bad ? (W)0 : m);
#pragma unroll
        for (int k = 0; k < VPL; k++) {
          W x[VW], z[VW];
          E::unpack(v[k], x);
#pragma unroll
          for (int j = 0; j < VW; j++) z[j] = E::ex(x[j], pm) * inv;
          store_piece<T, VPL, FL, VEC>(y, (k * G + t) * VW, n, E::pack(z));
        }
      }
      continue;
    }
    /* logsumexp's float64 result rounds once to the row's dtype. */
    if (valid && t == 0)
      store_real(out, row, p.dtype, bad ? (double)m : (double)m + log((double)s));
  }
}

/* The register kernel: groups of p.group threads (blocks of p.group threads when above 32,
 * else any multiple of 32 up to MAXT), rows of at most p.group * VPL * 16 bytes. */
template <class T, bool SOFTMAX, int VPL, int MAXT, int MINB, int FL>
__global__ void __launch_bounds__(MAXT, MINB)
    rows_reg(const void *in_, void *out_, const void *, const __grid_constant__ RP p) {
  typedef typename Elt<T>::W W;
  typedef typename SumOf<W, FL>::type S;
  __shared__ Xch<W, S> xs[2 * (MAXT / 32)];
  /* 16-byte loads and stores where every row is aligned (uniform over the launch). */
  const bool vec = p.vec && (((uintptr_t)((const T *)in_ + p.in_off)) & 15) == 0 &&
                   (!SOFTMAX || (((uintptr_t)((T *)out_ + p.out_off)) & 15) == 0);
  if ((FL & ROWS_VEC_ONLY) != 0 || vec)
    rows_reg_run<T, SOFTMAX, VPL, MAXT, FL, true>(in_, out_, p, xs);
  else
    rows_reg_run<T, SOFTMAX, VPL, MAXT, FL, false>(in_, out_, p, xs);
}

/* ---- the long-row kernel ---- */

/* exp of a non-positive difference: float32's exponential (2 ulp) for float32, the fast
 * hardware one for the half types (far below their precision), exp for float64. */
template <class T>
__device__ __forceinline__ float ex(float x) {
  return expf(x);
}
template <>
__device__ __forceinline__ float ex<__half>(float x) {
  return __expf(x);
}
template <>
__device__ __forceinline__ float ex<__nv_bfloat16>(float x) {
  return __expf(x);
}
__device__ __forceinline__ double exd(double x) { return exp(x); }

template <class T>
struct Work {
  typedef float W;
  static __device__ __forceinline__ W e(W x) { return ex<T>(x); }
  static __device__ __forceinline__ T out(W v) { return from_float<T>(v); }
};
template <>
struct Work<double> {
  typedef double W;
  static __device__ __forceinline__ W e(W x) { return exd(x); }
  static __device__ __forceinline__ double out(W v) { return v; }
};

/* The maximum with NaN winning. */
struct MaxNan {
  template <class W>
  __device__ __forceinline__ W operator()(W a, W b) const {
    return b > a || b != b ? b : a;
  }
};
struct Add {
  __device__ __forceinline__ double operator()(double a, double b) const { return a + b; }
};

/* Rows longer than the registers hold (group 1024): an online maximum and sum per thread;
 * softmax then reads the row again. */
template <class T, bool SOFTMAX>
__global__ void __launch_bounds__(1024)
    rows_long(const void *in_, void *out_, const void *, const __grid_constant__ RP p) {
  typedef typename Work<T>::W W;
  constexpr int VW = Elt<T>::VW;
  __shared__ W smw[32];
  __shared__ double smd[32];
  const int G = p.group;
  const int rpb = blockDim.x / G, g = threadIdx.x / G, lane = threadIdx.x & (G - 1);
  const T *in = (const T *)in_ + p.in_off;
  T *out = (T *)out_ + p.out_off;
  const int64_t n = p.n;
  const int64_t stride = (int64_t)gridDim.x * rpb;
  const W NEG = -INFINITY;
  /* 16-byte loads and stores where every row is aligned (uniform over the launch). */
  const bool vec =
      p.vec && ((uintptr_t)in & 15) == 0 && (SOFTMAX ? ((uintptr_t)out & 15) == 0 : true);
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < p.nrows; base += stride) {
    const int64_t row = base + g;
    const bool valid = row < p.nrows;
    const T *x = in + (valid ? walk_offset(p.kshape, p.kst, p.nk, row) : 0);
    T *y = out + (valid ? row * n : 0);
    W m;
    double s;
    /* An online maximum and sum per thread. */
    m = NEG;
    s = 0;
    auto add = [&](W xv) {
      if (xv > m) {
        s = s * (double)Work<T>::e(m - xv) + 1.0;
        m = xv;
      } else if (xv != xv) {
        m = xv;
      } else if (xv > NEG) {
        s += (double)Work<T>::e(xv - m);
      }
    };
    if (valid) {
      if (vec) {
        for (int64_t e0 = (int64_t)lane * VW; e0 < n; e0 += (int64_t)G * VW) {
          uint4 raw = ld16(x + e0);
          T t[VW];
          memcpy(t, &raw, sizeof t);
#pragma unroll
          for (int j = 0; j < VW; j++) add(to_float(t[j]));
        }
      } else {
        for (int64_t e = lane; e < n; e += G) add(to_float(ld(x + e)));
      }
    }
    W mt = m;
    m = group_reduce(m, G, MaxNan(), smw);
    const bool bad = !isfinite(m);
    double st = bad || mt == NEG ? 0.0 : s * (double)Work<T>::e(mt - m);
    s = group_reduce(st, G, Add(), smd);
    if (SOFTMAX) {
      if (!valid) continue;
      const W inv = bad ? (W)NAN : (W)(1.0 / s);
      for (int64_t e = lane; e < n; e += G) {
        W xv = to_float(ld(x + e));
        y[e] = Work<T>::out(bad ? (W)NAN : Work<T>::e(xv - m) * inv);
      }
      continue;
    }
      /* logsumexp's float64 result rounds once to the row's dtype. */
    if (!SOFTMAX && valid && lane == 0)
      store_real(out, row, p.dtype, isfinite(m) ? (double)m + log(s) : (double)m);
  }
}

}  // namespace
}  // namespace nvred

namespace nvred {
namespace {

/* y = exp(x - m[row]) / s[row] over every element of any layout. */
template <class T>
__global__ void __launch_bounds__(256)
    softmax_norm(const void *x_, void *y_, const void *m_, const void *s_,
                 const __grid_constant__ nv__softmax_norm_params p) {
  typedef typename Work<T>::W W;
  const T *x = (const T *)x_ + p.in_off;
  T *y = (T *)y_ + p.out_off;
  const double *mr = align16<const double>(m_), *sr = align16<const double>(s_);
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < p.size;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = e, off = 0, row = 0;
    for (int d = p.nd - 1; d > 0; d--) {
      int64_t r;
      i = divmod(i, p.shape[d], &r);
      off += r * p.st[d];
      row += r * p.rowst[d];
    }
    if (p.nd > 0) {
      off += i * p.st[0];
      row += i * p.rowst[0];
    }
    double m = mr[row];
    W v;
    if (!isfinite(m)) v = (W)NAN;
    else if (sizeof(W) == 8) v = (W)(exd((double)to_float(ld(x + off)) - m) / sr[row]);
    else v = Work<T>::e(to_float(ld(x + off)) - (W)m) * (W)(1.0 / sr[row]);
    y[e] = Work<T>::out(v);
  }
}

/* The library's register kernels: for each dtype its base and wide vpl (reduce.h's plan),
 * launch bounds of 512 threads and 2 blocks a multiprocessor (a budget of 64 registers,
 * within which every one fits without spilling on its aligned path). The base kernels keep
 * their exponentials (one exp per element; 32 elements a thread at most), the wide ones
 * compute them again (their registers hold the packed row alone). float32 sums across
 * threads in float64 (the CPU's accuracy); the half types' sums are far below their
 * precision in float32. */
template <class T, bool SOFTMAX>
const void *reg_kernel(int vpl) {
  constexpr bool half = sizeof(T) == 2, f32 = std::is_same<T, float>::value;
  constexpr int base = half ? NV__ROWS_VPL_HALF : f32 ? NV__ROWS_VPL_F32 : NV__ROWS_VPL_F64;
  constexpr int wide = half  ? NV__ROWS_VPL_HALF_WIDE
                       : f32 ? NV__ROWS_VPL_F32_WIDE
                             : NV__ROWS_VPL_F64_WIDE;
  constexpr int sum = f32 ? ROWS_SUM64 : 0;
  if (vpl == base) return (const void *)rows_reg<T, SOFTMAX, base, 512, 2, sum>;
  if constexpr (wide > 0) {
    if (vpl == wide) return (const void *)rows_reg<T, SOFTMAX, wide, 512, 2, ROWS_RECOMPUTE | sum>;
  }
  return NULL;
}

template <class T>
const void *rows_kernel(int softmax, const nv__rows_plan *pl) {
  using namespace nvred;
  if (pl->long_rows)
    return softmax ? (const void *)rows_long<T, true> : (const void *)rows_long<T, false>;
  return softmax ? reg_kernel<T, true>(pl->vpl) : reg_kernel<T, false>(pl->vpl);
}

}  // namespace
}  // namespace nvred

extern "C" const void *nv__rows_fast_kernel(int softmax, nv_dtype dtype,
                                            const nv__rows_plan *plan) {
  using nvred::rows_kernel;
  switch (dtype) {
    case NV_DTYPE_FLOAT16: return rows_kernel<__half>(softmax, plan);
    case NV_DTYPE_BFLOAT16: return rows_kernel<__nv_bfloat16>(softmax, plan);
    case NV_DTYPE_FLOAT32: return rows_kernel<float>(softmax, plan);
    case NV_DTYPE_FLOAT64: return rows_kernel<double>(softmax, plan);
    default: return NULL;
  }
}

extern "C" const void *nv__softmax_norm_kernel(nv_dtype dtype) {
  using namespace nvred;
  switch (dtype) {
    case NV_DTYPE_FLOAT16: return (const void *)softmax_norm<__half>;
    case NV_DTYPE_BFLOAT16: return (const void *)softmax_norm<__nv_bfloat16>;
    case NV_DTYPE_FLOAT32: return (const void *)softmax_norm<float>;
    case NV_DTYPE_FLOAT64: return (const void *)softmax_norm<double>;
    default: return NULL;
  }
}
