/* Primitives of the transforms family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_TRANSFORMS_H
#define NUVEC_OPS_PRIMS_TRANSFORMS_H

#define NV__PRIMS_TRANSFORMS(X)

#endif
