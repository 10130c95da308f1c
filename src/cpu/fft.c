/* The fft primitive on the CPU: 1-D transforms of the last axis, rows pool-parallel. Each row is
 * gathered (any input layout) into a contiguous complex buffer, transformed by the engine of
 * fft_plan.c and stored scaled into the row-contiguous output. Inverse complex transforms
 * conjugate on the way in and out (conj(F(conj x)) is the unnormalized inverse). Real
 * transforms of even length n use one n/2-point complex transform: the real row read as n/2
 * complex pairs (R2C), or the Hermitian half spectrum folded into n/2 complex values whose
 * inverse interleaves the even and odd outputs (C2R); odd lengths use the n-point complex
 * transform. */
#include <stdatomic.h>
#include <string.h>

#include "cpu/fft_plan.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/fft_params.h"

/* Rows gathered together by the complex transforms (c2c_rows). */
#define FFT_BLOCK 8

typedef struct fft_job {
  const nv__fft_params *p;
  const nv__output *in;
  const char *src; /* element 0 of the input */
  char *dst;       /* the output */
  int64_t in_len, out_len;
  const nv__fft_plan *plan; /* length n (C2C, odd real) or n/2 (even real) */
  const nv__cpx *half;      /* exp(-2πi k / n), k <= n/2 (even real transforms) */
  int64_t work;             /* complex elements of scratch per row */
  atomic_bool failed;       /* a chunk ran out of memory */
} fft_job;

/* The element offset of row r's first element in the input layout. */
static int64_t row_offset(const nv__output *o, int64_t r) {
  int64_t off = 0;
  for (int d = o->ndim - 2; d >= 0 && r > 0; d--) {
    int64_t q = r / o->shape[d];
    off += (r - q * o->shape[d]) * o->strides[d];
    r = q;
  }
  return off;
}

/* Complex rows [r0, r0 + nb): gathered together, element k of every row in turn, so that a
 * strided axis (the builders' moveaxis views: rows adjacent in memory, elements far apart)
 * reads nb neighbouring values per step rather than one per cache line. */
static void c2c_rows(const fft_job *j, int64_t r0, int nb, nv__cpx *a, nv__cpx *w) {
  const nv__output *o = j->in;
  int64_t n = j->p->n, st = o->strides[o->ndim - 1];
  const nv__cpx *src[FFT_BLOCK];
  for (int b = 0; b < nb; b++) src[b] = (const nv__cpx *)j->src + row_offset(o, r0 + b);
  float c = j->p->kind == NV__FFT_C2C_INVERSE ? -1.0f : 1.0f, sc = (float)j->p->scale;
  for (int64_t k = 0; k < n; k++)
    for (int b = 0; b < nb; b++) {
      nv__cpx v = src[b][k * st];
      a[b * n + k] = (nv__cpx){v.re, c * v.im};
    }
  for (int b = 0; b < nb; b++) {
    nv__cpx *f = nv__fft_forward(j->plan, a + b * n, w);
    nv__cpx *dst = (nv__cpx *)j->dst + (r0 + b) * n;
    for (int64_t k = 0; k < n; k++) dst[k] = (nv__cpx){sc * f[k].re, c * sc * f[k].im};
  }
}

static void r2c_row(const fft_job *j, int64_t r, nv__cpx *a, nv__cpx *w) {
  const nv__output *o = j->in;
  int64_t n = j->p->n, st = o->strides[o->ndim - 1];
  const float *src = (const float *)j->src + row_offset(o, r);
  nv__cpx *dst = (nv__cpx *)j->dst + r * j->out_len;
  float sc = (float)j->p->scale;
  if (n % 2) {
    for (int64_t k = 0; k < n; k++) a[k] = (nv__cpx){src[k * st], 0.0f};
    nv__cpx *f = nv__fft_forward(j->plan, a, w);
    for (int64_t k = 0; k <= n / 2; k++) dst[k] = (nv__cpx){sc * f[k].re, sc * f[k].im};
    return;
  }
  int64_t h = n / 2;
  for (int64_t k = 0; k < h; k++) a[k] = (nv__cpx){src[2 * k * st], src[(2 * k + 1) * st]};
  nv__cpx *z = nv__fft_forward(j->plan, a, w);
  for (int64_t k = 0; k <= h; k++) {
    nv__cpx zk = z[k == h ? 0 : k], zc = z[k == 0 ? 0 : h - k];
    /* E = (Z_k + conj Z_{h-k}) / 2, O = (Z_k - conj Z_{h-k}) / 2i, X_k = E + exp(-2πi k/n) O */
    float er = 0.5f * (zk.re + zc.re), ei = 0.5f * (zk.im - zc.im);
    float orr = 0.5f * (zk.im + zc.im), oi = -0.5f * (zk.re - zc.re);
    nv__cpx t = j->half[k];
    dst[k] = (nv__cpx){sc * (er + t.re * orr - t.im * oi), sc * (ei + t.re * oi + t.im * orr)};
  }
}

static void c2r_row(const fft_job *j, int64_t r, nv__cpx *a, nv__cpx *w) {
  const nv__output *o = j->in;
  int64_t n = j->p->n, st = o->strides[o->ndim - 1], m = j->in_len;
  const nv__cpx *src = (const nv__cpx *)j->src + row_offset(o, r);
  float *dst = (float *)j->dst + r * n;
  float sc = (float)j->p->scale;
  if (n % 2) {
    /* The whole Hermitian spectrum, conjugated for the inverse: conj Y_k = conj X_k for
     * k < m, X_{n-k} above. The real part of the result ignores Im X_0. */
    for (int64_t k = 0; k < m; k++) a[k] = (nv__cpx){src[k * st].re, -src[k * st].im};
    for (int64_t k = m; k < n; k++) a[k] = src[(n - k) * st];
    nv__cpx *f = nv__fft_forward(j->plan, a, w);
    for (int64_t k = 0; k < n; k++) dst[k] = sc * f[k].re;
    return;
  }
  int64_t h = n / 2;
  for (int64_t k = 0; k < h; k++) {
    nv__cpx xa = src[k * st], xb = src[(h - k) * st];
    if (k == 0) xa.im = xb.im = 0.0f; /* bins 0 and n/2 are real in a Hermitian spectrum */
    /* Z_k = (X_k + conj X_{h-k}) + i exp(2πi k/n) (X_k - conj X_{h-k}), conjugated. */
    float sr = xa.re + xb.re, si = xa.im - xb.im, dr = xa.re - xb.re, di = xa.im + xb.im;
    nv__cpx t = {j->half[k].re, -j->half[k].im};
    float pr = t.re * dr - t.im * di, pi = t.re * di + t.im * dr;
    a[k] = (nv__cpx){sr - pi, -(si + pr)};
  }
  nv__cpx *z = nv__fft_forward(j->plan, a, w);
  for (int64_t k = 0; k < h; k++) {
    dst[2 * k] = sc * z[k].re;
    dst[2 * k + 1] = -sc * z[k].im;
  }
}

static void fft_rows(void *ctx, int64_t begin, int64_t end) {
  fft_job *j = ctx;
  int64_t n = j->p->n;
  nv__cpx *buf = nv__malloc((size_t)(FFT_BLOCK * n + j->work) * sizeof(nv__cpx));
  if (!buf) {
    atomic_store(&j->failed, true); /* any chunk's failure fails the node */
    return;
  }
  nv__cpx *a = buf, *w = buf + FFT_BLOCK * n;
  bool unit = j->in->strides[j->in->ndim - 1] == 1;
  for (int64_t r = begin; r < end;) {
    int nb = 1;
    switch (j->p->kind) {
      case NV__FFT_R2C: r2c_row(j, r, a, w); break;
      case NV__FFT_C2R: c2r_row(j, r, a, w); break;
      default:
        nb = unit || end - r < FFT_BLOCK ? 1 : FFT_BLOCK;
        c2c_rows(j, r, nb, a, w);
        break;
    }
    r += nb;
  }
  nv__free(buf);
}

static nv_status k_fft(nv__node *node, const nv__operand *in, int donated) {
  (void)donated; /* the primitive takes no donation */
  const nv__fft_params *p = node->params;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK) return st;
  if (out->size == 0) return NV_OK;
  const nv__output *im = in[0].meta;
  fft_job j = {.p = p,
               .in = im,
               .src = nv__operand_ptr(&in[0]),
               .dst = nv__output_ptr(out),
               .in_len = im->shape[im->ndim - 1],
               .out_len = out->shape[out->ndim - 1]};
  atomic_init(&j.failed, false);
  bool real = p->kind == NV__FFT_R2C || p->kind == NV__FFT_C2R;
  bool even = real && p->n % 2 == 0;
  bool owned = false;
  nv__fft_plan *plan = nv__fft_plan_get(even ? p->n / 2 : p->n, &owned);
  if (!plan) {
    st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "fft: out of memory for a plan of length %lld",
                       (long long)p->n);
  } else {
    j.plan = plan;
    j.half = even ? nv__fft_plan_half_twiddles(plan) : NULL;
    j.work = nv__fft_plan_work(plan);
    int64_t rows = out->size / j.out_len, grain = 32768 / (p->n > 0 ? p->n : 1);
    nv__parallel_for(rows, grain > 1 ? grain : 1, fft_rows, &j);
    if (atomic_load(&j.failed))
      st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "fft: out of memory for work buffers of length %lld",
                         (long long)p->n);
  }
  if (owned) nv__fft_plan_free(plan);
  return st;
}

void nv__cpu_register_fft(nv__kernel_fn *k) { k[NV__PRIM_FFT] = k_fft; }
