/* src/nn from C: no leaks over many optimizer steps (live buffers), scopes around the calls,
 * deep trees, and allocation failures turned into errors. Values are checked against MLX and
 * NumPy in tests/python/test_nn.py. */
#include <criterion/criterion.h>

#include "testutil.h"

static nv_map *map_of(const char *const *keys, nv_array *const *xs, int n) {
  nv_map *m = nv_map_new();
  for (int i = 0; i < n; i++) cr_assert_eq(nv_map_set(m, keys[i], xs[i]), NV_OK);
  return m;
}

static nv_array *randn(unsigned *seed, int rows, int cols) {
  float v[64];
  for (int i = 0; i < rows * cols; i++) v[i] = test_randf(seed);
  int shape[2] = {rows, cols};
  return nv_array_from_data(v, shape, 2, NV_DTYPE_FLOAT32);
}

/* One training-like step: clip the gradients, update with AdamW on a schedule, evaluate the new
 * parameters with the state. */
static nv_map *train_step(nv_optimizer *opt, nv_map *params, unsigned *seed) {
  const char *keys[2] = {"layers.0.weight", "layers.0.bias"};
  nv_array *g[2] = {randn(seed, 4, 8), randn(seed, 1, 8)};
  nv_map *grads = map_of(keys, g, 2);
  nv_release(g[0]);
  nv_release(g[1]);
  nv_map *clipped = NULL, *next = NULL;
  nv_array *norm = NULL;
  cr_assert_eq(nv_clip_grad_norm(grads, 0.5, &clipped, &norm), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_optimizer_update(opt, params, clipped, &next), NV_OK, "%s", nv_last_error());
  const nv_map *maps[2] = {next, nv_optimizer_state(opt)};
  cr_assert_eq(nv_params_eval(maps, 2), NV_OK, "%s", nv_last_error());
  double n = 0;
  cr_assert_eq(nv_array_item_double(norm, &n), NV_OK);
  cr_assert(n > 0 && isfinite(n));
  nv_release(norm);
  nv_map_free(grads);
  nv_map_free(clipped);
  nv_map_free(params);
  return next;
}

static nv_optimizer *adamw_on_schedule(void) {
  nv_lr_schedule *warm = NULL, *cos = NULL, *join = NULL;
  cr_assert_eq(nv_linear_schedule(0, 1e-2, 10, &warm), NV_OK);
  cr_assert_eq(nv_cosine_decay(1e-2, 100, 0, &cos), NV_OK);
  const nv_lr_schedule *parts[2] = {warm, cos};
  int64_t bounds[1] = {10};
  cr_assert_eq(nv_join_schedules(parts, 2, bounds, 1, &join), NV_OK);
  nv_adam_options o = nv_adamw_defaults(0);
  o.schedule = join;
  o.bias_correction = true;
  nv_optimizer *opt = NULL;
  cr_assert_eq(nv_optimizer_adamw(&o, &opt), NV_OK, "%s", nv_last_error());
  nv_lr_schedule_free(warm);
  nv_lr_schedule_free(cos);
  nv_lr_schedule_free(join);
  return opt;
}

Test(nn, no_leak_over_many_steps) {
  unsigned seed = test_seed();
  long base = nv__test_live_buffers();
  nv_optimizer *opt = adamw_on_schedule();
  const char *keys[2] = {"layers.0.weight", "layers.0.bias"};
  nv_array *p[2] = {randn(&seed, 4, 8), randn(&seed, 1, 8)};
  nv_map *params = map_of(keys, p, 2);
  nv_release(p[0]);
  nv_release(p[1]);
  long after_first = 0;
  for (int step = 0; step < 300; step++) {
    params = train_step(opt, params, &seed);
    if (step == 0) after_first = nv__test_live_buffers();
    /* The live buffers stay flat: parameters, slots, step and learning rate, nothing more. */
    cr_assert_leq(nv__test_live_buffers(), after_first + 2, "step %d: %ld live buffers (%ld)",
                  step, nv__test_live_buffers(), after_first);
  }
  uint64_t step = 0;
  cr_assert_eq(nv_array_item_uint64(nv_optimizer_step(opt), &step), NV_OK);
  cr_assert_eq(step, 300);
  nv_map_free(params);
  nv_optimizer_free(opt);
  cr_assert_eq(nv__test_live_buffers(), base, "leaked %ld buffers", nv__test_live_buffers() - base);
}

Test(nn, calls_inside_a_scope) {
  /* Arrays the calls make inside a caller's scope live in the maps they return, not in the
   * scope: ending the scope must leave the maps whole. */
  unsigned seed = test_seed();
  long base = nv__test_live_buffers();
  nv_optimizer *opt = NULL;
  cr_assert_eq(nv_scope_begin(), NV_OK);
  nv_sgd_options so = nv_sgd_defaults(0.1);
  so.momentum = 0.9;
  cr_assert_eq(nv_optimizer_sgd(&so, &opt), NV_OK);
  nv_array *w = randn(&seed, 2, 3), *g = randn(&seed, 2, 3);
  const char *k[1] = {"w"};
  nv_map *params = map_of(k, &w, 1), *grads = map_of(k, &g, 1), *next = NULL, *clipped = NULL;
  nv_array *norm = NULL;
  cr_assert_eq(nv_clip_grad_norm(grads, 1.0, &clipped, &norm), NV_OK);
  cr_assert_eq(nv_optimizer_update(opt, params, clipped, &next), NV_OK);
  cr_assert_eq(nv_optimizer_set_learning_rate(opt, 0.5), NV_OK);
  nv_lr_schedule *lin = NULL;
  cr_assert_eq(nv_linear_schedule(0, 1, 4, &lin), NV_OK);
  nv_array *at = nv_lr_schedule_at(lin, nv_optimizer_step(opt));
  nv_scope_end(); /* releases w, g, norm, at */
  /* First SGD step with momentum: v = g, w' = w - 0.1 g (clipped g). */
  float wv[6], gv[6], nv[6];
  READ_F32(nv_map_get(params, "w"), wv, 6);
  READ_F32(nv_map_get(clipped, "w"), gv, 6);
  READ_F32(nv_map_get(next, "w"), nv, 6);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(nv[i], wv[i] - 0.1f * gv[i], 1e-6);
  const nv_map *maps[2] = {next, nv_optimizer_state(opt)};
  cr_assert_eq(nv_params_eval(maps, 2), NV_OK, "%s", nv_last_error());
  float lr = 0;
  cr_assert_eq(nv_array_item_float(nv_optimizer_learning_rate(opt), &lr), NV_OK);
  cr_assert_float_eq(lr, 0.5f, 0);
  /* `at` was released with the scope; the schedule at step 1 is 0.25. */
  (void)at;
  double v = 0;
  cr_assert_eq(nv_lr_schedule_value(lin, 1, &v), NV_OK);
  cr_assert_float_eq(v, 0.25, 0);
  nv_lr_schedule_free(lin);
  nv_map_free(params);
  nv_map_free(grads);
  nv_map_free(clipped);
  nv_map_free(next);
  nv_optimizer_free(opt);
  cr_assert_eq(nv__test_live_buffers(), base);
}

Test(nn, deep_trees_do_not_recurse) {
  /* A list nested 200000 deep: building, flattening and freeing it walk without recursion. */
  nv_array *x = nv_array_float(3);
  nv_tree *leaf = nv_tree_new_array(x), *t = leaf;
  for (int i = 0; i < 200000; i++) {
    nv_tree *l = nv_tree_new_list();
    cr_assert_eq(nv_tree_list_append(l, t), NV_OK);
    t = l;
  }
  nv_map *flat = NULL;
  cr_assert_eq(nv_tree_flatten(t, "m", &flat), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_map_size(flat), 1);
  const char *key = nv_map_key(flat, 0);
  cr_assert_eq(strlen(key), 1 + 2 * 200000);
  cr_assert_eq(strncmp(key, "m.0.0.", 6), 0);
  /* Unflatten refuses such depth with an error instead of recursing 200000 deep. */
  nv_tree *back = NULL;
  cr_assert_eq(nv_tree_unflatten(flat, &back), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "deeper than"), "%s", nv_last_error());
  nv_map_free(flat);
  nv_tree_free(t);
  nv_release(x);
}

/* Runs `fn` with the k-th allocation failing for k = 1, 2, ... until it succeeds: every failure
 * must be a clean error (no crash, no leak under ASan) that names out of memory. */
static void under_failures(nv_status (*fn)(void)) {
  long base = nv__test_live_buffers();
  for (long k = 1; k < 20000; k++) {
    nv__test_fail_alloc_at(k);
    nv_status st = fn();
    nv__test_fail_alloc_at(0);
    cr_assert_eq(nv__test_live_buffers(), base, "k=%ld leaked a buffer", k);
    if (st == NV_OK) {
      cr_assert(k > 5, "only %ld allocations were failed", k - 1);
      return;
    }
    cr_assert(st == NV_ERR_OUT_OF_MEMORY, "k=%ld: status %d (%s)", k, (int)st, nv_last_error());
  }
  cr_assert_fail("never succeeded");
}

static nv_status optimizer_round(void) {
  nv_array *w = nv_array_float(1.5f), *g = nv_array_float(0.25f);
  nv_map *p = nv_map_new(), *gr = nv_map_new(), *next = NULL, *clipped = NULL;
  nv_optimizer *opt = NULL;
  nv_array *norm = NULL;
  nv_status st = p && gr ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  if (st == NV_OK) st = nv_map_set(p, "a.w", w);
  if (st == NV_OK) st = nv_map_set(gr, "a.w", g);
  nv_adam_options o = nv_adam_defaults(0.1);
  if (st == NV_OK) st = nv_optimizer_adam(&o, &opt);
  if (st == NV_OK) st = nv_clip_grad_norm(gr, 1.0, &clipped, &norm);
  if (st == NV_OK) st = nv_optimizer_update(opt, p, clipped, &next);
  if (st == NV_OK) {
    const nv_map *maps[2] = {next, nv_optimizer_state(opt)};
    st = nv_params_eval(maps, 2);
  }
  float v = 0;
  if (st == NV_OK) st = nv_array_item_float(nv_map_get(next, "a.w"), &v);
  /* One Adam step without bias correction: m = 0.1 g, v = 0.001 g² (g = 0.25 is under the
   * clipping norm). */
  double want = 1.5 - 0.1 * (0.1 * 0.25) / (sqrt(0.001 * 0.0625) + 1e-8);
  if (st == NV_OK) cr_assert(fabs(v - want) < 1e-5, "%g != %g", v, want);
  nv_release(norm);
  nv_map_free(next);
  nv_map_free(clipped);
  nv_optimizer_free(opt);
  nv_map_free(p);
  nv_map_free(gr);
  nv_release(w);
  nv_release(g);
  return st;
}

Test(nn, optimizer_allocation_failures) { under_failures(optimizer_round); }

static nv_status tree_round(void) {
  nv_array *x = nv_array_float(2);
  nv_map *m = nv_map_new(), *flat = NULL;
  nv_tree *t = NULL;
  nv_status st = m ? nv_array_status(x) : NV_ERR_OUT_OF_MEMORY;
  const char *keys[] = {"layers.0.w", "layers.3.b", "head.w", "head.b"};
  for (int i = 0; i < 4 && st == NV_OK; i++) st = nv_map_set(m, keys[i], x);
  if (st == NV_OK) st = nv_tree_unflatten(m, &t);
  if (st == NV_OK) st = nv_tree_flatten(t, NULL, &flat);
  if (st == NV_OK) {
    cr_assert_eq(nv_map_size(flat), 4);
    cr_assert_str_eq(nv_map_key(flat, 1), "layers.3.b");
  }
  nv_map_free(flat);
  nv_tree_free(t);
  nv_map_free(m);
  nv_release(x);
  return st;
}

Test(nn, tree_allocation_failures) { under_failures(tree_round); }
