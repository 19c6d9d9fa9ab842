/* metrics.h - the server's counters, shared by its workers (C11 atomics),
 * and their Prometheus text exposition for GET /metrics. */
#ifndef LUDO_SERVE_METRICS_H
#define LUDO_SERVE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "ludo_defs.h"
#include "net/conn.h"

/* The number of ludo's error codes (ludo_defs.h), one counter each. */
#define LUDO__METRICS_ONE(name, code, msg) +1
enum { LUDO__METRICS_NCODES = 0 LUDO_ERRNO_MAP(LUDO__METRICS_ONE) };
#undef LUDO__METRICS_ONE

/* Upper bounds of the step latency histogram, in microseconds. */
#define LUDO__METRICS_BUCKETS 16

/* Protocol errors counted besides ludo's own codes (metrics.c names
 * them as OpenEnv's WSErrorCode and JSON-RPC do). */
enum {
  LUDO__MERR_INVALID_JSON = 0,
  LUDO__MERR_UNKNOWN_TYPE,
  LUDO__MERR_VALIDATION,
  LUDO__MERR_EXECUTION,
  LUDO__MERR_CAPACITY,
  LUDO__MERR_FACTORY,
  LUDO__MERR_SESSION,
  LUDO__MERR_HTTP_4XX,
  LUDO__MERR_HTTP_5XX,
  LUDO__MERR_RPC,
  LUDO__MERR_N
};

/* One worker's share of the counters, in a group of servers. */
typedef struct ludo__worker_metrics_s {
  atomic_long sessions_open;
  atomic_ulong http_requests;  /* requests received, WebSocket upgrades
                                  included */
  atomic_ulong forwarded;      /* calls it passed to the worker owning
                                  the session */
} ludo__worker_metrics_t;

typedef struct ludo__metrics_s {
  atomic_long sessions_open;
  atomic_ulong sessions_opened, sessions_closed;
  atomic_ulong sessions_reclaimed;       /* closed to make room (reclaim.c) */
  atomic_ulong resets, steps, tool_calls;
  atomic_ulong step_bucket[LUDO__METRICS_BUCKETS + 1]; /* last: +Inf */
  atomic_ulong step_us_sum;
  atomic_ulong errors[LUDO__METRICS_NCODES]; /* by ludo code */
  atomic_ulong proto_errors[LUDO__MERR_N];
  atomic_ulong bytes_in, bytes_out;      /* request bodies, messages */
  atomic_ulong http_requests, ws_messages;
  /* In a group: one entry per worker (borrowed from the group, which
   * sets them after ludo__metrics_init); NULL for a lone server. */
  ludo__worker_metrics_t *workers;
  unsigned nworkers;
  /* The connections' output budget, shown as a gauge (borrowed; NULL:
   * none). */
  ludo__net_budget_t *output;
  /* The WebSocket messages waiting for their session (the input budget),
   * shown as a gauge too (borrowed; NULL: none). */
  ludo__net_budget_t *input;
} ludo__metrics_t;

/* Zeroes `m` (no workers). */
void ludo__metrics_init(ludo__metrics_t *m);

/* Counts a step that took `us` microseconds (from the message's arrival
 * to its reply). */
void ludo__metrics_step(ludo__metrics_t *m, uint64_t us);

/* Counts a failed call with ludo code `err` (a LUDO_E* code). */
void ludo__metrics_error(ludo__metrics_t *m, int err);

/* Counts a protocol error (LUDO__MERR_*). */
void ludo__metrics_proto(ludo__metrics_t *m, int which);

/* Appends the Prometheus text format (version 0.0.4) of `m` to `b`, with
 * the per-worker series (label worker="N") in a group. Returns 0, or -1
 * when `b` cannot grow. */
int ludo__metrics_render(ludo__metrics_t *m, ludo__buf_t *b);

#endif
