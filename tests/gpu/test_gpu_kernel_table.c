/* The CUDA kernel table against the CPU's (issue 16): every primitive with a CPU kernel should
 * have a CUDA kernel, so that nothing on a GPU stream falls back to the CPU. Until that holds,
 * the primitives still without one are listed here: a primitive missing from the list (a new
 * CPU primitive added without its CUDA kernel) fails the test, and so does a listed one that
 * has gained its kernel (the list only shrinks; issue 16 ends with it empty). Needs no GPU:
 * the tables are filled without a device. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

int nv__gpu_missing_kernels(char *buf, size_t n);

/* The primitives without a CUDA kernel (the CPU fallback runs them), in table order. */
static const char *const still_missing[] = {
    "median", "sort", "argsort",
    "partition", "argpartition", "argtopk", "searchsorted", "take", "gather", "take_along_axis",
    "scatter", "scatter_add", "scatter_prod", "scatter_max", "scatter_min", "put_along_axis",
    "masked_scatter", "slice_dynamic", "slice_update_dynamic", "slice_update_add",
    "slice_update_prod", "slice_update_max", "slice_update_min", "diag", "random_bits",
    "random_unit", "vmap_input", "custom_function", "as_strided_vjp",
    NULL,
};

static bool listed(const char *name) {
  for (size_t i = 0; still_missing[i]; i++)
    if (!strcmp(still_missing[i], name)) return true;
  return false;
}

Test(gpu_kernel_table, missing_kernels_are_exactly_the_listed_ones) {
  static char buf[65536];
  int n = nv__gpu_missing_kernels(buf, sizeof buf);
  cr_assert(strlen(buf) < sizeof buf - 1, "the list did not fit");
  int found = 0;
  char *save = NULL;
  for (char *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    cr_expect(listed(name), "%s has a CPU kernel and no CUDA kernel, and is not listed", name);
    found++;
  }
  cr_assert_eq(found, n);
  size_t nlisted = 0;
  while (still_missing[nlisted]) nlisted++;
  cr_expect_eq((size_t)n, nlisted,
               "%zu primitives are listed as missing a CUDA kernel, %d are: a listed one has its "
               "kernel now (take it off the list)",
               nlisted, n);
}
