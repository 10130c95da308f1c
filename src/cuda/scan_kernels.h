/* The scan family's kernels (scan.cu) as the host code (scan.c) sees them: the by-value
 * parameter blocks and the host addresses of the __global__ functions to pass as
 * nv__gpu_launch.func. Valid C11 and C++; nothing of nuvec's internals.
 *
 * A scan's input is row-contiguous (scan.c copies other layouts first) and seen as
 * [outer, len, inner]: the scan runs along `len`. Row kernels (inner == 1) give a row to a group
 * of 1, 4, 16 or 32 lanes of a warp, or to a whole block of 256 threads; column kernels
 * (inner > 1) give 2 or 4 adjacent columns to a thread, 16 such threads across the columns of
 * a block of 256 that splits the axis between its 16 rows of threads. A long axis may be split into segments
 * ("chunks", in walk order): a reduce kernel writes each segment's total into scratch memory, a
 * carry kernel turns the totals into each segment's starting value (an exclusive scan), and the
 * scan kernel starts each segment from it. Every kernel walks its work with a grid-stride loop,
 * so any grid is correct. */
#ifndef NUVEC_CUDA_SCAN_KERNELS_H
#define NUVEC_CUDA_SCAN_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of every scan-family kernel (column kernels: COL_TX x 16, 1-D). */
#define NV__GPU_SCAN_THREADS 256
/* Column kernels: a 1-D block of COL_TX threads across the columns (each holding up to 4
 * adjacent columns: 16-byte loads of float32) times 256 / COL_TX along the axis, each thread
 * holding COL_ROWS consecutive positions per tile (tiles of 16 * 8 = 128 positions). */
#define NV__GPU_SCAN_COL_TX 16
#define NV__GPU_SCAN_COL_ROWS 8

/* The scan's combining operation. */
enum { NV__GPU_SCAN_SUM, NV__GPU_SCAN_PROD, NV__GPU_SCAN_MAX, NV__GPU_SCAN_MIN, NV__GPU_SCAN_LSE };

/* One scan launch. Segment s of a row kernel is (row s / nchunks, chunk s % nchunks); of a
 * column kernel (column tile s % tiles, then chunk, then outer index),
 * tiles = ceil(inner / col_width).
 * Chunk k covers the walk positions [k * chunk, min((k + 1) * chunk, len)); walk position q is
 * element q of the axis, or element len - 1 - q when reversed. The totals (scratch, the work
 * type's elements) are indexed (outer * nchunks + chunk) * inner + column (rows: inner = 1). */
typedef struct nv__gpu_scan_params {
  int64_t ioff, ooff; /* elements from the views' starts to element 0 */
  int64_t outer, len, inner;
  int64_t chunk, nchunks;
  int64_t segments; /* work items of the launch (see above) */
  int32_t reverse, inclusive;
  int32_t carry; /* scan kernels: start each segment from its total slot (the carry kernel's) */
  int32_t pad_;
} nv__gpu_scan_params;

/* The kernels of one (operation, input dtype): NULL where the pair has none (logcumsumexp of
 * complex64). Signatures: row and column scans (in, out, totals, params) — totals is any read
 * view when params.carry is 0; reduces (in, totals, params); carry (totals, params). */
typedef struct nv__gpu_scan_kernels {
  const void *row[4];   /* groups of 1, 4, 16 and 32 lanes per row (no chunks) */
  const void *row_block; /* a block per segment */
  const void *row_reduce;
  const void *col;
  const void *col_reduce;
  const void *carry;
  int items;     /* elements a row-kernel lane holds per tile */
  int col_width; /* columns of a column kernel's block (COL_TX times 2 or 4) */
  int work_size; /* bytes of one total (the work type: 8, or 16 for complex) */
} nv__gpu_scan_kernels;

/* Fills *k for operation `op` (NV__GPU_SCAN_*) over input dtype code `dtype`; false when the
 * pair has no kernels. */
int nv__gpu_scan_lookup(int op, int dtype, nv__gpu_scan_kernels *k);

/* diff: out[i] = in[off(i) + step] - in[off(i)] over the row-contiguous output of n elements,
 * off(i) from the folded output coordinates of i and the input's element strides. */
typedef struct nv__gpu_diff_params {
  int64_t ioff, step, n;
  int32_t nd;
  int32_t pad_;
  int64_t shape[8];
  int64_t st[8];
} nv__gpu_diff_params;

/* The diff kernel of dtype code `dtype` (32-bit coordinates when `idx32`: n < 2^31). */
const void *nv__gpu_kernel_diff(int dtype, int idx32);

#ifdef __cplusplus
}
#endif

#endif
