/* gated_delta_slots on the GPU: the CUDA kernel-table entry of FAST_GATED_DELTA (host code,
 * C11). The pool gets output 0's device memory (the pool's buffer when donated, written in
 * place, else a copy of the pool), o output 1's, the inputs their row-contiguous views (the
 * builder made them so), and one launch of fast_delta.cu's kernels is recorded: the register
 * kernel for Dk up to 1024 and states of fewer than 2^31 elements (the threads a state column:
 * the fewest powers of two that hold Dk in 32 rows each), else the wide kernel with
 * compute-type scratch for the states. */
#include "cuda/fast_state_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_state.h"

static nv_status k_gated_delta(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  const nv__fast_delta_params *prm = node->params;
  nv__output *po = &node->out[0], *oo = &node->out[1];
  const nv__output *qm = in[0].meta;
  nv__gpu_delta_params p = {.n = qm->shape[0],
                            .t = qm->shape[1],
                            .hk = qm->shape[2],
                            .hv = oo->shape[2],
                            .dk = qm->shape[3],
                            .dv = oo->shape[3],
                            .nslots = po->shape[0],
                            .lanes = 1,
                            .scale = prm->scale,
                            .slots64 = in[6].meta->dtype == NV_DTYPE_INT64};
  /* the register kernel offsets a state's rows in 32 bits */
  const bool wide = p.dk > NV__GPU_DELTA_MAX_DK || p.dk * p.dv >= ((int64_t)1 << 31);
  while (!wide && p.lanes * NV__GPU_DELTA_ROWS < p.dk) p.lanes *= 2;
  const void *func = nv__gpu_kernel_gated_delta((int)oo->dtype, (int)po->dtype, wide);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "gated_delta_slots: dtypes %s and %s are not supported",
                         nv_dtype_name(oo->dtype), nv_dtype_name(po->dtype));
  /* a: the pool, o, q, k, v, g, beta, the slots, the scratch */
  nv__gpu_arg a[9];
  nv_status st = nv__gpu_output(ctx, po, &a[0]);
  /* The pool: in place when donated (input 5), else copied into output 0 first. */
  if (st == NV_OK && po->size > 0 && donated != 5) st = nv__gpu_copy_contiguous(ctx, &in[5], a[0]);
  if (st == NV_OK) st = nv__gpu_output(ctx, oo, &a[1]);
  if (st != NV_OK || oo->size == 0) return st;
  for (int i = 0; i < 5 && st == NV_OK; i++) st = nv__gpu_input_contiguous(ctx, &in[i], &a[2 + i]);
  if (st == NV_OK) st = nv__gpu_input_contiguous(ctx, &in[6], &a[7]);
  if (st != NV_OK) return st;
  a[8] = a[2]; /* the register kernel reads no scratch: q's view stands in (read only) */
  if (wide) {
    const bool f64 = nv__fast_delta_compute_type(oo->dtype, po->dtype) == NV_DTYPE_FLOAT64;
    const size_t cz = f64 ? sizeof(double) : sizeof(float);
    a[8].offset = 0;
    st = nv__gpu_scratch(ctx, (size_t)(p.n * p.hv * p.dk * p.dv) * cz, &a[8].view);
    if (st != NV_OK) return st;
  }
  const int64_t cols = wide ? NV__GPU_DELTA_THREADS : NV__GPU_DELTA_THREADS / p.lanes;
  p.nchunks = (p.dv + cols - 1) / cols;
  p.items = p.n * p.hv * p.nchunks;
  for (int i = 0; i < 8; i++) p.off[i] = a[i].offset;
  if ((st = nv__gpu_index_check(ctx, "gated_delta_slots", &p.bad)) != NV_OK) return st;
  hrx_view views[9];
  hrx_access acc[9] = {HRX_ACCESS_READ_WRITE, HRX_ACCESS_WRITE, HRX_ACCESS_READ,
                       HRX_ACCESS_READ,       HRX_ACCESS_READ,  HRX_ACCESS_READ,
                       HRX_ACCESS_READ,       HRX_ACCESS_READ,  HRX_ACCESS_READ};
  if (wide) acc[8] = HRX_ACCESS_READ_WRITE;
  for (int i = 0; i < 9; i++) views[i] = a[i].view;
  return nv__gpu_dispatch_1d(ctx, "gated_delta_slots", func, nv__gpu_blocks(p.items, 1, 1 << 20),
                             NV__GPU_DELTA_THREADS, views, acc, 9, &p, sizeof p);
}

void nv__gpu_register_fast_delta(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_GATED_DELTA] = k_gated_delta;
}
