/* Donation into compile's fused kernels (src/transforms/fuse.c, the evaluation's rule in
 * src/core/eval.c): an element-wise COMPILED node writes output 0 into a data input that the
 * element-wise donation rule allows (the only reference, whole, of output 0's dtype and shape,
 * float16/bfloat16/float32), also when intermediates escape as further outputs; an input the
 * caller holds, another dtype, and a chain ending in a reduction are never written; the same
 * in a shapeless function, whose chains are fused per call on the call's shapes. Values equal
 * the uncompiled function's in every case. */
#include <criterion/criterion.h>
#include <math.h>

#include "testutil.h"

/* The matmul is not fused: its result reaches the fused chain as an intermediate that only
 * the chain reads, so the chain may write into it. */

/* maximum(x @ w * 0.5 + b, 0): one chain reading x @ w (whole) and b (a broadcast row). */
static nv_status f_relu(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *h = nv_matmul(nv_vec_get(in, 0), nv_vec_get(in, 1));
  nv_array *y = nv_add(nv_multiply(h, nv_weak_scalar(0.5)), nv_vec_get(in, 2));
  return nv_vec_push(out, nv_maximum(y, nv_weak_scalar(0.0)));
}

/* (t + b, t) with t = (x @ w) * 2: t escapes, a second output of the fused node. */
static nv_status f_escape(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *t = nv_multiply(nv_matmul(nv_vec_get(in, 0), nv_vec_get(in, 1)), nv_weak_scalar(2.0));
  nv_status s = nv_vec_push(out, nv_add(t, nv_vec_get(in, 2)));
  return s == NV_OK ? nv_vec_push(out, t) : s;
}

/* sum(exp(x @ w * 0.25), -1): a chain ending in a reduction. */
static nv_status f_rowsum(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int ax[1] = {-1};
  nv_array *h = nv_matmul(nv_vec_get(in, 0), nv_vec_get(in, 1));
  return nv_vec_push(out, nv_sum(nv_exp(nv_multiply(h, nv_weak_scalar(0.25))), ax, 1, false));
}

/* x * 3 + 1: x comes from the caller. */
static nv_status f_caller(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_weak_scalar(3.0)),
                                 nv_weak_scalar(1.0)));
}

/* (x @ w).astype(float32) * 2 + 1 from float16 x, w: output 0 is float32, the intermediate
 * float16, so nothing can be donated. */
static nv_status f_widen(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *h = nv_astype(nv_matmul(nv_vec_get(in, 0), nv_vec_get(in, 1)), NV_DTYPE_FLOAT32);
  return nv_vec_push(out, nv_add(nv_multiply(h, nv_weak_scalar(2.0)), nv_weak_scalar(1.0)));
}

enum { R = 24, K = 16, D = 40 };

/* x (r, k), w (k, d), b (d,) of dtype dt, seeded values. */
static void inputs_of(nv_dtype dt, int r, int k, int d, nv_array **x, nv_array **w,
                      nv_array **b) {
  float *xv = malloc(sizeof(float) * (size_t)(r * k + 1)),
        *wv = malloc(sizeof(float) * (size_t)(k * d + 1)), *bv = malloc(sizeof(float) * (size_t)(d + 1));
  cr_assert(xv && wv && bv);
  unsigned st = test_seed();
  for (int i = 0; i < r * k; i++)
    xv[i] = test_randf(&st);
  for (int i = 0; i < k * d; i++)
    wv[i] = test_randf(&st);
  for (int i = 0; i < d; i++)
    bv[i] = test_randf(&st) * 0.5f;
  int sx[2] = {r, k}, sw[2] = {k, d}, sb[1] = {d};
  nv_array *a[3] = {nv_array_from_data(xv, sx, 2, NV_DTYPE_FLOAT32),
                    nv_array_from_data(wv, sw, 2, NV_DTYPE_FLOAT32),
                    nv_array_from_data(bv, sb, 1, NV_DTYPE_FLOAT32)};
  nv_array **o[3] = {x, w, b};
  for (int i = 0; i < 3; i++) {
    *o[i] = nv_astype(a[i], dt);
    cr_assert_eq(nv_eval1(*o[i]), NV_OK, "%s", nv_last_error());
    nv_release(a[i]);
  }
  free(xv);
  free(wv);
  free(bv);
}

static void inputs(nv_dtype dt, nv_array **x, nv_array **w, nv_array **b) {
  inputs_of(dt, R, K, D, x, w, b);
}

/* f applied to (x, w, b), its outputs evaluated; the donations their evaluation made in
 * *donated, the outputs (retained) in r. */
static size_t run(nv_closure *f, nv_array *x, nv_array *w, nv_array *b, nv_array **r,
                  long *donated) {
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, w);
  nv_vec_push(in, b);
  cr_assert_eq(nv_closure_apply(f, in, out), NV_OK, "%s", nv_last_error());
  size_t n = nv_vec_size(out);
  for (size_t i = 0; i < n; i++)
    r[i] = nv_retain(nv_vec_get(out, i));
  nv_vec_free(in);
  nv_vec_free(out);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval(r, n), NV_OK, "%s", nv_last_error());
  *donated = nv__test_donations() - d0;
  return n;
}

/* Whether float32 outputs a and b of n elements agree within a relative 1e-5 (a fused row
 * reduction accumulates in double, the hand kernel otherwise). */
static bool close_f32(nv_array *a, nv_array *b, int64_t n) {
  const float *p = nv_array_data(a), *q = nv_array_data(b);
  for (int64_t i = 0; i < n; i++)
    if (fabsf(p[i] - q[i]) > 1e-5f * (fabsf(q[i]) + 1.0f))
      return false;
  return true;
}

/* Whether the n outputs got equal ref (bit for bit; float32 within close_f32 where
 * `reduces`). */
static void same_outputs(nv_array **got, nv_array **ref, size_t n, nv_dtype dt, bool reduces) {
  for (size_t i = 0; i < n; i++) {
    size_t bytes = (size_t)nv_array_size(ref[i]) * nv_dtype_size(nv_array_dtype(ref[i]));
    cr_assert_eq(nv_array_dtype(got[i]), nv_array_dtype(ref[i]));
    cr_assert_eq(nv_array_size(got[i]), nv_array_size(ref[i]));
    bool same = reduces && dt == NV_DTYPE_FLOAT32
                    ? close_f32(got[i], ref[i], nv_array_size(ref[i]))
                    : !memcmp(nv_array_data(got[i]), nv_array_data(ref[i]), bytes);
    cr_assert(same, "output %zu of %s differs from the uncompiled one", i, nv_dtype_name(dt));
  }
}

/* As check, for `body` compiled shapeless and called on inputs of several shapes (two calls
 * each): every call fuses (fused == 1) and makes `want` donations; one trace, and for an
 * element-wise chain one layout class (its kernel serves every shape). */
static void check_shapeless(nv_closure_fn body, nv_dtype dt, long want, bool reduces) {
  static const int shapes[][3] = {{R, K, D}, {5, 3, 7}, {64, 8, 130}, {2, 33, 2}};
  nv_closure *raw = nv_closure_new(body, NULL, NULL);
  nv_compile_options opt = {.shapeless = true};
  nv_closure *c = nv_compile(raw, &opt);
  cr_assert_not_null(c);
  size_t nshapes = sizeof shapes / sizeof *shapes;
  for (size_t t = 0; t < nshapes; t++) {
    nv_array *x, *w, *b, *ref[4], *got[4];
    inputs_of(dt, shapes[t][0], shapes[t][1], shapes[t][2], &x, &w, &b);
    long d;
    size_t n = run(raw, x, w, b, ref, &d);
    for (int call = 0; call < 2; call++) {
      size_t m = run(c, x, w, b, got, &d);
      cr_assert_eq(m, n);
      cr_assert_eq(d, want, "shape %zu, call %d of %s: %ld donations, %ld wanted", t, call,
                   nv_dtype_name(dt), d, want);
      same_outputs(got, ref, n, dt, reduces);
      nv_compile_stats st;
      cr_assert_eq(nv_compile_get_stats(c, &st), NV_OK);
      cr_assert_eq(st.fused, 1, "shape %zu of %s: %zu fused", t, nv_dtype_name(dt), st.fused);
      for (size_t i = 0; i < n; i++)
        nv_release(got[i]);
    }
    for (size_t i = 0; i < n; i++)
      nv_release(ref[i]);
    nv_release(x);
    nv_release(w);
    nv_release(b);
  }
  nv_compile_stats st;
  cr_assert_eq(nv_compile_get_stats(c, &st), NV_OK);
  cr_assert_eq(st.traces, 1);
  /* A GPU reduction's launch class follows its row length (vector loads where it is a
   * multiple of the vector): up to one per shape there. */
  if (reduces && dt == NV_DTYPE_FLOAT32)
    cr_assert(st.fused_layouts >= 1 && st.fused_layouts <= nshapes, "%zu", st.fused_layouts);
  else
    cr_assert_eq(st.fused_layouts, 1, "%s: %zu layout classes", nv_dtype_name(dt),
                 st.fused_layouts);
  nv_closure_release(c);
  nv_closure_release(raw);
}

/* Compiles `body`, calls it twice (trace, replay) and uncompiled once on inputs of dtype dt:
 * each compiled call makes `want` donations and `fused` kernels exist, the values (all
 * outputs) equal the uncompiled ones bit for bit (float32 within close_f32 where `reduces`). */
static void check(nv_closure_fn body, nv_dtype dt, long want, size_t fused, bool reduces) {
  nv_array *x, *w, *b;
  inputs(dt, &x, &w, &b);
  nv_closure *raw = nv_closure_new(body, NULL, NULL);
  nv_closure *c = nv_compile(raw, NULL);
  cr_assert_not_null(c);
  nv_array *ref[4], *got[4];
  long d;
  size_t n = run(raw, x, w, b, ref, &d);
  for (int call = 0; call < 2; call++) {
    size_t m = run(c, x, w, b, got, &d);
    cr_assert_eq(m, n);
    cr_assert_eq(d, want, "call %d of %s: %ld donations, %ld wanted", call, nv_dtype_name(dt), d,
                 want);
    same_outputs(got, ref, n, dt, reduces);
    for (size_t i = 0; i < n; i++)
      nv_release(got[i]);
  }
  nv_compile_stats st;
  cr_assert_eq(nv_compile_get_stats(c, &st), NV_OK);
  cr_assert_eq(st.fused, fused);
  /* The caller's arrays are untouched. */
  nv_array *x2, *w2, *b2;
  inputs(dt, &x2, &w2, &b2);
  size_t bytes = (size_t)R * K * nv_dtype_size(dt);
  cr_assert_eq(memcmp(nv_array_data(x), nv_array_data(x2), bytes), 0);
  cr_assert_eq(memcmp(nv_array_data(b), nv_array_data(b2), (size_t)D * nv_dtype_size(dt)), 0);
  for (size_t i = 0; i < n; i++)
    nv_release(ref[i]);
  nv_closure_release(c);
  nv_closure_release(raw);
  nv_release(x);
  nv_release(w);
  nv_release(b);
  nv_release(x2);
  nv_release(w2);
  nv_release(b2);
}

static const nv_dtype FLOATS[] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};

Test(compile_donation, chain_writes_into_its_intermediate_input) {
  for (int i = 0; i < 3; i++)
    check(f_relu, FLOATS[i], 1, 1, false);
}

Test(compile_donation, with_an_escaping_intermediate) {
  for (int i = 0; i < 3; i++)
    check(f_escape, FLOATS[i], 1, 1, false);
}

Test(compile_donation, never_in_a_reduction_a_callers_input_or_another_dtype) {
  /* float32: the reduction is in the fused kernel; float16/bfloat16 chains end before it
   * (the hand reduction follows), so their element-wise kernel takes x @ w's buffer. */
  for (int i = 0; i < 3; i++) {
    check(f_rowsum, FLOATS[i], FLOATS[i] == NV_DTYPE_FLOAT32 ? 0 : 1, 1, true);
    check(f_caller, FLOATS[i], 0, 1, false);
  }
  check(f_widen, NV_DTYPE_FLOAT16, 0, 1, false);
}

Test(compile_donation, float64_follows_the_element_wise_rule) {
  /* The element-wise rule takes every dtype (MLX's rule): a float64 chain writes into its
   * intermediate input as the float32 one does. */
  check(f_relu, NV_DTYPE_FLOAT64, 1, 1, false);
}

Test(compile_donation, shapeless_chains_write_into_their_intermediate_input) {
  for (int i = 0; i < 3; i++) {
    check_shapeless(f_relu, FLOATS[i], 1, false);
    check_shapeless(f_escape, FLOATS[i], 1, false);
  }
  check_shapeless(f_relu, NV_DTYPE_FLOAT64, 1, false);
}

Test(compile_donation, shapeless_never_in_a_reduction_a_callers_input_or_another_dtype) {
  for (int i = 0; i < 3; i++) {
    check_shapeless(f_rowsum, FLOATS[i], FLOATS[i] == NV_DTYPE_FLOAT32 ? 0 : 1, true);
    check_shapeless(f_caller, FLOATS[i], 0, false);
  }
  check_shapeless(f_widen, NV_DTYPE_FLOAT16, 0, false);
}
