/* llm_bench.c - the figure of ludo.llm: C concurrent LLM requests in
 * flight on one loop against a mock LLM server answering after a
 * scripted delay D. C sessions of bench/envs/llm each make R/C chat
 * calls in a row (ludo_session_step_async on all of them, then
 * ludo_runtime_run), so C requests are in flight until the end.
 *
 *   wall / ideal    wall time over R / C x D, the time the requests take
 *                   if ludo added nothing (target <= 1.3)
 *   cpu/request     user + system CPU of this process (getrusage) per
 *                   request (target <= 100 us); the mock server runs in
 *                   its own process and is not counted: its CPU over the
 *                   whole run (RUSAGE_CHILDREN) is printed apart, since
 *                   on a 2-core machine the two processes share the
 *                   cores and wall/ideal reflects both
 *
 * A first, untimed round (one call per session) opens the connections;
 * the timed round reuses them (keep-alive), as a long eval does.
 *
 * The mock is the Node one of the tests (spec/llm/mock_llm.js), or with
 * "c" the bench-only C one (bench/llm_mock.c, build/ludo-llm-mock): Node
 * needs 150-300 us of CPU per request, more than a core at 20,000
 * requests/s, and on a 2-core machine the wall time then measures the
 * mock as much as ludo.
 *
 * usage: build/ludo-llm-bench [requests [concurrency [delay_ms [c|node]]]]
 *        (run from the repo root; default 10000 1000 50 node) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ludo.h"
#include "table.h"
#include "../spec/c/mockllm.h"

typedef mockllm_t mock_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void die(const char *what) {
  fprintf(stderr, "llm-bench: %s\n", what);
  exit(1);
}

/* Prints the figures as bench/table.h's table. */
static void report(int n, int c, int delay, double wall, double ideal,
                   double cpu, double mock_cpu, int failed) {
  row_t r[3];
  char fig[48];
  printf("llm.concurrent: %d requests, %d in flight, %d ms delay, "
         "%d failed\n", n, c, delay, failed);
  snprintf(fig, sizeof fig, "llm @%d wall", c);
  bench_row(&r[0], fig, "ms", wall * 1e3, "requests/concurrency x delay",
            ideal * 1e3, T_LE, ON_RATIO, 1.3);
  snprintf(fig, sizeof fig, "llm @%d ludo CPU per request", c);
  bench_row(&r[1], fig, "us", cpu * 1e6 / n, "", NAN, T_LE, ON_MEASURED,
            100);
  snprintf(fig, sizeof fig, "llm @%d mock CPU per request", c);
  bench_row(&r[2], fig, "us", mock_cpu * 1e6 / (n + c),
            "ludo CPU per request", cpu * 1e6 / n, T_NONE, 0, 0);
  bench_print_table(r, 3);
}

/* Starts the mock answering "ok" after `delay_ms`: the C one (next to
 * this executable: argv0's folder) or the Node one with that script. */
static void mock_start(mock_t *m, int delay_ms, int use_c, const char *argv0) {
  char script[128], exe[4096];
  const char *slash = strrchr(argv0, '/');
  if (use_c) {
    snprintf(exe, sizeof exe, "%.*s/ludo-llm-mock",
             slash ? (int)(slash - argv0) : 1, slash ? argv0 : ".");
    if (mockllm_start_c(m, exe, delay_ms) != 0)
      die("the C mock LLM server did not start (make build/ludo-llm-mock)");
    return;
  }
  snprintf(script, sizeof script,
           "{\"delay_ms\": %d, \"record\": false, \"default\": \"ok\"}",
           delay_ms);
  if (mockllm_start(m, script) != 0)
    die("the mock LLM server did not start (node spec/llm/mock_llm.js)");
}

static int pending, failed;

static void step_done(ludo_session_t *s, int status, const char *out,
                      size_t len, void *ud) {
  (void)s;
  (void)ud;
  pending--;
  if (status != 0 || strstr(out, "\"fails\":0") == NULL) {
    if (failed++ == 0) fprintf(stderr, "llm-bench: %.*s\n", (int)len, out);
  }
}

/* Steps every session once with n calls each; returns the wall time. */
static double round_of(ludo_runtime_t *rt, ludo_session_t **ss, int c,
                       int port, int n) {
  char action[256];
  double t0;
  int i, len = snprintf(action, sizeof action,
                        "{\"base_url\": \"http://127.0.0.1:%d/v1\", "
                        "\"n\": %d, \"concurrency\": %d}", port, n, c);
  t0 = now_s();
  for (i = 0; i < c; i++) {
    if (ludo_session_step_async(ss[i], action, (size_t)len, step_done,
                                NULL) != 0)
      die("step_async failed");
    pending++;
  }
  ludo_runtime_run(rt);
  if (pending != 0) die("steps left over");
  return now_s() - t0;
}

static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  int requests = argc > 1 ? atoi(argv[1]) : 10000;
  int c = argc > 2 ? atoi(argv[2]) : 1000;
  int delay = argc > 3 ? atoi(argv[3]) : 50;
  int use_c = argc > 4 && strcmp(argv[4], "c") == 0;
  int i, per = requests / (c > 0 ? c : 1);
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t **ss;
  mock_t m;
  double wall, cpu0, ideal;
  if (c < 1 || per < 1 || delay < 1 ||
      (argc > 4 && !use_c && strcmp(argv[4], "node") != 0))
    die("usage: [requests [concurrency [delay_ms [c|node]]]]");
  raise_fd_limit();
  mock_start(&m, delay, use_c, argv[0]);
  ludo_options_init(&o);
  o.lua_llm = LUDO_LUA_LLM_SESSIONS;
  o.prewarm = 0;
  o.module_path = ".";
  o.wall_limit_ms = 0;
  if (ludo_runtime_new(&rt, &o) != 0) die("no runtime");
  if (ludo_env_load(rt, "bench/envs/llm", NULL, &env) != 0)
    die(ludo_runtime_errmsg(rt));
  ss = calloc((size_t)c, sizeof *ss);
  for (i = 0; i < c; i++) {
    const char *out;
    size_t len;
    if (ludo_session_open(env, &ss[i]) != 0 ||
        ludo_session_reset(ss[i], NULL, 0, &out, &len) != 0)
      die("cannot open sessions");
  }
  wall = round_of(rt, ss, c, m.port, 1); /* opens the connections */
  printf("warm-up: %d requests (new connections) in %.3f s\n", c, wall);
  cpu0 = cpu_s();
  wall = round_of(rt, ss, c, m.port, per);
  cpu0 = cpu_s() - cpu0;
  ideal = (double)per * delay / 1000.0;
  for (i = 0; i < c; i++) ludo_session_close(ss[i]);
  free(ss);
  ludo_env_free(env);
  ludo_runtime_free(rt);
  printf("mock: %s\n", use_c ? "C (bench/llm_mock.c)"
                             : "Node (spec/llm/mock_llm.js)");
  report(per * c, c, delay, wall, ideal, cpu0, mockllm_stop(&m), failed);
  return failed ? 1 : 0;
}
