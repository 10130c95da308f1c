/* The per-group arithmetic of the quantization formats (include/nuvec/quantize.h), shared by
 * the CPU kernels (C11) and the CUDA kernels (compiled as C++ for the device), so both write
 * the same bits. Products are rounded explicitly (NV__QMUL) so that no compiler fuses a
 * multiply-add; divisions are IEEE-rounded on both (nvcc's default -prec-div). */
#ifndef NUVEC_OPS_QUANTIZE_CODEC_H
#define NUVEC_OPS_QUANTIZE_CODEC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define NV__QFN static __device__ __forceinline__
#define NV__QMUL(a, b) __fmul_rn(a, b)
#define NV__QADD(a, b) __fadd_rn(a, b)
#else
#define NV__QFN static inline
#define NV__QMUL(a, b) ((a) * (b))
#define NV__QADD(a, b) ((a) + (b))
#endif

/* std::max / std::min as MLX's kernels use them: a NaN second operand is ignored. */
NV__QFN float nv__qmax(float a, float b) { return a < b ? b : a; }
NV__QFN float nv__qmin(float a, float b) { return b < a ? b : a; }

/* Affine: the scale and bias of a group with extremes wmin, wmax (see quantize.h). */
NV__QFN void nv__qaffine_params(float wmin, float wmax, int bits, float *scale, float *bias) {
  const float eps = 1e-7f;
  if (bits == 1) {
    *scale = nv__qmax(wmax - wmin, eps);
    *bias = wmin;
    return;
  }
  float nbins = (float)((1 << bits) - 1);
  bool neg = fabsf(wmin) > fabsf(wmax);
  float s = nv__qmax((wmax - wmin) / nbins, eps);
  s = neg ? s : -s;
  float edge = neg ? wmin : wmax;
  float q0 = rintf(edge / s);
  *scale = q0 != 0 ? edge / q0 : s;
  *bias = q0 != 0 ? edge : 0.0f;
}

/* Affine: the quantized value of one element (NaN quantizes to 0). */
NV__QFN uint32_t nv__qaffine_code(float w, float scale, float bias, int bits) {
  float q = rintf((w - bias) / scale);
  q = nv__qmin(nv__qmax(q, 0.0f), (float)((1 << bits) - 1));
  return q == q ? (uint32_t)q : 0u;
}

/* mx modes: the E8M0 scale code of a group whose largest magnitude over the format's largest
 * value is s, and the scale value 2^e (exact, also below float32's normal range): e = ceil(log2
 * s). As MLX, s = amax / maxval is computed in the weights' dtype (a float16 quotient below
 * float16's normal range rounds to its subnormal steps, which moves e at powers of two), so the
 * callers round it first. An all-zero group has scale 1; a group whose amax is not finite gets
 * code 255 (E8M0's NaN) and a NaN scale. */
NV__QFN uint8_t nv__qmx_scale(float s, float *sv) {
  if (s == 0) {
    *sv = 1.0f;
    return 127;
  }
  if (!(s <= 3.4028234663852886e38f)) {
    *sv = NAN;
    return 255;
  }
  int ex;
  float m = frexpf(s, &ex);
  int e = m == 0.5f ? ex - 1 : ex; /* ceil(log2(s)), exactly */
  *sv = ldexpf(1.0f, e);
  return (uint8_t)(unsigned)(e + 127); /* MLX stores the exponent modulo 256 */
}

/* E2M1 (fp4) of q: nearest, ties toward zero, saturating at 6; magnitudes that round to 0
 * are +0; NaN is 0. */
NV__QFN uint32_t nv__qfp4_code(float q) {
  float a = fabsf(q);
  uint32_t c = (uint32_t)(a > 0.25f) + (uint32_t)(a > 0.75f) + (uint32_t)(a > 1.25f) +
               (uint32_t)(a > 1.75f) + (uint32_t)(a > 2.5f) + (uint32_t)(a > 3.5f) +
               (uint32_t)(a > 5.0f);
  return c && signbit(q) ? c | 8u : c;
}

/* The value of an E2M1 code. */
NV__QFN float nv__qfp4_value(uint32_t c) {
  float m = (float)(c & 7);
  float a = c & 4 ? ((c & 7) == 7 ? 6.0f : (c & 7) == 6 ? 4.0f : (c & 7) == 5 ? 3.0f : 2.0f)
                  : NV__QMUL(m, 0.5f);
  return c & 8 ? -a : a;
}

/* Element e (bits wide) of a row's little-endian bit stream of `nwords` uint32 words. */
NV__QFN uint32_t nv__qextract(const uint32_t *row, int64_t e, int bits, int64_t nwords) {
  int64_t bit = e * bits, wi = bit >> 5;
  int sh = (int)(bit & 31);
  uint64_t v = row[wi];
  if (sh + bits > 32 && wi + 1 < nwords) v |= (uint64_t)row[wi + 1] << 32;
  return (uint32_t)(v >> sh) & ((1u << bits) - 1);
}

#endif
