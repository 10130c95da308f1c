/* nuvec — memory statistics and limits, as MLX's memory functions.
 *
 * The counters cover array data buffers, per device: the CPU's host memory and each GPU's
 * device memory. The functions without a device speak of the default device (as MLX's).
 * Freed buffers go to a size-class cache that later allocations reuse; the cache is emptied by
 * nv_clear_cache or when an allocation would pass the memory limit. All functions are
 * thread-safe. */
#ifndef NUVEC_MEMORY_H
#define NUVEC_MEMORY_H

#include "nuvec/base.h"
#include "nuvec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes held by live array buffers (not counting the cache). */
NV_API size_t nv_get_active_memory(void);

/* The largest value nv_get_active_memory has had since start or since nv_reset_peak_memory
 * (counted from the first allocation after the reset). */
NV_API size_t nv_get_peak_memory(void);

/* Resets the peak to 0, as MLX's reset_peak_memory: nv_get_peak_memory reads 0 until the
 * next allocation, which sets it to the active memory then (buffers alive before the reset
 * included), and it grows from there. */
NV_API void nv_reset_peak_memory(void);

/* Bytes held in the cache of freed buffers. */
NV_API size_t nv_get_cache_memory(void);

/* Sets the hard memory limit (active + cache) and returns the previous one. An allocation that
 * would pass it first empties the cache, then fails with NV_ERR_OUT_OF_MEMORY. 0 restores the
 * default, the machine's physical memory. */
NV_API size_t nv_set_memory_limit(size_t limit);

/* The current memory limit in bytes. */
NV_API size_t nv_get_memory_limit(void);

/* Sets the largest size of the cache and returns the previous one (trimming it at once). */
NV_API size_t nv_set_cache_limit(size_t limit);

/* Frees every cached buffer (of every device). */
NV_API void nv_clear_cache(void);

/* The same statistics and limits for one device (a GPU's limit defaults to its memory; a GPU
 * that is not available reports 0 and ignores a new limit). */
NV_API size_t nv_get_device_active_memory(nv_device device);
NV_API size_t nv_get_device_peak_memory(nv_device device);
NV_API void nv_reset_device_peak_memory(nv_device device);
NV_API size_t nv_get_device_cache_memory(nv_device device);
NV_API size_t nv_set_device_memory_limit(nv_device device, size_t limit);
NV_API size_t nv_get_device_memory_limit(nv_device device);

/* With NUVEC_DEBUG_GUARDS=1 in the environment, every data buffer is surrounded by guard bytes
 * that are checked when it is freed (a debugging aid for kernels; buffers are then not cached).
 * Returns how many freed buffers had damaged guards so far (0 when guards are off). */
NV_API size_t nv_get_guard_violations(void);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_MEMORY_H */
