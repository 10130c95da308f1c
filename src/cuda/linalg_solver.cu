/* The decompositions' small kernels (linalg_solver.h): layout changes around the cuSOLVER and
 * cuBLAS calls, and the NaN results of flagged matrices. Grid-stride loops with 64-bit
 * indices over every element of a batch; one thread per matrix for the pivots' sequential
 * swaps. Launched from captured operations on the capture stream. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cuda/linalg_solver.h"

namespace {

constexpr int THREADS = 256;

/* Blocks for `n` items, capped (the loops stride over the rest). */
unsigned blocks_for(int64_t n) {
  int64_t b = (n + THREADS - 1) / THREADS;
  if (b < 1) b = 1;
  return (unsigned)(b > 65535 * 8 ? 65535 * 8 : b);
}

/* Per element kind: the stored type, NaN, conjugation and the NaN test. */
template <int K> struct el;
template <> struct el<NV__LS_F32> {
  typedef float T;
  static __device__ T nan() { return __int_as_float(0x7fc00000); }
  static __device__ T conj(T x) { return x; }
  static __device__ bool isnan_(T x) { return x != x; }
  static __device__ T zero() { return 0.0f; }
  static __device__ T one() { return 1.0f; }
};
template <> struct el<NV__LS_F64> {
  typedef double T;
  static __device__ T nan() { return __longlong_as_double(0x7ff8000000000000ll); }
  static __device__ T conj(T x) { return x; }
  static __device__ bool isnan_(T x) { return x != x; }
  static __device__ T zero() { return 0.0; }
  static __device__ T one() { return 1.0; }
};
template <> struct el<NV__LS_C64> {
  typedef float2 T;
  static __device__ T nan() { return make_float2(el<NV__LS_F32>::nan(), el<NV__LS_F32>::nan()); }
  static __device__ T conj(T x) { return make_float2(x.x, -x.y); }
  static __device__ bool isnan_(T x) { return x.x != x.x || x.y != x.y; }
  static __device__ T zero() { return make_float2(0.0f, 0.0f); }
  static __device__ T one() { return make_float2(1.0f, 0.0f); }
};
template <> struct el<NV__LS_C128> {
  typedef double2 T;
  static __device__ T nan() { return make_double2(el<NV__LS_F64>::nan(), el<NV__LS_F64>::nan()); }
  static __device__ T conj(T x) { return make_double2(x.x, -x.y); }
  static __device__ bool isnan_(T x) { return x.x != x.x || x.y != x.y; }
  static __device__ T zero() { return make_double2(0.0, 0.0); }
  static __device__ T one() { return make_double2(1.0, 0.0); }
};

template <int K>
__global__ void transpose_k(const typename el<K>::T *src, typename el<K>::T *dst, int64_t batch,
                            int64_t rows, int64_t cols, int64_t sstride, int conj,
                            const int *flags) {
  int64_t per = rows * cols, total = batch * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    /* t walks dst (cols × rows) in order, so the writes coalesce. */
    int64_t b = t / per, r = t - b * per, j = r / rows, i = r - j * rows;
    typename el<K>::T v = src[b * sstride + i * cols + j];
    if (conj) v = el<K>::conj(v);
    if (flags && flags[b]) v = el<K>::nan();
    dst[t] = v;
  }
}

template <int K>
__global__ void triangle_k(typename el<K>::T *buf, int64_t batch, int64_t n, int keep_upper,
                           const int *flags) {
  int64_t per = n * n, total = batch * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t b = t / per, r = t - b * per, i = r / n, j = r - i * n;
    if (flags && flags[b]) buf[t] = el<K>::nan();
    else if (keep_upper ? i > j : i < j) buf[t] = el<K>::zero();
  }
}

template <int K>
__global__ void nan_flags_k(const typename el<K>::T *src, int64_t batch, int64_t per,
                            int *flags) {
  int64_t total = batch * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x)
    if (el<K>::isnan_(src[t])) flags[t / per] = 1;
}

__global__ void info_flags_k(const int *info, int64_t batch, int *flags) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < batch;
       b += (int64_t)gridDim.x * blockDim.x)
    if (info[b] != 0) flags[b] = 1;
}

template <int K>
__global__ void eye_k(typename el<K>::T *dst, int64_t batch, int64_t n) {
  int64_t per = n * n, total = batch * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = t % per;
    dst[t] = r / n == r % n ? el<K>::one() : el<K>::zero();
  }
}

__global__ void pointers_k(char *base, int64_t stride, int64_t batch, void **out) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < batch;
       b += (int64_t)gridDim.x * blockDim.x)
    out[b] = base + b * stride;
}

/* The pivots of matrix b: piv = ipiv - 1 (in parallel), then the sequential swaps by one
 * thread in shared memory (rows, then the pivots themselves: 2 m words), then perm, the
 * inverse of the swapped rows, in parallel. One block per matrix. */
__global__ void pivots_smem_k(const int *ipiv, int64_t batch, int64_t m, int64_t k,
                              uint32_t *piv, uint32_t *perm) {
  extern __shared__ uint32_t sh[];
  uint32_t *rw = sh, *sp = sh + m;
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) rw[i] = (uint32_t)i;
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
      int64_t s = (int64_t)ipiv[b * k + i] - 1;
      /* cuSOLVER's pivots are in [1, m]; anything else (never expected) is left in place. */
      if (s < i || s >= m) s = i;
      sp[i] = (uint32_t)s;
      piv[b * k + i] = (uint32_t)s;
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int64_t i = 0; i < k; i++) {
        uint32_t s = sp[i], t = rw[i];
        rw[i] = rw[s];
        rw[s] = t;
      }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) perm[b * m + rw[i]] = (uint32_t)i;
    __syncthreads();
  }
}

/* As pivots_smem_k for matrices too tall for shared memory: one thread per matrix, the rows in
 * the `rows` scratch (m words per matrix). */
__global__ void pivots_k(const int *ipiv, int64_t batch, int64_t m, int64_t k, uint32_t *piv,
                         uint32_t *perm, uint32_t *rows) {
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < batch;
       b += (int64_t)gridDim.x * blockDim.x) {
    uint32_t *rw = rows + b * m;
    for (int64_t i = 0; i < m; i++) rw[i] = (uint32_t)i;
    for (int64_t i = 0; i < k; i++) {
      int64_t s = (int64_t)ipiv[b * k + i] - 1;
      if (s < i || s >= m) s = i;
      piv[b * k + i] = (uint32_t)s;
      uint32_t t = rw[i];
      rw[i] = rw[s];
      rw[s] = t;
    }
    for (int64_t i = 0; i < m; i++) perm[b * m + rw[i]] = (uint32_t)i;
  }
}

template <int K>
__global__ void qr_r_k(const typename el<K>::T *work, typename el<K>::T *r, int64_t batch,
                       int64_t m, int64_t n, int64_t k, const int *flags) {
  int64_t per = k * n, total = batch * per;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t b = t / per, q = t - b * per, i = q / n, j = q - i * n;
    typename el<K>::T v = j >= i ? work[b * m * n + i + j * m] : el<K>::zero();
    r[t] = flags && flags[b] ? el<K>::nan() : v;
  }
}

__device__ float2 to_c64(float2 x) { return x; }
__device__ float2 to_c64(double2 x) { return make_float2((float)x.x, (float)x.y); }

/* eig's eigenvalues and eigenvectors; WK the eigenvalues' kind, VK the vectors'. */
template <int WK, int VK>
__global__ void eig_out_k(const typename el<WK>::T *w, const typename el<VK>::T *vr,
                          float2 *wout, float2 *vout, int64_t batch, int64_t n,
                          const int *flags) {
  int64_t per = n * n, total = batch * (vout ? per : n);
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t b = t / (vout ? per : n), q = t - b * (vout ? per : n);
    bool bad = flags && flags[b];
    float2 nanv = el<NV__LS_C64>::nan();
    if (!vout || q < n) wout[b * n + q] = bad ? nanv : to_c64(w[b * n + q]);
    if (!vout) continue;
    /* Output element (i, j) row-major: row i of eigenvector j (column j of vr). */
    int64_t i = q / n, j = q - i * n;
    const typename el<VK>::T *v = vr + b * per;
    float2 o = nanv;
    if constexpr (VK == NV__LS_F32 || VK == NV__LS_F64) {
      /* A conjugate pair: columns j, j + 1 hold the real and imaginary parts of the vector of
       * the eigenvalue with positive imaginary part (the first of the two). */
      float2 wj = to_c64(w[b * n + j]);
      if (bad) o = nanv;
      else if (wj.y == 0.0f) o = make_float2((float)v[i + j * n], 0.0f);
      else if (wj.y > 0.0f && j + 1 < n) o = make_float2((float)v[i + j * n], (float)v[i + (j + 1) * n]);
      else if (wj.y < 0.0f && j > 0) o = make_float2((float)v[i + (j - 1) * n], -(float)v[i + j * n]);
    } else {
      if (!bad) o = to_c64(v[i + j * n]);
    }
    vout[b * per + q] = o;
  }
}

template <int K>
__global__ void nan_values_k(typename el<K>::T *v, int64_t batch, int64_t n, const int *flags) {
  int64_t total = batch * n;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x)
    if (flags[t / n]) v[t] = el<K>::nan();
}

int launched() { return (int)cudaGetLastError(); }

} // namespace

#define PTR(K, p) ((typename el<K>::T *)(p))

/* The same through 32 x 32 tiles in shared memory (blocks of 32 x 8 threads), so that both the
 * reads and the writes coalesce: tile (blockIdx.x, blockIdx.y) of src's cols x rows, matrices
 * blockIdx.z, blockIdx.z + gridDim.z, ... (about 2x the element-wise kernel's rate on the large
 * matrices cholesky and lu_factor transpose). */
template <int K>
__global__ void __launch_bounds__(256)
    transpose_tiled_k(const typename el<K>::T *src, typename el<K>::T *dst, int64_t batch,
                      int64_t rows, int64_t cols, int64_t sstride, int conj, const int *flags) {
  typedef typename el<K>::T T;
  __shared__ T tile[32][33];
  const int64_t c0 = (int64_t)blockIdx.x * 32, r0 = (int64_t)blockIdx.y * 32;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T *sb = src + b * sstride;
    T *db = dst + b * rows * cols;
    const bool nan = flags && flags[b];
    for (int j = threadIdx.y; j < 32; j += 8) {
      const int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < rows && c < cols) {
        T v = sb[r * cols + c];
        if (conj) v = el<K>::conj(v);
        tile[j][threadIdx.x] = nan ? el<K>::nan() : v;
      }
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
      /* dst is cols x rows: its row c0 + j, column r0 + threadIdx.x */
      const int64_t c = c0 + j, r = r0 + threadIdx.x;
      if (r < rows && c < cols) db[c * rows + r] = tile[threadIdx.x][j];
    }
    __syncthreads(); /* the tile is read before the next matrix writes it */
  }
}

template <int K>
static void transpose_launch(cudaStream_t s, const void *src, void *dst, int64_t batch,
                             int64_t rows, int64_t cols, int64_t ss, int conj, const int *flags) {
  const int64_t tx = (cols + 31) / 32, ty = (rows + 31) / 32;
  if (ty <= 65535 && tx <= INT32_MAX) {
    const int64_t per = tx * ty, want = (132 * 64 + per - 1) / per; /* a few waves of tiles */
    const unsigned z = (unsigned)(batch < want ? batch : want > 65535 ? 65535 : want);
    transpose_tiled_k<K><<<dim3((unsigned)tx, (unsigned)ty, z), dim3(32, 8), 0, s>>>(
        (const typename el<K>::T *)src, (typename el<K>::T *)dst, batch, rows, cols, ss, conj,
        flags);
    return;
  }
  transpose_k<K><<<blocks_for(batch * rows * cols), THREADS, 0, s>>>(
      (const typename el<K>::T *)src, (typename el<K>::T *)dst, batch, rows, cols, ss, conj,
      flags);
}

extern "C" int nv__ls_transpose(void *stream, int kind, const void *src, void *dst,
                                int64_t batch, int64_t rows, int64_t cols, int64_t sstride,
                                int conj, const int *flags) {
  if (batch * rows * cols == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  int64_t ss = sstride ? sstride : rows * cols;
  switch (kind) {
  case NV__LS_F32: transpose_launch<NV__LS_F32>(s, src, dst, batch, rows, cols, ss, conj, flags); break;
  case NV__LS_F64: transpose_launch<NV__LS_F64>(s, src, dst, batch, rows, cols, ss, conj, flags); break;
  case NV__LS_C64: transpose_launch<NV__LS_C64>(s, src, dst, batch, rows, cols, ss, conj, flags); break;
  default: transpose_launch<NV__LS_C128>(s, src, dst, batch, rows, cols, ss, conj, flags); break;
  }
  return launched();
}

template <int K>
static void triangle_launch(cudaStream_t s, void *buf, int64_t batch, int64_t n, int up,
                            const int *flags) {
  triangle_k<K><<<blocks_for(batch * n * n), THREADS, 0, s>>>(PTR(K, buf), batch, n, up, flags);
}

extern "C" int nv__ls_triangle(void *stream, int kind, void *buf, int64_t batch, int64_t n,
                               int keep_upper, const int *flags) {
  if (batch * n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  switch (kind) {
  case NV__LS_F32: triangle_launch<NV__LS_F32>(s, buf, batch, n, keep_upper, flags); break;
  case NV__LS_F64: triangle_launch<NV__LS_F64>(s, buf, batch, n, keep_upper, flags); break;
  case NV__LS_C64: triangle_launch<NV__LS_C64>(s, buf, batch, n, keep_upper, flags); break;
  default: triangle_launch<NV__LS_C128>(s, buf, batch, n, keep_upper, flags); break;
  }
  return launched();
}

template <int K>
static void nan_flags_launch(cudaStream_t s, const void *src, int64_t batch, int64_t per,
                             int *flags) {
  nan_flags_k<K><<<blocks_for(batch * per), THREADS, 0, s>>>(
      (const typename el<K>::T *)src, batch, per, flags);
}

extern "C" int nv__ls_nan_flags(void *stream, int kind, const void *src, int64_t batch,
                                int64_t per, int *flags) {
  if (batch * per == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  switch (kind) {
  case NV__LS_F32: nan_flags_launch<NV__LS_F32>(s, src, batch, per, flags); break;
  case NV__LS_F64: nan_flags_launch<NV__LS_F64>(s, src, batch, per, flags); break;
  case NV__LS_C64: nan_flags_launch<NV__LS_C64>(s, src, batch, per, flags); break;
  default: nan_flags_launch<NV__LS_C128>(s, src, batch, per, flags); break;
  }
  return launched();
}

extern "C" int nv__ls_info_flags(void *stream, const int *info, int64_t batch, int *flags) {
  if (batch == 0) return 0;
  info_flags_k<<<blocks_for(batch), THREADS, 0, (cudaStream_t)stream>>>(info, batch, flags);
  return launched();
}

template <int K> static void eye_launch(cudaStream_t s, void *dst, int64_t batch, int64_t n) {
  eye_k<K><<<blocks_for(batch * n * n), THREADS, 0, s>>>(PTR(K, dst), batch, n);
}

extern "C" int nv__ls_eye(void *stream, int kind, void *dst, int64_t batch, int64_t n) {
  if (batch * n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  switch (kind) {
  case NV__LS_F32: eye_launch<NV__LS_F32>(s, dst, batch, n); break;
  case NV__LS_F64: eye_launch<NV__LS_F64>(s, dst, batch, n); break;
  case NV__LS_C64: eye_launch<NV__LS_C64>(s, dst, batch, n); break;
  default: eye_launch<NV__LS_C128>(s, dst, batch, n); break;
  }
  return launched();
}

extern "C" int nv__ls_pointers(void *stream, void *base, int64_t stride_bytes, int64_t batch,
                               void **out) {
  if (batch == 0) return 0;
  pointers_k<<<blocks_for(batch), THREADS, 0, (cudaStream_t)stream>>>((char *)base, stride_bytes,
                                                                       batch, out);
  return launched();
}

/* Matrices of up to this many rows keep their rows and pivots in shared memory (2 m words
 * within the default 48 KiB of dynamic shared memory). */
constexpr int64_t PIVOT_SMEM_ROWS = 6144;

extern "C" int nv__ls_pivots(void *stream, const int *ipiv, int64_t batch, int64_t m, int64_t k,
                             uint32_t *piv, uint32_t *perm, uint32_t *rows) {
  if (batch == 0 || m == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (m <= PIVOT_SMEM_ROWS) {
    unsigned grid = (unsigned)(batch > 65535 * 8 ? 65535 * 8 : batch);
    unsigned threads = m <= 32 ? 32 : THREADS;
    pivots_smem_k<<<grid, threads, (size_t)(2 * m) * sizeof(uint32_t), s>>>(ipiv, batch, m, k, piv,
                                                                           perm);
  } else {
    /* One thread per matrix: small blocks so that a small batch still spreads over the SMs. */
    unsigned grid = (unsigned)((batch + 63) / 64);
    pivots_k<<<grid > 65535u * 8 ? 65535u * 8 : grid, 64, 0, s>>>(ipiv, batch, m, k, piv, perm,
                                                                  rows);
  }
  return launched();
}

template <int K>
static void qr_r_launch(cudaStream_t s, const void *work, void *r, int64_t batch, int64_t m,
                        int64_t n, int64_t k, const int *flags) {
  qr_r_k<K><<<blocks_for(batch * k * n), THREADS, 0, s>>>((const typename el<K>::T *)work,
                                                            PTR(K, r), batch, m, n, k, flags);
}

extern "C" int nv__ls_qr_r(void *stream, int kind, const void *work, void *r, int64_t batch,
                           int64_t m, int64_t n, int64_t k, const int *flags) {
  if (batch * k * n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (kind == NV__LS_F64) qr_r_launch<NV__LS_F64>(s, work, r, batch, m, n, k, flags);
  else qr_r_launch<NV__LS_F32>(s, work, r, batch, m, n, k, flags);
  return launched();
}

template <int WK, int VK>
static void eig_launch(cudaStream_t s, const void *w, const void *vr, void *wout, void *vout,
                       int64_t batch, int64_t n, const int *flags) {
  int64_t total = batch * (vout ? n * n : n);
  eig_out_k<WK, VK><<<blocks_for(total), THREADS, 0, s>>>(
      (const typename el<WK>::T *)w, (const typename el<VK>::T *)vr, (float2 *)wout,
      (float2 *)vout, batch, n, flags);
}

extern "C" int nv__ls_eig_out(void *stream, int wkind, const void *w, int vkind, const void *vr,
                              void *wout, void *vout, int64_t batch, int64_t n,
                              const int *flags) {
  if (batch * n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (wkind == NV__LS_C128) {
    if (vkind == NV__LS_F64) eig_launch<NV__LS_C128, NV__LS_F64>(s, w, vr, wout, vout, batch, n, flags);
    else eig_launch<NV__LS_C128, NV__LS_C128>(s, w, vr, wout, vout, batch, n, flags);
  } else {
    if (vkind == NV__LS_F32) eig_launch<NV__LS_C64, NV__LS_F32>(s, w, vr, wout, vout, batch, n, flags);
    else eig_launch<NV__LS_C64, NV__LS_C64>(s, w, vr, wout, vout, batch, n, flags);
  }
  return launched();
}

template <int K>
static void nan_values_launch(cudaStream_t s, void *v, int64_t batch, int64_t n, const int *flags) {
  nan_values_k<K><<<blocks_for(batch * n), THREADS, 0, s>>>(PTR(K, v), batch, n, flags);
}

extern "C" int nv__ls_nan_values(void *stream, int kind, void *v, int64_t batch, int64_t n,
                                 const int *flags) {
  if (batch * n == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  switch (kind) {
  case NV__LS_F32: nan_values_launch<NV__LS_F32>(s, v, batch, n, flags); break;
  case NV__LS_F64: nan_values_launch<NV__LS_F64>(s, v, batch, n, flags); break;
  case NV__LS_C64: nan_values_launch<NV__LS_C64>(s, v, batch, n, flags); break;
  default: nan_values_launch<NV__LS_C128>(s, v, batch, n, flags); break;
  }
  return launched();
}
