/* eval_chain.c - the floor under `ludo eval`'s step rate: the two calls
 * an eval step is made of, chained with the public API and nothing else
 * (no records, no trajectories, no result reading): the policy's action
 * (ludo.eval.policy with bench/eval/echo_policy.lua, ludo_script_call_async)
 * then the echo step (ludo_session_step_async), 16 chains on one loop.
 * bench/eval_bench.sh prints `ludo eval`'s rate against it: what the
 * runner itself costs.
 *
 * usage: build/ludo-eval-chain [steps]   (default 2,000,000; prints steps/s) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ludo.h"

#define CHAINS 16

typedef struct {
  ludo_session_t *s;
  ludo_script_t *p;
  char args[4096];
  char action[256];
  size_t alen;
} chain_t;

static long left;

static void act(chain_t *c, const char *result, size_t len);

static void on_step(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  (void)s;
  if (status != 0) {
    fprintf(stderr, "step: %.*s\n", (int)len, data);
    exit(1);
  }
  if (--left > 0) act(ud, data, len);
}

static void on_act(ludo_script_t *sc, int status, const char *out,
                   size_t len, void *ud) {
  chain_t *c = ud;
  (void)sc;
  if (status != 0 || len >= sizeof c->action) {
    fprintf(stderr, "act: %.*s\n", (int)len, out);
    exit(1);
  }
  memcpy(c->action, out, len); /* `action` answers the action itself */
  c->alen = len;
  if (ludo_session_step_async(c->s, c->action, c->alen, on_step, c) != 0)
    exit(1);
}

static void act(chain_t *c, const char *result, size_t len) {
  int n = snprintf(c->args, sizeof c->args,
                   "[%.*s,{\"step\":1,\"done\":false}]", (int)len, result);
  if (ludo_script_call_async(c->p, "action", c->args, (size_t)n, on_act, c))
    exit(1);
}

int main(int argc, char **argv) {
  static const char init[] = "[{\"kind\":\"lua\",\"module\":\"echo_policy\"},"
                             "{\"action\":{}}]";
  long steps = argc > 1 ? atol(argv[1]) : 2000000;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  chain_t c[CHAINS];
  const char *out;
  size_t n;
  struct timespec t0, t1;
  int i;
  if (ludo_runtime_new(&rt, NULL) != 0 ||
      ludo_env_load(rt, "examples/echo", NULL, &env) != 0)
    return 1;
  for (i = 0; i < CHAINS; i++) {
    if (ludo_session_open(env, &c[i].s) != 0 ||
        ludo_session_reset(c[i].s, NULL, 0, &out, &n) != 0 ||
        ludo_script_open(rt, "ludo.eval.policy", "bench/eval", &c[i].p) ||
        ludo_script_call(c[i].p, "init", init, sizeof init - 1, &out, &n))
      return 1;
  }
  left = steps;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < CHAINS; i++) {
    static const char first[] = "{\"observation\":{\"echoed_message\":"
                                "\"\",\"message_length\":0},\"reward\":"
                                "0.0,\"done\":false}";
    act(&c[i], first, sizeof first - 1);
  }
  ludo_runtime_run(rt);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.0f\n", (double)(steps + CHAINS - 1) /
                       ((double)(t1.tv_sec - t0.tv_sec) +
                        (double)(t1.tv_nsec - t0.tv_nsec) / 1e9));
  for (i = 0; i < CHAINS; i++) {
    ludo_script_free(c[i].p);
    ludo_session_close(c[i].s);
  }
  ludo_runtime_free(rt);
  return 0;
}
