/* C-side behaviours of the elementwise family: donation through chains of its element-wise
 * primitives, errors that name the op without crashing, multi-result ops' all-or-nothing
 * output lists, and scopes. */
#include <criterion/criterion.h>
#include <math.h>

#include "core/internal.h"
#include "nuvec.h"

#define N (1 << 20)

/* i / N for i < N, in `dt`. */
static nv_array *ramp(nv_dtype dt) {
  nv_array *a = nv_arange(0, N, 1, NV_DTYPE_FLOAT32);
  nv_array *s = nv_multiply_scalar(a, 1.0 / N);
  nv_array *c = nv_astype(s, dt);
  nv_release(a);
  nv_release(s);
  cr_assert_eq(nv_eval1(c), NV_OK, "%s", nv_last_error());
  return c;
}

/* A chain of unary and binary element-wise ops over an owned intermediate needs one new buffer:
 * every later op writes into its input's buffer. */
Test(elementwise, donation_in_chains) {
  nv_array *x = ramp(NV_DTYPE_FLOAT32);
  nv_reset_peak_memory();
  size_t before = nv_get_active_memory();
  nv_scope_begin();
  nv_array *t = nv_sigmoid(nv_tanh(nv_sin(x)));
  nv_array *r = nv_scope_keep(nv_where(nv_greater_scalar(x, 0.5), nv_square(t), t));
  nv_scope_end();
  cr_assert_eq(nv_eval1(r), NV_OK, "%s", nv_last_error());
  size_t extra = nv_get_peak_memory() - before;
  /* The result, plus the bool mask and one spare while where runs: well under one buffer per
   * op (six ops would need 6 × 4 MiB). */
  cr_assert_lt(extra, (size_t)3 * N * sizeof(float), "peak grew by %zu bytes", extra);
  const float *d = nv_array_data(r);
  float v = 0.75f;
  float s = 1.0f / (1.0f + expf(-tanhf(sinf(v))));
  cr_assert_float_eq(d[(int)(0.75 * N)], s * s, 1e-6);
  nv_release(r);
  nv_release(x);
}

/* Donation into a float16 chain keeps the values (the kernel reads then writes each index). */
Test(elementwise, donation_half_values) {
  nv_array *x = ramp(NV_DTYPE_FLOAT16);
  nv_scope_begin();
  nv_array *r = nv_scope_keep(nv_floor(nv_multiply_scalar(nv_exp(x), 100.0)));
  nv_scope_end();
  double v;
  nv_array *one = nv_slice(r, (int[]){N / 2}, (int[]){N / 2 + 1}, NULL, 1);
  cr_assert_eq(nv_array_item_double(one, &v), NV_OK, "%s", nv_last_error());
  cr_assert(fabs(v - floor(exp(0.5) * 100)) <= 1.0, "got %f", v);
  nv_release(one);
  nv_release(r);
  nv_release(x);
}

Test(elementwise, errors_name_the_op) {
  nv_array *f = nv_array_float(1.5f);
  nv_array *b = nv_bitwise_and(f, f);
  cr_assert_eq(nv_array_status(b), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_array_error(b), "bitwise_and") != NULL, "%s", nv_array_error(b));
  nv_array *z = nv_array_complex(1, 2);
  nv_array *q = nv_floor_divide(z, z);
  cr_assert(strstr(nv_array_error(q), "floor_divide") && strstr(nv_array_error(q), "complex64"));
  nv_array *nul = nv_sin(NULL);
  cr_assert_eq(nv_array_status(nul), NV_ERR_INVALID_ARGUMENT);
  nv_array *bad_dt = nv_view(f, (nv_dtype)99);
  cr_assert(strstr(nv_array_error(bad_dt), "view"));
  nv_array *tri = nv_tri(-3, 2, 0, NV_DTYPE_FLOAT32);
  cr_assert(strstr(nv_array_error(tri), "tri"));
  nv_array *ne = nv_number_of_elements(f, (int[]){0}, 1, false, NV_DTYPE_INT32);
  cr_assert(strstr(nv_array_error(ne), "number_of_elements"));
  nv_array *all[] = {f, b, z, q, nul, bad_dt, tri, ne};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) nv_release(all[i]);
}

Test(elementwise, multi_result_lists) {
  nv_vec *out = nv_vec_new();
  nv_array *a = nv_array_int(-7), *b = nv_array_int(2), *z = nv_array_int(0);
  cr_assert_eq(nv_divmod(a, b, out), NV_OK);
  cr_assert_eq(nv_divmod(a, z, out), NV_OK);
  int64_t q, r, q0, r0;
  cr_assert_eq(nv_array_item_int64(nv_vec_get(out, 0), &q), NV_OK);
  cr_assert_eq(nv_array_item_int64(nv_vec_get(out, 1), &r), NV_OK);
  cr_assert_eq(nv_array_item_int64(nv_vec_get(out, 2), &q0), NV_OK);
  cr_assert_eq(nv_array_item_int64(nv_vec_get(out, 3), &r0), NV_OK);
  cr_assert(q == -4 && r == 1 && q0 == 0 && r0 == -7, "%ld %ld %ld %ld", (long)q, (long)r,
            (long)q0, (long)r0);
  /* A failure appends nothing. */
  nv_array *c = nv_array_complex(1, 1);
  cr_assert_neq(nv_divmod(c, c, out), NV_OK);
  cr_assert_eq(nv_meshgrid(out, false, "yx", out), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_vec_size(out), 4);
  cr_assert_eq(nv_divmod(a, b, NULL), NV_ERR_INVALID_ARGUMENT);
  nv_release(a);
  nv_release(b);
  nv_release(z);
  nv_release(c);
  nv_vec_free(out);
}

/* depends: the results wait for their dependencies, and share their inputs' buffers. */
Test(elementwise, depends_orders_and_shares) {
  nv_array *x = nv_array_float(2.0f);
  cr_assert_eq(nv_eval1(x), NV_OK);
  nv_array *dep = nv_exp(x);
  nv_vec *ins = nv_vec_new(), *deps = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(ins, x);
  nv_vec_push(deps, dep);
  cr_assert_eq(nv_depends(ins, deps, out), NV_OK);
  nv_array *y = nv_vec_get(out, 0);
  cr_assert(!nv_array_is_evaluated(dep));
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert(nv_array_is_evaluated(dep));
  cr_assert_eq(nv_array_data(y), nv_array_data(x));
  nv_vec_free(ins);
  nv_vec_free(deps);
  nv_vec_free(out);
  nv_release(dep);
  nv_release(x);
}

/* Out-of-memory while building or evaluating fails the array; nothing leaks or crashes. */
Test(elementwise, allocation_failures_are_errors) {
  nv_array *x = ramp(NV_DTYPE_FLOAT32), *one = nv_array_float(1.0f);
  cr_assert_eq(nv_eval1(one), NV_OK);
  long live = nv__test_live_buffers();
  int failed = 0;
  for (long k = 1; k <= 6; k++) {
    nv__test_fail_alloc_at(k);
    nv_array *r = nv_logaddexp(x, one);
    nv_status s = nv_eval1(r);
    nv__test_fail_alloc_at(0);
    cr_assert(s == NV_OK || s == NV_ERR_OUT_OF_MEMORY, "status %d", s);
    failed += s != NV_OK;
    nv_release(r);
  }
  cr_assert_gt(failed, 0);
  cr_assert_eq(nv__test_live_buffers(), live);
  nv_release(one);
  nv_release(x);
}
