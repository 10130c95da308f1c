/* Primitives of the optim family (see src/core/prims.h for the entry format):
 *   ADAM_UPDATE  one Adam/AdamW step of one parameter in one pass: inputs p, g, m, v and the
 *                0-d scalars, outputs p', m', v' (src/ops/optim.h). Its donation is by pairs
 *                (NV__ADAM_DONATE_PAIRS, src/core/eval.c): p' may take p's buffer, m' m's
 *                and v' v's, each where that input is owned outright and of its output's
 *                dtype and shape, so a step whose old parameters and state are dropped before
 *                it runs updates them in place (as PyTorch's optimizers do). */
#ifndef NUVEC_OPS_PRIMS_OPTIM_H
#define NUVEC_OPS_PRIMS_OPTIM_H

#define NV__PRIMS_OPTIM(X) X(ADAM_UPDATE, "adam_update", D_NONE, false, false)

/* adam_update's (output, input) donation pairs: p' from p, m' from m, v' from v. */
#define NV__ADAM_DONATE_PAIRS {{0, 0}, {1, 2}, {2, 3}}

#endif
