/* test-tools.c - an environment's MCP tools: the tool list in the
 * environment's description, OpenEnv's list_tools / call_tool step actions
 * (what MCPToolClient sends over /ws), ludo_session_call_tool (JSON-RPC
 * tools/call), and the declaration checks at load. */
#include "helpers.h"

#include <string.h>

#define TOOLS "spec/fixtures/c/tools"

static json_t *step_json(ludo_session_t *s, const char *action) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_step(s, action, strlen(action), &out, &len));
  return JPARSE(out, len);
}

static json_t *call_json(ludo_session_t *s, const char *req) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_call_tool(s, req, strlen(req), &out, &len));
  return JPARSE(out, len);
}

static int call_rc(ludo_session_t *s, const char *req) {
  const char *out;
  size_t len;
  return ludo_session_call_tool(s, req, strlen(req), &out, &len);
}

/* The description lists the tools in declaration order, each with its
 * argument schema expanded to JSON Schema. */
TEST_IMPL(tools_listed_in_info) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, TOOLS, NULL);
  size_t len;
  const char *info = ludo_env_info(env, &len);
  json_t *root = JPARSE(info, len), *tools = JGET(root, "tools");
  ASSERT_EQ(json_array_size(tools), 10);
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 0), "name"), "add");
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 0), "description"),
                "Adds two integers.");
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 0), "input_schema/type"),
                "object");
  ASSERT_STR_EQ(
      JSTR(json_array_get(tools, 0), "input_schema/properties/a/type"),
      "integer");
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 1), "name"), "split");
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 1), "description"), "");
  test_rt_free(rt);
}

/* list_tools and call_tool as step actions: OpenEnv's observations, no
 * reward, and the step counted; other actions still go to env.step. */
TEST_IMPL(tools_step_actions) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, TOOLS, NULL));
  const char *out;
  size_t len;
  json_t *r;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  r = step_json(s, "{\"type\":\"list_tools\"}");
  ASSERT_EQ(json_array_size(JGET(r, "observation/tools")), 10);
  ASSERT_TRUE(json_is_null(JGET(r, "reward")));
  ASSERT_TRUE(json_is_false(JGET(r, "done")));
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"add\","
                   "\"arguments\":{\"a\":5,\"b\":3}}");
  ASSERT_STR_EQ(JSTR(r, "observation/tool_name"), "add");
  ASSERT_TRUE(json_is_null(JGET(r, "observation/error")));
  ASSERT_EQ(JINT(r, "observation/result/data"), 8);
  ASSERT_EQ(JINT(r, "observation/result/structured_content/result"), 8);
  ASSERT_TRUE(json_is_false(JGET(r, "observation/result/is_error")));
  ASSERT_STR_EQ(
      JSTR(json_array_get(JGET(r, "observation/result/content"), 0), "text"),
      "8");
  ASSERT_STR_EQ(
      JSTR(json_array_get(JGET(r, "observation/result/content"), 0), "type"),
      "text");
  /* a table result: itself as structured content, its JSON as text */
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"count\","
                   "\"arguments\":{\"n\":2}}");
  ASSERT_EQ(JINT(r, "observation/result/structured_content/n"), 2);
  ASSERT_STR_EQ(
      JSTR(json_array_get(JGET(r, "observation/result/content"), 0), "text"),
      "{\"n\":2,\"ok\":true}");
  /* an array result is wrapped; nothing gives no content */
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"split\","
                   "\"arguments\":{\"text\":\"a b\"}}");
  ASSERT_EQ(json_array_size(
                JGET(r, "observation/result/structured_content/result")), 2);
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"nothing\"}");
  ASSERT_EQ(json_array_size(JGET(r, "observation/result/content")), 0);
  ASSERT_TRUE(json_is_null(JGET(r, "observation/result/data")));
  /* ordinary actions are the environment's */
  r = step_json(s, "{\"move\":\"up\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/moved"), "up");
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 6);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Calls tool "raise" with `kind`: its observation's error is an
 * execution_error whose message begins with `want`, and shows no
 * address. */
static void expect_raised(ludo_session_t *s, const char *kind,
                          const char *want) {
  char action[160];
  const char *msg, *p;
  json_t *r;
  snprintf(action, sizeof action,
           "{\"type\":\"call_tool\",\"tool_name\":\"raise\","
           "\"arguments\":{\"kind\":\"%s\"}}",
           kind);
  r = step_json(s, action);
  ASSERT_TRUE(json_is_null(JGET(r, "observation/result")));
  ASSERT_STR_EQ(JSTR(r, "observation/error/error_type"), "execution_error");
  msg = JSTR(r, "observation/error/message");
  if (strncmp(msg, want, strlen(want)) != 0)
    FAIL("tool error %s: want \"%s...\", got \"%s\"", kind, want, msg);
  for (p = strstr(msg, ": 0x"); p != NULL; p = strstr(p + 1, ": 0x"))
    ASSERT_EQ(p[4], '?');
}

/* A tool's own failures are the observation's error, as OpenEnv reports
 * them; the session goes on. */
TEST_IMPL(tools_step_errors) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, TOOLS, NULL));
  json_t *r;
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"nope\"}");
  ASSERT_TRUE(json_is_null(JGET(r, "observation/result")));
  ASSERT_STR_EQ(JSTR(r, "observation/error/error_type"), "tool_not_found");
  ASSERT_STR_CONTAINS(JSTR(r, "observation/error/message"), "nope");
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"add\","
                   "\"arguments\":{\"a\":\"x\",\"b\":1}}");
  ASSERT_STR_EQ(JSTR(r, "observation/error/error_type"), "invalid_args");
  ASSERT_STR_CONTAINS(JSTR(r, "observation/error/message"), "arguments.a");
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"fail\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/error/error_type"), "execution_error");
  ASSERT_STR_EQ(JSTR(r, "observation/error/message"), "the tool broke");
  /* whatever a tool raises is its execution_error, named by its text
   * with no heap address, even a text that looks like a limit */
  expect_raised(s, "table", "(error object is a table value)");
  expect_raised(s, "timeout_text", "ETIMEOUT: fake");
  expect_raised(s, "address", "bad table: 0x?");
  expect_raised(s, "number", "42");
  expect_raised(s, "coded", "ENOENT: ");
  /* malformed tool actions fail the step like any schema violation */
  ASSERT_ERR(ludo_session_step(s, J("{\"type\":\"call_tool\"}"), NULL, NULL),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "tool_name");
  ASSERT_ERR(ludo_session_step(s, J("{\"type\":\"list_tools\",\"x\":1}"),
                               NULL, NULL),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "action.x");
  ASSERT_ERR(ludo_session_step(s, J("{\"type\":\"call_tool\",\"tool_name\":"
                                    "\"add\",\"arguments\":[]}"),
                               NULL, NULL),
             LUDO_ESCHEMA);
  /* a tool cannot keep the call past its budget by catching the stop */
  ASSERT_ERR(ludo_session_step(s, J("{\"type\":\"call_tool\",\"tool_name\":"
                                    "\"spin\"}"),
                               NULL, NULL),
             LUDO_ETIMEOUT);
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"flag\"}");
  ASSERT_TRUE(json_is_true(JGET(r, "observation/result/data")));
  ASSERT_STR_EQ(
      JSTR(json_array_get(JGET(r, "observation/result/content"), 0), "text"),
      "true");
  ludo_session_close(s);
  test_rt_free(rt);
}

/* ludo_session_call_tool: CallToolResult with MCP's field names too, and
 * error codes for what JSON-RPC reports as errors. */
TEST_IMPL(tools_call_api) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, TOOLS, NULL)), *e;
  const char *out;
  size_t len;
  json_t *r = call_json(s, "{\"name\":\"add\",\"arguments\":{\"a\":1,"
                           "\"b\":2}}");
  ASSERT_EQ(JINT(r, "structuredContent/result"), 3);
  ASSERT_EQ(JINT(r, "structured_content/result"), 3);
  ASSERT_TRUE(json_is_false(JGET(r, "isError")));
  ASSERT_ERR(call_rc(s, "{\"name\":\"nope\"}"), LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "nope");
  ASSERT_ERR(call_rc(s, "{\"name\":\"add\",\"arguments\":{\"a\":1}}"),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "b");
  ASSERT_ERR(call_rc(s, "{\"arguments\":{}}"), LUDO_ESCHEMA);
  ASSERT_ERR(call_rc(s, "{\"name\":\"fail\"}"), LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the tool broke");
  ASSERT_ERR(call_rc(s, "{\"name\":"), LUDO_EPARSE);
  /* an optional argument ("string?") takes null, which the tool sees as
   * nil; any other type is still refused */
  r = call_json(s, "{\"name\":\"greet\",\"arguments\":{\"who\":\"Ann\","
                   "\"title\":null}}");
  ASSERT_STR_EQ(JSTR(r, "data"), "(nil) Ann");
  r = call_json(s, "{\"name\":\"greet\",\"arguments\":{\"who\":\"Ann\","
                   "\"title\":\"Dr\"}}");
  ASSERT_STR_EQ(JSTR(r, "data"), "Dr Ann");
  ASSERT_ERR(call_rc(s, "{\"name\":\"greet\",\"arguments\":{\"who\":"
                        "\"Ann\",\"title\":5}}"), LUDO_ESCHEMA);
  /* tool calls count no step */
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 0);
  /* an environment without tools */
  e = test_open(test_env_load(rt, "examples/echo", NULL));
  ASSERT_OK(ludo_session_call_tool(
      e, J("{\"name\":\"echo_message\",\"arguments\":{\"message\":\"hi\"}}"),
      &out, &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "data"), "hi");
  ludo_session_close(e);
  e = test_open(test_env_load(rt, "spec/fixtures/c/abuse", NULL));
  ASSERT_ERR(call_rc(e, "{\"name\":\"x\"}"), LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(e), "has no tools");
  ludo_session_close(e);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A result's text content is the JSON of its value (data), whatever the
 * value: NaN and the infinities are null there as in data (docs/json.md),
 * not C's "-nan" or "inf", and a float keeps every digit. */
TEST_IMPL(tools_result_text) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, TOOLS, NULL));
  static const char *const cases[][2] = {
      {"nan", "null"},
      {"inf", "null"},
      {"ninf", "null"},
      {"third", "0.30000000000000004"},
      {"big", "1.1805916207174113e+21"},
      {"int", "7"}};
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char req[96];
    json_t *r, *data;
    snprintf(req, sizeof req,
             "{\"name\":\"number\",\"arguments\":{\"x\":\"%s\"}}",
             cases[i][0]);
    r = call_json(s, req);
    data = JGET(r, "data");
    ASSERT_STR_EQ(JSTR(json_array_get(JGET(r, "content"), 0), "text"),
                  cases[i][1]);
    /* the same value as data (jansson writes reals its own way: read the
     * text back rather than compare strings) */
    ASSERT_TRUE(json_equal(JPARSE(cases[i][1], strlen(cases[i][1])), data));
  }
  ludo_session_close(s);
  test_rt_free(rt);
}

static void on_call(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  json_t *r;
  ASSERT_OK(status);
  r = JPARSE(data, len);
  ASSERT_STR_EQ(JSTR(r, "structured_content/message"), "async");
  ASSERT_EQ(JINT(r, "structured_content/length"), 5);
  ++*(int *)ud;
}

TEST_IMPL(tools_call_async) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, "examples/echo", NULL));
  int done = 0;
  ASSERT_OK(ludo_session_call_tool_async(
      s, J("{\"name\":\"echo_with_length\",\"arguments\":{\"message\":"
           "\"async\"}}"),
      on_call, &done));
  ASSERT_EQ(done, 0);
  while (done == 0) ludo_runtime_poll(rt, 0);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Declarations that cannot work are refused at load, naming the tool. */
TEST_IMPL(tools_declaration_errors) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env;
  ASSERT_ERR(ludo_env_load(rt, "spec/fixtures/c/tools_reserved", NULL, &env),
             LUDO_ELOAD);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "'step' is reserved");
  test_rt_free(rt);
}

/* A strict session checks the environment's observations, not the tools'
 * (which have their own shapes). */
TEST_IMPL(tools_strict_session) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, "examples/echo", NULL));
  json_t *r;
  ASSERT_OK(ludo_session_set_strict(s, 1));
  r = step_json(s, "{\"type\":\"call_tool\",\"tool_name\":\"echo_message\","
                   "\"arguments\":{\"message\":\"hi\"}}");
  ASSERT_STR_EQ(JSTR(r, "observation/result/data"), "hi");
  ASSERT_TRUE(json_is_null(JGET(r, "reward")));
  r = step_json(s, "{\"type\":\"list_tools\"}");
  ASSERT_EQ(json_array_size(JGET(r, "observation/tools")), 2);
  r = step_json(s, "{\"message\":\"hi\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"), "hi");
  ludo_session_close(s);
  test_rt_free(rt);
}
