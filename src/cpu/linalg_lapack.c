/* The decompositions on the CPU through LAPACKE (column-major, no NaN pre-check of its own:
 * the kernels test for NaN where LAPACK's iterations need it) and CBLAS's trsm.
 *
 * Each kernel packs its input row-major (any layout in), then works matrix by matrix over the
 * batch, pool-parallel (OpenBLAS runs single-threaded inside the pool: see linalg.c). A matrix
 * goes to LAPACK as its column-major copy and its results come back transposed into the
 * row-contiguous outputs. The rules for singular, indefinite, NaN and non-converging inputs
 * are in ops/linalg_decomp_params.h. */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include <cblas.h>
#include <lapacke.h>

#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"
#include "ops/linalg_decomp_params.h"

static pthread_once_t nancheck_once = PTHREAD_ONCE_INIT;
static void nancheck_off(void) { LAPACKE_set_nancheck(0); }

/* ---- Shared helpers ---- */

/* One kernel's work: the packed inputs, the matrix sizes, and a flag for a failed allocation
 * in any task. */
typedef struct job {
  nv__node *node;
  const char *a, *b; /* packed row-major inputs (b: solve_triangular's right-hand sides) */
  nv_dtype dt;       /* the input's dtype */
  size_t es;         /* its element size */
  int m, n, r;       /* a is (m, n); b is (n, r); lu_factor: r = 1 for blocked */
  atomic_int oom;
} job;

/* dst (cols × rows, row-major) = the transpose of src (rows × cols, row-major), elements of
 * `es` bytes (4 or 8). Row-major → column-major of the same matrix, and back. By 32 × 32
 * tiles, whose rows of src and dst stay in the L1 cache: element by element, every write of a
 * large matrix went to another cache line (2 ms for 512 × 512 float64, more than getrf's
 * single-threaded factorization of it). */
#define TRANSPOSE_TILE(T)                                                                   \
  static void transpose_##T(const T *s, int64_t rows, int64_t cols, T *d) {                 \
    for (int64_t i0 = 0; i0 < rows; i0 += 32)                                               \
      for (int64_t j0 = 0; j0 < cols; j0 += 32) {                                           \
        int64_t i1 = i0 + 32 < rows ? i0 + 32 : rows, j1 = j0 + 32 < cols ? j0 + 32 : cols; \
        for (int64_t j = j0; j < j1; j++)                                                   \
          for (int64_t i = i0; i < i1; i++) d[j * rows + i] = s[i * cols + j];              \
      }                                                                                     \
  }
TRANSPOSE_TILE(uint32_t)
TRANSPOSE_TILE(uint64_t)

static void transpose(const void *src, int rows, int cols, void *dst, size_t es) {
  if (es == 4) transpose_uint32_t(src, rows, cols, dst);
  else transpose_uint64_t(src, rows, cols, dst);
}

/* Fills `n` elements of dtype `dt` (float32, float64 or complex64) with NaN. */
static void fill_nan(void *p, nv_dtype dt, int64_t n) {
  if (dt == NV_DTYPE_FLOAT64) {
    for (int64_t i = 0; i < n; i++) ((double *)p)[i] = NAN;
  } else {
    int64_t k = dt == NV_DTYPE_COMPLEX64 ? 2 * n : n;
    for (int64_t i = 0; i < k; i++) ((float *)p)[i] = NAN;
  }
}

/* Whether the `n` elements at p (float32, float64 or complex64) hold a NaN. */
static bool has_nan(const void *p, nv_dtype dt, int64_t n) {
  bool bad = false;
  if (dt == NV_DTYPE_FLOAT64) {
    for (int64_t i = 0; i < n; i++) bad |= isnan(((const double *)p)[i]);
  } else {
    int64_t k = dt == NV_DTYPE_COMPLEX64 ? 2 * n : n;
    for (int64_t i = 0; i < k; i++) bad |= isnan(((const float *)p)[i]);
  }
  return bad;
}

/* The identity (n × n) of dtype `dt` at p. */
static void fill_eye(void *p, nv_dtype dt, int n) {
  size_t es = nv_dtype_size(dt);
  memset(p, 0, (size_t)n * (size_t)n * es);
  for (int64_t i = 0; i < n; i++) {
    char *e = (char *)p + (i * n + i) * (int64_t)es;
    if (dt == NV_DTYPE_FLOAT64) *(double *)e = 1;
    else *(float *)e = 1; /* complex64: the real part */
  }
}

/* Input 0 packed row-major into new memory (freed by the caller); NULL when out of memory. */
static char *pack_input(const nv__operand *in, const char *op) {
  nv__linalg_view v;
  nv__linalg_view_of(&v, in);
  return nv__linalg_pack_new(&v, v.dtype, op);
}

/* The number of matrices of output `o` with `tail` matrix axes. */
static int64_t batches(const nv__output *o, int tail) {
  int64_t b = 1;
  for (int i = 0; i < o->ndim - tail; i++) b *= o->shape[i];
  return b;
}

/* Runs `fn` over the batch with a grain that gives each task ~ 2^18 flops at least. */
static nv_status run_batches(job *j, int64_t nb, nv__range_fn fn, const char *op) {
  double flops = (double)j->m * j->n * (j->m < j->n ? j->m : j->n) + 1;
  int64_t grain = flops >= 262144 ? 1 : (int64_t)(262144 / flops);
  nv__parallel_for(nb, grain, fn, j);
  if (atomic_load(&j->oom))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory for LAPACK's workspace", op);
  return NV_OK;
}

/* Packs input 0 into j->a, runs `fn` over the nb matrices and frees the packed copy. */
static nv_status pack_and_run(job *j, const nv__operand *in, int64_t nb, nv__range_fn fn,
                              const char *op) {
  char *a = pack_input(in, op);
  if (!a) return NV_ERR_OUT_OF_MEMORY;
  j->a = a;
  nv_status st = run_batches(j, nb, fn, op);
  nv__free(a);
  return st;
}

/* Allocates the outputs of `node` (all of them). */
static nv_status alloc_outputs(nv__node *node, int nout) {
  for (int i = 0; i < nout; i++) {
    nv_status st = nv__output_alloc(&node->out[i]);
    if (st != NV_OK) return st;
  }
  return NV_OK;
}

static void *elem(const void *base, int64_t i, size_t es) { return (char *)base + i * (int64_t)es; }

/* ---- Blocked factorizations of one large matrix across the pool ----
 *
 * OpenBLAS runs single-threaded inside the pool (see linalg.c), so a lone large matrix would
 * factor on one core. For getrf of a large one, LU is blocked right-looking (LAPACK's own
 * scheme): LAPACK factors each panel of NB columns, and the trailing triangular solves and
 * products, which hold almost all of the work, are cut into column slices across the pool.
 * (potrf is not: OpenBLAS's own potrf on one core was 2-3x faster than the blocked one on two,
 * 512 to 2048, float64, 2026-12-04; getrf blocked wins from about 1024.) */

#define NV__LS_NB 128
/* Matrices from this order up take the blocked LU when they are alone in their node. */
#define NV__LS_BLOCKED_MIN 1024

/* One slice-parallel BLAS step over [0, count) (columns or rows), in slices of >= 32. */
typedef struct slice_job {
  void (*fn)(const struct slice_job *s, int c0, int c1);
  bool f64;
  int m, n, k, ld;
  char *a, *b, *c; /* operands (element pointers), meaning per step */
} slice_job;

static void slice_range(void *ctx, int64_t lo, int64_t hi) {
  const slice_job *s = ctx;
  s->fn(s, (int)lo, (int)hi);
}

static void for_slices(slice_job *s, int count) {
  if (count > 0) nv__parallel_for(count, 32, slice_range, s);
}

#define LS_EL(s, p, i) ((s)->f64 ? (void *)((double *)(p) + (i)) : (void *)((float *)(p) + (i)))

/* LU step: row swaps of the panel (pivots k1..k2, 1-based) on columns [c0, c1) of w. */
static void lu_swap_cols(const slice_job *s, int c0, int c1) {
  const lapack_int *ipiv = (const lapack_int *)s->b;
  if (s->f64)
    LAPACKE_dlaswp_work(LAPACK_COL_MAJOR, c1 - c0, (double *)s->a + (int64_t)c0 * s->ld, s->ld,
                        s->m, s->n, ipiv, 1);
  else
    LAPACKE_slaswp_work(LAPACK_COL_MAJOR, c1 - c0, (float *)s->a + (int64_t)c0 * s->ld, s->ld,
                        s->m, s->n, ipiv, 1);
}

/* LU step: columns [c0, c1) of A12 (k rows at a) = L11⁻¹ A12 (L11 unit lower at b), then
 * A22's columns (m rows at c) -= A21 (m × k at c - k... passed as `n` offset) · A12's. */
static void lu_update_cols(const slice_job *s, int c0, int c1) {
  int64_t ld = s->ld, off = (int64_t)c0 * ld;
  if (s->f64) {
    double *a12 = (double *)s->a + off, *l11 = (double *)s->b, *a22 = (double *)s->c + off;
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, s->k, c1 - c0, 1.0,
                l11, s->ld, a12, s->ld);
    if (s->m > 0)
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, s->m, c1 - c0, s->k, -1.0,
                  l11 + s->k, s->ld, a12, s->ld, 1.0, a22, s->ld);
  } else {
    float *a12 = (float *)s->a + off, *l11 = (float *)s->b, *a22 = (float *)s->c + off;
    cblas_strsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, s->k, c1 - c0, 1.0f,
                l11, s->ld, a12, s->ld);
    if (s->m > 0)
      cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, s->m, c1 - c0, s->k, -1.0f,
                  l11 + s->k, s->ld, a12, s->ld, 1.0f, a22, s->ld);
  }
}

/* getrf of the column-major m × n matrix w in place with LAPACK's 1-based pivots (k of them). */
static void getrf_blocked(bool f64, int m, int n, void *w, lapack_int *ipiv) {
  int64_t ld = m;
  int k = m < n ? m : n;
  for (int j = 0; j < k; j += NV__LS_NB) {
    int jb = k - j < NV__LS_NB ? k - j : NV__LS_NB;
    slice_job s = {.f64 = f64, .ld = m};
    void *d = LS_EL(&s, w, j + j * ld);
    /* The panel: rows j.., columns j..j+jb (an exact zero pivot still factors: no error). */
    if (f64) LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, m - j, jb, d, m, ipiv + j);
    else LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, m - j, jb, d, m, ipiv + j);
    for (int i = j; i < j + jb; i++) ipiv[i] += j;
    /* The panel's swaps on the columns to its left and right. */
    s.fn = lu_swap_cols;
    s.a = w;
    s.b = (char *)ipiv;
    s.m = j + 1;
    s.n = j + jb;
    for_slices(&s, j);
    int right = n - j - jb;
    if (right == 0) continue;
    s.a = LS_EL(&s, w, (int64_t)(j + jb) * ld);
    for_slices(&s, right);
    /* U12 and the trailing update, column slice by column slice. */
    s.fn = lu_update_cols;
    s.k = jb;
    s.m = m - j - jb;
    s.a = LS_EL(&s, w, j + (int64_t)(j + jb) * ld);
    s.b = d;
    s.c = LS_EL(&s, w, (j + jb) + (int64_t)(j + jb) * ld);
    for_slices(&s, right);
  }
}

/* ---- cholesky ---- */

/* Matrices up to this order are factored by cholesky_small rather than LAPACK: for a batch of
 * small matrices the library call's own overhead is most of the time. */
#define NV__LS_SMALL_MAX 64

/* Cholesky of one n x n row-major matrix (n <= NV__LS_SMALL_MAX), in double, right-looking:
 * each step takes a pivot, scales its column (lower) or row (upper) and updates the trailing
 * triangle row by row, one multiply-add per element along contiguous rows (independent
 * elements: the loops vectorize, where a dot-product form would wait on one sum). L from a's
 * lower triangle (a = L Lᵀ), or for `upper` U from its upper one (a = Uᵀ U); the other
 * triangle of o is zeroed. Returns false where a pivot is not positive (the caller then
 * leaves the matrix to potrf, whose float32 rounding may still accept it). A NaN reaches the entries that depend on it, as through LAPACK's potrf (and
 * NumPy's cholesky). */
#define CHOLESKY_SMALL(T)                                                                    \
  NV_KERNEL_CLONES_FMA static bool cholesky_small_##T(const T *a, T *o, int n, bool upper) { \
    double w[NV__LS_SMALL_MAX][NV__LS_SMALL_MAX], c[NV__LS_SMALL_MAX];                      \
    for (int i = 0; i < n; i++)                                                             \
      for (int k = 0; k < n; k++) w[i][k] = (double)a[i * n + k];                           \
    for (int j = 0; j < n; j++) {                                                           \
      double d = w[j][j];                                                                   \
      if (d <= 0) return false;                                                             \
      d = sqrt(d);                                                                          \
      w[j][j] = d;                                                                          \
      if (upper) {                                                                          \
        double *wj = w[j];                                                                  \
        for (int k = j + 1; k < n; k++) wj[k] /= d;                                         \
        for (int i = j + 1; i < n; i++) {                                                   \
          const double l = wj[i];                                                           \
          double *wi = w[i];                                                                \
          for (int k = i; k < n; k++) wi[k] -= l * wj[k];                                   \
        }                                                                                   \
      } else {                                                                              \
        for (int i = j + 1; i < n; i++) c[i] = w[i][j] = w[i][j] / d;                       \
        for (int i = j + 1; i < n; i++) {                                                   \
          const double l = c[i];                                                            \
          double *wi = w[i];                                                                \
          for (int k = j + 1; k <= i; k++) wi[k] -= l * c[k];                               \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
    for (int i = 0; i < n; i++) {                                                           \
      T *oi = o + i * n;                                                                    \
      int k0 = upper ? i : 0, k1 = upper ? n : i + 1;                                       \
      for (int k = 0; k < k0; k++) oi[k] = 0;                                               \
      for (int k = k0; k < k1; k++) oi[k] = (T)w[i][k];                                     \
      for (int k = k1; k < n; k++) oi[k] = 0;                                               \
    }                                                                                       \
    return true;                                                                            \
  }
CHOLESKY_SMALL(float)
CHOLESKY_SMALL(double)

static void cholesky_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  const nv__decomp_params *p = j->node->params;
  int n = j->n;
  int64_t nn = (int64_t)n * n;
  char *out = nv__output_ptr(&j->node->out[0]);
  bool f64 = j->dt == NV_DTYPE_FLOAT64;
  for (int64_t b = b0; b < b1; b++) {
    void *o = elem(out, b * nn, j->es);
    if (n <= NV__LS_SMALL_MAX) {
      const void *ab = elem(j->a, b * nn, j->es);
      bool ok = f64 ? cholesky_small_double(ab, o, n, p->upper)
                    : cholesky_small_float(ab, o, n, p->upper);
      if (ok) continue;
      /* A pivot that is not positive in double may still be positive in LAPACK's own
       * arithmetic (a singular positive semi-definite matrix, whose last pivot is rounding
       * residue): MLX factors with potrf, so such a matrix goes to potrf below, which
       * decides as MLX's does; only what potrf rejects becomes NaN. */
    }
    /* The row-major matrix read column-major is aᵀ, whose upper triangle is a's lower one: so
     * LAPACK factors the opposite triangle in place in the output, and its factor read
     * row-major is the one asked for (a = L Lᵀ or Uᵀ U), with no transposes. */
    memcpy(o, elem(j->a, b * nn, j->es), (size_t)nn * j->es);
    char uplo = p->upper ? 'L' : 'U';
    lapack_int info = f64 ? LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, uplo, n, o, n)
                          : LAPACKE_spotrf_work(LAPACK_COL_MAJOR, uplo, n, o, n);
    if (info != 0) {
      fill_nan(o, j->dt, nn);
      continue;
    }
    /* The other triangle (row-major) still holds the input: zeroed row by row. */
    for (int64_t i = 0; i < n; i++) {
      if (p->upper) memset(elem(o, i * n, j->es), 0, (size_t)i * j->es);
      else memset(elem(o, i * n + i + 1, j->es), 0, (size_t)(n - 1 - i) * j->es);
    }
  }
}

static nv_status k_cholesky(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_status st = alloc_outputs(node, 1);
  if (st != NV_OK || node->out[0].size == 0) return st;
  pthread_once(&nancheck_once, nancheck_off);
  job j = {.node = node, .dt = in[0].meta->dtype, .n = node->out[0].shape[node->out[0].ndim - 1]};
  j.es = nv_dtype_size(j.dt);
  j.m = j.n;
  int64_t nb = batches(&node->out[0], 2);
  return pack_and_run(&j, &in[0], nb, cholesky_range, "cholesky");
}

/* ---- lu_factor: LU, pivots, perm ---- */

/* LU with partial pivoting of one m x n row-major matrix (both <= NV__LS_SMALL_MAX) in place
 * in o, as LAPACK's unblocked getf2 on the matrix itself: the pivot is the first entry of
 * largest magnitude in the column (NaN never chosen over a number, as idamax), rows swap only
 * for a nonzero pivot, the column below scales by the pivot's reciprocal (by the pivot where
 * that is below the smallest normal), and the trailing block takes one multiply-add per element
 * along contiguous rows. ipiv: 1-based pivot rows, as LAPACK's. */
#define LU_SMALL(T, TMIN)                                                                    \
  NV_KERNEL_CLONES static void lu_small_##T(const T *a, T *o, int m, int n, lapack_int *ipiv) { \
    memcpy(o, a, (size_t)m * (size_t)n * sizeof(T));                                        \
    int k = m < n ? m : n;                                                                  \
    for (int j = 0; j < k; j++) {                                                           \
      int p = j;                                                                            \
      T best = (T)fabs((double)o[j * n + j]);                                               \
      for (int i = j + 1; i < m; i++) {                                                     \
        T v = (T)fabs((double)o[i * n + j]);                                                \
        if (v > best) best = v, p = i;                                                      \
      }                                                                                     \
      ipiv[j] = p + 1;                                                                      \
      T *oj = o + (int64_t)j * n;                                                           \
      if (o[p * n + j] != 0) {                                                              \
        if (p != j) {                                                                       \
          T *op = o + (int64_t)p * n;                                                       \
          for (int q = 0; q < n; q++) {                                                     \
            T t = oj[q];                                                                    \
            oj[q] = op[q];                                                                  \
            op[q] = t;                                                                      \
          }                                                                                 \
        }                                                                                   \
        T piv = oj[j];                                                                      \
        if (fabs((double)piv) >= TMIN) {                                                    \
          T r = (T)1 / piv;                                                                 \
          for (int i = j + 1; i < m; i++) o[i * n + j] *= r;                                \
        } else {                                                                            \
          for (int i = j + 1; i < m; i++) o[i * n + j] /= piv;                              \
        }                                                                                   \
      }                                                                                     \
      for (int i = j + 1; i < m; i++) {                                                     \
        T *oi = o + (int64_t)i * n;                                                         \
        const T l = oi[j];                                                                  \
        for (int q = j + 1; q < n; q++) oi[q] -= l * oj[q];                                 \
      }                                                                                     \
    }                                                                                       \
  }
LU_SMALL(float, FLT_MIN)
LU_SMALL(double, DBL_MIN)

static void lu_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  int m = j->m, n = j->n, k = m < n ? m : n;
  int64_t mn = (int64_t)m * n;
  char *lu = nv__output_ptr(&j->node->out[0]);
  uint32_t *piv = nv__output_ptr(&j->node->out[1]), *perm = nv__output_ptr(&j->node->out[2]);
  void *w = nv__malloc((size_t)(mn > 0 ? mn : 1) * j->es);
  lapack_int *ipiv = nv__malloc(sizeof(lapack_int) * (size_t)(k > 0 ? k : 1));
  uint32_t *rows = nv__malloc(sizeof(uint32_t) * (size_t)(m > 0 ? m : 1));
  if (!w || !ipiv || !rows) {
    atomic_store(&j->oom, 1);
    goto done;
  }
  for (int64_t b = b0; b < b1; b++) {
    if (mn > 0) {
      /* info > 0 (an exact zero pivot) still gives the factorization: no error, as MLX. */
      if (!j->r && m <= NV__LS_SMALL_MAX && n <= NV__LS_SMALL_MAX) {
        if (j->dt == NV_DTYPE_FLOAT64)
          lu_small_double(elem(j->a, b * mn, j->es), (double *)elem(lu, b * mn, j->es), m, n, ipiv);
        else
          lu_small_float(elem(j->a, b * mn, j->es), (float *)elem(lu, b * mn, j->es), m, n, ipiv);
        goto pivots;
      }
      transpose(elem(j->a, b * mn, j->es), m, n, w, j->es);
      if (j->r) getrf_blocked(j->dt == NV_DTYPE_FLOAT64, m, n, w, ipiv);
      else if (j->dt == NV_DTYPE_FLOAT64) LAPACKE_dgetrf(LAPACK_COL_MAJOR, m, n, w, m, ipiv);
      else LAPACKE_sgetrf(LAPACK_COL_MAJOR, m, n, w, m, ipiv);
      transpose(w, n, m, elem(lu, b * mn, j->es), j->es);
    }
  pivots:
    /* rows[i]: the input row at row i of L U after the swaps; perm is its inverse. */
    for (int i = 0; i < m; i++) rows[i] = (uint32_t)i;
    for (int i = 0; i < k; i++) {
      uint32_t s = (uint32_t)(ipiv[i] - 1), t = rows[i];
      piv[b * k + i] = s;
      rows[i] = rows[s];
      rows[s] = t;
    }
    for (int i = 0; i < m; i++) perm[b * m + rows[i]] = (uint32_t)i;
  }
done:
  nv__free(w);
  nv__free(ipiv);
  nv__free(rows);
}

static nv_status k_lu_factor(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_status st = alloc_outputs(node, 3);
  const nv__output *o = &node->out[0];
  int64_t nb = batches(o, 2);
  if (st != NV_OK || nb == 0) return st;
  pthread_once(&nancheck_once, nancheck_off);
  job j = {.node = node, .dt = in[0].meta->dtype};
  j.es = nv_dtype_size(j.dt);
  j.m = o->shape[o->ndim - 2];
  j.n = o->shape[o->ndim - 1];
  /* A lone large matrix: the blocked, pool-parallel getrf. */
  j.r = nb == 1 && (j.m < j.n ? j.m : j.n) >= NV__LS_BLOCKED_MIN;
  return pack_and_run(&j, &in[0], nb, lu_range, "lu_factor");
}

/* ---- solve_triangular ---- */

/* Task t solves columns [r·q/parts, r·(q+1)/parts) of batch t / parts (q = t % parts): the
 * columns of the right-hand sides are independent, so one large solve (inv's n columns) spreads
 * over the pool as a batch does. */
static void trsm_range(void *ctx, int64_t t0, int64_t t1) {
  job *j = ctx;
  const nv__decomp_params *p = j->node->params;
  int n = j->n, r = j->r, parts = j->m;
  char *x = nv__output_ptr(&j->node->out[0]);
  CBLAS_UPLO uplo = p->upper ? CblasUpper : CblasLower;
  for (int64_t t = t0; t < t1; t++) {
    int64_t b = t / parts, q = t % parts;
    int c0 = (int)(r * q / parts), c1 = (int)(r * (q + 1) / parts);
    if (c1 == c0) continue;
    const void *a = elem(j->a, b * n * (int64_t)n, j->es);
    void *xb = elem(x, b * n * (int64_t)r + c0, j->es);
    if (j->dt == NV_DTYPE_FLOAT64)
      cblas_dtrsm(CblasRowMajor, CblasLeft, uplo, CblasNoTrans, CblasNonUnit, n, c1 - c0, 1.0, a,
                  n, xb, r);
    else
      cblas_strsm(CblasRowMajor, CblasLeft, uplo, CblasNoTrans, CblasNonUnit, n, c1 - c0, 1.0f, a,
                  n, xb, r);
  }
}

static nv_status k_solve_triangular(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *o = &node->out[0];
  nv_status st = alloc_outputs(node, 1);
  if (st != NV_OK || o->size == 0) return st;
  job j = {.node = node, .dt = o->dtype};
  j.es = nv_dtype_size(j.dt);
  j.n = o->shape[o->ndim - 2];
  j.r = o->shape[o->ndim - 1];
  char *a = pack_input(&in[0], "solve_triangular");
  if (!a) return NV_ERR_OUT_OF_MEMORY;
  j.a = a;
  /* The right-hand sides packed straight into the output, solved in place. */
  nv__linalg_view bv;
  nv__linalg_view_of(&bv, &in[1]);
  nv__linalg_pack(&bv, bv.st, o->dtype, nv__output_ptr(o));
  /* Fewer matrices than threads: each solve is cut into column slices of at least 32. */
  int64_t nb = batches(o, 2), threads = nv__pool_threads(), parts = 1;
  if (nb < threads && j.r >= 64) {
    parts = (threads + nb - 1) / nb;
    if (parts > j.r / 32) parts = j.r / 32;
  }
  j.m = (int)parts; /* trsm_range's slices per matrix */
  double flops = (double)j.n * j.n * ((double)j.r / (double)parts) + 1;
  int64_t grain = flops >= 262144 ? 1 : (int64_t)(262144 / flops);
  nv__parallel_for(nb * parts, grain, trsm_range, &j);
  nv__free(a);
  return NV_OK;
}

/* ---- qr ---- */

static void qr_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  int m = j->m, n = j->n, k = m < n ? m : n;
  int64_t mn = (int64_t)m * n;
  char *q = nv__output_ptr(&j->node->out[0]), *r = nv__output_ptr(&j->node->out[1]);
  void *w = nv__malloc((size_t)mn * j->es), *tau = nv__malloc((size_t)k * j->es);
  if (!w || !tau) {
    atomic_store(&j->oom, 1);
    goto done;
  }
  for (int64_t b = b0; b < b1; b++) {
    transpose(elem(j->a, b * mn, j->es), m, n, w, j->es);
    if (j->dt == NV_DTYPE_FLOAT64) LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, w, m, tau);
    else LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, w, m, tau);
    char *rb = elem(r, b * k * (int64_t)n, j->es);
    for (int64_t i = 0; i < k; i++)
      for (int64_t c = 0; c < n; c++) {
        void *d = elem(rb, i * n + c, j->es);
        if (c >= i) memcpy(d, elem(w, i + c * m, j->es), j->es);
        else memset(d, 0, j->es);
      }
    if (j->dt == NV_DTYPE_FLOAT64) LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, k, k, w, m, tau);
    else LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, k, k, w, m, tau);
    /* Q's k columns are the first k columns of w (column-major m × k). */
    transpose(w, k, m, elem(q, b * m * (int64_t)k, j->es), j->es);
  }
done:
  nv__free(w);
  nv__free(tau);
}

static nv_status k_qr(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_status st = alloc_outputs(node, 2);
  const nv__output *oq = &node->out[0], *orr = &node->out[1];
  if (st != NV_OK || oq->size == 0 || orr->size == 0) return st;
  pthread_once(&nancheck_once, nancheck_off);
  job j = {.node = node, .dt = in[0].meta->dtype};
  j.es = nv_dtype_size(j.dt);
  j.m = oq->shape[oq->ndim - 2];
  j.n = orr->shape[orr->ndim - 1];
  return pack_and_run(&j, &in[0], batches(oq, 2), qr_range, "qr");
}

/* ---- svd ---- */

static lapack_int gesdd(nv_dtype dt, char jobz, int m, int n, void *a, void *s, void *u,
                        void *vt) {
  int ldu = m > 0 ? m : 1, ldvt = n > 0 ? n : 1;
  switch (dt) {
  case NV_DTYPE_FLOAT64:
    return LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, m, s, u, ldu, vt, ldvt);
  case NV_DTYPE_COMPLEX64:
    return LAPACKE_cgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, m, s, u, ldu, vt, ldvt);
  default:
    return LAPACKE_sgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, m, s, u, ldu, vt, ldvt);
  }
}

static void svd_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  const nv__decomp_params *p = j->node->params;
  int m = j->m, n = j->n, k = m < n ? m : n;
  int64_t mn = (int64_t)m * n, mm = (int64_t)m * m, nn = (int64_t)n * n;
  nv_dtype rdt = j->dt == NV_DTYPE_COMPLEX64 ? NV_DTYPE_FLOAT32 : j->dt;
  size_t rs = nv_dtype_size(rdt);
  char *u = p->vectors ? nv__output_ptr(&j->node->out[0]) : NULL;
  char *s = nv__output_ptr(&j->node->out[p->vectors ? 1 : 0]);
  char *vh = p->vectors ? nv__output_ptr(&j->node->out[2]) : NULL;
  void *w = nv__malloc((size_t)(mn > 0 ? mn : 1) * j->es);
  void *wu = p->vectors ? nv__malloc((size_t)(mm > 0 ? mm : 1) * j->es) : NULL;
  void *wv = p->vectors ? nv__malloc((size_t)(nn > 0 ? nn : 1) * j->es) : NULL;
  if (!w || (p->vectors && (!wu || !wv))) {
    atomic_store(&j->oom, 1);
    goto done;
  }
  for (int64_t b = b0; b < b1; b++) {
    void *sb = elem(s, b * k, rs);
    void *ub = p->vectors ? elem(u, b * mm, j->es) : NULL;
    void *vb = p->vectors ? elem(vh, b * nn, j->es) : NULL;
    if (k == 0) {
      /* An empty matrix: U and Vh are identities (as MLX), S is empty. */
      if (p->vectors) {
        fill_eye(ub, j->dt, m);
        fill_eye(vb, j->dt, n);
      }
      continue;
    }
    const void *ab = elem(j->a, b * mn, j->es);
    lapack_int info = -1;
    if (!has_nan(ab, j->dt, mn)) {
      transpose(ab, m, n, w, j->es);
      info = gesdd(j->dt, p->vectors ? 'A' : 'N', m, n, w, sb, wu, wv);
    }
    if (info != 0) {
      fill_nan(sb, rdt, k);
      if (p->vectors) {
        fill_nan(ub, j->dt, mm);
        fill_nan(vb, j->dt, nn);
      }
      continue;
    }
    if (p->vectors) {
      transpose(wu, m, m, ub, j->es);
      transpose(wv, n, n, vb, j->es);
    }
  }
done:
  nv__free(w);
  nv__free(wu);
  nv__free(wv);
}

static nv_status k_svd(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__decomp_params *p = node->params;
  nv_status st = alloc_outputs(node, p->vectors ? 3 : 1);
  const nv__output *oa = in[0].meta;
  int64_t nb = batches(oa, 2);
  if (st != NV_OK || nb == 0) return st;
  pthread_once(&nancheck_once, nancheck_off);
  job j = {.node = node, .dt = oa->dtype};
  j.es = nv_dtype_size(j.dt);
  j.m = oa->shape[oa->ndim - 2];
  j.n = oa->shape[oa->ndim - 1];
  return pack_and_run(&j, &in[0], nb, svd_range, "svd");
}

/* ---- eigh ---- */

static void eigh_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  const nv__decomp_params *p = j->node->params;
  int n = j->n;
  int64_t nn = (int64_t)n * n;
  nv_dtype rdt = j->dt == NV_DTYPE_COMPLEX64 ? NV_DTYPE_FLOAT32 : j->dt;
  size_t rs = nv_dtype_size(rdt);
  char *wout = nv__output_ptr(&j->node->out[0]);
  char *vout = p->vectors ? nv__output_ptr(&j->node->out[1]) : NULL;
  void *w = nv__malloc((size_t)nn * j->es);
  if (!w) {
    atomic_store(&j->oom, 1);
    return;
  }
  char jobz = p->vectors ? 'V' : 'N', uplo = p->upper ? 'U' : 'L';
  for (int64_t b = b0; b < b1; b++) {
    const void *ab = elem(j->a, b * nn, j->es);
    void *wb = elem(wout, b * n, rs);
    lapack_int info = -1;
    if (!has_nan(ab, j->dt, nn)) {
      transpose(ab, n, n, w, j->es);
      info = j->dt == NV_DTYPE_FLOAT64   ? LAPACKE_dsyevd(LAPACK_COL_MAJOR, jobz, uplo, n, w, n, wb)
             : j->dt == NV_DTYPE_FLOAT32 ? LAPACKE_ssyevd(LAPACK_COL_MAJOR, jobz, uplo, n, w, n, wb)
                                         : LAPACKE_cheevd(LAPACK_COL_MAJOR, jobz, uplo, n, w, n, wb);
    }
    if (info != 0) {
      fill_nan(wb, rdt, n);
      if (p->vectors) fill_nan(elem(vout, b * nn, j->es), j->dt, nn);
      continue;
    }
    if (p->vectors) transpose(w, n, n, elem(vout, b * nn, j->es), j->es);
  }
  nv__free(w);
}

/* eigh and eig: the eigenvalues (and vectors) of each square matrix of input 0. */
static nv_status eigen(nv__node *node, const nv__operand *in, nv__range_fn fn, const char *op) {
  const nv__decomp_params *p = node->params;
  nv_status st = alloc_outputs(node, p->vectors ? 2 : 1);
  if (st != NV_OK || node->out[0].size == 0) return st;
  pthread_once(&nancheck_once, nancheck_off);
  job j = {.node = node, .dt = in[0].meta->dtype};
  j.es = nv_dtype_size(j.dt);
  j.m = j.n = node->out[0].shape[node->out[0].ndim - 1];
  return pack_and_run(&j, &in[0], batches(&node->out[0], 1), fn, op);
}

static nv_status k_eigh(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return eigen(node, in, eigh_range, "eigh");
}

/* ---- eig ---- */

/* The eigenvalues and (when vr) right eigenvectors of the column-major n × n matrix `w` of
 * dtype dt, as complex double: wv[n], vv[n*n] column-major. Returns LAPACK's info. */
static lapack_int geev(nv_dtype dt, int n, void *w, double complex *wv, double complex *vv,
                       void *scratch) {
  char jobvr = vv ? 'V' : 'N';
  int ldvr = n;
  if (dt == NV_DTYPE_COMPLEX64) {
    float complex *ww = scratch, *vr = ww + n;
    lapack_int info =
        LAPACKE_cgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, w, n, ww, NULL, 1, vv ? vr : NULL, ldvr);
    for (int64_t i = 0; info == 0 && i < n; i++) wv[i] = ww[i];
    for (int64_t i = 0; info == 0 && vv && i < (int64_t)n * n; i++) vv[i] = vr[i];
    return info;
  }
  /* Real: LAPACK's (wr, wi) and its packing of a conjugate pair's vectors into two columns. */
  double *wr = scratch, *wi = wr + n, *vr = wi + n;
  lapack_int info;
  if (dt == NV_DTYPE_FLOAT64) {
    info = LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, w, n, wr, wi, NULL, 1, vv ? vr : NULL,
                         ldvr);
  } else {
    /* float32 results behind the doubles, converted forward into them. */
    float *fwr = (float *)(vr + (int64_t)n * n), *fwi = fwr + n, *fvr = fwi + n;
    info = LAPACKE_sgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, w, n, fwr, fwi, NULL, 1,
                         vv ? fvr : NULL, ldvr);
    for (int64_t i = 0; i < n; i++) {
      wr[i] = fwr[i];
      wi[i] = fwi[i];
    }
    for (int64_t i = 0; vv && i < (int64_t)n * n; i++) vr[i] = fvr[i];
  }
  if (info != 0) return info;
  for (int64_t c = 0; c < n; c++) {
    wv[c] = wr[c] + I * wi[c];
    if (!vv) continue;
    if (wi[c] == 0) {
      for (int64_t i = 0; i < n; i++) vv[i + c * n] = vr[i + c * n];
    } else if (wi[c] > 0 && c + 1 < n) {
      for (int64_t i = 0; i < n; i++) {
        double re = vr[i + c * n], im = vr[i + (c + 1) * n];
        vv[i + c * n] = re + I * im;
        vv[i + (c + 1) * n] = re - I * im;
      }
      wv[c + 1] = wr[c + 1] + I * wi[c + 1];
      c++;
    }
  }
  return 0;
}

static void eig_range(void *ctx, int64_t b0, int64_t b1) {
  job *j = ctx;
  const nv__decomp_params *p = j->node->params;
  int n = j->n;
  int64_t nn = (int64_t)n * n;
  float complex *wout = nv__output_ptr(&j->node->out[0]);
  float complex *vout = p->vectors ? nv__output_ptr(&j->node->out[1]) : NULL;
  void *w = nv__malloc((size_t)nn * j->es);
  double complex *wv = nv__malloc(sizeof(double complex) * (size_t)n);
  double complex *vv = p->vectors ? nv__malloc(sizeof(double complex) * (size_t)nn) : NULL;
  /* geev's scratch: complex, n + n² complex floats; real, 2n + n² doubles, and for float32
   * 2n + n² floats behind them. */
  void *scratch = nv__malloc(sizeof(double) * (size_t)(2 * n + nn) * 2);
  if (!w || !wv || (p->vectors && !vv) || !scratch) {
    atomic_store(&j->oom, 1);
    goto done;
  }
  for (int64_t b = b0; b < b1; b++) {
    const void *ab = elem(j->a, b * nn, j->es);
    lapack_int info = -1;
    if (!has_nan(ab, j->dt, nn)) {
      transpose(ab, n, n, w, j->es);
      info = geev(j->dt, n, w, wv, vv, scratch);
    }
    if (info != 0) {
      fill_nan(wout + b * n, NV_DTYPE_COMPLEX64, n);
      if (p->vectors) fill_nan(vout + b * nn, NV_DTYPE_COMPLEX64, nn);
      continue;
    }
    for (int64_t i = 0; i < n; i++) wout[b * n + i] = (float complex)wv[i];
    for (int64_t r = 0; p->vectors && r < n; r++)
      for (int64_t c = 0; c < n; c++) vout[b * nn + r * n + c] = (float complex)vv[r + c * n];
  }
done:
  nv__free(w);
  nv__free(wv);
  nv__free(vv);
  nv__free(scratch);
}

static nv_status k_eig(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return eigen(node, in, eig_range, "eig");
}

void nv__cpu_register_linalg_decomp(nv__kernel_fn *k) {
  k[NV__PRIM_CHOLESKY] = k_cholesky;
  k[NV__PRIM_LU_FACTOR] = k_lu_factor;
  k[NV__PRIM_SOLVE_TRIANGULAR] = k_solve_triangular;
  k[NV__PRIM_QR] = k_qr;
  k[NV__PRIM_SVD] = k_svd;
  k[NV__PRIM_EIGH] = k_eigh;
  k[NV__PRIM_EIG] = k_eig;
}
