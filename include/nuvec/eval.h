/* nuvec — evaluation: eval, async_eval, schedule.
 *
 * Evaluating an array computes it and every unevaluated array it depends on. Each graph node
 * runs at most once, even when several threads evaluate graphs that share it; a thread that
 * needs a node another thread is running waits for it and receives its error. Errors are
 * sticky: a failed array and everything computed from it fail with the same error at every
 * later evaluation or read. */
#ifndef NUVEC_EVAL_H
#define NUVEC_EVAL_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Evaluates `n` arrays (borrowed; duplicates allowed) and what they depend on, waits, and
 * returns the first error among them in argument order. Evaluating an array from inside its
 * own evaluation fails with NV_ERR_INVALID_ARGUMENT instead of deadlocking. */
NV_API nv_status nv_eval(nv_array *const *xs, size_t n);

/* Evaluates one array, as nv_eval. */
NV_API nv_status nv_eval1(nv_array *x);

/* Starts evaluating the arrays and returns without waiting for GPU work (CPU work runs on the
 * calling thread first). Returns an error already known when it returns; a later read or eval
 * waits for exactly the work it needs and reports any other error. Inside a transform's
 * function (grad, vjp, jvp, vmap): invalid argument, as MLX. */
NV_API nv_status nv_async_eval(nv_array *const *xs, size_t n);

/* Evaluates the arrays of a list, as nv_eval. */
NV_API nv_status nv_eval_vec(const nv_vec *xs);

/* Arrays whose evaluation has been put in order ahead of time (nv_schedule). */
typedef struct nv_schedule nv_schedule;

/* Orders the work that evaluating `xs` needs, to be started later by nv_schedule_eval or
 * nv_schedule_async_eval. The handle holds the arrays and their graph until it is started or
 * freed, so nothing it reads can be written in place meanwhile. Returns NULL (see
 * nv_last_error) when out of memory or for NULL inputs. */
NV_API nv_schedule *nv_schedule_new(nv_array *const *xs, size_t n);

/* The scheduled arrays (borrowed, `*n` of them). */
NV_API nv_array *const *nv_schedule_arrays(const nv_schedule *s, size_t *n);

/* Number of nodes the schedule will run (nodes evaluated meanwhile are skipped at start). */
NV_API size_t nv_schedule_node_count(const nv_schedule *s);

/* Starts the schedule, waits, and frees it (one-shot): as nv_eval at the time of the call. */
NV_API nv_status nv_schedule_eval(nv_schedule *s);

/* Starts the schedule without waiting for GPU work and frees it: as nv_async_eval. */
NV_API nv_status nv_schedule_async_eval(nv_schedule *s);

/* Frees a schedule that was not started; NULL-safe. */
NV_API void nv_schedule_free(nv_schedule *s);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_EVAL_H */
