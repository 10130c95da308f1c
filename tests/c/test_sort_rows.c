/* White-box tests of sort.c's row kernels as a CPU without AVX2 / AVX-512 runs them: the file is
 * included without function clones (NV_NO_CLONES: its loops compiled for the build's baseline
 * ISA only), and its portable kernels are called directly: argmax / argmin of float32 and
 * float64 rows (the path taken without AVX-512), and topk's heap selection with its block
 * skipping for float32 and for other keys. References are scalar scans and full sorts. */
#define NV_NO_CLONES 1
#include <criterion/criterion.h>
#include <math.h>

#include "../../src/cpu/sort.c"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t next_u32(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 32);
}

/* Row values of one kind: wide range, ties, signed zeros, NaN sprinkled, denormals and
 * infinities, ascending (every element enters a top-k heap). */
static double row_value(int kind, int64_t i) {
  uint32_t k = next_u32();
  switch (kind) {
    case 0:
      return (double)(int32_t)k / 65536.0;
    case 1:
      return (double)(k % 3);
    case 2:
      return k & 1 ? -0.0 : 0.0;
    case 3:
      return k % 11 == 0 ? NAN : (double)(k % 50) - 25.0;
    case 4: {
      static const double special[] = {INFINITY, -INFINITY, 1e-45, -1e-45, 1e-310, 0.0, -0.0, 3.0};
      return special[k % 8];
    }
    default:
      return (double)i;
  }
}

/* The first extreme of x[0, n), a NaN winning (its first one). */
static int64_t first_extreme(const double *x, int64_t n, bool max) {
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[at] != x[at]) break;
    if (x[i] != x[i] || (max ? x[i] > x[at] : x[i] < x[at])) at = i;
  }
  return at;
}

Test(sort_rows, portable_argmax_argmin_find_the_first_extreme) {
  double *d = malloc(1100 * sizeof *d);
  float *f = malloc(1100 * sizeof *f);
  for (int64_t n = 1; n <= 1100; n += n < 40 ? 1 : 53)
    for (int kind = 0; kind < 6; kind++) {
      for (int64_t i = 0; i < n; i++) f[i] = (float)row_value(kind, i);
      for (int64_t i = 0; i < n; i++) d[i] = f[i];
      for (int max = 0; max < 2; max++) {
        int64_t want = first_extreme(d, n, max);
        for (int pf = 0; pf < 2; pf++) {
          const float *nf = pf ? f + n / 3 : NULL;
          const double *nd = pf ? d + n / 3 : NULL;
          uint32_t a32 = max ? argmax_f32(f, n, nf) : argmin_f32(f, n, nf);
          uint32_t a64 = max ? argmax_f64(d, n, nd) : argmin_f64(d, n, nd);
          cr_assert_eq(a32, (uint32_t)want, "float32 n=%lld kind=%d max=%d", (long long)n, kind,
                       max);
          cr_assert_eq(a64, (uint32_t)want, "float64 n=%lld kind=%d max=%d", (long long)n, kind,
                       max);
        }
      }
    }
  free(d);
  free(f);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* topk_heap's k best (key, index) composites against the last k of all composites sorted, for
 * float32 rows (tested on their values) and int32 rows (on their keys, a chunk at a time). */
Test(sort_rows, portable_topk_heap_is_the_last_k_of_a_sort) {
  static const int64_t sizes[] = {8, 9, 16, 17, 63, 64, 65, 200, 511, 512, 513, 1500, 4099};
  static const int64_t ks[] = {1, 2, 8, 16, 64};
  float *f = malloc(4099 * sizeof *f);
  int32_t *iv = malloc(4099 * sizeof *iv);
  uint64_t *all = malloc(4099 * sizeof *all), *h = malloc(64 * sizeof *h);
  uint32_t *keys = malloc(4099 * sizeof *keys);
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (int kind = 0; kind < 6; kind++)
        for (int dt = 0; dt < 2; dt++) {
          int64_t n = sizes[si], k = ks[ki];
          if (k * 8 > n) continue; /* the heap's domain (topk_range) */
          nv_dtype type = dt ? NV_DTYPE_INT32 : NV_DTYPE_FLOAT32;
          for (int64_t i = 0; i < n; i++) {
            double v = row_value(kind, i);
            f[i] = (float)v;
            iv[i] = v != v ? INT32_MAX : (int32_t)(v > 1e9 ? 1e9 : v < -1e9 ? -1e9 : v * 8);
          }
          const char *x = dt ? (const char *)iv : (const char *)f;
          nv__to_keys32(type, x, n, keys, false);
          for (int64_t i = 0; i < n; i++) all[i] = (uint64_t)keys[i] << 32 | (uint64_t)i;
          qsort(all, (size_t)n, sizeof *all, cmp_u64);
          topk_heap(type, x, 4, n, k, h);
          for (int64_t q = 0; q < k; q++)
            cr_assert_eq(h[q], all[n - k + q], "%s n=%lld k=%lld kind=%d: position %lld",
                         dt ? "int32" : "float32", (long long)n, (long long)k, kind, (long long)q);
        }
  free(f);
  free(iv);
  free(all);
  free(h);
  free(keys);
}
