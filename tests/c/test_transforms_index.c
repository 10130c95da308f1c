/* Rules of the index family: every differentiable op's vjp and jvp against finite differences
 * (float64, random inputs, contiguous and strided; random valid indices with duplicates), every
 * op under vmap against a loop with each subset of its inputs (arrays, indices, masks, starts)
 * mapped at axes 0, 1 and -1; the decided rules (scatter duplicates, max/min ties, products
 * with zeros); errors. */
#include "transforms_cases.h"

/* ---- The ops ---- */

static const int ax0[1] = {0}, ax1[1] = {1}, ax01[2] = {0, 1}, ax02[2] = {0, 2};

TC_OP(f_take, nv_take(x[0], x[1], 1))
TC_OP(f_take_2d, nv_take(x[0], x[1], 0))
TC_OP(f_take_last, nv_take(x[0], x[1], -1))
TC_OP(f_take_flat, nv_take_flat(x[0], x[1]))
TC_OP(f_take_along, nv_take_along_axis(x[0], x[1], 1))
TC_OP(f_take_along0, nv_take_along_axis(x[0], x[1], -3))
TC_OP(f_put_along, nv_put_along_axis(x[0], x[1], x[2], 1))
TC_OP(f_put_along0, nv_put_along_axis(x[0], x[1], x[2], 0))
TC_OP(f_gather, nv_gather(x[0], (const nv_array *const[]){x[1], x[2]}, 2, ax02, (int[]){1, 3, 1}, 3))
TC_OP(f_gather_slice, nv_gather(x[0], (const nv_array *const[]){x[1]}, 1, ax0, (int[]){2, 3}, 2))
TC_OP(f_gather_none, nv_gather(x[0], NULL, 0, NULL, (int[]){2, 2}, 2))
TC_OP(f_scatter, nv_scatter(x[0], (const nv_array *const[]){x[1]}, 1, x[2], ax0))
TC_OP(f_scatter_add, nv_scatter_add(x[0], (const nv_array *const[]){x[1]}, 1, x[2], ax0))
TC_OP(f_scatter_prod, nv_scatter_prod(x[0], (const nv_array *const[]){x[1]}, 1, x[2], ax0))
TC_OP(f_scatter_max, nv_scatter_max(x[0], (const nv_array *const[]){x[1]}, 1, x[2], ax0))
TC_OP(f_scatter_min, nv_scatter_min(x[0], (const nv_array *const[]){x[1]}, 1, x[2], ax0))
TC_OP(f_scatter2, nv_scatter(x[0], (const nv_array *const[]){x[1], x[2]}, 2, x[3], ax01))
TC_OP(f_scatter_add2, nv_scatter_add(x[0], (const nv_array *const[]){x[1], x[2]}, 2, x[3], ax01))
TC_OP(f_masked, nv_masked_scatter(x[0], x[1], x[2]))
TC_OP(f_slice_dyn, nv_slice_dynamic(x[0], x[1], ax1, 1, (int[]){5, 2}, 2))
TC_OP(f_slice_dyn2, nv_slice_dynamic(x[0], x[1], (int[]){-1, 0}, 2, (int[]){2, 3}, 2))
TC_OP(f_update_dyn, nv_slice_update_dynamic(x[0], x[1], x[2], (int[]){0, 1}, 2))
TC_OP(f_update_dyn_row, nv_slice_update_dynamic(x[0], x[1], x[2], ax1, 1))
#define REGION (int[]){0, 0}, (int[]){4, 4}, (int[]){2, 1}, 2
#define REGION_REV (int[]){4, 3}, (int[]){-6, 0}, (int[]){-2, -2}, 2
TC_OP(f_upd_add, nv_slice_update_add(x[0], x[1], REGION))
TC_OP(f_upd_prod, nv_slice_update_prod(x[0], x[1], REGION))
TC_OP(f_upd_max, nv_slice_update_max(x[0], x[1], REGION))
TC_OP(f_upd_min, nv_slice_update_min(x[0], x[1], REGION_REV))
TC_OP(f_upd_prod_rev, nv_slice_update_prod(x[0], x[1], REGION_REV))
TC_OP(f_diagonal, nv_diagonal(x[0], 1, 0, 2))
TC_OP(f_diagonal_neg, nv_diagonal(x[0], -1, 2, 1))
TC_OP(f_diag_make, nv_diag(x[0], 1))
TC_OP(f_diag_make_neg, nv_diag(x[0], -2))
TC_OP(f_diag_take, nv_diag(x[0], -1))
TC_OP(f_concat, nv_concatenate((const nv_array *const[]){x[0], x[1], x[2]}, 3, 1))
TC_OP(f_concat_flat, nv_concatenate_flat((const nv_array *const[]){x[0], x[1]}, 2))
TC_OP(f_stack, nv_stack((const nv_array *const[]){x[0], x[1]}, 2, -1))
TC_OP(f_pad_const, nv_pad(x[0], (int[]){1, 0}, (int[]){2, 3}, 2, NV_PAD_CONSTANT, x[1]))
TC_OP(f_pad_zero, nv_pad(x[0], (int[]){2}, (int[]){1}, 1, NV_PAD_CONSTANT, NULL))
TC_OP(f_pad_edge, nv_pad(x[0], (int[]){2, 0}, (int[]){1, 3}, 2, NV_PAD_EDGE, NULL))
TC_OP(f_pad_reflect, nv_pad(x[0], (int[]){4, 1}, (int[]){5, 2}, 2, NV_PAD_REFLECT, NULL))
TC_OP(f_pad_symmetric, nv_pad(x[0], (int[]){3, 2}, (int[]){4, 0}, 2, NV_PAD_SYMMETRIC, NULL))
TC_OP(f_pad_unused, nv_pad(x[0], (int[]){1}, (int[]){1}, 1, NV_PAD_EDGE, x[1]))
TC_OP(f_diff, nv_diff(x[0], 2, 0, NULL, NULL))
TC_OP(f_diff_edges, nv_diff(x[0], 1, -1, x[1], x[2]))
TC_OP(f_flip, nv_flip(x[0], (int[]){0, 2}, 2))
TC_OP(f_repeat, nv_repeat(x[0], 3, 1))
TC_OP(f_repeat_flat, nv_repeat_flat(x[0], 2))
TC_OP(f_tile, nv_tile(x[0], (int[]){2, 1, 3}, 3))
TC_OP(f_roll, nv_roll(x[0], (int[]){1, -2}, 2, (int[]){0, 1}, 2))
TC_OP(f_roll_flat, nv_roll(x[0], (int[]){5}, 1, NULL, 0))
TC_OP(f_swapaxes, nv_swapaxes(x[0], 0, 2))
TC_OP(f_moveaxis, nv_moveaxis(x[0], 0, -1))
TC_OP(f_flatten, nv_flatten(x[0], 1, 2))
TC_OP(f_unflatten, nv_unflatten(x[0], 1, (int[]){2, -1}, 2))
TC_OP(f_atleast_3d, nv_atleast_3d(x[0]))

static nv_status f_split(nv_array *const *x, nv_vec *out) {
  return nv_split_at(x[0], (int[]){1, 3}, 2, 1, out);
}
static nv_status f_unstack(nv_array *const *x, nv_vec *out) { return nv_unstack(x[0], 0, out); }
static nv_status f_broadcast_arrays(nv_array *const *x, nv_vec *out) {
  return nv_broadcast_arrays((const nv_array *const[]){x[0], x[1]}, 2, out);
}

#define F TC_FLOAT
#define I TC_INDEX
#define M TC_MASK

/* name, fn, nin, ndims, shapes, kinds, index lo, index hi. */
static const tc_case cases[] = {
    {"take", f_take, 2, {2, 1}, {{3, 4}, {6}}, {F, I}, {0, -4}, {0, 4}},
    {"take_2d_indices", f_take_2d, 2, {2, 2}, {{4, 3}, {2, 3}}, {F, I}, {0, -4}, {0, 4}},
    {"take_0d_index", f_take_last, 2, {3, 0}, {{2, 3, 4}, {0}}, {F, I}, {0, -4}, {0, 4}},
    {"take_flat", f_take_flat, 2, {2, 2}, {{2, 3}, {2, 4}}, {F, I}, {0, -6}, {0, 6}},
    {"take_along_axis", f_take_along, 2, {2, 2}, {{3, 4}, {3, 5}}, {F, I}, {0, -4}, {0, 4}},
    {"take_along_axis_bcast", f_take_along0, 2, {3, 3}, {{4, 1, 3}, {5, 2, 1}}, {F, I}, {0, -4}, {0, 4}},
    {"put_along_axis", f_put_along, 3, {2, 2, 2}, {{3, 4}, {3, 3}, {3, 3}}, {F, I, F}, {0, -4}, {0, 4}},
    {"put_along_axis_bcast", f_put_along0, 3, {2, 2, 2}, {{3, 4}, {4, 1}, {4, 4}}, {F, I, F}, {0, -3}, {0, 3}},
    {"gather", f_gather, 3, {3, 1, 1}, {{4, 3, 2}, {5}, {5}}, {F, I, I}, {0, -4, -2}, {0, 4, 2}},
    {"gather_slices", f_gather_slice, 2, {2, 2}, {{5, 3}, {2, 2}}, {F, I}, {0, 0}, {0, 4}},
    {"gather_no_index", f_gather_none, 1, {2}, {{3, 4}}, {F}, {0}, {0}},
    {"scatter", f_scatter, 3, {2, 1, 3}, {{5, 3}, {6}, {6, 1, 3}}, {F, I, F}, {0, -5}, {0, 5}},
    {"scatter_add", f_scatter_add, 3, {2, 1, 3}, {{5, 3}, {6}, {6, 1, 3}}, {F, I, F}, {0, -5}, {0, 5}},
    {"scatter_prod", f_scatter_prod, 3, {2, 1, 3}, {{5, 3}, {6}, {6, 1, 2}}, {F, I, F}, {0, -5}, {0, 5}},
    {"scatter_max", f_scatter_max, 3, {2, 1, 3}, {{5, 3}, {6}, {6, 1, 3}}, {F, I, F}, {0, -5}, {0, 5}},
    {"scatter_min", f_scatter_min, 3, {2, 1, 3}, {{5, 3}, {6}, {6, 1, 3}}, {F, I, F}, {0, -5}, {0, 5}},
    {"scatter_2_axes", f_scatter2, 4, {2, 2, 1, 4}, {{4, 5}, {2, 3}, {3}, {2, 3, 1, 2}}, {F, I, I, F},
     {0, -4, 0}, {0, 4, 4}},
    {"scatter_add_2_axes", f_scatter_add2, 4, {2, 2, 1, 4}, {{4, 5}, {2, 3}, {3}, {2, 3, 1, 2}},
     {F, I, I, F}, {0, -4, 0}, {0, 4, 4}},
    {"masked_scatter", f_masked, 3, {2, 2, 1}, {{3, 4}, {3, 4}, {12}}, {F, M, F}},
    {"masked_scatter_rows", f_masked, 3, {2, 1, 2}, {{3, 4}, {3}, {3, 4}}, {F, M, F}},
    {"masked_scatter_one_row", f_masked, 3, {3, 1, 1}, {{3, 2, 2}, {3}, {2}}, {F, M, F}},
    {"slice_dynamic", f_slice_dyn, 2, {2, 1}, {{5, 4}, {1}}, {F, I}, {0, -6}, {0, 6}},
    {"slice_dynamic_2_axes", f_slice_dyn2, 2, {2, 1}, {{5, 4}, {2}}, {F, I}, {0, -6}, {0, 6}},
    {"slice_update_dynamic", f_update_dyn, 3, {2, 2, 1}, {{5, 4}, {2, 3}, {2}}, {F, F, I}, {0, 0, -6},
     {0, 0, 6}},
    {"slice_update_dynamic_bcast", f_update_dyn_row, 3, {2, 1, 1}, {{3, 4}, {2}, {1}}, {F, F, I},
     {0, 0, -5}, {0, 0, 5}},
    {"slice_update_add", f_upd_add, 2, {2, 1}, {{5, 4}, {4}}, {F, F}},
    {"slice_update_prod", f_upd_prod, 2, {2, 2}, {{5, 4}, {2, 4}}, {F, F}},
    {"slice_update_max", f_upd_max, 2, {2, 2}, {{5, 4}, {2, 1}}, {F, F}},
    {"slice_update_min_negative_steps", f_upd_min, 2, {2, 2}, {{5, 4}, {3, 2}}, {F, F}},
    {"slice_update_prod_negative_steps", f_upd_prod_rev, 2, {2, 1}, {{5, 4}, {2}}, {F, F}},
    {"diagonal", f_diagonal, 1, {3}, {{3, 2, 4}}, {F}},
    {"diagonal_negative_offset", f_diagonal_neg, 1, {3}, {{2, 4, 3}}, {F}},
    {"diag_build", f_diag_make, 1, {1}, {{3}}, {F}},
    {"diag_build_negative", f_diag_make_neg, 1, {1}, {{2}}, {F}},
    {"diag_read", f_diag_take, 1, {2}, {{3, 4}}, {F}},
    {"concatenate", f_concat, 3, {2, 2, 2}, {{2, 1}, {2, 3}, {2, 2}}, {F, F, F}},
    {"concatenate_flat", f_concat_flat, 2, {2, 1}, {{2, 2}, {3}}, {F, F}},
    {"stack", f_stack, 2, {2, 2}, {{2, 3}, {2, 3}}, {F, F}},
    {"pad_constant", f_pad_const, 2, {2, 0}, {{2, 3}, {0}}, {F, F}},
    {"pad_zero", f_pad_zero, 1, {1}, {{3}}, {F}},
    {"pad_edge", f_pad_edge, 1, {2}, {{3, 2}}, {F}},
    {"pad_reflect", f_pad_reflect, 1, {2}, {{3, 2}}, {F}},
    {"pad_symmetric", f_pad_symmetric, 1, {2}, {{2, 3}}, {F}},
    {"pad_edge_value_unused", f_pad_unused, 2, {1, 0}, {{3}, {0}}, {F, F}},
    {"diff", f_diff, 1, {2}, {{5, 2}}, {F}},
    {"diff_prepend_append", f_diff_edges, 3, {2, 2, 0}, {{2, 3}, {2, 2}, {0}}, {F, F, F}},
    {"flip", f_flip, 1, {3}, {{2, 3, 2}}, {F}},
    {"repeat", f_repeat, 1, {2}, {{2, 3}}, {F}},
    {"repeat_flat", f_repeat_flat, 1, {2}, {{2, 2}}, {F}},
    {"tile", f_tile, 1, {2}, {{2, 2}}, {F}},
    {"roll", f_roll, 1, {2}, {{3, 4}}, {F}},
    {"roll_flat", f_roll_flat, 1, {2}, {{2, 3}}, {F}},
    {"swapaxes", f_swapaxes, 1, {3}, {{2, 3, 4}}, {F}},
    {"moveaxis", f_moveaxis, 1, {3}, {{2, 3, 2}}, {F}},
    {"flatten", f_flatten, 1, {3}, {{2, 3, 2}}, {F}},
    {"unflatten", f_unflatten, 1, {2}, {{2, 6}}, {F}},
    {"atleast_3d", f_atleast_3d, 1, {1}, {{3}}, {F}},
    {"split", f_split, 1, {2}, {{2, 5}}, {F}},
    {"unstack", f_unstack, 1, {2}, {{3, 2}}, {F}},
    {"broadcast_arrays", f_broadcast_arrays, 2, {2, 1}, {{3, 1}, {4}}, {F, F}},
};
#define NCASES (sizeof cases / sizeof *cases)

Test(transforms_index, every_op_vjp_jvp_match_finite_differences) {
  unsigned st = test_seed();
  for (size_t k = 0; k < NCASES; k++)
    if (!cases[k].nograd) tc_gradcheck(&cases[k], &st, 1e-6);
}

Test(transforms_index, every_op_under_vmap_matches_a_loop) {
  unsigned st = test_seed() + 1;
  for (size_t k = 0; k < NCASES; k++) tc_vmapcheck(&cases[k], &st, 0);
}

/* ---- Second order: the rules' own graphs are differentiable and batchable ---- */

/* vjp of a case with a fixed cotangent (ones), as a function of the float primals. */
typedef struct vjp_of {
  tc_bound b;
} vjp_of;

static nv_status vjp_call(void *payload, const nv_vec *in, nv_vec *out) {
  vjp_of *v = payload;
  nv_closure *f = nv_closure_new(tc_call, &v->b, NULL);
  nv_vec *o = nv_vec_new(), *cot = nv_vec_new();
  nv_status s = nv_closure_apply(f, in, o);
  for (size_t i = 0; s == NV_OK && i < nv_vec_size(o); i++) {
    /* A cotangent that depends on the primal values makes the second derivative non-trivial. */
    nv_array *y = nv_vec_get(o, i);
    nv_vec_push(cot, nv_multiply(y, y));
  }
  if (s == NV_OK) s = nv_vjp(f, in, cot, NULL, out);
  nv_vec_free(o);
  nv_vec_free(cot);
  nv_closure_release(f);
  return s;
}

Test(transforms_index, vjp_rules_are_differentiable_and_batchable) {
  unsigned st = test_seed() + 2;
  const char *names[] = {"take", "gather", "scatter", "scatter_prod", "scatter_max",
                         "put_along_axis", "masked_scatter", "slice_update_dynamic",
                         "slice_update_prod", "slice_update_max", "diagonal", "diag_build",
                         "concatenate", "pad_constant", "pad_reflect", "diff", "take_along_axis"};
  char why[512];
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    const tc_case *c = NULL;
    for (size_t j = 0; j < NCASES && !c; j++)
      if (!strcmp(cases[j].name, names[k])) c = &cases[j];
    cr_assert_not_null(c, "%s", names[k]);
    vjp_of v = {{c, {NULL}}};
    nv_vec *p = nv_vec_new();
    for (int i = 0; i < c->nin; i++) {
      nv_array *a = tc_input(c->kind[i], c->lo[i], c->hi[i], c->shape[i], c->nd[i], &st);
      if (c->kind[i] != TC_FLOAT) v.b.fixed[i] = a;
      else {
        nv_vec_push(p, a);
        nv_release(a);
      }
    }
    nv_closure *f = nv_closure_new(vjp_call, &v, NULL);
    gc_seed(st);
    cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "grad of vjp of %s: %s", c->name, why);
    /* vmap of the vjp over a batch of the first primal against a loop. */
    int axes[TC_MAX_IN], shape[8];
    nv_vec *q = nv_vec_new();
    for (size_t i = 0; i < nv_vec_size(p); i++) {
      axes[i] = i == 0 ? 0 : NV_VMAP_NONE;
      nv_array *a = nv_vec_get(p, i);
      shape[0] = 3;
      for (int d = 0; d < nv_array_ndim(a); d++) shape[1 + d] = nv_array_dim(a, d);
      nv_array *r = i ? nv_retain(a) : tc_input(TC_FLOAT, 0, 0, shape, nv_array_ndim(a) + 1, &st);
      nv_vec_push(q, r);
      nv_release(r);
    }
    cr_assert(nv_vmapcheck(f, q, axes, 1e-12, why, sizeof why), "vmap of vjp of %s: %s", c->name,
              why);
    nv_vec_free(q);
    nv_closure_release(f);
    nv_vec_free(p);
    for (int i = 0; i < c->nin; i++) nv_release(v.b.fixed[i]);
  }
}

/* ---- Decided rules with known values ---- */

/* Scatters with the inputs ordered (a, updates, indices): the float inputs first. */
TC_OP(f_scatter_reordered, nv_scatter(x[0], (const nv_array *const[]){x[2]}, 1, x[1], ax0))
TC_OP(f_scatter_add_reordered, nv_scatter_add(x[0], (const nv_array *const[]){x[2]}, 1, x[1], ax0))
TC_OP(f_scatter_max_reordered, nv_scatter_max(x[0], (const nv_array *const[]){x[2]}, 1, x[1], ax0))
TC_OP(f_scatter_prod_reordered, nv_scatter_prod(x[0], (const nv_array *const[]){x[2]}, 1, x[1], ax0))

/* The gradients of sum(w * op(inputs)) for fixed weights w (row-major 0.5, 1.5, 2.5, ...). */
static void grads_of(tc_fn fn, nv_array *const *x, int nx, int nfloat, nv_vec *grads) {
  static const tc_case c = {"known", NULL, 0, {0}, {{0}}, {0}};
  tc_case cc = c;
  cc.fn = fn;
  cc.nin = nx;
  tc_bound b = {&cc, {NULL}};
  nv_vec *p = nv_vec_new();
  for (int i = 0; i < nx; i++) {
    if (i < nfloat) nv_vec_push(p, x[i]);
    else b.fixed[i] = x[i];
  }
  nv_closure *f = nv_closure_new(tc_call, &b, NULL);
  nv_vec *o = nv_vec_new(), *cot = nv_vec_new();
  cr_assert_eq(nv_closure_apply(f, p, o), NV_OK, "%s", nv_last_error());
  nv_array *y = nv_vec_get(o, 0);
  nv_array *w = nv_arange(0.5, 0.5 + (double)nv_array_size(y), 1, NV_DTYPE_FLOAT64);
  nv_array *wr = nv_reshape(w, nv_array_shape(y), nv_array_ndim(y));
  nv_vec_push(cot, wr);
  nv_vec *o2 = nv_vec_new();
  cr_assert_eq(nv_vjp(f, p, cot, o2, grads), NV_OK, "%s", nv_last_error());
  nv_release(w);
  nv_release(wr);
  nv_vec_free(o);
  nv_vec_free(o2);
  nv_vec_free(cot);
  nv_vec_free(p);
  nv_closure_release(f);
}

static nv_array *f64(const double *v, const int *shape, int nd) {
  return nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
}

static void expect(nv_array *g, const double *want, int n, const char *what) {
  double got[32];
  cr_assert_eq(nv_array_size(g), n, "%s", what);
  cr_assert_eq(nv_array_read(g, got, (size_t)n * sizeof(double)), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < n; i++)
    cr_assert_float_eq(got[i], want[i], 1e-12, "%s[%d]: %g, want %g", what, i, got[i], want[i]);
}

Test(transforms_index, scatter_duplicates_give_the_written_update_the_gradient) {
  /* a (3), updates written at 1, 1, 0 (the second write to 1 wins); weights 0.5, 1.5, 2.5. */
  double av[3] = {1, 2, 3}, uv[3] = {10, 20, 30};
  int32_t iv[3] = {1, -2, 0};
  nv_array *x[3] = {f64(av, (int[]){3}, 1), f64(uv, (int[]){3}, 1), NULL};
  nv_array *u = nv_reshape(x[1], (int[]){3, 1}, 2);
  nv_release(x[1]);
  x[1] = u;
  x[2] = nv_array_from_data(iv, (int[]){3}, 1, NV_DTYPE_INT32);
  nv_vec *g = nv_vec_new();
  /* inputs in the case order (a, updates, indices): a small adapter. */
  grads_of(f_scatter_reordered, x, 3, 2, g);
  expect(nv_vec_get(g, 0), (double[]){0, 0, 2.5}, 3, "base");
  expect(nv_vec_get(g, 1), (double[]){0, 1.5, 0.5}, 3, "updates");
  nv_vec_clear(g);
  grads_of(f_scatter_add_reordered, x, 3, 2, g);
  expect(nv_vec_get(g, 0), (double[]){0.5, 1.5, 2.5}, 3, "base (add)");
  expect(nv_vec_get(g, 1), (double[]){1.5, 1.5, 0.5}, 3, "updates (add)");
  nv_vec_free(g);
  for (int i = 0; i < 3; i++) nv_release(x[i]);
}

/* a (3) with `n` updates (n, 1) at `idx`: the inputs of the reordered scatters. */
static void scatter_inputs(const double *a, const double *u, const int32_t *idx, int n,
                           nv_array **x) {
  x[0] = f64(a, (int[]){3}, 1);
  x[1] = f64(u, (int[]){n, 1}, 2);
  x[2] = nv_array_from_data(idx, (int[]){n}, 1, NV_DTYPE_INT32);
}

Test(transforms_index, scatter_max_ties_give_every_tied_input_the_cotangent) {
  /* Position 1: the base and both updates are 5 (all tie); position 2: the base wins. */
  nv_array *x[3];
  scatter_inputs((double[]){1, 5, 3}, (double[]){5, 5, 2}, (int32_t[]){1, 1, 2}, 3, x);
  nv_vec *g = nv_vec_new();
  grads_of(f_scatter_max_reordered, x, 3, 2, g);
  expect(nv_vec_get(g, 0), (double[]){0.5, 1.5, 2.5}, 3, "base");
  expect(nv_vec_get(g, 1), (double[]){1.5, 1.5, 0}, 3, "updates");
  nv_vec_free(g);
  for (int i = 0; i < 3; i++) nv_release(x[i]);
}

Test(transforms_index, scatter_prod_gradients_are_exact_with_zero_factors) {
  /* Position 0: 2 * 0 * 5; position 1: 3 * 0 * 0; position 2: 4 (no update). */
  nv_array *x[3];
  scatter_inputs((double[]){2, 3, 4}, (double[]){0, 5, 0, 0}, (int32_t[]){0, 0, 1, 1}, 4, x);
  nv_vec *g = nv_vec_new();
  grads_of(f_scatter_prod_reordered, x, 3, 2, g);
  expect(nv_vec_get(g, 0), (double[]){0, 0, 2.5}, 3, "base");
  expect(nv_vec_get(g, 1), (double[]){0.5 * 2 * 5, 0, 0, 0}, 4, "updates");
  nv_vec_free(g);
  for (int i = 0; i < 3; i++) nv_release(x[i]);
  /* One zero at a position: its update gets the product of the others; and finite
   * differences agree at these points (the product is linear in each factor). */
  scatter_inputs((double[]){2, 3, 4}, (double[]){0, 5, 7, 0.5}, (int32_t[]){0, 0, 1, 2}, 4, x);
  g = nv_vec_new();
  grads_of(f_scatter_prod_reordered, x, 3, 2, g);
  expect(nv_vec_get(g, 0), (double[]){0, 1.5 * 7, 2.5 * 0.5}, 3, "base");
  expect(nv_vec_get(g, 1), (double[]){0.5 * 2 * 5, 0, 1.5 * 3, 2.5 * 4}, 4, "updates");
  nv_vec_free(g);
  static const tc_case c = {"scatter_prod_zeros", f_scatter_prod_reordered, 3};
  tc_bound b = {&c, {NULL, NULL, x[2]}};
  nv_closure *f = nv_closure_new(tc_call, &b, NULL);
  nv_vec *p = nv_vec_new();
  nv_vec_push(p, x[0]);
  nv_vec_push(p, x[1]);
  char why[512];
  cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s", why);
  nv_vec_free(p);
  nv_closure_release(f);
  for (int i = 0; i < 3; i++) nv_release(x[i]);
}

TC_OP(f_take_sum, nv_sum(nv_take(x[0], x[1], 0), NULL, 0, false))

Test(transforms_index, take_duplicates_accumulate_and_indices_get_no_gradient) {
  double av[4] = {1, 2, 3, 4};
  int32_t iv[5] = {2, -2, 0, 3, 2};
  nv_array *x[2] = {f64(av, (int[]){4}, 1), nv_array_from_data(iv, (int[]){5}, 1, NV_DTYPE_INT32)};
  /* grad of sum(take(a, idx)) with respect to both: the indices get zeros of their dtype. */
  static const tc_case c = {"take_sum", f_take_sum, 2};
  tc_bound b = {&c, {NULL}};
  nv_closure *f = nv_closure_new(tc_call, &b, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x[0]);
  nv_vec_push(in, x[1]);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  expect(nv_vec_get(out, 0), (double[]){1, 0, 3, 1}, 4, "a");
  cr_assert_eq(nv_array_dtype(nv_vec_get(out, 1)), NV_DTYPE_INT32);
  int32_t gi[5];
  cr_assert_eq(nv_array_read(nv_vec_get(out, 1), gi, sizeof gi), NV_OK);
  for (int i = 0; i < 5; i++) cr_assert_eq(gi[i], 0);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  /* Weights 0.5..4.5 at the positions 2, 2, 0, 3, 2. */
  nv_vec *gr = nv_vec_new();
  grads_of(f_take_2d, x, 2, 1, gr);
  expect(nv_vec_get(gr, 0), (double[]){2.5, 0, 0.5 + 1.5 + 4.5, 3.5}, 4, "a");
  nv_vec_free(gr);
  for (int i = 0; i < 2; i++) nv_release(x[i]);
}

/* ---- Errors under vmap are errors, not crashes ---- */

TC_OP(f_masked_2, nv_masked_scatter(x[0], x[1], x[2]))

Test(transforms_index, vmap_failures_are_clean_errors) {
  /* masked_scatter: example 1 selects 3 positions but its src has 2 rows. */
  bool mv[6] = {true, false, false, true, true, true};
  double av[6] = {0}, sv[4] = {1, 2, 3, 4};
  nv_array *a = f64(av, (int[]){2, 3}, 2), *s = f64(sv, (int[]){2, 2}, 2);
  nv_array *m = nv_array_from_data(mv, (int[]){2, 3}, 2, NV_DTYPE_BOOL);
  static const tc_case c = {"masked", f_masked_2, 3};
  tc_bound b = {&c, {NULL}};
  nv_closure *f = nv_closure_new(tc_call, &b, NULL);
  nv_closure *v = nv_vmap(f, NULL, 0, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, a);
  nv_vec_push(in, m);
  nv_vec_push(in, s);
  nv_status st = nv_closure_apply(v, in, out);
  if (st == NV_OK) st = nv_eval1(nv_vec_get(out, 0));
  cr_assert_eq(st, NV_ERR_INVALID_ARGUMENT, "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), "masked_scatter"), "%s", nv_last_error());
  nv_vec_free(out);
  nv_vec_free(in);
  nv_closure_release(v);
  nv_closure_release(f);
  /* take with both operands batched and an index out of range. */
  int32_t iv[2] = {0, 7};
  nv_array *ix = nv_array_from_data(iv, (int[]){2, 1}, 2, NV_DTYPE_INT32);
  nv_release(a);
  a = nv_zeros((int[]){2, 2, 3}, 3, NV_DTYPE_FLOAT64);
  static const tc_case t = {"take", f_take, 2};
  tc_bound tb = {&t, {NULL}};
  f = nv_closure_new(tc_call, &tb, NULL);
  v = nv_vmap(f, NULL, 0, NULL, 0);
  in = nv_vec_new();
  out = nv_vec_new();
  nv_vec_push(in, a);
  nv_vec_push(in, ix);
  st = nv_closure_apply(v, in, out);
  if (st == NV_OK) st = nv_eval1(nv_vec_get(out, 0));
  cr_assert_eq(st, NV_ERR_INVALID_ARGUMENT, "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), "out of range"), "%s", nv_last_error());
  nv_vec_free(out);
  nv_vec_free(in);
  nv_closure_release(v);
  nv_closure_release(f);
  nv_release(ix);
  nv_release(a);
  nv_release(s);
  nv_release(m);
}
