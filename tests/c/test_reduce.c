/* C-side behaviours of the reduce family: NULL inputs and bad arguments give failed arrays
 * (never crashes), builders that use temporaries leak nothing inside or outside scopes,
 * allocation failures during evaluation are errors, and softmax writes into a donated input. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/internal.h"
#include "nuvec.h"

static nv_array *vec(const float *v, int n) {
  int shape[1] = {n};
  return nv_array_from_data(v, shape, 1, NV_DTYPE_FLOAT32);
}

Test(reduce, null_inputs_fail_cleanly) {
  int ax = 0;
  nv_array *r[] = {
      nv_all(NULL, NULL, 0, false),       nv_prod(NULL, NULL, 0, false),
      nv_max(NULL, &ax, 1, true),         nv_mean(NULL, NULL, 0, false),
      nv_var(NULL, NULL, 0, false, 1),    nv_median(NULL, NULL, 0, false),
      nv_count_nonzero(NULL, NULL, 0, 0), nv_argmax(NULL, NULL, false),
      nv_logsumexp(NULL, NULL, 0, false), nv_softmax(NULL, NULL, 0, true),
      nv_trace(NULL, 0, 0, 1, -1),        nv_cumsum(NULL, &ax, false, true),
      nv_logcumsumexp(NULL, NULL, 1, 0),  nv_sort(NULL, NULL),
      nv_argpartition(NULL, 0, NULL),     nv_topk(NULL, 1, NULL),
      nv_searchsorted(NULL, NULL, false),
  };
  for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
    cr_assert_not_null(r[i]);
    cr_assert_eq(nv_array_status(r[i]), NV_ERR_INVALID_ARGUMENT, "op %zu", i);
    cr_assert(strstr(nv_array_error(r[i]), "NULL"), "%s", nv_array_error(r[i]));
    nv_release(r[i]);
  }
}

Test(reduce, topk_and_trace_leave_nothing_behind) {
  float v[6] = {3, 1, 4, 1, 5, 9}, out[2];
  nv_array *x = vec(v, 6);
  long live = nv__test_live_buffers();
  cr_assert_eq(nv_scope_begin(), NV_OK);
  nv_array *t = nv_scope_keep(nv_topk(x, 2, NULL));
  nv_scope_end();
  cr_assert_eq(nv_array_read(t, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_float_eq(out[0], 5, 0);
  cr_assert_float_eq(out[1], 9, 0);
  nv_release(t);
  int shape[2] = {2, 3};
  nv_array *m = nv_reshape(x, shape, 2);
  nv_array *tr = nv_trace(m, 1, 0, 1, NV_DTYPE_FLOAT64);
  double d;
  cr_assert_eq(nv_array_item_double(tr, &d), NV_OK, "%s", nv_last_error());
  cr_assert_float_eq(d, 1 + 9, 0); /* m[0][1] + m[1][2] */
  nv_release(tr);
  nv_release(m);
  cr_assert_eq(nv__test_live_buffers(), live);
  nv_release(x);
}

Test(reduce, allocation_failure_is_an_error) {
  float v[4] = {2, 1, 4, 3};
  nv_array *x = vec(v, 4);
  nv_eval1(x);
  nv__test_fail_alloc_at(1);
  nv_array *s = nv_sort(x, NULL);
  nv_status st = nv_eval1(s);
  nv__test_fail_alloc_at(0);
  cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "%s", nv_last_error());
  nv_release(s);
  s = nv_sort(x, NULL); /* rebuilt, it works */
  float out[4];
  cr_assert_eq(nv_array_read(s, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_float_eq(out[0], 1, 0);
  cr_assert_float_eq(out[3], 4, 0);
  nv_release(s);
  nv_release(x);
}

Test(reduce, softmax_writes_into_a_donated_input) {
  float v[4] = {1, 2, 3, 4}, out[4];
  nv_array *x = vec(v, 4);
  nv_array *e = nv_exp(x); /* an intermediate only softmax holds */
  nv_release(x);
  nv_array *s = nv_softmax(e, NULL, 0, false);
  nv_release(e);
  long live = nv__test_live_buffers();
  cr_assert_eq(nv_array_read(s, out, sizeof out), NV_OK, "%s", nv_last_error());
  /* x's buffer was freed once exp ran, and softmax wrote into exp's buffer: one buffer in,
   * one out (without donation there would be one more). */
  cr_assert_eq(nv__test_live_buffers(), live, "%ld live, %ld before", nv__test_live_buffers(),
               live);
  double sum = 0;
  for (int i = 0; i < 4; i++) sum += out[i];
  cr_assert_float_eq(sum, 1.0, 1e-6);
  cr_assert(out[3] > out[2] && out[2] > out[1]);
  nv_release(s);
}
