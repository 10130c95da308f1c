/* The fused activations' CUDA kernels (gelu and act_vjp, elementwise_act.cu) as the host code
 * (elementwise.c) sees them: a table of element-wise entries by primitive (0: GELU, 1:
 * ACT_VJP), mode (NV__ACT_*, src/ops/elementwise_params.h) and dtype, with the kernel ABI and
 * layouts of src/cuda/elementwise.h (act_vjp's inputs are a, then g). Valid C11 and C++. */
#ifndef NUVEC_CUDA_ELEMENTWISE_ACT_H
#define NUVEC_CUDA_ELEMENTWISE_ACT_H

#include "cuda/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV__EW_ACT_MODES 5 /* NV__ACT_GELU .. NV__ACT_SIGMOID */

/* Entries with a NULL `strided` kernel are not supported (gelu takes the three GELU modes,
 * act_vjp all five; both float16, bfloat16, float32 and float64). */
typedef nv__ew_entry nv__ew_act_table[2][NV__EW_ACT_MODES][NV_DTYPE_COUNT];
void nv__ew_fill_act(nv__ew_act_table t);

#ifdef __cplusplus
}
#endif

#endif
