/* The fast family's CPU kernels: rms_norm, layer_norm and rope, one pass per row of the last
 * axis, rows split across the pool. The builder hands every input row-contiguous in the output
 * dtype (rope's offsets int32, freqs in the compute dtype). float16 and bfloat16 rows convert
 * to float32 scratch and compute as float32 (weights and biases converted once per node);
 * float32 accumulates in float32 (eight lanes, as the vectorized loops run), float64 in
 * float64. rope computes each row position's cosines and sines once for all the rows (heads)
 * that share it. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_params.h"

/* ---- Row loops over float32 and float64 (vectorized in the AVX2 and AVX-512 clones) ---- */

#define ROW_LOOPS(C, SUF)                                                                       \
  /* The sum of x[i] (sq: of x[i]^2, centered on mu) in eight lanes. */                         \
  NV_KERNEL_CLONES static C row_sum_##SUF(const C *restrict x, int64_t n, C mu, int sq) {       \
    C acc[8] = {0};                                                                             \
    int64_t i = 0;                                                                              \
    if (sq)                                                                                     \
      for (; i + 8 <= n; i += 8)                                                                \
        for (int k = 0; k < 8; k++) acc[k] += (x[i + k] - mu) * (x[i + k] - mu);                \
    else                                                                                        \
      for (; i + 8 <= n; i += 8)                                                                \
        for (int k = 0; k < 8; k++) acc[k] += x[i + k];                                         \
    C s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));    \
    for (; i < n; i++) s += sq ? (x[i] - mu) * (x[i] - mu) : x[i];                              \
    return s;                                                                                   \
  }                                                                                             \
  /* y = (x - mu) * r [* w] [+ b]. y may be x (in place over scratch). */                       \
  NV_KERNEL_CLONES static void row_scale_##SUF(C *y, const C *x, int64_t n, C mu, C r,          \
                                               const C *restrict w, const C *restrict b) {      \
    if (w && b)                                                                                 \
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * r * w[i] + b[i];                     \
    else if (w)                                                                                 \
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * r * w[i];                            \
    else if (b)                                                                                 \
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * r + b[i];                            \
    else                                                                                        \
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * r;                                   \
  }                                                                                             \
  /* One row: rms (mu = 0, mean of squares) or layer (mean, centered mean of squares). */       \
  static void norm_row_##SUF(C *y, const C *x, int64_t n, int layer, C eps, const C *w,         \
                             const C *b) {                                                      \
    C mu = layer ? row_sum_##SUF(x, n, 0, 0) / (C)n : 0;                                        \
    C var = row_sum_##SUF(x, n, mu, 1) / (C)n;                                                  \
    row_scale_##SUF(y, x, n, mu, (C)1 / SQRT_##SUF(var + eps), w, b);                           \
  }

/* norm_vjp's row (src/ops/fast_params.h): sums of x (layer), then of (x - mu)^2, gw and
 * gw (x - mu) in one pass, then dx. gw = g * w, or g without a weight. The three sums run in
 * eight lanes each, as row_sum does: one float32 accumulator over a long row (8192) drifts
 * past what MLX's gradient tests allow (1e-5 against a composed norm). */
#define VJP_LOOPS(C, SUF)                                                                       \
  NV_KERNEL_CLONES static void vjp_sums_##SUF(const C *restrict x, const C *restrict g,         \
                                              const C *restrict w, int64_t n, C mu, C *out) {  \
    C q[8] = {0}, a[8] = {0}, b[8] = {0};                                                       \
    int64_t i = 0;                                                                              \
    for (; i + 8 <= n; i += 8)                                                                  \
      for (int k = 0; k < 8; k++) {                                                             \
        C t = x[i + k] - mu, gw = w ? g[i + k] * w[i + k] : g[i + k];                           \
        q[k] += t * t;                                                                          \
        a[k] += gw;                                                                             \
        b[k] += gw * t;                                                                         \
      }                                                                                         \
    for (int k = 1; k < 8 && i < n; k++, i++) {                                                 \
      C t = x[i] - mu, gw = w ? g[i] * w[i] : g[i];                                             \
      q[k] += t * t;                                                                            \
      a[k] += gw;                                                                               \
      b[k] += gw * t;                                                                           \
    }                                                                                           \
    out[0] = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));                 \
    out[1] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));                 \
    out[2] = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));                 \
  }                                                                                             \
  NV_KERNEL_CLONES static void vjp_dx_##SUF(C *dx, const C *x, const C *g, const C *w,          \
                                            int64_t n, C mu, C r, C c, C s) {                   \
    for (int64_t i = 0; i < n; i++) {                                                           \
      C gw = w ? g[i] * w[i] : g[i];                                                            \
      dx[i] = r * (gw - c) - (x[i] - mu) * s;                                                   \
    }                                                                                           \
  }                                                                                             \
  static void vjp_row_##SUF(C *dx, const C *x, const C *g, const C *w, int64_t n, int layer,    \
                            C eps) {                                                            \
    C mu = layer ? row_sum_##SUF(x, n, 0, 0) / (C)n : 0, sums[3];                               \
    vjp_sums_##SUF(x, g, w, n, mu, sums);                                                       \
    C r = (C)1 / SQRT_##SUF(sums[0] / (C)n + eps);                                              \
    C c = layer ? sums[1] / (C)n : 0;                                                           \
    vjp_dx_##SUF(dx, x, g, w, n, mu, r, c, r * r * r * (sums[2] / (C)n));                       \
  }

#define SQRT_f32 sqrtf
#define SQRT_f64 sqrt
ROW_LOOPS(float, f32)
ROW_LOOPS(double, f64)
VJP_LOOPS(float, f32)
VJP_LOOPS(double, f64)

/* Half rows to float32 and back. */
NV_KERNEL_CLONES static void load_f16(float *restrict y, const uint16_t *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = nv__f16_to_f32(x[i]);
}
NV_KERNEL_CLONES static void load_bf16(float *restrict y, const uint16_t *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = nv__bf16_to_f32(x[i]);
}
NV_KERNEL_CLONES static void store_f16(uint16_t *restrict y, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = nv__f32_to_f16(x[i]);
}
NV_KERNEL_CLONES static void store_bf16(uint16_t *restrict y, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = nv__f32_to_bf16(x[i]);
}

static void load_half(nv_dtype dt, float *y, const void *x, int64_t n) {
  if (dt == NV_DTYPE_FLOAT16)
    load_f16(y, x, n);
  else
    load_bf16(y, x, n);
}

static void store_half(nv_dtype dt, void *y, const float *x, int64_t n) {
  if (dt == NV_DTYPE_FLOAT16)
    store_f16(y, x, n);
  else
    store_bf16(y, x, n);
}

static bool is_half(nv_dtype dt) { return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16; }

/* ---- rms_norm and layer_norm ---- */

typedef struct norm_job {
  nv_dtype dt;
  int layer;
  int64_t d;
  double eps;
  const char *x;
  char *y;
  const void *w, *b; /* in the compute type (float32 for half rows), or NULL */
  atomic_bool oom;    /* a chunk could not get its scratch row */
} norm_job;

static void norm_rows(void *ctx, int64_t r0, int64_t r1) {
  norm_job *j = ctx;
  int64_t d = j->d;
  size_t es = nv_dtype_size(j->dt);
  if (j->dt == NV_DTYPE_FLOAT64) {
    for (int64_t r = r0; r < r1; r++)
      norm_row_f64((double *)(j->y + r * d * 8), (const double *)(j->x + r * d * 8), d, j->layer,
                   j->eps, j->w, j->b);
  } else if (j->dt == NV_DTYPE_FLOAT32) {
    for (int64_t r = r0; r < r1; r++)
      norm_row_f32((float *)(j->y + r * d * 4), (const float *)(j->x + r * d * 4), d, j->layer,
                   (float)j->eps, j->w, j->b);
  } else {
    float *row = nv__malloc((size_t)d * sizeof *row);
    if (!row) {
      atomic_store(&j->oom, true);
      return;
    }
    for (int64_t r = r0; r < r1; r++) {
      load_half(j->dt, row, j->x + (size_t)r * d * es, d);
      norm_row_f32(row, row, d, j->layer, (float)j->eps, j->w, j->b);
      store_half(j->dt, j->y + (size_t)r * d * es, row, d);
    }
    nv__free(row);
  }
}

/* A half vector input converted to float32 (new memory), or the input's own data. */
static const void *vector_in(const nv__operand *op, nv_dtype dt, int64_t d, float **owned) {
  *owned = NULL;
  if (!is_half(dt)) return nv__operand_ptr(op);
  *owned = nv__malloc((size_t)(d ? d : 1) * sizeof **owned);
  if (*owned) load_half(dt, *owned, nv__operand_ptr(op), d);
  return *owned;
}

static nv_status k_norm(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__fast_norm_params *p = node->params;
  nv__output *o = &node->out[0];
  if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (o->size == 0) return NV_OK;
  norm_job j = {.dt = o->dtype,
                .layer = node->prim == NV__PRIM_FAST_LAYER_NORM,
                .d = o->shape[o->ndim - 1],
                .eps = p->eps,
                .x = nv__operand_ptr(&in[0]),
                .y = nv__output_ptr(o)};
  atomic_init(&j.oom, false);
  float *wo = NULL, *bo = NULL;
  int k = 1;
  if (p->has_weight) j.w = vector_in(&in[k++], j.dt, j.d, &wo);
  if (p->has_bias) j.b = vector_in(&in[k++], j.dt, j.d, &bo);
  bool oom = (p->has_weight && !j.w) || (p->has_bias && !j.b);
  int64_t rows = o->size / j.d;
  if (!oom) nv__parallel_for(rows, NV__PAR_GRAIN / j.d + 1, norm_rows, &j);
  nv__free(wo);
  nv__free(bo);
  if (oom || atomic_load(&j.oom))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}

/* ---- norm_vjp ---- */

typedef struct vjp_job {
  nv_dtype dt;
  int layer;
  int64_t d;
  double eps;
  const char *x, *g;
  char *dx;
  const void *w;   /* in the compute type, or NULL */
  atomic_bool oom; /* a chunk could not get its scratch rows */
} vjp_job;

static void vjp_rows(void *ctx, int64_t r0, int64_t r1) {
  vjp_job *j = ctx;
  int64_t d = j->d;
  size_t es = nv_dtype_size(j->dt);
  if (j->dt == NV_DTYPE_FLOAT64) {
    for (int64_t r = r0; r < r1; r++)
      vjp_row_f64((double *)(j->dx + r * d * 8), (const double *)(j->x + r * d * 8),
                  (const double *)(j->g + r * d * 8), j->w, d, j->layer, j->eps);
  } else if (j->dt == NV_DTYPE_FLOAT32) {
    for (int64_t r = r0; r < r1; r++)
      vjp_row_f32((float *)(j->dx + r * d * 4), (const float *)(j->x + r * d * 4),
                  (const float *)(j->g + r * d * 4), j->w, d, j->layer, (float)j->eps);
  } else {
    float *xr = nv__malloc(2 * (size_t)d * sizeof *xr), *gr = xr + d;
    if (!xr) {
      atomic_store(&j->oom, true);
      return;
    }
    for (int64_t r = r0; r < r1; r++) {
      load_half(j->dt, xr, j->x + (size_t)r * d * es, d);
      load_half(j->dt, gr, j->g + (size_t)r * d * es, d);
      vjp_row_f32(gr, xr, gr, j->w, d, j->layer, (float)j->eps);
      store_half(j->dt, j->dx + (size_t)r * d * es, gr, d);
    }
    nv__free(xr);
  }
}

static nv_status k_norm_vjp(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__fast_norm_params *p = node->params;
  nv__output *o = &node->out[0];
  if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (o->size == 0) return NV_OK;
  vjp_job j = {.dt = o->dtype,
               .layer = p->layer,
               .d = o->shape[o->ndim - 1],
               .eps = p->eps,
               .x = nv__operand_ptr(&in[0]),
               .g = nv__operand_ptr(&in[p->has_weight ? 2 : 1]),
               .dx = nv__output_ptr(o)};
  atomic_init(&j.oom, false);
  float *wo = NULL;
  if (p->has_weight) j.w = vector_in(&in[1], j.dt, j.d, &wo);
  bool oom = p->has_weight && !j.w;
  if (!oom) nv__parallel_for(o->size / j.d, NV__PAR_GRAIN / j.d + 1, vjp_rows, &j);
  nv__free(wo);
  if (oom || atomic_load(&j.oom)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "norm_vjp: out of memory");
  return NV_OK;
}

/* ---- rope ---- */

typedef struct rope_job {
  nv_dtype dt;
  const nv__fast_rope_params *p;
  int64_t m, t, d; /* rows per batch and position (heads), positions, row length */
  const int32_t *off;
  int64_t noff;
  const double *inv; /* dims/2 inverse frequencies */
  const char *x;
  char *y;
  atomic_bool oom; /* a chunk could not get its scratch */
} rope_job;

/* Rotates one row of `c`s (cos, sin interleaved per pair in cs) in place or from x to y:
 * pairs (i, i + h) or (2i, 2i + 1). */
#define ROPE_ROW(C, SUF)                                                                        \
  NV_KERNEL_CLONES static void rope_row_##SUF(C *restrict y, const C *restrict x,               \
                                              const C *restrict cs, int64_t h, int trad) {      \
    if (trad) {                                                                                 \
      for (int64_t i = 0; i < h; i++) {                                                         \
        C a = x[2 * i], b = x[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];                     \
        y[2 * i] = a * c - b * s;                                                               \
        y[2 * i + 1] = a * s + b * c;                                                           \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < h; i++) {                                                         \
        C a = x[i], b = x[i + h], c = cs[2 * i], s = cs[2 * i + 1];                             \
        y[i] = a * c - b * s;                                                                   \
        y[i + h] = a * s + b * c;                                                               \
      }                                                                                         \
    }                                                                                           \
  }
ROPE_ROW(float, f32)
ROPE_ROW(double, f64)

static void rope_rows(void *ctx, int64_t q0, int64_t q1) {
  rope_job *j = ctx;
  const int64_t h = j->p->dims / 2, d = j->d, dims = j->p->dims;
  const int trad = j->p->traditional;
  const double sgn = j->p->inverse ? -1 : 1;
  size_t es = nv_dtype_size(j->dt);
  bool f64 = j->dt == NV_DTYPE_FLOAT64, half = is_half(j->dt);
  /* cos/sin pairs in the compute type, then (half rows) a float32 row in and out. */
  size_t cs_bytes = (size_t)(2 * h) * (f64 ? sizeof(double) : sizeof(float));
  char *scratch = nv__malloc(cs_bytes + (half ? 2 * (size_t)d * sizeof(float) : 0));
  if (!scratch) {
    atomic_store(&j->oom, true);
    return;
  }
  float *rin = (float *)(scratch + cs_bytes), *rout = rin + d;
  for (int64_t q = q0; q < q1; q++) {
    int64_t b = q / j->t, t = q % j->t;
    int64_t off = j->off[j->noff == 1 ? 0 : b];
    if (f64) {
      double *cs = (double *)scratch, pos = (double)(off + t) * j->p->scale;
      for (int64_t i = 0; i < h; i++) {
        double th = pos * j->inv[i];
        cs[2 * i] = cos(th);
        cs[2 * i + 1] = sgn * sin(th);
      }
    } else {
      /* float32 positions and angles, as the composed fallback and the GPU compute them */
      float *cs = (float *)scratch, pos = (float)(off + t) * (float)j->p->scale;
      for (int64_t i = 0; i < h; i++) {
        float th = pos * (float)j->inv[i];
        cs[2 * i] = cosf(th);
        cs[2 * i + 1] = (float)sgn * sinf(th);
      }
    }
    for (int64_t m = 0; m < j->m; m++) {
      size_t at = (size_t)(((b * j->m + m) * j->t + t) * d) * es;
      const char *x = j->x + at;
      char *y = j->y + at;
      if (f64) {
        rope_row_f64((double *)y, (const double *)x, (const double *)scratch, h, trad);
      } else if (!half) {
        rope_row_f32((float *)y, (const float *)x, (const float *)scratch, h, trad);
      } else {
        load_half(j->dt, rin, x, dims);
        rope_row_f32(rout, rin, (const float *)scratch, h, trad);
        store_half(j->dt, y, rout, dims);
      }
      if (dims < d) memcpy(y + dims * es, x + dims * es, (size_t)(d - dims) * es);
    }
  }
  nv__free(scratch);
}

static nv_status k_rope(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__fast_rope_params *p = node->params;
  nv__output *o = &node->out[0];
  if (nv__output_alloc(o) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (o->size == 0) return NV_OK;
  int nd = o->ndim, h = p->dims / 2;
  rope_job j = {.dt = o->dtype,
                .p = p,
                .m = 1,
                .t = o->shape[nd - 2],
                .d = o->shape[nd - 1],
                .off = nv__operand_ptr(&in[1]),
                .noff = in[1].meta->size,
                .x = nv__operand_ptr(&in[0]),
                .y = nv__output_ptr(o)};
  atomic_init(&j.oom, false);
  for (int i = 1; i < nd - 2; i++) j.m *= o->shape[i];
  double *inv = nv__malloc((size_t)h * sizeof *inv);
  if (!inv) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "rope: out of memory");
  for (int i = 0; i < h; i++) {
    if (!p->has_freqs)
      inv[i] = exp2(-(2.0 * i / p->dims) * log2(p->base));
    else if (j.dt == NV_DTYPE_FLOAT64)
      inv[i] = 1.0 / ((const double *)nv__operand_ptr(&in[2]))[i];
    else
      inv[i] = 1.0f / ((const float *)nv__operand_ptr(&in[2]))[i];
  }
  j.inv = inv;
  int64_t pairs = (int64_t)o->shape[0] * j.t, work = j.m * j.d;
  nv__parallel_for(pairs, NV__PAR_GRAIN / work + 1, rope_rows, &j);
  nv__free(inv);
  if (atomic_load(&j.oom)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "rope: out of memory");
  return NV_OK;
}

void nv__cpu_register_fast(nv__kernel_fn *k) {
  k[NV__PRIM_FAST_RMS_NORM] = k_norm;
  k[NV__PRIM_FAST_LAYER_NORM] = k_norm;
  k[NV__PRIM_FAST_ROPE] = k_rope;
  k[NV__PRIM_FAST_NORM_VJP] = k_norm_vjp;
}
