/* matmul and addmm on the CPU. float32, float64 and complex64 go to OpenBLAS: each operand is
 * passed in place as a BLAS transpose and leading dimension when its matrices' layout allows
 * (row- or column-major with any leading dimension, batch axes strided or broadcast), and is
 * packed into a contiguous copy only when it does not (negative or overlapping strides).
 * float16 and bfloat16 are packed to float32, multiplied by sgemm and rounded once. Integer
 * dtypes go to the exact kernel of linalg_int.c. */
#include <cblas.h>
#include <limits.h>
#include <pthread.h>

#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"
#include "ops/linalg_params.h"


/* ---- Shared helpers (also used by linalg_int.c and linalg_vecdot.c) ---- */

void nv__linalg_view_of(nv__linalg_view *v, const nv__operand *op) {
  v->p = nv__operand_ptr(op);
  v->dtype = op->meta->dtype;
  v->ndim = op->meta->ndim;
  v->shape = op->meta->shape;
  for (int i = 0; i < v->ndim; i++) v->st[i] = op->meta->strides[i];
}

void nv__linalg_pack(const nv__linalg_view *v, const int64_t *st, nv_dtype to, char *dst) {
  int64_t shape[NV__MAX_DIMS], cst[NV__MAX_DIMS];
  int64_t *cs[1] = {cst};
  const int64_t *ss[1] = {st};
  int nd = nv__collapse(v->shape, v->ndim, ss, 1, shape, cs);
  int64_t total = 1;
  for (int i = 0; i < v->ndim; i++) total *= v->shape[i];
  if (total == 0) return;
  if (v->dtype == to && nd == 1 && cst[0] == 1) {
    memcpy(dst, v->p, (size_t)total * nv_dtype_size(to));
    return;
  }
  int64_t inner = shape[nd - 1], idx[NV__MAX_DIMS] = {0};
  size_t fi = nv_dtype_size(v->dtype), ti = nv_dtype_size(to);
  for (int64_t done = 0; done < total; done += inner) {
    int64_t off = 0;
    for (int i = 0; i < nd - 1; i++) off += idx[i] * cst[i];
    nv__convert_run(v->dtype, v->p + off * (int64_t)fi, cst[nd - 1], to, dst + done * (int64_t)ti,
                    1, inner);
    for (int i = nd - 2; i >= 0 && ++idx[i] == shape[i]; i--) idx[i] = 0;
  }
}

void *nv__linalg_pack_new(nv__linalg_view *v, nv_dtype to, const char *op) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
  char *buf = nv__malloc((size_t)(n > 0 ? n : 1) * nv_dtype_size(to));
  if (!buf) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory packing an operand", op);
    return NULL;
  }
  nv__linalg_pack(v, v->st, to, buf);
  int64_t s = 1;
  for (int i = v->ndim - 1; i >= 0; i--) {
    v->st[i] = s;
    s *= v->shape[i];
  }
  v->p = buf;
  v->dtype = to;
  return buf;
}

/* The strides of `x`'s axes [0, nx - tail) right-aligned to the batch shape (0: broadcast). */
static void batch_strides(const nv__linalg_view *x, int tail, const int *bshape, int nb,
                          int64_t *st) {
  int nx = x->ndim - tail;
  for (int i = 0; i < nb; i++) {
    int j = i - (nb - nx);
    st[i] = j < 0 || x->shape[j] != bshape[i] ? 0 : x->st[j];
  }
}

void nv__linalg_batch_init(nv__linalg_batch *bt, const nv__output *out, int out_tail,
                           const nv__linalg_view *a, const nv__linalg_view *b, int in_tail) {
  int nb = out->ndim - out_tail;
  int64_t sa[NV__MAX_DIMS], sb[NV__MAX_DIMS];
  batch_strides(a, in_tail, out->shape, nb, sa);
  batch_strides(b, in_tail, out->shape, nb, sb);
  const int64_t *src[2] = {sa, sb};
  int64_t *dst[2] = {bt->sa, bt->sb};
  bt->nd = nv__collapse(out->shape, nb, src, 2, bt->shape, dst);
  bt->n = 1;
  for (int i = 0; i < bt->nd; i++) bt->n *= bt->shape[i];
}

/* ---- BLAS plans ---- */

/* One operand's matrices as BLAS reads them. */
typedef struct blas_operand {
  CBLAS_TRANSPOSE trans;
  int ld;
} blas_operand;

/* Whether a rows × cols matrix with strides (rs, cs) is a BLAS operand in place: row-major
 * (NoTrans) with leading dimension rs, or column-major (Trans) with leading dimension cs.
 * Axes of size 1 take any stride; BLAS needs ld ≥ max(1, inner size). */
static bool blas_layout(int rows, int cols, int64_t rs, int64_t cs, blas_operand *o) {
  int64_t need_n = cols > 1 ? cols : 1, need_t = rows > 1 ? rows : 1;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || (rs >= need_n && rs <= INT_MAX))) {
    o->trans = CblasNoTrans;
    o->ld = rows <= 1 ? (int)need_n : (int)rs;
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || (cs >= need_t && cs <= INT_MAX))) {
    o->trans = CblasTrans;
    o->ld = cols <= 1 ? (int)need_t : (int)cs;
    return true;
  }
  return false;
}

typedef struct gemm_job {
  nv_dtype dt; /* float32, float64 or complex64 */
  int M, N, K;
  nv__linalg_batch bt;
  const char *a, *b;
  blas_operand oa, ob;
  char *c; /* row-contiguous batches of M × N */
  double alpha, beta;
  int ldc;   /* C's row stride: the full N (a slice's N may be smaller) */
  int parts; /* slices each product is cut into (run_gemm) */
  bool by_rows; /* slices of M (else of N) */
} gemm_job;

/* A product with one row (or one column) is a matrix-vector product: BLAS's gemv reads the
 * matrix once (sgemm with M = 1 packs it first). For M = 1, C = Bᵀ·a with a's row as the vector
 * (stride 1, or the leading dimension when a is stored transposed); for N = 1, C = A·b. */
static void gemv_one(const gemm_job *j, const void *A, const void *B, void *C) {
  CBLAS_TRANSPOSE t;
  int rows, cols, ld, inc;
  const void *mat, *vec;
  if (j->M == 1) {
    mat = B;
    vec = A;
    ld = j->ob.ld;
    inc = j->oa.trans == CblasNoTrans ? 1 : j->oa.ld;
    /* B stored K × N (NoTrans): Bᵀ·a is the transposed product of that matrix. */
    t = j->ob.trans == CblasNoTrans ? CblasTrans : CblasNoTrans;
    rows = j->ob.trans == CblasNoTrans ? j->K : j->N;
    cols = j->ob.trans == CblasNoTrans ? j->N : j->K;
  } else {
    mat = A;
    vec = B;
    ld = j->oa.ld;
    inc = j->ob.trans == CblasNoTrans ? j->ob.ld : 1;
    t = j->oa.trans;
    rows = j->oa.trans == CblasNoTrans ? j->M : j->K;
    cols = j->oa.trans == CblasNoTrans ? j->K : j->M;
  }
  switch (j->dt) {
    case NV_DTYPE_FLOAT32:
      cblas_sgemv(CblasRowMajor, t, rows, cols, (float)j->alpha, mat, ld, vec, inc,
                  (float)j->beta, C, 1);
      break;
    case NV_DTYPE_FLOAT64:
      cblas_dgemv(CblasRowMajor, t, rows, cols, j->alpha, mat, ld, vec, inc, j->beta, C, 1);
      break;
    default: {
      float al[2] = {(float)j->alpha, 0}, be[2] = {(float)j->beta, 0};
      cblas_cgemv(CblasRowMajor, t, rows, cols, al, mat, ld, vec, inc, be, C, 1);
      break;
    }
  }
}

static void gemm_one(const gemm_job *j, int64_t batch) {
  int64_t offa, offb;
  nv__linalg_batch_offsets(&j->bt, batch, &offa, &offb);
  size_t isz = nv_dtype_size(j->dt);
  const void *A = j->a + offa * (int64_t)isz, *B = j->b + offb * (int64_t)isz;
  void *C = j->c + batch * (int64_t)j->M * j->ldc * (int64_t)isz;
  if (j->M == 1 || j->N == 1) {
    gemv_one(j, A, B, C);
    return;
  }
  switch (j->dt) {
    case NV_DTYPE_FLOAT32:
      cblas_sgemm(CblasRowMajor, j->oa.trans, j->ob.trans, j->M, j->N, j->K, (float)j->alpha, A,
                  j->oa.ld, B, j->ob.ld, (float)j->beta, C, j->ldc);
      break;
    case NV_DTYPE_FLOAT64:
      cblas_dgemm(CblasRowMajor, j->oa.trans, j->ob.trans, j->M, j->N, j->K, j->alpha, A, j->oa.ld,
                  B, j->ob.ld, j->beta, C, j->ldc);
      break;
    default: {
      float al[2] = {(float)j->alpha, 0}, be[2] = {(float)j->beta, 0};
      cblas_cgemm(CblasRowMajor, j->oa.trans, j->ob.trans, j->M, j->N, j->K, al, A, j->oa.ld, B,
                  j->ob.ld, be, C, j->ldc);
      break;
    }
  }
}

/* Task i: product i / parts, slice i % parts of its rows (by_rows) or columns. OpenBLAS runs
 * single-threaded (pool.c): the pool is the process's one set of threads, and OpenBLAS's own
 * idle workers would spin on the cores the pool needs. */
static void gemm_range(void *ctx, int64_t lo, int64_t hi) {
  const gemm_job *j = ctx;
  size_t isz = nv_dtype_size(j->dt);
  for (int64_t i = lo; i < hi; i++) {
    int64_t batch = i / j->parts, part = i % j->parts;
    if (j->parts == 1) {
      gemm_one(j, batch);
      continue;
    }
    gemm_job s = *j;
    s.bt.n = 1;
    int dim = j->by_rows ? j->M : j->N;
    int64_t s0 = (int64_t)dim * part / j->parts, s1 = (int64_t)dim * (part + 1) / j->parts;
    if (s1 == s0) continue;
    int64_t offa, offb;
    nv__linalg_batch_offsets(&j->bt, batch, &offa, &offb);
    s.a = j->a + offa * (int64_t)isz;
    s.b = j->b + offb * (int64_t)isz;
    s.bt.nd = 0;
    s.c = j->c + batch * (int64_t)j->M * j->ldc * (int64_t)isz;
    if (j->by_rows) {
      s.M = (int)(s1 - s0);
      s.a += (j->oa.trans == CblasNoTrans ? s0 * j->oa.ld : s0) * (int64_t)isz;
      s.c += s0 * j->ldc * (int64_t)isz;
    } else {
      s.N = (int)(s1 - s0);
      s.b += (j->ob.trans == CblasNoTrans ? s0 : s0 * j->ob.ld) * (int64_t)isz;
      s.c += s0 * (int64_t)isz;
    }
    gemm_one(&s, 0);
  }
}

/* Products below this many multiply-adds in all run on the calling thread. */
#define NV__GEMM_SERIAL (1 << 16)

/* A batch whose `b` is shared by every batch and whose `a` stacks its matrices at a uniform
 * row stride is one product with M × batch rows (fewer, larger calls). */
static void fold_batches(gemm_job *j, int64_t rs_a) {
  if (j->bt.n <= 1 || j->bt.nd != 1 || j->oa.trans != CblasNoTrans) return;
  if (j->bt.sb[0] != 0 || (int64_t)j->M * j->bt.n > INT_MAX) return;
  int64_t stride = j->bt.sa[0];
  int64_t rows = j->M == 1 ? stride : rs_a;
  if (j->M > 1 && stride != (int64_t)j->M * rs_a) return;
  if (rows < (j->K > 1 ? j->K : 1) || rows > INT_MAX) return;
  j->oa.ld = (int)rows;
  j->M *= (int)j->bt.n;
  j->bt.n = 1;
  j->bt.nd = 1;
  j->bt.shape[0] = 1;
}

/* C ← beta × C over the output (the product of an empty K, as BLAS defines it). */
static void scale_output(nv_dtype dt, char *c, int64_t n, double beta) {
  if (beta == 0) {
    memset(c, 0, (size_t)n * nv_dtype_size(dt));
    return;
  }
  if (dt == NV_DTYPE_FLOAT64) {
    for (int64_t i = 0; i < n; i++) ((double *)c)[i] *= beta;
  } else {
    int64_t m = dt == NV_DTYPE_COMPLEX64 ? 2 * n : n;
    for (int64_t i = 0; i < m; i++) ((float *)c)[i] *= (float)beta;
  }
}

/* Whether this BLAS's ?gemm overwrites C when beta = 0, as the BLAS standard requires ("C need
 * not be set on input"), checked once per process on NaN-filled outputs of a few shapes and
 * both operand layouts, for each of sgemm, dgemm and cgemm. Where it does, blas_product leaves
 * a gemm's output unzeroed: OpenBLAS's driver already zeroes C (its beta pass, on every thread's
 * slice), and a second, serial memset of the whole output cost a pass over it per product. */
static bool gemm_probe_ok[3];
static pthread_once_t gemm_probe_once = PTHREAD_ONCE_INIT;

static void gemm_probe(void) {
  enum { PM = 37, PN = 29, PK = 23 };
  static const int shapes[3][3] = {{4, 4, 4}, {PM, PN, PK}, {16, 64, 8}};
  float a[2 * PM * PK], b[2 * PK * PN], c[2 * PM * PN];
  double da[PM * PK], db[PK * PN], dc[PM * PN];
  for (int i = 0; i < 2 * PM * PK; i++) a[i] = (float)((i * 7) % 11) - 5.0f;
  for (int i = 0; i < 2 * PK * PN; i++) b[i] = (float)((i * 5) % 13) - 6.0f;
  for (int i = 0; i < PM * PK; i++) da[i] = a[i];
  for (int i = 0; i < PK * PN; i++) db[i] = b[i];
  bool ok[3] = {true, true, true};
  for (int s = 0; s < 3; s++)
    for (int t = 0; t < 4; t++) {
      int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
      CBLAS_TRANSPOSE ta = t & 1 ? CblasTrans : CblasNoTrans, tb = t & 2 ? CblasTrans : CblasNoTrans;
      int lda = ta == CblasNoTrans ? K : M, ldb = tb == CblasNoTrans ? N : K;
      for (int i = 0; i < 2 * M * N; i++) c[i] = NAN;
      for (int i = 0; i < M * N; i++) dc[i] = NAN;
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
      for (int i = 0; i < M * N; i++) ok[0] &= isfinite(c[i]) != 0;
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, da, lda, db, ldb, 0.0, dc, N);
      for (int i = 0; i < M * N; i++) ok[1] &= isfinite(dc[i]) != 0;
      for (int i = 0; i < 2 * M * N; i++) c[i] = NAN;
      float al[2] = {1, 0}, be[2] = {0, 0};
      cblas_cgemm(CblasRowMajor, ta, tb, M, N, K, al, a, lda, b, ldb, be, c, N);
      for (int i = 0; i < 2 * M * N; i++) ok[2] &= isfinite(c[i]) != 0;
    }
  memcpy(gemm_probe_ok, ok, sizeof ok);
}

/* Whether BLAS writes every element of `j`'s output itself (a beta = 0 gemm, not gemv). */
static bool gemm_writes_c(const gemm_job *j) {
  if (j->K == 0 || j->alpha == 0 || j->M <= 1 || j->N <= 1) return false;
  pthread_once(&gemm_probe_once, gemm_probe);
  int k = j->dt == NV_DTYPE_FLOAT32 ? 0 : j->dt == NV_DTYPE_FLOAT64 ? 1 : 2;
  return gemm_probe_ok[k];
}

/* BLAS's zero rules are applied here, not left to the BLAS build: OpenBLAS kernels differ by
 * CPU, and some multiply by alpha = 0 (0·NaN = NaN) or read C when beta = 0. alpha = 0 (or an
 * empty K) computes no product: C = beta·c. Otherwise a beta = 0 output is zeroed before BLAS
 * sees it (blas_product), so a kernel that reads C reads zeros, not the freed block the pool
 * handed back, unless the library's gemm was seen to write C itself (gemm_writes_c). */
static void run_gemm(gemm_job *j, int64_t c_size) {
  if (j->K == 0 || j->alpha == 0) {
    scale_output(j->dt, j->c, c_size, j->beta);
    return;
  }
  int t = nv__pool_threads();
  double mnk = (double)j->M * j->N * j->K;
  j->parts = 1;
  if (t <= 1 || mnk * (double)j->bt.n < NV__GEMM_SERIAL) {
    gemm_range(j, 0, j->bt.n);
    return;
  }
  /* Fewer products than threads: each is cut into slices along its longer side. */
  if (j->bt.n < t) {
    j->by_rows = j->M >= j->N;
    int dim = j->by_rows ? j->M : j->N;
    j->parts = dim >= 16 * t ? t : 1;
  }
  nv__parallel_for(j->bt.n * j->parts, 1, gemm_range, j);
}

/* Sets up operand `x` (rows × cols matrices) for BLAS, packing it into a contiguous copy
 * (*packed, for the caller to free) when BLAS cannot read its layout in place. */
static nv_status blas_operand_of(nv__linalg_view *x, int rows, int cols, blas_operand *o,
                                 void **packed, const char *op) {
  int nd = x->ndim;
  if (blas_layout(rows, cols, x->st[nd - 2], x->st[nd - 1], o)) return NV_OK;
  void *old = *packed;
  *packed = nv__linalg_pack_new(x, x->dtype, op);
  nv__free(old);
  if (!*packed) return NV_ERR_OUT_OF_MEMORY;
  blas_layout(rows, cols, x->st[nd - 2], x->st[nd - 1], o);
  return NV_OK;
}

/* The product (and for addmm the scaled sum with c) of the float kinds BLAS computes. `a`,
 * `b` and `c` have the output's dtype; `work` is the BLAS dtype. */
static nv_status blas_product(const char *op, nv__output *out, nv__linalg_view *a,
                              nv__linalg_view *b, const nv__linalg_view *c, double alpha,
                              double beta) {
  nv_dtype work = out->dtype == NV_DTYPE_FLOAT16 || out->dtype == NV_DTYPE_BFLOAT16
                      ? NV_DTYPE_FLOAT32
                      : out->dtype;
  void *pa = NULL, *pb = NULL;
  char *cbuf = nv__output_ptr(out);
  nv_status st = NV_OK;
  if (work != out->dtype) {
    /* float16/bfloat16: float32 copies in, one rounding out. */
    pa = nv__linalg_pack_new(a, work, op);
    pb = pa ? nv__linalg_pack_new(b, work, op) : NULL;
    cbuf = pb ? nv__malloc((size_t)out->size * sizeof(float)) : NULL;
    if (!cbuf) {
      st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
      goto done;
    }
  }
  gemm_job j = {.dt = work, .alpha = alpha, .beta = c ? beta : 0, .c = cbuf};
  j.M = out->shape[out->ndim - 2];
  j.N = out->shape[out->ndim - 1];
  j.K = a->shape[a->ndim - 1];
  if (j.K > 0 && alpha != 0) {
    if ((st = blas_operand_of(a, j.M, j.K, &j.oa, &pa, op)) != NV_OK ||
        (st = blas_operand_of(b, j.K, j.N, &j.ob, &pb, op)) != NV_OK)
      goto done;
    nv__linalg_batch_init(&j.bt, out, 2, a, b, 2);
    j.a = a->p;
    j.b = b->p;
    fold_batches(&j, a->st[a->ndim - 2]);
  }
  if (j.beta == 0) {
    if (!gemm_writes_c(&j)) memset(cbuf, 0, (size_t)out->size * nv_dtype_size(work));
  } else {
    /* BLAS adds beta × C to the product: C starts as c broadcast to the output. */
    int64_t cst[NV__MAX_DIMS];
    batch_strides(c, 0, out->shape, out->ndim, cst);
    nv__linalg_view cv = *c;
    cv.ndim = out->ndim;
    cv.shape = out->shape;
    nv__linalg_pack(&cv, cst, work, cbuf);
  }
  j.ldc = j.N;
  run_gemm(&j, out->size);
  if (work != out->dtype)
    nv__convert_run(work, cbuf, 1, out->dtype, nv__output_ptr(out), 1, out->size);
done:
  if (cbuf != nv__output_ptr(out)) nv__free(cbuf);
  nv__free(pa);
  nv__free(pb);
  return st;
}

static nv_status product_kernel(nv__node *node, const nv__operand *in, bool addmm) {
  const char *op = addmm ? "addmm" : "matmul";
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  nv__linalg_view a, b, c;
  nv__linalg_view_of(&a, &in[addmm]);
  nv__linalg_view_of(&b, &in[addmm + 1]);
  if (addmm) {
    const nv__addmm_params *p = node->params;
    nv__linalg_view_of(&c, &in[0]);
    return blas_product(op, out, &a, &b, &c, p->alpha, p->beta);
  }
  if (nv_issubdtype(out->dtype, NV_CATEGORY_INTEGER)) return nv__linalg_int_matmul(out, &a, &b);
  return blas_product(op, out, &a, &b, NULL, 1, 0);
}

nv_status nv__k_matmul(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return product_kernel(node, in, false);
}

nv_status nv__k_addmm(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return product_kernel(node, in, true);
}

void nv__cpu_register_linalg(nv__kernel_fn *k) {
  k[NV__PRIM_MATMUL] = nv__k_matmul;
  k[NV__PRIM_ADDMM] = nv__k_addmm;
  k[NV__PRIM_VECDOT] = nv__k_vecdot;
}
