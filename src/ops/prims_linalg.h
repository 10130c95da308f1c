/* Primitives of the linalg family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_LINALG_H
#define NUVEC_OPS_PRIMS_LINALG_H

#define NV__PRIMS_LINALG(X)

#endif
