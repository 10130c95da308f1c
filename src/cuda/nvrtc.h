/* Run-time compiled CUDA kernels (src/cuda/nvrtc.c), shared by compile's fused GPU chains
 * (src/cuda/compiled.c) and the custom kernels of nuvec.fast (src/ops/fast_custom.c): NVRTC
 * compiles a source for sm_90 (or NUVEC_NVRTC_ARCH, a test hook) into a CUBIN, loaded with the
 * runtime's cudaLibraryLoadData (the driver library is never linked). Kernels are cached in
 * memory (by source, or by image bytes for precompiled images) and compiled CUBINs on disk as
 * <hash>.cubin in the compile cache directory (the hash covers the source, the entry, NVRTC's
 * version and the architecture), written under a unique name and renamed into place so that
 * processes sharing the directory never read a partial file. Loaded libraries stay loaded for
 * the process. Thread-safe. */
#ifndef NUVEC_CUDA_NVRTC_H
#define NUVEC_CUDA_NVRTC_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NVRTC's CUBIN of `source` (malloc'd, *size bytes), or NULL with the reason in *log: NVRTC's
 * error and its whole compile log (malloc'd; NULL only when out of memory). `headers` puts the
 * CUDA toolkit's include directories on the search path (cuda_fp16.h, cooperative_groups.h:
 * NUVEC_CUDA_INCLUDE, else the build's toolkit, else $CUDA_HOME/include, else
 * /usr/local/cuda/include). Needs no GPU. */
char *nv__nvrtc_compile(const char *source, bool headers, size_t *size, char **log);

/* The kernel `entry` (an extern "C" name) of `source`, from the memory cache, the disk cache
 * or NVRTC, loaded: a cudaKernel_t, which the runtime (and nv__gpu_dispatch) takes where it
 * takes a kernel's host address. NULL with the reason in *why (malloc'd, as for
 * nv__nvrtc_compile; a load failure names cudaLibraryLoadData's error). */
const void *nv__nvrtc_kernel(const char *source, const char *entry, bool headers, char **why);

/* The kernel `entry` of a CUBIN or PTX image of `size` bytes (PTX: text, NUL-terminated or
 * not), loaded once per distinct image and entry. NULL with the reason in *why. */
const void *nv__gpu_image_kernel(const void *image, size_t size, const char *entry, char **why);

#ifdef __cplusplus
}
#endif

#endif
