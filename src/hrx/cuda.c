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
    /* The zero fill runs on the legacy stream, which hrx's non-blocking streams do not wait
     * for: finish it before the buffer can be used by any recorded work. */
    e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaStreamSynchronize(0);
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

/* Adds the operation's node to g (set == false) or rewrites the parameters of the existing
 * `*node` (set == true). Kernel parameter arrays only need to live through the call. */
static cudaError_t op_node(cudaGraph_t g, const hrx__op *op, const cudaGraphNode_t *deps,
                           size_t ndeps, cudaGraphNode_t *node, bool set) {
  if (op->kind == HRX_OP_COPY) {
    void *dst = gpu_address(op->dst);
    const void *src = gpu_address(op->src);
    if (set) return cudaGraphMemcpyNodeSetParams1D(*node, dst, src, op->dst.length, cudaMemcpyDefault);
    return cudaGraphAddMemcpyNode1D(node, g, deps, ndeps, dst, src, op->dst.length,
                                    cudaMemcpyDefault);
  }
  if (op->kind == HRX_OP_FILL && op->dst.buffer->memory == HRX_MEMORY_DEVICE) {
    struct cudaMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = gpu_address(op->dst);
    m.value = op->value;
    m.elementSize = 1;
    m.width = op->dst.length;
    m.height = 1;
    if (set) return cudaGraphMemsetNodeSetParams(*node, &m);
    return cudaGraphAddMemsetNode(node, g, deps, ndeps, &m);
  }
  struct cudaKernelNodeParams k;
  memset(&k, 0, sizeof k);
  void *args[131];
  void *ptrs[64];
  unsigned int value = op->value;
  void *dst = NULL;
  size_t n = 0;
  if (op->kind == HRX_OP_FILL) {
    /* Graph memset nodes do not reach mapped host memory: fill it with hrx's kernel. */
    dst = gpu_address(op->dst);
    n = op->dst.length;
    size_t blocks = (n + 255) / 256;
    k.func = (void *)hrx__fill_kernel();
    k.gridDim.x = (unsigned)(blocks > 1024 ? 1024 : blocks);
    k.gridDim.y = k.gridDim.z = 1;
    k.blockDim.x = 256;
    k.blockDim.y = k.blockDim.z = 1;
    args[0] = &dst;
    args[1] = &value;
    args[2] = &n;
  } else {
    size_t a = 0;
    for (size_t i = 0; i < op->nviews; i++) {
      ptrs[i] = gpu_address(op->views[i]);
      args[a++] = &ptrs[i];
    }
    for (size_t i = 0; i < op->nconstants; i++) args[a++] = (void *)&op->constants[i].value;
    if (op->params_size) args[a++] = op->params;
    k.func = op->kernel->stub ? (void *)op->kernel->stub : (void *)op->kernel->function;
    k.sharedMemBytes = op->kernel->shared_bytes;
    k.gridDim.x = op->kernel->grid[0];
    k.gridDim.y = op->kernel->grid[1];
    k.gridDim.z = op->kernel->grid[2];
    k.blockDim.x = op->kernel->block[0];
    k.blockDim.y = op->kernel->block[1];
    k.blockDim.z = op->kernel->block[2];
  }
  k.kernelParams = args;
  if (set) return cudaGraphKernelNodeSetParams(*node, &k);
  return cudaGraphAddKernelNode(node, g, deps, ndeps, &k);
}

hrx_status hrx__cuda_build_region(hrx_runtime *rt, const hrx__plan *plan, hrx__region *reg,
                                  cudaGraph_t *out, cudaGraphNode_t **out_nodes) {
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
    e = op_node(g, &plan->ops[global], deps, nd, &nodes[k], false);
  }
  hrx__free(deps);
  if (e != cudaSuccess) {
    hrx__free(nodes);
    cudaGraphDestroy(g);
    return hrx__cuda_err(e, call);
  }
  *out = g;
  *out_nodes = nodes;
  return HRX_OK;
}

static bool same_view(hrx_view a, hrx_view b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.length == b.length;
}

/* Whether two operations of the same kind lower to identical node parameters. */
static bool same_params(const hrx__op *a, const hrx__op *b) {
  if (a->value != b->value || !same_view(a->dst, b->dst) || !same_view(a->src, b->src)) return false;
  for (size_t i = 0; i < a->nviews; i++)
    if (!same_view(a->views[i], b->views[i])) return false;
  if (a->params_size != b->params_size ||
      (a->params_size && memcmp(a->params, b->params, a->params_size) != 0))
    return false;
  for (size_t i = 0; i < a->nconstants; i++)
    if (a->constants[i].size != b->constants[i].size ||
        memcmp(&a->constants[i].value, &b->constants[i].value, a->constants[i].size) != 0)
      return false;
  return true;
}

hrx_status hrx__cuda_update_region(hrx_runtime *rt, const hrx__plan *old, const hrx__plan *fresh,
                                   hrx__region *reg, bool *updated) {
  const char *call = "hrx_prepared_update";
  *updated = false;
  cudaError_t e = cudaSetDevice(rt->device);
  for (size_t k = 0; k < reg->count && e == cudaSuccess; k++) {
    size_t i = reg->first + k;
    if (same_params(&old->ops[i], &fresh->ops[i])) continue;
    e = op_node(reg->graph, &fresh->ops[i], NULL, 0, &reg->nodes[k], true);
    *updated = true;
  }
  if (e == cudaSuccess && *updated) {
    cudaGraphExecUpdateResultInfo info;
    e = cudaGraphExecUpdate(reg->exec, reg->graph, &info);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return hrx__cuda_err(e, call);
  }
  return HRX_OK;
}
