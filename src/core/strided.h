/* Strided iteration helpers shared by the core (reading back) and the CPU kernels. */
#ifndef NUVEC_CORE_STRIDED_H
#define NUVEC_CORE_STRIDED_H

#include <stddef.h>
#include <stdint.h>

/* Dimensions merged where the layout allows: adjacent axes i, i+1 fold into one when
 * stride[i] == shape[i+1] * stride[i+1] for every operand; size-1 axes are dropped. Returns
 * the new number of dimensions (at least 1) and writes the folded shape and strides. */
int nv__collapse(const int *shape, int ndim, const int64_t *const *strides, int nops,
                 int64_t *out_shape, int64_t **out_strides);

/* Copies the elements of a strided source (`src` points at element 0) into `dst` in
 * row-major order. */
void nv__copy_strided(void *dst, const void *src, const int *shape, const int64_t *strides,
                      int ndim, size_t itemsize);

/* Copies a row-major `src` into a strided destination. */
void nv__copy_to_strided(void *dst, const int64_t *dst_strides, const void *src,
                         const int *shape, int ndim, size_t itemsize);

#endif
