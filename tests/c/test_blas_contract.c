/* The BLAS zero rules hold whatever BLAS kernel the machine picks. This executable replaces
 * the CBLAS entry points nuvec calls with a literal one that never takes a shortcut: it
 * computes alpha·(A·B) + beta·C element by element, so alpha = 0 still multiplies A's NaNs
 * (0·NaN = NaN) and beta = 0 still reads C. That is what the OpenBLAS kernel chosen on an
 * Intel Xeon with AVX-512 FP16/AMX did; nuvec must not depend on the BLAS skipping those
 * terms: alpha = 0 computes no product, beta = 0 reads no C (and no uninitialised output). */
#include <cblas.h>
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>

#include "testutil.h"

static atomic_long literal_calls;

/* Element (i, j) of op(X) for a row-major X with leading dimension ld. */
#define AT(X, tr, ld, i, j) \
  ((tr) == CblasNoTrans ? (X)[(int64_t)(i) * (ld) + (j)] : (X)[(int64_t)(j) * (ld) + (i)])

#define LITERAL_GEMM(T, al, be)                                                           \
  do {                                                                                    \
    atomic_fetch_add(&literal_calls, 1);                                                  \
    const T *a = A, *b = B;                                                               \
    T *c = C;                                                                             \
    for (int i = 0; i < M; i++)                                                           \
      for (int j = 0; j < N; j++) {                                                       \
        T s = 0;                                                                          \
        for (int k = 0; k < K; k++) s += AT(a, TransA, lda, i, k) * AT(b, TransB, ldb, k, j); \
        c[(int64_t)i * ldc + j] = (al) * s + (be) * c[(int64_t)i * ldc + j];              \
      }                                                                                   \
  } while (0)

/* Row-major gemv: y = alpha·op(A)·x + beta·y with A rows × cols. */
#define LITERAL_GEMV(T, al, be)                                                     \
  do {                                                                              \
    atomic_fetch_add(&literal_calls, 1);                                            \
    const T *a = A, *x = X;                                                         \
    T *y = Y;                                                                       \
    int ny = trans == CblasNoTrans ? rows : cols, nx = trans == CblasNoTrans ? cols : rows; \
    for (int i = 0; i < ny; i++) {                                                  \
      T s = 0;                                                                      \
      for (int k = 0; k < nx; k++) s += AT(a, trans, lda, i, k) * x[(int64_t)k * incx]; \
      y[(int64_t)i * incy] = (al) * s + (be) * y[(int64_t)i * incy];                \
    }                                                                               \
  } while (0)

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const blasint M, const blasint N,
                 const blasint K, const float alpha, const float *A, const blasint lda,
                 const float *B, const blasint ldb, const float beta, float *C,
                 const blasint ldc) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  LITERAL_GEMM(float, alpha, beta);
}

void cblas_dgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const blasint M, const blasint N,
                 const blasint K, const double alpha, const double *A, const blasint lda,
                 const double *B, const blasint ldb, const double beta, double *C,
                 const blasint ldc) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  LITERAL_GEMM(double, alpha, beta);
}

void cblas_cgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE TransA,
                 const enum CBLAS_TRANSPOSE TransB, const blasint M, const blasint N,
                 const blasint K, const void *alpha, const void *A, const blasint lda,
                 const void *B, const blasint ldb, const void *beta, void *C,
                 const blasint ldc) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  float complex al = *(const float complex *)alpha, be = *(const float complex *)beta;
  LITERAL_GEMM(float complex, al, be);
}

void cblas_sgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans,
                 const blasint rows, const blasint cols, const float alpha, const float *A,
                 const blasint lda, const float *X, const blasint incx, const float beta,
                 float *Y, const blasint incy) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  LITERAL_GEMV(float, alpha, beta);
}

void cblas_dgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans,
                 const blasint rows, const blasint cols, const double alpha, const double *A,
                 const blasint lda, const double *X, const blasint incx, const double beta,
                 double *Y, const blasint incy) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  LITERAL_GEMV(double, alpha, beta);
}

void cblas_cgemv(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE trans,
                 const blasint rows, const blasint cols, const void *alpha, const void *A,
                 const blasint lda, const void *X, const blasint incx, const void *beta,
                 void *Y, const blasint incy) {
  (void)order; /* nuvec calls with CblasRowMajor only */
  float complex al = *(const float complex *)alpha, be = *(const float complex *)beta;
  LITERAL_GEMV(float complex, al, be);
}

/* A rows × cols array of dtype `dt` with random values (seeded) and, when `nan_at` >= 0, a NaN
 * at that flat index; the float64 values are written to `ref`. */
static nv_array *filled(int rows, int cols, nv_dtype dt, unsigned *seed, int nan_at, double *ref) {
  int n = rows * cols, shape[2] = {rows, cols};
  for (int i = 0; i < n; i++) ref[i] = i == nan_at ? NAN : test_randf(seed);
  nv_array *x = nv_array_from_data(ref, shape, 2, NV_DTYPE_FLOAT64);
  nv_array *y = nv_astype(x, dt);
  nv_release(x);
  return y;
}

static void read_as_f64(nv_array *x, double *out, int64_t n) {
  nv_array *y = nv_astype(x, NV_DTYPE_FLOAT64);
  cr_assert_eq(nv_array_read(y, out, (size_t)n * sizeof *out), NV_OK, "%s", nv_last_error());
  nv_release(y);
}

static const nv_dtype float_dtypes[] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64, NV_DTYPE_COMPLEX64,
                                        NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};

/* addmm(c, a, b, 0, 2) with a NaN in a is 2·c, for matrix (M, N > 1) and vector (M or N = 1)
 * products; addmm(c, a, b, 1, 0) with NaN in c is a·b. */
static void zero_rules(int M, int K, int N) {
  unsigned seed = test_seed() + (unsigned)(M * 31 + N);
  double a[64 * 64], b[64 * 64], c[64 * 64], got[64 * 64];
  for (size_t t = 0; t < sizeof float_dtypes / sizeof *float_dtypes; t++) {
    nv_dtype dt = float_dtypes[t];
    nv_scope_begin();
    nv_array *A = filled(M, K, dt, &seed, 0, a), *B = filled(K, N, dt, &seed, -1, b);
    nv_array *C = filled(M, N, dt, &seed, -1, c);
    read_as_f64(C, c, M * N); /* c as the dtype rounds it */
    read_as_f64(nv_addmm(C, A, B, 0.0, 2.0), got, M * N);
    for (int i = 0; i < M * N; i++)
      cr_assert_eq(got[i], 2 * c[i], "%s (%d,%d,%d) alpha=0: [%d] = %g, want %g",
                   nv_dtype_name(dt), M, K, N, i, got[i], 2 * c[i]);
    /* beta = 0: c is not read (NaN everywhere in c), the product is computed. */
    nv_array *A2 = filled(M, K, dt, &seed, -1, a);
    nv_array *Cn = filled(M, N, dt, &seed, 0, c);
    nv_array *Cnan = nv_multiply_scalar(Cn, NAN);
    read_as_f64(A2, a, M * K);
    read_as_f64(B, b, K * N);
    read_as_f64(nv_addmm(Cnan, A2, B, 1.0, 0.0), got, M * N);
    double tol = dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 ? 3e-2 : 1e-5;
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          s += a[i * K + k] * b[k * N + j];
          mag += fabs(a[i * K + k] * b[k * N + j]);
        }
        cr_assert(fabs(got[i * N + j] - s) <= tol * (mag + 1),
                  "%s (%d,%d,%d) beta=0: [%d,%d] = %g, want %g", nv_dtype_name(dt), M, K, N, i,
                  j, got[i * N + j], s);
      }
    nv_scope_end();
  }
}

Test(blas_contract, addmm_zero_rules_matrix) { zero_rules(5, 7, 6); }
Test(blas_contract, addmm_zero_rules_row_vector) { zero_rules(1, 9, 33); }
Test(blas_contract, addmm_zero_rules_column_vector) { zero_rules(33, 9, 1); }
Test(blas_contract, addmm_zero_rules_large) { zero_rules(64, 40, 64); }

/* The literal BLAS is the one nuvec calls (else the tests above prove nothing). */
Test(blas_contract, the_literal_blas_is_used) {
  nv_set_default_device(nv_cpu()); /* the CPU's own rules, also where a GPU is the default */
  long before = atomic_load(&literal_calls);
  unsigned seed = test_seed();
  double a[16], b[16], got[16];
  nv_array *A = filled(4, 4, NV_DTYPE_FLOAT32, &seed, -1, a);
  nv_array *B = filled(4, 4, NV_DTYPE_FLOAT32, &seed, -1, b);
  nv_array *P = nv_matmul(A, B);
  read_as_f64(P, got, 16);
  cr_assert_gt(atomic_load(&literal_calls), before);
  nv_release(A);
  nv_release(B);
  nv_release(P);
}

/* A matmul's output buffer is not initialised: the pool hands back a freed block as it was.
 * Here the freed block held NaN, and a BLAS that reads C when beta = 0 must not see it. */
static void poisoned_output(int M, int K, int N, nv_dtype dt) {
  unsigned seed = test_seed() + (unsigned)(M + 7 * N);
  double *a = malloc(sizeof(double) * (size_t)M * K), *b = malloc(sizeof(double) * (size_t)K * N);
  double *got = malloc(sizeof(double) * (size_t)M * N);
  nv_array *A = filled(M, K, dt, &seed, -1, a), *B = filled(K, N, dt, &seed, -1, b);
  nv_array *AB[2] = {A, B};
  cr_assert_eq(nv_eval(AB, 2), NV_OK);
  read_as_f64(A, a, (int64_t)M * K);
  read_as_f64(B, b, (int64_t)K * N);
  int shape[2] = {M, N};
  for (int round = 0; round < 3; round++) {
    /* A NaN-filled buffer of the output's size goes back to the pool just before the product
     * takes one. */
    nv_array *poison = nv_full(shape, 2, NAN, dt);
    cr_assert_eq(nv_eval(&poison, 1), NV_OK);
    nv_release(poison);
    nv_array *P = nv_matmul(A, B);
    read_as_f64(P, got, (int64_t)M * N);
    nv_release(P);
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        for (int k = 0; k < K; k++) s += a[(int64_t)i * K + k] * b[(int64_t)k * N + j];
        cr_assert(fabs(got[(int64_t)i * N + j] - s) <= 1e-4 * (fabs(s) + 1),
                  "%s (%d,%d,%d): [%d,%d] = %g, want %g", nv_dtype_name(dt), M, K, N, i, j,
                  got[(int64_t)i * N + j], s);
      }
  }
  nv_release(A);
  nv_release(B);
  free(a);
  free(b);
  free(got);
}

Test(blas_contract, matmul_does_not_read_its_uninitialised_output) {
  poisoned_output(48, 20, 40, NV_DTYPE_FLOAT32);
  poisoned_output(1, 20, 300, NV_DTYPE_FLOAT32);
  poisoned_output(300, 20, 1, NV_DTYPE_FLOAT64);
  poisoned_output(24, 8, 24, NV_DTYPE_COMPLEX64);
}
