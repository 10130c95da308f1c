/* Column sums of the reduce engine (reduce.c's column layout): `rows` rows `st` elements apart
 * added into float64 partial sums, each column in row order, so that every path gives the
 * same bits as the plain loop. The AVX-512 and AVX2 kernels keep a block of 32 (16) columns'
 * sums in registers for all the rows, loading and storing the partial sums once (or, for a
 * finished float32 result, storing it rounded); the baseline walks the rows over blocks of
 * columns. The kernel is picked once from the CPU's features. */
#include <pthread.h>

#include "cpu/reduce_cols.h"

/* The portable kernel: blocks of 64 columns, so the partial sums stay in L1 across the rows. */
#define COLS_BASE(NAME, T)                                                               \
  static void NAME(double *g, const T *x, int64_t st, int64_t rows, int64_t w) {         \
    for (int64_t j0 = 0; j0 < w; j0 += 64) {                                             \
      int64_t m = w - j0 < 64 ? w - j0 : 64;                                             \
      double *restrict gg = g + j0;                                                      \
      for (int64_t r = 0; r < rows; r++) {                                               \
        const T *restrict p = x + r * st + j0;                                           \
        for (int64_t j = 0; j < m; j++) gg[j] += p[j];                                   \
      }                                                                                  \
    }                                                                                    \
  }
COLS_BASE(cols_sum_f32_base, float)
COLS_BASE(cols_sum_f64_base, double)

/* Finished float32 sums: each block of 64 columns summed from zero, divided and rounded. */
static void cols_out_f32_base(float *y, const float *x, int64_t st, int64_t rows, int64_t w,
                              double div) {
  double g[64];
  for (int64_t j0 = 0; j0 < w; j0 += 64) {
    int64_t m = w - j0 < 64 ? w - j0 : 64;
    for (int64_t j = 0; j < m; j++) g[j] = 0.0;
    cols_sum_f32_base(g, x + j0, st, rows, m);
    for (int64_t j = 0; j < m; j++) y[j0 + j] = (float)(g[j] / div);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx2,avx512f,avx512vl")))

/* Eight float32 (float64) values from p as float64 lanes; the masked form reads only lanes of
 * k (the others are 0 and their memory untouched). */
#define LD8_F32(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))
#define LD8_F64(p) _mm512_loadu_pd(p)
#define LD8M_F32(k, p) _mm512_cvtps_pd(_mm256_maskz_loadu_ps((k), (p)))
#define LD8M_F64(k, p) _mm512_maskz_loadu_pd((k), (p))
#define LD4_F32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define LD4_F64(p) _mm256_loadu_pd(p)

#define COLS_AVX512(NAME, T, LD, LDM)                                                    \
  AVX512 static void NAME(double *g, const T *x, int64_t st, int64_t rows, int64_t w) {  \
    int64_t j = 0;                                                                       \
    for (; j + 32 <= w; j += 32) {                                                       \
      __m512d a0 = _mm512_loadu_pd(g + j), a1 = _mm512_loadu_pd(g + j + 8);              \
      __m512d a2 = _mm512_loadu_pd(g + j + 16), a3 = _mm512_loadu_pd(g + j + 24);        \
      const T *p = x + j;                                                                \
      for (int64_t r = 0; r < rows; r++, p += st) {                                      \
        a0 = _mm512_add_pd(a0, LD(p));                                                   \
        a1 = _mm512_add_pd(a1, LD(p + 8));                                               \
        a2 = _mm512_add_pd(a2, LD(p + 16));                                              \
        a3 = _mm512_add_pd(a3, LD(p + 24));                                              \
      }                                                                                  \
      _mm512_storeu_pd(g + j, a0);                                                       \
      _mm512_storeu_pd(g + j + 8, a1);                                                   \
      _mm512_storeu_pd(g + j + 16, a2);                                                  \
      _mm512_storeu_pd(g + j + 24, a3);                                                  \
    }                                                                                    \
    for (; j < w; j += 8) {                                                              \
      __mmask8 k = w - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (w - j)) - 1);        \
      __m512d a = _mm512_maskz_loadu_pd(k, g + j);                                       \
      const T *p = x + j;                                                                \
      for (int64_t r = 0; r < rows; r++, p += st) a = _mm512_add_pd(a, LDM(k, p));       \
      _mm512_mask_storeu_pd(g + j, k, a);                                                \
    }                                                                                    \
  }
COLS_AVX512(cols_sum_f32_avx512, float, LD8_F32, LD8M_F32)
COLS_AVX512(cols_sum_f64_avx512, double, LD8_F64, LD8M_F64)

/* Finished float32 sums from zero, divided and rounded in registers (no partial sums in
 * memory). */
AVX512 static void cols_out_f32_avx512(float *y, const float *x, int64_t st, int64_t rows,
                                       int64_t w, double div) {
  const __m512d d = _mm512_set1_pd(div);
  int64_t j = 0;
  for (; j + 32 <= w; j += 32) {
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    const float *p = x + j;
    for (int64_t r = 0; r < rows; r++, p += st) {
      a0 = _mm512_add_pd(a0, LD8_F32(p));
      a1 = _mm512_add_pd(a1, LD8_F32(p + 8));
      a2 = _mm512_add_pd(a2, LD8_F32(p + 16));
      a3 = _mm512_add_pd(a3, LD8_F32(p + 24));
    }
    _mm256_storeu_ps(y + j, _mm512_cvtpd_ps(_mm512_div_pd(a0, d)));
    _mm256_storeu_ps(y + j + 8, _mm512_cvtpd_ps(_mm512_div_pd(a1, d)));
    _mm256_storeu_ps(y + j + 16, _mm512_cvtpd_ps(_mm512_div_pd(a2, d)));
    _mm256_storeu_ps(y + j + 24, _mm512_cvtpd_ps(_mm512_div_pd(a3, d)));
  }
  for (; j < w; j += 8) {
    __mmask8 k = w - j >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (w - j)) - 1);
    __m512d a = _mm512_setzero_pd();
    const float *p = x + j;
    for (int64_t r = 0; r < rows; r++, p += st) a = _mm512_add_pd(a, LD8M_F32(k, p));
    _mm256_mask_storeu_ps(y + j, k, _mm512_cvtpd_ps(_mm512_div_pd(a, d)));
  }
}

#define COLS_AVX2(NAME, T, LD)                                                           \
  AVX2 static void NAME(double *g, const T *x, int64_t st, int64_t rows, int64_t w) {    \
    int64_t j = 0;                                                                       \
    for (; j + 16 <= w; j += 16) {                                                       \
      __m256d a0 = _mm256_loadu_pd(g + j), a1 = _mm256_loadu_pd(g + j + 4);              \
      __m256d a2 = _mm256_loadu_pd(g + j + 8), a3 = _mm256_loadu_pd(g + j + 12);         \
      const T *p = x + j;                                                                \
      for (int64_t r = 0; r < rows; r++, p += st) {                                      \
        a0 = _mm256_add_pd(a0, LD(p));                                                   \
        a1 = _mm256_add_pd(a1, LD(p + 4));                                               \
        a2 = _mm256_add_pd(a2, LD(p + 8));                                               \
        a3 = _mm256_add_pd(a3, LD(p + 12));                                              \
      }                                                                                  \
      _mm256_storeu_pd(g + j, a0);                                                       \
      _mm256_storeu_pd(g + j + 4, a1);                                                   \
      _mm256_storeu_pd(g + j + 8, a2);                                                   \
      _mm256_storeu_pd(g + j + 12, a3);                                                  \
    }                                                                                    \
    for (; j + 4 <= w; j += 4) {                                                         \
      __m256d a = _mm256_loadu_pd(g + j);                                                \
      const T *p = x + j;                                                                \
      for (int64_t r = 0; r < rows; r++, p += st) a = _mm256_add_pd(a, LD(p));           \
      _mm256_storeu_pd(g + j, a);                                                        \
    }                                                                                    \
    if (j < w) NAME##_tail(g + j, x + j, st, rows, w - j);                               \
  }
#define cols_sum_f32_avx2_tail cols_sum_f32_base
#define cols_sum_f64_avx2_tail cols_sum_f64_base
COLS_AVX2(cols_sum_f32_avx2, float, LD4_F32)
COLS_AVX2(cols_sum_f64_avx2, double, LD4_F64)

AVX2 static void cols_out_f32_avx2(float *y, const float *x, int64_t st, int64_t rows,
                                   int64_t w, double div) {
  const __m256d d = _mm256_set1_pd(div);
  int64_t j = 0;
  for (; j + 16 <= w; j += 16) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    const float *p = x + j;
    for (int64_t r = 0; r < rows; r++, p += st) {
      a0 = _mm256_add_pd(a0, LD4_F32(p));
      a1 = _mm256_add_pd(a1, LD4_F32(p + 4));
      a2 = _mm256_add_pd(a2, LD4_F32(p + 8));
      a3 = _mm256_add_pd(a3, LD4_F32(p + 12));
    }
    _mm_storeu_ps(y + j, _mm256_cvtpd_ps(_mm256_div_pd(a0, d)));
    _mm_storeu_ps(y + j + 4, _mm256_cvtpd_ps(_mm256_div_pd(a1, d)));
    _mm_storeu_ps(y + j + 8, _mm256_cvtpd_ps(_mm256_div_pd(a2, d)));
    _mm_storeu_ps(y + j + 12, _mm256_cvtpd_ps(_mm256_div_pd(a3, d)));
  }
  if (j < w) cols_out_f32_base(y + j, x + j, st, rows, w - j, div);
}

static int isa_level(void) {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return 2;
  return __builtin_cpu_supports("avx2") ? 1 : 0;
}
#else
static int isa_level(void) { return 0; }
#endif

typedef void (*cols_f32_fn)(double *, const float *, int64_t, int64_t, int64_t);
typedef void (*cols_f64_fn)(double *, const double *, int64_t, int64_t, int64_t);
typedef void (*cols_out_fn)(float *, const float *, int64_t, int64_t, int64_t, double);
static cols_f32_fn sum_f32 = cols_sum_f32_base;
static cols_f64_fn sum_f64 = cols_sum_f64_base;
static cols_out_fn out_f32 = cols_out_f32_base;
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;

static void pick(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  int level = isa_level();
  if (level == 2) {
    sum_f32 = cols_sum_f32_avx512;
    sum_f64 = cols_sum_f64_avx512;
    out_f32 = cols_out_f32_avx512;
  } else if (level == 1) {
    sum_f32 = cols_sum_f32_avx2;
    sum_f64 = cols_sum_f64_avx2;
    out_f32 = cols_out_f32_avx2;
  }
#endif
}

void nv__cols_sum_f32(double *g, const float *x, int64_t st, int64_t rows, int64_t w) {
  pthread_once(&pick_once, pick);
  sum_f32(g, x, st, rows, w);
}

void nv__cols_sum_f64(double *g, const double *x, int64_t st, int64_t rows, int64_t w) {
  pthread_once(&pick_once, pick);
  sum_f64(g, x, st, rows, w);
}

void nv__cols_sum_f32_out(float *y, const float *x, int64_t st, int64_t rows, int64_t w,
                          double div) {
  pthread_once(&pick_once, pick);
  out_f32(y, x, st, rows, w, div);
}
