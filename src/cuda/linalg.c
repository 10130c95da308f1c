/* matmul, addmm and vecdot on the GPU. Float products (float16, bfloat16, float32, float64,
 * complex64) go to cuBLASLt as captured operations (nv__gpu_captured: part of the evaluation's
 * native CUDA graph, no host round trip); integer products to the exact tiled kernel of
 * linalg_int.cu; vecdot and addmm's beta * c to linalg_vec.cu.
 *
 * Row-major operands in cuBLASLt's column-major terms. A row-major R x C matrix with leading
 * dimension ld is, read column-major, its transpose: a C x R matrix with the same ld. So the
 * row-major product D = A B (A: M x K, B: K x N, D: M x N contiguous) is computed as the
 * column-major product Dᵀ = Bᵀ Aᵀ, i.e. cuBLASLt's (m, n, k) = (N, M, K) with its "A" our B
 * and its "B" our A:
 *   cuBLASLt A (m x k = N x K) = our B:
 *     B row-major (col stride 1, row stride ldb >= N): column-major N x K, ld ldb, op N
 *     B column-major (row stride 1, col stride ldb >= K): column-major K x N, ld ldb, op T
 *   cuBLASLt B (k x n = K x M) = our A:
 *     A row-major (ld lda >= K): column-major K x M, ld lda, op N
 *     A column-major (ld lda >= M): column-major M x K, ld lda, op T
 *   cuBLASLt C = D (n x m... as column-major N x M, ld N): our row-major D. C is D itself.
 * Axes of size 1 take any stride (CPU's blas_layout). An operand no layout fits (negative,
 * zero or overlapping strides inside a matrix, negative batch strides) is copied contiguous
 * first. Batches: the output's batch axes, with each operand's strides right-aligned (0 where it
 * broadcasts), are folded; the innermost folded axis is cuBLASLt's strided batch (count and
 * per-operand element strides, 0 allowed), the others are looped inside the capture. A b
 * shared by every batch with a's batches stacked at a uniform row stride is one product with
 * M x batch rows (fewer, larger calls; the CPU's fold_batches).
 *
 * addmm: beta != 0 copies c broadcast into D first (a strided copy kernel), then cuBLASLt runs
 * in place with C = D and beta; beta == 0 never reads c (cuBLASLt does not read C when beta is
 * 0); alpha == 0 or K == 0 computes no product: D = beta * c (or zeros when beta is 0 too).
 *
 * Precision: float32 without TF32 (CUBLAS_COMPUTE_32F) unless NUVEC_ENABLE_TF32=1 or
 * MLX_ENABLE_TF32=1 (CUBLAS_COMPUTE_32F_FAST_TF32, also for complex64); float16/bfloat16
 * accumulate in float32, with split-K partial sums kept in float32 too (the reduction scheme
 * restricted to the compute type), then round once as the CPU's; float64 in float64.
 *
 * cuBLASLt state: one handle and one 32 MiB workspace per device, made on first use under a
 * lock. The workspace is an hrx buffer that every product declares as a read-write binding:
 * captured products of one graph, and of graphs in flight at once, then never use it at the
 * same time, because hrx orders them by that access as it orders any writers of one buffer.
 * A workspace poisoned by a failed region is replaced (its contents never matter). Algorithms
 * come from cublasLtMatmulAlgoGetHeuristic (several asked for, the first usable taken), chosen
 * when the node is recorded (so a failure is an error of the node with cuBLASLt's status name)
 * and cached by (dtype, compute type, ops, sizes, leading dimensions, batch, strides, pointer
 * alignments). */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>

#include "core/strided.h"
#include "cuda/copy.h"
#include "cuda/linalg_kernels.h"
#include "ops/linalg_params.h"

#define LT_WORKSPACE ((size_t)32 << 20)
#define LT_MAX_DEVICES 64
#define LT_CACHE 128
#define LT_HEURISTICS 8

/* ---- Errors ---- */

static nv_status lt_error(const char *op, const char *call, cublasStatus_t s) {
  return nv__set_error(NV_ERR_BACKEND, "%s: %s failed: %s (%s)", op, call,
                       cublasLtGetStatusName(s), cublasLtGetStatusString(s));
}

static nv_status cuda_error(const char *op, const char *call, cudaError_t e) {
  cudaGetLastError(); /* a failed call leaves a non-sticky error that later checks would see */
  return nv__set_error(NV_ERR_BACKEND, "%s: %s failed: %s (%s)", op, call, cudaGetErrorName(e),
                       cudaGetErrorString(e));
}

/* A failure inside the capture function reaches the evaluation only as hrx's status (the
 * preparation fails with "captured operation N: its function failed"), so cuBLASLt's own words
 * are written to stderr. */
static hrx_status callback_failed(const char *op, const char *call, const char *status,
                                  const char *text) {
  fprintf(stderr, "nuvec: %s on the GPU: %s failed: %s (%s)\n", op, call, status, text);
  return HRX_E_CUDA;
}

/* ---- Per-device cuBLASLt state ---- */

typedef struct lt_device {
  bool ready;
  cublasLtHandle_t handle;
  hrx_buffer *workspace; /* under lt_lock: replaced when poisoned */
} lt_device;

/* Guards the devices' state and the algorithm cache. */
static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_device lt_devices[LT_MAX_DEVICES];

/* Runs with `device` current on the calling thread, restoring the previous one. */
typedef struct device_scope {
  int prev;
} device_scope;

static cudaError_t device_enter(device_scope *s, int device) {
  s->prev = -1;
  cudaError_t e = cudaGetDevice(&s->prev);
  if (e == cudaSuccess && s->prev != device) e = cudaSetDevice(device);
  return e;
}

/* Restores the previous device; a failure there leaves the thread on `device`, which every
 * caller sets again before its own CUDA work, so it is only cleared. */
static void device_leave(const device_scope *s, int device) {
  if (s->prev >= 0 && s->prev != device && cudaSetDevice(s->prev) != cudaSuccess)
    cudaGetLastError();
}

/* The device's cuBLASLt state, made on first use, and a new reference to its current
 * workspace in *workspace (the recording holds it until hrx has taken its own). */
static nv_status lt_device_get(nv__gpu_ctx *ctx, const char *op, lt_device **out,
                               hrx_buffer **workspace) {
  int device = nv__gpu_device_index(ctx);
  if (device < 0 || device >= LT_MAX_DEVICES)
    return nv__set_error(NV_ERR_BACKEND, "%s: GPU %d is past the %d cuBLASLt supports here", op,
                         device, LT_MAX_DEVICES);
  lt_device *d = &lt_devices[device];
  nv_status st = NV_OK;
  pthread_mutex_lock(&lt_lock);
  if (!d->ready) {
    device_scope ds;
    cudaError_t e = device_enter(&ds, device);
    cublasStatus_t s;
    if (e != cudaSuccess) {
      st = cuda_error(op, "cudaSetDevice", e);
    } else if ((s = cublasLtCreate(&d->handle)) != CUBLAS_STATUS_SUCCESS) {
      st = lt_error(op, "cublasLtCreate", s);
    } else {
      d->ready = true;
    }
    device_leave(&ds, device);
  }
  /* Graphs that used a poisoned workspace keep their reference; new work gets a fresh one. */
  if (st == NV_OK && d->workspace && hrx_buffer_check(d->workspace) != HRX_OK) {
    hrx_buffer_release(d->workspace);
    d->workspace = NULL;
  }
  if (st == NV_OK && !d->workspace) {
    hrx_status hs = hrx_buffer_create(nv__gpu_runtime(ctx), HRX_MEMORY_DEVICE, LT_WORKSPACE,
                                      &d->workspace);
    if (hs != HRX_OK) {
      d->workspace = NULL;
      st = nv__set_error(hs == HRX_E_OUT_OF_MEMORY ? NV_ERR_OUT_OF_MEMORY : NV_ERR_BACKEND,
                         "%s: creating the cuBLASLt workspace: %s (%s)", op, hrx_last_error(),
                         hrx_status_name(hs));
    }
  }
  if (st == NV_OK) *workspace = hrx_buffer_retain(d->workspace);
  pthread_mutex_unlock(&lt_lock);
  if (st == NV_OK) *out = d;
  return st;
}

/* ---- TF32 opt-in ---- */

static pthread_once_t tf32_once = PTHREAD_ONCE_INIT;
static bool tf32_on;
static void tf32_read(void) {
  tf32_on = nv__env_long("NUVEC_ENABLE_TF32", 0) == 1 || nv__env_long("MLX_ENABLE_TF32", 0) == 1;
}

/* ---- Plans ---- */

/* What the algorithm choice depends on (zero-filled, compared with memcmp). */
typedef struct lt_key {
  int32_t dtype, compute, opa, opb;
  int64_t m, n, k, lda, ldb, ldd;
  int64_t batch, sta, stb, std;
  uint32_t align_a, align_b, align_d;
  int32_t pad_;
} lt_key;

typedef struct lt_entry {
  bool used;
  lt_key key;
  cublasLtMatmulAlgo_t algo;
} lt_entry;

static lt_entry lt_cache[LT_CACHE];
static unsigned lt_next; /* round-robin replacement */

/* One product node's call: descriptors, algorithm, scalars, where the operands are inside the
 * capture's bindings (0: cuBLASLt's A = our b; 1: cuBLASLt's B = our a; 2: D; 3: the
 * workspace), and the batch axes the capture loops over. */
typedef struct lt_plan {
  const char *op;
  int device;
  lt_device *dev;
  lt_key key;
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulDescOpaque_t desc;
  cublasLtMatrixLayoutOpaque_t la, lb, ld;
  union {
    float f[2];
    double d;
  } alpha, beta;
  int esize;
  int64_t off[3];
  int nouter;
  int64_t oshape[NV__MAX_DIMS], ost[3][NV__MAX_DIMS];
} lt_plan;

static void plan_free(void *p) { nv__free(p); }

/* A plan's work apart from the operands' addresses, as the key of its captured operation:
 * plain data, followed by the batch axes' shape and their strides per operand. */
typedef struct lt_work {
  lt_key key;
  cublasLtMatmulAlgo_t algo;
  uint64_t alpha, beta;
  int32_t esize, nouter;
  int64_t off[3];
} lt_work;

/* The largest power of two (at most 256) dividing the address and every nonzero byte stride. */
static uint32_t alignment(uint64_t addr, const int64_t *st, int n, int esize) {
  uint64_t x = addr;
  for (int i = 0; i < n; i++) x |= (uint64_t)(st[i] < 0 ? -st[i] : st[i]) * (uint64_t)esize;
  uint64_t a = x & (~x + 1);
  return x == 0 || a > 256 ? 256u : (uint32_t)a;
}

/* The algorithm for p->key (cached, else asked of the heuristic). NV_ERR_UNSUPPORTED (no
 * message) when cuBLASLt offers none for the layout. Called under lt_lock. */
static nv_status algo_locked(lt_plan *p) {
  for (int i = 0; i < LT_CACHE; i++)
    if (lt_cache[i].used && !memcmp(&lt_cache[i].key, &p->key, sizeof p->key)) {
      p->algo = lt_cache[i].algo;
      return NV_OK;
    }
  cublasLtMatmulPreferenceOpaque_t pref;
  cublasStatus_t s = cublasLtMatmulPreferenceInit(&pref);
  uint64_t ws = LT_WORKSPACE;
  uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  bool narrow = p->key.dtype == NV_DTYPE_FLOAT16 || p->key.dtype == NV_DTYPE_BFLOAT16;
  const struct {
    cublasLtMatmulPreferenceAttributes_t attr;
    const void *v;
    size_t size;
    bool set;
  } attrs[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws, true},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p->key.align_a, sizeof(uint32_t), true},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p->key.align_b, sizeof(uint32_t), true},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &p->key.align_d, sizeof(uint32_t), true},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p->key.align_d, sizeof(uint32_t), true},
      {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask, narrow},
  };
  for (size_t i = 0; s == CUBLAS_STATUS_SUCCESS && i < sizeof attrs / sizeof *attrs; i++)
    if (attrs[i].set)
      s = cublasLtMatmulPreferenceSetAttribute(&pref, attrs[i].attr, attrs[i].v, attrs[i].size);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(p->op, "cublasLtMatmulPreferenceSetAttribute", s);
  cublasLtMatmulHeuristicResult_t res[LT_HEURISTICS];
  int count = 0;
  device_scope dsc;
  cudaError_t e = device_enter(&dsc, p->device);
  if (e != cudaSuccess) return cuda_error(p->op, "cudaSetDevice", e);
  s = cublasLtMatmulAlgoGetHeuristic(p->dev->handle, &p->desc, &p->la, &p->lb, &p->ld, &p->ld,
                                     &pref, LT_HEURISTICS, res, &count);
  device_leave(&dsc, p->device);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) return NV_ERR_UNSUPPORTED;
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(p->op, "cublasLtMatmulAlgoGetHeuristic", s);
  int pick = -1;
  for (int i = 0; i < count && pick < 0; i++)
    if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= LT_WORKSPACE) pick = i;
  if (pick < 0) return NV_ERR_UNSUPPORTED;
  p->algo = res[pick].algo;
  lt_entry *en = &lt_cache[lt_next++ % LT_CACHE];
  en->used = true;
  en->key = p->key;
  en->algo = p->algo;
  return NV_OK;
}

static nv_status plan_algo(lt_plan *p) {
  pthread_mutex_lock(&lt_lock);
  nv_status st = algo_locked(p);
  pthread_mutex_unlock(&lt_lock);
  return st;
}

/* The capture function: one cuBLASLt call per looped batch index, enqueued on hrx's capture
 * stream (the calls become the graph's nodes). Nothing here waits or allocates: the workspace
 * is binding 3, which orders the products that share it. */
static hrx_status lt_run(const hrx_callback_view *views, size_t count, void *stream, void *user) {
  lt_plan *p = user;
  if (count != 4 || views[3].length < LT_WORKSPACE) return HRX_E_INVALID;
  const size_t es = (size_t)p->esize;
  char *base[3];
  for (int i = 0; i < 3; i++) base[i] = (char *)views[i].address + (size_t)p->off[i] * es;
  /* The addresses are the recorded ones; should an update have moved them to a less aligned
   * place, the algorithm is chosen again for the alignment they have (host work only, so it
   * is allowed under capture). */
  const int64_t *outer[3] = {p->ost[0], p->ost[1], p->ost[2]};
  int64_t bst[3][NV__MAX_DIMS + 1];
  uint32_t al[3];
  for (int i = 0; i < 3; i++) {
    memcpy(bst[i], outer[i], (size_t)p->nouter * sizeof(int64_t));
    bst[i][p->nouter] = i == 0 ? p->key.sta : i == 1 ? p->key.stb : p->key.std;
    al[i] = alignment((uint64_t)(uintptr_t)base[i], bst[i], p->nouter + 1, p->esize);
  }
  if (al[0] < p->key.align_a || al[1] < p->key.align_b || al[2] < p->key.align_d) {
    p->key.align_a = al[0];
    p->key.align_b = al[1];
    p->key.align_d = al[2];
    if (plan_algo(p) != NV_OK)
      return callback_failed(p->op, "cublasLtMatmulAlgoGetHeuristic", "no algorithm",
                             "for the updated operands' alignment");
  }
  int64_t total = 1;
  for (int i = 0; i < p->nouter; i++) total *= p->oshape[i];
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  for (int64_t t = 0; t < total && s == CUBLAS_STATUS_SUCCESS; t++) {
    int64_t r = t, o[3] = {0, 0, 0};
    for (int d = p->nouter - 1; d >= 0; d--) {
      int64_t q = r / p->oshape[d], idx = r - q * p->oshape[d];
      for (int i = 0; i < 3; i++) o[i] += idx * p->ost[i][d];
      r = q;
    }
    char *d = base[2] + o[2] * (int64_t)es;
    s = cublasLtMatmul(p->dev->handle, &p->desc, &p->alpha, base[0] + o[0] * (int64_t)es, &p->la,
                       base[1] + o[1] * (int64_t)es, &p->lb, &p->beta, d, &p->ld, d, &p->ld,
                       &p->algo, views[3].address, LT_WORKSPACE, (cudaStream_t)stream);
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    return callback_failed(p->op, "cublasLtMatmul", cublasLtGetStatusName(s),
                           cublasLtGetStatusString(s));
  return HRX_OK;
}

/* ---- Operands ---- */

/* A matrix operand: its device argument, its matrices (rows x cols at strides rs, cs) and its
 * batch strides over the output's batch axes (right-aligned; 0 where it broadcasts). */
typedef struct mm_operand {
  nv__gpu_arg arg;
  int64_t rows, cols, rs, cs;
  int64_t bst[NV__MAX_DIMS];
} mm_operand;

static void operand_strides(const nv__output *m, const int64_t *st, const nv__output *out,
                            int tail, mm_operand *o) {
  int nd = m->ndim, nb = out->ndim - 2, mb = nd - tail;
  o->rows = tail == 2 ? m->shape[nd - 2] : 1;
  o->cols = m->shape[nd - 1];
  o->rs = tail == 2 ? st[nd - 2] : 0;
  o->cs = st[nd - 1];
  for (int i = 0; i < nb; i++) {
    int j = i - (nb - mb);
    o->bst[i] = j < 0 || m->shape[j] != out->shape[i] ? 0 : st[j];
  }
}

static void row_strides(const nv__output *m, int64_t *st) {
  int64_t s = 1;
  for (int i = m->ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= m->shape[i];
  }
}

/* Whether rows x cols matrices at strides (rs, cs) are read in place by cuBLASLt: row-major
 * with ld >= cols (*row), or column-major with ld >= rows. Size-1 axes take any stride. */
static bool lt_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *row,
                      int64_t *ld) {
  int64_t need_n = cols > 1 ? cols : 1, need_t = rows > 1 ? rows : 1;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= need_n)) {
    *row = true;
    *ld = rows <= 1 ? need_n : rs;
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= need_t)) {
    *row = false;
    *ld = cols <= 1 ? need_t : cs;
    return true;
  }
  return false;
}

/* Operand `op` as cuBLASLt reads it, copied contiguous first when its layout does not fit (or
 * when `force`). */
static nv_status lt_operand(nv__gpu_ctx *ctx, const nv__operand *op, const nv__output *out,
                            bool force, mm_operand *o, bool *row, int64_t *ld) {
  nv_status st = nv__gpu_input(ctx, op, &o->arg);
  if (st != NV_OK) return st;
  operand_strides(op->meta, op->meta->strides, out, 2, o);
  bool ok = !force && lt_layout(o->rows, o->cols, o->rs, o->cs, row, ld);
  for (int i = 0; ok && i < out->ndim - 2; i++) ok = o->bst[i] >= 0;
  if (ok) return NV_OK;
  if (force || !(op->meta->flags & NV__FLAG_ROW)) {
    /* A fresh contiguous copy (scratch memory: aligned, offset 0). */
    const nv__output *m = op->meta;
    size_t bytes = (size_t)m->size * nv_dtype_size(m->dtype);
    nv__gpu_arg d = {.offset = 0};
    if ((st = nv__gpu_scratch(ctx, bytes ? bytes : 1, &d.view)) != NV_OK ||
        (st = nv__gpu_copy_contiguous(ctx, op, d)) != NV_OK)
      return st;
    o->arg = d;
  }
  int64_t rst[NV__MAX_DIMS];
  row_strides(op->meta, rst);
  operand_strides(op->meta, rst, out, 2, o);
  lt_layout(o->rows, o->cols, o->rs, o->cs, row, ld);
  return NV_OK;
}

static uint64_t gpu_address(const nv__gpu_arg *a, int esize) {
  uint64_t base = 0;
  /* Unknown (cannot happen for a GPU view): assume the least alignment. */
  if (hrx_buffer_gpu_address(a->view.buffer, &base) != HRX_OK) base = 1;
  return base + a->view.offset + (uint64_t)a->offset * (uint64_t)esize;
}

/* ---- Batches ---- */

/* The output's batch axes folded over the strides of a, b and the contiguous output. */
typedef struct mm_batch {
  int nd;
  int64_t shape[NV__MAX_DIMS];
  int64_t st[3][NV__MAX_DIMS]; /* a, b, d */
} mm_batch;

static void batch_fold(const nv__output *out, int tail, const int64_t *sa, const int64_t *sb,
                       mm_batch *b) {
  int nb = out->ndim - tail;
  int64_t sd[NV__MAX_DIMS], s = 1;
  for (int i = out->ndim - 1; i >= 0; i--) {
    if (i < nb) sd[i] = s;
    s *= out->shape[i];
  }
  const int64_t *in[3] = {sa, sb, sd};
  int64_t *o[3] = {b->st[0], b->st[1], b->st[2]};
  b->nd = nv__collapse(out->shape, nb, in, 3, b->shape, o);
}

/* ---- The cuBLASLt product ---- */

static cudaDataType_t lt_type(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return CUDA_R_16F;
    case NV_DTYPE_BFLOAT16: return CUDA_R_16BF;
    case NV_DTYPE_FLOAT64: return CUDA_R_64F;
    case NV_DTYPE_COMPLEX64: return CUDA_C_32F;
    default: return CUDA_R_32F;
  }
}

static nv_status layout_init(const char *op, cublasLtMatrixLayoutOpaque_t *l, cudaDataType_t t,
                             int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                             int64_t stride) {
  cublasStatus_t s = cublasLtMatrixLayoutInit(l, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
    int32_t count = (int32_t)batch;
    s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                         sizeof count);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof stride);
  }
  return s == CUBLAS_STATUS_SUCCESS ? NV_OK : lt_error(op, "cublasLtMatrixLayoutInit", s);
}

/* Records D = alpha A B + beta D (D already holds c when beta != 0) through cuBLASLt, with the
 * device's state and a reference to its workspace held (lt_product). `force` copies both
 * operands contiguous (the retry when no algorithm fits their layout). */
static nv_status lt_record(nv__gpu_ctx *ctx, const char *op, nv__output *out, nv__gpu_arg d,
                           const nv__operand *ina, const nv__operand *inb, double alpha,
                           double beta, bool force, lt_device *dev, hrx_buffer *ws) {
  nv_status st;
  nv_dtype dt = out->dtype;
  int es = (int)nv_dtype_size(dt);
  mm_operand a, b;
  bool arow, brow;
  int64_t lda, ldb;
  if ((st = lt_operand(ctx, ina, out, force, &a, &arow, &lda)) != NV_OK ||
      (st = lt_operand(ctx, inb, out, force, &b, &brow, &ldb)) != NV_OK)
    return st;
  int64_t M = out->shape[out->ndim - 2], N = out->shape[out->ndim - 1], K = a.cols;
  mm_batch bt;
  batch_fold(out, 2, a.bst, b.bst, &bt);
  int last = bt.nd - 1;
  int64_t count = bt.shape[last];
  /* A b shared by all batches, a's batches stacked at a uniform row stride: M x batch rows. */
  if (bt.nd == 1 && count > 1 && bt.st[1][0] == 0 && arow &&
      (M == 1 ? bt.st[0][0] >= (K > 1 ? K : 1) : bt.st[0][0] == M * lda)) {
    if (M == 1) lda = bt.st[0][0];
    M *= count;
    count = 1;
    bt.shape[0] = 1;
  }
  /* cuBLASLt's batch count is 32-bit: a larger innermost axis is looped as well. */
  int nouter = count > INT32_MAX ? bt.nd : bt.nd - 1;
  if (count > INT32_MAX) count = 1;

  lt_plan *p = nv__calloc(1, sizeof *p);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  p->op = op;
  p->device = nv__gpu_device_index(ctx);
  p->dev = dev;
  p->esize = es;
  p->nouter = nouter;
  for (int i = 0; i < nouter; i++) {
    p->oshape[i] = bt.shape[i];
    for (int k = 0; k < 3; k++) p->ost[k][i] = bt.st[k == 0 ? 1 : k == 1 ? 0 : 2][i];
  }
  /* Bindings: 0 = cuBLASLt's A (our b), 1 = cuBLASLt's B (our a), 2 = D. */
  p->off[0] = b.arg.offset;
  p->off[1] = a.arg.offset;
  p->off[2] = d.offset;
  pthread_once(&tf32_once, tf32_read);
  cublasComputeType_t compute = dt == NV_DTYPE_FLOAT64 ? CUBLAS_COMPUTE_64F
                                : tf32_on && (dt == NV_DTYPE_FLOAT32 || dt == NV_DTYPE_COMPLEX64)
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  cudaDataType_t type = lt_type(dt);
  cudaDataType_t scale = dt == NV_DTYPE_FLOAT64     ? CUDA_R_64F
                         : dt == NV_DTYPE_COMPLEX64 ? CUDA_C_32F
                                                    : CUDA_R_32F;
  if (dt == NV_DTYPE_FLOAT64) {
    p->alpha.d = alpha;
    p->beta.d = beta;
  } else {
    p->alpha.f[0] = (float)alpha;
    p->beta.f[0] = (float)beta;
  }
  lt_key *k = &p->key;
  k->dtype = (int32_t)dt;
  k->compute = (int32_t)compute;
  k->opa = brow ? CUBLAS_OP_N : CUBLAS_OP_T;
  k->opb = arow ? CUBLAS_OP_N : CUBLAS_OP_T;
  k->m = N;
  k->n = M;
  k->k = K;
  k->lda = ldb;
  k->ldb = lda;
  k->ldd = N;
  k->batch = count;
  k->sta = count > 1 ? bt.st[1][last] : 0;
  k->stb = count > 1 ? bt.st[0][last] : 0;
  k->std = count > 1 ? bt.st[2][last] : 0;
  int64_t sa_all[NV__MAX_DIMS + 1], sb_all[NV__MAX_DIMS + 1], sd_all[NV__MAX_DIMS + 1];
  for (int i = 0; i < nouter; i++) {
    sa_all[i] = p->ost[0][i];
    sb_all[i] = p->ost[1][i];
    sd_all[i] = p->ost[2][i];
  }
  sa_all[nouter] = k->sta;
  sb_all[nouter] = k->stb;
  sd_all[nouter] = k->std;
  k->align_a = alignment(gpu_address(&b.arg, es), sa_all, nouter + 1, es);
  k->align_b = alignment(gpu_address(&a.arg, es), sb_all, nouter + 1, es);
  k->align_d = alignment(gpu_address(&d, es), sd_all, nouter + 1, es);

  cublasOperation_t opa = (cublasOperation_t)k->opa, opb = (cublasOperation_t)k->opb;
  cublasStatus_t s = cublasLtMatmulDescInit(&p->desc, compute, scale);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
  if (s != CUBLAS_STATUS_SUCCESS) st = lt_error(op, "cublasLtMatmulDescInit", s);
  /* cuBLASLt's A: N x K (op N) or K x N (op T); its B: K x M (op N) or M x K (op T). */
  if (st == NV_OK)
    st = layout_init(op, &p->la, type, brow ? N : K, brow ? K : N, ldb, count, k->sta);
  if (st == NV_OK)
    st = layout_init(op, &p->lb, type, arow ? K : M, arow ? M : K, lda, count, k->stb);
  if (st == NV_OK) st = layout_init(op, &p->ld, type, N, M, N, count, k->std);
  if (st == NV_OK) st = plan_algo(p);
  if (st == NV_ERR_UNSUPPORTED) {
    nv__free(p);
    if (!force) return lt_record(ctx, op, out, d, ina, inb, alpha, beta, true, dev, ws);
    char sh[NV__SHAPE_BUF];
    return nv__set_error(NV_ERR_BACKEND,
                         "%s: cuBLASLt has no algorithm for %s %s (K %lld) even with contiguous "
                         "operands",
                         op, nv_dtype_name(dt), nv__shape_str(out->shape, out->ndim, sh, sizeof sh),
                         (long long)K);
  }
  if (st != NV_OK) {
    nv__free(p);
    return st;
  }
  hrx_binding bind[4] = {
      {b.arg.view, HRX_ACCESS_READ},
      {a.arg.view, HRX_ACCESS_READ},
      {d.view, beta != 0 ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_WRITE},
      {hrx_view_whole(ws), HRX_ACCESS_READ_WRITE},
  };
  /* What the capture enqueues apart from the addresses: the plan without its descriptors
   * (which follow from the key, and are opaque), then the batch axes' shape and strides. The
   * plan is zeroed at allocation, so padding and unused scalar halves compare equal. */
  unsigned char w[sizeof(lt_work) + 4 * NV__MAX_DIMS * sizeof(int64_t)];
  lt_work head;
  memset(&head, 0, sizeof head);
  head.key = p->key;
  head.algo = p->algo;
  memcpy(&head.alpha, &p->alpha, sizeof head.alpha);
  memcpy(&head.beta, &p->beta, sizeof head.beta);
  head.esize = p->esize;
  head.nouter = p->nouter;
  memcpy(head.off, p->off, sizeof head.off);
  size_t wsize = 0, axes = (size_t)p->nouter * sizeof(int64_t);
  memcpy(w, &head, sizeof head);
  wsize += sizeof head;
  memcpy(w + wsize, p->oshape, axes);
  wsize += axes;
  for (int j = 0; j < 3; j++, wsize += axes) memcpy(w + wsize, p->ost[j], axes);
  return nv__gpu_captured(ctx, bind, 4, lt_run, p, plan_free, w, wsize);
}

/* lt_record with the device's cuBLASLt state; the workspace reference is dropped once hrx holds
 * its own (or the recording failed). */
static nv_status lt_product(nv__gpu_ctx *ctx, const char *op, nv__output *out, nv__gpu_arg d,
                            const nv__operand *ina, const nv__operand *inb, double alpha,
                            double beta, bool force) {
  lt_device *dev = NULL;
  hrx_buffer *ws = NULL;
  nv_status st = lt_device_get(ctx, op, &dev, &ws);
  if (st != NV_OK) return st;
  st = lt_record(ctx, op, out, d, ina, inb, alpha, beta, force, dev, ws);
  hrx_buffer_release(ws);
  return st;
}

/* ---- Integer products ---- */

static nv_status dispatch(nv__gpu_ctx *ctx, const void *func, const uint32_t grid[3],
                          uint32_t threads, const hrx_view *views, const hrx_access *acc, int n,
                          const void *params, size_t size) {
  nv__gpu_launch l = {.func = func,
                      .grid = {grid[0], grid[1], grid[2]},
                      .block = {threads, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = n,
                      .params = params,
                      .params_size = size};
  return nv__gpu_dispatch(ctx, &l);
}

/* Fills a kernel's batch from folded dims [first, nd) of `bt`. */
static void kernel_batch(const mm_batch *bt, int first, nv__gpu_batch *kb) {
  memset(kb, 0, sizeof *kb);
  kb->nd = bt->nd - first;
  kb->count = 1;
  for (int i = first; i < bt->nd; i++) {
    kb->shape[i - first] = bt->shape[i];
    kb->sa[i - first] = bt->st[0][i];
    kb->sb[i - first] = bt->st[1][i];
    kb->count *= bt->shape[i];
  }
}

/* The offsets of outer batch index t over folded dims [0, first) of `bt`. */
static void outer_offsets(const mm_batch *bt, int first, int64_t t, int64_t o[3]) {
  o[0] = o[1] = o[2] = 0;
  for (int d = first - 1; d >= 0; d--) {
    int64_t q = t / bt->shape[d], idx = t - q * bt->shape[d];
    for (int i = 0; i < 3; i++) o[i] += idx * bt->st[i][d];
    t = q;
  }
}

static nv_status int_product(nv__gpu_ctx *ctx, nv__output *out, nv__gpu_arg d,
                             const nv__operand *ina, const nv__operand *inb) {
  const void *func = nv__gpu_kernel_igemm((int)out->dtype);
  if (!func)
    return nv__set_error(NV_ERR_BACKEND, "matmul: no GPU integer kernel for %s",
                         nv_dtype_name(out->dtype));
  mm_operand a, b;
  nv_status st;
  if ((st = nv__gpu_input(ctx, ina, &a.arg)) != NV_OK ||
      (st = nv__gpu_input(ctx, inb, &b.arg)) != NV_OK)
    return st;
  operand_strides(ina->meta, ina->meta->strides, out, 2, &a);
  operand_strides(inb->meta, inb->meta->strides, out, 2, &b);
  mm_batch bt;
  batch_fold(out, 2, a.bst, b.bst, &bt);
  int first = bt.nd > NV__GPU_BATCH_DIMS ? bt.nd - NV__GPU_BATCH_DIMS : 0;
  nv__gpu_igemm_params p = {.M = out->shape[out->ndim - 2], .N = out->shape[out->ndim - 1],
                            .K = a.cols, .rsa = a.rs, .csa = a.cs, .rsb = b.rs, .csb = b.cs};
  kernel_batch(&bt, first, &p.bt);
  int64_t outer = 1;
  for (int i = 0; i < first; i++) outer *= bt.shape[i];
  uint32_t grid[3] = {(uint32_t)((p.N + NV__GPU_IGEMM_TILE - 1) / NV__GPU_IGEMM_TILE),
                      (uint32_t)((p.M + NV__GPU_IGEMM_TILE - 1) / NV__GPU_IGEMM_TILE),
                      (uint32_t)(p.bt.count < 65535 ? p.bt.count : 65535)};
  if (p.M > (int64_t)65535 * NV__GPU_IGEMM_TILE)
    return nv__set_error(NV_ERR_UNSUPPORTED, "matmul: %lld rows exceed the GPU integer kernel's grid",
                         (long long)p.M);
  hrx_view views[3] = {a.arg.view, b.arg.view, d.view};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  for (int64_t t = 0; t < outer && st == NV_OK; t++) {
    int64_t o[3];
    outer_offsets(&bt, first, t, o);
    p.aoff = a.arg.offset + o[0];
    p.boff = b.arg.offset + o[1];
    p.doff = d.offset + o[2];
    st = dispatch(ctx, func, grid, NV__GPU_IGEMM_THREADS, views, acc, 3, &p, sizeof p);
  }
  return st;
}

/* ---- matmul and addmm ---- */

/* d = beta * c (c broadcast to the output), or zeros when beta is 0: no product computed. */
static nv_status scaled_c(nv__gpu_ctx *ctx, nv__output *out, nv__gpu_arg d, const nv__operand *c,
                          double beta) {
  int es = (int)nv_dtype_size(out->dtype);
  if (!c || beta == 0) {
    hrx_view v = d.view;
    v.offset += (size_t)d.offset * (size_t)es;
    v.length = (size_t)out->size * (size_t)es;
    return nv__gpu_fill(ctx, v, 0);
  }
  nv__gpu_arg s;
  nv_status st = nv__gpu_input(ctx, c, &s);
  if (st != NV_OK) return st;
  int64_t bst[NV__MAX_DIMS], rst[NV__MAX_DIMS], cs[NV__MAX_DIMS], css[NV__MAX_DIMS],
      cds[NV__MAX_DIMS];
  nv__gpu_broadcast_strides(c->meta, out->shape, out->ndim, bst);
  row_strides(out, rst);
  const int64_t *in[2] = {bst, rst};
  int64_t *o[2] = {css, cds};
  int nd = nv__collapse(out->shape, out->ndim, in, 2, cs, o);
  nv__gpu_scale_params p = {.dtype = (int32_t)out->dtype, .nd = nd, .beta = beta,
                            .soff = s.offset, .doff = d.offset, .n = out->size};
  if (nd > 8) {
    /* Too many folded dims for the kernel: c broadcast into d first, then scaled in place. */
    if ((st = nv__gpu_copy_strided(ctx, es, out->shape, out->ndim, s, bst, d, rst,
                                   HRX_ACCESS_WRITE)) != NV_OK)
      return st;
    s = d;
    p.soff = d.offset;
    p.nd = 1;
    cs[0] = out->size;
    css[0] = 1;
  }
  for (int i = 0; i < p.nd; i++) {
    p.shape[i] = cs[i];
    p.sst[i] = css[i];
  }
  int64_t blocks = (out->size + NV__GPU_SCALE_THREADS - 1) / NV__GPU_SCALE_THREADS;
  uint32_t grid[3] = {(uint32_t)(blocks < 8192 ? blocks : 8192), 1, 1};
  bool same = s.view.buffer == d.view.buffer;
  hrx_view views[2] = {s.view, d.view};
  hrx_access acc[2] = {HRX_ACCESS_READ, same ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_WRITE};
  nv__gpu_launch l = {.func = nv__gpu_kernel_scale(),
                      .grid = {grid[0], 1, 1},
                      .block = {NV__GPU_SCALE_THREADS, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 2,
                      .params = &p,
                      .params_size = sizeof p,
                      .aliasing = same};
  return nv__gpu_dispatch(ctx, &l);
}

static nv_status product_kernel(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                bool addmm) {
  const char *op = addmm ? "addmm" : "matmul";
  nv__output *out = &node->out[0];
  nv__gpu_arg d;
  nv_status st = nv__gpu_output(ctx, out, &d);
  if (st != NV_OK || out->size == 0) return st;
  const nv__operand *a = &in[addmm], *b = &in[addmm + 1], *c = addmm ? &in[0] : NULL;
  double alpha = 1, beta = 0;
  if (addmm) {
    const nv__addmm_params *p = node->params;
    alpha = p->alpha;
    beta = p->beta;
  }
  int64_t K = a->meta->shape[a->meta->ndim - 1];
  if (K == 0 || alpha == 0) return scaled_c(ctx, out, d, c, beta);
  if (nv_issubdtype(out->dtype, NV_CATEGORY_INTEGER)) return int_product(ctx, out, d, a, b);
  if (c && beta != 0) {
    /* D starts as c broadcast to the output; cuBLASLt then adds alpha A B to beta D. */
    nv__gpu_arg s;
    int64_t bst[NV__MAX_DIMS], rst[NV__MAX_DIMS];
    if ((st = nv__gpu_input(ctx, c, &s)) != NV_OK) return st;
    nv__gpu_broadcast_strides(c->meta, out->shape, out->ndim, bst);
    row_strides(out, rst);
    if ((st = nv__gpu_copy_strided(ctx, (int)nv_dtype_size(out->dtype), out->shape, out->ndim, s,
                                   bst, d, rst, HRX_ACCESS_WRITE)) != NV_OK)
      return st;
  }
  return lt_product(ctx, op, out, d, a, b, alpha, c ? beta : 0, false);
}

static nv_status k_matmul(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return product_kernel(ctx, node, in, false);
}

static nv_status k_addmm(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return product_kernel(ctx, node, in, true);
}

/* ---- vecdot ---- */

static nv_status k_vecdot(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg d;
  nv_status st = nv__gpu_output(ctx, out, &d);
  if (st != NV_OK || out->size == 0) return st;
  const void *func = nv__gpu_kernel_vecdot((int)out->dtype);
  if (!func)
    return nv__set_error(NV_ERR_BACKEND, "vecdot: no GPU kernel for %s", nv_dtype_name(out->dtype));
  int64_t K = in[0].meta->shape[in[0].meta->ndim - 1];
  if (K == 0) return scaled_c(ctx, out, d, NULL, 0);
  mm_operand a, b;
  if ((st = nv__gpu_input(ctx, &in[0], &a.arg)) != NV_OK ||
      (st = nv__gpu_input(ctx, &in[1], &b.arg)) != NV_OK)
    return st;
  /* Each input's strides along the output's axes (right-aligned, 0 where it broadcasts) and
   * along its last axis, the contracted one. */
  const nv__output *ma = in[0].meta, *mb = in[1].meta;
  a.cs = ma->strides[ma->ndim - 1];
  b.cs = mb->strides[mb->ndim - 1];
  for (int i = 0; i < out->ndim; i++) {
    int ja = i - (out->ndim - (ma->ndim - 1)), jb = i - (out->ndim - (mb->ndim - 1));
    a.bst[i] = ja < 0 || ma->shape[ja] != out->shape[i] ? 0 : ma->strides[ja];
    b.bst[i] = jb < 0 || mb->shape[jb] != out->shape[i] ? 0 : mb->strides[jb];
  }
  mm_batch bt;
  batch_fold(out, 0, a.bst, b.bst, &bt);
  int first = bt.nd > NV__GPU_BATCH_DIMS ? bt.nd - NV__GPU_BATCH_DIMS : 0;
  nv__gpu_vecdot_params p = {.K = K, .sa = a.cs, .sb = b.cs};
  kernel_batch(&bt, first, &p.bt);
  int64_t outer = 1;
  for (int i = 0; i < first; i++) outer *= bt.shape[i];
  int64_t threads = K <= 32 ? p.bt.count : p.bt.count * 32;
  int64_t blocks = (threads + NV__GPU_VECDOT_THREADS - 1) / NV__GPU_VECDOT_THREADS;
  uint32_t grid[3] = {(uint32_t)(blocks < 8192 ? blocks : 8192), 1, 1};
  hrx_view views[3] = {a.arg.view, b.arg.view, d.view};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  for (int64_t t = 0; t < outer && st == NV_OK; t++) {
    int64_t o[3];
    outer_offsets(&bt, first, t, o);
    p.aoff = a.arg.offset + o[0];
    p.boff = b.arg.offset + o[1];
    p.doff = d.offset + o[2];
    st = dispatch(ctx, func, grid, NV__GPU_VECDOT_THREADS, views, acc, 3, &p, sizeof p);
  }
  return st;
}

void nv__gpu_register_linalg(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_MATMUL] = k_matmul;
  k[NV__PRIM_ADDMM] = k_addmm;
  k[NV__PRIM_VECDOT] = k_vecdot;
}
