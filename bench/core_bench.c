/* core_bench.c - figures of the runtime foundation, each printed with a
 * baseline measured in the same run (these machines are noisy):
 *
 *   open.cold     open a session building its state (env module + rubric)
 *                 and reset it; baseline: luaL_newstate + the same 6 libs
 *   open.pooled   the same from the pre-warmed pool
 *   memory.idle   bytes held by an idle echo session (after a full GC);
 *                 baseline: a bare Lua state with the same 6 libs
 *   step.echo     steps/s through the blocking C API, echo env with its
 *                 3-child WeightedSum rubric (JSON in and out)
 *   step.noop     steps/s of a no-op Lua step through the C API
 *   baseline.call lua_pcall of an empty Lua function from C (calls/s)
 *   rubric.*      a rubric tree's cost per step through the C API (inputs
 *                 decoded fresh from JSON every step, scores reported in
 *                 metadata.rubrics): the env's step time minus the bare
 *                 env's (same action and observation, no rubric)
 *
 * usage: build/ludo-bench [scale]   (run from the repo root) */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ludo.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench: %s: %s\n", what, ludo_strerror(rc));
  exit(1);
}

static lua_State *bare_state(void) {
  lua_State *L = luaL_newstate();
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, "table", luaopen_table, 1);
  luaL_requiref(L, "string", luaopen_string, 1);
  luaL_requiref(L, "math", luaopen_math, 1);
  luaL_requiref(L, "utf8", luaopen_utf8, 1);
  luaL_requiref(L, "coroutine", luaopen_coroutine, 1);
  lua_settop(L, 0);
  return L;
}

static ludo_runtime_t *runtime(unsigned prewarm) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  int rc;
  ludo_options_init(&o);
  o.module_path = ".";
  o.prewarm = prewarm;
  if ((rc = ludo_runtime_new(&rt, &o)) != 0) die("runtime", rc);
  return rt;
}

static ludo_env_t *load(ludo_runtime_t *rt, const char *path) {
  ludo_env_t *env;
  int rc = ludo_env_load(rt, path, NULL, &env);
  if (rc != 0) {
    fprintf(stderr, "bench: %s\n", ludo_runtime_errmsg(rt));
    exit(1);
  }
  return env;
}

/* p50 of opening a session and resetting it, over n sessions. */
static double open_p50(ludo_env_t *env, double *lat, int n) {
  ludo_session_t *s;
  const char *out;
  size_t len;
  double t0;
  int i, rc;
  for (i = 0; i < n; i++) {
    t0 = now_s();
    if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
    if ((rc = ludo_session_reset(s, "{}", 2, &out, &len)) != 0)
      die("reset", rc);
    lat[i] = now_s() - t0;
    ludo_session_close(s);
  }
  return median(lat, n);
}

int main(int argc, char **argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 1, i, n, rc;
  double t0, *lat;
  const char *out;
  size_t len;
  if (scale < 1) scale = 1;

  /* Baselines. */
  {
    lua_State *L;
    n = 200 * scale;
    lat = calloc((size_t)n, sizeof *lat);
    for (i = 0; i < n; i++) {
      t0 = now_s();
      L = bare_state();
      lat[i] = now_s() - t0;
      lua_close(L);
    }
    printf("baseline.newstate p50 %.1f us\n", median(lat, n) * 1e6);
    {
      double base_open = median(lat, n);
      ludo_runtime_t *rt = runtime(0);
      ludo_env_t *env = load(rt, "examples/echo");
      ludo_session_t *s;
      double p50 = open_p50(env, lat, n);
      printf("open.cold p50 %.1f us (%.2fx baseline.newstate)\n",
             p50 * 1e6, p50 / base_open);
      ludo_env_prewarm(env, (unsigned)n);
      p50 = open_p50(env, lat, n);
      printf("open.pooled p50 %.1f us (%.2fx baseline.newstate)\n",
             p50 * 1e6, p50 / base_open);
      /* Idle memory. */
      L = bare_state();
      lua_gc(L, LUA_GCCOLLECT);
      {
        size_t bare = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 +
                      (size_t)lua_gc(L, LUA_GCCOUNTB);
        if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
        ludo_session_reset(s, "{}", 2, &out, &len);
        ludo_session_step(s, "{\"message\":\"hi\"}", 16, &out, &len);
        ludo_session_collect(s);
        printf("memory.idle %zu bytes (%.2fx baseline bare state of %zu)\n",
               ludo_session_memory(s),
               (double)ludo_session_memory(s) / (double)bare, bare);
        ludo_session_close(s);
      }
      lua_close(L);
      ludo_runtime_free(rt);
    }
    free(lat);
  }
  {
    lua_State *L = bare_state();
    double calls, rate_call, dt;
    n = 2000000 * scale;
    (void)luaL_loadstring(L, "function f() end");
    lua_pcall(L, 0, 0, 0);
    t0 = now_s();
    for (i = 0; i < n; i++) {
      lua_getglobal(L, "f");
      lua_pcall(L, 0, 0, 0);
    }
    dt = now_s() - t0;
    rate_call = n / dt;
    printf("baseline.call %.0f calls/s\n", rate_call);
    lua_close(L);
    {
      ludo_runtime_t *rt = runtime(1);
      ludo_env_t *env = load(rt, "examples/echo");
      ludo_session_t *s;
      static const char action[] = "{\"message\":\"hello world\"}";
      if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
      ludo_session_reset(s, "{}", 2, &out, &len);
      n = 300000 * scale;
      t0 = now_s();
      for (i = 0; i < n; i++)
        if ((rc = ludo_session_step(s, action, sizeof action - 1, &out,
                                    &len)) != 0)
          die("step", rc);
      dt = now_s() - t0;
      calls = n / dt;
      printf("step.echo %.0f steps/s (%.3fx baseline.call) last=%.*s\n",
             calls, calls / rate_call, (int)len, out);
      ludo_session_close(s);
      env = load(rt, "bench/envs/noop");
      if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
      n = 1000000 * scale;
      t0 = now_s();
      for (i = 0; i < n; i++)
        if ((rc = ludo_session_step(s, "{}", 2, &out, &len)) != 0)
          die("step", rc);
      dt = now_s() - t0;
      calls = n / dt;
      printf("step.noop %.0f steps/s (%.3fx baseline.call)\n", calls,
             calls / rate_call);
      ludo_session_close(s);
      ludo_runtime_free(rt);
    }
  }
  {
    /* Rubric trees through the C API. */
    static const char *const actions[] = {"{\"x\":0.15}", "{\"x\":0.35}",
                                          "{\"x\":0.55}", "{\"x\":0.95}"};
    static const struct {
      const char *env, *what;
      int episode;
    } cases[] = {{"bench/envs/rubrics/bare.lua", "bare step", 0},
                 {"bench/envs/rubrics/ws3.lua", "WeightedSum(3 leaves)", 0},
                 {"bench/envs/rubrics/seq.lua", "Sequential(Gate, WeightedSum)", 0},
                 {"bench/envs/rubrics/bare.lua", "bare step, episodes of 100", 100},
                 {"bench/envs/rubrics/disc100.lua", "ExponentialDiscounting T=100", 100}};
    double base = 0;
    size_t c;
    ludo_runtime_t *rt = runtime(1);
    n = 300000 * scale;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      ludo_env_t *env = load(rt, cases[c].env);
      ludo_session_t *s;
      double dt, per;
      if ((rc = ludo_session_open(env, &s)) != 0) die("open", rc);
      ludo_session_reset(s, "{}", 2, &out, &len);
      t0 = now_s();
      for (i = 0; i < n; i++) {
        const char *a = actions[i & 3];
        if (cases[c].episode && i % cases[c].episode == 0)
          ludo_session_reset(s, "{}", 2, &out, &len);
        if ((rc = ludo_session_step(s, a, strlen(a), &out, &len)) != 0)
          die("step", rc);
      }
      dt = now_s() - t0;
      per = dt / n;
      if (strstr(cases[c].what, "bare") != NULL) {
        base = per;
        printf("rubric.base %-32s %.0f steps/s\n", cases[c].what, 1 / per);
      } else {
        printf("rubric.tree %-32s %.0f evals/s, +%.2f us/step over the bare "
               "step (%.2fx its rate)\n", cases[c].what, 1 / per,
               (per - base) * 1e6, base / per);
      }
      ludo_session_close(s);
    }
    ludo_runtime_free(rt);
  }
  return 0;
}
