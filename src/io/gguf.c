/* GGUF (llama.cpp's format), versions 2 and 3, little-endian: a header (magic, version,
 * tensor and key/value counts), typed key/values, tensor infos (name, GGUF dimensions with
 * the fastest-varying first, ggml type, offset into the data section), padding to the
 * alignment, and the data. Every count and length is checked against the bytes left before
 * anything is allocated from it. */
#include <stdlib.h>

#include "core/convert.h"
#include "cpu/pool.h"
#include "io/io_internal.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" */
#define GGUF_DEFAULT_ALIGNMENT 32

/* Block geometry of the ggml types (elements per block, bytes per block) and the nuvec dtype
 * of the unquantized ones. Numbers as GGUF/ggml define them. */
typedef struct ggml_type_info {
  int id;
  const char *name;
  int block;
  int bytes;
  nv_dtype dtype; /* NV_DTYPE_COUNT: a block-quantized type */
} ggml_type_info;

#define Q NV_DTYPE_COUNT
static const ggml_type_info ggml_types[] = {
    {0, "F32", 1, 4, NV_DTYPE_FLOAT32},  {1, "F16", 1, 2, NV_DTYPE_FLOAT16},
    {2, "Q4_0", 32, 18, Q},              {3, "Q4_1", 32, 20, Q},
    {6, "Q5_0", 32, 22, Q},              {7, "Q5_1", 32, 24, Q},
    {8, "Q8_0", 32, 34, Q},              {9, "Q8_1", 32, 40, Q},
    {10, "Q2_K", 256, 84, Q},            {11, "Q3_K", 256, 110, Q},
    {12, "Q4_K", 256, 144, Q},           {13, "Q5_K", 256, 176, Q},
    {14, "Q6_K", 256, 210, Q},           {15, "Q8_K", 256, 292, Q},
    {16, "IQ2_XXS", 256, 66, Q},         {17, "IQ2_XS", 256, 74, Q},
    {18, "IQ3_XXS", 256, 98, Q},         {19, "IQ1_S", 256, 50, Q},
    {20, "IQ4_NL", 32, 18, Q},           {21, "IQ3_S", 256, 110, Q},
    {22, "IQ2_S", 256, 82, Q},           {23, "IQ4_XS", 256, 136, Q},
    {24, "I8", 1, 1, NV_DTYPE_INT8},     {25, "I16", 1, 2, NV_DTYPE_INT16},
    {26, "I32", 1, 4, NV_DTYPE_INT32},   {27, "I64", 1, 8, NV_DTYPE_INT64},
    {28, "F64", 1, 8, NV_DTYPE_FLOAT64}, {29, "IQ1_M", 256, 56, Q},
    {30, "BF16", 1, 2, NV_DTYPE_BFLOAT16}, {34, "TQ1_0", 256, 54, Q},
    {35, "TQ2_0", 256, 66, Q},           {39, "MXFP4", 32, 17, Q},
};
#undef Q

static const ggml_type_info *type_info(uint32_t id) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof *ggml_types; i++)
    if ((uint32_t)ggml_types[i].id == id) return &ggml_types[i];
  return NULL;
}

/* ---- A bounds-checked reader ---- */

typedef struct rd {
  const nv__io_src *s;
  size_t pos;
  const char *what; /* what was being read, for the truncation message */
} rd;

static const unsigned char *take(rd *r, size_t n) {
  if (n > r->s->size - r->pos) return NULL;
  const unsigned char *p = r->s->data + r->pos;
  r->pos += n;
  return p;
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static nv_status truncated(rd *r) {
  return nv__io_error(r->s, NV_ERR_IO, "truncated while reading %s (at byte %zu)", r->what,
                      r->pos);
}

/* The readers set their outputs even when they fail (to 0), so that no caller reads an
 * unset value. */
static nv_status u32(rd *r, uint32_t *v) {
  *v = 0;
  const unsigned char *p = take(r, 4);
  if (!p) return truncated(r);
  *v = (uint32_t)le(p, 4);
  return NV_OK;
}

static nv_status u64(rd *r, uint64_t *v) {
  *v = 0;
  const unsigned char *p = take(r, 8);
  if (!p) return truncated(r);
  *v = le(p, 8);
  return NV_OK;
}

/* A GGUF string: its bytes stay in the source (`*p`, `*n`). */
static nv_status str(rd *r, const char **p, size_t *n) {
  *p = NULL;
  *n = 0;
  uint64_t len;
  nv_status st = u64(r, &len);
  if (st != NV_OK) return st;
  if (len > r->s->size - r->pos)
    return nv__io_error(r->s, NV_ERR_IO, "%s: a string of %llu bytes exceeds the %zu bytes left",
                        r->what, (unsigned long long)len, r->s->size - r->pos);
  *p = (const char *)take(r, (size_t)len);
  *n = (size_t)len;
  return NV_OK;
}

static char *dup_bytes(const char *s, size_t n) {
  char *d = nv__malloc(n + 1);
  if (d) {
    if (n) memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* A scalar value of `type` into `v` (integers sign- or zero-extended, floats as double). */
static nv_status scalar(rd *r, nv_meta_type type, nv__meta_value *v) {
  size_t n = nv__meta_type_size(type);
  const unsigned char *p = take(r, n);
  if (!p) return truncated(r);
  uint64_t bits = le(p, (int)n);
  v->type = type;
  switch (type) {
    case NV_META_INT8: v->v.i = (int8_t)bits; break;
    case NV_META_INT16: v->v.i = (int16_t)bits; break;
    case NV_META_INT32: v->v.i = (int32_t)bits; break;
    case NV_META_INT64: v->v.i = (int64_t)bits; break;
    case NV_META_UINT64: v->v.u = bits; break;
    case NV_META_FLOAT32: v->v.f = nv__bits_f32((uint32_t)bits); break;
    case NV_META_FLOAT64: memcpy(&v->v.f, &bits, 8); break;
    case NV_META_BOOL:
      if (bits > 1) return nv__io_error(r->s, NV_ERR_IO, "%s: a bool value of %u", r->what,
                                        (unsigned)bits);
      v->v.i = (int64_t)bits;
      break;
    default: v->v.i = (int64_t)bits; break;
  }
  return NV_OK;
}

static nv_status array_value(rd *r, nv__meta_value *v) {
  uint32_t elem;
  uint64_t count;
  nv_status st = u32(r, &elem);
  if (st == NV_OK) st = u64(r, &count);
  if (st != NV_OK) return st;
  v->type = NV_META_ARRAY;
  v->elem = (nv_meta_type)elem;
  size_t left = r->s->size - r->pos;
  if (elem == NV_META_ARRAY)
    return nv__io_error(r->s, NV_ERR_UNSUPPORTED, "%s: nested arrays are not supported", r->what);
  if (elem == NV_META_STRING) {
    /* Each string takes at least its 8-byte length. */
    if (count > left / 8)
      return nv__io_error(r->s, NV_ERR_IO, "%s: %llu strings cannot fit in the %zu bytes left",
                          r->what, (unsigned long long)count, left);
    v->v.strs = nv__calloc((size_t)count + 1, sizeof(char *));
    v->lens = nv__calloc((size_t)count + 1, sizeof(size_t));
    if (!v->v.strs || !v->lens) return nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    for (uint64_t i = 0; i < count; i++) {
      const char *p;
      size_t n;
      if ((st = str(r, &p, &n)) != NV_OK) return st;
      if (!(v->v.strs[i] = dup_bytes(p, n)))
        return nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory");
      v->lens[i] = n;
      v->count = (size_t)i + 1;
    }
    v->count = (size_t)count;
    return NV_OK;
  }
  size_t item = nv__meta_type_size((nv_meta_type)elem);
  if (!item)
    return nv__io_error(r->s, NV_ERR_IO, "%s: unknown array element type %u", r->what, elem);
  if (count > left / item)
    return nv__io_error(r->s, NV_ERR_IO, "%s: %llu elements of %zu bytes exceed the %zu bytes left",
                        r->what, (unsigned long long)count, item, left);
  const unsigned char *p = take(r, (size_t)count * item);
  if (elem == NV_META_BOOL)
    for (uint64_t i = 0; i < count; i++)
      if (p[i] > 1) return nv__io_error(r->s, NV_ERR_IO, "%s: a bool value of %u", r->what, p[i]);
  v->v.data = nv__malloc((size_t)count * item + 1);
  if (!v->v.data) return nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  if (count) memcpy(v->v.data, p, (size_t)count * item);
  v->count = (size_t)count;
  return NV_OK;
}

static nv_status read_kvs(rd *r, uint64_t nkv, nv_io_metadata *meta, uint32_t *alignment) {
  nv__io_names seen = {0};
  nv_status st = NV_OK;
  for (uint64_t i = 0; i < nkv && st == NV_OK; i++) {
    const char *k;
    size_t kn;
    uint32_t type;
    r->what = "a metadata key";
    if ((st = str(r, &k, &kn)) != NV_OK || (st = u32(r, &type)) != NV_OK) break;
    if (memchr(k, 0, kn)) {
      st = nv__io_error(r->s, NV_ERR_IO, "metadata key %llu holds a NUL character",
                        (unsigned long long)i);
      break;
    }
    char *key = dup_bytes(k, kn);
    int added = key ? nv__io_names_add(&seen, key, kn) : -1;
    if (added <= 0) {
      st = added < 0 ? nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory")
                     : nv__io_error(r->s, NV_ERR_IO, "metadata key \"%.64s\" appears twice", key);
      nv__free(key);
      break;
    }
    r->what = key;
    nv__meta_value v = {0};
    if (type == NV_META_STRING) {
      const char *p;
      size_t n;
      v.type = NV_META_STRING;
      if ((st = str(r, &p, &n)) == NV_OK && !(v.v.s = dup_bytes(p, n)))
        st = nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory");
      v.count = n;
    } else if (type == NV_META_ARRAY) {
      st = array_value(r, &v);
    } else if (nv__meta_type_size((nv_meta_type)type)) {
      st = scalar(r, (nv_meta_type)type, &v);
    } else {
      st = nv__io_error(r->s, NV_ERR_IO, "metadata \"%.64s\" has an unknown value type %u", key, type);
    }
    if (st == NV_OK && !strcmp(key, "general.alignment")) {
      if (v.type != NV_META_UINT32 || v.v.i == 0 || (v.v.i & (v.v.i - 1)))
        st = nv__io_error(r->s, NV_ERR_IO, "general.alignment is not a uint32 power of two");
      else *alignment = (uint32_t)v.v.i;
    }
    if (st == NV_OK && nv__meta_push(meta, key, &v) != NV_OK)
      st = nv__io_error(r->s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    if (st != NV_OK) {
      /* The key is in the set; it is freed after the set is no longer used. */
      nv__meta_value_clear(&v);
      nv__io_names_free(&seen);
      nv__free(key);
      return st;
    }
  }
  nv__io_names_free(&seen);
  return st;
}

/* ---- Tensors ---- */

typedef struct gg_tensor {
  const char *name;
  size_t name_len;
  int ndim;
  /* The dimensions stay in the file (u64 each, GGUF order: fastest-varying first), so a tensor
   * info costs a small fixed size in memory whatever its rank. */
  const unsigned char *dims;
  const ggml_type_info *type;
  uint64_t offset, nbytes;
} gg_tensor;

static nv_status read_tensor_info(rd *r, gg_tensor *t, uint32_t alignment) {
  uint32_t nd, type;
  nv_status st;
  r->what = "a tensor name";
  if ((st = str(r, &t->name, &t->name_len)) != NV_OK) return st;
  r->what = "a tensor info";
  if ((st = u32(r, &nd)) != NV_OK) return st;
  int nl = (int)(t->name_len > 64 ? 64 : t->name_len);
  if (memchr(t->name, 0, t->name_len))
    return nv__io_error(r->s, NV_ERR_IO, "a tensor name holds a NUL character");
  if (nd > NV__MAX_DIMS)
    return nv__io_error(r->s, NV_ERR_IO, "tensor \"%.*s\" has %u dimensions (at most 64)", nl,
                        t->name, nd);
  t->ndim = (int)nd;
  t->dims = r->s->data + r->pos;
  int64_t ne[NV__MAX_DIMS];
  for (uint32_t i = 0; i < nd; i++) {
    uint64_t d;
    if ((st = u64(r, &d)) != NV_OK) return st;
    if (d > INT32_MAX)
      return nv__io_error(r->s, NV_ERR_IO, "tensor \"%.*s\": dimension %u is %llu (above 2^31-1)",
                          nl, t->name, i, (unsigned long long)d);
    ne[i] = (int64_t)d;
  }
  if ((st = u32(r, &type)) != NV_OK || (st = u64(r, &t->offset)) != NV_OK) return st;
  t->type = type_info(type);
  if (!t->type)
    return nv__io_error(r->s, NV_ERR_IO, "tensor \"%.*s\" has an unknown ggml type %u", nl, t->name,
                        type);
  uint64_t count;
  if (!nv__io_shape_count(ne, t->ndim, (size_t)t->type->bytes, &count))
    return nv__io_error(r->s, NV_ERR_IO, "tensor \"%.*s\": the shape's size overflows", nl, t->name);
  if (t->type->block > 1 && (t->ndim == 0 || ne[0] % t->type->block))
    return nv__io_error(r->s, NV_ERR_IO,
                        "tensor \"%.*s\": the first dimension %lld is not a multiple of the %s "
                        "block size %d", nl, t->name, t->ndim ? (long long)ne[0] : 0LL,
                        t->type->name, t->type->block);
  t->nbytes = count / (uint64_t)t->type->block * (uint64_t)t->type->bytes;
  if (t->offset % alignment)
    return nv__io_error(r->s, NV_ERR_IO, "tensor \"%.*s\": offset %llu is not a multiple of the "
                        "alignment %u", nl, t->name, (unsigned long long)t->offset, alignment);
  return NV_OK;
}

static int by_offset(const void *a, const void *b) {
  const gg_tensor *x = *(gg_tensor *const *)a, *y = *(gg_tensor *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Every tensor inside the data section; no two overlap. */
static nv_status check_layout(const nv__io_src *s, gg_tensor *t, size_t n, uint64_t data_size) {
  gg_tensor **order = nv__malloc((n + 1) * sizeof *order);
  if (!order) return nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n; i++) order[i] = &t[i];
  qsort(order, n, sizeof *order, by_offset);
  nv_status st = NV_OK;
  uint64_t end = 0;
  const gg_tensor *prev = NULL;
  for (size_t i = 0; i < n && st == NV_OK; i++) {
    const gg_tensor *x = order[i];
    int nl = (int)(x->name_len > 64 ? 64 : x->name_len);
    if (x->offset > data_size || x->nbytes > data_size - x->offset)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.*s\": %llu bytes at offset %llu exceed the "
                        "%llu-byte data section", nl, x->name, (unsigned long long)x->nbytes,
                        (unsigned long long)x->offset, (unsigned long long)data_size);
    else if (prev && x->offset < end && x->nbytes)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.*s\" overlaps tensor \"%.*s\"", nl, x->name,
                        (int)(prev->name_len > 64 ? 64 : prev->name_len), prev->name);
    if (x->nbytes && x->offset + x->nbytes > end) {
      end = x->offset + x->nbytes;
      prev = x;
    }
  }
  nv__free(order);
  return st;
}

typedef struct deq_job {
  const unsigned char *src;
  float *dst;
  int type;
} deq_job;

/* Dequantizes blocks [begin, end) as ggml's reference code does, in float32. */
static void dequantize_range(void *ctx, int64_t begin, int64_t end) {
  const deq_job *j = ctx;
  for (int64_t b = begin; b < end; b++) {
    float *y = j->dst + b * 32;
    if (j->type == 2) { /* Q4_0: d, then 16 bytes of two 4-bit quants offset by 8 */
      const unsigned char *q = j->src + b * 18;
      float d = nv__f16_to_f32((uint16_t)(q[0] | q[1] << 8));
      for (int i = 0; i < 16; i++) {
        y[i] = (float)((q[2 + i] & 0x0f) - 8) * d;
        y[i + 16] = (float)((q[2 + i] >> 4) - 8) * d;
      }
    } else if (j->type == 3) { /* Q4_1: d, m, then 16 bytes of 4-bit quants */
      const unsigned char *q = j->src + b * 20;
      float d = nv__f16_to_f32((uint16_t)(q[0] | q[1] << 8));
      float m = nv__f16_to_f32((uint16_t)(q[2] | q[3] << 8));
      for (int i = 0; i < 16; i++) {
        y[i] = (float)(q[4 + i] & 0x0f) * d + m;
        y[i + 16] = (float)(q[4 + i] >> 4) * d + m;
      }
    } else { /* Q8_0: d, then 32 int8 quants */
      const unsigned char *q = j->src + b * 34;
      float d = nv__f16_to_f32((uint16_t)(q[0] | q[1] << 8));
      for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)q[2 + i] * d;
    }
  }
}

/* ---- Q4_0 / Q4_1 / Q8_0 as affine triples (NV_GGUF_AFFINE) ---- */

typedef struct aff_job {
  const unsigned char *src;
  uint32_t *w;        /* 4 (bits 4) or 8 (bits 8) words per block */
  uint16_t *sc, *bi;  /* float16 bits, one per block */
  int type;
} aff_job;

/* Repacks blocks [begin, end): element j of a block at bits [j*bits, (j+1)*bits) of its words,
 * as nv_quantize packs a row. */
static void affine_range(void *ctx, int64_t begin, int64_t end) {
  const aff_job *j = ctx;
  for (int64_t b = begin; b < end; b++) {
    uint8_t e[32];
    const unsigned char *q;
    uint16_t d;
    float bias;
    if (j->type == 8) { /* Q8_0: int8 quants; u = q + 128 with bias -128 d */
      q = j->src + b * 34;
      d = (uint16_t)(q[0] | q[1] << 8);
      for (int i = 0; i < 32; i++) e[i] = (uint8_t)(q[2 + i] ^ 0x80);
      bias = -128.0f * nv__f16_to_f32(d);
      for (int k = 0; k < 8; k++)
        j->w[b * 8 + k] = (uint32_t)e[4 * k] | (uint32_t)e[4 * k + 1] << 8 |
                          (uint32_t)e[4 * k + 2] << 16 | (uint32_t)e[4 * k + 3] << 24;
    } else { /* Q4_0 / Q4_1: byte i holds element i (low nibble) and i + 16 (high) */
      int hdr = j->type == 2 ? 2 : 4;
      q = j->src + b * (j->type == 2 ? 18 : 20);
      d = (uint16_t)(q[0] | q[1] << 8);
      bias = j->type == 2 ? -8.0f * nv__f16_to_f32(d)
                          : nv__f16_to_f32((uint16_t)(q[2] | q[3] << 8));
      for (int i = 0; i < 16; i++) {
        e[i] = q[hdr + i] & 0x0f;
        e[i + 16] = q[hdr + i] >> 4;
      }
      for (int k = 0; k < 4; k++) {
        uint32_t v = 0;
        for (int i = 0; i < 8; i++) v |= (uint32_t)e[8 * k + i] << (4 * i);
        j->w[b * 4 + k] = v;
      }
    }
    j->sc[b] = d;
    /* -8 d and -128 d are exact in float16 (powers of two) unless they overflow. */
    j->bi[b] = nv__f32_to_f16(bias);
  }
}

/* The scales' / biases' name: `name` (n bytes) with its first ".weight" removed, + suffix. */
static char *derived_name(const char *name, size_t n, const char *suffix) {
  size_t cut = n, sl = strlen(suffix);
  for (size_t i = 0; i + 7 <= n; i++)
    if (!memcmp(name + i, ".weight", 7)) {
      cut = i;
      break;
    }
  size_t rest = cut < n ? n - cut - 7 : 0;
  char *r = nv__malloc(cut + rest + sl + 1);
  if (!r) return NULL;
  memcpy(r, name, cut);
  if (rest) memcpy(r + cut, name + cut + 7, rest);
  memcpy(r + cut + rest, suffix, sl + 1);
  return r;
}

/* Q4_0 / Q4_1 / Q8_0 tensor `t` as its three arrays (out[0..3), new references). */
static nv_status make_affine(const nv__io_src *s, const gg_tensor *t, size_t base,
                             nv_array **out) {
  int shape[NV__MAX_DIMS], sshape[NV__MAX_DIMS];
  for (int i = 0; i < t->ndim; i++)
    shape[i] = sshape[i] = (int)le(t->dims + 8 * (t->ndim - 1 - i), 8);
  int bits = t->type->id == 8 ? 8 : 4, K = shape[t->ndim - 1];
  uint64_t blocks = t->nbytes / (uint64_t)t->type->bytes;
  shape[t->ndim - 1] = K / 32 * bits;
  sshape[t->ndim - 1] = K / 32;
  void *w, *sc, *bi;
  out[0] = out[1] = out[2] = NULL;
  nv_status st = nv__io_array_alloc(s->op, (size_t)(blocks * (uint64_t)bits * 4), NV_DTYPE_UINT32,
                                    shape, t->ndim, NULL, &out[0], &w);
  if (st == NV_OK)
    st = nv__io_array_alloc(s->op, (size_t)(blocks * 2), NV_DTYPE_FLOAT16, sshape, t->ndim, NULL,
                            &out[1], &sc);
  if (st == NV_OK)
    st = nv__io_array_alloc(s->op, (size_t)(blocks * 2), NV_DTYPE_FLOAT16, sshape, t->ndim, NULL,
                            &out[2], &bi);
  if (st != NV_OK) {
    for (int i = 0; i < 3; i++) nv_release(out[i]), out[i] = NULL;
    return st;
  }
  aff_job job = {s->data + base + (size_t)t->offset, w, sc, bi, t->type->id};
  nv__parallel_for((int64_t)blocks, 4096, affine_range, &job);
  return NV_OK;
}

/* Adds tensor `t` in affine form to `m`: the weight under `name`, the scales and biases under
 * their derived names (failing when another tensor has one). */
static nv_status add_affine(const nv__io_src *s, const gg_tensor *t, size_t base, const char *name,
                            nv_map *m) {
  nv_array *a[3];
  nv_status st = make_affine(s, t, base, a);
  if (st != NV_OK) return st;
  static const char *const suffix[2] = {".scales", ".biases"};
  char *names[2] = {NULL, NULL};
  for (int i = 0; i < 2 && st == NV_OK; i++) {
    names[i] = derived_name(t->name, t->name_len, suffix[i]);
    if (!names[i]) st = nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    else if (nv_map_get(m, names[i]))
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\": its %s name \"%.64s\" is taken",
                        name, suffix[i] + 1, names[i]);
  }
  if (st == NV_OK && nv_map_get(m, name))
    st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\" appears twice", name);
  if (st == NV_OK) st = nv_map_set(m, name, a[0]);
  for (int i = 0; i < 2 && st == NV_OK; i++) st = nv_map_set(m, names[i], a[1 + i]);
  for (int i = 0; i < 2; i++) nv__free(names[i]);
  for (int i = 0; i < 3; i++) nv_release(a[i]);
  return st;
}

static nv_status make_tensor(const nv__io_src *s, const gg_tensor *t, size_t base,
                             nv_gguf_mode mode, nv_array **out) {
  int shape[NV__MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) shape[i] = (int)le(t->dims + 8 * (t->ndim - 1 - i), 8);
  size_t off = base + (size_t)t->offset;
  if (t->type->dtype != NV_DTYPE_COUNT)
    return nv__io_array(s, off, (size_t)t->nbytes, t->type->dtype, shape, t->ndim, NULL, out);
  int nl = (int)(t->name_len > 64 ? 64 : t->name_len);
  if (mode != NV_GGUF_DEQUANTIZE) {
    /* The last axis holds each row's blocks in bytes; it fits an int because the row's
     * element count does and a block's bytes never exceed its elements × 4. */
    int64_t row = (int64_t)le(t->dims, 8) / t->type->block * t->type->bytes;
    if (row > INT32_MAX)
      return nv__io_error(s, NV_ERR_IO, "tensor \"%.*s\": a row of %lld bytes", nl, t->name,
                          (long long)row);
    shape[t->ndim - 1] = (int)row;
    return nv__io_array(s, off, (size_t)t->nbytes, NV_DTYPE_UINT8, shape, t->ndim, NULL, out);
  }
  if (t->type->id != 2 && t->type->id != 3 && t->type->id != 8)
    return nv__io_error(s, NV_ERR_UNSUPPORTED,
                        "tensor \"%.*s\": dequantizing %s is not supported (only Q4_0, Q4_1, "
                        "Q8_0; load it raw)", nl, t->name, t->type->name);
  uint64_t blocks = t->nbytes / (uint64_t)t->type->bytes;
  void *data;
  nv_status st = nv__io_array_alloc(s->op, (size_t)(blocks * 32 * sizeof(float)),
                                    NV_DTYPE_FLOAT32, shape, t->ndim, NULL, out, &data);
  if (st != NV_OK) return st;
  deq_job job = {s->data + off, data, t->type->id};
  nv__parallel_for((int64_t)blocks, 4096, dequantize_range, &job);
  return NV_OK;
}

nv_status nv__gguf_parse(const nv__io_src *s, nv_gguf_mode mode, nv_map **arrays,
                         nv_io_metadata **meta) {
  if (mode != NV_GGUF_RAW && mode != NV_GGUF_DEQUANTIZE && mode != NV_GGUF_AFFINE)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: invalid mode %d", s->op, (int)mode);
  rd r = {s, 0, "the header"};
  uint32_t magic, version;
  uint64_t ntensors, nkv;
  nv_status st;
  if ((st = u32(&r, &magic)) != NV_OK) return st;
  if (magic != GGUF_MAGIC) return nv__io_error(s, NV_ERR_IO, "not a GGUF file (bad magic)");
  if ((st = u32(&r, &version)) != NV_OK) return st;
  if (version != 2 && version != 3)
    return nv__io_error(s, (version & 0xffff) == 0 ? NV_ERR_UNSUPPORTED : NV_ERR_IO,
                        "unsupported GGUF version %u%s", version,
                        (version & 0xffff) == 0 ? " (a big-endian file?)" : "");
  if ((st = u64(&r, &ntensors)) != NV_OK || (st = u64(&r, &nkv)) != NV_OK) return st;
  /* A key/value takes at least 13 bytes (length, type, one byte), a tensor info 24. */
  size_t left = s->size - r.pos;
  if (nkv > left / 13 || ntensors > left / 24)
    return nv__io_error(s, NV_ERR_IO, "%llu key/values and %llu tensors cannot fit in %zu bytes",
                        (unsigned long long)nkv, (unsigned long long)ntensors, left);
  nv_io_metadata *md = nv_io_metadata_new();
  gg_tensor *t = nv__calloc((size_t)ntensors + 1, sizeof *t);
  nv_map *m = nv_map_new();
  nv__io_names names = {0};
  uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
  st = md && t && m ? NV_OK : nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
  if (st == NV_OK) st = read_kvs(&r, nkv, md, &alignment);
  for (uint64_t i = 0; i < ntensors && st == NV_OK; i++) {
    st = read_tensor_info(&r, &t[i], alignment);
    int added = st == NV_OK ? nv__io_names_add(&names, t[i].name, t[i].name_len) : 1;
    if (added < 0) st = nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    else if (!added)
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.*s\" appears twice",
                        (int)(t[i].name_len > 64 ? 64 : t[i].name_len), t[i].name);
  }
  size_t base = (r.pos + alignment - 1) / alignment * alignment;
  uint64_t data_size = base <= s->size ? s->size - base : 0;
  if (st == NV_OK && base > s->size && ntensors)
    st = nv__io_error(s, NV_ERR_IO, "truncated before the data section (at byte %zu)", base);
  if (st == NV_OK) st = check_layout(s, t, (size_t)ntensors, data_size);
  for (uint64_t i = 0; i < ntensors && st == NV_OK; i++) {
    nv_array *a = NULL;
    char *name = dup_bytes(t[i].name, t[i].name_len);
    int id = t[i].type->id;
    bool affine = mode == NV_GGUF_AFFINE && (id == 2 || id == 3 || id == 8);
    if (!name) st = nv__io_error(s, NV_ERR_OUT_OF_MEMORY, "out of memory");
    else if (affine) st = add_affine(s, &t[i], base, name, m);
    else st = make_tensor(s, &t[i], base, mode, &a);
    /* With derived names in the map a plain name may collide with one of them. */
    if (st == NV_OK && !affine && mode == NV_GGUF_AFFINE && nv_map_get(m, name))
      st = nv__io_error(s, NV_ERR_IO, "tensor \"%.64s\" has the name of another tensor's "
                        "scales or biases", name);
    if (st == NV_OK && !affine) st = nv__map_append(m, name, a);
    nv_release(a);
    nv__free(name);
  }
  nv__io_names_free(&names);
  nv__free(t);
  if (st != NV_OK) {
    nv_map_free(m);
    nv_io_metadata_free(md);
    return st;
  }
  *arrays = m;
  if (meta) *meta = md;
  else nv_io_metadata_free(md);
  return NV_OK;
}

/* ---- Writing ---- */

static void w_u32(nv__io_writer *w, uint32_t v) {
  unsigned char b[4];
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
  nv__io_write(w, b, 4);
}

static void w_u64(nv__io_writer *w, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  nv__io_write(w, b, 8);
}

static void w_str(nv__io_writer *w, const char *s, size_t n) {
  w_u64(w, n);
  nv__io_write(w, s, n);
}

static void w_scalar(nv__io_writer *w, const nv__meta_value *v) {
  switch (v->type) {
    case NV_META_FLOAT32: {
      float f = (float)v->v.f;
      w_u32(w, nv__f32_bits(f));
      break;
    }
    case NV_META_FLOAT64: {
      uint64_t b;
      memcpy(&b, &v->v.f, 8);
      w_u64(w, b);
      break;
    }
    default: {
      uint64_t b = v->type == NV_META_UINT64 ? v->v.u : (uint64_t)v->v.i;
      unsigned char buf[8];
      size_t n = nv__meta_type_size(v->type);
      for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(b >> (8 * i));
      nv__io_write(w, buf, n);
    }
  }
}

static void w_value(nv__io_writer *w, const nv__meta_value *v) {
  w_u32(w, (uint32_t)v->type);
  if (v->type == NV_META_STRING) {
    w_str(w, v->v.s, v->count);
  } else if (v->type == NV_META_ARRAY) {
    w_u32(w, (uint32_t)v->elem);
    w_u64(w, v->count);
    if (v->elem == NV_META_STRING)
      for (size_t i = 0; i < v->count; i++) w_str(w, v->v.strs[i], v->lens[i]);
    else nv__io_write(w, v->v.data, v->count * nv__meta_type_size(v->elem));
  } else {
    w_scalar(w, v);
  }
}

static int ggml_type_of(nv_dtype dt) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof *ggml_types; i++)
    if (ggml_types[i].dtype == dt) return ggml_types[i].id;
  return -1;
}

static nv_status save_alignment(const char *op, const nv_io_metadata *meta, uint32_t *align) {
  *align = GGUF_DEFAULT_ALIGNMENT;
  for (size_t i = 0; i < nv_io_metadata_size(meta); i++) {
    if (strcmp(nv_io_metadata_key(meta, i), "general.alignment")) continue;
    const nv__meta_value *v = nv__meta_at(meta, i);
    if (v->type != NV_META_UINT32 || v->v.i == 0 || (v->v.i & (v->v.i - 1)))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "%s: general.alignment must be a uint32 power of two", op);
    *align = (uint32_t)v->v.i;
  }
  return NV_OK;
}

nv_status nv_save_gguf(const char *path, const nv_map *arrays, const nv_io_metadata *meta) {
  const char *op = "save_gguf";
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL map", op);
  uint32_t align;
  nv_status st = save_alignment(op, meta, &align);
  if (st != NV_OK) return st;
  size_t n = nv_map_size(arrays);
  for (size_t i = 0; i < n; i++) {
    nv_dtype dt = nv_array_dtype(nv_map_value(arrays, i));
    if (ggml_type_of(dt) < 0)
      return nv__set_error(NV_ERR_UNSUPPORTED, "%s: \"%s\" is %s, which GGUF cannot hold "
                           "(float32, float16, bfloat16, float64, int8-int64)", op,
                           nv_map_key(arrays, i), nv_dtype_name(dt));
  }
  nv_array **xs = nv__calloc(n + 1, sizeof *xs), **flat = nv__calloc(n + 1, sizeof *flat);
  if (!xs || !flat) st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n && st == NV_OK; i++) xs[i] = nv_map_value(arrays, i);
  if (st == NV_OK) st = nv__io_eval_flat(op, xs, n, flat);
  nv__io_writer w;
  if (st == NV_OK) st = nv__io_writer_open(&w, op, path, ".gguf", true);
  if (st == NV_OK) {
    w_u32(&w, GGUF_MAGIC);
    w_u32(&w, 3);
    w_u64(&w, n);
    w_u64(&w, nv_io_metadata_size(meta));
    uint64_t pos = 24;
    for (size_t i = 0; i < nv_io_metadata_size(meta); i++) {
      const char *k = nv_io_metadata_key(meta, i);
      w_str(&w, k, strlen(k));
      w_value(&w, nv__meta_at(meta, i));
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
      const char *k = nv_map_key(arrays, i);
      int nd = nv_array_ndim(flat[i]);
      w_str(&w, k, strlen(k));
      w_u32(&w, (uint32_t)nd);
      for (int d = nd - 1; d >= 0; d--) w_u64(&w, (uint64_t)nv_array_shape(flat[i])[d]);
      w_u32(&w, (uint32_t)ggml_type_of(nv_array_dtype(flat[i])));
      w_u64(&w, off);
      off += (nv_array_nbytes(flat[i]) + align - 1) / align * align;
    }
    static const unsigned char zeros[256];
    long here = w.f ? ftell(w.f) : 0;
    pos = here > 0 ? (uint64_t)here : pos;
    for (uint64_t pad = (align - pos % align) % align; pad;) {
      size_t k = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
      nv__io_write(&w, zeros, k);
      pad -= k;
    }
    for (size_t i = 0; i < n; i++) {
      size_t nb = nv_array_nbytes(flat[i]);
      nv__io_write(&w, nv__io_bytes(flat[i]), nb);
      for (size_t pad = (align - nb % align) % align; pad;) {
        size_t k = pad > sizeof zeros ? sizeof zeros : pad;
        nv__io_write(&w, zeros, k);
        pad -= k;
      }
    }
    st = nv__io_writer_commit(&w);
  }
  for (size_t i = 0; flat && i < n; i++) nv_release(flat[i]);
  nv__free(xs);
  nv__free(flat);
  return st;
}

/* ---- Public loaders ---- */

nv_status nv_load_gguf(const char *path, nv_gguf_mode mode, nv_map **arrays,
                       nv_io_metadata **meta) {
  if (!arrays) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_gguf: NULL output");
  nv__io_src s;
  nv_status st = nv__io_open("load_gguf", path, &s);
  if (st != NV_OK) return st;
  st = nv__gguf_parse(&s, mode, arrays, meta);
  nv__io_close(&s);
  return st;
}

nv_status nv_load_gguf_from_memory(const void *data, size_t size, nv_gguf_mode mode,
                                   nv_map **arrays, nv_io_metadata **meta) {
  if ((!data && size) || !arrays)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "load_gguf_from_memory: NULL argument");
  static const unsigned char none[1];
  nv__io_src s = {"load_gguf_from_memory", "<memory>", data ? data : none, size, NULL, NULL};
  return nv__gguf_parse(&s, mode, arrays, meta);
}
