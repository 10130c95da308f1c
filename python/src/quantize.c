/* nuvec's CPython extension: the quantization functions of mlx.core (quantize, dequantize,
 * quantized_matmul, qqmm, gather_mm, gather_qmm, segmented_mm, block_masked_mm), an op table
 * added to the top-level module. */
#include "optable.h"

/* group_size and bits: None (or absent) is 0, the mode's default in the C API. */
static int qargs(call *c, int gi, int bi, int mi, int *gs, int *bits, const char **mode) {
  if (int_at(c, gi, 0, gs) < 0 || int_at(c, bi, 0, bits) < 0) return -1;
  *mode = str_at(c, mi, "affine");
  return *mode ? 0 : -1;
}

/* nvfp4's optional global scale is not implemented in gather_qmm: refuse it rather than
 * ignore it. */
static int no_global_scale(call *c, int i) {
  if (!given(c, i)) return 0;
  PyErr_Format(PyExc_NotImplementedError, "%s: global_scale is not supported", c->op->name);
  return -1;
}

/* An optional array argument: *out stays NULL when absent or None; -1 on a bad value. */
static int opt_arr(call *c, int i, nv_array **out) {
  *out = NULL;
  if (!given(c, i)) return 0;
  return (*out = arr(c, i)) ? 0 : -1;
}

static PyObject *sig_quantize(call *c) {
  nv_array *w = arr(c, 0), *g;
  int gs, bits;
  const char *mode;
  if (!w || qargs(c, 1, 2, 3, &gs, &bits, &mode) < 0 || opt_arr(c, 4, &g) < 0) return NULL;
  nv_vec *v = nv_vec_new();
  if (!v) return PyErr_NoMemory();
  nv_status st = nv_quantize_scaled(w, gs, bits, mode, g, v);
  PyObject *r = st == NV_OK ? nvpy_tuple_from_vec(v) : nvpy_raise_last(st);
  nv_vec_free(v);
  return r;
}

static PyObject *sig_dequantize(call *c) {
  nv_array *w = arr(c, 0), *s = w ? arr(c, 1) : NULL, *b = NULL, *g;
  int gs, bits;
  const char *mode;
  if (!s || (given(c, 2) && !(b = arr(c, 2))) || qargs(c, 3, 4, 5, &gs, &bits, &mode) < 0 ||
      opt_arr(c, 6, &g) < 0)
    return NULL;
  int dt = dtype_at(c, 7, NV_DTYPE_COUNT);
  if (dt < 0) return NULL;
  return nvpy_wrap(nv_dequantize_scaled(w, s, b, gs, bits, mode, g, (nv_dtype)dt));
}

static PyObject *sig_quantized_matmul(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL, *s = w ? arr(c, 2) : NULL, *b = NULL;
  bool transpose;
  int gs, bits;
  const char *mode;
  if (!s || (given(c, 3) && !(b = arr(c, 3))) || bool_at(c, 4, true, &transpose) < 0 ||
      qargs(c, 5, 6, 7, &gs, &bits, &mode) < 0)
    return NULL;
  return nvpy_wrap(nv_quantized_matmul(x, w, s, b, transpose, gs, bits, mode));
}

static PyObject *sig_qqmm(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL, *s, *gx, *gw;
  int gs, bits;
  if (!w || opt_arr(c, 2, &s) < 0 || int_at(c, 3, 0, &gs) < 0 || int_at(c, 4, 0, &bits) < 0)
    return NULL;
  const char *mode = str_at(c, 5, "nvfp4");
  if (!mode || opt_arr(c, 6, &gx) < 0 || opt_arr(c, 7, &gw) < 0) return NULL;
  return nvpy_wrap(nv_qqmm(x, w, s, gs, bits, mode, gx, gw));
}

static PyObject *sig_gather_mm(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL, *li = NULL, *ri = NULL;
  bool sorted;
  if (!b || (given(c, 2) && !(li = arr(c, 2))) || (given(c, 3) && !(ri = arr(c, 3))) ||
      bool_at(c, 4, false, &sorted) < 0)
    return NULL;
  return nvpy_wrap(nv_gather_mm(a, b, li, ri, sorted));
}

static PyObject *sig_gather_qmm(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL, *s = w ? arr(c, 2) : NULL;
  nv_array *b = NULL, *li = NULL, *ri = NULL;
  bool transpose, sorted;
  int gs, bits;
  const char *mode;
  if (!s || (given(c, 3) && !(b = arr(c, 3))) || (given(c, 4) && !(li = arr(c, 4))) ||
      (given(c, 5) && !(ri = arr(c, 5))) || bool_at(c, 6, true, &transpose) < 0 ||
      qargs(c, 7, 8, 9, &gs, &bits, &mode) < 0 || no_global_scale(c, 10) < 0 ||
      bool_at(c, 11, false, &sorted) < 0)
    return NULL;
  return nvpy_wrap(nv_gather_qmm(x, w, s, b, li, ri, transpose, gs, bits, mode, sorted));
}

static PyObject *sig_segmented_mm(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL, *seg = b ? arr(c, 2) : NULL;
  return seg ? nvpy_wrap(nv_segmented_mm(a, b, seg)) : NULL;
}

static PyObject *sig_block_masked_mm(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL, *mo = NULL, *ml = NULL, *mr = NULL;
  int bs;
  if (!b || int_at(c, 2, 64, &bs) < 0 || (given(c, 3) && !(mo = arr(c, 3))) ||
      (given(c, 4) && !(ml = arr(c, 4))) || (given(c, 5) && !(mr = arr(c, 5))))
    return NULL;
  return nvpy_wrap(nv_block_masked_mm(a, b, bs, mo, ml, mr));
}

#define DOC(s) "mlx.core." s

static const nvpy_op quantize_ops[] = {
    {"quantize", sig_quantize, NULL, KW("w", "group_size", "bits", "mode", "global_scale"), 1,
     {0}, 0,
     DOC("quantize(w, group_size=None, bits=None, mode='affine', global_scale=None): "
         "(w_q, scales[, biases]).")},
    {"dequantize", sig_dequantize, NULL,
     KW("w", "scales", "biases", "group_size", "bits", "mode", "global_scale", "dtype"), 2, {0},
     0, DOC("dequantize(w, scales, biases=None, group_size=None, bits=None, mode='affine').")},
    {"quantized_matmul", sig_quantized_matmul, NULL,
     KW("x", "w", "scales", "biases", "transpose", "group_size", "bits", "mode"), 3, {0}, 0,
     DOC("quantized_matmul(x, w, scales, biases=None, transpose=True, group_size=None, "
         "bits=None, mode='affine'): x @ dequantize(w).T (or x @ dequantize(w)).")},
    {"qqmm", sig_qqmm, NULL,
     KW("x", "w", "scales", "group_size", "bits", "mode", "global_scale_x", "global_scale_w"),
     2, {0}, 0,
     DOC("qqmm(x, w, scales=None, group_size=None, bits=None, mode='nvfp4', "
         "global_scale_x=None, global_scale_w=None): x @ w.T with x (and an unquantized w) "
         "quantized on the fly.")},
    {"gather_mm", sig_gather_mm, NULL,
     KW("a", "b", "lhs_indices", "rhs_indices", "sorted_indices"), 2, {0}, 0,
     DOC("gather_mm(a, b, lhs_indices=None, rhs_indices=None, sorted_indices=False): "
         "a[lhs_indices] @ b[rhs_indices] over the flattened batch axes.")},
    {"gather_qmm", sig_gather_qmm, NULL,
     KW("x", "w", "scales", "biases", "lhs_indices", "rhs_indices", "transpose", "group_size",
        "bits", "mode", "global_scale", "sorted_indices"),
     3, {0}, 0,
     DOC("gather_qmm(x, w, scales, biases=None, lhs_indices=None, rhs_indices=None, "
         "transpose=True, group_size=None, bits=None, mode='affine', sorted_indices=False).")},
    {"segmented_mm", sig_segmented_mm, NULL, KW("a", "b", "segments"), 3, {0}, 0,
     DOC("segmented_mm(a, b, segments): a[:, s:e] @ b[s:e] for each (s, e) of segments.")},
    {"block_masked_mm", sig_block_masked_mm, NULL,
     KW("a", "b", "block_size", "mask_out", "mask_lhs", "mask_rhs"), 2, {0}, 0,
     DOC("block_masked_mm(a, b, block_size=64, mask_out=None, mask_lhs=None, mask_rhs=None): "
         "a @ b with block_size x block_size blocks of a, b and the result masked.")},
};

int nvpy_init_quantize(PyObject *m) {
  return nvpy_add_ops(m, quantize_ops, sizeof quantize_ops / sizeof quantize_ops[0], "");
}
