/* C-only behaviours of the index family: in-place updates of donated bases (scatter, put_along_axis,
 * slice_update_*, dynamic slice_update, masked_scatter), no donation while the base is still
 * referenced, errors as sticky failed arrays, multi-result lists, scopes and live buffers. */
#include <criterion/criterion.h>

#include "core/internal.h"
#include "nuvec.h"

static nv_array *farr(const float *v, int n) { return nv_array_from_data(v, &n, 1, NV_DTYPE_FLOAT32); }
static nv_array *iarr(const int32_t *v, int n) { return nv_array_from_data(v, &n, 1, NV_DTYPE_INT32); }

/* An evaluated intermediate (x + x) whose buffer the next op may take over. */
static nv_array *owned_base(const float *v, int n, const void **ptr) {
  nv_array *x = farr(v, n);
  nv_array *b = nv_add(x, x);
  nv_release(x);
  cr_assert_eq(nv_eval1(b), NV_OK, "%s", nv_last_error());
  *ptr = nv_array_data(b);
  return b;
}

Test(index, scatter_add_writes_into_a_donated_base) {
  float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
  const void *p;
  nv_array *base = owned_base(v, 6, &p);
  int32_t iv[3] = {0, 5, 0};
  nv_array *idx = iarr(iv, 3);
  float uv[3] = {10, 20, 30};
  int ush[2] = {3, 1}, axis = 0;
  nv_array *upd = nv_array_from_data(uv, ush, 2, NV_DTYPE_FLOAT32);
  nv_array *s = nv_scatter_add(base, (const nv_array *const *)&idx, 1, upd, &axis);
  nv_release(base);
  cr_assert_eq(nv_array_read(s, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_data(s), p, "the base's buffer was not reused");
  float want[6] = {42, 4, 6, 8, 10, 32};
  for (int i = 0; i < 6; i++) cr_assert_float_eq(out[i], want[i], 0);
  nv_release(idx);
  nv_release(upd);
  nv_release(s);
}

Test(index, a_referenced_base_is_copied_not_written) {
  float v[4] = {1, 2, 3, 4}, out[4], orig[4];
  const void *p;
  nv_array *base = owned_base(v, 4, &p);
  int32_t iv[1] = {2};
  nv_array *idx = iarr(iv, 1);
  float uv[1] = {100};
  int ush[2] = {1, 1}, axis = 0;
  nv_array *upd = nv_array_from_data(uv, ush, 2, NV_DTYPE_FLOAT32);
  nv_array *s = nv_scatter(base, (const nv_array *const *)&idx, 1, upd, &axis);
  cr_assert_eq(nv_array_read(s, out, sizeof out), NV_OK);
  cr_assert_neq(nv_array_data(s), p);
  cr_assert_eq(nv_array_read(base, orig, sizeof orig), NV_OK);
  cr_assert_float_eq(orig[2], 6, 0);
  cr_assert_float_eq(out[2], 100, 0);
  nv_release(base);
  nv_release(idx);
  nv_release(upd);
  nv_release(s);
}

Test(index, update_ops_reuse_donated_bases) {
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  float one[1] = {1};
  int n1 = 1;
  nv_array *u1 = nv_array_from_data(one, &n1, 1, NV_DTYPE_FLOAT32);
  int32_t st[1] = {6};
  nv_array *start = iarr(st, 1);
  int start0 = 2, stop0 = 5, axis = 0;
  for (int op = 0; op < 6; op++) {
    const void *p;
    nv_array *base = owned_base(v, 8, &p), *r = NULL;
    if (op == 0) r = nv_slice_update_add(base, u1, &start0, &stop0, NULL, 1);
    if (op == 1) r = nv_slice_update_prod(base, u1, &start0, &stop0, NULL, 1);
    if (op == 2) r = nv_slice_update_max(base, u1, &start0, &stop0, NULL, 1);
    if (op == 3) r = nv_slice_update_min(base, u1, &start0, &stop0, NULL, 1);
    if (op == 4) r = nv_slice_update_dynamic(base, u1, start, &axis, 1);
    if (op == 5) {
      int32_t iv[2] = {1, -1};
      nv_array *idx = iarr(iv, 2);
      float two[2] = {9, 9};
      nv_array *vals = farr(two, 2);
      r = nv_put_along_axis(base, idx, vals, 0);
      nv_release(idx);
      nv_release(vals);
    }
    nv_release(base);
    cr_assert_eq(nv_array_read(r, out, sizeof out), NV_OK, "op %d: %s", op, nv_last_error());
    cr_assert_eq(nv_array_data(r), p, "op %d did not write in place", op);
    float w2 = op == 0 ? 7 : op == 1 ? 6 : op == 2 ? 6 : op == 3 ? 1 : 6;
    cr_assert_float_eq(out[2], w2, 0, "op %d", op);
    if (op == 4) cr_assert_float_eq(out[6], 1, 0);
    if (op == 5) cr_assert(out[1] == 9 && out[7] == 9 && out[0] == 2);
    nv_release(r);
  }
  nv_release(u1);
  nv_release(start);
}

Test(index, bad_index_fails_the_evaluation_not_the_process) {
  float v[4] = {1, 2, 3, 4}, out[2];
  nv_array *a = farr(v, 4);
  int32_t iv[2] = {1, 4};
  nv_array *idx = iarr(iv, 2);
  nv_array *t = nv_take(a, idx, 0);
  cr_assert_eq(nv_array_status(t), NV_OK); /* known only when evaluated */
  cr_assert_eq(nv_array_read(t, out, sizeof out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "take: index 4 is out of range for an axis of size 4"),
            "%s", nv_last_error());
  /* Sticky: an op on the failed array fails with the same error. */
  nv_array *t2 = nv_take(t, idx, 0);
  cr_assert_eq(nv_eval1(t2), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "index 4"));
  nv_release(t2);
  nv_release(t);
  nv_release(idx);
  nv_release(a);
}

Test(index, builders_never_return_null) {
  nv_array *r[8];
  r[0] = nv_take(NULL, NULL, 0);
  r[1] = nv_gather(NULL, NULL, 0, NULL, NULL, 0);
  r[2] = nv_scatter_add(NULL, NULL, 0, NULL, NULL);
  r[3] = nv_concatenate(NULL, 0, 0);
  r[4] = nv_pad(NULL, NULL, NULL, 0, NV_PAD_CONSTANT, NULL);
  r[5] = nv_diag(NULL, 0);
  r[6] = nv_masked_scatter(NULL, NULL, NULL);
  r[7] = nv_diff(NULL, 1, 0, NULL, NULL);
  for (int i = 0; i < 8; i++) {
    cr_assert_not_null(r[i]);
    cr_assert_eq(nv_array_status(r[i]), NV_ERR_INVALID_ARGUMENT, "builder %d", i);
    nv_release(r[i]);
  }
  cr_assert_eq(nv_split(NULL, 2, 0, NULL), NV_ERR_INVALID_ARGUMENT);
}

Test(index, multi_results_append_in_order_and_free_with_the_list) {
  long live = nv__test_live_buffers();
  float v[6] = {0, 1, 2, 3, 4, 5};
  nv_array *a = farr(v, 6);
  nv_vec *out = nv_vec_new();
  cr_assert_eq(nv_split(a, 3, 0, out), NV_OK);
  int at[2] = {1, 4};
  cr_assert_eq(nv_split_at(a, at, 2, 0, out), NV_OK);
  cr_assert_eq(nv_vec_size(out), 6);
  float x[3];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 4), x, 3 * sizeof(float)), NV_OK);
  cr_assert(x[0] == 1 && x[2] == 3);
  cr_assert_eq(nv_split(a, 4, 0, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_vec_size(out), 6, "a failed split appended something");
  nv_vec_free(out);
  nv_release(a);
  cr_assert_eq(nv__test_live_buffers(), live);
}

Test(index, scoped_expressions_leak_nothing) {
  long live = nv__test_live_buffers();
  cr_assert_eq(nv_scope_begin(), NV_OK);
  float v[6] = {0, 1, 2, 3, 4, 5};
  int shape[2] = {2, 3}, lo = 1, hi = 2, reps[2] = {2, 2}, shift = 1;
  nv_array *a = nv_array_from_data(v, shape, 2, NV_DTYPE_FLOAT32);
  nv_array *parts[2] = {nv_flip(a, NULL, 0), nv_roll(a, &shift, 1, NULL, 0)};
  nv_array *r = nv_pad(nv_tile(nv_concatenate((const nv_array *const *)parts, 2, 0), reps, 2),
                       &lo, &hi, 1, NV_PAD_EDGE, NULL);
  r = nv_diff(nv_repeat(nv_flatten(r, 0, -1), 2, 0), 1, 0, NULL, NULL);
  nv_array *kept = nv_scope_keep(r);
  nv_scope_end();
  cr_assert_eq(nv_eval1(kept), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_size(kept), (4 * 2 + 3) * (3 * 2 + 3) * 2 - 1);
  nv_release(kept);
  cr_assert_eq(nv__test_live_buffers(), live);
}

Test(index, failing_kernel_allocation_is_an_error) {
  float v[4] = {1, 2, 3, 4};
  nv_array *a = farr(v, 4);
  int32_t iv[2] = {3, 0};
  nv_array *idx = iarr(iv, 2);
  nv_array *t = nv_take(a, idx, 0);
  nv_eval1(a);
  nv_eval1(idx);
  nv__test_fail_alloc_at(1);
  nv_status s = nv_eval1(t);
  nv__test_fail_alloc_at(0);
  cr_assert_eq(s, NV_ERR_OUT_OF_MEMORY, "%s", nv_last_error());
  nv_release(t);
  nv_release(idx);
  nv_release(a);
}
