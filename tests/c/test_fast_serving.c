/* The serving kernels' donation (E36, E41, E48): causal_softmax and fast softmax write into
 * an input the evaluation owns outright, and never into one the caller still holds. */
#include <math.h>

#include <criterion/criterion.h>

#include "nuvec/fast.h"
#include "testutil.h"

/* The causal softmax of the 2 x 3 rows v (rows = 2: row 0 sees 2 columns, row 1 all 3). */
static void causal_ref(const float *v, float *out) {
  for (int r = 0; r < 2; r++) {
    int k = r == 0 ? 2 : 3;
    double m = -INFINITY, s = 0;
    for (int j = 0; j < k; j++) m = fmax(m, v[r * 3 + j]);
    for (int j = 0; j < k; j++) s += exp(v[r * 3 + j] - m);
    for (int j = 0; j < 3; j++) out[r * 3 + j] = j < k ? (float)(exp(v[r * 3 + j] - m) / s) : 0;
  }
}

static nv_array *matrix(const float *v) {
  nv_array *flat = f32v(v, 6);
  nv_array *x = nv_reshape(flat, (int[]){2, 3}, 2);
  nv_release(flat);
  return x;
}

Test(fast_serving, causal_softmax_of_an_intermediate_is_in_place) {
  float v[6] = {0.5f, -1, 2, 3, 0.25f, -2}, want[6], got[6], twice[6];
  for (int i = 0; i < 6; i++) twice[i] = 2 * v[i];
  causal_ref(twice, want);
  nv_array *x = matrix(v);
  cr_assert_eq(nv_eval1(x), NV_OK);
  nv_array *t = nv_multiply_scalar(x, 2); /* only causal_softmax reads t */
  nv_array *y = nv_fast_causal_softmax(t, 2);
  nv_release(t);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations() - d0, 1, "y is written into t's buffer");
  READ_F32(y, got, 6);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(got[i], want[i], 1e-6f, "element %d", i);
  READ_F32(x, got, 6);
  for (int i = 0; i < 6; i++) cr_assert_eq(got[i], v[i], "x itself is untouched");
  nv_release(x);
  nv_release(y);
}

Test(fast_serving, causal_softmax_keeps_a_held_input) {
  float v[6] = {0.5f, -1, 2, 3, 0.25f, -2}, want[6], got[6];
  causal_ref(v, want);
  nv_array *x = matrix(v);
  cr_assert_eq(nv_eval1(x), NV_OK);
  long d0 = nv__test_donations();
  nv_array *y = nv_fast_causal_softmax(x, 2);
  cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations(), d0, "x is held by the caller");
  READ_F32(y, got, 6);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(got[i], want[i], 1e-6f);
  READ_F32(x, got, 6);
  for (int i = 0; i < 6; i++) cr_assert_eq(got[i], v[i], "the held x keeps its values");
  nv_release(x);
  nv_release(y);
}

Test(fast_serving, softmax_of_an_intermediate_is_in_place) {
  float v[6] = {1, 2, 3, -1, 0, 1}, got[6];
  nv_array *x = matrix(v);
  nv_array *t = nv_add_scalar(x, 1);
  nv_array *y = nv_fast_softmax(t);
  nv_release(t);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations() - d0, 1, "y is written into t's buffer");
  READ_F32(y, got, 6);
  for (int r = 0; r < 2; r++) {
    double s = 0;
    for (int j = 0; j < 3; j++) s += exp(v[r * 3 + j]);
    for (int j = 0; j < 3; j++)
      cr_assert_float_eq(got[r * 3 + j], (float)(exp(v[r * 3 + j]) / s), 1e-6f);
  }
  nv_release(x);
  nv_release(y);
}
