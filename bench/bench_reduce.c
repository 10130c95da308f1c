/* The reduce family's cases: sum of 2^26 float32, softmax over the rows of 4096x4096 float32,
 * sort of 2^24 float32, argmax over each axis and cumsum along each axis of 4096x4096 float32.
 * Each run builds the op on an evaluated input and evaluates it. */
#include <stdint.h>
#include <string.h>

#include "bench.h"
#include "nuvec.h"

typedef struct bcase {
  nv_array *x;
  int kind;
  int axis;
} bcase;

enum { SUM, SOFTMAX, SORT, ARGMAX, CUMSUM };

static void run(void *ctx) {
  bcase *c = ctx;
  nv_array *r = NULL;
  int last = -1;
  switch (c->kind) {
    case SUM: r = nv_sum(c->x, NULL, 0, false); break;
    case SOFTMAX: r = nv_softmax(c->x, &last, 1, false); break;
    case SORT: r = nv_sort(c->x, NULL); break;
    case ARGMAX: r = nv_argmax(c->x, &c->axis, false); break;
    default: r = nv_cumsum(c->x, &c->axis, false, true); break;
  }
  if (nv_eval1(r) != NV_OK) {
    fprintf(stderr, "bench_reduce: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(r);
}

/* Standard-normal-ish float32 values from a fixed xorshift stream (sum of uniforms). */
static nv_array *randn(int64_t n, const int *shape, int ndim) {
  float *v = malloc((size_t)n * sizeof *v);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < n; i++) {
    float acc = 0;
    for (int k = 0; k < 4; k++) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      acc += (float)(s >> 40) / (float)(1 << 24);
    }
    v[i] = (acc - 2.0f) * 1.7f;
  }
  nv_array *x = nv_array_from_data(v, shape, ndim, NV_DTYPE_FLOAT32);
  free(v);
  nv_eval1(x);
  return x;
}

int main(void) {
  int big[1] = {1 << 26}, mid[1] = {1 << 24}, sq[2] = {4096, 4096};
  nv_array *a = randn(big[0], big, 1), *b = randn(mid[0], mid, 1), *m = randn(1 << 24, sq, 2);
  bcase c;
  c = (bcase){a, SUM, 0};
  bench_run("sum_2^26_f32", run, &c, 3, 21);
  c = (bcase){m, SOFTMAX, 0};
  bench_run("softmax_4096x4096_f32", run, &c, 2, 11);
  c = (bcase){b, SORT, 0};
  bench_run("sort_2^24_f32", run, &c, 1, 7);
  for (int ax = 0; ax < 2; ax++) {
    char name[64];
    c = (bcase){m, ARGMAX, ax};
    snprintf(name, sizeof name, "argmax_4096x4096_axis%d", ax);
    bench_run(name, run, &c, 1, 11);
    c = (bcase){m, CUMSUM, ax};
    snprintf(name, sizeof name, "cumsum_4096x4096_axis%d", ax);
    bench_run(name, run, &c, 1, 7);
  }
  nv_release(a);
  nv_release(b);
  nv_release(m);
  return 0;
}
