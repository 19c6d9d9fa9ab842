/* eval_chain.c - the floor under `ludo eval`'s step rate: the two calls
 * an eval step is made of, chained with the public API and nothing else
 * (no records, no trajectories, no result reading): the policy's action
 * (ludo.eval.policy with bench/eval/echo_policy.lua, ludo_script_call_async)
 * then the echo step (ludo_session_step_async), 16 chains on one loop.
 * bench/eval_bench.sh prints `ludo eval`'s rate against it: what the
 * runner itself costs.
 *
 * With "batch": the chains step in rounds, and ONE policy state
 * (bench/eval/batch_policy.lua) answers all 16 actions of a round in one
 * call: what batching the slots' policy calls would give at best (one
 * state, one call, one JSON framing per round), measured beside the
 * plain chain (docs/eval.md, Figures).
 *
 * With "steps": the echo steps alone, each chain stepping again from its
 * step's callback with the policy's constant action ({"message":
 * "hello"}): ludo-bench's step.echo async @16 as a chain, the baseline
 * eval_bench.sh times by CPU (less disturbed than wall time by other
 * work on the machine).
 *
 * usage: build/ludo-eval-chain [steps [batch|steps]]
 *        (default 2,000,000 steps; prints steps/s) */
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
static chain_t *all;          /* batch: the chains, */
static ludo_script_t *batch;  /* the one policy state, */
static int stepped;           /* the steps of the round that answered */

static int steps_only;        /* steps: no policy */
static const char ECHO[] = "{\"message\":\"hello\"}";

static void batch_round(void);

static void act(chain_t *c, const char *result, size_t len);
static size_t build_args(chain_t *c, const char *result, size_t len);

static void on_step(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  (void)s;
  if (status != 0) {
    fprintf(stderr, "step: %.*s\n", (int)len, data);
    exit(1);
  }
  if (batch != NULL) {
    build_args(ud, data, len);
    if (++stepped == CHAINS) {
      stepped = 0;
      if ((left -= CHAINS) > 0) batch_round();
    }
    return;
  }
  if (steps_only) {
    chain_t *c = ud;
    if (--left > 0 &&
        ludo_session_step_async(c->s, ECHO, sizeof ECHO - 1, on_step, c))
      exit(1);
    return;
  }
  if (--left > 0) act(ud, data, len);
}

/* The end of the JSON value at p (an action: object, array or scalar). */
static const char *value_end(const char *p, const char *end) {
  int depth = 0;
  for (; p < end; p++) {
    if (*p == '"') {
      for (p++; p < end && *p != '"'; p++)
        if (*p == '\\') p++;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if (*p == '}' || *p == ']') {
      if (depth-- == 0) return p;
    } else if (*p == ',' && depth == 0) {
      return p;
    }
    if (depth == 0 && (*p == '"' || *p == '}' || *p == ']')) return p + 1;
  }
  return end;
}

/* A round's actions, [a1, a2, ...]: each chain steps with its own. */
static void on_actions(ludo_script_t *sc, int status, const char *out,
                       size_t len, void *ud) {
  const char *p = out + 1, *end = out + len - 1, *e;
  int i;
  (void)sc;
  (void)ud;
  if (status != 0 || len < 2) {
    fprintf(stderr, "actions: %.*s\n", (int)len, out);
    exit(1);
  }
  for (i = 0; i < CHAINS; i++, p = e + 1) {
    e = value_end(p, end);
    if (ludo_session_step_async(all[i].s, p, (size_t)(e - p), on_step,
                                &all[i]) != 0)
      exit(1);
  }
}

/* One call for the round: [[args, ...]], each chain's args as act()
 * passes them. */
static void batch_round(void) {
  static char args[CHAINS * 4096 + 8];
  size_t k = 0, n;
  int i;
  args[k++] = '[';
  args[k++] = '[';
  for (i = 0; i < CHAINS; i++) {
    if (i > 0) args[k++] = ',';
    n = strlen(all[i].args);
    memcpy(args + k, all[i].args, n);
    k += n;
  }
  args[k++] = ']';
  args[k++] = ']';
  if (ludo_script_call_async(batch, "actions", args, k, on_actions, NULL))
    exit(1);
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

/* Appends result[from, to) to c->args at *n, '"' and '\\' escaped. */
static void quote_part(chain_t *c, size_t *n, const char *result,
                       size_t from, size_t to) {
  size_t i;
  for (i = from; i < to && *n + 8 < sizeof c->args; i++) {
    if (result[i] == '"' || result[i] == '\\') c->args[(*n)++] = '\\';
    c->args[(*n)++] = result[i];
  }
  if (i < to) exit(1);
}

/* The policy's arguments as `ludo eval` makes them, into c->args: [step,
 * reward, error, the result's text as a JSON string with null for its
 * observation, the observation]; their length. */
static size_t build_args(chain_t *c, const char *result, size_t len) {
  static const char ctx[] = "[1,null,null,\"";
  const char *obs = strstr(result, "\"observation\":"), *e;
  size_t n = sizeof ctx - 1, at;
  if (obs == NULL) exit(1);
  obs += 14;
  e = value_end(obs, result + len);
  at = (size_t)(obs - result);
  memcpy(c->args, ctx, n);
  quote_part(c, &n, result, 0, at);
  memcpy(c->args + n, "null", 4);
  n += 4;
  quote_part(c, &n, result, (size_t)(e - result), len);
  n += (size_t)snprintf(c->args + n, sizeof c->args - n, "\",%.*s]",
                        (int)(e - obs), obs);
  if (n >= sizeof c->args) exit(1);
  return n;
}

static void act(chain_t *c, const char *result, size_t len) {
  size_t n = build_args(c, result, len);
  if (ludo_script_call_async(c->p, "action", c->args, n, on_act, c))
    exit(1);
}

int main(int argc, char **argv) {
  static const char init[] = "[{\"kind\":\"lua\",\"module\":\"echo_policy\"},"
                             "{\"action\":{}}]";
  long steps = argc > 1 ? atol(argv[1]) : 2000000;
  int batched = argc > 2 && strcmp(argv[2], "batch") == 0;
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
  if (batched &&
      (ludo_script_open(rt, "batch_policy", "bench/eval", &batch) ||
       ludo_script_call(batch, "init", init, sizeof init - 1, &out, &n)))
    return 1;
  all = c;
  left = steps;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < CHAINS && batch != NULL; i++) {
    static const char first[] = "{\"observation\":{\"echoed_message\":"
                                "\"\",\"message_length\":0},\"reward\":"
                                "0.0,\"done\":false}";
    build_args(&c[i], first, sizeof first - 1);
  }
  steps_only = argc > 2 && strcmp(argv[2], "steps") == 0;
  for (i = 0; i < CHAINS && steps_only; i++)
    if (ludo_session_step_async(c[i].s, ECHO, sizeof ECHO - 1, on_step,
                                &c[i]))
      return 1;
  if (batch != NULL) batch_round();
  for (i = 0; i < CHAINS && batch == NULL && !steps_only; i++) {
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
  ludo_script_free(batch);
  for (i = 0; i < CHAINS; i++) {
    ludo_script_free(c[i].p);
    ludo_session_close(c[i].s);
  }
  ludo_runtime_free(rt);
  return 0;
}
