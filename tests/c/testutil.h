/* Helpers shared by the C tests. Tests reach internals through libnuvec.a. */
#ifndef NUVEC_TESTUTIL_H
#define NUVEC_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "nuvec.h"

/* A 1-D float32 array from values. */
static inline nv_array *f32v(const float *v, int n) {
  int shape[1] = {n};
  return nv_array_from_data(v, shape, 1, NV_DTYPE_FLOAT32);
}

static inline nv_array *i32v(const int32_t *v, int n) {
  int shape[1] = {n};
  return nv_array_from_data(v, shape, 1, NV_DTYPE_INT32);
}

/* Reads a float32 array of n elements; aborts the test with the message on failure. */
#define READ_F32(x, buf, n)                                                        \
  cr_assert_eq(nv_array_read((x), (buf), (size_t)(n) * sizeof(float)), NV_OK, "%s", \
               nv_last_error())

#define READ_I32(x, buf, n)                                                          \
  cr_assert_eq(nv_array_read((x), (buf), (size_t)(n) * sizeof(int32_t)), NV_OK, "%s", \
               nv_last_error())

/* A seed for random inputs, printed once per test binary. */
static inline unsigned test_seed(void) {
  static unsigned seed;
  if (!seed) {
    const char *s = getenv("NUVEC_TEST_SEED");
    seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
    if (!seed) seed = 1;
    fprintf(stderr, "NUVEC_TEST_SEED=%u\n", seed);
  }
  return seed;
}

/* xorshift: random floats in [-1, 1) that are never all zero. */
static inline float test_randf(unsigned *state) {
  unsigned x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x ? x : 1;
  return (float)((x >> 8) & 0xffff) / 32768.0f - 1.0f + 1.0f / 65536.0f;
}

/* The plain (non-Criterion) tests' assertion: prints the place and the message, exits 1. */
#define CHECK(c, ...)                                                 \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #c);  \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

/* Criterion .init/.fini pair for tests about CPU streams, whatever NUVEC_DEFAULT_DEVICE says
 * (the GPU run's stage 1 runs the suite with the GPU as the default device). */
static nv_device test_prev_device;
static inline void test_on_cpu(void) {
  test_prev_device = nv_default_device();
  nv_set_default_device((nv_device){NV_DEVICE_CPU, 0});
}
static inline void test_back(void) { nv_set_default_device(test_prev_device); }

#endif
