/* scaled_dot_product_attention on the CPU: float32 causal prefill (b1 h8 L1024 d64), a decode
 * step over 4096 keys with grouped-query heads (b1 h32 kv8 d128), and bfloat16 prefill.
 * bench/bench_fast_sdpa.py times the NumPy composition and MLX's CPU build beside it. */
#include <math.h>

#include "bench.h"
#include "nuvec.h"

typedef struct sdpa_case {
  nv_array *q, *k, *v;
  const char *mode;
} sdpa_case;

static nv_array *filled(const int *shape, nv_dtype dt) {
  size_t n = (size_t)shape[0] * shape[1] * shape[2] * shape[3];
  float *x = malloc(n * sizeof *x);
  unsigned s = 2024u + (unsigned)n;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
  }
  nv_array *a = nv_array_from_data(x, shape, 4, NV_DTYPE_FLOAT32);
  free(x);
  nv_array *r = nv_astype(a, dt);
  nv_release(a);
  if (nv_eval1(r) != NV_OK) {
    fprintf(stderr, "input: %s\n", nv_last_error());
    exit(1);
  }
  return r;
}

static void run(void *p) {
  sdpa_case *c = p;
  int D = nv_array_dim(c->q, 3);
  nv_array *y = nv_fast_scaled_dot_product_attention(c->q, c->k, c->v, 1.0f / sqrtf((float)D),
                                                     c->mode, NULL, NULL);
  if (nv_eval1(y) != NV_OK) {
    fprintf(stderr, "scaled_dot_product_attention: %s\n", nv_last_error());
    exit(1);
  }
  nv_release(y);
}

static void one(const char *name, const int *qs, const int *ks, nv_dtype dt, const char *mode) {
  sdpa_case c = {filled(qs, dt), filled(ks, dt), filled(ks, dt), mode};
  bench_run(name, run, &c, 2, 9);
  nv_release(c.q), nv_release(c.k), nv_release(c.v);
}

int main(void) {
  one("sdpa_causal_b1h8L1024d64_f32", (int[]){1, 8, 1024, 64}, (int[]){1, 8, 1024, 64},
      NV_DTYPE_FLOAT32, "causal");
  one("sdpa_b1h8L1024d64_f32", (int[]){1, 8, 1024, 64}, (int[]){1, 8, 1024, 64},
      NV_DTYPE_FLOAT32, NULL);
  one("sdpa_decode_h32kv8L4096d128_f32", (int[]){1, 32, 1, 128}, (int[]){1, 8, 4096, 128},
      NV_DTYPE_FLOAT32, NULL);
  one("sdpa_causal_b1h8L1024d64_bf16", (int[]){1, 8, 1024, 64}, (int[]){1, 8, 1024, 64},
      NV_DTYPE_BFLOAT16, "causal");
  return 0;
}
