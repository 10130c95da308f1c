/* The CUDA kernel of custom kernels (FAST_CUDA_KERNEL, src/ops/fast_custom.c): fills the
 * outputs with the init value when one is given, then launches the node's kernel with its
 * grid, block and dynamic shared memory. A generated kernel takes its inputs' views, its
 * outputs' views and one parameter block (element-0 offsets, shapes, strides, ndims: see
 * nv__ck_block_size); a precompiled one its views and then its scalars (hrx constants), its
 * inputs' views starting at element 0 (the builder copies inputs with negative strides). */
#include <cuda_runtime_api.h>
#include <string.h>

#include "cuda/fast_custom_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_custom.h"

/* Raises the kernel's dynamic shared memory limit on the recording's device (needed above
 * 48 KiB; idempotent). */
static nv_status allow_shared(nv__gpu_ctx *ctx, const nv__ck_params *p) {
  if (p->shared_bytes <= 48 * 1024) return NV_OK;
  cudaError_t e = cudaKernelSetAttributeForDevice((cudaKernel_t)p->kernel,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  (int)p->shared_bytes, nv__gpu_device_index(ctx));
  if (e == cudaSuccess) return NV_OK;
  cudaGetLastError(); /* not sticky: later checks must not see it */
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "cuda_kernel: kernel '%s': %u bytes of dynamic shared memory: %s",
                       p->name, p->shared_bytes, cudaGetErrorString(e));
}

static nv_status k_cuda_kernel(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated) {
  (void)donated; /* D_NONE */
  const nv__ck_params *p = (const nv__ck_params *)node->params;
  int nin = p->nin, nout = p->nout;
  hrx_view views[NV__CK_MAX_IN + NV__CK_MAX_OUT];
  hrx_access access[NV__CK_MAX_IN + NV__CK_MAX_OUT];
  _Alignas(8) unsigned char block[4096];
  size_t bsize = !p->precompiled && nin ? nv__ck_block_size(nin) : 0;
  memset(block, 0, bsize);
  /* The block's arrays (see nv__ck_block_size): offsets, shapes, strides, ndims. */
  int64_t *off = (int64_t *)block;
  int32_t *shape = (int32_t *)(block + 8 * (size_t)nin);
  int64_t *strides = (int64_t *)(block + 48 * (size_t)nin);
  int32_t *ndim = (int32_t *)(block + 128 * (size_t)nin);
  for (int i = 0; i < nin; i++) {
    nv__gpu_arg a;
    nv_status s = nv__gpu_input(ctx, &in[i], &a);
    if (s != NV_OK) return s;
    views[i] = a.view;
    access[i] = HRX_ACCESS_READ;
    if (p->precompiled) {
      if (a.offset != 0)
        return nv__set_error(NV_ERR_BACKEND,
                             "cuda_kernel: precompiled kernel '%s': input %d does not start at "
                             "its element 0",
                             p->name, i);
      continue;
    }
    const nv__output *m = in[i].meta;
    off[i] = a.offset;
    ndim[i] = m->ndim;
    for (int d = 0; d < m->ndim && d < NV__CK_MAX_NDIM; d++) {
      shape[i * NV__CK_MAX_NDIM + d] = m->shape[d];
      strides[i * NV__CK_MAX_NDIM + d] = m->strides[d];
    }
  }
  for (int x = 0; x < nout; x++) {
    nv__gpu_arg a;
    nv_status s = nv__gpu_output(ctx, &node->out[x], &a);
    if (s != NV_OK) return s;
    if (a.offset != 0)
      return nv__set_error(NV_ERR_BACKEND, "cuda_kernel: kernel '%s': output %d has an offset",
                           p->name, x);
    views[nin + x] = a.view;
    access[nin + x] = p->has_init ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_WRITE;
    int64_t n = node->out[x].size;
    if (!p->has_init || n == 0) continue;
    hrx_access w = HRX_ACCESS_WRITE;
    nv__ck_fill_params fp = {p->init_bits[x], n, (int32_t)nv_dtype_size(node->out[x].dtype)};
    s = nv__gpu_dispatch_1d(ctx, "cuda_kernel", nv__ck_fill_kernel(), nv__gpu_blocks(n, 256, 4096),
                            256, &a.view, &w, 1, &fp, sizeof fp);
    if (s != NV_OK) return s;
  }
  if (p->grid[0] == 0 || p->grid[1] == 0 || p->grid[2] == 0) return NV_OK;
  nv_status s = allow_shared(ctx, p);
  if (s != NV_OK) return s;
  hrx_constant consts[NV__CK_MAX_SCALARS];
  for (int i = 0; i < p->nscalars; i++) {
    consts[i] = (hrx_constant){.size = p->scalar_size[i]};
    consts[i].value.u64 = p->scalar_bits[i];
  }
  nv__gpu_launch l = {.func = p->kernel,
                      .grid = {p->grid[0], p->grid[1], p->grid[2]},
                      .block = {p->block[0], p->block[1], p->block[2]},
                      .shared_bytes = p->shared_bytes,
                      .views = views,
                      .access = access,
                      .nviews = nin + nout,
                      .params = bsize ? block : NULL,
                      .params_size = bsize,
                      .constants = p->nscalars ? consts : NULL,
                      .nconstants = p->nscalars};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_fast_custom(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_CUDA_KERNEL] = k_cuda_kernel;
}
