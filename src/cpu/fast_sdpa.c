/* The CPU kernel of scaled_dot_product_attention (src/ops/fast_sdpa.h): a blocked online
 * softmax. One task takes one (batch, key/value head, query block): the query rows of every
 * query head reading that key/value head (grouped-query attention shares the key/value blocks
 * they read), converted to float32 and scaled once; then, per block of keys, the scores by
 * sgemm, the mask, the running row maxima and sums, and the output rows rescaled and
 * accumulated by a second sgemm. Memory stays O(rows × block), never Lq × Lk. Causal blocks
 * past a query block's last position are skipped (they hold masked scores only, whose
 * exponentials are exactly 0) unless a row of the block sits before every key (Lq > Lk: such
 * rows see no key and average all of v, as the composition does). With fewer tasks than the
 * pool can take (decode), the keys are split across tasks too and a second pass combines the
 * splits' partial sums. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fast_sdpa.h"

enum {
  ROWS = 64,  /* query rows per task (all heads of a group together) */
  KEYS = 128, /* keys per block */
};

typedef struct sdpa_job {
  const nv__operand *q, *k, *v, *mask, *sinks;
  nv__output *out;
  const nv__sdpa_params *p;
  int B, Hq, Hkv, G, Lq, Lk, D, Dv;
  int qrows;   /* queries per head in one task */
  int nqb;     /* query blocks per head */
  int nsplit;  /* key splits per (batch, key/value head, query block) */
  int split_len;
  float *part; /* nsplit > 1: per output row and split, Dv sums, the maximum, the sum */
  atomic_int failed;
} sdpa_job;

static inline float load(const void *base, nv_dtype dt, int64_t i) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(((const uint16_t *)base)[i]);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(((const uint16_t *)base)[i]);
    case NV_DTYPE_BOOL: return ((const uint8_t *)base)[i] ? 1.0f : 0.0f;
    default: return ((const float *)base)[i];
  }
}

static inline void store(void *base, nv_dtype dt, int64_t i, float x) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: ((uint16_t *)base)[i] = nv__f32_to_f16(x); break;
    case NV_DTYPE_BFLOAT16: ((uint16_t *)base)[i] = nv__f32_to_bf16(x); break;
    default: ((float *)base)[i] = x; break;
  }
}

/* Row r (n values, times `mul`) of a 4-D operand at (a, b, c) into dst (float32). */
static void gather_row(const nv__operand *x, int a, int b, int c, int n, float mul, float *dst) {
  const int64_t *st = x->meta->strides;
  nv_dtype dt = x->meta->dtype;
  const void *base = x->buf->ptr;
  int64_t o = x->offset + a * st[0] + b * st[1] + c * st[2];
  if (dt == NV_DTYPE_FLOAT32 && st[3] == 1) {
    const float *s = (const float *)base + o;
    for (int i = 0; i < n; i++) dst[i] = s[i] * mul;
  } else {
    for (int i = 0; i < n; i++) dst[i] = load(base, dt, o + i * st[3]) * mul;
  }
}

/* A key/value block of `n` rows from position j0 as a float32 matrix: a pointer into the
 * operand when it is float32 with unit element stride and rows at least `cols` apart (*ld set
 * to the row stride), else gathered into `tmp` (*ld = cols). */
static const float *kv_block(const nv__operand *x, int b, int h, int j0, int n, int cols,
                             float *tmp, int *ld) {
  const int64_t *st = x->meta->strides;
  if (x->meta->dtype == NV_DTYPE_FLOAT32 && st[3] == 1 && st[2] >= cols && st[2] <= INT32_MAX) {
    *ld = (int)st[2];
    return (const float *)x->buf->ptr + x->offset + b * st[0] + h * st[1] + j0 * st[2];
  }
  for (int j = 0; j < n; j++) gather_row(x, b, h, j0 + j, cols, 1.0f, tmp + (int64_t)j * cols);
  *ld = cols;
  return tmp;
}

/* The mask and the online softmax of one block of scores S (rows × n, row-major): masks the
 * scores, updates each row's running maximum m and sum l, turns S into the exponentials and
 * rescales the output rows O (rows × Dv) by the change of their maxima. */
NV_KERNEL_CLONES static void softmax_block(const sdpa_job *jb, int b, int hkv, int q0, int nq,
                                           int j0, int n, float *S, float *m, float *l, float *O) {
  const nv__sdpa_params *p = jb->p;
  int rows = jb->G * nq, shift = jb->Lk - jb->Lq;
  for (int r = 0; r < rows; r++) {
    float *s = S + (int64_t)r * n;
    int g = r / nq, i = q0 + r % nq, hq = hkv * jb->G + g;
    if (p->causal) {
      int64_t last = (int64_t)i + shift; /* the last key this query sees */
      for (int j = 0; j < n; j++)
        if (j0 + j > last) s[j] = -FLT_MAX;
    } else if (p->mask != NV__SDPA_MASK_NONE) {
      const nv__operand *mk = jb->mask;
      const int64_t *st = mk->meta->strides;
      nv_dtype dt = mk->meta->dtype;
      int64_t o = mk->offset + b * st[0] + hq * st[1] + i * st[2] + (int64_t)j0 * st[3];
      if (p->mask == NV__SDPA_MASK_BOOL) {
        const uint8_t *mb = mk->buf->ptr;
        for (int j = 0; j < n; j++)
          if (!mb[o + j * st[3]]) s[j] = -FLT_MAX;
      } else {
        for (int j = 0; j < n; j++) s[j] += load(mk->buf->ptr, dt, o + j * st[3]);
      }
    }
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = fmaxf(mx, s[j]);
    float mnew = fmaxf(m[r], mx);
    /* a row whose scores are all -inf so far keeps exponentials of 0, not NaN */
    float mu = mnew == -INFINITY ? 0.0f : mnew;
    float corr = expf(m[r] - mu), sum = 0.0f;
    for (int j = 0; j < n; j++) {
      s[j] = expf(s[j] - mu);
      sum += s[j];
    }
    l[r] = l[r] * corr + sum;
    m[r] = mnew;
    if (corr != 1.0f) {
      float *o = O + (int64_t)r * jb->Dv;
      for (int d = 0; d < jb->Dv; d++) o[d] *= corr;
    }
  }
}

static void sdpa_task(sdpa_job *jb, int64_t t, float *work) {
  int split = (int)(t % jb->nsplit);
  t /= jb->nsplit;
  int qb = (int)(t % jb->nqb), hkv = (int)(t / jb->nqb % jb->Hkv), b = (int)(t / jb->nqb / jb->Hkv);
  int G = jb->G, D = jb->D, Dv = jb->Dv, Lq = jb->Lq, Lk = jb->Lk;
  int q0 = qb * jb->qrows, nq = Lq - q0 < jb->qrows ? Lq - q0 : jb->qrows, rows = G * nq;
  float *Q = work, *Kt = Q + (size_t)G * jb->qrows * D, *Vt = Kt + (size_t)KEYS * D;
  float *S = Vt + (size_t)KEYS * Dv, *O = S + (size_t)G * jb->qrows * KEYS;
  float *m = O + (size_t)G * jb->qrows * Dv, *l = m + (size_t)G * jb->qrows;
  const nv__sdpa_params *p = jb->p;
  for (int r = 0; r < rows; r++) {
    int g = r / nq, i = q0 + r % nq, hq = hkv * G + g;
    gather_row(jb->q, b, hq, i, D, p->scale, Q + (int64_t)r * D);
    m[r] = -INFINITY;
    l[r] = 0.0f;
    if (p->sinks && jb->nsplit == 1) { /* the sink is one more logit with a zero value row */
      const nv__operand *sk = jb->sinks;
      float s = ((const float *)sk->buf->ptr)[sk->offset + hq * sk->meta->strides[0]];
      m[r] = s;
      l[r] = s == -INFINITY ? 0.0f : 1.0f;
    }
  }
  memset(O, 0, (size_t)rows * Dv * sizeof *O);
  int kend = Lk;
  int64_t first = (int64_t)q0 + Lk - Lq, last = first + nq - 1;
  if (p->causal && first >= 0 && last + 1 < kend) kend = (int)(last + 1);
  int64_t ks = (int64_t)split * jb->split_len, ke = ks + jb->split_len;
  if (ke > kend) ke = kend;
  for (int j0 = (int)ks; j0 < ke; j0 += KEYS) {
    int n = ke - j0 < KEYS ? (int)(ke - j0) : KEYS, ldk, ldv;
    const float *K = kv_block(jb->k, b, hkv, j0, n, D, Kt, &ldk);
    /* zeroed first: BLAS may read C even with beta = 0 (and skips it when D = 0) */
    memset(S, 0, (size_t)rows * n * sizeof *S);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, D, 1.0f, Q, D, K, ldk, 0.0f, S,
                n);
    softmax_block(jb, b, hkv, q0, nq, j0, n, S, m, l, O);
    const float *V = kv_block(jb->v, b, hkv, j0, n, Dv, Vt, &ldv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dv, n, 1.0f, S, n, V, ldv, 1.0f,
                O, Dv);
  }
  nv__output *out = jb->out;
  void *dst = (char *)out->buf->ptr + out->offset * (int64_t)nv_dtype_size(out->dtype);
  for (int r = 0; r < rows; r++) {
    int g = r / nq, i = q0 + r % nq, hq = hkv * G + g;
    int64_t orow = ((int64_t)b * jb->Hq + hq) * Lq + i;
    if (jb->nsplit > 1) {
      float *pt = jb->part + (orow * jb->nsplit + split) * (Dv + 2);
      memcpy(pt, O + (int64_t)r * Dv, (size_t)Dv * sizeof *pt);
      pt[Dv] = m[r];
      pt[Dv + 1] = l[r];
      continue;
    }
    float inv = 1.0f / l[r];
    for (int d = 0; d < Dv; d++) store(dst, out->dtype, orow * Dv + d, O[(int64_t)r * Dv + d] * inv);
  }
}

/* The splits of output rows [b, e) reduced: each weighted by exp(its maximum - the largest),
 * the sink one more term of the denominator. */
static void combine_range(void *ctx, int64_t b, int64_t e) {
  sdpa_job *jb = ctx;
  int Dv = jb->Dv, ns = jb->nsplit;
  nv__output *out = jb->out;
  void *dst = (char *)out->buf->ptr + out->offset * (int64_t)nv_dtype_size(out->dtype);
  for (int64_t row = b; row < e; row++) {
    const float *pt = jb->part + row * ns * (Dv + 2);
    float M = -INFINITY, sink = -INFINITY;
    if (jb->p->sinks) {
      const nv__operand *sk = jb->sinks;
      int hq = (int)(row / jb->Lq % jb->Hq);
      M = sink = ((const float *)sk->buf->ptr)[sk->offset + hq * sk->meta->strides[0]];
    }
    for (int s = 0; s < ns; s++) M = fmaxf(M, pt[s * (Dv + 2) + Dv]);
    float mu = M == -INFINITY ? 0.0f : M;
    float L = jb->p->sinks ? expf(sink - mu) : 0.0f;
    for (int s = 0; s < ns; s++) L += pt[s * (Dv + 2) + Dv + 1] * expf(pt[s * (Dv + 2) + Dv] - mu);
    for (int d = 0; d < Dv; d++) {
      float acc = 0.0f;
      for (int s = 0; s < ns; s++) acc += pt[s * (Dv + 2) + d] * expf(pt[s * (Dv + 2) + Dv] - mu);
      store(dst, out->dtype, row * Dv + d, acc / L);
    }
  }
}

static void sdpa_range(void *ctx, int64_t b, int64_t e) {
  sdpa_job *jb = ctx;
  size_t R = (size_t)jb->G * jb->qrows;
  size_t floats = R * jb->D + (size_t)KEYS * jb->D + (size_t)KEYS * jb->Dv + R * KEYS +
                  R * jb->Dv + 2 * R;
  float *work = malloc(floats * sizeof *work);
  if (!work) {
    atomic_store(&jb->failed, 1);
    return;
  }
  for (int64_t t = b; t < e; t++) sdpa_task(jb, t, work);
  free(work);
}

static nv_status nv__k_sdpa(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (out->size == 0) return NV_OK;
  const nv__sdpa_params *p = node->params;
  const int *qs = in[0].meta->shape, *ks = in[1].meta->shape;
  sdpa_job jb = {.q = &in[0], .k = &in[1], .v = &in[2], .out = out, .p = p};
  int n = 3;
  if (p->mask != NV__SDPA_MASK_NONE) jb.mask = &in[n++];
  if (p->sinks) jb.sinks = &in[n++];
  jb.B = qs[0];
  jb.Hq = qs[1];
  jb.Lq = qs[2];
  jb.D = qs[3];
  jb.Hkv = ks[1];
  jb.Lk = ks[2];
  jb.Dv = in[2].meta->shape[3];
  jb.G = jb.Hq / jb.Hkv;
  if (jb.Lk == 0) { /* no keys: the weighted sum is empty */
    memset((char *)out->buf->ptr + out->offset * (int64_t)nv_dtype_size(out->dtype), 0,
           (size_t)out->size * nv_dtype_size(out->dtype));
    return NV_OK;
  }
  jb.qrows = ROWS / jb.G > 0 ? ROWS / jb.G : 1;
  if (jb.qrows > jb.Lq) jb.qrows = jb.Lq;
  jb.nqb = (jb.Lq + jb.qrows - 1) / jb.qrows;
  /* Too few tasks for the pool (decode): the keys split into more tasks (whole blocks of at
   * least 2 x KEYS keys each), whose partials a second pass reduces. */
  int64_t tasks = (int64_t)jb.B * jb.Hkv * jb.nqb, want = 4 * (int64_t)nv__pool_threads();
  int64_t kblocks = (jb.Lk + KEYS - 1) / KEYS, nsplit = 1;
  if (tasks < want) {
    nsplit = (want + tasks - 1) / tasks;
    if (nsplit > (kblocks + 1) / 2) nsplit = (kblocks + 1) / 2;
    if (nsplit < 1) nsplit = 1;
  }
  int64_t per = (kblocks + nsplit - 1) / nsplit;
  jb.split_len = (int)(per * KEYS);
  jb.nsplit = (int)((jb.Lk + jb.split_len - 1) / jb.split_len);
  int64_t rows_out = (int64_t)out->size / jb.Dv;
  if (jb.nsplit > 1 &&
      !(jb.part = malloc((size_t)rows_out * jb.nsplit * (jb.Dv + 2) * sizeof *jb.part)))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "scaled_dot_product_attention: out of memory");
  atomic_init(&jb.failed, 0);
  nv__parallel_for(tasks * jb.nsplit, 1, sdpa_range, &jb);
  if (jb.nsplit > 1 && !atomic_load(&jb.failed))
    nv__parallel_for(rows_out, 64, combine_range, &jb);
  free(jb.part);
  if (atomic_load(&jb.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "scaled_dot_product_attention: out of memory");
  return NV_OK;
}

void nv__cpu_register_fast_sdpa(nv__kernel_fn *k) { k[NV__PRIM_FAST_SDPA] = nv__k_sdpa; }
