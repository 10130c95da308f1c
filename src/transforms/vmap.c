/* vmap (DESIGN §8): trace the function once on stand-ins for the mapped inputs (their shapes
 * without the mapped axis), then replay the traced graph in order, each node through its
 * primitive's vmap rule with the batch axis of every operand tracked. Nodes that do not depend
 * on a mapped input are used as they are. */
#include <stdlib.h>

#include "transforms/transforms_internal.h"

typedef struct vmap_fn {
  nv_closure *f;
  size_t n_in, n_out;
  int *in_axes, *out_axes; /* NULL: all 0 */
} vmap_fn;

static void vmap_free(void *p) {
  vmap_fn *v = p;
  nv_closure_release(v->f);
  nv__free(v->in_axes);
  nv__free(v->out_axes);
  nv__free(v);
}

/* The axis spec of item i of n: the list's entry, its single value, or 0. */
static nv_status axis_spec(const char *what, const int *axes, size_t count, size_t i, size_t n,
                           int *out) {
  if (!axes) {
    *out = 0;
    return NV_OK;
  }
  if (count != 1 && count != n)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vmap: %zu %s given for %zu %s", count, what,
                         n, !strcmp(what, "in_axes") ? "inputs" : "outputs");
  *out = axes[count == 1 ? 0 : i];
  return NV_OK;
}

/* A stand-in for a mapped input: its shape without the mapped axis, no values. */
static nv_array *stand_in(const nv_array *x, int ax) {
  const nv__output *o = nv__out(x);
  int shape[NV__MAX_DIMS], nd = 0;
  for (int i = 0; i < o->ndim; i++)
    if (i != ax) shape[nd++] = o->shape[i];
  nv__node *n = nv__op_node(NV__PRIM_VMAP_INPUT, NULL, 0, o->dtype, shape, nd, 0);
  if (n) nv__node_mark_tracer(n);
  return nv__op_finish("vmap", n);
}

/* The replayed value of one node output: the batched array and its batch axis (-1: none). */
typedef struct mapped {
  nv_array *x;
  int ax;
} mapped;

/* Replays the tape: fills val[base[k] + o] for every node depending on a stand-in. */
static nv_status replay(const nv__tape *t, const size_t *base, mapped *val) {
  nv_status s = NV_OK;
  for (size_t k = t->nsrc; s == NV_OK && k < t->n; k++) {
    if (!t->dep[k]) continue;
    nv__node *n = t->nodes[k];
    const nv__prim_rule *r = &nv__prim_rules[n->prim];
    if (!r->vmap)
      return nv__set_error(NV_ERR_UNSUPPORTED, "vmap: the primitive %s has no vmap rule",
                           nv__prims[n->prim].name);
    const nv__input *ins = nv__tape_inputs(t, k);
    int ni = t->in_n[k], no = n->noutputs;
    nv_array **in = calloc((size_t)ni + (size_t)no + 1, sizeof *in);
    int *ax = calloc((size_t)ni + (size_t)no + 1, sizeof *ax);
    if (!in || !ax) {
      free(in);
      free(ax);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    }
    for (int i = 0; i < ni; i++) {
      long at = nv__tape_find(t, ins[i].node);
      mapped *m = at >= 0 && t->dep[at] ? &val[base[at] + (size_t)ins[i].idx] : NULL;
      in[i] = m && m->x ? nv_retain(m->x) : nv__tf_handle(ins[i].node, ins[i].idx);
      ax[i] = m && m->x ? m->ax : -1;
    }
    nv_array **out = in + ni;
    int *oax = ax + ni;
    for (int o = 0; o < no; o++) oax[o] = -1;
    s = r->vmap(n, in, ax, out, oax);
    for (int o = 0; o < no; o++) {
      val[base[k] + (size_t)o] = (mapped){out[o], oax[o]};
      if (s == NV_OK && !out[o])
        s = nv__set_error(NV_ERR_BACKEND, "vmap: the vmap rule of %s gave no output %d",
                          nv__prims[n->prim].name, o);
    }
    nv__tf_release_all(in, (size_t)ni);
    free(in);
    free(ax);
  }
  return s;
}

/* Output i placed at its out_axes entry (broadcast over the batch when it is not mapped). */
static nv_status place_output(const vmap_fn *v, size_t i, size_t nout, mapped m,
                              const nv_array *traced, int b, nv_vec *outputs) {
  int spec = 0;
  nv_status s = axis_spec("out_axes", v->out_axes, v->n_out, i, nout, &spec);
  if (s != NV_OK) return s;
  nv_array *x = m.x ? m.x : (nv_array *)traced;
  int ax = m.x ? m.ax : -1;
  if (spec == NV_VMAP_NONE) {
    if (ax >= 0)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "vmap: output %zu depends on a mapped input but its out_axes is None",
                           i);
    return nv_vec_push(outputs, x);
  }
  int rank = nv__out(x)->ndim + (ax < 0), to = spec < 0 ? spec + rank : spec;
  if (to < 0 || to >= rank)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "vmap: out_axes %d is out of range for output %zu of %d dimensions",
                         spec, i, rank);
  nv_array *r;
  if (ax >= 0) {
    r = nv__tf_moveaxis(x, ax, to);
  } else {
    /* Not mapped: the same value for every element of the batch. */
    const nv__output *o = nv__out(x);
    int shape[NV__MAX_DIMS];
    for (int d = 0, k = 0; d < rank; d++) shape[d] = d == to ? b : o->shape[k++];
    nv_array *e = nv_expand_dims(x, &to, 1);
    r = nv_broadcast_to(e, shape, rank);
    nv_release(e);
  }
  s = nv_vec_push(outputs, r);
  nv_release(r);
  return s;
}

/* Resolves the input axes and the batch size. */
static nv_status resolve_inputs(const vmap_fn *v, const nv_vec *inputs, int *axes, int *b) {
  size_t n = nv_vec_size(inputs);
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    int spec = 0;
    nv_status s = axis_spec("in_axes", v->in_axes, v->n_in, i, n, &spec);
    if (s != NV_OK) return s;
    const nv__output *o = nv__out(nv_vec_get(inputs, i));
    if (spec == NV_VMAP_NONE) {
      axes[i] = -1;
      continue;
    }
    int a = spec < 0 ? spec + o->ndim : spec;
    if (a < 0 || a >= o->ndim)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "vmap: in_axes %d is out of range for input %zu of %d dimensions", spec,
                           i, o->ndim);
    if (any && o->shape[a] != *b)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "vmap: mapped axes have different sizes (%d and %d)", *b, o->shape[a]);
    axes[i] = a;
    *b = o->shape[a];
    any = true;
  }
  if (!any)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "vmap: no input is mapped (every in_axes is None)");
  return NV_OK;
}

static nv_status vmap_run(const vmap_fn *v, const nv_vec *inputs, nv_vec *outputs) {
  size_t n = nv_vec_size(inputs);
  int *axes = calloc(n ? n : 1, sizeof *axes), b = 0;
  nv_array **args = calloc(n ? n : 1, sizeof *args);
  nv_array **src = calloc(n ? n : 1, sizeof *src);
  nv_vec *outs = nv_vec_new();
  nv_status s = axes && args && src && outs ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  if (s == NV_OK) s = resolve_inputs(v, inputs, axes, &b);
  bool tracing = false;
  if (s == NV_OK) tracing = (s = nv__tracing_enter()) == NV_OK;
  size_t nsrc = 0;
  for (size_t i = 0; s == NV_OK && i < n; i++) {
    nv_array *x = nv_vec_get(inputs, i);
    args[i] = axes[i] >= 0 ? stand_in(x, axes[i]) : nv_retain(x);
    if (axes[i] >= 0) src[nsrc++] = args[i];
  }
  if (s == NV_OK) s = nv__closure_call(v->f, args, n, outs);
  size_t nout = nv_vec_size(outs);
  nv__tape t = {0};
  size_t *base = NULL, total = 0;
  mapped *val = NULL;
  if (s == NV_OK) {
    nv__node **sn = calloc(nsrc ? nsrc : 1, sizeof *sn);
    for (size_t i = 0; sn && i < nsrc; i++) sn[i] = src[i]->node;
    s = sn ? nv__tape_build(&t, sn, nsrc, nv_vec_data(outs), nout)
           : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
    free(sn);
  }
  if (s == NV_OK) {
    base = calloc(t.n + 1, sizeof *base);
    for (size_t k = 0; base && k < t.n; k++) base[k + 1] = base[k] + (size_t)t.nodes[k]->noutputs;
    total = base ? base[t.n] : 0;
    val = calloc(total ? total : 1, sizeof *val);
    if (!base || !val) s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  }
  /* The stand-ins stand for the inputs themselves, batched along their axes. */
  for (size_t i = 0, j = 0; s == NV_OK && i < n; i++) {
    if (axes[i] < 0) continue;
    long at = nv__tape_find(&t, src[j++]->node);
    val[base[at]] = (mapped){nv_retain(nv_vec_get(inputs, i)), axes[i]};
  }
  if (s == NV_OK) s = replay(&t, base, val);
  for (size_t i = 0; s == NV_OK && i < nout; i++) {
    nv_array *o = nv_vec_get(outs, i);
    long at = nv__tape_find(&t, o->node);
    mapped m = at >= 0 && t.dep[at] ? val[base[at] + (size_t)o->idx] : (mapped){NULL, -1};
    s = place_output(v, i, nout, m, o, b, outputs);
  }
  for (size_t k = 0; val && k < total; k++) nv_release(val[k].x);
  free(val);
  free(base);
  nv__tape_free(&t);
  nv_vec_free(outs);
  if (args) nv__tf_release_all(args, n);
  free(args);
  free(src);
  free(axes);
  if (tracing) nv__tracing_leave();
  return s;
}

static nv_status vmap_call(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  nv__rules_register();
  nv__scope_suspend();
  nv_status s = vmap_run(payload, inputs, outputs);
  nv__scope_resume();
  return s;
}

static int *copy_axes(const int *axes, size_t n, bool *ok) {
  if (!axes) return NULL;
  int *c = nv__malloc((n ? n : 1) * sizeof *c);
  if (!c) *ok = false;
  else memcpy(c, axes, n * sizeof *c);
  return c;
}

nv_closure *nv_vmap(const nv_closure *f, const int *in_axes, size_t n_in, const int *out_axes,
                    size_t n_out) {
  if (!f) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "vmap: NULL function");
    return NULL;
  }
  if ((in_axes && n_in == 0) || (out_axes && n_out == 0)) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "vmap: an axes list is given with no entries");
    return NULL;
  }
  vmap_fn *v = nv__calloc(1, sizeof *v);
  bool ok = v != NULL;
  if (v) {
    v->f = nv_closure_retain((nv_closure *)f);
    v->n_in = n_in;
    v->n_out = n_out;
    v->in_axes = copy_axes(in_axes, n_in, &ok);
    v->out_axes = copy_axes(out_axes, n_out, &ok);
  }
  nv_closure *c = ok ? nv_closure_new(vmap_call, v, vmap_free) : NULL;
  if (!c) {
    if (v) vmap_free(v);
    if (!ok) nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  }
  return c;
}
