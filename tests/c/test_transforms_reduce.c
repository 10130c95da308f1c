/* Transforms of the reduce family: every differentiable reduction, scan and sort through vjp
 * and jvp against finite differences (float64, contiguous and strided inputs, several axes and
 * keepdims), every primitive of the family under vmap against a loop (in_axes 0, 1, -1 and not
 * mapped), the decided edge cases (ties, zeros, infinite rows), a cross-entropy gradient and a
 * softmax Hessian-vector product. */
#include <criterion/criterion.h>

#include "gradcheck.h"
#include "testutil.h"

/* ---- The ops under test ---- */

typedef enum {
  K_MEAN, K_PROD, K_MAX, K_MIN, K_VAR, K_STD, K_MEDIAN, K_LSE, K_SOFTMAX, K_CUMSUM, K_CUMPROD,
  K_CUMMAX, K_CUMMIN, K_LCSE, K_SORT, K_PARTITION, K_TOPK, K_TRACE,
  /* Not differentiable: vmap only. */
  K_ARGMAX, K_ARGMIN, K_ARGSORT, K_ARGPARTITION, K_ALL, K_ANY, K_COUNT
} kind;

/* Input domains: random in [-1, 1); distinct values (spaced, shuffled: no near-ties for
 * max/min/sort/median); random with exact zeros (products, where finite differences stay
 * exact because the function is linear in each element). */
enum { D_RANDOM, D_DISTINCT, D_ZEROS };

typedef struct rcase {
  const char *name;
  kind k;
  int naxes; /* -1: axes NULL (all / flattened) */
  int axes[3];
  bool keepdims, reverse, inclusive;
  int extra; /* ddof, kth, k or the trace offset */
  int nd;
  int shape[4];
  int domain;
} rcase;

static nv_array *apply(const rcase *c, const nv_array *x) {
  const int *ax = c->naxes < 0 ? NULL : c->axes;
  int na = c->naxes < 0 ? 0 : c->naxes;
  switch (c->k) {
    case K_MEAN: return nv_mean(x, ax, na, c->keepdims);
    case K_PROD: return nv_prod(x, ax, na, c->keepdims);
    case K_MAX: return nv_max(x, ax, na, c->keepdims);
    case K_MIN: return nv_min(x, ax, na, c->keepdims);
    case K_VAR: return nv_var(x, ax, na, c->keepdims, c->extra);
    case K_STD: return nv_std(x, ax, na, c->keepdims, c->extra);
    case K_MEDIAN: return nv_median(x, ax, na, c->keepdims);
    case K_LSE: return nv_logsumexp(x, ax, na, c->keepdims);
    case K_SOFTMAX: return nv_softmax(x, ax, na, true);
    case K_CUMSUM: return nv_cumsum(x, ax, c->reverse, c->inclusive);
    case K_CUMPROD: return nv_cumprod(x, ax, c->reverse, c->inclusive);
    case K_CUMMAX: return nv_cummax(x, ax, c->reverse, c->inclusive);
    case K_CUMMIN: return nv_cummin(x, ax, c->reverse, c->inclusive);
    case K_LCSE: return nv_logcumsumexp(x, ax, c->reverse, c->inclusive);
    case K_SORT: return nv_sort(x, ax);
    case K_PARTITION: return nv_partition(x, c->extra, ax);
    case K_TOPK: return nv_topk(x, c->extra, ax);
    case K_TRACE: return nv_trace(x, c->extra, c->axes[0], c->axes[1], -1);
    case K_ARGMAX: return nv_argmax(x, ax, c->keepdims);
    case K_ARGMIN: return nv_argmin(x, ax, c->keepdims);
    case K_ARGSORT: return nv_argsort(x, ax);
    case K_ARGPARTITION: return nv_argpartition(x, c->extra, ax);
    case K_ALL: return nv_all(x, ax, na, c->keepdims);
    case K_ANY: return nv_any(x, ax, na, c->keepdims);
    default: return nv_count_nonzero(x, ax, na, c->keepdims);
  }
}

#define S3 3, {2, 3, 4}
#define S2 2, {3, 4}
#define A(...) {__VA_ARGS__}

static const rcase grad_cases[] = {
    {"mean_axes", K_MEAN, 2, A(0, -1), false, false, false, 0, S3, D_RANDOM},
    {"mean_all_keep", K_MEAN, -1, A(0), true, false, false, 0, S2, D_RANDOM},
    {"prod_axis", K_PROD, 1, A(1), false, false, false, 0, S3, D_RANDOM},
    {"prod_axes_keep", K_PROD, 2, A(0, 2), true, false, false, 0, S3, D_RANDOM},
    {"prod_all_zeros", K_PROD, -1, A(0), false, false, false, 0, S2, D_ZEROS},
    {"prod_axes_zeros", K_PROD, 2, A(2, 0), false, false, false, 0, S3, D_ZEROS},
    {"max_axis", K_MAX, 1, A(1), false, false, false, 0, S3, D_DISTINCT},
    {"max_all", K_MAX, -1, A(0), false, false, false, 0, S2, D_DISTINCT},
    {"min_axes_keep", K_MIN, 2, A(0, 2), true, false, false, 0, S3, D_DISTINCT},
    {"var_axis", K_VAR, 1, A(-1), false, false, false, 0, S3, D_RANDOM},
    {"var_all_ddof1_keep", K_VAR, -1, A(0), true, false, false, 1, S2, D_RANDOM},
    {"std_axes_ddof1", K_STD, 2, A(0, 1), false, false, false, 1, S3, D_RANDOM},
    {"median_odd", K_MEDIAN, 1, A(1), false, false, false, 0, S3, D_DISTINCT},
    {"median_even_all", K_MEDIAN, -1, A(0), false, false, false, 0, S3, D_DISTINCT},
    {"median_axes_keep", K_MEDIAN, 2, A(0, 2), true, false, false, 0, S3, D_DISTINCT},
    {"logsumexp_axis", K_LSE, 1, A(1), false, false, false, 0, S3, D_RANDOM},
    {"logsumexp_all", K_LSE, -1, A(0), false, false, false, 0, S2, D_RANDOM},
    {"logsumexp_axes_keep", K_LSE, 2, A(0, 2), true, false, false, 0, S3, D_RANDOM},
    {"softmax_last", K_SOFTMAX, 1, A(-1), false, false, false, 0, S3, D_RANDOM},
    {"softmax_axes", K_SOFTMAX, 2, A(0, 1), false, false, false, 0, S3, D_RANDOM},
    {"cumsum", K_CUMSUM, 1, A(1), false, false, true, 0, S3, D_RANDOM},
    {"cumsum_rev_excl", K_CUMSUM, 1, A(-1), false, true, false, 0, S3, D_RANDOM},
    {"cumsum_flat", K_CUMSUM, -1, A(0), false, false, true, 0, S2, D_RANDOM},
    {"cumprod", K_CUMPROD, 1, A(1), false, false, true, 0, S3, D_RANDOM},
    {"cumprod_rev", K_CUMPROD, 1, A(0), false, true, true, 0, S2, D_ZEROS},
    {"cumprod_excl_zeros", K_CUMPROD, 1, A(-1), false, false, false, 0, S3, D_ZEROS},
    {"cumprod_rev_excl_zeros", K_CUMPROD, 1, A(1), false, true, false, 0, S2, D_ZEROS},
    {"cumprod_flat_zeros", K_CUMPROD, -1, A(0), false, false, true, 0, S2, D_ZEROS},
    {"cummax", K_CUMMAX, 1, A(1), false, false, true, 0, S3, D_DISTINCT},
    {"cummax_rev_excl", K_CUMMAX, 1, A(-1), false, true, false, 0, S3, D_DISTINCT},
    {"cummin_excl", K_CUMMIN, 1, A(0), false, false, false, 0, S2, D_DISTINCT},
    {"cummin_rev_flat", K_CUMMIN, -1, A(0), false, true, true, 0, S2, D_DISTINCT},
    {"logcumsumexp", K_LCSE, 1, A(1), false, false, true, 0, S3, D_RANDOM},
    {"logcumsumexp_rev", K_LCSE, 1, A(0), false, true, true, 0, S2, D_RANDOM},
    {"logcumsumexp_excl", K_LCSE, 1, A(-1), false, false, false, 0, S3, D_RANDOM},
    {"logcumsumexp_rev_excl_flat", K_LCSE, -1, A(0), false, true, false, 0, S2, D_RANDOM},
    {"sort_axis", K_SORT, 1, A(0), false, false, false, 0, S3, D_DISTINCT},
    {"sort_flat", K_SORT, -1, A(0), false, false, false, 0, S2, D_DISTINCT},
    {"partition", K_PARTITION, 1, A(-1), false, false, false, 1, S3, D_DISTINCT},
    {"topk", K_TOPK, 1, A(1), false, false, false, 2, S3, D_DISTINCT},
    {"trace", K_TRACE, 2, A(0, 2), false, false, false, 1, S3, D_RANDOM},
};
#define NGRAD (sizeof grad_cases / sizeof *grad_cases)

static const rcase vmap_cases[] = {
    {"argmax_axis_keep", K_ARGMAX, 1, A(1), true, false, false, 0, S3, D_DISTINCT},
    {"argmax_flat", K_ARGMAX, -1, A(0), false, false, false, 0, S3, D_DISTINCT},
    {"argmin_flat_keep", K_ARGMIN, -1, A(0), true, false, false, 0, S2, D_DISTINCT},
    {"argsort", K_ARGSORT, 1, A(-1), false, false, false, 0, S3, D_DISTINCT},
    {"argsort_flat", K_ARGSORT, -1, A(0), false, false, false, 0, S2, D_DISTINCT},
    {"argpartition", K_ARGPARTITION, 1, A(0), false, false, false, 1, S3, D_DISTINCT},
    {"partition_flat", K_PARTITION, -1, A(0), false, false, false, 3, S2, D_DISTINCT},
    {"topk", K_TOPK, 1, A(1), false, false, false, 2, S3, D_DISTINCT},
    {"topk_flat", K_TOPK, -1, A(0), false, false, false, 1, S2, D_DISTINCT},
    {"all", K_ALL, 1, A(1), false, false, false, 0, S3, D_ZEROS},
    {"any_keep", K_ANY, 2, A(0, 2), true, false, false, 0, S3, D_ZEROS},
    {"count_nonzero_all", K_COUNT, -1, A(0), false, false, false, 0, S3, D_ZEROS},
    {"median_flat_keep", K_MEDIAN, -1, A(0), true, false, false, 0, S2, D_DISTINCT},
    {"cummax_flat", K_CUMMAX, -1, A(0), false, false, true, 0, S2, D_DISTINCT},
};
#define NVMAP (sizeof vmap_cases / sizeof *vmap_cases)

static nv_status case_call(void *payload, const nv_vec *in, nv_vec *out) {
  return nv_vec_push(out, apply(payload, nv_vec_get(in, 0)));
}

/* ---- Inputs ---- */

static void fill(double *v, int64_t n, int domain, unsigned *st) {
  for (int64_t i = 0; i < n; i++) v[i] = test_randf(st);
  if (domain == D_ZEROS) {
    /* About a third exact zeros, at least two (so some rows hold more than one). */
    for (int64_t i = 0; i < n; i++)
      if (i < 2 || test_randf(st) < -0.35) v[i] = 0;
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)((test_randf(st) + 1) / 2 * (double)(i + 1)) % (i + 1);
      double t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
  } else if (domain == D_DISTINCT) {
    /* A shuffled ladder with steps of 0.1 and a little noise: every gap exceeds 0.05. */
    for (int64_t i = 0; i < n; i++) v[i] = (double)i * 0.1 - (double)n * 0.05;
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)((test_randf(st) + 1) / 2 * (double)(i + 1)) % (i + 1);
      double t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
    for (int64_t i = 0; i < n; i++) v[i] += test_randf(st) * 0.02;
  }
}

static nv_array *make(const int *shape, int nd, int domain, unsigned *st) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  fill(v, n, domain, st);
  nv_array *a = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
  free(v);
  return a;
}

/* The values of a fresh array of `shape` as a strided view: layout 1 transposes a transposed
 * copy, layout 2 reverses a reversed copy along axis 0 (a negative step). Layout 0: plain. */
static nv_array *make_layout(const int *shape, int nd, int domain, unsigned *st, int layout) {
  nv_array *a = make(shape, nd, domain, st);
  return layout == 0 ? a : nv_test_strided_view(a, layout == 1);
}

/* ---- vjp and jvp against finite differences ---- */

Test(transforms_reduce, every_differentiable_op_matches_finite_differences) {
  unsigned st = test_seed();
  gc_seed(st);
  char why[512];
  for (size_t k = 0; k < NGRAD; k++) {
    const rcase *c = &grad_cases[k];
    nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
    for (int layout = 0; layout < 3; layout++) {
      nv_vec *p = nv_vec_new();
      nv_array *x = make_layout(c->shape, c->nd, c->domain, &st, layout);
      nv_vec_push(p, x);
      nv_release(x);
      cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s (layout %d): %s", c->name,
                layout, why);
      nv_vec_free(p);
    }
    nv_closure_release(f);
  }
}

/* A broadcast input: the op sees x broadcast from (1, 3, 4) to (2, 3, 4), so the gradient sums
 * back over the broadcast axis. */
static nv_status broadcast_then(void *payload, const nv_vec *in, nv_vec *out) {
  int shape[3] = {2, 3, 4};
  nv_array *b = nv_broadcast_to(nv_vec_get(in, 0), shape, 3);
  return nv_vec_push(out, apply(payload, b));
}

Test(transforms_reduce, broadcast_inputs) {
  unsigned st = test_seed() + 1;
  gc_seed(st);
  char why[512];
  const kind kinds[] = {K_PROD, K_LSE, K_SOFTMAX, K_CUMPROD, K_VAR, K_LCSE};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    rcase c = {"broadcast", kinds[k], 1, A(0), false, false, true, 0, S3, D_RANDOM};
    nv_closure *f = nv_closure_new(broadcast_then, &c, NULL);
    int shape[3] = {1, 3, 4};
    nv_vec *p = nv_vec_new();
    nv_array *x = make(shape, 3, D_RANDOM, &st);
    nv_vec_push(p, x);
    nv_release(x);
    cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "kind %d: %s", (int)kinds[k], why);
    nv_vec_free(p);
    nv_closure_release(f);
  }
}

/* ---- vmap against a loop ---- */

static void vmap_check(const rcase *c, unsigned *st) {
  char why[512];
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  const int configs[3] = {0, 1, -1};
  for (int k = 0; k < 3; k++) {
    int shape[5], nd = c->nd + 1, at = configs[k] < 0 ? nd + configs[k] : configs[k];
    for (int d = 0, j = 0; d < nd; d++) shape[d] = d == at ? 3 : c->shape[j++];
    nv_array *x = make(shape, nd, c->domain, st);
    nv_vec *in = nv_vec_new();
    nv_vec_push(in, x);
    cr_assert(nv_vmapcheck(f, in, &configs[k], 1e-12, why, sizeof why), "%s, in_axes %d: %s",
              c->name, configs[k], why);
    nv_vec_free(in);
    nv_release(x);
  }
  nv_closure_release(f);
}

Test(transforms_reduce, every_primitive_vmap_matches_a_loop) {
  unsigned st = test_seed() + 2;
  for (size_t k = 0; k < NGRAD; k++) vmap_check(&grad_cases[k], &st);
  for (size_t k = 0; k < NVMAP; k++) vmap_check(&vmap_cases[k], &st);
}

/* f(x, y) = op(x) · y summed: y unmapped (NV_VMAP_NONE) broadcasts against the batch. */
static nv_status op_times(void *payload, const nv_vec *in, nv_vec *out) {
  nv_array *r = apply(payload, nv_vec_get(in, 0));
  nv_array *f = nv_astype(r, NV_DTYPE_FLOAT64);
  return nv_vec_push(out, nv_multiply(f, nv_vec_get(in, 1)));
}

static void vmap_unmapped_check(const rcase *c, unsigned *st) {
  char why[512];
  nv_closure *f = nv_closure_new(op_times, (void *)c, NULL);
  int xs[5] = {3};
  for (int i = 0; i < c->nd; i++) xs[i + 1] = c->shape[i];
  nv_array *x = make(xs, c->nd + 1, c->domain, st);
  /* y has the shape of one example's result. */
  nv_array *x0 = make(xs + 1, c->nd, c->domain, st);
  nv_array *probe = apply(c, x0);
  nv_array *y = make(nv_array_shape(probe), nv_array_ndim(probe), D_RANDOM, st);
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  int axes[2] = {0, NV_VMAP_NONE};
  cr_assert(nv_vmapcheck(f, in, axes, 1e-12, why, sizeof why), "%s: %s", c->name, why);
  nv_vec_free(in);
  nv_release(x0);
  nv_release(probe);
  nv_release(x);
  nv_release(y);
  nv_closure_release(f);
}

Test(transforms_reduce, vmap_with_an_unmapped_input) {
  unsigned st = test_seed() + 3;
  for (size_t k = 0; k < NGRAD; k++) vmap_unmapped_check(&grad_cases[k], &st);
  for (size_t k = 0; k < NVMAP; k++) vmap_unmapped_check(&vmap_cases[k], &st);
}

/* searchsorted: `a` mapped (a batch of sorted arrays), `v` mapped or not, and `a` unmapped. */
static nv_status search_call(void *payload, const nv_vec *in, nv_vec *out) {
  return nv_vec_push(out, nv_searchsorted(nv_vec_get(in, 0), nv_vec_get(in, 1), payload != NULL));
}

Test(transforms_reduce, searchsorted_vmap) {
  unsigned st = test_seed() + 4;
  char why[512];
  int as[2] = {3, 6}, vs[2] = {3, 5}, axis = 1;
  nv_array *raw = make(as, 2, D_RANDOM, &st);
  nv_array *a = nv_sort(raw, &axis);
  nv_array *at = nv_transpose(a, NULL, 0);
  nv_array *v = make(vs, 2, D_RANDOM, &st);
  nv_array *vt = nv_transpose(v, NULL, 0);
  /* Some values equal to entries of `a`, so left and right differ. */
  int s0[2] = {0, 0}, s1[2] = {3, 2};
  nv_array *sl = nv_slice(a, s0, s1, NULL, 2);
  nv_array *v2 = nv_slice_update(v, sl, s0, s1, NULL, 2);
  for (int right = 0; right < 2; right++) {
    nv_closure *f = nv_closure_new(search_call, right ? (void *)1 : NULL, NULL);
    struct {
      nv_array *a, *v;
      int ax[2];
    } cfg[4] = {{a, v2, {0, 0}}, {at, vt, {1, -1}}, {a, vt, {0, NV_VMAP_NONE}},
                {raw, v2, {NV_VMAP_NONE, 0}}};
    nv_array *a0 = nv_sort(raw, NULL);
    cfg[3].a = a0;
    for (int k = 0; k < 4; k++) {
      nv_vec *in = nv_vec_new();
      nv_vec_push(in, cfg[k].a);
      nv_vec_push(in, cfg[k].v);
      cr_assert(nv_vmapcheck(f, in, cfg[k].ax, 0, why, sizeof why), "right %d, config %d: %s",
                right, k, why);
      nv_vec_free(in);
    }
    nv_release(a0);
    nv_closure_release(f);
  }
  nv_release(raw);
  nv_release(a);
  nv_release(at);
  nv_release(v);
  nv_release(vt);
  nv_release(sl);
  nv_release(v2);
}

/* Nested vmap: per-example logsumexp and sort along an inner batch. */
Test(transforms_reduce, nested_vmap) {
  unsigned st = test_seed() + 5;
  char why[512];
  rcase c = {"sort", K_SORT, 1, A(-1), false, false, false, 0, S2, D_DISTINCT};
  nv_closure *f = nv_closure_new(case_call, &c, NULL);
  int one = 1;
  nv_closure *inner = nv_vmap(f, &one, 1, NULL, 0);
  int shape[4] = {2, 3, 4, 5};
  nv_array *x = make(shape, 4, D_DISTINCT, &st);
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, x);
  int zero = 0;
  cr_assert(nv_vmapcheck(inner, in, &zero, 0, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_release(x);
  nv_closure_release(inner);
  nv_closure_release(f);
}

/* ---- Decided edge cases ---- */

static double *grad_of(const rcase *c, const double *v, const int *shape, int nd) {
  nv_array *x = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
  nv_array *y = apply(c, x);
  nv_array *ones = nv_ones_like(y);
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  nv_vec *p = nv_vec_new(), *cot = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(cot, ones);
  cr_assert_eq(nv_vjp(f, p, cot, o, g), NV_OK, "%s", nv_last_error());
  double *r = gc_read(nv_vec_get(g, 0));
  cr_assert(r, "%s", nv_last_error());
  nv_vec_free(p);
  nv_vec_free(cot);
  nv_vec_free(o);
  nv_vec_free(g);
  nv_closure_release(f);
  nv_release(ones);
  nv_release(y);
  nv_release(x);
  return r;
}

static void expect(const double *got, const double *want, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    if (isnan(want[i])) cr_assert(isnan(got[i]), "%s[%d]: %g, want NaN", what, i, got[i]);
    else cr_assert(fabs(got[i] - want[i]) <= 1e-12, "%s[%d]: %.17g, want %.17g", what, i, got[i],
                   want[i]);
  }
}

Test(transforms_reduce, max_min_ties_split_evenly_and_nan_rows_are_nan) {
  double v[8] = {1, 3, 3, 2, NAN, 1, 0, 5};
  int shape[2] = {2, 4};
  rcase mx = {"max", K_MAX, 1, A(1), false, false, false, 0, S2, 0};
  double *g = grad_of(&mx, v, shape, 2);
  expect(g, (double[]){0, 0.5, 0.5, 0, NAN, NAN, NAN, NAN}, 8, "max");
  free(g);
  double w[6] = {2, -1, 4, -1, -1, 7};
  rcase mn = {"min", K_MIN, -1, A(0), false, false, false, 0, S2, 0};
  g = grad_of(&mn, w, (int[]){6}, 1);
  expect(g, (double[]){0, 1.0 / 3, 0, 1.0 / 3, 1.0 / 3, 0}, 6, "min");
  free(g);
}

Test(transforms_reduce, logsumexp_infinite_rows) {
  const double inf = INFINITY;
  double v[12] = {inf, 1, inf, -inf, -inf, -inf, 0, 1, -inf, NAN, 0, 1};
  int shape[2] = {4, 3};
  rcase c = {"lse", K_LSE, 1, A(1), false, false, false, 0, S2, 0};
  double *g = grad_of(&c, v, shape, 2);
  double e = exp(1) / (1 + exp(1));
  /* +inf ties split evenly; only -inf: zero; -inf among finite values: zero; NaN row: NaN. */
  expect(g, (double[]){0.5, 0, 0.5, 0, 0, 0, 1 - e, e, 0, NAN, NAN, NAN}, 12, "logsumexp");
  free(g);
}

Test(transforms_reduce, cummax_ties_go_to_the_latest_in_scan_order) {
  double v[5] = {1, 3, 3, 2, 5};
  rcase c = {"cummax", K_CUMMAX, 1, A(0), false, false, true, 0, S2, 0};
  /* Running max 1 3 3 3 5 comes from elements 0 1 2 2 4. */
  double *g = grad_of(&c, v, (int[]){5}, 1);
  expect(g, (double[]){1, 1, 2, 0, 1}, 5, "cummax");
  free(g);
  /* Reverse: running max from the end 5 5 5 5 5 comes from element 4 throughout. */
  c.reverse = true;
  g = grad_of(&c, v, (int[]){5}, 1);
  expect(g, (double[]){0, 0, 0, 0, 5}, 5, "cummax reverse");
  free(g);
  /* Reverse running min of 3 1 1 2: 1 1 1 2 from elements 1 1 2 3 (the latest in scan order is
   * the smaller index). */
  double w[4] = {3, 1, 1, 2};
  rcase m = {"cummin", K_CUMMIN, 1, A(0), false, true, true, 0, S2, 0};
  g = grad_of(&m, w, (int[]){4}, 1);
  expect(g, (double[]){0, 2, 1, 1}, 4, "cummin reverse");
  free(g);
}

Test(transforms_reduce, prod_and_cumprod_with_zeros_are_exact) {
  double v[4] = {2, 0, 3, 0.5};
  rcase p = {"prod", K_PROD, -1, A(0), false, false, false, 0, S2, 0};
  double *g = grad_of(&p, v, (int[]){4}, 1);
  expect(g, (double[]){0, 3, 0, 0}, 4, "prod");
  free(g);
  double w[4] = {2, 0, 3, 0};
  g = grad_of(&p, w, (int[]){4}, 1);
  expect(g, (double[]){0, 0, 0, 0}, 4, "prod of two zeros");
  free(g);
  /* cumprod 2 0 0 0: d/dx0 = 1, d/dx1 = 2 + 2·3 + 2·3·0.5, later elements 0. */
  rcase c = {"cumprod", K_CUMPROD, 1, A(0), false, false, true, 0, S2, 0};
  g = grad_of(&c, v, (int[]){4}, 1);
  expect(g, (double[]){1, 11, 0, 0}, 4, "cumprod");
  free(g);
}

/* f(x) = Σ op(int32(x)) + Σ x/2: the rules see integer inputs and give no gradient, so the
 * gradient is 1/2 everywhere. */
static nv_status int_path(void *payload, const nv_vec *in, nv_vec *out) {
  nv_array *x = nv_vec_get(in, 0);
  nv_array *r = apply(payload, nv_astype(x, NV_DTYPE_INT32));
  nv_array *a = nv_sum(nv_astype(r, NV_DTYPE_FLOAT64), NULL, 0, false);
  return nv_vec_push(out, nv_add(a, nv_sum(nv_multiply_scalar(x, 0.5), NULL, 0, false)));
}

Test(transforms_reduce, integer_inputs_get_no_gradient) {
  const kind kinds[] = {K_PROD, K_MAX, K_MEAN, K_VAR, K_MEDIAN, K_LSE, K_CUMPROD, K_CUMMAX,
                        K_SORT, K_LCSE, K_SOFTMAX, K_CUMSUM};
  double v[4] = {1.5, -2.25, 3, 0.5};
  nv_array *x = nv_array_from_data(v, (int[]){4}, 1, NV_DTYPE_FLOAT64);
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    rcase c = {"int", kinds[k], 1, A(0), false, false, true, 0, S2, 0};
    nv_closure *f = nv_closure_new(int_path, &c, NULL);
    nv_closure *g = nv_grad(f, NULL, 0);
    nv_vec *in = nv_vec_new(), *out = nv_vec_new();
    nv_vec_push(in, x);
    cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "kind %d: %s", (int)c.k, nv_last_error());
    double r[4];
    cr_assert_eq(nv_array_read(nv_vec_get(out, 0), r, sizeof r), NV_OK, "%s", nv_last_error());
    expect(r, (double[]){0.5, 0.5, 0.5, 0.5}, 4, "int path");
    nv_vec_free(in);
    nv_vec_free(out);
    nv_closure_release(g);
    nv_closure_release(f);
  }
  nv_release(x);
}

/* ---- Classic cases ---- */

/* loss(logits, onehot) = mean_n (logsumexp(logits_n) − Σ_c onehot_nc · logits_nc). */
static nv_status cross_entropy(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *z = nv_vec_get(in, 0), *y = nv_vec_get(in, 1);
  int last = -1;
  nv_array *lse = nv_logsumexp(z, &last, 1, false);
  nv_array *picked = nv_sum(nv_multiply(z, y), &last, 1, false);
  return nv_vec_push(out, nv_mean(nv_subtract(lse, picked), NULL, 0, false));
}

Test(transforms_reduce, cross_entropy_gradient_is_softmax_minus_onehot) {
  unsigned st = test_seed() + 6;
  gc_seed(st);
  enum { N = 4, C = 5 };
  int zs[2] = {N, C};
  nv_array *z = make(zs, 2, D_RANDOM, &st);
  double yv[N * C] = {0}, zv[N * C];
  for (int i = 0; i < N; i++) yv[i * C + (i * 3 + 1) % C] = 1;
  nv_array *y = nv_array_from_data(yv, zs, 2, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(cross_entropy, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, z);
  nv_vec_push(in, y);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  double gv[N * C];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), gv, sizeof gv), NV_OK);
  cr_assert_eq(nv_array_read(z, zv, sizeof zv), NV_OK);
  for (int i = 0; i < N; i++) {
    double s = 0;
    for (int c = 0; c < C; c++) s += exp(zv[i * C + c]);
    for (int c = 0; c < C; c++) {
      double want = (exp(zv[i * C + c]) / s - yv[i * C + c]) / N;
      cr_assert_float_eq(gv[i * C + c], want, 1e-12, "[%d, %d]", i, c);
    }
  }
  char why[512];
  cr_assert(nv_gradcheck(f, in, 1e-6, 1e-6, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(z);
  nv_release(y);
}

/* f(x) = Σ softmax(x)·w with w fixed (the payload). */
static nv_status softmax_dot(void *payload, const nv_vec *in, nv_vec *out) {
  int last = -1;
  nv_array *s = nv_softmax(nv_vec_get(in, 0), &last, 1, true);
  return nv_vec_push(out, nv_sum(nv_multiply(s, payload), NULL, 0, false));
}

Test(transforms_reduce, softmax_hessian_vector_product) {
  unsigned st = test_seed() + 7;
  int shape[2] = {2, 5};
  nv_array *x = make(shape, 2, D_RANDOM, &st), *v = make(shape, 2, D_RANDOM, &st);
  nv_array *w = make(shape, 2, D_RANDOM, &st);
  nv_closure *f = nv_closure_new(softmax_dot, w, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *hv = nv_vec_new(), *o = nv_vec_new(),
         *hv2 = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(t, v);
  cr_assert_eq(nv_jvp(g, p, t, NULL, hv), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vjp(g, p, t, o, hv2), NV_OK, "%s", nv_last_error());
  double xs[10], vs[10], ws[10], a[10], b[10];
  nv_array_read(x, xs, sizeof xs);
  nv_array_read(v, vs, sizeof vs);
  nv_array_read(w, ws, sizeof ws);
  cr_assert_eq(nv_array_read(nv_vec_get(hv, 0), a, sizeof a), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_read(nv_vec_get(hv2, 0), b, sizeof b), NV_OK, "%s", nv_last_error());
  /* The closed form per row: the gradient is g = s ⊙ (w − s·w) with s the softmax; along v,
   * ds = s ⊙ (v − s·v), so the product is ds ⊙ (w − s·w) − s (ds·w). */
  for (int r = 0; r < 2; r++) {
    const double *xr = xs + 5 * r, *vr = vs + 5 * r, *wr = ws + 5 * r;
    double s[5], ds[5], z = 0, sv = 0, sw = 0, dsw = 0;
    for (int i = 0; i < 5; i++) z += exp(xr[i]);
    for (int i = 0; i < 5; i++) s[i] = exp(xr[i]) / z;
    for (int i = 0; i < 5; i++) sv += s[i] * vr[i];
    for (int i = 0; i < 5; i++) ds[i] = s[i] * (vr[i] - sv);
    for (int i = 0; i < 5; i++) {
      sw += s[i] * wr[i];
      dsw += ds[i] * wr[i];
    }
    for (int i = 0; i < 5; i++) {
      double want = ds[i] * (wr[i] - sw) - s[i] * dsw;
      cr_assert_float_eq(a[5 * r + i], want, 1e-12, "jvp of grad [%d, %d]", r, i);
      cr_assert_float_eq(b[5 * r + i], want, 1e-12, "vjp of grad [%d, %d]", r, i);
    }
  }
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(hv);
  nv_vec_free(o);
  nv_vec_free(hv2);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
  nv_release(v);
  nv_release(w);
}

/* grad of grad through the reductions whose rules compose core primitives and their own. */
static nv_status sum_of_grad(void *payload, const nv_vec *in, nv_vec *out) {
  nv_vec *g = nv_vec_new();
  nv_status s = nv_closure_apply(payload, in, g);
  if (s == NV_OK) s = nv_vec_push(out, nv_sum(nv_vec_get(g, 0), NULL, 0, false));
  nv_vec_free(g);
  return s;
}

static nv_status scalar_of(void *payload, const nv_vec *in, nv_vec *out) {
  nv_array *r = apply(payload, nv_vec_get(in, 0));
  nv_array *sq = nv_multiply(r, r);
  return nv_vec_push(out, nv_sum(sq, NULL, 0, false));
}

Test(transforms_reduce, second_order) {
  unsigned st = test_seed() + 8;
  gc_seed(st);
  char why[512];
  const rcase cs[] = {
      {"mean", K_MEAN, 1, A(1), false, false, false, 0, S2, D_RANDOM},
      {"logsumexp", K_LSE, 1, A(1), true, false, false, 0, S2, D_RANDOM},
      {"softmax", K_SOFTMAX, 1, A(0), false, false, false, 0, S2, D_RANDOM},
      {"var", K_VAR, 1, A(1), false, false, false, 1, S2, D_RANDOM},
      {"std", K_STD, 1, A(0), false, false, false, 0, S2, D_RANDOM},
      {"prod", K_PROD, 1, A(1), false, false, false, 0, S2, D_RANDOM},
      {"cumsum", K_CUMSUM, 1, A(1), false, true, false, 0, S2, D_RANDOM},
      {"logcumsumexp", K_LCSE, 1, A(1), false, false, true, 0, S2, D_RANDOM},
  };
  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
    nv_closure *f = nv_closure_new(scalar_of, (void *)&cs[k], NULL);
    nv_closure *g = nv_grad(f, NULL, 0);
    nv_closure *sg = nv_closure_new(sum_of_grad, g, NULL);
    nv_vec *p = nv_vec_new();
    nv_array *x = make(cs[k].shape, cs[k].nd, cs[k].domain, &st);
    nv_vec_push(p, x);
    nv_release(x);
    cr_assert(nv_gradcheck(sg, p, 1e-5, 1e-5, why, sizeof why), "%s: %s", cs[k].name, why);
    nv_vec_free(p);
    nv_closure_release(sg);
    nv_closure_release(g);
    nv_closure_release(f);
  }
}

/* Per-example gradients: vmap of grad of Σ logsumexp(x · w). */
static nv_status lse_model(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *w = nv_vec_get(in, 0), *x = nv_vec_get(in, 1);
  int last = -1;
  return nv_vec_push(out, nv_sum(nv_logsumexp(nv_multiply(w, x), &last, 1, false), NULL, 0,
                                 false));
}

Test(transforms_reduce, per_example_gradients_through_logsumexp) {
  unsigned st = test_seed() + 9;
  char why[512];
  int ws[2] = {3, 4}, xs[3] = {5, 3, 4};
  nv_array *w = make(ws, 2, D_RANDOM, &st), *x = make(xs, 3, D_RANDOM, &st);
  nv_closure *f = nv_closure_new(lse_model, NULL, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, w);
  nv_vec_push(in, x);
  int axes[2] = {NV_VMAP_NONE, 0};
  cr_assert(nv_vmapcheck(g, in, axes, 1e-12, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(w);
  nv_release(x);
}

Test(transforms_reduce, complex_max_has_no_rule) {
  float v[4] = {1, 2, 3, -1};
  nv_array *r = nv_array_from_data(v, (int[]){2}, 1, NV_DTYPE_COMPLEX64);
  rcase c = {"max", K_MAX, -1, A(0), false, false, false, 0, S2, 0};
  nv_closure *f = nv_closure_new(case_call, &c, NULL);
  nv_vec *p = nv_vec_new(), *cot = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(p, r);
  nv_array *one = nv_ones(NULL, 0, NV_DTYPE_COMPLEX64);
  nv_vec_push(cot, one);
  cr_assert_neq(nv_vjp(f, p, cot, o, g), NV_OK);
  cr_assert(strstr(nv_last_error(), "max") && strstr(nv_last_error(), "complex64"), "%s",
            nv_last_error());
  nv_vec_free(p);
  nv_vec_free(cot);
  nv_vec_free(o);
  nv_vec_free(g);
  nv_release(one);
  nv_release(r);
  nv_closure_release(f);
}

/* ---- Dtypes and empty inputs ---- */

/* vjp and jvp of op at x (cast to dt), with the cotangent / tangent given in float64, read back
 * as float64 (NULL entries on failure). */
static void rules_at(const rcase *c, nv_array *x64, nv_array *cot64, nv_array *tan64, nv_dtype dt,
                     double **g, double **j) {
  nv_array *x = nv_astype(x64, dt), *t = nv_astype(tan64, dt);
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  nv_vec *p = nv_vec_new(), *cv = nv_vec_new(), *tv = nv_vec_new(), *o = nv_vec_new(),
         *gv = nv_vec_new(), *jv = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(cv, cot64);
  nv_vec_push(tv, t);
  cr_assert_eq(nv_vjp(f, p, cv, o, gv), NV_OK, "%s: %s", c->name, nv_last_error());
  cr_assert_eq(nv_jvp(f, p, tv, NULL, jv), NV_OK, "%s: %s", c->name, nv_last_error());
  *g = gc_read(nv_vec_get(gv, 0));
  *j = gc_read(nv_vec_get(jv, 0));
  cr_assert(*g && *j, "%s: %s", c->name, nv_last_error());
  nv_vec_free(p);
  nv_vec_free(cv);
  nv_vec_free(tv);
  nv_vec_free(o);
  nv_vec_free(gv);
  nv_vec_free(jv);
  nv_closure_release(f);
  nv_release(x);
  nv_release(t);
}

Test(transforms_reduce, float32_and_half_dtypes_agree_with_float64) {
  unsigned st = test_seed() + 10;
  const nv_dtype dts[3] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};
  const double tols[3] = {1e-5, 1e-2, 6e-2};
  for (size_t k = 0; k < NGRAD; k++) {
    const rcase *c = &grad_cases[k];
    /* Values a half type holds exactly, and distinct (as the D_DISTINCT ladder is). */
    nv_array *raw = make(c->shape, c->nd, c->domain == D_ZEROS ? D_ZEROS : D_DISTINCT, &st);
    nv_array *xh = nv_astype(raw, NV_DTYPE_BFLOAT16), *x = nv_astype(xh, NV_DTYPE_FLOAT64);
    nv_array *y = apply(c, x);
    nv_array *cot = make(nv_array_shape(y), nv_array_ndim(y), D_RANDOM, &st);
    nv_array *ch = nv_astype(cot, NV_DTYPE_BFLOAT16), *cot64 = nv_astype(ch, NV_DTYPE_FLOAT64);
    nv_array *tan = make(c->shape, c->nd, D_RANDOM, &st);
    nv_array *th = nv_astype(tan, NV_DTYPE_BFLOAT16), *tan64 = nv_astype(th, NV_DTYPE_FLOAT64);
    double *g64, *j64;
    rules_at(c, x, cot64, tan64, NV_DTYPE_FLOAT64, &g64, &j64);
    for (int d = 0; d < 3; d++) {
      double *g, *j;
      rules_at(c, x, cot64, tan64, dts[d], &g, &j);
      double gs = 1, js = 1; /* scale: the largest magnitude */
      for (int64_t i = 0; i < nv_array_size(x); i++) gs = fmax(gs, fabs(g64[i]));
      for (int64_t i = 0; i < nv_array_size(y); i++) js = fmax(js, fabs(j64[i]));
      for (int64_t i = 0; i < nv_array_size(x); i++)
        cr_assert(fabs(g[i] - g64[i]) <= tols[d] * gs, "%s %s vjp[%lld]: %g, float64 %g",
                  c->name, nv_dtype_name(dts[d]), (long long)i, g[i], g64[i]);
      for (int64_t i = 0; i < nv_array_size(y); i++)
        cr_assert(fabs(j[i] - j64[i]) <= tols[d] * js, "%s %s jvp[%lld]: %g, float64 %g",
                  c->name, nv_dtype_name(dts[d]), (long long)i, j[i], j64[i]);
      free(g);
      free(j);
    }
    free(g64);
    free(j64);
    nv_array *all[] = {raw, xh, x, y, cot, ch, cot64, tan, th, tan64};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) nv_release(all[i]);
  }
}

Test(transforms_reduce, empty_inputs) {
  char why[512];
  const rcase cs[] = {
      {"mean", K_MEAN, 1, A(1), false, false, false, 0, 2, {2, 0}, D_RANDOM},
      {"prod", K_PROD, 1, A(0), true, false, false, 0, 2, {0, 3}, D_RANDOM},
      {"prod_axes", K_PROD, 2, A(0, 1), false, false, false, 0, 3, {2, 0, 3}, D_RANDOM},
      {"var", K_VAR, 1, A(1), false, false, false, 0, 2, {2, 0}, D_RANDOM},
      {"median", K_MEDIAN, 1, A(1), false, false, false, 0, 2, {2, 0}, D_RANDOM},
      {"softmax", K_SOFTMAX, 1, A(1), false, false, false, 0, 2, {0, 3}, D_RANDOM},
      {"cumsum", K_CUMSUM, 1, A(1), false, true, false, 0, 2, {2, 0}, D_RANDOM},
      {"cumprod", K_CUMPROD, 1, A(0), false, false, true, 0, 2, {0, 3}, D_RANDOM},
      {"cummax", K_CUMMAX, 1, A(1), false, true, false, 0, 2, {2, 0}, D_RANDOM},
      {"logcumsumexp", K_LCSE, -1, A(0), false, false, true, 0, 2, {2, 0}, D_RANDOM},
      {"sort", K_SORT, 1, A(1), false, false, false, 0, 2, {2, 0}, D_RANDOM},
  };
  unsigned st = test_seed() + 11;
  gc_seed(st);
  for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
    nv_closure *f = nv_closure_new(case_call, (void *)&cs[k], NULL);
    nv_vec *p = nv_vec_new(), *cot = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
    nv_array *x = make(cs[k].shape, cs[k].nd, D_RANDOM, &st);
    nv_array *y = apply(&cs[k], x), *c = nv_ones_like(y);
    nv_vec_push(p, x);
    nv_vec_push(cot, c);
    cr_assert_eq(nv_vjp(f, p, cot, o, g), NV_OK, "%s: %s", cs[k].name, nv_last_error());
    nv_array *gx = nv_vec_get(g, 0);
    cr_assert(nv_array_ndim(gx) == cs[k].nd && nv_array_size(gx) == 0, "%s", cs[k].name);
    cr_assert_eq(nv_eval1(gx), NV_OK, "%s: %s", cs[k].name, nv_last_error());
    /* Reductions of empty rows give NaN (mean, var, median), whose derivatives are not
     * defined: finite differences only for the others. */
    double *yv = gc_read(y);
    bool nan = false;
    for (int64_t i = 0; yv && i < nv_array_size(y); i++) nan |= isnan(yv[i]);
    free(yv);
    if (!nan)
      cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s: %s", cs[k].name, why);
    int one = 1;
    int bs[5], nb = cs[k].nd + 1;
    for (int d = 0, j = 0; d < nb; d++) bs[d] = d == 1 ? 3 : cs[k].shape[j++];
    nv_array *xb = nv_expand_dims(x, &one, 1), *xbb = nv_broadcast_to(xb, bs, nb);
    nv_vec *in = nv_vec_new();
    nv_vec_push(in, xbb);
    cr_assert(nv_vmapcheck(f, in, &one, 0, why, sizeof why), "%s: %s", cs[k].name, why);
    nv_vec_free(in);
    nv_release(xb);
    nv_release(xbb);
    nv_vec_free(p);
    nv_vec_free(cot);
    nv_vec_free(o);
    nv_vec_free(g);
    nv_release(x);
    nv_release(y);
    nv_release(c);
    nv_closure_release(f);
  }
}
