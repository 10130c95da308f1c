/* White-box tests of the column sums (src/cpu/reduce_cols.c, included so that each kernel can
 * be called whatever the CPU picks): the portable, AVX2 and AVX-512 kernels give the bits of the
 * plain float64 loop in row order for every width around the vector widths, row counts, positive
 * and negative strides and edge values, and write nothing past the width; so do the finished
 * float32 sums (divided and rounded once). The end-to-end sums are tested against NumPy in
 * tests/python/test_reduce.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "../../src/cpu/reduce_cols.c"

typedef void (*f32_fn)(double *, const float *, int64_t, int64_t, int64_t);
typedef void (*f64_fn)(double *, const double *, int64_t, int64_t, int64_t);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_bits(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Values of mixed magnitude (so that the order of the additions shows in the bits), with
 * NaN, infinities, signed zeros and denormals where `edges`. */
static double value(bool edges) {
  uint64_t b = next_bits();
  if (edges && b % 13 == 0) {
    static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-42, 1e-310};
    return special[(b >> 8) % 8];
  }
  double u = (double)(b >> 11) / 9007199254740992.0 - 0.5;
  return u * pow(10.0, (double)((b >> 4) % 9) - 4.0);
}

static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b);
}

/* Runs the float32 and float64 kernels of one path on `rows` rows of width w (row stride st,
 * negative when `flip`) against the plain loop, bit for bit; g beyond w must stay untouched. */
static void check_path(const char *name, f32_fn k32, f64_fn k64) {
  static const int64_t widths[] = {0,  1,  3,  4,  7,  8,  9,  15,  16, 17,
                                   31, 32, 33, 47, 63, 64, 65, 100, 257};
  static const int64_t row_counts[] = {0, 1, 2, 7, 8, 32, 41};
  for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
    for (size_t ri = 0; ri < sizeof row_counts / sizeof *row_counts; ri++)
      for (int flip = 0; flip < 2; flip++)
        for (int edges = 0; edges < 2; edges++) {
          int64_t w = widths[wi], rows = row_counts[ri], st = w + 5, n = (rows ? rows : 1) * st;
          float *xf = malloc((size_t)n * sizeof *xf);
          double *xd = malloc((size_t)n * sizeof *xd);
          double g32[300], g64[300], want32[300], want64[300];
          for (int64_t i = 0; i < n; i++) {
            xd[i] = value(edges);
            xf[i] = (float)value(edges);
          }
          for (int j = 0; j < 300; j++)
            g32[j] = g64[j] = want32[j] = want64[j] = j < w ? value(edges) : 777.0;
          /* Row r at base + r * s: with flip the rows run backwards through memory. */
          int64_t s = flip ? -st : st, base = flip ? (rows ? rows - 1 : 0) * st : 0;
          for (int64_t j = 0; j < w; j++)
            for (int64_t r = 0; r < rows; r++) {
              want32[j] += xf[base + r * s + j];
              want64[j] += xd[base + r * s + j];
            }
          k32(g32, xf + base, s, rows, w);
          k64(g64, xd + base, s, rows, w);
          for (int j = 0; j < 300; j++) {
            cr_assert(same_bits(g32[j], want32[j]),
                      "%s f32 w=%lld rows=%lld flip=%d edges=%d: column %d: %.17g, want %.17g",
                      name, (long long)w, (long long)rows, flip, edges, j, g32[j], want32[j]);
            cr_assert(same_bits(g64[j], want64[j]),
                      "%s f64 w=%lld rows=%lld flip=%d edges=%d: column %d: %.17g, want %.17g",
                      name, (long long)w, (long long)rows, flip, edges, j, g64[j], want64[j]);
          }
          free(xf);
          free(xd);
        }
}

typedef void (*out_fn)(float *, const float *, int64_t, int64_t, int64_t, double);

/* The finished float32 sums: each column summed from zero in row order in float64, divided by
 * div and rounded once, bit for bit; y beyond w untouched. */
static void check_out(const char *name, out_fn k) {
  static const int64_t widths[] = {0, 1, 5, 8, 15, 16, 17, 31, 32, 33, 64, 65, 100, 257};
  static const int64_t row_counts[] = {0, 1, 3, 32, 41};
  static const double divs[] = {1.0, 7.0, 32.0};
  for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
    for (size_t ri = 0; ri < sizeof row_counts / sizeof *row_counts; ri++)
      for (size_t di = 0; di < 3; di++)
        for (int edges = 0; edges < 2; edges++) {
          int64_t w = widths[wi], rows = row_counts[ri], st = -(w + 3);
          int64_t n = (rows ? rows : 1) * (w + 3);
          float *x = malloc((size_t)n * sizeof *x), y[300], want[300];
          for (int64_t i = 0; i < n; i++) x[i] = (float)value(edges);
          const float *x0 = x + (rows ? rows - 1 : 0) * (w + 3); /* rows backwards in memory */
          for (int j = 0; j < 300; j++) y[j] = want[j] = 555.0f;
          for (int64_t j = 0; j < w; j++) {
            double a = 0.0;
            for (int64_t r = 0; r < rows; r++) a += x0[r * st + j];
            want[j] = (float)(a / divs[di]);
          }
          k(y, x0, st, rows, w, divs[di]);
          for (int j = 0; j < 300; j++)
            cr_assert(memcmp(&y[j], &want[j], 4) == 0 || (y[j] != y[j] && want[j] != want[j]),
                      "%s w=%lld rows=%lld div=%g edges=%d: column %d: %.9g, want %.9g", name,
                      (long long)w, (long long)rows, divs[di], edges, j, y[j], want[j]);
          free(x);
        }
}

Test(reduce_cols, portable_finished_sums) { check_out("portable", cols_out_f32_base); }

#if defined(__x86_64__) && defined(__GNUC__)
Test(reduce_cols, avx2_finished_sums) {
  if (isa_level() < 1) cr_skip_test("no AVX2");
  check_out("avx2", cols_out_f32_avx2);
}

Test(reduce_cols, avx512_finished_sums) {
  if (isa_level() < 2) cr_skip_test("no AVX-512");
  check_out("avx512", cols_out_f32_avx512);
}
#endif

Test(reduce_cols, picked_finished_sums) { check_out("picked", nv__cols_sum_f32_out); }

Test(reduce_cols, portable_kernel_is_the_plain_loop) {
  check_path("portable", cols_sum_f32_base, cols_sum_f64_base);
}

#if defined(__x86_64__) && defined(__GNUC__)
Test(reduce_cols, avx2_kernel_is_the_plain_loop) {
  if (isa_level() < 1) cr_skip_test("no AVX2");
  check_path("avx2", cols_sum_f32_avx2, cols_sum_f64_avx2);
}

Test(reduce_cols, avx512_kernel_is_the_plain_loop) {
  if (isa_level() < 2) cr_skip_test("no AVX-512");
  check_path("avx512", cols_sum_f32_avx512, cols_sum_f64_avx512);
}
#endif

/* The entry points pick a kernel once and give the plain loop's bits too. */
static void picked_f32(double *g, const float *x, int64_t st, int64_t rows, int64_t w) {
  nv__cols_sum_f32(g, x, st, rows, w);
}
static void picked_f64(double *g, const double *x, int64_t st, int64_t rows, int64_t w) {
  nv__cols_sum_f64(g, x, st, rows, w);
}

Test(reduce_cols, picked_kernel_is_the_plain_loop) {
  check_path("picked", picked_f32, picked_f64);
}
