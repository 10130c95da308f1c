/* scaled_dot_product_attention through cuDNN's fused attention (fast_sdpa_cudnn.c), for the
 * CUDA kernel of fast_sdpa.c. */
#ifndef NUVEC_CUDA_FAST_SDPA_CUDNN_H
#define NUVEC_CUDA_FAST_SDPA_CUDNN_H

#include "cuda/gpu.h"

/* Records `node` (an SDPA node the tensor-core kernel would run: float16/bfloat16, D = Dv, more
 * than 16 queries, no mask array, no sinks, Lk > 0, a non-empty output) as cuDNN's fused
 * attention writing `out` (the node's row-contiguous output view): NV_OK. NV__GPU_DECLINED,
 * having recorded nothing but input uploads, where this path does not take the node (then
 * sdpa_mma runs it); an error status with the thread's message otherwise (NUVEC_CUDNN_SDPA=1
 * and cuDNN missing or unable to run the node, or a failure while recording). */
nv_status nv__gpu_sdpa_cudnn(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             nv__gpu_arg out);

#endif
