/* http.h - the server side of an HTTP/1.1 connection: requests parsed with
 * http-parser from the bytes of a ludo__net_conn_t, handed to a handler
 * that answers each one, now or later, and responses written in the order
 * the requests came.
 *
 * Requests. A request reaches the handler once it is complete (headers
 * and body). The handler answers it exactly once, with
 * ludo__http_respond() or, for an upgrade, ludo__ws_accept() (ws.h),
 * during the callback or from any later callback of the loop (after a Lua
 * step, say). Until then the request is the handler's to read.
 *
 * Pipelining. A client may send requests without waiting for responses.
 * Up to `max_pipelined` of them are handed to the handler at once (by
 * default one: they are handled in order, one at a time, as RFC 9112
 * 9.3.2 asks of requests that are not safe); the next ones are parsed as
 * earlier ones are answered. Responses go out in
 * the order of the requests, whatever the order of the answers: an answer
 * to a later request waits, copied, until the earlier ones are written.
 *
 * The connection ends (keep-alive aside) after a request that asks for it
 * (Connection: close, HTTP/1.0 without keep-alive), after an error
 * response, when the peer closes its side or resets, on an idle timeout,
 * or when the server closes. Requests not answered by then are taken back:
 * the handler's `abort` callback tells it, and the request is gone once
 * that callback returns. A peer's end of file counts as the peer leaving
 * (as Go's server does): the requests it sent are aborted, so work for a
 * client that gave up can stop.
 *
 * Errors of the client never reach the handler: malformed input gets
 * "400 Bad Request", a request line or headers over the limits "414 URI
 * Too Long" or "431 Request Header Fields Too Large", a body over the
 * limit "413 Payload Too Large", a client too slow to send its headers or
 * body "408 Request Timeout", an HTTP major version other than 1 "505";
 * each with a one-line text body, "Connection: close", and the end of the
 * connection after the responses before it.
 *
 * Callbacks never run inside a call of the handler's to this module:
 * ludo__http_respond() writes, and the next pipelined request is parsed
 * from the loop's run queue. Every callback runs with the core's
 * in_callback count raised (blocking ludo calls inside return EBUSY). */
#ifndef LUDO_NET_HTTP_H
#define LUDO_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "net/conn.h"

typedef struct ludo__http_conn_s ludo__http_conn_t;
typedef struct ludo__http_req_s ludo__http_req_t;

/* Limits and timeouts of HTTP connections. Initialise with
 * ludo__http_options_init(); a 0 then means "the default". */
typedef struct ludo__http_options_s {
  size_t max_header_bytes;    /* request line and header lines as sent,
                                 optional whitespace included: 16 KiB
                                 (431; 414 when the target alone is
                                 longer) */
  unsigned max_headers;       /* header fields: 100 (431) */
  size_t max_body_bytes;      /* decoded body: 16 MiB (413) */
  unsigned max_pipelined;     /* requests with the handler at once, per
                                 connection: 1 (more only for a handler
                                 whose requests may run in parallel:
                                 all safe, RFC 9112 9.3.2) */
  uint32_t header_timeout_ms; /* from a request's first byte to the end of
                                 its headers: 10000 (408) */
  uint32_t body_timeout_ms;   /* longest wait between two reads of a
                                 body: 30000 (408); the whole body must
                                 come within it plus its length at
                                 8 KiB/s */
  uint32_t idle_timeout_ms;   /* a connection with no request under way
                                 and nothing sent or read for this long is
                                 closed: 30000 */
  uint32_t linger_ms;         /* a closing connection waits this long for
                                 the peer to take the last bytes: 5000 */
  size_t write_high_water;    /* stop reading while more bytes than this
                                 wait to be sent: 1 MiB */
  unsigned max_connections;   /* server.c: connections open at once; more
                                 are closed as they come: 4096 */
  ludo__net_budget_t *output_budget; /* server.c: the bound on the bytes
                                 all connections hold unsent (conn.h),
                                 borrowed; NULL: none. A connection whose
                                 next response would pass it while its
                                 earlier ones wait unsent is closed */
} ludo__http_options_t;

/* Fills `o` with the defaults above. */
void ludo__http_options_init(ludo__http_options_t *o);

/* Copies `in` into `o`, a 0 field taking its default (`in` NULL: all
 * defaults). */
void ludo__http_options_fill(ludo__http_options_t *o,
                             const ludo__http_options_t *in);

/* A header field: name and value NUL-terminated. In a request, the name as
 * the client spelt it, the value without surrounding whitespace. */
typedef struct ludo__http_header_s {
  const char *name;
  const char *value;
} ludo__http_header_t;

/* A complete request for the handler. `ud` is the handler's pointer;
 * `req` is borrowed until it is answered or aborted. */
typedef void (*ludo__http_request_cb)(void *ud, ludo__http_req_t *req);

/* `req` will never be answered: its connection ended first. It is freed
 * when the callback returns; answering it here returns LUDO_ECLOSED. */
typedef void (*ludo__http_abort_cb)(void *ud, ludo__http_req_t *req);

/* The connection answered a request itself, with `status`, and closes:
 * a malformed or oversized request (400, 413, 414, 431, 501, 505), a head
 * or body that came too slowly (408), no memory (500). The handler never
 * saw the request; this lets it count it. */
typedef void (*ludo__http_refused_cb)(void *ud, int status);

typedef struct ludo__http_handler_s {
  ludo__http_request_cb request;
  ludo__http_abort_cb abort;     /* may be NULL */
  ludo__http_refused_cb refused; /* may be NULL */
} ludo__http_handler_t;

/* Makes an HTTP connection on `nc`, which becomes its protocol, and arms
 * the idle timer. `o` (copied; NULL: defaults) and `h` (copied) configure
 * it; `ud` is passed to the handler. The HTTP connection frees itself when
 * `nc` closes (or after a WebSocket takes `nc` over). Returns 0 or
 * LUDO_ENOMEM (then `nc` is untouched and the caller closes it). */
int ludo__http_conn_new(ludo__core_t *core, ludo__net_conn_t *nc,
                        const ludo__http_options_t *o,
                        const ludo__http_handler_t *h, void *ud,
                        ludo__http_conn_t **out);

/* ---- reading a request (valid until it is answered or aborted) -------- */

/* The method as sent ("GET", "POST", ...). Static string. */
const char *ludo__http_req_method(const ludo__http_req_t *r);

/* The request-target as sent ("/step?x=1"), NUL-terminated. */
const char *ludo__http_req_target(const ludo__http_req_t *r);

/* The path of the target ("/step"; "*" for "OPTIONS *"), not
 * percent-decoded, NUL-terminated. An absolute-form target
 * ("http://host/step") gives its path too ("/" when it has none). */
const char *ludo__http_req_path(const ludo__http_req_t *r);

/* The query of the target without the '?', "" when there is none. */
const char *ludo__http_req_query(const ludo__http_req_t *r);

/* The value of the first header field named `name` (compared without
 * regard to case), or NULL. */
const char *ludo__http_req_header(const ludo__http_req_t *r,
                                  const char *name);

/* The number of header fields, and the i-th (0-based, in the order sent). */
size_t ludo__http_req_nheaders(const ludo__http_req_t *r);
ludo__http_header_t ludo__http_req_header_at(const ludo__http_req_t *r,
                                             size_t i);

/* The decoded body (chunked transfer coding removed) and its length in
 * *len; NUL-terminated for convenience (the body may hold NUL bytes). */
const char *ludo__http_req_body(const ludo__http_req_t *r, size_t *len);

/* 1 when the client asked to switch protocols (Connection: upgrade with
 * Upgrade). Such a request is answered with ludo__ws_accept(), or with a
 * response, after which the connection closes (the client may already
 * have sent bytes of the other protocol). */
int ludo__http_req_upgrade(const ludo__http_req_t *r);

/* HTTP version of the request (1.0 or 1.1), as major * 10 + minor. */
int ludo__http_req_version(const ludo__http_req_t *r);

/* The core the request's connection runs on. */
ludo__core_t *ludo__http_req_core(const ludo__http_req_t *r);

/* A pointer of the handler's, kept with the request (NULL at first): to
 * find its own state again in the abort callback. */
void ludo__http_req_set_data(ludo__http_req_t *r, void *data);
void *ludo__http_req_data(const ludo__http_req_t *r);

/* ---- answering -------------------------------------------------------- */

/* Answers `req` with `status` (200-599, not 101), the `n` header fields in
 * `h`, and the `len` bytes of `body`, all copied. The module adds
 * Content-Length (the body's length, also for HEAD, whose body is not
 * sent), Date unless `h` has one, and Connection when the connection
 * closes after this response (or keeps an HTTP/1.0 client alive).
 * Returns:
 *   0            answered: `req` is gone (do not touch it again);
 *   LUDO_EINVAL  a bad status, a header name that is not a token, a value
 *                with CR, LF or NUL, a framing header of the module's
 *                (Content-Length, Transfer-Encoding, Connection, Upgrade),
 *                or a body with 204/304;
 *   LUDO_ECLOSED the connection is closing or the request was aborted;
 *   LUDO_ENOMEM  no memory for the response.
 * On an error nothing was sent and `req` is still unanswered (or, for
 * ECLOSED, about to be aborted). */
int ludo__http_respond(ludo__http_req_t *req, int status,
                       const ludo__http_header_t *h, size_t n,
                       const void *body, size_t len);

/* Makes the connection of `req`, still unanswered, end after its response
 * (which then carries "Connection: close"): nothing after it is parsed.
 * For a server that is shutting down. */
void ludo__http_req_close_after(ludo__http_req_t *req);

/* For ws.c: what ludo__http_switch() calls once the switching response is
 * written. `nc` is the connection, now the caller's: it sets its protocol
 * on it. `rest`/`n` are the bytes the client sent after the request
 * (borrowed until the call returns). `nc` is NULL when the connection
 * ended before every earlier response could be written. */
typedef void (*ludo__http_switch_cb)(void *ud, ludo__net_conn_t *nc,
                                     const char *rest, size_t n);

/* Answers the upgrade request `req` with `head`/`len` (a complete 101
 * response head, copied). Once every earlier response is written, `head`
 * is written and `fn(ud, nc, rest, n)` hands the connection over; the HTTP
 * connection is freed after that. `fn` runs inside this call when no
 * earlier response is pending, so it must not call back into its caller
 * (ws.c defers everything it does to the loop).
 * Returns 0 (`req` is gone), LUDO_EINVAL (`req` is not an upgrade
 * request), LUDO_ECLOSED or LUDO_ENOMEM (nothing done; `fn` is never
 * called). */
int ludo__http_switch(ludo__http_req_t *req, const char *head, size_t len,
                      ludo__http_switch_cb fn, void *ud);

#endif
