/* The CPU backend: computes each node at once on the evaluating thread (its kernels split
 * large work over the pool), so commit and flush have nothing left to do. */
#include <stdio.h>

#include "core/backend.h"

static nv_status cpu_encode(nv__ectx *ctx, nv__node *node, const nv__operand *in, int donated) {
  (void)ctx;
  nv__cpu_register();
  nv__kernel_fn k = nv__cpu_kernels[node->prim];
  if (!k)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: no CPU kernel", nv__prims[node->prim].name);
  return k(node, in, donated);
}

static void cpu_commit(nv__ectx *ctx) { (void)ctx; }
static nv_status cpu_flush(nv__ectx *ctx) {
  (void)ctx;
  return NV_OK;
}

const nv__backend nv__cpu_backend = {"cpu", cpu_encode, cpu_commit, cpu_flush};

const nv__backend *nv__backend_for(nv_device device) {
  if (device.type == NV_DEVICE_CPU) return &nv__cpu_backend;
  return NULL;
}
