/* The matmul family from C: every kernel path (BLAS in place, packed, batched in parallel,
 * folded, float16 through float32, exact integers, vecdot) on small exact values, so the
 * sanitizer builds run each path; errors; and allocation failures inside the kernels, which
 * must fail the array and free what they took. */
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>

#include "core/internal.h"
#include "nuvec.h"

/* Small integers: every product below is exact in every dtype, bfloat16 included. */
static double val(int64_t i, int salt) { return (double)((i * 7 + salt * 3) % 5 - 2); }

static nv_array *make(const int *shape, int nd, nv_dtype dt, int salt) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
  for (int64_t i = 0; i < n; i++) d[i] = val(i, salt);
  nv_array *x = nv_array_from_data(d, shape, nd, NV_DTYPE_FLOAT64);
  free(d);
  nv_array *y = nv_astype(x, dt);
  nv_release(x);
  return y;
}

/* `x` read as float64 (n elements). */
static double *read64(nv_array *x, int64_t n) {
  nv_array *y = nv_astype(x, NV_DTYPE_FLOAT64);
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
  cr_assert_eq(nv_array_read(y, d, (size_t)n * sizeof *d), NV_OK, "%s", nv_last_error());
  nv_release(y);
  return d;
}

/* An exact integer sum as the dtype holds it (unsigned dtypes wrap negative values). */
static double as_dtype(double s, nv_dtype dt) {
  if (!nv_issubdtype(dt, NV_CATEGORY_UNSIGNED_INTEGER)) return s;
  uint64_t u = (uint64_t)(int64_t)s;
  size_t bits = 8 * nv_dtype_size(dt);
  if (bits < 64) u &= (1ull << bits) - 1;
  return (double)u;
}

/* Checks z = a @ b for a (batch, M, K) and b (K, N) or (batch, K, N) made by make(). */
static void check_mm(nv_array *z, int batch, int M, int K, int N, bool b_batched, bool at, int sa,
                     int sb) {
  double *got = read64(z, (int64_t)batch * M * N);
  for (int t = 0; t < batch; t++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double s = 0;
        nv_dtype dt = nv_array_dtype(z);
        for (int k = 0; k < K; k++) {
          /* a was made (batch, K, M) and transposed when `at`. */
          int64_t ia = at ? ((int64_t)t * K + k) * M + i : ((int64_t)t * M + i) * K + k;
          int64_t ib = b_batched ? ((int64_t)t * K + k) * N + j : (int64_t)k * N + j;
          s += val(ia, sa) * val(ib, sb);
        }
        s = as_dtype(s, dt);
        cr_assert_eq(got[((int64_t)t * M + i) * N + j], s, "batch %d (%d,%d): %g != %g", t, i, j,
                     got[((int64_t)t * M + i) * N + j], s);
      }
  free(got);
}

static const nv_dtype all_numeric[] = {
    NV_DTYPE_UINT8,   NV_DTYPE_UINT16,  NV_DTYPE_UINT32,   NV_DTYPE_UINT64,  NV_DTYPE_INT8,
    NV_DTYPE_INT16,   NV_DTYPE_INT32,   NV_DTYPE_INT64,    NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16,
    NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64, NV_DTYPE_COMPLEX64};
#define NDT (sizeof all_numeric / sizeof *all_numeric)

Test(linalg, matmul_paths_every_dtype) {
  long live = nv__test_live_buffers();
  for (size_t d = 0; d < NDT; d++) {
    nv_dtype dt = all_numeric[d];
    /* Plain, shared b (folded), batched b (parallel batches), transposed a (BLAS Trans). */
    int sa[3] = {6, 5, 4}, sb2[2] = {4, 3}, sb3[3] = {6, 4, 3}, perm[3] = {0, 2, 1};
    nv_array *a = make(sa, 3, dt, 1), *b2 = make(sb2, 2, dt, 2), *b3 = make(sb3, 3, dt, 3);
    nv_array *z = nv_matmul(a, b2);
    check_mm(z, 6, 5, 4, 3, false, false, 1, 2);
    nv_release(z);
    z = nv_matmul(a, b3);
    check_mm(z, 6, 5, 4, 3, true, false, 1, 3);
    nv_release(z);
    int sat[3] = {6, 4, 5};
    nv_array *a2 = make(sat, 3, dt, 4), *a2t = nv_transpose(a2, perm, 3);
    z = nv_matmul(a2t, b3);
    check_mm(z, 6, 5, 4, 3, true, true, 4, 3);
    nv_release(z);
    nv_release(a2t);
    nv_release(a2);
    nv_release(a);
    nv_release(b2);
    nv_release(b3);
  }
  cr_assert_eq(nv__test_live_buffers(), live);
}

Test(linalg, matmul_negative_strides_pack) {
  /* A reversed view has negative strides: BLAS cannot read it, the kernel packs it. */
  int s[2] = {5, 7}, start[2] = {4, 6}, stop[2] = {-6, -8}, step[2] = {-1, -1};
  nv_array *x = make(s, 2, NV_DTYPE_FLOAT32, 5);
  nv_array *r = nv_slice(x, start, stop, step, 2);
  int perm[2] = {1, 0};
  nv_array *rt = nv_transpose(r, perm, 2);
  nv_array *z = nv_matmul(r, rt); /* (5,7) @ (7,5) */
  double *got = read64(z, 25);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) {
      double acc = 0;
      for (int k = 0; k < 7; k++)
        acc += val((4 - i) * 7 + (6 - k), 5) * val((4 - j) * 7 + (6 - k), 5);
      cr_assert_eq(got[i * 5 + j], acc);
    }
  free(got);
  nv_release(z);
  nv_release(rt);
  nv_release(r);
  nv_release(x);
}

Test(linalg, matmul_complex_values) {
  float complex av[4] = {1 + 2 * I, 3 - I, -2 + I, 0.5f * I}, bv[2] = {2 - I, 1 + I};
  int sa[2] = {2, 2}, sb[2] = {2, 1};
  nv_array *a = nv_array_from_data(av, sa, 2, NV_DTYPE_COMPLEX64);
  nv_array *b = nv_array_from_data(bv, sb, 2, NV_DTYPE_COMPLEX64);
  nv_array *z = nv_matmul(a, b);
  float complex out[2];
  cr_assert_eq(nv_array_read(z, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(out[0], av[0] * bv[0] + av[1] * bv[1]);
  cr_assert_eq(out[1], av[2] * bv[0] + av[3] * bv[1]);
  nv_array *v = nv_vecdot(a, a, -1); /* conj(a) · a: squared norms of the rows */
  cr_assert_eq(nv_array_read(v, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(out[0], 15);
  cr_assert_eq(out[1], 5.25f);
  nv_release(v);
  nv_release(z);
  nv_release(a);
  nv_release(b);
}

Test(linalg, addmm_half_and_float) {
  nv_dtype dts[3] = {NV_DTYPE_FLOAT16, NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64};
  for (int d = 0; d < 3; d++) {
    int sa[2] = {3, 4}, sb[2] = {4, 2}, sc[1] = {2};
    nv_array *a = make(sa, 2, dts[d], 1), *b = make(sb, 2, dts[d], 2), *c = make(sc, 1, dts[d], 3);
    nv_array *z = nv_addmm(c, a, b, 2.0, 0.5);
    double *got = read64(z, 6);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) {
        double s = 0;
        for (int k = 0; k < 4; k++) s += val(i * 4 + k, 1) * val(k * 2 + j, 2);
        cr_assert_eq(got[i * 2 + j], 2 * s + 0.5 * val(j, 3));
      }
    free(got);
    nv_release(z);
    nv_release(a);
    nv_release(b);
    nv_release(c);
  }
}

Test(linalg, vecdot_and_composed_ops) {
  int s[2] = {3, 1000};
  nv_array *a = make(s, 2, NV_DTYPE_FLOAT64, 1), *b = make(s, 2, NV_DTYPE_FLOAT64, 2);
  nv_array *v = nv_vecdot(a, b, 1);
  double *got = read64(v, 3);
  for (int i = 0; i < 3; i++) {
    double acc = 0;
    for (int k = 0; k < 1000; k++) acc += val(i * 1000 + k, 1) * val(i * 1000 + k, 2);
    cr_assert_eq(got[i], acc);
  }
  free(got);
  nv_release(v);
  nv_array *ai = nv_astype(a, NV_DTYPE_INT8), *bi = nv_astype(b, NV_DTYPE_INT8);
  v = nv_vecdot(ai, bi, -1);
  cr_assert_eq(nv_array_dtype(v), NV_DTYPE_INT32);
  nv_release(v);
  /* Over axis 0 the kernel walks columns (segments of the contiguous output axis). */
  nv_array *srcs[4] = {a, ai, NULL, NULL};
  srcs[2] = nv_astype(a, NV_DTYPE_FLOAT16);
  srcs[3] = nv_astype(a, NV_DTYPE_UINT64);
  for (int t = 0; t < 4; t++) {
    nv_array *bt = nv_astype(b, nv_array_dtype(srcs[t]));
    v = nv_vecdot(srcs[t], bt, 0);
    got = read64(v, 1000);
    for (int j = 0; j < 1000; j++) {
      double acc = 0;
      for (int i = 0; i < 3; i++) acc += val(i * 1000 + j, 1) * val(i * 1000 + j, 2);
      cr_assert_eq(got[j], t == 3 ? (double)(uint64_t)(int64_t)acc : acc, "t=%d j=%d", t, j);
    }
    free(got);
    nv_release(v);
    nv_release(bt);
  }
  nv_release(srcs[2]);
  nv_release(srcs[3]);
  nv_array *t = nv_tensordot(a, b, 2), *k = nv_kron(ai, bi), *o = nv_outer(a, b),
           *in = nv_inner(a, b);
  nv_array *all[4] = {t, k, o, in};
  cr_assert_eq(nv_eval(all, 4), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 4; i++) nv_release(all[i]);
  nv_release(ai);
  nv_release(bi);
  nv_release(a);
  nv_release(b);
}

Test(linalg, errors_name_op_and_shapes) {
  int s1[2] = {3, 4}, s2[2] = {5, 2};
  nv_array *a = make(s1, 2, NV_DTYPE_FLOAT32, 1), *b = make(s2, 2, NV_DTYPE_FLOAT32, 1);
  nv_array *z = nv_matmul(a, b);
  cr_assert_eq(nv_array_status(z), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_array_error(z), "matmul") && strstr(nv_array_error(z), "(3,4)") &&
            strstr(nv_array_error(z), "(5,2)"));
  cr_assert_neq(nv_eval1(z), NV_OK);
  nv_array *w = nv_addmm(a, z, b, 1, 1); /* sticky */
  cr_assert_str_eq(nv_array_error(w), nv_array_error(z));
  nv_array *n = nv_vecdot(NULL, a, 0);
  cr_assert(strstr(nv_array_error(n), "vecdot"));
  nv_release(n);
  nv_release(w);
  nv_release(z);
  nv_release(a);
  nv_release(b);
}

/* Every allocation of a product's evaluation fails in turn: the result fails with out of
 * memory, nothing leaks, and the next evaluation works. */
Test(linalg, allocation_failures) {
  nv_dtype dts[4] = {NV_DTYPE_FLOAT16, NV_DTYPE_INT16, NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64};
  for (int d = 0; d < 4; d++) {
    int sa[3] = {2, 3, 4}, sb[2] = {4, 5}, start[2] = {3, 4}, stop[2] = {-5, -6},
        step[2] = {-1, -1};
    nv_array *a = make(sa, 3, dts[d], 1), *b = make(sb, 2, dts[d], 2);
    nv_array *br = nv_slice(b, start, stop, step, 2);
    nv_array *xs[2] = {a, br};
    cr_assert_eq(nv_eval(xs, 2), NV_OK);
    long live = nv__test_live_buffers();
    bool failed = true;
    for (long k = 1; failed && k < 64; k++) {
      nv_array *z = nv_matmul(a, br);
      nv_array *v = nv_vecdot(a, a, -1);
      nv_array *ys[2] = {z, v};
      nv__test_fail_alloc_at(k);
      nv_status st = nv_eval(ys, 2);
      nv__test_fail_alloc_at(0);
      failed = st != NV_OK;
      if (failed) cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "k=%ld: %s", k, nv_last_error());
      nv_release(z);
      nv_release(v);
      cr_assert_eq(nv__test_live_buffers(), live, "k=%ld", k);
    }
    cr_assert(!failed);
    nv_release(br);
    nv_release(a);
    nv_release(b);
  }
}
