/* scale_ratio.c - the figure "steps/s at N sessions against 1 session"
 * (issue 7; ludo-bench's scale group measures it for echo alone) for any
 * environment: blocking steps of one session and of N sessions in turn,
 * the two alternated for ROUNDS rounds so that both see the same host,
 * and the median of each and of the per-round ratios printed. Comparing
 * environments that do more or less Lua work per step tells which part of
 * a step's cost grows with the sessions (docs/performance.md, "Session
 * 38").
 *
 *   build/ludo-scale-ratio ENV_DIR ACTION_JSON [SESSIONS [ROUNDS]]
 *   taskset -c 0 build/ludo-scale-ratio examples/echo \
 *     '{"message":"hello"}' 4096 7
 * (run from the repo root: the environment's modules load from ".") */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ludo.h"
#include "table.h"

#define STEPS 49152L /* per reading, as ludo-bench's scale group */
#define MAX_ROUNDS 64

/* Steps/s of `steps` blocking steps over the first k sessions in turn. */
static double rate(ludo_session_t **ss, long k, long steps, const char *act,
                   size_t len) {
  const char *out;
  size_t out_len;
  long i;
  int rc;
  double t0 = bench_now_us();
  for (i = 0; i < steps; i++)
    if ((rc = ludo_session_step(ss[i % k], act, len, &out, &out_len)) != 0) {
      fprintf(stderr, "scale_ratio: step: %s: %s\n", ludo_err_name(rc),
              ludo_session_errmsg(ss[i % k]));
      exit(1);
    }
  return (double)steps / ((bench_now_us() - t0) / 1e6);
}

int main(int argc, char **argv) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t **ss;
  double one[MAX_ROUNDS], many[MAX_ROUNDS], ratio[MAX_ROUNDS];
  long n = argc > 3 ? atol(argv[3]) : 4096, i;
  int rounds = argc > 4 ? atoi(argv[4]) : 7, r;
  size_t len;
  if (argc < 3 || n < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: ludo-scale-ratio ENV_DIR ACTION_JSON "
                    "[SESSIONS [ROUNDS <= 64]]\n");
    return 2;
  }
  len = strlen(argv[2]);
  ludo_options_init(&o);
  o.module_path = ".";
  if (ludo_runtime_new(&rt, &o) != 0 ||
      ludo_env_load(rt, argv[1], NULL, &env) != 0) {
    fprintf(stderr, "scale_ratio: %s\n", ludo_runtime_errmsg(rt));
    return 1;
  }
  if ((ss = calloc((size_t)n, sizeof *ss)) == NULL) return 1;
  for (i = 0; i < n; i++) {
    const char *out;
    size_t out_len;
    if (ludo_session_open(env, &ss[i]) != 0 ||
        ludo_session_reset(ss[i], "{}", 2, &out, &out_len) != 0) {
      fprintf(stderr, "scale_ratio: open/reset failed\n");
      return 1;
    }
  }
  /* a few steps of each session first: heaps grown, lines learned */
  rate(ss, n, n * 4 > STEPS ? n * 4 : STEPS, argv[2], len);
  rate(ss, 1, 20000, argv[2], len);
  for (r = 0; r < rounds; r++) {
    one[r] = rate(ss, 1, STEPS, argv[2], len);
    many[r] = rate(ss, n, STEPS, argv[2], len);
    ratio[r] = many[r] / one[r];
  }
  printf("%s: @1 %.1fk/s, @%ld %.1fk/s, ratio %.3f (medians of %d "
         "alternated rounds)\n",
         argv[1], bench_median(one, (size_t)rounds) / 1e3, n, bench_median(many, (size_t)rounds) / 1e3,
         bench_median(ratio, (size_t)rounds), rounds);
  for (i = 0; i < n; i++) ludo_session_close(ss[i]);
  free(ss);
  ludo_runtime_free(rt);
  return 0;
}
