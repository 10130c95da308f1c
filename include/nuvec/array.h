/* nuvec — arrays: handles, creation from host data, reading back, scopes, containers.
 *
 * Ownership: outside any scope, every function returning an nv_array* returns a new reference
 * the caller owns and gives back with nv_release (NULL-safe). Inside a scope (nv_scope_begin)
 * the scope owns the arrays created there. Array arguments are always borrowed. Handles can be
 * shared between threads: retain and release are atomic, builders thread-safe; scopes are per
 * thread (see nv_release for releasing a scope-owned array on another thread). */
#ifndef NUVEC_ARRAY_H
#define NUVEC_ARRAY_H

#include "nuvec/base.h"
#include "nuvec/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An opaque, reference-counted handle to one output of a lazy graph node. */
typedef struct nv_array nv_array;

/* Adds a reference to `x` and returns it; NULL-safe. Thread-safe. */
NV_API nv_array *nv_retain(nv_array *x);

/* Gives back one reference to `x`; the array is freed with its last reference. NULL-safe.
 * Thread-safe: any thread may give back a reference it holds. Releasing an array a scope owns
 * (its last reference being the scope's) gives back the scope's reference early, on any
 * thread: on the scope's own thread it takes the array out of the scope and frees it; on
 * another thread the array's data and graph are freed at once and the handle itself when the
 * owning scope ends (so nv_scope_end never releases it twice). Either way no thread may use
 * `x` afterwards unless it holds a reference of its own. Freeing a long unevaluated chain
 * never recurses. */
NV_API void nv_release(nv_array *x);

/* ---- Properties (never evaluate) ---- */

/* Number of dimensions (0 for a scalar). */
NV_API int nv_array_ndim(const nv_array *x);
/* The shape: `ndim` ints owned by the array, valid while it lives (NULL for a scalar). */
NV_API const int *nv_array_shape(const nv_array *x);
/* The size of dimension `axis` (negative counts from the end); 0 if out of range. */
NV_API int nv_array_dim(const nv_array *x, int axis);
/* The strides in elements: `ndim` values owned by the array. */
NV_API const int64_t *nv_array_strides(const nv_array *x);
/* Number of elements. */
NV_API int64_t nv_array_size(const nv_array *x);
/* The element type. */
NV_API nv_dtype nv_array_dtype(const nv_array *x);
/* Bytes per element. */
NV_API size_t nv_array_itemsize(const nv_array *x);
/* Bytes of the elements (size × itemsize). */
NV_API size_t nv_array_nbytes(const nv_array *x);
/* The stream that computes the array. */
NV_API nv_stream nv_array_stream(const nv_array *x);
/* Whether the array is row-major contiguous (C order) / column-major contiguous. */
NV_API bool nv_array_is_row_contiguous(const nv_array *x);
NV_API bool nv_array_is_col_contiguous(const nv_array *x);
/* Whether the array has been evaluated (its data is ready or its error known). */
NV_API bool nv_array_is_evaluated(const nv_array *x);

/* The data buffer behind an evaluated array, without evaluating it: *id is an opaque identity
 * that every array viewing the same buffer shares (to count a buffer once), *nbytes the
 * buffer's size in bytes (at least nv_array_nbytes of any array viewing it; 0 and a NULL id
 * for an empty array). Fails with NV_ERR_INVALID_ARGUMENT for NULL arguments and for an array
 * not evaluated yet, and with the array's error if its evaluation failed; writes nothing then.
 * Thread-safe. */
NV_API nv_status nv_array_buffer_info(const nv_array *x, const void **id, size_t *nbytes);

/* The error the array carries if known without evaluating it (NV_OK otherwise): an op built
 * with bad arguments, or an array computed from one, or a failed evaluation. Sets the
 * thread's last error to the array's message when not NV_OK. NULL is NV_ERR_INVALID_ARGUMENT. */
NV_API nv_status nv_array_status(const nv_array *x);

/* The message of the array's known error ("" if none), owned by the array. */
NV_API const char *nv_array_error(const nv_array *x);

/* ---- Creation from host data ---- */

/* A new array with a copy of `data`: `ndim` dimensions from `shape` (each ≥ 0 and at most
 * INT32_MAX), row-major, `dtype`. `data` may be NULL only when the array is empty. Fails (as a
 * failed array) with NV_ERR_INVALID_ARGUMENT for bad shapes or dtypes, NV_ERR_OUT_OF_MEMORY. */
NV_API nv_array *nv_array_from_data(const void *data, const int *shape, int ndim,
                                    nv_dtype dtype);

/* Like nv_array_from_data but without a copy: the array reads `data` in place until its
 * buffer is freed, then calls `destroy(ctx)` (if not NULL). Such a buffer is never written in
 * place by the library. `data` must stay valid and unchanged until then. */
NV_API nv_array *nv_array_from_data_nocopy(void *data, const int *shape, int ndim,
                                           nv_dtype dtype, void (*destroy)(void *ctx),
                                           void *ctx);

/* 0-d arrays, as MLX's array(value): bool, int32, float32; and any dtype from a double. */
NV_API nv_array *nv_array_bool(bool value);
NV_API nv_array *nv_array_int(int32_t value);
NV_API nv_array *nv_array_float(float value);
/* A 0-d array of `dtype` holding `value` converted as nv_astype converts (round to nearest
 * even for narrower floats; defined results for NaN/inf/out of range to integers). */
NV_API nv_array *nv_array_scalar(double value, nv_dtype dtype);
/* A 0-d int64/uint64 array holding `value` exactly. */
NV_API nv_array *nv_array_int64(int64_t value);
NV_API nv_array *nv_array_uint64(uint64_t value);
/* A 0-d complex64 array. */
NV_API nv_array *nv_array_complex(float re, float im);

/* ---- Reading back (these evaluate) ---- */

/* Evaluates `x` and copies its elements in row-major order into `dst`, which holds `nbytes`
 * bytes. Fails with NV_ERR_INVALID_ARGUMENT unless nbytes == nv_array_nbytes(x), or with the
 * array's error. */
NV_API nv_status nv_array_read(nv_array *x, void *dst, size_t nbytes);

/* Evaluates a one-element array and writes its value converted to the requested C type. Fails
 * with NV_ERR_INVALID_ARGUMENT if x does not have exactly one element. The out-parameter is
 * written only on success. */
NV_API nv_status nv_array_item_double(nv_array *x, double *out);
NV_API nv_status nv_array_item_float(nv_array *x, float *out);
NV_API nv_status nv_array_item_int64(nv_array *x, int64_t *out);
NV_API nv_status nv_array_item_uint64(nv_array *x, uint64_t *out);
NV_API nv_status nv_array_item_bool(nv_array *x, bool *out);
NV_API nv_status nv_array_item_complex(nv_array *x, nv_complex64 *out);

/* Evaluates `x` and returns a const pointer to its first element in its buffer (laid out by
 * nv_array_strides), valid while `x` lives; NULL on failure (see nv_last_error) and for an
 * empty array. */
NV_API const void *nv_array_data(nv_array *x);

/* Evaluates `x` and writes where its data is valid without moving it: a GPU's device address of
 * the first element (laid out by nv_array_strides; *device is that GPU) once the GPU work that
 * wrote it has finished, or else the host pointer of nv_array_data (*device is the CPU). The
 * address is valid while `x` lives and is not written in place. Fails as nv_eval, and with
 * NV_ERR_INVALID_ARGUMENT on NULL arguments. Thread-safe. */
NV_API nv_status nv_array_device_data(nv_array *x, nv_device *device, const void **data);

/* ---- Scopes ---- */

/* Opens a scope on the calling thread: until the matching nv_scope_end, the scope owns every
 * array created on this thread, so expression-style code (nv_add(nv_mul(a, b), c)) leaks
 * nothing. Scopes nest and are per thread: arrays a scope owns may be used and released on
 * other threads (see nv_release), but only the owning thread ends or keeps them. A thread that
 * exits with scopes still open ends them (their arrays are released). Fails with
 * NV_ERR_OUT_OF_MEMORY. */
NV_API nv_status nv_scope_begin(void);

/* Closes the calling thread's innermost scope, releasing every array it still owns (arrays
 * released early, on any thread, are not released again). Does nothing without one. */
NV_API void nv_scope_end(void);

/* Hands `x` from the scope that owns it to the enclosing one, or to the caller at the
 * outermost level (who then owns one reference). Returns `x`. Arrays no scope of the calling
 * thread owns (unscoped ones, those of another thread's scopes) are returned unchanged. */
NV_API nv_array *nv_scope_keep(nv_array *x);

/* ---- Containers ---- */

/* A list of arrays in order. The list holds a reference to each array. Not thread-safe. */
typedef struct nv_vec nv_vec;

/* A new empty list (NULL when out of memory). */
NV_API nv_vec *nv_vec_new(void);
/* Frees the list and its references; NULL-safe. */
NV_API void nv_vec_free(nv_vec *v);
/* Appends `x` (retained). Fails with NV_ERR_INVALID_ARGUMENT for NULL, or out of memory. */
NV_API nv_status nv_vec_push(nv_vec *v, nv_array *x);
/* Number of arrays. */
NV_API size_t nv_vec_size(const nv_vec *v);
/* The i-th array, borrowed (NULL when out of range). */
NV_API nv_array *nv_vec_get(const nv_vec *v, size_t i);
/* Replaces the i-th array (retained; the old one released). */
NV_API nv_status nv_vec_set(nv_vec *v, size_t i, nv_array *x);
/* Removes every array. */
NV_API void nv_vec_clear(nv_vec *v);
/* The arrays as a C array of borrowed handles, valid until the list changes. */
NV_API nv_array *const *nv_vec_data(const nv_vec *v);

/* A map from string keys to arrays, in insertion order. It holds a reference to each array
 * and a copy of each key. Not thread-safe. */
typedef struct nv_map nv_map;

/* A new empty map (NULL when out of memory). */
NV_API nv_map *nv_map_new(void);
/* Frees the map, its keys and its references; NULL-safe. */
NV_API void nv_map_free(nv_map *m);
/* Sets `key` to `x` (retained), replacing any previous array (released) in place. */
NV_API nv_status nv_map_set(nv_map *m, const char *key, nv_array *x);
/* The array under `key`, borrowed, or NULL. */
NV_API nv_array *nv_map_get(const nv_map *m, const char *key);
/* Removes `key`; returns whether it was there. */
NV_API bool nv_map_remove(nv_map *m, const char *key);
/* Number of entries. */
NV_API size_t nv_map_size(const nv_map *m);
/* The i-th key and array in insertion order (borrowed; NULL when out of range). */
NV_API const char *nv_map_key(const nv_map *m, size_t i);
NV_API nv_array *nv_map_value(const nv_map *m, size_t i);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_ARRAY_H */
