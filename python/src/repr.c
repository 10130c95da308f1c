/* nuvec's CPython extension: repr of arrays as MLX prints them — C++ stream formatting of
 * each value (%g: six significant digits), rows of 2-D and deeper arrays on their own lines
 * aligned under the first bracket, and axes longer than 6 summarized as 3 ... 3. */
#include <math.h>
#include <stdio.h>

#include "nvpy.h"

typedef struct {
  char *s;
  size_t n, cap;
  bool oom;
} strbuf;

static void put(strbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 256) + n;
    char *p = PyMem_Realloc(b->s, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
}

static void puts_(strbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_elem(strbuf *b, const char *p, nv_dtype dt) {
  char t[96];
  switch (dt) {
  case NV_DTYPE_BOOL: puts_(b, *(const bool *)p ? "True" : "False"); return;
  case NV_DTYPE_UINT8: snprintf(t, sizeof t, "%u", *(const uint8_t *)p); break;
  case NV_DTYPE_UINT16: snprintf(t, sizeof t, "%u", *(const uint16_t *)p); break;
  case NV_DTYPE_UINT32: snprintf(t, sizeof t, "%u", *(const uint32_t *)p); break;
  case NV_DTYPE_UINT64: snprintf(t, sizeof t, "%llu", (unsigned long long)*(const uint64_t *)p); break;
  case NV_DTYPE_INT8: snprintf(t, sizeof t, "%d", *(const int8_t *)p); break;
  case NV_DTYPE_INT16: snprintf(t, sizeof t, "%d", *(const int16_t *)p); break;
  case NV_DTYPE_INT32: snprintf(t, sizeof t, "%d", *(const int32_t *)p); break;
  case NV_DTYPE_INT64: snprintf(t, sizeof t, "%lld", (long long)*(const int64_t *)p); break;
  case NV_DTYPE_FLOAT32: snprintf(t, sizeof t, "%g", (double)*(const float *)p); break;
  case NV_DTYPE_FLOAT64: snprintf(t, sizeof t, "%g", *(const double *)p); break;
  case NV_DTYPE_COMPLEX64: {
    const nv_complex64 *z = (const nv_complex64 *)p;
    snprintf(t, sizeof t, "%g%s%gj", (double)z->re, z->im >= 0 ? "+" : "", (double)z->im);
    break;
  }
  default: t[0] = '?', t[1] = 0;
  }
  puts_(b, t);
}

static void put_rows(strbuf *b, const char *p, const int *shape, const int64_t *stride, int nd,
                     int depth, nv_dtype dt) {
  if (depth == nd) {
    put_elem(b, p, dt);
    return;
  }
  int n = shape[depth];
  puts_(b, "[");
  bool summarize = n > 6;
  for (int i = 0; i < n; i++) {
    if (summarize && i == 3) i = n - 3;
    if (i > 0) {
      if (depth == nd - 1) puts_(b, ", ");
      else {
        puts_(b, ",\n");
        for (int k = 0; k < 7 + depth; k++) puts_(b, " ");
      }
      if (summarize && i == n - 3) {
        puts_(b, "...");
        if (depth == nd - 1) puts_(b, ", ");
        else {
          puts_(b, ",\n");
          for (int k = 0; k < 7 + depth; k++) puts_(b, " ");
        }
      }
    }
    put_rows(b, p + i * stride[depth], shape, stride, nd, depth + 1, dt);
  }
  puts_(b, "]");
}

PyObject *nvpy_repr(PyObject *self) {
  nv_array *a = NVPY_A(self);
  nv_dtype dt;
  char *buf = nvpy_host_copy(a, &dt);
  if (!buf) return NULL;
  int nd = nv_array_ndim(a);
  const int *shape = nv_array_shape(a);
  int64_t stride[NVPY_MAXDIM + 1];
  int64_t s = (int64_t)nv_dtype_size(dt);
  for (int i = nd - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i];
  }
  strbuf b = {0};
  puts_(&b, "array(");
  put_rows(&b, buf, shape, stride, nd, 0, dt);
  puts_(&b, ", dtype=");
  puts_(&b, nv_dtype_name(nv_array_dtype(a)));
  puts_(&b, ")");
  PyMem_Free(buf);
  if (b.oom) {
    PyMem_Free(b.s);
    return PyErr_NoMemory();
  }
  PyObject *r = PyUnicode_FromStringAndSize(b.s, (Py_ssize_t)b.n);
  PyMem_Free(b.s);
  return r;
}
