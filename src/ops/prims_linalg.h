/* Primitives of the linalg family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_LINALG_H
#define NUVEC_OPS_PRIMS_LINALG_H

#define NV__PRIMS_LINALG(X)                 \
  X(MATMUL, "matmul", D_NONE, false, false) \
  X(ADDMM, "addmm", D_NONE, false, false)   \
  X(VECDOT, "vecdot", D_NONE, false, false)

#endif
