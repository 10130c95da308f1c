/* nuvec internal core: the objects behind nv_array, errors, buffers, allocation hooks and the
 * test hooks. Never installed; shared by src/ and the tests (through libnuvec.a). */
#ifndef NUVEC_CORE_INTERNAL_H
#define NUVEC_CORE_INTERNAL_H

#include <stdatomic.h>
#include <stdarg.h>
#include <string.h>

#include "nuvec.h"

/* ---- Invariant checks (on in debug and sanitizer builds) ---- */
#ifdef NV_DEBUG_ASSERTS
#include <stdio.h>
#include <stdlib.h>
#define NV_ASSERT(c)                                                                 \
  do {                                                                               \
    if (!(c)) {                                                                      \
      fprintf(stderr, "nuvec: invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__); \
      abort();                                                                       \
    }                                                                                \
  } while (0)
#else
#define NV_ASSERT(c) ((void)0)
#endif

#define NV__MAX_DIMS 64
#define NV__INLINE_DIMS 6

/* ---- Errors ---- */

/* An error carried by arrays: a status and a message, shared by reference. */
typedef struct nv__error {
  atomic_long refs;
  nv_status status;
  char msg[];
} nv__error;

nv__error *nv__error_new(nv_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
nv__error *nv__error_newv(nv_status status, const char *fmt, va_list ap);
nv__error *nv__error_retain(nv__error *e);
void nv__error_release(nv__error *e);
/* The shared out-of-memory error (never freed), for paths that cannot allocate a message. */
nv__error *nv__error_oom(void);

/* Sets the thread's last error and returns `status`. */
nv_status nv__set_error(nv_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets the thread's last error from an error object and returns its status. */
nv_status nv__set_error_obj(const nv__error *e);
/* The status that went with the thread's last error (NV_OK after nv_clear_error). */
nv_status nv__last_status(void);

/* Formats a shape as "(2,3)" into buf. */
const char *nv__shape_str(const int *shape, int ndim, char *buf, size_t size);
#define NV__SHAPE_BUF 256

/* ---- Host allocation (one hook, with failure injection for tests) ---- */
void *nv__malloc(size_t n);
void *nv__calloc(size_t count, size_t n);
void *nv__realloc(void *p, size_t n);
void nv__free(void *p);
/* The same allocator without failure injection (for objects that report failures). */
void *nv__mem_alloc(size_t n);
void nv__mem_free(void *p);
/* Returns true when the next host or buffer allocation must fail (failure injection). */
bool nv__alloc_should_fail(void);

/* ---- Buffers (array data) ---- */
enum {
  NV__BUF_POOL = 0,   /* from the allocator and its cache; writable */
  NV__BUF_NOCOPY = 1, /* caller-owned memory (nv_array_from_data_nocopy); never written */
  NV__BUF_MAPPED = 2, /* a read-only file mapping; never written */
  NV__BUF_INLINE = 3, /* small data stored in the buffer object itself; writable */
};

typedef struct nv__devcopy nv__devcopy; /* a buffer's device side (src/cuda) */

typedef struct nv__buffer {
  atomic_long refs;
  void *ptr;        /* host data; NULL while a GPU-written buffer has no host copy */
  size_t nbytes;    /* bytes usable by the array */
  size_t capacity;  /* bytes counted by the allocator (size class); 0 for GPU-made buffers */
  int kind;
  void (*destroy)(void *ctx);
  void *ctx;
  /* The device copy (DESIGN §13): set by the CUDA backend when a GPU wrote the buffer or read
   * it; then the backend's hooks own where the valid data is, and host readers call
   * nv__buffer_host first. NULL for host-only buffers. */
  nv__devcopy *_Atomic dev;
  _Alignas(16) unsigned char inl[]; /* NV__BUF_INLINE data */
} nv__buffer;

/* What the CUDA backend provides to the core for buffers with a device copy. */
typedef struct nv__gpu_hooks {
  /* Makes b->ptr hold the buffer's data (waits for its GPU writer, downloads once). */
  nv_status (*to_host)(nv__buffer *b);
  /* The host copy was written in place: the device copy is stale. */
  void (*host_written)(nv__buffer *b);
  /* Frees the device side (and a host copy it owns) when the buffer is freed. */
  void (*release)(nv__buffer *b);
  /* Waits for the submission that last wrote the buffer; its error, if it failed. */
  nv_status (*status)(nv__buffer *b);
  /* The device and GPU address of the buffer's valid device copy (waits for its writer);
   * NV_ERR_UNSUPPORTED when the valid data is on the host only. */
  nv_status (*device_ptr)(nv__buffer *b, int *device, uint64_t *address);
} nv__gpu_hooks;
extern const nv__gpu_hooks *_Atomic nv__gpu_hooks_ptr;

/* Makes a buffer's host data valid (a no-op for host-only buffers); the error (a failed GPU
 * writer, a failed download) is set as the thread's last error. */
static inline nv_status nv__buffer_host(nv__buffer *b) {
  if (!b || !atomic_load_explicit(&b->dev, memory_order_acquire)) return NV_OK;
  return atomic_load(&nv__gpu_hooks_ptr)->to_host(b);
}
static inline void nv__buffer_host_written(nv__buffer *b) {
  if (b && atomic_load_explicit(&b->dev, memory_order_acquire))
    atomic_load(&nv__gpu_hooks_ptr)->host_written(b);
}
/* A buffer with no host memory yet, for a GPU-written output (src/cuda). */
nv__buffer *nv__buffer_new_device(size_t nbytes, nv__devcopy *dev);

#define NV__INLINE_BYTES 16

/* A new writable buffer of `nbytes` (NULL with the thread's error set when out of memory or
 * over the memory limit). */
nv__buffer *nv__buffer_alloc(size_t nbytes);
/* A buffer over caller memory; `destroy(ctx)` runs when it is freed. */
nv__buffer *nv__buffer_wrap(void *ptr, size_t nbytes, int kind, void (*destroy)(void *),
                            void *ctx);
static inline nv__buffer *nv__buffer_retain(nv__buffer *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}
void nv__buffer_release(nv__buffer *b);
static inline bool nv__buffer_writable(const nv__buffer *b) {
  return b->kind == NV__BUF_POOL || b->kind == NV__BUF_INLINE;
}

/* ---- Graph nodes and array handles ---- */

enum {
  NV__PENDING = 0, /* not evaluated: holds its primitive and inputs */
  NV__RUNNING = 1, /* being computed by `owner` */
  NV__DONE = 2,    /* outputs hold data; detached from its inputs */
  NV__FAILED = 3,  /* every output holds the error */
  NV__RETAINED = 4 /* evaluated inside a transform; keeps its graph until the transform ends */
};

enum {
  NV__FLAG_ROW = 1,  /* row-contiguous (C order, no gaps) */
  NV__FLAG_COL = 2,  /* column-contiguous */
  NV__FLAG_WEAK = 4, /* a weakly typed scalar */
  /* A failed array whose dtype and shape are not an op's own: its builder failed before it
   * could compute them (bad arguments, out of memory). Other failed arrays have the metadata
   * of the op that made them, so shape checks on them behave as on the healthy array. */
  NV__FLAG_NOMETA = 8,
};

typedef struct nv__output {
  nv_dtype dtype;
  int ndim;
  uint8_t flags;
  int64_t size;
  int *shape;
  int64_t *strides;
  int shape_inl[NV__INLINE_DIMS];
  int64_t strides_inl[NV__INLINE_DIMS];
  /* The data slot: written once by the evaluating thread before the node's final state is
   * published (release), read after it is observed (acquire). */
  nv__buffer *buf;
  int64_t offset; /* element offset into buf */
} nv__output;

typedef struct nv__node nv__node;

typedef struct nv__input {
  nv__node *node;
  int idx;
} nv__input;

typedef struct nv__completion nv__completion;

/* A tracing session (src/core/eval.c): one thread's run of a transform, from the outermost
 * nv__tracing_enter to its nv__tracing_leave (nested transforms share it). Counted by the
 * nodes traced in it; `live` until it ends. */
typedef struct nv__trace {
  atomic_long refs;
  atomic_bool live;
} nv__trace;

struct nv__node {
  atomic_long refs;
  atomic_int state;
  atomic_int lock; /* spin lock: state transitions and detaching the inputs */
  int prim;
  /* The session this node was traced in (held), or NULL. It is a tracer only while that
   * session is live: the outputs of a finished transform are ordinary arrays. Set when the
   * node is built, never changed. */
  nv__trace *trace;
  nv_stream stream;
  int owner; /* thread id while RUNNING */
  nv__completion *done; /* created by the first waiter while RUNNING */
  nv__error *error;     /* when FAILED (or failed when built) */
  int ninputs;
  int noutputs;
  nv__input *inputs;
  void *params;
  size_t params_size;
  nv__output out[];
};

struct nv_array {
  atomic_long refs;
  nv__node *node;
  int idx;
  /* Scope ownership (src/core/scope.c): the depth of the owning scope (> 0), 0 when no scope
   * owns the array, NV__SCOPE_DROPPED once another thread released the scope's reference (the
   * handle then waits in its slot for the owner's nv_scope_end, which frees it). */
  _Atomic int scope_level;
  int scope_thread; /* the owning scope's thread (nv__thread_id) while scope_level > 0 */
  size_t scope_slot;
};

#define NV__SCOPE_DROPPED (-1)

static inline nv__output *nv__out(const nv_array *x) { return &x->node->out[x->idx]; }

/* A unique small id of the calling thread (never 0). */
int nv__thread_id(void);

void nv__node_lock(nv__node *n);
void nv__node_unlock(nv__node *n);
static inline nv__node *nv__node_retain(nv__node *n) {
  atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
  return n;
}
/* Gives back a node reference; freeing a chain is iterative. */
void nv__node_release(nv__node *n);
/* Drops a node's input references (after evaluation). The inputs are taken out under the
 * node's lock, so a reader that reads them under the lock (and retains what it keeps) sees
 * either all of them or none. */
void nv__node_detach(nv__node *n);

/* ---- Tracers (src/core/eval.c) ---- */
/* The calling thread's live tracing session while it runs a transform, else NULL. */
extern _Thread_local nv__trace *nv__current_trace;
static inline nv__trace *nv__trace_retain(nv__trace *t) {
  atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}
void nv__trace_release(nv__trace *t);
/* Makes a new node a tracer of the calling thread's session (inside a transform only). */
static inline void nv__node_mark_tracer(nv__node *n) {
  if (!n->trace && nv__current_trace) n->trace = nv__trace_retain(nv__current_trace);
}
/* A new node built from `in` is a tracer when `in` is one of the calling thread's session (a
 * tracer of a finished transform, or of another thread's, passes nothing on). */
static inline void nv__node_inherit_tracer(nv__node *n, const nv__node *in) {
  if (in->trace && in->trace == nv__current_trace && !n->trace)
    n->trace = nv__trace_retain(in->trace);
}
/* Whether `n` is a tracer of the calling thread's session: what its transforms walk through
 * and keep (Retained) when they evaluate it. */
static inline bool nv__node_traced_here(const nv__node *n) {
  return n->trace && n->trace == nv__current_trace;
}
/* Whether `n` is a tracer of a session still running on any thread (its graph may still be
 * walked, so it is neither detached by another thread's evaluation nor donated). */
static inline bool nv__node_is_tracer(const nv__node *n) {
  return n->trace && atomic_load_explicit(&n->trace->live, memory_order_acquire);
}

/* A new node (refs 1, PENDING) with `ninputs` inputs taken from `inputs` (each retained),
 * `noutputs` outputs whose metadata the caller fills with nv__output_set_shape, and
 * `params_size` zeroed bytes of parameters. NULL when out of memory. */
nv__node *nv__node_new(int prim, nv_array *const *inputs, int ninputs, int noutputs,
                       size_t params_size);
/* The element count of a shape of non-negative dimensions; false when the product of its
 * nonzero dimensions does not fit an int64 (a zero dimension does not hide an overflow). */
bool nv__shape_size(const int *shape, int ndim, int64_t *size);
/* Sets an output's dtype and shape with row-contiguous strides. Fails with
 * NV_ERR_INVALID_ARGUMENT for too many dimensions, a negative one or an element count past
 * int64, and with NV_ERR_OUT_OF_MEMORY when its bytes do not fit an int64 (too large to
 * allocate); the message names the shape, the caller prefixes its op. */
nv_status nv__output_set_shape(nv__output *o, nv_dtype dtype, const int *shape, int ndim);
/* Sets an output's strides (view layouts) and recomputes its contiguity flags. */
void nv__output_set_strides(nv__output *o, const int64_t *strides);
/* Allocates a row-contiguous buffer for an output (offset 0). */
nv_status nv__output_alloc(nv__output *o);
static inline void *nv__output_ptr(const nv__output *o) {
  return (char *)o->buf->ptr + o->offset * (int64_t)nv_dtype_size(o->dtype);
}
void nv__compute_flags(nv__output *o);

/* A handle on output `idx` of `node`, taking over one node reference, registered with the
 * thread's innermost scope. On failure to allocate, releases the node and returns the shared
 * out-of-memory array (never NULL). */
nv_array *nv__array_new(nv__node *node, int idx);
/* A new array that carries `err` (retained), with the given metadata (shape may be NULL). */
nv_array *nv__array_failed(nv__error *err, nv_dtype dtype, const int *shape, int ndim);
/* A new array that carries `err` (retained) without metadata of its own (NV__FLAG_NOMETA). */
nv_array *nv__array_failed_nometa(nv__error *err);
/* A failed array with a formatted message (no metadata of its own: NV__FLAG_NOMETA). */
nv_array *nv__array_error(nv_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The error of output `idx` of `node` if it is known (FAILED), else NULL. */
nv__error *nv__node_known_error(nv__node *n);
/* Whether `x` has its op's metadata: it is healthy, or failed with its op's dtype and shape. */
static inline bool nv__meta_known(const nv_array *x) {
  return !(nv__out(x)->flags & NV__FLAG_NOMETA);
}
/* A node just built (no handle yet) one of whose inputs has a known error takes the first such
 * error: it becomes FAILED, keeping its metadata, and lets go of its inputs. Returns whether it
 * did. */
bool nv__node_inherit_error(nv__node *n);
/* An evaluated array over `buf` (retained) with the given metadata. */
nv_array *nv__array_from_buffer(nv__buffer *buf, int64_t offset, nv_dtype dtype,
                                const int *shape, int ndim, const int64_t *strides);

/* Appends (key, x) to `m` without looking for `key` (the caller knows it is absent), so
 * building a map of n unique keys costs O(n) rather than nv_map_set's O(n^2). */
nv_status nv__map_append(nv_map *m, const char *key, nv_array *x);
/* Appends all n arrays (retained) to v, or none when out of memory (src/core/containers.c). */
nv_status nv__vec_push_all(nv_vec *v, nv_array *const *xs, size_t n);

/* Scope bookkeeping (src/core/scope.c). */
void nv__scope_register(nv_array *x);
/* Called by nv_release for a scope-owned array whose last reference is the scope's: on the
 * owning thread it takes the array out of its scope and returns false (the caller frees it);
 * on another thread it drops the array's node reference, leaves the handle for the owner's
 * nv_scope_end to free, and returns true (the caller must not touch the handle again). */
bool nv__scope_release(nv_array *x);

/* ---- Primitive table ---- */
typedef struct nv__operand {
  const nv__output *meta;
  nv__buffer *buf;
  int64_t offset;
} nv__operand;

static inline const void *nv__operand_ptr(const nv__operand *o) {
  return (const char *)o->buf->ptr + o->offset * (int64_t)nv_dtype_size(o->meta->dtype);
}

/* A CPU kernel: computes the outputs of `node` from its operands. Each output's buffer is
 * allocated by the kernel (nv__output_alloc) unless the evaluation donated one: then
 * out->buf is already set (the buffer of operand `donated`, which the output may overwrite
 * in place) and the kernel writes into it. */
typedef nv_status (*nv__kernel_fn)(nv__node *node, const nv__operand *in, int donated);

typedef struct nv__prim_info {
  const char *name;
  /* Inputs that may be donated, in order of preference (-1 terminated); empty: none. */
  signed char donate[4];
  /* Donation restricted to float16/bfloat16/float32 outputs and exact shapes (element-wise
   * rule) rather than update bases (slice_update: the size rule only). */
  bool elementwise;
  /* A view: the output shares input 0's buffer (offset + view delta, or a copy when the
   * primitive's parameters say so). */
  bool view;
} nv__prim_info;

#include "core/prims.h"

extern const nv__prim_info nv__prims[NV__PRIM_COUNT];
extern nv__kernel_fn nv__cpu_kernels[NV__PRIM_COUNT];
void nv__cpu_register(void);

/* ---- Test hooks (internal; tests link libnuvec.a) ---- */
/* Live data buffers (all kinds). */
long nv__test_live_buffers(void);
/* Nodes evaluated (run through a kernel) so far, process-wide. */
long nv__test_eval_count(void);
/* Nodes evaluated so far by the calling thread; resets the thread's count when `reset`. */
long nv__test_thread_eval_count(bool reset);
/* Fails the k-th host or buffer allocation from now (k ≥ 1); 0 disables. */
void nv__test_fail_alloc_at(long k);
/* Allocations made so far (host and buffer). */
long nv__test_alloc_count(void);
/* Lowers (or with 0 restores) the largest base size donation accepts (the 2^32 − 1 rule). */
void nv__test_set_donation_limit(uint64_t limit);
/* Marks an unevaluated array's node Running by `owner` (0: the calling thread), and ends it:
 * NV_OK computes it (waking waiters), another status fails it with `msg`. */
void nv__test_begin_running(const nv_array *x, int owner);
void nv__test_end_running(const nv_array *x, nv_status status, const char *msg);
/* Completions (wait objects of running nodes) alive now. */
long nv__test_live_completions(void);
/* Inputs written in place (donated) so far, process-wide. */
long nv__test_donations(void);
/* Whether an update base of n elements may be donated: 0 < n < 2^32 − 1. */
bool nv__donatable_size(uint64_t n);
/* Whether a COMPILED node (compile's fused chain, src/transforms/fuse.c) may write output 0
 * into one of its data inputs (all but the last, its kernel's keeper): its kernel is
 * element-wise. The evaluation then takes the first input that passes the element-wise rule. */
bool nv__compiled_donates(const nv__node *n);
/* A two-output test primitive: (a + b, a * b) of two same-shape arrays of one dtype. */
nv_status nv__test_add_multiply(const nv_array *a, const nv_array *b, nv_array **sum,
                                nv_array **product);
/* The node state of an array (NV__PENDING ...). */
int nv__test_state(const nv_array *x);
/* References to an array's node. */
long nv__test_node_refs(const nv_array *x);
/* Threads' scope stacks alive now (each freed when its thread exits). */
long nv__test_live_scope_stacks(void);

/* ---- Environment (src/core/env.c lists every NUVEC_* variable) ---- */
long nv__env_long(const char *name, long fallback);

#endif /* NUVEC_CORE_INTERNAL_H */
