/* Primitives of the reduce family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_REDUCE_H
#define NUVEC_OPS_PRIMS_REDUCE_H

#define NV__PRIMS_REDUCE(X)

#endif
