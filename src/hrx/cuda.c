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
  if (rt->capture_stream) cudaStreamDestroy(rt->capture_stream);
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

/* Adds the operation's node to g (exec == NULL) or rewrites the parameters of the existing
 * `*node` in the instantiated `exec`. Kernel parameter arrays only need to live through the
 * call. Captured operations are lowered by capture_node instead. */
static cudaError_t op_node(cudaGraph_t g, cudaGraphExec_t exec, const hrx__op *op,
                           const cudaGraphNode_t *deps, size_t ndeps, cudaGraphNode_t *node) {
  if (op->kind == HRX_OP_COPY) {
    void *dst = gpu_address(op->dst);
    const void *src = gpu_address(op->src);
    if (exec)
      return cudaGraphExecMemcpyNodeSetParams1D(exec, *node, dst, src, op->dst.length,
                                                cudaMemcpyDefault);
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
    if (exec) return cudaGraphExecMemsetNodeSetParams(exec, *node, &m);
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
  if (exec) return cudaGraphExecKernelNodeSetParams(exec, *node, &k);
  return cudaGraphAddKernelNode(node, g, deps, ndeps, &k);
}

/* Runs a captured operation's function on the runtime's capture stream, under capture, and
 * writes the captured graph (never empty: work-free functions get one empty node, so that
 * every capture of the operation has a shape its node can be updated to) into *out, which
 * the caller destroys. The capture always ends, whatever the function did, so the stream is
 * never left capturing. Errors name `call` and the operation's builder index. */
static hrx_status capture_op(hrx_runtime *rt, const hrx__op *op, size_t index, const char *call,
                             cudaGraph_t *out) {
  hrx_callback_view small[16];
  hrx_callback_view *v = op->nviews <= 16 ? small : hrx__calloc(op->nviews, sizeof *v);
  if (!v) return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  for (size_t i = 0; i < op->nviews; i++) {
    v[i].address = gpu_address(op->views[i]);
    v[i].length = op->views[i].length;
  }
  hrx__callback *cb = op->callback;
  cudaGraph_t g = NULL;
  hrx_status fs = HRX_OK;
  const char *api = NULL;
  pthread_mutex_lock(&rt->capture_lock);
  cudaError_t e = cudaSuccess;
  if (!rt->capture_stream) {
    e = cudaStreamCreateWithFlags(&rt->capture_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      rt->capture_stream = NULL;
      api = "cudaStreamCreateWithFlags";
    }
  }
  if (e == cudaSuccess) {
    /* Thread-local mode: only this thread's unsafe calls break the capture, so other threads
     * of the process may allocate or synchronize meanwhile. */
    e = cudaStreamBeginCapture(rt->capture_stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) api = "cudaStreamBeginCapture";
  }
  if (e == cudaSuccess) {
    fs = cb->capture_fn(v, op->nviews, (void *)rt->capture_stream, cb->user);
    e = cudaStreamEndCapture(rt->capture_stream, &g);
    if (e != cudaSuccess) api = "cudaStreamEndCapture";
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(rt->capture_stream, &cs) != cudaSuccess ||
        cs != cudaStreamCaptureStatusNone) {
      /* Not seen in practice: a stream that is somehow still capturing is abandoned rather
       * than reused, and the next capture makes a new one. */
      rt->capture_stream = NULL;
    }
  }
  if (e == cudaSuccess && fs == HRX_OK && g) {
    size_t count = 0;
    cudaGraphNode_t empty;
    if ((e = cudaGraphGetNodes(g, NULL, &count)) != cudaSuccess) api = "cudaGraphGetNodes";
    else if (count == 0 && (e = cudaGraphAddEmptyNode(&empty, g, NULL, 0)) != cudaSuccess)
      api = "cudaGraphAddEmptyNode";
  }
  /* A failed capture leaves a (non-sticky) error behind that later checks would misread. */
  if (e != cudaSuccess || fs != HRX_OK) cudaGetLastError();
  pthread_mutex_unlock(&rt->capture_lock);
  if (v != small) hrx__free(v);
  if (fs != HRX_OK || e != cudaSuccess || !g) {
    if (g) cudaGraphDestroy(g);
    if (fs != HRX_OK)
      return hrx__err(fs, "%s: captured operation %zu: its function failed with %s", call, index,
                      hrx_status_name(fs));
    if (e == cudaSuccess)
      return hrx__err(HRX_E_CUDA, "%s: captured operation %zu: the capture made no graph", call,
                      index);
    char what[160];
    snprintf(what, sizeof what, "%s: captured operation %zu: %s", call, index, api);
    return hrx__cuda_err(e, what);
  }
  *out = g;
  return HRX_OK;
}

/* Makes room for the region's captured graphs (once per region that has captured work). */
static hrx_status children_alloc(hrx__region *reg, const char *call) {
  if (reg->children) return HRX_OK;
  reg->children = hrx__calloc(reg->count, sizeof *reg->children);
  return reg->children ? HRX_OK : hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
}

void hrx__cuda_adopt_children(hrx__region *to, hrx__region *from) {
  if (!from->children || !to->children) return;
  for (size_t k = 0; k < to->count; k++)
    if (!to->children[k]) {
      to->children[k] = from->children[k];
      from->children[k] = NULL;
    }
}

hrx_status hrx__cuda_build_region(hrx_runtime *rt, const hrx__plan *plan, hrx__region *reg,
                                  const char *call, cudaGraph_t *out,
                                  cudaGraphNode_t **out_nodes) {
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
  hrx_status s = HRX_OK;
  for (size_t k = 0; k < reg->count && e == cudaSuccess && s == HRX_OK; k++) {
    size_t global = reg->first + k;
    const hrx__op *op = &plan->ops[global];
    size_t nd = plan->op_ndeps[global];
    for (size_t d = 0; d < nd; d++) deps[d] = nodes[plan->op_deps[global][d] - reg->first];
    if (op->kind == HRX_OP_CAPTURED) {
      /* An operation captured before (for this plan) is not captured again; the node holds
       * its own copy of the graph. */
      s = children_alloc(reg, call);
      if (s == HRX_OK && !reg->children[k]) s = capture_op(rt, op, global, call, &reg->children[k]);
      if (s == HRX_OK) e = cudaGraphAddChildGraphNode(&nodes[k], g, deps, nd, reg->children[k]);
    } else {
      e = op_node(g, NULL, op, deps, nd, &nodes[k]);
    }
  }
  hrx__free(deps);
  if (s == HRX_OK && e != cudaSuccess) {
    cudaGetLastError();
    s = hrx__cuda_err(e, call);
  }
  if (s != HRX_OK) {
    hrx__free(nodes);
    cudaGraphDestroy(g);
    return s;
  }
  *out = g;
  *out_nodes = nodes;
  return HRX_OK;
}

bool hrx__cuda_region_changed(const hrx__plan *old, const hrx__plan *fresh, size_t region) {
  const hrx__region *r = &fresh->regions[region];
  for (size_t i = r->first; i < r->first + r->count; i++)
    if (!hrx__op_same_params(&old->ops[i], &fresh->ops[i])) return true;
  return false;
}

/* The executable's nodes are rewritten one by one with the cudaGraphExec*SetParams calls, and
 * reg->graph is left as it was instantiated (it only names the nodes): a child graph node
 * cannot be given a new graph in the template, and cudaGraphExecUpdate from the template would
 * undo the child graphs set on the executable. */
hrx_status hrx__cuda_update_region(hrx_runtime *rt, const hrx__plan *old, hrx__plan *fresh,
                                   hrx__region *reg, bool *updated, bool *refused) {
  const char *call = "hrx_prepared_update";
  *updated = false;
  *refused = false;
  cudaError_t e = cudaSetDevice(rt->device);
  if (e != cudaSuccess) return hrx__cuda_err(e, call);
  /* Room for the captured graphs now, so that adopting the unchanged ones cannot fail later. */
  if (old->regions[reg - fresh->regions].children) {
    hrx_status s = children_alloc(reg, call);
    if (s != HRX_OK) return s;
  }
  for (size_t k = 0; k < reg->count; k++) {
    size_t i = reg->first + k;
    const hrx__op *op = &fresh->ops[i];
    if (hrx__op_same_params(&old->ops[i], op)) continue;
    *updated = true;
    if (op->kind == HRX_OP_CAPTURED) {
      /* Kept even if the executable refuses it: the fallback instantiation then uses it. */
      hrx_status s = children_alloc(reg, call);
      if (s == HRX_OK && !reg->children[k]) s = capture_op(rt, op, i, call, &reg->children[k]);
      if (s != HRX_OK) return s;
      /* Set on the executable only when the work is the same one over new views (the same
       * user data or key): other work may launch other kernels, and the executable's node
       * keeps launch attributes (thread-block clusters, for one) that setting parameters
       * does not redo, so a product computed garbage on the H200. Other work is refused
       * here, and the region instantiated again. */
      if (!hrx__captured_same(old->ops[i].callback, op->callback)) {
        *refused = true;
        return hrx__err(HRX_E_CUDA, "%s: captured operation %zu does other work", call, i);
      }
      /* Refused when the new capture has another shape. */
      e = cudaGraphExecChildGraphNodeSetParams(reg->exec, reg->nodes[k], reg->children[k]);
    } else {
      e = op_node(NULL, reg->exec, op, NULL, 0, &reg->nodes[k]);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      *refused = true;
      return hrx__cuda_err(e, call);
    }
  }
  return HRX_OK;
}
