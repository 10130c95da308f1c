/* Rules of the fast family. scaled_dot_product_attention: float64 inputs run the composed
 * fallback, whose vjp and jvp are checked against finite differences; float32 inputs run the
 * fused primitive, whose rules (through the fallback in float32) must give the float64
 * fallback's vjp and jvp to float32 accuracy; vmap of the primitive against a loop over every
 * subset of mapped inputs (q, k, v, masks, sinks) at several axes. */
#include "transforms_cases.h"

#include "nuvec/fast.h"

#define F32 NV_DTYPE_FLOAT32
#define F64 NV_DTYPE_FLOAT64

/* Float64 in and out; `dt` is the dtype the attention runs in. */
static nv_array *sdpa_in(nv_array *const *x, nv_dtype dt, const char *mode, int mask,
                         int sinks) {
  nv_array *m = NULL, *s = NULL;
  if (mask >= 0) m = nv_array_dtype(x[mask]) == NV_DTYPE_BOOL ? x[mask] : nv_astype(x[mask], dt);
  if (sinks >= 0) s = nv_astype(x[sinks], dt);
  nv_array *r = nv_fast_scaled_dot_product_attention(nv_astype(x[0], dt), nv_astype(x[1], dt),
                                                     nv_astype(x[2], dt), 0.7f, mode, m, s);
  return nv_astype(r, F64);
}

TC_OP(f_plain64, sdpa_in(x, F64, NULL, -1, -1))
TC_OP(f_causal64, sdpa_in(x, F64, "causal", -1, -1))
TC_OP(f_add64, sdpa_in(x, F64, "array", 3, -1))
TC_OP(f_bool64, sdpa_in(x, F64, "array", 3, -1))
TC_OP(f_sinks64, sdpa_in(x, F64, NULL, -1, 3))
TC_OP(f_plain32, sdpa_in(x, F32, NULL, -1, -1))
TC_OP(f_causal32, sdpa_in(x, F32, "causal", -1, -1))
TC_OP(f_add32, sdpa_in(x, F32, "array", 3, -1))
TC_OP(f_bool32, sdpa_in(x, F32, "array", 3, -1))
TC_OP(f_sinks32, sdpa_in(x, F32, NULL, -1, 3))

#define F TC_FLOAT
#define M TC_MASK
/* q [1, 4, 3, 4], k/v [1, 2, 5, 4] (GQA 2), masks [3, 5] (broadcast), sinks [4]. */
#define QKV {4, 4, 4}, {{1, 4, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}}
#define QKVM {4, 4, 4, 2}, {{1, 4, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {3, 5}}

static const tc_case cases64[] = {
    {"plain", f_plain64, 3, QKV, {F, F, F}},
    {"causal", f_causal64, 3, {4, 4, 4}, {{1, 2, 3, 4}, {1, 1, 6, 4}, {1, 1, 6, 4}}, {F, F, F}},
    {"additive_mask", f_add64, 4, QKVM, {F, F, F, F}},
    {"bool_mask", f_bool64, 4, QKVM, {F, F, F, M}},
    {"sinks", f_sinks64, 4, {4, 4, 4, 1}, {{1, 4, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {4}},
     {F, F, F, F}},
};
static const tc_case cases32[] = {
    {"plain", f_plain32, 3, QKV, {F, F, F}},
    {"causal", f_causal32, 3, {4, 4, 4}, {{1, 2, 3, 4}, {1, 1, 6, 4}, {1, 1, 6, 4}}, {F, F, F}},
    {"additive_mask", f_add32, 4, QKVM, {F, F, F, F}},
    {"bool_mask", f_bool32, 4, QKVM, {F, F, F, M}},
    {"sinks", f_sinks32, 4, {4, 4, 4, 1}, {{1, 4, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}, {4}},
     {F, F, F, F}},
};
#define NCASES (sizeof cases64 / sizeof *cases64)

Test(transforms_fast, sdpa_fallback_vjp_jvp_match_finite_differences) {
  unsigned st = test_seed();
  for (size_t k = 0; k < NCASES; k++) tc_gradcheck(&cases64[k], &st, 1e-6);
}

/* |a - b| <= tol (1 + |b|) elementwise, for arrays of one shape. */
static void assert_near(nv_array *a, nv_array *b, double tol, const char *what, const char *name) {
  cr_assert_eq(nv_array_size(a), nv_array_size(b), "%s %s: sizes differ", name, what);
  double *x = gc_read(a), *y = gc_read(b);
  for (int64_t i = 0; i < nv_array_size(a); i++)
    cr_assert(gc_close(x[i], y[i], tol), "%s %s[%lld]: %g vs %g", name, what, (long long)i, x[i],
              y[i]);
  free(x);
  free(y);
}

Test(transforms_fast, sdpa_primitive_rules_match_the_float64_fallback) {
  unsigned st = test_seed() + 7;
  for (size_t k = 0; k < NCASES; k++) {
    const tc_case *c = &cases32[k];
    tc_bound b32 = {c, {NULL}}, b64 = {&cases64[k], {NULL}};
    nv_vec *p = nv_vec_new(), *cot = nv_vec_new(), *tan = nv_vec_new();
    for (int i = 0; i < c->nin; i++) {
      nv_array *a = tc_input(c->kind[i], 0, 0, c->shape[i], c->nd[i], &st);
      if (c->kind[i] != TC_FLOAT) {
        b32.fixed[i] = a;
        b64.fixed[i] = nv_retain(a);
        continue;
      }
      nv_vec_push(p, a);
      nv_array *t = tc_input(TC_FLOAT, 0, 0, c->shape[i], c->nd[i], &st);
      nv_vec_push(tan, t);
      nv_release(t);
      nv_release(a);
    }
    int oshape[4] = {c->shape[0][0], c->shape[0][1], c->shape[0][2], c->shape[2][3]};
    nv_array *ct = tc_input(TC_FLOAT, 0, 0, oshape, 4, &st);
    nv_vec_push(cot, ct);
    nv_release(ct);
    nv_closure *f32 = nv_closure_new(tc_call, &b32, NULL), *f64 = nv_closure_new(tc_call, &b64, NULL);
    nv_vec *o32 = nv_vec_new(), *o64 = nv_vec_new(), *g32 = nv_vec_new(), *g64 = nv_vec_new();
    cr_assert_eq(nv_vjp(f32, p, cot, o32, g32), NV_OK, "%s: %s", c->name, nv_last_error());
    cr_assert_eq(nv_vjp(f64, p, cot, o64, g64), NV_OK, "%s: %s", c->name, nv_last_error());
    assert_near(nv_vec_get(o32, 0), nv_vec_get(o64, 0), 1e-5, "output", c->name);
    for (size_t i = 0; i < nv_vec_size(p); i++)
      assert_near(nv_vec_get(g32, i), nv_vec_get(g64, i), 1e-4, "vjp", c->name);
    nv_vec *j32 = nv_vec_new(), *j64 = nv_vec_new();
    cr_assert_eq(nv_jvp(f32, p, tan, NULL, j32), NV_OK, "%s: %s", c->name, nv_last_error());
    cr_assert_eq(nv_jvp(f64, p, tan, NULL, j64), NV_OK, "%s: %s", c->name, nv_last_error());
    assert_near(nv_vec_get(j32, 0), nv_vec_get(j64, 0), 1e-4, "jvp", c->name);
    nv_vec *vs[] = {p, cot, tan, o32, o64, g32, g64, j32, j64};
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) nv_vec_free(vs[i]);
    nv_closure_release(f32);
    nv_closure_release(f64);
    for (int i = 0; i < c->nin; i++) {
      nv_release(b32.fixed[i]);
      nv_release(b64.fixed[i]);
    }
  }
}

Test(transforms_fast, sdpa_primitive_under_vmap_matches_a_loop) {
  unsigned st = test_seed() + 1;
  for (size_t k = 0; k < NCASES; k++) tc_vmapcheck(&cases32[k], &st, 1e-5);
}
