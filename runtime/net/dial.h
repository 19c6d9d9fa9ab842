/* dial.h - outgoing TCP connections on the core's loop, for ludo's client:
 * the host name is resolved (uv_getaddrinfo, so names work without
 * blocking), each address is tried in turn until one connects ("localhost"
 * may give ::1 first on a machine without IPv6 loopback), all within a
 * time limit; then this is the socket transport of the connection's
 * ludo__net_conn_t, as server.c is for accepted ones: reads, writes with
 * uv_write, the connection's timer, graceful close with lingering.
 *
 * Every handle is counted on the core; a dial or its connection must be
 * closed, and its close completed, before the core closes. */
#ifndef LUDO_NET_DIAL_H
#define LUDO_NET_DIAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "net/conn.h"

typedef struct ludo__dial_s ludo__dial_t;

/* The outcome of a dial, once. status 0: `nc` is the connection, whose
 * protocol the callback sets (ludo__net_conn_set_proto) before it
 * returns; reading starts after. It belongs to the caller from then on:
 * closing it (ludo__net_conn_close) ends the dial too, after the
 * protocol's `closed` callback. Otherwise status is LUDO_ECONNECT (or
 * LUDO_ENOMEM), `nc` NULL and `msg` says what failed ("cannot connect to
 * 127.0.0.1 port 9: connection refused", "cannot resolve 'nosuch':
 * unknown node or service", "no connection to h port 80 within 10000
 * ms"), borrowed until the callback returns; the dial then releases
 * itself. */
typedef void (*ludo__dial_cb)(void *ud, int status, ludo__net_conn_t *nc,
                              const char *msg);

/* Starts connecting to `host` (a name or a numeric address, copied) port
 * `port` (1-65535) within `timeout_ms` (0: none). `high_water` is the
 * conn's (0: its default). The callback never runs before this returns.
 * Returns 0 and the dial in *out (for ludo__dial_cancel until the
 * callback ran), or LUDO_EINVAL (a host longer than 255 bytes, a bad
 * port) or LUDO_ENOMEM; the callback then never runs. */
int ludo__dial(ludo__core_t *core, const char *host, int port,
               uint32_t timeout_ms, size_t high_water, ludo__dial_cb cb,
               void *ud, ludo__dial_t **out);

/* Gives up a dial whose callback has not run yet: it never runs; the
 * dial's handles close and its memory is released from the loop. */
void ludo__dial_cancel(ludo__dial_t *d);

#endif
