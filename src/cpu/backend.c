/* The CPU backend: computes each node at once on the evaluating thread (its kernels split
 * large work over the pool), so commit and flush have nothing left to do. */
#include <stdio.h>

#include "core/backend.h"

static _Thread_local nv__ectx *encoding;

nv__ectx *nv__cpu_encoding_ctx(void) { return encoding; }

static nv_status cpu_encode(nv__ectx *ctx, nv__node *node, const nv__operand *in, int donated) {
  nv__cpu_register();
  nv__kernel_fn k = nv__cpu_kernels[node->prim];
  if (!k)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: no CPU kernel", nv__prims[node->prim].name);
  /* Inputs written by a GPU: this evaluation's open GPU work is submitted first, then each is
   * read back once (its host copy stays cached with the buffer). */
  bool committed = false;
  for (int i = 0; i < node->ninputs; i++) {
    if (!in[i].buf || !atomic_load_explicit(&in[i].buf->dev, memory_order_acquire)) continue;
    if (!committed && ctx) {
      nv__ectx_commit(ctx);
      committed = true;
    }
    nv_status s = nv__buffer_host(in[i].buf);
    if (s != NV_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", nv_last_error());
      return nv__set_error(s, "%s: reading an input back from the GPU: %s",
                           nv__prims[node->prim].name, why);
    }
  }
  /* A donated buffer is input `donated`'s, read back above; written here, its device copy
   * goes stale. */
  nv__buffer *dbuf = donated >= 0 ? node->out[0].buf : NULL;
  nv__ectx *outer = encoding;
  encoding = ctx;
  nv_status s = k(node, in, donated);
  encoding = outer;
  if (dbuf) nv__buffer_host_written(dbuf);
  return s;
}

static void cpu_commit(nv__ectx *ctx) { (void)ctx; }
static nv_status cpu_flush(nv__ectx *ctx) {
  (void)ctx;
  return NV_OK;
}

const nv__backend nv__cpu_backend = {"cpu", cpu_encode, cpu_commit, cpu_flush, NULL};

const nv__backend *nv__backend_for(nv_device device) {
  if (device.type == NV_DEVICE_CPU) return &nv__cpu_backend;
#ifdef NUVEC_HAVE_CUDA
  if (device.type == NV_DEVICE_GPU) return nv__gpu_backend_for(device.index);
#endif
  return NULL;
}
