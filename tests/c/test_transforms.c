/* Transforms: every core primitive's vjp and jvp against finite differences, every core
 * primitive under vmap against a loop, the classic cases (grad of a sum of squares, Hessian-
 * vector products, per-example gradients), nesting, custom functions, checkpoint, the tracer
 * semantics of the seed (E32), and the errors. */
#include <criterion/criterion.h>

#include "core/backend.h"
#include "gradcheck.h"
#include "testutil.h"

/* ---- The ops under test, as closures ---- */

typedef nv_array *(*op_fn)(nv_array *const *x);

typedef struct op_case {
  const char *name;
  int nin;
  op_fn fn;
  int nd[3];
  int shape[3][4];
  int domain; /* 0: [-1, 1); 1: positive; 2: away from zero */
  int nout;
} op_case;

static nv_array *f_negative(nv_array *const *x) { return nv_negative(x[0]); }
static nv_array *f_abs(nv_array *const *x) { return nv_abs(x[0]); }
static nv_array *f_exp(nv_array *const *x) { return nv_exp(x[0]); }
static nv_array *f_log(nv_array *const *x) { return nv_log(x[0]); }
static nv_array *f_sqrt(nv_array *const *x) { return nv_sqrt(x[0]); }
static nv_array *f_copy(nv_array *const *x) { return nv_copy(x[0]); }
static nv_array *f_astype(nv_array *const *x) {
  nv_array *a = nv_astype(x[0], NV_DTYPE_FLOAT32);
  nv_array *r = nv_astype(a, NV_DTYPE_FLOAT64);
  nv_release(a);
  return r;
}
static nv_array *f_reshape(nv_array *const *x) {
  int s[2] = {3, -1};
  return nv_reshape(x[0], s, 2);
}
static nv_array *f_transpose(nv_array *const *x) {
  int p[3] = {2, 0, 1};
  return nv_transpose(x[0], p, 3);
}
static nv_array *f_broadcast(nv_array *const *x) {
  int s[3] = {2, 3, 4};
  return nv_broadcast_to(x[0], s, 3);
}
static nv_array *f_slice(nv_array *const *x) {
  int start[2] = {4, 0}, stop[2] = {0, 4}, step[2] = {-2, 3};
  return nv_slice(x[0], start, stop, step, 2);
}
static nv_array *f_squeeze(nv_array *const *x) {
  int a = 1;
  return nv_squeeze(x[0], &a, 1);
}
static nv_array *f_expand_dims(nv_array *const *x) {
  int a[2] = {0, 2};
  return nv_expand_dims(x[0], a, 2);
}
static nv_array *f_as_strided(nv_array *const *x) {
  int s[2] = {3, 3};
  int64_t st[2] = {1, 1};
  return nv_as_strided(x[0], s, 2, st, 1);
}
static nv_array *f_slice_update(nv_array *const *x) {
  int start[2] = {0, 0}, stop[2] = {4, 3}, step[2] = {2, 1};
  return nv_slice_update(x[0], x[1], start, stop, step, 2);
}
static nv_array *f_add(nv_array *const *x) { return nv_add(x[0], x[1]); }
static nv_array *f_subtract(nv_array *const *x) { return nv_subtract(x[0], x[1]); }
static nv_array *f_multiply(nv_array *const *x) { return nv_multiply(x[0], x[1]); }
static nv_array *f_divide(nv_array *const *x) { return nv_divide(x[0], x[1]); }
static nv_array *f_maximum(nv_array *const *x) { return nv_maximum(x[0], x[1]); }
static nv_array *f_minimum(nv_array *const *x) { return nv_minimum(x[0], x[1]); }
static nv_array *f_sum_axis(nv_array *const *x) {
  int a[2] = {0, -1};
  return nv_sum(x[0], a, 2, false);
}
static nv_array *f_sum_keep(nv_array *const *x) {
  int a = 1;
  return nv_sum(x[0], &a, 1, true);
}
static nv_array *f_sum_all(nv_array *const *x) { return nv_sum(x[0], NULL, 0, false); }
static nv_array *f_scalar_ops(nv_array *const *x) {
  nv_array *a = nv_multiply_scalar(x[0], 3.0), *b = nv_subtract_scalar(a, 0.25);
  nv_array *r = nv_divide_scalar(b, 1.5);
  nv_release(a);
  nv_release(b);
  return r;
}

static const op_case cases[] = {
    {"negative", 1, f_negative, {2}, {{2, 3}}, 0, 1},
    {"abs", 1, f_abs, {2}, {{2, 3}}, 2, 1},
    {"exp", 1, f_exp, {2}, {{2, 3}}, 0, 1},
    {"log", 1, f_log, {2}, {{2, 3}}, 1, 1},
    {"sqrt", 1, f_sqrt, {2}, {{2, 3}}, 1, 1},
    {"copy", 1, f_copy, {2}, {{2, 3}}, 0, 1},
    {"astype", 1, f_astype, {2}, {{2, 3}}, 0, 1},
    {"reshape", 1, f_reshape, {2}, {{2, 3}}, 0, 1},
    {"transpose", 1, f_transpose, {3}, {{2, 3, 2}}, 0, 1},
    {"broadcast_to", 1, f_broadcast, {2}, {{3, 1}}, 0, 1},
    {"slice", 1, f_slice, {2}, {{5, 4}}, 0, 1},
    {"squeeze", 1, f_squeeze, {3}, {{2, 1, 3}}, 0, 1},
    {"expand_dims", 1, f_expand_dims, {2}, {{2, 3}}, 0, 1},
    {"as_strided", 1, f_as_strided, {1}, {{6}}, 0, 1},
    {"slice_update", 2, f_slice_update, {2, 1}, {{4, 3}, {3}}, 0, 1},
    {"add", 2, f_add, {2, 1}, {{2, 3}, {3}}, 0, 1},
    {"subtract", 2, f_subtract, {2, 2}, {{2, 1}, {1, 3}}, 0, 1},
    {"multiply", 2, f_multiply, {2, 1}, {{2, 3}, {3}}, 0, 1},
    {"divide", 2, f_divide, {2, 1}, {{2, 3}, {3}}, 2, 1},
    {"maximum", 2, f_maximum, {2, 1}, {{2, 3}, {3}}, 0, 1},
    {"minimum", 2, f_minimum, {2, 2}, {{2, 3}, {2, 3}}, 0, 1},
    {"sum_axes", 1, f_sum_axis, {3}, {{2, 3, 2}}, 0, 1},
    {"sum_keepdims", 1, f_sum_keep, {2}, {{2, 3}}, 0, 1},
    {"sum_all", 1, f_sum_all, {2}, {{2, 3}}, 0, 1},
    {"scalar_ops", 1, f_scalar_ops, {2}, {{2, 3}}, 0, 1},
};
#define NCASES (sizeof cases / sizeof *cases)

static nv_status case_call(void *payload, const nv_vec *in, nv_vec *out) {
  const op_case *c = payload;
  /* Closures run inside a scope of their own: what they create is released when they return,
   * so they push their results and release nothing. */
  nv_array *r = c->fn(nv_vec_data(in));
  nv_status s = nv_array_status(r);
  if (s == NV_OK) s = nv_vec_push(out, r);
  return s;
}

/* The two-output test primitive as a closure. */
static nv_status add_multiply_call(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *s, *p;
  nv_status st = nv__test_add_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1), &s, &p);
  if (st != NV_OK) return st;
  nv_vec_push(out, s);
  return nv_vec_push(out, p);
}

/* A random float64 array of `shape` in the case's domain. */
static nv_array *random_array(const int *shape, int nd, int domain, unsigned *st) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    double r = test_randf(st);
    if (domain == 1) r = 0.2 + fabs(r) * 2;
    if (domain == 2) r = (r < 0 ? -1 : 1) * (0.3 + fabs(r));
    v[i] = r;
  }
  nv_array *a = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
  free(v);
  return a;
}

/* A strided view with the values of a fresh random array of `shape`: the transpose of a
 * transposed copy, or a negative-step slice of a reversed copy (so rules see non-contiguous
 * inputs). */
static nv_array *strided_array(const int *shape, int nd, int domain, unsigned *st, int kind) {
  return nv_test_strided_view(random_array(shape, nd, domain, st), kind == 0);
}

Test(transforms, every_core_primitive_vjp_jvp_matches_finite_differences) {
  unsigned st = test_seed();
  gc_seed(st);
  char why[512];
  for (size_t k = 0; k < NCASES; k++) {
    const op_case *c = &cases[k];
    for (int layout = 0; layout < 2; layout++) {
      nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
      nv_vec *p = nv_vec_new();
      for (int i = 0; i < c->nin; i++) {
        nv_array *a = layout ? strided_array(c->shape[i], c->nd[i], c->domain, &st, i)
                             : random_array(c->shape[i], c->nd[i], c->domain, &st);
        nv_vec_push(p, a);
        nv_release(a);
      }
      double tol = k == 6 ? 1e-4 : 1e-6, h = k == 6 ? 1e-3 : 1e-6;
      cr_assert(nv_gradcheck(f, p, h, tol, why, sizeof why), "%s (layout %d): %s", c->name,
                layout, why);
      nv_vec_free(p);
      nv_closure_release(f);
    }
  }
}

Test(transforms, multi_output_primitive_vjp_jvp) {
  unsigned st = test_seed() + 7;
  gc_seed(st);
  char why[512];
  int shape[2] = {3, 3};
  nv_closure *f = nv_closure_new(add_multiply_call, NULL, NULL);
  nv_vec *p = nv_vec_new();
  for (int i = 0; i < 2; i++) {
    nv_array *a = random_array(shape, 2, 0, &st);
    nv_vec_push(p, a);
    nv_release(a);
  }
  cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s", why);
  cr_assert(nv_vmapcheck(f, p, (int[]){1, 0}, 0, why, sizeof why), "%s", why);
  nv_vec_free(p);
  nv_closure_release(f);
}

/* ---- vmap of every core primitive ---- */

/* Non-differentiable ops, for vmap only. */
static nv_array *f_to_int(nv_array *const *x) {
  nv_array *a = nv_multiply_scalar(x[0], 5.0);
  nv_array *r = nv_astype(a, NV_DTYPE_INT32);
  nv_release(a);
  return r;
}
static nv_array *f_fp8(nv_array *const *x) {
  nv_array *a = nv_to_fp8(x[0]);
  nv_array *r = nv_from_fp8(a, NV_DTYPE_FLOAT64);
  nv_release(a);
  return r;
}
static nv_array *f_full(nv_array *const *x) {
  int s[3] = {2, 2, 3};
  return nv_full_array(s, 3, x[0], NV_DTYPE_FLOAT32);
}
static nv_array *f_constants(nv_array *const *x) {
  nv_array *e = nv_eye(2, 3, 0, NV_DTYPE_FLOAT64), *a = nv_arange(0, 3, 1, NV_DTYPE_FLOAT64);
  nv_array *t = nv_add(x[0], e);
  nv_array *r = nv_multiply(t, a);
  nv_release(e);
  nv_release(a);
  nv_release(t);
  return r;
}
static nv_array *f_stop(nv_array *const *x) { return nv_stop_gradient(x[0]); }

static const op_case vmap_only[] = {
    {"astype_int", 1, f_to_int, {2}, {{2, 3}}, 0, 1},
    {"fp8", 1, f_fp8, {2}, {{2, 3}}, 0, 1},
    {"full", 1, f_full, {2}, {{2, 3}}, 0, 1},
    {"eye_arange", 1, f_constants, {2}, {{2, 3}}, 0, 1},
    {"stop_gradient", 1, f_stop, {2}, {{2, 3}}, 0, 1},
};

/* Batched inputs of a case: the batch (size 3) inserted at in_axes[i] of input i. */
static nv_vec *batched_inputs(const op_case *c, const int *axes, unsigned *st) {
  nv_vec *v = nv_vec_new();
  for (int i = 0; i < c->nin; i++) {
    int shape[8], nd = c->nd[i];
    if (axes[i] == NV_VMAP_NONE) {
      memcpy(shape, c->shape[i], (size_t)nd * sizeof(int));
    } else {
      int at = axes[i] < 0 ? axes[i] + nd + 1 : axes[i];
      for (int d = 0, k = 0; d <= nd; d++) shape[d] = d == at ? 3 : c->shape[i][k++];
      nd++;
    }
    nv_array *a = random_array(shape, nd, c->domain, st);
    nv_vec_push(v, a);
    nv_release(a);
  }
  return v;
}

static void vmap_case(const op_case *c, unsigned *st) {
  char why[512];
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  /* in_axes 0, 1, -1 on every input; and the second input not mapped. */
  int configs[4][2] = {{0, 0}, {1, 1}, {-1, -1}, {0, NV_VMAP_NONE}};
  for (int k = 0; k < 4; k++) {
    if (k == 3 && c->nin < 2) continue;
    int axes[2] = {configs[k][0], configs[k][1]};
    bool fits = true;
    for (int i = 0; i < c->nin; i++)
      if (axes[i] != NV_VMAP_NONE && axes[i] > c->nd[i]) fits = false;
    if (!fits) continue;
    nv_vec *in = batched_inputs(c, axes, st);
    cr_assert(nv_vmapcheck(f, in, axes, 0, why, sizeof why), "%s, in_axes (%d, %d): %s",
              c->name, axes[0], axes[1], why);
    nv_vec_free(in);
  }
  nv_closure_release(f);
}

Test(transforms, every_core_primitive_vmap_matches_a_loop) {
  unsigned st = test_seed() + 11;
  for (size_t k = 0; k < NCASES; k++) vmap_case(&cases[k], &st);
  for (size_t k = 0; k < sizeof vmap_only / sizeof *vmap_only; k++) vmap_case(&vmap_only[k], &st);
}

Test(transforms, vmap_out_axes_and_unmapped_outputs) {
  unsigned st = test_seed() + 13;
  int shape[2] = {3, 2};
  nv_array *x = random_array(shape, 2, 0, &st);
  /* f(x) = (exp(x), a constant): out_axes (-1, 0) broadcasts the constant over the batch. */
  nv_closure *f = nv_closure_new(case_call, (void *)&cases[2], NULL);
  nv_closure *v = nv_vmap(f, NULL, 0, (int[]){-1}, 1);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  nv_array *y = nv_vec_get(out, 0);
  cr_assert(nv_array_ndim(y) == 2 && nv_array_dim(y, 0) == 2 && nv_array_dim(y, 1) == 3);
  double got[6], want[6], xv[6];
  cr_assert_eq(nv_array_read(y, got, sizeof got), NV_OK);
  cr_assert_eq(nv_array_read(x, xv, sizeof xv), NV_OK);
  for (int b = 0; b < 3; b++)
    for (int j = 0; j < 2; j++) want[j * 3 + b] = exp(xv[b * 2 + j]);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(got[i], want[i], 1e-12);
  nv_vec_free(out);
  nv_vec_free(in);
  nv_closure_release(v);
  nv_closure_release(f);
  nv_release(x);
}

/* ---- Classic cases ---- */

static nv_status sum_squares(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  nv_array *r = nv_sum(nv_multiply(x, x), NULL, 0, false);
  return nv_vec_push(out, r);
}

Test(transforms, grad_of_sum_of_squares) {
  double v[5] = {1.5, -2, 0, 3.25, -0.5};
  int shape[1] = {5};
  nv_array *x = nv_array_from_data(v, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(sum_squares, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  double r[5];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), r, sizeof r), NV_OK);
  for (int i = 0; i < 5; i++) cr_assert_eq(r[i], 2 * v[i]);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

/* f(x) = Σ x·e^x; its Hessian is diagonal, (x + 2)e^x. */
static nv_status x_exp_x(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  return nv_vec_push(out, nv_sum(nv_multiply(x, nv_exp(x)), NULL, 0, false));
}

Test(transforms, hessian_vector_product_is_jvp_of_grad) {
  unsigned st = test_seed() + 17;
  int shape[1] = {6};
  nv_array *x = random_array(shape, 1, 0, &st), *v = random_array(shape, 1, 0, &st);
  nv_closure *f = nv_closure_new(x_exp_x, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *hv = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(t, v);
  cr_assert_eq(nv_jvp(g, p, t, NULL, hv), NV_OK, "%s", nv_last_error());
  double xs[6], vs[6], r[6];
  cr_assert_eq(nv_array_read(x, xs, sizeof xs), NV_OK);
  cr_assert_eq(nv_array_read(v, vs, sizeof vs), NV_OK);
  cr_assert_eq(nv_array_read(nv_vec_get(hv, 0), r, sizeof r), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 6; i++) cr_assert_float_eq(r[i], (xs[i] + 2) * exp(xs[i]) * vs[i], 1e-12);
  /* The same product as vjp of grad (the Hessian is symmetric). */
  nv_vec *o = nv_vec_new(), *hv2 = nv_vec_new();
  cr_assert_eq(nv_vjp(g, p, t, o, hv2), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_read(nv_vec_get(hv2, 0), r, sizeof r), NV_OK);
  for (int i = 0; i < 6; i++) cr_assert_float_eq(r[i], (xs[i] + 2) * exp(xs[i]) * vs[i], 1e-12);
  nv_vec_free(o);
  nv_vec_free(hv2);
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(hv);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
  nv_release(v);
}

/* g(x) = Σ grad(Σ x³) = Σ 3x²: grad of grad is 6x. */
static nv_status sum_cubes(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  return nv_vec_push(out, nv_sum(nv_multiply(nv_multiply(x, x), x), NULL, 0, false));
}

static nv_status sum_of_grad(void *p, const nv_vec *in, nv_vec *out) {
  nv_vec *g = nv_vec_new();
  nv_status s = nv_closure_apply(p, in, g);
  if (s == NV_OK) s = nv_vec_push(out, nv_sum(nv_vec_get(g, 0), NULL, 0, false));
  nv_vec_free(g);
  return s;
}

Test(transforms, grad_of_grad) {
  double v[4] = {1, -2, 0.5, 3};
  int shape[1] = {4};
  nv_array *x = nv_array_from_data(v, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(sum_cubes, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_closure *sg = nv_closure_new(sum_of_grad, g, NULL);
  nv_closure *gg = nv_grad(sg, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(gg, in, out), NV_OK, "%s", nv_last_error());
  double r[4];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), r, sizeof r), NV_OK);
  for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], 6 * v[i], 1e-12);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(gg);
  nv_closure_release(sg);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

/* A small linear model: loss(w, b, x, y) = (Σ w·x + b − y)², with multiply + sum for the dot. */
static nv_status linear_loss(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *w = nv_vec_get(in, 0), *b = nv_vec_get(in, 1), *x = nv_vec_get(in, 2),
           *y = nv_vec_get(in, 3);
  nv_array *pred = nv_add(nv_sum(nv_multiply(w, x), NULL, 0, false), b);
  nv_array *e = nv_subtract(pred, y);
  return nv_vec_push(out, nv_multiply(e, e));
}

Test(transforms, per_example_gradients_by_vmap_of_grad) {
  unsigned st = test_seed() + 19;
  int ws[1] = {4}, xs[2] = {5, 4}, ys[1] = {5};
  nv_array *w = random_array(ws, 1, 0, &st), *b = random_array(NULL, 0, 0, &st);
  nv_array *x = random_array(xs, 2, 0, &st), *y = random_array(ys, 1, 0, &st);
  nv_closure *f = nv_closure_new(linear_loss, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  int axes[4] = {NV_VMAP_NONE, NV_VMAP_NONE, 0, 0};
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, w);
  nv_vec_push(in, b);
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  char why[512];
  cr_assert(nv_vmapcheck(g, in, axes, 1e-12, why, sizeof why), "%s", why);
  /* And against the closed form: dw = 2 e x, db = 2 e. */
  nv_closure *v = nv_vmap(g, axes, 4, NULL, 0);
  nv_vec *out = nv_vec_new();
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  double wv[4], bv, xv[20], yv[5], dw[20], db[5];
  nv_array_read(w, wv, sizeof wv);
  nv_array_read(b, &bv, sizeof bv);
  nv_array_read(x, xv, sizeof xv);
  nv_array_read(y, yv, sizeof yv);
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), dw, sizeof dw), NV_OK);
  cr_assert_eq(nv_array_read(nv_vec_get(out, 1), db, sizeof db), NV_OK);
  for (int n = 0; n < 5; n++) {
    double e = bv - yv[n];
    for (int j = 0; j < 4; j++) e += wv[j] * xv[n * 4 + j];
    cr_assert_float_eq(db[n], 2 * e, 1e-12);
    for (int j = 0; j < 4; j++) cr_assert_float_eq(dw[n * 4 + j], 2 * e * xv[n * 4 + j], 1e-12);
  }
  nv_vec_free(out);
  nv_vec_free(in);
  nv_closure_release(v);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(w);
  nv_release(b);
  nv_release(x);
  nv_release(y);
}

/* vjp as a function of the primals (cotangent fixed), for jvp of vjp and vmap of vjp. */
static nv_status vjp_of_exp_mul(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_closure *f = nv_closure_new(case_call, (void *)&cases[17], NULL); /* multiply */
  nv_vec *cot = nv_vec_new(), *o = nv_vec_new();
  nv_array *e = nv_exp(nv_vec_get(in, 0));
  nv_vec_push(cot, e);
  nv_status s = nv_vjp(f, in, cot, o, out);
  nv_vec_free(cot);
  nv_vec_free(o);
  nv_closure_release(f);
  return s;
}

Test(transforms, jvp_and_vjp_of_vjp_match_finite_differences) {
  unsigned st = test_seed() + 23;
  gc_seed(st);
  int shape[2] = {2, 3}, bs[1] = {3};
  nv_vec *p = nv_vec_new();
  nv_array *a = random_array(shape, 2, 0, &st), *b = random_array(bs, 1, 0, &st);
  nv_vec_push(p, a);
  nv_vec_push(p, b);
  nv_closure *f = nv_closure_new(vjp_of_exp_mul, NULL, NULL);
  char why[512];
  cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s", why);
  /* grad inside vmap: the vjp traced under vmap. */
  int axes[2] = {0, NV_VMAP_NONE};
  cr_assert(nv_vmapcheck(f, p, axes, 1e-12, why, sizeof why), "%s", why);
  nv_closure_release(f);
  nv_vec_free(p);
  nv_release(a);
  nv_release(b);
}

/* grad of a function that uses vmap inside. */
static nv_status sum_of_vmap(void *p, const nv_vec *in, nv_vec *out) {
  nv_vec *o = nv_vec_new();
  nv_status s = nv_closure_apply(p, in, o);
  if (s == NV_OK) s = nv_vec_push(out, nv_sum(nv_vec_get(o, 0), NULL, 0, false));
  nv_vec_free(o);
  return s;
}

Test(transforms, grad_of_vmap) {
  unsigned st = test_seed() + 29;
  gc_seed(st);
  int shape[2] = {3, 2};
  nv_closure *f = nv_closure_new(x_exp_x, NULL, NULL);
  nv_closure *v = nv_vmap(f, (int[]){1}, 1, NULL, 0);
  nv_closure *s = nv_closure_new(sum_of_vmap, v, NULL);
  nv_vec *p = nv_vec_new();
  nv_array *x = random_array(shape, 2, 0, &st);
  nv_vec_push(p, x);
  char why[512];
  cr_assert(nv_gradcheck(s, p, 1e-6, 1e-6, why, sizeof why), "%s", why);
  nv_vec_free(p);
  nv_release(x);
  nv_closure_release(s);
  nv_closure_release(v);
  nv_closure_release(f);
}

/* ---- stop_gradient, value_and_grad, aux ---- */

static nv_status with_aux(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0), *y = nv_vec_get(in, 1);
  nv_array *sx = nv_stop_gradient(x);
  /* loss = Σ x · sg(x) · y: d/dx = sg(x) · y, d/dy = x · x. aux: 2x. */
  nv_vec_push(out, nv_sum(nv_multiply(nv_multiply(x, sx), y), NULL, 0, false));
  return nv_vec_push(out, nv_multiply_scalar(x, 2.0));
}

Test(transforms, value_and_grad_carries_aux_and_stop_gradient_blocks) {
  double xv[3] = {1, 2, -3}, yv[3] = {0.5, -1, 2};
  int shape[1] = {3};
  nv_array *x = nv_array_from_data(xv, shape, 1, NV_DTYPE_FLOAT64);
  nv_array *y = nv_array_from_data(yv, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(with_aux, NULL, NULL);
  nv_closure *vg = nv_value_and_grad(f, (int[]){1, 0}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  cr_assert_eq(nv_closure_apply(vg, in, out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(out), 4, "value, aux, then one gradient per argnum");
  double loss, aux[3], dy[3], dx[3];
  cr_assert_eq(nv_array_item_double(nv_vec_get(out, 0), &loss), NV_OK);
  nv_array_read(nv_vec_get(out, 1), aux, sizeof aux);
  nv_array_read(nv_vec_get(out, 2), dy, sizeof dy);
  nv_array_read(nv_vec_get(out, 3), dx, sizeof dx);
  double want = 0;
  for (int i = 0; i < 3; i++) want += xv[i] * xv[i] * yv[i];
  cr_assert_float_eq(loss, want, 1e-12);
  for (int i = 0; i < 3; i++) {
    cr_assert_float_eq(aux[i], 2 * xv[i], 1e-12);
    cr_assert_float_eq(dy[i], xv[i] * xv[i], 1e-12);
    cr_assert_float_eq(dx[i], xv[i] * yv[i], 1e-12, "stop_gradient blocks one path");
  }
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(vg);
  nv_closure_release(f);
  nv_release(x);
  nv_release(y);
}

/* maximum/minimum ties go to the second input (MLX); non-float paths give zero gradients. */
static nv_status ties(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *a = nv_vec_get(in, 0), *b = nv_vec_get(in, 1);
  nv_array *m = nv_add(nv_maximum(a, b), nv_multiply_scalar(nv_minimum(a, b), 10.0));
  nv_array *cut = nv_astype(nv_astype(a, NV_DTYPE_INT32), NV_DTYPE_FLOAT64);
  nv_array *full = nv_full_array((int[]){3}, 1, a, NV_DTYPE_FLOAT64);
  return nv_vec_push(out, nv_sum(nv_add(nv_add(m, cut), full), NULL, 0, false));
}

Test(transforms, maximum_minimum_ties_and_cut_paths) {
  double av[3] = {1, 2, 5}, bv[3] = {1, 3, 4};
  int shape[1] = {3};
  nv_array *a = nv_array_from_data(av, shape, 1, NV_DTYPE_FLOAT64);
  nv_array *b = nv_array_from_data(bv, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(ties, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, a);
  nv_vec_push(in, b);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  double ga[3], gb[3];
  nv_array_read(nv_vec_get(out, 0), ga, sizeof ga);
  nv_array_read(nv_vec_get(out, 1), gb, sizeof gb);
  /* a == b: both max and min send it to b. a < b: max → b, min → a. a > b: max → a, min → b. */
  double wa[3] = {0, 10, 1}, wb[3] = {11, 1, 10};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(ga[i], wa[i], "a[%d]: %g", i, ga[i]);
    cr_assert_eq(gb[i], wb[i], "b[%d]: %g", i, gb[i]);
  }
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(a);
  nv_release(b);
}

/* ---- custom_function and checkpoint ---- */

static int calls;

static nv_status counted_model(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  calls++;
  nv_array *w = nv_vec_get(in, 0), *x = nv_vec_get(in, 1);
  nv_array *h = nv_exp(nv_multiply(w, x));
  nv_array *z = nv_sqrt(nv_add_scalar(nv_multiply(h, h), 1.0));
  return nv_vec_push(out, nv_sum(nv_divide(z, nv_add_scalar(nv_abs(x), 1.0)), NULL, 0, false));
}

Test(transforms, checkpoint_equals_plain_gradients_and_recomputes) {
  unsigned st = test_seed() + 31;
  int shape[2] = {3, 4};
  nv_array *w = random_array(shape, 2, 0, &st), *x = random_array(shape, 2, 2, &st);
  nv_closure *f = nv_closure_new(counted_model, NULL, NULL);
  nv_closure *ck = nv_checkpoint(f);
  nv_closure *g1 = nv_grad(f, (int[]){0, 1}, 2), *g2 = nv_grad(ck, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *o1 = nv_vec_new(), *o2 = nv_vec_new();
  nv_vec_push(in, w);
  nv_vec_push(in, x);
  calls = 0;
  cr_assert_eq(nv_closure_apply(g1, in, o1), NV_OK, "%s", nv_last_error());
  cr_assert_eq(calls, 1);
  calls = 0;
  cr_assert_eq(nv_closure_apply(g2, in, o2), NV_OK, "%s", nv_last_error());
  cr_assert_eq(calls, 2, "the forward, then the recomputation in the backward");
  for (int k = 0; k < 2; k++) {
    double a[12], b[12];
    cr_assert_eq(nv_array_read(nv_vec_get(o1, k), a, sizeof a), NV_OK);
    cr_assert_eq(nv_array_read(nv_vec_get(o2, k), b, sizeof b), NV_OK, "%s", nv_last_error());
    for (int i = 0; i < 12; i++) cr_assert_float_eq(a[i], b[i], 1e-12);
  }
  char why[512];
  gc_seed(st);
  cr_assert(nv_gradcheck(ck, in, 1e-6, 1e-6, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_vec_free(o1);
  nv_vec_free(o2);
  nv_closure_release(g1);
  nv_closure_release(g2);
  nv_closure_release(ck);
  nv_closure_release(f);
  nv_release(w);
  nv_release(x);
}

/* A custom square whose rules are deliberately scaled so their use is visible:
 * vjp gives 3·cot·x (not 2), jvp gives 5·t·x, vmap maps by squaring the batch. */
static nv_status square(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 0)));
}
static nv_status square_vjp(void *p, const nv_vec *in, nv_vec *out) {
  (void)p; /* (x, cot, out) */
  return nv_vec_push(out, nv_multiply_scalar(nv_multiply(nv_vec_get(in, 1), nv_vec_get(in, 0)), 3.0));
}
static nv_status square_jvp(void *p, const nv_vec *in, nv_vec *out) {
  (void)p; /* (x, t) */
  return nv_vec_push(out, nv_multiply_scalar(nv_multiply(nv_vec_get(in, 1), nv_vec_get(in, 0)), 5.0));
}
static int vmap_rule_calls;
static nv_status square_vmap(void *p, const nv_vec *in, nv_vec *out) {
  (void)p; /* (x, axes) → (x², axes) */
  vmap_rule_calls++;
  nv_vec_push(out, nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 0)));
  return nv_vec_push(out, nv_vec_get(in, 1));
}

Test(transforms, custom_function_uses_the_given_rules) {
  double xv[3] = {1, -2, 0.5};
  int shape[1] = {3};
  nv_array *x = nv_array_from_data(xv, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(square, NULL, NULL);
  nv_closure *rv = nv_closure_new(square_vjp, NULL, NULL), *rj = nv_closure_new(square_jvp, NULL, NULL),
             *rm = nv_closure_new(square_vmap, NULL, NULL);
  nv_closure *c = nv_custom_function(f, rv, rj, rm);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new(), *cot = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(in, x);
  nv_array *ones = nv_ones_like(x);
  nv_vec_push(cot, ones);
  cr_assert_eq(nv_vjp(c, in, cot, out, g), NV_OK, "%s", nv_last_error());
  double r[3];
  nv_array_read(nv_vec_get(out, 0), r, sizeof r);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i], xv[i] * xv[i]);
  nv_array_read(nv_vec_get(g, 0), r, sizeof r);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i], 3 * xv[i]);
  nv_vec_clear(g);
  cr_assert_eq(nv_jvp(c, in, cot, NULL, g), NV_OK, "%s", nv_last_error());
  nv_array_read(nv_vec_get(g, 0), r, sizeof r);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i], 5 * xv[i]);
  nv_closure *v = nv_vmap(c, NULL, 0, NULL, 0);
  nv_vec_clear(out);
  vmap_rule_calls = 0;
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(vmap_rule_calls, 1);
  nv_array_read(nv_vec_get(out, 0), r, sizeof r);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i], xv[i] * xv[i]);
  /* Without rules it is differentiated through its own graph. */
  nv_closure *plain = nv_custom_function(f, NULL, NULL, NULL);
  nv_vec_clear(out);
  nv_vec_clear(g);
  cr_assert_eq(nv_vjp(plain, in, cot, out, g), NV_OK, "%s", nv_last_error());
  nv_array_read(nv_vec_get(g, 0), r, sizeof r);
  for (int i = 0; i < 3; i++) cr_assert_eq(r[i], 2 * xv[i]);
  nv_closure_release(plain);
  nv_closure_release(v);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_vec_free(cot);
  nv_vec_free(g);
  nv_release(ones);
  nv_closure_release(c);
  nv_closure_release(rv);
  nv_closure_release(rj);
  nv_closure_release(rm);
  nv_closure_release(f);
  nv_release(x);
}

/* ---- The seed's tracer semantics (E32, E32t) ---- */

static bool kept_retained;

static nv_status square_evaluated(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  nv_array *y = nv_multiply(x, x);
  nv_status s = nv_eval1(y);
  kept_retained = nv__test_state(y) == NV__RETAINED;
  if (s == NV_OK) s = nv_vec_push(out, y);
  return s;
}

Test(transforms, tracer_nodes_keep_their_graph_only_while_tracing) {
  nv_array *x = nv_array_float(2.0f);
  nv_closure *f = nv_closure_new(square_evaluated, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  kept_retained = false;
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  float v;
  cr_assert_eq(nv_array_item_float(nv_vec_get(out, 0), &v), NV_OK);
  cr_assert_eq(v, 4.0f);
  cr_assert(kept_retained, "retained inside a transform");
  /* vjp's result evaluated outside any transform is Done. */
  nv_closure *sq = nv_closure_new(square, NULL, NULL);
  nv_vec *cot = nv_vec_new(), *o = nv_vec_new(), *vj = nv_vec_new();
  nv_array *one = nv_array_float(1.0f);
  nv_vec_push(cot, one);
  cr_assert_eq(nv_vjp(sq, in, cot, o, vj), NV_OK, "%s", nv_last_error());
  nv_array *traced = nv_vec_get(vj, 0);
  cr_assert_eq(nv_eval1(traced), NV_OK);
  cr_assert_eq(nv__test_state(traced), NV__DONE, "outside a transform");
  nv_release(one);
  nv_vec_free(cot);
  nv_vec_free(o);
  nv_vec_free(vj);
  nv_closure_release(sq);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

Test(transforms, retained_nodes_are_released_when_the_transform_ends) {
  nv_array *x = nv_array_float(3.0f);
  nv_closure *f = nv_closure_new(square_evaluated, NULL, NULL);
  nv_closure *g = nv_value_and_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  /* The value was evaluated inside (Retained); after the transform it is Done and detached. */
  cr_assert_eq(nv__test_state(nv_vec_get(out, 0)), NV__DONE);
  cr_assert_eq(nv__tracing_depth(), 0);
  float v;
  cr_assert_eq(nv_array_item_float(nv_vec_get(out, 1), &v), NV_OK);
  cr_assert_eq(v, 6.0f);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

/* ---- Errors ---- */

static nv_status identity_fn(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_vec_get(in, 0));
}

Test(transforms, errors_name_the_transform) {
  int shape[1] = {3};
  nv_array *x = nv_zeros(shape, 1, NV_DTYPE_FLOAT32);
  nv_closure *f = nv_closure_new(identity_fn, NULL, NULL);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_closure *g = nv_grad(f, NULL, 0);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "grad:") && strstr(nv_last_error(), "scalar"), "%s",
            nv_last_error());
  cr_assert_eq(nv_vec_size(out), 0, "nothing appended on failure");
  nv_closure *g2 = nv_grad(f, (int[]){2}, 1);
  cr_assert_eq(nv_closure_apply(g2, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "argnum 2 is out of range"), "%s", nv_last_error());
  cr_assert_null(nv_grad(f, (int[]){-1}, 1));
  cr_assert_null(nv_grad(f, (int[]){0, 0}, 2));
  cr_assert_null(nv_grad(NULL, NULL, 0));
  /* vjp: wrong count and wrong shape of cotangents. */
  nv_vec *cot = nv_vec_new(), *vj = nv_vec_new();
  cr_assert_eq(nv_vjp(f, in, cot, NULL, vj), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "vjp: 0 cotangents given for 1 outputs"), "%s", nv_last_error());
  nv_array *bad = nv_zeros((int[]){2}, 1, NV_DTYPE_FLOAT32);
  nv_vec_push(cot, bad);
  cr_assert_eq(nv_vjp(f, in, cot, NULL, vj), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "vjp: cotangent 0 has shape (2,)"), "%s", nv_last_error());
  cr_assert_eq(nv_jvp(f, in, cot, NULL, vj), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "jvp: tangent 0 has shape (2,)"), "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(vj), 0);
  /* vmap: axis out of range, different sizes, nothing mapped, a mapped output with None. */
  nv_closure *v = nv_vmap(f, (int[]){1}, 1, NULL, 0);
  cr_assert_eq(nv_closure_apply(v, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "vmap: in_axes 1 is out of range"), "%s", nv_last_error());
  nv_closure *vn = nv_vmap(f, (int[]){NV_VMAP_NONE}, 1, NULL, 0);
  cr_assert_eq(nv_closure_apply(vn, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "no input is mapped"), "%s", nv_last_error());
  nv_closure *vo = nv_vmap(f, NULL, 0, (int[]){NV_VMAP_NONE}, 1);
  cr_assert_eq(nv_closure_apply(vo, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "out_axes is None"), "%s", nv_last_error());
  nv_vec_push(in, bad);
  nv_closure *v2 = nv_vmap(f, NULL, 0, NULL, 0);
  cr_assert_eq(nv_closure_apply(v2, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "different sizes (3 and 2)"), "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(out), 0);
  nv_closure_release(v);
  nv_closure_release(vn);
  nv_closure_release(vo);
  nv_closure_release(v2);
  nv_vec_free(cot);
  nv_vec_free(vj);
  nv_release(bad);
  nv_closure_release(g);
  nv_closure_release(g2);
  nv_closure_release(f);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_release(x);
}

static nv_status reads_mapped(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *y = nv_exp(nv_vec_get(in, 0));
  nv_status s = nv_eval1(y);
  nv_release(y);
  if (s != NV_OK) return s;
  return nv_vec_push(out, nv_vec_get(in, 0));
}

Test(transforms, reading_a_mapped_value_inside_vmap_fails_cleanly) {
  nv_array *x = nv_zeros((int[]){2, 3}, 2, NV_DTYPE_FLOAT32);
  nv_closure *f = nv_closure_new(reads_mapped, NULL, NULL);
  nv_closure *v = nv_vmap(f, NULL, 0, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_neq(nv_closure_apply(v, in, out), NV_OK);
  cr_assert(strstr(nv_last_error(), "vmap"), "%s", nv_last_error());
  cr_assert_eq(nv__tracing_depth(), 0);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(v);
  nv_closure_release(f);
  nv_release(x);
}

static nv_status long_chain(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0), *y = nv_retain(x);
  for (int i = 0; i < 100000; i++) {
    nv_array *z = nv_add(y, x);
    nv_release(y);
    y = z;
  }
  return nv_vec_push(out, y);
}

Test(transforms, deep_chains_do_not_recurse) {
  /* y = x + x + ... (100,001 terms), differentiated and evaluated without recursion. */
  nv_array *x = nv_array_scalar(1.0, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(long_chain, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  double v;
  cr_assert_eq(nv_array_item_double(nv_vec_get(out, 0), &v), NV_OK, "%s", nv_last_error());
  cr_assert_eq(v, 100001.0);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

Test(transforms, nested_vmap_matches_a_loop) {
  unsigned st = test_seed() + 37;
  int shape[3] = {3, 2, 4};
  nv_array *x = random_array(shape, 3, 0, &st);
  nv_closure *f = nv_closure_new(case_call, (void *)&cases[23], NULL); /* sum of all */
  nv_closure *inner = nv_vmap(f, (int[]){0}, 1, NULL, 0);
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, x);
  char why[512];
  cr_assert(nv_vmapcheck(inner, in, (int[]){1}, 1e-12, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_closure_release(inner);
  nv_closure_release(f);
  nv_release(x);
}

/* ---- dtypes ---- */

static nv_status sum_sq_and_int(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0), *k = nv_vec_get(in, 1);
  nv_array *kf = nv_astype(k, nv_array_dtype(x));
  return nv_vec_push(out, nv_sum(nv_multiply(nv_multiply(x, x), kf), NULL, 0, false));
}

Test(transforms, gradients_keep_their_input_dtypes) {
  nv_dtype floats[3] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32};
  double xv[4] = {0.5, -1.25, 2, 3};
  int32_t kv[4] = {1, 2, 3, -1};
  int shape[1] = {4};
  nv_closure *f = nv_closure_new(sum_sq_and_int, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  for (int d = 0; d < 3; d++) {
    nv_array *x64 = nv_array_from_data(xv, shape, 1, NV_DTYPE_FLOAT64);
    nv_array *x = nv_astype(x64, floats[d]);
    nv_array *k = nv_array_from_data(kv, shape, 1, NV_DTYPE_INT32);
    nv_vec *in = nv_vec_new(), *out = nv_vec_new();
    nv_vec_push(in, x);
    nv_vec_push(in, k);
    cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
    cr_assert_eq(nv_array_dtype(nv_vec_get(out, 0)), floats[d]);
    cr_assert_eq(nv_array_dtype(nv_vec_get(out, 1)), NV_DTYPE_INT32, "integer inputs keep theirs");
    double *gx = gc_read(nv_vec_get(out, 0)), *gk = gc_read(nv_vec_get(out, 1));
    for (int i = 0; i < 4; i++) {
      cr_assert_float_eq(gx[i], 2 * xv[i] * kv[i], 1e-2 * fabs(2 * xv[i] * kv[i]));
      cr_assert_eq(gk[i], 0, "astype to a float cuts the integer path");
    }
    free(gx);
    free(gk);
    nv_vec_free(in);
    nv_vec_free(out);
    nv_release(x64);
    nv_release(x);
    nv_release(k);
  }
  nv_closure_release(g);
  nv_closure_release(f);
}

static nv_status abs_sum(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_sum(nv_abs(nv_vec_get(in, 0)), NULL, 0, false));
}

Test(transforms, complex_abs_gradient_as_mlx) {
  /* d|z| = Re(conj(z) dz) / |z|: the gradient (MLX's convention) is z / |z|, 0 at z = 0. */
  nv_complex64 zv[3] = {{3, 4}, {0, 0}, {0, -2}};
  nv_array *z = nv_array_from_data(zv, (int[]){3}, 1, NV_DTYPE_COMPLEX64);
  nv_closure *f = nv_closure_new(abs_sum, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, z);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  nv_complex64 got[3];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), got, sizeof got), NV_OK, "%s", nv_last_error());
  const float want[3][2] = {{0.6f, 0.8f}, {0, 0}, {0, -1}};
  for (int i = 0; i < 3; i++) {
    cr_assert_float_eq(got[i].re, want[i][0], 1e-6, "%d", i);
    cr_assert_float_eq(got[i].im, want[i][1], 1e-6, "%d", i);
  }
  cr_assert_eq(nv__tracing_depth(), 0);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(z);
}

static nv_status bad_vjp_rule(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  (void)in;
  (void)out;
  return NV_OK; /* returns nothing: wrong */
}

Test(transforms, custom_rule_results_are_checked) {
  nv_array *x = nv_array_scalar(2.0, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(square, NULL, NULL);
  nv_closure *r = nv_closure_new(bad_vjp_rule, NULL, NULL);
  nv_closure *c = nv_custom_function(f, r, NULL, NULL);
  nv_closure *g = nv_grad(c, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "custom_function: the vjp rule returned 0 arrays"), "%s",
            nv_last_error());
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(c);
  nv_closure_release(r);
  nv_closure_release(f);
  nv_release(x);
}
