/* The convolution primitive on the GPU. Host code (C11): cuDNN (conv_cudnn.c: its forward
 * convolution, or its backward data for input-dilated nodes such as transposed convolutions)
 * where it is loaded and takes the node (float16/bfloat16/float32); else the direct implicit-GEMM kernel of conv.cu, recorded with
 * nv__gpu_dispatch, which takes every node (any layout, dtype and parameters; split-K with a
 * second summing kernel when its tiles would not fill the GPU): nothing falls back to the CPU. An empty contraction (no taps or no input channels) is a zero fill. */
#include "cuda/conv_cudnn.h"
#include "cuda/conv_kernels.h"
#include "cuda/gpu.h"
#include "ops/conv_params.h"

/* Grid caps: the kernel walks row tiles (x) and channel tiles × groups (y) with stride loops. */
#define GRID_X_CAP ((int64_t)1 << 20)
#define GRID_Y_CAP 65535

/* Split-K: tiles below this count leave the GPU idle (132 SMs, two blocks each), so a long
 * contraction is cut into slices of at least NV__CONV_SPLIT_MIN_K, at most NV__CONV_SPLITS of
 * them, their partial sums in at most NV__CONV_SPLIT_BYTES of scratch. */
#define NV__CONV_SPLIT_TILES 264
#define NV__CONV_SPLIT_MIN_K 512
#define NV__CONV_SPLITS 64
#define NV__CONV_SPLIT_BYTES ((int64_t)256 << 20)

/* The number of contraction slices for p (1: none), and p->kchunk. */
static void plan_splits(nv__gpu_conv_params *p, int64_t tiles, size_t acc_size) {
  int64_t splits = 1;
  if (tiles < NV__CONV_SPLIT_TILES) {
    splits = (NV__CONV_SPLIT_TILES + tiles - 1) / tiles;
    if (splits > p->kc / NV__CONV_SPLIT_MIN_K) splits = p->kc / NV__CONV_SPLIT_MIN_K;
    if (splits > NV__CONV_SPLITS) splits = NV__CONV_SPLITS;
    int64_t per = p->rows * p->cout * (int64_t)acc_size;
    if (splits * per > NV__CONV_SPLIT_BYTES) splits = NV__CONV_SPLIT_BYTES / per;
    if (splits < 1) splits = 1;
  }
  int64_t chunk = (p->kc + splits - 1) / splits;
  chunk = (chunk + NV__GPU_CONV_TK - 1) / NV__GPU_CONV_TK * NV__GPU_CONV_TK;
  p->kchunk = chunk;
  p->splits = (int32_t)((p->kc + chunk - 1) / chunk);
}

static nv_status direct(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                        nv__gpu_arg o) {
  const nv__conv_params *cp = node->params;
  const nv__output *out = &node->out[0], *ox = in[0].meta, *ow = in[1].meta;
  nv_dtype dt = out->dtype;
  if (!nv__gpu_kernel_conv((int)dt, 0))
    return nv__set_error(NV_ERR_UNSUPPORTED, "conv_general: dtype %s is not supported",
                         nv_dtype_name(dt));
  nv__gpu_arg x, w;
  nv_status st = nv__gpu_input(ctx, &in[0], &x);
  if (st == NV_OK) st = nv__gpu_input(ctx, &in[1], &w);
  if (st != NV_OK) return st;
  int nsp = cp->nsp;
  nv__gpu_conv_params p = {.nsp = nsp, .groups = cp->groups, .flip = cp->flip};
  p.cout = out->shape[nsp + 1];
  p.cout_g = p.cout / cp->groups;
  p.cin_g = ow->shape[nsp + 1];
  p.rows = out->shape[0];
  int64_t taps = 1;
  for (int a = 0; a < NV__CONV_MAX_SPATIAL; a++) {
    bool used = a < nsp;
    p.out_sp[a] = used ? out->shape[a + 1] : 1;
    p.k_sp[a] = used ? ow->shape[a + 1] : 1;
    p.stride[a] = used ? cp->stride[a] : 1;
    p.kdil[a] = used ? cp->kdil[a] : 1;
    p.idil[a] = used ? cp->idil[a] : 1;
    p.lo[a] = used ? cp->lo[a] : 0;
    p.ilen[a] = used ? nv__conv_dilated(ox->shape[a + 1], cp->idil[a]) : 1;
    p.rows *= p.out_sp[a];
    taps *= p.k_sp[a];
  }
  p.kc = taps * p.cin_g;
  p.co_tiles = (p.cout_g + NV__GPU_CONV_TN - 1) / NV__GPU_CONV_TN;
  p.tiles_y = p.co_tiles * cp->groups;
  p.xoff = x.offset;
  p.woff = w.offset;
  for (int i = 0; i < nsp + 2; i++) {
    p.xst[i] = ox->strides[i];
    p.wst[i] = ow->strides[i];
  }
  int64_t gx = (p.rows + NV__GPU_CONV_TM - 1) / NV__GPU_CONV_TM;
  int64_t gy = p.tiles_y > GRID_Y_CAP ? GRID_Y_CAP : p.tiles_y;
  size_t acc_size = dt == NV_DTYPE_FLOAT64 ? sizeof(double) : sizeof(float);
  plan_splits(&p, gx * p.tiles_y, acc_size);
  if (gx > GRID_X_CAP) gx = GRID_X_CAP;
  hrx_view part = o.view;
  if (p.splits > 1) {
    st = nv__gpu_scratch(ctx, (size_t)(p.splits * p.rows * p.cout) * acc_size, &part);
    if (st != NV_OK) return st;
  }
  hrx_view views[3] = {x.view, w.view, part};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  nv__gpu_launch l = {.func = nv__gpu_kernel_conv((int)dt, p.splits > 1),
                      .grid = {(uint32_t)gx, (uint32_t)gy, (uint32_t)p.splits},
                      .block = {NV__GPU_CONV_THREADS, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 3,
                      .params = &p,
                      .params_size = sizeof p};
  st = nv__gpu_dispatch(ctx, &l);
  if (st != NV_OK || p.splits == 1) return st;
  /* The partial sums added into the output. */
  hrx_view sv[2] = {part, o.view};
  hrx_access sa[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  uint32_t blocks = nv__gpu_blocks(p.rows * p.cout, NV__GPU_CONV_THREADS, GRID_X_CAP);
  return nv__gpu_dispatch_1d(ctx, "conv_general", nv__gpu_kernel_conv_sum((int)dt), blocks,
                             NV__GPU_CONV_THREADS, sv, sa, 2, &p, sizeof p);
}

static nv_status k_conv(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  const nv__output *ow = in[1].meta;
  int64_t kc = ow->shape[ow->ndim - 1];
  for (int a = 1; a < ow->ndim - 1; a++) kc *= ow->shape[a];
  if (kc == 0) return nv__gpu_fill(ctx, o.view, 0);
  st = nv__gpu_conv_cudnn(ctx, node, in, o);
  return st == NV__GPU_DECLINED ? direct(ctx, node, in, o) : st;
}

void nv__gpu_register_conv(nv__gpu_kernel_fn *k) { k[NV__PRIM_CONV_GENERAL] = k_conv; }
