/* The one primitive enum. Each primitive's table entry (name, donation candidates, view flag)
 * is in src/ops/prims.c; each backend fills its kernel table per primitive. Append-only within
 * a family is not required: the enum is internal. */
#ifndef NUVEC_CORE_PRIMS_H
#define NUVEC_CORE_PRIMS_H

#define NV__PRIM_LIST(X)                                                   \
  /* leaves and creation */                                                \
  X(CONSTANT) X(FULL) X(ARANGE) X(EYE)                                     \
  /* type and copies */                                                    \
  X(ASTYPE) X(COPY) X(TO_FP8) X(FROM_FP8)                                  \
  /* views and shapes */                                                   \
  X(RESHAPE) X(TRANSPOSE) X(BROADCAST) X(SLICE) X(SQUEEZE) X(EXPAND_DIMS)  \
  X(AS_STRIDED)                                                            \
  /* updates */                                                            \
  X(SLICE_UPDATE)                                                          \
  /* unary element-wise */                                                 \
  X(NEGATIVE) X(ABS) X(EXP) X(LOG) X(SQRT)                                 \
  /* binary element-wise */                                                \
  X(ADD) X(SUBTRACT) X(MULTIPLY) X(DIVIDE) X(MAXIMUM) X(MINIMUM)           \
  /* reductions */                                                         \
  X(SUM)                                                                   \
  /* test-only: two outputs (a + b, a * b) */                              \
  X(TEST_ADD_MULTIPLY)

enum {
#define NV__PRIM_ENUM(name) NV__PRIM_##name,
  NV__PRIM_LIST(NV__PRIM_ENUM)
#undef NV__PRIM_ENUM
  NV__PRIM_COUNT
};

#endif
