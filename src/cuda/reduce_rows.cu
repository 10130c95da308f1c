/* softmax and logsumexp over contiguous float rows, and the general softmax's normalization
 * (reduce.h). One group of threads per row (blocks loop over rows): a row of at most group *
 * (64 bytes' elements) is loaded once into registers (16-byte loads where the rows are
 * aligned), its maximum and then its sum of exponentials reduced over the group, and
 * softmax's row written from the registers (the exponentials computed again): one read, one
 * write. Longer rows (rows_long) keep an online maximum and sum per thread (logsumexp's only
 * pass; softmax then reads the row again to write it). float16/bfloat16 compute in float32
 * (sums of exponentials in float64 across threads), float64 in float64.
 * As the CPU's kernels (src/cpu/reduce_softmax.c): a row whose maximum is NaN or infinite is
 * all NaN (softmax) or that maximum (logsumexp); -inf elements give 0. */
#include "cuda/reduce_common.cuh"

namespace nvred {
namespace {

typedef nv__rows_fast_params RP;

/* Blocks of 512 threads the register kernel fits on a multiprocessor at least: its register
 * budget (2: 64 registers, no spills; measured on the H200 as fast as 1). */
#ifndef NV__ROWS_MIN_BLOCKS
#define NV__ROWS_MIN_BLOCKS 2
#endif

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

/* Elements a thread of the row kernels holds: four 16-byte loads' worth, so that few threads
 * share a row (the reductions over the group cost little beside the elements' work) and many
 * rows are in flight on each multiprocessor. */
template <class T>
struct Held {
  static constexpr int VW = 16 / sizeof(T); /* elements of one 16-byte load */
  static constexpr int VPT = 4 * VW;
};

template <class T, bool SOFTMAX>
__global__ void __launch_bounds__(512, NV__ROWS_MIN_BLOCKS)
    rows_fast(const void *in_, void *out_, const void *, const __grid_constant__ RP p) {
  typedef typename Work<T>::W W;
  constexpr int VW = Held<T>::VW, VPT = Held<T>::VPT, NV = VPT / VW;
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
    /* The row in registers, in its own dtype: element k * G + lane (vec: 16-byte piece
     * k * G + lane) of each thread's VPT. */
    T raw[VPT];
    const int ni = valid ? (int)n : 0; /* at most 1024 * VPT: int indices */
    auto held = [&](int k) {             /* whether raw[k] is an element of the row */
      return vec ? ((k / VW) * G + lane) * VW < ni : k * G + lane < ni;
    };
    if (vec) {
#pragma unroll
      for (int k = 0; k < NV; k++) {
        int e0 = (k * G + lane) * VW;
        if (e0 < ni) {
          uint4 v = ld16(x + e0);
          memcpy(&raw[k * VW], &v, sizeof v);
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < VPT; k++)
        if (k * G + lane < ni) raw[k] = ld(x + k * G + lane);
    }
    /* The row's maximum, then its sum of exp(x - max): two reductions of one value. */
    W mt = NEG;
#pragma unroll
    for (int k = 0; k < VPT; k++)
      if (held(k)) mt = MaxNan()(mt, to_float(raw[k]));
    m = group_reduce(mt, G, MaxNan(), smw);
    W t = 0;
    if (isfinite(m))
#pragma unroll
      for (int k = 0; k < VPT; k++)
        if (held(k)) t += Work<T>::e(to_float(raw[k]) - m);
    s = group_reduce((double)t, G, Add(), smd);
    if (SOFTMAX) {
      if (!valid) continue;
      const bool bad = !isfinite(m);
      const W inv = bad ? (W)NAN : (W)(1.0 / s);
      if (vec) {
#pragma unroll
        for (int k = 0; k < NV; k++) {
          int e0 = (k * G + lane) * VW;
          if (e0 < ni) {
            T o[VW];
#pragma unroll
            for (int j = 0; j < VW; j++)
              o[j] = Work<T>::out(bad ? (W)NAN : Work<T>::e(to_float(raw[k * VW + j]) - m) * inv);
            uint4 v;
            memcpy(&v, o, sizeof v);
            *(uint4 *)(y + e0) = v;
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < VPT; k++)
          if (k * G + lane < ni)
            y[k * G + lane] = Work<T>::out(bad ? (W)NAN : Work<T>::e(to_float(raw[k]) - m) * inv);
      }
      continue;
    }
    /* logsumexp's float64 result rounds once to the row's dtype. */
    if (!SOFTMAX && valid && lane == 0)
      store_real(out, row, p.dtype, isfinite(m) ? (double)m + log(s) : (double)m);
  }
}


/* Rows longer than the registers hold (group 1024): an online maximum and sum per thread;
 * softmax then reads the row again. */
template <class T, bool SOFTMAX>
__global__ void __launch_bounds__(1024)
    rows_long(const void *in_, void *out_, const void *, const __grid_constant__ RP p) {
  typedef typename Work<T>::W W;
  constexpr int VW = Held<T>::VW;
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

extern "C" int nv__rows_fast_held(nv_dtype dtype) {
  return dtype == NV_DTYPE_FLOAT64 ? nvred::Held<double>::VPT
         : dtype == NV_DTYPE_FLOAT32 ? nvred::Held<float>::VPT
                                     : nvred::Held<__half>::VPT;
}

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

}  // namespace
}  // namespace nvred

namespace {
template <class T>
const void *rows_kernel(int softmax, int long_rows) {
  using namespace nvred;
  if (long_rows)
    return softmax ? (const void *)rows_long<T, true> : (const void *)rows_long<T, false>;
  return softmax ? (const void *)rows_fast<T, true> : (const void *)rows_fast<T, false>;
}
}  // namespace

extern "C" const void *nv__rows_fast_kernel(int softmax, int long_rows, nv_dtype dtype) {
  switch (dtype) {
    case NV_DTYPE_FLOAT16: return rows_kernel<__half>(softmax, long_rows);
    case NV_DTYPE_BFLOAT16: return rows_kernel<__nv_bfloat16>(softmax, long_rows);
    case NV_DTYPE_FLOAT32: return rows_kernel<float>(softmax, long_rows);
    case NV_DTYPE_FLOAT64: return rows_kernel<double>(softmax, long_rows);
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
