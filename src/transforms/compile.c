/* compile (DESIGN §8): a compiled function traces f once per input signature on
 * stand-ins that have no values, records the traced graph as a recipe
 * (primitive, parameters, output metadata and where each input comes from: an
 * input of the call, an earlier recipe node, or a constant kept from the
 * trace), simplifies the recipe, and replays it on the real inputs at every
 * call, the first one included. The replayed nodes are ordinary primitives
 * built as their builders build them, so evaluation, donation and every
 * transform see what f would have built. */
#include <pthread.h>
#include <stdlib.h>

#include "core/ptrmap.h"
#include "ops/reduce_internal.h"
#include "ops/reduce_params.h"
#include "transforms/compile_internal.h"

/* ---- The mode (process-wide) ---- */

static atomic_int compile_mode = -1; /* -1: not read from the environment yet */

static nv_compile_mode mode_now(void) {
  int m = atomic_load_explicit(&compile_mode, memory_order_acquire);
  if (m >= 0)
    return (nv_compile_mode)m;
  const char *v = getenv("NUVEC_DISABLE_COMPILE");
  int init = v && *v && strcmp(v, "0") ? NV_COMPILE_MODE_DISABLED : NV_COMPILE_MODE_ENABLED;
  atomic_compare_exchange_strong(&compile_mode, &m, init);
  return (nv_compile_mode)atomic_load(&compile_mode);
}

void nv_set_compile_mode(nv_compile_mode mode) {
  if (mode < NV_COMPILE_MODE_DISABLED || mode > NV_COMPILE_MODE_ENABLED)
    return;
  atomic_store_explicit(&compile_mode, (int)mode, memory_order_release);
}
nv_compile_mode nv_get_compile_mode(void) { return mode_now(); }
void nv_disable_compile(void) { nv_set_compile_mode(NV_COMPILE_MODE_DISABLED); }
void nv_enable_compile(void) { nv_set_compile_mode(NV_COMPILE_MODE_ENABLED); }

void nv__recipe_free(recipe *r) {
  for (size_t k = 0; k < r->n; k++) {
    nv__free(r->nodes[k].params);
    nv__free(r->nodes[k].in);
    nv__free(r->nodes[k].out);
  }
  for (size_t i = 0; i < r->nconst; i++)
    nv__node_release(r->consts[i].node);
  nv__free(r->nodes);
  nv__free(r->consts);
  nv__free(r->outs);
  memset(r, 0, sizeof *r);
}

/* ---- Signatures ---- */

/* A call's signature: per source its dtype, rank and weak flag, and (unless
 * shapeless) its shape and strides; then the stream. Flat int64 words compared
 * whole. */
typedef struct sig {
  int64_t *w;
  size_t n;
} sig;

static nv_status sig_build(sig *g, nv_array *const *src, size_t nsrc, bool shapes) {
  size_t cap = 2;
  for (size_t i = 0; i < nsrc; i++)
    cap += 3 + (shapes ? 2 * (size_t)nv__out(src[i])->ndim : 0);
  g->w = nv__malloc(cap * sizeof *g->w);
  if (!g->w)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < nsrc; i++) {
    const nv__output *o = nv__out(src[i]);
    g->w[n++] = o->dtype;
    g->w[n++] = o->ndim;
    g->w[n++] = o->flags & NV__FLAG_WEAK;
    for (int d = 0; shapes && d < o->ndim; d++) {
      g->w[n++] = o->shape[d];
      g->w[n++] = o->shape[d] == 1 ? 0 : o->strides[d]; /* a size-1 axis's stride is unused */
    }
  }
  nv_stream st = nv_current_stream();
  g->w[n++] = st.index;
  g->w[n++] = ((int64_t)st.device.type << 32) | (uint32_t)st.device.index;
  g->n = n;
  return NV_OK;
}

static bool sig_equal(const sig *a, const sig *b) {
  return a->n == b->n && !memcmp(a->w, b->w, a->n * sizeof *a->w);
}

/* ---- The compiled function ---- */

/* The kernels of a shapeless entry's chains for one layout class (a key of nv__fuse_plan: the
 * chains, how they read their inputs, their launches): per chain the keeper node holding its
 * kernel, NULL where none could be made (it stays unfused). Made once per class: every call
 * whose plan has the key replays with them, passing its sizes. */
typedef struct fclass {
  struct fclass *next;
  int64_t *key;
  size_t nkey, nc;
  nv__node **keeper;
  nv__fused **k;
} fclass;

/* The layout classes an entry keeps: beyond them, calls of new classes replay unfused. */
#define MAX_FCLASSES 16

static void fclass_free(fclass *f) {
  for (size_t i = 0; f->keeper && i < f->nc; i++)
    if (f->keeper[i])
      nv__node_release(f->keeper[i]);
  nv__free(f->keeper);
  nv__free(f->k);
  nv__free(f->key);
  nv__free(f);
}

typedef struct entry {
  struct entry *next;
  sig key; /* shapeless and poly: without shapes; else with them */
  bool poly;
  size_t nuser; /* outputs of f; the rest are the captured state's */
  recipe r;
  /* r with its element-wise chains fused (nfused > 0), replayed where no
   * transform traces the call: transforms replay r, whose nodes have rules. */
  recipe rf;
  size_t nfused;
  /* A shapeless (poly) entry with chains that some layouts fuse: each call plans them on its
   * own layouts and replays with its class's kernels (under the function's lock: the list
   * grows, at most MAX_FCLASSES). */
  bool fuse;
  fclass *classes;
  size_t nclasses;
} entry;

typedef struct compiled {
  nv_closure *f;
  bool shapeless;
  nv_vec *state_in, *state_out;
  pthread_mutex_t lock;
  entry *entries; /* immutable once listed; freed with the function */
  atomic_size_t calls, traces, nentries, traced_nodes, nodes, fused, layouts;
} compiled;

static void entry_free(entry *e) {
  nv__recipe_free(&e->r);
  if (e->nfused)
    nv__recipe_free(&e->rf);
  for (fclass *f = e->classes, *next; f; f = next) {
    next = f->next;
    fclass_free(f);
  }
  nv__free(e->key.w);
  nv__free(e);
}

static void compiled_free(void *p) {
  compiled *c = p;
  for (entry *e = c->entries, *next; e; e = next) {
    next = e->next;
    entry_free(e);
  }
  pthread_mutex_destroy(&c->lock);
  nv_closure_release(c->f);
  nv__free(c);
}

/* ---- Tracing ---- */

/* A stand-in for source x: its metadata (row-contiguous and strongly typed when `row`: an
 * exported trace, replayed on inputs of any layout made row-contiguous), no values, a tracer of
 * this thread's session. */
static nv_array *stand_in(const nv_array *x, bool row) {
  const nv__output *o = nv__out(x);
  nv__node *n = nv__node_new(NV__PRIM_COMPILE_INPUT, NULL, 0, 1, 0);
  if (!n)
    return nv__array_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  if (nv__output_set_shape(&n->out[0], o->dtype, o->shape, o->ndim) != NV_OK) {
    nv__node_release(n);
    return nv__array_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  if (!row) {
    nv__output_set_strides(&n->out[0], o->strides);
    n->out[0].flags |= o->flags & NV__FLAG_WEAK;
  }
  nv__node_mark_tracer(n);
  return nv__array_new(n, 0);
}

/* A reduction over fixed axes (nv__reduce_params, axes normalised for the input's rank): on
 * inputs of another shape and the same rank its output's shape follows from its input's
 * (reduce_shape), as MLX's shapeless compile replays reductions. */
static bool is_plain_reduction(int prim) {
  switch (prim) {
    case NV__PRIM_SUM:
    case NV__PRIM_PROD:
    case NV__PRIM_MAX:
    case NV__PRIM_MIN:
    case NV__PRIM_ALL:
    case NV__PRIM_ANY:
    case NV__PRIM_MEAN: return true;
    default: return false;
  }
}

/* Whether a node may replay on inputs of other shapes: its outputs' shapes are
 * the broadcast of its inputs' and its parameters do not depend on shapes, or it is a
 * reduction over fixed axes. */
/* The shape rules beyond element-wise broadcasting and the plain reductions, as MLX's
 * primitives infer their output shapes: row reductions (nv__rows_params' axes), scans and sorts
 * along an axis (their input's shape), transposes (a view: the permuted shape and strides) and
 * matrix products (the broadcast batch, then M and N). */
enum { RULE_NONE, RULE_ROWS, RULE_SAME, RULE_TRANSPOSE, RULE_MATMUL };

static int shape_rule(int prim) {
  switch (prim) {
    case NV__PRIM_VAR:
    case NV__PRIM_STD:
    case NV__PRIM_MEDIAN:
    case NV__PRIM_LOGSUMEXP:
    case NV__PRIM_ARGMAX:
    case NV__PRIM_ARGMIN: return RULE_ROWS;
    case NV__PRIM_CUMSUM:
    case NV__PRIM_CUMPROD:
    case NV__PRIM_CUMMAX:
    case NV__PRIM_CUMMIN:
    case NV__PRIM_LOGCUMSUMEXP:
    case NV__PRIM_SORT:
    case NV__PRIM_ARGSORT: return RULE_SAME;
    case NV__PRIM_TRANSPOSE: return RULE_TRANSPOSE;
    case NV__PRIM_MATMUL: return RULE_MATMUL;
    default: return RULE_NONE;
  }
}

bool nv__compile_poly_prim(int prim) {
  return nv__prims[prim].elementwise || prim == NV__PRIM_ASTYPE || is_plain_reduction(prim) ||
         prim == NV__PRIM_RESHAPE || shape_rule(prim) != RULE_NONE;
}

/* The output shape (and a view's strides: *view set) of a replayed node with a shape_rule on
 * inputs `in` of the traced ranks. */
static nv_status rule_shape(const rnode *rn, const nv__output *const *in, int *shape, int *nd,
                            int64_t *strides, bool *view) {
  const char *name = nv__prims[rn->prim].name;
  const nv__output *a = in[0];
  *view = false;
  switch (shape_rule(rn->prim)) {
    case RULE_ROWS: {
      const nv__rows_params *p = rn->params;
      if (!p || rn->params_size < sizeof *p ||
          rn->params_size < sizeof *p + (size_t)p->naxes * sizeof(int))
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s without its parameters", name);
      int64_t len = 1;
      for (int i = 0; i < p->naxes; i++) {
        if (p->axes[i] < 0 || p->axes[i] >= a->ndim)
          return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s of the shapeless function: "
                               "axis %d of an input of rank %d", name, p->axes[i], a->ndim);
        len *= a->shape[p->axes[i]];
      }
      if (len == 0 && (rn->prim == NV__PRIM_ARGMAX || rn->prim == NV__PRIM_ARGMIN))
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: cannot reduce an empty axis", name);
      *nd = nv__reduced_shape(a, p->axes, p->naxes, p->keepdims, shape);
      return NV_OK;
    }
    case RULE_SAME: {
      /* Along one axis: the input's shape; over all axes (a NULL axis): the flattened size. */
      const nv__rows_params *p = rn->params;
      if (!p || rn->params_size < sizeof *p)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s without its parameters", name);
      if (p->naxes == 1 && rn->out[0].ndim == a->ndim) {
        *nd = a->ndim;
        memcpy(shape, a->shape, (size_t)a->ndim * sizeof(int));
        return NV_OK;
      }
      if (rn->out[0].ndim != 1 || a->size > INT32_MAX)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s of the shapeless function: "
                             "cannot flatten its input", name);
      *nd = 1;
      shape[0] = (int)a->size;
      return NV_OK;
    }
    case RULE_TRANSPOSE: {
      const nv__view_params *p = rn->params;
      if (!p || rn->params_size < sizeof *p + (size_t)a->ndim * sizeof(int) ||
          p->ndim != a->ndim)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: transpose without its axes");
      for (int i = 0; i < a->ndim; i++) {
        if (p->axes[i] < 0 || p->axes[i] >= a->ndim)
          return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: transpose: bad axis %d",
                               p->axes[i]);
        shape[i] = a->shape[p->axes[i]];
        strides[i] = a->strides[p->axes[i]];
      }
      *nd = a->ndim;
      *view = true;
      return NV_OK;
    }
    case RULE_MATMUL: {
      const nv__output *b = rn->nin > 1 ? in[1] : NULL;
      if (!b || a->ndim < 2 || b->ndim < 2)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: matmul without its operands");
      if (a->shape[a->ndim - 1] != b->shape[b->ndim - 2]) {
        char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "matmul: shapes %s and %s do not match for a product (a shapeless "
                             "function)", nv__shape_str(a->shape, a->ndim, s1, sizeof s1),
                             nv__shape_str(b->shape, b->ndim, s2, sizeof s2));
      }
      if (!nv__broadcast_shapes(a->shape, a->ndim - 2, b->shape, b->ndim - 2, shape, nd)) {
        char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "matmul: batch shapes of %s and %s cannot be broadcast (a shapeless "
                             "function)", nv__shape_str(a->shape, a->ndim, s1, sizeof s1),
                             nv__shape_str(b->shape, b->ndim, s2, sizeof s2));
      }
      shape[(*nd)++] = a->shape[a->ndim - 2];
      shape[(*nd)++] = b->shape[b->ndim - 1];
      return NV_OK;
    }
    default:
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s has no shape rule", name);
  }
}

/* A replayed reshape on input `in` (same rank as the trace's): the traced shape, the axis
 * given as -1 inferred again from the input's size (MLX's shapeless reshape); an input whose
 * size does not fit is an error. The output is a view of a row-contiguous input, else a copy
 * (replay sets `copy` in the node's parameters). */
static nv_status reshape_shape(const rnode *rn, const rout *ro, const nv__output *in, int *shape) {
  const nv__view_params *p = rn->params;
  if (!p || rn->params_size < sizeof *p)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: reshape without its parameters");
  int64_t known = 1;
  for (int i = 0; i < ro->ndim; i++) {
    shape[i] = ro->shape[i];
    if (i != p->infer - 1)
      known *= shape[i];
  }
  if (p->infer > 0 && known > 0 && in->size % known == 0 && in->size / known <= INT32_MAX) {
    shape[p->infer - 1] = (int)(in->size / known);
    known *= shape[p->infer - 1];
  }
  if (known != in->size) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "reshape: cannot reshape an array of shape %s into %s (a shapeless "
                         "compiled function)", nv__shape_str(in->shape, in->ndim, s1, sizeof s1),
                         nv__shape_str(ro->shape, ro->ndim, s2, sizeof s2));
  }
  return NV_OK;
}

/* The output shape of a replayed reduction node on input `in` (its rank is the trace's: a
 * shapeless entry is keyed by ranks). */
static nv_status reduce_shape(const rnode *rn, const nv__output *in, int *shape, int *nd) {
  const nv__reduce_params *p = rn->params;
  if (!p || rn->params_size < sizeof *p)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s without its parameters",
                         nv__prims[rn->prim].name);
  int64_t len = 1;
  for (int i = 0; i < p->naxes; i++) {
    if (p->axes[i] >= in->ndim)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s of the shapeless function: "
                           "axis %d of an input of rank %d", nv__prims[rn->prim].name,
                           p->axes[i], in->ndim);
    len *= in->shape[p->axes[i]];
  }
  if (len == 0 && (rn->prim == NV__PRIM_MAX || rn->prim == NV__PRIM_MIN))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: cannot %s-reduce an empty axis",
                         nv__prims[rn->prim].name, nv__prims[rn->prim].name);
  *nd = nv__reduced_shape(in, p->axes, p->naxes, p->keepdims, shape);
  return NV_OK;
}

void nv__rout_of(rout *r, const nv__output *o) {
  r->dtype = o->dtype;
  r->ndim = o->ndim;
  r->weak = o->flags & NV__FLAG_WEAK;
  memcpy(r->shape, o->shape, (size_t)o->ndim * sizeof(int));
  memcpy(r->strides, o->strides, (size_t)o->ndim * sizeof(int64_t));
}

/* The recipe of the tape between the stand-ins (t->nodes[0 .. nsrc)) and
 * `outs`. Sets *cacheable to false when a constant is a tracer of a transform
 * still running (an outer transform's value, which a later call must not see).
 */
static nv_status recipe_build(recipe *r, const nv__tape *t, nv_array *const *outs, size_t nout,
                              bool *cacheable) {
  memset(r, 0, sizeof *r);
  *cacheable = true;
  long *pos = nv__malloc((t->n + 1) * sizeof *pos); /* tape position -> recipe node or const */
  r->nodes = nv__calloc(t->n + 1, sizeof *r->nodes);
  r->consts = nv__malloc((t->n + 1) * sizeof *r->consts);
  r->outs = nv__malloc((nout + 1) * sizeof *r->outs);
  nv_status s = pos && r->nodes && r->consts && r->outs
                    ? NV_OK
                    : nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  for (size_t k = 0; s == NV_OK && k < t->n; k++)
    pos[k] = -1;
  /* A constant is identified by (node, output): one slot per node output used.
   */
  nv__ptrmap cmap = {0};
  nv_array *const *outv = outs;
#define REF_OF(NODE, IDX, OUT)                                                                     \
  do {                                                                                             \
    long at_ = nv__tape_find(t, (NODE));                                                           \
    if (at_ >= 0 && (size_t)at_ < t->nsrc) {                                                       \
      *(OUT) = (ref){R_SRC, (int)at_, (IDX)};                                                      \
    } else if (at_ >= 0 && t->dep[at_]) {                                                          \
      *(OUT) = (ref){R_NODE, (int)pos[at_], (IDX)};                                                \
    } else {                                                                                       \
      bool found_;                                                                                 \
      long *slot_ = nv__ptrmap_slot(&cmap, (NODE), &found_), ci_ = -1;                             \
      if (!slot_) {                                                                                \
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");                         \
        break;                                                                                     \
      }                                                                                            \
      /* One constant per (node, output): the node's first is in the map. */                       \
      for (size_t c_ = found_ ? (size_t)*slot_ : r->nconst; c_ < r->nconst; c_++)                  \
        if (r->consts[c_].node == (NODE) && r->consts[c_].idx == (IDX))                            \
          ci_ = (long)c_;                                                                          \
      if (ci_ < 0) {                                                                               \
        if (!found_)                                                                               \
          *slot_ = (long)r->nconst;                                                                \
        ci_ = (long)r->nconst;                                                                     \
        r->consts[r->nconst++] = (nv__input){nv__node_retain((NODE)), (IDX)};                      \
        if (nv__node_is_tracer((NODE)))                                                            \
          *cacheable = false;                                                                      \
      }                                                                                            \
      *(OUT) = (ref){R_CONST, (int)ci_, (IDX)};                                                    \
    }                                                                                              \
  } while (0)
  r->poly = true;
  for (size_t k = t->nsrc; s == NV_OK && k < t->n; k++) {
    if (!t->dep[k])
      continue;
    nv__node *n = t->nodes[k];
    const nv__input *ins = nv__tape_inputs(t, k);
    rnode *rn = &r->nodes[r->n];
    rn->prim = n->prim;
    rn->nin = t->in_n[k];
    rn->nout = n->noutputs;
    rn->stream = n->stream;
    rn->params_size = n->params_size;
    rn->in = nv__malloc(((size_t)rn->nin + 1) * sizeof *rn->in);
    rn->out = nv__malloc((size_t)rn->nout * sizeof *rn->out);
    rn->params = n->params_size ? nv__malloc(n->params_size) : NULL;
    if (!rn->in || !rn->out || (n->params_size && !rn->params)) {
      r->n++;
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      break;
    }
    if (rn->params)
      memcpy(rn->params, n->params, n->params_size);
    for (int o = 0; o < rn->nout; o++)
      nv__rout_of(&rn->out[o], &n->out[o]);
    for (int i = 0; s == NV_OK && i < rn->nin; i++)
      REF_OF(ins[i].node, ins[i].idx, &rn->in[i]);
    if (!nv__compile_poly_prim(n->prim) || rn->nout != 1)
      r->poly = false;
    pos[k] = (long)r->n++;
  }
  for (size_t i = 0; s == NV_OK && i < nout; i++)
    REF_OF(outv[i]->node, outv[i]->idx, &r->outs[i]);
#undef REF_OF
  /* A constant that is not one element has the shape the trace gave it, often a source's
   * (zeros_like(x), full(x.shape, v), x * ones(x.shape) build no node on x): replayed on other
   * shapes it would keep that shape, so such a recipe replays only on the traced shapes (a
   * shapeless function traces again for others). A one-element constant broadcasts alike on
   * every shape; an output that is a constant is the trace's value whatever its size. */
  for (size_t i = 0; s == NV_OK && r->poly && i < nout; i++)
    if (r->outs[i].kind == R_CONST)
      r->poly = false;
  for (size_t k = 0; s == NV_OK && r->poly && k < r->n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++) {
      ref x = r->nodes[k].in[i];
      if (x.kind == R_CONST && r->consts[x.i].node->out[x.idx].size != 1)
        r->poly = false;
    }
  r->nout = nout;
  r->traced = r->n;
  nv__ptrmap_free(&cmap);
  nv__free(pos);
  if (s != NV_OK)
    nv__recipe_free(r);
  return s;
}

/* ---- Simplification ---- */

static bool ref_eq(ref a, ref b) { return a.kind == b.kind && a.i == b.i && a.idx == b.idx; }

static bool rout_eq(const rout *a, const rout *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
         !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int)) &&
         !memcmp(a->strides, b->strides, (size_t)a->ndim * sizeof(int64_t));
}

/* The metadata of a value the recipe refers to (for the no-op checks). */
static const rout *ref_meta(const recipe *r, ref x, rout *tmp, const nv__output *const *src) {
  if (x.kind == R_NODE)
    return &r->nodes[x.i].out[x.idx];
  const nv__output *o = x.kind == R_SRC ? src[x.i] : &r->consts[x.i].node->out[r->consts[x.i].idx];
  nv__rout_of(tmp, o);
  return tmp;
}

/* Whether two constants are the same scalar: 0-d, of the same dtype and flags,
 * and either weak scalars (prim CONSTANT: the value in the parameters) with
 * equal parameters, or evaluated arrays whose host data holds the same bytes.
 */
static bool const_eq(nv__node *a, int ia, nv__node *b, int ib) {
  const nv__output *x = &a->out[ia], *y = &b->out[ib];
  if (x->dtype != y->dtype || x->ndim != 0 || y->ndim != 0 || x->flags != y->flags)
    return false;
  /* Arrays made from data are CONSTANT nodes without parameters: compared by
   * their data. */
  if (a->prim == NV__PRIM_CONSTANT && b->prim == NV__PRIM_CONSTANT && a->params_size &&
      b->params_size)
    return a->params_size == b->params_size && !memcmp(a->params, b->params, a->params_size);
  if (atomic_load_explicit(&a->state, memory_order_acquire) != NV__DONE ||
      atomic_load_explicit(&b->state, memory_order_acquire) != NV__DONE || !x->buf || !y->buf ||
      atomic_load_explicit(&x->buf->dev, memory_order_acquire) ||
      atomic_load_explicit(&y->buf->dev, memory_order_acquire))
    return false;
  return !memcmp(nv__output_ptr(x), nv__output_ptr(y), nv_dtype_size(x->dtype));
}

/* ---- Hashing for the merges (open addressing over indices) ---- */

static uint64_t mix(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ c[i]) * 0x100000001b3ull;
  return h;
}

/* A scalar constant's hash over what const_eq compares; false for one that
 * never merges. */
static bool const_hash(nv__node *a, int ia, uint64_t *h) {
  const nv__output *x = &a->out[ia];
  if (x->ndim != 0)
    return false;
  uint64_t v = mix(0xcbf29ce484222325ull, &x->dtype, sizeof x->dtype);
  v = mix(v, &x->flags, sizeof x->flags);
  if (a->prim == NV__PRIM_CONSTANT && a->params_size) {
    *h = mix(v, a->params, a->params_size);
    return true;
  }
  if (atomic_load_explicit(&a->state, memory_order_acquire) != NV__DONE || !x->buf ||
      atomic_load_explicit(&x->buf->dev, memory_order_acquire))
    return false;
  *h = mix(v, nv__output_ptr(x), nv_dtype_size(x->dtype));
  return true;
}

static uint64_t node_hash(const rnode *n) {
  uint64_t h = mix(0xcbf29ce484222325ull, &n->prim, sizeof n->prim);
  h = mix(h, &n->stream.index, sizeof n->stream.index);
  if (n->params_size)
    h = mix(h, n->params, n->params_size);
  for (int i = 0; i < n->nin; i++)
    h = mix(h, &n->in[i], sizeof n->in[i]);
  for (int o = 0; o < n->nout; o++) {
    h = mix(h, &n->out[o].dtype, sizeof n->out[o].dtype);
    h = mix(h, n->out[o].shape, (size_t)n->out[o].ndim * sizeof(int));
  }
  return h;
}

static bool node_eq(const rnode *m, const rnode *n) {
  if (m->prim != n->prim || m->nin != n->nin || m->nout != n->nout ||
      m->params_size != n->params_size || m->stream.index != n->stream.index)
    return false;
  if (n->params_size && memcmp(m->params, n->params, n->params_size))
    return false;
  for (int i = 0; i < n->nin; i++)
    if (!ref_eq(m->in[i], n->in[i]))
      return false;
  for (int o = 0; o < n->nout; o++)
    if (!rout_eq(&m->out[o], &n->out[o]))
      return false;
  return true;
}

/* Simplifies in place: merges equal scalar constants, redirects no-op nodes (a
 * copy or astype giving its input's metadata, a broadcast to its input's own
 * layout) to their input, shares equivalent nodes (same primitive, parameters,
 * inputs and output metadata), then drops the nodes no output reaches. `src`
 * are the sources' metadata at the trace. */
nv_status nv__compile_simplify(recipe *r, const nv__output *const *src) {
  size_t total = 0;
  for (size_t k = 0; k < r->n; k++)
    total += (size_t)r->nodes[k].nout;
  ref *map = nv__malloc((total + 1) * sizeof *map); /* node outputs, flattened */
  size_t *base = nv__malloc((r->n + 1) * sizeof *base);
  int *cmap = nv__malloc((r->nconst + 1) * sizeof *cmap);
  size_t cap = 16;
  while (cap < 2 * (r->n + r->nconst + 1))
    cap *= 2;
  long *tab = nv__malloc(cap * sizeof *tab); /* indices by hash; -1: empty */
  nv_status s = map && base && cmap && tab
                    ? NV_OK
                    : nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  if (s == NV_OK) {
    for (size_t i = 0; i < cap; i++)
      tab[i] = -1;
    for (size_t i = 0; i < r->nconst; i++) {
      cmap[i] = (int)i;
      uint64_t h;
      if (!const_hash(r->consts[i].node, r->consts[i].idx, &h))
        continue;
      size_t at = (size_t)h & (cap - 1);
      for (; tab[at] >= 0; at = (at + 1) & (cap - 1)) {
        const nv__input *j = &r->consts[tab[at]];
        if (const_eq(r->consts[i].node, r->consts[i].idx, j->node, j->idx))
          break;
      }
      if (tab[at] >= 0)
        cmap[i] = (int)tab[at];
      else
        tab[at] = (long)i;
    }
    for (size_t i = 0; i < cap; i++)
      tab[i] = -1;
    size_t b = 0;
    for (size_t k = 0; k < r->n; k++) {
      base[k] = b;
      for (int o = 0; o < r->nodes[k].nout; o++)
        map[b + (size_t)o] = (ref){R_NODE, (int)k, o};
      b += (size_t)r->nodes[k].nout;
    }
  }
#define RESOLVE(X)                                                                                 \
  ((X).kind == R_NODE    ? map[base[(X).i] + (size_t)(X).idx]                                      \
   : (X).kind == R_CONST ? (ref){R_CONST, cmap[(X).i], (X).idx}                                    \
                         : (X))
  for (size_t k = 0; s == NV_OK && k < r->n; k++) {
    rnode *n = &r->nodes[k];
    for (int i = 0; i < n->nin; i++)
      n->in[i] = RESOLVE(n->in[i]);
    if (n->nout == 1 && n->nin >= 1 &&
        (n->prim == NV__PRIM_COPY || n->prim == NV__PRIM_ASTYPE || n->prim == NV__PRIM_BROADCAST)) {
      rout tmp;
      const rout *in = ref_meta(r, n->in[0], &tmp, src);
      bool same = n->prim == NV__PRIM_BROADCAST
                      ? rout_eq(in, &n->out[0])
                      : in->dtype == n->out[0].dtype && in->ndim == n->out[0].ndim &&
                            !memcmp(in->shape, n->out[0].shape, (size_t)in->ndim * sizeof(int));
      if (same && in->weak == n->out[0].weak) {
        map[base[k]] = n->in[0];
        continue;
      }
    }
    /* The table holds the nodes kept so far (none redirected). */
    size_t at = (size_t)node_hash(n) & (cap - 1);
    for (; tab[at] >= 0; at = (at + 1) & (cap - 1))
      if (node_eq(&r->nodes[tab[at]], n))
        break;
    if (tab[at] < 0) {
      tab[at] = (long)k;
      continue;
    }
    for (int o = 0; o < n->nout; o++)
      map[base[k] + (size_t)o] = (ref){R_NODE, (int)tab[at], o};
  }
  for (size_t i = 0; s == NV_OK && i < r->nout; i++)
    r->outs[i] = RESOLVE(r->outs[i]);
#undef RESOLVE
  /* The nodes no output reaches go (fuse.c's pass, shared). */
  if (s == NV_OK) s = nv__compile_compact(r);
  nv__free(map);
  nv__free(base);
  nv__free(cmap);
  nv__free(tab);
  return s;
}

/* ---- Replay ---- */

/* The metadata of output o of the replayed node rn on inputs of metadata `in` into `out` (a
 * node's fresh output): with `poly` by the shape rules, else the traced shape and strides. */
static nv_status replay_meta(const rnode *rn, int o, const nv__output *const *in, bool poly,
                             nv__output *out) {
  const rout *ro = &rn->out[o];
  nv_status s = NV_OK;
  if (poly && rn->prim == NV__PRIM_RESHAPE) {
    int shape[NV__MAX_DIMS];
    s = reshape_shape(rn, ro, in[0], shape);
    if (s == NV_OK)
      s = nv__output_set_shape(out, ro->dtype, shape, ro->ndim);
  } else if (poly && is_plain_reduction(rn->prim)) {
    int shape[NV__MAX_DIMS], nd = 0;
    s = reduce_shape(rn, in[0], shape, &nd);
    if (s == NV_OK)
      s = nv__output_set_shape(out, ro->dtype, shape, nd);
  } else if (poly && shape_rule(rn->prim) != RULE_NONE) {
    int shape[NV__MAX_DIMS], nd = 0;
    int64_t st[NV__MAX_DIMS];
    bool view = false;
    s = rule_shape(rn, in, shape, &nd, st, &view);
    if (s == NV_OK)
      s = nv__output_set_shape(out, ro->dtype, shape, nd);
    if (s == NV_OK && view)
      nv__output_set_strides(out, st);
  } else if (poly && nv__compile_poly_prim(rn->prim)) {
    /* Element-wise: the broadcast of the inputs' shapes, row-contiguous. (A node without a
     * shape rule in a shapeless entry depends on no input: an exported trace's constant
     * graph, replayed with its traced shapes.) */
    int shape[NV__MAX_DIMS], nd = 0;
    for (int i = 0; i < rn->nin; i++) {
      const nv__output *io = in[i];
      int prev[NV__MAX_DIMS];
      memcpy(prev, shape, (size_t)nd * sizeof(int));
      if (!nv__broadcast_shapes(prev, nd, io->shape, io->ndim, shape, &nd)) {
        char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "compile: %s of the shapeless function: shapes %s and %s cannot "
                             "be broadcast",
                             nv__prims[rn->prim].name, nv__shape_str(prev, nd, s1, sizeof s1),
                             nv__shape_str(io->shape, io->ndim, s2, sizeof s2));
      }
    }
    s = nv__output_set_shape(out, ro->dtype, shape, nd);
  } else {
    s = nv__output_set_shape(out, ro->dtype, ro->shape, ro->ndim);
    if (s == NV_OK)
      nv__output_set_strides(out, ro->strides);
  }
  if (s == NV_OK)
    out->flags |= ro->weak;
  return s;
}

/* A shapeless call's fusion: the plan of its chains (nv__fuse_plan, on the metadata `meta` of
 * the recipe's nodes for this call) and per chain the keeper of its kernel (NULL: it stays
 * unfused). */
typedef struct fcall {
  const nv__fplan *plan;
  const nv__output *meta;
  nv__node *const *keeper;
  nv__fused *const *k;
} fcall;

/* The COMPILED node of chain `ci` of a shapeless call on inputs `in` (the chain's data inputs,
 * then its kernel's keeper), at its root's place: its outputs the root's and the escaping
 * intermediates' metadata for this call, its parameters the kernel and the call's sizes. */
static nv__node *chain_node(const recipe *r, const fcall *fc, int ci, nv_array *const *in,
                            nv_status *s) {
  const nv__fchain *f = &fc->plan->c[ci];
  const rnode *rn = &r->nodes[f->root];
  nv__node *n = nv__node_new(NV__PRIM_COMPILED, in, f->nins + 1, f->nesc + 1,
                             sizeof(nv__compiled_params) + (size_t)f->nsz * sizeof(int64_t));
  if (!n) {
    *s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    return NULL;
  }
  nv__compiled_params *p = n->params;
  p->k = fc->k[ci];
  p->nsz = f->nsz;
  memcpy(p->sz, f->sz, (size_t)f->nsz * sizeof(int64_t));
  n->stream = rn->stream.index < 0 ? nv_current_stream() : rn->stream;
  for (int x = 0; *s == NV_OK && x <= f->nesc; x++) {
    size_t at = x ? f->esc[x - 1] : f->root;
    const nv__output *m = &fc->meta[at];
    *s = nv__output_set_shape(&n->out[x], m->dtype, m->shape, m->ndim);
    n->out[x].flags |= r->nodes[at].out[0].weak;
  }
  return n;
}

static nv_status replay(const recipe *r, bool poly, bool simplified, nv_array *const *src,
                        nv_array **res, const fcall *fc) {
  size_t total = 0;
  for (size_t k = 0; k < r->n; k++)
    total += (size_t)r->nodes[k].nout;
  nv_array **val = nv__calloc(total + 1, sizeof *val);
  size_t *base = nv__malloc((r->n + 1) * sizeof *base);
  nv_array **cst = nv__calloc(r->nconst + 1, sizeof *cst);
  nv_status s =
      val && base && cst ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  size_t b = 0;
  for (size_t k = 0; s == NV_OK && k < r->n; k++) {
    base[k] = b;
    b += (size_t)r->nodes[k].nout;
  }
#define VALUE(X)                                                                                   \
  ((X).kind == R_SRC ? src[(X).i]                                                                  \
   : (X).kind == R_NODE                                                                            \
       ? val[base[(X).i] + (size_t)(X).idx]                                                        \
       : (cst[(X).i] ? cst[(X).i]                                                                  \
                     : (cst[(X).i] = nv__tf_handle(r->consts[(X).i].node, r->consts[(X).i].idx))))
  for (size_t k = 0; s == NV_OK && k < r->n; k++) {
    const rnode *rn = &r->nodes[k];
    /* A member of a fused chain: the chain's node is built at its root, the others are its
     * inputs' or outputs'. */
    int ci = fc ? fc->plan->chain[k] : -1;
    if (ci >= 0 && fc->keeper[ci]) {
      const nv__fchain *f = &fc->plan->c[ci];
      if (k != f->root)
        continue;
      nv_array *cin_inl[17], **cin = f->nins < 17 ? cin_inl : nv__malloc(((size_t)f->nins + 1) * sizeof *cin);
      if (!cin) {
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
        break;
      }
      for (int i = 0; i < f->nins; i++)
        cin[i] = VALUE(f->ins[i].r);
      cin[f->nins] = nv__tf_handle(fc->keeper[ci], 0);
      nv__node *n = cin[f->nins]->node == fc->keeper[ci] ? chain_node(r, fc, ci, cin, &s) : NULL;
      if (!n && s == NV_OK)
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      if (n && s == NV_OK) {
        for (int i = 0; i < f->nins; i++)
          nv__node_inherit_tracer(n, cin[i]->node);
        nv__node_inherit_error(n);
        for (int x = 0; s == NV_OK && x <= f->nesc; x++) {
          size_t at = x ? f->esc[x - 1] : f->root;
          val[base[at]] = nv__tf_handle(n, x);
          if (val[base[at]]->node != n)
            s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
        }
      }
      if (n)
        nv__node_release(n);
      nv_release(cin[f->nins]);
      if (cin != cin_inl)
        nv__free(cin);
      continue;
    }
    nv_array *in_inl[8], **in = rn->nin <= 8 ? in_inl : nv__malloc((size_t)rn->nin * sizeof *in);
    if (!in) {
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      break;
    }
    for (int i = 0; i < rn->nin; i++)
      in[i] = VALUE(rn->in[i]);
    /* stop_gradient is an identity where no transform is tracing its input. */
    if (simplified && rn->prim == NV__PRIM_STOP_GRADIENT && !nv__node_traced_here(in[0]->node)) {
      val[base[k]] = nv_retain(in[0]);
      if (in != in_inl)
        nv__free(in);
      continue;
    }
    nv__node *n = nv__node_new(rn->prim, in, rn->nin, rn->nout, rn->params_size);
    if (!n)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (n && rn->params_size)
      memcpy(n->params, rn->params, rn->params_size);
    if (n)
      n->stream = rn->stream.index < 0 ? nv_current_stream() : rn->stream;
    const nv__output *im_inl[8], **im = rn->nin <= 8 ? im_inl : nv__malloc((size_t)rn->nin * sizeof *im);
    if (n && !im)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int i = 0; im && i < rn->nin; i++)
      im[i] = nv__out(in[i]);
    for (int o = 0; n && s == NV_OK && o < rn->nout; o++)
      s = replay_meta(rn, o, im, poly, &n->out[o]);
    if (n && s == NV_OK && poly && rn->prim == NV__PRIM_RESHAPE) {
      nv__view_params *p = n->params;
      p->copy = !(im[0]->flags & NV__FLAG_ROW) && im[0]->size != 0;
      p->delta = 0;
    }
    if (im && im != im_inl)
      nv__free(im);
    if (n && s == NV_OK) {
      for (int i = 0; i < rn->nin; i++)
        nv__node_inherit_tracer(n, in[i]->node);
      nv__node_inherit_error(n);
      for (int o = 0; o < rn->nout; o++) {
        val[base[k] + (size_t)o] = nv__tf_handle(n, o);
        if (val[base[k] + (size_t)o]->node != n)
          s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      }
    }
    if (n)
      nv__node_release(n);
    if (in != in_inl)
      nv__free(in);
  }
  for (size_t i = 0; s == NV_OK && i < r->nout; i++)
    res[i] = nv_retain(VALUE(r->outs[i]));
#undef VALUE
  if (val)
    nv__tf_release_all(val, total);
  if (cst)
    nv__tf_release_all(cst, r->nconst);
  nv__free(val);
  nv__free(base);
  nv__free(cst);
  return s;
}

nv_status nv__compile_replay(const recipe *r, bool poly, bool simplified, nv_array *const *src,
                             nv_array **res) {
  return replay(r, poly, simplified, src, res, NULL);
}

/* The source that output idx of `node` is, or -1 (m: the sources' nodes). */
static long source_at(const nv__ptrmap *m, nv_array *const *src, size_t nsrc,
                      const nv__node *node, int idx) {
  if (nv__ptrmap_get(m, node, -1) < 0)
    return -1;
  for (size_t i = 0; i < nsrc; i++)
    if (src[i]->node == node && src[i]->idx == idx && !nv__node_is_tracer(src[i]->node))
      return (long)i;
  return -1;
}

/* The graphs of the constants the tape stopped at (arrays built outside the trace, not
 * evaluated yet) walked for a source: *hit is the first one found, or stays -1. Inputs are
 * read under each node's lock and retained, as the tape reads them, since another thread may
 * evaluate and detach these nodes meanwhile. */
static nv_status walk_constants(const nv__tape *t, const nv__ptrmap *m, nv_array *const *src,
                                size_t nsrc, long *hit) {
  nv__ptrmap seen = {0};
  nv__node **stack = NULL;
  size_t n = 0, cap = 0;
  nv_status s = NV_OK;
  bool found;
#define PUSH(NODE)                                                                                 \
  do {                                                                                             \
    if (n == cap) {                                                                                \
      size_t nc_ = cap ? cap * 2 : 64;                                                             \
      nv__node **p_ = nv__realloc(stack, nc_ * sizeof *p_);                                        \
      if (!p_) {                                                                                   \
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");                         \
        break;                                                                                     \
      }                                                                                            \
      stack = p_;                                                                                  \
      cap = nc_;                                                                                   \
    }                                                                                              \
    stack[n++] = nv__node_retain(NODE);                                                            \
  } while (0)
  for (size_t k = t->nsrc; s == NV_OK && k < t->n; k++)
    if (!t->in_n[k] && !nv__node_traced_here(t->nodes[k])) {
      long *slot = nv__ptrmap_slot(&seen, t->nodes[k], &found);
      if (!slot)
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      else if (!found)
        PUSH(t->nodes[k]);
    }
  while (s == NV_OK && n && *hit < 0) {
    nv__node *x = stack[--n];
    nv__input inl[8], *ins = inl;
    nv__node_lock(x);
    int k = x->ninputs;
    if (k > 8 && !(ins = nv__malloc((size_t)k * sizeof *ins)))
      k = -1;
    for (int i = 0; i < k; i++)
      ins[i] = (nv__input){nv__node_retain(x->inputs[i].node), x->inputs[i].idx};
    nv__node_unlock(x);
    if (k < 0)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int i = 0; i < k; i++) {
      if (s == NV_OK && *hit < 0)
        *hit = source_at(m, src, nsrc, ins[i].node, ins[i].idx);
      long *slot = s == NV_OK && *hit < 0 ? nv__ptrmap_slot(&seen, ins[i].node, &found) : NULL;
      if (s == NV_OK && *hit < 0 && !slot)
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
      else if (slot && !found)
        PUSH(ins[i].node);
      nv__node_release(ins[i].node);
    }
    if (ins != inl)
      nv__free(ins);
    nv__node_release(x);
  }
#undef PUSH
  while (n)
    nv__node_release(stack[--n]);
  nv__free(stack);
  nv__ptrmap_free(&seen);
  return s;
}

/* Fails (NV_ERR_INVALID_ARGUMENT, as MLX's ValueError) when the traced graph reaches one of
 * the arrays passed as sources other than through its stand-in: f captured an array (or a
 * graph built on one) that is also an input, and a replay would keep the first call's value
 * for it. A source that is a tracer of an enclosing transform is exempt: it is that
 * transform's value, which the enclosing trace sees either way. */
static nv_status check_captured_sources(const nv__tape *t, nv_array *const *src, size_t nsrc,
                                        size_t nuser, nv_array *const *outs, size_t nout) {
  nv__ptrmap m = {0};
  nv_status s = NV_OK;
  bool found;
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    if (nv__node_is_tracer(src[i]->node))
      continue;
    long *slot = nv__ptrmap_slot(&m, src[i]->node, &found);
    if (!slot)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    else
      *slot = (long)i;
  }
  long hit = -1;
  for (size_t r = 0; s == NV_OK && m.n && hit < 0 && r < nout; r++)
    hit = source_at(&m, src, nsrc, outs[r]->node, outs[r]->idx);
  for (size_t k = t->nsrc; s == NV_OK && m.n && hit < 0 && k < t->n; k++) {
    const nv__input *ins = nv__tape_inputs(t, k);
    for (int j = 0; hit < 0 && j < t->in_n[k]; j++)
      hit = source_at(&m, src, nsrc, ins[j].node, ins[j].idx);
  }
  if (s == NV_OK && m.n && hit < 0)
    s = walk_constants(t, &m, src, nsrc, &hit);
  if (hit >= 0)
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                      "compile: the function reads %s %zu through a captured array "
                      "(uncaptured inputs are not allowed): pass it as an argument only",
                      (size_t)hit < nuser ? "input" : "captured input",
                      (size_t)hit < nuser ? (size_t)hit : (size_t)hit - nuser);
  nv__ptrmap_free(&m);
  return s;
}

nv_status nv__compile_trace(const nv_closure *f, nv_vec *state_in, nv_vec *state_out,
                            nv_array *const *src, size_t nsrc, size_t nuser, bool row, recipe *r,
                            size_t *nout_user, bool *cacheable) {
  nv_status s = nv__tracing_enter();
  if (s != NV_OK)
    return s;
  nv_array **in = nv__calloc(nsrc + 1, sizeof *in);
  nv_vec *outs = nv_vec_new();
  if (!in || !outs)
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  for (size_t i = 0; s == NV_OK && i < nsrc; i++)
    s = nv_array_status(in[i] = stand_in(src[i], row));
  size_t nstate = nsrc - nuser;
  /* The captured state is read from its list: the stand-ins take the arrays'
   * place while f runs, and the arrays are put back after. */
  bool swapped = false;
  if (s == NV_OK && state_in) {
    for (size_t j = 0; s == NV_OK && j < nstate; j++)
      s = nv_vec_set(state_in, j, in[nuser + j]);
    swapped = true;
  }
  if (s == NV_OK)
    s = nv__closure_call(f, in, nuser, outs);
  *nout_user = outs ? nv_vec_size(outs) : 0;
  for (size_t j = 0; s == NV_OK && state_out && j < nv_vec_size(state_out); j++) {
    nv_array *x = nv_vec_get(state_out, j);
    s = x ? nv_vec_push(outs, x)
          : nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: captured output %zu is NULL", j);
  }
  for (size_t j = 0; swapped && j < nstate; j++)
    nv_vec_set(state_in, j, src[nuser + j]);
  nv__tape t;
  memset(&t, 0, sizeof t);
  if (s == NV_OK) {
    nv__node **nodes = nv__malloc((nsrc + 1) * sizeof *nodes);
    if (!nodes)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (size_t i = 0; s == NV_OK && i < nsrc; i++)
      nodes[i] = in[i]->node;
    if (s == NV_OK)
      s = nv__tape_build(&t, nodes, nsrc, nv_vec_data(outs), nv_vec_size(outs));
    nv__free(nodes);
  }
  if (s == NV_OK)
    s = check_captured_sources(&t, src, nsrc, nuser, nv_vec_data(outs), nv_vec_size(outs));
  if (s == NV_OK)
    s = recipe_build(r, &t, nv_vec_data(outs), nv_vec_size(outs), cacheable);
  if (t.map)
    nv__tape_free(&t);
  if (in)
    nv__tf_release_all(in, nsrc);
  nv__free(in);
  nv_vec_free(outs);
  nv__tracing_leave();
  return s;
}

/* ---- Fusion in shapeless calls ---- */

/* The metadata of every node of the poly recipe r (one output each) for the call on `src`, as
 * the replay will give them (replay_meta; stop_gradient is its input, since a fused replay is
 * one no transform traces), into m[0 .. r->n). */
static nv_status poly_meta(const recipe *r, nv_array *const *src, nv__output *m) {
  nv_status s = NV_OK;
  for (size_t k = 0; s == NV_OK && k < r->n; k++) {
    const rnode *rn = &r->nodes[k];
    const nv__output *im_inl[8], **im = rn->nin <= 8 ? im_inl : nv__malloc((size_t)rn->nin * sizeof *im);
    if (!im)
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int i = 0; i < rn->nin; i++) {
      ref x = rn->in[i];
      im[i] = x.kind == R_SRC    ? nv__out(src[x.i])
              : x.kind == R_NODE ? &m[x.i]
                                 : &r->consts[x.i].node->out[r->consts[x.i].idx];
    }
    m[k].shape = m[k].shape_inl;
    m[k].strides = m[k].strides_inl;
    if (rn->prim == NV__PRIM_STOP_GRADIENT && rn->nin == 1) {
      s = nv__output_set_shape(&m[k], im[0]->dtype, im[0]->shape, im[0]->ndim);
      if (s == NV_OK) {
        nv__output_set_strides(&m[k], im[0]->strides);
        m[k].flags = im[0]->flags;
      }
    } else {
      s = replay_meta(rn, 0, im, true, &m[k]);
    }
    if (im != im_inl)
      nv__free(im);
  }
  return s;
}

static void meta_free(nv__output *m, size_t n) {
  for (size_t k = 0; m && k < n; k++) {
    if (m[k].shape && m[k].shape != m[k].shape_inl)
      nv__free(m[k].shape);
    if (m[k].strides && m[k].strides != m[k].strides_inl)
      nv__free(m[k].strides);
  }
  nv__free(m);
}

static fclass *class_find(entry *e, const nv__fplan *p) {
  for (fclass *f = e->classes; f; f = f->next)
    if (f->nkey == p->nkey && !memcmp(f->key, p->key, p->nkey * sizeof *p->key))
      return f;
  return NULL;
}

/* The class of plan p: found, or made (its kernels generated and compiled, outside the lock)
 * and listed; NULL when the entry holds MAX_FCLASSES already. */
static nv_status class_get(compiled *c, entry *e, const nv__fplan *p,
                           const nv__output *const *sm, fclass **out) {
  pthread_mutex_lock(&c->lock);
  *out = class_find(e, p);
  bool full = e->nclasses >= MAX_FCLASSES;
  pthread_mutex_unlock(&c->lock);
  if (*out || full)
    return NV_OK;
  fclass *f = nv__calloc(1, sizeof *f);
  if (f) {
    f->key = nv__malloc((p->nkey + 1) * sizeof *f->key);
    f->keeper = nv__calloc(p->nc + 1, sizeof *f->keeper);
    f->k = nv__calloc(p->nc + 1, sizeof *f->k);
  }
  if (!f || !f->key || !f->keeper || !f->k) {
    if (f)
      fclass_free(f);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  memcpy(f->key, p->key, p->nkey * sizeof *p->key);
  f->nkey = p->nkey;
  f->nc = p->nc;
  nv_status s = NV_OK;
  for (size_t i = 0; s == NV_OK && i < p->nc; i++)
    s = nv__fuse_plan_kernel(&e->r, p, i, sm, &f->keeper[i], &f->k[i]);
  if (s != NV_OK) {
    fclass_free(f);
    return s;
  }
  /* Another call may have made the class meanwhile: the first listed serves. */
  pthread_mutex_lock(&c->lock);
  fclass *had = class_find(e, p);
  bool listed = !had && e->nclasses < MAX_FCLASSES;
  if (listed) {
    f->next = e->classes;
    e->classes = f;
    e->nclasses++;
    atomic_fetch_add_explicit(&c->layouts, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&c->lock);
  if (!listed)
    fclass_free(f);
  *out = listed ? f : had;
  return NV_OK;
}

/* The replay of a shapeless entry with its chains fused for this call's layouts: the nodes'
 * metadata (poly_meta), the plan of the chains on them, its class's kernels; *done false where
 * nothing is fused (the caller replays unfused, reporting a shape error where poly_meta met
 * one). */
static nv_status replay_fused(compiled *c, entry *e, nv_array *const *src, size_t nsrc,
                              nv_array **res, bool *done) {
  *done = false;
  const recipe *r = &e->r;
  nv__output *m = nv__calloc(r->n + 1, sizeof *m);
  const nv__output **sm = nv__malloc((nsrc + 1) * sizeof *sm);
  if (!m || !sm) {
    nv__free(m);
    nv__free(sm);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  for (size_t i = 0; i < nsrc; i++)
    sm[i] = nv__out(src[i]);
  nv_status s = poly_meta(r, src, m);
  if (s != NV_OK) {
    meta_free(m, r->n);
    nv__free(sm);
    nv_clear_error();
    return NV_OK;
  }
  nv__fplan plan;
  s = nv__fuse_plan(r, m, sm, &plan);
  fclass *f = NULL;
  if (s == NV_OK && plan.nc)
    s = class_get(c, e, &plan, sm, &f);
  size_t nk = 0;
  for (size_t i = 0; f && i < f->nc; i++)
    nk += f->keeper[i] != NULL;
  if (s == NV_OK)
    atomic_store(&c->fused, nk);
  if (s == NV_OK && nk) {
    fcall fc = {&plan, m, f->keeper, f->k};
    s = replay(r, true, true, src, res, &fc);
    *done = true;
  }
  nv__fplan_free(&plan);
  meta_free(m, r->n);
  nv__free(sm);
  return s;
}

static nv_status compiled_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  compiled *c = payload;
  nv_compile_mode mode = mode_now();
  if (mode == NV_COMPILE_MODE_DISABLED)
    return nv_closure_apply(c->f, inputs, outputs);
  atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
  size_t nuser = nv_vec_size(inputs), nstate = c->state_in ? nv_vec_size(c->state_in) : 0;
  size_t nsrc = nuser + nstate;
  nv_array **src = nv__malloc((nsrc + 1) * sizeof *src);
  if (!src)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  nv_status s = NV_OK;
  /* Each source is held for the call: the captured state's list lets go of its
   * arrays while the trace runs and when the new state is stored. */
  for (size_t i = 0; i < nsrc; i++)
    src[i] = nv_retain(i < nuser ? nv_vec_get(inputs, i) : nv_vec_get(c->state_in, i - nuser));
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    if (!src[i])
      s = nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: %s %zu is NULL",
                        i < nuser ? "input" : "captured input", i < nuser ? i : i - nuser);
    else if (!nv__meta_known(src[i]))
      s = nv_array_status(src[i]);
  }
  if (s != NV_OK) {
    nv__tf_release_all(src, nsrc);
    nv__free(src);
    return s;
  }
  /* The lookup: a shapeless function first looks for an element-wise trace of
   * the ranks. */
  sig full = {0}, ranks = {0};
  s = sig_build(&full, src, nsrc, true);
  if (s == NV_OK && c->shapeless)
    s = sig_build(&ranks, src, nsrc, false);
  entry *e = NULL;
  if (s == NV_OK) {
    pthread_mutex_lock(&c->lock);
    for (entry *x = c->entries; x && !e; x = x->next)
      if (sig_equal(&x->key, x->poly ? &ranks : &full))
        e = x;
    pthread_mutex_unlock(&c->lock);
  }
  bool own = false; /* e is this call's alone (not cached) */
  nv__scope_suspend();
  if (s == NV_OK && !e) {
    e = nv__calloc(1, sizeof *e);
    bool cacheable = true;
    s = e ? nv__compile_trace(c->f, c->state_in, c->state_out, src, nsrc, nuser, false, &e->r,
                              &e->nuser, &cacheable)
          : nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (s == NV_OK) {
      atomic_fetch_add_explicit(&c->traces, 1, memory_order_relaxed);
      if (mode != NV_COMPILE_MODE_NO_SIMPLIFY) {
        const nv__output **meta = nv__malloc((nsrc + 1) * sizeof *meta);
        if (!meta)
          s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (size_t i = 0; s == NV_OK && i < nsrc; i++)
          meta[i] = nv__out(src[i]);
        if (s == NV_OK)
          s = nv__compile_simplify(&e->r, meta);
        /* Fusion needs constants that no transform traces (a fused node has no rules). A
         * shapeless entry's chains are fused per call, on the call's layouts
         * (replay_fused); the others' on the trace's. */
        if (s == NV_OK && mode == NV_COMPILE_MODE_ENABLED && cacheable && c->shapeless &&
            e->r.poly)
          e->fuse = nv__fuse_may(&e->r, meta);
        if (s == NV_OK && mode == NV_COMPILE_MODE_ENABLED && cacheable &&
            !(c->shapeless && e->r.poly)) {
          s = nv__recipe_copy(&e->rf, &e->r);
          if (s == NV_OK)
            s = nv__fuse_recipe(&e->rf, meta, &e->nfused);
          if (s == NV_OK && !e->nfused)
            nv__recipe_free(&e->rf);
        }
        nv__free(meta);
      }
      atomic_store(&c->traced_nodes, e->r.traced);
      atomic_store(&c->nodes, e->r.n);
      atomic_store(&c->fused, e->nfused);
    }
    if (s == NV_OK) {
      e->poly = c->shapeless && e->r.poly;
      e->key = e->poly ? ranks : full;
      if (e->poly)
        ranks.w = NULL;
      else
        full.w = NULL;
    }
    if (s == NV_OK && cacheable) {
      pthread_mutex_lock(&c->lock);
      e->next = c->entries;
      c->entries = e;
      atomic_fetch_add_explicit(&c->nentries, 1, memory_order_relaxed);
      pthread_mutex_unlock(&c->lock);
    } else {
      own = true;
    }
  }
  nv__free(full.w);
  nv__free(ranks.w);
  size_t nout = s == NV_OK ? e->r.nout : 0;
  nv_array **res = s == NV_OK ? nv__calloc(nout + 1, sizeof *res) : NULL;
  if (s == NV_OK && !res)
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  /* The fused recipe where no source is a tracer of a transform running on this
   * thread. */
  bool traced = false;
  for (size_t i = 0; i < nsrc; i++)
    traced |= nv__node_traced_here(src[i]->node);
  bool done = false;
  if (s == NV_OK && e->poly && e->fuse && !traced && mode == NV_COMPILE_MODE_ENABLED)
    s = replay_fused(c, e, src, nsrc, res, &done);
  if (s == NV_OK && !done)
    s = nv__compile_replay(e->nfused && !traced && mode == NV_COMPILE_MODE_ENABLED ? &e->rf : &e->r,
                           e->poly, mode != NV_COMPILE_MODE_NO_SIMPLIFY, src, res);
  nv__scope_resume();
  for (size_t i = 0; s == NV_OK && i < e->nuser; i++)
    s = nv_vec_push(outputs, res[i]);
  for (size_t j = 0; s == NV_OK && c->state_out && e->nuser + j < nout; j++) {
    if (j < nv_vec_size(c->state_out))
      s = nv_vec_set(c->state_out, j, res[e->nuser + j]);
    else
      s = nv_vec_push(c->state_out, res[e->nuser + j]);
  }
  if (res)
    nv__tf_release_all(res, nout);
  nv__free(res);
  if (own && e)
    entry_free(e);
  nv__tf_release_all(src, nsrc);
  nv__free(src);
  return s;
}

nv_closure *nv_compile(const nv_closure *f, const nv_compile_options *options) {
  if (!f) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile: NULL function");
    return NULL;
  }
  compiled *c = nv__calloc(1, sizeof *c);
  if (!c) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    return NULL;
  }
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    nv__free(c);
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: cannot create a lock");
    return NULL;
  }
  c->f = nv_closure_retain((nv_closure *)f);
  if (options) {
    c->shapeless = options->shapeless;
    c->state_in = options->inputs;
    c->state_out = options->outputs;
  }
  nv_closure *r = nv_closure_new(compiled_call, c, compiled_free);
  if (!r)
    compiled_free(c);
  return r;
}

nv_status nv_compile_get_stats(const nv_closure *compiled_fn, nv_compile_stats *stats) {
  compiled *c = nv__closure_payload(compiled_fn, compiled_call);
  if (!c || !stats)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "compile_get_stats: %s",
                         !stats ? "NULL stats" : "not a compiled function");
  stats->calls = atomic_load(&c->calls);
  stats->traces = atomic_load(&c->traces);
  stats->entries = atomic_load(&c->nentries);
  stats->traced_nodes = atomic_load(&c->traced_nodes);
  stats->nodes = atomic_load(&c->nodes);
  stats->fused = atomic_load(&c->fused);
  stats->fused_layouts = atomic_load(&c->layouts);
  return NV_OK;
}
