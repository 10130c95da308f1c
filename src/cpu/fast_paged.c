/* The CPU kernel of paged attention (nv_fast_paged_attention, include/nuvec/fast.h): the table
 * and the context lengths checked first (a failing node computes nothing; an empty result
 * reads nothing), then one task per
 * (sequence, key/value head, block of its query tokens, split of the keys): the G query heads
 * of the group times the block's tokens share each key and value row, gathered through the
 * block table and converted once; scores and P V per block of keys by BLAS, an online softmax,
 * float32 accumulation (float64 for float64). With fewer tasks than the
 * pool can take (decode of few sequences), the keys split into more tasks and a second pass
 * combines the splits' partials. */
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_paged.h"

enum {
  KEYS = 64, /* keys per block of scores */
  ROWS = 64, /* query rows (heads x tokens) a task at most */
};

typedef struct paged_job {
  const char *q, *k, *v;
  const int32_t *tables, *lens;
  void *out, *part;
  nv_dtype dt;
  float scale;
  int Hq, Hkv, G, D, Dv, BS, M;
  int64_t c;
  int qrows, nqb; /* query tokens a task (of one sequence), query blocks a sequence */
  int nsplit, split_len;
  atomic_int failed;
} paged_job;

#define C float
#define NAME(x) x##_f32
#define EXP expf
#define GEMM cblas_sgemm
#include "cpu/fast_paged_impl.h"
#undef C
#undef NAME
#undef EXP
#undef GEMM

#define C double
#define NAME(x) x##_f64
#define EXP exp
#define GEMM cblas_dgemm
#include "cpu/fast_paged_impl.h"
#undef C
#undef NAME
#undef EXP
#undef GEMM

/* The context lengths within [0, M BS] and the block ids each sequence reads within [0, NB):
 * the first failure, in sequence order, as the GPU's index check reports it. */
static nv_status check_tables(const int32_t *tables, const int32_t *lens, int64_t S, int M,
                              int BS, int NB) {
  const int64_t cap = (int64_t)M * BS;
  for (int64_t s = 0; s < S; s++) {
    const int64_t L = lens[s];
    if (L < 0 || L > cap)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "paged_attention: index %lld is out of range for an axis of size %lld",
                           (long long)L, (long long)(cap + 1));
    const int64_t blocks = BS > 0 ? (L + BS - 1) / BS : 0;
    for (int64_t b = 0; b < blocks; b++) {
      const int32_t id = tables[s * M + b];
      if (id < 0 || id >= NB)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "paged_attention: index %d is out of range for an axis of size %d",
                             (int)id, NB);
    }
  }
  return NV_OK;
}

static nv_status k_paged_attention(nv__node *node, const nv__operand *in, int donated) {
  (void)donated; /* paged_attention donates nothing (D_NONE) */
  nv__output *out = &node->out[0];
  const int *qs = in[0].meta->shape, *ks = in[1].meta->shape;
  const int64_t T = qs[0], S = in[3].meta->shape[0];
  paged_job j = {.q = nv__operand_ptr(&in[0]),
                 .k = nv__operand_ptr(&in[1]),
                 .v = nv__operand_ptr(&in[2]),
                 .tables = nv__operand_ptr(&in[3]),
                 .lens = nv__operand_ptr(&in[4]),
                 .dt = out->dtype,
                 .scale = ((const nv__paged_params *)node->params)->scale,
                 .Hq = qs[1],
                 .Hkv = ks[2],
                 .D = qs[2],
                 .Dv = in[2].meta->shape[3],
                 .BS = ks[1],
                 .M = in[3].meta->shape[1],
                 .c = S > 0 ? T / S : 0};
  j.G = j.Hq / j.Hkv;
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (out->size == 0) return NV_OK; /* an empty result reads nothing */
  nv_status st = check_tables(j.tables, j.lens, S, j.M, j.BS, ks[0]);
  if (st != NV_OK) return st;
  j.out = (char *)out->buf->ptr + out->offset * (int64_t)nv_dtype_size(out->dtype);
  /* Too few tasks for the pool: the keys (at most M BS a sequence) split into more tasks of
   * whole blocks of at least 4 x KEYS keys. */
  /* a task's rows: the G heads of a group times up to ROWS / G query tokens */
  j.qrows = ROWS / j.G > 0 ? ROWS / j.G : 1;
  if (j.qrows > j.c) j.qrows = (int)j.c;
  j.nqb = (int)((j.c + j.qrows - 1) / j.qrows);
  const int64_t tasks = S * j.Hkv * j.nqb, want = 4 * (int64_t)nv__pool_threads();
  const int64_t cap = (int64_t)j.M * j.BS, kblocks = (cap + KEYS - 1) / KEYS;
  int64_t nsplit = 1;
  if (tasks < want && kblocks > 4) {
    nsplit = (want + tasks - 1) / tasks;
    if (nsplit > kblocks / 4) nsplit = kblocks / 4;
  }
  const int64_t per = (kblocks + nsplit - 1) / nsplit;
  j.split_len = (int)(per * KEYS);
  j.nsplit = cap > 0 ? (int)((cap + j.split_len - 1) / j.split_len) : 1;
  const bool wide = out->dtype == NV_DTYPE_FLOAT64;
  const size_t csize = wide ? sizeof(double) : sizeof(float);
  const int64_t rows = out->size / j.Dv;
  if (j.nsplit > 1 && !(j.part = malloc((size_t)rows * j.nsplit * (j.Dv + 2) * csize)))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "paged_attention: out of memory");
  atomic_init(&j.failed, 0);
  nv__parallel_for(tasks * j.nsplit, 1, wide ? range_f64 : range_f32, &j);
  if (j.nsplit > 1 && !atomic_load(&j.failed))
    nv__parallel_for(rows, 64, wide ? combine_f64 : combine_f32, &j);
  free(j.part);
  if (atomic_load(&j.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "paged_attention: out of memory");
  return NV_OK;
}

void nv__cpu_register_fast_paged(nv__kernel_fn *k) {
  k[NV__PRIM_FAST_PAGED_ATTENTION] = k_paged_attention;
}
