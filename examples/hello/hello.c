/* A first nuvec program: build arrays lazily, evaluate, print. */
#include <stdio.h>

#include "nuvec.h"

static void print_matrix(const char *name, nv_array *x) {
  float v[64];
  int rows = nv_array_dim(x, 0), cols = nv_array_dim(x, 1);
  if (nv_array_read(x, v, nv_array_nbytes(x)) != NV_OK) {
    printf("%s: error: %s\n", name, nv_last_error());
    return;
  }
  printf("%s (%dx%d):\n", name, rows, cols);
  for (int r = 0; r < rows; r++) {
    for (int c = 0; c < cols; c++) printf(" %8.3f", v[r * cols + c]);
    printf("\n");
  }
}

int main(void) {
  printf("nuvec %s, %d CPU threads\n", nv_version(), nv_get_num_threads());
  nv_scope_begin();
  int shape[2] = {3, 4};
  nv_array *x = nv_reshape(nv_arange(0, 12, 1, NV_DTYPE_FLOAT32), shape, 2);
  /* y = exp(x / 4) * 2 - x, built lazily: nothing runs until it is read. */
  nv_array *y = nv_subtract(nv_multiply_scalar(nv_exp(nv_divide_scalar(x, 4.0)), 2.0), x);
  int axis = 1;
  nv_array *rows = nv_sum(y, &axis, 1, true);
  nv_array *all[2] = {y, rows};
  if (nv_eval(all, 2) != NV_OK) {
    printf("eval failed: %s\n", nv_last_error());
    nv_scope_end();
    return 1;
  }
  print_matrix("x", x);
  print_matrix("exp(x / 4) * 2 - x", y);
  print_matrix("row sums", rows);
  /* Errors are values: a bad op gives an array that carries its message. */
  int bad[1] = {5};
  nv_array *z = nv_add(x, nv_zeros(bad, 1, NV_DTYPE_FLOAT32));
  printf("a broadcast error: %s\n", nv_array_error(z));
  printf("active memory: %zu bytes\n", nv_get_active_memory());
  nv_scope_end();
  return 0;
}
