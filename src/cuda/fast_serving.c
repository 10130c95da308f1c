/* The serving kernels on the GPU: the CUDA kernel-table entries of sorted_offsets,
 * causal_softmax and paged_write (host code, C11). Each gets the output's device memory (for
 * a donated causal_softmax or paged_write: its input's buffer, written in place; paged_write
 * otherwise copies the pool in first), the inputs row-contiguous (the builder made them so)
 * and records one launch of fast_serving.cu's kernels. */
#include "cuda/fast_serving_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_serving.h"

static int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

static nv_status record(nv__gpu_ctx *ctx, const void *func, const nv__gpu_arg *a, uint32_t grid,
                        uint32_t bx, uint32_t by, const void *params, size_t size,
                        bool aliasing) {
  hrx_view views[2] = {a[0].view, a[1].view};
  hrx_access acc[2] = {HRX_ACCESS_WRITE, HRX_ACCESS_READ};
  nv__gpu_launch l = {.func = func,
                      .grid = {grid, 1, 1},
                      .block = {bx, by, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 2,
                      .params = params,
                      .params_size = size,
                      .aliasing = aliasing};
  return nv__gpu_dispatch(ctx, &l);
}

static nv_status k_sorted_offsets(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                  int donated) {
  (void)donated; /* sorted_offsets donates nothing (D_NONE) */
  nv__output *o = &node->out[0];
  nv_dtype idt = in[0].meta->dtype;
  const void *func = nv__gpu_kernel_sorted_offsets((int)idt);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "sorted_offsets: dtype %s is not supported",
                         nv_dtype_name(idt));
  nv__gpu_arg a[2];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  if (st == NV_OK) st = nv__gpu_input_contiguous(ctx, &in[0], &a[1]);
  if (st != NV_OK) return st;
  nv__gpu_offsets_params p = {.n = in[0].meta->size,
                              .nout = o->size,
                              .off = {a[0].offset, a[1].offset},
                              .wide = o->dtype == NV_DTYPE_INT64};
  return record(ctx, func, a, nv__gpu_blocks(p.nout, 256, 4096), 256, 1, &p, sizeof p, false);
}

static nv_status k_causal_softmax(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                  int donated) {
  const nv__fast_causal_params *prm = node->params;
  nv__output *o = &node->out[0];
  nv_dtype dt = o->dtype;
  const void *func = nv__gpu_kernel_causal_softmax((int)dt);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "causal_softmax: dtype %s is not supported",
                         nv_dtype_name(dt));
  nv__gpu_arg a[2];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  if (st != NV_OK || o->size == 0) return st;
  if ((st = nv__gpu_input_contiguous(ctx, &in[0], &a[1])) != NV_OK) return st;
  nv__gpu_causal_params p = {.c = o->shape[o->ndim - 1],
                             .rows = prm->rows,
                             .off = {a[0].offset, a[1].offset}};
  p.nrows = o->size / p.c;
  /* Threads per row: about eight elements each, a power of two from a warp to 1024; rows
   * fill the rest of a 256-thread block. */
  int64_t tpr = pow2_at_least((p.c + 7) / 8);
  if (tpr < 32) tpr = 32;
  if (tpr > 1024) tpr = 1024;
  int64_t rpb = tpr >= 256 ? 1 : 256 / tpr;
  uint32_t grid = nv__gpu_blocks(p.nrows, (uint32_t)rpb, (int64_t)1 << 20);
  return record(ctx, func, a, grid, (uint32_t)tpr, (uint32_t)rpb, &p, sizeof p, donated >= 0);
}

static nv_status k_paged_write(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  nv__output *o = &node->out[0];
  const void *func = nv__gpu_kernel_paged_write((int)nv_dtype_size(o->dtype));
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "paged_write: dtype %s is not supported",
                         nv_dtype_name(o->dtype));
  nv__gpu_arg a[3];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  /* The pool: in place when donated (input 0), else copied into the output first. */
  if (st == NV_OK && o->size > 0 && donated != 0) st = nv__gpu_copy_contiguous(ctx, &in[0], a[0]);
  if (st == NV_OK) st = nv__gpu_input_contiguous(ctx, &in[1], &a[1]);
  if (st == NV_OK) st = nv__gpu_input_contiguous(ctx, &in[2], &a[2]);
  if (st != NV_OK) return st;
  int64_t tokens = in[2].meta->size;
  if (tokens == 0) return NV_OK;
  nv__gpu_paged_params p = {.row = in[1].meta->size / tokens,
                            .nslots = (int64_t)o->shape[0] * o->shape[1],
                            .off = {a[0].offset, a[1].offset, a[2].offset},
                            .slots64 = in[2].meta->dtype == NV_DTYPE_INT64};
  p.items = tokens * (p.row > 0 ? p.row : 1);
  if ((st = nv__gpu_index_check(ctx, "paged_write", &p.bad)) != NV_OK) return st;
  hrx_view views[3] = {a[0].view, a[1].view, a[2].view};
  /* Rows of no elements (a 0 in the feature shape): the kernel only checks the slots, and the
   * pool's and the values' empty placeholders (which may be one view) are only read. */
  hrx_access acc[3] = {p.row > 0 ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_READ, HRX_ACCESS_READ,
                       HRX_ACCESS_READ};
  return nv__gpu_dispatch_1d(ctx, "paged_write", func, nv__gpu_blocks(p.items, 256, 1 << 20),
                             256, views, acc, 3, &p, sizeof p);
}

static nv_status k_conv_slots(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  const nv__fast_conv_params *prm = node->params;
  nv__output *po = &node->out[0], *yo = &node->out[1];
  const void *func = nv__gpu_kernel_conv_slots((int)yo->dtype);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "conv_slots: dtype %s is not supported",
                         nv_dtype_name(yo->dtype));
  /* a: the pool, y, x, weight, slots, bias (x's view when absent: never read) */
  nv__gpu_arg a[6];
  nv_status st = nv__gpu_output(ctx, po, &a[0]);
  /* The pool: in place when donated (input 2), else copied into output 0 first. */
  if (st == NV_OK && po->size > 0 && donated != 2) st = nv__gpu_copy_contiguous(ctx, &in[2], a[0]);
  if (st == NV_OK) st = nv__gpu_output(ctx, yo, &a[1]);
  if (st != NV_OK || yo->size == 0) return st;
  if ((st = nv__gpu_input_contiguous(ctx, &in[0], &a[2])) != NV_OK ||
      (st = nv__gpu_input_contiguous(ctx, &in[1], &a[3])) != NV_OK ||
      (st = nv__gpu_input_contiguous(ctx, &in[3], &a[4])) != NV_OK)
    return st;
  a[5] = a[2];
  if (prm->has_bias && (st = nv__gpu_input_contiguous(ctx, &in[4], &a[5])) != NV_OK) return st;
  nv__gpu_conv_params p = {.items = yo->size,
                           .c = yo->shape[1],
                           .k = in[1].meta->shape[1],
                           .nslots = po->shape[0],
                           .slots64 = in[3].meta->dtype == NV_DTYPE_INT64,
                           .has_bias = prm->has_bias,
                           .silu = prm->silu};
  for (int i = 0; i < 6; i++) p.off[i] = a[i].offset;
  if ((st = nv__gpu_index_check(ctx, "conv_slots", &p.bad)) != NV_OK) return st;
  hrx_view views[6];
  hrx_access acc[6] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_WRITE, HRX_ACCESS_READ,
                       HRX_ACCESS_READ,       HRX_ACCESS_READ,  HRX_ACCESS_READ};
  for (int i = 0; i < 6; i++) views[i] = a[i].view;
  return nv__gpu_dispatch_1d(ctx, "conv_slots", func, nv__gpu_blocks(p.items, 256, 1 << 20), 256,
                             views, acc, 6, &p, sizeof p);
}

void nv__gpu_register_fast_serving(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_CONV_SLOTS] = k_conv_slots;
  k[NV__PRIM_FAST_PAGED_WRITE] = k_paged_write;
  k[NV__PRIM_FAST_SORTED_OFFSETS] = k_sorted_offsets;
  k[NV__PRIM_FAST_CAUSAL_SOFTMAX] = k_causal_softmax;
}
