/* test-workers.c - server groups (ludo_server_group_t, docs/serve-workers.md)
 * through the public API: two servers of one group, each on its own thread
 * with its own loop, runtime and examples/echo, listening on ports of their
 * own so the test chooses which worker a request reaches. The main thread
 * is the client (blocking sockets, one connection per request). Covers
 * the group's argument checks, calls on a session of the other worker
 * (HTTP and JSON-RPC), the shared capacity, and a request for a worker that
 * stopped. The worker runtimes use the C library's allocator: the test's
 * counting allocator keeps one thread's accounts; ASan checks the rest. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "helpers.h"
#include "ludo.h"

/* ---- a worker ------------------------------------------------------------ */

typedef struct {
  ludo_server_group_t *g;
  unsigned index;
  unsigned max_sessions;
  int port;               /* the port it got */
  pthread_t th;
  uv_loop_t loop;
  uv_async_t stop;
  ludo_server_t *sv;
  sem_t ready, stopped;   /* listening; its thread is about to end */
  int failed;
} wk_t;

static void on_handle_closed(uv_handle_t *h) { (void)h; }

static void on_server_closed(void *ud) { ((wk_t *)ud)->sv = NULL; }

static void on_stop(uv_async_t *a) {
  wk_t *w = a->data;
  uv_close((uv_handle_t *)&w->stop, on_handle_closed);
  ludo_server_close(w->sv, on_server_closed, w);
}

static void *wk_main(void *arg) {
  wk_t *w = arg;
  ludo_options_t o;
  ludo_server_options_t so;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env;
  uv_loop_init(&w->loop);
  ludo_options_init(&o);
  o.loop = &w->loop;
  ludo_server_options_init(&so);
  so.group = w->g;
  so.worker = w->index;
  if (w->max_sessions) so.max_sessions = w->max_sessions;
  if (ludo_runtime_new(&rt, &o) != 0 ||
      ludo_env_load(rt, "examples/echo", NULL, &env) != 0 ||
      ludo_server_new(env, &so, &w->sv) != 0 ||
      ludo_server_listen(w->sv, "127.0.0.1", 0) != 0) {
    w->failed = 1;
  } else {
    w->port = ludo_server_port(w->sv);
    uv_async_init(&w->loop, &w->stop, on_stop);
    w->stop.data = w;
  }
  sem_post(&w->ready);
  if (!w->failed) uv_run(&w->loop, UV_RUN_DEFAULT);
  ludo_runtime_free(rt);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&w->loop) != 0) w->failed = 2;
  sem_post(&w->stopped);
  return NULL;
}

static void wk_start(wk_t *w, ludo_server_group_t *g, unsigned index,
                     unsigned max_sessions) {
  memset(w, 0, sizeof *w);
  w->g = g;
  w->index = index;
  w->max_sessions = max_sessions;
  sem_init(&w->ready, 0, 0);
  sem_init(&w->stopped, 0, 0);
  ASSERT_OK(pthread_create(&w->th, NULL, wk_main, w));
  while (sem_wait(&w->ready) != 0) {
  }
  ASSERT_EQ(w->failed, 0);
  ASSERT_GT(w->port, 0);
}

/* Stops the worker and waits for its thread: its server closed, its
 * runtime freed, its loop closed without handles left. */
static void wk_stop(wk_t *w) {
  uv_async_send(&w->stop);
  while (sem_wait(&w->stopped) != 0) {
  }
  ASSERT_OK(pthread_join(w->th, NULL));
  ASSERT_EQ(w->failed, 0);
  ASSERT_NULL(w->sv);
  sem_destroy(&w->ready);
  sem_destroy(&w->stopped);
}

/* ---- a blocking client ------------------------------------------------- */

/* Sends one request (Connection: close) to 127.0.0.1:port with `headers`
 * (lines ending in CRLF, or "") and `body` (JSON, or NULL); reads the whole
 * response into buf. Returns the status. */
static int call(int port, const char *method, const char *path,
                const char *headers, const char *body, char *buf, size_t n) {
  struct sockaddr_in a;
  char req[4096];
  size_t got = 0;
  ssize_t k;
  int fd = socket(AF_INET, SOCK_STREAM, 0), len, status = 0;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof a));
  len = snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                 "\r\n%s", method, path, headers, body ? strlen(body) : 0,
                 body ? body : "");
  ASSERT_EQ(write(fd, req, (size_t)len), len);
  while (got + 1 < n && (k = read(fd, buf + got, n - 1 - got)) > 0)
    got += (size_t)k;
  buf[got] = '\0';
  close(fd);
  sscanf(buf, "HTTP/1.1 %d", &status);
  return status;
}

/* The value of header `name` in a response, copied into out. */
static void header(const char *resp, const char *name, char *out, size_t n) {
  const char *p = strstr(resp, name);
  size_t k = 0;
  ASSERT_NOT_NULL(p);
  p += strlen(name) + 2; /* ": " */
  while (p[k] && p[k] != '\r' && k + 1 < n) k++;
  memcpy(out, p, k);
  out[k] = '\0';
}

/* The string value of field `key` in a response's JSON body, copied into
 * out. */
static void json_field(const char *resp, const char *key, char *out,
                       size_t n) {
  char pat[64];
  const char *p;
  size_t k = 0;
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  p = strstr(resp, pat);
  ASSERT_NOT_NULL(p);
  p += strlen(pat);
  while (p[k] && p[k] != '"' && k + 1 < n) k++;
  memcpy(out, p, k);
  out[k] = '\0';
}

/* ---- tests ------------------------------------------------------------- */

/* The group's checks: its size, each worker index once and in range, an
 * environment declared concurrent = false; and the reuseport option of a
 * lone server. */
TEST_IMPL(workers_group_checks) {
  ludo_server_group_t *g;
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_env_t *single = test_env_load(rt, "spec/fixtures/serve/single", NULL);
  ludo_server_options_t so;
  ludo_server_t *a, *b;
  ASSERT_ERR(ludo_server_group_new(0, &g), LUDO_EINVAL);
  ASSERT_ERR(ludo_server_group_new(LUDO_SERVER_MAX_WORKERS + 1, &g),
             LUDO_EINVAL);
  ASSERT_ERR(ludo_server_group_new(2, NULL), LUDO_EINVAL);
  ASSERT_OK(ludo_server_group_new(2, &g));
  ludo_server_options_init(&so);
  so.group = g;
  so.worker = 2;
  ASSERT_ERR(ludo_server_new(env, &so, &a), LUDO_EINVAL);
  ASSERT_NULL(a);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "worker 2: out of the "
                      "group's range");
  so.worker = 1;
  ASSERT_OK(ludo_server_new(env, &so, &a));
  ASSERT_ERR(ludo_server_new(env, &so, &b), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "taken by another server");
  so.worker = 0;
  so.max_sessions = 1;
  ASSERT_ERR(ludo_server_new(single, &so, &b), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "cannot be served by 2 "
                      "workers");
  /* the index comes back when its server closes */
  ludo_server_close(a, NULL, NULL);
  ASSERT_OK(ludo_runtime_run(rt));
  so.worker = 1;
  so.max_sessions = 0;
  ASSERT_OK(ludo_server_new(env, &so, &a));
  ludo_server_close(a, NULL, NULL);
  ASSERT_OK(ludo_runtime_run(rt));
  ludo_server_group_free(g);
  /* lone servers share a port only when both ask for it (reuseport) */
  ludo_server_options_init(&so);
  ASSERT_OK(ludo_server_new(env, &so, &a));
  ASSERT_OK(ludo_server_new(env, &so, &b));
  ASSERT_OK(ludo_server_listen(a, "127.0.0.1", 0));
  ASSERT_ERR(ludo_server_listen(b, "127.0.0.1", ludo_server_port(a)),
             LUDO_EIO);
  ludo_server_close(a, NULL, NULL);
  ludo_server_close(b, NULL, NULL);
  so.reuseport = 1;
  ASSERT_OK(ludo_server_new(env, &so, &a));
  ASSERT_OK(ludo_server_new(env, &so, &b));
  ASSERT_OK(ludo_server_listen(a, "127.0.0.1", 0));
  ASSERT_OK(ludo_server_listen(b, "127.0.0.1", ludo_server_port(a)));
  ASSERT_EQ(ludo_server_port(b), ludo_server_port(a));
  ludo_server_close(a, NULL, NULL);
  ludo_server_close(b, NULL, NULL);
  ASSERT_OK(ludo_runtime_run(rt));
  test_rt_free(rt);
}

/* A session of worker 0 used through worker 1: X-Session-Id calls and
 * JSON-RPC tools/call and close run on worker 0 and answer through 1. */
TEST_IMPL(workers_forward_calls) {
  ludo_server_group_t *g;
  wk_t w0, w1;
  char r[8192], sid[64], h[512];
  ASSERT_OK(ludo_server_group_new(2, &g));
  wk_start(&w0, g, 0, 0);
  wk_start(&w1, g, 1, 0);
  ASSERT_EQ(call(w0.port, "POST", "/reset", "", "{}", r, sizeof r), 200);
  header(r, "X-Session-Id", sid, sizeof sid);
  ASSERT_TRUE(strncmp(sid, "w0-", 3) == 0);
  snprintf(h, sizeof h, "X-Session-Id: %s\r\n", sid);
  ASSERT_EQ(call(w1.port, "POST", "/step", h,
                 "{\"action\":{\"message\":\"through 1\"}}", r, sizeof r),
            200);
  ASSERT_STR_CONTAINS(r, "\"echoed_message\":\"through 1\"");
  ASSERT_STR_CONTAINS(r, sid); /* the X-Session-Id header, from worker 0 */
  ASSERT_EQ(call(w1.port, "GET", "/state", h, NULL, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"step_count\":1");
  ASSERT_EQ(call(w1.port, "POST", "/step", h, "{\"action\":{\"message\":1}}",
                 r, sizeof r), 422); /* worker 0's refusal, as it is */
  /* JSON-RPC on the same session, through worker 1 */
  snprintf(h, sizeof h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":"
           "\"tools/call\",\"params\":{\"name\":\"echo_message\","
           "\"session_id\":\"%s\",\"arguments\":{\"message\":\"rpc\"}}}",
           sid);
  ASSERT_EQ(call(w1.port, "POST", "/mcp", "", h, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"id\":4,\"result\":");
  ASSERT_STR_CONTAINS(r, "\"data\":\"rpc\"");
  snprintf(h, sizeof h, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":"
           "\"openenv/session/close\",\"params\":{\"session_id\":\"%s\"}}",
           sid);
  ASSERT_EQ(call(w1.port, "POST", "/mcp", "", h, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"closed\":true");
  ASSERT_EQ(call(w1.port, "POST", "/mcp", "", h, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"code\":-32602");
  ASSERT_STR_CONTAINS(r, "Unknown session_id");
  /* both workers count in one set of metrics */
  ASSERT_EQ(call(w0.port, "GET", "/metrics", "", NULL, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "ludo_worker_forwarded_total{worker=\"0\"} 0\n");
  ASSERT_STR_CONTAINS(r, "ludo_worker_forwarded_total{worker=\"1\"} 6\n");
  ASSERT_STR_CONTAINS(r, "ludo_sessions_open 0\n");
  wk_stop(&w1);
  wk_stop(&w0);
  ludo_server_group_free(g);
}

/* One session count for the group: with max_sessions 1, a session on
 * worker 0 fills worker 1 too. An MCP session stays until closed; an idle
 * HTTP session of the other worker gives its slot to a newcomer. */
TEST_IMPL(workers_shared_capacity) {
  ludo_server_group_t *g;
  wk_t w0, w1;
  char r[8192], sid[64], body[512], h[512];
  ASSERT_OK(ludo_server_group_new(2, &g));
  wk_start(&w0, g, 0, 1);
  wk_start(&w1, g, 1, 1);
  ASSERT_EQ(call(w0.port, "POST", "/mcp", "", "{\"jsonrpc\":\"2.0\",\"id\""
                 ":1,\"method\":\"openenv/session/create\"}", r, sizeof r),
            200);
  json_field(r, "session_id", sid, sizeof sid);
  ASSERT_EQ(call(w1.port, "POST", "/reset", "", "{}", r, sizeof r), 503);
  ASSERT_STR_CONTAINS(r, "Server at capacity: 1/1 sessions active.");
  snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
           "\"openenv/session/close\",\"params\":{\"session_id\":\"%s\"}}",
           sid);
  ASSERT_EQ(call(w1.port, "POST", "/mcp", "", body, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"closed\":true");
  ASSERT_EQ(call(w0.port, "POST", "/reset", "", "{}", r, sizeof r), 200);
  header(r, "X-Session-Id", sid, sizeof sid);
  ASSERT_TRUE(strncmp(sid, "w0-", 3) == 0);
  ASSERT_EQ(call(w1.port, "POST", "/reset", "", "{}", r, sizeof r), 200);
  header(r, "X-Session-Id", body, sizeof body);
  ASSERT_TRUE(strncmp(body, "w1-", 3) == 0);
  /* forwarded after the message that closes it: gone, saying why */
  snprintf(h, sizeof h, "X-Session-Id: %s\r\n", sid);
  ASSERT_EQ(call(w1.port, "POST", "/step", h,
                 "{\"action\":{\"message\":\"late\"}}", r, sizeof r), 404);
  ASSERT_STR_CONTAINS(r, "closed to make room for other sessions");
  ASSERT_EQ(call(w1.port, "GET", "/metrics", "", NULL, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "ludo_sessions_open 1\n");
  ASSERT_STR_CONTAINS(r, "ludo_sessions_reclaimed_total 1\n");
  wk_stop(&w0);
  wk_stop(&w1);
  ludo_server_group_free(g);
}

/* A call for a worker that stopped is refused at once, saying so; its
 * sessions are gone with it. */
TEST_IMPL(workers_owner_stopped) {
  ludo_server_group_t *g;
  wk_t w0, w1;
  char r[8192], sid[64], h[512];
  ASSERT_OK(ludo_server_group_new(2, &g));
  wk_start(&w0, g, 0, 0);
  wk_start(&w1, g, 1, 0);
  ASSERT_EQ(call(w0.port, "POST", "/reset", "", "{}", r, sizeof r), 200);
  header(r, "X-Session-Id", sid, sizeof sid);
  wk_stop(&w0);
  snprintf(h, sizeof h, "X-Session-Id: %s\r\n", sid);
  ASSERT_EQ(call(w1.port, "POST", "/step", h,
                 "{\"action\":{\"message\":\"late\"}}", r, sizeof r), 503);
  ASSERT_STR_CONTAINS(r, "lives on worker 0, which is not running");
  snprintf(h, sizeof h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
           "\"tools/call\",\"params\":{\"name\":\"echo_message\","
           "\"session_id\":\"%s\",\"arguments\":{\"message\":\"x\"}}}", sid);
  ASSERT_EQ(call(w1.port, "POST", "/mcp", "", h, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "\"code\":-32000");
  ASSERT_STR_CONTAINS(r, "which is not running");
  ASSERT_EQ(call(w1.port, "GET", "/metrics", "", NULL, r, sizeof r), 200);
  ASSERT_STR_CONTAINS(r, "ludo_sessions_open 0\n");
  wk_stop(&w1);
  ludo_server_group_free(g);
}
