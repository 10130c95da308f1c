/* Parameters of the quantize family, shared by the builders (src/ops/quantize.c) and the
 * kernels (src/cpu/quantize*.c, src/cuda/quantize*). Valid C11 and C++.
 *
 * quantize: input w (..., K), row-contiguous, float16, bfloat16 or float32 (float64 is
 *   converted to float32 by the builder and its scales back); outputs packed uint32
 *   (..., K*bits/32), scales (..., K/group) (w's dtype in affine mode, else uint8) and, in
 *   affine mode, biases like the scales.
 * dequantize: inputs packed (..., Kw), scales and (affine) biases (..., G), all
 *   row-contiguous, of one shape but their last axis; output (..., Kw*32/bits) of `dtype`
 *   (affine: the scales' dtype; the builder converts afterwards).
 * quantized_matmul: inputs x (B, M, K) of the output dtype, packed w (Bw, N, K*bits/32) when
 *   transposed, else (Bw, K, N*bits/32), scales and (affine) biases (Bw, rows, groups), all
 *   row-contiguous; Bw is 1 (one matrix for every batch) or B. Output (B, M, N).
 * gather_qmm: inputs x (Bx, M, K) of the output dtype, packed w (E, rows, words), scales and
 *   (affine) biases (E, rows, groups) as quantized_matmul's, then lhs and rhs indices (L,)
 *   int64 (negative ones wrap once, as take's); output (L, M, N), pair l being
 *   x[lhs[l]] @ dequantize(w[rhs[l]])(.T). `sorted`: rhs is ascending (a hint). */
#ifndef NUVEC_OPS_QUANTIZE_PARAMS_H
#define NUVEC_OPS_QUANTIZE_PARAMS_H

#include <stdint.h>

enum { NV__QMODE_AFFINE = 0, NV__QMODE_MXFP4, NV__QMODE_MXFP8, NV__QMODE_NVFP4 };

typedef struct nv__quant_params {
  int32_t mode, group_size, bits;
  int32_t transpose; /* quantized_matmul: x @ w.T */
} nv__quant_params;

typedef struct nv__gather_qmm_params {
  nv__quant_params q;
  int32_t sorted; /* sorted_indices: rhs ascending */
} nv__gather_qmm_params;

#endif
