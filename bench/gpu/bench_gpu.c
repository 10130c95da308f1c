/* nuvec's side of the GPU benchmarks (bench/gpu/run.sh runs it beside bench_torch.py on the same
 * machine and prints the ratios). Each case is timed eagerly: build the graph, evaluate, wait
 * for the GPU; the median of the repeats is printed as "BENCH <case> <seconds>". Inputs are
 * random (made on the CPU, moved to the GPU once in the warm-up). */
#include <string.h>

#include "bench.h"
#include "nuvec.h"

static nv_array *rand_on_gpu(const int *shape, int ndim, nv_dtype dtype) {
  nv_stream_enter(nv_default_stream(nv_cpu()));
  nv_array *r = nv_random_uniform_scalar(-1, 1, shape, ndim, NV_DTYPE_FLOAT32, NULL);
  nv_stream_exit();
  nv_array *g = dtype == NV_DTYPE_FLOAT32 ? nv_add_scalar(r, 0) : nv_astype(r, dtype);
  nv_release(r);
  if (nv_eval1(g) != NV_OK) {
    fprintf(stderr, "input: %s\n", nv_last_error());
    exit(1);
  }
  return g;
}

static void sync_gpu(void) { nv_stream_synchronize(nv_default_stream(nv_gpu(0))); }

static void check(nv_status s, const char *what) {
  if (s != NV_OK) {
    fprintf(stderr, "%s: %s\n", what, nv_last_error());
    exit(1);
  }
}

typedef struct args {
  nv_array *a, *b, *c;
  int axis;
  int n;
} args;

static void run_fma(void *p) {
  args *x = p;
  nv_array *y = nv_add(nv_multiply(x->a, x->b), x->c);
  check(nv_eval1(y), "fma");
  nv_release(y);
}

static void run_softmax(void *p) {
  args *x = p;
  int ax = -1;
  nv_array *y = nv_softmax(x->a, &ax, 1, false);
  check(nv_eval1(y), "softmax");
  nv_release(y);
}

static void run_sum(void *p) {
  args *x = p;
  nv_array *y = nv_sum(x->a, &x->axis, 1, false);
  check(nv_eval1(y), "sum");
  nv_release(y);
}

static void run_matmul(void *p) {
  args *x = p;
  nv_array *y = nv_matmul(x->a, x->b);
  check(nv_eval1(y), "matmul");
  nv_release(y);
}

/* 1000 dependent tiny ops: y = y * s + t on a 16-element array, evaluated at the end. */
static void run_tiny(void *p) {
  args *x = p;
  nv_array *y = nv_retain(x->a);
  for (int i = 0; i < x->n; i++) {
    nv_array *z = i % 2 ? nv_multiply(y, x->b) : nv_add(y, x->c);
    nv_release(y);
    y = z;
  }
  check(nv_eval1(y), "tiny");
  nv_release(y);
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  if (!nv_device_is_available(nv_gpu(0))) {
    fprintf(stderr, "no GPU\n");
    return 77;
  }
  nv_set_default_device(nv_gpu(0));
#define WANT(name) (!only || strstr(name, only))
  if (WANT("fma_2^28_f32")) {
    int shape[1] = {1 << 28};
    args x = {rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32),
              rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), 0, 0};
    bench_run("fma_2^28_f32", run_fma, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  if (WANT("softmax_bf16_32768x4096")) {
    int shape[2] = {32768, 4096};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16), NULL, NULL, 0, 0};
    bench_run("softmax_bf16_32768x4096", run_softmax, &x, 3, 20);
    nv_release(x.a);
  }
  if (WANT("sum_axis")) {
    int shape[3] = {64, 1024, 1024};
    args x = {rand_on_gpu(shape, 3, NV_DTYPE_FLOAT32), NULL, NULL, 0, 0};
    const char *names[3] = {"sum_axis0_64x1024x1024_f32", "sum_axis1_64x1024x1024_f32",
                            "sum_axis2_64x1024x1024_f32"};
    for (int a = 0; a < 3; a++) {
      x.axis = a;
      bench_run(names[a], run_sum, &x, 3, 20);
    }
    nv_release(x.a);
  }
  if (WANT("matmul_bf16_8192")) {
    int shape[2] = {8192, 8192};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16), rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16),
              NULL, 0, 0};
    bench_run("matmul_bf16_8192", run_matmul, &x, 3, 10);
    nv_release(x.a), nv_release(x.b);
  }
  if (WANT("matmul_f32_4096")) {
    int shape[2] = {4096, 4096};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32),
              NULL, 0, 0};
    bench_run("matmul_f32_4096", run_matmul, &x, 3, 10);
    nv_release(x.a), nv_release(x.b);
  }
  if (WANT("tiny_1000")) {
    int shape[1] = {16};
    args x = {rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32),
              rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), 0, 1000};
    bench_run("tiny_1000_ops", run_tiny, &x, 5, 30);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  sync_gpu();
  printf("fallbacks %zu\n", nv_gpu_fallback_count());
  return 0;
}
