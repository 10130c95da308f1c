/* The shape ops' CPU kernels: concatenate, pad (constant, edge, reflect, symmetric) and diff,
 * and the index family's registration. */
#include <complex.h>

#include "cpu/index_common.h"
#include "cpu/pool.h"
#include "nuvec/index.h"
#include "ops/index_params.h"

/* ---- concatenate ---- */

/* Each input is copied into its block of the output: the output's strides at the offset of
 * the block along the axis. */
static nv_status k_concatenate(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int axis = ((const nv__axis_params *)node->params)->axis;
  int64_t ost[NV__MAX_DIMS], off = 0;
  nv__ix_row_strides(out->shape, out->ndim, ost);
  size_t isz = nv_dtype_size(out->dtype);
  char *d = nv__output_ptr(out);
  for (int j = 0; j < node->ninputs; j++) {
    const nv__output *m = in[j].meta;
    nv__ix_copy(d + off * ost[axis] * (int64_t)isz, ost, nv__operand_ptr(&in[j]), m->strides,
                m->shape, m->ndim, isz);
    off += m->shape[axis];
  }
  return NV_OK;
}

/* ---- pad ---- */

/* The source position of output position i on an axis of n elements padded by `low`. */
static int64_t pad_source(int mode, int64_t i, int64_t low, int64_t n) {
  int64_t j = i - low;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case NV_PAD_EDGE: return j < 0 ? 0 : n - 1;
    case NV_PAD_REFLECT: {
      if (n == 1) return 0;
      int64_t period = 2 * (n - 1), r = ((j % period) + period) % period;
      return r < n ? r : period - r;
    }
    default: { /* symmetric */
      int64_t period = 2 * n, r = ((j % period) + period) % period;
      return r < n ? r : period - 1 - r;
    }
  }
}

typedef struct pad_job {
  const nv__pad_params *p;
  const nv__output *am;
  const char *a;
  char *out;
  const nv__output *om;
  size_t isz;
  const int64_t *last; /* source element offsets along the last axis */
} pad_job;

/* Rows of the output (every axis but the last) for the non-constant modes: each output row is
 * a source row read through the last axis' position table. */
static void pad_rows(void *ctx, int64_t b, int64_t e) {
  const pad_job *j = ctx;
  int nd = j->om->ndim;
  int64_t cols = j->om->shape[nd - 1];
  for (int64_t r = b; r < e; r++) {
    int64_t rem = r, off = 0;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t c = rem % j->om->shape[d];
      rem /= j->om->shape[d];
      off += pad_source(j->p->mode, c, j->p->width[d], j->am->shape[d]) * j->am->strides[d];
    }
    const char *src = j->a + off * (int64_t)j->isz;
    char *dst = j->out + r * cols * (int64_t)j->isz;
    switch (j->isz) {
      case 1:
        for (int64_t c = 0; c < cols; c++) dst[c] = src[j->last[c]];
        break;
      case 2:
        for (int64_t c = 0; c < cols; c++)
          ((uint16_t *)dst)[c] = ((const uint16_t *)src)[j->last[c]];
        break;
      case 4:
        for (int64_t c = 0; c < cols; c++)
          ((uint32_t *)dst)[c] = ((const uint32_t *)src)[j->last[c]];
        break;
      default:
        for (int64_t c = 0; c < cols; c++)
          ((uint64_t *)dst)[c] = ((const uint64_t *)src)[j->last[c]];
        break;
    }
  }
}

/* Fills n elements of `isz` bytes with the value at v by doubling copies. */
static void fill_value(char *d, const char *v, int64_t n, size_t isz) {
  if (n == 0) return;
  memcpy(d, v, isz);
  size_t done = isz, total = (size_t)n * isz;
  while (done < total) {
    size_t c = done < total - done ? done : total - done;
    memcpy(d + done, d, c);
    done += c;
  }
}

static nv_status k_pad(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__pad_params *p = node->params;
  const nv__output *am = in[0].meta;
  size_t isz = nv_dtype_size(out->dtype);
  char *d = nv__output_ptr(out);
  int nd = out->ndim;
  if (out->size == 0) return NV_OK;
  if (p->mode == NV_PAD_CONSTANT || nd == 0 || am->size == 0) {
    int64_t ost[NV__MAX_DIMS], off = 0;
    nv__ix_row_strides(out->shape, nd, ost);
    fill_value(d, nv__operand_ptr(&in[1]), out->size, isz);
    for (int i = 0; i < nd; i++) off += (int64_t)p->width[i] * ost[i];
    nv__ix_copy(d + off * (int64_t)isz, ost, nv__operand_ptr(&in[0]), am->strides, am->shape,
                nd, isz);
    return NV_OK;
  }
  int64_t cols = out->shape[nd - 1];
  int64_t *last = nv__malloc((size_t)cols * sizeof *last);
  if (!last) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "pad: out of memory");
  for (int64_t c = 0; c < cols; c++)
    last[c] = pad_source(p->mode, c, p->width[nd - 1], am->shape[nd - 1]) * am->strides[nd - 1];
  pad_job j = {p, am, nv__operand_ptr(&in[0]), d, out, isz, last};
  int64_t grain = NV__PAR_GRAIN / (cols > 0 ? cols : 1);
  nv__parallel_for(out->size / cols, grain > 0 ? grain : 1, pad_rows, &j);
  nv__free(last);
  return NV_OK;
}

/* ---- diff ---- */

typedef float _Complex cf;

#define SUB_FN(NAME, T, EXPR)                                                   \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {  \
    (void)extra;                                                                \
    T *o = (T *)p[0];                                                           \
    const T *a = (const T *)p[1], *b = (const T *)p[2];                         \
    for (int64_t i = 0; i < n; i++) {                                           \
      T x = a[i * s[1]], y = b[i * s[2]];                                       \
      o[i] = (EXPR);                                                            \
    }                                                                           \
  }

#define SUB_HALF(NAME, LOAD, STORE)                                             \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {  \
    (void)extra;                                                                \
    uint16_t *o = (uint16_t *)p[0];                                             \
    const uint16_t *a = (const uint16_t *)p[1], *b = (const uint16_t *)p[2];    \
    for (int64_t i = 0; i < n; i++) o[i] = STORE(LOAD(a[i * s[1]]) - LOAD(b[i * s[2]])); \
  }

SUB_FN(sub_b, uint8_t, (uint8_t)(x != y))
SUB_FN(sub_u8, uint8_t, (uint8_t)((unsigned)x - (unsigned)y))
SUB_FN(sub_u16, uint16_t, (uint16_t)((unsigned)x - (unsigned)y))
SUB_FN(sub_u32, uint32_t, x - y)
SUB_FN(sub_u64, uint64_t, x - y)
SUB_FN(sub_i8, int8_t, (int8_t)((unsigned)x - (unsigned)y))
SUB_FN(sub_i16, int16_t, (int16_t)((unsigned)x - (unsigned)y))
SUB_FN(sub_i32, int32_t, (int32_t)((uint32_t)x - (uint32_t)y))
SUB_FN(sub_i64, int64_t, (int64_t)((uint64_t)x - (uint64_t)y))
SUB_HALF(sub_f16, nv__f16_to_f32, nv__f32_to_f16)
SUB_HALF(sub_bf16, nv__bf16_to_f32, nv__f32_to_bf16)
SUB_FN(sub_f32, float, x - y)
SUB_FN(sub_f64, double, x - y)
SUB_FN(sub_c64, cf, x - y)

static const nv__run_fn sub_table[NV_DTYPE_COUNT] = {
    sub_b,   sub_u8,   sub_u16,  sub_u32, sub_u64, sub_i8,  sub_i16,
    sub_i32, sub_i64,  sub_f16,  sub_bf16, sub_f32, sub_f64, sub_c64};

/* out[..., i, ...] = a[..., i+1, ...] - a[..., i, ...]: the element-wise driver over two views
 * of the input, one shifted by a step along the axis. */
static nv_status k_diff(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int axis = ((const nv__axis_params *)node->params)->axis;
  nv__output view = *in[0].meta;
  view.shape = out->shape;
  view.size = out->size;
  nv__operand ops[2] = {{&view, in[0].buf, in[0].offset + in[0].meta->strides[axis]},
                        {&view, in[0].buf, in[0].offset}};
  nv__cpu_map(out, ops, 2, sub_table[out->dtype], NULL);
  return NV_OK;
}

void nv__cpu_register_index(nv__kernel_fn *k) {
  k[NV__PRIM_TAKE] = nv__k_take;
  k[NV__PRIM_GATHER] = nv__k_gather;
  k[NV__PRIM_GATHER_AXIS] = nv__k_gather_axis;
  k[NV__PRIM_SCATTER] = nv__k_scatter;
  k[NV__PRIM_SCATTER_ADD] = nv__k_scatter;
  k[NV__PRIM_SCATTER_PROD] = nv__k_scatter;
  k[NV__PRIM_SCATTER_MAX] = nv__k_scatter;
  k[NV__PRIM_SCATTER_MIN] = nv__k_scatter;
  k[NV__PRIM_SCATTER_AXIS] = nv__k_scatter_axis;
  k[NV__PRIM_MASKED_SCATTER] = nv__k_masked_scatter;
  k[NV__PRIM_DYNAMIC_SLICE] = nv__k_dynamic_slice;
  k[NV__PRIM_DYNAMIC_SLICE_UPDATE] = nv__k_dynamic_slice_update;
  k[NV__PRIM_SLICE_UPDATE_ADD] = nv__k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_PROD] = nv__k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_MAX] = nv__k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_MIN] = nv__k_slice_update_reduce;
  k[NV__PRIM_DIAGONAL] = nv__k_view;
  k[NV__PRIM_DIAG] = nv__k_diag;
  k[NV__PRIM_CONCATENATE] = k_concatenate;
  k[NV__PRIM_PAD] = k_pad;
  k[NV__PRIM_DIFF] = k_diff;
}
