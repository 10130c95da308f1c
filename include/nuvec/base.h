/* nuvec — base definitions: export macro, version, status codes, errors, dtypes.
 *
 * Every fallible call that is not an op builder returns an nv_status and, on failure, sets a
 * thread-local message that nv_last_error() returns. Op builders never return NULL: they
 * return an array that carries its error (see nv_array_status in nuvec/array.h). */
#ifndef NUVEC_BASE_H
#define NUVEC_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NUVEC_BUILDING) && defined(__GNUC__)
#define NV_API __attribute__((visibility("default")))
#else
#define NV_API
#endif

#define NUVEC_VERSION_MAJOR 0
#define NUVEC_VERSION_MINOR 1
#define NUVEC_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH", a static string. Thread-safe. */
NV_API const char *nv_version(void);

/* Status codes of fallible calls. NV_OK is 0. The list is append-only. */
typedef enum nv_status {
  NV_OK = 0,
  NV_ERR_INVALID_ARGUMENT = 1, /* bad shapes, axes, dtypes, NULL inputs, ... */
  NV_ERR_OUT_OF_MEMORY = 2,    /* an allocation failed or the memory limit was reached */
  NV_ERR_BACKEND = 3,          /* a kernel or a backend library failed */
  NV_ERR_DEVICE_LOST = 4,      /* the device failed and cannot run further work */
  NV_ERR_BUSY = 5,             /* the resource is in use; try again later */
  NV_ERR_IO = 6,               /* a file could not be read or written, or is malformed */
  NV_ERR_UNSUPPORTED = 7,      /* the device, dtype or feature is not available here */
  NV_ERR_PEER_LOST = 8,        /* a distributed peer is gone */
} nv_status;

/* A short constant name for a status ("invalid argument", ...). Thread-safe. */
NV_API const char *nv_status_string(nv_status status);

/* The message of the last failure on the calling thread ("" if none). The string is owned by
 * the library and stays valid until the thread's next failing call. */
NV_API const char *nv_last_error(void);

/* Clears the calling thread's last error message. */
NV_API void nv_clear_error(void);

/* Element types, with MLX's names. fp8 is not a dtype: see nv_to_fp8 in nuvec/ops.h. The list
 * is append-only. */
typedef enum nv_dtype {
  NV_DTYPE_BOOL = 0,
  NV_DTYPE_UINT8,
  NV_DTYPE_UINT16,
  NV_DTYPE_UINT32,
  NV_DTYPE_UINT64,
  NV_DTYPE_INT8,
  NV_DTYPE_INT16,
  NV_DTYPE_INT32,
  NV_DTYPE_INT64,
  NV_DTYPE_FLOAT16,
  NV_DTYPE_BFLOAT16,
  NV_DTYPE_FLOAT32,
  NV_DTYPE_FLOAT64,
  NV_DTYPE_COMPLEX64,
  NV_DTYPE_COUNT
} nv_dtype;

/* Categories of dtypes, as MLX's (nv_issubdtype). */
typedef enum nv_dtype_category {
  NV_CATEGORY_GENERIC = 0,
  NV_CATEGORY_NUMBER,
  NV_CATEGORY_INTEGER,
  NV_CATEGORY_SIGNED_INTEGER,
  NV_CATEGORY_UNSIGNED_INTEGER,
  NV_CATEGORY_INEXACT,
  NV_CATEGORY_FLOATING,
  NV_CATEGORY_COMPLEX,
} nv_dtype_category;

/* Bytes per element of `dtype` (0 for an invalid dtype). */
NV_API size_t nv_dtype_size(nv_dtype dtype);

/* MLX's name of `dtype` ("float32", ...), or "invalid". */
NV_API const char *nv_dtype_name(nv_dtype dtype);

/* The dtype named `name` (MLX's names); fails with NV_ERR_INVALID_ARGUMENT if unknown. The
 * out-parameter is written only on success. */
NV_API nv_status nv_dtype_from_name(const char *name, nv_dtype *out);

/* The result dtype of combining `a` and `b` in a binary op, by MLX's promotion table (e.g.
 * int64 with float32 gives float32, uint8 with int8 gives int16). */
NV_API nv_dtype nv_promote_types(nv_dtype a, nv_dtype b);

/* Whether `dtype` belongs to `category`, as MLX's issubdtype. */
NV_API bool nv_issubdtype(nv_dtype dtype, nv_dtype_category category);

/* Complex value of a complex64 element, laid out as two float32 (real, imaginary). */
typedef struct nv_complex64 {
  float re;
  float im;
} nv_complex64;

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_BASE_H */
