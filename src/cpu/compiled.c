/* The CPU kernel of COMPILED nodes (compile's fused element-wise chains,
 * src/transforms/fuse.c): the generated kernel over the output's elements,
 * split across the pool. Its inputs are read as the chain's generator laid them
 * out (whole row-contiguous arrays, broadcast rows or single elements), from
 * their element 0; the last input is the keeper holding the kernel. A shapeless chain's
 * kernel also takes the call's sizes (the node's parameters) as the pointer after its inputs. */
#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "transforms/compile_internal.h"

typedef struct job {
  nv__fused_fn fn;
  const void *const *in;
  void *const *out;
} job;

static void run(void *ctx, int64_t lo, int64_t hi) {
  const job *j = ctx;
  j->fn(lo, hi, j->in, j->out);
}

static nv_status k_compiled(nv__node *node, const nv__operand *in, int donated) {
  const nv__compiled_params *p = node->params;
  if (!p->k->fn) /* a GPU chain's kernel, declined by the CUDA backend */
    return nv__set_error(NV_ERR_BACKEND, "compiled: a fused GPU kernel cannot run on the CPU");
  nv__output *o = &node->out[0];
  void *outs[NV__COMPILED_MAX_OUT];
  for (int i = 0; i < node->noutputs; i++) {
    /* Output 0 may be a donated input's buffer (element-wise kernels only: each element is
     * read before it is written, nv__compiled_donates). */
    nv_status s = i == 0 && donated >= 0 ? NV_OK : nv__output_alloc(&node->out[i]);
    if (s != NV_OK)
      return s;
    outs[i] = nv__output_ptr(&node->out[i]);
  }
  if (o->size == 0)
    return NV_OK;
  const void *ptr_inl[17],
      **ptr = p->k->nin < 17 ? ptr_inl : nv__malloc(((size_t)p->k->nin + 1) * sizeof *ptr);
  if (!ptr)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "compiled: out of memory");
  for (int i = 0; i < p->k->nin; i++)
    ptr[i] =
        (const char *)in[i].buf->ptr + in[i].offset * (int64_t)nv_dtype_size(in[i].meta->dtype);
  ptr[p->k->nin] = p->k->dyn ? p->sz : NULL;
  job j = {p->k->fn, ptr, outs};
  /* A reduction's index is a row: its grain counts the rows' elements. */
  int64_t per = p->k->reduce ? (p->k->dyn ? p->sz[0] : p->k->cols) : 1;
  int64_t grain = per > 1 ? NV__PAR_GRAIN / per : NV__PAR_GRAIN;
  nv__parallel_for(o->size, grain > 0 ? grain : 1, run, &j);
  if (ptr != ptr_inl)
    nv__free(ptr);
  return NV_OK;
}

void nv__cpu_register_compiled(nv__kernel_fn *k) { k[NV__PRIM_COMPILED] = k_compiled; }
