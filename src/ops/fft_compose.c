/* hadamard_transform and convolve as compositions of existing ops (no primitives).
 *
 * hadamard_transform: Sylvester's H_n = H_n1 ⊗ H_n2 (n = n1 n2, both powers of two), so for a
 * row x read as an n1 x n2 matrix X (row-major), H_n x is H_n1 X H_n2: two matmuls with small
 * constant ±1 matrices (H[i][j] = (-1)^popcount(i & j)), O(n (n1 + n2)) per row; the scale is
 * folded into H_n2. Lengths m * 2^k (m = 12, 20, 28) add one matmul with MLX's m x m matrix.
 * Being matmuls, the CPU and the GPU compute it alike (there is no Hadamard kernel).
 *
 * convolve: the signal s (the longer operand, length N) zero-padded by M - 1 on each side and
 * read as overlapping windows of M (an as_strided view, no copy), times the reversed kernel
 * (a matrix-vector product), for the output rows the mode keeps. Past WINDOW_LIMIT window
 * elements it is computed through real FFTs of a 2,3,5-smooth length >= N + M - 1 instead. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "nuvec.h"
#include "ops/fft_params.h"
#include "ops/ops_internal.h"

#define WINDOW_LIMIT ((int64_t)1 << 22)

/* The n x n Sylvester Hadamard matrix times `scale`, of dtype dt. */
static nv_array *hadamard_matrix(int n, double scale, nv_dtype dt) {
  float *h = nv__malloc((size_t)n * (size_t)n * sizeof *h);
  if (!h) return nv__op_error(NV_ERR_OUT_OF_MEMORY, "hadamard_transform", "out of memory");
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      h[(size_t)i * n + j] = (float)(__builtin_popcount((unsigned)(i & j)) % 2 ? -scale : scale);
  int shape[2] = {n, n};
  nv_array *m = nv_array_from_data(h, shape, 2, NV_DTYPE_FLOAT32);
  nv__free(h);
  nv_array *r = nv_astype(m, dt);
  nv_release(m);
  return r;
}

/* The Hadamard matrices of orders 12, 20 and 28 that MLX pairs with a power of two (one row a
 * string, '+' for 1 and '-' for -1): those of N. J. A. Sloane's library
 * (neilsloane.com/hadamard), so that our transforms of these lengths equal MLX's. */
static const char *const H12[12] = {
    "+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-", "+++++-++----", "+-+---+--+-+",
    "++--+++-++--", "+--++---+--+", "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---"};
static const char *const H20[20] = {
    "+----+----++--++-++-", "-+----+---+++---+-++", "--+----+---+++-+-+-+",
    "---+----+---+++++-+-", "----+----++--++-++-+", "-+++++-----+--+++--+",
    "+-+++-+---+-+--+++--", "++-++--+---+-+--+++-", "+++-+---+---+-+--+++",
    "++++-----++--+-+--++", "--++-+-++-+-----++++", "---++-+-++-+---+-+++",
    "+---++-+-+--+--++-++", "++---++-+----+-+++-+", "-++---++-+----+++++-",
    "-+--+--++-+----+----", "+-+-----++-+----+---", "-+-+-+---+--+----+--",
    "--+-+++------+----+-", "+--+--++------+----+"};
static const char *const H28[28] = {
    "+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-",
    "--+-----+++---+-+-+----+--++", "---+-----+++---+-+-+-+--+--+",
    "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-",
    "---++++-+-----+-++--+-+-+--+", "+---+++--+----++-++--+-+-+--",
    "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+",
    "-+-++-++--++--+--------++++-", "+-+-++--+--++--+--------++++",
    "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---",
    "+-++-+---++--+------+-++++--", "-++--++-+-++-+++----++------",
    "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--",
    "+--++-+-++-+-+----+++-----+-", "++--++-+-++-+-+----++------+"};

/* The m x m matrix of H12, H20 or H28, of dtype dt. */
static nv_array *hadamard_m_matrix(int m, nv_dtype dt) {
  const char *const *rows = m == 12 ? H12 : m == 20 ? H20 : H28;
  float h[28 * 28];
  for (int i = 0; i < m; i++)
    for (int j = 0; j < m; j++)
      h[i * m + j] = rows[i][j] == '+' ? 1.0f : -1.0f;
  int shape[2] = {m, m};
  nv_array *a = nv_array_from_data(h, shape, 2, NV_DTYPE_FLOAT32);
  nv_array *r = nv_astype(a, dt);
  nv_release(a);
  return r;
}

/* The Sylvester transform of x's last axis (length p, a power of two) times sc, x of shape
 * (lead..., p) with nd leading axes. Scopes are suspended by the caller. */
static nv_array *sylvester(const nv_array *x, const int *lead, int nd, int p, double sc,
                           nv_dtype dt) {
  int k = __builtin_ctz((unsigned)p), n1 = 1 << (k / 2), n2 = p / n1;
  int shape[NV__MAX_DIMS + 2];
  memcpy(shape, lead, (size_t)nd * sizeof(int));
  shape[nd] = n1;
  shape[nd + 1] = n2;
  nv_array *x3 = nv_reshape(x, shape, nd + 2);
  nv_array *h2 = hadamard_matrix(n2, sc, dt);
  nv_array *z = nv_matmul(x3, h2);
  if (n1 > 1) {
    nv_array *h1 = hadamard_matrix(n1, 1.0, dt);
    nv_array *y = z;
    z = nv_matmul(h1, y);
    nv_release(h1);
    nv_release(y);
  }
  shape[nd] = p;
  nv_array *r = nv_reshape(z, shape, nd + 1);
  nv_release(z);
  nv_release(h2);
  nv_release(x3);
  return r;
}

nv_array *nv_hadamard_transform(const nv_array *a, const double *scale) {
  nv_array *f = nv__op_check("hadamard_transform", &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int n = o->ndim ? o->shape[o->ndim - 1] : 1;
  /* n = m * p with p a power of two and m one of 1, 12, 20, 28 (MLX's lengths). */
  int m = 1;
  if (n >= 1 && (n & (n - 1)))
    for (int c = 12; c <= 28 && m == 1; c += 8)
      if (n % c == 0 && !((n / c) & (n / c - 1))) m = c;
  if (n < 1 || (m == 1 && (n & (n - 1)))) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "hadamard_transform",
                        "the last axis must have a length m * 2^k with m in (1, 12, 20, 28), "
                        "got shape %s",
                        nv__shape_str(o->shape, o->ndim, s, sizeof s));
  }
  nv_dtype dt = nv_issubdtype(o->dtype, NV_CATEGORY_INEXACT) ? o->dtype : NV_DTYPE_FLOAT32;
  double sc = scale ? *scale : 1.0 / sqrt((double)n);
  int p = n / m, nd = o->ndim ? o->ndim - 1 : 0;
  int lead[NV__MAX_DIMS + 1];
  memcpy(lead, o->shape, (size_t)nd * sizeof(int));
  nv__scope_suspend();
  nv_array *x = nv__cast_unscoped(a, dt);
  nv_array *r;
  if (m == 1) {
    nv_array *y = sylvester(x, lead, nd, n, sc, dt);
    r = nv_reshape(y, o->shape, o->ndim);
    nv_release(y);
  } else {
    /* As MLX: the row read as an m x p matrix X (row-major) gives H_m X H_p, the power-of-two
     * transform of each row of X first (scale folded in), then H_m mixing the rows. */
    lead[nd] = m;
    nv_array *y = sylvester(x, lead, nd + 1, p, sc, dt);
    nv_array *hm = hadamard_m_matrix(m, dt);
    nv_array *z = nv_matmul(hm, y);
    r = nv_reshape(z, o->shape, o->ndim);
    nv_release(z);
    nv_release(hm);
    nv_release(y);
  }
  nv_release(x);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}

/* The full convolution's rows [start, start + len) through real FFTs. */
static nv_array *conv_fft(const nv_array *s, const nv_array *k, int N, int M, int start,
                          int len) {
  int64_t Lw = nv__fft_smooth((int64_t)N + M - 1);
  if (Lw > INT_MAX) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "convolve", "the inputs are too long");
  int L = (int)Lw;
  nv_array *fs = nv_fft_rfft(s, &L, -1, NV_FFT_NORM_BACKWARD);
  nv_array *fk = nv_fft_rfft(k, &L, -1, NV_FFT_NORM_BACKWARD);
  nv_array *pr = nv_multiply(fs, fk);
  nv_array *full = nv_fft_irfft(pr, &L, -1, NV_FFT_NORM_BACKWARD);
  int lo = start, hi = start + len;
  nv_array *r = nv_slice(full, &lo, &hi, NULL, 1);
  nv_release(full), nv_release(pr), nv_release(fk), nv_release(fs);
  return r;
}

/* Rows [start, start + len) of the full convolution as windows times the reversed kernel. */
static nv_array *conv_windows(const nv_array *s, const nv_array *k, int M, int start, int len) {
  int lo = M - 1, hi = M - 1;
  nv_array *padded = nv_pad(s, &lo, &hi, 1, NV_PAD_CONSTANT, NULL);
  int shape[2] = {len, M};
  int64_t strides[2] = {1, 1};
  nv_array *win = nv_as_strided(padded, shape, 2, strides, start);
  int ax = 0;
  nv_array *rk = nv_flip(k, &ax, 1);
  nv_array *r = nv_matmul(win, rk);
  nv_release(rk), nv_release(win), nv_release(padded);
  return r;
}

nv_array *nv_convolve(const nv_array *a, const nv_array *v, nv_convolve_mode mode) {
  const nv_array *xs[2] = {a, v};
  nv_array *f = nv__op_check("convolve", xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ov = nv__out(v);
  char sa[NV__SHAPE_BUF], sv[NV__SHAPE_BUF];
  nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa);
  nv__shape_str(ov->shape, ov->ndim, sv, sizeof sv);
  if (oa->ndim != 1 || ov->ndim != 1)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "convolve", "inputs must be 1-D, got %s and %s",
                        sa, sv);
  if (oa->size == 0 || ov->size == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "convolve", "inputs cannot be empty, got %s and %s",
                        sa, sv);
  if (mode != NV_CONVOLVE_FULL && mode != NV_CONVOLVE_SAME && mode != NV_CONVOLVE_VALID)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "convolve", "invalid mode %d", (int)mode);
  nv_dtype dt = nv__result_type(a, v);
  if (dt == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "convolve", "complex64 is not supported");
  if (!nv_issubdtype(dt, NV_CATEGORY_INEXACT)) dt = NV_DTYPE_FLOAT32;
  bool swap = ov->size > oa->size;
  const nv_array *s = swap ? v : a, *k = swap ? a : v;
  int N = (int)nv__out(s)->size, M = (int)nv__out(k)->size;
  int start = 0, len = N + M - 1;
  if (mode == NV_CONVOLVE_SAME) {
    start = (M - 1) / 2;
    len = N;
  } else if (mode == NV_CONVOLVE_VALID) {
    start = M - 1;
    len = N - M + 1;
  }
  nv__scope_suspend();
  nv_array *cs = nv__cast_unscoped(s, dt), *ck = nv__cast_unscoped(k, dt);
  nv_array *r;
  if ((int64_t)len * M <= WINDOW_LIMIT) {
    r = conv_windows(cs, ck, M, start, len);
  } else {
    /* The FFT path computes in float32 (as the transforms do) and casts back. */
    nv_array *fs = nv_astype(cs, NV_DTYPE_FLOAT32), *fk = nv_astype(ck, NV_DTYPE_FLOAT32);
    nv_array *y = conv_fft(fs, fk, N, M, start, len);
    r = nv_astype(y, dt);
    nv_release(y), nv_release(fs), nv_release(fk);
  }
  nv_release(cs), nv_release(ck);
  nv__scope_resume();
  nv__scope_register(r);
  return r;
}
