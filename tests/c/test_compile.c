/* compile: trace once per signature (trace counts), retrace on a new shape,
 * dtype or layout, shapeless replay of element-wise graphs with broadcasting,
 * captured state updated across calls, constants, simplification (node counts),
 * the compile modes, grad/vjp/vmap of compiled functions and compile of grad,
 * evaluating inside a trace, and threads. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "testutil.h"

/* ---- Functions under test ---- */

static atomic_int body_calls; /* how often a body ran (traced or called uncompiled) */

/* x * y + 1 */
static nv_status f_axpy(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  atomic_fetch_add(&body_calls, 1);
  return nv_vec_push(
      out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)), nv_weak_scalar(1.0)));
}

/* A chain with repeated subexpressions and constants: (x+2)*(x+2) +
 * exp(x)*exp(x) + 2 */
static nv_status f_repeat(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  nv_array *a = nv_multiply(nv_add(x, nv_weak_scalar(2.0)), nv_add(x, nv_weak_scalar(2.0)));
  nv_array *b = nv_multiply(nv_exp(x), nv_exp(x));
  return nv_vec_push(out, nv_add(nv_add(a, b), nv_weak_scalar(2.0)));
}

/* sum(x * x) over everything (a scalar): for grad. */
static nv_status f_sumsq(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  return nv_vec_push(out, nv_sum(nv_multiply(nv_sin(x), x), NULL, 0, false));
}

/* reshape(x, (-1,)) * 2: the -1 is inferred again from each input's size. */
static nv_status f_flat(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  atomic_fetch_add(&body_calls, 1);
  int s[1] = {-1};
  return nv_vec_push(out, nv_multiply(nv_reshape(nv_vec_get(in, 0), s, 1), nv_weak_scalar(2.0)));
}

/* The captured state: s <- s + x; returns s * 10. */
static nv_status f_state(void *p, const nv_vec *in, nv_vec *out) {
  nv_vec *state = p;
  nv_array *s = nv_add(nv_vec_get(state, 0), nv_vec_get(in, 0));
  nv_status st = nv_vec_set(state, 0, s);
  if (st == NV_OK)
    st = nv_vec_push(out, nv_multiply(s, nv_weak_scalar(10.0)));
  return st;
}

/* x + c, c captured (a constant). */
static nv_status f_const(void *p, const nv_vec *in, nv_vec *out) {
  return nv_vec_push(out, nv_add(nv_vec_get(in, 0), (nv_array *)p));
}

/* Evaluates its input: not allowed inside a trace. */
static nv_status f_evals(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *y = nv_exp(nv_vec_get(in, 0));
  nv_status s = nv_eval(&y, 1);
  if (s != NV_OK)
    return s;
  return nv_vec_push(out, y);
}

/* stop_gradient(x) * x: the gradient is x, not 2x. */
static nv_status f_stop(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  return nv_vec_push(out, nv_sum(nv_multiply(nv_stop_gradient(x), x), NULL, 0, false));
}

/* Two outputs, one the input itself. */
static nv_status f_two(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  nv_status s = nv_vec_push(out, x);
  if (s == NV_OK)
    s = nv_vec_push(out, nv_tanh(x));
  return s;
}

/* ---- Helpers ---- */

static nv_array *randn(unsigned *st, const int *shape, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++)
    v[i] = test_randf(st);
  nv_array *x = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT32);
  free(v);
  return x;
}

/* Applies f to (a, b) (b may be NULL) and returns output `k`, a new reference.
 */
static nv_array *call_k(nv_closure *f, nv_array *a, nv_array *b, size_t k) {
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, a);
  if (b)
    nv_vec_push(in, b);
  nv_status s = nv_closure_apply(f, in, out);
  cr_assert_eq(s, NV_OK, "%s", nv_last_error());
  cr_assert_gt(nv_vec_size(out), k);
  nv_array *r = nv_retain(nv_vec_get(out, k));
  nv_vec_free(in);
  nv_vec_free(out);
  return r;
}

static nv_array *call(nv_closure *f, nv_array *a, nv_array *b) { return call_k(f, a, b, 0); }

/* Asserts that two float32 arrays hold the same values (to `tol`, relative). */
static void assert_same(nv_array *x, nv_array *y, float tol) {
  cr_assert_eq(nv_array_ndim(x), nv_array_ndim(y));
  size_t n = nv_array_size(x);
  cr_assert_eq(n, nv_array_size(y));
  float *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
  READ_F32(x, a, n);
  READ_F32(y, b, n);
  for (size_t i = 0; i < n; i++)
    cr_assert(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(b[i])), "at %zu: %g vs %g", i, a[i], b[i]);
  free(a);
  free(b);
}

static nv_compile_stats stats(nv_closure *c) {
  nv_compile_stats s;
  cr_assert_eq(nv_compile_get_stats(c, &s), NV_OK);
  return s;
}

static void setup(void) {
  nv_set_compile_mode(NV_COMPILE_MODE_ENABLED);
  atomic_store(&body_calls, 0);
}

TestSuite(compile, .init = setup);

/* ---- Tracing and the cache ---- */

Test(compile, traces_once_per_signature) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_axpy, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  int sh[2] = {3, 4};
  for (int i = 0; i < 3; i++) {
    nv_array *x = randn(&st, sh, 2), *y = randn(&st, sh, 2);
    nv_array *r = call(c, x, y), *e = call(f, x, y);
    assert_same(r, e, 0);
    nv_release(r);
    nv_release(e);
    nv_release(x);
    nv_release(y);
  }
  nv_compile_stats s = stats(c);
  cr_assert_eq(s.traces, 1);
  cr_assert_eq(s.calls, 3);
  cr_assert_eq(atomic_load(&body_calls), 4); /* one trace, three uncompiled calls */
  /* A new shape, a new dtype and a transposed layout each trace again. */
  int sh2[2] = {4, 3};
  nv_array *x = randn(&st, sh2, 2), *y = randn(&st, sh2, 2);
  nv_release(call(c, x, y));
  cr_assert_eq(stats(c).traces, 2);
  nv_array *xd = nv_astype(x, NV_DTYPE_FLOAT64);
  nv_array *rd = call(c, xd, y);
  cr_assert_eq(nv_array_dtype(rd), NV_DTYPE_FLOAT64);
  cr_assert_eq(stats(c).traces, 3);
  int perm[2] = {1, 0};
  nv_array *xt = nv_transpose(randn(&st, sh, 2), perm, 2);
  nv_array *rt = call(c, xt, y), *et = call(f, xt, y);
  assert_same(rt, et, 0);
  cr_assert_eq(stats(c).traces, 4);
  nv_release(call(c, xt, y));
  cr_assert_eq(stats(c).traces, 4);
  cr_assert_eq(stats(c).entries, 4);
  nv_release(xt);
  nv_release(rt);
  nv_release(et);
  nv_release(rd);
  nv_release(xd);
  nv_release(x);
  nv_release(y);
  nv_closure_release(c);
  nv_closure_release(f);
}

Test(compile, shapeless_elementwise_with_broadcasting) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_axpy, NULL, NULL);
  nv_compile_options o = {.shapeless = true};
  nv_closure *c = nv_compile(f, &o);
  int shapes[3][2] = {{2, 3}, {5, 7}, {1, 9}};
  for (int i = 0; i < 3; i++) {
    nv_array *x = randn(&st, shapes[i], 2), *y = randn(&st, &shapes[i][1], 1);
    nv_array *r = call(c, x, y), *e = call(f, x, y);
    cr_assert_eq(nv_array_shape(r)[0], shapes[i][0]);
    cr_assert_eq(nv_array_shape(r)[1], shapes[i][1]);
    assert_same(r, e, 0);
    nv_release(r);
    nv_release(e);
    nv_release(x);
    nv_release(y);
  }
  cr_assert_eq(stats(c).traces, 1);
  /* Shapes that do not broadcast fail with the op named. */
  int a[2] = {2, 3}, b[1] = {4};
  nv_array *x = randn(&st, a, 2), *y = randn(&st, b, 1);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  cr_assert_neq(nv_closure_apply(c, in, out), NV_OK);
  cr_assert(strstr(nv_last_error(), "cannot be broadcast"), "%s", nv_last_error());
  nv_vec_free(in);
  nv_vec_free(out);
  nv_release(x);
  nv_release(y);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* A shapeless entry replays a reshape with its -1 inferred from the new input (MLX's shapeless
 * reshape): one trace for both shapes. */
Test(compile, shapeless_reshape_infers_again) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_flat, NULL, NULL);
  nv_compile_options o = {.shapeless = true};
  nv_closure *c = nv_compile(f, &o);
  int s1[2] = {2, 3}, s2[2] = {4, 5};
  nv_array *x1 = randn(&st, s1, 2), *x2 = randn(&st, s2, 2);
  nv_array *r1 = call(c, x1, NULL), *r2 = call(c, x2, NULL), *r3 = call(c, x1, NULL);
  cr_assert_eq(nv_array_shape(r1)[0], 6);
  cr_assert_eq(nv_array_shape(r2)[0], 20);
  nv_array *e2 = call(f, x2, NULL);
  assert_same(r2, e2, 0);
  cr_assert_eq(stats(c).traces, 1);
  nv_array *e1 = call(f, x1, NULL);
  assert_same(r3, e1, 0);
  nv_release(e1);
  nv_release(r1);
  nv_release(r2);
  nv_release(r3);
  nv_release(e2);
  nv_release(x1);
  nv_release(x2);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* ---- State and constants ---- */

Test(compile, captured_state_updates_across_calls) {
  float zero = 0, one = 1.5f;
  nv_vec *state = nv_vec_new();
  nv_array *s0 = f32v(&zero, 1);
  nv_vec_push(state, s0);
  nv_release(s0);
  nv_closure *f = nv_closure_new(f_state, state, NULL);
  nv_compile_options o = {.inputs = state, .outputs = state};
  nv_closure *c = nv_compile(f, &o);
  nv_array *x = f32v(&one, 1);
  for (int i = 1; i <= 4; i++) {
    nv_array *r = call(c, x, NULL);
    float v, sv;
    READ_F32(r, &v, 1);
    READ_F32(nv_vec_get(state, 0), &sv, 1);
    cr_assert_float_eq(sv, 1.5f * (float)i, 1e-6);
    cr_assert_float_eq(v, 15.0f * (float)i, 1e-5);
    nv_release(r);
  }
  cr_assert_eq(stats(c).traces, 1);
  nv_release(x);
  nv_closure_release(c);
  nv_closure_release(f);
  nv_vec_free(state);
}

Test(compile, constants_are_kept_from_the_trace) {
  float cv[3] = {1, 2, 3}, xv[3] = {10, 20, 30};
  nv_array *k = f32v(cv, 3);
  nv_closure *f = nv_closure_new(f_const, k, NULL);
  nv_closure *c = nv_compile(f, NULL);
  nv_array *x = f32v(xv, 3);
  for (int i = 0; i < 2; i++) {
    nv_array *r = call(c, x, NULL);
    float v[3];
    READ_F32(r, v, 3);
    for (int j = 0; j < 3; j++)
      cr_assert_float_eq(v[j], xv[j] + cv[j], 0);
    nv_release(r);
  }
  nv_release(x);
  nv_closure_release(c);
  nv_closure_release(f);
  nv_release(k);
}

Test(compile, outputs_that_are_inputs) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_two, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  int sh[1] = {5};
  nv_array *x = randn(&st, sh, 1);
  nv_array *r0 = call_k(c, x, NULL, 0), *r1 = call_k(c, x, NULL, 1);
  cr_assert_eq(r0, x); /* the input itself, as f returns it */
  nv_array *e1 = nv_tanh(x);
  assert_same(r1, e1, 0);
  nv_release(r0);
  nv_release(r1);
  nv_release(e1);
  nv_release(x);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* ---- Simplification and modes ---- */

Test(compile, simplify_merges_and_shares) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_repeat, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  int sh[1] = {16};
  nv_array *x = randn(&st, sh, 1);
  nv_array *r = call(c, x, NULL), *e = call(f, x, NULL);
  assert_same(r, e, 1e-6f); /* fused: libm's expf where the hand kernel has a fast formula */
  nv_compile_stats s = stats(c);
  /* add, add, multiply, exp, exp, multiply, add, add: the second x+2 and exp(x)
   * are shared. */
  cr_assert_eq(s.traced_nodes, 8);
  cr_assert_eq(s.nodes, 6);
  nv_set_compile_mode(NV_COMPILE_MODE_NO_SIMPLIFY);
  nv_closure *c2 = nv_compile(f, NULL);
  nv_array *r2 = call(c2, x, NULL);
  assert_same(r2, e, 0);
  cr_assert_eq(stats(c2).traced_nodes, 8);
  cr_assert_eq(stats(c2).nodes, 8);
  nv_set_compile_mode(NV_COMPILE_MODE_ENABLED);
  nv_release(r);
  nv_release(r2);
  nv_release(e);
  nv_release(x);
  nv_closure_release(c);
  nv_closure_release(c2);
  nv_closure_release(f);
}

Test(compile, disabled_calls_the_function) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_axpy, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  nv_disable_compile();
  cr_assert_eq(nv_get_compile_mode(), NV_COMPILE_MODE_DISABLED);
  int sh[1] = {4};
  nv_array *x = randn(&st, sh, 1), *y = randn(&st, sh, 1);
  nv_release(call(c, x, y));
  nv_release(call(c, x, y));
  cr_assert_eq(atomic_load(&body_calls), 2);
  cr_assert_eq(stats(c).traces, 0);
  nv_enable_compile();
  nv_release(call(c, x, y));
  nv_release(call(c, x, y));
  cr_assert_eq(atomic_load(&body_calls), 3);
  cr_assert_eq(stats(c).traces, 1);
  nv_release(x);
  nv_release(y);
  nv_closure_release(c);
  nv_closure_release(f);
}

Test(compile, evaluating_inside_the_trace_fails) {
  nv_closure *f = nv_closure_new(f_evals, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  float v = 1;
  nv_array *x = f32v(&v, 1);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_neq(nv_closure_apply(c, in, out), NV_OK);
  cr_assert(strstr(nv_last_error(), "compile"), "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(out), 0);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_release(x);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* ---- Transforms ---- */

Test(compile, grad_vmap_of_compile_and_compile_of_grad) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_sumsq, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  nv_closure *gc = nv_grad(c, NULL, 0), *gf = nv_grad(f, NULL, 0);
  nv_closure *cg = nv_compile(gf, NULL);
  int sh[2] = {3, 5};
  for (int i = 0; i < 2; i++) {
    nv_array *x = randn(&st, sh, 2);
    nv_array *e = call(gf, x, NULL), *a = call(gc, x, NULL), *b = call(cg, x, NULL);
    assert_same(a, e, 1e-6f);
    assert_same(b, e, 1e-6f);
    nv_release(e);
    nv_release(a);
    nv_release(b);
    nv_release(x);
  }
  cr_assert_eq(stats(cg).traces, 1);
  /* vmap of the compiled function over the rows: per-row sums. */
  nv_closure *vc = nv_vmap(c, NULL, 0, NULL, 0), *vf = nv_vmap(f, NULL, 0, NULL, 0);
  nv_array *x = randn(&st, sh, 2);
  nv_array *a = call(vc, x, NULL), *e = call(vf, x, NULL);
  cr_assert_eq(nv_array_shape(a)[0], 3);
  assert_same(a, e, 1e-6f);
  nv_release(a);
  nv_release(e);
  nv_release(x);
  nv_closure_release(vc);
  nv_closure_release(vf);
  nv_closure_release(gc);
  nv_closure_release(gf);
  nv_closure_release(cg);
  nv_closure_release(c);
  nv_closure_release(f);
}

Test(compile, stop_gradient_kept_under_grad) {
  float xv[3] = {1, -2, 3};
  nv_closure *f = nv_closure_new(f_stop, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  nv_closure *g = nv_grad(c, NULL, 0);
  nv_array *x = f32v(xv, 3);
  nv_array *v = call(c, x, NULL), *d = call(g, x, NULL);
  float val, grad[3];
  READ_F32(v, &val, 1);
  READ_F32(d, grad, 3);
  cr_assert_float_eq(val, 14.0f, 1e-5);
  for (int i = 0; i < 3; i++)
    cr_assert_float_eq(grad[i], xv[i], 1e-6);
  nv_release(v);
  nv_release(d);
  nv_release(x);
  nv_closure_release(g);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* ---- Fusion ---- */

/* x * y + z, then exp(...) summed over the last axis. */
static nv_status f_fma_rows(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *t = nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)), nv_vec_get(in, 2));
  int ax = -1;
  nv_status s = nv_vec_push(out, t);
  if (s == NV_OK)
    s = nv_vec_push(out, nv_sum(nv_exp(t), &ax, 1, false));
  return s;
}

/* releases_everything runs on the CPU whatever the default device (it counts the CPU's live
 * buffers); the fusion tests run on the default device, which fuses on the GPU too. */

Test(compile, fused_kernels_equal_unfused) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_fma_rows, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  int sh[2] = {9, 70}, row[1] = {70};
  nv_array *x = randn(&st, sh, 2), *y = randn(&st, row, 1), *z = randn(&st, sh, 2);
  nv_vec *in = nv_vec_new(), *got = nv_vec_new(), *want = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  nv_vec_push(in, z);
  cr_assert_eq(nv_closure_apply(c, in, got), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_closure_apply(f, in, want), NV_OK, "%s", nv_last_error());
  /* One kernel: x*y+z (bit-exact), an output and the input of exp-sum, is its second output. */
  assert_same(nv_vec_get(got, 0), nv_vec_get(want, 0), 0);
  assert_same(nv_vec_get(got, 1), nv_vec_get(want, 1), 1e-5f);
  cr_assert_eq(stats(c).fused, 1);
  cr_assert_eq(stats(c).nodes, 4); /* multiply, add, exp, sum (before fusion) */
  nv_vec_free(in);
  nv_vec_free(got);
  nv_vec_free(want);
  nv_release(x);
  nv_release(y);
  nv_release(z);
  nv_closure_release(c);
  nv_closure_release(f);
}

Test(compile, releases_everything, .init = test_on_cpu, .fini = test_back) {
  unsigned st = test_seed();
  long before = nv__test_live_buffers();
  nv_closure *f = nv_closure_new(f_fma_rows, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  int sh[2] = {4, 16}, row[1] = {16};
  for (int i = 0; i < 3; i++) {
    nv_array *x = randn(&st, sh, 2), *y = randn(&st, row, 1), *z = randn(&st, sh, 2);
    nv_vec *in = nv_vec_new(), *out = nv_vec_new();
    nv_vec_push(in, x);
    nv_vec_push(in, y);
    nv_vec_push(in, z);
    cr_assert_eq(nv_closure_apply(c, in, out), NV_OK, "%s", nv_last_error());
    cr_assert_eq(nv_eval(nv_vec_data(out), nv_vec_size(out)), NV_OK);
    nv_vec_free(in);
    nv_vec_free(out);
    nv_release(x);
    nv_release(y);
    nv_release(z);
  }
  cr_assert_gt(nv__test_live_buffers(), before); /* the kernels' keepers, the constants */
  nv_closure_release(c);
  nv_closure_release(f);
  cr_assert_eq(nv__test_live_buffers(), before);
}

/* ---- Threads ---- */

typedef struct thread_arg {
  nv_closure *c, *f;
  unsigned seed;
  int failures;
} thread_arg;

static void *worker(void *p) {
  thread_arg *t = p;
  int sh[2] = {4, 8};
  for (int i = 0; i < 20; i++) {
    nv_array *x = randn(&t->seed, sh, 2), *y = randn(&t->seed, sh, 2);
    nv_vec *in = nv_vec_new(), *o1 = nv_vec_new(), *o2 = nv_vec_new();
    nv_vec_push(in, x);
    nv_vec_push(in, y);
    if (nv_closure_apply(t->c, in, o1) != NV_OK || nv_closure_apply(t->f, in, o2) != NV_OK) {
      t->failures++;
    } else {
      float a[32], b[32];
      if (nv_array_read(nv_vec_get(o1, 0), a, sizeof a) != NV_OK ||
          nv_array_read(nv_vec_get(o2, 0), b, sizeof b) != NV_OK || memcmp(a, b, sizeof a))
        t->failures++;
    }
    nv_vec_free(in);
    nv_vec_free(o1);
    nv_vec_free(o2);
    nv_release(x);
    nv_release(y);
  }
  return NULL;
}

static void *releaser(void *p) {
  nv_closure_release(p);
  return NULL;
}

Test(compile, threads_share_one_compiled_function) {
  nv_closure *f = nv_closure_new(f_axpy, NULL, NULL);
  nv_closure *c = nv_compile(f, NULL);
  pthread_t th[4];
  thread_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (thread_arg){c, f, test_seed() + (unsigned)i * 7919u, 0};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(args[i].failures, 0);
  }
  cr_assert_eq(stats(c).calls, 80);
  cr_assert_leq(stats(c).traces, 4);
  /* The last reference released on another thread. */
  pthread_t r;
  pthread_create(&r, NULL, releaser, c);
  pthread_join(r, NULL);
  nv_closure_release(f);
}

/* x @ transpose(x) summed over rows, then sorted: a shapeless entry replays transposes, matrix
 * products, row reductions and sorts by their shape rules (one trace for every shape). */
static nv_status f_gram(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  atomic_fetch_add(&body_calls, 1);
  nv_array *x = nv_vec_get(in, 0);
  int ax[1] = {1};
  nv_array *g = nv_matmul(x, nv_transpose(x, NULL, 0));
  int zero = 0;
  return nv_vec_push(out, nv_sort(nv_logsumexp(g, ax, 1, false), &zero));
}

Test(compile, shapeless_transpose_matmul_rows_and_sorts) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_gram, NULL, NULL);
  nv_compile_options o = {.shapeless = true};
  nv_closure *c = nv_compile(f, &o);
  int shapes[3][2] = {{3, 4}, {5, 2}, {1, 7}};
  for (int i = 0; i < 3; i++) {
    nv_array *x = randn(&st, shapes[i], 2);
    nv_array *r = call(c, x, NULL), *e = call(f, x, NULL);
    cr_assert_eq(nv_array_dim(r, 0), shapes[i][0]);
    assert_same(r, e, 1e-6f);
    nv_release(r);
    nv_release(e);
    nv_release(x);
  }
  cr_assert_eq(stats(c).traces, 1);
  nv_closure_release(c);
  nv_closure_release(f);
}

/* cumsum over the flattened input (a NULL axis): the shapeless rule gives the flattened size,
 * not the input's shape. */
static nv_status f_cumflat(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_cumsum(nv_vec_get(in, 0), NULL, false, true));
}

Test(compile, shapeless_scan_over_the_flattened_input) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_cumflat, NULL, NULL);
  nv_compile_options o = {.shapeless = true};
  nv_closure *c = nv_compile(f, &o);
  int shapes[2][2] = {{2, 3}, {4, 5}};
  for (int i = 0; i < 2; i++) {
    nv_array *x = randn(&st, shapes[i], 2);
    nv_array *r = call(c, x, NULL), *e = call(f, x, NULL);
    cr_assert_eq(nv_array_ndim(r), 1);
    cr_assert_eq(nv_array_dim(r, 0), shapes[i][0] * shapes[i][1]);
    assert_same(r, e, 1e-6f);
    nv_release(r);
    nv_release(e);
    nv_release(x);
  }
  nv_closure_release(c);
  nv_closure_release(f);
}
