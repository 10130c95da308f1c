/* The reduction engine: sum, prod, max, min, all, any, mean and count_nonzero over any set of
 * axes of any strided input. Each output owns an accumulator; the reduced space is walked as
 * runs of its innermost axis (inner layout), or, when the reduced axes are outer and the kept
 * ones contiguous, row by row into per-output accumulators (outer layout); a single long run
 * is split into chunks summed on the pool and merged. Floats accumulate accurately: runs are
 * summed in blocks of 1024 with eight float64 partial sums (float32 and the half types convert
 * on the fly), and the block totals are added with Neumaier's compensation; products
 * accumulate in float64; integers wrap as their own type would. */
#include <stdlib.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "cpu/reduce_cols.h"
#include "cpu/reduce_rows.h"

enum { R_SUM, R_PROD, R_MAX, R_MIN, R_ALL, R_ANY, R_MEAN, R_COUNT };

typedef struct acc {
  double d, c;  /* floats (sum: with its compensation), complex: the real part */
  double d2;    /* complex: the imaginary part */
  uint64_t u;   /* integer sums/products (wrapping), unsigned max/min, bool, counts */
  int64_t i;    /* signed max/min */
  int nan;      /* max/min: a NaN was seen */
} acc;

/* Neumaier's compensated addition; once the sum is infinite (or NaN) it no longer needs (and
 * must not get: inf - inf) a compensation. */
static void acc_add(acc *a, double v) {
  double t = a->d + v;
  if (isfinite(t)) {
    if (fabs(a->d) >= fabs(v)) a->c += (a->d - t) + v;
    else a->c += (v - t) + a->d;
  }
  a->d = t;
}

static acc acc_init(int op) {
  acc a = {0};
  switch (op) {
    case R_PROD: a.d = 1; a.u = 1; break;
    case R_MAX: a.d = a.d2 = -INFINITY; a.i = INT64_MIN; a.u = 0; break;
    case R_MIN: a.d = a.d2 = INFINITY; a.i = INT64_MAX; a.u = UINT64_MAX; break;
    case R_ALL: a.u = 1; break;
    default: break;
  }
  return a;
}

#define BLK 1024

/* A block's sum in eight float64 lanes: float32 blocks thereby keep their rounding errors far
 * below float32's own (a float32 sum is, in practice, the float64 sum of its values rounded
 * once). */
#define BLOCK_SUM(SUF, T)                                                              \
  NV_CLONES static double block_##SUF(const T *p, int64_t n) {                         \
    double s[8] = {0};                                                                 \
    int64_t i = 0;                                                                     \
    for (; i + 8 <= n; i += 8)                                                         \
      for (int j = 0; j < 8; j++) s[j] += p[i + j];                                    \
    double r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));      \
    for (; i < n; i++) r += p[i];                                                      \
    return r;                                                                          \
  }
BLOCK_SUM(f32, float)
BLOCK_SUM(f64, double)

/* The maximum (or minimum) of a contiguous float block in eight lanes, tracking NaN. */
#define MINMAX_BLOCK(NAME, T, CMP)                                  \
  static void NAME(const T *p, int64_t n, acc *a) {                 \
    T m[8];                                                         \
    int nan[8] = {0};                                               \
    for (int j = 0; j < 8; j++) m[j] = (T)a->d;                     \
    int64_t i = 0;                                                  \
    for (; i + 8 <= n; i += 8)                                      \
      for (int j = 0; j < 8; j++) {                                 \
        T v = p[i + j];                                             \
        m[j] = v CMP m[j] ? v : m[j];                               \
        nan[j] |= v != v;                                           \
      }                                                             \
    for (; i < n; i++) {                                            \
      m[0] = p[i] CMP m[0] ? p[i] : m[0];                           \
      nan[0] |= p[i] != p[i];                                       \
    }                                                               \
    for (int j = 0; j < 8; j++) {                                   \
      if (m[j] CMP a->d) a->d = m[j];                               \
      a->nan |= nan[j];                                             \
    }                                                               \
  }
MINMAX_BLOCK(max_f32, float, >)
MINMAX_BLOCK(min_f32, float, <)
MINMAX_BLOCK(max_f64, double, >)
MINMAX_BLOCK(min_f64, double, <)

/* A contiguous float block into the accumulator (float32: the half types arrive converted). */
#define RUN_FLOAT(SUF, T)                                                   \
  static void run_##SUF(int op, const T *x, int64_t n, acc *a) {            \
    switch (op) {                                                           \
      case R_SUM:                                                           \
      case R_MEAN: acc_add(a, block_##SUF(x, n)); break;                    \
      case R_PROD:                                                          \
        for (int64_t i = 0; i < n; i++) a->d *= x[i];                       \
        break;                                                              \
      case R_MAX: max_##SUF(x, n, a); break;                                \
      case R_MIN: min_##SUF(x, n, a); break;                                \
      case R_ALL:                                                           \
        for (int64_t i = 0; i < n; i++) a->u &= x[i] != 0;                  \
        break;                                                              \
      case R_ANY:                                                           \
        for (int64_t i = 0; i < n; i++) a->u |= x[i] != 0;                  \
        break;                                                              \
      default:                                                              \
        for (int64_t i = 0; i < n; i++) a->u += x[i] != 0;                  \
    }                                                                       \
  }
RUN_FLOAT(f32, float)
RUN_FLOAT(f64, double)

/* Complex: lexicographic order for max/min, NaN in either part propagates. */
static void run_c64(int op, const float *x, int64_t n, int64_t st, acc *a) {
  for (int64_t k = 0; k < n; k++) {
    double re = x[2 * k * st], im = x[2 * k * st + 1];
    bool nz = re != 0 || im != 0;
    switch (op) {
      case R_SUM:
      case R_MEAN: a->d += re; a->d2 += im; break;
      case R_PROD: {
        double r = a->d * re - a->d2 * im, i = a->d * im + a->d2 * re;
        a->d = r;
        a->d2 = i;
        break;
      }
      case R_MAX:
      case R_MIN: {
        if (re != re || im != im) a->nan = 1;
        bool less = re < a->d || (re == a->d && im < a->d2);
        bool more = re > a->d || (re == a->d && im > a->d2);
        if (op == R_MAX ? more : less) {
          a->d = re;
          a->d2 = im;
        }
        break;
      }
      case R_ALL: a->u &= nz; break;
      case R_ANY: a->u |= nz; break;
      default: a->u += nz;
    }
  }
}

#define INT_RUN(T, SIGNED)                                                    \
  {                                                                           \
    const T *x = (const T *)p;                                                \
    switch (op) {                                                             \
      case R_SUM:                                                             \
      case R_MEAN: {                                                          \
        uint64_t s = 0;                                                       \
        for (int64_t k = 0; k < n; k++) s += (uint64_t)x[k * st];             \
        a->u += s;                                                            \
        break;                                                                \
      }                                                                       \
      case R_PROD:                                                            \
        for (int64_t k = 0; k < n; k++) a->u *= (uint64_t)x[k * st];          \
        break;                                                                \
      case R_MAX:                                                             \
        for (int64_t k = 0; k < n; k++) {                                     \
          T v = x[k * st];                                                    \
          if (SIGNED) a->i = (int64_t)v > a->i ? (int64_t)v : a->i;           \
          else a->u = (uint64_t)v > a->u ? (uint64_t)v : a->u;                \
        }                                                                     \
        break;                                                                \
      case R_MIN:                                                             \
        for (int64_t k = 0; k < n; k++) {                                     \
          T v = x[k * st];                                                    \
          if (SIGNED) a->i = (int64_t)v < a->i ? (int64_t)v : a->i;           \
          else a->u = (uint64_t)v < a->u ? (uint64_t)v : a->u;                \
        }                                                                     \
        break;                                                                \
      case R_ALL:                                                             \
        for (int64_t k = 0; k < n; k++) a->u &= x[k * st] != 0;               \
        break;                                                                \
      case R_ANY:                                                             \
        for (int64_t k = 0; k < n; k++) a->u |= x[k * st] != 0;               \
        break;                                                                \
      default:                                                                \
        for (int64_t k = 0; k < n; k++) a->u += x[k * st] != 0;               \
    }                                                                         \
    break;                                                                    \
  }

/* Adds n elements of `dt` at p (stride st elements) into a. */
static void red_run(int op, nv_dtype dt, const char *p, int64_t n, int64_t st, acc *a) {
  switch (dt) {
    case NV_DTYPE_FLOAT32:
      if (st == 1) {
        for (int64_t b = 0; b < n; b += BLK) run_f32(op, (const float *)p + b, n - b < BLK ? n - b : BLK, a);
        break;
      }
      /* Strided float32 converts blocks like the half types. */
      __attribute__((fallthrough));
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: {
      float tmp[BLK];
      size_t isz = nv_dtype_size(dt);
      for (int64_t b = 0; b < n; b += BLK) {
        int64_t e = n - b < BLK ? n - b : BLK;
        nv__convert_run(dt, p + b * st * (int64_t)isz, st, NV_DTYPE_FLOAT32, (char *)tmp, 1, e);
        run_f32(op, tmp, e, a);
      }
      break;
    }
    case NV_DTYPE_FLOAT64:
      if (st == 1) {
        for (int64_t b = 0; b < n; b += BLK) run_f64(op, (const double *)p + b, n - b < BLK ? n - b : BLK, a);
      } else {
        double tmp[BLK];
        for (int64_t b = 0; b < n; b += BLK) {
          int64_t e = n - b < BLK ? n - b : BLK;
          for (int64_t k = 0; k < e; k++) tmp[k] = ((const double *)p)[(b + k) * st];
          run_f64(op, tmp, e, a);
        }
      }
      break;
    case NV_DTYPE_COMPLEX64: run_c64(op, (const float *)p, n, st, a); break;
    case NV_DTYPE_BOOL: INT_RUN(uint8_t, 0)
    case NV_DTYPE_UINT8: INT_RUN(uint8_t, 0)
    case NV_DTYPE_UINT16: INT_RUN(uint16_t, 0)
    case NV_DTYPE_UINT32: INT_RUN(uint32_t, 0)
    case NV_DTYPE_UINT64: INT_RUN(uint64_t, 0)
    case NV_DTYPE_INT8: INT_RUN(int8_t, 1)
    case NV_DTYPE_INT16: INT_RUN(int16_t, 1)
    case NV_DTYPE_INT32: INT_RUN(int32_t, 1)
    case NV_DTYPE_INT64: INT_RUN(int64_t, 1)
    default: break;
  }
}

static void acc_merge(int op, acc *a, const acc *b) {
  switch (op) {
    case R_SUM:
    case R_MEAN:
      acc_add(a, b->d);
      acc_add(a, b->c);
      a->d2 += b->d2;
      a->u += b->u;
      break;
    case R_PROD: {
      double r = a->d * b->d - a->d2 * b->d2, i = a->d * b->d2 + a->d2 * b->d;
      a->d = r;
      a->d2 = i;
      a->u *= b->u;
      break;
    }
    case R_MAX:
    case R_MIN: {
      bool max = op == R_MAX;
      bool more = b->d > a->d || (b->d == a->d && b->d2 > a->d2);
      bool less = b->d < a->d || (b->d == a->d && b->d2 < a->d2);
      if (max ? more : less) {
        a->d = b->d;
        a->d2 = b->d2;
      }
      if (max ? b->i > a->i : b->i < a->i) a->i = b->i;
      if (max ? b->u > a->u : b->u < a->u) a->u = b->u;
      a->nan |= b->nan;
      break;
    }
    case R_ALL: a->u &= b->u; break;
    case R_ANY: a->u |= b->u; break;
    default: a->u += b->u;
  }
}

static void store_float(nv_dtype dt, double v, char *dst) {
  nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&v, 1, dt, dst, 1, 1);
}

static void acc_store(int op, nv_dtype in_dt, nv_dtype dt, const acc *a, int64_t rsize,
                      char *dst) {
  if (op == R_ALL || op == R_ANY) {
    *(uint8_t *)dst = a->u != 0;
    return;
  }
  if (op == R_COUNT) {
    uint32_t c = (uint32_t)a->u;
    memcpy(dst, &c, 4);
    return;
  }
  bool minmax = op == R_MAX || op == R_MIN;
  if (dt == NV_DTYPE_COMPLEX64) {
    double re = a->d, im = a->d2;
    if (op == R_MEAN) {
      re /= (double)rsize;
      im /= (double)rsize;
    }
    if (minmax && a->nan) re = im = NAN;
    ((float *)dst)[0] = (float)re;
    ((float *)dst)[1] = (float)im;
    return;
  }
  if (nv_issubdtype(dt, NV_CATEGORY_FLOATING)) {
    double v = op == R_SUM || op == R_MEAN ? a->d + a->c : a->d;
    if (op == R_MEAN) v /= (double)rsize;
    if (minmax && a->nan) v = NAN;
    store_float(dt, v, dst);
    return;
  }
  /* Integers and bool: the low bytes of the wrapped value (little-endian). */
  uint64_t u = minmax && nv_issubdtype(in_dt, NV_CATEGORY_SIGNED_INTEGER) ? (uint64_t)a->i : a->u;
  memcpy(dst, &u, nv_dtype_size(dt));
}

typedef struct plan {
  int op;
  nv_dtype dt, odt;
  size_t isz, osz;
  int nk, nr;
  int64_t kshape[NV__MAX_DIMS], kst[NV__MAX_DIMS];
  int64_t rshape[NV__MAX_DIMS], rst[NV__MAX_DIMS];
  int64_t rsize;
  const char *base;
  char *out;
  acc *partial; /* split runs: one partial per chunk */
  int64_t chunk;
  atomic_int failed;
} plan;

static int64_t kept_offset(const plan *p, int64_t o) {
  int64_t off = 0;
  for (int i = p->nk - 1; i >= 0; i--) {
    off += (o % p->kshape[i]) * p->kst[i];
    o /= p->kshape[i];
  }
  return off;
}

static void store(const plan *p, const acc *a, int64_t o) {
  acc_store(p->op, p->dt, p->odt, a, p->rsize, p->out + o * (int64_t)p->osz);
}

/* Inner layout: each output walks its reduced space as runs of the innermost reduced axis. */
static void inner_range(void *ctx, int64_t b, int64_t e) {
  const plan *p = ctx;
  int64_t inner = p->rshape[p->nr - 1], ist = p->rst[p->nr - 1];
  int64_t outer = p->rsize / (inner ? inner : 1);
  for (int64_t o = b; o < e; o++) {
    acc a = acc_init(p->op);
    const char *base = p->base + kept_offset(p, o) * (int64_t)p->isz;
    int64_t idx[NV__MAX_DIMS] = {0};
    for (int64_t r = 0; r < outer; r++) {
      int64_t off = 0;
      for (int i = 0; i < p->nr - 1; i++) off += idx[i] * p->rst[i];
      red_run(p->op, p->dt, base + off * (int64_t)p->isz, inner, ist, &a);
      for (int i = p->nr - 2; i >= 0; i--) {
        if (++idx[i] < p->rshape[i]) break;
        idx[i] = 0;
      }
    }
    store(p, &a, o);
  }
}

/* A single long run split into chunks reduced in parallel. */
static void chunk_range(void *ctx, int64_t b, int64_t e) {
  const plan *p = ctx;
  for (int64_t c = b; c < e; c++) {
    int64_t s = c * p->chunk, n = p->rsize - s < p->chunk ? p->rsize - s : p->chunk;
    acc a = acc_init(p->op);
    red_run(p->op, p->dt, p->base + s * p->rst[0] * (int64_t)p->isz, n, p->rst[0], &a);
    p->partial[c] = a;
  }
}

/* Outer layout: the reduced axes are outer; accumulate rows into per-output accumulators. */
static void outer_range(void *ctx, int64_t b, int64_t e) {
  plan *p = ctx;
  int64_t n = e - b;
  acc *a = malloc((size_t)n * sizeof *a);
  int64_t *koff = malloc((size_t)n * sizeof *koff);
  if (!a || !koff) {
    free(a);
    free(koff);
    atomic_store(&p->failed, 1);
    return;
  }
  for (int64_t o = 0; o < n; o++) {
    koff[o] = kept_offset(p, b + o);
    a[o] = acc_init(p->op);
  }
  int64_t idx[NV__MAX_DIMS] = {0};
  bool fast32 = p->dt == NV_DTYPE_FLOAT32 && (p->op == R_SUM || p->op == R_MEAN);
  for (int64_t r = 0; r < p->rsize; r++) {
    int64_t roff = 0;
    for (int i = 0; i < p->nr; i++) roff += idx[i] * p->rst[i];
    if (fast32) {
      const float *x = (const float *)p->base + roff;
      for (int64_t o = 0; o < n; o++) a[o].d += x[koff[o]];
    } else {
      for (int64_t o = 0; o < n; o++)
        red_run(p->op, p->dt, p->base + (roff + koff[o]) * (int64_t)p->isz, 1, 1, &a[o]);
    }
    for (int i = p->nr - 1; i >= 0; i--) {
      if (++idx[i] < p->rshape[i]) break;
      idx[i] = 0;
    }
  }
  for (int64_t o = 0; o < n; o++) store(p, &a[o], b + o);
  free(a);
  free(koff);
}

/* Column layout: the kept innermost axis is contiguous and the reduced ones strided (sums over
 * a leading or middle axis). Each task owns a block of up to COLS consecutive outputs and adds
 * every reduced row into them lane by lane: float32 and float64 sums in float64, each column in
 * row order (reduce_cols.c: a whole row group in one pass of registers where one axis is
 * reduced), rows gathered in groups of ROWS whose totals join the block's with Neumaier's
 * compensation (a single group needs none); max/min in the input type with NaN tracked per
 * lane. */
#define ROWS 256

#define SUB 1024 /* outputs per part of a block (cols_range) */

typedef struct cols_plan {
  const plan *p;
  int64_t k;      /* the contiguous kept axis' length */
  int64_t cw;     /* outputs per block: wide when there are few reduced rows */
  int64_t blocks; /* blocks per kept row */
  int64_t parts;  /* parts of SUB outputs per block */
  atomic_int failed;
} cols_plan;

/* Means: the sums divided by the count (each rounded once, as v / n). */
NV_CLONES static void cols_div(double *v, double n, int64_t w) {
  for (int64_t j = 0; j < w; j++) v[j] /= n;
}
/* float64 results rounded to float32 (the common output; the generic conversion is slower). */
NV_CLONES static void cols_store_f32(float *y, const double *v, int64_t w) {
  for (int64_t j = 0; j < w; j++) y[j] = (float)v[j];
}
#define COLS_MINMAX(NAME, T, CMP)                                                \
  NV_CLONES static void NAME(T *m, uint8_t *nan, const T *x, int64_t w) {        \
    for (int64_t j = 0; j < w; j++) {                                            \
      T v = x[j];                                                                \
      m[j] = v CMP m[j] ? v : m[j];                                              \
      nan[j] |= v != v;                                                          \
    }                                                                            \
  }
COLS_MINMAX(cols_max_f32, float, >)
COLS_MINMAX(cols_min_f32, float, <)
COLS_MINMAX(cols_max_f64, double, >)
COLS_MINMAX(cols_min_f64, double, <)

static void cols_range(void *ctx, int64_t b, int64_t e) {
  cols_plan *c = ctx;
  const plan *p = c->p;
  bool f32 = p->dt == NV_DTYPE_FLOAT32, sum = p->op == R_SUM || p->op == R_MEAN;
  /* A task's block is walked in parts of at most SUB outputs, whose scratch stays in L1.
   * Sums: the part's totals, compensations and the current row group; max/min: the lanes (in
   * the input type) and their NaN flags. */
  int64_t cw = c->cw < SUB ? c->cw : SUB;
  double *buf = malloc((size_t)cw * (3 * sizeof(double) + 1));
  if (!buf) {
    atomic_store(&c->failed, 1);
    return;
  }
  double *tot = buf, *comp = buf + cw, *grp = buf + 2 * cw;
  struct {
    float *f;
    double *d;
  } m = {(float *)buf, buf};
  uint8_t *nan = (uint8_t *)(buf + 3 * cw);
  for (int64_t part = b * c->parts; part < e * c->parts; part++) {
    int64_t t = part / c->parts, row = t / c->blocks, j0 = (t % c->blocks) * c->cw;
    int64_t bw = c->k - j0 < c->cw ? c->k - j0 : c->cw, s0 = (part % c->parts) * cw;
    if (s0 >= bw) continue; /* the last block of a row is narrower */
    int64_t w = bw - s0 < cw ? bw - s0 : cw, o0 = row * c->k + j0 + s0;
    const char *base = p->base + (kept_offset(p, o0)) * (int64_t)p->isz;
    /* A single row group's sums are the totals (Neumaier's first step adds them to zero). */
    bool one = p->rsize <= ROWS;
    if (sum && one && p->nr == 1 && f32 && p->odt == NV_DTYPE_FLOAT32) {
      double div = p->op == R_MEAN ? (double)p->rsize : 1.0;
      nv__cols_sum_f32_out((float *)(p->out + o0 * (int64_t)p->osz), (const float *)base,
                           p->rst[0], p->rsize, w, div);
      continue;
    }
    if (sum && !one) {
      memset(tot, 0, (size_t)w * sizeof *tot);
      memset(comp, 0, (size_t)w * sizeof *comp);
    } else if (!sum) {
      double init = p->op == R_MAX ? -INFINITY : INFINITY;
      for (int64_t j = 0; j < w; j++) {
        if (f32) m.f[j] = (float)init;
        else m.d[j] = init;
      }
      memset(nan, 0, (size_t)w);
    }
    int64_t idx[NV__MAX_DIMS] = {0};
    for (int64_t r0 = 0; r0 < p->rsize; r0 += ROWS) {
      int64_t rn = p->rsize - r0 < ROWS ? p->rsize - r0 : ROWS;
      if (sum) memset(grp, 0, (size_t)w * sizeof *grp);
      int64_t r = 0;
      if (sum && p->nr == 1) { /* one reduced axis: the whole group in one pass */
        const char *x = base + r0 * p->rst[0] * (int64_t)p->isz;
        if (f32) nv__cols_sum_f32(grp, (const float *)x, p->rst[0], rn, w);
        else nv__cols_sum_f64(grp, (const double *)x, p->rst[0], rn, w);
        r = rn;
      }
      for (; r < rn; r++) {
        int64_t roff = 0;
        for (int i = 0; i < p->nr; i++) roff += idx[i] * p->rst[i];
        const char *x = base + roff * (int64_t)p->isz;
        if (r + 1 < rn && p->nr == 1) { /* the next row's block, ahead of the prefetchers */
          const char *nx = x + p->rst[0] * (int64_t)p->isz;
          for (int64_t b = 0; b < w * (int64_t)p->isz; b += 64) __builtin_prefetch(nx + b, 0, 3);
        }
        if (sum) {
          if (f32) nv__cols_sum_f32(grp, (const float *)x, 0, 1, w);
          else nv__cols_sum_f64(grp, (const double *)x, 0, 1, w);
        } else if (p->op == R_MAX) {
          if (f32) cols_max_f32(m.f, nan, (const float *)x, w);
          else cols_max_f64(m.d, nan, (const double *)x, w);
        } else {
          if (f32) cols_min_f32(m.f, nan, (const float *)x, w);
          else cols_min_f64(m.d, nan, (const double *)x, w);
        }
        for (int i = p->nr - 1; i >= 0; i--) {
          if (++idx[i] < p->rshape[i]) break;
          idx[i] = 0;
        }
      }
      if (sum && !one)
        for (int64_t j = 0; j < w; j++) {
          acc a = {.d = tot[j], .c = comp[j]};
          acc_add(&a, grp[j]);
          tot[j] = a.d;
          comp[j] = a.c;
        }
    }
    /* The results (in grp, as float64) convert to the output type in one run; a single row
     * group's sums are in grp already. */
    if (sum && one) {
      if (p->op == R_MEAN) cols_div(grp, (double)p->rsize, w);
    } else {
      for (int64_t j = 0; j < w; j++) {
        double v;
        if (sum) {
          v = tot[j] + comp[j];
          if (p->op == R_MEAN) v /= (double)p->rsize;
        } else {
          v = nan[j] ? NAN : f32 ? (double)m.f[j] : m.d[j];
        }
        grp[j] = v;
      }
    }
    char *dst = p->out + o0 * (int64_t)p->osz;
    if (p->odt == NV_DTYPE_FLOAT32) cols_store_f32((float *)dst, grp, w);
    else nv__convert_run(NV_DTYPE_FLOAT64, (const char *)grp, 1, p->odt, dst, 1, w);
  }
  free(buf);
}

/* Whether the column layout applies: float32/float64 sum, mean, max or min whose innermost kept
 * axis is contiguous and wide, the reduced axes strided. */
static bool cols_layout(const plan *p) {
  return (p->dt == NV_DTYPE_FLOAT32 || p->dt == NV_DTYPE_FLOAT64) &&
         (p->op == R_SUM || p->op == R_MEAN || p->op == R_MAX || p->op == R_MIN) && p->nk > 0 &&
         p->kst[p->nk - 1] == 1 && p->kshape[p->nk - 1] >= 16 && p->rst[p->nr - 1] != 1;
}

/* Folds adjacent axes of one list where contiguous. */
static int fold(int64_t *shape, int64_t *st, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 1) continue;
    if (m > 0 && st[m - 1] == shape[i] * st[i]) {
      shape[m - 1] *= shape[i];
      st[m - 1] = st[i];
      continue;
    }
    shape[m] = shape[i];
    st[m++] = st[i];
  }
  return m;
}

static int op_of(int prim) {
  switch (prim) {
    case NV__PRIM_PROD: return R_PROD;
    case NV__PRIM_MAX: return R_MAX;
    case NV__PRIM_MIN: return R_MIN;
    case NV__PRIM_ALL: return R_ALL;
    case NV__PRIM_ANY: return R_ANY;
    case NV__PRIM_MEAN: return R_MEAN;
    case NV__PRIM_COUNT_NONZERO: return R_COUNT;
    default: return R_SUM;
  }
}

/* Reduces the one kept-less output of a long run in parallel chunks; false without memory. */
static bool reduce_split(plan *p, int64_t nout) {
  p->chunk = NV__PAR_GRAIN;
  int64_t nchunks = (p->rsize + p->chunk - 1) / p->chunk;
  p->partial = malloc((size_t)nchunks * sizeof *p->partial);
  if (!p->partial) return false;
  for (int64_t o = 0; o < nout; o++) {
    plan q = *p;
    q.base = p->base + kept_offset(p, o) * (int64_t)p->isz;
    nv__parallel_for(nchunks, 1, chunk_range, &q);
    acc a = acc_init(p->op);
    for (int64_t c = 0; c < nchunks; c++) acc_merge(p->op, &a, &p->partial[c]);
    store(p, &a, o);
  }
  free(p->partial);
  return true;
}

nv_status nv__k_reduce(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__reduce_params *rp = node->params;
  const nv__output *x = in[0].meta;
  plan p = {0};
  p.op = op_of(node->prim);
  p.dt = x->dtype;
  p.odt = out->dtype;
  p.isz = nv_dtype_size(p.dt);
  p.osz = nv_dtype_size(p.odt);
  p.out = nv__output_ptr(out);
  p.rsize = 1;
  atomic_init(&p.failed, 0);
  for (int i = 0, j = 0; i < x->ndim; i++) {
    bool red = j < rp->naxes && rp->axes[j] == i;
    if (red) {
      j++;
      p.rshape[p.nr] = x->shape[i];
      p.rst[p.nr++] = x->strides[i];
      p.rsize *= x->shape[i];
    } else {
      p.kshape[p.nk] = x->shape[i];
      p.kst[p.nk++] = x->strides[i];
    }
  }
  if (out->size == 0) return NV_OK;
  if (p.rsize == 0 || x->size == 0) { /* empty reductions hold the identity (mean: NaN) */
    acc a = acc_init(p.op);
    for (int64_t o = 0; o < out->size; o++) store(&p, &a, o);
    return NV_OK;
  }
  p.base = nv__operand_ptr(&in[0]);
  p.nk = fold(p.kshape, p.kst, p.nk);
  p.nr = fold(p.rshape, p.rst, p.nr);
  if (p.nr == 0) {
    p.nr = 1;
    p.rshape[0] = 1;
    p.rst[0] = 1;
  }
  int threads = nv__pool_threads();
  if (out->size < threads && p.nr == 1 && p.rsize >= 4 * NV__PAR_GRAIN && threads > 1 &&
      reduce_split(&p, out->size))
    return NV_OK;
  if (cols_layout(&p)) {
    /* Blocks of about 64 Ki elements of input (at least 512 outputs, at most 8192). */
    int64_t k = p.kshape[p.nk - 1], cw = ((int64_t)1 << 18) / p.rsize;
    cw = cw < 512 ? 512 : cw > 8192 ? 8192 : cw;
    if (cw > k) cw = k;
    /* Fewer blocks than threads (a bias gradient: a few hundred rows of one 1024-wide row)
     * would leave threads idle: narrower blocks, multiples of 64 outputs, give each one a
     * share. Every output's sum is the same whatever block holds it. */
    int64_t kept_rows = out->size / k;
    if (threads > 1 && kept_rows * ((k + cw - 1) / cw) < threads && p.rsize * k >= NV__PAR_GRAIN) {
      int64_t share = (k + threads - 1) / threads;
      share = (share + 63) / 64 * 64;
      if (share < cw) cw = share;
    }
    cols_plan c = {&p, k, cw, (k + cw - 1) / cw, (cw + SUB - 1) / SUB, 0};
    int64_t tasks = out->size / k * c.blocks, per = NV__PAR_GRAIN / (p.rsize * cw);
    nv__parallel_for(tasks, per < 1 ? 1 : per, cols_range, &c);
    if (atomic_load(&c.failed))
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
    return NV_OK;
  }
  bool inner = p.rst[p.nr - 1] == 1 || p.rshape[p.nr - 1] >= 64 || p.nk == 0 ||
               p.kst[p.nk - 1] != 1;
  int64_t per = NV__PAR_GRAIN / p.rsize;
  if (per < 1) per = 1;
  if (inner) nv__parallel_for(out->size, per, inner_range, &p);
  else nv__parallel_for(out->size, per < 256 ? 256 : per, outer_range, &p);
  if (atomic_load(&p.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}

/* sum's kernel (registered by the core) is the engine itself. */
nv_status nv__k_sum(nv__node *node, const nv__operand *in, int donated) {
  return nv__k_reduce(node, in, donated);
}

void nv__cpu_register_reduce(nv__kernel_fn *k) {
  k[NV__PRIM_PROD] = nv__k_reduce;
  k[NV__PRIM_MAX] = nv__k_reduce;
  k[NV__PRIM_MIN] = nv__k_reduce;
  k[NV__PRIM_ALL] = nv__k_reduce;
  k[NV__PRIM_ANY] = nv__k_reduce;
  k[NV__PRIM_MEAN] = nv__k_reduce;
  k[NV__PRIM_COUNT_NONZERO] = nv__k_reduce;
  k[NV__PRIM_VAR] = nv__k_row_reduce;
  k[NV__PRIM_STD] = nv__k_row_reduce;
  k[NV__PRIM_LOGSUMEXP] = nv__k_row_reduce;
  k[NV__PRIM_MEDIAN] = nv__k_median;
  k[NV__PRIM_ARGMAX] = nv__k_arg_reduce;
  k[NV__PRIM_ARGMIN] = nv__k_arg_reduce;
  k[NV__PRIM_SOFTMAX] = nv__k_softmax;
  k[NV__PRIM_CUMSUM] = nv__k_scan;
  k[NV__PRIM_CUMPROD] = nv__k_scan;
  k[NV__PRIM_CUMMAX] = nv__k_scan;
  k[NV__PRIM_CUMMIN] = nv__k_scan;
  k[NV__PRIM_LOGCUMSUMEXP] = nv__k_scan;
  k[NV__PRIM_SORT] = nv__k_sort;
  k[NV__PRIM_ARGSORT] = nv__k_sort;
  k[NV__PRIM_ARGTOPK] = nv__k_argtopk;
  k[NV__PRIM_PARTITION] = nv__k_sort;
  k[NV__PRIM_ARGPARTITION] = nv__k_sort;
  k[NV__PRIM_SEARCHSORTED] = nv__k_searchsorted;
}
