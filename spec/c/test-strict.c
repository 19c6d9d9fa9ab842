/* test-strict.c - strict sessions (ludo_session_set_strict): observations
 * checked against the declared schema, the message naming the
 * environment, the call and the field; sessions not strict unchanged. */
#include "helpers.h"

#define STRICT_ENV "spec/fixtures/c/strict"

static int async_done;

static void on_async(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  (void)s;
  (void)data;
  (void)len;
  (void)ud;
  if (status == 0) async_done++;
}

static const char *step(ludo_session_t *s, const char *how, int want) {
  char action[64];
  const char *out = NULL;
  size_t len;
  int n = snprintf(action, sizeof action, "{\"how\":\"%s\"}", how);
  int rc = ludo_session_step(s, action, (size_t)n, &out, &len);
  if (rc != want)
    FAIL("step %s: got %s (%s), want %s", how, ludo_err_name(rc),
         rc ? ludo_session_errmsg(s) : out, ludo_err_name(want));
  return rc == 0 ? out : ludo_session_errmsg(s);
}

/* Each way off the schema fails the step with ESCHEMA naming the field;
 * the session goes on, and the step still counted. */
TEST_IMPL(strict_observation_checked) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, STRICT_ENV, NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  step(s, "good", 0);
  ASSERT_STR_EQ(step(s, "badtype", LUDO_ESCHEMA),
                "ESCHEMA: environment strict_probe: the observation of step "
                "does not match its declared schema: observation.count: "
                "expected integer, got string");
  ASSERT_STR_CONTAINS(step(s, "missing", LUDO_ESCHEMA),
                      "observation: missing required field 'pos'");
  ASSERT_STR_CONTAINS(step(s, "extra", LUDO_ESCHEMA),
                      "observation: unknown field 'surprise'");
  ASSERT_STR_CONTAINS(step(s, "nested", LUDO_ESCHEMA),
                      "observation.pos.y: expected integer, got number");
  ASSERT_STR_CONTAINS(step(s, "item", LUDO_ESCHEMA),
                      "observation.tags[1]: expected string, got integer");
  /* reward, done and metadata are the envelope's, not the
   * observation's. */
  out = step(s, "envelope", 0);
  ASSERT_STR_EQ(JSTR(JPARSE(out, strlen(out)), "observation/label"),
                "with envelope");
  ASSERT_TRUE(json_is_true(JGET(JPARSE(out, strlen(out)), "done")));
  /* nil from step is an error naming the environment, strict or not. */
  ASSERT_STR_CONTAINS(step(s, "nil", LUDO_ESCRIPT),
                      "step of environment strict_probe returned nil "
                      "(or nothing)");
  step(s, "good", 0);
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 8); /* all but nil's */
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Reset is checked too, and what is checked is the transform's output
 * (what the result carries). */
TEST_IMPL(strict_reset_after_transform) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, STRICT_ENV, NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  ASSERT_ERR(ludo_session_reset(s, J("{\"bad\":true}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "ESCHEMA: environment strict_probe: the observation of reset "
                "does not match its declared schema: observation.count: "
                "expected integer, got string");
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "observation/count"), 1);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Off by default and per session: another session of the same
 * environment, and this one after set_strict(0), let the same
 * observations through. */
TEST_IMPL(strict_per_session) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, STRICT_ENV, NULL);
  ludo_session_t *lax = test_open(env), *strict = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_set_strict(strict, 1));
  ASSERT_OK(ludo_session_reset(lax, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_reset(strict, NULL, 0, &out, &len));
  out = step(lax, "badtype", 0);
  ASSERT_STR_EQ(JSTR(JPARSE(out, strlen(out)), "observation/count"),
                "three");
  step(strict, "badtype", LUDO_ESCHEMA);
  ASSERT_OK(ludo_session_set_strict(strict, 0));
  step(strict, "badtype", 0);
  ASSERT_OK(ludo_session_set_strict(strict, 7)); /* any non-zero is on */
  step(strict, "badtype", LUDO_ESCHEMA);
  /* Not while a call is queued; not on NULL. */
  ASSERT_OK(ludo_session_step_async(strict, J("{\"how\":\"good\"}"),
                                    on_async, NULL));
  ASSERT_ERR(ludo_session_set_strict(strict, 0), LUDO_EBUSY);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(async_done, 1);
  ASSERT_OK(ludo_session_set_strict(strict, 0));
  ASSERT_ERR(ludo_session_set_strict(NULL, 1), LUDO_EINVAL);
  ludo_session_close(lax);
  ludo_session_close(strict);
  test_rt_free(rt);
}

/* A strict session of an environment whose observations match (echo)
 * runs as before; one that declares no observation schema (nilstep)
 * accepts any observation table. */
TEST_IMPL(strict_undeclared_schema) {
  ludo_runtime_t *rt = NULL;
  ludo_session_t *s = test_echo_session(&rt);
  ludo_env_t *env = test_env_load(rt, "spec/fixtures/c/nilstep", NULL);
  ludo_session_t *s2 = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  ASSERT_OK(ludo_session_set_strict(s2, 1));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"hi\"}"), &out, &len));
  ASSERT_OK(ludo_session_reset(s2, NULL, 0, &out, &len));
  ludo_session_close(s);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* An environment that declares no observation: strict still asks for an
 * object, and says so without citing a declared schema; a table mixing
 * array items and keys is named as such, not as an array. */
TEST_IMPL(strict_undeclared_names_shape) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env =
      test_env_load(rt, "spec/fixtures/c/strict_mixed", NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{}"), &out, &len), LUDO_ESCHEMA);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "ESCHEMA: environment strict_mixed: the observation of step "
                "does not match what every observation must be (an object; "
                "the environment declares no schema): observation: expected "
                "object, got a table that mixes array items and keys");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* schema.c classifies a table without a metatable on a shorter path (no
 * null or array-metatable test, t[1] for an array, lua_getfield for a
 * required field); the same contents under an empty metatable take the
 * general one. Every shape gets the same outcome on both. */
TEST_IMPL(strict_plain_tables_agree) {
  static const char *const fields[] = {"arr", "obj", "any"};
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "spec/fixtures/c/strict_plain", NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  int shape, f, ok = 0, bad = 0;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  for (shape = 1; shape <= 10; shape++) {
    for (f = 0; f < 3; f++) {
      char action[96], first[512];
      int rc[2], meta;
      for (meta = 0; meta < 2; meta++) {
        int n = snprintf(action, sizeof action,
                         "{\"case\":%d,\"meta\":%s,\"field\":\"%s\"}", shape,
                         meta ? "true" : "false", fields[f]);
        rc[meta] = ludo_session_step(s, action, (size_t)n, &out, &len);
        if (meta == 0)
          snprintf(first, sizeof first, "%s",
                   rc[0] ? ludo_session_errmsg(s) : "ok");
      }
      ASSERT_EQ(rc[0], rc[1]);
      ASSERT_STR_EQ(rc[1] ? ludo_session_errmsg(s) : "ok", first);
      if (rc[0] == 0) ok++;
      else if (rc[0] == LUDO_ESCHEMA) bad++;
    }
  }
  /* both outcomes occur, so the comparison means something */
  ASSERT_TRUE(ok >= 5 && bad >= 5);
  ludo_session_close(s);
  test_rt_free(rt);
}
