/* conn.h - one connection's byte stream, between the protocol that speaks
 * on it (HTTP, then WebSocket after an upgrade) and the transport that
 * carries it (a TCP socket of server.c, or a test's memory).
 *
 * Bytes in, callbacks out: the transport hands what it reads to
 * ludo__net_conn_read() and reports its timer, the bytes it has written,
 * the peer's end and its own close; the conn passes these on to the
 * protocol's callbacks. The protocol writes with ludo__net_conn_write()
 * and ludo__net_conn_flush(), arms the connection's one timer, pauses
 * reading and closes. Nothing here touches a socket, so protocols are
 * tested by feeding byte scripts.
 *
 * Backpressure. The conn counts the bytes the protocol wrote that the
 * transport has not written yet. Above `high_water` it stops reading from
 * the peer, and reads again once they drop to half of it: a peer that does
 * not read what it asked for cannot make the server queue without bound.
 *
 * Closing. A graceful close hands what was written to the transport, which
 * sends it and then a FIN; the conn goes on reading and discarding until
 * the peer closes its side too, or for at most `linger_ms` (bytes left
 * unread when a socket closes make the kernel reset the connection, and
 * the peer could lose the last response). An abort drops everything now.
 * When the peer closed its side first, a graceful close ends as soon as
 * the last bytes are sent. Either way the transport reports the end with
 * ludo__net_conn_closed(), the protocol's last call.
 *
 * Everything runs on the loop's thread. No function here frees the conn:
 * the transport owns its memory and frees it after ludo__net_conn_closed()
 * returns. */
#ifndef LUDO_NET_CONN_H
#define LUDO_NET_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/core.h"

typedef struct ludo__net_conn_s ludo__net_conn_t;

/* A bound on the bytes many connections hold unsent together (a server's,
 * shared by the connections of all its threads). A connection counts its
 * pending bytes against it once they pass LUDO__NET_CONN_FREE_BYTES, so
 * the replies of clients that read cost no shared counting; the memory
 * they hold is then at most `max` plus that much per connection.
 * Protocols ask ludo__net_conn_over_budget before queuing more. */
typedef struct ludo__net_budget_s {
  _Atomic size_t used;            /* bytes counted now */
  _Atomic size_t max;             /* the bound (set by any of the threads
                                     sharing it, before they serve) */
} ludo__net_budget_t;

#define LUDO__NET_CONN_FREE_BYTES ((size_t)64 << 10)

/* What a transport does for a connection. No function calls back into the
 * conn before it returns; each reports later through the transport entry
 * points below. */
typedef struct ludo__net_sink_s {
  /* Takes ownership of the `len` bytes at `p`, a block of `cap` bytes from
   * the conn's allocator (freed with ludo__net_conn_free_block), and sends
   * them after the bytes passed before. Reports them with
   * ludo__net_conn_written() once sent; bytes still unsent when the
   * connection closes are dropped without a report. */
  void (*write)(ludo__net_conn_t *c, char *p, size_t len, size_t cap);
  /* Stops (paused 1) or restarts (0) reading from the peer. */
  void (*pause)(ludo__net_conn_t *c, int paused);
  /* Arms the connection's timer for `ms` milliseconds, replacing any
   * earlier setting; ms 0 stops it. On expiry the transport calls
   * ludo__net_conn_timeout(). */
  void (*timer)(ludo__net_conn_t *c, uint64_t ms);
  /* Ends the connection. abort 0: after sending the bytes passed so far,
   * send a FIN and go on reading (the conn discards what comes); abort 1:
   * now, dropping unsent bytes (may follow a graceful close). Ends with
   * ludo__net_conn_closed() once the transport holds nothing more. */
  void (*close)(ludo__net_conn_t *c, int abort);
} ludo__net_sink_t;

/* What a protocol receives from its connection. `p` is the protocol's
 * pointer given to ludo__net_conn_set_proto(). After a close has started
 * (ludo__net_conn_close) only `closed` comes. */
typedef struct ludo__net_proto_s {
  /* Bytes from the peer, borrowed until the call returns. */
  void (*read)(void *p, const char *data, size_t len);
  /* The peer closed its side. */
  void (*eof)(void *p);
  /* The timer set with ludo__net_conn_timer() expired. */
  void (*timeout)(void *p);
  /* The transport wrote some bytes (ludo__net_conn_pending tells how many
   * still wait). */
  void (*written)(void *p);
  /* The server is going away: end the connection soon. */
  void (*shutdown)(void *p);
  /* The connection is gone, its memory about to be freed: the last call.
   * The protocol lets go of the conn here. */
  void (*closed)(void *p);
} ludo__net_proto_t;

/* Reasons reading is paused (a bit mask). */
#define LUDO__NET_PAUSE_WRITE 1u /* backpressure, managed by the conn */
#define LUDO__NET_PAUSE_INPUT 2u /* the protocol cannot take more input */

struct ludo__net_conn_s {
  ludo__core_t *core;
  const ludo__net_sink_t *sink;
  void *sink_data;                /* the transport's */
  const ludo__net_proto_t *proto;
  void *proto_data;               /* the protocol's */
  ludo__buf_t out;                /* written, not yet given to the sink */
  size_t inflight;                /* given to the sink, not yet sent */
  size_t high_water;
  uint32_t linger_ms;
  unsigned paused;                /* LUDO__NET_PAUSE_* */
  int sink_paused;                /* what the sink was last told */
  int closing;                    /* 0, 1 graceful, 2 aborted */
  int eof;                        /* the peer closed its side */
  int closed;                     /* ludo__net_conn_closed ran */
  ludo__net_budget_t *budget;     /* NULL: none */
  size_t charged;                 /* bytes counted in budget->used */
};

/* 1 while reading is paused for backpressure: more than high_water bytes
 * written wait to be sent (until they drop to half of it). */
static inline int ludo__net_conn_write_full(const ludo__net_conn_t *c) {
  return (c->paused & LUDO__NET_PAUSE_WRITE) != 0;
}

/* Sets up `c` on `core` for a transport. high_water 0 means 1 MiB,
 * linger_ms 0 means 5000. The protocol is set next. Never fails. */
void ludo__net_conn_init(ludo__net_conn_t *c, ludo__core_t *core,
                         const ludo__net_sink_t *sink, void *sink_data,
                         size_t high_water, uint32_t linger_ms);

/* Makes `proto`/`p` the connection's protocol (replacing the previous one,
 * which hears nothing more). Both borrowed until `closed` is called or the
 * protocol is replaced. */
void ludo__net_conn_set_proto(ludo__net_conn_t *c,
                              const ludo__net_proto_t *proto, void *p);

/* Counts the connection's unsent bytes against `b` (borrowed: outlives the
 * conn; NULL: none), from its next flush on. */
void ludo__net_conn_set_budget(ludo__net_conn_t *c, ludo__net_budget_t *b);

/* ---- the protocol's side ---------------------------------------------- */

/* Copies `n` bytes for the peer; they go to the transport at the next
 * ludo__net_conn_flush(). Returns 0, LUDO_ECLOSED once a close started,
 * or LUDO_ENOMEM (nothing written). */
int ludo__net_conn_write(ludo__net_conn_t *c, const void *p, size_t n);

/* Makes room for `n` more bytes, so that writes adding up to that many
 * allocate once. Returns 0, LUDO_ECLOSED once a close started, or
 * LUDO_ENOMEM (nothing changed). */
int ludo__net_conn_reserve(ludo__net_conn_t *c, size_t n);

/* Hands the bytes written so far to the transport (one block), and stops
 * reading when more than high_water bytes wait. */
void ludo__net_conn_flush(ludo__net_conn_t *c);

/* Bytes written by the protocol that the transport has not sent yet. */
size_t ludo__net_conn_pending(const ludo__net_conn_t *c);

/* 1 when queuing `n` more bytes would take the connection's budget past
 * its bound while bytes of this connection still wait unsent (the peer is
 * behind); 0 otherwise, and always when nothing waits: a connection whose
 * peer reads can always send its next message. */
int ludo__net_conn_over_budget(const ludo__net_conn_t *c, size_t n);

/* Sets (on 1) or clears (0) a reason to stop reading
 * (LUDO__NET_PAUSE_INPUT); reading stops while any reason holds. */
void ludo__net_conn_pause(ludo__net_conn_t *c, unsigned reason, int on);

/* Arms the connection's timer (ms 0 stops it); ignored once a close
 * started (the conn then uses the timer to bound its lingering). */
void ludo__net_conn_timer(ludo__net_conn_t *c, uint64_t ms);

/* Starts closing: abort 0 after the bytes written so far are sent (see
 * above), abort 1 now. Repeating is harmless; an abort may follow a
 * graceful close. The protocol hears only `closed` afterwards, from a
 * later callback of the loop. */
void ludo__net_conn_close(ludo__net_conn_t *c, int abort);

/* ---- the transport's side --------------------------------------------- */

/* Bytes read from the peer, borrowed until the call returns. */
void ludo__net_conn_read(ludo__net_conn_t *c, const char *data, size_t len);

/* The peer closed its side (end of file). */
void ludo__net_conn_eof(ludo__net_conn_t *c);

/* Reading or writing failed (the peer reset the connection): aborts. */
void ludo__net_conn_error(ludo__net_conn_t *c);

/* The timer expired. */
void ludo__net_conn_timeout(ludo__net_conn_t *c);

/* `n` bytes given to sink->write were sent. */
void ludo__net_conn_written(ludo__net_conn_t *c, size_t n);

/* The server closes: the protocol ends the connection (gracefully). */
void ludo__net_conn_shutdown(ludo__net_conn_t *c);

/* The transport holds nothing more of the connection: tells the protocol
 * (its last call) and frees the conn's buffers. The transport frees the
 * memory of `c` after this returns. */
void ludo__net_conn_closed(ludo__net_conn_t *c);

/* Frees a block the transport received from sink->write. */
void ludo__net_conn_free_block(ludo__net_conn_t *c, char *p, size_t cap);

#endif
