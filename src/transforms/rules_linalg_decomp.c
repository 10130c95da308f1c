/* vjp, jvp and vmap rules of the decompositions (NV__PRIMS_LINALG_DECOMP). The composed
 * functions (solve, inv, det, slogdet, lu, pinv, norm, ...) differentiate through these.
 *
 * Decided rules:
 * - Functions that read one triangle of their input (cholesky, eigh) are differentiated as
 *   the functions they are: the gradient lies in the read triangle (the symmetric gradient
 *   S̄ folded: 2 S̄ off the diagonal, S̄ on it, 0 in the other triangle); the tangent of an
 *   input is symmetrized from its read triangle the same way.
 * - cholesky (L Lᵀ = S): S̄ = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹), Φ = the lower triangle with the diagonal
 *   halved; dL = L Φ(L⁻¹ dS L⁻ᵀ). The upper factor is the transpose of the lower one.
 * - solve_triangular (a x = b): b̄ = a⁻ᵀ x̄, ā = -tri(b̄ xᵀ); dx = a⁻¹ (db - tri(da) x).
 * - lu_factor (square only; the pivots are constants): with a = (L U)[perm] and
 *   X̄ = tril(Lᵀ L̄, -1) + triu(Ū Uᵀ), ā = (L⁻ᵀ X̄ U⁻ᵀ) with its rows taken by perm; the jvp
 *   is dL = L tril(X, -1), dU = triu(X) U with X = L⁻¹ da' U⁻¹ (da' = da's rows unpermuted).
 * - qr (M >= N): ā = (Q̄ + Q copyltu(M)) R⁻ᵀ with M = R R̄ᵀ - Q̄ᵀ Q.
 * - eigh: S̄ = V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ with F_ij = 1 / (w_j - w_i) off the diagonal
 *   (repeated eigenvalues give inf, as PyTorch); dw = diag(Vᵀ dS V), dV = V (F ∘ (Vᵀ dS V)).
 * - svd: ā = U (diag(s̄) + (F ∘ (Uᵀ Ū - Ūᵀ U)) S + S (F ∘ (Vᵀ V̄ - V̄ᵀ V))) Vᵀ with
 *   F_ij = 1 / (s_j² - s_i²) off the diagonal; the U and V terms need square matrices (the
 *   full matrices' extra columns are not unique: NV_ERR_UNSUPPORTED otherwise). The jvp gives
 *   the singular values only, ds = diag(U_Kᵀ da Vh_Kᵀ).
 * - Complex inputs and eig have no derivative rules (NV_ERR_UNSUPPORTED naming the op).
 * - vmap: the batch axis goes in front and the batched primitive runs once. */
#include "nuvec.h"
#include "ops/linalg_decomp.h"
#include "transforms/rule_decls.h"

/* ---- Helpers: each takes over none of its arguments and returns a new reference ---- */

static nv_array *mT(const nv_array *x) { return nv_swapaxes(x, -1, -2); }

static nv_array *mm(const nv_array *a, const nv_array *b) { return nv_matmul(a, b); }

/* The n × n identity of `dt` (empty for n = 0, which nv_eye refuses). */
static nv_array *eye_n(int n, nv_dtype dt) {
  if (n > 0) return nv_eye(n, n, 0, dt);
  int shape[2] = {0, 0};
  return nv_zeros(shape, 2, dt);
}

/* Releases `n` temporaries. */
static void drop(nv_array **xs, int n) {
  for (int i = 0; i < n; i++) nv_release(xs[i]);
}

/* a⁻¹ b for triangular a. */
static nv_array *tsolve(const nv_array *a, const nv_array *b, bool upper) {
  return nv_linalg_solve_triangular(a, b, upper);
}

/* x a⁻¹ for triangular a: (a⁻ᵀ xᵀ)ᵀ. */
static nv_array *tsolve_right(const nv_array *x, const nv_array *a, bool upper) {
  nv_array *at = mT(a), *xt = mT(x);
  nv_array *y = tsolve(at, xt, !upper);
  nv_array *r = mT(y);
  nv_array *t[3] = {at, xt, y};
  drop(t, 3);
  return r;
}

static nv_array *tri(const nv_array *x, bool upper, int k) {
  return upper ? nv_triu(x, k) : nv_tril(x, k);
}

/* The diagonal of x as a diagonal matrix (..., N, N). */
static nv_array *diag_part(const nv_array *x) {
  nv_array *l = nv_tril(x, 0);
  nv_array *r = nv_triu(l, 0);
  nv_release(l);
  return r;
}

/* (x + xᵀ) / 2. */
static nv_array *sym(const nv_array *x) {
  nv_array *t = mT(x), *s = nv_add(x, t);
  nv_array *r = nv_multiply_scalar(s, 0.5);
  nv_release(t);
  nv_release(s);
  return r;
}

/* The gradient of an input whose `upper` (else lower) triangle is read, from the symmetric
 * gradient s: 2 s off the diagonal in that triangle, s on it, 0 elsewhere. */
static nv_array *fold(const nv_array *s, bool upper) {
  nv_array *t = tri(s, upper, upper ? 1 : -1), *t2 = nv_multiply_scalar(t, 2.0);
  nv_array *d = diag_part(s), *r = nv_add(t2, d);
  nv_array *tm[3] = {t, t2, d};
  drop(tm, 3);
  return r;
}

/* The symmetric matrix an input's `upper` (else lower) triangle stands for. */
static nv_array *unfold(const nv_array *x, bool upper) {
  nv_array *t = tri(x, upper, 0), *s = tri(x, upper, upper ? 1 : -1), *st = mT(s);
  nv_array *r = nv_add(t, st);
  nv_array *tm[3] = {t, s, st};
  drop(tm, 3);
  return r;
}

/* Φ(x): the lower triangle with the diagonal halved. */
static nv_array *phi(const nv_array *x) {
  nv_array *l = nv_tril(x, -1), *d = diag_part(x), *h = nv_multiply_scalar(d, 0.5);
  nv_array *r = nv_add(l, h);
  nv_array *tm[3] = {l, d, h};
  drop(tm, 3);
  return r;
}

static nv_status no_complex(const char *op, const nv_array *x) {
  if (meta(x)->dtype != NV_DTYPE_COMPLEX64) return NV_OK;
  return nv__set_error(NV_ERR_UNSUPPORTED, "%s: complex64 inputs have no derivative rule", op);
}

/* A zero array shaped as `like` when `x` is NULL, else x retained. */
static nv_array *or_zero(const nv_array *x, const nv_array *like) {
  return x ? nv_retain((nv_array *)x) : nv_zeros_like(like);
}

/* ---- cholesky ---- */

/* The lower factor and its cotangent / tangent from the node's (upper: transposed). */
static nv_array *lower_of(const nv_array *x, bool upper) { return upper ? mT(x) : nv_retain((nv_array *)x); }

VJP(vjp_cholesky) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("cholesky", in[0]);
  if (st != NV_OK || !want[0]) return st;
  nv_array *l = lower_of(out[0], p->upper), *lb = lower_of(cot[0], p->upper);
  nv_array *lt = mT(l), *pm = mm(lt, lb), *ph = phi(pm);
  nv_array *y = tsolve(lt, ph, true);     /* L⁻ᵀ Φ */
  nv_array *g = tsolve_right(y, l, false); /* L⁻ᵀ Φ L⁻¹ */
  nv_array *s = sym(g);
  grad[0] = fold(s, p->upper);
  nv_array *t[8] = {l, lb, lt, pm, ph, y, g, s};
  drop(t, 8);
  return NV_OK;
}

JVP(jvp_cholesky) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("cholesky", in[0]);
  if (st != NV_OK) return st;
  nv_array *l = lower_of(out[0], p->upper), *lt = mT(l), *ds = unfold(tan[0], p->upper);
  nv_array *x = tsolve(l, ds, false);       /* L⁻¹ dS */
  nv_array *z = tsolve_right(x, lt, true);  /* L⁻¹ dS L⁻ᵀ */
  nv_array *ph = phi(z), *dl = mm(l, ph);
  ot[0] = p->upper ? mT(dl) : nv_retain(dl);
  nv_array *t[7] = {l, lt, ds, x, z, ph, dl};
  drop(t, 7);
  return NV_OK;
}

/* ---- solve_triangular: inputs a, b (one batch shape), output x ---- */

VJP(vjp_solve_triangular) {
  const nv__decomp_params *p = n->params;
  nv_array *at = mT(in[0]);
  nv_array *bb = tsolve(at, cot[0], !p->upper);
  if (want[0]) {
    nv_array *xt = mT(out[0]), *pr = mm(bb, xt), *tr = tri(pr, p->upper, 0);
    grad[0] = nv_negative(tr);
    nv_array *t[3] = {xt, pr, tr};
    drop(t, 3);
  }
  if (want[1]) grad[1] = nv_retain(bb);
  nv_release(bb);
  nv_release(at);
  return NV_OK;
}

JVP(jvp_solve_triangular) {
  const nv__decomp_params *p = n->params;
  nv_array *rhs = tan[1] ? nv_retain(tan[1]) : NULL;
  if (tan[0]) {
    nv_array *tr = tri(tan[0], p->upper, 0), *pr = mm(tr, out[0]);
    nv_array *r = rhs ? nv_subtract(rhs, pr) : nv_negative(pr);
    nv_release(rhs);
    rhs = r;
    nv_release(tr);
    nv_release(pr);
  }
  ot[0] = tsolve(in[0], rhs, p->upper);
  nv_release(rhs);
  return NV_OK;
}

/* ---- lu_factor: input a, outputs LU, pivots, perm ---- */

/* L (unit lower) and U of the compact square LU. */
static void lu_parts(const nv_array *lu, nv_array **l, nv_array **u) {
  const nv__output *o = meta(lu);
  int k = o->shape[o->ndim - 1];
  nv_array *s = nv_tril(lu, -1), *id = eye_n(k, o->dtype);
  *l = nv_add(s, id);
  *u = nv_triu(lu, 0);
  nv_release(s);
  nv_release(id);
}

/* Rows of x taken by idx (uint32 (..., N)) along axis -2. */
static nv_array *rows_by(const nv_array *x, const nv_array *idx) {
  int ax = -1;
  nv_array *e = nv_expand_dims(idx, &ax, 1);
  nv_array *r = nv_take_along_axis(x, e, -2);
  nv_release(e);
  return r;
}

static nv_status lu_square(const nv_array *a) {
  const nv__output *o = meta(a);
  if (o->shape[o->ndim - 1] == o->shape[o->ndim - 2]) return no_complex("lu_factor", a);
  return nv__set_error(NV_ERR_UNSUPPORTED,
                       "lu_factor: derivatives are defined for square matrices only");
}

VJP(vjp_lu_factor) {
  nv_status st = lu_square(in[0]);
  if (st != NV_OK || !want[0] || !cot[0]) return st;
  nv_array *l, *u;
  lu_parts(out[0], &l, &u);
  nv_array *lt = mT(l), *ut = mT(u);
  nv_array *lb = nv_tril(cot[0], -1), *ub = nv_triu(cot[0], 0);
  nv_array *p1 = mm(lt, lb), *p2 = mm(ub, ut);
  nv_array *t1 = nv_tril(p1, -1), *t2 = nv_triu(p2, 0), *xb = nv_add(t1, t2);
  nv_array *y = tsolve(lt, xb, true);          /* L⁻ᵀ X̄ */
  nv_array *g = tsolve_right(y, ut, false);    /* L⁻ᵀ X̄ U⁻ᵀ */
  grad[0] = rows_by(g, out[2]);
  nv_array *t[13] = {l, u, lt, ut, lb, ub, p1, p2, t1, t2, xb, y, g};
  drop(t, 13);
  return NV_OK;
}

JVP(jvp_lu_factor) {
  nv_status st = lu_square(in[0]);
  if (st != NV_OK) return st;
  nv_array *l, *u;
  lu_parts(out[0], &l, &u);
  int ax = -1;
  nv_array *inv = nv_argsort(out[2], &ax), *da = rows_by(tan[0], inv);
  nv_array *z = tsolve(l, da, false);     /* L⁻¹ da' */
  nv_array *x = tsolve_right(z, u, true); /* L⁻¹ da' U⁻¹ */
  nv_array *xl = nv_tril(x, -1), *xu = nv_triu(x, 0);
  nv_array *dl = mm(l, xl), *du = mm(xu, u);
  ot[0] = nv_add(dl, du);
  nv_array *t[10] = {l, u, inv, da, z, x, xl, xu, dl, du};
  drop(t, 10);
  return NV_OK;
}

/* ---- qr: input a, outputs Q, R ---- */

VJP(vjp_qr) {
  const nv__output *o = meta(in[0]);
  nv_status st = no_complex("qr", in[0]);
  if (st != NV_OK || !want[0]) return st;
  if (o->shape[o->ndim - 2] < o->shape[o->ndim - 1])
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "qr: derivatives need at least as many rows as columns, got shape (..., "
                         "%d, %d)",
                         o->shape[o->ndim - 2], o->shape[o->ndim - 1]);
  nv_array *qb = or_zero(cot[0], out[0]), *rb = or_zero(cot[1], out[1]);
  nv_array *rbt = mT(rb), *qbt = mT(qb);
  nv_array *m1 = mm(out[1], rbt), *m2 = mm(qbt, out[0]), *m = nv_subtract(m1, m2);
  nv_array *ml = nv_tril(m, 0), *ms = nv_tril(m, -1), *mst = mT(ms), *cm = nv_add(ml, mst);
  nv_array *qc = mm(out[0], cm), *x = nv_add(qb, qc), *rt = mT(out[1]);
  grad[0] = tsolve_right(x, rt, false); /* x R⁻ᵀ (Rᵀ lower) */
  nv_array *t[14] = {qb, rb, rbt, qbt, m1, m2, m, ml, ms, mst, cm, qc, x, rt};
  drop(t, 14);
  return NV_OK;
}

/* ---- eigh: input a, outputs w (and V) ---- */

/* The eigenvectors of the node's input: its output 1, or a fresh eigh for eigvalsh. */
static nv_array *eigvecs(const nv__node *n, nv_array *const *in, nv_array *const *out) {
  const nv__decomp_params *p = n->params;
  if (p->vectors) return nv_retain(out[1]);
  nv_array *r[2];
  nv_linalg_eigh(in[0], p->upper ? "U" : "L", r);
  nv_release(r[0]);
  return r[1];
}

/* F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it. */
static nv_array *eig_gaps(const nv_array *w) {
  int a1 = -1, a2 = -2;
  nv_array *row = nv_expand_dims(w, &a2, 1), *col = nv_expand_dims(w, &a1, 1);
  nv_array *d = nv_subtract(row, col); /* (i, j): w_j - w_i */
  const nv__output *o = meta(w);
  int k = o->shape[o->ndim - 1];
  nv_array *id = eye_n(k, NV_DTYPE_BOOL), *zero = nv_zeros_like(d);
  nv_array *one = nv_ones_like(d), *safe = nv_where(id, one, d), *inv = nv_reciprocal(safe);
  nv_array *r = nv_where(id, zero, inv);
  nv_array *t[8] = {row, col, d, id, zero, one, safe, inv};
  drop(t, 8);
  return r;
}

VJP(vjp_eigh) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("eigh", in[0]);
  if (st != NV_OK || !want[0]) return st;
  nv_array *v = eigvecs(n, in, out), *vt = mT(v);
  nv_array *inner = NULL;
  if (cot[0]) {
    int a2 = -2;
    nv_array *e = nv_expand_dims(cot[0], &a2, 1);
    nv_array *id = eye_n(meta(v)->shape[meta(v)->ndim - 1], meta(v)->dtype);
    inner = nv_multiply(e, id); /* diag(w̄) */
    nv_release(e);
    nv_release(id);
  }
  if (p->vectors && cot[1]) {
    nv_array *f = eig_gaps(out[0]), *vb = mm(vt, cot[1]), *fv = nv_multiply(f, vb);
    nv_array *sum = inner ? nv_add(inner, fv) : nv_retain(fv);
    nv_release(inner);
    inner = sum;
    nv_release(f);
    nv_release(vb);
    nv_release(fv);
  }
  if (!inner) inner = nv_zeros_like(v);
  nv_array *g1 = mm(v, inner), *g = mm(g1, vt), *s = sym(g);
  grad[0] = fold(s, p->upper);
  nv_array *t[6] = {v, vt, inner, g1, g, s};
  drop(t, 6);
  return NV_OK;
}

JVP(jvp_eigh) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("eigh", in[0]);
  if (st != NV_OK) return st;
  nv_array *v = eigvecs(n, in, out), *vt = mT(v), *ds = unfold(tan[0], p->upper);
  nv_array *m1 = mm(vt, ds), *m = mm(m1, v);
  ot[0] = nv_diagonal(m, 0, -2, -1);
  if (p->vectors) {
    nv_array *f = eig_gaps(out[0]), *fm = nv_multiply(f, m);
    ot[1] = mm(v, fm);
    nv_release(f);
    nv_release(fm);
  }
  nv_array *t[5] = {v, vt, ds, m1, m};
  drop(t, 5);
  return NV_OK;
}

/* ---- svd: the singular values ---- */

/* U_K (..., M, K) and Vh_K (..., K, N) of the node's input. */
static void svd_vectors(const nv__node *n, nv_array *const *in, nv_array *const *out,
                        nv_array **uk, nv_array **vk) {
  const nv__decomp_params *p = n->params;
  nv_array *r[3] = {NULL, NULL, NULL};
  if (p->vectors) {
    r[0] = nv_retain(out[0]);
    r[2] = nv_retain(out[2]);
  } else {
    nv_linalg_svd(in[0], true, r);
    nv_release(r[1]);
  }
  const nv__output *o = meta(in[0]);
  int m = o->shape[o->ndim - 2], nn = o->shape[o->ndim - 1], k = m < nn ? m : nn;
  int start[NV__MAX_DIMS] = {0}, stop[NV__MAX_DIMS];
  memcpy(stop, o->shape, sizeof(int) * (size_t)o->ndim);
  stop[o->ndim - 2] = m;
  stop[o->ndim - 1] = k;
  *uk = nv_slice(r[0], start, stop, NULL, o->ndim);
  stop[o->ndim - 2] = k;
  stop[o->ndim - 1] = nn;
  *vk = nv_slice(r[2], start, stop, NULL, o->ndim);
  nv_release(r[0]);
  nv_release(r[2]);
}

/* F_ij = 1 / (s_j² - s_i²) off the diagonal, 0 on it. */
static nv_array *sv_gaps(const nv_array *s) {
  nv_array *sq = nv_square(s), *f = eig_gaps(sq);
  nv_release(sq);
  return f;
}

/* x (k × k) minus its transpose. */
static nv_array *skew(const nv_array *x) {
  nv_array *t = mT(x), *r = nv_subtract(x, t);
  nv_release(t);
  return r;
}

VJP(vjp_svd) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("svd", in[0]);
  if (st != NV_OK || !want[0]) return st;
  const nv__output *o = meta(in[0]);
  bool square = o->shape[o->ndim - 1] == o->shape[o->ndim - 2];
  bool uv = p->vectors && (cot[0] || cot[2]);
  if (uv && !square)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "svd: derivatives through U and Vh are defined for square matrices only "
                         "(the full matrices' extra columns are not unique); differentiate the "
                         "singular values (compute_uv=False)");
  nv_array *sb = cot[p->vectors ? 1 : 0];
  if (!sb && !uv) return NV_OK;
  nv_array *uk, *vk;
  svd_vectors(n, in, out, &uk, &vk);
  /* inner = diag(s̄) + (F ∘ (Uᵀ Ū - Ūᵀ U)) S + S (F ∘ (Vᵀ V̄ - V̄ᵀ V)), then ā = U inner Vh;
   * with Vh = Vᵀ, Vᵀ V̄ - V̄ᵀ V = Vh V̄hᵀ - V̄h Vhᵀ. */
  nv_array *inner = NULL;
  int a2 = -2;
  if (sb) {
    nv_array *row = nv_expand_dims(sb, &a2, 1);
    nv_array *id = eye_n(o->shape[o->ndim - 1], meta(sb)->dtype);
    inner = nv_multiply(row, id);
    nv_release(row);
    nv_release(id);
  }
  if (uv) {
    nv_array *s = p->vectors ? out[1] : NULL;
    nv_array *f = sv_gaps(s), *srow = nv_expand_dims(s, &a2, 1);
    int a1 = -1;
    nv_array *scol = nv_expand_dims(s, &a1, 1);
    if (cot[0]) {
      nv_array *ut = mT(uk), *m = mm(ut, cot[0]), *j = skew(m), *fj = nv_multiply(f, j);
      nv_array *term = nv_multiply(fj, srow); /* (F ∘ J) S */
      nv_array *sum = inner ? nv_add(inner, term) : nv_retain(term);
      nv_release(inner);
      inner = sum;
      nv_array *t[5] = {ut, m, j, fj, term};
      drop(t, 5);
    }
    if (cot[2]) {
      nv_array *vbt = mT(cot[2]), *m = mm(vk, vbt), *j = skew(m), *fj = nv_multiply(f, j);
      nv_array *term = nv_multiply(scol, fj); /* S (F ∘ K) */
      nv_array *sum = inner ? nv_add(inner, term) : nv_retain(term);
      nv_release(inner);
      inner = sum;
      nv_array *t[5] = {vbt, m, j, fj, term};
      drop(t, 5);
    }
    nv_release(f);
    nv_release(srow);
    nv_release(scol);
  }
  nv_array *g1 = mm(uk, inner);
  grad[0] = mm(g1, vk);
  nv_array *t[4] = {uk, vk, inner, g1};
  drop(t, 4);
  return NV_OK;
}

JVP(jvp_svd) {
  const nv__decomp_params *p = n->params;
  nv_status st = no_complex("svd", in[0]);
  if (st != NV_OK) return st;
  if (p->vectors)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "svd: forward derivatives of U and Vh (full matrices) are not "
                         "supported; use compute_uv=False");
  nv_array *uk, *vk;
  svd_vectors(n, in, out, &uk, &vk);
  nv_array *ut = mT(uk), *vt = mT(vk), *m1 = mm(ut, tan[0]), *m = mm(m1, vt);
  ot[0] = nv_diagonal(m, 0, -2, -1);
  nv_array *t[6] = {uk, vk, ut, vt, m1, m};
  drop(t, 6);
  return NV_OK;
}

/* ---- eig ---- */

VJP(vjp_eig) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "eig: no derivative rule (as MLX)");
}

JVP(jvp_eig) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "eig: no derivative rule (as MLX)");
}

/* ---- vmap: every decomposition is batched over its leading axes ---- */

VMAP(vmap_decomp) {
  const nv__decomp_params *p = n->params;
  int nin = n->prim == NV__PRIM_SOLVE_TRIANGULAR ? 2 : 1;
  nv_array *x[2] = {NULL, NULL};
  int size = nv__tf_batch_size(in, axes, nin);
  for (int i = 0; i < nin; i++) {
    if (axes[i] >= 0) {
      x[i] = nv__tf_moveaxis(in[i], axes[i], 0);
    } else {
      /* An unbatched operand of solve_triangular: broadcast to the batch. */
      const nv__output *o = meta(in[i]);
      int shape[NV__MAX_DIMS + 1];
      shape[0] = size;
      memcpy(shape + 1, o->shape, sizeof(int) * (size_t)o->ndim);
      int zero = 0;
      nv_array *e = nv_expand_dims(in[i], &zero, 1);
      x[i] = nv_broadcast_to(e, shape, o->ndim + 1);
      nv_release(e);
    }
  }
  nv_status st = nv__linalg_decomp(n->prim, x, p, out);
  for (int i = 0; i < n->noutputs; i++) oax[i] = 0;
  nv_release(x[0]);
  nv_release(x[1]);
  return st;
}

void nv__rules_register_linalg_decomp(nv__prim_rule *r) {
  r[NV__PRIM_CHOLESKY] = (nv__prim_rule){vjp_cholesky, jvp_cholesky, vmap_decomp};
  r[NV__PRIM_SOLVE_TRIANGULAR] =
      (nv__prim_rule){vjp_solve_triangular, jvp_solve_triangular, vmap_decomp};
  r[NV__PRIM_LU_FACTOR] = (nv__prim_rule){vjp_lu_factor, jvp_lu_factor, vmap_decomp};
  r[NV__PRIM_QR] = (nv__prim_rule){vjp_qr, NULL, vmap_decomp};
  r[NV__PRIM_SVD] = (nv__prim_rule){vjp_svd, jvp_svd, vmap_decomp};
  r[NV__PRIM_EIGH] = (nv__prim_rule){vjp_eigh, jvp_eigh, vmap_decomp};
  r[NV__PRIM_EIG] = (nv__prim_rule){vjp_eig, jvp_eig, vmap_decomp};
}
