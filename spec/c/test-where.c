/* test-where.c - errors that say where and what (issue 9).
 *
 * Tracebacks name file:line for environment, rubric, transform and policy
 * code and for ludo's own library (LUDO_DEBUG chooses how much debug
 * information the library keeps). A CPU budget, an instruction budget, a
 * wall-clock limit or a memory cap stopping a call names the call's phase
 * and the place its Lua was, in the message and in ludo_error_t, for every
 * phase: reset, step, state, close, the transform and the rubric of reset
 * and step, a script's functions, and loading. Fixtures:
 * spec/fixtures/c/where (the line numbers below are theirs). */
#include "helpers.h"

#include <stdlib.h>
#include <string.h>

#define FIX "spec/fixtures/c/where"
#define ENVF FIX "/env.lua"

/* Lines of the fixtures where each thing happens. */
#define ENV_SPIN ENVF ":6"
#define ENV_ALLOC ENVF ":9"
#define ENV_SLEEP ENVF ":11"
#define ENV_RAISE ENVF ":13"
#define SCRIPT FIX "/wscript.lua"

/* The line number written after "src:" in msg, or 0 when msg does not
 * name a line of src. */
static long line_of(const char *msg, const char *src) {
  size_t n = strlen(src);
  const char *p;
  for (p = strstr(msg, src); p != NULL; p = strstr(p + 1, src)) {
    char *end;
    long line;
    if (p[n] != ':') continue;
    line = strtol(p + n + 1, &end, 10);
    if (end > p + n + 1 && line > 0) return line;
  }
  return 0;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

#define ASSERT_ENDS_WITH(s, tail)                                         \
  do {                                                                    \
    if (!ends_with((s), (tail)))                                          \
      test__fail(__FILE__, __LINE__, "\"%s\" does not end with \"%s\"",   \
                 (s), (tail));                                            \
  } while (0)

/* The session still works: reset, a step that does nothing. */
static void assert_usable(ludo_session_t *s) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, J("{}"), &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"phase\":\"none\",\"what\":\"ok\"}"),
                              &out, &len));
  ASSERT_TRUE(json_is_true(JGET(JPARSE(out, len), "observation/ok")));
}

static int step(ludo_session_t *s, const char *phase, const char *what) {
  char action[128];
  const char *out;
  size_t len;
  snprintf(action, sizeof action, "{\"phase\":\"%s\",\"what\":\"%s\"}",
           phase, what);
  return ludo_session_step(s, action, strlen(action), &out, &len);
}

/* ---- tracebacks ------------------------------------------------------ */

/* An error raised in the environment, its rubric or its transform, and
 * one raised inside ludo's library: each message and traceback names
 * file:line, none reads "?:-1". */
TEST_IMPL(where_tracebacks) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, FIX, NULL);
  ludo_session_t *s = test_open(env);
  ludo_error_t e;
  const char *msg;
  assert_usable(s);

  /* The environment's step. */
  ASSERT_ERR(step(s, "step", "raise"), LUDO_ESCRIPT);
  msg = ludo_session_errmsg(s);
  ASSERT_STR_CONTAINS(msg, "ESCRIPT: " ENV_RAISE ": raised on purpose");
  ASSERT_GT(line_of(msg, ENVF), 0);
  ASSERT_NULL(strstr(msg, "?:-1"));
  ASSERT_OK(ludo_session_error(s, &e));
  ASSERT_EQ(e.code, LUDO_ESCRIPT);
  ASSERT_STR_EQ(e.message, msg);
  ASSERT_STR_EQ(e.call, "step");
  ASSERT_STR_EQ(e.phase, "step");
  ASSERT_STR_EQ(e.where, "");
  assert_usable(s);

  /* The rubric: the library's rubric call is in the traceback. */
  ASSERT_ERR(step(s, "rubric", "raise"), LUDO_ESCRIPT);
  msg = ludo_session_errmsg(s);
  /* named by its rubric (docs/rubrics.md, "Errors") */
  ASSERT_STR_CONTAINS(msg, "ESCRIPT: the root rubric (Probe): " ENV_RAISE
                           ": raised on purpose");
  ASSERT_GT(line_of(msg, "lua/ludo/rubric.lua"), 0);
  ASSERT_NULL(strstr(msg, "?:-1"));
  ASSERT_OK(ludo_session_error(s, &e));
  ASSERT_STR_EQ(e.call, "step");
  ASSERT_STR_EQ(e.phase, "rubric");
  assert_usable(s);

  /* The transform (inside the library's Compose). */
  ASSERT_ERR(step(s, "transform", "raise"), LUDO_ESCRIPT);
  msg = ludo_session_errmsg(s);
  ASSERT_STR_CONTAINS(msg, "ESCRIPT: " ENV_RAISE ": raised on purpose");
  ASSERT_GT(line_of(msg, "lua/ludo/transforms.lua"), 0);
  ASSERT_OK(ludo_session_error(s, &e));
  ASSERT_STR_EQ(e.phase, "transform");
  assert_usable(s);

  /* Raised inside ludo's library: Compose refuses a nil observation, and
   * places the message at its caller: the step, which is C, so the
   * message has no place; the traceback has Compose's own file and
   * line. */
  ASSERT_ERR(step(s, "none", "nil_transform"), LUDO_ESCRIPT);
  msg = ludo_session_errmsg(s);
  ASSERT_EQ(strncmp(msg, "ESCRIPT: Compose: transform 1 returned nil", 42), 0);
  ASSERT_GT(line_of(msg, "lua/ludo/transforms.lua"), 0);
  ASSERT_NULL(strstr(msg, "?:-1"));
  assert_usable(s);

  /* The reset's rubric: the phase is the rubric of reset. */
  ASSERT_OK(step(s, "rubric_reset", "raise"));
  ASSERT_ERR(ludo_session_reset(s, J("{}"), NULL, NULL), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), ENV_RAISE ": raised");
  ASSERT_OK(ludo_session_error(s, &e));
  ASSERT_STR_EQ(e.call, "reset");
  ASSERT_STR_EQ(e.phase, "rubric");
  assert_usable(s);

  ASSERT_ERR(ludo_session_error(NULL, &e), LUDO_EINVAL);
  ASSERT_ERR(ludo_session_error(s, NULL), LUDO_EINVAL);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A policy (a script): an error in the user's file is placed there, one
 * raised by ludo.policy has its frame in the traceback. */
TEST_IMPL(where_policy_traceback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc;
  ludo_error_t e;
  const char *out, *msg;
  size_t len;
  ASSERT_OK(ludo_script_open(rt, "ludo.policy", FIX, &sc));
  ASSERT_OK(ludo_script_call(sc, "init", J("[\"wpolicy\",{\"action\":{}}]"),
                             &out, &len));
  ASSERT_ERR(ludo_script_call(sc, "act", J("[{\"observation\":{}},{}]"),
                              &out, &len),
             LUDO_ESCRIPT);
  msg = ludo_script_errmsg(sc);
  ASSERT_STR_CONTAINS(msg, "ESCRIPT: " FIX "/wpolicy.lua:3: the policy "
                           "went wrong");
  ASSERT_NULL(strstr(msg, "?:-1"));
  ASSERT_OK(ludo_script_error(sc, &e));
  ASSERT_EQ(e.code, LUDO_ESCRIPT);
  ASSERT_STR_EQ(e.message, msg);
  ASSERT_STR_EQ(e.call, "act");
  ASSERT_STR_EQ(e.phase, "act");
  ASSERT_STR_EQ(e.where, "");
  /* A module that is no policy: ludo.policy.init says so. */
  ASSERT_ERR(ludo_script_call(sc, "init", J("[\"wscript\",{\"action\":{}}]"),
                              &out, &len),
             LUDO_ESCRIPT);
  msg = ludo_script_errmsg(sc);
  ASSERT_STR_CONTAINS(msg, "a policy returns act");
  ASSERT_GT(line_of(msg, "lua/ludo/policy.lua"), 0);
  ASSERT_NULL(strstr(msg, "?:-1"));
  ASSERT_OK(ludo_script_error(sc, &e));
  ASSERT_STR_EQ(e.call, "init");
  ASSERT_ERR(ludo_script_error(NULL, &e), LUDO_EINVAL);
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* LUDO_DEBUG: "0" strips the library (no lines), "1" keeps everything
 * (upvalue names too), unset keeps lines but not names. The library's
 * frame: the rubric call (lua/ludo/rubric.lua; a step itself is C). */
static const char *rubric_traceback(ludo_runtime_t **rt, ludo_session_t **s) {
  ludo_env_t *env;
  *rt = test_rt_new(NULL);
  env = test_env_load(*rt, FIX, NULL);
  *s = test_open(env);
  ASSERT_OK(ludo_session_reset(*s, J("{}"), NULL, NULL));
  ASSERT_ERR(step(*s, "rubric", "raise"), LUDO_ESCRIPT);
  return ludo_session_errmsg(*s);
}

TEST_IMPL(where_debug_levels) {
  ludo_runtime_t *rt;
  ludo_session_t *s;
  const char *msg;

  unsetenv("LUDO_DEBUG");
  msg = rubric_traceback(&rt, &s);
  ASSERT_GT(line_of(msg, "lua/ludo/rubric.lua"), 0);
  ASSERT_STR_CONTAINS(msg, "in upvalue '?'"); /* no names */
  ludo_session_close(s);
  test_rt_free(rt);

  setenv("LUDO_DEBUG", "0", 1);
  msg = rubric_traceback(&rt, &s);
  ASSERT_STR_CONTAINS(msg, ENV_RAISE ": raised on purpose"); /* env: all */
  ASSERT_EQ(line_of(msg, "lua/ludo/rubric.lua"), 0);
  ASSERT_STR_CONTAINS(msg, "\n\t?: in ");
  ludo_session_close(s);
  test_rt_free(rt);

  setenv("LUDO_DEBUG", "1", 1);
  msg = rubric_traceback(&rt, &s);
  ASSERT_GT(line_of(msg, "lua/ludo/rubric.lua"), 0);
  ASSERT_STR_CONTAINS(msg, "in upvalue 'error'");
  ludo_session_close(s);
  test_rt_free(rt);
  unsetenv("LUDO_DEBUG");
}

/* A traceback names each function from the call that made it, never by
 * searching the libraries' tables for it (luaL_traceback did, for every
 * frame: a script that filled `string` with 2 million entries made each
 * of its failed calls cost 0.3 s after its budget). The fixture puts its
 * functions at string.zz_hidden and _G.zz_deep, names only that search
 * finds, and fails 30 calls deep. */
TEST_IMPL(where_traceback_names_from_calls) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s =
      test_open(test_env_load(rt, "spec/fixtures/c/tbscan", NULL));
  const char *out, *msg;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, J("{}"), &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"fill\":100000}"), &out, &len),
             LUDO_ESCRIPT);
  msg = ludo_session_errmsg(s);
  ASSERT_NULL(strstr(msg, "zz_hidden"));
  ASSERT_NULL(strstr(msg, "zz_deep"));
  ASSERT_NULL(strstr(msg, "in function 'error'"));
  ASSERT_STR_CONTAINS(msg, "env.lua:7: boom\nstack traceback:\n");
  ASSERT_STR_CONTAINS(msg, "\t[C]: in global 'error'\n");
  ASSERT_STR_CONTAINS(msg, "env.lua:7: in upvalue 'deep'\n");
  ASSERT_STR_CONTAINS(msg, "\n\t...\t(skipping ");
  ASSERT_STR_CONTAINS(msg, "env.lua:11: in local 'alias'\n");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* ---- limits in every phase ------------------------------------------- */

typedef enum { CPU, INSTR, MEMORY, WALL } limit_t;

typedef struct {
  const char *trigger; /* see run_into */
  const char *call, *phase, *during;
} phase_case_t;

static const phase_case_t phases[] = {
    {"reset", "reset", "reset", " during reset"},
    {"transform@reset", "reset", "transform",
     " during the transform of reset"},
    {"rubric_reset", "reset", "rubric", " during the rubric of reset"},
    {"step", "step", "step", " during step"},
    {"transform", "step", "transform", " during the transform of step"},
    {"rubric", "step", "rubric", " during the rubric of step"},
    {"state", "state", "state", " during state"},
    {"close", "close", "close", " during close"},
};

/* Makes the call of case `pc` do `what`; returns the call's code. A
 * close reports through the log (nothing waits for its result). */
static int run_into(ludo_session_t *s, const phase_case_t *pc,
                    const char *what) {
  char opts[128];
  const char *out;
  size_t len;
  if (strcmp(pc->trigger, "reset") == 0 ||
      strcmp(pc->trigger, "transform@reset") == 0) {
    snprintf(opts, sizeof opts, "{\"phase\":\"%s\",\"what\":\"%s\"}",
             strcmp(pc->trigger, "reset") == 0 ? "reset" : "transform",
             what);
    return ludo_session_reset(s, opts, strlen(opts), &out, &len);
  }
  if (strcmp(pc->trigger, "rubric_reset") == 0) {
    ASSERT_OK(step(s, "rubric_reset", what));
    return ludo_session_reset(s, J("{}"), &out, &len);
  }
  if (strcmp(pc->trigger, "state") == 0) {
    ASSERT_OK(step(s, "state", what));
    return ludo_session_state(s, &out, &len);
  }
  if (strcmp(pc->trigger, "close") == 0) {
    ASSERT_OK(step(s, "close", what));
    ludo_session_close(s);
    return 0;
  }
  return step(s, pc->trigger, what);
}

/* What the message of limit `lim` begins with, and where it stops. */
static void limit_text(limit_t lim, char *text, size_t n, char *where,
                       size_t wn) {
  switch (lim) {
    case CPU:
      snprintf(text, n, "ETIMEOUT: the call exceeded its CPU budget of ");
      snprintf(where, wn, "%s", ENV_SPIN);
      break;
    case INSTR:
      snprintf(text, n, "ETIMEOUT: the call exceeded its budget of 200000 "
                        "VM instructions");
      snprintf(where, wn, "%s", ENV_SPIN);
      break;
    case MEMORY:
      snprintf(text, n, "ENOMEM: the session's memory limit of 4194304 "
                        "bytes was reached");
      snprintf(where, wn, "%s", ENV_ALLOC);
      break;
    case WALL:
      snprintf(text, n, "ETIMEOUT: the call exceeded its wall-clock limit "
                        "of 30 ms");
      where[0] = '\0'; /* checked apart: inside ludo.sleep */
      break;
  }
}

/* For a wait, the place is ludo's await, from the fixture's sleep. */
static void assert_wait_place(const char *where) {
  ASSERT_STR_CONTAINS(where, "lua/ludo/async.lua:");
  ASSERT_GT(line_of(where, "lua/ludo/async.lua"), 0);
  ASSERT_ENDS_WITH(where, ", from " ENV_SLEEP);
}

static void limit_phases(limit_t lim) {
  static const char *const whats[] = {"spin", "spin", "alloc", "sleep"};
  const char *what = whats[lim];
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  size_t i;
  test_options(&o);
  /* Only the limit under test can end the calls (the others stay at
   * their defaults, far away). */
  /* The budget covers the environment's load as well, which reads and
   * compiles the library: 200 ms, not 30, so that an instrumented build
   * (ASan) loads within it. */
  if (lim == CPU) o.cpu_budget_ms = 200;
  if (lim == INSTR) o.max_instructions = 200000;
  if (lim == MEMORY) o.memory_cap = (size_t)4 << 20;
  if (lim == WALL) o.wall_limit_ms = 30;
  rt = test_rt_new(&o);
  env = test_env_load(rt, FIX, NULL);
  for (i = 0; i < sizeof phases / sizeof phases[0]; i++) {
    const phase_case_t *pc = &phases[i];
    ludo_session_t *s;
    ludo_error_t e;
    char text[160], where[160], id[64];
    const char *msg;
    int code = lim == MEMORY ? LUDO_ENOMEM : LUDO_ETIMEOUT;
    if (lim == WALL && strcmp(pc->call, "close") == 0)
      continue; /* a close never waits: its waits are cancelled */
    limit_text(lim, text, sizeof text, where, sizeof where);
    s = test_open(env);
    assert_usable(s);
    snprintf(id, sizeof id, "%s", ludo_session_id(s));
    if (strcmp(pc->call, "close") == 0) {
      /* The failure of close() goes to the log, named by the session. */
      ASSERT_OK(run_into(s, pc, what));
      ASSERT_STR_EQ(test_log.last_who, id);
      ASSERT_EQ(test_log.last_level, LUDO_LOG_WARN);
      ASSERT_STR_CONTAINS(test_log.last, "close: ");
      ASSERT_STR_CONTAINS(test_log.last, text);
      ASSERT_STR_CONTAINS(test_log.last, " (at ");
      ASSERT_ENDS_WITH(test_log.last, pc->during);
      ASSERT_GT(line_of(test_log.last, ENVF), 0);
      ASSERT_STR_CONTAINS(test_log.last, where);
      continue;
    }
    ASSERT_ERR(run_into(s, pc, what), code);
    msg = ludo_session_errmsg(s);
    ASSERT_STR_CONTAINS(msg, text);
    ASSERT_ENDS_WITH(msg, pc->during);
    ASSERT_OK(ludo_session_error(s, &e));
    ASSERT_EQ(e.code, code);
    ASSERT_STR_EQ(e.message, msg);
    ASSERT_STR_EQ(e.call, pc->call);
    ASSERT_STR_EQ(e.phase, pc->phase);
    if (lim == WALL)
      assert_wait_place(e.where);
    else
      ASSERT_STR_EQ(e.where, where);
    /* The message holds the same place: "... (at <where>) during ...". */
    {
      char at[200];
      snprintf(at, sizeof at, " (at %s)%s", e.where, pc->during);
      ASSERT_ENDS_WITH(msg, at);
    }
    assert_usable(s);
    ludo_session_close(s);
  }
  test_rt_free(rt);
}

TEST_IMPL(where_cpu_budget_phases) { limit_phases(CPU); }
TEST_IMPL(where_instructions_phases) { limit_phases(INSTR); }
TEST_IMPL(where_memory_phases) { limit_phases(MEMORY); }
TEST_IMPL(where_wall_clock_phases) { limit_phases(WALL); }

/* The same on the non-blocking path: the callback's message is the
 * session's, phase and place included. */
typedef struct {
  int calls, status;
  char msg[1024];
} result_t;

static void result_cb(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud) {
  result_t *r = ud;
  (void)s;
  r->calls++;
  r->status = status;
  snprintf(r->msg, sizeof r->msg, "%.*s", (int)len, data);
}

TEST_IMPL(where_async_rubric) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  result_t r;
  test_options(&o);
  o.cpu_budget_ms = 200; /* the load too, instrumented (limit_phases) */
  rt = test_rt_new(&o);
  s = test_open(test_env_load(rt, FIX, NULL));
  assert_usable(s);
  memset(&r, 0, sizeof r);
  ASSERT_OK(ludo_session_step_async(
      s, J("{\"phase\":\"rubric\",\"what\":\"spin\"}"), result_cb, &r));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(r.calls, 1);
  ASSERT_ERR(r.status, LUDO_ETIMEOUT);
  ASSERT_ENDS_WITH(r.msg, " (at " ENV_SPIN ") during the rubric of step");
  ASSERT_STR_EQ(r.msg, ludo_session_errmsg(s));
  assert_usable(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* ---- scripts and loading --------------------------------------------- */

/* Each limit in a script's function: the message names the module's
 * function and the place; the script works afterwards. */
TEST_IMPL(where_script_limits) {
  static const struct {
    limit_t lim;
    const char *fn, *text, *where;
    int code;
  } cases[] = {
      {CPU, "spin", "ETIMEOUT: the call exceeded its CPU budget of 200 ms",
       SCRIPT ":4", LUDO_ETIMEOUT},
      {INSTR, "spin", "ETIMEOUT: the call exceeded its budget of 200000 VM "
       "instructions", SCRIPT ":4", LUDO_ETIMEOUT},
      {MEMORY, "alloc", "ENOMEM: the session's memory limit of 4194304 "
       "bytes was reached", SCRIPT ":7", LUDO_ENOMEM},
      {MEMORY, "alloc_wrapped", "ENOMEM: the session's memory limit of "
       "4194304 bytes was reached", SCRIPT ":7", LUDO_ENOMEM},
      {WALL, "sleep", "ETIMEOUT: the call exceeded its wall-clock limit of "
       "200 ms", NULL, LUDO_ETIMEOUT},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ludo_options_t o;
    ludo_runtime_t *rt;
    ludo_script_t *sc;
    ludo_error_t e;
    const char *out, *msg;
    size_t len;
    char tail[200];
    test_options(&o);
    /* 200 ms: the script's open and its "ok" call must fit in them, on a
     * slow host in the sanitizers' build too */
    if (cases[i].lim == CPU) o.cpu_budget_ms = 200;
    if (cases[i].lim == INSTR) o.max_instructions = 200000;
    if (cases[i].lim == MEMORY) o.memory_cap = (size_t)4 << 20;
    if (cases[i].lim == WALL) o.wall_limit_ms = 200;
    rt = test_rt_new(&o);
    ASSERT_OK(ludo_script_open(rt, "wscript", FIX, &sc));
    ASSERT_ERR(ludo_script_call(sc, cases[i].fn, NULL, 0, &out, &len),
               cases[i].code);
    msg = ludo_script_errmsg(sc);
    ASSERT_STR_CONTAINS(msg, cases[i].text);
    ASSERT_OK(ludo_script_error(sc, &e));
    ASSERT_EQ(e.code, cases[i].code);
    ASSERT_STR_EQ(e.call, cases[i].fn);
    ASSERT_STR_EQ(e.phase, cases[i].fn);
    if (cases[i].where != NULL) {
      ASSERT_STR_EQ(e.where, cases[i].where);
    } else {
      ASSERT_GT(line_of(e.where, "lua/ludo/async.lua"), 0);
      ASSERT_ENDS_WITH(e.where, ", from " SCRIPT ":9");
    }
    snprintf(tail, sizeof tail, " (at %s) during wscript.%s", e.where,
             cases[i].fn);
    ASSERT_ENDS_WITH(msg, tail);
    ASSERT_OK(ludo_script_call(sc, "ok", NULL, 0, &out, &len));
    ASSERT_STR_EQ(out, "true");
    ludo_script_free(sc);
    test_rt_free(rt);
  }
}

/* A module's top level running into a limit while loading, as an
 * environment and as a script: "... (at file:line) during load". */
TEST_IMPL(where_load_limits) {
  static const struct {
    limit_t lim;
    const char *module, *text, *where;
    int code;
  } cases[] = {
      {CPU, "load_spin", "ETIMEOUT: the call exceeded its CPU budget of "
       "200 ms", FIX "/load_spin.lua:3", LUDO_ETIMEOUT},
      {INSTR, "load_spin", "ETIMEOUT: the call exceeded its budget of "
       "200000 VM instructions", FIX "/load_spin.lua:3", LUDO_ETIMEOUT},
      {MEMORY, "load_alloc", "ENOMEM: the session's memory limit of "
       "4194304 bytes was reached", FIX "/load_alloc.lua:3", LUDO_ENOMEM},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ludo_options_t o;
    ludo_runtime_t *rt;
    ludo_env_t *env = NULL;
    ludo_script_t *sc = NULL;
    char path[256], tail[200];
    test_options(&o);
    /* 200 ms: the good environment loaded last must fit in it, on a
     * slow host in the sanitizers' build too (30 ms once did not) */
    if (cases[i].lim == CPU) o.cpu_budget_ms = 200;
    if (cases[i].lim == INSTR) o.max_instructions = 200000;
    if (cases[i].lim == MEMORY) o.memory_cap = (size_t)4 << 20;
    rt = test_rt_new(&o);
    snprintf(path, sizeof path, FIX "/%s.lua", cases[i].module);
    snprintf(tail, sizeof tail, " (at %s) during load", cases[i].where);
    ASSERT_ERR(ludo_env_load(rt, path, NULL, &env), cases[i].code);
    ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), cases[i].text);
    ASSERT_ENDS_WITH(ludo_runtime_errmsg(rt), tail);
    ASSERT_ERR(ludo_script_open(rt, cases[i].module, FIX, &sc),
               cases[i].code);
    ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), cases[i].text);
    ASSERT_ENDS_WITH(ludo_runtime_errmsg(rt), tail);
    /* The runtime is fine: a good environment loads. */
    test_env_load(rt, FIX, NULL);
    test_rt_free(rt);
  }
}
