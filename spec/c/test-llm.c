/* test-llm.c - ludo.llm through the public C API, against the mock LLM
 * server (spec/llm/mock_llm.js, started per test): a session closed with
 * a request in flight, and a runtime freed with one, give every byte back
 * (the counting allocator here; curl's own memory under make asan's leak
 * check) and report the call once; the usage accessors; scripts and the
 * gate (ludo_options_t.lua_llm). Specs of the behaviour itself: spec/llm. */
#include "helpers.h"
#include "mockllm.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define FIXTURE "spec/fixtures/llm"

typedef struct {
  mockllm_t proc;
  int port;
  char base[64];
} mock_t;

/* Starts the mock with `script` (JSON) and reads its port. */
static void mock_start(mock_t *m, const char *script) {
  if (mockllm_start(&m->proc, script) != 0)
    FAIL("the mock LLM server did not start");
  m->port = m->proc.port;
  snprintf(m->base, sizeof m->base, "http://127.0.0.1:%d/v1", m->port);
}

static void mock_stop(mock_t *m) { mockllm_stop(&m->proc); }

/* A number of the mock's stats (GET /_mock/stats, blocking). */
static long mock_stats_field(mock_t *m, const char *field) {
  struct sockaddr_in a;
  char buf[4096], key[64];
  const char *req = "GET /_mock/stats HTTP/1.0\r\n\r\n", *p;
  size_t n = 0;
  ssize_t r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)m->port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_TRUE(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  ASSERT_TRUE(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
  while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
    n += (size_t)r;
  close(fd);
  buf[n] = '\0';
  snprintf(key, sizeof key, "\"%s\":", field);
  p = strstr(buf, key);
  if (p == NULL) FAIL("no %s in the mock's stats: %s", field, buf);
  return strtol(p + strlen(key), NULL, 10);
}

static long mock_in_flight(mock_t *m) {
  return mock_stats_field(m, "in_flight");
}

typedef struct {
  int calls, status;
  char data[1024];
} done_t;

static void on_done(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  done_t *d = ud;
  (void)s;
  d->calls++;
  d->status = status;
  snprintf(d->data, sizeof d->data, "%.*s", (int)len, data ? data : "");
}

/* A step action of the fixture: one chat of `prompt` on the mock. */
static int chat_action(char *buf, size_t n, const mock_t *m,
                       const char *prompt) {
  return snprintf(buf, n, "{\"json\": \"{\\\"op\\\": \\\"chat\\\", "
                  "\\\"client\\\": {\\\"base_url\\\": \\\"%s\\\", "
                  "\\\"model\\\": \\\"m\\\", \\\"retries\\\": 0}, "
                  "\\\"messages\\\": [{\\\"role\\\": \\\"user\\\", "
                  "\\\"content\\\": \\\"%s\\\"}]}\"}", m->base, prompt);
}

static ludo_runtime_t *llm_runtime(unsigned flags) {
  ludo_options_t o;
  test_options(&o);
  o.lua_llm = flags;
  o.prewarm = 0;
  o.module_path = ".";
  return test_rt_new(&o);
}

/* Starts a chat that the mock never answers and runs the loop until the
 * mock has it. */
static ludo_session_t *hanging_call(ludo_runtime_t *rt, mock_t *m,
                                    done_t *d) {
  ludo_env_t *env = test_env_load(rt, FIXTURE, NULL);
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  char action[1024];
  int n = chat_action(action, sizeof action, m, "wait"), i;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_step_async(s, action, (size_t)n, on_done, d));
  for (i = 0; i < 500 && mock_in_flight(m) == 0; i++) {
    ludo_runtime_poll(rt, 10000);
    usleep(2000);
  }
  ASSERT_EQ(mock_in_flight(m), 1);
  ASSERT_EQ(d->calls, 0);
  return s;
}

static void wait_gone(mock_t *m) {
  int i;
  for (i = 0; i < 500 && mock_in_flight(m) != 0; i++) usleep(2000);
  ASSERT_EQ(mock_in_flight(m), 0); /* the connection was closed */
}

TEST_IMPL(llm_cancel_on_close) {
  mock_t m;
  done_t d = {0};
  ludo_runtime_t *rt;
  ludo_session_t *s;
  mock_start(&m, "{\"rules\": [{\"hang\": true}]}");
  rt = llm_runtime(LUDO_LUA_LLM_SESSIONS);
  s = hanging_call(rt, &m, &d);
  ludo_session_close(s);
  ludo_runtime_poll(rt, 0);
  ASSERT_EQ(d.calls, 1);
  ASSERT_EQ(d.status, LUDO_ECANCELED);
  wait_gone(&m);
  test_rt_free(rt); /* every byte back */
  mock_stop(&m);
}

TEST_IMPL(llm_cancel_on_runtime_free) {
  mock_t m;
  done_t d = {0};
  ludo_runtime_t *rt;
  mock_start(&m, "{\"rules\": [{\"hang\": true}]}");
  rt = llm_runtime(LUDO_LUA_LLM_SESSIONS);
  hanging_call(rt, &m, &d);
  test_rt_free(rt);
  ASSERT_TRUE(d.calls <= 1); /* never twice */
  wait_gone(&m);
  mock_stop(&m);
}

TEST_IMPL(llm_session_usage) {
  mock_t m;
  done_t d = {0};
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  ludo_llm_usage_t u;
  const char *out;
  size_t len;
  char action[1024];
  int n, i;
  mock_start(&m, "{\"rules\": [{\"reply\": \"fine\", \"prompt_tokens\": 9, "
                 "\"completion_tokens\": 4}]}");
  rt = llm_runtime(LUDO_LUA_LLM_SESSIONS);
  env = test_env_load(rt, FIXTURE, NULL);
  s = test_open(env);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_llm_usage(s, &u));
  ASSERT_EQ(u.calls, 0);
  n = chat_action(action, sizeof action, &m, "hi");
  for (i = 0; i < 2; i++) {
    ASSERT_OK(ludo_session_step_async(s, action, (size_t)n, on_done, &d));
    ASSERT_OK(ludo_runtime_run(rt));
  }
  ASSERT_EQ(d.calls, 2);
  ASSERT_OK(d.status);
  ASSERT_TRUE(strstr(d.data, "\"text\":\"fine\"") != NULL);
  ASSERT_OK(ludo_session_llm_usage(s, &u));
  ASSERT_EQ(u.calls, 2);
  ASSERT_EQ(u.failures, 0);
  ASSERT_EQ(u.retries, 0);
  ASSERT_EQ(u.prompt_tokens, 18);
  ASSERT_EQ(u.completion_tokens, 8);
  ASSERT_TRUE(u.latency_ms > 0);
  ASSERT_EQ(ludo_session_llm_usage(NULL, &u), LUDO_EINVAL);
  ASSERT_EQ(ludo_session_llm_usage(s, NULL), LUDO_EINVAL);
  ludo_session_close(s);
  test_rt_free(rt);
  mock_stop(&m);
}

/* Calls policy.ask on a script of a runtime with `flags`; returns the
 * status, the output in `buf`. */
static int script_ask(unsigned flags, mock_t *m, ludo_llm_usage_t *u,
                      char *buf, size_t n) {
  ludo_runtime_t *rt = llm_runtime(flags);
  ludo_script_t *sc = NULL;
  const char *out;
  size_t len;
  char args[256];
  int rc, an = snprintf(args, sizeof args, "[\"%s\", \"hello\"]", m->base);
  rc = ludo_script_open(rt, "policy", FIXTURE, &sc);
  ASSERT_OK(rc);
  rc = ludo_script_call(sc, "ask", args, (size_t)an, &out, &len);
  snprintf(buf, n, "%s", rc == 0 ? out : ludo_script_errmsg(sc));
  ASSERT_OK(ludo_script_llm_usage(sc, u));
  ASSERT_EQ(ludo_script_llm_usage(NULL, u), LUDO_EINVAL);
  ludo_script_free(sc);
  test_rt_free(rt);
  return rc;
}

TEST_IMPL(llm_script_and_gate) {
  mock_t m;
  ludo_llm_usage_t u;
  char buf[1024];
  mock_start(&m, "{\"default\": \"from the script\"}");
  ASSERT_OK(script_ask(LUDO_LUA_LLM_SCRIPTS, &m, &u, buf, sizeof buf));
  ASSERT_TRUE(strstr(buf, "\"text\":\"from the script\"") != NULL);
  ASSERT_EQ(u.calls, 1);
  ASSERT_TRUE(script_ask(LUDO_LUA_LLM_SESSIONS, &m, &u, buf, sizeof buf) != 0);
  ASSERT_TRUE(strstr(buf, "ludo.llm: this Lua may not call LLM APIs") != NULL);
  ASSERT_EQ(u.calls, 0);
  mock_stop(&m);
}

/* A runtime on the host's `loop` (initialised here) whose Lua may call
 * LLMs where `flags` says. */
static ludo_runtime_t *host_loop_runtime(uv_loop_t *loop, unsigned flags) {
  ludo_options_t o;
  ASSERT_OK(uv_loop_init(loop));
  test_options(&o);
  o.loop = loop;
  o.lua_llm = flags;
  o.prewarm = 0;
  o.module_path = ".";
  return test_rt_new(&o);
}

/* A session of the fixture on the host's loop, reset (driving the loop
 * until the reset's callback ran). */
static ludo_session_t *host_loop_session(uv_loop_t *loop, ludo_runtime_t *rt,
                                         done_t *d) {
  ludo_session_t *s = test_open(test_env_load(rt, FIXTURE, NULL));
  int i;
  ASSERT_OK(ludo_session_reset_async(s, NULL, 0, on_done, d));
  for (i = 0; i < 1000 && d->calls < 1; i++) uv_run(loop, UV_RUN_ONCE);
  ASSERT_EQ(d->calls, 1);
  return s;
}

/* Frees the runtime, runs the host's loop until ludo's handles closed,
 * and checks every byte came back. */
static void host_loop_free(uv_loop_t *loop, ludo_runtime_t *rt) {
  ludo_runtime_free(rt);
  while (uv_run(loop, UV_RUN_NOWAIT) != 0) {
  }
  ASSERT_EQ(test_heap.live, 0);
  ASSERT_EQ(test_heap.blocks, 0);
}

/* On a host's loop: curl keeps the connection open for the next call
 * (its socket's poll handle stays); freeing the runtime closes it and
 * gives every byte back. */
TEST_IMPL(llm_host_loop_keeps_connection) {
  mock_t m;
  done_t d = {0};
  uv_loop_t loop;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  char action[1024];
  int n, i, k;
  mock_start(&m, "{\"default\": \"on the host's loop\"}");
  rt = host_loop_runtime(&loop, LUDO_LUA_LLM_SESSIONS);
  s = host_loop_session(&loop, rt, &d);
  n = chat_action(action, sizeof action, &m, "hi");
  for (k = 2; k <= 4; k++) { /* three calls, one connection */
    ASSERT_OK(ludo_session_step_async(s, action, (size_t)n, on_done, &d));
    for (i = 0; i < 100000 && d.calls < k; i++) uv_run(&loop, UV_RUN_ONCE);
    ASSERT_EQ(d.calls, k);
    ASSERT_OK(d.status);
    ASSERT_TRUE(strstr(d.data, "on the host's loop") != NULL);
  }
  /* The mock counts the connection asking too: one of curl's. */
  ASSERT_EQ(mock_stats_field(&m, "connections"), 2);
  ASSERT_EQ(mock_stats_field(&m, "max_connections"), 2);
  ludo_session_close(s);
  host_loop_free(&loop, rt);
  for (i = 0; i < 500 && mock_stats_field(&m, "connections") != 1; i++)
    usleep(2000);
  ASSERT_EQ(mock_stats_field(&m, "connections"), 1); /* curl's is gone */
  ASSERT_OK(uv_loop_close(&loop));
  mock_stop(&m);
}

/* On a host's loop: a client that sent nothing still has the multi
 * handle's timer open when the runtime is freed; the runtime's memory
 * goes when that last handle has closed, never before (the test
 * allocator poisons what is freed: a use after free crashes). */
TEST_IMPL(llm_host_loop_idle_client) {
  uv_loop_t loop;
  ludo_runtime_t *rt;
  ludo_script_t *sc = NULL;
  const char *out, *args = "[\"http://127.0.0.1:9/v1\"]";
  size_t len;
  rt = host_loop_runtime(&loop, LUDO_LUA_LLM_SCRIPTS);
  ASSERT_OK(ludo_script_open(rt, "policy", FIXTURE, &sc));
  ASSERT_OK(ludo_script_call(sc, "idle", args, strlen(args), &out, &len));
  ASSERT_TRUE(strcmp(out, "true") == 0);
  ludo_script_free(sc);
  host_loop_free(&loop, rt);
  ASSERT_OK(uv_loop_close(&loop));
}

/* On a host's loop, the runtime freed with a call in flight (an
 * interrupted ludo eval): the call ends at most once, the transfer's
 * handles close after the free, and the runtime's memory goes with the
 * last of them (poisoned when freed: a use after free crashes). */
TEST_IMPL(llm_host_loop_free_in_flight) {
  mock_t m;
  done_t d = {0};
  uv_loop_t loop;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  char action[1024];
  int n, i;
  mock_start(&m, "{\"rules\": [{\"hang\": true}]}");
  rt = host_loop_runtime(&loop, LUDO_LUA_LLM_SESSIONS);
  s = host_loop_session(&loop, rt, &d);
  n = chat_action(action, sizeof action, &m, "wait");
  ASSERT_OK(ludo_session_step_async(s, action, (size_t)n, on_done, &d));
  for (i = 0; i < 500 && mock_in_flight(&m) == 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(2000);
  }
  ASSERT_EQ(mock_in_flight(&m), 1);
  host_loop_free(&loop, rt);
  ASSERT_TRUE(d.calls <= 2); /* the step's callback never twice */
  ASSERT_OK(uv_loop_close(&loop));
  wait_gone(&m);
  mock_stop(&m);
}
