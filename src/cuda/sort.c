/* The sort family on the GPU: sort, argsort, partition, argpartition (the full sorted
 * arrangement, as the CPU's), argtopk, median and searchsorted, with the CPU kernels'
 * semantics (src/cpu/sort.c): stable orders on the keys of sort_keys.cuh (argsort's keys make
 * -0.0 equal to +0.0, sort's, argtopk's and median's order -0.0 first), sorted values decoded
 * from their keys (NaN canonical) except complex64's, gathered bit for bit.
 *
 * Rows: the input's row axes (one axis, or every axis flattened; median: any set) follow its
 * other axes; an input whose rows are not contiguous in that order is first copied so
 * (nv__gpu_copy_strided: the tiled transpose for an axis that is not last), and an output
 * whose rows are not contiguous (axis not last) is written contiguous into scratch and copied
 * back permuted. Paths for contiguous rows of len elements:
 *   block    len <= NV__SORT_BLOCK_MAX (4096): one block a row, cub::BlockRadixSort in
 *            shared memory (tiers of 128, 512, 2048, 4096 elements; sort_block.cu)
 *   device   longer rows: keys (and positions) into scratch, CUB's device-wide radix sort as
 *            a captured operation, then a finishing kernel. Rows are sorted together by
 *            composite keys (row << bits | key) where they fit 64 bits; 64-bit keys of several
 *            rows take two stable sorts instead (by key with the global index, then by row).
 *            Sort sizes of more than INT_MAX items are declined (the CPU runs them).
 *   select   argtopk of dtypes with 32-bit keys, k <= 32 and len >= max(256, 8k): each warp
 *            keeps the best k (key << 32 | position) composites of a chunk of a row in
 *            registers; rows split into chunks until there are enough warps, then merged.
 * searchsorted is a thread a value, binary search on a's keys in place. */
#include <cuda_runtime.h>
#include <limits.h>
#include <stdio.h>

#include "cuda/copy.h"
#include "cuda/sort_kernels.h"
#include "ops/reduce_params.h"

#define THREADS 256
#define MAX_GRID ((int64_t)1 << 20)
/* Warps the selection wants in flight: the H200's 132 multiprocessors at 64 warps, twice. */
#define SELECT_WARPS ((int64_t)132 * 64 * 2)
/* Fewest elements a selecting warp scans. */
#define SELECT_CHUNK 2048

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static uint32_t grid_for(int64_t items, int64_t per_block) {
  int64_t g = ceil_div(items, per_block);
  return (uint32_t)(g < 1 ? 1 : g > MAX_GRID ? MAX_GRID : g);
}

static nv_status dispatch(nv__gpu_ctx *ctx, const void *func, uint32_t grid, uint32_t block,
                          const hrx_view *views, const hrx_access *access, int nviews,
                          const void *params, size_t params_size) {
  nv__gpu_launch l;
  memset(&l, 0, sizeof l);
  l.func = func;
  l.grid[0] = grid;
  l.grid[1] = l.grid[2] = 1;
  l.block[0] = block;
  l.block[1] = l.block[2] = 1;
  l.views = views;
  l.access = access;
  l.nviews = nviews;
  l.params = params;
  l.params_size = params_size;
  return nv__gpu_dispatch(ctx, &l);
}

static nv_status scratch(nv__gpu_ctx *ctx, int64_t bytes, hrx_view *out) {
  return nv__gpu_scratch(ctx, (size_t)(bytes < 16 ? 16 : bytes), out);
}

/* Significant key bits (sort_keys.cuh). */
static int key_bits(nv_dtype dt) {
  size_t s = nv_dtype_size(dt);
  return dt == NV_DTYPE_COMPLEX64 ? 64 : (int)(8 * s);
}

/* ---- rows ---- */

/* The input's dims permuted: kept dims, then the row dims (the sorted `axes`). */
typedef struct rows {
  int nd, nk; /* dims, kept dims */
  int shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  int64_t nrows, len;
} rows;

static void rows_plan(const nv__output *x, const int *axes, int naxes, rows *g) {
  bool row[NV__MAX_DIMS] = {false};
  for (int i = 0; i < naxes; i++) row[axes[i]] = true;
  g->nd = g->nk = 0;
  g->nrows = g->len = 1;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < x->ndim; i++) {
      if (row[i] != (pass == 1)) continue;
      g->shape[g->nd] = x->shape[i];
      g->st[g->nd++] = x->strides[i];
      if (pass == 0) {
        g->nk++;
        g->nrows *= x->shape[i];
      } else {
        g->len *= x->shape[i];
      }
    }
}

static void row_major_strides(const int *shape, int nd, int64_t *st) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* Whether strides st walk shape in row-major order contiguously (size-1 dims take any). */
static bool is_row_major(const int *shape, const int64_t *st, int nd) {
  int64_t want = 1;
  for (int i = nd - 1; i >= 0; i--) {
    if (shape[i] == 1) continue;
    if (st[i] != want) return false;
    want *= shape[i];
  }
  return true;
}

/* The input's rows contiguous: its own view when they are, else a permuted copy. */
static nv_status rows_source(nv__gpu_ctx *ctx, const nv__operand *op, const rows *g,
                             nv__gpu_arg *out) {
  nv__gpu_arg s;
  nv_status st = nv__gpu_input(ctx, op, &s);
  if (st != NV_OK) return st;
  if (is_row_major(g->shape, g->st, g->nd)) {
    *out = s;
    return NV_OK;
  }
  int isz = (int)nv_dtype_size(op->meta->dtype);
  int64_t ds[NV__MAX_DIMS];
  row_major_strides(g->shape, g->nd, ds);
  nv__gpu_arg d = {.offset = 0};
  if ((st = scratch(ctx, g->nrows * g->len * isz, &d.view)) != NV_OK) return st;
  if ((st = nv__gpu_copy_strided(ctx, isz, g->shape, g->nd, s, g->st, d, ds,
                                 HRX_ACCESS_WRITE)) != NV_OK)
    return st;
  *out = d;
  return NV_OK;
}

/* Where the rows' results go: rows of w elements of `out` (row-major in the input's shape with
 * the row axis `axis` of length w; axis < 0: the rows are the whole output). back->nd > 0 when
 * they are not contiguous there: *dst is then scratch, copied back by rows_finish. */
typedef struct rows_back {
  int nd;
  int shape[NV__MAX_DIMS];
  int64_t st[NV__MAX_DIMS];
  nv__gpu_arg out;
} rows_back;

static nv_status rows_dest(nv__gpu_ctx *ctx, const nv__output *out, nv__gpu_arg o, int axis,
                           int64_t w, const rows *g, nv__gpu_arg *dst, rows_back *back) {
  back->nd = 0;
  *dst = o;
  if (axis < 0) return NV_OK;
  int64_t os[NV__MAX_DIMS];
  row_major_strides(out->shape, out->ndim, os);
  int nd = 0;
  for (int i = 0; i < out->ndim; i++)
    if (i != axis) {
      back->shape[nd] = out->shape[i];
      back->st[nd++] = os[i];
    }
  back->shape[nd] = (int)w;
  back->st[nd++] = os[axis];
  if (is_row_major(back->shape, back->st, nd)) return NV_OK;
  back->nd = nd;
  back->out = o;
  dst->offset = 0;
  return scratch(ctx, g->nrows * w * (int64_t)nv_dtype_size(out->dtype), &dst->view);
}

static nv_status rows_finish(nv__gpu_ctx *ctx, const nv__output *out, nv__gpu_arg dst,
                             const rows_back *back) {
  if (back->nd == 0) return NV_OK;
  int64_t ss[NV__MAX_DIMS];
  row_major_strides(back->shape, back->nd, ss);
  return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(out->dtype), back->shape, back->nd, dst, ss,
                              back->out, back->st, HRX_ACCESS_WRITE);
}

/* ---- the device-wide sort as a captured operation ---- */

typedef struct radix_work {
  int32_t key64, pairs, n, end_bit;
  uint64_t bytes; /* CUB's temporary storage */
} radix_work;

static void work_free(void *p) { nv__free(p); }

/* Enqueues CUB's sort over the bindings (keys in, keys out, [values in, values out,] temp). */
static hrx_status radix_run(const hrx_callback_view *v, size_t count, void *stream, void *user) {
  const radix_work *w = user;
  size_t want = w->pairs ? 5 : 3, bytes = (size_t)w->bytes;
  if (count != want || v[want - 1].length < bytes) return HRX_E_INVALID;
  int e = nv__sort_device_radix(v[want - 1].address, &bytes, w->key64, w->pairs, v[0].address,
                                v[1].address, w->pairs ? v[2].address : NULL,
                                w->pairs ? v[3].address : NULL, w->n, w->end_bit, stream);
  if (e != cudaSuccess) {
    fprintf(stderr, "nuvec: sort on the GPU: cub::DeviceRadixSort failed: %s (%s)\n",
            cudaGetErrorName((cudaError_t)e), cudaGetErrorString((cudaError_t)e));
    return HRX_E_CUDA;
  }
  return HRX_OK;
}

static nv_status cuda_error(const char *op, const char *call, cudaError_t e) {
  cudaGetLastError(); /* a failed call leaves a non-sticky error that later checks would see */
  return nv__set_error(NV_ERR_BACKEND, "%s: %s failed: %s (%s)", op, call, cudaGetErrorName(e),
                       cudaGetErrorString(e));
}

/* Records a stable sort of n keys (with uint32 values when vin is set) over bits
 * [0, end_bit): CUB's temporary storage size is asked for on the recording's device now. */
static nv_status radix_record(nv__gpu_ctx *ctx, const char *op, bool key64, hrx_view kin,
                              hrx_view kout, const hrx_view *vin, const hrx_view *vout,
                              int64_t n, int end_bit) {
  radix_work w;
  memset(&w, 0, sizeof w);
  w.key64 = key64;
  w.pairs = vin != NULL;
  w.n = (int32_t)n;
  w.end_bit = end_bit;
  int prev = -1, device = nv__gpu_device_index(ctx);
  cudaError_t e = cudaGetDevice(&prev);
  if (e == cudaSuccess && prev != device) e = cudaSetDevice(device);
  if (e != cudaSuccess) return cuda_error(op, "cudaSetDevice", e);
  size_t bytes = 0;
  e = (cudaError_t)nv__sort_device_radix(NULL, &bytes, w.key64, w.pairs, NULL, NULL, NULL, NULL,
                                         w.n, end_bit, NULL);
  if (prev >= 0 && prev != device && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
  if (e != cudaSuccess) return cuda_error(op, "cub::DeviceRadixSort (temporary storage size)", e);
  w.bytes = bytes;
  hrx_view temp;
  nv_status st = scratch(ctx, (int64_t)bytes, &temp);
  if (st != NV_OK) return st;
  hrx_binding b[5];
  size_t nb = 0;
  b[nb++] = (hrx_binding){kin, HRX_ACCESS_READ};
  b[nb++] = (hrx_binding){kout, HRX_ACCESS_WRITE};
  if (vin) {
    b[nb++] = (hrx_binding){*vin, HRX_ACCESS_READ};
    b[nb++] = (hrx_binding){*vout, HRX_ACCESS_WRITE};
  }
  b[nb++] = (hrx_binding){temp, HRX_ACCESS_READ_WRITE};
  radix_work *user = nv__calloc(1, sizeof *user);
  if (!user) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  *user = w;
  return nv__gpu_captured(ctx, b, nb, radix_run, user, work_free, &w, sizeof w);
}

/* ---- sorting contiguous rows ---- */

/* Whether the rows need the device-wide path and are too many items for it (checked before
 * anything is recorded, so the node can be declined). */
static bool too_big(const rows *g) {
  return g->len > NV__SORT_BLOCK_MAX && g->nrows * g->len > INT_MAX;
}

/* The device-wide path (see the file comment). */
static nv_status sort_device(nv__gpu_ctx *ctx, const char *op, const nv__sort_params *p,
                             bool payload, nv__gpu_arg src, nv__gpu_arg dst) {
  int64_t n = p->nrows * p->len;
  int rowbits = 0;
  while (((int64_t)1 << rowbits) < p->nrows) rowbits++;
  bool two = p->bits == 64 && p->nrows > 1;
  bool key64 = two || p->bits + rowbits > 32;
  int64_t kw = key64 ? 8 : 4;
  bool vals = payload || two;
  hrx_view kin, kout, vin, vout;
  nv_status st;
  if ((st = scratch(ctx, n * kw, &kin)) != NV_OK || (st = scratch(ctx, n * kw, &kout)) != NV_OK ||
      (st = scratch(ctx, vals ? n * 4 : 16, &vin)) != NV_OK ||
      (st = scratch(ctx, vals ? n * 4 : 16, &vout)) != NV_OK)
    return st;
  nv__sort_dev_params dp;
  memset(&dp, 0, sizeof dp);
  dp.s = *p;
  dp.s.soff = src.offset;
  dp.s.doff = dst.offset;
  dp.key64 = key64;
  dp.payload = two ? 2 : payload ? 1 : 0;
  dp.n = n;
  {
    hrx_view v[3] = {src.view, kin, vin};
    hrx_access a[3] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE, HRX_ACCESS_WRITE};
    if ((st = dispatch(ctx, nv__sort_kernel_keys(), grid_for(n, THREADS), THREADS, v, a, 3, &dp,
                       sizeof dp)) != NV_OK)
      return st;
  }
  int end_bit = two ? 64 : p->bits + rowbits;
  if ((st = radix_record(ctx, op, key64, kin, kout, vals ? &vin : NULL, vals ? &vout : NULL, n,
                         end_bit)) != NV_OK)
    return st;
  hrx_view fk = kout, fv = vout;
  if (two) {
    /* Sorted by key (ties by global index); now stably by row: row keys into kin (as uint32),
     * sorted into kout, the global indices from vout into vin. */
    hrx_view v[2] = {vout, kin};
    hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
    if ((st = dispatch(ctx, nv__sort_kernel_row_keys(), grid_for(n, THREADS), THREADS, v, a, 2,
                       &dp, sizeof dp)) != NV_OK ||
        (st = radix_record(ctx, op, false, kin, kout, &vout, &vin, n, rowbits)) != NV_OK)
      return st;
    dp.gidx = 1;
    fv = vin;
  }
  int64_t items = p->mode == NV__SORT_TOPK ? p->nrows * p->k
                  : p->mode == NV__SORT_MEDIAN ? p->nrows
                                               : n;
  hrx_view v[4] = {src.view, fk, fv, dst.view};
  hrx_access a[4] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return dispatch(ctx, nv__sort_kernel_finish(), grid_for(items, THREADS), THREADS, v, a, 4, &dp,
                  sizeof dp);
}

/* Sorts the contiguous rows of src (p: everything but the offsets) into dst per p->mode. */
static nv_status sort_rows(nv__gpu_ctx *ctx, const char *op, const nv__sort_params *p,
                           nv__gpu_arg src, nv__gpu_arg dst) {
  bool payload = p->mode == NV__SORT_INDICES || p->mode == NV__SORT_TOPK ||
                 (p->mode == NV__SORT_VALUES && p->dtype == NV_DTYPE_COMPLEX64);
  if (p->len > NV__SORT_BLOCK_MAX) return sort_device(ctx, op, p, payload, src, dst);
  nv__sort_block_kernel k = nv__sort_block_kernel_for(p->len, p->bits == 64, payload);
  if (!k.func) return nv__set_error(NV_ERR_BACKEND, "%s: no block sort for rows of %lld", op,
                                    (long long)p->len);
  nv__sort_params q = *p;
  q.soff = src.offset;
  q.doff = dst.offset;
  hrx_view v[2] = {src.view, dst.view};
  hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return dispatch(ctx, k.func, grid_for(p->nrows, 1), (uint32_t)k.threads, v, a, 2, &q, sizeof q);
}

/* argtopk by selection (see the file comment). */
static bool select_fits(const nv__sort_params *p) {
  return p->bits <= 32 && p->k >= 1 && p->k <= NV__TOPK_SELECT_MAX && p->len >= 256 &&
         (int64_t)p->k * 8 <= p->len;
}

static nv_status topk_select(nv__gpu_ctx *ctx, const nv__sort_params *p, nv__gpu_arg src,
                             nv__gpu_arg dst) {
  nv__topk_params t;
  memset(&t, 0, sizeof t);
  t.dtype = p->dtype;
  t.k = p->k;
  t.nrows = p->nrows;
  t.len = p->len;
  t.soff = src.offset;
  t.doff = dst.offset;
  int64_t chunks = SELECT_WARPS / p->nrows, most = ceil_div(p->len, SELECT_CHUNK);
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  t.chunk = ceil_div(p->len, chunks);
  t.chunks = ceil_div(p->len, t.chunk);
  const int64_t wpb = NV__TOPK_THREADS / 32;
  if (t.chunks == 1) {
    hrx_view v[2] = {src.view, dst.view};
    hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
    return dispatch(ctx, nv__topk_kernel_select(p->k), grid_for(p->nrows, wpb), NV__TOPK_THREADS,
                    v, a, 2, &t, sizeof t);
  }
  hrx_view cand;
  nv_status st = scratch(ctx, p->nrows * t.chunks * p->k * 8, &cand);
  if (st != NV_OK) return st;
  hrx_view v1[2] = {src.view, cand}, v2[2] = {cand, dst.view};
  hrx_access a[2] = {HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  if ((st = dispatch(ctx, nv__topk_kernel_select(p->k), grid_for(p->nrows * t.chunks, wpb),
                     NV__TOPK_THREADS, v1, a, 2, &t, sizeof t)) != NV_OK)
    return st;
  return dispatch(ctx, nv__topk_kernel_merge(p->k), grid_for(p->nrows, wpb), NV__TOPK_THREADS, v2,
                  a, 2, &t, sizeof t);
}

/* ---- the kernel-table entries ---- */

/* A row op over the node's row axes (sort_kernels.h's mode; argtopk's k from the params). */
static nv_status run_rows(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int mode,
                          bool canon0) {
  const char *op = nv__prims[node->prim].name;
  nv__output *out = &node->out[0];
  const nv__output *x = in[0].meta;
  const nv__rows_params *rp = node->params;
  rows g;
  rows_plan(x, rp->axes, rp->naxes, &g);
  bool select = false;
  nv__sort_params p;
  memset(&p, 0, sizeof p);
  p.dtype = (int32_t)x->dtype;
  p.odtype = (int32_t)out->dtype;
  p.mode = mode;
  p.bits = key_bits(x->dtype);
  p.canon0 = canon0;
  p.k = mode == NV__SORT_TOPK ? rp->k : 0;
  p.nrows = g.nrows;
  p.len = g.len;
  if (mode == NV__SORT_TOPK) select = select_fits(&p);
  if (!select && too_big(&g)) return NV__GPU_DECLINED;
  nv__gpu_arg o, src, dst;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  /* The rows' results: whole rows (width len), argtopk's k, or median's one a row (always
   * contiguous: the kept dims in order). */
  int axis = rp->naxes == 1 && out->ndim == x->ndim && mode != NV__SORT_MEDIAN ? rp->axes[0] : -1;
  rows_back back;
  if ((st = rows_dest(ctx, out, o, axis, mode == NV__SORT_TOPK ? p.k : g.len, &g, &dst,
                      &back)) != NV_OK)
    return st;
  if (g.len == 0) {
    /* Only median has outputs for empty rows (NaN); nothing is read. */
    hrx_view none;
    if ((st = scratch(ctx, 16, &none)) != NV_OK) return st;
    nv__sort_dev_params dp;
    memset(&dp, 0, sizeof dp);
    dp.s = p;
    dp.s.doff = dst.offset;
    hrx_view v[4] = {none, none, none, dst.view};
    hrx_access a[4] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
    return dispatch(ctx, nv__sort_kernel_finish(), grid_for(p.nrows, THREADS), THREADS, v, a, 4,
                    &dp, sizeof dp);
  }
  if ((st = rows_source(ctx, &in[0], &g, &src)) != NV_OK) return st;
  st = select ? topk_select(ctx, &p, src, dst) : sort_rows(ctx, op, &p, src, dst);
  if (st != NV_OK) return st;
  return rows_finish(ctx, out, dst, &back);
}

static nv_status k_sort(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  bool arg = node->prim == NV__PRIM_ARGSORT || node->prim == NV__PRIM_ARGPARTITION;
  return run_rows(ctx, node, in, arg ? NV__SORT_INDICES : NV__SORT_VALUES, arg);
}

static nv_status k_argtopk(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                           int donated) {
  (void)donated;
  return run_rows(ctx, node, in, NV__SORT_TOPK, false);
}

static nv_status k_median(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  return run_rows(ctx, node, in, NV__SORT_MEDIAN, false);
}

/* searchsorted: a (1-D, any stride) searched in place, v made contiguous. */
static nv_status k_searchsorted(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv__gpu_arg o, a, v;
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  const nv__output *am = in[0].meta;
  if ((st = nv__gpu_input(ctx, &in[0], &a)) != NV_OK ||
      (st = nv__gpu_input_contiguous(ctx, &in[1], &v)) != NV_OK)
    return st;
  nv__search_params p;
  memset(&p, 0, sizeof p);
  p.dtype = (int32_t)am->dtype;
  p.right = ((const nv__rows_params *)node->params)->right;
  p.na = am->size;
  p.a_off = a.offset;
  p.a_st = am->strides[0]; /* a is 1-D (the builder's check) */
  p.nv = out->size;
  p.v_off = v.offset;
  p.out_off = o.offset;
  hrx_view views[3] = {a.view, v.view, o.view};
  hrx_access acc[3] = {HRX_ACCESS_READ, HRX_ACCESS_READ, HRX_ACCESS_WRITE};
  return dispatch(ctx, nv__search_kernel(), grid_for(out->size, THREADS), THREADS, views, acc, 3,
                  &p, sizeof p);
}

void nv__gpu_register_sort(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_SORT] = k_sort;
  k[NV__PRIM_ARGSORT] = k_sort;
  k[NV__PRIM_PARTITION] = k_sort;
  k[NV__PRIM_ARGPARTITION] = k_sort;
  k[NV__PRIM_ARGTOPK] = k_argtopk;
  k[NV__PRIM_MEDIAN] = k_median;
  k[NV__PRIM_SEARCHSORTED] = k_searchsorted;
}
