/* metrics.c - the server's counters and their Prometheus text. */
#include "serve/metrics.h"

#include <string.h>

#include "base/errors.h"

static const uint64_t bucket_us[LUDO__METRICS_BUCKETS] = {
    50,    100,    250,    500,    1000,    2500,    5000,    10000,
    25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000};

/* ludo's codes, in the order of metrics->errors[]. */
#define LUDO__METRICS_CODE(name, code, msg) LUDO_##name,
static const int codes[] = {LUDO_ERRNO_MAP(LUDO__METRICS_CODE)};
#undef LUDO__METRICS_CODE
_Static_assert(sizeof codes / sizeof *codes == LUDO__METRICS_NCODES,
               "one counter per ludo code");

static const char *const proto_names[LUDO__MERR_N] = {
    "INVALID_JSON",     "UNKNOWN_TYPE",    "VALIDATION_ERROR",
    "EXECUTION_ERROR",  "CAPACITY_REACHED", "FACTORY_ERROR",
    "SESSION_ERROR",    "HTTP_4XX",        "HTTP_5XX",
    "JSONRPC_ERROR"};

void ludo__metrics_init(ludo__metrics_t *m) { memset(m, 0, sizeof *m); }

void ludo__metrics_step(ludo__metrics_t *m, uint64_t us) {
  size_t i = 0;
  while (i < LUDO__METRICS_BUCKETS && us > bucket_us[i]) i++;
  atomic_fetch_add_explicit(&m->step_bucket[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->step_us_sum, us, memory_order_relaxed);
  atomic_fetch_add_explicit(&m->steps, 1, memory_order_relaxed);
}

void ludo__metrics_error(ludo__metrics_t *m, int err) {
  size_t i;
  for (i = 0; i < sizeof codes / sizeof *codes; i++) {
    if (codes[i] == err) {
      atomic_fetch_add_explicit(&m->errors[i], 1, memory_order_relaxed);
      return;
    }
  }
}

void ludo__metrics_proto(ludo__metrics_t *m, int which) {
  if (which >= 0 && which < LUDO__MERR_N)
    atomic_fetch_add_explicit(&m->proto_errors[which], 1,
                              memory_order_relaxed);
}

static unsigned long get(atomic_ulong *v) {
  return atomic_load_explicit(v, memory_order_relaxed);
}

static int counter(ludo__buf_t *b, const char *name, const char *help,
                   unsigned long v) {
  return ludo__buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %lu\n",
                          name, help, name, name, v) < 0;
}

/* The per-worker series of a group. */
static int render_workers(ludo__metrics_t *m, ludo__buf_t *b) {
  unsigned i;
  int bad = 0;
  bad |= ludo__buf_printf(b, "# HELP ludo_worker_sessions_open Sessions "
                             "open now, by worker.\n"
                             "# TYPE ludo_worker_sessions_open gauge\n") < 0;
  for (i = 0; i < m->nworkers; i++)
    bad |= ludo__buf_printf(b, "ludo_worker_sessions_open{worker=\"%u\"} "
                               "%ld\n", i,
                            atomic_load_explicit(
                                &m->workers[i].sessions_open,
                                memory_order_relaxed)) < 0;
  bad |= ludo__buf_printf(b, "# HELP ludo_worker_http_requests_total HTTP "
                             "requests received (WebSocket upgrades "
                             "included), by worker.\n"
                             "# TYPE ludo_worker_http_requests_total "
                             "counter\n") < 0;
  for (i = 0; i < m->nworkers; i++)
    bad |= ludo__buf_printf(b, "ludo_worker_http_requests_total{worker="
                               "\"%u\"} %lu\n", i,
                            get(&m->workers[i].http_requests)) < 0;
  bad |= ludo__buf_printf(b, "# HELP ludo_worker_forwarded_total Calls on "
                             "a session of another worker, passed to it, "
                             "by the worker that received them.\n"
                             "# TYPE ludo_worker_forwarded_total "
                             "counter\n") < 0;
  for (i = 0; i < m->nworkers; i++)
    bad |= ludo__buf_printf(b, "ludo_worker_forwarded_total{worker=\"%u\"} "
                               "%lu\n", i,
                            get(&m->workers[i].forwarded)) < 0;
  return bad;
}

int ludo__metrics_render(ludo__metrics_t *m, ludo__buf_t *b) {
  unsigned long cum = 0;
  size_t i;
  int bad = 0;
  bad |= ludo__buf_printf(
             b, "# HELP ludo_sessions_open Sessions open now.\n"
                "# TYPE ludo_sessions_open gauge\nludo_sessions_open %ld\n",
             atomic_load_explicit(&m->sessions_open,
                                  memory_order_relaxed)) < 0;
  bad |= counter(b, "ludo_sessions_opened_total", "Sessions opened.",
                 get(&m->sessions_opened));
  bad |= counter(b, "ludo_sessions_closed_total", "Sessions closed.",
                 get(&m->sessions_closed));
  bad |= counter(b, "ludo_sessions_reclaimed_total", "Idle HTTP sessions "
                 "closed to make room for a new session at capacity.",
                 get(&m->sessions_reclaimed));
  bad |= counter(b, "ludo_resets_total", "Resets that succeeded.",
                 get(&m->resets));
  bad |= counter(b, "ludo_tool_calls_total", "MCP tools/call requests.",
                 get(&m->tool_calls));
  bad |= ludo__buf_printf(b, "# HELP ludo_step_seconds Steps that "
                             "succeeded, by latency in the server.\n"
                             "# TYPE ludo_step_seconds histogram\n") < 0;
  for (i = 0; i <= LUDO__METRICS_BUCKETS; i++) {
    cum += get(&m->step_bucket[i]);
    if (i < LUDO__METRICS_BUCKETS)
      bad |= ludo__buf_printf(b, "ludo_step_seconds_bucket{le=\"%g\"} %lu\n",
                              (double)bucket_us[i] / 1e6, cum) < 0;
    else
      bad |= ludo__buf_printf(b, "ludo_step_seconds_bucket{le=\"+Inf\"} "
                                 "%lu\n", cum) < 0;
  }
  bad |= ludo__buf_printf(b, "ludo_step_seconds_sum %.6f\n"
                             "ludo_step_seconds_count %lu\n",
                          (double)get(&m->step_us_sum) / 1e6, cum) < 0;
  bad |= ludo__buf_printf(b, "# HELP ludo_errors_total Failed calls and "
                             "protocol errors, by code.\n"
                             "# TYPE ludo_errors_total counter\n") < 0;
  for (i = 0; i < sizeof codes / sizeof *codes; i++)
    bad |= ludo__buf_printf(b, "ludo_errors_total{code=\"%s\"} %lu\n",
                            ludo__err_name(codes[i]),
                            get(&m->errors[i])) < 0;
  for (i = 0; i < LUDO__MERR_N; i++)
    bad |= ludo__buf_printf(b, "ludo_errors_total{code=\"%s\"} %lu\n",
                            proto_names[i], get(&m->proto_errors[i])) < 0;
  bad |= counter(b, "ludo_received_bytes_total",
                 "Bytes of request bodies and WebSocket messages received.",
                 get(&m->bytes_in));
  bad |= counter(b, "ludo_sent_bytes_total",
                 "Bytes of response bodies and WebSocket messages sent.",
                 get(&m->bytes_out));
  bad |= counter(b, "ludo_http_requests_total", "HTTP requests answered.",
                 get(&m->http_requests));
  bad |= counter(b, "ludo_ws_messages_total",
                 "WebSocket messages received.", get(&m->ws_messages));
  if (m->output != NULL)
    bad |= ludo__buf_printf(
               b, "# HELP ludo_output_pending_bytes Bytes waiting to be "
                  "sent on connections holding more than 64 KiB each "
                  "(bounded by the server's max_output_bytes).\n"
                  "# TYPE ludo_output_pending_bytes gauge\n"
                  "ludo_output_pending_bytes %zu\n",
               atomic_load_explicit(&m->output->used,
                                    memory_order_relaxed)) < 0;
  if (m->input != NULL)
    bad |= ludo__buf_printf(
               b, "# HELP ludo_input_pending_bytes Bytes of WebSocket "
                  "messages waiting for their session on connections "
                  "holding more than 64 KiB each (bounded by the server's "
                  "max_output_bytes).\n"
                  "# TYPE ludo_input_pending_bytes gauge\n"
                  "ludo_input_pending_bytes %zu\n",
               atomic_load_explicit(&m->input->used,
                                    memory_order_relaxed)) < 0;
  if (m->nworkers > 0) bad |= render_workers(m, b);
  return bad ? -1 : 0;
}
