/* test-echo.c - the blocking path with examples/echo: reset, step, state
 * and their JSON results. */
#include "helpers.h"

#include <math.h>
#include <stdio.h>

/* Reset, step and state in sequence, as a trainer would call them. */
TEST_IMPL(echo_reset_step_state) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out = NULL;
  size_t len = 0;
  json_t *r;
  double reward, weighted;

  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_NOT_NULL(out);
  ASSERT_EQ(len, strlen(out));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"),
                "Echo environment ready!");
  ASSERT_EQ(JINT(r, "observation/message_length"), 0);
  ASSERT_TRUE(json_is_false(JGET(r, "done")));

  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"hello\"}"), &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"), "hello");
  ASSERT_EQ(JINT(r, "observation/message_length"), 5);
  ASSERT_TRUE(json_is_false(JGET(r, "done")));
  /* The reward comes from the rubric: WeightedSum of Length (0.1 per
   * character), NonEmpty and Printable with weights 0.6, 0.2, 0.2. */
  reward = JNUM(r, "reward");
  weighted = 0.6 * 0.5 + 0.2 * 1.0 + 0.2 * 1.0;
  ASSERT_DBL_LT(fabs(reward - weighted), 1e-9);
  /* Every rubric's score is reported: the root as "total", the children
   * by name. */
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/total") - reward), 1e-12);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/rubric_0") - 0.5), 1e-12);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/rubric_1") - 1.0), 1e-12);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/rubric_2") - 1.0), 1e-12);
  /* The observation itself carries no envelope fields. */
  ASSERT_NULL(test_jfind(r, "observation/reward"));
  ASSERT_NULL(test_jfind(r, "observation/metadata"));

  ASSERT_OK(ludo_session_state(s, &out, &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "step_count"), 1);
  ASSERT_EQ(strlen(JSTR(r, "episode_id")), 36); /* a UUID */

  /* A second step counts. */
  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"\"}"), &out, &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "observation/message_length"), 0);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/rubric_1")), 1e-12);
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 2);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* Reset options: the episode id is the caller's; a new reset starts a new
 * episode with step_count 0 and, without an id, a fresh UUID. */
TEST_IMPL(echo_reset_options) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  const char *out;
  size_t len;
  json_t *r;
  char first_id[64];

  ASSERT_OK(ludo_session_reset(s, J(""), &out, &len)); /* empty = none */
  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"a\"}"), &out, &len));
  ASSERT_OK(ludo_session_state(s, &out, &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "step_count"), 1);
  snprintf(first_id, sizeof first_id, "%s", JSTR(r, "episode_id"));

  ASSERT_OK(ludo_session_reset(s, J("{\"seed\":11,\"episode_id\":\"ep-1\"}"),
                               &out, &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/echoed_message"),
                "Echo environment ready!");
  ASSERT_OK(ludo_session_state(s, &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "episode_id"), "ep-1");
  ASSERT_EQ(JINT(r, "step_count"), 0);

  ASSERT_OK(ludo_session_step(s, J("{\"message\":\"b\"}"), &out, &len));
  ASSERT_OK(ludo_session_state(s, &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "episode_id"), "ep-1");
  ASSERT_EQ(JINT(r, "step_count"), 1);

  ASSERT_OK(ludo_session_reset(s, J("{}"), &out, &len));
  ASSERT_OK(ludo_session_state(s, &out, &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "step_count"), 0);
  ASSERT_EQ(strlen(JSTR(r, "episode_id")), 36);
  ASSERT_STR_NE(JSTR(r, "episode_id"), first_id);

  ludo_session_close(s);
  test_rt_free(rt);
}

/* ludo_env_info, session ids, the host data slot and the version. */
TEST_IMPL(echo_info_ids_and_data) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *s1 = test_open(env), *s2 = test_open(env);
  const char *info;
  size_t len = 0;
  json_t *r;
  int marker;

  info = ludo_env_info(env, &len);
  ASSERT_NOT_NULL(info);
  r = JPARSE(info, len);
  ASSERT_STR_EQ(JSTR(r, "name"), "echo_env");
  ASSERT_STR_EQ(JSTR(r, "version"), "1.0.0");
  ASSERT_TRUE(json_is_true(JGET(r, "concurrent")));
  ASSERT_STR_EQ(JSTR(r, "action/properties/message/type"), "string");
  ASSERT_STR_EQ(JSTR(r, "observation/properties/message_length/type"),
                "integer");

  ASSERT_EQ(strlen(ludo_session_id(s1)), 36);
  ASSERT_STR_NE(ludo_session_id(s1), ludo_session_id(s2));

  ASSERT_NULL(ludo_session_get_data(s1));
  ludo_session_set_data(s1, &marker);
  ASSERT_PTR_EQ(ludo_session_get_data(s1), &marker);
  ASSERT_NULL(ludo_session_get_data(s2));

  ASSERT_UINT_GT(ludo_session_memory(s1), 0);
  ASSERT_STR_EQ(ludo_version(), LUDO_VERSION_STRING);

  ludo_session_close(s1);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* Steps skipped_rubrics with {"go": go, "n": n}: the result. */
static json_t *skip_step(ludo_session_t *s, int go, int n) {
  char action[64];
  const char *out = NULL;
  size_t len = 0;
  snprintf(action, sizeof action, "{\"go\":%s,\"n\":%d}",
           go ? "true" : "false", n);
  if (ludo_session_step(s, action, strlen(action), &out, &len) != 0)
    return NULL;
  return JPARSE(out, len);
}

/* metadata.rubrics reports null for a rubric that did not run in this
 * step (a Sequential stopped before it, plain or hooked), not the score a
 * previous step left, which the rubric object keeps as its last_score. */
TEST_IMPL(echo_skipped_rubrics_are_null) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "spec/fixtures/c/skipped_rubrics",
                                  NULL);
  ludo_session_t *s = test_open(env);
  const char *out = NULL;
  size_t len = 0;
  json_t *r;

  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  r = skip_step(s, 1, 5);
  ASSERT_NOT_NULL(r);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/seq.second") - 0.5), 1e-12);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/hooked.second") - 0.5),
                1e-12);
  r = skip_step(s, 0, 7); /* both Sequentials stop after `first` */
  ASSERT_NOT_NULL(r);
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/seq.first")), 1e-12);
  ASSERT_TRUE(json_is_null(JGET(r, "metadata/rubrics/seq.second")));
  ASSERT_TRUE(json_is_null(JGET(r, "metadata/rubrics/hooked.second")));
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/total")), 1e-12);
  r = skip_step(s, 1, 9); /* the object kept step 1's last_score */
  ASSERT_NOT_NULL(r);
  ASSERT_STR_EQ(JSTR(r, "observation/kept"), "0.5");
  ASSERT_DBL_LT(fabs(JNUM(r, "metadata/rubrics/seq.second") - 0.9), 1e-12);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  r = skip_step(s, 0, 1); /* after a reset: never scored, null too */
  ASSERT_NOT_NULL(r);
  ASSERT_TRUE(json_is_null(JGET(r, "metadata/rubrics/seq.second")));

  ludo_session_close(s);
  test_rt_free(rt);
}
