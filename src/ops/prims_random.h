/* Primitives of the random family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_RANDOM_H
#define NUVEC_OPS_PRIMS_RANDOM_H

#define NV__PRIMS_RANDOM(X)                           \
  X(RANDOM_BITS, "random_bits", D_NONE, false, false) \
  X(RANDOM_UNIT, "random_unit", D_NONE, false, false)

#endif
