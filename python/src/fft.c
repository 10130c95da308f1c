/* nuvec's CPython extension: the submodule nuvec.fft, mlx.core.fft over include/nuvec/fft.h,
 * with MLX's signatures, keyword names and defaults (fft2's family defaults to axes (-2, -1);
 * fftn's to the last len(s) axes, or every axis), and the top-level einsum, einsum_path,
 * hadamard_transform and convolve of the same header. The entries are op-table lines
 * (optable.h). */
#include <string.h>

#include "optable.h"

#define DOC(s) "mlx.core.fft." s

typedef nv_array *(*fft1_fn)(const nv_array *, const int *, int, nv_fft_norm);
typedef nv_array *(*fftn_fn)(const nv_array *, const int *, const int *, int, nv_fft_norm);

/* The `norm=` argument at i. 0, or -1 with a ValueError as MLX's. */
static int norm_at(call *c, int i, nv_fft_norm *out) {
  const char *s = str_at(c, i, "backward");
  if (!s) return -1;
  if (!strcmp(s, "backward")) {
    *out = NV_FFT_NORM_BACKWARD;
  } else if (!strcmp(s, "ortho")) {
    *out = NV_FFT_NORM_ORTHO;
  } else if (!strcmp(s, "forward")) {
    *out = NV_FFT_NORM_FORWARD;
  } else {
    PyErr_Format(PyExc_ValueError,
                 "fft.%s: invalid norm '%s': expected one of 'backward', 'ortho', 'forward'",
                 c->op->name, s);
    return -1;
  }
  return 0;
}

/* f(a, n=None, axis=-1, norm="backward") */
static PyObject *sig_fft1(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  int n = 0, axis = -1;
  nv_fft_norm norm;
  if (int_at(c, 1, 0, &n) < 0 || int_at(c, 2, -1, &axis) < 0 || norm_at(c, 3, &norm) < 0)
    return NULL;
  return nvpy_wrap(((fft1_fn)c->op->fn)(a, given(c, 1) ? &n : NULL, axis, norm));
}

/* f(a, s=None, axes=..., norm="backward"); `two`: fft2's default axes (-2, -1). */
static PyObject *sig_fftn_common(call *c, bool two) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  int s[NVPY_MAXDIM], axes[NVPY_MAXDIM], ns = -1, na = -2;
  nv_fft_norm norm;
  if (given(c, 1) && (ns = shape_at(c, 1, s)) < 0) return NULL;
  if (given(c, 2) && (na = axes_at(c, 2, axes)) == -1) return NULL;
  if (norm_at(c, 3, &norm) < 0) return NULL;
  /* fft2's default axes are (-2, -1) when axes is left out; axes=None given explicitly is
   * every axis, as in MLX and NumPy. */
  if (na == -2 && two && !c->argv[2]) {
    axes[0] = -2;
    axes[1] = -1;
    na = 2;
  }
  if (ns >= 0 && na >= 0 && ns != na) {
    PyErr_Format(PyExc_ValueError, "fft.%s: s has %d sizes but axes has %d axes", c->op->name, ns,
                 na);
    return NULL;
  }
  int naxes = na >= 0 ? na : ns >= 0 ? ns : 0;
  return nvpy_wrap(((fftn_fn)c->op->fn)(a, ns >= 0 ? s : NULL, na >= 0 ? axes : NULL, naxes,
                                        norm));
}

static PyObject *sig_fft2(call *c) { return sig_fftn_common(c, true); }
static PyObject *sig_fftn(call *c) { return sig_fftn_common(c, false); }

/* f(n, d=1.0) */
static PyObject *sig_freq(call *c) {
  int n = 0;
  double d = 1.0;
  if (int_at(c, 0, 0, &n) < 0 || double_at(c, 1, 1.0, &d) < 0) return NULL;
  nv_array *(*f)(int, double) = (nv_array * (*)(int, double)) c->op->fn;
  return nvpy_wrap(f(n, d));
}

/* f(a, axes=None) */
static PyObject *sig_shift(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  int axes[NVPY_MAXDIM], na = -2;
  if (given(c, 1) && (na = axes_at(c, 1, axes)) == -1) return NULL;
  nv_array *(*f)(const nv_array *, const int *, int) =
      (nv_array * (*)(const nv_array *, const int *, int)) c->op->fn;
  return nvpy_wrap(f(a, na >= 0 ? axes : NULL, na >= 0 ? na : 0));
}

#define ONE_D(name, fn)                                                                      \
  {name, sig_fft1, F(fn), KW("a", "n", "axis", "norm"), 1, {0}, 0,                            \
   DOC(name ": the one-dimensional transform along axis (n: crop or zero-pad to n points).")}
#define TWO_D(name, fn)                                                                     \
  {name, sig_fft2, F(fn), KW("a", "s", "axes", "norm"), 1, {0}, 0,                           \
   DOC(name ": the two-dimensional transform over axes (default (-2, -1)).")}
#define N_D(name, fn)                                                                       \
  {name, sig_fftn, F(fn), KW("a", "s", "axes", "norm"), 1, {0}, 0,                           \
   DOC(name ": the n-dimensional transform over axes (default: the last len(s), or all).")}

static const nvpy_op fft_ops[] = {
    ONE_D("fft", nv_fft_fft),
    ONE_D("ifft", nv_fft_ifft),
    ONE_D("rfft", nv_fft_rfft),
    ONE_D("irfft", nv_fft_irfft),
    TWO_D("fft2", nv_fft_fftn),
    TWO_D("ifft2", nv_fft_ifftn),
    TWO_D("rfft2", nv_fft_rfftn),
    TWO_D("irfft2", nv_fft_irfftn),
    N_D("fftn", nv_fft_fftn),
    N_D("ifftn", nv_fft_ifftn),
    N_D("rfftn", nv_fft_rfftn),
    N_D("irfftn", nv_fft_irfftn),
    {"fftfreq", sig_freq, F(nv_fft_fftfreq), KW("n", "d"), 1, {0}, 0,
     DOC("fftfreq: the sample frequencies of an n-point transform with spacing d.")},
    {"rfftfreq", sig_freq, F(nv_fft_rfftfreq), KW("n", "d"), 1, {0}, 0,
     DOC("rfftfreq: the non-negative sample frequencies of an n-point real transform.")},
    {"fftshift", sig_shift, F(nv_fft_fftshift), KW("a", "axes"), 1, {0}, 0,
     DOC("fftshift: rolls the zero frequency to the middle of each of axes (None: all).")},
    {"ifftshift", sig_shift, F(nv_fft_ifftshift), KW("a", "axes"), 1, {0}, 0,
     DOC("ifftshift: the inverse of fftshift.")},
};

/* ---- Top-level names: einsum, einsum_path, hadamard_transform, convolve ---- */

/* The subscripts and operands of einsum(subscripts, *operands): 0, or -1 with an exception. */
static int einsum_args(call *c, const char **subs, nv_vec **ops) {
  Py_ssize_t n = c->rest ? PyTuple_GET_SIZE(c->rest) : 0;
  if (n < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(c->rest, 0))) {
    PyErr_Format(PyExc_TypeError, "%s: expected a subscripts str and at least one operand",
                 c->op->name);
    return -1;
  }
  *subs = PyUnicode_AsUTF8(PyTuple_GET_ITEM(c->rest, 0));
  if (!*subs) return -1;
  PyObject *rest = PyTuple_GetSlice(c->rest, 1, n);
  if (!rest) return -1;
  char label[NVPY_LABEL];
  snprintf(label, sizeof label, "%s: operands", c->op->name);
  *ops = nvpy_vec_arg(rest, label);
  Py_DECREF(rest);
  return *ops ? 0 : -1;
}

static PyObject *sig_einsum(call *c) {
  const char *subs;
  nv_vec *ops;
  if (einsum_args(c, &subs, &ops) < 0) return NULL;
  nv_array *r = nv_einsum(subs, (const nv_array *const *)nv_vec_data(ops), (int)nv_vec_size(ops));
  nv_vec_free(ops);
  return nvpy_wrap(r);
}

/* einsum_path(subscripts, *operands): (a list of index tuples, the report), as MLX's. */
static PyObject *sig_einsum_path(call *c) {
  const char *subs;
  nv_vec *ops;
  if (einsum_args(c, &subs, &ops) < 0) return NULL;
  int n = (int)nv_vec_size(ops), steps = 0;
  int *path = PyMem_Malloc(sizeof(int) * 2 * (size_t)(n > 1 ? n - 1 : 1));
  char report[1024];
  nv_status st = path ? nv_einsum_path(subs, (const nv_array *const *)nv_vec_data(ops), n, path,
                                       &steps, report, sizeof report)
                      : NV_ERR_OUT_OF_MEMORY;
  nv_vec_free(ops);
  if (st != NV_OK) {
    PyMem_Free(path);
    return nvpy_raise_last(st);
  }
  PyObject *list = PyList_New(steps);
  for (int i = 0; list && i < steps; i++) {
    PyObject *t = path[2 * i + 1] < 0 ? Py_BuildValue("(i)", path[2 * i])
                                      : Py_BuildValue("(ii)", path[2 * i], path[2 * i + 1]);
    if (!t) Py_CLEAR(list);
    else PyList_SET_ITEM(list, i, t);
  }
  PyMem_Free(path);
  if (!list) return NULL;
  PyObject *r = Py_BuildValue("(Ns)", list, report);
  return r;
}

/* hadamard_transform(a, scale=None) */
static PyObject *sig_hadamard(call *c) {
  nv_array *a = arr(c, 0);
  if (!a) return NULL;
  double scale = 0;
  if (double_at(c, 1, 0, &scale) < 0) return NULL;
  return nvpy_wrap(nv_hadamard_transform(a, given(c, 1) ? &scale : NULL));
}

/* convolve(a, v, mode="full") */
static PyObject *sig_convolve(call *c) {
  nv_array *a = arr(c, 0), *v = a ? arr(c, 1) : NULL;
  if (!v) return NULL;
  const char *m = str_at(c, 2, "full");
  if (!m) return NULL;
  nv_convolve_mode mode;
  if (!strcmp(m, "full")) {
    mode = NV_CONVOLVE_FULL;
  } else if (!strcmp(m, "same")) {
    mode = NV_CONVOLVE_SAME;
  } else if (!strcmp(m, "valid")) {
    mode = NV_CONVOLVE_VALID;
  } else {
    PyErr_Format(PyExc_ValueError,
                 "convolve: invalid mode '%s': expected one of 'full', 'same', 'valid'", m);
    return NULL;
  }
  return nvpy_wrap(nv_convolve(a, v, mode));
}

#undef DOC
#define DOC(s) "mlx.core." s

static const nvpy_op top_ops[] = {
    {"einsum", sig_einsum, NULL, KW(NULL), 0, {0}, VARARGS,
     DOC("einsum: Einstein summation over the operands (NumPy's greedy contraction order).")},
    {"einsum_path", sig_einsum_path, NULL, KW(NULL), 0, {0}, VARARGS,
     DOC("einsum_path: the contraction order einsum uses and its cost report.")},
    {"hadamard_transform", sig_hadamard, NULL, KW("a", "scale"), 1, {0}, 0,
     DOC("hadamard_transform: the Walsh-Hadamard transform of the last axis times scale.")},
    {"convolve", sig_convolve, NULL, KW("a", "v", "mode"), 2, {0}, 0,
     DOC("convolve: the discrete convolution of two 1-D arrays (mode full, same or valid).")},
};

static struct PyModuleDef fft_def = {PyModuleDef_HEAD_INIT,
                                     "nuvec.fft",
                                     "Discrete Fourier transforms (mlx.core.fft).",
                                     -1,
                                     NULL,
                                     NULL,
                                     NULL,
                                     NULL,
                                     NULL};

int nvpy_init_fft(PyObject *m) {
  if (nvpy_add_ops(m, top_ops, sizeof top_ops / sizeof top_ops[0], "") < 0) return -1;
  PyObject *r = PyModule_Create(&fft_def);
  if (!r) return -1;
  if (nvpy_add_ops(r, fft_ops, sizeof fft_ops / sizeof fft_ops[0], "fft.") < 0) {
    Py_DECREF(r);
    return -1;
  }
  if (PyModule_AddObject(m, "fft", r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  return 0;
}
