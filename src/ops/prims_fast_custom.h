/* The custom-kernel primitive of the fast family (see src/core/prims.h for the entry format;
 * the definition is in include/nuvec/fast.h, the parameters in src/ops/fast_custom.h):
 *   FAST_CUDA_KERNEL   a user's CUDA kernel (generated and compiled by NVRTC, or precompiled)
 *                      over its inputs, writing its outputs (row-contiguous); GPU streams only */
#ifndef NUVEC_OPS_PRIMS_FAST_CUSTOM_H
#define NUVEC_OPS_PRIMS_FAST_CUSTOM_H

#define NV__PRIMS_FAST_CUSTOM(X) X(FAST_CUDA_KERNEL, "cuda_kernel", D_NONE, false, false)

#endif
