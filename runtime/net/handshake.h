/* handshake.h - the WebSocket opening handshake (RFC 6455 section 4):
 * the server's side (checking an upgrade request, computing
 * Sec-WebSocket-Accept with SHA-1 and base64 from nettle) and the
 * client's (a random key, the request, checking the server's 101). No
 * I/O. */
#ifndef LUDO_NET_HANDSHAKE_H
#define LUDO_NET_HANDSHAKE_H

#include <stddef.h>

#include "base/buf.h"
#include "net/http.h"
#include "net/reply.h"

/* Length of a Sec-WebSocket-Accept value (base64 of a SHA-1 digest). */
#define LUDO__HANDSHAKE_ACCEPT_LEN 28

/* Checks `req` as an opening handshake: method GET, HTTP/1.1 or later, an
 * Upgrade field naming "websocket" and a Connection field naming
 * "upgrade" (tokens in any case), a Sec-WebSocket-Key that is the base64
 * of 16 bytes, and Sec-WebSocket-Version 13. Returns 0, or the status to
 * refuse the request with: 400, or 426 when only the version is wrong
 * (the response then carries "Sec-WebSocket-Version: 13"); *why is then a
 * static sentence saying what is wrong. */
int ludo__handshake_check(const ludo__http_req_t *req, const char **why);

/* Writes the Sec-WebSocket-Accept value for `key` (a checked
 * Sec-WebSocket-Key) into `out`: LUDO__HANDSHAKE_ACCEPT_LEN characters and a
 * NUL. Never fails. */
void ludo__handshake_accept_key(const char *key, char *out);

/* ---- the client's side ------------------------------------------------ */

/* Length of a Sec-WebSocket-Key (base64 of 16 bytes). */
#define LUDO__HANDSHAKE_KEY_LEN 24

/* Writes a new Sec-WebSocket-Key made of 16 random bytes from the OS
 * (LUDO__HANDSHAKE_KEY_LEN characters and a NUL) into `key`. Returns 0 or
 * LUDO_EIO when no random bytes can be had. */
int ludo__handshake_new_key(char *key);

/* Appends to `b` the opening handshake request for `target` ("/ws?x=1")
 * on `host` (the Host field's value) with `key`, and, when `token` is not
 * NULL, "Authorization: Bearer <token>". The caller has checked that
 * target, host and token hold no control characters. Returns 0 or
 * LUDO_ENOMEM. */
int ludo__handshake_request(ludo__buf_t *b, const char *target,
                            const char *host, const char *key,
                            const char *token);

/* Checks the server's answer `r` (a complete response head) to the
 * request made with `key`: status 101, an Upgrade field naming websocket,
 * a Connection field naming upgrade, Sec-WebSocket-Accept matching the
 * key, and no extension or subprotocol (none was offered). Returns 0, or
 * -1 with *why a static sentence saying what is wrong. A status other
 * than 101 is the caller's to report (the server refused). */
int ludo__handshake_check_reply(const ludo__reply_t *r, const char *key,
                                const char **why);

#endif
