/* test-wire.c - results in OpenEnv's wire form (a session with
 * nest_metadata, as the server opens them): the metadata is both at the
 * top level (when there is any) and inside the observation (always). */
#include "helpers.h"

#include <math.h>
#include <string.h>

#include "env/env.h"

static json_t *call(ludo_session_t *s, int step, const char *in) {
  const char *out;
  size_t len;
  if (step)
    ASSERT_OK(ludo_session_step(s, in, strlen(in), &out, &len));
  else
    ASSERT_OK(ludo_session_reset(s, in, in ? strlen(in) : 0, &out, &len));
  return JPARSE(out, len);
}

TEST_IMPL(wire_nested_metadata) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt), *t;
  json_t *r;
  s->nest_metadata = 1;
  r = call(s, 0, NULL); /* no metadata: {} inside, none outside */
  ASSERT_EQ(json_object_size(JGET(r, "observation/metadata")), 0);
  ASSERT_TRUE(test_jfind(r, "metadata") == NULL);
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"),
                "Echo environment ready!");
  r = call(s, 1, "{\"message\":\"hello\"}");
  ASSERT_TRUE(json_equal(JGET(r, "observation/metadata"),
                         JGET(r, "metadata")));
  ASSERT_DBL_LT(fabs(JNUM(r, "observation/metadata/rubrics/total") -
                     JNUM(r, "reward")), 1e-12);
  ASSERT_EQ(JINT(r, "observation/message_length"), 5);
  r = call(s, 1, "{\"type\":\"list_tools\"}");
  ASSERT_EQ(json_object_size(JGET(r, "observation/metadata")), 0);
  ASSERT_EQ(json_array_size(JGET(r, "observation/tools")), 2);
  /* an empty observation: {"metadata":{}} */
  t = test_open(test_env_load(rt, "bench/envs/noop", NULL));
  t->nest_metadata = 1;
  r = call(t, 1, "{}");
  ASSERT_EQ(json_object_size(JGET(r, "observation")), 1);
  ASSERT_EQ(json_object_size(JGET(r, "observation/metadata")), 0);
  /* sessions without it keep the plain form */
  s->nest_metadata = 0;
  r = call(s, 1, "{\"message\":\"hi\"}");
  ASSERT_TRUE(test_jfind(r, "observation/metadata") == NULL);
  ASSERT_TRUE(test_jfind(r, "metadata/rubrics/total") != NULL);
  ludo_session_close(t);
  ludo_session_close(s);
  test_rt_free(rt);
}
