/* adam_update on the GPU: one pass over p, g, m, v writing p', m', v' (the CPU kernel's
 * formulas, src/cpu/optim.c). float16 and bfloat16 compute in float32 and round once per
 * output; float32 and float64 in their own type. Every operation is an explicitly rounded
 * intrinsic (no multiply-add fuses), so the results are the CPU's bit for bit. Each thread
 * moves 16-byte vectors of the seven arrays when every pointer is aligned for them (checked on
 * the device), else one element at a time; grid-stride loops with 64-bit indices. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/optim_kernels.h"

using namespace nvg;

namespace {

/* Per dtype: the stored type S, the compute type C, conversions and rounded arithmetic. */
struct f32_ops {
  typedef float C;
  static __device__ __forceinline__ C cst(double d) { return __double2float_rn(d); }
  static __device__ __forceinline__ C add(C a, C b) { return __fadd_rn(a, b); }
  static __device__ __forceinline__ C sub(C a, C b) { return __fsub_rn(a, b); }
  static __device__ __forceinline__ C mul(C a, C b) { return __fmul_rn(a, b); }
  static __device__ __forceinline__ C div(C a, C b) { return __fdiv_rn(a, b); }
  static __device__ __forceinline__ C root(C a) { return __fsqrt_rn(a); }
};
template <int DT> struct at;
template <> struct at<DT_F16> : f32_ops {
  typedef uint16_t S;
  static __device__ __forceinline__ C ld(S x) { return f16_to_f32(x); }
  static __device__ __forceinline__ S st(C x) { return f32_to_f16(x); }
};
template <> struct at<DT_BF16> : f32_ops {
  typedef uint16_t S;
  static __device__ __forceinline__ C ld(S x) { return bf16_to_f32(x); }
  static __device__ __forceinline__ S st(C x) { return f32_to_bf16(x); }
};
template <> struct at<DT_F32> : f32_ops {
  typedef float S;
  static __device__ __forceinline__ C ld(S x) { return x; }
  static __device__ __forceinline__ S st(C x) { return x; }
};
template <> struct at<DT_F64> {
  typedef double S;
  typedef double C;
  static __device__ __forceinline__ C cst(double d) { return d; }
  static __device__ __forceinline__ C add(C a, C b) { return __dadd_rn(a, b); }
  static __device__ __forceinline__ C sub(C a, C b) { return __dsub_rn(a, b); }
  static __device__ __forceinline__ C mul(C a, C b) { return __dmul_rn(a, b); }
  static __device__ __forceinline__ C div(C a, C b) { return __ddiv_rn(a, b); }
  static __device__ __forceinline__ C root(C a) { return __dsqrt_rn(a); }
  static __device__ __forceinline__ C ld(S x) { return x; }
  static __device__ __forceinline__ S st(C x) { return x; }
};

/* The constants in the compute type. Without bias correction s2 is 1, without decay dec is 1:
 * products by 1 are exact, so one formula serves every variant. */
template <class A> struct consts {
  typename A::C b1, omb1, b2, omb2, eps, s1, s2, dec;
};

/* One element: the composed update's operations in its order. */
template <class A>
__device__ __forceinline__ void update(const consts<A> &k, typename A::S p, typename A::S g,
                                       typename A::S m, typename A::S v, typename A::S &po,
                                       typename A::S &mo, typename A::S &vo) {
  typedef typename A::C C;
  C gi = A::ld(g);
  C mi = A::add(A::mul(A::ld(m), k.b1), A::mul(gi, k.omb1));
  C vi = A::add(A::mul(A::ld(v), k.b2), A::mul(A::mul(gi, gi), k.omb2));
  C den = A::add(A::mul(A::root(vi), k.s2), k.eps);
  mo = A::st(mi);
  vo = A::st(vi);
  po = A::st(A::sub(A::mul(A::ld(p), k.dec), A::div(A::mul(k.s1, mi), den)));
}

template <class S, int V> union vec16 {
  uint4 raw;
  S v[V];
};

template <int DT>
__global__ void __launch_bounds__(NV__GPU_ADAM_THREADS)
    k_adam(typename at<DT>::S *po0, typename at<DT>::S *mo0, typename at<DT>::S *vo0,
           const typename at<DT>::S *p0, const typename at<DT>::S *g0,
           const typename at<DT>::S *m0, const typename at<DT>::S *v0,
           const typename at<DT>::S *s10, const typename at<DT>::S *s20,
           const typename at<DT>::S *dec0, nv__gpu_adam_params prm) {
  typedef at<DT> A;
  typedef typename A::S S;
  constexpr int V = 16 / (int)sizeof(S);
  S *po = po0 + prm.off[0], *mo = mo0 + prm.off[1], *vo = vo0 + prm.off[2];
  const S *p = p0 + prm.off[3], *g = g0 + prm.off[4], *m = m0 + prm.off[5], *v = v0 + prm.off[6];
  consts<A> k;
  k.b1 = A::cst(prm.beta1);
  k.omb1 = A::cst(prm.omb1);
  k.b2 = A::cst(prm.beta2);
  k.omb2 = A::cst(prm.omb2);
  k.eps = A::cst(prm.eps);
  k.s1 = A::ld(s10[prm.off[7]]);
  k.s2 = prm.bias_correction ? A::ld(s20[prm.off[8]]) : A::cst(1.0);
  k.dec = prm.decoupled ? A::ld(dec0[prm.off[9]]) : A::cst(1.0);
  const int64_t n = prm.n;
  const int64_t tid = (int64_t)blockIdx.x * NV__GPU_ADAM_THREADS + threadIdx.x;
  const int64_t nth = (int64_t)gridDim.x * NV__GPU_ADAM_THREADS;
  uintptr_t any = (uintptr_t)po | (uintptr_t)mo | (uintptr_t)vo | (uintptr_t)p | (uintptr_t)g |
                  (uintptr_t)m | (uintptr_t)v;
  int64_t done = 0;
  if ((any & 15u) == 0) {
    const int64_t nvec = n / V;
    for (int64_t i = tid; i < nvec; i += nth) {
      vec16<S, V> xp, xg, xm, xv, rp, rm, rv;
      xp.raw = reinterpret_cast<const uint4 *>(p)[i];
      xg.raw = reinterpret_cast<const uint4 *>(g)[i];
      xm.raw = reinterpret_cast<const uint4 *>(m)[i];
      xv.raw = reinterpret_cast<const uint4 *>(v)[i];
#pragma unroll
      for (int j = 0; j < V; j++)
        update<A>(k, xp.v[j], xg.v[j], xm.v[j], xv.v[j], rp.v[j], rm.v[j], rv.v[j]);
      reinterpret_cast<uint4 *>(po)[i] = rp.raw;
      reinterpret_cast<uint4 *>(mo)[i] = rm.raw;
      reinterpret_cast<uint4 *>(vo)[i] = rv.raw;
    }
    done = nvec * V;
  }
  for (int64_t i = done + tid; i < n; i += nth)
    update<A>(k, p[i], g[i], m[i], v[i], po[i], mo[i], vo[i]);
}

}  // namespace

extern "C" const void *nv__gpu_kernel_adam(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)&k_adam<DT_F16>;
    case DT_BF16: return (const void *)&k_adam<DT_BF16>;
    case DT_F32: return (const void *)&k_adam<DT_F32>;
    case DT_F64: return (const void *)&k_adam<DT_F64>;
    default: return NULL;
  }
}
