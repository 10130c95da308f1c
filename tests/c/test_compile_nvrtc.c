/* The CUDA sources compile's fusion generates (src/transforms/fuse.c, generate_cuda) compile
 * with NVRTC here, without a GPU (the test hook nv__test_fuse_nvrtc has every CPU chain also
 * generate and compile its GPU source): float16/bfloat16 chains (8-wide vector loads, the
 * scalar path for broadcast rows), mixed with float32/float64/bool values, every cast among
 * them, escaping intermediates of each dtype, chains ending in row reductions. The values of
 * each chain are checked on the CPU against the uncompiled function. Skipped without the
 * CUDA backend. */
#include <criterion/criterion.h>
#include <math.h>

#include "testutil.h"
#include "transforms/compile_internal.h"

static nv_dtype dt_x, dt_y; /* the inputs' dtypes of the current case */

/* x*y + z, rounded per operation in x's dtype */
static nv_status f_axpy(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  return nv_vec_push(out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)),
                                 nv_vec_get(in, 2)));
}

/* Transcendentals, comparisons, where, minimum/maximum, division. */
static nv_status f_mix(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0), *y = nv_vec_get(in, 1), *z = nv_vec_get(in, 2);
  nv_array *a = nv_add(nv_multiply(nv_exp(nv_negative(nv_abs(x))), y), nv_weak_scalar(0.5));
  nv_array *b = nv_subtract(nv_tanh(a), nv_multiply(nv_sigmoid(x), nv_rsqrt(nv_abs(z))));
  nv_array *c = nv_where(nv_greater(b, nv_weak_scalar(0.0)), nv_maximum(b, y), nv_minimum(a, z));
  return nv_vec_push(out, nv_divide(c, nv_add(nv_sqrt(nv_abs(x)), nv_weak_scalar(1.0))));
}

/* Casts through every fusable dtype, with escaping intermediates of float16, bool and
 * float64. */
static nv_status f_casts(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  nv_array *x = nv_vec_get(in, 0), *z = nv_vec_get(in, 2);
  nv_array *d = nv_multiply(nv_astype(x, NV_DTYPE_FLOAT64), nv_weak_scalar(1.0 / 3.0));
  nv_array *h = nv_astype(d, NV_DTYPE_FLOAT16);             /* float64 -> float16, once */
  nv_array *bf = nv_astype(nv_add(h, h), NV_DTYPE_BFLOAT16); /* float16 -> bfloat16 */
  nv_array *m = nv_less(bf, nv_astype(z, NV_DTYPE_BFLOAT16));
  nv_array *r = nv_add(nv_astype(m, NV_DTYPE_BFLOAT16), nv_astype(nv_astype(bf, NV_DTYPE_FLOAT32),
                                                                   dt_x));
  nv_status s = nv_vec_push(out, nv_multiply(r, nv_weak_scalar(2.0)));
  if (s == NV_OK)
    s = nv_vec_push(out, nv_negative(h));
  if (s == NV_OK)
    s = nv_vec_push(out, m);
  return s == NV_OK ? nv_vec_push(out, d) : s;
}

/* sum(x.astype(float32) * y, -1) with x*y escaping: a float16/bfloat16 input read by the
 * reduction kernel, an escaping value stored in x's dtype. */
static nv_status f_rowsum(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int ax[1] = {-1};
  nv_array *x = nv_vec_get(in, 0), *y = nv_vec_get(in, 1);
  nv_array *t = nv_multiply(x, y);
  nv_status s = nv_vec_push(out, nv_sum(nv_astype(t, NV_DTYPE_FLOAT32), ax, 1, false));
  return s == NV_OK ? nv_vec_push(out, nv_exp(t)) : s;
}

enum { R = 9, D = 37, D4 = 40 };
static int cols = D; /* the rows' length of the current case: D, or D4 (whole vectors) */
static bool shapeless; /* whether the current case compiles shapeless (sizes as arguments) */

/* Whether a and b (one float dtype) agree within the dtype's tolerance, as float64. */
static bool close(nv_array *a, nv_array *b) {
  nv_dtype dt = nv_array_dtype(b);
  /* a float64 result may hold float32 parts */
  double tol = dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 ? 2e-2 : 1e-5;
  nv_array *a64 = nv_astype(a, NV_DTYPE_FLOAT64), *b64 = nv_astype(b, NV_DTYPE_FLOAT64);
  cr_assert_eq(nv_eval1(a64), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_eval1(b64), NV_OK, "%s", nv_last_error());
  const double *p = nv_array_data(a64), *q = nv_array_data(b64);
  bool ok = true;
  for (int64_t e = 0; ok && e < nv_array_size(b); e++)
    ok = fabs(p[e] - q[e]) <= tol * (fabs(q[e]) + 1) || (isnan(p[e]) && isnan(q[e]));
  nv_release(a64);
  nv_release(b64);
  return ok;
}

/* `body` over x (R, D) of dt_x, y of dt_y shaped (D,), (R, D) (`whole` 1: the vector path) or
 * (R, 1) (`whole` 2: a column, a block broadcast over the rows), z (R, D) of dt_x; compiled and uncompiled outputs equal bit for bit, or (`approx`: fused
 * transcendentals are libm's where the hand kernels use fast formulas, float32 reductions
 * accumulate in double) within close(). */
static void run(nv_closure_fn body, int whole, bool approx) {
  static float v[3][R * D4];
  unsigned st = test_seed();
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < R * cols; i++)
      v[k][i] = 2 * test_randf(&st);
  int s2[2] = {R, cols}, s1[1] = {cols}, sc[2] = {R, 1};
  nv_array *f[3] = {nv_array_from_data(v[0], s2, 2, NV_DTYPE_FLOAT32),
                    whole == 1   ? nv_array_from_data(v[1], s2, 2, NV_DTYPE_FLOAT32)
                    : whole == 2 ? nv_array_from_data(v[1], sc, 2, NV_DTYPE_FLOAT32)
                                 : nv_array_from_data(v[1], s1, 1, NV_DTYPE_FLOAT32),
                    nv_array_from_data(v[2], s2, 2, NV_DTYPE_FLOAT32)};
  nv_dtype dts[3] = {dt_x, dt_y, dt_x};
  nv_vec *in = nv_vec_new(), *ref = nv_vec_new(), *got = nv_vec_new();
  for (int k = 0; k < 3; k++) {
    nv_array *a = nv_astype(f[k], dts[k]);
    cr_assert_eq(nv_eval1(a), NV_OK, "%s", nv_last_error());
    nv_vec_push(in, a);
    nv_release(a);
    nv_release(f[k]);
  }
  nv_compile_options opt = {.shapeless = shapeless};
  nv_closure *raw = nv_closure_new(body, NULL, NULL), *c = nv_compile(raw, &opt);
  cr_assert_eq(nv_closure_apply(raw, in, ref), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_closure_apply(c, in, got), NV_OK, "%s", nv_last_error());
  nv_compile_stats stats;
  cr_assert_eq(nv_compile_get_stats(c, &stats), NV_OK);
  cr_assert_geq(stats.fused, 1, "nothing fused for %s/%s", nv_dtype_name(dt_x),
                nv_dtype_name(dt_y));
  cr_assert_eq(nv_vec_size(got), nv_vec_size(ref));
  for (size_t i = 0; i < nv_vec_size(ref); i++) {
    nv_array *a = nv_vec_get(got, i), *b = nv_vec_get(ref, i);
    cr_assert_eq(nv_eval1(a), NV_OK, "%s", nv_last_error());
    cr_assert_eq(nv_eval1(b), NV_OK, "%s", nv_last_error());
    cr_assert_eq(nv_array_dtype(a), nv_array_dtype(b));
    int64_t n = nv_array_size(b);
    if (approx)
      cr_assert(close(a, b), "output %zu not close (%s/%s)", i, nv_dtype_name(dt_x),
                nv_dtype_name(dt_y));
    else
      cr_assert_eq(memcmp(nv_array_data(a), nv_array_data(b),
                          (size_t)n * nv_dtype_size(nv_array_dtype(b))),
                   0, "output %zu differs (%s/%s)", i, nv_dtype_name(dt_x), nv_dtype_name(dt_y));
  }
  nv_vec_free(in);
  nv_vec_free(ref);
  nv_vec_free(got);
  nv_closure_release(c);
  nv_closure_release(raw);
}

/* max(exp(x * y + 0.25) - z, -1), and sum(x * y + z, -1): rows of whole vectors, nothing
 * escaping (the reductions' 4-wide vector steps; y a trailing row or whole). */
static nv_status f_rowvec(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int ax[1] = {-1};
  nv_array *x = nv_vec_get(in, 0), *y = nv_vec_get(in, 1), *z = nv_vec_get(in, 2);
  nv_array *t = nv_exp(nv_add(nv_multiply(x, y), nv_weak_scalar(0.25)));
  return nv_vec_push(out, nv_max(nv_subtract(t, z), ax, 1, false));
}
static nv_status f_rowvec_sum(void *p, const nv_vec *in, nv_vec *out) {
  (void)p;
  int ax[1] = {-1};
  nv_array *x = nv_vec_get(in, 0), *y = nv_vec_get(in, 1), *z = nv_vec_get(in, 2);
  return nv_vec_push(out, nv_sum(nv_add(nv_multiply(x, y), z), ax, 1, false));
}

/* CPU chains: the hook compiles the GPU source of each chain the CPU fuses. */
Test(compile_nvrtc, generated_half_sources_compile, .init = test_on_cpu, .fini = test_back) {
  long ok0, bad0, ok, bad;
  const char *why;
  if (!nv__test_fuse_nvrtc(true, &ok0, &bad0, &why))
    cr_skip_test("built without the CUDA backend");
  /* NVRTC takes about half a second a source: a few cases, each generated variant once.
   * f: the functions run, w: whether y is whole (the vector path) for each. */
  static const struct {
    nv_dtype x, y;
    const char *f, *w;
  } CASES[] = {
      {NV_DTYPE_FLOAT16, NV_DTYPE_FLOAT16, "aamcr", "10110"},
      {NV_DTYPE_BFLOAT16, NV_DTYPE_BFLOAT16, "amr", "100"},
      {NV_DTYPE_FLOAT16, NV_DTYPE_FLOAT32, "ac", "10"},
      {NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT64, "am", "11"},
      {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT16, "r", "0"},
  };
  int cases = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    dt_x = CASES[i].x;
    dt_y = CASES[i].y;
    for (const char *f = CASES[i].f, *w = CASES[i].w; *f; f++, w++, cases++) {
      bool whole = *w == '1';
      if (*f == 'a')
        run(f_axpy, whole, false);
      else if (*f == 'm')
        run(f_mix, whole, true);
      else if (*f == 'c')
        run(f_casts, whole, false);
      else
        run(f_rowsum, whole, true);
    }
  }
  /* Rows of whole vectors: float32 and float64 chains, y a trailing row and whole. */
  cols = D4;
  nv_dtype vd[2] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64};
  for (int i = 0; i < 2; i++)
    for (int whole = 0; whole < 2; whole++, cases++) {
      dt_x = dt_y = vd[i];
      run(whole ? f_rowvec_sum : f_rowvec, whole, true);
    }
  cols = D;
  nv__test_fuse_nvrtc(false, &ok, &bad, &why);
  cr_assert_eq(bad - bad0, 0, "NVRTC failed: %s", why);
  /* Each compile traces once: at least one generated source per case. */
  cr_assert_geq(ok - ok0, cases, "%ld sources compiled for %d cases", ok - ok0, cases);
}

/* A shapeless function's chains: their sources take the sizes as arguments (a trailing row's
 * and a column's periods, a reduction's row length), on the GPU in the launch's parameters. */
Test(compile_nvrtc, shapeless_sources_compile, .init = test_on_cpu, .fini = test_back) {
  long ok0, bad0, ok, bad;
  const char *why;
  if (!nv__test_fuse_nvrtc(true, &ok0, &bad0, &why))
    cr_skip_test("built without the CUDA backend");
  shapeless = true;
  int cases = 5;
  dt_x = dt_y = NV_DTYPE_FLOAT16;
  run(f_axpy, 0, false);
  run(f_axpy, 2, false);
  dt_x = dt_y = NV_DTYPE_FLOAT32;
  run(f_rowsum, 0, true);
  run(f_mix, 2, true);
  cols = D4;
  run(f_rowvec, 0, true);
  cols = D;
  shapeless = false;
  nv__test_fuse_nvrtc(false, &ok, &bad, &why);
  cr_assert_eq(bad - bad0, 0, "NVRTC failed: %s", why);
  cr_assert_geq(ok - ok0, cases, "%ld sources compiled for %d cases", ok - ok0, cases);
}
