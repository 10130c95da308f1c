/* nuvec's CPython extension: the submodule nuvec.fast, mlx.core.fast over include/nuvec/fast.h
 * (rms_norm, layer_norm, rope, scaled_dot_product_attention), with MLX's signatures, keyword
 * names and defaults. weight and bias take None; rope's base takes None (freqs then given) and
 * its offset an int or an integer array (a scalar, or one offset per batch); attention's mask
 * None, a str ("causal") or an array. The seeds' serving kernels follow (sorted_offsets, softmax,
 * causal_softmax, paged_write, conv_slots: include/nuvec/fast.h). */
#include <math.h>

#include "optable.h"

/* An optional array argument at i: NULL for None (the C library's "absent"). 0, or -1. */
static int optional_at(call *c, int i, nv_array **out) {
  *out = NULL;
  if (!given(c, i)) return 0;
  *out = arr(c, i);
  return *out ? 0 : -1;
}

static PyObject *sig_rms_norm(call *c) {
  nv_array *x = arr(c, 0), *w;
  double eps;
  if (!x || optional_at(c, 1, &w) < 0 || double_at(c, 2, 0, &eps) < 0) return NULL;
  return nvpy_wrap(nv_fast_rms_norm(x, w, eps));
}

static PyObject *sig_layer_norm(call *c) {
  nv_array *x = arr(c, 0), *w, *b;
  double eps;
  if (!x || optional_at(c, 1, &w) < 0 || optional_at(c, 2, &b) < 0 ||
      double_at(c, 3, 0, &eps) < 0)
    return NULL;
  return nvpy_wrap(nv_fast_layer_norm(x, w, b, eps));
}

/* rope(a, dims, *, traditional, base, scale, offset, freqs=None). */
static PyObject *sig_rope(call *c) {
  nv_array *x = arr(c, 0), *freqs, *offset;
  int dims;
  bool traditional;
  double base = NAN, scale;
  if (!x || int_at(c, 1, 0, &dims) < 0 || bool_at(c, 2, false, &traditional) < 0 ||
      double_at(c, 3, NAN, &base) < 0 || double_at(c, 4, 1, &scale) < 0 ||
      optional_at(c, 6, &freqs) < 0)
    return NULL;
  PyObject *o = c->argv[5];
  if (o && !NVPY_IS_ARRAY(o) && !PyBool_Check(o) && (PyLong_Check(o) || PyIndex_Check(o))) {
    int v;
    if (int_at(c, 5, 0, &v) < 0) return NULL;
    offset = hold(c, nv_array_scalar(v, NV_DTYPE_INT32));
  } else {
    offset = arr(c, 5);
  }
  if (!offset) return NULL;
  return nvpy_wrap(nv_fast_rope(x, dims, traditional, base, scale, offset, freqs));
}

/* scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None): mask is None, a
 * str ("causal") or an array. */
static PyObject *sig_sdpa(call *c) {
  nv_array *q = arr(c, 0), *k = q ? arr(c, 1) : NULL, *v = k ? arr(c, 2) : NULL, *mask = NULL,
           *sinks;
  double scale;
  if (!v || double_at(c, 3, 1, &scale) < 0 || optional_at(c, 5, &sinks) < 0) return NULL;
  const char *mode = NULL;
  if (given(c, 4) && PyUnicode_Check(c->argv[4])) {
    if (!(mode = str_at(c, 4, NULL))) return NULL;
  } else if (given(c, 4)) {
    if (!(mask = arr(c, 4))) return NULL;
    mode = "array";
  }
  return nvpy_wrap(nv_fast_scaled_dot_product_attention(q, k, v, (float)scale, mode, mask, sinks));
}

/* The serving kernels: sorted_offsets(sorted_indices, groups), softmax(x),
 * causal_softmax(x, rows). */
static PyObject *sig_sorted_offsets(call *c) {
  nv_array *ids = arr(c, 0);
  int groups;
  if (!ids || int_at(c, 1, 0, &groups) < 0) return NULL;
  return nvpy_wrap(nv_fast_sorted_offsets(ids, groups));
}

static PyObject *sig_softmax(call *c) {
  nv_array *x = arr(c, 0);
  return x ? nvpy_wrap(nv_fast_softmax(x)) : NULL;
}

static PyObject *sig_causal_softmax(call *c) {
  nv_array *x = arr(c, 0);
  int rows;
  if (!x || int_at(c, 1, 0, &rows) < 0) return NULL;
  return nvpy_wrap(nv_fast_causal_softmax(x, rows));
}

static PyObject *sig_paged_write(call *c) {
  nv_array *pool = arr(c, 0), *v = pool ? arr(c, 1) : NULL, *slots = v ? arr(c, 2) : NULL;
  return slots ? nvpy_wrap(nv_fast_paged_write(pool, v, slots)) : NULL;
}

/* conv_slots(x, weight, bias, conv_state_pool, slot_ids, silu=False) -> (y, new pool). */
static PyObject *sig_conv_slots(call *c) {
  nv_array *x = arr(c, 0), *w = x ? arr(c, 1) : NULL, *b = NULL, *pool, *slots;
  bool silu;
  if (!w || optional_at(c, 2, &b) < 0 || !(pool = arr(c, 3)) || !(slots = arr(c, 4)) ||
      bool_at(c, 5, false, &silu) < 0)
    return NULL;
  nv_array *out[2];
  nv_fast_conv_slots(x, w, b, pool, slots, silu, out); /* a failure: both carry it */
  PyObject *y = nvpy_wrap(out[0]); /* raises the error a failed output carries */
  if (!y) {
    nv_release(out[1]);
    return NULL;
  }
  PyObject *p = nvpy_wrap(out[1]);
  if (!p) {
    Py_DECREF(y);
    return NULL;
  }
  PyObject *t = PyTuple_Pack(2, y, p);
  Py_DECREF(y);
  Py_DECREF(p);
  return t;
}

#define DOC(s) "mlx.core.fast." s

static const nvpy_op fast_ops[] = {
    {"rms_norm", sig_rms_norm, NULL, KW("x", "weight", "eps"), 3, {0}, 0,
     DOC("rms_norm: x * rsqrt(mean(x^2, -1) + eps) * weight, one fused pass per row.")},
    {"layer_norm", sig_layer_norm, NULL, KW("x", "weight", "bias", "eps"), 4, {0}, 0,
     DOC("layer_norm: (x - mean) * rsqrt(var + eps) * weight + bias over the last axis.")},
    {"rope", sig_rope, NULL,
     KW("a", "dims", "traditional", "base", "scale", "offset", "freqs"), 6, {0}, 0,
     DOC("rope: rotary positional encoding of the first dims features of each row.")},
    {"scaled_dot_product_attention", sig_sdpa, NULL, KW("q", "k", "v", "scale", "mask", "sinks"),
     4, {0}, 0,
     DOC("scaled_dot_product_attention: softmax(scale * q @ k.T + mask) @ v, fused (flash-style "
         "online softmax), with grouped-query heads, 'causal' or array masks and sinks.")},
    {"sorted_offsets", sig_sorted_offsets, NULL, KW("sorted_indices", "groups"), 2, {0}, 0,
     "sorted_offsets(sorted_indices, groups): offsets[g] = first position of an id >= g, for "
     "g = 0..groups (groups + 1 int32 offsets of the groups' runs in sorted ids)."},
    {"softmax", sig_softmax, NULL, KW("x"), 1, {0}, 0,
     "softmax(x): softmax over the last axis, written into x's buffer when x is donated."},
    {"causal_softmax", sig_causal_softmax, NULL, KW("x", "rows"), 2, {0}, 0,
     "causal_softmax(x, rows): row i of each block of `rows` rows sees the columns "
     "j <= C - rows + i (softmax over them, 0 elsewhere); in place when x is donated."},
    {"paged_write", sig_paged_write, NULL, KW("cache_pool", "values", "slot_mapping"), 3, {0}, 0,
     "paged_write(cache_pool, values, slot_mapping): the pool [num_blocks, block_size, ...] with "
     "values[t] written at slot slot_mapping[t] (negative: skipped); in place when the pool is "
     "donated."},
    {"conv_slots", sig_conv_slots, NULL,
     KW("x", "weight", "bias", "conv_state_pool", "slot_ids", "silu"), 5, {0}, 0,
     "conv_slots(x, weight, bias, conv_state_pool, slot_ids, silu=False) -> (y, pool): a causal "
     "depthwise conv1d step per sequence over its slot's rolling state (updated; in place when "
     "the pool is donated)."},
};

static struct PyModuleDef fast_def = {
    PyModuleDef_HEAD_INIT, "nuvec.fast",
    "Fused fast ops with MLX's mx.fast API: rms_norm, layer_norm, rope, "
    "scaled_dot_product_attention.",
    -1,
    NULL, NULL, NULL, NULL, NULL};

int nvpy_init_fast(PyObject *m) {
  PyObject *r = PyModule_Create(&fast_def);
  if (!r) return -1;
  if (nvpy_add_ops(r, fast_ops, sizeof fast_ops / sizeof fast_ops[0], "fast.") < 0 ||
      nvpy_init_cuda_kernel(r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  if (PyModule_AddObject(m, "fast", r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  return 0;
}
