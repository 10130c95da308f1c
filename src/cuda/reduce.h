/* The reduce family's CUDA kernels behind C declarations: the parameter blocks the host code
 * (reduce_host.c, C11) fills and the kernels (reduce.cu, reduce_rows.cu) read, and the
 * lookups that hand the host each kernel's address. Valid C and C++; it includes no CUDA
 * header and nothing of the core, so the .cu files stay free of the core's C-only headers.
 *
 * The engine (reduce.cu) reduces a strided input over a set of axes, folded into kept dims
 * (the outputs, row-major) and reduced dims (each output's elements, walked row-major, which
 * arg-reductions count). An accumulator type and its operations form a "functor"; the op a
 * functor applies and the way its result is stored are runtime codes, so each functor is
 * compiled once per kernel (row, column, finish) rather than once per op and dtype. */
#ifndef NUVEC_CUDA_REDUCE_H
#define NUVEC_CUDA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nuvec/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dims a parameter block describes: every dim an array may have (NV__MAX_DIMS), so no layout
 * needs a copy first. */
#define NV__RED_DIMS 64

/* Functors: the accumulator and how it reads elements. */
enum {
  NV__RF_SUM_F16, /* float sums and means accumulated in float64, per input dtype */
  NV__RF_SUM_BF16,
  NV__RF_SUM_F32,
  NV__RF_SUM_F64,
  NV__RF_REAL1, /* float64 accumulators over any real dtype of 1, 2, 4, 8 bytes (runtime */
  NV__RF_REAL2, /* conversion): prod, max, min, var's passes, logsumexp's passes */
  NV__RF_REAL4,
  NV__RF_REAL8,
  NV__RF_INT1, /* uint64 accumulators over raw bits of 1, 2, 4, 8 bytes: integer sum, prod,  */
  NV__RF_INT2, /* max, min (wrapping; signed through a sign flip) and nonzero counts (all,  */
  NV__RF_INT4, /* any, count_nonzero) of every dtype */
  NV__RF_INT8,
  NV__RF_ARG1, /* (key, index) accumulators: argmax/argmin of 1, 2, 4, 8-byte dtypes */
  NV__RF_ARG2,
  NV__RF_ARG4,
  NV__RF_ARG8,
  NV__RF_COMPLEX, /* complex64 sum, mean, prod, max, min in float64 */
  NV__RF_MINMAX_F16, /* float max/min in the dtype's own precision (NaN wins) */
  NV__RF_MINMAX_BF16,
  NV__RF_MINMAX_F32,
  NV__RF_MINMAX_F64,
  NV__RF_ARGF_F16, /* float argmax/argmin comparing values (NaN wins, then the first index) */
  NV__RF_ARGF_BF16,
  NV__RF_ARGF_F32,
  NV__RF_ARGF_F64,
  NV__RF_COUNT
};

/* Ops (nv__red_params.op). */
enum {
  NV__RO_SUM,    /* + */
  NV__RO_PROD,   /* * */
  NV__RO_MAX,    /* max; floats: NaN wins; arg functors: argmax */
  NV__RO_MIN,    /* min; likewise */
  NV__RO_COUNT,  /* int functors: the number of nonzero elements (bits & mask != 0) */
  NV__RO_SQDEV,  /* real functors: sum of (x - ctx)^2, ctx the output's mean */
  NV__RO_EXPSUM  /* real functors: sum of exp(x - ctx), ctx the output's maximum (0 when it is
                    not finite) */
};

/* How results are stored (nv__red_params.fin). */
enum {
  NV__RFIN_PLAIN, /* the accumulated value converted to the output dtype */
  NV__RFIN_MEAN,  /* divided by `div` */
  NV__RFIN_FLIP,  /* int functors: the value with `flip` applied back (signed max/min) */
  NV__RFIN_ALL,   /* int functors: count == rsize, as bool */
  NV__RFIN_ANY,   /* int functors: count > 0, as bool */
  NV__RFIN_VAR,   /* real functors: sum / max(rsize - ddof, 0); NaN when rsize is 0 */
  NV__RFIN_STD,   /* the square root of that */
  NV__RFIN_LSE    /* real functors: ctx + log(sum), or ctx when ctx is not finite */
};

/* The engine's parameter block (one by-value kernel parameter). */
typedef struct nv__red_params {
  int32_t nk, nr;    /* kept dims (0 for a full reduction), reduced dims (1 at least) */
  int32_t op, fin;   /* NV__RO_*, NV__RFIN_* */
  int32_t dtype;     /* input nv_dtype (runtime conversions) */
  int32_t odtype;    /* output nv_dtype (NV_DTYPE_FLOAT64 for statistics in scratch) */
  int32_t ctx;       /* 1: the third view holds one float64 per output (mean, maximum) */
  int32_t partial;   /* 1: write accumulators (nsplit per output) instead of results */
  int32_t nsplit;    /* pieces each output's reduction is split into (1 at least) */
  int32_t group;     /* row kernel: threads per output; finish kernel: 1 or 32 */
  int32_t ddof;      /* var/std */
  int32_t nan_low;   /* argmin of an inexact dtype: NaN is the smallest key */
  int32_t oscratch;  /* 1: the output view is scratch (results from its start rounded up to 16
                        bytes) */
  int32_t vec_st;    /* arg col kernel: 1 when every reduced stride is a multiple of 16 bytes'
                        elements (16-byte loads where a thread's outputs start aligned) */
  int64_t nout;      /* outputs */
  int64_t rsize;     /* elements per output */
  int64_t chunk;     /* reduced elements per piece */
  int64_t in_off;    /* elements from the input view's start to element 0 */
  int64_t out_off;   /* elements from the output view's start to output 0 */
  uint64_t mask;     /* int functors, COUNT: bits that make an element nonzero */
  uint64_t flip;     /* int functors, MAX/MIN: bits flipped so unsigned order is the dtype's */
  double div;        /* NV__RFIN_MEAN's divisor */
  int64_t kshape[NV__RED_DIMS], kst[NV__RED_DIMS]; /* kept dims: sizes, element strides */
  int64_t rshape[NV__RED_DIMS], rst[NV__RED_DIMS]; /* reduced dims */
} nv__red_params;

/* One functor's kernels, each `void k(const void *in, void *out, const void *aux,
 * nv__red_params p)`:
 *  - row: each output (or piece of one) reduced by `group` threads (32..1024; a block of
 *    max(group, 256) threads holds 256/group outputs when group is 32); 16-byte loads where the
 *    innermost reduced dim is contiguous.
 *  - col: blocks of 32 x `by` threads: 32 consecutive outputs a block, the reduction split
 *    over threadIdx.y (then combined in order through shared memory) and over blockIdx.y
 *    (`nsplit` pieces).
 *  - fin: combines the `nsplit` accumulators of each output (in order) and stores the result:
 *    one thread per output (group 1) or one warp (group 32); nsplit 0 stores the identity.
 * Accumulators in scratch (partial = 1) sit at index piece * nout + output, from the view's
 * start rounded up to 16 bytes (ask for 16 bytes more). `acc_size` is their size. */
typedef struct nv__red_kernels {
  const void *row, *col, *fin;
  /* col with 16 bytes of consecutive outputs a thread (`vec` of them; by <= 8), for the
   * float sum and max/min functors (else NULL): needs the innermost kept dim contiguous and a
   * multiple of `vec` long, and no context. */
  const void *colv;
  int vec;
  size_t acc_size;
} nv__red_kernels;

nv__red_kernels nv__red_kernels_of(int functor);

/* The fast argmax/argmin kernels of a real dtype (reduce_arg.cu; all NULL for complex64), on
 * the engine's parameter block with op NV__RO_MAX and `flip` the bits xored into every 64 bits
 * read (argmin: the sign bit of each float element, or all bits of integers; argmax: 0):
 *  - row: the reduced elements of each output one contiguous run (nr 1, rst[0] 1): `group`
 *    threads (a power of two, 1..1024; blocks of max(group, 256)) per output or piece.
 *  - col (one output a thread) and colv (`vec` consecutive outputs a thread, 16 bytes of
 *    input a row; the innermost kept dim a multiple of `vec` long): the innermost kept dim
 *    contiguous; blocks of at most 256 threads, 32 * 2^k x blockDim.y, blockDim.x * V
 *    consecutive outputs a block, pieces over blockIdx.y.
 *  - fin: as the engine's (nsplit >= 1; group 1 or 32), storing the indices.
 * Results are the uint32 indices; accumulators (partial = 1) are `acc_size` bytes. */
nv__red_kernels nv__arg_kernels_of(nv_dtype dtype);

/* softmax and logsumexp over contiguous float rows (reduce_rows.cu). */
typedef struct nv__rows_fast_params {
  int32_t nk;      /* kept dims of the input (the rows), row-major */
  int32_t group;   /* threads per row: a power of two, 1..1024 */
  int32_t dtype;   /* float16, bfloat16, float32 or float64 (input and output) */
  int32_t vec;     /* 1: n and every kept stride are multiples of 16 bytes' elements (16-byte
                      loads where the views' starts plus offsets are aligned) */
  int64_t nrows, n; /* rows, elements per row (n >= 1) */
  int64_t in_off, out_off;
  int64_t kshape[NV__RED_DIMS], kst[NV__RED_DIMS]; /* input strides of the kept dims */
} nv__rows_fast_params;

/* The row kernels' plan for rows of n elements (reduce_host.c launches it; the sweep
 * bench/gpu/rows_sweep.cu runs the same plan as its "lib" candidate). The register kernel
 * gives each row a group of `group` threads (a power of two, 1..NV__ROWS_MAX_GROUP): groups
 * of up to a warp share warps and blocks of NV__ROWS_SHORT_BLOCK threads and reduce by
 * shuffles alone; a larger group is its block, its warps exchanging their maximum and sum
 * through shared memory once. Each thread holds `vpl` 16-byte pieces of its row in registers
 * (piece k * group + thread: every load of a warp is contiguous), so a row is read once.
 * vpl is the dtype's base while the row fits NV__ROWS_MAX_GROUP threads, else its wide one
 * (0: none; the half types' wide kernel only for rows whose elements, strides and offsets
 * are multiples of 8, its element-at-a-time path needing more than its 64 registers), and
 * longer rows take the long-row kernel (an online maximum and sum, the row read twice by
 * softmax). Base kernels keep each element's exponential in registers, wide ones compute it
 * again (reduce_rows.cu's table, which instantiates exactly these vpl). These constants are
 * the knobs of the sweep: a winner with other pieces a thread changes them here. */
#define NV__ROWS_MAX_GROUP 512
#define NV__ROWS_SHORT_BLOCK 128
#define NV__ROWS_VPL_HALF 4      /* float16, bfloat16: 32 elements a thread, rows up to 16384 */
#define NV__ROWS_VPL_HALF_WIDE 8 /* rows up to 32768 */
#define NV__ROWS_VPL_F32 4       /* 16 elements a thread: rows up to 8192 */
#define NV__ROWS_VPL_F32_WIDE 8  /* rows up to 16384 */
#define NV__ROWS_VPL_F64 4       /* 8 elements a thread: rows up to 4096 */
#define NV__ROWS_VPL_F64_WIDE 0
#define NV__ROWS_LONG_GROUP 1024 /* the long-row kernel: a block of 1024 threads per row */

typedef struct nv__rows_plan {
  int32_t long_rows; /* 1: the long-row kernel */
  int32_t vpl;       /* register kernel: 16-byte pieces a thread holds */
  int32_t group;     /* threads per row */
  int32_t block;     /* threads per block */
} nv__rows_plan;

static inline int32_t nv__rows_vpl(nv_dtype dtype, int wide) {
  switch (dtype) {
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: return wide ? NV__ROWS_VPL_HALF_WIDE : NV__ROWS_VPL_HALF;
    case NV_DTYPE_FLOAT32: return wide ? NV__ROWS_VPL_F32_WIDE : NV__ROWS_VPL_F32;
    default: return wide ? NV__ROWS_VPL_F64_WIDE : NV__ROWS_VPL_F64;
  }
}

/* Elements of a 16-byte piece: 8, 4 or 2 (float16/bfloat16, float32, float64). */
static inline int64_t nv__rows_vw(nv_dtype dtype) {
  return dtype == NV_DTYPE_FLOAT64 ? 2 : dtype == NV_DTYPE_FLOAT32 ? 4 : 8;
}

/* The longest row the register kernel holds (aligned rows). */
static inline int64_t nv__rows_reg_max(nv_dtype dtype) {
  int32_t v = nv__rows_vpl(dtype, 1);
  if (v == 0) v = nv__rows_vpl(dtype, 0);
  return (int64_t)NV__ROWS_MAX_GROUP * v * nv__rows_vw(dtype);
}

/* The plan for rows of n >= 1 elements; aligned: n, the rows' strides and the offsets are
 * multiples of nv__rows_vw(dtype) (the kernels check the addresses themselves). */
static inline nv__rows_plan nv__rows_plan_of(nv_dtype dtype, int64_t n, int aligned) {
  nv__rows_plan pl = {0, 0, 1, NV__ROWS_SHORT_BLOCK};
  int64_t vw = nv__rows_vw(dtype), pieces = (n + vw - 1) / vw;
  int32_t base = nv__rows_vpl(dtype, 0), wide = nv__rows_vpl(dtype, 1);
  if (vw == 8 && !aligned) wide = 0;
  if (pieces <= (int64_t)NV__ROWS_MAX_GROUP * base) pl.vpl = base;
  else if (wide > 0 && pieces <= (int64_t)NV__ROWS_MAX_GROUP * wide) pl.vpl = wide;
  else {
    pl.long_rows = 1;
    pl.group = pl.block = NV__ROWS_LONG_GROUP;
    return pl;
  }
  while ((int64_t)pl.group * pl.vpl < pieces) pl.group <<= 1;
  if (pl.group > 32) pl.block = pl.group;
  return pl;
}

/* `void k(const void *in, void *out, const void *unused, nv__rows_fast_params p)` for a
 * plan (group in p.group; blocks of plan->block threads): softmax writes whole rows
 * (row-major: row i at out_off + i * n), logsumexp one value per row. The register kernel
 * reads each row once; the long-row kernel reads rows twice (softmax) or once (logsumexp),
 * with an online maximum and sum. Blocks loop over rows: any grid works. NULL for a dtype or
 * vpl without a kernel. */
const void *nv__rows_fast_kernel(int softmax, nv_dtype dtype, const nv__rows_plan *plan);

/* The general softmax's last step: y = exp(x - m[o]) / s[o] over every element, rows in any
 * layout (reduce_rows.cu). Element e (row-major over the input's shape; the output is
 * row-contiguous) sits at input offset sum(idx_d * st_d) and belongs to row sum(idx_d *
 * rowst_d). `void k(const void *x, void *y, const void *m, const void *s,
 * nv__softmax_norm_params p)`, m and s scratch (float64, one per row, from the views' starts
 * rounded up to 16 bytes); a row whose maximum is not finite is NaN. */
typedef struct nv__softmax_norm_params {
  int32_t nd;
  int32_t dtype;
  int64_t size, nrows;
  int64_t in_off, out_off;
  int64_t shape[NV__RED_DIMS], st[NV__RED_DIMS], rowst[NV__RED_DIMS];
} nv__softmax_norm_params;

const void *nv__softmax_norm_kernel(nv_dtype dtype);

#ifdef __cplusplus
}
#endif

#endif
