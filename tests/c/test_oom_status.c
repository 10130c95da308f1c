/* Out of memory keeps its status through everything built on it. With the k-th host
 * allocation failing, for every k, a training step (value_and_grad of a two-layer loss, then
 * an Adam update, then evaluation) either succeeds with the values of an undisturbed step or
 * fails with NV_ERR_OUT_OF_MEMORY: never with the shape error of a later check that looked at
 * a failed array ("the vjp rule of mean gave input 0 a gradient of shape ()", "adam: 'w1' has
 * parameter shape (24,40) and gradient shape ()"), and nothing leaks. */
#include <criterion/criterion.h>

#include "testutil.h"

#define B 6
#define D 24
#define H 40

/* loss(w1, w2, x, y) = mean((tanh(x @ w1) @ w2 - y)^2), and tanh(x @ w1) summed as an
 * auxiliary output. */
static nv_status loss_fn(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *w1 = nv_vec_get(in, 0), *w2 = nv_vec_get(in, 1), *x = nv_vec_get(in, 2),
           *y = nv_vec_get(in, 3);
  nv_array *h = nv_tanh(nv_matmul(x, w1));
  nv_array *d = nv_subtract(nv_matmul(h, w2), y);
  nv_array *l = nv_mean(nv_square(d), NULL, 0, false);
  nv_status st = nv_vec_push(out, l);
  if (st == NV_OK) st = nv_vec_push(out, nv_sum(h, NULL, 0, false));
  return st;
}

typedef struct step_result {
  float loss, w1[D * H], w2[H];
} step_result;

/* One step; on success fills `r`. Everything it makes is freed before it returns. */
static nv_status train_step(const float *w1v, const float *w2v, const float *xv,
                            const float *yv, step_result *r) {
  int s1[2] = {D, H}, s2[2] = {H, 1}, sx[2] = {B, D}, sy[2] = {B, 1};
  nv_array *w1 = nv_array_from_data(w1v, s1, 2, NV_DTYPE_FLOAT32);
  nv_array *w2 = nv_array_from_data(w2v, s2, 2, NV_DTYPE_FLOAT32);
  nv_array *x = nv_array_from_data(xv, sx, 2, NV_DTYPE_FLOAT32);
  nv_array *y = nv_array_from_data(yv, sy, 2, NV_DTYPE_FLOAT32);
  nv_closure *f = nv_closure_new(loss_fn, NULL, NULL);
  nv_closure *vg = f ? nv_value_and_grad(f, (int[]){0, 1}, 2) : NULL;
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_map *params = nv_map_new(), *grads = nv_map_new(), *next = NULL;
  nv_optimizer *opt = NULL;
  nv_status st = vg && in && out && params && grads ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  nv_array *args[4] = {w1, w2, x, y};
  for (int i = 0; i < 4 && st == NV_OK; i++) st = nv_vec_push(in, args[i]);
  if (st == NV_OK) st = nv_closure_apply(vg, in, out);
  if (st == NV_OK) {
    cr_assert_eq(nv_vec_size(out), 4);
    st = nv_map_set(params, "w1", w1);
  }
  if (st == NV_OK) st = nv_map_set(params, "w2", w2);
  if (st == NV_OK) st = nv_map_set(grads, "w1", nv_vec_get(out, 2));
  if (st == NV_OK) st = nv_map_set(grads, "w2", nv_vec_get(out, 3));
  nv_adam_options o = nv_adam_defaults(0.05);
  o.bias_correction = true;
  if (st == NV_OK) st = nv_optimizer_adam(&o, &opt);
  if (st == NV_OK) st = nv_optimizer_update(opt, params, grads, &next);
  if (st == NV_OK) {
    const nv_map *maps[2] = {next, nv_optimizer_state(opt)};
    st = nv_params_eval(maps, 2);
  }
  if (st == NV_OK) st = nv_array_item_float(nv_vec_get(out, 0), &r->loss);
  if (st == NV_OK) st = nv_array_read(nv_map_get(next, "w1"), r->w1, sizeof r->w1);
  if (st == NV_OK) st = nv_array_read(nv_map_get(next, "w2"), r->w2, sizeof r->w2);
  nv_map_free(next);
  nv_optimizer_free(opt);
  nv_map_free(params);
  nv_map_free(grads);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(vg);
  nv_closure_release(f);
  for (int i = 0; i < 4; i++) nv_release(args[i]);
  return st;
}

Test(oom_status, grad_and_optimizer_step_under_every_allocation_failure) {
  unsigned seed = test_seed();
  float w1[D * H], w2[H], x[B * D], y[B];
  for (int i = 0; i < D * H; i++) w1[i] = 0.3f * test_randf(&seed);
  for (int i = 0; i < H; i++) w2[i] = 0.3f * test_randf(&seed);
  for (int i = 0; i < B * D; i++) x[i] = test_randf(&seed);
  for (int i = 0; i < B; i++) y[i] = test_randf(&seed);
  static step_result want, got;
  long base = nv__test_live_buffers();
  cr_assert_eq(train_step(w1, w2, x, y, &want), NV_OK, "%s", nv_last_error());
  cr_assert(isfinite(want.loss) && want.loss > 0);
  cr_assert(memcmp(want.w1, w1, sizeof w1) != 0, "the step changed nothing");
  int failed = 0;
  for (long k = 1; k < 100000; k++) {
    long before = nv__test_alloc_count();
    nv__test_fail_alloc_at(k);
    nv_status st = train_step(w1, w2, x, y, &got);
    nv__test_fail_alloc_at(0);
    bool reached = nv__test_alloc_count() - before >= k;
    cr_assert_eq(nv__test_live_buffers(), base, "k=%ld leaked %ld buffers", k,
                 nv__test_live_buffers() - base);
    if (st == NV_OK) {
      /* Either past the last allocation, or the failure was absorbed (a path with a
       * fallback): the values are those of the undisturbed step. */
      cr_assert_eq(got.loss, want.loss, "k=%ld", k);
      cr_assert(memcmp(got.w1, want.w1, sizeof want.w1) == 0, "k=%ld: w1 differs", k);
      cr_assert(memcmp(got.w2, want.w2, sizeof want.w2) == 0, "k=%ld: w2 differs", k);
      if (!reached) {
        cr_assert_gt(failed, 100, "only %d allocations were failed", failed);
        return;
      }
      continue;
    }
    failed++;
    cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "k=%ld: status %d: %s", k, (int)st, nv_last_error());
  }
  cr_assert_fail("the step never ran without an injected failure");
}
