/* CUDA kernels of the distributed family (DESIGN §10, seed 004 D2/D32/D33). The ring and MPI
 * backends move host memory, so a collective on a GPU stream is recorded as three operations
 * of the evaluation's graph: a copy of the row-contiguous input into pinned host staging, an
 * hrx host callback that runs the collective there (on an hrx host worker, once the producing
 * GPU work has finished: the evaluating thread never waits), and a copy of the result from
 * staging into the output's device memory. GPU readers of the output are ordered after the
 * last copy by hrx's declared accesses, so they wait on the GPU side. The callback runs the
 * collective in its group's program order like the CPU kernel, and a failure (a lost peer, a
 * closed group) fails the run, hence the output and the work that reads it.
 *
 * Program order across streams (D31): a host collective takes its group's ticket when its
 * recording is submitted, in recording order, under one lock held across the submission, and
 * every host collective of a device also writes that device's one order token, so hrx runs
 * them in submission order too: hrx's single host worker then never holds a callback whose turn
 * comes after one queued behind it. A CPU-stream collective submits its evaluation's open GPU
 * work before taking its ticket (src/distributed/ops.c), so it runs after the GPU-stream ones
 * recorded before it. A submitted collective whose run ended without it (GPU work before it
 * failed) gives its ticket up, found by polling the submissions' completions while a ticket
 * waits, and the group is failed: the peers ran it. On an NCCL group
 * all_sum/max/min, all_gather and sum_scatter are instead one NCCL call captured into the graph
 * over the device views (nv__gpu_captured; src/distributed/nccl.c). sum_gradients' output
 * shares its input (no work). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/gpu.h"
#include "distributed/dist_internal.h"
#include "distributed/dist_ops.h"

/* ---- Tickets of host collectives ---- */

enum { CELL_RECORDED, CELL_TICKET, CELL_SETTLED };

/* A host collective's place in its group's order, shared by its job and its recording's batch
 * (either may go first). `state` moves RECORDED -> TICKET when the recording is submitted, and
 * to SETTLED exactly once: run by the callback or given up. */
typedef struct dist_cell {
  atomic_int refs;
  atomic_int state;
  nv_group group;
  uint64_t ticket;
} dist_cell;

static void cell_release(dist_cell *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) nv__free(c);
}

/* A recording's host collectives (nv__gpu_ctx.dist), then its submission's until it ended. */
struct nv__gpu_dist {
  dist_cell **cells;
  size_t n, cap;
  bool locked; /* holds submit_lock (nv__gpu_dist_submitting) */
  hrx_completion *c;
  struct nv__gpu_dist *next;
};

static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER; /* `submitted` */
static struct nv__gpu_dist *submitted;

static void batch_free(struct nv__gpu_dist *b) {
  for (size_t i = 0; i < b->n; i++) cell_release(b->cells[i]);
  hrx_completion_release(b->c);
  nv__free(b->cells);
  nv__free(b);
}

/* Gives up the batch's tickets that were never run (their run ended, or never began). */
static void batch_settle(struct nv__gpu_dist *b, const char *why) {
  for (size_t i = 0; i < b->n; i++) {
    int want = CELL_TICKET;
    if (atomic_compare_exchange_strong(&b->cells[i]->state, &want, CELL_SETTLED))
      nv__group_cancel(b->cells[i]->group, b->cells[i]->ticket, why);
  }
}

/* The progress hook (nv__dist_set_progress): settles the batches whose runs have ended. */
static void poll_submitted(void) {
  pthread_mutex_lock(&list_lock);
  struct nv__gpu_dist *done = NULL, **at = &submitted;
  while (*at) {
    struct nv__gpu_dist *b = *at;
    int fin = 0;
    if (hrx_completion_poll(b->c, &fin) != HRX_OK || fin) {
      *at = b->next;
      b->next = done;
      done = b;
    } else {
      at = &b->next;
    }
  }
  pthread_mutex_unlock(&list_lock);
  while (done) {
    struct nv__gpu_dist *b = done;
    done = b->next;
    batch_settle(b, "a collective did not run: the GPU work before it failed, and the peers "
                    "ran it");
    batch_free(b);
  }
}

static pthread_once_t progress_once = PTHREAD_ONCE_INIT;
static void install_progress(void) { nv__dist_set_progress(poll_submitted); }

/* Adds a host collective's cell to the open recording's batch. */
static nv_status batch_add(nv__gpu_ctx *ctx, dist_cell *cell) {
  struct nv__gpu_dist *b = ctx->dist;
  if (!b && !(b = ctx->dist = nv__calloc(1, sizeof *b)))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording a collective");
  if (b->n == b->cap) {
    size_t nc = b->cap ? 2 * b->cap : 4;
    dist_cell **nb = nv__realloc(b->cells, nc * sizeof *nb);
    if (!nb) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording a collective");
    b->cells = nb;
    b->cap = nc;
  }
  atomic_fetch_add(&cell->refs, 1);
  b->cells[b->n++] = cell;
  return NV_OK;
}

void nv__gpu_dist_submitting(nv__gpu_ctx *ctx) {
  struct nv__gpu_dist *b = ctx->dist;
  if (!b) return;
  pthread_mutex_lock(&submit_lock);
  b->locked = true;
  for (size_t i = 0; i < b->n; i++) {
    dist_cell *cell = b->cells[i];
    if (atomic_load(&cell->state) != CELL_RECORDED) continue; /* its recording failed */
    /* A group closed since: no ticket, the callback runs unordered and fails saying so. */
    if (nv__group_reserve(cell->group, "collective", &cell->ticket) == NV_OK)
      atomic_store(&cell->state, CELL_TICKET);
    else
      nv_clear_error();
  }
}

void nv__gpu_dist_submitted(nv__gpu_ctx *ctx, hrx_completion *c) {
  struct nv__gpu_dist *b = ctx->dist;
  if (!b) return;
  ctx->dist = NULL;
  bool locked = b->locked;
  if (c) {
    b->c = hrx_completion_retain(c);
    pthread_mutex_lock(&list_lock);
    b->next = submitted;
    submitted = b;
    pthread_mutex_unlock(&list_lock);
  } else {
    batch_settle(b, "a collective did not run: the GPU work holding it could not be submitted");
    batch_free(b);
  }
  if (locked) pthread_mutex_unlock(&submit_lock);
  if (c) poll_submitted(); /* frees the batches of runs that have ended */
}

/* The device's order token: a small host buffer every host collective of the device writes. */
static nv_status order_token(nv__gpu_ctx *ctx, hrx_buffer **out) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static hrx_buffer *tokens[NV__GPU_MAX_DEVICES];
  int i = nv__gpu_device_index(ctx);
  nv_status st = NV_OK;
  pthread_mutex_lock(&lock);
  if (!tokens[i]) {
    nv__pinned p;
    st = nv__gpu_pinned_get(ctx->dev, 64, &p);
    if (st == NV_OK) tokens[i] = p.hb; /* kept for the process's life */
  }
  *out = tokens[i];
  pthread_mutex_unlock(&lock);
  return st;
}

/* The host callback's job: the collective and where its input and output lie in staging. */
typedef struct gpu_job {
  nv__dist_job job;
  size_t in_at, out_at; /* byte offsets in the staging buffer */
  nv__gpu_note *note;   /* where a failure's status and message go (the submission's error) */
  dist_cell *cell;      /* its ticket */
} gpu_job;

/* Bound: the staging buffer, then the device's order token. */
static hrx_status run_job(const hrx_callback_view *views, size_t count, void *user) {
  const gpu_job *g = user;
  if (count != 2) return HRX_E_CALLBACK;
  char *host = views[0].address;
  const void *in = g->job.prim == NV__PRIM_RECV ? NULL : host + g->in_at;
  int want = CELL_TICKET;
  nv_status st;
  if (atomic_compare_exchange_strong(&g->cell->state, &want, CELL_SETTLED)) {
    st = nv__dist_run_reserved(&g->job, g->cell->ticket, in, host + g->out_at);
  } else {
    /* No ticket (the group was closed or unknown when submitted): fails saying why. */
    atomic_store(&g->cell->state, CELL_SETTLED);
    st = nv__dist_run(&g->job, in, host + g->out_at);
  }
  if (st == NV_OK) return HRX_OK;
  nv__gpu_note_fail(g->note, st, "%s", nv_last_error());
  return HRX_E_CALLBACK;
}

static void free_job(void *user) {
  gpu_job *g = user;
  if (g) {
    nv__gpu_note_release(g->note);
    cell_release(g->cell);
  }
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
  pthread_once(&progress_once, install_progress);
  hrx_buffer *token;
  if ((st = order_token(ctx, &token)) != NV_OK) return st;
  gpu_job *job = nv__calloc(1, sizeof *job);
  if (job && (job->cell = nv__calloc(1, sizeof *job->cell))) {
    atomic_init(&job->cell->refs, 1);
    atomic_init(&job->cell->state, CELL_RECORDED);
    job->cell->group = prm->group;
  }
  if (job && (!job->cell || !(job->note = nv__gpu_note_take(ctx)))) {
    free_job(job);
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
  hrx_binding b[2] = {{hrx_view_make(p.hb, 0, job->out_at + out_bytes + 1), HRX_ACCESS_READ_WRITE},
                      {hrx_view_make(token, 0, 64), HRX_ACCESS_READ_WRITE}};
  /* In the batch first: a recorded callback always finds its cell there at submission. */
  if ((st = batch_add(ctx, job->cell)) != NV_OK) {
    free_job(job);
    return st;
  }
  hs = hrx_graph_host(ctx->g, b, 2, run_job, job, free_job, NULL);
  if (hs != HRX_OK) {
    /* The cell stays in the batch, settled: the submission gives no ticket to it. */
    atomic_store(&job->cell->state, CELL_SETTLED);
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
  nv__gpu_hash_buffer(ctx, token);
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
