/* Shared pieces of the file formats: the checked byte source every parser reads, file
 * mappings shared by the arrays that view them, array construction (zero-copy or copied),
 * the temporary-file writer behind every saver, and a small hash set for duplicate names. */
#ifndef NUVEC_IO_INTERNAL_H
#define NUVEC_IO_INTERNAL_H

#include <stdio.h>

#include "core/internal.h"
#include "nuvec/io.h"

/* A read-only mapping of a whole file, counted by the arrays that view it. */
typedef struct nv__io_map {
  atomic_long refs;
  void *base;
  size_t len;
} nv__io_map;

/* What a parser reads: `size` bytes at `data`, named `name` in messages, for the public call
 * `op`. Arrays may view the bytes without a copy when `map` is set (a file mapping) or
 * `owner` is (a library buffer the bytes were decompressed into, which `data` points at). */
typedef struct nv__io_src {
  const char *op;
  const char *name;
  const unsigned char *data;
  size_t size;
  nv__io_map *map;
  nv__buffer *owner;
} nv__io_src;

/* Sets the thread's error to "op: name: <message>" with `status` and returns it. */
nv_status nv__io_error(const nv__io_src *s, nv_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Maps the file at `path` read-only into `src` (map NULL for an empty file). Fails with
 * NV_ERR_IO naming the path and the system's reason. */
nv_status nv__io_open(const char *op, const char *path, nv__io_src *src);
/* Gives back the source's reference to its mapping. */
void nv__io_close(nv__io_src *src);

/* Element count of `shape` into *count, false when a dimension is negative, above INT32_MAX,
 * or the product of the dimensions (zeros counted as ones) times `itemsize` exceeds 2^62. */
bool nv__io_shape_count(const int64_t *shape, int ndim, size_t itemsize, uint64_t *count);

/* An evaluated array over `nbytes` at byte `off` of the source: a view of the mapping (or of
 * the owner buffer) when there is one and the data is aligned to the element size, else a
 * copy. `strides` may be
 * NULL (row-major). The array is not registered with any scope. */
nv_status nv__io_array(const nv__io_src *s, size_t off, size_t nbytes, nv_dtype dtype,
                       const int *shape, int ndim, const int64_t *strides, nv_array **out);
/* An array over a new writable buffer the caller fills (`*data`), not scoped. */
nv_status nv__io_array_alloc(const char *op, size_t nbytes, nv_dtype dtype, const int *shape,
                             int ndim, const int64_t *strides, nv_array **out, void **data);

/* ---- Hash set of byte strings (duplicate names) ---- */
typedef struct nv__io_names {
  const char **keys;
  size_t *lens;
  size_t cap, n;
} nv__io_names;
/* Adds a name (not copied: it must outlive the set). Returns 1 if added, 0 if it was there,
 * -1 when out of memory. */
int nv__io_names_add(nv__io_names *h, const char *key, size_t len);
void nv__io_names_free(nv__io_names *h);

/* ---- Writing ---- */

/* A file written under a temporary name beside `path` and renamed over it on commit. */
typedef struct nv__io_writer {
  const char *op;
  char *path;     /* the final path (with the extension appended if needed) */
  char *tmp;      /* the temporary path */
  FILE *f;
  nv_status status;
} nv__io_writer;

/* Creates the temporary file for `path` (plus `ext` when path does not end with it). With
 * `open_file` false the temporary is created and closed, for writers that reopen it. */
nv_status nv__io_writer_open(nv__io_writer *w, const char *op, const char *path,
                             const char *ext, bool open_file);
/* Writes bytes; a failure is remembered and reported by commit. */
void nv__io_write(nv__io_writer *w, const void *p, size_t n);
/* Closes, and renames the temporary over the path when everything succeeded (else removes
 * it). Returns the first failure. */
nv_status nv__io_writer_commit(nv__io_writer *w);
/* Closes and removes the temporary (after a failure elsewhere). */
void nv__io_writer_abort(nv__io_writer *w);

/* Evaluates the `n` arrays (one evaluation, so shared work runs once) and returns row-major
 * versions of them (new references, views where already row-contiguous) in `flat`, which the
 * caller releases. Fails with the first array's error, named by `op`. */
nv_status nv__io_eval_flat(const char *op, nv_array *const *xs, size_t n, nv_array **flat);
/* The bytes of an evaluated row-contiguous array (NULL when empty). */
const void *nv__io_bytes(const nv_array *x);

/* ---- Format entry points over a source (the public calls wrap these) ---- */
nv_status nv__npy_parse(const nv__io_src *s, nv_array **out);
/* Serializes the npy header of an array of `dtype` and `shape` into a new string whose length
 * is a multiple of 64 bytes. */
nv_status nv__npy_header(const char *op, nv_dtype dtype, const int *shape, int ndim,
                         char **out, size_t *len);
nv_status nv__safetensors_parse(const nv__io_src *s, nv_map **arrays, nv_io_metadata **meta);
nv_status nv__gguf_parse(const nv__io_src *s, nv_gguf_mode mode, nv_map **arrays,
                         nv_io_metadata **meta);
nv_status nv__npz_parse(const nv__io_src *s, nv_map **arrays);

/* Metadata internals used by the parsers: append without the duplicate check (the parser
 * checks), and typed access for the writers. */
typedef struct nv__meta_value {
  nv_meta_type type;
  nv_meta_type elem; /* for arrays */
  size_t count;      /* array elements, or string bytes */
  union {
    int64_t i;
    uint64_t u;
    double f;
    char *s;       /* strings, NUL-terminated */
    void *data;    /* arrays of scalars */
    char **strs;   /* arrays of strings */
  } v;
  size_t *lens; /* lengths of an array's strings */
} nv__meta_value;
nv_status nv__meta_push(nv_io_metadata *m, char *key, nv__meta_value *val);
const nv__meta_value *nv__meta_at(const nv_io_metadata *m, size_t i);
void nv__meta_value_clear(nv__meta_value *v);
/* Bytes of one element of a scalar type (0 for STRING/ARRAY or unknown). */
size_t nv__meta_type_size(nv_meta_type t);

#endif /* NUVEC_IO_INTERNAL_H */
