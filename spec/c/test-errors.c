/* test-errors.c - error codes and messages of the C API: names, malformed
 * input, schema violations, bad arguments, environments that do not load.
 * After every failed call the session must still work. */
#include "helpers.h"

/* A normal echo step succeeds and echoes `msg` (proves the session is
 * still usable after an error). */
static void assert_echo_works(ludo_session_t *s) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"still here\"}"), &out,
                              &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/echoed_message"),
                "still here");
}

/* ludo_err_name / ludo_strerror for every code of the map, in ranges. */
TEST_IMPL(error_names) {
  static const struct {
    int code;
    const char *name, *msg;
  } codes[] = {
#define ROW(name, code, msg) {code, #name, msg},
      LUDO_ERRNO_MAP(ROW)
#undef ROW
  };
  size_t i, j, n = sizeof codes / sizeof codes[0];
  ASSERT_EQ(n, 21);
  for (i = 0; i < n; i++) {
    ASSERT_LT(codes[i].code, 0);
    ASSERT_STR_EQ(ludo_err_name(codes[i].code), codes[i].name);
    ASSERT_STR_EQ(ludo_strerror(codes[i].code), codes[i].msg);
    for (j = 0; j < i; j++) ASSERT_NE(codes[i].code, codes[j].code);
  }
  /* The documented ranges. */
  ASSERT_EQ(LUDO_EIO / 100, -1);
  ASSERT_EQ(LUDO_ENOENT / 100, -1);
  ASSERT_EQ(LUDO_ECONNECT / 100, -1);
  ASSERT_EQ(LUDO_EDISCONNECTED / 100, -1);
  ASSERT_EQ(LUDO_ENOREPLY / 100, -1);
  ASSERT_EQ(LUDO_EPROTO / 100, -2);
  ASSERT_EQ(LUDO_ECAPACITY / 100, -3);
  ASSERT_EQ(LUDO_EPARSE / 100, -2);
  ASSERT_EQ(LUDO_ESCHEMA / 100, -2);
  ASSERT_EQ(LUDO_EVALUE / 100, -2);
  ASSERT_EQ(LUDO_EINVAL / 100, -3);
  ASSERT_EQ(LUDO_EBUSY / 100, -3);
  ASSERT_EQ(LUDO_ECLOSED / 100, -3);
  ASSERT_EQ(LUDO_ECANCELED / 100, -3);
  ASSERT_EQ(LUDO_ENOTSUP / 100, -3);
  ASSERT_EQ(LUDO_ERANGE / 100, -3);
  ASSERT_EQ(LUDO_ESCRIPT / 100, -4);
  ASSERT_EQ(LUDO_ELOAD / 100, -4);
  ASSERT_EQ(LUDO_ENOMEM / 100, -5);
  ASSERT_EQ(LUDO_ETIMEOUT / 100, -6);
  /* Unknown codes. */
  ASSERT_STR_EQ(ludo_err_name(-999), "EUNKNOWN");
  ASSERT_STR_EQ(ludo_err_name(12345), "EUNKNOWN");
  ASSERT_NOT_NULL(ludo_strerror(-999));
  ASSERT_GT(strlen(ludo_strerror(-999)), 0);
  ASSERT_NOT_NULL(ludo_strerror(0));
}

/* Malformed JSON: EPARSE with line and column. */
TEST_IMPL(error_parse) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out = NULL;
  size_t len = 0;

  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"message\": \"hi\""), &out, &len),
             LUDO_EPARSE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "EPARSE");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "line 1");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "column");
  assert_echo_works(s);

  /* The error is on the third line. */
  ASSERT_ERR(ludo_session_step(s, J("{\n  \"message\":\n   nope }"), &out,
                               &len),
             LUDO_EPARSE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "line 3");
  assert_echo_works(s);

  /* Trailing garbage and a bare non-JSON word. */
  ASSERT_ERR(ludo_session_step(s, J("{\"message\":\"x\"} extra"), &out, &len),
             LUDO_EPARSE);
  ASSERT_ERR(ludo_session_step(s, J("hello"), &out, &len), LUDO_EPARSE);
  /* Malformed reset options too. */
  ASSERT_ERR(ludo_session_reset(s, J("{\"seed\":"), &out, &len),
             LUDO_EPARSE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "column");
  assert_echo_works(s);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* A field of the wrong type: ESCHEMA naming the field. */
TEST_IMPL(error_schema_type) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out;
  size_t len;

  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"message\":5}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "action.message");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "string");
  assert_echo_works(s);

  /* A missing required field, and an action that is not an object. */
  ASSERT_ERR(ludo_session_step(s, J("{}"), &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "message");
  ASSERT_ERR(ludo_session_step(s, J("[1,2]"), &out, &len), LUDO_ESCHEMA);
  assert_echo_works(s);

  /* A failed step is not counted. */
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 2);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* Compact schemas forbid unknown fields. */
TEST_IMPL(error_schema_unknown_field) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out;
  size_t len;

  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"message\":\"a\",\"colour\":1}"),
                               &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "colour");
  assert_echo_works(s);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* Reset options are checked too: seed must be an integer, episode_id a
 * string, the options an object. */
TEST_IMPL(error_reset_options) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out;
  size_t len;

  ASSERT_ERR(ludo_session_reset(s, J("{\"seed\":\"x\"}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "seed");
  ASSERT_ERR(ludo_session_reset(s, J("{\"episode_id\":3}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "episode_id");
  ASSERT_ERR(ludo_session_reset(s, J("5"), &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "object");
  ASSERT_ERR(ludo_session_reset(s, J("\"x\""), &out, &len), LUDO_ESCHEMA);
  ASSERT_OK(ludo_session_reset(s, J("{\"seed\":3}"), &out, &len));
  assert_echo_works(s);

  /* A JSON array is not options. */
  ASSERT_ERR(ludo_session_reset(s, J("[1,2]"), &out, &len), LUDO_ESCHEMA);
  assert_echo_works(s);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* NULL handles and out-parameters are EINVAL, not crashes. */
TEST_IMPL(error_invalid_arguments) {
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env = NULL;
  const char *out;
  size_t len;
  ludo_stats_t st;

  ASSERT_ERR(ludo_runtime_new(NULL, NULL), LUDO_EINVAL);
  rt = test_rt_new(NULL);
  ASSERT_ERR(ludo_env_load(rt, NULL, NULL, &env), LUDO_EINVAL);
  ASSERT_ERR(ludo_env_load(rt, "examples/echo", NULL, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo_env_load(NULL, "examples/echo", NULL, &env), LUDO_EINVAL);
  ASSERT_ERR(ludo_session_open(NULL, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo_session_step(NULL, J("{}"), &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_session_reset(NULL, NULL, 0, &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_session_state(NULL, &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_runtime_stats(NULL, &st), LUDO_EINVAL);
  ASSERT_ERR(ludo_runtime_stats(rt, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo_runtime_poll(NULL, 0), LUDO_EINVAL);
  ASSERT_ERR(ludo_env_prewarm(NULL, 1), LUDO_EINVAL);
  ASSERT_OK(ludo_env_free(NULL));
  /* the accessors answer for NULL as their siblings do */
  ASSERT_STR_EQ(ludo_env_info(NULL, &len), "{}");
  ASSERT_EQ(len, 2);
  ASSERT_STR_EQ(ludo_session_id(NULL), "");
  ASSERT_STR_EQ(ludo_session_errmsg(NULL), "");
  ASSERT_EQ(ludo_session_memory(NULL), 0);
  ludo_session_set_data(NULL, &len);
  ASSERT_NULL(ludo_session_get_data(NULL));
  ludo_session_close(NULL);
  ludo_runtime_free(NULL);

  env = test_env_load(rt, "examples/echo", NULL);
  {
    ludo_session_t *s = test_open(env);
    /* An async call without a callback. */
    ASSERT_ERR(ludo_session_step_async(s, J("{}"), NULL, NULL), LUDO_EINVAL);
    ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
    ludo_session_close(s);
  }
  test_rt_free(rt);
}

/* A path that does not exist, or a folder without env.lua: ENOENT. */
TEST_IMPL(error_env_missing) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = NULL;
  ludo_stats_t st;

  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/no_such_env", NULL, &env),
             LUDO_ENOENT);
  ASSERT_NULL(env);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "no_such_env");
  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c", NULL, &env), LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "env.lua");
  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/nothing.lua", NULL, &env),
             LUDO_ENOENT);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.lua_bytes, 0);
  ASSERT_EQ(st.prewarmed, 0);
  /* The runtime still loads what exists. */
  env = test_env_load(rt, "examples/echo", NULL);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* A module with a syntax error: ELOAD naming the file. */
TEST_IMPL(error_env_syntax) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = NULL;
  ludo_stats_t st;

  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/syntax_error", NULL, &env),
             LUDO_ELOAD);
  ASSERT_NULL(env);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "syntax_error/env.lua");
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "ELOAD");
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.lua_bytes, 0);
  /* Loading it again fails the same way (nothing half-cached). */
  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/syntax_error", NULL, &env),
             LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "syntax_error/env.lua");
  env = test_env_load(rt, "examples/echo", NULL);
  test_rt_free(rt);
}

/* A module that raises while it runs: ELOAD with its message. */
TEST_IMPL(error_env_raises) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = NULL;

  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/load_error", NULL, &env),
             LUDO_ELOAD);
  ASSERT_NULL(env);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "refuses to load");
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "load_error/env.lua");
  test_rt_free(rt);
}

/* Codes travel outside the message text: whatever a script's error says,
 * the host sees ESCRIPT; only errors ludo raised keep their code. */
TEST_IMPL(error_codes_not_spoofable) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "spec/fixtures/c/spoof", NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"how\":\"text\"}"), &out, &len),
             LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ESCRIPT: ETIMEOUT");
  ASSERT_ERR(ludo_session_step(s, J("{\"how\":\"nomem\"}"), &out, &len),
             LUDO_ESCRIPT);
  ASSERT_ERR(ludo_session_step(s, J("{\"how\":\"table\"}"), &out, &len),
             LUDO_ESCRIPT);
  ASSERT_ERR(ludo_session_step(s, J("{\"how\":\"rethrow\"}"), &out, &len),
             LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "no.such.module");
  /* ludo's own errors keep their codes. */
  ASSERT_ERR(ludo_session_step(s, J("{\"how\":1}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_ERR(ludo_session_step(s, J("{\"how\""), &out, &len), LUDO_EPARSE);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A message holding a NUL byte reaches the host whole, the NUL written as
 * the two characters \0 (a C string would end at it). */
TEST_IMPL(error_message_with_nul) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, "spec/fixtures/c/nulerror",
                                              NULL));
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{}"), &out, &len), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "visible\\0hidden");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A step that returns nothing is an error naming the environment, never
 * an empty observation. */
TEST_IMPL(error_step_returns_nil) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, "spec/fixtures/c/nilstep",
                                              NULL));
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{}"), &out, &len), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "step of environment forgetful returned nil "
                      "(or nothing)");
  ludo_session_close(s);
  test_rt_free(rt);
}
