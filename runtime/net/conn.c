/* conn.c - one connection's byte stream (see conn.h). */
#include "net/conn.h"

#define DEFAULT_HIGH_WATER ((size_t)1 << 20)
#define DEFAULT_LINGER_MS 5000u

void ludo__net_conn_init(ludo__net_conn_t *c, ludo__core_t *core,
                         const ludo__net_sink_t *sink, void *sink_data,
                         size_t high_water, uint32_t linger_ms) {
  c->core = core;
  c->sink = sink;
  c->sink_data = sink_data;
  c->proto = NULL;
  c->proto_data = NULL;
  ludo__buf_init(&c->out, ludo__alloc_fn, &core->heap);
  c->inflight = 0;
  c->high_water = high_water ? high_water : DEFAULT_HIGH_WATER;
  c->linger_ms = linger_ms ? linger_ms : DEFAULT_LINGER_MS;
  c->paused = 0;
  c->sink_paused = 0;
  c->closing = 0;
  c->eof = 0;
  c->closed = 0;
  c->budget = NULL;
  c->charged = 0;
}

void ludo__net_conn_set_budget(ludo__net_conn_t *c, ludo__net_budget_t *b) {
  c->budget = b;
}

/* Brings what the connection counts against its budget up to date: its
 * pending bytes past the free allowance, all of them; none below it
 * (`live` 0: once gone). */
static void recharge(ludo__net_conn_t *c, int live) {
  size_t pending = c->out.len + c->inflight;
  size_t want = live && pending > LUDO__NET_CONN_FREE_BYTES ? pending : 0;
  if (c->budget == NULL || want == c->charged) return;
  if (want > c->charged) {
    atomic_fetch_add(&c->budget->used, want - c->charged);
  } else {
    atomic_fetch_sub(&c->budget->used, c->charged - want);
    /* Output that piled up for a slow reader is freed: the C library
     * keeps it unless told (malloc_trim, once a few MiB went). Output
     * under the free allowance, a reading client's, is not counted. */
    ludo__core_note_freed(c->core, c->charged - want);
  }
  c->charged = want;
}

int ludo__net_conn_over_budget(const ludo__net_conn_t *c, size_t n) {
  size_t pending = c->out.len + c->inflight, used, after;
  if (c->budget == NULL || pending == 0) return 0;
  after = pending + n;
  if (after <= LUDO__NET_CONN_FREE_BYTES) return 0;
  used = atomic_load(&c->budget->used) - c->charged;
  return used + after > atomic_load_explicit(&c->budget->max,
                                            memory_order_relaxed);
}

void ludo__net_conn_set_proto(ludo__net_conn_t *c,
                              const ludo__net_proto_t *proto, void *p) {
  c->proto = proto;
  c->proto_data = p;
}

/* Tells the sink whether to read, when that changed. While a graceful
 * close lingers the conn reads (and discards) whatever the reasons. */
static void sync_pause(ludo__net_conn_t *c) {
  int want = c->paused != 0 && c->closing == 0;
  if (c->closing == 2 || want == c->sink_paused) return;
  c->sink_paused = want;
  c->sink->pause(c, want);
}

int ludo__net_conn_write(ludo__net_conn_t *c, const void *p, size_t n) {
  if (c->closing) return LUDO_ECLOSED;
  return ludo__buf_add(&c->out, p, n) == 0 ? 0 : LUDO_ENOMEM;
}

int ludo__net_conn_reserve(ludo__net_conn_t *c, size_t n) {
  if (c->closing) return LUDO_ECLOSED;
  return ludo__buf_reserve(&c->out, n) == 0 ? 0 : LUDO_ENOMEM;
}

/* Unused bytes past which a block's buffer is shrunk before it is sent. */
#define SLACK_BYTES ((size_t)1024)

void ludo__net_conn_flush(ludo__net_conn_t *c) {
  char *p;
  size_t len, cap;
  if (c->out.len == 0 || c->closing == 2) return;
  /* The block goes to the sink as it is: what its buffer holds beyond
   * the bytes (its growth by doubling) is given back first, so the memory
   * a slow reader holds is what its pending bytes count. */
  if (c->out.cap - c->out.len > SLACK_BYTES) ludo__buf_fit(&c->out);
  p = c->out.p;
  len = c->out.len;
  cap = c->out.cap;
  ludo__buf_init(&c->out, ludo__alloc_fn, &c->core->heap);
  c->inflight += len;
  recharge(c, 1);
  c->sink->write(c, p, len, cap);
  if (c->inflight > c->high_water && !(c->paused & LUDO__NET_PAUSE_WRITE)) {
    c->paused |= LUDO__NET_PAUSE_WRITE;
    sync_pause(c);
  }
}

size_t ludo__net_conn_pending(const ludo__net_conn_t *c) {
  return c->out.len + c->inflight;
}

void ludo__net_conn_pause(ludo__net_conn_t *c, unsigned reason, int on) {
  if (on)
    c->paused |= reason;
  else
    c->paused &= ~reason;
  sync_pause(c);
}

void ludo__net_conn_timer(ludo__net_conn_t *c, uint64_t ms) {
  if (c->closing == 0) c->sink->timer(c, ms);
}

void ludo__net_conn_close(ludo__net_conn_t *c, int abort) {
  if (c->closed || c->closing == 2) return;
  if (abort) {
    c->closing = 2;
    ludo__buf_free(&c->out);
    /* Nothing more will be sent: what it held stops counting now, not
     * when the transport has closed (the blocks in flight go with it). */
    recharge(c, 0);
    c->sink->close(c, 1);
    return;
  }
  if (c->closing) return;
  ludo__net_conn_flush(c);
  if (c->eof && c->inflight == 0) { /* the peer is gone, nothing to send */
    ludo__net_conn_close(c, 1);
    return;
  }
  c->closing = 1;
  sync_pause(c); /* read again: lingering discards what comes */
  c->sink->timer(c, c->linger_ms);
  c->sink->close(c, 0);
}

void ludo__net_conn_read(ludo__net_conn_t *c, const char *data, size_t len) {
  if (c->closing || c->proto == NULL || len == 0) return;
  c->proto->read(c->proto_data, data, len);
}

void ludo__net_conn_eof(ludo__net_conn_t *c) {
  c->eof = 1;
  if (c->closing) {
    ludo__net_conn_close(c, 1); /* the peer is done too */
    return;
  }
  if (c->proto) c->proto->eof(c->proto_data);
}

void ludo__net_conn_error(ludo__net_conn_t *c) { ludo__net_conn_close(c, 1); }

void ludo__net_conn_timeout(ludo__net_conn_t *c) {
  if (c->closing) {
    ludo__net_conn_close(c, 1); /* lingered long enough */
    return;
  }
  if (c->proto) c->proto->timeout(c->proto_data);
}

void ludo__net_conn_written(ludo__net_conn_t *c, size_t n) {
  c->inflight = n <= c->inflight ? c->inflight - n : 0;
  recharge(c, 1);
  if (c->closing == 1 && c->eof && c->inflight == 0)
    ludo__net_conn_close(c, 1); /* sent; the peer closed already */
  if (c->closing) return;
  if ((c->paused & LUDO__NET_PAUSE_WRITE) &&
      ludo__net_conn_pending(c) <= c->high_water / 2) {
    c->paused &= ~LUDO__NET_PAUSE_WRITE;
    sync_pause(c);
  }
  if (c->proto) c->proto->written(c->proto_data);
}

void ludo__net_conn_shutdown(ludo__net_conn_t *c) {
  if (c->closing || c->proto == NULL) return;
  c->proto->shutdown(c->proto_data);
}

void ludo__net_conn_closed(ludo__net_conn_t *c) {
  const ludo__net_proto_t *proto = c->proto;
  if (c->closed) return;
  c->closed = 1;
  c->closing = 2;
  recharge(c, 0);
  c->proto = NULL;
  if (proto) proto->closed(c->proto_data);
  ludo__buf_free(&c->out);
}

void ludo__net_conn_free_block(ludo__net_conn_t *c, char *p, size_t cap) {
  if (p != NULL) ludo__alloc_fn(&c->core->heap, p, cap, 0);
}
