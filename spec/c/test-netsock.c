/* test-netsock.c - the server on real sockets (runtime/net/server.c): a
 * listener on a free loopback port (port 0) and libuv clients on the same
 * loop doing HTTP requests, a WebSocket echo round trip (the client side
 * framed by wslay's client context), a response larger than the socket
 * takes at once, a slow client's timeout, the
 * connection limit, the server closing under open connections, and
 * listen errors. Every test ends with the server and the core closed and
 * every byte returned. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <wslay/wslay.h>

#include "net/server.h"
#include "netmem.h"

/* ---- a client on the loop --------------------------------------------- */

typedef struct cli_s cli_t;
struct cli_s {
  uv_tcp_t tcp;
  uv_connect_t connect;
  char in[1 << 16];
  size_t in_len;
  int connected;
  int eof;
  int closed;
  const char *send; /* written once connected */
  size_t send_len;
  void (*on_data)(cli_t *c);
  void (*on_eof)(cli_t *c);
  void *ud;
};

typedef struct wr_s {
  uv_write_t req;
  char data[];
} wr_t;

static void cli_written(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

static void cli_write(cli_t *c, const void *p, size_t n) {
  wr_t *w = malloc(sizeof *w + n);
  uv_buf_t b;
  if (w == NULL) FAIL("out of memory");
  memcpy(w->data, p, n);
  b = uv_buf_init(w->data, (unsigned)n);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, cli_written) != 0)
    FAIL("uv_write failed");
}

static void cli_closed(uv_handle_t *h) {
  cli_t *c = h->data;
  c->closed = 1;
}

static void cli_close(cli_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, cli_closed);
}

static void cli_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  cli_t *c = h->data;
  (void)want;
  *b = uv_buf_init(c->in + c->in_len, (unsigned)(sizeof c->in - c->in_len));
}

static void cli_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  cli_t *c = s->data;
  (void)b;
  if (n > 0) {
    c->in_len += (size_t)n;
    if (c->on_data) c->on_data(c);
  } else if (n < 0) {
    c->eof = 1;
    uv_read_stop(s);
    if (c->on_eof)
      c->on_eof(c);
    else
      cli_close(c);
  }
}

static void cli_connected(uv_connect_t *req, int status) {
  cli_t *c = req->data;
  if (status != 0) FAIL("connect: %s", uv_strerror(status));
  c->connected = 1;
  uv_read_start((uv_stream_t *)&c->tcp, cli_alloc, cli_read);
  if (c->send_len) cli_write(c, c->send, c->send_len);
}

static void cli_start(cli_t *c, uv_loop_t *loop, int port) {
  struct sockaddr_in a;
  c->tcp.data = c;
  c->connect.data = c;
  uv_tcp_init(loop, &c->tcp);
  uv_ip4_addr("127.0.0.1", port, &a);
  if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&a,
                     cli_connected) != 0)
    FAIL("uv_tcp_connect failed");
}

/* ---- a server --------------------------------------------------------- */

typedef struct srv_s {
  ludo__core_t core;
  uv_loop_t host;        /* the host's loop, when `borrowed` */
  int borrowed;
  ludo__server_t *server;
  int port;
  int closed;            /* the close callback ran */
  int requests;
  int aborts;
  int hold;              /* keep requests unanswered */
  void (*on_held)(void); /* called when one is held */
  ludo__http_req_t *held;
  /* WebSocket side */
  ludo__ws_t *ws;
  int ws_messages;
  int ws_closes;
  int ws_code;
  char ws_reason[64];
  int close_server_on_ws_close;
  const char *big;       /* answer every request with this body */
  size_t big_len;
} srv_t;

static void server_closed(void *ud) { ((srv_t *)ud)->closed = 1; }

static void ws_message(void *ud, ludo__ws_t *ws, int binary, const char *d,
                       size_t n) {
  srv_t *s = ud;
  s->ws_messages++;
  ASSERT_OK(ludo__ws_send(ws, binary, d, n)); /* echo */
}

static void ws_close(void *ud, ludo__ws_t *ws, int code, const char *reason,
                     size_t n) {
  srv_t *s = ud;
  (void)ws;
  s->ws_closes++;
  s->ws_code = code;
  snprintf(s->ws_reason, sizeof s->ws_reason, "%.*s", (int)n, reason);
  s->ws = NULL;
  if (s->close_server_on_ws_close)
    ludo__server_close(s->server, server_closed, s);
}

static const ludo__ws_callbacks_t ws_cbs = {ws_message, ws_close, NULL};

/* Answers "<method> <path>?<query> <body>", or holds the request, or
 * accepts an upgrade. */
static void on_request(void *ud, ludo__http_req_t *req) {
  srv_t *s = ud;
  char body[600];
  size_t blen;
  const char *b = ludo__http_req_body(req, &blen);
  int n;
  s->requests++;
  if (ludo__http_req_upgrade(req)) {
    ludo__ws_options_t o;
    ludo__ws_options_init(&o);
    ASSERT_OK(ludo__ws_accept(req, &o, &ws_cbs, s, &s->ws));
    return;
  }
  if (s->big) {
    ASSERT_OK(ludo__http_respond(req, 200, NULL, 0, s->big, s->big_len));
    return;
  }
  if (s->hold) {
    s->held = req;
    if (s->on_held) s->on_held();
    return;
  }
  n = snprintf(body, sizeof body, "%s %s?%s %.*s",
               ludo__http_req_method(req), ludo__http_req_path(req),
               ludo__http_req_query(req), (int)blen, b);
  ASSERT_OK(ludo__http_respond(req, 200, NULL, 0, body, (size_t)n));
}

static void on_abort(void *ud, ludo__http_req_t *req) {
  srv_t *s = ud;
  if (req == s->held) s->held = NULL;
  s->aborts++;
}

static const ludo__http_handler_t handler = {on_request, on_abort, NULL};

/* A server listening on a free loopback port, on the core's own loop or
 * (borrowed 1) on a loop of the host's. */
static void srv_start_on(srv_t *s, const ludo__http_options_t *o,
                         int borrowed) {
  memset(s, 0, sizeof *s);
  s->borrowed = borrowed;
  if (borrowed) {
    ASSERT_OK(uv_loop_init(&s->host));
    net_core_init_on(&s->core, &s->host);
  } else {
    net_core_init(&s->core);
  }
  ASSERT_OK(ludo__server_new(&s->core, o, &handler, s, &s->server));
  ASSERT_OK(ludo__server_listen(s->server, "127.0.0.1", 0, 0));
  s->port = ludo__server_port(s->server);
  ASSERT_GT(s->port, 0);
}

static void srv_start(srv_t *s, const ludo__http_options_t *o) {
  srv_start_on(s, o, 0);
}

/* Runs the loop until it has nothing left (the test closed everything),
 * then checks the server closed and the core gives every byte back. */
#define srv_finish(s) srv__finish(__FILE__, __LINE__, (s))
static void srv__finish(const char *file, int line, srv_t *s) {
  uv_run(s->core.loop, UV_RUN_DEFAULT);
  if (!s->closed) test__fail(file, line, "the server did not close");
  if (s->borrowed) {
    /* The host runs its loop once more for ludo's last close callbacks;
     * then the loop must hold no handle of ludo's. */
    ludo__core_close(&s->core);
    uv_run(&s->host, UV_RUN_DEFAULT);
    if (uv_loop_close(&s->host) != 0)
      test__fail(file, line, "handles left on the host's loop");
    if (test_heap.live != 0 || test_heap.blocks != 0)
      test__fail(file, line, "%zu bytes in %zu blocks still live",
                 test_heap.live, test_heap.blocks);
    return;
  }
  net_core__free(file, line, &s->core);
}

/* ---- tests ------------------------------------------------------------ */

static srv_t *the_srv;

static void close_all_on_eof(cli_t *c) {
  cli_close(c);
  ludo__server_close(the_srv->server, server_closed, the_srv);
}

TEST_IMPL(net_socket_http) {
  static const char reqs[] =
      "GET /hello?x=1 HTTP/1.1\r\nHost: t\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
      "Connection: close\r\n\r\nworld";
  srv_t s;
  cli_t c;
  const char *a, *b;
  srv_start(&s, NULL);
  the_srv = &s;
  memset(&c, 0, sizeof c);
  c.send = reqs;
  c.send_len = sizeof reqs - 1;
  c.on_eof = close_all_on_eof;
  cli_start(&c, s.core.loop, s.port);
  srv_finish(&s);
  ASSERT_EQ(s.requests, 2);
  ASSERT_TRUE(c.eof && c.closed);
  c.in[c.in_len] = '\0';
  a = strstr(c.in, "HTTP/1.1 200 OK\r\n");
  ASSERT_NOT_NULL(a);
  ASSERT_STR_CONTAINS(c.in, "\r\n\r\nGET /hello?x=1 ");
  b = strstr(a + 1, "HTTP/1.1 200 OK\r\n");
  ASSERT_NOT_NULL(b);
  ASSERT_STR_CONTAINS(b, "Connection: close\r\n");
  ASSERT_STR_CONTAINS(b, "\r\n\r\nPOST /echo? world");
}

/* ---- a WebSocket client (wslay's client context) ---------------------- */

typedef struct wscli_s {
  cli_t c;
  wslay_event_context_ptr ev;
  size_t rd;          /* bytes of c.in wslay has read */
  int open;
  int echoes;
  char got[2][64];
  int got_binary[2];
  int close_code;
} wscli_t;

static ssize_t wc_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                       int flags, void *ud) {
  wscli_t *w = ud;
  size_t n = w->c.in_len - w->rd;
  (void)flags;
  if (n == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (n > len) n = len;
  memcpy(buf, w->c.in + w->rd, n);
  w->rd += n;
  return (ssize_t)n;
}

static ssize_t wc_send(wslay_event_context_ptr ctx, const uint8_t *data,
                       size_t len, int flags, void *ud) {
  wscli_t *w = ud;
  (void)ctx;
  (void)flags;
  cli_write(&w->c, data, len);
  return (ssize_t)len;
}

static int wc_mask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                   void *ud) {
  (void)ctx;
  (void)ud;
  memset(buf, 0x5a, len);
  return 0;
}

static void wc_msg(wslay_event_context_ptr ctx,
                   const struct wslay_event_on_msg_recv_arg *arg, void *ud) {
  wscli_t *w = ud;
  if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) {
    if (w->echoes < 2) {
      snprintf(w->got[w->echoes], sizeof w->got[0], "%.*s",
               (int)arg->msg_length, (const char *)arg->msg);
      w->got_binary[w->echoes] = arg->opcode == WSLAY_BINARY_FRAME;
    }
    if (++w->echoes == 2)
      wslay_event_queue_close(ctx, 1000, (const uint8_t *)"bye", 3);
  } else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    w->close_code = arg->status_code;
  }
}

static void wc_data(cli_t *c) {
  wscli_t *w = (wscli_t *)c;
  if (!w->open) {
    char *end;
    c->in[c->in_len] = '\0';
    end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) return;
    if (strncmp(c->in, "HTTP/1.1 101 Switching Protocols\r\n", 34) != 0 ||
        strstr(c->in, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            == NULL)
      FAIL("not a 101: %s", c->in);
    w->rd = (size_t)(end + 4 - c->in);
    w->open = 1;
    {
      struct wslay_event_msg m1 = {WSLAY_TEXT_FRAME,
                                   (const uint8_t *)"hello over tcp", 14};
      struct wslay_event_msg m2 = {WSLAY_BINARY_FRAME,
                                   (const uint8_t *)"\x00\x01\x02", 3};
      wslay_event_queue_msg(w->ev, &m1);
      wslay_event_queue_msg(w->ev, &m2);
    }
  }
  if (wslay_event_recv(w->ev) != 0) FAIL("the client's wslay_event_recv");
  if (wslay_event_send(w->ev) != 0) FAIL("the client's wslay_event_send");
}

/* On a loop of the host's (the core borrows it). */
TEST_IMPL(net_socket_ws_echo) {
  struct wslay_event_callbacks cb = {wc_recv, wc_send, wc_mask, NULL,
                                     NULL,    NULL,    wc_msg};
  srv_t s;
  wscli_t w;
  srv_start_on(&s, NULL, 1);
  ASSERT_PTR_EQ(s.core.loop, &s.host);
  s.close_server_on_ws_close = 1;
  memset(&w, 0, sizeof w);
  if (wslay_event_context_client_init(&w.ev, &cb, &w) != 0)
    FAIL("wslay client init");
  w.c.send = net_ws_upgrade;
  w.c.send_len = strlen(net_ws_upgrade);
  w.c.on_data = wc_data;
  cli_start(&w.c, s.core.loop, s.port);
  srv_finish(&s);
  ASSERT_EQ(w.echoes, 2);
  ASSERT_STR_EQ(w.got[0], "hello over tcp");
  ASSERT_EQ(w.got_binary[0], 0);
  ASSERT_EQ(w.got_binary[1], 1);
  ASSERT_EQ(w.close_code, 1000); /* the server's answer to our close */
  ASSERT_TRUE(w.c.eof && w.c.closed);
  ASSERT_EQ(s.ws_messages, 2);
  ASSERT_EQ(s.ws_closes, 1);
  ASSERT_EQ(s.ws_code, 1000);
  ASSERT_STR_EQ(s.ws_reason, "bye");
  wslay_event_context_free(w.ev);
}

/* ---- a response larger than the socket takes at once ----------------- */

#define BIG_LEN ((size_t)8 << 20)

typedef struct big_s {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t w;
  char head[2048];
  size_t hlen;
  int in_body;
  size_t body;   /* body bytes received */
  size_t bad;    /* body bytes out of place */
  int eof;
} big_t;

static void big_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  static char buf[1 << 16];
  (void)h;
  (void)want;
  *b = uv_buf_init(buf, sizeof buf);
}

static void big_closed(uv_handle_t *h) { (void)h; }

/* Checks every body byte against the pattern the server sent, so bytes
 * lost, repeated or reordered between the part written at once and the
 * rest (written later) show. */
static void big_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  big_t *c = st->data;
  ssize_t i = 0;
  if (n < 0) {
    c->eof = 1;
    uv_close((uv_handle_t *)&c->tcp, big_closed);
    ludo__server_close(the_srv->server, server_closed, the_srv);
    return;
  }
  while (!c->in_body && i < n) {
    char *end;
    if (c->hlen == sizeof c->head - 1) FAIL("response head too long");
    c->head[c->hlen++] = b->base[i++];
    c->head[c->hlen] = '\0';
    end = strstr(c->head, "\r\n\r\n");
    if (end != NULL) c->in_body = 1;
  }
  for (; i < n; i++, c->body++)
    if (b->base[i] != (char)('a' + c->body % 26)) c->bad++;
}

static void big_connected(uv_connect_t *req, int status) {
  static const char get[] =
      "GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  big_t *c = req->data;
  uv_buf_t b = uv_buf_init((char *)get, sizeof get - 1);
  if (status != 0) FAIL("connect: %s", uv_strerror(status));
  uv_read_start((uv_stream_t *)&c->tcp, big_alloc, big_read);
  ASSERT_OK(uv_write(&c->w, (uv_stream_t *)&c->tcp, &b, 1, NULL));
}

/* An 8 MiB response: the kernel takes part of it at once (uv_try_write),
 * the rest goes out as the client reads (uv_write), in order; the
 * connection closes after it. */
TEST_IMPL(net_socket_big_response) {
  srv_t s;
  big_t c;
  struct sockaddr_in a;
  char *body = malloc(BIG_LEN);
  size_t i;
  ASSERT_NOT_NULL(body);
  for (i = 0; i < BIG_LEN; i++) body[i] = (char)('a' + i % 26);
  srv_start(&s, NULL);
  the_srv = &s;
  s.big = body;
  s.big_len = BIG_LEN;
  memset(&c, 0, sizeof c);
  c.tcp.data = &c;
  c.connect.data = &c;
  uv_tcp_init(s.core.loop, &c.tcp);
  uv_ip4_addr("127.0.0.1", s.port, &a);
  ASSERT_OK(uv_tcp_connect(&c.connect, &c.tcp, (const struct sockaddr *)&a,
                           big_connected));
  srv_finish(&s);
  free(body);
  ASSERT_TRUE(c.eof);
  ASSERT_STR_CONTAINS(c.head, "HTTP/1.1 200 OK\r\n");
  ASSERT_STR_CONTAINS(c.head, "Content-Length: 8388608\r\n");
  ASSERT_UINT_EQ(c.body, BIG_LEN);
  ASSERT_UINT_EQ(c.bad, 0);
}

/* A client that stops in the middle of its headers gets 408, then the
 * end of the connection. */
TEST_IMPL(net_socket_slow_client) {
  static const char part[] = "GET / HTTP/1.1\r\nHost: t\r\n";
  ludo__http_options_t o;
  srv_t s;
  cli_t c;
  ludo__http_options_init(&o);
  o.header_timeout_ms = 50;
  srv_start(&s, &o);
  the_srv = &s;
  memset(&c, 0, sizeof c);
  c.send = part;
  c.send_len = sizeof part - 1;
  c.on_eof = close_all_on_eof;
  cli_start(&c, s.core.loop, s.port);
  srv_finish(&s);
  ASSERT_EQ(s.requests, 0);
  c.in[c.in_len] = '\0';
  ASSERT_STR_CONTAINS(c.in, "HTTP/1.1 408 Request Timeout\r\n");
  ASSERT_STR_CONTAINS(c.in, "Connection: close\r\n");
}

/* max_connections 1: a second client is closed as it comes; the first
 * is served. */
static cli_t first, second;
static int second_port;

static void second_eof(cli_t *c) {
  cli_close(c);
  cli_close(&first);
  ludo__server_close(the_srv->server, server_closed, the_srv);
}

static void first_data(cli_t *c) {
  c->in[c->in_len] = '\0';
  if (strstr(c->in, "\r\n\r\nGET /one? ") == NULL || second.tcp.data)
    return;
  memset(&second, 0, sizeof second);
  second.on_eof = second_eof;
  cli_start(&second, c->tcp.loop, second_port);
}

TEST_IMPL(net_socket_connection_limit) {
  static const char one[] = "GET /one HTTP/1.1\r\nHost: t\r\n\r\n";
  ludo__http_options_t o;
  srv_t s;
  ludo__http_options_init(&o);
  o.max_connections = 1;
  srv_start(&s, &o);
  the_srv = &s;
  second_port = s.port;
  memset(&first, 0, sizeof first);
  first.send = one;
  first.send_len = sizeof one - 1;
  first.on_data = first_data;
  cli_start(&first, s.core.loop, s.port);
  srv_finish(&s);
  ASSERT_EQ(s.requests, 1);
  ASSERT_STR_CONTAINS(test_log.last, "connection refused: 1 connections");
  ASSERT_TRUE(second.eof);
  ASSERT_UINT_EQ(second.in_len, 0);
  ASSERT_TRUE(first.closed && second.closed);
}

/* The server closes under a held request and an idle WebSocket: the
 * request is aborted, the client sees the end; the WebSocket gets 1001. */
static cli_t held_cli;
static wscli_t ws_cli;

static int close_asked;

/* Called as each side gets in place; the last one closes the server. */
static void maybe_close_server(void) {
  if (the_srv->held != NULL && ws_cli.open && the_srv->ws != NULL &&
      !close_asked) {
    close_asked = 1;
    ASSERT_EQ(ludo__server_connections(the_srv->server), 2);
    ludo__server_close(the_srv->server, server_closed, the_srv);
  }
}

static void ws_cli_data(cli_t *c) {
  wscli_t *w = (wscli_t *)c;
  if (!w->open) {
    char *end;
    c->in[c->in_len] = '\0';
    end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) return;
    w->rd = (size_t)(end + 4 - c->in);
    w->open = 1;
    maybe_close_server();
  }
  if (wslay_event_recv(w->ev) != 0) FAIL("the client's wslay_event_recv");
  if (wslay_event_send(w->ev) != 0) FAIL("the client's wslay_event_send");
}

TEST_IMPL(net_socket_server_close) {
  static const char one[] = "GET /held HTTP/1.1\r\nHost: t\r\n\r\n";
  struct wslay_event_callbacks cb = {wc_recv, wc_send, wc_mask, NULL,
                                     NULL,    NULL,    wc_msg};
  srv_t s;
  srv_start(&s, NULL);
  s.hold = 1;
  s.on_held = maybe_close_server;
  the_srv = &s;
  memset(&held_cli, 0, sizeof held_cli);
  held_cli.send = one;
  held_cli.send_len = sizeof one - 1;
  cli_start(&held_cli, s.core.loop, s.port);
  memset(&ws_cli, 0, sizeof ws_cli);
  if (wslay_event_context_client_init(&ws_cli.ev, &cb, &ws_cli) != 0)
    FAIL("wslay client init");
  ws_cli.c.send = net_ws_upgrade;
  ws_cli.c.send_len = strlen(net_ws_upgrade);
  ws_cli.c.on_data = ws_cli_data;
  cli_start(&ws_cli.c, s.core.loop, s.port);
  srv_finish(&s);
  ASSERT_EQ(s.aborts, 1);
  ASSERT_NULL(s.held);
  ASSERT_TRUE(held_cli.eof && held_cli.closed);
  ASSERT_UINT_EQ(held_cli.in_len, 0);
  ASSERT_EQ(ws_cli.close_code, 1001);
  ASSERT_EQ(s.ws_closes, 1);
  ASSERT_EQ(s.ws_code, 1001);
  ASSERT_TRUE(ws_cli.c.eof && ws_cli.c.closed);
  wslay_event_context_free(ws_cli.ev);
}

static void host_sigpipe(int sig) { (void)sig; }

/* Listen errors; SIGPIPE ignored unless the host handles it. */
TEST_IMPL(net_listen_errors) {
  struct sigaction sa;
  srv_t s, t;
  signal(SIGPIPE, host_sigpipe);
  srv_start(&s, NULL);
  ASSERT_OK(sigaction(SIGPIPE, NULL, &sa));
  ASSERT_TRUE(sa.sa_handler == host_sigpipe); /* the host's is kept */
  memset(&t, 0, sizeof t);
  net_core_init(&t.core);
  ASSERT_OK(ludo__server_new(&t.core, NULL, &handler, &t, &t.server));
  ASSERT_ERR(ludo__server_listen(t.server, "127.0.0.1", s.port, 0),
             LUDO_EIO);
  ASSERT_STR_CONTAINS(ludo__server_errmsg(t.server), "in use");
  ASSERT_ERR(ludo__server_listen(t.server, "example.com", 0, 0),
             LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo__server_errmsg(t.server), "numeric");
  ASSERT_ERR(ludo__server_listen(t.server, "127.0.0.1", 70000, 0),
             LUDO_EINVAL);
  ASSERT_EQ(ludo__server_port(t.server), 0);
  ASSERT_ERR(ludo__server_listen(s.server, "127.0.0.1", 0, 0), LUDO_EINVAL);
  signal(SIGPIPE, SIG_DFL);
  ASSERT_OK(ludo__server_listen(t.server, "localhost", 0, 0));
  ASSERT_GT(ludo__server_port(t.server), 0);
  ASSERT_OK(sigaction(SIGPIPE, NULL, &sa));
  ASSERT_TRUE(sa.sa_handler == SIG_IGN); /* the default would kill */
  ludo__server_close(t.server, server_closed, &t);
  uv_run(t.core.loop, UV_RUN_DEFAULT);
  ASSERT_TRUE(t.closed);
  ludo__core_close(&t.core);
  ludo__server_close(s.server, server_closed, &s);
  srv_finish(&s);
}

/* SO_REUSEPORT (LUDO__LISTEN_REUSEPORT): a second listener joins the
 * first's port, the kernel spreads connections over both, and the first
 * of a group (LUDO__LISTEN_EXCLUSIVE) never joins a port someone listens
 * on; a listener without the flag cannot take the group's port, nor the
 * group a port held without it. */
#define RP_CLIENTS 32
static srv_t rp_s, rp_t;
static ludo__server_t *rp_plain, *rp_late, *rp_hold;
static int rp_done;

static void rp_eof(cli_t *c) {
  cli_close(c);
  if (++rp_done < RP_CLIENTS) return;
  ludo__server_close(rp_s.server, server_closed, &rp_s);
  ludo__server_close(rp_t.server, server_closed, &rp_t);
  ludo__server_close(rp_plain, NULL, NULL);
  ludo__server_close(rp_late, NULL, NULL);
  ludo__server_close(rp_hold, NULL, NULL);
}

TEST_IMPL(net_listen_reuseport) {
  static const char req[] =
      "GET /r HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  static cli_t c[RP_CLIENTS];
  const unsigned both = LUDO__LISTEN_REUSEPORT | LUDO__LISTEN_EXCLUSIVE;
  int i;
  memset(&rp_s, 0, sizeof rp_s);
  memset(&rp_t, 0, sizeof rp_t);
  net_core_init(&rp_s.core);
  ASSERT_OK(ludo__server_new(&rp_s.core, NULL, &handler, &rp_s,
                             &rp_s.server));
  ASSERT_OK(ludo__server_new(&rp_s.core, NULL, &handler, &rp_t,
                             &rp_t.server));
  ASSERT_OK(ludo__server_new(&rp_s.core, NULL, &handler, NULL, &rp_plain));
  ASSERT_OK(ludo__server_new(&rp_s.core, NULL, &handler, NULL, &rp_late));
  ASSERT_OK(ludo__server_new(&rp_s.core, NULL, &handler, NULL, &rp_hold));
  ASSERT_ERR(ludo__server_listen(rp_s.server, "127.0.0.1", 0,
                                 LUDO__LISTEN_EXCLUSIVE), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo__server_errmsg(rp_s.server), "flags");
  ASSERT_OK(ludo__server_listen(rp_s.server, "127.0.0.1", 0, both));
  rp_s.port = ludo__server_port(rp_s.server);
  ASSERT_GT(rp_s.port, 0);
  ASSERT_OK(ludo__server_listen(rp_t.server, "127.0.0.1", rp_s.port,
                                LUDO__LISTEN_REUSEPORT));
  ASSERT_EQ(ludo__server_port(rp_t.server), rp_s.port);
  /* another group's first, and a listener without the flag: refused */
  ASSERT_ERR(ludo__server_listen(rp_plain, "127.0.0.1", rp_s.port, both),
             LUDO_EIO);
  ASSERT_STR_CONTAINS(ludo__server_errmsg(rp_plain), "in use");
  ASSERT_ERR(ludo__server_listen(rp_plain, "127.0.0.1", rp_s.port, 0),
             LUDO_EIO);
  /* a port held without the flag: the group cannot join it */
  ASSERT_OK(ludo__server_listen(rp_hold, "127.0.0.1", 0, 0));
  ASSERT_ERR(ludo__server_listen(rp_late, "127.0.0.1",
                                 ludo__server_port(rp_hold),
                                 LUDO__LISTEN_REUSEPORT), LUDO_EIO);
  for (i = 0; i < RP_CLIENTS; i++) {
    memset(&c[i], 0, sizeof c[i]);
    c[i].send = req;
    c[i].send_len = sizeof req - 1;
    c[i].on_eof = rp_eof;
    cli_start(&c[i], rp_s.core.loop, rp_s.port);
  }
  srv_finish(&rp_s);
  ASSERT_TRUE(rp_t.closed);
  ASSERT_EQ(rp_s.requests + rp_t.requests, RP_CLIENTS);
  /* 32 connections all hashed to one of two sockets: odds 2^-31 */
  ASSERT_GT(rp_s.requests, 0);
  ASSERT_GT(rp_t.requests, 0);
  for (i = 0; i < RP_CLIENTS; i++) {
    ASSERT_TRUE(c[i].closed);
    ASSERT_STR_CONTAINS(c[i].in, "HTTP/1.1 200 OK");
  }
}
