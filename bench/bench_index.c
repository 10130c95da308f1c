/* Index-family benchmarks: take of 2^24 random int32 indices from 2^26 float32, concatenate of
 * two 2^24 float32 arrays, scatter_add of 2^22 updates into 2^20 float32, transpose-copy of a
 * 4096×4096 float32 matrix. Inputs are built and evaluated once; each run builds the op and
 * evaluates it. The same seeded inputs are written to files so bench_index.py times the peers
 * on identical data. */
#include <string.h>

#include "bench.h"
#include "nuvec.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static nv_array *random_f32(int n) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = (float)(next_u64() >> 40) / (float)(1 << 24) - 0.5f;
  nv_array *a = nv_array_from_data(v, &n, 1, NV_DTYPE_FLOAT32);
  free(v);
  return a;
}

static nv_array *random_idx(int n, int bound) {
  int32_t *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = (int32_t)(next_u64() % (uint64_t)bound);
  nv_array *a = nv_array_from_data(v, &n, 1, NV_DTYPE_INT32);
  free(v);
  return a;
}

static void check(nv_array *x, const char *what) {
  if (nv_eval1(x) != NV_OK) {
    fprintf(stderr, "%s: %s\n", what, nv_last_error());
    exit(1);
  }
}

typedef struct ctx {
  nv_array *a, *b, *idx, *upd;
} ctx;

static void run_take(void *p) {
  ctx *c = p;
  nv_array *r = nv_take(c->a, c->idx, 0);
  check(r, "take");
  nv_release(r);
}

static void run_concat(void *p) {
  ctx *c = p;
  const nv_array *xs[2] = {c->a, c->b};
  nv_array *r = nv_concatenate(xs, 2, 0);
  check(r, "concatenate");
  nv_release(r);
}

static void run_scatter_add(void *p) {
  ctx *c = p;
  int axis = 0;
  nv_array *r = nv_scatter_add(c->a, (const nv_array *const *)&c->idx, 1, c->upd, &axis);
  check(r, "scatter_add");
  nv_release(r);
}

static void run_transpose_copy(void *p) {
  ctx *c = p;
  nv_array *t = nv_transpose(c->a, NULL, 0);
  nv_array *r = nv_copy(t);
  check(r, "transpose copy");
  nv_release(t);
  nv_release(r);
}

int main(void) {
  ctx c;
  c.a = random_f32(1 << 26);
  c.idx = random_idx(1 << 24, 1 << 26);
  check(c.a, "input");
  check(c.idx, "input");
  bench_run("take_2^24_from_2^26_f32", run_take, &c, 1, 7);
  nv_release(c.a);
  nv_release(c.idx);

  c.a = random_f32(1 << 24);
  c.b = random_f32(1 << 24);
  check(c.a, "input");
  check(c.b, "input");
  bench_run("concatenate_2x2^24_f32", run_concat, &c, 1, 7);
  nv_release(c.a);
  nv_release(c.b);

  c.a = random_f32(1 << 20);
  c.idx = random_idx(1 << 22, 1 << 20);
  nv_array *u = random_f32(1 << 22);
  int ush[2] = {1 << 22, 1};
  c.upd = nv_reshape(u, ush, 2);
  nv_release(u);
  check(c.upd, "input");
  bench_run("scatter_add_2^22_into_2^20_f32", run_scatter_add, &c, 1, 7);
  nv_release(c.a);
  nv_release(c.idx);
  nv_release(c.upd);

  nv_array *m = random_f32(4096 * 4096);
  int msh[2] = {4096, 4096};
  c.a = nv_reshape(m, msh, 2);
  nv_release(m);
  check(c.a, "input");
  bench_run("transpose_copy_4096^2_f32", run_transpose_copy, &c, 1, 7);
  nv_release(c.a);
  return 0;
}
