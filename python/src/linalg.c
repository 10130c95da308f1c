/* nuvec's CPython extension: the submodule nuvec.linalg, mlx.core.linalg over the
 * decompositions of include/nuvec/linalg.h, with MLX's names, argument order, keywords and
 * defaults (and `stream=`). Several results come back as a tuple in MLX's order. */
#include <math.h>
#include <string.h>

#include "optable.h"

/* The `n` results of a multi-output builder as a tuple (all released on failure). */
static PyObject *tuple_of(nv_array **out, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; i < n; i++) {
    if (!t) {
      nv_release(out[i]);
      continue;
    }
    PyObject *w = nvpy_wrap(out[i]); /* raises (releasing out[i]) for a failed result */
    if (!w) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, w);
  }
  return t;
}

/* a, upper=False */
typedef nv_array *(*upper_fn)(const nv_array *, bool);
static PyObject *sig_a_upper(call *c) {
  nv_array *a = arr(c, 0);
  bool upper;
  if (!a || bool_at(c, 1, false, &upper) < 0) return NULL;
  return nvpy_wrap(FN(upper_fn)(a, upper));
}

/* a */
typedef nv_array *(*a_fn)(const nv_array *);
static PyObject *sig_a(call *c) {
  nv_array *a = arr(c, 0);
  return a ? nvpy_wrap(FN(a_fn)(a)) : NULL;
}

/* a -> a tuple of `def[0]` results */
typedef nv_status (*multi_fn)(const nv_array *, nv_array **);
static PyObject *sig_multi(call *c) {
  nv_array *a = arr(c, 0), *out[3];
  if (!a) return NULL;
  FN(multi_fn)(a, out);
  return tuple_of(out, dflt(c, 0));
}

/* a, b */
typedef nv_array *(*ab_fn)(const nv_array *, const nv_array *);
static PyObject *sig_ab(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL;
  return b ? nvpy_wrap(FN(ab_fn)(a, b)) : NULL;
}

/* solve_triangular(a, b, *, upper=False) */
static PyObject *sig_solve_triangular(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL;
  bool upper;
  if (!b || bool_at(c, 2, false, &upper) < 0) return NULL;
  return nvpy_wrap(nv_linalg_solve_triangular(a, b, upper));
}

/* cross(a, b, axis=-1) */
static PyObject *sig_cross(call *c) {
  nv_array *a = arr(c, 0), *b = a ? arr(c, 1) : NULL;
  int axis;
  if (!b || int_at(c, 2, -1, &axis) < 0) return NULL;
  return nvpy_wrap(nv_linalg_cross(a, b, axis));
}

/* svd(a, compute_uv=True): a tuple (U, S, Vh), or S alone. */
static PyObject *sig_svd(call *c) {
  nv_array *a = arr(c, 0), *out[3];
  bool uv;
  if (!a || bool_at(c, 1, true, &uv) < 0) return NULL;
  nv_linalg_svd(a, uv, out);
  return uv ? tuple_of(out, 3) : nvpy_wrap(out[0]);
}

/* eigh(a, UPLO='L') and eigvalsh(a, UPLO='L') */
static PyObject *sig_eigh(call *c) {
  nv_array *a = arr(c, 0), *out[2];
  const char *uplo = a ? str_at(c, 1, "L") : NULL;
  if (!uplo) return NULL;
  if (!strcmp(c->op->name, "eigvalsh")) return nvpy_wrap(nv_linalg_eigvalsh(a, uplo));
  nv_linalg_eigh(a, uplo, out);
  return tuple_of(out, 2);
}

/* norm(a, ord=None, axis=None, keepdims=False): ord None, a number (inf allowed) or a str. */
static PyObject *sig_norm(call *c) {
  nv_array *a = arr(c, 0);
  int axes[NVPY_MAXDIM];
  bool keep;
  if (!a || bool_at(c, 3, false, &keep) < 0) return NULL;
  int nax = given(c, 2) ? axes_at(c, 2, axes) : -2;
  if (nax == -1) return NULL;
  const int *ap = nax == -2 ? NULL : axes;
  if (nax < 0) nax = 0;
  if (!given(c, 1)) return nvpy_wrap(nv_linalg_norm(a, ap, nax, keep));
  if (PyUnicode_Check(c->argv[1])) {
    const char *s = str_at(c, 1, NULL);
    return s ? nvpy_wrap(nv_linalg_norm_str(a, s, ap, nax, keep)) : NULL;
  }
  double ord;
  if (double_at(c, 1, 0, &ord) < 0) return NULL;
  return nvpy_wrap(nv_linalg_norm_ord(a, ord, ap, nax, keep));
}

#define DOC(s) "mlx.core.linalg." s
static const nvpy_op linalg_ops[] = {
    {"norm", sig_norm, NULL, KW("a", "ord", "axis", "keepdims"), 1, {0}, 0,
     DOC("norm: vector and matrix norms.")},
    {"cholesky", sig_a_upper, F(nv_linalg_cholesky), KW("a", "upper"), 1, {0}, 0,
     DOC("cholesky: the Cholesky factor of a symmetric positive-definite matrix.")},
    {"cholesky_inv", sig_a_upper, F(nv_linalg_cholesky_inv), KW("a", "upper"), 1, {0}, 0,
     DOC("cholesky_inv: the inverse of a matrix from its Cholesky factor.")},
    {"tri_inv", sig_a_upper, F(nv_linalg_tri_inv), KW("a", "upper"), 1, {0}, 0,
     DOC("tri_inv: the inverse of a triangular matrix.")},
    {"inv", sig_a, F(nv_linalg_inv), KW("a"), 1, {0}, 0, DOC("inv: the inverse of a matrix.")},
    {"pinv", sig_a, F(nv_linalg_pinv), KW("a"), 1, {0}, 0,
     DOC("pinv: the Moore-Penrose pseudo-inverse.")},
    {"det", sig_a, F(nv_linalg_det), KW("a"), 1, {0}, 0, DOC("det: the determinant.")},
    {"eigvals", sig_a, F(nv_linalg_eigvals), KW("a"), 1, {0}, 0,
     DOC("eigvals: the eigenvalues of a general matrix.")},
    {"qr", sig_multi, F(nv_linalg_qr), KW("a"), 1, {2}, 0, DOC("qr: the QR factorization.")},
    {"lu", sig_multi, F(nv_linalg_lu), KW("a"), 1, {3}, 0,
     DOC("lu: the LU factorization (P, L, U).")},
    {"lu_factor", sig_multi, F(nv_linalg_lu_factor), KW("a"), 1, {2}, 0,
     DOC("lu_factor: the compact LU factorization and its pivots.")},
    {"eig", sig_multi, F(nv_linalg_eig), KW("a"), 1, {2}, 0,
     DOC("eig: the eigenvalues and eigenvectors of a general matrix.")},
    {"slogdet", sig_multi, F(nv_linalg_slogdet), KW("a"), 1, {2}, 0,
     DOC("slogdet: the sign and log of the absolute value of the determinant.")},
    {"svd", sig_svd, NULL, KW("a", "compute_uv"), 1, {0}, 0,
     DOC("svd: the singular value decomposition.")},
    {"eigh", sig_eigh, NULL, KW("a", "UPLO"), 1, {0}, 0,
     DOC("eigh: the eigen-decomposition of a symmetric or Hermitian matrix.")},
    {"eigvalsh", sig_eigh, NULL, KW("a", "UPLO"), 1, {0}, 0,
     DOC("eigvalsh: the eigenvalues of a symmetric or Hermitian matrix.")},
    {"solve", sig_ab, F(nv_linalg_solve), KW("a", "b"), 2, {0}, 0,
     DOC("solve: the solution of a x = b.")},
    {"solve_triangular", sig_solve_triangular, NULL, KW("a", "b", "upper"), 2, {0}, 0,
     DOC("solve_triangular: the solution of a x = b for triangular a.")},
    {"cross", sig_cross, NULL, KW("a", "b", "axis"), 2, {0}, 0,
     DOC("cross: the cross product along an axis.")},
};

static struct PyModuleDef linalg_def = {PyModuleDef_HEAD_INIT, "nuvec.linalg",
                                        "Linear algebra with MLX's API (mlx.core.linalg).", -1,
                                        NULL, NULL, NULL, NULL, NULL};

int nvpy_init_linalg(PyObject *m) {
  PyObject *r = PyModule_Create(&linalg_def);
  if (!r) return -1;
  if (nvpy_add_ops(r, linalg_ops, sizeof linalg_ops / sizeof linalg_ops[0], "linalg.") < 0 ||
      PyModule_AddObject(m, "linalg", r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  return 0;
}
