/* One gradient step of a 4-layer MLP through nuvec's transforms: batch 256, width 1024,
 * float32, tanh between the layers, mean squared error; value_and_grad of the loss with
 * respect to the 8 parameters, then p - lr * g for each, all evaluated. bench_grad.py gives its
 * peers the same shapes, scales and uniform distributions. Prints "BENCH grad_step_mlp4 <s>"
 * and, for scale, "BENCH forward_mlp4 <s>" (the loss alone). */
#include "bench.h"
#include "nuvec.h"

enum { BATCH = 256, WIDTH = 1024, LAYERS = 4 };

/* Values uniform in [-0.5, 0.5) times `scale`, from an LCG. */
static nv_array *fill(const int *shape, int nd, unsigned seed, float scale) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * scale;
  }
  nv_array *a = nv_array_from_data(p, shape, nd, NV_DTYPE_FLOAT32);
  free(p);
  return a;
}

/* loss(w0, b0, ..., w3, b3, x, y) = Σ (mlp(x) - y)² / (BATCH * WIDTH). */
static nv_status mlp_loss(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *h = nv_vec_get(in, 2 * LAYERS);
  for (int l = 0; l < LAYERS; l++) {
    h = nv_add(nv_matmul(h, nv_vec_get(in, 2 * (size_t)l)), nv_vec_get(in, 2 * (size_t)l + 1));
    if (l < LAYERS - 1) h = nv_tanh(h);
  }
  nv_array *d = nv_subtract(h, nv_vec_get(in, 2 * LAYERS + 1));
  nv_array *n = nv_array_float((float)(BATCH * WIDTH));
  return nv_vec_push(out, nv_divide(nv_sum(nv_multiply(d, d), NULL, 0, false), n));
}

typedef struct bench_ctx {
  nv_closure *f, *vg;
  nv_vec *in;
  nv_array *lr;
} bench_ctx;

static void die(const char *what) {
  fprintf(stderr, "bench_grad: %s: %s\n", what, nv_last_error());
  exit(1);
}

static void step(void *p) {
  bench_ctx *c = p;
  nv_scope_begin();
  nv_vec *out = nv_vec_new(), *upd = nv_vec_new();
  if (nv_closure_apply(c->vg, c->in, out) != NV_OK) die("value_and_grad");
  nv_vec_push(upd, nv_vec_get(out, 0));
  for (size_t i = 0; i < 2 * LAYERS; i++) {
    nv_array *g = nv_vec_get(out, 1 + i);
    nv_vec_push(upd, nv_subtract(nv_vec_get(c->in, i), nv_multiply(g, c->lr)));
  }
  if (nv_eval_vec(upd) != NV_OK) die("eval");
  nv_vec_free(upd);
  nv_vec_free(out);
  nv_scope_end();
}

static void forward(void *p) {
  bench_ctx *c = p;
  nv_scope_begin();
  nv_vec *out = nv_vec_new();
  if (nv_closure_apply(c->f, c->in, out) != NV_OK || nv_eval_vec(out) != NV_OK) die("forward");
  nv_vec_free(out);
  nv_scope_end();
}

int main(void) {
  bench_ctx c = {0};
  c.in = nv_vec_new();
  float scale = 2.0f / 32.0f; /* about 1/sqrt(WIDTH) per weight, so tanh stays unsaturated */
  for (int l = 0; l < LAYERS; l++) {
    nv_array *w = fill((int[]){WIDTH, WIDTH}, 2, 1u + 2u * (unsigned)l, scale);
    nv_array *b = fill((int[]){WIDTH}, 1, 2u + 2u * (unsigned)l, 0.1f);
    nv_vec_push(c.in, w);
    nv_vec_push(c.in, b);
    nv_release(w);
    nv_release(b);
  }
  nv_array *x = fill((int[]){BATCH, WIDTH}, 2, 101u, 2.0f);
  nv_array *y = fill((int[]){BATCH, WIDTH}, 2, 102u, 1.0f);
  nv_vec_push(c.in, x);
  nv_vec_push(c.in, y);
  nv_release(x);
  nv_release(y);
  if (nv_eval_vec(c.in) != NV_OK) die("inputs");
  c.lr = nv_array_float(0.01f);
  c.f = nv_closure_new(mlp_loss, NULL, NULL);
  int argnums[2 * LAYERS];
  for (int i = 0; i < 2 * LAYERS; i++) argnums[i] = i;
  c.vg = nv_value_and_grad(c.f, argnums, 2 * LAYERS);
  bench_run("forward_mlp4", forward, &c, 2, 11);
  bench_run("grad_step_mlp4", step, &c, 2, 11);
  nv_closure_release(c.vg);
  nv_closure_release(c.f);
  nv_release(c.lr);
  nv_vec_free(c.in);
  return 0;
}
