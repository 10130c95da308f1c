/* Parameters of the decomposition primitives (src/ops/prims_linalg.h's NV__PRIMS_LINALG_DECOMP),
 * shared by the builders (src/ops/linalg_decomp.c), the CPU kernels (src/cpu/linalg_lapack.c),
 * the CUDA kernels (src/cuda/linalg_solver.c) and the rules (rules_linalg_decomp.c).
 *
 * Every primitive takes its matrices as (..., M, N) of one computing dtype (float32, float64,
 * complex64 where allowed), any layout, and writes row-contiguous outputs:
 *   cholesky         in a (..., N, N); out L (lower) or U (upper), the other triangle zero.
 *                    A matrix that is not positive definite gives a matrix of NaN.
 *   lu_factor        in a (..., M, N); out 0: LU (..., M, N) (unit-lower L below the diagonal,
 *                    U on and above), out 1: pivots uint32 (..., K) (K = min(M, N), row i was
 *                    swapped with row pivots[i], 0-based), out 2: perm uint32 (..., M): MLX's
 *                    lu permutation (a = L[perm] @ U).
 *   solve_triangular in a (..., N, N), b (..., N, R) with the same batch shape; out x with
 *                    a x = b, reading only a's `upper` or lower triangle.
 *   qr               in a (..., M, N); out Q (..., M, K), R (..., K, N) (LAPACK's signs).
 *   svd              in a (..., M, N); out S (..., K) real, or U (..., M, M), S, Vh (..., N, N)
 *                    when compute_uv (then the outputs are U, S, Vh in that order).
 *   eigh             in a (..., N, N) reading the `upper` or lower triangle; out w (..., N)
 *                    real ascending, and V (..., N, N) (columns) when vectors.
 *   eig              in a (..., N, N); out w (..., N) complex64, and V complex64 when vectors.
 * A NaN in an svd, eigh or eig input gives NaN outputs (LAPACK's iterations are not defined
 * on them); so does an iteration that does not converge. */
#ifndef NUVEC_OPS_LINALG_DECOMP_PARAMS_H
#define NUVEC_OPS_LINALG_DECOMP_PARAMS_H

#include <stdbool.h>

typedef struct nv__decomp_params {
  bool upper;   /* cholesky, solve_triangular, eigh: the triangle used */
  bool vectors; /* svd: compute_uv; eigh, eig: eigenvectors */
} nv__decomp_params;

#endif
