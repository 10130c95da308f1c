/* Column sums for the reduce engine's column layout (reduce_cols.c). */
#ifndef NUVEC_CPU_REDUCE_COLS_H
#define NUVEC_CPU_REDUCE_COLS_H

#include <stdint.h>

/* Adds `rows` rows of w values, row r at x + r * st, into the float64 partial sums g[0, w):
 * each column's values in row order, rounded in float64 after every addition, so the result
 * is the same on every CPU. AVX-512 or AVX2 where the CPU has it, else portable C. */
void nv__cols_sum_f32(double *g, const float *x, int64_t st, int64_t rows, int64_t w);
void nv__cols_sum_f64(double *g, const double *x, int64_t st, int64_t rows, int64_t w);

/* y[j] = (float)(s / div) for the sum s of column j of `rows` float32 rows (as nv__cols_sum_f32
 * adds them into zeros): a single row group's finished sums (div 1) or means (div the count),
 * the same bits as summing, dividing and rounding apart, without partial sums in memory. */
void nv__cols_sum_f32_out(float *y, const float *x, int64_t st, int64_t rows, int64_t w,
                          double div);

#endif
