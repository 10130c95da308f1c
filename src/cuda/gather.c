/* The gather family on the GPU: take, gather, take_along_axis, slice_dynamic and diag (vector
 * to matrix; diag of a matrix is the diagonal view). Host code: it picks a kernel of gather.cu
 * by the operands' layout and records it (nv__gpu_dispatch). Index values and dynamic-slice
 * starts are read on the device only; every node that reads indices takes one check record
 * (nv__gpu_index_check), which the kernels raise on an out-of-range index (the element is 0
 * and the node fails with the CPU's message).
 *
 * Paths:
 *   take, `a` row-contiguous, one element per index (no inner dims): k_take_elems, one thread
 *        per 4 to 16 outputs (16-byte stores), the index dtype a template parameter
 *   take, `a` row-contiguous, rows of inner > 1 elements per index (embedding lookups):
 *        k_take_rows, one 16-byte unit per thread when rows are multiples of 16 bytes and
 *        aligned, else one element per thread
 *   take of any other layout, take_along_axis, gather with one index array: k_gather, the
 *        general walk over the output folded to at most NV__GPU_GATHER_DIMS dims
 *   gather with several index arrays: k_gather_offsets per array into int64 scratch (the
 *        checked element offset of each index position), then k_gather over those offsets
 *   gather with none: the slice at 0, a strided copy (nv__gpu_copy_strided)
 *   slice_dynamic: k_dyn_slice (each block clamps the starts as the CPU, then a strided walk)
 *   diag: k_diag_vec, every element of the matrix written once (0 off the diagonal)
 * Each kernel has a 32-bit variant (positions and offsets in 32 bits) taken when every
 * position and offset it reaches fits in 31 bits, else 64-bit. A layout that folds to more
 * than NV__GPU_GATHER_DIMS dims is declined (the CPU fallback runs it). */
#include "core/strided.h"
#include "cuda/copy.h"
#include "cuda/gather_kernels.h"
#include "ops/index_params.h"

/* Grid cap: the kernels walk their work with grid-stride loops. */
#define GRID_CAP ((int64_t)1 << 20)

static uint32_t blocks_for(int64_t threads) {
  return nv__gpu_blocks(threads, NV__GPU_GATHER_THREADS, GRID_CAP);
}

static bool fits31(int64_t v) { return v < ((int64_t)1 << 31); }

/* The elements a device argument's view spans. */
static int64_t view_elems(const nv__gpu_arg *a, size_t isz) {
  return (int64_t)(a->view.length / isz);
}

/* The largest offset, in absolute value, a folded walk reaches from element 0. */
static int64_t reach(const int64_t *shape, const int64_t *st, int nd) {
  int64_t r = 0;
  for (int i = 0; i < nd; i++) r += (shape[i] - 1) * (st[i] < 0 ? -st[i] : st[i]);
  return r;
}

static void row_strides(const int *shape, int nd, int64_t *st) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* The kernels' code of an integer index dtype, or -1. */
static int ix_code(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_UINT8: return NV__GPU_IX_U8;
    case NV_DTYPE_UINT16: return NV__GPU_IX_U16;
    case NV_DTYPE_UINT32: return NV__GPU_IX_U32;
    case NV_DTYPE_UINT64: return NV__GPU_IX_U64;
    case NV_DTYPE_INT8: return NV__GPU_IX_I8;
    case NV_DTYPE_INT16: return NV__GPU_IX_I16;
    case NV_DTYPE_INT32: return NV__GPU_IX_I32;
    case NV_DTYPE_INT64: return NV__GPU_IX_I64;
    default: return -1;
  }
}

/* Records `func` over `nviews` views (the last one written, the others read). */
static nv_status launch(nv__gpu_ctx *ctx, const char *op, const void *func, uint32_t blocks,
                        const hrx_view *views, const hrx_access *acc, int nviews,
                        const void *params, size_t size) {
  return nv__gpu_dispatch_1d(ctx, op, func, blocks, NV__GPU_GATHER_THREADS, views, acc, nviews,
                             params, size);
}

/* Records func(src, idx, out, params): src and idx read, out written. */
static nv_status launch3(nv__gpu_ctx *ctx, const char *op, const void *func, uint32_t blocks,
                         hrx_view src, hrx_view idx, hrx_view out, const void *params,
                         size_t size) {
  hrx_view v[3] = {src, idx, out};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return launch(ctx, op, func, blocks, v, acc, 3, params, size);
}

/* The output's device view with element 0 at its start (the kernels write from there). */
static nv_status output_view(nv__gpu_ctx *ctx, nv__output *out, hrx_view *v) {
  nv__gpu_arg o;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK) return st;
  size_t skip = (size_t)o.offset * nv_dtype_size(out->dtype);
  *v = o.view;
  if (out->size > 0) {
    v->offset += skip;
    v->length -= skip;
  }
  return NV_OK;
}

/* Folds the row-major walk of `shape` with data strides ds and index strides xs into g's
 * shape, ds and is; false when it keeps more than NV__GPU_GATHER_DIMS dims. */
static bool fold_walk(const int *shape, int nd, const int64_t *ds, const int64_t *xs,
                      nv__gpu_gather_params *g) {
  int64_t row[NV__MAX_DIMS], cs[NV__MAX_DIMS], crow[NV__MAX_DIMS], cds[NV__MAX_DIMS],
      cxs[NV__MAX_DIMS];
  row_strides(shape, nd, row);
  const int64_t *ins[3] = {row, ds, xs};
  int64_t *outs[3] = {crow, cds, cxs};
  int fnd = nv__collapse(shape, nd, ins, 3, cs, outs);
  if (fnd > NV__GPU_GATHER_DIMS) return false;
  g->nd = fnd;
  for (int i = 0; i < fnd; i++) {
    g->shape[i] = cs[i];
    g->ds[i] = cds[i];
    g->is[i] = cxs[i];
  }
  return true;
}

/* Records the general walk g (its walk, n, ext, ast and idt set) of src by the index view. */
static nv_status record_gather(nv__gpu_ctx *ctx, const char *op, nv__gpu_gather_params *g,
                               const nv__gpu_arg *src, const nv__gpu_arg *idx, size_t isz,
                               size_t iisz, hrx_view out) {
  g->aoff = src->offset;
  g->ioff = idx->offset;
  int64_t axis_reach = g->n * (g->ast < 0 ? -g->ast : g->ast);
  bool idx32 = fits31(g->size) && fits31(view_elems(src, isz)) &&
               fits31(view_elems(idx, iisz)) && fits31(reach(g->shape, g->ds, g->nd)) &&
               fits31(reach(g->shape, g->is, g->nd)) && fits31(axis_reach);
  return launch3(ctx, op, nv__gpu_kernel_gather((int)isz, !idx32), blocks_for(g->size),
                 src->view, idx->view, out, g, sizeof *g);
}

/* ---- take ---- */

static nv_status k_take(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *am = in[0].meta, *im = in[1].meta;
  int ax = ((const nv__axis_params *)node->params)->axis, idt = ix_code(im->dtype);
  if (idt < 0) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "take: indices must be integers");
  size_t isz = nv_dtype_size(out->dtype), iisz = nv_dtype_size(im->dtype);
  int64_t n = am->shape[ax], m = im->size, outer = 1, inner = 1;
  for (int i = 0; i < ax; i++) outer *= am->shape[i];
  for (int i = ax + 1; i < am->ndim; i++) inner *= am->shape[i];
  bool row = (am->flags & NV__FLAG_ROW) != 0;
  /* Any other layout: the general walk over (a's outer dims, the index dims, a's inner dims),
   * planned first so that a walk too deep is declined before anything is recorded. */
  nv__gpu_gather_params g;
  memset(&g, 0, sizeof g);
  if (!row && out->size > 0) {
    int64_t ds[NV__MAX_DIMS], xs[NV__MAX_DIMS], ist[NV__MAX_DIMS];
    row_strides(im->shape, im->ndim, ist);
    int d = 0;
    for (int i = 0; i < ax; i++, d++) {
      ds[d] = am->strides[i];
      xs[d] = 0;
    }
    for (int i = 0; i < im->ndim; i++, d++) {
      ds[d] = 0;
      xs[d] = ist[i];
    }
    for (int i = ax + 1; i < am->ndim; i++, d++) {
      ds[d] = am->strides[i];
      xs[d] = 0;
    }
    if (!fold_walk(out->shape, out->ndim, ds, xs, &g)) return NV__GPU_DECLINED;
  }
  hrx_view ov;
  nv_status st = output_view(ctx, out, &ov);
  /* The CPU checks outer * m indices: none when either is 0. */
  if (st != NV_OK || outer == 0 || m == 0) return st;
  nv__gpu_arg iv, av;
  nv__gpu_bad *bad;
  /* The indices in row-major order (the builder makes them contiguous). */
  if ((st = nv__gpu_input_contiguous(ctx, &in[1], &iv)) != NV_OK ||
      (st = nv__gpu_index_check(ctx, "take", &bad)) != NV_OK)
    return st;
  if (out->size == 0) {
    /* Empty inner dims: nothing to copy, but every index is still checked. */
    nv__gpu_index_only_params p = {.ioff = iv.offset, .n = n, .m = m, .idt = idt, .bad = bad};
    /* The empty output's placeholder is declared written (the kernel does not touch it), so
     * that a raised check fails the output's readers as any other take's. */
    hrx_view v[2] = {iv.view, ov};
    hrx_access acc[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
    return launch(ctx, "take", nv__gpu_kernel_index_only(), blocks_for(m), v, acc, 2, &p,
                  sizeof p);
  }
  if ((st = nv__gpu_input(ctx, &in[0], &av)) != NV_OK) return st;
  bool idx32 = fits31(out->size) && fits31(view_elems(&av, isz)) && fits31(view_elems(&iv, iisz));
  if (row && inner == 1) {
    nv__gpu_take_elems_params p = {.aoff = av.offset, .ioff = iv.offset, .n = n, .m = m,
                                   .rows = out->size, .bad = bad};
    int64_t per = isz >= 4 ? 4 : 16 / (int64_t)isz;
    return launch3(ctx, "take", nv__gpu_kernel_take_elems((int)isz, idt, !idx32),
                   blocks_for((out->size + per - 1) / per), av.view, iv.view, ov, &p, sizeof p);
  }
  if (row) {
    nv__gpu_take_rows_params p = {.aoff = av.offset, .ioff = iv.offset, .n = n, .m = m,
                                  .rows = outer * m, .len = inner, .idt = idt, .bad = bad};
    int64_t units = (out->size * (int64_t)isz + 15) / 16;
    return launch3(ctx, "take", nv__gpu_kernel_take_rows((int)isz, !idx32), blocks_for(units),
                   av.view, iv.view, ov, &p, sizeof p);
  }
  g.n = n;
  g.ext = 1;
  g.ast = am->strides[ax];
  g.size = out->size;
  g.idt = idt;
  g.bad = bad;
  return record_gather(ctx, "take", &g, &av, &iv, isz, iisz, ov);
}

/* ---- take_along_axis ---- */

/* a and the indices come broadcast to the output's shape (a keeps its own axis size): each
 * output element reads a at its coordinates, with the axis coordinate taken from the index. */
static nv_status k_take_along_axis(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                   int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *am = in[0].meta, *im = in[1].meta;
  int ax = ((const nv__axis_params *)node->params)->axis, idt = ix_code(im->dtype);
  if (idt < 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "take_along_axis: indices must be integers");
  nv__gpu_gather_params g;
  memset(&g, 0, sizeof g);
  if (out->size > 0) {
    int64_t ds[NV__MAX_DIMS];
    memcpy(ds, am->strides, (size_t)am->ndim * sizeof *ds);
    ds[ax] = 0;
    if (!fold_walk(out->shape, out->ndim, ds, im->strides, &g)) return NV__GPU_DECLINED;
  }
  hrx_view ov;
  nv_status st = output_view(ctx, out, &ov);
  if (st != NV_OK || out->size == 0) return st;
  nv__gpu_arg av, iv;
  nv__gpu_bad *bad;
  if ((st = nv__gpu_input(ctx, &in[0], &av)) != NV_OK ||
      (st = nv__gpu_input(ctx, &in[1], &iv)) != NV_OK ||
      (st = nv__gpu_index_check(ctx, "take_along_axis", &bad)) != NV_OK)
    return st;
  g.n = am->shape[ax];
  g.ext = 1;
  g.ast = am->strides[ax];
  g.size = out->size;
  g.idt = idt;
  g.bad = bad;
  return record_gather(ctx, "take_along_axis", &g, &av, &iv, nv_dtype_size(out->dtype),
                       nv_dtype_size(im->dtype), ov);
}

/* ---- gather ---- */

/* Plans one index array's offsets pass over the index shape; false when too deep. */
static bool plan_offsets(const nv__output *im, const int *ishape, int ind,
                         nv__gpu_gather_offsets_params *q) {
  int64_t row[NV__MAX_DIMS], bst[NV__MAX_DIMS], cs[NV__MAX_DIMS], crow[NV__MAX_DIMS],
      cbs[NV__MAX_DIMS];
  row_strides(ishape, ind, row);
  nv__gpu_broadcast_strides(im, ishape, ind, bst);
  const int64_t *ins[2] = {row, bst};
  int64_t *outs[2] = {crow, cbs};
  int fnd = nv__collapse(ishape, ind, ins, 2, cs, outs);
  if (fnd > NV__GPU_GATHER_DIMS) return false;
  memset(q, 0, sizeof *q);
  q->nd = fnd;
  q->idt = ix_code(im->dtype);
  for (int i = 0; i < fnd; i++) {
    q->shape[i] = cs[i];
    q->is[i] = cbs[i];
  }
  return true;
}

/* out = (index shape, slice shape): position p of the index shape selects the slice of a at
 * sum over the index arrays j of wrap(idx_j[p]) * a.strides[axis_j]. */
static nv_status k_gather(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__gather_params *gp = node->params;
  const nv__output *am = in[0].meta;
  int k = gp->naxes, ind = out->ndim - am->ndim, nd = out->ndim;
  const int *slice = out->shape + ind;
  size_t isz = nv_dtype_size(out->dtype);
  for (int j = 0; j < k; j++)
    if (ix_code(in[1 + j].meta->dtype) < 0)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "gather: indices must be integers");
  /* Plan every walk before anything is recorded (a walk too deep is declined). */
  nv__gpu_gather_params g;
  memset(&g, 0, sizeof g);
  nv__gpu_gather_offsets_params *offs = NULL;
  if (out->size > 0 && k > 0) {
    int64_t ds[NV__MAX_DIMS], xs[NV__MAX_DIMS];
    if (k == 1) nv__gpu_broadcast_strides(in[1].meta, out->shape, ind, xs);
    else row_strides(out->shape, ind, xs);
    for (int d = 0; d < ind; d++) ds[d] = 0;
    for (int d = 0; d < am->ndim; d++) {
      ds[ind + d] = am->strides[d];
      xs[ind + d] = 0;
    }
    if (!fold_walk(out->shape, nd, ds, xs, &g)) return NV__GPU_DECLINED;
    if (k > 1) {
      offs = nv__calloc((size_t)k, sizeof *offs);
      if (!offs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "gather: out of memory");
      for (int j = 0; j < k; j++)
        if (!plan_offsets(in[1 + j].meta, out->shape, ind, &offs[j])) {
          nv__free(offs);
          return NV__GPU_DECLINED;
        }
    }
  }
  hrx_view ov;
  nv_status st = output_view(ctx, out, &ov);
  if (st != NV_OK || out->size == 0) {
    nv__free(offs);
    return st;
  }
  nv__gpu_arg av;
  if ((st = nv__gpu_input(ctx, &in[0], &av)) != NV_OK) {
    nv__free(offs);
    return st;
  }
  if (k == 0) {
    /* No index arrays: the slice at the origin. */
    int64_t ost[NV__MAX_DIMS];
    row_strides(out->shape, nd, ost);
    nv__gpu_arg o = {ov, 0};
    return nv__gpu_copy_strided(ctx, (int)isz, out->shape, nd, av, am->strides, o, ost,
                                HRX_ACCESS_WRITE);
  }
  nv__gpu_bad *bad;
  if ((st = nv__gpu_index_check(ctx, "gather", &bad)) != NV_OK) {
    nv__free(offs);
    return st;
  }
  g.size = out->size;
  g.bad = bad;
  if (k == 1) {
    int axis = gp->data[0];
    nv__gpu_arg iv;
    if ((st = nv__gpu_input(ctx, &in[1], &iv)) != NV_OK) return st;
    g.n = am->shape[axis];
    g.ext = slice[axis];
    g.ast = am->strides[axis];
    g.idt = ix_code(in[1].meta->dtype);
    return record_gather(ctx, "gather", &g, &av, &iv, isz, nv_dtype_size(in[1].meta->dtype),
                         ov);
  }
  /* Several index arrays: their checked offsets summed into scratch, one pass per array. */
  int64_t npos = 1;
  for (int d = 0; d < ind; d++) npos *= out->shape[d];
  nv__gpu_arg sv = {.offset = 0};
  st = nv__gpu_scratch(ctx, (size_t)npos * sizeof(int64_t), &sv.view);
  for (int j = 0; j < k && st == NV_OK; j++) {
    int axis = gp->data[j];
    nv__gpu_arg iv;
    if ((st = nv__gpu_input(ctx, &in[1 + j], &iv)) != NV_OK) break;
    nv__gpu_gather_offsets_params *q = &offs[j];
    q->ioff = iv.offset;
    q->n = am->shape[axis];
    q->ext = slice[axis];
    q->ast = am->strides[axis];
    q->npos = npos;
    q->first = j == 0;
    q->bad = bad;
    hrx_view v[2] = {iv.view, sv.view};
    /* The first pass writes every offset; the later ones add to them. */
    hrx_access acc[2] = {HRX_ACCESS_READ, j == 0 ? HRX_ACCESS_WRITE : HRX_ACCESS_READ_WRITE};
    st = launch(ctx, "gather", nv__gpu_kernel_gather_offsets(), blocks_for(npos), v, acc, 2, q,
                sizeof *q);
  }
  nv__free(offs);
  if (st != NV_OK) return st;
  g.idt = NV__GPU_IX_OFFSET;
  return record_gather(ctx, "gather", &g, &av, &sv, isz, sizeof(int64_t), ov);
}

/* ---- slice_dynamic ---- */

static nv_status k_slice_dynamic(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                 int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__gather_params *gp = node->params;
  const nv__output *am = in[0].meta, *sm = in[1].meta;
  int sdt = ix_code(sm->dtype);
  if (sdt < 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "slice_dynamic: the start must be integers");
  nv__gpu_dyn_slice_params *p = nv__calloc(1, sizeof *p);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "slice_dynamic: out of memory");
  nv_status st = NV_OK;
  if (out->size > 0) {
    int64_t row[NV__MAX_DIMS], cs[NV__MAX_DIMS], crow[NV__MAX_DIMS], css[NV__MAX_DIMS];
    row_strides(out->shape, out->ndim, row);
    const int64_t *ins[2] = {row, am->strides};
    int64_t *outs[2] = {crow, css};
    int fnd = nv__collapse(out->shape, out->ndim, ins, 2, cs, outs);
    if (fnd > NV__GPU_GATHER_DIMS || gp->naxes > NV__GPU_DYN_AXES) {
      nv__free(p);
      return NV__GPU_DECLINED;
    }
    p->nd = fnd;
    for (int i = 0; i < fnd; i++) {
      p->shape[i] = cs[i];
      p->ss[i] = css[i];
    }
  }
  hrx_view ov;
  nv__gpu_arg av, sv;
  if ((st = output_view(ctx, out, &ov)) != NV_OK || out->size == 0 ||
      (st = nv__gpu_input(ctx, &in[0], &av)) != NV_OK ||
      (st = nv__gpu_input(ctx, &in[1], &sv)) != NV_OK) {
    nv__free(p);
    return st;
  }
  p->aoff = av.offset;
  p->soff = sv.offset;
  p->sstep = sm->ndim ? sm->strides[0] : 0;
  p->size = out->size;
  p->sdt = sdt;
  p->naxes = gp->naxes;
  for (int q = 0; q < gp->naxes; q++) {
    int ax = gp->data[q];
    p->ax_stride[q] = am->strides[ax];
    p->ax_shape[q] = am->shape[ax];
    p->ax_size[q] = out->shape[ax];
  }
  /* The start's offset is added in 64 bits; the walk after it needs 31 bits or 64. */
  bool idx32 = fits31(out->size) && fits31(reach(p->shape, p->ss, p->nd));
  size_t isz = nv_dtype_size(out->dtype);
  st = launch3(ctx, "slice_dynamic", nv__gpu_kernel_dyn_slice((int)isz, !idx32),
               blocks_for(out->size), av.view, sv.view, ov, p, sizeof *p);
  nv__free(p);
  return st;
}

/* ---- diag (vector to matrix) ---- */

static nv_status k_diag(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  hrx_view ov;
  nv__gpu_arg sv;
  nv_status st = output_view(ctx, out, &ov);
  if (st != NV_OK || out->size == 0 || (st = nv__gpu_input(ctx, &in[0], &sv)) != NV_OK) return st;
  size_t isz = nv_dtype_size(out->dtype);
  nv__gpu_diag_vec_params p = {.soff = sv.offset,
                               .step = in[0].meta->ndim ? in[0].meta->strides[0] : 0,
                               .side = out->shape[0],
                               .k = ((const nv__axis_params *)node->params)->axis};
  bool idx32 = fits31(out->size) && fits31(view_elems(&sv, isz));
  hrx_view v[2] = {sv.view, ov};
  hrx_access acc[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return launch(ctx, "diag", nv__gpu_kernel_diag_vec((int)isz, !idx32), blocks_for(out->size), v,
                acc, 2, &p, sizeof p);
}

void nv__gpu_register_gather(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_TAKE] = k_take;
  k[NV__PRIM_GATHER] = k_gather;
  k[NV__PRIM_GATHER_AXIS] = k_take_along_axis;
  k[NV__PRIM_DYNAMIC_SLICE] = k_slice_dynamic;
  k[NV__PRIM_DIAG] = k_diag;
}
