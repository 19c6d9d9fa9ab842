/* handshake.h - the server's side of the WebSocket opening handshake (RFC
 * 6455 section 4.2): checking an upgrade request and computing
 * Sec-WebSocket-Accept (SHA-1 and base64 from nettle). No I/O. */
#ifndef LUDO_NET_HANDSHAKE_H
#define LUDO_NET_HANDSHAKE_H

#include <stddef.h>

#include "net/http.h"

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

#endif
