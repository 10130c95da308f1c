/* quantized_matmul and gather_qmm (each pair's matrix of w read in place) on the CPU: the weights
 * are dequantized on the fly, a few rows (transposed) or a band of columns (not transposed) at a
 * time into a float32 tile owned by one task, never as a whole matrix; products accumulate in
 * float32. Tasks are (batch, block of output columns), pool-parallel. x is converted to float32
 * once per call when it is not float32. */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "cpu/quantize_kernels.h"
#include "ops/quantize_codec.h"
#include "ops/quantize_params.h"

/* Output columns per task: rows of w dequantized together (transposed) and the column band
 * (not transposed). */
#define TCOLS 4
#define NBAND 64

typedef struct qmm_job {
  const nv__quant_params *p;
  const float *x;     /* (B, M, K) float32 */
  const uint32_t *w;  /* (Bw, R, words) */
  const void *s, *b;  /* (Bw, R, groups) */
  nv_dtype sdt;       /* the scales' dtype (affine) */
  int64_t B, M, K, N, R, words, groups;
  bool wbatch;        /* w has one matrix per batch */
  const int64_t *li, *ri; /* gather_qmm: x's and w's batch of each output batch, else NULL */
  nv__output *out;
  int64_t nblocks;    /* column blocks per batch */
  const float *xsum;  /* affine, transposed: x's sums per group, (B, M, groups) */
  atomic_bool oom;    /* a task could not allocate its tile */
} qmm_job;

/* Dequantizes elements [e0, e0 + n) of one row of w (its words, scales and biases) into dst,
 * as float32 values: s * q + b (affine) or scale * element. */
NV_KERNEL_CLONES
static void deq_seg(const qmm_job *j, const uint32_t *row, const void *srow, const void *brow,
                    int64_t e0, int64_t n, float *dst) {
  const nv__quant_params *p = j->p;
  int gs = p->group_size, bits = p->bits;
  int64_t end = e0 + n;
  for (int64_t e = e0; e < end;) {
    int64_t g = e / gs, stop = (g + 1) * gs < end ? (g + 1) * gs : end;
    float s, b = 0;
    if (p->mode == NV__QMODE_AFFINE) {
      s = nv__q_load(j->sdt, srow, g);
      b = nv__q_load(j->sdt, brow, g);
    } else {
      s = nv__q_scale_value(p->mode, ((const uint8_t *)srow)[g]);
    }
    float *d = dst + (e - e0);
    int64_t len = stop - e;
    if (p->mode != NV__QMODE_AFFINE) {
      for (int64_t i = 0; i < len; i++) {
        uint32_t c = nv__qextract(row, e + i, bits, j->words);
        float v = p->mode == NV__QMODE_MXFP8 ? nv__fp8_to_f32((uint8_t)c) : nv__qfp4_value(c);
        d[i] = s * v;
      }
    } else if (32 % bits == 0 && e % (32 / bits) == 0) {
      /* Whole words: shifts by constant steps (vectorizable). */
      int per = 32 / bits;
      uint32_t mask = (1u << bits) - 1;
      const uint32_t *wp = row + e / per;
      int64_t i = 0;
      for (; i + per <= len; i += per) {
        uint32_t word = wp[i / per];
        for (int k = 0; k < per; k++) d[i + k] = (float)((word >> (k * bits)) & mask) * s + b;
      }
      for (; i < len; i++) d[i] = (float)nv__qextract(row, e + i, bits, j->words) * s + b;
    } else {
      for (int64_t i = 0; i < len; i++)
        d[i] = (float)nv__qextract(row, e + i, bits, j->words) * s + b;
    }
    e = stop;
  }
}

/* Dot products of one x row with `nt` (<= TCOLS) dequantized rows of length K, with sixteen
 * partial sums per row so the loop vectorizes. */
NV_KERNEL_CLONES
static void dots(const float *x, const float *t, int64_t K, int nt, float *res) {
  for (int c = 0; c < nt; c++) {
    const float *tc = t + c * K;
    float acc[16] = {0};
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
      for (int u = 0; u < 16; u++) acc[u] += x[k + u] * tc[k + u];
    float r = 0;
    for (; k < K; k++) r += x[k] * tc[k];
    for (int u = 0; u < 16; u++) r += acc[u];
    res[c] = r;
  }
}

/* acc[0..n) += a * t[0..n). */
NV_KERNEL_CLONES
static void axpy(float *acc, float a, const float *t, int64_t n) {
  for (int64_t i = 0; i < n; i++) acc[i] += a * t[i];
}

static void store_out(nv__output *o, int64_t i, float v) {
  char *p = nv__output_ptr(o);
  switch (o->dtype) {
    case NV_DTYPE_FLOAT16: ((uint16_t *)p)[i] = nv__f32_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = nv__f32_to_bf16(v); break;
    case NV_DTYPE_FLOAT64: ((double *)p)[i] = v; break;
    default: ((float *)p)[i] = v; break;
  }
}

/* The index of x's row m for output batch b (a row of (Bx * M, K)). */
static int64_t x_index(const qmm_job *j, int64_t b, int64_t m) {
  return (j->li ? j->li[b] : b) * j->M + m;
}

/* The row pointers of w's row r for output batch b. */
static void w_row(const qmm_job *j, int64_t b, int64_t r, const uint32_t **row, const void **s,
                  const void **bias) {
  int64_t wb = j->ri ? j->ri[b] : j->wbatch ? b : 0, rr = wb * j->R + r;
  size_t ssz = j->p->mode == NV__QMODE_AFFINE ? nv_dtype_size(j->sdt) : 1;
  *row = j->w + rr * j->words;
  *s = (const char *)j->s + rr * j->groups * (int64_t)ssz;
  *bias = j->b ? (const char *)j->b + rr * j->groups * (int64_t)ssz : NULL;
}

/* Transposed: each task dequantizes TCOLS rows of w (output columns) and dots them with every
 * row of x. */
static void range_t(void *ctx, int64_t lo, int64_t hi) {
  const qmm_job *j = ctx;
  float *tile = malloc((size_t)(TCOLS * j->K) * sizeof(float));
  if (!tile) {
    atomic_store(&((qmm_job *)ctx)->oom, true);
    return;
  }
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / j->nblocks, n0 = (t % j->nblocks) * TCOLS;
    int nt = (int)(j->N - n0 < TCOLS ? j->N - n0 : TCOLS);
    for (int c = 0; c < nt; c++) {
      const uint32_t *row;
      const void *s, *bias;
      w_row(j, b, n0 + c, &row, &s, &bias);
      deq_seg(j, row, s, bias, 0, j->K, tile + c * j->K);
    }
    for (int64_t m = 0; m < j->M; m++) {
      float res[TCOLS];
      dots(j->x + x_index(j, b, m) * j->K, tile, j->K, nt, res);
      for (int c = 0; c < nt; c++) store_out(j->out, (b * j->M + m) * j->N + n0 + c, res[c]);
    }
  }
  free(tile);
}

/* The codes of one group (elements e0 .. e0 + gs of a row) as floats; constant shifts for the
 * bits that divide 32, so the loops vectorize. */
#define CODES(BITS)                                                               \
  for (int w = 0; w < gs / (32 / BITS); w++) {                                    \
    uint32_t word = wp[w];                                                        \
    for (int k = 0; k < 32 / BITS; k++)                                           \
      q[w * (32 / BITS) + k] = (float)((word >> (k * BITS)) & ((1u << BITS) - 1)); \
  }
NV_KERNEL_CLONES
static void group_codes(const uint32_t *row, int64_t e0, int gs, int bits, int64_t words,
                        float *q) {
  const uint32_t *wp = row + (32 % bits == 0 ? e0 / (32 / bits) : 0);
  switch (bits) {
    case 1: CODES(1) break;
    case 2: CODES(2) break;
    case 4: CODES(4) break;
    case 8: CODES(8) break;
    default:
      for (int i = 0; i < gs; i++) q[i] = (float)nv__qextract(row, e0 + i, bits, words);
  }
}

/* Affine, transposed (the decode shape): one output column per work item, no tile. Per group,
 * s * q + b summed against x is s * dot(x, q) + b * sum(x), with x's group sums computed once
 * per call; the codes are unpacked once per group for every row of x. */
static void range_ta(void *ctx, int64_t lo, int64_t hi) {
  const qmm_job *j = ctx;
  int gs = j->p->group_size, bits = j->p->bits;
  float *acc = malloc((size_t)j->M * sizeof(float)), q[128];
  if (!acc) {
    atomic_store(&((qmm_job *)ctx)->oom, true);
    return;
  }
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / j->N, n = t % j->N;
    const uint32_t *row;
    const void *s, *bias;
    w_row(j, b, n, &row, &s, &bias);
    for (int64_t m = 0; m < j->M; m++) acc[m] = 0;
    for (int64_t g = 0; g < j->groups; g++) {
      group_codes(row, g * gs, gs, bits, j->words, q);
      float sv = nv__q_load(j->sdt, s, g), bv = nv__q_load(j->sdt, bias, g);
      for (int64_t m = 0; m < j->M; m++) {
        float d;
        int64_t xi = x_index(j, b, m);
        dots(j->x + xi * j->K + g * gs, q, gs, 1, &d);
        acc[m] += sv * d + bv * j->xsum[xi * j->groups + g];
      }
    }
    for (int64_t m = 0; m < j->M; m++) store_out(j->out, (b * j->M + m) * j->N + n, acc[m]);
  }
  free(acc);
}

/* Not transposed: each task owns a band of NBAND output columns; it walks the K rows of w,
 * dequantizing the band of each, and adds x[m, k] times it to every row's accumulator. */
static void range_n(void *ctx, int64_t lo, int64_t hi) {
  const qmm_job *j = ctx;
  float *acc = malloc((size_t)(j->M * NBAND + NBAND) * sizeof(float));
  if (!acc) {
    atomic_store(&((qmm_job *)ctx)->oom, true);
    return;
  }
  float *band = acc + j->M * NBAND;
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / j->nblocks, n0 = (t % j->nblocks) * NBAND;
    int64_t nb = j->N - n0 < NBAND ? j->N - n0 : NBAND;
    memset(acc, 0, (size_t)(j->M * NBAND) * sizeof(float));
    for (int64_t k = 0; k < j->K; k++) {
      const uint32_t *row;
      const void *s, *bias;
      w_row(j, b, k, &row, &s, &bias);
      deq_seg(j, row, s, bias, n0, nb, band);
      for (int64_t m = 0; m < j->M; m++)
        axpy(acc + m * NBAND, j->x[x_index(j, b, m) * j->K + k], band, nb);
    }
    for (int64_t m = 0; m < j->M; m++)
      for (int64_t c = 0; c < nb; c++)
        store_out(j->out, (b * j->M + m) * j->N + n0 + c, acc[m * NBAND + c]);
  }
  free(acc);
}

/* Runs job `j` (its operand pointers, sizes and indices set) for x `xin` into `out` (allocated,
 * not empty): x converted to float32, x's group sums for the fused path, the parallel loop. */
static nv_status run_qmm(qmm_job *j, const char *op, const nv__operand *xin, nv__output *out) {
  const nv__quant_params *p = j->p;
  const nv__output *ox = xin->meta;
  atomic_init(&j->oom, false);
  if (j->K == 0) {
    for (int64_t i = 0; i < out->size; i++) store_out(out, i, 0.0f);
    return NV_OK;
  }
  float *xf = NULL;
  if (ox->dtype == NV_DTYPE_FLOAT32) {
    j->x = nv__operand_ptr(xin);
  } else {
    xf = malloc((size_t)(ox->size > 0 ? ox->size : 1) * sizeof(float));
    if (!xf) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    const void *xp = nv__operand_ptr(xin);
    for (int64_t i = 0; i < ox->size; i++) xf[i] = nv__q_load(ox->dtype, xp, i);
    j->x = xf;
  }
  float *xsum = NULL;
  bool fused = p->transpose && p->mode == NV__QMODE_AFFINE;
  if (fused) {
    int gs = p->group_size;
    int64_t xrows = ox->size / j->K; /* every row of x (gather_qmm: of all Bx batches) */
    xsum = malloc((size_t)(xrows * j->groups > 0 ? xrows * j->groups : 1) * sizeof(float));
    if (!xsum) {
      free(xf);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    for (int64_t r = 0; r < xrows; r++)
      for (int64_t g = 0; g < j->groups; g++) {
        float t = 0;
        for (int i = 0; i < gs; i++) t += j->x[r * j->K + g * gs + i];
        xsum[r * j->groups + g] = t;
      }
    j->xsum = xsum;
  }
  int cols = fused ? 1 : p->transpose ? TCOLS : NBAND;
  j->nblocks = (j->N + cols - 1) / cols;
  int64_t work = j->M * j->K * cols; /* multiply-adds per task */
  int64_t grain = work >= NV__PAR_GRAIN ? 1 : NV__PAR_GRAIN / (work > 0 ? work : 1);
  nv__parallel_for(j->B * j->nblocks, grain,
                   fused ? range_ta : p->transpose ? range_t : range_n, j);
  free(xsum);
  free(xf);
  if (atomic_load(&j->oom)) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  return NV_OK;
}

nv_status nv__k_quantized_matmul(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__quant_params *p = node->params;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  qmm_job j = {.p = p,
               .w = nv__operand_ptr(&in[1]),
               .s = nv__operand_ptr(&in[2]),
               .b = p->mode == NV__QMODE_AFFINE ? nv__operand_ptr(&in[3]) : NULL,
               .sdt = in[2].meta->dtype,
               .B = ox->shape[0],
               .M = ox->shape[1],
               .K = ox->shape[2],
               .N = out->shape[2],
               .R = ow->shape[1],
               .words = ow->shape[2],
               .groups = in[2].meta->shape[2],
               .wbatch = ow->shape[0] > 1,
               .out = out};
  return run_qmm(&j, "quantized_matmul", &in[0], out);
}

/* gather_qmm: the indices checked and wrapped (negative ones once, as take's) into a copy,
 * then quantized_matmul's job with x's and w's batch of each pair. */
nv_status nv__k_gather_qmm(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__gather_qmm_params *gp = node->params;
  const nv__quant_params *p = &gp->q;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  int ni = node->ninputs;
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  int64_t L = out->shape[0], size[2] = {ox->shape[0], ow->shape[0]};
  int64_t *idx = malloc((size_t)(2 * L) * sizeof(int64_t));
  if (!idx) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "gather_qmm: out of memory");
  for (int a = 0; a < 2; a++) {
    const int64_t *src = nv__operand_ptr(&in[ni - 2 + a]);
    for (int64_t l = 0; l < L; l++) {
      int64_t v = src[l], w = v < 0 ? v + size[a] : v;
      if (w < 0 || w >= size[a]) {
        free(idx);
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "gather_qmm: index %lld is out of range for an axis of size %lld",
                             (long long)v, (long long)size[a]);
      }
      idx[a * L + l] = w;
    }
  }
  qmm_job j = {.p = p,
               .w = nv__operand_ptr(&in[1]),
               .s = nv__operand_ptr(&in[2]),
               .b = p->mode == NV__QMODE_AFFINE ? nv__operand_ptr(&in[3]) : NULL,
               .sdt = in[2].meta->dtype,
               .B = L,
               .M = ox->shape[1],
               .K = ox->shape[2],
               .N = out->shape[2],
               .R = ow->shape[1],
               .words = ow->shape[2],
               .groups = in[2].meta->shape[2],
               .li = idx,
               .ri = idx + L,
               .out = out};
  st = run_qmm(&j, "gather_qmm", &in[0], out);
  free(idx);
  return st;
}
