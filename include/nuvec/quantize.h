/* nuvec — quantization: quantize, dequantize, quantized_matmul (MLX 0.32's formats), and the
 * gathered products gather_mm, gather_qmm and segmented_mm, and block_masked_mm.
 *
 * The builders follow the conventions of nuvec/ops.h: lazy, inputs borrowed, new arrays
 * returned (owned by the caller or the innermost scope); bad arguments give arrays that carry
 * an error naming the op ("quantize: ...") and the shapes.
 *
 * Modes (`mode`, a string as MLX's; NULL means "affine"), with their group sizes and bits
 * (0 picks the default, marked *):
 *   "affine"  group 32, 64*, 128; bits 1, 2, 3, 4*, 5, 6, 8; scales and biases in w's dtype.
 *   "mxfp4"   group 32; bits 4: E2M1 elements, E8M0 scales (uint8).
 *   "mxfp8"   group 32; bits 8: E4M3 elements, E8M0 scales (uint8).
 *   "nvfp4"   group 16; bits 4: E2M1 elements, E4M3 scales (uint8); optionally a global
 *             float32 scale (nv_quantize_scaled).
 * Every `group_size` consecutive elements of a row of w share a scale (and a bias). The
 * quantized elements of a row form one little-endian bit stream (element j at bits
 * [j*bits, (j+1)*bits)) stored in uint32 words: shape (..., K * bits / 32). The values are the
 * bits MLX writes for finite inputs (affine: computed in float32; scales rounded to w's dtype
 * after the elements are quantized with the float32 scale). A group holding inf or NaN has no
 * promised bits. */
#ifndef NUVEC_QUANTIZE_H
#define NUVEC_QUANTIZE_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Quantizes `w` (at least 2-D, float16, bfloat16, float32 or float64, last axis a multiple of
 * the group size) and appends to `out`: the packed uint32 elements, the scales and, in affine
 * mode, the biases (both of shape (..., K / group_size)). Affine: per group, with n = 2^bits-1,
 * s = max((max - min) / n, 1e-7), the edge (min or max, whichever is larger in magnitude) is
 * made exactly representable (q0 = rint(edge / s'), s' = edge / q0, bias = edge, or bias 0
 * where q0 is 0), and q = clamp(rint((w - bias) / s'), 0, n); bits = 1 uses s = max - min,
 * bias = min. mx modes: scale 2^ceil(log2(amax / maxval)) (1 for an all-zero group), stored
 * as its exponent + 127 modulo 256; nvfp4: scale E4M3(amax / 6), rounded to nearest. Elements
 * are w / scale rounded to the element format (E2M1 ties toward zero; E4M3 to nearest even,
 * saturating at 448). Fails (appending nothing) for a bad mode, group size, bits, dtype or
 * shape, with MLX's checks. */
NV_API nv_status nv_quantize(const nv_array *w, int group_size, int bits, const char *mode,
                             nv_vec *out);

/* The values quantized in `w` (packed uint32 of shape (..., Kw)) with `scales` (and `biases`
 * in affine mode; NULL otherwise) of shape (..., Kw * 32 / bits / group_size): shape
 * (..., Kw * 32 / bits). Affine computes s * q + b in the scales' dtype (float16 and bfloat16
 * round after the product and after the sum, as MLX) and converts to `dtype`; the fp modes
 * compute value * scale in `dtype` (the scale rounded to it first). `dtype` NV_DTYPE_COUNT
 * means the default: the scales' dtype in affine mode, bfloat16 otherwise. Fails for shapes
 * that do not match, a non-float `dtype`, or bad mode, group size or bits. */
NV_API nv_array *nv_dequantize(const nv_array *w, const nv_array *scales, const nv_array *biases,
                               int group_size, int bits, const char *mode, nv_dtype dtype);

/* x @ dequantize(w).T (`transpose`) or x @ dequantize(w), as MLX's quantized_matmul, without
 * materializing the dequantized matrix. x is (..., M, K) or 1-D (K); w (..., N, K*bits/32)
 * when transposed, else (..., K, N*bits/32); the batch axes of x and w broadcast. The result
 * dtype is the promotion of x's and the scales' dtypes in affine mode, x's dtype in the fp
 * modes (float32 for a non-float x); products accumulate in float32. On a GPU stream, more
 * than 32 rows of x per matrix dequantize w into the result dtype and use the dense matmul
 * (the weights then round to that dtype before the product). Fails for mismatched
 * shapes (the message gives them), scales and biases of different shapes, or bad mode, group
 * size or bits. */
NV_API nv_array *nv_quantized_matmul(const nv_array *x, const nv_array *w, const nv_array *scales,
                                     const nv_array *biases, bool transpose, int group_size,
                                     int bits, const char *mode);

/* a[lhs_indices] @ b[rhs_indices] as MLX's gather_mm: the indices are flat indices into the
 * batch axes (all but the last two) of `a` and `b` (NULL: every matrix, in the operand's batch
 * shape); the two index arrays broadcast, and the result has their shape + (M, N). Composed
 * of take and matmul (their gradients and kernels); `sorted_indices` is a hint and may be
 * ignored. Fails for operands of fewer than 2 dimensions, non-integer or out-of-range
 * indices, and index shapes that do not broadcast. */
NV_API nv_array *nv_gather_mm(const nv_array *a, const nv_array *b, const nv_array *lhs_indices,
                              const nv_array *rhs_indices, bool sorted_indices);

/* The quantized gather_mm, as MLX's gather_qmm: x[lhs_indices] multiplied by the matrices of
 * w (with their scales and biases) at rhs_indices, as nv_quantized_matmul. A primitive that
 * reads each pair's matrix of w in place (no gathered copy); on a GPU stream the products its
 * kernel does not take (not transposed, more than 8 rows of x per pair, K not a multiple of
 * 32, float64) are composed of take and quantized_matmul. `sorted_indices` (rhs ascending, as
 * after sorting the pairs by expert) lets the GPU compute consecutive pairs of one matrix
 * together; any order gives the same result. Negative indices wrap once (as take's). Fails as
 * nv_gather_mm and nv_quantized_matmul; an out-of-range index fails the evaluation. */
NV_API nv_array *nv_gather_qmm(const nv_array *x, const nv_array *w, const nv_array *scales,
                               const nv_array *biases, const nv_array *lhs_indices,
                               const nv_array *rhs_indices, bool transpose, int group_size,
                               int bits, const char *mode, bool sorted_indices);

/* The product of a (M, K) and b (K, N) per segment of the inner dimension, as MLX's
 * segmented_mm: `segments` holds integer (start, end) pairs (shape (..., 2)) and the result
 * has shape (..., M, N), entry s being a[:, start:end] @ b[start:end, :] (zeros for an empty
 * segment, end <= start). Composed of a mask per segment, multiply and matmul. Fails for
 * operands that are not 2-D (MLX: batched matmul is not supported), inner dimensions that
 * differ, or segments of another shape or a non-integer dtype. */
NV_API nv_array *nv_segmented_mm(const nv_array *a, const nv_array *b, const nv_array *segments);

/* nvfp4 with a per-tensor global scale g (a float32 array of one element), as MLX's
 * quantize(..., global_scale=g): each group's E4M3 scale encodes (amax / 6) * (2688 / g)
 * (2688 = 448 * 6) and decodes as its value * (g / 2688); the elements are E2M1(w / decoded
 * scale). `global_scale` NULL is nv_quantize. Fails as nv_quantize, and for a mode other than
 * nvfp4, or a global scale that is not float32 or has more than one element. */
NV_API nv_status nv_quantize_scaled(const nv_array *w, int group_size, int bits, const char *mode,
                                    const nv_array *global_scale, nv_vec *out);

/* The inverse of nv_quantize_scaled: element value * (scale value * (g / 2688)) in float32 (as
 * MLX, whose result is float32 whatever `dtype` asks for; float64 is kept). `global_scale` NULL
 * is nv_dequantize. Fails as nv_dequantize and nv_quantize_scaled. */
NV_API nv_array *nv_dequantize_scaled(const nv_array *w, const nv_array *scales,
                                      const nv_array *biases, int group_size, int bits,
                                      const char *mode, const nv_array *global_scale,
                                      nv_dtype dtype);

/* MLX's qqmm: x @ w.T with x (..., K) quantized and dequantized on the fly in `mode` ("nvfp4",
 * the default for NULL, "mxfp8" or "mxfp4"; not affine) and w either packed (uint32, with
 * `scales`, quantized with the same group size, bits and mode) or a float matrix (N, K)
 * quantized on the fly. x is float16, bfloat16 or float32 and the result has its dtype. The
 * nvfp4 global scales come both or neither: x's quantizes x, w's quantizes an unquantized w and
 * scales the product by g_w / 2688 (in float32). Composed of quantize, dequantize and
 * quantized_matmul; its vjp (and jvp) go straight through the quantizers: dx = g @
 * dequantize(w), dw = g^T @ qdq(x) for an unquantized w. (MLX's CPU backend has no vjp, runs
 * only the packed-w, one-row case and ignores the global scales there.) Fails for another
 * mode, another x dtype, mismatched shapes, a packed w without scales, an unquantized w that
 * is not 2-D, or one global scale alone. */
NV_API nv_array *nv_qqmm(const nv_array *x, const nv_array *w, const nv_array *scales,
                         int group_size, int bits, const char *mode,
                         const nv_array *global_scale_x, const nv_array *global_scale_w);

/* a (..., M, K) @ b (..., K, N) with blocks of block_size x block_size masked, as MLX's
 * block_masked_mm: mask_lhs (..., ceil(M/bs), ceil(K/bs)) over a's blocks, mask_rhs
 * (..., ceil(K/bs), ceil(N/bs)) over b's, mask_out (..., ceil(M/bs), ceil(N/bs)) over the
 * result's (each optional: NULL). A bool mask zeroes its false blocks exactly (whatever they
 * hold); another dtype's mask scales each block by its value. Composed of repeat, slice,
 * where / multiply and matmul. Fails for operands of fewer than 2 dimensions or of integer
 * dtypes, inner dimensions that differ, a non-positive block size, or masks of other shapes. */
NV_API nv_array *nv_block_masked_mm(const nv_array *a, const nv_array *b, int block_size,
                                    const nv_array *mask_out, const nv_array *mask_lhs,
                                    const nv_array *mask_rhs);

#ifdef __cplusplus
}
#endif

#endif
