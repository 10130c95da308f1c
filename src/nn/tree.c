/* Nested parameter trees (nv_tree) and their conversion to and from flat maps of dotted
 * paths, as MLX's tree_flatten / tree_unflatten. Walks over user-built trees are iterative, so
 * a deep tree cannot overflow the stack. */
#include <stdio.h>
#include <stdlib.h>

#include "nn/nn_internal.h"

struct nv_tree {
  nv_tree_kind kind;
  nv_array *array; /* leaf */
  char **keys;     /* dict: one per child */
  nv_tree **kids;  /* dict and list */
  size_t n, cap;
  nv_tree *next; /* the free list of nv_tree_free and the walk of nv_tree_flatten */
};

/* ---- Building ---- */

static nv_tree *tree_alloc(nv_tree_kind kind) {
  nv_tree *t = nv__calloc(1, sizeof *t);
  if (!t) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree: out of memory");
    return NULL;
  }
  t->kind = kind;
  return t;
}

nv_tree *nv_tree_new_array(nv_array *x) {
  if (!x) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "tree_new_array: NULL array");
    return NULL;
  }
  nv_tree *t = tree_alloc(NV_TREE_ARRAY);
  if (t) t->array = nv_retain(x);
  return t;
}

nv_tree *nv_tree_new_dict(void) { return tree_alloc(NV_TREE_DICT); }
nv_tree *nv_tree_new_list(void) { return tree_alloc(NV_TREE_LIST); }

/* Frees a whole tree without recursion: the nodes waiting to be freed form a list linked
 * through their own `next` field, so freeing needs neither stack nor memory. */
void nv_tree_free(nv_tree *t) {
  if (t) t->next = NULL;
  while (t) {
    nv_tree *x = t;
    t = x->next;
    for (size_t i = 0; i < x->n; i++) {
      x->kids[i]->next = t;
      t = x->kids[i];
      if (x->keys) nv__free(x->keys[i]);
    }
    nv_release(x->array);
    nv__free(x->keys);
    nv__free(x->kids);
    nv__free(x);
  }
}

/* Makes room for one more child. */
static nv_status tree_grow(nv_tree *t) {
  if (t->n < t->cap) return NV_OK;
  size_t nc = t->cap ? t->cap * 2 : 4;
  nv_tree **k = nv__realloc(t->kids, nc * sizeof *k);
  if (!k) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree: out of memory");
  t->kids = k;
  if (t->kind == NV_TREE_DICT) {
    char **s = nv__realloc(t->keys, nc * sizeof *s);
    if (!s) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree: out of memory");
    t->keys = s;
  }
  t->cap = nc;
  return NV_OK;
}

static nv_status dict_append(nv_tree *dict, const char *key, nv_tree *child);

static long dict_find(const nv_tree *t, const char *key) {
  for (size_t i = 0; i < t->n; i++)
    if (!strcmp(t->keys[i], key)) return (long)i;
  return -1;
}

nv_status nv_tree_dict_set(nv_tree *dict, const char *key, nv_tree *child) {
  nv_status st = NV_OK;
  if (!dict || dict->kind != NV_TREE_DICT || !child || !key)
    st = nv__set_error(NV_ERR_INVALID_ARGUMENT, "tree_dict_set: %s",
                       !dict || dict->kind != NV_TREE_DICT ? "not a dict"
                       : !child                           ? "NULL child"
                                                          : "NULL key");
  else if (!key[0] || strchr(key, '.'))
    st = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "tree_dict_set: key '%s' is empty or contains '.', the separator of "
                       "flat names",
                       key);
  if (st != NV_OK) {
    nv_tree_free(child);
    return st;
  }
  long at = dict_find(dict, key);
  if (at >= 0) {
    nv_tree_free(dict->kids[at]);
    dict->kids[at] = child;
    return NV_OK;
  }
  return dict_append(dict, key, child);
}

/* Appends a key the dict does not hold yet (consuming `child`). */
static nv_status dict_append(nv_tree *dict, const char *key, nv_tree *child) {
  size_t len = strlen(key);
  char *k = nv__malloc(len + 1);
  if (!k || tree_grow(dict) != NV_OK) {
    nv__free(k);
    nv_tree_free(child);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_dict_set: out of memory");
  }
  memcpy(k, key, len + 1);
  dict->keys[dict->n] = k;
  dict->kids[dict->n++] = child;
  return NV_OK;
}

nv_status nv_tree_list_append(nv_tree *list, nv_tree *child) {
  if (!list || list->kind != NV_TREE_LIST || !child) {
    nv_tree_free(child);
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "tree_list_append: %s",
                         !child ? "NULL child" : "not a list");
  }
  if (tree_grow(list) != NV_OK) {
    nv_tree_free(child);
    return NV_ERR_OUT_OF_MEMORY;
  }
  list->kids[list->n++] = child;
  return NV_OK;
}

/* ---- Reading ---- */

nv_tree_kind nv_tree_get_kind(const nv_tree *t) { return t ? t->kind : NV_TREE_ARRAY; }
size_t nv_tree_size(const nv_tree *t) { return t ? t->n : 0; }

const char *nv_tree_key(const nv_tree *t, size_t i) {
  return t && t->kind == NV_TREE_DICT && i < t->n ? t->keys[i] : NULL;
}

nv_tree *nv_tree_child(const nv_tree *t, size_t i) { return t && i < t->n ? t->kids[i] : NULL; }

nv_tree *nv_tree_find(const nv_tree *t, const char *key) {
  if (!t || t->kind != NV_TREE_DICT || !key) return NULL;
  long at = dict_find(t, key);
  return at < 0 ? NULL : t->kids[at];
}

nv_array *nv_tree_array(const nv_tree *t) {
  return t && t->kind == NV_TREE_ARRAY ? t->array : NULL;
}

/* ---- Flatten ---- */

/* A growable string for the path being walked. */
typedef struct path_buf {
  char *s;
  size_t len, cap;
} path_buf;

static nv_status path_set(path_buf *p, size_t at, const char *name) {
  size_t ln = strlen(name), need = at + (at ? 1 : 0) + ln + 1;
  if (need > p->cap) {
    size_t nc = p->cap ? p->cap : 64;
    while (nc < need) nc *= 2;
    char *s = nv__realloc(p->s, nc);
    if (!s) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_flatten: out of memory");
    p->s = s;
    p->cap = nc;
  }
  if (at) p->s[at++] = '.';
  memcpy(p->s + at, name, ln + 1);
  p->len = at + ln;
  return NV_OK;
}

typedef struct frame {
  const nv_tree *node;
  size_t next, pathlen;
} frame;

/* Depth-first over the containers with an explicit stack of frames. */
static nv_status flatten_walk(const nv_tree *t, path_buf *path, nv_map *out) {
  size_t n = 1, cap = 16;
  frame *stack = nv__malloc(cap * sizeof *stack);
  if (!stack) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_flatten: out of memory");
  stack[0] = (frame){t, 0, path->len};
  nv_status st = NV_OK;
  while (n && st == NV_OK) {
    frame *f = &stack[n - 1];
    if (f->next == f->node->n) {
      n--;
      continue;
    }
    size_t i = f->next++;
    const nv_tree *c = f->node->kids[i];
    char num[24];
    const char *name = f->node->keys ? f->node->keys[i] : num;
    if (!f->node->keys) snprintf(num, sizeof num, "%zu", i);
    st = path_set(path, f->pathlen, name);
    if (st != NV_OK) break;
    if (c->kind == NV_TREE_ARRAY) {
      st = nv__map_append(out, path->s, c->array);
      continue;
    }
    if (n == cap) {
      frame *s = nv__realloc(stack, 2 * cap * sizeof *s);
      if (!s) {
        st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_flatten: out of memory");
        break;
      }
      stack = s;
      cap *= 2;
    }
    stack[n++] = (frame){c, 0, path->len};
  }
  nv__free(stack);
  return st;
}

nv_status nv_tree_flatten(const nv_tree *t, const char *prefix, nv_map **out) {
  if (!t || !out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "tree_flatten: NULL argument");
  nv_map *m = nv_map_new();
  if (!m) return NV_ERR_OUT_OF_MEMORY;
  path_buf path = {0};
  nv_status st = path_set(&path, 0, prefix ? prefix : "");
  if (st == NV_OK) {
    if (t->kind == NV_TREE_ARRAY) st = nv__map_append(m, path.s, t->array);
    else st = flatten_walk(t, &path, m);
  }
  nv__free(path.s);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *out = m;
  return NV_OK;
}

/* ---- Unflatten ---- */

/* The deepest nesting unflatten builds (it recurses once per level). */
#define MAX_DEPTH 1024
/* The largest list index: a list is filled up to it with empty dicts. */
#define MAX_INDEX (1L << 24)

/* An entry being placed: its full key, where the part still to place starts, its array. */
typedef struct item {
  const char *key;
  size_t off;
  nv_array *x;
} item;

/* The children of one node: the distinct first components of its items. */
typedef struct group {
  const char *s;
  size_t len, count, start;
  long index; /* the list index the component names, or -1 */
} group;

static nv_status build(item *items, size_t n, int depth, nv_tree **out);

static size_t comp_len(const item *it) {
  const char *s = it->key + it->off, *dot = strchr(s, '.');
  return dot ? (size_t)(dot - s) : strlen(s);
}

static uint64_t hash_comp(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* The list index a component names (decimal digits only), -1 if it names none, or
 * MAX_INDEX + 1 when it is a number above MAX_INDEX. */
static long comp_index(const char *s, size_t len) {
  long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    if (v <= MAX_INDEX) v = v * 10 + (s[i] - '0');
  }
  return v > MAX_INDEX ? MAX_INDEX + 1 : v;
}

/* Assigns each item to its group (in order of first appearance) with a hash of components;
 * fills `gid` and returns the number of groups, or 0 when out of memory. */
static size_t group_items(const item *items, size_t n, group *groups, size_t *gid) {
  size_t cap = 8;
  while (cap < 2 * n) cap *= 2;
  size_t *slots = nv__calloc(cap, sizeof *slots), ng = 0;
  if (!slots) return 0;
  for (size_t i = 0; i < n; i++) {
    const char *s = items[i].key + items[i].off;
    size_t len = comp_len(&items[i]), at = (size_t)hash_comp(s, len) & (cap - 1);
    while (slots[at]) {
      group *g = &groups[slots[at] - 1];
      if (g->len == len && !memcmp(g->s, s, len)) break;
      at = (at + 1) & (cap - 1);
    }
    if (!slots[at]) {
      groups[ng] = (group){s, len, 0, 0, comp_index(s, len)};
      slots[at] = ++ng;
    }
    gid[i] = slots[at] - 1;
    groups[gid[i]].count++;
  }
  nv__free(slots);
  return ng;
}

static int cmp_index(const void *a, const void *b) {
  long x = (*(const group *const *)a)->index, y = (*(const group *const *)b)->index;
  return (x > y) - (x < y);
}

/* Whether the groups name distinct list indices; sorts `order` by index. */
static bool is_list(group *groups, size_t ng, group **order) {
  for (size_t g = 0; g < ng; g++) {
    if (groups[g].index < 0) return false;
    order[g] = &groups[g];
  }
  qsort(order, ng, sizeof *order, cmp_index);
  for (size_t g = 1; g < ng; g++)
    if (order[g]->index == order[g - 1]->index) return false;
  return true;
}

/* Builds the children of a container from items grouped in `sorted` (group by group). */
static nv_status build_children(nv_tree *t, group *groups, size_t ng, group **order,
                                item *sorted, int depth) {
  nv_status st = NV_OK;
  long next = 0;
  for (size_t k = 0; k < ng && st == NV_OK; k++) {
    group *g = t->kind == NV_TREE_LIST ? order[k] : &groups[k];
    if (t->kind == NV_TREE_LIST) {
      if (g->index > MAX_INDEX)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "tree_unflatten: list index in '%s' is above %ld",
                             sorted[g->start].key, MAX_INDEX);
      /* MLX fills the indices no key names with empty dicts. */
      for (; next < g->index && st == NV_OK; next++) {
        nv_tree *e = nv_tree_new_dict();
        st = e ? nv_tree_list_append(t, e) : NV_ERR_OUT_OF_MEMORY;
      }
      next++;
    }
    nv_tree *c = NULL;
    if (st == NV_OK) st = build(sorted + g->start, g->count, depth + 1, &c);
    if (st != NV_OK) break;
    if (t->kind == NV_TREE_LIST) {
      st = nv_tree_list_append(t, c);
    } else {
      char *name = nv__malloc(g->len + 1);
      if (!name) {
        nv_tree_free(c);
        return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_unflatten: out of memory");
      }
      memcpy(name, g->s, g->len);
      name[g->len] = '\0';
      /* The groups are distinct components without '.', so no lookup is needed. */
      st = dict_append(t, name, c);
      nv__free(name);
    }
  }
  return st;
}

static nv_status build(item *items, size_t n, int depth, nv_tree **out) {
  if (n == 1 && !items[0].key[items[0].off]) {
    *out = nv_tree_new_array(items[0].x);
    return *out ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < n; i++)
    if (!items[i].key[items[i].off]) {
      const item *o = &items[i == 0 ? 1 : 0];
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "tree_unflatten: '%s' is an array and also the prefix of '%s'",
                           items[i].key, o->key);
    }
  if (depth > MAX_DEPTH)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "tree_unflatten: key '%.64s...' nests deeper than %d levels", items[0].key,
                         MAX_DEPTH);
  group *groups = nv__malloc(n * sizeof *groups);
  group **order = nv__malloc(n * sizeof *order);
  size_t *gid = nv__malloc(n * sizeof *gid);
  item *sorted = nv__malloc(n * sizeof *sorted);
  nv_status st = NV_ERR_OUT_OF_MEMORY;
  size_t ng = groups && order && gid && sorted ? group_items(items, n, groups, gid) : 0;
  nv_tree *t = NULL;
  if (ng) {
    /* Counting sort by group keeps each group's items in their order. */
    size_t at = 0;
    for (size_t g = 0; g < ng; g++) {
      groups[g].start = at;
      at += groups[g].count;
      groups[g].count = 0;
    }
    for (size_t i = 0; i < n; i++) {
      group *g = &groups[gid[i]];
      item it = items[i];
      it.off += g->len + (it.key[it.off + g->len] == '.');
      sorted[g->start + g->count++] = it;
    }
    t = is_list(groups, ng, order) ? nv_tree_new_list() : nv_tree_new_dict();
    st = t ? build_children(t, groups, ng, order, sorted, depth) : NV_ERR_OUT_OF_MEMORY;
  }
  if (st == NV_ERR_OUT_OF_MEMORY && !ng)
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_unflatten: out of memory");
  nv__free(groups);
  nv__free(order);
  nv__free(gid);
  nv__free(sorted);
  if (st != NV_OK) {
    nv_tree_free(t);
    return st;
  }
  *out = t;
  return NV_OK;
}

/* Refuses keys with an empty component, where MLX would make a dict with an empty key. */
static nv_status check_key(const char *key) {
  const char *s = key;
  for (;;) {
    const char *dot = strchr(s, '.');
    size_t len = dot ? (size_t)(dot - s) : strlen(s);
    if (!len)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "tree_unflatten: key '%s' has an empty component", key);
    if (!dot) return NV_OK;
    s = dot + 1;
  }
}

nv_status nv_tree_unflatten(const nv_map *flat, nv_tree **out) {
  if (!flat || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "tree_unflatten: NULL argument");
  size_t n = nv_map_size(flat);
  if (n == 0) {
    nv_tree *t = nv_tree_new_list();
    if (!t) return NV_ERR_OUT_OF_MEMORY;
    *out = t;
    return NV_OK;
  }
  if (n == 1 && !nv_map_key(flat, 0)[0]) {
    nv_tree *t = nv_tree_new_array(nv_map_value(flat, 0));
    if (!t) return NV_ERR_OUT_OF_MEMORY;
    *out = t;
    return NV_OK;
  }
  item *items = nv__malloc(n * sizeof *items);
  if (!items) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "tree_unflatten: out of memory");
  nv_status st = NV_OK;
  for (size_t i = 0; i < n && st == NV_OK; i++) {
    items[i] = (item){nv_map_key(flat, i), 0, nv_map_value(flat, i)};
    st = check_key(items[i].key);
  }
  nv_tree *t = NULL;
  if (st == NV_OK) st = build(items, n, 0, &t);
  nv__free(items);
  if (st != NV_OK) return st;
  *out = t;
  return NV_OK;
}
