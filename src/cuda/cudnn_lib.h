/* cuDNN as the CUDA backend's families use it (cudnn_lib.c): the library loaded at run time with
 * dlopen (nuvec never links it), its common entry points, one handle per device with the lock
 * its users take around the handle's stream and work, and cuDNN's failures as nuvec errors.
 * Each family resolves the further entry points it needs with nv__dnn_sym and keeps its own
 * switch (NUVEC_CUDNN for convolutions, NUVEC_CUDNN_SDPA for attention). */
#ifndef NUVEC_CUDA_CUDNN_LIB_H
#define NUVEC_CUDA_CUDNN_LIB_H

#include <cudnn.h>
#include <pthread.h>

#include "cuda/gpu.h"

#define NV__DNN_FN(name) __typeof__(&name) name
/* The entry points every user needs (valid once nv__dnn_load returned true). The last error's
 * text (cuDNN 9) may be missing from an older library: then it is NULL. */
typedef struct nv__dnn_lib {
  NV__DNN_FN(cudnnGetVersion);
  NV__DNN_FN(cudnnGetErrorString);
  NV__DNN_FN(cudnnGetLastErrorString);
  NV__DNN_FN(cudnnCreate);
  NV__DNN_FN(cudnnSetStream);
} nv__dnn_lib;
extern nv__dnn_lib nv__dnn;

/* Loads libcudnn.so.9 (else libcudnn.so) once per process: true when it and the common entry
 * points are there and its version is 8.0 or newer; false otherwise, *why (static text) saying
 * why. Thread-safe. */
bool nv__dnn_load(const char **why);

/* Resolves entry point `name` of the loaded library into *slot (a function pointer's storage):
 * false, *why (static text) naming it, when the library lacks it. */
bool nv__dnn_sym(const char *name, void *slot, const char **why);

/* One device's handle, created on first use. The handle is not thread-safe: every use (its
 * stream, work on it, queries that take it) holds `lock`. */
typedef struct nv__dnn_device {
  bool ready;
  cudnnHandle_t handle;
  pthread_mutex_t lock;
} nv__dnn_device;

/* The handle of the recording's device; fails (naming `op`) when cuDNN cannot create one. */
nv_status nv__dnn_device_get(nv__gpu_ctx *ctx, const char *op, nv__dnn_device **out);

/* Writes "<call> failed: <status text> (<cuDNN's last error text>)" into buf (cap bytes), the
 * last error's text where the library gives one: read it on the thread that made the call. */
void nv__dnn_describe(const char *call, cudnnStatus_t s, char *buf, size_t cap);

/* NV_ERR_BACKEND with "<op>: " and nv__dnn_describe's text as the thread's message. */
nv_status nv__dnn_error(const char *op, const char *call, cudnnStatus_t s);

#endif
