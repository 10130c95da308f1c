/* Function export and import (MLX's export_function / import_function / exporter): a function
 * is traced as compile traces it (compile.c), on row-contiguous stand-ins, once per input
 * signature; each trace's recipe (primitives by name, their parameter bytes, output metadata,
 * where each input comes from) goes into one file with the evaluated arrays it read (its
 * constants, stored once per file however many traces read them). Importing rebuilds the
 * recipes, and a call replays the trace whose signature matches its inputs with compile's
 * replay, so the imported function is made of ordinary primitives (grad, vmap, ... work on it).
 *
 * The file (little-endian):
 *   header   magic "\x93NUVECFN", u32 version, u32 flags (0), u64 payload bytes, u64 FNV-1a 64
 *            of the payload
 *   payload  str nuvec version, str metadata,
 *            u32 constants: each u32 dtype, u32 ndim, i32 shape[ndim], i64 strides[ndim],
 *                           i64 offset of element 0, u64 span (elements), the span's bytes
 *            u32 traces: each u32 positional count, u32 keyword count, str names (sorted),
 *                        per input u32 dtype, u32 ndim, i32 shape[ndim]; u8 shapeless, u8 poly;
 *                        u32 constants used, u32 file index each;
 *                        u32 nodes: str primitive, u8 stream kind (0: the call's stream; 1: the
 *                                   default stream of u32 device type, u32 device index),
 *                                   u32 inputs, u32 outputs, u32 parameter bytes, the bytes,
 *                                   refs (u8 kind, u32 i, u32 idx), per output u32 dtype,
 *                                   u32 ndim, u8 weak, i32 shape[ndim], i64 strides[ndim]
 *                        u32 outputs: refs
 *   str is u32 length + bytes. Every count and size is checked against the bytes left before
 *   use, every reference against what it names; the checksum catches a corrupted payload. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ptrmap.h"
#include "ops/elementwise_params.h"
#include "transforms/compile_internal.h"

#define EXPORT_MAGIC "\x93NUVECFN"
#define EXPORT_VERSION 1u
#define EXPORT_HEADER 32

/* ---- Which primitives a file can hold ---- */

/* NULL when `prim` can be exported, else why not. Parameters are plain data except where a
 * node holds process state: custom functions and compiled kernels hold closures and kernels
 * through a keeper input, a custom CUDA kernel holds its loaded kernel, collectives hold a
 * process group (and their caller's interned file name); stand-ins are never real nodes. */
static const char *unexportable(int prim) {
  switch (prim) {
    case NV__PRIM_CUSTOM: return "its vjp/jvp/vmap rules are closures of this process";
    case NV__PRIM_COMPILED: return "it runs a kernel generated in this process";
    case NV__PRIM_FAST_CUDA_KERNEL: return "it holds a CUDA kernel loaded in this process";
    case NV__PRIM_COMPILE_INPUT:
    case NV__PRIM_VMAP_INPUT: return "it is a transform's stand-in";
    case NV__PRIM_ALL_SUM:
    case NV__PRIM_ALL_MAX:
    case NV__PRIM_ALL_MIN:
    case NV__PRIM_ALL_GATHER:
    case NV__PRIM_SUM_SCATTER:
    case NV__PRIM_SEND:
    case NV__PRIM_RECV:
    case NV__PRIM_SUM_GRADIENTS: return "it is a collective over a process group of this process";
    default: return NULL;
  }
}

/* ---- Byte buffers ---- */

/* The payload's writer: bytes gather in a buffer flushed to the file past 1 MiB (large
 * constants go straight through), the checksum and the size kept as they pass. */
typedef struct wbuf {
  unsigned char *p;
  size_t n, cap;
  bool oom, io;
  FILE *fp;
  uint64_t hash, total;
} wbuf;

#define WBUF_FLUSH ((size_t)1 << 20)

static uint64_t fnv1a_more(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static void w_out(wbuf *b, const void *src, size_t n) {
  b->hash = fnv1a_more(b->hash, src, n);
  b->total += n;
  if (!b->io && fwrite(src, 1, n, b->fp) != n)
    b->io = true;
}

static void w_flush(wbuf *b) {
  if (b->n)
    w_out(b, b->p, b->n);
  b->n = 0;
}

static void w_bytes(wbuf *b, const void *src, size_t n) {
  if (b->oom || !n)
    return;
  if (b->n + n > WBUF_FLUSH)
    w_flush(b);
  if (n >= WBUF_FLUSH) {
    w_out(b, src, n);
    return;
  }
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n)
      cap *= 2;
    unsigned char *q = nv__realloc(b->p, cap);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}
static void w_u8(wbuf *b, uint8_t v) { w_bytes(b, &v, 1); }
static void w_u32(wbuf *b, uint32_t v) { w_bytes(b, &v, 4); }
static void w_i32(wbuf *b, int32_t v) { w_bytes(b, &v, 4); }
static void w_u64(wbuf *b, uint64_t v) { w_bytes(b, &v, 8); }
static void w_i64(wbuf *b, int64_t v) { w_bytes(b, &v, 8); }
static void w_str(wbuf *b, const char *s, size_t n) {
  w_u32(b, (uint32_t)n);
  w_bytes(b, s, n);
}

/* A reader over the payload; the first failure sticks (its message set once). */
typedef struct rbuf {
  const unsigned char *p;
  size_t n, at;
  bool bad;
} rbuf;

static bool r_fail(rbuf *r, const char *fmt, const char *what) {
  if (!r->bad)
    nv__set_error(NV_ERR_IO, fmt, what);
  r->bad = true;
  return false;
}
static bool r_bytes(rbuf *r, void *dst, size_t n, const char *what) {
  if (r->bad)
    return false;
  if (n > r->n - r->at)
    return r_fail(r, "import_function: the file is truncated or corrupt (%s runs past its end)",
                  what);
  if (n)
    memcpy(dst, r->p + r->at, n);
  r->at += n;
  return true;
}
static uint32_t r_u32(rbuf *r, const char *what) {
  uint32_t v = 0;
  r_bytes(r, &v, 4, what);
  return v;
}
static uint8_t r_u8(rbuf *r, const char *what) {
  uint8_t v = 0;
  r_bytes(r, &v, 1, what);
  return v;
}
static int64_t r_i64(rbuf *r, const char *what) {
  int64_t v = 0;
  r_bytes(r, &v, 8, what);
  return v;
}
/* A count of items of at least `min_size` bytes each: more than the bytes left can hold is a
 * corrupt file (so no count allocates past the file's size). */
static uint32_t r_count(rbuf *r, size_t min_size, const char *what) {
  uint32_t v = r_u32(r, what);
  if (!r->bad && (size_t)v > (r->n - r->at) / (min_size ? min_size : 1))
    r_fail(r, "import_function: the file is truncated or corrupt (%s: a count past its end)", what);
  return r->bad ? 0 : v;
}
/* A string (new, NUL-terminated) or NULL on failure. */
static char *r_str(rbuf *r, const char *what, size_t *len) {
  uint32_t n = r_count(r, 1, what);
  if (r->bad)
    return NULL;
  char *s = nv__malloc((size_t)n + 1);
  if (!s) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    r->bad = true;
    return NULL;
  }
  if (!r_bytes(r, s, n, what)) {
    nv__free(s);
    return NULL;
  }
  s[n] = 0;
  if (len)
    *len = n;
  return s;
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  return fnv1a_more(0xcbf29ce484222325ull, p, n);
}

/* ---- Signatures ---- */

/* One input of a trace: its dtype and shape (shapeless traces compare dtypes and ranks). */
typedef struct xin {
  nv_dtype dtype;
  int ndim;
  int shape[NV__MAX_DIMS];
} xin;

/* A trace: its signature (positional count, sorted keyword names, inputs), its recipe (whose
 * constants are entries of the file's table: cidx) and whether it replays on other shapes. */
typedef struct xtrace {
  int npos, nkw;
  char **kw;
  int nin;
  xin *in;
  bool shapeless, poly;
  recipe r;
  size_t nexp;    /* r's first nodes depend on no input (unevaluated constants' graphs) */
  uint32_t *cidx; /* r.nconst entries: the file constant each is */
} xtrace;

static void xtrace_free(xtrace *t) {
  for (int i = 0; t->kw && i < t->nkw; i++)
    nv__free(t->kw[i]);
  nv__free(t->kw);
  nv__free(t->in);
  nv__free(t->cidx);
  nv__recipe_free(&t->r);
  memset(t, 0, sizeof *t);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keyword names of `kwargs` sorted (borrowed pointers into the map), or NULL when there
 * are none; n set. Fails on a NULL array. */
static nv_status sorted_keys(const nv_map *kwargs, const char *op, const char ***keys, size_t *n) {
  *keys = NULL;
  *n = kwargs ? nv_map_size(kwargs) : 0;
  if (!*n)
    return NV_OK;
  const char **k = nv__malloc(*n * sizeof *k);
  if (!k)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < *n; i++)
    k[i] = nv_map_key(kwargs, i);
  qsort(k, *n, sizeof *k, cmp_str);
  *keys = k;
  return NV_OK;
}

/* The call's inputs in trace order: the positional ones, then the keyword ones by name (held
 * by the caller's containers; borrowed here). */
static nv_status gather_inputs(const nv_vec *args, const nv_map *kwargs, const char **keys,
                               size_t nkw, const char *op, nv_array ***src, size_t *nsrc) {
  size_t npos = args ? nv_vec_size(args) : 0;
  *nsrc = npos + nkw;
  *src = nv__malloc((*nsrc + 1) * sizeof **src);
  if (!*src)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < npos; i++)
    (*src)[i] = nv_vec_get(args, i);
  for (size_t i = 0; i < nkw; i++)
    (*src)[npos + i] = nv_map_get(kwargs, keys[i]);
  for (size_t i = 0; i < *nsrc; i++) {
    nv_array *x = (*src)[i];
    nv_status s = !x ? NV_ERR_INVALID_ARGUMENT : nv_array_status(x);
    if (s != NV_OK) {
      char what[96];
      if (i < npos)
        snprintf(what, sizeof what, "positional input %zu", i);
      else
        snprintf(what, sizeof what, "keyword input '%.60s'", keys[i - npos]);
      nv__free(*src);
      *src = NULL;
      return !x ? nv__set_error(s, "%s: %s is NULL", op, what)
                : nv__set_error(s, "%s: %s is a failed array: %s", op, what, nv_last_error());
    }
  }
  return NV_OK;
}

/* Whether input x has the signature `in` (dtype, and shape or with `shapeless` rank). */
static bool in_matches(const xin *in, const nv_array *x, bool shapeless) {
  const nv__output *o = nv__out(x);
  if (o->dtype != in->dtype || o->ndim != in->ndim)
    return false;
  return shapeless || !memcmp(o->shape, in->shape, (size_t)o->ndim * sizeof(int));
}

static bool trace_matches(const xtrace *t, size_t npos, const char **keys, size_t nkw,
                          nv_array *const *src) {
  if ((size_t)t->npos != npos || (size_t)t->nkw != nkw)
    return false;
  for (size_t i = 0; i < nkw; i++)
    if (strcmp(t->kw[i], keys[i]))
      return false;
  for (int i = 0; i < t->nin; i++)
    if (!in_matches(&t->in[i], src[i], t->shapeless))
      return false;
  return true;
}

/* ---- The exporter ---- */

struct nv_exporter {
  char *path;
  nv_closure *f;
  bool shapeless, closed;
  char *metadata;
  size_t metadata_len;
  xtrace *traces;
  size_t ntraces, cap;
  nv__input *consts; /* the file's constants: held nodes, evaluated */
  size_t nconsts, ccap;
  nv__ptrmap cmap; /* node -> its first entry in consts */
};

/* The file constant of output idx of `node` (added, held, when new). */
static long file_const(nv_exporter *e, nv__node *node, int idx) {
  bool found;
  long *slot = nv__ptrmap_slot(&e->cmap, node, &found);
  if (!slot)
    return -1;
  for (size_t i = found ? (size_t)*slot : e->nconsts; i < e->nconsts; i++)
    if (e->consts[i].node == node && e->consts[i].idx == idx)
      return (long)i;
  if (e->nconsts == e->ccap) {
    size_t cap = e->ccap ? 2 * e->ccap : 16;
    nv__input *c = nv__realloc(e->consts, cap * sizeof *c);
    if (!c)
      return -1;
    e->consts = c;
    e->ccap = cap;
  }
  if (!found)
    *slot = (long)e->nconsts;
  e->consts[e->nconsts] = (nv__input){nv__node_retain(node), idx};
  return (long)e->nconsts++;
}

nv_exporter *nv_exporter_new(const char *path, const nv_closure *f,
                             const nv_export_options *options) {
  if (!path || !f) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_function: NULL %s", !path ? "path" : "function");
    return NULL;
  }
  nv_exporter *e = nv__calloc(1, sizeof *e);
  size_t n = strlen(path);
  if (e)
    e->path = nv__malloc(n + 1);
  const char *md = options && options->metadata ? options->metadata : "";
  size_t mn = options && options->metadata
                  ? (options->metadata_len ? options->metadata_len : strlen(md))
                  : 0;
  if (e && e->path)
    e->metadata = nv__malloc(mn + 1);
  if (!e || !e->path || !e->metadata) {
    if (e) {
      nv__free(e->path);
      nv__free(e);
    }
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    return NULL;
  }
  memcpy(e->path, path, n + 1);
  memcpy(e->metadata, md, mn);
  e->metadata[mn] = 0;
  e->metadata_len = mn;
  e->f = nv_closure_retain((nv_closure *)f);
  e->shapeless = options && options->shapeless;
  return e;
}

/* Row-contiguous metadata of each source (what the stand-ins had), for simplify. */
static nv_status row_meta(nv_array *const *src, size_t n, nv__output **meta) {
  *meta = nv__calloc(n + 1, sizeof **meta);
  if (!*meta)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  for (size_t i = 0; i < n; i++) {
    nv__output *o = &(*meta)[i];
    o->shape = o->shape_inl;
    o->strides = o->strides_inl;
    const nv__output *x = nv__out(src[i]);
    nv_status s = nv__output_set_shape(o, x->dtype, x->shape, x->ndim);
    if (s != NV_OK)
      return s;
  }
  return NV_OK;
}

static void row_meta_free(nv__output *meta, size_t n) {
  for (size_t i = 0; meta && i < n; i++) {
    if (meta[i].shape != meta[i].shape_inl)
      nv__free(meta[i].shape);
    if (meta[i].strides != meta[i].strides_inl)
      nv__free(meta[i].strides);
  }
  nv__free(meta);
}

/* Whether a constant node still has to be computed and can be exported as a node: pending,
 * not a tracer, of an exportable primitive. Its graph then goes into the trace (MLX keeps
 * unevaluated constants as graph), so a constant built from a large evaluated array by a few
 * operations is stored as that array and the operations. */
static bool expandable(nv__node *n) {
  return atomic_load_explicit(&n->state, memory_order_acquire) == NV__PENDING &&
         !nv__node_is_tracer(n) && !unexportable(n->prim) && n->prim != NV__PRIM_TEST_ADD_MULTIPLY;
}

/* A pending constant node's inputs, read under its lock and held; false when it was computed
 * meanwhile (then it is data). */
static bool pending_inputs(nv__node *n, nv__input **ins, int *nin) {
  nv__node_lock(n);
  bool pending = atomic_load_explicit(&n->state, memory_order_acquire) == NV__PENDING;
  int k = n->ninputs;
  nv__input *v = pending ? nv__malloc(((size_t)k + 1) * sizeof *v) : NULL;
  for (int i = 0; v && i < k; i++)
    v[i] = (nv__input){nv__node_retain(n->inputs[i].node), n->inputs[i].idx};
  nv__node_unlock(n);
  *ins = v;
  *nin = v ? k : 0;
  return v != NULL;
}

/* Replaces the recipe's unevaluated constants that can be exported by their graphs: new nodes
 * (depending on no source) put before the traced ones, whose references are renumbered. The
 * graph stops at evaluated arrays, which stay constants. *nexp: the nodes added. */
/* A node of the post-order walk below: its pending inputs and the next one to visit. */
typedef struct frame {
  nv__node *node;
  nv__input *ins;
  int nin, next;
} frame;

/* Pushes node's frame onto the walk's stack (grown by doubling); false when out of memory. */
static bool push_frame(frame **st, size_t *sn, size_t *cap, nv__node *node) {
  if (*sn == *cap) {
    size_t c = *cap ? 2 * *cap : 32;
    frame *q = nv__realloc(*st, c * sizeof *q);
    if (!q) return false;
    *st = q;
    *cap = c;
  }
  (*st)[(*sn)++] = (frame){node, NULL, 0, -1};
  return true;
}

static nv_status expand_constants(recipe *r, size_t *nexp) {
  *nexp = 0;
  nv__ptrmap at = {0}; /* node -> its new node index, or -2 while on the stack */
  rnode *nodes = NULL;
  size_t n = 0, cap = 0;
  frame *st = NULL;
  size_t sn = 0, scap = 0;
  ref *cref = nv__malloc((r->nconst + 1) * sizeof *cref); /* each old constant's new ref */
  nv_status s =
      cref ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  /* New constants (data): appended to r->consts, which is grown as needed. */
  size_t nc = r->nconst, ccap = r->nconst, old = r->nconst;
  for (size_t c = 0; s == NV_OK && c < r->nconst; c++) {
    nv__node *root = r->consts[c].node;
    if (!expandable(root)) {
      cref[c] = (ref){R_CONST, (int)c, r->consts[c].idx};
      continue;
    }
    /* An iterative post-order walk from root: a node is numbered after its inputs. */
    bool found;
    long *slot = nv__ptrmap_slot(&at, root, &found);
    if (!slot) {
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
      break;
    }
    if (!found) {
      *slot = -2;
      if (!push_frame(&st, &sn, &scap, root)) {
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
        break;
      }
    }
    while (s == NV_OK && sn) {
      frame *fr = &st[sn - 1];
      if (fr->next < 0) {
        if (!pending_inputs(fr->node, &fr->ins, &fr->nin)) {
          /* Computed meanwhile: data after all. */
          *nv__ptrmap_slot(&at, fr->node, &found) = -3;
          sn--;
          continue;
        }
        fr->next = 0;
      }
      if (fr->next < fr->nin) {
        nv__node *in = fr->ins[fr->next++].node;
        if (!expandable(in))
          continue;
        long *sl = nv__ptrmap_slot(&at, in, &found);
        if (!sl) {
          s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
          break;
        }
        if (found)
          continue; /* numbered already (a cycle cannot happen in a graph of pending nodes) */
        *sl = -2;
        if (!push_frame(&st, &sn, &scap, in)) {
          s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
          break;
        }
        continue;
      }
      /* All inputs done: number this node. */
      nv__node *x = fr->node;
      if (n == cap) {
        cap = cap ? 2 * cap : 32;
        rnode *q = nv__realloc(nodes, cap * sizeof *q);
        if (!q) {
          s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
          break;
        }
        nodes = q;
      }
      rnode *rn = &nodes[n];
      memset(rn, 0, sizeof *rn);
      rn->prim = x->prim;
      rn->nin = fr->nin;
      rn->nout = x->noutputs;
      rn->stream = x->stream;
      rn->params_size = x->params_size;
      rn->in = nv__malloc(((size_t)rn->nin + 1) * sizeof *rn->in);
      rn->out = nv__malloc((size_t)rn->nout * sizeof *rn->out);
      rn->params = x->params_size ? nv__malloc(x->params_size) : NULL;
      n++;
      if (!rn->in || !rn->out || (x->params_size && !rn->params)) {
        s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
        break;
      }
      if (rn->params)
        memcpy(rn->params, x->params, x->params_size);
      for (int o = 0; o < rn->nout; o++)
        nv__rout_of(&rn->out[o], &x->out[o]);
      for (int i = 0; s == NV_OK && i < rn->nin; i++) {
        nv__input in = fr->ins[i];
        long k = nv__ptrmap_get(&at, in.node, -1);
        if (k >= 0) {
          rn->in[i] = (ref){R_NODE, (int)k, in.idx};
          continue;
        }
        /* Data: an existing constant or a new one. */
        long ci = -1;
        for (size_t j = 0; j < nc && ci < 0; j++)
          if (r->consts[j].node == in.node && r->consts[j].idx == in.idx)
            ci = (long)j;
        if (ci < 0) {
          if (nc == ccap) {
            ccap = ccap ? 2 * ccap : 16;
            nv__input *q = nv__realloc(r->consts, ccap * sizeof *q);
            if (!q) {
              s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
              break;
            }
            r->consts = q;
          }
          r->consts[nc] = (nv__input){nv__node_retain(in.node), in.idx};
          ci = (long)nc++;
        }
        rn->in[i] = (ref){R_CONST, (int)ci, in.idx};
      }
      *nv__ptrmap_slot(&at, x, &found) = (long)(n - 1);
      for (int i = 0; i < fr->nin; i++)
        nv__node_release(fr->ins[i].node);
      nv__free(fr->ins);
      sn--;
    }
    long k = nv__ptrmap_get(&at, root, -1);
    cref[c] =
        k >= 0 ? (ref){R_NODE, (int)k, r->consts[c].idx} : (ref){R_CONST, (int)c, r->consts[c].idx};
  }
  while (sn) {
    frame *fr = &st[--sn];
    for (int i = 0; i < fr->nin; i++)
      nv__node_release(fr->ins[i].node);
    nv__free(fr->ins);
  }
  nv__free(st);
  nv__ptrmap_free(&at);
  r->nconst = nc;
  if (s == NV_OK && n) {
    /* The traced nodes follow the new ones. */
    rnode *all = nv__malloc((n + r->n + 1) * sizeof *all);
    if (!all) {
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    } else {
      memcpy(all, nodes, n * sizeof *all);
      memcpy(all + n, r->nodes, r->n * sizeof *all);
#define MOVE(X)                                                                                    \
  do {                                                                                             \
    if ((X).kind == R_NODE)                                                                        \
      (X).i += (int)n;                                                                             \
    else if ((X).kind == R_CONST && (size_t)(X).i < old && cref[(X).i].kind == R_NODE)             \
      (X) = (ref){R_NODE, cref[(X).i].i, (X).idx};                                                 \
  } while (0)
      /* Constants that were expanded are referenced only by the traced nodes and outputs. */
      for (size_t k = n; k < n + r->n; k++)
        for (int i = 0; i < all[k].nin; i++)
          MOVE(all[k].in[i]);
      for (size_t i = 0; i < r->nout; i++)
        MOVE(r->outs[i]);
#undef MOVE
      nv__free(r->nodes);
      r->nodes = all;
      r->n += n;
      r->traced = r->n;
      *nexp = n;
      nv__free(nodes);
      nodes = NULL;
      n = 0;
    }
  }
  for (size_t k = 0; k < n; k++) {
    nv__free(nodes[k].params);
    nv__free(nodes[k].in);
    nv__free(nodes[k].out);
  }
  nv__free(nodes);
  nv__free(cref);
  return s;
}

/* Drops the constants no node or output refers to any more (the expanded ones), renumbering. */
static nv_status drop_unused_constants(recipe *r) {
  int *map = nv__malloc((r->nconst + 1) * sizeof *map);
  if (!map)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  for (size_t i = 0; i < r->nconst; i++)
    map[i] = -1;
  for (size_t k = 0; k < r->n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_CONST)
        map[r->nodes[k].in[i].i] = 0;
  for (size_t i = 0; i < r->nout; i++)
    if (r->outs[i].kind == R_CONST)
      map[r->outs[i].i] = 0;
  size_t m = 0;
  for (size_t i = 0; i < r->nconst; i++) {
    if (map[i] < 0) {
      nv__node_release(r->consts[i].node);
      continue;
    }
    map[i] = (int)m;
    r->consts[m++] = r->consts[i];
  }
  for (size_t k = 0; k < r->n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_CONST)
        r->nodes[k].in[i].i = map[r->nodes[k].in[i].i];
  for (size_t i = 0; i < r->nout; i++)
    if (r->outs[i].kind == R_CONST)
      r->outs[i].i = map[r->outs[i].i];
  r->nconst = m;
  nv__free(map);
  return NV_OK;
}

/* Whether the trace replays on other shapes of the same ranks: every node that depends on a
 * source has a shape rule and one output, and reads no other value of more than one element
 * (a constant of a source's shape would keep it); no output is a value that depends on no
 * source. The first node without a shape rule is named in `why`. */
static bool trace_poly(const recipe *r, size_t nexp, char *why, size_t n) {
  for (size_t k = nexp; k < r->n; k++) {
    const rnode *rn = &r->nodes[k];
    if (!nv__compile_poly_prim(rn->prim) || rn->nout != 1) {
      snprintf(why, n, "%s cannot infer its output shape from its inputs' shapes",
               nv__prims[rn->prim].name);
      return false;
    }
    for (int i = 0; i < rn->nin; i++) {
      ref x = rn->in[i];
      int64_t size = -1;
      if (x.kind == R_CONST)
        size = r->consts[x.i].node->out[x.idx].size;
      else if (x.kind == R_NODE && (size_t)x.i < nexp) {
        const rout *o = &r->nodes[x.i].out[x.idx];
        size = 1;
        for (int d = 0; d < o->ndim; d++)
          size *= o->shape[d];
      }
      if (size > 1) {
        snprintf(why, n, "%s reads a value of the traced shape that does not depend on the inputs",
                 nv__prims[rn->prim].name);
        return false;
      }
    }
  }
  for (size_t i = 0; i < r->nout; i++)
    if (r->outs[i].kind == R_CONST || (r->outs[i].kind == R_NODE && (size_t)r->outs[i].i < nexp)) {
      snprintf(why, n, "an output does not depend on the inputs and keeps its traced shape");
      return false;
    }
  return true;
}

static nv_status export_trace(nv_exporter *e, nv_array *const *src, size_t nsrc, size_t npos,
                              const char **keys, size_t nkw) {
  xtrace t;
  memset(&t, 0, sizeof t);
  t.npos = (int)npos;
  t.nkw = (int)nkw;
  t.nin = (int)nsrc;
  t.shapeless = e->shapeless;
  t.kw = nv__calloc(nkw + 1, sizeof *t.kw);
  t.in = nv__calloc(nsrc + 1, sizeof *t.in);
  nv_status s =
      t.kw && t.in ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  for (size_t i = 0; s == NV_OK && i < nkw; i++) {
    size_t n = strlen(keys[i]);
    if (!(t.kw[i] = nv__malloc(n + 1)))
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    else
      memcpy(t.kw[i], keys[i], n + 1);
  }
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    const nv__output *o = nv__out(src[i]);
    t.in[i].dtype = o->dtype;
    t.in[i].ndim = o->ndim;
    memcpy(t.in[i].shape, o->shape, (size_t)o->ndim * sizeof(int));
  }
  nv_stream cur = nv_current_stream();
  nv__scope_suspend();
  size_t nuser = 0;
  bool cacheable = true;
  if (s == NV_OK)
    s = nv__compile_trace(e->f, NULL, NULL, src, nsrc, nsrc, true, &t.r, &nuser, &cacheable);
  if (s == NV_OK && !cacheable)
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                      "export_function: the function reads a value of an enclosing transform "
                      "(a tracer), which a file cannot hold");
  nv__output *meta = NULL;
  if (s == NV_OK)
    s = row_meta(src, nsrc, &meta);
  if (s == NV_OK) {
    const nv__output **mp = nv__malloc((nsrc + 1) * sizeof *mp);
    if (!mp)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    for (size_t i = 0; s == NV_OK && i < nsrc; i++)
      mp[i] = &meta[i];
    if (s == NV_OK)
      s = nv__compile_simplify(&t.r, mp);
    nv__free(mp);
  }
  row_meta_free(meta, nsrc);
  size_t nexp = 0;
  if (s == NV_OK)
    s = expand_constants(&t.r, &nexp);
  t.nexp = nexp;
  if (s == NV_OK)
    s = drop_unused_constants(&t.r);
  for (size_t k = 0; s == NV_OK && k < t.r.n; k++) {
    rnode *rn = &t.r.nodes[k];
    const char *why = unexportable(rn->prim);
    if (why || rn->prim == NV__PRIM_TEST_ADD_MULTIPLY) {
      s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                        "export_function: the primitive %s cannot be exported (%s)",
                        nv__prims[rn->prim].name, why ? why : "a test primitive");
      break;
    }
    /* Nodes on the trace's stream run on the call's; others on their device's default. */
    if (rn->stream.index == cur.index && rn->stream.device.type == cur.device.type &&
        rn->stream.device.index == cur.device.index)
      rn->stream.index = -1;
  }
  char why[160] = "";
  if (s == NV_OK)
    t.poly = e->shapeless && trace_poly(&t.r, nexp, why, sizeof why);
  /* The constants' values, computed now (a later change to an array cannot reach them). */
  nv_array **cs = s == NV_OK ? nv__calloc(t.r.nconst + 1, sizeof *cs) : NULL;
  if (s == NV_OK && !cs)
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  for (size_t i = 0; s == NV_OK && i < t.r.nconst; i++)
    cs[i] = nv__tf_handle(t.r.consts[i].node, t.r.consts[i].idx);
  if (s == NV_OK && t.r.nconst)
    s = nv_eval(cs, t.r.nconst);
  if (cs)
    nv__tf_release_all(cs, t.r.nconst);
  nv__free(cs);
  nv__scope_resume();
  if (s == NV_OK && !(t.cidx = nv__malloc((t.r.nconst + 1) * sizeof *t.cidx)))
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
  for (size_t i = 0; s == NV_OK && i < t.r.nconst; i++) {
    long k = file_const(e, t.r.consts[i].node, t.r.consts[i].idx);
    if (k < 0)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    else
      t.cidx[i] = (uint32_t)k;
  }
  if (s == NV_OK && e->ntraces == e->cap) {
    size_t cap = e->cap ? 2 * e->cap : 4;
    xtrace *q = nv__realloc(e->traces, cap * sizeof *q);
    if (!q)
      s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory");
    else {
      e->traces = q;
      e->cap = cap;
    }
  }
  if (s != NV_OK) {
    xtrace_free(&t);
    return s;
  }
  e->traces[e->ntraces++] = t;
  return NV_OK;
}

nv_status nv_exporter_call(nv_exporter *e, const nv_vec *args, const nv_map *kwargs) {
  if (!e)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_function: NULL exporter");
  if (e->closed)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "export_function: the exporter is closed (its file is written)");
  const char **keys = NULL;
  size_t nkw = 0, nsrc = 0, npos = args ? nv_vec_size(args) : 0;
  nv_array **src = NULL;
  nv_status s = sorted_keys(kwargs, "export_function", &keys, &nkw);
  if (s == NV_OK)
    s = gather_inputs(args, kwargs, keys, nkw, "export_function", &src, &nsrc);
  for (size_t k = 0; s == NV_OK && k < e->ntraces; k++) {
    const xtrace *t = &e->traces[k];
    if (trace_matches(t, npos, keys, nkw, src))
      s = nv__set_error(NV_ERR_UNSUPPORTED,
                        "export_function: a trace of this signature (%zu positional and %zu "
                        "keyword inputs of these %s) is already exported; a file holds one "
                        "trace per signature",
                        npos, nkw, e->shapeless ? "dtypes and ranks" : "dtypes and shapes");
  }
  if (s == NV_OK)
    s = export_trace(e, src, nsrc, npos, keys, nkw);
  nv__free(src);
  nv__free(keys);
  return s;
}

/* Appends constant `node`'s output idx: its layout and the span of its buffer it reaches. */
static nv_status write_const(wbuf *b, nv__node *node, int idx) {
  const nv__output *o = &node->out[idx];
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < o->ndim; d++) {
    if (o->shape[d] == 0) {
      lo = hi = 0;
      break;
    }
    int64_t ext = (int64_t)(o->shape[d] - 1) * o->strides[d];
    if (ext < 0)
      lo += ext;
    else
      hi += ext;
  }
  int64_t span = o->size == 0 ? 0 : hi - lo + 1;
  w_u32(b, (uint32_t)o->dtype);
  w_u32(b, (uint32_t)o->ndim);
  for (int d = 0; d < o->ndim; d++)
    w_i32(b, o->shape[d]);
  for (int d = 0; d < o->ndim; d++)
    w_i64(b, o->shape[d] == 1 ? 0 : o->strides[d]);
  w_i64(b, -lo);
  w_u64(b, (uint64_t)span);
  if (span) {
    nv_status s = nv__buffer_host(o->buf);
    if (s != NV_OK)
      return s;
    size_t isz = nv_dtype_size(o->dtype);
    w_bytes(b, (const char *)o->buf->ptr + (o->offset + lo) * (int64_t)isz, (size_t)span * isz);
  }
  return NV_OK;
}

/* A reference; a constant's is its index in the trace's list (each constant is one array in
 * the file, whichever output of its node it was). */
static void write_ref(wbuf *b, ref x) {
  w_u8(b, (uint8_t)x.kind);
  w_u32(b, (uint32_t)x.i);
  w_u32(b, x.kind == R_CONST ? 0u : (uint32_t)x.idx);
}

static void write_trace(wbuf *b, const xtrace *t) {
  w_u32(b, (uint32_t)t->npos);
  w_u32(b, (uint32_t)t->nkw);
  for (int i = 0; i < t->nkw; i++)
    w_str(b, t->kw[i], strlen(t->kw[i]));
  for (int i = 0; i < t->nin; i++) {
    w_u32(b, (uint32_t)t->in[i].dtype);
    w_u32(b, (uint32_t)t->in[i].ndim);
    for (int d = 0; d < t->in[i].ndim; d++)
      w_i32(b, t->in[i].shape[d]);
  }
  w_u8(b, t->shapeless);
  w_u8(b, t->poly);
  w_u32(b, (uint32_t)t->r.nconst);
  for (size_t i = 0; i < t->r.nconst; i++)
    w_u32(b, t->cidx[i]);
  w_u32(b, (uint32_t)t->r.n);
  w_u32(b, (uint32_t)t->nexp);
  for (size_t k = 0; k < t->r.n; k++) {
    const rnode *rn = &t->r.nodes[k];
    const char *name = nv__prims[rn->prim].name;
    w_str(b, name, strlen(name));
    w_u8(b, rn->stream.index < 0 ? 0 : 1);
    w_u32(b, (uint32_t)rn->stream.device.type);
    w_u32(b, (uint32_t)rn->stream.device.index);
    w_u32(b, (uint32_t)rn->nin);
    w_u32(b, (uint32_t)rn->nout);
    w_u32(b, (uint32_t)rn->params_size);
    w_bytes(b, rn->params, rn->params_size);
    for (int i = 0; i < rn->nin; i++)
      write_ref(b, rn->in[i]);
    for (int o = 0; o < rn->nout; o++) {
      const rout *ro = &rn->out[o];
      w_u32(b, (uint32_t)ro->dtype);
      w_u32(b, (uint32_t)ro->ndim);
      w_u8(b, ro->weak ? 1 : 0);
      for (int d = 0; d < ro->ndim; d++)
        w_i32(b, ro->shape[d]);
      for (int d = 0; d < ro->ndim; d++)
        w_i64(b, ro->strides[d]);
    }
  }
  w_u32(b, (uint32_t)t->r.nout);
  for (size_t i = 0; i < t->r.nout; i++)
    write_ref(b, t->r.outs[i]);
}

static nv_status write_file(nv_exporter *e) {
  FILE *fp = fopen(e->path, "wb");
  if (!fp)
    return nv__set_error(NV_ERR_IO, "export_function: cannot open %s for writing", e->path);
  unsigned char head[EXPORT_HEADER] = {0};
  wbuf b = {.fp = fp, .hash = 0xcbf29ce484222325ull};
  b.io = fwrite(head, 1, sizeof head, fp) != sizeof head;
  const char *ver = nv_version();
  w_str(&b, ver, strlen(ver));
  w_str(&b, e->metadata, e->metadata_len);
  w_u32(&b, (uint32_t)e->nconsts);
  nv_status s = NV_OK;
  for (size_t i = 0; s == NV_OK && i < e->nconsts; i++)
    s = write_const(&b, e->consts[i].node, e->consts[i].idx);
  w_u32(&b, (uint32_t)e->ntraces);
  for (size_t k = 0; k < e->ntraces; k++)
    write_trace(&b, &e->traces[k]);
  w_flush(&b);
  if (s == NV_OK && b.oom)
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "export_function: out of memory writing %s", e->path);
  if (s == NV_OK) {
    uint32_t ver_u = EXPORT_VERSION, flags = 0;
    memcpy(head, EXPORT_MAGIC, 8);
    memcpy(head + 8, &ver_u, 4);
    memcpy(head + 12, &flags, 4);
    memcpy(head + 16, &b.total, 8);
    memcpy(head + 24, &b.hash, 8);
    if (fseek(fp, 0, SEEK_SET) != 0 || fwrite(head, 1, sizeof head, fp) != sizeof head)
      b.io = true;
  }
  if (fclose(fp) != 0)
    b.io = true;
  if (s == NV_OK && b.io)
    s = nv__set_error(NV_ERR_IO, "export_function: cannot write %s", e->path);
  if (s != NV_OK)
    remove(e->path); /* no partial file */
  nv__free(b.p);
  return s;
}

static void release_traces(nv_exporter *e) {
  for (size_t k = 0; k < e->ntraces; k++)
    xtrace_free(&e->traces[k]);
  e->ntraces = 0;
  for (size_t i = 0; i < e->nconsts; i++)
    nv__node_release(e->consts[i].node);
  e->nconsts = 0;
  nv__ptrmap_free(&e->cmap);
  memset(&e->cmap, 0, sizeof e->cmap);
}

nv_status nv_exporter_close(nv_exporter *e) {
  if (!e)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_function: NULL exporter");
  if (e->closed)
    return NV_OK;
  nv_status s = write_file(e);
  e->closed = true;
  release_traces(e);
  return s;
}

bool nv_exporter_closed(const nv_exporter *e) { return !e || e->closed; }

void nv_exporter_discard(nv_exporter *e) {
  if (e && !e->closed) {
    e->closed = true;
    release_traces(e);
  }
}

void nv_exporter_free(nv_exporter *e) {
  if (!e)
    return;
  if (!e->closed)
    nv_exporter_close(e);
  nv__free(e->traces);
  nv__free(e->consts);
  nv_closure_release(e->f);
  nv__free(e->metadata);
  nv__free(e->path);
  nv__free(e);
}

nv_status nv_export_function(const char *path, const nv_closure *f, const nv_vec *args,
                             const nv_map *kwargs, const nv_export_options *options) {
  nv_exporter *e = nv_exporter_new(path, f, options);
  if (!e)
    return path && f ? NV_ERR_OUT_OF_MEMORY : NV_ERR_INVALID_ARGUMENT;
  nv_status s = nv_exporter_call(e, args, kwargs);
  if (s == NV_OK)
    s = nv_exporter_close(e);
  else
    nv_exporter_discard(e); /* a failed export writes no file */
  nv_exporter_free(e);
  return s;
}

/* ---- Import ---- */

struct nv_imported {
  atomic_long refs;
  char *metadata;
  size_t metadata_len;
  xtrace *traces;
  size_t ntraces;
};

static void imported_free(nv_imported *m) {
  for (size_t k = 0; m->traces && k < m->ntraces; k++)
    xtrace_free(&m->traces[k]);
  nv__free(m->traces);
  nv__free(m->metadata);
  nv__free(m);
}

nv_imported *nv_imported_retain(nv_imported *m) {
  if (m)
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
  return m;
}

void nv_imported_release(nv_imported *m) {
  if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
    imported_free(m);
}

static bool r_dtype(rbuf *r, nv_dtype *dt, const char *what) {
  uint32_t v = r_u32(r, what);
  if (!r->bad && v >= NV_DTYPE_COUNT)
    return r_fail(r, "import_function: corrupt file (%s: unknown dtype)", what);
  *dt = (nv_dtype)v;
  return !r->bad;
}

static bool r_ndim(rbuf *r, int *nd, const char *what) {
  uint32_t v = r_u32(r, what);
  if (!r->bad && v > NV__MAX_DIMS)
    return r_fail(r, "import_function: corrupt file (%s: too many dimensions)", what);
  *nd = (int)v;
  return !r->bad;
}

static bool r_shape(rbuf *r, int *shape, int nd, const char *what) {
  for (int d = 0; d < nd && !r->bad; d++) {
    uint32_t v = r_u32(r, what);
    if (!r->bad && v > INT32_MAX)
      return r_fail(r, "import_function: corrupt file (%s: a negative dimension)", what);
    shape[d] = (int)v;
  }
  int64_t size;
  if (!r->bad && !nv__shape_size(shape, nd, &size))
    return r_fail(r, "import_function: corrupt file (%s: too many elements)", what);
  return !r->bad;
}

/* The lowest and highest element offsets (from element 0) a layout reaches; false when they
 * overflow. An empty layout reaches nothing (lo > hi). */
static bool reach(const int *shape, const int64_t *strides, int nd, int64_t *lo, int64_t *hi) {
  *lo = 0;
  *hi = 0;
  for (int d = 0; d < nd; d++)
    if (shape[d] == 0) {
      *lo = 1;
      *hi = 0;
      return true;
    }
  for (int d = 0; d < nd; d++) {
    if (shape[d] == 1)
      continue;
    int64_t s = strides[d];
    if (s > INT64_MAX / 2 / INT32_MAX || s < -(INT64_MAX / 2 / INT32_MAX))
      return false;
    int64_t ext = (int64_t)(shape[d] - 1) * s;
    if (ext < 0)
      *lo += ext;
    else
      *hi += ext;
    if (*lo < -(INT64_MAX / 64) || *hi > INT64_MAX / 64)
      return false;
  }
  return true;
}

/* One file constant: an evaluated array over a buffer holding the stored span. */
static nv_array *read_const(rbuf *r) {
  nv_dtype dt;
  int nd = 0, shape[NV__MAX_DIMS];
  int64_t strides[NV__MAX_DIMS];
  if (!r_dtype(r, &dt, "a constant") || !r_ndim(r, &nd, "a constant") ||
      !r_shape(r, shape, nd, "a constant"))
    return NULL;
  for (int d = 0; d < nd; d++)
    strides[d] = r_i64(r, "a constant's strides");
  int64_t off = r_i64(r, "a constant's offset");
  uint64_t span = 0;
  r_bytes(r, &span, 8, "a constant's size");
  if (r->bad)
    return NULL;
  size_t isz = nv_dtype_size(dt);
  int64_t lo, hi;
  if (!reach(shape, strides, nd, &lo, &hi) || span > (r->n - r->at) / isz || off < 0 ||
      (uint64_t)off > span || (lo <= hi && (off + lo < 0 || off + hi >= (int64_t)span)))
    return r_fail(r, "import_function: corrupt file (%s: its layout reaches outside its data)",
                  "a constant"),
           NULL;
  nv__buffer *b = nv__buffer_alloc(span ? (size_t)span * isz : 1);
  if (!b) {
    r->bad = true;
    return NULL;
  }
  r_bytes(r, b->ptr, (size_t)span * isz, "a constant's data");
  nv_array *x =
      r->bad ? NULL : nv__array_from_buffer(b, lo <= hi ? off : 0, dt, shape, nd, strides);
  nv__buffer_release(b);
  if (x && nv_array_status(x) != NV_OK) {
    nv_release(x);
    r->bad = true;
    return NULL;
  }
  return x;
}

static int prim_by_name(const char *name) {
  for (int p = 0; p < NV__PRIM_COUNT; p++)
    if (!strcmp(nv__prims[p].name, name))
      return p;
  return -1;
}

/* The metadata of what ref x names inside trace t (node k being read): false when it names
 * nothing valid. Sources have their signature's row layout. */
static bool ref_out(const xtrace *t, size_t k, ref x, nv_array *const *consts, rout *o) {
  if (x.kind == R_SRC) {
    if (x.i < 0 || x.i >= t->nin || x.idx != 0)
      return false;
    o->dtype = t->in[x.i].dtype;
    o->ndim = t->in[x.i].ndim;
    o->weak = 0;
    int64_t st = 1;
    for (int d = o->ndim - 1; d >= 0; d--) {
      o->shape[d] = t->in[x.i].shape[d];
      o->strides[d] = st;
      st *= o->shape[d];
    }
    return true;
  }
  if (x.kind == R_NODE) {
    if (x.i < 0 || (size_t)x.i >= k || x.idx < 0 || x.idx >= t->r.nodes[x.i].nout)
      return false;
    *o = t->r.nodes[x.i].out[x.idx];
    return true;
  }
  if (x.kind == R_CONST) {
    if (x.i < 0 || (size_t)x.i >= t->r.nconst || x.idx != 0)
      return false;
    nv__rout_of(o, nv__out(consts[t->cidx[x.i]]));
    return true;
  }
  return false;
}

static bool read_ref(rbuf *r, ref *x) {
  x->kind = r_u8(r, "a reference");
  x->i = (int)r_u32(r, "a reference");
  x->idx = (int)r_u32(r, "a reference");
  return !r->bad;
}

/* A param byte read as a byte: a corrupt bool would be undefined behaviour as a bool. */
static bool flag_byte(const rnode *rn, size_t off, bool *v) {
  unsigned char b = 0;
  if (rn->params_size > off)
    memcpy(&b, (const char *)rn->params + off, 1);
  *v = b != 0;
  return b <= 1;
}

/* A view node stays inside the bytes its input reaches, as its kernel places it: real / imag
 * at the complex element's first or second float, view (dtype) at the input's first byte,
 * stop_gradient at its input, the others (nv__view_params) `delta` elements further; a copying
 * form has its input's size in bytes. */
static bool view_sane(const rnode *rn, const rout *in, const char **why) {
  const rout *o = &rn->out[0];
  int64_t isz = (int64_t)nv_dtype_size(in->dtype), osz = (int64_t)nv_dtype_size(o->dtype);
  int64_t ilo, ihi, olo, ohi, base = 0, isize = 1, osize = 1;
  for (int d = 0; d < in->ndim; d++)
    isize *= in->shape[d];
  for (int d = 0; d < o->ndim; d++)
    osize *= o->shape[d];
  if (!reach(in->shape, in->strides, in->ndim, &ilo, &ihi) ||
      !reach(o->shape, o->strides, o->ndim, &olo, &ohi)) {
    *why = "a view whose strides overflow";
    return false;
  }
  bool copy = false;
  switch (rn->prim) {
    case NV__PRIM_REAL:
    case NV__PRIM_IMAG:
      if (in->dtype != NV_DTYPE_COMPLEX64 || o->dtype != NV_DTYPE_FLOAT32) {
        *why = "real or imag of other dtypes than complex64 and float32";
        return false;
      }
      base = rn->prim == NV__PRIM_IMAG ? 4 : 0;
      break;
    case NV__PRIM_VIEW_DTYPE:
      if (rn->params_size < sizeof(nv__view_dtype_params) ||
          !flag_byte(rn, offsetof(nv__view_dtype_params, copy), &copy)) {
        *why = "a dtype view's parameters are bad";
        return false;
      }
      break;
    default:
      if (in->dtype != o->dtype) {
        *why = "a view of another dtype";
        return false;
      }
      if (rn->params_size) {
        int64_t delta = 0;
        if (rn->params_size < sizeof(nv__view_params) ||
            !flag_byte(rn, offsetof(nv__view_params, copy), &copy)) {
          *why = "a view's parameters are bad";
          return false;
        }
        memcpy(&delta, (const char *)rn->params + offsetof(nv__view_params, delta), sizeof delta);
        if (delta < -(INT64_MAX / 64) || delta > INT64_MAX / 64) {
          *why = "a view's offset overflows";
          return false;
        }
        base = delta * isz;
      }
  }
  if (copy) {
    int64_t ib, ob;
    if (__builtin_mul_overflow(isize, isz, &ib) || __builtin_mul_overflow(osize, osz, &ob) ||
        ib != ob) {
      *why = "a copying view of another size";
      return false;
    }
    return true;
  }
  if (olo > ohi)
    return true; /* empty: reaches nothing */
  if (ilo > ihi || base + olo * osz < ilo * isz || base + ohi * osz + osz > ihi * isz + isz) {
    *why = "a view reaching outside its input";
    return false;
  }
  return true;
}

/* Checks a node's recorded outputs against its inputs where a bad value would reach memory
 * its kernel does not own: a view stays inside its input's elements (a copying reshape has
 * its input's size), an element-wise node's output is the broadcast of its inputs. */
static bool node_sane(const xtrace *t, size_t k, nv_array *const *consts, const char **why) {
  const rnode *rn = &t->r.nodes[k];
  rout in[2];
  if (nv__prims[rn->prim].view) {
    if (rn->nin < 1 || rn->nout != 1 || !ref_out(t, k, rn->in[0], consts, &in[0])) {
      *why = "a view without its input";
      return false;
    }
    if (!view_sane(rn, &in[0], why))
      return false;
  }
  /* Other nodes' outputs get buffers of their size: their layouts stay inside them. */
  for (int o = 0; !nv__prims[rn->prim].view && o < rn->nout; o++) {
    const rout *ro = &rn->out[o];
    int64_t lo, hi, size = 1;
    for (int d = 0; d < ro->ndim; d++)
      size *= ro->shape[d];
    if (!reach(ro->shape, ro->strides, ro->ndim, &lo, &hi) ||
        (lo <= hi && (lo < 0 || hi >= size))) {
      *why = "an output whose layout reaches outside its buffer";
      return false;
    }
  }
  if (nv__prims[rn->prim].elementwise && rn->nout == 1) {
    int shape[NV__MAX_DIMS], nd = 0;
    for (int i = 0; i < rn->nin; i++) {
      if (!ref_out(t, k, rn->in[i], consts, &in[0])) {
        *why = "an element-wise node without its input";
        return false;
      }
      int prev[NV__MAX_DIMS];
      memcpy(prev, shape, (size_t)nd * sizeof(int));
      if (!nv__broadcast_shapes(prev, nd, in[0].shape, in[0].ndim, shape, &nd)) {
        *why = "an element-wise node over shapes that do not broadcast";
        return false;
      }
    }
    if (rn->nin &&
        (nd != rn->out[0].ndim || memcmp(shape, rn->out[0].shape, (size_t)nd * sizeof(int)))) {
      *why = "an element-wise node whose shape is not its inputs' broadcast";
      return false;
    }
  }
  return true;
}

static bool read_trace(rbuf *r, xtrace *t, nv_array *const *consts, size_t nconsts) {
  t->npos = (int)r_count(r, 8, "a trace's inputs");
  t->nkw = (int)r_count(r, 4, "a trace's keywords");
  if (r->bad)
    return false;
  t->nin = t->npos + t->nkw;
  t->kw = nv__calloc((size_t)t->nkw + 1, sizeof *t->kw);
  t->in = nv__calloc((size_t)t->nin + 1, sizeof *t->in);
  if (!t->kw || !t->in) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    return r->bad = true, false;
  }
  for (int i = 0; i < t->nkw && !r->bad; i++) {
    t->kw[i] = r_str(r, "a keyword name", NULL);
    if (!r->bad && i > 0 && strcmp(t->kw[i - 1], t->kw[i]) >= 0)
      r_fail(r, "import_function: corrupt file (%s out of order)", "keyword names");
  }
  for (int i = 0; i < t->nin && !r->bad; i++)
    if (r_dtype(r, &t->in[i].dtype, "an input") && r_ndim(r, &t->in[i].ndim, "an input"))
      r_shape(r, t->in[i].shape, t->in[i].ndim, "an input");
  t->shapeless = r_u8(r, "a trace's flags") != 0;
  t->poly = r_u8(r, "a trace's flags") != 0;
  if (!r->bad && t->poly && !t->shapeless)
    return r_fail(r, "import_function: corrupt file (%s)", "a shaped trace marked shapeless");
  uint32_t nc = r_count(r, 4, "a trace's constants");
  t->cidx = nv__malloc(((size_t)nc + 1) * sizeof *t->cidx);
  t->r.consts = nv__calloc((size_t)nc + 1, sizeof *t->r.consts);
  if (!r->bad && (!t->cidx || !t->r.consts)) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    return r->bad = true, false;
  }
  for (uint32_t i = 0; i < nc && !r->bad; i++) {
    t->cidx[i] = r_u32(r, "a constant index");
    if (!r->bad && t->cidx[i] >= nconsts)
      return r_fail(r, "import_function: corrupt file (%s out of range)", "a constant index");
    t->r.consts[i] =
        (nv__input){nv__node_retain(consts[t->cidx[i]]->node), consts[t->cidx[i]]->idx};
    t->r.nconst = i + 1;
  }
  uint32_t nn = r_count(r, 24, "a trace's nodes");
  t->nexp = r_u32(r, "a trace's nodes");
  if (!r->bad && t->nexp > nn)
    return r_fail(r, "import_function: corrupt file (%s)", "a trace's node counts");
  t->r.nodes = nv__calloc((size_t)nn + 1, sizeof *t->r.nodes);
  if (!r->bad && !t->r.nodes) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    return r->bad = true, false;
  }
  for (uint32_t k = 0; k < nn && !r->bad; k++) {
    rnode *rn = &t->r.nodes[k];
    t->r.n = k + 1;
    char *name = r_str(r, "a primitive's name", NULL);
    if (!name)
      return false;
    rn->prim = prim_by_name(name);
    if (rn->prim < 0 || unexportable(rn->prim) || rn->prim == NV__PRIM_TEST_ADD_MULTIPLY) {
      nv__set_error(NV_ERR_IO, "import_function: the file names the primitive '%.64s', which %s",
                    name, rn->prim < 0 ? "this build does not have" : "cannot be imported");
      nv__free(name);
      return r->bad = true, false;
    }
    nv__free(name);
    uint8_t kind = r_u8(r, "a node's stream");
    uint32_t dtype = r_u32(r, "a node's device"), dindex = r_u32(r, "a node's device");
    if (!r->bad && (kind > 1 || dtype > NV_DEVICE_GPU || dindex > 1024 ||
                    (dtype == NV_DEVICE_CPU && dindex != 0)))
      return r_fail(r, "import_function: corrupt file (%s)", "a node's device");
    rn->stream = kind == 0 ? (nv_stream){-1, {NV_DEVICE_CPU, 0}}
                           : nv_default_stream((nv_device){(nv_device_type)dtype, (int)dindex});
    uint32_t nin = r_count(r, 9, "a node's inputs");
    uint32_t nout = r_u32(r, "a node's outputs");
    if (!r->bad && (nout == 0 || nout > 64))
      return r_fail(r, "import_function: corrupt file (%s)", "a node's output count");
    uint32_t ps = r_count(r, 1, "a node's parameters");
    if (r->bad)
      return false;
    rn->nin = (int)nin;
    rn->nout = (int)nout;
    rn->params_size = ps;
    rn->in = nv__malloc(((size_t)nin + 1) * sizeof *rn->in);
    rn->out = nv__calloc(nout, sizeof *rn->out);
    rn->params = ps ? nv__malloc(ps) : NULL;
    if (!rn->in || !rn->out || (ps && !rn->params)) {
      nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
      return r->bad = true, false;
    }
    r_bytes(r, rn->params, ps, "a node's parameters");
    rout tmp;
    for (uint32_t i = 0; i < nin && !r->bad; i++) {
      if (read_ref(r, &rn->in[i]) && !ref_out(t, k, rn->in[i], consts, &tmp))
        return r_fail(r, "import_function: corrupt file (%s names nothing)", "a node's input");
      if (!r->bad && k < t->nexp && rn->in[i].kind == R_SRC)
        return r_fail(r, "import_function: corrupt file (%s)", "a constant's node reads an input");
    }
    for (uint32_t o = 0; o < nout && !r->bad; o++) {
      rout *ro = &rn->out[o];
      if (!r_dtype(r, &ro->dtype, "a node's output") || !r_ndim(r, &ro->ndim, "a node's output"))
        return false;
      ro->weak = r_u8(r, "a node's output") ? NV__FLAG_WEAK : 0;
      if (!r_shape(r, ro->shape, ro->ndim, "a node's output"))
        return false;
      for (int d = 0; d < ro->ndim; d++)
        ro->strides[d] = r_i64(r, "a node's output strides");
    }
    const char *why = NULL;
    if (!r->bad && !node_sane(t, k, consts, &why))
      return r_fail(r, "import_function: corrupt file (%s)", why);
  }
  uint32_t no = r_count(r, 9, "a trace's outputs");
  t->r.outs = nv__malloc(((size_t)no + 1) * sizeof *t->r.outs);
  if (!r->bad && !t->r.outs) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    return r->bad = true, false;
  }
  rout tmp;
  for (uint32_t i = 0; i < no && !r->bad; i++)
    if (read_ref(r, &t->r.outs[i]) && !ref_out(t, t->r.n, t->r.outs[i], consts, &tmp))
      return r_fail(r, "import_function: corrupt file (%s names nothing)", "an output");
  t->r.nout = no;
  t->r.traced = t->r.n;
  t->r.poly = t->poly;
  return !r->bad;
}

nv_imported *nv_import_function_from_memory(const void *data, size_t size) {
  if (!data && size) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "import_function: NULL data");
    return NULL;
  }
  const unsigned char *p = data;
  if (size < EXPORT_HEADER || memcmp(p, EXPORT_MAGIC, 8)) {
    nv__set_error(NV_ERR_IO, "import_function: not a nuvec function file (%s)",
                  size < EXPORT_HEADER ? "too short for its header" : "no magic number");
    return NULL;
  }
  uint32_t ver, flags;
  uint64_t psize, sum;
  memcpy(&ver, p + 8, 4);
  memcpy(&flags, p + 12, 4);
  memcpy(&psize, p + 16, 8);
  memcpy(&sum, p + 24, 8);
  if (ver != EXPORT_VERSION) {
    nv__set_error(NV_ERR_IO, "import_function: file format version %u; this build reads version %u",
                  ver, EXPORT_VERSION);
    return NULL;
  }
  if (flags != 0) {
    nv__set_error(NV_ERR_IO, "import_function: corrupt file (unknown flags %#x in its header)",
                  flags);
    return NULL;
  }
  if (psize != size - EXPORT_HEADER) {
    nv__set_error(NV_ERR_IO,
                  "import_function: the file is truncated or corrupt (%llu payload bytes, its "
                  "header says %llu)",
                  (unsigned long long)(size - EXPORT_HEADER), (unsigned long long)psize);
    return NULL;
  }
  if (fnv1a(p + EXPORT_HEADER, (size_t)psize) != sum) {
    nv__set_error(NV_ERR_IO, "import_function: the file is corrupt (its checksum does not match)");
    return NULL;
  }
  rbuf r = {p + EXPORT_HEADER, (size_t)psize, 0, false};
  nv_imported *m = nv__calloc(1, sizeof *m);
  if (!m) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    return NULL;
  }
  atomic_init(&m->refs, 1);
  nv__scope_suspend();
  nv__free(r_str(&r, "the version", NULL));
  m->metadata = r_str(&r, "the metadata", &m->metadata_len);
  uint32_t nc = r_count(&r, 24, "the constants");
  nv_array **consts = r.bad ? NULL : nv__calloc((size_t)nc + 1, sizeof *consts);
  if (!r.bad && !consts) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    r.bad = true;
  }
  for (uint32_t i = 0; i < nc && !r.bad; i++)
    consts[i] = read_const(&r);
  uint32_t nt = r_count(&r, 19, "the traces");
  if (!r.bad && !(m->traces = nv__calloc((size_t)nt + 1, sizeof *m->traces))) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
    r.bad = true;
  }
  for (uint32_t k = 0; k < nt && !r.bad; k++) {
    m->ntraces = k + 1;
    read_trace(&r, &m->traces[k], consts, nc);
  }
  if (!r.bad && r.at != r.n)
    r_fail(&r, "import_function: corrupt file (%s)", "bytes after its last trace");
  for (uint32_t i = 0; consts && i < nc; i++)
    nv_release(consts[i]);
  nv__free(consts);
  nv__scope_resume();
  if (r.bad) {
    imported_free(m);
    return NULL;
  }
  return m;
}

nv_imported *nv_import_function(const char *path) {
  if (!path) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "import_function: NULL path");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    nv__set_error(NV_ERR_IO, "import_function: cannot open %s (%s)", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    nv__set_error(NV_ERR_IO, "import_function: %s is not a readable file", path);
    return NULL;
  }
  size_t n = (size_t)st.st_size;
  /* Mapped, not read: the constants are copied once, into their own buffers. */
  void *p = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (n && p == MAP_FAILED) {
    nv__set_error(NV_ERR_IO, "import_function: cannot map %s (%s)", path, strerror(errno));
    return NULL;
  }
  static const unsigned char none[1] = {0};
  nv_imported *m = nv_import_function_from_memory(n ? p : none, n);
  if (n)
    munmap(p, n);
  return m;
}

const char *nv_imported_metadata(const nv_imported *m, size_t *len) {
  if (len)
    *len = m ? m->metadata_len : 0;
  return m && m->metadata ? m->metadata : "";
}

size_t nv_imported_traces(const nv_imported *m) { return m ? m->ntraces : 0; }

/* "(2,3) float32" for each input, into buf. */
static void describe(char *buf, size_t n, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void describe(char *buf, size_t n, size_t *at, const char *fmt, ...) {
  if (*at >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *at, n - *at, fmt, ap);
  va_end(ap);
  if (k > 0)
    *at += (size_t)k;
  if (*at > n)
    *at = n;
}

static void describe_in(char *buf, size_t n, size_t *at, nv_dtype dt, const int *shape, int nd,
                        bool ranks) {
  char s[NV__SHAPE_BUF];
  if (ranks)
    describe(buf, n, at, " [rank %d] %s", nd, nv_dtype_name(dt));
  else
    describe(buf, n, at, " %s %s", nv__shape_str(shape, nd, s, sizeof s), nv_dtype_name(dt));
}

static nv_status no_match(const nv_imported *m, size_t npos, const char **keys, size_t nkw,
                          nv_array *const *src) {
  char msg[2048];
  size_t at = 0;
  describe(msg, sizeof msg, &at,
           "import_function: no exported trace matches the call's inputs. Exported:");
  for (size_t k = 0; k < m->ntraces && k < 8; k++) {
    const xtrace *t = &m->traces[k];
    describe(msg, sizeof msg, &at, "\n  %zu. %d positional, %d keyword%s:", k + 1, t->npos, t->nkw,
             t->shapeless ? " (shapeless)" : "");
    for (int i = 0; i < t->nin; i++) {
      if (i >= t->npos)
        describe(msg, sizeof msg, &at, " %s=", t->kw[i - t->npos]);
      describe_in(msg, sizeof msg, &at, t->in[i].dtype, t->in[i].shape, t->in[i].ndim,
                  t->shapeless);
      describe(msg, sizeof msg, &at, ";");
    }
  }
  describe(msg, sizeof msg, &at, "\nCalled with %zu positional, %zu keyword:", npos, nkw);
  for (size_t i = 0; i < npos + nkw; i++) {
    if (i >= npos)
      describe(msg, sizeof msg, &at, " %s=", keys[i - npos]);
    const nv__output *o = nv__out(src[i]);
    describe_in(msg, sizeof msg, &at, o->dtype, o->shape, o->ndim, false);
    describe(msg, sizeof msg, &at, ";");
  }
  return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s", msg);
}

nv_status nv_imported_call(const nv_imported *m, const nv_vec *args, const nv_map *kwargs,
                           nv_vec *outputs) {
  if (!m || !outputs)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "import_function: NULL %s",
                         !m ? "function" : "outputs");
  const char **keys = NULL;
  size_t nkw = 0, nsrc = 0, npos = args ? nv_vec_size(args) : 0;
  nv_array **src = NULL;
  nv_status s = sorted_keys(kwargs, "import_function", &keys, &nkw);
  if (s == NV_OK)
    s = gather_inputs(args, kwargs, keys, nkw, "import_function", &src, &nsrc);
  const xtrace *t = NULL;
  /* A trace of the exact shapes first, then a shapeless one. */
  for (size_t pass = 0; s == NV_OK && pass < 2 && !t; pass++)
    for (size_t k = 0; k < m->ntraces && !t; k++) {
      const xtrace *x = &m->traces[k];
      if (pass == 0 && x->shapeless) {
        xtrace y = *x;
        y.shapeless = false;
        if (trace_matches(&y, npos, keys, nkw, src))
          t = x;
      } else if (trace_matches(x, npos, keys, nkw, src) && (pass == 1 || !x->shapeless)) {
        t = x;
      }
    }
  if (s == NV_OK && !t)
    s = no_match(m, npos, keys, nkw, src);
  bool same = true;
  for (size_t i = 0; s == NV_OK && i < nsrc; i++)
    same = same && in_matches(&t->in[i], src[i], false);
  if (s == NV_OK && !same && !t->poly) {
    char why[160] = "";
    trace_poly(&t->r, t->nexp, why, sizeof why);
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                      "import_function: the shapeless trace cannot run on inputs of other "
                      "shapes: %s",
                      why[0] ? why : "it was traced for its shapes only");
  }
  nv_array **in = s == NV_OK ? nv__calloc(nsrc + 1, sizeof *in) : NULL;
  nv_array **res = s == NV_OK ? nv__calloc(t->r.nout + 1, sizeof *res) : NULL;
  if (s == NV_OK && (!in || !res))
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "import_function: out of memory");
  nv__scope_suspend();
  /* The trace was made on row-contiguous stand-ins: other layouts are copied. */
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    in[i] = (nv__out(src[i])->flags & NV__FLAG_ROW) ? nv_retain(src[i]) : nv_contiguous(src[i]);
    s = nv_array_status(in[i]);
  }
  if (s == NV_OK)
    s = nv__compile_replay(&t->r, t->poly && !same, true, in, res);
  nv__scope_resume();
  for (size_t i = 0; s == NV_OK && i < t->r.nout; i++)
    s = nv_vec_push(outputs, res[i]);
  if (res)
    nv__tf_release_all(res, t->r.nout);
  if (in)
    nv__tf_release_all(in, nsrc);
  nv__free(res);
  nv__free(in);
  nv__free(src);
  nv__free(keys);
  return s;
}

static nv_status imported_closure_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  return nv_imported_call(payload, inputs, NULL, outputs);
}

static void imported_closure_free(void *payload) { nv_imported_release(payload); }

nv_closure *nv_imported_closure(nv_imported *m) {
  if (!m) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "import_function: NULL function");
    return NULL;
  }
  nv_closure *c =
      nv_closure_new(imported_closure_call, nv_imported_retain(m), imported_closure_free);
  if (!c)
    nv_imported_release(m);
  return c;
}
