/* Kernels: a contract, fixed launch dimensions, and a body (host function or CUDA image). */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HRX_HAVE_CUDA
#include <nvrtc.h>
#endif

static hrx_status check_contract(const char *call, const hrx_kernel_contract *c,
                                 const uint32_t grid[3], const uint32_t block[3]) {
  if (!c) return hrx__err(HRX_E_INVALID, "%s: contract is NULL", call);
  if (c->binding_count && !c->bindings)
    return hrx__err(HRX_E_INVALID, "%s: contract has %zu bindings but no array", call,
                    c->binding_count);
  if (c->constant_count && !c->constants)
    return hrx__err(HRX_E_INVALID, "%s: contract has %zu constants but no array", call,
                    c->constant_count);
  if (c->binding_count > 64 || c->constant_count > 64)
    return hrx__err(HRX_E_INVALID, "%s: at most 64 bindings and 64 constants", call);
  for (size_t i = 0; i < c->binding_count; i++) {
    const hrx_binding_contract *b = &c->bindings[i];
    if (b->access != HRX_ACCESS_READ && b->access != HRX_ACCESS_WRITE &&
        b->access != HRX_ACCESS_READ_WRITE)
      return hrx__err(HRX_E_INVALID, "%s: binding %zu has unknown access %d", call, i,
                      (int)b->access);
    if (b->alignment == 0 || (b->alignment & (b->alignment - 1)) != 0)
      return hrx__err(HRX_E_INVALID, "%s: binding %zu alignment %u is not a power of two", call,
                      i, b->alignment);
    if (b->extent == 0) return hrx__err(HRX_E_INVALID, "%s: binding %zu extent is zero", call, i);
  }
  for (size_t i = 0; i < c->constant_count; i++)
    if (c->constants[i].size != 4 && c->constants[i].size != 8)
      return hrx__err(HRX_E_INVALID, "%s: constant %zu has size %u (must be 4 or 8)", call, i,
                      c->constants[i].size);
  if (!grid || !block) return hrx__err(HRX_E_INVALID, "%s: grid or block is NULL", call);
  for (int d = 0; d < 3; d++)
    if (grid[d] == 0 || block[d] == 0)
      return hrx__err(HRX_E_INVALID, "%s: grid and block dimensions must be nonzero", call);
  if ((uint64_t)block[0] * block[1] * block[2] > 1024)
    return hrx__err(HRX_E_INVALID, "%s: block of %u x %u x %u exceeds 1024 threads", call,
                    block[0], block[1], block[2]);
  return HRX_OK;
}

static hrx_status kernel_new(hrx_runtime *rt, const char *call, const hrx_kernel_contract *c,
                             const uint32_t grid[3], const uint32_t block[3], hrx_kernel **out) {
  hrx_kernel *k = hrx__calloc(1, sizeof *k);
  hrx_binding_contract *b = hrx__calloc(c->binding_count, sizeof *b);
  hrx_constant *k_c = hrx__calloc(c->constant_count, sizeof *k_c);
  if (!k || !b || !k_c) {
    hrx__free(k);
    hrx__free(b);
    hrx__free(k_c);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  if (c->binding_count) memcpy(b, c->bindings, c->binding_count * sizeof *b);
  if (c->constant_count) memcpy(k_c, c->constants, c->constant_count * sizeof *k_c);
  atomic_init(&k->refs, 1);
  k->bindings = b;
  k->constants = k_c;
  k->contract.bindings = b;
  k->contract.binding_count = c->binding_count;
  k->contract.constants = k_c;
  k->contract.constant_count = c->constant_count;
  memcpy(k->grid, grid, sizeof k->grid);
  memcpy(k->block, block, sizeof k->block);
  k->rt = hrx_runtime_retain(rt);
  *out = k;
  return HRX_OK;
}

HRX_API hrx_status hrx_kernel_create_host(hrx_runtime *runtime,
                                          const hrx_kernel_contract *contract,
                                          const uint32_t grid[3], const uint32_t block[3],
                                          hrx_host_kernel_fn fn, void *user, hrx_kernel **out) {
  const char *call = "hrx_kernel_create_host";
  if (!runtime || !fn || !out)
    return hrx__err(HRX_E_INVALID, "%s: runtime, fn or out is NULL", call);
  if (runtime->options.engine != HRX_ENGINE_HOST)
    return hrx__err(HRX_E_INVALID, "%s: host kernels need a host-engine runtime", call);
  hrx_status s = check_contract(call, contract, grid, block);
  if (s == HRX_OK) s = hrx__runtime_usable(runtime, call);
  hrx_kernel *k = NULL;
  if (s == HRX_OK) s = kernel_new(runtime, call, contract, grid, block, &k);
  if (s != HRX_OK) return s;
  k->host_fn = fn;
  k->host_user = user;
  *out = k;
  return HRX_OK;
}

#ifdef HRX_HAVE_CUDA
static hrx_status load_image(hrx_runtime *rt, const char *call, const void *image,
                             const char *entry, hrx_kernel *k) {
  cudaError_t e = cudaSetDevice(rt->device);
  if (e == cudaSuccess)
    e = cudaLibraryLoadData(&k->library, image, NULL, NULL, 0, NULL, NULL, 0);
  if (e != cudaSuccess) {
    k->library = NULL;
    cudaGetLastError();
    return hrx__cuda_err(e, call);
  }
  e = cudaLibraryGetKernel(&k->function, k->library, entry);
  if (e != cudaSuccess) {
    /* Images load lazily, so a bad image can surface here too; either way the error is not
     * sticky, and the thread's last-error state is cleared for the caller's own checks. */
    cudaGetLastError();
    if (e == cudaErrorSymbolNotFound)
      return hrx__err(HRX_E_INVALID, "%s: entry point \"%s\" not found (%s)", call, entry,
                      cudaGetErrorName(e));
    return hrx__cuda_err(e, call);
  }
  return HRX_OK;
}
#endif

HRX_API hrx_status hrx_kernel_create_image(hrx_runtime *runtime, const void *image,
                                           size_t image_size, const char *entry,
                                           const hrx_kernel_contract *contract,
                                           const uint32_t grid[3], const uint32_t block[3],
                                           hrx_kernel **out) {
  const char *call = "hrx_kernel_create_image";
  if (!runtime || !image || !entry || !out)
    return hrx__err(HRX_E_INVALID, "%s: runtime, image, entry or out is NULL", call);
  if (runtime->options.engine != HRX_ENGINE_CUDA)
    return hrx__err(HRX_E_UNSUPPORTED, "%s: kernel images need a CUDA-engine runtime", call);
#ifndef HRX_HAVE_CUDA
  (void)image_size;
  (void)contract;
  (void)grid;
  (void)block;
  return hrx__err(HRX_E_UNSUPPORTED, "%s: hrx was built without CUDA", call);
#else
  (void)image_size; /* PTX is NUL-terminated and cubin images carry their own size */
  hrx_status s = check_contract(call, contract, grid, block);
  if (s == HRX_OK) s = hrx__runtime_usable(runtime, call);
  hrx_kernel *k = NULL;
  if (s == HRX_OK) s = kernel_new(runtime, call, contract, grid, block, &k);
  if (s != HRX_OK) return s;
  s = load_image(runtime, call, image, entry, k);
  if (s != HRX_OK) {
    hrx_kernel_release(k);
    return s;
  }
  *out = k;
  return HRX_OK;
#endif
}

HRX_API hrx_status hrx_kernel_create_source(hrx_runtime *runtime, const char *source,
                                            const char *entry, const char *const *options,
                                            size_t option_count,
                                            const hrx_kernel_contract *contract,
                                            const uint32_t grid[3], const uint32_t block[3],
                                            hrx_kernel **out) {
  const char *call = "hrx_kernel_create_source";
  if (!runtime || !source || !entry || !out || (option_count && !options))
    return hrx__err(HRX_E_INVALID, "%s: runtime, source, entry, options or out is NULL", call);
  if (runtime->options.engine != HRX_ENGINE_CUDA)
    return hrx__err(HRX_E_UNSUPPORTED, "%s: CUDA source needs a CUDA-engine runtime", call);
#ifndef HRX_HAVE_CUDA
  (void)contract;
  (void)grid;
  (void)block;
  return hrx__err(HRX_E_UNSUPPORTED, "%s: hrx was built without CUDA", call);
#else
  hrx_status s = check_contract(call, contract, grid, block);
  if (s != HRX_OK) return s;
  if (option_count > 62) return hrx__err(HRX_E_INVALID, "%s: too many options", call);
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, "hrx_kernel.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return hrx__err(HRX_E_COMPILE, "%s: nvrtcCreateProgram: %s", call, nvrtcGetErrorString(r));
  char arch[32];
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", runtime->cc_major, runtime->cc_minor);
  const char *opts[64];
  opts[0] = arch;
  for (size_t i = 0; i < option_count; i++) opts[i + 1] = options[i];
  r = nvrtcCompileProgram(prog, (int)option_count + 1, opts);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    char log[HRX_MSG - 96] = "";
    if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      char *full = hrx__calloc(log_size + 1, 1);
      if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS)
        snprintf(log, sizeof log, "%s", full);
      hrx__free(full);
    }
    nvrtcDestroyProgram(&prog);
    return hrx__err(HRX_E_COMPILE, "%s: %s: %s", call, nvrtcGetErrorString(r), log);
  }
  size_t size = 0;
  char *cubin = NULL;
  r = nvrtcGetCUBINSize(prog, &size);
  if (r == NVRTC_SUCCESS) {
    cubin = hrx__calloc(size, 1);
    if (!cubin) {
      nvrtcDestroyProgram(&prog);
      return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
    }
    r = nvrtcGetCUBIN(prog, cubin);
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    hrx__free(cubin);
    return hrx__err(HRX_E_COMPILE, "%s: nvrtcGetCUBIN: %s", call, nvrtcGetErrorString(r));
  }
  s = hrx_kernel_create_image(runtime, cubin, size, entry, contract, grid, block, out);
  hrx__free(cubin);
  if (s != HRX_OK) {
    char saved[HRX_MSG];
    snprintf(saved, sizeof saved, "%s", hrx_last_error());
    return hrx__err(s, "%s: %s", call, saved);
  }
  return HRX_OK;
#endif
}

HRX_API hrx_status hrx_kernel_create_function(hrx_runtime *runtime, const void *func,
                                              const hrx_kernel_contract *contract,
                                              size_t params_size, uint32_t shared_bytes,
                                              const uint32_t grid[3], const uint32_t block[3],
                                              hrx_kernel **out) {
  const char *call = "hrx_kernel_create_function";
  if (!runtime || !func || !out)
    return hrx__err(HRX_E_INVALID, "%s: runtime, func or out is NULL", call);
  if (runtime->options.engine != HRX_ENGINE_CUDA)
    return hrx__err(HRX_E_UNSUPPORTED, "%s: compiled functions need a CUDA-engine runtime", call);
  if (params_size > 4096)
    return hrx__err(HRX_E_INVALID, "%s: a parameter block of %zu bytes exceeds 4096", call,
                    params_size);
#ifndef HRX_HAVE_CUDA
  (void)contract;
  (void)shared_bytes;
  (void)grid;
  (void)block;
  return hrx__err(HRX_E_UNSUPPORTED, "%s: hrx was built without CUDA", call);
#else
  hrx_status s = check_contract(call, contract, grid, block);
  if (s == HRX_OK) s = hrx__runtime_usable(runtime, call);
  hrx_kernel *k = NULL;
  if (s == HRX_OK) s = kernel_new(runtime, call, contract, grid, block, &k);
  if (s != HRX_OK) return s;
  k->stub = func;
  k->params_size = params_size;
  k->shared_bytes = shared_bytes;
  *out = k;
  return HRX_OK;
#endif
}

HRX_API hrx_kernel *hrx_kernel_retain(hrx_kernel *kernel) {
  if (kernel) atomic_fetch_add(&kernel->refs, 1);
  return kernel;
}

HRX_API void hrx_kernel_release(hrx_kernel *kernel) {
  if (!kernel || atomic_fetch_sub(&kernel->refs, 1) != 1) return;
#ifdef HRX_HAVE_CUDA
  if (kernel->library) cudaLibraryUnload(kernel->library);
#endif
  hrx__free(kernel->bindings);
  hrx__free(kernel->constants);
  hrx_runtime *rt = kernel->rt;
  hrx__free(kernel);
  hrx_runtime_release(rt);
}

HRX_API const hrx_kernel_contract *hrx_kernel_contract_of(const hrx_kernel *kernel) {
  return kernel ? &kernel->contract : NULL;
}
