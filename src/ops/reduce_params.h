/* Parameters of the reduce family's primitives beyond the plain reductions (which use
 * nv__reduce_params from ops/params.h). Plain data stored inline in the node. */
#ifndef NUVEC_OPS_REDUCE_PARAMS_H
#define NUVEC_OPS_REDUCE_PARAMS_H

#include <stdbool.h>

/* Row operations (var, std, median, logsumexp, argmax/argmin, softmax, scans, sorts): the
 * input's axes that form each row (sorted, distinct, non-negative; one axis for scans and
 * sorts), with the options the primitive reads. */
typedef struct nv__rows_params {
  bool keepdims;  /* reductions: reduced axes kept as size 1 */
  bool reverse;   /* scans: from the end */
  bool inclusive; /* scans: each element includes itself */
  bool right;     /* searchsorted: the last insertion point */
  int ddof;       /* var/std */
  int k;          /* argtopk: indices kept per row */
  int naxes;
  int axes[];
} nv__rows_params;

#endif
