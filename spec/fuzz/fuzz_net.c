/* fuzz_net.c - runtime/net: any bytes, split into reads of varying sizes,
 * through an HTTP connection on a memory transport; with the first
 * byte's low bit set the bytes follow a valid WebSocket handshake, so they
 * reach the frame layer. Requests are answered at once, held (answered
 * after the next read) or upgraded; messages are echoed, and some close
 * the WebSocket. At the end the timer fires, the peer leaves and the
 * transport completes its close: no crash, no leak (LeakSanitizer at
 * exit), nothing left on the core. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "net/conn.h"
#include "net/http.h"
#include "net/ws.h"

typedef struct fz_s {
  ludo__net_conn_t conn;
  size_t unacked;
  uint64_t timer_ms;
  int close_req;
  ludo__http_req_t *held;
  int requests;
  ludo__ws_t *ws;
} fz_t;

static ludo__core_t core;

static void fz_write(ludo__net_conn_t *c, char *p, size_t len, size_t cap) {
  fz_t *f = c->sink_data;
  f->unacked += len;
  ludo__net_conn_free_block(c, p, cap);
}

static void fz_pause(ludo__net_conn_t *c, int paused) {
  (void)c;
  (void)paused;
}

static void fz_timer(ludo__net_conn_t *c, uint64_t ms) {
  ((fz_t *)c->sink_data)->timer_ms = ms;
}

static void fz_close(ludo__net_conn_t *c, int abort) {
  fz_t *f = c->sink_data;
  if (f->close_req < 1 + abort) f->close_req = 1 + abort;
}

static const ludo__net_sink_t sink = {fz_write, fz_pause, fz_timer,
                                      fz_close};

static void on_message(void *ud, ludo__ws_t *ws, int binary, const char *d,
                       size_t n) {
  (void)ud;
  if (n > 0 && d[0] == 'C')
    ludo__ws_close(ws, 1000, "bye");
  else
    ludo__ws_send(ws, binary, d, n);
}

static void on_close(void *ud, ludo__ws_t *ws, int code, const char *reason,
                     size_t n) {
  fz_t *f = ud;
  (void)ws;
  (void)code;
  (void)reason;
  (void)n;
  f->ws = NULL;
}

static const ludo__ws_callbacks_t ws_cbs = {on_message, on_close, NULL};

static void answer(ludo__http_req_t *req) {
  static const ludo__http_header_t h = {"Content-Type", "text/plain"};
  const char *path = ludo__http_req_path(req);
  ludo__http_respond(req, 200, &h, 1, path, strlen(path));
}

static void on_request(void *ud, ludo__http_req_t *req) {
  fz_t *f = ud;
  f->requests++;
  if (ludo__http_req_upgrade(req)) {
    if (ludo__ws_accept(req, NULL, &ws_cbs, f, &f->ws) == LUDO_ENOMEM)
      answer(req);
    return;
  }
  if (f->held == NULL && f->requests % 3 == 0) {
    f->held = req;
    return;
  }
  answer(req);
}

static void on_abort(void *ud, ludo__http_req_t *req) {
  fz_t *f = ud;
  if (f->held == req) f->held = NULL;
}

static const ludo__http_handler_t handler = {on_request, on_abort, NULL};

static const char upgrade[] =
    "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n\r\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  static size_t base; /* what the core itself holds */
  ludo__http_options_t o;
  ludo__http_conn_t *hc;
  fz_t f;
  size_t i = 1;
  if (!ready) {
    if (ludo__core_init(&core, NULL, NULL, NULL, NULL, NULL, NULL) != 0)
      abort();
    base = core.heap.live;
    ready = 1;
  }
  if (size == 0) return 0;
  memset(&f, 0, sizeof f);
  ludo__http_options_init(&o);
  o.max_header_bytes = 2048;
  o.max_body_bytes = 4096;
  o.max_pipelined = 4;
  o.write_high_water = 4096;
  ludo__net_conn_init(&f.conn, &core, &sink, &f, o.write_high_water, 0);
  if (ludo__http_conn_new(&core, &f.conn, &o, &handler, &f, &hc) != 0)
    abort();
  if (data[0] & 1) ludo__net_conn_read(&f.conn, upgrade, sizeof upgrade - 1);
  while (i < size && f.close_req == 0) {
    size_t n = 1 + data[i] % 97;
    if (n > size - i) n = size - i;
    ludo__net_conn_read(&f.conn, (const char *)data + i, n);
    i += n;
    if (f.held && (data[i - 1] & 2)) {
      ludo__http_req_t *r = f.held;
      f.held = NULL;
      answer(r);
    }
    if (data[i - 1] & 4) {
      size_t k = f.unacked;
      f.unacked = 0;
      ludo__net_conn_written(&f.conn, k);
    }
    ludo__core_poll(&core, 0);
  }
  if (f.timer_ms && f.close_req == 0) ludo__net_conn_timeout(&f.conn);
  if (f.close_req == 0) ludo__net_conn_eof(&f.conn);
  if (f.close_req == 0) ludo__net_conn_close(&f.conn, 1);
  ludo__net_conn_closed(&f.conn);
  ludo__core_poll(&core, 0);
  if (core.heap.live != base) abort(); /* everything of the input freed */
  return 0;
}
