/* Parameters of the optim family's primitives, shared by the builders and the kernels. Plain
 * data stored inline in the node. */
#ifndef NUVEC_OPS_OPTIM_PARAMS_H
#define NUVEC_OPS_OPTIM_PARAMS_H

#include <stdbool.h>

/* adam_update: the optimizer's constants as given (the kernels convert them to the compute
 * type: float for float16/bfloat16/float32, double for float64), and which terms the update
 * has. `decoupled` is AdamW's decay of the parameter (p * decay before the step); with
 * `bias_correction` the step is c1 * m' / (sqrt(v') * c2 + eps), else lr * m' / (sqrt(v') +
 * eps). */
typedef struct nv__adam_params {
  double beta1, beta2, eps;
  bool decoupled, bias_correction;
} nv__adam_params;

/* The node's inputs, in order: p, g, m, v, then the 0-d scalars: lr (c1 with bias
 * correction), c2 with bias correction, decay when decoupled. */
enum { NV__ADAM_P, NV__ADAM_G, NV__ADAM_M, NV__ADAM_V, NV__ADAM_SCALARS };

#endif
