/* The CPU FFT engine (see fft_plan.h).
 *
 * Stockham autosort, decimation in frequency: a stage of radix p over sub-transforms of length
 * `len` at stride s (len * s = n) reads a_r = x[t + s (q + r m)] for r < p (m = len / p),
 * forms their p-point DFT b_u, multiplies b_u by exp(-2πi u q / len) and writes
 * y[t + s (p q + u)]; the next stage has len = m and stride s p. After the last stage the
 * result is in natural order, in x or y by the parity of the stage count. The inner loop runs
 * over t (contiguous in memory) so it vectorizes once s is large.
 *
 * Bluestein: with w_j = exp(-πi j² / n), X_k = w_k Σ_j (x_j w_j) conj(w_{k-j}), a circular
 * convolution of length M >= 2n - 1 (M 5-smooth) computed with M-point transforms; the
 * filter's transform (divided by M) is precomputed. j² is reduced modulo 2n in integers so the
 * chirp's phase keeps its precision for large n. */
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

struct nv__fft_plan {
  int64_t n;
  int nstages;
  int radix[FFT_MAX_STAGES];
  nv__cpx *tw[FFT_MAX_STAGES]; /* stage twiddles: [q * (p - 1) + u - 1] */
  nv__cpx *half;               /* exp(-2πi k / 2n), k = 0 .. n (real transforms of 2n) */
  /* Bluestein (inner != NULL): the M-point plan, the chirp w_j (j < n) and the filter. */
  nv__fft_plan *inner;
  int64_t m;
  nv__cpx *chirp, *filt;
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
  for (int i = 0; i < p->nstages; i++) nv__free(p->tw[i]);
  nv__free(p->half);
  nv__free(p->chirp);
  nv__free(p->filt);
  nv__fft_plan_free(p->inner);
  nv__free(p);
}

static nv__fft_plan *plan_new(int64_t n);

static bool plan_bluestein(nv__fft_plan *p) {
  /* The convolution length: a power of two (the cheapest radix-4 stages) unless a 2,3,5-smooth
   * length is more than 20% shorter. */
  int64_t n = p->n, m = nv__fft_smooth(2 * n - 1), p2 = 1;
  while (p2 < 2 * n - 1) p2 *= 2;
  if (p2 * 5 <= m * 6) m = p2;
  p->m = m;
  p->inner = plan_new(m);
  p->chirp = nv__malloc((size_t)n * sizeof(nv__cpx));
  p->filt = nv__malloc((size_t)m * sizeof(nv__cpx));
  nv__cpx *work = nv__malloc((size_t)nv__fft_plan_work(p->inner) * sizeof(nv__cpx));
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

static nv__fft_plan *plan_new(int64_t n) {
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
    /* Radices: 4s first, then 2, 3, 5 and the other primes. */
    int64_t r = n;
    while (r % 4 == 0) p->radix[p->nstages++] = 4, r /= 4;
    for (int f = 2; r > 1; f++)
      while (r % f == 0) p->radix[p->nstages++] = f, r /= f;
    int64_t len = n;
    for (int i = 0; ok && i < p->nstages; i++) {
      int rad = p->radix[i];
      int64_t m = len / rad;
      p->tw[i] = nv__malloc((size_t)(m * (rad - 1) > 0 ? m * (rad - 1) : 1) * sizeof(nv__cpx));
      if (!p->tw[i]) {
        ok = false;
        break;
      }
      for (int64_t q = 0; q < m; q++)
        for (int u = 1; u < rad; u++) p->tw[i][q * (rad - 1) + u - 1] = root(u * q, len);
      len = m;
    }
  }
  if (!ok) {
    nv__fft_plan_free(p);
    return NULL;
  }
  return p;
}

int64_t nv__fft_plan_work(const nv__fft_plan *p) {
  return p->inner ? 2 * p->m + nv__fft_plan_work(p->inner) : p->n;
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
  nv__fft_plan *p = plan_new(n);
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

nv__cpx *nv__fft_forward(const nv__fft_plan *p, nv__cpx *a, nv__cpx *work) {
  if (p->inner) return bluestein(p, a, work);
  nv__cpx *x = a, *y = work;
  int64_t len = p->n, s = 1;
  for (int i = 0; i < p->nstages; i++) {
    int rad = p->radix[i];
    int64_t m = len / rad;
    switch (rad) {
      case 2: stage2(x, y, p->tw[i], m, s); break;
      case 3: stage3(x, y, p->tw[i], m, s); break;
      case 4: stage4(x, y, p->tw[i], m, s); break;
      case 5: stage5(x, y, p->tw[i], m, s); break;
      default: stage_generic(x, y, p->tw[i], m, s, rad); break;
    }
    nv__cpx *t = x;
    x = y;
    y = t;
    len = m;
    s *= rad;
  }
  return x;
}
