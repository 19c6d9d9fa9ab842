/* url.h - the address of an OpenEnv server, as the client is given it:
 * parsed with http-parser's URL parser and turned into the WebSocket URL
 * of its /ws route the way OpenEnv's client does (utils.py,
 * convert_to_ws_url), so the same strings work with both:
 *
 *   http://host:8000        ->  ws://host:8000/ws
 *   http://host/prefix/     ->  ws://host/prefix/ws
 *   host:8000 (no scheme)   ->  ws://host:8000/ws
 *   ws://host:8000          ->  ws://host:8000/ws
 *   ws://host:8000/ws       ->  ws://host:8000/ws  (a ws:// URL with a path
 *                                is used as given; OpenEnv would append a
 *                                second /ws)
 *
 * https:// and wss:// are refused with a message saying why (the client
 * speaks no TLS), as are other schemes, user information and a port out
 * of range. No I/O. */
#ifndef LUDO_NET_URL_H
#define LUDO_NET_URL_H

#include <stddef.h>

/* Longest URL accepted. */
#define LUDO__URL_MAX 2048

typedef struct ludo__url_s {
  char host[256];       /* a name or an address (IPv6 without brackets) */
  int port;             /* 80 when the URL names none */
  char base[LUDO__URL_MAX + 320]; /* http://host:port/prefix: where the
                                    HTTP routes are (/schema, /metadata) */
  char prefix[LUDO__URL_MAX];    /* the path before /ws ("" or "/x/y") */
  char target[LUDO__URL_MAX + 8]; /* the /ws request target, with the
                                     URL's query */
  char ws[LUDO__URL_MAX + 380];   /* the whole WebSocket URL, for messages */
  char hostfield[300];  /* the Host header field's value */
} ludo__url_t;

/* Parses `in` into *u. Returns 0, or -1 with a sentence in `err` (at most
 * `n` bytes) saying what is wrong with the URL. */
int ludo__url_parse(const char *in, ludo__url_t *u, char *err, size_t n);

#endif
