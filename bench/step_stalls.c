/* step_stalls.c - the steps that stall: N echo sessions opened and reset,
 * then stepped round-robin with blocking calls, every step timed. Prints
 * the rate, p50, p99.9 and the worst step, and how many steps took over
 * 1 ms with the time spent in them: at thousands of sessions these are
 * the steps that waited for the first touch of new memory (a huge page's
 * fault, docs/performance.md "Session 37"), or for the host.
 *
 *   build/ludo-step-stalls [SESSIONS [STEPS_PER_SESSION]]   (4096, 40) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ludo.h"

static const char ACTION[] = "{\"message\":\"hello\"}";

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void die(ludo_runtime_t *rt, const char *what) {
  fprintf(stderr, "step_stalls: %s: %s\n", what,
          rt ? ludo_runtime_errmsg(rt) : "failed");
  exit(1);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 4096, per = argc > 2 ? atol(argv[2])
                                                           : 40;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env;
  ludo_session_t **ss;
  const char *out;
  size_t len;
  long total, k, over = 0;
  double *t, t0, wall, in_over = 0;
  if (n < 1 || per < 1) {
    fprintf(stderr, "usage: ludo-step-stalls [SESSIONS [STEPS_PER_SESSION]]"
                    "\n");
    return 2;
  }
  total = n * per;
  ss = calloc((size_t)n, sizeof *ss);
  t = malloc((size_t)total * sizeof *t);
  if (ss == NULL || t == NULL) die(NULL, "memory");
  if (ludo_runtime_new(&rt, NULL) != 0) die(rt, "runtime");
  if (ludo_env_load(rt, "examples/echo", NULL, &env) != 0) die(rt, "load");
  for (k = 0; k < n; k++)
    if (ludo_session_open(env, &ss[k]) != 0 ||
        ludo_session_reset(ss[k], "{}", 2, &out, &len) != 0)
      die(rt, "open");
  t0 = now_us();
  for (k = 0; k < total; k++) {
    double a = now_us();
    if (ludo_session_step(ss[k % n], ACTION, sizeof ACTION - 1, &out, &len))
      die(rt, "step");
    t[k] = now_us() - a;
  }
  wall = now_us() - t0;
  for (k = 0; k < total; k++)
    if (t[k] > 1000) {
      over++;
      in_over += t[k];
    }
  qsort(t, (size_t)total, sizeof *t, cmp);
  printf("%ld sessions, %ld steps: %.1fk/s; p50 %.2f us, p99.9 %.1f us, "
         "worst %.0f us; %ld steps over 1 ms, %.1f ms in them\n",
         n, total, (double)total / wall * 1e3, t[total / 2],
         t[(long)((double)total * 0.999)], t[total - 1], over,
         in_over / 1e3);
  ludo_runtime_free(rt);
  free(t);
  free(ss);
  return 0;
}
