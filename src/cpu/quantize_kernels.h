/* The quantize family's CPU kernels and the helpers its two files share. */
#ifndef NUVEC_CPU_QUANTIZE_KERNELS_H
#define NUVEC_CPU_QUANTIZE_KERNELS_H

#include "core/internal.h"

/* Element i of float-typed data `p` of dtype `dt` (float16, bfloat16, float32, float64) as
 * float. */
float nv__q_load(nv_dtype dt, const void *p, int64_t i);

/* The value of a stored fp-mode scale code (E8M0 for the mx modes, E4M3 for nvfp4). */
float nv__q_scale_value(int mode, uint8_t code);

nv_status nv__k_quantized_matmul(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_gather_qmm(nv__node *node, const nv__operand *in, int donated);

#endif
