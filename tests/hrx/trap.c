/* A kernel that traps poisons the CUDA context: the runtime must fail as a whole, cleanly.
 * Every later call reports device lost, completions finish, and nothing crashes or hangs.
 * A plain executable, run in its own process (the context stays poisoned until exit).
 * Exit 0: passed; 1: failed; 77: skipped (no CUDA device). */
#include "hrx_test_util.h"

static int failures;

#define CHECK(cond, ...)                                                                         \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                       \
      fprintf(stderr, __VA_ARGS__);                                                              \
      fprintf(stderr, " (last error: %s)\n", hrx_last_error());                                  \
      failures++;                                                                                \
    }                                                                                            \
  } while (0)

int main(void) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.engine = HRX_ENGINE_CUDA;
  hrx_runtime *rt = NULL;
  hrx_status s = hrx_runtime_create(&o, &rt);
  if (s == HRX_E_NO_DEVICE || s == HRX_E_UNSUPPORTED) {
    printf("trap: skipped (%s)\n", hrx_last_error());
    return 77;
  }
  if (s != HRX_OK) {
    fprintf(stderr, "runtime: %s\n", hrx_last_error());
    return 1;
  }
  const char *src = "extern \"C\" __global__ void boom(float *x) { if (threadIdx.x == 3) __trap();"
                    " x[threadIdx.x] = 1.0f; }\n";
  hrx_binding_contract b = {HRX_ACCESS_WRITE, 4, 256};
  hrx_kernel_contract c = {&b, 1, NULL, 0};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  hrx_kernel *k = NULL;
  hrx_buffer *d = NULL, *other = NULL, *h = NULL;
  hrx_graph *g = NULL, *g2 = NULL;
  hrx_prepared *p = NULL, *p2 = NULL;
  s = hrx_kernel_create_source(rt, src, "boom", NULL, 0, &c, grid, block, &k);
  CHECK(s == HRX_OK, "kernel");
  CHECK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256, &d) == HRX_OK, "buffer");
  CHECK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256, &other) == HRX_OK, "buffer");
  CHECK(hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, 256, &h) == HRX_OK, "buffer");
  if (failures) return 1;
  hrx_view v = hrx_view_whole(d);
  CHECK(hrx_graph_create(rt, &g) == HRX_OK, "graph");
  CHECK(hrx_graph_dispatch(g, k, &v, 1, NULL, 0, NULL) == HRX_OK, "dispatch");
  CHECK(hrx_graph_prepare(g, &p) == HRX_OK, "prepare");
  CHECK(hrx_graph_create(rt, &g2) == HRX_OK, "graph");
  CHECK(hrx_graph_copy(g2, hrx_view_whole(h), hrx_view_whole(other), NULL) == HRX_OK, "copy");
  CHECK(hrx_graph_prepare(g2, &p2) == HRX_OK, "prepare");
  if (failures) return 1;
  hrx_completion *c1 = NULL, *c2 = NULL;
  CHECK(hrx_submit(p, &c1) == HRX_OK, "submit");
  s = hrx_completion_wait(c1, 30000000000ull);
  CHECK(s == HRX_E_DEVICE_LOST, "the trapping run failed with %s", hrx_status_name(s));
  printf("trap: run finished with %s: %s\n", hrx_status_name(s), hrx_last_error());
  s = hrx_runtime_health(rt);
  CHECK(s == HRX_E_DEVICE_LOST, "health is %s", hrx_status_name(s));
  printf("trap: health %s: %s\n", hrx_status_name(s), hrx_last_error());
  s = hrx_submit(p2, &c2);
  CHECK(s == HRX_E_DEVICE_LOST && strstr(hrx_last_error(), "runtime failed"),
        "a later submit of another graph reports %s", hrx_status_name(s));
  hrx_buffer *nb = NULL;
  s = hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 64, &nb);
  CHECK(s == HRX_E_DEVICE_LOST, "buffer create reports %s", hrx_status_name(s));
  hrx_graph *ng = NULL;
  s = hrx_graph_create(rt, &ng);
  CHECK(s == HRX_E_DEVICE_LOST, "graph create reports %s", hrx_status_name(s));
  void *ptr = NULL;
  s = hrx_buffer_map(h, HRX_ACCESS_READ, &ptr);
  CHECK(s == HRX_E_DEVICE_LOST, "map reports %s", hrx_status_name(s));
  s = hrx_runtime_drain(rt);
  CHECK(s == HRX_E_DEVICE_LOST, "drain reports %s", hrx_status_name(s));
  hrx_completion_release(c1);
  hrx_prepared_release(p);
  hrx_prepared_release(p2);
  hrx_kernel_release(k);
  hrx_buffer_release(d);
  hrx_buffer_release(other);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  printf("trap: %s\n", failures ? "FAILED" : "passed: the runtime failed as a whole, cleanly");
  return failures ? 1 : 0;
}
