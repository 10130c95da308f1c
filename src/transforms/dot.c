/* nv_export_to_dot: the unevaluated graph behind some arrays in Graphviz's DOT format, laid out
 * as MLX's export_to_dot writes it: the named inputs and the evaluated leaves first (rank
 * source), then each node as a rectangle labelled with its primitive in CamelCase, an edge from
 * each input array to it and from it to each of its output arrays (named by the caller, else
 * A, B, ..., Z, AA, ...), the requested outputs last (rank sink). The walk is iterative and
 * reads a node's inputs under its lock, holding them while it uses them. */
#include <stdio.h>
#include <stdlib.h>

#include "core/ptrmap.h"
#include "transforms/compile_internal.h"

typedef struct dot {
  FILE *f;
  nv__ptrmap seen;  /* node -> its order (1-based) once written, 0 while on the stack */
  nv__ptrmap named; /* node -> index into names of its output 0 .. (only given names) */
  const char *const *names;
  nv_array *const *named_arrays;
  size_t nnamed;
  long next_letter;
  long *letters; /* per written node order: the letter id of its output 0 */
  size_t nletters, capletters;
} dot;

/* The name of output `idx` of `n` into buf: a caller's name, else letters by first use. */
static void array_name(dot *d, const nv__node *n, int idx, char *buf, size_t size) {
  for (size_t i = 0; i < d->nnamed; i++)
    if (d->named_arrays[i]->node == n && d->named_arrays[i]->idx == idx) {
      snprintf(buf, size, "%s", d->names[i]);
      return;
    }
  bool found;
  long *slot = nv__ptrmap_slot(&d->named, n, &found);
  long id = slot && found ? *slot : d->next_letter;
  if (slot && !found) {
    *slot = id;
    d->next_letter += n->noutputs;
  }
  id += idx;
  char tmp[32];
  int k = 0;
  do {
    tmp[k++] = (char)('A' + id % 26);
    id = id / 26 - 1;
  } while (id >= 0 && k < 30);
  for (int i = 0; i < k; i++)
    buf[i] = tmp[k - 1 - i];
  buf[k] = 0;
}

void nv__dot_camel(const char *s, char *buf, size_t size) {
  size_t k = 0;
  bool up = true;
  for (; *s && k + 1 < size; s++) {
    if (*s == '_') {
      up = true;
      continue;
    }
    buf[k++] = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
    up = false;
  }
  buf[k] = 0;
}

/* A node's inputs, held, as the walk reads them (none once it is evaluated). */
typedef struct held {
  nv__input *in;
  int n;
} held;

static held read_inputs(nv__node *n) {
  held h = {NULL, 0};
  int cap = 0;
  for (;;) {
    nv__node_lock(n);
    int st = atomic_load_explicit(&n->state, memory_order_relaxed);
    int k = (st == NV__PENDING || st == NV__RETAINED) && n->inputs ? n->ninputs : 0;
    if (k <= cap) {
      for (int i = 0; i < k; i++)
        h.in[i] = (nv__input){nv__node_retain(n->inputs[i].node), n->inputs[i].idx};
      h.n = k;
      nv__node_unlock(n);
      return h;
    }
    nv__node_unlock(n);
    nv__input *p = nv__realloc(h.in, (size_t)k * sizeof *p);
    if (!p) {
      nv__free(h.in);
      return (held){NULL, -1};
    }
    h.in = p;
    cap = k;
  }
}

static void held_free(held *h) {
  for (int i = 0; i < h->n; i++)
    nv__node_release(h->in[i].node);
  nv__free(h->in);
}

typedef struct frame {
  nv__node *node;
  held in;
  int next;
} frame;

/* Writes `n` (a leaf) or its node and edges, after its inputs. */
static void write_node(dot *d, nv__node *n, const held *in, bool sink) {
  char name[128], label[160];
  if (in->n == 0) {
    for (int o = 0; o < n->noutputs; o++) {
      array_name(d, n, o, name, sizeof name);
      fprintf(d->f, "{ rank=source; \"%s\"; }\n", name);
    }
    return;
  }
  if (n->prim == NV__PRIM_COMPILED && n->params_size >= sizeof(nv__compiled_params) &&
      ((const nv__compiled_params *)n->params)->k)
    snprintf(label, sizeof label, "%s", ((const nv__compiled_params *)n->params)->k->name);
  else
    nv__dot_camel(nv__prims[n->prim].name, label, sizeof label);
  fprintf(d->f, "{ %llu [label =\"%s\", shape=rectangle]; }\n", (unsigned long long)(uintptr_t)n,
          label);
  for (int i = 0; i < in->n; i++) {
    array_name(d, in->in[i].node, in->in[i].idx, name, sizeof name);
    fprintf(d->f, "\"%s\" -> %llu\n", name, (unsigned long long)(uintptr_t)n);
  }
  for (int o = 0; o < n->noutputs; o++) {
    array_name(d, n, o, name, sizeof name);
    fprintf(d->f, sink ? "{ rank=sink; \"%s\"; }\n" : "{ \"%s\"; }\n", name);
    fprintf(d->f, "%llu -> \"%s\"\n", (unsigned long long)(uintptr_t)n, name);
  }
}

static bool is_output(nv_array *const *outs, size_t n, const nv__node *node) {
  for (size_t i = 0; i < n; i++)
    if (outs[i]->node == node)
      return true;
  return false;
}

nv_status nv_export_to_dot(const char *path, nv_array *const *outputs, size_t n,
                           const char *const *names, nv_array *const *named, size_t nnamed) {
  if (!path || (n && !outputs) || (nnamed && (!names || !named)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_to_dot: NULL argument");
  for (size_t i = 0; i < n; i++)
    if (!outputs[i])
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_to_dot: output %zu is NULL", i);
  for (size_t i = 0; i < nnamed; i++)
    if (!named[i] || !names[i])
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "export_to_dot: named array %zu is NULL", i);
  dot d = {0};
  d.names = names;
  d.named_arrays = named;
  d.nnamed = nnamed;
  d.f = fopen(path, "w");
  if (!d.f)
    return nv__set_error(NV_ERR_IO, "export_to_dot: cannot open %s for writing", path);
  fprintf(d.f, "digraph {\n");
  /* The caller's named arrays are sources, written first. */
  for (size_t i = 0; i < nnamed; i++)
    fprintf(d.f, "{ rank=source; \"%s\"; }\n", names[i]);
  nv_status s = NV_OK;
  frame *stack = NULL;
  size_t ns = 0, cs = 0;
  bool found;
  for (size_t r = 0; s == NV_OK && r < n; r++) {
    long *slot = nv__ptrmap_slot(&d.seen, outputs[r]->node, &found);
    if (!slot)
      s = NV_ERR_OUT_OF_MEMORY;
    if (!slot || found)
      continue;
    nv__node *root = outputs[r]->node;
    held h = read_inputs(root);
    if (h.n < 0)
      s = NV_ERR_OUT_OF_MEMORY;
    if (s == NV_OK && ns == cs) {
      frame *p = nv__realloc(stack, (cs = cs ? 2 * cs : 64) * sizeof *p);
      if (!p)
        s = NV_ERR_OUT_OF_MEMORY;
      else
        stack = p;
    }
    if (s != NV_OK) {
      if (h.n > 0)
        held_free(&h);
      break;
    }
    stack[ns++] = (frame){root, h, 0};
    while (s == NV_OK && ns) {
      frame *f = &stack[ns - 1];
      if (f->next < f->in.n) {
        nv__node *in = f->in.in[f->next++].node;
        long *is = nv__ptrmap_slot(&d.seen, in, &found);
        if (!is) {
          s = NV_ERR_OUT_OF_MEMORY;
          break;
        }
        if (found)
          continue;
        bool leaf_named = false;
        for (size_t i = 0; i < nnamed; i++)
          leaf_named |= named[i]->node == in;
        held hi = leaf_named ? (held){NULL, 0} : read_inputs(in);
        if (hi.n < 0) {
          s = NV_ERR_OUT_OF_MEMORY;
          break;
        }
        if (ns == cs) {
          frame *p = nv__realloc(stack, (cs *= 2) * sizeof *p);
          if (!p) {
            held_free(&hi);
            s = NV_ERR_OUT_OF_MEMORY;
            break;
          }
          stack = p;
          f = &stack[ns - 1];
        }
        stack[ns++] = (frame){in, hi, 0};
        continue;
      }
      frame done = *f;
      ns--;
      bool named_leaf = false;
      for (size_t i = 0; i < nnamed; i++)
        named_leaf |= named[i]->node == done.node;
      if (!named_leaf || done.in.n)
        write_node(&d, done.node, &done.in, is_output(outputs, n, done.node));
      held_free(&done.in);
    }
  }
  while (ns)
    held_free(&stack[--ns].in);
  nv__free(stack);
  fprintf(d.f, "}\n");
  bool io_ok = !ferror(d.f);
  io_ok = fclose(d.f) == 0 && io_ok;
  nv__ptrmap_free(&d.seen);
  nv__ptrmap_free(&d.named);
  if (s != NV_OK)
    return nv__set_error(s, "export_to_dot: out of memory");
  if (!io_ok)
    return nv__set_error(NV_ERR_IO, "export_to_dot: cannot write %s", path);
  return NV_OK;
}
