/* nuvec — matrix products: matmul, addmm, tensordot, inner, outer, vecdot, kron.
 *
 * The builders follow the conventions of nuvec/ops.h: lazy, inputs borrowed, a new array
 * returned (owned by the caller or the innermost scope), never NULL; bad arguments give an
 * array that carries an error naming the op and the shapes.
 *
 * Dtypes. Operands are promoted with MLX's table (nv_promote_types) and the product is
 * computed in the promoted dtype. float32, float64 and complex64 go to OpenBLAS (sgemm, dgemm,
 * cgemm); float16 and bfloat16 are computed in float32 and rounded once to the result dtype.
 * MLX accepts only inexact dtypes for matrix products; nuvec also computes integer products,
 * exactly: the sums of products are carried modulo 2^64 (modulo 2^32 for results of 32 bits
 * or fewer, which gives the same bits) and wrap into the result dtype, as NumPy's integer
 * matmul does. A product whose operands are both bool fails, as in MLX (NumPy would give the
 * "or of ands"); bool mixed with another dtype promotes to that dtype. */
#ifndef NUVEC_LINALG_H
#define NUVEC_LINALG_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The matrix product a @ b as MLX's and NumPy's matmul: the last two axes are the matrices and
 * the leading (batch) axes broadcast. A 1-D `a` is treated as a row (1, K) and a 1-D `b` as a
 * column (K, 1), and the added axis is removed from the result. K = 0 gives zeros; M = 0 or
 * N = 0 gives an empty result. NaN and infinities propagate as in IEEE arithmetic. Fails for a
 * 0-d operand, for a last axis of `a` that differs from the second-to-last of `b` (the message
 * names both shapes), for batch axes that do not broadcast, and for two bool operands. */
NV_API nv_array *nv_matmul(const nv_array *a, const nv_array *b);

/* alpha * (a @ b) + beta * c, as MLX's addmm(c, a, b, alpha, beta): `a` and `b` as nv_matmul,
 * and `c` broadcast to the shape of a @ b (it must broadcast to it; it may be 0-d). The result
 * dtype is the promotion of the three dtypes, as MLX; where that is an integer dtype the
 * result is float32 (alpha and beta are weak float scalars, as in MLX's promotion of Python
 * floats), computed in float32. BLAS semantics, as MLX: beta = 0 does not read `c` (a NaN in
 * `c` does not propagate) and alpha = 0 does not compute a @ b. Fails as nv_matmul, when `c`
 * does not broadcast to the product's shape, and when `a`, `b` and `c` are all bool (bool `a`
 * and `b` with a float `c` compute in the float dtype, as MLX). */
NV_API nv_array *nv_addmm(const nv_array *c, const nv_array *a, const nv_array *b, double alpha,
                          double beta);

/* The tensor product of `a` and `b` summed over the last `axes` axes of `a` and the first
 * `axes` axes of `b` (MLX's tensordot with an integer; axes = 0 is the outer product). The
 * result has the remaining axes of `a`, then those of `b`. Fails for axes < 0, for axes greater
 * than either operand's number of dimensions, for contracted sizes that differ, and for two
 * bool operands. */
NV_API nv_array *nv_tensordot(const nv_array *a, const nv_array *b, int axes);

/* The tensor product summed over the axes `axes_a[i]` of `a` paired with `axes_b[i]` of `b`
 * (`naxes` pairs; negative axes count from the end), as MLX's tensordot with two lists. The
 * result has the remaining axes of `a` in order, then those of `b`. Fails for an axis out of
 * range or listed twice, for paired sizes that differ, and for two bool operands. */
NV_API nv_array *nv_tensordot_axes(const nv_array *a, const nv_array *b, const int *axes_a,
                                   const int *axes_b, int naxes);

/* The inner product as MLX's inner: for 1-D operands the dot product; in higher dimensions
 * the sum of products over the last axes (result: the other axes of `a`, then those of `b`).
 * When either operand is 0-d it is the element-wise product, as MLX and NumPy. Fails when the
 * last axes differ in size and for two bool operands of at least one dimension. */
NV_API nv_array *nv_inner(const nv_array *a, const nv_array *b);

/* The outer product of `a` and `b` flattened (MLX's outer): shape (size of a, size of b),
 * the element-wise product's dtype (bool gives "and", integers wrap). */
NV_API nv_array *nv_outer(const nv_array *a, const nv_array *b);

/* The vector dot product sum(conj(a) * b) along `axis`, as MLX's vecdot and NumPy's (≥ 2.0)
 * vecdot: the first operand is conjugated for complex64. `axis` (negative from the end) is
 * taken in each operand, the two sizes there must match, and the other axes broadcast. The
 * result dtype is that of MLX's sum of the promoted dtype: bool, int8 and int16 give int32,
 * uint8 and uint16 give uint32, other dtypes keep theirs (integers wrap). Floats are summed
 * accurately (float16/bfloat16/float32 in float64, float64 pairwise), then rounded once. An
 * empty axis gives zeros. Fails for 0-d operands, an axis out of range for either operand,
 * sizes that differ along it, and other axes that do not broadcast. */
NV_API nv_array *nv_vecdot(const nv_array *a, const nv_array *b, int axis);

/* The Kronecker product of `a` and `b` (MLX's kron): the operand with fewer dimensions gets
 * leading axes of size 1, and result axis i has size a_i * b_i with element
 * a[i / b_shape] * b[i % b_shape]. The element-wise product's dtype (bool gives "and"). Fails
 * for an empty operand, as MLX. */
NV_API nv_array *nv_kron(const nv_array *a, const nv_array *b);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_LINALG_H */
