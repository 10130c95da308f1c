/* paged_attention's CUDA kernel-table entry (host code, C11). The builder hands q, the pools,
 * the block tables and the context lengths row-contiguous. The node gets an index-check record
 * (a bad context length or block id fails it, as on the CPU), then:
 *   - decode (one query token per sequence) with at most NV__GPU_SDPA_DECODE_ROWS query heads
 *     per key/value head, float16/bfloat16/float32, D and Dv <= 256 and multiples of 16 bytes'
 *     elements, q and the pools 16-byte aligned: SDPA's vectorized decode kernel in its paged
 *     form (fast_sdpa.cu: k and v rows fetched through the block table), blocks over
 *     (sequence, key/value head, split of the keys), split as SDPA's decode splits its keys
 *     (by the table's capacity M x BS, the context lengths being on the device), its combine
 *     kernel reducing the splits;
 *   - otherwise (chunked prefill, larger groups, float64, other head sizes) the general kernel
 *     of fast_paged.cu: a block per (query row, split of the keys).
 * A head size whose general-kernel tiles exceed 48 KiB of shared memory declines to the CPU. */
#include "cuda/fast_paged_kernels.h"
#include "cuda/fast_sdpa_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_paged.h"

enum {
  SMS = 132,              /* an H200's SMs */
  ROW_BLOCKS = 528,       /* general-kernel blocks that keep them busy (4 each) */
  KEY_GRAIN = 64,         /* splits take whole runs of 64 keys */
  MIN_SPLIT_KEYS = 256,   /* keys a split at least */
  SMEM_LIMIT = 48 * 1024, /* the general kernel's shared memory without opt-in */
};

static bool aligned16(const nv__gpu_arg *a, size_t esize) {
  return (a->view.offset + (size_t)a->offset * esize) % 16 == 0;
}

static nv_status launch(nv__gpu_ctx *ctx, const void *func, int64_t blocks, uint32_t threads,
                        uint32_t smem, const hrx_view *views, const hrx_access *acc,
                        const void *params, size_t size) {
  if (blocks > INT32_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "paged_attention: %lld blocks exceed the grid's limit",
                         (long long)blocks);
  nv__gpu_launch l = {.func = func,
                      .grid = {(uint32_t)blocks, 1, 1},
                      .block = {threads, 1, 1},
                      .shared_bytes = smem,
                      .views = views,
                      .access = acc,
                      .nviews = NV__GPU_PATTN_VIEWS,
                      .params = params,
                      .params_size = size,
                      .aliasing = false};
  return nv__gpu_dispatch(ctx, &l);
}

/* The splits of `cap` keys for `base` blocks to reach `target` blocks: whole KEY_GRAIN runs,
 * MIN_SPLIT_KEYS keys a split at least, NV__GPU_SDPA_MAX_SPLITS at most. *len gets the keys
 * a split (at least 1). */
static int splits(int64_t cap, int64_t base, int64_t target, int64_t *len) {
  const int64_t runs = (cap + KEY_GRAIN - 1) / KEY_GRAIN;
  int64_t n = 1, most = cap / MIN_SPLIT_KEYS > 1 ? cap / MIN_SPLIT_KEYS : 1;
  if (base < target) {
    n = (target + base - 1) / base;
    if (n > most) n = most;
    if (n > NV__GPU_SDPA_MAX_SPLITS) n = NV__GPU_SDPA_MAX_SPLITS;
  }
  const int64_t per = runs > 0 ? (runs + n - 1) / n : 1;
  *len = per * KEY_GRAIN;
  return cap > 0 ? (int)((cap + *len - 1) / *len) : 1;
}

/* Records the two passes (first into the partials, then the combine into the output) or the
 * one pass, over views a (NV__GPU_PATTN_VIEWS of them, the part view set when nsplit > 1). */
static nv_status passes(nv__gpu_ctx *ctx, const void *first, const void *combine, int64_t blocks,
                        int64_t rows, int nsplit, uint32_t smem, nv__gpu_arg *a, int64_t *off,
                        void *params, size_t size) {
  hrx_view views[NV__GPU_PATTN_VIEWS];
  hrx_access acc[NV__GPU_PATTN_VIEWS];
  for (int i = 0; i < NV__GPU_PATTN_VIEWS; i++) {
    views[i] = a[i].view;
    off[i] = a[i].offset;
    acc[i] = HRX_ACCESS_READ;
  }
  acc[NV__GPU_PATTN_OUT] = HRX_ACCESS_WRITE;
  if (nsplit == 1)
    return launch(ctx, first, blocks, NV__GPU_PATTN_THREADS, smem, views, acc, params, size);
  /* the first pass writes the partials, and not the output */
  acc[NV__GPU_PATTN_OUT] = HRX_ACCESS_READ;
  acc[NV__GPU_PATTN_PART] = HRX_ACCESS_WRITE;
  views[NV__GPU_PATTN_OUT] = views[NV__GPU_PATTN_Q];
  off[NV__GPU_PATTN_OUT] = off[NV__GPU_PATTN_Q];
  nv_status st =
      launch(ctx, first, blocks * nsplit, NV__GPU_PATTN_THREADS, smem, views, acc, params, size);
  if (st != NV_OK) return st;
  acc[NV__GPU_PATTN_OUT] = HRX_ACCESS_WRITE;
  acc[NV__GPU_PATTN_PART] = HRX_ACCESS_READ;
  views[NV__GPU_PATTN_OUT] = a[NV__GPU_PATTN_OUT].view;
  off[NV__GPU_PATTN_OUT] = a[NV__GPU_PATTN_OUT].offset;
  return launch(ctx, combine, rows, NV__GPU_PATTN_THREADS, 0, views, acc, params, size);
}

static nv_status k_paged_attention(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                   int donated) {
  (void)donated; /* paged_attention donates nothing (D_NONE) */
  nv__output *out = &node->out[0];
  const nv_dtype dt = out->dtype;
  const int *qs = in[0].meta->shape, *ks = in[1].meta->shape;
  const int T = qs[0], Hq = qs[1], D = qs[2], NB = ks[0], BS = ks[1], Hkv = ks[2];
  const int Dv = in[2].meta->shape[3], S = in[3].meta->shape[0], M = in[3].meta->shape[1];
  const int c = S > 0 ? T / S : 0, G = Hq / Hkv;
  const int64_t cap = (int64_t)M * BS, rows = (int64_t)T * Hq;
  const void *general = nv__gpu_pattn_rows((int)dt);
  if (!general)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "paged_attention: dtype %s is not supported on the GPU",
                         nv_dtype_name(dt));
  const uint32_t smem = nv__gpu_pattn_smem((int)dt, D, Dv);
  /* (the decode kernel's head sizes keep the general kernel's tiles within the limit too, so
   * nothing declines once memory is asked for) */
  const bool decode = c == 1 && G <= NV__GPU_SDPA_DECODE_ROWS && D > 0 && Dv > 0 && D <= 256 &&
                      Dv <= 256 && dt != NV_DTYPE_FLOAT64 && cap <= INT32_MAX - KEY_GRAIN &&
                      (int64_t)NB * BS <= INT32_MAX;
  if (smem > SMEM_LIMIT) return NV__GPU_DECLINED;
  nv__gpu_arg a[NV__GPU_PATTN_VIEWS];
  nv_status st = nv__gpu_output(ctx, out, &a[NV__GPU_PATTN_OUT]);
  if (st != NV_OK || out->size == 0) return st; /* an empty result reads nothing */
  for (int i = 0; i < 5 && st == NV_OK; i++)
    st = nv__gpu_input_contiguous(ctx, &in[i], &a[NV__GPU_PATTN_Q + i]);
  nv__gpu_bad *bad = NULL;
  if (st == NV_OK) st = nv__gpu_index_check(ctx, "paged_attention", &bad);
  if (st != NV_OK) return st;
  a[NV__GPU_PATTN_PART] = a[NV__GPU_PATTN_Q];
  const size_t es = nv_dtype_size(dt);
  const void *dvec = NULL;
  if (decode && D % (int)(16 / es) == 0 && Dv % (int)(16 / es) == 0 &&
      aligned16(&a[NV__GPU_PATTN_Q], es) && aligned16(&a[NV__GPU_PATTN_K], es) &&
      aligned16(&a[NV__GPU_PATTN_V], es))
    dvec = nv__gpu_sdpa_decode_vec_paged((int)dt, D > Dv ? D : Dv, G);
  int64_t len = 0;
  int nsplit;
  const size_t csize = dt == NV_DTYPE_FLOAT64 ? sizeof(double) : sizeof(float);
  if (dvec) {
    /* SDPA's decode split: the most splits whose blocks all run at once */
    const int64_t base = (int64_t)S * Hkv;
    const int mr = G == 1 ? 1 : G == 2 ? 2 : 4;
    const int nc = dt == NV_DTYPE_FLOAT32 && (D > 128 || Dv > 128) ? 2 : 1;
    const int64_t target = (int64_t)SMS * NV__GPU_SDPA_DVEC_BLOCKS_PER_SM(mr, nc) / base * base;
    nsplit = splits(cap, base, target, &len);
  } else {
    nsplit = splits(cap, rows, ROW_BLOCKS, &len);
  }
  if (nsplit > 1) {
    hrx_view scratch;
    st = nv__gpu_scratch(ctx, (size_t)rows * (size_t)nsplit * (size_t)(Dv + 2) * csize, &scratch);
    if (st != NV_OK) return st;
    a[NV__GPU_PATTN_PART] = (nv__gpu_arg){scratch, 0};
  }
  if (dvec) {
    /* the views line up with SDPA's: out, q, k, v, mask = the tables, sinks = the lengths,
     * part */
    const float scale = ((const nv__paged_params *)node->params)->scale;
    nv__gpu_sdpa_params p = {.B = S, .Hq = Hq, .Hkv = Hkv, .G = G, .Lq = 1, .Lk = (int32_t)cap,
                             .D = D, .Dv = Dv, .scale = scale, .rows = G, .nsplit = nsplit,
                             .split_len = (int32_t)len, .paged = 1, .BS = BS, .M = M, .NB = NB,
                             .bad = bad};
    return passes(ctx, dvec, nv__gpu_sdpa_combine((int)dt), (int64_t)S * Hkv, rows, nsplit, 0, a,
                  p.off, &p, sizeof p);
  }
  nv__gpu_pattn_params p = {.cap = cap, .T = T, .Hq = Hq, .Hkv = Hkv, .G = G, .D = D, .Dv = Dv,
                            .BS = BS, .M = M, .NB = NB, .c = c, .nsplit = nsplit,
                            .split_len = len,
                            .scale = ((const nv__paged_params *)node->params)->scale,
                            .bad = bad};
  return passes(ctx, general, nv__gpu_pattn_combine((int)dt), rows, rows, nsplit, smem, a, p.off,
                &p, sizeof p);
}

void nv__gpu_register_fast_paged(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_FAST_PAGED_ATTENTION] = k_paged_attention;
}
