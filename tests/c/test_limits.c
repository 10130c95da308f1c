/* Sizes at the edges of what the types hold: element counts and byte sizes that overflow are
 * clean errors (out of memory when too large to allocate, invalid argument when the count
 * itself overflows int64), never a wrapped size that allocates too little; arguments at
 * INT_MAX are checked before they are used. */
#include <criterion/criterion.h>
#include <limits.h>

#include "testutil.h"

/* `x` failed when built, or fails when evaluated, with `want`; its message names `op`. */
static void expect_fails(nv_array *x, nv_status want, const char *op, const char *what) {
  cr_assert_not_null(x);
  nv_status st = nv_array_status(x);
  if (st == NV_OK) st = nv_eval(&x, 1);
  cr_assert_eq(st, want, "%s: status %d (%s), want %d", what, st, nv_last_error(), want);
  const char *msg = nv_array_error(x);
  cr_assert(strstr(msg, op), "%s: message '%s' does not name %s", what, msg, op);
  nv_release(x);
}

Test(limits, the_allocator_refuses_sizes_near_size_max) {
  size_t sizes[] = {SIZE_MAX, SIZE_MAX - 63, (SIZE_MAX / 4) * 3, SIZE_MAX / 2 + 1,
                    (size_t)INT64_MAX + 1, ((size_t)INT_MAX * INT_MAX) * 4};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    nv_clear_error();
    nv__buffer *b = nv__buffer_alloc(sizes[i]);
    cr_assert_null(b, "%zu bytes were allocated (capacity %zu)", sizes[i], b ? b->capacity : 0);
    cr_assert(strstr(nv_last_error(), "too large") || strstr(nv_last_error(), "out of memory"),
              "%s", nv_last_error());
  }
  /* Still usable afterwards. */
  nv__buffer *b = nv__buffer_alloc(4096);
  cr_assert_not_null(b);
  cr_assert_geq(b->capacity, 4096);
  nv__buffer_release(b);
}

/* {INT_MAX, INT_MAX} float32 is 2^64 - 2^34 + 4 bytes: the size class once rounded it up to
 * 2^64, which wrapped to a 0-byte buffer that the kernel then wrote past. */
Test(limits, creation_of_int_max_squared) {
  int shape[2] = {INT_MAX, INT_MAX};
  expect_fails(nv_zeros(shape, 2, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "full", "zeros");
  expect_fails(nv_ones(shape, 2, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "full", "ones");
  expect_fails(nv_full(shape, 2, 3.0, NV_DTYPE_INT64), NV_ERR_OUT_OF_MEMORY, "full", "full");
  expect_fails(nv_init_constant(shape, 2, 1.0, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "full",
               "init_constant");
  expect_fails(nv_init_identity(shape, 2, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "eye",
               "init_identity");
  expect_fails(nv_identity(INT_MAX, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "eye", "identity");
  expect_fails(nv_eye(INT_MAX, INT_MAX, 3, NV_DTYPE_FLOAT64), NV_ERR_OUT_OF_MEMORY, "eye", "eye");
  expect_fails(nv_tri(INT_MAX, INT_MAX, 0, NV_DTYPE_FLOAT32), NV_ERR_OUT_OF_MEMORY, "tri", "tri");
  /* One byte per element: 2^62 bytes are countable, and evaluating them is out of memory. */
  expect_fails(nv_zeros(shape, 2, NV_DTYPE_BOOL), NV_ERR_OUT_OF_MEMORY, "", "zeros bool");
  expect_fails(nv_tri(INT_MAX, -1, 0, NV_DTYPE_BOOL), NV_ERR_OUT_OF_MEMORY, "", "tri bool");
  expect_fails(nv_identity(INT_MAX, NV_DTYPE_UINT8), NV_ERR_OUT_OF_MEMORY, "", "identity u8");
}

/* 2^62 float32 elements are 2^64 bytes, which wrapped to 0: evaluation "succeeded" with
 * nbytes == 0 and reading an element crashed. */
Test(limits, byte_size_wrapping_to_zero) {
  int shape[3] = {1 << 30, 1 << 30, 4};
  nv_array *z = nv_zeros(shape, 3, NV_DTYPE_FLOAT32);
  cr_assert_neq(nv_array_status(z), NV_OK, "built with nbytes %zu", nv_array_nbytes(z));
  const char *msg = nv_array_error(z);
  cr_assert(strstr(msg, "(1073741824,1073741824,4)") && strstr(msg, "float32"), "%s", msg);
  expect_fails(z, NV_ERR_OUT_OF_MEMORY, "full", "zeros (2^30,2^30,4)");
  /* The same shape as a broadcast view and as the result of a binary op. */
  nv_array *one = nv_array_float(1);
  expect_fails(nv_broadcast_to(one, shape, 3), NV_ERR_OUT_OF_MEMORY, "broadcast_to",
               "broadcast_to");
  int col[3] = {1 << 30, 1, 4}, row[3] = {1, 1 << 30, 4};
  nv_array *c = nv_broadcast_to(one, col, 3), *r = nv_broadcast_to(one, row, 3);
  cr_assert_eq(nv_array_status(c), NV_OK, "%s", nv_last_error());
  expect_fails(nv_add(c, r), NV_ERR_OUT_OF_MEMORY, "add", "add");
  nv_release(c);
  nv_release(r);
  nv_release(one);
}

Test(limits, element_counts_past_int64) {
  /* 64 dimensions of INT_MAX: the count itself overflows int64. */
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < NV__MAX_DIMS; i++) shape[i] = INT_MAX;
  expect_fails(nv_zeros(shape, 5, NV_DTYPE_BOOL), NV_ERR_INVALID_ARGUMENT, "full", "zeros 5-D");
  /* A zero dimension does not hide an overflowing product. */
  shape[0] = 0;
  expect_fails(nv_zeros(shape, 5, NV_DTYPE_BOOL), NV_ERR_INVALID_ARGUMENT, "full", "zeros 0");
  int zero[1] = {0};
  nv_array *e = nv_zeros(zero, 1, NV_DTYPE_FLOAT32);
  expect_fails(nv_reshape(e, shape, NV__MAX_DIMS), NV_ERR_INVALID_ARGUMENT, "reshape",
               "reshape");
  expect_fails(nv_unflatten(e, 0, shape, 40), NV_ERR_INVALID_ARGUMENT, "reshape", "unflatten");
  /* The overflow found before a zero dimension is reached. */
  shape[0] = INT_MAX;
  shape[NV__MAX_DIMS - 1] = 0;
  expect_fails(nv_reshape(e, shape, NV__MAX_DIMS), NV_ERR_INVALID_ARGUMENT, "reshape",
               "reshape, zero last");
  expect_fails(nv_unflatten(e, 0, shape + NV__MAX_DIMS - 40, 40), NV_ERR_INVALID_ARGUMENT,
               "unflatten", "unflatten, zero last");
  nv_release(e);
  /* as_strided with extents past int64. */
  int big[2] = {INT_MAX, INT_MAX};
  int64_t strides[2] = {INT64_MAX / 2, INT64_MAX / 2};
  nv_array *y = nv_ones(big, 0, NV_DTYPE_FLOAT32);
  expect_fails(nv_as_strided(y, big, 2, strides, 0), NV_ERR_INVALID_ARGUMENT, "as_strided",
               "as_strided");
  nv_release(y);
}

Test(limits, tile_with_int_max_reps) {
  nv_array *x = nv_array_float(2);
  int reps[1] = {3};
  nv_array *t = nv_tile(x, reps, INT_MAX);
  cr_assert_eq(nv_array_status(t), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_array_error(t), "tile") && strstr(nv_array_error(t), "dimensions"), "%s",
            nv_array_error(t));
  nv_release(t);
  int many[NV__MAX_DIMS / 2 + 1];
  for (int i = 0; i < NV__MAX_DIMS / 2 + 1; i++) many[i] = 1;
  t = nv_tile(x, many, NV__MAX_DIMS / 2 + 1);
  cr_assert_eq(nv_array_status(t), NV_ERR_INVALID_ARGUMENT);
  nv_release(t);
  /* The largest count still works. */
  t = nv_tile(x, many, NV__MAX_DIMS / 2);
  cr_assert_eq(nv_array_ndim(t), NV__MAX_DIMS / 2);
  float v;
  READ_F32(t, &v, 1);
  cr_assert_eq(v, 2);
  nv_release(t);
  reps[0] = INT_MAX;
  t = nv_tile(x, reps, 1);
  cr_assert_eq(nv_array_dim(t, 0), INT_MAX, "%s", nv_last_error());
  nv_release(t);
  nv_release(x);
}

Test(limits, device_name_into_no_buffer) {
  nv_device_name(nv_cpu(), NULL, 2);
  nv_device_name(nv_gpu(0), NULL, 100);
  char buf[8] = "xxxxxxx";
  nv_device_name(nv_cpu(), buf, 0);
  cr_assert_eq(buf[0], 'x');
  nv_device_name(nv_cpu(), buf, 2);
  cr_assert_str_eq(buf, "c");
  nv_device_name(nv_gpu(3), buf, sizeof buf);
  cr_assert_str_eq(buf, "gpu:3");
}
