/* Transforms over the elementwise family: every differentiable element-wise op's vjp and jvp
 * against finite differences (float64, broadcast shapes, strided views), every element-wise
 * primitive under vmap against a loop (in_axes 0, 1, -1 and None), the rules in float32,
 * float16, bfloat16 and complex64, MLX's edge rules (power at 0, nan_to_num, view, depends),
 * composed cases (sigmoid cross-entropy, a Hessian-vector product through tanh, per-example
 * gradients) and errors. NUVEC_TEST_FULL=1 adds the exhaustive shape and dtype sweep. */
#include <criterion/criterion.h>

#include "gradcheck.h"
#include "testutil.h"
#include "transforms/transforms_internal.h"

static bool full_sweep(void) {
  const char *s = getenv("NUVEC_TEST_FULL");
  return s && *s && strcmp(s, "0");
}

/* ---- Inputs ---- */

enum {
  D_ANY,      /* [-1, 1) */
  D_POS,      /* [0.2, 2.2) */
  D_AWAY,     /* ±[0.3, 1.3) */
  D_HALF,     /* [-0.5, 0.5) */
  D_ABOVE1,   /* [1.2, 3.2) */
};

static double in_domain(double r, int domain) {
  switch (domain) {
    case D_POS: return 0.2 + fabs(r) * 2;
    case D_AWAY: return (r < 0 ? -1 : 1) * (0.3 + fabs(r));
    case D_HALF: return r * 0.5;
    case D_ABOVE1: return 1.2 + fabs(r) * 2;
    default: return r;
  }
}

static nv_array *random_array(const int *shape, int nd, int domain, unsigned *st) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = in_domain(test_randf(st), domain);
  nv_array *a = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
  free(v);
  return a;
}

/* A strided view holding fresh random values: the transpose of a transposed copy (kind 0, at
 * least 2-D) or a negative-step slice of a reversed copy. */
static nv_array *strided_array(const int *shape, int nd, int domain, unsigned *st, int kind) {
  return nv_test_strided_view(random_array(shape, nd, domain, st), kind == 0);
}

/* ---- The ops under test, as closures ----
 * Closures run inside a scope of their own: they push their results and release nothing. */

typedef nv_status (*op_fn)(nv_array *const *x, nv_vec *out);

typedef struct op_case {
  const char *name;
  op_fn fn;
  int nin;
  int nd[3];
  int shape[3][4];
  int domain[3];
} op_case;

static nv_status push(nv_vec *out, nv_array *r) {
  nv_status s = nv_array_status(r);
  return s == NV_OK ? nv_vec_push(out, r) : s;
}

#define OP(name, expr)                                             \
  static nv_status f_##name(nv_array *const *x, nv_vec *out) {     \
    (void)x;                                                       \
    return push(out, (expr));                                      \
  }

static nv_array *as_f64(nv_array *x) { return nv_astype(x, NV_DTYPE_FLOAT64); }
/* x·k as int32 (values in [-k, k)), for the integer-only ops. */
static nv_array *ints(nv_array *x, double k) {
  return nv_astype(nv_floor(nv_multiply_scalar(x, k)), NV_DTYPE_INT32);
}

OP(reciprocal, nv_reciprocal(x[0]))
OP(square, nv_square(x[0]))
OP(rsqrt, nv_rsqrt(x[0]))
OP(expm1, nv_expm1(x[0]))
OP(log2, nv_log2(x[0]))
OP(log10, nv_log10(x[0]))
OP(log1p, nv_log1p(x[0]))
OP(sin, nv_sin(x[0]))
OP(cos, nv_cos(x[0]))
OP(tan, nv_tan(x[0]))
OP(arcsin, nv_arcsin(x[0]))
OP(arccos, nv_arccos(x[0]))
OP(arctan, nv_arctan(x[0]))
OP(sinh, nv_sinh(x[0]))
OP(cosh, nv_cosh(x[0]))
OP(tanh, nv_tanh(x[0]))
OP(arcsinh, nv_arcsinh(x[0]))
OP(arccosh, nv_arccosh(x[0]))
OP(arctanh, nv_arctanh(x[0]))
OP(degrees, nv_degrees(x[0]))
OP(radians, nv_radians(x[0]))
OP(sigmoid, nv_sigmoid(x[0]))
OP(erf, nv_erf(x[0]))
OP(erfinv, nv_erfinv(x[0]))
OP(sign, nv_sign(x[0]))
OP(floor, nv_floor(x[0]))
OP(ceil, nv_ceil(x[0]))
OP(trunc, nv_trunc(x[0]))
OP(round, nv_round(x[0], 1))
OP(nan_to_num, nv_nan_to_num(x[0], 0.0, NULL, NULL))
OP(view_same, nv_view(x[0], NV_DTYPE_FLOAT64))
OP(floor_divide, nv_floor_divide(x[0], x[1]))
OP(remainder, nv_remainder(x[0], x[1]))
OP(power, nv_power(x[0], x[1]))
OP(arctan2, nv_arctan2(x[0], x[1]))
OP(logaddexp, nv_logaddexp(x[0], x[1]))
OP(where, nv_where(nv_greater_scalar(x[0], 0.0), x[1], x[2]))
OP(clip, nv_clip(x[0], x[1], x[2]))
OP(clip_scalar, nv_clip_scalar(x[0], -0.4, 0.5))
/* x·[x > y or x <= -y] · [isfinite(x) and not isnan(y)]: masks built from predicates. */
OP(predicates, nv_multiply(nv_multiply(x[0], nv_logical_or(nv_greater(x[0], x[1]),
                                                           nv_less_equal(x[0], nv_negative(x[1])))),
                           nv_logical_and(nv_isfinite(x[0]), nv_logical_not(nv_isnan(x[1])))))
OP(count, nv_multiply(x[0], nv_number_of_elements(x[0], (int[]){1}, 1, false, NV_DTYPE_FLOAT64)))
OP(count_inverted,
   nv_multiply(x[0], nv_number_of_elements(x[0], (int[]){-1}, 1, true, NV_DTYPE_FLOAT64)))

static nv_status f_divmod(nv_array *const *x, nv_vec *out) { return nv_divmod(x[0], x[1], out); }

/* depends([x²], [y]): y is evaluated first but gets no gradient. */
static nv_status f_depends(nv_array *const *x, nv_vec *out) {
  nv_vec *xs = nv_vec_new(), *deps = nv_vec_new();
  nv_vec_push(xs, nv_square(x[0]));
  nv_vec_push(deps, x[1]);
  nv_status s = nv_depends(xs, deps, out);
  nv_vec_free(xs);
  nv_vec_free(deps);
  return s;
}

static const op_case grad_cases[] = {
    {"reciprocal", f_reciprocal, 1, {2}, {{2, 3}}, {D_AWAY}},
    {"square", f_square, 1, {2}, {{2, 3}}, {D_ANY}},
    {"rsqrt", f_rsqrt, 1, {2}, {{2, 3}}, {D_POS}},
    {"expm1", f_expm1, 1, {2}, {{2, 3}}, {D_ANY}},
    {"log2", f_log2, 1, {2}, {{2, 3}}, {D_POS}},
    {"log10", f_log10, 1, {2}, {{2, 3}}, {D_POS}},
    {"log1p", f_log1p, 1, {2}, {{2, 3}}, {D_HALF}},
    {"sin", f_sin, 1, {2}, {{2, 3}}, {D_ANY}},
    {"cos", f_cos, 1, {2}, {{2, 3}}, {D_ANY}},
    {"tan", f_tan, 1, {2}, {{2, 3}}, {D_ANY}},
    {"arcsin", f_arcsin, 1, {2}, {{2, 3}}, {D_HALF}},
    {"arccos", f_arccos, 1, {2}, {{2, 3}}, {D_HALF}},
    {"arctan", f_arctan, 1, {2}, {{2, 3}}, {D_ANY}},
    {"sinh", f_sinh, 1, {2}, {{2, 3}}, {D_ANY}},
    {"cosh", f_cosh, 1, {2}, {{2, 3}}, {D_ANY}},
    {"tanh", f_tanh, 1, {2}, {{2, 3}}, {D_ANY}},
    {"arcsinh", f_arcsinh, 1, {2}, {{2, 3}}, {D_ANY}},
    {"arccosh", f_arccosh, 1, {2}, {{2, 3}}, {D_ABOVE1}},
    {"arctanh", f_arctanh, 1, {2}, {{2, 3}}, {D_HALF}},
    {"degrees", f_degrees, 1, {2}, {{2, 3}}, {D_ANY}},
    {"radians", f_radians, 1, {2}, {{2, 3}}, {D_ANY}},
    {"sigmoid", f_sigmoid, 1, {2}, {{2, 3}}, {D_ANY}},
    {"erf", f_erf, 1, {2}, {{2, 3}}, {D_ANY}},
    {"erfinv", f_erfinv, 1, {2}, {{2, 3}}, {D_HALF}},
    {"sign", f_sign, 1, {2}, {{2, 3}}, {D_AWAY}},
    {"floor", f_floor, 1, {2}, {{2, 3}}, {D_ANY}},
    {"ceil", f_ceil, 1, {2}, {{2, 3}}, {D_ANY}},
    {"trunc", f_trunc, 1, {2}, {{2, 3}}, {D_ANY}},
    {"round", f_round, 1, {2}, {{2, 3}}, {D_ANY}},
    {"nan_to_num", f_nan_to_num, 1, {2}, {{2, 3}}, {D_ANY}},
    {"view", f_view_same, 1, {2}, {{2, 3}}, {D_ANY}},
    {"floor_divide", f_floor_divide, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_AWAY}},
    {"remainder", f_remainder, 2, {2, 2}, {{2, 1}, {1, 3}}, {D_ANY, D_AWAY}},
    {"divmod", f_divmod, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_AWAY}},
    {"power", f_power, 2, {2, 1}, {{2, 3}, {3}}, {D_POS, D_ANY}},
    {"arctan2", f_arctan2, 2, {2, 2}, {{2, 3}, {2, 3}}, {D_ANY, D_AWAY}},
    {"logaddexp", f_logaddexp, 2, {2, 1}, {{2, 1}, {3}}, {D_ANY, D_ANY}},
    {"where", f_where, 3, {2, 1, 2}, {{2, 3}, {3}, {2, 1}}, {D_ANY, D_ANY, D_ANY}},
    {"clip", f_clip, 3, {2, 1, 0}, {{2, 3}, {3}, {0}}, {D_ANY, D_HALF, D_ANY}},
    {"clip_scalar", f_clip_scalar, 1, {2}, {{2, 3}}, {D_ANY}},
    {"predicates", f_predicates, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_ANY}},
    {"depends", f_depends, 2, {2, 1}, {{2, 3}, {2}}, {D_ANY, D_ANY}},
    {"number_of_elements", f_count, 1, {2}, {{2, 3}}, {D_ANY}},
    {"number_of_elements_inverted", f_count_inverted, 1, {3}, {{2, 3, 2}}, {D_ANY}},
};
#define NGRAD (sizeof grad_cases / sizeof *grad_cases)

/* Ops without a gradient, for vmap only. */
OP(logical_not, nv_logical_not(nv_floor(x[0])))
/* The value tests over log(x) (NaN below 0) and 1/floor(x) (±inf at ±0), as weighted flags. */
static nv_status f_value_tests(nv_array *const *x, nv_vec *out) {
  nv_array *l = nv_log(x[0]), *r = nv_reciprocal(nv_floor(x[0]));
  nv_array *nr = nv_reciprocal(nv_negative(nv_floor(x[0])));
  nv_array *flags[5] = {nv_isnan(l), nv_isinf(r), nv_isfinite(r), nv_isposinf(r),
                        nv_isneginf(nr)};
  nv_array *acc = nv_zeros_like(x[0]);
  for (int i = 0; i < 5; i++) acc = nv_add(acc, nv_multiply_scalar(as_f64(flags[i]), 1 << i));
  return push(out, acc);
}
OP(bitwise_invert, as_f64(nv_bitwise_invert(ints(x[0], 8))))
static nv_status f_bitwise(nv_array *const *x, nv_vec *out) {
  nv_array *a = ints(x[0], 8), *b = ints(x[1], 8);
  nv_array *r = nv_add(nv_bitwise_and(a, b), nv_multiply(nv_bitwise_or(a, b), nv_array_int(3)));
  return push(out, as_f64(nv_add(r, nv_multiply(nv_bitwise_xor(a, b), nv_array_int(7)))));
}
static nv_status f_shifts(nv_array *const *x, nv_vec *out) {
  nv_array *a = ints(x[0], 100), *k = nv_astype(nv_abs(ints(x[1], 4)), NV_DTYPE_INT32);
  return push(out, as_f64(nv_add(nv_left_shift(a, k), nv_right_shift(a, k))));
}
static nv_status f_comparisons(nv_array *const *x, nv_vec *out) {
  nv_array *a = nv_floor(nv_multiply_scalar(x[0], 2)), *b = nv_floor(nv_multiply_scalar(x[1], 2));
  nv_array *flags[6] = {nv_equal(a, b),   nv_not_equal(a, b), nv_greater(a, b),
                        nv_greater_equal(a, b), nv_less(a, b), nv_less_equal(a, b)};
  nv_array *acc = nv_zeros_like(a);
  for (int i = 0; i < 6; i++) acc = nv_add(acc, nv_multiply_scalar(as_f64(flags[i]), 1 << i));
  return push(out, acc);
}
static nv_status f_logical(nv_array *const *x, nv_vec *out) {
  nv_array *a = nv_floor(x[0]), *b = nv_floor(x[1]);
  nv_array *r = nv_add(as_f64(nv_logical_and(a, b)),
                       nv_multiply_scalar(as_f64(nv_logical_or(a, b)), 2));
  return push(out, nv_add(r, nv_multiply_scalar(as_f64(nv_logical_xor(a, b)), 4)));
}
OP(isclose, nv_isclose(x[0], x[1], 0.0, 0.5, false))
OP(tri_windows, nv_add(nv_multiply(x[0], nv_tri(2, 3, 0, NV_DTYPE_FLOAT64)),
                       nv_add(nv_multiply(nv_hanning(3), nv_hamming(3)),
                              nv_multiply(nv_bartlett(3), nv_blackman(3)))))
OP(tril_triu, nv_add(nv_tril(x[0], 0), nv_multiply_scalar(nv_triu(x[0], 1), 3)))
OP(view_uint32, as_f64(nv_view(x[0], NV_DTYPE_UINT32)))
OP(view_back, nv_view(nv_view(x[0], NV_DTYPE_FLOAT32), NV_DTYPE_FLOAT64))
/* Complex parts: z = x + iy, then real and imag of conj(sin(z)) and of z, as float32. */
static nv_status f_complex(nv_array *const *x, nv_vec *out) {
  nv_array *z = nv_add(nv_astype(x[0], NV_DTYPE_COMPLEX64),
                       nv_multiply(nv_astype(x[1], NV_DTYPE_COMPLEX64), nv_array_complex(0, 1)));
  nv_array *w = nv_conjugate(nv_sin(z));
  nv_array *r = nv_add(nv_real(w), nv_multiply_scalar(nv_imag(w), 3));
  return push(out, nv_add(r, nv_multiply(nv_real(z), nv_imag(z))));
}

static const op_case vmap_cases[] = {
    {"logical_not", f_logical_not, 1, {2}, {{2, 3}}, {D_ANY}},
    {"value_tests", f_value_tests, 1, {2}, {{2, 3}}, {D_ANY}},
    {"bitwise_invert", f_bitwise_invert, 1, {2}, {{2, 3}}, {D_ANY}},
    {"bitwise", f_bitwise, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_ANY}},
    {"shifts", f_shifts, 2, {2, 2}, {{2, 1}, {1, 3}}, {D_ANY, D_ANY}},
    {"comparisons", f_comparisons, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_ANY}},
    {"logical", f_logical, 2, {2, 2}, {{2, 3}, {2, 3}}, {D_ANY, D_ANY}},
    {"isclose", f_isclose, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_ANY}},
    {"tri_windows", f_tri_windows, 1, {2}, {{2, 3}}, {D_ANY}},
    {"tril_triu", f_tril_triu, 1, {2}, {{3, 3}}, {D_ANY}},
    {"view_uint32", f_view_uint32, 1, {2}, {{2, 3}}, {D_ANY}},
    {"view_float32", f_view_back, 1, {2}, {{2, 3}}, {D_ANY}},
    {"complex_parts", f_complex, 2, {2, 1}, {{2, 3}, {3}}, {D_ANY, D_ANY}},
};
#define NVMAP (sizeof vmap_cases / sizeof *vmap_cases)

static nv_status case_call(void *payload, const nv_vec *in, nv_vec *out) {
  const op_case *c = payload;
  return c->fn(nv_vec_data(in), out);
}

/* ---- vjp and jvp against finite differences ---- */

/* The primals of a case with `shapes` (NULL: the case's own), contiguous or strided. */
static nv_vec *case_primals(const op_case *c, const int (*shapes)[4], const int *nds, int layout,
                            unsigned *st) {
  nv_vec *p = nv_vec_new();
  for (int i = 0; i < c->nin; i++) {
    const int *sh = shapes ? shapes[i] : c->shape[i];
    int nd = shapes ? nds[i] : c->nd[i];
    nv_array *a = layout ? strided_array(sh, nd, c->domain[i], st, i)
                         : random_array(sh, nd, c->domain[i], st);
    nv_vec_push(p, a);
    nv_release(a);
  }
  return p;
}

static void grad_case(const op_case *c, const int (*shapes)[4], const int *nds, unsigned *st) {
  char why[512];
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  for (int layout = 0; layout < 2; layout++) {
    nv_vec *p = case_primals(c, shapes, nds, layout, st);
    cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s (layout %d): %s", c->name,
              layout, why);
    nv_vec_free(p);
  }
  nv_closure_release(f);
}

Test(transforms_elementwise, every_differentiable_op_matches_finite_differences) {
  unsigned st = test_seed();
  gc_seed(st);
  for (size_t k = 0; k < NGRAD; k++) grad_case(&grad_cases[k], NULL, NULL, &st);
}

static void vmap_case(const op_case *c, unsigned *st);

/* More shapes, under both vjp/jvp and vmap: 0-d, empty, 1-D, 3-D and broadcasting against 0-d
 * and size-1 axes (every op under NUVEC_TEST_FULL, else a rotating sample of them). */
Test(transforms_elementwise, more_shapes_match_finite_differences_and_loops) {
  unsigned st = test_seed() + 1;
  gc_seed(st);
  static const int sets[][3][4] = {{{0}},
                                   {{2, 0}, {0}, {1}},
                                   {{5}, {5}, {5}},
                                   {{2, 3, 2}, {3, 1}, {2}},
                                   {{4, 1}, {0}, {1, 3}}};
  static const int nds[][3] = {{0, 0, 0}, {2, 1, 1}, {1, 1, 1}, {3, 2, 1}, {2, 0, 2}};
  size_t step = full_sweep() ? 1 : 7;
  for (size_t k = st % step; k < NGRAD; k += step) {
    /* depends and the counts are written for their own ranks. */
    if (grad_cases[k].fn == f_depends || grad_cases[k].fn == f_count ||
        grad_cases[k].fn == f_count_inverted)
      continue;
    for (size_t s = 0; s < sizeof nds / sizeof *nds; s++) {
      op_case c = grad_cases[k];
      memcpy(c.shape, sets[s], sizeof c.shape);
      memcpy(c.nd, nds[s], sizeof c.nd);
      grad_case(&c, NULL, NULL, &st);
      vmap_case(&c, &st);
    }
  }
}

/* ---- vmap against a loop ---- */

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
    nv_array *a = random_array(shape, nd, c->domain[i], st);
    nv_vec_push(v, a);
    nv_release(a);
  }
  return v;
}

static void vmap_case(const op_case *c, unsigned *st) {
  char why[512];
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
#define N NV_VMAP_NONE
  static const int configs[][3] = {{0, 0, 0}, {1, 1, 1}, {-1, -1, -1}, {0, N, 0}, {N, 0, N}};
#undef N
  for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
    const int *axes = configs[k];
    bool fits = true, any = false, all = true;
    for (int i = 0; i < c->nin; i++) {
      bool mapped = axes[i] != NV_VMAP_NONE;
      if (mapped && axes[i] > c->nd[i]) fits = false;
      any |= mapped;
      all &= mapped;
    }
    if (!fits || !any || (k >= 3 && all)) continue;
    nv_vec *in = batched_inputs(c, axes, st);
    cr_assert(nv_vmapcheck(f, in, axes, 1e-12, why, sizeof why), "%s, in_axes (%d, %d, %d): %s",
              c->name, axes[0], axes[1], axes[2], why);
    nv_vec_free(in);
  }
  nv_closure_release(f);
}

Test(transforms_elementwise, every_op_vmap_matches_a_loop) {
  unsigned st = test_seed() + 2;
  for (size_t k = 0; k < NGRAD; k++) vmap_case(&grad_cases[k], &st);
  for (size_t k = 0; k < NVMAP; k++) vmap_case(&vmap_cases[k], &st);
}

/* allclose and array_equal reduce each batch element to one bool: inputs where some batch
 * elements pass and others fail. */
static nv_status f_allclose(nv_array *const *x, nv_vec *out) {
  return push(out, nv_allclose(x[0], x[1], 0.0, 0.1, false));
}
static nv_status f_array_equal(nv_array *const *x, nv_vec *out) {
  return push(out, nv_array_equal(x[0], x[1], true));
}

static void check_all_test(op_fn fn, const int *axes, const double *a, const double *b,
                           const bool *want) {
  op_case c = {"all_test", fn, 2, {2, 2}, {{3, 2}, {3, 2}}, {0, 0}};
  nv_closure *f = nv_closure_new(case_call, &c, NULL), *v = nv_vmap(f, axes, 2, NULL, 0);
  int shape[2] = {3, 2};
  nv_array *x = nv_array_from_data(a, shape, 2, NV_DTYPE_FLOAT64);
  nv_array *y = axes[1] == NV_VMAP_NONE ? nv_array_from_data(b, (int[]){2}, 1, NV_DTYPE_FLOAT64)
                                         : nv_array_from_data(b, shape, 2, NV_DTYPE_FLOAT64);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, y);
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  bool got[3];
  cr_assert_eq(nv_array_dtype(nv_vec_get(out, 0)), NV_DTYPE_BOOL);
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), got, sizeof got), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 3; i++) cr_assert_eq(got[i], want[i], "batch %d", i);
  char why[512];
  cr_assert(nv_vmapcheck(f, in, axes, 0, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_release(x);
  nv_release(y);
  nv_closure_release(v);
  nv_closure_release(f);
}

Test(transforms_elementwise, vmap_of_allclose_and_array_equal_reduces_per_batch) {
  double a[6] = {1, 2, 3, 4, NAN, 6}, b[6] = {1.05, 2, 3, 4.5, NAN, 6};
  check_all_test(f_allclose, (int[]){0, 0}, a, b, (bool[]){true, false, false});
  check_all_test(f_array_equal, (int[]){0, 0}, a, b, (bool[]){false, false, true});
  double c[2] = {3, 4};
  check_all_test(f_array_equal, (int[]){0, NV_VMAP_NONE}, (double[]){1, 2, 3, 4, 3, 4}, c,
                 (bool[]){false, true, true});
}

/* ---- Dtypes: float32, float16, bfloat16 keep their dtype and agree with float64 ---- */

static double *vjp_values(const op_case *c, nv_array *x, nv_array *cot, nv_dtype want_dt) {
  nv_closure *f = nv_closure_new(case_call, (void *)c, NULL);
  nv_vec *p = nv_vec_new(), *ct = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(ct, cot);
  cr_assert_eq(nv_vjp(f, p, ct, o, g), NV_OK, "%s: %s", c->name, nv_last_error());
  cr_assert_eq(nv_array_dtype(nv_vec_get(g, 0)), want_dt, "%s: the gradient's dtype", c->name);
  double *v = gc_read(nv_vec_get(g, 0));
  cr_assert(v, "%s: %s", c->name, nv_last_error());
  nv_vec_free(p);
  nv_vec_free(ct);
  nv_vec_free(o);
  nv_vec_free(g);
  nv_closure_release(f);
  return v;
}

Test(transforms_elementwise, unary_rules_in_float32_float16_bfloat16) {
  unsigned st = test_seed() + 3;
  static const nv_dtype dts[3] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};
  static const double tols[3] = {1e-5, 2e-2, 8e-2};
  int shape[1] = {8};
  int ndt = full_sweep() ? 3 : 2;
  for (size_t k = 0; k < NGRAD; k++) {
    const op_case *c = &grad_cases[k];
    if (c->nin != 1 || c->fn == f_view_same || c->fn == f_count || c->fn == f_count_inverted)
      continue;
    for (int d = 0; d < ndt; d++) {
      /* Inputs and cotangents exactly representable in the narrow dtype, so both sides see
       * the same numbers. */
      nv_array *x0 = random_array(shape, 1, c->domain[0], &st);
      nv_array *c0 = random_array(shape, 1, D_ANY, &st);
      nv_array *xn = nv_astype(x0, dts[d]), *cn = nv_astype(c0, dts[d]);
      nv_array *x64 = nv_astype(xn, NV_DTYPE_FLOAT64), *c64 = nv_astype(cn, NV_DTYPE_FLOAT64);
      double *want = vjp_values(c, x64, c64, NV_DTYPE_FLOAT64);
      double *got = vjp_values(c, xn, cn, dts[d]);
      for (int i = 0; i < 8; i++)
        cr_assert(gc_close(got[i], want[i], tols[d]), "%s in %s, element %d: %.8g, float64 %.8g",
                  c->name, nv_dtype_name(dts[d]), i, got[i], want[i]);
      free(want);
      free(got);
      nv_release(x0);
      nv_release(c0);
      nv_release(xn);
      nv_release(cn);
      nv_release(x64);
      nv_release(c64);
    }
  }
}

/* ---- Complex: MLX's convention, cot · conj(f'(z)); real, imag, conjugate as MLX ---- */

/* vjp of a one-input closure at z with cotangent `ct` (complex64 or float32). */
static nv_array *vjp1(op_fn fn, nv_array *z, nv_array *ct) {
  op_case c = {"complex", fn, 1, {1}, {{2}}, {0}};
  nv_closure *f = nv_closure_new(case_call, &c, NULL);
  nv_vec *p = nv_vec_new(), *cv = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(p, z);
  nv_vec_push(cv, ct);
  cr_assert_eq(nv_vjp(f, p, cv, o, g), NV_OK, "%s", nv_last_error());
  nv_array *r = nv_retain(nv_vec_get(g, 0));
  nv_vec_free(p);
  nv_vec_free(cv);
  nv_vec_free(o);
  nv_vec_free(g);
  nv_closure_release(f);
  return r;
}

static void read_c64(nv_array *x, float *v, int n) {
  cr_assert_eq(nv_array_dtype(x), NV_DTYPE_COMPLEX64);
  cr_assert_eq(nv_array_read(x, v, (size_t)n * 2 * sizeof(float)), NV_OK, "%s", nv_last_error());
}

static nv_status f_creal(nv_array *const *x, nv_vec *o) { return push(o, nv_real(x[0])); }
static nv_status f_cimag(nv_array *const *x, nv_vec *o) { return push(o, nv_imag(x[0])); }
static nv_status f_cconj(nv_array *const *x, nv_vec *o) { return push(o, nv_conjugate(x[0])); }
static nv_status f_csin(nv_array *const *x, nv_vec *o) { return push(o, nv_sin(x[0])); }

Test(transforms_elementwise, complex_rules) {
  float zv[4] = {0.5f, -1.25f, -0.75f, 0.3f};
  int shape[1] = {2};
  nv_array *z = nv_array_from_data(zv, shape, 1, NV_DTYPE_COMPLEX64);
  float cr[2] = {2.0f, -3.0f}, cc[4] = {1.5f, 0.5f, -2.0f, 1.0f};
  nv_array *ctr = nv_array_from_data(cr, shape, 1, NV_DTYPE_FLOAT32);
  nv_array *ctc = nv_array_from_data(cc, shape, 1, NV_DTYPE_COMPLEX64);
  float g[4];
  /* MLX's convention (cot · conj(f')): real: c -> c + 0i; imag: c -> ic; conjugate:
   * c -> conj(c). */
  nv_array *gr = vjp1(f_creal, z, ctr), *gi = vjp1(f_cimag, z, ctr), *gc = vjp1(f_cconj, z, ctc);
  read_c64(gr, g, 2);
  for (int i = 0; i < 2; i++) cr_assert(g[2 * i] == cr[i] && g[2 * i + 1] == 0.0f); /* ±0 */
  read_c64(gi, g, 2);
  for (int i = 0; i < 2; i++) cr_assert(g[2 * i] == 0.0f && g[2 * i + 1] == cr[i]);
  read_c64(gc, g, 2);
  for (int i = 0; i < 2; i++) cr_assert(g[2 * i] == cc[2 * i] && g[2 * i + 1] == -cc[2 * i + 1]);
  /* sin: c · conj(cos(z)). */
  nv_array *gs = vjp1(f_csin, z, ctc);
  read_c64(gs, g, 2);
  for (int i = 0; i < 2; i++) {
    double x = zv[2 * i], y = zv[2 * i + 1];
    double cre = cos(x) * cosh(y), cim = sin(x) * sinh(y); /* conj(cos(x + iy)) */
    double wr = cc[2 * i] * cre - cc[2 * i + 1] * cim, wi = cc[2 * i] * cim + cc[2 * i + 1] * cre;
    cr_assert(fabs(g[2 * i] - wr) < 1e-5 && fabs(g[2 * i + 1] - wi) < 1e-5,
              "sin: (%g, %g) want (%g, %g)", g[2 * i], g[2 * i + 1], wr, wi);
  }
  /* jvp of real/imag: the parts of the tangent. */
  op_case c = {"imag", f_cimag, 1, {1}, {{2}}, {0}};
  nv_closure *f = nv_closure_new(case_call, &c, NULL);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *o = nv_vec_new();
  nv_vec_push(p, z);
  nv_vec_push(t, ctc);
  cr_assert_eq(nv_jvp(f, p, t, NULL, o), NV_OK, "%s", nv_last_error());
  float ti[2];
  cr_assert_eq(nv_array_read(nv_vec_get(o, 0), ti, sizeof ti), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 2; i++) cr_assert_eq(ti[i], cc[2 * i + 1]);
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(o);
  nv_closure_release(f);
  nv_release(gr);
  nv_release(gi);
  nv_release(gc);
  nv_release(gs);
  nv_release(z);
  nv_release(ctr);
  nv_release(ctc);
}

/* ---- MLX's edge rules ---- */

/* vjp of a closure at float64 primals with a cotangent of ones; the gradients appended. */
static void vjp_ones(op_fn fn, int nin, nv_array *const *xs, nv_vec *g) {
  op_case c = {"edge", fn, nin, {0}, {{0}}, {0}};
  nv_closure *f = nv_closure_new(case_call, &c, NULL);
  nv_vec *p = nv_vec_new(), *o = nv_vec_new(), *ct = nv_vec_new(), *y = nv_vec_new();
  for (int i = 0; i < nin; i++) nv_vec_push(p, xs[i]);
  cr_assert_eq(nv_closure_apply(f, p, y), NV_OK, "%s", nv_last_error());
  for (size_t i = 0; i < nv_vec_size(y); i++) {
    nv_array *one = nv_ones_like(nv_vec_get(y, i));
    nv_vec_push(ct, one);
    nv_release(one);
  }
  cr_assert_eq(nv_vjp(f, p, ct, o, g), NV_OK, "%s", nv_last_error());
  nv_vec_free(p);
  nv_vec_free(o);
  nv_vec_free(ct);
  nv_vec_free(y);
  nv_closure_release(f);
}

static void read_f64(nv_array *x, double *v, int n) {
  cr_assert_eq(nv_array_read(x, v, (size_t)n * sizeof(double)), NV_OK, "%s", nv_last_error());
}

/* Equal as numbers, or both NaN. */
static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

Test(transforms_elementwise, power_at_zero_follows_mlx) {
  /* d/da = b·a^(b-1); d/db = log(a)·a^b, and 0 where a^b is 0. */
  double av[5] = {0, 0, 0, 2, -2}, bv[5] = {2, 0, 1, 0, 3};
  double wa[5] = {0, NAN, 1, 0, 12}, wb[5] = {0, -INFINITY, 0, log(2.0), NAN};
  nv_array *x[2] = {nv_array_from_data(av, (int[]){5}, 1, NV_DTYPE_FLOAT64),
                    nv_array_from_data(bv, (int[]){5}, 1, NV_DTYPE_FLOAT64)};
  nv_vec *g = nv_vec_new();
  vjp_ones(f_power, 2, x, g);
  double ga[5], gb[5];
  read_f64(nv_vec_get(g, 0), ga, 5);
  read_f64(nv_vec_get(g, 1), gb, 5);
  for (int i = 0; i < 5; i++) {
    cr_assert(same_double(ga[i], wa[i]), "d/da at %d: %g, want %g", i, ga[i], wa[i]);
    cr_assert(same_double(gb[i], wb[i]), "d/db at %d: %g, want %g", i, gb[i], wb[i]);
  }
  nv_vec_free(g);
  nv_release(x[0]);
  nv_release(x[1]);
}

Test(transforms_elementwise, nan_to_num_and_where_route_gradients) {
  double v[5] = {NAN, INFINITY, -INFINITY, 1.5, -0.25};
  nv_array *x = nv_array_from_data(v, (int[]){5}, 1, NV_DTYPE_FLOAT64);
  nv_vec *g = nv_vec_new();
  vjp_ones(f_nan_to_num, 1, &x, g);
  double r[5];
  read_f64(nv_vec_get(g, 0), r, 5);
  double want[5] = {0, 0, 0, 1, 1};
  for (int i = 0; i < 5; i++) cr_assert_eq(r[i], want[i], "element %d: %g", i, r[i]);
  nv_vec_free(g);
  /* where: the selected branch gets the cotangent even where the other one is not finite. */
  double c[5] = {1, -1, 1, -1, 1};
  nv_array *xs[3] = {nv_array_from_data(c, (int[]){5}, 1, NV_DTYPE_FLOAT64), x,
                     nv_array_from_data(v, (int[]){5}, 1, NV_DTYPE_FLOAT64)};
  g = nv_vec_new();
  vjp_ones(f_where, 3, xs, g);
  double gc[5], gx[5], gy[5];
  read_f64(nv_vec_get(g, 0), gc, 5);
  read_f64(nv_vec_get(g, 1), gx, 5);
  read_f64(nv_vec_get(g, 2), gy, 5);
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(gc[i], 0.0);
    cr_assert_eq(gx[i], c[i] > 0 ? 1.0 : 0.0);
    cr_assert_eq(gy[i], c[i] > 0 ? 0.0 : 1.0);
  }
  nv_vec_free(g);
  nv_release(xs[0]);
  nv_release(xs[2]);
  nv_release(x);
}

OP(logaddexp_f32, nv_logaddexp(x[0], x[1]))

Test(transforms_elementwise, logaddexp_gradient_keeps_tiny_weights) {
  /* d/db logaddexp(20, 0) = sigmoid(-20) ≈ 2.06e-9, which 1 - sigmoid(20) rounds to 0. */
  float av[2] = {20.0f, -3.0f}, bv[2] = {0.0f, -3.0f};
  nv_array *x[2] = {nv_array_from_data(av, (int[]){2}, 1, NV_DTYPE_FLOAT32),
                    nv_array_from_data(bv, (int[]){2}, 1, NV_DTYPE_FLOAT32)};
  nv_vec *g = nv_vec_new();
  vjp_ones(f_logaddexp_f32, 2, x, g);
  float ga[2], gb[2];
  READ_F32(nv_vec_get(g, 0), ga, 2);
  READ_F32(nv_vec_get(g, 1), gb, 2);
  double tiny = exp(-20.0) / (1 + exp(-20.0));
  cr_assert(fabs(gb[0] - tiny) < 1e-6 * tiny, "%g, want %g", gb[0], tiny);
  cr_assert_float_eq(ga[0], 1.0f, 1e-7);
  cr_assert_float_eq(ga[1], 0.5f, 1e-7);
  cr_assert_float_eq(gb[1], 0.5f, 1e-7);
  nv_vec_free(g);
  nv_release(x[0]);
  nv_release(x[1]);
}

OP(view_f16_bf16, nv_view(x[0], NV_DTYPE_BFLOAT16))
OP(view_f32_i32, nv_astype(nv_view(x[0], NV_DTYPE_INT32), NV_DTYPE_FLOAT32))
OP(view_f32_f16, nv_astype(nv_view(x[0], NV_DTYPE_FLOAT16), NV_DTYPE_FLOAT32))

Test(transforms_elementwise, view_passes_gradients_only_between_same_size_floats) {
  uint16_t bits[3] = {0x3c00, 0xc000, 0x3555};
  nv_array *h = nv_array_from_data(bits, (int[]){3}, 1, NV_DTYPE_FLOAT16);
  nv_vec *g = nv_vec_new();
  vjp_ones(f_view_f16_bf16, 1, &h, g);
  /* The cotangent (bfloat16 ones, 0x3f80) is viewed back as float16 bits. */
  nv_array *gh = nv_vec_get(g, 0);
  cr_assert_eq(nv_array_dtype(gh), NV_DTYPE_FLOAT16);
  uint16_t got[3];
  cr_assert_eq(nv_array_read(gh, got, sizeof got), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 3; i++) cr_assert_eq(got[i], 0x3f80);
  nv_vec_free(g);
  nv_release(h);
  /* A float32 array viewed as int32 or as pairs of float16 carries no gradient. */
  float v[2] = {1.5f, -2.0f};
  nv_array *x = nv_array_from_data(v, (int[]){2}, 1, NV_DTYPE_FLOAT32);
  op_fn cut[2] = {f_view_f32_i32, f_view_f32_f16};
  for (int k = 0; k < 2; k++) {
    g = nv_vec_new();
    vjp_ones(cut[k], 1, &x, g);
    float r[2];
    READ_F32(nv_vec_get(g, 0), r, 2);
    cr_assert(r[0] == 0.0f && r[1] == 0.0f, "case %d", k);
    nv_vec_free(g);
  }
  nv_release(x);
}

Test(transforms_elementwise, depends_gives_gradients_to_its_inputs_only) {
  double a[2] = {1.5, -2}, b[2] = {3, 4};
  nv_array *x[2] = {nv_array_from_data(a, (int[]){2}, 1, NV_DTYPE_FLOAT64),
                    nv_array_from_data(b, (int[]){2}, 1, NV_DTYPE_FLOAT64)};
  nv_vec *g = nv_vec_new();
  vjp_ones(f_depends, 2, x, g);
  double ga[2], gb[2];
  read_f64(nv_vec_get(g, 0), ga, 2);
  read_f64(nv_vec_get(g, 1), gb, 2);
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(ga[i], 2 * a[i]);
    cr_assert_eq(gb[i], 0.0);
  }
  nv_vec_free(g);
  nv_release(x[0]);
  nv_release(x[1]);
}

Test(transforms_elementwise, every_elementwise_primitive_has_rules) {
  nv__rules_register();
  for (int p = NV__PRIM_SIGN; p <= NV__PRIM_BLACKMAN; p++) {
    const nv__prim_rule *r = &nv__prim_rules[p];
    cr_assert(r->vjp && r->jvp && r->vmap, "%s lacks a rule", nv__prims[p].name);
  }
}

/* ---- Composed cases ---- */

/* Σ -[t·log p + (1-t)·log(1-p)] with p = 1/(1 + e^-z), written with where on the label. */
static nv_status sigmoid_xent(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *z = nv_vec_get(in, 0), *t = nv_vec_get(in, 1);
  nv_array *p = nv_reciprocal(nv_add_scalar(nv_exp(nv_negative(z)), 1.0));
  nv_array *l = nv_where(nv_greater_scalar(t, 0.5), nv_log(p), nv_log1p(nv_negative(p)));
  return push(out, nv_negative(nv_sum(l, NULL, 0, false)));
}

Test(transforms_elementwise, grad_of_sigmoid_cross_entropy) {
  unsigned st = test_seed() + 5;
  gc_seed(st);
  int shape[1] = {7};
  nv_array *z = random_array(shape, 1, D_ANY, &st);
  double zv[7], tv[7];
  read_f64(z, zv, 7);
  for (int i = 0; i < 7; i++) tv[i] = test_randf(&st) > 0 ? 1 : 0;
  nv_array *t = nv_array_from_data(tv, shape, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(sigmoid_xent, NULL, NULL), *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, z);
  nv_vec_push(in, t);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  double r[7];
  read_f64(nv_vec_get(out, 0), r, 7);
  for (int i = 0; i < 7; i++)
    cr_assert_float_eq(r[i], 1 / (1 + exp(-zv[i])) - tv[i], 1e-12, "element %d", i);
  char why[512];
  cr_assert(nv_gradcheck(f, in, 1e-6, 1e-6, why, sizeof why), "%s", why);
  /* Per-example gradients: vmap of grad over the batch. */
  nv_array *zb = random_array((int[]){3, 7}, 2, D_ANY, &st);
  nv_vec *bin = nv_vec_new();
  nv_vec_push(bin, zb);
  nv_vec_push(bin, t);
  cr_assert(nv_vmapcheck(g, bin, (int[]){0, NV_VMAP_NONE}, 1e-12, why, sizeof why), "%s", why);
  nv_vec_free(bin);
  nv_release(zb);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(z);
  nv_release(t);
}

static nv_status sum_tanh(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return push(out, nv_sum(nv_tanh(nv_vec_get(in, 0)), NULL, 0, false));
}

Test(transforms_elementwise, hessian_vector_product_through_tanh) {
  unsigned st = test_seed() + 6;
  int shape[1] = {6};
  nv_array *x = random_array(shape, 1, D_ANY, &st), *v = random_array(shape, 1, D_ANY, &st);
  nv_closure *f = nv_closure_new(sum_tanh, NULL, NULL), *g = nv_grad(f, NULL, 0);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *hv = nv_vec_new(), *o = nv_vec_new(),
         *hv2 = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(t, v);
  cr_assert_eq(nv_jvp(g, p, t, NULL, hv), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vjp(g, p, t, o, hv2), NV_OK, "%s", nv_last_error());
  double xs[6], vs[6], r[6], r2[6];
  read_f64(x, xs, 6);
  read_f64(v, vs, 6);
  read_f64(nv_vec_get(hv, 0), r, 6);
  read_f64(nv_vec_get(hv2, 0), r2, 6);
  for (int i = 0; i < 6; i++) {
    /* (tanh)'' = -2 tanh · sech². */
    double sech = 1 / cosh(xs[i]), want = -2 * tanh(xs[i]) * sech * sech * vs[i];
    cr_assert_float_eq(r[i], want, 1e-12, "jvp of grad, %d", i);
    cr_assert_float_eq(r2[i], want, 1e-12, "vjp of grad, %d", i);
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
}

/* Σ grad(Σ sin x) = Σ cos x: its gradient is -sin x (grad of grad through sin and cos). */
static nv_status sum_sin(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return push(out, nv_sum(nv_sin(nv_vec_get(in, 0)), NULL, 0, false));
}
static nv_status sum_of_grad(void *p, const nv_vec *in, nv_vec *out) {
  nv_vec *g = nv_vec_new();
  nv_status s = nv_closure_apply(p, in, g);
  if (s == NV_OK) s = push(out, nv_sum(nv_vec_get(g, 0), NULL, 0, false));
  nv_vec_free(g);
  return s;
}

Test(transforms_elementwise, grad_of_grad_through_sin) {
  double v[4] = {0.3, -1.2, 2.5, 0};
  nv_array *x = nv_array_from_data(v, (int[]){4}, 1, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(sum_sin, NULL, NULL), *g = nv_grad(f, NULL, 0);
  nv_closure *sg = nv_closure_new(sum_of_grad, g, NULL), *gg = nv_grad(sg, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  cr_assert_eq(nv_closure_apply(gg, in, out), NV_OK, "%s", nv_last_error());
  double r[4];
  read_f64(nv_vec_get(out, 0), r, 4);
  for (int i = 0; i < 4; i++) cr_assert_float_eq(r[i], -sin(v[i]), 1e-12);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(gg);
  nv_closure_release(sg);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(x);
}

/* ---- Errors ---- */

static nv_status sum_erf(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return push(out, nv_sum(nv_erf(nv_vec_get(in, 0)), NULL, 0, false));
}

Test(transforms_elementwise, errors_name_the_op_and_never_crash) {
  /* erf of complex64 fails in the traced function: grad reports it. */
  nv_array *z = nv_array_complex(1.0f, 2.0f);
  nv_closure *f = nv_closure_new(sum_erf, NULL, NULL), *g = nv_grad(f, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, z);
  cr_assert_neq(nv_closure_apply(g, in, out), NV_OK);
  cr_assert(strstr(nv_last_error(), "erf") && strstr(nv_last_error(), "complex64"), "%s",
            nv_last_error());
  cr_assert_eq(nv_vec_size(out), 0);
  /* A cotangent of the wrong shape through an element-wise op. */
  op_case c = {"tanh", f_tanh, 1, {1}, {{3}}, {0}};
  nv_closure *ft = nv_closure_new(case_call, &c, NULL);
  double xv[3] = {0.1, 0.2, 0.3}, cv[2] = {1, 1};
  nv_array *x = nv_array_from_data(xv, (int[]){3}, 1, NV_DTYPE_FLOAT64);
  nv_array *ct = nv_array_from_data(cv, (int[]){2}, 1, NV_DTYPE_FLOAT64);
  nv_vec *p = nv_vec_new(), *cts = nv_vec_new(), *o = nv_vec_new(), *gr = nv_vec_new();
  nv_vec_push(p, x);
  nv_vec_push(cts, ct);
  cr_assert_neq(nv_vjp(ft, p, cts, o, gr), NV_OK);
  cr_assert(strstr(nv_last_error(), "cotangent"), "%s", nv_last_error());
  /* vmap over an axis the inputs do not have. */
  nv_closure *v = nv_vmap(ft, (int[]){2}, 1, NULL, 0);
  nv_vec *vo = nv_vec_new();
  cr_assert_neq(nv_closure_apply(v, p, vo), NV_OK);
  cr_assert(strstr(nv_last_error(), "in_axes"), "%s", nv_last_error());
  nv_vec_free(vo);
  nv_closure_release(v);
  nv_vec_free(p);
  nv_vec_free(cts);
  nv_vec_free(o);
  nv_vec_free(gr);
  nv_release(x);
  nv_release(ct);
  nv_closure_release(ft);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(z);
}
