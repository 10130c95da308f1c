/* Primitives of the elementwise family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_ELEMENTWISE_H
#define NUVEC_OPS_PRIMS_ELEMENTWISE_H

#define NV__PRIMS_ELEMENTWISE(X)

#endif
