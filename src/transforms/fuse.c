/* compile's fusion (DESIGN §8): chains of element-wise nodes of a recipe
 * (float16, bfloat16, float32, float64 and bool values: unary and binary arithmetic,
 * comparisons, where, casts between them) become one COMPILED node running a generated C
 * kernel. float16/bfloat16 values are loaded into float32, computed there and rounded to
 * their dtype after every operation (as the unfused kernels round each operation's result,
 * and as MLX's compile does: its compiled bfloat16 x*y+z equals its uncompiled one), so a
 * fused chain equals the unfused one bit for bit; stores are then exact. The kernel's source is compiled by the system C compiler (NUVEC_CC,
 * else cc) into a shared object, loaded with dlopen and cached in memory (by
 * source) and on disk ($XDG_CACHE_HOME/nuvec, else ~/.cache/nuvec; named by a
 * hash of the source, the flags and the compiler's version; written under a
 * unique name and renamed into place, so processes sharing the directory never
 * read a partial file). Without a working compiler the chains stay unfused,
 * with one warning.
 *
 * A chain is a root node and the nodes it reads whose every consumer is in the
 * chain (so no intermediate escapes), all of the root's shape; or, beyond MLX,
 * such a chain ending in a float sum, max or mean over the last axis (or all
 * axes), computed row by row in the same kernel (sums accumulated in double, so
 * they may differ from the hand kernels' in the last bits). Each input of the
 * chain is read as a whole row-contiguous array of the root's shape, a
 * row-contiguous array of a block of its dimensions (broadcast over the
 * others: rows (D,), columns (R, 1), ...), or one element (a scalar
 * broadcast): chains with other inputs stay unfused. Generated code computes what the hand
 * kernels compute, bit for bit: no contraction into fused multiply-adds, float32 (and
 * float16/bfloat16) exp, log, log1p, expm1, tanh, sigmoid, erf, sin and cos by the hand
 * kernels' own branch-free formulas (src/cpu/fast_formulas.h, whose text the build embeds), so
 * the fused loops vectorize as theirs do, and float64 ones by libm as theirs. A reduction's
 * row is folded into 8 accumulators (lanes), vectorized, then combined pairwise.
 *
 * On a GPU stream the same chains (all their nodes on the root's device) become
 * one generated CUDA kernel each (generate_cuda), compiled by NVRTC and cached by
 * src/cuda/compiled.c; its arithmetic rounds each operation as the unfused GPU
 * kernels do, so x*y+z fused equals x*y+z unfused bit for bit.
 *
 * Donation: an element-wise chain's output 0 may be written into a data input's buffer
 * (nv__compiled_donates; the evaluation picks the input by the element-wise rule), since each
 * element is read before it is written, by the same iteration (CPU: such pointers are not
 * `restrict`, the loops carry NV_IVDEP) or thread (GPU).
 *
 * Shapeless functions: their layouts are known only per call, so each call of a shapeless
 * entry plans its chains on its own metadata (nv__fuse_plan: the same search and input
 * classes as a trace's), and compile.c keeps one set of kernels per plan key (the chains, how
 * each reads each input, a GPU launch's class), generated with their sizes (a broadcast
 * row's length, a block's period, a reduction's row length) read at run time instead of
 * written as literals; a chain reading only whole arrays and scalars has no sizes, and its
 * kernel is the one a trace of any shape makes. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transforms/compile_internal.h"

/* ---- The operations a chain may hold ---- */

typedef struct opdef {
  int prim;
  int arity;
  const char *f, *d; /* templates for float32 / float64: $0 $1 $2 are the operands */
  /* CUDA's templates where they differ (NULL: the C one): arithmetic through the _rn
   * intrinsics, which are never contracted into multiply-adds (the unfused GPU kernels round
   * each operation), negation and sigmoid as the GPU hand kernels compute them. */
  const char *gf, *gd;
} opdef;

static const opdef OPS[] = {
    {NV__PRIM_NEGATIVE, 1, "(-$0)", "(-$0)", "nv_neg_f($0)", "nv_neg_d($0)"},
    {NV__PRIM_ABS, 1, "fabsf($0)", "fabs($0)", NULL, NULL},
    {NV__PRIM_EXP, 1, "exp_fast($0)", "exp($0)", "expf($0)", NULL},
    {NV__PRIM_LOG, 1, "log_fast($0)", "log($0)", "logf($0)", NULL},
    {NV__PRIM_SQRT, 1, "sqrtf($0)", "sqrt($0)", NULL, NULL},
    {NV__PRIM_SIN, 1, "NV_SIN($0)", "sin($0)", "sinf($0)", NULL},
    {NV__PRIM_COS, 1, "NV_COS($0)", "cos($0)", "cosf($0)", NULL},
    {NV__PRIM_TANH, 1, "tanh_fast($0)", "tanh($0)", "tanhf($0)", NULL},
    {NV__PRIM_EXPM1, 1, "expm1_fast($0)", "expm1($0)", "expm1f($0)", NULL},
    {NV__PRIM_LOG1P, 1, "log1p_fast($0)", "log1p($0)", "log1pf($0)", NULL},
    {NV__PRIM_ERF, 1, "erf_fast($0)", "erf($0)", "erff($0)", NULL},
    {NV__PRIM_FLOOR, 1, "floorf($0)", "floor($0)", NULL, NULL},
    {NV__PRIM_CEIL, 1, "ceilf($0)", "ceil($0)", NULL, NULL},
    {NV__PRIM_TRUNC, 1, "truncf($0)", "trunc($0)", NULL, NULL},
    {NV__PRIM_SQUARE, 1, "($0 * $0)", "($0 * $0)", "__fmul_rn($0, $0)", "__dmul_rn($0, $0)"},
    {NV__PRIM_RSQRT, 1, "(1.0f / sqrtf($0))", "(1.0 / sqrt($0))", "__fdiv_rn(1.0f, sqrtf($0))",
     "__ddiv_rn(1.0, sqrt($0))"},
    {NV__PRIM_RECIPROCAL, 1, "(1.0f / $0)", "(1.0 / $0)", "__fdiv_rn(1.0f, $0)",
     "__ddiv_rn(1.0, $0)"},
    {NV__PRIM_SIGMOID, 1, "sigmoid_fast($0)", "nv_sigmoid_d($0)", "nv_sigmoid_f($0)", NULL},
    {NV__PRIM_ADD, 2, "($0 + $1)", "($0 + $1)", "__fadd_rn($0, $1)", "__dadd_rn($0, $1)"},
    {NV__PRIM_SUBTRACT, 2, "($0 - $1)", "($0 - $1)", "__fsub_rn($0, $1)", "__dsub_rn($0, $1)"},
    {NV__PRIM_MULTIPLY, 2, "($0 * $1)", "($0 * $1)", "__fmul_rn($0, $1)", "__dmul_rn($0, $1)"},
    {NV__PRIM_DIVIDE, 2, "($0 / $1)", "($0 / $1)", "__fdiv_rn($0, $1)", "__ddiv_rn($0, $1)"},
    {NV__PRIM_MAXIMUM, 2, "NV_FMAXN($0, $1)", "NV_FMAXN($0, $1)", NULL, NULL},
    {NV__PRIM_MINIMUM, 2, "NV_FMINN($0, $1)", "NV_FMINN($0, $1)", NULL, NULL},
    {NV__PRIM_GREATER, 2, "($0 > $1)", "($0 > $1)", NULL, NULL},
    {NV__PRIM_GREATER_EQUAL, 2, "($0 >= $1)", "($0 >= $1)", NULL, NULL},
    {NV__PRIM_LESS, 2, "($0 < $1)", "($0 < $1)", NULL, NULL},
    {NV__PRIM_LESS_EQUAL, 2, "($0 <= $1)", "($0 <= $1)", NULL, NULL},
    {NV__PRIM_EQUAL, 2, "($0 == $1)", "($0 == $1)", NULL, NULL},
    {NV__PRIM_NOT_EQUAL, 2, "($0 != $1)", "($0 != $1)", NULL, NULL},
    {NV__PRIM_WHERE, 3, "($0 ? $1 : $2)", "($0 ? $1 : $2)", NULL, NULL},
    {NV__PRIM_ASTYPE, 1, NULL, NULL, NULL, NULL}, /* a C conversion, written by emit_node */
};

static const opdef *op_of(int prim) {
  for (size_t i = 0; i < sizeof OPS / sizeof *OPS; i++)
    if (OPS[i].prim == prim)
      return &OPS[i];
  return NULL;
}

static bool half_dtype(nv_dtype d) { return d == NV_DTYPE_FLOAT16 || d == NV_DTYPE_BFLOAT16; }

static bool value_dtype(nv_dtype d) {
  return d == NV_DTYPE_FLOAT32 || d == NV_DTYPE_FLOAT64 || d == NV_DTYPE_BOOL || half_dtype(d);
}

/* The type a value of dtype d is computed in (float16/bfloat16: float, holding a value the
 * format represents exactly) ... */
static const char *ctype(nv_dtype d) {
  return d == NV_DTYPE_FLOAT64 ? "double" : d == NV_DTYPE_BOOL ? "unsigned char" : "float";
}

/* ... and stored in (float16/bfloat16: their bits). */
static const char *stype(nv_dtype d) { return half_dtype(d) ? "unsigned short" : ctype(d); }

/* The generated helpers converting stored bits to the compute value and back (exact: a
 * stored value was rounded when computed), and rounding a float32 or float64 result to the
 * dtype (once, to nearest even, as the hand kernels' conversions in src/core/convert.h); ""
 * for dtypes that need none. */
static const char *load_fn(nv_dtype d) {
  return d == NV_DTYPE_FLOAT16 ? "nv_h2f" : d == NV_DTYPE_BFLOAT16 ? "nv_b2f" : "";
}
static const char *store_fn(nv_dtype d) {
  return d == NV_DTYPE_FLOAT16 ? "nv_f2h" : d == NV_DTYPE_BFLOAT16 ? "nv_f2b" : "";
}
static const char *round_fn(nv_dtype d, bool from_double) {
  if (d == NV_DTYPE_FLOAT16)
    return from_double ? "nv_rdh" : "nv_rh";
  return from_double ? "nv_rdb" : "nv_rb";
}

/* ---- A growing string ---- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->oom = true;
      return;
    }
    if (b->p && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->n + (size_t)k + 1)
      nc *= 2;
    char *q = nv__realloc(b->p, nc);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = nc;
  }
}

/* ---- Chains ---- */

/* How a chain reads one of its inputs (compile_internal.h). */
enum { IN_FULL = NV__IN_FULL, IN_TRAIL = NV__IN_TRAIL, IN_SCALAR = NV__IN_SCALAR,
       IN_BLOCK = NV__IN_BLOCK };
typedef nv__chain_in chain_in;

/* A value's metadata as the pass reads it: a recipe node's traced output, a source's, or (in
 * a shapeless call's plan) a node's metadata for that call. */
typedef struct mview {
  nv_dtype dtype;
  int ndim;
  const int *shape;
  const int64_t *strides;
} mview;

static mview mv_rout(const rout *o) { return (mview){o->dtype, o->ndim, o->shape, o->strides}; }
static mview mv_out(const nv__output *o) {
  return (mview){o->dtype, o->ndim, o->shape, o->strides};
}

/* What the pass reads: the recipe, the sources' metadata, and for a shapeless call the
 * metadata of each node (one output each) on that call's inputs (NULL: the trace's). */
typedef struct fctx {
  recipe *r;
  const nv__output *const *src;
  const nv__output *call;
} fctx;

/* Operations whose float32 C template is a formula of src/cpu/fast_formulas.h (float64 ones
 * call libm, as the hand kernels do). */
static bool formula_op(int prim) {
  switch (prim) {
    case NV__PRIM_EXP:
    case NV__PRIM_LOG:
    case NV__PRIM_SIN:
    case NV__PRIM_COS:
    case NV__PRIM_TANH:
    case NV__PRIM_EXPM1:
    case NV__PRIM_LOG1P:
    case NV__PRIM_ERF:
    case NV__PRIM_SIGMOID: return true;
    default: return false;
  }
}

static mview node_mv(const fctx *c, size_t k) {
  return c->call ? mv_out(&c->call[k]) : mv_rout(&c->r->nodes[k].out[0]);
}

static mview ref_mv(const fctx *c, ref x) {
  if (x.kind == R_NODE)
    return c->call ? mv_out(&c->call[x.i]) : mv_rout(&c->r->nodes[x.i].out[x.idx]);
  return mv_out(x.kind == R_SRC ? c->src[x.i] : &c->r->consts[x.i].node->out[c->r->consts[x.i].idx]);
}

static bool row_contiguous(const int *shape, const int64_t *strides, int nd) {
  int64_t expect = 1;
  for (int i = nd - 1; i >= 0; i--) {
    if (shape[i] == 1)
      continue;
    if (strides[i] != expect)
      return false;
    expect *= shape[i];
  }
  return true;
}

/* How an input of metadata `m` is read against the root's shape; -1: it cannot
 * be. */
static int input_kind(const mview *m, const mview *root, int64_t *inner, int64_t *div) {
  int64_t size = 1;
  for (int i = 0; i < m->ndim; i++)
    size *= m->shape[i];
  if (size == 1 && m->ndim <= root->ndim)
    return IN_SCALAR;
  if (!row_contiguous(m->shape, m->strides, m->ndim) || m->ndim > root->ndim)
    return -1;
  /* Aligned right against the root, its dimensions other than 1 must be a block [a, s) of the
   * root's: element e then reads ((e / D) % size), D the product of the root's after s. */
  int nd = root->ndim, pad = nd - m->ndim, a = nd, s = 0;
  for (int i = 0; i < nd; i++) {
    int d = i < pad ? 1 : m->shape[i - pad];
    if (d != 1) {
      if (a == nd)
        a = i;
      s = i + 1;
    }
  }
  for (int i = a; i < s; i++)
    if ((i < pad ? 1 : m->shape[i - pad]) != root->shape[i])
      return -1;
  int64_t d = 1, rsize = 1;
  for (int i = s; i < nd; i++)
    d *= root->shape[i];
  for (int i = 0; i < nd; i++)
    rsize *= root->shape[i];
  *inner = size;
  *div = d;
  if (d > 1)
    return IN_BLOCK;
  return size == rsize ? IN_FULL : IN_TRAIL;
}

static bool same_shape(const mview *a, const mview *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int));
}

/* Whether chains on device `d` can be compiled: the CPU's (the system C compiler), a GPU's
 * (NVRTC) where the CUDA backend is built. */
static bool fusion_device(nv_device d) {
#ifdef NUVEC_HAVE_CUDA
  return d.type == NV_DEVICE_CPU || d.type == NV_DEVICE_GPU;
#else
  return d.type == NV_DEVICE_CPU;
#endif
}

static bool same_device(nv_stream a, nv_stream b) {
  return a.device.type == b.device.type && a.device.index == b.device.index;
}

/* Whether node k may be in a chain: a single-output operation of OPS over value
 * dtypes, with the operation's arity, on a CPU or GPU stream. */
static bool fusable(const recipe *r, size_t k, const nv__output *const *src) {
  const rnode *n = &r->nodes[k];
  const opdef *op = op_of(n->prim);
  if (!op || n->nout != 1 || n->nin != op->arity || !fusion_device(n->stream.device) ||
      !value_dtype(n->out[0].dtype))
    return false;
  /* A bool result only from a comparison, where, a cast, maximum or minimum: the arithmetic
   * templates would leave bytes other than 0 and 1 (bool arithmetic is logical). */
  int p = n->prim;
  bool logical = p == NV__PRIM_EQUAL || p == NV__PRIM_NOT_EQUAL || p == NV__PRIM_GREATER ||
                 p == NV__PRIM_GREATER_EQUAL || p == NV__PRIM_LESS || p == NV__PRIM_LESS_EQUAL ||
                 p == NV__PRIM_WHERE || p == NV__PRIM_ASTYPE || p == NV__PRIM_MAXIMUM ||
                 p == NV__PRIM_MINIMUM;
  if (n->out[0].dtype == NV_DTYPE_BOOL && !logical)
    return false;
  for (int i = 0; i < n->nin; i++) {
    ref x = n->in[i];
    nv_dtype d = x.kind == R_NODE  ? r->nodes[x.i].out[x.idx].dtype
                 : x.kind == R_SRC ? src[x.i]->dtype
                                   : r->consts[x.i].node->out[r->consts[x.i].idx].dtype;
    if (!value_dtype(d))
      return false;
  }
  return true;
}


/* Whether node k may end a chain as a reduction: a float32/float64 sum, max or
 * mean over the last axis (or over every axis) of a node, on a CPU or GPU stream. Its
 * chain is over the reduced input's shape; the kernel computes one output
 * element (a row) per index. */
static bool reduce_root(const recipe *r, size_t k) {
  const rnode *n = &r->nodes[k];
  if ((n->prim != NV__PRIM_SUM && n->prim != NV__PRIM_MAX && n->prim != NV__PRIM_MEAN) ||
      n->nin != 1 || n->nout != 1 || n->in[0].kind != R_NODE ||
      !fusion_device(n->stream.device))
    return false;
  const rout *in = &r->nodes[n->in[0].i].out[n->in[0].idx];
  nv_dtype d = n->out[0].dtype;
  if ((d != NV_DTYPE_FLOAT32 && d != NV_DTYPE_FLOAT64) || in->dtype != d || in->ndim == 0)
    return false;
  const nv__reduce_params *p = n->params;
  if (p->naxes == 1 && p->axes[0] == in->ndim - 1)
    return true;
  if (p->naxes != in->ndim)
    return false;
  for (int i = 0; i < p->naxes; i++)
    if (p->axes[i] != i)
      return false;
  return true;
}

/* The shape a chain rooted at k computes element by element: k's output, or for
 * a reduction its input. */
static mview chain_shape(const fctx *c, size_t k) {
  const rnode *n = &c->r->nodes[k];
  return op_of(n->prim) ? node_mv(c, k) : ref_mv(c, n->in[0]);
}

/* The row length of a chain over `in` ending in reduction rn: the last axis, or all. */
static int64_t reduce_cols(const rnode *rn, const mview *in) {
  int64_t cols = 1;
  if (((const nv__reduce_params *)rn->params)->naxes == 1)
    cols = in->shape[in->ndim - 1];
  else
    for (int d = 0; d < in->ndim; d++)
      cols *= in->shape[d];
  return cols;
}

/* A size in a kernel's source: a literal with the suffix `sfx` ("ll", "", ".0"), or in a
 * shapeless chain's kernel (dyn) the local `var` holding the call's value (`(double)var`
 * where the literal would be a double). */
typedef struct lit {
  char s[40];
} lit;

static lit size_text(bool dyn, const char *var, long long v, const char *sfx) {
  lit t;
  if (!dyn)
    snprintf(t.s, sizeof t.s, "%lld%s", v, sfx);
  else if (!strcmp(sfx, ".0"))
    snprintf(t.s, sizeof t.s, "(double)%s", var);
  else
    snprintf(t.s, sizeof t.s, "%s", var);
  return t;
}

/* The locals of a dyn kernel's sizes: zc (sz[0]), zi<i> and zd<i> (input i's inner and div);
 * the names of input i's. */
static lit zname(const char *p, int i) {
  lit t;
  snprintf(t.s, sizeof t.s, "%s%d", p, i);
  return t;
}

static rout meta_of(const recipe *r, ref x, const nv__output *const *src) {
  rout m;
  if (x.kind == R_NODE)
    return r->nodes[x.i].out[x.idx];
  nv__rout_of(&m, x.kind == R_SRC ? src[x.i] : &r->consts[x.i].node->out[r->consts[x.i].idx]);
  return m;
}

/* ---- Code generation ---- */

/* The operand text of ref x inside the loop. */
static void operand(sbuf *b, ref x, const chain_in *ins, int nins) {
  if (x.kind == R_NODE) {
    for (int i = 0; i < nins; i++)
      if ((ins[i].r.kind == R_NODE && ins[i].r.i == x.i && ins[i].r.idx == x.idx) ||
          (ins[i].via.kind == R_NODE && ins[i].via.i == x.i && ins[i].via.idx == x.idx)) {
        sb_add(b, "x%d", i);
        return;
      }
    sb_add(b, "t%d", x.i);
    return;
  }
  for (int i = 0; i < nins; i++)
    if (ins[i].r.kind == x.kind && ins[i].r.i == x.i && ins[i].r.idx == x.idx) {
      sb_add(b, "x%d", i);
      return;
    }
}

/* The statement computing member k into t<k>, in C or (gpu) in CUDA C. A float16/bfloat16
 * result is rounded to its dtype at once, so the chain rounds after every operation as the
 * unfused kernels (and MLX's compiled ones) do: fused equals unfused bit for bit. */
static void emit_node(sbuf *b, const recipe *r, size_t k, const chain_in *ins, int nins,
                      const nv__output *const *src, bool gpu) {
  const rnode *n = &r->nodes[k];
  nv_dtype od = n->out[0].dtype;
  sb_add(b, "    %s t%zu = ", ctype(od), k);
  if (n->prim == NV__PRIM_ASTYPE) {
    nv_dtype md = meta_of(r, n->in[0], src).dtype;
    const char *post = ")";
    if (od == NV_DTYPE_BOOL) {
      sb_add(b, "(");
      post = " != 0)";
    } else if (half_dtype(od)) {
      /* float64 rounds once (as nv__f64_to_f16), the rest as float32 values */
      sb_add(b, "%s(", round_fn(od, md == NV_DTYPE_FLOAT64));
    } else if (gpu && md != NV_DTYPE_BOOL &&
               (od == NV_DTYPE_FLOAT64) != (md == NV_DTYPE_FLOAT64)) {
      /* float <-> double as the GPU's astype converts (NaN payloads as x86 keeps them); a
       * float16/bfloat16 value converts as its float32 value */
      sb_add(b, "%s(", od == NV_DTYPE_FLOAT64 ? "nv_f2d" : "nv_d2f");
    } else {
      sb_add(b, "(%s)(", ctype(od));
    }
    operand(b, n->in[0], ins, nins);
    sb_add(b, "%s;\n", post);
    return;
  }
  const opdef *op = op_of(n->prim);
  /* Comparisons compute in their inputs' dtype: the template follows it. */
  rout m0 = meta_of(r, n->in[n->prim == NV__PRIM_WHERE ? 1 : 0], src);
  bool f64 = m0.dtype == NV_DTYPE_FLOAT64;
  const char *t = f64 ? op->d : op->f;
  if (gpu && (f64 ? op->gd : op->gf))
    t = f64 ? op->gd : op->gf;
  /* where selects values already rounded */
  bool round = half_dtype(od) && n->prim != NV__PRIM_WHERE;
  if (round)
    sb_add(b, "%s(", round_fn(od, false));
  for (const char *c = t; *c; c++) {
    if (c[0] == '$' && c[1] >= '0' && c[1] <= '2') {
      operand(b, n->in[c[1] - '0'], ins, nins);
      c++;
    } else {
      sb_add(b, "%c", *c);
    }
  }
  sb_add(b, "%s;\n", round ? ")" : "");
}

static const char PRELUDE[] =
    "#include <math.h>\n#include <stdint.h>\n"
    "#define NV_FMAXN(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))\n"
    "#define NV_FMINN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))\n"
    /* No dependence between iterations (output 0 may be an input's buffer, read at the same
     * index before it is written), so the element loops vectorize without alias checks. */
    "#if defined(__clang__)\n#define NV_IVDEP _Pragma(\"clang loop vectorize(assume_safety)\")\n"
    "#elif defined(__GNUC__)\n#define NV_IVDEP _Pragma(\"GCC ivdep\")\n"
    "#else\n#define NV_IVDEP\n#endif\n"
    "#define NV_LANES 8\n"
    "static inline double nv_sigmoid_d(double x) {\n"
    "  double e = exp(-fabs(x)), r = 1.0 / (1.0 + e);\n  return x >= 0 ? r : e "
    "* r;\n}\n";

/* float16/bfloat16 in generated C, bit for bit src/core/convert.h's conversions: bits to
 * float32 (exact), float32 to bits rounding once to nearest even (NaN stays a quiet NaN with
 * its payload's top bits, overflow gives inf), float64 to bits rounding once; nv_r*: a float
 * rounded to the format and back. Emitted only into chains that hold such values. */
static const char HALF_PRELUDE[] =
    "static inline unsigned nv_fbits(float f) {\n"
    "  union { float f; unsigned u; } c = {f};\n  return c.u;\n}\n"
    "static inline float nv_bitsf(unsigned u) {\n"
    "  union { unsigned u; float f; } c = {u};\n  return c.f;\n}\n"
    "static inline float nv_h2f(unsigned short h) {\n"
    "  unsigned sign = (unsigned)(h & 0x8000) << 16, em = h & 0x7fff;\n"
    "  if (em >= 0x7c00) return nv_bitsf(sign | 0x7f800000u | ((em & 0x3ff) << 13));\n"
    "  if (em >= 0x400) return nv_bitsf(sign | ((em << 13) + 0x38000000u));\n"
    "  return nv_bitsf(sign | nv_fbits((float)em * 5.9604644775390625e-08f));\n}\n"
    "static inline unsigned short nv_f2h(float f) {\n"
    "  unsigned x = nv_fbits(f);\n"
    "  unsigned short sign = (unsigned short)((x >> 16) & 0x8000);\n"
    "  x &= 0x7fffffffu;\n"
    "  if (x >= 0x7f800000u)\n"
    "    return sign | (x > 0x7f800000u ? (unsigned short)(0x7e00 | ((x >> 13) & 0x3ff)) : "
    "0x7c00);\n"
    "  if (x >= 0x477ff000u) return sign | 0x7c00;\n"
    "  if (x < 0x38800000u)\n"
    "    return sign | (unsigned short)(nv_fbits(nv_bitsf(x) + 0.5f) - 0x3f000000u);\n"
    "  x += 0xc8000fffu + ((x >> 13) & 1);\n"
    "  return sign | (unsigned short)(x >> 13);\n}\n"
    "static inline float nv_b2f(unsigned short h) { return nv_bitsf((unsigned)h << 16); }\n"
    "static inline unsigned short nv_f2b(float f) {\n"
    "  unsigned u = nv_fbits(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);\n"
    "  u += 0x7fffu + ((u >> 16) & 1);\n"
    "  return (unsigned short)(u >> 16);\n}\n"
    "static inline float nv_rh(float f) { return nv_h2f(nv_f2h(f)); }\n"
    "static inline float nv_rb(float f) { return nv_b2f(nv_f2b(f)); }\n"
    /* float64: the finite magnitude rounded once into (ebits, mbits), as nv__round_bits */
    "static unsigned nv_round_bits(double d, int ebits, int mbits, int *ovf) {\n"
    "  *ovf = 0;\n  if (d == 0) return 0;\n"
    "  int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e;\n"
    "  frexp(d, &e);\n  int E = e - 1;\n  if (E < emin) E = emin;\n"
    "  unsigned long long q = (unsigned long long)rint(ldexp(d, mbits - E));\n"
    "  if (q >= (2ull << mbits)) {\n    q >>= 1;\n    E += 1;\n  }\n"
    "  if (q < (1ull << mbits)) return (unsigned)q;\n"
    "  if (E + bias >= (1 << ebits) - 1) {\n    *ovf = 1;\n    return 0;\n  }\n"
    "  return ((unsigned)(E + bias) << mbits) | (unsigned)(q - (1ull << mbits));\n}\n"
    "static float nv_rd(double d, int ebits, int mbits, unsigned nan, unsigned inf) {\n"
    "  unsigned sign = signbit(d) ? 0x8000 : 0;\n  int ovf = 0;\n"
    "  unsigned b = isnan(d) ? nan : isinf(d) ? inf : nv_round_bits(fabs(d), ebits, mbits, &ovf);\n"
    "  if (ovf) b = inf;\n"
    "  return ebits == 5 ? nv_h2f((unsigned short)(sign | b)) : nv_b2f((unsigned short)(sign | b));\n}\n"
    "static inline float nv_rdh(double d) { return nv_rd(d, 5, 10, 0x7e00, 0x7c00); }\n"
    "static inline float nv_rdb(double d) { return nv_rd(d, 8, 7, 0x7fc0, 0x7f80); }\n";

/* Whether the chain holds float16/bfloat16 values (its inputs, members or outputs). */
static bool chain_has_half(const recipe *r, const size_t *members, size_t nm, const chain_in *ins,
                           int nins) {
  for (int i = 0; i < nins; i++)
    if (half_dtype(ins[i].dtype))
      return true;
  for (size_t m = 0; m < nm; m++)
    if (half_dtype(r->nodes[members[m]].out[0].dtype))
      return true;
  return false;
}

/* Whether a member of the chain computes a formula function in float (float32, float16 or
 * bfloat16 values: the generated C carries fast_formulas.h), and whether one is sin or cos. */
static void chain_formulas(const recipe *r, const size_t *members, size_t nm,
                           const nv__output *const *src, bool *any, bool *trig) {
  *any = *trig = false;
  for (size_t m = 0; m < nm; m++) {
    const rnode *n = &r->nodes[members[m]];
    if (!formula_op(n->prim) || meta_of(r, n->in[0], src).dtype == NV_DTYPE_FLOAT64)
      continue;
    *any = true;
    *trig |= n->prim == NV__PRIM_SIN || n->prim == NV__PRIM_COS;
  }
}

/* sin and cos in generated C: the fast formula, and for |x| >= 2^20 (finite) libm, as the hand
 * kernels' block pass computes them. The kernel's body runs first with nv_exact 0, vectorized,
 * noting in nv_big whether any argument was that large, and only then again with nv_exact 1,
 * element by element (libm for those arguments): the same bits as the unfused kernels. */
static const char TRIG_PRELUDE[] =
    "#if defined(__GNUC__)\n#define NV_BODY static inline __attribute__((always_inline))\n"
    "#else\n#define NV_BODY static inline\n#endif\n"
    "NV_BODY float nv_trig(float x, int c, int exact, unsigned *big) {\n"
    "  float a = fabsf(x);\n"
    "  unsigned b = a >= TRIG_LIMIT && a <= 3.40282347e+38f;\n"
    "  *big |= b;\n"
    "  if (exact && b) return c ? cosf(x) : sinf(x);\n"
    "  return sincos_fast(x, c);\n}\n"
    "#define NV_SIN(x) nv_trig((x), 0, nv_exact, &nv_big)\n"
    "#define NV_COS(x) nv_trig((x), 1, nv_exact, &nv_big)\n";

extern const unsigned char nv__fast_formulas_text[];

/* Whether input i may be the buffer output 0 writes (a donation, nv__compiled_donates): read
 * whole, in output 0's dtype, by an element-wise chain. Such pointers lose `restrict`; the
 * loops stay vectorized under NV_IVDEP (element e is read before it is written, by the same
 * iteration). */
static bool may_alias_out(const chain_in *in, nv_dtype od, bool reduce) {
  return !reduce && in->kind == IN_FULL && in->dtype == od;
}

/* The locals of a dyn kernel's sizes (`arr` the words: "sz" in C, "P.sz" in CUDA): zc, the
 * row length, where the kernel reduces, or the run where `runs` (the C kernel's loops over
 * runs) and an input is broadcast; zi<i>/zd<i> for the trailing and block inputs. */
static void size_locals(sbuf *b, const char *arr, const char *ty, const chain_in *ins, int nins,
                        bool reduce, bool runs) {
  bool run = reduce;
  for (int i = 0; runs && i < nins; i++)
    run |= ins[i].kind == IN_TRAIL || ins[i].kind == IN_BLOCK;
  if (run)
    sb_add(b, "  const %s zc = %s[0];\n", ty, arr);
  for (int i = 0; i < nins; i++) {
    if (ins[i].kind == IN_TRAIL || ins[i].kind == IN_BLOCK)
      sb_add(b, "  const %s zi%d = %s[%d];\n", ty, i, arr, 1 + 2 * i);
    if (ins[i].kind == IN_BLOCK)
      sb_add(b, "  const %s zd%d = %s[%d];\n", ty, i, arr, 2 + 2 * i);
  }
}

/* The kernel's source for the chain `members` (recipe order) rooted at the last, computing
 * over the shape `rm`; `dyn`: its sizes read at run time from in[nins] (nv__fchain's sz), so
 * one kernel serves every shape of its inputs' kinds (a shapeless function's). */
static char *generate(const recipe *r, const size_t *members, size_t nm, const chain_in *ins,
                      int nins, const size_t *esc, int nesc, const nv__output *const *src,
                      const mview *rm, bool dyn) {
  sbuf b = {0};
  size_t root = members[nm - 1];
  const rnode *rn = &r->nodes[root];
  nv_dtype od = rn->out[0].dtype;
  const char *oty = stype(od);
  bool reduce = !op_of(rn->prim);
  size_t elementwise = reduce ? nm - 1 : nm; /* the members computed per element */
  int64_t cols = reduce ? reduce_cols(rn, rm) : 0;
  bool formulas, trig;
  chain_formulas(r, members, nm, src, &formulas, &trig);
  sb_add(&b, "%s", PRELUDE);
  if (chain_has_half(r, members, nm, ins, nins))
    sb_add(&b, "%s", HALF_PRELUDE);
  if (formulas)
    sb_add(&b, "%s", (const char *)nv__fast_formulas_text);
  if (trig)
    sb_add(&b, "%s", TRIG_PRELUDE);
  if (trig)
    sb_add(&b, "NV_BODY unsigned nv_fused_body(int64_t lo, int64_t hi, const void *const *in, "
               "void *const *out, const int nv_exact) {\n  unsigned nv_big = 0;\n");
  else
    sb_add(&b, "void nv_fused_kernel(int64_t lo, int64_t hi, const void *const "
               "*in, void *const *out) {\n");
  for (int i = 0; i < nins; i++) {
    const char *ty = stype(ins[i].dtype);
    const char *rs = may_alias_out(&ins[i], od, reduce) ? "" : "restrict ";
    if (ins[i].kind == IN_SCALAR)
      sb_add(&b, "  const %s s%d = %s(((const %s *)in[%d])[0]);\n", ctype(ins[i].dtype), i,
             load_fn(ins[i].dtype), ty, i);
    else
      sb_add(&b, "  const %s *%sp%d = (const %s *)in[%d];\n", ty, rs, i, ty, i);
  }
  if (dyn) {
    sb_add(&b, "  const int64_t *restrict sz = (const int64_t *)in[%d];\n", nins);
    size_locals(&b, "sz", "int64_t", ins, nins, reduce, true);
  }
  /* Output 0 is a donated input's buffer when the evaluation donates one. */
  sb_add(&b, "  %s *%so = (%s *)out[0];\n", oty, reduce ? "restrict " : "", oty);
  for (int x = 0; x < nesc; x++) {
    const char *ety = stype(r->nodes[esc[x]].out[0].dtype);
    sb_add(&b, "  %s *restrict o%d = (%s *)out[%d];\n", ety, x + 1, ety, x + 1);
  }
  /* A reduction's element code goes to its own buffer, written twice into the row loop. */
  sbuf body = {0}, *eb = reduce ? &body : &b;
  bool rowwise = reduce && ((const nv__reduce_params *)rn->params)->naxes == 1;
  if (reduce) {
    /* One row per index, its elements folded into NV_LANES accumulators (element e into
     * e % NV_LANES, float32 values accumulated in double), which are then combined pairwise:
     * the lanes' loop vectorizes (no reassociation needed), its tail goes to lane 0. */
    lit c = size_text(dyn, "zc", (long long)cols, "ll");
    bool max = rn->prim == NV__PRIM_MAX;
    sb_add(&b, "  for (int64_t row = lo; row < hi; row++) {\n");
    sb_add(&b, "    double acc[NV_LANES];\n");
    sb_add(&b, "    for (int l = 0; l < NV_LANES; l++) acc[l] = %s;\n", max ? "-INFINITY" : "0.0");
    sb_add(&b, "    const int64_t e0 = row * %s;\n    int64_t cb = 0;\n", c.s);
    /* Over the last axis, a broadcast input's row (its period a multiple of the row's length)
     * or block value (constant along a row) is found once per row. */
    for (int i = 0; rowwise && i < nins; i++) {
      lit in = size_text(dyn, zname("zi", i).s, (long long)ins[i].inner, "ll");
      if (ins[i].kind == IN_TRAIL)
        sb_add(&b, "    const %s *restrict q%d = p%d + e0 %% %s;\n", stype(ins[i].dtype), i, i,
               in.s);
      else if (ins[i].kind == IN_BLOCK)
        sb_add(&b, "    const %s b%d = %s(p%d[(e0 / %s) %% %s]);\n", ctype(ins[i].dtype), i,
               load_fn(ins[i].dtype), i,
               size_text(dyn, zname("zd", i).s, (long long)ins[i].div, "ll").s, in.s);
    }
  }
  /* Element-wise with broadcast rows: runs that stay inside one row of the shortest rows
   * (longer rows are multiples of it), each a contiguous loop over every input. */
  int64_t run = 0;
  for (int i = 0; !reduce && i < nins; i++)
    if (ins[i].kind == IN_TRAIL || ins[i].kind == IN_BLOCK) {
      /* A broadcast row wraps every `inner` elements; a block value changes every `div`. */
      int64_t period = ins[i].kind == IN_TRAIL ? ins[i].inner : ins[i].div;
      if (!run || period < run)
        run = period;
    }
  if (run) {
    lit rt = size_text(dyn, "zc", (long long)run, "ll");
    sb_add(&b, "  for (int64_t e0 = lo; e0 < hi;) {\n");
    sb_add(&b, "    int64_t n = %s - e0 %% %s;\n    if (n > hi - e0) n = hi - e0;\n", rt.s,
           rt.s);
    for (int i = 0; i < nins; i++) {
      const char *ty = stype(ins[i].dtype);
      const char *rs = may_alias_out(&ins[i], od, reduce) ? "" : "restrict ";
      lit in = size_text(dyn, zname("zi", i).s, (long long)ins[i].inner, "ll");
      if (ins[i].kind == IN_FULL)
        sb_add(&b, "    const %s *%sq%d = p%d + e0;\n", ty, rs, i, i);
      else if (ins[i].kind == IN_TRAIL)
        sb_add(&b, "    const %s *restrict q%d = p%d + e0 %% %s;\n", ty, i, i, in.s);
      else if (ins[i].kind == IN_BLOCK)
        sb_add(&b, "    const %s b%d = %s(p%d[(e0 / %s) %% %s]);\n", ctype(ins[i].dtype), i,
               load_fn(ins[i].dtype), i,
               size_text(dyn, zname("zd", i).s, (long long)ins[i].div, "ll").s, in.s);
    }
    sb_add(&b, "    %s *oo = o + e0;\n", oty);
    for (int x = 0; x < nesc; x++)
      sb_add(&b, "    %s *restrict oo%d = o%d + e0;\n", stype(r->nodes[esc[x]].out[0].dtype),
             x + 1, x + 1);
    sb_add(&b, "    NV_IVDEP\n    for (int64_t j = 0; j < n; j++) {\n");
  } else if (!reduce) {
    sb_add(&b, "  NV_IVDEP\n  for (int64_t e = lo; e < hi; e++) {\n");
  }
  for (int i = 0; i < nins; i++) {
    const char *ty = ctype(ins[i].dtype), *ld = load_fn(ins[i].dtype);
    lit zi = zname("zi", i), zd = zname("zd", i);
    if (ins[i].kind == IN_SCALAR)
      sb_add(eb, "    const %s x%d = s%d;\n", ty, i, i);
    else if (rowwise && ins[i].kind == IN_BLOCK)
      sb_add(eb, "    const %s x%d = b%d;\n", ty, i, i);
    else if (rowwise && ins[i].kind == IN_TRAIL)
      sb_add(eb, "    const %s x%d = %s(q%d[c]);\n", ty, i, ld, i);
    else if (run && ins[i].kind == IN_BLOCK)
      sb_add(eb, "    const %s x%d = b%d;\n", ty, i, i);
    else if (run)
      sb_add(eb, "    const %s x%d = %s(q%d[j]);\n", ty, i, ld, i);
    else if (ins[i].kind == IN_BLOCK)
      sb_add(eb, "    const %s x%d = %s(p%d[(e / %s) %% %s]);\n", ty, i, ld, i,
             size_text(dyn, zd.s, (long long)ins[i].div, "ll").s,
             size_text(dyn, zi.s, (long long)ins[i].inner, "ll").s);
    else if (ins[i].kind == IN_FULL)
      sb_add(eb, "    const %s x%d = %s(p%d[e]);\n", ty, i, ld, i);
    else
      sb_add(eb, "    const %s x%d = %s(p%d[e %% %s]);\n", ty, i, ld, i,
             size_text(dyn, zi.s, (long long)ins[i].inner, "").s);
  }
  for (size_t m = 0; m < elementwise; m++)
    emit_node(eb, r, members[m], ins, nins, src, false);
  /* The intermediates used outside the chain, element by element. */
  for (int x = 0; x < nesc; x++)
    sb_add(eb, run ? "    oo%d[j] = %s(t%zu);\n" : "    o%d[e] = %s(t%zu);\n", x + 1,
           store_fn(r->nodes[esc[x]].out[0].dtype), esc[x]);
  if (reduce) {
    sb_add(eb, "    ");
    ref last = rn->in[0];
    if (rn->prim == NV__PRIM_MAX) {
      sb_add(eb, "acc[nv_l] = NV_FMAXN(acc[nv_l], (double)");
      operand(eb, last, ins, nins);
      sb_add(eb, ");\n");
    } else {
      sb_add(eb, "acc[nv_l] += ");
      operand(eb, last, ins, nins);
      sb_add(eb, ";\n");
    }
    const char *text = body.oom || !body.p ? "" : body.p;
    b.oom |= body.oom;
    lit c = size_text(dyn, "zc", (long long)cols, "ll");
    sb_add(&b, "    for (; cb + NV_LANES <= %s; cb += NV_LANES)\n"
               "      for (int nv_l = 0; nv_l < NV_LANES; nv_l++) {\n"
               "    const int64_t c = cb + nv_l, e = e0 + c;\n    (void)c;\n%s      }\n"
               "    for (; cb < %s; cb++) {\n    const int64_t c = cb, e = e0 + c;\n"
               "    const int nv_l = 0;\n    (void)c;\n%s    }\n", c.s, text, c.s, text);
    nv__free(body.p);
    if (rn->prim == NV__PRIM_MAX)
      sb_add(&b, "    double r = NV_FMAXN(NV_FMAXN(NV_FMAXN(acc[0], acc[1]), NV_FMAXN(acc[2], "
                 "acc[3])), NV_FMAXN(NV_FMAXN(acc[4], acc[5]), NV_FMAXN(acc[6], acc[7])));\n");
    else
      sb_add(&b, "    double r = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + "
                 "(acc[6] + acc[7]));\n");
    if (rn->prim == NV__PRIM_MEAN)
      sb_add(&b, "    o[row] = (%s)(r / %s);\n  }\n}\n", oty,
             size_text(dyn, "zc", (long long)cols, ".0").s);
    else
      sb_add(&b, "    o[row] = (%s)r;\n  }\n}\n", oty);
  } else if (run) {
    sb_add(&b, "    oo[j] = %s(t%zu);\n    }\n    e0 += n;\n  }\n}\n", store_fn(od), root);
  } else {
    sb_add(&b, "    o[e] = %s(t%zu);\n  }\n}\n", store_fn(od), root);
  }
  if (trig && !b.oom) {
    b.n -= 2; /* the body's closing "}\n" */
    b.p[b.n] = 0;
    sb_add(&b, "  return nv_big;\n}\n"
               "void nv_fused_kernel(int64_t lo, int64_t hi, const void *const *in, "
               "void *const *out) {\n");
    /* A donated input (output 0's buffer) is overwritten by the first pass: element-wise,
     * the range goes in chunks whose output 0 is saved first and put back before a chunk's
     * exact pass, which then reads the input as it was. */
    sb_add(&b, "  int nv_alias = 0;\n");
    for (int i = 0; i < nins; i++)
      if (may_alias_out(&ins[i], od, reduce))
        sb_add(&b, "  nv_alias |= in[%d] == out[0];\n", i);
    sb_add(&b, "  if (!nv_alias) {\n"
               "    if (nv_fused_body(lo, hi, in, out, 0)) nv_fused_body(lo, hi, in, out, 1);\n"
               "    return;\n  }\n"
               "  %s *o = (%s *)out[0];\n"
               "  for (int64_t c0 = lo; c0 < hi; c0 += 1024) {\n"
               "    const int64_t c1 = hi - c0 < 1024 ? hi : c0 + 1024;\n"
               "    %s keep[1024];\n"
               "    for (int64_t e = c0; e < c1; e++) keep[e - c0] = o[e];\n"
               "    if (!nv_fused_body(c0, c1, in, out, 0)) continue;\n"
               "    for (int64_t e = c0; e < c1; e++) o[e] = keep[e - c0];\n"
               "    nv_fused_body(c0, c1, in, out, 1);\n  }\n}\n",
           oty, oty, oty);
  }
  if (b.oom) {
    nv__free(b.p);
    return NULL;
  }
  return b.p;
}

/* ---- CUDA C for chains on GPU streams ---- */

/* The device helpers the CUDA templates name, as the GPU hand kernels compute them
 * (src/cuda/elementwise_device.cuh: negation flips the sign bit, NaN included; sigmoid's
 * formulas; src/cuda/convert.cuh: float <-> double). NVRTC provides the math functions;
 * nothing is included. */
static const char CUDA_PRELUDE[] =
    "#define NV_FMAXN(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))\n"
    "#define NV_FMINN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))\n"
    "#define NV_NINF __longlong_as_double((long long)0xfff0000000000000ull)\n"
    "__device__ __forceinline__ float nv_neg_f(float x) {\n"
    "  return __uint_as_float(__float_as_uint(x) ^ 0x80000000u);\n}\n"
    "__device__ __forceinline__ double nv_neg_d(double x) {\n"
    "  return __longlong_as_double(__double_as_longlong(x) ^ "
    "(long long)0x8000000000000000ull);\n}\n"
    "__device__ __forceinline__ float nv_sigmoid_f(float x) {\n"
    "  float e = expf(-fabsf(x));\n"
    "  return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);\n}\n"
    "__device__ __forceinline__ double nv_sigmoid_d(double x) {\n"
    "  double e = exp(-fabs(x)), r = 1.0 / (1.0 + e);\n  return x >= 0 ? r : e * r;\n}\n"
    "__device__ __forceinline__ double nv_f2d(float f) {\n"
    "  unsigned int u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u)\n"
    "    return __longlong_as_double((long long)(((unsigned long long)(u & 0x80000000u) << 32) |\n"
    "                                            0x7ff8000000000000ull |\n"
    "                                            ((unsigned long long)(u & 0x7fffffu) << 29)));\n"
    "  return (double)f;\n}\n"
    "__device__ __forceinline__ float nv_d2f(double d) {\n"
    "  unsigned long long b = (unsigned long long)__double_as_longlong(d);\n"
    "  if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)\n"
    "    return __uint_as_float((unsigned int)(b >> 32 & 0x80000000u) | 0x7fc00000u |\n"
    "                           (unsigned int)((b >> 29) & 0x7fffffu));\n"
    "  return __double2float_rn(d);\n}\n";

/* float16/bfloat16 on the device, bit for bit src/cuda/elementwise_device.cuh's and
 * convert.cuh's conversions (so those of src/core/convert.h): bits to float (exact; NaN keeps
 * sign and payload), float to bits rounding once to nearest even (NaN as the CPU's), float64
 * to bits rounding once (convert.cuh's round_bits); nv_r*: rounded to the format and back.
 * Emitted only into chains that hold such values. */
static const char CUDA_HALF_PRELUDE[] =
    "__device__ __forceinline__ float nv_h2f(unsigned short h) {\n"
    "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "  if ((h & 0x7fff) > 0x7c00)\n"
    "    f = __uint_as_float(((unsigned)(h & 0x8000) << 16) | 0x7f800000u |\n"
    "                        ((unsigned)(h & 0x3ff) << 13));\n"
    "  return f;\n}\n"
    "__device__ __forceinline__ unsigned short nv_f2h(float f) {\n"
    "  unsigned short h;\n  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  unsigned x = __float_as_uint(f);\n"
    "  if ((x & 0x7fffffffu) > 0x7f800000u)\n"
    "    h = (unsigned short)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));\n"
    "  return h;\n}\n"
    "__device__ __forceinline__ float nv_b2f(unsigned short h) {\n"
    "  return __uint_as_float((unsigned)h << 16);\n}\n"
    "__device__ __forceinline__ unsigned short nv_f2b(float f) {\n"
    "  unsigned u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (unsigned short)(u >> 16);\n}\n"
    "__device__ __forceinline__ float nv_rh(float f) { return nv_h2f(nv_f2h(f)); }\n"
    "__device__ __forceinline__ float nv_rb(float f) { return nv_b2f(nv_f2b(f)); }\n"
    "__device__ unsigned nv_round_bits(double d, int ebits, int mbits, int *ovf) {\n"
    "  *ovf = 0;\n  if (d == 0) return 0;\n"
    "  int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias, e;\n"
    "  frexp(d, &e);\n  int E = e - 1;\n  if (E < emin) E = emin;\n"
    "  unsigned long long q = (unsigned long long)rint(ldexp(d, mbits - E));\n"
    "  if (q >= (2ull << mbits)) {\n    q >>= 1;\n    E += 1;\n  }\n"
    "  if (q < (1ull << mbits)) return (unsigned)q;\n"
    "  if (E + bias >= (1 << ebits) - 1) {\n    *ovf = 1;\n    return 0;\n  }\n"
    "  return ((unsigned)(E + bias) << mbits) | (unsigned)(q - (1ull << mbits));\n}\n"
    "__device__ float nv_rd(double d, int ebits, int mbits, unsigned nan, unsigned inf) {\n"
    "  unsigned long long u = (unsigned long long)__double_as_longlong(d);\n"
    "  unsigned sign = (u >> 63) ? 0x8000u : 0u, b;\n"
    "  unsigned long long mag = u & 0x7fffffffffffffffull;\n"
    "  int ovf = 0;\n"
    "  if (mag > 0x7ff0000000000000ull) b = nan;\n"
    "  else if (mag == 0x7ff0000000000000ull) b = inf;\n"
    "  else b = nv_round_bits(fabs(d), ebits, mbits, &ovf);\n"
    "  if (ovf) b = inf;\n"
    "  return ebits == 5 ? nv_h2f((unsigned short)(sign | b)) : "
    "nv_b2f((unsigned short)(sign | b));\n}\n"
    "__device__ __forceinline__ float nv_rdh(double d) { return nv_rd(d, 5, 10, 0x7e00u, "
    "0x7c00u); }\n"
    "__device__ __forceinline__ float nv_rdb(double d) { return nv_rd(d, 8, 7, 0x7fc0u, "
    "0x7f80u); }\n";

/* The vector loads of a value dtype: chunks of the CUDA vector type `*type`, each holding
 * `*per` elements (float16/bfloat16: 8 in a uint4, two a 32-bit word); the alignment a chunk's
 * load needs is its size. */
static void vchunk(nv_dtype d, const char **type, int *per) {
  *type = half_dtype(d) ? "uint4" : d == NV_DTYPE_FLOAT32 ? "float4"
          : d == NV_DTYPE_FLOAT64                        ? "double2"
                                                         : "uchar4";
  *per = half_dtype(d) ? 8 : d == NV_DTYPE_FLOAT64 ? 2 : 4;
}
static int valign(nv_dtype d) { return d == NV_DTYPE_BOOL ? 4 : 16; }

/* Lane l's value of a vector of dtype d held in chunks v<i>_<c> (a compute value). */
static void vlane(sbuf *b, nv_dtype d, int i, int l) {
  static const char comp[] = "xyzw";
  const char *type;
  int per;
  vchunk(d, &type, &per);
  if (half_dtype(d))
    sb_add(b, "%s((unsigned short)(v%d_0.%c >> %d))", load_fn(d), i, comp[l / 2], 16 * (l % 2));
  else
    sb_add(b, "v%d_%d.%c", i, l / per, comp[l % per]);
}

/* Stores the lanes w<x>[0..lanes) of an output of dtype d as vector v of its chunks. */
static void vstore(sbuf *b, nv_dtype d, int x, int lanes) {
  const char *type;
  int per;
  vchunk(d, &type, &per);
  for (int c = 0; c < lanes / per; c++) {
    sb_add(b, "      ((%s *)o%d)[v * %d + %d] = make_%s(", type, x, lanes / per, c, type);
    if (half_dtype(d))
      for (int w = 0; w < 4; w++)
        sb_add(b, "%s(unsigned)%s(w%d[%d]) | ((unsigned)%s(w%d[%d]) << 16)", w ? ", " : "",
               store_fn(d), x, 2 * w, store_fn(d), x, 2 * w + 1);
    else
      for (int l = 0; l < per; l++)
        sb_add(b, "%sw%d[%d]", l ? ", " : "", x, c * per + l);
    sb_add(b, ");\n");
  }
}

/* Loads input i's value for element `e` (a C expression) into x<i>. */
static void cuda_load(sbuf *b, const chain_in *in, int i, const char *e, bool dyn) {
  const char *ty = ctype(in->dtype), *ld = load_fn(in->dtype);
  lit inner = size_text(dyn, zname("zi", i).s, (long long)in->inner, "ll");
  if (in->kind == IN_SCALAR)
    sb_add(b, "      const %s x%d = s%d;\n", ty, i, i);
  else if (in->kind == IN_FULL)
    sb_add(b, "      const %s x%d = %s(p%d[%s]);\n", ty, i, ld, i, e);
  else if (in->kind == IN_TRAIL)
    sb_add(b, "      const %s x%d = %s(p%d[(%s) %% %s]);\n", ty, i, ld, i, e, inner.s);
  else
    sb_add(b, "      const %s x%d = %s(p%d[((%s) / %s) %% %s]);\n", ty, i, ld, i, e,
           size_text(dyn, zname("zd", i).s, (long long)in->div, "ll").s, inner.s);
}

/* One element's inputs loaded at index `e`, its outputs declared (y0 of compute type `oty`,
 * then the escaping intermediates') and nv_body called on them. */
static void cuda_body_call(sbuf *b, const recipe *r, const chain_in *ins, int nins,
                           const size_t *esc, int nesc, const char *oty, bool dyn) {
  for (int i = 0; i < nins; i++)
    cuda_load(b, &ins[i], i, "e", dyn);
  sb_add(b, "      %s y0;\n", oty);
  for (int x = 0; x < nesc; x++)
    sb_add(b, "      %s y%d;\n", ctype(r->nodes[esc[x]].out[0].dtype), x + 1);
  sb_add(b, "      nv_body(");
  for (int i = 0; i < nins; i++)
    sb_add(b, "x%d, ", i);
  for (int x = 0; x <= nesc; x++)
    sb_add(b, "%sy%d", x ? ", " : "", x);
  sb_add(b, ");\n");
}

/* The CUDA source of the chain `members` (recipe order, root last) for the launch `k`
 * describes (k->reduce, k->cols, k->group, k->vec, k->lanes set): `nv_fused_kernel`, blocks of
 * 256 threads. Its parameters: a pointer per input (the view's start), one per output (the
 * root's values, then the escaping intermediates'), then { long long off[inputs + outputs];
 * long long n; } by value: each pointer's element-0 offset, and the elements (element-wise) or
 * rows (a reduction); a dyn kernel's (k->dyn: a shapeless chain's) struct ends in
 * long long sz[1 + 2 * inputs], the call's sizes (nv__fchain's sz), which its source names
 * where a trace's kernel has literals. Element-wise chains walk their elements with a grid-stride loop,
 * k->lanes at a time through 16-byte vector loads (4-byte for bool) where every input is whole
 * or a scalar and every pointer is aligned; a chain ending in a reduction takes one row per
 * `group` threads (a warp, or a block whose warps combine through shared memory), folding in
 * double as the C kernel does. Output 0 may be an input's buffer (a donation): each element,
 * or vector of them, is read by the thread that writes it, before it writes it. */
static char *generate_cuda(const recipe *r, const size_t *members, size_t nm, const chain_in *ins,
                           int nins, const size_t *esc, int nesc, const nv__output *const *src,
                           const nv__fused *k) {
  sbuf b = {0};
  size_t root = members[nm - 1];
  const rnode *rn = &r->nodes[root];
  nv_dtype od = rn->out[0].dtype;
  const char *oty = ctype(od);
  size_t elementwise = k->reduce ? nm - 1 : nm;
  int nout = nesc + 1;
  /* The dtype of output x. */
#define ODT(x) ((x) ? r->nodes[esc[(x) - 1]].out[0].dtype : od)
  sb_add(&b, "%s", CUDA_PRELUDE);
  if (chain_has_half(r, members, nm, ins, nins))
    sb_add(&b, "%s", CUDA_HALF_PRELUDE);
  /* The per-element body: the inputs' values in, the outputs' values out. */
  sb_add(&b, "__device__ __forceinline__ void nv_body(");
  for (int i = 0; i < nins; i++)
    sb_add(&b, "%s x%d, ", ctype(ins[i].dtype), i);
  sb_add(&b, "%s &y0", oty);
  for (int x = 0; x < nesc; x++)
    sb_add(&b, ", %s &y%d", ctype(ODT(x + 1)), x + 1);
  sb_add(&b, ") {\n");
  for (size_t m = 0; m < elementwise; m++)
    emit_node(&b, r, members[m], ins, nins, src, true);
  sb_add(&b, "    y0 = ");
  if (k->reduce)
    operand(&b, rn->in[0], ins, nins);
  else
    sb_add(&b, "t%zu", root);
  sb_add(&b, ";\n");
  for (int x = 0; x < nesc; x++)
    sb_add(&b, "    y%d = t%zu;\n", x + 1, esc[x]);
  sb_add(&b, "}\n");
  if (k->dyn)
    sb_add(&b, "struct nv_fp {\n  long long off[%d];\n  long long n;\n  long long sz[%d];\n};\n",
           nins + nout, 1 + 2 * nins);
  else
    sb_add(&b, "struct nv_fp {\n  long long off[%d];\n  long long n;\n};\n", nins + nout);
  sb_add(&b, "extern \"C\" __global__ void __launch_bounds__(256) nv_fused_kernel(");
  for (int i = 0; i < nins; i++)
    sb_add(&b, "const %s *a%d, ", stype(ins[i].dtype), i);
  for (int x = 0; x < nout; x++)
    sb_add(&b, "%s *b%d, ", stype(ODT(x)), x);
  sb_add(&b, "const nv_fp P) {\n");
  for (int i = 0; i < nins; i++) {
    sb_add(&b, "  const %s *p%d = a%d + P.off[%d];\n", stype(ins[i].dtype), i, i, i);
    if (ins[i].kind == IN_SCALAR)
      sb_add(&b, "  const %s s%d = %s(p%d[0]);\n", ctype(ins[i].dtype), i,
             load_fn(ins[i].dtype), i);
  }
  for (int x = 0; x < nout; x++)
    sb_add(&b, "  %s *o%d = b%d + P.off[%d];\n", stype(ODT(x)), x, x, nins + x);
  if (k->dyn)
    size_locals(&b, "P.sz", "long long", ins, nins, k->reduce, false);
  if (!k->reduce) {
    sb_add(&b, "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    sb_add(&b, "  const long long step = (long long)gridDim.x * blockDim.x;\n");
    sb_add(&b, "  long long e0 = 0;\n");
    if (k->vec) {
      /* k->lanes elements per step: every whole input and every output through vector
       * accesses (a pointer of the wrong alignment takes the scalar loop throughout). */
      int L = k->lanes;
      sb_add(&b, "  if ((0");
      for (int i = 0; i < nins; i++)
        if (ins[i].kind == IN_FULL)
          sb_add(&b, " | ((unsigned long long)p%d & %d)", i, valign(ins[i].dtype) - 1);
      for (int x = 0; x < nout; x++)
        sb_add(&b, " | ((unsigned long long)o%d & %d)", x, valign(ODT(x)) - 1);
      sb_add(&b, ") == 0) {\n");
      sb_add(&b, "    const long long nv = P.n / %d;\n", L);
      sb_add(&b, "    for (long long v = tid; v < nv; v += step) {\n");
      for (int i = 0; i < nins; i++)
        if (ins[i].kind == IN_FULL) {
          const char *type;
          int per;
          vchunk(ins[i].dtype, &type, &per);
          for (int c = 0; c < L / per; c++)
            sb_add(&b, "      const %s v%d_%d = ((const %s *)p%d)[v * %d + %d];\n", type, i, c,
                   type, i, L / per, c);
        }
      for (int x = 0; x < nout; x++)
        sb_add(&b, "      %s w%d[%d];\n", ctype(ODT(x)), x, L);
      for (int l = 0; l < L; l++) {
        sb_add(&b, "      nv_body(");
        for (int i = 0; i < nins; i++) {
          if (ins[i].kind == IN_FULL)
            vlane(&b, ins[i].dtype, i, l);
          else
            sb_add(&b, "s%d", i);
          sb_add(&b, ", ");
        }
        for (int x = 0; x < nout; x++)
          sb_add(&b, "%sw%d[%d]", x ? ", " : "", x, l);
        sb_add(&b, ");\n");
      }
      for (int x = 0; x < nout; x++)
        vstore(&b, ODT(x), x, L);
      sb_add(&b, "    }\n    e0 = nv * %d;\n  }\n", L);
    }
    sb_add(&b, "  for (long long e = e0 + tid; e < P.n; e += step) {\n");
    cuda_body_call(&b, r, ins, nins, esc, nesc, oty, k->dyn);
    for (int x = 0; x < nout; x++)
      sb_add(&b, "      o%d[e] = %s(y%d);\n", x, store_fn(ODT(x)), x);
    sb_add(&b, "  }\n}\n");
  } else {
    bool max = rn->prim == NV__PRIM_MAX;
    const char *init = max ? "NV_NINF" : "0.0";
    const char *comb = max ? "acc = NV_FMAXN(acc, u);" : "acc = acc + u;";
    long long cols = (long long)k->cols;
    lit cl = size_text(k->dyn, "zc", cols, "ll");
    int g = k->group;
    if (g > 32)
      sb_add(&b, "  __shared__ double nv_part[%d];\n", g / 32);
    sb_add(&b, "  const int lane = threadIdx.x %% %d;\n", g);
    sb_add(&b, "  const long long per = %d;\n", 256 / g);
    sb_add(&b, "  for (long long row = (long long)blockIdx.x * per + threadIdx.x / %d; row < P.n;"
               " row += (long long)gridDim.x * per) {\n", g);
    sb_add(&b, "    double acc = %s;\n", init);
    int L = k->lanes;
    if (k->vec) {
      /* The vector steps (pointers aligned for them: uniform over the grid), each lane's
       * values folded in order; else the element loop below. */
      sb_add(&b, "    if ((0");
      for (int i = 0; i < nins; i++)
        if (ins[i].kind != IN_SCALAR)
          sb_add(&b, " | ((unsigned long long)p%d & %d)", i, valign(ins[i].dtype) - 1);
      sb_add(&b, ") == 0) {\n");
      sb_add(&b, "#pragma unroll 4\n");
      sb_add(&b, "    for (long long c = (long long)lane * %d; c < %s; c += %d) {\n", L, cl.s,
             g * L);
      sb_add(&b, "      const long long v = (row * %s + c) / %d;\n", cl.s, L);
      for (int i = 0; i < nins; i++) {
        if (ins[i].kind == IN_SCALAR)
          continue;
        const char *type;
        int per;
        vchunk(ins[i].dtype, &type, &per);
        /* The vector's index: a whole input's v, a trailing block's own (e % inner) / L. */
        char vi[32] = "v";
        if (ins[i].kind == IN_TRAIL) {
          snprintf(vi, sizeof vi, "vt%d", i);
          sb_add(&b, "      const long long vt%d = ((row * %s + c) %% %s) / %d;\n", i, cl.s,
                 size_text(k->dyn, zname("zi", i).s, (long long)ins[i].inner, "ll").s, L);
        }
        for (int c = 0; c < L / per; c++)
          sb_add(&b, "      const %s v%d_%d = ((const %s *)p%d)[%s * %d + %d];\n", type, i, c,
                 type, i, vi, L / per, c);
      }
      for (int l = 0; l < L; l++) {
        sb_add(&b, "      {\n      %s y0;\n      nv_body(", oty);
        for (int i = 0; i < nins; i++) {
          if (ins[i].kind == IN_SCALAR)
            sb_add(&b, "s%d", i);
          else
            vlane(&b, ins[i].dtype, i, l);
          sb_add(&b, ", ");
        }
        sb_add(&b, "y0);\n      const double u = (double)y0;\n      %s\n      }\n", comb);
      }
      sb_add(&b, "    }\n    } else\n");
    }
    sb_add(&b, "    for (long long c = lane; c < %s; c += %d) {\n", cl.s, g);
    sb_add(&b, "      const long long e = row * %s + c;\n", cl.s);
    cuda_body_call(&b, r, ins, nins, esc, nesc, oty, k->dyn);
    sb_add(&b, "      const double u = (double)y0;\n      %s\n", comb);
    for (int x = 0; x < nesc; x++)
      sb_add(&b, "      o%d[e] = %s(y%d);\n", x + 1, store_fn(ODT(x + 1)), x + 1);
    sb_add(&b, "    }\n");
    sb_add(&b, "    for (int m = 16; m > 0; m >>= 1) {\n"
               "      const double u = __shfl_xor_sync(0xffffffffu, acc, m);\n      %s\n    }\n",
           comb);
    if (g > 32) {
      /* The warps' partials through shared memory; the second barrier keeps the next row's
       * writes after this row's reads. */
      sb_add(&b, "    if (lane %% 32 == 0) nv_part[lane / 32] = acc;\n    __syncthreads();\n");
      sb_add(&b, "    if (lane < 32) {\n      acc = lane < %d ? nv_part[lane] : %s;\n", g / 32,
             init);
      sb_add(&b, "      for (int m = 16; m > 0; m >>= 1) {\n"
                 "        const double u = __shfl_xor_sync(0xffffffffu, acc, m);\n        %s\n"
                 "      }\n    }\n    __syncthreads();\n",
             comb);
    }
    if (rn->prim == NV__PRIM_MEAN)
      sb_add(&b, "    if (lane == 0) o0[row] = (%s)(acc / %s);\n", oty,
             size_text(k->dyn, "zc", cols, ".0").s);
    else
      sb_add(&b, "    if (lane == 0) o0[row] = (%s)acc;\n", oty);
    sb_add(&b, "  }\n}\n");
  }
#undef ODT
  if (b.oom) {
    nv__free(b.p);
    return NULL;
  }
  return b.p;
}

/* ---- The compiler and the caches ---- */

typedef struct loaded {
  struct loaded *next;
  uint64_t hash;
  char *source;
  nv__fused_fn fn;
} loaded;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *cache;
static int compiler_state; /* 0: not tried, 1: works, -1: missing (warned once) */
static char compiler_version[64];

uint64_t nv__compile_hash(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static const char *compiler(void) {
  const char *cc = getenv("NUVEC_CC");
  return cc && *cc ? cc : "cc";
}

static const char *flags(void) {
  __builtin_cpu_init();
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("bmi2");
  return v3 ? "-O3 -march=x86-64-v3 -fPIC -shared -ffp-contract=off "
              "-fno-math-errno "
              "-fno-trapping-math"
            : "-O3 -fPIC -shared -ffp-contract=off -fno-math-errno "
              "-fno-trapping-math";
}

/* The compiler's version (part of the cache key), or false when it does not
 * run. */
static bool probe_compiler(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s -dumpfullversion -dumpversion 2>/dev/null", compiler());
  FILE *p = popen(cmd, "r");
  if (!p)
    return false;
  char line[64] = {0};
  bool got = fgets(line, sizeof line, p) != NULL;
  int rc = pclose(p);
  if (!got || rc != 0)
    return false;
  line[strcspn(line, "\n")] = 0;
  snprintf(compiler_version, sizeof compiler_version, "%s", line);
  return true;
}

bool nv__compile_cache_dir(char *dir, size_t n) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char base[400];
  if (xdg && *xdg)
    snprintf(base, sizeof base, "%s", xdg);
  else if (home && *home)
    snprintf(base, sizeof base, "%s/.cache", home);
  else
    snprintf(base, sizeof base, "/tmp");
  if (mkdir(base, 0700) != 0 && errno != EEXIST)
    return false;
  snprintf(dir, n, "%s/nuvec", base);
  return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

static nv__fused_fn load_so(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return NULL;
  nv__fused_fn fn;
  *(void **)&fn = dlsym(h, "nv_fused_kernel");
  if (!fn)
    dlclose(h);
  return fn;
}

/* Compiles `source` (or finds it compiled) and returns its kernel; NULL when no
 * compiler works (warned once) or compiling fails. Called under cache_lock. */
static nv__fused_fn build(const char *source, uint64_t hash) {
  char dir[512], so[640], tmp_c[700], tmp_so[700], cmd[2048];
  if (!nv__compile_cache_dir(dir, sizeof dir))
    return NULL;
  snprintf(so, sizeof so, "%s/k%016llx.so", dir, (unsigned long long)hash);
  nv__fused_fn fn = access(so, R_OK) == 0 ? load_so(so) : NULL;
  if (fn)
    return fn;
  snprintf(tmp_c, sizeof tmp_c, "%s/k%016llx.%ld.c", dir, (unsigned long long)hash, (long)getpid());
  snprintf(tmp_so, sizeof tmp_so, "%s/k%016llx.%ld.so", dir, (unsigned long long)hash,
           (long)getpid());
  FILE *f = fopen(tmp_c, "w");
  if (!f)
    return NULL;
  bool ok = fputs(source, f) >= 0;
  ok = fclose(f) == 0 && ok;
  snprintf(cmd, sizeof cmd, "%s %s -o '%s' '%s' -lm >/dev/null 2>&1", compiler(), flags(), tmp_so,
           tmp_c);
  ok = ok && system(cmd) == 0;
  unlink(tmp_c);
  /* A rename is atomic: another process sees the whole file or none. */
  if (ok)
    ok = rename(tmp_so, so) == 0;
  if (!ok) {
    unlink(tmp_so);
    return NULL;
  }
  return load_so(so);
}

/* The kernel of `source`, from the caches or compiled now. NULL when it cannot
 * be had. */
static nv__fused_fn kernel_for(const char *source) {
  pthread_mutex_lock(&cache_lock);
  nv__fused_fn fn = NULL;
  if (compiler_state == 0) {
    compiler_state = probe_compiler() ? 1 : -1;
    if (compiler_state < 0)
      fprintf(stderr,
              "nuvec: compile: no working C compiler (%s; set NUVEC_CC): "
              "compiled functions run "
              "unfused\n",
              compiler());
  }
  if (compiler_state > 0) {
    uint64_t h = nv__compile_hash(0xcbf29ce484222325ull, source);
    h = nv__compile_hash(nv__compile_hash(h, flags()), compiler_version);
    h = nv__compile_hash(h, compiler());
    for (loaded *l = cache; l && !fn; l = l->next)
      if (l->hash == h && !strcmp(l->source, source))
        fn = l->fn;
    if (!fn && (fn = build(source, h)) != NULL) {
      loaded *l = nv__malloc(sizeof *l);
      char *copy = l ? nv__malloc(strlen(source) + 1) : NULL;
      if (copy) {
        strcpy(copy, source);
        *l = (loaded){cache, h, copy, fn};
        cache = l;
      } else {
        nv__free(l);
      }
    }
  }
  pthread_mutex_unlock(&cache_lock);
  return fn;
}

/* ---- Keepers: the arrays through which COMPILED nodes hold their kernel ----
 */

static void fused_release(void *p) {
  nv__fused *k = p;
  if (k && atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1)
    nv__free(k);
}

/* An evaluated empty array whose buffer holds the reference to `k` given to it;
 * its node (held) in *node. */
static nv_status keeper(nv__fused *k, nv__node **node) {
  nv__buffer *b = nv__buffer_wrap(k, 0, NV__BUF_NOCOPY, fused_release, k);
  if (!b) {
    fused_release(k);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  int shape[1] = {0};
  nv__scope_suspend();
  nv_array *a = nv__array_from_buffer(b, 0, NV_DTYPE_UINT8, shape, 1, NULL);
  nv__scope_resume();
  nv__buffer_release(b);
  nv_status s = nv_array_status(a);
  if (s == NV_OK)
    *node = nv__node_retain(a->node);
  nv_release(a);
  return s;
}

/* ---- The pass ---- */

bool nv__compiled_donates(const nv__node *n) {
  const nv__compiled_params *p = n->params;
  return !p->k->reduce;
}

nv_status nv__compile_compact(recipe *r) {
  bool *live = nv__calloc(r->n + 1, sizeof *live);
  size_t *renum = nv__malloc((r->n + 1) * sizeof *renum);
  if (!live || !renum) {
    nv__free(live);
    nv__free(renum);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  for (size_t i = 0; i < r->nout; i++)
    if (r->outs[i].kind == R_NODE)
      live[r->outs[i].i] = true;
  for (size_t k = r->n; k-- > 0;)
    for (int i = 0; live[k] && i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_NODE)
        live[r->nodes[k].in[i].i] = true;
  size_t m = 0;
  for (size_t k = 0; k < r->n; k++) {
    if (!live[k]) {
      nv__free(r->nodes[k].params);
      nv__free(r->nodes[k].in);
      nv__free(r->nodes[k].out);
      continue;
    }
    renum[k] = m;
    r->nodes[m++] = r->nodes[k];
  }
  r->n = m;
  for (size_t k = 0; k < r->n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_NODE)
        r->nodes[k].in[i].i = (int)renum[r->nodes[k].in[i].i];
  for (size_t i = 0; i < r->nout; i++)
    if (r->outs[i].kind == R_NODE)
      r->outs[i].i = (int)renum[r->outs[i].i];
  nv__free(live);
  nv__free(renum);
  return NV_OK;
}

static bool ref_same(ref a, ref b) { return a.kind == b.kind && a.i == b.i && a.idx == b.idx; }

/* The GPU launch of a chain rooted at rn over the shape rm (k->reduce set): whether it steps
 * k->lanes elements at a time, or a reduction's row length and threads per row. False: the
 * chain stays unfused on the GPU. */
static bool gpu_launch(const recipe *r, const rnode *rn, const mview *rm, const chain_in *ins,
                       int nins, const size_t *esc, int nesc, nv__fused *k) {
  k->vec = !k->reduce;
  /* 8 elements a step where the chain moves float16/bfloat16 values (one 16-byte load of
   * each), else 4 */
  k->lanes = half_dtype(rn->out[0].dtype) ? 8 : 4;
  for (int i = 0; i < nins; i++) {
    k->vec &= ins[i].kind == IN_FULL || ins[i].kind == IN_SCALAR;
    if (ins[i].kind == IN_FULL && half_dtype(ins[i].dtype))
      k->lanes = 8;
  }
  for (int x = 0; x < nesc; x++)
    if (half_dtype(r->nodes[esc[x]].out[0].dtype))
      k->lanes = 8;
  if (!k->reduce)
    return true;
  k->cols = reduce_cols(rn, rm);
  /* A warp per row of up to 256 elements, a block per longer row. */
  k->group = k->cols <= 256 ? 32 : 256;
  /* Rows read `lanes` elements a step through vector loads where every input is whole, a
   * scalar or a trailing block of whole vectors, the rows are whole vectors, and no
   * intermediate escapes (its stores would be element by element). */
  k->vec = nesc == 0 && k->cols % k->lanes == 0;
  for (int i = 0; i < nins; i++)
    k->vec &= ins[i].kind == IN_FULL || ins[i].kind == IN_SCALAR ||
              (ins[i].kind == IN_TRAIL && ins[i].inner % k->lanes == 0);
  /* Fewer long rows than the H200 has SMs would leave most of it idle (a whole-array sum
   * is one block): the hand reductions, which split rows across blocks, do better. */
  int64_t size = 1;
  for (int d = 0; d < rm->ndim; d++)
    size *= rm->shape[d];
  return !(k->cols > 65536 && size / k->cols < 132);
}

#ifdef NUVEC_HAVE_CUDA
/* The test hook nv__test_fuse_nvrtc: CPU chains also compile, with NVRTC, the CUDA source
 * they would get on a GPU stream (no GPU needed); the outcomes are counted. */
static atomic_bool nvrtc_check;
static atomic_long nvrtc_ok, nvrtc_failed;
static char nvrtc_why[512];

static void check_cuda_source(const recipe *r, const size_t *members, size_t nm,
                              const chain_in *ins, int nins, const size_t *esc, int nesc,
                              const nv__output *const *src, const rnode *rn, const mview *rm,
                              bool dyn) {
  nv__fused k = {.nin = nins, .reduce = !op_of(rn->prim), .dyn = dyn};
  if (!gpu_launch(r, rn, rm, ins, nins, esc, nesc, &k))
    return;
  char *source = generate_cuda(r, members, nm, ins, nins, esc, nesc, src, &k);
  char why[512] = "out of memory";
  if (source && nv__gpu_nvrtc_compiles(source, why, sizeof why)) {
    atomic_fetch_add(&nvrtc_ok, 1);
  } else {
    atomic_fetch_add(&nvrtc_failed, 1);
    snprintf(nvrtc_why, sizeof nvrtc_why, "%s", why);
  }
  nv__free(source);
}
#endif

bool nv__test_fuse_nvrtc(bool on, long *ok, long *failed, const char **why) {
#ifdef NUVEC_HAVE_CUDA
  atomic_store(&nvrtc_check, on);
  *ok = atomic_load(&nvrtc_ok);
  *failed = atomic_load(&nvrtc_failed);
  *why = nvrtc_why;
  return true;
#else
  (void)on;
  *ok = *failed = 0;
  *why = "";
  return false;
#endif
}

/* Turns the chain `members` (recipe order, root last) into a COMPILED node at
 * the root's place. Returns whether it did (false: an input it cannot read, or
 * no kernel). */
/* The chain's name (nv__fused.name): "Compiled", then per member in order the CamelCase name
 * of its primitive, preceded by "Broadcast" the first time it reads a broadcast node outside the
 * chain (the kernel reads that view, broadcasting as it goes). */
static void chain_name(const recipe *r, const size_t *members, size_t nm, const bool *in_chain,
                       char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "Compiled");
  int seen[64], nseen = 0;
  for (size_t m = 0; m < nm && len + 1 < size; m++) {
    const rnode *n = &r->nodes[members[m]];
    char part[64];
    for (int i = 0; i < n->nin; i++) {
      ref x = n->in[i];
      if (x.kind != R_NODE || in_chain[x.i] || r->nodes[x.i].prim != NV__PRIM_BROADCAST)
        continue;
      bool dup = false;
      for (int j = 0; j < nseen && !dup; j++)
        dup = seen[j] == x.i;
      if (dup || nseen == 64)
        continue;
      seen[nseen++] = x.i;
      len += (size_t)snprintf(buf + len, size - len, "Broadcast"); /* MLX's primitive's name */
      if (len + 1 >= size)
        return;
    }
    nv__dot_camel(nv__prims[n->prim].name, part, sizeof part);
    len += (size_t)snprintf(buf + len, size - len, "%s", part);
  }
}

/* The data inputs of the chain `members` (recipe order, root last) and how its kernel reads
 * each against the chain's shape rm, into ins[0 .. *nins) (at most 64). False: an input
 * cannot be read (the chain stays unfused). */
static bool chain_inputs(const fctx *c, const size_t *members, size_t nm, const mview *rm,
                         bool *in_chain, chain_in *ins, int *nins) {
  recipe *r = c->r;
  *nins = 0;
  for (size_t m = 0; m < nm; m++)
    in_chain[members[m]] = true;
  bool ok = true;
  for (size_t m = 0; ok && m < nm; m++) {
    const rnode *n = &r->nodes[members[m]];
    for (int i = 0; ok && i < n->nin; i++) {
      ref x = n->in[i];
      if (x.kind == R_NODE && in_chain[x.i])
        continue;
      bool seen = false;
      for (int j = 0; j < *nins && !seen; j++)
        seen = ref_same(ins[j].r, x) || ref_same(ins[j].via, x);
      if (seen)
        continue;
      mview mm = ref_mv(c, x);
      int64_t inner = 0, div = 1;
      int kind = input_kind(&mm, rm, &inner, &div);
      ref via = {-1, 0, 0};
      /* A broadcast to the chain's whole shape (a stride-0 view, no input the kernel can
       * index) is read through its input, which the kernel broadcasts as it reads it. */
      if (kind < 0 && x.kind == R_NODE && r->nodes[x.i].prim == NV__PRIM_BROADCAST &&
          r->nodes[x.i].nin == 1 && same_shape(&mm, rm)) {
        ref y = r->nodes[x.i].in[0];
        mview my = ref_mv(c, y);
        if (my.dtype == mm.dtype && (kind = input_kind(&my, rm, &inner, &div)) >= 0) {
          via = x;
          x = y;
          for (int j = 0; j < *nins && !seen; j++)
            seen = ref_same(ins[j].r, x);
          if (seen) {
            kind = -1; /* its input is also read directly: not shared between two slots */
          }
        }
      }
      if (kind < 0 || *nins == 64)
        ok = false;
      else
        ins[(*nins)++] = (chain_in){x, via, mm.dtype, kind, inner, div};
    }
  }
  for (size_t m = 0; m < nm; m++)
    in_chain[members[m]] = false;
  return ok;
}

/* A kernel made into a counted nv__fused held by a keeper node (*kn): the launch's fields
 * from `launch`, its name, its CPU function or GPU kernel. */
static nv_status make_fused(const nv__fused *launch, const char *name, nv__fused_fn fn,
                            const void *gk, nv__fused **out, nv__node **kn) {
  nv__fused *k = nv__malloc(sizeof *k);
  if (!k)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  *k = *launch;
  memcpy(k->name, name, sizeof k->name);
  atomic_init(&k->refs, 1);
  k->fn = fn;
  k->gpu = gk;
  *out = k;
  return keeper(k, kn); /* takes k's reference */
}

/* The kernel of a chain's source: NULL when it cannot be had. */
static void compile_source(const char *source, bool gpu, nv__fused_fn *fn, const void **gk) {
  *fn = NULL;
  *gk = NULL;
#ifdef NUVEC_HAVE_CUDA
  if (gpu)
    *gk = nv__gpu_fused_kernel(source);
#endif
  if (!gpu)
    *fn = kernel_for(source);
}

/* A chain's kernel: its C or CUDA source generated (the CUDA one also checked through NVRTC
 * while a CPU chain is generated, under the test hook) and compiled. Both *fn and *gk NULL: no
 * compiler took it, and the chain stays unfused. */
static nv_status chain_kernel(const recipe *r, const size_t *members, size_t nm,
                              const chain_in *ins, int nins, const size_t *esc, int nesc,
                              const nv__output *const *src, const rnode *rn, const mview *rm,
                              const nv__fused *launch, bool gpu, bool dyn, nv__fused_fn *fn,
                              const void **gk) {
  *fn = NULL;
  *gk = NULL;
#ifdef NUVEC_HAVE_CUDA
  if (!gpu && atomic_load(&nvrtc_check))
    check_cuda_source(r, members, nm, ins, nins, esc, nesc, src, rn, rm, dyn);
#else
  (void)rn;
#endif
  char *source = gpu ? generate_cuda(r, members, nm, ins, nins, esc, nesc, src, launch)
                     : generate(r, members, nm, ins, nins, esc, nesc, src, rm, dyn);
  if (!source)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  compile_source(source, gpu, fn, gk);
  nv__free(source);
  return NV_OK;
}

/* Turns the chain `members` (recipe order, root last) into a COMPILED node at
 * the root's place. Sets *done to whether it did (false: an input it cannot read, or
 * no kernel). */
static nv_status fuse_chain(const fctx *c, const size_t *members, size_t nm, const size_t *esc,
                            int nesc, bool *in_chain, bool *done) {
  recipe *r = c->r;
  const nv__output *const *src = c->src;
  *done = false;
  size_t root = members[nm - 1];
  mview rm = chain_shape(c, root);
  chain_in ins[64];
  int nins = 0;
  for (size_t m = 0; m < nm; m++)
    in_chain[members[m]] = true;
  char name[sizeof ((nv__fused *)0)->name];
  chain_name(r, members, nm, in_chain, name, sizeof name);
  for (size_t m = 0; m < nm; m++)
    in_chain[members[m]] = false;
  bool ok = chain_inputs(c, members, nm, &rm, in_chain, ins, &nins);
  /* A GPU launch takes at most 64 views (the inputs and the outputs). */
  bool gpu = r->nodes[root].stream.device.type == NV_DEVICE_GPU;
  if (!ok || (gpu && nins + nesc + 1 > 64))
    return NV_OK;
  const rnode *rn = &r->nodes[root];
  nv__fused launch = {.nin = nins, .reduce = !op_of(rn->prim)};
  if (gpu && !gpu_launch(r, rn, &rm, ins, nins, esc, nesc, &launch))
    return NV_OK;
  if (!gpu && launch.reduce)
    launch.cols = reduce_cols(rn, &rm); /* the CPU kernel's rows, split across the pool */
  nv__fused_fn fn;
  const void *gk;
  nv_status ks = chain_kernel(r, members, nm, ins, nins, esc, nesc, src, rn, &rm, &launch, gpu,
                              false, &fn, &gk);
  if (ks != NV_OK || (!fn && !gk))
    return ks;
  ref *in = nv__malloc(((size_t)nins + 1) * sizeof *in);
  nv__compiled_params *p = nv__malloc(sizeof *p);
  rout *outs = nv__malloc((size_t)(nesc + 1) * sizeof *outs);
  nv__input *consts = nv__realloc(r->consts, (r->nconst + 1) * sizeof *consts);
  if (consts)
    r->consts = consts;
  if (!in || !p || !consts || !outs) {
    nv__free(in);
    nv__free(p);
    nv__free(outs);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  nv__fused *k = NULL;
  nv__node *kn = NULL;
  nv_status s = make_fused(&launch, name, fn, gk, &k, &kn);
  if (s != NV_OK) {
    nv__free(in);
    nv__free(p);
    nv__free(outs);
    return s;
  }
  r->consts[r->nconst] = (nv__input){kn, 0};
  for (int i = 0; i < nins; i++)
    in[i] = ins[i].r;
  in[nins] = (ref){R_CONST, (int)r->nconst++, 0};
  p->k = k;
  p->nsz = 0;
  rnode *n = &r->nodes[root];
  outs[0] = n->out[0];
  for (int x = 0; x < nesc; x++)
    outs[x + 1] = r->nodes[esc[x]].out[0];
  nv__free(n->in);
  nv__free(n->params);
  nv__free(n->out);
  n->prim = NV__PRIM_COMPILED;
  n->nin = nins + 1;
  n->in = in;
  n->nout = nesc + 1;
  n->out = outs;
  n->params = p;
  n->params_size = sizeof *p;
  /* The intermediates' users (all after the root) read the new outputs. */
  for (int x = 0; x < nesc; x++) {
    ref from = {R_NODE, (int)esc[x], 0}, to = {R_NODE, (int)root, x + 1};
    for (size_t j = root + 1; j < r->n; j++)
      for (int i = 0; i < r->nodes[j].nin; i++)
        if (ref_same(r->nodes[j].in[i], from))
          r->nodes[j].in[i] = to;
    for (size_t i = 0; i < r->nout; i++)
      if (ref_same(r->outs[i], from))
        r->outs[i] = to;
  }
  *done = true;
  return NV_OK;
}

/* A max-heap of node indices: a chain is grown from its root towards the inputs
 * in descending recipe order, so each candidate's consumers are all decided
 * before it. */
typedef struct heap {
  size_t *v, n;
} heap;

static void heap_push(heap *h, size_t x) {
  size_t i = h->n++;
  h->v[i] = x;
  while (i && h->v[(i - 1) / 2] < h->v[i]) {
    size_t p = (i - 1) / 2, t = h->v[p];
    h->v[p] = h->v[i];
    h->v[i] = t;
    i = p;
  }
}

static size_t heap_pop(heap *h) {
  size_t top = h->v[0];
  h->v[0] = h->v[--h->n];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && h->v[l] > h->v[m])
      m = l;
    if (r < h->n && h->v[r] > h->v[m])
      m = r;
    if (m == i)
      break;
    size_t t = h->v[m];
    h->v[m] = h->v[i];
    h->v[i] = t;
    i = m;
  }
  return top;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* What find_chains does with a chain it found: fuse it (a trace's pass) or plan it (a
 * shapeless call's); *done: whether it took it (its members then join no other chain). */
typedef nv_status (*take_fn)(void *ctx, const fctx *c, const size_t *members, size_t nm,
                             const size_t *esc, int nesc, bool *in_chain, bool *done);

/* The chains of c's recipe, roots from the last node down, each handed to `take`: a root
 * takes the candidates below it (of its shape and device) whose consumers are all its or
 * come after it (those escape: extra outputs). */
static nv_status find_chains(const fctx *c, take_fn take, void *ctx) {
  recipe *r = c->r;
  const nv__output *const *src = c->src;
  size_t n = r->n;
  if (n < 2)
    return NV_OK;
  /* Consumers of each node (CSR) and whether an output of the recipe is one of
   * its values. */
  size_t *ncons = nv__calloc(n + 1, sizeof *ncons), *at = nv__calloc(n + 2, sizeof *at);
  bool *escape = nv__calloc(n + 1, sizeof *escape), *cand = nv__calloc(n + 1, sizeof *cand);
  bool *rootable = nv__calloc(n + 1, sizeof *rootable);
  bool *in_chain = nv__calloc(n + 1, sizeof *in_chain);
  int *grp = nv__malloc((n + 1) * sizeof *grp);
  size_t *members = nv__malloc((n + 1) * sizeof *members);
  size_t total = 0;
  for (size_t k = 0; k < n; k++)
    total += (size_t)r->nodes[k].nin;
  size_t *cons = nv__malloc((total + 1) * sizeof *cons);
  /* Each node is queued at most once per root (its stamp), so the heap holds at
   * most n. */
  heap hp = {nv__malloc((n + 1) * sizeof(size_t)), 0};
  size_t *stamp = nv__calloc(n + 1, sizeof *stamp);
  nv_status s = ncons && at && escape && cand && rootable && in_chain && grp && members && cons &&
                        hp.v && stamp
                    ? NV_OK
                    : nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  for (size_t k = 0; s == NV_OK && k < n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_NODE)
        ncons[r->nodes[k].in[i].i]++;
  for (size_t k = 0; s == NV_OK && k < n; k++)
    at[k + 1] = at[k] + ncons[k];
  for (size_t k = 0; s == NV_OK && k < n; k++)
    ncons[k] = 0;
  for (size_t k = 0; s == NV_OK && k < n; k++)
    for (int i = 0; i < r->nodes[k].nin; i++)
      if (r->nodes[k].in[i].kind == R_NODE) {
        size_t p = (size_t)r->nodes[k].in[i].i;
        cons[at[p] + ncons[p]++] = k;
      }
  for (size_t i = 0; s == NV_OK && i < r->nout; i++)
    if (r->outs[i].kind == R_NODE)
      escape[r->outs[i].i] = true;
  for (size_t k = 0; s == NV_OK && k < n; k++) {
    cand[k] = fusable(r, k, src);
    rootable[k] = cand[k] || reduce_root(r, k);
    grp[k] = -1;
  }
  /* Roots from the end: each takes the candidates below it whose consumers are
   * all its. */
  for (size_t k = n; s == NV_OK && k-- > 0;) {
    if (!rootable[k] || grp[k] >= 0)
      continue;
    grp[k] = (int)k;
    size_t nm = 0, esc[NV__COMPILED_MAX_OUT];
    int nesc = 0;
    members[nm++] = k;
    mview shape = chain_shape(c, k);
    for (size_t q = k;;) {
      /* Queue the producers of the node that just joined (q). */
      for (int i = 0; i < r->nodes[q].nin; i++) {
        ref x = r->nodes[q].in[i];
        if (x.kind == R_NODE && stamp[x.i] != k + 1) {
          stamp[x.i] = k + 1;
          heap_push(&hp, (size_t)x.i);
        }
      }
      bool joined = false;
      while (hp.n && !joined) {
        size_t m = heap_pop(&hp);
        mview mm = node_mv(c, m);
        if (!cand[m] || grp[m] >= 0 || !same_shape(&mm, &shape) ||
            !same_device(r->nodes[m].stream, r->nodes[k].stream))
          continue;
        /* Every consumer is in the chain, or comes after the root (it then reads the value
         * as an extra output of the fused node). */
        bool ok = true, out = escape[m];
        for (size_t j = at[m]; ok && j < at[m] + ncons[m]; j++) {
          bool in = grp[cons[j]] == (int)k;
          ok = in || cons[j] > k;
          out |= !in;
        }
        if (ok && out && nesc == NV__COMPILED_MAX_OUT - 1)
          ok = false;
        if (ok) {
          grp[m] = (int)k;
          members[nm++] = m;
          if (out)
            esc[nesc++] = m;
          q = m;
          joined = true;
        }
      }
      if (!joined)
        break;
    }
    qsort(members, nm, sizeof *members, cmp_size);
    /* A reduction needs its input in the chain: reducing an input alone gains
     * nothing. */
    bool input_in = cand[k] || grp[r->nodes[k].in[0].i] == (int)k;
    if (nm < 2 || !input_in) {
      for (size_t m = 0; m < nm; m++)
        grp[members[m]] = -2;
      continue;
    }
    bool done = false;
    qsort(esc, (size_t)nesc, sizeof *esc, cmp_size);
    s = take(ctx, c, members, nm, esc, nesc, in_chain, &done);
    if (s == NV_OK && !done)
      for (size_t m = 0; m < nm; m++)
        grp[members[m]] = -2; /* stays unfused */
  }
  nv__free(ncons);
  nv__free(at);
  nv__free(escape);
  nv__free(cand);
  nv__free(rootable);
  nv__free(in_chain);
  nv__free(grp);
  nv__free(members);
  nv__free(cons);
  nv__free(hp.v);
  nv__free(stamp);
  return s;
}

static nv_status take_fuse(void *ctx, const fctx *c, const size_t *members, size_t nm,
                           const size_t *esc, int nesc, bool *in_chain, bool *done) {
  nv_status s = fuse_chain(c, members, nm, esc, nesc, in_chain, done);
  if (s == NV_OK && *done)
    (*(size_t *)ctx)++;
  return s;
}

nv_status nv__fuse_recipe(recipe *r, const nv__output *const *src, size_t *nfused) {
  *nfused = 0;
  fctx c = {r, src, NULL};
  nv_status s = find_chains(&c, take_fuse, nfused);
  if (s == NV_OK && *nfused)
    s = nv__compile_compact(r);
  return s;
}

/* ---- Plans of shapeless calls ---- */

bool nv__fuse_may(const recipe *r, const nv__output *const *src) {
  for (size_t k = 0; k < r->n; k++) {
    bool root = fusable(r, k, src) || reduce_root(r, k);
    for (int i = 0; root && i < r->nodes[k].nin; i++) {
      ref x = r->nodes[k].in[i];
      if (x.kind == R_NODE && fusable(r, (size_t)x.i, src))
        return true;
    }
  }
  return false;
}

void nv__fplan_free(nv__fplan *p) {
  nv__free(p->c);
  nv__free(p->chain);
  nv__free(p->key);
  nv__free(p->members_buf);
  nv__free(p->ins_buf);
  nv__free(p->sz_buf);
  memset(p, 0, sizeof *p);
}

/* Records a chain of a shapeless call in the plan (the ctx) where its inputs can be read on
 * this call's layouts (and, on a GPU, launched): its members, inputs, launch, sizes and key
 * words. */
static nv_status take_plan(void *ctx, const fctx *c, const size_t *members, size_t nm,
                           const size_t *esc, int nesc, bool *in_chain, bool *done) {
  nv__fplan *p = ctx;
  const recipe *r = c->r;
  size_t root = members[nm - 1];
  mview rm = chain_shape(c, root);
  chain_in ins[64];
  int nins = 0;
  *done = false;
  bool gpu = r->nodes[root].stream.device.type == NV_DEVICE_GPU;
  if (!chain_inputs(c, members, nm, &rm, in_chain, ins, &nins) ||
      (gpu && nins + nesc + 1 > 64))
    return NV_OK;
  const rnode *rn = &r->nodes[root];
  nv__fused launch = {.nin = nins, .reduce = !op_of(rn->prim)};
  if (gpu && !gpu_launch(r, rn, &rm, ins, nins, esc, nesc, &launch))
    return NV_OK;
  nv__fchain *f = &p->c[p->nc];
  size_t moff = 0, ioff = 0, zoff = 0;
  if (p->nc) {
    const nv__fchain *prev = &p->c[p->nc - 1];
    moff = (size_t)(prev->members - p->members_buf) + prev->nm;
    ioff = (size_t)(prev->ins - p->ins_buf) + (size_t)prev->nins;
    zoff = (size_t)(prev->sz - p->sz_buf) + (size_t)prev->nsz;
  }
  f->root = root;
  f->nm = nm;
  f->members = p->members_buf + moff;
  memcpy(f->members, members, nm * sizeof *members);
  f->nesc = nesc;
  memcpy(f->esc, esc, (size_t)nesc * sizeof *esc);
  f->nins = nins;
  f->ins = p->ins_buf + ioff;
  memcpy(f->ins, ins, (size_t)nins * sizeof *ins);
  f->ndim = rm.ndim;
  f->shape = rm.shape;
  f->reduce = launch.reduce;
  f->vec = launch.vec;
  f->lanes = launch.lanes;
  f->group = launch.group;
  /* The sizes: a reduction's row length, else the run of the broadcast inputs (as generate's
   * literal); per input its inner and div. An element-wise chain reading whole arrays and
   * scalars only needs none (its kernel is the trace's). */
  bool sized = f->reduce;
  int64_t run = 0;
  for (int i = 0; i < nins; i++)
    if (ins[i].kind == IN_TRAIL || ins[i].kind == IN_BLOCK) {
      int64_t period = ins[i].kind == IN_TRAIL ? ins[i].inner : ins[i].div;
      if (!run || period < run)
        run = period;
      sized = true;
    }
  f->nsz = sized ? 1 + 2 * nins : 0;
  f->sz = p->sz_buf + zoff;
  if (sized) {
    f->sz[0] = f->reduce ? reduce_cols(rn, &rm) : run > 0 ? run : 1;
    for (int i = 0; i < nins; i++) {
      f->sz[1 + 2 * i] = ins[i].inner;
      f->sz[2 + 2 * i] = ins[i].div;
    }
  }
  for (size_t m = 0; m < nm; m++)
    p->chain[members[m]] = (int)p->nc;
  /* The key: what the kernel's source depends on beyond the recipe. */
  int64_t *w = p->key + p->nkey;
  size_t q = 0;
  w[q++] = (int64_t)root;
  w[q++] = (int64_t)nm;
  for (size_t m = 0; m < nm; m++)
    w[q++] = (int64_t)members[m];
  w[q++] = nesc;
  for (int x = 0; x < nesc; x++)
    w[q++] = (int64_t)esc[x];
  w[q++] = nins;
  for (int i = 0; i < nins; i++) {
    w[q++] = ins[i].r.kind;
    w[q++] = ins[i].r.i;
    w[q++] = ins[i].r.idx;
    w[q++] = ins[i].kind;
  }
  w[q++] = ((int64_t)f->vec << 48) | ((int64_t)f->lanes << 32) | (int64_t)f->group;
  w[q++] = f->nsz;
  p->nkey += q;
  p->nc++;
  *done = true;
  return NV_OK;
}

nv_status nv__fuse_plan(const recipe *r, const nv__output *nodes, const nv__output *const *src,
                        nv__fplan *p) {
  memset(p, 0, sizeof *p);
  size_t n = r->n, tin = 0;
  for (size_t k = 0; k < n; k++)
    tin += (size_t)r->nodes[k].nin;
  p->c = nv__malloc((n + 1) * sizeof *p->c);
  p->chain = nv__malloc((n + 1) * sizeof *p->chain);
  p->key = nv__malloc((6 * n + 4 * tin + 1) * sizeof *p->key);
  p->members_buf = nv__malloc((n + 1) * sizeof *p->members_buf);
  p->ins_buf = nv__malloc((tin + 1) * sizeof *p->ins_buf);
  p->sz_buf = nv__malloc((n + 2 * tin + 1) * sizeof *p->sz_buf);
  if (!p->c || !p->chain || !p->key || !p->members_buf || !p->ins_buf || !p->sz_buf) {
    nv__fplan_free(p);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  for (size_t k = 0; k < n; k++)
    p->chain[k] = -1;
  fctx c = {(recipe *)r, src, nodes};
  nv_status s = find_chains(&c, take_plan, p);
  if (s != NV_OK)
    nv__fplan_free(p);
  return s;
}

nv_status nv__fuse_plan_kernel(const recipe *r, const nv__fplan *p, size_t i,
                               const nv__output *const *src, nv__node **keeper, nv__fused **k) {
  *keeper = NULL;
  *k = NULL;
  const nv__fchain *f = &p->c[i];
  const rnode *rn = &r->nodes[f->root];
  bool gpu = rn->stream.device.type == NV_DEVICE_GPU, dyn = f->nsz > 0;
  bool *in_chain = nv__calloc(r->n + 1, sizeof *in_chain);
  if (!in_chain)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  for (size_t m = 0; m < f->nm; m++)
    in_chain[f->members[m]] = true;
  char name[sizeof ((nv__fused *)0)->name];
  chain_name(r, f->members, f->nm, in_chain, name, sizeof name);
  nv__free(in_chain);
  nv__fused launch = {.nin = f->nins, .reduce = f->reduce, .vec = f->vec, .group = f->group,
                      .lanes = f->lanes, .dyn = dyn};
  /* The shape of the call that made the plan (a dyn kernel's sizes are zc, zi<i>, zd<i>). */
  mview rm = {rn->out[0].dtype, f->ndim, f->shape, NULL};
  nv__fused_fn fn;
  const void *gk;
  nv_status ks = chain_kernel(r, f->members, f->nm, f->ins, f->nins, f->esc, f->nesc, src, rn,
                              &rm, &launch, gpu, dyn, &fn, &gk);
  if (ks != NV_OK || (!fn && !gk))
    return ks;
  return make_fused(&launch, name, fn, gk, k, keeper);
}

nv_status nv__recipe_copy(recipe *dst, const recipe *src) {
  memset(dst, 0, sizeof *dst);
  dst->nodes = nv__calloc(src->n + 1, sizeof *dst->nodes);
  dst->consts = nv__malloc((src->nconst + 1) * sizeof *dst->consts);
  dst->outs = nv__malloc((src->nout + 1) * sizeof *dst->outs);
  if (!dst->nodes || !dst->consts || !dst->outs) {
    nv__recipe_free(dst);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
  }
  for (size_t i = 0; i < src->nconst; i++)
    dst->consts[dst->nconst++] =
        (nv__input){nv__node_retain(src->consts[i].node), src->consts[i].idx};
  memcpy(dst->outs, src->outs, src->nout * sizeof *dst->outs);
  dst->nout = src->nout;
  dst->traced = src->traced;
  dst->poly = src->poly;
  for (size_t k = 0; k < src->n; k++) {
    const rnode *a = &src->nodes[k];
    rnode *b = &dst->nodes[dst->n++];
    *b = *a;
    b->in = nv__malloc(((size_t)a->nin + 1) * sizeof *b->in);
    b->out = nv__malloc((size_t)a->nout * sizeof *b->out);
    b->params = a->params_size ? nv__malloc(a->params_size) : NULL;
    if (!b->in || !b->out || (a->params_size && !b->params)) {
      nv__recipe_free(dst);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compile: out of memory");
    }
    memcpy(b->in, a->in, (size_t)a->nin * sizeof *b->in);
    memcpy(b->out, a->out, (size_t)a->nout * sizeof *b->out);
    if (a->params_size)
      memcpy(b->params, a->params, a->params_size);
  }
  return NV_OK;
}
