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

/* A pool of 2 blocks of 2 slots, one feature: [0, 1, 2, 3] + `add`. */
static nv_array *pool_of(float add) {
  float v[4] = {add, 1 + add, 2 + add, 3 + add};
  nv_array *flat = f32v(v, 4);
  nv_array *p = nv_reshape(flat, (int[]){2, 2, 1}, 3);
  nv_release(flat);
  return p;
}

static nv_array *token_rows(void) {
  float v[3] = {10, 20, 30};
  nv_array *flat = f32v(v, 3);
  nv_array *r = nv_reshape(flat, (int[]){3, 1}, 2);
  nv_release(flat);
  return r;
}

Test(fast_serving, paged_write_into_an_intermediate_pool_is_in_place) {
  nv_array *base = pool_of(0);
  nv_array *pool = nv_add_scalar(base, 100); /* only paged_write reads it */
  nv_array *vals = token_rows(), *slots = i32v((int32_t[]){3, -1, 0}, 3);
  nv_array *y = nv_fast_paged_write(pool, vals, slots);
  nv_release(pool);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations() - d0, 1, "y is written into the pool's buffer");
  float got[4], want[4] = {30, 101, 102, 10}, b[4];
  READ_F32(y, got, 4);
  for (int i = 0; i < 4; i++) cr_assert_eq(got[i], want[i], "slot %d", i);
  READ_F32(base, b, 4);
  for (int i = 0; i < 4; i++) cr_assert_eq(b[i], (float)i, "the base under the pool is untouched");
  nv_release(base);
  nv_release(vals);
  nv_release(slots);
  nv_release(y);
}

Test(fast_serving, paged_write_keeps_a_held_pool) {
  nv_array *pool = pool_of(0);
  cr_assert_eq(nv_eval1(pool), NV_OK);
  nv_array *vals = token_rows(), *slots = i32v((int32_t[]){1, 2, -5}, 3);
  long d0 = nv__test_donations();
  nv_array *y = nv_fast_paged_write(pool, vals, slots);
  cr_assert_eq(nv_eval1(y), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations(), d0, "the pool is held by the caller");
  float got[4], want[4] = {0, 10, 20, 3}, p[4];
  READ_F32(y, got, 4);
  READ_F32(pool, p, 4);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(got[i], want[i], "slot %d", i);
    cr_assert_eq(p[i], (float)i, "the held pool keeps its values");
  }
  nv_release(pool);
  nv_release(vals);
  nv_release(slots);
  nv_release(y);
}

/* conv_slots over 2 sequences, 1 channel, 3 taps, a pool of 2 slots of 2 states: slot 1 holds
 * (1, 2) + `add`, slot 0 (5, 6) + add. */
static void conv_case(bool intermediate) {
  float pv[4] = {5, 6, 1, 2}, xv[2] = {3, 7}, wv[3] = {1, 10, 100};
  nv_array *flat = f32v(pv, 4);
  nv_array *base = nv_reshape(flat, (int[]){2, 1, 2}, 3);
  nv_release(flat);
  nv_array *pool = intermediate ? nv_add_scalar(base, 0) : nv_retain(base);
  cr_assert_eq(nv_eval1(base), NV_OK);
  nv_array *xf = f32v(xv, 2), *wf = f32v(wv, 3);
  nv_array *x = nv_reshape(xf, (int[]){2, 1}, 2), *w = nv_reshape(wf, (int[]){1, 3}, 2);
  nv_release(xf);
  nv_release(wf);
  nv_array *slots = i32v((int32_t[]){1, -1}, 2), *out[2];
  cr_assert_eq(nv_fast_conv_slots(x, w, NULL, pool, slots, false, out), NV_OK);
  if (intermediate) nv_release(pool);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval(out, 2), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_donations() - d0, intermediate ? 1 : 0, "%s",
               intermediate ? "the pool's buffer takes the update" : "the pool is held");
  float y[2], p[4], b[4];
  READ_F32(out[0], y, 2);
  READ_F32(out[1], p, 4);
  READ_F32(base, b, 4);
  cr_assert(y[0] == 1 * 1 + 10 * 2 + 100 * 3 && y[1] == 0, "y = (%g, %g)", y[0], y[1]);
  float want[4] = {5, 6, 2, 3};
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(p[i], want[i], "pool element %d", i);
    cr_assert_eq(b[i], pv[i], "the base keeps its values");
  }
  nv_release(base);
  if (!intermediate) nv_release(pool);
  nv_release(x);
  nv_release(w);
  nv_release(slots);
  nv_release(out[0]);
  nv_release(out[1]);
}

Test(fast_serving, conv_slots_into_an_intermediate_pool_is_in_place) { conv_case(true); }

Test(fast_serving, conv_slots_keeps_a_held_pool) { conv_case(false); }
