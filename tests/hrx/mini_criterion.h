/* A minimal stand-in for the part of Criterion that hrx_suite.c uses, so the suite also runs
 * as a plain executable under ThreadSanitizer (where Criterion cannot start). Tests run in
 * registration order in one process; a failed assertion ends its test through longjmp.
 * Exit 0: all passed (or skipped); 1: a failure. */
#ifndef HRX_MINI_CRITERION_H
#define HRX_MINI_CRITERION_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct mc_test {
  const char *suite, *name;
  void (*fn)(void);
  struct mc_test *next;
} mc_test;

static mc_test *mc_head, *mc_tail;
static jmp_buf mc_jump;

static inline void mc_register(mc_test *t) {
  if (mc_tail) mc_tail->next = t;
  else mc_head = t;
  mc_tail = t;
}

static inline void mc_end(int code, const char *file, int line, const char *what, const char *fmt,
                          ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s %s:%d: %s: ", code == 1 ? "FAIL" : "SKIP", file, line, what);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  longjmp(mc_jump, code);
}

#define Test(suite, name, ...)                                                                   \
  static void suite##_##name(void);                                                              \
  __attribute__((constructor)) static void suite##_##name##_register(void) {                     \
    static mc_test t = {#suite, #name, suite##_##name, NULL};                                    \
    mc_register(&t);                                                                             \
  }                                                                                              \
  static void suite##_##name(void)

#define cr_assert(cond, ...)                                                                     \
  do {                                                                                           \
    if (!(cond)) mc_end(1, __FILE__, __LINE__, #cond, "" __VA_ARGS__);                           \
  } while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...) cr_assert(fabs((double)(a) - (double)(b)) <= (eps), __VA_ARGS__)
#define cr_skip_test(...) mc_end(2, __FILE__, __LINE__, "skipped", "" __VA_ARGS__)

/* Runs one test; returns 0 passed, 1 failed, 2 skipped. Nothing here lives across longjmp. */
static int mc_run(mc_test *t) {
  int code = setjmp(mc_jump);
  if (code == 0) t->fn();
  return code;
}

int main(void) {
  int passed = 0, failed = 0, skipped = 0;
  for (mc_test *t = mc_head; t; t = t->next) {
    int code = mc_run(t);
    if (code == 0) {
      passed++;
    } else if (code == 1) {
      fprintf(stderr, "  in %s::%s\n", t->suite, t->name);
      failed++;
    } else {
      skipped++;
    }
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

#endif
