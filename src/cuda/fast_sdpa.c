/* The fast family on the GPU: scaled_dot_product_attention's CUDA kernel-table entry. Host code
 * (C11): q, k and v row-contiguous (copied into scratch memory when they are not), the mask and
 * the sinks where they are (strided), then one of fast_sdpa.cu's kernels:
 *   - float16/bfloat16 with D = Dv in {64, 80, 96, 128, 256} and more than MMA_MIN_LQ queries:
 *     without a mask array or sinks, cuDNN's fused attention where it takes the node
 *     (fast_sdpa_cudnn.c: NUVEC_CUDNN_SDPA), else the tensor-core kernel (one block per 128
 *     queries of a head, 64 for D = 256);
 *   - at most NV__GPU_SDPA_DECODE_ROWS query rows per key/value head (G x Lq: decode) and
 *     D, Dv <= 256: a decode kernel, which streams k and v from global memory, its blocks over
 *     (batch, key/value head, split of the keys): the vectorized one (16-byte loads) when D and
 *     Dv are multiples of 16 bytes' elements and q, k and v are 16-byte aligned, its splits
 *     DECODE_VEC_MIN_KEYS keys at least, as many as fit the GPU's SMs in one wave of blocks;
 *     else the scalar one;
 *   - otherwise the SIMT kernel, whose blocks take the query rows of a key/value head's group
 *     and a split of the keys.
 * Where the blocks are too few to fill the GPU, the keys are split into more blocks whose
 * partials a combine kernel reduces.
 * A head size whose SIMT tiles do not fit the device's shared memory even at one row and eight
 * keys declines to the CPU. Lk = 0 writes zeros. */
#include "cuda/fast_sdpa_cudnn.h"
#include "cuda/fast_sdpa_kernels.h"
#include "cuda/gpu.h"
#include "ops/fast_sdpa.h"

enum {
  MMA_MIN_LQ = 16,      /* fewer queries per head: the SIMT kernel (decode, short chunks) */
  TARGET_BLOCKS = 528,  /* SIMT blocks that keep an H200's 132 SMs busy (4 each) */
  DECODE_BLOCKS = 2112, /* decode blocks: 16 per SM of 4 warps each */
  DECODE_MIN_KEYS = 128, /* keys per decode split at least (32 per warp) */
  /* the vectorized decode kernel: one wave of blocks (NV__GPU_SDPA_DVEC_BLOCKS_PER_SM on each
   * of an H200's SMs; each thread keeps 2 x 4 or 2 x 2 16-byte loads in flight), splits of
   * whole 64-key blocks, 256 keys at least */
  SMS = 132,
  DECODE_VEC_GRAIN = 64,
  DECODE_VEC_MIN_KEYS = 256,
  MAX_SPLITS = NV__GPU_SDPA_MAX_SPLITS,
};

/* Whether operand argument `a` (row-contiguous) starts on a 16-byte boundary. */
static bool aligned16(const nv__gpu_arg *a, size_t esize) {
  return (a->view.offset + (size_t)a->offset * esize) % 16 == 0;
}

static nv_status launch(nv__gpu_ctx *ctx, const void *func, int64_t blocks, uint32_t smem,
                        const hrx_view *views, const hrx_access *acc,
                        const nv__gpu_sdpa_params *p) {
  if (blocks > INT32_MAX)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "scaled_dot_product_attention: %lld blocks exceed the grid's limit",
                         (long long)blocks);
  if (smem > 48 * 1024) {
    uint32_t limit = 0;
    int e = nv__gpu_sdpa_prepare(func, nv__gpu_device_index(ctx), &limit);
    if (e != 0)
      return nv__set_error(NV_ERR_BACKEND,
                           "scaled_dot_product_attention: raising the shared memory limit "
                           "failed (CUDA error %d)",
                           e);
    if (smem > limit)
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "scaled_dot_product_attention: %u bytes of shared memory exceed the "
                           "device's %u",
                           smem, limit);
  }
  nv__gpu_launch l = {.func = func,
                      .grid = {(uint32_t)blocks, 1, 1},
                      .block = {NV__GPU_SDPA_THREADS, 1, 1},
                      .shared_bytes = smem,
                      .views = views,
                      .access = acc,
                      .nviews = NV__GPU_SDPA_VIEWS,
                      .params = p,
                      .params_size = sizeof *p,
                      .aliasing = false};
  return nv__gpu_dispatch(ctx, &l);
}

/* The SIMT kernel's tiles from `r` rows (at most 16) and 32 keys (64 for at most 4 rows:
 * decode), halved until they fit `limit` bytes of shared memory; false if even 1 row and 8
 * keys do not. */
static bool simt_tiles(int r, int D, int Dv, uint32_t limit, int *rows, int *keys) {
  int k = r <= 4 ? 64 : 32;
  while (nv__gpu_sdpa_simt_smem(r, k, D, Dv) > limit && k > 8) k /= 2;
  while (nv__gpu_sdpa_simt_smem(r, k, D, Dv) > limit && r > 1) r /= 2;
  *rows = r;
  *keys = k;
  return nv__gpu_sdpa_simt_smem(r, k, D, Dv) <= limit;
}

static nv_status k_sdpa(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__sdpa_params *prm = node->params;
  nv__output *out = &node->out[0];
  nv_dtype dt = out->dtype;
  const int *qs = in[0].meta->shape, *ks = in[1].meta->shape;
  nv__gpu_sdpa_params p = {.B = qs[0], .Hq = qs[1], .Lq = qs[2], .D = qs[3], .Hkv = ks[1],
                           .Lk = ks[2], .Dv = in[2].meta->shape[3], .causal = prm->causal,
                           .mask = prm->mask, .sinks = prm->sinks, .scale = prm->scale};
  p.G = p.Hq / p.Hkv;
  const void *simt = nv__gpu_sdpa_simt((int)dt);
  if (!simt)
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "scaled_dot_product_attention: dtype %s is not supported on the GPU",
                         nv_dtype_name(dt));
  const int64_t nflat = (int64_t)p.Lq * p.G;
  int rows = 0, keys = 0;
  const void *mma = p.D == p.Dv && p.Lq > MMA_MIN_LQ ? nv__gpu_sdpa_mma((int)dt, p.D) : NULL;
  const void *decode = !mma && nflat <= NV__GPU_SDPA_DECODE_ROWS
                           ? nv__gpu_sdpa_decode((int)dt, p.D > p.Dv ? p.D : p.Dv)
                           : NULL;
  if (!mma && !decode && out->size > 0 && p.Lk > 0) {
    /* the SIMT tiles within the opt-in limit (asked before anything is recorded) */
    uint32_t limit = 48 * 1024;
    int r0 = nflat < 16 ? (int)nflat : 16;
    uint32_t need = nv__gpu_sdpa_simt_smem(r0, r0 <= 4 ? 64 : 32, p.D, p.Dv);
    if (need > limit) {
      int e = nv__gpu_sdpa_prepare(simt, nv__gpu_device_index(ctx), &limit);
      if (e != 0)
        return nv__set_error(NV_ERR_BACKEND,
                             "scaled_dot_product_attention: raising the shared memory limit "
                             "failed (CUDA error %d)",
                             e);
    }
    if (!simt_tiles(r0, p.D, p.Dv, limit, &rows, &keys))
      return NV__GPU_DECLINED;
  }
  nv__gpu_arg a[NV__GPU_SDPA_VIEWS];
  nv_status st = nv__gpu_output(ctx, out, &a[NV__GPU_SDPA_OUT]);
  if (st != NV_OK || out->size == 0) return st;
  if (p.Lk == 0) return nv__gpu_fill(ctx, a[NV__GPU_SDPA_OUT].view, 0);
  if (mma && !prm->sinks && prm->mask == NV__SDPA_MASK_NONE) {
    /* cuDNN's fused attention where it takes the node (fast_sdpa_cudnn.c), else sdpa_mma */
    st = nv__gpu_sdpa_cudnn(ctx, node, in, a[NV__GPU_SDPA_OUT]);
    if (st != NV__GPU_DECLINED) return st;
    st = NV_OK;
  }
  for (int i = 0; i < 3 && st == NV_OK; i++)
    st = nv__gpu_input_contiguous(ctx, &in[i], &a[NV__GPU_SDPA_Q + i]);
  int n = 3;
  a[NV__GPU_SDPA_MASK] = a[NV__GPU_SDPA_SINKS] = a[NV__GPU_SDPA_PART] = a[NV__GPU_SDPA_Q];
  if (st == NV_OK && prm->mask != NV__SDPA_MASK_NONE) {
    const nv__output *mm = in[n].meta;
    p.mask_dtype = (int32_t)mm->dtype;
    for (int i = 0; i < 4; i++) p.mst[i] = mm->strides[i];
    st = nv__gpu_input(ctx, &in[n++], &a[NV__GPU_SDPA_MASK]);
  }
  if (st == NV_OK && prm->sinks) {
    p.sst = in[n].meta->strides[0];
    st = nv__gpu_input(ctx, &in[n++], &a[NV__GPU_SDPA_SINKS]);
  }
  if (st != NV_OK) return st;
  const void *dvec = NULL;
  if (decode) {
    const size_t es = nv_dtype_size(dt);
    const int ve = (int)(16 / es);
    if (p.D % ve == 0 && p.Dv % ve == 0 && aligned16(&a[NV__GPU_SDPA_Q], es) &&
        aligned16(&a[NV__GPU_SDPA_K], es) && aligned16(&a[NV__GPU_SDPA_V], es))
      dvec = nv__gpu_sdpa_decode_vec((int)dt, p.D > p.Dv ? p.D : p.Dv, (int)nflat);
  }
  hrx_view views[NV__GPU_SDPA_VIEWS];
  hrx_access acc[NV__GPU_SDPA_VIEWS];
  for (int i = 0; i < NV__GPU_SDPA_VIEWS; i++) acc[i] = HRX_ACCESS_READ;
  acc[NV__GPU_SDPA_OUT] = HRX_ACCESS_WRITE;

  if (mma) {
    for (int i = 0; i < NV__GPU_SDPA_VIEWS; i++) {
      p.off[i] = a[i].offset;
      views[i] = a[i].view;
    }
    int64_t rows_per_block = nv__gpu_sdpa_mma_rows(p.D);
    int64_t ntq = (p.Lq + rows_per_block - 1) / rows_per_block;
    return launch(ctx, mma, (int64_t)p.B * p.Hq * ntq, nv__gpu_sdpa_mma_smem(p.D), views, acc,
                  &p);
  }

  int64_t base, target, nsplit = 1, kblocks, most = -1;
  if (decode) {
    p.rows = (int32_t)nflat;
    base = (int64_t)p.B * p.Hkv;
    target = DECODE_BLOCKS;
    keys = DECODE_MIN_KEYS;
    if (dvec) {
      /* the most splits whose blocks all run at once */
      const int mr = nflat == 1 ? 1 : nflat == 2 ? 2 : 4;
      const int nc = dt == NV_DTYPE_FLOAT32 && (p.D > 128 || p.Dv > 128) ? 2 : 1;
      target = (int64_t)SMS * NV__GPU_SDPA_DVEC_BLOCKS_PER_SM(mr, nc) / base * base;
      keys = DECODE_VEC_GRAIN;
      most = p.Lk / DECODE_VEC_MIN_KEYS > 1 ? p.Lk / DECODE_VEC_MIN_KEYS : 1;
    }
  } else {
    p.rows = rows;
    p.keys = keys;
    p.tpd = 1;
    while (p.tpd < 32 && 2 * p.tpd <= p.D &&
           (int64_t)rows * keys * p.tpd < NV__GPU_SDPA_THREADS)
      p.tpd *= 2;
    p.ntiles = (int32_t)((nflat + rows - 1) / rows);
    base = (int64_t)p.B * p.Hkv * p.ntiles;
    target = TARGET_BLOCKS;
  }
  kblocks = (p.Lk + keys - 1) / keys;
  if (most < 0) most = kblocks; /* one key block per split at least */
  if (base < target) {
    nsplit = (target + base - 1) / base;
    if (nsplit > most) nsplit = most;
    if (nsplit > MAX_SPLITS) nsplit = MAX_SPLITS;
  }
  /* whole key blocks per split, then the splits those need */
  int64_t per = (kblocks + nsplit - 1) / nsplit;
  p.split_len = (int32_t)(per * keys);
  p.nsplit = (int32_t)((p.Lk + p.split_len - 1) / p.split_len);
  const void *pass = dvec ? dvec : decode ? decode : simt;
  uint32_t smem = decode ? 0 : nv__gpu_sdpa_simt_smem(rows, keys, p.D, p.Dv);
  if (p.nsplit > 1) {
    hrx_view scratch;
    size_t bytes = (size_t)out->size / (size_t)p.Dv * (size_t)p.nsplit *
                   (size_t)NV__GPU_SDPA_PART_FLOATS(p.Dv) * sizeof(float);
    st = nv__gpu_scratch(ctx, bytes, &scratch);
    if (st != NV_OK) return st;
    a[NV__GPU_SDPA_PART] = (nv__gpu_arg){scratch, 0};
  }
  for (int i = 0; i < NV__GPU_SDPA_VIEWS; i++) {
    p.off[i] = a[i].offset;
    views[i] = a[i].view;
  }
  if (p.nsplit == 1) return launch(ctx, pass, base, smem, views, acc, &p);
  /* the partial pass writes the partials (and not the output) */
  acc[NV__GPU_SDPA_OUT] = HRX_ACCESS_READ;
  acc[NV__GPU_SDPA_PART] = HRX_ACCESS_WRITE;
  views[NV__GPU_SDPA_OUT] = views[NV__GPU_SDPA_Q];
  p.off[NV__GPU_SDPA_OUT] = p.off[NV__GPU_SDPA_Q];
  st = launch(ctx, pass, base * p.nsplit, smem, views, acc, &p);
  if (st != NV_OK) return st;
  acc[NV__GPU_SDPA_OUT] = HRX_ACCESS_WRITE;
  acc[NV__GPU_SDPA_PART] = HRX_ACCESS_READ;
  views[NV__GPU_SDPA_OUT] = a[NV__GPU_SDPA_OUT].view;
  p.off[NV__GPU_SDPA_OUT] = a[NV__GPU_SDPA_OUT].offset;
  /* one combine block per output row */
  return launch(ctx, nv__gpu_sdpa_combine((int)dt), (int64_t)out->size / p.Dv, 0, views, acc,
                &p);
}

void nv__gpu_register_fast_sdpa(nv__gpu_kernel_fn *k) { k[NV__PRIM_FAST_SDPA] = k_sdpa; }
