/* Stable LSD radix sorts of unsigned keys (sort_radix.c). */
#ifndef NUVEC_CPU_SORT_RADIX_H
#define NUVEC_CPU_SORT_RADIX_H

#include <stdatomic.h>

#include "cpu/kernels.h"

/* Sorts the n keys `k` ascending, stably, permuting the payload `idx` alike when it is not
 * NULL. `tk` (and `ti` with a payload) are scratch of n elements. With `parallel`, large
 * inputs split each pass over the pool. The result is in `k` / `idx`. False when out of
 * memory (nothing sorted). */
bool nv__radix_sort_u32(uint32_t *k, uint32_t *tk, uint32_t *idx, uint32_t *ti, int64_t n,
                        bool parallel);
bool nv__radix_sort_u64(uint64_t *k, uint64_t *tk, uint32_t *idx, uint32_t *ti, int64_t n,
                        bool parallel);

/* Sorts n float32 values from `in` into `out` (NaN last, -0.0 before +0.0), the key
 * conversions fused into the first and last passes; `tmp` is scratch of n keys. */
bool nv__radix_sort_f32(const float *in, float *out, uint32_t *tmp, int64_t n, bool parallel);

/* Sorts n float32 values from `in` into `out` in the same order as nv__radix_sort_f32 (NaN
 * last as the quiet NaN 0x7fffffff, -0.0 before +0.0) with a vectorized quicksort (not stable;
 * equal keys are equal values). False, doing nothing, where the CPU lacks AVX2 (sort_simd.c). */
bool nv__simd_sort_f32(const float *in, float *out, int64_t n, bool parallel);

/* The index of the first maximum (max) or minimum of the n >= 1 float32 values x, a NaN counting
 * as the extreme (its first one), into *at; `next` (or NULL) is where a later row starts, whose
 * first values are prefetched meanwhile. False, doing nothing, where the CPU lacks AVX-512
 * (sort_simd.c). */
bool nv__simd_argext_f32(const float *x, int64_t n, bool max, const float *next, uint32_t *at);

#endif
