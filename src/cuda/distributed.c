/* CUDA kernels of the distributed family (DESIGN §10, seed 004 D2/D32/D33). The ring and MPI
 * backends move host memory, so a collective on a GPU stream is recorded as three operations
 * of the evaluation's graph: a copy of the row-contiguous input into pinned host staging, an
 * hrx host callback that runs the collective there (on an hrx host worker, once the producing
 * GPU work has finished: the evaluating thread never waits), and a copy of the result from
 * staging into the output's device memory. GPU readers of the output are ordered after the
 * last copy by hrx's declared accesses, so they wait on the GPU side. The callback runs the
 * collective under the group's order lock like the CPU kernel, and a failure (a lost peer, a
 * closed group) fails the run, hence the output and the work that reads it. On an NCCL group
 * all_sum/max/min, all_gather and sum_scatter are instead one NCCL call captured into the graph
 * over the device views (nv__gpu_captured; src/distributed/nccl.c). sum_gradients' output
 * shares its input (no work). */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/gpu.h"
#include "distributed/dist_ops.h"

/* The host callback's job: the collective and where its input and output lie in staging. */
typedef struct gpu_job {
  nv__dist_job job;
  size_t in_at, out_at; /* byte offsets in the staging buffer */
  nv__gpu_note *note;   /* where a failure's status and message go (the submission's error) */
} gpu_job;

static hrx_status run_job(const hrx_callback_view *views, size_t count, void *user) {
  const gpu_job *g = user;
  if (count != 1) return HRX_E_CALLBACK;
  char *host = views[0].address;
  nv_status st = nv__dist_run(&g->job, g->job.prim == NV__PRIM_RECV ? NULL : host + g->in_at,
                              host + g->out_at);
  if (st == NV_OK) return HRX_OK;
  nv__gpu_note_fail(g->note, st, "%s", nv_last_error());
  return HRX_E_CALLBACK;
}

static void free_job(void *user) {
  gpu_job *g = user;
  if (g) nv__gpu_note_release(g->note);
  nv__free(g);
}

/* Keeps pinned staging until the recording's submission is published (as uploads do). */
static nv_status keep_staging(nv__gpu_ctx *ctx, nv__pinned p) {
  if (ctx->nstaging == ctx->cstaging) {
    size_t nc = ctx->cstaging ? ctx->cstaging * 2 : 16;
    nv__pinned *np = realloc(ctx->staging, nc * sizeof *np); /* backend.c frees it with free */
    if (!np) {
      hrx_buffer_release(p.hb);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording a collective");
    }
    ctx->staging = np;
    ctx->cstaging = nc;
  }
  ctx->staging[ctx->nstaging++] = p;
  return NV_OK;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- NCCL groups: the collective captured into the graph ---- */

typedef struct nccl_job {
  void *comm;
  int prim;
  nv_dtype dtype;
  size_t count;
  bool in_place; /* one binding, read and written */
  nv__gpu_note *note;
} nccl_job;

static hrx_status capture_nccl(const hrx_callback_view *views, size_t count, void *stream,
                               void *user) {
  const nccl_job *j = user;
  const void *send = views[0].address;
  void *recv = views[count - 1].address;
  nv_status st = nv__nccl_enqueue(j->comm, j->prim, j->dtype, send, recv, j->count, stream);
  if (st == NV_OK) return HRX_OK;
  nv__gpu_note_fail(j->note, st, "%s", nv_last_error());
  return HRX_E_CALLBACK;
}

static void free_nccl(void *user) {
  nccl_job *j = user;
  if (j) nv__gpu_note_release(j->note);
  nv__free(j);
}

/* The collective as one NCCL call over the input and output device views (the same view when
 * the output took over the input's buffer). */
static nv_status record_nccl(nv__gpu_ctx *ctx, nv__node *node, void *comm, nv__gpu_arg src,
                             nv__gpu_arg dst, size_t in_bytes, size_t out_bytes) {
  size_t isz = nv_dtype_size(node->out[0].dtype);
  hrx_view in = hrx_view_make(src.view.buffer, src.view.offset + (size_t)src.offset * isz, in_bytes);
  hrx_view out = hrx_view_make(dst.view.buffer, dst.view.offset + (size_t)dst.offset * isz, out_bytes);
  nccl_job *j = nv__malloc(sizeof *j);
  if (!j) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording a collective");
  bool same = in.buffer == out.buffer && in.offset == out.offset;
  *j = (nccl_job){comm, node->prim, node->out[0].dtype,
                  node->prim == NV__PRIM_SUM_SCATTER ? out_bytes / isz : in_bytes / isz, same,
                  nv__gpu_note_take(ctx)};
  hrx_binding b[2] = {{in, same ? HRX_ACCESS_READ_WRITE : HRX_ACCESS_READ},
                      {out, HRX_ACCESS_WRITE}};
  struct {
    void *comm;
    int prim, dtype;
    size_t count;
  } key = {comm, j->prim, (int)j->dtype, j->count};
  return nv__gpu_captured(ctx, b, same ? 1 : 2, capture_nccl, j, free_nccl, &key, sizeof key);
}

static nv_status k_collective(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                              int donated) {
  (void)donated; /* a donated buffer is the output's device memory (nv__gpu_output) */
  const char *op = nv__prims[node->prim].name;
  nv__output *o = &node->out[0];
  size_t isz = nv_dtype_size(o->dtype);
  size_t in_bytes = node->ninputs ? (size_t)in[0].meta->size * isz : 0;
  size_t out_bytes = (size_t)o->size * isz;
  nv__gpu_arg src = {0}, dst = {0};
  nv_status st = NV_OK;
  if (node->ninputs && in_bytes) st = nv__gpu_input_contiguous(ctx, &in[0], &src);
  if (st == NV_OK) st = nv__gpu_output(ctx, o, &dst);
  if (st == NV_OK) st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  const nv__dist_params *prm = node->params;
  void *nccl = in_bytes && out_bytes
                   ? nv__nccl_comm_for(prm->group, node->prim, o->dtype, nv__gpu_device_index(ctx))
                   : NULL;
  if (nccl) return record_nccl(ctx, node, nccl, src, dst, in_bytes, out_bytes);
  gpu_job *job = nv__calloc(1, sizeof *job);
  if (job && !(job->note = nv__gpu_note_take(ctx))) {
    nv__free(job);
    job = NULL;
  }
  if (!job) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  nv__dist_job_of(node, &job->job);
  job->in_at = 0;
  job->out_at = round64(in_bytes);
  nv__pinned p;
  if ((st = nv__gpu_pinned_get(ctx->dev, job->out_at + out_bytes + 1, &p)) != NV_OK ||
      (st = keep_staging(ctx, p)) != NV_OK) {
    free_job(job);
    return st;
  }
  hrx_status hs = HRX_OK;
  if (in_bytes)
    hs = hrx_graph_copy(ctx->g, hrx_view_make(p.hb, 0, in_bytes),
                        hrx_view_make(src.view.buffer, src.view.offset + (size_t)src.offset * isz,
                                      in_bytes),
                        NULL);
  if (hs != HRX_OK) {
    free_job(job);
    return nv__gpu_hrx_error(hs, "recording a collective's input copy");
  }
  hrx_binding b = {hrx_view_make(p.hb, 0, job->out_at + out_bytes + 1), HRX_ACCESS_READ_WRITE};
  hs = hrx_graph_host(ctx->g, &b, 1, run_job, job, free_job, NULL);
  if (hs != HRX_OK) {
    free_job(job); /* the caller keeps user data when recording fails */
    return nv__gpu_hrx_error(hs, "recording a collective");
  }
  if (out_bytes)
    hs = hrx_graph_copy(ctx->g,
                        hrx_view_make(dst.view.buffer, dst.view.offset + (size_t)dst.offset * isz,
                                      out_bytes),
                        hrx_view_make(p.hb, job->out_at, out_bytes), NULL);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording a collective's output copy");
  nv__gpu_hash(ctx, 0x64697374ull + (uint64_t)node->prim);
  nv__gpu_hash_buffer(ctx, p.hb);
  if (in_bytes) nv__gpu_hash_buffer(ctx, src.view.buffer);
  nv__gpu_hash_buffer(ctx, dst.view.buffer);
  ctx->nops += 3;
  return NV_OK;
}

void nv__gpu_register_distributed(nv__gpu_kernel_fn *k);
void nv__gpu_register_distributed(nv__gpu_kernel_fn *k) {
  k[NV__PRIM_ALL_SUM] = k_collective;
  k[NV__PRIM_ALL_MAX] = k_collective;
  k[NV__PRIM_ALL_MIN] = k_collective;
  k[NV__PRIM_ALL_GATHER] = k_collective;
  k[NV__PRIM_SUM_SCATTER] = k_collective;
  k[NV__PRIM_SEND] = k_collective;
  k[NV__PRIM_RECV] = k_collective;
  k[NV__PRIM_SUM_GRADIENTS] = nv__gpu_share_inputs;
}
