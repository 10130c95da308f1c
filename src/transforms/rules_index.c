/* vjp, jvp and vmap rules of the index family's primitives (src/ops/prims_index.h): take,
 * gather, take_along_axis, the scatters, put_along_axis, masked_scatter, the dynamic slices,
 * slice_update_add/prod/max/min, diagonal, diag, concatenate, pad and diff. The shape ops that
 * compose core primitives (flip, split, repeat, tile, roll, ...) need no rules of their own.
 *
 * Rules compose op builders, so they are themselves differentiable and batchable. Gradients
 * never flow to index arrays, masks or dynamic starts. The decided rules (also in
 * docs/transforms.md):
 * - scatter (assign) and put_along_axis: with duplicate indices only the update that is
 *   written (the last in row-major order) gets the cotangent, which is the derivative (MLX
 *   gives it to every duplicate); the base gets the cotangent where nothing was written.
 * - scatter_max/min and slice_update_max/min: as MLX, the base and every update equal to the
 *   result get the full cotangent (ties are not split).
 * - scatter_prod and slice_update_prod (MLX has no rule): the exact derivative of the product,
 *   zeros included (the product of the other factors, without dividing by a zero).
 * - Batched indices or starts under vmap become a gather or a scatter with a batch index. */
#include "ops/index_params.h"
#include "transforms/rule_decls.h"

static bool inexact(const nv_array *x) { return nv_issubdtype(meta(x)->dtype, NV_CATEGORY_INEXACT); }

/* ---- Small helpers ---- */

/* Adds two possibly-NULL terms (taken over). */
static nv_array *add_terms(nv_array *a, nv_array *b) {
  if (!a) return b;
  if (!b) return a;
  nv_array *r = nv_add(a, b);
  nv_release(a);
  nv_release(b);
  return r;
}

/* op(a, b) with `a` taken over. */
static nv_array *take_bin(nv_array *a, nv_array *(*op)(const nv_array *, const nv_array *),
                          const nv_array *b) {
  nv_array *r = op(a, b);
  nv_release(a);
  return r;
}

/* Releases `b` and returns `a` (for one-line chains). */
static nv_array *drop(nv_array *a, nv_array *b) {
  nv_release(b);
  return a;
}

/* The tangent `t`, or zeros of x's shape and dtype when it is NULL (a new reference). */
static nv_array *or_zeros(const nv_array *t, const nv_array *x) {
  return t ? nv_retain((nv_array *)t) : nv_zeros_like(x);
}

/* A shape with `b` in front. */
static void batched_shape(int b, const int *shape, int nd, int *out) {
  out[0] = b;
  memcpy(out + 1, shape, sizeof(int) * (size_t)nd);
}

/* `x` with its batch axis moved to the front, or, unbatched, with a new axis of size 1 there
 * (it then broadcasts against the batched operands). */
static nv_array *front1(const nv_array *x, int ax) {
  if (ax >= 0) return nv__tf_moveaxis(x, ax, 0);
  int zero = 0;
  return nv_expand_dims(x, &zero, 1);
}

/* `x` with its batch axis moved to the front, or, unbatched, broadcast to a batch of `b`. */
static nv_array *materialize(const nv_array *x, int ax, int b) {
  if (ax >= 0) return nv__tf_moveaxis(x, ax, 0);
  const nv__output *o = meta(x);
  int shape[NV__MAX_DIMS];
  batched_shape(b, o->shape, o->ndim, shape);
  return nv_broadcast_to(x, shape, o->ndim + 1);
}

/* The dtype of positions and ranks counted up to `n`. */
static nv_dtype count_dtype(int64_t n) { return n < INT32_MAX ? NV_DTYPE_INT32 : NV_DTYPE_INT64; }

/* 0, 1, ..., n-1 of `dt` as an array of `nd` dimensions, all 1 but axis `at` (size n). */
static nv_array *iota(int64_t n, int nd, int at, nv_dtype dt) {
  nv_array *r = nv_arange(0, (double)n, 1, dt);
  int shape[NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) shape[d] = d == at ? (int)n : 1;
  return drop(nv_reshape(r, shape, nd), r);
}

/* The batch index of a gather or scatter: 0..b-1 on the first of rank + 1 dimensions. */
static nv_array *batch_index(int b, int rank) { return iota(b, rank + 1, 0, NV_DTYPE_INT32); }

/* 1 where a == b, else 0, in dtype `dt` (NaN equals nothing). */
static nv_array *eq_mask(const nv_array *a, const nv_array *b, nv_dtype dt) {
  nv_array *ge = nv__tf_compare(a, b, NV__CMP_GE), *le = nv__tf_compare(a, b, NV__CMP_LE);
  nv_array *g = nv_astype(ge, dt), *l = nv_astype(le, dt);
  nv_array *r = nv_multiply(g, l);
  nv_release(ge);
  nv_release(le);
  nv_release(g);
  nv_release(l);
  return r;
}

/* 1 where x == 0 (complex: both parts), else 0, in x's dtype. */
static nv_array *zero_mask(const nv_array *x) {
  nv_dtype dt = meta(x)->dtype;
  nv_array *ax = dt == NV_DTYPE_COMPLEX64 ? nv_abs(x) : nv_retain((nv_array *)x);
  nv_array *z = nv_zeros(NULL, 0, meta(ax)->dtype);
  nv_array *m = eq_mask(ax, z, meta(ax)->dtype);
  nv_array *r = nv_astype(m, dt);
  nv_release(ax);
  nv_release(z);
  nv_release(m);
  return r;
}

/* The scatter builder of a scatter primitive. */
static nv_array *scatter_op(int prim, const nv_array *a, nv_array *const *idx, int nidx,
                            const nv_array *upd, const int *axes) {
  const nv_array *const *ix = (const nv_array *const *)idx;
  switch (prim) {
    case NV__PRIM_SCATTER: return nv_scatter(a, ix, nidx, upd, axes);
    case NV__PRIM_SCATTER_ADD: return nv_scatter_add(a, ix, nidx, upd, axes);
    case NV__PRIM_SCATTER_PROD: return nv_scatter_prod(a, ix, nidx, upd, axes);
    case NV__PRIM_SCATTER_MAX: return nv_scatter_max(a, ix, nidx, upd, axes);
    default: return nv_scatter_min(a, ix, nidx, upd, axes);
  }
}

/* ---- take and its adjoint ---- */

/* The adjoint of take(., idx, axis) from an array of `shape`: `cot` (shape[:axis] + I +
 * shape[axis+1:]) summed into zeros of `shape` at the indices. */
static nv_array *take_vjp(const nv_array *cot, const nv_array *idx, int axis, const int *shape,
                          int nd) {
  int ni = meta(idx)->ndim, perm[NV__MAX_DIMS], k = 0;
  for (int i = 0; i < ni; i++) perm[k++] = axis + i;
  for (int i = 0; i < axis; i++) perm[k++] = i;
  for (int i = axis + ni; i < meta(cot)->ndim; i++) perm[k++] = i;
  /* The updates are I + S, with S the array's shape with 1 on the axis. */
  nv_array *t = nv_transpose(cot, perm, k);
  int at = ni + axis;
  nv_array *u = drop(nv_expand_dims(t, &at, 1), t);
  nv_array *z = nv_zeros(shape, nd, meta(cot)->dtype);
  nv_array *ia[1] = {(nv_array *)idx};
  nv_array *r = nv_scatter_add(z, (const nv_array *const *)ia, 1, u, &axis);
  nv_release(z);
  nv_release(u);
  return r;
}

VJP(vjp_take) {
  const nv__axis_params *p = n->params;
  if (want[0] && inexact(in[0]))
    grad[0] = take_vjp(cot[0], in[1], p->axis, meta(in[0])->shape, meta(in[0])->ndim);
  return NV_OK;
}

JVP(jvp_take) {
  if (tan[0]) ot[0] = nv_take(tan[0], in[1], ((const nv__axis_params *)n->params)->axis);
  return NV_OK;
}

VMAP(vmap_take) {
  int axis = ((const nv__axis_params *)n->params)->axis;
  if (axes[1] < 0) {
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    out[0] = drop(nv_take(a, in[1], axis + 1), a);
    oax[0] = 0;
    return NV_OK;
  }
  if (axes[0] < 0) {
    out[0] = nv_take(in[0], in[1], axis);
    oax[0] = axis + axes[1];
    return NV_OK;
  }
  /* Both batched: a gather with the batch index on axis 0 and the indices on axis + 1. */
  int b = nv__tf_batch_size(in, axes, 2), nd = meta(in[0])->ndim, ni = meta(in[1])->ndim - 1;
  nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0), *ix = nv__tf_moveaxis(in[1], axes[1], 0);
  nv_array *idx[2] = {batch_index(b, ni), ix};
  int gax[2] = {0, axis + 1}, size[NV__MAX_DIMS];
  memcpy(size, meta(a)->shape, sizeof(int) * (size_t)nd);
  size[0] = size[axis + 1] = 1;
  nv_array *g = nv_gather(a, (const nv_array *const *)idx, 2, gax, size, nd);
  /* (B, I, 1, A[:axis], 1, A[axis+1:]) → (B, A[:axis], I, A[axis+1:]). */
  int sq[2] = {1 + ni, 2 + ni + axis}, perm[NV__MAX_DIMS], k = 0;
  nv_array *s = drop(nv_squeeze(g, sq, 2), g);
  perm[k++] = 0;
  for (int i = 0; i < axis; i++) perm[k++] = 1 + ni + i;
  for (int i = 0; i < ni; i++) perm[k++] = 1 + i;
  for (int i = 1 + ni + axis; i < meta(s)->ndim; i++) perm[k++] = i;
  out[0] = drop(nv_transpose(s, perm, k), s);
  oax[0] = 0;
  nv_release(a);
  nv__tf_release_all(idx, 2);
  return NV_OK;
}

/* ---- gather ---- */

/* The slice sizes of a gather node: the trailing a.ndim axes of its output. */
static const int *gather_sizes(const nv__node *n, int ond) {
  return n->out[0].shape + n->out[0].ndim - ond;
}

VJP(vjp_gather) {
  const nv__gather_params *p = n->params;
  if (!want[0] || !inexact(in[0])) return NV_OK;
  nv_array *z = nv_zeros_like(in[0]);
  grad[0] = nv_scatter_add(z, (const nv_array *const *)(in + 1), p->naxes, cot[0], p->data);
  nv_release(z);
  return NV_OK;
}

JVP(jvp_gather) {
  const nv__gather_params *p = n->params;
  int nd = meta(in[0])->ndim;
  if (tan[0])
    ot[0] = nv_gather(tan[0], (const nv_array *const *)(in + 1), p->naxes, p->data,
                      gather_sizes(n, nd), nd);
  return NV_OK;
}

VMAP(vmap_gather) {
  const nv__gather_params *p = n->params;
  int nidx = p->naxes, nd = meta(in[0])->ndim - (axes[0] >= 0);
  int ind = n->out[0].ndim - nd, b = nv__tf_batch_size(in, axes, nidx + 1);
  const int *size = gather_sizes(n, nd);
  bool idx_batched = false;
  for (int j = 0; j < nidx; j++) idx_batched |= axes[j + 1] >= 0;
  int gax[NV__MAX_DIMS + 1], gsize[NV__MAX_DIMS + 1];
  if (!idx_batched) {
    /* One gather of slices that span the batch: (I, B, S). */
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    for (int j = 0; j < nidx; j++) gax[j] = p->data[j] + 1;
    batched_shape(b, size, nd, gsize);
    out[0] = drop(nv_gather(a, (const nv_array *const *)(in + 1), nidx, gax, gsize, nd + 1), a);
    oax[0] = ind;
    return NV_OK;
  }
  nv_array *idx[NV__MAX_DIMS + 1];
  int k = 0;
  if (axes[0] >= 0) idx[k++] = batch_index(b, ind);
  for (int j = 0; j < nidx; j++) idx[k++] = nv__tf_front(in[j + 1], axes[j + 1], ind);
  if (axes[0] < 0) {
    out[0] = nv_gather(in[0], (const nv_array *const *)idx, k, p->data, size, nd);
  } else {
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    gax[0] = 0;
    for (int j = 0; j < nidx; j++) gax[j + 1] = p->data[j] + 1;
    gsize[0] = 1;
    memcpy(gsize + 1, size, sizeof(int) * (size_t)nd);
    nv_array *g = nv_gather(a, (const nv_array *const *)idx, k, gax, gsize, nd + 1);
    int sq = 1 + ind;
    out[0] = drop(nv_squeeze(g, &sq, 1), g);
    nv_release(a);
  }
  oax[0] = 0;
  nv__tf_release_all(idx, (size_t)k);
  return NV_OK;
}

/* ---- take_along_axis / put_along_axis ---- */

/* The adjoint of take_along_axis(., idx, axis) from an array of `shape` (idx has the
 * cotangent's shape): a scatter_add with an index array on every axis. */
static nv_array *gather_axis_vjp(const nv_array *cot, const nv_array *idx, int axis,
                                 const int *shape, int nd) {
  const nv__output *c = meta(cot);
  nv_array *ix[NV__MAX_DIMS];
  int ax[NV__MAX_DIMS], ushape[2 * NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    ax[d] = d;
    ix[d] = d == axis ? nv_retain((nv_array *)idx) : iota(c->shape[d], nd, d, NV_DTYPE_INT32);
  }
  memcpy(ushape, c->shape, sizeof(int) * (size_t)nd);
  for (int d = 0; d < nd; d++) ushape[nd + d] = 1;
  nv_array *u = nv_reshape(cot, ushape, 2 * nd);
  nv_array *z = nv_zeros(shape, nd, c->dtype);
  nv_array *r = nv_scatter_add(z, (const nv_array *const *)ix, nd, u, ax);
  nv_release(u);
  nv_release(z);
  nv__tf_release_all(ix, (size_t)nd);
  return r;
}

VJP(vjp_gather_axis) {
  int axis = ((const nv__axis_params *)n->params)->axis;
  if (want[0] && inexact(in[0]))
    grad[0] = gather_axis_vjp(cot[0], in[1], axis, meta(in[0])->shape, meta(in[0])->ndim);
  return NV_OK;
}

JVP(jvp_gather_axis) {
  if (tan[0])
    ot[0] = nv_take_along_axis(tan[0], in[1], ((const nv__axis_params *)n->params)->axis);
  return NV_OK;
}

VMAP(vmap_gather_axis) {
  int axis = ((const nv__axis_params *)n->params)->axis;
  nv_array *a = front1(in[0], axes[0]), *ix = front1(in[1], axes[1]);
  out[0] = nv_take_along_axis(a, ix, axis + 1);
  oax[0] = 0;
  nv_release(a);
  nv_release(ix);
  return NV_OK;
}

/* 1 where the update at each position of `idx` (shape of the updates) is the one written by
 * put_along_axis into an array of `shape` (the last in row-major order), else 0, in `dt`. */
static nv_array *put_winner(const nv_array *idx, int axis, const int *shape, int nd, nv_dtype dt) {
  const nv__output *im = meta(idx);
  nv_dtype it = count_dtype(im->size);
  nv_array *flat = nv_arange(0, (double)im->size, 1, it);
  nv_array *ids = drop(nv_reshape(flat, im->shape, im->ndim), flat);
  nv_array *base = nv_full(shape, nd, -1, it);
  nv_array *w = nv_put_along_axis(base, idx, ids, axis);
  nv_array *back = nv_take_along_axis(w, idx, axis);
  /* The winner has the largest id of those that write the same element. */
  nv_array *ge = nv__tf_compare(ids, back, NV__CMP_GE);
  nv_array *r = nv_astype(ge, dt);
  nv_release(ids);
  nv_release(base);
  nv_release(w);
  nv_release(back);
  nv_release(ge);
  return r;
}

VJP(vjp_scatter_axis) {
  int axis = ((const nv__axis_params *)n->params)->axis;
  if (!inexact(in[0])) return NV_OK;
  if (want[0]) {
    nv_array *z = nv_zeros(NULL, 0, meta(cot[0])->dtype);
    grad[0] = nv_put_along_axis(cot[0], in[1], z, axis);
    nv_release(z);
  }
  if (want[2]) {
    const nv__output *o = meta(out[0]);
    nv_array *g = nv_take_along_axis(cot[0], in[1], axis);
    nv_array *m = put_winner(in[1], axis, o->shape, o->ndim, meta(cot[0])->dtype);
    grad[2] = drop(nv_multiply(g, m), g);
    nv_release(m);
  }
  return NV_OK;
}

JVP(jvp_scatter_axis) {
  nv_array *a = or_zeros(tan[0], in[0]), *v = or_zeros(tan[2], in[2]);
  ot[0] = nv_put_along_axis(a, in[1], v, ((const nv__axis_params *)n->params)->axis);
  nv_release(a);
  nv_release(v);
  return NV_OK;
}

VMAP(vmap_scatter_axis) {
  int axis = ((const nv__axis_params *)n->params)->axis;
  nv_array *x[3];
  for (int i = 0; i < 3; i++) x[i] = front1(in[i], axes[i]);
  out[0] = nv_put_along_axis(x[0], x[1], x[2], axis + 1);
  oax[0] = 0;
  nv__tf_release_all(x, 3);
  return NV_OK;
}

/* ---- scatter, scatter_add, scatter_prod, scatter_max, scatter_min ---- */

/* The slice shape S of a scatter's updates (I + S). */
static const int *update_slice(const nv_array *upd, int nd) {
  return meta(upd)->shape + meta(upd)->ndim - nd;
}

/* The values of `x` (shape of the scatter's base) at each update's position (shape I + S). */
static nv_array *gather_at(const nv_array *x, nv_array *const *idx, int nidx, const int *axes,
                           const nv_array *upd) {
  int nd = meta(x)->ndim;
  return nv_gather(x, (const nv_array *const *)idx, nidx, axes, update_slice(upd, nd), nd);
}

/* 1 for the elements of the updates that scatter (assign) writes last, else 0, in `dt`: the
 * position of each slice in row-major order of I is scattered, gathered back and compared. */
static nv_array *scatter_winner(const nv_array *a, nv_array *const *idx, int nidx,
                                const int *axes, const nv_array *upd, nv_dtype dt) {
  const nv__output *u = meta(upd), *o = meta(a);
  int ind = u->ndim - o->ndim;
  int64_t count = 1;
  for (int d = 0; d < ind; d++) count *= u->shape[d];
  nv_dtype it = count_dtype(count);
  nv_array *flat = nv_arange(0, (double)count, 1, it);
  int shape[2 * NV__MAX_DIMS];
  memcpy(shape, u->shape, sizeof(int) * (size_t)ind);
  for (int d = 0; d < o->ndim; d++) shape[ind + d] = 1;
  nv_array *r1 = drop(nv_reshape(flat, shape, u->ndim), flat);
  nv_array *ids = drop(nv_broadcast_to(r1, u->shape, u->ndim), r1);
  nv_array *base = nv_full(o->shape, o->ndim, -1, it);
  nv_array *w = nv_scatter(base, (const nv_array *const *)idx, nidx, ids, axes);
  nv_array *back = gather_at(w, idx, nidx, axes, upd);
  nv_array *ge = nv__tf_compare(ids, back, NV__CMP_GE);
  nv_array *r = nv_astype(ge, dt);
  nv_release(ids);
  nv_release(base);
  nv_release(w);
  nv_release(back);
  nv_release(ge);
  return r;
}

/* For scatter_prod: P, the product of the updates that reach each element of the base (1
 * where none does), and for each update element the product of the other factors that reach
 * the same element (exact with zeros: no division by a zero). */
static void prod_parts(const nv_array *a, nv_array *const *idx, int nidx, const int *axes,
                       const nv_array *upd, nv_array **all, nv_array **others) {
  nv_dtype dt = meta(upd)->dtype;
  nv_array *one = nv_ones_like(a), *zero = nv_zeros_like(a);
  if (all) *all = nv_scatter_prod(one, (const nv_array *const *)idx, nidx, upd, axes);
  if (others) {
    /* Z: how many zero updates reach the element; Q: the product of the nonzero ones. For an
     * update u: u != 0 gives Q/u when Z == 0 (else 0); u == 0 gives Q when Z == 1 (else 0). */
    nv_array *uz = zero_mask(upd);
    nv_array *unz = nv_add(upd, uz);
    nv_array *zc = nv_scatter_add(zero, (const nv_array *const *)idx, nidx, uz, axes);
    nv_array *q = nv_scatter_prod(one, (const nv_array *const *)idx, nidx, unz, axes);
    nv_array *zg = gather_at(zc, idx, nidx, axes, upd), *qg = gather_at(q, idx, nidx, axes, upd);
    nv_array *half = nv_array_scalar(0.5, dt), *one5 = nv_array_scalar(1.5, dt);
    nv_array *lt05 = nv__tf_compare(zg, half, NV__CMP_LT), *lt15 = nv__tf_compare(zg, one5, NV__CMP_LT);
    nv_array *none = nv_astype(lt05, dt), *upto1 = nv_astype(lt15, dt);
    nv_array *exactly1 = nv_subtract(upto1, none);
    nv_array *t1 = take_bin(nv_divide(qg, unz), nv_multiply, none);
    nv_array *notz = nv_ones_like(uz);
    notz = take_bin(notz, nv_subtract, uz);
    t1 = take_bin(t1, nv_multiply, notz);
    nv_array *t2 = take_bin(nv_multiply(qg, exactly1), nv_multiply, uz);
    *others = nv_add(t1, t2);
    nv_array *tmp[] = {uz, unz, zc, q, zg, qg, half, one5, lt05, lt15, none, upto1, exactly1,
                       t1, notz, t2};
    nv__tf_release_all(tmp, sizeof tmp / sizeof *tmp);
  }
  nv_release(one);
  nv_release(zero);
}

VJP(vjp_scatter) {
  const nv__gather_params *p = n->params;
  int nidx = p->naxes, ui = nidx + 1;
  nv_array *const *idx = in + 1;
  const nv_array *a = in[0], *u = in[ui], *c = cot[0];
  nv_dtype dt = meta(c)->dtype;
  if (!inexact(a)) return NV_OK;
  switch (n->prim) {
    case NV__PRIM_SCATTER:
      if (want[0]) {
        nv_array *z = nv_zeros_like(u);
        grad[0] = nv_scatter(c, (const nv_array *const *)idx, nidx, z, p->data);
        nv_release(z);
      }
      if (want[ui]) {
        nv_array *g = gather_at(c, idx, nidx, p->data, u);
        nv_array *m = scatter_winner(a, idx, nidx, p->data, u, dt);
        grad[ui] = drop(nv_multiply(g, m), g);
        nv_release(m);
      }
      break;
    case NV__PRIM_SCATTER_ADD:
      if (want[0]) grad[0] = nv_retain((nv_array *)c);
      if (want[ui]) grad[ui] = gather_at(c, idx, nidx, p->data, u);
      break;
    case NV__PRIM_SCATTER_PROD: {
      nv_array *all = NULL, *others = NULL;
      prod_parts(a, idx, nidx, p->data, u, want[0] ? &all : NULL, want[ui] ? &others : NULL);
      if (want[0]) grad[0] = drop(nv_multiply(c, all), all);
      if (want[ui]) {
        nv_array *ca = nv_multiply(c, a);
        nv_array *g = drop(gather_at(ca, idx, nidx, p->data, u), ca);
        grad[ui] = drop(nv_multiply(g, others), g);
        nv_release(others);
      }
      break;
    }
    default: {
      /* max / min: as MLX, every input equal to the result gets the whole cotangent. */
      if (want[0]) {
        nv_array *m = eq_mask(out[0], a, dt);
        grad[0] = drop(nv_multiply(c, m), m);
      }
      if (want[ui]) {
        nv_array *g = gather_at(c, idx, nidx, p->data, u);
        nv_array *r = gather_at(out[0], idx, nidx, p->data, u);
        nv_array *m = drop(eq_mask(r, u, dt), r);
        grad[ui] = drop(drop(nv_multiply(g, m), g), m);
      }
      break;
    }
  }
  return NV_OK;
}

JVP(jvp_scatter) {
  const nv__gather_params *p = n->params;
  int nidx = p->naxes, ui = nidx + 1;
  nv_array *const *idx = in + 1;
  const nv_array *a = in[0], *u = in[ui];
  nv_dtype dt = meta(out[0])->dtype;
  if (n->prim == NV__PRIM_SCATTER || n->prim == NV__PRIM_SCATTER_ADD) {
    nv_array *ta = or_zeros(tan[0], a), *tu = or_zeros(tan[ui], u);
    ot[0] = scatter_op(n->prim, ta, idx, nidx, tu, p->data);
    nv_release(ta);
    nv_release(tu);
    return NV_OK;
  }
  /* The base's term, then the updates' contributions summed into place. */
  nv_array *base = NULL, *coef = NULL;
  if (n->prim == NV__PRIM_SCATTER_PROD) {
    nv_array *all = NULL, *others = NULL;
    prod_parts(a, idx, nidx, p->data, u, tan[0] ? &all : NULL, tan[ui] ? &others : NULL);
    if (tan[0]) base = drop(nv_multiply(tan[0], all), all);
    coef = others;
  } else {
    if (tan[0]) {
      nv_array *m = eq_mask(out[0], a, dt);
      base = drop(nv_multiply(tan[0], m), m);
    }
    if (tan[ui]) {
      nv_array *r = gather_at(out[0], idx, nidx, p->data, u);
      coef = drop(eq_mask(r, u, dt), r);
    }
  }
  nv_array *upd = NULL;
  if (tan[ui]) {
    nv_array *tu = drop(nv_multiply(tan[ui], coef), coef);
    nv_array *z = nv_zeros_like(a);
    upd = drop(drop(nv_scatter_add(z, (const nv_array *const *)idx, nidx, tu, p->data), z), tu);
    if (n->prim == NV__PRIM_SCATTER_PROD) upd = take_bin(upd, nv_multiply, a);
  }
  ot[0] = add_terms(base, upd);
  return NV_OK;
}

VMAP(vmap_scatter) {
  const nv__gather_params *p = n->params;
  int nidx = p->naxes, ui = nidx + 1, nd = n->out[0].ndim;
  int b = nv__tf_batch_size(in, axes, nidx + 2);
  int ind = meta(in[ui])->ndim - (axes[ui] >= 0) - nd;
  /* Every operand gets the batch in front; a batch index on axis 0 makes the index shape
   * (B, I) and the updates (B, I, 1, S). */
  nv_array *a = materialize(in[0], axes[0], b);
  nv_array *idx[NV__MAX_DIMS + 1];
  idx[0] = batch_index(b, ind);
  for (int j = 0; j < nidx; j++) idx[j + 1] = nv__tf_front(in[j + 1], axes[j + 1], ind);
  int sax[NV__MAX_DIMS + 1], ushape[2 * NV__MAX_DIMS + 2], at = 1 + ind;
  sax[0] = 0;
  for (int j = 0; j < nidx; j++) sax[j + 1] = p->data[j] + 1;
  nv_array *u;
  if (axes[ui] >= 0) {
    nv_array *m = nv__tf_moveaxis(in[ui], axes[ui], 0);
    u = drop(nv_expand_dims(m, &at, 1), m);
  } else {
    int two[2] = {0, at};
    const nv__output *uo = meta(in[ui]);
    nv_array *e = nv_expand_dims(in[ui], two, 2);
    ushape[0] = b;
    memcpy(ushape + 1, uo->shape, sizeof(int) * (size_t)ind);
    ushape[at] = 1;
    memcpy(ushape + at + 1, uo->shape + ind, sizeof(int) * (size_t)nd);
    u = drop(nv_broadcast_to(e, ushape, uo->ndim + 2), e);
  }
  out[0] = scatter_op(n->prim, a, idx, nidx + 1, u, sax);
  oax[0] = 0;
  nv_release(a);
  nv_release(u);
  nv__tf_release_all(idx, (size_t)nidx + 1);
  return NV_OK;
}

/* ---- masked_scatter ---- */

VJP(vjp_masked_scatter) {
  if (!inexact(in[0])) return NV_OK;
  const nv__output *mm = meta(in[1]), *rm = meta(in[2]);
  if (want[0]) {
    nv_array *z = nv_zeros(NULL, 0, meta(cot[0])->dtype);
    grad[0] = drop(nv_masked_scatter(cot[0], in[1], z), z);
  }
  if (want[2]) {
    /* The row each selected position took (masked_scatter of the row numbers); unselected
     * positions keep -1, which lands in a spare last row that is dropped. */
    int64_t rows = rm->shape[0];
    nv_dtype it = count_dtype(rows + 1);
    nv_array *base = nv_full(mm->shape, mm->ndim, -1, it);
    nv_array *nums = nv_arange(0, (double)rows, 1, it);
    nv_array *rank = nv_masked_scatter(base, in[1], nums);
    int shape[NV__MAX_DIMS + 1], at = mm->ndim, ax0 = 0;
    memcpy(shape, rm->shape, sizeof(int) * (size_t)rm->ndim);
    shape[0] = (int)rows + 1;
    nv_array *u = nv_expand_dims(cot[0], &at, 1);
    nv_array *z = nv_zeros(shape, rm->ndim, meta(cot[0])->dtype);
    nv_array *ix[1] = {rank};
    nv_array *s = nv_scatter_add(z, (const nv_array *const *)ix, 1, u, &ax0);
    int start[NV__MAX_DIMS + 1] = {0}, step[NV__MAX_DIMS + 1];
    for (int d = 0; d < rm->ndim; d++) step[d] = 1;
    grad[2] = drop(nv__tf_slice(s, start, step, rm->shape), s);
    nv_array *tmp[] = {base, nums, rank, u, z};
    nv__tf_release_all(tmp, sizeof tmp / sizeof *tmp);
  }
  return NV_OK;
}

JVP(jvp_masked_scatter) {
  nv_array *a = or_zeros(tan[0], in[0]);
  nv_array *r = tan[2] ? nv_retain(tan[2]) : nv_zeros(NULL, 0, meta(in[2])->dtype);
  ot[0] = nv_masked_scatter(a, in[1], r);
  nv_release(a);
  nv_release(r);
  return NV_OK;
}

/* Per example, masked_scatter takes its rows from the start of its own src. With the batch
 * flattened the primitive takes rows consecutively across examples, so each example gets R
 * extra positions, of which R - count are selected (count: what its mask selects): every
 * example then consumes exactly its R rows. An example that selects more than R makes the
 * total exceed B*R, and the primitive fails as the unbatched op would. */
VMAP(vmap_masked_scatter) {
  int b = nv__tf_batch_size(in, axes, 3), ond = n->out[0].ndim;
  const int *oshape = n->out[0].shape;
  int mnd = meta(in[1])->ndim - (axes[1] >= 0);
  int rnd = axes[2] >= 0 ? meta(in[2])->ndim - 1 : meta(in[2])->ndim;
  int64_t mf = 1;
  for (int d = 0; d < mnd; d++) mf *= oshape[d];
  nv_array *a = materialize(in[0], axes[0], b), *m = materialize(in[1], axes[1], b);
  nv_array *r = materialize(in[2], axes[2], b);
  const int *rshape = meta(r)->shape; /* (B, R, row...) */
  int rows = rshape[1], t = ond - mnd, shape[NV__MAX_DIMS + 2];
  if ((int64_t)b * rows > INT32_MAX) {
    nv_array *tmp[] = {a, m, r};
    nv__tf_release_all(tmp, 3);
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "vmap: masked_scatter: %d examples of %d rows are too many", b, rows);
  }
  /* a (B, Mf, row...), mask (B, Mf), src (B*R, row...). */
  shape[0] = b;
  shape[1] = (int)mf;
  memcpy(shape + 2, oshape + mnd, sizeof(int) * (size_t)t);
  nv_array *af = nv_reshape(a, shape, t + 2), *mflat = nv_reshape(m, shape, 2);
  shape[0] = b * rows;
  memcpy(shape + 1, rshape + 2, sizeof(int) * (size_t)(rnd - 1));
  nv_array *rf = nv_reshape(r, shape, rnd);
  int one = 1;
  nv_array *mi = nv_astype(mflat, NV_DTYPE_INT32);
  nv_array *count = nv_sum(mi, &one, 1, true);
  nv_array *slot = iota(rows, 2, 1, NV_DTYPE_INT32);
  nv_array *fill = nv__tf_compare(slot, count, NV__CMP_GE);
  nv_array *mparts[2] = {mflat, fill};
  nv_array *mext = nv_concatenate((const nv_array *const *)mparts, 2, 1);
  shape[0] = b;
  shape[1] = rows;
  memcpy(shape + 2, oshape + mnd, sizeof(int) * (size_t)t);
  nv_array *pad = nv_zeros(shape, t + 2, meta(af)->dtype);
  nv_array *aparts[2] = {af, pad};
  nv_array *aext = nv_concatenate((const nv_array *const *)aparts, 2, 1);
  nv_array *s = nv_masked_scatter(aext, mext, rf);
  int start[NV__MAX_DIMS + 1] = {0}, step[NV__MAX_DIMS + 1], len[NV__MAX_DIMS + 1];
  for (int d = 0; d < t + 2; d++) {
    step[d] = 1;
    len[d] = meta(s)->shape[d];
  }
  len[1] = (int)mf;
  nv_array *kept = nv__tf_slice(s, start, step, len);
  batched_shape(b, oshape, ond, shape);
  out[0] = nv_reshape(kept, shape, ond + 1);
  oax[0] = 0;
  nv_array *tmp[] = {a, m, r, af, mflat, rf, mi, count, slot, fill, mext, pad, aext, s, kept};
  nv__tf_release_all(tmp, sizeof tmp / sizeof *tmp);
  return NV_OK;
}

/* ---- dynamic slices ---- */

/* Start k (column k of a (B, naxes) start array) normalized and clamped as the kernels do:
 * a negative start counts from the end (below -n gives 0), then the region is moved inside an
 * axis of size `dim` for an extent `size`. int64, shape (B,). */
static nv_array *clamped_start(const nv_array *s2, int k, int dim, int size) {
  int b = meta(s2)->shape[0];
  int start[2] = {0, k}, step[2] = {1, 1}, len[2] = {b, 1};
  nv_array *col = nv__tf_slice(s2, start, step, len);
  nv_array *c = drop(nv_reshape(col, &b, 1), col);
  nv_array *v = drop(nv_astype(c, NV_DTYPE_INT64), c);
  nv_array *zero = nv_array_int64(0), *dim64 = nv_array_int64(dim);
  nv_array *hi = nv_array_int64((int64_t)dim - size);
  nv_array *neg = nv__tf_compare(v, zero, NV__CMP_LT);
  nv_array *negi = nv_astype(neg, NV_DTYPE_INT64);
  nv_array *shift = nv_multiply(negi, dim64);
  v = take_bin(v, nv_add, shift);
  v = take_bin(v, nv_maximum, zero);
  v = take_bin(v, nv_minimum, hi);
  nv_array *tmp[] = {zero, dim64, hi, neg, negi, shift};
  nv__tf_release_all(tmp, sizeof tmp / sizeof *tmp);
  return v;
}

/* A batched start (B) or (B, naxes) as (B, naxes). */
static nv_array *start_rows(const nv_array *s, int ax, int naxes) {
  nv_array *m = nv__tf_moveaxis(s, ax, 0);
  int shape[2] = {meta(m)->shape[0], naxes};
  return drop(nv_reshape(m, shape, 2), m);
}

VJP(vjp_dynamic_slice) {
  const nv__gather_params *p = n->params;
  if (!want[0] || !inexact(in[0])) return NV_OK;
  nv_array *z = nv_zeros_like(in[0]);
  grad[0] = drop(nv_slice_update_dynamic(z, cot[0], in[1], p->data, p->naxes), z);
  return NV_OK;
}

JVP(jvp_dynamic_slice) {
  const nv__gather_params *p = n->params;
  if (tan[0])
    ot[0] = nv_slice_dynamic(tan[0], in[1], p->data, p->naxes, n->out[0].shape, n->out[0].ndim);
  return NV_OK;
}

VMAP(vmap_dynamic_slice) {
  const nv__gather_params *p = n->params;
  const int *size = n->out[0].shape;
  int nd = n->out[0].ndim, b = nv__tf_batch_size(in, axes, 2), gax[NV__MAX_DIMS + 1];
  int gsize[NV__MAX_DIMS + 1], k = 0;
  for (int j = 0; j < p->naxes; j++) gax[j] = p->data[j] + 1;
  batched_shape(b, size, nd, gsize);
  if (axes[1] < 0) {
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    out[0] = drop(nv_slice_dynamic(a, in[1], gax, p->naxes, gsize, nd + 1), a);
    oax[0] = 0;
    return NV_OK;
  }
  /* Per-example starts: a gather at the clamped starts. */
  int adim[NV__MAX_DIMS];
  for (int d = 0, q = 0; d < meta(in[0])->ndim; d++)
    if (d != axes[0]) adim[q++] = meta(in[0])->shape[d];
  for (int d = 0; d < nd; d++)
    if (adim[d] == 0) {
      out[0] = nv_zeros(gsize, nd + 1, meta(in[0])->dtype);
      oax[0] = 0;
      return NV_OK;
    }
  nv_array *s2 = start_rows(in[1], axes[1], p->naxes), *idx[NV__MAX_DIMS + 1];
  if (axes[0] >= 0) idx[k++] = batch_index(b, 0);
  for (int j = 0; j < p->naxes; j++)
    idx[k++] = clamped_start(s2, j, adim[p->data[j]], size[p->data[j]]);
  nv_release(s2);
  if (axes[0] < 0) {
    out[0] = nv_gather(in[0], (const nv_array *const *)idx, k, p->data, size, nd);
  } else {
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    int zax[NV__MAX_DIMS + 1];
    zax[0] = 0;
    memcpy(zax + 1, gax, sizeof(int) * (size_t)p->naxes);
    gsize[0] = 1;
    nv_array *g = drop(nv_gather(a, (const nv_array *const *)idx, k, zax, gsize, nd + 1), a);
    int one = 1;
    out[0] = drop(nv_squeeze(g, &one, 1), g);
  }
  oax[0] = 0;
  nv__tf_release_all(idx, (size_t)k);
  return NV_OK;
}

VJP(vjp_dynamic_slice_update) {
  const nv__gather_params *p = n->params;
  if (!inexact(in[0])) return NV_OK;
  if (want[0]) {
    nv_array *z = nv_zeros_like(in[1]);
    grad[0] = drop(nv_slice_update_dynamic(cot[0], z, in[2], p->data, p->naxes), z);
  }
  if (want[1])
    grad[1] = nv_slice_dynamic(cot[0], in[2], p->data, p->naxes, meta(in[1])->shape,
                               meta(in[1])->ndim);
  return NV_OK;
}

JVP(jvp_dynamic_slice_update) {
  const nv__gather_params *p = n->params;
  nv_array *s = or_zeros(tan[0], in[0]), *u = or_zeros(tan[1], in[1]);
  ot[0] = nv_slice_update_dynamic(s, u, in[2], p->data, p->naxes);
  nv_release(s);
  nv_release(u);
  return NV_OK;
}

VMAP(vmap_dynamic_slice_update) {
  const nv__gather_params *p = n->params;
  int nd = n->out[0].ndim, b = nv__tf_batch_size(in, axes, 3), sax[NV__MAX_DIMS + 1];
  const int *oshape = n->out[0].shape;
  for (int j = 0; j < p->naxes; j++) sax[j] = p->data[j] + 1;
  nv_array *src = materialize(in[0], axes[0], b);
  if (axes[2] < 0) {
    /* An unbatched update lacks the batch axis, so the region spans it (broadcast). */
    nv_array *u = axes[1] >= 0 ? nv__tf_moveaxis(in[1], axes[1], 0) : nv_retain(in[1]);
    out[0] = nv_slice_update_dynamic(src, u, in[2], sax, p->naxes);
    oax[0] = 0;
    nv_release(src);
    nv_release(u);
    return NV_OK;
  }
  for (int d = 0; d < nd; d++)
    if (oshape[d] == 0) {
      out[0] = src;
      oax[0] = 0;
      return NV_OK;
    }
  /* Per-example starts: a scatter at the clamped starts, updates (B, 1, region). */
  const int *region = axes[1] >= 0 ? NULL : meta(in[1])->shape;
  int rshape[NV__MAX_DIMS + 2];
  nv_array *u;
  if (axes[1] >= 0) {
    nv_array *m = nv__tf_moveaxis(in[1], axes[1], 0);
    int one = 1;
    u = drop(nv_expand_dims(m, &one, 1), m);
    region = meta(u)->shape + 2;
  } else {
    int two[2] = {0, 1};
    rshape[0] = b;
    rshape[1] = 1;
    memcpy(rshape + 2, region, sizeof(int) * (size_t)nd);
    nv_array *e = nv_expand_dims(in[1], two, 2);
    u = drop(nv_broadcast_to(e, rshape, nd + 2), e);
  }
  nv_array *s2 = start_rows(in[2], axes[2], p->naxes), *idx[NV__MAX_DIMS + 1];
  int k = 0, zax[NV__MAX_DIMS + 1];
  idx[k++] = batch_index(b, 0);
  zax[0] = 0;
  for (int j = 0; j < p->naxes; j++) {
    idx[k++] = clamped_start(s2, j, oshape[p->data[j]], region[p->data[j]]);
    zax[j + 1] = sax[j];
  }
  nv_release(s2);
  out[0] = nv_scatter(src, (const nv_array *const *)idx, k, u, zax);
  oax[0] = 0;
  nv_release(src);
  nv_release(u);
  nv__tf_release_all(idx, (size_t)k);
  return NV_OK;
}

/* ---- slice_update_add / prod / max / min ---- */

/* A slice_update_* node on the region (start, step, len), as the builders store it; `update`
 * (already of src's dtype) broadcasts to the region. */
static nv_array *slice_update_as(int prim, const nv_array *src, const nv_array *update,
                                 const int *start, const int *step, const int *len) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[2] = {src, update};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *o = meta(src);
  int nd = o->ndim;
  nv_array *uc = nv__cast_unscoped(update, o->dtype);
  nv_array *in[2] = {(nv_array *)src, uc};
  nv__node *node = nv__op_node(prim, in, 2, o->dtype, o->shape, nd,
                               sizeof(nv__slice_update_params) + 3 * (size_t)nd * sizeof(int));
  nv_release(uc);
  if (node) {
    nv__slice_update_params *p = node->params;
    p->ndim = nd;
    memcpy(p->data, start, sizeof(int) * (size_t)nd);
    memcpy(p->data + nd, step, sizeof(int) * (size_t)nd);
    memcpy(p->data + 2 * nd, len, sizeof(int) * (size_t)nd);
  }
  return nv__op_finish(op, node);
}

/* The region parameters of a slice_update_* node. */
#define REGION(p) (p)->data, (p)->data + (p)->ndim, (p)->data + 2 * (p)->ndim

/* `x` broadcast to the region's shape (taken over). */
static nv_array *to_region(nv_array *x, const nv__slice_update_params *p) {
  const int *len = p->data + 2 * p->ndim;
  if (meta(x)->ndim == p->ndim && !memcmp(meta(x)->shape, len, sizeof(int) * (size_t)p->ndim))
    return x;
  return drop(nv_broadcast_to(x, len, p->ndim), x);
}

VJP(vjp_slice_update_reduce) {
  const nv__slice_update_params *p = n->params;
  if (!inexact(in[0])) return NV_OK;
  const nv_array *c = cot[0];
  nv_dtype dt = meta(c)->dtype;
  nv_array *cr = nv__tf_slice(c, REGION(p));
  nv_array *g0 = NULL, *g1 = NULL;
  switch (n->prim) {
    case NV__PRIM_SLICE_UPDATE_ADD:
      g0 = nv_retain((nv_array *)c);
      g1 = nv_retain(cr);
      break;
    case NV__PRIM_SLICE_UPDATE_PROD: {
      nv_array *cu = nv_multiply(cr, in[1]);
      g0 = drop(nv__tf_slice_update(c, cu, REGION(p)), cu);
      nv_array *sr = nv__tf_slice(in[0], REGION(p));
      g1 = drop(nv_multiply(cr, sr), sr);
      break;
    }
    default: {
      /* max / min: as MLX, both the base and the update get the cotangent where equal. */
      nv_array *m0 = eq_mask(out[0], in[0], dt);
      g0 = drop(nv_multiply(c, m0), m0);
      nv_array *orr = nv__tf_slice(out[0], REGION(p));
      nv_array *m1 = drop(eq_mask(orr, in[1], dt), orr);
      g1 = drop(nv_multiply(cr, m1), m1);
      break;
    }
  }
  nv_release(cr);
  if (want[0]) grad[0] = g0;
  else nv_release(g0);
  if (want[1]) grad[1] = drop(nv__tf_unbroadcast(g1, meta(in[1])->shape, meta(in[1])->ndim), g1);
  else nv_release(g1);
  return NV_OK;
}

JVP(jvp_slice_update_reduce) {
  const nv__slice_update_params *p = n->params;
  nv_dtype dt = meta(out[0])->dtype;
  if (n->prim == NV__PRIM_SLICE_UPDATE_ADD) {
    nv_array *s = or_zeros(tan[0], in[0]), *u = or_zeros(tan[1], in[1]);
    ot[0] = slice_update_as(n->prim, s, u, REGION(p));
    nv_release(s);
    nv_release(u);
    return NV_OK;
  }
  /* The base's term, then the update's term added into the region. */
  nv_array *base = NULL, *coef;
  if (n->prim == NV__PRIM_SLICE_UPDATE_PROD) {
    if (tan[0]) base = slice_update_as(n->prim, tan[0], in[1], REGION(p));
    coef = nv__tf_slice(in[0], REGION(p));
  } else {
    if (tan[0]) {
      nv_array *m = eq_mask(out[0], in[0], dt);
      base = drop(nv_multiply(tan[0], m), m);
    }
    nv_array *orr = nv__tf_slice(out[0], REGION(p));
    coef = drop(eq_mask(orr, in[1], dt), orr);
  }
  nv_array *upd = NULL;
  if (tan[1]) {
    nv_array *tu = to_region(nv_multiply(tan[1], coef), p);
    nv_array *z = nv_zeros_like(in[0]);
    upd = drop(drop(slice_update_as(NV__PRIM_SLICE_UPDATE_ADD, z, tu, REGION(p)), z), tu);
  }
  nv_release(coef);
  ot[0] = add_terms(base, upd);
  return NV_OK;
}

VMAP(vmap_slice_update_reduce) {
  const nv__slice_update_params *p = n->params;
  int nd = p->ndim, b = nv__tf_batch_size(in, axes, 2);
  int start[NV__MAX_DIMS], step[NV__MAX_DIMS], len[NV__MAX_DIMS];
  start[0] = 0;
  step[0] = 1;
  len[0] = b;
  memcpy(start + 1, p->data, sizeof(int) * (size_t)nd);
  memcpy(step + 1, p->data + nd, sizeof(int) * (size_t)nd);
  memcpy(len + 1, p->data + 2 * nd, sizeof(int) * (size_t)nd);
  nv_array *base = materialize(in[0], axes[0], b), *u = nv__tf_front(in[1], axes[1], nd);
  out[0] = slice_update_as(n->prim, base, u, start, step, len);
  oax[0] = 0;
  nv_release(base);
  nv_release(u);
  return NV_OK;
}

/* ---- diagonal / diag ---- */

/* Zeros of `shape` with `d` (rest..., L) written on the diagonal `offset` of axes a1, a2: a
 * scatter at (i + max(0, -offset), i + max(0, offset)), exact for any values of d. */
static nv_array *diagonal_embed(const nv_array *d, int offset, int a1, int a2, const int *shape,
                                int nd) {
  const nv__output *o = meta(d);
  int len = o->shape[o->ndim - 1];
  nv_array *i1 = iota(len, 1, 0, NV_DTYPE_INT32), *i2 = iota(len, 1, 0, NV_DTYPE_INT32);
  nv_array *shift = nv_array_int(offset < 0 ? -offset : offset);
  if (offset < 0) i1 = take_bin(i1, nv_add, shift);
  if (offset > 0) i2 = take_bin(i2, nv_add, shift);
  nv_release(shift);
  /* Updates (L) + S, S the shape with 1 on a1 and a2: d's last axis moved to the front. */
  nv_array *m = nv__tf_moveaxis(d, o->ndim - 1, 0);
  int lo = a1 < a2 ? a1 : a2, hi = a1 < a2 ? a2 : a1, ins[2] = {lo + 1, hi + 1};
  nv_array *u = drop(nv_expand_dims(m, ins, 2), m);
  nv_array *z = nv_zeros(shape, nd, o->dtype);
  nv_array *idx[2] = {i1, i2};
  int sax[2] = {a1, a2};
  nv_array *r = nv_scatter(z, (const nv_array *const *)idx, 2, u, sax);
  nv_array *tmp[] = {i1, i2, u, z};
  nv__tf_release_all(tmp, 4);
  return r;
}

VJP(vjp_diagonal) {
  const nv__view_params *p = n->params;
  if (want[0] && inexact(in[0]))
    grad[0] = diagonal_embed(cot[0], p->axes[0], p->axes[1], p->axes[2], meta(in[0])->shape,
                             meta(in[0])->ndim);
  return NV_OK;
}

JVP(jvp_diagonal) {
  const nv__view_params *p = n->params;
  ot[0] = nv_diagonal(tan[0], p->axes[0], p->axes[1], p->axes[2]);
  return NV_OK;
}

VMAP(vmap_diagonal) {
  const nv__view_params *p = n->params;
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = drop(nv_diagonal(x, p->axes[0], p->axes[1] + 1, p->axes[2] + 1), x);
  oax[0] = 0;
  return NV_OK;
}

VJP(vjp_diag) {
  if (want[0] && inexact(in[0]))
    grad[0] = nv_diagonal(cot[0], ((const nv__axis_params *)n->params)->axis, 0, 1);
  return NV_OK;
}

JVP(jvp_diag) {
  ot[0] = nv_diag(tan[0], ((const nv__axis_params *)n->params)->axis);
  return NV_OK;
}

VMAP(vmap_diag) {
  int k = ((const nv__axis_params *)n->params)->axis;
  int side = n->out[0].shape[0], b = nv__tf_batch_size(in, axes, 1), shape[3] = {b, side, side};
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = drop(diagonal_embed(x, k, 1, 2, shape, 3), x);
  oax[0] = 0;
  return NV_OK;
}

/* ---- concatenate ---- */

VJP(vjp_concatenate) {
  int axis = ((const nv__axis_params *)n->params)->axis, nd = n->out[0].ndim;
  int start[NV__MAX_DIMS] = {0}, step[NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) step[d] = 1;
  if (!inexact(out[0])) return NV_OK;
  for (int i = 0; i < n->ninputs; i++) {
    if (want[i]) grad[i] = nv__tf_slice(cot[0], start, step, meta(in[i])->shape);
    start[axis] += meta(in[i])->shape[axis];
  }
  return NV_OK;
}

JVP(jvp_concatenate) {
  int axis = ((const nv__axis_params *)n->params)->axis, k = n->ninputs;
  nv_array **t = nv__malloc((size_t)k * sizeof *t);
  if (!t) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "jvp: concatenate: out of memory");
  for (int i = 0; i < k; i++) t[i] = or_zeros(tan[i], in[i]);
  ot[0] = nv_concatenate((const nv_array *const *)t, k, axis);
  nv__tf_release_all(t, (size_t)k);
  nv__free(t);
  return NV_OK;
}

VMAP(vmap_concatenate) {
  int axis = ((const nv__axis_params *)n->params)->axis, k = n->ninputs;
  int b = nv__tf_batch_size(in, axes, k);
  nv_array **x = nv__malloc((size_t)k * sizeof *x);
  if (!x) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: concatenate: out of memory");
  for (int i = 0; i < k; i++) x[i] = materialize(in[i], axes[i], b);
  out[0] = nv_concatenate((const nv_array *const *)x, k, axis + 1);
  oax[0] = 0;
  nv__tf_release_all(x, (size_t)k);
  nv__free(x);
  return NV_OK;
}

/* ---- pad ---- */

/* The source position of each output position of an axis of `n` padded by `low` (the non-
 * constant modes), as the kernel reads them: an int32 array of `len`. */
static nv_array *pad_map(int mode, int len, int low, int n) {
  int32_t *v = nv__malloc((size_t)(len ? len : 1) * sizeof *v);
  if (!v) return nv__op_error(NV_ERR_OUT_OF_MEMORY, "pad", "out of memory");
  for (int64_t i = 0; i < len; i++) {
    int64_t j = i - low, r = j;
    if (j < 0 || j >= n) {
      if (mode == NV_PAD_EDGE) {
        r = j < 0 ? 0 : n - 1;
      } else if (mode == NV_PAD_REFLECT) {
        int64_t period = 2 * ((int64_t)n - 1);
        r = n == 1 ? 0 : ((j % period) + period) % period;
        if (n > 1 && r >= n) r = period - r;
      } else {
        int64_t period = 2 * (int64_t)n;
        r = ((j % period) + period) % period;
        if (r >= n) r = period - 1 - r;
      }
    }
    v[i] = (int32_t)r;
  }
  nv_array *a = nv_array_from_data(v, &len, 1, NV_DTYPE_INT32);
  nv__free(v);
  return a;
}

VJP(vjp_pad) {
  const nv__pad_params *p = n->params;
  const nv__output *o = meta(in[0]);
  int nd = p->ndim, step[NV__MAX_DIMS];
  for (int d = 0; d < nd; d++) step[d] = 1;
  if (!inexact(in[0])) return NV_OK;
  if (p->mode == NV_PAD_CONSTANT) {
    if (want[0]) grad[0] = nv__tf_slice(cot[0], p->width, step, o->shape);
    if (want[1]) {
      /* The value fills everything outside the copied region. */
      nv_array *z = nv_zeros_like(in[0]);
      nv_array *outside = drop(nv__tf_slice_update(cot[0], z, p->width, step, o->shape), z);
      grad[1] = drop(nv_sum(outside, NULL, 0, false), outside);
    }
    return NV_OK;
  }
  if (!want[0]) return NV_OK;
  /* Each output element reads one source element per axis: the adjoint sums the cotangent
   * back axis by axis (a take's adjoint). */
  nv_array *g = nv_retain(cot[0]);
  int shape[NV__MAX_DIMS];
  memcpy(shape, meta(g)->shape, sizeof(int) * (size_t)nd);
  for (int d = 0; d < nd; d++) {
    shape[d] = o->shape[d];
    if (p->width[d] == 0 && p->width[nd + d] == 0) continue;
    nv_array *map = pad_map(p->mode, meta(g)->shape[d], p->width[d], o->shape[d]);
    nv_array *r = take_vjp(g, map, d, shape, nd);
    nv_release(map);
    nv_release(g);
    g = r;
  }
  grad[0] = g;
  return NV_OK;
}

JVP(jvp_pad) {
  const nv__pad_params *p = n->params;
  if (p->mode != NV_PAD_CONSTANT) {
    if (tan[0]) ot[0] = nv_pad(tan[0], p->width, p->width + p->ndim, p->ndim, p->mode, NULL);
    return NV_OK;
  }
  nv_array *a = or_zeros(tan[0], in[0]);
  ot[0] = drop(nv_pad(a, p->width, p->width + p->ndim, p->ndim, NV_PAD_CONSTANT, tan[1]), a);
  return NV_OK;
}

VMAP(vmap_pad) {
  const nv__pad_params *p = n->params;
  int nd = p->ndim, b = nv__tf_batch_size(in, axes, 2), lo[NV__MAX_DIMS], hi[NV__MAX_DIMS];
  lo[0] = hi[0] = 0;
  memcpy(lo + 1, p->width, sizeof(int) * (size_t)nd);
  memcpy(hi + 1, p->width + nd, sizeof(int) * (size_t)nd);
  if (axes[1] < 0 || p->mode != NV_PAD_CONSTANT) {
    if (axes[0] < 0) {
      /* Only the unused value is batched: the result does not depend on the batch. */
      out[0] = nv_pad(in[0], p->width, p->width + nd, nd, p->mode, NULL);
      oax[0] = -1;
      return NV_OK;
    }
    nv_array *a = nv__tf_moveaxis(in[0], axes[0], 0);
    out[0] = drop(nv_pad(a, lo, hi, nd + 1, p->mode, axes[1] < 0 ? in[1] : NULL), a);
    oax[0] = 0;
    return NV_OK;
  }
  /* A value per example: the values broadcast to the result, the array written inside. */
  int shape[NV__MAX_DIMS], ones[NV__MAX_DIMS], start[NV__MAX_DIMS], step[NV__MAX_DIMS];
  int len[NV__MAX_DIMS];
  batched_shape(b, n->out[0].shape, nd, shape);
  ones[0] = b;
  start[0] = 0;
  len[0] = b;
  for (int d = 0; d <= nd; d++) step[d] = 1;
  for (int d = 1; d <= nd; d++) {
    ones[d] = 1;
    start[d] = lo[d];
    len[d] = shape[d] - lo[d] - hi[d];
  }
  nv_array *v = nv__tf_moveaxis(in[1], axes[1], 0);
  nv_array *vr = drop(nv_reshape(v, ones, nd + 1), v);
  nv_array *base = drop(nv_broadcast_to(vr, shape, nd + 1), vr);
  nv_array *a = nv__tf_front(in[0], axes[0], nd);
  out[0] = drop(drop(nv__tf_slice_update(base, a, start, step, len), base), a);
  oax[0] = 0;
  return NV_OK;
}

/* ---- diff ---- */

VJP(vjp_diff) {
  int axis = ((const nv__axis_params *)n->params)->axis, nd = n->out[0].ndim;
  if (!want[0] || !inexact(in[0])) return NV_OK;
  /* out[i] = x[i+1] - x[i]: x[i] gets cot[i-1] - cot[i] (zero beyond the ends). */
  int lo[NV__MAX_DIMS] = {0}, hi[NV__MAX_DIMS] = {0};
  lo[axis] = 1;
  nv_array *a = nv_pad(cot[0], lo, hi, nd, NV_PAD_CONSTANT, NULL);
  lo[axis] = 0;
  hi[axis] = 1;
  nv_array *b = nv_pad(cot[0], lo, hi, nd, NV_PAD_CONSTANT, NULL);
  grad[0] = drop(drop(nv_subtract(a, b), a), b);
  return NV_OK;
}

JVP(jvp_diff) {
  ot[0] = nv_diff(tan[0], 1, ((const nv__axis_params *)n->params)->axis, NULL, NULL);
  return NV_OK;
}

VMAP(vmap_diff) {
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = drop(nv_diff(x, 1, ((const nv__axis_params *)n->params)->axis + 1, NULL, NULL), x);
  oax[0] = 0;
  return NV_OK;
}

/* ---- Registration ---- */

static void set(nv__prim_rule *r, int prim, nv__vjp_rule vjp, nv__jvp_rule jvp,
                nv__vmap_rule vmap) {
  r[prim] = (nv__prim_rule){vjp, jvp, vmap};
}

void nv__rules_register_index(nv__prim_rule *r) {
  set(r, NV__PRIM_TAKE, vjp_take, jvp_take, vmap_take);
  set(r, NV__PRIM_GATHER, vjp_gather, jvp_gather, vmap_gather);
  set(r, NV__PRIM_GATHER_AXIS, vjp_gather_axis, jvp_gather_axis, vmap_gather_axis);
  set(r, NV__PRIM_SCATTER, vjp_scatter, jvp_scatter, vmap_scatter);
  set(r, NV__PRIM_SCATTER_ADD, vjp_scatter, jvp_scatter, vmap_scatter);
  set(r, NV__PRIM_SCATTER_PROD, vjp_scatter, jvp_scatter, vmap_scatter);
  set(r, NV__PRIM_SCATTER_MAX, vjp_scatter, jvp_scatter, vmap_scatter);
  set(r, NV__PRIM_SCATTER_MIN, vjp_scatter, jvp_scatter, vmap_scatter);
  set(r, NV__PRIM_SCATTER_AXIS, vjp_scatter_axis, jvp_scatter_axis, vmap_scatter_axis);
  set(r, NV__PRIM_MASKED_SCATTER, vjp_masked_scatter, jvp_masked_scatter, vmap_masked_scatter);
  set(r, NV__PRIM_DYNAMIC_SLICE, vjp_dynamic_slice, jvp_dynamic_slice, vmap_dynamic_slice);
  set(r, NV__PRIM_DYNAMIC_SLICE_UPDATE, vjp_dynamic_slice_update, jvp_dynamic_slice_update,
      vmap_dynamic_slice_update);
  set(r, NV__PRIM_SLICE_UPDATE_ADD, vjp_slice_update_reduce, jvp_slice_update_reduce,
      vmap_slice_update_reduce);
  set(r, NV__PRIM_SLICE_UPDATE_PROD, vjp_slice_update_reduce, jvp_slice_update_reduce,
      vmap_slice_update_reduce);
  set(r, NV__PRIM_SLICE_UPDATE_MAX, vjp_slice_update_reduce, jvp_slice_update_reduce,
      vmap_slice_update_reduce);
  set(r, NV__PRIM_SLICE_UPDATE_MIN, vjp_slice_update_reduce, jvp_slice_update_reduce,
      vmap_slice_update_reduce);
  set(r, NV__PRIM_DIAGONAL, vjp_diagonal, jvp_diagonal, vmap_diagonal);
  set(r, NV__PRIM_DIAG, vjp_diag, jvp_diag, vmap_diag);
  set(r, NV__PRIM_CONCATENATE, vjp_concatenate, jvp_concatenate, vmap_concatenate);
  set(r, NV__PRIM_PAD, vjp_pad, jvp_pad, vmap_pad);
  set(r, NV__PRIM_DIFF, vjp_diff, jvp_diff, vmap_diff);
}
