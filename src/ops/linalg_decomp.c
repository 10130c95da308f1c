/* Builders of MLX's mx.linalg functions (include/nuvec/linalg.h). Seven are primitives with
 * LAPACK / cuSOLVER kernels: cholesky, lu_factor, solve_triangular, qr, svd, eigh, eig
 * (parameters in ops/linalg_decomp_params.h). The others compose them with ordinary ops:
 *   lu         lu_factor's LU split by tril/triu, its permutation output
 *   solve      lu_factor, the rows of b taken in pivot order, two triangular solves
 *   inv        solve with the identity; tri_inv is solve_triangular with the identity
 *   cholesky_inv  tri_inv of the factor, then its product with its transpose
 *   pinv       svd: V diag(1/s) Uᴴ over the singular values above NumPy's cutoff
 *   det, slogdet  the product (log-sum) of U's diagonal, the sign from the pivots
 *   norm       reductions of |x| (and svd for the 2 / -2 / nuclear matrix norms)
 *   cross      slices, products and a concatenation
 * so their derivatives and batching come from the primitives' rules. */
#include <math.h>

#include "nuvec.h"
#include "ops/linalg_decomp.h"
#include "ops/ops_internal.h"

/* ---- Temporaries of composed builders ---- */

/* Temporaries of a composed builder: created with the scopes suspended, released at the end. */
typedef struct tmp_list {
  nv_array *a[64];
  int n;
} tmp_list;

static nv_array *T(tmp_list *t, nv_array *x) {
  if (t->n < (int)(sizeof t->a / sizeof *t->a)) t->a[t->n++] = x;
  return x;
}

static void begin(tmp_list *t) {
  t->n = 0;
  nv__scope_suspend();
}

/* Releases the temporaries, resumes the scopes, and registers the results (not temporaries)
 * with the caller's scope. */
static void end(tmp_list *t, nv_array *const *r, int nr) {
  for (int i = 0; i < t->n; i++) nv_release(t->a[i]);
  nv__scope_resume();
  for (int i = 0; i < nr; i++) nv__scope_register(r[i]);
}

static nv_array *end1(tmp_list *t, nv_array *r) {
  end(t, &r, 1);
  return r;
}

/* ---- Checks ---- */

enum { REAL = 1, COMPLEX = 2 };

/* Checks `a` for op `op`: at least 2 dimensions, square when `square`, a dtype float32 or
 * float64 (or complex64 when `kinds` has COMPLEX). NULL when fine, else the failed array. */
static nv_array *check_matrix(const char *op, const nv_array *a, bool square, int kinds) {
  const nv_array *xs[1] = {a};
  nv_array *f = nv__op_check(op, xs, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  char s[NV__SHAPE_BUF];
  nv__shape_str(o->shape, o->ndim, s, sizeof s);
  if (o->dtype != NV_DTYPE_FLOAT32 && o->dtype != NV_DTYPE_FLOAT64 &&
      !(o->dtype == NV_DTYPE_COMPLEX64 && (kinds & COMPLEX)))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "arrays must have dtype float32 or float64%s, got %s (shape %s)",
                        kinds & COMPLEX ? " or complex64" : "", nv_dtype_name(o->dtype), s);
  if (o->ndim < 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "arrays must have at least 2 dimensions, got shape %s", s);
  if (square && o->shape[o->ndim - 1] != o->shape[o->ndim - 2])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "defined only for square matrices, got shape %s", s);
  return NULL;
}

/* The outputs of a builder that failed before it had a node: `f` and failed copies. */
static nv_status fail_all(nv_array *f, nv_array **out, int n) {
  nv__error *err = nv__node_known_error(f->node);
  out[0] = f;
  for (int i = 1; i < n; i++) out[i] = nv__array_failed_nometa(err);
  return nv_array_status(f);
}

/* ---- Primitive nodes ---- */

typedef struct out_spec {
  nv_dtype dt;
  int shape[NV__MAX_DIMS];
  int ndim;
} out_spec;

/* `o` as the batch of `x` (its axes but the last two) followed by `t0`, `t1` (-1: absent). */
static void spec(out_spec *o, const nv__output *x, nv_dtype dt, int t0, int t1) {
  o->dt = dt;
  o->ndim = x->ndim - 2;
  memcpy(o->shape, x->shape, sizeof(int) * (size_t)o->ndim);
  if (t0 >= 0) o->shape[o->ndim++] = t0;
  if (t1 >= 0) o->shape[o->ndim++] = t1;
}

/* A node of `prim` over `in` (already of the computing dtype) with `nout` outputs; writes the
 * outputs' handles to out[] and returns the status of out[0]. */
static nv_status prim_node(const char *op, int prim, nv_array *const *in, int nin,
                           const nv__decomp_params *p, const out_spec *os, int nout,
                           nv_array **out) {
  nv__node *n = nv__node_new(prim, in, nin, nout, sizeof *p);
  if (!n) return fail_all(nv__op_error(NV_ERR_OUT_OF_MEMORY, op, "out of memory"), out, nout);
  nv__node_inherit_error(n);
  *(nv__decomp_params *)n->params = *p;
  for (int i = 0; i < nout; i++)
    if (nv__output_set_shape(&n->out[i], os[i].dt, os[i].shape, os[i].ndim) != NV_OK) {
      nv__node_release(n);
      return fail_all(nv__op_finish(op, NULL), out, nout);
    }
  for (int i = 0; i < nin; i++) nv__node_inherit_tracer(n, in[i]->node);
  for (int i = 1; i < nout; i++) nv__node_retain(n);
  for (int i = 0; i < nout; i++) out[i] = nv__array_new(n, i);
  return nv_array_status(out[0]);
}

static nv_array *prim1(const char *op, int prim, nv_array *const *in, int nin,
                       const nv__decomp_params *p, const out_spec *os) {
  nv_array *r;
  prim_node(op, prim, in, nin, p, os, 1, &r);
  return r;
}

/* ---- cholesky ---- */

nv_array *nv_linalg_cholesky(const nv_array *a, bool upper) {
  static const char *op = "cholesky";
  nv_array *f = check_matrix(op, a, true, REAL);
  if (f) return f;
  const nv__output *o = nv__out(a);
  out_spec os;
  spec(&os, o, o->dtype, o->shape[o->ndim - 2], o->shape[o->ndim - 1]);
  nv__decomp_params p = {.upper = upper};
  nv_array *in = (nv_array *)a;
  return prim1(op, NV__PRIM_CHOLESKY, &in, 1, &p, &os);
}

/* ---- lu_factor and lu ---- */

/* The three outputs of the lu_factor primitive (LU, pivots, perm). */
static nv_status lu_prim(const char *op, const nv_array *a, nv_array **out) {
  nv_array *f = check_matrix(op, a, false, REAL);
  if (f) return fail_all(f, out, 3);
  const nv__output *o = nv__out(a);
  int m = o->shape[o->ndim - 2], n = o->shape[o->ndim - 1], k = m < n ? m : n;
  out_spec os[3];
  spec(&os[0], o, o->dtype, m, n);
  spec(&os[1], o, NV_DTYPE_UINT32, k, -1);
  spec(&os[2], o, NV_DTYPE_UINT32, m, -1);
  nv__decomp_params p = {0};
  nv_array *in = (nv_array *)a;
  return prim_node(op, NV__PRIM_LU_FACTOR, &in, 1, &p, os, 3, out);
}

nv_status nv_linalg_lu_factor(const nv_array *a, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "lu_factor: the output list is NULL");
  nv_array *r[3];
  nv_status st = lu_prim("lu_factor", a, r);
  out[0] = r[0];
  out[1] = r[1];
  nv_release(r[2]);
  return st;
}

/* `x` (..., M, N) cut to its first `rows` rows and `cols` columns. */
static nv_array *corner(const nv_array *x, int rows, int cols) {
  const nv__output *o = nv__out(x);
  int start[NV__MAX_DIMS] = {0}, stop[NV__MAX_DIMS];
  memcpy(stop, o->shape, sizeof(int) * (size_t)o->ndim);
  stop[o->ndim - 2] = rows;
  stop[o->ndim - 1] = cols;
  return nv_slice(x, start, stop, NULL, o->ndim);
}

/* The (m, k) identity of `dt` (ones on the diagonal), empty when m or k is 0 (nv_eye needs
 * positive sizes); the batch broadcasts in the ops that use it. */
static nv_array *eye_mk(int m, int k, nv_dtype dt) {
  if (m > 0 && k > 0) return nv_eye(m, k, 0, dt);
  int shape[2] = {m, k};
  return nv_zeros(shape, 2, dt);
}

static nv_array *eye(int n, nv_dtype dt) { return eye_mk(n, n, dt); }

/* L (unit lower, (..., M, K)) and U ((..., K, N)) from the compact LU (..., M, N). */
static void split_lu(tmp_list *t, const nv_array *lu, nv_array **l, nv_array **u) {
  const nv__output *o = nv__out(lu);
  int m = o->shape[o->ndim - 2], n = o->shape[o->ndim - 1], k = m < n ? m : n;
  nv_array *lpart = T(t, corner(lu, m, k));
  nv_array *strict = T(t, nv_tril(lpart, -1));
  nv_array *id = T(t, eye_mk(m, k, o->dtype));
  *l = nv_add(strict, id);
  *u = nv_triu(T(t, corner(lu, k, n)), 0);
}

nv_status nv_linalg_lu(const nv_array *a, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "lu: the output list is NULL");
  tmp_list t;
  begin(&t);
  nv_array *r[3];
  nv_status st = lu_prim("lu", a, r);
  T(&t, r[0]);
  T(&t, r[1]);
  out[0] = r[2];
  split_lu(&t, r[0], &out[1], &out[2]);
  end(&t, out, 3);
  return st != NV_OK ? st : nv_array_status(out[1]);
}

/* ---- solve_triangular, solve, inv, tri_inv, cholesky_inv ---- */

/* The batch shape of a (..., N, N) and b (..., N, R) (b_vec: b was a vector) broadcast,
 * with a and b broadcast to it; NULL when fine, else the failed array. */
static nv_array *broadcast_pair(tmp_list *t, const char *op, nv_array **a, nv_array **b) {
  const nv__output *oa = nv__out(*a), *ob = nv__out(*b);
  int bs[NV__MAX_DIMS], nb;
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  if (!nv__broadcast_shapes(oa->shape, oa->ndim - 2, ob->shape, ob->ndim - 2, bs, &nb))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "batch axes of shapes %s and %s cannot be broadcast",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  int shape[NV__MAX_DIMS];
  memcpy(shape, bs, sizeof(int) * (size_t)nb);
  shape[nb] = oa->shape[oa->ndim - 2];
  shape[nb + 1] = oa->shape[oa->ndim - 1];
  *a = T(t, nv_broadcast_to(*a, shape, nb + 2));
  shape[nb + 1] = ob->shape[ob->ndim - 1];
  *b = T(t, nv_broadcast_to(*b, shape, nb + 2));
  return NULL;
}

/* Checks and promotes the operands of solve / solve_triangular: a (..., N, N) square, b a
 * vector (N,) or (..., N, R); both converted to their promoted float dtype (`int_ok`: integers
 * promote to float32, else they fail), b given a trailing axis when a vector. */
static nv_array *solve_operands(tmp_list *t, const char *op, const nv_array *a,
                                const nv_array *b, bool int_ok, nv_array **pa, nv_array **pb,
                                bool *vec) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  nv_dtype dt = nv_promote_types(oa->dtype, ob->dtype);
  if (int_ok && !nv_issubdtype(dt, NV_CATEGORY_INEXACT)) dt = NV_DTYPE_FLOAT32;
  if (dt != NV_DTYPE_FLOAT32 && dt != NV_DTYPE_FLOAT64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "operands must promote to float32 or float64, got %s and %s",
                        nv_dtype_name(oa->dtype), nv_dtype_name(ob->dtype));
  if (oa->ndim < 2 || oa->shape[oa->ndim - 1] != oa->shape[oa->ndim - 2])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the first operand must be square matrices, got shape %s", sa);
  if (ob->ndim < 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the second operand must have at least 1 dimension, got shape %s", sb);
  *vec = ob->ndim == 1;
  int n = oa->shape[oa->ndim - 1];
  int bn = *vec ? ob->shape[0] : ob->shape[ob->ndim - 2];
  if (bn != n)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the last axis of the first operand (shape %s) must match the %s axis "
                        "of the second operand (shape %s)",
                        sa, *vec ? "only" : "second-to-last", sb);
  *pa = T(t, nv__cast_unscoped(a, dt));
  nv_array *bb = T(t, nv__cast_unscoped(b, dt));
  if (*vec) {
    int ax = 1;
    bb = T(t, nv_expand_dims(bb, &ax, 1));
  }
  *pb = bb;
  return broadcast_pair(t, op, pa, pb);
}

/* The solve_triangular primitive over a, b of one batch shape and dtype. */
static nv_array *trsm(const nv_array *a, const nv_array *b, bool upper) {
  const nv__output *ob = nv__out(b);
  out_spec os = {.dt = ob->dtype, .ndim = ob->ndim};
  memcpy(os.shape, ob->shape, sizeof(int) * (size_t)ob->ndim);
  nv__decomp_params p = {.upper = upper};
  nv_array *in[2] = {(nv_array *)a, (nv_array *)b};
  return prim1("solve_triangular", NV__PRIM_SOLVE_TRIANGULAR, in, 2, &p, &os);
}

/* x with its trailing axis removed when b was a vector. */
static nv_array *unvec(tmp_list *t, nv_array *x, bool vec) {
  if (!vec) return x;
  int ax = -1;
  return nv_squeeze(T(t, x), &ax, 1);
}

nv_array *nv_linalg_solve_triangular(const nv_array *a, const nv_array *b, bool upper) {
  tmp_list t;
  begin(&t);
  nv_array *pa, *pb;
  bool vec;
  nv_array *f = solve_operands(&t, "solve_triangular", a, b, false, &pa, &pb, &vec);
  return end1(&t, f ? f : unvec(&t, trsm(pa, pb, upper), vec));
}

/* a⁻¹ b for square a and b of one batch shape and float dtype, through the LU of a. */
static nv_array *lu_solve(tmp_list *t, const nv_array *a, const nv_array *b) {
  nv_array *r[3];
  lu_prim("solve", a, r);
  T(t, r[0]);
  T(t, r[1]);
  T(t, r[2]);
  nv_array *l, *u;
  split_lu(t, r[0], &l, &u);
  T(t, l);
  T(t, u);
  /* a = L[perm] U, so a x = b is L U x = b' with b'[perm[i]] = b[i]: b' = b[argsort(perm)]. */
  int ax = -1;
  nv_array *inv = T(t, nv_argsort(r[2], &ax));
  nv_array *idx = T(t, nv_expand_dims(inv, &ax, 1));
  nv_array *bp = T(t, nv_take_along_axis(b, idx, -2));
  nv_array *y = T(t, trsm(l, bp, false));
  return trsm(u, y, true);
}

nv_array *nv_linalg_solve(const nv_array *a, const nv_array *b) {
  tmp_list t;
  begin(&t);
  nv_array *pa, *pb;
  bool vec;
  nv_array *f = solve_operands(&t, "solve", a, b, true, &pa, &pb, &vec);
  return end1(&t, f ? f : unvec(&t, lu_solve(&t, pa, pb), vec));
}

/* The identity broadcast to the shape of a (..., N, N). */
static nv_array *eye_like(tmp_list *t, const nv_array *a) {
  const nv__output *o = nv__out(a);
  return nv_broadcast_to(T(t, eye(o->shape[o->ndim - 1], o->dtype)), o->shape, o->ndim);
}

nv_array *nv_linalg_inv(const nv_array *a) {
  nv_array *f = check_matrix("inv", a, true, REAL);
  if (f) return f;
  tmp_list t;
  begin(&t);
  return end1(&t, lu_solve(&t, a, T(&t, eye_like(&t, a))));
}

nv_array *nv_linalg_tri_inv(const nv_array *a, bool upper) {
  nv_array *f = check_matrix("tri_inv", a, true, REAL);
  if (f) return f;
  tmp_list t;
  begin(&t);
  return end1(&t, trsm(a, T(&t, eye_like(&t, a)), upper));
}

nv_array *nv_linalg_cholesky_inv(const nv_array *l, bool upper) {
  nv_array *f = check_matrix("cholesky_inv", l, true, REAL);
  if (f) return f;
  tmp_list t;
  begin(&t);
  /* (L Lᵀ)⁻¹ = L⁻ᵀ L⁻¹; (Uᵀ U)⁻¹ = U⁻¹ U⁻ᵀ. */
  nv_array *li = T(&t, trsm(l, T(&t, eye_like(&t, l)), upper));
  nv_array *lit = T(&t, nv_swapaxes(li, -1, -2));
  return end1(&t, upper ? nv_matmul(li, lit) : nv_matmul(lit, li));
}

/* ---- qr, svd, eigh, eig ---- */

nv_status nv_linalg_qr(const nv_array *a, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "qr: the output list is NULL");
  nv_array *f = check_matrix("qr", a, false, REAL);
  if (f) return fail_all(f, out, 2);
  const nv__output *o = nv__out(a);
  int m = o->shape[o->ndim - 2], n = o->shape[o->ndim - 1], k = m < n ? m : n;
  out_spec os[2];
  spec(&os[0], o, o->dtype, m, k);
  spec(&os[1], o, o->dtype, k, n);
  nv__decomp_params p = {0};
  nv_array *in = (nv_array *)a;
  return prim_node("qr", NV__PRIM_QR, &in, 1, &p, os, 2, out);
}

static nv_dtype real_of(nv_dtype dt) { return dt == NV_DTYPE_COMPLEX64 ? NV_DTYPE_FLOAT32 : dt; }

nv_status nv_linalg_svd(const nv_array *a, bool compute_uv, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "svd: the output list is NULL");
  nv_array *f = check_matrix("svd", a, false, REAL | COMPLEX);
  if (f) return fail_all(f, out, compute_uv ? 3 : 1);
  const nv__output *o = nv__out(a);
  int m = o->shape[o->ndim - 2], n = o->shape[o->ndim - 1], k = m < n ? m : n;
  out_spec os[3];
  nv__decomp_params p = {.vectors = compute_uv};
  nv_array *in = (nv_array *)a;
  if (!compute_uv) {
    spec(&os[0], o, real_of(o->dtype), k, -1);
    return prim_node("svd", NV__PRIM_SVD, &in, 1, &p, os, 1, out);
  }
  spec(&os[0], o, o->dtype, m, m);
  spec(&os[1], o, real_of(o->dtype), k, -1);
  spec(&os[2], o, o->dtype, n, n);
  return prim_node("svd", NV__PRIM_SVD, &in, 1, &p, os, 3, out);
}

static nv_status eigh_impl(const char *op, const nv_array *a, const char *uplo, bool vectors,
                           nv_array **out) {
  int nout = vectors ? 2 : 1;
  nv_array *f = check_matrix(op, a, true, REAL | COMPLEX);
  if (f) return fail_all(f, out, nout);
  const nv__output *o = nv__out(a);
  int n = o->shape[o->ndim - 1];
  out_spec os[2];
  spec(&os[0], o, real_of(o->dtype), n, -1);
  spec(&os[1], o, o->dtype, n, n);
  /* MLX reads the lower triangle for "L" and the upper for anything else; NULL is MLX's
   * default, "L". */
  nv__decomp_params p = {.upper = uplo && strcmp(uplo, "L") != 0, .vectors = vectors};
  nv_array *in = (nv_array *)a;
  return prim_node(op, NV__PRIM_EIGH, &in, 1, &p, os, nout, out);
}

nv_status nv_linalg_eigh(const nv_array *a, const char *uplo, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "eigh: the output list is NULL");
  return eigh_impl("eigh", a, uplo, true, out);
}

nv_array *nv_linalg_eigvalsh(const nv_array *a, const char *uplo) {
  nv_array *r;
  eigh_impl("eigvalsh", a, uplo, false, &r);
  return r;
}

static nv_status eig_impl(const char *op, const nv_array *a, bool vectors, nv_array **out) {
  int nout = vectors ? 2 : 1;
  nv_array *f = check_matrix(op, a, true, REAL | COMPLEX);
  if (f) return fail_all(f, out, nout);
  const nv__output *o = nv__out(a);
  int n = o->shape[o->ndim - 1];
  out_spec os[2];
  spec(&os[0], o, NV_DTYPE_COMPLEX64, n, -1);
  spec(&os[1], o, NV_DTYPE_COMPLEX64, n, n);
  nv__decomp_params p = {.vectors = vectors};
  nv_array *in = (nv_array *)a;
  return prim_node(op, NV__PRIM_EIG, &in, 1, &p, os, nout, out);
}

nv_status nv_linalg_eig(const nv_array *a, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "eig: the output list is NULL");
  return eig_impl("eig", a, true, out);
}

nv_array *nv_linalg_eigvals(const nv_array *a) {
  nv_array *r;
  eig_impl("eigvals", a, false, &r);
  return r;
}

/* ---- pinv ---- */

nv_array *nv_linalg_pinv(const nv_array *a) {
  nv_array *f = check_matrix("pinv", a, false, REAL);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int m = o->shape[o->ndim - 2], n = o->shape[o->ndim - 1], k = m < n ? m : n;
  if (k == 0) {
    int shape[NV__MAX_DIMS];
    memcpy(shape, o->shape, sizeof(int) * (size_t)o->ndim);
    shape[o->ndim - 2] = n;
    shape[o->ndim - 1] = m;
    return nv_zeros(shape, o->ndim, o->dtype);
  }
  tmp_list t;
  begin(&t);
  nv_array *usv[3];
  nv_linalg_svd(a, true, usv);
  for (int i = 0; i < 3; i++) T(&t, usv[i]);
  nv_array *u = T(&t, corner(usv[0], m, k)), *vh = T(&t, corner(usv[2], k, n));
  /* 1/s where s > max(M, N) · eps · s_max, else 0 (NumPy's default rcond). */
  double eps = o->dtype == NV_DTYPE_FLOAT64 ? 2.220446049250313e-16 : 1.1920929e-07;
  int last = -1;
  nv_array *smax = T(&t, nv_max(usv[1], &last, 1, true));
  nv_array *cut = T(&t, nv_multiply_scalar(smax, (m > n ? m : n) * eps));
  nv_array *keep = T(&t, nv_greater(usv[1], cut));
  nv_array *rs = T(&t, nv_reciprocal(usv[1]));
  nv_array *zero = T(&t, nv_zeros_like(rs));
  nv_array *sinv = T(&t, nv_where(keep, rs, zero));
  int ax = -2;
  nv_array *col = T(&t, nv_expand_dims(sinv, &ax, 1)); /* (..., 1, K) */
  nv_array *v = T(&t, nv_swapaxes(vh, -1, -2));        /* (..., N, K) */
  nv_array *vs = T(&t, nv_multiply(v, col));
  nv_array *ut = T(&t, nv_swapaxes(u, -1, -2)); /* (..., K, M) */
  return end1(&t, nv_matmul(vs, ut));
}

/* ---- det, slogdet ---- */

/* The LU of `a` in its computing dtype (float32 for integers, bool, float16 and bfloat16),
 * the diagonal of U and the sign of the permutation (the parity of the pivots that moved). */
static nv_array *det_parts(tmp_list *t, const char *op, const nv_array *a, nv_array **diag,
                           nv_array **psign) {
  const nv_array *xs[1] = {a};
  nv_array *f = nv__op_check(op, xs, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  char s[NV__SHAPE_BUF];
  nv__shape_str(o->shape, o->ndim, s, sizeof s);
  if (o->dtype == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "complex inputs are not supported (shape %s)",
                        s);
  if (o->ndim < 2 || o->shape[o->ndim - 1] != o->shape[o->ndim - 2])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "defined only for square matrices of at least 2 dimensions, got shape %s",
                        s);
  nv_dtype dt = o->dtype == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  nv_array *x = T(t, nv__cast_unscoped(a, dt));
  nv_array *r[3];
  lu_prim(op, x, r);
  T(t, r[0]);
  T(t, r[1]);
  T(t, r[2]);
  *diag = T(t, nv_diagonal(r[0], 0, -2, -1));
  int n = o->shape[o->ndim - 1], last = -1;
  nv_array *ar = T(t, nv_arange(0, n, 1, NV_DTYPE_UINT32));
  nv_array *moved = T(t, nv_not_equal(r[1], ar));
  nv_array *cnt = T(t, nv_sum(moved, &last, 1, false));
  /* (-1)^count = 1 - 2 (count mod 2), computed as float. */
  nv_array *cf = T(t, nv_astype(cnt, dt));
  nv_array *half = T(t, nv_multiply_scalar(cf, 0.5));
  nv_array *fl = T(t, nv_floor(half));
  nv_array *odd = T(t, nv_subtract(half, fl)); /* 0 or 0.5 */
  nv_array *m4 = T(t, nv_multiply_scalar(odd, -4.0));
  *psign = T(t, nv_add_scalar(m4, 1.0));
  return NULL;
}

/* `x` (taken as a temporary) in the result dtype of det for input dtype `in`. */
static nv_array *det_out(tmp_list *t, nv_array *x, nv_dtype in) {
  nv_dtype dt = in == NV_DTYPE_FLOAT16 || in == NV_DTYPE_BFLOAT16 || in == NV_DTYPE_FLOAT64
                    ? in
                    : NV_DTYPE_FLOAT32;
  return nv_astype(T(t, x), dt);
}

nv_array *nv_linalg_det(const nv_array *a) {
  tmp_list t;
  begin(&t);
  nv_array *d, *sg;
  nv_array *f = det_parts(&t, "det", a, &d, &sg);
  if (f) return end1(&t, f);
  int last = -1;
  nv_array *p = T(&t, nv_prod(d, &last, 1, false));
  return end1(&t, det_out(&t, nv_multiply(p, sg), nv__out(a)->dtype));
}

nv_status nv_linalg_slogdet(const nv_array *a, nv_array **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "slogdet: the output list is NULL");
  tmp_list t;
  begin(&t);
  nv_array *d, *sg;
  nv_array *f = det_parts(&t, "slogdet", a, &d, &sg);
  if (f) {
    nv__scope_resume();
    for (int i = 0; i < t.n; i++) nv_release(t.a[i]);
    return fail_all(f, out, 2);
  }
  int last = -1;
  nv_array *signs = T(&t, nv_sign(d));
  nv_array *ps = T(&t, nv_prod(signs, &last, 1, false));
  nv_array *logs = T(&t, nv_log(T(&t, nv_abs(d))));
  nv_array *sum = T(&t, nv_sum(logs, &last, 1, false));
  nv_dtype in = nv__out(a)->dtype;
  out[0] = det_out(&t, nv_multiply(ps, sg), in);
  out[1] = det_out(&t, nv_retain(sum), in);
  end(&t, out, 2);
  return nv_array_status(out[0]);
}

/* ---- cross ---- */

/* Component `i` of `x` along `axis` (size 1 kept), or NULL for the missing third of size 2. */
static nv_array *component(tmp_list *t, const nv_array *x, int axis, int i) {
  const nv__output *o = nv__out(x);
  if (i >= o->shape[axis]) return NULL;
  int start[NV__MAX_DIMS] = {0}, stop[NV__MAX_DIMS];
  memcpy(stop, o->shape, sizeof(int) * (size_t)o->ndim);
  start[axis] = i;
  stop[axis] = i + 1;
  return T(t, nv_slice(x, start, stop, NULL, o->ndim));
}

/* p q - r s where a NULL factor is zero; `like` gives a zero's dtype and shape. */
static nv_array *cross_term(tmp_list *t, nv_array *p, nv_array *q, nv_array *r, nv_array *s,
                            const nv_array *like) {
  nv_array *l = p && q ? T(t, nv_multiply(p, q)) : NULL;
  nv_array *rr = r && s ? T(t, nv_multiply(r, s)) : NULL;
  if (l && rr) return T(t, nv_subtract(l, rr));
  if (l) return l;
  if (rr) return T(t, nv_negative(rr));
  return T(t, nv_zeros_like(like));
}

nv_array *nv_linalg_cross(const nv_array *a, const nv_array *b, int axis) {
  static const char *op = "cross";
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  int ndim = oa->ndim > ob->ndim ? oa->ndim : ob->ndim;
  int ax = axis;
  if (oa->ndim == 0 || ob->ndim == 0 || !nv__norm_axis(&ax, ndim) || ax < ndim - oa->ndim ||
      ax < ndim - ob->ndim)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shapes %s and %s",
                        axis, sa, sb);
  int na = oa->shape[ax - (ndim - oa->ndim)], nb = ob->shape[ax - (ndim - ob->ndim)];
  if ((na != 2 && na != 3) || (nb != 2 && nb != 3))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the axis must have size 2 or 3 in both operands, got shapes %s and %s",
                        sa, sb);
  int bs[NV__MAX_DIMS], nbs;
  int sha[NV__MAX_DIMS], shb[NV__MAX_DIMS];
  memcpy(sha, oa->shape, sizeof(int) * (size_t)oa->ndim);
  memcpy(shb, ob->shape, sizeof(int) * (size_t)ob->ndim);
  sha[ax - (ndim - oa->ndim)] = 1;
  shb[ax - (ndim - ob->ndim)] = 1;
  if (!nv__broadcast_shapes(sha, oa->ndim, shb, ob->ndim, bs, &nbs))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "shapes %s and %s cannot be broadcast apart from the axis", sa, sb);
  tmp_list t;
  begin(&t);
  nv_dtype dt = nv_promote_types(oa->dtype, ob->dtype);
  nv_array *ca = T(&t, nv__cast_unscoped(a, dt)), *cb = T(&t, nv__cast_unscoped(b, dt));
  /* Both broadcast to the common shape (axis of size 1 there) plus their own axis size. */
  bs[ax] = na;
  ca = T(&t, nv_broadcast_to(ca, bs, nbs));
  bs[ax] = nb;
  cb = T(&t, nv_broadcast_to(cb, bs, nbs));
  nv_array *x[3], *y[3];
  for (int i = 0; i < 3; i++) {
    x[i] = component(&t, ca, ax, i);
    y[i] = component(&t, cb, ax, i);
  }
  const nv_array *like = x[0];
  nv_array *c[3] = {cross_term(&t, x[1], y[2], x[2], y[1], like),
                    cross_term(&t, x[2], y[0], x[0], y[2], like),
                    cross_term(&t, x[0], y[1], x[1], y[0], like)};
  return end1(&t, nv_concatenate((const nv_array *const *)c, 3, ax));
}

/* ---- norm ---- */

/* The axes of a norm: `axes` normalized (NULL: all of a's), checked distinct and in range. */
static nv_array *norm_axes(const char *op, const nv__output *o, const int *axes, int naxes,
                           int *ax, int *nax, bool ord_given) {
  char s[NV__SHAPE_BUF];
  nv__shape_str(o->shape, o->ndim, s, sizeof s);
  if (!axes) {
    if (ord_given && o->ndim != 1 && o->ndim != 2)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "an ord without axes needs a 1-D or 2-D array, got shape %s", s);
    *nax = o->ndim;
    for (int i = 0; i < o->ndim; i++) ax[i] = i;
    return NULL;
  }
  if (naxes < 1 || naxes > 2)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "1 or 2 axes are supported, got %d", naxes);
  for (int i = 0; i < naxes; i++) {
    ax[i] = axes[i];
    if (!nv__norm_axis(&ax[i], o->ndim))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shape %s",
                          axes[i], s);
  }
  if (naxes == 2 && ax[0] == ax[1])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the axes must differ, got %d twice",
                        axes[0]);
  *nax = naxes;
  return NULL;
}

static bool half_dtype(nv_dtype dt) { return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16; }

/* |x| in the dtype the norm computes in: float32 for integers, bool, float16 and bfloat16
 * (whose results are rounded back once: see half_back), real for complex64. */
static nv_array *norm_abs(tmp_list *t, const nv_array *x) {
  nv_dtype dt = nv__out(x)->dtype;
  nv_array *m = T(t, nv_abs(x));
  if (!nv_issubdtype(dt, NV_CATEGORY_INEXACT) || half_dtype(dt))
    m = T(t, nv_astype(m, NV_DTYPE_FLOAT32));
  return m;
}

/* The norm `r` of `a` (a new reference, taken over) in its result dtype: float16 and bfloat16
 * inputs get their own dtype back, rounded once from the float32 computation. */
static nv_array *half_back(tmp_list *t, nv_array *r, const nv_array *a) {
  nv_dtype dt = nv__out(a)->dtype;
  if (!half_dtype(dt)) return r;
  return nv_astype(T(t, r), dt);
}

/* sqrt(sum |x|²) over the axes. */
static nv_array *two_norm(tmp_list *t, const nv_array *x, const int *ax, int nax, bool keep) {
  nv_array *m = norm_abs(t, x);
  nv_array *sq = T(t, nv_square(m));
  return nv_sqrt(T(t, nv_sum(sq, ax, nax, keep)));
}

nv_array *nv_linalg_norm(const nv_array *a, const int *axes, int naxes, bool keepdims) {
  const nv_array *xs[1] = {a};
  nv_array *f = nv__op_check("norm", xs, 1);
  if (f) return f;
  int ax[NV__MAX_DIMS], nax;
  if ((f = norm_axes("norm", nv__out(a), axes, naxes, ax, &nax, false))) return f;
  tmp_list t;
  begin(&t);
  return end1(&t, half_back(&t, two_norm(&t, a, ax, nax, keepdims), a));
}

/* The singular values of `x` with the matrix axes r, c moved last, reduced by max (ord 2),
 * min (-2) or sum (nuclear), with the axes kept as size 1 when `keep`. */
static nv_array *sv_norm(tmp_list *t, const char *op, const nv_array *x, int r, int c, int kind,
                         bool keep) {
  const nv__output *o = nv__out(x);
  int perm[NV__MAX_DIMS], np = 0;
  for (int i = 0; i < o->ndim; i++)
    if (i != r && i != c) perm[np++] = i;
  perm[np++] = r;
  perm[np++] = c;
  nv_array *m = T(t, nv_transpose(x, perm, np));
  nv_dtype dt = o->dtype;
  if (dt != NV_DTYPE_FLOAT32 && dt != NV_DTYPE_FLOAT64 && dt != NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "singular-value norms need float32, float64 or complex64, got %s",
                        nv_dtype_name(dt));
  nv_array *s;
  nv_linalg_svd(m, false, &s);
  T(t, s);
  int last = -1;
  nv_array *red = T(t, kind == 2    ? nv_max(s, &last, 1, false)
                       : kind == -2 ? nv_min(s, &last, 1, false)
                                    : nv_sum(s, &last, 1, false));
  if (!keep) return nv_retain(red);
  int e[2] = {r < c ? r : c, r < c ? c : r};
  return nv_expand_dims(red, e, 2);
}

/* The matrix norm of order `ord` (a number) or name `name` over axes r, c. */
static nv_array *matrix_norm(tmp_list *t, const char *op, const nv_array *x, int r, int c,
                             double ord, const char *name, bool keep) {
  int ax[2] = {r, c};
  if (name) {
    if (!strcmp(name, "fro")) return two_norm(t, x, ax, 2, keep);
    if (!strcmp(name, "nuc")) return sv_norm(t, op, x, r, c, 0, keep);
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid ord '%s' for a matrix norm", name);
  }
  if (ord == 2 || ord == -2) return sv_norm(t, op, x, r, c, (int)ord, keep);
  if (ord != 1 && ord != -1 && !isinf(ord))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid ord %g for a matrix norm", ord);
  /* 1 / -1: sums along r (the columns' sums), then max / min along c; inf: the reverse. */
  int sum_ax = isinf(ord) ? c : r, ext_ax = isinf(ord) ? r : c;
  nv_array *m = norm_abs(t, x);
  nv_array *sums = T(t, nv_sum(m, &sum_ax, 1, true));
  nv_array *ext = T(t, ord > 0 ? nv_max(sums, &ext_ax, 1, true) : nv_min(sums, &ext_ax, 1, true));
  if (keep) return nv_retain(ext);
  return nv_squeeze(ext, ax, 2);
}

/* The vector norm of order `ord` along `axis`. */
static nv_array *vector_norm(tmp_list *t, const nv_array *x, int axis, double ord, bool keep) {
  nv_array *m = norm_abs(t, x);
  if (ord == INFINITY) return nv_max(m, &axis, 1, keep);
  if (ord == -INFINITY) return nv_min(m, &axis, 1, keep);
  if (ord == 0) {
    nv_array *zero = T(t, nv_zeros_like(m));
    nv_array *nz = T(t, nv_not_equal(m, zero));
    return nv_astype(T(t, nv_sum(nz, &axis, 1, keep)), nv__out(m)->dtype);
  }
  if (ord == 1) return nv_sum(m, &axis, 1, keep);
  if (ord == 2) return two_norm(t, x, &axis, 1, keep);
  nv_array *p = T(t, nv_array_scalar(ord, nv__out(m)->dtype));
  nv_array *pw = T(t, nv_power(m, p));
  nv_array *s = T(t, nv_sum(pw, &axis, 1, keep));
  nv_array *ip = T(t, nv_array_scalar(1.0 / ord, nv__out(m)->dtype));
  return nv_power(s, ip);
}

static nv_array *norm_with(const nv_array *a, double ord, const char *name, const int *axes,
                           int naxes, bool keepdims) {
  static const char *op = "norm";
  const nv_array *xs[1] = {a};
  nv_array *f = nv__op_check(op, xs, 1);
  if (f) return f;
  int ax[NV__MAX_DIMS], nax;
  if ((f = norm_axes(op, nv__out(a), axes, naxes, ax, &nax, true))) return f;
  if (nax == 1 && name)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the norm '%s' is defined only for matrices (2 axes), got 1 axis", name);
  tmp_list t;
  begin(&t);
  nv_array *r = nax == 1 ? vector_norm(&t, a, ax[0], ord, keepdims)
                         : matrix_norm(&t, op, a, ax[0], ax[1], ord, name, keepdims);
  return end1(&t, half_back(&t, r, a));
}

nv_array *nv_linalg_norm_ord(const nv_array *a, double ord, const int *axes, int naxes,
                             bool keepdims) {
  return norm_with(a, ord, NULL, axes, naxes, keepdims);
}

nv_array *nv_linalg_norm_str(const nv_array *a, const char *ord, const int *axes, int naxes,
                             bool keepdims) {
  if (!ord) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "norm", "the ord name is NULL");
  return norm_with(a, 0, ord, axes, naxes, keepdims);
}

/* ---- The primitives for the transform rules ---- */

nv_status nv__linalg_decomp(int prim, nv_array *const *in, const nv__decomp_params *p,
                            nv_array **out) {
  switch (prim) {
  case NV__PRIM_CHOLESKY:
    out[0] = nv_linalg_cholesky(in[0], p->upper);
    return nv_array_status(out[0]);
  case NV__PRIM_LU_FACTOR:
    return lu_prim("lu_factor", in[0], out);
  case NV__PRIM_SOLVE_TRIANGULAR:
    out[0] = nv_linalg_solve_triangular(in[0], in[1], p->upper);
    return nv_array_status(out[0]);
  case NV__PRIM_QR:
    return nv_linalg_qr(in[0], out);
  case NV__PRIM_SVD:
    return nv_linalg_svd(in[0], p->vectors, out);
  case NV__PRIM_EIGH:
    return eigh_impl("eigh", in[0], p->upper ? "U" : "L", p->vectors, out);
  default:
    return eig_impl("eig", in[0], p->vectors, out);
  }
}
