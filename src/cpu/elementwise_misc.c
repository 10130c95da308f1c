/* The elementwise family's views (real, imag, view, stop_gradient, depends), creation (tri,
 * windows), number_of_elements, and the family's kernel registration. */
#include <math.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/elementwise_params.h"

nv_status nv__k_ew_unary(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_ew_binary(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_divmod(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_where(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_isclose(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_all_close(nv__node *node, const nv__operand *in, int donated);

/* ---- Views ---- */

/* Output i shares input i's buffer at the same element offset (stop_gradient, depends). */
static nv_status k_share(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  for (int i = 0; i < node->noutputs; i++) {
    node->out[i].buf = nv__buffer_retain(in[i].buf);
    node->out[i].offset = in[i].offset;
  }
  return NV_OK;
}

/* real / imag: float32 views of a complex64 buffer (strides were doubled by the builder). */
static nv_status k_complex_part(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  out->buf = nv__buffer_retain(in[0].buf);
  out->offset = in[0].offset * 2 + (node->prim == NV__PRIM_IMAG);
  return NV_OK;
}

/* view: the input's bytes read as the output dtype. A copy when the builder found the layout
 * unfit; a shared buffer when the element offset is whole in the new dtype; otherwise a copy of
 * the bytes the input spans, which keeps its layout at an offset that is whole. */
static nv_status k_view_dtype(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *im = in[0].meta;
  int64_t ib = (int64_t)nv_dtype_size(im->dtype), ob = (int64_t)nv_dtype_size(out->dtype);
  if (((const nv__view_dtype_params *)node->params)->copy) {
    if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    if (out->size)
      nv__copy_strided(nv__output_ptr(out), nv__operand_ptr(&in[0]), im->shape, im->strides,
                       im->ndim, (size_t)ib);
    return NV_OK;
  }
  if (im->size == 0 || (in[0].offset * ib) % ob == 0) {
    out->buf = nv__buffer_retain(in[0].buf);
    out->offset = im->size == 0 ? 0 : in[0].offset * ib / ob;
    return NV_OK;
  }
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < im->ndim; i++) {
    int64_t ext = (int64_t)(im->shape[i] - 1) * im->strides[i];
    if (ext < 0) lo += ext;
    else hi += ext;
  }
  size_t nbytes = (size_t)(hi - lo + 1) * (size_t)ib;
  nv__buffer *b = nv__buffer_alloc(nbytes);
  if (!b) return NV_ERR_OUT_OF_MEMORY;
  memcpy(b->ptr, (const char *)in[0].buf->ptr + (in[0].offset + lo) * ib, nbytes);
  out->buf = b;
  out->offset = -lo * ib / ob;
  return NV_OK;
}

/* ---- number_of_elements ---- */

void nv__count_value(const nv__node *node, const nv__operand *in, void *dst) {
  const nv__output *out = &node->out[0];
  const nv__count_params *p = node->params;
  const nv__output *im = in[0].meta;
  bool listed[NV__MAX_DIMS] = {false};
  for (int i = 0; i < p->naxes; i++) listed[p->axes[i]] = true;
  uint64_t count = 1;
  double dcount = 1;
  bool exact = true;
  for (int i = 0; i < im->ndim; i++) {
    if (listed[i] == p->inverted) continue;
    uint64_t d = (uint64_t)im->shape[i];
    exact = exact && (d == 0 || count <= UINT64_MAX / d);
    count *= d;
    dcount *= (double)d;
  }
  if (exact && count <= (uint64_t)INT64_MAX) {
    int64_t v = (int64_t)count;
    nv__convert_run(NV_DTYPE_INT64, (const char *)&v, 1, out->dtype, dst, 1, 1);
  } else {
    nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&dcount, 1, out->dtype, dst, 1, 1);
  }
}

static nv_status k_count(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__count_value(node, in, nv__output_ptr(out));
  return NV_OK;
}

/* ---- Creation ---- */

/* tri: row r holds ones in columns 0 .. r + k. */
static nv_status k_tri(nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  size_t isz = nv_dtype_size(out->dtype);
  char *d = nv__output_ptr(out);
  memset(d, 0, (size_t)out->size * isz);
  int rows = out->shape[0], cols = out->shape[1], k = ((const nv__tri_params *)node->params)->k;
  double one = 1.0;
  char v[16];
  nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&one, 1, out->dtype, v, 1, 1);
  for (int r = 0; r < rows; r++) {
    int64_t end = (int64_t)r + k + 1;
    if (end > cols) end = cols;
    char *row = d + (int64_t)r * cols * (int64_t)isz;
    for (int64_t c = 0; c < end; c++) memcpy(row + c * (int64_t)isz, v, isz);
  }
  return NV_OK;
}

/* NumPy's windows over n = 1 - m, 3 - m, ..., m - 1, in double, rounded once to float32. */
static double window_value(int prim, int64_t i, int m) {
  if (m == 1) return 1.0;
  double n = (double)(1 - (int64_t)m + 2 * i), t = 3.14159265358979323846 * n / (m - 1);
  switch (prim) {
    case NV__PRIM_HANNING: return 0.5 + 0.5 * cos(t);
    case NV__PRIM_HAMMING: return 0.54 + 0.46 * cos(t);
    case NV__PRIM_BARTLETT: return n <= 0 ? 1 + n / (m - 1) : 1 - n / (m - 1);
    default: return 0.42 + 0.5 * cos(t) + 0.08 * cos(2 * t);
  }
}

static nv_status k_window(nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  float *d = nv__output_ptr(out);
  int m = out->shape[0];
  for (int64_t i = 0; i < m; i++) d[i] = (float)window_value(node->prim, i, m);
  return NV_OK;
}

/* ---- Registration ---- */

void nv__cpu_register_elementwise(nv__kernel_fn *k) {
  for (int p = NV__PRIM_SIGN; p <= NV__PRIM_BITWISE_INVERT; p++) k[p] = nv__k_ew_unary;
  for (int p = NV__PRIM_FLOOR_DIVIDE; p <= NV__PRIM_RIGHT_SHIFT; p++) k[p] = nv__k_ew_binary;
  k[NV__PRIM_ISCLOSE] = nv__k_isclose;
  k[NV__PRIM_WHERE] = nv__k_where;
  k[NV__PRIM_DIVMOD] = nv__k_divmod;
  k[NV__PRIM_ALLCLOSE] = nv__k_all_close;
  k[NV__PRIM_ARRAY_EQUAL] = nv__k_all_close;
  k[NV__PRIM_REAL] = k_complex_part;
  k[NV__PRIM_IMAG] = k_complex_part;
  k[NV__PRIM_VIEW_DTYPE] = k_view_dtype;
  k[NV__PRIM_STOP_GRADIENT] = k_share;
  k[NV__PRIM_DEPENDS] = k_share;
  k[NV__PRIM_NUMBER_OF_ELEMENTS] = k_count;
  k[NV__PRIM_TRI] = k_tri;
  k[NV__PRIM_HANNING] = k_window;
  k[NV__PRIM_HAMMING] = k_window;
  k[NV__PRIM_BARTLETT] = k_window;
  k[NV__PRIM_BLACKMAN] = k_window;
}
