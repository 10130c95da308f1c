/* The convolution primitive through cuDNN (conv_cudnn.c), for the CUDA kernel of conv.c. */
#ifndef NUVEC_CUDA_CONV_CUDNN_H
#define NUVEC_CUDA_CONV_CUDNN_H

#include "cuda/gpu.h"

/* Records `node` (a convolution with a non-empty output and contraction) as a cuDNN forward
 * convolution into `out` (its row-contiguous output view) when cuDNN is loaded and takes the
 * node: NV_OK. NV__GPU_DECLINED, having recorded nothing, when it does not (then the direct
 * kernel runs it); an error status with the thread's message otherwise (NUVEC_CUDNN=1 without
 * cuDNN: "cuDNN not found"). */
nv_status nv__gpu_conv_cudnn(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             nv__gpu_arg out);

#endif
