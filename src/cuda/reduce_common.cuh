/* Device helpers shared by the reduce family's .cu files: loads, index arithmetic, shuffles,
 * float conversions and stores. CUDA C++; included by reduce.cu and reduce_rows.cu only. */
#ifndef NUVEC_CUDA_REDUCE_COMMON_CUH
#define NUVEC_CUDA_REDUCE_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda/reduce.h"

namespace nvred {

/* A scratch pointer rounded up to 16 bytes (the host asks for 16 bytes more). */
template <class T>
__device__ __forceinline__ T *align16(const void *p) {
  return (T *)(((uintptr_t)p + 15) & ~(uintptr_t)15);
}

template <class D, class S>
__device__ __forceinline__ D bit_cast(S s) {
  static_assert(sizeof(D) == sizeof(S), "bit_cast sizes");
  D d;
  memcpy(&d, &s, sizeof d);
  return d;
}

/* A read-only load of one element of any 1-, 2-, 4- or 8-byte type. */
template <class E>
__device__ __forceinline__ E ld(const E *p) {
  if constexpr (sizeof(E) == 1) return bit_cast<E>(__ldg((const unsigned char *)p));
  else if constexpr (sizeof(E) == 2) return bit_cast<E>(__ldg((const unsigned short *)p));
  else if constexpr (sizeof(E) == 4) return bit_cast<E>(__ldg((const unsigned int *)p));
  else return bit_cast<E>(__ldg((const unsigned long long *)p));
}

__device__ __forceinline__ uint4 ld16(const void *p) { return __ldg((const uint4 *)p); }

/* a / b and a % b, in 32 bits when both fit (64-bit division is a long software sequence). */
__device__ __forceinline__ int64_t divmod(int64_t a, int64_t b, int64_t *rem) {
  if (((uint64_t)a | (uint64_t)b) >> 32 == 0) {
    uint32_t q = (uint32_t)a / (uint32_t)b;
    *rem = (int64_t)((uint32_t)a - q * (uint32_t)b);
    return q;
  }
  int64_t q = a / b;
  *rem = a - q * b;
  return q;
}

/* The element offset of index i of a row-major walk over n dims (shape, strides). */
__device__ __forceinline__ int64_t walk_offset(const int64_t *shape, const int64_t *st, int n,
                                               int64_t i) {
  int64_t off = 0;
  for (int d = n - 1; d > 0; d--) {
    int64_t r;
    i = divmod(i, shape[d], &r);
    off += r * st[d];
  }
  return n > 0 ? off + i * st[0] : off;
}

/* XOR shuffle of any trivially copyable value made of 32-bit words. */
template <class A>
__device__ __forceinline__ A shfl_xor(A v, int m) {
  static_assert(sizeof(A) % 4 == 0, "shuffled values are whole words");
  constexpr int W = sizeof(A) / 4;
  uint32_t w[W];
  memcpy(w, &v, sizeof v);
#pragma unroll
  for (int i = 0; i < W; i++) w[i] = __shfl_xor_sync(0xffffffffu, w[i], m);
  memcpy(&v, w, sizeof v);
  return v;
}

/* Reduces v over a group of G threads (a power of two; G > 32 only when the block is the
 * group), the same tree on every thread: every thread of the group gets the result. `sm`
 * holds 32 values. Every thread of the block must call it. */
template <class A, class Op>
__device__ __forceinline__ A group_reduce(A v, int G, Op op, A *sm) {
  int w = G < 32 ? G : 32;
  for (int off = w >> 1; off > 0; off >>= 1) v = op(v, shfl_xor(v, off));
  if (G > 32) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = G >> 5;
    if (lane == 0) sm[warp] = v;
    __syncthreads();
    v = sm[lane & (nw - 1)];
    for (int off = nw >> 1; off > 0; off >>= 1) v = op(v, shfl_xor(v, off));
    __syncthreads();
  }
  return v;
}

/* Float conversions. */
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ double to_float(double v) { return v; }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/* A float64 result stored as float16, bfloat16, float32 or float64 (rounded once). */
__device__ __forceinline__ void store_real(void *out, int64_t i, int dtype, double v) {
  switch (dtype) {
    case NV_DTYPE_FLOAT16: ((__half *)out)[i] = __double2half(v); break;
    case NV_DTYPE_BFLOAT16: ((__nv_bfloat16 *)out)[i] = __double2bfloat16(v); break;
    case NV_DTYPE_FLOAT32: ((float *)out)[i] = (float)v; break;
    default: ((double *)out)[i] = v;
  }
}

}  // namespace nvred

#endif
