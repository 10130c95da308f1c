/* The seed's GPU-stream collective tests (seed 004 D40t-D47t) over the fake communicator
 * (tests/c/dist_fake.h, D48): program order across GPU and CPU streams, dropped results,
 * failures, submissions, donation. A GPU-stream collective runs in an hrx host callback of its
 * evaluation's graph, in its group's order (src/cuda/distributed.c). Skipped without a usable
 * CUDA device. No test may fall back to the CPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "dist_fake.h"
#include "testutil.h"

nv_status nv__gpu_test_inject_fault(int index, int kind);
void nv__gpu_profile(char *buf, size_t n);

static size_t fallbacks;

static void gpu_begin(void) {
  if (!nv_device_is_available(nv_gpu(0))) cr_skip_test("no usable CUDA device");
  cr_assert_eq(nv_stream_enter(nv_default_stream(nv_gpu(0))), NV_OK);
  fallbacks = nv_gpu_fallback_count();
}

static void gpu_end(void) {
  nv_stream_exit();
  cr_assert_eq(nv_gpu_fallback_count(), fallbacks, "nothing fell back to the CPU");
}

static void cpu_begin(void) { nv_stream_enter(nv_default_stream(nv_cpu())); }

static nv_array *ones(int n) {
  int shape[1] = {n};
  return nv_ones(shape, 1, NV_DTYPE_FLOAT32);
}

/* Checks that the n elements of x all equal v. */
static void expect(nv_array *x, int n, float v) {
  float out[1024];
  cr_assert_leq(n, 1024);
  READ_F32(x, out, n);
  for (int i = 0; i < n; i++) cr_assert_eq(out[i], v, "element %d is %g, not %g", i, out[i], v);
}

/* hrx's submission count (the global counter the submission tests read). */
static long long submissions(void) {
  char buf[1024];
  nv__gpu_profile(buf, sizeof buf);
  const char *at = strstr(buf, "hrx_submissions=");
  cr_assert(at, "%s", buf);
  return atoll(at + strlen("hrx_submissions="));
}

/* D40t: GPU-stream a (n = 1) and b (n = 2) started, then a CPU-stream c (n = 3): they run in the
 * order they were issued. */
Test(gpu_dist, collectives_run_in_program_order_across_streams) {
  gpu_begin();
  nv_group g;
  fake_comm *f = fake_group(-1, 2, &g);
  nv_scope_begin();
  nv_array *a = nv_dist_all_sum(nv_multiply_scalar(ones(1), 3), g);
  nv_array *b = nv_dist_all_sum(nv_multiply_scalar(ones(2), 3), g);
  cr_assert_eq(nv_async_eval(&a, 1), NV_OK);
  cr_assert_eq(nv_async_eval(&b, 1), NV_OK);
  cpu_begin();
  nv_array *c = nv_dist_all_sum(ones(3), g);
  expect(c, 3, 2);
  nv_stream_exit();
  expect(a, 1, 6);
  expect(b, 2, 6);
  cr_assert_str_eq(fake_log(f), "reduce 1, reduce 2, reduce 3");
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* The same within one evaluation, the CPU one not reading the GPU one: the open GPU work is
 * submitted before the CPU collective takes its turn, so nothing waits on unsubmitted work.
 * The two are independent, so their order is the evaluation's (the same on every rank, as the
 * graph is): the same evaluation again runs them in the same order. */
Test(gpu_dist, independent_gpu_and_cpu_collectives_in_one_evaluation) {
  gpu_begin();
  nv_group g;
  fake_comm *f = fake_group(-1, 2, &g);
  nv_scope_begin();
  for (int round = 0; round < 2; round++) {
    nv_array *a = nv_dist_all_sum(nv_multiply_scalar(ones(2), 3), g);
    cpu_begin();
    nv_array *c = nv_dist_all_sum(ones(3), g);
    nv_stream_exit();
    nv_array *both[2] = {a, c};
    cr_assert_eq(nv_eval(both, 2), NV_OK, "%s", nv_last_error());
    expect(a, 2, 6);
    expect(c, 3, 2);
  }
  const char *log = fake_log(f);
  cr_assert(!strcmp(log, "reduce 2, reduce 3, reduce 2, reduce 3") ||
                !strcmp(log, "reduce 3, reduce 2, reduce 3, reduce 2"),
            "the two rounds ran the collectives in different orders: %s", log);
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* D41t: a started collective whose array is then dropped still runs, and later ones follow. */
Test(gpu_dist, a_dropped_result_still_runs) {
  gpu_begin();
  nv_group g;
  fake_comm *f = fake_group(-1, 2, &g);
  nv_array *x = ones(4);
  nv_array *t = nv_multiply_scalar(x, 2);
  nv_array *a = nv_dist_all_sum(t, g);
  cr_assert_eq(nv_async_eval(&a, 1), NV_OK);
  nv_release(a);
  nv_release(t);
  nv_array *y = ones(5);
  nv_array *u = nv_add_scalar(y, 1);
  nv_array *b = nv_dist_all_sum(u, g);
  expect(b, 5, 4);
  cr_assert_str_eq(fake_log(f), "reduce 4, reduce 5");
  nv_release(x);
  nv_release(y);
  nv_release(u);
  nv_release(b);
  nv_group_close(g);
  gpu_end();
}

/* D42t: the collective's own error fails its output and the GPU work after it; no hang. */
Test(gpu_dist, a_failed_collective_fails_what_follows) {
  gpu_begin();
  nv_group g;
  fake_group(7, 0, &g);
  nv_scope_begin();
  nv_array *y = nv_add_scalar(nv_dist_all_sum(nv_multiply_scalar(ones(7), 2), g), 1);
  cr_assert_neq(nv_eval1(y), NV_OK);
  cr_assert(strstr(nv_last_error(), "rank 1 left"), "%s", nv_last_error());
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* D43t/D47t as nuvec has them: GPU work failing before the collectives of its submission
 * fails their outputs; the collectives that did not run give their turns up, so nothing waits
 * for ever, and the group is failed (the peers ran them). */
Test(gpu_dist, a_gpu_failure_before_collectives_fails_them_and_the_group) {
  gpu_begin();
  nv_group g;
  fake_comm *f = fake_group(-1, 0, &g);
  nv_scope_begin();
  nv_array *y = ones(8);
  cr_assert_eq(nv_eval1(y), NV_OK);
  for (int i = 0; i < 3; i++) y = nv_dist_all_sum(nv_multiply_scalar(y, 2), g);
  cr_assert_eq(nv__gpu_test_inject_fault(0, 0), NV_OK);
  cr_assert_neq(nv_eval1(y), NV_OK);
  cpu_begin();
  nv_array *c = nv_dist_all_sum(ones(2), g);
  nv_stream_exit();
  cr_assert_eq(nv_eval1(c), NV_ERR_PEER_LOST);
  cr_assert(strstr(nv_last_error(), "did not run"), "%s", nv_last_error());
  cr_assert_eq(f->nlog, 0, "%s", fake_log(f));
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* D44t: collectives follow the backend's submission policy, not one submission each. */
Test(gpu_dist, collectives_do_not_force_submissions) {
  gpu_begin();
  nv_group g;
  fake_group(-1, 0, &g);
  nv_scope_begin();
  int shape[2] = {1, 1024};
  nv_array *x = nv_ones(shape, 2, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(x), NV_OK);
  long long counts[2];
  nv_array *with = NULL;
  for (int round = 0; round < 2; round++) { /* warm both shapes, then count */
    for (int collectives = 1; collectives >= 0; collectives--) {
      long long before = submissions();
      nv_array *y = x;
      for (int i = 0; i < 56; i++) {
        y = nv_multiply_scalar(y, 0.5);
        if (collectives) y = nv_dist_all_sum(y, g);
      }
      cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
      counts[collectives] = submissions() - before;
      if (collectives) with = y;
    }
  }
  cr_assert_leq(counts[1], counts[0] + 56 / 8, "%lld submissions for 56 collectives, %lld without",
                counts[1], counts[0]);
  float out[1024];
  READ_F32(with, out, 1024);
  cr_assert(out[0] == 1 && out[1023] == 1);
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* D45t: in one evaluation a CPU-stream collective reading a GPU-stream one runs after it. */
Test(gpu_dist, a_cpu_collective_after_a_gpu_one_in_one_evaluation) {
  gpu_begin();
  nv_group g;
  fake_comm *f = fake_group(-1, 2, &g);
  nv_scope_begin();
  nv_array *a = nv_dist_all_sum(nv_multiply_scalar(ones(3), 3), g);
  cpu_begin();
  nv_array *c = nv_dist_all_sum(nv_add_scalar(a, 1), g);
  nv_stream_exit();
  expect(c, 3, 14);
  cr_assert_str_eq(fake_log(f), "reduce 3, reduce 3");
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}

/* D46t: an all-reduce writes its input's buffer only when nothing else holds the input. */
Test(gpu_dist, only_inputs_nothing_else_holds_are_reduced_in_place) {
  gpu_begin();
  nv_group g;
  fake_group(-1, 0, &g);
  nv_scope_begin();
  nv_array *held = nv_multiply_scalar(ones(5), 3);
  cr_assert_eq(nv_eval1(held), NV_OK);
  expect(nv_dist_all_sum(held, g), 5, 6);
  expect(held, 5, 3);
  nv_scope_end(); /* the intermediate below must have no other holder than its consumer */
  nv_array *o = ones(5), *t = nv_multiply_scalar(o, 2), *sum = nv_dist_all_sum(t, g);
  nv_release(t);
  long d0 = nv__test_donations();
  expect(sum, 5, 4);
  cr_assert_eq(nv__test_donations() - d0, 1, "the intermediate is reduced in place");
  nv_release(o);
  nv_release(sum);
  nv_scope_begin();
  nv_array *x = nv_multiply_scalar(ones(5), 4);
  nv_array *pair[2] = {nv_dist_all_sum(x, g), nv_add_scalar(x, 1)};
  cr_assert_eq(nv_eval(pair, 2), NV_OK);
  expect(pair[0], 5, 8);
  expect(pair[1], 5, 5);
  nv_scope_end();
  nv_group_close(g);
  gpu_end();
}
