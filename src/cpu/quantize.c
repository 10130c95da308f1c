/* The quantize family on the CPU: quantize and dequantize, one group at a time, pool-parallel
 * over groups (the per-group arithmetic is src/ops/quantize_codec.h, shared with the CUDA
 * kernels); quantized_matmul is in quantize_matmul.c. */
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "cpu/quantize_kernels.h"
#include "ops/quantize_codec.h"
#include "ops/quantize_params.h"

/* Largest group (affine 128). */
#define QMAX_GROUP 128

float nv__q_load(nv_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(((const uint16_t *)p)[i]);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(((const uint16_t *)p)[i]);
    case NV_DTYPE_FLOAT64: return (float)((const double *)p)[i];
    default: return ((const float *)p)[i];
  }
}

/* Stores float `v` as dtype `dt` (rounded to nearest even). */
static void store(nv_dtype dt, void *p, int64_t i, float v) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: ((uint16_t *)p)[i] = nv__f32_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = nv__f32_to_bf16(v); break;
    case NV_DTYPE_FLOAT64: ((double *)p)[i] = v; break;
    default: ((float *)p)[i] = v; break;
  }
}

/* `v` rounded to dtype `dt` and back. */
static float round_to(nv_dtype dt, float v) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(nv__f32_to_f16(v));
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(nv__f32_to_bf16(v));
    default: return v;
  }
}

float nv__q_scale_value(int mode, uint8_t code) {
  if (mode == NV__QMODE_NVFP4) return nv__fp8_to_f32(code);
  return code == 255 ? NAN : ldexpf(1.0f, (int)code - 127);
}

/* ---- quantize ---- */

typedef struct quant_job {
  const nv__quant_params *p;
  nv_dtype dt;
  const void *w;
  uint32_t *packed;
  void *scales, *biases;
} quant_job;

/* Packs the `n` codes of one group (bits each) into its words, low bits first. */
static void pack_group(const uint32_t *codes, int n, int bits, uint32_t *out) {
  uint64_t acc = 0;
  int have = 0, k = 0;
  for (int j = 0; j < n; j++) {
    acc |= (uint64_t)codes[j] << have;
    have += bits;
    if (have >= 32) {
      out[k++] = (uint32_t)acc;
      acc >>= 32;
      have -= 32;
    }
  }
}

static void quant_range(void *ctx, int64_t lo, int64_t hi) {
  const quant_job *j = ctx;
  const nv__quant_params *p = j->p;
  int gs = p->group_size, bits = p->bits;
  int64_t words = (int64_t)gs * bits / 32;
  float v[QMAX_GROUP];
  uint32_t codes[QMAX_GROUP];
  for (int64_t g = lo; g < hi; g++) {
    nv__convert_run(j->dt, (const char *)j->w + g * gs * (int64_t)nv_dtype_size(j->dt), 1,
                    NV_DTYPE_FLOAT32, (char *)v, 1, gs);
    if (p->mode == NV__QMODE_AFFINE) {
      float wmin = INFINITY, wmax = -INFINITY, s, b;
      for (int i = 0; i < gs; i++) {
        wmax = nv__qmax(wmax, v[i]);
        wmin = nv__qmin(wmin, v[i]);
      }
      nv__qaffine_params(wmin, wmax, bits, &s, &b);
      for (int i = 0; i < gs; i++) codes[i] = nv__qaffine_code(v[i], s, b, bits);
      store(j->dt, j->scales, g, s);
      store(j->dt, j->biases, g, b);
    } else {
      float amax = 0, sv;
      for (int i = 0; i < gs; i++) amax = nv__qmax(amax, fabsf(v[i]));
      uint8_t sc;
      if (p->mode == NV__QMODE_NVFP4) {
        sc = nv__f32_to_fp8(amax / 6.0f);
        sv = nv__fp8_to_f32(sc);
      } else {
        sc = nv__qmx_scale(round_to(j->dt, amax / (p->mode == NV__QMODE_MXFP8 ? 448.0f : 6.0f)),
                           &sv);
      }
      ((uint8_t *)j->scales)[g] = sc;
      for (int i = 0; i < gs; i++) {
        float q = sv == 0 ? 0.0f : v[i] / sv;
        codes[i] = p->mode == NV__QMODE_MXFP8 ? nv__f32_to_fp8(q) : nv__qfp4_code(q);
      }
    }
    pack_group(codes, gs, bits, j->packed + g * words);
  }
}

static nv_status k_quantize(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__quant_params *p = node->params;
  int nout = p->mode == NV__QMODE_AFFINE ? 3 : 2;
  nv_status st = NV_OK;
  for (int i = 0; i < nout && st == NV_OK; i++) st = nv__output_alloc(&node->out[i]);
  if (st != NV_OK || node->out[1].size == 0) return st;
  quant_job j = {.p = p,
                 .dt = in[0].meta->dtype,
                 .w = nv__operand_ptr(&in[0]),
                 .packed = nv__output_ptr(&node->out[0]),
                 .scales = nv__output_ptr(&node->out[1]),
                 .biases = nout == 3 ? nv__output_ptr(&node->out[2]) : NULL};
  nv__parallel_for(node->out[1].size, NV__PAR_GRAIN / p->group_size, quant_range, &j);
  return NV_OK;
}

/* ---- dequantize ---- */

typedef struct dequant_job {
  const nv__quant_params *p;
  const uint32_t *w;
  const void *scales, *biases;
  nv_dtype sdt; /* the scales' dtype (affine) */
  nv_dtype dt;  /* the output's */
  void *out;
} dequant_job;

static void dequant_range(void *ctx, int64_t lo, int64_t hi) {
  const dequant_job *j = ctx;
  const nv__quant_params *p = j->p;
  int gs = p->group_size, bits = p->bits;
  int64_t words = (int64_t)gs * bits / 32;
  for (int64_t g = lo; g < hi; g++) {
    const uint32_t *row = j->w + g * words;
    if (p->mode == NV__QMODE_AFFINE && j->sdt == NV_DTYPE_FLOAT64) {
      double s = ((const double *)j->scales)[g], b = ((const double *)j->biases)[g];
      for (int i = 0; i < gs; i++)
        ((double *)j->out)[g * gs + i] = s * (double)nv__qextract(row, i, bits, words) + b;
    } else if (p->mode == NV__QMODE_AFFINE) {
      float s = nv__q_load(j->sdt, j->scales, g), b = nv__q_load(j->sdt, j->biases, g);
      for (int i = 0; i < gs; i++) {
        float q = (float)nv__qextract(row, i, bits, words);
        /* In the scales' dtype: float16 and bfloat16 round the product and the sum. */
        float v = round_to(j->dt, round_to(j->dt, s * q) + b);
        store(j->dt, j->out, g * gs + i, v);
      }
    } else {
      uint8_t sc = ((const uint8_t *)j->scales)[g];
      float sv = nv__q_scale_value(p->mode, sc);
      if (j->dt == NV_DTYPE_FLOAT64) {
        for (int i = 0; i < gs; i++) {
          uint32_t c = nv__qextract(row, i, bits, words);
          float e = p->mode == NV__QMODE_MXFP8 ? nv__fp8_to_f32((uint8_t)c) : nv__qfp4_value(c);
          ((double *)j->out)[g * gs + i] = (double)sv * (double)e;
        }
        continue;
      }
      float st = round_to(j->dt, sv);
      for (int i = 0; i < gs; i++) {
        uint32_t c = nv__qextract(row, i, bits, words);
        float e = p->mode == NV__QMODE_MXFP8 ? nv__fp8_to_f32((uint8_t)c) : nv__qfp4_value(c);
        store(j->dt, j->out, g * gs + i, st * e);
      }
    }
  }
}

static nv_status k_dequantize(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__quant_params *p = node->params;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  dequant_job j = {.p = p,
                   .w = nv__operand_ptr(&in[0]),
                   .scales = nv__operand_ptr(&in[1]),
                   .biases = p->mode == NV__QMODE_AFFINE ? nv__operand_ptr(&in[2]) : NULL,
                   .sdt = in[1].meta->dtype,
                   .dt = out->dtype,
                   .out = nv__output_ptr(out)};
  nv__parallel_for(in[1].meta->size, NV__PAR_GRAIN / p->group_size, dequant_range, &j);
  return NV_OK;
}

void nv__cpu_register_quantize(nv__kernel_fn *k) {
  k[NV__PRIM_QUANTIZE] = k_quantize;
  k[NV__PRIM_DEQUANTIZE] = k_dequantize;
  k[NV__PRIM_QUANTIZED_MATMUL] = nv__k_quantized_matmul;
  k[NV__PRIM_GATHER_QMM] = nv__k_gather_qmm;
}
