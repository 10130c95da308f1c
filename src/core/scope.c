/* Scopes (DESIGN §4): per-thread, nested; a scope owns the arrays created inside it.
 *
 * Handles are shared between threads, scopes are not: only the owning thread changes its
 * scopes, so they need no lock. An array records the thread of the scope that owns it and the
 * scope's depth (`scope_level`, atomic). Releasing the scope's reference (the array's last
 * reference) on another thread cannot take the array out of the owner's scope; it drops the
 * array's node at once (its data and graph are freed as usual) and marks the handle
 * NV__SCOPE_DROPPED, and the owner's nv_scope_end then frees the handle instead of releasing
 * it a second time. The owner and the releasing thread claim the scope's reference with a
 * compare-and-swap on scope_level, so exactly one of them gives it back.
 *
 * Each thread's stack of scopes is allocated when the thread first opens a scope and freed
 * when the thread exits (a pthread key destructor), ending the scopes it left open. */
#include <pthread.h>
#include <stdlib.h>

#include "core/internal.h"

typedef struct scope {
  nv_array **items;
  size_t n, cap;
} scope;

typedef struct scope_stack {
  scope *levels;
  int depth, cap;
} scope_stack;

static _Thread_local scope_stack *stack;
static pthread_key_t stack_key;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
static bool stack_key_ok;
static atomic_long live_stacks;

long nv__test_live_scope_stacks(void) { return atomic_load(&live_stacks); }

static void end_top(scope_stack *st);

/* At thread exit: the scopes still open are ended (they own their arrays, and no other thread
 * can end them), then the stack is freed. */
static void stack_destroy(void *p) {
  scope_stack *st = p;
  while (st->depth > 0) end_top(st);
  free(st->levels);
  free(st);
  if (stack == st) stack = NULL;
  atomic_fetch_sub(&live_stacks, 1);
}

static void make_key(void) { stack_key_ok = pthread_key_create(&stack_key, stack_destroy) == 0; }

/* The calling thread's stack, made on first use (NULL when out of memory). */
static scope_stack *own_stack(void) {
  if (stack) return stack;
  pthread_once(&stack_once, make_key);
  scope_stack *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  if (!stack_key_ok || pthread_setspecific(stack_key, st) != 0) {
    free(st);
    return NULL;
  }
  atomic_fetch_add(&live_stacks, 1);
  stack = st;
  return st;
}

nv_status nv_scope_begin(void) {
  scope_stack *st = own_stack();
  if (st && st->depth == st->cap) {
    int nc = st->cap ? st->cap * 2 : 8;
    scope *s = realloc(st->levels, (size_t)nc * sizeof *s);
    if (!s) st = NULL;
    else {
      st->levels = s;
      st->cap = nc;
    }
  }
  if (!st) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "scope_begin: out of memory");
  st->levels[st->depth++] = (scope){0};
  return NV_OK;
}

/* Adds `x` to scope `level` (1-based) of the calling thread's stack; false when out of
 * memory. Publishes the level last (release), after the slot and thread it stands for. */
static bool scope_add(scope_stack *st, int level, nv_array *x) {
  scope *s = &st->levels[level - 1];
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    nv_array **it = realloc(s->items, nc * sizeof *it);
    if (!it) return false;
    s->items = it;
    s->cap = nc;
  }
  x->scope_slot = s->n;
  s->items[s->n++] = x;
  atomic_store_explicit(&x->scope_level, level, memory_order_release);
  return true;
}

/* Builders suspend scopes while they make temporaries, so the temporaries are theirs. */
static _Thread_local int suspended;
void nv__scope_suspend(void) { suspended++; }
void nv__scope_resume(void) { suspended--; }

void nv__scope_register(nv_array *x) {
  scope_stack *st = stack;
  if (!st || st->depth == 0 || suspended) return;
  x->scope_thread = nv__thread_id();
  /* When the scope cannot grow, the array stays with the caller, who sees it as usual. */
  scope_add(st, st->depth, x);
}

/* Takes `x` (owned by the calling thread's scope `level`) out of its slot. */
static void take_out(scope_stack *st, int level, nv_array *x) {
  if (!st || level > st->depth) return;
  scope *s = &st->levels[level - 1];
  if (x->scope_slot < s->n && s->items[x->scope_slot] == x) s->items[x->scope_slot] = NULL;
}

bool nv__scope_release(nv_array *x) {
  int level = atomic_load_explicit(&x->scope_level, memory_order_acquire);
  if (x->scope_thread == nv__thread_id()) {
    /* The owner: out of the scope, then freed by the caller. A failed claim means another
     * thread dropped the scope's reference already: there is nothing left to give back. */
    if (level <= 0 ||
        !atomic_compare_exchange_strong_explicit(&x->scope_level, &level, 0,
                                                 memory_order_acq_rel, memory_order_acquire))
      return true;
    take_out(stack, level, x);
    return false;
  }
  /* Another thread: the node goes now, the handle at the owner's nv_scope_end. The node is
   * read before the claim, after which the owner may free the handle at any time. */
  nv__node *node = x->node;
  while (level > 0) {
    if (atomic_compare_exchange_weak_explicit(&x->scope_level, &level, NV__SCOPE_DROPPED,
                                              memory_order_acq_rel, memory_order_acquire)) {
      nv__node_release(node);
      return true;
    }
  }
  /* The owner handed it to its caller meanwhile: an ordinary release. */
  return false;
}

/* Ends the innermost scope of `st`, releasing what it still owns. */
static void end_top(scope_stack *st) {
  scope *s = &st->levels[--st->depth];
  for (size_t i = 0; i < s->n; i++) {
    nv_array *x = s->items[i];
    if (!x) continue;
    int level = atomic_load_explicit(&x->scope_level, memory_order_acquire);
    if (level > 0 &&
        atomic_compare_exchange_strong_explicit(&x->scope_level, &level, 0,
                                                memory_order_acq_rel, memory_order_acquire))
      nv_release(x);
    else if (level == NV__SCOPE_DROPPED)
      nv__free(x); /* released on another thread: only the handle was left */
  }
  free(s->items);
}

void nv_scope_end(void) {
  scope_stack *st = stack;
  if (st && st->depth > 0) end_top(st);
}

nv_array *nv_scope_keep(nv_array *x) {
  scope_stack *st = stack;
  if (!x || !st) return x;
  int level = atomic_load_explicit(&x->scope_level, memory_order_acquire);
  /* Only the owning thread moves an array between its scopes. */
  if (level <= 0 || level > st->depth || x->scope_thread != nv__thread_id()) return x;
  if (!atomic_compare_exchange_strong_explicit(&x->scope_level, &level, 0, memory_order_acq_rel,
                                               memory_order_acquire))
    return x; /* dropped on another thread: it stays in its slot for nv_scope_end */
  take_out(st, level, x);
  /* At the outermost level (or when the enclosing scope cannot grow) the caller owns it. */
  if (level > 1) scope_add(st, level - 1, x);
  return x;
}
