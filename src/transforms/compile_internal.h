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
   * `cols` elements (a traced CPU reduction's row length too: its rows' split across the
   * pool), each taken by `group` threads (32 or 256); else whether the kernel may step `lanes`
   * (4, or 8 for float16/bfloat16 chains) elements at a time (its inputs all whole or
   * scalars). */
  bool vec;
  int group, lanes;
  int64_t cols;
  /* A shapeless chain's kernel takes its sizes as arguments (nv__compiled_params' nsz words:
   * the CPU kernel as the pointer in[nin], the GPU kernel after the count); false: they are
   * literals of its source. */
  bool dyn;
  /* Its name in export_to_dot, as MLX names fused kernels: "Compiled" and the CamelCase names
   * of the operations it computes in order (a broadcast it reads counted where first read). */
  char name[128];
} nv__fused;

/* A primitive's name in CamelCase ("broadcast_to" -> "BroadcastTo") into buf (dot.c). */
void nv__dot_camel(const char *s, char *buf, size_t size);

/* The most outputs of a COMPILED node: its root and the intermediates used outside it. */
#define NV__COMPILED_MAX_OUT 8

/* A COMPILED node's parameters: its kernel, and for a chain of a shapeless function the sizes
 * its kernel reads at run time (the shapes of the call: see nv__fchain), `nsz` words. */
typedef struct nv__compiled_params {
  nv__fused *k;
  int nsz;
  int64_t sz[];
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

/* ---- Fusion inside shapeless functions (fuse.c) ----
 *
 * A shapeless entry's recipe is replayed on inputs of any shapes of the traced ranks, so its
 * chains are found again per call on the call's metadata (nv__fuse_plan): how each chain reads
 * each input against the shape it computes (a whole row-contiguous array, a broadcast
 * row-contiguous block, one element) decides its kernel, the sizes do not. The plan's key
 * names what the kernels depend on (the chains, the inputs' kinds, a GPU launch's class), so
 * a function keeps one set of kernels per key (compile.c), made by nv__fuse_plan_kernel with
 * their sizes as run-time arguments. */

/* How a chain reads one of its inputs: the whole array (row-contiguous, the chain's shape), a
 * trailing block (a broadcast row: element e reads e % inner), one element, or a block of the
 * chain's dimensions broadcast over the others (element e reads (e / div) % inner). */
enum { NV__IN_FULL, NV__IN_TRAIL, NV__IN_SCALAR, NV__IN_BLOCK };

typedef struct nv__chain_in {
  ref r;
  /* A broadcast node outside the chain that the members read (kind R_NODE), read through its
   * own input r instead; via.kind == -1 when none. */
  ref via;
  nv_dtype dtype;
  int kind;
  int64_t inner; /* NV__IN_TRAIL, NV__IN_BLOCK: the input's element count */
  int64_t div;   /* NV__IN_BLOCK: element e reads ((e / div) % inner), div > 1 */
} nv__chain_in;

/* One chain of a plan: its members (recipe order, the root last), the intermediates used
 * outside it (the fused node's outputs after the first), its data inputs in the kernel's
 * order, its launch (nv__fused's reduce, vec, lanes, group) and the sizes its kernel takes
 * for this call: sz[0] a reduction's row length or an element-wise kernel's run (the shortest
 * period of its broadcast inputs, 0 when none), then per input its inner and div. */
typedef struct nv__fchain {
  size_t root, nm, *members;
  size_t esc[NV__COMPILED_MAX_OUT - 1];
  int nesc, nins, nsz;
  nv__chain_in *ins;
  bool reduce, vec;
  int lanes, group;
  int64_t *sz;
  int ndim;         /* the shape it computes on this call (the call's metadata) */
  const int *shape;
} nv__fchain;

typedef struct nv__fplan {
  nv__fchain *c;
  size_t nc;
  int *chain; /* per recipe node: the chain it is a member of, or -1 */
  int64_t *key; /* the chains' structure, kinds and launches (not their sizes) */
  size_t nkey;
  size_t *members_buf;
  nv__chain_in *ins_buf;
  int64_t *sz_buf;
} nv__fplan;

/* The chains of the poly recipe `r` for a call whose sources have the metadata `src` and
 * whose nodes (one output each) have `nodes` (compile.c's shape pass), as nv__fuse_recipe
 * would find them on a trace of these layouts; chains whose inputs cannot be read (a
 * transposed input, ...) are left out. */
nv_status nv__fuse_plan(const recipe *r, const nv__output *nodes, const nv__output *const *src,
                        nv__fplan *p);
void nv__fplan_free(nv__fplan *p);

/* The kernel of chain i of plan p, generated with its sizes as arguments and compiled (C or,
 * on a GPU stream, CUDA C), held by a keeper node (*keeper, a new reference; the node's
 * buffer holds the kernel *k). *keeper is NULL when no kernel can be had (no compiler): the
 * chain then stays unfused. */
nv_status nv__fuse_plan_kernel(const recipe *r, const nv__fplan *p, size_t i,
                               const nv__output *const *src, nv__node **keeper, nv__fused **k);

/* Whether recipe r has a chain that nv__fuse_plan could find on some layouts: two fusable
 * nodes, one reading the other. */
bool nv__fuse_may(const recipe *r, const nv__output *const *src);

/* Drops the nodes no output of `r` reaches, keeping the others' order and renumbering the
 * references to them (fuse.c; simplify's last step too). */
nv_status nv__compile_compact(recipe *r);

/* A deep copy of a recipe (constants retained). */
nv_status nv__recipe_copy(recipe *dst, const recipe *src);

#endif
