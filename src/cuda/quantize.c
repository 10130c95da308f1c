/* The quantize family on the GPU: the kernel-table entries of quantize, dequantize,
 * quantized_matmul and gather_qmm (host code, C11). Each gets its outputs' device memory and its
 * inputs row-contiguous (copied into scratch memory where they are not) and records one launch of
 * quantize.cu's kernels; quantized_matmul picks the decode gemv for M <= 8 with a transposed w
 * (quantize_gemv.cu's streaming one where K is a multiple of 32 and x is float16, bfloat16 or
 * float32, or its tensor-core one for 4-bit affine float16/bfloat16 products with K a multiple
 * of 128 where NUVEC_QMV_TC=1, its split-K one for one row of x with affine 2-, 4- or 8-bit
 * codes (8-bit ones where NUVEC_QMV_V2=1) unless NUVEC_QMV_V2=0; quantize.cu's otherwise), the tiled kernel otherwise (the
 * builder turns products of more than 32 rows per matrix on a GPU stream into dequantize +
 * matmul, so those do not reach it). */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/quantize_kernels.h"
#include "ops/quantize_params.h"

/* Views and accesses of one launch: outputs first (written), then inputs (read). */
typedef struct launch_views {
  hrx_view v[7];
  hrx_access a[7];
  int n;
} launch_views;

static void add_view(launch_views *lv, nv__gpu_quant_params *p, const nv__gpu_arg *a,
                     hrx_access acc) {
  p->off[lv->n] = a->offset;
  lv->v[lv->n] = a->view;
  lv->a[lv->n] = acc;
  lv->n++;
}

static nv_status inputs(nv__gpu_ctx *ctx, const nv__operand *in, int n, nv__gpu_arg *a) {
  nv_status st = NV_OK;
  for (int i = 0; i < n && st == NV_OK; i++) st = nv__gpu_input_contiguous(ctx, &in[i], &a[i]);
  return st;
}

static nv_status unsupported(const char *op, nv_dtype dt) {
  return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported on the GPU", op,
                       nv_dtype_name(dt));
}

static nv_status k_quantize(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                            int donated) {
  (void)donated;
  const nv__quant_params *qp = node->params;
  const void *func = nv__gpu_kernel_quantize((int)in[0].meta->dtype);
  if (!func) return unsupported("quantize", in[0].meta->dtype);
  bool affine = qp->mode == NV__QMODE_AFFINE;
  nv__gpu_arg o[3], w;
  nv_status st = NV_OK;
  for (int i = 0; i < (affine ? 3 : 2) && st == NV_OK; i++)
    st = nv__gpu_output(ctx, &node->out[i], &o[i]);
  if (st != NV_OK || node->out[1].size == 0) return st;
  if ((st = inputs(ctx, in, 1, &w)) != NV_OK) return st;
  nv__gpu_quant_params p = {
      .n = node->out[1].size, .mode = qp->mode, .group_size = qp->group_size, .bits = qp->bits};
  launch_views lv = {.n = 0};
  add_view(&lv, &p, &o[0], HRX_ACCESS_WRITE);
  add_view(&lv, &p, &o[1], HRX_ACCESS_WRITE);
  add_view(&lv, &p, affine ? &o[2] : &w, affine ? HRX_ACCESS_WRITE : HRX_ACCESS_READ);
  add_view(&lv, &p, &w, HRX_ACCESS_READ);
  uint32_t blocks = nv__gpu_blocks(p.n, NV__GPU_QUANT_THREADS, 65535);
  return nv__gpu_dispatch_1d(ctx, "quantize", func, blocks, NV__GPU_QUANT_THREADS, lv.v, lv.a,
                             lv.n, &p, sizeof p);
}

static nv_status k_dequantize(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  (void)donated;
  const nv__quant_params *qp = node->params;
  nv__output *out = &node->out[0];
  const void *func = nv__gpu_kernel_dequantize((int)out->dtype);
  if (!func) return unsupported("dequantize", out->dtype);
  bool affine = qp->mode == NV__QMODE_AFFINE;
  nv__gpu_arg o, a[3];
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  if ((st = inputs(ctx, in, affine ? 3 : 2, a)) != NV_OK) return st;
  nv__gpu_quant_params p = {
      .n = out->size, .mode = qp->mode, .group_size = qp->group_size, .bits = qp->bits};
  launch_views lv = {.n = 0};
  add_view(&lv, &p, &o, HRX_ACCESS_WRITE);
  add_view(&lv, &p, &a[0], HRX_ACCESS_READ);
  add_view(&lv, &p, &a[1], HRX_ACCESS_READ);
  add_view(&lv, &p, affine ? &a[2] : &a[1], HRX_ACCESS_READ);
  int64_t items = p.n;
  /* A packed word per thread where a word holds whole elements of one group and the words
   * per group are a power of two (every size MLX uses); one element per thread otherwise. */
  int epw = 32 / (qp->bits > 0 ? qp->bits : 1);
  int wpg = 32 % qp->bits == 0 && qp->group_size % epw == 0 ? qp->group_size / epw : 0;
  const void *words = wpg > 0 && (wpg & (wpg - 1)) == 0
                          ? nv__gpu_kernel_dequantize_words((int)out->dtype, qp->bits)
                          : NULL;
  if (words) {
    func = words;
    items = p.n / epw;
    p.transpose = __builtin_ctz((unsigned)wpg);
  }
  uint32_t blocks = nv__gpu_blocks(items, NV__GPU_QUANT_THREADS, 65535 * 8);
  return nv__gpu_dispatch_1d(ctx, "dequantize", func, blocks, NV__GPU_QUANT_THREADS, lv.v, lv.a,
                             lv.n, &p, sizeof p);
}

static uint32_t cap_grid(int64_t n) { return (uint32_t)(n < 1 ? 1 : n > 65535 ? 65535 : n); }

/* Whether the view's element 0 is 16-byte aligned (device buffers start 256-byte aligned). */
static bool aligned16(const nv__gpu_arg *a, size_t elem) {
  return (a->view.offset + (size_t)a->offset * elem) % 16 == 0;
}

/* The tensor-core decode gemv for one product of M rows of x by w where NUVEC_QMV_TC=1 (a
 * measurement switch, read at each recording: on the H200 it took 15 us for 4096 x 4096,
 * the streaming kernel 12.4, so the streaming one stays the default), or NULL where it is
 * off or does not apply (nv__gpu_kernel_qmv_tc's conditions; x's rows must fit in shared
 * memory beside the reduction's). */
static const void *qmv_tc(const nv__quant_params *qp, nv_dtype dt, int64_t M, int64_t K,
                          const nv__gpu_arg *x, const nv__gpu_arg *w) {
  const char *e = getenv("NUVEC_QMV_TC");
  if (!e || strcmp(e, "1") || qp->mode != NV__QMODE_AFFINE || qp->bits != 4 || K % 128 != 0 ||
      (dt != NV_DTYPE_FLOAT16 && dt != NV_DTYPE_BFLOAT16) || !aligned16(x, 2) || !aligned16(w, 4))
    return NULL;
  if (M * (K + 8) * 2 + nv__gpu_qmv_tc_static_smem() > 48 * 1024) return NULL;
  return nv__gpu_kernel_qmv_tc((int)dt, qp->group_size);
}

/* NUVEC_QMV_V2: the split-K decode gemv (quantize_gemv.cu's qmv_v2_kernel) takes the products
 * of one row of x it applies to, in its plan's default (NV__GPU_QMV_V2_AUTO: 2- and 4-bit
 * codes), for 8-bit codes too where the variable is 1 (NV__GPU_QMV_V2_ANY), none where it is 0
 * (the streaming kernel, for measurement); read once. */
enum { V2_OFF, V2_AUTO, V2_ALL };
static pthread_once_t v2_once = PTHREAD_ONCE_INIT;
static int v2_mode;
static void v2_read(void) {
  const char *e = getenv("NUVEC_QMV_V2");
  v2_mode = e && !strcmp(e, "0") ? V2_OFF : e && !strcmp(e, "1") ? V2_ALL : V2_AUTO;
}

/* The split-K kernel's launch (nv__gpu_qmv_v2_plan) for `products` products of M rows of x
 * by N rows of w where it is on and applies: M == 1, affine codes, x and w 16-byte aligned
 * (and the plan's conditions: bits, K); plan->func NULL otherwise. */
static nv_status qmv_v2(nv__gpu_ctx *ctx, const char *op, const nv__quant_params *qp,
                        nv_dtype dt, int64_t M, int64_t K, int64_t N, int64_t products,
                        const nv__gpu_arg *x, const nv__gpu_arg *w, bool gather,
                        nv__gpu_qmv_v2_launch *plan) {
  pthread_once(&v2_once, v2_read);
  plan->func = NULL;
  if (v2_mode == V2_OFF || M != 1 || qp->mode != NV__QMODE_AFFINE ||
      !aligned16(x, nv_dtype_size(dt)) || !aligned16(w, 4))
    return NV_OK;
  int e = nv__gpu_qmv_v2_plan((int)dt, qp->bits, gather,
                              v2_mode == V2_ALL ? NV__GPU_QMV_V2_ANY : NV__GPU_QMV_V2_AUTO, K, N,
                              products, nv__gpu_device_index(ctx), plan);
  if (e != 0) {
    cudaGetLastError(); /* not sticky: later checks must not see it */
    plan->func = NULL;
    return nv__set_error(NV_ERR_BACKEND, "%s: the split-K gemv's launch shape: %s", op,
                         cudaGetErrorString((cudaError_t)e));
  }
  return NV_OK;
}

static nv_status k_quantized_matmul(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                    int donated) {
  (void)donated;
  const nv__quant_params *qp = node->params;
  nv__output *out = &node->out[0];
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  bool affine = qp->mode == NV__QMODE_AFFINE;
  bool gemv = qp->transpose && ox->shape[1] <= NV__GPU_QMM_GEMV_MAX_M;
  /* The streaming gemv where K is whole units of 32 (float16, bfloat16, float32 x). */
  const void *qmv = gemv && ox->shape[2] % 32 == 0
                        ? nv__gpu_kernel_qmv((int)out->dtype, qp->mode, qp->bits, ox->shape[1])
                        : NULL;
  const void *func = qmv                       ? qmv
                     : gemv ? nv__gpu_kernel_qmm_gemv((int)out->dtype, qp->bits)
                            : nv__gpu_kernel_qmm_tiled((int)out->dtype);
  if (!func) return unsupported("quantized_matmul", out->dtype);
  nv__gpu_arg o, a[4];
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  if ((st = inputs(ctx, in, affine ? 4 : 3, a)) != NV_OK) return st;
  const void *tc = qmv ? qmv_tc(qp, out->dtype, ox->shape[1], ox->shape[2], &a[0], &a[1]) : NULL;
  nv__gpu_qmv_v2_launch v2 = {.func = NULL};
  if (qmv && !tc && ox->shape[2] > 0 &&
      (st = qmv_v2(ctx, "quantized_matmul", qp, out->dtype, ox->shape[1], ox->shape[2],
                   out->shape[2], ox->shape[0], &a[0], &a[1], false, &v2)) != NV_OK)
    return st;
  nv__gpu_quant_params p = {.mode = qp->mode,
                            .group_size = qp->group_size,
                            .bits = qp->bits,
                            .transpose = qp->transpose,
                            .wbatch = ow->shape[0] > 1,
                            .B = ox->shape[0],
                            .M = ox->shape[1],
                            .K = ox->shape[2],
                            .N = out->shape[2],
                            .R = ow->shape[1],
                            .words = ow->shape[2],
                            .groups = in[2].meta->shape[2],
                            .sdt = (int32_t)in[2].meta->dtype};
  launch_views lv = {.n = 0};
  add_view(&lv, &p, &o, HRX_ACCESS_WRITE);
  for (int i = 0; i < 3; i++) add_view(&lv, &p, &a[i], HRX_ACCESS_READ);
  add_view(&lv, &p, affine ? &a[3] : &a[2], HRX_ACCESS_READ);
  nv__gpu_launch l = {.func = func,
                      .views = lv.v,
                      .access = lv.a,
                      .nviews = lv.n,
                      .params = &p,
                      .params_size = sizeof p,
                      .aliasing = false};
  if (p.K == 0) {
    /* An empty contraction: zeros (every float dtype's zero is all zero bits). */
    return nv__gpu_fill(ctx, o.view, 0);
  }
  if (tc) {
    const int64_t rows = NV__GPU_QMV_TC_ROWS;
    int64_t blocks = (p.N + rows - 1) / rows;
    if (blocks > INT32_MAX)
      return nv__set_error(NV_ERR_UNSUPPORTED, "quantized_matmul: N = %lld is too large",
                           (long long)p.N);
    l.func = tc;
    l.grid[0] = (uint32_t)blocks;
    l.grid[1] = cap_grid(p.B);
    l.grid[2] = 1;
    l.block[0] = NV__GPU_QMV_TC_THREADS;
    l.block[1] = 1;
    l.block[2] = 1;
    l.shared_bytes = (uint32_t)(p.M * (p.K + 8) * 2);
  } else if (v2.func) {
    l.func = v2.func;
    l.grid[0] = v2.grid[0];
    l.grid[1] = v2.grid[1];
    l.grid[2] = 1;
    l.block[0] = v2.block;
    l.block[1] = 1;
    l.block[2] = 1;
  } else if (qmv) {
    int64_t rows = (int64_t)nv__gpu_qmv_rows_per_warp(p.M, p.bits) * NV__GPU_QMV_WARPS;
    int64_t blocks = (p.N + rows - 1) / rows;
    if (blocks > INT32_MAX)
      return nv__set_error(NV_ERR_UNSUPPORTED, "quantized_matmul: N = %lld is too large",
                           (long long)p.N);
    l.grid[0] = (uint32_t)blocks;
    l.grid[1] = cap_grid(p.B);
    l.grid[2] = 1;
    l.block[0] = 32 * NV__GPU_QMV_WARPS;
    l.block[1] = 1;
    l.block[2] = 1;
  } else if (gemv) {
    int64_t cols = (p.N + NV__GPU_QMM_GEMV_WARPS - 1) / NV__GPU_QMM_GEMV_WARPS;
    if (cols > INT32_MAX)
      return nv__set_error(NV_ERR_UNSUPPORTED, "quantized_matmul: N = %lld is too large",
                           (long long)p.N);
    l.grid[0] = (uint32_t)cols;
    l.grid[1] = cap_grid(p.B);
    l.grid[2] = 1;
    l.block[0] = 32;
    l.block[1] = NV__GPU_QMM_GEMV_WARPS;
    l.block[2] = 1;
  } else {
    int64_t cols = (p.N + NV__GPU_QMM_TILE - 1) / NV__GPU_QMM_TILE;
    if (cols > INT32_MAX)
      return nv__set_error(NV_ERR_UNSUPPORTED, "quantized_matmul: N = %lld is too large",
                           (long long)p.N);
    l.grid[0] = (uint32_t)cols;
    l.grid[1] = cap_grid((p.M + NV__GPU_QMM_TILE - 1) / NV__GPU_QMM_TILE);
    l.grid[2] = cap_grid(p.B);
    l.block[0] = 16;
    l.block[1] = 16;
    l.block[2] = 1;
  }
  return nv__gpu_dispatch(ctx, &l);
}

/* gather_qmm: the streaming gemv indexed by pair (the builder sends here only what it takes:
 * transposed, M <= 8, K a multiple of 32, float16, bfloat16 or float32). With sorted_indices
 * and one row of x per pair, more pairs than matrices are computed by runs of consecutive
 * pairs of one matrix (4 or 8 pairs per chunk: about L / E pairs share a matrix). */
static nv_status k_gather_qmm(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  (void)donated;
  const nv__gather_qmm_params *gp = node->params;
  const nv__quant_params *qp = &gp->q;
  nv__output *out = &node->out[0];
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  bool affine = qp->mode == NV__QMODE_AFFINE;
  int ni = node->ninputs;
  int64_t L = out->shape[0], M = ox->shape[1], E = ow->shape[0];
  int runs = gp->sorted && M == 1 && L > E ? (L >= 4 * E ? 8 : 4) : 0;
  const void *func =
      qp->transpose && M <= NV__GPU_QMM_GEMV_MAX_M && ox->shape[2] % 32 == 0
          ? nv__gpu_kernel_gather_qmv((int)out->dtype, qp->mode, qp->bits, M, runs)
          : NULL;
  if (!func)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "gather_qmm: no GPU kernel for a %s product of %lld rows per pair "
                         "(transpose=%s, K=%lld)",
                         nv_dtype_name(out->dtype), (long long)M,
                         qp->transpose ? "true" : "false", (long long)ox->shape[2]);
  nv__gpu_arg o, a[6];
  nv_status st = nv__gpu_output(ctx, out, &o);
  if (st != NV_OK || out->size == 0) return st;
  /* K == 0 needs no special case: the kernel checks the indices and stores zeros. */
  if ((st = inputs(ctx, in, ni, a)) != NV_OK) return st;
  nv__gpu_quant_params p = {.mode = qp->mode,
                            .group_size = qp->group_size,
                            .bits = qp->bits,
                            .transpose = qp->transpose,
                            .B = L,
                            .M = M,
                            .K = ox->shape[2],
                            .N = out->shape[2],
                            .R = ow->shape[1],
                            .words = ow->shape[2],
                            .groups = in[2].meta->shape[2],
                            .sdt = (int32_t)in[2].meta->dtype,
                            .Bx = ox->shape[0],
                            .E = E};
  if ((st = nv__gpu_index_check(ctx, "gather_qmm", &p.bad)) != NV_OK) return st;
  launch_views lv = {.n = 0};
  add_view(&lv, &p, &o, HRX_ACCESS_WRITE);
  for (int i = 0; i < 3; i++) add_view(&lv, &p, &a[i], HRX_ACCESS_READ);
  add_view(&lv, &p, affine ? &a[3] : &a[2], HRX_ACCESS_READ);
  add_view(&lv, &p, &a[ni - 2], HRX_ACCESS_READ);
  add_view(&lv, &p, &a[ni - 1], HRX_ACCESS_READ);
  int64_t rows =
      (int64_t)nv__gpu_qmv_rows_per_warp(runs ? runs : M, p.bits) * NV__GPU_QMV_WARPS;
  int64_t blocks = (p.N + rows - 1) / rows;
  if (blocks > INT32_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED, "gather_qmm: N = %lld is too large",
                         (long long)p.N);
  uint32_t grid = (uint32_t)blocks, block = 32 * NV__GPU_QMV_WARPS;
  uint32_t grid_y = cap_grid(runs ? (L + runs - 1) / runs : L);
  /* The split-K kernel by pair (the default; the runs kernel keeps sorted pairs). */
  nv__gpu_qmv_v2_launch v2 = {.func = NULL};
  if (!runs && p.K > 0 &&
      (st = qmv_v2(ctx, "gather_qmm", qp, out->dtype, M, p.K, p.N, L, &a[0], &a[1], true,
                   &v2)) != NV_OK)
    return st;
  if (v2.func) {
    func = v2.func;
    grid = v2.grid[0];
    grid_y = v2.grid[1];
    block = v2.block;
  }
  nv__gpu_launch l = {.func = func,
                      .grid = {grid, grid_y, 1},
                      .block = {block, 1, 1},
                      .views = lv.v,
                      .access = lv.a,
                      .nviews = lv.n,
                      .params = &p,
                      .params_size = sizeof p,
                      .aliasing = false};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_quantize(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_QUANTIZE] = k_quantize;
  k[NV__PRIM_DEQUANTIZE] = k_dequantize;
  k[NV__PRIM_QUANTIZED_MATMUL] = k_quantized_matmul;
  k[NV__PRIM_GATHER_QMM] = k_gather_qmm;
}
