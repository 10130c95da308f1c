/* Primitives of the optim family (see src/core/prims.h for the entry format):
 *   ADAM_UPDATE  one Adam/AdamW step of one parameter in one pass: inputs p, g, m, v and the
 *                0-d scalars, outputs p', m', v' (src/ops/optim.h). Not donating: the
 *                evaluation's donation hands one input's buffer to output 0 of single-output
 *                nodes only, and this node has three outputs. */
#ifndef NUVEC_OPS_PRIMS_OPTIM_H
#define NUVEC_OPS_PRIMS_OPTIM_H

#define NV__PRIMS_OPTIM(X) X(ADAM_UPDATE, "adam_update", D_NONE, false, false)

#endif
