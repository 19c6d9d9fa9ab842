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
  /* By worker: its idle HTTP sessions that may give their slot to a
   * newcomer, less those given already (reclaim.c). Only the worker adds;
   * any worker takes one, never below 0. */
  atomic_uint spare[LUDO_SERVER_MAX_WORKERS];
  /* By worker: when the least recently used of those became idle
   * (sv_now_us), UINT64_MAX when it lists none; written by the worker,
   * read by any (reclaim.c takes the oldest of all). */
  _Atomic uint64_t oldest[LUDO_SERVER_MAX_WORKERS];
  ludo__net_budget_t output; /* unsent bytes of all connections
                                (max_output_bytes) */
  ludo__net_budget_t input;  /* bytes of the WebSocket messages waiting
                                for their session, all connections
                                (also max_output_bytes; wsproto.c) */
  ludo__metrics_t metrics;
} ludo__serve_shared_t;

void ludo__serve_shared_init(ludo__serve_shared_t *sh);

/* A group of servers for one environment, one per worker thread (group.c):
 * the shared count and metrics, and each worker's inbox, the queue of
 * messages other workers send it (forward.c: calls on the sessions it
 * owns, and their answers). ludo_server_group_t is this type. */
typedef struct ludo__serve_group_s ludo__serve_group_t;

/* Makes a group for `n` servers (1 to LUDO_SERVER_MAX_WORKERS). Its memory
 * comes from the C library's allocator through ludo__alloc_default: it
 * belongs to no runtime (a runtime's heap counts for one thread). Returns
 * 0, LUDO_EINVAL or LUDO_ENOMEM. */
int ludo__serve_group_new(unsigned n, ludo__serve_group_t **out);

/* Frees the group; its servers must all be closed. Accepts NULL. */
void ludo__serve_group_free(ludo__serve_group_t *g);

/* Fills `o` with the defaults of ludo_server_options_t. */
void ludo__serve_options_init(ludo_server_options_t *o);

/* Creates a server for `env` on its runtime's loop, from the public
 * options `o` (copied; the token too). With o->group it joins that group
 * as worker o->worker (else it has a count and metrics of its own).
 * Returns 0, LUDO_EINVAL (bad options; the message is copied into
 * err/errlen) or LUDO_ENOMEM. */
int ludo__serve_new(ludo_env_t *env, const ludo_server_options_t *o,
                    ludo__serve_t **out, char *err, size_t errlen);

/* Listens on host:port (port 0: any free one), with SO_REUSEPORT when
 * the options ask for it or the server is one of a group of several
 * (worker 0 checking that nothing listens there yet). Returns 0,
 * LUDO_EINVAL or LUDO_EIO; ludo__serve_errmsg says why. */
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
