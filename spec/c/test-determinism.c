/* test-determinism.c - math.random is seeded from reset's seed: the same
 * seed and actions give the same observations, in any session. Fixture:
 * spec/fixtures/c/dice. */
#include "helpers.h"

#include <stdio.h>

#define DICE "spec/fixtures/c/dice"

TEST_IMPL(determinism_same_seed) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, DICE, NULL);
  ludo_session_t *a = test_open(env), *b = test_open(env);
  ludo_session_t *c = test_open(env);
  const char *oa, *ob, *oc;
  size_t la, lb, lc;
  char first[256];
  int i, differ = 0;

  ASSERT_OK(ludo_session_reset(a, J("{\"seed\":42}"), &oa, &la));
  ASSERT_OK(ludo_session_reset(b, J("{\"seed\":42}"), &ob, &lb));
  ASSERT_OK(ludo_session_reset(c, J("{\"seed\":43}"), &oc, &lc));
  ASSERT_STR_EQ(oa, ob);
  ASSERT_EQ(la, lb);
  snprintf(first, sizeof first, "%s", oa);
  differ += strcmp(oa, oc) != 0;
  for (i = 1; i <= 10; i++) {
    char action[32];
    snprintf(action, sizeof action, "{\"n\":%d}", i);
    ASSERT_OK(ludo_session_step(a, action, strlen(action), &oa, &la));
    ASSERT_OK(ludo_session_step(b, action, strlen(action), &ob, &lb));
    ASSERT_OK(ludo_session_step(c, action, strlen(action), &oc, &lc));
    ASSERT_STR_EQ(oa, ob);
    ASSERT_EQ(JINT(JPARSE(oa, la), "observation/total"), i * (i + 1) / 2);
    differ += strcmp(oa, oc) != 0;
  }
  /* Another seed gives another game (the fixture really is random). */
  ASSERT_GT(differ, 5);

  /* Re-seeding a used session replays the episode from the start. */
  ASSERT_OK(ludo_session_reset(a, J("{\"seed\":42}"), &oa, &la));
  ASSERT_STR_EQ(oa, first);

  ludo_session_close(a);
  ludo_session_close(b);
  ludo_session_close(c);
  test_rt_free(rt);
}
