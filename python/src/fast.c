/* nuvec's CPython extension: the submodule nuvec.fast, mlx.core.fast over include/nuvec/fast.h
 * (scaled_dot_product_attention), with MLX's signatures, keyword names and defaults. */
#include "optable.h"

/* An optional array argument at i: NULL for None (the C library's "absent"). 0, or -1. */
static int optional_at(call *c, int i, nv_array **out) {
  *out = NULL;
  if (!given(c, i)) return 0;
  *out = arr(c, i);
  return *out ? 0 : -1;
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

#define DOC(s) "mlx.core.fast." s

static const nvpy_op fast_ops[] = {
    {"scaled_dot_product_attention", sig_sdpa, NULL, KW("q", "k", "v", "scale", "mask", "sinks"),
     4, {0}, 0,
     DOC("scaled_dot_product_attention: softmax(scale * q @ k.T + mask) @ v, fused (flash-style "
         "online softmax), with grouped-query heads, 'causal' or array masks and sinks.")},
};

static struct PyModuleDef fast_def = {
    PyModuleDef_HEAD_INIT, "nuvec.fast",
    "Fused fast ops with MLX's mx.fast API: scaled_dot_product_attention.", -1,
    NULL, NULL, NULL, NULL, NULL};

int nvpy_init_fast(PyObject *m) {
  PyObject *r = PyModule_Create(&fast_def);
  if (!r) return -1;
  if (nvpy_add_ops(r, fast_ops, sizeof fast_ops / sizeof fast_ops[0], "fast.") < 0) {
    Py_DECREF(r);
    return -1;
  }
  if (PyModule_AddObject(m, "fast", r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  return 0;
}
