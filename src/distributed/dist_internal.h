/* Internals of the distributed family (DESIGN §10): the communicator interface the backends
 * implement, the group registry the collectives run through, and the reductions they share. */
#ifndef NUVEC_DIST_INTERNAL_H
#define NUVEC_DIST_INTERNAL_H

#include "core/internal.h"
#include "nuvec/distributed.h"

enum { NV__RED_SUM = 0, NV__RED_MAX = 1, NV__RED_MIN = 2 };

typedef struct nv__comm nv__comm;

/* A backend's communicator. Every function is a collective or a point-to-point transfer over
 * row-contiguous host memory; every rank calls the same collectives in the same order. They
 * return NV_OK, or an error status with the thread's message set (a lost peer is
 * NV_ERR_PEER_LOST naming its rank). Lengths are bytes unless said. Callers serialize them (the
 * group's order lock). */
typedef struct nv__comm_ops {
  /* `count` elements of `dtype` (float16/bfloat16 already widened to float32 by the caller)
   * from `in` reduced into `out`, which is `in` itself for a reduction in place (else the two
   * do not overlap): every rank ends with the same bits. */
  nv_status (*all_reduce)(nv__comm *c, const void *in, void *out, size_t count, nv_dtype dtype,
                          int op);
  /* `in` (n bytes per rank) into `out` (size * n bytes, rank order). */
  nv_status (*all_gather)(nv__comm *c, const void *in, void *out, size_t n);
  /* The sum of the ranks' `in` (size * count elements), part `rank` into out (count elements). */
  nv_status (*sum_scatter)(nv__comm *c, const void *in, void *out, size_t count, nv_dtype dtype);
  nv_status (*send)(nv__comm *c, const void *buf, size_t n, int dst);
  nv_status (*recv)(nv__comm *c, void *buf, size_t n, int src);
  /* The communicator of the ranks that passed `color` (ordered by key, then rank), or NULL
   * in *out when this rank's new group has size 1. */
  nv_status (*split)(nv__comm *c, int color, int key, nv__comm **out);
  /* Checks the peers without blocking; fails naming a lost one. */
  nv_status (*health)(nv__comm *c);
  void (*destroy)(nv__comm *c);
} nv__comm_ops;

struct nv__comm {
  const nv__comm_ops *ops;
  const char *backend; /* "ring", "mpi", "nccl" */
  int rank, size;
};

/* Registers a communicator (size >= 2) as a new group, owning it; NV_GROUP_SINGLE for NULL or
 * a size <= 1 (which is then destroyed). -1 on out of memory (message set, c destroyed). */
nv_group nv__group_register(nv__comm *c);

/* The pieces of a group an operation needs. */
typedef struct nv__group_info {
  int rank, size;
} nv__group_info;

/* rank and size of g (NV_GROUP_DEFAULT resolved); an error for unknown or closed groups,
 * formatted "op: ..." when op is not NULL. */
nv_status nv__group_info_get(nv_group g, const char *op, nv__group_info *out);

/* The communicator of g (borrowed: valid until the group is closed), or NULL for the size-1
 * group and unknown, closed or failed groups. */
nv__comm *nv__group_comm(nv_group g);

/* Resolves NV_GROUP_DEFAULT. */
nv_group nv__group_resolve(nv_group g);

/* Program order per group across streams and threads (D31): every operation takes a ticket
 * when it is issued and runs once every earlier ticket of the group has run or was cancelled,
 * one operation on the wire at a time. nv__group_reserve takes the next ticket (fails for an
 * unknown or the size-1 group); a thread must not take one while its evaluation holds
 * unsubmitted GPU collectives (they take theirs when submitted, and would come after it).
 * nv__group_run_reserved waits for the ticket's turn, then runs fn(comm, user); it fails without running fn for a closed or failed group, and a
 * lost-peer failure of fn (NV_ERR_PEER_LOST) fails the group with its message. Errors are
 * "op: ...". Every reserved ticket must be run or cancelled exactly once, or later operations
 * of the group wait for ever. nv__group_run is reserve + run. */
nv_status nv__group_reserve(nv_group g, const char *op, uint64_t *ticket);
nv_status nv__group_run_reserved(nv_group g, uint64_t ticket, const char *op,
                                 nv_status (*fn)(nv__comm *, void *), void *user);
nv_status nv__group_run(nv_group g, const char *op, nv_status (*fn)(nv__comm *, void *),
                        void *user);
/* Gives a ticket up without running it (never blocks on its turn). `why` not NULL: the peers
 * expect the operation (it was issued to them), so the group is failed with that message. */
void nv__group_cancel(nv_group g, uint64_t ticket, const char *why);
/* Installs the function a waiting ticket calls now and then (a few ms apart): the GPU side's
 * check for submitted collectives whose work ended without running them (cancelled then). */
void nv__dist_set_progress(void (*fn)(void));

/* Element-wise reduction dst[i] = op(dst[i], src[i]) over `count` elements of `dtype` (every
 * dtype but float16/bfloat16, which the collectives widen to float32 first). */
void nv__dist_reduce(void *dst, const void *src, size_t count, nv_dtype dtype, int op);
/* out[i] = op(a[i], b[i]), a the first operand; out may be a or b (not a partial overlap).
 * Two ranks that reduce the same a and b get the same bits (NaN payloads and zero signs). */
void nv__dist_reduce3(void *out, const void *a, const void *b, size_t count, nv_dtype dtype,
                      int op);

/* Helpers for a backend that has no sum_scatter of its own: all_reduce a copy, take part rank. */
nv_status nv__comm_sum_scatter_by_reduce(nv__comm *c, const void *in, void *out, size_t count,
                                         nv_dtype dtype);

/* The ring backend (ring.c): the communicator of the job the environment describes; *out NULL
 * (and NV_OK) when there is no configuration (*configured false) or the job has one rank. */
nv_status nv__ring_init(nv__comm **out, bool *configured);
/* The NCCL backend (nccl.c): the ring's communicator for host memory, plus an NCCL
 * communicator for GPU-stream collectives. */
nv_status nv__nccl_init(nv__comm **out, bool *configured);
bool nv__nccl_available(void);
/* The MPI backend (mpi.c): NV_ERR_UNSUPPORTED "MPI not found" when libmpi does not load; *out
 * NULL when the process was not started by an MPI launcher. */
nv_status nv__mpi_init(nv__comm **out);
bool nv__mpi_available(void);

/* Seconds before a silent peer is declared lost (NUVEC_DIST_TIMEOUT, default 60). */
double nv__dist_timeout(void);

#endif
