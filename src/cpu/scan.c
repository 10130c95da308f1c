/* Scans: cumsum, cumprod, cummax, cummin and logcumsumexp along one axis (or the flattened
 * array), forward or reversed, inclusive or exclusive. Each row is gathered into a wide working
 * type — float64 for the float dtypes, int64/uint64 for integers and bool (wrapping arithmetic,
 * stored back modulo the output type), complex in float64 pairs — scanned in place, and
 * written back converted once. */
#include <math.h>
#include <stdlib.h>

#include "cpu/reduce_rows.h"
#include "ops/reduce_params.h"

enum { S_SUM, S_PROD, S_MAX, S_MIN, S_LSE };

typedef struct scan_job {
  nv__rows *r;
  int op;
  bool reverse, inclusive;
  nv_dtype work;
} scan_job;

static double logaddexp(double a, double b) {
  if (a != a || b != b) return NAN;
  double m = a > b ? a : b;
  if (m == -INFINITY || m == INFINITY) return m;
  return m + log1p(exp(-fabs(a - b)));
}

/* The identity of a scan over values of `dt` (what an exclusive scan starts from). */
static double ident_f(int op) {
  switch (op) {
    case S_PROD: return 1;
    case S_MAX:
    case S_LSE: return -INFINITY;
    case S_MIN: return INFINITY;
    default: return 0;
  }
}

static int64_t ident_i(int op, nv_dtype dt) {
  int bits = 8 * (int)nv_dtype_size(dt);
  int64_t lo = dt == NV_DTYPE_BOOL ? 0 : (bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)));
  int64_t hi = dt == NV_DTYPE_BOOL ? 1 : (bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1);
  return op == S_PROD ? 1 : op == S_MAX ? lo : op == S_MIN ? hi : 0;
}

static uint64_t ident_u(int op, nv_dtype dt) {
  int bits = 8 * (int)nv_dtype_size(dt);
  uint64_t hi = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  return op == S_PROD ? 1 : op == S_MIN ? hi : 0;
}

/* Walks a row of n elements forward or backward, element `i` at each step. */
#define WALK(n, reverse, ...)                           \
  for (int64_t k_ = 0; k_ < (n); k_++) {                \
    int64_t i = (reverse) ? (n) - 1 - k_ : k_;          \
    __VA_ARGS__;                                        \
  }

#define SCAN_ROW(T, w, n, j, init, COMBINE)             \
  do {                                                  \
    T acc = (init);                                     \
    WALK(n, (j)->reverse, {                             \
      T v = (w)[i];                                     \
      T next = COMBINE;                                 \
      (w)[i] = (j)->inclusive ? next : acc;             \
      acc = next;                                       \
    })                                                  \
  } while (0)

static void scan_f64(const scan_job *j, double *w, int64_t n) {
  switch (j->op) {
    case S_SUM: SCAN_ROW(double, w, n, j, 0.0, acc + v); break;
    case S_PROD: SCAN_ROW(double, w, n, j, 1.0, acc * v); break;
    case S_MAX:
      SCAN_ROW(double, w, n, j, ident_f(S_MAX), acc != acc || v != v ? NAN : (v > acc ? v : acc));
      break;
    case S_MIN:
      SCAN_ROW(double, w, n, j, ident_f(S_MIN), acc != acc || v != v ? NAN : (v < acc ? v : acc));
      break;
    default: SCAN_ROW(double, w, n, j, -INFINITY, logaddexp(acc, v));
  }
}

static void scan_i64(const scan_job *j, int64_t *w, int64_t n) {
  nv_dtype dt = j->r->idt;
  switch (j->op) {
    case S_SUM: SCAN_ROW(int64_t, w, n, j, 0, (int64_t)((uint64_t)acc + (uint64_t)v)); break;
    case S_PROD: SCAN_ROW(int64_t, w, n, j, 1, (int64_t)((uint64_t)acc * (uint64_t)v)); break;
    case S_MAX: SCAN_ROW(int64_t, w, n, j, ident_i(S_MAX, dt), v > acc ? v : acc); break;
    default: SCAN_ROW(int64_t, w, n, j, ident_i(S_MIN, dt), v < acc ? v : acc);
  }
}

static void scan_u64(const scan_job *j, uint64_t *w, int64_t n) {
  nv_dtype dt = j->r->idt;
  switch (j->op) {
    case S_SUM: SCAN_ROW(uint64_t, w, n, j, 0, acc + v); break;
    case S_PROD: SCAN_ROW(uint64_t, w, n, j, 1, acc * v); break;
    case S_MAX: SCAN_ROW(uint64_t, w, n, j, ident_u(S_MAX, dt), v > acc ? v : acc); break;
    default: SCAN_ROW(uint64_t, w, n, j, ident_u(S_MIN, dt), v < acc ? v : acc);
  }
}

/* complex64 rows: the running value in float64 pairs; max/min order lexicographically. */
static void scan_c64(const scan_job *j, float *w, int64_t n) {
  double ar = ident_f(j->op), ai = 0;
  WALK(n, j->reverse, {
    double vr = w[2 * i], vi = w[2 * i + 1], nr, ni;
    switch (j->op) {
      case S_SUM: nr = ar + vr; ni = ai + vi; break;
      case S_PROD: nr = ar * vr - ai * vi; ni = ar * vi + ai * vr; break;
      default: {
        bool nan = ar != ar || ai != ai || vr != vr || vi != vi;
        bool more = vr > ar || (vr == ar && vi > ai), less = vr < ar || (vr == ar && vi < ai);
        bool take = j->op == S_MAX ? more : less;
        nr = nan ? NAN : take ? vr : ar;
        ni = nan ? NAN : take ? vi : ai;
      }
    }
    w[2 * i] = (float)(j->inclusive ? nr : ar);
    w[2 * i + 1] = (float)(j->inclusive ? ni : ai);
    ar = nr;
    ai = ni;
  })
}

static void scan_range(void *ctx, int64_t b, int64_t e) {
  const scan_job *j = ctx;
  nv__rows *r = j->r;
  void *w = malloc((size_t)r->len * 8 + 8);
  if (!w) {
    atomic_store(&r->failed, 1);
    return;
  }
  for (int64_t i = b; i < e; i++) {
    nv__rows_gather(r, i, j->work, w);
    switch (j->work) {
      case NV_DTYPE_FLOAT64: scan_f64(j, w, r->len); break;
      case NV_DTYPE_INT64: scan_i64(j, w, r->len); break;
      case NV_DTYPE_UINT64: scan_u64(j, w, r->len); break;
      default: scan_c64(j, w, r->len);
    }
    nv__rows_scatter(r, i, j->work, w);
  }
  free(w);
}

/* ---- Columns: a scan axis of stride > 1 over contiguous inner elements ----
 * Each task scans a block of up to COLS adjacent columns at once, walking the scan axis one
 * row at a time, so the reads and writes stay contiguous. */
#define COLS 256

#define COMBINE_LOOP(T, EXPR)                     \
  {                                               \
    T *a = acc;                                   \
    const T *x = v;                               \
    for (int64_t c = 0; c < m; c++) {             \
      T p = a[c], q = x[c];                       \
      a[c] = (EXPR);                              \
    }                                             \
    break;                                        \
  }

/* acc[c] = acc[c] op v[c] for m columns in the working type. */
static void combine(const scan_job *j, void *acc, const void *v, int64_t m) {
  switch (j->work) {
    case NV_DTYPE_FLOAT64:
      switch (j->op) {
        case S_SUM: COMBINE_LOOP(double, p + q)
        case S_PROD: COMBINE_LOOP(double, p * q)
        case S_MAX: COMBINE_LOOP(double, p != p || q != q ? NAN : (q > p ? q : p))
        case S_MIN: COMBINE_LOOP(double, p != p || q != q ? NAN : (q < p ? q : p))
        default: COMBINE_LOOP(double, logaddexp(p, q))
      }
      break;
    case NV_DTYPE_INT64:
      switch (j->op) {
        case S_SUM: COMBINE_LOOP(int64_t, (int64_t)((uint64_t)p + (uint64_t)q))
        case S_PROD: COMBINE_LOOP(int64_t, (int64_t)((uint64_t)p * (uint64_t)q))
        case S_MAX: COMBINE_LOOP(int64_t, q > p ? q : p)
        default: COMBINE_LOOP(int64_t, q < p ? q : p)
      }
      break;
    default:
      switch (j->op) {
        case S_SUM: COMBINE_LOOP(uint64_t, p + q)
        case S_PROD: COMBINE_LOOP(uint64_t, p * q)
        case S_MAX: COMBINE_LOOP(uint64_t, q > p ? q : p)
        default: COMBINE_LOOP(uint64_t, q < p ? q : p)
      }
  }
}

static void fill_identity(const scan_job *j, void *acc, int64_t m) {
  for (int64_t c = 0; c < m; c++) {
    if (j->work == NV_DTYPE_FLOAT64) ((double *)acc)[c] = ident_f(j->op);
    else if (j->work == NV_DTYPE_INT64) ((int64_t *)acc)[c] = ident_i(j->op, j->r->idt);
    else ((uint64_t *)acc)[c] = ident_u(j->op, j->r->idt);
  }
}

static void cols_range(void *ctx, int64_t b, int64_t e) {
  const scan_job *j = ctx;
  const nv__rows *r = j->r;
  int64_t inner = r->kshape[r->nk - 1], blocks = (inner + COLS - 1) / COLS;
  uint64_t acc[COLS], v[COLS];
  for (int64_t u = b; u < e; u++) {
    int64_t o = u / blocks, c0 = (u % blocks) * COLS;
    int64_t m = inner - c0 < COLS ? inner - c0 : COLS;
    /* The kept index of the block's first column, in row units of the kept space. */
    int64_t row = o * inner + c0;
    const char *x = r->in + (nv__rows_in_offset(r, row)) * r->isz;
    char *y = r->out + nv__rows_out_offset(r, row) * r->osz;
    fill_identity(j, acc, m);
    WALK(r->len, j->reverse, {
      nv__convert_run(r->idt, x + i * r->rin[0] * r->isz, 1, j->work, (char *)v, 1, m);
      if (!j->inclusive)
        nv__convert_run(j->work, (const char *)acc, 1, r->odt, y + i * r->rout[0] * r->osz, 1, m);
      combine(j, acc, v, m);
      if (j->inclusive)
        nv__convert_run(j->work, (const char *)acc, 1, r->odt, y + i * r->rout[0] * r->osz, 1, m);
    })
  }
}

nv_status nv__k_scan(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__rows r;
  int go = nv__rows_begin(node, in, true, &r);
  if (go <= 0) return go < 0 ? NV_ERR_OUT_OF_MEMORY : NV_OK;
  const nv__rows_params *p = node->params;
  scan_job j = {&r, S_SUM, p->reverse, p->inclusive, NV_DTYPE_FLOAT64};
  switch (node->prim) {
    case NV__PRIM_CUMPROD: j.op = S_PROD; break;
    case NV__PRIM_CUMMAX: j.op = S_MAX; break;
    case NV__PRIM_CUMMIN: j.op = S_MIN; break;
    case NV__PRIM_LOGCUMSUMEXP: j.op = S_LSE; break;
    default: break;
  }
  nv_dtype dt = r.idt;
  if (dt == NV_DTYPE_COMPLEX64) j.work = NV_DTYPE_COMPLEX64;
  else if (j.op != S_LSE && (nv_issubdtype(dt, NV_CATEGORY_SIGNED_INTEGER) || dt == NV_DTYPE_BOOL))
    j.work = NV_DTYPE_INT64;
  else if (j.op != S_LSE && nv_issubdtype(dt, NV_CATEGORY_UNSIGNED_INTEGER))
    j.work = NV_DTYPE_UINT64;
  if (r.nr == 1 && r.rin[0] != 1 && r.nk >= 1 && r.kin[r.nk - 1] == 1 && r.kout[r.nk - 1] == 1 &&
      j.work != NV_DTYPE_COMPLEX64) {
    int64_t inner = r.kshape[r.nk - 1];
    int64_t units = (r.nrows / inner) * ((inner + COLS - 1) / COLS);
    int64_t per = NV__PAR_GRAIN / (r.len * COLS);
    nv__parallel_for(units, per < 1 ? 1 : per, cols_range, &j);
    return NV_OK;
  }
  nv__rows_parallel(&r, scan_range, &j);
  if (atomic_load(&r.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}
