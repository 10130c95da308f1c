/* Scopes (DESIGN §4): per-thread, nested; a scope owns the arrays created inside it. */
#include <stdlib.h>

#include "core/internal.h"

typedef struct scope {
  nv_array **items;
  size_t n, cap;
} scope;

static _Thread_local scope *scopes;
static _Thread_local int depth, cap_depth;

nv_status nv_scope_begin(void) {
  if (depth == cap_depth) {
    int nc = cap_depth ? cap_depth * 2 : 8;
    scope *s = realloc(scopes, (size_t)nc * sizeof *s);
    if (!s) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "scope_begin: out of memory");
    scopes = s;
    cap_depth = nc;
  }
  scopes[depth] = (scope){0};
  depth++;
  return NV_OK;
}

/* Adds `x` to scope `level` (1-based); false when out of memory. */
static bool scope_add(int level, nv_array *x) {
  scope *s = &scopes[level - 1];
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    nv_array **it = realloc(s->items, nc * sizeof *it);
    if (!it) return false;
    s->items = it;
    s->cap = nc;
  }
  x->scope_level = level;
  x->scope_slot = s->n;
  s->items[s->n++] = x;
  return true;
}

/* Builders suspend scopes while they make temporaries, so the temporaries are theirs. */
static _Thread_local int suspended;
void nv__scope_suspend(void) { suspended++; }
void nv__scope_resume(void) { suspended--; }

void nv__scope_register(nv_array *x) {
  /* When the scope cannot grow, the array stays with the caller, who sees it as usual. */
  if (depth > 0 && !suspended && !scope_add(depth, x)) x->scope_level = 0;
}

void nv__scope_forget(nv_array *x) {
  int level = x->scope_level;
  if (level <= 0 || level > depth) return;
  scope *s = &scopes[level - 1];
  if (x->scope_slot < s->n && s->items[x->scope_slot] == x) s->items[x->scope_slot] = NULL;
  x->scope_level = 0;
}

void nv_scope_end(void) {
  if (depth == 0) return;
  scope *s = &scopes[depth - 1];
  depth--;
  for (size_t i = 0; i < s->n; i++) {
    nv_array *x = s->items[i];
    if (!x) continue;
    x->scope_level = 0;
    nv_release(x);
  }
  free(s->items);
}

nv_array *nv_scope_keep(nv_array *x) {
  if (!x || x->scope_level <= 0 || x->scope_level > depth) return x;
  int level = x->scope_level;
  scope *s = &scopes[level - 1];
  if (x->scope_slot < s->n && s->items[x->scope_slot] == x) s->items[x->scope_slot] = NULL;
  x->scope_level = 0;
  if (level > 1 && !scope_add(level - 1, x)) x->scope_level = 0;
  return x;
}
