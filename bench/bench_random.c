/* The random family's samplers on 2^20 samples (and categorical over 4096 x 64 logits):
 * build, evaluate and free, per case. bench/bench_random.py times NumPy and MLX beside it. */
#include "bench.h"
#include "nuvec.h"

#define N (1 << 20)

typedef struct bcase {
  const char *name;
  nv_array *(*make)(nv_array *key);
} bcase;

static const int shape[1] = {N};

static nv_array *bits(nv_array *k) { return nv_random_bits(shape, 1, 4, k); }
static nv_array *uniform(nv_array *k) {
  return nv_random_uniform_scalar(0, 1, shape, 1, NV_DTYPE_FLOAT32, k);
}
static nv_array *uniform_ab(nv_array *k) {
  return nv_random_uniform_scalar(-2, 3, shape, 1, NV_DTYPE_FLOAT32, k);
}
static nv_array *normal(nv_array *k) {
  return nv_random_normal(shape, 1, NV_DTYPE_FLOAT32, 0, 1, k);
}
static nv_array *randint(nv_array *k) {
  return nv_random_randint_scalar(0, 1000, shape, 1, NV_DTYPE_INT32, k);
}
static nv_array *bernoulli(nv_array *k) { return nv_random_bernoulli_scalar(0.3, shape, 1, k); }
static nv_array *gumbel(nv_array *k) { return nv_random_gumbel(shape, 1, NV_DTYPE_FLOAT32, k); }
static nv_array *laplace(nv_array *k) {
  return nv_random_laplace(shape, 1, NV_DTYPE_FLOAT32, 0, 1, k);
}
static nv_array *truncated(nv_array *k) {
  return nv_random_truncated_normal_scalar(-1, 2, shape, 1, NV_DTYPE_FLOAT32, k);
}
static nv_array *permutation(nv_array *k) { return nv_random_permutation_n(N, k); }
static nv_array *categorical(nv_array *k) {
  int ls[2] = {4096, 64};
  nv_array *logits = nv_zeros(ls, 2, NV_DTYPE_FLOAT32);
  nv_array *r = nv_random_categorical(logits, -1, NULL, 0, k);
  nv_release(logits);
  return r;
}

static const bcase cases[] = {
    {"bits_u32_1M", bits},       {"uniform_f32_1M", uniform},
    {"uniform_ab_f32_1M", uniform_ab}, {"normal_f32_1M", normal},
    {"randint_i32_1M", randint}, {"bernoulli_1M", bernoulli},
    {"gumbel_f32_1M", gumbel},   {"laplace_f32_1M", laplace},
    {"truncated_normal_f32_1M", truncated}, {"permutation_1M", permutation},
    {"categorical_4096x64", categorical},
};

static nv_array *key;
static const bcase *current;

static void run(void *ctx) {
  (void)ctx;
  nv_array *x = current->make(key);
  if (nv_eval1(x) != NV_OK) {
    fprintf(stderr, "%s: %s\n", current->name, nv_last_error());
    exit(1);
  }
  nv_release(x);
}

int main(void) {
  key = nv_random_key(0);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    current = &cases[i];
    bench_run(current->name, run, NULL, 2, 15);
  }
  nv_release(key);
  return 0;
}
