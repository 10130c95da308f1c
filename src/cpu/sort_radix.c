/* LSD radix sorts of unsigned keys, optionally carrying uint32 payloads (the indices of
 * argsort). Stable. Digits are 11 bits (three passes for 32-bit keys); a digit every key shares
 * is skipped. The scatter stages keys in per-bucket buffers of one cache line and writes whole
 * lines, which keeps the destination streams few and the writes combined. Small inputs use
 * insertion sort. Large inputs split each pass over the pool: per-part histograms, one prefix
 * over (digit, part), per-part scatters — which keeps the sort stable. */
#include <stdlib.h>

#include "cpu/pool.h"
#include "cpu/sort_keys.h"
#include "cpu/sort_radix.h"

#define PARTS_MAX 64
#define BITS 11
#define BUCKETS (1 << BITS)
/* Parts below this many keys scatter directly; larger ones stage whole cache lines per bucket
 * (measured faster only for very large parts). */
#define SMALL (1 << 22)
/* float32 sorts from this many values split by their top digit first. */
#define MSD_MIN (1 << 18)

#define RADIX_IMPL(SUF, KT)                                                                 \
  enum { LINE_##SUF = 64 / (int)sizeof(KT) };                                               \
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
    int64_t (*hist)[BUCKETS];                                                               \
    atomic_int failed;                                                                      \
  } pass_##SUF;                                                                             \
                                                                                            \
  static void count_##SUF(void *ctx, int64_t b, int64_t e) {                                \
    pass_##SUF *p = ctx;                                                                    \
    for (int64_t t = b; t < e; t++) {                                                       \
      int64_t lo = p->n * t / p->parts, hi = p->n * (t + 1) / p->parts;                     \
      int64_t *h = p->hist[t];                                                              \
      memset(h, 0, BUCKETS * sizeof *h);                                                    \
      for (int64_t i = lo; i < hi; i++) h[(p->k[i] >> p->shift) & (BUCKETS - 1)]++;         \
    }                                                                                       \
  }                                                                                         \
                                                                                            \
  /* One part's scatter through per-bucket line buffers (keys, and payloads alike). */      \
  static void scatter_part_##SUF(pass_##SUF *p, int64_t lo, int64_t hi, int64_t *pos,      \
                                 KT (*kb)[LINE_##SUF], uint32_t (*ib)[LINE_##SUF],          \
                                 uint8_t *fill) {                                           \
    if (!kb) { /* small parts: a plain scatter (the destination stays in cache) */          \
      for (int64_t i = lo; i < hi; i++) {                                                   \
        KT key = p->k[i];                                                                   \
        int64_t j = pos[(key >> p->shift) & (BUCKETS - 1)]++;                               \
        p->tk[j] = key;                                                                     \
        if (p->idx) p->ti[j] = p->idx[i];                                                   \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    memset(fill, 0, BUCKETS);                                                               \
    for (int64_t i = lo; i < hi; i++) {                                                     \
      KT key = p->k[i];                                                                     \
      unsigned d = (unsigned)(key >> p->shift) & (BUCKETS - 1);                             \
      unsigned f = fill[d];                                                                 \
      kb[d][f] = key;                                                                       \
      if (ib) ib[d][f] = p->idx[i];                                                         \
      if (++f == LINE_##SUF) {                                                              \
        memcpy(p->tk + pos[d], kb[d], sizeof kb[d]);                                        \
        if (ib) memcpy(p->ti + pos[d], ib[d], LINE_##SUF * sizeof(uint32_t));               \
        pos[d] += LINE_##SUF;                                                               \
        f = 0;                                                                              \
      }                                                                                     \
      fill[d] = (uint8_t)f;                                                                 \
    }                                                                                       \
    for (int d = 0; d < BUCKETS; d++) {                                                     \
      memcpy(p->tk + pos[d], kb[d], fill[d] * sizeof(KT));                                  \
      if (ib) memcpy(p->ti + pos[d], ib[d], fill[d] * sizeof(uint32_t));                   \
      pos[d] += fill[d];                                                                    \
    }                                                                                       \
  }                                                                                         \
                                                                                            \
  static void scatter_##SUF(void *ctx, int64_t b, int64_t e) {                              \
    pass_##SUF *p = ctx;                                                                    \
    if (p->n / p->parts < SMALL) {                                                          \
      for (int64_t t = b; t < e; t++)                                                       \
        scatter_part_##SUF(p, p->n * t / p->parts, p->n * (t + 1) / p->parts, p->hist[t],   \
                           NULL, NULL, NULL);                                               \
      return;                                                                               \
    }                                                                                       \
    KT(*kb)[LINE_##SUF] = malloc(BUCKETS * sizeof *kb);                                    \
    uint32_t(*ib)[LINE_##SUF] = p->idx ? malloc(BUCKETS * sizeof *ib) : NULL;              \
    uint8_t *fill = malloc(BUCKETS);                                                        \
    if (!kb || !fill || (p->idx && !ib)) {                                                  \
      atomic_store(&p->failed, 1);                                                          \
    } else {                                                                                \
      for (int64_t t = b; t < e; t++)                                                       \
        scatter_part_##SUF(p, p->n * t / p->parts, p->n * (t + 1) / p->parts, p->hist[t],   \
                           kb, ib, fill);                                                   \
    }                                                                                       \
    free(kb);                                                                               \
    free(ib);                                                                               \
    free(fill);                                                                             \
  }                                                                                         \
                                                                                            \
  /* Turns the per-part counts into starting positions; false when every key shares the    \
   * digit (the pass can be skipped). */                                                    \
  static bool prefix_##SUF(int64_t (*hist)[BUCKETS], int64_t parts, int64_t n) {            \
    for (int v = 0; v < BUCKETS; v++) {                                                     \
      int64_t tot = 0;                                                                      \
      for (int64_t t = 0; t < parts; t++) tot += hist[t][v];                                \
      if (tot == n) return false;                                                           \
    }                                                                                       \
    int64_t off = 0;                                                                        \
    for (int v = 0; v < BUCKETS; v++)                                                       \
      for (int64_t t = 0; t < parts; t++) {                                                 \
        int64_t c = hist[t][v];                                                             \
        hist[t][v] = off;                                                                   \
        off += c;                                                                           \
      }                                                                                     \
    return true;                                                                            \
  }                                                                                         \
                                                                                            \
  static bool radix_bits_##SUF(KT *k, KT *tk, uint32_t *idx, uint32_t *ti, int64_t n,       \
                               bool parallel, int bits) {                                   \
    if (n < 64) {                                                                           \
      insertion_##SUF(k, idx, n);                                                           \
      return true;                                                                          \
    }                                                                                       \
    int64_t parts = 1;                                                                      \
    if (parallel && n >= 4 * NV__PAR_GRAIN) {                                               \
      parts = nv__pool_threads();                                                           \
      if (parts > PARTS_MAX) parts = PARTS_MAX;                                             \
    }                                                                                       \
    /* One part: the histograms of every digit come from a single read (counts do not depend \
     * on the order). Several parts: each pass counts its parts in their current order. */  \
    int npass = (bits + BITS - 1) / BITS;                                                   \
    int64_t nh = parts > 1 ? parts : npass;                                                 \
    int64_t(*hist)[BUCKETS] = calloc((size_t)nh, sizeof *hist);                            \
    if (!hist) return false;                                                                \
    if (parts == 1)                                                                         \
      for (int64_t i = 0; i < n; i++)                                                       \
        for (int d = 0; d < npass; d++) hist[d][(k[i] >> (d * BITS)) & (BUCKETS - 1)]++;    \
    KT *src = k, *dst = tk;                                                                 \
    uint32_t *isrc = idx, *idst = ti;                                                       \
    bool ok = true;                                                                         \
    for (int d = 0; d < npass && ok; d++) {                                                 \
      int64_t(*h)[BUCKETS] = parts > 1 ? hist : hist + d;                                   \
      pass_##SUF p = {src, dst, isrc, idst, n, parts, d * BITS, h, 0};                      \
      if (parts > 1) nv__parallel_for(parts, 1, count_##SUF, &p);                           \
      if (!prefix_##SUF(h, parts, n)) continue;                                             \
      if (parts > 1) nv__parallel_for(parts, 1, scatter_##SUF, &p);                         \
      else scatter_##SUF(&p, 0, 1);                                                         \
      ok = !atomic_load(&p.failed);                                                         \
      KT *s = src;                                                                          \
      src = dst;                                                                            \
      dst = s;                                                                              \
      uint32_t *is = isrc;                                                                  \
      isrc = idst;                                                                          \
      idst = is;                                                                            \
    }                                                                                       \
    if (ok && src != k) {                                                                   \
      memcpy(k, src, (size_t)n * sizeof *k);                                                \
      if (idx) memcpy(idx, isrc, (size_t)n * sizeof *idx);                                  \
    }                                                                                       \
    free(hist);                                                                             \
    return ok;                                                                              \
  }                                                                                         \
                                                                                            \
  bool nv__radix_sort_##SUF(KT *k, KT *tk, uint32_t *idx, uint32_t *ti, int64_t n,          \
                            bool parallel) {                                                \
    return radix_bits_##SUF(k, tk, idx, ti, n, parallel, 8 * (int)sizeof(KT));              \
  }

RADIX_IMPL(u32, uint32_t)
RADIX_IMPL(u64, uint64_t)

/* ---- float32 values: key conversion fused into the first and last passes ---- */

typedef struct fpass {
  const float *in;   /* first pass: the values, converted to keys on the fly */
  const uint32_t *k; /* later passes: the keys */
  uint32_t *dst;     /* the destination keys, or values (float bits) on the last pass */
  bool first, last;
  int64_t n, parts;
  int shift;
  int64_t (*hist)[BUCKETS];
  atomic_int failed;
} fpass;

static inline uint32_t fpass_key(const fpass *p, int64_t i, bool first) {
  return first ? nv__fkey32(p->in[i], false) : p->k[i];
}

static void fcount(void *ctx, int64_t b, int64_t e) {
  fpass *p = ctx;
  for (int64_t t = b; t < e; t++) {
    int64_t lo = p->n * t / p->parts, hi = p->n * (t + 1) / p->parts;
    int64_t *h = p->hist[t];
    memset(h, 0, BUCKETS * sizeof *h);
    if (p->first)
      for (int64_t i = lo; i < hi; i++) h[(fpass_key(p, i, true) >> p->shift) & (BUCKETS - 1)]++;
    else
      for (int64_t i = lo; i < hi; i++) h[(p->k[i] >> p->shift) & (BUCKETS - 1)]++;
  }
}

static inline void fflush_line(uint32_t *dst, const uint32_t *line, unsigned m, bool last) {
  if (last)
    for (unsigned j = 0; j < m; j++) dst[j] = nv__f32_bits(nv__fkey32_inv(line[j]));
  else
    memcpy(dst, line, m * sizeof *line);
}

static inline void fscatter_part(fpass *p, int64_t lo, int64_t hi, int64_t *pos,
                                 uint32_t (*kb)[16], uint8_t *fill, bool first, bool last) {
  memset(fill, 0, BUCKETS);
  for (int64_t i = lo; i < hi; i++) {
    uint32_t key = fpass_key(p, i, first);
    unsigned d = (key >> p->shift) & (BUCKETS - 1);
    unsigned f = fill[d];
    kb[d][f] = key;
    if (++f == 16) {
      fflush_line(p->dst + pos[d], kb[d], 16, last);
      pos[d] += 16;
      f = 0;
    }
    fill[d] = (uint8_t)f;
  }
  for (int d = 0; d < BUCKETS; d++) {
    fflush_line(p->dst + pos[d], kb[d], fill[d], last);
    pos[d] += fill[d];
  }
}

static void fscatter(void *ctx, int64_t b, int64_t e) {
  fpass *p = ctx;
  uint32_t(*kb)[16] = malloc(BUCKETS * sizeof *kb);
  uint8_t *fill = malloc(BUCKETS);
  if (!kb || !fill) {
    atomic_store(&p->failed, 1);
  } else {
    for (int64_t t = b; t < e; t++) {
      int64_t lo = p->n * t / p->parts, hi = p->n * (t + 1) / p->parts;
      /* Constant flags per call, so each variant compiles to its own loop. */
      if (p->first && p->last) fscatter_part(p, lo, hi, p->hist[t], kb, fill, true, true);
      else if (p->first) fscatter_part(p, lo, hi, p->hist[t], kb, fill, true, false);
      else if (p->last) fscatter_part(p, lo, hi, p->hist[t], kb, fill, false, true);
      else fscatter_part(p, lo, hi, p->hist[t], kb, fill, false, false);
    }
  }
  free(kb);
  free(fill);
}

/* Large inputs: one pass by the top 11 bits of the key into `tmp`, then each bucket (now
 * independent, and mostly cache-sized) sorted on its low 21 bits with `out` as scratch and
 * converted back into `out`. The buckets spread over the pool. */
typedef struct msd_job {
  uint32_t *keys;
  float *out;
  const int64_t *start;
  atomic_int failed;
} msd_job;

static void msd_buckets(void *ctx, int64_t b, int64_t e) {
  msd_job *j = ctx;
  for (int64_t d = b; d < e; d++) {
    int64_t lo = j->start[d], n = j->start[d + 1] - lo;
    uint32_t *k = j->keys + lo;
    if (n == 0) continue;
    if (!radix_bits_u32(k, (uint32_t *)j->out + lo, NULL, NULL, n, false, 32 - BITS)) {
      atomic_store(&j->failed, 1);
      continue;
    }
    for (int64_t i = 0; i < n; i++) j->out[lo + i] = nv__fkey32_inv(k[i]);
  }
}

/* Returns 1 when sorted, 0 when every key shares the top digit (use the LSD passes), -1 when
 * out of memory. */
static int msd_sort_f32(const float *in, float *out, uint32_t *tmp, int64_t n, int64_t parts,
                        int64_t (*hist)[BUCKETS]) {
  fpass p = {in, NULL, tmp, true, false, n, parts, 32 - BITS, hist, 0};
  if (parts > 1) nv__parallel_for(parts, 1, fcount, &p);
  else fcount(&p, 0, 1);
  if (!prefix_u32(hist, parts, n)) return 0;
  int64_t *start = malloc((BUCKETS + 1) * sizeof *start);
  if (!start) return -1;
  for (int d = 0; d < BUCKETS; d++) start[d] = hist[0][d];
  start[BUCKETS] = n;
  if (parts > 1) nv__parallel_for(parts, 1, fscatter, &p);
  else fscatter(&p, 0, 1);
  msd_job j = {tmp, out, start, 0};
  atomic_init(&j.failed, atomic_load(&p.failed));
  if (!atomic_load(&j.failed)) {
    if (parts > 1) nv__parallel_for(BUCKETS, 1, msd_buckets, &j);
    else msd_buckets(&j, 0, BUCKETS);
  }
  free(start);
  return atomic_load(&j.failed) ? -1 : 1;
}

bool nv__radix_sort_f32(const float *in, float *out, uint32_t *tmp, int64_t n, bool parallel) {
  int64_t parts = 1;
  if (parallel && n >= 4 * NV__PAR_GRAIN) {
    parts = nv__pool_threads();
    if (parts > PARTS_MAX) parts = PARTS_MAX;
  }
  int64_t(*hist)[BUCKETS] = malloc((size_t)parts * sizeof *hist);
  if (!hist) return false;
  if (n >= MSD_MIN) {
    int r = msd_sort_f32(in, out, tmp, n, parts, hist);
    if (r != 0) {
      free(hist);
      return r > 0;
    }
  }
  /* Which digits vary: a digit every key shares needs no pass. */
  int shifts[3], m = 0;
  for (int s = 0; s < 32; s += BITS) {
    fpass p = {in, NULL, NULL, true, false, n, parts, s, hist, 0};
    if (parts > 1) nv__parallel_for(parts, 1, fcount, &p);
    else fcount(&p, 0, 1);
    int64_t top = 0;
    for (int v = 0; v < BUCKETS; v++) {
      int64_t tot = 0;
      for (int64_t t = 0; t < parts; t++) tot += hist[t][v];
      top = tot > top ? tot : top;
    }
    if (top != n) shifts[m++] = s;
  }
  if (m == 0) { /* every key equal: the values are their own sorted order */
    memcpy(out, in, (size_t)n * sizeof *out);
    free(hist);
    return true;
  }
  /* Ping-pong between `out` and `tmp` so that the last pass lands in `out`. */
  uint32_t *bufs[2] = {(uint32_t *)out, tmp};
  const uint32_t *src = NULL;
  bool ok = true;
  for (int i = 0; i < m && ok; i++) {
    uint32_t *dst = bufs[(m - 1 - i) & 1];
    fpass p = {in, src, dst, i == 0, i == m - 1, n, parts, shifts[i], hist, 0};
    if (parts > 1) nv__parallel_for(parts, 1, fcount, &p);
    else fcount(&p, 0, 1);
    prefix_u32(hist, parts, n);
    if (parts > 1) nv__parallel_for(parts, 1, fscatter, &p);
    else fscatter(&p, 0, 1);
    ok = !atomic_load(&p.failed);
    src = dst;
  }
  free(hist);
  return ok;
}
