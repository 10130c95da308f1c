/* Primitives of the transforms family (see src/core/prims.h for the entry format):
 *   VMAP_INPUT     the stand-in vmap traces in place of a mapped input (never evaluated)
 *   CUSTOM         the outputs of a custom function: output i is input i (no copy); the
 *                  node's rules are the user's closures (custom_function, checkpoint)
 *   COMPILE_INPUT  the stand-in compile traces in place of an input (never evaluated)
 *   COMPILED       a chain of element-wise nodes fused by compile into a generated kernel
 *                  (src/transforms/fuse.c); D_NONE here, its donation rule is
 *                  nv__compiled_donates (any data input, element-wise kernels only)
 *   AS_STRIDED_VJP the adjoint of as_strided: a cotangent scattered (summed) back into the
 *                  row-contiguous data it viewed */
#ifndef NUVEC_OPS_PRIMS_TRANSFORMS_H
#define NUVEC_OPS_PRIMS_TRANSFORMS_H

#define NV__PRIMS_TRANSFORMS(X)                               \
  X(VMAP_INPUT, "vmap_input", D_NONE, false, false)           \
  X(CUSTOM, "custom_function", D_NONE, false, false)          \
  X(AS_STRIDED_VJP, "as_strided_vjp", D_NONE, false, false) \
  X(COMPILE_INPUT, "compile_input", D_NONE, false, false)   \
  X(COMPILED, "compiled", D_NONE, false, false)

#endif
