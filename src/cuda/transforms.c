/* The transforms family on the GPU: custom functions, whose outputs are their inputs' data (the
 * CPU kernel's sharing, as the GPU view kernels share: no copy, nothing recorded), and vmap's
 * and compile's stand-in inputs, which have no values: evaluating one fails with the CPU
 * kernel's message. */
#include "cuda/gpu.h"

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

static nv_status k_compile_input(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                 int donated) {
  (void)ctx;
  (void)node;
  (void)in;
  (void)donated;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "compile: the values of an input cannot be read while the function is "
                       "traced (evaluating inside a compiled function)");
}

void nv__gpu_register_transforms(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_COMPILE_INPUT] = k_compile_input;
  k[NV__PRIM_VMAP_INPUT] = k_vmap_input;
  k[NV__PRIM_CUSTOM] = nv__gpu_share_inputs; /* output i is input i */
}
