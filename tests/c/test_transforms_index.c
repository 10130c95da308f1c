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
