/* Element-wise throughput: x*y+z on 2^26 float32 (one lazy expression, evaluated once: the
 * product's buffer is donated to the sum), and functions on 2^24 float32 (sigmoid, tanh, exp,
 * log, log1p, expm1, erf, relu, GELU's tanh and erf forms composed of element-wise ops as models
 * once wrote them, and the fused nv_gelu, nv_gelu_approx and nv_gelu_fast_approx; log and log1p
 * on positive inputs). Each run builds, evaluates and frees. */
#include "bench.h"
#include "nuvec.h"

typedef struct ctx {
  nv_array *x, *y, *z; /* activations: x in [-4, 4), y = |x| */
  int which;
} ctx;

static void check(nv_array *r) {
  if (nv_eval1(r) != NV_OK) {
    fprintf(stderr, "bench_elementwise: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(r);
}

static void fma_case(void *p) {
  ctx *c = p;
  nv_scope_begin();
  nv_array *r = nv_scope_keep(nv_add(nv_multiply(c->x, c->y), c->z));
  nv_scope_end();
  check(r);
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as models write it. */
static nv_array *gelu(nv_array *x) {
  nv_array *x3 = nv_multiply(nv_square(x), x);
  nv_array *inner = nv_multiply_scalar(nv_add(x, nv_multiply_scalar(x3, 0.044715)),
                                       0.7978845608028654);
  return nv_multiply(nv_multiply_scalar(x, 0.5), nv_add_scalar(nv_tanh(inner), 1.0));
}

/* 0.5 x (1 + erf(x / sqrt(2))): the exact form (nn.GELU's default). */
static nv_array *gelu_erf(nv_array *x) {
  nv_array *e = nv_erf(nv_multiply_scalar(x, 0.7071067811865476));
  return nv_multiply(nv_multiply_scalar(x, 0.5), nv_add_scalar(e, 1.0));
}

static void act_case(void *p) {
  ctx *c = p;
  nv_scope_begin();
  nv_array *r;
  switch (c->which) {
    case 0: r = nv_sigmoid(c->x); break;
    case 1: r = nv_tanh(c->x); break;
    case 2: r = nv_exp(c->x); break;
    case 3: r = gelu(c->x); break;
    case 4: r = nv_log(c->y); break;
    case 5: r = nv_log1p(c->y); break;
    case 6: r = nv_expm1(c->x); break;
    case 7: r = nv_erf(c->x); break;
    case 8: r = gelu_erf(c->x); break;
    case 9: r = nv_maximum(c->x, nv_array_float(0.0f)); break;
    case 10: r = nv_gelu(c->x); break;
    case 11: r = nv_gelu_approx(c->x); break;
    default: r = nv_gelu_fast_approx(c->x); break;
  }
  r = nv_scope_keep(r);
  nv_scope_end();
  check(r);
}

static nv_array *random_f32(int64_t n, unsigned seed) {
  float *d = malloc((size_t)n * sizeof *d);
  uint32_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    d[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 8.0 - 4.0);
  }
  int shape[1] = {(int)n};
  nv_array *a = nv_array_from_data(d, shape, 1, NV_DTYPE_FLOAT32);
  free(d);
  nv_eval1(a);
  return a;
}

int main(void) {
  ctx c = {random_f32(1 << 26, 1), random_f32(1 << 26, 2), random_f32(1 << 26, 3), 0};
  bench_run("xy_plus_z_2^26", fma_case, &c, 2, 9);
  nv_release(c.x);
  nv_release(c.y);
  nv_release(c.z);
  ctx a = {random_f32(1 << 24, 4), NULL, NULL, 0};
  a.y = nv_abs(a.x);
  nv_eval1(a.y);
  const char *names[13] = {"sigmoid_2^24", "tanh_2^24", "exp_2^24", "gelu_tanh_2^24",
                           "log_2^24", "log1p_2^24", "expm1_2^24", "erf_2^24", "gelu_erf_2^24",
                           "relu_2^24", "gelu_fused_2^24", "gelu_approx_fused_2^24",
                           "gelu_fast_fused_2^24"};
  for (int i = 0; i < 13; i++) {
    a.which = i;
    bench_run(names[i], act_case, &a, 2, 11);
  }
  nv_release(a.x);
  nv_release(a.y);
  return 0;
}
