/* The CPU kernel of norm_rope: RMSNorm then RoPE per row, tokens split across the pool. Each
 * token's cosines and sines are computed once for all its rows (heads), as rope's kernel does
 * (the inverse frequency in float64, the position and angle in the compute type); a row is
 * read into compute-type scratch (float32 for float16/bfloat16/float32, float64 for float64),
 * its mean square summed in eight lanes (as rms_norm's loops), normalized, scaled, rotated and
 * rounded once into its destination: the output row of the token, or the cache row at the
 * token's cache position (the cache copied first unless donated; tokens run in parallel only
 * when their cache rows are distinct, else serially, the last one staying). The builder hands
 * every input row-contiguous (src/ops/fast_norm_rope.c). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_state.h"

typedef struct nr_job {
  const nv__fast_norm_rope_params *p;
  nv_dtype dt;
  int64_t m, d;        /* rows a token, row length */
  const char *x;       /* row-contiguous [T, M, D] */
  char *out;           /* the output, or the cache: [rows, M, D] */
  const int32_t *pos;  /* T positions */
  const void *cpos;    /* T cache positions (int32 or int64), NULL without a cache */
  bool cpos64;
  const double *inv;   /* dims/2 inverse frequencies */
  const void *w;       /* the weight in the compute type, NULL for none */
  atomic_bool oom;     /* a chunk could not get its scratch */
} nr_job;

static int64_t cpos_at(const nr_job *j, int64_t t) {
  return j->cpos64 ? ((const int64_t *)j->cpos)[t] : ((const int32_t *)j->cpos)[t];
}

/* One row of `C`s: n = x * r * w (in place over x), then the rope of n's first dims features
 * into y (cs: cos, sin interleaved per pair), the rest of n copied. */
#define NR_ROW(C, SUF, SQRT)                                                                     \
  NV_KERNEL_CLONES static void nr_row_##SUF(C *restrict y, C *restrict x, const C *restrict w, \
                                            const C *restrict cs, int64_t d, int64_t dims,      \
                                            int trad, C eps) {                                  \
    C acc[8] = {0};                                                                             \
    int64_t i = 0;                                                                              \
    for (; i + 8 <= d; i += 8)                                                                  \
      for (int k = 0; k < 8; k++) acc[k] += x[i + k] * x[i + k];                                \
    C s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));    \
    for (; i < d; i++) s += x[i] * x[i];                                                        \
    const C r = (C)1 / SQRT(s / (C)d + eps);                                                    \
    if (w)                                                                                      \
      for (i = 0; i < d; i++) x[i] = x[i] * r * w[i];                                           \
    else                                                                                        \
      for (i = 0; i < d; i++) x[i] = x[i] * r;                                                  \
    const int64_t h = dims / 2;                                                                 \
    if (trad) {                                                                                 \
      for (i = 0; i < h; i++) {                                                                 \
        C a = x[2 * i], b = x[2 * i + 1], c = cs[2 * i], sn = cs[2 * i + 1];                    \
        y[2 * i] = a * c - b * sn;                                                              \
        y[2 * i + 1] = a * sn + b * c;                                                          \
      }                                                                                         \
    } else {                                                                                    \
      for (i = 0; i < h; i++) {                                                                 \
        C a = x[i], b = x[i + h], c = cs[2 * i], sn = cs[2 * i + 1];                            \
        y[i] = a * c - b * sn;                                                                  \
        y[i + h] = a * sn + b * c;                                                              \
      }                                                                                         \
    }                                                                                           \
    for (i = dims; i < d; i++) y[i] = x[i];                                                     \
  }
NR_ROW(float, f32, sqrtf)
NR_ROW(double, f64, sqrt)

/* A row of x's dtype into float32 scratch, and back. */
static void load_f32(nv_dtype dt, float *y, const void *x, int64_t n) {
  if (dt == NV_DTYPE_FLOAT16)
    for (int64_t i = 0; i < n; i++) y[i] = nv__f16_to_f32(((const uint16_t *)x)[i]);
  else if (dt == NV_DTYPE_BFLOAT16)
    for (int64_t i = 0; i < n; i++) y[i] = nv__bf16_to_f32(((const uint16_t *)x)[i]);
  else
    memcpy(y, x, (size_t)n * sizeof *y);
}

static void store_f32(nv_dtype dt, void *y, const float *x, int64_t n) {
  if (dt == NV_DTYPE_FLOAT16)
    for (int64_t i = 0; i < n; i++) ((uint16_t *)y)[i] = nv__f32_to_f16(x[i]);
  else if (dt == NV_DTYPE_BFLOAT16)
    for (int64_t i = 0; i < n; i++) ((uint16_t *)y)[i] = nv__f32_to_bf16(x[i]);
  else
    memcpy(y, x, (size_t)n * sizeof *x);
}

/* Tokens [b, e). */
static void nr_tokens(void *ctx, int64_t b, int64_t e) {
  nr_job *j = ctx;
  const nv__fast_norm_rope_params *p = j->p;
  const int64_t h = p->dims / 2, d = j->d, m = j->m;
  const bool f64 = j->dt == NV_DTYPE_FLOAT64;
  const size_t es = nv_dtype_size(j->dt), cz = f64 ? sizeof(double) : sizeof(float);
  /* cos/sin pairs, then a row in and a row out, in the compute type */
  char *scratch = nv__malloc((size_t)(2 * h + 2 * d) * cz);
  if (!scratch) {
    atomic_store(&j->oom, true);
    return;
  }
  char *rin = scratch + (size_t)(2 * h) * cz, *rout = rin + (size_t)d * cz;
  for (int64_t t = b; t < e; t++) {
    int64_t at = t; /* the destination's token row */
    if (j->cpos && (at = cpos_at(j, t)) < 0) continue; /* padding */
    if (f64) {
      double *cs = (double *)scratch, pos = (double)j->pos[t] * p->scale;
      for (int64_t i = 0; i < h; i++) {
        double th = pos * j->inv[i];
        cs[2 * i] = cos(th);
        cs[2 * i + 1] = sin(th);
      }
    } else {
      float *cs = (float *)scratch, pos = (float)j->pos[t] * (float)p->scale;
      for (int64_t i = 0; i < h; i++) {
        float th = pos * (float)j->inv[i];
        cs[2 * i] = cosf(th);
        cs[2 * i + 1] = sinf(th);
      }
    }
    for (int64_t r = 0; r < m; r++) {
      const char *x = j->x + (size_t)((t * m + r) * d) * es;
      char *y = j->out + (size_t)((at * m + r) * d) * es;
      if (f64) {
        memcpy(rin, x, (size_t)d * cz);
        nr_row_f64((double *)rout, (double *)rin, j->w, (const double *)scratch, d, p->dims,
                   p->traditional, p->eps);
        memcpy(y, rout, (size_t)d * cz);
      } else {
        load_f32(j->dt, (float *)rin, x, d);
        nr_row_f32((float *)rout, (float *)rin, j->w, (const float *)scratch, d, p->dims,
                   p->traditional, (float)p->eps);
        store_f32(j->dt, y, (const float *)rout, d);
      }
    }
  }
  nv__free(scratch);
}

static nv_status k_norm_rope(nv__node *node, const nv__operand *in, int donated) {
  const nv__fast_norm_rope_params *p = node->params;
  const bool cache = node->prim == NV__PRIM_FAST_NORM_ROPE_CACHE;
  nv__output *o = &node->out[0];
  const nv__operand *xo = &in[cache ? 1 : 0];
  const nv__output *xm = xo->meta;
  int nd = xm->ndim, at = cache ? 4 : 2;
  nr_job j = {.p = p,
              .dt = o->dtype,
              .m = 1,
              .d = xm->shape[nd - 1],
              .x = nv__operand_ptr(xo),
              .pos = nv__operand_ptr(&in[cache ? 2 : 1]),
              .cpos = cache ? nv__operand_ptr(&in[3]) : NULL,
              .cpos64 = cache && in[3].meta->dtype == NV_DTYPE_INT64};
  atomic_init(&j.oom, false);
  for (int i = 1; i < nd - 1; i++) j.m *= xm->shape[i];
  int64_t t = xm->shape[0], nrows = cache ? o->shape[0] : t;
  /* Cache positions are checked first (when there are rows to write, as on the GPU), so a
   * failing node writes nothing. */
  for (int64_t i = 0; cache && xm->size > 0 && i < t; i++) {
    int64_t s = cpos_at(&j, i);
    if (s >= nrows)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "norm_rope: index %lld is out of range for an axis of size %lld",
                           (long long)s, (long long)nrows);
  }
  if (cache && donated < 0) {
    if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    size_t bytes = (size_t)o->size * nv_dtype_size(o->dtype);
    if (bytes) memcpy(o->buf->ptr, nv__operand_ptr(&in[0]), bytes);
  } else if (!cache && nv__output_alloc(o) != NV_OK) {
    return NV_ERR_OUT_OF_MEMORY;
  }
  if (xm->size == 0) return NV_OK;
  j.out = nv__output_ptr(o);
  const bool f64 = j.dt == NV_DTYPE_FLOAT64;
  const int h = p->dims / 2;
  /* The inverse frequencies (float64, as rope's kernel) and the weight in the compute type. */
  double *inv = nv__malloc((size_t)h * sizeof *inv);
  void *w = p->has_weight ? nv__malloc((size_t)j.d * (f64 ? sizeof(double) : sizeof(float)))
                          : NULL;
  if (!inv || (p->has_weight && !w)) {
    nv__free(inv);
    nv__free(w);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "norm_rope: out of memory");
  }
  const void *freqs = p->has_freqs ? nv__operand_ptr(&in[at + (p->has_weight ? 1 : 0)]) : NULL;
  for (int i = 0; i < h; i++) {
    if (!freqs)
      inv[i] = exp2(-(2.0 * i / p->dims) * log2(p->base));
    else if (f64)
      inv[i] = 1.0 / ((const double *)freqs)[i];
    else
      inv[i] = 1.0f / ((const float *)freqs)[i];
  }
  if (w && f64)
    memcpy(w, nv__operand_ptr(&in[at]), (size_t)j.d * sizeof(double));
  else if (w)
    load_f32(j.dt, w, nv__operand_ptr(&in[at]), j.d);
  j.inv = inv;
  j.w = w;
  /* Distinct cache rows write disjoint rows: parallel (checked with a bitmap of the rows). */
  bool parallel = true;
  if (cache) {
    uint8_t *seen = calloc((size_t)(nrows / 8 + 1), 1);
    parallel = seen != NULL;
    for (int64_t i = 0; parallel && i < t; i++) {
      int64_t s = cpos_at(&j, i);
      if (s < 0) continue;
      if (seen[s / 8] & (1u << (s % 8))) parallel = false;
      seen[s / 8] |= (uint8_t)(1u << (s % 8));
    }
    free(seen);
  }
  if (parallel)
    nv__parallel_for(t, NV__PAR_GRAIN / (j.m * j.d) + 1, nr_tokens, &j);
  else
    nr_tokens(&j, 0, t);
  nv__free(inv);
  nv__free(w);
  if (atomic_load(&j.oom)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "norm_rope: out of memory");
  return NV_OK;
}

void nv__cpu_register_fast_norm_rope(nv__kernel_fn *k) {
  k[NV__PRIM_FAST_NORM_ROPE] = k_norm_rope;
  k[NV__PRIM_FAST_NORM_ROPE_CACHE] = k_norm_rope;
}
