/* Sum reductions. Floats accumulate accurately: runs are summed in blocks with several
 * partial sums (float32 blocks, float64 totals), float64 in float64 blocks with compensated
 * totals; float16/bfloat16 compute in float32; integers wrap as their own type would. */
#include <stdlib.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"

typedef struct acc {
  double d, c; /* sum and compensation (floats); imaginary part for complex in c2 */
  double d2;
  uint64_t u;
} acc;

static void acc_add(acc *a, double v) {
  /* Neumaier's compensated summation of block totals. */
  double t = a->d + v;
  if (fabs(a->d) >= fabs(v)) a->c += (a->d - t) + v;
  else a->c += (v - t) + a->d;
  a->d = t;
}

#define BLK 1024

static double block_f32(const float *p, int64_t n) {
  float s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) s[j] += p[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; i++) r += p[i];
  return r;
}

static double block_f64(const double *p, int64_t n) {
  double s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) s[j] += p[i + j];
  double r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; i++) r += p[i];
  return r;
}

/* Adds n elements of `dt` at p (stride st elements) into a. */
static void sum_run(nv_dtype dt, const char *p, int64_t n, int64_t st, acc *a) {
  switch (dt) {
    case NV_DTYPE_FLOAT32: {
      const float *x = (const float *)p;
      if (st == 1) {
        for (int64_t b = 0; b < n; b += BLK) acc_add(a, block_f32(x + b, n - b < BLK ? n - b : BLK));
      } else {
        for (int64_t b = 0; b < n; b += BLK) {
          float s = 0;
          int64_t e = n - b < BLK ? n - b : BLK;
          for (int64_t i = 0; i < e; i++) s += x[(b + i) * st];
          acc_add(a, s);
        }
      }
      break;
    }
    case NV_DTYPE_FLOAT64: {
      const double *x = (const double *)p;
      if (st == 1) {
        for (int64_t b = 0; b < n; b += BLK) acc_add(a, block_f64(x + b, n - b < BLK ? n - b : BLK));
      } else {
        for (int64_t i = 0; i < n; i++) acc_add(a, x[i * st]);
      }
      break;
    }
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: {
      float tmp[BLK];
      for (int64_t b = 0; b < n; b += BLK) {
        int64_t e = n - b < BLK ? n - b : BLK;
        nv__convert_run(dt, p + b * st * 2, st, NV_DTYPE_FLOAT32, (char *)tmp, 1, e);
        acc_add(a, block_f32(tmp, e));
      }
      break;
    }
    case NV_DTYPE_COMPLEX64: {
      const float *x = (const float *)p;
      for (int64_t i = 0; i < n; i++) {
        a->d += x[2 * i * st];
        a->d2 += x[2 * i * st + 1];
      }
      break;
    }
    default: {
      uint64_t s = 0;
#define IRUN(T) \
  for (int64_t i = 0; i < n; i++) s += (uint64_t)((const T *)p)[i * st];
      switch (dt) {
        case NV_DTYPE_UINT8: IRUN(uint8_t) break;
        case NV_DTYPE_UINT16: IRUN(uint16_t) break;
        case NV_DTYPE_UINT32: IRUN(uint32_t) break;
        case NV_DTYPE_UINT64: IRUN(uint64_t) break;
        case NV_DTYPE_INT8: IRUN(int8_t) break;
        case NV_DTYPE_INT16: IRUN(int16_t) break;
        case NV_DTYPE_INT32: IRUN(int32_t) break;
        case NV_DTYPE_INT64: IRUN(int64_t) break;
        default: break;
      }
#undef IRUN
      a->u += s;
    }
  }
}

static void acc_merge(acc *a, const acc *b) {
  acc_add(a, b->d);
  acc_add(a, b->c);
  a->d2 += b->d2;
  a->u += b->u;
}

static void acc_store(nv_dtype dt, const acc *a, char *dst) {
  double v = a->d + a->c;
  switch (dt) {
    case NV_DTYPE_FLOAT32: *(float *)dst = (float)v; break;
    case NV_DTYPE_FLOAT64: *(double *)dst = v; break;
    case NV_DTYPE_FLOAT16: *(uint16_t *)dst = nv__f64_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: *(uint16_t *)dst = nv__f64_to_bf16(v); break;
    case NV_DTYPE_COMPLEX64:
      ((float *)dst)[0] = (float)a->d;
      ((float *)dst)[1] = (float)a->d2;
      break;
    default: {
      size_t isz = nv_dtype_size(dt);
      uint64_t u = a->u;
      memcpy(dst, &u, isz); /* little-endian: the low bytes are the wrapped value */
    }
  }
}

typedef struct plan {
  nv_dtype dt;
  size_t isz;
  int nk, nr;
  int64_t kshape[NV__MAX_DIMS], kst[NV__MAX_DIMS];
  int64_t rshape[NV__MAX_DIMS], rst[NV__MAX_DIMS];
  int64_t rsize;
  const char *base;
  char *out;
  acc *partial; /* split runs: one partial per chunk */
  int64_t chunk;
} plan;

static int64_t kept_offset(const plan *p, int64_t o) {
  int64_t off = 0;
  for (int i = p->nk - 1; i >= 0; i--) {
    off += (o % p->kshape[i]) * p->kst[i];
    o /= p->kshape[i];
  }
  return off;
}

/* Case A: each output sums its reduced space; the innermost reduced axis runs. */
static void inner_range(void *ctx, int64_t b, int64_t e) {
  const plan *p = ctx;
  int64_t inner = p->rshape[p->nr - 1], ist = p->rst[p->nr - 1];
  int64_t outer = p->rsize / (inner ? inner : 1);
  for (int64_t o = b; o < e; o++) {
    acc a = {0};
    const char *base = p->base + kept_offset(p, o) * (int64_t)p->isz;
    int64_t idx[NV__MAX_DIMS] = {0};
    for (int64_t r = 0; r < outer; r++) {
      int64_t off = 0;
      for (int i = 0; i < p->nr - 1; i++) off += idx[i] * p->rst[i];
      sum_run(p->dt, base + off * (int64_t)p->isz, inner, ist, &a);
      for (int i = p->nr - 2; i >= 0; i--) {
        if (++idx[i] < p->rshape[i]) break;
        idx[i] = 0;
      }
    }
    acc_store(p->dt, &a, p->out + o * (int64_t)p->isz);
  }
}

/* A single long contiguous run split into chunks summed in parallel. */
static void chunk_range(void *ctx, int64_t b, int64_t e) {
  const plan *p = ctx;
  for (int64_t c = b; c < e; c++) {
    int64_t s = c * p->chunk, n = p->rsize - s < p->chunk ? p->rsize - s : p->chunk;
    acc a = {0};
    sum_run(p->dt, p->base + s * p->rst[0] * (int64_t)p->isz, n, p->rst[0], &a);
    p->partial[c] = a;
  }
}

/* Case B: the reduced axes are outer; accumulate into per-output accumulators. */
static void outer_range(void *ctx, int64_t b, int64_t e) {
  const plan *p = ctx;
  int64_t n = e - b;
  acc *a = calloc((size_t)n, sizeof *a);
  int64_t *koff = malloc((size_t)n * sizeof *koff);
  if (!a || !koff) { /* fall back to per-output sums (no allocation) */
    free(a);
    free(koff);
    for (int64_t o = b; o < e; o++) {
      acc s = {0};
      int64_t ko = kept_offset(p, o);
      int64_t idx[NV__MAX_DIMS] = {0};
      for (int64_t r = 0; r < p->rsize; r++) {
        int64_t off = ko;
        for (int i = 0; i < p->nr; i++) off += idx[i] * p->rst[i];
        sum_run(p->dt, p->base + off * (int64_t)p->isz, 1, 1, &s);
        for (int i = p->nr - 1; i >= 0; i--) {
          if (++idx[i] < p->rshape[i]) break;
          idx[i] = 0;
        }
      }
      acc_store(p->dt, &s, p->out + o * (int64_t)p->isz);
    }
    return;
  }
  for (int64_t o = 0; o < n; o++) koff[o] = kept_offset(p, b + o);
  int64_t idx[NV__MAX_DIMS] = {0};
  bool fast32 = p->dt == NV_DTYPE_FLOAT32;
  for (int64_t r = 0; r < p->rsize; r++) {
    int64_t roff = 0;
    for (int i = 0; i < p->nr; i++) roff += idx[i] * p->rst[i];
    if (fast32) {
      const float *x = (const float *)p->base + roff;
      for (int64_t o = 0; o < n; o++) a[o].d += x[koff[o]];
    } else {
      for (int64_t o = 0; o < n; o++)
        sum_run(p->dt, p->base + (roff + koff[o]) * (int64_t)p->isz, 1, 1, &a[o]);
    }
    for (int i = p->nr - 1; i >= 0; i--) {
      if (++idx[i] < p->rshape[i]) break;
      idx[i] = 0;
    }
  }
  for (int64_t o = 0; o < n; o++) acc_store(p->dt, &a[o], p->out + (b + o) * (int64_t)p->isz);
  free(a);
  free(koff);
}

/* Folds adjacent axes of one list where contiguous. */
static int fold(int64_t *shape, int64_t *st, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 1) continue;
    if (m > 0 && st[m - 1] == shape[i] * st[i]) {
      shape[m - 1] *= shape[i];
      st[m - 1] = st[i];
      continue;
    }
    shape[m] = shape[i];
    st[m++] = st[i];
  }
  return m;
}

nv_status nv__k_sum(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__reduce_params *rp = node->params;
  const nv__output *x = in[0].meta;
  plan p = {0};
  p.dt = x->dtype;
  p.isz = nv_dtype_size(p.dt);
  p.base = nv__operand_ptr(&in[0]);
  p.out = nv__output_ptr(out);
  p.rsize = 1;
  for (int i = 0, j = 0; i < x->ndim; i++) {
    bool red = j < rp->naxes && rp->axes[j] == i;
    if (red) {
      j++;
      p.rshape[p.nr] = x->shape[i];
      p.rst[p.nr++] = x->strides[i];
      p.rsize *= x->shape[i];
    } else {
      p.kshape[p.nk] = x->shape[i];
      p.kst[p.nk++] = x->strides[i];
    }
  }
  if (out->size == 0) return NV_OK;
  if (p.rsize == 0 || x->size == 0) {
    memset(p.out, 0, (size_t)out->size * p.isz);
    return NV_OK;
  }
  p.nk = fold(p.kshape, p.kst, p.nk);
  p.nr = fold(p.rshape, p.rst, p.nr);
  if (p.nr == 0) {
    p.nr = 1;
    p.rshape[0] = 1;
    p.rst[0] = 1;
  }
  bool inner = p.rst[p.nr - 1] == 1 || p.rshape[p.nr - 1] >= 64 || p.nk == 0 ||
               p.kst[p.nk - 1] != 1;
  int threads = nv__pool_threads();
  if (out->size < threads && p.nr == 1 && p.rsize >= 4 * NV__PAR_GRAIN && threads > 1) {
    p.chunk = NV__PAR_GRAIN;
    int64_t nchunks = (p.rsize + p.chunk - 1) / p.chunk;
    p.partial = malloc((size_t)nchunks * sizeof *p.partial);
    if (p.partial) {
      for (int64_t o = 0; o < out->size; o++) {
        plan q = p;
        q.base = p.base + kept_offset(&p, o) * (int64_t)p.isz;
        nv__parallel_for(nchunks, 1, chunk_range, &q);
        acc a = {0};
        for (int64_t c = 0; c < nchunks; c++) acc_merge(&a, &p.partial[c]);
        acc_store(p.dt, &a, p.out + o * (int64_t)p.isz);
      }
      free(p.partial);
      return NV_OK;
    }
  }
  int64_t per = p.rsize ? NV__PAR_GRAIN / p.rsize : NV__PAR_GRAIN;
  if (per < 1) per = 1;
  if (inner) nv__parallel_for(out->size, per, inner_range, &p);
  else nv__parallel_for(out->size, per < 256 ? 256 : per, outer_range, &p);
  return NV_OK;
}
