/* The convolution primitive on the GPU. Host code (C11): cuDNN's forward convolution
 * (conv_cudnn.c) where it is loaded and takes the node (float16/bfloat16/float32, symmetric
 * padding, no input dilation); else the direct implicit-GEMM kernel of conv.cu, recorded with
 * nv__gpu_dispatch, which takes every node (any layout, dtype and parameters): nothing falls
 * back to the CPU. An empty contraction (no taps or no input channels) is a zero fill. */
#include "cuda/conv_cudnn.h"
#include "cuda/conv_kernels.h"
#include "cuda/gpu.h"
#include "ops/conv_params.h"

/* Grid caps: the kernel walks row tiles (x) and channel tiles × groups (y) with stride loops. */
#define GRID_X_CAP ((int64_t)1 << 20)
#define GRID_Y_CAP 65535

static nv_status direct(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                        nv__gpu_arg o) {
  const nv__conv_params *cp = node->params;
  const nv__output *out = &node->out[0], *ox = in[0].meta, *ow = in[1].meta;
  const void *func = nv__gpu_kernel_conv((int)out->dtype);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "conv_general: dtype %s is not supported",
                         nv_dtype_name(out->dtype));
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
  if (gx > GRID_X_CAP) gx = GRID_X_CAP;
  int64_t gy = p.tiles_y > GRID_Y_CAP ? GRID_Y_CAP : p.tiles_y;
  hrx_view views[3] = {x.view, w.view, o.view};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  nv__gpu_launch l = {.func = func,
                      .grid = {(uint32_t)gx, (uint32_t)gy, 1},
                      .block = {NV__GPU_CONV_THREADS, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 3,
                      .params = &p,
                      .params_size = sizeof p};
  return nv__gpu_dispatch(ctx, &l);
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
