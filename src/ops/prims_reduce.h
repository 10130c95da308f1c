/* Primitives of the reduce family (see src/core/prims.h for the entry format). sum itself is a
 * core primitive (prims_core.h); its kernel is the reduction engine these share. */
#ifndef NUVEC_OPS_PRIMS_REDUCE_H
#define NUVEC_OPS_PRIMS_REDUCE_H

#define NV__PRIMS_REDUCE(X)                                    \
  X(PROD, "prod", D_NONE, false, false)                        \
  X(MAX, "max", D_NONE, false, false)                          \
  X(MIN, "min", D_NONE, false, false)                          \
  X(ALL, "all", D_NONE, false, false)                          \
  X(ANY, "any", D_NONE, false, false)                          \
  X(MEAN, "mean", D_NONE, false, false)                        \
  X(COUNT_NONZERO, "count_nonzero", D_NONE, false, false)      \
  X(VAR, "var", D_NONE, false, false)                          \
  X(STD, "std", D_NONE, false, false)                          \
  X(MEDIAN, "median", D_NONE, false, false)                    \
  X(LOGSUMEXP, "logsumexp", D_NONE, false, false)              \
  X(ARGMAX, "argmax", D_NONE, false, false)                    \
  X(ARGMIN, "argmin", D_NONE, false, false)                    \
  X(SOFTMAX, "softmax", D_0, true, false)                      \
  X(CUMSUM, "cumsum", D_NONE, false, false)                    \
  X(CUMPROD, "cumprod", D_NONE, false, false)                  \
  X(CUMMAX, "cummax", D_NONE, false, false)                    \
  X(CUMMIN, "cummin", D_NONE, false, false)                    \
  X(LOGCUMSUMEXP, "logcumsumexp", D_NONE, false, false)        \
  X(SORT, "sort", D_NONE, false, false)                        \
  X(ARGSORT, "argsort", D_NONE, false, false)                  \
  X(PARTITION, "partition", D_NONE, false, false)              \
  X(ARGPARTITION, "argpartition", D_NONE, false, false)        \
  X(ARGTOPK, "argtopk", D_NONE, false, false)                  \
  X(SEARCHSORTED, "searchsorted", D_NONE, false, false)

#endif
