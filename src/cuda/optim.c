/* The optim family on the GPU: adam_update's CUDA kernel-table entry. Host code (C11): it gets
 * the outputs' device memory, the four arrays row-contiguous (strided or broadcast ones are
 * copied into scratch memory first) and the 0-d scalars where they are (the kernel reads them
 * from device memory), and records one launch of optim.cu's kernel. */
#include "cuda/gpu.h"
#include "cuda/optim_kernels.h"
#include "ops/optim_params.h"

static nv_status k_adam_update(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  (void)donated;
  const nv__adam_params *prm = node->params;
  nv_dtype dt = node->out[0].dtype;
  const void *func = nv__gpu_kernel_adam((int)dt);
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "adam_update: dtype %s is not supported",
                         nv_dtype_name(dt));
  nv__gpu_arg a[NV__GPU_ADAM_VIEWS];
  nv_status st = NV_OK;
  for (int i = 0; i < 3 && st == NV_OK; i++) st = nv__gpu_output(ctx, &node->out[i], &a[i]);
  if (st != NV_OK || node->out[0].size == 0) return st;
  for (int i = 0; i < NV__ADAM_SCALARS && st == NV_OK; i++)
    st = nv__gpu_input_contiguous(ctx, &in[i], &a[3 + i]);
  /* The scalars at fixed places (s1, s2, dec); one the flags leave out reads s1's view. */
  int k = NV__ADAM_SCALARS;
  if (st == NV_OK) st = nv__gpu_input(ctx, &in[k++], &a[7]);
  a[8] = a[9] = a[7];
  if (st == NV_OK && prm->bias_correction) st = nv__gpu_input(ctx, &in[k++], &a[8]);
  if (st == NV_OK && prm->decoupled) st = nv__gpu_input(ctx, &in[k++], &a[9]);
  if (st != NV_OK) return st;
  nv__gpu_adam_params p = {.n = node->out[0].size,
                           .beta1 = prm->beta1,
                           .omb1 = 1 - prm->beta1,
                           .beta2 = prm->beta2,
                           .omb2 = 1 - prm->beta2,
                           .eps = prm->eps,
                           .bias_correction = prm->bias_correction,
                           .decoupled = prm->decoupled};
  hrx_view views[NV__GPU_ADAM_VIEWS];
  hrx_access acc[NV__GPU_ADAM_VIEWS];
  for (int i = 0; i < NV__GPU_ADAM_VIEWS; i++) {
    p.off[i] = a[i].offset;
    views[i] = a[i].view;
    acc[i] = i < 3 ? HRX_ACCESS_WRITE : HRX_ACCESS_READ;
  }
  /* Outputs that took p's, m's or v's buffer (donate_pairs in src/core/eval.c): each element
   * is read before it is written, by the same thread. */
  bool aliasing = node->out[0].buf == in[0].buf || node->out[1].buf == in[2].buf ||
                  node->out[2].buf == in[3].buf;
  /* One 16-byte vector per thread per step of the grid-stride loop: a block per 256 vectors. */
  int64_t per_vec = 16 / (int64_t)nv_dtype_size(dt);
  int64_t vecs = (p.n + per_vec - 1) / per_vec;
  int64_t blocks = (vecs + NV__GPU_ADAM_THREADS - 1) / NV__GPU_ADAM_THREADS;
  if (blocks > INT32_MAX) blocks = INT32_MAX;
  nv__gpu_launch l = {.func = func,
                      .grid = {(uint32_t)blocks, 1, 1},
                      .block = {NV__GPU_ADAM_THREADS, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = NV__GPU_ADAM_VIEWS,
                      .params = &p,
                      .params_size = sizeof p,
                      .aliasing = aliasing};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_optim(nv__gpu_kernel_fn *k) { k[NV__PRIM_ADAM_UPDATE] = k_adam_update; }
