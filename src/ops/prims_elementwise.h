/* Primitives of the elementwise family (see src/core/prims.h for the entry format). The unary
 * primitives from SIGN to BITWISE_INVERT and the binary ones from FLOOR_DIVIDE to RIGHT_SHIFT
 * are contiguous blocks: the CPU kernels index their tables by the distance from the first. */
#ifndef NUVEC_OPS_PRIMS_ELEMENTWISE_H
#define NUVEC_OPS_PRIMS_ELEMENTWISE_H

#define NV__PRIMS_ELEMENTWISE(X)                                 \
  X(SIGN, "sign", D_0, true, false)                              \
  X(LOGICAL_NOT, "logical_not", D_0, true, false)                \
  X(RECIPROCAL, "reciprocal", D_0, true, false)                  \
  X(FLOOR, "floor", D_0, true, false)                            \
  X(CEIL, "ceil", D_0, true, false)                              \
  X(TRUNC, "trunc", D_0, true, false)                            \
  X(ROUND, "round", D_0, true, false)                            \
  X(SQUARE, "square", D_0, true, false)                          \
  X(RSQRT, "rsqrt", D_0, true, false)                            \
  X(EXPM1, "expm1", D_0, true, false)                            \
  X(LOG2, "log2", D_0, true, false)                              \
  X(LOG10, "log10", D_0, true, false)                            \
  X(LOG1P, "log1p", D_0, true, false)                            \
  X(SIN, "sin", D_0, true, false)                                \
  X(COS, "cos", D_0, true, false)                                \
  X(TAN, "tan", D_0, true, false)                                \
  X(ARCSIN, "arcsin", D_0, true, false)                          \
  X(ARCCOS, "arccos", D_0, true, false)                          \
  X(ARCTAN, "arctan", D_0, true, false)                          \
  X(SINH, "sinh", D_0, true, false)                              \
  X(COSH, "cosh", D_0, true, false)                              \
  X(TANH, "tanh", D_0, true, false)                              \
  X(ARCSINH, "arcsinh", D_0, true, false)                        \
  X(ARCCOSH, "arccosh", D_0, true, false)                        \
  X(ARCTANH, "arctanh", D_0, true, false)                        \
  X(DEGREES, "degrees", D_0, true, false)                        \
  X(RADIANS, "radians", D_0, true, false)                        \
  X(SIGMOID, "sigmoid", D_0, true, false)                        \
  X(ERF, "erf", D_0, true, false)                                \
  X(ERFINV, "erfinv", D_0, true, false)                          \
  X(ISNAN, "isnan", D_0, true, false)                            \
  X(ISINF, "isinf", D_0, true, false)                            \
  X(ISFINITE, "isfinite", D_0, true, false)                      \
  X(ISPOSINF, "isposinf", D_0, true, false)                      \
  X(ISNEGINF, "isneginf", D_0, true, false)                      \
  X(NAN_TO_NUM, "nan_to_num", D_0, true, false)                  \
  X(CONJUGATE, "conjugate", D_NONE, true, false)                 \
  X(BITWISE_INVERT, "bitwise_invert", D_0, true, false)          \
  X(FLOOR_DIVIDE, "floor_divide", D_01, true, false)             \
  X(REMAINDER, "remainder", D_01, true, false)                   \
  X(POWER, "power", D_01, true, false)                           \
  X(ARCTAN2, "arctan2", D_01, true, false)                       \
  X(LOGADDEXP, "logaddexp", D_01, true, false)                   \
  X(EQUAL, "equal", D_01, true, false)                           \
  X(NOT_EQUAL, "not_equal", D_01, true, false)                   \
  X(GREATER, "greater", D_01, true, false)                       \
  X(GREATER_EQUAL, "greater_equal", D_01, true, false)           \
  X(LESS, "less", D_01, true, false)                             \
  X(LESS_EQUAL, "less_equal", D_01, true, false)                 \
  X(LOGICAL_AND, "logical_and", D_01, true, false)               \
  X(LOGICAL_OR, "logical_or", D_01, true, false)                 \
  X(LOGICAL_XOR, "logical_xor", D_01, true, false)               \
  X(BITWISE_AND, "bitwise_and", D_01, true, false)               \
  X(BITWISE_OR, "bitwise_or", D_01, true, false)                 \
  X(BITWISE_XOR, "bitwise_xor", D_01, true, false)               \
  X(LEFT_SHIFT, "left_shift", D_01, true, false)                 \
  X(RIGHT_SHIFT, "right_shift", D_01, true, false)               \
  X(ISCLOSE, "isclose", D_01, true, false)                       \
  X(WHERE, "where", D_12, true, false)                           \
  X(DIVMOD, "divmod", D_NONE, false, false)                      \
  X(ALLCLOSE, "allclose", D_NONE, false, false)                  \
  X(ARRAY_EQUAL, "array_equal", D_NONE, false, false)            \
  X(REAL, "real", D_NONE, false, true)                           \
  X(IMAG, "imag", D_NONE, false, true)                           \
  X(VIEW_DTYPE, "view", D_NONE, false, true)                     \
  X(STOP_GRADIENT, "stop_gradient", D_NONE, false, true)         \
  X(DEPENDS, "depends", D_NONE, false, false)                    \
  X(NUMBER_OF_ELEMENTS, "number_of_elements", D_NONE, false, false) \
  X(TRI, "tri", D_NONE, false, false)                            \
  X(HANNING, "hanning", D_NONE, false, false)                    \
  X(HAMMING, "hamming", D_NONE, false, false)                    \
  X(BARTLETT, "bartlett", D_NONE, false, false)                  \
  X(BLACKMAN, "blackman", D_NONE, false, false)                  \
  X(GELU, "gelu", D_0, true, false)                              \
  X(ACT_VJP, "act_vjp", D_01, true, false)

#endif
