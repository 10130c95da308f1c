/* Primitives of the core: creation, conversion, views, updates, first arithmetic, sum. */
#ifndef NUVEC_OPS_PRIMS_CORE_H
#define NUVEC_OPS_PRIMS_CORE_H

#define NV__PRIMS_CORE(X)                                      \
  X(CONSTANT, "constant", D_NONE, false, false)                \
  X(FULL, "full", D_NONE, false, false)                        \
  X(ARANGE, "arange", D_NONE, false, false)                    \
  X(EYE, "eye", D_NONE, false, false)                          \
  X(ASTYPE, "astype", D_NONE, false, false)                    \
  X(COPY, "copy", D_NONE, false, false)                        \
  X(TO_FP8, "to_fp8", D_NONE, false, false)                    \
  X(FROM_FP8, "from_fp8", D_NONE, false, false)                \
  X(RESHAPE, "reshape", D_NONE, false, true)                   \
  X(TRANSPOSE, "transpose", D_NONE, false, true)               \
  X(BROADCAST, "broadcast_to", D_NONE, false, true)            \
  X(SLICE, "slice", D_NONE, false, true)                       \
  X(SQUEEZE, "squeeze", D_NONE, false, true)                   \
  X(EXPAND_DIMS, "expand_dims", D_NONE, false, true)           \
  X(AS_STRIDED, "as_strided", D_NONE, false, true)             \
  X(SLICE_UPDATE, "slice_update", D_0, false, false)           \
  X(NEGATIVE, "negative", D_0, true, false)                    \
  X(ABS, "abs", D_0, true, false)                              \
  X(EXP, "exp", D_0, true, false)                              \
  X(LOG, "log", D_0, true, false)                              \
  X(SQRT, "sqrt", D_0, true, false)                            \
  X(ADD, "add", D_01, true, false)                             \
  X(SUBTRACT, "subtract", D_01, true, false)                   \
  X(MULTIPLY, "multiply", D_01, true, false)                   \
  X(DIVIDE, "divide", D_01, true, false)                       \
  X(MAXIMUM, "maximum", D_01, true, false)                     \
  X(MINIMUM, "minimum", D_01, true, false)                     \
  X(SUM, "sum", D_NONE, false, false)                          \
  X(TEST_ADD_MULTIPLY, "test_add_multiply", D_NONE, false, false)

#endif
