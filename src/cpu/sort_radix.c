/* LSD radix sorts of unsigned keys (8-bit digits), optionally carrying uint32 payloads (the
 * indices of argsort). Stable. Digits every key shares are skipped. Small inputs use insertion
 * sort; large ones split each pass over the pool: per-part histograms, one prefix over
 * (digit, part), and per-part scatters, which keeps the sort stable. */
#include <stdlib.h>

#include "cpu/pool.h"
#include "cpu/sort_radix.h"

#define PARTS_MAX 64

#define RADIX_IMPL(SUF, KT, NB)                                                             \
  static void insertion_##SUF(KT *k, uint32_t *idx, int64_t n) {                            \
    for (int64_t i = 1; i < n; i++) {                                                       \
      KT key = k[i];                                                                        \
      uint32_t id = idx ? idx[i] : 0;                                                       \
      int64_t j = i - 1;                                                                    \
      while (j >= 0 && k[j] > key) {                                                        \
        k[j + 1] = k[j];                                                                    \
        if (idx) idx[j + 1] = idx[j];                                                       \
        j--;                                                                                \
      }                                                                                     \
      k[j + 1] = key;                                                                       \
      if (idx) idx[j + 1] = id;                                                             \
    }                                                                                       \
  }                                                                                         \
                                                                                            \
  typedef struct pass_##SUF {                                                               \
    const KT *k;                                                                            \
    KT *tk;                                                                                 \
    const uint32_t *idx;                                                                    \
    uint32_t *ti;                                                                           \
    int64_t n, parts;                                                                       \
    int shift;                                                                              \
    int64_t (*hist)[256];                                                                   \
  } pass_##SUF;                                                                             \
                                                                                            \
  static void count_##SUF(void *ctx, int64_t b, int64_t e) {                                \
    pass_##SUF *p = ctx;                                                                    \
    for (int64_t t = b; t < e; t++) {                                                       \
      int64_t lo = p->n * t / p->parts, hi = p->n * (t + 1) / p->parts;                     \
      int64_t *h = p->hist[t];                                                              \
      memset(h, 0, 256 * sizeof *h);                                                        \
      for (int64_t i = lo; i < hi; i++) h[(p->k[i] >> p->shift) & 255]++;                  \
    }                                                                                       \
  }                                                                                         \
                                                                                            \
  static void scatter_##SUF(void *ctx, int64_t b, int64_t e) {                              \
    pass_##SUF *p = ctx;                                                                    \
    for (int64_t t = b; t < e; t++) {                                                       \
      int64_t lo = p->n * t / p->parts, hi = p->n * (t + 1) / p->parts;                     \
      int64_t *pos = p->hist[t];                                                            \
      if (p->idx) {                                                                         \
        for (int64_t i = lo; i < hi; i++) {                                                 \
          KT key = p->k[i];                                                                 \
          int64_t j = pos[(key >> p->shift) & 255]++;                                       \
          p->tk[j] = key;                                                                   \
          p->ti[j] = p->idx[i];                                                             \
        }                                                                                   \
      } else {                                                                              \
        for (int64_t i = lo; i < hi; i++) {                                                 \
          KT key = p->k[i];                                                                 \
          p->tk[pos[(key >> p->shift) & 255]++] = key;                                      \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }                                                                                         \
                                                                                            \
  bool nv__radix_sort_##SUF(KT *k, KT *tk, uint32_t *idx, uint32_t *ti, int64_t n,          \
                            bool parallel) {                                                \
    if (n < 64) {                                                                           \
      insertion_##SUF(k, idx, n);                                                           \
      return true;                                                                          \
    }                                                                                       \
    int64_t parts = 1;                                                                      \
    if (parallel && n >= 4 * NV__PAR_GRAIN) {                                               \
      parts = nv__pool_threads();                                                           \
      if (parts > PARTS_MAX) parts = PARTS_MAX;                                             \
    }                                                                                       \
    int64_t(*hist)[256] = malloc((size_t)parts * sizeof *hist);                            \
    if (!hist) return false;                                                                \
    KT *src = k, *dst = tk;                                                                 \
    uint32_t *isrc = idx, *idst = ti;                                                       \
    for (int d = 0; d < NB; d++) {                                                          \
      pass_##SUF p = {src, dst, isrc, idst, n, parts, 8 * d, hist};                         \
      if (parts > 1) nv__parallel_for(parts, 1, count_##SUF, &p);                           \
      else count_##SUF(&p, 0, 1);                                                           \
      /* Skip a digit that every key shares; else turn counts into starting positions. */   \
      bool skip = false;                                                                    \
      for (int v = 0; v < 256 && !skip; v++) {                                              \
        int64_t tot = 0;                                                                    \
        for (int64_t t = 0; t < parts; t++) tot += hist[t][v];                              \
        skip = tot == n;                                                                    \
      }                                                                                     \
      if (skip) continue;                                                                   \
      int64_t off = 0;                                                                      \
      for (int v = 0; v < 256; v++)                                                         \
        for (int64_t t = 0; t < parts; t++) {                                               \
          int64_t c = hist[t][v];                                                           \
          hist[t][v] = off;                                                                 \
          off += c;                                                                         \
        }                                                                                   \
      if (parts > 1) nv__parallel_for(parts, 1, scatter_##SUF, &p);                         \
      else scatter_##SUF(&p, 0, 1);                                                         \
      KT *s = src;                                                                          \
      src = dst;                                                                            \
      dst = s;                                                                              \
      uint32_t *is = isrc;                                                                  \
      isrc = idst;                                                                          \
      idst = is;                                                                            \
    }                                                                                       \
    if (src != k) {                                                                         \
      memcpy(k, src, (size_t)n * sizeof *k);                                                \
      if (idx) memcpy(idx, isrc, (size_t)n * sizeof *idx);                                  \
    }                                                                                       \
    free(hist);                                                                             \
    return true;                                                                            \
  }

RADIX_IMPL(u32, uint32_t, 4)
RADIX_IMPL(u64, uint64_t, 8)
