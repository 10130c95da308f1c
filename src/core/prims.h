/* The one primitive enum, composed from one list per op family. Each entry is
 * X(NAME, "mlx_name", DONATE, ELEMENTWISE, VIEW):
 *   DONATE       inputs that may be donated, in order of preference (D_NONE, D_0, D_01, D_12,
 *                D_2)
 *   ELEMENTWISE  donation follows the element-wise rule (float16/bfloat16/float32 output, same
 *                dtype and exact shape) rather than the update-base rule (size only)
 *   VIEW         the output shares input 0's buffer (nv__view_params)
 * A family adds its primitives to its own list (src/ops/prims_<family>.h) and its CPU kernels
 * through its registration function (src/cpu/register.c lists them). */
#ifndef NUVEC_CORE_PRIMS_H
#define NUVEC_CORE_PRIMS_H

#include "ops/prims_core.h"
#include "ops/prims_elementwise.h"
#include "ops/prims_reduce.h"
#include "ops/prims_index.h"
#include "ops/prims_linalg.h"
#include "ops/prims_random.h"
#include "ops/prims_transforms.h"
#include "ops/prims_optim.h"
#include "ops/prims_conv.h"
#include "ops/prims_fft.h"
#include "ops/prims_distributed.h"
#include "ops/prims_fast.h"
#include "ops/prims_fast_serving.h"
#include "ops/prims_fast_custom.h"
#include "ops/prims_quantize.h"

#define NV__PRIM_LIST(X)      \
  NV__PRIMS_CORE(X)           \
  NV__PRIMS_ELEMENTWISE(X)    \
  NV__PRIMS_REDUCE(X)         \
  NV__PRIMS_INDEX(X)          \
  NV__PRIMS_LINALG(X)         \
  NV__PRIMS_RANDOM(X)         \
  NV__PRIMS_TRANSFORMS(X)     \
  NV__PRIMS_OPTIM(X)          \
  NV__PRIMS_CONV(X)           \
  NV__PRIMS_FFT(X)            \
  NV__PRIMS_DISTRIBUTED(X)    \
  NV__PRIMS_FAST(X)           \
  NV__PRIMS_FAST_SERVING(X)   \
  NV__PRIMS_FAST_CUSTOM(X)    \
  NV__PRIMS_QUANTIZE(X)       \
  /* one family a line, each line ending in a backslash (this one ends the list) */

enum {
#define NV__PRIM_ENUM(name, str, donate, ew, view) NV__PRIM_##name,
  NV__PRIM_LIST(NV__PRIM_ENUM)
#undef NV__PRIM_ENUM
  NV__PRIM_COUNT
};

#endif
