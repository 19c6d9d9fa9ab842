/* fetch.h - one HTTP GET over a new connection, for ludo's client (an
 * OpenEnv server's /metadata and /schema): dial (dial.h), the request,
 * the response read with reply.h, then the connection closes. */
#ifndef LUDO_NET_FETCH_H
#define LUDO_NET_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

typedef struct ludo__fetch_s ludo__fetch_t;

/* The outcome, once. status 0: the server answered `http_status` with
 * `body`/`len` (borrowed until the callback returns). Otherwise
 * LUDO_ECONNECT (no connection, or it ended before the response),
 * LUDO_ENOREPLY (no complete response within the time limit),
 * LUDO_EPROTO (not an HTTP response), LUDO_ETOOBIG (a body over the
 * bound) or LUDO_ENOMEM, with `msg` saying what happened. The fetch
 * releases itself after the callback. */
typedef void (*ludo__fetch_cb)(void *ud, int status, int http_status,
                               const char *body, size_t len,
                               const char *msg);

/* GETs `target` ("/schema") from `host` port `port` with the Host field
 * `hostfield` and, when `token` is not NULL, "Authorization: Bearer
 * <token>" (all copied into the request; the caller checked them for
 * control characters), within `timeout_ms` for the connection and again
 * for the response (0: none), accepting a body of at most `max_body`
 * bytes. The callback never runs before this returns. Returns 0 and the
 * fetch in *out (for ludo__fetch_cancel until the callback ran), or
 * LUDO_EINVAL / LUDO_ENOMEM (the callback then never runs). */
int ludo__fetch(ludo__core_t *core, const char *host, int port,
                const char *hostfield, const char *target, const char *token,
                uint32_t timeout_ms, size_t max_body, ludo__fetch_cb cb,
                void *ud, ludo__fetch_t **out);

/* Gives up a fetch whose callback has not run: it never runs; what is
 * open closes from the loop. */
void ludo__fetch_cancel(ludo__fetch_t *f);

#endif
