/* The sort family's kernels on sortable keys (sort_keys.h): sort / argsort (and partition /
 * argpartition, which return the fully sorted arrangement) through stable radix sorts (float32
 * values into a contiguous row: the vectorized quicksort of sort_simd.c where the CPU has AVX2),
 * median, argmax / argmin, and searchsorted. Rows come from the row driver; a single large row
 * sorts with every pass split over the pool, many rows sort one per task. */
#include <stdlib.h>

#include "cpu/reduce_rows.h"
#include "cpu/sort_keys.h"
#include "cpu/sort_radix.h"
#include "ops/reduce_params.h"

typedef struct sort_job {
  nv__rows *r;
  bool arg;       /* indices rather than values */
  bool key32;     /* 32-bit keys */
  bool via_index; /* values gathered through the sorted indices (complex: exact round trip) */
  bool parallel;  /* split each row's passes over the pool */
} sort_job;

/* Scratch for one row: native values, keys and their radix scratch, indices and theirs. */
typedef struct sort_scratch {
  char *vals;
  void *keys, *tkeys;
  uint32_t *idx, *tidx;
} sort_scratch;

static void scratch_free(sort_scratch *s) {
  free(s->vals);
  free(s->keys);
  free(s->tkeys);
  free(s->idx);
  free(s->tidx);
}

static bool scratch_alloc(sort_scratch *s, const sort_job *j) {
  int64_t n = j->r->len ? j->r->len : 1;
  size_t kw = j->key32 ? 4 : 8;
  bool idx = j->arg || j->via_index;
  memset(s, 0, sizeof *s);
  s->vals = malloc((size_t)n * (size_t)j->r->isz);
  s->keys = malloc((size_t)n * kw);
  s->tkeys = malloc((size_t)n * kw);
  if (idx) {
    s->idx = malloc((size_t)n * 4);
    s->tidx = malloc((size_t)n * 4);
  }
  if (!s->vals || !s->keys || !s->tkeys || (idx && (!s->idx || !s->tidx))) {
    scratch_free(s);
    return false;
  }
  return true;
}

static bool sort_row(const sort_job *j, int64_t row, sort_scratch *s) {
  nv__rows *r = j->r;
  int64_t n = r->len;
  const char *x;
  if (nv__rows_in_contiguous(r)) {
    x = r->in + nv__rows_in_offset(r, row) * r->isz;
  } else {
    nv__rows_gather(r, row, r->idt, s->vals);
    x = s->vals;
  }
  bool out_direct = nv__rows_out_contiguous(r);
  char *y = r->out + nv__rows_out_offset(r, row) * r->osz;
  bool idx = j->arg || j->via_index;
  if (!idx && out_direct && r->idt == NV_DTYPE_FLOAT32) {
    if (nv__simd_sort_f32((const float *)x, (float *)y, n, j->parallel)) return true;
    return nv__radix_sort_f32((const float *)x, (float *)y, s->tkeys, n, j->parallel);
  }
  if (idx)
    for (int64_t i = 0; i < n; i++) s->idx[i] = (uint32_t)i;
  /* Sorting float32/int32/uint32 values into a contiguous output row uses the row itself as
   * the key buffer, saving a copy. */
  void *keys = !idx && out_direct && r->isz == 4 && j->key32 ? (void *)y : s->keys;
  bool ok;
  if (j->key32) {
    nv__to_keys32(r->idt, x, n, keys, j->arg);
    ok = nv__radix_sort_u32(keys, s->tkeys, s->idx, s->tidx, n, j->parallel);
  } else {
    nv__to_keys64(r->idt, x, n, keys, j->arg);
    ok = nv__radix_sort_u64(keys, s->tkeys, s->idx, s->tidx, n, j->parallel);
  }
  if (!ok) return false;
  if (j->arg) {
    if (out_direct) memcpy(y, s->idx, (size_t)n * 4);
    else nv__rows_scatter(r, row, NV_DTYPE_UINT32, s->idx);
    return true;
  }
  char *v = out_direct ? y : s->vals;
  if (j->via_index) {
    /* x may be s->vals itself: permute through the key scratch. */
    char *tmp = s->tkeys;
    for (int64_t i = 0; i < n; i++) memcpy(tmp + i * r->isz, x + s->idx[i] * r->isz, r->isz);
    memcpy(v, tmp, (size_t)(n * r->isz));
  } else if (j->key32) {
    nv__from_keys32(r->idt, keys, n, v);
  } else {
    nv__from_keys64(r->idt, keys, n, v);
  }
  if (!out_direct) nv__rows_scatter(r, row, r->idt, v);
  return true;
}

static void sort_range(void *ctx, int64_t b, int64_t e) {
  sort_job *j = ctx;
  sort_scratch s;
  if (!scratch_alloc(&s, j)) {
    atomic_store(&j->r->failed, 1);
    return;
  }
  for (int64_t i = b; i < e; i++)
    if (!sort_row(j, i, &s)) {
      atomic_store(&j->r->failed, 1);
      break;
    }
  scratch_free(&s);
}

nv_status nv__k_sort(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__rows r;
  int go = nv__rows_begin(node, in, true, &r);
  if (go <= 0) return go < 0 ? NV_ERR_OUT_OF_MEMORY : NV_OK;
  sort_job j = {&r, node->prim == NV__PRIM_ARGSORT || node->prim == NV__PRIM_ARGPARTITION,
                nv__key32_dtype(r.idt), r.idt == NV_DTYPE_COMPLEX64, false};
  /* Few long rows: sort them one by one, each pass on the whole pool. */
  if (r.nrows < nv__pool_threads() && r.len >= 4 * NV__PAR_GRAIN) {
    j.parallel = true;
    sort_range(&j, 0, r.nrows);
  } else {
    nv__rows_parallel(&r, sort_range, &j);
  }
  if (atomic_load(&r.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}

/* ---- median: the middle of the sorted keys ---- */

static double key_value(nv_dtype dt, uint64_t key) {
  unsigned char v[16];
  double d;
  nv__from_keys64(dt, &key, 1, v);
  nv__convert_run(dt, (const char *)v, 1, NV_DTYPE_FLOAT64, (char *)&d, 1, 1);
  return d;
}

static void median_range(void *ctx, int64_t b, int64_t e) {
  nv__rows *r = ctx;
  int64_t n = r->len;
  char *vals = malloc((size_t)(n ? n : 1) * (size_t)r->isz);
  uint64_t *k = malloc((size_t)(n ? n : 1) * 8), *tk = malloc((size_t)(n ? n : 1) * 8);
  if (!vals || !k || !tk) {
    atomic_store(&r->failed, 1);
    goto done;
  }
  for (int64_t i = b; i < e; i++) {
    double m = NAN;
    if (n > 0) {
      nv__rows_gather(r, i, r->idt, vals);
      nv__to_keys64(r->idt, vals, n, k, false);
      if (!nv__radix_sort_u64(k, tk, NULL, NULL, n, false)) {
        atomic_store(&r->failed, 1);
        break;
      }
      if (!nv__key_is_nan(r->idt, k[n - 1], false)) {
        double lo = key_value(r->idt, k[(n - 1) / 2]), hi = key_value(r->idt, k[n / 2]);
        m = lo + (hi - lo) / 2; /* no overflow for large same-signed values */
        if (lo == hi) m = lo;
      }
    }
    nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&m, 1, r->odt, r->out + i * r->osz, 1, 1);
  }
done:
  free(vals);
  free(k);
  free(tk);
}

nv_status nv__k_median(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__rows r;
  int go = nv__rows_begin(node, in, false, &r);
  if (go <= 0) return go < 0 ? NV_ERR_OUT_OF_MEMORY : NV_OK;
  nv__rows_parallel(&r, median_range, &r);
  if (atomic_load(&r.failed)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "median: out of memory");
  return NV_OK;
}

/* ---- argmax / argmin: the first extreme; a NaN wins (the first one), as NumPy ----
 * Keys order every dtype; for argmin of the float dtypes NaN's key is moved to 0 (below every
 * other float key), so that one strict comparison serves both ops. float32/float64 rows that
 * are contiguous take a direct path: the extreme (and whether a NaN is present) in a
 * vectorizable pass, then the first index holding it; float32 rows run it in AVX-512 where the
 * CPU has it (sort_simd.c). */

typedef struct arg_job {
  nv__rows *r;
  bool max;
  bool nan_low; /* argmin of a float dtype */
} arg_job;

#define ARG_BLOCK 512
#define ARG_PREFETCH 4096 /* the values of a later row prefetched (sort_simd.c says why) */

static void arg_keys(const arg_job *j, const char *x, int64_t m, uint64_t *k) {
  nv__to_keys64(j->r->idt, x, m, k, true);
  if (j->nan_low)
    for (int64_t i = 0; i < m; i++) k[i] = k[i] == UINT64_MAX ? 0 : k[i];
}

#define ARG_DIRECT(NAME, T, CMP)                                              \
  static uint32_t NAME(const T *x, int64_t n, const T *next) {                \
    if (next)                                                                 \
      for (int64_t b = 0; b < n && b < ARG_PREFETCH; b += 64 / sizeof(T))    \
        __builtin_prefetch(next + b);                                         \
    T m[8];                                                                   \
    int nan[8] = {0};                                                         \
    for (int k = 0; k < 8; k++) m[k] = x[0];                                  \
    int64_t i = 0;                                                            \
    for (; i + 8 <= n; i += 8)                                                \
      for (int k = 0; k < 8; k++) {                                           \
        T v = x[i + k];                                                       \
        m[k] = v CMP m[k] ? v : m[k];                                         \
        nan[k] |= v != v;                                                     \
      }                                                                       \
    T best = x[0];                                                            \
    int any = 0;                                                              \
    for (int k = 0; k < 8; k++) {                                             \
      best = m[k] CMP best ? m[k] : best;                                     \
      any |= nan[k];                                                          \
    }                                                                         \
    for (; i < n; i++) {                                                      \
      best = x[i] CMP best ? x[i] : best;                                     \
      any |= x[i] != x[i];                                                    \
    }                                                                         \
    /* The first match, found 16 elements at a time (the test vectorizes). */ \
    for (i = 0; i + 16 <= n; i += 16) {                                       \
      int hit = 0;                                                            \
      for (int k = 0; k < 16; k++)                                            \
        hit |= any ? x[i + k] != x[i + k] : x[i + k] == best;                 \
      if (hit) break;                                                         \
    }                                                                         \
    for (; i < n; i++)                                                        \
      if (any ? x[i] != x[i] : x[i] == best) break;                           \
    return (uint32_t)i;                                                       \
  }
ARG_DIRECT(argmax_f32, float, >)
ARG_DIRECT(argmin_f32, float, <)
ARG_DIRECT(argmax_f64, double, >)
ARG_DIRECT(argmin_f64, double, <)

/* The first extreme of the row at x; `next` (or NULL) is where a later row starts (float32 and
 * float64 rows prefetch it). */
static uint32_t arg_row(const arg_job *j, const char *x, int64_t n, const char *next) {
  uint32_t first;
  const float *xf = (const float *)x, *nf = (const float *)next;
  const double *xd = (const double *)x, *nd = (const double *)next;
  if (j->r->idt == NV_DTYPE_FLOAT32 && nv__simd_argext_f32(xf, n, j->max, nf, &first))
    return first;
  if (j->r->idt == NV_DTYPE_FLOAT32) return j->max ? argmax_f32(xf, n, nf) : argmin_f32(xf, n, nf);
  if (j->r->idt == NV_DTYPE_FLOAT64) return j->max ? argmax_f64(xd, n, nd) : argmin_f64(xd, n, nd);
  uint64_t k[ARG_BLOCK];
  uint64_t best = 0;
  int64_t at = 0;
  for (int64_t b = 0; b < n; b += ARG_BLOCK) {
    int64_t m = n - b < ARG_BLOCK ? n - b : ARG_BLOCK;
    arg_keys(j, x + b * j->r->isz, m, k);
    if (b == 0) best = k[0];
    for (int64_t i = 0; i < m; i++)
      if (j->max ? k[i] > best : k[i] < best) {
        best = k[i];
        at = b + i;
      }
  }
  return (uint32_t)at;
}

static void arg_range(void *ctx, int64_t b, int64_t e) {
  const arg_job *j = ctx;
  nv__rows *r = j->r;
  bool direct = nv__rows_in_contiguous(r);
  char *vals = direct ? NULL : malloc((size_t)r->len * (size_t)r->isz);
  if (!direct && !vals) {
    atomic_store(&r->failed, 1);
    return;
  }
  for (int64_t i = b; i < e; i++) {
    const char *x = r->in + nv__rows_in_offset(r, i) * r->isz, *next = NULL;
    if (!direct) {
      nv__rows_gather(r, i, r->idt, vals);
      x = vals;
    } else if (i + 2 < r->nrows) { /* two rows ahead: the prefetch's lead */
      next = r->in + nv__rows_in_offset(r, i + 2) * r->isz;
    }
    ((uint32_t *)r->out)[i] = arg_row(j, x, r->len, next);
  }
  free(vals);
}

/* Columns: one reduced axis of stride > 1, the innermost kept axis contiguous (k outputs a
 * kept row). Each task keeps the best key and index of a block of outputs within one kept row
 * and walks the reduced axis row by row. */
typedef struct arg_cols_job {
  const arg_job *j;
  int64_t k, blocks;
} arg_cols_job;

/* float32/float64 lanes compared directly: a strict comparison keeps the first extreme, and a
 * NaN replaces any non-NaN (so the first NaN wins). */
#define ARG_COLS_FLOAT(NAME, T, CMP)                                                   \
  NV_CLONES static void NAME(T *best, uint32_t *at, const T *x, int64_t m, uint32_t s) { \
    for (int64_t i = 0; i < m; i++) {                                                  \
      T v = x[i], b = best[i];                                                         \
      bool better = (v CMP b) | ((v != v) & (b == b));                                 \
      best[i] = better ? v : b;                                                        \
      at[i] = better ? s : at[i];                                                      \
    }                                                                                  \
  }
ARG_COLS_FLOAT(cols_argmax_f32, float, >)
ARG_COLS_FLOAT(cols_argmin_f32, float, <)
ARG_COLS_FLOAT(cols_argmax_f64, double, >)
ARG_COLS_FLOAT(cols_argmin_f64, double, <)

static void arg_cols_float(const arg_cols_job *cj, const char *base, int64_t m, uint32_t *at) {
  const arg_job *j = cj->j;
  const nv__rows *r = j->r;
  union {
    float f[ARG_BLOCK];
    double d[ARG_BLOCK];
  } best;
  bool f32 = r->idt == NV_DTYPE_FLOAT32;
  memcpy(&best, base, (size_t)m * (size_t)r->isz);
  memset(at, 0, (size_t)m * sizeof *at);
  for (int64_t s = 1; s < r->len; s++) {
    const char *x = base + s * r->rin[0] * r->isz;
    if (s + 1 < r->len) /* the next row's block, ahead of the prefetchers */
      for (int64_t b = 0; b < m * r->isz; b += 64) __builtin_prefetch(x + r->rin[0] * r->isz + b);
    if (f32) {
      if (j->max) cols_argmax_f32(best.f, at, (const float *)x, m, (uint32_t)s);
      else cols_argmin_f32(best.f, at, (const float *)x, m, (uint32_t)s);
    } else {
      if (j->max) cols_argmax_f64(best.d, at, (const double *)x, m, (uint32_t)s);
      else cols_argmin_f64(best.d, at, (const double *)x, m, (uint32_t)s);
    }
  }
}

static void arg_cols(void *ctx, int64_t b, int64_t e) {
  const arg_cols_job *cj = ctx;
  const arg_job *j = cj->j;
  const nv__rows *r = j->r;
  uint64_t best[ARG_BLOCK], k[ARG_BLOCK];
  uint32_t at[ARG_BLOCK];
  for (int64_t t = b; t < e; t++) {
    int64_t c = (t / cj->blocks) * cj->k + (t % cj->blocks) * ARG_BLOCK;
    int64_t m = cj->k - (t % cj->blocks) * ARG_BLOCK;
    if (m > ARG_BLOCK) m = ARG_BLOCK;
    const char *base = r->in + nv__rows_in_offset(r, c) * r->isz;
    if (r->idt == NV_DTYPE_FLOAT32 || r->idt == NV_DTYPE_FLOAT64) {
      arg_cols_float(cj, base, m, (uint32_t *)r->out + c);
      continue;
    }
    for (int64_t s = 0; s < r->len; s++) {
      arg_keys(j, base + s * r->rin[0] * r->isz, m, k);
      if (s == 0) {
        memcpy(best, k, (size_t)m * sizeof *k);
        memset(at, 0, (size_t)m * sizeof *at);
        continue;
      }
      for (int64_t i = 0; i < m; i++) {
        bool better = j->max ? k[i] > best[i] : k[i] < best[i];
        best[i] = better ? k[i] : best[i];
        at[i] = better ? (uint32_t)s : at[i];
      }
    }
    memcpy((uint32_t *)r->out + c, at, (size_t)m * sizeof *at);
  }
}

nv_status nv__k_arg_reduce(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__rows r;
  int go = nv__rows_begin(node, in, false, &r);
  if (go <= 0) return go < 0 ? NV_ERR_OUT_OF_MEMORY : NV_OK;
  bool max = node->prim == NV__PRIM_ARGMAX;
  arg_job j = {&r, max, !max && nv_issubdtype(r.idt, NV_CATEGORY_INEXACT)};
  if (r.nr == 1 && r.nk >= 1 && r.kin[r.nk - 1] == 1 && r.kshape[r.nk - 1] >= 16 &&
      r.rin[0] != 1) {
    int64_t k = r.kshape[r.nk - 1];
    arg_cols_job cj = {&j, k, (k + ARG_BLOCK - 1) / ARG_BLOCK};
    int64_t per = NV__PAR_GRAIN / (r.len * ARG_BLOCK);
    nv__parallel_for(r.nrows / k * cj.blocks, per < 1 ? 1 : per, arg_cols, &cj);
    return NV_OK;
  }
  nv__rows_parallel(&r, arg_range, &j);
  if (atomic_load(&r.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}

/* ---- argtopk: the k largest of each row by (key, index), ascending ----
 * 32-bit keys with k small against the row: a min-heap of the k best (key << 32 | index)
 * composites, which most elements leave after one comparison with its root, then sorted.
 * Otherwise (64-bit keys, or k a large part of the row): the stable radix sort with its
 * indices, whose last k are the answer. */

typedef struct topk_job {
  nv__rows *r;
  int64_t k;
  int64_t inner; /* output elements after the row axis (the stride of its k outputs) */
  bool key32;
} topk_job;

static void heap_down(uint64_t *h, int64_t i, int64_t n) {
  uint64_t x = h[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && h[c + 1] < h[c]) c++;
    if (h[c] >= x) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

/* float32's key as nv__to_keys32 makes it, without branches (so that loops vectorize). */
static inline uint32_t topk_key_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t key = (u & 0x80000000u) ? ~u : u | 0x80000000u;
  return f != f ? UINT32_MAX : key;
}

/* The first block of TOPK_BLOCK keys from i (a block start) on holding a key of at least t, or
 * the start of the last, partial block: vectorized tests (four blocks at a time first), one
 * call per skipped run. float32 rows are tested on their values (TOPK_GE_F32), other dtypes
 * on their keys.
 * Rows read in place prefetch the values AHEAD on (beyond the row: the next row's) as they
 * go: the exits at every hit keep the hardware from running ahead, and every run's start
 * waited on memory (the other dtypes' keys are in an L1 buffer: AHEAD 0). */
#define TOPK_BLOCK 16
#define TOPK_SKIP(NAME, T, TT, GE, AHEAD)                                                  \
  NV_KERNEL_CLONES static int64_t NAME(const T *k, int64_t i, int64_t m, TT t) {           \
    for (; i + 4 * TOPK_BLOCK <= m; i += 4 * TOPK_BLOCK) {                                  \
      for (int q = 0; AHEAD && q < 4 * TOPK_BLOCK; q += 64 / (int)sizeof(T))                \
        __builtin_prefetch(k + i + AHEAD + q);                                              \
      int hit = 0;                                                                          \
      for (int q = 0; q < 4 * TOPK_BLOCK; q++) hit |= GE(k[i + q], t);                      \
      if (hit) break;                                                                       \
    }                                                                                       \
    for (; i + TOPK_BLOCK <= m; i += TOPK_BLOCK) {                                          \
      int hit = 0;                                                                          \
      for (int q = 0; q < TOPK_BLOCK; q++) hit |= GE(k[i + q], t);                          \
      if (hit) break;                                                                       \
    }                                                                                       \
    return i;                                                                               \
  }
#define TOPK_GE(k, t) ((k) >= (t))
TOPK_SKIP(topk_skip, uint32_t, uint32_t, TOPK_GE, 0)
/* float32 values are tested against the float t stands for: !(v < t) holds for every value
 * whose key is at least t's (and for -0.0 against +0.0, and every value against a NaN: a
 * superset, which the composites' comparison then sorts out) in one compare. */
#define TOPK_GE_F32(v, t) !((v) < (t))
TOPK_SKIP(topk_skip_f32, float, float, TOPK_GE_F32, 1024)

/* Bit q set where key q of the block of TOPK_BLOCK at k is at least t (a vectorized test; for
 * float32 the superset of TOPK_GE_F32). */
#define TOPK_HITS(NAME, T, TT, GE)                                                \
  NV_KERNEL_CLONES static uint32_t NAME(const T *k, TT t) {                       \
    uint32_t hits = 0;                                                            \
    for (int q = 0; q < TOPK_BLOCK; q++) hits |= (uint32_t)(GE(k[q], t)) << q;    \
    return hits;                                                                  \
  }
TOPK_HITS(topk_hits, uint32_t, uint32_t, TOPK_GE)
TOPK_HITS(topk_hits_f32, float, float, TOPK_GE_F32)

/* The float32 value whose key (topk_key_f32) is `key`; NaN for the NaN key. */
static inline float topk_value_f32(uint32_t key) {
  uint32_t u = key & 0x80000000u ? key & 0x7fffffffu : ~key;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The k best composites of the n values at x (dtype dt, isz bytes each), ascending, into h.
 * Once the heap is full, a block all below the root's key (a later equal key has the larger
 * index and would replace the root) is skipped after one vector test, which is nearly every
 * block of a long row; in a block that is not skipped only the keys that passed the test are
 * taken. Keys other than float32's convert a chunk at a time into an L1 buffer. */
#define TOPK_CHUNK 512
static void topk_heap(nv_dtype dt, const char *x, int64_t isz, int64_t n, int64_t k,
                      uint64_t *h) {
  uint32_t keys[TOPK_CHUNK];
  const float *xf = dt == NV_DTYPE_FLOAT32 ? (const float *)x : NULL;
  int64_t filled = 0, chunk = xf ? n : TOPK_CHUNK;
  for (int64_t b = 0; b < n; b += chunk) {
    int64_t m = n - b < chunk ? n - b : chunk, i = 0;
    if (!xf) nv__to_keys32(dt, x + b * isz, m, keys, false);
#define TOPK_KEY(i) (xf ? topk_key_f32(xf[i]) : keys[i])
    for (; i < m && filled < k; i++) {
      h[filled++] = (uint64_t)TOPK_KEY(i) << 32 | (uint64_t)(b + i);
      if (filled == k)
        for (int64_t q = k / 2 - 1; q >= 0; q--) heap_down(h, q, k);
    }
    while (i < m) {
      if (i % TOPK_BLOCK == 0) {
        uint32_t t = (uint32_t)(h[0] >> 32);
        float tv = topk_value_f32(t);
        i = xf ? topk_skip_f32(xf, i, m, tv) : topk_skip(keys, i, m, t);
        if (i + TOPK_BLOCK <= m) {
          /* A whole block holding a key of at least t: only those keys can enter (the root
           * only grows), taken in order. */
          uint32_t hits = xf ? topk_hits_f32(xf + i, tv) : topk_hits(keys + i, t);
          for (; hits; hits &= hits - 1) {
            int64_t q = i + __builtin_ctz(hits);
            uint64_t c = (uint64_t)TOPK_KEY(q) << 32 | (uint64_t)(b + q);
            if (c > h[0]) {
              h[0] = c;
              heap_down(h, 0, k);
            }
          }
          i += TOPK_BLOCK;
          continue;
        }
      }
      int64_t e = (i / TOPK_BLOCK + 1) * TOPK_BLOCK;
      for (e = e < m ? e : m; i < e; i++) {
        uint64_t c = (uint64_t)TOPK_KEY(i) << 32 | (uint64_t)(b + i);
        if (c > h[0]) {
          h[0] = c;
          heap_down(h, 0, k);
        }
      }
    }
#undef TOPK_KEY
  }
  /* Pop the minimum to the end, repeatedly: descending order in place, then reversed. */
  for (int64_t e = k - 1; e > 0; e--) {
    uint64_t t = h[0];
    h[0] = h[e];
    h[e] = t;
    heap_down(h, 0, e);
  }
  for (int64_t i = 0, j = k - 1; i < j; i++, j--) {
    uint64_t t = h[i];
    h[i] = h[j];
    h[j] = t;
  }
}

static void topk_range(void *ctx, int64_t b, int64_t e) {
  const topk_job *j = ctx;
  nv__rows *r = j->r;
  int64_t n = r->len, k = j->k;
  size_t kw = j->key32 ? 4 : 8;
  bool heap = j->key32 && k * 8 <= n; /* the same for every row */
  char *vals = malloc((size_t)n * (size_t)r->isz);
  void *keys = heap ? NULL : malloc((size_t)n * kw), *tkeys = NULL;
  uint32_t *idx = NULL, *tidx = NULL;
  uint64_t *h = NULL;
  if (heap) {
    h = malloc((size_t)k * sizeof *h);
  } else {
    tkeys = malloc((size_t)n * kw);
    idx = malloc((size_t)n * 4);
    tidx = malloc((size_t)n * 4);
  }
  bool ok = vals && (heap ? h != NULL : keys && tkeys && idx && tidx);
  for (int64_t i = b; i < e && ok; i++) {
    const char *x = vals;
    if (nv__rows_in_contiguous(r)) x = r->in + nv__rows_in_offset(r, i) * r->isz;
    else nv__rows_gather(r, i, r->idt, vals);
    uint32_t *dst = (uint32_t *)r->out + (i / j->inner) * k * j->inner + i % j->inner;
    if (heap) {
      topk_heap(r->idt, x, r->isz, n, k, h);
      for (int64_t q = 0; q < k; q++) dst[q * j->inner] = (uint32_t)h[q];
      continue;
    }
    for (int64_t q = 0; q < n; q++) idx[q] = (uint32_t)q;
    if (j->key32) {
      nv__to_keys32(r->idt, x, n, keys, false);
      ok = nv__radix_sort_u32(keys, tkeys, idx, tidx, n, false);
    } else {
      nv__to_keys64(r->idt, x, n, keys, false);
      ok = nv__radix_sort_u64(keys, tkeys, idx, tidx, n, false);
    }
    for (int64_t q = 0; q < k && ok; q++) dst[q * j->inner] = idx[n - k + q];
  }
  if (!ok) atomic_store(&r->failed, 1);
  free(vals);
  free(keys);
  free(tkeys);
  free(idx);
  free(tidx);
  free(h);
}

nv_status nv__k_argtopk(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__rows r;
  int go = nv__rows_begin(node, in, false, &r);
  if (go <= 0) return go < 0 ? NV_ERR_OUT_OF_MEMORY : NV_OK;
  const nv__rows_params *p = node->params;
  /* One row axis: its k outputs are spaced by the product of the later axes. */
  int64_t inner = 1;
  const nv__output *x = in[0].meta;
  if (p->naxes == 1)
    for (int d = p->axes[0] + 1; d < x->ndim; d++) inner *= x->shape[d];
  topk_job j = {&r, p->k, inner, nv__key32_dtype(r.idt)};
  nv__rows_parallel(&r, topk_range, &j);
  if (atomic_load(&r.failed)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "argtopk: out of memory");
  return NV_OK;
}

/* ---- searchsorted: binary search of each value's key among the sorted keys of a ---- */

typedef struct search_job {
  const uint64_t *a;
  int64_t n;
  nv_dtype dt;
  bool right;
} search_job;

static void search_run(char **p, const int64_t *s, int64_t n, const void *extra) {
  const search_job *j = extra;
  uint32_t *out = (uint32_t *)p[0];
  int64_t isz = (int64_t)nv_dtype_size(j->dt);
  unsigned char vals[ARG_BLOCK * 8];
  uint64_t k[ARG_BLOCK];
  for (int64_t b = 0; b < n; b += ARG_BLOCK) {
    int64_t m = n - b < ARG_BLOCK ? n - b : ARG_BLOCK;
    nv__convert_run(j->dt, p[1] + b * s[1] * isz, s[1], j->dt, (char *)vals, 1, m);
    nv__to_keys64(j->dt, vals, m, k, true);
    for (int64_t i = 0; i < m; i++) {
      int64_t lo = 0, hi = j->n;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        bool go_right = j->right ? j->a[mid] <= k[i] : j->a[mid] < k[i];
        if (go_right) lo = mid + 1;
        else hi = mid;
      }
      out[b + i] = (uint32_t)lo;
    }
  }
}

nv_status nv__k_searchsorted(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (out->size == 0) return NV_OK;
  const nv__output *a = in[0].meta;
  int64_t n = a->size;
  nv_dtype dt = a->dtype;
  int64_t isz = (int64_t)nv_dtype_size(dt);
  uint64_t *keys = malloc((size_t)(n ? n : 1) * 8);
  char *vals = malloc((size_t)(n ? n : 1) * (size_t)isz);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "searchsorted: out of memory");
  }
  if (n > 0) {
    nv__convert_run(dt, nv__operand_ptr(&in[0]), a->strides[0], dt, vals, 1, n);
    nv__to_keys64(dt, vals, n, keys, true);
  }
  free(vals);
  search_job j = {keys, n, dt, ((const nv__rows_params *)node->params)->right};
  nv__cpu_map(out, &in[1], 1, search_run, &j);
  free(keys);
  return NV_OK;
}
