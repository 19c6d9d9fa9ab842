/* test-client.c - the client of ludo.h (net/client.c) on loopback sockets,
 * against an in-process server on the same runtime and loop (ludo_server_*
 * on port 0): every call, blocking and not, the server's error frames,
 * capacity, a server that goes away and comes back (the reconnect rule),
 * keepalive against a server that never answers pings, the reply time
 * limit, big messages both ways, tokens, closing with calls in flight.
 * A scripted server (runtime/net's server with frames chosen by the test)
 * sends what a ludo server never would. Every test ends with the runtime
 * freed and every byte returned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "env/env.h"
#include "helpers.h"
#include "net/handshake.h"
#include "net/server.h"
#include "net/ws.h"

/* ---- an in-process ludo server ------------------------------------------ */

typedef struct {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_server_t *sv;
  int port;
  char url[64];
} srv_t;

static void serve(srv_t *s, ludo_runtime_t *rt, const char *env_path,
                  const ludo_server_options_t *o, int port) {
  memset(s, 0, sizeof *s);
  s->rt = rt;
  s->env = test_env_load(rt, env_path, NULL);
  ASSERT_OK(ludo_server_new(s->env, o, &s->sv));
  if (ludo_server_listen(s->sv, "127.0.0.1", port) != 0)
    FAIL("listen: %s", ludo_server_errmsg(s->sv));
  s->port = ludo_server_port(s->sv);
  snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
}

static void set_flag(void *ud) { *(int *)ud = 1; }

/* Runs the runtime's loop once (blocking until something happens). */
static void loop_once(ludo_runtime_t *rt) {
  uv_run(rt->core.loop, UV_RUN_ONCE);
}

/* Closes the server and waits until it is gone. */
static void unserve(srv_t *s) {
  int done = 0;
  ludo_server_close(s->sv, set_flag, &done);
  while (!done) loop_once(s->rt);
  s->sv = NULL;
}

static json_t *result(int rc, ludo_client_t *c, const char *out,
                      size_t len) {
  if (rc != 0)
    FAIL("call failed: %s %s", ludo_err_name(rc), ludo_client_errmsg(c));
  return JPARSE(out, len);
}

static size_t len_of(const char *s) { return s ? strlen(s) : 0; }

#define RESET(c, json)                                                    \
  (rc = ludo_client_reset((c), (json), len_of(json), &out, &len),         \
   result(rc, (c), out, len))
#define CALL0(fn, c) (rc = fn((c), &out, &len), result(rc, (c), out, len))
#define STATE(c) CALL0(ludo_client_state, c)
#define TOOLS(c) CALL0(ludo_client_list_tools, c)
#define INFO(c) CALL0(ludo_client_info, c)
#define CALL_TOOL(c, json)                                                \
  (rc = ludo_client_call_tool((c), (json), strlen(json), &out, &len),     \
   result(rc, (c), out, len))
#define STEP(c, json)                                                     \
  (rc = ludo_client_step((c), (json), strlen(json), &out, &len),          \
   result(rc, (c), out, len))

/* ---- blocking calls ------------------------------------------------------ */

TEST_IMPL(client_calls) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c;
  const char *out;
  size_t len;
  json_t *r, *tools;
  int rc;
  srv_t s;
  serve(&s, rt, "examples/echo", NULL, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  ASSERT_STR_CONTAINS(ludo_client_url(c), "/ws");
  r = RESET(c, "{\"seed\": 7, \"episode_id\": \"ep-1\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"),
                "Echo environment ready!");
  ASSERT_EQ(json_is_false(JGET(r, "done")), 1);
  r = STEP(c, "{\"message\":\"hello\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"), "hello");
  ASSERT_EQ(JINT(r, "observation/message_length"), 5);
  /* The server sends the metadata in both places (OpenEnv's post-#805
   * form); the client keeps the top-level one, so the observation is a
   * local session's. */
  ASSERT_NOT_NULL(JGET(r, "metadata/rubrics/total"));
  ASSERT_NULL(test_jfind(r, "observation/metadata"));
  r = STATE(c);
  ASSERT_STR_EQ(JSTR(r, "episode_id"), "ep-1");
  ASSERT_EQ(JINT(r, "step_count"), 1);
  r = TOOLS(c);
  tools = JGET(r, "tools");
  ASSERT_EQ(json_array_size(tools), 2);
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 0), "name"), "echo_message");
  ASSERT_STR_EQ(JSTR(json_array_get(tools, 0), "inputSchema/type"),
                "object");
  r = CALL_TOOL(c, "{\"name\":\"echo_with_length\",\"arguments\":"
                   "{\"message\":\"abc\"}}");
  ASSERT_EQ(JINT(r, "data/length"), 3);
  ASSERT_EQ(json_is_false(JGET(r, "is_error")), 1);
  /* A tool call is not a step. */
  r = STATE(c);
  ASSERT_EQ(JINT(r, "step_count"), 1);
  r = INFO(c);
  ASSERT_STR_EQ(JSTR(r, "name"), "echo_env");
  ASSERT_STR_EQ(JSTR(r, "action/properties/message/type"), "string");
  ASSERT_STR_EQ(JSTR(r, "observation/type"), "object");
  ASSERT_EQ(ludo_server_sessions(s.sv), 1);
  ludo_client_close(c);
  unserve(&s);
  test_rt_free(rt);
}

/* Errors: the server's (mapped to codes, the client still usable after
 * each) and the caller's (refused before anything is sent). */
TEST_IMPL(client_errors) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c;
  const char *out;
  size_t len;
  json_t *r;
  int rc;
  srv_t s;
  serve(&s, rt, "examples/echo", NULL, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, NULL);
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":5}"), &out, &len),
             LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "message: expected string");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "(VALIDATION_ERROR)");
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"x\",\"extra\":1}"), &out,
                              &len), LUDO_ESCHEMA);
  ASSERT_ERR(ludo_client_call_tool(c, J("{\"name\":\"nope\"}"), &out, &len),
             LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "nope");
  ASSERT_ERR(ludo_client_call_tool(c, J("{\"name\":\"echo_message\","
                                        "\"arguments\":{\"message\":1}}"),
                                   &out, &len), LUDO_ESCHEMA);
  /* Refused here: nothing is sent. */
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":"), &out, &len),
             LUDO_EPARSE);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "the action is not JSON");
  ASSERT_ERR(ludo_client_step(c, J("\"hi\""), &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_client_reset(c, J("[]"), &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_client_call_tool(c, J("{}"), &out, &len), LUDO_EINVAL);
  ASSERT_ERR(ludo_client_step(NULL, J("{}"), &out, &len), LUDO_EINVAL);
  r = STEP(c, "{\"message\":\"still here\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"), "still here");
  r = STATE(c);
  ASSERT_EQ(JINT(r, "step_count"), 1); /* refused steps did not count */
  ludo_client_close(c);
  /* An environment that raises: EXECUTION_ERROR with ludo's own code. */
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  ludo_client_close(c);
  unserve(&s);
  serve(&s, rt, "spec/fixtures/c/where", NULL, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, NULL);
  ASSERT_ERR(ludo_client_step(c, J("{\"phase\":\"step\",\"what\":\"raise\"}"),
                              &out, &len),
             LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "raised on purpose");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "(EXECUTION_ERROR)");
  ludo_client_close(c);
  unserve(&s);
  /* URLs and options that cannot work. */
  ASSERT_ERR(ludo_client_connect(rt, "https://127.0.0.1:1", NULL, &c),
             LUDO_EINVAL);
  ASSERT_NULL(c);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "needs TLS");
  {
    ludo_client_options_t o;
    ludo_client_options_init(&o);
    o.token = "a\r\nX-Evil: 1";
    ASSERT_ERR(ludo_client_connect(rt, "http://127.0.0.1:1", &o, &c),
               LUDO_EINVAL);
    ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "control characters");
  }
  /* Nothing listens there any more. */
  ASSERT_ERR(ludo_client_connect(rt, s.url, NULL, &c), LUDO_ECONNECT);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "connection refused");
  ASSERT_ERR(ludo_client_connect(rt, "http://nosuch.invalid:80", NULL, &c),
             LUDO_ECONNECT);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "cannot resolve");
  test_rt_free(rt);
}

/* ---- non-blocking calls --------------------------------------------------- */

typedef struct {
  int calls, status[8];
  char data[8][256];
  const char *next[8];   /* the call a callback starts next: a step's
                            action, or NULL */
  ludo_client_t *c;
  int busy_rc, blocking_rc;
} rec_t;

static void record(ludo_client_t *c, int status, const char *data,
                   size_t len, void *ud) {
  rec_t *r = ud;
  int i = r->calls++;
  const char *out;
  size_t olen;
  r->status[i] = status;
  snprintf(r->data[i], sizeof r->data[i], "%.*s", (int)len, data);
  r->c = c;
  /* A blocking call from inside a callback would re-enter the loop. */
  r->blocking_rc = ludo_client_state(c, &out, &olen);
  if (r->next[i] != NULL)
    ASSERT_OK(ludo_client_step_async(c, r->next[i], strlen(r->next[i]),
                                     record, ud));
}

TEST_IMPL(client_async) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c = NULL;
  const char *out;
  size_t olen;
  ludo_stats_t st;
  rec_t rec;
  srv_t s;
  memset(&rec, 0, sizeof rec);
  serve(&s, rt, "examples/echo", NULL, 0);
  ASSERT_OK(ludo_client_connect_async(rt, s.url, NULL, record, &rec, &c));
  ASSERT_NOT_NULL(c);
  /* A blocking call while it connects: one at a time (the non-blocking
   * ones wait for the connection: client_calls_wait_for_connect). */
  ASSERT_ERR(ludo_client_info(c, &out, &olen), LUDO_EBUSY);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "connect is still in flight");
  ASSERT_EQ(rec.calls, 0); /* never inside the call */
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.calls, 1);  /* counted for ludo_runtime_run */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(rec.calls, 1);
  ASSERT_OK(rec.status[0]);
  ASSERT_STR_CONTAINS(rec.data[0], "ws://127.0.0.1:");
  ASSERT_ERR(rec.blocking_rc, LUDO_EBUSY);
  ASSERT_PTR_EQ(rec.c, c);
  /* A reset whose callback steps, whose callback steps again. */
  rec.next[1] = "{\"message\":\"one\"}";
  rec.next[2] = "{\"message\":\"two\"}";
  ASSERT_OK(ludo_client_reset_async(c, NULL, 0, record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(rec.calls, 4);
  ASSERT_OK(rec.status[2]);
  ASSERT_STR_CONTAINS(rec.data[2], "\"echoed_message\":\"one\"");
  ASSERT_STR_CONTAINS(rec.data[3], "\"echoed_message\":\"two\"");
  ASSERT_OK(ludo_client_list_tools_async(c, record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_STR_CONTAINS(rec.data[4], "\"echo_message\"");
  ASSERT_OK(ludo_client_call_tool_async(
      c, J("{\"name\":\"echo_message\",\"arguments\":{\"message\":\"m\"}}"),
      record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_STR_CONTAINS(rec.data[5], "\"data\":\"m\"");
  /* An error comes through the callback, the message as its data. */
  ASSERT_OK(ludo_client_step_async(c, J("{\"message\":[]}"), record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_ERR(rec.status[6], LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(rec.data[6], "(VALIDATION_ERROR)");
  /* A synchronous refusal never calls back. */
  ASSERT_ERR(ludo_client_step_async(c, J("nope"), record, &rec),
             LUDO_EPARSE);
  ASSERT_OK(ludo_client_state_async(c, record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(rec.calls, 8);
  ASSERT_STR_CONTAINS(rec.data[7], "\"step_count\":2");
  {
    int closed = 0;
    ASSERT_OK(ludo_client_close_async(c, set_flag, &closed));
    ASSERT_OK(ludo_runtime_run(rt)); /* waits for the close */
    ASSERT_EQ(closed, 1);
  }
  unserve(&s);
  test_rt_free(rt);
}

static int close_again_rc = 1, close_again_ran;

static void set_ran(void *ud) { *(int *)ud = 1; }

/* record(), then closes the client with ludo_client_close_async: from the
 * callback a close runs, the client is already closing. */
static void record_close_again(ludo_client_t *c, int status,
                               const char *data, size_t len, void *ud) {
  record(c, status, data, len, ud);
  close_again_rc = ludo_client_close_async(c, set_ran, &close_again_ran);
}

/* Calls given to a client while ludo_client_connect_async connects wait
 * for the connection (ludo.h): the connect's callback runs with its
 * outcome, then the call's (the call got EBUSY "? is still in flight").
 * When the connection cannot be made both fail with ECONNECT; a close
 * meanwhile ends both, inside it, the connect's first. A close_async
 * from a callback that a close runs returns ECLOSED and never calls
 * back (it returned 0 and never called back). */
TEST_IMPL(client_calls_wait_for_connect) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c = NULL;
  const char *out;
  size_t olen;
  ludo_stats_t st;
  rec_t rec;
  srv_t s;
  char url[64];
  memset(&rec, 0, sizeof rec);
  serve(&s, rt, "examples/echo", NULL, 0);
  snprintf(url, sizeof url, "%s", s.url);
  ASSERT_OK(ludo_client_connect_async(rt, url, NULL, record, &rec, &c));
  ASSERT_OK(ludo_client_reset_async(c, NULL, 0, record, &rec));
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &olen), LUDO_EBUSY);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "reset is still in flight");
  ASSERT_ERR(ludo_client_step_async(c, J("{}"), record, &rec), LUDO_EBUSY);
  ASSERT_EQ(rec.calls, 0);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.calls, 2);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(rec.calls, 2);
  ASSERT_OK(rec.status[0]);
  ASSERT_STR_CONTAINS(rec.data[0], "ws://127.0.0.1:");
  ASSERT_OK(rec.status[1]);
  ASSERT_STR_CONTAINS(rec.data[1], "\"observation\"");
  ludo_client_close(c);
  /* a close while it connects, a call waiting */
  ASSERT_OK(ludo_client_connect_async(rt, url, NULL, record, &rec, &c));
  ASSERT_OK(ludo_client_step_async(c, J("{\"message\":\"x\"}"),
                                   record_close_again, &rec));
  ludo_client_close(c);
  ASSERT_EQ(rec.calls, 4);
  ASSERT_ERR(rec.status[2], LUDO_ECANCELED);
  ASSERT_ERR(rec.status[3], LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(rec.data[3], "closed during step");
  ASSERT_ERR(close_again_rc, LUDO_ECLOSED);
  unserve(&s);
  /* nobody listens there now: both fail */
  ASSERT_OK(ludo_client_connect_async(rt, url, NULL, record, &rec, &c));
  ASSERT_OK(ludo_client_reset_async(c, NULL, 0, record, &rec));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(rec.calls, 6);
  ASSERT_ERR(rec.status[4], LUDO_ECONNECT);
  ASSERT_ERR(rec.status[5], LUDO_ECONNECT);
  ASSERT_TRUE(strstr(rec.data[4], "?") == NULL);
  ludo_client_close(c);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(close_again_ran, 0);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.calls, 0);
  test_rt_free(rt);
}

/* Closing with a call in flight: its callback runs inside the close with
 * ECANCELED; freeing the runtime does the same for a client left open. */
TEST_IMPL(client_close_in_flight) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c;
  rec_t rec;
  srv_t s;
  memset(&rec, 0, sizeof rec);
  serve(&s, rt, "spec/fixtures/c/sleepy", NULL, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  ASSERT_OK(ludo_client_step_async(c, J("{\"seconds\":5}"), record, &rec));
  loop_once(rt);
  ludo_client_close(c);
  ASSERT_EQ(rec.calls, 1);
  ASSERT_ERR(rec.status[0], LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(rec.data[0], "closed during step");
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  ASSERT_OK(ludo_client_step_async(c, J("{\"seconds\":5}"), record, &rec));
  unserve(&s);    /* the step's connection goes: EDISCONNECTED */
  while (rec.calls < 2) loop_once(rt);
  ASSERT_ERR(rec.status[1], LUDO_EDISCONNECTED);
  ASSERT_STR_CONTAINS(rec.data[1], "during step");
  ASSERT_OK(ludo_client_step_async(c, J("{\"seconds\":5}"), record, &rec));
  test_rt_free(rt); /* the client left open, its call in flight */
  ASSERT_EQ(rec.calls, 3);
  ASSERT_ERR(rec.status[2], LUDO_ECANCELED);
}

/* ---- the reconnect rule --------------------------------------------------- */

/* The server goes away under an episode and comes back on the same port:
 * step and state fail (the episode is gone) without reaching for the
 * network, the next reset connects again and starts a new one. */
TEST_IMPL(client_reconnect) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_t *c;
  const char *out;
  size_t len;
  json_t *r;
  int rc, port;
  srv_t s;
  serve(&s, rt, "examples/echo", NULL, 0);
  port = s.port;
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, "{\"episode_id\":\"first\"}");
  STEP(c, "{\"message\":\"a\"}");
  unserve(&s); /* closes the WebSocket with 1001 */
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"b\"}"), &out, &len),
             LUDO_EDISCONNECTED);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "1001");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "episode are gone");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "a reset reconnects");
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_EDISCONNECTED);
  /* The async form refuses at once too. */
  ASSERT_ERR(ludo_client_step_async(c, J("{\"message\":\"b\"}"), record,
                                    NULL), LUDO_EDISCONNECTED);
  /* No server: the reset cannot connect; the rule still holds. */
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_ECONNECT);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "connection refused");
  /* A reset that failed started no episode: step and state still refuse,
   * before and after the server is back (they would connect a session
   * never reset). */
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"b\"}"), &out, &len),
             LUDO_EDISCONNECTED);
  serve(&s, rt, "examples/echo", NULL, port);
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_EDISCONNECTED);
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"b\"}"), &out, &len),
             LUDO_EDISCONNECTED);
  /* A reset: a new connection, a new session, a new episode. */
  r = RESET(c, "{\"episode_id\":\"second\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/echoed_message"),
                "Echo environment ready!");
  STEP(c, "{\"message\":\"b\"}");
  r = STATE(c);
  ASSERT_STR_EQ(JSTR(r, "episode_id"), "second");
  ASSERT_EQ(JINT(r, "step_count"), 1);
  ludo_client_close(c);
  /* With no_reconnect, a lost connection stays lost. */
  {
    ludo_client_options_t o;
    ludo_client_options_init(&o);
    o.no_reconnect = 1;
    ASSERT_OK(ludo_client_connect(rt, s.url, &o, &c));
    RESET(c, NULL);
    unserve(&s);
    serve(&s, rt, "examples/echo", NULL, port);
    ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len),
               LUDO_EDISCONNECTED);
    ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "no_reconnect");
    ASSERT_ERR(ludo_client_list_tools(c, &out, &len), LUDO_EDISCONNECTED);
    ludo_client_close(c);
  }
  unserve(&s);
  test_rt_free(rt);
}

/* A session the server ends (idle timeout: SESSION_ERROR, then close):
 * the episode is lost the same way. A connection lost before any reset
 * loses no episode: step simply goes to a new session. */
TEST_IMPL(client_session_ended) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_server_options_t so;
  ludo_client_t *c;
  const char *out;
  size_t len;
  int rc;
  srv_t s;
  ludo_server_options_init(&so);
  so.session_timeout_ms = 300; /* reaped at the next 1 s tick */
  serve(&s, rt, "examples/echo", &so, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, NULL);
  while (ludo_server_sessions(s.sv) > 0) loop_once(rt); /* reaped */
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"x\"}"), &out, &len),
             LUDO_EDISCONNECTED);
  ASSERT_ERR(ludo_client_step(c, J("{\"message\":\"x\"}"), &out, &len),
             LUDO_EDISCONNECTED);
  RESET(c, NULL);
  STEP(c, "{\"message\":\"back\"}");
  while (ludo_server_sessions(s.sv) > 0) loop_once(rt);
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_EDISCONNECTED);
  /* No episode was lost this time: tools connect at once. */
  ASSERT_OK(ludo_client_list_tools(c, &out, &len));
  ludo_client_close(c);
  unserve(&s);
  test_rt_free(rt);
}

/* At capacity the server sends CAPACITY_REACHED and closes. */
TEST_IMPL(client_capacity) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_server_options_t so;
  ludo_client_t *a, *b;
  const char *out;
  size_t len;
  int rc;
  srv_t s;
  ludo_server_options_init(&so);
  so.max_sessions = 1;
  serve(&s, rt, "examples/echo", &so, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &a));
  RESET(a, NULL);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &b));
  ASSERT_ERR(ludo_client_reset(b, NULL, 0, &out, &len), LUDO_ECAPACITY);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(b), "Server at capacity");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(b), "(CAPACITY_REACHED)");
  ludo_client_close(a);
  while (ludo_server_sessions(s.sv) > 0) loop_once(rt);
  RESET(b, NULL); /* room again: it connects anew */
  ludo_client_close(b);
  unserve(&s);
  test_rt_free(rt);
}

/* ---- a server that never answers ---------------------------------------- */

/* A raw TCP server on the runtime's loop: answers the opening handshake
 * with a valid 101, then reads and ignores everything (pings included). */
typedef struct {
  uv_tcp_t listener;
  uv_tcp_t peers[4];
  char req[4][2048];
  size_t req_len[4];
  int npeers, closed, port;
  size_t ignored; /* bytes read after the handshake */
} silent_t;

static void silent_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  static char scrap[65536];
  silent_t *s = h->data;
  int i = (int)((uv_tcp_t *)h - s->peers);
  (void)want;
  if (s->req_len[i] < sizeof s->req[i] - 1 &&
      strstr(s->req[i], "\r\n\r\n") == NULL)
    *b = uv_buf_init(s->req[i] + s->req_len[i],
                     (unsigned)(sizeof s->req[i] - 1 - s->req_len[i]));
  else
    *b = uv_buf_init(scrap, sizeof scrap);
}

static void silent_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void silent_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  silent_t *s = st->data;
  int i = (int)((uv_tcp_t *)st - s->peers);
  const char *k;
  if (n <= 0) return;
  if (b->base != s->req[i] + s->req_len[i]) {
    s->ignored += (size_t)n;
    return;
  }
  s->req_len[i] += (size_t)n;
  s->req[i][s->req_len[i]] = '\0';
  k = strstr(s->req[i], "Sec-WebSocket-Key: ");
  if (k != NULL && strstr(s->req[i], "\r\n\r\n") != NULL) {
    char key[64], acc[LUDO__HANDSHAKE_ACCEPT_LEN + 1];
    struct {
      uv_write_t w;
      char text[256];
    } *w = malloc(sizeof *w);
    uv_buf_t out;
    sscanf(k + 19, "%63[^\r]", key);
    ludo__handshake_accept_key(key, acc);
    snprintf(w->text, sizeof w->text,
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
             acc);
    out = uv_buf_init(w->text, (unsigned)strlen(w->text));
    uv_write(&w->w, st, &out, 1, silent_written);
  }
}

static void silent_conn(uv_stream_t *l, int status) {
  silent_t *s = l->data;
  uv_tcp_t *p;
  if (status != 0 || s->npeers == 4) return;
  p = &s->peers[s->npeers++];
  uv_tcp_init(l->loop, p);
  p->data = s;
  uv_accept(l, (uv_stream_t *)p);
  uv_read_start((uv_stream_t *)p, silent_alloc, silent_read);
}

static void silent_start(silent_t *s, ludo_runtime_t *rt) {
  struct sockaddr_in a;
  struct sockaddr_storage ss;
  int n = sizeof ss;
  memset(s, 0, sizeof *s);
  uv_tcp_init(rt->core.loop, &s->listener);
  s->listener.data = s;
  uv_ip4_addr("127.0.0.1", 0, &a);
  ASSERT_OK(uv_tcp_bind(&s->listener, (struct sockaddr *)&a, 0));
  ASSERT_OK(uv_listen((uv_stream_t *)&s->listener, 8, silent_conn));
  uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &n);
  s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void silent_closed(uv_handle_t *h) {
  silent_t *s = h->data;
  s->closed++;
}

static void silent_stop(silent_t *s, ludo_runtime_t *rt) {
  int i;
  uv_close((uv_handle_t *)&s->listener, silent_closed);
  for (i = 0; i < s->npeers; i++)
    uv_close((uv_handle_t *)&s->peers[i], silent_closed);
  while (s->closed < s->npeers + 1) loop_once(rt);
}

/* Keepalive: pings go out after ping_interval_ms of silence; without a
 * pong the connection is dropped and the call in flight fails, long
 * before any reply time limit. */
TEST_IMPL(client_keepalive) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_options_t o;
  ludo_client_t *c;
  const char *out;
  size_t len;
  char url[64];
  silent_t s;
  silent_start(&s, rt);
  snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", s.port);
  ludo_client_options_init(&o);
  o.ping_interval_ms = 10;
  o.pong_timeout_ms = 10;
  o.timeout_ms = UINT32_MAX; /* no reply limit: only keepalive ends it */
  ASSERT_OK(ludo_client_connect(rt, url, &o, &c));
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_EDISCONNECTED);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "1011 keepalive ping timeout");
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "during reset");
  /* The server got the reset, then a masked ping (opcode 9). */
  ASSERT_STR_CONTAINS(s.req[0], "GET /ws HTTP/1.1");
  ASSERT_UINT_GT(s.ignored, 0);
  ludo_client_close(c);
  silent_stop(&s, rt);
  test_rt_free(rt);
}

/* The reply time limit: ENOREPLY, the connection dropped; the next call
 * connects anew (no episode was under way). */
TEST_IMPL(client_reply_timeout) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_options_t o;
  ludo_client_t *c;
  const char *out;
  size_t len;
  char url[64];
  silent_t s;
  silent_start(&s, rt);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
  ludo_client_options_init(&o);
  o.ping_interval_ms = UINT32_MAX;
  o.timeout_ms = 20;
  ASSERT_OK(ludo_client_connect(rt, url, &o, &c));
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_ENOREPLY);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "no reply to state within "
                                             "20 ms");
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_ENOREPLY);
  ASSERT_EQ(s.npeers, 2);
  ludo_client_close(c);
  silent_stop(&s, rt);
  test_rt_free(rt);
}

/* Keepalive keeps a long step alive: the server answers the client's
 * pings while the step waits, and the step's reply comes. */
TEST_IMPL(client_keepalive_long_step) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_client_options_t o;
  ludo_client_t *c;
  const char *out;
  size_t len;
  json_t *r;
  int rc;
  srv_t s;
  serve(&s, rt, "spec/fixtures/c/sleepy", NULL, 0);
  ludo_client_options_init(&o);
  o.ping_interval_ms = 5;
  o.pong_timeout_ms = 1000;
  ASSERT_OK(ludo_client_connect(rt, s.url, &o, &c));
  RESET(c, NULL);
  r = STEP(c, "{\"seconds\":0.2,\"tag\":\"slow\"}");
  ASSERT_STR_EQ(JSTR(r, "observation/tag"), "slow");
  ludo_client_close(c);
  unserve(&s);
  test_rt_free(rt);
}

/* ---- big messages ----------------------------------------------------------- */

TEST_IMPL(client_big_messages) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_server_options_t so;
  ludo_client_options_t o;
  ludo_client_t *c;
  const char *out;
  size_t len, n = (size_t)4 << 20, i;
  char *action = malloc(n + 32);
  json_t *r;
  int rc;
  srv_t s;
  /* A 4 MiB message out and back. */
  memcpy(action, "{\"message\":\"", 12);
  for (i = 0; i < n; i++) action[12 + i] = (char)('a' + i % 26);
  memcpy(action + 12 + n, "\"}", 3);
  serve(&s, rt, "examples/echo", NULL, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, NULL);
  r = STEP(c, action);
  ASSERT_EQ(JINT(r, "observation/message_length"), (long long)n);
  ASSERT_UINT_EQ(strlen(JSTR(r, "observation/echoed_message")), n);
  ludo_client_close(c);
  /* A reply over max_message_bytes: ETOOBIG, and the connection goes. */
  ludo_client_options_init(&o);
  o.max_message_bytes = (size_t)1 << 20;
  ASSERT_OK(ludo_client_connect(rt, s.url, &o, &c));
  RESET(c, NULL);
  ASSERT_ERR(ludo_client_step(c, action, strlen(action), &out, &len),
             LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "1009");
  RESET(c, NULL); /* reconnects */
  STEP(c, "{\"message\":\"small\"}");
  ludo_client_close(c);
  unserve(&s);
  /* A request over the server's limit. */
  ludo_server_options_init(&so);
  so.max_message_bytes = (size_t)1 << 20;
  serve(&s, rt, "examples/echo", &so, 0);
  ASSERT_OK(ludo_client_connect(rt, s.url, NULL, &c));
  RESET(c, NULL);
  ASSERT_ERR(ludo_client_step(c, action, strlen(action), &out, &len),
             LUDO_ETOOBIG);
  ludo_client_close(c);
  unserve(&s);
  free(action);
  test_rt_free(rt);
}

/* ---- tokens ------------------------------------------------------------------ */

TEST_IMPL(client_token) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_server_options_t so;
  ludo_client_options_t o;
  ludo_client_t *c;
  const char *out;
  size_t len;
  json_t *r;
  int rc;
  srv_t s;
  ludo_server_options_init(&so);
  so.token = "s3cret";
  serve(&s, rt, "examples/echo", &so, 0);
  ASSERT_ERR(ludo_client_connect(rt, s.url, NULL, &c), LUDO_ECONNECT);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "answered 401");
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "wants a token");
  ludo_client_options_init(&o);
  o.token = "wrong";
  ASSERT_ERR(ludo_client_connect(rt, s.url, &o, &c), LUDO_ECONNECT);
  o.token = "s3cret";
  ASSERT_OK(ludo_client_connect(rt, s.url, &o, &c));
  RESET(c, NULL);
  r = INFO(c);
  ASSERT_STR_EQ(JSTR(r, "name"), "echo_env");
  ludo_client_close(c);
  unserve(&s);
  test_rt_free(rt);
}

/* ---- a scripted server -------------------------------------------------------- */

/* runtime/net's server with a handler of the test's: upgrades every
 * request, sends `greeting` when the WebSocket opens (then closes when
 * `close_after_greeting`), and answers the i-th message with replies[i]
 * ("BIN" sends a binary frame; NULL: no answer). */
typedef struct {
  const char *greeting;
  int close_after_greeting;
  const char *replies[8];
  int nmsg;
  int nconn;  /* WebSockets opened */
} script_t;

static void sc_message(void *ud, ludo__ws_t *ws, int binary,
                       const char *data, size_t len) {
  script_t *s = ud;
  const char *r = s->nmsg < 8 ? s->replies[s->nmsg] : NULL;
  (void)binary;
  (void)data;
  (void)len;
  s->nmsg++;
  if (r == NULL) return;
  if (strcmp(r, "BIN") == 0)
    ludo__ws_send(ws, 1, "\x01\x02", 2);
  else
    ludo__ws_send(ws, 0, r, strlen(r));
}

static void sc_close(void *ud, ludo__ws_t *ws, int code, const char *reason,
                     size_t len) {
  (void)ud;
  (void)ws;
  (void)code;
  (void)reason;
  (void)len;
}

static void sc_request(void *ud, ludo__http_req_t *req) {
  script_t *s = ud;
  ludo__ws_callbacks_t cb = {sc_message, sc_close, NULL};
  ludo__ws_t *ws;
  ASSERT_OK(ludo__ws_accept(req, NULL, &cb, s, &ws));
  s->nconn++;
  if (s->greeting) ludo__ws_send(ws, 0, s->greeting, strlen(s->greeting));
  if (s->close_after_greeting) ludo__ws_close(ws, 1000, NULL);
}

static int sc_start(ludo_runtime_t *rt, script_t *s, ludo__server_t **out) {
  ludo__http_handler_t h = {sc_request, NULL, NULL};
  ASSERT_OK(ludo__server_new(&rt->core, NULL, &h, s, out));
  ASSERT_OK(ludo__server_listen(*out, "127.0.0.1", 0, 0));
  return ludo__server_port(*out);
}

static void sc_stop(ludo_runtime_t *rt, ludo__server_t *sv) {
  int done = 0;
  ludo__server_close(sv, set_flag, &done);
  while (!done) loop_once(rt);
}

TEST_IMPL(client_scripted_server) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo__server_t *sv;
  ludo_client_t *c;
  const char *out;
  size_t len;
  char url[64];
  script_t s;
  /* An error frame before any request (at capacity), then the close: the
   * next call fails with that error's code. */
  memset(&s, 0, sizeof s);
  s.greeting = "{\"type\":\"error\",\"data\":{\"message\":\"Server at "
               "capacity: 9/9\",\"code\":\"CAPACITY_REACHED\"}}";
  s.close_after_greeting = 1;
  snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", sc_start(rt, &s, &sv));
  ASSERT_OK(ludo_client_connect(rt, url, NULL, &c));
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_ECAPACITY);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "capacity: 9/9");
  ludo_client_close(c);
  sc_stop(rt, sv);
  /* Replies that break the protocol: each drops the connection; the
   * next call connects anew and gets the next reply. */
  memset(&s, 0, sizeof s);
  s.replies[0] = "BIN";
  s.replies[1] = "{\"type\":\"state\",\"data\":{}}";
  s.replies[2] = "not json";
  s.replies[3] = "{\"type\":\"state\",\"data\":{\"step_count\":4}}";
  snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", sc_start(rt, &s, &sv));
  ASSERT_OK(ludo_client_connect(rt, url, NULL, &c));
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_EPROTO);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "binary frame");
  ASSERT_ERR(ludo_client_reset(c, NULL, 0, &out, &len), LUDO_EPROTO);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "type \"state\"");
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_EPROTO);
  ASSERT_STR_CONTAINS(ludo_client_errmsg(c), "is not JSON");
  ASSERT_OK(ludo_client_state(c, &out, &len));
  ASSERT_STR_EQ(out, "{\"step_count\":4}");
  ASSERT_EQ(s.nmsg, 4);
  ludo_client_close(c);
  sc_stop(rt, sv);
  /* After an error the server closes on (CAPACITY_REACHED here, its
   * close not come yet: this server never sends it) the next call goes
   * over a new connection, not the old one: sent on it, it met the
   * server's close and failed EDISCONNECTED (a call made from the refused
   * one's callback, as `ludo eval` starts its next episode). */
  memset(&s, 0, sizeof s);
  s.replies[0] = "{\"type\":\"error\",\"data\":{\"message\":\"Server at "
                 "capacity: 1/1\",\"code\":\"CAPACITY_REACHED\"}}";
  s.replies[1] = "{\"type\":\"state\",\"data\":{\"step_count\":1}}";
  s.replies[2] = "{\"type\":\"state\",\"data\":{\"step_count\":2}}";
  snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", sc_start(rt, &s, &sv));
  ASSERT_OK(ludo_client_connect(rt, url, NULL, &c));
  ASSERT_ERR(ludo_client_state(c, &out, &len), LUDO_ECAPACITY);
  ASSERT_OK(ludo_client_state(c, &out, &len));
  ASSERT_STR_EQ(out, "{\"step_count\":1}");
  ASSERT_EQ(s.nconn, 2);
  ASSERT_OK(ludo_client_state(c, &out, &len)); /* that one stays */
  ASSERT_STR_EQ(out, "{\"step_count\":2}");
  ASSERT_EQ(s.nconn, 2);
  ludo_client_close(c);
  sc_stop(rt, sv);
  test_rt_free(rt);
}
