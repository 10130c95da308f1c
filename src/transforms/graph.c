/* The graph walk of the transforms: the traced nodes between sources and outputs in an order
 * where inputs come first (iterative: no recursion on graph depth), and the backward (vjp) and
 * forward (jvp) passes over it. */
#include <stdlib.h>

#include "core/ptrmap.h"
#include "transforms/transforms_internal.h"

/* The tape's node → position map is a core pointer map (src/core/ptrmap.h). */
struct nv__tape_map {
  nv__ptrmap m;
};

static long *map_slot(struct nv__tape_map *m, const nv__node *key, bool *found) {
  return nv__ptrmap_slot(&m->m, key, found);
}

long nv__tape_find(const nv__tape *t, const nv__node *node) {
  return t->map ? nv__ptrmap_get(&t->map->m, node, -1) : -1;
}

void nv__tape_free(nv__tape *t) {
  for (size_t i = 0; i < t->n; i++) nv__node_release(t->nodes[i]);
  for (size_t i = 0; i < t->nins; i++) nv__node_release(t->ins[i].node);
  nv__free(t->nodes);
  nv__free(t->dep);
  nv__free(t->in_at);
  nv__free(t->in_n);
  nv__free(t->ins);
  if (t->map) {
    nv__ptrmap_free(&t->map->m);
    nv__free(t->map);
  }
  memset(t, 0, sizeof *t);
}

/* Capacities of the tape's growing arrays while it is built. */
typedef struct caps {
  size_t nodes, ins;
} caps;

/* The walk goes on through the tracers of this thread's transform (of its session: nested
 * transforms share it). Their inputs are read under the node's lock and each retained, so a
 * detach on another thread can never free what the walk reads; while the session is live no
 * other thread detaches them anyway (src/core/eval.c), so the list read here is the node's
 * for the whole transform. Returns how many inputs were read (0 for a node the walk stops
 * at), or -1 when out of memory. */
static int expand(nv__tape *t, caps *c, nv__node *n) {
  if (!nv__node_traced_here(n)) return 0;
  for (;;) {
    nv__node_lock(n);
    int k = n->ninputs;
    if (t->nins + (size_t)k <= c->ins) {
      for (int i = 0; i < k; i++)
        t->ins[t->nins + (size_t)i] =
            (nv__input){nv__node_retain(n->inputs[i].node), n->inputs[i].idx};
      t->nins += (size_t)k;
      nv__node_unlock(n);
      return k;
    }
    nv__node_unlock(n);
    size_t nc = c->ins ? c->ins * 2 : 64;
    while (nc < t->nins + (size_t)k) nc *= 2;
    nv__input *p = nv__realloc(t->ins, nc * sizeof *p);
    if (!p) return -1;
    t->ins = p;
    c->ins = nc;
  }
}

typedef struct frame {
  nv__node *node;
  size_t at; /* its inputs: t->ins[at .. at + count) */
  int count;
  int next;
} frame;

static nv_status tape_push(nv__tape *t, caps *c, nv__node *n, bool dep, size_t at, int count) {
  if (t->n == c->nodes) {
    size_t nc = c->nodes ? c->nodes * 2 : 64;
    nv__node **p = nv__realloc(t->nodes, nc * sizeof *p);
    if (!p) return NV_ERR_OUT_OF_MEMORY;
    t->nodes = p;
    bool *d = nv__realloc(t->dep, nc * sizeof *d);
    if (!d) return NV_ERR_OUT_OF_MEMORY;
    t->dep = d;
    size_t *ia = nv__realloc(t->in_at, nc * sizeof *ia);
    if (!ia) return NV_ERR_OUT_OF_MEMORY;
    t->in_at = ia;
    int *in = nv__realloc(t->in_n, nc * sizeof *in);
    if (!in) return NV_ERR_OUT_OF_MEMORY;
    t->in_n = in;
    c->nodes = nc;
  }
  t->nodes[t->n] = nv__node_retain(n);
  t->dep[t->n] = dep;
  t->in_at[t->n] = at;
  t->in_n[t->n++] = count;
  return NV_OK;
}

/* Pushes a frame for `n`, reading its inputs. */
static nv_status frame_push(nv__tape *t, caps *c, frame **stack, size_t *nstack, size_t *cstack,
                            nv__node *n) {
  if (*nstack == *cstack) {
    size_t nc = *cstack ? *cstack * 2 : 64;
    frame *p = nv__realloc(*stack, nc * sizeof *p);
    if (!p) return NV_ERR_OUT_OF_MEMORY;
    *stack = p;
    *cstack = nc;
  }
  size_t at = t->nins;
  int count = expand(t, c, n);
  if (count < 0) return NV_ERR_OUT_OF_MEMORY;
  (*stack)[(*nstack)++] = (frame){n, at, count, 0};
  return NV_OK;
}

/* Iterative post-order depth-first walk: a node joins the tape after all its inputs. */
nv_status nv__tape_build(nv__tape *t, nv__node *const *sources, size_t nsrc,
                         nv_array *const *outs, size_t nout) {
  memset(t, 0, sizeof *t);
  t->map = nv__calloc(1, sizeof *t->map);
  frame *stack = NULL;
  size_t nstack = 0, cstack = 0;
  caps c = {0, 0};
  nv_status s = t->map ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  bool found;
  /* Sources come first, each once; the walk stops there. */
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    long *slot = map_slot(t->map, sources[i], &found);
    if (!slot) s = NV_ERR_OUT_OF_MEMORY;
    else if (!found && (s = tape_push(t, &c, sources[i], true, 0, 0)) == NV_OK)
      *slot = (long)t->n - 1;
  }
  t->nsrc = t->n;
  for (size_t r = 0; s == NV_OK && r < nout; r++) {
    long *slot = map_slot(t->map, outs[r]->node, &found);
    if (!slot) {
      s = NV_ERR_OUT_OF_MEMORY;
      break;
    }
    if (found) continue;
    *slot = -2; /* on the stack */
    s = frame_push(t, &c, &stack, &nstack, &cstack, outs[r]->node);
    while (s == NV_OK && nstack) {
      frame *f = &stack[nstack - 1];
      if (f->next < f->count) {
        nv__node *in = t->ins[f->at + (size_t)f->next++].node;
        long *is = map_slot(t->map, in, &found);
        if (!is) {
          s = NV_ERR_OUT_OF_MEMORY;
          break;
        }
        if (found) continue;
        *is = -2;
        s = frame_push(t, &c, &stack, &nstack, &cstack, in);
        continue;
      }
      /* All inputs placed: the node depends on a source if any input does. */
      bool dep = false;
      for (int i = 0; i < f->count; i++) {
        long at = nv__tape_find(t, t->ins[f->at + (size_t)i].node);
        if (at >= 0 && t->dep[at]) dep = true;
      }
      frame done = *f;
      nstack--;
      if ((s = tape_push(t, &c, done.node, dep, done.at, done.count)) != NV_OK) break;
      *map_slot(t->map, done.node, &found) = (long)t->n - 1;
    }
  }
  nv__free(stack);
  if (s != NV_OK) {
    nv__tape_free(t);
    return nv__set_error(s, "out of memory walking the traced graph");
  }
  return NV_OK;
}

void nv__tf_release_all(nv_array **xs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    nv_release(xs[i]);
    xs[i] = NULL;
  }
}

bool nv__tf_same_shape(const nv_array *a, const nv_array *b) {
  const nv__output *x = nv__out(a), *y = nv__out(b);
  return x->ndim == y->ndim && !memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof(int));
}

/* The arrays of a node's inputs and outputs as handles, for a rule call. */
typedef struct rule_args {
  nv_array *in_inl[8], *out_inl[8];
  nv_array **in, **out;
} rule_args;

/* Handles on tape node k's inputs (as the walk read them) and outputs. */
static nv_status args_open(rule_args *a, const nv__tape *t, size_t k) {
  nv__node *n = t->nodes[k];
  const nv__input *ins = nv__tape_inputs(t, k);
  int ni = t->in_n[k];
  a->in = ni <= 8 ? a->in_inl : nv__calloc((size_t)ni, sizeof *a->in);
  a->out = n->noutputs <= 8 ? a->out_inl : nv__calloc((size_t)n->noutputs, sizeof *a->out);
  if (!a->in || !a->out) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < ni; i++) a->in[i] = nv__tf_handle(ins[i].node, ins[i].idx);
  for (int i = 0; i < n->noutputs; i++) a->out[i] = nv__tf_handle(n, i);
  /* A handle that could not be allocated is the shared out-of-memory array, whose shape is
   * not the node's: no rule may run on it. */
  for (int i = 0; i < n->ninputs; i++)
    if (a->in[i]->node != n->inputs[i].node)
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < n->noutputs; i++)
    if (a->out[i]->node != n) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  return NV_OK;
}

static void args_close(rule_args *a, const nv__tape *t, size_t k) {
  if (a->in) nv__tf_release_all(a->in, (size_t)t->in_n[k]);
  if (a->out) nv__tf_release_all(a->out, (size_t)t->nodes[k]->noutputs);
  if (a->in != a->in_inl) nv__free(a->in);
  if (a->out != a->out_inl) nv__free(a->out);
}

/* Adds `g` (taken over) into the cotangent slot `slot`. */
static void accumulate(nv_array **slot, nv_array *g) {
  if (!*slot) {
    *slot = g;
    return;
  }
  nv_array *sum = nv_add(*slot, g);
  nv_release(*slot);
  nv_release(g);
  *slot = sum;
}

/* A rule's gradient checked against its input: same shape, same dtype. */
static nv_status check_grad(const char *op, const nv__node *n, int i, nv_array **g,
                            const nv_array *input) {
  nv__error *e = nv__node_known_error((*g)->node);
  if (e && !nv__meta_known(*g)) {
    /* A gradient that failed before it had a shape (out of memory while the rule built it)
     * takes its input's: the error flows on in the gradients, not a shape mismatch. */
    const nv__output *o = nv__out(input);
    nv_array *f = nv__array_failed(e, o->dtype, o->shape, o->ndim);
    nv_release(*g);
    *g = f;
    return NV_OK;
  }
  if (!nv__tf_same_shape(*g, input)) {
    char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
    const nv__output *a = nv__out(*g), *b = nv__out(input);
    return nv__set_error(NV_ERR_BACKEND,
                         "%s: the vjp rule of %s gave input %d a gradient of shape %s for its "
                         "shape %s",
                         op, nv__prims[n->prim].name, i, nv__shape_str(a->shape, a->ndim, s1, sizeof s1),
                         nv__shape_str(b->shape, b->ndim, s2, sizeof s2));
  }
  if (nv__out(*g)->dtype != nv__out(input)->dtype) {
    nv_array *c = nv_astype(*g, nv__out(input)->dtype);
    nv_release(*g);
    *g = c;
  }
  return NV_OK;
}

/* Runs one node's vjp rule and adds the gradients into its inputs' cotangent slots. */
static nv_status backward_node(const char *op, const nv__tape *t, size_t k, nv_array **cot,
                               const size_t *base) {
  nv__node *n = t->nodes[k];
  const nv__input *ins = nv__tape_inputs(t, k);
  int ni = t->in_n[k];
  const nv__prim_rule *r = &nv__prim_rules[n->prim];
  if (!r->vjp)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: the primitive %s has no vjp rule", op,
                         nv__prims[n->prim].name);
  rule_args a = {0};
  nv_status s = args_open(&a, t, k);
  bool want_inl[8];
  nv_array *grad_inl[8] = {0};
  bool *want = ni <= 8 ? want_inl : nv__calloc((size_t)ni, sizeof *want);
  nv_array **grad = ni <= 8 ? grad_inl : nv__calloc((size_t)ni, sizeof *grad);
  if (s == NV_OK && (!want || !grad)) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; s == NV_OK && i < ni; i++) {
    long at = nv__tape_find(t, ins[i].node);
    want[i] = at >= 0 && t->dep[at];
  }
  if (s == NV_OK) s = r->vjp(n, a.in, a.out, cot + base[k], want, grad);
  for (int i = 0; s == NV_OK && i < ni; i++) {
    if (!grad[i] || !want[i]) continue;
    if ((s = check_grad(op, n, i, &grad[i], a.in[i])) != NV_OK) break;
    long at = nv__tape_find(t, ins[i].node);
    accumulate(&cot[base[at] + (size_t)ins[i].idx], grad[i]);
    grad[i] = NULL;
  }
  if (grad) nv__tf_release_all(grad, (size_t)ni);
  if (want != want_inl) nv__free(want);
  if (grad != grad_inl) nv__free(grad);
  args_close(&a, t, k);
  return s;
}

/* Slot offsets: node k's cotangents are cot[base[k] .. base[k] + noutputs). */
static size_t *slot_bases(const nv__tape *t, size_t *total) {
  size_t *base = nv__malloc((t->n + 1) * sizeof *base);
  if (!base) return NULL;
  size_t s = 0;
  for (size_t k = 0; k < t->n; k++) {
    base[k] = s;
    s += (size_t)t->nodes[k]->noutputs;
  }
  base[t->n] = s;
  *total = s;
  return base;
}

nv_status nv__tf_backward(const char *op, nv_array *const *sources, size_t nsrc,
                          nv_array *const *outs, nv_array *const *cots, size_t nout,
                          nv_array **grads) {
  nv__node *src_inl[8] = {0};
  nv__node **src = nsrc <= 8 ? src_inl : nv__malloc(nsrc * sizeof *src);
  if (!src) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < nsrc; i++) src[i] = sources[i]->node;
  nv__tape t;
  nv_status s = nv__tape_build(&t, src, nsrc, outs, nout);
  if (src != src_inl) nv__free(src);
  if (s != NV_OK) return s;
  size_t total = 0, *base = slot_bases(&t, &total);
  nv_array **cot = base ? nv__calloc(total ? total : 1, sizeof *cot) : NULL;
  if (!cot) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; s == NV_OK && i < nout; i++) {
    long at = nv__tape_find(&t, outs[i]->node);
    if (at < 0 || !t.dep[at] || !cots[i]) continue;
    accumulate(&cot[base[at] + (size_t)outs[i]->idx], nv_retain(cots[i]));
  }
  /* Sources are leaves: the walk stops there, leaving their cotangents for the caller. */
  for (size_t k = t.n; s == NV_OK && k-- > t.nsrc;) {
    if (!t.dep[k]) continue;
    bool any = false;
    for (int o = 0; o < t.nodes[k]->noutputs; o++) any |= cot[base[k] + (size_t)o] != NULL;
    if (!any) continue;
    s = backward_node(op, &t, k, cot, base);
    nv__tf_release_all(cot + base[k], (size_t)t.nodes[k]->noutputs);
  }
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    long at = nv__tape_find(&t, sources[i]->node);
    nv_array **slot = &cot[base[at] + (size_t)sources[i]->idx];
    grads[i] = *slot ? nv_retain(*slot) : nv_zeros_like(sources[i]);
  }
  if (cot) nv__tf_release_all(cot, total);
  nv__free(cot);
  nv__free(base);
  nv__tape_free(&t);
  return s;
}

/* Runs one node's jvp rule from its inputs' tangents. */
static nv_status forward_node(const char *op, const nv__tape *t, size_t k, nv_array **tan,
                              const size_t *base) {
  nv__node *n = t->nodes[k];
  const nv__input *ins = nv__tape_inputs(t, k);
  int ni = t->in_n[k];
  const nv__prim_rule *r = &nv__prim_rules[n->prim];
  if (!r->jvp)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: the primitive %s has no jvp rule", op,
                         nv__prims[n->prim].name);
  rule_args a = {0};
  nv_status s = args_open(&a, t, k);
  nv_array *in_tan_inl[8] = {0};
  nv_array **in_tan = ni <= 8 ? in_tan_inl : nv__calloc((size_t)ni, sizeof *in_tan);
  if (s == NV_OK && !in_tan) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  bool any = false;
  for (int i = 0; s == NV_OK && i < ni; i++) {
    long at = nv__tape_find(t, ins[i].node);
    if (at >= 0) in_tan[i] = tan[base[at] + (size_t)ins[i].idx];
    any |= in_tan[i] != NULL;
  }
  if (s == NV_OK && any) s = r->jvp(n, a.in, a.out, in_tan, tan + base[k]);
  for (int o = 0; s == NV_OK && o < n->noutputs; o++) {
    nv_array **g = &tan[base[k] + (size_t)o];
    nv__error *e = *g ? nv__node_known_error((*g)->node) : NULL;
    if (e && !nv__meta_known(*g)) {
      /* As check_grad: a tangent that failed before it had a shape takes its output's. */
      const nv__output *m = nv__out(a.out[o]);
      nv_array *f = nv__array_failed(e, m->dtype, m->shape, m->ndim);
      nv_release(*g);
      *g = f;
    }
    if (*g && !nv__tf_same_shape(*g, a.out[o]))
      s = nv__set_error(NV_ERR_BACKEND, "%s: the jvp rule of %s gave a tangent of the wrong shape",
                        op, nv__prims[n->prim].name);
  }
  if (in_tan != in_tan_inl) nv__free(in_tan);
  args_close(&a, t, k);
  return s;
}

nv_status nv__tf_forward(const char *op, nv_array *const *sources, nv_array *const *tans,
                         size_t nsrc, nv_array *const *outs, size_t nout, nv_array **out_tans) {
  nv__node *src_inl[8] = {0};
  nv__node **src = nsrc <= 8 ? src_inl : nv__malloc(nsrc * sizeof *src);
  if (!src) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < nsrc; i++) src[i] = sources[i]->node;
  nv__tape t;
  nv_status s = nv__tape_build(&t, src, nsrc, outs, nout);
  if (src != src_inl) nv__free(src);
  if (s != NV_OK) return s;
  size_t total = 0, *base = slot_bases(&t, &total);
  nv_array **tan = base ? nv__calloc(total ? total : 1, sizeof *tan) : NULL;
  if (!tan) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; s == NV_OK && i < nsrc; i++) {
    long at = nv__tape_find(&t, sources[i]->node);
    nv_array **slot = &tan[base[at] + (size_t)sources[i]->idx];
    if (!*slot) *slot = nv_retain(tans[i]);
  }
  for (size_t k = t.nsrc; s == NV_OK && k < t.n; k++)
    if (t.dep[k]) s = forward_node(op, &t, k, tan, base);
  for (size_t i = 0; s == NV_OK && i < nout; i++) {
    long at = nv__tape_find(&t, outs[i]->node);
    nv_array *g = at >= 0 ? tan[base[at] + (size_t)outs[i]->idx] : NULL;
    if (g && nv__out(g)->dtype != nv__out(outs[i])->dtype) out_tans[i] = nv_astype(g, nv__out(outs[i])->dtype);
    else out_tans[i] = g ? nv_retain(g) : nv_zeros_like(outs[i]);
  }
  if (tan) nv__tf_release_all(tan, total);
  nv__free(tan);
  nv__free(base);
  nv__tape_free(&t);
  return s;
}
