/* serve.h - an OpenEnv server for one environment on a runtime's loop:
 * the HTTP routes, the /ws session protocol, MCP over HTTP and WebSocket,
 * sessions with capacity and idle reaping, and /metrics
 * (docs/protocol.md). Built on runtime/net (transport) and runtime/env
 * (sessions); runtime/ludo.c exposes it as ludo_server_* (ludo.h). */
#ifndef LUDO_SERVE_SERVE_H
#define LUDO_SERVE_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "env/env.h"
#include "ludo_defs.h"
#include "serve/metrics.h"

typedef struct ludo__serve_s ludo__serve_t;

/* What several servers (one per worker loop) share: the session count
 * that capacity is decided on, and the metrics. Zero it with
 * ludo__serve_shared_init; it must outlive its servers. */
typedef struct ludo__serve_shared_s {
  atomic_uint open;          /* sessions open or opening, all servers */
  ludo__metrics_t metrics;
} ludo__serve_shared_t;

void ludo__serve_shared_init(ludo__serve_shared_t *sh);

/* Fills `o` with the defaults of ludo_server_options_t. */
void ludo__serve_options_init(ludo_server_options_t *o);

/* Creates a server for `env` on its runtime's loop, from the public
 * options `o` (copied; the token too). `shared` may be NULL (the server
 * then has its own). Returns 0, LUDO_EINVAL (bad options; *errmsg says
 * which) or LUDO_ENOMEM. */
int ludo__serve_new(ludo_env_t *env, const ludo_server_options_t *o,
                    ludo__serve_shared_t *shared, ludo__serve_t **out,
                    const char **errmsg);

/* Listens on host:port (port 0: any free one). Returns 0, LUDO_EINVAL or
 * LUDO_EIO; ludo__serve_errmsg says why. */
int ludo__serve_listen(ludo__serve_t *sv, const char *host, int port);

/* The port listened on, or 0. */
int ludo__serve_port(const ludo__serve_t *sv);

/* The message of the last failure. Never NULL. */
const char *ludo__serve_errmsg(const ludo__serve_t *sv);

/* Stops accepting, ends every connection (WebSockets with 1001), closes
 * every session (calls in flight end), and frees the server; `cb(ud)`
 * (may be NULL) runs from the loop once all of it is done. */
void ludo__serve_close(ludo__serve_t *sv, void (*cb)(void *ud), void *ud);

/* Sessions open or opening on this server. */
unsigned ludo__serve_sessions(const ludo__serve_t *sv);

#endif
