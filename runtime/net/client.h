/* client.h - a client of an OpenEnv server on the core's loop: one
 * WebSocket to the server's /ws route (dial.h, handshake.h, ws.h) speaking
 * the session protocol (clientproto.h), with keepalive pings, a bound on
 * replies, a time limit per reply, and the reconnect rule below. This is
 * the object behind ludo_client_t (ludo.h), the Lua module ludo.client
 * (lclient.c) and `ludo client`.
 *
 * Calls. One at a time: a call made while another is in flight returns
 * LUDO_EBUSY, but for a non-blocking connect still connecting: the call
 * takes its place and waits for the connection, and the connect's
 * callback runs apart, with the connection's outcome, before the call's.
 * Each sends one request and takes the next frame from the server as its
 * reply (the server answers in order); `close` is the only request
 * without a reply. A call that needs the connection while there is none
 * connects first.
 *
 * The reconnect rule. The server's session, and the episode in it, live
 * as long as the WebSocket: when the connection goes (the server closed
 * it or ended the session, the network failed, keepalive pings went
 * unanswered, a reply did not come in time), the episode is gone and no
 * client can bring it back. So:
 *   1. a call in flight fails with LUDO_EDISCONNECTED (or the code of the
 *      error frame the server sent before closing, e.g. LUDO_ECAPACITY),
 *      its message saying why and that the episode is lost;
 *   2. when an episode was under way (a reset had succeeded), later
 *      `step` and `state` calls fail the same way, without sending
 *      anything, until a reset: stepping a fresh session would answer for
 *      an episode that never started;
 *   3. the next `reset` (or tool call, or connect) connects again, which
 *      opens a new session; a reset then starts a new episode there.
 * With the option no_reconnect, a lost connection stays lost: every call
 * fails with LUDO_EDISCONNECTED. A connection that cannot be made fails
 * the call that needed it with LUDO_ECONNECT; the next call tries again.
 *
 * Completions. A non-blocking call's callback runs from the loop, never
 * inside the call that started it; while a blocking call of the runtime's
 * runs the loop, it waits (ludo__core_post_delivery). Blocking calls run
 * the loop until their reply came: other work of the loop goes on (a
 * server of the same runtime keeps serving). */
#ifndef LUDO_NET_CLIENT_H
#define LUDO_NET_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/core.h"
#include "ludo_defs.h"
#include "net/clientproto.h"
#include "net/dial.h"
#include "net/fetch.h"
#include "net/reply.h"
#include "net/url.h"
#include "net/ws.h"

/* Calls besides the protocol's requests (clientproto.h). */
enum {
  LUDO__CL_CONNECT = 100, /* connect, if not connected */
  LUDO__CL_INFO           /* GET /metadata and /schema */
};

/* Called once a closed client is gone (may be NULL). */
typedef void (*ludo__client_closed_cb)(void *ud);

struct ludo_client_s {
  ludo__core_t *core;
  unsigned *inflight;        /* counts non-blocking calls in flight (the
                                runtime's, for ludo_runtime_run); may be
                                NULL */
  ludo__closer_t closer;     /* ends the client when the core closes */
  ludo__url_t url;
  ludo_client_options_t o;   /* defaults filled; token: our copy */
  void *data;                /* the host's */
  int unheld;                /* callbacks are ludo's own (ludo.client
                                resuming Lua): never held while a blocking
                                call runs the loop */

  /* The connection. */
  int conn;                  /* CN_* (client.c) */
  ludo__dial_t *dial;        /* CN_DIAL */
  ludo__net_conn_t *nc;      /* CN_HANDSHAKE */
  ludo__reply_t reply;       /* the handshake's response (CN_HANDSHAKE) */
  char key[32];              /* Sec-WebSocket-Key of that handshake */
  ludo__ws_t *ws;            /* CN_OPEN, CN_CLOSING */
  int ever_connected;
  int episode;               /* a reset succeeded on this connection */
  int lost;                  /* rule 2 above: step and state fail */
  ludo__buf_t lost_msg;      /* ...saying this */
  int notice;                /* the code of an error frame that came with
                                no call in flight (capacity at connect) */
  ludo__buf_t notice_msg;
  long long rpc_id;          /* the last JSON-RPC id sent */

  /* The call in flight. */
  int op;                    /* its kind, 0 when none */
  int op_state;              /* OP_* (client.c) */
  ludo__buf_t frame;         /* its request */
  ludo_client_cb cb;         /* NULL for a blocking call */
  void *cb_ud;
  struct ludo__client_wait_s *waiter; /* a blocking call's record */
  int status;
  ludo__buf_t res;           /* its result JSON, or error message */
  ludo__buf_t err;           /* the message of the last failure */
  ludo__buf_t scratch;
  ludo__fetch_t *fetch;      /* LUDO__CL_INFO: the GET in flight */
  int fetch_stage;           /* 0 /metadata, 1 /schema */
  ludo__buf_t meta;          /* the /metadata body */
  uv_timer_t timer;          /* the reply's time limit */
  int timer_open;
  ludo__task_t deliver;      /* runs the callback */

  /* A non-blocking connect a call took the place of (see Calls): its
   * callback, then the connection's outcome, delivered by its task. */
  ludo_client_cb conn_cb;    /* NULL when none */
  void *conn_ud;
  int conn_state;            /* 0 waiting, 1 outcome known (OP_*-like) */
  int conn_status;
  ludo__buf_t conn_msg;
  ludo__task_t conn_deliver;

  /* Its end. */
  int closing;               /* closed: no more calls */
  ludo__client_closed_cb closed_cb;
  void *closed_ud;
  int depth;                 /* entry points running (frees wait) */
};

/* Makes a client of the server at `url` (see net/url.h for the forms,
 * copied) on `core`, with `o` (copied, the token too; NULL: defaults). It
 * does not connect yet. `inflight` (may be NULL) counts its non-blocking
 * calls in flight. Returns 0, LUDO_EINVAL (a bad URL or option: `err`
 * says why) or LUDO_ENOMEM. */
int ludo__client_new(ludo__core_t *core, unsigned *inflight, const char *url,
                     const ludo_client_options_t *o, ludo_client_t **out,
                     char *err, size_t errlen);

/* Fills `o` with the defaults of ludo_client_options_t. */
void ludo__client_options_init(ludo_client_options_t *o);

/* Starts call `kind` (LUDO__CP_RESET ... LUDO__CP_CALL_TOOL,
 * LUDO__CL_CONNECT, LUDO__CL_INFO) with input `json`/`len` (borrowed for
 * the call; see ludo__clientproto_request). With `cb`, non-blocking: the
 * callback runs from the loop with the outcome; returns 0, or a failure
 * in which case `cb` never runs. Without `cb`, blocking: runs the loop
 * until the outcome; on success *out and *out_len (may be NULL) get the
 * result, borrowed until the next call or the close. Failures: LUDO_EBUSY
 * (a call in flight; a blocking call from inside a callback or host
 * function), LUDO_ECLOSED (closed), LUDO_EINVAL / LUDO_EPARSE (bad
 * input), LUDO_EDISCONNECTED (rule 2, or no_reconnect), and, for blocking
 * calls, every outcome: LUDO_ECONNECT, LUDO_EDISCONNECTED, LUDO_ENOREPLY,
 * LUDO_EPROTO, LUDO_ECANCELED (closed meanwhile), the codes of error
 * frames (clientproto.h), LUDO_ENOMEM. The message of every failure is in
 * ludo__client_errmsg(). */
int ludo__client_call(ludo_client_t *c, int kind, const char *json,
                      size_t len, ludo_client_cb cb, void *ud,
                      const char **out, size_t *out_len);

/* Closes the client: a call in flight completes now (its callback runs
 * inside this with LUDO_ECANCELED, or with its outcome when that came
 * already); the server is told ({"type":"close"}, then the WebSocket's
 * closing handshake, bounded by 5 s) from the loop; `cb(ud)` (may be
 * NULL) runs once everything is released. No call is accepted after
 * this. */
void ludo__client_close(ludo_client_t *c, ludo__client_closed_cb cb,
                        void *ud);

/* The caller gives up the call in flight (a Lua call waiting on it was
 * cancelled): its callback will not run, and the connection is dropped,
 * as its reply could no longer be told from the next one's (the episode
 * goes with it: rule 1 above). No-op without a call. */
void ludo__client_abandon(ludo_client_t *c);

/* The message of the last failure ("" before any). Borrowed until the
 * next call. */
const char *ludo__client_errmsg(const ludo_client_t *c);

#endif
