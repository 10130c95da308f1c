/* Rules of the linalg family: matmul (batched, broadcast batch axes, 1-D operands), addmm
 * (alpha, beta, and their zero cases), vecdot (and complex conjugation), and the products built
 * on them, against finite differences and under vmap against loops; then the classics on a
 * 2-layer MLP: per-example gradients by vmap(grad), a Hessian-vector product, checkpointing. */
#include <complex.h>

#include "transforms_cases.h"

TC_OP(f_matmul, nv_matmul(x[0], x[1]))
TC_OP(f_addmm, nv_addmm(x[0], x[1], x[2], 0.5, 2.0))
TC_OP(f_addmm_alpha0, nv_addmm(x[0], x[1], x[2], 0.0, -1.5))
TC_OP(f_addmm_beta0, nv_addmm(x[0], x[1], x[2], 1.25, 0.0))
TC_OP(f_vecdot, nv_vecdot(x[0], x[1], -1))
TC_OP(f_vecdot0, nv_vecdot(x[0], x[1], 0))
TC_OP(f_tensordot, nv_tensordot(x[0], x[1], 2))
TC_OP(f_tensordot_axes, nv_tensordot_axes(x[0], x[1], (int[]){0, 2}, (int[]){1, 0}, 2))
TC_OP(f_inner, nv_inner(x[0], x[1]))
TC_OP(f_outer, nv_outer(x[0], x[1]))
TC_OP(f_kron, nv_kron(x[0], x[1]))

#define F TC_FLOAT

static const tc_case cases[] = {
    {"matmul", f_matmul, 2, {2, 2}, {{3, 4}, {4, 2}}, {F, F}},
    {"matmul_broadcast_batch", f_matmul, 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, {F, F}},
    {"matmul_vector_matrix", f_matmul, 2, {1, 2}, {{4}, {4, 3}}, {F, F}},
    {"matmul_matrix_vector", f_matmul, 2, {2, 1}, {{3, 4}, {4}}, {F, F}},
    {"matmul_vector_vector", f_matmul, 2, {1, 1}, {{4}, {4}}, {F, F}},
    {"matmul_vector_batch", f_matmul, 2, {1, 3}, {{4}, {2, 4, 3}}, {F, F}},
    {"matmul_empty_k", f_matmul, 2, {2, 2}, {{2, 0}, {0, 3}}, {F, F}},
    {"matmul_empty_m", f_matmul, 2, {3, 2}, {{2, 0, 4}, {4, 2}}, {F, F}},
    {"vecdot_empty", f_vecdot, 2, {2, 2}, {{3, 0}, {1, 0}}, {F, F}},
    {"addmm", f_addmm, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}, {F, F, F}},
    {"addmm_broadcast_c", f_addmm, 3, {1, 3, 2}, {{2}, {2, 3, 4}, {4, 2}}, {F, F, F}},
    {"addmm_alpha_0", f_addmm_alpha0, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}, {F, F, F}},
    {"addmm_beta_0", f_addmm_beta0, 3, {0, 2, 2}, {{0}, {3, 4}, {4, 2}}, {F, F, F}},
    {"vecdot", f_vecdot, 2, {2, 2}, {{3, 4}, {3, 4}}, {F, F}},
    {"vecdot_axis0_broadcast", f_vecdot0, 2, {2, 2}, {{4, 3}, {4, 1}}, {F, F}},
    {"vecdot_broadcast_batch", f_vecdot, 2, {3, 2}, {{2, 1, 4}, {3, 4}}, {F, F}},
    {"tensordot", f_tensordot, 2, {3, 3}, {{2, 3, 4}, {3, 4, 2}}, {F, F}},
    {"tensordot_axes", f_tensordot_axes, 2, {3, 2}, {{3, 2, 4}, {4, 3}}, {F, F}},
    {"inner", f_inner, 2, {2, 3}, {{2, 4}, {3, 1, 4}}, {F, F}},
    {"outer", f_outer, 2, {1, 2}, {{3}, {2, 2}}, {F, F}},
    {"kron", f_kron, 2, {2, 2}, {{2, 3}, {2, 2}}, {F, F}},
};
#define NCASES (sizeof cases / sizeof *cases)

Test(transforms_linalg, every_op_vjp_jvp_match_finite_differences) {
  unsigned st = test_seed();
  for (size_t k = 0; k < NCASES; k++) tc_gradcheck(&cases[k], &st, 1e-6);
}

Test(transforms_linalg, every_op_under_vmap_matches_a_loop) {
  unsigned st = test_seed() + 1;
  /* BLAS may order a product's sums differently for a batched call. */
  for (size_t k = 0; k < NCASES; k++) tc_vmapcheck(&cases[k], &st, 1e-13);
}

Test(transforms_linalg, vecdot_conjugates_as_mlx_and_numpy) {
  /* f = Σ conj(a) b with complex64 a, b: vjp (MLX's convention, cot · conj(∂f)) gives a
   * conj(cot) b and b cot a, as MLX computes it. */
  nv_complex64 av[2] = {{1, 2}, {-0.5f, 1}}, bv[2] = {{3, -1}, {2, 0.25f}};
  float complex ca[2], cb[2];
  for (int i = 0; i < 2; i++) {
    ca[i] = av[i].re + av[i].im * I;
    cb[i] = bv[i].re + bv[i].im * I;
  }
  nv_array *a = nv_array_from_data(av, (int[]){2}, 1, NV_DTYPE_COMPLEX64);
  nv_array *b = nv_array_from_data(bv, (int[]){2}, 1, NV_DTYPE_COMPLEX64);
  nv_array *cot = nv_array_complex(0.5f, -2);
  float complex cc = 0.5f - 2 * I;
  static const tc_case c = {"vecdot", f_vecdot, 2};
  tc_bound bd = {&c, {NULL}};
  nv_closure *f = nv_closure_new(tc_call, &bd, NULL);
  nv_vec *p = nv_vec_new(), *cv = nv_vec_new(), *o = nv_vec_new(), *g = nv_vec_new();
  nv_vec_push(p, a);
  nv_vec_push(p, b);
  nv_vec_push(cv, cot);
  cr_assert_eq(nv_vjp(f, p, cv, o, g), NV_OK, "%s", nv_last_error());
  nv_complex64 ga[2], gb[2], y;
  cr_assert_eq(nv_array_item_complex(nv_vec_get(o, 0), &y), NV_OK);
  float complex want_y = conjf(ca[0]) * cb[0] + conjf(ca[1]) * cb[1];
  cr_assert_float_eq(y.re, crealf(want_y), 1e-5);
  cr_assert_float_eq(y.im, cimagf(want_y), 1e-5);
  cr_assert_eq(nv_array_read(nv_vec_get(g, 0), ga, sizeof ga), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_read(nv_vec_get(g, 1), gb, sizeof gb), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 2; i++) {
    float complex wa = conjf(cc) * cb[i], wb = cc * ca[i];
    cr_assert_float_eq(ga[i].re, crealf(wa), 1e-5);
    cr_assert_float_eq(ga[i].im, cimagf(wa), 1e-5);
    cr_assert_float_eq(gb[i].re, crealf(wb), 1e-5);
    cr_assert_float_eq(gb[i].im, cimagf(wb), 1e-5);
  }
  nv_vec_free(p);
  nv_vec_free(cv);
  nv_vec_free(o);
  nv_vec_free(g);
  nv_closure_release(f);
  nv_release(a);
  nv_release(b);
  nv_release(cot);
}

/* ---- A 2-layer MLP ---- */

/* tanh(z) = 1 - 2 / (exp(2z) + 1), from ops whose rules are on main. */
static nv_array *act(const nv_array *z) {
  nv_array *e = nv_exp(nv_multiply_scalar(z, 2.0));
  nv_array *q = nv_divide(nv_full_like(e, 2.0), nv_add_scalar(e, 1.0));
  return nv_subtract(nv_full_like(q, 1.0), q);
}

/* loss(w1, b1, w2, b2, x, y) = Σ (act(x @ w1 + b1) @ w2 + b2 - y)², for one example (x (D),
 * y ()) or a batch (x (N, D), y (N)). */
static nv_status mlp_loss(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *w1 = nv_vec_get(in, 0), *b1 = nv_vec_get(in, 1), *w2 = nv_vec_get(in, 2),
           *b2 = nv_vec_get(in, 3), *x = nv_vec_get(in, 4), *y = nv_vec_get(in, 5);
  nv_array *h = act(nv_add(nv_matmul(x, w1), b1));
  nv_array *e = nv_subtract(nv_add(nv_matmul(h, w2), b2), y);
  return nv_vec_push(out, nv_sum(nv_multiply(e, e), NULL, 0, false));
}

enum { D = 5, H = 4, N = 6 };

typedef struct mlp {
  double w1[D * H], b1[H], w2[H], b2, x[N * D], y[N];
} mlp;

static void mlp_init(mlp *m, unsigned *st) {
  for (int i = 0; i < D * H; i++) m->w1[i] = tc_rand(st);
  for (int i = 0; i < H; i++) m->b1[i] = tc_rand(st) * 0.5, m->w2[i] = tc_rand(st);
  m->b2 = tc_rand(st);
  for (int i = 0; i < N * D; i++) m->x[i] = tc_rand(st);
  for (int i = 0; i < N; i++) m->y[i] = tc_rand(st);
}

/* The MLP's inputs; a batch of N (x, y) or, with `one` >= 0, example `one`. */
static nv_vec *mlp_inputs(const mlp *m, int one) {
  nv_vec *v = nv_vec_new();
  nv_array *a[6] = {
      nv_array_from_data(m->w1, (int[]){D, H}, 2, NV_DTYPE_FLOAT64),
      nv_array_from_data(m->b1, (int[]){H}, 1, NV_DTYPE_FLOAT64),
      nv_array_from_data(m->w2, (int[]){H}, 1, NV_DTYPE_FLOAT64),
      nv_array_scalar(m->b2, NV_DTYPE_FLOAT64),
      one < 0 ? nv_array_from_data(m->x, (int[]){N, D}, 2, NV_DTYPE_FLOAT64)
              : nv_array_from_data(m->x + one * D, (int[]){D}, 1, NV_DTYPE_FLOAT64),
      one < 0 ? nv_array_from_data(m->y, (int[]){N}, 1, NV_DTYPE_FLOAT64)
              : nv_array_scalar(m->y[one], NV_DTYPE_FLOAT64),
  };
  for (int i = 0; i < 6; i++) {
    nv_vec_push(v, a[i]);
    nv_release(a[i]);
  }
  return v;
}

/* The gradient of one example's loss by hand: dw1, db1, dw2, db2 concatenated. */
static void mlp_backprop(const mlp *m, int n, double *g) {
  double z[H], h[H], e = m->b2 - m->y[n];
  for (int j = 0; j < H; j++) {
    z[j] = m->b1[j];
    for (int i = 0; i < D; i++) z[j] += m->x[n * D + i] * m->w1[i * H + j];
    h[j] = tanh(z[j]);
    e += h[j] * m->w2[j];
  }
  double *dw1 = g, *db1 = g + D * H, *dw2 = db1 + H, *db2 = dw2 + H;
  *db2 = 2 * e;
  for (int j = 0; j < H; j++) {
    dw2[j] = 2 * e * h[j];
    db1[j] = 2 * e * m->w2[j] * (1 - h[j] * h[j]);
    for (int i = 0; i < D; i++) dw1[i * H + j] = db1[j] * m->x[n * D + i];
  }
}

Test(transforms_linalg, per_example_mlp_gradients_by_vmap_of_grad) {
  unsigned st = test_seed() + 3;
  mlp m;
  mlp_init(&m, &st);
  nv_closure *f = nv_closure_new(mlp_loss, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1, 2, 3}, 4);
  int axes[6] = {NV_VMAP_NONE, NV_VMAP_NONE, NV_VMAP_NONE, NV_VMAP_NONE, 0, 0};
  nv_vec *in = mlp_inputs(&m, -1);
  char why[512];
  cr_assert(nv_vmapcheck(g, in, axes, 1e-12, why, sizeof why), "%s", why);
  nv_closure *v = nv_vmap(g, axes, 6, NULL, 0);
  nv_vec *out = nv_vec_new();
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  double got[4][N * D * H];
  int sizes[4] = {D * H, H, H, 1};
  for (int k = 0; k < 4; k++) {
    nv_array *o = nv_vec_get(out, (size_t)k);
    cr_assert_eq(nv_array_dim(o, 0), N, "the per-example axis is first");
    cr_assert_eq(nv_array_read(o, got[k], (size_t)(N * sizes[k]) * sizeof(double)), NV_OK);
  }
  for (int n = 0; n < N; n++) {
    double want[D * H + 2 * H + 1];
    mlp_backprop(&m, n, want);
    for (int k = 0, off = 0; k < 4; off += sizes[k], k++)
      for (int i = 0; i < sizes[k]; i++)
        cr_assert_float_eq(got[k][n * sizes[k] + i], want[off + i], 1e-10,
                           "example %d, parameter %d, element %d", n, k, i);
  }
  nv_vec_free(out);
  nv_vec_free(in);
  nv_closure_release(v);
  nv_closure_release(g);
  nv_closure_release(f);
}

/* The gradient with respect to w1 and w2 (the others fixed), for Hessian-vector products. */
static nv_status mlp_grad_w(void *p, const nv_vec *in, nv_vec *out) {
  const nv_vec *rest = p;
  nv_vec *all = nv_vec_new();
  nv_vec_push(all, nv_vec_get(in, 0));
  nv_vec_push(all, nv_vec_get(rest, 1));
  nv_vec_push(all, nv_vec_get(in, 1));
  for (size_t i = 3; i < 6; i++) nv_vec_push(all, nv_vec_get(rest, i));
  nv_closure *f = nv_closure_new(mlp_loss, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 2}, 2);
  nv_status s = nv_closure_apply(g, all, out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_vec_free(all);
  return s;
}

Test(transforms_linalg, mlp_hessian_vector_product) {
  unsigned st = test_seed() + 5;
  mlp m;
  mlp_init(&m, &st);
  nv_vec *rest = mlp_inputs(&m, -1);
  nv_closure *g = nv_closure_new(mlp_grad_w, rest, NULL);
  nv_vec *p = nv_vec_new(), *t = nv_vec_new(), *hv = nv_vec_new(), *o = nv_vec_new();
  nv_vec_push(p, nv_vec_get(rest, 0));
  nv_vec_push(p, nv_vec_get(rest, 2));
  double vw1[D * H], vw2[H];
  for (int i = 0; i < D * H; i++) vw1[i] = tc_rand(&st);
  for (int i = 0; i < H; i++) vw2[i] = tc_rand(&st);
  nv_array *t1 = nv_array_from_data(vw1, (int[]){D, H}, 2, NV_DTYPE_FLOAT64);
  nv_array *t2 = nv_array_from_data(vw2, (int[]){H}, 1, NV_DTYPE_FLOAT64);
  nv_vec_push(t, t1);
  nv_vec_push(t, t2);
  /* H v as jvp of the gradient, against central differences of the gradient. */
  cr_assert_eq(nv_jvp(g, p, t, o, hv), NV_OK, "%s", nv_last_error());
  const double h = 1e-5;
  double w1p[D * H], w1m[D * H], w2p[H], w2m[H];
  for (int i = 0; i < D * H; i++) w1p[i] = m.w1[i] + h * vw1[i], w1m[i] = m.w1[i] - h * vw1[i];
  for (int i = 0; i < H; i++) w2p[i] = m.w2[i] + h * vw2[i], w2m[i] = m.w2[i] - h * vw2[i];
  double gp[2][D * H], gm[2][D * H], hvj[2][D * H], hvv[2][D * H];
  int sizes[2] = {D * H, H};
  for (int side = 0; side < 2; side++) {
    nv_vec *q = nv_vec_new(), *r = nv_vec_new();
    nv_array *a = nv_array_from_data(side ? w1m : w1p, (int[]){D, H}, 2, NV_DTYPE_FLOAT64);
    nv_array *b = nv_array_from_data(side ? w2m : w2p, (int[]){H}, 1, NV_DTYPE_FLOAT64);
    nv_vec_push(q, a);
    nv_vec_push(q, b);
    cr_assert_eq(nv_closure_apply(g, q, r), NV_OK, "%s", nv_last_error());
    for (int k = 0; k < 2; k++)
      nv_array_read(nv_vec_get(r, (size_t)k), side ? gm[k] : gp[k], (size_t)sizes[k] * sizeof(double));
    nv_release(a);
    nv_release(b);
    nv_vec_free(q);
    nv_vec_free(r);
  }
  /* The same product as vjp of the gradient (the Hessian is symmetric). */
  nv_vec *hv2 = nv_vec_new(), *o2 = nv_vec_new();
  cr_assert_eq(nv_vjp(g, p, t, o2, hv2), NV_OK, "%s", nv_last_error());
  for (int k = 0; k < 2; k++) {
    nv_array_read(nv_vec_get(hv, (size_t)k), hvj[k], (size_t)sizes[k] * sizeof(double));
    nv_array_read(nv_vec_get(hv2, (size_t)k), hvv[k], (size_t)sizes[k] * sizeof(double));
    for (int i = 0; i < sizes[k]; i++) {
      double fd = (gp[k][i] - gm[k][i]) / (2 * h);
      cr_assert(fabs(hvj[k][i] - fd) <= 1e-6 * (1 + fabs(fd)), "jvp: %g vs %g", hvj[k][i], fd);
      cr_assert_float_eq(hvv[k][i], hvj[k][i], 1e-10 * (1 + fabs(fd)));
    }
  }
  nv_vec_free(hv2);
  nv_vec_free(o2);
  nv_release(t1);
  nv_release(t2);
  nv_vec_free(p);
  nv_vec_free(t);
  nv_vec_free(hv);
  nv_vec_free(o);
  nv_closure_release(g);
  nv_vec_free(rest);
}

Test(transforms_linalg, checkpointed_mlp_equals_plain_gradients) {
  unsigned st = test_seed() + 7;
  mlp m;
  mlp_init(&m, &st);
  nv_closure *f = nv_closure_new(mlp_loss, NULL, NULL);
  nv_closure *ck = nv_checkpoint(f);
  int argnums[4] = {0, 1, 2, 3};
  nv_closure *g1 = nv_grad(f, argnums, 4), *g2 = nv_grad(ck, argnums, 4);
  nv_vec *in = mlp_inputs(&m, -1), *o1 = nv_vec_new(), *o2 = nv_vec_new();
  cr_assert_eq(nv_closure_apply(g1, in, o1), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_closure_apply(g2, in, o2), NV_OK, "%s", nv_last_error());
  for (size_t k = 0; k < 4; k++) {
    double *a = gc_read(nv_vec_get(o1, k)), *b = gc_read(nv_vec_get(o2, k));
    cr_assert(a && b);
    for (int64_t i = 0; i < nv_array_size(nv_vec_get(o1, k)); i++)
      cr_assert_float_eq(a[i], b[i], 1e-12, "parameter %zu, element %lld", k, (long long)i);
    free(a);
    free(b);
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
}

/* ---- Narrow float dtypes keep their dtype and agree with float64 ---- */

/* Σ a @ b + Σ vecdot(a, a) + Σ scatter_max(a, [0, 2], b[:2] + 3) + Σ take(b, [1, 1]). */
static nv_status mixed_loss(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *a = nv_vec_get(in, 0), *b = nv_vec_get(in, 1);
  int32_t iv[2] = {0, 2}, jv[2] = {1, 1};
  nv_array *ix = nv_array_from_data(iv, (int[]){2}, 1, NV_DTYPE_INT32);
  nv_array *jx = nv_array_from_data(jv, (int[]){2}, 1, NV_DTYPE_INT32);
  /* The updates exceed a (values in [-1, 1)) by far, so rounding makes no ties. */
  nv_array *bs = nv_reshape(nv_slice(b, (int[]){0, 0}, (int[]){2, 3}, NULL, 2), (int[]){2, 1, 3}, 3);
  bs = nv_add_scalar(bs, 3.0);
  nv_array *t = nv_add(nv_sum(nv_matmul(a, b), NULL, 0, false),
                       nv_sum(nv_vecdot(a, a, -1), NULL, 0, false));
  t = nv_add(t, nv_sum(nv_scatter_max(a, (const nv_array *const[]){ix}, 1, bs, (int[]){0}), NULL, 0, false));
  t = nv_add(t, nv_sum(nv_take(b, jx, 0), NULL, 0, false));
  return nv_vec_push(out, t);
}

Test(transforms_linalg, narrow_float_gradients_keep_their_dtype) {
  unsigned st = test_seed() + 11;
  int shape[2] = {3, 3};
  nv_array *a64 = tc_input(TC_FLOAT, 0, 0, shape, 2, &st), *b64 = tc_input(TC_FLOAT, 0, 0, shape, 2, &st);
  nv_closure *f = nv_closure_new(mixed_loss, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *want = nv_vec_new();
  nv_vec_push(in, a64);
  nv_vec_push(in, b64);
  cr_assert_eq(nv_closure_apply(g, in, want), NV_OK, "%s", nv_last_error());
  nv_dtype dts[3] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};
  double tol[3] = {1e-5, 2e-2, 1e-1};
  for (int d = 0; d < 3; d++) {
    nv_vec *in2 = nv_vec_new(), *got = nv_vec_new();
    nv_array *a = nv_astype(a64, dts[d]), *b = nv_astype(b64, dts[d]);
    nv_vec_push(in2, a);
    nv_vec_push(in2, b);
    cr_assert_eq(nv_closure_apply(g, in2, got), NV_OK, "%s", nv_last_error());
    for (size_t k = 0; k < 2; k++) {
      cr_assert_eq(nv_array_dtype(nv_vec_get(got, k)), dts[d]);
      double *x = gc_read(nv_vec_get(got, k)), *w = gc_read(nv_vec_get(want, k));
      for (int i = 0; i < 9; i++)
        cr_assert(fabs(x[i] - w[i]) <= tol[d] * (1 + fabs(w[i])), "dtype %d, grad %zu[%d]: %g vs %g",
                  d, k, i, x[i], w[i]);
      free(x);
      free(w);
    }
    nv_release(a);
    nv_release(b);
    nv_vec_free(in2);
    nv_vec_free(got);
  }
  nv_vec_free(in);
  nv_vec_free(want);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(a64);
  nv_release(b64);
}
