/* The fast family on the GPU: the CUDA kernel-table entries of rms_norm, layer_norm and rope.
 * Host code (C11): it gets the output's device memory and the inputs row-contiguous (the
 * builder already made them so; a strided one would be copied to scratch), picks the launch
 * shape from the row length (the norms: fast_norm.cu's nv__gpu_norm_plan_of) and records one
 * launch of fast_norm.cu's kernels. */
#include <math.h>

#include "cuda/fast_norm_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_params.h"

/* The smallest power of two >= v (v >= 1). */
static int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

static nv_status record(nv__gpu_ctx *ctx, const void *func, const nv__gpu_arg *a, uint32_t grid,
                        uint32_t bx, uint32_t by, const void *params, size_t size) {
  hrx_view views[4];
  hrx_access acc[4];
  for (int i = 0; i < 4; i++) {
    views[i] = a[i].view;
    acc[i] = i == 0 ? HRX_ACCESS_WRITE : HRX_ACCESS_READ;
  }
  nv__gpu_launch l = {.func = func,
                      .grid = {grid, 1, 1},
                      .block = {bx, by, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 4,
                      .params = params,
                      .params_size = size,
                      .aliasing = false};
  return nv__gpu_dispatch(ctx, &l);
}

/* Input 0 into a[1], then the optional inputs that are present, in order, into the slots
 * a[2], a[3] whose flags are set; an absent one reads input 0's view (never dereferenced). */
static nv_status inputs(nv__gpu_ctx *ctx, const nv__operand *in, bool has2, bool has3,
                        nv__gpu_arg *a) {
  nv_status st = nv__gpu_input_contiguous(ctx, &in[0], &a[1]);
  a[2] = a[3] = a[1];
  int k = 1;
  if (st == NV_OK && has2) st = nv__gpu_input_contiguous(ctx, &in[k++], &a[2]);
  if (st == NV_OK && has3) st = nv__gpu_input_contiguous(ctx, &in[k++], &a[3]);
  return st;
}

static nv_status k_norm(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__fast_norm_params *prm = node->params;
  nv__output *o = &node->out[0];
  nv_dtype dt = o->dtype;
  const char *op = nv__prims[node->prim].name;
  if (dt != NV_DTYPE_FLOAT16 && dt != NV_DTYPE_BFLOAT16 && dt != NV_DTYPE_FLOAT32 &&
      dt != NV_DTYPE_FLOAT64)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported", op,
                         nv_dtype_name(dt));
  nv__gpu_arg a[4];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  if (st != NV_OK || o->size == 0) return st;
  if ((st = inputs(ctx, in, prm->has_weight, prm->has_bias, a)) != NV_OK) return st;
  nv__gpu_norm_params p = {.d = o->shape[o->ndim - 1],
                           .eps = prm->eps,
                           .layer = node->prim == NV__PRIM_FAST_LAYER_NORM,
                           .has_w = prm->has_weight,
                           .has_b = prm->has_bias};
  p.rows = o->size / p.d;
  /* The views' element offsets decide whether the row-in-registers kernels can take the rows
   * (the kernel checks the addresses as well). */
  int64_t v = 16 / (int64_t)nv_dtype_size(dt);
  bool aligned = true;
  for (int i = 0; i < 4; i++) {
    p.off[i] = a[i].offset;
    aligned &= a[i].offset % v == 0;
  }
  nv__gpu_norm_plan plan;
  nv__gpu_norm_plan_of((int)dt, p.d, p.rows, aligned, &plan);
  const void *func = nv__gpu_kernel_norm((int)dt, &plan);
  if (!func)
    return nv__set_error(NV_ERR_BACKEND, "%s: no kernel for the launch plan (%d threads a row, "
                         "k %d, %s)", op, plan.tpr, plan.k, plan.fixed ? "fixed" : "generic");
  return record(ctx, func, a, (uint32_t)plan.grid, (uint32_t)plan.tpr, (uint32_t)plan.rpb, &p,
                sizeof p);
}

static nv_status k_norm_vjp(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                            int donated) {
  (void)donated;
  const nv__fast_norm_params *prm = node->params;
  nv__output *o = &node->out[0];
  nv_dtype dt = o->dtype;
  const void *func = nv__gpu_kernel_norm_vjp((int)dt);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "norm_vjp: dtype %s is not supported",
                         nv_dtype_name(dt));
  nv__gpu_arg a[4];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  if (st != NV_OK || o->size == 0) return st;
  /* x, the weight when given, the cotangent (always present) */
  if ((st = inputs(ctx, in, prm->has_weight, true, a)) != NV_OK) return st;
  nv__gpu_norm_params p = {.d = o->shape[o->ndim - 1],
                           .eps = prm->eps,
                           .layer = prm->layer,
                           .has_w = prm->has_weight};
  p.rows = o->size / p.d;
  /* Threads per row: about eight elements each, a power of two from a warp to 1024. */
  int64_t tpr = pow2_at_least((p.d + 7) / 8);
  if (tpr < 32) tpr = 32;
  if (tpr > 1024) tpr = 1024;
  int64_t rpb = tpr >= 256 ? 1 : 256 / tpr;
  int64_t grid = (p.rows + rpb - 1) / rpb;
  if (grid > INT32_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED, "norm_vjp: %lld rows are more than one launch covers",
                         (long long)p.rows);
  for (int i = 0; i < 4; i++) p.off[i] = a[i].offset;
  return record(ctx, func, a, (uint32_t)grid, (uint32_t)tpr, (uint32_t)rpb, &p, sizeof p);
}

static nv_status k_rope(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__fast_rope_params *prm = node->params;
  nv__output *o = &node->out[0];
  nv_dtype dt = o->dtype;
  const void *func = nv__gpu_kernel_rope((int)dt);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "rope: dtype %s is not supported", nv_dtype_name(dt));
  nv__gpu_arg a[4];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  if (st != NV_OK || o->size == 0) return st;
  /* x, the offsets (always present), freqs */
  if ((st = inputs(ctx, in, true, prm->has_freqs, a)) != NV_OK) return st;
  int nd = o->ndim;
  int64_t heads = 1;
  for (int i = 1; i < nd - 2; i++) heads *= o->shape[i];
  nv__gpu_rope_params p = {.m = heads,
                           .t = o->shape[nd - 2],
                           .d = o->shape[nd - 1],
                           .noff = in[1].meta->size,
                           .scale = prm->scale,
                           .log2_base = prm->has_freqs ? 0 : log2(prm->base),
                           .dims = prm->dims,
                           .traditional = prm->traditional,
                           .inverse = prm->inverse,
                           .has_freqs = prm->has_freqs};
  for (int i = 0; i < 4; i++) p.off[i] = a[i].offset;
  /* A thread per pair or copied feature; work items fill the rest of a 256-thread block. The
   * heads sharing a position split into as few chunks as still give about 2^18 threads (each
   * chunk's angles are computed once). */
  int64_t slots = prm->dims / 2 + (p.d - prm->dims);
  int64_t bx = pow2_at_least(slots);
  if (bx < 32) bx = 32;
  if (bx > NV__GPU_ROPE_THREADS) bx = NV__GPU_ROPE_THREADS;
  int64_t by = NV__GPU_ROPE_THREADS / bx;
  int64_t positions = (int64_t)o->shape[0] * p.t;
  int64_t want = ((int64_t)1 << 18) / bx;
  int64_t chunks = (want + positions - 1) / positions;
  if (chunks > heads) chunks = heads;
  if (chunks < 1) chunks = 1;
  p.hpt = (heads + chunks - 1) / chunks;
  p.nchunks = (heads + p.hpt - 1) / p.hpt;
  p.items = positions * p.nchunks;
  uint32_t grid = nv__gpu_blocks(p.items, (uint32_t)by, (int64_t)1 << 20);
  return record(ctx, func, a, grid, (uint32_t)bx, (uint32_t)by, &p, sizeof p);
}

void nv__gpu_register_fast(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_RMS_NORM] = k_norm;
  k[NV__PRIM_FAST_LAYER_NORM] = k_norm;
  k[NV__PRIM_FAST_ROPE] = k_rope;
  k[NV__PRIM_FAST_NORM_VJP] = k_norm_vjp;
}
