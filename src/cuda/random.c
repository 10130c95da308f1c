/* The random family on the GPU: random_bits and random_unit's CUDA kernel-table entry. Host
 * code (C11): it sizes the threefry stream as the CPU kernel does (src/cpu/random.c), gets the
 * keys row-contiguous (a strided or broadcast key array is copied into scratch memory first)
 * and records one launch of random.cu's kernel for the mode. Keys of shape (K..., 2) (vmap over
 * keys) give K independent streams, each in its own contiguous part of the output. The
 * samplers (src/ops/random*.c) are these two primitives composed with ordinary ops. */
#include "cuda/gpu.h"
#include "cuda/random_kernels.h"

/* Blocks at most: the kernel walks its work items with a grid-stride loop. */
#define GRID_CAP 8192

/* The kernel's mode for a node: random_bits' raw bytes, or random_unit's sample dtype. */
static int mode_of(const nv__node *node) {
  if (node->prim == NV__PRIM_RANDOM_BITS) return NV__GPU_RANDOM_BITS;
  switch (node->out[0].dtype) {
    case NV_DTYPE_FLOAT32: return NV__GPU_RANDOM_UNIT_F32;
    case NV_DTYPE_FLOAT16: return NV__GPU_RANDOM_UNIT_F16;
    case NV_DTYPE_BFLOAT16: return NV__GPU_RANDOM_UNIT_BF16;
    default: return NV__GPU_RANDOM_MODES;
  }
}

static nv_status k_random(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)donated; /* the random primitives take no donation (D_NONE) */
  nv__output *out = &node->out[0];
  const void *func = nv__gpu_kernel_random(mode_of(node));
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED, "random_unit: dtype %s is not supported",
                         nv_dtype_name(out->dtype));
  nv__gpu_arg o, key;
  nv_status st = nv__gpu_output(ctx, out, &o);
  int64_t nkeys = in[0].meta->size / 2;
  if (st != NV_OK || out->size == 0 || nkeys == 0) return st;
  if ((st = nv__gpu_input_contiguous(ctx, &in[0], &key)) != NV_OK) return st;
  /* The CPU kernel's sizes: random_unit draws one 4-byte word per sample, whatever the
   * sample's size; random_bits draws the output's bytes. */
  int64_t esize = (int64_t)nv_dtype_size(out->dtype);
  int64_t per = out->size / nkeys;
  int64_t bytes = per * (node->prim == NV__PRIM_RANDOM_BITS ? esize : 4);
  int64_t words = (bytes + 3) / 4;
  nv__gpu_random_params p = {.nkeys = nkeys,
                             .half = words / 2,
                             .second = words / 2 + words % 2,
                             .per_key = words / 2 + words % 2,
                             .bytes = per * esize,
                             .samples = per,
                             .key_off = key.offset,
                             .out_off = o.offset * esize};
  p.groups = (p.per_key + NV__GPU_RANDOM_ITEMS - 1) / NV__GPU_RANDOM_ITEMS;
  p.items = nkeys * p.groups;
  int64_t blocks = (p.items + NV__GPU_RANDOM_THREADS - 1) / NV__GPU_RANDOM_THREADS;
  if (blocks > GRID_CAP) blocks = GRID_CAP;
  hrx_view views[2] = {key.view, o.view};
  hrx_access acc[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  nv__gpu_launch l = {.func = func,
                      .grid = {(uint32_t)blocks, 1, 1},
                      .block = {NV__GPU_RANDOM_THREADS, 1, 1},
                      .views = views,
                      .access = acc,
                      .nviews = 2,
                      .params = &p,
                      .params_size = sizeof p};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_random(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_RANDOM_BITS] = k_random;
  k[NV__PRIM_RANDOM_UNIT] = k_random;
}
