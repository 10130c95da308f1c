/* Run-time compiled CUDA kernels: NVRTC, the memory and disk caches, library loading
 * (src/cuda/nvrtc.h). */
#include "cuda/nvrtc.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transforms/compile_internal.h"

/* A loaded kernel: of a source (`bytes` is the source text) or of an image. */
typedef struct gkernel {
  struct gkernel *next;
  uint64_t hash;
  bool image;
  char *bytes;
  size_t size;
  char *entry;
  cudaKernel_t kernel; /* its library stays loaded for the process */
} gkernel;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gkernel *cache;

static const char *arch(void) {
  const char *a = getenv("NUVEC_NVRTC_ARCH");
  return a && *a ? a : "sm_90";
}

/* A malloc'd formatted message (NULL when out of memory). */
__attribute__((format(printf, 1, 2))) static char *message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *m = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (m) {
    va_start(ap, fmt);
    vsnprintf(m, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  return m;
}

static bool has_headers(const char *dir) {
  char p[600];
  struct stat st;
  snprintf(p, sizeof p, "%s/cuda_fp16.h", dir);
  return stat(p, &st) == 0;
}

/* The toolkit's include directory for NVRTC (see nvrtc.h), written into `dir`; false when none
 * has the headers. */
static bool include_dir(char *dir, size_t n) {
  const char *env = getenv("NUVEC_CUDA_INCLUDE"), *home = getenv("CUDA_HOME");
  char h[560] = "";
  if (home && *home)
    snprintf(h, sizeof h, "%s/include", home);
  const char *cands[] = {env && *env ? env : NULL,
#ifdef NUVEC_CUDA_INCLUDE_DIR
                         NUVEC_CUDA_INCLUDE_DIR,
#endif
                         *h ? h : NULL, "/usr/local/cuda/include"};
  for (size_t i = 0; i < sizeof cands / sizeof *cands; i++)
    if (cands[i] && strlen(cands[i]) < n && has_headers(cands[i])) {
      snprintf(dir, n, "%s", cands[i]);
      return true;
    }
  return false;
}

char *nv__nvrtc_compile(const char *source, bool headers, size_t *size, char **log) {
  *log = NULL;
  char inc[520], opt_inc[540], opt_cccl[560];
  bool have_inc = headers && include_dir(inc, sizeof inc);
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, "nv_kernel.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    *log = message("nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
    return NULL;
  }
  char opt[96];
  snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch());
  const char *opts[4] = {opt, "--std=c++17"};
  int nopts = 2;
  if (have_inc) {
    /* cooperative_groups.h reaches libcu++ (cuda/std/...), which CUDA 13 keeps under cccl/. */
    snprintf(opt_inc, sizeof opt_inc, "-I%s", inc);
    snprintf(opt_cccl, sizeof opt_cccl, "-I%s/cccl", inc);
    opts[nopts++] = opt_inc;
    opts[nopts++] = opt_cccl;
  }
  char *cubin = NULL;
  r = nvrtcCompileProgram(prog, nopts, opts);
  if (r != NVRTC_SUCCESS) {
    size_t ls = 0;
    char *full = NULL;
    if (nvrtcGetProgramLogSize(prog, &ls) == NVRTC_SUCCESS && ls > 1 && (full = malloc(ls)) &&
        nvrtcGetProgramLog(prog, full) != NVRTC_SUCCESS)
      full[0] = 0;
    *log = message("nvrtcCompileProgram (%s): %s%s%s%s", opt, nvrtcGetErrorString(r),
                   headers && !have_inc
                       ? " (no CUDA include directory with cuda_fp16.h was found: set "
                         "NUVEC_CUDA_INCLUDE)"
                       : "",
                   full && *full ? ":\n" : "", full ? full : "");
    free(full);
  } else if ((r = nvrtcGetCUBINSize(prog, size)) != NVRTC_SUCCESS ||
             (cubin = malloc(*size ? *size : 1)) == NULL ||
             (r = nvrtcGetCUBIN(prog, cubin)) != NVRTC_SUCCESS) {
    free(cubin);
    cubin = NULL;
    *log = message("nvrtcGetCUBIN: %s",
                   r == NVRTC_SUCCESS ? "out of memory" : nvrtcGetErrorString(r));
  }
  nvrtcDestroyProgram(&prog);
  return cubin;
}

/* Loads an image (CUBIN, or NUL-terminated PTX) and finds `entry`; false with *why. */
static bool load(const void *image, const char *entry, cudaKernel_t *k, char **why) {
  cudaLibrary_t lib;
  cudaError_t e = cudaLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
  bool loaded = e == cudaSuccess;
  if (loaded) {
    e = cudaLibraryGetKernel(k, lib, entry);
    if (e != cudaSuccess)
      cudaLibraryUnload(lib);
  }
  if (e != cudaSuccess) {
    cudaGetLastError(); /* not sticky: later checks must not see it */
    /* Images load lazily: a damaged one can load and fail only when its kernel is looked up,
     * so the lookup's error decides which of the two it was. */
    bool bad_image = e == cudaErrorInvalidKernelImage || e == cudaErrorInvalidPtx ||
                     e == cudaErrorNoKernelImageForDevice || e == cudaErrorUnsupportedPtxVersion ||
                     e == cudaErrorInvalidSource || e == cudaErrorJitCompilerNotFound;
    bool missing = loaded && !bad_image;
    *why = missing ? message("the image has no kernel named '%s' (cudaLibraryGetKernel: %s)",
                             entry, cudaGetErrorString(e))
                   : message("loading the kernel image: %s", cudaGetErrorString(e));
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

/* The kernel of `source` from the disk cache or NVRTC; false with *why. */
static bool build(const char *source, const char *entry, bool headers, uint64_t h,
                  cudaKernel_t *k, char **why) {
  char dir[512] = "", path[640] = "";
  bool disk = nv__compile_cache_dir(dir, sizeof dir);
  if (disk) {
    snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)h);
    char *image = read_file(path);
    /* A file that does not load (another toolkit's, damaged) is compiled again, replaced. */
    bool ok = image && load(image, entry, k, why);
    free(image);
    free(*why);
    *why = NULL;
    if (ok)
      return true;
  }
  size_t size = 0;
  char *cubin = nv__nvrtc_compile(source, headers, &size, why);
  if (!cubin)
    return false;
  bool ok = load(cubin, entry, k, why);
  if (ok && disk)
    store(dir, path, h, cubin, size);
  free(cubin);
  return ok;
}

/* The cached kernel for these bytes and entry, or NULL (under the lock). */
static const void *find(uint64_t h, bool image, const void *bytes, size_t size,
                        const char *entry) {
  for (gkernel *g = cache; g; g = g->next)
    if (g->hash == h && g->image == image && g->size == size && !memcmp(g->bytes, bytes, size) &&
        !strcmp(g->entry, entry))
      return (const void *)g->kernel;
  return NULL;
}

/* Remembers a loaded kernel (under the lock); out of memory only loses the cache entry. */
static void remember(uint64_t h, bool image, const void *bytes, size_t size, const char *entry,
                     cudaKernel_t k) {
  gkernel *g = malloc(sizeof *g);
  char *copy = g ? malloc(size + 1) : NULL;
  char *ecopy = copy ? malloc(strlen(entry) + 1) : NULL;
  if (!ecopy) {
    free(g);
    free(copy);
    return;
  }
  memcpy(copy, bytes, size);
  copy[size] = 0;
  strcpy(ecopy, entry);
  *g = (gkernel){cache, h, image, copy, size, ecopy, k};
  cache = g;
}

const void *nv__nvrtc_kernel(const char *source, const char *entry, bool headers, char **why) {
  *why = NULL;
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    *why = message("nvrtcVersion failed");
    return NULL;
  }
  char key[160];
  snprintf(key, sizeof key, "nvrtc %d.%d %s %s%s", major, minor, arch(), entry,
           headers ? " headers" : "");
  uint64_t h = nv__compile_hash(nv__compile_hash(0xcbf29ce484222325ull, source), key);
  size_t len = strlen(source);
  pthread_mutex_lock(&lock);
  const void *out = find(h, false, source, len, entry);
  cudaKernel_t k = NULL;
  if (!out && build(source, entry, headers, h, &k, why)) {
    out = (const void *)k;
    remember(h, false, source, len, entry, k);
  }
  pthread_mutex_unlock(&lock);
  return out;
}

const void *nv__gpu_image_kernel(const void *image, size_t size, const char *entry, char **why) {
  *why = NULL;
  /* FNV-1a over the bytes (the image may hold NULs: nv__compile_hash takes strings). */
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++)
    h = (h ^ ((const unsigned char *)image)[i]) * 0x100000001b3ull;
  pthread_mutex_lock(&lock);
  const void *out = find(h, true, image, size, entry);
  if (!out) {
    /* A PTX image must end in a NUL for the loader; a copy with one appended serves both. */
    char *copy = malloc(size + 1);
    cudaKernel_t k = NULL;
    if (!copy) {
      *why = message("out of memory");
    } else {
      memcpy(copy, image, size);
      copy[size] = 0;
      if (load(copy, entry, &k, why)) {
        out = (const void *)k;
        remember(h, true, image, size, entry, k);
      }
      free(copy);
    }
  }
  pthread_mutex_unlock(&lock);
  return out;
}
