/* Buffers, their allocations, host mappings, and views. */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hrx__alloc_release(hrx__alloc *a) {
  if (!a || atomic_fetch_sub(&a->refs, 1) != 1) return;
#ifdef HRX_HAVE_CUDA
  if (a->engine == HRX_ENGINE_CUDA && a->memory == HRX_MEMORY_DEVICE) {
    cudaFree(a->base);
  } else if (a->engine == HRX_ENGINE_CUDA && a->memory == HRX_MEMORY_HOST_VISIBLE) {
    cudaFreeHost(a->base);
  } else
#endif
  {
    hrx__free(a->base);
  }
  hrx__free(a);
}

static hrx_status host_alloc(hrx_memory memory, size_t bytes, hrx__alloc *a) {
  /* 256 bytes, like cudaMalloc, so alignment rules behave alike on both engines. */
  size_t rounded = (bytes + 255) / 256 * 256;
  void *p = NULL;
  if (hrx__alloc_fails() || posix_memalign(&p, 256, rounded) != 0 || !p)
    return hrx__err(HRX_E_OUT_OF_MEMORY, "hrx_buffer_create: cannot allocate %zu bytes", bytes);
  memset(p, 0, rounded);
  a->base = p;
  a->host = p;
  a->gpu = memory == HRX_MEMORY_HOST_ONLY ? 0 : (uint64_t)(uintptr_t)p;
  return HRX_OK;
}

HRX_API hrx_status hrx_buffer_create(hrx_runtime *runtime, hrx_memory memory, size_t bytes,
                                     hrx_buffer **out) {
  if (!runtime || !out) return hrx__err(HRX_E_INVALID, "hrx_buffer_create: runtime or out is NULL");
  if (memory != HRX_MEMORY_DEVICE && memory != HRX_MEMORY_HOST_VISIBLE &&
      memory != HRX_MEMORY_HOST_ONLY)
    return hrx__err(HRX_E_INVALID, "hrx_buffer_create: unknown memory kind %d", (int)memory);
  if (bytes == 0) return hrx__err(HRX_E_INVALID, "hrx_buffer_create: size is zero");
  if (bytes > ((size_t)1 << 48))
    return hrx__err(HRX_E_INVALID, "hrx_buffer_create: size %zu is too large", bytes);
  hrx_status s = hrx__runtime_usable(runtime, "hrx_buffer_create");
  if (s != HRX_OK) return s;
  hrx_buffer *b = hrx__calloc(1, sizeof *b);
  hrx__alloc *a = hrx__calloc(1, sizeof *a);
  if (!b || !a) {
    hrx__free(b);
    hrx__free(a);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "hrx_buffer_create: out of host memory");
  }
  atomic_init(&a->refs, 1);
  a->engine = runtime->options.engine;
  a->memory = memory;
#ifdef HRX_HAVE_CUDA
  if (hrx__gpu_engine(runtime) && memory != HRX_MEMORY_HOST_ONLY)
    s = hrx__cuda_alloc(runtime, memory, bytes, a);
  else
#endif
    s = host_alloc(memory, bytes, a);
  if (s != HRX_OK) {
    hrx__free(a);
    hrx__free(b);
    return s;
  }
  atomic_init(&b->refs, 1);
  b->rt = hrx_runtime_retain(runtime);
  b->alloc = a;
  b->memory = memory;
  b->size = bytes;
  atomic_init(&b->last_writer, HRX_WRITER_NONE);
  *out = b;
  return HRX_OK;
}

HRX_API hrx_buffer *hrx_buffer_retain(hrx_buffer *buffer) {
  if (buffer) atomic_fetch_add(&buffer->refs, 1);
  return buffer;
}

HRX_API void hrx_buffer_release(hrx_buffer *buffer) {
  if (!buffer || atomic_fetch_sub(&buffer->refs, 1) != 1) return;
  hrx__alloc_release(buffer->alloc);
  hrx__free(buffer->poison);
  hrx_runtime *rt = buffer->rt;
  hrx__free(buffer);
  hrx_runtime_release(rt);
}

HRX_API size_t hrx_buffer_size(const hrx_buffer *buffer) { return buffer ? buffer->size : 0; }

HRX_API hrx_memory hrx_buffer_memory(const hrx_buffer *buffer) {
  return buffer ? buffer->memory : HRX_MEMORY_DEVICE;
}

HRX_API hrx_writer hrx_buffer_last_writer(hrx_buffer *buffer) {
  return buffer ? (hrx_writer)atomic_load(&buffer->last_writer) : HRX_WRITER_NONE;
}

HRX_API hrx_status hrx_buffer_gpu_address(hrx_buffer *buffer, uint64_t *out) {
  if (!buffer || !out) return hrx__err(HRX_E_INVALID, "hrx_buffer_gpu_address: buffer or out is NULL");
  if (buffer->memory == HRX_MEMORY_HOST_ONLY)
    return hrx__err(HRX_E_INVALID, "hrx_buffer_gpu_address: host-only memory is not GPU-visible");
  *out = buffer->alloc->gpu;
  return HRX_OK;
}

HRX_API hrx_status hrx_buffer_check(hrx_buffer *buffer) {
  if (!buffer) return hrx__err(HRX_E_INVALID, "hrx_buffer_check: buffer is NULL");
  hrx_status s = HRX_OK;
  hrx__lock(buffer->rt);
  if (buffer->poison) s = hrx__err(HRX_E_DEVICE_LOST, "hrx_buffer_check: %s", buffer->poison);
  hrx__unlock(buffer->rt);
  return s;
}

static bool valid_access(hrx_access a) {
  return a == HRX_ACCESS_READ || a == HRX_ACCESS_WRITE || a == HRX_ACCESS_READ_WRITE;
}

HRX_API hrx_status hrx_buffer_map(hrx_buffer *buffer, hrx_access access, void **out) {
  if (!buffer || !out) return hrx__err(HRX_E_INVALID, "hrx_buffer_map: buffer or out is NULL");
  if (!valid_access(access))
    return hrx__err(HRX_E_INVALID, "hrx_buffer_map: unknown access %d", (int)access);
  if (buffer->memory == HRX_MEMORY_DEVICE)
    return hrx__err(HRX_E_INVALID, "hrx_buffer_map: device-local memory cannot be mapped");
  hrx_runtime *rt = buffer->rt;
  hrx_status s = HRX_OK;
  hrx__lock(rt);
  if (rt->failed) {
    s = hrx__err(HRX_E_DEVICE_LOST, "hrx_buffer_map: %s", rt->fail_message);
  } else if (buffer->poison) {
    s = hrx__err(HRX_E_DEVICE_LOST, "hrx_buffer_map: %s", buffer->poison);
  } else if (hrx__writes(access) && buffer->pending_reads + buffer->pending_writes > 0) {
    s = hrx__err(HRX_E_BUSY, "hrx_buffer_map: unfinished submissions use the buffer");
  } else if (!hrx__writes(access) && buffer->pending_writes > 0) {
    s = hrx__err(HRX_E_BUSY, "hrx_buffer_map: unfinished submissions write the buffer");
  } else {
    if (hrx__writes(access)) {
      buffer->map_write++;
      atomic_store(&buffer->last_writer, HRX_WRITER_HOST);
    } else {
      buffer->map_read++;
    }
    *out = buffer->alloc->host;
  }
  hrx__unlock(rt);
  return s;
}

HRX_API hrx_status hrx_buffer_unmap(hrx_buffer *buffer, hrx_access access) {
  if (!buffer) return hrx__err(HRX_E_INVALID, "hrx_buffer_unmap: buffer is NULL");
  if (!valid_access(access))
    return hrx__err(HRX_E_INVALID, "hrx_buffer_unmap: unknown access %d", (int)access);
  hrx_status s = HRX_OK;
  hrx__lock(buffer->rt);
  int *count = hrx__writes(access) ? &buffer->map_write : &buffer->map_read;
  if (*count == 0)
    s = hrx__err(HRX_E_INVALID, "hrx_buffer_unmap: no live %s mapping",
                 hrx__writes(access) ? "write" : "read");
  else
    (*count)--;
  hrx__unlock(buffer->rt);
  return s;
}

HRX_API hrx_view hrx_view_make(hrx_buffer *buffer, size_t offset, size_t length) {
  hrx_view v = {buffer, offset, length};
  return v;
}

HRX_API hrx_view hrx_view_whole(hrx_buffer *buffer) {
  return hrx_view_make(buffer, 0, buffer ? buffer->size : 0);
}

HRX_API int hrx_view_overlaps(hrx_view a, hrx_view b) {
  if (!a.buffer || a.buffer != b.buffer || a.length == 0 || b.length == 0) return 0;
  return a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}
