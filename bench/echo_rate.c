/* echo_rate.c - one figure, written against the part of ludo.h that has
 * not changed since the runtime-core issue was filed (runtime_new,
 * env_load, session_open/reset/step), so the same source builds against
 * today's library and against the library of the commit the issue was
 * measured on. bench/then_and_now.sh builds both and runs them in turn:
 * the "1-session echo step >= 1.4x today's" measured as a ratio
 * in one run instead of against a rate written down on another day.
 *
 * usage: echo-rate STEPS   (run from the root of the tree whose
 *        examples/echo it steps); prints "<steps/s> <instructions-free
 *        label>" as one number on stdout */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ludo.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "echo-rate: %s failed (%d)\n", what, rc);
  exit(1);
}

int main(int argc, char **argv) {
  static const char action[] = "{\"message\":\"hello\"}";
  long n = argc > 1 ? atol(argv[1]) : 300000, i;
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  const char *out;
  size_t len;
  double t0;
  int rc;
  ludo_options_init(&o);
  o.module_path = ".";
  o.prewarm = 1;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0) die("runtime", rc);
  if ((rc = ludo_env_load(rt, "examples/echo", NULL, &env)) != 0)
    die("env_load", rc);
  if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
  if ((rc = ludo_session_reset(s, "{}", 2, &out, &len)) != 0)
    die("reset", rc);
  for (i = 0; i < n / 10; i++) /* warm the caches and the allocator */
    if ((rc = ludo_session_step(s, action, sizeof action - 1, &out, &len)))
      die("step", rc);
  t0 = now_s();
  for (i = 0; i < n; i++)
    if ((rc = ludo_session_step(s, action, sizeof action - 1, &out, &len)))
      die("step", rc);
  printf("%.0f\n", (double)n / (now_s() - t0));
  ludo_session_close(s);
  ludo_runtime_free(rt);
  return 0;
}
