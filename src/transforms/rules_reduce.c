/* vjp, jvp and vmap rules of the reduce family (src/ops/prims_reduce.h): the reductions,
 * softmax, the scans, the sorts and searchsorted. The rules follow MLX's where MLX has one; the
 * decided edge cases (ties, zeros, infinite rows) are listed in docs/transforms.md. Rules are
 * built from op builders only, so their results are differentiable and batchable in turn. */
#include <float.h>
#include <math.h>

#include "nuvec.h"
#include "ops/reduce_params.h"
#include "ops/reduce_internal.h"
#include "transforms/rule_decls.h"

/* ---- Temporaries ----
 * A rule builds a chain of temporaries; each goes into the rule's pool as it is made and the
 * pool releases them all when the rule returns (the rule's results are retained out of it). */
#define POOL_CAP 64
typedef struct pool {
  nv_array *a[POOL_CAP];
  int n;
} pool;

static nv_array *keep(pool *p, nv_array *x) {
  if (p->n < POOL_CAP) p->a[p->n++] = x;
  return x;
}

static void drain(pool *p) {
  for (int i = 0; i < p->n; i++) nv_release(p->a[i]);
  p->n = 0;
}

/* Hands `x` (owned by the pool) to the caller as a new reference. */
static nv_array *give(nv_array *x) { return nv_retain(x); }

static nv_dtype dtype_of(const nv_array *x) { return nv__out(x)->dtype; }
static bool inexact(const nv_array *x) {
  return nv_issubdtype(dtype_of(x), NV_CATEGORY_INEXACT);
}
static bool half(nv_dtype d) { return d == NV_DTYPE_FLOAT16 || d == NV_DTYPE_BFLOAT16; }

/* The largest finite value of a float dtype. */
static double dtype_max(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 65504.0;
    case NV_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case NV_DTYPE_FLOAT64: return DBL_MAX;
    default: return FLT_MAX;
  }
}

/* x + v and x · v in x's integer dtype (a weak C integer; the _scalar forms promote integers to
 * float32). */
static nv_array *add_int(pool *tp, const nv_array *x, int64_t v) {
  nv_array *w = keep(tp, nv_weak_int(v));
  return keep(tp, nv_add(x, w));
}

static nv_array *mul_int(pool *tp, const nv_array *x, int64_t v) {
  nv_array *w = keep(tp, nv_weak_int(v));
  return keep(tp, nv_multiply(x, w));
}

static nv_status no_complex(const char *what, const char *op) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "%s: %s of complex64 has no derivative rule", what,
                       op);
}

/* ---- Reduction geometry ---- */

/* The reduced axes of a reduction node, whichever parameter block it carries. */
typedef struct red {
  const int *axes;
  int naxes;
  bool keepdims;
} red;

static bool plain_prim(int prim) {
  switch (prim) {
    case NV__PRIM_PROD:
    case NV__PRIM_MAX:
    case NV__PRIM_MIN:
    case NV__PRIM_ALL:
    case NV__PRIM_ANY:
    case NV__PRIM_MEAN:
    case NV__PRIM_COUNT_NONZERO: return true;
    default: return false;
  }
}

static red red_of(const nv__node *n) {
  if (plain_prim(n->prim)) {
    const nv__reduce_params *p = n->params;
    return (red){p->axes, p->naxes, p->keepdims};
  }
  const nv__rows_params *p = n->params;
  return (red){p->axes, p->naxes, p->keepdims};
}

/* The number of elements each output of the reduction reduces. */
static double red_count(const nv_array *x, red r) {
  double c = 1;
  for (int i = 0; i < r.naxes; i++) c *= meta(x)->shape[r.axes[i]];
  return c;
}

/* A reduction's output (or cotangent) with its reduced axes back as size 1, so that it
 * broadcasts against the input. */
static nv_array *kept(pool *tp, const nv_array *y, red r) {
  if (r.keepdims || r.naxes == 0) return keep(tp, nv_retain((nv_array *)y));
  return keep(tp, nv_expand_dims(y, r.axes, r.naxes));
}

/* The permutation that moves the reduced axes last (kept axes first, in order); returns the
 * number of kept axes. */
static int axes_last(int nd, red r, int *perm) {
  int k = 0;
  for (int i = 0, j = 0; i < nd; i++) {
    if (j < r.naxes && r.axes[j] == i) j++;
    else perm[k++] = i;
  }
  for (int j = 0; j < r.naxes; j++) perm[k + j] = r.axes[j];
  return k;
}

/* `x` with the reduced axes moved last and merged into one: shape (kept..., N). */
static nv_array *rows_last(pool *tp, const nv_array *x, red r, int *perm, int *tshape) {
  int nd = meta(x)->ndim, shape[NV__MAX_DIMS + 1];
  int nk = axes_last(nd, r, perm);
  nv_array *t = keep(tp, nv_transpose(x, perm, nd));
  int64_t len = 1;
  for (int i = 0; i < nd; i++) tshape[i] = meta(x)->shape[perm[i]];
  for (int i = 0; i < nk; i++) shape[i] = tshape[i];
  for (int i = nk; i < nd; i++) len *= tshape[i];
  shape[nk] = (int)len;
  return keep(tp, nv_reshape(t, shape, nk + 1));
}

/* The inverse of rows_last for an array of shape (kept..., N). */
static nv_array *rows_back(pool *tp, const nv_array *g, int nd, const int *perm,
                           const int *tshape) {
  int inv[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) inv[perm[i]] = i;
  nv_array *t = keep(tp, nv_reshape(g, tshape, nd));
  return keep(tp, nv_transpose(t, inv, nd));
}

/* ---- Sums, means, products ---- */

VJP(vjp_none) { return NV_OK; }
JVP(jvp_none) { return NV_OK; }

VJP(vjp_mean) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  nv_array *c = kept(&tp, cot[0], r);
  nv_array *s = keep(&tp, nv_divide_scalar(c, red_count(in[0], r)));
  grad[0] = nv_broadcast_to(s, meta(in[0])->shape, meta(in[0])->ndim);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_mean) {
  red r = red_of(n);
  ot[0] = nv_mean(tan[0], r.axes, r.naxes, r.keepdims);
  return NV_OK;
}

/* The product of every other element of each reduction (x's shape): two exclusive cumulative
 * products, forward and reverse, over the reduced axes merged into one (MLX's rule, exact when
 * elements are zero). */
static nv_array *exclusive_prod(pool *tp, const nv_array *x, red r) {
  if (r.naxes == 0) return keep(tp, nv_ones_like(x));
  int perm[NV__MAX_DIMS], tshape[NV__MAX_DIMS], nd = meta(x)->ndim, ax;
  const nv_array *rows = x;
  if (r.naxes == 1) {
    ax = r.axes[0];
  } else {
    rows = rows_last(tp, x, r, perm, tshape);
    ax = meta(rows)->ndim - 1;
  }
  nv_array *fwd = keep(tp, nv_cumprod(rows, &ax, false, false));
  nv_array *rev = keep(tp, nv_cumprod(rows, &ax, true, false));
  nv_array *e = keep(tp, nv_multiply(fwd, rev));
  return r.naxes == 1 ? e : rows_back(tp, e, nd, perm, tshape);
}

VJP(vjp_prod) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  nv_array *e = exclusive_prod(&tp, in[0], r);
  grad[0] = nv_multiply(kept(&tp, cot[0], r), e);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_prod) {
  pool tp = {0};
  red r = red_of(n);
  nv_array *e = exclusive_prod(&tp, in[0], r);
  nv_array *te = keep(&tp, nv_multiply(tan[0], e));
  ot[0] = nv_sum(te, r.axes, r.naxes, r.keepdims);
  drain(&tp);
  return NV_OK;
}

/* ---- max, min ---- */

/* MLX's weights for max/min: 1 / (number of ties) at each element equal to its reduction's
 * extreme, 0 elsewhere. A NaN extreme equals no element, so its weights are 0/0 = NaN. */
static nv_array *extreme_weights(pool *tp, const nv__node *n, const nv_array *x,
                                 const nv_array *y) {
  red r = red_of(n);
  int op = n->prim == NV__PRIM_MAX ? NV__CMP_GE : NV__CMP_LE;
  nv_array *m = keep(tp, nv__tf_compare(x, kept(tp, y, r), op));
  nv_array *mf = keep(tp, nv_astype(m, dtype_of(x)));
  nv_array *cnt = keep(tp, nv_sum(mf, r.axes, r.naxes, true));
  return keep(tp, nv_divide(mf, cnt));
}

VJP(vjp_extreme) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  if (dtype_of(in[0]) == NV_DTYPE_COMPLEX64) return no_complex("vjp", nv__prims[n->prim].name);
  pool tp = {0};
  nv_array *w = extreme_weights(&tp, n, in[0], out[0]);
  grad[0] = nv_multiply(kept(&tp, cot[0], red_of(n)), w);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_extreme) {
  if (dtype_of(in[0]) == NV_DTYPE_COMPLEX64) return no_complex("jvp", nv__prims[n->prim].name);
  pool tp = {0};
  red r = red_of(n);
  nv_array *w = extreme_weights(&tp, n, in[0], out[0]);
  nv_array *tw = keep(&tp, nv_multiply(tan[0], w));
  ot[0] = nv_sum(tw, r.axes, r.naxes, r.keepdims);
  drain(&tp);
  return NV_OK;
}

/* ---- var, std ---- */

/* d out / d x per element: 2 (x - mean) / (N - ddof) for var, (x - mean) / ((N - ddof) std)
 * for std (N <= ddof divides by 0, as the forward does). */
static nv_array *spread_weights(pool *tp, const nv__node *n, const nv_array *x,
                                const nv_array *y) {
  red r = red_of(n);
  const nv__rows_params *p = n->params;
  double denom = red_count(x, r) - p->ddof;
  if (denom < 0) denom = 0;
  nv_array *m = keep(tp, nv_mean(x, r.axes, r.naxes, true));
  nv_array *d = keep(tp, nv_subtract(x, m));
  if (n->prim == NV__PRIM_VAR) return keep(tp, nv_multiply_scalar(d, 2.0 / denom));
  nv_array *s = keep(tp, nv_multiply_scalar(kept(tp, y, r), denom));
  return keep(tp, nv_divide(d, s));
}

VJP(vjp_spread) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  nv_array *w = spread_weights(&tp, n, in[0], out[0]);
  grad[0] = nv_multiply(kept(&tp, cot[0], red_of(n)), w);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_spread) {
  if (!inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  nv_array *w = spread_weights(&tp, n, in[0], out[0]);
  nv_array *tw = keep(&tp, nv_multiply(tan[0], w));
  ot[0] = nv_sum(tw, r.axes, r.naxes, r.keepdims);
  drain(&tp);
  return NV_OK;
}

/* ---- median ---- */

/* The median through the sort, as MLX composes it: each row's middle element (odd count) or
 * two middle elements (even count, weight 1/2 each) in sorted order, found by a stable
 * argsort. `sel` gets their indices within the rows of rows_last (kept..., k). */
static int median_select(pool *tp, const nv_array *x, red r, int *perm, int *tshape,
                         nv_array **rows, nv_array **sel) {
  *rows = rows_last(tp, x, r, perm, tshape);
  const nv__output *o = meta(*rows);
  int last = o->ndim - 1, len = o->shape[last];
  if (len == 0) return 0;
  nv_array *idx = keep(tp, nv_argsort(*rows, &last));
  int start[NV__MAX_DIMS + 1], step[NV__MAX_DIMS + 1], size[NV__MAX_DIMS + 1];
  int k = len % 2 ? 1 : 2;
  for (int i = 0; i <= last; i++) {
    start[i] = i == last ? (len - 1) / 2 : 0;
    step[i] = 1;
    size[i] = i == last ? k : o->shape[i];
  }
  *sel = keep(tp, nv__tf_slice(idx, start, step, size));
  return k;
}

VJP(vjp_median) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  int perm[NV__MAX_DIMS], tshape[NV__MAX_DIMS], nd = meta(in[0])->ndim;
  nv_array *rows, *sel = NULL;
  int k = median_select(&tp, in[0], r, perm, tshape, &rows, &sel);
  if (k == 0) {
    grad[0] = nv_zeros_like(in[0]);
  } else {
    /* The cotangent as (kept..., 1): the kept axes keep their order in both layouts. */
    int cs[NV__MAX_DIMS + 1], last = meta(rows)->ndim - 1;
    for (int i = 0; i < last; i++) cs[i] = meta(rows)->shape[i];
    cs[last] = 1;
    nv_array *c = keep(&tp, nv_reshape(cot[0], cs, last + 1));
    if (k == 2) c = keep(&tp, nv_multiply_scalar(c, 0.5));
    nv_array *z = keep(&tp, nv_zeros_like(rows));
    nv_array *g = keep(&tp, nv_put_along_axis(z, sel, c, last));
    grad[0] = give(rows_back(&tp, g, nd, perm, tshape));
  }
  drain(&tp);
  return NV_OK;
}

JVP(jvp_median) {
  if (!inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  int perm[NV__MAX_DIMS], tshape[NV__MAX_DIMS];
  nv_array *rows, *sel = NULL;
  int k = median_select(&tp, in[0], r, perm, tshape, &rows, &sel);
  if (k == 0) {
    ot[0] = nv_zeros_like(out[0]);
  } else {
    int last = meta(rows)->ndim - 1;
    nv_array *tr = rows_last(&tp, tan[0], r, perm, tshape);
    nv_array *v = keep(&tp, nv_take_along_axis(tr, sel, last));
    nv_array *m = keep(&tp, nv_mean(v, &last, 1, false));
    ot[0] = nv_reshape(m, meta(out[0])->shape, meta(out[0])->ndim);
  }
  drain(&tp);
  return NV_OK;
}

/* ---- logsumexp, softmax ---- */

/* d logsumexp / d x: the softmax of x over the reduced axes (MLX's rule), made total on rows
 * without a finite value. x is clipped to the dtype's finite range first, so a row holding +inf
 * splits the weight evenly among its +inf elements (the limit of ties) instead of NaN; a row of
 * only -inf (logsumexp -inf, log of an empty sum) gets zero weights; NaN rows stay NaN. */
static nv_array *lse_weights(pool *tp, const nv__node *n, const nv_array *x, const nv_array *y) {
  red r = red_of(n);
  nv_dtype dt = dtype_of(x);
  double big = dtype_max(dt);
  nv_array *lo = keep(tp, nv_maximum_scalar(x, -big));
  nv_array *xc = keep(tp, nv_minimum_scalar(lo, big));
  nv_array *s = keep(tp, nv_softmax(xc, r.axes, r.naxes, true));
  nv_array *ninf = keep(tp, nv_full(NULL, 0, -INFINITY, dtype_of(y)));
  nv_array *live = keep(tp, nv__tf_compare(kept(tp, y, r), ninf, NV__CMP_GT));
  return keep(tp, nv__tf_mask(s, live));
}

VJP(vjp_logsumexp) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  nv_array *w = lse_weights(&tp, n, in[0], out[0]);
  grad[0] = nv_multiply(kept(&tp, cot[0], red_of(n)), w);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_logsumexp) {
  if (!inexact(in[0])) return NV_OK;
  pool tp = {0};
  red r = red_of(n);
  nv_array *w = lse_weights(&tp, n, in[0], out[0]);
  nv_array *tw = keep(&tp, nv_multiply(tan[0], w));
  ot[0] = nv_sum(tw, r.axes, r.naxes, r.keepdims);
  drain(&tp);
  return NV_OK;
}

/* s · (v − Σ s·v) over the softmax axes: the softmax Jacobian (symmetric) applied to v, from the
 * output s. float16/bfloat16 compute in float32 and round once, as the forward does. */
static nv_array *softmax_apply(const nv__node *n, const nv_array *s, const nv_array *v) {
  pool tp = {0};
  red r = red_of(n);
  nv_dtype dt = dtype_of(s);
  if (half(dt)) {
    s = keep(&tp, nv_astype(s, NV_DTYPE_FLOAT32));
    v = keep(&tp, nv_astype(v, NV_DTYPE_FLOAT32));
  }
  nv_array *sv = keep(&tp, nv_multiply(s, v));
  nv_array *tot = keep(&tp, nv_sum(sv, r.axes, r.naxes, true));
  nv_array *st = keep(&tp, nv_multiply(s, tot));
  nv_array *g = keep(&tp, nv_subtract(sv, st));
  nv_array *res = half(dt) ? nv_astype(g, dt) : give(g);
  drain(&tp);
  return res;
}

VJP(vjp_softmax) {
  if (want[0] && inexact(in[0])) grad[0] = softmax_apply(n, out[0], cot[0]);
  return NV_OK;
}

JVP(jvp_softmax) {
  ot[0] = softmax_apply(n, out[0], tan[0]);
  return NV_OK;
}

/* ---- Rows of scans and sorts ---- */

/* Whether a scan/sort node works on the flattened array (axis NULL) rather than one axis. */
static bool flat_rows(const nv__node *n) {
  const nv__rows_params *p = n->params;
  const nv__output *i = &n->inputs[0].node->out[n->inputs[0].idx];
  return !(p->naxes == 1 && n->out[0].ndim == i->ndim);
}

/* `x` laid out as the node's rows (flattened when the node flattens) and the row axis. */
static nv_array *as_rows(pool *tp, const nv__node *n, const nv_array *x, int *axis) {
  if (!flat_rows(n)) {
    *axis = ((const nv__rows_params *)n->params)->axes[0];
    return keep(tp, nv_retain((nv_array *)x));
  }
  *axis = 0;
  int len = (int)meta(x)->size;
  return keep(tp, nv_reshape(x, &len, 1));
}

/* A gradient in the row layout given back in the input's shape (a new reference). */
static nv_array *from_rows(const nv_array *g, const nv_array *x) {
  if (nv__tf_same_shape(g, x)) return nv_retain((nv_array *)g);
  return nv_reshape(g, meta(x)->shape, meta(x)->ndim);
}

/* `x` reversed along `axis` (a view). */
static nv_array *flip(pool *tp, const nv_array *x, int axis) {
  int nd = meta(x)->ndim, start[NV__MAX_DIMS], step[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    start[i] = i == axis ? meta(x)->shape[i] - 1 : 0;
    step[i] = i == axis ? -1 : 1;
  }
  return keep(tp, nv__tf_slice(x, start, step, meta(x)->shape));
}

/* `x` shifted by one along `axis`, towards the end (`later`) or the start, a zero entering. */
static nv_array *shift(pool *tp, const nv_array *x, int axis, bool later) {
  int nd = meta(x)->ndim, from[NV__MAX_DIMS], to[NV__MAX_DIMS], step[NV__MAX_DIMS],
      len[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    bool a = i == axis;
    from[i] = a && !later ? 1 : 0;
    to[i] = a && later ? 1 : 0;
    step[i] = 1;
    len[i] = meta(x)->shape[i] - (a ? 1 : 0);
  }
  nv_array *part = keep(tp, nv__tf_slice(x, from, step, len));
  nv_array *z = keep(tp, nv_zeros_like(x));
  return keep(tp, nv__tf_slice_update(z, part, to, step, len));
}

/* ---- cumsum ---- */

VJP(vjp_cumsum) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *c = as_rows(&tp, n, cot[0], &ax);
  nv_array *g = keep(&tp, nv_cumsum(c, &ax, !p->reverse, p->inclusive));
  grad[0] = from_rows(g, in[0]);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_cumsum) {
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *t = as_rows(&tp, n, tan[0], &ax);
  ot[0] = nv_cumsum(t, &ax, p->reverse, p->inclusive);
  drain(&tp);
  return NV_OK;
}

/* ---- cumprod ---- */

/* 1 where x is zero (|x| == 0; NaN is not zero), else 0, in dtype `dt`. */
static nv_array *zero_mask(pool *tp, const nv_array *x, nv_dtype dt) {
  nv_array *a = keep(tp, nv_abs(x));
  nv_array *z = keep(tp, nv_zeros(NULL, 0, dtype_of(a)));
  nv_array *m = keep(tp, nv__tf_compare(a, z, NV__CMP_LE));
  return keep(tp, nv_astype(m, dt));
}

/* The pieces of cumprod's rules (MLX's handling of zeros): `first` marks each row's first zero
 * in scan order, `nz` the outputs whose inclusive product is not zero, `safe` is x with its
 * zeros replaced by 1 and `with_one` the scan of x with its first zero replaced by 1. */
typedef struct cumprod_parts {
  nv_array *first, *nz_incl, *safe, *with_one;
} cumprod_parts;

static cumprod_parts cumprod_split(pool *tp, const nv__node *n, const nv_array *x,
                                   const nv_array *y, int ax) {
  const nv__rows_params *p = n->params;
  nv_dtype dt = dtype_of(x);
  nv_array *other = keep(tp, nv_cumprod(x, &ax, p->reverse, !p->inclusive));
  const nv_array *incl = p->inclusive ? y : other, *excl = p->inclusive ? other : y;
  nv_array *zi = zero_mask(tp, incl, dt), *ze = zero_mask(tp, excl, dt);
  nv_array *zize = keep(tp, nv_multiply(zi, ze));
  cumprod_parts c;
  c.first = keep(tp, nv_subtract(zi, zize));
  nv_array *nzi = keep(tp, nv_negative(zi));
  c.nz_incl = keep(tp, nv_add_scalar(nzi, 1.0));
  c.safe = keep(tp, nv_add(x, zero_mask(tp, x, dt)));
  nv_array *x1 = keep(tp, nv_add(x, c.first));
  c.with_one = keep(tp, nv_cumprod(x1, &ax, p->reverse, p->inclusive));
  return c;
}

VJP(vjp_cumprod) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *c = as_rows(&tp, n, cot[0], &ax);
  cumprod_parts k = cumprod_split(&tp, n, x, out[0], ax);
  /* Before the first zero: Σ_{i ≥ j} c_i y_i / x_j; at it: the scan without it; after: 0. */
  nv_array *yc = keep(&tp, nv_multiply(out[0], c));
  nv_array *s1 = keep(&tp, nv_cumsum(yc, &ax, !p->reverse, p->inclusive));
  nv_array *q1 = keep(&tp, nv_divide(s1, k.safe));
  nv_array *g1 = keep(&tp, nv_multiply(q1, k.nz_incl));
  nv_array *wc = keep(&tp, nv_multiply(k.with_one, c));
  nv_array *s2 = keep(&tp, nv_cumsum(wc, &ax, !p->reverse, p->inclusive));
  nv_array *g2 = keep(&tp, nv_multiply(s2, k.first));
  nv_array *g = keep(&tp, nv_add(g1, g2));
  grad[0] = from_rows(g, in[0]);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_cumprod) {
  if (!inexact(in[0])) return NV_OK;
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *t = as_rows(&tp, n, tan[0], &ax);
  cumprod_parts k = cumprod_split(&tp, n, x, out[0], ax);
  /* Outputs with no zero in their product: y · Σ t/x; the others see only the first zero. */
  nv_array *tx = keep(&tp, nv_divide(t, k.safe));
  nv_array *s1 = keep(&tp, nv_cumsum(tx, &ax, p->reverse, p->inclusive));
  nv_array *nzy = zero_mask(&tp, out[0], dtype_of(x));
  nv_array *live = keep(&tp, nv_subtract(keep(&tp, nv_ones_like(nzy)), nzy));
  nv_array *y1 = keep(&tp, nv_multiply(out[0], live));
  nv_array *t1 = keep(&tp, nv_multiply(y1, s1));
  nv_array *tf = keep(&tp, nv_multiply(t, k.first));
  nv_array *s2 = keep(&tp, nv_cumsum(tf, &ax, p->reverse, p->inclusive));
  nv_array *t2 = keep(&tp, nv_multiply(k.with_one, s2));
  ot[0] = nv_add(t1, t2);
  drain(&tp);
  return NV_OK;
}

/* ---- cummax, cummin ---- */

/* For a forward inclusive running max/min of `x` along `ax`: the index of the element each
 * output comes from — the latest element (in scan order) equal to the running extreme (MLX's
 * and PyTorch's tie rule). A NaN counts as the extreme, as the forward propagates it. */
static nv_array *scan_owner(pool *tp, const nv_array *x, int ax, bool max) {
  nv_array *y = keep(tp, max ? nv_cummax(x, &ax, false, true) : nv_cummin(x, &ax, false, true));
  nv_array *at = keep(tp, nv__tf_compare(x, y, max ? NV__CMP_GE : NV__CMP_LE));
  nv_array *num = keep(tp, nv__tf_compare(x, x, NV__CMP_GE));
  nv_array *ati = keep(tp, nv_astype(at, NV_DTYPE_INT32));
  nv_array *numi = keep(tp, nv_astype(num, NV_DTYPE_INT32));
  nv_array *d = keep(tp, nv_subtract(ati, numi));
  nv_array *own = add_int(tp, d, 1); /* at the extreme, or NaN */
  int nd = meta(x)->ndim, shape[NV__MAX_DIMS], len = meta(x)->shape[ax];
  for (int i = 0; i < nd; i++) shape[i] = i == ax ? len : 1;
  nv_array *r = keep(tp, nv_arange(1, (double)len + 1, 1, NV_DTYPE_INT32));
  nv_array *idx1 = keep(tp, nv_reshape(r, shape, nd));
  /* own ? index : -1, then the running maximum of that. */
  nv_array *e1 = keep(tp, nv_multiply(own, idx1));
  nv_array *e = add_int(tp, e1, -1);
  return keep(tp, nv_cummax(e, &ax, false, true));
}

/* Zeros of x's shape with vals[..., i, ...] added at [..., idx[..., i, ...], ...] along `ax`
 * (idx and vals have x's shape): one scatter_add on the flattened array, at the linear
 * positions of the targets. */
static nv_array *scatter_add_axis(pool *tp, const nv_array *x, const nv_array *idx,
                                  const nv_array *vals, int ax) {
  const nv__output *o = meta(x);
  int nd = o->ndim, shape[NV__MAX_DIMS];
  int64_t stride = 1;
  for (int i = ax + 1; i < nd; i++) stride *= o->shape[i];
  for (int i = 0; i < nd; i++) shape[i] = i == ax ? o->shape[i] : 1;
  nv_array *pos = keep(tp, nv_arange(0, o->shape[ax], 1, NV_DTYPE_INT64));
  nv_array *posr = keep(tp, nv_reshape(pos, shape, nd));
  nv_array *lin = keep(tp, nv_arange(0, (double)o->size, 1, NV_DTYPE_INT64));
  nv_array *linr = keep(tp, nv_reshape(lin, o->shape, nd));
  nv_array *id = keep(tp, nv_astype(idx, NV_DTYPE_INT64));
  nv_array *moved = keep(tp, nv_subtract(id, posr));
  nv_array *step = mul_int(tp, moved, stride);
  nv_array *target = keep(tp, nv_add(linr, step));
  int flat = (int)o->size, upd_shape[2] = {flat, 1}, zero_ax = 0;
  nv_array *t1 = keep(tp, nv_reshape(target, &flat, 1));
  nv_array *u = keep(tp, nv_reshape(vals, upd_shape, 2));
  nv_array *z = keep(tp, nv_zeros(&flat, 1, dtype_of(vals)));
  nv_array *s = keep(tp, nv_scatter_add(z, (const nv_array *const *)&t1, 1, u, &zero_ax));
  return keep(tp, nv_reshape(s, o->shape, nd));
}

VJP(vjp_cumext) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  if (dtype_of(in[0]) == NV_DTYPE_COMPLEX64) return no_complex("vjp", nv__prims[n->prim].name);
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *c = as_rows(&tp, n, cot[0], &ax);
  if (meta(x)->size == 0) {
    grad[0] = nv_zeros_like(in[0]);
    drain(&tp);
    return NV_OK;
  }
  /* In the forward frame (reverse scans flipped), an exclusive output i is the inclusive one at
   * i - 1, so its cotangent moves back by one. */
  if (p->reverse) {
    x = flip(&tp, x, ax);
    c = flip(&tp, c, ax);
  }
  if (!p->inclusive) c = shift(&tp, c, ax, false);
  nv_array *owner = scan_owner(&tp, x, ax, n->prim == NV__PRIM_CUMMAX);
  nv_array *g = scatter_add_axis(&tp, x, owner, c, ax);
  if (p->reverse) g = flip(&tp, g, ax);
  grad[0] = from_rows(g, in[0]);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_cumext) {
  if (!inexact(in[0])) return NV_OK;
  if (dtype_of(in[0]) == NV_DTYPE_COMPLEX64) return no_complex("jvp", nv__prims[n->prim].name);
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *t = as_rows(&tp, n, tan[0], &ax);
  if (meta(x)->size == 0) {
    ot[0] = nv_zeros_like(out[0]);
    drain(&tp);
    return NV_OK;
  }
  if (p->reverse) {
    x = flip(&tp, x, ax);
    t = flip(&tp, t, ax);
  }
  nv_array *owner = scan_owner(&tp, x, ax, n->prim == NV__PRIM_CUMMAX);
  nv_array *r = keep(&tp, nv_take_along_axis(t, owner, ax));
  if (!p->inclusive) r = shift(&tp, r, ax, true);
  if (p->reverse) r = flip(&tp, r, ax);
  ot[0] = give(r);
  drain(&tp);
  return NV_OK;
}

/* ---- logcumsumexp ---- */

/* The rules of y = logcumsumexp(x) in log space, with the cotangent or tangent split by sign
 * (log of a negative part is -inf, so it drops out): vjp_j = Σ_i c_i exp(x_j − y_i) over the
 * outputs i that include j, jvp_i = Σ_j t_j exp(x_j − y_i) over the elements j in output i.
 * y is raised to the dtype's lowest finite value first, so that elements at -inf in a prefix of
 * only -inf get 0 rather than NaN. */
static nv_array *lcse_part(pool *tp, const nv__node *n, const nv_array *x, const nv_array *yc,
                           const nv_array *v, int ax, bool vjp, bool positive) {
  const nv__rows_params *p = n->params;
  nv_array *sv = positive ? (nv_array *)v : keep(tp, nv_negative(v));
  /* log of the part above zero: log(sv) where sv > 0, else -inf — written as log(sv·m + 1 − m)
   * + log(m) so that its own derivative stays finite where sv <= 0 (higher orders). */
  nv_array *zero = keep(tp, nv_zeros(NULL, 0, dtype_of(sv)));
  nv_array *m = keep(tp, nv_astype(keep(tp, nv__tf_compare(sv, zero, NV__CMP_GT)), dtype_of(sv)));
  nv_array *svm = keep(tp, nv_multiply(sv, m));
  nv_array *safe = keep(tp, nv_subtract(keep(tp, nv_add_scalar(svm, 1.0)), m));
  nv_array *lv = keep(tp, nv_add(keep(tp, nv_log(safe)), keep(tp, nv_log(m))));
  if (vjp) {
    nv_array *a = keep(tp, nv_subtract(lv, yc));
    nv_array *s = keep(tp, nv_logcumsumexp(a, &ax, !p->reverse, p->inclusive));
    return keep(tp, nv_exp(keep(tp, nv_add(s, x))));
  }
  nv_array *a = keep(tp, nv_add(lv, x));
  nv_array *s = keep(tp, nv_logcumsumexp(a, &ax, p->reverse, p->inclusive));
  return keep(tp, nv_exp(keep(tp, nv_subtract(s, yc))));
}

static nv_array *lcse_rule(const nv__node *n, const nv_array *in, const nv_array *y,
                           const nv_array *v, bool vjp) {
  pool tp = {0};
  int ax;
  nv_array *x = as_rows(&tp, n, in, &ax), *vr = as_rows(&tp, n, v, &ax);
  nv_array *yc = keep(&tp, nv_maximum_scalar(y, -dtype_max(dtype_of(y))));
  nv_array *pos = lcse_part(&tp, n, x, yc, vr, ax, vjp, true);
  nv_array *neg = lcse_part(&tp, n, x, yc, vr, ax, vjp, false);
  nv_array *r = keep(&tp, nv_subtract(pos, neg));
  nv_array *res = vjp ? from_rows(r, in) : give(r);
  drain(&tp);
  return res;
}

VJP(vjp_logcumsumexp) {
  if (want[0] && inexact(in[0])) grad[0] = lcse_rule(n, in[0], out[0], cot[0], true);
  return NV_OK;
}

JVP(jvp_logcumsumexp) {
  if (inexact(in[0])) ot[0] = lcse_rule(n, in[0], out[0], tan[0], false);
  return NV_OK;
}

/* ---- sort, partition ---- */

/* Gradients through the permutation (MLX's rule): the sorted output j came from the element
 * at argsort(x)[j], so tangents are gathered by it and cotangents put back by it. nuvec's
 * partition is the full sort, so it shares the rule. */
VJP(vjp_sort) {
  if (!want[0] || !inexact(in[0])) return NV_OK;
  pool tp = {0};
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *c = as_rows(&tp, n, cot[0], &ax);
  nv_array *idx = keep(&tp, nv_argsort(x, &ax));
  nv_array *z = keep(&tp, nv_zeros_like(x));
  nv_array *g = keep(&tp, nv_put_along_axis(z, idx, c, ax));
  grad[0] = from_rows(g, in[0]);
  drain(&tp);
  return NV_OK;
}

JVP(jvp_sort) {
  if (!inexact(in[0])) return NV_OK;
  pool tp = {0};
  int ax;
  nv_array *x = as_rows(&tp, n, in[0], &ax), *t = as_rows(&tp, n, tan[0], &ax);
  nv_array *idx = keep(&tp, nv_argsort(x, &ax));
  ot[0] = nv_take_along_axis(t, idx, ax);
  drain(&tp);
  return NV_OK;
}

/* ---- vmap ---- */

/* The reduced axes of a reduction node shifted past a batch axis in front. */
static void shifted_axes(red r, int *ax) {
  for (int i = 0; i < r.naxes; i++) ax[i] = r.axes[i] + 1;
}

VMAP(vmap_plain) {
  pool tp = {0};
  red r = red_of(n);
  int ax[NV__MAX_DIMS];
  shifted_axes(r, ax);
  nv_array *x = keep(&tp, nv__tf_moveaxis(in[0], axes[0], 0));
  nv_array *(*op)(const nv_array *, const int *, int, bool) = nv_prod;
  switch (n->prim) {
    case NV__PRIM_MAX: op = nv_max; break;
    case NV__PRIM_MIN: op = nv_min; break;
    case NV__PRIM_ALL: op = nv_all; break;
    case NV__PRIM_ANY: op = nv_any; break;
    case NV__PRIM_MEAN: op = nv_mean; break;
    case NV__PRIM_COUNT_NONZERO: op = nv_count_nonzero; break;
    default: break;
  }
  out[0] = op(x, ax, r.naxes, r.keepdims);
  oax[0] = 0;
  drain(&tp);
  return NV_OK;
}

VMAP(vmap_row_reduce) {
  pool tp = {0};
  red r = red_of(n);
  const nv__rows_params *p = n->params;
  int ax[NV__MAX_DIMS];
  shifted_axes(r, ax);
  nv_array *x = keep(&tp, nv__tf_moveaxis(in[0], axes[0], 0));
  switch (n->prim) {
    case NV__PRIM_VAR: out[0] = nv_var(x, ax, r.naxes, r.keepdims, p->ddof); break;
    case NV__PRIM_STD: out[0] = nv_std(x, ax, r.naxes, r.keepdims, p->ddof); break;
    case NV__PRIM_MEDIAN: out[0] = nv_median(x, ax, r.naxes, r.keepdims); break;
    case NV__PRIM_SOFTMAX: out[0] = nv_softmax(x, ax, r.naxes, true); break;
    default: out[0] = nv_logsumexp(x, ax, r.naxes, r.keepdims); break;
  }
  oax[0] = 0;
  drain(&tp);
  return NV_OK;
}

/* A batched input as (B, rows...): the batch in front, and the rest flattened into one axis
 * when the node works on the flattened array. *axis is the row axis. */
static nv_array *batched_rows(pool *tp, const nv__node *n, const nv_array *x, int bax,
                              int *axis) {
  nv_array *f = keep(tp, nv__tf_moveaxis(x, bax, 0));
  if (!flat_rows(n)) {
    *axis = ((const nv__rows_params *)n->params)->axes[0] + 1;
    return f;
  }
  const nv__output *o = meta(f);
  int shape[2] = {o->shape[0], 1};
  for (int i = 1; i < o->ndim; i++) shape[1] *= o->shape[i];
  *axis = 1;
  return keep(tp, nv_reshape(f, shape, 2));
}

VMAP(vmap_arg) {
  pool tp = {0};
  const nv__rows_params *p = n->params;
  /* argmax over one axis keeps it; over the flattened array (axis NULL) it flattens each
   * example, and keepdims then restores the example's size-1 axes. */
  bool one = p->naxes == 1;
  nv_array *x;
  int ax;
  if (one) {
    x = keep(&tp, nv__tf_moveaxis(in[0], axes[0], 0));
    ax = p->axes[0] + 1;
  } else {
    nv_array *f = keep(&tp, nv__tf_moveaxis(in[0], axes[0], 0));
    int shape[2] = {meta(f)->shape[0], 1};
    for (int i = 1; i < meta(f)->ndim; i++) shape[1] *= meta(f)->shape[i];
    x = keep(&tp, nv_reshape(f, shape, 2));
    ax = 1;
  }
  bool kd = one && p->keepdims;
  nv_array *r = keep(&tp, n->prim == NV__PRIM_ARGMAX ? nv_argmax(x, &ax, kd) : nv_argmin(x, &ax, kd));
  if (!one && p->keepdims) {
    int shape[NV__MAX_DIMS + 1];
    shape[0] = meta(x)->shape[0];
    for (int i = 0; i < n->out[0].ndim; i++) shape[i + 1] = n->out[0].shape[i];
    r = keep(&tp, nv_reshape(r, shape, n->out[0].ndim + 1));
  }
  out[0] = give(r);
  oax[0] = 0;
  drain(&tp);
  return NV_OK;
}

VMAP(vmap_rows) {
  pool tp = {0};
  const nv__rows_params *p = n->params;
  int ax;
  nv_array *x = batched_rows(&tp, n, in[0], axes[0], &ax);
  switch (n->prim) {
    case NV__PRIM_CUMSUM: out[0] = nv_cumsum(x, &ax, p->reverse, p->inclusive); break;
    case NV__PRIM_CUMPROD: out[0] = nv_cumprod(x, &ax, p->reverse, p->inclusive); break;
    case NV__PRIM_CUMMAX: out[0] = nv_cummax(x, &ax, p->reverse, p->inclusive); break;
    case NV__PRIM_CUMMIN: out[0] = nv_cummin(x, &ax, p->reverse, p->inclusive); break;
    case NV__PRIM_LOGCUMSUMEXP:
      out[0] = nv_logcumsumexp(x, &ax, p->reverse, p->inclusive);
      break;
    case NV__PRIM_SORT: out[0] = nv_sort(x, &ax); break;
    case NV__PRIM_ARGSORT: out[0] = nv_argsort(x, &ax); break;
    /* The node does not keep kth: nuvec's partition is the full sort whatever kth is, and 0 is
     * in range (a partition of an empty row does not exist). */
    case NV__PRIM_PARTITION: out[0] = nv_partition(x, 0, &ax); break;
    case NV__PRIM_ARGTOPK: out[0] = nv__argtopk(x, p->k, &ax); break;
    default: out[0] = nv_argpartition(x, 0, &ax); break;
  }
  oax[0] = 0;
  drain(&tp);
  return NV_OK;
}

/* `x` at index `b` of its first axis, without that axis (a view). */
static nv_array *batch_item(pool *tp, const nv_array *x, int b) {
  int nd = meta(x)->ndim, start[NV__MAX_DIMS], step[NV__MAX_DIMS], len[NV__MAX_DIMS], zero = 0;
  for (int i = 0; i < nd; i++) {
    start[i] = i == 0 ? b : 0;
    step[i] = 1;
    len[i] = i == 0 ? 1 : meta(x)->shape[i];
  }
  nv_array *s = keep(tp, nv__tf_slice(x, start, step, len));
  return keep(tp, nv_squeeze(s, &zero, 1));
}

/* searchsorted with batched values searches the one sorted array as it is. A batch of sorted
 * arrays has no single-array kernel: each is searched on its own and the results stacked (B
 * nodes, each O(m log n)). */
VMAP(vmap_searchsorted) {
  const nv__rows_params *p = n->params;
  if (axes[0] < 0) {
    out[0] = nv_searchsorted(in[0], in[1], p->right);
    oax[0] = axes[1];
    return NV_OK;
  }
  pool tp = {0};
  int b = nv__tf_batch_size(in, axes, 2);
  nv_array *a = keep(&tp, nv__tf_moveaxis(in[0], axes[0], 0));
  nv_array *v = axes[1] < 0 ? in[1] : keep(&tp, nv__tf_moveaxis(in[1], axes[1], 0));
  if (b == 0) {
    int shape[NV__MAX_DIMS + 1];
    shape[0] = 0;
    for (int i = 0; i < n->out[0].ndim; i++) shape[i + 1] = n->out[0].shape[i];
    out[0] = nv_zeros(shape, n->out[0].ndim + 1, NV_DTYPE_UINT32);
  } else {
    nv_array **parts = nv__malloc((size_t)b * sizeof *parts);
    if (!parts) {
      drain(&tp);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: searchsorted: out of memory");
    }
    for (int i = 0; i < b; i++) {
      pool one = {0};
      nv_array *vi = axes[1] < 0 ? v : batch_item(&one, v, i);
      parts[i] = nv_searchsorted(batch_item(&one, a, i), vi, p->right);
      drain(&one);
    }
    out[0] = nv_stack((const nv_array *const *)parts, b, 0);
    nv__tf_release_all(parts, (size_t)b);
    nv__free(parts);
  }
  oax[0] = 0;
  drain(&tp);
  return NV_OK;
}

/* ---- Registration ---- */

static void set(nv__prim_rule *r, int prim, nv__vjp_rule vjp, nv__jvp_rule jvp,
                nv__vmap_rule vmap) {
  r[prim] = (nv__prim_rule){vjp, jvp, vmap};
}

void nv__rules_register_reduce(nv__prim_rule *r) {
  set(r, NV__PRIM_PROD, vjp_prod, jvp_prod, vmap_plain);
  set(r, NV__PRIM_MAX, vjp_extreme, jvp_extreme, vmap_plain);
  set(r, NV__PRIM_MIN, vjp_extreme, jvp_extreme, vmap_plain);
  set(r, NV__PRIM_ALL, vjp_none, jvp_none, vmap_plain);
  set(r, NV__PRIM_ANY, vjp_none, jvp_none, vmap_plain);
  set(r, NV__PRIM_MEAN, vjp_mean, jvp_mean, vmap_plain);
  set(r, NV__PRIM_COUNT_NONZERO, vjp_none, jvp_none, vmap_plain);
  set(r, NV__PRIM_VAR, vjp_spread, jvp_spread, vmap_row_reduce);
  set(r, NV__PRIM_STD, vjp_spread, jvp_spread, vmap_row_reduce);
  set(r, NV__PRIM_MEDIAN, vjp_median, jvp_median, vmap_row_reduce);
  set(r, NV__PRIM_LOGSUMEXP, vjp_logsumexp, jvp_logsumexp, vmap_row_reduce);
  set(r, NV__PRIM_ARGMAX, vjp_none, jvp_none, vmap_arg);
  set(r, NV__PRIM_ARGMIN, vjp_none, jvp_none, vmap_arg);
  set(r, NV__PRIM_SOFTMAX, vjp_softmax, jvp_softmax, vmap_row_reduce);
  set(r, NV__PRIM_CUMSUM, vjp_cumsum, jvp_cumsum, vmap_rows);
  set(r, NV__PRIM_CUMPROD, vjp_cumprod, jvp_cumprod, vmap_rows);
  set(r, NV__PRIM_CUMMAX, vjp_cumext, jvp_cumext, vmap_rows);
  set(r, NV__PRIM_CUMMIN, vjp_cumext, jvp_cumext, vmap_rows);
  set(r, NV__PRIM_LOGCUMSUMEXP, vjp_logcumsumexp, jvp_logcumsumexp, vmap_rows);
  set(r, NV__PRIM_SORT, vjp_sort, jvp_sort, vmap_rows);
  set(r, NV__PRIM_ARGSORT, vjp_none, jvp_none, vmap_rows);
  set(r, NV__PRIM_PARTITION, vjp_sort, jvp_sort, vmap_rows);
  set(r, NV__PRIM_ARGPARTITION, vjp_none, jvp_none, vmap_rows);
  set(r, NV__PRIM_ARGTOPK, vjp_none, jvp_none, vmap_rows);
  set(r, NV__PRIM_SEARCHSORTED, vjp_none, jvp_none, vmap_searchsorted);
}
