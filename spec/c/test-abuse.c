/* test-abuse.c - Lua that tries to run outside its CPU budget through the
 * cleanup paths (issue: hardening, class 1) and Lua 5.4.4's reachable
 * defects (class 4). Each case must end with the expected code within its
 * budget, leave the process healthy, and leave another session stepping
 * (spec/fixtures/c/abuse). */
#include "helpers.h"

#include <string.h>

#include <lauxlib.h>

#define ABUSE "spec/fixtures/c/abuse"

/* Steps with the action {"mode": mode}; the result in *out (borrowed
 * until the session's next call). */
static int step_out(ludo_session_t *s, const char *mode, const char **out,
                    size_t *len) {
  char action[128];
  snprintf(action, sizeof action, "{\"mode\":\"%s\"}", mode);
  return ludo_session_step(s, action, strlen(action), out, len);
}

static int step(ludo_session_t *s, const char *mode) {
  const char *out;
  size_t len;
  return step_out(s, mode, &out, &len);
}

/* A runtime whose calls have `budget_ms` of CPU each. */
static ludo_runtime_t *abuse_rt_budget(unsigned budget_ms) {
  ludo_options_t o;
  test_options(&o);
  o.cpu_budget_ms = budget_ms;
  return test_rt_new(&o);
}

static ludo_runtime_t *abuse_rt(void) { return abuse_rt_budget(200); }

/* The same, and a memory cap of `cap` bytes per session. */
static ludo_runtime_t *abuse_rt_capped(unsigned budget_ms, size_t cap) {
  ludo_options_t o;
  test_options(&o);
  o.cpu_budget_ms = budget_ms;
  o.memory_cap = cap;
  return test_rt_new(&o);
}

/* Runs `mode` on a fresh session, expects `code` or `other` within
 * `max_s` seconds, then checks that the session and a witness still
 * step. */
static void expect_either(const char *mode, int code, int other,
                          double max_s) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_env_t *env = test_env_load(rt, ABUSE, NULL);
  ludo_session_t *s = test_open(env), *witness = test_open(env);
  double t0 = test_now();
  int rc = step(s, mode);
  if (rc != other) ASSERT_ERR(rc, code);
  ASSERT_DBL_LT(test_now() - t0, max_s);
  ASSERT_OK(step(s, "ok"));
  ASSERT_OK(step(witness, "ok"));
  ludo_session_close(s);
  ludo_session_close(witness);
  test_rt_free(rt);
}

static void expect_bounded(const char *mode, int code, double max_s) {
  expect_either(mode, code, code, max_s);
}

/* __close handlers of a failed call run under the cleanup budget. */
TEST_IMPL(abuse_close_after_error) {
  expect_bounded("close_after_error", LUDO_ESCRIPT, 5.0);
}

/* A call stopped by its budget is dropped without running its handlers. */
TEST_IMPL(abuse_close_after_timeout) {
  expect_bounded("close_after_timeout", LUDO_ETIMEOUT, 5.0);
}

/* coroutine.close and coroutine.wrap run handlers inside the budget. */
TEST_IMPL(abuse_coroutine_close_paths) {
  expect_bounded("coroutine_close_loop", LUDO_ETIMEOUT, 5.0);
  expect_bounded("wrap_error_close_loop", LUDO_ETIMEOUT, 5.0);
}

/* Deep nesting of coroutine.close inside __close is refused, not a
 * crash (Lua 5.4.4, docs/sandbox.md). */
TEST_IMPL(abuse_nested_close) {
  expect_bounded("nested_close", LUDO_ESCRIPT, 5.0);
}

static int cb_calls, cb_status;
static void record(ludo_session_t *s, int status, const char *data,
                   size_t len, void *ud) {
  (void)s; (void)data; (void)len; (void)ud;
  cb_calls++;
  cb_status = status;
}

/* A __concat metamethod that grows the Lua stack leaves the heap intact
 * (Debian's Lua 5.4.4 corrupts it; ludo links Lua with its patch). */
TEST_IMPL(abuse_concat_stack) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  int i;
  for (i = 0; i < 3; i++) ASSERT_OK(step(s, "concat_stack"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Closing a session whose call waits runs its handlers under the cleanup
 * budget; an environment's close() that spins is stopped too. */
TEST_IMPL(abuse_close_session) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_env_t *env = test_env_load(rt, ABUSE, NULL);
  ludo_session_t *a = test_open(env), *b = test_open(env);
  ludo_session_t *witness = test_open(env);
  double t0;
  cb_calls = 0;
  ASSERT_OK(ludo_session_step_async(a, J("{\"mode\":\"close_while_waiting\"}"),
                                    record, NULL));
  ASSERT_GE(ludo_runtime_poll(rt, 0), 1); /* it runs, then waits */
  ASSERT_EQ(cb_calls, 0);
  t0 = test_now();
  ludo_session_close(a);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_EQ(cb_calls, 1);
  ASSERT_ERR(cb_status, LUDO_ECANCELED);

  ASSERT_OK(step(b, "spin_on_close"));
  t0 = test_now();
  ludo_session_close(b);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_OK(step(witness, "ok"));
  ludo_session_close(witness);
  test_rt_free(rt);
}

/* A call that waits longer than its wall-clock limit ends with ETIMEOUT,
 * however long it asked to sleep; a call holds a bounded number of
 * pending operations, and every one is freed (the allocator check of
 * test_rt_free). */
TEST_IMPL(abuse_waits_bounded) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  double t0;
  test_options(&o);
  o.wall_limit_ms = 200;
  rt = test_rt_new(&o);
  s = test_open(test_env_load(rt, ABUSE, NULL));
  t0 = test_now();
  ASSERT_ERR(step(s, "sleep_forever"), LUDO_ETIMEOUT);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "wall-clock limit of 200 ms");
  ASSERT_ERR(step(s, "many_ops"), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "at most 1024");
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Loops inside C: string.rep of nothing returns at once, string.rep past
 * the cap is refused up front, table.move over huge ranges is cut into
 * pieces that check the budget. */
TEST_IMPL(abuse_c_loops) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  double t0 = test_now();
  ASSERT_OK(step(s, "rep_empty"));
  ASSERT_OK(step(s, "rep_empty_sep"));
  ASSERT_DBL_LT(test_now() - t0, 1.0);
  ASSERT_ERR(step(s, "rep_huge"), LUDO_ENOMEM);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "string.rep");
  ASSERT_ERR(step(s, "move_nothing"), LUDO_ETIMEOUT);
  ASSERT_ERR(step(s, "move_overlap"), LUDO_ETIMEOUT);
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* The table library's loops whose length __len makes up (insert, remove,
 * sort, concat over raw accesses and C metamethods) end with the budget's
 * error (scripts/patches/lua-5.4.4-loop-limits.patch); they ran for
 * minutes or for ever. */
TEST_IMPL(abuse_table_loops) {
  static const char *const modes[] = {"remove_virtual", "insert_virtual",
                                      "sort_virtual", "concat_virtual"};
  size_t i;
  for (i = 0; i < sizeof modes / sizeof *modes; i++)
    expect_bounded(modes[i], LUDO_ETIMEOUT, 5.0);
}

/* C loops whose steps call C functions (table.unpack and string.gsub over
 * a table whose __index is `next` on a hollow table): the budget's stop
 * fires before each call made from C (lua-5.4.4-loop-limits.patch, 3);
 * they ran for minutes. */
TEST_IMPL(abuse_calls_from_c_loops) {
  expect_bounded("unpack_hollow", LUDO_ETIMEOUT, 5.0);
  expect_bounded("gsub_hollow", LUDO_ETIMEOUT, 5.0);
}

/* A runtime with `budget_ms` of CPU per call (0: none), `max_instr`
 * instructions (0: none; set, the count hook replaces the watchdog) and a
 * cap of `cap` bytes (0: the default). */
static ludo_runtime_t *abuse_rt_counted(unsigned budget_ms,
                                        uint64_t max_instr, size_t cap) {
  ludo_options_t o;
  test_options(&o);
  o.cpu_budget_ms = budget_ms;
  o.max_instructions = max_instr;
  if (cap != 0) o.memory_cap = cap;
  return test_rt_new(&o);
}

/* Runs `mode` on a fresh session of such a runtime and expects ETIMEOUT
 * naming `limit`, then the session and a witness step again. No time is
 * asserted: unbounded, each mode runs for many seconds or minutes and
 * then succeeds (or the runner's timeout kills it). */
static void expect_stopped(const char *mode, unsigned budget_ms,
                           uint64_t max_instr, size_t cap,
                           const char *limit) {
  ludo_runtime_t *rt = abuse_rt_counted(budget_ms, max_instr, cap);
  ludo_env_t *env = test_env_load(rt, ABUSE, NULL);
  ludo_session_t *s = test_open(env), *witness = test_open(env);
  ASSERT_ERR(step(s, mode), LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), limit);
  ASSERT_OK(step(s, "ok"));
  ASSERT_OK(step(witness, "ok"));
  ludo_session_close(s);
  ludo_session_close(witness);
  test_rt_free(rt);
}

#define COUNTED ((uint64_t)1 << 50) /* count-hook mode, no real limit */

/* C loops whose steps call C functions with no check of their own
 * (print's and string.format's calls of __tostring, gsub's of __index,
 * each `next` over a hollow table), with the count hook: nothing set its
 * count to 1 there, so they ran for seconds past the budget and
 * succeeded. Each call of a C function is now charged to the count hook
 * (lua-5.4.4-loop-limits.patch, 5): the CPU budget stops them, and so
 * does an instruction limit alone. The watchdog stops them too. */
TEST_IMPL(abuse_calls_from_c_counted) {
  static const char *const modes[] = {"print_hollow", "format_hollow",
                                      "gsub_hollow"};
  size_t i;
  for (i = 0; i < sizeof modes / sizeof *modes; i++) {
    expect_stopped(modes[i], 200, 0, 0, "CPU budget");
    expect_stopped(modes[i], 200, COUNTED, 0, "CPU budget");
  }
  expect_stopped("print_hollow", 0, 50000, 0, "VM instructions");
  expect_stopped("format_hollow", 0, 50000, 0, "VM instructions");
}

/* Comparisons of long strings in C loops (table.sort, math.max over two
 * strings of 8 MiB of NULs, a strcoll per byte): no instruction runs and
 * sort looked at the budget every 1,024 comparisons, math.max never; they
 * ran for 20 s and more and succeeded. A comparison is now charged by its
 * pieces and bytes (lua-5.4.4-loop-limits.patch, 5): the budget stops
 * them with the watchdog or the count hook, and an instruction limit
 * alone too. (A budget of 1 s: making the strings fits in it.) */
TEST_IMPL(abuse_long_string_compares) {
  static const char *const modes[] = {"sort_long_strings",
                                      "max_long_strings"};
  size_t i;
  for (i = 0; i < sizeof modes / sizeof *modes; i++) {
    expect_stopped(modes[i], 1000, 0, 0, "CPU budget");
    expect_stopped(modes[i], 1000, COUNTED, 0, "CPU budget");
    expect_stopped(modes[i], 0, 10000000, 0, "VM instructions");
  }
}

/* Encoding many references to one hollow table writes little and walks
 * much: the encoder stops at the next table once the call was stopped
 * (it looked only every 64 KiB of output, and the call went on for
 * minutes and succeeded). */
TEST_IMPL(abuse_encode_hollow) {
  expect_bounded("hollow_obs", LUDO_ETIMEOUT, 5.0);
  expect_bounded("hollow_json_encode", LUDO_ETIMEOUT, 5.0);
}

/* A coroutine stopped by the budget keeps a spinning __close handler;
 * closing it in a later call (coroutine.close, or calling the dead wrap
 * again) runs the handler under that call's budget. The stopped hook had
 * left the thread's hooks off: the handler ran for ever. */
TEST_IMPL(abuse_close_stopped_coroutine) {
  static const char *const pairs[][2] = {{"tbc_stop", "tbc_close"},
                                         {"tbc_wrap_stop", "tbc_wrap_again"}};
  size_t i;
  for (i = 0; i < 2; i++) {
    ludo_runtime_t *rt = abuse_rt();
    ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
    double t0;
    ASSERT_ERR(step(s, pairs[i][0]), LUDO_ETIMEOUT);
    t0 = test_now();
    ASSERT_ERR(step(s, pairs[i][1]), LUDO_ETIMEOUT);
    ASSERT_DBL_LT(test_now() - t0, 5.0);
    ASSERT_OK(step(s, "ok"));
    ludo_session_close(s);
    test_rt_free(rt);
  }
}

/* A huge error message is kept up to 16 KiB, cut between UTF-8
 * sequences, with the count of bytes left out: the raised string was
 * under the cap, the host's copy must not be a second one of any size. */
TEST_IMPL(abuse_huge_error) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  const char *m;
  size_t n;
  ASSERT_ERR(step(s, "huge_error"), LUDO_ESCRIPT);
  m = ludo_session_errmsg(s);
  n = strlen(m);
  ASSERT_TRUE(n > 12288 && n < 16384 + 64);
  /* the raised text is cut first (12 KiB of its 36 + 1 MiB + 3 bytes), then
   * prefixed and traced */
  ASSERT_STR_CONTAINS(m, " [... 1036325 more bytes]");
  ASSERT_TRUE(strstr(m, "END") == NULL);
  /* cut before a whole two-byte sequence: no lone lead byte is left */
  ASSERT_TRUE((unsigned char)m[strstr(m, " [... ") - m - 1] == 0xA9);
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Building a message copies what was cut, not the whole: an 8 MiB error
 * (with an address in it, which is redacted) used to be copied three
 * times over with the cap lifted (peak 16 MiB to make it, then 24 more).
 * A budget that making 8 MiB under ASan fits in. */
TEST_IMPL(abuse_big_error_memory) {
  ludo_runtime_t *rt = abuse_rt_budget(10000);
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  size_t before = test_heap.live;
  test_heap.peak = before;
  ASSERT_ERR(step(s, "big_error"), LUDO_ESCRIPT);
  /* the address redacted to "0x?", then the text cut after 12 KiB */
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ESCRIPT: table: 0x? xxx");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "xxx [... ");
  ASSERT_TRUE(test_heap.peak - before < ((size_t)24 << 20));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Results and waits that used to pass silently or blame the wrong
 * thing: a `done` that is not a boolean is an error naming it; a wait in
 * a sort comparator says a C function is in between, not that no call
 * runs. */
TEST_IMPL(abuse_result_and_wait_messages) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  const char *out;
  size_t len;
  ASSERT_ERR(step(s, "done_not_boolean"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "observation.done must be a boolean or nil, got "
                      "function");
  /* NaN and the infinities are no score: JSON has none, and null would
   * read as "no reward" */
  ASSERT_ERR(step(s, "nan_reward"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "observation.reward must be a "
                      "finite number or nil, got nan");
  ASSERT_ERR(step(s, "inf_reward"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "got -inf");
  /* metadata that is no table used to be dropped without a word, and an
   * error inside it named a path without "metadata" */
  ASSERT_ERR(step(s, "metadata_string"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "observation.metadata must be "
                      "a table (an object) or nil, got string");
  ASSERT_ERR(step(s, "metadata_array_key"), LUDO_EVALUE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "at $.metadata.x");
  /* An observation is an object: a sequence used to be written as
   * [1,2,3,"metadata":{}], which is no JSON. */
  ASSERT_ERR(step(s, "array_obs"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the observation of step must "
                      "be an object (a table with string keys), got an "
                      "array");
  ASSERT_ERR(step(s, "marked_array_obs"), LUDO_ESCRIPT);
  /* Keys that hold NULs are keys like any other, not the envelope's
   * (read past "reward" before: ASan) */
  ASSERT_OK(step_out(s, "nul_keys", &out, &len));
  ASSERT_STR_CONTAINS(out, "\"reward\\u0000\":1");
  ASSERT_STR_CONTAINS(out, "\"reward\":null");
  ASSERT_ERR(step(s, "wait_in_sort"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "a C function that cannot "
                                              "yield is in between");
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* pcalls nesting through their own failures: each failure used to walk
 * the whole chain of calls, so the budget was overrun 100-fold and a
 * stopped call took quadratic time to unwind. Now the call ends with the
 * budget's error, or the memory cap's when the chain reaches it first. */
TEST_IMPL(abuse_pcall_tree) {
  expect_either("pcall_tree", LUDO_ETIMEOUT, LUDO_ENOMEM, 5.0);
}

/* Lua patterns: backtracking, long classes and %b scans are counted and
 * end with the budget's error; a plain find is linear. */
TEST_IMPL(abuse_pattern_bounds) {
  static const char *const slow[] = {"pat_find", "pat_match", "pat_gmatch",
                                     "pat_gsub", "pat_class", "pat_balance"};
  size_t i;
  for (i = 0; i < sizeof slow / sizeof *slow; i++)
    expect_bounded(slow[i], LUDO_ETIMEOUT, 5.0);
  {
    ludo_runtime_t *rt = abuse_rt();
    ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
    ASSERT_OK(step(s, "pat_plain"));
    ludo_session_close(s);
    test_rt_free(rt);
  }
}

/* Whether `msg` shows an address as Lua prints one (": 0x" and hex). */
static int shows_address(const char *msg) {
  const char *at;
  for (at = strstr(msg, ": 0x"); at != NULL; at = strstr(at + 1, ": 0x")) {
    size_t n = strspn(at + 4, "0123456789abcdefABCDEF");
    if (n >= 4) return 1;
  }
  return 0;
}

/* No error message shows a heap address, whatever value the script
 * raised or printed into it (class 6), and a module's load error neither. */
TEST_IMPL(abuse_no_addresses) {
  static const char *const modes[] = {
      "addr_error_table", "addr_error_function", "addr_error_coroutine",
      "addr_error_null", "addr_error_tostring_table",
      "addr_error_tostring_function", "addr_error_tostring_userdata",
      "addr_index_nil", "addr_call_table", "addr_arith_table",
      "addr_compare", "addr_concat_table", "addr_bad_arg",
      "addr_json_encode_function", "addr_json_encode_table_key",
      "addr_json_encode_cycle", "addr_return_function",
      "addr_next_bad_key", "addr_setmetatable_protected",
      "addr_tostring_error"};
  ludo_runtime_t *rt = abuse_rt();
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  ludo_env_t *env;
  size_t i;
  for (i = 0; i < sizeof modes / sizeof *modes; i++) {
    int rc = step(s, modes[i]);
    if (rc == 0 || shows_address(ludo_session_errmsg(s)))
      fprintf(stderr, "%s: %d %s\n", modes[i], rc, ludo_session_errmsg(s));
    ASSERT_TRUE(rc != 0);
    ASSERT_TRUE(!shows_address(ludo_session_errmsg(s)));
  }
  ASSERT_ERR(step(s, "addr_error_tostring_table"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "bad: table: 0x?");
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/abuse_load_address", NULL,
                           &env), LUDO_ELOAD);
  ASSERT_TRUE(!shows_address(ludo_runtime_errmsg(rt)));
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "table: 0x?");
  test_rt_free(rt);
}

/* What tostring and string.format's %p show (lua_topointer, patched:
 * scripts/patches/lua-5.4.4-hidden-pointers.patch) is not an address of
 * the process, so an observation cannot carry one out of a session; the
 * same object still shows the same value, two objects two values. */
static void pointer_text(lua_State *L, const void *p, char *out, size_t n) {
  lua_pushlightuserdata(L, (void *)p);
  snprintf(out, n, "%s", luaL_tolstring(L, -1, NULL));
  lua_pop(L, 2);
}

TEST_IMPL(abuse_pointers_hidden) {
  lua_State *L = luaL_newstate();
  static int a, b;
  char real[64], shown[64], again[64], other[64];
  ASSERT_TRUE(L != NULL);
  snprintf(real, sizeof real, "%p", (void *)&a);
  pointer_text(L, &a, shown, sizeof shown);
  pointer_text(L, &a, again, sizeof again);
  pointer_text(L, &b, other, sizeof other);
  ASSERT_TRUE(strstr(shown, real + 2) == NULL); /* the hex digits */
  ASSERT_STR_EQ(shown, again);
  ASSERT_TRUE(strcmp(shown, other) != 0);
  lua_pushlightuserdata(L, &a);
  ASSERT_TRUE(lua_topointer(L, -1) != (const void *)&a);
  lua_pushlightuserdata(L, &a);
  ASSERT_TRUE(lua_topointer(L, -1) == lua_topointer(L, -2));
  lua_close(L);
}

/* ludo.re: a global match is bounded as a whole by the CPU budget, and the
 * JIT code of compiled patterns counts against the memory cap. */
TEST_IMPL(abuse_regex_bounds) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  double t0;
  int rc;
  rt = abuse_rt_capped(300, (size_t)256 << 20); /* the 50 MB subject fits */
  s = test_open(test_env_load(rt, ABUSE, NULL));
  t0 = test_now();
  ASSERT_ERR(step(s, "re_many_searches"), LUDO_ETIMEOUT);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  /* one search whose every start position costs pcre2's match limit
   * (which counts each position afresh): it ran 50 s */
  t0 = test_now();
  ASSERT_ERR(step(s, "re_positions"), LUDO_ETIMEOUT);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);

  test_options(&o);
  o.memory_cap = (size_t)16 << 20;
  rt = test_rt_new(&o);
  s = test_open(test_env_load(rt, ABUSE, NULL));
  ASSERT_OK(step(s, "re_jit_flood")); /* dropped patterns are collected */
  ASSERT_LE(ludo_session_memory(s), o.memory_cap);
  rc = step(s, "re_jit_keep"); /* kept ones are not, and JIT code counts */
  ASSERT_TRUE(rc == LUDO_ENOMEM || rc == LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ENOMEM");
  ASSERT_LE(ludo_session_memory(s), o.memory_cap);
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Waits that a failed call's __close handlers start while the call is
 * cleaned up are cancelled with it: one of them used to resume the next
 * call's own wait ("resumed with a completion for another operation"). */
TEST_IMPL(abuse_close_waits) {
  ludo_runtime_t *rt = abuse_rt();
  ludo_session_t *s =
      test_open(test_env_load(rt, "spec/fixtures/c/closewait", NULL));
  ASSERT_ERR(step(s, "fail_with_waits"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the step fails");
  ASSERT_OK(step(s, "sleep"));
  ASSERT_OK(step(s, "sleep"));
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A failed call does not collect the whole state: a full collection
 * after every error ran outside any budget, its time growing with the
 * live data. The fixture's probe is a weak table whose key is garbage:
 * it stays through the failure and goes with a collection. */
TEST_IMPL(abuse_failed_call_no_collect) {
  ludo_runtime_t *rt = abuse_rt_budget(10000);
  ludo_session_t *s =
      test_open(test_env_load(rt, "spec/fixtures/c/gcfail", NULL));
  const char *out;
  size_t len;
  ASSERT_OK(step(s, "fill"));
  ASSERT_OK(step_out(s, "mark", &out, &len));
  ASSERT_STR_CONTAINS(out, "\"kept\":true");
  ASSERT_ERR(step(s, "raise"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "boom");
  ASSERT_OK(step_out(s, "probe", &out, &len));
  ASSERT_STR_CONTAINS(out, "\"kept\":true");
  ASSERT_OK(step_out(s, "collect", &out, &len));
  ASSERT_STR_CONTAINS(out, "\"kept\":false");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A C call whose allocations the cap refuses one after another, each
 * refusal followed by an emergency collection that frees just enough for
 * the retry (table.concat converting numbers at the cap): the collections
 * stop once the call is stopped (its budget, or its refusals), so the
 * call ends near its budget. It ran one collection per piece, in C, for
 * 10-20 s past a 2 s budget (lua-5.4.4-emergency-gc.patch). */
TEST_IMPL(abuse_emergency_collections) {
  ludo_runtime_t *rt = abuse_rt_capped(1000, (size_t)16 << 20);
  ludo_session_t *s;
  double t0;
  int rc;
  s = test_open(test_env_load(rt, "spec/fixtures/c/gcthrash", NULL));
  t0 = test_now();
  rc = step(s, "thrash");
  if (rc != LUDO_ENOMEM) ASSERT_ERR(rc, LUDO_ETIMEOUT);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_OK(step(s, "ok"));
  ludo_session_close(s);
  test_rt_free(rt);
}

static int tm_done, tm_status;
static char tm_out[256];

static void tm_cb(ludo_session_t *s, int status, const char *data,
                  size_t len, void *ud) {
  (void)s, (void)ud;
  tm_done++;
  tm_status = status;
  snprintf(tm_out, sizeof tm_out, "%.*s", (int)len, data ? data : "");
}

/* Metamethods called near the end of the stack while polls of 1 ms slice
 * the call: the stop check before each such call runs the hook, which may
 * grow (move) the stack, and the call must then use its function's new
 * place (lua-5.4.4-loop-limits.patch, 3). It wrote the metamethod's result
 * into the freed stack: a wrong sum, a crash, or ASan's report. */
TEST_IMPL(abuse_metamethods_at_slice_ends) {
  ludo_runtime_t *rt = abuse_rt_budget(60000);
  ludo_session_t *s = test_open(test_env_load(rt, ABUSE, NULL));
  static const char action[] = "{\"mode\":\"tm_slices\"}";
  double t0 = test_now();
  tm_done = 0;
  ASSERT_OK(ludo_session_step_async(s, action, strlen(action), tm_cb, NULL));
  while (tm_done == 0 && test_now() - t0 < 120)
    ASSERT_GE(ludo_runtime_poll(rt, 1000), 0);
  ASSERT_EQ(tm_done, 1);
  ASSERT_OK(tm_status);
  ASSERT_STR_CONTAINS(tm_out, "\"sum\":3200000");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A session left at its memory cap (a failed call's data kept in an
 * upvalue) whose next action needs the decoder's stack to grow (the call
 * runs on a fresh thread): ENOMEM, not EPARSE, which said the JSON was
 * bad. */
TEST_IMPL(abuse_decode_at_cap) {
  ludo_runtime_t *rt = abuse_rt_capped(5000, (size_t)4 << 20);
  ludo_session_t *s;
  static const char nested[] =
      "{\"mode\":\"ok\",\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]"
      "]]]]]]]]]]]]]]]]]}";
  const char *out;
  size_t len;
  s = test_open(test_env_load(rt, "spec/fixtures/c/gcthrash", NULL));
  ASSERT_ERR(step(s, "hog_fail"), LUDO_ENOMEM);
  ASSERT_ERR(ludo_session_step(s, nested, strlen(nested), &out, &len),
             LUDO_ENOMEM);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "memory limit");
  ludo_session_close(s);
  test_rt_free(rt);
}
