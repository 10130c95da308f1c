/* White-box tests of the vectorized quicksort (src/cpu/sort_simd.c, included here so that its
 * static parts can be driven directly): the heapsort fallback at the depth limit, partitions
 * at the extreme pivots, the AVX2 sorting networks at every length up to 64 and the AVX-512
 * ones up to 1024, the quicksort with either leaves, the radix sort that CPUs without AVX2
 * take, the AVX-512 argmax / argmin rows, and the parallel split on inputs it cannot split.
 * The end-to-end sort is tested against NumPy in tests/python/test_reduce.py. */
#include <criterion/criterion.h>

#include "../../src/cpu/sort_simd.c"

#if defined(__x86_64__) && defined(__GNUC__)

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static int32_t next_key(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (int32_t)(uint32_t)(rng_state >> 32);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Sorts a copy with qsort and compares. */
static void check_sorted_like(const int32_t *got, const int32_t *orig, int64_t n) {
  int32_t *want = malloc((size_t)(n ? n : 1) * sizeof *want);
  memcpy(want, orig, (size_t)n * sizeof *want);
  qsort(want, (size_t)n, sizeof *want, cmp_i32);
  for (int64_t i = 0; i < n; i++)
    cr_assert_eq(got[i], want[i], "n=%lld: index %lld: %d, want %d", (long long)n, (long long)i,
                 got[i], want[i]);
  free(want);
}

static bool have_avx2(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}

Test(sort_simd, depth_limit_falls_back_to_heapsort) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  for (int depth = 0; depth < 3; depth++) {
    int64_t n = 5000;
    int32_t *a = malloc(n * sizeof *a), *orig = malloc(n * sizeof *a);
    for (int64_t i = 0; i < n; i++) orig[i] = a[i] = next_key() % 100;
    quicksort(a, n, depth, false);
    check_sorted_like(a, orig, n);
    free(a);
    free(orig);
  }
}

/* With values, every range is converted back where it becomes final: networks, runs of pivot
 * copies and the heapsort fallback alike. */
Test(sort_simd, values_come_back_on_every_path) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  for (int depth = 0; depth < 4; depth++)
    for (int kind = 0; kind < 3; kind++) {
      int64_t n = 3000;
      int32_t *a = malloc(n * sizeof *a), *keys = malloc(n * sizeof *a);
      for (int64_t i = 0; i < n; i++) {
        int32_t r = next_key();
        float f = kind == 0 ? (float)(r % 1000) / 7.0f : kind == 1 ? 2.5f : (r & 1 ? -0.0f : NAN);
        keys[i] = a[i] = key_of(f);
      }
      quicksort(a, n, depth, true);
      qsort(keys, (size_t)n, sizeof *keys, cmp_i32);
      for (int64_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, &a[i], 4);
        cr_assert_eq(key_of(f), keys[i], "depth %d kind %d: index %lld", depth, kind, (long long)i);
      }
      free(a);
      free(keys);
    }
}

Test(sort_simd, partition_at_extreme_pivots) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  int32_t a[203];
  for (int i = 0; i < 203; i++) a[i] = i % 2 ? INT32_MIN : INT32_MAX;
  cr_assert_eq(partition(a, 203, INT32_MIN, false), 0);
  cr_assert_eq(partition(a, 203, INT32_MIN, true), 101);
  for (int i = 0; i < 101; i++) cr_assert_eq(a[i], INT32_MIN);
  cr_assert_eq(partition(a, 203, INT32_MAX, false), 101);
  for (int i = 101; i < 203; i++) cr_assert_eq(a[i], INT32_MAX);
  cr_assert_eq(partition(a, 203, INT32_MAX, true), 203);
}

Test(sort_simd, partition_keeps_every_key_on_its_side) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  for (int64_t n = 0; n < 300; n += 7) {
    int32_t a[300], orig[300];
    for (int64_t i = 0; i < n; i++) orig[i] = a[i] = next_key() % 50;
    int32_t p = 20;
    int64_t s = partition(a, n, p, false);
    for (int64_t i = 0; i < n; i++) cr_assert(i < s ? a[i] < p : a[i] >= p, "n=%lld", (long long)n);
    qsort(a, (size_t)n, sizeof *a, cmp_i32);
    check_sorted_like(a, orig, n);
  }
}

Test(sort_simd, networks_sort_every_length) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  for (int64_t n = 0; n <= SMALL; n++)
    for (int rep = 0; rep < 20; rep++) {
      int32_t a[SMALL + 8], orig[SMALL + 8];
      for (int64_t i = 0; i < n; i++) {
        int32_t k = next_key();
        orig[i] = a[i] = rep % 3 == 0 ? k % 4 : rep % 3 == 1 ? k : (k & 1 ? INT32_MAX : INT32_MIN);
      }
      for (int i = (int)n; i < SMALL + 8; i++) a[i] = 12345; /* beyond n: untouched */
      small_sort(a, n, false);
      check_sorted_like(a, orig, n);
      for (int i = (int)n; i < SMALL + 8; i++) cr_assert_eq(a[i], 12345, "n=%lld wrote past the end", (long long)n);
    }
}

static bool have_avx512(void) { return have_avx2() && __builtin_cpu_supports("avx512f"); }

/* Keys of one of four kinds: random, few distinct, the extremes, or float keys of specials. */
static int32_t kind_key(int kind) {
  int32_t k = next_key();
  static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1.5f};
  switch (kind) {
    case 0: return k;
    case 1: return k % 4;
    case 2: return k & 1 ? INT32_MAX : INT32_MIN;
    default: return key_of(special[(uint32_t)k % 8]);
  }
}

/* The AVX-512 networks: every length up to 1024 (two runs of 512 and a merge above 512), keys
 * or the float32 values they stand for, nothing written past n. */
Test(sort_simd, avx512_networks_sort_every_length_to_1024) {
  if (!have_avx512()) cr_skip_test("no AVX-512");
  int32_t *a = malloc((SMALL512 + 16) * sizeof *a), *orig = malloc(SMALL512 * sizeof *a);
  for (int64_t n = 0; n <= SMALL512; n++)
    for (int rep = 0; rep < (n > 480 ? 2 : 4); rep++) {
      int kind = (int)(n + rep) % 4;
      bool values = rep % 2; /* keys of floats only (the others stand for NaN bit patterns) */
      for (int64_t i = 0; i < n; i++)
        orig[i] = a[i] =
            values && kind != 3 ? key_of((float)(next_key() % 100000) / 7.0f) : kind_key(kind);
      for (int i = (int)n; i < SMALL512 + 16; i++) a[i] = 12345;
      small_sort512(a, n, values);
      if (values)
        for (int64_t i = 0; i < n; i++) {
          float f;
          memcpy(&f, &a[i], 4);
          a[i] = key_of(f);
        }
      check_sorted_like(a, orig, n);
      for (int i = (int)n; i < SMALL512 + 16; i++)
        cr_assert_eq(a[i], 12345, "n=%lld wrote past the end", (long long)n);
    }
  free(a);
  free(orig);
}

/* The quicksort down to each leaf size: AVX2 networks of 64 (avx512_ok off: what a CPU without
 * AVX-512 runs) and AVX-512 ones of 1024, on rows around those sizes. */
Test(sort_simd, quicksort_with_and_without_avx512_leaves) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  bool had = avx512_ok;
  static const int64_t sizes[] = {65, 511, 512, 513, 1000, 1024, 1025, 2047, 2048, 4099};
  for (int use = 0; use < 2; use++) {
    if (use && !had) break;
    avx512_ok = use;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
      for (int kind = 0; kind < 4; kind++) {
        int64_t n = sizes[si];
        int32_t *a = malloc(n * sizeof *a), *orig = malloc(n * sizeof *a);
        for (int64_t i = 0; i < n; i++) orig[i] = a[i] = kind_key(kind);
        quicksort(a, n, depth_for(n), false);
        check_sorted_like(a, orig, n);
        free(a);
        free(orig);
      }
  }
  avx512_ok = had;
}

static int cmp_key_of_float(const void *a, const void *b) {
  int32_t x = key_of(*(const float *)a), y = key_of(*(const float *)b);
  return (x > y) - (x < y);
}

/* The radix sort: what float32 rows take where the CPU lacks AVX2 (sort.c). */
Test(sort_simd, radix_fallback_sorts_values_with_nan_last) {
  static const int64_t sizes[] = {0, 1, 17, 512, 1024, 3001};
  static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    int64_t n = sizes[si];
    float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
    float *want = malloc((n ? n : 1) * sizeof *want);
    uint32_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    for (int64_t i = 0; i < n; i++) {
      int32_t k = next_key();
      x[i] = k % 5 == 0 ? special[(uint32_t)k % 8] : (float)(k % 1000) / 8.0f;
    }
    memcpy(want, x, (size_t)n * sizeof *x);
    qsort(want, (size_t)n, sizeof *want, cmp_key_of_float);
    cr_assert(nv__radix_sort_f32(x, y, tmp, n, false));
    for (int64_t i = 0; i < n; i++)
      cr_assert_eq(key_of(y[i]), key_of(want[i]), "n=%lld index %lld", (long long)n, (long long)i);
    free(x);
    free(y);
    free(want);
    free(tmp);
  }
}

/* The AVX-512 argmax / argmin of a row against a scalar scan: the first extreme, the first
 * NaN winning, -0.0 equal to +0.0; with a row to prefetch or none. */
Test(sort_simd, avx512_arg_extreme_is_the_first_one) {
  if (!have_avx512()) cr_skip_test("no AVX-512");
  float *x = malloc(1200 * sizeof *x);
  for (int64_t n = 1; n <= 1100; n += n < 70 ? 1 : 37)
    for (int kind = 0; kind < 4; kind++) {
      for (int64_t i = 0; i < n; i++) {
        int32_t k = next_key();
        x[i] = kind == 0   ? (float)(k % 100000)
               : kind == 1 ? (float)(k % 3)
               : kind == 2 ? (k & 1 ? -0.0f : 0.0f)
                           : (float)(k % 7);
      }
      if (kind == 3) x[(uint32_t)next_key() % n] = NAN;
      if (kind == 3 && n > 3) x[(uint32_t)next_key() % n] = NAN;
      for (int max = 0; max < 2; max++) {
        int64_t want = 0;
        for (int64_t i = 0; i < n; i++) {
          if (x[want] != x[want]) break;
          if (x[i] != x[i] || (max ? x[i] > x[want] : x[i] < x[want])) want = i;
        }
        for (int pf = 0; pf < 2; pf++) {
          uint32_t at = 99999;
          cr_assert(nv__simd_argext_f32(x, n, max, pf ? x + n / 2 : NULL, &at));
          cr_assert_eq(at, (uint32_t)want, "n=%lld kind=%d max=%d", (long long)n, kind, max);
        }
      }
    }
  free(x);
}

Test(sort_simd, split_stops_on_equal_keys) {
  if (!have_avx2()) cr_skip_test("no AVX2");
  pthread_once(&perm_once, perm_init);
  int64_t n = 1 << 17;
  int32_t *a = malloc(n * sizeof *a);
  for (int64_t i = 0; i < n; i++) a[i] = 7;
  split_job j = {.a = a};
  split_parts(&j, n, 8);
  cr_assert_eq(j.nparts, 1);
  for (int64_t i = 0; i < n; i++) a[i] = (int32_t)(i % 3);
  split_parts(&j, n, 8);
  cr_assert(j.nparts >= 2 && j.nparts <= 8, "%d parts", j.nparts);
  for (int p = 0; p + 1 < j.nparts; p++) {
    int32_t hi = INT32_MIN, lo = INT32_MAX;
    for (int64_t i = j.start[p]; i < j.start[p + 1]; i++) hi = a[i] > hi ? a[i] : hi;
    for (int64_t i = j.start[p + 1]; i < j.start[p + 2]; i++) lo = a[i] < lo ? a[i] : lo;
    cr_assert(hi <= lo, "part %d's keys exceed the next part's", p);
  }
  free(a);
}

Test(sort_simd, keys_round_trip_and_order) {
  float v[] = {-INFINITY, -3.5f, -1e-45f, -0.0f, 0.0f, 1e-45f, 2.0f, INFINITY, NAN};
  int n = sizeof v / sizeof *v;
  for (int i = 0; i + 1 < n; i++) cr_assert_lt(key_of(v[i]), key_of(v[i + 1]), "at %d", i);
  cr_assert_eq(key_of(-NAN), INT32_MAX);
  for (int i = 0; i + 1 < n; i++) {
    float back = value_of(key_of(v[i]));
    cr_assert(memcmp(&back, &v[i], 4) == 0, "at %d", i);
  }
}

#endif
