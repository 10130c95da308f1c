/* The element-wise driver: collapses dimensions, walks runs of the innermost axis, and splits
 * large index spaces over the pool. */
#include "cpu/kernels.h"
#include "cpu/pool.h"

/* The output and up to four inputs (adam_update reads four). */
#define MAXOPS 5

void nv__broadcast_strides(const nv__output *in, const int *shape, int ndim, int64_t *st) {
  int off = ndim - in->ndim;
  for (int i = 0; i < ndim; i++) {
    if (i < off) st[i] = 0;
    else st[i] = in->shape[i - off] == shape[i] ? in->strides[i - off] : 0;
  }
}

typedef struct map_job {
  int nd, nops;
  int64_t shape[NV__MAX_DIMS];
  int64_t st[MAXOPS][NV__MAX_DIMS];
  char *base[MAXOPS];
  int64_t isz[MAXOPS];
  nv__run_fn run;
  const void *extra;
} map_job;

static void map_range(void *ctx, int64_t begin, int64_t end) {
  const map_job *j = ctx;
  int nd = j->nd;
  int64_t idx[NV__MAX_DIMS];
  int64_t rem = begin;
  for (int i = nd - 1; i >= 0; i--) {
    idx[i] = rem % j->shape[i];
    rem /= j->shape[i];
  }
  int64_t inner = j->shape[nd - 1];
  int64_t s[MAXOPS];
  for (int k = 0; k < j->nops; k++) s[k] = j->st[k][nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = inner - idx[nd - 1];
    if (n > end - pos) n = end - pos;
    char *p[MAXOPS];
    for (int k = 0; k < j->nops; k++) {
      int64_t off = 0;
      for (int i = 0; i < nd; i++) off += idx[i] * j->st[k][i];
      p[k] = j->base[k] + off * j->isz[k];
    }
    j->run(p, s, n, j->extra);
    pos += n;
    idx[nd - 1] += n;
    for (int i = nd - 1; i > 0 && idx[i] >= j->shape[i]; i--) {
      idx[i] = 0;
      idx[i - 1]++;
    }
  }
}

void nv__cpu_map(nv__output *out, const nv__operand *in, int nin, nv__run_fn run,
                 const void *extra) {
  NV_ASSERT(nin + 1 <= MAXOPS);
  if (out->size == 0) return;
  map_job j;
  j.nops = nin + 1;
  j.run = run;
  j.extra = extra;
  int64_t full[MAXOPS][NV__MAX_DIMS];
  const int64_t *src[MAXOPS];
  int64_t *dst[MAXOPS];
  for (int i = 0; i < out->ndim; i++) full[0][i] = out->strides[i];
  j.base[0] = nv__output_ptr(out);
  j.isz[0] = (int64_t)nv_dtype_size(out->dtype);
  for (int k = 0; k < nin; k++) {
    nv__broadcast_strides(in[k].meta, out->shape, out->ndim, full[k + 1]);
    j.base[k + 1] = (char *)nv__operand_ptr(&in[k]);
    j.isz[k + 1] = (int64_t)nv_dtype_size(in[k].meta->dtype);
  }
  for (int k = 0; k < j.nops; k++) {
    src[k] = full[k];
    dst[k] = j.st[k];
  }
  j.nd = nv__collapse(out->shape, out->ndim, src, j.nops, j.shape, dst);
  if (out->size >= NV__PAR_GRAIN) nv__parallel_for(out->size, NV__PAR_GRAIN / 2, map_range, &j);
  else map_range(&j, 0, out->size);
}
