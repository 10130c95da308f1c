/* Parameters of the linalg primitives, shared by the builders (src/ops/linalg.c) and the
 * kernels (src/cpu/linalg*.c).
 *
 * matmul: inputs a (..., M, K) and b (..., K, N) of the result dtype, batch axes broadcast
 *   right-aligned to the output's (..., M, N); no parameters.
 * addmm: inputs c, a, b, all of the result dtype; c broadcasts right-aligned to the output.
 * vecdot: inputs a (..., K) and b (..., K) of the result dtype, contracted over their last
 *   axes, the other axes broadcast right-aligned to the output; no parameters. */
#ifndef NUVEC_OPS_LINALG_PARAMS_H
#define NUVEC_OPS_LINALG_PARAMS_H

typedef struct nv__addmm_params {
  double alpha, beta;
} nv__addmm_params;

#endif
