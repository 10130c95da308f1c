/* The decompositions' small CUDA kernels (linalg_solver.cu) as their host code
 * (linalg_solver.c) launches them: from inside its captured operations, on the stream under
 * capture, over raw device addresses. Valid C11 and C++, nothing of nuvec's internals.
 *
 * Matrices are stored one after another (batch stride rows * cols elements). `flags` (one int
 * per matrix, may be NULL) marks matrices whose results must be NaN: a NaN in the input, or a
 * nonzero LAPACK-style info from the solver. Every launcher returns cudaGetLastError()'s
 * value as an int (0: launched). */
#ifndef NUVEC_CUDA_LINALG_SOLVER_H
#define NUVEC_CUDA_LINALG_SOLVER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element kinds: float32, float64, complex64, complex128. */
enum { NV__LS_F32 = 0, NV__LS_F64 = 1, NV__LS_C64 = 2, NV__LS_C128 = 3 };

/* dst[b] = src[b]ᵀ (src row-major rows × cols at batch stride `sstride` elements, 0 meaning
 * rows * cols; dst row-major cols × rows, contiguous), conjugated when `conj` (complex kinds);
 * a flagged matrix's dst is all NaN. src and dst do not overlap. */
int nv__ls_transpose(void *stream, int kind, const void *src, void *dst, int64_t batch,
                     int64_t rows, int64_t cols, int64_t sstride, int conj, const int *flags);

/* Zeroes the strict upper (keep_upper 0) or strict lower (keep_upper 1) triangle of each n × n
 * row-major matrix in place; a flagged matrix becomes all NaN. */
int nv__ls_triangle(void *stream, int kind, void *buf, int64_t batch, int64_t n, int keep_upper,
                    const int *flags);

/* flags[b] = 1 where matrix b (`per` elements) holds a NaN; other flags are left as they are
 * (the caller zeroes them first). */
int nv__ls_nan_flags(void *stream, int kind, const void *src, int64_t batch, int64_t per,
                     int *flags);

/* flags[b] |= info[b] != 0. */
int nv__ls_info_flags(void *stream, const int *info, int64_t batch, int *flags);

/* Fills each matrix's n × n identity (a batch of them). */
int nv__ls_eye(void *stream, int kind, void *dst, int64_t batch, int64_t n);

/* A batch of `batch` pointers base + b * stride_bytes into out (for cuBLAS/cuSOLVER batched
 * routines). */
int nv__ls_pointers(void *stream, void *base, int64_t stride_bytes, int64_t batch, void **out);

/* From LAPACK's 1-based pivots ipiv (k per matrix): piv = ipiv - 1 (uint32, k per matrix) and
 * perm (uint32, m per matrix) with a = L[perm] U; `rows` (m words per matrix of scratch) holds
 * the swapped rows of matrices too tall to keep them in shared memory. */
int nv__ls_pivots(void *stream, const int *ipiv, int64_t batch, int64_t m, int64_t k,
                  uint32_t *piv, uint32_t *perm, uint32_t *rows);

/* R (row-major k × n, zero below the diagonal) from geqrf's column-major m × n result. */
int nv__ls_qr_r(void *stream, int kind, const void *work, void *r, int64_t batch, int64_t m,
                int64_t n, int64_t k, const int *flags);

/* eig's outputs (complex64) from geev's: w (n complex of kind wkind: C64 or C128) and, when vr
 * is not NULL, the column-major right eigenvectors of kind vkind. A real vkind (F32 / F64)
 * holds LAPACK's packing of a conjugate pair (w_j = conj(w_{j+1}), im w_j > 0) into columns
 * j (real part) and j + 1 (imaginary part). Writes wout (n) and vout (row-major n × n). */
int nv__ls_eig_out(void *stream, int wkind, const void *w, int vkind, const void *vr,
                   void *wout, void *vout, int64_t batch, int64_t n, const int *flags);

/* Sets the n values of each flagged matrix to NaN (any kind; `flags` not NULL). */
int nv__ls_nan_values(void *stream, int kind, void *v, int64_t batch, int64_t n,
                      const int *flags);

#ifdef __cplusplus
}
#endif

#endif
