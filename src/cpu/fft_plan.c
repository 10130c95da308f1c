/* The CPU FFT engine (see fft_plan.h).
 *
 * Stockham autosort, decimation in frequency: a stage of radix p over sub-transforms of length
 * `len` at stride s (len * s = n) reads a_r = x[t + s (q + r m)] for r < p (m = len / p),
 * forms their p-point DFT b_u, multiplies b_u by exp(-2πi u q / len) and writes
 * y[t + s (p q + u)]; the next stage has len = m and stride s p. After the last stage the
 * result is in natural order, in x or y by the parity of the stage count. The inner loop runs
 * over t (contiguous in memory) so it vectorizes once s is large. The block layout runs the
 * same stages with every element a block of NV__FFT_LANES rows, so every butterfly is a vector
 * operation across the rows whatever s is.
 *
 * Four-step (rows of FFT_FOUR_STEP elements or more that split as n = n1 n2 with both factors
 * at least NV__FFT_LANES): with j = j1 n2 + j2 and k = k1 + n1 k2,
 * X_k = Σ_j2 exp(-2πi j2 k2 / n2) [exp(-2πi j2 k1 / n) Σ_j1 x_j exp(-2πi j1 k1 / n1)]: the n2
 * columns' n1-point transforms, NV__FFT_LANES adjacent columns at a time in the block layout
 * (written back in place, times the twiddle), then the n1 rows' n2-point transforms, as many
 * rows at a time, stored transposed. Both passes touch contiguous runs of NV__FFT_LANES values,
 * and the sub-transforms' blocks stay in cache where a long row's Stockham stages would not.
 *
 * Bluestein: with w_j = exp(-πi j² / n), X_k = w_k Σ_j (x_j w_j) conj(w_{k-j}), a circular
 * convolution of length M >= 2n - 1 (M 5-smooth) computed with M-point transforms; the
 * filter's transform (divided by M) is precomputed with the plan. j² is reduced modulo 2n in
 * integers so the chirp's phase keeps its precision for large n. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "core/internal.h"
#include "cpu/fft_plan.h"
#include "cpu/kernels.h"
#include "ops/fft_params.h"

#define FFT_MAX_STAGES 64
#define FFT_MAX_DIRECT 31 /* larger prime factors go to Bluestein */
#define FFT_CACHE 64
#define FFT_FOUR_STEP 2048 /* row transforms at least this long split in four steps */
#define L NV__FFT_LANES
#define FFT_TILE 16 /* elements per row a tile of load_rows holds */

/* A decomposition of n into Stockham stages: their radices and twiddles. */
typedef struct fft_stages {
  int n;
  int radix[FFT_MAX_STAGES];
  nv__cpx *tw[FFT_MAX_STAGES]; /* stage twiddles: [q * (p - 1) + u - 1] */
} fft_stages;

struct nv__fft_plan {
  int64_t n;
  /* The stages of one row (radices 4, 2, 3, 5, other primes) and of the block layout (8
   * first: its vector butterflies keep a radix-8 stage's values in registers). */
  fft_stages row, blk;
  nv__cpx *half;               /* exp(-2πi k / 2n), k = 0 .. n (real transforms of 2n) */
  /* Bluestein (inner != NULL): the M-point plan, the chirp w_j (j < n) and the filter. */
  nv__fft_plan *inner;
  int64_t m;
  nv__cpx *chirp, *filt;
  /* Four-step (p1 != NULL): n = n1 n2, the plans of n1 and n2, and the twiddles
   * exp(-2πi j2 k1 / n) at [k1 * n2 + j2], real and imaginary parts apart. */
  int64_t n1, n2;
  nv__fft_plan *p1, *p2;
  float *twr, *twi;
};

static const double TWO_PI = 6.283185307179586476925286766559;

/* exp(-2πi k / len) with k reduced into [0, len) first. */
static nv__cpx root(int64_t k, int64_t len) {
  k %= len;
  if (k < 0) k += len;
  double a = -TWO_PI * (double)k / (double)len;
  return (nv__cpx){(float)cos(a), (float)sin(a)};
}

static int largest_prime(int64_t n) {
  int64_t big = 1;
  for (int64_t f = 2; f * f <= n; f++)
    while (n % f == 0) {
      big = f;
      n /= f;
    }
  if (n > 1) big = n;
  return big > INT32_MAX ? INT32_MAX : (int)big;
}

void nv__fft_plan_free(nv__fft_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->row.n; i++) nv__free(p->row.tw[i]);
  for (int i = 0; i < p->blk.n; i++) nv__free(p->blk.tw[i]);
  nv__free(p->half);
  nv__free(p->chirp);
  nv__free(p->filt);
  nv__fft_plan_free(p->inner);
  nv__fft_plan_free(p->p1);
  nv__fft_plan_free(p->p2);
  nv__free(p->twr);
  nv__free(p->twi);
  nv__free(p);
}

static nv__fft_plan *plan_new(int64_t n, bool split);

static bool plan_bluestein(nv__fft_plan *p) {
  /* The convolution length: a power of two (the cheapest radix-4 stages) unless a 2,3,5-smooth
   * length is more than 20% shorter. */
  int64_t n = p->n, m = nv__fft_smooth(2 * n - 1), p2 = 1;
  while (p2 < 2 * n - 1) p2 *= 2;
  if (p2 * 5 <= m * 6) m = p2;
  p->m = m;
  p->inner = plan_new(m, true);
  p->chirp = nv__malloc((size_t)n * sizeof(nv__cpx));
  p->filt = nv__malloc((size_t)m * sizeof(nv__cpx));
  nv__cpx *work = p->inner ? nv__malloc((size_t)nv__fft_plan_work(p->inner) * sizeof(nv__cpx))
                           : NULL;
  bool ok = p->inner && p->chirp && p->filt && work;
  if (ok) {
    for (int64_t j = 0; j < n; j++) {
      /* exp(-πi j² / n) = exp(-2πi (j² mod 2n) / 2n) */
      int64_t q = (int64_t)(((unsigned __int128)j * (unsigned __int128)j) % (unsigned)(2 * n));
      p->chirp[j] = root(q, 2 * n);
    }
    memset(p->filt, 0, (size_t)m * sizeof(nv__cpx));
    for (int64_t j = 0; j < n; j++) {
      nv__cpx c = {p->chirp[j].re, -p->chirp[j].im};
      p->filt[j] = c;
      if (j > 0) p->filt[m - j] = c;
    }
    nv__cpx *r = nv__fft_forward(p->inner, p->filt, work);
    float inv = (float)(1.0 / (double)m);
    for (int64_t k = 0; k < m; k++) {
      nv__cpx v = r[k];
      p->filt[k] = (nv__cpx){v.re * inv, v.im * inv};
    }
  }
  nv__free(work);
  return ok;
}

/* The four-step split of n: n1 the largest divisor with n1² <= n and both factors at least
 * NV__FFT_LANES (0 when there is none). */
static int64_t four_step_split(int64_t n) {
  if (n < FFT_FOUR_STEP) return 0;
  for (int64_t d = (int64_t)sqrt((double)n) + 1; d >= L; d--)
    if (d * d <= n && n % d == 0 && n / d >= L) return d;
  return 0;
}

static bool plan_four_step(nv__fft_plan *p, int64_t n1) {
  int64_t n = p->n, n2 = n / n1;
  p->n1 = n1;
  p->n2 = n2;
  p->p1 = plan_new(n1, false);
  p->p2 = plan_new(n2, false);
  p->twr = nv__malloc((size_t)n * sizeof(float));
  p->twi = nv__malloc((size_t)n * sizeof(float));
  if (!p->p1 || !p->p2 || !p->twr || !p->twi) return false;
  for (int64_t k1 = 0; k1 < n1; k1++)
    for (int64_t j2 = 0; j2 < n2; j2++) {
      /* j2 k1 < n: exact in int64 */
      nv__cpx w = root(j2 * k1, n);
      p->twr[k1 * n2 + j2] = w.re;
      p->twi[k1 * n2 + j2] = w.im;
    }
  return true;
}

/* The stages of n: radix `first` (8 or 4) as often as it divides, then 4, 2, 3, 5 and the other
 * primes. */
static bool stages_new(fft_stages *st, int64_t n, int first) {
  int64_t r = n;
  while (r % first == 0) st->radix[st->n++] = first, r /= first;
  while (r % 4 == 0) st->radix[st->n++] = 4, r /= 4;
  for (int f = 2; r > 1; f++)
    while (r % f == 0) st->radix[st->n++] = f, r /= f;
  int64_t len = n;
  for (int i = 0; i < st->n; i++) {
    int rad = st->radix[i];
    int64_t m = len / rad;
    st->tw[i] = nv__malloc((size_t)(m * (rad - 1) > 0 ? m * (rad - 1) : 1) * sizeof(nv__cpx));
    if (!st->tw[i]) return false;
    for (int64_t q = 0; q < m; q++)
      for (int u = 1; u < rad; u++) st->tw[i][q * (rad - 1) + u - 1] = root(u * q, len);
    len = m;
  }
  return true;
}

/* A plan of length n; `split` allows the four-step form (the sub-plans of one never split:
 * they run in the block layout only). */
static nv__fft_plan *plan_new(int64_t n, bool split) {
  nv__fft_plan *p = nv__malloc(sizeof *p);
  if (!p) return NULL;
  memset(p, 0, sizeof *p);
  p->n = n;
  bool ok = true;
  p->half = nv__malloc((size_t)(n + 1) * sizeof(nv__cpx));
  if (!p->half) ok = false;
  for (int64_t k = 0; ok && k <= n; k++) p->half[k] = root(k, 2 * n);
  if (ok && largest_prime(n) > FFT_MAX_DIRECT) {
    ok = plan_bluestein(p);
  } else if (ok) {
    /* Only the stages a transform of n runs: one row's where it has no four-step split, the
     * block layout's up to the longest block transform (Bluestein's convolutions of the block
     * layout's rows included: M < 4n) and in the four-step sub-plans (split false). */
    int64_t n1 = split ? four_step_split(n) : 0;
    if (!n1) ok = stages_new(&p->row, n, 4);
    if (ok && (!split || n <= 4 * NV__FFT_LANES_MAX)) ok = stages_new(&p->blk, n, 8);
    if (ok && n1) ok = plan_four_step(p, n1);
  }
  if (!ok) {
    nv__fft_plan_free(p);
    return NULL;
  }
  return p;
}

int64_t nv__fft_plan_work_lanes(const nv__fft_plan *p) {
  return p->inner ? 2 * p->m + nv__fft_plan_work_lanes(p->inner) : p->n;
}

int64_t nv__fft_plan_work(const nv__fft_plan *p) {
  if (p->inner) return 2 * p->m + nv__fft_plan_work(p->inner);
  if (!p->p1) return p->n;
  /* The output row, then the sub-transforms' blocks and their work (a block is L elements). */
  int64_t big = p->n1 > p->n2 ? p->n1 : p->n2;
  int64_t w1 = nv__fft_plan_work_lanes(p->p1), w2 = nv__fft_plan_work_lanes(p->p2);
  return p->n + (big + (w1 > w2 ? w1 : w2)) * L;
}

const nv__cpx *nv__fft_plan_half_twiddles(const nv__fft_plan *p) { return p->half; }

/* ---- The cache ---- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static nv__fft_plan *cache[FFT_CACHE];
static int cached;

nv__fft_plan *nv__fft_plan_get(int64_t n, bool *owned) {
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < cached; i++)
    if (cache[i]->n == n) {
      nv__fft_plan *p = cache[i];
      pthread_mutex_unlock(&cache_lock);
      *owned = false;
      return p;
    }
  pthread_mutex_unlock(&cache_lock);
  /* Built outside the lock (a large Bluestein plan takes a while); a race builds it twice and
   * the loser's copy is the caller's own. */
  nv__fft_plan *p = plan_new(n, true);
  if (!p) return NULL;
  *owned = true;
  pthread_mutex_lock(&cache_lock);
  bool present = false;
  for (int i = 0; i < cached; i++) present |= cache[i]->n == n;
  if (!present && cached < FFT_CACHE) {
    cache[cached++] = p;
    *owned = false;
  }
  pthread_mutex_unlock(&cache_lock);
  return p;
}

/* ---- Stages ---- */

#define CADD(a, b) ((nv__cpx){(a).re + (b).re, (a).im + (b).im})
#define CSUB(a, b) ((nv__cpx){(a).re - (b).re, (a).im - (b).im})
#define CMUL(a, b) \
  ((nv__cpx){(a).re * (b).re - (a).im * (b).im, (a).re * (b).im + (a).im * (b).re})
/* -i z and i z */
#define CMI(a) ((nv__cpx){(a).im, -(a).re})
#define CPI(a) ((nv__cpx){-(a).im, (a).re})

NV_KERNEL_CLONES
static void stage2(const nv__cpx *restrict x, nv__cpx *restrict y, const nv__cpx *tw, int64_t m,
                   int64_t s) {
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w = tw[q];
    const nv__cpx *x0 = x + s * q, *x1 = x + s * (q + m);
    nv__cpx *y0 = y + s * 2 * q, *y1 = y0 + s;
    for (int64_t t = 0; t < s; t++) {
      nv__cpx a = x0[t], b = x1[t];
      y0[t] = CADD(a, b);
      nv__cpx d = CSUB(a, b);
      y1[t] = CMUL(d, w);
    }
  }
}

NV_KERNEL_CLONES
static void stage4(const nv__cpx *restrict x, nv__cpx *restrict y, const nv__cpx *tw, int64_t m,
                   int64_t s) {
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w1 = tw[3 * q], w2 = tw[3 * q + 1], w3 = tw[3 * q + 2];
    const nv__cpx *x0 = x + s * q, *x1 = x0 + s * m, *x2 = x1 + s * m, *x3 = x2 + s * m;
    nv__cpx *y0 = y + s * 4 * q, *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s;
    for (int64_t t = 0; t < s; t++) {
      nv__cpx a0 = x0[t], a1 = x1[t], a2 = x2[t], a3 = x3[t];
      nv__cpx s02 = CADD(a0, a2), d02 = CSUB(a0, a2), s13 = CADD(a1, a3), d13 = CSUB(a1, a3);
      nv__cpx b1 = CADD(d02, CMI(d13)), b2 = CSUB(s02, s13), b3 = CADD(d02, CPI(d13));
      y0[t] = CADD(s02, s13);
      y1[t] = CMUL(b1, w1);
      y2[t] = CMUL(b2, w2);
      y3[t] = CMUL(b3, w3);
    }
  }
}

NV_KERNEL_CLONES
static void stage3(const nv__cpx *restrict x, nv__cpx *restrict y, const nv__cpx *tw, int64_t m,
                   int64_t s) {
  const float h = 0.86602540378443864676f; /* sin(2π/3) */
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w1 = tw[2 * q], w2 = tw[2 * q + 1];
    const nv__cpx *x0 = x + s * q, *x1 = x0 + s * m, *x2 = x1 + s * m;
    nv__cpx *y0 = y + s * 3 * q, *y1 = y0 + s, *y2 = y1 + s;
    for (int64_t t = 0; t < s; t++) {
      nv__cpx a0 = x0[t], a1 = x1[t], a2 = x2[t];
      nv__cpx sum = CADD(a1, a2), dif = CSUB(a1, a2);
      nv__cpx c = {a0.re - 0.5f * sum.re, a0.im - 0.5f * sum.im};
      nv__cpx e = {h * dif.im, -h * dif.re}; /* -i h (a1 - a2) */
      y0[t] = CADD(a0, sum);
      nv__cpx b1 = CADD(c, e), b2 = CSUB(c, e);
      y1[t] = CMUL(b1, w1);
      y2[t] = CMUL(b2, w2);
    }
  }
}

NV_KERNEL_CLONES
static void stage5(const nv__cpx *restrict x, nv__cpx *restrict y, const nv__cpx *tw, int64_t m,
                   int64_t s) {
  const float c1 = 0.30901699437494742410f, c2 = -0.80901699437494742410f;
  const float s1 = 0.95105651629515357212f, s2 = 0.58778525229247312917f;
  for (int64_t q = 0; q < m; q++) {
    const nv__cpx *w = tw + 4 * q;
    const nv__cpx *x0 = x + s * q, *x1 = x0 + s * m, *x2 = x1 + s * m, *x3 = x2 + s * m,
                  *x4 = x3 + s * m;
    nv__cpx *y0 = y + s * 5 * q, *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s, *y4 = y3 + s;
    for (int64_t t = 0; t < s; t++) {
      nv__cpx a0 = x0[t], a1 = x1[t], a2 = x2[t], a3 = x3[t], a4 = x4[t];
      nv__cpx s14 = CADD(a1, a4), d14 = CSUB(a1, a4), s23 = CADD(a2, a3), d23 = CSUB(a2, a3);
      nv__cpx p1 = {a0.re + c1 * s14.re + c2 * s23.re, a0.im + c1 * s14.im + c2 * s23.im};
      nv__cpx p2 = {a0.re + c2 * s14.re + c1 * s23.re, a0.im + c2 * s14.im + c1 * s23.im};
      /* q1 = s1 d14 + s2 d23, q2 = s2 d14 - s1 d23; b1 = p1 - i q1, b4 = p1 + i q1,
       * b2 = p2 - i q2, b3 = p2 + i q2. */
      nv__cpx q1 = {s1 * d14.re + s2 * d23.re, s1 * d14.im + s2 * d23.im};
      nv__cpx q2 = {s2 * d14.re - s1 * d23.re, s2 * d14.im - s1 * d23.im};
      y0[t] = (nv__cpx){a0.re + s14.re + s23.re, a0.im + s14.im + s23.im};
      nv__cpx b1 = CADD(p1, CMI(q1)), b4 = CADD(p1, CPI(q1));
      nv__cpx b2 = CADD(p2, CMI(q2)), b3 = CADD(p2, CPI(q2));
      y1[t] = CMUL(b1, w[0]);
      y2[t] = CMUL(b2, w[1]);
      y3[t] = CMUL(b3, w[2]);
      y4[t] = CMUL(b4, w[3]);
    }
  }
}

/* A stage of an odd prime radix p <= FFT_MAX_DIRECT: the p-point DFT done directly. */
static void stage_generic(const nv__cpx *restrict x, nv__cpx *restrict y, const nv__cpx *tw,
                          int64_t m, int64_t s, int p) {
  nv__cpx rt[FFT_MAX_DIRECT], a[FFT_MAX_DIRECT];
  for (int k = 0; k < p; k++) rt[k] = root(k, p);
  for (int64_t q = 0; q < m; q++)
    for (int64_t t = 0; t < s; t++) {
      for (int r = 0; r < p; r++) a[r] = x[t + s * (q + r * m)];
      for (int u = 0; u < p; u++) {
        nv__cpx b = a[0];
        for (int r = 1, k = u; r < p; r++, k = (k + u) % p) b = CADD(b, CMUL(a[r], rt[k]));
        y[t + s * (p * q + u)] = u ? CMUL(b, tw[q * (p - 1) + u - 1]) : b;
      }
    }
}

static nv__cpx *bluestein(const nv__fft_plan *p, nv__cpx *a, nv__cpx *work) {
  int64_t n = p->n, m = p->m;
  nv__cpx *buf = work, *rest = work + m;
  for (int64_t j = 0; j < n; j++) buf[j] = CMUL(a[j], p->chirp[j]);
  memset(buf + n, 0, (size_t)(m - n) * sizeof(nv__cpx));
  nv__cpx *f = nv__fft_forward(p->inner, buf, rest);
  /* The product with the filter, conjugated so the forward engine gives the inverse. */
  for (int64_t k = 0; k < m; k++) {
    nv__cpx v = CMUL(f[k], p->filt[k]);
    f[k] = (nv__cpx){v.re, -v.im};
  }
  nv__cpx *g = f == buf ? nv__fft_forward(p->inner, buf, rest)
                        : nv__fft_forward(p->inner, f, rest + m);
  for (int64_t k = 0; k < n; k++) {
    nv__cpx v = {g[k].re, -g[k].im};
    a[k] = CMUL(v, p->chirp[k]);
  }
  return a;
}

/* ---- The block layout: NV__FFT_LANES rows at once ---- */

/* A lane loop: the compiler makes each one vector operations across the rows. */
#define LANES for (int b = 0; b < L; b++)

NV_KERNEL_CLONES
static void stage2_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                     int64_t m, int64_t s) {
  for (int64_t q = 0; q < m; q++) {
    float wr = tw[q].re, wi = tw[q].im;
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t, *x1 = x0 + s * m;
      nv__cblk *y0 = y + s * 2 * q + t, *y1 = y0 + s;
      LANES {
        float ar = x0->re[b], ai = x0->im[b], br = x1->re[b], bi = x1->im[b];
        float dr = ar - br, di = ai - bi;
        y0->re[b] = ar + br;
        y0->im[b] = ai + bi;
        y1->re[b] = dr * wr - di * wi;
        y1->im[b] = dr * wi + di * wr;
      }
    }
  }
}

NV_KERNEL_CLONES
static void stage4_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                     int64_t m, int64_t s) {
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w1 = tw[3 * q], w2 = tw[3 * q + 1], w3 = tw[3 * q + 2];
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t, *x1 = x0 + s * m, *x2 = x1 + s * m, *x3 = x2 + s * m;
      nv__cblk *y0 = y + s * 4 * q + t, *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s;
      LANES {
        float s02r = x0->re[b] + x2->re[b], s02i = x0->im[b] + x2->im[b];
        float d02r = x0->re[b] - x2->re[b], d02i = x0->im[b] - x2->im[b];
        float s13r = x1->re[b] + x3->re[b], s13i = x1->im[b] + x3->im[b];
        float d13r = x1->re[b] - x3->re[b], d13i = x1->im[b] - x3->im[b];
        /* b1 = d02 - i d13, b2 = s02 - s13, b3 = d02 + i d13 */
        float b1r = d02r + d13i, b1i = d02i - d13r, b2r = s02r - s13r, b2i = s02i - s13i;
        float b3r = d02r - d13i, b3i = d02i + d13r;
        y0->re[b] = s02r + s13r;
        y0->im[b] = s02i + s13i;
        y1->re[b] = b1r * w1.re - b1i * w1.im;
        y1->im[b] = b1r * w1.im + b1i * w1.re;
        y2->re[b] = b2r * w2.re - b2i * w2.im;
        y2->im[b] = b2r * w2.im + b2i * w2.re;
        y3->re[b] = b3r * w3.re - b3i * w3.im;
        y3->im[b] = b3r * w3.im + b3i * w3.re;
      }
    }
  }
}

NV_KERNEL_CLONES
static void stage3_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                     int64_t m, int64_t s) {
  const float h = 0.86602540378443864676f; /* sin(2π/3) */
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w1 = tw[2 * q], w2 = tw[2 * q + 1];
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t, *x1 = x0 + s * m, *x2 = x1 + s * m;
      nv__cblk *y0 = y + s * 3 * q + t, *y1 = y0 + s, *y2 = y1 + s;
      LANES {
        float a0r = x0->re[b], a0i = x0->im[b];
        float sr = x1->re[b] + x2->re[b], si = x1->im[b] + x2->im[b];
        float dr = x1->re[b] - x2->re[b], di = x1->im[b] - x2->im[b];
        float cr = a0r - 0.5f * sr, ci = a0i - 0.5f * si;
        float er = h * di, ei = -h * dr; /* -i h (a1 - a2) */
        float b1r = cr + er, b1i = ci + ei, b2r = cr - er, b2i = ci - ei;
        y0->re[b] = a0r + sr;
        y0->im[b] = a0i + si;
        y1->re[b] = b1r * w1.re - b1i * w1.im;
        y1->im[b] = b1r * w1.im + b1i * w1.re;
        y2->re[b] = b2r * w2.re - b2i * w2.im;
        y2->im[b] = b2r * w2.im + b2i * w2.re;
      }
    }
  }
}

NV_KERNEL_CLONES
static void stage5_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                     int64_t m, int64_t s) {
  const float c1 = 0.30901699437494742410f, c2 = -0.80901699437494742410f;
  const float s1 = 0.95105651629515357212f, s2 = 0.58778525229247312917f;
  for (int64_t q = 0; q < m; q++) {
    const nv__cpx *w = tw + 4 * q;
    nv__cpx w1 = w[0], w2 = w[1], w3 = w[2], w4 = w[3];
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t, *x1 = x0 + s * m, *x2 = x1 + s * m, *x3 = x2 + s * m,
                     *x4 = x3 + s * m;
      nv__cblk *y0 = y + s * 5 * q + t, *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s, *y4 = y3 + s;
      LANES {
        float a0r = x0->re[b], a0i = x0->im[b];
        float s14r = x1->re[b] + x4->re[b], s14i = x1->im[b] + x4->im[b];
        float d14r = x1->re[b] - x4->re[b], d14i = x1->im[b] - x4->im[b];
        float s23r = x2->re[b] + x3->re[b], s23i = x2->im[b] + x3->im[b];
        float d23r = x2->re[b] - x3->re[b], d23i = x2->im[b] - x3->im[b];
        float p1r = a0r + c1 * s14r + c2 * s23r, p1i = a0i + c1 * s14i + c2 * s23i;
        float p2r = a0r + c2 * s14r + c1 * s23r, p2i = a0i + c2 * s14i + c1 * s23i;
        /* q1 = s1 d14 + s2 d23, q2 = s2 d14 - s1 d23; b1 = p1 - i q1, b4 = p1 + i q1,
         * b2 = p2 - i q2, b3 = p2 + i q2. */
        float q1r = s1 * d14r + s2 * d23r, q1i = s1 * d14i + s2 * d23i;
        float q2r = s2 * d14r - s1 * d23r, q2i = s2 * d14i - s1 * d23i;
        float b1r = p1r + q1i, b1i = p1i - q1r, b4r = p1r - q1i, b4i = p1i + q1r;
        float b2r = p2r + q2i, b2i = p2i - q2r, b3r = p2r - q2i, b3i = p2i + q2r;
        y0->re[b] = a0r + s14r + s23r;
        y0->im[b] = a0i + s14i + s23i;
        y1->re[b] = b1r * w1.re - b1i * w1.im;
        y1->im[b] = b1r * w1.im + b1i * w1.re;
        y2->re[b] = b2r * w2.re - b2i * w2.im;
        y2->im[b] = b2r * w2.im + b2i * w2.re;
        y3->re[b] = b3r * w3.re - b3i * w3.im;
        y3->im[b] = b3r * w3.im + b3i * w3.re;
        y4->re[b] = b4r * w4.re - b4i * w4.im;
        y4->im[b] = b4r * w4.im + b4i * w4.re;
      }
    }
  }
}

/* Radix 8: the 4-point DFTs E of the even and O of the odd inputs, b_u = E_u + W^u O_u and
 * b_{u+4} = E_u - W^u O_u (W = exp(-2πi/8)). */
NV_KERNEL_CLONES
static void stage8_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                     int64_t m, int64_t s) {
  const float r2 = 0.70710678118654752440f; /* 1/√2 */
  for (int64_t q = 0; q < m; q++) {
    nv__cpx w1 = tw[7 * q], w2 = tw[7 * q + 1], w3 = tw[7 * q + 2], w4 = tw[7 * q + 3],
            w5 = tw[7 * q + 4], w6 = tw[7 * q + 5], w7 = tw[7 * q + 6];
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t;
      nv__cblk *y0 = y + s * 8 * q + t;
      int64_t sm = s * m;
      const nv__cblk *x1 = x0 + sm, *x2 = x1 + sm, *x3 = x2 + sm, *x4 = x3 + sm, *x5 = x4 + sm,
                     *x6 = x5 + sm, *x7 = x6 + sm;
      nv__cblk *y1 = y0 + s, *y2 = y1 + s, *y3 = y2 + s, *y4 = y3 + s, *y5 = y4 + s,
               *y6 = y5 + s, *y7 = y6 + s;
      LANES {
        /* E from a0, a2, a4, a6; O from a1, a3, a5, a7 (each as stage4's butterfly) */
        float es02r = x0->re[b] + x4->re[b], es02i = x0->im[b] + x4->im[b];
        float ed02r = x0->re[b] - x4->re[b], ed02i = x0->im[b] - x4->im[b];
        float es13r = x2->re[b] + x6->re[b], es13i = x2->im[b] + x6->im[b];
        float ed13r = x2->re[b] - x6->re[b], ed13i = x2->im[b] - x6->im[b];
        float os02r = x1->re[b] + x5->re[b], os02i = x1->im[b] + x5->im[b];
        float od02r = x1->re[b] - x5->re[b], od02i = x1->im[b] - x5->im[b];
        float os13r = x3->re[b] + x7->re[b], os13i = x3->im[b] + x7->im[b];
        float od13r = x3->re[b] - x7->re[b], od13i = x3->im[b] - x7->im[b];
        float e0r = es02r + es13r, e0i = es02i + es13i, e2r = es02r - es13r, e2i = es02i - es13i;
        float e1r = ed02r + ed13i, e1i = ed02i - ed13r, e3r = ed02r - ed13i, e3i = ed02i + ed13r;
        float o0r = os02r + os13r, o0i = os02i + os13i, o2r = os02r - os13r, o2i = os02i - os13i;
        float o1r = od02r + od13i, o1i = od02i - od13r, o3r = od02r - od13i, o3i = od02i + od13r;
        /* W O_1 = O_1 (1 - i)/√2, W² O_2 = -i O_2, W³ O_3 = -O_3 (1 + i)/√2 */
        float t1r = r2 * (o1r + o1i), t1i = r2 * (o1i - o1r);
        float t3r = r2 * (o3i - o3r), t3i = -r2 * (o3r + o3i);
        float b1r = e1r + t1r, b1i = e1i + t1i, b5r = e1r - t1r, b5i = e1i - t1i;
        float b2r = e2r + o2i, b2i = e2i - o2r, b6r = e2r - o2i, b6i = e2i + o2r;
        float b3r = e3r + t3r, b3i = e3i + t3i, b7r = e3r - t3r, b7i = e3i - t3i;
        float b4r = e0r - o0r, b4i = e0i - o0i;
        y0->re[b] = e0r + o0r;
        y0->im[b] = e0i + o0i;
        y1->re[b] = b1r * w1.re - b1i * w1.im;
        y1->im[b] = b1r * w1.im + b1i * w1.re;
        y2->re[b] = b2r * w2.re - b2i * w2.im;
        y2->im[b] = b2r * w2.im + b2i * w2.re;
        y3->re[b] = b3r * w3.re - b3i * w3.im;
        y3->im[b] = b3r * w3.im + b3i * w3.re;
        y4->re[b] = b4r * w4.re - b4i * w4.im;
        y4->im[b] = b4r * w4.im + b4i * w4.re;
        y5->re[b] = b5r * w5.re - b5i * w5.im;
        y5->im[b] = b5r * w5.im + b5i * w5.re;
        y6->re[b] = b6r * w6.re - b6i * w6.im;
        y6->im[b] = b6r * w6.im + b6i * w6.re;
        y7->re[b] = b7r * w7.re - b7i * w7.im;
        y7->im[b] = b7r * w7.im + b7i * w7.re;
      }
    }
  }
}

/* A stage of an odd prime radix p <= FFT_MAX_DIRECT in the block layout. */
NV_KERNEL_CLONES
static void stage_generic_l(const nv__cblk *restrict x, nv__cblk *restrict y, const nv__cpx *tw,
                            int64_t m, int64_t s, int p) {
  nv__cpx rt[FFT_MAX_DIRECT];
  for (int k = 0; k < p; k++) rt[k] = root(k, p);
  for (int64_t q = 0; q < m; q++)
    for (int64_t t = 0; t < s; t++) {
      const nv__cblk *x0 = x + s * q + t;
      for (int u = 0; u < p; u++) {
        nv__cblk acc = *x0;
        for (int r = 1, k = u; r < p; r++, k = (k + u) % p) {
          const nv__cblk *a = x0 + s * m * r;
          float cr = rt[k].re, ci = rt[k].im;
          LANES {
            acc.re[b] += a->re[b] * cr - a->im[b] * ci;
            acc.im[b] += a->re[b] * ci + a->im[b] * cr;
          }
        }
        nv__cblk *o = y + s * (p * q + u) + t;
        nv__cpx w = u ? tw[q * (p - 1) + u - 1] : (nv__cpx){1.0f, 0.0f};
        LANES {
          o->re[b] = acc.re[b] * w.re - acc.im[b] * w.im;
          o->im[b] = acc.re[b] * w.im + acc.im[b] * w.re;
        }
      }
    }
}

/* y[k] = x[k] c[k] for k < n (c broadcast over the lanes; y may be x), x conjugated first when
 * `conj_in` and the product after when `conj_out`. */
NV_KERNEL_CLONES
static void lanes_mul(nv__cblk *y, const nv__cblk *x, const nv__cpx *c,
                      int64_t n, bool conj_in, bool conj_out) {
  float si = conj_in ? -1.0f : 1.0f, so = conj_out ? -1.0f : 1.0f;
  for (int64_t k = 0; k < n; k++) {
    float cr = c[k].re, ci = c[k].im;
    LANES {
      float xr = x[k].re[b], xi = si * x[k].im[b];
      y[k].re[b] = xr * cr - xi * ci;
      y[k].im[b] = so * (xr * ci + xi * cr);
    }
  }
}

static nv__cblk *bluestein_lanes(const nv__fft_plan *p, nv__cblk *a, nv__cblk *work) {
  int64_t n = p->n, m = p->m;
  nv__cblk *buf = work, *rest = work + m;
  lanes_mul(buf, a, p->chirp, n, false, false);
  memset(buf + n, 0, (size_t)(m - n) * sizeof(nv__cblk));
  nv__cblk *f = nv__fft_forward_lanes(p->inner, buf, rest);
  /* The product with the filter, conjugated so the forward engine gives the inverse. */
  lanes_mul(f, f, p->filt, m, false, true);
  nv__cblk *g = f == buf ? nv__fft_forward_lanes(p->inner, buf, rest)
                         : nv__fft_forward_lanes(p->inner, f, rest + m);
  lanes_mul(a, g, p->chirp, n, true, false);
  return a;
}

nv__cblk *nv__fft_forward_lanes(const nv__fft_plan *p, nv__cblk *a, nv__cblk *work) {
  if (p->inner) return bluestein_lanes(p, a, work);
  nv__cblk *x = a, *y = work;
  int64_t len = p->n, s = 1;
  for (int i = 0; i < p->blk.n; i++) {
    int rad = p->blk.radix[i];
    const nv__cpx *tw = p->blk.tw[i];
    int64_t m = len / rad;
    switch (rad) {
      case 2: stage2_l(x, y, tw, m, s); break;
      case 3: stage3_l(x, y, tw, m, s); break;
      case 4: stage4_l(x, y, tw, m, s); break;
      case 5: stage5_l(x, y, tw, m, s); break;
      case 8: stage8_l(x, y, tw, m, s); break;
      default: stage_generic_l(x, y, tw, m, s, rad); break;
    }
    nv__cblk *t = x;
    x = y;
    y = t;
    len = m;
    s *= rad;
  }
  return x;
}

/* ---- Four-step rows ---- */

/* Blocks k < len, lanes b < nl, from x[k * es + b] (adjacent lanes), imaginary parts times ci;
 * lanes from nl on zero. */
NV_KERNEL_CLONES
static void load_adjacent(nv__cblk *restrict blk, const nv__cpx *restrict x, int64_t len,
                          int64_t es, int nl, float ci) {
  for (int64_t k = 0; k < len; k++) {
    const nv__cpx *r = x + k * es;
    /* The next column block's two cache lines of this row (read while this one transforms: a
     * long row's columns come from memory at a stride the hardware prefetchers do not follow).
     * A prefetch past the row's end reads nothing and cannot fault. */
    __builtin_prefetch(r + L);
    __builtin_prefetch(r + L + 8);
    if (nl == L) {
      LANES {
        blk[k].re[b] = r[b].re;
        blk[k].im[b] = ci * r[b].im;
      }
    } else {
      for (int b = 0; b < L; b++) {
        blk[k].re[b] = b < nl ? r[b].re : 0.0f;
        blk[k].im[b] = b < nl ? ci * r[b].im : 0.0f;
      }
    }
  }
}

/* The columns' results stored back: x[k * n2 + b] = blk[k] lane b times exp(-2πi j2 k / n)
 * (the four-step twiddle, from twr/twi at [k * n2 + b]). */
NV_KERNEL_CLONES
static void store_twiddled(nv__cpx *restrict x, const nv__cblk *restrict blk,
                           const float *twr, const float *twi, int64_t len, int64_t n2, int nl) {
  for (int64_t k = 0; k < len; k++) {
    nv__cpx *r = x + k * n2;
    const float *wr = twr + k * n2, *wi = twi + k * n2;
    if (nl == L) {
      LANES {
        float vr = blk[k].re[b], vi = blk[k].im[b];
        r[b].re = vr * wr[b] - vi * wi[b];
        r[b].im = vr * wi[b] + vi * wr[b];
      }
    } else {
      for (int b = 0; b < nl; b++) {
        float vr = blk[k].re[b], vi = blk[k].im[b];
        r[b].re = vr * wr[b] - vi * wi[b];
        r[b].im = vr * wi[b] + vi * wr[b];
      }
    }
  }
}

/* Blocks k < len from nl rows of length len at x + b * rs (a transpose, by tiles of
 * FFT_TILE elements of each row so the blocks written stay in the L1 cache); lanes from nl on
 * zero. */
NV_KERNEL_CLONES
static void load_rows(nv__cblk *restrict blk, const nv__cpx *restrict x, int64_t len, int64_t rs,
                      int nl) {
  for (int64_t k0 = 0; k0 < len; k0 += FFT_TILE) {
    int64_t kt = len - k0 < FFT_TILE ? len - k0 : FFT_TILE;
    nv__cblk *o = blk + k0;
    if (kt == FFT_TILE && nl == L) {
      const nv__cpx *t[L];
      for (int b = 0; b < L; b++) t[b] = x + b * rs + k0;
      nv__fft_tile_in(o, t, 1.0f);
      continue;
    }
    for (int b = 0; b < L; b++) {
      const nv__cpx *r = x + b * rs + k0;
      if (b < nl) {
        for (int64_t k = 0; k < kt; k++) {
          o[k].re[b] = r[k].re;
          o[k].im[b] = r[k].im;
        }
      } else {
        for (int64_t k = 0; k < kt; k++) o[k].re[b] = o[k].im[b] = 0.0f;
      }
    }
  }
}

/* y[k * es + b] = blk[k] lane b times (sr, si) for k < len, b < nl. */
NV_KERNEL_CLONES
static void store_adjacent(nv__cpx *restrict y, const nv__cblk *restrict blk, int64_t len,
                           int64_t es, int nl, float sr, float si) {
  for (int64_t k = 0; k < len; k++) {
    nv__cpx *r = y + k * es;
    if (nl == L) {
      LANES {
        r[b].re = sr * blk[k].re[b];
        r[b].im = si * blk[k].im[b];
      }
    } else {
      for (int b = 0; b < nl; b++) r[b] = (nv__cpx){sr * blk[k].re[b], si * blk[k].im[b]};
    }
  }
}

/* The four-step transform of x (which may be a; imaginary parts times ci on the way in): the
 * columns' results go to a, the rows' to out (times (sr, si); out may be the start of work). */
static nv__cpx *four_step(const nv__fft_plan *p, const nv__cpx *x, float ci, nv__cpx *a,
                          nv__cpx *out, float sr, float si, nv__cpx *work) {
  int64_t n1 = p->n1, n2 = p->n2;
  nv__cblk *blk = (nv__cblk *)(work + p->n), *bw = blk + (n1 > n2 ? n1 : n2);
  for (int64_t j2 = 0; j2 < n2; j2 += L) {
    int nl = n2 - j2 < L ? (int)(n2 - j2) : L;
    load_adjacent(blk, x + j2, n1, n2, nl, ci);
    nv__cblk *r = nv__fft_forward_lanes(p->p1, blk, bw);
    store_twiddled(a + j2, r, p->twr + j2, p->twi + j2, n1, n2, nl);
  }
  for (int64_t k1 = 0; k1 < n1; k1 += L) {
    int nl = n1 - k1 < L ? (int)(n1 - k1) : L;
    load_rows(blk, a + k1 * n2, n2, n2, nl);
    nv__cblk *r = nv__fft_forward_lanes(p->p2, blk, bw);
    store_adjacent(out + k1, r, n2, n1, nl, sr, si);
  }
  return out;
}

nv__cpx *nv__fft_forward(const nv__fft_plan *p, nv__cpx *a, nv__cpx *work) {
  if (p->inner) return bluestein(p, a, work);
  if (p->p1) return four_step(p, a, 1.0f, a, work, 1.0f, 1.0f, work);
  nv__cpx *x = a, *y = work;
  int64_t len = p->n, s = 1;
  for (int i = 0; i < p->row.n; i++) {
    int rad = p->row.radix[i];
    const nv__cpx *tw = p->row.tw[i];
    int64_t m = len / rad;
    switch (rad) {
      case 2: stage2(x, y, tw, m, s); break;
      case 3: stage3(x, y, tw, m, s); break;
      case 4: stage4(x, y, tw, m, s); break;
      case 5: stage5(x, y, tw, m, s); break;
      default: stage_generic(x, y, tw, m, s, rad); break;
    }
    nv__cpx *t = x;
    x = y;
    y = t;
    len = m;
    s *= rad;
  }
  return x;
}

nv__cpx *nv__fft_forward_from(const nv__fft_plan *p, const nv__cpx *x, nv__cpx *a,
                              nv__cpx *work) {
  if (p->p1) return four_step(p, x, 1.0f, a, work, 1.0f, 1.0f, work);
  memcpy(a, x, (size_t)p->n * sizeof(nv__cpx));
  return nv__fft_forward(p, a, work);
}

bool nv__fft_forward_to(const nv__fft_plan *p, const nv__cpx *x, float ci, nv__cpx *dst, float sr,
                        float si, nv__cpx *a, nv__cpx *work) {
  if (!p->p1) return false;
  four_step(p, x, ci, a, dst, sr, si, work);
  return true;
}
