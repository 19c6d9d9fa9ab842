/* prefetch_ab.c - what asking for the next sessions' memory ahead is worth
 * (runtime/env/session.c, prefetch): N sessions of an environment stepped
 * in batches (ludo_session_step_batch), rounds alternating with and
 * without asking (the runtime's threshold set to 0 or to never), so both
 * see the same host. Prints the median rate of each and the median of the
 * per-round ratios. Reads the runtime's record (env/env.h) to set the
 * threshold.
 *
 *   build/ludo-prefetch-ab ENV_DIR SESSIONS ACTION_JSON ROUNDS
 *   build/ludo-prefetch-ab examples/echo 4096 '{"message":"hello"}' 30 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env/env.h"
#include "ludo.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_result(size_t i, ludo_session_t *s, int status,
                      const char *data, size_t len, void *ud) {
  (void)i;
  (void)s;
  (void)ud;
  if (status != 0) {
    fprintf(stderr, "prefetch_ab: step: %.*s\n", (int)len, data);
    exit(1);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t **ss;
  const char **acts;
  size_t *lens, n, i;
  double *on, *off, *ratio;
  int rounds, r, v, reps;
  if (argc != 5 || atoi(argv[2]) < 1 || atoi(argv[4]) < 1) {
    fprintf(stderr, "usage: ludo-prefetch-ab ENV_DIR SESSIONS ACTION ROUNDS\n");
    return 2;
  }
  n = (size_t)atoi(argv[2]);
  rounds = atoi(argv[4]);
  reps = n >= 1024 ? 2 : (int)(8192 / n) + 1; /* ~8k steps per reading */
  if (ludo_runtime_new(&rt, NULL) != 0 ||
      ludo_env_load(rt, argv[1], NULL, &env) != 0) {
    fprintf(stderr, "prefetch_ab: %s\n", ludo_runtime_errmsg(rt));
    return 1;
  }
  ss = calloc(n, sizeof *ss);
  acts = calloc(n, sizeof *acts);
  lens = calloc(n, sizeof *lens);
  on = calloc((size_t)rounds, sizeof *on);
  off = calloc((size_t)rounds, sizeof *off);
  ratio = calloc((size_t)rounds, sizeof *ratio);
  for (i = 0; i < n; i++) {
    const char *out;
    size_t len;
    if (ludo_session_open(env, &ss[i]) != 0 ||
        ludo_session_reset(ss[i], "{}", 2, &out, &len) != 0) {
      fprintf(stderr, "prefetch_ab: open/reset failed\n");
      return 1;
    }
    acts[i] = argv[3];
    lens[i] = strlen(argv[3]);
  }
  for (r = 0; r < rounds; r++) {
    for (v = 0; v < 2; v++) {
      int asking = v == (r & 1); /* alternate which goes first */
      double t0;
      int k;
      rt->prefetch_live = asking ? 0 : SIZE_MAX;
      t0 = now_s();
      for (k = 0; k < reps; k++)
        if (ludo_session_step_batch(ss, acts, lens, n, on_result, NULL) != 0)
          return 1;
      (asking ? on : off)[r] = (double)reps * (double)n / (now_s() - t0);
    }
    ratio[r] = on[r] / off[r];
  }
  printf("%zu sessions: asking ahead %.1fk/s, not asking %.1fk/s, "
         "ratio %.2fx (median of %d alternated rounds)\n",
         n, median(on, rounds) / 1e3, median(off, rounds) / 1e3,
         median(ratio, rounds), rounds);
  ludo_runtime_free(rt);
  return 0;
}
