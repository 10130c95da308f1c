/* Function export and import: a round trip equals calling the function (element-wise, views,
 * reductions, matmul, indexing, several dtypes, bit for bit), keyword inputs, constants (stored
 * once per file, unevaluated ones as their graphs), several traces per file, shapeless traces,
 * grad and vmap of an imported function, non-contiguous inputs, the errors (no matching trace,
 * a closed exporter, a repeated signature, an unexportable primitive named), and bad files:
 * missing, every truncation, every flipped byte, and flipped bytes with the checksum made to
 * match (the structural checks alone) all fail with a message, never a crash. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

static char path[256];

/* On the default device (the GPU run's stage 1 makes it the GPU): the imported function and the
 * function itself run there alike. */
static void setup(void) {
  snprintf(path, sizeof path, "/tmp/nuvec_test_export_%d.nvfn", (int)getpid());
}
static void teardown(void) { unlink(path); }

TestSuite(export, .init = setup, .fini = teardown);

/* ---- Functions ---- */

/* x * y + 1 */
static nv_status f_axpy(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(
      out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)), nv_weak_scalar(1.0)));
}

/* Views, reductions, a product, indexing and conversions over a (4, 6) float input. Two
 * outputs. */
static nv_status f_mix(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  nv_array *t = nv_transpose(x, NULL, 0); /* (6, 4) */
  nv_array *m = nv_matmul(x, t);          /* (4, 4) */
  int start[2] = {1, 0}, stop[2] = {4, 6}, step[2] = {2, 3};
  nv_array *s = nv_slice(x, start, stop, step, 2); /* (2, 2) */
  int sh[2] = {3, 8};
  nv_array *r = nv_reshape(x, sh, 2);
  int ax[1] = {1};
  nv_array *red = nv_sum(r, ax, 1, true); /* (3, 1) */
  nv_array *sm = nv_softmax(m, ax, 1, false);
  int32_t iv[3] = {3, 0, 2};
  nv_array *idx = i32v(iv, 3);
  nv_array *tk = nv_take(sm, idx, 0); /* (3, 4) */
  nv_array *h = nv_astype(nv_exp(nv_negative(tk)), NV_DTYPE_FLOAT16);
  nv_array *y = nv_add(nv_astype(h, NV_DTYPE_FLOAT32), red); /* (3, 4) */
  nv_status st = nv_vec_push(out, nv_maximum(y, nv_weak_scalar(0.5)));
  if (st == NV_OK)
    st = nv_vec_push(out, nv_multiply(s, nv_sum(t, NULL, 0, false)));
  return st;
}

/* x + 2 * a + 3 * b (a and b given by keyword) */
static nv_status f_kw(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  /* Positional x, then the keywords in name order: a, b. */
  nv_array *x = nv_vec_get(in, 0), *a = nv_vec_get(in, 1), *b = nv_vec_get(in, 2);
  return nv_vec_push(out, nv_add(nv_add(x, nv_multiply(a, nv_weak_scalar(2.0))),
                                 nv_multiply(b, nv_weak_scalar(3.0))));
}

/* x + c (c captured) */
static nv_status f_const(void *p, const nv_vec *in, nv_vec *out) {
  nv_array *c = p;
  nv_array *acc = c;
  for (size_t i = 0; i < nv_vec_size(in); i++)
    acc = nv_add(acc, nv_vec_get(in, i));
  return nv_vec_push(out, nv_vec_size(in) ? acc : nv_add(c, nv_weak_scalar(0.0)));
}

/* x * 2 + 1 (element-wise: shapeless) */
static nv_status f_ew(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(
      out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_weak_scalar(2.0)), nv_weak_scalar(1.0)));
}

/* sum(reshape(x, (-1, 2)), axis 0): shapeless by the reshape and reduction rules */
static nv_status f_rs(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int sh[2] = {-1, 2}, ax[1] = {0};
  return nv_vec_push(out, nv_sum(nv_reshape(nv_vec_get(in, 0), sh, 2), ax, 1, false));
}

/* x[1:] + 1: a slice has no shape rule */
static nv_status f_slice(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int start[1] = {1}, stop[1] = {INT32_MAX}, step[1] = {1};
  return nv_vec_push(
      out, nv_add(nv_slice(nv_vec_get(in, 0), start, stop, step, 1), nv_weak_scalar(1.0)));
}

/* sum(sin(x) * x): for grad */
static nv_status f_sumsq(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0);
  return nv_vec_push(out, nv_sum(nv_multiply(nv_sin(x), x), NULL, 0, false));
}

/* No inputs: a (3, 3) full and an arange. */
static nv_status f_none(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  (void)in;
  int sh[2] = {3, 3};
  nv_status s = nv_vec_push(out, nv_full(sh, 2, 0.25, NV_DTYPE_FLOAT32));
  if (s == NV_OK)
    s = nv_vec_push(out, nv_arange(0, 5, 1, NV_DTYPE_INT32));
  return s;
}

static nv_status f_vjp_times100(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_multiply(nv_vec_get(in, 1), nv_weak_scalar(100.0)));
}

/* ---- Helpers ---- */

static nv_array *randn(unsigned *st, const int *shape, int nd, nv_dtype dt) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++)
    v[i] = test_randf(st);
  nv_array *x = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT32);
  free(v);
  if (dt != NV_DTYPE_FLOAT32) {
    nv_array *y = nv_astype(x, dt);
    nv_release(x);
    cr_assert_eq(nv_eval1(y), NV_OK);
    x = y;
  }
  return x;
}

static nv_vec *vec(nv_array *a, nv_array *b, nv_array *c) {
  nv_vec *v = nv_vec_new();
  nv_array *xs[3] = {a, b, c};
  for (int i = 0; i < 3; i++)
    if (xs[i])
      nv_vec_push(v, xs[i]);
  return v;
}

/* The same bytes, dtype and shape. */
static void assert_identical(nv_array *x, nv_array *y) {
  cr_assert_eq(nv_array_dtype(x), nv_array_dtype(y));
  cr_assert_eq(nv_array_ndim(x), nv_array_ndim(y));
  for (int d = 0; d < nv_array_ndim(x); d++)
    cr_assert_eq(nv_array_dim(x, d), nv_array_dim(y, d));
  size_t n = nv_array_nbytes(x);
  unsigned char *a = malloc(n + 1), *b = malloc(n + 1);
  cr_assert_eq(nv_array_read(x, a, n), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_read(y, b, n), NV_OK, "%s", nv_last_error());
  cr_assert(!memcmp(a, b, n), "the imported function's result differs");
  free(a);
  free(b);
}

/* Calls the imported function and the original on (args, kwargs) and compares every output. */
static void check_same(nv_imported *m, nv_closure *f, nv_vec *args, nv_map *kw) {
  nv_vec *o1 = nv_vec_new(), *o2 = nv_vec_new(), *all = nv_vec_new();
  cr_assert_eq(nv_imported_call(m, args, kw, o1), NV_OK, "%s", nv_last_error());
  for (size_t i = 0; i < nv_vec_size(args); i++)
    nv_vec_push(all, nv_vec_get(args, i));
  for (size_t i = 0; kw && i < nv_map_size(kw); i++) /* the tests give keywords in name order */
    nv_vec_push(all, nv_map_value(kw, i));
  cr_assert_eq(nv_closure_apply(f, all, o2), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(o1), nv_vec_size(o2));
  for (size_t i = 0; i < nv_vec_size(o1); i++)
    assert_identical(nv_vec_get(o1, i), nv_vec_get(o2, i));
  nv_vec_free(o1);
  nv_vec_free(o2);
  nv_vec_free(all);
}

static unsigned char *read_file(const char *p, size_t *n) {
  FILE *fp = fopen(p, "rb");
  cr_assert(fp);
  fseek(fp, 0, SEEK_END);
  *n = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *b = malloc(*n + 1);
  cr_assert_eq(fread(b, 1, *n, fp), *n);
  fclose(fp);
  return b;
}

/* ---- Round trips ---- */

Test(export, round_trip_equals_the_function) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_axpy, NULL, NULL);
  int sh[2] = {3, 5};
  nv_array *x = randn(&st, sh, 2, NV_DTYPE_FLOAT32), *y = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
  nv_vec *args = vec(x, y, NULL);
  cr_assert_eq(nv_export_function(path, f, args, NULL, NULL), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  cr_assert_eq(nv_imported_traces(m), 1);
  /* Other values of the same signature. */
  for (int k = 0; k < 3; k++) {
    nv_array *a = randn(&st, sh, 2, NV_DTYPE_FLOAT32), *b = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
    nv_vec *v = vec(a, b, NULL);
    check_same(m, f, v, NULL);
    nv_vec_free(v);
    nv_release(a);
    nv_release(b);
  }
  nv_imported_release(m);
  nv_vec_free(args);
  nv_release(x);
  nv_release(y);
  nv_closure_release(f);
}

Test(export, views_products_reductions_indexing_bit_for_bit) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_mix, NULL, NULL);
  int sh[2] = {4, 6};
  nv_dtype dts[3] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, NV_DTYPE_FLOAT64};
  nv_exporter *e = nv_exporter_new(path, f, NULL);
  cr_assert(e);
  for (int d = 0; d < 3; d++) {
    nv_array *x = randn(&st, sh, 2, dts[d]);
    nv_vec *v = vec(x, NULL, NULL);
    cr_assert_eq(nv_exporter_call(e, v, NULL), NV_OK, "%s", nv_last_error());
    nv_vec_free(v);
    nv_release(x);
  }
  cr_assert_eq(nv_exporter_close(e), NV_OK, "%s", nv_last_error());
  nv_exporter_free(e);
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  cr_assert_eq(nv_imported_traces(m), 3);
  for (int d = 0; d < 3; d++) {
    nv_array *x = randn(&st, sh, 2, dts[d]);
    nv_vec *v = vec(x, NULL, NULL);
    check_same(m, f, v, NULL);
    nv_vec_free(v);
    nv_release(x);
  }
  /* A dtype never exported: no trace matches. */
  nv_array *xi = nv_astype(randn(&st, sh, 2, NV_DTYPE_FLOAT32), NV_DTYPE_INT32);
  nv_vec *v = vec(xi, NULL, NULL), *o = nv_vec_new();
  cr_assert_eq(nv_imported_call(m, v, NULL, o), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "no exported trace matches"), "%s", nv_last_error());
  cr_assert(strstr(nv_last_error(), "int32"), "%s", nv_last_error());
  nv_vec_free(v);
  nv_vec_free(o);
  nv_release(xi);
  nv_imported_release(m);
  nv_closure_release(f);
}

Test(export, non_contiguous_inputs_are_made_contiguous) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_mix, NULL, NULL);
  int sh[2] = {4, 6}, tsh[2] = {6, 4};
  nv_array *x = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  cr_assert_eq(nv_export_function(path, f, v, NULL, NULL), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  nv_array *base = randn(&st, tsh, 2, NV_DTYPE_FLOAT32);
  nv_array *xt = nv_transpose(base, NULL, 0); /* (4, 6), strided */
  nv_vec *w = vec(xt, NULL, NULL);
  check_same(m, f, w, NULL);
  nv_vec_free(w);
  nv_vec_free(v);
  nv_release(xt);
  nv_release(base);
  nv_release(x);
  nv_imported_release(m);
  nv_closure_release(f);
}

Test(export, keyword_inputs_by_name) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_kw, NULL, NULL);
  int sh[1] = {4};
  nv_array *x = randn(&st, sh, 1, NV_DTYPE_FLOAT32), *a = randn(&st, sh, 1, NV_DTYPE_FLOAT32),
           *b = randn(&st, sh, 1, NV_DTYPE_FLOAT32);
  nv_vec *args = vec(x, NULL, NULL);
  nv_map *kw = nv_map_new();
  nv_map_set(kw, "b", b); /* given out of order: f receives them by name */
  nv_map_set(kw, "a", a);
  cr_assert_eq(nv_export_function(path, f, args, kw, NULL), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  nv_map *kw2 = nv_map_new();
  nv_map_set(kw2, "a", a);
  nv_map_set(kw2, "b", b);
  check_same(m, f, args, kw2);
  /* Positional where keywords were exported, or other names: no match. */
  nv_vec *three = vec(x, a, b), *o = nv_vec_new();
  cr_assert_eq(nv_imported_call(m, three, NULL, o), NV_ERR_INVALID_ARGUMENT);
  nv_map *kw3 = nv_map_new();
  nv_map_set(kw3, "a", a);
  nv_map_set(kw3, "c", b);
  cr_assert_eq(nv_imported_call(m, args, kw3, o), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "c="), "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(o), 0);
  nv_map_free(kw);
  nv_map_free(kw2);
  nv_map_free(kw3);
  nv_vec_free(three);
  nv_vec_free(o);
  nv_vec_free(args);
  nv_release(x);
  nv_release(a);
  nv_release(b);
  nv_imported_release(m);
  nv_closure_release(f);
}

Test(export, constants_stored_once_and_unevaluated_ones_as_graphs) {
  unsigned st = test_seed();
  int sh[2] = {16, 256};
  nv_array *c = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(c), NV_OK);
  /* The function reads c + 0 when called without inputs: a graph on c, not a new array. */
  nv_closure *f = nv_closure_new(f_const, c, NULL);
  nv_exporter *e = nv_exporter_new(path, f, NULL);
  nv_array *one = nv_array_scalar(1.0f, NV_DTYPE_FLOAT32),
           *two = nv_array_scalar(2.0f, NV_DTYPE_FLOAT32);
  for (int k = 0; k < 3; k++) {
    nv_vec *v = vec(k > 0 ? one : NULL, k > 1 ? two : NULL, NULL);
    cr_assert_eq(nv_exporter_call(e, v, NULL), NV_OK, "%s", nv_last_error());
    nv_vec_free(v);
  }
  nv_exporter_free(e); /* closes: writes the file */
  size_t n;
  free(read_file(path, &n));
  cr_assert_lt(n, nv_array_nbytes(c) + 4096, "%zu bytes for a %zu-byte constant", n,
               nv_array_nbytes(c));
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  for (int k = 0; k < 3; k++) {
    nv_array *a = nv_array_scalar(0.5f, NV_DTYPE_FLOAT32),
             *b = nv_array_scalar(-3.0f, NV_DTYPE_FLOAT32);
    nv_vec *v = vec(k > 0 ? a : NULL, k > 1 ? b : NULL, NULL);
    check_same(m, f, v, NULL);
    nv_vec_free(v);
    nv_release(a);
    nv_release(b);
  }
  nv_imported_release(m);
  /* An unevaluated captured array: its graph goes into the file, its value is the trace's. */
  nv_array *lazy = nv_multiply(c, nv_array_scalar(3.0f, NV_DTYPE_FLOAT32));
  nv_closure *g = nv_closure_new(f_const, lazy, NULL);
  nv_vec *v = vec(one, NULL, NULL);
  cr_assert_eq(nv_export_function(path, g, v, NULL, NULL), NV_OK, "%s", nv_last_error());
  m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  check_same(m, g, v, NULL);
  nv_imported_release(m);
  nv_vec_free(v);
  nv_closure_release(g);
  nv_release(lazy);
  nv_release(one);
  nv_release(two);
  nv_closure_release(f);
  nv_release(c);
}

Test(export, no_inputs_and_metadata) {
  nv_closure *f = nv_closure_new(f_none, NULL, NULL);
  nv_export_options o = {.metadata = "{\"model\": 1}"};
  cr_assert_eq(nv_export_function(path, f, NULL, NULL, &o), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  size_t len;
  cr_assert_str_eq(nv_imported_metadata(m, &len), "{\"model\": 1}");
  cr_assert_eq(len, 12);
  nv_vec *none = nv_vec_new();
  check_same(m, f, none, NULL);
  nv_vec_free(none);
  nv_imported_release(m);
  nv_closure_release(f);
}

Test(export, shapeless_traces_replay_on_other_shapes) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_ew, NULL, NULL), *g = nv_closure_new(f_rs, NULL, NULL),
             *h = nv_closure_new(f_slice, NULL, NULL);
  nv_export_options o = {.shapeless = true};
  int s4[1] = {4}, s10[1] = {10}, s23[2] = {2, 3};
  nv_array *x4 = randn(&st, s4, 1, NV_DTYPE_FLOAT32), *x10 = randn(&st, s10, 1, NV_DTYPE_FLOAT32),
           *x23 = randn(&st, s23, 2, NV_DTYPE_FLOAT32);
  nv_vec *v4 = vec(x4, NULL, NULL), *v10 = vec(x10, NULL, NULL), *v23 = vec(x23, NULL, NULL);
  nv_vec *o1 = nv_vec_new();
  nv_closure *fs[2] = {f, g};
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(nv_export_function(path, fs[k], v4, NULL, &o), NV_OK, "%s", nv_last_error());
    nv_imported *m = nv_import_function(path);
    cr_assert(m, "%s", nv_last_error());
    check_same(m, fs[k], v4, NULL);
    check_same(m, fs[k], v10, NULL);
    /* Another rank: no trace. */
    cr_assert_eq(nv_imported_call(m, v23, NULL, o1), NV_ERR_INVALID_ARGUMENT);
    nv_imported_release(m);
  }
  /* A slice has no shape rule: its own shape works, another fails naming it. */
  cr_assert_eq(nv_export_function(path, h, v4, NULL, &o), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  check_same(m, h, v4, NULL);
  cr_assert_eq(nv_imported_call(m, v10, NULL, o1), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "slice"), "%s", nv_last_error());
  nv_imported_release(m);
  /* Without shapeless, another shape has no trace. */
  cr_assert_eq(nv_export_function(path, f, v4, NULL, NULL), NV_OK, "%s", nv_last_error());
  m = nv_import_function(path);
  cr_assert_eq(nv_imported_call(m, v10, NULL, o1), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_vec_size(o1), 0);
  nv_imported_release(m);
  nv_vec_free(o1);
  nv_vec_free(v4);
  nv_vec_free(v10);
  nv_vec_free(v23);
  nv_release(x4);
  nv_release(x10);
  nv_release(x23);
  nv_closure_release(f);
  nv_closure_release(g);
  nv_closure_release(h);
}

Test(export, grad_and_vmap_of_an_imported_function) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_sumsq, NULL, NULL);
  int sh[1] = {7};
  nv_array *x = randn(&st, sh, 1, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  cr_assert_eq(nv_export_function(path, f, v, NULL, NULL), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  nv_closure *c = nv_imported_closure(m);
  nv_imported_release(m); /* the closure holds it */
  nv_closure *g1 = nv_grad(c, NULL, 0), *g2 = nv_grad(f, NULL, 0);
  nv_vec *o1 = nv_vec_new(), *o2 = nv_vec_new();
  cr_assert_eq(nv_closure_apply(g1, v, o1), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_closure_apply(g2, v, o2), NV_OK, "%s", nv_last_error());
  assert_identical(nv_vec_get(o1, 0), nv_vec_get(o2, 0));
  nv_vec_clear(o1);
  nv_vec_clear(o2);
  /* vmap over rows of a (3, 7) input: each row a call of the (7,) trace. */
  int sh2[2] = {3, 7};
  nv_array *xb = randn(&st, sh2, 2, NV_DTYPE_FLOAT32);
  nv_vec *vb = vec(xb, NULL, NULL);
  nv_closure *m1 = nv_vmap(c, NULL, 0, NULL, 0), *m2 = nv_vmap(f, NULL, 0, NULL, 0);
  cr_assert_eq(nv_closure_apply(m1, vb, o1), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_closure_apply(m2, vb, o2), NV_OK, "%s", nv_last_error());
  assert_identical(nv_vec_get(o1, 0), nv_vec_get(o2, 0));
  nv_closure_release(m1);
  nv_closure_release(m2);
  nv_vec_free(vb);
  nv_release(xb);
  nv_vec_free(o1);
  nv_vec_free(o2);
  nv_closure_release(g1);
  nv_closure_release(g2);
  nv_closure_release(c);
  nv_vec_free(v);
  nv_release(x);
  nv_closure_release(f);
}

/* Several threads call one imported function at once: each gets its own results. */
typedef struct call_job {
  nv_imported *m;
  nv_closure *f;
  unsigned seed;
  int bad;
} call_job;

static void *call_many(void *p) {
  call_job *j = p;
  int sh[2] = {4, 6};
  for (int k = 0; k < 20; k++) {
    int64_t n = 24;
    float v[24];
    for (int64_t i = 0; i < n; i++)
      v[i] = test_randf(&j->seed);
    nv_array *x = nv_array_from_data(v, sh, 2, NV_DTYPE_FLOAT32);
    nv_vec *in = nv_vec_new(), *o1 = nv_vec_new(), *o2 = nv_vec_new();
    nv_vec_push(in, x);
    if (nv_imported_call(j->m, in, NULL, o1) != NV_OK || nv_closure_apply(j->f, in, o2) != NV_OK)
      j->bad++;
    for (size_t i = 0; !j->bad && i < nv_vec_size(o1); i++) {
      size_t nb = nv_array_nbytes(nv_vec_get(o1, i));
      unsigned char *a = malloc(nb + 1), *b = malloc(nb + 1);
      if (nv_array_read(nv_vec_get(o1, i), a, nb) != NV_OK ||
          nv_array_read(nv_vec_get(o2, i), b, nb) != NV_OK || memcmp(a, b, nb))
        j->bad++;
      free(a);
      free(b);
    }
    nv_vec_free(in);
    nv_vec_free(o1);
    nv_vec_free(o2);
    nv_release(x);
  }
  return NULL;
}

Test(export, threads_call_one_imported_function) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_mix, NULL, NULL);
  int sh[2] = {4, 6};
  nv_array *x = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  cr_assert_eq(nv_export_function(path, f, v, NULL, NULL), NV_OK, "%s", nv_last_error());
  nv_imported *m = nv_import_function(path);
  cr_assert(m, "%s", nv_last_error());
  pthread_t th[4];
  call_job jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (call_job){m, f, st + 17u * (unsigned)(i + 1), 0};
    cr_assert_eq(pthread_create(&th[i], NULL, call_many, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(jobs[i].bad, 0, "thread %d: %d calls differed or failed", i, jobs[i].bad);
  }
  nv_imported_release(m);
  nv_vec_free(v);
  nv_release(x);
  nv_closure_release(f);
}

/* ---- Errors ---- */

Test(export, exporter_errors) {
  nv_closure *f = nv_closure_new(f_ew, NULL, NULL);
  nv_array *x = nv_array_scalar(1.0f, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  nv_exporter *e = nv_exporter_new(path, f, NULL);
  cr_assert_eq(nv_exporter_call(e, v, NULL), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_exporter_call(e, v, NULL), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "already exported"), "%s", nv_last_error());
  cr_assert_eq(nv_exporter_close(e), NV_OK);
  cr_assert(nv_exporter_closed(e));
  cr_assert_eq(nv_exporter_call(e, v, NULL), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "closed"), "%s", nv_last_error());
  nv_exporter_free(e);
  /* A NULL input and a failed one. */
  nv_vec *bad = nv_vec_new();
  int sh[1] = {5};
  nv_array *failed = nv_reshape(x, sh, 1);
  nv_vec_push(bad, failed);
  cr_assert_neq(nv_export_function(path, f, bad, NULL, NULL), NV_OK);
  cr_assert(strstr(nv_last_error(), "positional input 0"), "%s", nv_last_error());
  nv_vec_free(bad);
  nv_release(failed);
  cr_assert_eq(nv_export_function(NULL, f, v, NULL, NULL), NV_ERR_INVALID_ARGUMENT);
  cr_assert_eq(nv_export_function("/nonexistent_dir/x.nvfn", f, v, NULL, NULL), NV_ERR_IO);
  nv_vec_free(v);
  nv_release(x);
  nv_closure_release(f);
}

Test(export, custom_function_cannot_be_exported) {
  nv_closure *f = nv_closure_new(f_ew, NULL, NULL),
             *vj = nv_closure_new(f_vjp_times100, NULL, NULL);
  nv_closure *cf = nv_custom_function(f, vj, NULL, NULL);
  nv_array *x = nv_array_scalar(1.0f, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  cr_assert_eq(nv_export_function(path, cf, v, NULL, NULL), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "custom_function"), "%s", nv_last_error());
  cr_assert_neq(access(path, F_OK), 0, "a failed export wrote a file");
  nv_vec_free(v);
  nv_release(x);
  nv_closure_release(cf);
  nv_closure_release(vj);
  nv_closure_release(f);
}

/* ---- Bad files ---- */

static void expect_bad(const unsigned char *b, size_t n) {
  nv_clear_error();
  nv_imported *m = nv_import_function_from_memory(b, n);
  if (m) {
    nv_imported_release(m);
    return;
  }
  cr_assert(nv_last_error()[0], "a failed import without a message");
}

static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

Test(export, missing_truncated_and_corrupt_files) {
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(f_mix, NULL, NULL);
  int sh[2] = {4, 6};
  nv_array *x = randn(&st, sh, 2, NV_DTYPE_FLOAT32);
  nv_vec *v = vec(x, NULL, NULL);
  cr_assert_eq(nv_export_function(path, f, v, NULL, NULL), NV_OK, "%s", nv_last_error());
  size_t n;
  unsigned char *b = read_file(path, &n);
  cr_assert_null(nv_import_function("/tmp/nuvec_no_such_file.nvfn"));
  cr_assert(strstr(nv_last_error(), "cannot open"), "%s", nv_last_error());
  /* Every truncation fails with a message. */
  for (size_t k = 0; k < n; k++) {
    cr_assert_null(nv_import_function_from_memory(b, k), "a %zu-byte prefix imported", k);
    cr_assert(nv_last_error()[0]);
  }
  /* Every flipped byte fails (the header's fields or the checksum). */
  for (size_t k = 0; k < n; k++) {
    b[k] ^= 0x5a;
    cr_assert_null(nv_import_function_from_memory(b, n), "byte %zu flipped imported", k);
    b[k] ^= 0x5a;
  }
  cr_assert_null(nv_import_function_from_memory(b, n > 40 ? 40 : n));
  /* The structural checks alone: flipped payload bytes with the checksum made to match either
   * import (a parameter or data byte) or fail with a message; none crashes. */
  size_t failed = 0;
  for (size_t k = 32; k < n; k++) {
    for (int bit = 0; bit < 8; bit += 3) {
      b[k] ^= (unsigned char)(1u << bit);
      uint64_t h = fnv(b + 32, n - 32);
      memcpy(b + 24, &h, 8);
      nv_clear_error();
      nv_imported *m = nv_import_function_from_memory(b, n);
      if (!m) {
        failed++;
        cr_assert(nv_last_error()[0]);
      }
      nv_imported_release(m);
      b[k] ^= (unsigned char)(1u << bit);
    }
  }
  cr_assert_gt(failed, 0);
  uint64_t h = fnv(b + 32, n - 32);
  memcpy(b + 24, &h, 8);
  /* Another version. */
  b[8] = 99;
  cr_assert_null(nv_import_function_from_memory(b, n));
  cr_assert(strstr(nv_last_error(), "version"), "%s", nv_last_error());
  b[8] = 1;
  nv_imported *m = nv_import_function_from_memory(b, n);
  cr_assert(m, "%s", nv_last_error());
  nv_imported_release(m);
  expect_bad((const unsigned char *)"garbage", 7);
  free(b);
  nv_vec_free(v);
  nv_release(x);
  nv_closure_release(f);
}
