/* The index family's CPU kernels: take, gather, take_along_axis, scatter (all reductions),
 * put_along_axis, masked_scatter, dynamic slices, slice_update_* and diag. Every index is
 * bounds-checked after MLX's negative wrap; a bad one fails the node (no read or write out of
 * bounds). Update kernels given their base's buffer (donated == 0) write only the updates. */
#include <stdlib.h>

#include "cpu/index_common.h"
#include "cpu/pool.h"
#include "ops/index_params.h"

/* Copies one element of `isz` bytes. */
static inline void copy_elem(char *d, const char *s, size_t isz) {
  switch (isz) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
  }
}

/* Element offset of flat position `pos` of `shape` under `strides`. */
static int64_t offset_of(int64_t pos, const int *shape, const int64_t *strides, int nd) {
  int64_t off = 0;
  for (int i = nd - 1; i >= 0; i--) {
    off += (pos % shape[i]) * strides[i];
    pos /= shape[i];
  }
  return off;
}

/* ---- take ---- */

typedef struct take_job {
  const nv__output *am;
  const char *a;
  char *out;
  const char *idx;
  nv_dtype idt;
  size_t isz;
  int axis;
  int64_t n, inner, m;
  bool fast; /* a row-contiguous */
  nv__ix_bad bad;
} take_job;

/* The common case: a row-contiguous `a`, one element per index. Prefetches the rows of
 * indices a little ahead, since random gathers wait on memory. */
#define TAKE_ELEMS(T, IT)                                                                 \
  do {                                                                                    \
    const T *src = (const T *)j->a;                                                       \
    T *dst = (T *)j->out;                                                                 \
    const IT *ix = (const IT *)j->idx;                                                    \
    for (int64_t r = b; r < e; r++) {                                                     \
      int64_t o = r / m, q = r - o * m;                                                   \
      if (q + 16 < m) {                                                                   \
        int64_t pv = (int64_t)ix[q + 16];                                                 \
        if (pv >= 0 && pv < n) __builtin_prefetch(src + o * n + pv);                      \
      }                                                                                   \
      int64_t v = (int64_t)ix[q];                                                         \
      if (v < 0) v += n;                                                                  \
      if (v < 0 || v >= n) {                                                              \
        nv__ix_report(&j->bad, (int64_t)ix[q], n);                                        \
        continue;                                                                         \
      }                                                                                   \
      dst[r] = src[o * n + v];                                                            \
    }                                                                                     \
  } while (0)

#define TAKE_BY_INDEX(T)                                          \
  do {                                                            \
    if (j->idt == NV_DTYPE_INT32) TAKE_ELEMS(T, int32_t);         \
    else if (j->idt == NV_DTYPE_INT64) TAKE_ELEMS(T, int64_t);    \
    else if (j->idt == NV_DTYPE_UINT32) TAKE_ELEMS(T, uint32_t);  \
    else generic = true;                                          \
  } while (0)

static void take_range(void *ctx, int64_t b, int64_t e) {
  take_job *j = ctx;
  int64_t n = j->n, m = j->m, inner = j->inner;
  size_t isz = j->isz, iisz = nv_dtype_size(j->idt);
  bool generic = false;
  if (j->fast && inner == 1) {
    switch (isz) {
      case 1: TAKE_BY_INDEX(uint8_t); break;
      case 2: TAKE_BY_INDEX(uint16_t); break;
      case 4: TAKE_BY_INDEX(uint32_t); break;
      default: TAKE_BY_INDEX(uint64_t); break;
    }
    if (!generic) return;
  }
  const nv__output *am = j->am;
  int axis = j->axis, nd = am->ndim;
  int64_t ast = am->strides[axis];
  for (int64_t r = b; r < e; r++) {
    int64_t o = r / m, q = r - o * m;
    int64_t raw = nv__ix_load(j->idx + q * (int64_t)iisz, j->idt), v = raw;
    if (!nv__ix_wrap(&v, n, 1)) {
      nv__ix_report(&j->bad, raw, n);
      continue;
    }
    char *dst = j->out + r * inner * (int64_t)isz;
    if (j->fast) {
      const char *src = j->a + (o * n + v) * inner * (int64_t)isz;
      if (inner == 1) copy_elem(dst, src, isz);
      else memcpy(dst, src, (size_t)inner * isz);
      continue;
    }
    const char *src = j->a + (offset_of(o, am->shape, am->strides, axis) + v * ast) * (int64_t)isz;
    if (inner == 1) copy_elem(dst, src, isz);
    else nv__copy_strided(dst, src, am->shape + axis + 1, am->strides + axis + 1, nd - axis - 1, isz);
  }
}

nv_status nv__k_take(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__output *am = in[0].meta;
  int axis = ((const nv__axis_params *)node->params)->axis;
  take_job j = {.am = am, .a = nv__operand_ptr(&in[0]), .out = nv__output_ptr(out),
                .idx = nv__operand_ptr(&in[1]), .idt = in[1].meta->dtype,
                .isz = nv_dtype_size(out->dtype), .axis = axis, .n = am->shape[axis],
                .inner = 1, .m = in[1].meta->size, .fast = am->flags & NV__FLAG_ROW};
  int64_t outer = 1;
  for (int i = 0; i < axis; i++) outer *= am->shape[i];
  for (int i = axis + 1; i < am->ndim; i++) j.inner *= am->shape[i];
  int64_t rows = outer * j.m;
  if (rows == 0) return NV_OK;
  int64_t grain = NV__PAR_GRAIN / (j.inner > 0 ? j.inner : 1);
  nv__parallel_for(rows, grain > 0 ? grain : 1, take_range, &j);
  return nv__ix_bad_status(&j.bad, "take");
}

/* ---- gather / scatter: the index arrays ---- */

/* The index arrays of a gather or scatter: operands first..first+k, broadcast to `ishape`. */
typedef struct index_set {
  int k, ind;
  const int *ishape;
  const char **ptr;
  nv_dtype *dt;
  int64_t *st; /* k × ind broadcast strides */
  int64_t *ext; /* per index array: the slice extent on its axis */
  int64_t *n;   /* per index array: the size of its axis */
  int64_t *ast; /* per index array: the stride of its axis in the array indexed */
} index_set;

static nv_status index_set_init(index_set *s, const nv__operand *ops, int k, const int *ishape,
                                int ind) {
  memset(s, 0, sizeof *s);
  s->k = k;
  s->ind = ind;
  s->ishape = ishape;
  size_t nk = k > 0 ? (size_t)k : 1, ni = ind > 0 ? (size_t)ind : 1;
  s->ptr = nv__malloc(nk * sizeof *s->ptr);
  s->dt = nv__malloc(nk * sizeof *s->dt);
  s->st = nv__malloc(nk * ni * sizeof *s->st);
  s->ext = nv__malloc(3 * nk * sizeof *s->ext);
  if (!s->ptr || !s->dt || !s->st || !s->ext) {
    nv__free(s->ptr);
    nv__free(s->dt);
    nv__free(s->st);
    nv__free(s->ext);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  }
  s->n = s->ext + nk;
  s->ast = s->ext + 2 * nk;
  for (int j = 0; j < k; j++) {
    s->ptr[j] = nv__operand_ptr(&ops[j]);
    s->dt[j] = ops[j].meta->dtype;
    nv__broadcast_strides(ops[j].meta, ishape, ind, s->st + (size_t)j * ni);
  }
  return NV_OK;
}

static void index_set_free(index_set *s) {
  nv__free(s->ptr);
  nv__free(s->dt);
  nv__free(s->st);
  nv__free(s->ext);
}

/* The element offset selected by index position `coords` into *base (it may be negative for
 * views with negative strides); false after reporting a bad index. */
static bool index_offset(const index_set *s, const int64_t *coords, nv__ix_bad *bad,
                         int64_t *out) {
  int64_t base = 0;
  size_t ni = s->ind > 0 ? (size_t)s->ind : 1;
  for (int j = 0; j < s->k; j++) {
    const int64_t *st = s->st + (size_t)j * ni;
    int64_t off = 0;
    for (int d = 0; d < s->ind; d++) off += coords[d] * st[d];
    int64_t raw = nv__ix_load(s->ptr[j] + off * (int64_t)nv_dtype_size(s->dt[j]), s->dt[j]);
    int64_t v = raw;
    if (!nv__ix_wrap(&v, s->n[j], s->ext[j])) {
      nv__ix_report(bad, raw, s->n[j]);
      return false;
    }
    base += v * s->ast[j];
  }
  *out = base;
  return true;
}

static void unravel(int64_t pos, const int *shape, int nd, int64_t *coords) {
  for (int i = nd - 1; i >= 0; i--) {
    coords[i] = pos % shape[i];
    pos /= shape[i];
  }
}

static void next_coords(int64_t *coords, const int *shape, int nd) {
  for (int i = nd - 1; i >= 0; i--) {
    if (++coords[i] < shape[i]) return;
    coords[i] = 0;
  }
}

/* ---- gather ---- */

typedef struct gather_job {
  index_set ix;
  const nv__output *am;
  const char *a;
  char *out;
  size_t isz;
  const int *slice;
  int64_t slice_total;
  nv__ix_bad bad;
} gather_job;

static void gather_range(void *ctx, int64_t b, int64_t e) {
  gather_job *j = ctx;
  int64_t coords[NV__MAX_DIMS];
  unravel(b, j->ix.ishape, j->ix.ind, coords);
  for (int64_t p = b; p < e; p++, next_coords(coords, j->ix.ishape, j->ix.ind)) {
    int64_t base;
    if (!index_offset(&j->ix, coords, &j->bad, &base)) continue;
    char *dst = j->out + p * j->slice_total * (int64_t)j->isz;
    const char *src = j->a + base * (int64_t)j->isz;
    if (j->slice_total == 1) copy_elem(dst, src, j->isz);
    else nv__copy_strided(dst, src, j->slice, j->am->strides, j->am->ndim, j->isz);
  }
}

nv_status nv__k_gather(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__gather_params *p = node->params;
  const nv__output *am = in[0].meta;
  int k = p->naxes, ind = out->ndim - am->ndim;
  gather_job j = {.am = am, .a = nv__operand_ptr(&in[0]), .out = nv__output_ptr(out),
                  .isz = nv_dtype_size(out->dtype), .slice = out->shape + ind, .slice_total = 1};
  for (int d = 0; d < am->ndim; d++) j.slice_total *= j.slice[d];
  int64_t npos = 1;
  for (int d = 0; d < ind; d++) npos *= out->shape[d];
  if (npos == 0 || j.slice_total == 0) return NV_OK;
  if (index_set_init(&j.ix, in + 1, k, out->shape, ind) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  for (int q = 0; q < k; q++) {
    int ax = p->data[q];
    j.ix.n[q] = am->shape[ax];
    j.ix.ext[q] = j.slice[ax];
    j.ix.ast[q] = am->strides[ax];
  }
  int64_t grain = NV__PAR_GRAIN / j.slice_total;
  nv__parallel_for(npos, grain > 0 ? grain : 1, gather_range, &j);
  index_set_free(&j.ix);
  return nv__ix_bad_status(&j.bad, "gather");
}

/* ---- scatter ---- */

typedef struct scatter_job {
  index_set ix;
  const nv__output *um;
  const char *u;
  char *out;
  size_t isz;
  int64_t slice_total;
  nv__ix_combine_fn comb;
  int mode;     /* NV__IX_* */
  nv_dtype odt; /* the output's dtype */
  bool fast;    /* scatter_fast_applies, decided once per kernel call */
  nv__ix_walk slice; /* the walk of one slice: out and updates strides (bases set per use) */
  int nparts;
  nv__ix_bad bad;
} scatter_job;

/* The flat case with int32/int64 indices, float32/float64 values, contiguous updates and
 * destination, adding or assigning: a tight loop (no per-element dispatch) that prefetches the
 * destinations a little ahead. False when the case does not apply. It runs on one thread: split
 * by destination, every thread would read every index and mispredict the ownership test half
 * the time (measured twice as slow on two threads as on one). */
#define SCATTER_FAST(IT, VT)                                                                 \
  {                                                                                          \
    const IT *ix = (const IT *)ixp;                                                          \
    const VT *u = (const VT *)j->u;                                                          \
    VT *o = (VT *)j->out;                                                                    \
    for (int64_t q = 0; q < npos; q++) {                                                     \
      if (q + 16 < npos) {                                                                   \
        int64_t pv = (int64_t)ix[q + 16];                                                    \
        pv += pv < 0 ? n : 0;                                                                \
        if ((uint64_t)pv < (uint64_t)n) __builtin_prefetch(o + pv, 1);                       \
      }                                                                                      \
      int64_t raw = (int64_t)ix[q], v = raw + (raw < 0 ? n : 0);                             \
      if ((uint64_t)v >= (uint64_t)n) {                                                      \
        if (first) nv__ix_report(&j->bad, raw, n);                                           \
        continue;                                                                            \
      }                                                                                      \
      if (parts && (v < lo || v >= hi)) continue;                                            \
      if (add) o[v] += u[q];                                                                 \
      else o[v] = u[q];                                                                      \
    }                                                                                        \
    return true;                                                                             \
  }

static bool scatter_fast_applies(const scatter_job *j) {
  const index_set *s = &j->ix;
  nv_dtype dt = s->dt[0];
  return (j->mode == NV__IX_ADD || j->mode == NV__IX_ASSIGN) && s->k == 1 && s->ind == 1 &&
         j->slice_total == 1 && s->st[0] == 1 && j->um->strides[0] == 1 && s->ast[0] == 1 &&
         (dt == NV_DTYPE_INT32 || dt == NV_DTYPE_INT64) &&
         (j->odt == NV_DTYPE_FLOAT32 || j->odt == NV_DTYPE_FLOAT64);
}

static bool scatter_elems_fast(scatter_job *j, int64_t npos, int64_t lo, int64_t hi,
                               bool first) {
  const index_set *s = &j->ix;
  nv_dtype dt = s->dt[0];
  bool add = j->mode == NV__IX_ADD, parts = j->nparts > 1;
  if (!j->fast) return false;
  int64_t n = s->n[0];
  const char *ixp = s->ptr[0];
  if (dt == NV_DTYPE_INT32 && j->odt == NV_DTYPE_FLOAT32) SCATTER_FAST(int32_t, float)
  if (dt == NV_DTYPE_INT64 && j->odt == NV_DTYPE_FLOAT32) SCATTER_FAST(int64_t, float)
  if (dt == NV_DTYPE_INT32 && j->odt == NV_DTYPE_FLOAT64) SCATTER_FAST(int32_t, double)
  if (dt == NV_DTYPE_INT64 && j->odt == NV_DTYPE_FLOAT64) SCATTER_FAST(int64_t, double)
  return false;
}

static void combine_run(char **p, const int64_t *s, int64_t n, void *extra) {
  nv__ix_combine_fn comb = *(nv__ix_combine_fn *)extra;
  comb(p[0], s[0], p[1], s[1], n);
}

/* The common case of one 1-D index array and one-element slices: a flat loop that prefetches
 * the destinations a little ahead, since random read-modify-writes wait on memory. Handles
 * destinations in [lo, hi) when partitioned (out-of-range indices by the first partition). */
static void scatter_elems(scatter_job *j, int64_t npos, int64_t lo, int64_t hi, bool first) {
  if (scatter_elems_fast(j, npos, lo, hi, first)) return;
  const index_set *s = &j->ix;
  nv_dtype dt = s->dt[0];
  int64_t n = s->n[0], ist = s->st[0], iisz = (int64_t)nv_dtype_size(dt);
  int64_t ust = j->um->strides[0], ast = s->ast[0], isz = (int64_t)j->isz;
  const char *ix = s->ptr[0];
  bool parts = j->nparts > 1;
  for (int64_t p = 0; p < npos; p++) {
    if (p + 16 < npos) {
      int64_t pv = nv__ix_load(ix + (p + 16) * ist * iisz, dt);
      if (pv < 0) pv += n;
      if (pv >= 0 && pv < n) __builtin_prefetch(j->out + pv * ast * isz, 1);
    }
    int64_t raw = nv__ix_load(ix + p * ist * iisz, dt), v = raw;
    if (!nv__ix_wrap(&v, n, 1)) {
      if (first) nv__ix_report(&j->bad, raw, n);
      continue;
    }
    if (parts && (v < lo || v >= hi)) continue;
    j->comb(j->out + v * ast * isz, 0, j->u + p * ust * isz, 0, 1);
  }
}

/* Applies the updates of positions whose first index falls in partitions [pb, pe) of the
 * first indexed axis (all of them when the job is not partitioned), in row-major order, so
 * duplicate indices resolve exactly as in a serial loop. */
static void scatter_parts(void *ctx, int64_t pb, int64_t pe) {
  scatter_job *j = ctx;
  const index_set *s = &j->ix;
  int64_t npos = 1;
  for (int d = 0; d < s->ind; d++) npos *= s->ishape[d];
  int64_t lo = 0, hi = 0;
  if (j->nparts > 1) {
    lo = s->n[0] * pb / j->nparts;
    hi = s->n[0] * pe / j->nparts;
  }
  if (s->k == 1 && s->ind == 1 && j->slice_total == 1) {
    scatter_elems(j, npos, lo, hi, pb == 0);
    return;
  }
  nv__ix_walk w = j->slice;
  int64_t coords[NV__MAX_DIMS] = {0};
  for (int64_t p = 0; p < npos; p++, next_coords(coords, s->ishape, s->ind)) {
    if (j->nparts > 1) {
      int64_t off = 0;
      for (int d = 0; d < s->ind; d++) off += coords[d] * s->st[d];
      int64_t v = nv__ix_load(s->ptr[0] + off * (int64_t)nv_dtype_size(s->dt[0]), s->dt[0]);
      if (v < 0) v += s->n[0];
      /* Out-of-range first indices are reported by the partition that holds 0. */
      bool mine = (v >= lo && v < hi) || ((v < 0 || v >= s->n[0]) && pb == 0);
      if (!mine) continue;
    }
    int64_t base;
    if (!index_offset(s, coords, &j->bad, &base)) continue;
    int64_t uoff = 0;
    for (int d = 0; d < s->ind; d++) uoff += coords[d] * j->um->strides[d];
    char *dst = j->out + base * (int64_t)j->isz;
    const char *src = j->u + uoff * (int64_t)j->isz;
    if (j->slice_total == 1) {
      j->comb(dst, 0, src, 0, 1);
      continue;
    }
    w.base[0] = dst;
    w.base[1] = (char *)src;
    nv__ix_walk_run(&w, false);
  }
}

static int scatter_mode(int prim) {
  switch (prim) {
    case NV__PRIM_SCATTER_ADD: return NV__IX_ADD;
    case NV__PRIM_SCATTER_PROD: return NV__IX_PROD;
    case NV__PRIM_SCATTER_MAX: return NV__IX_MAX;
    case NV__PRIM_SCATTER_MIN: return NV__IX_MIN;
    default: return NV__IX_ASSIGN;
  }
}

nv_status nv__k_scatter(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0 && nv__ix_copy_base(out, &in[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__gather_params *p = node->params;
  int k = p->naxes;
  const nv__output *um = in[k + 1].meta;
  int ind = um->ndim - out->ndim;
  const int *slice = um->shape + ind;
  scatter_job j = {.um = um, .u = nv__operand_ptr(&in[k + 1]), .out = nv__output_ptr(out),
                   .isz = nv_dtype_size(out->dtype), .slice_total = 1,
                   .comb = nv__ix_combiner(scatter_mode(node->prim), out->dtype),
                   .mode = scatter_mode(node->prim), .odt = out->dtype, .nparts = 1};
  for (int d = 0; d < out->ndim; d++) j.slice_total *= slice[d];
  int64_t npos = 1;
  for (int d = 0; d < ind; d++) npos *= um->shape[d];
  if (npos == 0 || j.slice_total == 0) return NV_OK;
  if (index_set_init(&j.ix, in + 1, k, um->shape, ind) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int64_t ost[NV__MAX_DIMS];
  nv__ix_row_strides(out->shape, out->ndim, ost);
  for (int q = 0; q < k; q++) {
    int ax = p->data[q];
    j.ix.n[q] = out->shape[ax];
    j.ix.ext[q] = slice[ax];
    j.ix.ast[q] = ost[ax];
  }
  const int64_t *st[2] = {ost, um->strides + ind};
  char *base[2] = {NULL, NULL};
  int64_t is[2] = {(int64_t)j.isz, (int64_t)j.isz};
  nv__ix_walk_init(&j.slice, slice, out->ndim, 2, st, base, is, combine_run, &j.comb);
  j.fast = scatter_fast_applies(&j);
  /* Positions on different rows of the first indexed axis touch disjoint elements when the
   * slice is one element thick there: split that axis between the threads. */
  int threads = nv__pool_threads();
  if (k > 0 && slice[p->data[0]] == 1 && npos * j.slice_total >= NV__PAR_GRAIN && threads > 1 &&
      out->shape[p->data[0]] >= threads && !j.fast) {
    j.nparts = threads;
    nv__parallel_for(threads, 1, scatter_parts, &j);
  } else {
    scatter_parts(&j, 0, 1);
  }
  index_set_free(&j.ix);
  return nv__ix_bad_status(&j.bad, nv__prims[node->prim].name);
}

/* ---- take_along_axis / put_along_axis ---- */

typedef struct axis_job {
  nv_dtype idt;
  size_t isz;
  int64_t n, ast; /* size and stride of the axis in the array indexed */
  nv__ix_combine_fn comb;
  nv__ix_bad bad;
} axis_job;

/* p[0] out, p[1] indices, p[2] a at the start of its axis. */
static void gather_axis_run(char **p, const int64_t *s, int64_t n, void *extra) {
  axis_job *j = extra;
  int64_t iisz = (int64_t)nv_dtype_size(j->idt), isz = (int64_t)j->isz;
  for (int64_t i = 0; i < n; i++) {
    int64_t raw = nv__ix_load(p[1] + i * s[1] * iisz, j->idt), v = raw;
    if (!nv__ix_wrap(&v, j->n, 1)) {
      nv__ix_report(&j->bad, raw, j->n);
      continue;
    }
    copy_elem(p[0] + i * s[0] * isz, p[2] + (i * s[2] + v * j->ast) * isz, j->isz);
  }
}

/* p[0] out at the start of its axis, p[1] indices, p[2] values. */
static void scatter_axis_run(char **p, const int64_t *s, int64_t n, void *extra) {
  axis_job *j = extra;
  int64_t iisz = (int64_t)nv_dtype_size(j->idt), isz = (int64_t)j->isz;
  for (int64_t i = 0; i < n; i++) {
    int64_t raw = nv__ix_load(p[1] + i * s[1] * iisz, j->idt), v = raw;
    if (!nv__ix_wrap(&v, j->n, 1)) {
      nv__ix_report(&j->bad, raw, j->n);
      continue;
    }
    j->comb(p[0] + (i * s[0] + v * j->ast) * isz, 0, p[2] + i * s[2] * isz, 0, 1);
  }
}

nv_status nv__k_gather_axis(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int axis = ((const nv__axis_params *)node->params)->axis;
  const nv__output *am = in[0].meta;
  axis_job j = {.idt = in[1].meta->dtype, .isz = nv_dtype_size(out->dtype),
                .n = am->shape[axis], .ast = am->strides[axis]};
  int64_t ost[NV__MAX_DIMS], ast[NV__MAX_DIMS];
  nv__ix_row_strides(out->shape, out->ndim, ost);
  memcpy(ast, am->strides, (size_t)am->ndim * sizeof *ast);
  ast[axis] = 0;
  const int64_t *st[3] = {ost, in[1].meta->strides, ast};
  char *base[3] = {nv__output_ptr(out), (char *)nv__operand_ptr(&in[1]),
                   (char *)nv__operand_ptr(&in[0])};
  int64_t is[3] = {(int64_t)j.isz, (int64_t)nv_dtype_size(j.idt), (int64_t)j.isz};
  nv__ix_walk w;
  nv__ix_walk_init(&w, out->shape, out->ndim, 3, st, base, is, gather_axis_run, &j);
  nv__ix_walk_run(&w, true);
  return nv__ix_bad_status(&j.bad, "take_along_axis");
}

nv_status nv__k_scatter_axis(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0 && nv__ix_copy_base(out, &in[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int axis = ((const nv__axis_params *)node->params)->axis;
  const nv__output *im = in[1].meta;
  int64_t ost[NV__MAX_DIMS];
  nv__ix_row_strides(out->shape, out->ndim, ost);
  axis_job j = {.idt = im->dtype, .isz = nv_dtype_size(out->dtype), .n = out->shape[axis],
                .ast = ost[axis], .comb = nv__ix_combiner(NV__IX_ASSIGN, out->dtype)};
  ost[axis] = 0;
  const int64_t *st[3] = {ost, im->strides, in[2].meta->strides};
  char *base[3] = {nv__output_ptr(out), (char *)nv__operand_ptr(&in[1]),
                   (char *)nv__operand_ptr(&in[2])};
  int64_t is[3] = {(int64_t)j.isz, (int64_t)nv_dtype_size(j.idt), (int64_t)j.isz};
  nv__ix_walk w;
  nv__ix_walk_init(&w, im->shape, im->ndim, 3, st, base, is, scatter_axis_run, &j);
  /* Serial: indices that repeat along the axis must resolve in row-major order. */
  nv__ix_walk_run(&w, false);
  return nv__ix_bad_status(&j.bad, "put_along_axis");
}

/* ---- masked_scatter ---- */

nv_status nv__k_masked_scatter(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0 && nv__ix_copy_base(out, &in[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__output *mm = in[1].meta, *sm = in[2].meta;
  int m = mm->ndim, t = out->ndim - m;
  size_t isz = nv_dtype_size(out->dtype);
  int64_t row = 1;
  for (int d = m; d < out->ndim; d++) row *= out->shape[d];
  if (row == 0 || mm->size == 0) return NV_OK;
  const uint8_t *mask = nv__operand_ptr(&in[1]);
  const char *src = nv__operand_ptr(&in[2]);
  char *dst = nv__output_ptr(out);
  int64_t rows = sm->shape[0], k = 0, coords[NV__MAX_DIMS] = {0};
  for (int64_t p = 0; p < mm->size; p++, next_coords(coords, mm->shape, m)) {
    int64_t moff = 0;
    for (int d = 0; d < m; d++) moff += coords[d] * mm->strides[d];
    if (!mask[moff]) continue;
    if (k >= rows)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "masked_scatter: the mask selects more than the %lld rows of src",
                           (long long)rows);
    const char *s = src + k * sm->strides[0] * (int64_t)isz;
    char *d = dst + p * row * (int64_t)isz;
    if (row == 1) copy_elem(d, s, isz);
    else nv__copy_strided(d, s, sm->shape + 1, sm->strides + 1, t, isz);
    k++;
  }
  return NV_OK;
}

/* ---- dynamic slices ---- */

/* The clamped start of the region on every axis of `shape`: start[k] on axes[k] (a negative
 * start counts from the end), then moved inside the axis for a region of `size`. */
static void dynamic_start(const nv__operand *start, const nv__gather_params *p, const int *shape,
                          const int *size, int nd, int64_t *out) {
  for (int d = 0; d < nd; d++) out[d] = 0;
  const char *sp = nv__operand_ptr(start);
  nv_dtype dt = start->meta->dtype;
  int64_t step = start->meta->ndim ? start->meta->strides[0] : 0;
  for (int q = 0; q < p->naxes; q++) {
    int ax = p->data[q];
    int64_t v = nv__ix_load(sp + q * step * (int64_t)nv_dtype_size(dt), dt);
    if (v < 0) v = v < -(int64_t)shape[ax] ? 0 : v + shape[ax];
    if (v > shape[ax] - size[ax]) v = shape[ax] - size[ax];
    out[ax] = v;
  }
}

nv_status nv__k_dynamic_slice(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__output *am = in[0].meta;
  int64_t st[NV__MAX_DIMS], ost[NV__MAX_DIMS], off = 0;
  dynamic_start(&in[1], node->params, am->shape, out->shape, am->ndim, st);
  for (int d = 0; d < am->ndim; d++) off += st[d] * am->strides[d];
  size_t isz = nv_dtype_size(out->dtype);
  nv__ix_row_strides(out->shape, out->ndim, ost);
  nv__ix_copy(nv__output_ptr(out), ost, (const char *)nv__operand_ptr(&in[0]) + off * (int64_t)isz,
              am->strides, out->shape, out->ndim, isz);
  return NV_OK;
}

nv_status nv__k_dynamic_slice_update(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0 && nv__ix_copy_base(out, &in[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__output *um = in[1].meta;
  int64_t st[NV__MAX_DIMS], ost[NV__MAX_DIMS], off = 0;
  nv__ix_row_strides(out->shape, out->ndim, ost);
  dynamic_start(&in[2], node->params, out->shape, um->shape, out->ndim, st);
  for (int d = 0; d < out->ndim; d++) off += st[d] * ost[d];
  size_t isz = nv_dtype_size(out->dtype);
  nv__ix_copy((char *)nv__output_ptr(out) + off * (int64_t)isz, ost, nv__operand_ptr(&in[1]),
              um->strides, um->shape, um->ndim, isz);
  return NV_OK;
}

/* ---- slice_update_add / prod / max / min ---- */

nv_status nv__k_slice_update_reduce(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated != 0 && nv__ix_copy_base(out, &in[0]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  const nv__slice_update_params *p = node->params;
  int n = p->ndim;
  int mode = NV__IX_ADD + (node->prim - NV__PRIM_SLICE_UPDATE_ADD);
  nv__ix_combine_fn comb = nv__ix_combiner(mode, out->dtype);
  int64_t ost[NV__MAX_DIMS], rst[NV__MAX_DIMS], ust[NV__MAX_DIMS], off = 0;
  nv__ix_row_strides(out->shape, out->ndim, ost);
  const int *len = p->data + 2 * n;
  for (int d = 0; d < n; d++) {
    if (len[d] == 0) return NV_OK;
    rst[d] = ost[d] * p->data[n + d];
    off += (int64_t)p->data[d] * ost[d];
  }
  nv__broadcast_strides(in[1].meta, len, n, ust);
  int64_t isz = (int64_t)nv_dtype_size(out->dtype);
  const int64_t *st[2] = {rst, ust};
  char *base[2] = {(char *)nv__output_ptr(out) + off * isz, (char *)nv__operand_ptr(&in[1])};
  int64_t is[2] = {isz, isz};
  nv__ix_walk w;
  nv__ix_walk_init(&w, len, n, 2, st, base, is, combine_run, &comb);
  /* A region's elements are distinct (no zero steps), so its runs can go in parallel. */
  nv__ix_walk_run(&w, true);
  return NV_OK;
}

/* ---- diag (vector to matrix) ---- */

nv_status nv__k_diag(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  size_t isz = nv_dtype_size(out->dtype);
  char *d = nv__output_ptr(out);
  memset(d, 0, (size_t)out->size * isz);
  int k = ((const nv__axis_params *)node->params)->axis;
  int64_t cols = out->shape[1], n = in[0].meta->size, step = in[0].meta->strides[0];
  const char *s = nv__operand_ptr(&in[0]);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = k >= 0 ? i : i - k, c = k >= 0 ? i + k : i;
    copy_elem(d + (r * cols + c) * (int64_t)isz, s + i * step * (int64_t)isz, isz);
  }
  return NV_OK;
}
