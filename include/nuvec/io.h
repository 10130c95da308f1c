/* nuvec — files: NumPy's .npy and .npz, safetensors, and GGUF.
 *
 * Loaders read a path (mapped into memory) or a byte range in memory (the `_from_memory`
 * entry points, which copy what they keep). Every loader checks a file before it trusts it:
 * truncated files, sizes beyond the file, overflowing shapes, overlapping or out-of-range
 * offsets, malformed headers, unknown dtypes and duplicate names fail with NV_ERR_IO and a
 * message naming the file and what was wrong; nothing is allocated with a size the file
 * declares before that size has been checked against the file's own size. Dtypes a format can
 * describe but nuvec does not have (complex128, float128, strings, objects) fail with
 * NV_ERR_UNSUPPORTED. Out-parameters are written only on success. A path must name a regular
 * file: a FIFO, device, socket or directory fails with NV_ERR_IO at once (a FIFO is never
 * opened in a way that waits for a writer).
 *
 * Arrays may view the file's mapping without a copy (safetensors and .npy, when the data is
 * aligned to its element size and needs no byte swap); such arrays are read-only: the library
 * never writes them in place nor donates them, so an op on them (nv_slice_update, ...) writes
 * a new buffer and the file is never changed. The mapping lives until the last array using it
 * is freed. Changing or truncating a file while arrays map it is undefined, as with any mmap.
 *
 * Savers evaluate their arrays (any layout: the data is written in row-major order), write a
 * temporary file beside `path` and rename it over `path` when complete, so a failed save
 * leaves no partial file and arrays mapped from an older file at `path` stay valid. Only a
 * regular file is replaced: when `path` names a FIFO, device, socket or directory the save
 * fails with NV_ERR_IO and leaves it as it was. */
#ifndef NUVEC_IO_H
#define NUVEC_IO_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Metadata: typed key/value pairs ---- */

/* The type of a metadata value. The numbering is GGUF's value types, so a GGUF file's values
 * keep their exact types. safetensors metadata holds strings only. */
typedef enum nv_meta_type {
  NV_META_UINT8 = 0,
  NV_META_INT8 = 1,
  NV_META_UINT16 = 2,
  NV_META_INT16 = 3,
  NV_META_UINT32 = 4,
  NV_META_INT32 = 5,
  NV_META_FLOAT32 = 6,
  NV_META_BOOL = 7,
  NV_META_STRING = 8,
  NV_META_ARRAY = 9,
  NV_META_UINT64 = 10,
  NV_META_INT64 = 11,
  NV_META_FLOAT64 = 12,
} nv_meta_type;

/* An insertion-ordered map from string keys to typed values: scalars, strings (byte strings
 * with a length; a terminating NUL is added), and arrays of scalars or of strings. It copies
 * everything it is given. Not thread-safe. */
typedef struct nv_io_metadata nv_io_metadata;

/* A new empty container (NULL when out of memory). */
NV_API nv_io_metadata *nv_io_metadata_new(void);
/* Frees the container and its values; NULL-safe. */
NV_API void nv_io_metadata_free(nv_io_metadata *m);
/* Number of entries. */
NV_API size_t nv_io_metadata_size(const nv_io_metadata *m);
/* The i-th key in insertion order (owned by the container), or NULL when out of range. */
NV_API const char *nv_io_metadata_key(const nv_io_metadata *m, size_t i);
/* Whether `key` is present; when it is and `type` is not NULL, writes its type. */
NV_API bool nv_io_metadata_has(const nv_io_metadata *m, const char *key, nv_meta_type *type);
/* Removes `key`; returns whether it was there. */
NV_API bool nv_io_metadata_remove(nv_io_metadata *m, const char *key);

/* Setters replace any previous value of `key` in place (keeping its position). `type` names
 * the exact scalar type to store: an integer type (the value must fit it, else
 * NV_ERR_INVALID_ARGUMENT), NV_META_BOOL, NV_META_FLOAT32 or NV_META_FLOAT64 (rounded).
 * Fail with NV_ERR_INVALID_ARGUMENT for NULL arguments or a type that does not match the
 * setter, NV_ERR_OUT_OF_MEMORY. */
NV_API nv_status nv_io_metadata_set_int(nv_io_metadata *m, const char *key, nv_meta_type type,
                                        int64_t value);
NV_API nv_status nv_io_metadata_set_uint64(nv_io_metadata *m, const char *key, uint64_t value);
NV_API nv_status nv_io_metadata_set_float(nv_io_metadata *m, const char *key,
                                          nv_meta_type type, double value);
NV_API nv_status nv_io_metadata_set_bool(nv_io_metadata *m, const char *key, bool value);
/* A string of `len` bytes (may hold NULs; `len` = (size_t)-1 means strlen(value)). */
NV_API nv_status nv_io_metadata_set_string(nv_io_metadata *m, const char *key,
                                           const char *value, size_t len);
/* An array of `count` scalars of `elem` (packed C values: uint8_t for UINT8 and BOOL, float
 * for FLOAT32, ...). */
NV_API nv_status nv_io_metadata_set_array(nv_io_metadata *m, const char *key,
                                          nv_meta_type elem, const void *values, size_t count);
/* An array of `count` NUL-terminated strings. */
NV_API nv_status nv_io_metadata_set_string_array(nv_io_metadata *m, const char *key,
                                                 const char *const *values, size_t count);

/* Getters fail with NV_ERR_INVALID_ARGUMENT when the key is absent or its value has another
 * kind. get_int reads any integer or bool value (a uint64 above INT64_MAX fails), get_uint64
 * any non-negative integer or bool, get_float any integer, bool or float value. Strings and
 * array data stay owned by the container until it changes or is freed. */
NV_API nv_status nv_io_metadata_get_int(const nv_io_metadata *m, const char *key,
                                        int64_t *out);
NV_API nv_status nv_io_metadata_get_uint64(const nv_io_metadata *m, const char *key,
                                           uint64_t *out);
NV_API nv_status nv_io_metadata_get_float(const nv_io_metadata *m, const char *key,
                                          double *out);
/* A string value and its length in bytes (`len` may be NULL). */
NV_API nv_status nv_io_metadata_get_string(const nv_io_metadata *m, const char *key,
                                           const char **value, size_t *len);
/* An array value: its element type, count, and elements (packed scalars as in set_array, or
 * for NV_META_STRING a `const char *const *` list of NUL-terminated strings). */
NV_API nv_status nv_io_metadata_get_array(const nv_io_metadata *m, const char *key,
                                          nv_meta_type *elem, size_t *count,
                                          const void **values);
/* The length in bytes of the i-th string of a string array (strings may hold NULs). */
NV_API nv_status nv_io_metadata_get_array_string_len(const nv_io_metadata *m, const char *key,
                                                     size_t i, size_t *len);

/* ---- Loading ---- */

/* Loads a file by its extension, as MLX's load: ".npy" gives one array under the key "arr_0",
 * ".npz" its arrays, ".safetensors" its tensors and "__metadata__" strings, ".gguf" its tensors
 * (quantized ones kept as packed blocks, NV_GGUF_RAW) and key/values. `*meta` receives a new
 * container (empty for NumPy files) unless `meta` is NULL; the caller frees both. Fails with
 * NV_ERR_INVALID_ARGUMENT for an unknown extension, NV_ERR_IO for unreadable or malformed
 * files. */
NV_API nv_status nv_load(const char *path, nv_map **arrays, nv_io_metadata **meta);

/* A .npy file (format versions 1.0, 2.0 and 3.0): bool, (u)int8-64, float16/32/64,
 * complex64, and bfloat16 stored as "<V2" (as MLX writes it). Big-endian data is byte-swapped
 * into a new buffer; Fortran-order data loads as a column-major view (strides reversed). */
NV_API nv_status nv_load_npy(const char *path, nv_array **out);
NV_API nv_status nv_load_npy_from_memory(const void *data, size_t size, nv_array **out);

/* A .npz archive (zip, entries stored or deflated, ZIP64 fields read): each entry must be a
 * .npy file; its key is the entry name without ".npy", as NumPy's and MLX's. CRCs are
 * checked. Duplicate names fail. */
NV_API nv_status nv_load_npz(const char *path, nv_map **arrays);
NV_API nv_status nv_load_npz_from_memory(const void *data, size_t size, nv_map **arrays);

/* A safetensors file: BOOL, U8-U64, I8-I64, F16, BF16, F32, F64, C64; F8_E4M3 loads as uint8
 * holding its bits (as MLX; nv_from_fp8 converts them). Tensors whose data is aligned to their
 * element size view the mapping without a copy. The header is parsed by a strict JSON reader:
 * its tensors must tile the data section exactly (no gaps, overlaps or trailing bytes, as the
 * format's reference implementation requires). `meta` receives "__metadata__" as strings. */
NV_API nv_status nv_load_safetensors(const char *path, nv_map **arrays, nv_io_metadata **meta);
NV_API nv_status nv_load_safetensors_from_memory(const void *data, size_t size,
                                                 nv_map **arrays, nv_io_metadata **meta);

/* How GGUF's block-quantized tensors load. RAW: as uint8 arrays of their packed blocks, the
 * shape's last axis in bytes (ne0 / block_size × block_bytes), for every block type GGUF
 * defines. DEQUANTIZE: Q4_0, Q4_1 and Q8_0 as float32 computed as ggml does (scale × quant
 * [+ min] in float32); other block types then fail with NV_ERR_UNSUPPORTED. AFFINE (what MLX's
 * load does): Q4_0, Q4_1 and Q8_0 as nv_quantize's affine triple, group size 32, bits 4, 4
 * and 8, bit-identical to MLX's: the packed uint32 weight under the tensor's name, float16
 * scales and biases under the name with its first ".weight" removed plus ".scales" /
 * ".biases" (Q4_0: scale d, bias -8d; Q4_1: d, m; Q8_0: d, -128d, the quants offset by 128).
 * No value is lost: the stored numbers are GGUF's, and quantized_matmul with a float32 x
 * computes d × q + b in float32, ggml's values exactly (a float16 dequantize rounds them).
 * Other block types load raw (MLX dequantizes them to float16); a derived name that another
 * tensor already has fails with NV_ERR_IO. */
typedef enum nv_gguf_mode {
  NV_GGUF_RAW = 0,
  NV_GGUF_DEQUANTIZE = 1,
  NV_GGUF_AFFINE = 2,
} nv_gguf_mode;

/* A GGUF file (versions 2 and 3): F32, F16, BF16, F64, I8-I64 tensors as those dtypes, block
 * types as `mode` says; shapes are GGUF's dimensions reversed (row-major, as MLX and gguf-py);
 * key/values with their exact types, arrays of scalars or strings (nested arrays fail), the
 * data alignment from "general.alignment". Tensors must lie inside the data section at aligned
 * offsets without overlapping. */
NV_API nv_status nv_load_gguf(const char *path, nv_gguf_mode mode, nv_map **arrays,
                              nv_io_metadata **meta);
NV_API nv_status nv_load_gguf_from_memory(const void *data, size_t size, nv_gguf_mode mode,
                                          nv_map **arrays, nv_io_metadata **meta);

/* ---- Saving ---- */

/* Writes `x` as a .npy file (version 1.0, or 2.0 when the header needs it), C order,
 * little-endian; bfloat16 as "<V2" (MLX's choice). ".npy" is appended to `path` when missing,
 * as MLX's save. Fails with the array's error, or NV_ERR_IO naming the path. */
NV_API nv_status nv_save(const char *path, nv_array *x);

/* Writes the arrays of `arrays` as a .npz archive, each entry "<key>.npy", stored
 * (nv_savez) or deflated (nv_savez_compressed), with ZIP64 fields as NumPy writes them.
 * ".npz" is appended to `path` when missing. */
NV_API nv_status nv_savez(const char *path, const nv_map *arrays);
NV_API nv_status nv_savez_compressed(const char *path, const nv_map *arrays);

/* Writes a safetensors file: the arrays by element size (largest first), then key, as the
 * format's reference writer orders them, after a header padded with spaces to 8 bytes, so
 * every tensor is aligned for zero-copy loading; and `meta` (may be NULL;
 * string values only, else NV_ERR_INVALID_ARGUMENT) as "__metadata__". complex64 is written
 * as C64. ".safetensors" is appended to `path` when missing. */
NV_API nv_status nv_save_safetensors(const char *path, const nv_map *arrays,
                                     const nv_io_metadata *meta);

/* Writes a GGUF (version 3) file: float32, float16, bfloat16, float64, int8-int64 tensors in
 * map order, key/values of `meta` (may be NULL) with their types, alignment 32 or
 * "general.alignment" when `meta` sets it (a power of two). Other dtypes fail with
 * NV_ERR_UNSUPPORTED. ".gguf" is appended to `path` when missing. */
NV_API nv_status nv_save_gguf(const char *path, const nv_map *arrays, const nv_io_metadata *meta);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_IO_H */
