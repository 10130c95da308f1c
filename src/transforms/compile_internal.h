/* Internals of compile shared by the trace and replay (compile.c) and the
 * fusion of element-wise chains into generated kernels (fuse.c). */
#ifndef NUVEC_TRANSFORMS_COMPILE_INTERNAL_H
#define NUVEC_TRANSFORMS_COMPILE_INTERNAL_H

#include "transforms/transforms_internal.h"

/* ---- Recipes ---- */

enum { R_SRC, R_NODE, R_CONST };

/* Where a value comes from: source i (an input of the call, then the captured
 * state), output `idx` of recipe node i, or output `idx` of constant i. */
typedef struct ref {
  int kind, i, idx;
} ref;

typedef struct rout {
  nv_dtype dtype;
  int ndim;
  uint8_t weak;
  int shape[NV__MAX_DIMS];
  int64_t strides[NV__MAX_DIMS];
} rout;

typedef struct rnode {
  int prim, nin, nout;
  nv_stream stream;
  size_t params_size;
  void *params;
  ref *in;
  rout *out;
} rnode;

typedef struct recipe {
  rnode *nodes;
  size_t n, traced;
  nv__input *consts; /* held node references */
  size_t nconst;
  ref *outs;
  size_t nout;
  bool poly; /* every node element-wise: replayable on other shapes of the same
                rank */
} recipe;

void nv__recipe_free(recipe *r);

/* Traces f on stand-ins for `src` (nuser inputs, then the captured state read from and put
 * back into `state_in`; `state_out`'s arrays after f's outputs) into the recipe `r`; *nout_user
 * is f's own output count. The stand-ins have the sources' layouts and weak flags, or with
 * `row` their shapes row-contiguous and strongly typed (export: an imported trace replays on
 * inputs made row-contiguous). *cacheable as recipe_build sets it (false when a constant is a
 * tracer of an enclosing transform). Scopes are suspended. */
nv_status nv__compile_trace(const nv_closure *f, nv_vec *state_in, nv_vec *state_out,
                            nv_array *const *src, size_t nsrc, size_t nuser, bool row, recipe *r,
                            size_t *nout_user, bool *cacheable);

/* Simplifies a traced recipe in place (compile.c's simplify; `src` the sources' metadata at
 * the trace). */
nv_status nv__compile_simplify(recipe *r, const nv__output *const *src);

/* The recipe's outputs (new unscoped references in `res`, r->nout of them) for the sources
 * `src`; `poly`: shapes by the nodes' shape rules (a shapeless entry). A node whose stream
 * index is negative runs on the current stream. Scopes are suspended. */
nv_status nv__compile_replay(const recipe *r, bool poly, bool simplified, nv_array *const *src,
                             nv_array **res);

/* Whether primitive `prim` replays on inputs of other shapes by a shape rule (element-wise,
 * astype, reductions over fixed axes, reshape): a shapeless entry's nodes. */
bool nv__compile_poly_prim(int prim);
/* The recipe metadata of an output. */
void nv__rout_of(rout *r, const nv__output *o);

/* ---- Fusion (fuse.c) ---- */

/* A generated kernel: its outputs out[0..) for the indices e in [lo, hi) of output 0 (its
 * elements, or for a chain ending in a reduction its rows), from the inputs' element-0
 * pointers. Outputs after the first are intermediates of the chain used outside it. */
typedef void (*nv__fused_fn)(int64_t lo, int64_t hi, const void *const *in, void *const *out);

/* A compiled kernel shared by the COMPILED nodes that run it, counted (the
 * nodes hold it through a keeper input, as custom functions hold their
 * closures). */
typedef struct nv__fused {
  atomic_long refs;
  nv__fused_fn fn; /* a CPU chain's kernel (NULL for a GPU chain) */
  const void *gpu; /* a GPU chain's: the cudaKernel_t of its generated CUDA kernel */
  int nin;         /* data inputs (the keeper follows them) */
  bool reduce;     /* whether the chain ends in a reduction (else it is element-wise) */
  /* GPU chains' launch (fuse.c's generate_cuda describes the kernel): a reduction's rows of
   * `cols` elements, each taken by `group` threads (32 or 256); else whether the kernel may
   * step `lanes` (4, or 8 for float16/bfloat16 chains) elements at a time (its inputs all
   * whole or scalars). */
  bool vec;
  int group, lanes;
  int64_t cols;
  /* Its name in export_to_dot, as MLX names fused kernels: "Compiled" and the CamelCase names
   * of the operations it computes in order (a broadcast it reads counted where first read). */
  char name[128];
} nv__fused;

/* A primitive's name in CamelCase ("broadcast_to" -> "BroadcastTo") into buf (dot.c). */
void nv__dot_camel(const char *s, char *buf, size_t size);

/* The most outputs of a COMPILED node: its root and the intermediates used outside it. */
#define NV__COMPILED_MAX_OUT 8

typedef struct nv__compiled_params {
  nv__fused *k;
} nv__compiled_params;

/* The on-disk cache of compiled kernels ($XDG_CACHE_HOME/nuvec, else ~/.cache/nuvec, else
 * /tmp/nuvec; created), written into `dir`; false when none can be made. */
bool nv__compile_cache_dir(char *dir, size_t n);

/* FNV-1a of string `s` continuing hash `h` (0xcbf29ce484222325 to start): cache keys. */
uint64_t nv__compile_hash(uint64_t h, const char *s);

/* The kernel of a generated CUDA source (src/cuda/compiled.c): compiled by NVRTC for sm_90 or
 * found in the caches (in memory by source, on disk as <hash>.cubin under $XDG_CACHE_HOME/nuvec
 * or ~/.cache/nuvec), loaded with cudaLibraryLoadData; a cudaKernel_t, which the runtime takes
 * where it takes a kernel's host address. NULL when NVRTC fails (warned once: the chain then
 * stays unfused). */
const void *nv__gpu_fused_kernel(const char *source);

/* Whether NVRTC compiles a generated CUDA source for sm_90 (or NUVEC_NVRTC_ARCH), without
 * loading it (no GPU needed); the reason in `why` when not. */
bool nv__gpu_nvrtc_compiles(const char *source, char *why, size_t n);

/* Test hook: while `on`, fusing a chain on a CPU stream also compiles the CUDA source the
 * chain would get on a GPU stream with NVRTC (nv__gpu_nvrtc_compiles); *ok and *failed count
 * the outcomes so far, *why is the last failure's reason. False (counts 0) without the CUDA
 * backend. */
bool nv__test_fuse_nvrtc(bool on, long *ok, long *failed, const char **why);

/* Replaces chains of element-wise nodes of `r` (CPU and GPU streams) by COMPILED
 * nodes running generated kernels, compiled by the system C compiler or NVRTC; `src` are
 * the sources' metadata at the trace. Chains it cannot compile stay as they
 * are. Sets *nfused to the kernels made. */
nv_status nv__fuse_recipe(recipe *r, const nv__output *const *src, size_t *nfused);

/* Drops the nodes no output of `r` reaches, keeping the others' order and renumbering the
 * references to them (fuse.c; simplify's last step too). */
nv_status nv__compile_compact(recipe *r);

/* A deep copy of a recipe (constants retained). */
nv_status nv__recipe_copy(recipe *dst, const recipe *src);

#endif
