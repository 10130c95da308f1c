/* Internals of the transforms: the per-primitive rule table, the graph walk, and the helpers
 * the rules share. See docs/transforms.md for how an op family adds its rules. */
#ifndef NUVEC_TRANSFORMS_INTERNAL_H
#define NUVEC_TRANSFORMS_INTERNAL_H

#include "core/backend.h"
#include "ops/ops_internal.h"

/* ---- Rules ----
 * Every array a rule receives is borrowed; every array it writes is a new reference, owned by
 * the caller (scopes are suspended while rules run). Rules build their results with ordinary
 * op builders, so their results are themselves differentiable and batchable (higher orders and
 * nesting come for free). A rule returns NV_OK, or an error status with the message set. */

/* vjp: `in` are the node's inputs, `out` its outputs, `cot` one cotangent per output (NULL:
 * zero; at least one is not NULL). For each input i with want[i], writes grad[i]: an array of
 * in[i]'s shape, or NULL for a zero gradient. grad[] is NULL-initialized by the caller. */
typedef nv_status (*nv__vjp_rule)(const nv__node *n, nv_array *const *in, nv_array *const *out,
                                  nv_array *const *cot, const bool *want, nv_array **grad);

/* jvp: `tan` one tangent per input (NULL: zero; at least one is not NULL). Writes one tangent
 * per output into out_tan (NULL: zero), each of that output's shape. */
typedef nv_status (*nv__jvp_rule)(const nv__node *n, nv_array *const *in, nv_array *const *out,
                                  nv_array *const *tan, nv_array **out_tan);

/* vmap: `in` are the node's inputs with a batch axis `axes[i]` (non-negative), or unbatched
 * (axes[i] == -1: as the node saw them). At least one is batched. Writes each output batched,
 * with its batch axis in out_axes (or -1 when an output does not depend on the batch). */
typedef nv_status (*nv__vmap_rule)(const nv__node *n, nv_array *const *in, const int *axes,
                                   nv_array **out, int *out_axes);

typedef struct nv__prim_rule {
  nv__vjp_rule vjp;
  nv__jvp_rule jvp;
  nv__vmap_rule vmap;
} nv__prim_rule;

/* The table, filled once (nv__rules_register) by each family's registration function. A NULL
 * entry makes the transform fail with NV_ERR_UNSUPPORTED naming the primitive. */
extern nv__prim_rule nv__prim_rules[NV__PRIM_COUNT];
void nv__rules_register(void);

/* Families' registration functions (listed in src/transforms/rules.c). */
void nv__rules_register_core(nv__prim_rule *r);
void nv__rules_register_transforms(nv__prim_rule *r);
void nv__rules_register_custom(nv__prim_rule *r);
void nv__rules_register_elementwise(nv__prim_rule *r);
void nv__rules_register_index(nv__prim_rule *r);
void nv__rules_register_linalg(nv__prim_rule *r);
void nv__rules_register_linalg_decomp(nv__prim_rule *r);
void nv__rules_register_reduce(nv__prim_rule *r);
void nv__rules_register_random(nv__prim_rule *r);
void nv__rules_register_optim(nv__prim_rule *r);
void nv__rules_register_conv(nv__prim_rule *r);
void nv__rules_register_fft(nv__prim_rule *r);
void nv__rules_register_distributed(nv__prim_rule *r);
void nv__rules_register_fast(nv__prim_rule *r);
void nv__rules_register_fast_sdpa(nv__prim_rule *r);
void nv__rules_register_fast_serving(nv__prim_rule *r);
void nv__rules_register_fast_state(nv__prim_rule *r);
void nv__rules_register_fast_paged(nv__prim_rule *r);
void nv__rules_register_quantize(nv__prim_rule *r);

/* ---- Helpers for rules (src/transforms/rules.c) ---- */

/* A handle (new, unscoped reference) on output `idx` of `node`. */
nv_array *nv__tf_handle(nv__node *node, int idx);

/* `g` summed down to `shape` (the inverse of broadcasting to g's shape). New reference. */
nv_array *nv__tf_unbroadcast(const nv_array *g, const int *shape, int ndim);

/* A view of `x` sliced by (start, step, len) per axis (a SLICE node, as nv_slice builds). */
nv_array *nv__tf_slice(const nv_array *x, const int *start, const int *step, const int *len);

/* `base` with the region (start, step, len) replaced by `update` (which broadcasts to it). */
nv_array *nv__tf_slice_update(const nv_array *base, const nv_array *update, const int *start,
                              const int *step, const int *len);

/* `x` with axis `from` moved to position `to`. */
nv_array *nv__tf_moveaxis(const nv_array *x, int from, int to);

/* Comparison masks (bool): a > b, a >= b, a < b, a <= b, built with the element-wise comparison
 * ops (broadcasting, in the promoted dtype); complex inputs fail (they have no order). */
enum { NV__CMP_GT = 0, NV__CMP_GE, NV__CMP_LT, NV__CMP_LE };
nv_array *nv__tf_compare(const nv_array *a, const nv_array *b, int op);

/* x * mask, with the bool mask converted to x's dtype. */
nv_array *nv__tf_mask(const nv_array *x, const nv_array *mask);

/* An identity view of `x` (a STOP_GRADIENT node when `stop`, else a BROADCAST to its own shape)
 * flagged as a tracer when `tracer`. */
nv_array *nv__tf_identity(const nv_array *x, bool stop, bool tracer);

/* For vmap rules: `x` with its batch axis `ax` moved to the front and size-1 axes inserted after
 * it up to `rank` unbatched axes; an unbatched `x` (ax == -1) is returned as it is (it then
 * broadcasts against the batched operands). */
nv_array *nv__tf_front(const nv_array *x, int ax, int rank);

/* The batch size of the first batched input. */
int nv__tf_batch_size(nv_array *const *in, const int *axes, int n);

/* ---- Closures called from transforms (src/transforms/closure.c) ---- */

/* Calls `f` on `n` inputs from inside the transforms (scopes suspended): the closure runs with
 * the caller's scopes as they were, inside a scope of its own. Outputs are appended to `out`. */
nv_status nv__closure_call(const nv_closure *f, nv_array *const *in, size_t n, nv_vec *out);

/* The payload of `f` when its function is `fn`, else NULL (how a transform recognizes the
 * closures it made, e.g. nv_compile_get_stats). */
void *nv__closure_payload(const nv_closure *f, nv_closure_fn fn);

/* ---- The graph walk (src/transforms/graph.c) ---- */

/* The nodes between the `sources` and the outputs, in an order where inputs come first: every
 * node reachable from the outputs through the tracers of the calling thread's transform,
 * stopping at the sources. dep[i] tells whether node i depends on a source. The walk reads a
 * node's inputs under its lock and keeps them (held) in the tape: node k's inputs are
 * nv__tape_inputs(t, k)[0 .. in_n[k]), none for the nodes it stops at. */
typedef struct nv__tape {
  nv__node **nodes; /* each held */
  bool *dep;
  size_t n;
  size_t nsrc; /* the distinct sources: nodes[0 .. nsrc) */
  struct nv__tape_map *map;
  nv__input *ins; /* every walked node's inputs, each held */
  size_t nins;
  size_t *in_at;  /* node k's inputs start at ins[in_at[k]] */
  int *in_n;      /* and number in_n[k] */
} nv__tape;

static inline const nv__input *nv__tape_inputs(const nv__tape *t, size_t k) {
  return t->ins ? t->ins + t->in_at[k] : NULL;
}

nv_status nv__tape_build(nv__tape *t, nv__node *const *sources, size_t nsrc,
                         nv_array *const *outs, size_t nout);
/* The position of `node` in the tape, or -1. */
long nv__tape_find(const nv__tape *t, const nv__node *node);
void nv__tape_free(nv__tape *t);

/* The backward pass shared by vjp, grad and value_and_grad: the gradients of the sum of
 * cotangent · output with respect to each source array (new references; zeros for sources the
 * outputs do not reach). `cots[i]` may be NULL (zero). */
nv_status nv__tf_backward(const char *op, nv_array *const *sources, size_t nsrc,
                          nv_array *const *outs, nv_array *const *cots, size_t nout,
                          nv_array **grads);

/* The forward pass of jvp: the tangent of each output (new references; zeros where none). */
nv_status nv__tf_forward(const char *op, nv_array *const *sources, nv_array *const *tans,
                         size_t nsrc, nv_array *const *outs, size_t nout, nv_array **out_tans);

/* vjp of `f` at `n` primals with one cotangent per output (`ncot`): f's outputs appended to
 * `outputs` (may be NULL) and one gradient per primal in `grads`. Scopes must be suspended. */
nv_status nv__tf_vjp(const char *op, const nv_closure *f, nv_array *const *primals, size_t n,
                     nv_array *const *cots, size_t ncot, nv_vec *outputs, nv_array **grads);

/* Releases `n` arrays of a list (NULL entries allowed). */
void nv__tf_release_all(nv_array **xs, size_t n);
/* conj(x) for a complex64 x, x itself otherwise; takes x over (autodiff.c: the API's complex
 * convention, MLX's, from the rules' transpose convention). */
nv_array *nv__tf_conj_complex(nv_array *x);
/* The jvp of closure f (a rule's composed form) at its m primals xs along tan (NULL: zero),
 * its first nout tangents into ot. NV_ERR_OUT_OF_MEMORY for a NULL f. */
nv_status nv__tf_closure_jvp(const nv_closure *f, nv_array *const *xs, nv_array *const *tan,
                            int m, nv_array **ot, int nout);

/* Whether two arrays have the same shape. */
bool nv__tf_same_shape(const nv_array *a, const nv_array *b);

#endif
