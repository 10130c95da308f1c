/* norm_rope on the GPU: the CUDA kernel-table entries of FAST_NORM_ROPE and
 * FAST_NORM_ROPE_CACHE (host code, C11). The output gets its device memory (with a cache: the
 * cache's buffer when donated, written in place, else a copy of the cache), the inputs their
 * row-contiguous views (the builder made them so), and one launch of fast_norm_rope.cu's
 * kernel is recorded: the vector kernel for float16/bfloat16/float32 rows of 64, 128 or 256
 * features rotated whole, the any-row kernel otherwise. */
#include <math.h>

#include "cuda/fast_state_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_state.h"

static nv_status k_norm_rope(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             int donated) {
  const nv__fast_norm_rope_params *prm = node->params;
  const bool cache = node->prim == NV__PRIM_FAST_NORM_ROPE_CACHE;
  nv__output *o = &node->out[0];
  nv_dtype dt = o->dtype;
  const int ix = cache ? 1 : 0, at = cache ? 4 : 2; /* x, then the weight's input */
  const nv__output *xm = in[ix].meta;
  const int nd = xm->ndim;
  nv__gpu_norm_rope_params p = {.ntok = xm->shape[0],
                                .m = 1,
                                .d = xm->shape[nd - 1],
                                .nslots = cache ? o->shape[0] : 0,
                                .eps = prm->eps,
                                .scale = prm->scale,
                                .log2_base = prm->has_freqs ? 0 : log2(prm->base),
                                .dims = prm->dims,
                                .traditional = prm->traditional,
                                .has_w = prm->has_weight,
                                .has_freqs = prm->has_freqs,
                                .cache = cache,
                                .cpos64 = cache && in[3].meta->dtype == NV_DTYPE_INT64};
  for (int i = 1; i < nd - 1; i++) p.m *= xm->shape[i];
  int v = 0;
  if (dt != NV_DTYPE_FLOAT64 && prm->dims == p.d && p.d % 32 == 0 &&
      (p.d == 64 || p.d == 128 || p.d == 256))
    v = (int)(p.d / 32);
  const void *func = nv__gpu_kernel_norm_rope((int)dt, v);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "norm_rope: dtype %s is not supported",
                         nv_dtype_name(dt));
  /* a: the output, x, positions, cache positions, weight, freqs (x's view where absent) */
  nv__gpu_arg a[6];
  nv_status st = nv__gpu_output(ctx, o, &a[0]);
  /* The cache: in place when donated (input 0), else copied into the output first. */
  if (st == NV_OK && cache && o->size > 0 && donated != 0)
    st = nv__gpu_copy_contiguous(ctx, &in[0], a[0]);
  if (st != NV_OK || xm->size == 0) return st;
  if ((st = nv__gpu_input_contiguous(ctx, &in[ix], &a[1])) != NV_OK ||
      (st = nv__gpu_input_contiguous(ctx, &in[ix + 1], &a[2])) != NV_OK)
    return st;
  a[3] = a[4] = a[5] = a[1];
  if (cache && (st = nv__gpu_input_contiguous(ctx, &in[3], &a[3])) != NV_OK) return st;
  if (prm->has_weight && (st = nv__gpu_input_contiguous(ctx, &in[at], &a[4])) != NV_OK) return st;
  if (prm->has_freqs &&
      (st = nv__gpu_input_contiguous(ctx, &in[at + (prm->has_weight ? 1 : 0)], &a[5])) != NV_OK)
    return st;
  for (int i = 0; i < 6; i++) p.off[i] = a[i].offset;
  /* Token groups of at least a block's eight rows (warps). */
  p.tpb = p.m >= NV__GPU_NR_THREADS / 32 ? 1 : (NV__GPU_NR_THREADS / 32 + p.m - 1) / p.m;
  p.items = (p.ntok + p.tpb - 1) / p.tpb;
  if (cache && (st = nv__gpu_index_check(ctx, "norm_rope", &p.bad)) != NV_OK) return st;
  hrx_view views[6];
  hrx_access acc[6] = {cache ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_WRITE, HRX_ACCESS_READ,
                       HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ};
  for (int i = 0; i < 6; i++) views[i] = a[i].view;
  return nv__gpu_dispatch_1d(ctx, "norm_rope", func, nv__gpu_blocks(p.items, 1, 1 << 20),
                             NV__GPU_NR_THREADS, views, acc, 6, &p, sizeof p);
}

void nv__gpu_register_fast_norm_rope(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_NORM_ROPE] = k_norm_rope;
  k[NV__PRIM_FAST_NORM_ROPE_CACHE] = k_norm_rope;
}
