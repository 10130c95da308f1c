/* The CPU kernels of the fast family's serving ops: sorted_offsets (a binary search per group,
 * groups split across the pool) and causal_softmax (a row softmax over each row's seen
 * columns, rows split across the pool; float16/bfloat16 rows through float32 scratch, float64
 * in float64) and paged_write (the pool copied unless donated, then a row copy per token,
 * tokens split across the pool when their slots are distinct) and conv_slots (the pool copied
 * unless donated, then each sequence's window sum and state shift, sequences split across the
 * pool when their slots are distinct). The builders hand every input
 * row-contiguous (src/ops/fast_serving.c); a donated causal_softmax writes over its input row
 * by row, each value read before it is written. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_serving.h"

/* ---- sorted_offsets ---- */

typedef struct offsets_job {
  const void *ids;
  nv_dtype idt;
  int64_t n;
  void *out;
  bool wide; /* int64 offsets */
} offsets_job;

/* The first i in [0, n) with ids[i] >= g, or n. */
#define LOWER_BOUND(T)                                           \
  static int64_t lower_bound_##T(const T *ids, int64_t n, T g) { \
    int64_t lo = 0, hi = n;                                      \
    while (lo < hi) {                                            \
      int64_t mid = lo + (hi - lo) / 2;                          \
      if (ids[mid] < g)                                          \
        lo = mid + 1;                                            \
      else                                                       \
        hi = mid;                                                \
    }                                                            \
    return lo;                                                   \
  }
LOWER_BOUND(int32_t)
LOWER_BOUND(int64_t)
LOWER_BOUND(uint32_t)
LOWER_BOUND(uint64_t)

static void offsets_range(void *ctx, int64_t b, int64_t e) {
  const offsets_job *j = ctx;
  for (int64_t g = b; g < e; g++) {
    int64_t at;
    switch (j->idt) {
    case NV_DTYPE_INT64: at = lower_bound_int64_t(j->ids, j->n, (int64_t)g); break;
    case NV_DTYPE_UINT32: at = lower_bound_uint32_t(j->ids, j->n, (uint32_t)g); break;
    case NV_DTYPE_UINT64: at = lower_bound_uint64_t(j->ids, j->n, (uint64_t)g); break;
    default: at = lower_bound_int32_t(j->ids, j->n, (int32_t)g); break;
    }
    if (j->wide)
      ((int64_t *)j->out)[g] = at;
    else
      ((int32_t *)j->out)[g] = (int32_t)at;
  }
}

static nv_status k_sorted_offsets(nv__node *node, const nv__operand *in, int donated) {
  (void)donated; /* sorted_offsets donates nothing (D_NONE) */
  nv__output *o = &node->out[0];
  if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  offsets_job j = {.ids = nv__operand_ptr(&in[0]),
                   .idt = in[0].meta->dtype,
                   .n = in[0].meta->size,
                   .out = o->buf->ptr,
                   .wide = o->dtype == NV_DTYPE_INT64};
  nv__parallel_for(o->size, 4096, offsets_range, &j);
  return NV_OK;
}

/* ---- causal_softmax ---- */

typedef struct causal_job {
  const char *x;
  char *y;
  nv_dtype dt;
  int64_t c, rows;
  atomic_int failed;
} causal_job;

/* The number of columns row r sees: c - rows + (r mod rows) + 1, within [0, c]. */
static int64_t seen_columns(const causal_job *j, int64_t r) {
  int64_t k = j->c - j->rows + r % j->rows + 1;
  return k < 0 ? 0 : k > j->c ? j->c : k;
}

/* The maximum of x[0, n), NaN when one is NaN (-inf for n = 0). */
/* (Once m is NaN no comparison is true, so it stays NaN.) */
#define ROW_MAX(C, SUF)                           \
  static C row_max_##SUF(const C *x, int64_t n) { \
    C m = -INFINITY;                              \
    for (int64_t i = 0; i < n; i++)               \
      if (x[i] > m || x[i] != x[i]) m = x[i];     \
    return m;                                     \
  }
ROW_MAX(float, f32)
ROW_MAX(double, f64)

/* y[0, k) = softmax of x[0, k) (y may be x); y[k, c) = 0. */
static void causal_row_f32(const float *x, float *y, int64_t k, int64_t c) {
  if (k > 0) {
    float m = row_max_f32(x, k);
    double s = 0;
    for (int64_t i = 0; i < k; i++) {
      float e = expf(x[i] - m);
      y[i] = e;
      s += e;
    }
    float r = (float)(1.0 / s);
    for (int64_t i = 0; i < k; i++) y[i] *= r;
  }
  for (int64_t i = k; i < c; i++) y[i] = 0;
}

static void causal_row_f64(const double *x, double *y, int64_t k, int64_t c) {
  if (k > 0) {
    double m = row_max_f64(x, k), s = 0;
    for (int64_t i = 0; i < k; i++) {
      y[i] = exp(x[i] - m);
      s += y[i];
    }
    for (int64_t i = 0; i < k; i++) y[i] /= s;
  }
  for (int64_t i = k; i < c; i++) y[i] = 0;
}

static void causal_range(void *ctx, int64_t b, int64_t e) {
  causal_job *j = ctx;
  bool half = j->dt == NV_DTYPE_FLOAT16 || j->dt == NV_DTYPE_BFLOAT16;
  float *buf = NULL;
  if (half && !(buf = malloc((size_t)j->c * sizeof *buf))) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t r = b; r < e; r++) {
    int64_t k = seen_columns(j, r), c = j->c;
    if (j->dt == NV_DTYPE_FLOAT64) {
      causal_row_f64((const double *)j->x + r * c, (double *)j->y + r * c, k, c);
    } else if (j->dt == NV_DTYPE_FLOAT32) {
      causal_row_f32((const float *)j->x + r * c, (float *)j->y + r * c, k, c);
    } else {
      const uint16_t *x = (const uint16_t *)j->x + r * c;
      uint16_t *y = (uint16_t *)j->y + r * c;
      bool f16 = j->dt == NV_DTYPE_FLOAT16;
      for (int64_t i = 0; i < k; i++) buf[i] = f16 ? nv__f16_to_f32(x[i]) : nv__bf16_to_f32(x[i]);
      causal_row_f32(buf, buf, k, c);
      for (int64_t i = 0; i < c; i++) y[i] = f16 ? nv__f32_to_f16(buf[i]) : nv__f32_to_bf16(buf[i]);
    }
  }
  free(buf);
}

static nv_status k_causal_softmax(nv__node *node, const nv__operand *in, int donated) {
  nv__output *o = &node->out[0];
  if (donated < 0 && nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (o->size == 0) return NV_OK;
  const nv__fast_causal_params *p = node->params;
  causal_job j = {.x = nv__operand_ptr(&in[0]),
                  .y = (char *)o->buf->ptr + o->offset * (int64_t)nv_dtype_size(o->dtype),
                  .dt = o->dtype,
                  .c = o->shape[o->ndim - 1],
                  .rows = p->rows};
  atomic_init(&j.failed, 0);
  int64_t nrows = o->size / j.c, grain = 16384 / j.c + 1;
  nv__parallel_for(nrows, grain, causal_range, &j);
  if (atomic_load(&j.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "causal_softmax: out of memory");
  return NV_OK;
}

/* ---- paged_write ---- */

typedef struct paged_job {
  char *out;
  const char *values;
  const void *slots;
  bool slots64;
  int64_t nslots;
  size_t row; /* bytes a token row */
} paged_job;

static int64_t slot_at(const paged_job *j, int64_t t) {
  return j->slots64 ? ((const int64_t *)j->slots)[t] : ((const int32_t *)j->slots)[t];
}

static void paged_range(void *ctx, int64_t b, int64_t e) {
  const paged_job *j = ctx;
  for (int64_t t = b; t < e; t++) {
    int64_t s = slot_at(j, t);
    if (s >= 0) memcpy(j->out + (size_t)s * j->row, j->values + (size_t)t * j->row, j->row);
  }
}

/* The pool (input 0) in the output, in place when donated, else copied; then each token's row
 * at its slot. Slots are checked first, so a failing node writes nothing. Tokens are written
 * in parallel only when no two share a slot (else serially, the last one staying). */
static nv_status k_paged_write(nv__node *node, const nv__operand *in, int donated) {
  nv__output *o = &node->out[0];
  const nv__output *vo = in[1].meta;
  paged_job j = {.values = nv__operand_ptr(&in[1]),
                 .slots = nv__operand_ptr(&in[2]),
                 .slots64 = in[2].meta->dtype == NV_DTYPE_INT64,
                 .nslots = (int64_t)o->shape[0] * o->shape[1]};
  int64_t t = in[2].meta->size;
  j.row = t ? (size_t)vo->size / (size_t)t * nv_dtype_size(o->dtype) : 0;
  for (int64_t i = 0; i < t; i++) {
    int64_t s = slot_at(&j, i);
    if (s >= j.nslots)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "paged_write: index %lld is out of range for an axis of size %lld",
                           (long long)s, (long long)j.nslots);
  }
  if (donated < 0) {
    if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    size_t bytes = (size_t)o->size * nv_dtype_size(o->dtype);
    if (bytes) memcpy(o->buf->ptr, nv__operand_ptr(&in[0]), bytes);
  }
  if (o->size == 0 || j.row == 0) return NV_OK;
  j.out = (char *)o->buf->ptr + o->offset * (int64_t)nv_dtype_size(o->dtype);
  /* Distinct slots (as serving gives them) write disjoint rows: parallel. Checked with a
   * bitmap of the slots when tokens are many enough to be worth splitting. */
  int64_t grain = (int64_t)(65536 / j.row) + 1;
  bool parallel = t > grain;
  uint8_t *seen = parallel ? calloc((size_t)(j.nslots / 8 + 1), 1) : NULL;
  if (parallel && !seen) parallel = false;
  for (int64_t i = 0; parallel && i < t; i++) {
    int64_t s = slot_at(&j, i);
    if (s < 0) continue;
    if (seen[s / 8] & (1u << (s % 8))) parallel = false;
    seen[s / 8] |= (uint8_t)(1u << (s % 8));
  }
  free(seen);
  if (parallel)
    nv__parallel_for(t, grain, paged_range, &j);
  else
    paged_range(&j, 0, t);
  return NV_OK;
}

/* ---- conv_slots ---- */

typedef struct conv_job {
  const nv__node *node;
  const void *x, *w, *b, *slots;
  void *pool, *y;
  bool slots64;
  int64_t c, k;
} conv_job;

/* Sequences [b, e): the window's weighted sum in the compute type (float32 sums of float32
 * products, as the GPU's; float64 for float64), then the state shifted by one. */
static void conv_range(void *ctx, int64_t b, int64_t e) {
  const conv_job *j = ctx;
  const nv__fast_conv_params *p = j->node->params;
  nv_dtype dt = j->node->out[1].dtype;
  bool f64 = dt == NV_DTYPE_FLOAT64;
  int64_t c = j->c, k = j->k;
  for (int64_t n = b; n < e; n++) {
    int64_t s = j->slots64 ? ((const int64_t *)j->slots)[n] : ((const int32_t *)j->slots)[n];
    for (int64_t ch = 0; ch < c; ch++) {
      if (s < 0) {
        nv__real_st(dt, j->y, n * c + ch, 0);
        continue;
      }
      int64_t base = (s * c + ch) * (k - 1);
      double xv = nv__real_ld(dt, j->x, n * c + ch), acc = 0;
      float accf = 0;
      for (int64_t t = 0; t < k; t++) {
        double v = t < k - 1 ? nv__real_ld(dt, j->pool, base + t) : xv,
               wv = nv__real_ld(dt, j->w, ch * k + t);
        if (f64)
          acc += wv * v;
        else
          accf += (float)wv * (float)v;
      }
      if (p->has_bias) {
        if (f64)
          acc += nv__real_ld(dt, j->b, ch);
        else
          accf += (float)nv__real_ld(dt, j->b, ch);
      }
      if (p->silu) {
        if (f64)
          acc = acc / (1 + exp(-acc));
        else
          accf = accf / (1 + expf(-accf));
      }
      nv__real_st(dt, j->y, n * c + ch, f64 ? acc : (double)accf);
      for (int64_t t = 0; t + 1 < k - 1; t++)
        nv__real_st(dt, j->pool, base + t, nv__real_ld(dt, j->pool, base + t + 1));
      if (k > 1) nv__real_st(dt, j->pool, base + k - 2, xv);
    }
  }
}

/* The pool in output 0 (in place when donated, else copied), y in output 1. Slots are checked
 * first; sequences run in parallel when their slots are distinct, else serially. */
static nv_status k_conv_slots(nv__node *node, const nv__operand *in, int donated) {
  nv__output *po = &node->out[0], *yo = &node->out[1];
  const nv__fast_conv_params *p = node->params;
  int64_t nseq = yo->shape[0], ns = po->shape[0];
  conv_job j = {.node = node,
                .x = nv__operand_ptr(&in[0]),
                .w = nv__operand_ptr(&in[1]),
                .slots = nv__operand_ptr(&in[3]),
                .b = p->has_bias ? nv__operand_ptr(&in[4]) : NULL,
                .slots64 = in[3].meta->dtype == NV_DTYPE_INT64,
                .c = yo->shape[1],
                .k = in[1].meta->shape[1]};
  bool distinct = true;
  nv_status cs = nv__cpu_check_slots("conv_slots", j.slots, j.slots64, nseq, ns, &distinct);
  if (cs != NV_OK) return cs;
  if (donated < 0) {
    if (nv__output_alloc(po) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    size_t bytes = (size_t)po->size * nv_dtype_size(po->dtype);
    if (bytes) memcpy(po->buf->ptr, nv__operand_ptr(&in[2]), bytes);
  }
  if (nv__output_alloc(yo) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (yo->size == 0) return NV_OK;
  j.pool = nv__output_ptr(po);
  j.y = nv__output_ptr(yo);
  int64_t grain = 16384 / (j.c * j.k) + 1;
  if (distinct)
    nv__parallel_for(nseq, grain, conv_range, &j);
  else
    conv_range(&j, 0, nseq);
  return NV_OK;
}

void nv__cpu_register_fast_serving(nv__kernel_fn *k) {
  k[NV__PRIM_FAST_CONV_SLOTS] = k_conv_slots;
  k[NV__PRIM_FAST_PAGED_WRITE] = k_paged_write;
  k[NV__PRIM_FAST_SORTED_OFFSETS] = k_sorted_offsets;
  k[NV__PRIM_FAST_CAUSAL_SOFTMAX] = k_causal_softmax;
}

nv_status nv__cpu_check_slots(const char *op, const void *slots, bool s64, int64_t n, int64_t ns,
                              bool *distinct) {
  uint8_t *seen = calloc((size_t)(ns / 8 + 1), 1);
  if (!seen) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  *distinct = true;
  for (int64_t i = 0; i < n; i++) {
    int64_t s = s64 ? ((const int64_t *)slots)[i] : ((const int32_t *)slots)[i];
    if (s >= ns) {
      free(seen);
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "%s: index %lld is out of range for an axis of size %lld", op,
                           (long long)s, (long long)ns);
    }
    if (s < 0) continue;
    if (seen[s / 8] & (1u << (s % 8))) *distinct = false;
    seen[s / 8] |= (uint8_t)(1u << (s % 8));
  }
  free(seen);
  return NV_OK;
}
