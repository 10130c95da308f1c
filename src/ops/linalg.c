/* Builders of the matrix products: matmul and addmm (primitives), vecdot (a primitive), and
 * tensordot, inner, outer, kron composed from views, matmul and multiply. */
#include "ops/linalg_params.h"
#include "ops/ops_internal.h"

/* ---- Shared checks ---- */

/* The dtype a matrix product computes in: the promotion of the operands' dtypes. Two bool
 * operands fail, as MLX (which accepts only inexact dtypes; nuvec adds exact integers). */
static nv_array *product_dtype(const char *op, const nv__output *oa, const nv__output *ob,
                               nv_dtype *dt) {
  if (oa->dtype == NV_DTYPE_BOOL && ob->dtype == NV_DTYPE_BOOL)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "bool operands are not supported (got bool and bool); convert them to "
                        "a numeric dtype first");
  *dt = nv_promote_types(oa->dtype, ob->dtype);
  return NULL;
}

/* Releases temporaries made while the scopes were suspended, resumes the scopes, and hands
 * the result to the caller's scope as any builder's result. */
static nv_array *finish_composed(nv_array *r, nv_array **tmp, int ntmp) {
  for (int i = 0; i < ntmp; i++) nv_release(tmp[i]);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}

/* The shapes of a@b after MLX's 1-D promotion: a (..., M, K), b (..., K, N), the product
 * (batch..., M, N) and the result with the added axes removed. */
typedef struct mm_shapes {
  bool a1, b1;                 /* a / b was 1-D */
  int out[NV__MAX_DIMS], nout; /* the product as computed */
  int fin[NV__MAX_DIMS], nfin; /* the result */
} mm_shapes;

static nv_array *mm_check(const char *op, const nv__output *oa, const nv__output *ob,
                          mm_shapes *s) {
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (oa->ndim == 0 || ob->ndim == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "operands must have at least one dimension, got shapes %s and %s", sa, sb);
  s->a1 = oa->ndim == 1;
  s->b1 = ob->ndim == 1;
  int K = oa->shape[oa->ndim - 1];
  int Kb = s->b1 ? ob->shape[0] : ob->shape[ob->ndim - 2];
  if (K != Kb)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "last axis of the first operand (shape %s) must match the %s axis of "
                        "the second operand (shape %s)",
                        sa, s->b1 ? "only" : "second-to-last", sb);
  int na = s->a1 ? 0 : oa->ndim - 2, nb = s->b1 ? 0 : ob->ndim - 2, nbatch;
  if (!nv__broadcast_shapes(oa->shape, na, ob->shape, nb, s->out, &nbatch))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "batch axes of shapes %s and %s cannot be broadcast", sa, sb);
  s->nfin = nbatch;
  memcpy(s->fin, s->out, (size_t)nbatch * sizeof(int));
  int M = s->a1 ? 1 : oa->shape[oa->ndim - 2], N = s->b1 ? 1 : ob->shape[ob->ndim - 1];
  s->out[nbatch] = M;
  s->out[nbatch + 1] = N;
  s->nout = nbatch + 2;
  if (!s->a1) s->fin[s->nfin++] = M;
  if (!s->b1) s->fin[s->nfin++] = N;
  return NULL;
}

/* `x` with size-1 axes inserted so that it has `shape` (x's shape with some 1s added). */
static nv_array *reshape_to(nv_array *x, const int *shape, int ndim) {
  if (nv_array_ndim(x) == ndim) return nv_retain(x);
  return nv_reshape(x, shape, ndim);
}

/* The promotion of dtype `dt` with `c` (weak scalars as MLX's Python scalars). */
static nv_dtype promote_with(nv_dtype dt, const nv_array *c) {
  if (!nv__is_weak(c)) return nv_promote_types(dt, nv__out(c)->dtype);
  const nv__constant_params *p = c->node->params;
  if (p && p->is_int) return dt == NV_DTYPE_BOOL ? NV_DTYPE_INT32 : dt;
  return nv_issubdtype(dt, NV_CATEGORY_INEXACT) ? dt : NV_DTYPE_FLOAT32;
}

/* ---- matmul and addmm ---- */

/* a @ b (c NULL) or alpha * (a @ b) + beta * c. */
static nv_array *product(const char *op, const nv_array *c, const nv_array *a, const nv_array *b,
                         double alpha, double beta) {
  const nv_array *xs[3] = {a, b, c};
  nv_array *f = nv__op_check(op, xs, c ? 3 : 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  mm_shapes s;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  if ((f = mm_check(op, oa, ob, &s))) return f;
  if (!c && (f = product_dtype(op, oa, ob, &dt))) return f;
  if (c) {
    /* The promotion of all three, as MLX's addmm (bool a and b with a float c is a float
     * product); alpha and beta are float scalars, so an integer result becomes float32. */
    dt = promote_with(nv_promote_types(oa->dtype, ob->dtype), c);
    if (dt == NV_DTYPE_BOOL)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "bool operands are not supported (a, b and c are all bool)");
    if (!nv_issubdtype(dt, NV_CATEGORY_INEXACT)) dt = NV_DTYPE_FLOAT32;
    const nv__output *oc = nv__out(c);
    int bs[NV__MAX_DIMS], bn;
    bool ok =
        oc->ndim <= s.nfin && nv__broadcast_shapes(oc->shape, oc->ndim, s.fin, s.nfin, bs, &bn);
    for (int i = 0; ok && i < bn; i++) ok = bs[i] == s.fin[i];
    if (!ok) {
      char sc[NV__SHAPE_BUF], so[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "c of shape %s cannot be broadcast to the product's shape %s",
                          nv__shape_str(oc->shape, oc->ndim, sc, sizeof sc),
                          nv__shape_str(s.fin, s.nfin, so, sizeof so));
    }
  }
  nv__scope_suspend();
  nv_array *tmp[8];
  int nt = 0;
  int ashape[NV__MAX_DIMS], bshape[NV__MAX_DIMS];
  int na = oa->ndim + s.a1, nb = ob->ndim + s.b1;
  ashape[0] = 1;
  memcpy(ashape + s.a1, oa->shape, (size_t)oa->ndim * sizeof(int));
  memcpy(bshape, ob->shape, (size_t)ob->ndim * sizeof(int));
  bshape[nb - 1] = s.b1 ? 1 : bshape[nb - 1];
  nv_array *in[3];
  int nin = 0;
  if (c) {
    nv_array *cb = nv_broadcast_to(c, s.fin, s.nfin);
    nv_array *cr = reshape_to(cb, s.out, s.nout);
    tmp[nt++] = cb;
    tmp[nt++] = cr;
    tmp[nt++] = in[nin++] = nv__cast_unscoped(cr, dt);
  }
  nv_array *ar = reshape_to((nv_array *)a, ashape, na);
  nv_array *br = reshape_to((nv_array *)b, bshape, nb);
  tmp[nt++] = ar;
  tmp[nt++] = br;
  tmp[nt++] = in[nin++] = nv__cast_unscoped(ar, dt);
  tmp[nt++] = in[nin++] = nv__cast_unscoped(br, dt);
  int prim = c ? NV__PRIM_ADDMM : NV__PRIM_MATMUL;
  nv__node *n = nv__op_node(prim, in, nin, dt, s.out, s.nout, c ? sizeof(nv__addmm_params) : 0);
  if (n && c) {
    nv__addmm_params *p = n->params;
    p->alpha = alpha;
    p->beta = beta;
  }
  nv_array *r = nv__op_finish(op, n);
  if (s.a1 || s.b1) {
    tmp[nt++] = r;
    r = nv_reshape(r, s.fin, s.nfin);
  }
  return finish_composed(r, tmp, nt);
}

nv_array *nv_matmul(const nv_array *a, const nv_array *b) {
  return product("matmul", NULL, a, b, 1, 0);
}

nv_array *nv_addmm(const nv_array *c, const nv_array *a, const nv_array *b, double alpha,
                   double beta) {
  if (!c) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "addmm", "input c is NULL");
  return product("addmm", c, a, b, alpha, beta);
}

/* ---- tensordot and inner ---- */

/* The contraction of the (normalized, validated) axes of a with those of b: both are permuted
 * to (free, contracted) and (contracted, free), reshaped to matrices and multiplied. */
static nv_array *contract(const char *op, const nv_array *a, const nv_array *b, const int *axa,
                          const int *axb, int n, nv_dtype dt) {
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  int pa[NV__MAX_DIMS], pb[NV__MAX_DIMS], fin[2 * NV__MAX_DIMS], nfin = 0, npa = 0, npb = 0;
  bool ca[NV__MAX_DIMS] = {false}, cb[NV__MAX_DIMS] = {false};
  int64_t M = 1, N = 1, K = 1;
  for (int i = 0; i < n; i++) {
    ca[axa[i]] = cb[axb[i]] = true;
    K *= oa->shape[axa[i]];
  }
  for (int i = 0; i < oa->ndim; i++)
    if (!ca[i]) {
      pa[npa++] = i;
      fin[nfin++] = oa->shape[i];
      M *= oa->shape[i];
    }
  for (int i = 0; i < n; i++) pa[npa++] = axa[i], pb[npb++] = axb[i];
  for (int i = 0; i < ob->ndim; i++)
    if (!cb[i]) {
      pb[npb++] = i;
      fin[nfin++] = ob->shape[i];
      N *= ob->shape[i];
    }
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || nfin > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "the result or the contracted size is too large for int dimensions");
  nv__scope_suspend();
  nv_array *tmp[7];
  int nt = 0;
  int sa[2] = {(int)M, (int)K}, sb[2] = {(int)K, (int)N};
  tmp[nt++] = nv__cast_unscoped(a, dt);
  tmp[nt++] = nv__cast_unscoped(b, dt);
  tmp[nt++] = nv_transpose(tmp[0], pa, oa->ndim);
  tmp[nt++] = nv_transpose(tmp[1], pb, ob->ndim);
  tmp[nt++] = nv_reshape(tmp[2], sa, 2);
  tmp[nt++] = nv_reshape(tmp[3], sb, 2);
  tmp[nt++] = nv_matmul(tmp[4], tmp[5]);
  nv_array *r = nv_reshape(tmp[6], fin, nfin);
  return finish_composed(r, tmp, nt);
}

/* Checks and normalizes the axis pairs of a contraction. */
static nv_array *check_pairs(const char *op, const nv__output *oa, const nv__output *ob,
                             const int *axes_a, const int *axes_b, int n, int *axa, int *axb) {
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (n < 0 || (n > 0 && (!axes_a || !axes_b)))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid axes (%d pairs)", n);
  if (n > oa->ndim || n > ob->ndim)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%d axes given for shapes %s and %s", n, sa,
                        sb);
  bool sa_seen[NV__MAX_DIMS] = {false}, sb_seen[NV__MAX_DIMS] = {false};
  for (int i = 0; i < n; i++) {
    axa[i] = axes_a[i];
    axb[i] = axes_b[i];
    if (!nv__norm_axis(&axa[i], oa->ndim) || sa_seen[axa[i]])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "axis %d is out of range or repeated for the first operand (shape %s)",
                          axes_a[i], sa);
    if (!nv__norm_axis(&axb[i], ob->ndim) || sb_seen[axb[i]])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "axis %d is out of range or repeated for the second operand (shape %s)",
                          axes_b[i], sb);
    sa_seen[axa[i]] = sb_seen[axb[i]] = true;
    if (oa->shape[axa[i]] != ob->shape[axb[i]])
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "axis %d of shape %s and axis %d of shape %s differ in size", axes_a[i],
                          sa, axes_b[i], sb);
  }
  return NULL;
}

nv_array *nv_tensordot_axes(const nv_array *a, const nv_array *b, const int *axes_a,
                            const int *axes_b, int naxes) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("tensordot", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  int axa[NV__MAX_DIMS], axb[NV__MAX_DIMS];
  nv_dtype dt = NV_DTYPE_FLOAT32;
  if ((f = check_pairs("tensordot", oa, ob, axes_a, axes_b, naxes, axa, axb)) ||
      (f = product_dtype("tensordot", oa, ob, &dt)))
    return f;
  return contract("tensordot", a, b, axa, axb, naxes, dt);
}

nv_array *nv_tensordot(const nv_array *a, const nv_array *b, int axes) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("tensordot", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  if (axes < 0 || axes > oa->ndim || axes > ob->ndim) {
    char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "tensordot",
                        "axes must be in [0, %d] for shapes %s and %s, got %d",
                        oa->ndim < ob->ndim ? oa->ndim : ob->ndim,
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb), axes);
  }
  int axa[NV__MAX_DIMS], axb[NV__MAX_DIMS];
  for (int i = 0; i < axes; i++) {
    axa[i] = oa->ndim - axes + i;
    axb[i] = i;
  }
  return nv_tensordot_axes(a, b, axa, axb, axes);
}

nv_array *nv_inner(const nv_array *a, const nv_array *b) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("inner", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  /* With a 0-d operand the inner product is the element-wise product (MLX, NumPy). */
  if (oa->ndim == 0 || ob->ndim == 0) return nv_multiply(a, b);
  if (oa->shape[oa->ndim - 1] != ob->shape[ob->ndim - 1]) {
    char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "inner",
                        "last axes of shapes %s and %s differ in size",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  }
  nv_dtype dt = NV_DTYPE_FLOAT32;
  if ((f = product_dtype("inner", oa, ob, &dt))) return f;
  int axa[1] = {oa->ndim - 1}, axb[1] = {ob->ndim - 1};
  return contract("inner", a, b, axa, axb, 1, dt);
}

/* ---- outer and kron (element-wise products of views) ---- */

nv_array *nv_outer(const nv_array *a, const nv_array *b) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("outer", xs, 2);
  if (f) return f;
  int64_t na = nv__out(a)->size, nb = nv__out(b)->size;
  if (na > INT32_MAX || nb > INT32_MAX)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "outer", "operand too large for int dimensions");
  int sa[2] = {(int)na, 1}, sb[1] = {(int)nb};
  nv__scope_suspend();
  nv_array *tmp[2] = {nv_reshape(a, sa, 2), nv_reshape(b, sb, 1)};
  nv_array *r = nv_multiply(tmp[0], tmp[1]);
  return finish_composed(r, tmp, 2);
}

nv_array *nv_kron(const nv_array *a, const nv_array *b) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("kron", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (oa->size == 0 || ob->size == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "kron",
                        "operands cannot be empty (as MLX), got shapes %s and %s", sa, sb);
  int nd = oa->ndim > ob->ndim ? oa->ndim : ob->ndim;
  if (2 * nd > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "kron", "too many dimensions (%d)", nd);
  /* a as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...) is (a0, b0, a1, b1, ...), which
   * reads as the Kronecker product once adjacent axes are merged. */
  int ia[2 * NV__MAX_DIMS], ib[2 * NV__MAX_DIMS], fin[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int da = i < nd - oa->ndim ? 1 : oa->shape[i - (nd - oa->ndim)];
    int db = i < nd - ob->ndim ? 1 : ob->shape[i - (nd - ob->ndim)];
    if ((int64_t)da * db > INT32_MAX)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, "kron",
                          "result too large for int dimensions (shapes %s and %s)", sa, sb);
    ia[2 * i] = da;
    ia[2 * i + 1] = 1;
    ib[2 * i] = 1;
    ib[2 * i + 1] = db;
    fin[i] = da * db;
  }
  nv__scope_suspend();
  nv_array *tmp[3] = {nv_reshape(a, ia, 2 * nd), nv_reshape(b, ib, 2 * nd), NULL};
  tmp[2] = nv_multiply(tmp[0], tmp[1]);
  nv_array *r = nv_reshape(tmp[2], fin, nd);
  return finish_composed(r, tmp, 3);
}

/* ---- vecdot ---- */

/* MLX's sum dtype: bool and narrow integers widen to 32 bits. */
static nv_dtype sum_dtype(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_BOOL:
    case NV_DTYPE_INT8:
    case NV_DTYPE_INT16: return NV_DTYPE_INT32;
    case NV_DTYPE_UINT8:
    case NV_DTYPE_UINT16: return NV_DTYPE_UINT32;
    default: return dt;
  }
}

/* `x` with axis `axis` moved to the end (a view). */
static nv_array *axis_last(const nv_array *x, int axis) {
  int nd = nv__out(x)->ndim, perm[NV__MAX_DIMS], k = 0;
  for (int i = 0; i < nd; i++)
    if (i != axis) perm[k++] = i;
  perm[k] = axis;
  return nv_transpose(x, perm, nd);
}

nv_array *nv_vecdot(const nv_array *a, const nv_array *b, int axis) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("vecdot", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb);
  if (oa->ndim == 0 || ob->ndim == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "vecdot",
                        "operands must have at least one dimension, got shapes %s and %s", sa, sb);
  int ax = axis, bx = axis;
  if (!nv__norm_axis(&ax, oa->ndim) || !nv__norm_axis(&bx, ob->ndim))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "vecdot",
                        "axis %d is out of range for shapes %s and %s", axis, sa, sb);
  if (oa->shape[ax] != ob->shape[bx])
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "vecdot",
                        "shapes %s and %s differ in size along axis %d", sa, sb, axis);
  int ra[NV__MAX_DIMS], rb[NV__MAX_DIMS], out[NV__MAX_DIMS], nout, k = 0;
  for (int i = 0; i < oa->ndim; i++)
    if (i != ax) ra[k++] = oa->shape[i];
  k = 0;
  for (int i = 0; i < ob->ndim; i++)
    if (i != bx) rb[k++] = ob->shape[i];
  if (!nv__broadcast_shapes(ra, oa->ndim - 1, rb, ob->ndim - 1, out, &nout))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "vecdot",
                        "shapes %s and %s cannot be broadcast outside axis %d", sa, sb, axis);
  nv_dtype dt = sum_dtype(nv_promote_types(oa->dtype, ob->dtype));
  nv__scope_suspend();
  nv_array *tmp[4] = {axis_last(a, ax), axis_last(b, bx), NULL, NULL};
  tmp[2] = nv__cast_unscoped(tmp[0], dt);
  tmp[3] = nv__cast_unscoped(tmp[1], dt);
  nv__node *n = nv__op_node(NV__PRIM_VECDOT, tmp + 2, 2, dt, out, nout, 0);
  nv_array *r = nv__op_finish("vecdot", n);
  return finish_composed(r, tmp, 4);
}
