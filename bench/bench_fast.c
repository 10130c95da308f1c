/* The fast family's cases: rms_norm and layer_norm (with weight, and bias) over the rows of
 * 4096x4096 float32, and rope of (1, 32, 2048, 128) float32 (base 10000, offset 5). Each run
 * builds the op on evaluated inputs and evaluates it. */
#include <stdint.h>
#include <string.h>

#include "bench.h"
#include "nuvec.h"

typedef struct bcase {
  nv_array *x, *w, *b;
  int kind;
} bcase;

enum { RMS, LAYER, ROPE };

static void run(void *ctx) {
  bcase *c = ctx;
  nv_array *r = c->kind == RMS     ? nv_fast_rms_norm(c->x, c->w, 1e-5)
                : c->kind == LAYER ? nv_fast_layer_norm(c->x, c->w, c->b, 1e-5)
                                   : nv_fast_rope(c->x, 128, false, 10000.0, 1.0, c->b, NULL);
  if (nv_eval1(r) != NV_OK) {
    fprintf(stderr, "bench_fast: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(r);
}

/* Values in [-1, 1) from a fixed xorshift stream. */
static nv_array *rnd(const int *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *v = malloc((size_t)n * sizeof *v);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v[i] = (float)(s >> 40) / (float)(1 << 23) - 1.0f;
  }
  nv_array *x = nv_array_from_data(v, shape, ndim, NV_DTYPE_FLOAT32);
  free(v);
  nv_eval1(x);
  return x;
}

int main(void) {
  int sq[2] = {4096, 4096}, vs[1] = {4096}, rs[4] = {1, 32, 2048, 128};
  nv_array *x = rnd(sq, 2), *w = rnd(vs, 1), *b = rnd(vs, 1), *q = rnd(rs, 4);
  nv_array *off = nv_array_scalar(5, NV_DTYPE_INT32);
  bcase c = {x, w, b, RMS};
  bench_run("rms_norm_4096x4096_f32", run, &c, 2, 15);
  c.kind = LAYER;
  bench_run("layer_norm_4096x4096_f32", run, &c, 2, 15);
  c = (bcase){q, NULL, off, ROPE};
  bench_run("rope_1x32x2048x128_f32", run, &c, 2, 15);
  nv_release(x), nv_release(w), nv_release(b), nv_release(q), nv_release(off);
  return 0;
}
