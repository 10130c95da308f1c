/* The convolution primitive's direct CUDA kernel: an implicit GEMM. A block computes a
 * NV__GPU_CONV_TM × NV__GPU_CONV_TN tile of the output (rows: batch × output positions;
 * columns: the output channels of one group) from the contraction over taps × input channels,
 * gathering the input's tile from x on the fly (padding and dilation holes read as zero; no
 * im2col buffer) and the weight's from w, both through shared memory, each thread accumulating
 * 4 × 4 outputs in float (double for float64). Any layout of x and w (element strides), every
 * parameter of the primitive (strides, paddings of either sign, both dilations, groups, flip),
 * 64-bit indexing; grid.x walks row tiles and grid.y (channel tiles × groups) with stride
 * loops, so no grid limit binds. When those tiles are too few to fill the GPU and the
 * contraction is long (a weight gradient: few outputs, every batch position contracted), grid.z
 * splits the contraction into slices whose partial sums (float, or double) go to scratch and
 * are added in slice order by k_conv_sum. This is the path for what cuDNN does not take
 * (conv.c). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/conv_kernels.h"
#include "cuda/convert.cuh"

namespace {

enum { TM = NV__GPU_CONV_TM, TN = NV__GPU_CONV_TN, TK = NV__GPU_CONV_TK };
enum { THREADS = NV__GPU_CONV_THREADS };
/* Each of the 256 threads loads TM·TK / 256 = 4 input and 4 weight elements per step and
 * computes a 4 × 4 block of outputs (rows ty + 16 i, columns tx + 16 j). */
enum { RPT = TM / 16, CPT = TN / 16, LOADS = TM * TK / THREADS };
static_assert(TM * TK == TN * TK && LOADS == 4 && THREADS == 256, "tile shape");

template <typename T> struct acc_of { typedef float A; };
template <> struct acc_of<double> { typedef double A; };

__device__ __forceinline__ float ld(const __half &v) { return __half2float(v); }
__device__ __forceinline__ float ld(const __nv_bfloat16 &v) { return __bfloat162float(v); }
__device__ __forceinline__ float ld(const float &v) { return v; }
__device__ __forceinline__ double ld(const double &v) { return v; }

__device__ __forceinline__ void st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void st(float *p, float v) { *p = v; }
__device__ __forceinline__ void st(double *p, double v) { *p = v; }

/* One output row's place: its batch element's offset in x and, per spatial axis, the
 * dilated-padded position of tap 0 (o·stride − lo); valid is false past the last row. */
struct row_base {
  int64_t off;
  int64_t pos[3];
  bool valid;
};

__device__ __forceinline__ row_base row_of(const nv__gpu_conv_params &p, int64_t r) {
  row_base b;
  b.valid = r < p.rows;
  b.off = 0;
  b.pos[0] = b.pos[1] = b.pos[2] = 0;
  if (!b.valid) return b;
  for (int a = p.nsp - 1; a >= 0; a--) {
    int64_t o = r % p.out_sp[a];
    r /= p.out_sp[a];
    b.pos[a] = o * p.stride[a] - p.lo[a];
  }
  b.off = r * p.xst[0];
  return b;
}

/* The x element of row `b` at contraction index k (tap k / cin_g, channel k % cin_g of group g),
 * or zero for padding, dilation holes and k at or past kend (the block's slice's end). */
template <typename T>
__device__ __forceinline__ typename acc_of<T>::A load_x(const T *x, const nv__gpu_conv_params &p,
                                                         const row_base &b, int64_t k,
                                                         int64_t kend, int g) {
  typedef typename acc_of<T>::A A;
  if (!b.valid || k >= kend) return A(0);
  int64_t t = k / p.cin_g, ci = k - t * p.cin_g;
  int64_t off = b.off + ((int64_t)g * p.cin_g + ci) * p.xst[p.nsp + 1];
  for (int a = p.nsp - 1; a >= 0; a--) {
    int64_t kk = t % p.k_sp[a];
    t /= p.k_sp[a];
    if (p.flip) kk = p.k_sp[a] - 1 - kk;
    int64_t pos = b.pos[a] + kk * p.kdil[a];
    if (pos < 0 || pos >= p.ilen[a]) return A(0);
    int64_t q = pos / p.idil[a];
    if (q * p.idil[a] != pos) return A(0);
    off += q * p.xst[a + 1];
  }
  return ld(x[off]);
}

/* The weight element of output channel co (of the group, < cout_g) at contraction index k, or
 * zero past the group's channels or at or past kend. */
template <typename T>
__device__ __forceinline__ typename acc_of<T>::A load_w(const T *w, const nv__gpu_conv_params &p,
                                                         int64_t co, int64_t k, int64_t kend,
                                                         int g) {
  typedef typename acc_of<T>::A A;
  if (co >= p.cout_g || k >= kend) return A(0);
  int64_t t = k / p.cin_g, ci = k - t * p.cin_g;
  int64_t off = ((int64_t)g * p.cout_g + co) * p.wst[0] + ci * p.wst[p.nsp + 1];
  for (int a = p.nsp - 1; a >= 0; a--) {
    int64_t kk = t % p.k_sp[a];
    t /= p.k_sp[a];
    off += kk * p.wst[a + 1];
  }
  return ld(w[off]);
}

/* Block (x, y, z) computes row tiles x, channel tiles × groups y (stride loops) over slice z of
 * the contraction ([z·kchunk, (z + 1)·kchunk)). Without SPLIT (one slice) it writes the output
 * (T, [rows, C_out]); with SPLIT its partial sums (A, [splits, rows, C_out]), which k_conv_sum
 * adds in slice order. */
template <typename T, bool SPLIT>
__global__ void __launch_bounds__(THREADS)
    k_conv(const T *x0, const T *w0, void *dst, nv__gpu_conv_params p) {
  typedef typename acc_of<T>::A A;
  /* Transposed tiles (contraction index first), one column of padding against bank
   * conflicts on the stores. */
  __shared__ A xs[TK][TM + 1];
  __shared__ A ws[TK][TN + 1];
  const T *x = x0 + p.xoff, *w = w0 + p.woff;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  /* The loads: thread tid reads contraction index tid % TK of rows / channels
   * tid / TK + 16 q (q < LOADS). */
  const int lk = tid % TK, lr = tid / TK;
  const int64_t row_tiles = (p.rows + TM - 1) / TM;
  const int64_t kbeg = (int64_t)blockIdx.z * p.kchunk;
  const int64_t kend = p.kc - kbeg < p.kchunk ? p.kc : kbeg + p.kchunk;
  for (int64_t ty_tile = blockIdx.y; ty_tile < p.tiles_y; ty_tile += gridDim.y) {
    const int g = (int)(ty_tile / p.co_tiles);
    const int64_t co0 = (ty_tile % p.co_tiles) * TN;
    for (int64_t rt = blockIdx.x; rt < row_tiles; rt += gridDim.x) {
      const int64_t r0 = rt * TM;
      row_base rb[LOADS];
#pragma unroll
      for (int q = 0; q < LOADS; q++) rb[q] = row_of(p, r0 + lr + 16 * q);
      A acc[RPT][CPT];
#pragma unroll
      for (int i = 0; i < RPT; i++)
#pragma unroll
        for (int j = 0; j < CPT; j++) acc[i][j] = A(0);
      for (int64_t k0 = kbeg; k0 < kend; k0 += TK) {
#pragma unroll
        for (int q = 0; q < LOADS; q++) {
          xs[lk][lr + 16 * q] = load_x(x, p, rb[q], k0 + lk, kend, g);
          ws[lk][lr + 16 * q] = load_w(w, p, co0 + lr + 16 * q, k0 + lk, kend, g);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk++) {
          A a[RPT], b[CPT];
#pragma unroll
          for (int i = 0; i < RPT; i++) a[i] = xs[kk][ty + 16 * i];
#pragma unroll
          for (int j = 0; j < CPT; j++) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
          for (int i = 0; i < RPT; i++)
#pragma unroll
            for (int j = 0; j < CPT; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < RPT; i++) {
        int64_t r = r0 + ty + 16 * i;
        if (r >= p.rows) continue;
#pragma unroll
        for (int j = 0; j < CPT; j++) {
          int64_t co = co0 + tx + 16 * j;
          if (co >= p.cout_g) continue;
          int64_t at = r * p.cout + (int64_t)g * p.cout_g + co;
          if (SPLIT)
            static_cast<A *>(dst)[(int64_t)blockIdx.z * p.rows * p.cout + at] = acc[i][j];
          else
            st(static_cast<T *>(dst) + at, acc[i][j]);
        }
      }
    }
  }
}

/* out[i] = Σ_z part[z][i] over the splits, in slice order (deterministic), rounded once. */
template <typename T>
__global__ void __launch_bounds__(THREADS)
    k_conv_sum(const void *part0, T *out, nv__gpu_conv_params p) {
  typedef typename acc_of<T>::A A;
  const A *part = static_cast<const A *>(part0);
  const int64_t n = p.rows * p.cout;
  for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * THREADS) {
    A s = part[i];
    for (int z = 1; z < p.splits; z++) s += part[(int64_t)z * n + i];
    st(out + i, s);
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_conv(int dtype, int split) {
  switch (dtype) {
    case nvg::DT_F16:
      return split ? (const void *)&k_conv<__half, true> : (const void *)&k_conv<__half, false>;
    case nvg::DT_BF16:
      return split ? (const void *)&k_conv<__nv_bfloat16, true>
                   : (const void *)&k_conv<__nv_bfloat16, false>;
    case nvg::DT_F32:
      return split ? (const void *)&k_conv<float, true> : (const void *)&k_conv<float, false>;
    case nvg::DT_F64:
      return split ? (const void *)&k_conv<double, true> : (const void *)&k_conv<double, false>;
    default: return NULL;
  }
}

extern "C" const void *nv__gpu_kernel_conv_sum(int dtype) {
  switch (dtype) {
    case nvg::DT_F16: return (const void *)&k_conv_sum<__half>;
    case nvg::DT_BF16: return (const void *)&k_conv_sum<__nv_bfloat16>;
    case nvg::DT_F32: return (const void *)&k_conv_sum<float>;
    case nvg::DT_F64: return (const void *)&k_conv_sum<double>;
    default: return NULL;
  }
}
