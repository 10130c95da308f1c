/* Internal builders of the fused activations (src/ops/elementwise_act.c), used by the rules. */
#ifndef NUVEC_OPS_ELEMENTWISE_ACT_H
#define NUVEC_OPS_ELEMENTWISE_ACT_H

#include "nuvec.h"

/* gelu in one of its forms (an NV__ACT_GELU* mode). */
nv_array *nv__gelu(int mode, const nv_array *x);

/* g f'(x) for an NV__ACT_* mode in one pass: `a` is x for the GELU forms and the output
 * y = f(x) for tanh and sigmoid; g is converted to a's dtype and both broadcast together. */
nv_array *nv__act_vjp(int mode, const nv_array *a, const nv_array *g);

/* The temporaries of a composed formula (the second derivatives in the rules): nv__temp records each, nv__temps_release drops them together once the result
 * is held. At most 24 a formula. */
typedef struct nv__temps {
  nv_array *a[24];
  int n;
} nv__temps;
static inline nv_array *nv__temp(nv__temps *t, nv_array *x) {
  t->a[t->n++] = x;
  return x;
}
static inline void nv__temps_release(nv__temps *t) {
  for (int i = 0; i < t->n; i++) nv_release(t->a[i]);
  t->n = 0;
}

#endif
