/* Donation (DESIGN §3): when an output may be written into an input's buffer. */
#include <criterion/criterion.h>

#include "testutil.h"

static nv_array *vec(float a, float b, float c, float d) {
  float v[4] = {a, b, c, d};
  return f32v(v, 4);
}

Test(donation, held_input_keeps_its_values) {
  nv_array *x = vec(1, 2, 3, 4);
  cr_assert_eq(nv_eval1(x), NV_OK);
  long d0 = nv__test_donations();
  nv_array *y = nv_add_scalar(x, 1);
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_eq(nv__test_donations(), d0, "x is held by the caller");
  float a[4], b[4];
  READ_F32(x, a, 4);
  READ_F32(y, b, 4);
  cr_assert(a[0] == 1 && a[3] == 4 && b[0] == 2 && b[3] == 5);
  nv_release(x);
  nv_release(y);
}

Test(donation, intermediate_is_written_in_place) {
  nv_array *x = vec(1, 2, 3, 4);
  nv_array *t = nv_multiply_scalar(x, 2);
  nv_array *y = nv_add_scalar(t, 1);
  nv_release(t);
  long d0 = nv__test_donations();
  long live0 = nv__test_live_buffers();
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_eq(nv__test_donations() - d0, 1, "y takes t's buffer");
  /* x, y's buffer (t's) and the weak scalars' buffers that are already alive: nothing new */
  cr_assert_leq(nv__test_live_buffers(), live0 + 1);
  float b[4];
  READ_F32(y, b, 4);
  cr_assert(b[0] == 3 && b[3] == 9);
  float a[4];
  READ_F32(x, a, 4);
  cr_assert(a[0] == 1, "x itself is untouched");
  nv_release(x);
  nv_release(y);
}

Test(donation, evaluated_array_whose_last_handle_was_dropped) {
  nv_array *x = vec(1, 2, 3, 4);
  nv_array *t = nv_multiply_scalar(x, 2);
  const void *ptr = nv_array_data(t);
  cr_assert_not_null(ptr);
  nv_array *y = nv_add_scalar(t, 1);
  nv_release(t);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_eq(nv__test_donations() - d0, 1);
  cr_assert_eq(nv_array_data(y), ptr, "written into t's buffer");
  float b[4];
  READ_F32(y, b, 4);
  cr_assert(b[0] == 3 && b[3] == 9);
  nv_release(x);
  nv_release(y);
}

Test(donation, input_read_by_another_consumer_is_not_donated) {
  nv_array *x = vec(1, 2, 3, 4);
  nv_array *t = nv_multiply_scalar(x, 2);
  nv_array *y = nv_add_scalar(t, 1);
  nv_array *z = nv_multiply_scalar(t, 3);
  nv_release(t);
  long d0 = nv__test_donations();
  nv_array *both[2] = {y, z};
  cr_assert_eq(nv_eval(both, 2), NV_OK);
  /* Only the last consumer of t may take it, once the other has read it. */
  cr_assert_leq(nv__test_donations() - d0, 1);
  float b[4], c[4];
  READ_F32(y, b, 4);
  READ_F32(z, c, 4);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(b[i], 2.0f * (float)(i + 1) + 1);
    cr_assert_eq(c[i], 6.0f * (float)(i + 1));
  }
  nv_release(x);
  nv_release(y);
  nv_release(z);
}

Test(donation, unstarted_schedule_holds_what_it_reads) {
  nv_array *x = vec(1, 2, 3, 4);
  nv_array *t = nv_multiply_scalar(x, 2);
  cr_assert_eq(nv_eval1(t), NV_OK);
  nv_array *y2 = nv_multiply_scalar(t, 5);
  nv_schedule *s = nv_schedule_new(&y2, 1);
  nv_array *y = nv_add_scalar(t, 1);
  nv_release(t);
  nv_release(y2);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_eq(nv__test_donations(), d0, "the schedule still reads t");
  nv_array *const *arr = nv_schedule_arrays(s, NULL);
  nv_array *kept = nv_retain(arr[0]);
  cr_assert_eq(nv_schedule_eval(s), NV_OK);
  float c[4];
  READ_F32(kept, c, 4);
  cr_assert(c[0] == 10 && c[3] == 40);
  nv_release(kept);
  nv_release(x);
  nv_release(y);
}

Test(donation, caller_owned_nocopy_buffer_is_never_written) {
  float data[4] = {1, 2, 3, 4};
  int shape[1] = {4};
  nv_array *x = nv_array_from_data_nocopy(data, shape, 1, NV_DTYPE_FLOAT32, NULL, NULL);
  nv_array *y = nv_add_scalar(x, 1);
  nv_release(x);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_eq(nv__test_donations(), d0);
  cr_assert(data[0] == 1 && data[3] == 4);
  nv_release(y);
}

Test(donation, elementwise_rule_dtype_and_shape) {
  /* Every dtype is a candidate (MLX's rule): an int32 intermediate is written in place... */
  int32_t iv[4] = {1, 2, 3, 4};
  nv_array *xi = i32v(iv, 4);
  nv_array *ti = nv_add(xi, xi);
  nv_array *yi = nv_add(ti, xi);
  nv_release(ti);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(yi), NV_OK);
  cr_assert_eq(nv__test_donations() - d0, 1);
  int32_t gi[4];
  cr_assert_eq(nv_array_read(yi, gi, sizeof gi), NV_OK);
  cr_assert(gi[0] == 3 && gi[1] == 6 && gi[2] == 9 && gi[3] == 12);
  /* ...but not into an output of another dtype (a comparison's bool output). */
  nv_array *tc = nv_add(xi, xi);
  nv_array *yc = nv_greater(tc, xi);
  nv_release(tc);
  d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(yc), NV_OK);
  cr_assert_eq(nv__test_donations(), d0);
  nv_release(yc);
  /* A broadcast input is not the output's exact shape. */
  float one = 1;
  nv_array *s = f32v(&one, 1);
  nv_array *ts = nv_exp(s);
  nv_array *x = vec(1, 2, 3, 4);
  nv_array *ys = nv_add(ts, x);
  nv_release(ts);
  d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(ys), NV_OK);
  cr_assert_eq(nv__test_donations(), d0);
  float b[4];
  READ_F32(ys, b, 4);
  cr_assert_float_eq(b[0], expf(1) + 1, 1e-6);
  nv_release(xi);
  nv_release(yi);
  nv_release(s);
  nv_release(x);
  nv_release(ys);
}

/* The size rule on an evaluated, owned base: with the limit lowered below the base's size the
 * update is not written in place (so this test fails without the rule); restored, it is. */
Test(donation, size_rule_on_an_owned_base) {
  nv_set_default_device(nv_cpu()); /* the CPU's own rules, also where a GPU is the default */
  for (int lowered = 1; lowered >= 0; lowered--) {
    nv__test_set_donation_limit(lowered ? 8 : 0);
    int shape[1] = {8};
    nv_array *base = nv_arange(0, 8, 1, NV_DTYPE_FLOAT32);
    cr_assert_eq(nv_eval1(base), NV_OK);
    const void *ptr = nv_array_data(base);
    float u = -1;
    nv_array *upd = f32v(&u, 1);
    int start[1] = {2}, stop[1] = {3};
    nv_array *out = nv_slice_update(base, upd, start, stop, NULL, 1);
    nv_release(base);
    long d0 = nv__test_donations();
    cr_assert_eq(nv_eval1(out), NV_OK);
    cr_assert_eq(nv__test_donations() - d0, lowered ? 0 : 1);
    cr_assert_eq(nv_array_data(out) == ptr, !lowered);
    float v[8];
    READ_F32(out, v, 8);
    cr_assert(v[1] == 1 && v[2] == -1 && v[3] == 3);
    nv_release(upd);
    nv_release(out);
    (void)shape;
  }
  nv__test_set_donation_limit(0);
}
