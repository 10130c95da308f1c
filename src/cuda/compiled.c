/* The CUDA kernel of COMPILED nodes on GPU streams (compile's fused chains, src/transforms/fuse.c
 * generates their CUDA C) and the kernels' compiler: NVRTC through src/cuda/nvrtc.c (sm_90,
 * cached in memory and on disk). When NVRTC fails (or a CUBIN does not load) the process warns
 * once and fuses no more GPU chains: they run unfused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/nvrtc.h"
#include "transforms/compile_internal.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state; /* 0: NVRTC not tried, 1: works, -1: failed (warned once) */

/* Whether NVRTC compiles `source` (the reason and the first line of its log in `why` when
 * not). Needs no GPU: the test hook that compiles a CPU chain's CUDA form. */
bool nv__gpu_nvrtc_compiles(const char *source, char *why, size_t n) {
  size_t size = 0;
  char *log = NULL;
  char *cubin = nv__nvrtc_compile(source, false, &size, &log);
  if (!cubin && n) {
    snprintf(why, n, "%s", log ? log : "out of memory");
    why[strcspn(why, "\n")] = 0;
  }
  free(log);
  bool ok = cubin != NULL;
  free(cubin);
  return ok;
}

const void *nv__gpu_fused_kernel(const char *source) {
  pthread_mutex_lock(&lock);
  const void *out = NULL;
  if (state >= 0) {
    char *why = NULL;
    out = nv__nvrtc_kernel(source, "nv_fused_kernel", false, &why);
    if (out) {
      state = 1;
    } else {
      state = -1;
      /* The reason and the first line of NVRTC's log, which follows it on its own lines. */
      if (why) {
        char *nl = strchr(why, '\n');
        if (nl) {
          *nl = ' ';
          nl[strcspn(nl, "\n")] = 0;
        }
      }
      fprintf(stderr,
              "nuvec: compile: NVRTC could not build a fused GPU kernel (%s): compiled "
              "functions on the GPU run unfused\n",
              why ? why : "out of memory");
    }
    free(why);
  }
  pthread_mutex_unlock(&lock);
  return out;
}

/* The generated kernel over the output's elements (or rows), its parameters as generate_cuda
 * lays them out: the inputs' and outputs' views, then their element-0 offsets and the count,
 * then a shapeless chain's sizes (the node's parameters). */
static nv_status k_compiled(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                            int donated) {
  const nv__compiled_params *p = node->params;
  const nv__fused *k = p->k;
  if (!k->gpu)
    return NV__GPU_DECLINED; /* a CPU chain's kernel */
  int nin = k->nin, nout = node->noutputs;
  if (nin + nout > 64)
    return nv__set_error(NV_ERR_BACKEND, "compiled: %d views exceed a launch's 64", nin + nout);
  hrx_view views[64];
  hrx_access access[64];
  int nsz = k->dyn ? p->nsz : 0;
  if (nsz > 1 + 2 * 64)
    return nv__set_error(NV_ERR_BACKEND, "compiled: %d size words exceed a launch's", nsz);
  int64_t prm[64 + 1 + 1 + 2 * 64];
  for (int i = 0; i < nin; i++) {
    nv__gpu_arg a;
    nv_status s = nv__gpu_input(ctx, &in[i], &a);
    if (s != NV_OK)
      return s;
    views[i] = a.view;
    access[i] = HRX_ACCESS_READ;
    prm[i] = a.offset;
  }
  for (int x = 0; x < nout; x++) {
    nv__gpu_arg a;
    nv_status s = nv__gpu_output(ctx, &node->out[x], &a);
    if (s != NV_OK)
      return s;
    views[nin + x] = a.view;
    access[nin + x] = HRX_ACCESS_WRITE;
    prm[nin + x] = a.offset;
  }
  int64_t n = node->out[0].size; /* elements, or a reduction's rows */
  prm[nin + nout] = n;
  for (int j = 0; j < nsz; j++)
    prm[nin + nout + 1 + j] = p->sz[j];
  if (n == 0)
    return NV_OK;
  int64_t blocks;
  if (k->reduce) {
    int64_t per = 256 / k->group; /* rows per block */
    blocks = (n + per - 1) / per;
  } else {
    int64_t items = k->vec ? (n + k->lanes - 1) / k->lanes : n;
    blocks = (items + 255) / 256;
  }
  if (blocks > INT32_MAX)
    blocks = INT32_MAX; /* the kernels' loops stride over the grid */
  nv__gpu_launch l = {.func = k->gpu,
                      .grid = {(uint32_t)blocks, 1, 1},
                      .block = {256, 1, 1},
                      .views = views,
                      .access = access,
                      .nviews = nin + nout,
                      .params = prm,
                      .params_size = (size_t)(nin + nout + 1 + nsz) * sizeof *prm,
                      /* a donated input is output 0's buffer: each element is read by the
                       * thread that writes it, first (nv__compiled_donates) */
                      .aliasing = donated >= 0};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_compiled(nv__gpu_kernel_fn *k) { k[NV__PRIM_COMPILED] = k_compiled; }
