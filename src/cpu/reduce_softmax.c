/* softmax: one fused kernel per row — a pass for the maximum, a pass writing exp(x - max) and
 * summing it, then a scale of the (cache-resident) output. float16/bfloat16 rows convert to
 * float32 scratch; float64 rows compute in float64. The float32 exponential is a branch-free
 * polynomial the compiler vectorizes, built for the baseline ISA and for AVX2+FMA (chosen at
 * run time). */
#include <math.h>
#include <stdlib.h>

#include "cpu/reduce_rows.h"
#include "ops/reduce_params.h"

/* The maximum of a row, NaN if the row holds one (NaN compares false, so it is tracked). */
NV_CLONES static float row_max_f32(const float *x, int64_t n) {
  float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int nan[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) {
      float v = x[i + k];
      m[k] = v > m[k] ? v : m[k];
      nan[k] |= v != v;
    }
  float r = -INFINITY;
  int any = 0;
  for (int k = 0; k < 8; k++) {
    r = m[k] > r ? m[k] : r;
    any |= nan[k];
  }
  for (; i < n; i++) {
    r = x[i] > r ? x[i] : r;
    any |= x[i] != x[i];
  }
  return any ? NAN : r;
}

/* exp(t) = 2^k · p(r) with t = k·ln2 + r, |r| <= ln2/2, p the degree-7 Taylor polynomial
 * (relative error < 1e-8 before rounding); t below the float32 range gives 0 (no subnormal
 * results), NaN stays NaN. Written on 8-lane vectors (GCC vector extensions: two SSE halves
 * on the baseline, one AVX2 register in the x86-64-v3 clone). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Macros rather than functions: 32-byte vector arguments and results would change the
 * baseline ABI. */
#define splat(f) ((v8f){(f), (f), (f), (f), (f), (f), (f), (f)})
#define blend(mask, a, b) ((v8f)(((v8i)(a) & (mask)) | ((v8i)(b) & ~(mask))))

/* *tp = exp(*tp). */
static inline __attribute__((always_inline)) void exp8(v8f *tp) {
  v8f t = *tp;
  v8i under = t < splat(-87.0f), over = t > splat(88.0f), nan = t != t;
  v8f tc = blend(under, splat(-87.0f), blend(over, splat(88.0f), t));
  v8f kf = (tc * splat(1.44269504088896341f) + splat(12582912.0f)) - splat(12582912.0f);
  v8f r = (tc - kf * splat(0.693359375f)) - kf * splat(-2.12194440e-4f);
  v8f p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  v8i k = __builtin_convertvector(kf, v8i);
  v8f scale = (v8f)((k + 127) << 23);
  v8f v = p * scale;
  *tp = blend(nan, t, blend(under, splat(0.0f), v));
}

/* y[i] = exp(x[i] - m), returning their sum: float32 lanes within a block of at most 1024
 * values (the caller adds blocks in float64). The tail goes through a zero-padded vector whose
 * padding is left out of the sum. */
NV_KERNEL_CLONES_FMA static float exp_shift_f32(const float *x, float *y, int64_t n, float m) {
  v8f acc = splat(0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f t;
    memcpy(&t, x + i, sizeof t);
    t -= splat(m);
    exp8(&t);
    acc += t;
    memcpy(y + i, &t, sizeof t);
  }
  float lanes[8];
  memcpy(lanes, &acc, sizeof lanes);
  float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  if (i < n) {
    float tmp[8] = {0};
    memcpy(tmp, x + i, (size_t)(n - i) * sizeof *tmp);
    v8f t;
    memcpy(&t, tmp, sizeof t);
    t -= splat(m);
    exp8(&t);
    memcpy(tmp, &t, sizeof t);
    memcpy(y + i, tmp, (size_t)(n - i) * sizeof *tmp);
    for (int64_t k = 0; k < n - i; k++) s += tmp[k];
  }
  return s;
}

/* exp(x - m) into y, summed in blocks (float32 within a block, float64 across blocks). `next`
 * (or NULL): the next row, whose blocks are prefetched while these compute. */
static double exp_shift_sum_f32(const float *x, float *y, int64_t n, float m, const float *next) {
  double s = 0;
  for (int64_t b = 0; b < n; b += 1024) {
    int64_t k = n - b < 1024 ? n - b : 1024;
    if (next)
      for (int64_t q = 0; q < k; q += 16) __builtin_prefetch(next + b + q, 0, 3);
    s += exp_shift_f32(x + b, y + b, k, m);
  }
  return s;
}

double nv__row_logsumexp_f32(const float *x, int64_t n, float *scratch, const float *next) {
  float m = row_max_f32(x, n);
  if (m != m || isinf(m)) return m; /* NaN; +inf dominates; a row of only -inf gives -inf */
  return (double)m + log(exp_shift_sum_f32(x, scratch, n, m, next));
}

NV_CLONES static void scale_f32(float *y, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++) y[i] *= s;
}

static void softmax_f32(const float *x, float *y, int64_t n, const float *next) {
  float m = row_max_f32(x, n);
  double s = exp_shift_sum_f32(x, y, n, m, next);
  scale_f32(y, n, (float)(1.0 / s));
}

static void softmax_f64(const double *x, double *y, int64_t n) {
  double m = -INFINITY;
  int nan = 0;
  for (int64_t i = 0; i < n; i++) {
    m = x[i] > m ? x[i] : m;
    nan |= x[i] != x[i];
  }
  if (nan) m = NAN;
  double s = 0, c = 0; /* Neumaier-compensated sum */
  for (int64_t i = 0; i < n; i++) {
    double v = exp(x[i] - m);
    y[i] = v;
    double t = s + v;
    c += fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  s += c;
  for (int64_t i = 0; i < n; i++) y[i] /= s;
}

static void softmax_range(void *ctx, int64_t b, int64_t e) {
  nv__rows *r = ctx;
  bool f64 = r->idt == NV_DTYPE_FLOAT64;
  nv_dtype work = f64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  bool direct = nv__rows_in_contiguous(r) && nv__rows_out_contiguous(r) && r->idt == work;
  void *buf = NULL;
  if (!direct && !(buf = malloc((size_t)r->len * (f64 ? 8 : 4)))) {
    atomic_store(&r->failed, 1);
    return;
  }
  for (int64_t i = b; i < e; i++) {
    const void *x;
    void *y;
    if (direct) {
      x = r->in + nv__rows_in_offset(r, i) * r->isz;
      y = r->out + nv__rows_out_offset(r, i) * r->osz;
    } else {
      nv__rows_gather(r, i, work, buf);
      x = y = buf;
    }
    if (f64) softmax_f64(x, y, r->len);
    else /* the next row's reads overlap this row's exponentials */
      softmax_f32(x, y, r->len,
                  direct && i + 1 < e
                      ? (const float *)(r->in + nv__rows_in_offset(r, i + 1) * r->isz)
                      : NULL);
    if (!direct) nv__rows_scatter(r, i, work, buf);
  }
  free(buf);
}

nv_status nv__k_softmax(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (out->size == 0) return NV_OK;
  const nv__rows_params *p = node->params;
  nv__rows r;
  nv__rows_init(&r, &in[0], p->axes, p->naxes, out, true);
  nv__rows_parallel(&r, softmax_range, &r);
  if (atomic_load(&r.failed)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "softmax: out of memory");
  return NV_OK;
}
