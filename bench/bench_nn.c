/* src/nn: one optimizer step (update, then evaluate the new parameters with the state) and
 * clip_grad_norm, on a 1M-parameter set (four 512x512 weights and their biases) and on many
 * small parameters (overhead). bench/bench_nn.py times MLX's optimizers beside it. */
#include <string.h>

#include "bench.h"
#include "nuvec.h"

typedef struct set {
  nv_map *params, *grads;
  nv_optimizer *opt;
} set;

static nv_array *filled(int rows, int cols, float scale) {
  int shape[2] = {rows, cols};
  size_t n = (size_t)rows * (size_t)cols;
  float *v = malloc(n * sizeof *v);
  unsigned s = 12345u + (unsigned)n;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = scale * ((float)(s >> 8) / 16777216.0f - 0.5f);
  }
  nv_array *x = nv_array_from_data(v, shape, cols ? 2 : 1, NV_DTYPE_FLOAT32);
  free(v);
  return x;
}

/* `n` weights of rows x cols and their bias rows. */
static void make_set(set *s, int n, int rows, int cols) {
  s->params = nv_map_new();
  s->grads = nv_map_new();
  for (int i = 0; i < n; i++) {
    char k[64];
    nv_array *w = filled(rows, cols, 0.1f), *g = filled(rows, cols, 0.01f);
    nv_array *b = filled(1, cols, 0.1f), *gb = filled(1, cols, 0.01f);
    snprintf(k, sizeof k, "layers.%d.weight", i);
    nv_map_set(s->params, k, w);
    nv_map_set(s->grads, k, g);
    snprintf(k, sizeof k, "layers.%d.bias", i);
    nv_map_set(s->params, k, b);
    nv_map_set(s->grads, k, gb);
    nv_release(w);
    nv_release(g);
    nv_release(b);
    nv_release(gb);
  }
  const nv_map *maps[2] = {s->params, s->grads};
  nv_params_eval(maps, 2);
}

static void check(nv_status st, const char *what) {
  if (st != NV_OK) {
    fprintf(stderr, "%s: %s\n", what, nv_last_error());
    exit(1);
  }
}

static void step(void *ctx) {
  set *s = ctx;
  nv_map *next = NULL;
  check(nv_optimizer_update(s->opt, s->params, s->grads, &next), "update");
  const nv_map *maps[2] = {next, nv_optimizer_state(s->opt)};
  check(nv_params_eval(maps, 2), "eval");
  nv_map_free(s->params);
  s->params = next;
}

static void clip(void *ctx) {
  set *s = ctx;
  nv_map *c = NULL;
  nv_array *norm = NULL;
  check(nv_clip_grad_norm(s->grads, 0.5, &c, &norm), "clip");
  const nv_map *maps[1] = {c};
  check(nv_params_eval(maps, 1), "eval");
  check(nv_eval1(norm), "eval");
  nv_release(norm);
  nv_map_free(c);
}

static void run_set(const char *suffix, int n, int rows, int cols) {
  char name[96];
  set s;
  make_set(&s, n, rows, cols);
  nv_adam_options ao = nv_adamw_defaults(1e-3);
  check(nv_optimizer_adamw(&ao, &s.opt), "adamw");
  snprintf(name, sizeof name, "adamw_step_%s", suffix);
  bench_run(name, step, &s, 3, 15);
  nv_optimizer_free(s.opt);
  nv_sgd_options so = nv_sgd_defaults(1e-2);
  so.momentum = 0.9;
  check(nv_optimizer_sgd(&so, &s.opt), "sgd");
  snprintf(name, sizeof name, "sgd_momentum_step_%s", suffix);
  bench_run(name, step, &s, 3, 15);
  nv_optimizer_free(s.opt);
  snprintf(name, sizeof name, "clip_grad_norm_%s", suffix);
  bench_run(name, clip, &s, 3, 15);
  nv_map_free(s.params);
  nv_map_free(s.grads);
}

/* Runs both sets, or only the one named on the command line ("4x512x512" or "100x64"). */
int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "4x512x512")) run_set("4x512x512", 4, 512, 512);
  if (argc < 2 || !strcmp(argv[1], "100x64")) run_set("100x64", 100, 1, 64);
  return 0;
}
