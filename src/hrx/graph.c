/* The graph builder: record-time validation of every operation and its declared accesses. */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hrx__callback_release(hrx__callback *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
  if (c->destroy) c->destroy(c->user);
  hrx__free(c->key);
  pthread_mutex_destroy(&c->lock);
  hrx__free(c);
}

static void op_arrays_free(hrx__op *op) {
  hrx__free(op->uses);
  if (op->one_block) return;
  hrx__free(op->views);
  hrx__free(op->constants);
  hrx__free(op->params);
}

void hrx__op_clear(hrx__op *op) {
  for (size_t i = 0; i < op->nuses; i++) hrx_buffer_release(op->uses[i].view.buffer);
  op_arrays_free(op);
  hrx_kernel_release(op->kernel);
  hrx__callback_release(op->callback);
  memset(op, 0, sizeof *op);
}

HRX_API hrx_status hrx_graph_create(hrx_runtime *runtime, hrx_graph **out) {
  if (!runtime || !out) return hrx__err(HRX_E_INVALID, "hrx_graph_create: runtime or out is NULL");
  hrx_status s = hrx__runtime_usable(runtime, "hrx_graph_create");
  if (s != HRX_OK) return s;
  hrx_graph *g = hrx__calloc(1, sizeof *g);
  if (!g) return hrx__err(HRX_E_OUT_OF_MEMORY, "hrx_graph_create: out of host memory");
  g->rt = hrx_runtime_retain(runtime);
  *out = g;
  return HRX_OK;
}

HRX_API void hrx_graph_release(hrx_graph *graph) {
  if (!graph) return;
  for (size_t i = 0; i < graph->count; i++) hrx__op_clear(&graph->ops[i]);
  hrx__free(graph->ops);
  hrx_runtime *rt = graph->rt;
  hrx__free(graph);
  hrx_runtime_release(rt);
}

HRX_API size_t hrx_graph_size(const hrx_graph *graph) { return graph ? graph->count : 0; }

hrx_status hrx__view_check(hrx_runtime *rt, const char *call, const char *what, hrx_view v) {
  if (!v.buffer) return hrx__err(HRX_E_INVALID, "%s: %s has no buffer", call, what);
  if (v.buffer->rt != rt)
    return hrx__err(HRX_E_INVALID, "%s: %s: buffer belongs to another runtime", call, what);
  if (v.length == 0) return hrx__err(HRX_E_INVALID, "%s: %s is empty", call, what);
  if (v.offset > v.buffer->size || v.length > v.buffer->size - v.offset)
    return hrx__err(HRX_E_INVALID,
                    "%s: %s [%zu, +%zu) is out of range of a %zu-byte buffer", call, what,
                    v.offset, v.length, v.buffer->size);
  return HRX_OK;
}

static hrx_status gpu_visible(const char *call, const char *what, hrx_view v) {
  if (v.buffer->memory == HRX_MEMORY_HOST_ONLY)
    return hrx__err(HRX_E_INVALID, "%s: %s is not GPU-visible (host-only memory)", call, what);
  return HRX_OK;
}

static hrx_status check_graph(hrx_graph *g, const char *call) {
  if (!g) return hrx__err(HRX_E_INVALID, "%s: graph is NULL", call);
  return hrx__runtime_usable(g->rt, call);
}

/* Appends op (taking over its arrays) and retains what it references. */
static hrx_status push(hrx_graph *g, const char *call, hrx__op *op, size_t *out_index) {
  if (g->count == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    hrx__op *ops = hrx__realloc(g->ops, cap * sizeof *ops);
    if (!ops) {
      op_arrays_free(op);
      return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    g->ops = ops;
    g->cap = cap;
  }
  for (size_t i = 0; i < op->nuses; i++) hrx_buffer_retain(op->uses[i].view.buffer);
  hrx_kernel_retain(op->kernel);
  if (op->callback) atomic_fetch_add(&op->callback->refs, 1);
  if (out_index) *out_index = g->count;
  g->ops[g->count++] = *op;
  return HRX_OK;
}

static hrx__use *uses_alloc(size_t n, const char *call, hrx_status *s) {
  hrx__use *u = hrx__calloc(n, sizeof *u);
  if (!u) *s = hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  return u;
}

HRX_API hrx_status hrx_graph_fill(hrx_graph *graph, hrx_view dst, uint8_t value,
                                  size_t *out_index) {
  const char *call = "hrx_graph_fill";
  hrx_status s = check_graph(graph, call);
  if (s == HRX_OK) s = hrx__view_check(graph->rt, call, "destination", dst);
  if (s == HRX_OK) s = gpu_visible(call, "destination", dst);
  if (s != HRX_OK) return s;
  hrx__op op = {.kind = HRX_OP_FILL, .lane = HRX_LANE_COMPUTE, .value = value, .dst = dst};
  op.uses = uses_alloc(1, call, &s);
  if (!op.uses) return s;
  op.nuses = 1;
  op.uses[0] = (hrx__use){dst, HRX_ACCESS_WRITE};
  return push(graph, call, &op, out_index);
}

static hrx_status copy_on(hrx_graph *graph, const char *call, hrx_view dst, hrx_view src,
                          hrx_lane lane, size_t *out_index) {
  hrx_status s = check_graph(graph, call);
  if (s == HRX_OK && lane != HRX_LANE_UPLOAD && lane != HRX_LANE_COMPUTE &&
      lane != HRX_LANE_DOWNLOAD)
    s = hrx__err(HRX_E_INVALID, "%s: unknown lane %d", call, (int)lane);
  if (s == HRX_OK) s = hrx__view_check(graph->rt, call, "destination", dst);
  if (s == HRX_OK) s = hrx__view_check(graph->rt, call, "source", src);
  if (s == HRX_OK) s = gpu_visible(call, "destination", dst);
  if (s == HRX_OK) s = gpu_visible(call, "source", src);
  if (s == HRX_OK && (dst.length != src.length || hrx_view_overlaps(dst, src)))
    s = hrx__err(HRX_E_INVALID,
                 "%s: copy needs equal, nonoverlapping ranges (destination %zu bytes at %zu, "
                 "source %zu bytes at %zu)",
                 call, dst.length, dst.offset, src.length, src.offset);
  if (s != HRX_OK) return s;
  hrx__op op = {.kind = HRX_OP_COPY, .lane = lane, .dst = dst, .src = src};
  op.uses = uses_alloc(2, call, &s);
  if (!op.uses) return s;
  op.nuses = 2;
  op.uses[0] = (hrx__use){dst, HRX_ACCESS_WRITE};
  op.uses[1] = (hrx__use){src, HRX_ACCESS_READ};
  return push(graph, call, &op, out_index);
}

HRX_API hrx_status hrx_graph_copy(hrx_graph *graph, hrx_view dst, hrx_view src,
                                  size_t *out_index) {
  hrx_lane lane = HRX_LANE_COMPUTE;
  if (dst.buffer && src.buffer) {
    bool src_host = src.buffer->memory == HRX_MEMORY_HOST_VISIBLE;
    bool dst_host = dst.buffer->memory == HRX_MEMORY_HOST_VISIBLE;
    bool src_dev = src.buffer->memory == HRX_MEMORY_DEVICE;
    bool dst_dev = dst.buffer->memory == HRX_MEMORY_DEVICE;
    if (src_host && dst_dev) lane = HRX_LANE_UPLOAD;
    else if (src_dev && dst_host) lane = HRX_LANE_DOWNLOAD;
  }
  return copy_on(graph, "hrx_graph_copy", dst, src, lane, out_index);
}

HRX_API hrx_status hrx_graph_copy_on(hrx_graph *graph, hrx_view dst, hrx_view src,
                                     hrx_lane lane, size_t *out_index) {
  return copy_on(graph, "hrx_graph_copy_on", dst, src, lane, out_index);
}

static hrx_status dispatch(hrx_graph *graph, const char *call, bool aliasing, hrx_kernel *kernel,
                           const hrx_view *views, size_t view_count,
                           const hrx_constant *constants, size_t constant_count,
                           const void *params, size_t params_size, size_t *out_index) {
  hrx_status s = check_graph(graph, call);
  if (s != HRX_OK) return s;
  if (!kernel) return hrx__err(HRX_E_INVALID, "%s: kernel is NULL", call);
  if (kernel->rt != graph->rt)
    return hrx__err(HRX_E_INVALID, "%s: kernel belongs to another runtime", call);
  if (params_size != kernel->params_size || (params_size && !params))
    return hrx__err(HRX_E_INVALID, "%s: the kernel takes a parameter block of %zu bytes, got %zu",
                    call, kernel->params_size, params ? params_size : 0);
  const hrx_kernel_contract *c = &kernel->contract;
  if (view_count != c->binding_count || (view_count && !views))
    return hrx__err(HRX_E_INVALID, "%s: the kernel's contract has %zu bindings, got %zu", call,
                    c->binding_count, view_count);
  for (size_t i = 0; i < view_count; i++) {
    const hrx_view *v = &views[i];
    if (!v->buffer || v->buffer->rt != graph->rt || v->length == 0 ||
        v->offset > v->buffer->size || v->length > v->buffer->size - v->offset ||
        v->buffer->memory == HRX_MEMORY_HOST_ONLY) {
      /* Named only on failure: formatting costs more than the checks. */
      char what[32];
      snprintf(what, sizeof what, "binding %zu", i);
      s = hrx__view_check(graph->rt, call, what, views[i]);
      if (s == HRX_OK) s = gpu_visible(call, what, views[i]);
      if (s != HRX_OK) return s;
    }
    if (views[i].length != c->bindings[i].extent)
      return hrx__err(HRX_E_INVALID, "%s: binding %zu is %zu bytes, the contract needs %zu",
                      call, i, views[i].length, c->bindings[i].extent);
    uint64_t address = views[i].buffer->alloc->gpu + views[i].offset;
    if (address % c->bindings[i].alignment != 0)
      return hrx__err(HRX_E_INVALID,
                      "%s: binding %zu: GPU allocation does not satisfy kernel alignment "
                      "(address 0x%llx is not a multiple of %u)",
                      call, i, (unsigned long long)address, c->bindings[i].alignment);
  }
  if (constants || constant_count) {
    if (constant_count != c->constant_count || (constant_count && !constants))
      return hrx__err(HRX_E_INVALID, "%s: the kernel's contract has %zu constants, got %zu", call,
                      c->constant_count, constant_count);
    for (size_t i = 0; i < constant_count; i++)
      if (constants[i].size != c->constants[i].size)
        return hrx__err(HRX_E_INVALID, "%s: constant %zu has size %u, the contract says %u", call,
                        i, constants[i].size, c->constants[i].size);
  } else {
    constants = c->constants;
    constant_count = c->constant_count;
  }
  if (!aliasing) {
    for (size_t i = 0; i < view_count; i++)
      for (size_t j = i + 1; j < view_count; j++)
        if (hrx_view_overlaps(views[i], views[j]) &&
            (hrx__writes(c->bindings[i].access) || hrx__writes(c->bindings[j].access)))
          return hrx__err(HRX_E_INVALID,
                          "%s: bindings %zu and %zu overlap and one is written (writable "
                          "aliasing needs hrx_graph_dispatch_aliasing)",
                          call, i, j);
  }
  /* One allocation for the operation's arrays (a recorded kernel is the hot path). */
  hrx__op op = {.kind = HRX_OP_DISPATCH, .lane = HRX_LANE_COMPUTE, .kernel = kernel,
                .one_block = true};
  size_t at_views = (view_count * sizeof *op.uses + 15) & ~(size_t)15;
  size_t at_consts = at_views + ((view_count * sizeof *op.views + 15) & ~(size_t)15);
  size_t at_params = at_consts + ((constant_count * sizeof *op.constants + 15) & ~(size_t)15);
  char *block = hrx__calloc(1, at_params + params_size);
  if (!block) return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  op.uses = (hrx__use *)block;
  op.views = (hrx_view *)(block + at_views);
  op.constants = (hrx_constant *)(block + at_consts);
  op.params = params_size ? block + at_params : NULL;
  if (params_size) memcpy(op.params, params, params_size);
  op.params_size = params_size;
  for (size_t i = 0; i < view_count; i++) {
    op.views[i] = views[i];
    op.uses[i] = (hrx__use){views[i], c->bindings[i].access};
  }
  if (constant_count) memcpy(op.constants, constants, constant_count * sizeof *constants);
  op.nuses = op.nviews = view_count;
  op.nconstants = constant_count;
  return push(graph, call, &op, out_index);
}

HRX_API hrx_status hrx_graph_dispatch(hrx_graph *graph, hrx_kernel *kernel,
                                      const hrx_view *views, size_t view_count,
                                      const hrx_constant *constants, size_t constant_count,
                                      size_t *out_index) {
  return dispatch(graph, "hrx_graph_dispatch", false, kernel, views, view_count, constants,
                  constant_count, NULL, 0, out_index);
}

HRX_API hrx_status hrx_graph_dispatch_ex(hrx_graph *graph, hrx_kernel *kernel,
                                         const hrx_view *views, size_t view_count,
                                         const hrx_constant *constants, size_t constant_count,
                                         const void *params, size_t params_size, uint32_t flags,
                                         size_t *out_index) {
  return dispatch(graph, "hrx_graph_dispatch_ex", (flags & HRX_DISPATCH_ALIASING) != 0, kernel,
                  views, view_count, constants, constant_count, params, params_size, out_index);
}

HRX_API hrx_status hrx_graph_dispatch_aliasing(hrx_graph *graph, hrx_kernel *kernel,
                                               const hrx_view *views, size_t view_count,
                                               const hrx_constant *constants,
                                               size_t constant_count, size_t *out_index) {
  return dispatch(graph, "hrx_graph_dispatch_aliasing", true, kernel, views, view_count,
                  constants, constant_count, NULL, 0, out_index);
}

/* Records a scoped callback, a host callback or a captured operation: all three run the
 * caller's function over declared bindings; only host callbacks see host addresses. */
static hrx_status callback_op(hrx_graph *graph, const char *call, hrx__op_kind kind,
                              const hrx_binding *bindings, size_t count, void *fn, void *user,
                              hrx_destroy_fn destroy, const void *key, size_t key_size,
                              size_t *out_index) {
  hrx_status s = check_graph(graph, call);
  if (s != HRX_OK) return s;
  if (!fn) return hrx__err(HRX_E_INVALID, "%s: callback is NULL", call);
  if (count && !bindings) return hrx__err(HRX_E_INVALID, "%s: bindings is NULL", call);
  char what[32];
  for (size_t i = 0; i < count; i++) {
    snprintf(what, sizeof what, "binding %zu", i);
    hrx_access a = bindings[i].access;
    if (a != HRX_ACCESS_READ && a != HRX_ACCESS_WRITE && a != HRX_ACCESS_READ_WRITE)
      return hrx__err(HRX_E_INVALID, "%s: %s has unknown access %d", call, what, (int)a);
    s = hrx__view_check(graph->rt, call, what, bindings[i].view);
    if (s != HRX_OK) return s;
    if (kind != HRX_OP_HOST) {
      s = gpu_visible(call, what, bindings[i].view);
      if (s != HRX_OK) return s;
    } else if (bindings[i].view.buffer->memory == HRX_MEMORY_DEVICE) {
      return hrx__err(HRX_E_INVALID, "%s: %s is not visible to the host (device-local memory)",
                      call, what);
    }
  }
  if (key_size && !key) return hrx__err(HRX_E_INVALID, "%s: key is NULL", call);
  hrx__callback *cb = hrx__calloc(1, sizeof *cb);
  hrx__op op = {.kind = kind, .lane = HRX_LANE_COMPUTE};
  op.uses = hrx__calloc(count, sizeof *op.uses);
  op.views = hrx__calloc(count, sizeof *op.views);
  if (cb && key_size) {
    cb->key = hrx__calloc(1, key_size);
    if (cb->key) {
      memcpy(cb->key, key, key_size);
      cb->key_size = key_size;
    }
  }
  if (!cb || !op.uses || !op.views || (key_size && !cb->key)) {
    if (cb) hrx__free(cb->key);
    hrx__free(cb);
    hrx__free(op.uses);
    hrx__free(op.views);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  atomic_init(&cb->refs, 0); /* push() takes the op's reference */
  pthread_mutex_init(&cb->lock, NULL);
  cb->scoped = kind == HRX_OP_SCOPED;
  if (kind == HRX_OP_SCOPED) cb->scoped_fn = (hrx_scoped_fn)fn;
  else if (kind == HRX_OP_HOST) cb->host_fn = (hrx_host_fn)fn;
  else cb->capture_fn = (hrx_capture_fn)fn;
  for (size_t i = 0; i < count; i++) {
    op.uses[i] = (hrx__use){bindings[i].view, bindings[i].access};
    op.views[i] = bindings[i].view;
  }
  op.nuses = op.nviews = count;
  op.callback = cb;
  s = push(graph, call, &op, out_index);
  if (s != HRX_OK) {
    pthread_mutex_destroy(&cb->lock);
    hrx__free(cb->key);
    hrx__free(cb);
    return s;
  }
  /* Ownership of user passes only once the operation is recorded. */
  cb->user = user;
  cb->destroy = destroy;
  return HRX_OK;
}

HRX_API hrx_status hrx_graph_scoped(hrx_graph *graph, const hrx_binding *bindings,
                                    size_t binding_count, hrx_scoped_fn fn, void *user,
                                    hrx_destroy_fn destroy, size_t *out_index) {
  return callback_op(graph, "hrx_graph_scoped", HRX_OP_SCOPED, bindings, binding_count,
                     (void *)fn, user, destroy, NULL, 0, out_index);
}

HRX_API hrx_status hrx_graph_captured_keyed(hrx_graph *graph, const hrx_binding *bindings,
                                            size_t binding_count, hrx_capture_fn fn, void *user,
                                            hrx_destroy_fn destroy, const void *key,
                                            size_t key_size, size_t *out_index) {
  const char *call = "hrx_graph_captured";
  hrx_status s = check_graph(graph, call);
  if (s != HRX_OK) return s;
  /* Capture is a CUDA mechanism; the host engine has no stream to hand the function. */
  if (!hrx__gpu_engine(graph->rt))
    return hrx__err(HRX_E_UNSUPPORTED,
                    "%s: captured operations need the CUDA engine (this runtime runs the host "
                    "engine)",
                    call);
  return callback_op(graph, call, HRX_OP_CAPTURED, bindings, binding_count, (void *)fn, user,
                     destroy, key, key_size, out_index);
}

HRX_API hrx_status hrx_graph_captured(hrx_graph *graph, const hrx_binding *bindings,
                                      size_t binding_count, hrx_capture_fn fn, void *user,
                                      hrx_destroy_fn destroy, size_t *out_index) {
  return hrx_graph_captured_keyed(graph, bindings, binding_count, fn, user, destroy, NULL, 0,
                                  out_index);
}

HRX_API hrx_status hrx_graph_host(hrx_graph *graph, const hrx_binding *bindings,
                                  size_t binding_count, hrx_host_fn fn, void *user,
                                  hrx_destroy_fn destroy, size_t *out_index) {
  return callback_op(graph, "hrx_graph_host", HRX_OP_HOST, bindings, binding_count, (void *)fn,
                     user, destroy, NULL, 0, out_index);
}
