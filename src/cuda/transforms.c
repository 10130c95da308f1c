/* The transforms family on the GPU: custom functions, whose outputs are their inputs' data (the
 * CPU kernel's sharing, as the GPU view kernels share: no copy, nothing recorded), and vmap's
 * stand-in inputs, which have no values: evaluating one fails with the CPU kernel's message. */
#include "cuda/gpu.h"

/* Output i of a custom function is input i (f's output i) itself: the same buffer and offset;
 * its layout was set from that input's when the node was built. */
static nv_status k_custom(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                          int donated) {
  (void)ctx;
  (void)donated;
  for (int i = 0; i < node->noutputs; i++) {
    node->out[i].buf = nv__buffer_retain(in[i].buf);
    node->out[i].offset = in[i].offset;
  }
  return NV_OK;
}

static nv_status k_vmap_input(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  (void)ctx;
  (void)node;
  (void)in;
  (void)donated;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "vmap: the values of a mapped input cannot be read inside the function "
                       "being mapped");
}

void nv__gpu_register_transforms(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_VMAP_INPUT] = k_vmap_input;
  k[NV__PRIM_CUSTOM] = k_custom;
}
