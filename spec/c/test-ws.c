/* test-ws.c - WebSocket connections (runtime/net/ws.c, handshake.c) driven
 * by byte scripts over the memory transport: the opening handshake and
 * its refusals, masked and fragmented frames, pings, invalid UTF-8,
 * message size, malformed frames, both closing handshakes, keepalive
 * timeouts, the send queue's bound, an upgrade behind a pipelined request,
 * and connections that end before the switch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/handshake.h"
#include "netmem.h"

typedef struct wsrec_s {
  ludo__ws_t *ws;
  int accepts;
  int accept_rc;
  int use_o;
  ludo__ws_options_t o;
  int accept_all;       /* accept every request, upgrade or not */
  ludo__http_req_t *held[8];
  int nheld;
  int aborted;
  int messages;
  char last[4096];
  size_t last_len;
  size_t last_size;     /* the last message's whole length */
  int last_binary;
  int echo;             /* send each message back */
  int close_on_message; /* ludo__ws_close(1000, "enough") from it */
  int send_rc;
  int closes;
  int close_code;
  char close_reason[128];
  int drains;
} wsrec_t;

static void on_message(void *ud, ludo__ws_t *ws, int binary, const char *d,
                       size_t n) {
  wsrec_t *w = ud;
  if (ws != w->ws) FAIL("a message for another WebSocket");
  w->messages++;
  w->last_binary = binary;
  w->last_size = n;
  w->last_len = n < sizeof w->last - 1 ? n : sizeof w->last - 1;
  memcpy(w->last, d, w->last_len);
  w->last[w->last_len] = '\0';
  if (w->echo) w->send_rc = ludo__ws_send(ws, binary, d, n);
  if (w->close_on_message) ASSERT_OK(ludo__ws_close(ws, 1000, "enough"));
}

static void on_close(void *ud, ludo__ws_t *ws, int code, const char *reason,
                     size_t n) {
  wsrec_t *w = ud;
  if (ws != w->ws) FAIL("a close for another WebSocket");
  w->closes++;
  w->close_code = code;
  snprintf(w->close_reason, sizeof w->close_reason, "%.*s", (int)n, reason);
  /* Gone for the protocol: every call says so. */
  ASSERT_ERR(ludo__ws_send(ws, 0, "x", 1), LUDO_ECLOSED);
  ASSERT_ERR(ludo__ws_close(ws, 1000, NULL), LUDO_ECLOSED);
  w->ws = NULL;
}

static void on_drain(void *ud, ludo__ws_t *ws) {
  wsrec_t *w = ud;
  (void)ws;
  w->drains++;
}

static const ludo__ws_callbacks_t ws_cbs = {on_message, on_close, on_drain};

static void ws_request(void *ud, ludo__http_req_t *req) {
  wsrec_t *w = ud;
  if (ludo__http_req_upgrade(req) || w->accept_all) {
    w->accepts++;
    w->accept_rc = ludo__ws_accept(req, w->use_o ? &w->o : NULL, &ws_cbs, w,
                                   &w->ws);
    return;
  }
  if (w->nheld == 8) FAIL("too many requests");
  w->held[w->nheld++] = req;
}

static void ws_abort(void *ud, ludo__http_req_t *req) {
  wsrec_t *w = ud;
  int i;
  w->aborted++;
  for (i = 0; i < w->nheld; i++)
    if (w->held[i] == req) w->held[i] = NULL;
}

static const ludo__http_handler_t ws_handler = {ws_request, ws_abort,
                                                NULL};

/* An HTTP connection on the memory transport whose upgrade requests the
 * handler accepts. */
static void conn_on(mem_t *m, ludo__core_t *core, wsrec_t *w) {
  ludo__http_conn_t *hc;
  mem_init(m, core, 0);
  ASSERT_OK(ludo__http_conn_new(core, &m->conn, NULL, &ws_handler, w, &hc));
}

/* The same where two requests may be with the handler at once, so an
 * upgrade reaches it behind a request it holds. */
static void conn_on2(mem_t *m, ludo__core_t *core, wsrec_t *w) {
  ludo__http_conn_t *hc;
  ludo__http_options_t o;
  ludo__http_options_init(&o);
  o.max_pipelined = 2;
  mem_init(m, core, 0);
  ASSERT_OK(ludo__http_conn_new(core, &m->conn, &o, &ws_handler, w, &hc));
}

static const char accepted[] =
    "HTTP/1.1 101 Switching Protocols\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

/* A WebSocket after the handshake, its 101 taken from the output. */
static void ws_on(mem_t *m, ludo__core_t *core, wsrec_t *w) {
  conn_on(m, core, w);
  mem_feed(m, net_ws_upgrade, strlen(net_ws_upgrade));
  ASSERT_EQ(w->accepts, 1);
  ASSERT_OK(w->accept_rc);
  ASSERT_NOT_NULL(w->ws);
  ASSERT_STR_EQ(mem_take(m, NULL), accepted);
}

/* Feeds one masked client frame. */
static void client(mem_t *m, int fin, int opcode, const char *p, size_t n) {
  char *buf = malloc(n + 14);
  ASSERT_NOT_NULL(buf);
  mem_feed(m, buf, net_client_frame(buf, fin, opcode, p, n));
  free(buf);
}
#define CLIENT(m, fin, op, lit) client((m), (fin), (op), (lit), sizeof(lit) - 1)

/* The frames written since the last take. */
static int frames(mem_t *m, frame_t *f, int max) {
  size_t n;
  const char *p = mem_take(m, &n);
  return net_frames(p, n, f, max);
}

/* The connection failed with `code`: the last frame written is a close
 * with that code, the conn closes, and the close callback says so. */
static void expect_fail(mem_t *m, wsrec_t *w, int code) {
  frame_t f[8];
  int n = frames(m, f, 8);
  ASSERT_GT(n, 0);
  ASSERT_EQ(f[n - 1].opcode, 8);
  ASSERT_GE(f[n - 1].len, 2);
  ASSERT_EQ(((unsigned char)f[n - 1].data[0] << 8) |
                (unsigned char)f[n - 1].data[1],
            code);
  ASSERT_EQ(m->close_req, 1);
  mem_finish(m);
  ASSERT_EQ(w->closes, 1);
  ASSERT_EQ(w->close_code, code);
  mem_free(m);
}

TEST_IMPL(ws_accept_key) {
  char out[LUDO__HANDSHAKE_ACCEPT_LEN + 1];
  /* RFC 6455 section 1.3. */
  ludo__handshake_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
  ASSERT_STR_EQ(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  ludo__handshake_accept_key("x3JJHMbDL1EzLkh9GBhXDw==", out);
  ASSERT_STR_EQ(out, "HSmrc0sMlYUkAGmm5OPpG2HaGWk=");
}

TEST_IMPL(ws_handshake) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  ASSERT_EQ(m.timer_ms, 20000); /* the keepalive's default */
  ASSERT_EQ(m.close_req, 0);
  ASSERT_UINT_GT(ludo__ws_queued(w.ws), 0); /* the 101, until sent */
  mem_ack(&m);
  ASSERT_UINT_EQ(ludo__ws_queued(w.ws), 0);
  ludo__net_conn_eof(&m.conn); /* gone without a close frame */
  ASSERT_EQ(m.close_req, 2);
  mem_finish(&m);
  ASSERT_EQ(w.closes, 1);
  ASSERT_EQ(w.close_code, 1006);
  mem_free(&m);
  /* Tokens in any case, lists split over several fields. */
  memset(&w, 0, sizeof w);
  conn_on(&m, &core, &w);
  MEM_FEED(&m, "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: WebSocket\r\n"
               "Connection: keep-alive\r\nConnection: UPGRADE\r\n"
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n");
  ASSERT_OK(w.accept_rc);
  ASSERT_STR_EQ(mem_take(&m, NULL), accepted);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

/* Sends `req` and expects the refusal `status` with `why` in the body. */
static void refused(ludo__core_t *core, const char *req, int status,
                    const char *why, int closes) {
  mem_t m;
  wsrec_t w;
  char line[32];
  const char *out;
  memset(&w, 0, sizeof w);
  w.accept_all = 1;
  conn_on(&m, core, &w);
  mem_feed(&m, req, strlen(req));
  ASSERT_EQ(w.accepts, 1);
  ASSERT_ERR(w.accept_rc, LUDO_EINVAL);
  ASSERT_NULL(w.ws);
  out = mem_take(&m, NULL);
  snprintf(line, sizeof line, "HTTP/1.1 %d ", status);
  if (strncmp(out, line, strlen(line)) != 0)
    FAIL("want %d, got %.200s", status, out);
  ASSERT_STR_CONTAINS(out, why);
  if (status == 426)
    ASSERT_STR_CONTAINS(out, "\r\nSec-WebSocket-Version: 13\r\n");
  ASSERT_EQ(m.close_req, closes);
  if (closes) {
    ASSERT_STR_CONTAINS(out, "Connection: close\r\n");
    mem_finish(&m);
  } else {
    ludo__net_conn_eof(&m.conn);
    mem_finish(&m);
  }
  mem_free(&m);
}

#define UPG(method, version, upgrade, key, wsver)                     \
  method " /ws " version "\r\nHost: h\r\nUpgrade: " upgrade           \
         "\r\nConnection: keep-alive, Upgrade\r\n" key wsver "\r\n"
#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"

TEST_IMPL(ws_handshake_refused) {
  ludo__core_t core;
  net_core_init(&core);
  refused(&core, UPG("GET", "HTTP/1.1", "websocket", "", V13), 400,
          "Sec-WebSocket-Key", 1);
  refused(&core,
          UPG("GET", "HTTP/1.1", "websocket",
              "Sec-WebSocket-Key: abc\r\n", V13),
          400, "Sec-WebSocket-Key", 1);
  refused(&core,
          UPG("GET", "HTTP/1.1", "websocket",
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQAA\r\n", V13),
          400, "Sec-WebSocket-Key", 1);
  refused(&core,
          UPG("GET", "HTTP/1.1", "websocket", KEY,
              "Sec-WebSocket-Version: 8\r\n"),
          426, "version 13", 1);
  refused(&core, UPG("GET", "HTTP/1.1", "websocket", KEY, ""), 426,
          "version 13", 1);
  /* The key and the version must not repeat (RFC 6455 11.3.1, 11.3.5),
   * even with equal values: 400 naming the field. */
  refused(&core, UPG("GET", "HTTP/1.1", "websocket", KEY KEY, V13), 400,
          "Sec-WebSocket-Key must not appear more than once", 1);
  refused(&core,
          UPG("GET", "HTTP/1.1", "websocket",
              KEY "sec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\r\n", V13),
          400, "Sec-WebSocket-Key must not appear more than once", 1);
  refused(&core, UPG("GET", "HTTP/1.1", "websocket", KEY, V13 V13), 400,
          "Sec-WebSocket-Version must not appear more than once", 1);
  refused(&core, UPG("POST", "HTTP/1.1", "websocket", KEY, V13), 400,
          "GET", 1);
  refused(&core, UPG("GET", "HTTP/1.0", "websocket", KEY, V13), 400,
          "HTTP/1.1", 1);
  refused(&core, UPG("GET", "HTTP/1.1", "h2c", KEY, V13), 400,
          "websocket", 1);
  /* Without "Connection: upgrade" it is a plain request: refused, and the
   * connection stays for the next one. */
  refused(&core,
          "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n" KEY V13
          "\r\n",
          400, "Connection", 0);
  net_core_free(&core);
}

/* RFC 6455 section 5.7: a masked "Hello", and the unmasked answer. */
TEST_IMPL(ws_masked_text) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  w.echo = 1;
  ws_on(&m, &core, &w);
  MEM_FEED(&m, "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58");
  ASSERT_EQ(w.messages, 1);
  ASSERT_STR_EQ(w.last, "Hello");
  ASSERT_EQ(w.last_binary, 0);
  ASSERT_OK(w.send_rc);
  ASSERT_STR_EQ(mem_take(&m, NULL), "\x81\x05Hello");
  /* Binary, with a 16-bit length. */
  {
    char payload[300];
    frame_t f[2];
    memset(payload, 0xab, sizeof payload);
    client(&m, 1, 2, payload, sizeof payload);
    ASSERT_EQ(w.messages, 2);
    ASSERT_EQ(w.last_binary, 1);
    ASSERT_UINT_EQ(w.last_len, 300);
    ASSERT_EQ(frames(&m, f, 2), 1);
    ASSERT_EQ(f[0].opcode, 2);
    ASSERT_EQ(f[0].masked, 0);
    ASSERT_UINT_EQ(f[0].len, 300);
  }
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

/* A fragmented message with a ping between its fragments, whole and one
 * byte per read. */
TEST_IMPL(ws_fragments_and_ping) {
  ludo__core_t core;
  char script[256];
  size_t n = 0;
  int pass;
  net_core_init(&core);
  n += net_client_frame(script + n, 0, 1, "Hel", 3);
  n += net_client_frame(script + n, 1, 9, "p1", 2);
  n += net_client_frame(script + n, 0, 0, "lo ", 3);
  n += net_client_frame(script + n, 1, 0, "world", 5);
  for (pass = 0; pass < 2; pass++) {
    mem_t m;
    wsrec_t w;
    frame_t f[4];
    size_t i;
    memset(&w, 0, sizeof w);
    ws_on(&m, &core, &w);
    if (pass == 0)
      mem_feed(&m, script, n);
    else
      for (i = 0; i < n; i++) mem_feed(&m, script + i, 1);
    ASSERT_EQ(w.messages, 1);
    ASSERT_STR_EQ(w.last, "Hello world");
    ASSERT_EQ(frames(&m, f, 4), 1);
    ASSERT_EQ(f[0].opcode, 0xa); /* the pong, with the ping's payload */
    ASSERT_STR_EQ(f[0].data, "p1");
    ludo__net_conn_eof(&m.conn);
    mem_finish(&m);
    mem_free(&m);
  }
  net_core_free(&core);
}

/* Two WebSockets on one thread, their bytes fed in turns, one at a time
 * or a whole script at once: a server WebSocket holds a wslay context only
 * while a frame or fragmented message of its is incomplete, and gives it
 * back between messages (to be lent to the other); what each receives is
 * its own. The script has a fragmented message with a ping inside, a
 * 16-bit and a 64-bit payload length, and two messages in one read. */
TEST_IMPL(ws_contexts_lent) {
  enum { BIG = 70000 };
  ludo__core_t core;
  char *script = malloc(BIG + 512), *big = malloc(BIG);
  size_t n = 0, half, i;
  int pass;
  ASSERT_NOT_NULL(script);
  ASSERT_NOT_NULL(big);
  memset(big, 'b', BIG);
  net_core_init(&core);
  n += net_client_frame(script + n, 0, 1, "Hel", 3);
  half = n; /* one frame of a fragmented message */
  n += net_client_frame(script + n, 1, 9, "p1", 2);
  n += net_client_frame(script + n, 1, 0, "lo", 2);
  n += net_client_frame(script + n, 1, 2, big, 300);
  n += net_client_frame(script + n, 1, 1, big, BIG);
  n += net_client_frame(script + n, 1, 1, "a", 1);
  n += net_client_frame(script + n, 1, 1, "z", 1);
  for (pass = 0; pass < 3; pass++) {
    mem_t m[2];
    wsrec_t w[2];
    int k;
    memset(w, 0, sizeof w);
    ws_on(&m[0], &core, &w[0]);
    ws_on(&m[1], &core, &w[1]);
    ASSERT_EQ(ludo__ws_holds_context(w[0].ws), 0);
    if (pass == 0) { /* one byte each in turn */
      for (i = 0; i < n; i++)
        for (k = 0; k < 2; k++) {
          mem_feed(&m[k], script + i, 1);
          if (i + 1 == half) ASSERT_EQ(ludo__ws_holds_context(w[k].ws), 1);
        }
    } else if (pass == 1) { /* the fragment, then the rest */
      for (k = 0; k < 2; k++) {
        mem_feed(&m[k], script, half);
        ASSERT_EQ(ludo__ws_holds_context(w[k].ws), 1);
      }
      for (k = 0; k < 2; k++) mem_feed(&m[k], script + half, n - half);
    } else { /* all at once */
      for (k = 0; k < 2; k++) mem_feed(&m[k], script, n);
    }
    for (k = 0; k < 2; k++) {
      frame_t f[2];
      ASSERT_EQ(w[k].messages, 5);
      ASSERT_STR_EQ(w[k].last, "z");
      ASSERT_EQ(ludo__ws_holds_context(w[k].ws), 0);
      ASSERT_EQ(frames(&m[k], f, 2), 1); /* the pong */
      ASSERT_EQ(f[0].opcode, 0xa);
      ASSERT_STR_EQ(f[0].data, "p1");
      /* A reply goes out without a context. */
      ASSERT_OK(ludo__ws_send(w[k].ws, 0, "ok", 2));
      ASSERT_EQ(ludo__ws_holds_context(w[k].ws), 0);
      ASSERT_STR_EQ(mem_take(&m[k], NULL), "\x81\x02ok");
      ludo__net_conn_eof(&m[k].conn);
      mem_finish(&m[k]);
      mem_free(&m[k]);
    }
  }
  free(script);
  free(big);
  net_core_free(&core);
}

TEST_IMPL(ws_unmasked_frame) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  MEM_FEED(&m, "\x81\x05Hello");
  ASSERT_EQ(w.messages, 0);
  expect_fail(&m, &w, 1002);
  net_core_free(&core);
}

TEST_IMPL(ws_invalid_utf8) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  net_core_init(&core);
  /* Valid UTF-8 cut between fragments is fine. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 0, 1, "price \xe2\x82");
  CLIENT(&m, 1, 0, "\xac 5");
  ASSERT_EQ(w.messages, 1);
  ASSERT_STR_EQ(w.last, "price \xe2\x82\xac 5");
  /* Invalid in one frame: 1007. */
  CLIENT(&m, 1, 1, "bad \xc3\x28");
  ASSERT_EQ(w.messages, 1);
  expect_fail(&m, &w, 1007);
  /* Invalid across fragments: 1007. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 0, 1, "\xe2\x82");
  CLIENT(&m, 1, 0, "\x28");
  ASSERT_EQ(w.messages, 0);
  expect_fail(&m, &w, 1007);
  /* A surrogate encoded in UTF-8: 1007. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 1, "\xed\xa0\x80");
  expect_fail(&m, &w, 1007);
  /* Binary messages are not text. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 2, "\xc3\x28");
  ASSERT_EQ(w.messages, 1);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

TEST_IMPL(ws_message_too_big) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  w.use_o = 1;
  ludo__ws_options_init(&w.o);
  w.o.max_message = 16;
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 1, "0123456789abcdef"); /* 16: at the limit */
  ASSERT_EQ(w.messages, 1);
  CLIENT(&m, 1, 1, "0123456789abcdefg"); /* 17 */
  ASSERT_EQ(w.messages, 1);
  expect_fail(&m, &w, 1009);
  memset(&w, 0, sizeof w);
  w.use_o = 1;
  ludo__ws_options_init(&w.o);
  w.o.max_message = 16;
  ws_on(&m, &core, &w);
  CLIENT(&m, 0, 2, "0123456789");
  CLIENT(&m, 1, 0, "0123456789");
  ASSERT_EQ(w.messages, 0);
  expect_fail(&m, &w, 1009);
  net_core_free(&core);
}

/* A WebSocket whose messages may be `max` bytes long. */
static void ws_on_max(mem_t *m, ludo__core_t *core, wsrec_t *w, size_t max) {
  memset(w, 0, sizeof *w);
  w->use_o = 1;
  ludo__ws_options_init(&w->o);
  w->o.max_message = max;
  ws_on(m, core, w);
}

/* max_message bounds a message's payload however it is fragmented: 256
 * fragments of 4 KiB make a message of 1 MiB less 1000 bytes as one frame
 * does (a load review found it refused). wslay keeps a chunk per
 * fragment, so their number is bounded apart: max(1024, max_message / 64)
 * fragments, the 1009 coming at the head of the one past it. */
TEST_IMPL(ws_tiny_fragments) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  char *big = malloc(8192), script[512];
  size_t n = 0, max = (size_t)1 << 20;
  int i;
  ASSERT_NOT_NULL(big);
  memset(big, 'a', 8192);
  net_core_init(&core);
  /* 255 fragments of 4 KiB and one of 4096 - 1000: accepted. */
  ws_on_max(&m, &core, &w, max);
  client(&m, 0, 1, big, 4096);
  for (i = 1; i < 255; i++) client(&m, 0, 0, big, 4096);
  client(&m, 1, 0, big, 4096 - 1000);
  ASSERT_EQ(w.messages, 1);
  ASSERT_UINT_EQ(w.last_size, max - 1000);
  ASSERT_EQ(m.close_req, 0);
  /* ... and 1001 bytes more in a last fragment: 1009 at its head. */
  client(&m, 0, 1, big, 4096);
  for (i = 1; i < 255; i++) client(&m, 0, 0, big, 4096);
  ASSERT_EQ(m.close_req, 0);
  client(&m, 1, 0, big, 4096 + 1);
  ASSERT_EQ(w.messages, 1);
  expect_fail(&m, &w, 1009);
  /* 1-byte fragments under a max_message of 4096: the 1025th fragment
   * is refused, its payload still under the limit. */
  ws_on_max(&m, &core, &w, 4096);
  CLIENT(&m, 0, 1, "x");
  for (i = 1; i <= 2048 && m.close_req == 0; i++) CLIENT(&m, 0, 0, "x");
  ASSERT_EQ(i, 1025);
  ASSERT_EQ(w.messages, 0);
  expect_fail(&m, &w, 1009);
  /* In one read: a message of 15 fragments (115 bytes) and the first
   * fragment of one that passes 100 bytes: the first is delivered, the
   * second refused. */
  ws_on_max(&m, &core, &w, 100);
  n += net_client_frame(script + n, 0, 2, "x", 1);
  for (i = 0; i < 13; i++) n += net_client_frame(script + n, 0, 0, "x", 1);
  n += net_client_frame(script + n, 1, 0, big, 80);
  n += net_client_frame(script + n, 0, 2, big, 101);
  mem_feed(&m, script, n);
  ASSERT_EQ(w.messages, 1);
  ASSERT_UINT_EQ(w.last_len, 94);
  expect_fail(&m, &w, 1009);
  free(big);
  net_core_free(&core);
}

/* A head that declares a message over max_message is refused at once
 * (1009), before any payload: a peer declaring 2^62 bytes and then
 * silent does not hold the connection until the keepalive. */
TEST_IMPL(ws_head_without_payload) {
  /* Text frames of 1 GiB and of 2^62 bytes (64-bit lengths), mask
   * 1 2 3 4, no payload; and a continuation taking a message past it. */
  static const char head[] = {'\x81', '\xff', 0, 0, 0, 0, 0x40, 0, 0, 0,
                              1, 2, 3, 4};
  static const char head62[] = {'\x81', '\xff', 0x40, 0, 0, 0, 0, 0, 0, 0,
                                1, 2, 3, 4};
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  int i;
  net_core_init(&core);
  for (i = 0; i < 3; i++) {
    ws_on_max(&m, &core, &w, 16);
    if (i == 0) {
      mem_feed(&m, head, sizeof head);
    } else if (i == 1) {
      mem_feed(&m, head62, 5); /* a head in two reads */
      ASSERT_EQ(m.close_req, 0);
      mem_feed(&m, head62 + 5, sizeof head62 - 5);
    } else {
      CLIENT(&m, 0, 1, "0123456789");
      ASSERT_EQ(m.close_req, 0);
      mem_feed(&m, "\x80\x87\x01\x02\x03\x04", 6); /* 7 more: 17 */
    }
    ASSERT_EQ(w.messages, 0);
    expect_fail(&m, &w, 1009);
  }
  net_core_free(&core);
}

/* A server's subprotocol is named in the 101 only when the client offers
 * it among its tokens (MCP's WebSocket clients offer "mcp"). */
TEST_IMPL(ws_subprotocol) {
  static const char *const offered[] = {"mcp", " chat , mcp ", "chat",
                                        "mcpx", NULL};
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  char req[320];
  int i;
  net_core_init(&core);
  for (i = 0; i < 5; i++) {
    const char *out;
    memset(&w, 0, sizeof w);
    w.use_o = 1;
    ludo__ws_options_init(&w.o);
    w.o.subprotocol = "mcp";
    conn_on(&m, &core, &w);
    snprintf(req, sizeof req,
             "GET /mcp HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s%s%s"
             "Sec-WebSocket-Version: 13\r\n\r\n",
             offered[i] ? "Sec-WebSocket-Protocol: " : "",
             offered[i] ? offered[i] : "", offered[i] ? "\r\n" : "");
    mem_feed(&m, req, strlen(req));
    ASSERT_OK(w.accept_rc);
    out = mem_take(&m, NULL);
    ASSERT_STR_CONTAINS(out, "101 Switching Protocols");
    if (i < 2)
      ASSERT_STR_CONTAINS(out, "\r\nSec-WebSocket-Protocol: mcp\r\n");
    else
      ASSERT_TRUE(strstr(out, "Sec-WebSocket-Protocol") == NULL);
    ludo__net_conn_eof(&m.conn);
    mem_finish(&m);
    mem_free(&m);
  }
  net_core_free(&core);
}

/* Frames that break the protocol: each closes with 1002. */
TEST_IMPL(ws_bad_frames) {
  ludo__core_t core;
  char buf[512];
  size_t n;
  int i;
  net_core_init(&core);
  for (i = 0; i < 8; i++) {
    mem_t m;
    wsrec_t w;
    memset(&w, 0, sizeof w);
    ws_on(&m, &core, &w);
    switch (i) {
    case 0: /* a ping longer than 125 bytes (126 in 16 bits) */
      memset(buf, 0, sizeof buf);
      memcpy(buf, "\x89\xfe\x00\x7e\x00\x00\x00\x00", 8);
      mem_feed(&m, buf, 8 + 126);
      break;
    case 1: /* a fragmented ping */
      CLIENT(&m, 0, 9, "p");
      break;
    case 2: /* a reserved opcode */
      CLIENT(&m, 1, 3, "x");
      break;
    case 3: /* RSV1 without an extension */
      MEM_FEED(&m, "\xc1\x80\x00\x00\x00\x00");
      break;
    case 4: /* a continuation with nothing to continue */
      CLIENT(&m, 1, 0, "x");
      break;
    case 5: /* a length not in its shortest form */
      MEM_FEED(&m, "\x81\xfe\x00\x05\x00\x00\x00\x00hello");
      break;
    case 6: /* a close code that may not be sent */
      CLIENT(&m, 1, 8, "\x03\xe7");
      break;
    case 7: /* a new message inside a fragmented one */
      n = net_client_frame(buf, 0, 1, "a", 1);
      n += net_client_frame(buf + n, 1, 1, "b", 1);
      mem_feed(&m, buf, n);
      break;
    }
    ASSERT_EQ(w.messages, 0);
    expect_fail(&m, &w, 1002);
  }
  net_core_free(&core);
}

/* A ping and then a close from the peer, in one read or byte by byte:
 * the pong is owed (RFC 6455 5.5.2: the ping came first) and goes out
 * before the close's echo; wslay alone would drop it once the close is
 * queued. */
static void ping_then_close(ludo__core_t *core) {
  char script[64];
  size_t n = 0, i;
  int pass;
  n += net_client_frame(script + n, 1, 9, "p1", 2);
  n += net_client_frame(script + n, 1, 8, "\x03\xe8" "bye", 5);
  for (pass = 0; pass < 2; pass++) {
    mem_t m;
    wsrec_t w;
    frame_t f[4];
    memset(&w, 0, sizeof w);
    ws_on(&m, core, &w);
    if (pass == 0)
      mem_feed(&m, script, n);
    else
      for (i = 0; i < n; i++) mem_feed(&m, script + i, 1);
    ASSERT_EQ(frames(&m, f, 4), 2);
    ASSERT_EQ(f[0].opcode, 0xa);
    ASSERT_STR_EQ(f[0].data, "p1");
    ASSERT_EQ(f[1].opcode, 8);
    ASSERT_STR_EQ(f[1].data + 2, "bye");
    ASSERT_EQ(m.close_req, 1);
    ludo__net_conn_eof(&m.conn);
    mem_finish(&m);
    ASSERT_EQ(w.close_code, 1000);
    mem_free(&m);
  }
}

TEST_IMPL(ws_close_from_peer) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  frame_t f[2];
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 8, "\x03\xe8" "bye");
  ASSERT_EQ(frames(&m, f, 2), 1); /* the echo */
  ASSERT_EQ(f[0].opcode, 8);
  ASSERT_UINT_EQ(f[0].len, 5);
  ASSERT_STR_EQ(f[0].data + 2, "bye");
  ASSERT_EQ(m.close_req, 1);
  ASSERT_ERR(ludo__ws_send(w.ws, 0, "late", 4), LUDO_ECLOSED);
  ASSERT_EQ(w.closes, 0); /* not before the connection is gone */
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  ASSERT_EQ(w.closes, 1);
  ASSERT_EQ(w.close_code, 1000);
  ASSERT_STR_EQ(w.close_reason, "bye");
  mem_free(&m);
  /* Without a code: 1005. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 8, "");
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_UINT_EQ(f[0].len, 0);
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1005);
  mem_free(&m);
  ping_then_close(&core);
  net_core_free(&core);
}

TEST_IMPL(ws_close_from_server) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  frame_t f[2];
  char longer[130];
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  ASSERT_ERR(ludo__ws_close(w.ws, 1005, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo__ws_close(w.ws, 999, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo__ws_close(w.ws, 1006, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo__ws_close(w.ws, 5000, NULL), LUDO_EINVAL);
  memset(longer, 'r', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  ASSERT_ERR(ludo__ws_close(w.ws, 1000, longer), LUDO_EINVAL);
  ASSERT_ERR(ludo__ws_close(w.ws, 1000, "\xff"), LUDO_EINVAL);
  ASSERT_OK(ludo__ws_close(w.ws, 4000, "done"));
  ASSERT_ERR(ludo__ws_close(w.ws, 1000, NULL), LUDO_ECLOSED);
  ASSERT_ERR(ludo__ws_send(w.ws, 0, "x", 1), LUDO_ECLOSED);
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_EQ(f[0].opcode, 8);
  ASSERT_STR_EQ(f[0].data + 2, "done");
  ASSERT_EQ(m.timer_ms, 5000); /* waiting for the answer */
  ASSERT_EQ(m.close_req, 0);
  CLIENT(&m, 1, 1, "dropped"); /* messages after our close are dropped */
  ASSERT_EQ(w.messages, 0);
  CLIENT(&m, 1, 8, "\x0f\xa0" "done");
  ASSERT_EQ(m.close_req, 1);
  ASSERT_UINT_EQ(m.out_len, 0); /* no second close frame */
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 4000);
  ASSERT_STR_EQ(w.close_reason, "done");
  mem_free(&m);
  /* No answer: the close timeout ends it, gracefully once the close
   * frame went out (ws_close_timeout_releases_output: when it did not). */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  ASSERT_OK(ludo__ws_close(w.ws, 1000, NULL));
  mem_ack(&m);
  mem_fire(&m);
  ASSERT_EQ(m.close_req, 1);
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1000);
  mem_free(&m);
  /* From the message callback, after an echo. */
  memset(&w, 0, sizeof w);
  w.echo = 1;
  w.close_on_message = 1;
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 1, "hi");
  ASSERT_OK(w.send_rc);
  ASSERT_EQ(frames(&m, f, 2), 2);
  ASSERT_EQ(f[0].opcode, 1);
  ASSERT_STR_EQ(f[0].data, "hi");
  ASSERT_EQ(f[1].opcode, 8);
  ASSERT_STR_EQ(f[1].data + 2, "enough");
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1000);
  mem_free(&m);
  /* The server closing: 1001. */
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  ludo__net_conn_shutdown(&m.conn);
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_EQ((unsigned char)f[0].data[1], 1001 & 0xff);
  CLIENT(&m, 1, 8, "\x03\xe9");
  ASSERT_EQ(m.close_req, 1);
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1001);
  mem_free(&m);
  net_core_free(&core);
}

TEST_IMPL(ws_keepalive) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  frame_t f[2];
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  w.use_o = 1;
  ludo__ws_options_init(&w.o);
  w.o.ping_interval_ms = 1000;
  w.o.pong_timeout_ms = 500;
  ws_on(&m, &core, &w);
  ASSERT_EQ(m.timer_ms, 1000);
  /* A message: the timer is not moved for it, but when it expires the
   * ping waits a full interval after the message (the loop's clock stands
   * still here: 1000 ms again). */
  CLIENT(&m, 1, 1, "early");
  ASSERT_EQ(w.messages, 1);
  ASSERT_EQ(m.timer_ms, 1000);
  mem_fire(&m);
  ASSERT_EQ(frames(&m, f, 2), 0);
  ASSERT_EQ(m.timer_ms, 1000);
  mem_fire(&m);
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_EQ(f[0].opcode, 9);
  ASSERT_UINT_EQ(f[0].len, 4);
  ASSERT_EQ(m.timer_ms, 500);
  client(&m, 1, 0xa, f[0].data, 4); /* the pong */
  ASSERT_EQ(m.timer_ms, 1000);
  mem_fire(&m);
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_EQ(f[0].opcode, 9);
  ASSERT_EQ(m.timer_ms, 500);
  CLIENT(&m, 1, 1, "alive"); /* any frame shows the peer is there */
  ASSERT_EQ(m.timer_ms, 1000);
  mem_fire(&m);
  ASSERT_EQ(frames(&m, f, 2), 1);
  mem_fire(&m); /* no answer at all: 1011 */
  ASSERT_EQ(frames(&m, f, 2), 1);
  ASSERT_EQ(f[0].opcode, 8);
  ASSERT_STR_EQ(f[0].data + 2, "keepalive ping timeout");
  ASSERT_EQ(m.close_req, 1); /* no waiting for a silent peer */
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1011);
  mem_free(&m);
  /* Pings off. */
  memset(&w, 0, sizeof w);
  w.use_o = 1;
  ludo__ws_options_init(&w.o);
  w.o.ping_interval_ms = 0;
  ws_on(&m, &core, &w);
  ASSERT_EQ(m.timer_ms, 0);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

/* Sends take two paths: straight into the conn when wslay holds nothing,
 * through wslay's queue when it does (a pong it owes, say). Either way the
 * frames are whole, valid (decoded by wslay's client side) and in order,
 * with every length form of RFC 6455 5.2. */
TEST_IMPL(ws_send_paths) {
  static const size_t sizes[] = {0, 125, 126, 65535, 65536, 70000};
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  frame_t f[4];
  char script[256], *big;
  size_t n = 0, i;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  w.echo = 1;
  ws_on(&m, &core, &w);
  CLIENT(&m, 1, 1, "a"); /* nothing pending: the echo goes straight */
  ASSERT_OK(w.send_rc);
  ASSERT_EQ(frames(&m, f, 4), 1);
  ASSERT_EQ(f[0].opcode, 1);
  ASSERT_STR_EQ(f[0].data, "a");
  /* A ping first: wslay owes its pong when the echo is sent, so the echo
   * waits behind it in wslay's queue. */
  n += net_client_frame(script + n, 1, 9, "p1", 2);
  n += net_client_frame(script + n, 1, 1, "b", 1);
  mem_feed(&m, script, n);
  ASSERT_OK(w.send_rc);
  ASSERT_EQ(frames(&m, f, 4), 2);
  ASSERT_EQ(f[0].opcode, 0xa);
  ASSERT_STR_EQ(f[0].data, "p1");
  ASSERT_EQ(f[1].opcode, 1);
  ASSERT_STR_EQ(f[1].data, "b");
  /* The message first: its echo is written before the pong is owed. */
  n = net_client_frame(script, 1, 1, "c", 1);
  n += net_client_frame(script + n, 1, 9, "p2", 2);
  mem_feed(&m, script, n);
  ASSERT_EQ(frames(&m, f, 4), 2);
  ASSERT_EQ(f[0].opcode, 1);
  ASSERT_STR_EQ(f[0].data, "c");
  ASSERT_EQ(f[1].opcode, 0xa);
  ASSERT_STR_EQ(f[1].data, "p2");
  mem_ack(&m);
  /* Every length form, text and binary. */
  big = malloc(70000);
  ASSERT_NOT_NULL(big);
  memset(big, 'x', 70000);
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    ASSERT_OK(ludo__ws_send(w.ws, (int)(i & 1), big, sizes[i]));
    ASSERT_EQ(frames(&m, f, 4), 1);
    ASSERT_EQ(f[0].fin, 1);
    ASSERT_EQ(f[0].masked, 0);
    ASSERT_EQ(f[0].opcode, (i & 1) ? 2 : 1);
    ASSERT_UINT_EQ(f[0].len, sizes[i]);
    mem_ack(&m);
  }
  free(big);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}

TEST_IMPL(ws_send_queue) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  frame_t f[4];
  char payload[80];
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  w.use_o = 1;
  ludo__ws_options_init(&w.o);
  w.o.max_queued = 100;
  ws_on(&m, &core, &w);
  mem_ack(&m); /* the 101 is sent */
  ASSERT_ERR(ludo__ws_send(w.ws, 0, "\xc3\x28", 2), LUDO_EINVAL);
  ASSERT_OK(ludo__ws_send(w.ws, 1, "\xc3\x28", 2));
  ASSERT_EQ(frames(&m, f, 4), 1);
  ASSERT_EQ(f[0].opcode, 2);
  mem_ack(&m);
  memset(payload, 'p', sizeof payload);
  ASSERT_OK(ludo__ws_send(w.ws, 0, payload, sizeof payload));
  ASSERT_UINT_EQ(ludo__ws_queued(w.ws), 82);
  ASSERT_ERR(ludo__ws_send(w.ws, 0, payload, sizeof payload), LUDO_EBUSY);
  ASSERT_OK(ludo__ws_send(w.ws, 0, payload, 10)); /* still fits */
  ASSERT_EQ(w.drains, 0);
  mem_ack(&m);
  ASSERT_EQ(w.drains, 1);
  ASSERT_UINT_EQ(ludo__ws_queued(w.ws), 0);
  ASSERT_OK(ludo__ws_send(w.ws, 0, payload, sizeof payload));
  /* One message larger than the bound goes into an empty queue. */
  mem_ack(&m);
  {
    char big[300];
    memset(big, 'b', sizeof big);
    ASSERT_OK(ludo__ws_send(w.ws, 1, big, sizeof big));
  }
  ASSERT_EQ(frames(&m, f, 4), 4);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  ASSERT_EQ(w.drains, 1);
  mem_free(&m);
  net_core_free(&core);
}

/* The output budget shared by connections (conn.h): a WebSocket whose
 * peer is behind is refused a send that would take the budget past its
 * bound; one with nothing waiting always sends; under the free allowance
 * nothing is counted; what a connection counted goes back as its bytes
 * are sent and when it closes. */
TEST_IMPL(ws_output_budget) {
  ludo__core_t core;
  ludo__net_budget_t b;
  mem_t m1, m2;
  wsrec_t w1, w2;
  char *big = malloc(100 << 10);
  ASSERT_NOT_NULL(big);
  memset(big, 'b', 100 << 10);
  atomic_init(&b.used, 0);
  atomic_init(&b.max, (size_t)150 << 10);
  net_core_init(&core);
  memset(&w1, 0, sizeof w1);
  memset(&w2, 0, sizeof w2);
  ws_on(&m1, &core, &w1);
  ws_on(&m2, &core, &w2);
  ludo__net_conn_set_budget(&m1.conn, &b);
  ludo__net_conn_set_budget(&m2.conn, &b);
  mem_ack(&m1); /* the 101s are sent */
  mem_ack(&m2);
  /* small messages stay under the allowance: nothing counted */
  ASSERT_OK(ludo__ws_send(w1.ws, 0, "hello", 5));
  ASSERT_OK(ludo__ws_send(w1.ws, 0, "hello", 5));
  ASSERT_UINT_EQ(atomic_load(&b.used), 0);
  mem_ack(&m1);
  /* each connection's first big message goes (its queue was empty), even
   * past the bound together */
  ASSERT_OK(ludo__ws_send(w1.ws, 0, big, 100 << 10));
  ASSERT_TRUE(atomic_load(&b.used) > (size_t)100 << 10);
  ASSERT_OK(ludo__ws_send(w2.ws, 0, big, 100 << 10));
  ASSERT_TRUE(atomic_load(&b.used) > (size_t)200 << 10);
  /* more while their peers are behind: refused, even one byte */
  ASSERT_ERR(ludo__ws_send(w1.ws, 0, "x", 1), LUDO_EBUSY);
  ASSERT_ERR(ludo__ws_send(w2.ws, 0, big, 100 << 10), LUDO_EBUSY);
  /* the second peer reads: its bytes no longer count, and the first may
   * add a little more (101 KiB of 150) but not another 100 KiB */
  mem_ack(&m2);
  ASSERT_EQ(w2.drains, 1);
  ASSERT_OK(ludo__ws_send(w1.ws, 0, "x", 1));
  ASSERT_ERR(ludo__ws_send(w1.ws, 0, big, 100 << 10), LUDO_EBUSY);
  ASSERT_OK(ludo__ws_send(w2.ws, 0, big, 10 << 10));
  /* a connection that goes returns what it counted */
  ludo__net_conn_eof(&m1.conn);
  mem_finish(&m1);
  ASSERT_UINT_EQ(atomic_load(&b.used), 0); /* w2 holds 10 KiB: free */
  mem_ack(&m2);
  ludo__net_conn_eof(&m2.conn);
  mem_finish(&m2);
  ASSERT_UINT_EQ(atomic_load(&b.used), 0);
  mem_free(&m1);
  mem_free(&m2);
  free(big);
  net_core_free(&core);
}

/* A peer that reads nothing: the server's close (1008, as ludo serve's
 * for a client that does not read its replies) waits behind the unsent
 * bytes; when the close handshake times out the connection ends at once,
 * without lingering, and its bytes stop counting against the output
 * budget then, not when the transport has closed (a load review saw the
 * gauge high for 10 s after the clients had gone). */
TEST_IMPL(ws_close_timeout_releases_output) {
  ludo__core_t core;
  ludo__net_budget_t b;
  mem_t m;
  wsrec_t w;
  char *big = malloc(100 << 10);
  ASSERT_NOT_NULL(big);
  memset(big, 'b', 100 << 10);
  atomic_init(&b.used, 0);
  atomic_init(&b.max, (size_t)1 << 20);
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  ws_on(&m, &core, &w);
  ludo__net_conn_set_budget(&m.conn, &b);
  mem_ack(&m);
  ASSERT_OK(ludo__ws_send(w.ws, 0, big, 100 << 10));
  ASSERT_UINT_GT(atomic_load(&b.used), (size_t)100 << 10);
  ASSERT_OK(ludo__ws_close(w.ws, 1008, "not read"));
  ASSERT_EQ(m.close_req, 0);
  mem_fire(&m); /* no close came back: the close timeout */
  ASSERT_EQ(m.close_req, 2); /* aborted, no linger */
  ASSERT_UINT_EQ(atomic_load(&b.used), 0);
  mem_finish(&m);
  ASSERT_EQ(w.closes, 1);
  ASSERT_EQ(w.close_code, 1008);
  mem_free(&m);
  free(big);
  net_core_free(&core);
}

/* An upgrade behind a request the handler still holds: the 101 and the
 * frames sent meanwhile wait; the client's first frame, sent with the
 * handshake, arrives after the switch. */
TEST_IMPL(ws_upgrade_pipelined) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  char script[1024];
  size_t n;
  const char *out, *resp, *sw;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  conn_on2(&m, &core, &w);
  n = (size_t)snprintf(script, sizeof script,
                       "GET /a HTTP/1.1\r\nHost: h\r\n\r\n%s", net_ws_upgrade);
  n += net_client_frame(script + n, 1, 1, "first", 5);
  mem_feed(&m, script, n);
  ASSERT_EQ(w.nheld, 1);
  ASSERT_EQ(w.accepts, 1);
  ASSERT_OK(w.accept_rc);
  ASSERT_OK(ludo__ws_send(w.ws, 0, "early", 5));
  ASSERT_UINT_EQ(ludo__ws_queued(w.ws), 5);
  ASSERT_UINT_EQ(m.out_len, 0);
  net_core_pump(&core);
  ASSERT_EQ(w.messages, 0); /* not before the switch */
  ASSERT_OK(ludo__http_respond(w.held[0], 200, NULL, 0, "a", 1));
  out = mem_take(&m, NULL);
  resp = strstr(out, "HTTP/1.1 200 OK");
  sw = strstr(out, "HTTP/1.1 101 Switching Protocols");
  ASSERT_NOT_NULL(resp);
  ASSERT_NOT_NULL(sw);
  ASSERT_TRUE(resp < sw);
  ASSERT_STR_CONTAINS(sw, "\r\n\r\n\x81\x05" "early");
  ASSERT_EQ(w.messages, 0);
  net_core_pump(&core);
  ASSERT_EQ(w.messages, 1);
  ASSERT_STR_EQ(w.last, "first");
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  ASSERT_EQ(w.close_code, 1006);
  mem_free(&m);
  net_core_free(&core);
}

/* The connection ends while the accepted WebSocket waits for its switch:
 * the held request is aborted and the WebSocket closes (with the code of
 * its own close, when it started one). */
TEST_IMPL(ws_gone_before_switch) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  char script[512];
  int pass;
  net_core_init(&core);
  for (pass = 0; pass < 2; pass++) {
    size_t n;
    memset(&w, 0, sizeof w);
    conn_on2(&m, &core, &w);
    n = (size_t)snprintf(script, sizeof script,
                         "GET /a HTTP/1.1\r\nHost: h\r\n\r\n%s",
                         net_ws_upgrade);
    mem_feed(&m, script, n);
    ASSERT_OK(w.accept_rc);
    if (pass == 1) ASSERT_OK(ludo__ws_close(w.ws, 4001, "never mind"));
    ludo__net_conn_eof(&m.conn);
    ASSERT_EQ(w.closes, 0);
    mem_finish(&m);
    ASSERT_EQ(w.aborted, 1);
    ASSERT_EQ(w.closes, 1);
    ASSERT_EQ(w.close_code, pass == 0 ? 1006 : 4001);
    ASSERT_UINT_EQ(m.out_len, 0);
    mem_free(&m);
  }
  net_core_free(&core);
}

/* Frames sent right after a handshake that waits (a request before it is
 * held) are kept, bounded: reading stops while they pile up, and starts
 * again once the WebSocket has taken them. */
TEST_IMPL(ws_upgrade_input_bounded) {
  ludo__core_t core;
  mem_t m;
  wsrec_t w;
  char *script, payload[1000];
  size_t n;
  int i;
  net_core_init(&core);
  memset(&w, 0, sizeof w);
  conn_on2(&m, &core, &w);
  script = malloc(80 * 1024);
  n = (size_t)snprintf(script, 1024, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n%s",
                       net_ws_upgrade);
  memset(payload, 'z', sizeof payload);
  for (i = 0; i < 70; i++)
    n += net_client_frame(script + n, 1, 2, payload, sizeof payload);
  mem_feed(&m, script, n);
  ASSERT_OK(w.accept_rc);
  ASSERT_EQ(m.paused, 1);
  ASSERT_OK(ludo__http_respond(w.held[0], 200, NULL, 0, NULL, 0));
  ASSERT_EQ(m.paused, 0);
  net_core_pump(&core);
  ASSERT_EQ(w.messages, 70);
  ASSERT_UINT_EQ(w.last_len, 1000);
  free(script);
  ludo__net_conn_eof(&m.conn);
  mem_finish(&m);
  mem_free(&m);
  net_core_free(&core);
}
