/* Ops built on failed arrays. A failed array that has its op's metadata (one whose evaluation
 * failed, or one built on such an array) goes through every builder like a healthy array: the
 * result has the op's own dtype and shape, as the healthy result has, and carries the input's
 * error (the same message and status, known without evaluating). Code that looks at shapes
 * before evaluating therefore behaves the same whether an input failed or not. A failed array
 * without metadata of its own (bad arguments: it has no op's shape) passes its error on. */
#include <criterion/criterion.h>
#include <limits.h>

#include "testutil.h"

/* Inputs by kind: f (3,4) float32; g (4,) float32; h (4,3) float32; q (3,) float32; v (3,1)
 * float32; e (2,4) float32; w (2,1,4) float32; s (4,) sorted float32; r (12,) float32;
 * c (3,4) complex64;
 * i (3,4) int32; j (3,1) int32 zeros; x (2,) int32 [0, 2]; z (1,) int32 [1]; b (3,4) bool;
 * u (3,4) uint8; k a random key. */
static const char KINDS[] = "fghqvewsrcijxzbuk";

static nv_array *make_input(char kind) {
  float fv[24];
  for (int i = 0; i < 24; i++) fv[i] = 0.1f + 0.03f * (float)i;
  int32_t iv[12] = {0, 1, 2, 3, 1, 2, 3, 0, 2, 3, 0, 1}, zeros[3] = {0, 0, 0}, xv[2] = {0, 2},
          zv[1] = {1};
  uint8_t bv[12] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0};
  float cv[24];
  for (int i = 0; i < 24; i++) cv[i] = 0.2f * (float)i;
  switch (kind) {
    case 'f': return nv_array_from_data(fv, (int[]){3, 4}, 2, NV_DTYPE_FLOAT32);
    case 'g': return nv_array_from_data(fv, (int[]){4}, 1, NV_DTYPE_FLOAT32);
    case 's': return nv_array_from_data(fv, (int[]){4}, 1, NV_DTYPE_FLOAT32);
    case 'r': return nv_array_from_data(fv, (int[]){12}, 1, NV_DTYPE_FLOAT32);
    case 'h': return nv_array_from_data(fv, (int[]){4, 3}, 2, NV_DTYPE_FLOAT32);
    case 'q': return nv_array_from_data(fv, (int[]){3}, 1, NV_DTYPE_FLOAT32);
    case 'v': return nv_array_from_data(fv, (int[]){3, 1}, 2, NV_DTYPE_FLOAT32);
    case 'e': return nv_array_from_data(fv, (int[]){2, 4}, 2, NV_DTYPE_FLOAT32);
    case 'w': return nv_array_from_data(fv, (int[]){2, 1, 4}, 3, NV_DTYPE_FLOAT32);
    case 'c': return nv_array_from_data(cv, (int[]){3, 4}, 2, NV_DTYPE_COMPLEX64);
    case 'i': return nv_array_from_data(iv, (int[]){3, 4}, 2, NV_DTYPE_INT32);
    case 'j': return nv_array_from_data(zeros, (int[]){3, 1}, 2, NV_DTYPE_INT32);
    case 'x': return nv_array_from_data(xv, (int[]){2}, 1, NV_DTYPE_INT32);
    case 'z': return nv_array_from_data(zv, (int[]){1}, 1, NV_DTYPE_INT32);
    case 'b': return nv_array_from_data(bv, (int[]){3, 4}, 2, NV_DTYPE_BOOL);
    case 'u': return nv_array_from_data(bv, (int[]){3, 4}, 2, NV_DTYPE_UINT8);
    case 'k': return nv_random_key(7);
  }
  cr_assert_fail("unknown kind %c", kind);
  return NULL;
}

static nv__error *the_error(void) {
  static nv__error *e;
  if (!e) e = nv__error_new(NV_ERR_OUT_OF_MEMORY, "test: an evaluation that ran out of memory");
  return e;
}

/* `x` failed with its own metadata, as a node whose evaluation failed is. */
static nv_array *failed_like(const nv_array *x) {
  const nv__output *o = nv__out(x);
  nv_array *r = nv__array_failed(the_error(), o->dtype, o->shape, o->ndim);
  nv_clear_error();
  return r;
}

#define A in[0]
#define B in[1]
#define C in[2]
#define SH2 (int[]){3, 4}, 2
#define AX1 (int[]){1}, 1
#define F32 NV_DTYPE_FLOAT32

/* name, input kinds, expression over A, B, C. */
#define CASES(X)                                                                          \
  X(positive, "f", nv_positive(A)) X(sign, "f", nv_sign(A)) X(logical_not, "f", nv_logical_not(A)) \
  X(reciprocal, "f", nv_reciprocal(A)) X(floor, "f", nv_floor(A)) X(ceil, "f", nv_ceil(A))     \
  X(trunc, "f", nv_trunc(A)) X(round, "f", nv_round(A, 1)) X(square, "f", nv_square(A))         \
  X(rsqrt, "f", nv_rsqrt(A)) X(expm1, "f", nv_expm1(A)) X(log2, "f", nv_log2(A))               \
  X(log10, "f", nv_log10(A)) X(log1p, "f", nv_log1p(A)) X(sin, "f", nv_sin(A))                 \
  X(cos, "f", nv_cos(A)) X(tan, "f", nv_tan(A)) X(arcsin, "f", nv_arcsin(A))                   \
  X(arccos, "f", nv_arccos(A)) X(arctan, "f", nv_arctan(A)) X(sinh, "f", nv_sinh(A))           \
  X(cosh, "f", nv_cosh(A)) X(tanh, "f", nv_tanh(A)) X(arcsinh, "f", nv_arcsinh(A))             \
  X(arccosh, "f", nv_arccosh(A)) X(arctanh, "f", nv_arctanh(A)) X(degrees, "f", nv_degrees(A)) \
  X(radians, "f", nv_radians(A)) X(sigmoid, "f", nv_sigmoid(A)) X(erf, "f", nv_erf(A))         \
  X(erfinv, "f", nv_erfinv(A)) X(isnan, "f", nv_isnan(A)) X(isinf, "f", nv_isinf(A))           \
  X(isfinite, "f", nv_isfinite(A)) X(isposinf, "f", nv_isposinf(A))                            \
  X(isneginf, "f", nv_isneginf(A)) X(nan_to_num, "f", nv_nan_to_num(A, 0, NULL, NULL))         \
  X(conjugate, "c", nv_conjugate(A)) X(real, "c", nv_real(A)) X(imag, "c", nv_imag(A))         \
  X(real_of_real, "f", nv_real(A)) X(imag_of_real, "f", nv_imag(A))                            \
  X(bitwise_invert, "i", nv_bitwise_invert(A)) X(view, "f", nv_view(A, NV_DTYPE_INT32))        \
  X(view_narrow, "f", nv_view(A, NV_DTYPE_UINT8)) X(stop_gradient, "f", nv_stop_gradient(A))   \
  X(number_of_elements, "f", nv_number_of_elements(A, AX1, false, F32))                        \
  X(tril, "f", nv_tril(A, 0)) X(triu, "f", nv_triu(A, 1)) X(negative, "f", nv_negative(A))     \
  X(abs, "f", nv_abs(A)) X(exp, "f", nv_exp(A)) X(log, "f", nv_log(A)) X(sqrt, "f", nv_sqrt(A)) \
  X(astype, "f", nv_astype(A, NV_DTYPE_INT32)) X(astype_same, "f", nv_astype(A, F32))          \
  X(astype_half, "f", nv_astype(A, NV_DTYPE_FLOAT16)) X(to_fp8, "f", nv_to_fp8(A))             \
  X(from_fp8, "u", nv_from_fp8(A, F32)) X(contiguous, "f", nv_contiguous(A))                   \
  X(contiguous_t, "f", nv_contiguous(nv_transpose(A, NULL, 0))) X(copy, "f", nv_copy(A))       \
  X(reshape, "f", nv_reshape(A, (int[]){4, 3}, 2)) X(reshape_t, "f",                           \
    nv_reshape(nv_transpose(A, NULL, 0), (int[]){-1}, 1))                                      \
  X(transpose, "f", nv_transpose(A, NULL, 0))                                                  \
  X(broadcast_to, "f", nv_broadcast_to(A, (int[]){2, 3, 4}, 3))                                \
  X(slice, "f", nv_slice(A, (int[]){0, 1}, (int[]){3, 4}, (int[]){2, 1}, 2))                  \
  X(squeeze, "v", nv_squeeze(A, NULL, 0)) X(expand_dims, "f", nv_expand_dims(A, (int[]){0}, 1)) \
  X(as_strided, "f", nv_as_strided(A, (int[]){2, 2}, 2, (int64_t[]){4, 1}, 1))                 \
  X(add_scalar, "f", nv_add_scalar(A, 1)) X(subtract_scalar, "i", nv_subtract_scalar(A, 1))    \
  X(multiply_scalar, "f", nv_multiply_scalar(A, 2)) X(divide_scalar, "i", nv_divide_scalar(A, 2)) \
  X(maximum_scalar, "f", nv_maximum_scalar(A, 0.5)) X(minimum_scalar, "f", nv_minimum_scalar(A, 0.5)) \
  X(power_scalar, "f", nv_power_scalar(A, 2)) X(floor_divide_scalar, "i", nv_floor_divide_scalar(A, 2)) \
  X(remainder_scalar, "f", nv_remainder_scalar(A, 2)) X(equal_scalar, "f", nv_equal_scalar(A, 2)) \
  X(greater_scalar, "f", nv_greater_scalar(A, 2)) X(less_scalar, "f", nv_less_scalar(A, 2))    \
  X(clip_scalar, "f", nv_clip_scalar(A, 0.2, 0.5)) X(zeros_like, "f", nv_zeros_like(A))        \
  X(ones_like, "i", nv_ones_like(A)) X(full_like, "f", nv_full_like(A, 2))                     \
  X(sum, "f", nv_sum(A, AX1, false)) X(sum_all, "f", nv_sum(A, NULL, 0, true))                 \
  X(all, "b", nv_all(A, AX1, false)) X(any, "b", nv_any(A, NULL, 0, false))                    \
  X(prod, "i", nv_prod(A, AX1, true)) X(max, "f", nv_max(A, AX1, false))                       \
  X(min, "f", nv_min(A, NULL, 0, false)) X(mean, "f", nv_mean(A, AX1, false))                  \
  X(mean_int, "i", nv_mean(A, NULL, 0, false)) X(var, "f", nv_var(A, AX1, false, 1))           \
  X(std, "f", nv_std(A, AX1, true, 0)) X(median, "f", nv_median(A, AX1, false))                \
  X(count_nonzero, "f", nv_count_nonzero(A, AX1, false))                                       \
  X(argmax, "f", nv_argmax(A, (int[]){1}, false)) X(argmin, "f", nv_argmin(A, NULL, false))    \
  X(logsumexp, "f", nv_logsumexp(A, AX1, false)) X(softmax, "f", nv_softmax(A, AX1, false))    \
  X(trace, "f", nv_trace(A, 0, 0, 1, -1)) X(cumsum, "f", nv_cumsum(A, (int[]){1}, false, true)) \
  X(cumprod, "i", nv_cumprod(A, NULL, false, true)) X(cummax, "f", nv_cummax(A, (int[]){0}, true, true)) \
  X(cummin, "f", nv_cummin(A, (int[]){1}, false, false))                                       \
  X(logcumsumexp, "f", nv_logcumsumexp(A, (int[]){1}, false, true))                            \
  X(sort, "f", nv_sort(A, (int[]){1})) X(sort_flat, "f", nv_sort(A, NULL))                     \
  X(argsort, "f", nv_argsort(A, (int[]){0})) X(partition, "f", nv_partition(A, 1, (int[]){1})) \
  X(argpartition, "f", nv_argpartition(A, 1, (int[]){1})) X(topk, "f", nv_topk(A, 2, (int[]){1})) \
  X(diagonal, "f", nv_diagonal(A, 0, 0, 1)) X(diag, "f", nv_diag(A, 1)) X(diag_1d, "g", nv_diag(A, 0)) \
  X(flatten, "f", nv_flatten(A, 0, -1)) X(unflatten, "f", nv_unflatten(A, 1, (int[]){2, 2}, 2)) \
  X(flip, "f", nv_flip(A, NULL, 0)) X(repeat, "f", nv_repeat(A, 2, 1))                         \
  X(repeat_flat, "f", nv_repeat_flat(A, 2)) X(tile, "f", nv_tile(A, (int[]){2, 1}, 2))         \
  X(swapaxes, "f", nv_swapaxes(A, 0, 1)) X(moveaxis, "w", nv_moveaxis(A, 0, 2))                \
  X(pad, "f", nv_pad(A, (int[]){1}, (int[]){2}, 1, NV_PAD_CONSTANT, NULL))                     \
  X(pad_edge, "f", nv_pad(A, (int[]){1}, (int[]){0}, 1, NV_PAD_EDGE, NULL))                    \
  X(pad_value, "fq", nv_pad(A, (int[]){1}, (int[]){1}, 1, NV_PAD_CONSTANT, nv_sum(B, NULL, 0, false))) \
  X(atleast_1d, "f", nv_atleast_1d(A)) X(atleast_2d, "g", nv_atleast_2d(A))                    \
  X(atleast_3d, "f", nv_atleast_3d(A)) X(roll, "f", nv_roll(A, (int[]){1}, 1, AX1))            \
  X(roll_flat, "f", nv_roll(A, (int[]){5}, 1, NULL, 0)) X(diff, "f", nv_diff(A, 1, 1, NULL, NULL)) \
  X(diff_edges, "fvv", nv_diff(A, 2, 1, B, C))                                                 \
  X(floor_divide, "ff", nv_floor_divide(A, B)) X(remainder, "ff", nv_remainder(A, B))          \
  X(power, "ff", nv_power(A, B)) X(arctan2, "ff", nv_arctan2(A, B))                            \
  X(logaddexp, "ff", nv_logaddexp(A, B)) X(equal, "fg", nv_equal(A, B))                        \
  X(not_equal, "ff", nv_not_equal(A, B)) X(greater, "fq", nv_greater(A, nv_expand_dims(B, (int[]){1}, 1))) \
  X(greater_equal, "ff", nv_greater_equal(A, B)) X(less, "fv", nv_less(A, B))                  \
  X(less_equal, "ff", nv_less_equal(A, B)) X(logical_and, "bb", nv_logical_and(A, B))          \
  X(logical_or, "bf", nv_logical_or(A, B)) X(logical_xor, "ff", nv_logical_xor(A, B))          \
  X(bitwise_and, "ii", nv_bitwise_and(A, B)) X(bitwise_or, "ib", nv_bitwise_or(A, B))          \
  X(bitwise_xor, "ii", nv_bitwise_xor(A, B)) X(left_shift, "ii", nv_left_shift(A, B))          \
  X(right_shift, "ii", nv_right_shift(A, B)) X(add, "fg", nv_add(A, B))                        \
  X(add_int_float, "if", nv_add(A, B)) X(subtract, "ff", nv_subtract(A, B))                    \
  X(multiply, "fc", nv_multiply(A, B)) X(divide, "ii", nv_divide(A, B))                        \
  X(maximum, "fv", nv_maximum(A, B)) X(minimum, "ff", nv_minimum(A, B))                        \
  X(where, "bff", nv_where(A, B, C)) X(where_bcast, "vfg", nv_where(nv_greater_scalar(A, 0.2), B, C)) \
  X(clip, "fff", nv_clip(A, B, C)) X(clip_low, "fv", nv_clip(A, B, NULL))                      \
  X(isclose, "ff", nv_isclose(A, B, 1e-5, 1e-8, false))                                        \
  X(allclose, "fg", nv_allclose(A, B, 1e-5, 1e-8, true))                                       \
  X(array_equal, "ff", nv_array_equal(A, B, false))                                            \
  X(array_equal_shapes, "fh", nv_array_equal(A, B, false))                                     \
  X(matmul, "fh", nv_matmul(A, B)) X(matvec, "fg", nv_matmul(A, B))                            \
  X(matmul_int, "ii", nv_matmul(A, nv_transpose(B, NULL, 0)))                                  \
  X(addmm, "qfh", nv_addmm(A, B, C, 0.5, 2))                                                   \
  X(tensordot, "fh", nv_tensordot(A, B, 1))                                                    \
  X(tensordot_axes, "ff", nv_tensordot_axes(A, B, (int[]){1}, (int[]){1}, 1))                  \
  X(inner, "ff", nv_inner(A, B)) X(outer, "gq", nv_outer(A, B)) X(kron, "fv", nv_kron(A, B))   \
  X(vecdot, "fg", nv_vecdot(A, B, -1))                                                         \
  X(take, "fx", nv_take(A, B, 1)) X(take_flat, "fx", nv_take_flat(A, B))                       \
  X(take_along_axis, "fj", nv_take_along_axis(A, B, 1))                                        \
  X(put_along_axis, "fjv", nv_put_along_axis(A, B, C, 1))                                      \
  X(gather, "fx", nv_gather(A, (const nv_array *const[]){B}, 1, (int[]){0}, (int[]){1, 4}, 2)) \
  X(scatter, "fxw", nv_scatter(A, (const nv_array *const[]){B}, 1, C, (int[]){0}))             \
  X(scatter_add, "fxw", nv_scatter_add(A, (const nv_array *const[]){B}, 1, C, (int[]){0}))     \
  X(scatter_prod, "fxw", nv_scatter_prod(A, (const nv_array *const[]){B}, 1, C, (int[]){0}))   \
  X(scatter_max, "fxw", nv_scatter_max(A, (const nv_array *const[]){B}, 1, C, (int[]){0}))     \
  X(scatter_min, "fxw", nv_scatter_min(A, (const nv_array *const[]){B}, 1, C, (int[]){0}))     \
  X(masked_scatter, "fbr", nv_masked_scatter(A, B, C))                                         \
  X(slice_dynamic, "fz", nv_slice_dynamic(A, B, (int[]){0}, 1, (int[]){2, 4}, 2))              \
  X(slice_update_dynamic, "fez", nv_slice_update_dynamic(A, B, C, (int[]){0}, 1))              \
  X(slice_update, "fe", nv_slice_update(A, B, (int[]){1, 0}, (int[]){3, 4}, NULL, 2))          \
  X(slice_update_add, "fe", nv_slice_update_add(A, B, (int[]){1, 0}, (int[]){3, 4}, NULL, 2))  \
  X(slice_update_prod, "fe", nv_slice_update_prod(A, B, (int[]){0, 0}, (int[]){2, 4}, NULL, 2)) \
  X(slice_update_max, "fe", nv_slice_update_max(A, B, (int[]){1, 0}, (int[]){3, 4}, NULL, 2))  \
  X(slice_update_min, "fg", nv_slice_update_min(A, B, (int[]){1, 0}, (int[]){2, 4}, NULL, 2))  \
  X(concatenate, "fe", nv_concatenate((const nv_array *const[]){A, B}, 2, 0))                  \
  X(concatenate_flat, "fg", nv_concatenate_flat((const nv_array *const[]){A, B}, 2))           \
  X(stack, "ff", nv_stack((const nv_array *const[]){A, B}, 2, 1))                              \
  X(searchsorted, "sf", nv_searchsorted(A, B, false))                                          \
  X(full_array, "g", nv_full_array((int[]){2, 3, 4}, 3, A, NV_DTYPE_FLOAT16))                  \
  X(random_split, "k", nv_random_split(A, 3)) X(random_bits, "k", nv_random_bits(SH2, 4, A))   \
  X(random_uniform, "ffk", nv_random_uniform(A, B, SH2, F32, C))                               \
  X(random_uniform_scalar, "k", nv_random_uniform_scalar(0, 1, SH2, F32, A))                   \
  X(random_normal, "k", nv_random_normal(SH2, F32, 0, 1, A))                                   \
  X(random_normal_array, "fgk", nv_random_normal_array(SH2, F32, A, B, C))                     \
  X(random_randint, "iik", nv_random_randint(A, nv_add_scalar(B, 3), SH2, NV_DTYPE_INT32, C))  \
  X(random_randint_scalar, "k", nv_random_randint_scalar(0, 9, SH2, NV_DTYPE_INT32, A))        \
  X(random_bernoulli, "fk", nv_random_bernoulli(A, SH2, B))                                    \
  X(random_bernoulli_scalar, "k", nv_random_bernoulli_scalar(0.5, SH2, A))                     \
  X(random_truncated_normal, "ffk", nv_random_truncated_normal(A, nv_add_scalar(B, 1), SH2, F32, C)) \
  X(random_truncated_normal_scalar, "k", nv_random_truncated_normal_scalar(-1, 1, SH2, F32, A)) \
  X(random_gumbel, "k", nv_random_gumbel(SH2, F32, A))                                         \
  X(random_laplace, "k", nv_random_laplace(SH2, F32, 0, 1, A))                                 \
  X(random_categorical, "fk", nv_random_categorical(A, 1, NULL, 0, B))                         \
  X(random_categorical_samples, "fk", nv_random_categorical_samples(A, 1, 5, B))               \
  X(random_permutation_n, "k", nv_random_permutation_n(6, A))                                  \
  X(random_permutation, "fk", nv_random_permutation(A, 1, B))                                  \
  X(init_normal, "k", nv_init_normal(SH2, 0, 1, F32, A))                                       \
  X(init_uniform, "k", nv_init_uniform(SH2, 0, 1, F32, A))                                     \
  X(init_glorot_normal, "k", nv_init_glorot_normal(SH2, 1, F32, A))                            \
  X(init_glorot_uniform, "k", nv_init_glorot_uniform(SH2, 1, F32, A))                          \
  X(init_he_normal, "k", nv_init_he_normal(SH2, NV_INIT_FAN_IN, 1, F32, A))                    \
  X(init_he_uniform, "k", nv_init_he_uniform(SH2, NV_INIT_FAN_OUT, 1, F32, A))

enum {
#define X(name, kinds, expr) CASE_##name,
  CASES(X)
#undef X
  NCASES
};

static const char *const case_names[] = {
#define X(name, kinds, expr) #name,
    CASES(X)
#undef X
};

static const char *const case_kinds[] = {
#define X(name, kinds, expr) kinds,
    CASES(X)
#undef X
};

static nv_array *run_case(int id, nv_array *const *in) {
  switch (id) {
#define X(name, kinds, expr) \
  case CASE_##name: return expr;
    CASES(X)
#undef X
  }
  return NULL;
}

/* Mismatches are counted and printed, so that one run lists every builder that breaks. */
static int mismatches;

#define EXPECT(cond, ...)                  \
  do {                                     \
    if (!(cond)) {                         \
      mismatches++;                        \
      fprintf(stderr, "  " __VA_ARGS__);   \
      fprintf(stderr, "\n");              \
    }                                      \
  } while (0)

static bool same_meta(const nv_array *got, const nv_array *want) {
  const nv__output *g = nv__out(got), *w = nv__out(want);
  return g->dtype == w->dtype && g->ndim == w->ndim &&
         !memcmp(g->shape, w->shape, sizeof(int) * (size_t)g->ndim);
}

/* Every case with each input in turn replaced by a failed one: the result carries that
 * input's error (status and message) and, when the failed input has its metadata, has the
 * healthy result's metadata. */
static void sweep(bool with_metadata) {
  nv_array *good[sizeof KINDS], *bad[sizeof KINDS];
  nv_array *one = nv_array_float(1);
  nv_array *bad_args = nv_reshape(one, (int[]){5}, 1); /* bad arguments: no metadata */
  nv_release(one);
  nv_clear_error();
  for (int k = 0; KINDS[k]; k++) {
    good[k] = make_input(KINDS[k]);
    bad[k] = with_metadata ? failed_like(good[k]) : nv_retain(bad_args);
  }
  nv_status want_status = nv_array_status(bad[0]);
  char want_msg[512];
  snprintf(want_msg, sizeof want_msg, "%s", nv_array_error(bad[0]));
  mismatches = 0;
  int checked = 0;
  for (int id = 0; id < NCASES; id++) {
    const char *kinds = case_kinds[id];
    int n = (int)strlen(kinds);
    nv_array *in[3];
    nv_scope_begin();
    for (int p = 0; p < n; p++) in[p] = good[strchr(KINDS, kinds[p]) - KINDS];
    nv_array *healthy = run_case(id, in);
    cr_assert_eq(nv_array_status(healthy), NV_OK, "%s: %s", case_names[id], nv_last_error());
    cr_assert_eq(nv_eval(&healthy, 1), NV_OK, "%s: %s", case_names[id], nv_last_error());
    for (int p = 0; p < n; p++) {
      char what[96];
      snprintf(what, sizeof what, "%s with input %d failed", case_names[id], p);
      nv_array *keep = in[p];
      in[p] = bad[strchr(KINDS, kinds[p]) - KINDS];
      nv_array *r = run_case(id, in);
      in[p] = keep;
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      const nv__output *g = nv__out(r), *w = nv__out(healthy);
      EXPECT(nv_array_status(r) == want_status && !strcmp(nv_array_error(r), want_msg),
             "%s: status %d (%s)", what, nv_array_status(r), nv_array_error(r));
      EXPECT(!with_metadata || same_meta(r, healthy),
             "%s: the result is %s %s, the healthy one %s %s", what, nv_dtype_name(g->dtype),
             nv__shape_str(g->shape, g->ndim, s1, sizeof s1), nv_dtype_name(w->dtype),
             nv__shape_str(w->shape, w->ndim, s2, sizeof s2));
      EXPECT(nv_eval(&r, 1) == want_status, "%s: evaluates", what);
      checked++;
    }
    nv_scope_end();
  }
  cr_assert_eq(mismatches, 0, "%d mismatches (listed above)", mismatches);
  cr_assert_gt(checked, 250);
  for (int k = 0; KINDS[k]; k++) {
    nv_release(good[k]);
    nv_release(bad[k]);
  }
  nv_release(bad_args);
}

Test(failed_arrays, every_builder_keeps_its_metadata_and_the_input_error) { sweep(true); }

Test(failed_arrays, an_input_without_metadata_passes_its_error_on) { sweep(false); }

/* The reported case: an array whose evaluation ran out of memory, then reductions and casts of
 * it. Their shapes and dtypes are the ops' own, and the error is the evaluation's. */
Test(failed_arrays, ops_on_an_array_whose_evaluation_failed) {
  float v[24];
  for (int i = 0; i < 24; i++) v[i] = (float)i;
  nv_array *x = nv_array_from_data(v, (int[]){2, 3, 4}, 3, NV_DTYPE_FLOAT32);
  nv_array *bad = nv_exp(x);
  size_t old = nv_set_memory_limit(1);
  nv_status st = nv_eval(&bad, 1);
  nv_set_memory_limit(old);
  cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "%s", nv_last_error());
  char msg[512];
  snprintf(msg, sizeof msg, "%s", nv_array_error(bad));
  cr_assert(strstr(msg, "out of memory"), "%s", msg);

  nv_array *s = nv_sum(bad, (int[]){1}, 1, false);
  cr_assert_eq(nv_array_ndim(s), 2);
  cr_assert_eq(nv_array_dim(s, 0), 2);
  cr_assert_eq(nv_array_dim(s, 1), 4);
  nv_array *c = nv_astype(bad, NV_DTYPE_INT32);
  cr_assert_eq(nv_array_dtype(c), NV_DTYPE_INT32);
  nv_array *r = nv_reshape(bad, (int[]){6, 4}, 2), *w = nv_ones((int[]){4, 5}, 2, NV_DTYPE_FLOAT32);
  nv_array *m = nv_matmul(r, w);
  cr_assert(nv_array_ndim(m) == 2 && nv_array_dim(m, 0) == 6 && nv_array_dim(m, 1) == 5);
  nv_release(r);
  nv_release(w);
  nv_array *all[3] = {s, c, m};
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(nv_array_status(all[i]), NV_ERR_OUT_OF_MEMORY);
    cr_assert_str_eq(nv_array_error(all[i]), msg);
  }
  cr_assert_eq(nv_eval(all, 3), NV_ERR_OUT_OF_MEMORY);
  /* The same ops on the healthy array give the same metadata, and values. */
  nv_array *ok = nv_sum(nv_exp(x), (int[]){1}, 1, false);
  float got[8];
  READ_F32(ok, got, 8);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++) {
      double want = 0;
      for (int j = 0; j < 3; j++) want += exp(v[i * 12 + j * 4 + k]);
      cr_assert(fabs(got[i * 4 + k] - want) <= 1e-5 * want, "%g vs %g", got[i * 4 + k], want);
    }
  for (int i = 0; i < 3; i++) nv_release(all[i]);
  nv_release(ok);
  nv_release(bad);
  nv_release(x);
}

/* Ops that return a status fail with their input's error and append nothing. */
Test(failed_arrays, status_ops_fail_with_the_input_error) {
  nv_array *good = make_input('f'), *bad = failed_like(good);
  nv_vec *out = nv_vec_new(), *list = nv_vec_new(), *deps = nv_vec_new();
  cr_assert_eq(nv_divmod(bad, good, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_divmod(good, bad, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_str_eq(nv_last_error(), the_error()->msg);
  cr_assert_eq(nv_split(bad, 2, 1, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_split_at(bad, (int[]){1}, 1, 0, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_unstack(bad, 0, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_broadcast_arrays((const nv_array *const[]){good, bad}, 2, out),
               NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_vec_push(list, good), NV_OK);
  cr_assert_eq(nv_vec_push(list, bad), NV_OK);
  cr_assert_eq(nv_meshgrid(list, false, "xy", out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_vec_push(deps, bad), NV_OK);
  nv_vec_clear(list);
  cr_assert_eq(nv_vec_push(list, good), NV_OK);
  cr_assert_eq(nv_depends(list, deps, out), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_vec_size(out), 0);
  /* Healthy, they append. */
  cr_assert_eq(nv_divmod(good, good, out), NV_OK);
  cr_assert_eq(nv_vec_size(out), 2);
  nv_vec_free(out);
  nv_vec_free(list);
  nv_vec_free(deps);
  nv_release(good);
  nv_release(bad);
}

/* ---- Transforms of functions whose values failed ---- */

/* f(x, y) = sum(x * y * c), with c the payload (may be failed). */
static nv_status product_sum(void *payload, const nv_vec *in, nv_vec *out) {
  nv_array *c = payload;
  nv_array *p = nv_multiply(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)), c);
  return nv_vec_push(out, nv_sum(p, NULL, 0, false));
}

/* Applies value_and_grad over both inputs; checks the value and both gradients carry `want`
 * (or, when `want` is NULL, the values: grad_x = y c, grad_y = x c). */
static void check_value_and_grad(nv_array *x, nv_array *y, nv_array *c, const nv__error *want) {
  nv_closure *f = nv_closure_new(product_sum, c, NULL);
  nv_closure *vg = nv_value_and_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  cr_assert_eq(nv_vec_push(in, x), NV_OK);
  cr_assert_eq(nv_vec_push(in, y), NV_OK);
  cr_assert_eq(nv_closure_apply(vg, in, out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(out), 3);
  nv_array *value = nv_vec_get(out, 0), *gx = nv_vec_get(out, 1), *gy = nv_vec_get(out, 2);
  cr_assert(same_meta(gx, x) && same_meta(gy, y), "gradients of the inputs' shapes");
  if (want) {
    nv_array *all[3] = {value, gx, gy};
    for (int i = 0; i < 3; i++) {
      cr_assert_eq(nv_array_status(all[i]), want->status, "output %d", i);
      cr_assert_str_eq(nv_array_error(all[i]), want->msg, "output %d", i);
      float v[12];
      cr_assert_eq(nv_array_read(all[i], v, nv_array_nbytes(all[i])), want->status);
    }
  } else {
    float xv[12], yv[12], cv = 0, g[12];
    READ_F32(x, xv, 12);
    READ_F32(y, yv, 12);
    READ_F32(c, &cv, 1);
    READ_F32(gx, g, 12);
    for (int i = 0; i < 12; i++) cr_assert_float_eq(g[i], yv[i] * cv, 1e-6);
    READ_F32(gy, g, 12);
    for (int i = 0; i < 12; i++) cr_assert_float_eq(g[i], xv[i] * cv, 1e-6);
  }
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(vg);
  nv_closure_release(f);
}

/* The value failed, so the gradients must too: a failed node holds no inputs, so the walk back
 * from the value reaches nothing and once read the gradients back as zeros with NV_OK. */
Test(failed_arrays, value_and_grad_gradients_carry_the_error) {
  nv_array *x = make_input('f'), *y = make_input('f');
  nv_array *c = nv_array_float(1.5f);
  check_value_and_grad(x, y, c, NULL); /* healthy: the values */
  nv_array *bad = failed_like(x);
  check_value_and_grad(bad, y, c, the_error()); /* a failed input */
  check_value_and_grad(x, bad, c, the_error());
  nv_array *bad_c = failed_like(c);
  check_value_and_grad(x, y, bad_c, the_error()); /* a failed constant inside f */
  /* A failed input without metadata (bad arguments). */
  nv_array *one = nv_array_float(1);
  nv_array *bad_args = nv_reshape(one, (int[]){5}, 1);
  nv_release(one);
  nv__error *e = bad_args->node->error;
  nv_closure *f = nv_closure_new(product_sum, c, NULL);
  nv_closure *vg = nv_value_and_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, bad_args);
  nv_vec_push(in, y);
  cr_assert_eq(nv_closure_apply(vg, in, out), NV_OK, "%s", nv_last_error());
  for (size_t i = 0; i < nv_vec_size(out); i++) {
    cr_assert_eq(nv_array_status(nv_vec_get(out, i)), e->status);
    cr_assert_str_eq(nv_array_error(nv_vec_get(out, i)), e->msg);
  }
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(vg);
  nv_closure_release(f);
  nv_release(bad_args);
  nv_release(bad_c);
  nv_release(bad);
  nv_release(c);
  nv_release(x);
  nv_release(y);
}

/* vjp and jvp: results computed through a failed output carry its error. */
Test(failed_arrays, vjp_and_jvp_results_carry_the_error) {
  nv_array *x = make_input('f'), *y = make_input('f'), *two = nv_array_float(2);
  nv_array *bad_c = failed_like(two);
  nv_release(two);
  nv_closure *f = nv_closure_new(product_sum, bad_c, NULL);
  nv_vec *prim = nv_vec_new(), *cots = nv_vec_new(), *outs = nv_vec_new(), *res = nv_vec_new();
  nv_vec_push(prim, x);
  nv_vec_push(prim, y);
  nv_array *one = nv_array_float(1);
  nv_vec_push(cots, one);
  cr_assert_eq(nv_vjp(f, prim, cots, outs, res), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(res), 2);
  for (size_t i = 0; i < 2; i++) {
    nv_array *g = nv_vec_get(res, i);
    cr_assert_eq(nv_array_status(g), NV_ERR_OUT_OF_MEMORY, "vjp %zu", i);
    cr_assert_str_eq(nv_array_error(g), the_error()->msg);
    cr_assert(same_meta(g, x));
  }
  nv_vec_clear(outs);
  nv_vec_clear(res);
  cr_assert_eq(nv_jvp(f, prim, prim, outs, res), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(res), 1);
  cr_assert_eq(nv_array_status(nv_vec_get(res, 0)), NV_ERR_OUT_OF_MEMORY);
  cr_assert_eq(nv_array_ndim(nv_vec_get(res, 0)), 0);
  nv_vec_free(prim);
  nv_vec_free(cots);
  nv_vec_free(outs);
  nv_vec_free(res);
  nv_closure_release(f);
  nv_release(one);
  nv_release(bad_c);
  nv_release(x);
  nv_release(y);
}
