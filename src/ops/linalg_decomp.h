/* The decomposition family's internal builder, for its transform rules
 * (src/transforms/rules_linalg_decomp.c). */
#ifndef NUVEC_OPS_LINALG_DECOMP_H
#define NUVEC_OPS_LINALG_DECOMP_H

#include "core/internal.h"
#include "ops/linalg_decomp_params.h"

/* A node of decomposition primitive `prim` (NV__PRIM_CHOLESKY ... NV__PRIM_EIG) over `in`
 * (one input; solve_triangular two of one batch shape) with parameters `p`; writes all its
 * outputs (their count per prim: ops/linalg_decomp_params.h) to out[] and returns the status
 * of out[0]. */
nv_status nv__linalg_decomp(int prim, nv_array *const *in, const nv__decomp_params *p,
                            nv_array **out);

#endif
