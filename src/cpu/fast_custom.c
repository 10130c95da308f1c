/* The CPU kernel of custom CUDA kernels (FAST_CUDA_KERNEL, src/ops/fast_custom.c): they run on
 * GPU streams only (E57), so a node that reaches the CPU fails with the builder's message. */
#include "core/internal.h"
#include "ops/fast_custom.h"

static nv_status k_cuda_kernel(nv__node *n, const nv__operand *in, int donated) {
  (void)in;
  (void)donated;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "cuda_kernel: custom kernels run on the GPU only (kernel '%s' was "
                       "evaluated on the CPU)",
                       ((const nv__ck_params *)n->params)->name);
}

void nv__cpu_register_fast_custom(nv__kernel_fn *k) { k[NV__PRIM_FAST_CUDA_KERNEL] = k_cuda_kernel; }
