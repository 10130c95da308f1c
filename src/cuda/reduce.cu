/* The reduction engine's kernels (reduce.h): functors (an accumulator, how an element enters
 * it, how two combine, how the result is stored) and the three kernels each is compiled into:
 * row (a group of threads per output, 16-byte loads along a contiguous innermost reduced dim),
 * col (a thread per output, coalesced across consecutive outputs, the reduction split over
 * threadIdx.y and blockIdx.y) and fin (the split pieces combined in order). Every combination
 * order is fixed by the launch shape, so results are deterministic; nothing uses atomics.
 *
 * Accuracy follows the CPU engine (src/cpu/reduce.c): float sums and means accumulate in
 * float64 (the lanes of one 16-byte load are first added pairwise in float32 for the float32
 * and half types), products in float64, integers wrap in their own width, max/min let NaN win,
 * arg-reductions compare sortable keys with the first index winning ties. */
#include "cuda/reduce_common.cuh"

namespace nvred {
namespace {

typedef nv__red_params P;

/* Common functor parts: a 16-byte load's lanes enter one by one. */
template <class D, class E, class A>
struct Base {
  template <int VW>
  static __device__ __forceinline__ A vec(const P &p, A acc, const E (&e)[VW], int64_t r,
                                          double c) {
#pragma unroll
    for (int k = 0; k < VW; k++) acc = D::comb(p, acc, D::load(p, e[k], r + k, c));
    return acc;
  }
};

/* ---- float sums and means: float64 accumulators ---- */
template <class T>
struct SumF : Base<SumF<T>, T, double> {
  typedef T E;
  typedef double A;
  /* The pairwise type of one load's lanes: float32 for the 32-bit and half types. */
  typedef decltype(to_float(T())) W;
  static __device__ __forceinline__ A init(const P &) { return 0.0; }
  static __device__ __forceinline__ A load(const P &, E v, int64_t, double) {
    return (double)to_float(v);
  }
  static __device__ __forceinline__ A comb(const P &, A a, A b) { return a + b; }
  template <int VW>
  static __device__ __forceinline__ A vec(const P &, A acc, const E (&e)[VW], int64_t,
                                          double) {
    W f[VW];
#pragma unroll
    for (int k = 0; k < VW; k++) f[k] = to_float(e[k]);
#pragma unroll
    for (int w = VW / 2; w >= 1; w /= 2)
#pragma unroll
      for (int k = 0; k < w; k++) f[k] = f[k] + f[k + w];
    return acc + (double)f[0];
  }
  static __device__ __forceinline__ void store(const P &p, void *out, int64_t i, A a, double) {
    if (p.fin == NV__RFIN_MEAN) a /= p.div;
    store_real(out, i, p.odtype, a);
  }
};

/* ---- real dtypes through float64: prod, max, min, var's and logsumexp's passes ---- */
template <class U>
__device__ __forceinline__ double real_of(int dt, U v);
template <>
__device__ __forceinline__ double real_of<uint8_t>(int dt, uint8_t v) {
  return dt == NV_DTYPE_INT8 ? (double)(int8_t)v : (double)v;
}
template <>
__device__ __forceinline__ double real_of<uint16_t>(int dt, uint16_t v) {
  switch (dt) {
    case NV_DTYPE_INT16: return (double)(int16_t)v;
    case NV_DTYPE_FLOAT16: return (double)__half2float(__ushort_as_half(v));
    case NV_DTYPE_BFLOAT16: return (double)__bfloat162float(__ushort_as_bfloat16(v));
    default: return (double)v;
  }
}
template <>
__device__ __forceinline__ double real_of<uint32_t>(int dt, uint32_t v) {
  switch (dt) {
    case NV_DTYPE_INT32: return (double)(int32_t)v;
    case NV_DTYPE_FLOAT32: return (double)__uint_as_float(v);
    default: return (double)v;
  }
}
template <>
__device__ __forceinline__ double real_of<uint64_t>(int dt, uint64_t v) {
  switch (dt) {
    case NV_DTYPE_INT64: return (double)(int64_t)v;
    case NV_DTYPE_FLOAT64: return __longlong_as_double((long long)v);
    default: return (double)v;
  }
}

template <class U>
struct RealF : Base<RealF<U>, U, double> {
  typedef U E;
  typedef double A;
  static __device__ __forceinline__ A init(const P &p) {
    switch (p.op) {
      case NV__RO_PROD: return 1.0;
      case NV__RO_MAX: return -INFINITY;
      case NV__RO_MIN: return INFINITY;
      default: return 0.0;
    }
  }
  static __device__ __forceinline__ A load(const P &p, E v, int64_t, double c) {
    double x = real_of<U>(p.dtype, v);
    switch (p.op) {
      case NV__RO_SQDEV: return (x - c) * (x - c);
      case NV__RO_EXPSUM: return isfinite(c) ? exp(x - c) : 0.0;
      default: return x;
    }
  }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    switch (p.op) {
      case NV__RO_PROD: return a * b;
      case NV__RO_MAX: return b > a || b != b ? b : a;
      case NV__RO_MIN: return b < a || b != b ? b : a;
      default: return a + b;
    }
  }
  static __device__ __forceinline__ void store(const P &p, void *out, int64_t i, A a, double c) {
    switch (p.fin) {
      case NV__RFIN_MEAN: a /= p.div; break;
      case NV__RFIN_VAR:
      case NV__RFIN_STD: {
        double d = (double)p.rsize - p.ddof;
        a = p.rsize == 0 ? NAN : a / (d > 0 ? d : 0.0);
        if (p.fin == NV__RFIN_STD) a = sqrt(a);
        break;
      }
      case NV__RFIN_LSE: a = isfinite(c) ? c + log(a) : c; break;
      default: break;
    }
    store_real(out, i, p.odtype, a);
  }
};

/* ---- raw bits into uint64: integer sum/prod/max/min (wrapping), nonzero counts ---- */
template <class U>
struct IntF : Base<IntF<U>, U, uint64_t> {
  typedef U E;
  typedef uint64_t A;
  static __device__ __forceinline__ A init(const P &p) {
    return p.op == NV__RO_PROD ? 1 : p.op == NV__RO_MIN ? ~(uint64_t)0 : 0;
  }
  static __device__ __forceinline__ A load(const P &p, E v, int64_t, double) {
    switch (p.op) {
      case NV__RO_COUNT: return (v & (U)p.mask) != 0;
      case NV__RO_MAX:
      case NV__RO_MIN: return (U)(v ^ (U)p.flip);
      default: return v;
    }
  }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    switch (p.op) {
      case NV__RO_PROD: return a * b;
      case NV__RO_MAX: return a > b ? a : b;
      case NV__RO_MIN: return a < b ? a : b;
      default: return a + b;
    }
  }
  static __device__ __forceinline__ void store(const P &p, void *out, int64_t i, A a, double) {
    switch (p.fin) {
      case NV__RFIN_ALL: ((uint8_t *)out)[i] = a == (uint64_t)p.rsize; return;
      case NV__RFIN_ANY: ((uint8_t *)out)[i] = a != 0; return;
      case NV__RFIN_FLIP: a ^= p.flip; break;
      default: break;
    }
    /* The low bytes of the wrapped value, in the output's width. */
    switch (p.odtype) {
      case NV_DTYPE_BOOL:
      case NV_DTYPE_UINT8:
      case NV_DTYPE_INT8: ((uint8_t *)out)[i] = (uint8_t)a; break;
      case NV_DTYPE_UINT16:
      case NV_DTYPE_INT16: ((uint16_t *)out)[i] = (uint16_t)a; break;
      case NV_DTYPE_UINT32:
      case NV_DTYPE_INT32: ((uint32_t *)out)[i] = (uint32_t)a; break;
      default: ((uint64_t *)out)[i] = a;
    }
  }
};

/* ---- argmax/argmin: (sortable key, index); the larger (smaller) key wins, then the smaller
 * index. Keys are the CPU's (src/cpu/sort_keys.h, with -0.0 as +0.0): every NaN is the
 * largest key, moved to 0 for argmin of inexact dtypes so that the first NaN wins there too. */
struct ArgA {
  uint64_t key;
  uint32_t idx, pad;
};

__device__ __forceinline__ uint32_t fkey32(float f) {
  uint32_t u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ uint64_t fkey64(double f) {
  uint64_t u = f == 0.0 ? 0 : (uint64_t)__double_as_longlong(f);
  return (u >> 63) ? ~u : u | ((uint64_t)1 << 63);
}
__device__ __forceinline__ uint64_t float_key(float f) {
  return f != f ? ~(uint64_t)0 : fkey32(f);
}

template <class U>
__device__ __forceinline__ uint64_t key_of(int dt, U v);
template <>
__device__ __forceinline__ uint64_t key_of<uint8_t>(int dt, uint8_t v) {
  return dt == NV_DTYPE_INT8 ? (uint8_t)(v ^ 0x80u) : v;
}
template <>
__device__ __forceinline__ uint64_t key_of<uint16_t>(int dt, uint16_t v) {
  switch (dt) {
    case NV_DTYPE_INT16: return (uint16_t)(v ^ 0x8000u);
    case NV_DTYPE_FLOAT16: return float_key(__half2float(__ushort_as_half(v)));
    case NV_DTYPE_BFLOAT16: return float_key(__bfloat162float(__ushort_as_bfloat16(v)));
    default: return v;
  }
}
template <>
__device__ __forceinline__ uint64_t key_of<uint32_t>(int dt, uint32_t v) {
  switch (dt) {
    case NV_DTYPE_INT32: return v ^ 0x80000000u;
    case NV_DTYPE_FLOAT32: return float_key(__uint_as_float(v));
    default: return v;
  }
}
template <>
__device__ __forceinline__ uint64_t key_of<uint64_t>(int dt, uint64_t v) {
  switch (dt) {
    case NV_DTYPE_INT64: return v ^ ((uint64_t)1 << 63);
    case NV_DTYPE_FLOAT64: {
      double d = __longlong_as_double((long long)v);
      return d != d ? ~(uint64_t)0 : fkey64(d);
    }
    case NV_DTYPE_COMPLEX64: { /* (real key, imaginary key); NaN in either part: NaN's key */
      float re = __uint_as_float((uint32_t)v), im = __uint_as_float((uint32_t)(v >> 32));
      if (re != re || im != im) return ~(uint64_t)0;
      return (uint64_t)fkey32(re) << 32 | fkey32(im);
    }
    default: return v;
  }
}

template <class U>
struct ArgF : Base<ArgF<U>, U, ArgA> {
  typedef U E;
  typedef ArgA A;
  static __device__ __forceinline__ A init(const P &p) {
    A a;
    a.key = p.op == NV__RO_MAX ? 0 : ~(uint64_t)0;
    a.idx = 0xffffffffu;
    a.pad = 0;
    return a;
  }
  static __device__ __forceinline__ A load(const P &p, E v, int64_t r, double) {
    A a;
    a.key = key_of<U>(p.dtype, v);
    if (p.nan_low && a.key == ~(uint64_t)0) a.key = 0;
    a.idx = (uint32_t)r;
    a.pad = 0;
    return a;
  }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    bool better = p.op == NV__RO_MAX ? b.key > a.key : b.key < a.key;
    return better || (b.key == a.key && b.idx < a.idx) ? b : a;
  }
  static __device__ __forceinline__ void store(const P &, void *out, int64_t i, A a, double) {
    ((uint32_t *)out)[i] = a.idx;
  }
};

/* ---- complex64: sum, mean, prod in float64; max/min in lexicographic order, NaN (in either
 * part) giving NaN ---- */
struct CA {
  double re, im;
  int32_t nan, pad;
};

struct ComplexF : Base<ComplexF, uint64_t, CA> {
  typedef uint64_t E;
  typedef CA A;
  static __device__ __forceinline__ A make(double re, double im, int nan) {
    A a;
    a.re = re;
    a.im = im;
    a.nan = nan;
    a.pad = 0;
    return a;
  }
  static __device__ __forceinline__ A init(const P &p) {
    switch (p.op) {
      case NV__RO_PROD: return make(1, 0, 0);
      case NV__RO_MAX: return make(-INFINITY, -INFINITY, 0);
      case NV__RO_MIN: return make(INFINITY, INFINITY, 0);
      default: return make(0, 0, 0);
    }
  }
  static __device__ __forceinline__ A load(const P &, E v, int64_t, double) {
    float re = __uint_as_float((uint32_t)v), im = __uint_as_float((uint32_t)(v >> 32));
    return make(re, im, re != re || im != im);
  }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    switch (p.op) {
      case NV__RO_PROD: return make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re, 0);
      case NV__RO_MAX:
      case NV__RO_MIN: {
        bool more = b.re > a.re || (b.re == a.re && b.im > a.im);
        bool less = b.re < a.re || (b.re == a.re && b.im < a.im);
        A r = (p.op == NV__RO_MAX ? more : less) ? b : a;
        r.nan = a.nan | b.nan;
        return r;
      }
      default: return make(a.re + b.re, a.im + b.im, 0);
    }
  }
  static __device__ __forceinline__ void store(const P &p, void *out, int64_t i, A a, double) {
    double re = a.re, im = a.im;
    if (p.fin == NV__RFIN_MEAN) {
      re /= p.div;
      im /= p.div;
    }
    if ((p.op == NV__RO_MAX || p.op == NV__RO_MIN) && a.nan) re = im = NAN;
    ((float2 *)out)[i] = make_float2((float)re, (float)im);
  }
};

/* ---- float max/min in the dtype's precision (float32 for the half types): NaN wins ---- */
template <class T>
struct MinMaxF : Base<MinMaxF<T>, T, decltype(to_float(T()))> {
  typedef T E;
  typedef decltype(to_float(T())) A;
  static __device__ __forceinline__ A init(const P &p) {
    return p.op == NV__RO_MAX ? (A)-INFINITY : (A)INFINITY;
  }
  static __device__ __forceinline__ A load(const P &, E v, int64_t, double) { return to_float(v); }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    bool take = p.op == NV__RO_MAX ? b > a : b < a;
    return take || b != b ? b : a;
  }
  static __device__ __forceinline__ void store(const P &p, void *out, int64_t i, A a, double) {
    store_real(out, i, p.odtype, (double)a);
  }
};

/* ---- float argmax/argmin on the values (float32 for the half types): the larger (smaller)
 * value wins, a NaN beats any number, and among equals (-0.0 equals 0.0; NaNs are equal) the
 * smaller index: the first extreme, the first NaN, as the CPU's keys give ---- */
template <class W>
struct ArgV {
  W v;
  uint32_t idx, pad;
};

template <class T>
struct ArgFloatF : Base<ArgFloatF<T>, T, ArgV<decltype(to_float(T()))>> {
  typedef T E;
  typedef decltype(to_float(T())) W;
  typedef ArgV<W> A;
  static __device__ __forceinline__ A init(const P &p) {
    A a;
    a.v = p.op == NV__RO_MAX ? (W)-INFINITY : (W)INFINITY;
    a.idx = 0xffffffffu;
    a.pad = 0;
    return a;
  }
  static __device__ __forceinline__ A load(const P &, E v, int64_t r, double) {
    A a;
    a.v = to_float(v);
    a.idx = (uint32_t)r;
    a.pad = 0;
    return a;
  }
  static __device__ __forceinline__ A comb(const P &p, A a, A b) {
    bool an = a.v != a.v, bn = b.v != b.v;
    bool better = (p.op == NV__RO_MAX ? b.v > a.v : b.v < a.v) || (bn && !an);
    bool tie = b.v == a.v || (bn && an);
    return better || (tie && b.idx < a.idx) ? b : a;
  }
  static __device__ __forceinline__ void store(const P &, void *out, int64_t i, A a, double) {
    ((uint32_t *)out)[i] = a.idx;
  }
};

/* ---- the walks ---- */

/* 16 bytes from p: one load where aligned, else element by element. */
template <class E>
__device__ __forceinline__ uint4 ld16_any(const E *p) {
  if (((uintptr_t)p & 15) == 0) return ld16(p);
  constexpr int VW = 16 / sizeof(E);
  E e[VW];
#pragma unroll
  for (int k = 0; k < VW; k++) e[k] = ld(p + k);
  uint4 v;
  memcpy(&v, e, sizeof v);
  return v;
}

template <class F>
__device__ __forceinline__ typename F::A vec_of(const P &p, typename F::A acc, uint4 raw, int64_t r,
                                                double c) {
  constexpr int VW = 16 / sizeof(typename F::E);
  typename F::E e[VW];
  memcpy(e, &raw, sizeof e);
  return F::template vec<VW>(p, acc, e, r, c);
}

/* A walk over the runs of the innermost reduced dim (length L) by steps of G: position
 * (q, j) = (run, index in the run), advanced without division. */
struct Runs {
  int64_t q, j, dq, dj, L;
  __device__ __forceinline__ Runs(int64_t start, int64_t len, int64_t G) : L(len) {
    q = divmod(start, len, &j);
    dq = divmod(G, len, &dj);
  }
  __device__ __forceinline__ void next() {
    j += dj;
    q += dq;
    if (j >= L) {
      j -= L;
      q++;
    }
  }
};

/* The element offset of run q (the reduced dims but the innermost). */
__device__ __forceinline__ int64_t run_offset(const P &p, int64_t q) {
  return p.nr == 2 ? q * p.rst[0] : walk_offset(p.rshape, p.rst, p.nr - 1, q);
}

/* Elements [r0, r1) of one output's reduction starting at x, lanes `lane` of G, when they
 * are not contiguous: one reduced dim of another stride, or several (runs of the innermost
 * one; whole 16-byte pieces when it is contiguous and a multiple of them long, which never
 * straddle runs as r0 and r1 are multiples of 64 or the end). Out of line, so that the
 * contiguous walk keeps its registers. */
template <class F>
__device__ __noinline__ typename F::A row_strided(const P &p, const typename F::E *x, int64_t r0,
                                                  int64_t r1, int lane, int G, double c,
                                                  typename F::A acc) {
  typedef typename F::E E;
  constexpr int VW = 16 / sizeof(E);
  if (p.nr == 1) {
    int64_t st = p.rst[0];
    int64_t r = r0 + lane;
    for (; r + 3 * (int64_t)G < r1; r += 4 * (int64_t)G) {
      E v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) v[u] = ld(x + (r + u * (int64_t)G) * st);
#pragma unroll
      for (int u = 0; u < 4; u++) acc = F::comb(p, acc, F::load(p, v[u], r + u * (int64_t)G, c));
    }
    for (; r < r1; r += G) acc = F::comb(p, acc, F::load(p, ld(x + r * st), r, c));
    return acc;
  }
  const int64_t L = p.rshape[p.nr - 1], st = p.rst[p.nr - 1];
  if (st == 1 && L % VW == 0) {
    const int64_t Lv = L / VW, v1 = r1 / VW;
    int64_t v = r0 / VW + lane;
    Runs w(v, Lv, G);
    for (; v + 3 * (int64_t)G < v1; v += 4 * (int64_t)G) {
      uint4 raw[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        raw[u] = ld16_any(x + run_offset(p, w.q) + w.j * VW);
        w.next();
      }
#pragma unroll
      for (int u = 0; u < 4; u++) acc = vec_of<F>(p, acc, raw[u], (v + u * (int64_t)G) * VW, c);
    }
    for (; v < v1; v += G) {
      acc = vec_of<F>(p, acc, ld16_any(x + run_offset(p, w.q) + w.j * VW), v * VW, c);
      w.next();
    }
    return acc;
  }
  int64_t r = r0 + lane;
  Runs w(r, L, G);
  for (; r + 3 * (int64_t)G < r1; r += 4 * (int64_t)G) {
    E e[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      e[u] = ld(x + run_offset(p, w.q) + w.j * st);
      w.next();
    }
#pragma unroll
    for (int u = 0; u < 4; u++) acc = F::comb(p, acc, F::load(p, e[u], r + u * (int64_t)G, c));
  }
  for (; r < r1; r += G) {
    acc = F::comb(p, acc, F::load(p, ld(x + run_offset(p, w.q) + w.j * st), r, c));
    w.next();
  }
  return acc;
}

/* Elements [r0, r1) of one output's reduction starting at x, lanes `lane` of G. */
template <class F>
__device__ __forceinline__ typename F::A row_range(const P &p, const typename F::E *x,
                                                   int64_t r0, int64_t r1, int lane, int G,
                                                   double c, typename F::A acc) {
  typedef typename F::E E;
  constexpr int VW = 16 / sizeof(E);
  if (p.nr != 1 || p.rst[0] != 1) return row_strided<F>(p, x, r0, r1, lane, G, c, acc);
  const E *q = x + r0;
  int64_t n = r1 - r0;
  /* A head up to 16-byte alignment, 16-byte loads four at a time, a tail. */
  int64_t head = (int64_t)(((16 - ((uintptr_t)q & 15)) & 15) / sizeof(E));
  if (head > n) head = n;
  if (lane < head) acc = F::comb(p, acc, F::load(p, ld(q + lane), r0 + lane, c));
  const E *body = q + head;
  int64_t nv = (n - head) / VW, rb = r0 + head;
  int64_t i = lane;
  for (; i + 3 * (int64_t)G < nv; i += 4 * (int64_t)G) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = ld16(body + (i + u * (int64_t)G) * VW);
#pragma unroll
    for (int u = 0; u < 4; u++) acc = vec_of<F>(p, acc, v[u], rb + (i + u * (int64_t)G) * VW, c);
  }
  for (; i < nv; i += G) acc = vec_of<F>(p, acc, ld16(body + i * VW), rb + i * VW, c);
  for (int64_t j = head + nv * VW + lane; j < n; j += G)
    acc = F::comb(p, acc, F::load(p, ld(q + j), r0 + j, c));
  return acc;
}

/* Elements [a, b) of one output's reduction starting at x, one thread; eight loads in flight. */
template <class F>
__device__ __forceinline__ typename F::A col_range(const P &p, const typename F::E *x, int64_t a,
                                                   int64_t b, double c, typename F::A acc) {
  typedef typename F::E E;
  if (p.nr == 1) {
    int64_t st = p.rst[0];
    int64_t r = a;
    for (; r + 8 <= b; r += 8) {
      E v[8];
#pragma unroll
      for (int u = 0; u < 8; u++) v[u] = ld(x + (r + u) * st);
#pragma unroll
      for (int u = 0; u < 8; u++) acc = F::comb(p, acc, F::load(p, v[u], r + u, c));
    }
    for (; r < b; r++) acc = F::comb(p, acc, F::load(p, ld(x + r * st), r, c));
    return acc;
  }
  int64_t L = p.rshape[p.nr - 1], st = p.rst[p.nr - 1];
  int64_t j;
  int64_t q = divmod(a, L, &j);
  for (int64_t r = a; r < b; q++, j = 0) {
    const E *run = x + run_offset(p, q);
    int64_t m = L - j < b - r ? L - j : b - r;
    int64_t k = 0;
    for (; k + 4 <= m; k += 4) {
      E v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) v[u] = ld(run + (j + k + u) * st);
#pragma unroll
      for (int u = 0; u < 4; u++) acc = F::comb(p, acc, F::load(p, v[u], r + k + u, c));
    }
    for (; k < m; k++) acc = F::comb(p, acc, F::load(p, ld(run + (j + k) * st), r + k, c));
    r += m;
  }
  return acc;
}

/* The same for V consecutive outputs (16 bytes of input a step; V = 16 / sizeof(E)). */
template <class F, int V>
__device__ __forceinline__ void colv_range(const P &p, const typename F::E *x, int64_t a,
                                           int64_t b, typename F::A (&acc)[V]) {
  typedef typename F::E E;
  auto step = [&](uint4 raw, int64_t r) {
    E e[V];
    memcpy(e, &raw, sizeof e);
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = F::comb(p, acc[k], F::load(p, e[k], r, 0.0));
  };
  if (p.nr == 1) {
    int64_t st = p.rst[0];
    int64_t r = a;
    for (; r + 4 <= b; r += 4) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++) v[u] = ld16_any(x + (r + u) * st);
#pragma unroll
      for (int u = 0; u < 4; u++) step(v[u], r + u);
    }
    for (; r < b; r++) step(ld16_any(x + r * st), r);
    return;
  }
  int64_t L = p.rshape[p.nr - 1], st = p.rst[p.nr - 1];
  int64_t j;
  int64_t q = divmod(a, L, &j);
  for (int64_t r = a; r < b; q++, j = 0) {
    const E *run = x + run_offset(p, q);
    int64_t m = L - j < b - r ? L - j : b - r;
    for (int64_t k = 0; k < m; k++) step(ld16_any(run + (j + k) * st), r + k);
    r += m;
  }
}

template <class F>
__device__ __forceinline__ void put(const P &p, void *out, int64_t o, int64_t s,
                                    typename F::A acc, double c) {
  if (p.partial) align16<typename F::A>(out)[s * p.nout + o] = acc;
  else F::store(p, p.oscratch ? (void *)align16<char>(out) : out, p.out_off + o, acc, c);
}

template <class F>
__device__ __forceinline__ double ctx_of(const P &p, const void *aux, int64_t o) {
  return p.ctx ? align16<const double>(aux)[o] : 0.0;
}

template <class F>
struct Comb {
  const P &p;
  __device__ __forceinline__ typename F::A operator()(typename F::A a, typename F::A b) const {
    return F::comb(p, a, b);
  }
};

/* ---- the kernels ---- */

template <class F>
__global__ void __launch_bounds__(1024)
    red_row(const void *in_, void *out_, const void *aux_, const __grid_constant__ P p) {
  typedef typename F::E E;
  typedef typename F::A A;
  __shared__ A sm[32];
  const int G = p.group;
  const int gpb = blockDim.x / G, g = threadIdx.x / G, lane = threadIdx.x & (G - 1);
  const int64_t nitems = p.nout * p.nsplit;
  const E *in = (const E *)in_ + p.in_off;
  for (int64_t base = (int64_t)blockIdx.x * gpb; base < nitems; base += (int64_t)gridDim.x * gpb) {
    int64_t w = base + g, o = 0, s = 0;
    A acc = F::init(p);
    double c = 0;
    if (w < nitems) {
      o = divmod(w, p.nsplit, &s);
      c = ctx_of<F>(p, aux_, o);
      int64_t r0 = s * p.chunk, r1 = r0 + p.chunk < p.rsize ? r0 + p.chunk : p.rsize;
      acc = row_range<F>(p, in + walk_offset(p.kshape, p.kst, p.nk, o), r0, r1, lane, G, c, acc);
    }
    acc = group_reduce(acc, G, Comb<F>{p}, sm);
    if (lane == 0 && w < nitems) put<F>(p, out_, o, s, acc, c);
  }
}

/* Blocks of 32 x blockDim.y threads: 32 (V == 1) or 32 * V consecutive outputs. */
template <class F, int V>
__global__ void __launch_bounds__(1024)
    red_col(const void *in_, void *out_, const void *aux_, const __grid_constant__ P p) {
  typedef typename F::E E;
  typedef typename F::A A;
  __shared__ A sm[V == 1 ? 1024 : 8 * 32 * V];
  const int tx = threadIdx.x, ty = threadIdx.y, BY = blockDim.y;
  const E *in = (const E *)in_ + p.in_off;
  const int64_t s = blockIdx.y;
  const int64_t r0 = s * p.chunk, r1 = r0 + p.chunk < p.rsize ? r0 + p.chunk : p.rsize;
  const int64_t per = (r1 - r0 + BY - 1) / BY;
  const int64_t a = r0 + ty * per, b = a + per < r1 ? a + per : r1;
  for (int64_t ob = blockIdx.x; ob * 32 * V < p.nout; ob += gridDim.x) {
    int64_t o = (ob * 32 + tx) * V;
    bool valid = o < p.nout;
    A acc[V];
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = F::init(p);
    double c = 0;
    if (valid) {
      c = ctx_of<F>(p, aux_, o);
      const E *x = in + walk_offset(p.kshape, p.kst, p.nk, o);
      if (a < b) {
        if constexpr (V == 1) acc[0] = col_range<F>(p, x, a, b, c, acc[0]);
        else colv_range<F, V>(p, x, a, b, acc);
      }
    }
    if (BY > 1) {
#pragma unroll
      for (int k = 0; k < V; k++) sm[(ty * 32 + tx) * V + k] = acc[k];
      __syncthreads();
      if (ty == 0)
        for (int y = 1; y < BY; y++)
#pragma unroll
          for (int k = 0; k < V; k++) acc[k] = F::comb(p, acc[k], sm[(y * 32 + tx) * V + k]);
      __syncthreads();
    }
    if (ty == 0 && valid)
#pragma unroll
      for (int k = 0; k < V; k++) put<F>(p, out_, o + k, s, acc[k], c);
  }
}

template <class F>
__global__ void __launch_bounds__(256)
    red_fin(const void *part_, void *out_, const void *aux_, const __grid_constant__ P p) {
  typedef typename F::A A;
  const A *part = align16<const A>(part_);
  if (p.group == 1) {
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < p.nout;
         o += (int64_t)gridDim.x * blockDim.x) {
      A acc = F::init(p);
      for (int64_t s = 0; s < p.nsplit; s++) acc = F::comb(p, acc, part[s * p.nout + o]);
      F::store(p, p.oscratch ? (void *)align16<char>(out_) : out_, p.out_off + o, acc,
               ctx_of<F>(p, aux_, o));
    }
    return;
  }
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; o < p.nout; o += nwarps) {
    A acc = F::init(p);
    for (int64_t s = lane; s < p.nsplit; s += 32) acc = F::comb(p, acc, part[s * p.nout + o]);
    for (int off = 16; off > 0; off >>= 1) acc = F::comb(p, acc, shfl_xor(acc, off));
    if (lane == 0)
      F::store(p, p.oscratch ? (void *)align16<char>(out_) : out_, p.out_off + o, acc,
               ctx_of<F>(p, aux_, o));
  }
}

template <class F, bool VEC = false>
nv__red_kernels kernels_of() {
  nv__red_kernels k;
  constexpr int V = 16 / sizeof(typename F::E);
  k.row = (const void *)red_row<F>;
  k.col = (const void *)red_col<F, 1>;
  k.fin = (const void *)red_fin<F>;
  if constexpr (VEC) {
    k.colv = (const void *)red_col<F, V>;
    k.vec = V;
  } else {
    k.colv = NULL;
    k.vec = 1;
  }
  k.acc_size = sizeof(typename F::A);
  return k;
}

}  // namespace
}  // namespace nvred

extern "C" nv__red_kernels nv__red_kernels_of(int functor) {
  using namespace nvred;
  switch (functor) {
    case NV__RF_SUM_F16: return kernels_of<SumF<__half>, true>();
    case NV__RF_SUM_BF16: return kernels_of<SumF<__nv_bfloat16>, true>();
    case NV__RF_SUM_F32: return kernels_of<SumF<float>, true>();
    case NV__RF_SUM_F64: return kernels_of<SumF<double>, true>();
    case NV__RF_MINMAX_F16: return kernels_of<MinMaxF<__half>, true>();
    case NV__RF_MINMAX_BF16: return kernels_of<MinMaxF<__nv_bfloat16>, true>();
    case NV__RF_MINMAX_F32: return kernels_of<MinMaxF<float>, true>();
    case NV__RF_MINMAX_F64: return kernels_of<MinMaxF<double>, true>();
    case NV__RF_ARGF_F16: return kernels_of<ArgFloatF<__half>>();
    case NV__RF_ARGF_BF16: return kernels_of<ArgFloatF<__nv_bfloat16>>();
    case NV__RF_ARGF_F32: return kernels_of<ArgFloatF<float>>();
    case NV__RF_ARGF_F64: return kernels_of<ArgFloatF<double>>();
    case NV__RF_REAL1: return kernels_of<RealF<uint8_t>>();
    case NV__RF_REAL2: return kernels_of<RealF<uint16_t>>();
    case NV__RF_REAL4: return kernels_of<RealF<uint32_t>>();
    case NV__RF_REAL8: return kernels_of<RealF<uint64_t>>();
    case NV__RF_INT1: return kernels_of<IntF<uint8_t>>();
    case NV__RF_INT2: return kernels_of<IntF<uint16_t>>();
    case NV__RF_INT4: return kernels_of<IntF<uint32_t>>();
    case NV__RF_INT8: return kernels_of<IntF<uint64_t>>();
    case NV__RF_ARG1: return kernels_of<ArgF<uint8_t>>();
    case NV__RF_ARG2: return kernels_of<ArgF<uint16_t>>();
    case NV__RF_ARG4: return kernels_of<ArgF<uint32_t>>();
    case NV__RF_ARG8: return kernels_of<ArgF<uint64_t>>();
    case NV__RF_COMPLEX: return kernels_of<ComplexF>();
    default: return nv__red_kernels{};
  }
}
