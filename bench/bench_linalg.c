/* Matrix products through nuvec (graph building and evaluation included) beside OpenBLAS
 * called directly on the same data in the same process: 2048³ and 512³ float32, a batch of
 * 64 products of 128³, a transposed operand (aᵀ @ b, 1024³) and 1024³ float64. Each case
 * prints "BENCH nuvec_<case>" and "BENCH blas_<case>". */
#include <cblas.h>
#include <unistd.h>

#include "bench.h"
#include "nuvec.h"

typedef struct mm_case {
  const char *name;
  int batch, m, k, n;
  bool trans_a; /* a is stored (k, m) and used transposed */
  nv_dtype dt;
  nv_array *a, *b; /* evaluated inputs */
  const void *pa, *pb;
  void *out; /* OpenBLAS's output */
} mm_case;

static void *fill(nv_dtype dt, int64_t n, unsigned seed) {
  size_t isz = dt == NV_DTYPE_FLOAT64 ? 8 : 4;
  void *p = malloc((size_t)n * isz);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    double v = (double)(seed >> 8) / (double)(1u << 24) - 0.5;
    if (isz == 8)
      ((double *)p)[i] = v;
    else
      ((float *)p)[i] = (float)v;
  }
  return p;
}

static void run_nuvec(void *ctx) {
  mm_case *c = ctx;
  nv_array *a = c->a;
  if (c->trans_a) {
    int perm[2] = {1, 0};
    a = nv_transpose(c->a, perm, 2);
  }
  nv_array *z = nv_matmul(a, c->b);
  if (nv_eval1(z) != NV_OK) {
    fprintf(stderr, "%s: %s\n", c->name, nv_last_error());
    exit(1);
  }
  nv_release(z);
  if (a != c->a) nv_release(a);
}

extern void openblas_set_num_threads(int);

static void run_blas(void *ctx) {
  mm_case *c = ctx;
  int64_t sa = (int64_t)c->m * c->k, sb = (int64_t)c->k * c->n, so = (int64_t)c->m * c->n;
  CBLAS_TRANSPOSE ta = c->trans_a ? CblasTrans : CblasNoTrans;
  int lda = c->trans_a ? c->m : c->k;
  for (int t = 0; t < c->batch; t++) {
    if (c->dt == NV_DTYPE_FLOAT64)
      cblas_dgemm(CblasRowMajor, ta, CblasNoTrans, c->m, c->n, c->k, 1,
                  (const double *)c->pa + t * sa, lda, (const double *)c->pb + t * sb, c->n, 0,
                  (double *)c->out + t * so, c->n);
    else
      cblas_sgemm(CblasRowMajor, ta, CblasNoTrans, c->m, c->n, c->k, 1,
                  (const float *)c->pa + t * sa, lda, (const float *)c->pb + t * sb, c->n, 0,
                  (float *)c->out + t * so, c->n);
  }
}

static void bench_case(mm_case *c, int repeat) {
  int64_t na = (int64_t)c->batch * c->m * c->k, nb = (int64_t)c->batch * c->k * c->n;
  void *da = fill(c->dt, na, 1), *db = fill(c->dt, nb, 2);
  int sa3[3] = {c->batch, c->trans_a ? c->k : c->m, c->trans_a ? c->m : c->k};
  int sb3[3] = {c->batch, c->k, c->n};
  int nd = c->batch > 1 ? 3 : 2;
  c->a = nv_array_from_data(da, nd == 3 ? sa3 : sa3 + 1, nd, c->dt);
  c->b = nv_array_from_data(db, nd == 3 ? sb3 : sb3 + 1, nd, c->dt);
  nv_array *xs[2] = {c->a, c->b};
  nv_eval(xs, 2);
  c->pa = da;
  c->pb = db;
  c->out = malloc((size_t)c->batch * c->m * c->n * (c->dt == NV_DTYPE_FLOAT64 ? 8 : 4));
  char name[96];
  /* Alternate the two so that neither gets a warmer machine. OpenBLAS called directly runs
   * with its own threads (one per core); nuvec keeps it single-threaded and cuts products
   * over its pool. OpenBLAS's idle workers spin for a while after each call, so the rounds
   * are separated by a pause in which they go to sleep. */
  for (int round = 0; round < 2; round++) {
    snprintf(name, sizeof name, "%s_%s", round ? "nuvec" : "blas", c->name);
    if (!round) openblas_set_num_threads(nv_get_num_threads());
    bench_run(name, round ? run_nuvec : run_blas, c, 2, repeat);
    if (!round) openblas_set_num_threads(1);
    usleep(500000);
  }
  nv_release(c->a);
  nv_release(c->b);
  free(da);
  free(db);
  free(c->out);
}

#define CASE(NAME, B, M, K, N, T, DT) \
  {.name = NAME, .batch = B, .m = M, .k = K, .n = N, .trans_a = T, .dt = DT}

int main(void) {
  mm_case cases[] = {
      CASE("matmul_2048_f32", 1, 2048, 2048, 2048, false, NV_DTYPE_FLOAT32),
      CASE("matmul_512_f32", 1, 512, 512, 512, false, NV_DTYPE_FLOAT32),
      CASE("bmm_64x128_f32", 64, 128, 128, 128, false, NV_DTYPE_FLOAT32),
      CASE("matmul_T_1024_f32", 1, 1024, 1024, 1024, true, NV_DTYPE_FLOAT32),
      CASE("matmul_1024_f64", 1, 1024, 1024, 1024, false, NV_DTYPE_FLOAT64),
  };
  int repeats[] = {7, 21, 21, 11, 11};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) bench_case(&cases[i], repeats[i]);
  return 0;
}
