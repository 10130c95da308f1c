/* Column sums for the reduce engine's column layout (reduce_cols.c). */
#ifndef NUVEC_CPU_REDUCE_COLS_H
#define NUVEC_CPU_REDUCE_COLS_H

#include <stdint.h>

/* Adds `rows` rows of w values, row r at x + r * st, into the float64 partial sums g[0, w):
 * each column's values in row order, rounded in float64 after every addition, so the result
 * is the same on every CPU. AVX-512 or AVX2 where the CPU has it, else portable C. */
void nv__cols_sum_f32(double *g, const float *x, int64_t st, int64_t rows, int64_t w);
void nv__cols_sum_f64(double *g, const double *x, int64_t st, int64_t rows, int64_t w);

#endif
