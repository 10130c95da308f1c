/* The eval-overhead chain: 1000 iterations of x = x * 0.5 + 1 on 1024 float32 (2000 ops),
 * built lazily and evaluated once; the time per op covers building and evaluating. */
#include "bench.h"
#include "nuvec.h"

static void chain(void *ctx) {
  (void)ctx;
  int shape[1] = {1024};
  nv_array *x = nv_ones(shape, 1, NV_DTYPE_FLOAT32);
  for (int i = 0; i < 1000; i++) {
    nv_array *y = nv_multiply_scalar(x, 0.5);
    nv_release(x);
    x = nv_add_scalar(y, 1.0);
    nv_release(y);
  }
  if (nv_eval1(x) != NV_OK) {
    fprintf(stderr, "chain: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(x);
}

int main(void) {
  double t = bench_run("chain_2000_ops", chain, NULL, 3, 21);
  fprintf(stderr, "eval chain: %.3f us/op\n", t / 2000 * 1e6);
  return 0;
}
