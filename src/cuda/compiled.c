/* The CUDA kernel of COMPILED nodes on GPU streams (compile's fused chains, src/transforms/fuse.c
 * generates their CUDA C) and the compiler behind it: NVRTC compiles a source for sm_90 (or
 * NUVEC_NVRTC_ARCH, a test hook: an invalid architecture makes every compile fail) into a
 * CUBIN, loaded with the runtime's cudaLibraryLoadData (the driver library is never linked).
 * Kernels are cached in memory by source and on disk as <hash>.cubin in the compile cache
 * directory (the hash covers the source, NVRTC's version and the architecture), written under a
 * unique name and renamed into place so that processes sharing the directory never read a
 * partial file. When NVRTC fails (or a CUBIN does not load) the process warns once and fuses no
 * more GPU chains: they run unfused. */
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "transforms/compile_internal.h"

typedef struct gkernel {
  struct gkernel *next;
  uint64_t hash;
  char *source;
  cudaKernel_t kernel; /* its library stays loaded for the process */
} gkernel;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gkernel *cache;
static int state; /* 0: NVRTC not tried, 1: works, -1: failed (warned once) */

static const char *arch(void) {
  const char *a = getenv("NUVEC_NVRTC_ARCH");
  return a && *a ? a : "sm_90";
}

/* Loads a CUBIN image; false (with the reason in `why`) when it does not load. */
static bool load(const void *image, cudaKernel_t *k, char *why, size_t n) {
  cudaLibrary_t lib;
  cudaError_t e = cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
  if (e == cudaSuccess) {
    e = cudaLibraryGetKernel(k, lib, "nv_fused_kernel");
    if (e != cudaSuccess)
      cudaLibraryUnload(lib);
  }
  if (e != cudaSuccess) {
    cudaGetLastError(); /* not sticky: later checks must not see it */
    snprintf(why, n, "loading its CUBIN: %s", cudaGetErrorString(e));
    return false;
  }
  return true;
}

/* The contents of file `path` (NULL when it cannot be read). */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *p = NULL;
  long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (size > 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)size)) != NULL &&
      fread(p, 1, (size_t)size, f) != (size_t)size) {
    free(p);
    p = NULL;
  }
  fclose(f);
  return p;
}

/* NVRTC's CUBIN of `source` (malloc'd, *size bytes), or NULL with the reason in `why`. */
static char *compile_source(const char *source, size_t *size, char *why, size_t n) {
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, "nv_fused.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    snprintf(why, n, "nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
    return NULL;
  }
  char opt[96];
  snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch());
  const char *opts[] = {opt, "--std=c++17"};
  char *cubin = NULL;
  r = nvrtcCompileProgram(prog, 2, opts);
  if (r != NVRTC_SUCCESS) {
    char log[256] = "";
    size_t ls = 0;
    if (nvrtcGetProgramLogSize(prog, &ls) == NVRTC_SUCCESS && ls > 1) {
      char *full = malloc(ls);
      if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS) {
        snprintf(log, sizeof log, "%s", full);
        log[strcspn(log, "\n")] = 0;
      }
      free(full);
    }
    snprintf(why, n, "nvrtcCompileProgram (%s): %s%s%s", opt, nvrtcGetErrorString(r),
             *log ? ": " : "", log);
  } else if ((r = nvrtcGetCUBINSize(prog, size)) != NVRTC_SUCCESS ||
             (cubin = malloc(*size ? *size : 1)) == NULL ||
             (r = nvrtcGetCUBIN(prog, cubin)) != NVRTC_SUCCESS) {
    free(cubin);
    cubin = NULL;
    snprintf(why, n, "nvrtcGetCUBIN: %s",
             r == NVRTC_SUCCESS ? "out of memory" : nvrtcGetErrorString(r));
  }
  nvrtcDestroyProgram(&prog);
  return cubin;
}

bool nv__gpu_nvrtc_compiles(const char *source, char *why, size_t n) {
  size_t size = 0;
  char *cubin = compile_source(source, &size, why, n);
  bool ok = cubin != NULL;
  free(cubin);
  return ok;
}

/* Writes `data` to `path` atomically (a unique temporary renamed into place); failures only
 * lose the disk copy. */
static void store(const char *dir, const char *path, uint64_t h, const void *data, size_t size) {
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s/%016llx.%ld.tmp", dir, (unsigned long long)h, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return;
  bool ok = fwrite(data, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0)
    unlink(tmp);
}

/* The kernel of `source` from the disk cache or NVRTC; false with the reason in `why`. */
static bool build(const char *source, uint64_t h, cudaKernel_t *k, char *why, size_t n) {
  char dir[512] = "", path[640] = "";
  bool disk = nv__compile_cache_dir(dir, sizeof dir);
  if (disk) {
    snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)h);
    char *image = read_file(path);
    /* A file that does not load (another toolkit's, damaged) is compiled again, replaced. */
    bool ok = image && load(image, k, why, n);
    free(image);
    if (ok)
      return true;
  }
  size_t size = 0;
  char *cubin = compile_source(source, &size, why, n);
  if (!cubin)
    return false;
  bool ok = load(cubin, k, why, n);
  if (ok && disk)
    store(dir, path, h, cubin, size);
  free(cubin);
  return ok;
}

const void *nv__gpu_fused_kernel(const char *source) {
  pthread_mutex_lock(&lock);
  const void *out = NULL;
  int major = 0, minor = 0;
  char why[512] = "";
  if (state >= 0 && nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    snprintf(why, sizeof why, "nvrtcVersion failed");
    state = -1;
  }
  if (state >= 0) {
    char key[128];
    snprintf(key, sizeof key, "nvrtc %d.%d %s", major, minor, arch());
    uint64_t h = nv__compile_hash(nv__compile_hash(0xcbf29ce484222325ull, source), key);
    for (gkernel *g = cache; g && !out; g = g->next)
      if (g->hash == h && !strcmp(g->source, source))
        out = (const void *)g->kernel;
    cudaKernel_t k = NULL;
    if (!out && build(source, h, &k, why, sizeof why)) {
      out = (const void *)k;
      state = 1;
      gkernel *g = malloc(sizeof *g);
      char *copy = g ? malloc(strlen(source) + 1) : NULL;
      if (copy) {
        strcpy(copy, source);
        *g = (gkernel){cache, h, copy, k};
        cache = g;
      } else {
        free(g); /* the kernel stays usable; only the cache misses it */
      }
    } else if (!out) {
      state = -1;
    }
  }
  if (state < 0 && *why)
    fprintf(stderr,
            "nuvec: compile: NVRTC could not build a fused GPU kernel (%s): compiled functions "
            "on the GPU run unfused\n",
            why);
  pthread_mutex_unlock(&lock);
  return out;
}

/* The generated kernel over the output's elements (or rows), its parameters as generate_cuda
 * lays them out: the inputs' and outputs' views, then their element-0 offsets and the count. */
static nv_status k_compiled(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                            int donated) {
  const nv__fused *k = ((const nv__compiled_params *)node->params)->k;
  if (!k->gpu)
    return NV__GPU_DECLINED; /* a CPU chain's kernel */
  int nin = k->nin, nout = node->noutputs;
  if (nin + nout > 64)
    return nv__set_error(NV_ERR_BACKEND, "compiled: %d views exceed a launch's 64", nin + nout);
  hrx_view views[64];
  hrx_access access[64];
  int64_t prm[65];
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
                      .params_size = (size_t)(nin + nout + 1) * sizeof *prm,
                      /* a donated input is output 0's buffer: each element is read by the
                       * thread that writes it, first (nv__compiled_donates) */
                      .aliasing = donated >= 0};
  return nv__gpu_dispatch(ctx, &l);
}

void nv__gpu_register_compiled(nv__gpu_kernel_fn *k) { k[NV__PRIM_COMPILED] = k_compiled; }
