/* The fft family on the CPU: complex, real and 2-D transforms of float32 data at power-of-two,
 * mixed-radix and prime (Bluestein) lengths; build, evaluate and free per case.
 * bench/bench_fft.py times numpy.fft and MLX's CPU build beside it. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "nuvec.h"

typedef struct bcase {
  const char *name;
  int rows, n;
  int kind; /* 0 fft, 1 rfft, 2 fft2 of rows x n */
} bcase;

static const bcase cases[] = {
    {"fft_c64_256x1024", 256, 1024, 0},   {"fft_c64_256x1000", 256, 1000, 0},
    {"fft_c64_256x1009", 256, 1009, 0},   {"rfft_f32_64x65536", 64, 65536, 1},
    {"rfft_f32_4096x256", 4096, 256, 1},  {"fft2_c64_512x512", 512, 512, 2},
};

static nv_array *input;
static const bcase *current;

static void run(void *ctx) {
  (void)ctx;
  nv_array *y = current->kind == 1 ? nv_fft_rfft(input, NULL, -1, NV_FFT_NORM_BACKWARD)
                : current->kind == 2
                    ? nv_fft_fftn(input, NULL, NULL, 0, NV_FFT_NORM_BACKWARD)
                    : nv_fft_fft(input, NULL, -1, NV_FFT_NORM_BACKWARD);
  if (nv_eval1(y) != NV_OK) {
    fprintf(stderr, "%s: %s\n", current->name, nv_last_error());
    exit(1);
  }
  nv_release(y);
}

int main(void) {
  nv_array *key = nv_random_key(0);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    current = &cases[i];
    int shape[2] = {current->rows, current->n};
    nv_array *x = nv_random_normal(shape, 2, NV_DTYPE_FLOAT32, 0, 1, key);
    input = current->kind == 1 ? nv_retain(x) : nv_astype(x, NV_DTYPE_COMPLEX64);
    nv_release(x);
    if (nv_eval1(input) != NV_OK) return 1;
    bench_run(current->name, run, NULL, 2, 15);
    nv_release(input);
  }
  nv_release(key);
  return 0;
}
