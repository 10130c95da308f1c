/* The random family's primitive parameters and the threefry-2x32 hash, shared by the builders
 * (the key sequence splits keys on the host) and the CPU kernel. */
#ifndef NUVEC_OPS_RANDOM_PARAMS_H
#define NUVEC_OPS_RANDOM_PARAMS_H

#include <stdint.h>

/* random_bits: bytes per element of the output (4, 2 or 1: uint32, uint16, uint8). */
typedef struct nv__random_bits_params {
  int width;
} nv__random_bits_params;

static inline uint32_t nv__rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Threefry-2x32 with 20 rounds (Salmon et al., SC'11), keyed by (k0, k1), applied to the
 * counter pair (*x0, *x1) in place: the block function of JAX's and MLX's generators. The
 * rotations are the published constants; key injection every four rounds adds the round
 * number to the second word. */
static inline void nv__threefry2x32(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1) {
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  uint32_t a = *x0 + k0, b = *x1 + k1;
  /* Written out in full (no loop over the key schedule) so that a loop over counters
   * vectorizes. */
#define NV__TF_MIX(r) \
  a += b;             \
  b = nv__rotl32(b, r); \
  b ^= a;
#define NV__TF_EVEN NV__TF_MIX(13) NV__TF_MIX(15) NV__TF_MIX(26) NV__TF_MIX(6)
#define NV__TF_ODD NV__TF_MIX(17) NV__TF_MIX(29) NV__TF_MIX(16) NV__TF_MIX(24)
  NV__TF_EVEN a += k1; b += k2 + 1u;
  NV__TF_ODD a += k2; b += k0 + 2u;
  NV__TF_EVEN a += k0; b += k1 + 3u;
  NV__TF_ODD a += k1; b += k2 + 4u;
  NV__TF_EVEN a += k2; b += k0 + 5u;
#undef NV__TF_EVEN
#undef NV__TF_ODD
#undef NV__TF_MIX
  *x0 = a;
  *x1 = b;
}

#endif
