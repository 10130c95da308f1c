/* The row driver of the reduce family's CPU kernels. A row is the set of elements over some
 * axes of the input (in row-major order of those axes) for one index of the other ("kept")
 * axes. Reductions write one value per row into a row-contiguous output; row-preserving ops
 * (scans, softmax, sorts) write a whole row into an output laid out row-major in the input's
 * shape. Rows are read in place when they are contiguous, else gathered (and converted) into
 * scratch rows; kernels split rows over the pool. */
#ifndef NUVEC_CPU_REDUCE_ROWS_H
#define NUVEC_CPU_REDUCE_ROWS_H

#include <stdatomic.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"

/* Hot loops get AVX2 and AVX-512 clones picked at load time (NV_KERNEL_CLONES: not under the
 * sanitizers, whose runtimes are not ready when ifunc resolvers run). */
#define NV_CLONES NV_KERNEL_CLONES

typedef struct nv__rows {
  int nk, nr;
  int64_t kshape[NV__MAX_DIMS], kin[NV__MAX_DIMS], kout[NV__MAX_DIMS];
  int64_t rshape[NV__MAX_DIMS], rin[NV__MAX_DIMS], rout[NV__MAX_DIMS];
  int64_t nrows, len;
  const char *in;
  nv_dtype idt;
  int64_t isz;
  char *out;
  nv_dtype odt;
  int64_t osz;
  atomic_int failed; /* set by a range that could not allocate its scratch */
} nv__rows;

/* Plans rows of `in` over the sorted axes `axes`. `keep_rows`: the output holds whole rows
 * (laid out row-major in the input's shape), else one value per row. The output must be
 * allocated. */
void nv__rows_init(nv__rows *r, const nv__operand *in, const int *axes, int naxes,
                   nv__output *out, bool keep_rows);

/* The start of a row kernel: allocates the node's output and plans the rows of input 0 over
 * the node's row axes (nv__rows_params). Returns 1 to run, 0 when the output is empty, -1 out
 * of memory (the error set). */
int nv__rows_begin(nv__node *node, const nv__operand *in, bool keep_rows, nv__rows *r);

/* Element offsets of row `i` in the input and the output. */
int64_t nv__rows_in_offset(const nv__rows *r, int64_t i);
int64_t nv__rows_out_offset(const nv__rows *r, int64_t i);

/* Whether rows are contiguous (stride 1) in the input / in the output. */
bool nv__rows_in_contiguous(const nv__rows *r);
bool nv__rows_out_contiguous(const nv__rows *r);

/* Copies row `i` of the input into `dst` (contiguous), converted to `work`. */
void nv__rows_gather(const nv__rows *r, int64_t i, nv_dtype work, void *dst);
/* Writes the contiguous `src` (of dtype `work`) into row `i` of the output, converted. */
void nv__rows_scatter(const nv__rows *r, int64_t i, nv_dtype work, const void *src);

/* Runs fn over the rows split across the pool (about NV__PAR_GRAIN elements per task). */
void nv__rows_parallel(nv__rows *r, nv__range_fn fn, void *ctx);

/* log(sum(exp(x))) of a float32 row with the softmax kernel's vectorized exponential;
 * `scratch` holds n floats; `next` (or NULL) is the next row, prefetched meanwhile
 * (reduce_softmax.c). An empty row gives -inf. */
double nv__row_logsumexp_f32(const float *x, int64_t n, float *scratch, const float *next);

/* The reduce family's kernels. */
nv_status nv__k_reduce(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_row_reduce(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_softmax(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_scan(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_sort(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_median(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_arg_reduce(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_argtopk(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_searchsorted(nv__node *node, const nv__operand *in, int donated);

#endif
