/* The linalg family's small kernels: vecdot and addmm's beta * c (when alpha or K is 0, where
 * no product is computed). vecdot sums as the CPU's (src/cpu/linalg_vecdot.c): float16,
 * bfloat16 and float32 in float64 (exact products) rounded once, float64 in float64, complex64
 * in double complex, integers modulo 2^64 wrapped into the output dtype. One warp per output
 * for long contractions (lanes stride over k, a shuffle reduction), one thread per output for
 * short ones. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/linalg_kernels.h"

using namespace nvg;

namespace {

__device__ __forceinline__ void batch_offsets(const nv__gpu_batch &bt, int64_t i, int64_t &oa,
                                              int64_t &ob) {
  int64_t a = 0, b = 0;
  for (int d = bt.nd - 1; d >= 0; d--) {
    int64_t q = i / bt.shape[d], k = i - q * bt.shape[d];
    a += k * bt.sa[d];
    b += k * bt.sb[d];
    i = q;
  }
  oa = a;
  ob = b;
}

/* Per output dtype: the stored type, the accumulator and its operations. */
template <int DT> struct vd;

struct real_acc {
  typedef double A;
  static __device__ A zero() { return 0.0; }
  static __device__ A add(A x, A y) { return x + y; }
  static __device__ A shfl(A x, int o) { return __shfl_down_sync(0xffffffffu, x, o); }
};
template <> struct vd<DT_F32> : real_acc {
  typedef float T;
  static __device__ A term(T x, T y) { return (double)x * (double)y; }
  static __device__ T out(A s) { return f64_to_f32(s); }
};
template <> struct vd<DT_F64> : real_acc {
  typedef double T;
  static __device__ A term(T x, T y) { return x * y; }
  static __device__ T out(A s) { return s; }
};
template <> struct vd<DT_F16> : real_acc {
  typedef uint16_t T;
  static __device__ A term(T x, T y) { return (double)f16_to_f32(x) * (double)f16_to_f32(y); }
  static __device__ T out(A s) { return f64_to_f16(s); }
};
template <> struct vd<DT_BF16> : real_acc {
  typedef uint16_t T;
  static __device__ A term(T x, T y) { return (double)bf16_to_f32(x) * (double)bf16_to_f32(y); }
  static __device__ T out(A s) { return f64_to_bf16(s); }
};
template <> struct vd<DT_C64> {
  typedef float2 T;
  typedef double2 A;
  static __device__ A zero() { return make_double2(0.0, 0.0); }
  static __device__ A add(A x, A y) { return make_double2(x.x + y.x, x.y + y.y); }
  static __device__ A shfl(A x, int o) {
    return make_double2(__shfl_down_sync(0xffffffffu, x.x, o), __shfl_down_sync(0xffffffffu, x.y, o));
  }
  /* conj(x) * y */
  static __device__ A term(T x, T y) {
    double xr = x.x, xi = x.y, yr = y.x, yi = y.y;
    return make_double2(xr * yr + xi * yi, xr * yi - xi * yr);
  }
  static __device__ T out(A s) { return make_float2(f64_to_f32(s.x), f64_to_f32(s.y)); }
};
template <typename I> struct int_acc {
  typedef I T;
  typedef uint64_t A;
  static __device__ A zero() { return 0; }
  static __device__ A add(A x, A y) { return x + y; }
  static __device__ A shfl(A x, int o) { return __shfl_down_sync(0xffffffffu, x, o); }
  static __device__ A term(T x, T y) { return (uint64_t)x * (uint64_t)y; }
  static __device__ T out(A s) { return (T)s; }
};
template <> struct vd<DT_I32> : int_acc<int32_t> {};
template <> struct vd<DT_U32> : int_acc<uint32_t> {};
template <> struct vd<DT_I64> : int_acc<int64_t> {};
template <> struct vd<DT_U64> : int_acc<uint64_t> {};

template <int DT>
__global__ void __launch_bounds__(NV__GPU_VECDOT_THREADS)
    k_vecdot(const typename vd<DT>::T *__restrict__ a0, const typename vd<DT>::T *__restrict__ b0,
             typename vd<DT>::T *__restrict__ d0, nv__gpu_vecdot_params p) {
  typedef vd<DT> V;
  typedef typename V::A A;
  const typename V::T *a = a0 + p.aoff, *b = b0 + p.boff;
  typename V::T *d = d0 + p.doff;
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t nthreads = (int64_t)gridDim.x * blockDim.x;
  if (p.K <= 32) {
    for (int64_t i = tid; i < p.bt.count; i += nthreads) {
      int64_t oa, ob;
      batch_offsets(p.bt, i, oa, ob);
      A s = V::zero();
      for (int64_t k = 0; k < p.K; k++) s = V::add(s, V::term(a[oa + k * p.sa], b[ob + k * p.sb]));
      d[i] = V::out(s);
    }
    return;
  }
  const int lane = threadIdx.x & 31;
  /* Whole warps iterate together (the shuffles need every lane). */
  for (int64_t w = tid >> 5; w < p.bt.count; w += nthreads >> 5) {
    int64_t oa, ob;
    batch_offsets(p.bt, w, oa, ob);
    A s = V::zero();
    for (int64_t k = lane; k < p.K; k += 32) s = V::add(s, V::term(a[oa + k * p.sa], b[ob + k * p.sb]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s = V::add(s, V::shfl(s, o));
    if (lane == 0) d[w] = V::out(s);
  }
}

/* dst = beta * src, src at folded strides, dst contiguous. */
__global__ void __launch_bounds__(NV__GPU_SCALE_THREADS)
    k_scale(const char *__restrict__ s0, char *__restrict__ d0, nv__gpu_scale_params p) {
  const int isz = dtype_size(p.dtype);
  const char *s = s0 + p.soff * isz;
  char *d = d0 + p.doff * isz;
  const float fb = __double2float_rn(p.beta);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i, off = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      int64_t q = r / p.shape[k];
      off += (r - q * p.shape[k]) * p.sst[k];
      r = q;
    }
    switch (p.dtype) {
      case DT_F16: {
        float v = f16_to_f32(((const uint16_t *)s)[off]);
        ((uint16_t *)d)[i] = f32_to_f16(__fmul_rn(fb, v));
        break;
      }
      case DT_BF16: {
        float v = bf16_to_f32(((const uint16_t *)s)[off]);
        ((uint16_t *)d)[i] = f32_to_bf16(__fmul_rn(fb, v));
        break;
      }
      case DT_F32: ((float *)d)[i] = __fmul_rn(fb, ((const float *)s)[off]); break;
      case DT_F64: ((double *)d)[i] = __dmul_rn(p.beta, ((const double *)s)[off]); break;
      case DT_C64: {
        float2 v = ((const float2 *)s)[off];
        ((float2 *)d)[i] = make_float2(__fmul_rn(fb, v.x), __fmul_rn(fb, v.y));
        break;
      }
      default: break;
    }
  }
}

} /* namespace */

extern "C" const void *nv__gpu_kernel_vecdot(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_vecdot<DT_F16>;
    case DT_BF16: return (const void *)&k_vecdot<DT_BF16>;
    case DT_F32: return (const void *)&k_vecdot<DT_F32>;
    case DT_F64: return (const void *)&k_vecdot<DT_F64>;
    case DT_C64: return (const void *)&k_vecdot<DT_C64>;
    case DT_I32: return (const void *)&k_vecdot<DT_I32>;
    case DT_U32: return (const void *)&k_vecdot<DT_U32>;
    case DT_I64: return (const void *)&k_vecdot<DT_I64>;
    case DT_U64: return (const void *)&k_vecdot<DT_U64>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_scale(void) { return (const void *)&k_scale; }
