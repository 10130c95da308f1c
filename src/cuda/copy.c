/* The copy family on the GPU: astype, copy, the views (and their copies), to_fp8/from_fp8,
 * full, arange, eye and slice_update, and the shared helpers nv__gpu_copy_contiguous and
 * nv__gpu_input_contiguous. Host code: it folds each layout (nv__collapse), picks a kernel of
 * copy.cu by the folded layout and records it (nv__gpu_dispatch).
 *
 * Paths of a same-dtype copy, in the order they are tried (nv__gpu_copy_strided):
 *   span    both sides contiguous: a device-to-device copy of the bytes (nv__gpu_copy)
 *   fill    a source of one element broadcast over a contiguous destination (k_fill)
 *   tile    a transpose: the destination's fastest dim is strided in the source and another
 *           dim is unit-strided there; 32x32 tiles through shared memory (k_copy_tile)
 *   nd      up to 8 folded dims (k_copy_nd): 16-byte vectors when both last dims are unit-
 *           strided, else 4 elements per thread; 32-bit indexing with fast dividers when every
 *           index and offset fits in 31 bits, else 64-bit
 *   big     more than 8 folded dims (k_copy_big): the same walk over up to 64 dims
 * Conversions take the fast pair kernel for contiguous data (k_convert_span), else the general
 * k_convert over up to 8 folded dims, else a contiguous copy into scratch memory first. */
#include "core/strided.h"
#include "cuda/copy.h"
#include "cuda/copy_kernels.h"
#include "ops/index_params.h"
#include "ops/params.h"

/* Grid caps: the kernels walk their work with grid-stride loops. */
#define GRID_CAP 8192

static uint32_t blocks_for(int64_t threads) {
  return nv__gpu_blocks(threads, NV__GPU_COPY_THREADS, GRID_CAP);
}

/* Records `func` over (src read, dst written with `dacc`), or over dst alone when src is NULL. */
static nv_status launch(nv__gpu_ctx *ctx, const void *func, uint32_t blocks, uint32_t threads,
                        const hrx_view *src, hrx_view dst, hrx_access dacc, const void *params,
                        size_t size) {
  if (!func) return nv__set_error(NV_ERR_BACKEND, "copy: no kernel for this element size");
  hrx_view views[2];
  hrx_access acc[2];
  int n = 0;
  if (src) {
    views[n] = *src;
    acc[n++] = HRX_ACCESS_READ;
  }
  views[n] = dst;
  acc[n++] = dacc;
  nv__gpu_launch l = {.func = func,
                      .grid = {blocks, 1, 1},
                      .block = {threads, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = n,
                      .params = params,
                      .params_size = size};
  return nv__gpu_dispatch(ctx, &l);
}

/* The fast divider of d (1 <= d < 2^31): n / d == (umulhi(n, m) + n) >> s for n < 2^31. */
static void divider(int64_t d, uint32_t *m, uint32_t *s) {
  uint32_t shift = 0;
  while (shift < 32 && ((uint64_t)1 << shift) < (uint64_t)d) shift++;
  uint64_t magic = (((uint64_t)1 << 32) * (((uint64_t)1 << shift) - (uint64_t)d)) / (uint64_t)d + 1;
  *m = (uint32_t)magic;
  *s = shift;
}

static void row_strides(const int *shape, int ndim, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

void nv__gpu_broadcast_strides(const nv__output *in, const int *shape, int ndim, int64_t *st) {
  for (int i = 0; i < ndim; i++) {
    int j = i - (ndim - in->ndim);
    st[i] = j < 0 || in->shape[j] != shape[i] ? 0 : in->strides[j];
  }
}

/* The largest offset, in absolute value, a folded layout reaches from element 0. */
static int64_t reach(const int64_t *shape, const int64_t *st, int nd) {
  int64_t r = 0;
  for (int i = 0; i < nd; i++) r += (shape[i] - 1) * (st[i] < 0 ? -st[i] : st[i]);
  return r;
}

/* Fills a folded layout of nd <= 8 dims for the kernels' walk, `per` elements per work item;
 * the dividers when `idx32`. */
static void fill_nd(nv__gpu_nd *l, int nd, const int64_t *shape, const int64_t *ss,
                    const int64_t *ds, int per, bool idx32) {
  memset(l, 0, sizeof *l);
  l->nd = nd;
  l->rows = 1;
  for (int i = 0; i < nd; i++) {
    l->shape[i] = shape[i];
    l->sst[i] = ss[i];
    l->dst[i] = ds[i];
    if (i < nd - 1) l->rows *= shape[i];
    if (idx32) divider(shape[i], &l->magic[i], &l->shift[i]);
  }
  l->inner = shape[nd - 1];
  l->chunks = (l->inner + per - 1) / per;
  l->items = l->rows * l->chunks;
  if (idx32) divider(l->chunks, &l->chunk_magic, &l->chunk_shift);
}

static bool fits31(int64_t n, int64_t a, int64_t b) {
  const int64_t lim = (int64_t)1 << 31;
  return n < lim && a < lim && b < lim;
}

/* The tiled transpose, when the destination's last dim is unit-strided, strided in the source,
 * and another dim of at least 16 elements is unit-strided in the source. */
static bool tile_plan(int nd, const int64_t *shape, const int64_t *ss, const int64_t *ds,
                      nv__gpu_tile_params *t) {
  int L = nd - 1, J = -1;
  if (nd < 2 || ds[L] != 1 || ss[L] == 1 || ss[L] == -1 || shape[L] < 16) return false;
  for (int i = 0; i < L; i++)
    if ((ss[i] == 1 || ss[i] == -1) && shape[i] >= 16) J = i;
  if (J < 0) return false;
  memset(t, 0, sizeof *t);
  t->nj = shape[J];
  t->nl = shape[L];
  t->sj = ss[J];
  t->sl = ss[L];
  t->dj = ds[J];
  t->dl = ds[L];
  t->tiles_j = (t->nj + 31) / 32;
  t->tiles_l = (t->nl + 31) / 32;
  int64_t batch = 1;
  for (int i = 0; i < L; i++) {
    if (i == J) continue;
    t->bshape[t->nb] = shape[i];
    t->bsst[t->nb] = ss[i];
    t->bdst[t->nb++] = ds[i];
    batch *= shape[i];
  }
  t->tiles = t->tiles_j * t->tiles_l * batch;
  return true;
}

nv_status nv__gpu_copy_strided(nv__gpu_ctx *ctx, int isz, const int *shape, int ndim,
                               nv__gpu_arg src, const int64_t *ss, nv__gpu_arg dst,
                               const int64_t *ds, hrx_access dacc) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  if (n == 0) return NV_OK;
  int64_t cs[NV__MAX_DIMS], css[NV__MAX_DIMS], cds[NV__MAX_DIMS];
  int64_t *outs[2] = {css, cds};
  const int64_t *ins[2] = {ss, ds};
  int nd = nv__collapse(shape, ndim, ins, 2, cs, outs);
  if (nd == 1 && cds[0] == 1 && css[0] == 1) {
    /* Contiguous on both sides: a device-to-device copy of the bytes (the driver's copy, as
     * PyTorch's: 4.1 TB/s on the H200 where a 16-byte-vector kernel reached 3.9). */
    hrx_view s = src.view, d = dst.view;
    s.offset += (size_t)src.offset * (size_t)isz;
    d.offset += (size_t)dst.offset * (size_t)isz;
    s.length = d.length = (size_t)n * (size_t)isz;
    return nv__gpu_copy(ctx, d, s);
  }
  if (nd == 1 && cds[0] == 1 && css[0] == 0) {
    nv__gpu_span_params p = {src.offset, dst.offset, n};
    return launch(ctx, nv__gpu_kernel_fill(isz), blocks_for((n + 16 / isz - 1) / (16 / isz)),
                  NV__GPU_COPY_THREADS, &src.view, dst.view, dacc, &p, sizeof p);
  }
  nv__gpu_tile_params t;
  if (nd <= 8 && tile_plan(nd, cs, css, cds, &t)) {
    t.soff = src.offset;
    t.doff = dst.offset;
    uint32_t blocks = (uint32_t)(t.tiles < GRID_CAP ? t.tiles : GRID_CAP);
    return launch(ctx, nv__gpu_kernel_copy_tile(isz), blocks, NV__GPU_COPY_THREADS, &src.view,
                  dst.view, dacc, &t, sizeof t);
  }
  if (nd <= 8) {
    bool unit = css[nd - 1] == 1 && cds[nd - 1] == 1;
    bool idx32 = fits31(n, reach(cs, css, nd), reach(cs, cds, nd));
    nv__gpu_copy_params p = {src.offset, dst.offset, {0}};
    fill_nd(&p.l, nd, cs, css, cds, unit ? 16 / isz : 4, idx32);
    return launch(ctx, nv__gpu_kernel_copy_nd(isz, !idx32, unit), blocks_for(p.l.items),
                  NV__GPU_COPY_THREADS, &src.view, dst.view, dacc, &p, sizeof p);
  }
  nv__gpu_copy_big_params *b = nv__calloc(1, sizeof *b);
  if (!b) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "copy: out of memory");
  b->soff = src.offset;
  b->doff = dst.offset;
  b->nd = nd;
  b->rows = 1;
  for (int i = 0; i < nd; i++) {
    b->shape[i] = cs[i];
    b->sst[i] = css[i];
    b->dst[i] = cds[i];
    if (i < nd - 1) b->rows *= cs[i];
  }
  b->inner = cs[nd - 1];
  b->chunks = (b->inner + 3) / 4;
  b->items = b->rows * b->chunks;
  nv_status st = launch(ctx, nv__gpu_kernel_copy_big(isz), blocks_for(b->items),
                        NV__GPU_COPY_THREADS, &src.view, dst.view, dacc, b, sizeof *b);
  nv__free(b);
  return st;
}

/* Copies operand `op` (its own shape and layout) into the row-major `dst`. */
static nv_status copy_into(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg dst) {
  const nv__output *m = op->meta;
  if (m->size == 0) return NV_OK;
  nv__gpu_arg s;
  nv_status st = nv__gpu_input(ctx, op, &s);
  if (st != NV_OK) return st;
  int64_t ds[NV__MAX_DIMS];
  row_strides(m->shape, m->ndim, ds);
  return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(m->dtype), m->shape, m->ndim, s, m->strides, dst,
                     ds, HRX_ACCESS_WRITE);
}

nv_status nv__gpu_copy_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg dst) {
  return copy_into(ctx, src, dst);
}

nv_status nv__gpu_input_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg *out) {
  const nv__output *m = src->meta;
  if (m->flags & NV__FLAG_ROW) return nv__gpu_input(ctx, src, out);
  size_t bytes = (size_t)m->size * nv_dtype_size(m->dtype);
  nv__gpu_arg d = {.offset = 0};
  nv_status st = nv__gpu_scratch(ctx, bytes ? bytes : 1, &d.view);
  if (st == NV_OK) st = copy_into(ctx, src, d);
  if (st == NV_OK) *out = d;
  return st;
}

/* ---- Conversions ---- */

static int code_size(int code) {
  return code == NV__GPU_DT_FP8 ? 1 : (int)nv_dtype_size((nv_dtype)code);
}

/* Converts operand `op` (dtype code `from`, its own layout) into the row-major dst of dtype
 * code `to`. */
static nv_status convert_into(nv__gpu_ctx *ctx, const nv__operand *op, int from, int to,
                              nv__gpu_arg dst) {
  const nv__output *m = op->meta;
  if (m->size == 0) return NV_OK;
  nv__gpu_arg s;
  nv_status st = nv__gpu_input(ctx, op, &s);
  if (st != NV_OK) return st;
  int64_t ds[NV__MAX_DIMS], cs[NV__MAX_DIMS], css[NV__MAX_DIMS], cds[NV__MAX_DIMS];
  row_strides(m->shape, m->ndim, ds);
  int64_t *outs[2] = {css, cds};
  const int64_t *ins[2] = {m->strides, ds};
  int nd = nv__collapse(m->shape, m->ndim, ins, 2, cs, outs);
  const void *fast = nv__gpu_kernel_convert_span(from, to);
  if (nd == 1 && css[0] == 1 && fast) {
    nv__gpu_span_params p = {s.offset, dst.offset, m->size};
    return launch(ctx, fast, blocks_for((m->size + 7) / 8), NV__GPU_COPY_THREADS, &s.view,
                  dst.view, HRX_ACCESS_WRITE, &p, sizeof p);
  }
  if (nd > 8) {
    /* More dims than the kernel walks: a contiguous copy first, in scratch memory. */
    nv__gpu_arg c = {.offset = 0};
    size_t bytes = (size_t)m->size * (size_t)code_size(from);
    if ((st = nv__gpu_scratch(ctx, bytes, &c.view)) != NV_OK ||
        (st = nv__gpu_copy_strided(ctx, code_size(from), m->shape, m->ndim, s, m->strides, c, ds,
                          HRX_ACCESS_WRITE)) != NV_OK)
      return st;
    s = c;
    nd = 1;
    cs[0] = m->size;
    css[0] = cds[0] = 1;
  }
  bool idx32 = fits31(m->size, reach(cs, css, nd), m->size);
  nv__gpu_convert_params p = {.from = from, .to = to, .soff = s.offset, .doff = dst.offset};
  fill_nd(&p.l, nd, cs, css, cds, NV__GPU_CONVERT_ELEMS, idx32);
  return launch(ctx, nv__gpu_kernel_convert(!idx32), blocks_for(p.l.items), NV__GPU_COPY_THREADS,
                &s.view, dst.view, HRX_ACCESS_WRITE, &p, sizeof p);
}

/* ---- Kernel-table entries ---- */

/* The output's device memory (allocated, or the donated buffer's). */
static nv_status output_of(nv__gpu_ctx *ctx, nv__node *node, nv__gpu_arg *o) {
  return nv__gpu_output(ctx, &node->out[0], o);
}

static nv_status k_copy(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  return st != NV_OK ? st : copy_into(ctx, &in[0], o);
}

static nv_status k_astype(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)donated;
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK) return st;
  nv_dtype from = in[0].meta->dtype, to = node->out[0].dtype;
  /* The same dtype is a plain copy (bits kept, as the CPU's memcpy). */
  if (from == to) return copy_into(ctx, &in[0], o);
  return convert_into(ctx, &in[0], (int)from, (int)to, o);
}

static nv_status k_to_fp8(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)donated;
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  return st != NV_OK ? st : convert_into(ctx, &in[0], (int)in[0].meta->dtype, NV__GPU_DT_FP8, o);
}

static nv_status k_from_fp8(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                            int donated) {
  (void)donated;
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  return st != NV_OK ? st
                     : convert_into(ctx, &in[0], NV__GPU_DT_FP8, (int)node->out[0].dtype, o);
}

/* Views share the input's buffer (as the CPU's nv__k_view), or copy when the parameters say
 * so (a reshape the strides do not allow). */
static nv_status k_view(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__view_params *p = node->params;
  if (p && p->copy) {
    nv__gpu_arg o;
    nv_status st = output_of(ctx, node, &o);
    return st != NV_OK ? st : copy_into(ctx, &in[0], o);
  }
  out->buf = nv__buffer_retain(in[0].buf);
  out->offset = in[0].offset + (p ? p->delta : 0);
  return NV_OK;
}

/* full: the values broadcast to the output (a fill for a single value). */
static nv_status k_full(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o, s;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  if ((st = nv__gpu_input(ctx, &in[0], &s)) != NV_OK) return st;
  int64_t ss[NV__MAX_DIMS], ds[NV__MAX_DIMS];
  nv__gpu_broadcast_strides(in[0].meta, out->shape, out->ndim, ss);
  row_strides(out->shape, out->ndim, ds);
  return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(out->dtype), out->shape, out->ndim, s, ss, o, ds,
                     HRX_ACCESS_WRITE);
}

static nv_status k_arange(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  const nv__arange_params *a = node->params;
  nv__gpu_arange_params p = {.to = (int32_t)out->dtype, .doff = o.offset, .n = out->size,
                             .start = a->start, .step = a->step};
  int64_t per = NV__GPU_CONVERT_ELEMS;
  return launch(ctx, nv__gpu_kernel_arange(), blocks_for((out->size + per - 1) / per),
                NV__GPU_COPY_THREADS, NULL, o.view, HRX_ACCESS_WRITE, &p, sizeof p);
}

/* The bits of 1 in each dtype. */
static uint64_t one_bits(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 0x3c00;
    case NV_DTYPE_BFLOAT16: return 0x3f80;
    case NV_DTYPE_FLOAT32: return 0x3f800000u;
    case NV_DTYPE_FLOAT64: return 0x3ff0000000000000ull;
    case NV_DTYPE_COMPLEX64: return 0x3f800000u; /* (1, 0): the real part in the low half */
    default: return 1;
  }
}

/* eye: zeros, then the diagonal. */
static nv_status k_eye(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  int isz = (int)nv_dtype_size(out->dtype);
  hrx_view v = o.view;
  v.offset += (size_t)o.offset * (size_t)isz;
  v.length = (size_t)out->size * (size_t)isz;
  if ((st = nv__gpu_fill(ctx, v, 0)) != NV_OK) return st;
  int64_t rows = out->shape[0], cols = out->shape[1], k = ((const nv__eye_params *)node->params)->k;
  /* Row r holds its one at column r + k: rows max(0, -k) .. min(rows, cols - k). */
  int64_t r0 = k < 0 ? -k : 0, r1 = cols - k < rows ? cols - k : rows;
  if (r1 <= r0) return NV_OK;
  nv__gpu_diag_params p = {.doff = o.offset, .first = r0 * cols + r0 + k, .step = cols + 1,
                           .count = r1 - r0, .value = one_bits(out->dtype)};
  return launch(ctx, nv__gpu_kernel_diag(isz), blocks_for(p.count), NV__GPU_COPY_THREADS, NULL,
                o.view, HRX_ACCESS_READ_WRITE, &p, sizeof p);
}

/* slice_update: the base (in place when donated, else copied first) with the region
 * overwritten by the update broadcast to it. */
static nv_status k_slice_update(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                int donated) {
  nv__output *out = &node->out[0];
  nv__gpu_arg o, u;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  if (donated != 0 && (st = copy_into(ctx, &in[0], o)) != NV_OK) return st;
  const nv__slice_update_params *p = node->params;
  int n = p->ndim, shape[NV__MAX_DIMS];
  int64_t rst[NV__MAX_DIMS], bst[NV__MAX_DIMS], off = 0, size = 1;
  for (int i = 0; i < n; i++) {
    shape[i] = p->data[2 * n + i];
    rst[i] = out->strides[i] * p->data[n + i];
    off += (int64_t)p->data[i] * out->strides[i];
    size *= shape[i];
  }
  if (size == 0) return NV_OK;
  if ((st = nv__gpu_input(ctx, &in[1], &u)) != NV_OK) return st;
  nv__gpu_broadcast_strides(in[1].meta, shape, n, bst);
  nv__gpu_arg region = {o.view, o.offset + off};
  /* Only the region is written: the rest of the output must be kept (read-write). */
  return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(out->dtype), shape, n, u, bst, region, rst,
                     HRX_ACCESS_READ_WRITE);
}

/* concatenate: each input copied (any layout) into its slab of the row-major output along the
 * axis. Each copy writes part of the output's view (read-write, so hrx keeps them ordered and
 * none is taken for the whole view's writer). */
static nv_status k_concatenate(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  int axis = ((const nv__axis_params *)node->params)->axis;
  int64_t ost[NV__MAX_DIMS], off = 0;
  row_strides(out->shape, out->ndim, ost);
  int isz = (int)nv_dtype_size(out->dtype);
  for (int j = 0; j < node->ninputs && st == NV_OK; j++) {
    const nv__output *m = in[j].meta;
    if (m->size > 0) {
      nv__gpu_arg s;
      if ((st = nv__gpu_input(ctx, &in[j], &s)) != NV_OK) break;
      nv__gpu_arg slab = {o.view, o.offset + off * ost[axis]};
      st = nv__gpu_copy_strided(ctx, isz, m->shape, m->ndim, s, m->strides, slab, ost,
                                HRX_ACCESS_READ_WRITE);
    }
    off += m->shape[axis];
  }
  return st;
}

/* pad, constant mode (and any mode of a 0-d or empty input, as the CPU's): the value broadcast
 * over the output, then the input copied into its interior. The edge, reflect and symmetric
 * modes: one kernel maps every output element to its source element (k_pad). */
static nv_status k_pad(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__pad_params *p = node->params;
  const nv__output *am = in[0].meta;
  int nd = out->ndim;
  nv__gpu_arg o, v, a;
  nv_status st = output_of(ctx, node, &o);
  if (st != NV_OK || out->size == 0) return st;
  if (nd == 0) return copy_into(ctx, &in[0], o);
  int isz = (int)nv_dtype_size(out->dtype);
  if (p->mode != NV_PAD_CONSTANT && am->size > 0) {
    nv__gpu_pad_params *pp = nv__calloc(1, sizeof *pp);
    if (!pp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "pad: out of memory");
    pp->mode = p->mode;
    pp->nd = nd;
    pp->n = out->size;
    for (int i = 0; i < nd; i++) {
      pp->oshape[i] = out->shape[i];
      pp->ishape[i] = am->shape[i];
      pp->ist[i] = am->strides[i];
      pp->low[i] = p->width[i];
    }
    if ((st = nv__gpu_input(ctx, &in[0], &a)) == NV_OK) {
      pp->soff = a.offset;
      st = launch(ctx, nv__gpu_kernel_pad(isz), blocks_for(out->size), NV__GPU_COPY_THREADS,
                  &a.view, o.view, HRX_ACCESS_WRITE, pp, sizeof *pp);
    }
    nv__free(pp);
    return st;
  }
  int64_t ost[NV__MAX_DIMS], vst[NV__MAX_DIMS], off = 0;
  row_strides(out->shape, nd, ost);
  nv__gpu_broadcast_strides(in[1].meta, out->shape, nd, vst);
  if ((st = nv__gpu_input(ctx, &in[1], &v)) != NV_OK ||
      (st = nv__gpu_copy_strided(ctx, isz, out->shape, nd, v, vst, o, ost, HRX_ACCESS_WRITE)) !=
          NV_OK)
    return st;
  if (am->size == 0) return NV_OK;
  for (int i = 0; i < nd; i++) off += (int64_t)p->width[i] * ost[i];
  if ((st = nv__gpu_input(ctx, &in[0], &a)) != NV_OK) return st;
  nv__gpu_arg inner = {o.view, o.offset + off};
  return nv__gpu_copy_strided(ctx, isz, am->shape, nd, a, am->strides, inner, ost,
                              HRX_ACCESS_READ_WRITE);
}

void nv__gpu_register_copy(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_CONCATENATE] = k_concatenate;
  k[NV__PRIM_PAD] = k_pad;
  k[NV__PRIM_DIAGONAL] = k_view;
  k[NV__PRIM_FULL] = k_full;
  k[NV__PRIM_ARANGE] = k_arange;
  k[NV__PRIM_EYE] = k_eye;
  k[NV__PRIM_ASTYPE] = k_astype;
  k[NV__PRIM_COPY] = k_copy;
  k[NV__PRIM_TO_FP8] = k_to_fp8;
  k[NV__PRIM_FROM_FP8] = k_from_fp8;
  k[NV__PRIM_RESHAPE] = k_view;
  k[NV__PRIM_TRANSPOSE] = k_view;
  k[NV__PRIM_BROADCAST] = k_view;
  k[NV__PRIM_SLICE] = k_view;
  k[NV__PRIM_SQUEEZE] = k_view;
  k[NV__PRIM_EXPAND_DIMS] = k_view;
  k[NV__PRIM_AS_STRIDED] = k_view;
  k[NV__PRIM_SLICE_UPDATE] = k_slice_update;
}
