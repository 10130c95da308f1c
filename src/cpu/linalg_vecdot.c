/* vecdot: sum(conj(a) * b) over the last axis of both inputs, the other axes broadcast to the
 * output. The inputs already have the output's dtype. Floats sum accurately: float16,
 * bfloat16 and float32 accumulate in float64 (exact products, ~2^-53 relative error per
 * addition) and round once; float64 sums pairwise; complex64 accumulates in double complex.
 * Integers accumulate modulo 2^64 in uint64 and wrap into the output dtype. */
#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"

/* GCC's -O2 vectorizes only loops whose trip counts it knows; these loops need the full cost
 * model (clang vectorizes them at -O2 already). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

/* Output elements per segment of the column walk. */
#define SEG 256

typedef struct vec_job {
  nv__linalg_batch bt;
  const char *a, *b;
  int64_t sa, sb, K;
  nv__output *out;
  int64_t inner; /* column walk: output elements per run of the innermost batch axis */
} vec_job;

/* Pairwise float64 dot product: blocks of 128 with four partial sums, halves added. */
static double dot_f64(const double *a, int64_t sa, const double *b, int64_t sb, int64_t n) {
  if (n > 128) {
    int64_t h = (n / 2 + 7) & ~(int64_t)7;
    return dot_f64(a, sa, b, sb, h) + dot_f64(a + h * sa, sa, b + h * sb, sb, n - h);
  }
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; k++) s[k] += a[(i + k) * sa] * b[(i + k) * sb];
  for (; i < n; i++) s[0] += a[i * sa] * b[i * sb];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

#define DOT_WIDE(T, LOAD)                                                                     \
  do {                                                                                        \
    const T *x = (const T *)a, *y = (const T *)b;                                             \
    int64_t k = 0;                                                                            \
    if (sa == 1 && sb == 1) {                                                                 \
      /* Eight independent sums: the loads, products and additions vectorize. */              \
      double s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                \
      for (; k + 8 <= n; k += 8)                                                              \
        for (int u = 0; u < 8; u++) s8[u] += (double)LOAD(x[k + u]) * (double)LOAD(y[k + u]); \
      acc = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));        \
    }                                                                                         \
    for (; k < n; k++) acc += (double)LOAD(x[k * sa]) * (double)LOAD(y[k * sb]);              \
  } while (0)
#define ID(v) (v)

#define DOT_INT(T)                                                                  \
  do {                                                                              \
    const T *x = (const T *)a, *y = (const T *)b;                                   \
    uint64_t s = 0;                                                                 \
    for (int64_t k = 0; k < n; k++) s += (uint64_t)x[k * sa] * (uint64_t)y[k * sb]; \
    *(T *)o = (T)s;                                                                 \
  } while (0)

/* One output element. */
static void dot_one(nv_dtype dt, const char *a, int64_t sa, const char *b, int64_t sb, int64_t n,
                    char *o) {
  double acc = 0;
  switch (dt) {
    case NV_DTYPE_FLOAT32:
      DOT_WIDE(float, ID);
      *(float *)o = (float)acc;
      break;
    case NV_DTYPE_FLOAT16:
      DOT_WIDE(uint16_t, nv__f16_to_f32);
      *(uint16_t *)o = nv__f64_to_f16(acc);
      break;
    case NV_DTYPE_BFLOAT16:
      DOT_WIDE(uint16_t, nv__bf16_to_f32);
      *(uint16_t *)o = nv__f64_to_bf16(acc);
      break;
    case NV_DTYPE_FLOAT64:
      *(double *)o = dot_f64((const double *)a, sa, (const double *)b, sb, n);
      break;
    case NV_DTYPE_COMPLEX64: {
      const float *x = (const float *)a, *y = (const float *)b;
      double re = 0, im = 0;
      for (int64_t k = 0; k < n; k++) {
        double xr = x[2 * k * sa], xi = x[2 * k * sa + 1];
        double yr = y[2 * k * sb], yi = y[2 * k * sb + 1];
        re += xr * yr + xi * yi; /* conj(x) * y */
        im += xr * yi - xi * yr;
      }
      ((float *)o)[0] = (float)re;
      ((float *)o)[1] = (float)im;
      break;
    }
    case NV_DTYPE_INT32: DOT_INT(int32_t); break;
    case NV_DTYPE_UINT32: DOT_INT(uint32_t); break;
    case NV_DTYPE_INT64: DOT_INT(int64_t); break;
    default: DOT_INT(uint64_t); break;
  }
}

static void vec_range(void *ctx, int64_t lo, int64_t hi) {
  const vec_job *j = ctx;
  nv_dtype dt = j->out->dtype;
  size_t isz = nv_dtype_size(dt);
  char *o = (char *)nv__output_ptr(j->out);
  for (int64_t i = lo; i < hi; i++) {
    int64_t oa, ob;
    nv__linalg_batch_offsets(&j->bt, i, &oa, &ob);
    dot_one(dt, j->a + oa * (int64_t)isz, j->sa, j->b + ob * (int64_t)isz, j->sb, j->K,
            o + i * (int64_t)isz);
  }
}

/* The column walk, for a contracted axis that is strided while the output's innermost axis
 * is contiguous in both inputs (vecdot over axis 0 of a matrix): k outermost, a segment of
 * output elements innermost, so every load is contiguous. Rows are widened to float64 (int64
 * for integers) a segment at a time; float64 sums are blocked (128 terms a block), the other
 * floats sum in float64 as dot_one does, integers modulo 2^64. */
static void column_segment(const vec_job *j, int64_t start, int64_t len) {
  nv_dtype dt = j->out->dtype;
  bool is_int = nv_issubdtype(dt, NV_CATEGORY_INTEGER);
  size_t isz = nv_dtype_size(dt);
  int64_t oa, ob;
  nv__linalg_batch_offsets(&j->bt, start, &oa, &ob);
  const char *a = j->a + oa * (int64_t)isz, *b = j->b + ob * (int64_t)isz;
  nv_dtype wide = is_int ? NV_DTYPE_INT64 : NV_DTYPE_FLOAT64;
  /* Unions: integer rows are read through their unsigned type, which C allows. */
  union seg {
    double d[SEG];
    uint64_t u[SEG];
  } ra, rb, tot;
  double blk[SEG];
  memset(&tot, 0, sizeof tot);
  memset(blk, 0, sizeof blk);
  for (int64_t k = 0; k < j->K; k++) {
    const char *ak = a + k * j->sa * (int64_t)isz, *bk = b + k * j->sb * (int64_t)isz;
    if (dt == NV_DTYPE_FLOAT32) {
      const float *x = (const float *)ak, *y = (const float *)bk;
      for (int64_t l = 0; l < len; l++) blk[l] += (double)x[l] * (double)y[l];
    } else if (dt == NV_DTYPE_FLOAT64) {
      const double *x = (const double *)ak, *y = (const double *)bk;
      for (int64_t l = 0; l < len; l++) blk[l] += x[l] * y[l];
    } else {
      nv__convert_run(dt, ak, 1, wide, (char *)&ra, 1, len);
      nv__convert_run(dt, bk, 1, wide, (char *)&rb, 1, len);
      if (is_int) {
        for (int64_t l = 0; l < len; l++) tot.u[l] += ra.u[l] * rb.u[l];
        continue;
      }
      for (int64_t l = 0; l < len; l++) blk[l] += ra.d[l] * rb.d[l];
    }
    if ((k + 1) % 128 == 0 || k + 1 == j->K) {
      for (int64_t l = 0; l < len; l++) tot.d[l] += blk[l];
      memset(blk, 0, sizeof blk);
    }
  }
  nv__convert_run(wide, (const char *)&tot, 1, dt,
                  (char *)nv__output_ptr(j->out) + start * (int64_t)isz, 1, len);
}

static void column_range(void *ctx, int64_t lo, int64_t hi) {
  const vec_job *j = ctx;
  int64_t segs = (j->inner + SEG - 1) / SEG;
  for (int64_t t = lo; t < hi; t++) {
    int64_t run = t / segs, s0 = (t % segs) * SEG;
    int64_t len = j->inner - s0 < SEG ? j->inner - s0 : SEG;
    column_segment(j, run * j->inner + s0, len);
  }
}

nv_status nv__k_vecdot(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  nv__linalg_view a, b;
  nv__linalg_view_of(&a, &in[0]);
  nv__linalg_view_of(&b, &in[1]);
  vec_job j = {.a = a.p, .b = b.p, .out = out};
  j.K = a.shape[a.ndim - 1];
  j.sa = a.st[a.ndim - 1];
  j.sb = b.st[b.ndim - 1];
  nv__linalg_batch_init(&j.bt, out, 0, &a, &b, 1);
  int nd = j.bt.nd;
  if (out->dtype != NV_DTYPE_COMPLEX64 && j.bt.sa[nd - 1] == 1 && j.bt.sb[nd - 1] == 1 &&
      j.bt.shape[nd - 1] > 1 && (j.sa != 1 || j.sb != 1)) {
    j.inner = j.bt.shape[nd - 1];
    int64_t tasks = (out->size / j.inner) * ((j.inner + SEG - 1) / SEG);
    int64_t per = SEG * (j.K > 0 ? j.K : 1);
    nv__parallel_for(tasks, per >= NV__PAR_GRAIN ? 1 : NV__PAR_GRAIN / per, column_range, &j);
    return NV_OK;
  }
  int64_t grain = j.K >= NV__PAR_GRAIN ? 1 : NV__PAR_GRAIN / (j.K > 0 ? j.K : 1);
  nv__parallel_for(out->size, grain, vec_range, &j);
  return NV_OK;
}
