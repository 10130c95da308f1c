/* Declarators shared by the rule files (src/transforms/rules_*.c): VJP(name), JVP(name) and
 * VMAP(name) open a rule with the signatures of nv__vjp_rule, nv__jvp_rule and nv__vmap_rule
 * (transforms_internal.h), every parameter allowed to go unused; meta(x) is x's output. */
#ifndef NUVEC_TRANSFORMS_RULE_DECLS_H
#define NUVEC_TRANSFORMS_RULE_DECLS_H

#include "transforms/transforms_internal.h"

#define U __attribute__((unused))
#define VJP(name)                                                                          \
  static nv_status name(const nv__node *n U, nv_array *const *in U, nv_array *const *out U, \
                        nv_array *const *cot U, const bool *want U, nv_array **grad U)
#define JVP(name)                                                                          \
  static nv_status name(const nv__node *n U, nv_array *const *in U, nv_array *const *out U, \
                        nv_array *const *tan U, nv_array **ot U)
#define VMAP(name)                                                                      \
  static nv_status name(const nv__node *n U, nv_array *const *in U, const int *axes U, \
                        nv_array **out U, int *oax U)

static inline const nv__output *meta(const nv_array *x) { return nv__out(x); }

#endif
