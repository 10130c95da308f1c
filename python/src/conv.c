/* The convolutions of include/nuvec/conv.h as top-level functions (mlx.core's conv_general,
 * conv1d/2d/3d, conv_transpose1d/2d/3d): their own op table, added to the module. Per-axis
 * arguments take an int (every spatial axis) or a sequence of one int per spatial axis, as
 * MLX's; conv_general's padding also takes a pair of sequences (low, high). */
#include "nvpy.h"
#include "optable.h"

#include "nuvec/conv.h"

/* `o` (an int, or a sequence of `n` ints) into v[0..n); -1 with a ValueError/TypeError naming
 * argument i. Absent or None gives `dflt` everywhere. */
static int per_axis(call *c, PyObject *o, int i, int n, int dflt, int *v) {
  char label[NVPY_LABEL];
  arg_label(c, i, label);
  if (!o || o == Py_None) {
    for (int k = 0; k < n; k++) v[k] = dflt;
    return 0;
  }
  if (PyLong_Check(o) || PyIndex_Check(o)) {
    int x;
    if (nvpy_int_arg(o, dflt, &x, label) < 0) return -1;
    for (int k = 0; k < n; k++) v[k] = x;
    return 0;
  }
  PyObject *t = nvpy_items(o, 8, label, "an int or a sequence of ints");
  if (!t) return -1;
  Py_ssize_t len = PyTuple_GET_SIZE(t);
  int rc = 0;
  if (len != n) {
    PyErr_Format(PyExc_ValueError, "%s: %d values given for %d spatial axes", label, (int)len,
                 n);
    rc = -1;
  }
  for (Py_ssize_t k = 0; rc == 0 && k < len; k++)
    rc = nvpy_int_arg(PyTuple_GET_ITEM(t, k), dflt, &v[k], label);
  Py_DECREF(t);
  return rc;
}

/* The spatial axes of the input (argument 0), for the per-axis arguments' lengths: its ndim
 * − 2 clamped to 1..3 (the C builder reports a wrong ndim with MLX's message). */
static int spatial_of(const nv_array *x) {
  int n = nv_array_ndim(x) - 2;
  return n < 1 ? 1 : n > 3 ? 3 : n;
}

/* conv_general's padding (argument 3): an int, a sequence of ints (low = high), or a pair
 * (low, high) of sequences. */
static int padding_at(call *c, int n, int *lo, int *hi) {
  PyObject *pad = c->argv[3];
  if (pad && (PyTuple_Check(pad) || PyList_Check(pad)) && PySequence_Size(pad) == 2) {
    PyObject *a = PySequence_GetItem(pad, 0), *b = a ? PySequence_GetItem(pad, 1) : NULL;
    int rc = -1;
    if (b && PySequence_Check(a) && PySequence_Check(b))
      rc = per_axis(c, a, 3, n, 0, lo) < 0 || per_axis(c, b, 3, n, 0, hi) < 0 ? -1 : 0;
    else if (b)
      rc = 1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (rc <= 0) return rc;
  }
  if (per_axis(c, pad, 3, n, 0, lo) < 0) return -1;
  memcpy(hi, lo, (size_t)n * sizeof(int));
  return 0;
}

static PyObject *sig_conv_general(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL;
  if (!w) return NULL;
  int n = spatial_of(x), stride[3], lo[3], hi[3], kd[3], id[3], groups;
  bool flip;
  if (per_axis(c, c->argv[2], 2, n, 1, stride) < 0 || padding_at(c, n, lo, hi) < 0) return NULL;
  if (per_axis(c, c->argv[4], 4, n, 1, kd) < 0 || per_axis(c, c->argv[5], 5, n, 1, id) < 0 ||
      int_at(c, 6, 1, &groups) < 0 || bool_at(c, 7, false, &flip) < 0)
    return NULL;
  return nvpy_wrap(nv_conv_general(x, w, stride, lo, hi, kd, id, groups, flip));
}

/* conv1d/2d/3d (input, weight, stride, padding, dilation, groups). */
static PyObject *sig_conv_nd(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL;
  if (!w) return NULL;
  int n = dflt(c, 0), stride[3], pad[3], dil[3], groups;
  if (per_axis(c, c->argv[2], 2, n, 1, stride) < 0 || per_axis(c, c->argv[3], 3, n, 0, pad) < 0 ||
      per_axis(c, c->argv[4], 4, n, 1, dil) < 0 || int_at(c, 5, 1, &groups) < 0)
    return NULL;
  nv_array *r = n == 1   ? nv_conv1d(x, w, stride[0], pad[0], dil[0], groups)
                : n == 2 ? nv_conv2d(x, w, stride, pad, dil, groups)
                         : nv_conv3d(x, w, stride, pad, dil, groups);
  return nvpy_wrap(r);
}

/* conv_transpose1d/2d/3d (input, weight, stride, padding, dilation, output_padding, groups). */
static PyObject *sig_conv_transpose_nd(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL;
  if (!w) return NULL;
  int n = dflt(c, 0), stride[3], pad[3], dil[3], opad[3], groups;
  if (per_axis(c, c->argv[2], 2, n, 1, stride) < 0 || per_axis(c, c->argv[3], 3, n, 0, pad) < 0 ||
      per_axis(c, c->argv[4], 4, n, 1, dil) < 0 || per_axis(c, c->argv[5], 5, n, 0, opad) < 0 ||
      int_at(c, 6, 1, &groups) < 0)
    return NULL;
  nv_array *r = n == 1   ? nv_conv_transpose1d(x, w, stride[0], pad[0], dil[0], opad[0], groups)
                : n == 2 ? nv_conv_transpose2d(x, w, stride, pad, dil, opad, groups)
                         : nv_conv_transpose3d(x, w, stride, pad, dil, opad, groups);
  return nvpy_wrap(r);
}

#define CONV_KW KW("input", "weight", "stride", "padding", "dilation", "groups")
#define CONVT_KW KW("input", "weight", "stride", "padding", "dilation", "output_padding", "groups")

static const nvpy_op conv_ops[] = {
    {"conv_general", sig_conv_general, NULL,
     KW("input", "weight", "stride", "padding", "kernel_dilation", "input_dilation", "groups",
        "flip"),
     2, {0}, 0,
     "General convolution of input [N, ..., C_in] with weight [C_out, ..., C_in / groups] "
     "(mlx.core.conv_general): strides, padding (an int, a list, or (low, high) lists), kernel "
     "and input dilation, groups, flip."},
    {"conv1d", sig_conv_nd, NULL, CONV_KW, 2, {1}, 0,
     "1D convolution of input [N, W, C_in] with weight [C_out, K, C_in / groups]."},
    {"conv2d", sig_conv_nd, NULL, CONV_KW, 2, {2}, 0,
     "2D convolution of input [N, H, W, C_in] with weight [C_out, KH, KW, C_in / groups]."},
    {"conv3d", sig_conv_nd, NULL, CONV_KW, 2, {3}, 0,
     "3D convolution of input [N, D, H, W, C_in] with weight [C_out, KD, KH, KW, "
     "C_in / groups]."},
    {"conv_transpose1d", sig_conv_transpose_nd, NULL, CONVT_KW, 2, {1}, 0,
     "1D transposed convolution of input [N, W, C_in] with weight [C_out, K, C_in / groups]."},
    {"conv_transpose2d", sig_conv_transpose_nd, NULL, CONVT_KW, 2, {2}, 0,
     "2D transposed convolution of input [N, H, W, C_in] with weight [C_out, KH, KW, "
     "C_in / groups]."},
    {"conv_transpose3d", sig_conv_transpose_nd, NULL, CONVT_KW, 2, {3}, 0,
     "3D transposed convolution of input [N, D, H, W, C_in] with weight [C_out, KD, KH, KW, "
     "C_in / groups]."},
};

int nvpy_init_conv(PyObject *m) {
  return nvpy_add_ops(m, conv_ops, sizeof conv_ops / sizeof conv_ops[0], "");
}
