/* The element-wise family on the GPU: the CUDA kernel-table entries of every unary, binary and
 * ternary element-wise primitive, the fused activations (gelu, act_vjp), divmod,
 * allclose/array_equal, the family's views and its creation primitives. Host code (C11): it folds the operands' layouts, picks a kernel from
 * the table the .cu files fill (src/cuda/elementwise.h) and records its launch.
 *
 * Layouts: the inputs are broadcast to the output's shape and the dims folded (nv__collapse).
 * One folded dim with every input contiguous or a single broadcast element takes the
 * contiguous kernel where the primitive has one (16-byte vectors on the device when aligned);
 * two folded dims with every input's inner stride 0 or 1 take its rows mode; a binary op with
 * a transposed input (strided along the output's last dim, unit-strided along another) takes
 * the tiled kernel where the primitive has one (the dedicated kernels: tile_fit);
 * anything else takes the strided kernel, with 32-bit index math when the element count and
 * every input's reachable offsets fit in int32. More than NV__GPU_MAX_DIMS folded dims: the
 * inputs are first copied, broadcast, into row-contiguous scratch memory. The output is always
 * row-contiguous (a new buffer, or the donated input's, which the element-wise donation rule
 * makes row-contiguous and of the output's shape); its offset in the strided kernel is the
 * linear index. */

#include "cpu/kernels.h"
#include "cuda/elementwise.h"
#include "cuda/elementwise_act.h"
#include "cuda/gpu.h"
#include "ops/elementwise_params.h"

static nv__ew_table table;
static nv__ew_act_table act_table;

static nv_status unsupported(int prim, nv_dtype dt) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported", nv__prims[prim].name,
                       nv_dtype_name(dt));
}

/* ---- Launch geometry ---- */

/* Blocks of NV__EW_BLOCK threads for `n` elements at `per_thread` each per tile: one tile per
 * block (the loops are grid-stride, so any grid is correct). Measured on the H200 (2^28-element
 * float32 multiply): one tile per block moves 4.37 TB/s, grids capped at 4 to 32 blocks per
 * multiprocessor 4.01 to 4.16 TB/s. */
static nv_status grid_for(nv__gpu_ctx *ctx, int64_t n, int per_thread, uint32_t *blocks) {
  (void)ctx;
  int64_t tile = (int64_t)NV__EW_BLOCK * per_thread;
  int64_t b = (n + tile - 1) / tile;
  if (b > INT32_MAX) b = INT32_MAX;
  if (b < 1) b = 1;
  *blocks = (uint32_t)b;
  return NV_OK;
}

static nv_status launch_grid(nv__gpu_ctx *ctx, const void *func, const uint32_t grid[3],
                             uint32_t threads, const nv__gpu_arg *args, const hrx_access *access,
                             int nviews, const nv__ew_params *p, bool aliasing) {
  hrx_view views[NV__EW_MAXOPS];
  for (int i = 0; i < nviews; i++) views[i] = args[i].view;
  nv__gpu_launch l = {.func = func,
                      .grid = {grid[0], grid[1], grid[2]},
                      .block = {threads, 1, 1},
                      .shared_bytes = 0,
                      .views = views,
                      .access = access,
                      .nviews = nviews,
                      .params = p,
                      .params_size = sizeof *p,
                      .aliasing = aliasing};
  return nv__gpu_dispatch(ctx, &l);
}

static nv_status launch(nv__gpu_ctx *ctx, const void *func, uint32_t blocks, uint32_t threads,
                        const nv__gpu_arg *args, const hrx_access *access, int nviews,
                        const nv__ew_params *p, bool aliasing) {
  const uint32_t grid[3] = {blocks, 1, 1};
  return launch_grid(ctx, func, grid, threads, args, access, nviews, p, aliasing);
}

/* ---- Layouts ---- */

typedef struct layout {
  int nd;
  int64_t shape[NV__MAX_DIMS];
  int64_t st[NV__EW_MAXOPS][NV__MAX_DIMS]; /* [0]: the row-contiguous output */
} layout;

/* Folds the row-contiguous index space `space` with the inputs broadcast to it. */
static void fold(const nv__output *space, const nv__operand *in, int nin, layout *L) {
  int64_t full[NV__EW_MAXOPS][NV__MAX_DIMS];
  const int64_t *src[NV__EW_MAXOPS] = {0};
  int64_t *dst[NV__EW_MAXOPS] = {0};
  int64_t acc = 1;
  for (int d = space->ndim - 1; d >= 0; d--) {
    full[0][d] = acc;
    acc *= space->shape[d];
  }
  for (int k = 0; k < nin; k++)
    nv__broadcast_strides(in[k].meta, space->shape, space->ndim, full[k + 1]);
  for (int k = 0; k <= nin; k++) {
    src[k] = full[k];
    dst[k] = L->st[k];
  }
  L->nd = nv__collapse(space->shape, space->ndim, src, nin + 1, L->shape, dst);
}

/* Input `src` broadcast to `space` and copied row-contiguous into scratch memory (for index
 * spaces that fold to more dims than the kernels take). */
static nv_status materialize(nv__gpu_ctx *ctx, const nv__output *space, const nv__operand *src,
                             nv__gpu_arg *arg) {
  int64_t st[NV__MAX_DIMS];
  nv__broadcast_strides(src->meta, space->shape, space->ndim, st);
  nv__output m;
  memset(&m, 0, sizeof m);
  m.dtype = src->meta->dtype;
  m.ndim = space->ndim;
  m.size = space->size;
  m.shape = space->shape;
  m.strides = st;
  nv__compute_flags(&m);
  nv__operand op = {&m, src->buf, src->offset};
  hrx_view v;
  nv_status s = nv__gpu_scratch(ctx, (size_t)space->size * nv_dtype_size(m.dtype), &v);
  if (s != NV_OK) return s;
  arg->view = v;
  arg->offset = 0;
  return nv__gpu_copy_contiguous(ctx, &op, *arg);
}

/* Whether n and every input's offsets (sum over dims of |(shape - 1) * stride|) fit in int32. */
static bool fits32(const layout *L, int nin, int64_t n) {
  if (n > INT32_MAX) return false;
  for (int k = 1; k <= nin; k++) {
    uint64_t ext = 0;
    for (int d = 0; d < L->nd; d++) {
      int64_t s = L->st[k][d];
      uint64_t a = s < 0 ? 0 - (uint64_t)s : (uint64_t)s;
      if (a > INT32_MAX) return false;
      ext += (uint64_t)(L->shape[d] - 1) * a;
      if (ext > INT32_MAX) return false;
    }
  }
  return true;
}

/* Magic numbers for q = (umulhi(i, m) + i) >> s == i / d, exact for i < 2^31 and 1 <= d < 2^31. */
static void magic(uint32_t d, uint32_t *m, uint32_t *s) {
  uint32_t sh = 0;
  while (sh < 31 && (1u << sh) < d) sh++;
  uint64_t mul = (((uint64_t)1 << 32) * (((uint64_t)1 << sh) - d)) / d + 1;
  *m = (uint32_t)mul;
  *s = sh;
}

/* Whether the contiguous kernel's rows mode takes the layout: two folded dims, every input's
 * inner stride 0 or 1, the inner size and the row strides of the inner-contiguous inputs
 * multiples of the kernel's vector width (so every vector lies in one row and stays aligned). */
static bool rows_fit(const nv__ew_entry *e, const layout *L, int nin) {
  if (!e->contig || L->nd != 2) return false;
  int64_t v = e->per_thread / NV__EW_CONTIG_UNROLL;
  if (v < 1 || L->shape[1] % v != 0) return false;
  for (int k = 1; k <= nin; k++) {
    if (L->st[k][1] != 0 && L->st[k][1] != 1) return false;
    if (L->st[k][1] == 1 && L->st[k][0] % v != 0) return false;
  }
  return true;
}

/* Whether the tiled kernel takes the layout, and its parameters into `p`: a binary entry with
 * a tiled kernel, at least two folded dims, the last (L) of at least 16 elements; each input
 * either straight (stride -1, 0 or 1 along L) or tiled (any other stride along L, unit stride
 * along J), at least one tiled; J the last other dim of at least 16 elements along which every
 * tiled input is unit-strided. The other dims are the batch. */
static bool tile_fit(const nv__ew_entry *e, const layout *L, int nin, nv__ew_params *p) {
  if (!e->tile || nin != 2 || L->nd < 2) return false;
  int l = L->nd - 1, j = -1;
  if (L->shape[l] < 16) return false;
  uint32_t tiled = 0;
  for (int k = 1; k <= nin; k++)
    if (L->st[k][l] < -1 || L->st[k][l] > 1) tiled |= 1u << k;
  if (!tiled) return false;
  for (int d = 0; d < l; d++) {
    if (L->shape[d] < 16) continue;
    bool unit = true;
    for (int k = 1; k <= nin; k++)
      if ((tiled >> k & 1u) && L->st[k][d] != 1 && L->st[k][d] != -1) unit = false;
    if (unit) j = d;
  }
  if (j < 0) return false;
  p->tiled = tiled;
  p->nj = L->shape[j];
  p->nl = L->shape[l];
  p->tiles_j = (p->nj + 31) / 32;
  p->tiles_l = (p->nl + 31) / 32;
  p->batch = 1;
  p->ndim = 0;
  for (int k = 0; k <= nin; k++) {
    p->sj[k] = L->st[k][j];
    p->sl[k] = L->st[k][l];
  }
  for (int d = 0; d < l; d++) {
    if (d == j) continue;
    p->shape[p->ndim] = L->shape[d];
    for (int k = 0; k <= nin; k++) p->stride[k][p->ndim] = L->st[k][d];
    p->ndim++;
    p->batch *= L->shape[d];
  }
  return true;
}

/* Records one element-wise launch over the row-contiguous index space `space` (the output's
 * shape, or allclose's broadcast shape): args[0] is the output (already allocated), the inputs'
 * views are added here. `p` comes with op and extra set. */
static nv_status record(nv__gpu_ctx *ctx, const nv__output *space, nv__gpu_arg *args,
                        hrx_access out_access, const nv__operand *in, int nin,
                        const nv__ew_entry *e, nv__ew_params *p, bool aliasing) {
  for (int k = 0; k < nin; k++) {
    nv_status s = nv__gpu_input(ctx, &in[k], &args[k + 1]);
    if (s != NV_OK) return s;
  }
  layout L;
  fold(space, in, nin, &L);
  if (L.nd > NV__EW_MAXDIMS) {
    for (int k = 0; k < nin; k++) {
      nv_status s = materialize(ctx, space, &in[k], &args[k + 1]);
      if (s != NV_OK) return s;
    }
    L.nd = 1;
    L.shape[0] = space->size;
    for (int k = 0; k <= nin; k++) L.st[k][0] = 1;
  }
  p->n = space->size;
  for (int k = 0; k <= nin; k++) p->off[k] = args[k].offset;
  hrx_access access[NV__EW_MAXOPS] = {out_access, HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ};
  uint32_t blocks;
  nv_status s;
  /* Contiguous: one folded dim (a length-1 dim counts as contiguous for every operand). */
  bool contig = e->contig && L.nd == 1;
  for (int k = 0; k <= nin && contig; k++) {
    int64_t st = L.shape[0] == 1 ? 1 : L.st[k][0];
    if (st != 1 && !(k > 0 && st == 0)) contig = false;
    if (k > 0 && st == 0) p->scalar |= 1u << k;
  }
  if (contig) {
    s = grid_for(ctx, p->n, e->per_thread, &blocks);
    if (s != NV_OK) return s;
    return launch(ctx, e->contig, blocks, NV__EW_BLOCK, args, access, nin + 1, p, aliasing);
  }
  p->scalar = 0;
  if (rows_fit(e, &L, nin)) {
    /* Rows: vectors along the contiguous inner dim, one row offset per vector. */
    p->ndim = 2;
    p->shape[0] = L.shape[0];
    p->shape[1] = L.shape[1];
    for (int k = 1; k <= nin; k++) {
      p->stride[k][0] = L.st[k][0];
      p->stride[k][1] = L.st[k][1];
      if (L.st[k][1] == 0) p->scalar |= 1u << k;
    }
    p->idx32 = fits32(&L, nin, p->n);
    if (p->idx32) magic((uint32_t)L.shape[1], &p->magic[1], &p->shift[1]);
    s = grid_for(ctx, p->n, e->per_thread, &blocks);
    if (s != NV_OK) return s;
    return launch(ctx, e->contig, blocks, NV__EW_BLOCK, args, access, nin + 1, p, aliasing);
  }
  if (tile_fit(e, &L, nin, p)) {
    /* Tiled: one 32 x 32 output tile per block (grid-stride past the grid's limits). */
    const uint32_t grid[3] = {(uint32_t)(p->tiles_l < INT32_MAX ? p->tiles_l : INT32_MAX),
                              (uint32_t)(p->tiles_j < 65535 ? p->tiles_j : 65535),
                              (uint32_t)(p->batch < 65535 ? p->batch : 65535)};
    return launch_grid(ctx, e->tile, grid, NV__EW_BLOCK, args, access, nin + 1, p, aliasing);
  }
  p->ndim = L.nd;
  for (int d = 0; d < L.nd; d++) {
    p->shape[d] = L.shape[d];
    for (int k = 1; k <= nin; k++) p->stride[k][d] = L.st[k][d];
  }
  p->idx32 = fits32(&L, nin, p->n);
  if (p->idx32)
    for (int d = 0; d < L.nd; d++) magic((uint32_t)L.shape[d], &p->magic[d], &p->shift[d]);
  s = grid_for(ctx, p->n, NV__EW_STRIDED_PER_THREAD, &blocks);
  if (s != NV_OK) return s;
  return launch(ctx, e->strided, blocks, NV__EW_BLOCK, args, access, nin + 1, p, aliasing);
}

/* Output `o` computed from `nin` inputs by entry `e` (primitive `op`, constants `extra`). */
static nv_status ew(nv__gpu_ctx *ctx, nv__output *o, const nv__operand *in, int nin,
                    const nv__ew_entry *e, int op, const nv__ew_extra *extra, bool donated) {
  nv__gpu_arg args[NV__EW_MAXOPS];
  nv_status s = nv__gpu_output(ctx, o, &args[0]);
  if (s != NV_OK) return s;
  if (o->size == 0) return NV_OK;
  nv__ew_params p;
  memset(&p, 0, sizeof p);
  p.op = op;
  if (extra) p.extra = *extra;
  return record(ctx, o, args, HRX_ACCESS_WRITE, in, nin, e, &p, donated);
}

/* The constants a primitive's kernels read. */
static void extra_of(const nv__node *node, nv__ew_extra *x) {
  memset(x, 0, sizeof *x);
  switch (node->prim) {
    case NV__PRIM_ROUND: {
      const nv__round_params *r = node->params;
      x->round.decimals = r->decimals;
      x->round.scale = r->scale;
      x->round.iscale = r->iscale;
      break;
    }
    case NV__PRIM_NAN_TO_NUM: {
      const nv__nan_to_num_params *q = node->params;
      x->nan_to_num.nan = q->nan;
      x->nan_to_num.posinf = q->posinf;
      x->nan_to_num.neginf = q->neginf;
      break;
    }
    case NV__PRIM_ISCLOSE:
    case NV__PRIM_ALLCLOSE:
    case NV__PRIM_ARRAY_EQUAL: {
      const nv__isclose_params *c = node->params;
      x->close.rtol = c->rtol;
      x->close.atol = c->atol;
      x->close.equal_nan = c->equal_nan;
      break;
    }
    default: break;
  }
}

/* ---- Kernel-table entries ---- */

/* Unary, binary (the inputs share one dtype, which indexes the table as on the CPU) and
 * isclose. */
static nv_status k_map(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  nv_dtype dt = in[0].meta->dtype;
  const nv__ew_entry *e = &table[node->prim][dt];
  if (!e->strided) return unsupported(node->prim, dt);
  nv__ew_extra x;
  extra_of(node, &x);
  return ew(ctx, &node->out[0], in, node->ninputs, e, node->prim, &x, donated >= 0);
}

/* gelu(x) and act_vjp(a, g): by the mode (nv__act_params) and the dtype, which the builders
 * give every input and the output. */
static nv_status k_act(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  int mode = ((const nv__act_params *)node->params)->mode;
  bool vjp = node->prim == NV__PRIM_ACT_VJP;
  nv_dtype dt = node->out[0].dtype;
  const nv__ew_entry *e = mode >= 0 && mode < NV__EW_ACT_MODES ? &act_table[vjp][mode][dt] : NULL;
  if (!e || !e->strided) return unsupported(node->prim, dt);
  return ew(ctx, &node->out[0], in, vjp ? 2 : 1, e, node->prim, NULL, donated >= 0);
}

/* where(cond, x, y): by the output dtype's element size. */
static nv_status k_where(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  const nv__ew_entry *e = &table[NV__PRIM_WHERE][node->out[0].dtype];
  return ew(ctx, &node->out[0], in, 3, e, NV__PRIM_WHERE, NULL, donated >= 0);
}

/* Two outputs from one pair of inputs: divmod (floor_divide, remainder) and the test primitive
 * (add, multiply). */
static nv_status pair(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int p0, int p1,
                      nv_dtype dt) {
  const nv__ew_entry *e0 = &table[p0][dt], *e1 = &table[p1][dt];
  if (!e0->strided) return unsupported(node->prim == NV__PRIM_DIVMOD ? p0 : node->prim, dt);
  if (!e1->strided) return unsupported(node->prim == NV__PRIM_DIVMOD ? p1 : node->prim, dt);
  nv_status s = ew(ctx, &node->out[0], in, 2, e0, p0, NULL, false);
  if (s != NV_OK) return s;
  return ew(ctx, &node->out[1], in, 2, e1, p1, NULL, false);
}

static nv_status k_divmod(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return pair(ctx, node, in, NV__PRIM_FLOOR_DIVIDE, NV__PRIM_REMAINDER, in[0].meta->dtype);
}

static nv_status k_add_multiply(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                int donated) {
  (void)donated;
  return pair(ctx, node, in, NV__PRIM_ADD, NV__PRIM_MULTIPLY, node->out[0].dtype);
}

/* allclose / array_equal: the output byte is set to 1, then every element of the broadcast
 * inputs is tested and any failure clears it. */
static nv_status k_all(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv_dtype dt = in[0].meta->dtype;
  const nv__ew_entry *e = &table[node->prim][dt];
  if (!e->strided) return unsupported(node->prim, dt);
  nv__gpu_arg args[3];
  nv_status s = nv__gpu_output(ctx, &node->out[0], &args[0]);
  if (s != NV_OK) return s;
  s = nv__gpu_fill(ctx, args[0].view, 1);
  if (s != NV_OK) return s;
  /* The broadcast index space, row-contiguous. */
  const nv__output *a = in[0].meta, *b = in[1].meta;
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim, oa = nd - a->ndim, ob = nd - b->ndim;
  int shape[NV__MAX_DIMS];
  int64_t size = 1;
  for (int i = 0; i < nd; i++) {
    int da = i < oa ? 1 : a->shape[i - oa], db = i < ob ? 1 : b->shape[i - ob];
    shape[i] = da == 1 ? db : da;
    size *= shape[i];
  }
  if (size == 0) return NV_OK;
  nv__output space;
  memset(&space, 0, sizeof space);
  space.dtype = NV_DTYPE_BOOL;
  space.ndim = nd;
  space.size = size;
  space.shape = shape;
  space.strides = NULL; /* fold() derives the row-contiguous strides from the shape */
  nv__ew_params p;
  memset(&p, 0, sizeof p);
  p.op = node->prim;
  extra_of(node, &p.extra);
  return record(ctx, &space, args, HRX_ACCESS_READ_WRITE, in, 2, e, &p, false);
}

/* ---- Views ---- */

nv_status nv__gpu_share_inputs(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  (void)ctx;
  (void)donated;
  for (int i = 0; i < node->noutputs; i++) {
    node->out[i].buf = nv__buffer_retain(in[i].buf);
    node->out[i].offset = in[i].offset;
  }
  return NV_OK;
}

/* real / imag: float32 views of a complex64 buffer (strides were doubled by the builder). */
static nv_status k_complex_part(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                int donated) {
  (void)ctx;
  (void)donated;
  nv__output *out = &node->out[0];
  out->buf = nv__buffer_retain(in[0].buf);
  out->offset = in[0].offset * 2 + (node->prim == NV__PRIM_IMAG);
  return NV_OK;
}

/* view: the input's bytes read as the output dtype, as the CPU's kernel: a row-major copy when
 * the builder found the layout unfit, a shared buffer when the element offset is whole in the
 * new dtype, else a copy of the bytes the input spans (its device view) keeping its layout. */
static nv_status k_view_dtype(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *im = in[0].meta;
  int64_t ib = (int64_t)nv_dtype_size(im->dtype), ob = (int64_t)nv_dtype_size(out->dtype);
  nv__gpu_arg oarg, iarg;
  if (((const nv__view_dtype_params *)node->params)->copy) {
    nv_status s = nv__gpu_output(ctx, out, &oarg);
    if (s != NV_OK || out->size == 0) return s;
    return nv__gpu_copy_contiguous(ctx, &in[0], oarg);
  }
  if (im->size == 0 || (in[0].offset * ib) % ob == 0) {
    out->buf = nv__buffer_retain(in[0].buf);
    out->offset = im->size == 0 ? 0 : in[0].offset * ib / ob;
    return NV_OK;
  }
  nv_status s = nv__gpu_input(ctx, &in[0], &iarg);
  if (s != NV_OK) return s;
  /* A buffer of the span's bytes: nv__gpu_output sizes its allocation from the output's
   * metadata, so the metadata reads as the span (bytes, 1-D) while it allocates. */
  size_t span = iarg.view.length;
  if (span > INT32_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED, "view: a %zu-byte span is too large on the GPU",
                         span);
  nv__output saved = *out;
  int span_bytes = (int)span;
  int64_t one = 1;
  out->dtype = NV_DTYPE_UINT8;
  out->ndim = 1;
  out->shape = &span_bytes;
  out->strides = &one;
  out->size = span_bytes;
  out->flags = NV__FLAG_ROW;
  s = nv__gpu_output(ctx, out, &oarg);
  nv__buffer *buf = out->buf;
  *out = saved;
  if (s != NV_OK) return s;
  out->buf = buf;
  out->offset = iarg.offset * ib / ob;
  return nv__gpu_copy(ctx, hrx_view_make(oarg.view.buffer, oarg.view.offset, span), iarg.view);
}

/* ---- number_of_elements, creation ---- */

/* Writes the first `bytes` bytes of `bits` into output `o` (a scalar). */
static nv_status store_bytes(nv__gpu_ctx *ctx, nv__output *o, const void *bits, size_t bytes) {
  nv__gpu_arg arg;
  nv_status s = nv__gpu_output(ctx, o, &arg);
  if (s != NV_OK) return s;
  nv__ew_params p;
  memset(&p, 0, sizeof p);
  p.n = (int64_t)bytes;
  p.off[0] = arg.offset * (int64_t)nv_dtype_size(o->dtype);
  memcpy(&p.extra.tri.one, bits, bytes > 8 ? 8 : bytes);
  hrx_access w = HRX_ACCESS_WRITE;
  return launch(ctx, nv__ew_bytes_kernel(), 1, 32, &arg, &w, 1, &p, false);
}

static nv_status k_count(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  char v[16] = {0};
  nv__count_value(node, in, v);
  return store_bytes(ctx, &node->out[0], v, nv_dtype_size(node->out[0].dtype));
}

static int log2_size(size_t s) { return s == 1 ? 0 : s == 2 ? 1 : s == 4 ? 2 : 3; }

/* tri: ones where column - row <= k (the bits of 1.0 converted to the dtype), zeros elsewhere. */
static nv_status k_tri(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg arg;
  nv_status s = nv__gpu_output(ctx, out, &arg);
  if (s != NV_OK || out->size == 0) return s;
  nv__ew_params p;
  memset(&p, 0, sizeof p);
  double one = 1.0;
  char v[16] = {0};
  nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&one, 1, out->dtype, v, 1, 1);
  memcpy(&p.extra.tri.one, v, 8);
  p.extra.tri.k = ((const nv__tri_params *)node->params)->k;
  p.extra.tri.cols = out->shape[1];
  p.n = out->size;
  p.off[0] = arg.offset;
  uint32_t blocks;
  s = grid_for(ctx, p.n, 4, &blocks);
  if (s != NV_OK) return s;
  hrx_access w = HRX_ACCESS_WRITE;
  return launch(ctx, nv__ew_tri_kernel(log2_size(nv_dtype_size(out->dtype))), blocks,
                NV__EW_BLOCK, &arg, &w, 1, &p, false);
}

static nv_status k_window(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg arg;
  nv_status s = nv__gpu_output(ctx, out, &arg);
  if (s != NV_OK || out->size == 0) return s;
  nv__ew_params p;
  memset(&p, 0, sizeof p);
  p.n = out->size;
  p.op = node->prim;
  p.off[0] = arg.offset;
  uint32_t blocks;
  s = grid_for(ctx, p.n, 4, &blocks);
  if (s != NV_OK) return s;
  hrx_access w = HRX_ACCESS_WRITE;
  return launch(ctx, nv__ew_window_kernel(), blocks, NV__EW_BLOCK, &arg, &w, 1, &p, false);
}

/* ---- Registration ---- */

void nv__gpu_register_elementwise(nv__gpu_kernel_fn *k) {
  nv__ew_fill_unary(table);
  nv__ew_fill_binary(table);
  nv__ew_fill_complex(table);
  nv__ew_fill_misc(table);
  nv__ew_fill_hot_unary(table);
  nv__ew_fill_hot_binary(table);
  nv__ew_fill_act(act_table);
  for (int p = NV__PRIM_NEGATIVE; p <= NV__PRIM_MINIMUM; p++) k[p] = k_map;
  for (int p = NV__PRIM_SIGN; p <= NV__PRIM_BITWISE_INVERT; p++) k[p] = k_map;
  for (int p = NV__PRIM_FLOOR_DIVIDE; p <= NV__PRIM_RIGHT_SHIFT; p++) k[p] = k_map;
  k[NV__PRIM_ISCLOSE] = k_map;
  k[NV__PRIM_GELU] = k_act;
  k[NV__PRIM_ACT_VJP] = k_act;
  k[NV__PRIM_WHERE] = k_where;
  k[NV__PRIM_DIVMOD] = k_divmod;
  k[NV__PRIM_TEST_ADD_MULTIPLY] = k_add_multiply;
  k[NV__PRIM_ALLCLOSE] = k_all;
  k[NV__PRIM_ARRAY_EQUAL] = k_all;
  k[NV__PRIM_REAL] = k_complex_part;
  k[NV__PRIM_IMAG] = k_complex_part;
  k[NV__PRIM_VIEW_DTYPE] = k_view_dtype;
  k[NV__PRIM_STOP_GRADIENT] = nv__gpu_share_inputs;
  k[NV__PRIM_DEPENDS] = nv__gpu_share_inputs;
  k[NV__PRIM_NUMBER_OF_ELEMENTS] = k_count;
  k[NV__PRIM_TRI] = k_tri;
  k[NV__PRIM_HANNING] = k_window;
  k[NV__PRIM_HAMMING] = k_window;
  k[NV__PRIM_BARTLETT] = k_window;
  k[NV__PRIM_BLACKMAN] = k_window;
}
