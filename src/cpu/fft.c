/* The fft primitive on the CPU: 1-D transforms of the last axis, rows pool-parallel. Rows of up
 * to NV__FFT_LANES_MAX elements (and at least FFT_LANES_MIN_ROWS of them) go NV__FFT_LANES at a
 * time through the engine's block layout (fft_plan.h): gathered from any input layout into blocks,
 * transformed with vector butterflies across the rows, stored scaled into the row-contiguous
 * output. Other rows go one at a time: each is gathered into a contiguous complex buffer,
 * transformed by the engine of fft_plan.c and stored scaled. Inverse complex transforms
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
/* The fewest rows the block layout takes (fewer leave most lanes idle); rows longer than
 * NV__FFT_LANES_MAX run one at a time, split in four steps by the engine. */
#define FFT_LANES_MIN_ROWS 8
#define L NV__FFT_LANES
#define FFT_TILE 16 /* elements per row a tile of the block transposes holds */
#define LANES for (int b = 0; b < L; b++)

typedef struct fft_job {
  const nv__fft_params *p;
  const nv__output *in;
  const char *src; /* element 0 of the input */
  char *dst;       /* the output */
  int64_t in_len, out_len;
  const nv__fft_plan *plan; /* length n (C2C, odd real) or n/2 (even real) */
  const nv__cpx *half;      /* exp(-2πi k / n), k <= n/2 (even real transforms) */
  int64_t plan_len;         /* the plan's length */
  int64_t work;             /* complex elements of scratch per row, or blocks per block */
  bool lanes;               /* units of NV__FFT_LANES rows in the block layout */
  int64_t rows;
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

/* The even R2C's spectrum from the half-length transform z (h values) of the row read as
 * complex pairs: E = (Z_k + conj Z_{h-k}) / 2, O = (Z_k - conj Z_{h-k}) / 2i,
 * X_k = sc (E + exp(-2πi k/n) O), for k <= h (Z_h is Z_0). */
NV_KERNEL_CLONES
static void r2c_untangle_row(nv__cpx *restrict dst, const nv__cpx *restrict z,
                             const nv__cpx *half, int64_t h, float sc) {
  float r0 = z[0].re, i0 = z[0].im;
  dst[0] = (nv__cpx){sc * (r0 + i0), 0.0f};
  dst[h] = (nv__cpx){sc * (r0 - i0), 0.0f};
  for (int64_t k = 1; k < h; k++) {
    nv__cpx zk = z[k], zc = z[h - k], t = half[k];
    float er = 0.5f * (zk.re + zc.re), ei = 0.5f * (zk.im - zc.im);
    float orr = 0.5f * (zk.im + zc.im), oi = -0.5f * (zk.re - zc.re);
    dst[k] = (nv__cpx){sc * (er + t.re * orr - t.im * oi), sc * (ei + t.re * oi + t.im * orr)};
  }
}

/* The even C2R's half-length input from the bins x_k (k <= h, element stride st):
 * Z_k = (X_k + conj X_{h-k}) + i exp(2πi k/n) (X_k - conj X_{h-k}), conjugated for the forward
 * engine; the imaginary parts of bins 0 and h are ignored (a Hermitian spectrum's are zero). */
NV_KERNEL_CLONES
static void c2r_tangle_row(nv__cpx *restrict a, const nv__cpx *restrict x, int64_t st,
                           const nv__cpx *half, int64_t h) {
  float x0 = x[0].re, xh = x[h * st].re;
  a[0] = (nv__cpx){x0 + xh, -(x0 - xh)};
  for (int64_t k = 1; k < h; k++) {
    nv__cpx xa = x[k * st], xb = x[(h - k) * st];
    float sr = xa.re + xb.re, si = xa.im - xb.im, dr = xa.re - xb.re, di = xa.im + xb.im;
    float tr = half[k].re, ti = -half[k].im;
    float pr = tr * dr - ti * di, pi = tr * di + ti * dr;
    a[k] = (nv__cpx){sr - pi, -(si + pr)};
  }
}

/* The even C2R's outputs 2k and 2k + 1: sc Re z_k and -sc Im z_k. */
NV_KERNEL_CLONES
static void c2r_store_row(float *restrict dst, const nv__cpx *restrict z, int64_t h, float sc) {
  for (int64_t k = 0; k < h; k++) {
    dst[2 * k] = sc * z[k].re;
    dst[2 * k + 1] = -sc * z[k].im;
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
  nv__cpx *z;
  if (st == 1) {
    /* the pairs (x_2k, x_2k+1) read as complex values */
    z = nv__fft_forward_from(j->plan, (const nv__cpx *)src, a, w);
  } else {
    for (int64_t k = 0; k < h; k++) a[k] = (nv__cpx){src[2 * k * st], src[(2 * k + 1) * st]};
    z = nv__fft_forward(j->plan, a, w);
  }
  r2c_untangle_row(dst, z, j->half, h, sc);
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
  c2r_tangle_row(a, src, st, j->half, h);
  /* The outputs (sc Re z_k, -sc Im z_k) pairs are complex values times (sc, -sc). */
  if (!nv__fft_forward_to(j->plan, a, 1.0f, (nv__cpx *)dst, sc, -sc, a, w))
    c2r_store_row(dst, nv__fft_forward(j->plan, a, w), h, sc);
}

/* ---- The block layout: NV__FFT_LANES rows at a time ---- */

/* Blocks k < len from complex rows rows[b] (b < nl) at element stride st, imaginary parts
 * times ci (-1 conjugates); lanes from nl on zero. Adjacent rows (the builders' moveaxis views
 * of a strided axis) read NV__FFT_LANES neighbouring values per element; other rows are read
 * FFT_TILE elements of each in turn, so the blocks written stay in the L1 cache. */
NV_KERNEL_CLONES
static void load_c(nv__cblk *restrict blk, const nv__cpx *const *rows, int nl, int64_t len,
                   int64_t st, float ci) {
  bool adjacent = nl == L;
  for (int b = 1; adjacent && b < L; b++) adjacent = rows[b] == rows[0] + b;
  if (adjacent) {
    const nv__cpx *r = rows[0];
    for (int64_t k = 0; k < len; k++) LANES {
        blk[k].re[b] = r[k * st + b].re;
        blk[k].im[b] = ci * r[k * st + b].im;
      }
    return;
  }
  for (int64_t k0 = 0; k0 < len; k0 += FFT_TILE) {
    int64_t kt = len - k0 < FFT_TILE ? len - k0 : FFT_TILE;
    nv__cblk *o = blk + k0;
    if (kt == FFT_TILE && nl == L && st == 1) {
      const nv__cpx *t[L];
      for (int b = 0; b < L; b++) t[b] = rows[b] + k0;
      nv__fft_tile_in(o, t, ci);
      continue;
    }
    for (int b = 0; b < L; b++) {
      const nv__cpx *r = rows[b] + k0 * st;
      if (b >= nl) {
        for (int64_t k = 0; k < kt; k++) o[k].re[b] = o[k].im[b] = 0.0f;
      } else if (st == 1) {
        for (int64_t k = 0; k < kt; k++) {
          o[k].re[b] = r[k].re;
          o[k].im[b] = ci * r[k].im;
        }
      } else {
        for (int64_t k = 0; k < kt; k++) {
          o[k].re[b] = r[k * st].re;
          o[k].im[b] = ci * r[k * st].im;
        }
      }
    }
  }
}

/* Blocks k < len from real rows: pairs (x_2k, x_2k+1) when `pairs` (the even real transforms'
 * half-length complex rows), else (x_k, 0); by tiles as load_c. */
NV_KERNEL_CLONES
static void load_r(nv__cblk *restrict blk, const float *const *rows, int nl, int64_t len,
                   int64_t st, bool pairs) {
  int64_t w = pairs ? 2 : 1;
  for (int64_t k0 = 0; k0 < len; k0 += FFT_TILE) {
    int64_t kt = len - k0 < FFT_TILE ? len - k0 : FFT_TILE;
    nv__cblk *o = blk + k0;
    if (kt == FFT_TILE && nl == L && st == 1 && pairs) {
      const nv__cpx *t[L]; /* the pairs read as complex values */
      for (int b = 0; b < L; b++) t[b] = (const nv__cpx *)(rows[b] + 2 * k0);
      nv__fft_tile_in(o, t, 1.0f);
      continue;
    }
    for (int b = 0; b < L; b++) {
      const float *r = rows[b] + w * k0 * st;
      if (b >= nl) {
        for (int64_t k = 0; k < kt; k++) o[k].re[b] = o[k].im[b] = 0.0f;
      } else if (pairs) {
        for (int64_t k = 0; k < kt; k++) {
          o[k].re[b] = r[2 * k * st];
          o[k].im[b] = r[(2 * k + 1) * st];
        }
      } else {
        for (int64_t k = 0; k < kt; k++) {
          o[k].re[b] = r[k * st];
          o[k].im[b] = 0.0f;
        }
      }
    }
  }
}

/* Complex output rows dst + b * rs (b < nl) of length len from the blocks, times (sr, si), by
 * tiles of FFT_TILE elements (as load_c). */
NV_KERNEL_CLONES
static void store_c(nv__cpx *restrict dst, int64_t rs, const nv__cblk *restrict blk, int nl,
                    int64_t len, float sr, float si) {
  for (int64_t k0 = 0; k0 < len; k0 += FFT_TILE) {
    int64_t kt = len - k0 < FFT_TILE ? len - k0 : FFT_TILE;
    const nv__cblk *x = blk + k0;
    if (kt == FFT_TILE && nl == L) {
      nv__cpx *t[L];
      for (int b = 0; b < L; b++) t[b] = dst + b * rs + k0;
      nv__fft_tile_out(t, x, sr, si);
      continue;
    }
    for (int b = 0; b < nl; b++) {
      nv__cpx *d = dst + b * rs + k0;
      for (int64_t k = 0; k < kt; k++) d[k] = (nv__cpx){sr * x[k].re[b], si * x[k].im[b]};
    }
  }
}

/* Real output rows dst + b * rs (b < nl): sc Re z_k (the odd C2R's). */
NV_KERNEL_CLONES
static void store_r(float *restrict dst, int64_t rs, const nv__cblk *restrict blk, int nl,
                    int64_t len, float sc) {
  for (int b = 0; b < nl; b++) {
    float *d = dst + b * rs;
    for (int64_t k = 0; k < len; k++) d[k] = sc * blk[k].re[b];
  }
}

/* The even R2C's spectrum from the half-length transform z (h values): o_k for k <= h, as
 * r2c_row. */
NV_KERNEL_CLONES
static void r2c_untangle(nv__cblk *restrict o, const nv__cblk *restrict z, const nv__cpx *half,
                         int64_t h) {
  for (int64_t k = 0; k <= h; k++) {
    const nv__cblk *zk = &z[k == h ? 0 : k], *zc = &z[k == 0 ? 0 : h - k];
    float tr = half[k].re, ti = half[k].im;
    LANES {
      float er = 0.5f * (zk->re[b] + zc->re[b]), ei = 0.5f * (zk->im[b] - zc->im[b]);
      float orr = 0.5f * (zk->im[b] + zc->im[b]), oi = -0.5f * (zk->re[b] - zc->re[b]);
      o[k].re[b] = er + tr * orr - ti * oi;
      o[k].im[b] = ei + tr * oi + ti * orr;
    }
  }
}

/* The even C2R's half-length input from the bins x_k (k <= h), conjugated, as c2r_row. */
NV_KERNEL_CLONES
static void c2r_tangle(nv__cblk *restrict a, nv__cblk *restrict x, const nv__cpx *half,
                       int64_t h) {
  LANES x[0].im[b] = x[h].im[b] = 0.0f; /* bins 0 and n/2 are real in a Hermitian spectrum */
  for (int64_t k = 0; k < h; k++) {
    const nv__cblk *xa = &x[k], *xb = &x[h - k];
    float tr = half[k].re, ti = -half[k].im;
    LANES {
      float sr = xa->re[b] + xb->re[b], si = xa->im[b] - xb->im[b];
      float dr = xa->re[b] - xb->re[b], di = xa->im[b] + xb->im[b];
      float pr = tr * dr - ti * di, pi = tr * di + ti * dr;
      a[k].re[b] = sr - pi;
      a[k].im[b] = -(si + pr);
    }
  }
}

/* The odd C2R's whole conjugated spectrum from its m = n/2 + 1 bins x: conj x_k for k < m,
 * x_{n-k} above. */
NV_KERNEL_CLONES
static void c2r_extend(nv__cblk *restrict a, const nv__cblk *restrict x, int64_t m, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    const nv__cblk *v = &x[k < m ? k : n - k];
    float ci = k < m ? -1.0f : 1.0f;
    LANES {
      a[k].re[b] = v->re[b];
      a[k].im[b] = ci * v->im[b];
    }
  }
}

/* Rows [r0, r0 + nl) (nl <= NV__FFT_LANES) in the block layout: `a` holds the transform's
 * blocks, `o` the real kinds' bins, `w` the engine's work. */
static void lanes_rows(const fft_job *j, int64_t r0, int nl, nv__cblk *a, nv__cblk *o,
                       nv__cblk *w) {
  const nv__output *in = j->in;
  int64_t n = j->p->n, st = in->strides[in->ndim - 1], h = n / 2;
  const char *src[L];
  size_t es = j->p->kind == NV__FFT_R2C ? sizeof(float) : sizeof(nv__cpx);
  for (int b = 0; b < L; b++)
    src[b] = j->src + (size_t)row_offset(in, r0 + (b < nl ? b : 0)) * es;
  float sc = (float)j->p->scale;
  nv__cblk *f;
  switch (j->p->kind) {
    case NV__FFT_R2C:
      load_r(a, (const float *const *)src, nl, n % 2 ? n : h, st, n % 2 == 0);
      f = nv__fft_forward_lanes(j->plan, a, w);
      if (n % 2 == 0) {
        r2c_untangle(o, f, j->half, h);
        f = o;
      }
      store_c((nv__cpx *)j->dst + r0 * j->out_len, j->out_len, f, nl, j->out_len, sc, sc);
      break;
    case NV__FFT_C2R:
      load_c(o, (const nv__cpx *const *)src, nl, j->in_len, st, 1.0f);
      if (n % 2) {
        c2r_extend(a, o, j->in_len, n);
      } else {
        c2r_tangle(a, o, j->half, h);
      }
      f = nv__fft_forward_lanes(j->plan, a, w);
      if (n % 2) {
        store_r((float *)j->dst + r0 * n, n, f, nl, n, sc);
      } else {
        /* The outputs 2k, 2k + 1 (sc Re z_k, -sc Im z_k) as complex values of rows of h. */
        store_c((nv__cpx *)j->dst + r0 * h, h, f, nl, h, sc, -sc);
      }
      break;
    default: {
      float c = j->p->kind == NV__FFT_C2C_INVERSE ? -1.0f : 1.0f;
      load_c(a, (const nv__cpx *const *)src, nl, n, st, c);
      f = nv__fft_forward_lanes(j->plan, a, w);
      store_c((nv__cpx *)j->dst + r0 * n, n, f, nl, n, sc, c * sc);
      break;
    }
  }
}

static void fft_lanes(fft_job *j, int64_t begin, int64_t end) {
  int64_t n = j->p->n, na = j->plan_len, no = j->p->kind >= NV__FFT_R2C ? n / 2 + 1 : 0;
  size_t bytes = (size_t)(na + no + j->work) * sizeof(nv__cblk) + 64;
  char *raw = nv__malloc(bytes);
  if (!raw) {
    atomic_store(&j->failed, true);
    return;
  }
  nv__cblk *a = (nv__cblk *)(raw + (64 - (uintptr_t)raw % 64) % 64), *o = a + na, *w = o + no;
  for (int64_t u = begin; u < end; u++) {
    int64_t r0 = u * L;
    lanes_rows(j, r0, j->rows - r0 < L ? (int)(j->rows - r0) : L, a, o, w);
  }
  nv__free(raw);
}

static void fft_rows(void *ctx, int64_t begin, int64_t end) {
  fft_job *j = ctx;
  if (j->lanes) {
    fft_lanes(j, begin, end);
    return;
  }
  int64_t n = j->p->n;
  /* Complex rows gathered from a strided axis come FFT_BLOCK at a time (c2c_rows). */
  bool unit = j->in->strides[j->in->ndim - 1] == 1;
  int64_t nrows = j->p->kind <= NV__FFT_C2C_INVERSE && !unit ? FFT_BLOCK : 1;
  nv__cpx *buf = nv__malloc((size_t)(nrows * n + j->work) * sizeof(nv__cpx));
  if (!buf) {
    atomic_store(&j->failed, true); /* any chunk's failure fails the node */
    return;
  }
  nv__cpx *a = buf, *w = buf + nrows * n;
  for (int64_t r = begin; r < end;) {
    int nb = 1;
    switch (j->p->kind) {
      case NV__FFT_R2C: r2c_row(j, r, a, w); break;
      case NV__FFT_C2R: c2r_row(j, r, a, w); break;
      default: {
        float c = j->p->kind == NV__FFT_C2C_INVERSE ? -1.0f : 1.0f, sc = (float)j->p->scale;
        if (unit && nv__fft_forward_to(j->plan, (const nv__cpx *)j->src + row_offset(j->in, r), c,
                                       (nv__cpx *)j->dst + r * n, sc, c * sc, a, w))
          break;
        nb = unit || end - r < FFT_BLOCK ? 1 : FFT_BLOCK;
        c2c_rows(j, r, nb, a, w);
        break;
      }
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
    j.plan_len = even ? p->n / 2 : p->n;
    j.half = even ? nv__fft_plan_half_twiddles(plan) : NULL;
    j.rows = out->size / j.out_len;
    j.lanes = j.plan_len <= NV__FFT_LANES_MAX && j.rows >= FFT_LANES_MIN_ROWS;
    j.work = j.lanes ? nv__fft_plan_work_lanes(plan) : nv__fft_plan_work(plan);
    /* Units of work: blocks of rows or rows, about 32768 elements a chunk at least. */
    int64_t per = j.lanes ? L : 1, units = (j.rows + per - 1) / per;
    int64_t grain = 32768 / (p->n * per > 0 ? p->n * per : 1);
    nv__parallel_for(units, grain > 1 ? grain : 1, fft_rows, &j);
    if (atomic_load(&j.failed))
      st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "fft: out of memory for work buffers of length %lld",
                         (long long)p->n);
  }
  if (owned) nv__fft_plan_free(plan);
  return st;
}

void nv__cpu_register_fft(nv__kernel_fn *k) { k[NV__PRIM_FFT] = k_fft; }
