/* The linalg family's CPU kernels and the helpers its files share (src/cpu/linalg*.c). */
#ifndef NUVEC_CPU_LINALG_KERNELS_H
#define NUVEC_CPU_LINALG_KERNELS_H

#include "cpu/kernels.h"

/* A strided array read by a kernel: element 0 at `p`, strides in elements. */
typedef struct nv__linalg_view {
  const char *p;
  nv_dtype dtype;
  int ndim;
  const int *shape;
  int64_t st[NV__MAX_DIMS];
} nv__linalg_view;

/* The view of an operand as the evaluation handed it over. */
void nv__linalg_view_of(nv__linalg_view *v, const nv__operand *op);

/* Copies the elements of `v` in row-major order into `dst`, converted to dtype `to` (rounded
 * once, integers wrapped, as astype). `st` may contain zero strides (a broadcast). */
void nv__linalg_pack(const nv__linalg_view *v, const int64_t *st, nv_dtype to, char *dst);

/* `v` packed row-major into new host memory of dtype `to`; `v` is redirected to the copy,
 * which the caller frees (nv__free). NULL with the thread's error set when out of memory. */
void *nv__linalg_pack_new(nv__linalg_view *v, nv_dtype to, const char *op);

/* The batch axes of a batched product: the output's leading axes (all but `out_tail`), over
 * which operands a and b (each with `in_tail` trailing axes of their own) broadcast,
 * collapsed where the layouts allow. Batch i of the output is the i-th in row-major order. */
typedef struct nv__linalg_batch {
  int nd;
  int64_t n;
  int64_t shape[NV__MAX_DIMS];
  int64_t sa[NV__MAX_DIMS], sb[NV__MAX_DIMS];
} nv__linalg_batch;

void nv__linalg_batch_init(nv__linalg_batch *bt, const nv__output *out, int out_tail,
                           const nv__linalg_view *a, const nv__linalg_view *b, int in_tail);

/* The element offsets of batch `i` in operands a and b. */
static inline void nv__linalg_batch_offsets(const nv__linalg_batch *bt, int64_t i, int64_t *oa,
                                            int64_t *ob) {
  int64_t a = 0, b = 0;
  for (int d = bt->nd - 1; d >= 0; d--) {
    int64_t k = i % bt->shape[d];
    i /= bt->shape[d];
    a += k * bt->sa[d];
    b += k * bt->sb[d];
  }
  *oa = a;
  *ob = b;
}

/* The exact integer product of a (..., M, K) and b (..., K, N) of the output's integer dtype
 * into `out` (allocated, row-contiguous), wrapping in that dtype. */
nv_status nv__linalg_int_matmul(nv__output *out, nv__linalg_view *a, nv__linalg_view *b);

nv_status nv__k_matmul(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_addmm(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_vecdot(nv__node *node, const nv__operand *in, int donated);

/* Fills the linalg entries of the CPU kernel table (src/cpu/register.c). */
void nv__cpu_register_linalg(nv__kernel_fn *k);

#endif
