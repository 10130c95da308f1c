/* NumPy's .npz: a zip archive of .npy files, read and written with minizip over zlib (stored
 * and deflated entries, ZIP64 fields). Archives are read from memory (a file mapping or the
 * caller's bytes) through minizip's I/O hooks, so every read is bounds-checked by us. */
#include <stdlib.h>
#include <minizip/unzip.h>
#include <minizip/zip.h>
#include <zlib.h>

#include "io/io_internal.h"

/* Deflate cannot expand data by more than about 1032:1, so an entry claiming more than that
 * over its compressed size is corrupt (a "zip bomb" guard that rejects before allocating). */
#define DEFLATE_MAX_RATIO 1032

/* ---- minizip I/O over a byte range ---- */

typedef struct memfile {
  const unsigned char *data;
  size_t size, pos;
} memfile;

static voidpf ZCALLBACK mem_open(voidpf opaque, const void *name, int mode) {
  (void)name;
  if ((mode & ZLIB_FILEFUNC_MODE_READWRITEFILTER) != ZLIB_FILEFUNC_MODE_READ) return NULL;
  memfile *f = opaque;
  f->pos = 0;
  return f;
}

static uLong ZCALLBACK mem_read(voidpf opaque, voidpf stream, void *buf, uLong size) {
  (void)opaque;
  memfile *f = stream;
  size_t n = f->pos < f->size ? f->size - f->pos : 0;
  if (n > size) n = size;
  if (n) memcpy(buf, f->data + f->pos, n);
  f->pos += n;
  return (uLong)n;
}

static uLong ZCALLBACK mem_write(voidpf opaque, voidpf stream, const void *buf, uLong size) {
  (void)opaque, (void)stream, (void)buf, (void)size;
  return 0;
}

static ZPOS64_T ZCALLBACK mem_tell(voidpf opaque, voidpf stream) {
  (void)opaque;
  return ((memfile *)stream)->pos;
}

static long ZCALLBACK mem_seek(voidpf opaque, voidpf stream, ZPOS64_T off, int origin) {
  (void)opaque;
  memfile *f = stream;
  uint64_t base = origin == ZLIB_FILEFUNC_SEEK_SET   ? 0
                  : origin == ZLIB_FILEFUNC_SEEK_CUR ? f->pos
                                                     : f->size;
  if (origin != ZLIB_FILEFUNC_SEEK_SET && origin != ZLIB_FILEFUNC_SEEK_CUR &&
      origin != ZLIB_FILEFUNC_SEEK_END)
    return -1;
  if (off > f->size || base + off > f->size) return -1;
  f->pos = (size_t)(base + off);
  return 0;
}

static int ZCALLBACK mem_close(voidpf opaque, voidpf stream) {
  (void)opaque, (void)stream;
  return 0;
}

static int ZCALLBACK mem_error(voidpf opaque, voidpf stream) {
  (void)opaque, (void)stream;
  return 0;
}

/* ---- Reading ---- */

/* Reads the current entry (already checked: `size` bytes) into a new buffer and parses it. */
static nv_status read_entry(const nv__io_src *s, unzFile uf, const char *name, uint64_t size,
                            nv_array **out) {
  nv__buffer *buf = nv__buffer_alloc(size ? (size_t)size : 1);
  if (!buf) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "entry %.64s: out of memory", name);
  nv_status st = NV_OK;
  if (unzOpenCurrentFile(uf) != UNZ_OK) {
    st = nv__io_error(s, NV_ERR_IO, "entry %.64s: cannot open its data", name);
  } else {
    uint64_t got = 0;
    while (got < size) {
      unsigned chunk = size - got > (1u << 30) ? 1u << 30 : (unsigned)(size - got);
      int r = unzReadCurrentFile(uf, (char *)buf->ptr + got, chunk);
      if (r <= 0) break;
      got += (uint64_t)r;
    }
    int close = unzCloseCurrentFile(uf);
    if (got != size)
      st = nv__io_error(s, NV_ERR_IO, "entry %.64s: corrupt or truncated data (%llu of %llu "
                        "bytes)", name, (unsigned long long)got, (unsigned long long)size);
    else if (close == UNZ_CRCERROR)
      st = nv__io_error(s, NV_ERR_IO, "entry %.64s: CRC mismatch", name);
    else if (close != UNZ_OK)
      st = nv__io_error(s, NV_ERR_IO, "entry %.64s: corrupt data", name);
  }
  if (st == NV_OK) {
    char label[320];
    snprintf(label, sizeof label, "%s[%.256s]", s->name, name);
    nv__io_src sub = {s->op, label, buf->ptr, (size_t)size, NULL, buf};
    st = nv__npy_parse(&sub, out);
  }
  nv__buffer_release(buf);
  return st;
}

/* Checks the current entry's header fields and returns its name (new string) and size. */
static nv_status entry_info(const nv__io_src *s, unzFile uf, char **name, uint64_t *size) {
  unz_file_info64 info;
  if (unzGetCurrentFileInfo64(uf, &info, NULL, 0, NULL, 0, NULL, 0) != UNZ_OK)
    return nv__io_error(s, NV_ERR_IO, "a corrupt central directory entry");
  char *n = nv__malloc(info.size_filename + 1);
  if (!n) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  if (unzGetCurrentFileInfo64(uf, &info, n, info.size_filename + 1, NULL, 0, NULL, 0) != UNZ_OK) {
    nv__free(n);
    return nv__io_error(s, NV_ERR_IO, "a corrupt central directory entry");
  }
  n[info.size_filename] = 0;
  nv_status st = NV_OK;
  if (strlen(n) != info.size_filename)
    st = nv__io_error(s, NV_ERR_IO, "an entry name holds a NUL character");
  else if (info.flag & 1)
    st = nv__io_error(s, NV_ERR_UNSUPPORTED, "entry %.64s is encrypted", n);
  else if (info.compression_method != 0 && info.compression_method != Z_DEFLATED)
    st = nv__io_error(s, NV_ERR_UNSUPPORTED, "entry %.64s uses compression method %lu (only "
                      "stored and deflated are supported)", n, info.compression_method);
  else if (info.compressed_size > s->size)
    st = nv__io_error(s, NV_ERR_IO, "entry %.64s: %llu compressed bytes exceed the archive", n,
                      (unsigned long long)info.compressed_size);
  else if (info.compression_method == 0 ? info.uncompressed_size != info.compressed_size
                                        : info.uncompressed_size / DEFLATE_MAX_RATIO >
                                              info.compressed_size)
    st = nv__io_error(s, NV_ERR_IO, "entry %.64s: %llu uncompressed bytes cannot come from %llu "
                      "compressed bytes", n, (unsigned long long)info.uncompressed_size,
                      (unsigned long long)info.compressed_size);
  if (st != NV_OK) {
    nv__free(n);
    return st;
  }
  *name = n;
  *size = info.uncompressed_size;
  return NV_OK;
}

/* The archive must end with a complete end-of-central-directory record (22 bytes, then its
 * comment), as Python's zipfile also requires; minizip alone accepts a few bytes cut off. */
static bool has_end_record(const nv__io_src *s) {
  if (s->size < 22) return false;
  size_t lowest = s->size > 22 + 65535 ? s->size - 22 - 65535 : 0;
  for (size_t at = s->size - 22 + 1; at-- > lowest;) {
    const unsigned char *p = s->data + at;
    if (p[0] == 'P' && p[1] == 'K' && p[2] == 5 && p[3] == 6 &&
        at + 22 + ((size_t)p[20] | (size_t)p[21] << 8) == s->size)
      return true;
  }
  return false;
}

nv_status nv__npz_parse(const nv__io_src *s, nv_map **arrays) {
  if (!has_end_record(s))
    return nv__io_error(s, NV_ERR_IO, "not a zip archive, or truncated (no complete end of "
                        "central directory record)");
  memfile mf = {s->data, s->size, 0};
  zlib_filefunc64_def io = {mem_open, mem_read, mem_write, mem_tell,
                            mem_seek, mem_close, mem_error, &mf};
  unzFile uf = unzOpen2_64("npz", &io);
  if (!uf) return nv__io_error(s, NV_ERR_IO, "not a zip archive or a corrupt one");
  nv_map *m = nv_map_new();
  /* Keys live until the map is built: the duplicate set refers to them. */
  char **keys = NULL;
  size_t nkeys = 0, capkeys = 0;
  nv__io_names seen = {0};
  nv_status st = m ? NV_OK : nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  int r = st == NV_OK ? unzGoToFirstFile(uf) : UNZ_OK;
  if (st == NV_OK && r != UNZ_OK && r != UNZ_END_OF_LIST_OF_FILE)
    st = nv__io_error(s, NV_ERR_IO, "a corrupt central directory");
  while (st == NV_OK && r == UNZ_OK) {
    char *name = NULL;
    uint64_t size = 0;
    st = entry_info(s, uf, &name, &size);
    if (st != NV_OK) break;
    size_t len = strlen(name);
    if (len > 4 && !strcmp(name + len - 4, ".npy")) name[len -= 4] = 0;
    if (nkeys == capkeys) {
      size_t nc = capkeys ? capkeys * 2 : 16;
      char **k = nv__realloc(keys, nc * sizeof *k);
      if (!k) {
        nv__free(name);
        st = nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
        break;
      }
      keys = k;
      capkeys = nc;
    }
    keys[nkeys++] = name;
    int added = nv__io_names_add(&seen, name, len);
    if (added <= 0) {
      st = added < 0 ? nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory")
                     : nv__io_error(s, NV_ERR_IO, "entry \"%.64s\" appears twice", name);
      break;
    }
    nv_array *a = NULL;
    st = read_entry(s, uf, name, size, &a);
    if (st == NV_OK) st = nv__map_append(m, name, a);
    nv_release(a);
    if (st != NV_OK) break;
    r = unzGoToNextFile(uf);
    if (r != UNZ_OK && r != UNZ_END_OF_LIST_OF_FILE)
      st = nv__io_error(s, NV_ERR_IO, "a corrupt central directory");
  }
  unzClose(uf);
  nv__io_names_free(&seen);
  for (size_t i = 0; i < nkeys; i++) nv__free(keys[i]);
  nv__free(keys);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *arrays = m;
  return NV_OK;
}

nv_status nv_load_npz(const char *path, nv_map **arrays) {
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_npz: NULL output");
  nv__io_src s;
  nv_status st = nv__io_open("load_npz", path, &s);
  if (st != NV_OK) return st;
  st = nv__npz_parse(&s, arrays);
  nv__io_close(&s);
  return st;
}

nv_status nv_load_npz_from_memory(const void *data, size_t size, nv_map **arrays) {
  if ((!data && size) || !arrays)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_npz_from_memory: NULL argument");
  static const unsigned char none[1];
  nv__io_src s = {"load_npz_from_memory", "<memory>", data ? data : none, size, NULL, NULL};
  return nv__npz_parse(&s, arrays);
}

/* ---- Writing ---- */

static nv_status write_entry(const char *op, const char *path, zipFile zf, const char *key,
                             nv_array *x, int method) {
  size_t kl = strlen(key);
  char *name = nv__malloc(kl + 5);
  if (!name) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  memcpy(name, key, kl);
  memcpy(name + kl, ".npy", 5);
  char *hdr = NULL;
  size_t hl = 0;
  nv_status st = nv__npy_header(op, nv_array_dtype(x), nv_array_shape(x), nv_array_ndim(x),
                                &hdr, &hl);
  /* A fixed timestamp (1980-01-01, the zip epoch) keeps archives reproducible. */
  zip_fileinfo zi = {{0, 0, 0, 1, 0, 1980}, 0, 0, 0};
  if (st == NV_OK &&
      zipOpenNewFileInZip64(zf, name, &zi, NULL, 0, NULL, 0, NULL, method,
                            method ? Z_DEFAULT_COMPRESSION : 0, 1) != ZIP_OK)
    st = nv__set_error(NV_ERR_IO, "%s: %s: cannot add entry %s", op, path, name);
  if (st == NV_OK) {
    bool ok = zipWriteInFileInZip(zf, hdr, (unsigned)hl) == ZIP_OK;
    const char *p = nv__io_bytes(x);
    for (size_t left = nv_array_nbytes(x); ok && left;) {
      unsigned chunk = left > (1u << 30) ? 1u << 30 : (unsigned)left;
      ok = zipWriteInFileInZip(zf, p, chunk) == ZIP_OK;
      p += chunk;
      left -= chunk;
    }
    if (zipCloseFileInZip(zf) != ZIP_OK) ok = false;
    if (!ok) st = nv__set_error(NV_ERR_IO, "%s: %s: writing entry %s failed", op, path, name);
  }
  nv__free(hdr);
  nv__free(name);
  return st;
}

static nv_status savez(const char *op, const char *path, const nv_map *arrays, int method) {
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL map", op);
  size_t n = nv_map_size(arrays);
  nv_array **xs = nv__calloc(n + 1, sizeof *xs), **flat = nv__calloc(n + 1, sizeof *flat);
  nv_status st = xs && flat ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n && st == NV_OK; i++) xs[i] = nv_map_value(arrays, i);
  if (st == NV_OK) st = nv__io_eval_flat(op, xs, n, flat);
  nv__io_writer w;
  if (st == NV_OK) st = nv__io_writer_open(&w, op, path, ".npz", false);
  if (st == NV_OK) {
    zipFile zf = zipOpen64(w.tmp, APPEND_STATUS_CREATE);
    if (!zf) st = nv__set_error(NV_ERR_IO, "%s: %s: cannot create the archive", op, w.path);
    for (size_t i = 0; i < n && st == NV_OK; i++)
      st = write_entry(op, w.path, zf, nv_map_key(arrays, i), flat[i], method);
    if (zf && zipClose(zf, NULL) != ZIP_OK && st == NV_OK)
      st = nv__set_error(NV_ERR_IO, "%s: %s: cannot finish the archive", op, w.path);
    if (st == NV_OK) st = nv__io_writer_commit(&w);
    else nv__io_writer_abort(&w);
  }
  for (size_t i = 0; flat && i < n; i++) nv_release(flat[i]);
  nv__free(xs);
  nv__free(flat);
  return st;
}

nv_status nv_savez(const char *path, const nv_map *arrays) {
  return savez("savez", path, arrays, 0);
}

nv_status nv_savez_compressed(const char *path, const nv_map *arrays) {
  return savez("savez_compressed", path, arrays, Z_DEFLATED);
}
