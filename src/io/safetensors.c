/* safetensors: an 8-byte little-endian header length N, N bytes of JSON describing each
 * tensor ({"dtype", "shape", "data_offsets": [begin, end]} relative to the data section) and
 * an optional "__metadata__" object of strings, then the data. The JSON is read by a strict
 * reader written for this header: UTF-8 checked, escapes decoded, integers exact, nesting
 * bounded (unknown fields are skipped up to a small depth), duplicate keys rejected. */
#include <stdlib.h>

#include "io/io_internal.h"

/* The reference implementation's header limit. */
#define ST_MAX_HEADER 100000000u
/* Nesting allowed inside values we skip (unknown fields). */
#define ST_MAX_DEPTH 32

typedef struct js {
  const nv__io_src *src;
  const unsigned char *start, *p, *end;
  const char *err;
} js;

static bool fail(js *j, const char *why) {
  if (!j->err) j->err = why;
  return false;
}

static void ws(js *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static bool eat(js *j, char c) {
  ws(j);
  if (j->p < j->end && *j->p == (unsigned char)c) {
    j->p++;
    return true;
  }
  return false;
}

static int hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Length of the valid UTF-8 sequence at p (0 if invalid): no overlongs, surrogates, or code
 * points above U+10FFFF. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!n || (size_t)(end - p) < n) return 0;
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f)); return 3;
  }
  o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A JSON string, decoded into a new NUL-terminated buffer (`out` NULL: only checked). The
 * decoded text is never longer than the source, which bounds the allocation by the header. */
static bool string(js *j, char **out, size_t *len) {
  ws(j);
  if (j->p >= j->end || *j->p != '"') return fail(j, "expected a string");
  const unsigned char *q = ++j->p;
  while (q < j->end && *q != '"') q += *q == '\\' && q + 1 < j->end ? 2 : 1;
  if (q >= j->end) return fail(j, "unterminated string");
  char *buf = out ? nv__malloc((size_t)(q - j->p) + 1) : NULL;
  if (out && !buf) return fail(j, "out of memory");
  size_t n = 0;
  while (*j->p != '"') {
    unsigned c = *j->p;
    if (c < 0x20) goto bad_ctl;
    if (c != '\\') {
      size_t k = utf8_len(j->p, j->end);
      if (!k) goto bad_utf8;
      if (buf) memcpy(buf + n, j->p, k);
      n += k;
      j->p += k;
      continue;
    }
    char e = (char)j->p[1];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *at = e ? strchr(from, e) : NULL;
    if (at) {
      if (buf) buf[n] = to[at - from];
      n++;
      j->p += 2;
      continue;
    }
    if (e != 'u' || j->end - j->p < 6) goto bad_esc;
    int cp = hex4(j->p + 2);
    if (cp < 0) goto bad_esc;
    j->p += 6;
    if (cp >= 0xdc00 && cp <= 0xdfff) goto bad_esc;
    if (cp >= 0xd800 && cp <= 0xdbff) { /* a surrogate pair */
      int lo = j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' ? hex4(j->p + 2) : -1;
      if (lo < 0xdc00 || lo > 0xdfff) goto bad_esc;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      j->p += 6;
    }
    char tmp[4];
    size_t k = put_utf8(buf ? buf + n : tmp, (uint32_t)cp);
    n += k;
  }
  j->p++;
  if (buf) {
    buf[n] = 0;
    *out = buf;
    *len = n;
  }
  return true;
bad_ctl:
  nv__free(buf);
  return fail(j, "a control character inside a string");
bad_utf8:
  nv__free(buf);
  return fail(j, "invalid UTF-8 inside a string");
bad_esc:
  nv__free(buf);
  return fail(j, "an invalid escape inside a string");
}

/* A non-negative JSON integer (no sign, fraction or exponent; no leading zeros). */
static bool uint_(js *j, uint64_t *v) {
  ws(j);
  if (j->p >= j->end || *j->p < '0' || *j->p > '9') return fail(j, "expected a non-negative integer");
  if (*j->p == '0' && j->end - j->p > 1 && j->p[1] >= '0' && j->p[1] <= '9')
    return fail(j, "a number with a leading zero");
  uint64_t x = 0;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
    unsigned d = (unsigned)(*j->p++ - '0');
    if (x > (UINT64_MAX - d) / 10) return fail(j, "an integer above 2^64-1");
    x = x * 10 + d;
  }
  if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
    return fail(j, "expected an integer, found a fraction or exponent");
  *v = x;
  return true;
}

static bool literal(js *j, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n)) return fail(j, "an invalid literal");
  j->p += n;
  return true;
}

/* Skips any JSON value, nesting at most ST_MAX_DEPTH deep. */
static bool skip(js *j, int depth) {
  if (depth > ST_MAX_DEPTH) return fail(j, "values nested too deeply");
  ws(j);
  if (j->p >= j->end) return fail(j, "unexpected end of the header");
  unsigned char c = *j->p;
  if (c == '"') return string(j, NULL, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (eat(j, close)) return true;
    do {
      if (c == '{' && (!string(j, NULL, NULL) || !eat(j, ':'))) return fail(j, "expected \"key\":");
      if (!skip(j, depth + 1)) return false;
    } while (eat(j, ','));
    return eat(j, close) || fail(j, "expected ',' or a closing bracket");
  }
  if (c == 't') return literal(j, "true");
  if (c == 'f') return literal(j, "false");
  if (c == 'n') return literal(j, "null");
  if (c == '-' || (c >= '0' && c <= '9')) { /* JSON number grammar */
    if (c == '-') j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return fail(j, "an invalid number");
    if (*j->p == '0') j->p++;
    else while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p < j->end && *j->p == '.') {
      j->p++;
      if (j->p >= j->end || *j->p < '0' || *j->p > '9') return fail(j, "an invalid number");
      while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
      j->p++;
      if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
      if (j->p >= j->end || *j->p < '0' || *j->p > '9') return fail(j, "an invalid number");
      while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    return true;
  }
  return fail(j, "an unexpected character");
}

/* ---- The header ---- */

typedef struct st_tensor {
  char *name;
  size_t name_len;
  nv_dtype dtype;
  int ndim;
  size_t dim0; /* the shape: dims[dim0 .. dim0 + ndim) of the header's pool */
  uint64_t begin, end;
} st_tensor;

/* Shapes live in one pool so a tensor entry costs a small fixed size whatever its rank: the
 * memory the header's tensors take stays a small multiple of the header's own size. */
typedef struct st_header {
  st_tensor *t;
  size_t n, cap;
  int64_t *dims;
  size_t ndims, dims_cap;
  nv_io_metadata *meta;
  nv__io_names names;
} st_header;

static void header_free(st_header *h) {
  for (size_t i = 0; i < h->n; i++) nv__free(h->t[i].name);
  nv__free(h->t);
  nv__free(h->dims);
  nv_io_metadata_free(h->meta);
  nv__io_names_free(&h->names);
}

/* Maps a safetensors dtype name; false with an error set when unknown or unsupported. */
static bool dtype_of(js *j, const char *name, nv_dtype *dt, nv_status *st) {
  static const struct {
    const char *name;
    nv_dtype dt;
  } map[] = {{"BOOL", NV_DTYPE_BOOL},   {"U8", NV_DTYPE_UINT8},     {"I8", NV_DTYPE_INT8},
             {"U16", NV_DTYPE_UINT16},  {"I16", NV_DTYPE_INT16},    {"U32", NV_DTYPE_UINT32},
             {"I32", NV_DTYPE_INT32},   {"U64", NV_DTYPE_UINT64},   {"I64", NV_DTYPE_INT64},
             {"F16", NV_DTYPE_FLOAT16}, {"BF16", NV_DTYPE_BFLOAT16}, {"F32", NV_DTYPE_FLOAT32},
             {"F64", NV_DTYPE_FLOAT64}, {"C64", NV_DTYPE_COMPLEX64}, {"F8_E4M3", NV_DTYPE_UINT8}};
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (!strcmp(name, map[i].name)) {
      *dt = map[i].dt;
      return true;
    }
  static const char *known[] = {"F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2"};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    if (!strcmp(name, known[i])) {
      *st = nv__io_error(j->src, NV_ERR_UNSUPPORTED, "dtype %s has no nuvec dtype", name);
      return false;
    }
  *st = nv__io_error(j->src, NV_ERR_IO, "unknown dtype \"%.32s\"", name);
  return false;
}

static bool push_dim(st_header *h, int64_t d) {
  if (h->ndims == h->dims_cap) {
    size_t nc = h->dims_cap ? h->dims_cap * 2 : 64;
    int64_t *p = nv__realloc(h->dims, nc * sizeof *p);
    if (!p) return false;
    h->dims = p;
    h->dims_cap = nc;
  }
  h->dims[h->ndims++] = d;
  return true;
}

/* One tensor's object. */
static nv_status tensor(js *j, st_header *h, st_tensor *t) {
  bool have[3] = {false, false, false};
  nv_status st = NV_OK;
  if (!eat(j, '{')) return fail(j, "a tensor entry is not an object"), NV_ERR_IO;
  if (eat(j, '}')) goto done;
  do {
    char *key;
    size_t kl;
    if (!string(j, &key, &kl)) return NV_ERR_IO;
    int which = !strcmp(key, "dtype") ? 0 : !strcmp(key, "shape") ? 1
                : !strcmp(key, "data_offsets") ? 2 : -1;
    nv__free(key);
    if (!eat(j, ':')) return fail(j, "expected ':'"), NV_ERR_IO;
    if (which >= 0 && have[which]) return fail(j, "a tensor field appears twice"), NV_ERR_IO;
    if (which >= 0) have[which] = true;
    if (which == 0) {
      char *dn;
      size_t dl;
      if (!string(j, &dn, &dl)) return NV_ERR_IO;
      bool ok = dtype_of(j, dn, &t->dtype, &st);
      nv__free(dn);
      if (!ok) return st;
    } else if (which == 1) {
      if (!eat(j, '[')) return fail(j, "\"shape\" is not an array"), NV_ERR_IO;
      t->ndim = 0;
      t->dim0 = h->ndims;
      if (!eat(j, ']')) {
        do {
          uint64_t d;
          if (t->ndim == NV__MAX_DIMS) return fail(j, "a shape has more than 64 dimensions"), NV_ERR_IO;
          if (!uint_(j, &d)) return NV_ERR_IO;
          if (d > INT32_MAX) return fail(j, "a dimension exceeds 2^31-1"), NV_ERR_IO;
          if (!push_dim(h, (int64_t)d)) return fail(j, "out of memory"), NV_ERR_OUT_OF_MEMORY;
          t->ndim++;
        } while (eat(j, ','));
        if (!eat(j, ']')) return fail(j, "expected ',' or ']' in a shape"), NV_ERR_IO;
      }
    } else if (which == 2) {
      if (!eat(j, '[') || !uint_(j, &t->begin) || !eat(j, ',') || !uint_(j, &t->end) ||
          !eat(j, ']'))
        return fail(j, "\"data_offsets\" is not [begin, end]"), NV_ERR_IO;
    } else if (!skip(j, 1)) {
      return NV_ERR_IO;
    }
  } while (eat(j, ','));
  if (!eat(j, '}')) return fail(j, "expected ',' or '}' in a tensor entry"), NV_ERR_IO;
done:
  if (!have[0] || !have[1] || !have[2])
    return fail(j, "a tensor entry lacks \"dtype\", \"shape\" or \"data_offsets\""), NV_ERR_IO;
  return NV_OK;
}

static nv_status metadata(js *j, st_header *h) {
  ws(j);
  if (j->p < j->end && *j->p == 'n') return literal(j, "null") ? NV_OK : NV_ERR_IO;
  if (!eat(j, '{')) return fail(j, "\"__metadata__\" is not an object"), NV_ERR_IO;
  if (eat(j, '}')) return NV_OK;
  nv__io_names seen = {0};
  nv_status st = NV_OK;
  do {
    char *key = NULL;
    size_t kl;
    nv__meta_value v = {.type = NV_META_STRING};
    if (!string(j, &key, &kl) || !eat(j, ':') || !string(j, &v.v.s, &v.count)) {
      if (!j->err) fail(j, "expected ':'");
      nv__free(key);
      st = NV_ERR_IO;
      break;
    }
    int added = memchr(key, 0, kl) ? -2 : nv__io_names_add(&seen, key, kl);
    if (added != 1 || nv__meta_push(h->meta, key, &v) != NV_OK) {
      nv__free(key);
      nv__meta_value_clear(&v);
      if (added == 0) fail(j, "a metadata key appears twice");
      else if (added == -2) fail(j, "a metadata key holds a NUL character");
      else fail(j, "out of memory");
      st = NV_ERR_IO;
      break;
    }
    /* The key now belongs to the container; the set refers to it while it lives. */
  } while (eat(j, ','));
  if (st == NV_OK && !eat(j, '}')) {
    fail(j, "expected ',' or '}' in __metadata__");
    st = NV_ERR_IO;
  }
  nv__io_names_free(&seen);
  return st;
}

static nv_status parse_header(js *j, st_header *h) {
  if (!eat(j, '{')) return fail(j, "the header is not a JSON object"), NV_ERR_IO;
  bool have_meta = false;
  if (!eat(j, '}')) {
    do {
      char *key;
      size_t kl;
      if (!string(j, &key, &kl)) return NV_ERR_IO;
      if (!eat(j, ':')) {
        nv__free(key);
        return fail(j, "expected ':'"), NV_ERR_IO;
      }
      if (!strcmp(key, "__metadata__")) {
        nv__free(key);
        if (have_meta) return fail(j, "\"__metadata__\" appears twice"), NV_ERR_IO;
        have_meta = true;
        nv_status st = metadata(j, h);
        if (st != NV_OK) return st;
        continue;
      }
      if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 16;
        st_tensor *t = nv__realloc(h->t, nc * sizeof *t);
        if (!t) {
          nv__free(key);
          return fail(j, "out of memory"), NV_ERR_OUT_OF_MEMORY;
        }
        h->t = t;
        h->cap = nc;
      }
      st_tensor *t = &h->t[h->n++];
      memset(t, 0, sizeof *t);
      t->name = key;
      t->name_len = kl;
      if (memchr(key, 0, kl)) return fail(j, "a tensor name holds a NUL character"), NV_ERR_IO;
      int added = nv__io_names_add(&h->names, key, kl);
      if (added < 0) return fail(j, "out of memory"), NV_ERR_OUT_OF_MEMORY;
      if (!added)
        return nv__io_error(j->src, NV_ERR_IO, "tensor \"%.64s\" appears twice in the header", key);
      nv_status st = tensor(j, h, h->t + (h->n - 1));
      if (st != NV_OK) return st;
    } while (eat(j, ','));
    if (!eat(j, '}')) return fail(j, "expected ',' or '}'"), NV_ERR_IO;
  }
  ws(j);
  if (j->p != j->end) return fail(j, "unexpected text after the header object"), NV_ERR_IO;
  return NV_OK;
}

static int by_offset(const void *a, const void *b) {
  const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* The tensors must tile the data section: sorted by offset, each starts where the previous
 * ended, holds exactly its shape's bytes, and the last ends at the end of the file. */
static nv_status check_layout(const nv__io_src *s, st_header *h, uint64_t data_size) {
  st_tensor **order = nv__malloc((h->n + 1) * sizeof *order);
  if (!order) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < h->n; i++) order[i] = &h->t[i];
  qsort(order, h->n, sizeof *order, by_offset);
  uint64_t at = 0;
  nv_status st = NV_OK;
  for (size_t i = 0; i < h->n && st == NV_OK; i++) {
    st_tensor *t = order[i];
    uint64_t count;
    size_t item = nv_dtype_size(t->dtype);
    if (!nv__io_shape_count(t->ndim ? h->dims + t->dim0 : NULL, t->ndim, item, &count))
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\": the shape's size overflows", t->name);
    else if (t->end < t->begin)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\": data_offsets [%llu, %llu] end before they begin",
                        t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
    else if (t->end > data_size)
      st = nv__io_error(s, NV_ERR_IO,
                        "tensor \"%.64s\": data_offsets end at %llu, past the %llu data bytes",
                        t->name, (unsigned long long)t->end, (unsigned long long)data_size);
    else if (t->begin != at)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\": data begins at %llu, expected %llu "
                        "(tensors overlap or leave a gap)",
                        t->name, (unsigned long long)t->begin, (unsigned long long)at);
    else if (t->end - t->begin != count * item)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\": %llu data bytes for a shape of %llu bytes",
                        t->name, (unsigned long long)(t->end - t->begin),
                        (unsigned long long)(count * item));
    at = t->end;
  }
  if (st == NV_OK && at != data_size)
    st = nv__io_error(s, NV_ERR_IO, "the tensors cover %llu of the %llu data bytes",
                      (unsigned long long)at, (unsigned long long)data_size);
  nv__free(order);
  return st;
}

nv_status nv__safetensors_parse(const nv__io_src *s, nv_map **arrays, nv_io_metadata **meta) {
  if (s->size < 8) return nv__io_error(s, NV_ERR_IO, "truncated: %zu bytes, no header length", s->size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | s->data[i];
  if (n > s->size - 8)
    return nv__io_error(s, NV_ERR_IO, "header length %llu exceeds the %zu bytes after it",
                        (unsigned long long)n, s->size - 8);
  if (n > ST_MAX_HEADER)
    return nv__io_error(s, NV_ERR_IO, "header length %llu exceeds the format's limit of %u",
                        (unsigned long long)n, ST_MAX_HEADER);
  st_header h = {0};
  h.meta = nv_io_metadata_new();
  if (!h.meta) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  js j = {s, s->data + 8, s->data + 8, s->data + 8 + n, NULL};
  nv_status st = parse_header(&j, &h);
  if (st != NV_OK && j.err)
    st = nv__io_error(s, st == NV_ERR_OUT_OF_MEMORY ? st : NV_ERR_IO,
                      "malformed header: %s (at byte %zu of the JSON)", j.err,
                      (size_t)(j.p - j.start));
  size_t base = 8 + (size_t)n;
  if (st == NV_OK) st = check_layout(s, &h, s->size - base);
  nv_map *m = st == NV_OK ? nv_map_new() : NULL;
  if (st == NV_OK && !m) st = nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < h.n && st == NV_OK; i++) {
    st_tensor *t = &h.t[i];
    int shape[NV__MAX_DIMS];
    for (int k = 0; k < t->ndim; k++) shape[k] = (int)h.dims[t->dim0 + k];
    nv_array *a = NULL;
    st = nv__io_array(s, base + (size_t)t->begin, (size_t)(t->end - t->begin), t->dtype, shape,
                      t->ndim, NULL, &a);
    if (st == NV_OK) st = nv__map_append(m, t->name, a);
    nv_release(a);
  }
  if (st != NV_OK) {
    nv_map_free(m);
    header_free(&h);
    return st;
  }
  *arrays = m;
  if (meta) {
    *meta = h.meta;
    h.meta = NULL;
  }
  header_free(&h);
  return NV_OK;
}

/* ---- Writing ---- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = (b->cap ? b->cap * 2 : 256);
    while (nc < b->n + n + 1) nc *= 2;
    char *p = nv__realloc(b->p, nc);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string literal; false if `s` is not valid UTF-8. */
static bool sb_json(sbuf *b, const char *s, size_t n) {
  sb_put(b, "\"", 1);
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  while (p < end) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p++};
      sb_put(b, e, 2);
    } else if (*p < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", *p++);
      sb_put(b, e, 6);
    } else {
      size_t k = utf8_len(p, end);
      if (!k) return false;
      sb_put(b, (const char *)p, k);
      p += k;
    }
  }
  sb_put(b, "\"", 1);
  return true;
}

static const char *st_name(nv_dtype dt) {
  static const char *names[NV_DTYPE_COUNT] = {"BOOL", "U8",  "U16", "U32", "U64",
                                              "I8",   "I16", "I32", "I64", "F16",
                                              "BF16", "F32", "F64", "C64"};
  return names[dt];
}

typedef struct st_item {
  const char *key;
  nv_array *x;
} st_item;

static int by_size_then_name(const void *a, const void *b) {
  const st_item *x = a, *y = b;
  size_t sx = nv_array_itemsize(x->x), sy = nv_array_itemsize(y->x);
  if (sx != sy) return sx > sy ? -1 : 1;
  return strcmp(x->key, y->key);
}

static nv_status build_header(const char *op, st_item *items, size_t n,
                              const nv_io_metadata *meta, sbuf *b) {
  sb_str(b, "{");
  bool first = true;
  if (meta && nv_io_metadata_size(meta)) {
    sb_str(b, "\"__metadata__\":{");
    for (size_t i = 0; i < nv_io_metadata_size(meta); i++) {
      const nv__meta_value *v = nv__meta_at(meta, i);
      const char *k = nv_io_metadata_key(meta, i);
      if (v->type != NV_META_STRING)
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "%s: metadata \"%s\" is not a string (safetensors holds strings only)",
                             op, k);
      if (i) sb_str(b, ",");
      if (!sb_json(b, k, strlen(k)) || (sb_str(b, ":"), !sb_json(b, v->v.s, v->count)))
        return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: metadata \"%s\" is not valid UTF-8",
                             op, k);
    }
    sb_str(b, "}");
    first = false;
  }
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (!first) sb_str(b, ",");
    first = false;
    if (!sb_json(b, items[i].key, strlen(items[i].key)))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the key \"%s\" is not valid UTF-8", op,
                           items[i].key);
    char tmp[96];
    snprintf(tmp, sizeof tmp, ":{\"dtype\":\"%s\",\"shape\":[", st_name(nv_array_dtype(items[i].x)));
    sb_str(b, tmp);
    for (int d = 0; d < nv_array_ndim(items[i].x); d++) {
      snprintf(tmp, sizeof tmp, d ? ",%d" : "%d", nv_array_shape(items[i].x)[d]);
      sb_str(b, tmp);
    }
    uint64_t nb = nv_array_nbytes(items[i].x);
    snprintf(tmp, sizeof tmp, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
             (unsigned long long)(at + nb));
    sb_str(b, tmp);
    at += nb;
  }
  sb_str(b, "}");
  while ((b->n + 8) % 8) sb_str(b, " ");
  if (b->oom) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  return NV_OK;
}

nv_status nv_save_safetensors(const char *path, const nv_map *arrays, const nv_io_metadata *meta) {
  const char *op = "save_safetensors";
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL map", op);
  size_t n = nv_map_size(arrays);
  st_item *items = nv__calloc(n + 1, sizeof *items);
  nv_array **xs = nv__calloc(n + 1, sizeof *xs), **flat = nv__calloc(n + 1, sizeof *flat);
  sbuf b = {0};
  nv_status st = items && xs && flat ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n && st == NV_OK; i++) xs[i] = nv_map_value(arrays, i);
  if (st == NV_OK) st = nv__io_eval_flat(op, xs, n, flat);
  for (size_t i = 0; i < n && st == NV_OK; i++) items[i] = (st_item){nv_map_key(arrays, i), flat[i]};
  if (st == NV_OK) {
    qsort(items, n, sizeof *items, by_size_then_name);
    st = build_header(op, items, n, meta, &b);
  }
  nv__io_writer w;
  if (st == NV_OK) st = nv__io_writer_open(&w, op, path, ".safetensors", true);
  if (st == NV_OK) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)b.n >> (8 * i));
    nv__io_write(&w, len, 8);
    nv__io_write(&w, b.p, b.n);
    for (size_t i = 0; i < n; i++) nv__io_write(&w, nv__io_bytes(items[i].x), nv_array_nbytes(items[i].x));
    st = nv__io_writer_commit(&w);
  }
  for (size_t i = 0; flat && i < n; i++) nv_release(flat[i]);
  nv__free(items);
  nv__free(xs);
  nv__free(flat);
  nv__free(b.p);
  return st;
}

/* ---- Public loaders ---- */

nv_status nv_load_safetensors(const char *path, nv_map **arrays, nv_io_metadata **meta) {
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_safetensors: NULL output");
  nv__io_src s;
  nv_status st = nv__io_open("load_safetensors", path, &s);
  if (st != NV_OK) return st;
  st = nv__safetensors_parse(&s, arrays, meta);
  nv__io_close(&s);
  return st;
}

nv_status nv_load_safetensors_from_memory(const void *data, size_t size, nv_map **arrays,
                                          nv_io_metadata **meta) {
  if ((!data && size) || !arrays)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_safetensors_from_memory: NULL argument");
  static const unsigned char none[1];
  nv__io_src s = {"load_safetensors_from_memory", "<memory>", data ? data : none, size, NULL, NULL};
  return nv__safetensors_parse(&s, arrays, meta);
}
