/* Closures (DESIGN §4): a function pointer, a payload and its destructor, counted. */
#include <stdlib.h>

#include "transforms/transforms_internal.h"

struct nv_closure {
  atomic_long refs;
  nv_closure_fn fn;
  void *payload;
  void (*destroy)(void *);
};

nv_closure *nv_closure_new(nv_closure_fn fn, void *payload, void (*destroy)(void *)) {
  if (!fn) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "closure_new: NULL function");
    return NULL;
  }
  nv_closure *f = nv__malloc(sizeof *f);
  if (!f) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "closure_new: out of memory");
    return NULL;
  }
  atomic_init(&f->refs, 1);
  f->fn = fn;
  f->payload = payload;
  f->destroy = destroy;
  return f;
}

nv_closure *nv_closure_retain(nv_closure *f) {
  if (f) atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
  return f;
}

void nv_closure_release(nv_closure *f) {
  if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1) return;
  if (f->destroy) f->destroy(f->payload);
  nv__free(f);
}

/* Runs the function inside a scope of its own, collecting its outputs in a fresh list so that
 * `outputs` changes only on success. */
static nv_status apply(const nv_closure *f, const nv_vec *inputs, nv_vec *outputs) {
  nv_vec *tmp = nv_vec_new();
  if (!tmp) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = nv_scope_begin();
  if (s != NV_OK) {
    nv_vec_free(tmp);
    return s;
  }
  s = f->fn(f->payload, inputs, tmp);
  nv_scope_end();
  for (size_t i = 0; s == NV_OK && i < nv_vec_size(tmp); i++)
    s = nv_vec_push(outputs, nv_vec_get(tmp, i));
  nv_vec_free(tmp);
  return s;
}

nv_status nv_closure_apply(const nv_closure *f, const nv_vec *inputs, nv_vec *outputs) {
  if (!f || !inputs || !outputs)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "closure_apply: NULL argument");
  size_t before = nv_vec_size(outputs);
  nv_status s = apply(f, inputs, outputs);
  /* A failure part-way through appending leaves the list as it was. */
  if (s != NV_OK && nv_vec_size(outputs) != before) {
    nv_vec *keep = nv_vec_new();
    for (size_t i = 0; keep && i < before; i++) nv_vec_push(keep, nv_vec_get(outputs, i));
    nv_vec_clear(outputs);
    for (size_t i = 0; keep && i < before; i++) nv_vec_push(outputs, nv_vec_get(keep, i));
    nv_vec_free(keep);
  }
  return s;
}

void *nv__closure_payload(const nv_closure *f, nv_closure_fn fn) {
  return f && f->fn == fn ? f->payload : NULL;
}

nv_status nv__closure_call(const nv_closure *f, nv_array *const *in, size_t n, nv_vec *out) {
  nv_vec *inputs = nv_vec_new();
  if (!inputs) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = NV_OK;
  for (size_t i = 0; s == NV_OK && i < n; i++) s = nv_vec_push(inputs, in[i]);
  if (s == NV_OK) {
    nv__scope_resume();
    s = nv_closure_apply(f, inputs, out);
    nv__scope_suspend();
  }
  nv_vec_free(inputs);
  return s;
}
