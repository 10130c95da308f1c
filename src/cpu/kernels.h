/* CPU kernels: shared drivers and the kernel functions registered in nv__cpu_kernels. */
#ifndef NUVEC_CPU_KERNELS_H
#define NUVEC_CPU_KERNELS_H

#include "core/convert.h"
#include "core/internal.h"
#include "core/strided.h"
#include "ops/params.h"

/* Hot inner loops are compiled for the baseline ISA and for AVX2 and AVX-512, picked at load
 * time (function multi-versioning), so one binary runs everywhere and fast where it can. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(NV_NO_CLONES)
#define NV_KERNEL_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
/* The same with FMA in the AVX2 clone (x86-64-v3), for polynomial kernels whose results are
 * not promised bit for bit (the exponential of softmax and logsumexp): multiply-adds fuse. */
#define NV_KERNEL_CLONES_FMA \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define NV_KERNEL_CLONES
#define NV_KERNEL_CLONES_FMA
#endif

/* Element i of a float16/bfloat16/float32/float64 array as a double, and a double stored
 * there (rounded to nearest even): the serving kernels' element access, which computes float64
 * in double and the others in float32. */
static inline double nv__real_ld(nv_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case NV_DTYPE_FLOAT16: return nv__f16_to_f32(((const uint16_t *)p)[i]);
  case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(((const uint16_t *)p)[i]);
  case NV_DTYPE_FLOAT32: return ((const float *)p)[i];
  default: return ((const double *)p)[i];
  }
}

static inline void nv__real_st(nv_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
  case NV_DTYPE_FLOAT16: ((uint16_t *)p)[i] = nv__f32_to_f16((float)v); break;
  case NV_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = nv__f32_to_bf16((float)v); break;
  case NV_DTYPE_FLOAT32: ((float *)p)[i] = (float)v; break;
  default: ((double *)p)[i] = v; break;
  }
}

/* Checks a pool's slot ids (int32, or int64 when `s64`; n of them, negative ones skipped)
 * against its `ns` slots: an error naming `op` for one >= ns; *distinct tells whether no slot
 * repeats (the serving kernels then update slots in parallel). src/cpu/fast_serving.c. */
nv_status nv__cpu_check_slots(const char *op, const void *slots, bool s64, int64_t n, int64_t ns,
                              bool *distinct);

/* Element count above which kernels split work across the pool. */
#define NV__PAR_GRAIN 32768

/* A run over `n` elements: operand k at `p[k]` with element stride `s[k]` (0: broadcast).
 * Operand 0 is the output (row-contiguous, stride 1). */
typedef void (*nv__run_fn)(char **p, const int64_t *s, int64_t n, const void *extra);

/* Applies `run` over the output's index space with `nin` inputs broadcast to it, splitting
 * large work across the pool. */
void nv__cpu_map(nv__output *out, const nv__operand *in, int nin, nv__run_fn run,
                 const void *extra);

/* A strided view of input `in` broadcast to `shape` (right-aligned): its strides. */
void nv__broadcast_strides(const nv__output *in, const int *shape, int ndim, int64_t *st);

/* Converts `n` elements between dtypes along strided runs (astype's inner loop). */
void nv__convert_run(nv_dtype from, const char *src, int64_t ss, nv_dtype to, char *dst,
                     int64_t ds, int64_t n);

nv_status nv__k_unary(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_binary(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_add_multiply(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_astype(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_copy(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_view(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_full(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_arange(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_eye(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_to_fp8(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_from_fp8(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_slice_update(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_sum(nv__node *node, const nv__operand *in, int donated);
/* The value of number_of_elements (exact as int64 where it fits, else through float64) in the
 * node's output dtype, written at dst: shared by the CPU and CUDA kernels. */
void nv__count_value(const nv__node *node, const nv__operand *in, void *dst);

#endif
