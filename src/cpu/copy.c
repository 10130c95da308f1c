/* Copies, conversions, views, creation and slice_update on the CPU. */
#include "cpu/kernels.h"
#include "cpu/pool.h"

typedef struct conv {
  nv_dtype from, to;
} conv;

static void convert_fn(char **p, const int64_t *s, int64_t n, const void *extra) {
  const conv *c = extra;
  nv__convert_run(c->from, p[1], s[1], c->to, p[0], s[0], n);
}

nv_status nv__k_astype(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  conv c = {in[0].meta->dtype, out->dtype};
  nv__cpu_map(out, in, 1, convert_fn, &c);
  return NV_OK;
}

/* A copy in the same dtype: memcpy of runs. */
static void copy_fn(char **p, const int64_t *s, int64_t n, const void *extra) {
  size_t isz = *(const size_t *)extra;
  if (s[1] == 1) {
    memcpy(p[0], p[1], (size_t)n * isz);
    return;
  }
  switch (isz) {
    case 1:
      for (int64_t i = 0; i < n; i++) p[0][i] = p[1][i * s[1]];
      break;
    case 2:
      for (int64_t i = 0; i < n; i++) ((uint16_t *)p[0])[i] = ((const uint16_t *)p[1])[i * s[1]];
      break;
    case 4:
      for (int64_t i = 0; i < n; i++) ((uint32_t *)p[0])[i] = ((const uint32_t *)p[1])[i * s[1]];
      break;
    default:
      for (int64_t i = 0; i < n; i++) ((uint64_t *)p[0])[i] = ((const uint64_t *)p[1])[i * s[1]];
      break;
  }
}

/* Copies operand `src` (any layout) into the row-contiguous `out`, read with src's own shape
 * (the sizes match; a reshape copy reads it row-major and reinterprets). */
static void copy_into(nv__output *out, const nv__operand *src) {
  size_t isz = nv_dtype_size(out->dtype);
  if (src->meta->flags & NV__FLAG_ROW) {
    memcpy(nv__output_ptr(out), nv__operand_ptr(src), (size_t)out->size * isz);
    return;
  }
  /* Iterate in the source's shape: the output is row-major over the same element order. */
  nv__output tmp = *out;
  tmp.shape = src->meta->shape;
  tmp.ndim = src->meta->ndim;
  int64_t st[NV__MAX_DIMS], acc = 1;
  for (int i = tmp.ndim - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= tmp.shape[i];
  }
  tmp.strides = st;
  nv__cpu_map(&tmp, src, 1, copy_fn, &isz);
}

nv_status nv__k_copy(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  copy_into(out, &in[0]);
  return NV_OK;
}

nv_status nv__k_view(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__view_params *p = node->params;
  if (p && p->copy) {
    if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    copy_into(out, &in[0]);
    return NV_OK;
  }
  out->buf = nv__buffer_retain(in[0].buf);
  out->offset = in[0].offset + (p ? p->delta : 0);
  return NV_OK;
}

nv_status nv__k_full(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  size_t isz = nv_dtype_size(out->dtype);
  if (in[0].meta->size == 1 && out->size > 0) {
    /* A single value: fill by doubling copies. */
    char *d = nv__output_ptr(out);
    memcpy(d, nv__operand_ptr(&in[0]), isz);
    size_t done = isz, total = (size_t)out->size * isz;
    while (done < total) {
      size_t n = done < total - done ? done : total - done;
      memcpy(d + done, d, n);
      done += n;
    }
    return NV_OK;
  }
  nv__cpu_map(out, in, 1, copy_fn, &isz);
  return NV_OK;
}

typedef struct arange_job {
  const nv__arange_params *p;
  nv__output *out;
} arange_job;

static void arange_range(void *ctx, int64_t b, int64_t e) {
  const arange_job *j = ctx;
  nv_dtype dt = j->out->dtype;
  size_t isz = nv_dtype_size(dt);
  char *d = (char *)nv__output_ptr(j->out);
  double vals[256];
  for (int64_t i = b; i < e; i += 256) {
    int64_t m = e - i < 256 ? e - i : 256;
    for (int64_t k = 0; k < m; k++) vals[k] = j->p->start + (double)(i + k) * j->p->step;
    nv__convert_run(NV_DTYPE_FLOAT64, (const char *)vals, 1, dt, d + i * (int64_t)isz, 1, m);
  }
}

nv_status nv__k_arange(nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  arange_job j = {node->params, out};
  nv__parallel_for(out->size, NV__PAR_GRAIN, arange_range, &j);
  return NV_OK;
}

nv_status nv__k_eye(nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (out->size == 0) return NV_OK;
  size_t isz = nv_dtype_size(out->dtype);
  char *d = nv__output_ptr(out);
  memset(d, 0, (size_t)out->size * isz);
  int rows = out->shape[0], cols = out->shape[1], k = ((const nv__eye_params *)node->params)->k;
  double one = 1.0;
  char v[16];
  nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&one, 1, out->dtype, v, 1, 1);
  for (int r = 0; r < rows; r++) {
    int64_t c = (int64_t)r + k;
    if (c >= 0 && c < cols) memcpy(d + ((int64_t)r * cols + c) * (int64_t)isz, v, isz);
  }
  return NV_OK;
}

static void to_fp8_fn(char **p, const int64_t *s, int64_t n, const void *extra) {
  nv_dtype from = *(const nv_dtype *)extra;
  float tmp[256];
  for (int64_t b = 0; b < n; b += 256) {
    int64_t m = n - b < 256 ? n - b : 256;
    nv__convert_run(from, p[1] + b * s[1] * (int64_t)nv_dtype_size(from), s[1],
                    NV_DTYPE_FLOAT32, (char *)tmp, 1, m);
    uint8_t *o = (uint8_t *)p[0] + b;
    for (int64_t k = 0; k < m; k++) o[k] = nv__f32_to_fp8(tmp[k]);
  }
}

nv_status nv__k_to_fp8(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv_dtype from = in[0].meta->dtype;
  nv__cpu_map(out, in, 1, to_fp8_fn, &from);
  return NV_OK;
}

static void from_fp8_fn(char **p, const int64_t *s, int64_t n, const void *extra) {
  nv_dtype to = *(const nv_dtype *)extra;
  float tmp[256];
  for (int64_t b = 0; b < n; b += 256) {
    int64_t m = n - b < 256 ? n - b : 256;
    const uint8_t *a = (const uint8_t *)p[1] + b * s[1];
    for (int64_t k = 0; k < m; k++) tmp[k] = nv__fp8_to_f32(a[k * s[1]]);
    nv__convert_run(NV_DTYPE_FLOAT32, (const char *)tmp, 1, to,
                    p[0] + b * (int64_t)nv_dtype_size(to), 1, m);
  }
}

nv_status nv__k_from_fp8(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv_dtype to = out->dtype;
  nv__cpu_map(out, in, 1, from_fp8_fn, &to);
  return NV_OK;
}

/* slice_update: the output is the base (donated: written in place; else copied first) with
 * the region overwritten by the update broadcast to it. */
nv_status nv__k_slice_update(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0) {
    if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    copy_into(out, &in[0]);
  }
  const nv__slice_update_params *p = node->params;
  int n = p->ndim;
  /* The region as a strided view of the output. */
  nv__output region = *out;
  int shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS], off = 0;
  bool empty = false;
  for (int i = 0; i < n; i++) {
    shape[i] = p->data[2 * n + i];
    st[i] = out->strides[i] * p->data[n + i];
    off += (int64_t)p->data[i] * out->strides[i];
    empty |= shape[i] == 0;
  }
  if (empty) return NV_OK;
  region.shape = shape;
  region.strides = st;
  region.offset = out->offset + off;
  region.size = 1;
  for (int i = 0; i < n; i++) region.size *= shape[i];
  size_t isz = nv_dtype_size(out->dtype);
  /* Write through the driver with the region as "output": runs may be strided. */
  int64_t bst[NV__MAX_DIMS];
  nv__broadcast_strides(in[1].meta, shape, n, bst);
  const char *src = nv__operand_ptr(&in[1]);
  char *dst = nv__output_ptr(&region);
  /* Walk the region element-wise (the update is usually small relative to the base). */
  int64_t idx[NV__MAX_DIMS] = {0};
  for (int64_t e = 0; e < region.size; e++) {
    int64_t so = 0, dof = 0;
    for (int i = 0; i < n; i++) {
      so += idx[i] * bst[i];
      dof += idx[i] * st[i];
    }
    memcpy(dst + dof * (int64_t)isz, src + so * (int64_t)isz, isz);
    for (int i = n - 1; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return NV_OK;
}
