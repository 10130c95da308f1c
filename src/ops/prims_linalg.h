/* Primitives of the linalg family (see src/core/prims.h for the entry format). */
#ifndef NUVEC_OPS_PRIMS_LINALG_H
#define NUVEC_OPS_PRIMS_LINALG_H

/* The decompositions (src/ops/linalg_decomp.c; parameters in ops/linalg_decomp_params.h). */
#define NV__PRIMS_LINALG_DECOMP(X)                      \
  X(CHOLESKY, "cholesky", D_NONE, false, false)         \
  X(LU_FACTOR, "lu_factor", D_NONE, false, false)       \
  X(SOLVE_TRIANGULAR, "solve_triangular", D_NONE, false, false) \
  X(QR, "qr", D_NONE, false, false)                     \
  X(SVD, "svd", D_NONE, false, false)                   \
  X(EIGH, "eigh", D_NONE, false, false)                 \
  X(EIG, "eig", D_NONE, false, false)

#define NV__PRIMS_LINALG(X)                 \
  X(MATMUL, "matmul", D_NONE, false, false) \
  X(ADDMM, "addmm", D_NONE, false, false)   \
  X(VECDOT, "vecdot", D_NONE, false, false) \
  NV__PRIMS_LINALG_DECOMP(X)

#endif
