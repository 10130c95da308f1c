/* The comparative op set of bench/bench_suite.py (after MLX's comparative benchmarks): each
 * case builds one op on evaluated float32 inputs and evaluates it; the median of the repeats is
 * printed as "BENCH <case> <seconds>". bench_suite.py runs the same cases, with the same
 * shapes, in NumPy, MLX's CPU build and PyTorch. Usage: bench_suite [case ...] (none: all). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bench.h"
#include "nuvec.h"

/* Inputs shared by the cases, made once. */
static nv_array *x3, *y3, *row, *sq, *wide, *mat_a, *mat_b, *bat_a, *bat_b, *thin_a, *thin_b,
    *vec, *gemv_w;

typedef nv_array *(*op_fn)(void);

static const int ax0 = 0, ax1 = 1, ax2 = 2, last = -1;

static nv_array *op_add(void) { return nv_add(x3, y3); }
static nv_array *op_add_row(void) { return nv_add(x3, row); }
static nv_array *op_add_transposed(void) {
  int order[3] = {0, 2, 1};
  nv_array *t = nv_transpose(x3, order, 3), *r = nv_add(x3, t);
  nv_release(t);
  return r;
}
static nv_array *op_mul_scalar(void) { return nv_multiply_scalar(x3, 0.5); }
static nv_array *op_sum0(void) { return nv_sum(x3, &ax0, 1, false); }
static nv_array *op_sum1(void) { return nv_sum(x3, &ax1, 1, false); }
static nv_array *op_sum2(void) { return nv_sum(x3, &ax2, 1, false); }
static nv_array *op_argmax0(void) { return nv_argmax(x3, &ax0, false); }
static nv_array *op_argmax1(void) { return nv_argmax(x3, &ax1, false); }
static nv_array *op_argmax2(void) { return nv_argmax(x3, &ax2, false); }
static nv_array *op_softmax(void) { return nv_softmax(x3, &last, 1, false); }
static nv_array *op_logsumexp(void) { return nv_logsumexp(x3, &last, 1, false); }
static nv_array *op_cumsum1(void) { return nv_cumsum(x3, &ax1, false, true); }
static nv_array *op_cumsum2(void) { return nv_cumsum(x3, &ax2, false, true); }
static nv_array *op_sort(void) { return nv_sort(sq, &last); }
static nv_array *op_topk(void) { return nv_topk(wide, 8, &last); }
static nv_array *op_concatenate(void) {
  const nv_array *xs[2] = {x3, y3};
  return nv_concatenate(xs, 2, 1);
}
static nv_array *op_matmul_square(void) { return nv_matmul(mat_a, mat_b); }
static nv_array *op_matmul_batched(void) { return nv_matmul(bat_a, bat_b); }
static nv_array *op_matmul_thin(void) { return nv_matmul(thin_a, thin_b); }
static nv_array *op_gemv(void) { return nv_matmul(vec, gemv_w); }
static nv_array *op_relu(void) { return nv_maximum_scalar(x3, 0.0); }
/* gelu and silu composed as mlx.nn composes them. */
static nv_array *op_gelu(void) {
  nv_scope_begin();
  nv_array *r = nv_scope_keep(nv_multiply_scalar(
      nv_multiply(x3, nv_add_scalar(nv_erf(nv_multiply_scalar(x3, M_SQRT1_2)), 1.0)), 0.5));
  nv_scope_end();
  return r;
}
static nv_array *op_silu(void) {
  nv_array *s = nv_sigmoid(x3), *r = nv_multiply(x3, s);
  nv_release(s);
  return r;
}
static nv_array *op_sigmoid(void) { return nv_sigmoid(x3); }
static nv_array *op_exp(void) { return nv_exp(x3); }
static nv_array *op_tanh(void) { return nv_tanh(x3); }

static const struct {
  const char *name;
  op_fn fn;
} cases[] = {
    {"add", op_add},
    {"add_bcast_row", op_add_row},
    {"add_transposed", op_add_transposed},
    {"mul_scalar", op_mul_scalar},
    {"sum_axis0", op_sum0},
    {"sum_axis1", op_sum1},
    {"sum_axis2", op_sum2},
    {"argmax_axis0", op_argmax0},
    {"argmax_axis1", op_argmax1},
    {"argmax_axis2", op_argmax2},
    {"softmax_last", op_softmax},
    {"logsumexp_last", op_logsumexp},
    {"cumsum_axis1", op_cumsum1},
    {"cumsum_axis2", op_cumsum2},
    {"sort_last", op_sort},
    {"topk8_last", op_topk},
    {"concatenate_axis1", op_concatenate},
    {"matmul_1024", op_matmul_square},
    {"matmul_batched_64x128", op_matmul_batched},
    {"matmul_8192x128x512", op_matmul_thin},
    {"gemv_4096", op_gemv},
    {"relu", op_relu},
    {"gelu", op_gelu},
    {"silu", op_silu},
    {"sigmoid", op_sigmoid},
    {"exp", op_exp},
    {"tanh", op_tanh},
};

/* Uniform values in [-2, 2) from an xorshift stream, evaluated. */
static nv_array *rand_array(const int *shape, int ndim, uint64_t seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *v = malloc((size_t)n * sizeof *v);
  if (!v) return nv_zeros(shape, ndim, NV_DTYPE_FLOAT32);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v[i] = (float)(s >> 40) / (float)(1 << 22) - 2.0f;
  }
  nv_array *x = nv_array_from_data(v, shape, ndim, NV_DTYPE_FLOAT32);
  free(v);
  nv_eval1(x);
  return x;
}

static void run(void *ctx) {
  op_fn fn = *(op_fn *)ctx;
  nv_array *r = fn();
  if (nv_eval1(r) != NV_OK) {
    fprintf(stderr, "bench_suite: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(r);
}

int main(int argc, char **argv) {
  int s3[3] = {32, 512, 512}, s1[1] = {512}, ssq[2] = {1024, 1024}, swide[2] = {1024, 4096};
  int sm[2] = {1024, 1024}, sb[3] = {64, 128, 128}, sta[2] = {8192, 128}, stb[2] = {128, 512};
  int sv[2] = {1, 4096}, sw[2] = {4096, 4096};
  x3 = rand_array(s3, 3, 1), y3 = rand_array(s3, 3, 2), row = rand_array(s1, 1, 3);
  sq = rand_array(ssq, 2, 4), wide = rand_array(swide, 2, 5);
  mat_a = rand_array(sm, 2, 6), mat_b = rand_array(sm, 2, 7);
  bat_a = rand_array(sb, 3, 8), bat_b = rand_array(sb, 3, 9);
  thin_a = rand_array(sta, 2, 10), thin_b = rand_array(stb, 2, 11);
  vec = rand_array(sv, 2, 12), gemv_w = rand_array(sw, 2, 13);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    bool wanted = argc < 2;
    for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], cases[i].name);
    if (!wanted) continue;
    op_fn fn = cases[i].fn;
    bench_run(cases[i].name, run, &fn, 1, 7);
  }
  nv_array *all[] = {x3,    y3,    row,    sq,     wide, mat_a, mat_b,
                     bat_a, bat_b, thin_a, thin_b, vec,  gemv_w};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) nv_release(all[i]);
  return 0;
}
