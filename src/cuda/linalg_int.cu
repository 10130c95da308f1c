/* The exact integer matrix product on the GPU (cuBLASLt has no general integer path). As the
 * CPU's (src/cpu/linalg_int.c), every sum of products is carried modulo 2^bits in an unsigned
 * accumulator: uint32 for results of 32 bits or fewer (their low 32 bits are the same), uint64
 * for 64-bit results; operands are sign- or zero-extended into it, and the sum is narrowed
 * (wrapped) into the output dtype. Two's complement arithmetic modulo 2^n is the same for
 * signed and unsigned values, so this is exactly NumPy's wrapping integer matmul.
 *
 * A classic shared-memory tiling: 64 x 64 output tiles, k-steps of 16, 256 threads computing
 * 4 x 4 outputs each (rows ty + 16 i, columns tx + 16 j, so shared-memory reads are
 * conflict-free and stores coalesce). Operands are read at any strides (transposed, sliced,
 * broadcast); batches walk their folded dims. */
#include <stdint.h>

#include "cuda/linalg_kernels.h"

namespace {

template <typename T> struct acc_of { typedef uint32_t A; };
template <> struct acc_of<int64_t> { typedef uint64_t A; };
template <> struct acc_of<uint64_t> { typedef uint64_t A; };

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

constexpr int BM = NV__GPU_IGEMM_TILE, BN = NV__GPU_IGEMM_TILE, BK = 16;

template <typename T>
__global__ void __launch_bounds__(NV__GPU_IGEMM_THREADS)
    k_igemm(const T *__restrict__ a0, const T *__restrict__ b0, T *__restrict__ d0,
            nv__gpu_igemm_params p) {
  typedef typename acc_of<T>::A A;
  __shared__ A As[BK][BM];
  __shared__ A Bs[BK][BN];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  for (int64_t bz = blockIdx.z; bz < p.bt.count; bz += gridDim.z) {
    int64_t oa, ob;
    batch_offsets(p.bt, bz, oa, ob);
    const T *a = a0 + p.aoff + oa;
    const T *b = b0 + p.boff + ob;
    T *d = d0 + p.doff + bz * p.M * p.N;
    A acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) acc[i][j] = 0;
    for (int64_t k0 = 0; k0 < p.K; k0 += BK) {
#pragma unroll
      for (int r = 0; r < (BM * BK) / NV__GPU_IGEMM_THREADS; r++) {
        int idx = tid + r * NV__GPU_IGEMM_THREADS;
        /* Consecutive threads read along the operand's unit-strided axis. */
        int mm = p.csa == 1 ? idx / BK : idx % BM, kk = p.csa == 1 ? idx % BK : idx / BM;
        int64_t gm = m0 + mm, gk = k0 + kk;
        As[kk][mm] = gm < p.M && gk < p.K ? (A)a[gm * p.rsa + gk * p.csa] : (A)0;
      }
#pragma unroll
      for (int r = 0; r < (BN * BK) / NV__GPU_IGEMM_THREADS; r++) {
        int idx = tid + r * NV__GPU_IGEMM_THREADS;
        int nn = p.rsb == 1 ? idx / BK : idx % BN, kk = p.rsb == 1 ? idx % BK : idx / BN;
        int64_t gk = k0 + kk, gn = n0 + nn;
        Bs[kk][nn] = gk < p.K && gn < p.N ? (A)b[gk * p.rsb + gn * p.csb] : (A)0;
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < BK; kk++) {
        A av[4], bv[4];
#pragma unroll
        for (int i = 0; i < 4; i++) av[i] = As[kk][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; j++) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int64_t gm = m0 + ty + 16 * i;
      if (gm >= p.M) continue;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        int64_t gn = n0 + tx + 16 * j;
        if (gn < p.N) d[gm * p.N + gn] = (T)acc[i][j];
      }
    }
  }
}

} /* namespace */

/* nv_dtype codes of the integer dtypes. */
enum { DT_U8 = 1, DT_U16, DT_U32, DT_U64, DT_I8, DT_I16, DT_I32, DT_I64 };

extern "C" const void *nv__gpu_kernel_igemm(int dtype) {
  switch (dtype) {
    case DT_U8: return (const void *)&k_igemm<uint8_t>;
    case DT_U16: return (const void *)&k_igemm<uint16_t>;
    case DT_U32: return (const void *)&k_igemm<uint32_t>;
    case DT_U64: return (const void *)&k_igemm<uint64_t>;
    case DT_I8: return (const void *)&k_igemm<int8_t>;
    case DT_I16: return (const void *)&k_igemm<int16_t>;
    case DT_I32: return (const void *)&k_igemm<int32_t>;
    case DT_I64: return (const void *)&k_igemm<int64_t>;
    default: return NULL;
  }
}
