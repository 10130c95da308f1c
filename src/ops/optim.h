/* The optim family's builders: fused optimizer updates, internal to the library (src/nn
 * builds them; tests reach them through libnuvec.a). */
#ifndef NUVEC_OPS_OPTIM_H
#define NUVEC_OPS_OPTIM_H

#include "core/internal.h"
#include "ops/optim_params.h"

/* One Adam/AdamW step of one parameter as one primitive (adam_update), with the formulas and
 * the order of operations of the composed update (src/nn/optimizer.c):
 *   p0 = decoupled ? p * decay : p
 *   m' = beta1 * m + (1 - beta1) * g
 *   v' = beta2 * v + (1 - beta2) * g * g
 *   p' = bias_correction ? p0 - c1 * m' / (sqrt(v') * c2 + eps) : p0 - lr * m' / (sqrt(v') + eps)
 * p, g, m and v must share one real floating dtype (float16, bfloat16, float32, float64) and
 * one shape (any layout); lr, decay, c1 and c2 must be 0-d (converted to that dtype; the ones
 * the flags do not use may be NULL).
 *
 * float16 and bfloat16 compute in float32, with beta1, beta2 and eps as float32, and round once
 * per output: more accurate than the composed update, which rounds every intermediate (and eps
 * below float16's smallest subnormal to 0). float32 and float64 compute in their own type and
 * give the composed update's values. The CPU and CUDA kernels do the same correctly rounded
 * operations (no fused multiply-add), so the backends agree bit for bit. p', m' and v' are new
 * buffers: the evaluation donates inputs to single-output nodes only.
 *
 * Writes p', m', v' to out[0..2]: new references registered with the calling thread's scope,
 * like any builder's results; on bad arguments they are failed arrays carrying the error
 * (NV_ERR_INVALID_ARGUMENT), as are the outputs of failed inputs. Returns the first error
 * known now (nv_array_status of out[0]). Not differentiable: vjp and jvp through it fail with
 * NV_ERR_UNSUPPORTED naming adam_update. vmap maps it element-wise (batched 0-d scalars fail
 * with NV_ERR_UNSUPPORTED). */
nv_status nv__adam_update(const nv_array *p, const nv_array *g, const nv_array *m,
                          const nv_array *v, const nv_array *lr, const nv_array *decay,
                          const nv_array *c1, const nv_array *c2, const nv__adam_params *params,
                          nv_array **out);

#endif
