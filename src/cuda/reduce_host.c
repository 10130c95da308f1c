/* The reduce family's CUDA kernel-table entries: sum, prod, max, min, all, any, mean,
 * count_nonzero, var, std, logsumexp, argmax, argmin and softmax. Each plans its node onto the
 * reduction engine (reduce.cu: kept and reduced dims folded from any layout, a row, column or
 * split launch) or onto the row kernels (reduce_rows.cu: softmax and logsumexp of contiguous
 * float rows), with the CPU kernels' semantics (src/cpu/reduce.c, reduce_rows.c,
 * reduce_softmax.c, sort.c's arg-reductions). Launch shapes depend on the shapes alone, never
 * on the device, so the same input gives the same bits everywhere. */
#include <stdlib.h>

#include "cuda/gpu.h"
#include "cuda/reduce.h"
#include "ops/params.h"
#include "ops/reduce_params.h"

_Static_assert(NV__RED_DIMS == NV__MAX_DIMS, "the kernels' parameter blocks take every dim");

/* Threads a launch is split to reach at least when one output's reduction is long: one wave
 * of the H200's 132 multiprocessors at 1024 threads each (the kernels' occupancy at 64
 * registers a thread), so that long pieces run together and end together. */
#define FILL_THREADS ((int64_t)132 * 1024)
/* Blocks of the long-row kernel's persistent grid at most: two waves of 2048 threads a
 * multiprocessor. */
#define ROWS_THREADS ((int64_t)132 * 2048 * 2)
/* Blocks per launch at most; the kernels loop over the rest. */
#define MAX_GRID ((int64_t)1 << 24)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The smallest power of two >= n within [lo, hi]. */
static int64_t pow2_at_least(int64_t n, int64_t lo, int64_t hi) {
  int64_t g = lo;
  while (g < n && g < hi) g <<= 1;
  return g;
}

/* Folds adjacent dims where the strides allow; drops size-1 dims (as the CPU engine). */
static int fold(int64_t *shape, int64_t *st, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 1) continue;
    if (m > 0 && st[m - 1] == shape[i] * st[i]) {
      shape[m - 1] *= shape[i];
      st[m - 1] = st[i];
      continue;
    }
    shape[m] = shape[i];
    st[m++] = st[i];
  }
  return m;
}

/* The kept and reduced dims of x over the sorted axes, folded (at least one reduced dim). */
static void plan_layout(nv__red_params *p, const nv__output *x, const int *axes, int naxes) {
  p->nk = p->nr = 0;
  p->nout = p->rsize = 1;
  for (int i = 0, j = 0; i < x->ndim; i++) {
    if (j < naxes && axes[j] == i) {
      j++;
      p->rshape[p->nr] = x->shape[i];
      p->rst[p->nr++] = x->strides[i];
      p->rsize *= x->shape[i];
    } else {
      p->kshape[p->nk] = x->shape[i];
      p->kst[p->nk++] = x->strides[i];
      p->nout *= x->shape[i];
    }
  }
  p->nk = fold(p->kshape, p->kst, p->nk);
  p->nr = fold(p->rshape, p->rst, p->nr);
  if (p->nr == 0) {
    p->nr = 1;
    p->rshape[0] = 1;
    p->rst[0] = 1;
  }
}

static nv_status dispatch(nv__gpu_ctx *ctx, const void *func, int64_t gx, int64_t gy,
                          uint32_t bx, uint32_t by, const hrx_view *views,
                          const hrx_access *access, int nviews, const void *params,
                          size_t params_size, bool aliasing) {
  nv__gpu_launch l;
  memset(&l, 0, sizeof l);
  l.func = func;
  l.grid[0] = (uint32_t)(gx < 1 ? 1 : gx > MAX_GRID ? MAX_GRID : gx);
  l.grid[1] = (uint32_t)gy;
  l.grid[2] = 1;
  l.block[0] = bx;
  l.block[1] = by;
  l.block[2] = 1;
  l.views = views;
  l.access = access;
  l.nviews = nviews;
  l.params = params;
  l.params_size = params_size;
  l.aliasing = aliasing;
  return nv__gpu_dispatch(ctx, &l);
}

static nv_status scratch(nv__gpu_ctx *ctx, int64_t bytes, hrx_view *out) {
  return nv__gpu_scratch(ctx, (size_t)bytes + 16, out);
}

/* Whether the reduction runs on the row kernel (a group of threads per output, the reduced
 * dims along the lanes) rather than the column kernel (a thread per output): the lanes take
 * the contiguous dim, or the smaller stride; short reductions take a thread each. */
static bool use_row(const nv__red_params *p) {
  int64_t rs = llabs(p->rst[p->nr - 1]), len = p->rshape[p->nr - 1];
  if (p->nk == 0) return true;
  if (rs == 1 && len >= 32) return true;
  if (p->rsize < 64) return false;
  if (p->nout < 32 && p->rsize >= 1024) return true;
  return rs < llabs(p->kst[p->nk - 1]);
}

/* Runs functor f over p's layout (op, fin, dtypes, offsets set by the caller): results into
 * `out`, `aux` (or NULL) the float64 per-output context. Long reductions with few outputs
 * are split: accumulators into scratch, then combined in order by the finish kernel. */
static nv_status engine(nv__gpu_ctx *ctx, int f, nv__red_params *p, hrx_view in, hrx_view out,
                        const hrx_view *aux) {
  static const hrx_access access[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  nv__red_kernels k = nv__red_kernels_of(f);
  hrx_view views[3] = {in, out, aux ? *aux : in};
  p->ctx = aux != NULL;
  p->partial = 0;
  if (p->rsize == 0) { /* empty reductions: the identity (mean, var: NaN) */
    p->nsplit = 0;
    p->chunk = 0;
    p->group = 1;
    return dispatch(ctx, k.fin, ceil_div(p->nout, 256), 1, 256, 1, views, access, 3, p, sizeof *p,
                    false);
  }
  int64_t esize = (int64_t)nv_dtype_size((nv_dtype)p->dtype), r = p->rsize;
  int64_t nsplit = 1, gx, gy = 1;
  uint32_t bx, by;
  const void *func;
  if (use_row(p)) {
    /* About four 16-byte loads a thread; pieces of whole 64-element blocks. */
    int64_t ept = 64 / esize < 8 ? 8 : 64 / esize;
    int64_t g = pow2_at_least(ceil_div(r, ept), 32, 1024);
    if (p->nout * g < FILL_THREADS && r > 2 * g * ept) {
      nsplit = ceil_div(FILL_THREADS, p->nout * g);
      if (nsplit > r / (g * ept)) nsplit = r / (g * ept);
    }
    p->chunk = ceil_div(ceil_div(r, nsplit), 64) * 64;
    nsplit = ceil_div(r, p->chunk);
    p->group = (int32_t)g;
    bx = (uint32_t)(g >= 64 ? g : 256);
    by = 1;
    gx = ceil_div(p->nout * nsplit, bx / g);
    func = k.row;
  } else {
    /* At least 16 elements a thread along the reduction; 16 bytes of consecutive outputs a
     * thread where they are contiguous. */
    int64_t v = 1;
    if (k.colv && !aux && p->kst[p->nk - 1] == 1 && p->kshape[p->nk - 1] % k.vec == 0) v = k.vec;
    int64_t b = 1;
    while (b < (v > 1 ? 8 : 32) && 2 * b * 16 <= r) b <<= 1;
    int64_t threads = ceil_div(p->nout, 32 * v) * 32 * b;
    if (threads < FILL_THREADS && r > 2 * b * 16) {
      nsplit = ceil_div(FILL_THREADS, threads);
      if (nsplit > r / (b * 16)) nsplit = r / (b * 16);
      if (nsplit > 65535) nsplit = 65535;
    }
    p->chunk = ceil_div(r, nsplit);
    nsplit = ceil_div(r, p->chunk);
    p->group = 1;
    bx = 32;
    by = (uint32_t)b;
    gx = ceil_div(p->nout, 32 * v);
    gy = nsplit;
    func = v > 1 ? k.colv : k.col;
  }
  p->nsplit = (int32_t)nsplit;
  if (nsplit == 1)
    return dispatch(ctx, func, gx, gy, bx, by, views, access, 3, p, sizeof *p, false);

  hrx_view part;
  nv_status st = scratch(ctx, nsplit * p->nout * (int64_t)k.acc_size, &part);
  if (st != NV_OK) return st;
  p->partial = 1;
  views[1] = part;
  st = dispatch(ctx, func, gx, gy, bx, by, views, access, 3, p, sizeof *p, false);
  if (st != NV_OK) return st;
  p->partial = 0;
  p->group = nsplit >= 32 ? 32 : 1;
  hrx_view fviews[3] = {part, out, aux ? *aux : part};
  return dispatch(ctx, k.fin, p->group == 1 ? ceil_div(p->nout, 256) : ceil_div(p->nout, 8), 1,
                  256, 1, fviews, access, 3, p, sizeof *p, false);
}

/* ---- the kernel-table entries ---- */

typedef struct job {
  nv__gpu_arg in, out;
  const nv__output *x;
  nv__output *o;
  nv__red_params p;
} job;

/* Output and input views and the layout; 1 to run, 0 when the output is empty, -1 on
 * failure (*st set). */
static int begin(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, const int *axes,
                 int naxes, job *j, nv_status *st) {
  j->o = &node->out[0];
  j->x = in[0].meta;
  *st = nv__gpu_output(ctx, j->o, &j->out);
  if (*st != NV_OK) return -1;
  if (j->o->size == 0) return 0;
  *st = nv__gpu_input(ctx, &in[0], &j->in);
  if (*st != NV_OK) return -1;
  memset(&j->p, 0, sizeof j->p);
  plan_layout(&j->p, j->x, axes, naxes);
  j->p.dtype = j->x->dtype;
  j->p.odtype = j->o->dtype;
  j->p.in_off = j->in.offset;
  j->p.out_off = j->out.offset;
  return 1;
}

static int width_index(nv_dtype dt) {
  size_t s = nv_dtype_size(dt);
  return s == 1 ? 0 : s == 2 ? 1 : s == 4 ? 2 : 3;
}

static bool is_float(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT32 ||
         dt == NV_DTYPE_FLOAT64;
}

static bool is_inexact(nv_dtype dt) { return is_float(dt) || dt == NV_DTYPE_COMPLEX64; }

/* The bits that make an element nonzero: every bit but the sign bits of floats (-0.0 is zero,
 * NaN is not). */
static uint64_t nonzero_mask(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: return 0x7fffu;
    case NV_DTYPE_FLOAT32: return 0x7fffffffu;
    case NV_DTYPE_FLOAT64: return 0x7fffffffffffffffull;
    case NV_DTYPE_COMPLEX64: return 0x7fffffff7fffffffull;
    default: return ~0ull;
  }
}

/* The sign bit of signed integers: flipped, unsigned order is the signed order. */
static uint64_t sign_flip(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_INT8: return 0x80u;
    case NV_DTYPE_INT16: return 0x8000u;
    case NV_DTYPE_INT32: return 0x80000000u;
    case NV_DTYPE_INT64: return 0x8000000000000000ull;
    default: return 0;
  }
}

/* The float functor of a family (first: its float16 one) for float dtype dt. */
static int float_functor(int first, nv_dtype dt) {
  return first + (dt == NV_DTYPE_FLOAT16    ? 0
                  : dt == NV_DTYPE_BFLOAT16 ? 1
                  : dt == NV_DTYPE_FLOAT32  ? 2
                                            : 3);
}

static int sum_functor(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return NV__RF_SUM_F16;
    case NV_DTYPE_BFLOAT16: return NV__RF_SUM_BF16;
    case NV_DTYPE_FLOAT32: return NV__RF_SUM_F32;
    case NV_DTYPE_FLOAT64: return NV__RF_SUM_F64;
    case NV_DTYPE_COMPLEX64: return NV__RF_COMPLEX;
    default: return NV__RF_INT1 + width_index(dt);
  }
}

/* sum, prod, max, min, all, any, mean, count_nonzero (the builder has cast bool sums and
 * integer means; max/min of empty arrays are its errors). */
static nv_status k_reduce(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__reduce_params *rp = node->params;
  job j;
  nv_status st;
  int go = begin(ctx, node, in, rp->axes, rp->naxes, &j, &st);
  if (go <= 0) return st;
  nv__red_params *p = &j.p;
  nv_dtype dt = j.x->dtype;
  int w = width_index(dt), f;
  p->op = NV__RO_SUM;
  p->fin = NV__RFIN_PLAIN;
  switch (node->prim) {
    case NV__PRIM_PROD:
      p->op = NV__RO_PROD;
      f = is_float(dt)                 ? NV__RF_REAL1 + w
          : dt == NV_DTYPE_COMPLEX64 ? NV__RF_COMPLEX
                                     : NV__RF_INT1 + w;
      break;
    case NV__PRIM_MAX:
    case NV__PRIM_MIN:
      p->op = node->prim == NV__PRIM_MAX ? NV__RO_MAX : NV__RO_MIN;
      if (is_float(dt)) f = float_functor(NV__RF_MINMAX_F16, dt);
      else if (dt == NV_DTYPE_COMPLEX64) f = NV__RF_COMPLEX;
      else {
        f = NV__RF_INT1 + w;
        p->flip = sign_flip(dt);
        p->fin = NV__RFIN_FLIP;
      }
      break;
    case NV__PRIM_ALL:
    case NV__PRIM_ANY:
    case NV__PRIM_COUNT_NONZERO:
      p->op = NV__RO_COUNT;
      p->mask = nonzero_mask(dt);
      p->fin = node->prim == NV__PRIM_ALL   ? NV__RFIN_ALL
               : node->prim == NV__PRIM_ANY ? NV__RFIN_ANY
                                            : NV__RFIN_PLAIN;
      f = NV__RF_INT1 + w;
      break;
    case NV__PRIM_MEAN:
      p->fin = NV__RFIN_MEAN;
      p->div = (double)p->rsize;
      f = sum_functor(dt);
      break;
    default: f = sum_functor(dt); break;
  }
  return engine(ctx, f, p, j.in.view, j.out.view, NULL);
}

/* Two passes of the real functor: a per-output statistic into scratch (float64), then the
 * result with it as context. */
static nv_status two_pass(nv__gpu_ctx *ctx, job *j, int op1, int fin1, int op2, int fin2) {
  nv__red_params *p = &j->p;
  int f = NV__RF_REAL1 + width_index(j->x->dtype);
  int64_t out_off = p->out_off;
  nv_dtype odt = (nv_dtype)p->odtype;
  hrx_view stat;
  nv_status st = scratch(ctx, p->nout * 8, &stat);
  if (st != NV_OK) return st;
  p->op = op1;
  p->fin = fin1;
  p->div = (double)p->rsize;
  p->odtype = NV_DTYPE_FLOAT64;
  p->oscratch = 1;
  p->out_off = 0;
  if ((st = engine(ctx, f, p, j->in.view, stat, NULL)) != NV_OK) return st;
  p->op = op2;
  p->fin = fin2;
  p->odtype = odt;
  p->oscratch = 0;
  p->out_off = out_off;
  return engine(ctx, f, p, j->in.view, j->out.view, &stat);
}

/* var and std: the mean, then the sum of squared deviations from it (the CPU's two passes). */
static nv_status k_var(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__rows_params *rp = node->params;
  job j;
  nv_status st;
  int go = begin(ctx, node, in, rp->axes, rp->naxes, &j, &st);
  if (go <= 0) return st;
  int fin = node->prim == NV__PRIM_STD ? NV__RFIN_STD : NV__RFIN_VAR;
  j.p.ddof = rp->ddof;
  if (j.p.rsize == 0) { /* NaN */
    j.p.fin = fin;
    return engine(ctx, NV__RF_REAL1 + width_index(j.x->dtype), &j.p, j.in.view, j.out.view, NULL);
  }
  return two_pass(ctx, &j, NV__RO_SUM, NV__RFIN_MEAN, NV__RO_SQDEV, fin);
}

/* Whether the rows' lengths and strides are multiples of 16 bytes' elements. */
static bool rows_vec(const job *j) {
  int64_t vw = nv__rows_vw(j->x->dtype);
  bool vec = j->p.rsize % vw == 0;
  for (int i = 0; i < j->p.nk; i++) vec &= j->p.kst[i] % vw == 0;
  return vec;
}

/* The row kernels' plan for the job's rows (aligned: also the views' offsets). */
static nv__rows_plan rows_plan(const job *j, bool softmax) {
  int64_t vw = nv__rows_vw(j->x->dtype);
  bool aligned = rows_vec(j) && j->in.offset % vw == 0 && (!softmax || j->out.offset % vw == 0);
  return nv__rows_plan_of(j->x->dtype, j->p.rsize, aligned);
}

/* The row kernels (softmax, logsumexp) over rows contiguous in the input; softmax's rows are
 * then also contiguous in its output (the reduced axes are the trailing ones). The plan
 * (reduce.h) picks the kernel and its group of threads per row from the row's length. The
 * register kernel's grid has a block per group of rows (as many as MAX_GRID allows; blocks
 * loop over the rest), the long-row kernel's at most two waves. */
static nv_status rows_fast(nv__gpu_ctx *ctx, bool softmax, const job *j, bool aliasing) {
  static const hrx_access access[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  nv__rows_fast_params q;
  memset(&q, 0, sizeof q);
  q.nk = j->p.nk;
  for (int i = 0; i < q.nk; i++) {
    q.kshape[i] = j->p.kshape[i];
    q.kst[i] = j->p.kst[i];
  }
  nv_dtype dt = j->x->dtype;
  q.dtype = dt;
  q.nrows = j->p.nout;
  q.n = j->p.rsize;
  q.in_off = j->in.offset;
  q.out_off = j->out.offset;
  q.vec = rows_vec(j);
  nv__rows_plan pl = rows_plan(j, softmax);
  q.group = pl.group;
  const void *func = nv__rows_fast_kernel(softmax, dt, &pl);
  if (!func)
    return nv__set_error(NV_ERR_BACKEND, "%s: no GPU row kernel for %s rows of %lld",
                         softmax ? "softmax" : "logsumexp", nv_dtype_name(dt), (long long)q.n);
  int64_t grid = ceil_div(q.nrows, pl.block / pl.group);
  if (pl.long_rows && grid > ROWS_THREADS / pl.block) grid = ROWS_THREADS / pl.block;
  hrx_view views[3] = {j->in.view, j->out.view, j->in.view};
  return dispatch(ctx, func, grid, 1, (uint32_t)pl.block, 1, views, access, 3, &q, sizeof q,
                  aliasing);
}

/* Whether the row kernels suit: float rows contiguous in the input, held in registers or
 * numerous enough to fill the device with a block each (else the engine splits them). */
static bool rows_fast_fits(const job *j, bool softmax) {
  return is_float(j->x->dtype) && j->p.nr == 1 && j->p.rst[0] == 1 && j->p.rsize >= 1 &&
         (!rows_plan(j, softmax).long_rows || j->p.nout >= 264);
}

/* logsumexp: the row kernel, or the maximum then the sum of exp(x - max) (float64). */
static nv_status k_logsumexp(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             int donated) {
  (void)donated;
  const nv__rows_params *rp = node->params;
  job j;
  nv_status st;
  int go = begin(ctx, node, in, rp->axes, rp->naxes, &j, &st);
  if (go <= 0) return st;
  if (rows_fast_fits(&j, false)) return rows_fast(ctx, false, &j, false);
  return two_pass(ctx, &j, NV__RO_MAX, NV__RFIN_PLAIN, NV__RO_EXPSUM, NV__RFIN_LSE);
}

/* Whether every reduced axis (of size > 1) follows every kept one. */
static bool reduced_trailing(const nv__output *x, const int *axes, int naxes) {
  bool seen = false;
  for (int i = 0, k = 0; i < x->ndim; i++) {
    bool red = k < naxes && axes[k] == i;
    if (red) k++;
    if (x->shape[i] == 1) continue;
    if (red) seen = true;
    else if (seen) return false;
  }
  return true;
}

/* softmax in general: the rows' maxima and sums of exponentials by the engine, then every
 * element normalized in place of its row. */
static nv_status softmax_general(nv__gpu_ctx *ctx, job *j, const int *axes, int naxes,
                                 bool aliasing) {
  static const hrx_access access[4] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ,
                                       HRX_ACCESS_READ};
  nv__red_params *p = &j->p;
  int f = NV__RF_REAL1 + width_index(j->x->dtype);
  hrx_view m, s;
  nv_status st;
  if ((st = scratch(ctx, p->nout * 8, &m)) != NV_OK) return st;
  if ((st = scratch(ctx, p->nout * 8, &s)) != NV_OK) return st;
  p->odtype = NV_DTYPE_FLOAT64;
  p->oscratch = 1;
  p->out_off = 0;
  p->fin = NV__RFIN_PLAIN;
  p->op = NV__RO_MAX;
  if ((st = engine(ctx, f, p, j->in.view, m, NULL)) != NV_OK) return st;
  p->op = NV__RO_EXPSUM;
  if ((st = engine(ctx, f, p, j->in.view, s, &m)) != NV_OK) return st;

  /* Element dims with their input strides and row strides (0 along the reduced axes, the
   * kept axes' row-major strides otherwise), folded where both allow. */
  const nv__output *x = j->x;
  bool red[NV__RED_DIMS] = {false};
  for (int i = 0; i < naxes; i++) red[axes[i]] = true;
  int64_t rowst[NV__RED_DIMS], acc = 1;
  for (int i = x->ndim - 1; i >= 0; i--) {
    rowst[i] = red[i] ? 0 : acc;
    if (!red[i]) acc *= x->shape[i];
  }
  nv__softmax_norm_params q;
  memset(&q, 0, sizeof q);
  int nd = 0;
  for (int i = 0; i < x->ndim; i++) {
    int64_t n = x->shape[i];
    if (n == 1) continue;
    if (nd > 0 && q.st[nd - 1] == n * x->strides[i] && q.rowst[nd - 1] == n * rowst[i]) {
      q.shape[nd - 1] *= n;
      q.st[nd - 1] = x->strides[i];
      q.rowst[nd - 1] = rowst[i];
      continue;
    }
    q.shape[nd] = n;
    q.st[nd] = x->strides[i];
    q.rowst[nd++] = rowst[i];
  }
  q.nd = nd;
  q.dtype = x->dtype;
  q.size = j->o->size;
  q.nrows = p->nout;
  q.in_off = j->in.offset;
  q.out_off = j->out.offset;
  hrx_view views[4] = {j->in.view, j->out.view, m, s};
  return dispatch(ctx, nv__softmax_norm_kernel(x->dtype), ceil_div(q.size, 256), 1, 256, 1, views,
                  access, 4, &q, sizeof q, aliasing);
}

/* softmax (the builder has cast the input to a float dtype; the output may be the input's
 * donated buffer: then each row is read before it is written). */
static nv_status k_softmax(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  const nv__rows_params *rp = node->params;
  job j;
  nv_status st;
  int go = begin(ctx, node, in, rp->axes, rp->naxes, &j, &st);
  if (go <= 0) return st;
  bool aliasing = donated >= 0;
  if (rows_fast_fits(&j, true) && reduced_trailing(j.x, rp->axes, rp->naxes))
    return rows_fast(ctx, true, &j, aliasing);
  return softmax_general(ctx, &j, rp->axes, rp->naxes, aliasing);
}

/* The bits argmin's fast kernels xor into every 64 bits they read, so that argmax of the
 * result is argmin of the values: the sign bit of each float element (negation), every bit of
 * integers (~x reverses the order). */
static uint64_t arg_flip(nv_dtype dt, bool max) {
  if (max) return 0;
  switch (dt) {
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: return 0x8000800080008000ull;
    case NV_DTYPE_FLOAT32: return 0x8000000080000000ull;
    case NV_DTYPE_FLOAT64: return 0x8000000000000000ull;
    default: return ~0ull;
  }
}

/* argmax/argmin on the fast kernels (reduce_arg.cu) where the layout has one: the reduced
 * elements of each output one contiguous run (row), or the innermost kept dim contiguous
 * (col). 1 when recorded (or failed, *st set), 0 when the engine's kernels take it. */
static int arg_fast(nv__gpu_ctx *ctx, job *j, bool max, nv_status *st) {
  static const hrx_access access[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  nv__red_params *p = &j->p;
  nv_dtype dt = j->x->dtype;
  nv__red_kernels k = nv__arg_kernels_of(dt);
  bool row = p->nr == 1 && p->rst[0] == 1;
  if (!k.row || p->rsize == 0 || (!row && (p->nk == 0 || p->kst[p->nk - 1] != 1))) return 0;
  p->op = NV__RO_MAX;
  p->fin = NV__RFIN_PLAIN;
  p->flip = arg_flip(dt, max);
  p->nan_low = 0;
  p->ctx = 0;
  p->partial = 0;
  int64_t r = p->rsize, vw = k.vec, nsplit = 1, gx, gy = 1;
  uint32_t bx, by = 1;
  const void *func;
  if (row) {
    /* Eight 16-byte loads a thread: a group of a power of two threads (up to a block of
     * 1024) per row; rows too few to fill the device are split over blocks, in pieces of
     * whole 64-element blocks. */
    int64_t ept = 8 * vw;
    int64_t g = pow2_at_least(ceil_div(r, ept), 1, 1024);
    if (p->nout * g < FILL_THREADS && r > 2 * g * ept) {
      nsplit = ceil_div(FILL_THREADS, p->nout * g);
      if (nsplit > r / (g * ept)) nsplit = r / (g * ept);
    }
    p->chunk = ceil_div(ceil_div(r, nsplit), 64) * 64;
    nsplit = ceil_div(r, p->chunk);
    p->group = (int32_t)g;
    bx = (uint32_t)(g >= 64 ? g : 256);
    gx = ceil_div(p->nout * nsplit, bx / g);
    func = k.row;
  } else {
    /* 16 bytes of consecutive outputs a thread where the innermost kept dim is a multiple of
     * them long, else one. When those threads do not fill the device, the rows are split
     * (at least 16 a thread): over threadIdx.y up to 8, then over blockIdx.y. */
    int64_t v = p->kshape[p->nk - 1] % vw == 0 ? vw : 1;
    int64_t cols = ceil_div(p->nout, v), split = 1, b = 1;
    if (cols < FILL_THREADS && r >= 32) {
      split = ceil_div(FILL_THREADS, cols);
      if (split > r / 16) split = r / 16;
    }
    while (b < 8 && 2 * b <= split) b <<= 1;
    nsplit = split / b;
    if (nsplit > 65535) nsplit = 65535;
    p->chunk = ceil_div(r, nsplit);
    nsplit = ceil_div(r, p->chunk);
    p->vec_st = 1;
    for (int i = 0; i < p->nr; i++) p->vec_st &= p->rst[i] % vw == 0;
    p->group = 1;
    bx = (uint32_t)pow2_at_least(cols, 32, 256 / b);
    by = (uint32_t)b;
    gx = ceil_div(cols, bx);
    gy = nsplit;
    func = v > 1 ? k.colv : k.col;
  }
  p->nsplit = (int32_t)nsplit;
  hrx_view views[3] = {j->in.view, j->out.view, j->in.view};
  if (nsplit == 1) {
    *st = dispatch(ctx, func, gx, gy, bx, by, views, access, 3, p, sizeof *p, false);
    return 1;
  }
  hrx_view part;
  if ((*st = scratch(ctx, nsplit * p->nout * (int64_t)k.acc_size, &part)) != NV_OK) return 1;
  p->partial = 1;
  views[1] = part;
  if ((*st = dispatch(ctx, func, gx, gy, bx, by, views, access, 3, p, sizeof *p, false)) != NV_OK)
    return 1;
  p->partial = 0;
  p->group = nsplit >= 32 ? 32 : 1;
  hrx_view fviews[3] = {part, j->out.view, part};
  *st = dispatch(ctx, k.fin, p->group == 1 ? ceil_div(p->nout, 256) : ceil_div(p->nout, 8), 1,
                 256, 1, fviews, access, 3, p, sizeof *p, false);
  return 1;
}

/* argmax and argmin: the first extreme (the first NaN for inexact dtypes), as uint32. */
static nv_status k_arg(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__rows_params *rp = node->params;
  job j;
  nv_status st;
  int go = begin(ctx, node, in, rp->axes, rp->naxes, &j, &st);
  if (go <= 0) return st;
  bool max = node->prim == NV__PRIM_ARGMAX;
  if (arg_fast(ctx, &j, max, &st)) return st;
  j.p.op = max ? NV__RO_MAX : NV__RO_MIN;
  j.p.fin = NV__RFIN_PLAIN;
  j.p.nan_low = !max && is_inexact(j.x->dtype);
  int f = is_float(j.x->dtype) ? float_functor(NV__RF_ARGF_F16, j.x->dtype)
                               : NV__RF_ARG1 + width_index(j.x->dtype);
  return engine(ctx, f, &j.p, j.in.view, j.out.view, NULL);
}

void nv__gpu_register_reduce(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_SUM] = k_reduce;
  k[NV__PRIM_PROD] = k_reduce;
  k[NV__PRIM_MAX] = k_reduce;
  k[NV__PRIM_MIN] = k_reduce;
  k[NV__PRIM_ALL] = k_reduce;
  k[NV__PRIM_ANY] = k_reduce;
  k[NV__PRIM_MEAN] = k_reduce;
  k[NV__PRIM_COUNT_NONZERO] = k_reduce;
  k[NV__PRIM_VAR] = k_var;
  k[NV__PRIM_STD] = k_var;
  k[NV__PRIM_LOGSUMEXP] = k_logsumexp;
  k[NV__PRIM_ARGMAX] = k_arg;
  k[NV__PRIM_ARGMIN] = k_arg;
  k[NV__PRIM_SOFTMAX] = k_softmax;
}
