/* The distributed family's collective primitives, as their kernels (CPU: src/distributed/ops.c,
 * CUDA: src/cuda/distributed.c) run them. */
#ifndef NUVEC_DIST_OPS_H
#define NUVEC_DIST_OPS_H

#include "core/internal.h"
#include "nuvec/distributed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A collective node's parameters: its group (resolved when built) and, for send and recv, the
 * peer's rank in it. */
typedef struct nv__dist_params {
  nv_group group;
  int peer;
  const char *file; /* where the builder was called (interned), or NULL; and the line */
  int line;
} nv__dist_params;

/* The caller's place set for this thread (nv_dist_set_caller), taken: *file NULL when none. */
void nv__dist_take_caller(const char **file, int *line);

/* One collective as its kernel runs it, self-contained (a GPU job outlives its node). `shape`
 * is the input's (send) or the output's (recv). */
typedef struct nv__dist_job {
  int prim;
  nv_group group;
  int peer;
  nv_dtype dtype;
  int64_t in_count; /* input elements (0 for recv) */
  int64_t out_count;
  int ndim;
  int shape[NV__MAX_DIMS];
  const char *file; /* the builder's caller (nv__dist_params) */
  int line;
} nv__dist_job;

/* The job of collective node `n`. */
void nv__dist_job_of(const nv__node *n, nv__dist_job *j);

/* Runs the job: `in` row-contiguous input (NULL for recv), `out` the row-contiguous output
 * (may equal `in`: a donated or in-place reduction or send). Errors name the op. */
nv_status nv__dist_run(const nv__dist_job *j, const void *in, void *out);
/* As nv__dist_run, in the place of a ticket taken before (nv__group_reserve). */
nv_status nv__dist_run_reserved(const nv__dist_job *j, uint64_t ticket, const void *in,
                                void *out);

/* The NCCL backend's GPU side (src/distributed/nccl.c): the NCCL communicator of g for
 * collective `prim` of `dtype` on GPU `device`, or NULL when g is not an NCCL group there or
 * NCCL lacks the operation (the job then takes the staged host path). */
void *nv__nccl_comm_for(nv_group g, int prim, nv_dtype dtype, int device);
/* Enqueues the NCCL call on `stream` (a cudaStream_t, under capture): `count` elements of the
 * input for all_sum/max/min and all_gather, of the output for sum_scatter. */
nv_status nv__nccl_enqueue(void *comm, int prim, nv_dtype dtype, const void *send, void *recv,
                           size_t count, void *stream);

#ifdef __cplusplus
}
#endif

#endif
