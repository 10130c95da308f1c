/* nuvec — distributed communication (mlx.core.distributed): groups of processes and the
 * collectives between them as lazy ops.
 *
 * A group is a small value (nv_group: an id into the process's group registry). Group 0 is the
 * size-1 group every process has; NV_GROUP_DEFAULT stands for the default group (the one
 * nv_dist_set_default_group installed, else the one nv_dist_init made, else group 0). Without
 * configuration every collective on a size-1 group is the identity (the input itself, no node),
 * except send and recv, which are errors there.
 *
 * Collectives are op builders like the rest (nuvec/ops.h): inputs are borrowed, the result is
 * a new array, bad arguments give an array carrying an error naming the op (never NULL). They
 * run when evaluated, in program order per group (one operation of a group on the wire at a
 * time), and every rank must evaluate the same collectives in the same order. Reductions give
 * every rank the same bits; float16 and bfloat16 are summed in float32; on bool, sum and max
 * are "or" and min is "and". A lost peer fails the collective with NV_ERR_PEER_LOST naming its rank
 * (a reset connection at once, a silent one after NUVEC_DIST_TIMEOUT seconds, default 60), and
 * the group is then failed: every later operation on it fails with that error. */
#ifndef NUVEC_DISTRIBUTED_H
#define NUVEC_DISTRIBUTED_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t nv_group;
#define NV_GROUP_SINGLE ((nv_group)0)
#define NV_GROUP_DEFAULT ((nv_group)-1)

/* Whether a backend can be used in this process: "ring" always; "mpi" when libmpi loads;
 * "nccl" when libnccl loads and a GPU backend exists; "any" (or NULL) when one of them can. */
NV_API bool nv_dist_is_available(const char *backend);

/* Starts the backend ("ring", "mpi", "nccl", or "any"/NULL: the first configured one of ring
 * and mpi) and returns the group of every process of the job in *out. The ring reads MLX's
 * environment (MLX_RANK, MLX_HOSTFILE; NUVEC_RANK and NUVEC_HOSTFILE take precedence), MPI
 * its launcher's. The first successful call also makes the group the default; later calls
 * return that group again. Without configuration (or when the backend fails) a non-strict call
 * gives the size-1 group 0 and NV_OK; a strict one fails with the reason. */
NV_API nv_status nv_dist_init(const char *backend, bool strict, nv_group *out);

/* The default group (see the file comment), and setting it (fails for an unknown group). */
NV_API nv_group nv_dist_default_group(void);
NV_API nv_status nv_dist_set_default_group(nv_group g);

/* The rank of this process in `g` and the number of processes. Fail for an unknown or closed
 * group. */
NV_API nv_status nv_group_rank(nv_group g, int *rank);
NV_API nv_status nv_group_size(nv_group g, int *size);

/* The name of the group's backend ("single", "ring", "mpi", "nccl"); NULL for an unknown id. */
NV_API const char *nv_group_backend(nv_group g);

/* Splits `g`: the processes that pass the same `color` form a new group, ordered by `key`
 * (key < 0: the rank in g), then by rank in g. Every process of g must call it (a collective).
 * On a size-1 group *out is g itself. Fails for a closed or failed group. */
NV_API nv_status nv_group_split(nv_group g, int color, int key, nv_group *out);

/* Closes `g` once the operations in progress on it finish, releasing its transport; every later
 * operation on it (arrays already recorded on it included) fails saying the group was closed.
 * Closing group 0 does nothing; closing a closed group is fine. */
NV_API nv_status nv_group_close(nv_group g);

/* Checks every peer of `g` without running a collective: waits for the operation in progress,
 * then fails naming a lost peer (the group is then failed). NV_OK on a size-1 group. */
NV_API nv_status nv_group_health(nv_group g);

/* The sum, maximum or minimum over the group of `x` on every rank (same dtype and shape).
 * all_gather concatenates the ranks' x along the first axis in rank order (a scalar gives a
 * vector of the group's size). sum_scatter sums over the group and gives rank r the r-th of
 * size equal parts along the first axis, which must divide by the group size. On a size-1 group
 * these return x itself. */
NV_API nv_array *nv_dist_all_sum(const nv_array *x, nv_group g);
NV_API nv_array *nv_dist_all_max(const nv_array *x, nv_group g);
NV_API nv_array *nv_dist_all_min(const nv_array *x, nv_group g);
NV_API nv_array *nv_dist_all_gather(const nv_array *x, nv_group g);
NV_API nv_array *nv_dist_sum_scatter(const nv_array *x, nv_group g);

/* Sends x to rank `dst` of g when the result (which is x) is evaluated: a 512-byte header (the
 * tag "nuvecsnd", then little-endian u64s: payload bytes, dtype name length, the name, number
 * of dimensions, each dimension; zeros after) and the row-contiguous payload. recv receives an
 * array of `shape` and `dtype` from rank `src`; recv_like takes them from x. A sender with
 * another dtype or shape fails the recv naming both (its payload is drained first, so the
 * connection stays usable); a message without the header fails at once. Sending to or
 * receiving from this process's own rank, a rank out of range, or on a size-1 group fails. */
NV_API nv_array *nv_dist_send(const nv_array *x, int dst, nv_group g);
NV_API nv_array *nv_dist_recv(const int *shape, int ndim, nv_dtype dtype, int src, nv_group g);
NV_API nv_array *nv_dist_recv_like(const nv_array *x, int src, nv_group g);

/* The identity whose gradient is the all_sum of the cotangents over g (data parallelism: the
 * forward pass is local, the backward pass sums the gradients). x itself on a size-1 group. */
NV_API nv_array *nv_dist_sum_gradients(const nv_array *x, nv_group g);

/* The caller's place in the source for the next collective this thread builds (all_sum to
 * sum_gradients): the errors it gives, when built or when evaluated, end with "(op called at
 * file:line)". The macros below pass __FILE__ and __LINE__ to every call of a builder (define
 * NV_DIST_NO_CALLER_LOCATION before including to leave them out); bindings pass their own
 * language's caller. `file` is copied; NULL forgets a place not yet used. */
NV_API void nv_dist_set_caller(const char *file, int line);

#ifndef NV_DIST_NO_CALLER_LOCATION
#define NV__DIST_AT(call) (nv_dist_set_caller(__FILE__, __LINE__), call)
/* Variadic, so that an argument with commas of its own (a compound literal) stays whole. */
#define nv_dist_all_sum(...) NV__DIST_AT(nv_dist_all_sum(__VA_ARGS__))
#define nv_dist_all_max(...) NV__DIST_AT(nv_dist_all_max(__VA_ARGS__))
#define nv_dist_all_min(...) NV__DIST_AT(nv_dist_all_min(__VA_ARGS__))
#define nv_dist_all_gather(...) NV__DIST_AT(nv_dist_all_gather(__VA_ARGS__))
#define nv_dist_sum_scatter(...) NV__DIST_AT(nv_dist_sum_scatter(__VA_ARGS__))
#define nv_dist_send(...) NV__DIST_AT(nv_dist_send(__VA_ARGS__))
#define nv_dist_recv(...) NV__DIST_AT(nv_dist_recv(__VA_ARGS__))
#define nv_dist_recv_like(...) NV__DIST_AT(nv_dist_recv_like(__VA_ARGS__))
#define nv_dist_sum_gradients(...) NV__DIST_AT(nv_dist_sum_gradients(__VA_ARGS__))
#endif

#ifdef __cplusplus
}
#endif

#endif
