/* The CPU kernel of gated_delta_slots: the pool copied unless donated, then each (sequence,
 * value head) steps its slot's state through the sequence's tokens in compute-type scratch
 * (float32, float64 when the inputs or the pool are float64), rounded into the pool once at
 * the end. (sequence, head) pairs run in parallel when the sequences' slots are distinct, else
 * serially. A token's step makes two passes over the Dk x Dv state, each vectorizable along
 * Dv: the decay with M^T k, then the rank-1 update with M^T q. The builder hands every input
 * row-contiguous (src/ops/fast_delta.c): q, k, v of o's dtype, g and beta of the compute type. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_state.h"

typedef struct delta_job {
  nv_dtype dt, sdt, ct;
  int64_t t, hk, hv, dk, dv;
  const void *q, *k, *v, *g, *beta, *slots;
  bool slots64;
  void *pool, *o;
  double scale;
  atomic_bool oom;
} delta_job;

static int64_t slot_of(const delta_job *j, int64_t n) {
  return j->slots64 ? ((const int64_t *)j->slots)[n] : ((const int32_t *)j->slots)[n];
}

/* One token's step of a Dk x Dv state m (row-major) given k, q (Dk), v (Dv), the decay e and
 * beta b: o (Dv) = scale M^T q after the update. u is Dv of scratch. */
#define DELTA_STEP(C, SUF)                                                                      \
  NV_KERNEL_CLONES static void delta_step_##SUF(C *restrict m, const C *restrict k,            \
                                                const C *restrict q, const C *restrict v,      \
                                                C *restrict u, C *restrict o, int64_t dk,      \
                                                int64_t dv, C e, C b, C scale) {               \
    for (int64_t j = 0; j < dv; j++) u[j] = 0;                                                 \
    for (int64_t i = 0; i < dk; i++) {                                                         \
      C *row = m + i * dv;                                                                     \
      const C ki = k[i];                                                                       \
      for (int64_t j = 0; j < dv; j++) {                                                       \
        row[j] *= e;                                                                           \
        u[j] += row[j] * ki;                                                                   \
      }                                                                                        \
    }                                                                                          \
    for (int64_t j = 0; j < dv; j++) {                                                         \
      u[j] = (v[j] - u[j]) * b;                                                                \
      o[j] = 0;                                                                                \
    }                                                                                          \
    for (int64_t i = 0; i < dk; i++) {                                                         \
      C *row = m + i * dv;                                                                     \
      const C ki = k[i], qi = q[i];                                                            \
      for (int64_t j = 0; j < dv; j++) {                                                       \
        row[j] += ki * u[j];                                                                   \
        o[j] += row[j] * qi;                                                                   \
      }                                                                                        \
    }                                                                                          \
    for (int64_t j = 0; j < dv; j++) o[j] *= scale;                                            \
  }
DELTA_STEP(float, f32)
DELTA_STEP(double, f64)

/* (sequence, value head) pairs [b, e). */
static void delta_range(void *ctx, int64_t b, int64_t e) {
  delta_job *j = ctx;
  const int64_t t = j->t, dk = j->dk, dv = j->dv, hv = j->hv, rep = hv / j->hk;
  const bool f64 = j->ct == NV_DTYPE_FLOAT64;
  const size_t cz = f64 ? sizeof(double) : sizeof(float);
  /* the state, then k, q (Dk each), v, u, o (Dv each) */
  char *scratch = nv__malloc((size_t)(dk * dv + 2 * dk + 3 * dv) * cz);
  if (!scratch) {
    atomic_store(&j->oom, true);
    return;
  }
  char *kb = scratch + (size_t)(dk * dv) * cz, *qb = kb + (size_t)dk * cz,
       *vb = qb + (size_t)dk * cz, *ub = vb + (size_t)dv * cz, *ob = ub + (size_t)dv * cz;
  for (int64_t it = b; it < e; it++) {
    const int64_t n = it / hv, h = it % hv, hkh = h / rep, s = slot_of(j, n);
    if (s < 0) { /* padding: o = 0, the pool untouched */
      for (int64_t tt = 0; tt < t; tt++)
        for (int64_t c = 0; c < dv; c++)
          nv__real_st(j->dt, j->o, ((n * t + tt) * hv + h) * dv + c, 0);
      continue;
    }
    const int64_t base = (s * hv + h) * dk * dv;
    if (j->sdt == j->ct) /* the state already in the compute type: copied as it is */
      memcpy(scratch, (const char *)j->pool + (size_t)base * cz, (size_t)(dk * dv) * cz);
    else
      for (int64_t i = 0; i < dk * dv; i++) {
        if (f64)
          ((double *)scratch)[i] = nv__real_ld(j->sdt, j->pool, base + i);
        else
          ((float *)scratch)[i] = (float)nv__real_ld(j->sdt, j->pool, base + i);
      }
    for (int64_t tt = 0; tt < t; tt++) {
      const int64_t qk = ((n * t + tt) * j->hk + hkh) * dk, vo = ((n * t + tt) * hv + h) * dv;
      const int64_t gi = (n * t + tt) * hv + h;
      if (f64) {
        for (int64_t i = 0; i < dk; i++) {
          ((double *)kb)[i] = nv__real_ld(j->dt, j->k, qk + i);
          ((double *)qb)[i] = nv__real_ld(j->dt, j->q, qk + i);
        }
        for (int64_t c = 0; c < dv; c++) ((double *)vb)[c] = nv__real_ld(j->dt, j->v, vo + c);
        delta_step_f64((double *)scratch, (double *)kb, (double *)qb, (double *)vb,
                       (double *)ub, (double *)ob, dk, dv, exp(((const double *)j->g)[gi]),
                       ((const double *)j->beta)[gi], j->scale);
        for (int64_t c = 0; c < dv; c++) nv__real_st(j->dt, j->o, vo + c, ((double *)ob)[c]);
      } else {
        for (int64_t i = 0; i < dk; i++) {
          ((float *)kb)[i] = (float)nv__real_ld(j->dt, j->k, qk + i);
          ((float *)qb)[i] = (float)nv__real_ld(j->dt, j->q, qk + i);
        }
        for (int64_t c = 0; c < dv; c++) ((float *)vb)[c] = (float)nv__real_ld(j->dt, j->v, vo + c);
        delta_step_f32((float *)scratch, (float *)kb, (float *)qb, (float *)vb, (float *)ub,
                       (float *)ob, dk, dv, expf(((const float *)j->g)[gi]),
                       ((const float *)j->beta)[gi], (float)j->scale);
        for (int64_t c = 0; c < dv; c++) nv__real_st(j->dt, j->o, vo + c, ((float *)ob)[c]);
      }
    }
    if (j->sdt == j->ct)
      memcpy((char *)j->pool + (size_t)base * cz, scratch, (size_t)(dk * dv) * cz);
    else
      for (int64_t i = 0; i < dk * dv; i++)
        nv__real_st(j->sdt, j->pool, base + i,
                    f64 ? ((double *)scratch)[i] : ((float *)scratch)[i]);
  }
  nv__free(scratch);
}

/* The pool in output 0 (in place when donated, else copied), o in output 1. Slots are checked
 * first, so a failing node writes nothing. */
static nv_status k_gated_delta(nv__node *node, const nv__operand *in, int donated) {
  const nv__fast_delta_params *p = node->params;
  nv__output *po = &node->out[0], *oo = &node->out[1];
  const nv__output *qm = in[0].meta;
  delta_job j = {.dt = oo->dtype,
                 .sdt = po->dtype,
                 .ct = in[3].meta->dtype,
                 .t = qm->shape[1],
                 .hk = qm->shape[2],
                 .hv = oo->shape[2],
                 .dk = qm->shape[3],
                 .dv = oo->shape[3],
                 .q = nv__operand_ptr(&in[0]),
                 .k = nv__operand_ptr(&in[1]),
                 .v = nv__operand_ptr(&in[2]),
                 .g = nv__operand_ptr(&in[3]),
                 .beta = nv__operand_ptr(&in[4]),
                 .slots = nv__operand_ptr(&in[6]),
                 .slots64 = in[6].meta->dtype == NV_DTYPE_INT64,
                 .scale = p->scale};
  atomic_init(&j.oom, false);
  int64_t nseq = qm->shape[0], ns = po->shape[0];
  bool distinct = true;
  nv_status cs = nv__cpu_check_slots("gated_delta_slots", j.slots, j.slots64, nseq, ns, &distinct);
  if (cs != NV_OK) return cs;
  if (donated < 0) {
    if (nv__output_alloc(po) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
    size_t bytes = (size_t)po->size * nv_dtype_size(po->dtype);
    if (bytes) memcpy(po->buf->ptr, nv__operand_ptr(&in[5]), bytes);
  }
  if (nv__output_alloc(oo) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int64_t items = nseq * j.hv;
  if (items == 0 || j.dk * j.dv == 0) {
    /* no state: o is scale * M^T q of an empty M, 0 */
    for (int64_t i = 0; i < oo->size; i++) nv__real_st(j.dt, nv__output_ptr(oo), i, 0);
    return NV_OK;
  }
  j.pool = nv__output_ptr(po);
  j.o = nv__output_ptr(oo);
  int64_t work = (j.t + 1) * j.dk * j.dv;
  if (distinct)
    nv__parallel_for(items, NV__PAR_GRAIN / work + 1, delta_range, &j);
  else
    delta_range(&j, 0, items);
  if (atomic_load(&j.oom))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "gated_delta_slots: out of memory");
  return NV_OK;
}

void nv__cpu_register_fast_delta(nv__kernel_fn *k) { k[NV__PRIM_FAST_GATED_DELTA] = k_gated_delta; }
