/* netmem.h - helpers of the runtime/net tests: a core on its own loop with
 * the counting allocator; a memory transport for ludo__net_conn_t (the
 * test feeds bytes, reads what the connection wrote, acknowledges writes,
 * fires the timer and completes closes by hand, so nothing depends on
 * time or sockets); an HTTP handler that records requests; and a decoder
 * of the frames a server wrote (wslay's frame API, client side). */
#ifndef LUDO_SPEC_NETMEM_H
#define LUDO_SPEC_NETMEM_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "helpers.h"
#include "net/conn.h"
#include "net/http.h"
#include "net/ws.h"

/* ---- a core ----------------------------------------------------------- */

/* Sets up `c` on its own loop with the counting allocator (test_heap);
 * its log lines go to test_log. */
void net_core_init(ludo__core_t *c);

/* The same on a loop of the host's (`loop`, borrowed). */
void net_core_init_on(ludo__core_t *c, uv_loop_t *loop);

/* Runs what the core's queue holds (posted tasks), without blocking. */
void net_core_pump(ludo__core_t *c);

/* Closes `c` and fails the test unless every byte and block went back. */
#define net_core_free(c) net_core__free(__FILE__, __LINE__, (c))
void net_core__free(const char *file, int line, ludo__core_t *c);

/* ---- the memory transport --------------------------------------------- */

typedef struct mem_s {
  ludo__net_conn_t conn;
  char *out;            /* everything written, NUL-terminated */
  size_t out_len, out_cap;
  size_t unacked;       /* written, not yet reported with mem_ack */
  size_t blocks;        /* sink->write calls */
  size_t slack_max;     /* the most unused bytes a block came with */
  int paused;           /* what the conn last asked */
  uint64_t timer_ms;    /* the timer's setting (0: stopped) */
  int close_req;        /* 0, 1 graceful, 2 abort (the highest asked) */
  int closed;           /* mem_finish ran */
} mem_t;

/* Makes a conn on the memory transport (high_water 0: the default). */
void mem_init(mem_t *m, ludo__core_t *core, size_t high_water);

/* Feeds `n` bytes as one read. */
void mem_feed(mem_t *m, const char *s, size_t n);
#define MEM_FEED(m, lit) mem_feed((m), (lit), sizeof(lit) - 1)

/* Reports every written byte as sent. */
void mem_ack(mem_t *m);

/* Fires the timer (fails the test when it is not set). */
void mem_fire(mem_t *m);

/* Completes the transport's close, as the close callbacks of its handles
 * would: the protocol's last call. Fails the test when no close was
 * asked. */
void mem_finish(mem_t *m);

/* Returns the bytes written since the last take (NUL-terminated; valid
 * until the next take or mem_free), and forgets them. */
const char *mem_take(mem_t *m, size_t *len);

/* Frees the captured bytes (after mem_finish). */
void mem_free(mem_t *m);

/* Removes the "Date: ...\r\n" lines from a response text in place, so it
 * can be compared byte for byte; fails the test when a response head has
 * none. Returns `s`. */
char *net_strip_date(char *s);

/* ---- a recording handler ---------------------------------------------- */

#define REC_MAX 32

typedef struct rec_s {
  int n;                       /* requests received */
  int aborted;                 /* abort callbacks */
  int abort_rc;                /* what answering inside the abort gave */
  int refused;                 /* requests the connection answered itself */
  int refused_status;          /* ... the status of the last one */
  int answer_now;              /* answer inside the request callback */
  ludo__http_req_t *req[REC_MAX]; /* the requests, unanswered ones live */
  char method[REC_MAX][16];
  char target[REC_MAX][256];
  char path[REC_MAX][256];
  char query[REC_MAX][256];
  char body[REC_MAX][512];
  size_t body_len[REC_MAX];
  int upgrade[REC_MAX];
  int version[REC_MAX];
  size_t nheaders[REC_MAX];
} rec_t;

extern const ludo__http_handler_t rec_handler;

/* Answers the i-th request with 200, "Content-Type: text/plain" and the
 * body "<i>:<path>"; fails the test unless that returns 0. */
void rec_answer(rec_t *r, int i);

/* ---- frames a server wrote -------------------------------------------- */

typedef struct frame_s {
  int fin, opcode, masked;
  size_t len;
  char data[512];              /* the payload (cut at 511), NUL-terminated */
} frame_t;

/* Decodes the whole frames in `p`/`n` into `f` (at most `max`); returns how
 * many, or fails the test when the bytes are not whole valid frames. */
#define net_frames(p, n, f, max) \
  net__frames(__FILE__, __LINE__, (p), (n), (f), (max))
int net__frames(const char *file, int line, const char *p, size_t n,
                frame_t *f, int max);

/* Builds a masked client frame (fin, opcode, payload) into `out` (room for
 * len + 14 bytes); returns its length. The mask key is fixed
 * (0x37fa213d, RFC 6455 section 5.7). */
size_t net_client_frame(char *out, int fin, int opcode, const char *payload,
                        size_t len);

/* An opening handshake request for "/ws" with the RFC 6455 sample key. */
extern const char net_ws_upgrade[];

#endif
