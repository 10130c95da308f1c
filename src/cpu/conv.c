/* The convolution primitive on the CPU: an implicit GEMM over BLAS. The output's rows (one per
 * batch element and output position, C_out wide) are cut into tiles; for each tile a slice of
 * the kernel's taps is gathered into a small column buffer (rows × taps × C_in / groups, per
 * group) and multiplied by the matching slice of the weight with sgemm/dgemm, accumulating
 * over the tap slices. Tiles run in parallel on the pool (OpenBLAS itself is single-threaded,
 * see linalg.c), and no buffer grows with the input: a tile's column buffer is bounded by
 * NV__CONV_COL_BYTES whatever the sizes. Grouped convolutions with one input channel per
 * group (depthwise) skip BLAS, whose products would be one column wide: each output row
 * accumulates tap by tap, a vectorized multiply-add across the channels. float16/bfloat16 are
 * gathered as float32 and the output rounded once; float64 computes in float64. */
#include <cblas.h>
#include <stdatomic.h>

#include "cpu/kernels.h"
#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"
#include "ops/conv_params.h"

/* Target size of one tile's column buffer. */
#define NV__CONV_COL_BYTES (1 << 20)
/* Tiles have at least this many rows when there are that many (GEMM efficiency), unless more
 * tiles are needed to keep the pool busy. */
#define NV__CONV_MIN_ROWS 64

typedef struct conv_job {
  const nv__conv_params *p;
  int nsp;
  int in_sp[NV__CONV_MAX_SPATIAL], out_sp[NV__CONV_MAX_SPATIAL], k_sp[NV__CONV_MAX_SPATIAL];
  int Cin, Cout, G, cin_g, cout_g;
  int64_t kvol, rows; /* taps per kernel, output rows */
  int64_t tile, ntaps; /* rows per tile, taps per slice */
  const char *x;
  nv_dtype xdt;
  int64_t xst[NV__MAX_DIMS]; /* the input's element strides */
  const char *w;             /* the weight, contiguous [C_out, taps, C_in / groups] */
  nv_dtype wt;               /* the work dtype: float32 or float64 */
  char *out;
  nv_dtype odt;
  atomic_int failed;
} conv_job;

/* The input offset (elements) of row `r`'s tap `t`, or -1 where the tap reads padding or a
 * dilation hole. */
static int64_t tap_offset(const conv_job *j, const int *o, int64_t n, int64_t t) {
  const nv__conv_params *p = j->p;
  int64_t off = n * j->xst[0];
  for (int a = j->nsp - 1; a >= 0; a--) {
    int64_t k = t % j->k_sp[a];
    t /= j->k_sp[a];
    if (p->flip) k = j->k_sp[a] - 1 - k;
    int64_t pos = (int64_t)o[a] * p->stride[a] + k * p->kdil[a] - p->lo[a];
    if (pos < 0 || pos >= nv__conv_dilated(j->in_sp[a], p->idil[a]) || pos % p->idil[a]) return -1;
    off += pos / p->idil[a] * j->xst[a + 1];
  }
  return off;
}

/* Gathers taps [t0, t0 + nt) of rows [r0, r0 + R) into col: [R, G, nt, C_in / groups]. */
static void gather(const conv_job *j, int64_t r0, int64_t R, int64_t t0, int64_t nt, char *col) {
  size_t xsz = nv_dtype_size(j->xdt), wsz = nv_dtype_size(j->wt);
  int64_t cst = j->xst[j->nsp + 1], seg = nt * j->cin_g;
  for (int64_t r = 0; r < R; r++) {
    int o[NV__CONV_MAX_SPATIAL];
    int64_t q = r0 + r;
    for (int a = j->nsp - 1; a >= 0; a--) {
      o[a] = (int)(q % j->out_sp[a]);
      q /= j->out_sp[a];
    }
    char *row = col + r * j->G * seg * (int64_t)wsz;
    for (int64_t t = 0; t < nt; t++) {
      int64_t off = tap_offset(j, o, q, t0 + t);
      for (int g = 0; g < j->G; g++) {
        char *dst = row + (g * seg + t * j->cin_g) * (int64_t)wsz;
        if (off < 0) {
          memset(dst, 0, (size_t)j->cin_g * wsz);
          continue;
        }
        const char *src = j->x + (off + (int64_t)g * j->cin_g * cst) * (int64_t)xsz;
        if (j->xdt == j->wt && cst == 1)
          memcpy(dst, src, (size_t)j->cin_g * wsz);
        else
          nv__convert_run(j->xdt, src, cst, j->wt, dst, 1, j->cin_g);
      }
    }
  }
}

/* C[R, cout_g] (+)= A[R, K] · B[cout_g, K]ᵀ in the work dtype. */
static void gemm_nt(const conv_job *j, int R, int K, const char *A, int lda, const char *B,
                    int ldb, char *C, int ldc, bool accumulate) {
  if (j->wt == NV_DTYPE_FLOAT64)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, j->cout_g, K, 1.0,
                (const double *)A, lda, (const double *)B, ldb, accumulate ? 1.0 : 0.0,
                (double *)C, ldc);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, j->cout_g, K, 1.0f,
                (const float *)A, lda, (const float *)B, ldb, accumulate ? 1.0f : 0.0f,
                (float *)C, ldc);
}

/* acc[co] += x[co / m] * w[co] over co < n (m output channels per input channel). */
NV_KERNEL_CLONES static void madd_f32(float *acc, const float *x, const float *w, int64_t n,
                                      int64_t m) {
  if (m == 1) {
    for (int64_t i = 0; i < n; i++) acc[i] += x[i] * w[i];
    return;
  }
  for (int64_t i = 0; i < n; i++) acc[i] += x[i / m] * w[i];
}

NV_KERNEL_CLONES static void madd_f64(double *acc, const double *x, const double *w, int64_t n,
                                      int64_t m) {
  if (m == 1) {
    for (int64_t i = 0; i < n; i++) acc[i] += x[i] * w[i];
    return;
  }
  for (int64_t i = 0; i < n; i++) acc[i] += x[i / m] * w[i];
}

/* Depthwise tiles (C_in / groups = 1): j->w is [taps, C_out] here. */
static void depthwise_tiles(void *ctx, int64_t lo, int64_t hi) {
  conv_job *j = ctx;
  size_t wsz = nv_dtype_size(j->wt), osz = nv_dtype_size(j->odt), xsz = nv_dtype_size(j->xdt);
  int64_t cst = j->xst[j->nsp + 1];
  char *acc = nv__malloc((size_t)(j->Cout + j->Cin) * wsz);
  if (!acc) {
    atomic_store(&j->failed, 1);
    return;
  }
  char *xrow = acc + (size_t)j->Cout * wsz;
  for (int64_t r = lo; r < hi; r++) {
    int o[NV__CONV_MAX_SPATIAL];
    int64_t q = r;
    for (int a = j->nsp - 1; a >= 0; a--) {
      o[a] = (int)(q % j->out_sp[a]);
      q /= j->out_sp[a];
    }
    memset(acc, 0, (size_t)j->Cout * wsz);
    for (int64_t t = 0; t < j->kvol; t++) {
      int64_t off = tap_offset(j, o, q, t);
      if (off < 0) continue;
      const char *xs = j->x + off * (int64_t)xsz;
      if (j->xdt != j->wt || cst != 1) {
        nv__convert_run(j->xdt, xs, cst, j->wt, xrow, 1, j->Cin);
        xs = xrow;
      }
      const char *wt = j->w + t * j->Cout * (int64_t)wsz;
      if (j->wt == NV_DTYPE_FLOAT64)
        madd_f64((double *)acc, (const double *)xs, (const double *)wt, j->Cout, j->cout_g);
      else
        madd_f32((float *)acc, (const float *)xs, (const float *)wt, j->Cout, j->cout_g);
    }
    nv__convert_run(j->wt, acc, 1, j->odt, j->out + r * j->Cout * (int64_t)osz, 1, j->Cout);
  }
  nv__free(acc);
}

/* The weight [C_out, taps] (contiguous, the work dtype) transposed to [taps, C_out]. */
static void *taps_first(const char *w, int64_t cout, int64_t taps, size_t wsz) {
  char *t = nv__malloc((size_t)(cout * taps) * wsz);
  if (!t) return NULL;
  for (int64_t c = 0; c < cout; c++)
    for (int64_t k = 0; k < taps; k++)
      memcpy(t + (k * cout + c) * (int64_t)wsz, w + (c * taps + k) * (int64_t)wsz, wsz);
  return t;
}

static void conv_tiles(void *ctx, int64_t lo, int64_t hi) {
  conv_job *j = ctx;
  size_t wsz = nv_dtype_size(j->wt), osz = nv_dtype_size(j->odt);
  int64_t kc = j->kvol * j->cin_g;
  char *col = nv__malloc((size_t)(j->tile * j->G * j->ntaps * j->cin_g) * wsz);
  char *cbuf = j->odt == j->wt ? NULL : nv__malloc((size_t)(j->tile * j->Cout) * wsz);
  if (!col || (j->odt != j->wt && !cbuf)) {
    atomic_store(&j->failed, 1);
    goto done;
  }
  for (int64_t i = lo; i < hi; i++) {
    int64_t r0 = i * j->tile, R = j->rows - r0 < j->tile ? j->rows - r0 : j->tile;
    char *C = cbuf ? cbuf : j->out + r0 * j->Cout * (int64_t)osz;
    /* Zeroed first: some OpenBLAS kernels read C even with beta = 0 (see linalg.c), and a
     * fresh buffer may hold NaNs. */
    memset(C, 0, (size_t)(R * j->Cout) * wsz);
    for (int64_t t0 = 0; t0 < j->kvol; t0 += j->ntaps) {
      int64_t nt = j->kvol - t0 < j->ntaps ? j->kvol - t0 : j->ntaps;
      gather(j, r0, R, t0, nt, col);
      int64_t seg = nt * j->cin_g;
      for (int g = 0; g < j->G; g++)
        gemm_nt(j, (int)R, (int)seg, col + g * seg * (int64_t)wsz, (int)(j->G * seg),
                j->w + ((int64_t)g * j->cout_g * kc + t0 * j->cin_g) * (int64_t)wsz, (int)kc,
                C + (int64_t)g * j->cout_g * (int64_t)wsz, j->Cout, t0 > 0);
    }
    if (cbuf)
      nv__convert_run(j->wt, cbuf, 1, j->odt, j->out + r0 * j->Cout * (int64_t)osz, 1,
                      R * j->Cout);
  }
done:
  nv__free(col);
  nv__free(cbuf);
}

static nv_status k_conv(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  const nv__conv_params *p = node->params;
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  conv_job j = {.p = p, .nsp = p->nsp, .G = p->groups, .odt = out->dtype};
  j.wt = out->dtype == NV_DTYPE_FLOAT64 ? NV_DTYPE_FLOAT64 : NV_DTYPE_FLOAT32;
  j.Cin = ox->shape[ox->ndim - 1];
  j.Cout = out->shape[out->ndim - 1];
  j.cin_g = j.Cin / j.G;
  j.cout_g = j.Cout / j.G;
  j.kvol = 1;
  j.rows = out->shape[0];
  for (int a = 0; a < j.nsp; a++) {
    j.in_sp[a] = ox->shape[a + 1];
    j.out_sp[a] = out->shape[a + 1];
    j.k_sp[a] = ow->shape[a + 1];
    j.kvol *= j.k_sp[a];
    j.rows *= j.out_sp[a];
  }
  j.out = nv__output_ptr(out);
  if (j.kvol * j.cin_g == 0) {
    /* An empty contraction: every output is 0. */
    memset(j.out, 0, (size_t)out->size * nv_dtype_size(out->dtype));
    return NV_OK;
  }
  nv__linalg_view wv;
  nv__linalg_view_of(&wv, &in[1]);
  void *wbuf = nv__linalg_pack_new(&wv, j.wt, "conv_general");
  if (!wbuf) return NV_ERR_OUT_OF_MEMORY;
  j.w = wbuf;
  j.x = nv__operand_ptr(&in[0]);
  j.xdt = ox->dtype;
  for (int i = 0; i < ox->ndim; i++) j.xst[i] = ox->strides[i];
  double work = (double)j.rows * (double)(j.kvol * j.cin_g) * j.Cout;
  atomic_init(&j.failed, 0);
  if (j.cin_g == 1 && j.G > 1) {
    void *wt = taps_first(wbuf, j.Cout, j.kvol, nv_dtype_size(j.wt));
    nv__free(wbuf);
    if (!wt) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_general: out of memory");
    j.w = wt;
    nv__parallel_for(j.rows, work < (1 << 18) ? j.rows : 1, depthwise_tiles, &j);
    nv__free(wt);
    if (atomic_load(&j.failed))
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_general: out of memory for a row buffer");
    return NV_OK;
  }
  /* Tiles: as many rows as fill the column buffer with every tap (at least
   * NV__CONV_MIN_ROWS), fewer when the pool would otherwise idle; taps are sliced so that a
   * tile's buffer stays near NV__CONV_COL_BYTES. */
  size_t wsz = nv_dtype_size(j.wt);
  int64_t row_bytes = j.kvol * j.Cin * (int64_t)wsz;
  int64_t tile = NV__CONV_COL_BYTES / row_bytes;
  if (tile < NV__CONV_MIN_ROWS) tile = NV__CONV_MIN_ROWS;
  int64_t threads = nv__pool_threads();
  int64_t per_thread = (j.rows + threads - 1) / threads;
  if (tile > per_thread) tile = per_thread > 8 ? per_thread : 8;
  if (tile > j.rows) tile = j.rows;
  j.tile = tile;
  j.ntaps = NV__CONV_COL_BYTES / (tile * j.Cin * (int64_t)wsz);
  if (j.ntaps < 1) j.ntaps = 1;
  if (j.ntaps > j.kvol) j.ntaps = j.kvol;
  int64_t ntiles = (j.rows + tile - 1) / tile;
  nv__parallel_for(ntiles, work < (1 << 18) ? ntiles : 1, conv_tiles, &j);
  nv__free(wbuf);
  if (atomic_load(&j.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_general: out of memory for a tile buffer");
  return NV_OK;
}

void nv__cpu_register_conv(nv__kernel_fn *k) { k[NV__PRIM_CONV_GENERAL] = k_conv; }
