/* Failing the k-th allocation of a small graph, for every k: a clean error, no leak, no crash
 * (run under ASan/LeakSanitizer by `make asan`). */
#include <criterion/criterion.h>

#include "testutil.h"

/* Builds and evaluates a small graph; returns its status and, on success, checks values. */
static nv_status small_graph(bool *checked) {
  nv_status st = nv_scope_begin();
  if (st != NV_OK) return st;
  float v[6] = {1, 2, 3, 4, 5, 6};
  int shape[2] = {2, 3};
  nv_array *x = nv_array_from_data(v, shape, 2, NV_DTYPE_FLOAT32);
  nv_array *y = nv_add(nv_exp(nv_multiply_scalar(x, 0.5)), nv_transpose(nv_transpose(x, NULL, 0), NULL, 0));
  int axis = 1;
  nv_array *s = nv_sum(nv_astype(y, NV_DTYPE_FLOAT64), &axis, 1, false);
  int start[2] = {0, 1}, stop[2] = {2, 2};
  nv_array *u = nv_slice_update(y, nv_array_float(-1), start, stop, NULL, 2);
  nv_array *both[2] = {s, u};
  st = nv_eval(both, 2);
  if (st == NV_OK) {
    double out[2];
    st = nv_array_read(s, out, sizeof out);
    if (st == NV_OK) {
      double want = exp(0.5) + 1 + exp(1.0) + 2 + exp(1.5) + 3;
      cr_assert(fabs(out[0] - want) < 1e-5, "%f vs %f", out[0], want);
      *checked = true;
    }
  } else {
    cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "status %d: %s", st, nv_last_error());
    cr_assert(strlen(nv_last_error()) > 0);
  }
  nv_scope_end();
  return st;
}

Test(alloc_fail, every_allocation_of_a_small_graph) {
  long base = nv__test_live_buffers();
  int failed = 0;
  for (long k = 1; k < 10000; k++) {
    nv__test_fail_alloc_at(k);
    bool checked = false;
    nv_status st = small_graph(&checked);
    long pending = nv__test_alloc_count();
    nv__test_fail_alloc_at(0);
    cr_assert_eq(nv__test_live_buffers(), base, "k=%ld leaked a buffer", k);
    if (st == NV_OK && checked) {
      /* Past the last allocation: the graph ran whole. */
      cr_assert(failed > 10, "only %d allocations were failed", failed);
      (void)pending;
      return;
    }
    failed++;
  }
  cr_assert_fail("the graph never ran without an injected failure");
}
