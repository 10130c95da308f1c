/* Primitives of the index family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_INDEX_H
#define NUVEC_OPS_PRIMS_INDEX_H

#define NV__PRIMS_INDEX(X)

#endif
