/* Devices and streams (DESIGN §6): process-wide defaults with a per-thread override. */
#include <pthread.h>
#include <stdio.h>

#include "core/internal.h"

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
/* The default device packed as type << 32 | index: read on every op, without a lock. */
static _Atomic uint64_t default_device = (uint64_t)NV_DEVICE_CPU << 32;
static atomic_int next_stream = 1;

/* Default streams: the CPU's is index 0 until nv_set_default_stream; each GPU's is created on
 * first use. */
#define MAX_GPUS 64
static atomic_int cpu_default_stream; /* read on every op: no lock */
static int gpu_default_stream[MAX_GPUS];

static _Thread_local nv_stream stream_stack[64];
static _Thread_local int stream_depth;

nv_device nv_cpu(void) { return (nv_device){NV_DEVICE_CPU, 0}; }
nv_device nv_gpu(int index) { return (nv_device){NV_DEVICE_GPU, index}; }

bool nv_device_is_available(nv_device d) {
  /* The CUDA backend registers itself here when it exists; until then only the CPU runs. */
  return d.type == NV_DEVICE_CPU;
}

void nv_device_name(nv_device d, char *buf, size_t size) {
  if (!buf || !size) return;
  if (d.type == NV_DEVICE_CPU) snprintf(buf, size, "cpu");
  else snprintf(buf, size, "gpu:%d", d.index);
}

nv_device nv_default_device(void) {
  if (stream_depth) return stream_stack[stream_depth - 1].device;
  uint64_t v = atomic_load(&default_device);
  return (nv_device){(nv_device_type)(v >> 32), (int)(uint32_t)v};
}

nv_status nv_set_default_device(nv_device d) {
  if (d.index < 0 || (d.type != NV_DEVICE_CPU && d.type != NV_DEVICE_GPU))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "set_default_device: invalid device");
  atomic_store(&default_device, (uint64_t)d.type << 32 | (uint32_t)d.index);
  return NV_OK;
}

nv_stream nv_default_stream(nv_device d) {
  if (d.type == NV_DEVICE_CPU) return (nv_stream){atomic_load(&cpu_default_stream), d};
  if (d.index < 0 || d.index >= MAX_GPUS) return (nv_stream){-1, d};
  pthread_mutex_lock(&dev_lock);
  if (!gpu_default_stream[d.index]) gpu_default_stream[d.index] = atomic_fetch_add(&next_stream, 1);
  int idx = gpu_default_stream[d.index];
  pthread_mutex_unlock(&dev_lock);
  return (nv_stream){idx, d};
}

nv_status nv_set_default_stream(nv_stream s) {
  bool cpu = s.device.type == NV_DEVICE_CPU;
  if (s.index < 0 || (!cpu && s.device.type != NV_DEVICE_GPU) || (cpu && s.device.index != 0) ||
      (!cpu && (s.device.index < 0 || s.device.index >= MAX_GPUS)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "set_default_stream: invalid stream (index %d on device type %d:%d)",
                         s.index, (int)s.device.type, s.device.index);
  if (cpu) {
    atomic_store(&cpu_default_stream, s.index);
    return NV_OK;
  }
  pthread_mutex_lock(&dev_lock);
  gpu_default_stream[s.device.index] = s.index;
  pthread_mutex_unlock(&dev_lock);
  return NV_OK;
}

nv_stream nv_new_stream(nv_device d) {
  return (nv_stream){atomic_fetch_add(&next_stream, 1), d};
}

nv_stream nv_current_stream(void) {
  if (stream_depth) return stream_stack[stream_depth - 1];
  return nv_default_stream(nv_default_device());
}

nv_status nv_stream_enter(nv_stream s) {
  if (stream_depth >= 64)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "stream_enter: nested deeper than 64");
  stream_stack[stream_depth++] = s;
  return NV_OK;
}

void nv_stream_exit(void) {
  if (stream_depth) stream_depth--;
}

nv_status nv_stream_synchronize(nv_stream s) {
  if (s.device.type != NV_DEVICE_CPU && !nv_device_is_available(s.device)) {
    char name[32];
    nv_device_name(s.device, name, sizeof name);
    return nv__set_error(NV_ERR_UNSUPPORTED, "synchronize: device %s has no backend", name);
  }
  return NV_OK;
}
