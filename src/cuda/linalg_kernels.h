/* The linalg family's CUDA kernels (linalg_int.cu, linalg_vec.cu) as the host code (linalg.c)
 * sees them: parameter blocks and the kernels' host addresses. Valid C11 and C++, nothing of
 * nuvec's internals (see copy_kernels.h). Element offsets (aoff, boff, doff, soff) are counted
 * from each view's start. */
#ifndef NUVEC_CUDA_LINALG_KERNELS_H
#define NUVEC_CUDA_LINALG_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Batch dims a kernel walks (row-major, folded), with each operand's element strides (0 along
 * a broadcast dim). */
#define NV__GPU_BATCH_DIMS 8
typedef struct nv__gpu_batch {
  int32_t nd;
  int32_t pad_;
  int64_t count; /* the product of shape */
  int64_t shape[NV__GPU_BATCH_DIMS];
  int64_t sa[NV__GPU_BATCH_DIMS];
  int64_t sb[NV__GPU_BATCH_DIMS];
} nv__gpu_batch;

/* The integer product: a (M x K, strides rsa/csa) times b (K x N, strides rsb/csb) for each
 * batch into the row-contiguous output (batch stride M * N), wrapping in the output dtype. */
#define NV__GPU_IGEMM_THREADS 256
#define NV__GPU_IGEMM_TILE 64
typedef struct nv__gpu_igemm_params {
  int64_t aoff, boff, doff;
  int64_t M, N, K;
  int64_t rsa, csa, rsb, csb;
  nv__gpu_batch bt;
} nv__gpu_igemm_params;

/* vecdot: output i (row-major over the folded output dims in bt, a's and b's strides there) is
 * the sum over k < K of conj(a[k * sa]) * b[k * sb]. */
#define NV__GPU_VECDOT_THREADS 256
typedef struct nv__gpu_vecdot_params {
  int64_t aoff, boff, doff;
  int64_t K, sa, sb;
  nv__gpu_batch bt;
} nv__gpu_vecdot_params;

/* dst (row-contiguous, dtype `dtype`) = beta * src (same dtype, folded strides sst): addmm's
 * result when alpha or K is 0 (float16/bfloat16 scaled in float32, as the CPU's sgemm). */
#define NV__GPU_SCALE_THREADS 256
typedef struct nv__gpu_scale_params {
  int32_t dtype;
  int32_t nd;
  double beta;
  int64_t soff, doff, n;
  int64_t shape[8], sst[8];
} nv__gpu_scale_params;

/* Kernels by the output's nv_dtype code; NULL for a dtype without one. */
const void *nv__gpu_kernel_igemm(int dtype);  /* integer dtypes */
const void *nv__gpu_kernel_vecdot(int dtype); /* float16..complex64, int32/64, uint32/64 */
const void *nv__gpu_kernel_scale(void);

#ifdef __cplusplus
}
#endif

#endif
