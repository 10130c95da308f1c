/* Primitives of the fft family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_FFT_H
#define NUVEC_OPS_PRIMS_FFT_H

#define NV__PRIMS_FFT(X) X(FFT, "fft", D_NONE, false, false)

#endif
