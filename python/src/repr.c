/* nuvec's CPython extension: repr of arrays as MLX prints them — C++ stream formatting of
 * each value (%g: six significant digits), rows of 2-D and deeper arrays on their own lines
 * aligned under the first bracket, and axes longer than 6 summarized as 3 ... 3. With a
 * precision set by set_printoptions, floats print in fixed notation with that many decimals. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nvpy.h"

/* The decimals floats print with (set_printoptions(precision=)); -1 for %g, MLX's default.
 * Values past PRINT_MAX_DECIMALS print with that many, so an element always fits its buffer. */
static int print_precision = -1;
enum { PRINT_MAX_DECIMALS = 64 };

PyObject *nvpy_set_print_precision(PyObject *self, PyObject *arg) {
  (void)self;
  if (!PyLong_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "set_printoptions: precision must be an int, not %s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  int overflow = 0;
  long p = PyLong_AsLongAndOverflow(arg, &overflow);
  if (p == -1 && PyErr_Occurred()) return NULL;
  if (overflow > 0 || p > INT_MAX) p = INT_MAX;
  print_precision = overflow < 0 || p < 0 ? -1 : (int)p;
  Py_RETURN_NONE;
}

PyObject *nvpy_get_print_precision(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyLong_FromLong(print_precision);
}

/* A float in %g (no precision set) or fixed with the set decimals. */
static void put_float(char *t, size_t cap, double v) {
  if (print_precision < 0 || !isfinite(v)) snprintf(t, cap, "%g", v);
  else snprintf(t, cap, "%.*f", print_precision < PRINT_MAX_DECIMALS ? print_precision : PRINT_MAX_DECIMALS, v);
}

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
  char t[2 * (DBL_MAX_10_EXP + PRINT_MAX_DECIMALS + 8)]; /* two fixed doubles at most */
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
  case NV_DTYPE_FLOAT32: put_float(t, sizeof t, (double)*(const float *)p); break;
  case NV_DTYPE_FLOAT64: put_float(t, sizeof t, *(const double *)p); break;
  case NV_DTYPE_COMPLEX64: {
    const nv_complex64 *z = (const nv_complex64 *)p;
    size_t half = sizeof t / 2;
    put_float(t, half, (double)z->re);
    size_t k = strlen(t);
    /* "+" unless the imaginary part is below 0: NaN gives 1+nanj, -0 gives 1+-0j, as MLX. */
    snprintf(t + k, sizeof t - k, "%s", z->im < 0 ? "" : "+");
    k = strlen(t);
    put_float(t + k, sizeof t - k - 1, (double)z->im);
    k = strlen(t);
    snprintf(t + k, sizeof t - k, "j");
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
