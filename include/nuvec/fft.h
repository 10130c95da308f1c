/* Discrete Fourier transforms (MLX's mlx.core.fft), einsum, the Walsh-Hadamard transform and
 * NumPy's 1-D convolve. Every builder returns a new reference registered with the calling
 * thread's innermost scope; bad arguments give a failed array whose message names the op. */
#ifndef NUVEC_FFT_H
#define NUVEC_FFT_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scaling of a transform pair, as NumPy's and MLX's `norm`: BACKWARD leaves the forward
 * transform unscaled and divides the inverse by n; ORTHO scales both by 1/sqrt(n); FORWARD
 * divides the forward transform by n and leaves the inverse unscaled. */
typedef enum nv_fft_norm {
  NV_FFT_NORM_BACKWARD = 0,
  NV_FFT_NORM_ORTHO = 1,
  NV_FFT_NORM_FORWARD = 2,
} nv_fft_norm;

/* The 1-D transforms along `axis` (negative from the end), as MLX's fft.fft, ifft, rfft and
 * irfft. `n` (NULL: the axis's size; for irfft 2 * (size - 1)) is the transform length: the
 * input is cropped or zero-padded along the axis to n (irfft: to n / 2 + 1 bins). fft and ifft
 * give complex64 (real inputs are converted; float64 computes in float32 as MLX), rfft gives
 * n / 2 + 1 complex64 bins of a real input (a complex input's imaginary part is dropped), irfft
 * gives n float32 values and ignores the imaginary parts of bin 0 and, for even n, bin n / 2.
 * Fail for an axis out of range and for n < 1 (also an empty axis with n NULL). */
NV_API nv_array *nv_fft_fft(const nv_array *a, const int *n, int axis, nv_fft_norm norm);
NV_API nv_array *nv_fft_ifft(const nv_array *a, const int *n, int axis, nv_fft_norm norm);
NV_API nv_array *nv_fft_rfft(const nv_array *a, const int *n, int axis, nv_fft_norm norm);
NV_API nv_array *nv_fft_irfft(const nv_array *a, const int *n, int axis, nv_fft_norm norm);

/* The n-D transforms over `axes` (naxes of them) with sizes `s`, as MLX's fftn, ifftn, rfftn
 * and irfftn (fft2 and friends are these with two axes). axes NULL means the last naxes axes
 * when s is given (s then holds naxes sizes) and every axis when s is NULL too (naxes is then
 * ignored). s NULL means the axes' sizes (irfftn: 2 * (size - 1) on the last axis). rfftn's
 * real transform is over the last listed axis and irfftn's too. Fail for an axis out of range,
 * a repeated axis, more axes than dimensions, sizes below 1 and a 0-d `a` (MLX's rule). No
 * axes of an array with dimensions: `a` itself. */
NV_API nv_array *nv_fft_fftn(const nv_array *a, const int *s, const int *axes, int naxes,
                             nv_fft_norm norm);
NV_API nv_array *nv_fft_ifftn(const nv_array *a, const int *s, const int *axes, int naxes,
                              nv_fft_norm norm);
NV_API nv_array *nv_fft_rfftn(const nv_array *a, const int *s, const int *axes, int naxes,
                              nv_fft_norm norm);
NV_API nv_array *nv_fft_irfftn(const nv_array *a, const int *s, const int *axes, int naxes,
                               nv_fft_norm norm);

/* The sample frequencies of an n-point transform with sample spacing d, as NumPy's fftfreq
 * ([0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d n)) and rfftfreq ([0, ..., n/2] /
 * (d n)), float32. Fail for n < 1. */
NV_API nv_array *nv_fft_fftfreq(int n, double d);
NV_API nv_array *nv_fft_rfftfreq(int n, double d);

/* `a` rolled by size / 2 along each of `axes` (NULL: every axis; naxes is then ignored) so that
 * the zero frequency comes to the middle (fftshift), and the inverse roll by -(size / 2)
 * (ifftshift). Fail for an axis out of range. */
NV_API nv_array *nv_fft_fftshift(const nv_array *a, const int *axes, int naxes);
NV_API nv_array *nv_fft_ifftshift(const nv_array *a, const int *axes, int naxes);

/* NumPy's einsum over `n` operands: `subscripts` as "ij,jk->ik" (letters, one "..." per
 * operand for broadcast leading axes; without "->" the output is the labels that appear once,
 * sorted, after the broadcast axes). A label repeated in one operand takes its diagonal; labels
 * absent from the output are summed. Computed as NumPy's greedy path of pairwise contractions,
 * each a transpose, reshape and (batched) matmul. A label of size 1 in one operand broadcasts
 * to its size in the others (MLX). Fails for malformed subscripts, a term whose labels do not
 * match its operand's dimensions, and sizes that disagree otherwise. */
NV_API nv_array *nv_einsum(const char *subscripts, const nv_array *const *operands, int n);

/* The contraction order nv_einsum uses (NumPy's greedy path): writes the pairs of positions
 * contracted at each step into path (2 ints per step; the result of a step goes to the end of
 * the list, as NumPy's), their count into *nsteps (max(1, n - 1); one operand: one step
 * (0, -1)), and MLX's report (the contraction, the naive and optimized scaling and FLOP counts)
 * into report (report_size bytes, truncated, NUL-terminated) when it is not NULL. `path` holds
 * 2 * max(1, n - 1) ints. Fails as nv_einsum does (status, with the message in nv_last_error). */
NV_API nv_status nv_einsum_path(const char *subscripts, const nv_array *const *operands, int n,
                                int *path, int *nsteps, char *report, size_t report_size);

/* The Walsh-Hadamard transform of the last axis, as MLX's hadamard_transform: (H a) * scale
 * with H the Sylvester Hadamard matrix of the axis's length n where n is a power of two; for
 * n = m * 2^k with m = 12, 20 or 28, H = H_m ⊗ H_(2^k) with MLX's H_m (Sloane's matrices).
 * scale NULL means 1/sqrt(n). Integer and bool inputs give float32; float16/bfloat16 stay; a
 * 0-d input is one element (as MLX). Fails with NV_ERR_INVALID_ARGUMENT for other lengths. */
NV_API nv_array *nv_hadamard_transform(const nv_array *a, const double *scale);

/* The modes of nv_convolve, as NumPy's: every overlap (length N + M - 1), the centre part of
 * length max(N, M), or the full overlaps only (length max(N, M) - min(N, M) + 1). */
typedef enum nv_convolve_mode {
  NV_CONVOLVE_FULL = 0,
  NV_CONVOLVE_SAME = 1,
  NV_CONVOLVE_VALID = 2,
} nv_convolve_mode;

/* The discrete linear convolution of two 1-D arrays, as NumPy's and MLX's convolve (the longer
 * one is the signal; the result dtype is the promoted float dtype, integers giving float32).
 * Fails for operands that are not 1-D or are empty, and for complex64. */
NV_API nv_array *nv_convolve(const nv_array *a, const nv_array *v, nv_convolve_mode mode);

#ifdef __cplusplus
}
#endif

#endif
