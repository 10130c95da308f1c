/* The CUDA kernel table against the CPU's (issue 16): every primitive with a CPU kernel has a
 * CUDA kernel, so that nothing on a GPU stream falls back to the CPU. A new CPU primitive added
 * without its CUDA kernel fails this test, which names it. Needs no GPU: the tables are filled
 * without a device. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

int nv__gpu_missing_kernels(char *buf, size_t n);

Test(gpu_kernel_table, every_cpu_primitive_has_a_cuda_kernel) {
  static char buf[65536];
  int n = nv__gpu_missing_kernels(buf, sizeof buf);
  cr_assert(strlen(buf) < sizeof buf - 1, "the list did not fit");
  cr_expect_eq(n, 0, "%d primitives have a CPU kernel and no CUDA kernel: %s", n, buf);
}
