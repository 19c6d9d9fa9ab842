/* step_count.c - runs one kind of call many times, for instruction counts
 * that the host's load does not move (docs/performance.md):
 *
 *   valgrind --tool=callgrind build/ludo-step-count examples/echo \
 *     '{"message":"hello"}' 20000     (and 60000: subtract the totals;
 *     with LTO, ludo_session_step is inlined, so --toggle-collect misses)
 *   valgrind --tool=callgrind build/ludo-step-count --cold examples/echo 200
 *
 * Step mode: opens and resets SESSIONS sessions of ENV (default 1), then
 * STEPS blocking steps with ACTION, round-robin over them (run it twice
 * with different counts and divide the difference of the totals by the
 * difference of the counts: that takes the setup out). With many sessions, cachegrind gives the cache misses
 * a step costs once sessions no longer fit in the caches:
 *   valgrind --tool=callgrind --cache-sim=yes ... ENV ACTION STEPS 4096 --cold: opens, resets and
 * closes N sessions with no pool (prewarm 0), as `open.cold` does.
 * Prints the last result (step mode), so a wrong action shows.
 *
 * Step mode writes ludo_step_marker before each step and, when
 * LUDO_STEP_MARKER_FILE is set, the marker's address into that file:
 * bench/lines_per_step.py finds the steps by those stores in a valgrind
 * lackey trace. Budgets are raised for valgrind's slowness. With
 * LUDO_PREFETCH_RANGES set it also writes, after the steps, the memory
 * the runtime asks for ahead of each session's step (write_ranges). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/env.h"
#include "ludo.h"

static void die(const char *what, int rc) {
  fprintf(stderr, "step_count: %s: %s\n", what, ludo_err_name(rc));
  exit(1);
}

static ludo_env_t *load(ludo_runtime_t *rt, const char *path) {
  ludo_env_t *env;
  int rc = ludo_env_load(rt, path, NULL, &env);
  if (rc != 0) {
    fprintf(stderr, "step_count: %s: %s\n", path, ludo_runtime_errmsg(rt));
    exit(1);
  }
  return env;
}

static void cold(const char *path, long n) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  const char *out;
  size_t len;
  long i;
  int rc;
  ludo_options_init(&o);
  o.prewarm = 0;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0) die("runtime", rc);
  env = load(rt, path);
  ludo_env_prewarm(env, 0);
  for (i = 0; i < n; i++) {
    if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
    if ((rc = ludo_session_reset(s, "{}", 2, &out, &len)) != 0)
      die("reset", rc);
    ludo_session_close(s);
    ludo_runtime_poll(rt, 0);
  }
  ludo_runtime_free(rt);
}

/* Stored before each step (see above). */
volatile long ludo_step_marker;

static void write_marker_address(void) {
  const char *path = getenv("LUDO_STEP_MARKER_FILE");
  FILE *f = path != NULL ? fopen(path, "w") : NULL;
  if (f == NULL) return;
  fprintf(f, "%p\n", (void *)&ludo_step_marker);
  fclose(f);
}

/* Writes "SESSION START END" for each range the runtime would ask for
 * ahead of a step of each session (when LUDO_PREFETCH_RANGES names a
 * file): bench/lines_per_step.py --coverage reads them. */
typedef struct {
  FILE *f;
  long i;
} ranges_t;

static void range_line(const void *p, size_t n, void *ud) {
  ranges_t *r = ud;
  fprintf(r->f, "%ld %p %p\n", r->i, p, (const void *)((const char *)p + n));
}

static void write_ranges(ludo_session_t **ss, long k) {
  const char *path = getenv("LUDO_PREFETCH_RANGES");
  ranges_t r;
  if (path == NULL || (r.f = fopen(path, "w")) == NULL) return;
  for (r.i = 0; r.i < k; r.i++) ludo__session_ranges(ss[r.i], range_line, &r);
  fclose(r.f);
}

static void steps(const char *path, const char *action, long n, long k) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t **ss = calloc((size_t)k, sizeof *ss);
  const char *out = "";
  size_t len = 0, alen = strlen(action);
  long i;
  int rc;
  if (ss == NULL) die("sessions", LUDO_ENOMEM);
  ludo_options_init(&o);
  o.cpu_budget_ms = 600000; /* valgrind's lackey runs ~100x slower */
  o.wall_limit_ms = 0;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0) die("runtime", rc);
  env = load(rt, path);
  for (i = 0; i < k; i++) {
    if ((rc = ludo_session_open(env, &ss[i])) != 0) die("open", rc);
    if ((rc = ludo_session_reset(ss[i], "{}", 2, &out, &len)) != 0)
      die("reset", rc);
  }
  write_marker_address();
  for (i = 0; i < n; i++) {
    ludo_step_marker = i;
    if ((rc = ludo_session_step(ss[i % k], action, alen, &out, &len)) != 0)
      die("step", rc);
  }
  ludo_step_marker = -1;
  write_ranges(ss, k);
  printf("%.*s\n", (int)len, out);
  ludo_runtime_free(rt);
  free(ss);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--cold") == 0) {
    cold(argv[2], atol(argv[3]));
    return 0;
  }
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: ludo-step-count ENV ACTION STEPS [SESSIONS]\n"
                    "       ludo-step-count --cold ENV N\n");
    return 2;
  }
  steps(argv[1], argv[2], atol(argv[3]), argc == 5 ? atol(argv[4]) : 1);
  return 0;
}
