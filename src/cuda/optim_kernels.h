/* The optim family's CUDA kernels (optim.cu) as the host code (optim.c) sees them: the
 * parameter block and the kernels' host addresses. Valid C11 and C++, nothing of nuvec's
 * internals.
 *
 * adam_update's kernel ABI (nv__gpu_launch): ten pointers, each a view's start, in the order
 * p', m', v' (written, row-contiguous), p, g, m, v (read, row-contiguous), s1, s2, dec (read, one
 * element each: lr or c1; c2; decay; the ones the flags leave out may be any readable view),
 * then one nv__gpu_adam_params by value. Pointer k's element 0 is `off[k]` elements further. */
#ifndef NUVEC_CUDA_OPTIM_KERNELS_H
#define NUVEC_CUDA_OPTIM_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_ADAM_THREADS 256
#define NV__GPU_ADAM_VIEWS 10

typedef struct nv__gpu_adam_params {
  int64_t n; /* elements of each array */
  int64_t off[NV__GPU_ADAM_VIEWS];
  double beta1, omb1, beta2, omb2, eps; /* omb: 1 - beta, computed in double by the host */
  int32_t bias_correction; /* s2 is c2 (else 1 and s1 is lr) */
  int32_t decoupled;       /* dec is the decay (else 1) */
} nv__gpu_adam_params;

/* The kernel for an nv_dtype code (float16, bfloat16, float32, float64), else NULL. */
const void *nv__gpu_kernel_adam(int dtype);

#ifdef __cplusplus
}
#endif

#endif
