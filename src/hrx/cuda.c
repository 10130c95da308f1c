/* The CUDA engine's device-facing parts: device setup, allocation, and lowering a region to a
 * native CUDA graph. Only the runtime API is used; nothing links the driver library. */
#include "hrx_internal.h"

#include <stdio.h>
#include <string.h>

hrx_status hrx__cuda_runtime_init(hrx_runtime *rt) {
  const char *call = "hrx_runtime_create";
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();
    return hrx__err(HRX_E_NO_DEVICE, "%s: no CUDA device: %s", call,
                    e != cudaSuccess ? cudaGetErrorString(e) : "zero devices");
  }
  if (rt->options.device_index >= n)
    return hrx__err(HRX_E_NO_DEVICE, "%s: device %d requested, %d present", call,
                    rt->options.device_index, n);
  rt->device = rt->options.device_index;
  e = cudaSetDevice(rt->device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&rt->cc_major, cudaDevAttrComputeCapabilityMajor, rt->device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&rt->cc_minor, cudaDevAttrComputeCapabilityMinor, rt->device);
  if (e == cudaSuccess) e = cudaFree(NULL); /* creates the primary context now */
  if (e != cudaSuccess) return hrx__cuda_err(e, call);
  return HRX_OK;
}

void hrx__cuda_runtime_fini(hrx_runtime *rt) {
  /* Errors are ignored: after a context-poisoning failure every call fails, and teardown must
   * still release what it can. */
  cudaSetDevice(rt->device);
  cudaDeviceSynchronize();
  for (int l = 0; l < 3; l++)
    if (rt->copy_created[l] && rt->copy_stream[l]) cudaStreamDestroy(rt->copy_stream[l]);
  cudaGetLastError();
}

hrx_status hrx__cuda_alloc(hrx_runtime *rt, hrx_memory memory, size_t bytes, hrx__alloc *a) {
  const char *call = "hrx_buffer_create";
  cudaError_t e = cudaSetDevice(rt->device);
  if (e != cudaSuccess) return hrx__cuda_err(e, call);
  void *p = NULL;
  if (memory == HRX_MEMORY_DEVICE) {
    e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) return hrx__cuda_err(e, call);
    e = cudaMemset(p, 0, bytes);
    if (e != cudaSuccess) {
      cudaFree(p);
      return hrx__cuda_err(e, call);
    }
    a->base = p;
    a->host = NULL;
    a->gpu = (uint64_t)(uintptr_t)p;
    return HRX_OK;
  }
  e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) return hrx__cuda_err(e, call);
  memset(p, 0, bytes);
  void *d = NULL;
  e = cudaHostGetDevicePointer(&d, p, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(p);
    return hrx__cuda_err(e, call);
  }
  a->base = p;
  a->host = p;
  a->gpu = (uint64_t)(uintptr_t)d;
  return HRX_OK;
}

static void *gpu_address(hrx_view v) { return (void *)(uintptr_t)(v.buffer->alloc->gpu + v.offset); }

static cudaError_t add_op(cudaGraph_t g, const hrx__op *op, const cudaGraphNode_t *deps,
                          size_t ndeps, cudaGraphNode_t *node) {
  if (op->kind == HRX_OP_COPY)
    return cudaGraphAddMemcpyNode1D(node, g, deps, ndeps, gpu_address(op->dst),
                                    gpu_address(op->src), op->dst.length, cudaMemcpyDefault);
  if (op->kind == HRX_OP_FILL && op->dst.buffer->memory == HRX_MEMORY_DEVICE) {
    struct cudaMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = gpu_address(op->dst);
    m.value = op->value;
    m.elementSize = 1;
    m.width = op->dst.length;
    m.height = 1;
    return cudaGraphAddMemsetNode(node, g, deps, ndeps, &m);
  }
  struct cudaKernelNodeParams k;
  memset(&k, 0, sizeof k);
  void *args[130];
  void *ptrs[64];
  if (op->kind == HRX_OP_FILL) {
    unsigned int value = op->value;
    void *dst = gpu_address(op->dst);
    size_t n = op->dst.length;
    size_t blocks = (n + 255) / 256;
    k.func = (void *)hrx__fill_kernel();
    k.gridDim.x = (unsigned)(blocks > 1024 ? 1024 : blocks);
    k.gridDim.y = k.gridDim.z = 1;
    k.blockDim.x = 256;
    k.blockDim.y = k.blockDim.z = 1;
    args[0] = &dst;
    args[1] = &value;
    args[2] = &n;
    k.kernelParams = args;
    return cudaGraphAddKernelNode(node, g, deps, ndeps, &k);
  }
  size_t a = 0;
  for (size_t i = 0; i < op->nviews; i++) {
    ptrs[i] = gpu_address(op->views[i]);
    args[a++] = &ptrs[i];
  }
  for (size_t i = 0; i < op->nconstants; i++) args[a++] = (void *)&op->constants[i].value;
  k.func = (void *)op->kernel->function;
  k.gridDim.x = op->kernel->grid[0];
  k.gridDim.y = op->kernel->grid[1];
  k.gridDim.z = op->kernel->grid[2];
  k.blockDim.x = op->kernel->block[0];
  k.blockDim.y = op->kernel->block[1];
  k.blockDim.z = op->kernel->block[2];
  k.kernelParams = args;
  return cudaGraphAddKernelNode(node, g, deps, ndeps, &k);
}

hrx_status hrx__cuda_build_region(hrx_runtime *rt, const hrx__plan *plan, hrx__region *reg,
                                  cudaGraph_t *out) {
  const char *call = "hrx_graph_prepare";
  cudaError_t e = cudaSetDevice(rt->device);
  cudaGraph_t g = NULL;
  if (e == cudaSuccess) e = cudaGraphCreate(&g, 0);
  if (e != cudaSuccess) return hrx__cuda_err(e, call);
  cudaGraphNode_t *nodes = hrx__calloc(reg->count, sizeof *nodes);
  cudaGraphNode_t *deps = hrx__calloc(reg->count, sizeof *deps);
  if (!nodes || !deps) {
    hrx__free(nodes);
    hrx__free(deps);
    cudaGraphDestroy(g);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  for (size_t k = 0; k < reg->count && e == cudaSuccess; k++) {
    size_t global = reg->first + k;
    size_t nd = plan->op_ndeps[global];
    for (size_t d = 0; d < nd; d++) deps[d] = nodes[plan->op_deps[global][d] - reg->first];
    e = add_op(g, &plan->ops[global], deps, nd, &nodes[k]);
  }
  hrx__free(nodes);
  hrx__free(deps);
  if (e != cudaSuccess) {
    cudaGraphDestroy(g);
    return hrx__cuda_err(e, call);
  }
  *out = g;
  return HRX_OK;
}
