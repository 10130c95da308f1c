/* A stand-in for the lead's src/cuda/backend.c, for testing the copy and linalg families'
 * kernels on a GPU before the real backend lands: every dispatch launches at once on one
 * stream, library callbacks run at once, host buffers are uploaded on first use and outputs
 * downloaded by mock_finish(). Not part of the library. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/gpu.h"

void nv__gpu_register(void);

struct nv__gpu_ctx {
  int dummy;
};

static hrx_runtime *rt;
static cudaStream_t stream;

typedef struct dev_copy {
  nv__buffer *host;
  hrx_buffer *dev;
  bool dirty; /* the device copy is newer */
} dev_copy;

#define MAXB 4096
static dev_copy copies[MAXB];
static int ncopies;
static hrx_buffer *scratch[MAXB];
static int nscratch;
long mock_launches, mock_library_calls;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "mock: %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(2);                                                                             \
    }                                                                                      \
  } while (0)

void mock_init(void) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.engine = HRX_ENGINE_CUDA;
  if (hrx_runtime_create(&o, &rt) != HRX_OK) {
    fprintf(stderr, "mock: hrx_runtime_create: %s\n", hrx_last_error());
    exit(2);
  }
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  nv__gpu_register();
}

void *mock_stream(void) { return stream; }

static uint64_t addr_of(hrx_view v) {
  uint64_t a = 0;
  hrx_buffer_gpu_address(v.buffer, &a);
  return a + v.offset;
}

static dev_copy *copy_of(nv__buffer *b, bool upload) {
  for (int i = 0; i < ncopies; i++)
    if (copies[i].host == b) return &copies[i];
  if (ncopies == MAXB) {
    fprintf(stderr, "mock: too many buffers\n");
    exit(2);
  }
  dev_copy *c = &copies[ncopies++];
  c->host = nv__buffer_retain(b);
  size_t n = b->nbytes ? b->nbytes : 1;
  if (hrx_buffer_create(rt, HRX_MEMORY_DEVICE, n, &c->dev) != HRX_OK) {
    fprintf(stderr, "mock: hrx_buffer_create(%zu): %s\n", n, hrx_last_error());
    exit(2);
  }
  c->dirty = false;
  /* hrx zero-fills new buffers with cudaMemset on the legacy stream, which a non-blocking
   * stream does not wait for. */
  CK(cudaDeviceSynchronize());
  if (upload && b->nbytes) {
    uint64_t a;
    hrx_buffer_gpu_address(c->dev, &a);
    CK(cudaMemcpyAsync((void *)(uintptr_t)a, b->ptr, b->nbytes, cudaMemcpyHostToDevice, stream));
    CK(cudaStreamSynchronize(stream));
  }
  return c;
}

nv_status nv__gpu_input(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg *out) {
  (void)ctx;
  const nv__output *m = op->meta;
  dev_copy *c = copy_of(op->buf, true);
  size_t isz = nv_dtype_size(m->dtype);
  if (m->size == 0) {
    out->view = hrx_view_make(c->dev, 0, 1);
    out->offset = 0;
    return NV_OK;
  }
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < m->ndim; i++) {
    int64_t e = (int64_t)(m->shape[i] - 1) * m->strides[i];
    if (e < 0) lo += e;
    else hi += e;
  }
  out->view = hrx_view_make(c->dev, (size_t)(op->offset + lo) * isz, (size_t)(hi - lo + 1) * isz);
  out->offset = -lo;
  if (out->view.offset + out->view.length > hrx_buffer_size(c->dev)) {
    fprintf(stderr, "mock: input view out of range\n");
    exit(2);
  }
  return NV_OK;
}

nv_status nv__gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out) {
  (void)ctx;
  size_t isz = nv_dtype_size(o->dtype);
  bool fresh = !o->buf;
  if (fresh) {
    size_t n = (size_t)o->size * isz;
    o->buf = nv__buffer_alloc(n ? n : 1);
    if (!o->buf) return NV_ERR_OUT_OF_MEMORY;
    o->offset = 0;
  }
  dev_copy *c = copy_of(o->buf, !fresh);
  c->dirty = true;
  out->view = hrx_view_whole(c->dev);
  out->offset = o->offset;
  return NV_OK;
}

nv_status nv__gpu_scratch(nv__gpu_ctx *ctx, size_t bytes, hrx_view *out) {
  (void)ctx;
  hrx_buffer *b;
  if (hrx_buffer_create(rt, HRX_MEMORY_DEVICE, bytes, &b) != HRX_OK) return NV_ERR_OUT_OF_MEMORY;
  CK(cudaDeviceSynchronize());
  scratch[nscratch++] = b;
  *out = hrx_view_whole(b);
  return NV_OK;
}

static void check_view(hrx_view v, const char *what) {
  if (!v.buffer || v.length == 0 || v.offset + v.length > hrx_buffer_size(v.buffer)) {
    fprintf(stderr, "mock: bad view for %s (offset %zu length %zu size %zu)\n", what, v.offset,
            v.length, v.buffer ? hrx_buffer_size(v.buffer) : 0);
    exit(2);
  }
}

nv_status nv__gpu_dispatch(nv__gpu_ctx *ctx, const nv__gpu_launch *l) {
  (void)ctx;
  void *ptrs[16], *args[17];
  for (int i = 0; i < l->nviews; i++) {
    check_view(l->views[i], "dispatch");
    ptrs[i] = (void *)(uintptr_t)addr_of(l->views[i]);
    args[i] = &ptrs[i];
  }
  if (l->params_size > 4096) {
    fprintf(stderr, "mock: params too large\n");
    exit(2);
  }
  args[l->nviews] = (void *)l->params;
  dim3 g = {l->grid[0], l->grid[1], l->grid[2]}, b = {l->block[0], l->block[1], l->block[2]};
  if (!g.x || !g.y || !g.z) {
    fprintf(stderr, "mock: empty grid\n");
    exit(2);
  }
  CK(cudaLaunchKernel(l->func, g, b, args, l->shared_bytes, stream));
  mock_launches++;
  return NV_OK;
}

nv_status nv__gpu_library(nv__gpu_ctx *ctx, const hrx_binding *bindings, size_t count,
                          hrx_scoped_fn fn, void *user, hrx_destroy_fn destroy) {
  (void)ctx;
  hrx_callback_view v[16];
  for (size_t i = 0; i < count; i++) {
    check_view(bindings[i].view, "library");
    v[i].address = (void *)(uintptr_t)addr_of(bindings[i].view);
    v[i].length = bindings[i].view.length;
  }
  hrx_status s = fn(v, count, user);
  if (destroy) destroy(user);
  mock_library_calls++;
  if (s != HRX_OK) return nv__set_error(NV_ERR_BACKEND, "library call failed: %s", hrx_status_name(s));
  return NV_OK;
}

nv_status nv__gpu_fill(nv__gpu_ctx *ctx, hrx_view dst, uint8_t value) {
  (void)ctx;
  check_view(dst, "fill");
  CK(cudaMemsetAsync((void *)(uintptr_t)addr_of(dst), value, dst.length, stream));
  return NV_OK;
}

nv_status nv__gpu_copy(nv__gpu_ctx *ctx, hrx_view dst, hrx_view src) {
  (void)ctx;
  CK(cudaMemcpyAsync((void *)(uintptr_t)addr_of(dst), (void *)(uintptr_t)addr_of(src), dst.length,
                     cudaMemcpyDeviceToDevice, stream));
  return NV_OK;
}

int nv__gpu_device_index(const nv__gpu_ctx *ctx) {
  (void)ctx;
  return 0;
}

void *nv__gpu_library_stream(int device) {
  (void)device;
  return stream;
}

/* Waits, downloads the outputs written, frees scratch memory. Returns nonzero on a CUDA error. */
bool mock_no_download;
int mock_finish(void) {
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) {
    fprintf(stderr, "mock: kernel failed: %s\n", cudaGetErrorString(e));
    exit(3);
  }
  for (int i = 0; i < ncopies && !mock_no_download; i++)
    if (copies[i].dirty && copies[i].host->nbytes) {
      uint64_t a;
      hrx_buffer_gpu_address(copies[i].dev, &a);
      CK(cudaMemcpyAsync(copies[i].host->ptr, (void *)(uintptr_t)a, copies[i].host->nbytes,
                         cudaMemcpyDeviceToHost, stream));
      CK(cudaStreamSynchronize(stream));
      copies[i].dirty = false;
    }
  for (int i = 0; i < nscratch; i++) hrx_buffer_release(scratch[i]);
  nscratch = 0;
  return 0;
}

/* Forgets every device copy (between tests, so host buffers can be freed and reused). */
void mock_reset(void) {
  mock_finish();
  for (int i = 0; i < ncopies; i++) {
    hrx_buffer_release(copies[i].dev);
    nv__buffer_release(copies[i].host);
  }
  ncopies = 0;
}

/* Runs node `n`'s GPU kernel on its (CPU-evaluated) inputs; `donated` as the evaluation would
 * pass it (for donated == 0 the caller sets the output buffer). Marks the node done. */
nv_status mock_run_node(nv__node *n, int donated) {
  nv__operand ops[8];
  for (int i = 0; i < n->ninputs; i++) {
    nv__node *in = n->inputs[i].node;
    nv__output *o = &in->out[n->inputs[i].idx];
    ops[i].meta = o;
    ops[i].buf = o->buf;
    ops[i].offset = o->offset;
  }
  nv__gpu_kernel_fn k = nv__gpu_kernels[n->prim];
  if (!k) return nv__set_error(NV_ERR_UNSUPPORTED, "no GPU kernel for %s", nv__prims[n->prim].name);
  static struct nv__gpu_ctx ctx;
  nv_status st = k(&ctx, n, ops, donated);
  mock_finish();
  return st;
}
