/* The foundation: dtypes and conversions, arrays and views, scopes, containers, memory,
 * devices and errors. */
#include <criterion/criterion.h>

#include "core/convert.h"
#include "testutil.h"

/* ---- dtypes ---- */

Test(dtype, sizes_names_and_lookup) {
  cr_assert_eq(nv_dtype_size(NV_DTYPE_BFLOAT16), 2);
  cr_assert_eq(nv_dtype_size(NV_DTYPE_COMPLEX64), 8);
  cr_assert_eq(nv_dtype_size((nv_dtype)99), 0);
  cr_assert_str_eq(nv_dtype_name(NV_DTYPE_UINT16), "uint16");
  nv_dtype d;
  cr_assert_eq(nv_dtype_from_name("bfloat16", &d), NV_OK);
  cr_assert_eq(d, NV_DTYPE_BFLOAT16);
  d = NV_DTYPE_INT8;
  cr_assert_eq(nv_dtype_from_name("float8", &d), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(d, NV_DTYPE_INT8, "out-param untouched on failure");
  cr_assert(strstr(nv_last_error(), "float8") != NULL);
}

Test(dtype, promotion_table_entries) {
  struct {
    nv_dtype a, b, want;
  } cases[] = {
      {NV_DTYPE_INT64, NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT32},
      {NV_DTYPE_UINT8, NV_DTYPE_INT8, NV_DTYPE_INT16},
      {NV_DTYPE_UINT16, NV_DTYPE_INT16, NV_DTYPE_INT32},
      {NV_DTYPE_UINT32, NV_DTYPE_INT8, NV_DTYPE_INT64},
      {NV_DTYPE_UINT64, NV_DTYPE_INT64, NV_DTYPE_FLOAT32},
      {NV_DTYPE_BOOL, NV_DTYPE_BOOL, NV_DTYPE_BOOL},
      {NV_DTYPE_BOOL, NV_DTYPE_UINT8, NV_DTYPE_UINT8},
      {NV_DTYPE_INT32, NV_DTYPE_FLOAT16, NV_DTYPE_FLOAT16},
      {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32},
      {NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT64, NV_DTYPE_FLOAT64},
      {NV_DTYPE_FLOAT64, NV_DTYPE_COMPLEX64, NV_DTYPE_COMPLEX64},
      {NV_DTYPE_INT8, NV_DTYPE_INT8, NV_DTYPE_INT8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cr_assert_eq(nv_promote_types(cases[i].a, cases[i].b), cases[i].want, "case %zu", i);
    cr_assert_eq(nv_promote_types(cases[i].b, cases[i].a), cases[i].want, "symmetric %zu", i);
  }
  cr_assert(nv_issubdtype(NV_DTYPE_BFLOAT16, NV_CATEGORY_FLOATING));
  cr_assert(nv_issubdtype(NV_DTYPE_UINT8, NV_CATEGORY_UNSIGNED_INTEGER));
  cr_assert(!nv_issubdtype(NV_DTYPE_BOOL, NV_CATEGORY_NUMBER));
  cr_assert(nv_issubdtype(NV_DTYPE_COMPLEX64, NV_CATEGORY_INEXACT));
}

Test(dtype, half_conversions_round_once_to_nearest_even) {
  /* float32 → float16: halfway cases tie to even, overflow to inf, subnormals. */
  cr_assert_eq(nv__f32_to_f16(1.0f), 0x3c00);
  cr_assert_eq(nv__f32_to_f16(1.0f + 0x1p-11f), 0x3c00, "tie to even (down)");
  cr_assert_eq(nv__f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02, "tie to even (up)");
  cr_assert_eq(nv__f32_to_f16(65504.0f), 0x7bff);
  cr_assert_eq(nv__f32_to_f16(65520.0f), 0x7c00, "rounds to inf");
  cr_assert_eq(nv__f32_to_f16(0x1p-24f), 0x0001, "smallest subnormal");
  cr_assert_eq(nv__f32_to_f16(0x1p-25f), 0x0000, "tie to even: zero");
  cr_assert_eq(nv__f32_to_f16(-0.0f), 0x8000);
  cr_assert_eq(nv__f32_to_f16(-INFINITY), 0xfc00);
  cr_assert((nv__f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (nv__f32_to_f16(NAN) & 0x3ff));
  /* float64 → float16 directly: 1 + 2^-11 + 2^-40 rounds up (through float32 it would tie). */
  cr_assert_eq(nv__f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  cr_assert_eq(nv__f64_to_f16(0x1p-24 * 1.5), 0x0002);
  /* bfloat16 */
  cr_assert_eq(nv__f32_to_bf16(1.0f), 0x3f80);
  cr_assert_eq(nv__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80, "tie to even");
  cr_assert_eq(nv__f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  cr_assert_eq(nv__f64_to_bf16(1.0 + 0x1p-8 + 0x1p-30), 0x3f81);
  cr_assert_eq(nv__f32_to_bf16(3.4e38f), 0x7f80, "overflow to inf");
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = nv__f16_to_f32((uint16_t)h);
    if (f == f) cr_assert_eq(nv__f32_to_f16(f), h, "f16 round trip %x", h);
    float b = nv__bf16_to_f32((uint16_t)h);
    if (b == b) cr_assert_eq(nv__f32_to_bf16(b), h, "bf16 round trip %x", h);
  }
}

Test(dtype, int64_to_narrow_floats_round_once) {
  /* 2^53 + 1 through double would round to 2^53 first; bfloat16 of 2^60 + 2^52 + 1 is just
   * above the halfway point between bf16 neighbours and must round up. */
  int64_t v = (1ll << 60) + (1ll << 52) + 1;
  cr_assert_eq(nv__f64_to_bf16(nv__i64_sticky(v)), 0x5d81);
  cr_assert_eq(nv__f64_to_bf16(nv__i64_sticky((1ll << 60) + (1ll << 52))), 0x5d80, "exact tie");
}

Test(dtype, fp8_e4m3_saturates_as_mlx) {
  cr_assert_eq(nv__f32_to_fp8(448.0f), 0x7e);
  cr_assert_eq(nv__f32_to_fp8(1e9f), 0x7e);
  cr_assert_eq(nv__f32_to_fp8(-INFINITY), 0xfe);
  cr_assert_eq(nv__f32_to_fp8(NAN), 0x7e);
  cr_assert_eq(nv__f32_to_fp8(1.0f), 0x38);
  cr_assert_eq(nv__f32_to_fp8(0x1p-9f), 0x01, "smallest subnormal");
  cr_assert_float_eq(nv__fp8_to_f32(0x7e), 448.0f, 0);
  cr_assert(isnan(nv__fp8_to_f32(0x7f)));
  for (int b = 0; b < 256; b++) {
    float f = nv__fp8_to_f32((uint8_t)b);
    if (f == f && b != 0x80) cr_assert_eq(nv__f32_to_fp8(f), b, "round trip %x", b);
  }
  /* Through the ops. */
  float v[3] = {0.3f, -2.5f, 1000.0f};
  nv_array *x = f32v(v, 3);
  nv_array *q = nv_to_fp8(x);
  nv_array *back = nv_from_fp8(q, NV_DTYPE_FLOAT32);
  float out[3];
  READ_F32(back, out, 3);
  cr_assert_float_eq(out[0], 0.3125f, 0);
  cr_assert_float_eq(out[1], -2.5f, 0);
  cr_assert_float_eq(out[2], 448.0f, 0);
  cr_assert_eq(nv_array_status(nv_from_fp8(x, NV_DTYPE_FLOAT32)), NV_ERR_INVALID_ARGUMENT);
  nv_release(x);
  nv_release(q);
  nv_release(back);
}

/* ---- arrays ---- */

Test(array, creation_properties_and_reading_back) {
  int shape[3] = {2, 3, 4};
  nv_array *z = nv_zeros(shape, 3, NV_DTYPE_INT16);
  cr_assert_eq(nv_array_ndim(z), 3);
  cr_assert_eq(nv_array_dim(z, -1), 4);
  cr_assert_eq(nv_array_size(z), 24);
  cr_assert_eq(nv_array_nbytes(z), 48);
  cr_assert(nv_array_is_row_contiguous(z));
  cr_assert(!nv_array_is_evaluated(z));
  int16_t buf[24];
  cr_assert_eq(nv_array_read(z, buf, 10), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "(2,3,4)") != NULL, "%s", nv_last_error());
  cr_assert_eq(nv_array_read(z, buf, sizeof buf), NV_OK);
  for (int i = 0; i < 24; i++) cr_assert_eq(buf[i], 0);
  double d;
  cr_assert_eq(nv_array_item_double(z, &d), NV_ERR_INVALID_ARGUMENT);
  nv_release(z);
  nv_array *f = nv_full((int[]){2, 2}, 2, 2.5, NV_DTYPE_BFLOAT16);
  float fv[4];
  nv_array *f32 = nv_astype(f, NV_DTYPE_FLOAT32);
  READ_F32(f32, fv, 4);
  cr_assert(fv[0] == 2.5f && fv[3] == 2.5f);
  nv_release(f);
  nv_release(f32);
  bool b;
  nv_array *t = nv_array_bool(true);
  cr_assert_eq(nv_array_item_bool(t, &b), NV_OK);
  cr_assert(b);
  nv_release(t);
  nv_array *big = nv_array_uint64(UINT64_MAX);
  uint64_t u;
  cr_assert_eq(nv_array_item_uint64(big, &u), NV_OK);
  cr_assert_eq(u, UINT64_MAX);
  nv_release(big);
  nv_array *c = nv_array_complex(1.5f, -2);
  nv_complex64 cv;
  cr_assert_eq(nv_array_item_complex(c, &cv), NV_OK);
  cr_assert(cv.re == 1.5f && cv.im == -2);
  nv_release(c);
  cr_assert_eq(nv_array_status(nv_array_from_data(NULL, (int[]){-1}, 1, NV_DTYPE_FLOAT32)),
               NV_ERR_INVALID_ARGUMENT);
}

static int destroyed;
static void on_destroy(void *ctx) { destroyed += *(int *)ctx; }

Test(array, nocopy_calls_its_destructor_once) {
  static float data[4] = {1, 2, 3, 4};
  int one = 1;
  destroyed = 0;
  nv_array *x = nv_array_from_data_nocopy(data, (int[]){4}, 1, NV_DTYPE_FLOAT32, on_destroy, &one);
  nv_array *y = nv_reshape(x, (int[]){2, 2}, 2);
  nv_release(x);
  cr_assert_eq(nv_array_data(y), data, "a view of the caller's memory");
  cr_assert_eq(destroyed, 0);
  nv_release(y);
  cr_assert_eq(destroyed, 1);
}

Test(array, creation_ops) {
  nv_array *a = nv_arange(5, 0, -1.5, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_array_size(a), 4);
  float av[4];
  READ_F32(a, av, 4);
  cr_assert(av[0] == 5 && av[3] == 0.5f);
  nv_array *l = nv_linspace(0, 1, 5, NV_DTYPE_FLOAT64);
  double lv[5];
  cr_assert_eq(nv_array_read(l, lv, sizeof lv), NV_OK);
  cr_assert(lv[1] == 0.25 && lv[4] == 1.0);
  nv_array *e = nv_eye(2, 3, 1, NV_DTYPE_INT32);
  int32_t ev[6];
  READ_I32(e, ev, 6);
  int32_t we[6] = {0, 1, 0, 0, 0, 1};
  cr_assert_arr_eq(ev, we, sizeof we);
  /* eye(0) is empty (MLX 0.32: shape (0, 0)); a negative size is an error. */
  nv_array *e0 = nv_eye(0, -1, 0, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(e0), NV_OK);
  cr_assert_eq(nv_array_ndim(e0), 2);
  cr_assert_eq(nv_array_size(e0), 0);
  cr_assert_eq(nv_array_status(nv_eye(-1, -1, 0, NV_DTYPE_FLOAT32)), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_array_status(nv_arange(0, 1, 0, NV_DTYPE_FLOAT32)), NV_ERR_INVALID_ARGUMENT);
  nv_array *id = nv_identity(3, NV_DTYPE_BOOL);
  uint8_t iv[9];
  cr_assert_eq(nv_array_read(id, iv, 9), NV_OK);
  cr_assert(iv[0] == 1 && iv[1] == 0 && iv[4] == 1 && iv[8] == 1);
  nv_release(a);
  nv_release(l);
  nv_release(e);
  nv_release(id);
}

/* Every view against its copy: same values, no new buffer. */
static void check_view(nv_array *view, const float *want, int n, bool is_view) {
  long live = nv__test_live_buffers();
  float got[64];
  READ_F32(view, got, n);
  for (int i = 0; i < n; i++) cr_assert_eq(got[i], want[i], "element %d", i);
  if (is_view) cr_assert_eq(nv__test_live_buffers(), live, "a view allocates nothing");
  nv_array *c = nv_copy(view);
  float cv[64];
  READ_F32(c, cv, n);
  cr_assert_arr_eq(cv, want, (size_t)n * sizeof(float));
  cr_assert(nv_array_is_row_contiguous(c));
  nv_release(c);
}

Test(array, views_against_their_copies) {
  nv_scope_begin();
  nv_array *x = nv_reshape(nv_arange(0, 24, 1, NV_DTYPE_FLOAT32), (int[]){2, 3, 4}, 3);
  cr_assert_eq(nv_eval1(x), NV_OK);
  /* transpose */
  nv_array *t = nv_transpose(x, (int[]){2, 0, -2}, 3);
  cr_assert(!nv_array_is_row_contiguous(t));
  float want[24];
  for (int k = 0, i = 0; k < 4; k++)
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 3; b++) want[i++] = (float)(a * 12 + b * 4 + k);
  check_view(t, want, 24, true);
  /* broadcast */
  nv_array *row = nv_slice(x, (int[]){0, 1, 0}, (int[]){1, 2, 4}, NULL, 3);
  nv_array *bc = nv_broadcast_to(row, (int[]){2, 2, 1, 4}, 4);
  float wb[16];
  for (int i = 0; i < 16; i++) wb[i] = (float)(4 + i % 4);
  check_view(bc, wb, 16, true);
  /* slice with negative steps and clamping */
  nv_array *s = nv_slice(x, (int[]){-1, 10, -1}, (int[]){-10, 0, -5}, (int[]){-1, -2, -3}, 3);
  cr_assert_eq(nv_array_dim(s, 0), 2);
  cr_assert_eq(nv_array_dim(s, 1), 1);
  cr_assert_eq(nv_array_dim(s, 2), 2);
  float ws[4] = {12 + 8 + 3, 12 + 8 + 0, 8 + 3, 8 + 0};
  check_view(s, ws, 4, true);
  /* reshape: a view of contiguous data, a copy of a transposed one */
  nv_array *r = nv_reshape(x, (int[]){4, -1}, 2);
  cr_assert_eq(nv_array_dim(r, 1), 6);
  float wr[24];
  for (int i = 0; i < 24; i++) wr[i] = (float)i;
  check_view(r, wr, 24, true);
  nv_array *rt = nv_reshape(t, (int[]){24}, 1);
  check_view(rt, want, 24, false);
  /* a reshape that strides allow on a non-contiguous array: split an axis of a slice */
  nv_array *sl = nv_slice(x, (int[]){0, 0, 0}, (int[]){2, 3, 4}, (int[]){1, 1, 2}, 3);
  nv_array *rs = nv_reshape(sl, (int[]){2, 3, 2, 1}, 4);
  float wsl[12];
  for (int i = 0; i < 12; i++) wsl[i] = (float)(i * 2);
  check_view(rs, wsl, 12, true);
  cr_assert_eq(nv_array_status(nv_reshape(x, (int[]){5, -1}, 2)), NV_ERR_INVALID_ARGUMENT);
  /* squeeze / expand_dims */
  nv_array *e = nv_expand_dims(x, (int[]){0, -1}, 2);
  cr_assert_eq(nv_array_ndim(e), 5);
  cr_assert_eq(nv_array_dim(e, 4), 1);
  nv_array *q = nv_squeeze(e, NULL, 0);
  cr_assert_eq(nv_array_ndim(q), 3);
  check_view(q, wr, 24, true);
  cr_assert_eq(nv_array_status(nv_squeeze(x, (int[]){1}, 1)), NV_ERR_INVALID_ARGUMENT);
  /* as_strided: overlapping windows of contiguous data */
  nv_array *w = nv_as_strided(x, (int[]){3, 4}, 2, (int64_t[]){2, 1}, 1);
  float ww[12];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) ww[i * 4 + j] = (float)(1 + 2 * i + j);
  check_view(w, ww, 12, true);
  cr_assert_eq(nv_array_status(nv_as_strided(x, (int[]){30}, 1, (int64_t[]){1}, 0)),
               NV_ERR_INVALID_ARGUMENT, "reaching outside the data");
  /* contiguity flags */
  nv_array *col = nv_transpose(nv_reshape(x, (int[]){6, 4}, 2), NULL, 0);
  cr_assert(nv_array_is_col_contiguous(col) && !nv_array_is_row_contiguous(col));
  nv_scope_end();
}

/* ---- scopes ---- */

Test(scope, owns_releases_and_keeps_across_nesting) {
  long live = nv__test_live_buffers();
  nv_array *kept;
  cr_assert_eq(nv_scope_begin(), NV_OK);
  {
    nv_array *a = nv_ones((int[]){8}, 1, NV_DTYPE_FLOAT32);
    cr_assert_eq(nv_scope_begin(), NV_OK);
    nv_array *inner = nv_exp(nv_add(a, a));
    nv_array *dropped = nv_negative(a);
    nv_release(dropped); /* early release takes it out of the scope */
    nv_scope_keep(inner); /* to the outer scope */
    nv_scope_end();
    cr_assert_eq(nv_eval1(inner), NV_OK, "inner survives its scope");
    kept = nv_scope_keep(nv_sum(inner, NULL, 0, false)); /* to the caller */
  }
  nv_scope_end();
  float v;
  cr_assert_eq(nv_array_item_float(kept, &v), NV_OK);
  cr_assert_float_eq(v, 8 * expf(2), 1e-3);
  nv_release(kept);
  cr_assert_eq(nv__test_live_buffers(), live, "nothing leaked");
  nv_scope_end(); /* without a scope: nothing happens */
  cr_assert_eq(nv_scope_keep(NULL), NULL);
}

Test(scope, retained_scoped_array_outlives_the_scope) {
  nv_scope_begin();
  nv_array *a = nv_retain(nv_full((int[]){3}, 1, 7, NV_DTYPE_INT32));
  nv_scope_end();
  int32_t v[3];
  READ_I32(a, v, 3);
  cr_assert_eq(v[2], 7);
  nv_release(a);
}

/* ---- containers ---- */

Test(containers, vec_and_map) {
  nv_vec *v = nv_vec_new();
  nv_array *a = nv_array_float(1), *b = nv_array_float(2);
  cr_assert_eq(nv_vec_push(v, a), NV_OK);
  cr_assert_eq(nv_vec_push(v, b), NV_OK);
  cr_assert_eq(nv_vec_push(v, NULL), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_vec_size(v), 2);
  cr_assert_eq(nv_vec_get(v, 1), b);
  cr_assert_null(nv_vec_get(v, 2));
  cr_assert_eq(nv_vec_set(v, 0, b), NV_OK);
  cr_assert_eq(nv_eval_vec(v), NV_OK);
  nv_map *m = nv_map_new();
  cr_assert_eq(nv_map_set(m, "w", a), NV_OK);
  cr_assert_eq(nv_map_set(m, "b", b), NV_OK);
  cr_assert_eq(nv_map_set(m, "w", b), NV_OK, "replace in place");
  cr_assert_eq(nv_map_size(m), 2);
  cr_assert_str_eq(nv_map_key(m, 0), "w");
  cr_assert_eq(nv_map_value(m, 0), b);
  cr_assert_eq(nv_map_get(m, "b"), b);
  cr_assert(nv_map_remove(m, "w"));
  cr_assert(!nv_map_remove(m, "w"));
  cr_assert_str_eq(nv_map_key(m, 0), "b");
  nv_release(a);
  nv_release(b);
  nv_vec_free(v);
  nv_map_free(m);
  nv_vec_free(NULL);
  nv_map_free(NULL);
}

/* ---- memory ---- */

Test(memory, counters_cache_and_limit) {
  nv_set_default_device(nv_cpu()); /* the CPU's own rules, also where a GPU is the default */
  nv_clear_cache();
  size_t active = nv_get_active_memory();
  nv_array *x = nv_zeros((int[]){1 << 20}, 1, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(x), NV_OK);
  cr_assert_geq(nv_get_active_memory(), active + (4u << 20));
  cr_assert_geq(nv_get_peak_memory(), nv_get_active_memory());
  nv_release(x);
  cr_assert_eq(nv_get_active_memory(), active);
  cr_assert_geq(nv_get_cache_memory(), 4u << 20, "freed buffers are cached");
  nv_clear_cache();
  cr_assert_eq(nv_get_cache_memory(), 0);
  size_t old = nv_set_memory_limit(1 << 20);
  nv_array *y = nv_zeros((int[]){1 << 20}, 1, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(y), NV_ERR_OUT_OF_MEMORY);
  cr_assert(strstr(nv_last_error(), "limit") != NULL, "%s", nv_last_error());
  cr_assert_eq(nv_array_status(y), NV_ERR_OUT_OF_MEMORY, "sticky");
  nv_release(y);
  nv_set_memory_limit(old);
  size_t oldc = nv_set_cache_limit(0);
  nv_array *z = nv_zeros((int[]){1000}, 1, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(z), NV_OK);
  nv_release(z);
  cr_assert_eq(nv_get_cache_memory(), 0, "cache limit 0 keeps nothing");
  nv_set_cache_limit(oldc);
}

/* ---- devices, streams, errors ---- */

Test(device, streams_and_an_unavailable_gpu) {
  nv_set_default_device(nv_cpu()); /* the CPU's own rules, also where a GPU is the default */
  /* gpu:63: a GPU no machine here has. */
  char name[16];
  nv_device_name(nv_gpu(63), name, sizeof name);
  cr_assert_str_eq(name, "gpu:63");
  cr_assert(nv_device_is_available(nv_cpu()));
  cr_assert(!nv_device_is_available(nv_gpu(63)));
  nv_stream s1 = nv_new_stream(nv_cpu()), s2 = nv_new_stream(nv_cpu());
  cr_assert_neq(s1.index, s2.index);
  cr_assert_eq(nv_default_stream(nv_gpu(63)).index, nv_default_stream(nv_gpu(63)).index);
  cr_assert_eq(nv_stream_enter(s1), NV_OK);
  nv_array *a = nv_array_float(1);
  nv_array *b = nv_add(a, a);
  cr_assert_eq(nv_array_stream(b).index, s1.index, "an op records its stream");
  nv_stream_exit();
  cr_assert_eq(nv_current_stream().index, nv_default_stream(nv_cpu()).index);
  cr_assert_eq(nv_set_default_device(nv_gpu(63)), NV_OK);
  nv_array *g = nv_exp(b);
  cr_assert_eq(nv_set_default_device(nv_cpu()), NV_OK);
  cr_assert_eq(nv_eval1(g), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "exp: unsupported device gpu:63") != NULL, "%s",
            nv_last_error());
  cr_assert_eq(nv_stream_synchronize(nv_default_stream(nv_gpu(63))), NV_ERR_UNSUPPORTED);
  cr_assert_eq(nv_stream_synchronize(s1), NV_OK);
  nv_release(a);
  nv_release(b);
  nv_release(g);
  /* A settable default stream per device; new ops record it. */
  nv_stream old = nv_default_stream(nv_cpu());
  cr_assert_eq(nv_set_default_stream(s2), NV_OK);
  cr_assert_eq(nv_default_stream(nv_cpu()).index, s2.index);
  nv_array *c = nv_array_float(2);
  cr_assert_eq(nv_array_stream(c).index, s2.index);
  nv_release(c);
  cr_assert_eq(nv_set_default_stream(old), NV_OK);
  cr_assert_eq(nv_current_stream().index, old.index);
  nv_stream gs = nv_new_stream(nv_gpu(1));
  cr_assert_eq(nv_set_default_stream(gs), NV_OK);
  cr_assert_eq(nv_default_stream(nv_gpu(1)).index, gs.index);
  cr_assert_eq(nv_set_default_stream((nv_stream){-1, nv_cpu()}), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "set_default_stream") != NULL);
  cr_assert_eq(nv_set_default_stream((nv_stream){3, nv_gpu(64)}), NV_ERR_INVALID_ARGUMENT);
}

Test(errors, messages_null_inputs_and_status_strings) {
  nv_array *r = nv_add(NULL, NULL);
  cr_assert_not_null(r, "builders never return NULL");
  cr_assert_eq(nv_array_status(r), NV_ERR_INVALID_ARGUMENT);
  cr_assert_str_eq(nv_array_error(r), "add: input 0 is NULL");
  nv_release(r);
  cr_assert_eq(nv_eval(NULL, 1), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_array_read(NULL, NULL, 0), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_array_status(NULL), NV_ERR_INVALID_ARGUMENT);
  nv_release(NULL);
  cr_assert_str_eq(nv_status_string(NV_ERR_DEVICE_LOST), "device lost");
  nv_clear_error();
  cr_assert_str_eq(nv_last_error(), "");
  nv_array *x = nv_ones((int[]){2, 3}, 2, NV_DTYPE_FLOAT32);
  nv_array *t = nv_transpose(x, (int[]){0, 0}, 2);
  cr_assert(strstr(nv_array_error(t), "transpose") != NULL);
  nv_array *n = nv_negative(nv_array_bool(true));
  cr_assert(strstr(nv_array_error(n), "negative") != NULL);
  nv_array *sb = nv_subtract(x, nv_weak_int(1));
  cr_assert_eq(nv_array_status(sb), NV_OK);
  nv_release(x);
  nv_release(t);
  nv_release(n);
  nv_release(sb);
  cr_assert_str_eq(nv_version(), "0.1.0");
}
