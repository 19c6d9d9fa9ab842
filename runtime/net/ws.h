/* ws.h - a WebSocket connection (RFC 6455) framed by wslay's event API
 * over a ludo__net_conn_t: the server's side, whose opening handshake is
 * answered from an HTTP upgrade request on the same connection, and the
 * client's (ludo__ws_client), made once its handshake succeeded; the
 * client masks what it sends and expects unmasked frames.
 *
 * What wslay does on receipt: reassembles fragmented messages, unmasks
 * client frames (an unmasked one fails the connection with 1002), answers
 * pings with pongs, echoes a close frame, checks text messages and close
 * reasons as UTF-8 (1007 otherwise) and refuses a message longer than
 * `max_message` (1009) before buffering it; this module refuses one too
 * (1009) whose fragments cost more, 64 bytes each after the first besides
 * the payload (wslay keeps a chunk per frame). A frame it cannot parse (a
 * control frame longer than 125 bytes or fragmented, a length not in its
 * shortest form, a reserved opcode or bit) fails the connection with a
 * close frame of code 1002, written here with wslay's frame API.
 *
 * What this module adds: keepalive pings every `ping_interval_ms`, and a
 * close with 1011 when no pong comes within `pong_timeout_ms`; the close
 * handshake bounded by `close_timeout_ms`; a bounded send queue (a send
 * that would take more than `max_queued` bytes waiting is refused with
 * LUDO_EBUSY, and the `drain` callback says when the queue emptied);
 * reading stops while the peer does not take what is sent (the conn's
 * backpressure). The module never stops reading for the handler's sake,
 * so pings are answered while the handler works on a message: a handler
 * that cannot take messages yet queues them itself.
 *
 * Lifetime. The `close` callback is the last: the WebSocket is freed when
 * it returns. It comes once the connection is gone (close handshake done
 * or timed out, peer gone, connection failed, server closed), never from
 * inside a call of the handler's to this module. Every callback runs with
 * the core's in_callback count raised. */
#ifndef LUDO_NET_WS_H
#define LUDO_NET_WS_H

#include <stddef.h>
#include <stdint.h>

#include "net/http.h"

typedef struct ludo__ws_s ludo__ws_t;

/* Limits and timers of a WebSocket. Initialise with
 * ludo__ws_options_init(); a 0 then means "the default", except
 * ping_interval_ms, where 0 turns keepalive pings off. */
typedef struct ludo__ws_options_s {
  size_t max_message;         /* a received message: 16 MiB (1009) */
  uint32_t ping_interval_ms;  /* keepalive pings: 20000 */
  uint32_t pong_timeout_ms;   /* wait for the pong: 20000 (1011) */
  uint32_t close_timeout_ms;  /* wait for the peer's close frame: 5000 */
  size_t max_queued;          /* bytes waiting to be sent, beyond which
                                 a send is refused: 32 MiB */
  const char *subprotocol;    /* a server's subprotocol, named in its 101
                                 when the client offers it among its
                                 Sec-WebSocket-Protocol tokens (RFC 6455
                                 4.2.2; MCP's WebSocket clients offer
                                 "mcp" and give up on a 101 without it);
                                 NULL: none. Borrowed: must outlive the
                                 accept call */
} ludo__ws_options_t;

/* Fills `o` with the defaults above. */
void ludo__ws_options_init(ludo__ws_options_t *o);

/* A complete message: `binary` 0 for text (valid UTF-8), 1 for binary;
 * `data`/`len` borrowed until the callback returns. */
typedef void (*ludo__ws_message_cb)(void *ud, ludo__ws_t *ws, int binary,
                                    const char *data, size_t len);

/* The connection is gone: the last call, `ws` is freed when it returns.
 * `code` says why: the code of the close frame that began the closing
 * handshake (the peer's, 1005 when it had none; or ours: from
 * ludo__ws_close, 1002/1007/1009 when the peer broke the protocol, 1011 on
 * a pong timeout, 1001 when the server closes), or 1006 when the
 * connection ended without a close frame. `reason`/`len` is the close
 * frame's reason (UTF-8, maybe empty), borrowed until return. */
typedef void (*ludo__ws_close_cb)(void *ud, ludo__ws_t *ws, int code,
                                  const char *reason, size_t len);

/* The send queue emptied after a send was refused with LUDO_EBUSY. */
typedef void (*ludo__ws_drain_cb)(void *ud, ludo__ws_t *ws);

typedef struct ludo__ws_callbacks_s {
  ludo__ws_message_cb message;
  ludo__ws_close_cb close;
  ludo__ws_drain_cb drain; /* may be NULL */
} ludo__ws_callbacks_t;

/* Answers the upgrade request `req` and makes a WebSocket of its
 * connection. `o` (copied; NULL: defaults) and `cb` (copied) configure
 * it; `ud` is passed to the callbacks. The "101 Switching Protocols"
 * response is written once every response before it is (pipelining);
 * messages sent before that wait in the send queue. No callback runs
 * before this returns. Returns:
 *   0            *out is the WebSocket; `req` is gone;
 *   LUDO_EINVAL  `req` is not a valid opening handshake (see
 *                handshake.h): it was answered with 400 or 426 and a text
 *                body saying why, the connection closes after it, and
 *                `req` is gone; or `cb` lacks a callback (`req` untouched);
 *   LUDO_ECLOSED the connection is closing: `req` is aborted as its
 *                connection's requests are (the HTTP abort callback);
 *   LUDO_ENOMEM  nothing was done; `req` is still to be answered.
 * *out is NULL on every error. */
int ludo__ws_accept(ludo__http_req_t *req, const ludo__ws_options_t *o,
                    const ludo__ws_callbacks_t *cb, void *ud,
                    ludo__ws_t **out);

/* Makes a client WebSocket of `nc`, a connection whose opening handshake
 * succeeded (handshake.h): it becomes its protocol. `o` (copied; NULL:
 * defaults) and `cb` (copied) configure it; `ud` is passed to the
 * callbacks. `rest`/`n` are bytes the server sent after its 101 (copied;
 * delivered from the loop). No callback runs before this returns.
 * Returns 0 (*out is the WebSocket, which owns `nc` now: the close
 * callback comes when it is gone), LUDO_EINVAL (`cb` lacks a callback) or
 * LUDO_ENOMEM (`nc` untouched: the caller closes it). */
int ludo__ws_client(ludo__core_t *core, ludo__net_conn_t *nc,
                    const ludo__ws_options_t *o,
                    const ludo__ws_callbacks_t *cb, void *ud,
                    const char *rest, size_t n, ludo__ws_t **out);

/* Queues a message (copied): `binary` 0 sends text, which must be valid
 * UTF-8, 1 binary. Returns 0, LUDO_EINVAL (text that is not UTF-8),
 * LUDO_EBUSY (the queue holds bytes and would pass max_queued, or the
 * connection's output budget, conn.h: the peer is not reading; the drain
 * callback comes when it emptied), LUDO_ECLOSED
 * (a close frame was sent or received, or the connection is gone), or
 * LUDO_ENOMEM. */
int ludo__ws_send(ludo__ws_t *ws, int binary, const void *data, size_t len);

/* Starts the closing handshake with `code` (1000-1003, 1007-1014 or
 * 3000-4999) and `reason` (NULL or UTF-8 of at most 123 bytes, copied).
 * The close frame follows the messages sent before it (also those sent
 * from the message callback this is called from). The close callback
 * comes when the peer answered or close_timeout_ms passed. Returns 0,
 * LUDO_EINVAL (a code or reason not allowed) or LUDO_ECLOSED (a close
 * frame was sent or received already). */
int ludo__ws_close(ludo__ws_t *ws, int code, const char *reason);

/* Ends the connection now, without a closing handshake (a client giving
 * up: the runtime closing). The close callback follows from the loop
 * (1006 unless a close frame was exchanged before). */
void ludo__ws_abort(ludo__ws_t *ws);

/* Bytes waiting to be sent (queued messages and unsent frames). */
size_t ludo__ws_queued(const ludo__ws_t *ws);

/* 1 while the WebSocket holds a wslay context (8.8 KB): a server's holds
 * one only while wslay has part of a frame or message, frames to send or
 * a close under way; between messages it holds none (ws.c). */
int ludo__ws_holds_context(const ludo__ws_t *ws);

#endif
