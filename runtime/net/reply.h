/* reply.h - an HTTP/1.1 response read by a client, parsed with
 * http-parser: status, header fields and body, with bounds on the head
 * and the body. Bytes in, results out: no I/O, so it is tested with byte
 * scripts. A "101 Switching Protocols" response ends at its head: the
 * bytes after it belong to the next protocol (WebSocket frames the server
 * sent at once). */
#ifndef LUDO_NET_REPLY_H
#define LUDO_NET_REPLY_H

#include <http_parser.h>
#include <stddef.h>

#include "base/alloc.h"
#include "base/buf.h"

typedef struct ludo__reply_s {
  http_parser parser;
  ludo__buf_t text;          /* name\0value\0 ... of the header fields */
  size_t *offs;              /* name offsets into text, two per field */
  size_t nfields, cap;
  int in_value;              /* the last header bytes were a value */
  ludo__buf_t body;
  ludo__alloc_t *heap;
  size_t max_head, max_body;
  size_t head_bytes;
  int head_done, done;
  int failed;                /* 0, or the code feed returned */
  char err[160];             /* what was wrong */
} ludo__reply_t;

/* Sets up `r` for one response of at most `max_head` bytes of status line
 * and fields and `max_body` bytes of body (decoded), allocating from
 * `heap`. Never fails. */
void ludo__reply_init(ludo__reply_t *r, ludo__alloc_t *heap, size_t max_head,
                      size_t max_body);

/* Frees what `r` holds. */
void ludo__reply_free(ludo__reply_t *r);

/* Feeds `len` bytes (borrowed). Returns 0 (more is needed), 1 (the
 * response is complete; *used says how many of these bytes it took: the
 * rest follow it), or a failure, which sticks: LUDO_EPROTO (not an HTTP
 * response; r->err says why) or LUDO_ETOOBIG (the head or the body is
 * over its bound; r->err says which), LUDO_ENOMEM. */
int ludo__reply_feed(ludo__reply_t *r, const char *data, size_t len,
                     size_t *used);

/* The connection ended. Returns 1 when that completes the response (a
 * body that runs to the end of the connection), else LUDO_EPROTO (r->err:
 * "the connection ended inside the response"). */
int ludo__reply_eof(ludo__reply_t *r);

/* The status code, once the head is complete (0 before). */
int ludo__reply_status(const ludo__reply_t *r);

/* The value of the first field named `name` (any case), or NULL. */
const char *ludo__reply_header(const ludo__reply_t *r, const char *name);

/* The number of header fields, and the name and value of the i-th. */
size_t ludo__reply_nheaders(const ludo__reply_t *r);
void ludo__reply_header_at(const ludo__reply_t *r, size_t i,
                           const char **name, const char **value);

/* The body so far (NUL-terminated), its length in *len. */
const char *ludo__reply_body(const ludo__reply_t *r, size_t *len);

#endif
