/* test-bodyscan.c - the scan of POST /step and POST /reset bodies
 * (runtime/serve/bodyscan.c): which bodies take the tree-free path, the
 * action's bytes and the small fields it hands on; every other body,
 * valid or not, is left to jansson, which answers it as before. */
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "serve/internal.h"

/* Scans `text` as a step (reset 0) or reset body; the heap must be empty
 * after. */
static int scan(const char *text, int reset, sv_body_t *b) {
  ludo__alloc_t heap;
  int r;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  r = sv_body_scan(&heap, text, strlen(text), reset, b);
  if (heap.live != 0) FAIL("the scan left %zu bytes", (size_t)heap.live);
  return r;
}

TEST_IMPL(serve_bodyscan_step) {
  static const struct {
    const char *text, *action, *sid;
    double timeout;
  } fast[] = {
      {"{\"action\":{\"message\":\"hi\"}}", "{\"message\":\"hi\"}", NULL, 0},
      {"{\"x\":[{\"action\":1}],\"action\": { \"a\" : [1, {\"b\": null}] } }",
       "{ \"a\" : [1, {\"b\": null}] }", NULL, 0},
      {"{\"action\":{\"m\":\"a\\u0000b\"}}", /* NUL in a value: jansson */
       "{\"m\":\"a\\u0000b\"}", NULL, 0},     /* takes it too */
      {"{\"action\":{},\"timeout_s\":2.5,\"request_id\":\"r\"}", "{}", NULL,
       2.5},
      {"{\"timeout_s\":3,\"action\":{},\"request_id\":null}", "{}", NULL, 3},
      {"{\"action\":{},\"timeout_s\":null}", "{}", NULL, 0},
      {"{\"action\":{},\"session_id\":\"s-1\"}", "{}", "s-1", 0},
      {"{\"action\":{},\"session_id\":\"\"}", "{}", "", 0},
      {"{\"action\":{},\"session_id\":null}", "{}", NULL, 0},
      {"{\"action\":{},\"x\":1,\"x\":2,\"seed\":-1}", "{}", NULL, 0},
      {"{\"action\":{\"long\":\"a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n"
       " a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n\"}}",
       "{\"long\":\"a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n"
       " a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n a\\n\"}", NULL, 0},
  };
  static const char *const slow[] = {
      "",                                        /* empty: {} there */
      "null", "[]", "5", "{oops",
      " {\"action\":{}}",                        /* leading space */
      "{}",                                      /* no action */
      "{\"action\":null}", "{\"action\":[1]}", "{\"action\":\"x\"}",
      "{\"action\":{},\"action\":{}}",           /* repeated: the last */
      "{\"action\":{},\"timeout_s\":0}",         /* refused fields */
      "{\"action\":{},\"timeout_s\":-1.5}",
      "{\"action\":{},\"timeout_s\":\"1\"}",
      "{\"action\":{},\"timeout_s\":true}",
      "{\"action\":{},\"timeout_s\":1,\"timeout_s\":1}",
      "{\"action\":{},\"request_id\":5}",
      "{\"action\":{},\"session_id\":5}",
      "{\"action\":{},\"session_id\":{}}",
      "{\"action\":{},\"session_id\":\"a\\u0000\"}",
      "{\"action\":{},\"session_id\":\"0123456789012345678901234567890123"
      "456789012345678901234567890123\"}",       /* 64 bytes */
      "{\"action\":{\"a\\u0000\":1}}",           /* jansson refuses */
      "{\"action\":{\"n\":123456789012345678901}}",
      "{\"action\":{}} x",
  };
  char rid[300];
  size_t i;
  for (i = 0; i < sizeof fast / sizeof fast[0]; i++) {
    sv_body_t b;
    const char *t = fast[i].text;
    if (!scan(t, 0, &b)) FAIL("not taken: %s", t);
    ASSERT_EQ(b.action_len, strlen(fast[i].action));
    if (memcmp(t + b.action_at, fast[i].action, b.action_len) != 0)
      FAIL("action of %s: %.*s", t, (int)b.action_len, t + b.action_at);
    ASSERT_EQ(b.has_session_id, fast[i].sid != NULL);
    if (fast[i].sid) ASSERT_STR_EQ(b.session_id, fast[i].sid);
    ASSERT_TRUE(b.timeout_s == fast[i].timeout);
  }
  for (i = 0; i < sizeof slow / sizeof slow[0]; i++) {
    sv_body_t b;
    if (scan(slow[i], 0, &b)) FAIL("taken: %s", slow[i]);
  }
  /* request_id: 255 characters pass, 256 go to jansson's 422 */
  {
    sv_body_t b;
    char text[400];
    memset(rid, 'r', 256);
    rid[255] = '\0';
    snprintf(text, sizeof text, "{\"action\":{},\"request_id\":\"%s\"}", rid);
    ASSERT_EQ(scan(text, 0, &b), 1);
    rid[255] = 'r';
    rid[256] = '\0';
    snprintf(text, sizeof text, "{\"action\":{},\"request_id\":\"%s\"}", rid);
    ASSERT_EQ(scan(text, 0, &b), 0);
  }
}

TEST_IMPL(serve_bodyscan_reset) {
  static const char *const fast[] = {
      "{}",
      "{\"seed\":3,\"episode_id\":\"e\"}",
      "{\"seed\":null,\"episode_id\":null,\"split\":\"test\",\"index\":2}",
      "{\"action\":5,\"timeout_s\":\"x\",\"request_id\":7}", /* options */
      "{\"x\":{\"seed\":-1}}",                   /* not the field */
  };
  static const char *const slow[] = {
      "", "null", "[]", "5",
      "{\"seed\":-1}", "{\"seed\":\"1\"}", "{\"seed\":1.5}", "{\"seed\":true}",
      "{\"seed\":[1]}", "{\"seed\":1,\"seed\":2}",
      "{\"episode_id\":5}", "{\"episode_id\":{}}",
      "{\"session_id\":\"s\"}",                  /* taken out there */
      "{\"a\\u0000\":1}",
  };
  size_t i;
  for (i = 0; i < sizeof fast / sizeof fast[0]; i++) {
    sv_body_t b;
    if (!scan(fast[i], 1, &b)) FAIL("not taken: %s", fast[i]);
  }
  for (i = 0; i < sizeof slow / sizeof slow[0]; i++) {
    sv_body_t b;
    if (scan(slow[i], 1, &b)) FAIL("taken: %s", slow[i]);
  }
}
