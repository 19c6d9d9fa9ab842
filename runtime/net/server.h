/* server.h - an HTTP server on the core's loop (its own or the host's): a
 * libuv TCP listener whose connections speak HTTP/1.1 (http.h), and
 * WebSocket after an upgrade (ws.h). This file is the socket transport
 * of ludo__net_conn_t: reads, writes with uv_write, the connection's
 * timer, graceful shutdown with lingering, and the count of open
 * connections. Nothing here blocks: the host name must be numeric (or
 * "localhost"), so listening needs no resolver.
 *
 * Every handle is counted on the core (ludo__core_handle_opened/closed);
 * close the server, and let its close complete, before closing the core.
 *
 * Listening sets SIGPIPE to be ignored when its disposition is still the
 * default (a write to a connection the peer closed would end the process;
 * the write fails with EPIPE instead); a host's own handler is kept. */
#ifndef LUDO_NET_SERVER_H
#define LUDO_NET_SERVER_H

#include "core/core.h"
#include "net/http.h"

typedef struct ludo__server_s ludo__server_t;

/* Called once the server's last handle closed and its memory is freed. */
typedef void (*ludo__server_close_cb)(void *ud);

/* Makes a server on `core`'s loop. `o` (copied; NULL: defaults) sets the
 * limits of every connection and the connection count; `h` (copied) and
 * `ud` receive the requests. Returns 0 or LUDO_ENOMEM. */
int ludo__server_new(ludo__core_t *core, const ludo__http_options_t *o,
                     const ludo__http_handler_t *h, void *ud,
                     ludo__server_t **out);

/* Flags of ludo__server_listen. */
enum {
  /* Listen with SO_REUSEPORT: other sockets that set it too (servers on
   * other threads of this process, one per worker loop) bind the same
   * host and port, and the kernel spreads incoming connections over them
   * (Linux: by a hash of the connection's addresses). Closing one of them
   * drops the connections still waiting in its accept queue. */
  LUDO__LISTEN_REUSEPORT = 1,
  /* With LUDO__LISTEN_REUSEPORT: first check that nothing listens on the
   * address yet (a bind without SO_REUSEPORT, undone at once), so the
   * first server of a group never joins a stranger's sockets (another
   * process of the same user listening with SO_REUSEPORT); the others
   * then join it. */
  LUDO__LISTEN_EXCLUSIVE = 2
};

/* Binds `host` ("127.0.0.1", "::", "0.0.0.0", "localhost") and `port` (0:
 * any free port) and starts accepting (and ignores SIGPIPE, see above).
 * `flags` is 0 or LUDO__LISTEN_* or'ed. Returns 0, LUDO_EINVAL (a host
 * that is not a numeric address, a port out of range, listening
 * already, unknown flags) or LUDO_EIO (bind or listen failed: the address
 * is in use, say); ludo__server_errmsg() then says what happened. */
int ludo__server_listen(ludo__server_t *s, const char *host, int port,
                        unsigned flags);

/* The port the server listens on (the one chosen for port 0), or 0. */
int ludo__server_port(const ludo__server_t *s);

/* The message of the last failure of ludo__server_listen() ("" before
 * any). Valid until the next call on `s`. */
const char *ludo__server_errmsg(const ludo__server_t *s);

/* Connections open now. */
unsigned ludo__server_connections(const ludo__server_t *s);

/* Stops accepting new connections (closes the listener); the open ones
 * go on until ludo__server_close. */
void ludo__server_stop_accepting(ludo__server_t *s);

/* Stops accepting and ends every connection: idle HTTP connections close
 * at once, the others after the bytes already answered are sent (bounded
 * by the linger time); requests the handler still holds are aborted (its
 * abort callback); WebSockets close with 1001 (bounded by their close
 * timeout). `cb(ud)` (may be NULL) runs from the loop once everything is
 * closed and `s` freed; never before this returns. */
void ludo__server_close(ludo__server_t *s, ludo__server_close_cb cb,
                        void *ud);

/* After ludo__server_close, when its runtime is being freed: every
 * connection is closed now (what it had queued may not be sent) instead of
 * lingering, since nothing may wait for the peers; with nothing left to
 * close, the server is freed (and its callback runs) inside this call. */
void ludo__server_abort(ludo__server_t *s);

#endif
