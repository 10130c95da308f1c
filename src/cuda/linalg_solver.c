/* The decompositions on the GPU: cuSOLVER (potrf, getrf, geqrf + orgqr, syevd / heevd,
 * gesvdj, Xgeev) and cuBLAS (trsm), with the layout kernels of linalg_solver.cu around the
 * library calls. cholesky, solve_triangular and lu_factor on cuBLAS's batched getrf are one
 * captured operation each (nv__gpu_captured: part of the evaluation's CUDA graph). svd, eigh,
 * eig, qr and cuSOLVER's getrf are one hrx scoped callback each (hrx_graph_scoped: a region of
 * their own, run on an hrx worker on this file's own stream and waited for there): cuSOLVER's
 * Jacobi SVD and its eigensolvers (Xgeev has a host workspace) may wait on the host inside the
 * call, which a stream capture forbids, and the others failed to instantiate once captured
 * (ls_is_scoped). Either way nothing reads results on the host: the solvers' info
 * outputs stay on the device, where a kernel turns a nonzero one (or a NaN found in the input)
 * into the NaN results of ops/linalg_decomp_params.h, as the CPU kernels do.
 *
 * Layouts. Inputs are read row-contiguous (nv__gpu_input_contiguous). A row-major matrix is
 * the column-major matrix of its transpose, which cuSOLVER and cuBLAS see: cholesky, eigh and
 * solve_triangular use that directly (the triangle argument flipped; trsm solves xᵀ aᵀ = bᵀ from
 * the right), svd factors aᵀ (so Vh comes out in place and U is one transpose away), and
 * lu_factor, qr and eig transpose into a column-major copy first.
 *
 * Batches. potrf and trsm use the batched routines (pointer arrays written by a kernel in the
 * capture) for several matrices of order up to LS_BATCHED_MAX, and lu_factor (square), eigh
 * and svd the small-matrix batched ones (getrfBatched, syevjBatched, gesvdjBatched) up to
 * LS_SMALL_MAX; otherwise one call per matrix (qr and eig always).
 *
 * Library state: one cuSOLVER and one cuBLAS handle and one stream per device, made on first
 * use under a lock (and given a warm-up so that their lazy allocations happen outside any
 * capture). A capture or scoped callback holds the device's run lock while it sets the
 * handles' stream and enqueues its calls, so two threads never share a handle at once.
 * cuSOLVER's workspaces are sized when the node is recorded (the *_bufferSize queries) and come
 * from the node's scratch memory; cuBLAS's is one per device, declared as a binding. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda/cuda_internal.h"
#include "cuda/linalg_solver.h"
#include "ops/linalg_decomp_params.h"

#define LS_MAX_DEVICES 64
#define LS_BLAS_WORKSPACE ((size_t)4 << 20)
/* The batched potrf / trsm routines (pointer arrays) serve batches of matrices up to this
 * order; larger ones are factored one call each, where the single-matrix routines are fast. */
#define LS_BATCHED_MAX 256
/* Batches of matrices up to this order (both sizes for svd) go to the small-matrix batched
 * routines: cuBLAS getrfBatched (square LU), cuSOLVER syevjBatched / heevjBatched and
 * gesvdjBatched (one launch for the whole batch; the Jacobi ones take at most 32). */
#define LS_SMALL_MAX 32

/* ---- Per-device handles ---- */

typedef struct ls_device {
  bool ready;
  int index;
  cusolverDnHandle_t sol;
  cublasHandle_t blas;
  cudaStream_t stream; /* the scoped callbacks' own stream */
  hrx_buffer *blas_ws; /* cuBLAS's workspace (under ls_lock: replaced when poisoned) */
  pthread_mutex_t run; /* held while a capture or a scoped callback uses the handles */
} ls_device;

static pthread_mutex_t ls_lock = PTHREAD_MUTEX_INITIALIZER;
static ls_device ls_devices[LS_MAX_DEVICES];

static nv_status solver_error(const char *op, const char *call, int status) {
  return nv__set_error(NV_ERR_BACKEND, "%s: %s failed with status %d", op, call, status);
}

static nv_status cuda_error(const char *op, const char *call, cudaError_t e) {
  cudaGetLastError();
  return nv__set_error(NV_ERR_BACKEND, "%s: %s failed: %s (%s)", op, call, cudaGetErrorName(e),
                       cudaGetErrorString(e));
}


/* Makes the handles on the current device and runs one tiny factorization on a private
 * stream, waited for: the libraries' first-use allocations happen here, not under capture. */
static nv_status warm_up(ls_device *d, const char *op) {
  cudaStream_t s;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return cuda_error(op, "cudaStreamCreate", e);
  double *m = NULL;
  int *info = NULL;
  nv_status st = NV_OK;
  int lwork = 0;
  if ((e = cudaMalloc((void **)&m, 64 * sizeof(double))) != cudaSuccess ||
      (e = cudaMalloc((void **)&info, sizeof(int))) != cudaSuccess) {
    st = cuda_error(op, "cudaMalloc", e);
    goto done;
  }
  cusolverDnSetStream(d->sol, s);
  cublasSetStream(d->blas, s);
  const double one = 1.0;
  double *ident = m, *ws = m + 4;
  double h[4] = {1, 0, 0, 1};
  if ((e = cudaMemcpyAsync(ident, h, sizeof h, cudaMemcpyHostToDevice, s)) != cudaSuccess) {
    st = cuda_error(op, "cudaMemcpyAsync", e);
    goto done;
  }
  cusolverStatus_t cs = cusolverDnDpotrf_bufferSize(d->sol, CUBLAS_FILL_MODE_LOWER, 2, ident, 2,
                                                    &lwork);
  if (cs == CUSOLVER_STATUS_SUCCESS && lwork <= 60)
    cs = cusolverDnDpotrf(d->sol, CUBLAS_FILL_MODE_LOWER, 2, ident, 2, ws, lwork, info);
  if (cs != CUSOLVER_STATUS_SUCCESS) {
    st = solver_error(op, "cusolverDnDpotrf (warm-up)", (int)cs);
    goto done;
  }
  /* The 64-bit API's first call too (cholesky's single matrices), on the identity again. */
  cusolverDnParams_t xp = NULL;
  size_t dws = 0, hws = 0;
  if ((cs = cusolverDnCreateParams(&xp)) == CUSOLVER_STATUS_SUCCESS)
    cs = cusolverDnXpotrf_bufferSize(d->sol, xp, CUBLAS_FILL_MODE_LOWER, 2, CUDA_R_64F, ident, 2,
                                     CUDA_R_64F, &dws, &hws);
  if (cs == CUSOLVER_STATUS_SUCCESS && hws == 0 && dws <= 60 * sizeof(double))
    cs = cusolverDnXpotrf(d->sol, xp, CUBLAS_FILL_MODE_LOWER, 2, CUDA_R_64F, ident, 2, CUDA_R_64F,
                          ws, dws, NULL, 0, info);
  if (xp) cusolverDnDestroyParams(xp);
  if (cs != CUSOLVER_STATUS_SUCCESS) {
    st = solver_error(op, "cusolverDnXpotrf (warm-up)", (int)cs);
    goto done;
  }
  cublasStatus_t bs = cublasDtrsm(d->blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                  CUBLAS_DIAG_NON_UNIT, 2, 2, &one, ident, 2, ident, 2);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    st = solver_error(op, "cublasDtrsm (warm-up)", (int)bs);
    goto done;
  }
  if ((e = cudaStreamSynchronize(s)) != cudaSuccess) st = cuda_error(op, "warm-up", e);
done:
  cudaFree(m);
  cudaFree(info);
  cudaStreamDestroy(s);
  return st;
}

/* The device's handles in *out and, when `blas_ws` is not NULL, a new reference to its current
 * cuBLAS workspace (held until hrx has taken its own). */
static nv_status ls_device_get(nv__gpu_ctx *ctx, const char *op, ls_device **out,
                               hrx_buffer **blas_ws) {
  int device = nv__gpu_device_index(ctx);
  if (device < 0 || device >= LS_MAX_DEVICES)
    return nv__set_error(NV_ERR_BACKEND, "%s: GPU %d is past the %d cuSOLVER supports here", op,
                         device, LS_MAX_DEVICES);
  ls_device *d = &ls_devices[device];
  nv_status st = NV_OK;
  pthread_mutex_lock(&ls_lock);
  if (!d->ready) {
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != device) e = cudaSetDevice(device);
    if (e != cudaSuccess) {
      st = cuda_error(op, "cudaSetDevice", e);
    } else {
      cusolverStatus_t cs = cusolverDnCreate(&d->sol);
      cublasStatus_t bs = cs == CUSOLVER_STATUS_SUCCESS ? cublasCreate(&d->blas)
                                                        : CUBLAS_STATUS_NOT_INITIALIZED;
      if (cs != CUSOLVER_STATUS_SUCCESS) st = solver_error(op, "cusolverDnCreate", (int)cs);
      else if (bs != CUBLAS_STATUS_SUCCESS) {
        cusolverDnDestroy(d->sol);
        st = solver_error(op, "cublasCreate", (int)bs);
      } else if ((st = warm_up(d, op)) != NV_OK) {
        cublasDestroy(d->blas);
        cusolverDnDestroy(d->sol);
      } else if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) !=
                 cudaSuccess) {
        cublasDestroy(d->blas);
        cusolverDnDestroy(d->sol);
        st = cuda_error(op, "cudaStreamCreate", e);
      } else {
        pthread_mutex_init(&d->run, NULL);
        d->index = device;
        d->ready = true;
      }
      if (prev >= 0 && prev != device && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
    }
  }
  /* cuBLAS's workspace, shared by the device's trsm calls: an hrx buffer every one declares as
   * a read-write binding, so that hrx orders them as any writers of one buffer. One poisoned by
   * a failed region is replaced (its contents never matter). */
  if (st == NV_OK && blas_ws && d->blas_ws && hrx_buffer_check(d->blas_ws) != HRX_OK) {
    hrx_buffer_release(d->blas_ws);
    d->blas_ws = NULL;
  }
  if (st == NV_OK && blas_ws && !d->blas_ws) {
    hrx_status hs = hrx_buffer_create(nv__gpu_runtime(ctx), HRX_MEMORY_DEVICE, LS_BLAS_WORKSPACE,
                                      &d->blas_ws);
    if (hs != HRX_OK) {
      d->blas_ws = NULL;
      st = nv__set_error(hs == HRX_E_OUT_OF_MEMORY ? NV_ERR_OUT_OF_MEMORY : NV_ERR_BACKEND,
                         "%s: creating the cuBLAS workspace: %s (%s)", op, hrx_last_error(),
                         hrx_status_name(hs));
    }
  }
  if (st == NV_OK && blas_ws) *blas_ws = hrx_buffer_retain(d->blas_ws);
  pthread_mutex_unlock(&ls_lock);
  if (st == NV_OK) *out = d;
  return st;
}

/* ---- Plans ---- */

/* What a capture enqueues apart from the addresses (the captured operation's key). */
typedef struct ls_key {
  int32_t prim, kind, upper, vectors;
  int64_t batch, m, n, r, k;
  int64_t lwork;                 /* the solver's workspace in elements (bytes for eig) */
  int64_t in_off[2];             /* element offsets of the inputs in their views */
  int64_t work, ws, info, flags; /* byte offsets in the scratch */
  int64_t ptr0, ptr1, tau, aux, rows;
  int32_t nviews, small; /* small: the batched small-matrix routine serves the node */
} ls_key;

typedef struct ls_plan {
  ls_key key;
  ls_device *dev;
  const char *op;
  gesvdjInfo_t svj;       /* svd */
  syevjInfo_t evj;        /* eigh on the small-matrix path */
  cusolverDnParams_t xp;  /* eig */
  void *host_ws;          /* eig: Xgeev's host workspace */
  size_t host_ws_size;
  nv__gpu_note *note;     /* where a failed library call says why */
} ls_plan;

/* A failure inside a capture or a scoped callback reaches the evaluation through the plan's
 * note (nv__gpu_note): the submission fails with this message. */
static hrx_status capture_failed(const ls_plan *p, const char *call, int status) {
  nv__gpu_note_fail(p->note, NV_ERR_BACKEND, "%s on the GPU: %s failed with status %d", p->op,
                    call, status);
  return HRX_E_CUDA;
}

static void plan_free(void *user) {
  ls_plan *p = user;
  if (!p) return;
  if (p->svj) cusolverDnDestroyGesvdjInfo(p->svj);
  if (p->evj) cusolverDnDestroySyevjInfo(p->evj);
  if (p->xp) cusolverDnDestroyParams(p->xp);
  nv__free(p->host_ws);
  nv__gpu_note_release(p->note);
  nv__free(p);
}

static int ls_kind(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT64 ? NV__LS_F64 : dt == NV_DTYPE_COMPLEX64 ? NV__LS_C64 : NV__LS_F32;
}

static size_t kind_size(int kind) {
  return kind == NV__LS_F32 ? 4 : kind == NV__LS_C128 ? 16 : 8;
}

/* Reserves `bytes` at a 256-byte aligned offset of the scratch being laid out. */
static int64_t carve(size_t *total, size_t bytes) {
  size_t at = (*total + 255) & ~(size_t)255;
  *total = at + (bytes ? bytes : 1);
  return (int64_t)at;
}

/* ---- Capture ---- */

typedef struct cap {
  const hrx_callback_view *v;
  const ls_plan *p;
  char *scratch;
  cudaStream_t s;
} cap;

static char *at(const cap *c, int64_t off) { return c->scratch + off; }

#define CK_CUDA(call, what)                                                                    \
  do {                                                                                         \
    int e_ = (call);                                                                           \
    if (e_ != 0) return capture_failed(c->p, what, e_);                                    \
  } while (0)
#define CK_SOL(call, what)                                                                     \
  do {                                                                                         \
    cusolverStatus_t s_ = (call);                                                              \
    if (s_ != CUSOLVER_STATUS_SUCCESS) return capture_failed(c->p, what, (int)s_);          \
  } while (0)
#define CK_BLAS(call, what)                                                                    \
  do {                                                                                         \
    cublasStatus_t s_ = (call);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) return capture_failed(c->p, what, (int)s_);            \
  } while (0)

/* The device address of input i's element 0. */
static const char *input(const cap *c, int i) {
  return (const char *)c->v[i].address + c->p->key.in_off[i] * (int64_t)kind_size(c->p->key.kind);
}

/* cholesky: views a, L, scratch. One matrix at a time (a single matrix, or orders above
 * LS_BATCHED_MAX): a into scratch transposed (column-major a), potrf on its own triangle, and
 * the factor transposed back into L. cuSOLVER's potrf on the natural triangle took 1.92 ms for
 * a float64 4096 on the H200, on the opposite triangle in place (a row-major matrix seen as its
 * transpose) 4.35 ms (bench/gpu/linalg_sweep.cu); the two transposes cost far less. Batches of
 * small matrices: the batched routine in place, on the opposite triangle. */
static hrx_status run_cholesky(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  size_t bytes = (size_t)(k->batch * k->n * k->n) * es;
  char *out = c->v[1].address;
  int *info = (int *)at(c, k->info), *flags = (int *)at(c, k->flags);
  cusolverDnHandle_t h = c->p->dev->sol;
  int n = (int)k->n;
  CK_CUDA(cudaMemsetAsync(flags, 0, sizeof(int) * (size_t)k->batch, c->s), "cudaMemsetAsync");
  if (k->batch > 1 && k->n <= LS_BATCHED_MAX) {
    cublasFillMode_t fill = k->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    CK_CUDA(cudaMemcpyAsync(out, input(c, 0), bytes, cudaMemcpyDeviceToDevice, c->s), "cudaMemcpyAsync");
    void **ptrs = (void **)at(c, k->ptr0);
    CK_CUDA(nv__ls_pointers(c->s, out, (int64_t)(es * (size_t)(n * (int64_t)n)), k->batch, ptrs),
            "pointer kernel");
    if (k->kind == NV__LS_F64)
      CK_SOL(cusolverDnDpotrfBatched(h, fill, n, (double **)ptrs, n, info, (int)k->batch),
             "cusolverDnDpotrfBatched");
    else
      CK_SOL(cusolverDnSpotrfBatched(h, fill, n, (float **)ptrs, n, info, (int)k->batch),
             "cusolverDnSpotrfBatched");
    CK_CUDA(nv__ls_info_flags(c->s, info, k->batch, flags), "info kernel");
  } else {
    cublasFillMode_t fill = k->upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    char *work = at(c, k->work);
    CK_CUDA(nv__ls_transpose(c->s, k->kind, input(c, 0), work, k->batch, k->n, k->n, 0, 0, NULL),
            "transpose kernel");
    for (int64_t b = 0; b < k->batch; b++) {
      char *ob = work + b * (int64_t)n * n * (int64_t)es;
      if (c->p->xp) {
        cudaDataType ta = k->kind == NV__LS_F64 ? CUDA_R_64F : CUDA_R_32F;
        CK_SOL(cusolverDnXpotrf(h, c->p->xp, fill, k->n, ta, ob, k->n, ta, at(c, k->ws),
                                (size_t)k->lwork * es, NULL, 0, info + b),
               "cusolverDnXpotrf");
      } else if (k->kind == NV__LS_F64)
        CK_SOL(cusolverDnDpotrf(h, fill, n, (double *)ob, n, (double *)at(c, k->ws), (int)k->lwork,
                                info + b),
               "cusolverDnDpotrf");
      else
        CK_SOL(cusolverDnSpotrf(h, fill, n, (float *)ob, n, (float *)at(c, k->ws), (int)k->lwork,
                                info + b),
               "cusolverDnSpotrf");
    }
    CK_CUDA(nv__ls_info_flags(c->s, info, k->batch, flags), "info kernel");
    CK_CUDA(nv__ls_transpose(c->s, k->kind, work, out, k->batch, k->n, k->n, 0, 0, flags),
            "transpose kernel");
  }
  CK_CUDA(nv__ls_triangle(c->s, k->kind, out, k->batch, k->n, k->upper, flags), "triangle kernel");
  return HRX_OK;
}

/* lu_factor: views a, LU, pivots, perm, scratch. */
static hrx_status run_lu(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  int m = (int)k->m, n = (int)k->n;
  int64_t mn = k->m * k->n, kk = k->k;
  char *work = at(c, k->work);
  int *ipiv = (int *)at(c, k->aux), *info = (int *)at(c, k->info);
  CK_CUDA(nv__ls_transpose(c->s, k->kind, input(c, 0), work, k->batch, k->m, k->n, 0, 0, NULL),
          "transpose kernel");
  if (k->small) {
    void **ptrs = (void **)at(c, k->ptr0);
    CK_CUDA(nv__ls_pointers(c->s, work, mn * (int64_t)es, k->batch, ptrs), "pointer kernel");
    if (k->kind == NV__LS_F64)
      CK_BLAS(cublasDgetrfBatched(c->p->dev->blas, n, (double *const *)ptrs, n, ipiv, info,
                                  (int)k->batch),
              "cublasDgetrfBatched");
    else
      CK_BLAS(cublasSgetrfBatched(c->p->dev->blas, n, (float *const *)ptrs, n, ipiv, info,
                                  (int)k->batch),
              "cublasSgetrfBatched");
  }
  for (int64_t b = 0; !k->small && mn > 0 && b < k->batch; b++) {
    char *wb = work + b * mn * (int64_t)es;
    if (k->kind == NV__LS_F64)
      CK_SOL(cusolverDnDgetrf(c->p->dev->sol, m, n, (double *)wb, m, (double *)at(c, k->ws),
                              ipiv + b * kk, info + b),
             "cusolverDnDgetrf");
    else
      CK_SOL(cusolverDnSgetrf(c->p->dev->sol, m, n, (float *)wb, m, (float *)at(c, k->ws),
                              ipiv + b * kk, info + b),
             "cusolverDnSgetrf");
  }
  /* Column-major m × n is row-major n × m: its transpose is the row-major LU. */
  CK_CUDA(nv__ls_transpose(c->s, k->kind, work, c->v[1].address, k->batch, k->n, k->m, 0, 0, NULL),
          "transpose kernel");
  CK_CUDA(nv__ls_pivots(c->s, ipiv, k->batch, k->m, kk, c->v[2].address, c->v[3].address,
                        (uint32_t *)at(c, k->rows)),
          "pivot kernel");
  return HRX_OK;
}

/* solve_triangular: views a, x (holding b), cuBLAS's workspace, scratch. */
static hrx_status run_trsm(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  cublasHandle_t h = c->p->dev->blas;
  cublasFillMode_t fill = k->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  int n = (int)k->n, r = (int)k->r;
  const char *a = input(c, 0);
  char *x = c->v[1].address;
  const double one = 1.0;
  const float onef = 1.0f;
  CK_BLAS(cublasSetWorkspace(h, c->v[2].address, c->v[2].length), "cublasSetWorkspace");
  if (k->batch == 1 || k->n > LS_BATCHED_MAX) {
    for (int64_t b = 0; b < k->batch; b++) {
      const char *ab = a + b * (int64_t)n * n * (int64_t)es;
      char *xb = x + b * (int64_t)n * r * (int64_t)es;
      if (k->kind == NV__LS_F64)
        CK_BLAS(cublasDtrsm(h, CUBLAS_SIDE_RIGHT, fill, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, r, n,
                            &one, (const double *)ab, n, (double *)xb, r),
                "cublasDtrsm");
      else
        CK_BLAS(cublasStrsm(h, CUBLAS_SIDE_RIGHT, fill, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, r, n,
                            &onef, (const float *)ab, n, (float *)xb, r),
                "cublasStrsm");
    }
    return HRX_OK;
  }
  void **pa = (void **)at(c, k->ptr0), **px = (void **)at(c, k->ptr1);
  CK_CUDA(nv__ls_pointers(c->s, (void *)a, (int64_t)es * n * (int64_t)n, k->batch, pa),
          "pointer kernel");
  CK_CUDA(nv__ls_pointers(c->s, x, (int64_t)es * n * (int64_t)r, k->batch, px), "pointer kernel");
  if (k->kind == NV__LS_F64)
    CK_BLAS(cublasDtrsmBatched(h, CUBLAS_SIDE_RIGHT, fill, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, r, n,
                               &one, (const double *const *)pa, n, (double *const *)px, r,
                               (int)k->batch),
            "cublasDtrsmBatched");
  else
    CK_BLAS(cublasStrsmBatched(h, CUBLAS_SIDE_RIGHT, fill, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, r, n,
                               &onef, (const float *const *)pa, n, (float *const *)px, r,
                               (int)k->batch),
            "cublasStrsmBatched");
  return HRX_OK;
}

/* qr: views a, Q, R, scratch. */
static hrx_status run_qr(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  int m = (int)k->m, n = (int)k->n, kq = (int)k->k;
  int64_t mn = k->m * k->n;
  char *work = at(c, k->work), *tau = at(c, k->tau), *ws = at(c, k->ws);
  int *info = (int *)at(c, k->info);
  cusolverDnHandle_t h = c->p->dev->sol;
  int lw = (int)k->lwork;
  CK_CUDA(nv__ls_transpose(c->s, k->kind, input(c, 0), work, k->batch, k->m, k->n, 0, 0, NULL),
          "transpose kernel");
  for (int64_t b = 0; b < k->batch; b++) {
    char *wb = work + b * mn * (int64_t)es, *tb = tau + b * kq * (int64_t)es;
    if (k->kind == NV__LS_F64)
      CK_SOL(cusolverDnDgeqrf(h, m, n, (double *)wb, m, (double *)tb, (double *)ws, lw, info),
             "cusolverDnDgeqrf");
    else
      CK_SOL(cusolverDnSgeqrf(h, m, n, (float *)wb, m, (float *)tb, (float *)ws, lw, info),
             "cusolverDnSgeqrf");
  }
  CK_CUDA(nv__ls_qr_r(c->s, k->kind, work, c->v[2].address, k->batch, k->m, k->n, k->k, NULL),
          "R kernel");
  for (int64_t b = 0; b < k->batch; b++) {
    char *wb = work + b * mn * (int64_t)es, *tb = tau + b * kq * (int64_t)es;
    if (k->kind == NV__LS_F64)
      CK_SOL(cusolverDnDorgqr(h, m, kq, kq, (double *)wb, m, (const double *)tb, (double *)ws, lw,
                              info),
             "cusolverDnDorgqr");
    else
      CK_SOL(cusolverDnSorgqr(h, m, kq, kq, (float *)wb, m, (const float *)tb, (float *)ws, lw,
                              info),
             "cusolverDnSorgqr");
  }
  /* Q: the first k columns of each column-major m × n work matrix, i.e. row-major k × m at
   * batch stride m n. */
  CK_CUDA(nv__ls_transpose(c->s, k->kind, work, c->v[1].address, k->batch, k->k, k->m, mn, 0,
                           NULL),
          "transpose kernel");
  return HRX_OK;
}

/* eigh: views a, w, [V], scratch. */
static hrx_status run_eigh(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  int n = (int)k->n;
  int64_t nn = k->n * k->n;
  char *work = at(c, k->work), *ws = at(c, k->ws), *w = c->v[1].address;
  int *info = (int *)at(c, k->info), *flags = (int *)at(c, k->flags);
  cusolverDnHandle_t h = c->p->dev->sol;
  cusolverEigMode_t jobz = k->vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  cublasFillMode_t fill = k->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  int lw = (int)k->lwork;
  size_t rs = k->kind == NV__LS_F64 ? 8 : 4;
  CK_CUDA(cudaMemcpyAsync(work, input(c, 0), (size_t)(k->batch * nn) * es, cudaMemcpyDeviceToDevice,
                          c->s),
          "cudaMemcpyAsync");
  CK_CUDA(cudaMemsetAsync(flags, 0, sizeof(int) * (size_t)k->batch, c->s), "cudaMemsetAsync");
  CK_CUDA(nv__ls_nan_flags(c->s, k->kind, work, k->batch, nn, flags), "NaN kernel");
  if (k->small) {
    syevjInfo_t pj = c->p->evj;
    int nb = (int)k->batch;
    switch (k->kind) {
    case NV__LS_F64:
      CK_SOL(cusolverDnDsyevjBatched(h, jobz, fill, n, (double *)work, n, (double *)w,
                                     (double *)ws, lw, info, pj, nb),
             "cusolverDnDsyevjBatched");
      break;
    case NV__LS_C64:
      CK_SOL(cusolverDnCheevjBatched(h, jobz, fill, n, (cuComplex *)work, n, (float *)w,
                                     (cuComplex *)ws, lw, info, pj, nb),
             "cusolverDnCheevjBatched");
      break;
    default:
      CK_SOL(cusolverDnSsyevjBatched(h, jobz, fill, n, (float *)work, n, (float *)w,
                                     (float *)ws, lw, info, pj, nb),
             "cusolverDnSsyevjBatched");
    }
  }
  for (int64_t b = 0; !k->small && b < k->batch; b++) {
    char *wb = work + b * nn * (int64_t)es, *vb = w + b * k->n * (int64_t)rs;
    switch (k->kind) {
    case NV__LS_F64:
      CK_SOL(cusolverDnDsyevd(h, jobz, fill, n, (double *)wb, n, (double *)vb, (double *)ws, lw,
                              info + b),
             "cusolverDnDsyevd");
      break;
    case NV__LS_C64:
      CK_SOL(cusolverDnCheevd(h, jobz, fill, n, (cuComplex *)wb, n, (float *)vb, (cuComplex *)ws,
                              lw, info + b),
             "cusolverDnCheevd");
      break;
    default:
      CK_SOL(cusolverDnSsyevd(h, jobz, fill, n, (float *)wb, n, (float *)vb, (float *)ws, lw,
                              info + b),
             "cusolverDnSsyevd");
    }
  }
  CK_CUDA(nv__ls_info_flags(c->s, info, k->batch, flags), "info kernel");
  CK_CUDA(nv__ls_nan_values(c->s, k->kind == NV__LS_F64 ? NV__LS_F64 : NV__LS_F32, w, k->batch,
                            k->n, flags),
          "NaN kernel");
  /* Column-major eigenvectors of aᵀ (= a, or conj(a) for Hermitian a) to row-major columns. */
  if (k->vectors)
    CK_CUDA(nv__ls_transpose(c->s, k->kind, work, c->v[2].address, k->batch, k->n, k->n, 0,
                             k->kind == NV__LS_C64, flags),
            "transpose kernel");
  return HRX_OK;
}

/* svd: views a, S or (U, S, Vh), scratch. gesvdj factors b = aᵀ (n × m column-major, the
 * input as it is): b = U_b S V_bᴴ gives a = conj(V_b) S U_bᵀ, so Vh is U_b's buffer read
 * row-major and U the transpose (conjugated) of V_b's. */
static hrx_status run_svd(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind), rs = k->kind == NV__LS_F64 ? 8 : 4;
  int m = (int)k->m, n = (int)k->n;
  int64_t mn = k->m * k->n, mm = k->m * k->m, nn = k->n * k->n, kk = k->k;
  char *work = at(c, k->work), *ws = at(c, k->ws), *vb_all = at(c, k->aux);
  int *info = (int *)at(c, k->info), *flags = (int *)at(c, k->flags);
  char *u = k->vectors ? c->v[1].address : NULL;
  char *s = c->v[k->vectors ? 2 : 1].address;
  char *vh = k->vectors ? c->v[3].address : NULL;
  if (kk == 0) {
    if (k->vectors) {
      CK_CUDA(nv__ls_eye(c->s, k->kind, u, k->batch, k->m), "identity kernel");
      CK_CUDA(nv__ls_eye(c->s, k->kind, vh, k->batch, k->n), "identity kernel");
    }
    return HRX_OK;
  }
  cusolverDnHandle_t h = c->p->dev->sol;
  /* Vectors always: gesvdj without them raised an illegal instruction on the H200 (CUDA 13.0).
   * Without compute_uv they go to the scratch (tau: V's transpose, aux: U's). */
  cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR;
  char *vt_all = k->vectors ? vh : at(c, k->tau);
  int lw = (int)k->lwork;
  CK_CUDA(cudaMemcpyAsync(work, input(c, 0), (size_t)(k->batch * mn) * es, cudaMemcpyDeviceToDevice,
                          c->s),
          "cudaMemcpyAsync");
  CK_CUDA(cudaMemsetAsync(flags, 0, sizeof(int) * (size_t)k->batch, c->s), "cudaMemsetAsync");
  CK_CUDA(nv__ls_nan_flags(c->s, k->kind, work, k->batch, mn, flags), "NaN kernel");
  if (k->small) {
    char *ub = vt_all, *vb = vb_all;
    int nb = (int)k->batch;
    gesvdjInfo_t pj = c->p->svj;
    switch (k->kind) {
    case NV__LS_F64:
      CK_SOL(cusolverDnDgesvdjBatched(h, jobz, n, m, (double *)work, n, (double *)s, (double *)ub,
                                      n, (double *)vb, m, (double *)ws, lw, info, pj, nb),
             "cusolverDnDgesvdjBatched");
      break;
    case NV__LS_C64:
      CK_SOL(cusolverDnCgesvdjBatched(h, jobz, n, m, (cuComplex *)work, n, (float *)s,
                                      (cuComplex *)ub, n, (cuComplex *)vb, m, (cuComplex *)ws, lw,
                                      info, pj, nb),
             "cusolverDnCgesvdjBatched");
      break;
    default:
      CK_SOL(cusolverDnSgesvdjBatched(h, jobz, n, m, (float *)work, n, (float *)s, (float *)ub, n,
                                      (float *)vb, m, (float *)ws, lw, info, pj, nb),
             "cusolverDnSgesvdjBatched");
    }
  }
  for (int64_t b = 0; !k->small && b < k->batch; b++) {
    char *wb = work + b * mn * (int64_t)es, *sb = s + b * kk * (int64_t)rs;
    char *ub = vt_all + b * nn * (int64_t)es, *vb = vb_all + b * mm * (int64_t)es;
    switch (k->kind) {
    case NV__LS_F64:
      CK_SOL(cusolverDnDgesvdj(h, jobz, 0, n, m, (double *)wb, n, (double *)sb, (double *)ub, n,
                               (double *)vb, m, (double *)ws, lw, info + b, c->p->svj),
             "cusolverDnDgesvdj");
      break;
    case NV__LS_C64:
      CK_SOL(cusolverDnCgesvdj(h, jobz, 0, n, m, (cuComplex *)wb, n, (float *)sb, (cuComplex *)ub,
                               n, (cuComplex *)vb, m, (cuComplex *)ws, lw, info + b, c->p->svj),
             "cusolverDnCgesvdj");
      break;
    default:
      CK_SOL(cusolverDnSgesvdj(h, jobz, 0, n, m, (float *)wb, n, (float *)sb, (float *)ub, n,
                               (float *)vb, m, (float *)ws, lw, info + b, c->p->svj),
             "cusolverDnSgesvdj");
    }
  }
  CK_CUDA(nv__ls_info_flags(c->s, info, k->batch, flags), "info kernel");
  CK_CUDA(nv__ls_nan_values(c->s, k->kind == NV__LS_F64 ? NV__LS_F64 : NV__LS_F32, s, k->batch,
                            kk, flags),
          "NaN kernel");
  if (k->vectors) {
    CK_CUDA(nv__ls_transpose(c->s, k->kind, vb_all, u, k->batch, k->m, k->m, 0,
                             k->kind == NV__LS_C64, flags),
            "transpose kernel");
    CK_CUDA(nv__ls_nan_values(c->s, k->kind, vh, k->batch, nn, flags), "NaN kernel");
  }
  return HRX_OK;
}

/* eig: views a, w, [V], scratch. Xgeev on the column-major copy; w and vr in the scratch, then
 * converted to complex64. */
static hrx_status run_eig(const cap *c) {
  const ls_key *k = &c->p->key;
  size_t es = kind_size(k->kind);
  int64_t n = k->n, nn = n * n;
  bool cplx = k->kind == NV__LS_C64;
  int wkind = k->kind == NV__LS_F64 ? NV__LS_C128 : NV__LS_C64;
  size_t wes = kind_size(wkind);
  cudaDataType ta = k->kind == NV__LS_F64 ? CUDA_R_64F : cplx ? CUDA_C_32F : CUDA_R_32F;
  cudaDataType tw = k->kind == NV__LS_F64 ? CUDA_C_64F : CUDA_C_32F;
  char *work = at(c, k->work), *w = at(c, k->tau), *vr = at(c, k->aux), *ws = at(c, k->ws);
  int *info = (int *)at(c, k->info), *flags = (int *)at(c, k->flags);
  cusolverEigMode_t jobvr = k->vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  CK_CUDA(cudaMemsetAsync(flags, 0, sizeof(int) * (size_t)k->batch, c->s), "cudaMemsetAsync");
  CK_CUDA(nv__ls_nan_flags(c->s, k->kind, input(c, 0), k->batch, nn, flags), "NaN kernel");
  CK_CUDA(nv__ls_transpose(c->s, k->kind, input(c, 0), work, k->batch, n, n, 0, 0, NULL),
          "transpose kernel");
  for (int64_t b = 0; b < k->batch; b++)
    CK_SOL(cusolverDnXgeev(c->p->dev->sol, c->p->xp, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, n, ta,
                           work + b * nn * (int64_t)es, n, tw, w + b * n * (int64_t)wes, ta, NULL,
                           1, ta, k->vectors ? vr + b * nn * (int64_t)es : NULL, n, ta, ws,
                           (size_t)k->lwork, c->p->host_ws, c->p->host_ws_size, info + b),
           "cusolverDnXgeev");
  CK_CUDA(nv__ls_info_flags(c->s, info, k->batch, flags), "info kernel");
  CK_CUDA(nv__ls_eig_out(c->s, wkind, w, k->kind, k->vectors ? vr : NULL, c->v[1].address,
                         k->vectors ? c->v[2].address : NULL, k->batch, n, flags),
          "eig output kernel");
  return HRX_OK;
}

static hrx_status run_prim(const cap *c) {
  switch (c->p->key.prim) {
  case NV__PRIM_CHOLESKY: return run_cholesky(c);
  case NV__PRIM_LU_FACTOR: return run_lu(c);
  case NV__PRIM_SOLVE_TRIANGULAR: return run_trsm(c);
  case NV__PRIM_QR: return run_qr(c);
  case NV__PRIM_EIGH: return run_eigh(c);
  case NV__PRIM_SVD: return run_svd(c);
  default: return run_eig(c);
  }
}

/* Whether the node runs as a scoped callback rather than captured (the file comment): svd,
 * eigh, eig, qr and cuSOLVER's getrf. On the H200 (CUDA 13.0) a graph holding a captured
 * getrf of a non-square matrix, or geqrf + orgqr of some shapes, failed to instantiate
 * (cudaErrorNotSupported); potrf, trsm and cuBLAS's batched getrf capture. */
static bool ls_is_scoped(const ls_key *k) {
  return k->prim == NV__PRIM_SVD || k->prim == NV__PRIM_EIGH || k->prim == NV__PRIM_EIG ||
         k->prim == NV__PRIM_QR || (k->prim == NV__PRIM_LU_FACTOR && !k->small);
}

/* The captured operation (cholesky, solve_triangular, lu_factor on cuBLAS's batched getrf),
 * enqueued on hrx's capture stream. */
static hrx_status ls_run(const hrx_callback_view *views, size_t count, void *stream, void *user) {
  const ls_plan *p = user;
  if ((int)count != p->key.nviews) return HRX_E_INVALID;
  cap c = {views, p, views[count - 1].address, (cudaStream_t)stream};
  pthread_mutex_lock(&p->dev->run);
  hrx_status r;
  cusolverStatus_t ss = cusolverDnSetStream(p->dev->sol, c.s);
  cublasStatus_t bs = cublasSetStream(p->dev->blas, c.s);
  if (ss != CUSOLVER_STATUS_SUCCESS) {
    r = capture_failed(p, "cusolverDnSetStream", (int)ss);
  } else if (bs != CUBLAS_STATUS_SUCCESS) {
    r = capture_failed(p, "cublasSetStream", (int)bs);
  } else {
    r = run_prim(&c);
  }
  pthread_mutex_unlock(&p->dev->run);
  return r;
}

/* The scoped callback (ls_is_scoped; cuSOLVER's iterative and hybrid eigensolvers may wait
 * on the host inside the call, which a stream capture forbids): the same work on the device's
 * own stream, waited for before returning, as hrx's scoped callbacks require. */
static hrx_status ls_scoped(const hrx_callback_view *views, size_t count, void *user) {
  const ls_plan *p = user;
  if ((int)count != p->key.nviews) return HRX_E_INVALID;
  cap c = {views, p, views[count - 1].address, p->dev->stream};
  pthread_mutex_lock(&p->dev->run);
  hrx_status r;
  cudaError_t e = cudaSetDevice(p->dev->index);
  cusolverStatus_t ss = e == cudaSuccess ? cusolverDnSetStream(p->dev->sol, c.s)
                                         : CUSOLVER_STATUS_NOT_INITIALIZED;
  cublasStatus_t bs = e == cudaSuccess ? cublasSetStream(p->dev->blas, c.s)
                                       : CUBLAS_STATUS_NOT_INITIALIZED;
  if (e != cudaSuccess) {
    r = capture_failed(p, "cudaSetDevice", (int)e);
  } else if (ss != CUSOLVER_STATUS_SUCCESS) {
    r = capture_failed(p, "cusolverDnSetStream", (int)ss);
  } else if (bs != CUBLAS_STATUS_SUCCESS) {
    r = capture_failed(p, "cublasSetStream", (int)bs);
  } else {
    r = run_prim(&c);
    /* Waited for even after a failed enqueue: nothing of this call may still run. */
    e = cudaStreamSynchronize(c.s);
    if (r == HRX_OK && e != cudaSuccess) r = capture_failed(p, "cudaStreamSynchronize", (int)e);
  }
  pthread_mutex_unlock(&p->dev->run);
  return r;
}

/* Records the scoped callback over the bindings (the plan passes to hrx), as nv__gpu_captured
 * records a captured operation: its function, its plan's key and its buffers enter the
 * recording's structure hash. */
static nv_status record_scoped(nv__gpu_ctx *ctx, const hrx_binding *bind, size_t n, ls_plan *p) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  hrx_status hs = HRX_OK;
  if (st == NV_OK) hs = hrx_graph_scoped(ctx->g, bind, n, ls_scoped, p, plan_free, NULL);
  if (st != NV_OK || hs != HRX_OK) {
    plan_free(p);
    return st != NV_OK ? st : nv__gpu_hrx_error(hs, "recording a cuSOLVER call");
  }
  uint64_t h = 1469598103934665603ull;
  const unsigned char *kb = (const unsigned char *)&p->key;
  for (size_t i = 0; i < sizeof p->key; i++) h = (h ^ kb[i]) * 1099511628211ull;
  nv__gpu_hash(ctx, (uint64_t)(uintptr_t)ls_scoped);
  nv__gpu_hash(ctx, h);
  for (size_t i = 0; i < n; i++) nv__gpu_hash_buffer(ctx, bind[i].view.buffer);
  ctx->nops++;
  return NV_OK;
}

/* ---- Recording ---- */

/* Workspace queries for the plan (host calls on the device's handle, at record time). */
static nv_status size_workspace(ls_plan *p) {
  ls_key *k = &p->key;
  cusolverDnHandle_t h = p->dev->sol;
  int m = (int)k->m, n = (int)k->n, kq = (int)k->k, lw = 0, lw2 = 0;
  cusolverStatus_t s = CUSOLVER_STATUS_SUCCESS;
  bool f64 = k->kind == NV__LS_F64;
  switch (k->prim) {
  case NV__PRIM_CHOLESKY: {
    /* The triangle run_cholesky factors: the natural one of a transposed copy, one matrix at a
     * time; the opposite one in place for the batched routine. */
    bool single = k->batch == 1 || k->n > LS_BATCHED_MAX;
    cublasFillMode_t fill = single == (bool)k->upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    if (single) {
      /* One call per matrix: the 64-bit API (PyTorch's choice), unless it wants host
       * workspace, which a captured call cannot use (the legacy call then). */
      size_t dws = 0, hws = 0;
      cudaDataType ta = f64 ? CUDA_R_64F : CUDA_R_32F;
      s = cusolverDnCreateParams(&p->xp);
      if (s == CUSOLVER_STATUS_SUCCESS)
        s = cusolverDnXpotrf_bufferSize(h, p->xp, fill, k->n, ta, NULL, k->n, ta, &dws, &hws);
      if (s == CUSOLVER_STATUS_SUCCESS && hws == 0) {
        k->lwork = (int64_t)((dws + kind_size(k->kind) - 1) / kind_size(k->kind));
        return NV_OK;
      }
      if (p->xp) cusolverDnDestroyParams(p->xp);
      p->xp = NULL;
    }
    s = f64 ? cusolverDnDpotrf_bufferSize(h, fill, n, NULL, n, &lw)
            : cusolverDnSpotrf_bufferSize(h, fill, n, NULL, n, &lw);
    break;
  }
  case NV__PRIM_LU_FACTOR:
    if (k->m * k->n > 0)
      s = f64 ? cusolverDnDgetrf_bufferSize(h, m, n, NULL, m, &lw)
              : cusolverDnSgetrf_bufferSize(h, m, n, NULL, m, &lw);
    break;
  case NV__PRIM_QR:
    s = f64 ? cusolverDnDgeqrf_bufferSize(h, m, n, NULL, m, &lw)
            : cusolverDnSgeqrf_bufferSize(h, m, n, NULL, m, &lw);
    if (s == CUSOLVER_STATUS_SUCCESS)
      s = f64 ? cusolverDnDorgqr_bufferSize(h, m, kq, kq, NULL, m, NULL, &lw2)
              : cusolverDnSorgqr_bufferSize(h, m, kq, kq, NULL, m, NULL, &lw2);
    if (lw2 > lw) lw = lw2;
    break;
  case NV__PRIM_EIGH: {
    cusolverEigMode_t jobz = k->vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    cublasFillMode_t fill = k->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    if (k->small) {
      int nb = (int)k->batch;
      s = cusolverDnCreateSyevjInfo(&p->evj);
      if (s == CUSOLVER_STATUS_SUCCESS)
        s = f64 ? cusolverDnDsyevjBatched_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw, p->evj, nb)
            : k->kind == NV__LS_C64
                ? cusolverDnCheevjBatched_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw, p->evj, nb)
                : cusolverDnSsyevjBatched_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw, p->evj, nb);
      break;
    }
    s = f64 ? cusolverDnDsyevd_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw)
        : k->kind == NV__LS_C64 ? cusolverDnCheevd_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw)
                                : cusolverDnSsyevd_bufferSize(h, jobz, fill, n, NULL, n, NULL, &lw);
    break;
  }
  case NV__PRIM_SVD: {
    if (k->k == 0) break;
    s = cusolverDnCreateGesvdjInfo(&p->svj);
    if (s != CUSOLVER_STATUS_SUCCESS) break;
    cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR; /* as run_svd */
    if (k->small) {
      int nb = (int)k->batch;
      s = f64 ? cusolverDnDgesvdjBatched_bufferSize(h, jobz, n, m, NULL, n, NULL, NULL, n, NULL, m,
                                                    &lw, p->svj, nb)
          : k->kind == NV__LS_C64
              ? cusolverDnCgesvdjBatched_bufferSize(h, jobz, n, m, NULL, n, NULL, NULL, n, NULL, m,
                                                    &lw, p->svj, nb)
              : cusolverDnSgesvdjBatched_bufferSize(h, jobz, n, m, NULL, n, NULL, NULL, n, NULL, m,
                                                    &lw, p->svj, nb);
      break;
    }
    s = f64 ? cusolverDnDgesvdj_bufferSize(h, jobz, 0, n, m, NULL, n, NULL, NULL, n, NULL, m, &lw,
                                           p->svj)
        : k->kind == NV__LS_C64
            ? cusolverDnCgesvdj_bufferSize(h, jobz, 0, n, m, NULL, n, NULL, NULL, n, NULL, m, &lw,
                                           p->svj)
            : cusolverDnSgesvdj_bufferSize(h, jobz, 0, n, m, NULL, n, NULL, NULL, n, NULL, m, &lw,
                                           p->svj);
    break;
  }
  case NV__PRIM_EIG: {
    s = cusolverDnCreateParams(&p->xp);
    if (s != CUSOLVER_STATUS_SUCCESS) break;
    bool cplx = k->kind == NV__LS_C64;
    cudaDataType ta = f64 ? CUDA_R_64F : cplx ? CUDA_C_32F : CUDA_R_32F;
    cudaDataType tw = f64 ? CUDA_C_64F : CUDA_C_32F;
    size_t dws = 0, hws = 0;
    cusolverEigMode_t jobvr = k->vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    s = cusolverDnXgeev_bufferSize(h, p->xp, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, k->n, ta, NULL,
                                   k->n, tw, NULL, ta, NULL, 1, ta, NULL, k->n, ta, &dws, &hws);
    if (s != CUSOLVER_STATUS_SUCCESS) break;
    k->lwork = (int64_t)dws;
    p->host_ws_size = hws;
    if (hws && !(p->host_ws = nv__malloc(hws)))
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory for cuSOLVER's host workspace",
                           p->op);
    return NV_OK;
  }
  default:
    break;
  }
  if (s != CUSOLVER_STATUS_SUCCESS) return solver_error(p->op, "a cuSOLVER workspace query", (int)s);
  k->lwork = lw;
  return NV_OK;
}

/* The scratch layout of the plan; its total size in *total. */
static void layout(ls_key *k, size_t *total) {
  size_t es = kind_size(k->kind), b = (size_t)k->batch;
  size_t mn = (size_t)(k->m * k->n), nn = (size_t)(k->n * k->n), mm = (size_t)(k->m * k->m);
  *total = 0;
  k->info = carve(total, sizeof(int) * b);
  k->flags = carve(total, sizeof(int) * b);
  switch (k->prim) {
  case NV__PRIM_CHOLESKY:
    k->ws = carve(total, (size_t)k->lwork * es);
    k->ptr0 = carve(total, sizeof(void *) * b);
    if (k->batch == 1 || k->n > LS_BATCHED_MAX) k->work = carve(total, nn * b * es);
    break;
  case NV__PRIM_LU_FACTOR:
    k->ptr0 = carve(total, sizeof(void *) * b);
    k->work = carve(total, mn * b * es);
    k->ws = carve(total, (size_t)k->lwork * es);
    k->aux = carve(total, sizeof(int) * (size_t)k->k * b);
    k->rows = carve(total, sizeof(uint32_t) * (size_t)k->m * b);
    break;
  case NV__PRIM_SOLVE_TRIANGULAR:
    k->ptr0 = carve(total, sizeof(void *) * b);
    k->ptr1 = carve(total, sizeof(void *) * b);
    break;
  case NV__PRIM_QR:
    k->work = carve(total, mn * b * es);
    k->tau = carve(total, (size_t)k->k * b * es);
    k->ws = carve(total, (size_t)k->lwork * es);
    break;
  case NV__PRIM_EIGH:
    k->work = carve(total, nn * b * es);
    k->ws = carve(total, (size_t)k->lwork * es);
    break;
  case NV__PRIM_SVD:
    k->work = carve(total, mn * b * es);
    k->ws = carve(total, (size_t)k->lwork * es);
    k->aux = carve(total, mm * b * es);
    k->tau = carve(total, k->vectors ? 1 : nn * b * es);
    break;
  default: /* eig: w (complex of the compute precision), vr, Xgeev's device workspace (bytes) */
    k->work = carve(total, nn * b * es);
    k->tau = carve(total, (size_t)k->n * b * (k->kind == NV__LS_F64 ? 16 : 8));
    k->aux = carve(total, k->vectors ? nn * b * es : 1);
    k->ws = carve(total, (size_t)k->lwork);
    break;
  }
}

static nv_status k_decomp(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const char *op = nv__prims[node->prim].name;
  const nv__decomp_params *dp = node->params;
  const nv__output *ia = in[0].meta;
  int nout = node->noutputs, nin = node->prim == NV__PRIM_SOLVE_TRIANGULAR ? 2 : 1;
  ls_key key;
  memset(&key, 0, sizeof key);
  key.prim = node->prim;
  key.kind = ls_kind(ia->dtype);
  key.upper = dp->upper;
  key.vectors = dp->vectors;
  key.m = ia->shape[ia->ndim - 2];
  key.n = ia->shape[ia->ndim - 1];
  key.k = key.m < key.n ? key.m : key.n;
  key.batch = 1;
  for (int i = 0; i < ia->ndim - 2; i++) key.batch *= ia->shape[i];
  if (node->prim == NV__PRIM_SOLVE_TRIANGULAR) {
    const nv__output *ib = in[1].meta;
    key.r = ib->shape[ib->ndim - 1];
  }
  nv__gpu_arg outs[3];
  for (int i = 0; i < nout; i++) {
    nv_status st = nv__gpu_output(ctx, &node->out[i], &outs[i]);
    if (st != NV_OK) return st;
  }
  /* Nothing to write (every output empty): nothing to record. lu_factor of an empty matrix
   * still writes its permutation, and svd of one its identities. */
  bool empty = true;
  for (int i = 0; i < nout; i++) empty = empty && node->out[i].size == 0;
  if (empty) return NV_OK;
  if (key.m > INT_MAX || key.n > INT_MAX || key.batch > INT_MAX || key.r > INT_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: matrices and batches past 2^31 are not supported on the GPU", op);
  nv__gpu_arg ins[2];
  for (int i = 0; i < nin; i++) {
    nv_status st = nv__gpu_input_contiguous(ctx, &in[i], &ins[i]);
    if (st != NV_OK) return st;
    key.in_off[i] = ins[i].offset;
  }
  /* The small-matrix batched routines: several matrices of order <= LS_SMALL_MAX (lu_factor:
   * square ones; svd: both sizes, and not empty). */
  bool few = key.batch > 1 && key.m <= LS_SMALL_MAX && key.n <= LS_SMALL_MAX;
  key.small = few && ((node->prim == NV__PRIM_LU_FACTOR && key.m == key.n) ||
                      node->prim == NV__PRIM_EIGH || (node->prim == NV__PRIM_SVD && key.k > 0));
  ls_plan *p = nv__calloc(1, sizeof *p);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  p->op = op;
  if (!(p->note = nv__gpu_note_take(ctx))) {
    nv__free(p);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  hrx_buffer *blas_ws = NULL;
  bool trsm = node->prim == NV__PRIM_SOLVE_TRIANGULAR;
  nv_status st = ls_device_get(ctx, op, &p->dev, trsm ? &blas_ws : NULL);
  p->key = key;
  if (st == NV_OK && !trsm) st = size_workspace(p);
  size_t total = 0;
  hrx_view scratch;
  if (st == NV_OK) {
    layout(&p->key, &total);
    st = nv__gpu_scratch(ctx, total, &scratch);
  }
  if (st == NV_OK && trsm) {
    /* x starts as b: a device copy of b's bytes into the output, solved in place. */
    size_t bytes = (size_t)node->out[0].size * kind_size(p->key.kind);
    hrx_view src = hrx_view_make(ins[1].view.buffer,
                                 ins[1].view.offset + (size_t)ins[1].offset * kind_size(p->key.kind),
                                 bytes);
    hrx_view dst = hrx_view_make(outs[0].view.buffer, outs[0].view.offset, bytes);
    st = nv__gpu_copy(ctx, dst, src);
  }
  if (st != NV_OK) {
    plan_free(p);
    hrx_buffer_release(blas_ws);
    return st;
  }
  hrx_binding bind[6];
  int nb = 0;
  bind[nb++] = (hrx_binding){ins[0].view, HRX_ACCESS_READ};
  if (trsm) {
    bind[nb++] = (hrx_binding){outs[0].view, HRX_ACCESS_READ_WRITE};
    bind[nb++] = (hrx_binding){hrx_view_whole(blas_ws), HRX_ACCESS_READ_WRITE};
  } else {
    for (int i = 0; i < nout; i++) bind[nb++] = (hrx_binding){outs[i].view, HRX_ACCESS_WRITE};
  }
  bind[nb++] = (hrx_binding){scratch, HRX_ACCESS_READ_WRITE};
  p->key.nviews = nb;
  if (ls_is_scoped(&p->key)) return record_scoped(ctx, bind, (size_t)nb, p);
  ls_key kcopy = p->key;
  st = nv__gpu_captured(ctx, bind, (size_t)nb, ls_run, p, plan_free, &kcopy, sizeof kcopy);
  hrx_buffer_release(blas_ws); /* hrx holds its own reference once recorded */
  return st;
}

void nv__gpu_register_linalg_decomp(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_CHOLESKY] = k_decomp;
  k[NV__PRIM_LU_FACTOR] = k_decomp;
  k[NV__PRIM_SOLVE_TRIANGULAR] = k_decomp;
  k[NV__PRIM_QR] = k_decomp;
  k[NV__PRIM_SVD] = k_decomp;
  k[NV__PRIM_EIGH] = k_decomp;
  k[NV__PRIM_EIG] = k_decomp;
}
