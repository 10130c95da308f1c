/* The random family's CPU kernel: random_bits, threefry-2x32 counter streams laid out as MLX
 * lays them out, so that a key gives MLX's bits.
 *
 * For one key and B output bytes there are W = ceil(B / 4) words and H = W / 2 counter pairs.
 * Pair i (i < H) hashes the counters (i, H + odd + i), where odd = W % 2, and its two results
 * become words i and H + odd + i; when W is odd, the middle word H is the first result of
 * hashing (H, 0). The last word is cut to the bytes that remain. Every word depends only on
 * the key and its counters, so the pool splits the pairs freely and a key gives the same bits
 * whatever the thread count.
 *
 * random_unit is the same stream turned into samples on [0, 1) on the way out, exactly as MLX's
 * uniform(shape, dtype) computes them with separate ops: each word converted to float32,
 * divided by 2^32, clamped to the largest value below one in the output dtype, then rounded to
 * the output dtype. Fused, it writes each sample once instead of four times. */
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/pool.h"
#include "ops/random_params.h"

/* Pairs hashed per block: the block's results are staged on the stack and copied out, so the
 * hash loop runs over plain arrays (vectorized) whatever the output's alignment. */
#define BLOCK 256

NV_KERNEL_CLONES static void hash_block(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1,
                                        int n, uint32_t *restrict lo, uint32_t *restrict hi) {
  for (int j = 0; j < n; j++) {
    uint32_t a = c0 + (uint32_t)j, b = c1 + (uint32_t)j;
    nv__threefry2x32(k0, k1, &a, &b);
    lo[j] = a;
    hi[j] = b;
  }
}

typedef struct bits_job {
  const uint32_t *keys; /* two words per key */
  nv_dtype unit;        /* random_unit: the float dtype of the samples; else NV_DTYPE_COUNT */
  char *out;
  int64_t bytes;     /* stream bytes per key */
  int64_t out_bytes; /* output bytes per key (random_unit: samples, not stream bytes) */
  int64_t half;      /* counter pairs per key */
  int64_t odd;       /* 1 when the word count is odd (a middle word) */
  int64_t per_key;   /* work items per key: the pairs, then the middle word */
} bits_job;

/* Copies `n` bytes of `src` to byte `at` of a key's output, cut at its end. */
static void put(char *dst, int64_t bytes, int64_t at, const void *src, int64_t n) {
  if (at >= bytes) return;
  memcpy(dst + at, src, (size_t)(n < bytes - at ? n : bytes - at));
}

/* The largest value below 1 in a half or single float dtype, where random_unit clamps. */
static float below_one(nv_dtype dt) {
  if (dt == NV_DTYPE_FLOAT16) return 1.0f - 0x1p-11f;
  if (dt == NV_DTYPE_BFLOAT16) return 1.0f - 0x1p-8f;
  return 1.0f - 0x1p-24f;
}

NV_KERNEL_CLONES static void unit_f32(const uint32_t *restrict w, float *restrict o, int n) {
  const float upper = 1.0f - 0x1p-24f;
  for (int i = 0; i < n; i++) {
    float u = (float)w[i] / 4294967296.0f;
    o[i] = u < upper ? u : upper;
  }
}

static void unit_half(const uint32_t *w, uint16_t *o, int n, nv_dtype dt) {
  float v[BLOCK];
  const float upper = below_one(dt);
  for (int i = 0; i < n; i++) {
    float u = (float)w[i] / 4294967296.0f;
    v[i] = u < upper ? u : upper;
  }
  if (dt == NV_DTYPE_FLOAT16)
    for (int i = 0; i < n; i++) o[i] = nv__f32_to_f16(v[i]);
  else
    for (int i = 0; i < n; i++) o[i] = nv__f32_to_bf16(v[i]);
}

/* Stores `n` (at most BLOCK) words of a key's stream from word `at` on: raw bytes cut at the
 * key's end for random_bits, one sample per word for random_unit. */
static void store(const bits_job *j, char *dst, int64_t at, const uint32_t *w, int n) {
  if (j->unit == NV_DTYPE_COUNT) put(dst, j->bytes, 4 * at, w, 4 * (int64_t)n);
  else if (j->unit == NV_DTYPE_FLOAT32) unit_f32(w, (float *)dst + at, n);
  else unit_half(w, (uint16_t *)dst + at, n, j->unit);
}

/* Items [b, e) of one key's stream. */
static void fill_key(const bits_job *j, const uint32_t *key, char *dst, int64_t b, int64_t e) {
  int64_t pe = e < j->half ? e : j->half;
  uint32_t lo[BLOCK], hi[BLOCK];
  for (int64_t i = b; i < pe; i += BLOCK) {
    int n = (int)(pe - i < BLOCK ? pe - i : BLOCK);
    int64_t second = j->half + j->odd + i;
    hash_block(key[0], key[1], (uint32_t)i, (uint32_t)second, n, lo, hi);
    store(j, dst, i, lo, n);
    store(j, dst, second, hi, n);
  }
  if (j->odd && b <= j->half && j->half < e) {
    uint32_t a = (uint32_t)j->half, c = 0;
    nv__threefry2x32(key[0], key[1], &a, &c);
    store(j, dst, j->half, &a, 1);
  }
}

static void bits_range(void *ctx, int64_t begin, int64_t end) {
  const bits_job *j = ctx;
  while (begin < end) {
    int64_t k = begin / j->per_key, first = begin % j->per_key;
    int64_t last = end - k * j->per_key < j->per_key ? end - k * j->per_key : j->per_key;
      fill_key(j, j->keys + 2 * k, j->out + k * j->out_bytes, first, last);
    begin += last - first;
  }
}

/* The key words in order, read through the key operand's strides (any view). */
static void gather_keys(const nv__operand *key, uint32_t *dst, int64_t n) {
  const nv__output *m = key->meta;
  const uint32_t *base = nv__operand_ptr(key);
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, off = 0;
    for (int d = m->ndim - 1; d >= 0; d--) {
      off += (rem % m->shape[d]) * m->strides[d];
      rem /= m->shape[d];
    }
    dst[i] = base[off];
  }
}

/* Keys of shape (K..., 2) give an output of shape (K..., S...): each key fills its own
 * contiguous part of S's bytes (MLX's batched layout, for vmap over keys). */
static nv_status k_random_bits(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int64_t nkeys = in[0].meta->size / 2;
  if (out->size == 0 || nkeys == 0) return NV_OK;
  uint32_t one[2];
  uint32_t *keys = nkeys == 1 ? one : nv__malloc((size_t)nkeys * 2 * sizeof(uint32_t));
  if (!keys) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "random_bits: out of memory");
  gather_keys(&in[0], keys, 2 * nkeys);
  bits_job j;
  j.keys = keys;
  j.out = nv__output_ptr(out);
  /* random_unit draws 4 bytes per sample, whatever the sample's size. */
  j.unit = node->prim == NV__PRIM_RANDOM_UNIT ? out->dtype : NV_DTYPE_COUNT;
  int64_t width = j.unit == NV_DTYPE_COUNT ? (int64_t)nv_dtype_size(out->dtype) : 4;
  j.bytes = out->size / nkeys * width;
  j.out_bytes = out->size / nkeys * (int64_t)nv_dtype_size(out->dtype);
  int64_t words = (j.bytes + 3) / 4;
  j.half = words / 2;
  j.odd = words % 2;
  j.per_key = j.half + j.odd;
  int64_t items = nkeys * j.per_key;
  /* An item is 8 bytes of output; below a few thousand the pool costs more than it saves. */
  if (items >= 8192) nv__parallel_for(items, 4096, bits_range, &j);
  else bits_range(&j, 0, items);
  if (keys != one) nv__free(keys);
  return NV_OK;
}

void nv__cpu_register_random(nv__kernel_fn *k) {
  k[NV__PRIM_RANDOM_BITS] = k_random_bits;
  k[NV__PRIM_RANDOM_UNIT] = k_random_bits;
}
