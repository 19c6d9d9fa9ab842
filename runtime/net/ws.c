/* ws.c - WebSocket connections on wslay's event API (see ws.h).
 *
 * Reading: the bytes the conn delivers are lent to wslay for one call of
 * wslay_event_recv(), whose recv callback copies from them and says
 * "would block" when they are used up; wslay parses frames, answers pings,
 * checks UTF-8 and sizes, and calls on_msg for each complete message.
 * Writing: wslay_event_send() runs right after anything is queued (never
 * inside wslay_event_recv: a message sent from the message callback is
 * queued, and sent when the receive returns); its send callback copies
 * the frames into the conn, which always takes them, so wslay's own queue
 * is empty between calls, except before the 101 response went out. A
 * message sent while wslay holds nothing to send is framed here and
 * written to the conn directly (send_direct): the frames on the wire are
 * the same, without wslay's copy of the message and its 4 KiB passes
 * (the common case, a reply to a request).
 *
 * wslay's contexts are lent. A server WebSocket holds one (about 8.8 KB:
 * two 4 KiB buffers of wslay's) only while wslay has something of it: a
 * frame or message partly received, frames to send, a close under way.
 * When the outermost entry point returns and none of that holds, the
 * context goes back to a small spare list of the thread (its state is
 * then that of a fresh context) and the next bytes or send take one from
 * there: idle connections hold none, and busy ones share the few that
 * stay warm in the caches. Whether wslay's frame parser holds bytes is
 * counted here: the bytes handed to wslay against the frames it reported
 * (header and payload lengths: a server only takes masked frames with
 * lengths in their shortest form, anything else fails the connection); a
 * count that disagreed would only keep the context lent. A client's
 * WebSocket keeps its context.
 *
 * States: PENDING (accepted, the 101 not yet written), OPEN, CLOSING (our
 * close frame sent, waiting for the peer's), DONE (the conn is closing),
 * CLOSED (the conn is gone: the close callback ran). The connection's one
 * timer is the keepalive in OPEN and the close handshake's bound in
 * CLOSING; afterwards the conn uses it to bound its lingering.
 *
 * Lifetime: as in http.c, entry points count their depth, and a WebSocket
 * whose connection is gone is freed when the outermost returns. */
#include "net/ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <wslay/wslay.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/utf8.h"
#include "net/conn.h"
#include "net/handshake.h"

#define DEFAULT_MAX_MESSAGE ((size_t)16 << 20)
#define DEFAULT_PING_INTERVAL_MS 20000u
#define DEFAULT_PONG_TIMEOUT_MS 20000u
#define DEFAULT_CLOSE_TIMEOUT_MS 5000u
#define DEFAULT_MAX_QUEUED ((size_t)32 << 20)

/* A close reason's longest length (a control frame's payload is at most
 * 125 bytes, two of them the code). */
#define REASON_MAX 123

/* What wslay 1.1.1 holds per data frame of a message it reassembles,
 * besides the payload: a chunk of its own (24 bytes) and the payload in a
 * second block, each a malloc with its header and 32-byte minimum: a
 * 1-byte frame takes 64 bytes. */
#define FRAME_OVERHEAD 64u
/* The fewest fragments a message may have whatever max_message is. */
#define MIN_FRAGMENTS 1024u

enum { WS_PENDING, WS_OPEN, WS_CLOSING, WS_DONE, WS_CLOSED };

/* The fields a message touches come first (three cache lines), the rest
 * after: with a thousand connections each message finds its WebSocket
 * out of the caches. */
struct ludo__ws_s {
  ludo__core_t *core;
  ludo__net_conn_t *nc;        /* NULL before the switch and once gone */
  struct ev_slot_s *ev;        /* its wslay context; NULL: none lent */
  void *ud;
  ludo__ws_callbacks_t cb;
  int state;                   /* WS_* */
  int in_recv;                 /* inside wslay_event_recv */
  int depth;
  int dead;
  int close_queued;            /* our close was asked for */
  int close_pending;           /* ... and waits to be queued in wslay */
  int refused;                 /* a send was refused: drain when empty */
  int client;                  /* the client side: frames are masked */
  int awaiting_pong;
  int rx_since_arm;            /* bytes came after the timer was armed */
  int in_frame;                /* a frame begun has not ended */
  int frag;                    /* a fragmented message is incomplete */
  int bad_close;               /* a close frame with a 1-byte payload */
  int too_big;                 /* a message passed max_message, or its
                                  fragments max_fragments: 1009 */
  int send_failed;             /* a send inside the receive failed */
  uint64_t fed;                /* bytes handed to wslay in this lending */
  uint64_t framed;             /* ... the frames begun take (with heads) */
  uint64_t msg_bytes;          /* the message being received: its payload
                                  so far, frames under way included */
  uint64_t msg_frames;         /* ... and its frames (head_scan) */
  uint64_t skip;               /* payload bytes of the frame under way
                                  not yet handed to wslay */
  unsigned hd_have;            /* bytes of the next frame's head so far */
  uint8_t hd[14];              /* ... and those bytes */
  const char *rd;              /* the bytes wslay reads now */
  size_t rdlen;
  uint64_t rx_ms;              /* when bytes came last (the loop's clock) */
  ludo__task_t task;           /* reads `in` after the switch */
  ludo__ws_options_t o;
  ludo__alloc_t *heap;
  ludo__buf_t in;              /* bytes that came before the switch */
  int close_out;               /* the code of our close */
  uint32_t ping_seq;
  int code;                    /* why the connection ends (code_set) */
  int code_set;
  size_t close_why_len;
  size_t reason_len;
  char close_why[REASON_MAX + 1];
  char reason[REASON_MAX + 1];
  uint8_t rnd[64];             /* a client's masking keys, from the OS */
  size_t rnd_left;
};

static const ludo__net_proto_t ws_proto;

/* ---- lent wslay contexts ---------------------------------------------- */

/* A wslay context and the WebSocket it is lent to: wslay's user data, so
 * one context serves WebSockets one after the other. */
typedef struct ev_slot_s {
  wslay_event_context_ptr ctx;
  ludo__ws_t *ws;
  struct ev_slot_s *next;      /* in the spare list */
} ev_slot_t;

#define WS_OF(ud) (((ev_slot_t *)(ud))->ws)
/* Spare server contexts a thread keeps; freed with its last WebSocket. */
#define SPARE_MAX 8

static _Thread_local ev_slot_t *tl_spare;
static _Thread_local unsigned tl_nspare;
static _Thread_local unsigned tl_servers; /* server WebSockets alive */

static void slot_free(ev_slot_t *sl) {
  wslay_event_context_free(sl->ctx);
  free(sl);
}

static void spare_drain(void) {
  while (tl_spare) {
    ev_slot_t *sl = tl_spare;
    tl_spare = sl->next;
    slot_free(sl);
  }
  tl_nspare = 0;
}

void ludo__ws_options_init(ludo__ws_options_t *o) {
  o->max_message = DEFAULT_MAX_MESSAGE;
  o->ping_interval_ms = DEFAULT_PING_INTERVAL_MS;
  o->pong_timeout_ms = DEFAULT_PONG_TIMEOUT_MS;
  o->close_timeout_ms = DEFAULT_CLOSE_TIMEOUT_MS;
  o->max_queued = DEFAULT_MAX_QUEUED;
  o->subprotocol = NULL;
}

static void options_fill(ludo__ws_options_t *o, const ludo__ws_options_t *in) {
  ludo__ws_options_init(o);
  if (in == NULL) return;
  if (in->max_message) o->max_message = in->max_message;
  o->ping_interval_ms = in->ping_interval_ms; /* 0: no pings */
  if (in->pong_timeout_ms) o->pong_timeout_ms = in->pong_timeout_ms;
  if (in->close_timeout_ms) o->close_timeout_ms = in->close_timeout_ms;
  if (in->max_queued) o->max_queued = in->max_queued;
}

/* ---- lifetime --------------------------------------------------------- */

static void ws_free(ludo__ws_t *ws) {
  ludo__core_unpost(ws->core, &ws->task);
  if (ws->ev) slot_free(ws->ev);
  if (!ws->client && --tl_servers == 0) spare_drain();
  ludo__buf_free(&ws->in);
  ludo__free(ws->heap, ws, sizeof *ws);
}

/* wslay's state of the WebSocket, answered without a context when none
 * is lent (a fresh context's answers). */
static int ev_want_write(const ludo__ws_t *ws) {
  return ws->ev && wslay_event_want_write(ws->ev->ctx);
}

static int ev_close_sent(const ludo__ws_t *ws) {
  return ws->ev && wslay_event_get_close_sent(ws->ev->ctx);
}

static int ev_close_received(const ludo__ws_t *ws) {
  return ws->ev && wslay_event_get_close_received(ws->ev->ctx);
}

/* Gives the context back when wslay holds nothing of the WebSocket: no
 * frame partly read (every byte handed over belongs to a frame that
 * ended), no fragmented message under way, nothing to send, no close
 * sent or received. */
static void ev_return(ludo__ws_t *ws) {
  ev_slot_t *sl = ws->ev;
  wslay_event_context_ptr ctx;
  if (sl == NULL || ws->client || ws->state != WS_OPEN || ws->nc == NULL ||
      ws->close_queued || ws->in_frame || ws->frag || ws->fed != ws->framed)
    return;
  ctx = sl->ctx;
  if (wslay_event_want_write(ctx) || wslay_event_get_close_sent(ctx) ||
      wslay_event_get_close_received(ctx) ||
      !wslay_event_get_read_enabled(ctx) ||
      !wslay_event_get_write_enabled(ctx) ||
      wslay_event_get_queued_msg_length(ctx) != 0)
    return;
  ws->ev = NULL;
  sl->ws = NULL;
  if (tl_nspare >= SPARE_MAX) {
    slot_free(sl);
    return;
  }
  sl->next = tl_spare;
  tl_spare = sl;
  tl_nspare++;
}

static void enter(ludo__ws_t *ws) { ws->depth++; }

/* The outermost return frees a dead WebSocket, or gives back the wslay
 * context of a live one that no longer needs it. */
static void leave(ludo__ws_t *ws) {
  if (--ws->depth > 0) return;
  if (ws->dead)
    ws_free(ws);
  else
    ev_return(ws);
}

/* Records why the connection ends, once: the first close frame wins. */
static void set_code(ludo__ws_t *ws, int code, const char *reason,
                     size_t len) {
  if (ws->code_set) return;
  ws->code_set = 1;
  ws->code = code;
  if (len > REASON_MAX) len = REASON_MAX;
  if (len) memcpy(ws->reason, reason, len);
  ws->reason[len] = '\0';
  ws->reason_len = len;
}

/* The connection is over for the protocol: close it (gracefully: what was
 * queued goes out first). */
static void done(ludo__ws_t *ws) {
  if (ws->state >= WS_DONE) return;
  ws->state = WS_DONE;
  if (ws->nc) ludo__net_conn_close(ws->nc, 0);
}

/* The one timer: keepalive while open, the close handshake's bound while
 * closing. */
static void arm(ludo__ws_t *ws) {
  uint64_t ms = 0;
  if (ws->nc == NULL) return;
  ws->rx_since_arm = 0;
  if (ws->state == WS_OPEN)
    ms = ws->awaiting_pong ? ws->o.pong_timeout_ms : ws->o.ping_interval_ms;
  else if (ws->state == WS_CLOSING)
    ms = ws->o.close_timeout_ms;
  else
    return;
  ludo__net_conn_timer(ws->nc, ms);
}

/* ---- wslay's callbacks ------------------------------------------------ */

/* The fragments a message may have: each costs wslay FRAME_OVERHEAD
 * besides its payload, so a message holds at most max_message of payload
 * and about as much again of overhead (64 KiB for a small max_message). */
static uint64_t max_fragments(const ludo__ws_t *ws) {
  uint64_t n = ws->o.max_message / FRAME_OVERHEAD;
  return n < MIN_FRAGMENTS ? MIN_FRAGMENTS : n;
}

/* A data frame's head is complete (payload length n): the message it
 * belongs to is refused (1009) as soon as its payload would pass
 * max_message, however it is fragmented, or its fragments pass
 * max_fragments. wslay itself looks at a length only once the first
 * payload byte came, so a head declaring 2^62 bytes and then silence
 * would hold the connection until the keepalive. Once refused, wslay
 * gets no byte past that head (the messages before it are delivered)
 * and feed() fails the connection. */
static void msg_charge(ludo__ws_t *ws, int opcode, uint64_t n) {
  if (opcode == WSLAY_CONTINUATION_FRAME) {
    ws->msg_frames++;
    ws->msg_bytes = n > UINT64_MAX - ws->msg_bytes ? UINT64_MAX
                                                   : ws->msg_bytes + n;
  } else {
    ws->msg_frames = 1;
    ws->msg_bytes = n;
  }
  if (ws->msg_bytes > ws->o.max_message ||
      ws->msg_frames > max_fragments(ws))
    ws->too_big = 1;
}

/* Follows the frames in the bytes about to be handed to wslay (p, n):
 * the heads (RFC 6455 5.2: 2 bytes, 2 or 8 of extended length, 4 of
 * mask) and the payloads between them, so that a data frame is charged
 * as soon as its head is whole. Returns how many of the bytes wslay may
 * have: all, or those up to the end of a head refused. What wslay
 * refuses as malformed it refuses itself. */
static size_t head_scan(ludo__ws_t *ws, const uint8_t *p, size_t n) {
  size_t n0 = n;
  while (n > 0 && !ws->too_big) {
    unsigned need;
    uint64_t len;
    if (ws->skip > 0) {
      size_t k = ws->skip < n ? (size_t)ws->skip : n;
      ws->skip -= k;
      p += k;
      n -= k;
      continue;
    }
    ws->hd[ws->hd_have++] = *p++;
    n--;
    if (ws->hd_have < 2) continue;
    len = ws->hd[1] & 0x7f;
    need = 2 + (len == 126 ? 2 : len == 127 ? 8 : 0) +
           ((ws->hd[1] & 0x80) ? 4 : 0);
    if (ws->hd_have < need) continue;
    if (len >= 126) {
      unsigned i, k = len == 126 ? 2 : 8;
      len = 0;
      for (i = 0; i < k; i++) len = len << 8 | ws->hd[2 + i];
    }
    ws->hd_have = 0;
    ws->skip = len;
    if (!(ws->hd[0] & 0x8)) /* a data frame: text, binary, continuation */
      msg_charge(ws, ws->hd[0] & 0xf, len);
  }
  return n0 - n;
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                       int flags, void *ud) {
  ludo__ws_t *ws = WS_OF(ud);
  size_t n = len < ws->rdlen ? len : ws->rdlen;
  (void)flags;
  if (n == 0 || ws->too_big) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  n = head_scan(ws, (const uint8_t *)ws->rd, n);
  if (n == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  memcpy(buf, ws->rd, n);
  ws->rd += n;
  ws->rdlen -= n;
  ws->fed += n;
  return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data,
                       size_t len, int flags, void *ud) {
  ludo__ws_t *ws = WS_OF(ud);
  (void)flags;
  if (ws->nc == NULL || ludo__net_conn_write(ws->nc, data, len) != 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return (ssize_t)len;
}

static void on_msg(wslay_event_context_ptr ctx,
                   const struct wslay_event_on_msg_recv_arg *arg, void *ud) {
  ludo__ws_t *ws = WS_OF(ud);
  (void)ctx;
  switch (arg->opcode) {
  case WSLAY_TEXT_FRAME:
  case WSLAY_BINARY_FRAME:
    /* After our close frame the peer's messages are dropped. */
    if (ws->state != WS_OPEN || ws->close_queued) return;
    ws->core->in_callback++;
    ws->cb.message(ws->ud, ws, arg->opcode == WSLAY_BINARY_FRAME,
                   arg->msg ? (const char *)arg->msg : "", arg->msg_length);
    ws->core->in_callback--;
    return;
  case WSLAY_CONNECTION_CLOSE:
    if (arg->status_code == 0)
      set_code(ws, 1005, "", 0);
    else
      set_code(ws, arg->status_code, (const char *)arg->msg + 2,
               arg->msg_length - 2);
    return;
  default: /* pings are answered by wslay; pongs count as any frame */
    return;
  }
}

/* A client masks every frame with 4 random bytes (RFC 6455 section 5.3),
 * drawn from the OS 64 bytes at a time. */
static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                      void *ud) {
  ludo__ws_t *ws = WS_OF(ud);
  (void)ctx;
  while (len > 0) {
    size_t n;
    if (ws->rnd_left == 0) {
      if (uv_random(NULL, NULL, ws->rnd, sizeof ws->rnd, 0, NULL) != 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
      }
      ws->rnd_left = sizeof ws->rnd;
    }
    n = len < ws->rnd_left ? len : ws->rnd_left;
    memcpy(buf, ws->rnd + sizeof ws->rnd - ws->rnd_left, n);
    ws->rnd_left -= n;
    buf += n;
    len -= n;
  }
  return 0;
}

/* A frame begins: the bytes it takes, its head included (2 bytes, 4 of
 * mask for a server, 2 or 8 of extended length), and whether a
 * fragmented message is left incomplete. */
static void on_frame_start(wslay_event_context_ptr ctx,
                           const struct wslay_event_on_frame_recv_start_arg *a,
                           void *ud) {
  ludo__ws_t *ws = WS_OF(ud);
  uint64_t n = a->payload_length;
  ws->framed += 2 + (ws->client ? 0 : 4) + (n < 126 ? 0 : n <= 0xffff ? 2 : 8) +
                n;
  ws->in_frame = 1;
  if (!(a->opcode & 0x8)) /* a data frame: text, binary, continuation */
    ws->frag = !a->fin;
  /* A close body starts with a 2-byte code (RFC 6455 5.5.1); wslay takes
   * one byte as no code and would echo an empty close. */
  if (a->opcode == WSLAY_CONNECTION_CLOSE && n == 1) ws->bad_close = 1;
  /* Once a close is queued wslay drops every other control frame, so a
   * pong owed to a ping that came before this close in the same read
   * would be lost (RFC 6455 5.5.2 owes it). Send what is queued now,
   * before wslay queues its close reply: wslay's send side keeps its
   * own state apart from the receive under way. */
  if (a->opcode == WSLAY_CONNECTION_CLOSE && !ws->close_queued &&
      wslay_event_want_write(ctx) && wslay_event_send(ctx) != 0)
    ws->send_failed = 1;
}

static void on_frame_end(wslay_event_context_ptr ctx, void *ud) {
  (void)ctx;
  WS_OF(ud)->in_frame = 0;
}

static const struct wslay_event_callbacks server_cb = {
    recv_cb, send_cb, NULL, on_frame_start, NULL, on_frame_end, on_msg};
static const struct wslay_event_callbacks client_cb = {
    recv_cb, send_cb, genmask_cb, on_frame_start, NULL, on_frame_end, on_msg};

/* The WebSocket's wslay context, lent now if it holds none: a spare one
 * of the thread's (a server's) or a new one. NULL: out of memory. */
static wslay_event_context_ptr ev_get(ludo__ws_t *ws) {
  ev_slot_t *sl = ws->ev;
  int rc;
  if (sl) return sl->ctx;
  if (!ws->client && tl_spare) {
    sl = tl_spare;
    tl_spare = sl->next;
    tl_nspare--;
  } else {
    sl = malloc(sizeof *sl);
    if (sl == NULL) return NULL;
    rc = ws->client
             ? wslay_event_context_client_init(&sl->ctx, &client_cb, sl)
             : wslay_event_context_server_init(&sl->ctx, &server_cb, sl);
    if (rc != 0) {
      free(sl);
      return NULL;
    }
  }
  sl->ws = ws;
  sl->next = NULL;
  ws->ev = sl;
  ws->fed = ws->framed = 0;
  ws->in_frame = ws->frag = 0;
  wslay_event_config_set_max_recv_msg_length(sl->ctx, ws->o.max_message);
  return sl->ctx;
}

/* ---- sending ---------------------------------------------------------- */

/* Moves what wslay queued into the conn and hands it to the transport. */
static void pump(ludo__ws_t *ws) {
  if (ws->nc == NULL || ws->state >= WS_DONE || ws->in_recv) return;
  if (ws->ev && wslay_event_send(ws->ev->ctx) != 0) {
    ws->state = WS_DONE;
    ludo__net_conn_close(ws->nc, 1);
    return;
  }
  ludo__net_conn_flush(ws->nc);
}

static ssize_t frame_send_cb(const uint8_t *data, size_t len, int flags,
                             void *ud) {
  ludo__ws_t *ws = ud;
  (void)flags;
  if (ws->nc == NULL || ludo__net_conn_write(ws->nc, data, len) != 0)
    return -1;
  return (ssize_t)len;
}

static ssize_t frame_recv_cb(uint8_t *buf, size_t len, int flags, void *ud) {
  (void)buf;
  (void)len;
  (void)flags;
  (void)ud;
  return -1;
}

/* Fails the connection after wslay's receive failed (its event context is
 * then unusable): a close frame with `code`, written with wslay's frame
 * API, then the end of the connection. */
static void fail(ludo__ws_t *ws, int code, const char *reason) {
  static const struct wslay_frame_callbacks fcb = {frame_send_cb,
                                                   frame_recv_cb, NULL};
  wslay_frame_context_ptr fc;
  uint8_t payload[2 + REASON_MAX];
  size_t n = strlen(reason);
  set_code(ws, code, reason, n);
  if (ws->nc && !ev_close_sent(ws) &&
      wslay_frame_context_init(&fc, &fcb, ws) == 0) {
    struct wslay_frame_iocb iocb;
    payload[0] = (uint8_t)(code >> 8);
    payload[1] = (uint8_t)(code & 0xff);
    memcpy(payload + 2, reason, n);
    memset(&iocb, 0, sizeof iocb);
    iocb.fin = 1;
    iocb.opcode = WSLAY_CONNECTION_CLOSE;
    iocb.payload_length = n + 2;
    iocb.data = payload;
    iocb.data_length = n + 2;
    wslay_frame_send(fc, &iocb);
    wslay_frame_context_free(fc);
    ludo__net_conn_flush(ws->nc);
  }
  done(ws);
}

/* After frames were received or sent: ends the connection once the
 * closing handshake is over, or once wslay failed it (it queued and sent
 * a close frame of its own: 1002, 1007 or 1009). */
static void settle(ludo__ws_t *ws) {
  if (ws->nc == NULL || ws->state >= WS_DONE || !ev_close_sent(ws))
    return;
  if (wslay_event_get_close_received(ws->ev->ctx) ||
      !wslay_event_get_read_enabled(ws->ev->ctx)) {
    set_code(ws, wslay_event_get_status_code_sent(ws->ev->ctx), "", 0);
    done(ws);
  }
}

/* Queues our close frame in wslay once that keeps the order of what was
 * sent: not inside a receive (messages sent from the message callback are
 * still to be queued: wslay would put a control frame before them) and
 * not before the switch. Messages go first, then the close. */
static void send_close(ludo__ws_t *ws) {
  wslay_event_context_ptr ctx;
  int r;
  if (!ws->close_pending || ws->in_recv || ws->nc == NULL ||
      ws->state >= WS_DONE)
    return;
  ws->close_pending = 0;
  pump(ws);
  ctx = ev_get(ws);
  r = ctx == NULL ? WSLAY_ERR_NOMEM
                  : wslay_event_queue_close(ctx, (uint16_t)ws->close_out,
                                            (const uint8_t *)ws->close_why,
                                            ws->close_why_len);
  if (r == WSLAY_ERR_NOMEM) {
    ws->state = WS_DONE;
    ludo__net_conn_close(ws->nc, 1);
    return;
  }
  pump(ws); /* r may say the peer's close came first: nothing to add */
  settle(ws);
}

/* Starts our side of the closing handshake. Returns 0 or LUDO_ECLOSED. */
static int start_close(ludo__ws_t *ws, int code, const char *reason,
                       size_t len) {
  if (ws->close_queued || ws->state >= WS_CLOSING || ev_close_received(ws))
    return LUDO_ECLOSED;
  ws->close_queued = 1;
  ws->close_pending = 1;
  ws->close_out = code;
  memcpy(ws->close_why, reason, len);
  ws->close_why[len] = '\0';
  ws->close_why_len = len;
  set_code(ws, code, reason, len);
  if (ws->state == WS_OPEN) {
    ws->state = WS_CLOSING;
    arm(ws);
  }
  send_close(ws);
  return 0;
}

/* ---- receiving -------------------------------------------------------- */

/* Lends `data` to wslay for one receive, then sends what it queued. */
static void feed(ludo__ws_t *ws, const char *data, size_t len) {
  wslay_event_context_ptr ctx;
  int r;
  if (ws->state >= WS_DONE) return;
  ctx = ev_get(ws);
  ws->rd = data;
  ws->rdlen = len;
  ws->in_recv = 1;
  r = ctx ? wslay_event_recv(ctx) : WSLAY_ERR_NOMEM;
  ws->in_recv = 0;
  ws->rd = NULL;
  ws->rdlen = 0;
  if (ws->nc == NULL || ws->state >= WS_DONE) return;
  if (ws->send_failed) {
    ws->state = WS_DONE;
    ludo__net_conn_close(ws->nc, 1);
    return;
  }
  if (ws->too_big) {
    fail(ws, 1009, "message too big");
    return;
  }
  if (r == WSLAY_ERR_CALLBACK_FAILURE || ws->bad_close) {
    fail(ws, 1002, "malformed frame");
    return;
  }
  if (r != 0) {
    fail(ws, 1011, "out of memory");
    return;
  }
  /* Anything from the peer shows it is alive. The keepalive timer is
   * not moved for each read (a timer heap operation per message): its
   * expiry looks at when bytes last came (ws_timeout). */
  ws->rx_ms = uv_now(ws->core->loop);
  ws->rx_since_arm = 1;
  pump(ws);
  send_close(ws);
  settle(ws);
  if (ws->awaiting_pong && ws->state == WS_OPEN) {
    ws->awaiting_pong = 0;
    arm(ws);
  }
  ws->awaiting_pong = 0;
}

static void task_fn(ludo__task_t *t) {
  ludo__ws_t *ws = (ludo__ws_t *)((char *)t - offsetof(ludo__ws_t, task));
  ludo__buf_t in = ws->in;
  enter(ws);
  ludo__buf_init(&ws->in, ludo__alloc_fn, ws->heap);
  /* Bytes read while this task waited were appended to these. */
  if (in.len) feed(ws, in.p, in.len);
  ludo__buf_free(&in);
  leave(ws);
}

/* ---- the conn's callbacks --------------------------------------------- */

static void ws_read(void *p, const char *data, size_t len) {
  ludo__ws_t *ws = p;
  enter(ws);
  if (ws->task.queued) {
    if (ludo__buf_add(&ws->in, data, len) != 0) {
      ws->state = WS_DONE;
      ludo__net_conn_close(ws->nc, 1);
    }
  } else {
    feed(ws, data, len);
  }
  leave(ws);
}

static void ws_eof(void *p) {
  ludo__ws_t *ws = p;
  enter(ws);
  set_code(ws, 1006, "", 0);
  done(ws);
  leave(ws);
}

static void ws_timeout(void *p) {
  ludo__ws_t *ws = p;
  enter(ws);
  if (ws->state == WS_OPEN && ws->awaiting_pong) {
    static const char why[] = "keepalive ping timeout";
    start_close(ws, 1011, why, sizeof why - 1);
    done(ws); /* no waiting for an answer from a silent peer */
  } else if (ws->state == WS_OPEN && ws->rx_since_arm &&
             uv_now(ws->core->loop) - ws->rx_ms < ws->o.ping_interval_ms) {
    /* The peer spoke since: the next ping is due ping_interval_ms after
     * that. */
    ws->rx_since_arm = 0;
    ludo__net_conn_timer(ws->nc, ws->o.ping_interval_ms -
                                     (uv_now(ws->core->loop) - ws->rx_ms));
  } else if (ws->state == WS_OPEN) {
    wslay_event_context_ptr ctx = ev_get(ws);
    struct wslay_event_msg ping;
    uint8_t seq[4];
    ws->ping_seq++;
    seq[0] = (uint8_t)(ws->ping_seq >> 24);
    seq[1] = (uint8_t)(ws->ping_seq >> 16);
    seq[2] = (uint8_t)(ws->ping_seq >> 8);
    seq[3] = (uint8_t)ws->ping_seq;
    ping.opcode = WSLAY_PING;
    ping.msg = seq;
    ping.msg_length = sizeof seq;
    if (ctx && wslay_event_queue_msg(ctx, &ping) == 0) {
      ws->awaiting_pong = 1;
      pump(ws);
    }
    arm(ws);
  } else if (ws->state == WS_CLOSING) {
    /* The peer did not answer our close frame in time. With bytes still
     * unsent it does not read them either (our close is behind them):
     * lingering would hold them, counted against the server's output,
     * for linger_ms more, so the connection ends now. */
    if (ws->nc != NULL && ludo__net_conn_pending(ws->nc) > 0) {
      ws->state = WS_DONE;
      ludo__net_conn_close(ws->nc, 1);
    } else {
      done(ws);
    }
  }
  leave(ws);
}

static void ws_written(void *p) {
  ludo__ws_t *ws = p;
  if (!ws->refused || ludo__ws_queued(ws) > 0) return;
  ws->refused = 0;
  if (ws->cb.drain == NULL || ws->state != WS_OPEN) return;
  enter(ws);
  ws->core->in_callback++;
  ws->cb.drain(ws->ud, ws);
  ws->core->in_callback--;
  leave(ws);
}

static void ws_shutdown(void *p) {
  static const char why[] = "server shutting down";
  ludo__ws_t *ws = p;
  enter(ws);
  if (start_close(ws, 1001, why, sizeof why - 1) != 0) done(ws);
  leave(ws);
}

/* The connection is gone: the handler's last callback. */
static void ws_closed(void *p) {
  ludo__ws_t *ws = p;
  enter(ws);
  ws->nc = NULL;
  ws->state = WS_CLOSED;
  ws->dead = 1;
  ludo__core_unpost(ws->core, &ws->task);
  set_code(ws, 1006, "", 0);
  ws->core->in_callback++;
  ws->cb.close(ws->ud, ws, ws->code, ws->reason, ws->reason_len);
  ws->core->in_callback--;
  leave(ws);
}

static const ludo__net_proto_t ws_proto = {ws_read,    ws_eof,
                                           ws_timeout, ws_written,
                                           ws_shutdown, ws_closed};

/* Makes `nc` the WebSocket's connection: its protocol from now on, the
 * bytes that came after the handshake (`rest`) delivered from the loop,
 * and what was sent or closed before sent now. */
static void attach(ludo__ws_t *ws, ludo__net_conn_t *nc, const char *rest,
                   size_t n) {
  ws->nc = nc;
  ludo__net_conn_set_proto(nc, &ws_proto, ws);
  ws->state = ws->close_queued ? WS_CLOSING : WS_OPEN;
  if (n > 0) {
    if (ludo__buf_add(&ws->in, rest, n) != 0) {
      ws->state = WS_DONE;
      ludo__net_conn_close(nc, 1);
      return;
    }
    ludo__core_post(ws->core, &ws->task);
  }
  pump(ws); /* what was sent or closed before the switch */
  send_close(ws);
  arm(ws);
}

/* The 101 response is written: the connection is the WebSocket's now
 * (nc NULL: it ended before). No handler callback runs here (this may be
 * inside ludo__ws_accept), except the close callback when nc is NULL,
 * which comes from the HTTP connection's end. */
static void on_switch(void *ud, ludo__net_conn_t *nc, const char *rest,
                      size_t n) {
  ludo__ws_t *ws = ud;
  enter(ws);
  if (nc == NULL)
    ws_closed(ws);
  else
    attach(ws, nc, rest, n);
  leave(ws);
}

/* A new WebSocket (not yet on a connection): server or client side. */
static int ws_new(ludo__core_t *core, const ludo__ws_options_t *o,
                  const ludo__ws_callbacks_t *cb, void *ud, int client,
                  ludo__ws_t **out) {
  ludo__ws_t *ws = ludo__calloc(&core->heap, sizeof *ws);
  *out = NULL;
  if (ws == NULL) return LUDO_ENOMEM;
  ws->core = core;
  ws->heap = &core->heap;
  options_fill(&ws->o, o);
  ws->cb = *cb;
  ws->ud = ud;
  ws->state = WS_PENDING;
  ws->task.fn = task_fn;
  ludo__buf_init(&ws->in, ludo__alloc_fn, ws->heap);
  ws->client = client;
  if (!client) {
    tl_servers++; /* its wslay context comes when needed */
  } else if (ev_get(ws) == NULL) {
    ws_free(ws);
    return LUDO_ENOMEM;
  }
  *out = ws;
  return 0;
}

/* ---- the API ---------------------------------------------------------- */

/* Answers a refused handshake: `status` with a text body, and for 426 the
 * version the server speaks. */
static int refuse(ludo__http_req_t *req, int status, const char *why) {
  ludo__http_header_t h[2] = {{"Content-Type", "text/plain; charset=utf-8"},
                              {"Sec-WebSocket-Version", "13"}};
  char body[160];
  size_t n = (size_t)snprintf(body, sizeof body, "%s\n", why);
  if (n >= sizeof body) n = sizeof body - 1;
  return ludo__http_respond(req, status, h, status == 426 ? 2 : 1, body, n);
}

/* 1 when the comma-separated token list `list` (a header value; NULL:
 * none) holds `tok`, spaces around tokens ignored. */
static int offers(const char *list, const char *tok) {
  size_t n = strlen(tok);
  while (list != NULL && *list != '\0') {
    const char *end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    while (len > 0 && (*list == ' ' || *list == '\t')) list++, len--;
    while (len > 0 && (list[len - 1] == ' ' || list[len - 1] == '\t')) len--;
    if (len == n && memcmp(list, tok, n) == 0) return 1;
    list = end ? end + 1 : NULL;
  }
  return 0;
}

int ludo__ws_accept(ludo__http_req_t *req, const ludo__ws_options_t *o,
                    const ludo__ws_callbacks_t *cb, void *ud,
                    ludo__ws_t **out) {
  ludo__core_t *core;
  ludo__ws_t *ws;
  const char *why, *proto = NULL;
  char head[320], accept[LUDO__HANDSHAKE_ACCEPT_LEN + 1];
  int status, rc, n;
  *out = NULL;
  if (req == NULL || cb == NULL || cb->message == NULL || cb->close == NULL)
    return LUDO_EINVAL;
  status = ludo__handshake_check(req, &why);
  if (status != 0) {
    rc = refuse(req, status, why);
    return rc == 0 ? LUDO_EINVAL : rc;
  }
  core = ludo__http_req_core(req);
  rc = ws_new(core, o, cb, ud, 0, &ws);
  if (rc != 0) return rc;
  ludo__handshake_accept_key(ludo__http_req_header(req, "sec-websocket-key"),
                             accept);
  if (o != NULL && o->subprotocol != NULL && strlen(o->subprotocol) < 64 &&
      offers(ludo__http_req_header(req, "sec-websocket-protocol"),
             o->subprotocol))
    proto = o->subprotocol;
  n = snprintf(head, sizeof head,
               "HTTP/1.1 101 Switching Protocols\r\n"
               "Upgrade: websocket\r\n"
               "Connection: Upgrade\r\n"
               "Sec-WebSocket-Accept: %s\r\n%s%s%s\r\n",
               accept, proto ? "Sec-WebSocket-Protocol: " : "",
               proto ? proto : "", proto ? "\r\n" : "");
  *out = ws;
  enter(ws);
  rc = ludo__http_switch(req, head, (size_t)n, on_switch, ws);
  if (rc != 0) {
    *out = NULL;
    ws->dead = 1;
  }
  leave(ws);
  return rc;
}

int ludo__ws_client(ludo__core_t *core, ludo__net_conn_t *nc,
                    const ludo__ws_options_t *o,
                    const ludo__ws_callbacks_t *cb, void *ud,
                    const char *rest, size_t n, ludo__ws_t **out) {
  ludo__ws_t *ws;
  int rc;
  *out = NULL;
  if (nc == NULL || cb == NULL || cb->message == NULL || cb->close == NULL)
    return LUDO_EINVAL;
  rc = ws_new(core, o, cb, ud, 1, &ws);
  if (rc != 0) return rc;
  *out = ws;
  enter(ws);
  attach(ws, nc, rest, n);
  leave(ws);
  return 0;
}

int ludo__ws_holds_context(const ludo__ws_t *ws) { return ws->ev != NULL; }

size_t ludo__ws_queued(const ludo__ws_t *ws) {
  size_t n = ws->ev ? wslay_event_get_queued_msg_length(ws->ev->ctx) : 0;
  return ws->nc ? n + ludo__net_conn_pending(ws->nc) : n;
}

/* Writes a whole message as one frame straight into the conn (see
 * ludo__ws_send): FIN, the opcode, the payload length in its shortest
 * form (RFC 6455 5.2; a server's frames are not masked), the payload. */
static int send_direct(ludo__ws_t *ws, int binary, const void *data,
                       size_t len) {
  uint8_t h[10];
  size_t n = 2;
  int i;
  h[0] = (uint8_t)(0x80 | (binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME));
  if (len < 126) {
    h[1] = (uint8_t)len;
  } else if (len <= 0xffff) {
    h[1] = 126;
    h[2] = (uint8_t)(len >> 8);
    h[3] = (uint8_t)len;
    n = 4;
  } else {
    h[1] = 127;
    for (i = 0; i < 8; i++)
      h[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    n = 10;
  }
  /* One allocation for both (a reply is a few hundred bytes). */
  if (ludo__net_conn_reserve(ws->nc, n + len) != 0 ||
      ludo__net_conn_write(ws->nc, h, n) != 0)
    return LUDO_ENOMEM;
  if (len > 0 && ludo__net_conn_write(ws->nc, data, len) != 0) {
    /* Half a frame is in the stream: the connection cannot go on. */
    ws->state = WS_DONE;
    ludo__net_conn_close(ws->nc, 1);
    return LUDO_ENOMEM;
  }
  if (!ws->in_recv) ludo__net_conn_flush(ws->nc); /* else after the recv */
  return 0;
}

int ludo__ws_send(ludo__ws_t *ws, int binary, const void *data, size_t len) {
  wslay_event_context_ptr ctx;
  struct wslay_event_msg msg;
  size_t queued;
  int r;
  if (ws == NULL || (len > 0 && data == NULL)) return LUDO_EINVAL;
  if (ws->dead || ws->state >= WS_CLOSING || ws->close_queued)
    return LUDO_ECLOSED;
  if (!binary && ludo__utf8_check(data, len) != len) return LUDO_EINVAL;
  queued = ludo__ws_queued(ws);
  if ((queued > 0 &&
       (queued >= ws->o.max_queued || len > ws->o.max_queued - queued)) ||
      (ws->nc != NULL && ludo__net_conn_over_budget(ws->nc, len))) {
    ws->refused = 1;
    return LUDO_EBUSY;
  }
  /* A server's send (a client's frames are masked: wslay writes them)
   * when nothing waits in wslay (no message, no control frame, no frame
   * half sent) and no close was sent or received: the frame can go
   * straight into the conn, without wslay's copy of the message. */
  if (!ws->client && ws->state == WS_OPEN && ws->nc != NULL &&
      !ev_want_write(ws) && !ev_close_sent(ws) && !ev_close_received(ws)) {
    enter(ws);
    r = send_direct(ws, binary, data, len);
    leave(ws);
    return r;
  }
  msg.opcode = binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME;
  msg.msg = data;
  msg.msg_length = len;
  ctx = ev_get(ws);
  if (ctx == NULL) return LUDO_ENOMEM;
  r = wslay_event_queue_msg(ctx, &msg);
  if (r == WSLAY_ERR_NOMEM) return LUDO_ENOMEM;
  if (r != 0) return LUDO_ECLOSED;
  enter(ws);
  pump(ws);
  leave(ws);
  return 0;
}

int ludo__ws_close(ludo__ws_t *ws, int code, const char *reason) {
  size_t len = reason ? strlen(reason) : 0;
  int rc;
  if (ws == NULL) return LUDO_EINVAL;
  if (!((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
        (code >= 3000 && code <= 4999)))
    return LUDO_EINVAL;
  if (len > REASON_MAX || ludo__utf8_check(reason ? reason : "", len) != len)
    return LUDO_EINVAL;
  if (ws->dead) return LUDO_ECLOSED;
  enter(ws);
  rc = start_close(ws, code, reason ? reason : "", len);
  leave(ws);
  return rc;
}

void ludo__ws_abort(ludo__ws_t *ws) {
  if (ws == NULL || ws->dead || ws->nc == NULL) return;
  enter(ws);
  ws->state = WS_DONE;
  ludo__net_conn_close(ws->nc, 1);
  leave(ws);
}
