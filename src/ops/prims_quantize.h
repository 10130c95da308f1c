/* Primitives of the quantize family (see src/core/prims.h for the entry format; their inputs,
 * outputs and parameters are described in src/ops/quantize_params.h):
 *   QUANTIZE          w -> packed, scales (, biases)
 *   DEQUANTIZE        packed, scales (, biases) -> values
 *   QUANTIZED_MATMUL  x, packed, scales (, biases) -> x @ dequantize(w)(.T)
 *   GATHER_QMM        x, packed, scales (, biases), lhs, rhs -> x[lhs] @ dequantize(w[rhs])(.T) */
#ifndef NUVEC_OPS_PRIMS_QUANTIZE_H
#define NUVEC_OPS_PRIMS_QUANTIZE_H

#define NV__PRIMS_QUANTIZE(X)                          \
  X(QUANTIZE, "quantize", D_NONE, false, false)        \
  X(DEQUANTIZE, "dequantize", D_NONE, false, false)    \
  X(QUANTIZED_MATMUL, "quantized_matmul", D_NONE, false, false)  \
  X(GATHER_QMM, "gather_qmm", D_NONE, false, false)

#endif
