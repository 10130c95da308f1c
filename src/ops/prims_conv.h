/* Primitives of the convolution family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_CONV_H
#define NUVEC_OPS_PRIMS_CONV_H

#define NV__PRIMS_CONV(X) X(CONV_GENERAL, "convolution", D_NONE, false, false)

#endif
