/* test-http.c - HTTP/1.1 server connections (runtime/net/http.c) driven by
 * byte scripts over the memory transport: requests split at every byte,
 * pipelining and the order of responses, keep-alive and close, malformed
 * and oversized input, 100-continue, timeouts fired by hand, requests
 * aborted by the connection's end, the response writer's checks,
 * backpressure, and allocation failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netmem.h"

/* A connection on the memory transport with `o` (NULL: defaults). */
static ludo__http_conn_t *http_on(mem_t *m, ludo__core_t *core,
                                  const ludo__http_options_t *o, rec_t *r) {
  ludo__http_conn_t *hc = NULL;
  mem_init(m, core, o ? o->write_high_water : 0);
  ASSERT_OK(ludo__http_conn_new(core, &m->conn, o, &rec_handler, r, &hc));
  ASSERT_NOT_NULL(hc);
  return hc;
}

/* Ends a connection from the test's side (the peer leaves) and completes
 * the transport's close. */
static void hang_up(mem_t *m) {
  ludo__net_conn_eof(&m->conn);
  if (m->close_req == 0) FAIL("the connection did not close at EOF");
  mem_finish(m);
  mem_free(m);
}

static const char post_req[] =
    "POST /step?session=7&x=%20y HTTP/1.1\r\n"
    "Host: localhost:8000\r\n"
    "Content-Type: application/json\r\n"
    "X-Empty:\r\n"
    "X-Spaces:   padded value  \r\n"
    "Content-Length: 25\r\n"
    "\r\n"
    "{\"action\":{\"text\":\"hi\"}}\n";

/* What the handler must see of post_req. */
static void check_post(rec_t *r, int i) {
  ASSERT_STR_EQ(r->method[i], "POST");
  ASSERT_STR_EQ(r->target[i], "/step?session=7&x=%20y");
  ASSERT_STR_EQ(r->path[i], "/step");
  ASSERT_STR_EQ(r->query[i], "session=7&x=%20y");
  ASSERT_STR_EQ(r->body[i], "{\"action\":{\"text\":\"hi\"}}\n");
  ASSERT_UINT_EQ(r->body_len[i], 25);
  ASSERT_UINT_EQ(r->nheaders[i], 5);
  ASSERT_EQ(r->version[i], 11);
  ASSERT_EQ(r->upgrade[i], 0);
}

TEST_IMPL(http_request_fields) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  ludo__http_req_t *req;
  ludo__http_header_t h;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  mem_feed(&m, post_req, sizeof post_req - 1);
  ASSERT_EQ(r.n, 1);
  check_post(&r, 0);
  req = r.req[0];
  ASSERT_STR_EQ(ludo__http_req_header(req, "content-type"),
                "application/json");
  ASSERT_STR_EQ(ludo__http_req_header(req, "HOST"), "localhost:8000");
  ASSERT_STR_EQ(ludo__http_req_header(req, "x-empty"), "");
  ASSERT_STR_EQ(ludo__http_req_header(req, "x-spaces"), "padded value");
  ASSERT_NULL(ludo__http_req_header(req, "accept"));
  h = ludo__http_req_header_at(req, 4);
  ASSERT_STR_EQ(h.name, "Content-Length");
  ASSERT_STR_EQ(h.value, "25");
  h = ludo__http_req_header_at(req, 5);
  ASSERT_NULL(h.name);
  /* Absolute-form and asterisk-form targets. */
  rec_answer(&r, 0);
  MEM_FEED(&m, "GET http://example.com:80/a/b?c HTTP/1.1\r\nHost: e\r\n\r\n"
               "OPTIONS * HTTP/1.1\r\nHost: e\r\n\r\n"
               "GET http://example.com HTTP/1.1\r\nHost: e\r\n\r\n");
  ASSERT_EQ(r.n, 2); /* one at a time */
  ASSERT_STR_EQ(r.path[1], "/a/b");
  ASSERT_STR_EQ(r.query[1], "c");
  rec_answer(&r, 1);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 3);
  ASSERT_STR_EQ(r.method[2], "OPTIONS");
  ASSERT_STR_EQ(r.path[2], "*");
  ASSERT_STR_EQ(r.query[2], "");
  rec_answer(&r, 2);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 4);
  ASSERT_STR_EQ(r.path[3], "/");
  rec_answer(&r, 3);
  ASSERT_EQ(m.close_req, 0);
  hang_up(&m);
  ASSERT_EQ(r.aborted, 0);
  net_core_free(&core);
}

/* Every split of a request in two reads, and one byte per read, for a
 * Content-Length body and a chunked one. */
TEST_IMPL(http_split_reads) {
  static const char chunked[] =
      "POST /step?session=7&x=%20y HTTP/1.1\r\n"
      "Host: localhost:8000\r\n"
      "Content-Type: application/json\r\n"
      "X-Empty:\r\n"
      "X-Spaces:   padded value  \r\n"
      "Transfer-Encoding: chunked\r\n"
      "\r\n"
      "a\r\n{\"action\":\r\n"
      "f;ext=1\r\n{\"text\":\"hi\"}}\n\r\n"
      "0\r\nX-Trailer: t\r\n\r\n";
  const char *scripts[2] = {post_req, chunked};
  size_t lens[2] = {sizeof post_req - 1, sizeof chunked - 1};
  ludo__core_t core;
  int s;
  net_core_init(&core);
  for (s = 0; s < 2; s++) {
    size_t i, n = lens[s];
    for (i = 0; i <= n; i++) {
      mem_t m;
      rec_t r;
      memset(&r, 0, sizeof r);
      r.answer_now = 1;
      http_on(&m, &core, NULL, &r);
      if (i > 0) mem_feed(&m, scripts[s], i);
      ASSERT_EQ(r.n, i == n ? 1 : 0);
      if (i < n) mem_feed(&m, scripts[s] + i, n - i);
      ASSERT_EQ(r.n, 1);
      check_post(&r, 0);
      ASSERT_STR_CONTAINS(mem_take(&m, NULL), "\r\n\r\n0:/step");
      hang_up(&m);
    }
    {
      mem_t m;
      rec_t r;
      memset(&r, 0, sizeof r);
      r.answer_now = 1;
      http_on(&m, &core, NULL, &r);
      for (i = 0; i < n; i++) {
        ASSERT_EQ(r.n, 0);
        mem_feed(&m, scripts[s] + i, 1);
      }
      ASSERT_EQ(r.n, 1);
      check_post(&r, 0);
      hang_up(&m);
    }
  }
  net_core_free(&core);
}

/* A whole response, byte for byte (Date aside). */
TEST_IMPL(http_response_bytes) {
  static const ludo__http_header_t h[2] = {
      {"Content-Type", "application/json"}, {"X-Request-Id", "r1"}};
  ludo__core_t core;
  mem_t m;
  rec_t r;
  char *out;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 1);
  ASSERT_OK(ludo__http_respond(r.req[0], 200, h, 2,
                               "{\"status\":\"healthy\"}", 20));
  out = (char *)mem_take(&m, NULL);
  ASSERT_STR_CONTAINS(out, "\r\nDate: ");
  ASSERT_STR_CONTAINS(out, " GMT\r\n");
  ASSERT_STR_EQ(net_strip_date(out),
                "HTTP/1.1 200 OK\r\n"
                "Content-Type: application/json\r\n"
                "X-Request-Id: r1\r\n"
                "Content-Length: 20\r\n"
                "\r\n"
                "{\"status\":\"healthy\"}");
  /* HEAD: the length of the body, not the body. */
  MEM_FEED(&m, "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 2);
  ASSERT_OK(ludo__http_respond(r.req[1], 200, NULL, 0, "12345", 5));
  out = (char *)mem_take(&m, NULL);
  ASSERT_STR_EQ(net_strip_date(out),
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
  /* 204: no length, no body; a Date of the handler's is kept. */
  MEM_FEED(&m, "DELETE /x HTTP/1.1\r\nHost: x\r\n\r\n");
  {
    ludo__http_header_t d = {"Date", "Sun, 06 Nov 1994 08:49:37 GMT"};
    ASSERT_OK(ludo__http_respond(r.req[2], 204, &d, 1, NULL, 0));
  }
  ASSERT_STR_EQ(mem_take(&m, NULL),
                "HTTP/1.1 204 No Content\r\n"
                "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n");
  /* A status without a reason phrase. */
  MEM_FEED(&m, "GET /y HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_OK(ludo__http_respond(r.req[3], 299, NULL, 0, NULL, 0));
  out = (char *)mem_take(&m, NULL);
  ASSERT_STR_EQ(net_strip_date(out),
                "HTTP/1.1 299 \r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(m.close_req, 0);
  hang_up(&m);
  net_core_free(&core);
}

/* The response writer refuses what would break the framing or split a
 * response; the request stays unanswered and can be answered after. */
TEST_IMPL(http_respond_checks) {
  static const ludo__http_header_t bad[] = {
      {"Bad Name", "v"},           {"X", "a\r\nInjected: 1"},
      {"Content-Length", "3"},     {"transfer-encoding", "chunked"},
      {"Connection", "keep-alive"}, {"", "v"},
      {"X", "bell\a"}};
  ludo__core_t core;
  mem_t m;
  rec_t r;
  size_t i;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 1);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ASSERT_ERR(ludo__http_respond(r.req[0], 200, &bad[i], 1, NULL, 0),
               LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 101, NULL, 0, NULL, 0),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 199, NULL, 0, NULL, 0),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 600, NULL, 0, NULL, 0),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 204, NULL, 0, "x", 1),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 304, NULL, 0, "x", 1),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_respond(r.req[0], 200, NULL, 0, NULL, 3),
             LUDO_EINVAL);
  ASSERT_ERR(ludo__http_switch(r.req[0], "x", 1, NULL, NULL), LUDO_EINVAL);
  ASSERT_UINT_EQ(m.out_len, 0);
  rec_answer(&r, 0);
  ASSERT_STR_CONTAINS(mem_take(&m, NULL), "HTTP/1.1 200 OK\r\n");
  hang_up(&m);
  net_core_free(&core);
}

/* Pipelined requests: at most max_pipelined with the handler, answers in
 * any order, responses in the order of the requests. */
TEST_IMPL(http_pipelining) {
  static const char three[] = "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n";
  ludo__core_t core;
  ludo__http_options_t o;
  mem_t m;
  rec_t r;
  const char *out, *a, *b, *c;
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.max_pipelined = 2;
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  mem_feed(&m, three, sizeof three - 1);
  ASSERT_EQ(r.n, 2); /* the third waits */
  ASSERT_STR_EQ(r.path[0], "/1");
  ASSERT_STR_EQ(r.path[1], "/2");
  ASSERT_EQ(m.timer_ms, 0); /* no timeout while the handler works */
  rec_answer(&r, 1);       /* the second first: it waits for the first */
  ASSERT_UINT_EQ(m.out_len, 0);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 3);       /* a place was free */
  ASSERT_STR_EQ(r.path[2], "/3");
  rec_answer(&r, 2);
  ASSERT_UINT_EQ(m.out_len, 0);
  rec_answer(&r, 0);       /* now all three go, in order */
  out = mem_take(&m, NULL);
  a = strstr(out, "0:/1");
  b = strstr(out, "1:/2");
  c = strstr(out, "2:/3");
  ASSERT_NOT_NULL(a);
  ASSERT_NOT_NULL(b);
  ASSERT_NOT_NULL(c);
  ASSERT_TRUE(a < b && b < c);
  ASSERT_EQ(m.close_req, 0);
  ASSERT_EQ(m.timer_ms, (long long)o.idle_timeout_ms);
  hang_up(&m);
  net_core_free(&core);
}

/* With the default options the handler holds one request of a connection
 * at a time (RFC 9112 9.3.2: pipelined requests that are not safe are not
 * processed in parallel): the next reaches it once the one before is
 * answered, from the loop, and the responses go in order. */
TEST_IMPL(http_pipelining_one_at_a_time) {
  static const char three[] =
      "POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
      "POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
      "GET /state HTTP/1.1\r\nHost: x\r\n\r\n";
  ludo__core_t core;
  mem_t m;
  rec_t r;
  const char *out, *a, *b, *c;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  mem_feed(&m, three, sizeof three - 1);
  ASSERT_EQ(r.n, 1); /* the others wait for its answer */
  ASSERT_STR_EQ(r.path[0], "/step");
  net_core_pump(&core);
  ASSERT_EQ(r.n, 1);
  rec_answer(&r, 0);
  ASSERT_EQ(r.n, 1); /* never from inside the answer */
  net_core_pump(&core);
  ASSERT_EQ(r.n, 2);
  ASSERT_STR_EQ(r.path[1], "/step");
  rec_answer(&r, 1);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 3);
  ASSERT_STR_EQ(r.path[2], "/state");
  rec_answer(&r, 2);
  out = mem_take(&m, NULL);
  a = strstr(out, "0:/step");
  b = strstr(out, "1:/step");
  c = strstr(out, "2:/state");
  ASSERT_NOT_NULL(a);
  ASSERT_NOT_NULL(b);
  ASSERT_NOT_NULL(c);
  ASSERT_TRUE(a < b && b < c);
  hang_up(&m);
  ASSERT_EQ(r.aborted, 0);
  net_core_free(&core);
}

/* The output budget shared by connections (conn.h): a pipelining client
 * whose earlier response waits unsent, when its next one would take the
 * budget past its bound, loses the connection; one whose responses went
 * out answers as usual. */
TEST_IMPL(http_output_budget) {
  static const char two[] = "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
                            "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n";
  static const ludo__http_header_t ct = {"Content-Type", "text/plain"};
  ludo__core_t core;
  ludo__net_budget_t b;
  ludo__http_options_t o;
  mem_t m;
  rec_t r;
  char *big = malloc(100 << 10);
  int round;
  ludo__http_options_init(&o);
  o.max_pipelined = 2; /* both with the handler at once */
  ASSERT_NOT_NULL(big);
  memset(big, 'b', 100 << 10);
  atomic_init(&b.used, 0);
  atomic_init(&b.max, (size_t)150 << 10);
  net_core_init(&core);
  for (round = 0; round < 2; round++) { /* 0: the peer reads; 1: not */
    memset(&r, 0, sizeof r);
    http_on(&m, &core, &o, &r);
    ludo__net_conn_set_budget(&m.conn, &b);
    mem_feed(&m, two, sizeof two - 1);
    ASSERT_EQ(r.n, 2);
    ASSERT_OK(ludo__http_respond(r.req[0], 200, &ct, 1, big, 100 << 10));
    ASSERT_UINT_GT(atomic_load(&b.used), (size_t)100 << 10); /* counted */
    if (round == 0) mem_ack(&m);
    ASSERT_OK(ludo__http_respond(r.req[1], 200, &ct, 1, big, 100 << 10));
    if (round == 0) {
      ASSERT_EQ(m.close_req, 0);
      mem_ack(&m);
      ASSERT_UINT_EQ(atomic_load(&b.used), 0);
      hang_up(&m);
    } else {
      ASSERT_EQ(m.close_req, 2); /* aborted: the second never queued */
      mem_finish(&m);
      mem_free(&m);
      ASSERT_UINT_EQ(atomic_load(&b.used), 0);
    }
  }
  free(big);
  net_core_free(&core);
}

/* Connection: close, HTTP/1.0 with and without keep-alive. */
TEST_IMPL(http_keep_alive) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  const char *out;
  net_core_init(&core);
  /* Connection: close: the response says so, the connection closes after
   * it, and what came after the request is not parsed. */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
               "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 1);
  ASSERT_EQ(m.close_req, 0);
  rec_answer(&r, 0);
  out = mem_take(&m, NULL);
  ASSERT_STR_CONTAINS(out, "Connection: close\r\n");
  ASSERT_EQ(m.close_req, 1); /* graceful: after the response */
  net_core_pump(&core);
  ASSERT_EQ(r.n, 1);
  mem_finish(&m);
  mem_free(&m);
  /* HTTP/1.0: closes unless asked to keep alive. */
  memset(&r, 0, sizeof r);
  r.answer_now = 1;
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET /c HTTP/1.0\r\n\r\n");
  ASSERT_EQ(r.version[0], 10);
  ASSERT_STR_CONTAINS(mem_take(&m, NULL), "Connection: close\r\n");
  ASSERT_EQ(m.close_req, 1);
  mem_finish(&m);
  mem_free(&m);
  memset(&r, 0, sizeof r);
  r.answer_now = 1;
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET /d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_STR_CONTAINS(mem_take(&m, NULL), "Connection: keep-alive\r\n");
  ASSERT_EQ(m.close_req, 0);
  MEM_FEED(&m, "GET /e HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(r.n, 2);
  hang_up(&m);
  net_core_free(&core);
}

/* Feeds `req` to a fresh connection and checks that the handler never
 * sees it and the answer is `status` with Connection: close and a close
 * of the connection. */
static void expect_error(ludo__core_t *core, const ludo__http_options_t *o,
                         const char *req, size_t n, int status) {
  mem_t m;
  rec_t r;
  char line[64];
  const char *out;
  memset(&r, 0, sizeof r);
  r.answer_now = 1;
  http_on(&m, core, o, &r);
  mem_feed(&m, req, n);
  ASSERT_EQ(r.n, 0);
  ASSERT_EQ(r.refused, 1); /* the handler hears of it (metrics) */
  ASSERT_EQ(r.refused_status, status);
  out = mem_take(&m, NULL);
  snprintf(line, sizeof line, "HTTP/1.1 %d ", status);
  if (strncmp(out, line, strlen(line)) != 0)
    FAIL("for %.60s: want %d, got: %.200s", req, status, out);
  ASSERT_STR_CONTAINS(out, "Connection: close\r\n");
  ASSERT_STR_CONTAINS(out, "Content-Type: text/plain; charset=utf-8\r\n");
  ASSERT_EQ(m.close_req, 1);
  ASSERT_EQ(m.paused, 0); /* the linger reads and discards */
  /* More bytes are dropped, not parsed. */
  MEM_FEED(&m, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 0);
  mem_finish(&m);
  mem_free(&m);
}

#define EXPECT_ERROR(core, o, lit, status) \
  expect_error((core), (o), (lit), sizeof(lit) - 1, (status))

TEST_IMPL(http_bad_requests) {
  ludo__core_t core;
  net_core_init(&core);
  EXPECT_ERROR(&core, NULL, "GARBAGE\r\n\r\n", 400);
  EXPECT_ERROR(&core, NULL, "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
               400);
  EXPECT_ERROR(&core, NULL,
               "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
               400);
  EXPECT_ERROR(&core, NULL,
               "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
               "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               400);
  EXPECT_ERROR(&core, NULL,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               "\r\nzz\r\n",
               400);
  EXPECT_ERROR(&core, NULL, "GET / HTTP/1.1\r\n\r\n", 400); /* no Host */
  EXPECT_ERROR(&core, NULL, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
               400);
  EXPECT_ERROR(&core, NULL, "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  EXPECT_ERROR(&core, NULL, "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n",
               400);
  EXPECT_ERROR(&core, NULL, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
  EXPECT_ERROR(&core, NULL, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
               400); /* TLS on a plain port */
  net_core_free(&core);
}

/* Error responses wait for the responses before them. */
TEST_IMPL(http_error_after_pipelined) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  const char *out;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nNONSENSE\r\n\r\n");
  ASSERT_EQ(r.n, 1);
  ASSERT_UINT_EQ(m.out_len, 0); /* the 400 waits for /ok */
  ASSERT_EQ(m.close_req, 0);
  rec_answer(&r, 0);
  net_core_pump(&core); /* the next request is parsed: a 400 */
  out = mem_take(&m, NULL);
  ASSERT_TRUE(strstr(out, "0:/ok") != NULL);
  ASSERT_TRUE(strstr(out, "HTTP/1.1 400 Bad Request") > strstr(out, "0:/ok"));
  ASSERT_EQ(m.close_req, 1);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

TEST_IMPL(http_limits) {
  ludo__core_t core;
  ludo__http_options_t o;
  char *big;
  size_t n;
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.max_header_bytes = 256;
  o.max_headers = 4;
  o.max_body_bytes = 10;
  big = malloc(4096);
  /* A header field past the limit: 431, also when it comes byte by byte
   * (checked on each read, before the end of the headers). */
  n = (size_t)snprintf(big, 4096, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %0300d"
                       "\r\n\r\n", 7);
  expect_error(&core, &o, big, n, 431);
  {
    mem_t m;
    rec_t r;
    size_t i;
    memset(&r, 0, sizeof r);
    http_on(&m, &core, &o, &r);
    for (i = 0; i < 200 && m.close_req == 0; i++) mem_feed(&m, big + i, 1);
    ASSERT_EQ(m.close_req, 0); /* 200 bytes: within the limit */
    for (; i < n && m.close_req == 0; i++) mem_feed(&m, big + i, 1);
    ASSERT_TRUE(i <= 258); /* refused as the limit passed */
    ASSERT_STR_CONTAINS(mem_take(&m, NULL), "HTTP/1.1 431 ");
    ASSERT_EQ(r.n, 0);
    mem_finish(&m);
    mem_free(&m);
  }
  /* Whitespace counts too. */
  n = (size_t)snprintf(big, 4096, "GET / HTTP/1.1\r\nHost: x\r\nX: a%300s"
                       "b\r\n\r\n", "");
  expect_error(&core, &o, big, n, 431);
  /* A target alone past the limit: 414. */
  memset(big, 'a', 4096);
  memcpy(big, "GET /", 5);
  memcpy(big + 400, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
  expect_error(&core, &o, big, 423, 414);
  /* More fields than allowed: 431. */
  EXPECT_ERROR(&core, &o,
               "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n"
               "\r\n",
               431);
  /* A declared body past the limit: 413 before any of it is read. */
  EXPECT_ERROR(&core, &o,
               "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
               413);
  /* A chunked body growing past it: 413. */
  EXPECT_ERROR(&core, &o,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               "\r\n8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n",
               413);
  /* A chunk whose size line alone takes it past the limit: 413 at once,
   * its payload not awaited (a huge size, and one past what is left). */
  EXPECT_ERROR(&core, &o,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               "\r\n1000001\r\n",
               413);
  EXPECT_ERROR(&core, &o,
               "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               "\r\n6\r\n123456\r\n5\r\n",
               413);
  /* Chunks that fill it exactly: served. */
  {
    mem_t m;
    rec_t r;
    memset(&r, 0, sizeof r);
    r.answer_now = 1;
    http_on(&m, &core, &o, &r);
    MEM_FEED(&m, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                 "\r\n\r\n6\r\n012345\r\n4\r\n6789\r\n0\r\n\r\n");
    ASSERT_EQ(r.n, 1);
    ASSERT_STR_EQ(r.body[0], "0123456789");
    hang_up(&m);
  }
  /* Exactly at the limits: served. */
  {
    mem_t m;
    rec_t r;
    memset(&r, 0, sizeof r);
    r.answer_now = 1;
    http_on(&m, &core, &o, &r);
    MEM_FEED(&m, "POST / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n"
                 "Content-Length: 10\r\n\r\n0123456789");
    ASSERT_EQ(r.n, 1);
    ASSERT_STR_EQ(r.body[0], "0123456789");
    hang_up(&m);
  }
  free(big);
  net_core_free(&core);
}

TEST_IMPL(http_expect_continue) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  r.answer_now = 1;
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
               "Content-Length: 4\r\n\r\n");
  ASSERT_STR_EQ(mem_take(&m, NULL), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_EQ(r.n, 0);
  MEM_FEED(&m, "data");
  ASSERT_EQ(r.n, 1);
  ASSERT_STR_EQ(r.body[0], "data");
  ASSERT_STR_CONTAINS(mem_take(&m, NULL), "HTTP/1.1 200 OK\r\n");
  /* Not with a response before it pending. */
  r.answer_now = 0;
  MEM_FEED(&m, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
               "PUT /g HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
               "Content-Length: 4\r\n\r\n");
  ASSERT_EQ(r.n, 2);
  ASSERT_UINT_EQ(m.out_len, 0);
  hang_up(&m);
  ASSERT_EQ(r.aborted, 1);
  net_core_free(&core);
}

/* The connection answered 408 and closed, no request handed over. */
static void expect_408(mem_t *m, const rec_t *r) {
  ASSERT_STR_CONTAINS(mem_take(m, NULL), "HTTP/1.1 408 Request Timeout\r\n");
  ASSERT_EQ(m->close_req, 1);
  ASSERT_EQ(r->n, 0);
  mem_finish(m);
  mem_free(m);
}

/* Slow clients: the header, body and idle timeouts, fired by hand. */
TEST_IMPL(http_timeouts) {
  ludo__core_t core;
  ludo__http_options_t o;
  mem_t m;
  rec_t r;
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.header_timeout_ms = 111;
  o.body_timeout_ms = 222;
  o.idle_timeout_ms = 333;
  /* Idle: closed without a word, at once (nothing to send). */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  ASSERT_EQ(m.timer_ms, 333);
  mem_fire(&m);
  ASSERT_EQ(m.close_req, 2);
  ASSERT_UINT_EQ(m.out_len, 0);
  mem_finish(&m);
  mem_free(&m);
  /* Headers too slow: 408. Reads do not extend the header deadline. */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  MEM_FEED(&m, "GET / HTTP/1.1\r\n");
  ASSERT_EQ(m.timer_ms, 111);
  m.timer_ms = 1; /* a read must not re-arm it */
  MEM_FEED(&m, "Host: x\r\n");
  ASSERT_EQ(m.timer_ms, 1);
  mem_fire(&m);
  expect_408(&m, &r);
  /* Body too slow: 408; each read re-arms the body timeout. */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  MEM_FEED(&m, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nab");
  ASSERT_EQ(m.timer_ms, 222);
  m.timer_ms = 1;
  MEM_FEED(&m, "cd");
  ASSERT_EQ(m.timer_ms, 222);
  mem_fire(&m);
  expect_408(&m, &r);
  /* A body trickled a byte per gap: reads re-arm the gap only up to the
   * whole body's end (a gap, plus its length at 8 KiB/s), then 408. */
  o.body_timeout_ms = 2000; /* room for a loaded machine's scheduling */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  uv_update_time(core.loop);
  MEM_FEED(&m, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\na");
  ASSERT_EQ(m.timer_ms, 2000);
  uv_sleep(300);
  uv_update_time(core.loop);
  MEM_FEED(&m, "b");
  ASSERT_TRUE(m.timer_ms > 0 && m.timer_ms <= 2001 - 300);
  uv_sleep(1800);
  uv_update_time(core.loop);
  MEM_FEED(&m, "c");
  expect_408(&m, &r);
  o.body_timeout_ms = 222;
  /* After a response the idle timer runs again. */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  MEM_FEED(&m, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(m.timer_ms, 0);
  rec_answer(&r, 0);
  ASSERT_EQ(m.timer_ms, 333);
  m.timer_ms = 1;
  mem_ack(&m); /* written: activity */
  ASSERT_EQ(m.timer_ms, 333);
  hang_up(&m);
  net_core_free(&core);
}

/* A request the handler holds when the connection ends is aborted, once,
 * and cannot be answered any more. */
TEST_IMPL(http_abort_pending) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  ludo__http_options_t o;
  ludo__http_options_init(&o);
  o.max_pipelined = 2; /* both with the handler */
  net_core_init(&core);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  MEM_FEED(&m, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
               "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(r.n, 2);
  rec_answer(&r, 1); /* answered, waiting for /1 */
  ludo__net_conn_eof(&m.conn);
  ASSERT_EQ(m.close_req, 2); /* nothing to send: at once */
  ASSERT_EQ(r.aborted, 0);   /* not before the transport is done */
  ASSERT_ERR(ludo__http_respond(r.req[0], 200, NULL, 0, NULL, 0),
             LUDO_ECLOSED);
  mem_finish(&m);
  ASSERT_EQ(r.aborted, 1);
  ASSERT_ERR(r.abort_rc, LUDO_ECLOSED);
  ASSERT_NULL(r.req[0]);
  ASSERT_UINT_EQ(m.out_len, 0);
  mem_free(&m);
  /* The same through a reset (read error). */
  memset(&r, 0, sizeof r);
  http_on(&m, &core, NULL, &r);
  MEM_FEED(&m, "POST /3 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  ludo__net_conn_error(&m.conn);
  ASSERT_EQ(m.close_req, 2);
  mem_finish(&m);
  ASSERT_EQ(r.aborted, 1);
  mem_free(&m);
  net_core_free(&core);
}

/* The peer does not read: reading stops above the high-water mark and
 * starts again when the writes drain. */
TEST_IMPL(http_backpressure) {
  ludo__core_t core;
  ludo__http_options_t o;
  mem_t m;
  rec_t r;
  static char body[3000];
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.write_high_water = 1000;
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  MEM_FEED(&m, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  memset(body, 'b', sizeof body);
  ASSERT_OK(ludo__http_respond(r.req[0], 200, NULL, 0, body, sizeof body));
  ASSERT_EQ(m.paused, 1);
  ASSERT_UINT_GT(ludo__net_conn_pending(&m.conn), 1000);
  mem_ack(&m);
  ASSERT_EQ(m.paused, 0);
  ASSERT_UINT_EQ(ludo__net_conn_pending(&m.conn), 0);
  hang_up(&m);
  net_core_free(&core);
}

/* Past the write high water the bytes already read wait unparsed too: a
 * peer pipelining cheap requests with large answers and not reading them
 * makes the server build one answer past the mark, not all of them. The
 * next request is parsed once the peer read enough. Blocks go to the
 * sink without their buffers' unused space, and output a slow reader
 * held counts toward giving memory back (core.h, ludo__core_note_freed);
 * a reading client's does not. */
TEST_IMPL(http_no_parse_past_high_water) {
  static const char four[] = "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /4 HTTP/1.1\r\nHost: x\r\n\r\n";
  ludo__core_t core;
  ludo__http_options_t o;
  ludo__net_budget_t b;
  mem_t m;
  rec_t r;
  size_t freed;
  char *body = malloc(100 << 10);
  int i;
  ASSERT_NOT_NULL(body);
  memset(body, 'b', 100 << 10);
  atomic_init(&b.used, 0);
  atomic_init(&b.max, (size_t)64 << 20);
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.write_high_water = 4096;
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  ludo__net_conn_set_budget(&m.conn, &b);
  mem_feed(&m, four, sizeof four - 1);
  ASSERT_EQ(r.n, 1);
  /* 5,000 bytes: the buffer grew past them by doubling */
  ASSERT_OK(ludo__http_respond(r.req[0], 200, NULL, 0, body, 5000));
  ASSERT_UINT_LE(m.slack_max, 1024);
  ASSERT_EQ(m.paused, 1);
  for (i = 0; i < 5; i++) net_core_pump(&core);
  ASSERT_EQ(r.n, 1); /* the output waits unread: nothing more parsed */
  mem_ack(&m);
  ASSERT_EQ(m.paused, 0);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 2);
  ASSERT_STR_EQ(r.path[1], "/2");
  /* a slow reader's pile, counted against the budget, counts when freed */
  freed = core.trim_freed;
  ASSERT_OK(ludo__http_respond(r.req[1], 200, NULL, 0, body, 100 << 10));
  ASSERT_UINT_GT(atomic_load(&b.used), (size_t)100 << 10);
  mem_ack(&m);
  ASSERT_UINT_GE(core.trim_freed, freed + ((size_t)100 << 10));
  /* a small answer read at once does not */
  net_core_pump(&core);
  ASSERT_EQ(r.n, 3);
  freed = core.trim_freed;
  ASSERT_OK(ludo__http_respond(r.req[2], 200, NULL, 0, body, 3000));
  mem_ack(&m);
  ASSERT_UINT_EQ(core.trim_freed, freed);
  net_core_pump(&core);
  ASSERT_EQ(r.n, 4);
  rec_answer(&r, 3);
  free(body);
  hang_up(&m);
  ASSERT_EQ(r.aborted, 0);
  net_core_free(&core);
}

/* Pipelined requests the handler answers at once take turns with the
 * loop: the first is parsed and answered as it is read, each next one in
 * a pass of the loop of its own, so one connection's burst of cheap
 * requests cannot hold the loop (a health check from another client is
 * served in between). The answers keep their order. */
TEST_IMPL(http_answered_at_once_take_turns) {
  ludo__core_t core;
  mem_t m;
  rec_t r;
  char *many, *out, *at;
  size_t n = 0, i;
  static const char one[] = "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
  net_core_init(&core);
  many = malloc(30 * (sizeof one - 1));
  ASSERT_NOT_NULL(many);
  for (i = 0; i < 30; i++, n += sizeof one - 1)
    memcpy(many + n, one, sizeof one - 1);
  memset(&r, 0, sizeof r);
  r.answer_now = 1;
  http_on(&m, &core, NULL, &r);
  mem_feed(&m, many, n);
  ASSERT_EQ(r.n, 1);
  for (i = 2; i <= 30; i++) {
    net_core_pump(&core);
    ASSERT_EQ(r.n, (int)i);
  }
  out = (char *)mem_take(&m, NULL);
  for (i = 0, at = out; (at = strstr(at, "HTTP/1.1 200 OK\r\n")); at++) i++;
  ASSERT_UINT_EQ(i, 30);
  free(many);
  hang_up(&m);
  net_core_free(&core);
}

/* Pipelined input beyond what the parser may take waits, bounded: reading
 * stops while it is full. */
TEST_IMPL(http_input_bounded) {
  ludo__core_t core;
  ludo__http_options_t o;
  mem_t m;
  rec_t r;
  char *many;
  size_t n = 0, i;
  static const char one[] = "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
  net_core_init(&core);
  ludo__http_options_init(&o);
  o.max_pipelined = 1;
  many = malloc(4000 * (sizeof one - 1));
  for (i = 0; i < 4000; i++, n += sizeof one - 1)
    memcpy(many + n, one, sizeof one - 1);
  memset(&r, 0, sizeof r);
  http_on(&m, &core, &o, &r);
  mem_feed(&m, many, n); /* 112 KB in one read */
  ASSERT_EQ(r.n, 1);
  ASSERT_EQ(m.paused, 1);
  for (i = 0; i < 30; i++) {
    rec_answer(&r, (int)i);
    net_core_pump(&core);
  }
  ASSERT_EQ(r.n, 31);
  free(many);
  hang_up(&m);
  ASSERT_EQ(r.aborted, 1);
  net_core_free(&core);
}

/* Every allocation of a request's life refused in turn: the connection
 * answers 500 or ends, never crashes or leaks. */
TEST_IMPL(http_alloc_failures) {
  ludo__core_t core;
  long k;
  int served = 0;
  for (k = 0; k < 200 && !served; k++) {
    mem_t m;
    rec_t r;
    ludo__http_conn_t *hc = NULL;
    int rc;
    net_core_init(&core);
    memset(&r, 0, sizeof r);
    r.answer_now = 0;
    test_heap.grows = 0;
    test_heap.fail_at = k;
    test_heap.fail_sticky = 0;
    mem_init(&m, &core, 0);
    rc = ludo__http_conn_new(&core, &m.conn, NULL, &rec_handler, &r, &hc);
    if (rc == 0) {
      mem_feed(&m, post_req, sizeof post_req - 1);
      if (r.n == 1) {
        static const ludo__http_header_t h = {"Content-Type", "text/plain"};
        rc = ludo__http_respond(r.req[0], 200, &h, 1, "ok", 2);
        if (rc == 0) {
          served = test_heap.refused == 0;
          r.req[0] = NULL;
        } else {
          ASSERT_ERR(rc, LUDO_ENOMEM);
        }
      } else if (m.close_req == 0) {
        FAIL("allocation %ld refused: no request and no close", k);
      } else if (m.out_len > 0) {
        ASSERT_STR_CONTAINS(m.out, "HTTP/1.1 500 ");
      }
      if (m.close_req == 0) ludo__net_conn_eof(&m.conn);
      mem_finish(&m);
    } else {
      ASSERT_ERR(rc, LUDO_ENOMEM);
    }
    mem_free(&m);
    test_heap.fail_at = -1;
    test_heap.refused = 0;
    net_core_free(&core);
  }
  ASSERT_TRUE(served);
}
