/* The interface between the evaluation loop and the backends (DESIGN §3): per evaluation, a
 * context through which nodes are encoded, open work committed and flushed. The CPU backend
 * computes at encode time; a GPU backend records into hrx graphs and submits on commit. */
#ifndef NUVEC_CORE_BACKEND_H
#define NUVEC_CORE_BACKEND_H

#include "core/internal.h"

/* One evaluation's context: the open work of each backend it used. The CPU backend keeps none;
 * the CUDA backend keeps its recordings (one per GPU) in `gpu` once `gpu_backend` is set. */
typedef struct nv__ectx {
  const struct nv__backend *gpu_backend;
  void *gpu;
} nv__ectx;

typedef struct nv__backend {
  const char *name;
  /* Computes (or records) `node` from its operands; `donated` as nv__kernel_fn. */
  nv_status (*encode)(nv__ectx *ctx, nv__node *node, const nv__operand *in, int donated);
  /* Submits open work without waiting (before this thread blocks on another's node). */
  void (*commit)(nv__ectx *ctx);
  /* Submits open work and waits for it. */
  nv_status (*flush)(nv__ectx *ctx);
  /* Ends the evaluation: frees the context's state (after commit or flush). May be NULL. */
  void (*end)(nv__ectx *ctx);
} nv__backend;

/* The backend serving a device type, or NULL when none exists in this build or process. */
const nv__backend *nv__backend_for(nv_device device);

/* The CPU backend (src/cpu/backend.c). */
extern const nv__backend nv__cpu_backend;
/* The evaluation whose node the calling thread's CPU kernel is computing, or NULL (a kernel
 * that may block on other work submits the evaluation's open GPU work first). */
nv__ectx *nv__cpu_encoding_ctx(void);

#ifdef NUVEC_HAVE_CUDA
/* The CUDA backend (src/cuda/backend.c) when GPU `index` is usable, else NULL. */
const nv__backend *nv__gpu_backend_for(int index);
#endif

/* Commits / flushes the open work of every backend the evaluation used (src/core/eval.c). */
void nv__ectx_commit(nv__ectx *ctx);
nv_status nv__ectx_flush(nv__ectx *ctx);

/* Transform tracing depth of the calling thread (src/transforms): tracers of the thread's
 * session evaluated while it is positive are Retained instead of detached. */
int nv__tracing_depth(void);
/* Enters / leaves a transform on the calling thread. Entering the outermost one starts a
 * tracing session (nv__current_trace; fails with NV_ERR_OUT_OF_MEMORY, and then must not be
 * left); leaving it ends the session, so its tracers become ordinary nodes, and turns the
 * nodes it Retained into Done and detaches them. */
nv_status nv__tracing_enter(void);
void nv__tracing_leave(void);

#endif
