/* client.c - a client of an OpenEnv server (see client.h).
 *
 * The connection goes DOWN -> DIAL -> HANDSHAKE -> OPEN -> CLOSING ->
 * DOWN. During the handshake the client is the protocol of the connection
 * (hs_*: it writes the upgrade request and reads the answer with
 * reply.c); after it, the WebSocket is (ws.c), and the client hears its
 * messages and its end.
 *
 * A call is QUEUED until the connection is open, SENT until its reply
 * came, DONE until its callback ran. Everything that ends a call goes
 * through complete(); user code runs only in deliver() (a task of the
 * core's, held while a blocking call runs the loop) and, for a call cut
 * short by a close, inside ludo__client_close. Every entry point counts
 * its depth, and the client is freed when it is closed, nothing of it is
 * left on the loop, and the outermost entry returns. */
#include "net/client.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/errors.h"
#include "base/jsonraw.h"
#include "net/handshake.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define DEFAULT_TIMEOUT_MS 60000u
#define DEFAULT_PING_INTERVAL_MS 20000u
#define DEFAULT_PONG_TIMEOUT_MS 20000u
#define DEFAULT_MAX_MESSAGE ((size_t)100 << 20)
#define MAX_HANDSHAKE_HEAD ((size_t)16 << 10)
#define MAX_REFUSAL_BODY ((size_t)64 << 10)
#define MAX_TOKEN 4096

enum { CN_DOWN, CN_DIAL, CN_HANDSHAKE, CN_OPEN, CN_CLOSING };
enum { OP_QUEUED = 1, OP_SENT, OP_DONE };

/* A blocking call's record, on its stack. */
typedef struct ludo__client_wait_s {
  int done;
  int status;
} wait_t;

static void proceed(ludo_client_t *c);
static void maybe_free(ludo_client_t *c);

/* A call's name in messages: the protocol's requests, and ours. */
static const char *op_name(int kind) {
  if (kind == LUDO__CL_CONNECT) return "connect";
  if (kind == LUDO__CL_INFO) return "info";
  return ludo__clientproto_name(kind);
}

/* ---- lifetime --------------------------------------------------------- */

static void enter(ludo_client_t *c) { c->depth++; }

static void leave(ludo_client_t *c) {
  if (--c->depth == 0) maybe_free(c);
}

static void set_err(ludo_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_err(ludo_client_t *c, const char *fmt, ...) {
  va_list ap;
  ludo__buf_reset(&c->err);
  va_start(ap, fmt);
  ludo__buf_vprintf(&c->err, fmt, ap);
  va_end(ap);
}

static void client_free(ludo_client_t *c) {
  ludo__client_closed_cb cb = c->closed_cb;
  void *ud = c->closed_ud;
  ludo__core_t *core = c->core;
  ludo__buf_free(&c->lost_msg);
  ludo__buf_free(&c->notice_msg);
  ludo__buf_free(&c->frame);
  ludo__buf_free(&c->res);
  ludo__buf_free(&c->err);
  ludo__buf_free(&c->scratch);
  ludo__buf_free(&c->meta);
  ludo__buf_free(&c->conn_msg);
  if (c->o.token)
    ludo__free(&core->heap, (char *)c->o.token, strlen(c->o.token) + 1);
  ludo__free(&core->heap, c, sizeof *c);
  if (cb) {
    core->in_callback++;
    cb(ud);
    core->in_callback--;
  }
}

/* Frees a closed client once nothing of it is on the loop. */
static void maybe_free(ludo_client_t *c) {
  if (!c->closing || c->depth > 0 || c->timer_open || c->conn != CN_DOWN ||
      c->fetch != NULL || c->deliver.queued || c->conn_deliver.queued)
    return;
  client_free(c);
}

static void timer_closed(uv_handle_t *h) {
  ludo_client_t *c = h->data;
  ludo__core_t *core = c->core;
  c->timer_open = 0;
  enter(c);
  leave(c); /* may free c */
  ludo__core_handle_closed(core); /* last: the core may go with it */
}

/* ---- ending a call ----------------------------------------------------- */

/* Runs the callback of a call that is DONE. */
static void deliver(ludo_client_t *c) {
  ludo_client_cb cb = c->cb;
  void *ud = c->cb_ud;
  ludo__buf_t r = c->res;
  int status = c->status;
  ludo__core_unpost(c->core, &c->deliver);
  if (c->op_state != OP_DONE) return;
  c->op = 0;
  c->op_state = 0;
  c->cb = NULL;
  ludo__buf_init(&c->res, ludo__alloc_fn, &c->core->heap);
  if (c->inflight) (*c->inflight)--;
  enter(c);
  c->core->in_callback++;
  cb(c, status, r.p ? r.p : "", r.len, ud);
  c->core->in_callback--;
  ludo__buf_free(&r);
  leave(c);
}

static void deliver_task(ludo__task_t *t) {
  ludo_client_t *c = (ludo_client_t *)((char *)t -
                                       offsetof(ludo_client_t, deliver));
  enter(c);
  deliver(c);
  leave(c);
}

/* Runs the callback of a connect a call took the place of, once its
 * outcome is known. */
static void conn_deliver(ludo_client_t *c) {
  ludo_client_cb cb = c->conn_cb;
  void *ud = c->conn_ud;
  ludo__buf_t m = c->conn_msg;
  ludo__core_unpost(c->core, &c->conn_deliver);
  if (cb == NULL || c->conn_state != OP_DONE) return;
  c->conn_cb = NULL;
  c->conn_state = 0;
  ludo__buf_init(&c->conn_msg, ludo__alloc_fn, &c->core->heap);
  if (c->inflight) (*c->inflight)--;
  enter(c);
  c->core->in_callback++;
  cb(c, c->conn_status, m.p ? m.p : "", m.len, ud);
  c->core->in_callback--;
  ludo__buf_free(&m);
  leave(c);
}

static void conn_deliver_task(ludo__task_t *t) {
  ludo_client_t *c = (ludo_client_t *)((char *)t -
                                       offsetof(ludo_client_t, conn_deliver));
  enter(c);
  conn_deliver(c);
  leave(c);
}

/* The connection that such a connect waited for is open (status 0, the
 * message its URL) or could not be made: its callback is posted, ahead
 * of the call's. */
static void conn_outcome(ludo_client_t *c, int status, const char *msg,
                         size_t len) {
  if (c->conn_cb == NULL || c->conn_state == OP_DONE) return;
  ludo__buf_reset(&c->conn_msg);
  if (ludo__buf_add(&c->conn_msg, msg, len) != 0)
    ludo__buf_reset(&c->conn_msg);
  c->conn_status = status;
  c->conn_state = OP_DONE;
  ludo__core_post_delivery(c->core, &c->conn_deliver);
}

/* A call given while a non-blocking connect is connecting takes its
 * place: the connect's callback waits for the connection apart. */
static void take_connect_place(ludo_client_t *c) {
  c->conn_cb = c->cb;
  c->conn_ud = c->cb_ud;
  c->conn_state = 0;
  c->op = 0;
  c->op_state = 0;
  c->cb = NULL;
  c->cb_ud = NULL;
}

/* Ends the call in flight with `status` and `data` (the result, or the
 * message): a blocking call's wait ends, a non-blocking one's callback is
 * posted. A call ending before it was sent ends a connect waiting with
 * it the same way (the connection failed, or the client closed). */
static void complete(ludo_client_t *c, int status, const char *data,
                     size_t len) {
  if (c->op == 0 || c->op_state == OP_DONE) return;
  if (c->op_state == OP_QUEUED) conn_outcome(c, status, data, len);
  if (c->timer_open) uv_timer_stop(&c->timer);
  ludo__buf_reset(&c->res);
  if (ludo__buf_add(&c->res, data, len) != 0 && status == 0) {
    status = LUDO_ENOMEM;
    ludo__buf_reset(&c->res);
    ludo__buf_adds(&c->res, "ENOMEM: no memory for the result");
  }
  if (status != 0) {
    ludo__buf_reset(&c->err);
    ludo__buf_add(&c->err, c->res.p ? c->res.p : "", c->res.len);
  }
  if (status == 0 && c->op == LUDO__CP_RESET) {
    c->episode = 1;
    c->lost = 0;
  }
  c->status = status;
  c->op_state = OP_DONE;
  if (c->waiter != NULL) {
    c->waiter->done = 1;
    c->waiter->status = status;
    c->waiter = NULL;
    c->op = 0;
    c->op_state = 0;
    return;
  }
  if (c->unheld)
    ludo__core_post(c->core, &c->deliver);
  else
    ludo__core_post_delivery(c->core, &c->deliver);
}

/* complete() with a message made of `fmt`. */
static void fail(ludo_client_t *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(ludo_client_t *c, int status, const char *fmt, ...) {
  ludo__buf_t m;
  va_list ap;
  ludo__buf_init(&m, ludo__alloc_fn, &c->core->heap);
  va_start(ap, fmt);
  ludo__buf_vprintf(&m, fmt, ap);
  va_end(ap);
  complete(c, status, m.p ? m.p : ludo__err_name(status), m.p ? m.len : 0);
  ludo__buf_free(&m);
}

/* ---- the connection's end ---------------------------------------------- */

/* The connection is gone (`why`: what happened). The episode with it. */
static void connection_gone(ludo_client_t *c, const char *why) {
  int had_episode = c->episode;
  c->conn = CN_DOWN;
  c->episode = 0;
  if (had_episode) {
    c->lost = 1;
    ludo__buf_reset(&c->lost_msg);
    ludo__buf_printf(&c->lost_msg, "%s; the server's session and its "
                     "episode are gone%s", why,
                     c->o.no_reconnect ? "" : ": a reset reconnects and "
                                              "starts a new one");
  }
  if (c->op != 0 && c->op_state == OP_SENT) {
    if (c->notice != 0)
      complete(c, c->notice, c->notice_msg.p, c->notice_msg.len);
    else
      fail(c, LUDO_EDISCONNECTED, "EDISCONNECTED: %s during %s; the "
           "server's session and its episode are gone%s", why,
           op_name(c->op),
           c->o.no_reconnect ? "" : ": a reset reconnects");
  }
}

/* ---- the WebSocket ------------------------------------------------------ */

/* An error after which the server ends the connection (at capacity, a
 * failed session, a broken protocol: `fatal` from clientproto) came:
 * nothing more goes on this connection. The next call waits for its end
 * and then connects again; sent on it, it would have met the server's
 * close and failed EDISCONNECTED instead of reaching a server (a call
 * made from the callback of the one refused, before the close frame
 * came). The close is started here too, so a server that does not close
 * cannot hold the calls after it. */
static void ends_after_error(ludo_client_t *c, int rc) {
  if (c->ws == NULL || c->conn != CN_OPEN) return;
  if (rc == LUDO_EPROTO)
    ludo__ws_close(c->ws, 1002, "unexpected frame");
  else
    ludo__ws_close(c->ws, 1000, "after the server's error");
  c->conn = CN_CLOSING;
}

static void ws_message(void *ud, ludo__ws_t *ws, int binary,
                       const char *data, size_t len) {
  ludo_client_t *c = ud;
  const char *res;
  size_t rlen;
  int fatal, rc;
  (void)ws;
  enter(c);
  if (binary) {
    if (c->op != 0 && c->op_state == OP_SENT)
      fail(c, LUDO_EPROTO, "EPROTO: the server answered %s with a binary "
           "frame", op_name(c->op));
    ludo__ws_close(c->ws, 1003, "binary frames are not spoken here");
    c->conn = CN_CLOSING;
  } else if (c->op != 0 && c->op_state == OP_SENT) {
    rc = ludo__clientproto_reply(c->op, c->rpc_id, data, len, &c->scratch,
                                 &res, &rlen, &c->err, &fatal);
    if (rc == 0)
      complete(c, 0, res, rlen);
    else
      complete(c, rc, c->err.p, c->err.len);
    if (fatal) ends_after_error(c, rc);
  } else {
    /* Nothing was asked: an error frame before the server closes (at
     * capacity, say) says why the connection will end; anything else is
     * dropped. */
    rc = ludo__clientproto_reply(LUDO__CP_STATE, 0, data, len, &c->scratch,
                                 &res, &rlen, &c->notice_msg, &fatal);
    if (rc != 0 && rc != LUDO_EPROTO)
      c->notice = rc;
    else
      ludo__log(&c->core->log, LUDO_LOG_WARN, "ludo",
                "client: dropped a frame from %s that answers nothing",
                c->url.ws);
    if (fatal && rc != LUDO_EPROTO) ends_after_error(c, rc);
  }
  leave(c);
}

static void ws_closed(void *ud, ludo__ws_t *ws, int code, const char *reason,
                      size_t len) {
  ludo_client_t *c = ud;
  char why[LUDO__URL_MAX + 600];
  (void)ws;
  enter(c);
  c->ws = NULL;
  if (code == 1006)
    snprintf(why, sizeof why, "the connection to %s ended without a close "
             "frame", c->url.ws);
  else
    snprintf(why, sizeof why, "the connection to %s closed (%d%s%.*s)",
             c->url.ws, code, len ? " " : "", (int)(len < 123 ? len : 123),
             reason);
  if (code == 1009 && c->op != 0 && c->op_state == OP_SENT)
    fail(c, LUDO_ETOOBIG, "ETOOBIG: %s during %s: a message was too big "
         "for one side (a reply over max_message_bytes, %zu, or a request "
         "over the server's limit)", why, op_name(c->op),
         c->o.max_message_bytes);
  connection_gone(c, why);
  if (!c->closing) proceed(c);
  leave(c);
}

/* ---- the handshake ------------------------------------------------------ */

/* The handshake failed: the call that needed it fails, the connection
 * closes (hs_closed follows). */
static void hs_fail(ludo_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void hs_fail(ludo_client_t *c, const char *fmt, ...) {
  ludo__buf_t m;
  va_list ap;
  ludo__buf_init(&m, ludo__alloc_fn, &c->core->heap);
  ludo__buf_printf(&m, "ECONNECT: cannot open a WebSocket to %s: ",
                   c->url.ws);
  va_start(ap, fmt);
  ludo__buf_vprintf(&m, fmt, ap);
  va_end(ap);
  if (c->op != 0 && c->op_state == OP_QUEUED)
    complete(c, LUDO_ECONNECT, m.p, m.len);
  ludo__buf_free(&m);
  if (c->nc) ludo__net_conn_close(c->nc, 1);
}

/* The server answered something else than 101: says what. */
static void hs_refused(ludo_client_t *c) {
  size_t len;
  const char *body = ludo__reply_body(&c->reply, &len);
  int status = ludo__reply_status(&c->reply);
  size_t n = strcspn(body, "\r\n");
  hs_fail(c, "the server answered %d%s%.*s%s", status, n ? ": " : "",
          (int)(n < 200 ? n : 200), body,
          status == 401 ? " (the server wants a token)"
          : status == 404 ? " (no WebSocket route there: is this an "
                            "OpenEnv server?)"
                          : "");
}

static void hs_read(void *p, const char *data, size_t len) {
  ludo_client_t *c = p;
  ludo__net_conn_t *nc = c->nc;
  ludo__ws_options_t wo;
  ludo__ws_callbacks_t wcb = {ws_message, ws_closed, NULL};
  const char *why;
  size_t used;
  int rc;
  enter(c);
  rc = ludo__reply_feed(&c->reply, data, len, &used);
  if (rc == 1 && ludo__reply_status(&c->reply) != 101) {
    hs_refused(c);
  } else if (rc == 1 && ludo__handshake_check_reply(&c->reply, c->key,
                                                    &why) != 0) {
    hs_fail(c, "%s", why);
  } else if (rc == 1) {
    ludo__ws_options_init(&wo);
    wo.max_message = c->o.max_message_bytes;
    wo.ping_interval_ms =
        c->o.ping_interval_ms == UINT32_MAX ? 0 : c->o.ping_interval_ms;
    wo.pong_timeout_ms = c->o.pong_timeout_ms;
    ludo__net_conn_timer(nc, 0);
    rc = ludo__ws_client(c->core, nc, &wo, &wcb, c, data + used,
                         len - used, &c->ws);
    if (rc != 0) {
      hs_fail(c, "no memory for the WebSocket");
    } else {
      ludo__reply_free(&c->reply);
      c->nc = NULL;
      c->conn = CN_OPEN;
      c->ever_connected = 1;
      c->episode = 0;
      c->notice = 0;
      conn_outcome(c, 0, c->url.ws, strlen(c->url.ws));
      proceed(c);
    }
  } else if (rc == LUDO_ETOOBIG && ludo__reply_status(&c->reply) != 0) {
    hs_refused(c);
  } else if (rc < 0) {
    hs_fail(c, "%s", c->reply.err);
  }
  leave(c);
}

static void hs_eof(void *p) {
  ludo_client_t *c = p;
  enter(c);
  if (ludo__reply_eof(&c->reply) == 1)
    hs_refused(c);
  else
    hs_fail(c, "the server closed the connection during the handshake");
  leave(c);
}

static void hs_timeout(void *p) {
  ludo_client_t *c = p;
  enter(c);
  hs_fail(c, "no answer to the handshake within %u ms",
          (unsigned)c->o.connect_timeout_ms);
  leave(c);
}

static void hs_written(void *p) { (void)p; }

static void hs_shutdown(void *p) { (void)p; }

static void hs_closed(void *p) {
  ludo_client_t *c = p;
  enter(c);
  c->nc = NULL;
  ludo__reply_free(&c->reply);
  c->conn = CN_DOWN;
  if (c->op != 0 && c->op_state == OP_QUEUED)
    fail(c, LUDO_ECONNECT, "ECONNECT: the connection to %s ended during "
         "the WebSocket handshake", c->url.ws);
  leave(c);
}

static const ludo__net_proto_t hs_proto = {hs_read,    hs_eof,
                                           hs_timeout, hs_written,
                                           hs_shutdown, hs_closed};

/* ---- connecting --------------------------------------------------------- */

static void on_dialed(void *ud, int status, ludo__net_conn_t *nc,
                      const char *msg) {
  ludo_client_t *c = ud;
  ludo__buf_t req;
  enter(c);
  c->dial = NULL;
  if (status != 0) {
    c->conn = CN_DOWN;
    if (c->op != 0 && c->op_state == OP_QUEUED)
      fail(c, LUDO_ECONNECT, "ECONNECT: %s (%s)", msg, c->url.ws);
    leave(c);
    return;
  }
  c->conn = CN_HANDSHAKE;
  c->nc = nc;
  ludo__net_conn_set_proto(nc, &hs_proto, c);
  ludo__reply_init(&c->reply, &c->core->heap, MAX_HANDSHAKE_HEAD,
                   MAX_REFUSAL_BODY);
  ludo__buf_init(&req, ludo__alloc_fn, &c->core->heap);
  if (ludo__handshake_new_key(c->key) != 0) {
    hs_fail(c, "no random bytes for the key");
  } else if (ludo__handshake_request(&req, c->url.target, c->url.hostfield,
                                     c->key, c->o.token) != 0 ||
             ludo__net_conn_write(nc, req.p, req.len) != 0) {
    hs_fail(c, "no memory for the request");
  } else {
    ludo__net_conn_flush(nc);
    ludo__net_conn_timer(nc, c->o.connect_timeout_ms);
  }
  ludo__buf_free(&req);
  leave(c);
}

/* Starts connecting for the call that waits. */
static void connect_now(ludo_client_t *c) {
  int rc = ludo__dial(c->core, c->url.host, c->url.port,
                      c->o.connect_timeout_ms, 0, on_dialed, c, &c->dial);
  if (rc != 0) {
    fail(c, rc == LUDO_ENOMEM ? rc : LUDO_ECONNECT, "%s: cannot connect "
         "to %s: %s", ludo__err_name(rc == LUDO_ENOMEM ? rc : LUDO_ECONNECT),
         c->url.ws, ludo__strerror(rc));
    return;
  }
  c->conn = CN_DIAL;
}

/* ---- the call's progress ----------------------------------------------- */

static void on_timeout(uv_timer_t *t) {
  ludo_client_t *c = t->data;
  char why[160];
  enter(c);
  if (c->op != 0 && c->op_state == OP_SENT) {
    snprintf(why, sizeof why, "no reply to %s within %u ms",
             op_name(c->op), (unsigned)c->o.timeout_ms);
    fail(c, LUDO_ENOREPLY, "ENOREPLY: %s from %s; the connection is dropped "
         "(a late reply could not be told from the next)", why, c->url.ws);
    if (c->ws) {
      /* The episode goes with the connection (connection_gone). */
      ludo__ws_close(c->ws, 1000, "no reply in time");
      c->conn = CN_CLOSING;
    }
  }
  leave(c);
}

/* Moves the call in flight on: connects, or sends, as the connection
 * allows. */
static void proceed(ludo_client_t *c) {
  int rc;
  if (c->op == 0 || c->op_state != OP_QUEUED || c->op == LUDO__CL_INFO)
    return;
  switch (c->conn) {
    case CN_DOWN:
      if ((c->op == LUDO__CP_STEP || c->op == LUDO__CP_STATE) && c->lost) {
        fail(c, LUDO_EDISCONNECTED, "EDISCONNECTED: %s",
             c->lost_msg.p ? c->lost_msg.p : "the connection was lost");
      } else if (c->o.no_reconnect && c->ever_connected) {
        fail(c, LUDO_EDISCONNECTED, "EDISCONNECTED: the connection to %s "
             "was lost and reconnecting is off (no_reconnect)", c->url.ws);
      } else {
        connect_now(c);
      }
      return;
    case CN_OPEN:
      if (c->op == LUDO__CL_CONNECT) {
        complete(c, 0, c->url.ws, strlen(c->url.ws));
        return;
      }
      rc = ludo__ws_send(c->ws, 0, c->frame.p, c->frame.len);
      if (rc == LUDO_ECLOSED) { /* the server's close came: on after it */
        c->conn = CN_CLOSING;
        return;
      }
      if (rc != 0) {
        fail(c, rc == LUDO_ENOMEM ? rc : LUDO_EDISCONNECTED,
             "%s: cannot send %s to %s (%s)",
             ludo__err_name(rc == LUDO_ENOMEM ? rc : LUDO_EDISCONNECTED),
             op_name(c->op), c->url.ws, ludo__strerror(rc));
        return;
      }
      c->op_state = OP_SENT;
      if (c->o.timeout_ms != UINT32_MAX)
        uv_timer_start(&c->timer, on_timeout, c->o.timeout_ms, 0);
      return;
    default: /* connecting or closing: on with it when that is over */
      return;
  }
}

/* ---- info: GET /metadata and /schema ------------------------------------ */

static void start_fetch(ludo_client_t *c);

/* The environment's description from the two bodies: the metadata's
 * fields, then the schemas' (as ludo_env_info has them). */
static int compose_info(ludo_client_t *c, const char *schema, size_t slen,
                        ludo__buf_t *out) {
  ludo__jsonraw_t m[3] = {{"action", NULL, 0}, {"observation", NULL, 0},
                          {"state", NULL, 0}};
  ludo__jsonparse_err_t err;
  const char *meta = c->meta.p ? c->meta.p : "{}";
  size_t mlen = c->meta.p ? c->meta.len : 2, i, end;
  int empty;
  if (ludo__jsonraw_object(meta, mlen, 256, &c->scratch, &err) != 0 ||
      ludo__jsonraw_members(schema, slen, 256, m, 3, &c->scratch, &err) != 0)
    return LUDO_EPROTO;
  if (m[0].text == NULL) return LUDO_EPROTO;
  end = mlen;
  while (end > 0 && meta[end - 1] != '}') end--;
  i = 1;
  while (i < end && strchr(" \t\r\n", meta[i])) i++;
  empty = meta[i] == '}';
  ludo__buf_add(out, meta, end - 1);
  if (!empty) ludo__buf_addc(out, ',');
  for (i = 0; i < 3; i++) {
    ludo__buf_printf(out, "%s\"%s\":", i ? "," : "", m[i].key);
    if (m[i].text)
      ludo__buf_add(out, m[i].text, m[i].len);
    else
      ludo__buf_adds(out, "{}");
  }
  return ludo__buf_addc(out, '}') == 0 ? 0 : LUDO_ENOMEM;
}

static void on_fetched(void *ud, int status, int http_status,
                       const char *body, size_t len, const char *msg) {
  ludo_client_t *c = ud;
  const char *path = c->fetch_stage == 0 ? "/metadata" : "/schema";
  enter(c);
  c->fetch = NULL;
  if (c->op != LUDO__CL_INFO || c->op_state == OP_DONE) {
    leave(c);
    return;
  }
  if (status != 0) {
    fail(c, status, "%s: GET %s%s: %s", ludo__err_name(status), c->url.base,
         path, msg);
  } else if (http_status != 200) {
    size_t n = strcspn(body, "\r\n");
    fail(c, http_status == 401 ? LUDO_ECONNECT : LUDO_EPROTO,
         "%s: GET %s%s answered %d%s%.*s",
         http_status == 401 ? "ECONNECT" : "EPROTO", c->url.base, path,
         http_status, n ? ": " : "", (int)(n < 200 ? n : 200), body);
  } else if (c->fetch_stage == 0) {
    ludo__buf_reset(&c->meta);
    if (ludo__buf_add(&c->meta, body, len) != 0) {
      fail(c, LUDO_ENOMEM, "ENOMEM: no memory for the metadata");
    } else {
      c->fetch_stage = 1;
      start_fetch(c);
    }
  } else {
    ludo__buf_t info;
    int rc;
    ludo__buf_init(&info, ludo__alloc_fn, &c->core->heap);
    rc = compose_info(c, body, len, &info);
    if (rc == 0)
      complete(c, 0, info.p, info.len);
    else
      fail(c, rc, "%s: %s%s and /metadata are not an environment's "
           "description (JSON objects, the schema with an \"action\")",
           ludo__err_name(rc), c->url.base, path);
    ludo__buf_free(&info);
  }
  leave(c);
}

static void start_fetch(ludo_client_t *c) {
  char target[LUDO__URL_MAX + 16];
  int rc;
  snprintf(target, sizeof target, "%s%s", c->url.prefix,
           c->fetch_stage == 0 ? "/metadata" : "/schema");
  rc = ludo__fetch(c->core, c->url.host, c->url.port, c->url.hostfield,
                   target, c->o.token,
                   c->o.timeout_ms == UINT32_MAX ? 0 : c->o.timeout_ms,
                   c->o.max_message_bytes, on_fetched, c, &c->fetch);
  if (rc != 0)
    fail(c, rc, "%s: cannot fetch %s%s", ludo__err_name(rc), c->url.base,
         target + strlen(c->url.prefix));
}

/* ---- the API ------------------------------------------------------------ */

void ludo__client_options_init(ludo_client_options_t *o) {
  memset(o, 0, sizeof *o);
  o->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
  o->timeout_ms = DEFAULT_TIMEOUT_MS;
  o->ping_interval_ms = DEFAULT_PING_INTERVAL_MS;
  o->pong_timeout_ms = DEFAULT_PONG_TIMEOUT_MS;
  o->max_message_bytes = DEFAULT_MAX_MESSAGE;
}

/* The core closes (the runtime is freed): the call in flight ends, the
 * connection is dropped. */
static void closer_fn(ludo__closer_t *cl) {
  ludo_client_t *c = (ludo_client_t *)((char *)cl -
                                       offsetof(ludo_client_t, closer));
  enter(c);
  ludo__client_close(c, NULL, NULL);
  if (c->ws) ludo__ws_abort(c->ws);
  if (c->nc) ludo__net_conn_close(c->nc, 1);
  leave(c);
}

/* 1 when `s` holds a control character (it goes into a header field). */
static int has_ctl(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
  return 0;
}

int ludo__client_new(ludo__core_t *core, unsigned *inflight, const char *url,
                     const ludo_client_options_t *o, ludo_client_t **out,
                     char *err, size_t errlen) {
  ludo_client_t *c;
  ludo_client_options_t def;
  *out = NULL;
  if (o == NULL) {
    ludo__client_options_init(&def);
    o = &def;
  }
  if (o->token != NULL && (has_ctl(o->token) || strlen(o->token) > MAX_TOKEN ||
                           *o->token == '\0')) {
    snprintf(err, errlen, "the token must be 1 to %d bytes without control "
             "characters", MAX_TOKEN);
    return LUDO_EINVAL;
  }
  c = ludo__calloc(&core->heap, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "no memory for a client");
    return LUDO_ENOMEM;
  }
  if (ludo__url_parse(url, &c->url, err, errlen) != 0 ||
      has_ctl(c->url.target)) {
    if (has_ctl(c->url.target))
      snprintf(err, errlen, "the URL holds control characters");
    ludo__free(&core->heap, c, sizeof *c);
    return LUDO_EINVAL;
  }
  c->core = core;
  c->inflight = inflight;
  ludo__client_options_init(&c->o);
  if (o->connect_timeout_ms) c->o.connect_timeout_ms = o->connect_timeout_ms;
  if (o->timeout_ms) c->o.timeout_ms = o->timeout_ms;
  if (o->ping_interval_ms) c->o.ping_interval_ms = o->ping_interval_ms;
  if (o->pong_timeout_ms) c->o.pong_timeout_ms = o->pong_timeout_ms;
  if (o->max_message_bytes) c->o.max_message_bytes = o->max_message_bytes;
  c->o.no_reconnect = o->no_reconnect != 0;
  if (o->token != NULL) {
    c->o.token = ludo__strndup(&core->heap, o->token, strlen(o->token));
    if (c->o.token == NULL) {
      ludo__free(&core->heap, c, sizeof *c);
      snprintf(err, errlen, "no memory for a client");
      return LUDO_ENOMEM;
    }
  }
  ludo__buf_init(&c->lost_msg, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->notice_msg, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->frame, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->res, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->err, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->scratch, ludo__alloc_fn, &core->heap);
  ludo__buf_init(&c->meta, ludo__alloc_fn, &core->heap);
  c->deliver.fn = deliver_task;
  c->conn_deliver.fn = conn_deliver_task;
  ludo__buf_init(&c->conn_msg, ludo__alloc_fn, &core->heap);
  uv_timer_init(core->loop, &c->timer);
  ludo__core_handle_opened(core);
  c->timer.data = c;
  c->timer_open = 1;
  c->closer.fn = closer_fn;
  ludo__core_add_closer(core, &c->closer);
  *out = c;
  return 0;
}

/* Starts a call (see ludo__client_call). */
static int start(ludo_client_t *c, int kind, const char *json, size_t len,
                 ludo_client_cb cb, void *ud) {
  /* a call that can wait for a non-blocking connect's connection */
  int takes = c->op == LUDO__CL_CONNECT && c->op_state == OP_QUEUED &&
              c->cb != NULL && c->conn_cb == NULL &&
              kind != LUDO__CL_CONNECT && kind != LUDO__CL_INFO;
  int rc;
  if (c->closing) {
    set_err(c, "ECLOSED: the client is closed");
    return LUDO_ECLOSED;
  }
  if (c->op != 0 && !takes) {
    set_err(c, "EBUSY: %s is still in flight on this client",
            op_name(c->op));
    return LUDO_EBUSY;
  }
  ludo__buf_reset(&c->frame);
  if (kind != LUDO__CL_CONNECT && kind != LUDO__CL_INFO) {
    if (kind == LUDO__CP_TOOLS || kind == LUDO__CP_CALL_TOOL) c->rpc_id++;
    rc = ludo__clientproto_request(&c->frame, kind, json, len, c->rpc_id,
                                   &c->scratch, &c->err);
    if (rc != 0) return rc;
  }
  if ((kind == LUDO__CP_STEP || kind == LUDO__CP_STATE) && c->lost) {
    set_err(c, "EDISCONNECTED: %s", c->lost_msg.p);
    return LUDO_EDISCONNECTED;
  }
  /* A reset does not clear c->lost here: only one that succeeds does
   * (complete()), so step and state keep refusing after a failed one. */
  if (takes) take_connect_place(c);
  c->op = kind;
  c->op_state = OP_QUEUED;
  c->cb = cb;
  c->cb_ud = ud;
  c->status = 0;
  if (cb != NULL && c->inflight) (*c->inflight)++;
  if (kind == LUDO__CL_INFO) {
    c->fetch_stage = 0;
    start_fetch(c);
  } else {
    proceed(c);
  }
  return 0;
}

int ludo__client_call(ludo_client_t *c, int kind, const char *json,
                      size_t len, ludo_client_cb cb, void *ud,
                      const char **out, size_t *out_len) {
  wait_t w = {0, 0};
  int rc;
  if (cb != NULL) {
    enter(c);
    rc = start(c, kind, json, len, cb, ud);
    leave(c);
    return rc;
  }
  if (!ludo__core_may_block(c->core)) {
    set_err(c, "EBUSY: a blocking call cannot be made from inside a "
               "callback or a host function (use the non-blocking form)");
    return LUDO_EBUSY;
  }
  enter(c);
  c->waiter = &w;
  rc = start(c, kind, json, len, NULL, NULL);
  if (rc != 0) {
    c->waiter = NULL;
    leave(c);
    return rc;
  }
  while (!w.done) ludo__core_run_once(c->core);
  rc = w.status;
  if (c->closing && rc == 0) {
    rc = LUDO_ECANCELED; /* closed meanwhile: the result goes with it */
  } else if (rc == 0) {
    if (out) *out = c->res.p ? c->res.p : "";
    if (out_len) *out_len = c->res.len;
  }
  leave(c);
  return rc;
}

void ludo__client_close(ludo_client_t *c, ludo__client_closed_cb cb,
                        void *ud) {
  if (c == NULL || c->closing) return;
  enter(c);
  c->closing = 1;
  c->closed_cb = cb;
  c->closed_ud = ud;
  ludo__core_remove_closer(c->core, &c->closer);
  if (c->fetch) {
    ludo__fetch_cancel(c->fetch);
    c->fetch = NULL;
  }
  if (c->op != 0 && c->op_state != OP_DONE)
    fail(c, LUDO_ECANCELED, "ECANCELED: the client was closed during %s",
         op_name(c->op));
  conn_deliver(c); /* a connect a call waited with: its callback first */
  if (c->op != 0 && c->op_state == OP_DONE) deliver(c); /* runs now */
  switch (c->conn) {
    case CN_DIAL:
      ludo__dial_cancel(c->dial);
      c->dial = NULL;
      c->conn = CN_DOWN;
      break;
    case CN_HANDSHAKE:
      ludo__net_conn_close(c->nc, 1);
      break;
    case CN_OPEN:
      ludo__ws_send(c->ws, 0, "{\"type\":\"close\"}", 16);
      ludo__ws_close(c->ws, 1000, NULL);
      c->conn = CN_CLOSING;
      break;
    default:
      break;
  }
  if (c->timer_open && !uv_is_closing((uv_handle_t *)&c->timer))
    uv_close((uv_handle_t *)&c->timer, timer_closed);
  leave(c);
}

/* The callback of an abandoned call. */
static void abandoned(ludo_client_t *c, int status, const char *data,
                      size_t len, void *ud) {
  (void)c;
  (void)status;
  (void)data;
  (void)len;
  (void)ud;
}

void ludo__client_abandon(ludo_client_t *c) {
  if (c->op == 0 || c->cb == NULL) return;
  enter(c);
  c->cb = abandoned;
  c->cb_ud = NULL;
  if (c->op_state != OP_DONE) {
    fail(c, LUDO_ECANCELED, "ECANCELED: %s was given up",
         op_name(c->op));
    if (c->ws && (c->conn == CN_OPEN)) {
      ludo__ws_close(c->ws, 1000, "the call was given up");
      c->conn = CN_CLOSING;
    } else if (c->conn == CN_HANDSHAKE) {
      ludo__net_conn_close(c->nc, 1);
    } else if (c->conn == CN_DIAL) {
      ludo__dial_cancel(c->dial);
      c->dial = NULL;
      c->conn = CN_DOWN;
    }
  }
  leave(c);
}

const char *ludo__client_errmsg(const ludo_client_t *c) {
  return c->err.p ? c->err.p : "";
}
