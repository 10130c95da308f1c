/* cuDNN's loading, per-device handles and error texts, shared by the families that call it
 * (conv_cudnn.c, fast_sdpa_cudnn.c); see cudnn_lib.h. The library is opened once, with
 * RTLD_LOCAL, and never closed; a machine without it runs every op with nuvec's own kernels. */
#include "cuda/cudnn_lib.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define DNN_MAX_DEVICES 64

nv__dnn_lib nv__dnn;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *lib;
static bool loaded;
static char why_not[320]; /* why the library is not loaded */
static char why_sym[160]; /* the last entry point found missing */
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

static void load(void) {
  lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why_not, sizeof why_not, "%s", e ? e : "libcudnn.so.9 could not be loaded");
    return;
  }
  const char *why = NULL;
  if (!nv__dnn_sym("cudnnGetVersion", &nv__dnn.cudnnGetVersion, &why) ||
      !nv__dnn_sym("cudnnGetErrorString", &nv__dnn.cudnnGetErrorString, &why) ||
      !nv__dnn_sym("cudnnCreate", &nv__dnn.cudnnCreate, &why) ||
      !nv__dnn_sym("cudnnSetStream", &nv__dnn.cudnnSetStream, &why)) {
    snprintf(why_not, sizeof why_not, "%s", why);
    return;
  }
  /* cuDNN 8 has no last-error text; its absence only shortens messages. */
  void *s = dlsym(lib, "cudnnGetLastErrorString");
  memcpy(&nv__dnn.cudnnGetLastErrorString, &s, sizeof s);
  size_t v = nv__dnn.cudnnGetVersion();
  if (v < 8000) {
    snprintf(why_not, sizeof why_not, "cuDNN %zu is older than 8.0", v);
    return;
  }
  loaded = true;
}

bool nv__dnn_load(const char **why) {
  pthread_once(&load_once, load);
  if (!loaded && why) *why = why_not;
  return loaded;
}

bool nv__dnn_sym(const char *name, void *slot, const char **why) {
  void *s = lib ? dlsym(lib, name) : NULL;
  if (!s) {
    pthread_mutex_lock(&sym_lock);
    snprintf(why_sym, sizeof why_sym, "the cuDNN library lacks %s", name);
    pthread_mutex_unlock(&sym_lock);
    if (why) *why = why_sym;
    return false;
  }
  memcpy(slot, &s, sizeof s);
  return true;
}

void nv__dnn_describe(const char *call, cudnnStatus_t s, char *buf, size_t cap) {
  char last[256] = "";
  if (nv__dnn.cudnnGetLastErrorString) nv__dnn.cudnnGetLastErrorString(last, sizeof last);
  const char *text = nv__dnn.cudnnGetErrorString ? nv__dnn.cudnnGetErrorString(s) : "";
  if (last[0])
    snprintf(buf, cap, "%s failed: %s (%s)", call, text, last);
  else
    snprintf(buf, cap, "%s failed: %s", call, text);
}

nv_status nv__dnn_error(const char *op, const char *call, cudnnStatus_t s) {
  char why[640];
  nv__dnn_describe(call, s, why, sizeof why);
  return nv__set_error(NV_ERR_BACKEND, "%s: %s", op, why);
}

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static nv__dnn_device devices[DNN_MAX_DEVICES];

nv_status nv__dnn_device_get(nv__gpu_ctx *ctx, const char *op, nv__dnn_device **out) {
  int device = nv__gpu_device_index(ctx);
  if (device < 0 || device >= DNN_MAX_DEVICES)
    return nv__set_error(NV_ERR_BACKEND, "%s: GPU %d is past the %d cuDNN supports here", op,
                         device, DNN_MAX_DEVICES);
  nv__dnn_device *d = &devices[device];
  nv_status st = NV_OK;
  pthread_mutex_lock(&devices_lock);
  if (!d->ready) {
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && prev != device) e = cudaSetDevice(device);
    cudnnStatus_t s;
    if (e != cudaSuccess) {
      st = nv__set_error(NV_ERR_BACKEND, "%s: cudaSetDevice failed: %s", op,
                         cudaGetErrorString(e));
    } else if ((s = nv__dnn.cudnnCreate(&d->handle)) != CUDNN_STATUS_SUCCESS) {
      st = nv__dnn_error(op, "cudnnCreate", s);
    } else {
      pthread_mutex_init(&d->lock, NULL);
      d->ready = true;
    }
    if (prev >= 0 && prev != device && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
  }
  pthread_mutex_unlock(&devices_lock);
  if (st == NV_OK) *out = d;
  return st;
}
