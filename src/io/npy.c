/* NumPy's .npy format: a magic string, a version, a header that is a Python dict literal
 * ({'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }), then the raw data. The header
 * is read by a small strict parser of exactly that literal subset (NumPy itself evaluates it
 * with ast.literal_eval): no recursion, every byte consumed or rejected. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu/pool.h"
#include "io/io_internal.h"

#define NPY_MAGIC "\x93NUMPY"

typedef struct npy_header {
  nv_dtype dtype;
  bool swap; /* big-endian data: every element (each float of a complex) is byte-swapped */
  bool fortran;
  int ndim;
  int64_t shape[NV__MAX_DIMS];
} npy_header;

/* A cursor over the header text. */
typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes (NumPy's keys and descr never need them). */
static bool parse_str(cursor *c, const char **s, size_t *n) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char q = *c->p++;
  const char *start = c->p;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || *c->p == '\n') return false;
    c->p++;
  }
  if (c->p >= c->end) return false;
  *s = start;
  *n = (size_t)(c->p - start);
  c->p++;
  return true;
}

static bool word(cursor *c, const char *w) {
  skip_ws(c);
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return false;
  c->p += n;
  return true;
}

/* A shape tuple: "()", "(3,)", "(3, 4)", "(3, 4,)"; dimensions may carry Python 2's "L". */
static bool parse_shape(cursor *c, npy_header *h, const char **why) {
  *why = "the shape is not a tuple of non-negative integers";
  if (!eat(c, '(')) return false;
  h->ndim = 0;
  if (eat(c, ')')) return true;
  for (;;) {
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) {
        *why = "a dimension of the shape is too large";
        return false;
      }
      v = v * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++;
    if (h->ndim == NV__MAX_DIMS) {
      *why = "the shape has more than 64 dimensions";
      return false;
    }
    h->shape[h->ndim++] = v;
    bool comma = eat(c, ',');
    if (eat(c, ')')) return h->ndim > 1 || comma; /* "(3)" is an int in Python, not a tuple */
    if (!comma) return false;
  }
}

/* The dtype of a descr string; NV_ERR_IO for unknown, NV_ERR_UNSUPPORTED for NumPy dtypes
 * nuvec lacks. */
static nv_status parse_descr(const nv__io_src *s, const char *d, size_t n, npy_header *h) {
  static const struct {
    const char *code;
    nv_dtype dtype;
  } known[] = {{"b1", NV_DTYPE_BOOL},    {"u1", NV_DTYPE_UINT8},   {"u2", NV_DTYPE_UINT16},
               {"u4", NV_DTYPE_UINT32},  {"u8", NV_DTYPE_UINT64},  {"i1", NV_DTYPE_INT8},
               {"i2", NV_DTYPE_INT16},   {"i4", NV_DTYPE_INT32},   {"i8", NV_DTYPE_INT64},
               {"f2", NV_DTYPE_FLOAT16}, {"f4", NV_DTYPE_FLOAT32}, {"f8", NV_DTYPE_FLOAT64},
               {"c8", NV_DTYPE_COMPLEX64}, {"V2", NV_DTYPE_BFLOAT16}};
  if (n >= 2 && n < 16 && strchr("<>|=", d[0])) {
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
      if (n - 1 != strlen(known[i].code) || memcmp(d + 1, known[i].code, n - 1)) continue;
      size_t item = nv_dtype_size(known[i].dtype);
      /* '|' (no byte order) is what NumPy writes for one-byte types and void. */
      if (d[0] == '|' && item != 1 && known[i].dtype != NV_DTYPE_BFLOAT16) break;
      h->dtype = known[i].dtype;
      h->swap = d[0] == '>' && item > 1;
      return NV_OK;
    }
    /* A well-formed NumPy type code (kind letter, then digits or a datetime unit) that nuvec
     * has no dtype for is unsupported rather than malformed. */
    size_t k = 2;
    while (k < n && d[k] >= '0' && d[k] <= '9') k++;
    bool unit = k < n && d[k] == '[' && d[n - 1] == ']';
    if (strchr("biufcVOSUMma", d[1]) && (k == n || unit))
      return nv__io_error(s, NV_ERR_UNSUPPORTED, "the NumPy dtype '%.*s' has no nuvec dtype",
                          (int)n, d);
  }
  return nv__io_error(s, NV_ERR_IO, "unknown dtype descr '%.*s'", (int)(n > 32 ? 32 : n), d);
}

/* Parses the header dict (after the preamble) into `h`. */
static nv_status parse_dict(const nv__io_src *s, const char *text, size_t len, npy_header *h) {
  cursor c = {text, text + len};
  const char *why = "the header is not a dict";
  bool seen[3] = {false, false, false};
  if (!eat(&c, '{')) goto bad;
  while (!eat(&c, '}')) {
    const char *k;
    size_t kn;
    why = "a header key is not a quoted string";
    if (!parse_str(&c, &k, &kn)) goto bad;
    why = "a header key has no ':'";
    if (!eat(&c, ':')) goto bad;
    int which = kn == 5 && !memcmp(k, "descr", 5)           ? 0
                : kn == 13 && !memcmp(k, "fortran_order", 13) ? 1
                : kn == 5 && !memcmp(k, "shape", 5)          ? 2
                                                             : -1;
    if (which < 0)
      return nv__io_error(s, NV_ERR_IO, "unexpected header key '%.*s'", (int)(kn > 32 ? 32 : kn),
                          k);
    if (seen[which]) return nv__io_error(s, NV_ERR_IO, "header key '%.*s' appears twice", (int)kn, k);
    seen[which] = true;
    if (which == 0) {
      const char *d;
      size_t dn;
      why = "'descr' is not a string (structured dtypes are not supported)";
      if (!parse_str(&c, &d, &dn)) goto bad;
      nv_status st = parse_descr(s, d, dn, h);
      if (st != NV_OK) return st;
    } else if (which == 1) {
      why = "'fortran_order' is not True or False";
      if (word(&c, "True")) h->fortran = true;
      else if (word(&c, "False")) h->fortran = false;
      else goto bad;
    } else if (!parse_shape(&c, h, &why)) {
      goto bad;
    }
    if (eat(&c, '}')) break;
    why = "header entries are not separated by ','";
    if (!eat(&c, ',')) goto bad;
  }
  skip_ws(&c);
  why = "unexpected text after the header dict";
  if (c.p != c.end) goto bad;
  if (!seen[0] || !seen[1] || !seen[2])
    return nv__io_error(s, NV_ERR_IO, "the header lacks '%s'",
                        !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
  return NV_OK;
bad:
  return nv__io_error(s, NV_ERR_IO, "malformed header: %s (at byte %zu of the header)", why,
                      (size_t)(c.p - text));
}

typedef struct swap_job {
  unsigned char *dst;
  const unsigned char *src;
  size_t width; /* bytes per swapped unit */
} swap_job;

static void swap_range(void *ctx, int64_t begin, int64_t end) {
  const swap_job *j = ctx;
  size_t w = j->width;
  for (int64_t i = begin; i < end; i++)
    for (size_t b = 0; b < w; b++) j->dst[(size_t)i * w + b] = j->src[(size_t)i * w + w - 1 - b];
}

nv_status nv__npy_parse(const nv__io_src *s, nv_array **out) {
  const unsigned char *p = s->data;
  if (s->size < 10 || memcmp(p, NPY_MAGIC, 6))
    return nv__io_error(s, NV_ERR_IO, "not a .npy file (bad magic string or shorter than 10 bytes)");
  int major = p[6];
  if (major < 1 || major > 3)
    return nv__io_error(s, NV_ERR_IO, "unsupported .npy format version %d.%d", major, p[7]);
  size_t pre = major == 1 ? 10 : 12;
  if (s->size < pre) return nv__io_error(s, NV_ERR_IO, "truncated preamble");
  size_t hlen = major == 1 ? (size_t)p[8] | (size_t)p[9] << 8
                           : (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
                                 (size_t)p[11] << 24;
  if (hlen > s->size - pre)
    return nv__io_error(s, NV_ERR_IO, "header length %zu exceeds the %zu bytes after the preamble",
                        hlen, s->size - pre);
  npy_header h = {0};
  nv_status st = parse_dict(s, (const char *)p + pre, hlen, &h);
  if (st != NV_OK) return st;
  size_t item = nv_dtype_size(h.dtype);
  uint64_t count;
  if (!nv__io_shape_count(h.shape, h.ndim, item, &count))
    return nv__io_error(s, NV_ERR_IO, "the shape's size overflows or a dimension exceeds 2^31-1");
  size_t off = pre + hlen, avail = s->size - off;
  uint64_t nbytes = count * item;
  if (nbytes != avail)
    return nv__io_error(s, NV_ERR_IO, "the header declares %llu data bytes but the file holds %zu",
                        (unsigned long long)nbytes, avail);
  int shape[NV__MAX_DIMS];
  int64_t strides[NV__MAX_DIMS], acc = 1;
  for (int i = 0; i < h.ndim; i++) shape[i] = (int)h.shape[i];
  /* Fortran order is column-major: the first axis varies fastest. */
  for (int i = 0; i < h.ndim && h.fortran; i++) {
    strides[i] = acc;
    acc *= h.shape[i] ? h.shape[i] : 1;
  }
  const int64_t *str = h.fortran && h.ndim > 1 ? strides : NULL;
  if (!h.swap) return nv__io_array(s, off, (size_t)nbytes, h.dtype, shape, h.ndim, str, out);
  void *data;
  st = nv__io_array_alloc(s->op, (size_t)nbytes, h.dtype, shape, h.ndim, str, out, &data);
  if (st != NV_OK) return st;
  size_t width = h.dtype == NV_DTYPE_COMPLEX64 ? 4 : item;
  swap_job job = {data, p + off, width};
  nv__parallel_for((int64_t)(nbytes / width), 1 << 16, swap_range, &job);
  return NV_OK;
}

/* ---- Writing ---- */

static const char *descr_of(nv_dtype dt) {
  static const char *names[NV_DTYPE_COUNT] = {"|b1", "|u1", "<u2", "<u4", "<u8", "|i1", "<i2",
                                              "<i4", "<i8", "<f2", "<V2", "<f4", "<f8", "<c8"};
  return (unsigned)dt < NV_DTYPE_COUNT ? names[dt] : NULL;
}

nv_status nv__npy_header(const char *op, nv_dtype dtype, const int *shape, int ndim, char **out,
                         size_t *len) {
  size_t cap = 128 + (size_t)ndim * 13;
  char *dict = nv__malloc(cap), *hdr = NULL;
  if (!dict) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  size_t n = (size_t)snprintf(dict, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                              descr_of(dtype));
  for (int i = 0; i < ndim; i++)
    n += (size_t)snprintf(dict + n, cap - n, i ? ", %d" : "%d", shape[i]);
  n += (size_t)snprintf(dict + n, cap - n, "%s), }", ndim == 1 ? "," : "");
  /* NumPy pads the header with spaces and a final newline so the data starts at a multiple of
   * 64 bytes; version 2.0 (a 4-byte length) only when the header outgrows 65535 bytes. */
  size_t pre = n + 1 + 10 > 65535 ? 12 : 10;
  size_t total = (pre + n + 1 + 63) / 64 * 64;
  hdr = nv__malloc(total);
  if (!hdr) {
    nv__free(dict);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  size_t hl = total - pre;
  memcpy(hdr, NPY_MAGIC, 6);
  hdr[6] = pre == 10 ? 1 : 2;
  hdr[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) hdr[8 + i] = (char)(hl >> (8 * i));
  memcpy(hdr + pre, dict, n);
  memset(hdr + pre + n, ' ', total - pre - n - 1);
  hdr[total - 1] = '\n';
  nv__free(dict);
  *out = hdr;
  *len = total;
  return NV_OK;
}

/* ---- Public entry points ---- */

nv_status nv_load_npy(const char *path, nv_array **out) {
  nv__io_src s;
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_npy: NULL output");
  nv_status st = nv__io_open("load_npy", path, &s);
  if (st != NV_OK) return st;
  st = nv__npy_parse(&s, out);
  nv__io_close(&s);
  return st;
}

nv_status nv_load_npy_from_memory(const void *data, size_t size, nv_array **out) {
  if ((!data && size) || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_npy_from_memory: NULL argument");
  static const unsigned char none[1];
  nv__io_src s = {"load_npy_from_memory", "<memory>", data ? data : none, size, NULL, NULL};
  return nv__npy_parse(&s, out);
}

nv_status nv_save(const char *path, nv_array *x) {
  if (!x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "save: NULL array");
  nv_array *flat;
  nv_status st = nv__io_eval_flat("save", &x, 1, &flat);
  if (st != NV_OK) return st;
  nv__io_writer w;
  st = nv__io_writer_open(&w, "save", path, ".npy", true);
  if (st != NV_OK) {
    nv_release(flat);
    return st;
  }
  char *hdr;
  size_t hl;
  st = nv__npy_header("save", nv_array_dtype(flat), nv_array_shape(flat), nv_array_ndim(flat),
                      &hdr, &hl);
  if (st != NV_OK) {
    nv__io_writer_abort(&w);
    nv_release(flat);
    return st;
  }
  nv__io_write(&w, hdr, hl);
  nv__io_write(&w, nv__io_bytes(flat), nv_array_nbytes(flat));
  nv__free(hdr);
  nv_release(flat);
  return nv__io_writer_commit(&w);
}
