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

/* ---- Linear algebra: MLX's mx.linalg (src/ops/linalg_decomp.c) ----
 *
 * Matrices are the last two axes; leading axes are a batch (each matrix on its own). Unless an
 * entry says otherwise the input must have at least 2 dimensions and dtype float32 or float64
 * (MLX's rule; integers and float16 fail, naming the op); results keep that dtype. Empty
 * matrices (a 0 dimension) give empty results. Factorizations run on LAPACK on the CPU and on
 * cuSOLVER / cuBLAS on the GPU; results agree to rounding, not bit for bit. Functions with
 * several results write them to out[] (new references, registered as builders' results; on
 * bad arguments every one is a failed array) and return nv_array_status(out[0]).
 *
 * Transforms. vmap batches every function (one batched kernel). vjp and jvp go through
 * cholesky, inv, solve, solve_triangular, tri_inv, cholesky_inv, lu/lu_factor (square), det,
 * slogdet, qr (vjp; M >= N), eigh/eigvalsh, svd's singular values and the norms over them,
 * svd's U and Vh and pinv of square matrices (vjp): functions that read one triangle
 * (cholesky, eigh) get a gradient in that triangle. Complex inputs, eig/eigvals and U, Vh of
 * non-square matrices fail with NV_ERR_UNSUPPORTED naming the op. */

/* The norm of `a`, MLX's linalg.norm with ord None: over all axes when `axes` is NULL (the
 * 2-norm of the flattened array, any ndim), else over the 1 or 2 axes listed (the vector
 * 2-norm, or the Frobenius norm). Integer inputs give float32; complex inputs the norm of the
 * magnitudes (float32); float16/bfloat16 keep their dtype (computed in float32, rounded once),
 * float32/float64 theirs. `keepdims` keeps the reduced axes as size 1. Fails for more than 2
 * axes, an axis out of range or repeated. */
NV_API nv_array *nv_linalg_norm(const nv_array *a, const int *axes, int naxes, bool keepdims);

/* The norm of order `ord` (MLX's numeric ord). Axes NULL: `a` must be 1-D (vector norm) or 2-D
 * (matrix norm). Vector norms (one axis): inf max|x|, -inf min|x|, 0 the count of nonzeros,
 * 1 sum|x|, 2 the Euclidean norm, other p (sum|x|^p)^(1/p). Matrix norms (two axes r, c):
 * 1 / -1 the max / min over c of the column sums of |x| along r, inf / -inf the max / min over r
 * of the row sums along c, 2 / -2 the largest / smallest singular value; other orders fail.
 * inf and -inf of an empty vector fail (a max over nothing). */
NV_API nv_array *nv_linalg_norm_ord(const nv_array *a, double ord, const int *axes, int naxes,
                                    bool keepdims);

/* The matrix norms named "fro" (Frobenius) and "nuc" (nuclear: the sum of singular values)
 * over 2 axes (axes NULL: `a` must be 2-D). Other names, or one axis, fail. */
NV_API nv_array *nv_linalg_norm_str(const nv_array *a, const char *ord, const int *axes,
                                    int naxes, bool keepdims);

/* The Cholesky factor of a symmetric positive-definite matrix: L lower with a = L Lᵀ (upper:
 * U with a = Uᵀ U), reading only that triangle of `a`; the other triangle of the result is 0.
 * A matrix that is not positive definite gives NaN in all of its factor (MLX leaves it
 * undefined). Fails for a non-square matrix. */
NV_API nv_array *nv_linalg_cholesky(const nv_array *a, bool upper);

/* The inverse of the symmetric positive-definite matrix whose Cholesky factor is `l` (lower,
 * or upper when `upper`; only that triangle is read): (L Lᵀ)⁻¹ or (Uᵀ U)⁻¹, as MLX. */
NV_API nv_array *nv_linalg_cholesky_inv(const nv_array *l, bool upper);

/* The inverse of a square matrix (through its LU factorization). A singular matrix gives inf
 * or NaN entries (MLX raises; nuvec never synchronizes on the GPU to do so). */
NV_API nv_array *nv_linalg_inv(const nv_array *a);

/* The inverse of a triangular matrix, reading only its lower (upper) triangle; the other
 * triangle of the result is 0. A zero on the diagonal gives inf/NaN. */
NV_API nv_array *nv_linalg_tri_inv(const nv_array *a, bool upper);

/* The Moore-Penrose pseudo-inverse (..., N, M) of a (..., M, N) through its SVD: singular
 * values at most max(M, N) · eps · the largest are treated as zero (NumPy's rcond). */
NV_API nv_array *nv_linalg_pinv(const nv_array *a);

/* The LU factorization with partial pivoting as MLX's lu: out[0] = perm (uint32, (..., M)),
 * out[1] = L (..., M, K) unit lower, out[2] = U (..., K, N), K = min(M, N), with
 * a = L[perm] @ U (L's rows taken in the order perm). */
NV_API nv_status nv_linalg_lu(const nv_array *a, nv_array **out);

/* LAPACK's compact LU as MLX's lu_factor: out[0] = LU (..., M, N) (L's multipliers below the
 * diagonal, U on and above), out[1] = pivots (uint32, (..., K)): row i was swapped with row
 * pivots[i] (0-based) in turn. A singular matrix gives a zero on U's diagonal, no error. */
NV_API nv_status nv_linalg_lu_factor(const nv_array *a, nv_array **out);

/* The solution x of a @ x = b for square a (..., N, N): b is a vector (1-D, (N,)) or matrices
 * (..., N, R); the batch axes broadcast (NumPy's rule). The operands are promoted (integers to
 * float32), the result is float32 or float64. Singular a gives inf/NaN entries. Fails when
 * b's second-to-last (a vector's only) axis is not N. */
NV_API nv_array *nv_linalg_solve(const nv_array *a, const nv_array *b);

/* The solution of a @ x = b for triangular a (lower, or upper when `upper`; only that triangle
 * is read), b as in nv_linalg_solve. Operands must promote to float32 or float64. */
NV_API nv_array *nv_linalg_solve_triangular(const nv_array *a, const nv_array *b, bool upper);

/* The cross product along `axis` (negative from the end), where both operands have size 2 or
 * 3 (a size 2 is taken with a zero third component, as MLX); the other axes broadcast. The
 * result has size 3 along the axis and the promoted dtype (integers stay integers). */
NV_API nv_array *nv_linalg_cross(const nv_array *a, const nv_array *b, int axis);

/* The QR factorization (reduced): out[0] = Q (..., M, K) with orthonormal columns,
 * out[1] = R (..., K, N) upper triangular, K = min(M, N), with LAPACK's signs (as MLX). */
NV_API nv_status nv_linalg_qr(const nv_array *a, nv_array **out);

/* The singular value decomposition (full matrices, as MLX): when compute_uv, out[0] = U
 * (..., M, M), out[1] = S (..., K) descending, out[2] = Vh (..., N, N) with a = U[:, :K] S Vh[:K];
 * else out[0] = S only. float32, float64 and complex64 (S is real: float32). A NaN in a matrix
 * gives NaN in all its results (MLX raises). */
NV_API nv_status nv_linalg_svd(const nv_array *a, bool compute_uv, nv_array **out);

/* The eigenvalues (out[0], ascending, real) and eigenvectors (out[1], the columns, unit norm)
 * of a real symmetric or complex Hermitian matrix, reading its lower triangle (uplo "L") or
 * upper ("U"; any other string reads the upper, as MLX; NULL is "L"). float32, float64 and
 * complex64. */
NV_API nv_status nv_linalg_eigh(const nv_array *a, const char *uplo, nv_array **out);

/* The eigenvalues of nv_linalg_eigh only. */
NV_API nv_array *nv_linalg_eigvalsh(const nv_array *a, const char *uplo);

/* The eigenvalues (out[0]) and right eigenvectors (out[1], the columns, unit norm) of a general
 * square matrix, in LAPACK's order, both complex64 whatever the input (as MLX, also for float64
 * inputs). float32, float64 and complex64. */
NV_API nv_status nv_linalg_eig(const nv_array *a, nv_array **out);

/* The eigenvalues of nv_linalg_eig only (complex64). */
NV_API nv_array *nv_linalg_eigvals(const nv_array *a);

/* The determinant (through the LU factorization): any real dtype (integers and bool give
 * float32, float16/bfloat16 keep theirs, computed in float32). Singular matrices give 0. */
NV_API nv_array *nv_linalg_det(const nv_array *a);

/* sign (out[0]) and log|det| (out[1]) of the determinant, dtypes as nv_linalg_det; a singular
 * matrix gives sign 0 and log|det| -inf. */
NV_API nv_status nv_linalg_slogdet(const nv_array *a, nv_array **out);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_LINALG_H */
