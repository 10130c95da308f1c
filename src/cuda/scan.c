/* The scan family on the GPU: cumsum, cumprod, cummax, cummin, logcumsumexp and diff. Host
 * code: it sees a scan's input (row-contiguous: other layouts are copied first) as
 * [outer, len, inner] along the scan axis, picks the kernels of scan.cu and records them.
 *
 * Paths of a scan (VEC elements per lane load of 16 bytes, ITEMS = min(8 * VEC, 32) per lane):
 *   row     inner == 1 and len <= 256 * ITEMS (8192 float32): a group of 1, 4, 16 or 32 lanes per
 *           row, the smallest whose tile (lanes * ITEMS) covers the row, else 32
 *   block   inner == 1, longer rows: a block of 256 threads per row; with fewer rows than
 *           ROW_SPLIT_ROWS the rows are split into chunks of whole tiles (at least 4 each) so
 *           that about TARGET_BLOCKS blocks run: a reduce of each chunk, a carry pass over the
 *           chunks' totals, then the scan of each chunk from its carry
 *   col     inner > 1: a thread per 2 or 4 adjacent columns (one load of up to 16 bytes per
 *           position), 16 threads across col_width columns and 16 along the axis per block of
 *           256, 8 positions each per tile of 128; with fewer than COL_SPLIT_TILES column tiles
 *           and an axis of at least 8 tiles (1024 positions) the axis is split the same way
 * diff records one element-wise kernel over the folded layout of the output. */
#include "core/strided.h"
#include "cuda/gpu.h"
#include "cuda/scan_kernels.h"
#include "ops/index_params.h"
#include "ops/reduce_params.h"

/* Blocks a split scan aims for (about 8 resident blocks on each of the H200's 132 SMs, twice). */
#define TARGET_BLOCKS 2048
/* Column tiles below which the axis is split (about 4 blocks per SM: the column kernels hold
 * 2 or 3 blocks per SM, so fewer tiles leave SMs idle; a split reads the input twice). */
#define COL_SPLIT_TILES 528
/* Rows below which long rows are split into chunks. */
#define ROW_SPLIT_ROWS 1024
/* Grid cap: the kernels walk their work with grid-stride loops. */
#define GRID_CAP ((int64_t)1 << 20)

static uint32_t grid_for(int64_t items) {
  return (uint32_t)(items < 1 ? 1 : items < GRID_CAP ? items : GRID_CAP);
}

static nv_status launch(nv__gpu_ctx *ctx, const void *func, uint32_t grid, uint32_t bx,
                        uint32_t by, const hrx_view *views, const hrx_access *acc, int n,
                        const void *params, size_t size) {
  nv__gpu_launch l = {.func = func,
                      .grid = {grid, 1, 1},
                      .block = {bx, by, 1},
                      .views = views,
                      .access = acc,
                      .nviews = n,
                      .params = params,
                      .params_size = size};
  return nv__gpu_dispatch(ctx, &l);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Splits an axis of `len` positions into chunks of whole tiles (`unit` positions, at least
 * `min_units` each) so that `blocks` unsplit blocks become about TARGET_BLOCKS; sets the chunk
 * length and count (1 chunk of len when no split helps). */
static void split_axis(int64_t len, int64_t unit, int64_t min_units, int64_t blocks,
                       int64_t *chunk, int64_t *nchunks) {
  *chunk = len;
  *nchunks = 1;
  int64_t want = ceil_div(TARGET_BLOCKS, blocks < 1 ? 1 : blocks);
  int64_t most = len / (unit * min_units);
  int64_t n = want < most ? want : most;
  if (n < 2) return;
  *chunk = ceil_div(ceil_div(len, n), unit) * unit;
  *nchunks = ceil_div(len, *chunk);
}

/* Records a split scan: each segment's total, the carries, then the scan from them. */
static nv_status split_scan(nv__gpu_ctx *ctx, const void *reduce, const void *scan,
                            const void *carry, uint32_t bx, uint32_t by, int64_t series,
                            int work_size, nv__gpu_scan_params *p, nv__gpu_arg x,
                            nv__gpu_arg o) {
  hrx_view tot;
  size_t bytes = (size_t)(series * p->nchunks) * (size_t)work_size;
  nv_status st = nv__gpu_scratch(ctx, bytes, &tot);
  if (st != NV_OK) return st;
  hrx_view rv[2] = {x.view, tot};
  hrx_access ra[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  p->carry = 0;
  if ((st = launch(ctx, reduce, grid_for(p->segments), bx, by, rv, ra, 2, p, sizeof *p)) != NV_OK)
    return st;
  hrx_access ca = HRX_ACCESS_READ_WRITE;
  if ((st = launch(ctx, carry, grid_for(ceil_div(series, NV__GPU_SCAN_THREADS)),
                   NV__GPU_SCAN_THREADS, 1, &tot, &ca, 1, p, sizeof *p)) != NV_OK)
    return st;
  hrx_view sv[3] = {x.view, o.view, tot};
  hrx_access sa[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  p->carry = 1;
  return launch(ctx, scan, grid_for(p->segments), bx, by, sv, sa, 3, p, sizeof *p);
}

static int scan_op(int prim) {
  switch (prim) {
    case NV__PRIM_CUMPROD: return NV__GPU_SCAN_PROD;
    case NV__PRIM_CUMMAX: return NV__GPU_SCAN_MAX;
    case NV__PRIM_CUMMIN: return NV__GPU_SCAN_MIN;
    case NV__PRIM_LOGCUMSUMEXP: return NV__GPU_SCAN_LSE;
    default: return NV__GPU_SCAN_SUM;
  }
}

static nv_status k_scan(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *m = in[0].meta;
  const nv__rows_params *rp = node->params;
  nv__gpu_scan_kernels k;
  if (!nv__gpu_scan_lookup(scan_op(node->prim), (int)m->dtype, &k))
    return nv__set_error(NV_ERR_BACKEND, "%s: no GPU kernel for this dtype",
                         nv__prims[node->prim].name);
  nv__gpu_arg o, x;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  /* The row geometry: one axis of the input (outer, len, inner), or all of them flattened. */
  int64_t outer = 1, len = m->size, inner = 1;
  if (rp->naxes == 1 && m->ndim > 1) {
    int a = rp->axes[0];
    len = m->shape[a];
    for (int i = 0; i < a; i++) outer *= m->shape[i];
    for (int i = a + 1; i < m->ndim; i++) inner *= m->shape[i];
  }
  if ((st = nv__gpu_input_contiguous(ctx, &in[0], &x)) != NV_OK) return st;
  nv__gpu_scan_params p = {.ioff = x.offset,
                           .ooff = o.offset,
                           .outer = outer,
                           .len = len,
                           .inner = inner,
                           .chunk = len,
                           .nchunks = 1,
                           .reverse = rp->reverse,
                           .inclusive = rp->inclusive};
  /* Unsplit scans read the input view again in the totals' place. */
  hrx_view views[3] = {x.view, o.view, x.view};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  if (inner == 1) {
    int64_t tile = (int64_t)NV__GPU_SCAN_THREADS * k.items;
    if (len <= tile) {
      static const int lanes[4] = {1, 4, 16, 32};
      int g = 0;
      while (g < 3 && (int64_t)lanes[g] * k.items < len) g++;
      p.segments = outer;
      int64_t groups = NV__GPU_SCAN_THREADS / lanes[g];
      return launch(ctx, k.row[g], grid_for(ceil_div(outer, groups)), NV__GPU_SCAN_THREADS, 1,
                    views, acc, 3, &p, sizeof p);
    }
    if (outer < ROW_SPLIT_ROWS) split_axis(len, tile, 4, outer, &p.chunk, &p.nchunks);
    p.segments = outer * p.nchunks;
    if (p.nchunks > 1)
      return split_scan(ctx, k.row_reduce, k.row_block, k.carry, NV__GPU_SCAN_THREADS, 1, outer,
                        k.work_size, &p, x, o);
    return launch(ctx, k.row_block, grid_for(p.segments), NV__GPU_SCAN_THREADS, 1, views, acc, 3,
                  &p, sizeof p);
  }
  const int64_t unit = (NV__GPU_SCAN_THREADS / NV__GPU_SCAN_COL_TX) * NV__GPU_SCAN_COL_ROWS;
  int64_t tiles = ceil_div(inner, k.col_width) * outer;
  if (tiles < COL_SPLIT_TILES) split_axis(len, unit, 4, tiles, &p.chunk, &p.nchunks);
  p.segments = tiles * p.nchunks;
  if (p.nchunks > 1)
    return split_scan(ctx, k.col_reduce, k.col, k.carry, NV__GPU_SCAN_THREADS, 1, outer * inner,
                      k.work_size, &p, x, o);
  return launch(ctx, k.col, grid_for(p.segments), NV__GPU_SCAN_THREADS, 1, views, acc, 3, &p,
                sizeof p);
}

/* The row-major element strides of a shape. */
static void row_strides(const int *shape, int ndim, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* diff: out = in shifted one step along the axis minus in (the CPU's k_diff), over the output's
 * shape folded with the input's strides; a layout that folds to more than 8 dims is copied
 * contiguous first. */
static nv_status k_diff(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *m = in[0].meta;
  int axis = ((const nv__axis_params *)node->params)->axis;
  nv__gpu_arg o, x;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  if ((st = nv__gpu_input(ctx, &in[0], &x)) != NV_OK) return st;
  int64_t ost[NV__MAX_DIMS], ist[NV__MAX_DIMS], cs[NV__MAX_DIMS], cis[NV__MAX_DIMS],
      ocs[NV__MAX_DIMS];
  row_strides(out->shape, out->ndim, ost);
  const int64_t *strides = m->strides;
  int64_t *outs[2] = {cis, ocs};
  const int64_t *ins[2] = {strides, ost};
  int nd = nv__collapse(out->shape, out->ndim, ins, 2, cs, outs);
  if (nd > 8) {
    if ((st = nv__gpu_input_contiguous(ctx, &in[0], &x)) != NV_OK) return st;
    row_strides(m->shape, m->ndim, ist);
    strides = ist;
    ins[0] = strides;
    nd = nv__collapse(out->shape, out->ndim, ins, 2, cs, outs);
  }
  nv__gpu_diff_params p = {.ioff = x.offset, .step = strides[axis], .n = out->size, .nd = nd};
  for (int i = 0; i < nd; i++) {
    p.shape[i] = cs[i];
    p.st[i] = cis[i];
  }
  const void *func = nv__gpu_kernel_diff((int)out->dtype, out->size < ((int64_t)1 << 31));
  if (!func) return nv__set_error(NV_ERR_BACKEND, "diff: no GPU kernel for this dtype");
  hrx_view views[2] = {x.view, o.view};
  hrx_access acc[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return launch(ctx, func, grid_for(ceil_div(out->size, NV__GPU_SCAN_THREADS)),
                NV__GPU_SCAN_THREADS, 1, views, acc, 2, &p, sizeof p);
}

void nv__gpu_register_scan(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_CUMSUM] = k_scan;
  k[NV__PRIM_CUMPROD] = k_scan;
  k[NV__PRIM_CUMMAX] = k_scan;
  k[NV__PRIM_CUMMIN] = k_scan;
  k[NV__PRIM_LOGCUMSUMEXP] = k_scan;
  k[NV__PRIM_DIFF] = k_diff;
}
