#include <criterion/criterion.h>

#include "nuvec.h"

Test(smoke, add) {
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3];
  int shape[1] = {3};
  nv_array *x = nv_array_from_data(a, shape, 1, NV_DTYPE_FLOAT32);
  nv_array *y = nv_array_from_data(b, shape, 1, NV_DTYPE_FLOAT32);
  nv_array *z = nv_add(x, y);
  cr_assert_eq(nv_array_read(z, out, sizeof out), NV_OK, "%s", nv_last_error());
  cr_assert_float_eq(out[0], 11, 0);
  cr_assert_float_eq(out[2], 33, 0);
  nv_release(x);
  nv_release(y);
  nv_release(z);
}
