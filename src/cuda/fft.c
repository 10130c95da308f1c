/* The fft primitive on the GPU through cuFFT. The input is made row-contiguous first (a strided
 * copy into scratch memory when it is not: the builders move the transformed axis last as a
 * view), so every transform is cuFFT's basic batched layout: `batch` rows of the input length,
 * written to the row-contiguous output. C2R overwrites its input in cuFFT, so its input is
 * always a scratch copy; an R2C input that is not 8-byte aligned is copied too.
 *
 * Plans are created when the node is recorded (cufftMakePlanMany64 with auto-allocation off,
 * so the work area is this node's scratch memory) and cached by (device, kind, n, batch); they
 * hold their twiddles in device memory for the graphs that captured them, so cached plans live
 * as long as the process. Past FFT_CACHE plans a node gets its own plan, destroyed with its
 * captured operation. The execution is an hrx captured operation (nv__gpu_captured):
 * cufftSetStream, cufftSetWorkArea and cufftExec* enqueue the transform on the capturing
 * stream, under the plan's lock (a plan's stream and work area are its state). The norm's
 * factor is one in-place scale kernel (fft.cu) after the transform. C2R's copy has the
 * imaginary parts of its real bins zeroed first (the CPU ignores them; cuFFT would not), and
 * one-point transforms are one small kernel (no plan). */
#include <cuda_runtime.h>
#include <cufft.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda/fft_kernels.h"
#include "cuda/gpu.h"
#include "ops/fft_params.h"

#define FFT_CACHE 256

typedef struct gpu_plan {
  int device, kind;
  int64_t n, batch;
  cufftHandle handle;
  size_t work;
  bool cached;
  pthread_mutex_t lock;
} gpu_plan;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static gpu_plan *cache[FFT_CACHE];
static int cached;

static const char *cufft_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "cuFFT error";
  }
}

static nv_status cufft_error(const char *call, cufftResult r, int64_t n, int64_t batch) {
  return nv__set_error(r == CUFFT_ALLOC_FAILED ? NV_ERR_OUT_OF_MEMORY : NV_ERR_BACKEND,
                       "fft: %s failed: %s (%d) for length %lld, batch %lld", call,
                       cufft_name(r), (int)r, (long long)n, (long long)batch);
}

static void plan_destroy(gpu_plan *p) {
  cufftDestroy(p->handle); /* nothing to report at teardown: the handle is gone either way */
  pthread_mutex_destroy(&p->lock);
  nv__free(p);
}

static cufftType plan_type(int kind) {
  return kind == NV__FFT_R2C ? CUFFT_R2C : kind == NV__FFT_C2R ? CUFFT_C2R : CUFFT_C2C;
}

/* A new plan for `batch` rows of length n on `device`. */
static nv_status plan_create(int device, int kind, int64_t n, int64_t batch, gpu_plan **out) {
  gpu_plan *p = nv__malloc(sizeof *p);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "fft: out of memory for a cuFFT plan");
  memset(p, 0, sizeof *p);
  p->device = device;
  p->kind = kind;
  p->n = n;
  p->batch = batch;
  int prev = -1;
  cudaError_t e = cudaGetDevice(&prev);
  if (e == cudaSuccess && prev != device) e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    nv__free(p);
    return nv__set_error(NV_ERR_BACKEND, "fft: cudaSetDevice(%d) failed: %s", device,
                         cudaGetErrorString(e));
  }
  nv_status st = NV_OK;
  cufftResult r = cufftCreate(&p->handle);
  if (r != CUFFT_SUCCESS) {
    st = cufft_error("cufftCreate", r, n, batch);
  } else {
    long long len = n;
    r = cufftSetAutoAllocation(p->handle, 0);
    if (r == CUFFT_SUCCESS)
      r = cufftMakePlanMany64(p->handle, 1, &len, NULL, 1, 0, NULL, 1, 0, plan_type(kind),
                              (long long)batch, &p->work);
    if (r != CUFFT_SUCCESS) {
      st = cufft_error("cufftMakePlanMany64", r, n, batch);
      cufftDestroy(p->handle);
    }
  }
  if (prev >= 0 && prev != device && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
  if (st != NV_OK) {
    nv__free(p);
    return st;
  }
  pthread_mutex_init(&p->lock, NULL);
  *out = p;
  return NV_OK;
}

/* The cached plan (or, with the cache full, a new uncached one the caller's operation owns). */
static nv_status plan_get(int device, int kind, int64_t n, int64_t batch, gpu_plan **out) {
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < cached; i++) {
    gpu_plan *p = cache[i];
    if (p->device == device && p->kind == kind && p->n == n && p->batch == batch) {
      pthread_mutex_unlock(&cache_lock);
      *out = p;
      return NV_OK;
    }
  }
  /* Created under the lock: two recordings of one shape then share one plan. */
  gpu_plan *p = NULL;
  nv_status st = plan_create(device, kind, n, batch, &p);
  if (st == NV_OK && cached < FFT_CACHE) {
    p->cached = true;
    cache[cached++] = p;
  }
  pthread_mutex_unlock(&cache_lock);
  if (st == NV_OK) *out = p;
  return st;
}

/* What the captured operation needs apart from the views' addresses. */
typedef struct fft_work {
  gpu_plan *plan;
  int64_t in_off, out_off; /* bytes from the views' starts to the data */
} fft_work;

static void work_destroy(void *user) {
  fft_work *w = user;
  if (!w->plan->cached) plan_destroy(w->plan);
  nv__free(w);
}

/* Enqueues the transform on the capturing stream: views are the input, the output and the
 * work area. A failure reaches the evaluation only as hrx's status, so cuFFT's is printed. */
static hrx_status fft_run(const hrx_callback_view *views, size_t count, void *stream,
                          void *user) {
  fft_work *w = user;
  gpu_plan *p = w->plan;
  if (count != 3 || views[2].length < p->work) return HRX_E_INVALID;
  char *in = (char *)views[0].address + w->in_off, *out = (char *)views[1].address + w->out_off;
  pthread_mutex_lock(&p->lock);
  const char *call = "cufftSetStream";
  cufftResult r = cufftSetStream(p->handle, (cudaStream_t)stream);
  if (r == CUFFT_SUCCESS) {
    call = "cufftSetWorkArea";
    r = cufftSetWorkArea(p->handle, views[2].address);
  }
  if (r == CUFFT_SUCCESS) {
    switch (p->kind) {
      case NV__FFT_R2C:
        call = "cufftExecR2C";
        r = cufftExecR2C(p->handle, (cufftReal *)in, (cufftComplex *)out);
        break;
      case NV__FFT_C2R:
        call = "cufftExecC2R";
        r = cufftExecC2R(p->handle, (cufftComplex *)in, (cufftReal *)out);
        break;
      default:
        call = "cufftExecC2C";
        r = cufftExecC2C(p->handle, (cufftComplex *)in, (cufftComplex *)out,
                         p->kind == NV__FFT_C2C_INVERSE ? CUFFT_INVERSE : CUFFT_FORWARD);
        break;
    }
  }
  pthread_mutex_unlock(&p->lock);
  if (r != CUFFT_SUCCESS) {
    fprintf(stderr, "nuvec: fft on the GPU: %s failed: %s (%d) for length %lld, batch %lld\n",
            call, cufft_name(r), (int)r, (long long)p->n, (long long)p->batch);
    return HRX_E_CUDA;
  }
  return HRX_OK;
}

/* A scratch copy of the `bytes` bytes of `src` from element `off` (of `esize` bytes). */
static nv_status scratch_copy(nv__gpu_ctx *ctx, nv__gpu_arg *src, size_t esize, size_t bytes) {
  hrx_view dst;
  nv_status st = nv__gpu_scratch(ctx, bytes, &dst);
  if (st != NV_OK) return st;
  hrx_view from = hrx_view_make(src->view.buffer, src->view.offset + (size_t)src->offset * esize,
                                bytes);
  st = nv__gpu_copy(ctx, dst, from);
  if (st != NV_OK) return st;
  src->view = dst;
  src->offset = 0;
  return NV_OK;
}

/* One-point transforms (cuFFT plans need n >= 2): a copy, a real-to-complex widening or the real
 * part, scaled, in one kernel. */
static nv_status one_point(nv__gpu_ctx *ctx, const nv__fft_params *prm, nv__gpu_arg x,
                           nv__gpu_arg o, size_t esize, size_t osize, int64_t batch) {
  nv__gpu_fft_one_params p = {
      .in_off = x.offset * (int64_t)(esize / sizeof(float)),
      .out_off = o.offset * (int64_t)(osize / sizeof(float)),
      .rows = batch,
      .kind = prm->kind == NV__FFT_R2C   ? NV__GPU_FFT_ONE_R2C
              : prm->kind == NV__FFT_C2R ? NV__GPU_FFT_ONE_C2R
                                         : NV__GPU_FFT_ONE_C2C,
      .scale = (float)prm->scale};
  hrx_view views[2] = {x.view, o.view};
  hrx_access acc[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return nv__gpu_dispatch_1d(ctx, "fft", nv__gpu_kernel_fft_one(),
                             nv__gpu_blocks(batch, NV__GPU_FFT_SCALE_THREADS, 65535),
                             NV__GPU_FFT_SCALE_THREADS, views, acc, 2, &p, sizeof p);
}

static nv_status k_fft(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated; /* the primitive takes no donation */
  const nv__fft_params *prm = node->params;
  nv__output *out = &node->out[0];
  nv__gpu_arg o, x;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  int64_t batch = out->size / out->shape[out->ndim - 1];
  st = nv__gpu_input_contiguous(ctx, &in[0], &x);
  if (st != NV_OK) return st;
  size_t esize = nv_dtype_size(in[0].meta->dtype), osize = nv_dtype_size(out->dtype);
  if (prm->n == 1) return one_point(ctx, prm, x, o, esize, osize, batch);
  size_t in_bytes = (size_t)in[0].meta->size * esize;
  bool own_copy = !(in[0].meta->flags & NV__FLAG_ROW); /* input_contiguous made a scratch copy */
  bool misaligned = (x.view.offset + (size_t)x.offset * esize) % 8 != 0;
  if (!own_copy && (prm->kind == NV__FFT_C2R || misaligned)) {
    st = scratch_copy(ctx, &x, esize, in_bytes);
    if (st != NV_OK) return st;
  }
  if (prm->kind == NV__FFT_C2R) {
    /* Bin 0 and (even n) bin n/2 are real in a Hermitian spectrum: their imaginary parts are
     * ignored, as on the CPU (cuFFT's C2R would mix them into the result). */
    int64_t m = in[0].meta->shape[in[0].meta->ndim - 1];
    nv__gpu_fft_herm_params hp = {.offset = x.offset * 2, .rows = batch, .m = m,
                                  .even = prm->n % 2 == 0};
    hrx_access acc = HRX_ACCESS_READ_WRITE;
    st = nv__gpu_dispatch_1d(ctx, "fft", nv__gpu_kernel_fft_hermitian(),
                             nv__gpu_blocks(batch, NV__GPU_FFT_SCALE_THREADS, 65535),
                             NV__GPU_FFT_SCALE_THREADS, &x.view, &acc, 1, &hp, sizeof hp);
    if (st != NV_OK) return st;
  }
  gpu_plan *plan = NULL;
  st = plan_get(nv__gpu_device_index(ctx), prm->kind, prm->n, batch, &plan);
  if (st != NV_OK) return st;
  hrx_view work;
  st = nv__gpu_scratch(ctx, plan->work > 0 ? plan->work : 1, &work);
  fft_work *w = st == NV_OK ? nv__malloc(sizeof *w) : NULL;
  if (!w) {
    if (!plan->cached) plan_destroy(plan);
    return st != NV_OK ? st : nv__set_error(NV_ERR_OUT_OF_MEMORY, "fft: out of memory");
  }
  *w = (fft_work){plan, x.offset * (int64_t)esize, o.offset * (int64_t)osize};
  hrx_binding bind[3] = {
      {x.view, prm->kind == NV__FFT_C2R ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_READ},
      {o.view, HRX_ACCESS_WRITE},
      {work, HRX_ACCESS_READ_WRITE},
  };
  fft_work key = *w;
  st = nv__gpu_captured(ctx, bind, 3, fft_run, w, work_destroy, &key, sizeof key);
  if (st != NV_OK || prm->scale == 1.0) return st;
  nv__gpu_fft_scale_params sp = {.offset = o.offset * (int64_t)(osize / sizeof(float)),
                                 .count = out->size * (int64_t)(osize / sizeof(float)),
                                 .scale = (float)prm->scale};
  hrx_access acc = HRX_ACCESS_READ_WRITE;
  uint32_t blocks = nv__gpu_blocks(sp.count, NV__GPU_FFT_SCALE_THREADS, 65535);
  return nv__gpu_dispatch_1d(ctx, "fft", nv__gpu_kernel_fft_scale(), blocks,
                             NV__GPU_FFT_SCALE_THREADS, &o.view, &acc, 1, &sp, sizeof sp);
}

void nv__gpu_register_fft(nv__gpu_kernel_fn *k) { k[NV__PRIM_FFT] = k_fft; }
