/* Shared file plumbing: mapping files, building arrays over them, the temporary-file writer,
 * duplicate-name sets, and nv_load's dispatch on the extension. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"
#include "ops/ops_internal.h"

nv_status nv__io_error(const nv__io_src *s, nv_status status, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nv__set_error(status, "%s: %s: %s", s->op, s->name, msg);
}

/* ---- Mappings ---- */

static void map_release(void *ctx) {
  nv__io_map *m = ctx;
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  munmap(m->base, m->len);
  nv__free(m);
}

/* What a path that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "of another kind";
}

static nv_status not_regular(const nv__io_src *src, mode_t mode) {
  return nv__io_error(src, NV_ERR_IO, "not a regular file (%s)", file_kind(mode));
}

nv_status nv__io_open(const char *op, const char *path, nv__io_src *src) {
  *src = (nv__io_src){op, path ? path : "(null)", NULL, 0, NULL, NULL};
  if (!path) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL path", op);
  /* Only regular files are opened: opening a FIFO for reading waits for a writer, and opening
   * a device may act on it. stat() rejects them before any open(); the open is non-blocking
   * and fstat() checks the file opened, in case the path was replaced in between. */
  struct stat st;
  if (stat(path, &st) != 0)
    return nv__io_error(src, NV_ERR_IO, "cannot open: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return not_regular(src, st.st_mode);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return nv__io_error(src, NV_ERR_IO, "cannot open: %s", strerror(errno));
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return nv__io_error(src, NV_ERR_IO, "cannot stat: %s", strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return not_regular(src, st.st_mode);
  }
  if (st.st_size == 0) {
    close(fd);
    static const unsigned char empty[1];
    src->data = empty;
    return NV_OK;
  }
  nv__io_map *m = nv__malloc(sizeof *m);
  if (!m) {
    close(fd);
    return nv__io_error(src, NV_ERR_OUT_OF_MEMORY, "out of memory");
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    nv__free(m);
    return nv__io_error(src, NV_ERR_IO, "cannot map the file: %s", strerror(e));
  }
  atomic_init(&m->refs, 1);
  m->base = p;
  m->len = (size_t)st.st_size;
  src->data = p;
  src->size = m->len;
  src->map = m;
  return NV_OK;
}

void nv__io_close(nv__io_src *src) {
  map_release(src->map);
  src->map = NULL;
}

bool nv__io_shape_count(const int64_t *shape, int ndim, size_t itemsize, uint64_t *count) {
  uint64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || shape[i] > INT32_MAX) return false;
    if (shape[i] == 0) zero = true;
  }
  /* The product is checked even when a dimension is zero, so that shapes whose other
   * dimensions overflow are rejected rather than silently loaded as empty. */
  for (int i = 0; i < ndim; i++) {
    uint64_t d = shape[i] ? (uint64_t)shape[i] : 1;
    if (n > (UINT64_C(1) << 62) / d) return false;
    n *= d;
  }
  if (itemsize && n > (UINT64_C(1) << 62) / itemsize) return false;
  *count = zero ? 0 : n;
  return true;
}

/* ---- Arrays ---- */

nv_status nv__io_array_alloc(const char *op, size_t nbytes, nv_dtype dtype, const int *shape,
                             int ndim, const int64_t *strides, nv_array **out, void **data) {
  nv__buffer *b = nv__buffer_alloc(nbytes);
  if (!b) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", op,
                               nbytes);
  nv__scope_suspend();
  nv_array *a = nv__array_from_buffer(b, 0, dtype, shape, ndim, strides);
  nv__scope_resume();
  nv__buffer_release(b);
  nv_status st = nv_array_status(a);
  if (st != NV_OK) {
    nv_release(a);
    return st;
  }
  *data = b->ptr;
  *out = a;
  return NV_OK;
}

nv_status nv__io_array(const nv__io_src *s, size_t off, size_t nbytes, nv_dtype dtype,
                       const int *shape, int ndim, const int64_t *strides, nv_array **out) {
  size_t item = nv_dtype_size(dtype);
  if (s->map && nbytes && ((uintptr_t)(s->data + off)) % item == 0) {
    nv__buffer *b = nv__buffer_wrap((void *)(s->data + off), nbytes, NV__BUF_MAPPED,
                                    map_release, s->map);
    if (!b) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    atomic_fetch_add_explicit(&s->map->refs, 1, memory_order_relaxed);
    nv__scope_suspend();
    nv_array *a = nv__array_from_buffer(b, 0, dtype, shape, ndim, strides);
    nv__scope_resume();
    nv__buffer_release(b);
    nv_status st = nv_array_status(a);
    if (st != NV_OK) {
      nv_release(a);
      return st;
    }
    *out = a;
    return NV_OK;
  }
  if (s->owner && nbytes && off % item == 0) {
    nv__scope_suspend();
    nv_array *a = nv__array_from_buffer(s->owner, (int64_t)(off / item), dtype, shape, ndim,
                                        strides);
    nv__scope_resume();
    nv_status st = nv_array_status(a);
    if (st != NV_OK) {
      nv_release(a);
      return st;
    }
    *out = a;
    return NV_OK;
  }
  void *data = NULL;
  nv_status st = nv__io_array_alloc(s->op, nbytes, dtype, shape, ndim, strides, out, &data);
  if (st == NV_OK && nbytes) memcpy(data, s->data + off, nbytes);
  return st;
}

/* ---- Name sets: open addressing over FNV-1a hashes ---- */

static uint64_t fnv1a(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static bool names_grow(nv__io_names *h) {
  size_t cap = h->cap ? h->cap * 2 : 64;
  const char **keys = nv__calloc(cap, sizeof *keys);
  size_t *lens = nv__calloc(cap, sizeof *lens);
  if (!keys || !lens) {
    nv__free(keys);
    nv__free(lens);
    return false;
  }
  for (size_t i = 0; i < h->cap; i++) {
    if (!h->keys[i]) continue;
    size_t j = fnv1a(h->keys[i], h->lens[i]) & (cap - 1);
    while (keys[j]) j = (j + 1) & (cap - 1);
    keys[j] = h->keys[i];
    lens[j] = h->lens[i];
  }
  nv__free(h->keys);
  nv__free(h->lens);
  h->keys = keys;
  h->lens = lens;
  h->cap = cap;
  return true;
}

int nv__io_names_add(nv__io_names *h, const char *key, size_t len) {
  if ((h->n + 1) * 2 > h->cap && !names_grow(h)) return -1;
  size_t j = fnv1a(key, len) & (h->cap - 1);
  while (h->keys[j]) {
    if (h->lens[j] == len && !memcmp(h->keys[j], key, len)) return 0;
    j = (j + 1) & (h->cap - 1);
  }
  h->keys[j] = key;
  h->lens[j] = len;
  h->n++;
  return 1;
}

void nv__io_names_free(nv__io_names *h) {
  nv__free(h->keys);
  nv__free(h->lens);
  *h = (nv__io_names){0};
}

/* ---- Writer ---- */

static atomic_long tmp_counter;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

nv_status nv__io_writer_open(nv__io_writer *w, const char *op, const char *path,
                             const char *ext, bool open_file) {
  *w = (nv__io_writer){.op = op};
  if (!path || !*path) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: empty path", op);
  size_t n = strlen(path), k = ends_with(path, ext) ? 0 : strlen(ext);
  w->path = nv__malloc(n + k + 1);
  w->tmp = nv__calloc(n + k + 64, 1); /* empty until a temporary exists (abort removes it) */
  if (!w->path || !w->tmp) {
    nv__io_writer_abort(w);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  memcpy(w->path, path, n);
  memcpy(w->path + n, ext, k);
  w->path[n + k] = 0;
  /* The finished file is renamed over the path, which would replace a FIFO (its reader left
   * waiting), a device node or a socket with a regular file: only a regular file, or nothing,
   * is replaced. */
  struct stat st;
  if (stat(w->path, &st) == 0 && !S_ISREG(st.st_mode)) {
    nv_status s = nv__set_error(NV_ERR_IO, "%s: %s: not a regular file (%s)", op, w->path,
                                file_kind(st.st_mode));
    nv__io_writer_abort(w);
    return s;
  }
  /* A unique name in the same directory, so the final rename is atomic; created with the
   * usual permissions (0666 less the umask) rather than mkstemp's 0600. */
  int fd = -1;
  for (int tries = 0; tries < 100 && fd < 0; tries++) {
    snprintf(w->tmp, n + k + 64, "%s.nvtmp.%ld.%ld", w->path, (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    int e = errno;
    nv__free(w->tmp);
    w->tmp = NULL;
    nv_status st = nv__set_error(NV_ERR_IO, "%s: %s: cannot create: %s", op, w->path,
                                 strerror(e));
    nv__io_writer_abort(w);
    return st;
  }
  if (!open_file) {
    close(fd);
    return NV_OK;
  }
  w->f = fdopen(fd, "wb");
  if (!w->f) {
    close(fd);
    nv_status st = nv__set_error(NV_ERR_IO, "%s: %s: %s", op, w->path, strerror(errno));
    nv__io_writer_abort(w);
    return st;
  }
  return NV_OK;
}

void nv__io_write(nv__io_writer *w, const void *p, size_t n) {
  if (w->status != NV_OK || !n) return;
  if (fwrite(p, 1, n, w->f) != n)
    w->status = nv__set_error(NV_ERR_IO, "%s: %s: write failed: %s", w->op, w->path,
                              strerror(errno));
}

static void writer_free(nv__io_writer *w) {
  nv__free(w->path);
  nv__free(w->tmp);
  w->path = w->tmp = NULL;
}

nv_status nv__io_writer_commit(nv__io_writer *w) {
  if (w->f) {
    if (fclose(w->f) != 0 && w->status == NV_OK)
      w->status = nv__set_error(NV_ERR_IO, "%s: %s: write failed: %s", w->op, w->path,
                                strerror(errno));
    w->f = NULL;
  }
  nv_status st = w->status;
  if (st == NV_OK && rename(w->tmp, w->path) != 0)
    st = nv__set_error(NV_ERR_IO, "%s: %s: cannot rename the finished file into place: %s",
                       w->op, w->path, strerror(errno));
  if (st != NV_OK) unlink(w->tmp);
  writer_free(w);
  return st;
}

void nv__io_writer_abort(nv__io_writer *w) {
  if (w->f) fclose(w->f);
  w->f = NULL;
  if (w->tmp && *w->tmp) unlink(w->tmp);
  writer_free(w);
}

/* ---- Arrays to write ---- */

nv_status nv__io_eval_flat(const char *op, nv_array *const *xs, size_t n, nv_array **flat) {
  for (size_t i = 0; i < n; i++) flat[i] = NULL;
  for (size_t i = 0; i < n; i++)
    if (!xs[i]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL array", op);
  nv__scope_suspend();
  nv_status st = NV_OK;
  for (size_t i = 0; i < n && st == NV_OK; i++) {
    flat[i] = nv_contiguous(xs[i]);
    st = nv_array_status(flat[i]);
  }
  nv__scope_resume();
  if (st == NV_OK) st = nv_eval(flat, n);
  for (size_t i = 0; i < n && st == NV_OK; i++) st = nv__buffer_host(nv__out(flat[i])->buf);
  if (st != NV_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", nv_last_error());
    st = nv__set_error(st, "%s: %s", op, why);
    for (size_t i = 0; i < n; i++) {
      nv_release(flat[i]);
      flat[i] = NULL;
    }
  }
  return st;
}

const void *nv__io_bytes(const nv_array *x) {
  const nv__output *o = nv__out(x);
  return o->size ? nv__output_ptr(o) : NULL; /* host data made valid by nv__io_eval_flat */
}

/* ---- nv_load ---- */

nv_status nv_load(const char *path, nv_map **arrays, nv_io_metadata **meta) {
  if (!path || !arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load: NULL argument");
  nv_map *m = NULL;
  nv_io_metadata *md = NULL;
  nv_status st;
  if (ends_with(path, ".npy")) {
    nv_array *x = NULL;
    st = nv_load_npy(path, &x);
    if (st == NV_OK) {
      m = nv_map_new();
      st = m ? nv_map_set(m, "arr_0", x) : NV_ERR_OUT_OF_MEMORY;
      nv_release(x);
    }
  } else if (ends_with(path, ".npz")) {
    st = nv_load_npz(path, &m);
  } else if (ends_with(path, ".safetensors")) {
    st = nv_load_safetensors(path, &m, meta ? &md : NULL);
  } else if (ends_with(path, ".gguf")) {
    st = nv_load_gguf(path, NV_GGUF_RAW, &m, meta ? &md : NULL);
  } else {
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "load: %s: unknown extension (expected .npy, .npz, .safetensors or "
                         ".gguf)", path);
  }
  if (st == NV_OK && meta && !md && !(md = nv_io_metadata_new()))
    st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "load: out of memory");
  if (st != NV_OK) {
    nv_map_free(m);
    nv_io_metadata_free(md);
    return st;
  }
  *arrays = m;
  if (meta) *meta = md;
  return NV_OK;
}
