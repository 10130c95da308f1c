/* nuvec — function transforms with MLX's semantics: vjp, jvp, grad, value_and_grad, vmap,
 * stop_gradient, custom functions and checkpoint, compile, and function export and import.
 *
 * A function is a closure (nv_closure): a C function, a payload and the payload's destructor.
 * It receives its inputs as a list and appends its outputs to a list it is given. Transforms
 * trace the function with tracer arrays on the calling thread and apply each primitive's rules
 * (src/transforms, docs/transforms.md); the closures they return are functions like any other,
 * so transforms nest (grad of grad, vmap of grad, jvp of vjp, grad inside vmap).
 *
 * Decided rules (MLX 0.32 where it is defined, written here where it is not obvious):
 * - Gradients flow through inexact dtypes only: astype to or from bool or an integer type has a
 *   zero derivative (the values are piecewise constant), and so do the fp8 conversions.
 * - maximum(a, b): a receives the cotangent where a > b, b where a <= b (ties go to b); minimum:
 *   a where a < b, b where a >= b (ties go to b). Where either is NaN neither receives it.
 * - abs'(x) is sign(x): 0 at 0. Complex inputs to abs have no rule (an error naming abs).
 * - full, arange and eye are constants: no gradient flows into full's fill value.
 * - Element-wise ops (docs/transforms.md lists each): complex rules multiply by f'(z) without
 *   conjugating; imag's transpose is c -> -ic. power(a, b): d/db is 0 where a^b is 0 (so
 *   d/db at a = b = 0 is -inf, d/da there NaN), as MLX. remainder: d/da = 1, d/db =
 *   -floor(a/b); divmod's remainder output follows remainder (MLX: zero), its quotient and
 *   floor_divide have zero gradient. where gives the condition none; view passes gradients
 *   only between same-size real floating dtypes.
 * - Index arrays, masks and dynamic starts get no gradient. scatter and put_along_axis with
 *   duplicate indices give the cotangent to the update actually written (the last), not to
 *   every duplicate as MLX; scatter_max/min and slice_update_max/min give the whole cotangent
 *   to the base and every update equal to the result (MLX); scatter_prod and
 *   slice_update_prod have exact rules, zeros included (MLX has none).
 * - matmul and addmm transpose without conjugating (MLX, JAX); vecdot = Σ conj(a)·b gives b
 *   cot·conj(a) and a conj(cot·b). addmm with alpha = 0 (beta = 0) gives a and b (c) none.
 * - A function's outputs after the first are auxiliary: grad and value_and_grad differentiate
 *   the first output only and carry the others through unchanged. */
#ifndef NUVEC_TRANSFORMS_H
#define NUVEC_TRANSFORMS_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Closures ---- */

/* A function's body: reads `inputs` (borrowed) and appends its results to `outputs` with
 * nv_vec_push. It runs on the thread that applies it, inside a scope opened for the call and
 * closed when it returns, so expression-style code leaks nothing: the scope releases every
 * array the body created, and `outputs` keeps the ones pushed. The body therefore releases
 * nothing it pushed (see nv_scope_begin). Returns NV_OK, or an error status with the thread's
 * message set (a failing library call has already set it). */
typedef nv_status (*nv_closure_fn)(void *payload, const nv_vec *inputs, nv_vec *outputs);

/* A counted function value: `fn` with `payload`, and `destroy(payload)` (may be NULL) called
 * when the last reference is released. */
typedef struct nv_closure nv_closure;

/* A new closure (one reference, owned by the caller). NULL with NV_ERR_INVALID_ARGUMENT for a
 * NULL `fn` or NV_ERR_OUT_OF_MEMORY (see nv_last_error); `destroy` is not called then. */
NV_API nv_closure *nv_closure_new(nv_closure_fn fn, void *payload, void (*destroy)(void *));

/* Adds a reference to `f` and returns it; NULL-safe. Thread-safe. */
NV_API nv_closure *nv_closure_retain(nv_closure *f);

/* Gives back one reference; the payload is destroyed with the last one. NULL-safe. */
NV_API void nv_closure_release(nv_closure *f);

/* Calls `f` on `inputs` and appends its outputs to `outputs` (each retained by the list), only
 * when it succeeds. Fails with NV_ERR_INVALID_ARGUMENT for NULL arguments, or with the
 * function's status. */
NV_API nv_status nv_closure_apply(const nv_closure *f, const nv_vec *inputs, nv_vec *outputs);

/* ---- Differentiation ---- */

/* The vector-Jacobian product of `f` at `primals`: appends f's outputs to `outputs` (may be
 * NULL) and, to `vjps`, one array per primal: the sum over outputs of cotangent · ∂output/∂
 * primal (zeros where a primal does not reach an output). `cotangents` holds one array per
 * output, of its shape (converted to its dtype). Fails with NV_ERR_INVALID_ARGUMENT, naming
 * vjp, for a count or shape of cotangents that does not match the outputs, and with
 * NV_ERR_UNSUPPORTED for a primitive on the path without a vjp rule. Lists are appended only on
 * success. */
NV_API nv_status nv_vjp(const nv_closure *f, const nv_vec *primals, const nv_vec *cotangents,
                        nv_vec *outputs, nv_vec *vjps);

/* The Jacobian-vector product of `f` at `primals` along `tangents` (one per primal, of its
 * shape): appends f's outputs to `outputs` (may be NULL) and, to `jvps`, one array per output
 * (zeros where an output does not depend on the primals). Errors as nv_vjp, naming jvp. */
NV_API nv_status nv_jvp(const nv_closure *f, const nv_vec *primals, const nv_vec *tangents,
                        nv_vec *outputs, nv_vec *jvps);

/* A function computing the gradient of f's first output, which must have exactly one element
 * (a scalar), with respect to the inputs listed in `argnums` (`nargnums` of them; NULL means
 * input 0). Applied, it appends one gradient per argnum, in argnum order, each of its input's
 * shape and dtype; f's other outputs are discarded. Returns a new closure (NULL with the error
 * set for a negative or repeated argnum, or out of memory). When applied it fails with
 * NV_ERR_INVALID_ARGUMENT, naming grad, for an argnum out of range of the inputs or a first
 * output that is not a scalar. */
NV_API nv_closure *nv_grad(const nv_closure *f, const int *argnums, size_t nargnums);

/* As nv_grad, but the function appends f's outputs first (the value, then the auxiliary
 * outputs, unchanged) and then the gradients of the value: the last `nargnums` arrays. */
NV_API nv_closure *nv_value_and_grad(const nv_closure *f, const int *argnums, size_t nargnums);

/* nv_stop_gradient (an identity view through which no gradient flows) is declared in
 * nuvec/elementwise.h. */

/* ---- Vectorization ---- */

/* The in_axes / out_axes value meaning "not mapped" (MLX's None). */
#define NV_VMAP_NONE (-2147483647 - 1)

/* A function mapping f over an axis of its inputs: input i is split along in_axes[i]
 * (negative counts from the end; NV_VMAP_NONE: passed whole to every call) and output j is
 * stacked along out_axes[j] (counted in the result; NV_VMAP_NONE: the output must not depend on
 * the mapped inputs and is returned once). NULL axes mean 0 for every input / output, and a
 * single value applies to all. The mapping is vectorized, not a loop: f is traced once with
 * the mapped axes removed and each primitive's vmap rule batches it. Inside f the values of
 * mapped inputs cannot be read (evaluating them fails). Returns a new closure (NULL when out
 * of memory). Applied, it fails with NV_ERR_INVALID_ARGUMENT, naming vmap, for a count of axes
 * that matches neither 1 nor the inputs / outputs, an axis out of range, mapped axes of
 * different sizes, no mapped input, or a mapped output whose out_axes is NV_VMAP_NONE. */
NV_API nv_closure *nv_vmap(const nv_closure *f, const int *in_axes, size_t n_in,
                           const int *out_axes, size_t n_out);

/* ---- Custom rules and checkpointing ---- */

/* A function computing what `f` computes, with the transforms' rules given by closures (each
 * may be NULL: then the transform goes through f's own graph), as MLX's custom_function:
 * - vjp receives (primals..., cotangents..., outputs...) — one cotangent per output, zeros
 *   where none reached it — and appends one gradient per primal;
 * - jvp receives (primals..., tangents...) — zeros for primals without one — and appends one
 *   tangent per output;
 * - vmap receives (inputs..., axes) where axes is a 1-D int32 array with each input's batch
 *   axis (-1: not mapped), and appends (outputs..., out_axes) in the same form.
 * Every closure given is retained. Returns a new closure (NULL when `f` is NULL or out of
 * memory). A rule's wrong count or shape of results fails the transform, naming the function. */
NV_API nv_closure *nv_custom_function(const nv_closure *f, const nv_closure *vjp,
                                      const nv_closure *jvp, const nv_closure *vmap);

/* A function computing what `f` computes that keeps none of f's intermediate values for the
 * backward pass: its vjp evaluates f again (gradient checkpointing), trading compute for
 * memory. Gradients equal those of `f`. Returns a new closure (NULL as nv_custom_function). */
NV_API nv_closure *nv_checkpoint(const nv_closure *f);


/* ---- Compilation ---- */

/* What nv_compile does, process-wide (MLX's CompileMode): DISABLED calls the functions as they
 * are; NO_SIMPLIFY traces and replays without simplifying; NO_FUSE also simplifies the traced
 * graph (equal scalar constants merged, no-op copies dropped, equivalent nodes shared, unused
 * nodes dropped; stop_gradient dropped where no transform is tracing the call); ENABLED also
 * fuses chains of element-wise operations into kernels generated at run time (on CPU streams
 * C compiled by NUVEC_CC or cc, on GPU streams CUDA C compiled by NVRTC for sm_90; cached in
 * $XDG_CACHE_HOME/nuvec; without a working compiler they stay unfused, with one warning).
 * Calls under a transform (grad, vmap, ...) replay unfused. */
typedef enum nv_compile_mode {
  NV_COMPILE_MODE_DISABLED = 0,
  NV_COMPILE_MODE_NO_SIMPLIFY = 1,
  NV_COMPILE_MODE_NO_FUSE = 2,
  NV_COMPILE_MODE_ENABLED = 3,
} nv_compile_mode;

/* Options of nv_compile (zero-initialized: none).
 * - shapeless: one trace serves inputs of any shape of the same rank and dtype while every
 *   traced operation has a shape rule, as MLX's primitives infer their output shapes:
 *   element-wise operations and astype (broadcasting), reductions over fixed axes (var, std,
 *   median, logsumexp and argmax/argmin too), scans and sorts along an axis, transposes, matrix
 *   products, and reshape with its -1 axis inferred again; a graph with another
 *   shape-dependent operation (a slice, an indexing op, a constant of the traced shape, ...) is
 *   traced again for each new input shape. Inputs that the rules do not fit (shapes that do not
 *   broadcast, a reshape to a traced shape of another size) fail with the op's error, as
 *   MLX's.
 * - inputs / outputs: captured state (MLX's inputs= / outputs=), lists the caller owns and keeps
 *   alive as long as the compiled function. Before each call the current arrays of `inputs`
 *   become extra inputs of the traced graph (the function reads them from the list); after it
 *   the arrays the function left in `outputs` are extra outputs, and each call stores their new
 *   values there. The two may be the same list. */
typedef struct nv_compile_options {
  bool shapeless;
  nv_vec *inputs;
  nv_vec *outputs;
} nv_compile_options;

/* A function computing what `f` computes, traced once per input signature (each input's dtype,
 * shape, strides and weak-scalar flag, the captured state's, the current stream; shapeless: see
 * above) and replayed from the recorded graph on later calls without calling f again. Inside
 * the trace the inputs have no values: evaluating anything computed from them fails. Arrays f
 * reads that are not inputs (constants, captured arrays) are kept as they were at the trace.
 * The replayed graph is made of ordinary primitives, so grad, vjp, jvp and vmap of the
 * compiled function work as on f. Thread-safe; the closure may be released on any thread.
 * `options` may be NULL. Returns a new closure (NULL when `f` is NULL or out of memory). */
NV_API nv_closure *nv_compile(const nv_closure *f, const nv_compile_options *options);

/* nv_set_compile_mode(NV_COMPILE_MODE_DISABLED) / (NV_COMPILE_MODE_ENABLED), as MLX's
 * disable_compile / enable_compile. NUVEC_DISABLE_COMPILE=1 in the environment starts the
 * process disabled. */
NV_API void nv_disable_compile(void);
NV_API void nv_enable_compile(void);
NV_API void nv_set_compile_mode(nv_compile_mode mode);
NV_API nv_compile_mode nv_get_compile_mode(void);

/* Writes the graph of unevaluated work behind `outputs` (n of them) to the file `path` in
 * Graphviz's DOT format, as MLX's export_to_dot: evaluated arrays are sources, each node a box
 * labelled with its primitive, arrays named by `names` (nnamed, for the arrays `named`; the
 * walk stops at them) or else A, B, .... Fails with NV_ERR_INVALID_ARGUMENT for NULL
 * arguments, NV_ERR_IO when the file cannot be written. */
NV_API nv_status nv_export_to_dot(const char *path, nv_array *const *outputs, size_t n,
                                  const char *const *names, nv_array *const *named,
                                  size_t nnamed);

/* Counters of a compiled function (for tests and tuning). */
typedef struct nv_compile_stats {
  size_t calls;        /* calls while compilation was enabled */
  size_t traces;       /* times f was traced */
  size_t entries;      /* signatures cached */
  size_t traced_nodes; /* nodes of the last trace, before simplification */
  size_t nodes;        /* nodes of the last trace as replayed, after simplification */
  size_t fused;        /* generated kernels of the last trace (fused element-wise chains); for a
                          shapeless function's trace replayed on other shapes, the kernels
                          its last call ran */
  size_t fused_layouts; /* layout classes a shapeless function's chains were fused for: each
                           class's kernels are generated once and take the sizes of every
                           call of that class as arguments */
} nv_compile_stats;

/* Fills `*stats` for a closure nv_compile returned. Fails with NV_ERR_INVALID_ARGUMENT for
 * NULL arguments or a closure that is not a compiled function. */
NV_API nv_status nv_compile_get_stats(const nv_closure *compiled, nv_compile_stats *stats);


/* ---- Export and import (MLX's export_function / import_function / exporter) ---- */

/* Options of an export (zero-initialized: none).
 * - shapeless: a trace also serves inputs of other shapes of the same ranks and dtypes where
 *   every operation depending on an input has one of compile's shapeless shape rules (see
 *   nv_compile_options); a call of another shape on a trace with other operations fails,
 *   naming the first one, as MLX's does.
 * - metadata: a string stored in the file (metadata_len bytes, or up to its NUL when 0), read
 *   back with nv_imported_metadata. */
typedef struct nv_export_options {
  bool shapeless;
  const char *metadata;
  size_t metadata_len;
} nv_export_options;

/* An exporter: traces of one function, written into one file when it is closed. Not
 * thread-safe (one thread at a time). */
typedef struct nv_exporter nv_exporter;

/* A new exporter writing `path` when closed (f retained). `options` may be NULL. NULL with
 * NV_ERR_INVALID_ARGUMENT for a NULL path or function, or NV_ERR_OUT_OF_MEMORY. */
NV_API nv_exporter *nv_exporter_new(const char *path, const nv_closure *f,
                                    const nv_export_options *options);

/* Traces the exporter's function once on inputs of the signature of `args` (positional) and
 * `kwargs` (keyword; may be NULL): f receives the positional arrays, then the keyword ones in
 * ascending byte order of their names, on row-contiguous stand-ins without values (as
 * nv_compile traces), and the trace is kept for the file with the values of the arrays f read
 * that are not inputs (constants; stored once a file however many traces read them; arrays
 * not yet evaluated are stored as their graphs down to evaluated arrays). The inputs' values
 * are never read. Fails with NV_ERR_INVALID_ARGUMENT for a closed exporter, a NULL or failed
 * input, an input read through a captured array, a value of an enclosing transform, or a
 * primitive that a file cannot hold (custom functions, compiled kernels, custom CUDA kernels,
 * collectives: named); NV_ERR_UNSUPPORTED when a trace of the same signature (counts, names,
 * dtypes and shapes, or ranks when shapeless) is already in it; or with f's error. */
NV_API nv_status nv_exporter_call(nv_exporter *e, const nv_vec *args, const nv_map *kwargs);

/* Writes the file (every trace so far) and closes the exporter: later calls fail. Closing a
 * closed exporter does nothing. NV_ERR_IO when the file cannot be written. */
NV_API nv_status nv_exporter_close(nv_exporter *e);

/* Closes the exporter without writing its file (its traces are dropped). NULL-safe. */
NV_API void nv_exporter_discard(nv_exporter *e);

/* Whether the exporter is closed (true for NULL). */
NV_API bool nv_exporter_closed(const nv_exporter *e);

/* Closes the exporter if it is open (writing its file) and frees it; NULL-safe. */
NV_API void nv_exporter_free(nv_exporter *e);

/* Exports one trace of f for these inputs into `path` (an exporter called once and closed);
 * errors as nv_exporter_call and nv_exporter_close; no file is written when the trace fails. */
NV_API nv_status nv_export_function(const char *path, const nv_closure *f, const nv_vec *args,
                                    const nv_map *kwargs, const nv_export_options *options);

/* An imported function: the traces of a file. Counted; immutable, so calls from several
 * threads are safe. */
typedef struct nv_imported nv_imported;

/* Reads a file written by an exporter. The file's version, size and checksum are checked,
 * then every count, size, primitive name, layout and reference before use. NULL with
 * NV_ERR_IO (the message says what is wrong: a missing file, not a function file, another
 * format version, truncated or corrupt) or NV_ERR_OUT_OF_MEMORY. A new reference. */
NV_API nv_imported *nv_import_function(const char *path);

/* As nv_import_function, from `size` bytes in memory (copied where kept). */
NV_API nv_imported *nv_import_function_from_memory(const void *data, size_t size);

NV_API nv_imported *nv_imported_retain(nv_imported *m);
NV_API void nv_imported_release(nv_imported *m);

/* Calls the imported function: the trace whose signature matches `args` and `kwargs` (may be
 * NULL) — the same count of positional inputs, the same keyword names, each input's dtype and
 * shape (a shapeless trace: rank) — is replayed on them (inputs of other layouts are made
 * row-contiguous first) and its outputs appended to `outputs`. The result is a graph of
 * ordinary primitives, so transforms of a function that calls it work. Fails with
 * NV_ERR_INVALID_ARGUMENT, listing the traces, when none matches, and when a shapeless trace
 * without shape rules is called on other shapes. */
NV_API nv_status nv_imported_call(const nv_imported *m, const nv_vec *args, const nv_map *kwargs,
                                  nv_vec *outputs);

/* The metadata string stored with the function ("" when none; valid while m lives) and its
 * length in *len (may be NULL). */
NV_API const char *nv_imported_metadata(const nv_imported *m, size_t *len);

/* The number of traces in the file. */
NV_API size_t nv_imported_traces(const nv_imported *m);

/* A closure calling the imported function with positional inputs only (m retained). NULL
 * with NV_ERR_INVALID_ARGUMENT for NULL, or NV_ERR_OUT_OF_MEMORY. */
NV_API nv_closure *nv_imported_closure(nv_imported *m);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_TRANSFORMS_H */
