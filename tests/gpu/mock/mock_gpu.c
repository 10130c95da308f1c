/* A stand-in for the CUDA backend's recording interface (src/cuda/gpu.h) that launches each
 * dispatch at once with the CUDA runtime, so that the reduce family's kernel-table entries can
 * run on a GPU before (and apart from) the backend: check_reduce.py drives it through ctypes
 * and compares every result with NumPy. It checks what hrx would (view bounds, overlapping
 * written views without `aliasing`, parameter block size), hands out scratch views that are
 * not 16-byte aligned and hold garbage, and times repeated runs with CUDA events.
 * Build: tests/gpu/mock/build.sh. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/prims.h"
#include "cuda/gpu.h"
#include "ops/params.h"
#include "ops/reduce_params.h"

void nv__gpu_register_reduce(nv__gpu_kernel_fn *k);

struct hrx_buffer {
  void *dev;
  size_t size;
};

/* Device allocations are kept across runs and handed out again in the same order, so that
 * timed runs allocate nothing. */
#define POOL 64
static struct {
  hrx_buffer b[POOL];
  int n, next;
} pool;

struct nv__gpu_ctx {
  hrx_view out;
  int have_out;
  char msg[512];
  int launches;
};

static nv__gpu_kernel_fn table[NV__PRIM_COUNT];
static char last_msg[600];

size_t nv_dtype_size(nv_dtype dt) {
  static const size_t s[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8};
  return (unsigned)dt < NV_DTYPE_COUNT ? s[dt] : 0;
}

static nv_status fail(nv__gpu_ctx *c, const char *what) {
  snprintf(c->msg, sizeof c->msg, "%s", what);
  return NV_ERR_BACKEND;
}

static hrx_buffer *pool_get(size_t bytes, int garbage) {
  if (pool.next < pool.n && pool.b[pool.next].size >= bytes) return &pool.b[pool.next++];
  if (pool.next < pool.n) { /* too small: replace it */
    cudaFree(pool.b[pool.next].dev);
  } else if (pool.n == POOL) {
    return NULL;
  } else {
    pool.n++;
  }
  hrx_buffer *b = &pool.b[pool.next++];
  b->size = bytes;
  if (cudaMalloc(&b->dev, bytes) != cudaSuccess) return NULL;
  if (garbage) cudaMemset(b->dev, 0xa5, bytes);
  return b;
}

nv_status nv__gpu_input(nv__gpu_ctx *c, const nv__operand *op, nv__gpu_arg *out) {
  const nv__output *m = op->meta;
  size_t isz = nv_dtype_size(m->dtype);
  hrx_buffer *b = op->buf->ctx;
  if (m->size == 0) {
    out->view = (hrx_view){b, 0, 1};
    out->offset = 0;
    return NV_OK;
  }
  int64_t lo = op->offset, hi = op->offset;
  for (int i = 0; i < m->ndim; i++) {
    int64_t e = (int64_t)(m->shape[i] - 1) * m->strides[i];
    if (e < 0) lo += e;
    else hi += e;
  }
  if (lo < 0 || (size_t)(hi + 1) * isz > b->size) return fail(c, "input layout outside its buffer");
  out->view = (hrx_view){b, (size_t)lo * isz, (size_t)(hi - lo + 1) * isz};
  out->offset = op->offset - lo;
  return NV_OK;
}

nv_status nv__gpu_output(nv__gpu_ctx *c, nv__output *o, nv__gpu_arg *out) {
  size_t bytes = (size_t)o->size * nv_dtype_size(o->dtype);
  if (o->buf) { /* donated */
    hrx_buffer *b = o->buf->ctx;
    out->view = (hrx_view){b, (size_t)o->offset * nv_dtype_size(o->dtype), bytes ? bytes : 1};
    out->offset = 0;
  } else {
    hrx_buffer *b = pool_get(bytes ? bytes : 1, 1);
    if (!b) return fail(c, "out of device memory");
    out->view = (hrx_view){b, 0, bytes ? bytes : 1};
    out->offset = 0;
  }
  c->out = out->view;
  c->have_out = 1;
  return NV_OK;
}

nv_status nv__gpu_scratch(nv__gpu_ctx *c, size_t bytes, hrx_view *out) {
  /* 4 bytes in: the kernels must not assume alignment. */
  hrx_buffer *b = pool_get(bytes + 4, 1);
  if (!b) return fail(c, "out of device memory");
  *out = (hrx_view){b, 4, bytes};
  return NV_OK;
}

static int overlaps(hrx_view a, hrx_view b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}

nv_status nv__gpu_dispatch(nv__gpu_ctx *c, const nv__gpu_launch *l) {
  if (l->params_size > 4096) return fail(c, "parameter block over 4096 bytes");
  if (l->block[0] * l->block[1] * l->block[2] > 1024 || l->grid[1] > 65535 || l->grid[2] > 65535 ||
      l->grid[0] == 0 || l->block[0] == 0)
    return fail(c, "bad launch shape");
  void *ptrs[16];
  void *args[17];
  for (int i = 0; i < l->nviews; i++) {
    hrx_view v = l->views[i];
    if (!v.buffer || v.length == 0 || v.offset + v.length > v.buffer->size)
      return fail(c, "view out of range");
    for (int k = 0; k < l->nviews; k++)
      if (k != i && !l->aliasing && (l->access[i] & HRX_ACCESS_WRITE) && overlaps(v, l->views[k]))
        return fail(c, "a written view overlaps another without aliasing");
    ptrs[i] = (char *)v.buffer->dev + v.offset;
    args[i] = &ptrs[i];
  }
  args[l->nviews] = (void *)l->params;
  cudaError_t e = cudaLaunchKernel(l->func, (dim3){l->grid[0], l->grid[1], l->grid[2]},
                                   (dim3){l->block[0], l->block[1], l->block[2]}, args,
                                   l->shared_bytes, 0);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    snprintf(c->msg, sizeof c->msg, "launch: %s", cudaGetErrorString(e));
    return NV_ERR_BACKEND;
  }
  c->launches++;
  return NV_OK;
}

int mock_prim(const char *name) {
  static const char *names[] = {
#define NV__NAME(name, str, donate, ew, view) str,
      NV__PRIM_LIST(NV__NAME)
#undef NV__NAME
  };
  for (int i = 0; i < NV__PRIM_COUNT; i++)
    if (!strcmp(names[i], name)) return i;
  return -1;
}

const char *mock_error(void) { return last_msg; }

/* Runs primitive `prim` on the strided input (element strides, offset into `base`), reduced
 * over `axes` (sorted), into `out_host` (row-major, dtype odtype, shape oshape). donate: the
 * output is written into the input's buffer (then the input must be row-contiguous). iters >
 * 0: also times `iters` runs after one warm-up, *ms the mean per run. Returns the number of
 * launches of one run, or -1 (mock_error says why). */
int mock_run(int prim, int dtype, int ndim, const int *shape, const int64_t *strides,
             int64_t offset, const void *base, size_t base_bytes, const int *axes, int naxes,
             int ddof, int odtype, int ondim, const int *oshape, void *out_host, int donate,
             int iters, float *ms) {
  static int registered;
  if (!registered) {
    nv__gpu_register_reduce(table);
    registered = 1;
  }
  last_msg[0] = 0;
  if (prim < 0 || !table[prim]) {
    snprintf(last_msg, sizeof last_msg, "no kernel for primitive %d", prim);
    return -1;
  }
  pool.next = 0;
  hrx_buffer *ib = pool_get(base_bytes ? base_bytes : 1, 0);
  if (!ib) {
    snprintf(last_msg, sizeof last_msg, "out of device memory");
    return -1;
  }
  hrx_buffer in_buf = *ib;
  in_buf.size = base_bytes ? base_bytes : 1;
  cudaMemcpy(in_buf.dev, base, base_bytes, cudaMemcpyHostToDevice);
  nv__buffer buf;
  memset(&buf, 0, sizeof buf);
  buf.ptr = in_buf.dev;
  buf.nbytes = base_bytes;
  buf.ctx = &in_buf;

  int64_t xst[NV__MAX_DIMS];
  int xsh[NV__MAX_DIMS];
  nv__output x;
  memset(&x, 0, sizeof x);
  x.dtype = (nv_dtype)dtype;
  x.ndim = ndim;
  x.size = 1;
  for (int i = 0; i < ndim; i++) {
    xsh[i] = shape[i];
    xst[i] = strides[i];
    x.size *= shape[i];
  }
  x.shape = xsh;
  x.strides = xst;
  nv__operand op = {&x, &buf, offset};

  size_t psize = sizeof(nv__rows_params) + NV__MAX_DIMS * sizeof(int);
  nv__node *node = calloc(1, sizeof(nv__node) + sizeof(nv__output));
  void *params = calloc(1, psize);
  int64_t ost[NV__MAX_DIMS];
  int osh[NV__MAX_DIMS];
  nv__output *o = &node->out[0];
  o->dtype = (nv_dtype)odtype;
  o->ndim = ondim;
  o->size = 1;
  for (int i = ondim - 1; i >= 0; i--) {
    osh[i] = oshape[i];
    ost[i] = o->size;
    o->size *= oshape[i];
  }
  o->shape = osh;
  o->strides = ost;
  node->prim = prim;
  node->noutputs = 1;
  node->params = params;
  bool rows = prim != NV__PRIM_SUM && prim != NV__PRIM_PROD && prim != NV__PRIM_MAX &&
              prim != NV__PRIM_MIN && prim != NV__PRIM_ALL && prim != NV__PRIM_ANY &&
              prim != NV__PRIM_MEAN && prim != NV__PRIM_COUNT_NONZERO;
  if (rows) {
    nv__rows_params *rp = params;
    rp->ddof = ddof;
    rp->naxes = naxes;
    for (int i = 0; i < naxes; i++) rp->axes[i] = axes[i];
  } else {
    nv__reduce_params *rp = params;
    rp->naxes = naxes;
    for (int i = 0; i < naxes; i++) rp->axes[i] = axes[i];
  }
  if (donate) o->buf = &buf;

  int launches = -1;
  cudaEvent_t e0 = NULL, e1 = NULL;
  for (int it = 0; it <= iters; it++) {
    if (it == 1) {
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      cudaEventRecord(e0, 0);
    }
    pool.next = 1;
    if (donate) /* every run starts from the input */
      cudaMemcpy(in_buf.dev, base, base_bytes, cudaMemcpyHostToDevice);
    nv__gpu_ctx c;
    memset(&c, 0, sizeof c);
    nv_status st = table[prim](&c, node, &op, donate ? 0 : -1);
    if (st != NV_OK) {
      snprintf(last_msg, sizeof last_msg, "kernel failed (%d): %s", (int)st, c.msg);
      launches = -1;
      goto done;
    }
    launches = c.launches;
    if (it == 0) {
      cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        snprintf(last_msg, sizeof last_msg, "run: %s", cudaGetErrorString(e));
        launches = -1;
        goto done;
      }
      size_t bytes = (size_t)o->size * nv_dtype_size(o->dtype);
      if (bytes && c.have_out) {
        hrx_view v = c.out;
        cudaMemcpy(out_host, (char *)v.buffer->dev + v.offset, bytes, cudaMemcpyDeviceToHost);
      }
    }
  }
  if (iters > 0) {
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    *ms = t / (float)iters;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      snprintf(last_msg, sizeof last_msg, "timed runs: %s", cudaGetErrorString(e));
      launches = -1;
    }
  }
done:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  free(params);
  free(node);
  return launches;
}
