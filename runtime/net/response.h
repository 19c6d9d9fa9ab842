/* response.h - the bytes of an HTTP/1.1 response head: the status line,
 * the caller's header fields (checked, so a handler cannot split a
 * response or break the framing), and the fields the server owns
 * (Content-Length, Date, Connection). Used by http.c; no I/O. */
#ifndef LUDO_NET_RESPONSE_H
#define LUDO_NET_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "net/http.h"

/* What ludo__response_head adds besides the caller's fields. */
#define LUDO__RESPONSE_CLOSE 1u     /* "Connection: close" */
#define LUDO__RESPONSE_KEEP 2u      /* "Connection: keep-alive" (an
                                       HTTP/1.0 client staying) */
#define LUDO__RESPONSE_NO_LENGTH 4u /* no Content-Length (1xx, 204, 304) */

/* Checks what a handler gives for a response: `status` in 200-599, `n`
 * fields in `h` with token names and values without CR, LF or NUL, none
 * of Content-Length, Transfer-Encoding, Connection, Upgrade, and no body
 * (`body_len` 0) with 204 or 304. Returns 0 or LUDO_EINVAL. */
int ludo__response_check(int status, const ludo__http_header_t *h, size_t n,
                         size_t body_len);

/* Appends a response head to `b`: "HTTP/1.1 <status> <reason>", the `n`
 * fields of `h` as given, Date (unless `h` has one), Content-Length
 * `body_len` (unless LUDO__RESPONSE_NO_LENGTH), Connection per `flags`,
 * and the empty line. The fields are not checked here. Returns 0 or
 * LUDO_ENOMEM (b may hold part of the head). */
int ludo__response_head(ludo__buf_t *b, int status,
                        const ludo__http_header_t *h, size_t n,
                        size_t body_len, unsigned flags);

/* Appends a complete error response to `b`: `status` with a text/plain
 * body "<reason>: <msg>\n" and "Connection: close". Returns 0 or
 * LUDO_ENOMEM. */
int ludo__response_error(ludo__buf_t *b, int status, const char *msg);

/* Writes the IMF-fixdate of `t` (seconds since the epoch, UTC) into
 * `out` (at least 30 bytes): "Sun, 06 Nov 1994 08:49:37 GMT",
 * NUL-terminated, whatever the process's locale; returns its length (29).
 * Never fails. */
size_t ludo__response_date(char *out, int64_t t);

/* The reason phrase of a status ("Not Found"), "" for codes without one.
 * Static string. */
const char *ludo__response_reason(int status);

/* 1 when c is one of RFC 9110's token characters (field names, methods). */
int ludo__http_tchar(unsigned char c);

#endif
