/* test-limits.c - the sandbox's limits: CPU budget (also against
 * pcall-wrapped loops), instruction budget, memory cap. After every killed
 * call the session must work again. Fixture: spec/fixtures/c/limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define LIMITS "spec/fixtures/c/limits"
#define CAP ((size_t)8 << 20)

/* Regressions these tests guard: a call killed by its budget must not
 * leave the session with hooks disabled (Lua leaves allowhook at 0 on a
 * thread that died from a hook, so the call thread is replaced), and an
 * error at the memory cap must not need memory to be reported. */

/* reset + an "ok" step succeed: the session survived. */
static void assert_usable(ludo_session_t *s) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_TRUE(json_is_true(JGET(JPARSE(out, len), "observation/ready")));
  ASSERT_OK(ludo_session_step(s, J("{\"mode\":\"ok\"}"), &out, &len));
  ASSERT_TRUE(json_is_true(JGET(JPARSE(out, len), "observation/ok")));
}

static ludo_session_t *limits_session(ludo_runtime_t **rt,
                                      ludo_options_t *o) {
  ludo_env_t *env;
  ludo_session_t *s;
  *rt = test_rt_new(o);
  env = test_env_load(*rt, LIMITS, NULL);
  s = test_open(env);
  assert_usable(s);
  return s;
}

static void expect_step_error(ludo_session_t *s, const char *action,
                              int code, const char *text) {
  const char *out;
  size_t len;
  ASSERT_ERR(ludo_session_step(s, action, strlen(action), &out, &len), code);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), ludo_err_name(code));
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), text);
}

/* A runaway loop is stopped, twice in a row on one session. */
TEST_IMPL(limit_cpu_loop) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  test_options(&o);
  o.cpu_budget_ms = 50;
  s = limits_session(&rt, &o);
  expect_step_error(s, "{\"mode\":\"loop\"}", LUDO_ETIMEOUT, "50 ms");
  assert_usable(s);
  /* Twice in a row: the budget is per call and re-armed. */
  expect_step_error(s, "{\"mode\":\"loop\"}", LUDO_ETIMEOUT, "CPU budget");
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

static double mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A short CPU budget or wall-clock limit never ends a call before it ran
 * that long: such limits are measured on the precise clock, where the
 * coarse one (a tick behind, more after the CPU idled) ended a 5 ms
 * budget after 0.02 ms, and any budget up to a tick or more early. The call's time, from the host's side, is at
 * least the limit each time (a lower bound only: a loaded host makes it
 * longer, never shorter). */
TEST_IMPL(limit_short_budgets_not_early) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  int i, kind;
  for (kind = 0; kind < 2; kind++) { /* 0: CPU budget; 1: wall limit */
    test_options(&o);
    if (kind == 0) {
      o.cpu_budget_ms = 30; /* the environment's load fits (ASan too) */
    } else {
      o.cpu_budget_ms = 60000;
      o.wall_limit_ms = 30;
    }
    s = limits_session(&rt, &o);
    for (i = 0; i < 20; i++) {
      const char *out;
      size_t len;
      double t0;
      if (i % 2) usleep(20000); /* an idle CPU lets the coarse clock lag */
      t0 = mono_ms();
      ASSERT_ERR(ludo_session_step(s, J("{\"mode\":\"loop\"}"), &out, &len),
                 LUDO_ETIMEOUT);
      if (mono_ms() - t0 < 30.0)
        FAIL("a 30 ms %s ended the call after %.3f ms: %s",
             kind ? "wall limit" : "budget", mono_ms() - t0,
             ludo_session_errmsg(s));
    }
    ludo_session_close(s);
    test_rt_free(rt);
  }
}

/* pcall, xpcall and coroutines cannot swallow the timeout. Each mode gets
 * a fresh session, so that this test does not depend on the re-arming
 * checked by limit_cpu_loop. */
TEST_IMPL(limit_cpu_pcall_loop) {
  static const char *const modes[] = {"{\"mode\":\"pcall_loop\"}",
                                      "{\"mode\":\"xpcall_loop\"}",
                                      "{\"mode\":\"coroutine_loop\"}"};
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  size_t i;
  test_options(&o);
  o.cpu_budget_ms = 50;
  rt = test_rt_new(&o);
  env = test_env_load(rt, LIMITS, NULL);
  for (i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    ludo_session_t *s = test_open(env);
    assert_usable(s);
    expect_step_error(s, modes[i], LUDO_ETIMEOUT, "budget");
    assert_usable(s);
    ludo_session_close(s);
  }
  test_rt_free(rt);
}

/* The same limit on the non-blocking path, through the callback. */
typedef struct {
  int calls, status;
} result_t;

static void result_cb(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud) {
  result_t *r = ud;
  (void)s;
  (void)data;
  (void)len;
  r->calls++;
  r->status = status;
}

TEST_IMPL(limit_cpu_async) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  result_t r = {0, 0};
  test_options(&o);
  o.cpu_budget_ms = 50;
  s = limits_session(&rt, &o);
  ASSERT_OK(ludo_session_step_async(s, J("{\"mode\":\"pcall_loop\"}"),
                                    result_cb, &r));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(r.calls, 1);
  ASSERT_ERR(r.status, LUDO_ETIMEOUT);
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Runs the memory bomb `action` under an 8 MiB cap: ENOMEM, the state
 * stays within its cap, and the session works afterwards. Returns the
 * session (its runtime in *rt); the caller frees both. */
static ludo_session_t *memory_bomb(ludo_runtime_t **rt, const char *action) {
  ludo_options_t o;
  ludo_session_t *s;
  test_options(&o);
  o.memory_cap = CAP;
  s = limits_session(rt, &o);
  expect_step_error(s, action, LUDO_ENOMEM, "memory");
  ASSERT_LE(ludo_session_memory(s), CAP);
  assert_usable(s);
  return s;
}

/* Table growth past the cap. */
TEST_IMPL(limit_memory_table) {
  ludo_runtime_t *rt;
  ludo_session_t *s = memory_bomb(&rt, "{\"mode\":\"table\"}");
  ludo_stats_t st;
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 1);
  /* The same again: the garbage of the killed call was reclaimable. */
  expect_step_error(s, "{\"mode\":\"table\"}", LUDO_ENOMEM, "memory");
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* One C call (string.rep) asking for far more than the cap: hooks never
 * fire inside C functions, only the cap stops it. */
TEST_IMPL(limit_memory_string_rep) {
  ludo_runtime_t *rt;
  ludo_session_t *s = memory_bomb(&rt, "{\"mode\":\"rep\"}");
  ASSERT_LT(test_heap.peak, (size_t)256 << 20); /* never near 1 GiB */
  ludo_session_close(s);
  test_rt_free(rt);
}

TEST_IMPL(limit_memory_concat) {
  ludo_runtime_t *rt;
  ludo_session_t *s = memory_bomb(&rt, "{\"mode\":\"concat\"}");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* max_instructions stops a loop long before the CPU budget would. */
TEST_IMPL(limit_max_instructions) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  test_options(&o);
  o.max_instructions = 1000000;
  /* The CPU budget stays at its default (10 s): the message shows which
   * budget stopped the call. */
  rt = test_rt_new(&o);
  env = test_env_load(rt, LIMITS, NULL);
  s = test_open(env);
  assert_usable(s); /* normal calls fit in the budget */
  expect_step_error(s, "{\"mode\":\"loop\"}", LUDO_ETIMEOUT, "instructions");
  assert_usable(s);
  ludo_session_close(s);
  /* A fresh session for the pcall-wrapped loop (limit_cpu_loop checks two
   * kills on one session). */
  s = test_open(env);
  expect_step_error(s, "{\"mode\":\"pcall_loop\"}", LUDO_ETIMEOUT,
                    "instructions");
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A result is written under the call's budget and into the session's
 * memory: a tiny DAG of shared tables that would encode to terabytes ends
 * with ENOMEM under a small cap, and with ETIMEOUT under a short budget
 * when the cap is large; the session stays usable either way. */
TEST_IMPL(limit_result_encoding) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  test_options(&o);
  o.memory_cap = (size_t)16 << 20;
  s = limits_session(&rt, &o);
  expect_step_error(s, "{\"mode\":\"dag\"}", LUDO_ENOMEM, "memory limit");
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);

  test_options(&o);
  o.memory_cap = (size_t)1 << 30;
  o.cpu_budget_ms = 50;
  s = limits_session(&rt, &o);
  expect_step_error(s, "{\"mode\":\"dag\"}", LUDO_ETIMEOUT, "CPU budget");
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Log lines of a session cannot forge other lines or carry terminal
 * escapes, name the session, and are cut at the per-call volume. */
TEST_IMPL(limit_log_lines) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *out;
  size_t len;
  unsigned long before;
  test_options(&o);
  s = limits_session(&rt, &o);
  before = test_log.lines;
  ASSERT_OK(ludo_session_step(s, J("{\"mode\":\"log_escape\"}"), &out, &len));
  ASSERT_EQ(test_log.lines, before + 1);
  ASSERT_STR_EQ(test_log.last_who, ludo_session_id(s));
  ASSERT_STR_EQ(test_log.last, "forged\\nludo: info: other-session: "
                               "owned\\x1b[31m red");
  before = test_log.lines;
  ASSERT_OK(ludo_session_step(s, J("{\"mode\":\"log_flood\"}"), &out, &len));
  /* 256 KiB of 1000-byte lines, then one line saying the rest was cut. */
  ASSERT_LE(test_log.lines - before, 264);
  ASSERT_GE(test_log.lines - before, 250);
  ASSERT_STR_CONTAINS(test_log.last, "cut at");
  /* The next call has its own volume. */
  before = test_log.lines;
  ASSERT_OK(ludo_session_step(s, J("{\"mode\":\"log_escape\"}"), &out, &len));
  ASSERT_EQ(test_log.lines, before + 1);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Inputs past max_input_bytes are refused before any work, with a message
 * naming the limit; the session stays usable. */
TEST_IMPL(limit_input_size) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  char *big = malloc(3000);
  const char *out;
  size_t len;
  test_options(&o);
  o.max_input_bytes = 1024;
  s = limits_session(&rt, &o);
  memset(big, ' ', 3000);
  memcpy(big, "{\"mode\":\"ok\"}", 13);
  ASSERT_ERR(ludo_session_step(s, big, 3000, &out, &len), LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the limit is 1024");
  ASSERT_ERR(ludo_session_reset(s, big, 3000, &out, &len), LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "reset options");
  assert_usable(s);
  free(big);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* An action with more members in one object (or items in one array)
 * than the memory cap can hold is refused with ENOMEM as the table is
 * about to double past it, with a message naming where and why (it said
 * "not enough memory"). A smaller one decodes. */
static char *wide_action(int n, int as_array) {
  char *a = malloc((size_t)n * 16 + 64), *p = a;
  int i;
  p += sprintf(p, "{\"mode\":\"ok\",\"metadata\":{\"w\":%c",
               as_array ? '[' : '{');
  for (i = 0; i < n; i++)
    p += as_array ? sprintf(p, "%s%d", i ? "," : "", i)
                  : sprintf(p, "%s\"k%d\":1", i ? "," : "", i);
  sprintf(p, "%c}}", as_array ? ']' : '}');
  return a;
}

TEST_IMPL(limit_wide_tables) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *out;
  size_t len;
  char *a;
  test_options(&o);
  o.memory_cap = CAP; /* 8 MiB */
  o.max_input_bytes = (size_t)64 << 20;
  s = limits_session(&rt, &o);
  a = wide_action(150000, 0); /* 2^17 members then doubling: 12 MiB */
  ASSERT_ERR(ludo_session_step(s, a, strlen(a), &out, &len), LUDO_ENOMEM);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "at $.metadata.w.k131072: the "
                      "object grows past 131072 members");
  free(a);
  a = wide_action(300000, 1); /* 2^18 items then doubling: 12 MiB */
  ASSERT_ERR(ludo_session_step(s, a, strlen(a), &out, &len), LUDO_ENOMEM);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the array grows past 262144 "
                      "items");
  free(a);
  a = wide_action(60000, 0); /* fits */
  ASSERT_OK(ludo_session_step(s, a, strlen(a), &out, &len));
  free(a);
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A reward or a rubric's score that is not a number fails the step with
 * a message naming where it came from. */
TEST_IMPL(limit_reward_types) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *out;
  size_t len;
  test_options(&o);
  s = limits_session(&rt, &o);
  expect_step_error(s, "{\"mode\":\"reward_table\"}", LUDO_ESCRIPT,
                    "observation.reward must be a number or nil, got table");
  assert_usable(s);
  ludo_session_close(s);
  s = test_open(test_env_load(rt, "spec/fixtures/c/badrubric", NULL));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"bad\":false}"), &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"bad\":true}"), &out, &len),
             LUDO_ESCRIPT);
  /* The rubric library names the rubric, the type and its forward. */
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "the root rubric (Judge): forward (defined at "
                      "spec/fixtures/c/badrubric/env.lua:6) returned a "
                      "string (\"good\"); a rubric must return a number, "
                      "or nil for no score");
  ASSERT_OK(ludo_session_step(s, J("{\"bad\":false}"), &out, &len));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Sizes and depths get clear errors: an observation with more keys than
 * the encoder takes, and an action deeper than the schema checker goes
 * (refused, never let through unchecked). */
TEST_IMPL(limit_sizes_and_depths) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *out;
  size_t len;
  char action[1024];
  int i, n = 0;
  test_options(&o);
  s = limits_session(&rt, &o);
  expect_step_error(s, "{\"mode\":\"many_keys\"}", LUDO_EVALUE,
                    "cannot encode an object of 300000 keys");
  assert_usable(s);
  ludo_session_close(s);
  /* under the key limit, no room for the keys is the memory cap's doing:
   * ENOMEM, not a key limit it is under */
  test_options(&o);
  o.memory_cap = (size_t)16 << 20;
  {
    ludo_runtime_t *rt2;
    ludo_session_t *s2 = limits_session(&rt2, &o);
    expect_step_error(s2, "{\"mode\":\"keys\",\"n\":100000}", LUDO_ENOMEM,
                      "100000 keys");
    ASSERT_TRUE(strstr(ludo_session_errmsg(s2), "at most") == NULL);
    assert_usable(s2);
    ludo_session_close(s2);
    ludo_runtime_free(rt2); /* rt is still open: no global count check */
  }
  s = test_open(test_env_load(rt, "spec/fixtures/c/deepschema", NULL));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  n = snprintf(action, sizeof action, "{\"a\":");
  for (i = 0; i < 70; i++) action[n++] = '[';
  n += snprintf(action + n, sizeof action - n, "\"not a number\"");
  for (i = 0; i < 70; i++) action[n++] = ']';
  action[n++] = '}';
  action[n] = '\0';
  ASSERT_ERR(ludo_session_step(s, action, (size_t)n, &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "nested deeper than 64");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* "[[...[" n deep, then `leaf`, then as many closing brackets, as the
 * value of field `key` of an action object, into buf. */
static size_t nested_action(char *buf, size_t cap, const char *key, int n,
                            const char *leaf) {
  size_t len = (size_t)snprintf(buf, cap, "{\"%s\":", key);
  int i;
  for (i = 0; i < n && len + 1 < cap; i++) buf[len++] = '[';
  len += (size_t)snprintf(buf + len, cap - len, "%s", leaf);
  for (i = 0; i < n && len + 2 < cap; i++) buf[len++] = ']';
  buf[len++] = '}';
  buf[len] = '\0';
  return len;
}

/* Schemas whose check costs far more than the action (fixture
 * schemacost): a limit reached inside `not` fails the action (it passed
 * before); checks nested without bound end at 512 (a C stack overflow
 * before); a $ref loop under anyOf ends at its first limit (2^256 paths
 * before, as no limit failed more than its own path); a recursive schema
 * tried both ways at every level is checked once per (node, value): the
 * right answer at once (2^40 checks before); and a check that is long
 * for its value's size is stopped by the call's CPU budget, the session
 * staying usable. */
TEST_IMPL(limit_schema_costs) {
  enum { WIDE_ITEMS = 100000 };
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *out;
  size_t len, n;
  char action[1024], *wide;
  int i;
  test_options(&o);
  o.cpu_budget_ms = 100;
  rt = test_rt_new(&o);
  s = test_open(test_env_load(rt, "spec/fixtures/c/schemacost", NULL));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  n = nested_action(action, sizeof action, "notdeep", 70, "");
  ASSERT_ERR(ludo_session_step(s, action, n, &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "nested deeper than 64");
  n = nested_action(action, sizeof action, "notdeep", 3, "");
  ASSERT_ERR(ludo_session_step(s, action, n, &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "matches the schema of 'not'");
  expect_step_error(s, "{\"chain\":1}", LUDO_ESCHEMA,
                    "nests more than 512 checks");
  expect_step_error(s, "{\"bomb\":1}", LUDO_ESCHEMA,
                    "nests more than 512 checks");
  n = nested_action(action, sizeof action, "tree", 40, "[]");
  ASSERT_OK(ludo_session_step(s, action, n, &out, &len));
  n = nested_action(action, sizeof action, "tree", 40, "1");
  ASSERT_ERR(ludo_session_step(s, action, n, &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "action.tree[0]: does not match "
                      "anyOf (0 of 2 alternatives matched)");
  ASSERT_OK(ludo_session_step(s, J("{\"tree\":[[],[[]]]}"), &out, &len));
  wide = malloc(WIDE_ITEMS * 2 + 16);
  n = (size_t)sprintf(wide, "{\"wide\":[");
  for (i = 0; i < WIDE_ITEMS; i++) n += (size_t)sprintf(wide + n, "0,");
  n += (size_t)sprintf(wide + n - 1, "]}") - 1;
  ASSERT_ERR(ludo_session_step(s, wide, n, &out, &len), LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "CPU budget of 100 ms");
  free(wide);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"wide\":[1,2]}"), &out, &len));
  /* 300,000 bytes for ^(.*)\1$: ~10^10 byte comparisons (17 s) in C
   * before the pattern's search asked the budget. */
  wide = malloc(300000 + 32);
  n = (size_t)sprintf(wide, "{\"twice\":\"");
  memset(wide + n, 'a', 300000);
  n += 300000;
  n += (size_t)sprintf(wide + n, "b\"}");
  ASSERT_ERR(ludo_session_step(s, wide, n, &out, &len), LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "CPU budget of 100 ms");
  free(wide);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"twice\":\"abab\"}"), &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"twice\":\"aba\"}"), &out, &len),
             LUDO_ESCHEMA);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* An environment whose own source costs Lua's parser quadratic time (a
 * chain of a million `and`s: about half an hour): the parser runs in C,
 * so the load's budget is asked between slices of the source, and the
 * load ends with ETIMEOUT at once. Before, the compile ran to its end
 * (the runner's timeout fails this test then). */
TEST_IMPL(limit_compile_budget) {
  enum { LINKS = 1000000 };
  /* mkdtemp fills in the X's of dir; path is dir + "/env.lua" */
  char dir[] = "/tmp/ludo-ct-compile-XXXXXX", path[64];
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  FILE *f;
  int i;
  ASSERT_NOT_NULL(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/env.lua", dir);
  f = fopen(path, "w");
  ASSERT_NOT_NULL(f);
  fputs("local a = true\nlocal x = a", f);
  for (i = 0; i < LINKS; i++) fputs(" and a", f);
  fputs("\nreturn { step = function() return {} end }\n", f);
  ASSERT_EQ(fclose(f), 0);
  test_options(&o);
  o.cpu_budget_ms = 100;
  rt = test_rt_new(&o);
  ASSERT_ERR(ludo_env_load(rt, dir, NULL, &env), LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "CPU budget of 100 ms");
  test_rt_free(rt);
  ASSERT_EQ(unlink(path), 0);
  ASSERT_EQ(rmdir(dir), 0);
}

static void script_never(ludo_script_t *sc, int status, const char *out,
                         size_t len, void *ud) {
  (void)sc; (void)status; (void)out; (void)len;
  ++*(int *)ud;
}

/* A script's input past max_input_bytes is refused with a message naming
 * the function and the limit, blocking and not (the message was empty:
 * `ludo run` printed "policy: " and nothing). */
TEST_IMPL(limit_script_input_size) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_script_t *sc = NULL;
  char big[64];
  const char *out;
  size_t len;
  int calls = 0;
  test_options(&o);
  o.max_input_bytes = 16;
  rt = test_rt_new(&o);
  ASSERT_OK(ludo_script_open(rt, "ascript", "spec/fixtures/c/ascript", &sc));
  memset(big, ' ', sizeof big);
  memcpy(big, "[7]", 3);
  ASSERT_ERR(ludo_script_call(sc, "now", big, sizeof big, &out, &len),
             LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(ludo_script_errmsg(sc),
                      "ETOOBIG: the arguments of ascript.now are 64 bytes; "
                      "the limit is 16 (max_input_bytes)");
  ASSERT_ERR(ludo_script_call_async(sc, "now", big, sizeof big,
                                     script_never, &calls),
             LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(ludo_script_errmsg(sc), "the limit is 16");
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(calls, 0);
  ASSERT_OK(ludo_script_call(sc, "now", J("[7]"), &out, &len));
  ludo_script_free(sc);
  test_rt_free(rt);
}
