/* nuvec — devices, streams and the CPU thread pool. */
#ifndef NUVEC_DEVICE_H
#define NUVEC_DEVICE_H

#include "nuvec/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nv_device_type {
  NV_DEVICE_CPU = 0,
  NV_DEVICE_GPU = 1,
} nv_device_type;

/* A device: its type and index ("cpu", "gpu:0"). A plain value. */
typedef struct nv_device {
  nv_device_type type;
  int index;
} nv_device;

/* A stream: an ordered queue of work on one device. A plain value; `index` is unique within
 * the process. */
typedef struct nv_stream {
  int index;
  nv_device device;
} nv_stream;

/* The CPU device. */
NV_API nv_device nv_cpu(void);

/* The GPU device with the given index. Naming it never fails, also without a GPU; computing on
 * it fails with NV_ERR_UNSUPPORTED when no backend serves it. */
NV_API nv_device nv_gpu(int index);

/* Whether a backend can run work on `device` in this process and build. */
NV_API bool nv_device_is_available(nv_device device);

/* Writes the device's name ("cpu", "gpu:0") into `buf` (NUL-terminated, truncated to `size`).
 * A NULL `buf` or a `size` of 0 writes nothing. */
NV_API void nv_device_name(nv_device device, char *buf, size_t size);

/* The default device: the calling thread's override if one is set, else the process-wide one
 * (initially the CPU). Thread-safe. */
NV_API nv_device nv_default_device(void);

/* Sets the process-wide default device, as MLX's set_default_device. Thread-safe. Fails with
 * NV_ERR_INVALID_ARGUMENT for a negative index. */
NV_API nv_status nv_set_default_device(nv_device device);

/* The default stream of `device` (process-wide, created on first use). Thread-safe. */
NV_API nv_stream nv_default_stream(nv_device device);

/* Makes `stream` the default stream of its device (as MLX's set_default_stream; the default
 * device is unchanged). NV_ERR_INVALID_ARGUMENT for a negative index or an invalid device.
 * Thread-safe. */
NV_API nv_status nv_set_default_stream(nv_stream stream);

/* A new stream on `device`. Thread-safe. */
NV_API nv_stream nv_new_stream(nv_device device);

/* The stream new ops record: the calling thread's innermost nv_stream_enter, else the default
 * stream of the default device. */
NV_API nv_stream nv_current_stream(void);

/* Makes `stream` the calling thread's stream for new ops until the matching nv_stream_exit
 * (nestable, as MLX's `with mx.stream(s)`). Fails with NV_ERR_INVALID_ARGUMENT when nested
 * deeper than 64. */
NV_API nv_status nv_stream_enter(nv_stream stream);

/* Ends the innermost nv_stream_enter of the calling thread; does nothing if there is none. */
NV_API void nv_stream_exit(void);

/* Waits until all work submitted on `stream` has finished. CPU work runs on the evaluating
 * thread, so for CPU streams this returns at once. */
NV_API nv_status nv_stream_synchronize(nv_stream stream);

/* Threads the CPU kernels use (from NUVEC_NUM_THREADS, else the machine's cores). Matrix
 * products run on these too: OpenBLAS is kept single-threaded and each large product is cut
 * into slices over the pool. */
NV_API int nv_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_DEVICE_H */
