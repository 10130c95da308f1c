/* The scatter family on the GPU: scatter, scatter_add / _prod / _max / _min, put_along_axis,
 * masked_scatter, slice_update_dynamic, slice_update_add / _prod / _max / _min and
 * as_strided_vjp. Host code: it plans each walk (folded dims, nv__collapse), records the base
 * (in place when donated, else a copy first) and the kernels of scatter.cu.
 *
 * Paths:
 *   scatter*, put_along_axis   one walk over the updates (4 elements of the last folded dim
 *       per work item); several index arrays are first packed as int64 into scratch memory.
 *       Reductions combine with atomics. Assignments that may hit a destination twice (more
 *       than one index position) take three walks: clear the destinations' ordinals, raise
 *       each to the largest writer's row-major ordinal, and store only that writer's value,
 *       which is the CPU's result (its serial loop keeps the last). Out-of-range indices skip
 *       the position and raise the node's index check (the CPU's message).
 *   scatter* without index arrays   the region path below over the whole array.
 *   slice_update_*             a walk over the region (no atomics: a region's elements are
 *       distinct); slice_update_dynamic reads and clamps its start on the device.
 *   masked_scatter             per chunk of 4096 mask positions a count, one block's scan of
 *       the counts, each position's source row, then a copy of the selected rows.
 *   as_strided_vjp             atomic sums into double / uint64 accumulators (the CPU's), then
 *       a store in the output's dtype.
 * A walk that folds to more than NV__GPU_SCATTER_DIMS dims is declined (CPU fallback). */
#include <stddef.h>

#include "core/strided.h"
#include "cuda/copy.h"
#include "cuda/scatter_kernels.h"
#include "ops/index_params.h"
#include "ops/params.h"

/* Grid cap: the kernels walk their work with grid-stride loops. */
#define GRID_CAP 8192

static uint32_t blocks_for(int64_t items) {
  return nv__gpu_blocks(items, NV__GPU_SCATTER_THREADS, GRID_CAP);
}

static nv_status launch(nv__gpu_ctx *ctx, const void *func, uint32_t blocks, uint32_t threads,
                        const hrx_view *views, const hrx_access *acc, int n, const void *params,
                        size_t size) {
  return nv__gpu_dispatch_1d(ctx, "scatter", func, blocks, threads, views, acc, n, params, size);
}

static void row_strides(const int *shape, int nd, int64_t *st) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* The combination of each primitive (the CPU's NV__IX_* order). */
static int mode_of(int prim) {
  switch (prim) {
    case NV__PRIM_SCATTER_ADD: case NV__PRIM_SLICE_UPDATE_ADD: return NV__GPU_SC_ADD;
    case NV__PRIM_SCATTER_PROD: case NV__PRIM_SLICE_UPDATE_PROD: return NV__GPU_SC_PROD;
    case NV__PRIM_SCATTER_MAX: case NV__PRIM_SLICE_UPDATE_MAX: return NV__GPU_SC_MAX;
    case NV__PRIM_SCATTER_MIN: case NV__PRIM_SLICE_UPDATE_MIN: return NV__GPU_SC_MIN;
    default: return NV__GPU_SC_ASSIGN;
  }
}

/* The output holding the base: the donated buffer itself (donated == 0), else a new buffer
 * with the base copied in. */
static nv_status base_output(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             int donated, nv__gpu_arg *o) {
  nv_status st = nv__gpu_output(ctx, &node->out[0], o);
  if (st == NV_OK && node->out[0].size > 0 && donated != 0)
    st = nv__gpu_copy_contiguous(ctx, &in[0], *o);
  return st;
}

/* Folds a walk of `shape` over `nops` stride vectors into at most NV__GPU_SCATTER_DIMS dims;
 * false when it folds to more. */
static bool fold(const int *shape, int nd, const int64_t *const *st, int nops, int *ond,
                 int64_t *oshape, int64_t **ost) {
  int64_t cs[NV__MAX_DIMS], cst[3][NV__MAX_DIMS];
  int64_t *outs[3] = {cst[0], cst[1], cst[2]};
  int n = nv__collapse(shape, nd, st, nops, cs, outs);
  if (n > NV__GPU_SCATTER_DIMS) return false;
  *ond = n;
  for (int i = 0; i < n; i++) {
    oshape[i] = cs[i];
    for (int k = 0; k < nops; k++) ost[k][i] = cst[k][i];
  }
  return true;
}

/* Work items of a folded walk: rows of the last dim in chunks of 4 elements. */
static void items_of(const int64_t *shape, int nd, int64_t *items, int64_t *inner,
                     int64_t *chunks) {
  int64_t rows = 1;
  for (int i = 0; i < nd - 1; i++) rows *= shape[i];
  *inner = shape[nd - 1];
  *chunks = (*inner + 3) / 4;
  *items = rows * *chunks;
}

/* ---- Regions ---- */

/* Records out (op)= upd over a region of `shape` (n dims) at output offset `off` with output
 * strides `rst`, the update read at `ust`. NV__GPU_DECLINED (nothing recorded) when the walk
 * folds to too many dims; `check_only` plans without recording. */
static nv_status region_record(nv__gpu_ctx *ctx, nv__gpu_arg o, const nv__operand *upd,
                               int mode, nv_dtype dt, const int *shape, int n, int64_t off,
                               const int64_t *rst, const int64_t *ust, bool check_only) {
  /* Assignments are strided copies (any number of dims). */
  if (mode == NV__GPU_SC_ASSIGN && check_only) return NV_OK;
  nv__gpu_region_params p;
  memset(&p, 0, sizeof p);
  const int64_t *st[2] = {rst, ust};
  int64_t *ost[2] = {p.ost, p.ust};
  if (mode != NV__GPU_SC_ASSIGN && !fold(shape, n, st, 2, &p.nd, p.shape, ost))
    return NV__GPU_DECLINED;
  if (check_only) return NV_OK;
  int64_t size = 1;
  for (int i = 0; i < n; i++) size *= shape[i];
  if (size == 0) return NV_OK;
  nv__gpu_arg u;
  nv_status s = nv__gpu_input(ctx, upd, &u);
  if (s != NV_OK) return s;
  if (mode == NV__GPU_SC_ASSIGN) {
    nv__gpu_arg region = {o.view, o.offset + off};
    return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(dt), shape, n, u, ust, region, rst,
                                HRX_ACCESS_READ_WRITE);
  }
  p.mode = mode;
  p.dtype = (int)dt;
  p.ooff = o.offset + off;
  p.uoff = u.offset;
  items_of(p.shape, p.nd, &p.items, &p.inner, &p.chunks);
  hrx_view v[2] = {o.view, u.view};
  hrx_access a[2] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_READ};
  return launch(ctx, nv__gpu_kernel_region(mode, (int)dt), blocks_for(p.items),
                NV__GPU_SCATTER_THREADS, v, a, 2, &p, sizeof p);
}

/* slice_update_add / prod / max / min: the region of the static slice, the update broadcast
 * to it. */
static nv_status k_slice_update_reduce(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                       int donated) {
  nv__output *out = &node->out[0];
  const nv__slice_update_params *sp = node->params;
  int n = sp->ndim, mode = mode_of(node->prim);
  const int *len = sp->data + 2 * n;
  int64_t ost[NV__MAX_DIMS], rst[NV__MAX_DIMS], ust[NV__MAX_DIMS], off = 0;
  row_strides(out->shape, out->ndim, ost);
  for (int d = 0; d < n; d++) {
    rst[d] = ost[d] * sp->data[n + d];
    off += (int64_t)sp->data[d] * ost[d];
  }
  nv__gpu_broadcast_strides(in[1].meta, len, n, ust);
  nv__gpu_arg o = {.offset = 0};
  nv_status st = region_record(ctx, o, &in[1], mode, out->dtype, len, n, off, rst, ust, true);
  if (st != NV_OK) return st;
  if ((st = base_output(ctx, node, in, donated, &o)) != NV_OK || out->size == 0) return st;
  return region_record(ctx, o, &in[1], mode, out->dtype, len, n, off, rst, ust, false);
}

/* slice_update_dynamic: the update (broadcast to the region by the builder) copied to the
 * start read on the device. */
static nv_status k_slice_update_dynamic(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                        int donated) {
  nv__output *out = &node->out[0];
  const nv__output *um = in[1].meta, *sm = in[2].meta;
  const nv__gather_params *gp = node->params;
  nv__gpu_region_params p;
  memset(&p, 0, sizeof p);
  int64_t ost[NV__MAX_DIMS];
  row_strides(out->shape, out->ndim, ost);
  const int64_t *st2[2] = {ost, um->strides};
  int64_t *fst[2] = {p.ost, p.ust};
  if (!fold(um->shape, um->ndim, st2, 2, &p.nd, p.shape, fst)) return NV__GPU_DECLINED;
  nv__gpu_arg o, u, s;
  nv_status st = base_output(ctx, node, in, donated, &o);
  if (st != NV_OK || out->size == 0 || um->size == 0) return st;
  if ((st = nv__gpu_input(ctx, &in[1], &u)) != NV_OK || (st = nv__gpu_input(ctx, &in[2], &s)) != NV_OK)
    return st;
  p.mode = NV__GPU_SC_ASSIGN;
  p.dtype = (int)out->dtype;
  p.naxes = gp->naxes;
  p.sdt = (int)sm->dtype;
  p.ooff = o.offset;
  p.uoff = u.offset;
  p.soff = s.offset;
  p.sstep = sm->ndim ? sm->strides[0] : 0;
  for (int q = 0; q < gp->naxes; q++) {
    int ax = gp->data[q];
    p.dn[q] = out->shape[ax];
    p.dsize[q] = um->shape[ax];
    p.dst[q] = ost[ax];
  }
  items_of(p.shape, p.nd, &p.items, &p.inner, &p.chunks);
  hrx_view v[3] = {o.view, u.view, s.view};
  hrx_access a[3] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_READ, HRX_ACCESS_READ};
  return launch(ctx, nv__gpu_kernel_region_dynamic((int)nv_dtype_size(out->dtype)),
                blocks_for(p.items), NV__GPU_SCATTER_THREADS, v, a, 3, &p, sizeof p);
}

/* ---- Scatters ---- */

/* A planned scatter walk: the kernel parameters but for the offsets of the operands. */
typedef struct scatter_plan {
  nv__gpu_scatter_params p;
  int64_t total;      /* update elements */
  bool duplicates;    /* an assignment whose destinations may repeat */
  int npack;          /* index arrays to pack (0: the one array is read as given) */
  int64_t npos;       /* index positions */
  nv__gpu_pack_params pack[NV__GPU_SCATTER_IDX];
} scatter_plan;

/* Records the planned walk: packing, then the direct walk or the three assignment walks. */
static nv_status scatter_record(nv__gpu_ctx *ctx, nv__node *node, scatter_plan *sp,
                                nv__gpu_arg o, const nv__operand *upd, const nv__operand *idx) {
  nv__gpu_scatter_params *p = &sp->p;
  nv__gpu_arg u, ix;
  nv__gpu_bad *bad;
  nv_status st = nv__gpu_input(ctx, upd, &u);
  if (st != NV_OK || (st = nv__gpu_index_check(ctx, nv__prims[node->prim].name, &bad)) != NV_OK)
    return st;
  p->bad = bad;
  p->ooff = o.offset;
  p->uoff = u.offset;
  if (sp->npack == 0) {
    if ((st = nv__gpu_input(ctx, &idx[0], &ix)) != NV_OK) return st;
    p->ioff[0] = ix.offset;
  } else {
    /* The index arrays as int64, one after another in the row-major index shape. */
    ix.offset = 0;
    size_t bytes = (size_t)sp->npack * (size_t)sp->npos * sizeof(int64_t);
    if ((st = nv__gpu_scratch(ctx, bytes, &ix.view)) != NV_OK) return st;
    for (int j = 0; j < sp->npack; j++) {
      nv__gpu_arg s;
      if ((st = nv__gpu_input(ctx, &idx[j], &s)) != NV_OK) return st;
      sp->pack[j].soff = s.offset;
      hrx_view v[2] = {s.view, ix.view};
      hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_READ_WRITE};
      if ((st = launch(ctx, nv__gpu_kernel_pack_index(), blocks_for(sp->npos),
                       NV__GPU_SCATTER_THREADS, v, a, 2, &sp->pack[j], sizeof sp->pack[j])) !=
          NV_OK)
        return st;
    }
  }
  int dt = (int)node->out[0].dtype;
  uint32_t blocks = blocks_for(p->items);
  if (!sp->duplicates) {
    hrx_view v[3] = {o.view, u.view, ix.view};
    hrx_access a[3] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_READ, HRX_ACCESS_READ};
    p->phase = NV__GPU_SC_DIRECT;
    return launch(ctx, nv__gpu_kernel_scatter(p->mode, dt, NV__GPU_SC_DIRECT, 0), blocks,
                  NV__GPU_SCATTER_THREADS, v, a, 3, p, sizeof *p);
  }
  /* Ordinals are position + 1 (0: none), per output element. */
  p->wide_ord = sp->total + 1 > (int64_t)UINT32_MAX;
  hrx_view ord;
  size_t osz = p->wide_ord ? 8 : 4;
  if ((st = nv__gpu_scratch(ctx, (size_t)node->out[0].size * osz, &ord)) != NV_OK) return st;
  const int phases[2] = {NV__GPU_SC_CLEAR, NV__GPU_SC_MARK};
  for (int i = 0; i < 2; i++) {
    hrx_view v[2] = {ix.view, ord};
    hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_READ_WRITE};
    p->phase = phases[i];
    if ((st = launch(ctx, nv__gpu_kernel_scatter(p->mode, dt, phases[i], p->wide_ord), blocks,
                     NV__GPU_SCATTER_THREADS, v, a, 2, p, sizeof *p)) != NV_OK)
      return st;
  }
  hrx_view v[4] = {o.view, u.view, ix.view, ord};
  hrx_access a[4] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ};
  p->phase = NV__GPU_SC_WRITE;
  return launch(ctx, nv__gpu_kernel_scatter(p->mode, dt, NV__GPU_SC_WRITE, p->wide_ord), blocks,
                NV__GPU_SCATTER_THREADS, v, a, 4, p, sizeof *p);
}

/* scatter*: inputs (a, indices[0..k), updates); updates are the broadcast index shape followed
 * by a slice of a, placed at the indexed start on each indexed axis. */
static nv_status k_scatter(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                           int donated) {
  nv__output *out = &node->out[0];
  const nv__gather_params *gp = node->params;
  int k = gp->naxes, mode = mode_of(node->prim);
  const nv__output *um = in[k + 1].meta;
  int ind = um->ndim - out->ndim, wn = um->ndim;
  const int *slice = um->shape + ind;
  int64_t ost[NV__MAX_DIMS];
  row_strides(out->shape, out->ndim, ost);
  if (k == 0) {
    /* No index arrays: the updates are one slice at the origin. */
    nv__gpu_arg o = {.offset = 0};
    nv_status st = region_record(ctx, o, &in[1], mode, out->dtype, slice, out->ndim, 0, ost,
                                 um->strides, true);
    if (st != NV_OK) return st;
    if ((st = base_output(ctx, node, in, donated, &o)) != NV_OK || out->size == 0) return st;
    return region_record(ctx, o, &in[1], mode, out->dtype, slice, out->ndim, 0, ost,
                         um->strides, false);
  }
  scatter_plan *sp = nv__calloc(1, sizeof *sp);
  if (!sp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  sp->npos = 1;
  for (int d = 0; d < ind; d++) sp->npos *= um->shape[d];
  sp->total = um->size;
  /* Walk strides: the output's on the slice dims, the indices' on the index dims. */
  int64_t wost[NV__MAX_DIMS], wist[NV__MAX_DIMS];
  for (int d = 0; d < wn; d++) wost[d] = d < ind ? 0 : ost[d - ind];
  if (k == 1) nv__gpu_broadcast_strides(in[1].meta, um->shape, ind, wist);
  else row_strides(um->shape, ind, wist);
  for (int d = ind; d < wn; d++) wist[d] = 0;
  nv__gpu_scatter_params *p = &sp->p;
  const int64_t *st3[3] = {um->strides, wost, wist};
  int64_t *fst[3] = {p->ust, p->ost, p->ist};
  bool ok = fold(um->shape, wn, st3, 3, &p->nd, p->shape, fst);
  sp->npack = k > 1 ? k : 0;
  for (int j = 0; ok && j < sp->npack; j++) {
    nv__gpu_pack_params *pk = &sp->pack[j];
    int64_t bst[NV__MAX_DIMS], *pst[1] = {pk->st};
    const int64_t *bs[1] = {bst};
    nv__gpu_broadcast_strides(in[1 + j].meta, um->shape, ind, bst);
    ok = fold(um->shape, ind, bs, 1, &pk->nd, pk->shape, pst);
    pk->idt = (int)in[1 + j].meta->dtype;
    pk->doff = (int64_t)j * sp->npos;
    pk->total = sp->npos;
  }
  if (!ok) {
    nv__free(sp);
    return NV__GPU_DECLINED;
  }
  p->mode = mode;
  p->k = k;
  p->idt = k == 1 ? (int)in[1].meta->dtype : (int)NV_DTYPE_INT64;
  for (int j = 0; j < k; j++) {
    int ax = gp->data[j];
    p->n[j] = out->shape[ax];
    p->ext[j] = slice[ax];
    p->ast[j] = ost[ax];
    if (k > 1) p->ioff[j] = (int64_t)j * sp->npos;
  }
  items_of(p->shape, p->nd, &p->items, &p->inner, &p->chunks);
  sp->duplicates = mode == NV__GPU_SC_ASSIGN && sp->npos > 1;
  nv__gpu_arg o;
  nv_status st = base_output(ctx, node, in, donated, &o);
  if (st == NV_OK && out->size > 0 && sp->total > 0)
    st = scatter_record(ctx, node, sp, o, &in[k + 1], &in[1]);
  nv__free(sp);
  return st;
}

/* put_along_axis: inputs (a, indices, values), indices and values of one shape; element e
 * goes to its own position with the axis' coordinate replaced by its index. */
static nv_status k_put_along_axis(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                  int donated) {
  nv__output *out = &node->out[0];
  int axis = ((const nv__axis_params *)node->params)->axis;
  const nv__output *im = in[1].meta;
  scatter_plan *sp = nv__calloc(1, sizeof *sp);
  if (!sp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "put_along_axis: out of memory");
  int64_t ost[NV__MAX_DIMS], wost[NV__MAX_DIMS];
  row_strides(out->shape, out->ndim, ost);
  memcpy(wost, ost, sizeof(int64_t) * (size_t)out->ndim);
  wost[axis] = 0;
  nv__gpu_scatter_params *p = &sp->p;
  const int64_t *st3[3] = {in[2].meta->strides, wost, im->strides};
  int64_t *fst[3] = {p->ust, p->ost, p->ist};
  if (!fold(im->shape, im->ndim, st3, 3, &p->nd, p->shape, fst)) {
    nv__free(sp);
    return NV__GPU_DECLINED;
  }
  sp->total = sp->npos = im->size;
  p->mode = NV__GPU_SC_ASSIGN;
  p->k = 1;
  p->idt = (int)im->dtype;
  p->n[0] = out->shape[axis];
  p->ext[0] = 1;
  p->ast[0] = ost[axis];
  items_of(p->shape, p->nd, &p->items, &p->inner, &p->chunks);
  sp->duplicates = im->size > 1;
  nv__gpu_arg o;
  nv_status st = base_output(ctx, node, in, donated, &o);
  if (st == NV_OK && out->size > 0 && im->size > 0)
    st = scatter_record(ctx, node, sp, o, &in[2], &in[1]);
  nv__free(sp);
  return st;
}

/* ---- masked_scatter ---- */

static nv_status k_masked_scatter(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                  int donated) {
  nv__output *out = &node->out[0];
  const nv__output *mm = in[1].meta, *sm = in[2].meta;
  int m = mm->ndim, t = out->ndim - m;
  nv__gpu_mask_params p;
  memset(&p, 0, sizeof p);
  const int64_t *ms[1] = {mm->strides}, *ts[1] = {sm->strides + 1};
  int64_t *mo[1] = {p.st}, *to[1] = {p.tst};
  bool ok = fold(mm->shape, m, ms, 1, &p.nd, p.shape, mo);
  if (ok && t > 0) ok = fold(sm->shape + 1, t, ts, 1, &p.tnd, p.tshape, to);
  if (!ok) return NV__GPU_DECLINED;
  nv__gpu_arg o, mk, s;
  nv_status st = base_output(ctx, node, in, donated, &o);
  p.row = 1;
  for (int d = m; d < out->ndim; d++) p.row *= out->shape[d];
  if (st != NV_OK || p.row == 0 || mm->size == 0) return st;
  nv__gpu_bad *bad;
  hrx_view counts, rowsrc;
  p.total = mm->size;
  p.chunks = (p.total + NV__GPU_MASK_CHUNK - 1) / NV__GPU_MASK_CHUNK;
  if ((st = nv__gpu_input(ctx, &in[1], &mk)) != NV_OK ||
      (st = nv__gpu_input(ctx, &in[2], &s)) != NV_OK ||
      (st = nv__gpu_index_check(ctx, "masked_scatter", &bad)) != NV_OK ||
      (st = nv__gpu_scratch(ctx, (size_t)p.chunks * sizeof(int64_t), &counts)) != NV_OK ||
      (st = nv__gpu_scratch(ctx, (size_t)p.total * sizeof(int64_t), &rowsrc)) != NV_OK)
    return st;
  p.bad = bad;
  p.moff = mk.offset;
  p.rows = sm->shape[0];
  p.out_total = out->size;
  p.ooff = o.offset;
  p.soff = s.offset;
  p.sst0 = sm->strides[0];
  uint32_t cb = (uint32_t)(p.chunks < GRID_CAP ? p.chunks : GRID_CAP);
  hrx_view v1[2] = {mk.view, counts};
  hrx_access a1[2] = {HRX_ACCESS_READ, HRX_ACCESS_READ_WRITE};
  hrx_view v2[1] = {counts};
  hrx_access a2[1] = {HRX_ACCESS_READ_WRITE};
  hrx_view v3[3] = {mk.view, counts, rowsrc};
  hrx_access a3[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ_WRITE};
  hrx_view v4[3] = {o.view, s.view, rowsrc};
  hrx_access a4[3] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_READ, HRX_ACCESS_READ};
  if ((st = launch(ctx, nv__gpu_kernel_mask_count(), cb, NV__GPU_SCATTER_THREADS, v1, a1, 2, &p,
                   sizeof p)) != NV_OK ||
      (st = launch(ctx, nv__gpu_kernel_mask_scan(), 1, 1024, v2, a2, 1, &p, sizeof p)) != NV_OK ||
      (st = launch(ctx, nv__gpu_kernel_mask_rows(), cb, NV__GPU_SCATTER_THREADS, v3, a3, 3, &p,
                   sizeof p)) != NV_OK)
    return st;
  return launch(ctx, nv__gpu_kernel_mask_copy((int)nv_dtype_size(out->dtype)),
                blocks_for(out->size), NV__GPU_SCATTER_THREADS, v4, a4, 3, &p, sizeof p);
}

/* ---- as_strided_vjp ---- */

/* The cotangent summed into a zero row-contiguous output at the view's offset and strides
 * (parameters: offset, then one stride per axis of the cotangent). */
static nv_status k_as_strided_vjp(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                  int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *cm = in[0].meta;
  const int64_t *pp = node->params;
  nv__gpu_asv_params p;
  memset(&p, 0, sizeof p);
  const int64_t *st2[2] = {cm->strides, pp + 1};
  int64_t *fst[2] = {p.cst, p.tst};
  if (!fold(cm->shape, cm->ndim, st2, 2, &p.nd, p.shape, fst)) return NV__GPU_DECLINED;
  nv__gpu_arg o, c;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  size_t width = out->dtype == NV_DTYPE_COMPLEX64 ? 2 : 1;
  hrx_view acc;
  if ((st = nv__gpu_scratch(ctx, (size_t)out->size * width * 8, &acc)) != NV_OK ||
      (st = nv__gpu_fill(ctx, acc, 0)) != NV_OK)
    return st;
  p.dtype = (int)out->dtype;
  p.total = cm->size;
  p.toff = pp[0];
  p.out_size = out->size;
  p.ooff = o.offset;
  if (cm->size > 0) {
    if ((st = nv__gpu_input(ctx, &in[0], &c)) != NV_OK) return st;
    p.coff = c.offset;
    hrx_view v[2] = {c.view, acc};
    hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_READ_WRITE};
    if ((st = launch(ctx, nv__gpu_kernel_asv_acc((int)out->dtype), blocks_for(cm->size),
                     NV__GPU_SCATTER_THREADS, v, a, 2, &p, sizeof p)) != NV_OK)
      return st;
  }
  hrx_view v[2] = {acc, o.view};
  hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return launch(ctx, nv__gpu_kernel_asv_store((int)out->dtype), blocks_for(out->size),
                NV__GPU_SCATTER_THREADS, v, a, 2, &p, sizeof p);
}

void nv__gpu_register_scatter(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_SCATTER] = k_scatter;
  k[NV__PRIM_SCATTER_ADD] = k_scatter;
  k[NV__PRIM_SCATTER_PROD] = k_scatter;
  k[NV__PRIM_SCATTER_MAX] = k_scatter;
  k[NV__PRIM_SCATTER_MIN] = k_scatter;
  k[NV__PRIM_SCATTER_AXIS] = k_put_along_axis;
  k[NV__PRIM_MASKED_SCATTER] = k_masked_scatter;
  k[NV__PRIM_DYNAMIC_SLICE_UPDATE] = k_slice_update_dynamic;
  k[NV__PRIM_SLICE_UPDATE_ADD] = k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_PROD] = k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_MAX] = k_slice_update_reduce;
  k[NV__PRIM_SLICE_UPDATE_MIN] = k_slice_update_reduce;
  k[NV__PRIM_AS_STRIDED_VJP] = k_as_strided_vjp;
}
