/* Parameters of the fft primitive (src/ops/fft.c). The primitive transforms the last axis of
 * its input; the builders move other axes there (views) and crop or zero-pad it first. */
#ifndef NUVEC_OPS_FFT_PARAMS_H
#define NUVEC_OPS_FFT_PARAMS_H

#include <stdint.h>

#include "nuvec/array.h"

/* What the transform maps: complex to complex (forward: exp(-2πi jk/n), inverse: exp(+2πi jk/n),
 * both unnormalized), real n to complex n/2+1 (forward), complex n/2+1 to real n (inverse of a
 * Hermitian spectrum: the imaginary parts of bin 0 and, for even n, bin n/2 are ignored). */
typedef enum nv__fft_kind {
  NV__FFT_C2C_FORWARD = 0,
  NV__FFT_C2C_INVERSE = 1,
  NV__FFT_R2C = 2,
  NV__FFT_C2R = 3,
} nv__fft_kind;

typedef struct nv__fft_params {
  int kind;      /* nv__fft_kind */
  int64_t n;     /* the transform length (>= 1): the input's last axis, or the C2R output's */
  double scale;  /* every output element is multiplied by it (the norm mode's factor) */
} nv__fft_params;

/* The primitive over the last axis of `x`, whose dtype (float32 for R2C, else complex64) and
 * last-axis length (n, or n/2 + 1 for C2R) the caller has made right: the transforms' rules
 * build it directly. A new reference registered with the calling thread's scope. */
nv_array *nv__fft_last(const nv_array *x, int kind, int64_t n, double scale);

/* The smallest 2^a 3^b 5^c >= n (n >= 1): a length the mixed-radix transform takes fast
 * (Bluestein's padded length, convolve's FFT length). */
static inline int64_t nv__fft_smooth(int64_t n) {
  int64_t best = INT64_MAX;
  for (int64_t p5 = 1; p5 < best; p5 *= 5)
    for (int64_t p35 = p5; p35 < best; p35 *= 3) {
      int64_t v = p35;
      while (v < n) v *= 2;
      if (v < best) best = v;
    }
  return best;
}

#endif
