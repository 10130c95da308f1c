/* The row driver (reduce_rows.h) and the row kernels computed in floating point: var, std,
 * logsumexp and softmax. */
#include <math.h>
#include <stdlib.h>

#include "cpu/reduce_rows.h"
#include "ops/reduce_params.h"

/* Folds adjacent dimensions where both stride lists allow; drops size-1 dimensions. */
static int fold2(int64_t *shape, int64_t *a, int64_t *b, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 1) continue;
    if (m > 0 && a[m - 1] == shape[i] * a[i] && b[m - 1] == shape[i] * b[i]) {
      shape[m - 1] *= shape[i];
      a[m - 1] = a[i];
      b[m - 1] = b[i];
      continue;
    }
    shape[m] = shape[i];
    a[m] = a[i];
    b[m++] = b[i];
  }
  return m;
}

void nv__rows_init(nv__rows *r, const nv__operand *in, const int *axes, int naxes,
                   nv__output *out, bool keep_rows) {
  const nv__output *x = in->meta;
  int64_t rowmajor[NV__MAX_DIMS], s = 1;
  for (int i = x->ndim - 1; i >= 0; i--) {
    rowmajor[i] = s;
    s *= x->shape[i];
  }
  r->nk = r->nr = 0;
  r->len = 1;
  r->nrows = 1;
  for (int i = 0, j = 0; i < x->ndim; i++) {
    if (j < naxes && axes[j] == i) {
      j++;
      r->rshape[r->nr] = x->shape[i];
      r->rin[r->nr] = x->strides[i];
      r->rout[r->nr++] = rowmajor[i];
      r->len *= x->shape[i];
    } else {
      r->kshape[r->nk] = x->shape[i];
      r->kin[r->nk] = x->strides[i];
      r->kout[r->nk++] = rowmajor[i];
      r->nrows *= x->shape[i];
    }
  }
  if (!keep_rows) { /* one value per row: the output is row-major over the kept axes */
    s = 1;
    for (int i = r->nk - 1; i >= 0; i--) {
      r->kout[i] = s;
      s *= r->kshape[i];
    }
  }
  r->nk = fold2(r->kshape, r->kin, r->kout, r->nk);
  r->nr = fold2(r->rshape, r->rin, r->rout, r->nr);
  r->in = nv__operand_ptr(in);
  r->idt = x->dtype;
  r->isz = (int64_t)nv_dtype_size(x->dtype);
  r->out = out ? nv__output_ptr(out) : NULL;
  r->odt = out ? out->dtype : x->dtype;
  r->osz = (int64_t)nv_dtype_size(r->odt);
  atomic_init(&r->failed, 0);
}

int nv__rows_begin(nv__node *node, const nv__operand *in, bool keep_rows, nv__rows *r) {
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return -1;
  if (out->size == 0) return 0;
  const nv__rows_params *p = node->params;
  nv__rows_init(r, &in[0], p->axes, p->naxes, out, keep_rows);
  return 1;
}

static int64_t offset_of(const int64_t *shape, const int64_t *st, int n, int64_t i) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    off += (i % shape[d]) * st[d];
    i /= shape[d];
  }
  return off;
}

int64_t nv__rows_in_offset(const nv__rows *r, int64_t i) {
  return offset_of(r->kshape, r->kin, r->nk, i);
}
int64_t nv__rows_out_offset(const nv__rows *r, int64_t i) {
  return offset_of(r->kshape, r->kout, r->nk, i);
}
bool nv__rows_in_contiguous(const nv__rows *r) {
  return r->nr == 0 || (r->nr == 1 && r->rin[0] == 1);
}
bool nv__rows_out_contiguous(const nv__rows *r) {
  return r->nr == 0 || (r->nr == 1 && r->rout[0] == 1);
}

/* Walks the row's runs along its innermost dimension: fn(run offset, run index). */
#define FOR_RUNS(r, ST, BODY)                                                  \
  do {                                                                         \
    int nr_ = (r)->nr;                                                         \
    int64_t inner_ = nr_ ? (r)->rshape[nr_ - 1] : 1;                           \
    int64_t ist_ = nr_ ? (ST)[nr_ - 1] : 1;                                    \
    int64_t runs_ = inner_ ? (r)->len / inner_ : 0;                            \
    int64_t idx_[NV__MAX_DIMS] = {0};                                          \
    for (int64_t run_ = 0; run_ < runs_; run_++) {                             \
      int64_t roff_ = 0;                                                       \
      for (int d_ = 0; d_ < nr_ - 1; d_++) roff_ += idx_[d_] * (ST)[d_];       \
      BODY;                                                                    \
      for (int d_ = nr_ - 2; d_ >= 0; d_--) {                                  \
        if (++idx_[d_] < (r)->rshape[d_]) break;                               \
        idx_[d_] = 0;                                                          \
      }                                                                        \
    }                                                                          \
  } while (0)

void nv__rows_gather(const nv__rows *r, int64_t i, nv_dtype work, void *dst) {
  const char *base = r->in + nv__rows_in_offset(r, i) * r->isz;
  int64_t wsz = (int64_t)nv_dtype_size(work);
  FOR_RUNS(r, r->rin,
           nv__convert_run(r->idt, base + roff_ * r->isz, ist_, work,
                           (char *)dst + run_ * inner_ * wsz, 1, inner_));
}

void nv__rows_scatter(const nv__rows *r, int64_t i, nv_dtype work, const void *src) {
  char *base = r->out + nv__rows_out_offset(r, i) * r->osz;
  int64_t wsz = (int64_t)nv_dtype_size(work);
  FOR_RUNS(r, r->rout,
           nv__convert_run(work, (const char *)src + run_ * inner_ * wsz, 1, r->odt,
                           base + roff_ * r->osz, ist_, inner_));
}

void nv__rows_parallel(nv__rows *r, nv__range_fn fn, void *ctx) {
  int64_t per = r->len > 0 ? NV__PAR_GRAIN / r->len : NV__PAR_GRAIN;
  if (per < 1) per = 1;
  nv__parallel_for(r->nrows, per, fn, ctx);
}

/* ---- var, std, logsumexp: rows gathered into float64 ---- */

typedef struct frow_job {
  nv__rows *r;
  int prim;
  int ddof;
} frow_job;

/* Pairwise sum of n doubles (error O(log n · eps)). */
static double pairwise(const double *x, int64_t n) {
  if (n <= 16) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
  }
  int64_t h = n / 2;
  return pairwise(x, h) + pairwise(x + h, n - h);
}

static double row_var(double *x, int64_t n, int ddof) {
  double mean = pairwise(x, n) / (double)n;
  for (int64_t i = 0; i < n; i++) x[i] = (x[i] - mean) * (x[i] - mean);
  double d = (double)n - ddof;
  return pairwise(x, n) / (d > 0 ? d : 0.0);
}

static double row_logsumexp(double *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(x[i])) return x[i];
    if (x[i] > m) m = x[i];
  }
  if (isinf(m)) return m; /* +inf dominates; a row of only -inf sums to exp(-inf) = 0 */
  for (int64_t i = 0; i < n; i++) x[i] = exp(x[i] - m);
  return m + log(pairwise(x, n));
}

static void frow_range(void *ctx, int64_t b, int64_t e) {
  frow_job *j = ctx;
  nv__rows *r = j->r;
  double *buf = malloc((size_t)(r->len ? r->len : 1) * sizeof(double));
  if (!buf) {
    atomic_store(&r->failed, 1);
    return;
  }
  /* float32 logsumexp: float32 rows (in place when contiguous) and the vectorized exponential;
   * buf holds the gathered row in its first half and the exponentials in its second. */
  bool f32 = j->prim == NV__PRIM_LOGSUMEXP && r->idt == NV_DTYPE_FLOAT32;
  for (int64_t i = b; i < e; i++) {
    double v;
    if (f32) {
      float *row = (float *)buf, *scratch = (float *)buf + r->len;
      const float *x = row, *next = NULL;
      if (nv__rows_in_contiguous(r)) {
        x = (const float *)r->in + nv__rows_in_offset(r, i);
        if (i + 1 < e) next = (const float *)r->in + nv__rows_in_offset(r, i + 1);
      } else {
        nv__rows_gather(r, i, NV_DTYPE_FLOAT32, row);
      }
      v = r->len ? nv__row_logsumexp_f32(x, r->len, scratch, next) : -INFINITY;
      nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&v, 1, r->odt, r->out + i * r->osz, 1, 1);
      continue;
    }
    nv__rows_gather(r, i, NV_DTYPE_FLOAT64, buf);
    if (j->prim == NV__PRIM_LOGSUMEXP) v = row_logsumexp(buf, r->len);
    else {
      v = r->len ? row_var(buf, r->len, j->ddof) : NAN;
      if (j->prim == NV__PRIM_STD) v = sqrt(v);
    }
    nv__convert_run(NV_DTYPE_FLOAT64, (const char *)&v, 1, r->odt, r->out + i * r->osz, 1, 1);
  }
  free(buf);
}

nv_status nv__k_row_reduce(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__rows_params *p = node->params;
  nv__rows r;
  nv__rows_init(&r, &in[0], p->axes, p->naxes, out, false);
  frow_job j = {&r, node->prim, p->ddof};
  nv__rows_parallel(&r, frow_range, &j);
  if (atomic_load(&r.failed))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[node->prim].name);
  return NV_OK;
}
