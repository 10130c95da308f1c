/* float32 value sorts by a vectorized quicksort (AVX2, chosen at run time): the values become
 * signed 32-bit keys whose integer order is the float order (NaN last, -0.0 before +0.0), the
 * keys are partitioned in place eight at a time (a compare, a movemask and one permutation
 * from a table put the lanes below the pivot first; the vector is stored at both write ends),
 * and converted back where each range becomes final (in the sorting networks' stores). Where
 * the CPU has AVX-512, partitions of up to 512 keys sort in one bitonic network of up to 32
 * 16-lane registers (sixteen registers at a time sorted by a column network and a transpose,
 * the in-register cleaning layers run on register pairs without masks), and partitions of up
 * to 1024 keys (whole rows of 1024) as two such runs and one merge. Large inputs split first
 * into about equal parts around sampled medians, one part per pool thread. A recursion deeper
 * than 2·log2(n) finishes with heapsort, so no input is quadratic. Without AVX2 the caller
 * uses the radix sort. */
#include <stdlib.h>

#include "cpu/pool.h"
#include "cpu/sort_radix.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <pthread.h>

#define AVX2 __attribute__((target("avx2,popcnt")))
#define SMALL 64        /* partitions of at most this many keys: sorting networks */
#define SAMPLE 255      /* keys sampled for a splitting median of the parallel split */
#define SPLITS_MAX 16   /* parts of the parallel split */
#ifndef PIVOT_SAMPLE_MIN
#define PIVOT_SAMPLE_MIN 4096 /* partitions from this size take a 64-key sample's median */
#endif

/* perm[m]: lane indices putting the lanes whose bit is clear in m first, in order, then the
 * others. Built once, with the check that the CPU runs this file's code (simd_ok). */
static int32_t perm[256][8];
static bool simd_ok, avx512_ok;
static pthread_once_t perm_once = PTHREAD_ONCE_INIT;

static void perm_init(void) {
  simd_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  avx512_ok = simd_ok && __builtin_cpu_supports("avx512f");
  for (int m = 0; m < 256; m++) {
    int k = 0;
    for (int j = 0; j < 8; j++)
      if (!(m >> j & 1)) perm[m][k++] = j;
    for (int j = 0; j < 8; j++)
      if (m >> j & 1) perm[m][k++] = j;
  }
}

/* The key's bits are the float's with the low 31 flipped when negative (an involution); every
 * NaN becomes INT32_MAX (bits 0x7fffffff, a quiet NaN, on the way back). */
static inline int32_t key_of(float f) {
  if (f != f) return INT32_MAX;
  int32_t s;
  memcpy(&s, &f, 4);
  return s ^ (int32_t)((uint32_t)(s >> 31) & 0x7fffffffu);
}

static inline float value_of(int32_t k) {
  int32_t s = k ^ (int32_t)((uint32_t)(k >> 31) & 0x7fffffffu);
  float f;
  memcpy(&f, &s, 4);
  return f;
}

AVX2 static void to_keys(const float *in, int32_t *k, int64_t n) {
  const __m256i low = _mm256_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_loadu_ps(in + i);
    __m256i s = _mm256_castps_si256(f);
    __m256i key = _mm256_xor_si256(s, _mm256_and_si256(_mm256_srai_epi32(s, 31), low));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    _mm256_storeu_si256((__m256i *)(k + i), _mm256_blendv_epi8(key, low, nan));
  }
  for (; i < n; i++) k[i] = key_of(in[i]);
}

AVX2 static void to_values(int32_t *k, int64_t n) {
  const __m256i low = _mm256_set1_epi32(0x7fffffff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i s = _mm256_loadu_si256((const __m256i *)(k + i));
    s = _mm256_xor_si256(s, _mm256_and_si256(_mm256_srai_epi32(s, 31), low));
    _mm256_storeu_si256((__m256i *)(k + i), s);
  }
  for (; i < n; i++) {
    float f = value_of(k[i]);
    memcpy(k + i, &f, 4);
  }
}

/* Stores v's lanes that go left at *lw and those that go right ending at *rw. */
#define STORE_SPLIT(v, right, lw, rw)                                                      \
  do {                                                                                     \
    int m_ = _mm256_movemask_ps(_mm256_castsi256_ps(right));                               \
    int c_ = __builtin_popcount((unsigned)m_);                                             \
    __m256i p_ = _mm256_permutevar8x32_epi32(                                              \
        (v), _mm256_loadu_si256((const __m256i *)perm[m_]));                               \
    _mm256_storeu_si256((__m256i *)(lw), p_);                                              \
    (lw) += 8 - c_;                                                                        \
    _mm256_storeu_si256((__m256i *)((rw) - 8), p_);                                        \
    (rw) -= c_;                                                                            \
  } while (0)

/* Partitions a[0, n) in place: keys at most q first (q = p - 1 for "below p"). Returns their
 * count. UNROLL (4) vectors are held back at each end so that every store lands in space
 * already read: the free space on the two sides always totals 16·UNROLL keys, and reading
 * UNROLL vectors from the side with less free keeps at least 8·UNROLL free on both (one
 * branch per 32 keys). Short partitions hold back one vector a side. */
#define UNROLL 4
#define SPLIT1(v) STORE_SPLIT((v), _mm256_cmpgt_epi32((v), qv), lw, rw)
AVX2 static int64_t partition_at_most(int32_t *a, int64_t n, int32_t q) {
  int64_t m = n - n % 8, s = 0;
  if (m < 16) {
    for (int64_t i = 0; i < n; i++)
      if (a[i] <= q) {
        int32_t t = a[i];
        a[i] = a[s];
        a[s++] = t;
      }
    return s;
  }
  const __m256i qv = _mm256_set1_epi32(q);
  int32_t *lw = a, *rw = a + m, *lr, *rr;
  /* The held-back vectors: UNROLL a side (one a side for short partitions). */
  __m256i held[2 * UNROLL];
  int h = m >= 16 * UNROLL ? UNROLL : 1;
  for (int u = 0; u < h; u++) {
    held[u] = _mm256_loadu_si256((const __m256i *)(a + 8 * u));
    held[h + u] = _mm256_loadu_si256((const __m256i *)(a + m - 8 * h + 8 * u));
  }
  lr = a + 8 * h;
  rr = a + m - 8 * h;
  if (h == UNROLL)
    while (rr - lr >= 32) {
      /* Branch-free side choice (the branch would mispredict half the time). */
      int64_t left = lr - lw <= rw - rr;
      int32_t *src = left ? lr : rr - 32;
      lr += 32 * left;
      rr -= 32 * (1 - left);
      __m256i v0 = _mm256_loadu_si256((const __m256i *)src);
      __m256i v1 = _mm256_loadu_si256((const __m256i *)(src + 8));
      __m256i v2 = _mm256_loadu_si256((const __m256i *)(src + 16));
      __m256i v3 = _mm256_loadu_si256((const __m256i *)(src + 24));
      SPLIT1(v0);
      SPLIT1(v1);
      SPLIT1(v2);
      SPLIT1(v3);
    }
  while (rr - lr >= 8) {
    __m256i x;
    if (lr - lw <= rw - rr) {
      x = _mm256_loadu_si256((const __m256i *)lr);
      lr += 8;
    } else {
      rr -= 8;
      x = _mm256_loadu_si256((const __m256i *)rr);
    }
    SPLIT1(x);
  }
  for (int u = 0; u < 2 * h; u++) SPLIT1(held[u]);
  /* The n % 8 keys after the vector part: a left one swaps with the first right one. */
  s = lw - a;
  for (int64_t i = m; i < n; i++)
    if (a[i] <= q) {
      int32_t t = a[i];
      a[i] = a[s];
      a[s++] = t;
    }
  return s;
}

/* Keys below p first (le false) or at most p (le true); returns their count. */
AVX2 static int64_t partition(int32_t *a, int64_t n, int32_t p, bool le) {
  if (le) return partition_at_most(a, n, p);
  return p == INT32_MIN ? 0 : partition_at_most(a, n, p - 1);
}

/* ---- sorting networks for at most 16 keys in two registers ---- */

/* One compare-exchange layer: each lane meets lane i ^ d (the permutation `idx`) and keeps the
 * maximum where the blend mask's bit is set, the minimum elsewhere. */
#define LAYER(v, idx, mask)                                                                \
  do {                                                                                     \
    __m256i w_ = _mm256_permutevar8x32_epi32((v), (idx));                                  \
    (v) = _mm256_blend_epi32(_mm256_min_epi32((v), w_), _mm256_max_epi32((v), w_), (mask)); \
  } while (0)

/* A bitonic sequence of 8 lanes, sorted ascending. */
AVX2 static inline __m256i clean8(__m256i v) {
  const __m256i x1 = _mm256_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6);
  const __m256i x2 = _mm256_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5);
  const __m256i x4 = _mm256_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3);
  LAYER(v, x4, 0xf0);
  LAYER(v, x2, 0xcc);
  LAYER(v, x1, 0xaa);
  return v;
}

/* Bitonic sort of the 8 lanes ascending: sorted pairs and quads in alternating directions (a
 * bitonic sequence of 8), then cleaned. */
AVX2 static inline __m256i sort8(__m256i v) {
  const __m256i x1 = _mm256_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6);
  const __m256i x2 = _mm256_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5);
  LAYER(v, x1, 0x66);
  LAYER(v, x2, 0x3c);
  LAYER(v, x1, 0x5a);
  return clean8(v);
}

/* Sorted 8-lane registers merged pairwise up to a sorted run of 8·R lanes (R a power of two),
 * by bitonic merges: the second run reversed, lane-wise minimum and maximum (two bitonic
 * halves), then each half cleaned by exchanges at halving distances. */
AVX2 static inline __attribute__((always_inline)) void clean_run(__m256i *v, int r) {
  for (int d = r / 2; d >= 1; d /= 2)
    for (int i = 0; i < r; i++)
      if (!(i & d)) {
        __m256i lo = _mm256_min_epi32(v[i], v[i + d]);
        v[i + d] = _mm256_max_epi32(v[i], v[i + d]);
        v[i] = lo;
      }
  for (int i = 0; i < r; i++) v[i] = clean8(v[i]);
}

AVX2 static inline __attribute__((always_inline)) void merge_runs(__m256i *v, int r) {
  const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  for (int w = 1; w < r; w *= 2)     /* runs of w registers merge into runs of 2w */
    for (int b = 0; b < r; b += 2 * w) {
      __m256i *x = v + b, *y = v + b + w;
      for (int i = 0; i < w; i++) y[i] = _mm256_permutevar8x32_epi32(y[i], rev);
      for (int i = 0; i < w / 2; i++) { /* reverse the order of y's registers */
        __m256i t = y[i];
        y[i] = y[w - 1 - i];
        y[w - 1 - i] = t;
      }
      for (int i = 0; i < w; i++) {
        __m256i lo = _mm256_min_epi32(x[i], y[i]);
        y[i] = _mm256_max_epi32(x[i], y[i]);
        x[i] = lo;
      }
      clean_run(x, w);
      clean_run(y, w);
    }
}

/* Eight registers each sorted: a 19-comparator network sorts the columns (lane j across the
 * registers), then an 8×8 transpose makes each column a register. */
#define CX(a, b)                                  \
  do {                                            \
    __m256i t_ = _mm256_min_epi32((a), (b));      \
    (b) = _mm256_max_epi32((a), (b));             \
    (a) = t_;                                     \
  } while (0)

AVX2 static inline __attribute__((always_inline)) void sort8x8(__m256i *v) {
  static const int8_t net[19][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {0, 4}, {1, 5}, {2, 6},
                                     {3, 7}, {0, 1}, {2, 3}, {4, 5}, {6, 7}, {2, 4}, {3, 5},
                                     {1, 4}, {3, 6}, {1, 2}, {3, 4}, {5, 6}};
#pragma GCC unroll 19
  for (int c = 0; c < 19; c++) CX(v[net[c][0]], v[net[c][1]]);
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; i++) {
    v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

/* Sorts n <= 8·R keys in R registers padded with INT32_MAX; with `values` the sorted keys are
 * stored as the float32 values they stand for (the conversion back fused into the store). */
#define SMALL_SORT(R)                                                                      \
  AVX2 static void small_sort##R(int32_t *a, int64_t n, bool values) {                    \
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                        \
    const __m256i big = _mm256_set1_epi32(INT32_MAX);                                     \
    __m256i v[R], m[R];                                                                   \
    /* Whole registers load plainly; only the partial one is masked (masked moves are slow \
     * on some CPUs). */                                                                  \
    int full = (int)(n / 8);                                                              \
    for (int i = 0; i < R; i++) {                                                         \
      m[i] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n - 8 * i), lane);                 \
      if (i < full) v[i] = _mm256_loadu_si256((const __m256i *)(a + 8 * i));              \
      else if (i == full && n % 8)                                                        \
        v[i] = _mm256_blendv_epi8(big, _mm256_maskload_epi32(a + 8 * i, m[i]), m[i]);     \
      else v[i] = big;                                                                    \
    }                                                                                     \
    if (R == 8) {                                                                         \
      sort8x8(v);                                                                         \
    } else {                                                                              \
      for (int i = 0; i < R; i++) v[i] = sort8(v[i]);                                     \
    }                                                                                     \
    merge_runs(v, R);                                                                     \
    const __m256i low = _mm256_set1_epi32(0x7fffffff);                                    \
    for (int i = 0; i < R; i++) {                                                         \
      if (values)                                                                         \
        v[i] = _mm256_xor_si256(v[i], _mm256_and_si256(_mm256_srai_epi32(v[i], 31), low)); \
      if (i < full) _mm256_storeu_si256((__m256i *)(a + 8 * i), v[i]);                    \
      else if (i == full && n % 8) _mm256_maskstore_epi32(a + 8 * i, m[i], v[i]);         \
    }                                                                                     \
  }
SMALL_SORT(1)
SMALL_SORT(2)
SMALL_SORT(4)
SMALL_SORT(8)

AVX2 static void small_sort(int32_t *a, int64_t n, bool values) {
  if (n <= 8) small_sort1(a, n, values);
  else if (n <= 16) small_sort2(a, n, values);
  else if (n <= 32) small_sort4(a, n, values);
  else small_sort8(a, n, values);
}

/* ---- AVX-512: sorting networks for at most 512 keys in up to 32 registers of 16 ----
 * The same bitonic construction in 16-lane registers; AVX-512 has 32 of them, so a partition of
 * up to 512 keys (a whole row of 512) sorts without another partition step. A layer is a lane
 * swap, a minimum and a masked maximum (the lanes of `up` keep the larger key). */
#define AVX512 __attribute__((target("avx2,popcnt,avx512f")))
#define SMALL512 1024 /* the AVX-512 networks' reach: two runs of 512 merged */

#define SWAP1(v) _mm512_shuffle_epi32((v), (_MM_PERM_ENUM)0xb1)
#define SWAP2(v) _mm512_shuffle_epi32((v), (_MM_PERM_ENUM)0x4e)
#define SWAP4(v) _mm512_shuffle_i32x4((v), (v), 0xb1)
#define SWAP8(v) _mm512_shuffle_i32x4((v), (v), 0x4e)
#define LAYER16(v, SWAP, up)                                                      \
  do {                                                                            \
    __m512i w_ = SWAP(v);                                                         \
    (v) = _mm512_mask_max_epi32(_mm512_min_epi32((v), w_), (up), (v), w_);        \
  } while (0)

/* A bitonic sequence of 16 lanes, sorted ascending. */
AVX512 static inline __m512i clean16(__m512i v) {
  LAYER16(v, SWAP8, 0xff00);
  LAYER16(v, SWAP4, 0xf0f0);
  LAYER16(v, SWAP2, 0xcccc);
  LAYER16(v, SWAP1, 0xaaaa);
  return v;
}

/* Bitonic sort of 16 lanes: runs of 2, 4 and 8 in alternating directions, then cleaned (the
 * masks: lane i keeps the maximum where bit d of i differs from bit s of i, s the run size). */
AVX512 static inline __m512i sort16(__m512i v) {
  LAYER16(v, SWAP1, 0x6666);
  LAYER16(v, SWAP2, 0x3c3c);
  LAYER16(v, SWAP1, 0x5a5a);
  LAYER16(v, SWAP4, 0x0ff0);
  LAYER16(v, SWAP2, 0x33cc);
  LAYER16(v, SWAP1, 0x55aa);
  return clean16(v);
}

/* Two bitonic sequences of 16 lanes, a and b, each sorted ascending: clean16's four layers on
 * both at once. Each layer gathers the two registers' lower partners into one register and the
 * upper ones, at the same lanes, into another (lane shuffles of the pair), so one minimum and
 * one maximum serve 32 lanes without masks; a last permutation of the pair puts each
 * register's lanes back in order. */
AVX512 static inline __attribute__((always_inline)) void clean16x2(__m512i *a, __m512i *b) {
  const __m512i ia = _mm512_setr_epi32(0, 16, 2, 18, 1, 17, 3, 19, 8, 24, 10, 26, 9, 25, 11, 27);
  const __m512i ib = _mm512_setr_epi32(4, 20, 6, 22, 5, 21, 7, 23, 12, 28, 14, 30, 13, 29, 15, 31);
  __m512i p = _mm512_shuffle_i32x4(*a, *b, 0x44), q = _mm512_shuffle_i32x4(*a, *b, 0xee);
  __m512i l = _mm512_min_epi32(p, q), h = _mm512_max_epi32(p, q);
  p = _mm512_shuffle_i32x4(l, h, 0x88);
  q = _mm512_shuffle_i32x4(l, h, 0xdd);
  l = _mm512_min_epi32(p, q);
  h = _mm512_max_epi32(p, q);
  p = _mm512_unpacklo_epi64(l, h);
  q = _mm512_unpackhi_epi64(l, h);
  l = _mm512_min_epi32(p, q);
  h = _mm512_max_epi32(p, q);
  p = _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(l), _mm512_castsi512_ps(h), 0x88));
  q = _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(l), _mm512_castsi512_ps(h), 0xdd));
  l = _mm512_min_epi32(p, q);
  h = _mm512_max_epi32(p, q);
  *a = _mm512_permutex2var_epi32(l, ia, h);
  *b = _mm512_permutex2var_epi32(l, ib, h);
}

/* Each of r registers holding a bitonic sequence sorted: clean16x2 on pairs. */
AVX512 static inline __attribute__((always_inline)) void clean_regs16(__m512i *v, int r) {
  int i = 0;
#pragma GCC unroll 16
  for (; i + 2 <= r; i += 2) clean16x2(&v[i], &v[i + 1]);
  if (i < r) v[i] = clean16(v[i]);
}

/* The exchanges between registers of a bitonic run of r registers (distances r/2 ... 1). */
AVX512 static inline __attribute__((always_inline)) void clean_layers16(__m512i *v, int r) {
  /* Distances by their logarithm, so that the loops' trip counts are known once r is. */
#pragma GCC unroll 5
  for (int ld = __builtin_ctz((unsigned)r) - 1; ld >= 0; ld--)
#pragma GCC unroll 32
    for (int i = 0, d = 1 << ld; i < r; i++)
      if (!(i & d)) {
        __m512i lo = _mm512_min_epi32(v[i], v[i + d]);
        v[i + d] = _mm512_max_epi32(v[i], v[i + d]);
        v[i] = lo;
      }
}

/* A bitonic run of 16·r lanes in r registers, sorted. */
AVX512 static inline __attribute__((always_inline)) void clean_run16(__m512i *v, int r) {
  clean_layers16(v, r);
  clean_regs16(v, r);
}

/* Sorted registers merged pairwise into one sorted run of 16·r lanes, as merge_runs. */
AVX512 static inline __attribute__((always_inline)) void merge_runs16(__m512i *v, int r) {
  const __m512i rev = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
#pragma GCC unroll 5
  for (int lw = 0; lw < __builtin_ctz((unsigned)r); lw++)
#pragma GCC unroll 16
    for (int b = 0; b < r; b += 2 << lw) {
      int w = 1 << lw;
      __m512i *x = v + b, *y = v + b + w;
#pragma GCC unroll 16
      for (int i = 0; i < w; i++) y[i] = _mm512_permutexvar_epi32(rev, y[i]);
      /* (no unroll pragma: GCC rejects it for this loop in unoptimized builds) */
      for (int i = 0; i < w / 2; i++) {
        __m512i t = y[i];
        y[i] = y[w - 1 - i];
        y[w - 1 - i] = t;
      }
#pragma GCC unroll 16
      for (int i = 0; i < w; i++) {
        __m512i lo = _mm512_min_epi32(x[i], y[i]);
        y[i] = _mm512_max_epi32(x[i], y[i]);
        x[i] = lo;
      }
      clean_layers16(x, w);
      clean_layers16(y, w);
      clean_regs16(x, 2 * w); /* x and y are adjacent: their registers pair up */
    }
}

/* Sixteen registers each sorted: Batcher's odd-even merge network of 63 comparators sorts the
 * columns (lane j across the registers), then a 16 x 16 transpose makes each column a
 * register (three times fewer operations than sort16 on each). */
AVX512 static inline __attribute__((always_inline)) void sort16x16(__m512i *v) {
  static const int8_t net[63][2] = {
      {0, 1},   {2, 3},   {0, 2},   {1, 3},   {1, 2},   {4, 5},   {6, 7},   {4, 6},
      {5, 7},   {5, 6},   {0, 4},   {2, 6},   {2, 4},   {1, 5},   {3, 7},   {3, 5},
      {1, 2},   {3, 4},   {5, 6},   {8, 9},   {10, 11}, {8, 10},  {9, 11},  {9, 10},
      {12, 13}, {14, 15}, {12, 14}, {13, 15}, {13, 14}, {8, 12},  {10, 14}, {10, 12},
      {9, 13},  {11, 15}, {11, 13}, {9, 10},  {11, 12}, {13, 14}, {0, 8},   {4, 12},
      {4, 8},   {2, 10},  {6, 14},  {6, 10},  {2, 4},   {6, 8},   {10, 12}, {1, 9},
      {5, 13},  {5, 9},   {3, 11},  {7, 15},  {7, 11},  {3, 5},   {7, 9},   {11, 13},
      {1, 2},   {3, 4},   {5, 6},   {7, 8},   {9, 10},  {11, 12}, {13, 14}};
#pragma GCC unroll 63
  for (int c = 0; c < 63; c++) {
    __m512i a = v[net[c][0]], b = v[net[c][1]];
    v[net[c][0]] = _mm512_min_epi32(a, b);
    v[net[c][1]] = _mm512_max_epi32(a, b);
  }
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  /* u[4g + c]: lane quad L holds column 4L + c of rows 4g .. 4g + 3. */
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    __m512i s1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    __m512i s2 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    __m512i s3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    __m512i s4 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    v[c] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    v[4 + c] = _mm512_shuffle_i32x4(s1, s3, 0xdd);
    v[8 + c] = _mm512_shuffle_i32x4(s2, s4, 0x88);
    v[12 + c] = _mm512_shuffle_i32x4(s2, s4, 0xdd);
  }
}

/* Sorts n <= 16·R keys in R registers padded with INT32_MAX, as SMALL_SORT. */
#define SMALL_SORT16(R)                                                                    \
  AVX512 static void small16_##R(int32_t *a, int64_t n, bool values) {                    \
    const __m512i big = _mm512_set1_epi32(INT32_MAX), low = _mm512_set1_epi32(0x7fffffff); \
    __m512i v[R];                                                                         \
    int full = (int)(n / 16), rest = (int)(n % 16);                                       \
    __mmask16 m = (__mmask16)((1u << rest) - 1);                                          \
    _Pragma("GCC unroll 32") for (int i = 0; i < R; i++) {                                \
      if (i < full) v[i] = _mm512_loadu_si512(a + 16 * i);                                \
      else if (i == full && rest) v[i] = _mm512_mask_loadu_epi32(big, m, a + 16 * i);     \
      else v[i] = big;                                                                    \
      if (R < 16) v[i] = sort16(v[i]);                                                    \
    }                                                                                     \
    _Pragma("GCC unroll 2") for (int g = 0; g + 16 <= R; g += 16) sort16x16(v + g);      \
    merge_runs16(v, R);                                                                   \
    _Pragma("GCC unroll 32") for (int i = 0; i < R; i++) {                                \
      if (values) v[i] = _mm512_xor_si512(v[i], _mm512_and_si512(_mm512_srai_epi32(v[i], 31), low)); \
      if (i < full) _mm512_storeu_si512(a + 16 * i, v[i]);                                \
      else if (i == full && rest) _mm512_mask_storeu_epi32(a + 16 * i, m, v[i]);          \
    }                                                                                     \
  }
SMALL_SORT16(1)
SMALL_SORT16(2)
SMALL_SORT16(4)
SMALL_SORT16(8)
SMALL_SORT16(16)
SMALL_SORT16(32)

/* The lower (lo) or upper half of the bitonic merge of two sorted runs of 512 keys, x and y:
 * lane k of the half is min(x[k], y[511 - k]) (max for the upper half), a bitonic sequence,
 * sorted by the cleaner of 32 registers and stored at dst (m <= 512 keys of it). */
#define MERGE_HALF(NAME, OP)                                                                  \
  AVX512 static void NAME(const int32_t *x, const int32_t *y, int32_t *dst, int64_t m,       \
                          bool values) {                                                      \
    const __m512i rev = _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); \
    const __m512i low = _mm512_set1_epi32(0x7fffffff);                                       \
    __m512i v[32];                                                                            \
    _Pragma("GCC unroll 32") for (int i = 0; i < 32; i++) v[i] =                              \
        OP(_mm512_loadu_si512(x + 16 * i),                                                    \
           _mm512_permutexvar_epi32(rev, _mm512_loadu_si512(y + 16 * (31 - i))));             \
    clean_run16(v, 32);                                                                       \
    int full = (int)(m / 16), rest = (int)(m % 16);                                           \
    __mmask16 mk = (__mmask16)((1u << rest) - 1);                                             \
    _Pragma("GCC unroll 32") for (int i = 0; i < 32; i++) {                                   \
      if (values)                                                                             \
        v[i] = _mm512_xor_si512(v[i], _mm512_and_si512(_mm512_srai_epi32(v[i], 31), low));    \
      if (i < full) _mm512_storeu_si512(dst + 16 * i, v[i]);                                  \
      else if (i == full && rest) _mm512_mask_storeu_epi32(dst + 16 * i, mk, v[i]);           \
    }                                                                                         \
  }
MERGE_HALF(merge_lo512, _mm512_min_epi32)
MERGE_HALF(merge_hi512, _mm512_max_epi32)

AVX512 static void small_sort512(int32_t *a, int64_t n, bool values);

/* Sorts 512 < n <= 1024 keys without a partition: the first 512 sort in place in one network,
 * the other n - 512 in a copy padded with INT32_MAX to 512, and the two runs merge (the upper
 * half is written first: its keys of a are in the copy already, and the lower half's reads of
 * a come before its stores). */
AVX512 static void small_sort1024(int32_t *a, int64_t n, bool values) {
  int32_t y[512];
  int64_t m = n - 512;
  small16_32(a, 512, false);
  memcpy(y, a + 512, (size_t)m * sizeof *y);
  for (int64_t i = m; i < 512; i++) y[i] = INT32_MAX;
  small_sort512(y, m, false);
  merge_hi512(a, y, a + 512, m, values);
  merge_lo512(a, y, a, 512, values);
}

AVX512 static void small_sort512(int32_t *a, int64_t n, bool values) {
  if (n <= 16) small16_1(a, n, values);
  else if (n <= 32) small16_2(a, n, values);
  else if (n <= 64) small16_4(a, n, values);
  else if (n <= 128) small16_8(a, n, values);
  else if (n <= 256) small16_16(a, n, values);
  else if (n <= 512) small16_32(a, n, values);
  else small_sort1024(a, n, values);
}

static void insertion(int32_t *a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    int32_t x = a[i];
    int64_t j = i - 1;
    while (j >= 0 && a[j] > x) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = x;
  }
}

static void sift(int32_t *a, int64_t i, int64_t n) {
  int32_t x = a[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && a[c + 1] > a[c]) c++;
    if (a[c] <= x) break;
    a[i] = a[c];
    i = c;
  }
  a[i] = x;
}

static void heapsort_keys(int32_t *a, int64_t n) {
  for (int64_t i = n / 2 - 1; i >= 0; i--) sift(a, i, n);
  for (int64_t e = n - 1; e > 0; e--) {
    int32_t t = a[0];
    a[0] = a[e];
    a[e] = t;
    sift(a, 0, e);
  }
}

static inline int32_t med3(int32_t x, int32_t y, int32_t z) {
  if (x > y) {
    int32_t t = x;
    x = y;
    y = t;
  }
  return z <= x ? x : z >= y ? y : z;
}

/* The pivot: for large partitions the median of 64 keys spread over it (sorted by the
 * networks; closer to the true median, so fewer levels), else the median of three medians of
 * three. */
AVX2 static int32_t pivot_of(const int32_t *a, int64_t n) {
  if (n >= PIVOT_SAMPLE_MIN) {
    int32_t s[64];
    for (int i = 0; i < 64; i++) s[i] = a[(n / 64) * i + n / 128];
    small_sort8(s, 64, false);
    return s[32];
  }
  int64_t q = n / 8;
  return med3(med3(a[0], a[q], a[2 * q]), med3(a[3 * q], a[4 * q], a[5 * q]),
              med3(a[6 * q], a[7 * q], a[n - 1]));
}

/* Sorts the n keys; with `values`, every key ends as the float32 value it stands for (each
 * range is converted where it is final: a network's store, a run of pivot copies, heapsort). */
AVX2 static void quicksort(int32_t *a, int64_t n, int depth, bool values) {
  int64_t small = avx512_ok ? SMALL512 : SMALL;
  while (n > small) {
    if (depth-- <= 0) {
      heapsort_keys(a, n);
      if (values) to_values(a, n);
      return;
    }
    int32_t p = pivot_of(a, n);
    int64_t s = partition(a, n, p, false);
    if (s == 0) { /* p is the least key: its copies go first and are done */
      s = partition(a, n, p, true);
      if (values) to_values(a, s);
      a += s;
      n -= s;
      continue;
    }
    /* Recurse on the smaller side, loop on the larger. */
    if (s < n - s) {
      quicksort(a, s, depth, values);
      a += s;
      n -= s;
    } else {
      quicksort(a + s, n - s, depth, values);
      n = s;
    }
  }
  if (avx512_ok) small_sort512(a, n, values);
  else small_sort(a, n, values);
}

/* ---- argmax / argmin of a float32 row (AVX-512) ----
 * Two passes: the extreme in four independent registers (their maxima do not wait on each
 * other) with the NaN lanes or'ed into a mask, then the first index holding the extreme (or
 * the first NaN: a NaN wins, as NumPy), 16 lanes a compare. The row's tail loads masked, its
 * missing lanes filling with x[0]. The first ARG_PREFETCH values of a later row are prefetched
 * first: short rows read one after the other otherwise wait on memory at every row's start
 * (the second pass's exit branch stops the hardware running ahead), 3x slower. */
#define ARG_PREFETCH 4096
#define ARG_EXT(NAME, OP)                                                                     \
  AVX512 static uint32_t NAME(const float *x, int64_t n, const float *next) {                \
    if (next)                                                                                 \
      for (int64_t b = 0; b < n && b < ARG_PREFETCH; b += 16)                                 \
        _mm_prefetch((const char *)(next + b), _MM_HINT_T0);                                  \
    const __m512 fill = _mm512_set1_ps(x[0]);                                                 \
    __m512 m0 = fill, m1 = fill, m2 = fill, m3 = fill;                                        \
    __mmask16 nan = 0;                                                                        \
    int64_t i = 0;                                                                            \
    for (; i + 64 <= n; i += 64) {                                                            \
      __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);                   \
      __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);              \
      m0 = OP(m0, v0);                                                                        \
      m1 = OP(m1, v1);                                                                        \
      m2 = OP(m2, v2);                                                                        \
      m3 = OP(m3, v3);                                                                        \
      nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q); \
    }                                                                                         \
    for (; i < n; i += 16) {                                                                  \
      __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);       \
      __m512 v = _mm512_mask_loadu_ps(fill, k, x + i);                                        \
      m0 = OP(m0, v);                                                                         \
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);                                          \
    }                                                                                         \
    m0 = OP(OP(m0, m1), OP(m2, m3));                                                          \
    __m512 t = OP(m0, _mm512_shuffle_f32x4(m0, m0, 0x4e));                                    \
    t = OP(t, _mm512_shuffle_f32x4(t, t, 0xb1));                                              \
    t = OP(t, _mm512_permute_ps(t, 0x4e));                                                    \
    t = OP(t, _mm512_permute_ps(t, 0xb1));                                                    \
    __m512 b = t;                                                                             \
    for (i = 0; i < n; i += 16) {                                                             \
      __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);       \
      __m512 v = _mm512_maskz_loadu_ps(k, x + i);                                             \
      __mmask16 hit = (nan ? _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)                           \
                           : _mm512_cmp_ps_mask(v, b, _CMP_EQ_OQ)) & k;                       \
      if (hit) return (uint32_t)(i + __builtin_ctz(hit));                                     \
    }                                                                                         \
    return 0;                                                                                 \
  }
ARG_EXT(argmax512, _mm512_max_ps)
ARG_EXT(argmin512, _mm512_min_ps)

bool nv__simd_argext_f32(const float *x, int64_t n, bool max, const float *next, uint32_t *at) {
  pthread_once(&perm_once, perm_init);
  if (!avx512_ok || n < 1) return false;
  *at = max ? argmax512(x, n, next) : argmin512(x, n, next);
  return true;
}

static int depth_for(int64_t n) {
  int d = 0;
  while (n > 1) {
    n >>= 1;
    d++;
  }
  return 2 * d + 4;
}

/* The median of SAMPLE keys spread over a[0, n). */
static int32_t sample_median(const int32_t *a, int64_t n) {
  int32_t s[SAMPLE];
  for (int i = 0; i < SAMPLE; i++) s[i] = a[(int64_t)((double)n * (i + 0.5) / SAMPLE)];
  insertion(s, SAMPLE);
  return s[SAMPLE / 2];
}

typedef struct split_job {
  int32_t *a;
  int64_t start[SPLITS_MAX + 1];
  int nparts;
} split_job;

typedef struct conv_job {
  const float *in;
  int32_t *k;
  int64_t n, chunk;
} conv_job;

AVX2 static void conv_range(void *ctx, int64_t b, int64_t e) {
  conv_job *j = ctx;
  for (int64_t c = b; c < e; c++) {
    int64_t lo = c * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
    to_keys(j->in + lo, j->k + lo, hi - lo);
  }
}

AVX2 static void part_range(void *ctx, int64_t b, int64_t e) {
  split_job *j = ctx;
  for (int64_t i = b; i < e; i++) {
    int64_t lo = j->start[i], n = j->start[i + 1] - lo;
    quicksort(j->a + lo, n, depth_for(n), true);
  }
}

/* Splits a[0, n) into up to `want` parts, each part's keys at most the next part's: the
 * largest part is partitioned around its sample median until there are enough parts or the
 * largest is too unbalanced to split (all keys equal). */
AVX2 static void split_parts(split_job *j, int64_t n, int want) {
  j->start[0] = 0;
  j->start[1] = n;
  j->nparts = 1;
  while (j->nparts < want) {
    int big = 0;
    for (int i = 1; i < j->nparts; i++)
      if (j->start[i + 1] - j->start[i] > j->start[big + 1] - j->start[big]) big = i;
    int64_t lo = j->start[big], m = j->start[big + 1] - lo;
    int32_t *a = j->a + lo;
    int32_t p = sample_median(a, m);
    int64_t s = partition(a, m, p, false);
    if (s < m / 8 || m - s < m / 8) { /* many copies of p: put them left instead */
      s = partition(a, m, p, true);
      if (s < m / 8 || m - s < m / 8) break;
    }
    memmove(j->start + big + 2, j->start + big + 1, (size_t)(j->nparts - big) * sizeof *j->start);
    j->start[big + 1] = lo + s;
    j->nparts++;
  }
}

bool nv__simd_sort_f32(const float *in, float *out, int64_t n, bool parallel) {
  pthread_once(&perm_once, perm_init);
  if (!simd_ok) return false;
  int32_t *k = (int32_t *)out;
  int threads = parallel ? nv__pool_threads() : 1;
  int64_t chunk = (int64_t)1 << 16;
  conv_job c = {in, k, n, chunk};
  int64_t nchunks = (n + chunk - 1) / chunk;
  if (threads > 1) nv__parallel_for(nchunks, 1, conv_range, &c);
  else conv_range(&c, 0, nchunks);
  split_job j = {.a = k};
  int want = threads > 1 && n >= ((int64_t)1 << 16) ? threads : 1;
  if (want > SPLITS_MAX) want = SPLITS_MAX;
  split_parts(&j, n, want);
  if (j.nparts > 1) nv__parallel_for(j.nparts, 1, part_range, &j);
  else part_range(&j, 0, 1);
  return true;
}

#else

bool nv__simd_argext_f32(const float *x, int64_t n, bool max, const float *next, uint32_t *at) {
  (void)x;
  (void)n;
  (void)max;
  (void)next;
  (void)at;
  return false;
}

bool nv__simd_sort_f32(const float *in, float *out, int64_t n, bool parallel) {
  (void)in;
  (void)out;
  (void)n;
  (void)parallel;
  return false;
}

#endif
