/* Status names, the thread-local last-error message, and hrx's one host allocator. */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[HRX_MSG];

HRX_API const char *hrx_status_name(hrx_status status) {
  switch (status) {
  case HRX_OK: return "HRX_OK";
  case HRX_E_INVALID: return "HRX_E_INVALID";
  case HRX_E_BUSY: return "HRX_E_BUSY";
  case HRX_E_DEVICE_LOST: return "HRX_E_DEVICE_LOST";
  case HRX_E_UNSUPPORTED: return "HRX_E_UNSUPPORTED";
  case HRX_E_NO_DEVICE: return "HRX_E_NO_DEVICE";
  case HRX_E_OUT_OF_MEMORY: return "HRX_E_OUT_OF_MEMORY";
  case HRX_E_CUDA: return "HRX_E_CUDA";
  case HRX_E_CANCELLED: return "HRX_E_CANCELLED";
  case HRX_E_TIMEOUT: return "HRX_E_TIMEOUT";
  case HRX_E_COMPILE: return "HRX_E_COMPILE";
  case HRX_E_NOT_READY: return "HRX_E_NOT_READY";
  case HRX_E_CALLBACK: return "HRX_E_CALLBACK";
  }
  return "HRX_E_UNKNOWN";
}

HRX_API const char *hrx_last_error(void) { return last_error; }

HRX_API const char *hrx_version(void) { return "0.1.0"; }

hrx_status hrx__err(hrx_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void hrx__clear_error(void) { last_error[0] = 0; }

/* Every host allocation of hrx goes through these, so tests can make them fail: after
 * hrx__test_fail_allocations_after(n), the (n+1)-th allocation and every later one fail until
 * the hook is reset with a negative n. An internal symbol (not exported by libhrx.so). */
static atomic_long alloc_countdown = -1;

void hrx__test_fail_allocations_after(long n) { atomic_store(&alloc_countdown, n); }

bool hrx__alloc_fails(void) {
  long n = atomic_load(&alloc_countdown);
  while (n > 0 && !atomic_compare_exchange_weak(&alloc_countdown, &n, n - 1)) {
  }
  return n == 0;
}

void *hrx__calloc(size_t count, size_t size) {
  return hrx__alloc_fails() ? NULL : calloc(count ? count : 1, size ? size : 1);
}
void *hrx__realloc(void *p, size_t size) {
  return hrx__alloc_fails() ? NULL : realloc(p, size ? size : 1);
}
void hrx__free(void *p) { free(p); }

#ifdef HRX_HAVE_CUDA
hrx_status hrx__cuda_err(cudaError_t e, const char *what) {
  hrx_status s = HRX_E_CUDA;
  if (e == cudaErrorMemoryAllocation) s = HRX_E_OUT_OF_MEMORY;
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
           e == cudaErrorInvalidDevice)
    s = HRX_E_NO_DEVICE;
  else if (hrx__cuda_sticky(e))
    s = HRX_E_DEVICE_LOST;
  return hrx__err(s, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

bool hrx__cuda_sticky(cudaError_t e) {
  switch (e) {
  case cudaErrorIllegalAddress:
  case cudaErrorMisalignedAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorIllegalInstruction:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorHardwareStackError:
  case cudaErrorAssert:
  case cudaErrorLaunchTimeout:
  case cudaErrorECCUncorrectable:
  case cudaErrorContextIsDestroyed:
    return true;
  default:
    return false;
  }
}
#endif
