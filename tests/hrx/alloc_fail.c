/* Host allocation failures: every hrx call either succeeds or fails cleanly with
 * HRX_E_OUT_OF_MEMORY, whichever allocation fails; nothing leaks or crashes (run under ASan).
 * Uses hrx's internal allocation hook, so it links the static library. A plain executable. */
#include "hrx_test_util.h"

void hrx__test_fail_allocations_after(long n);

static int bad;

static int check(const char *what, hrx_status s) {
  if (s == HRX_OK) return 1;
  if (s != HRX_E_OUT_OF_MEMORY) {
    fprintf(stderr, "FAIL %s: %s (%s)\n", what, hrx_status_name(s), hrx_last_error());
    bad++;
  } else if (!strstr(hrx_last_error(), "hrx_")) {
    fprintf(stderr, "FAIL %s: message does not name the call: %s\n", what, hrx_last_error());
    bad++;
  }
  return 0;
}

static void destroy_user(void *user) { free(user); }

/* Runs the scenario with the n-th allocation failing; returns 1 if every step succeeded. */
static int scenario(long n) {
  hrx_runtime *rt = NULL;
  hrx_buffer *d = NULL, *h = NULL, *d2 = NULL;
  hrx_kernel *k = NULL;
  hrx_graph *g = NULL, *g2 = NULL;
  hrx_prepared *p = NULL;
  hrx_completion *c = NULL;
  int ok = 0;
  hrx__test_fail_allocations_after(n);
  if (!check("runtime", hrx_runtime_create(NULL, &rt))) goto out;
  if (!check("buffer", hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256, &d))) goto out;
  if (!check("buffer", hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256, &d2))) goto out;
  if (!check("buffer", hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, 256, &h))) goto out;
  if (!check("kernel", ut_kernel(rt, "add", 64, 2.0f, &k))) goto out;
  if (!check("graph", hrx_graph_create(rt, &g))) goto out;
  if (!check("fill", hrx_graph_fill(g, hrx_view_whole(d), 0, NULL))) goto out;
  hrx_view v = hrx_view_whole(d);
  if (!check("dispatch", hrx_graph_dispatch(g, k, &v, 1, NULL, 0, NULL))) goto out;
  if (!check("copy", hrx_graph_copy(g, hrx_view_whole(h), v, NULL))) goto out;
  int *user = malloc(sizeof *user);
  hrx_binding b = {hrx_view_whole(h), HRX_ACCESS_READ};
  if (!check("host", hrx_graph_host(g, &b, 1, ut_mark_cb, user, destroy_user, NULL))) {
    free(user); /* on failure the caller keeps its user data */
    goto out;
  }
  if (!check("prepare", hrx_graph_prepare(g, &p))) goto out;
  g = NULL;
  if (!check("submit", hrx_submit(p, &c))) goto out;
  hrx_status s = hrx_completion_wait(c, 20000000000ull);
  if (!check("wait", s)) goto out;
  hrx_completion_release(c);
  c = NULL;
  float out[64];
  memcpy(out, (float[]){0}, sizeof(float));
  void *ptr = NULL;
  if (!check("map", hrx_buffer_map(h, HRX_ACCESS_READ, &ptr))) goto out;
  memcpy(out, ptr, sizeof out);
  hrx_buffer_unmap(h, HRX_ACCESS_READ);
  for (int i = 0; i < 64; i++)
    if (out[i] != 2.0f) {
      fprintf(stderr, "FAIL value %d: %g\n", i, out[i]);
      bad++;
      goto out;
    }
  if (!check("graph", hrx_graph_create(rt, &g2))) goto out;
  hrx_view v2 = hrx_view_whole(d2);
  if (!check("fill", hrx_graph_fill(g2, v2, 0, NULL))) goto out;
  if (!check("dispatch", hrx_graph_dispatch(g2, k, &v2, 1, NULL, 0, NULL))) goto out;
  if (!check("copy", hrx_graph_copy(g2, hrx_view_whole(h), v2, NULL))) goto out;
  if (!check("host", hrx_graph_host(g2, &b, 1, ut_mark_cb, NULL, NULL, NULL))) goto out;
  hrx_update_mode mode;
  if (!check("update", hrx_prepared_update(p, g2, 0, &mode))) goto out;
  g2 = NULL;
  if (!check("submit", hrx_submit(p, &c))) goto out;
  if (!check("wait", hrx_completion_wait(c, 20000000000ull))) goto out;
  ok = 1;
out:
  hrx__test_fail_allocations_after(-1);
  hrx_completion_release(c);
  hrx_graph_release(g);
  hrx_graph_release(g2);
  hrx_prepared_release(p);
  hrx_kernel_release(k);
  hrx_buffer_release(d);
  hrx_buffer_release(d2);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  return ok;
}

int main(void) {
  long n = 0;
  while (!scenario(n) && n < 5000) n++;
  printf("alloc_fail: every one of the first %ld allocations failed in turn, cleanly; %d bad\n", n,
         bad);
  return bad || n >= 5000 ? 1 : 0;
}
