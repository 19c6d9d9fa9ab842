/* dial.c - outgoing TCP connections (see dial.h).
 *
 * A dial is one allocation: the name's resolution, one uv_tcp_t per
 * address tried (closed and made again for the next one), one uv_timer_t
 * (the dial's time limit, then the conn's timer), and the conn itself.
 * It is freed once nothing of it is left on the loop: no resolution
 * pending, both handles closed, and, when it connected, the conn's
 * closed callback run. */
#include "net/dial.h"
#include "net/sigpipe.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define READ_BUF ((size_t)64 << 10)

enum { D_RESOLVING, D_CONNECTING, D_CONNECTED, D_FAILED };

typedef struct wreq_s {
  uv_write_t req;
  char *p;
  size_t len, cap;
} wreq_t;

struct ludo__dial_s {
  ludo__core_t *core;
  ludo__dial_cb cb;
  void *ud;
  char host[256];
  int port;
  uint32_t timeout_ms;
  size_t high_water;
  int state;                  /* D_* */
  int cancelled;              /* the callback must not run */
  int gai_pending;            /* uv_getaddrinfo not yet called back */
  int tcp_open, timer_open;   /* handles not yet closed */
  int closing;                /* the connection's close began (uv_close) */
  int shutting;               /* uv_shutdown requested */
  int conn_done;              /* ludo__net_conn_closed ran */
  uv_getaddrinfo_t gai;
  struct addrinfo *ai, *next; /* addresses, the next to try */
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_timer_t timer;
  uv_shutdown_t shut;
  int last_err;               /* libuv's code of the last attempt */
  char *rbuf;                 /* READ_BUF bytes once connected */
  int rbuf_busy;
  ludo__net_conn_t conn;
};

static const ludo__net_sink_t dial_sink;

#define DIAL(c) ((ludo__dial_t *)(c)->sink_data)

/* ---- lifetime --------------------------------------------------------- */

/* Frees the dial once nothing of it is on the loop. */
static void maybe_free(ludo__dial_t *d) {
  if (d->gai_pending || d->tcp_open || d->timer_open) return;
  if (d->state == D_CONNECTED && !d->conn_done) return;
  if (d->ai) uv_freeaddrinfo(d->ai);
  if (d->rbuf) ludo__free(&d->core->heap, d->rbuf, READ_BUF);
  ludo__free(&d->core->heap, d, sizeof *d);
}

/* A handle closed. The core hears of it last: the conn's closed callback
 * and the frees use the core's allocator, which may go with its last
 * handle. */
static void handle_closed(uv_handle_t *h) {
  ludo__dial_t *d = h->data;
  ludo__core_t *core = d->core;
  if (h == (uv_handle_t *)&d->tcp)
    d->tcp_open = 0;
  else
    d->timer_open = 0;
  /* A connection is over for its protocol once both handles are gone. */
  if (d->state == D_CONNECTED && !d->tcp_open && !d->timer_open &&
      !d->conn_done) {
    d->conn_done = 1;
    ludo__net_conn_closed(&d->conn);
  }
  maybe_free(d);
  ludo__core_handle_closed(core);
}

static void close_tcp(ludo__dial_t *d) {
  if (d->tcp_open && !uv_is_closing((uv_handle_t *)&d->tcp))
    uv_close((uv_handle_t *)&d->tcp, handle_closed);
}

static void close_all(ludo__dial_t *d) {
  close_tcp(d);
  if (d->timer_open && !uv_is_closing((uv_handle_t *)&d->timer))
    uv_close((uv_handle_t *)&d->timer, handle_closed);
}

/* The dial failed: says why (unless cancelled) and releases itself. */
static void fail(ludo__dial_t *d, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(ludo__dial_t *d, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  if (d->state == D_FAILED) return;
  d->state = D_FAILED;
  close_all(d);
  if (!d->cancelled) {
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->cancelled = 1;
    d->core->in_callback++;
    d->cb(d->ud, status, NULL, msg);
    d->core->in_callback--;
  }
  maybe_free(d);
}

/* ---- connecting ------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void try_next(ludo__dial_t *d);
static void attempt_closed(uv_handle_t *h);

static void on_connect(uv_connect_t *req, int status) {
  ludo__dial_t *d = req->data;
  if (d->state != D_CONNECTING) return; /* failed or cancelled meanwhile */
  if (status != 0) {
    d->last_err = status;
    /* Its close callback tries the next address. */
    uv_close((uv_handle_t *)&d->tcp, attempt_closed);
    return;
  }
  d->rbuf = ludo__malloc(&d->core->heap, READ_BUF);
  if (d->rbuf == NULL) {
    fail(d, LUDO_ENOMEM, "no memory for a connection");
    return;
  }
  uv_timer_stop(&d->timer);
  d->state = D_CONNECTED;
  uv_tcp_nodelay(&d->tcp, 1);
  ludo__net_conn_init(&d->conn, d->core, &dial_sink, d, d->high_water, 0);
  d->core->in_callback++;
  d->cb(d->ud, 0, &d->conn, NULL);
  d->core->in_callback--;
  if (!d->closing &&
      uv_read_start((uv_stream_t *)&d->tcp, on_alloc, on_read) != 0)
    ludo__net_conn_error(&d->conn);
}

/* The handle of a failed attempt closed: the next address. */
static void attempt_closed(uv_handle_t *h) {
  ludo__dial_t *d = h->data;
  ludo__core_t *core = d->core;
  d->tcp_open = 0;
  if (d->state == D_CONNECTING)
    try_next(d);
  else
    maybe_free(d);
  ludo__core_handle_closed(core);
}

static void try_next(ludo__dial_t *d) {
  struct addrinfo *a = d->next;
  int rc;
  if (a == NULL) {
    fail(d, LUDO_ECONNECT, "cannot connect to %s port %d: %s", d->host,
         d->port, uv_strerror(d->last_err ? d->last_err : UV_ECONNREFUSED));
    return;
  }
  d->next = a->ai_next;
  uv_tcp_init(d->core->loop, &d->tcp);
  ludo__core_handle_opened(d->core);
  d->tcp_open = 1;
  d->tcp.data = d;
  d->creq.data = d;
  rc = uv_tcp_connect(&d->creq, &d->tcp, a->ai_addr, on_connect);
  if (rc != 0) {
    d->last_err = rc;
    uv_close((uv_handle_t *)&d->tcp, attempt_closed);
  }
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  ludo__dial_t *d = req->data;
  d->gai_pending = 0;
  d->ai = res;
  if (d->state == D_FAILED) {
    maybe_free(d);
    return;
  }
  if (status != 0 || res == NULL) {
    fail(d, LUDO_ECONNECT, "cannot resolve '%s': %s", d->host,
         uv_strerror(status ? status : UV_EAI_NONAME));
    return;
  }
  d->state = D_CONNECTING;
  d->next = res;
  try_next(d);
}

static void on_dial_timeout(uv_timer_t *t) {
  ludo__dial_t *d = t->data;
  if (d->state == D_CONNECTED) {
    ludo__net_conn_timeout(&d->conn);
    return;
  }
  if (d->gai_pending) uv_cancel((uv_req_t *)&d->gai);
  fail(d, LUDO_ECONNECT, "no connection to %s port %d within %u ms",
       d->host, d->port, (unsigned)d->timeout_ms);
}

/* ---- the sink --------------------------------------------------------- */

static void on_written(uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *)req;
  ludo__dial_t *d = req->data;
  size_t len = w->len;
  ludo__net_conn_free_block(&d->conn, w->p, w->cap);
  ludo__free(&d->core->heap, w, sizeof *w);
  if (status == 0)
    ludo__net_conn_written(&d->conn, len);
  else if (status != UV_ECANCELED)
    ludo__net_conn_error(&d->conn);
}

static void sink_close(ludo__net_conn_t *c, int abort);

static void sink_write(ludo__net_conn_t *c, char *p, size_t len,
                       size_t cap) {
  ludo__dial_t *d = DIAL(c);
  wreq_t *w;
  uv_buf_t b;
  if (d->closing || d->shutting) {
    ludo__net_conn_free_block(c, p, cap);
    return;
  }
  w = ludo__malloc(&d->core->heap, sizeof *w);
  if (w == NULL) {
    ludo__net_conn_free_block(c, p, cap);
    sink_close(c, 1);
    return;
  }
  w->p = p;
  w->len = len;
  w->cap = cap;
  w->req.data = d;
  b = uv_buf_init(p, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&d->tcp, &b, 1, on_written) != 0) {
    ludo__net_conn_free_block(c, p, cap);
    ludo__free(&d->core->heap, w, sizeof *w);
    sink_close(c, 1);
  }
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
  ludo__dial_t *d = h->data;
  (void)want;
  if (!d->rbuf_busy) {
    d->rbuf_busy = 1;
    *buf = uv_buf_init(d->rbuf, (unsigned)READ_BUF);
    return;
  }
  /* A read inside a read (a loop run from a callback): its own buffer. */
  buf->base = ludo__malloc(&d->core->heap, READ_BUF);
  buf->len = buf->base ? READ_BUF : 0;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  ludo__dial_t *d = st->data;
  if (n > 0)
    ludo__net_conn_read(&d->conn, buf->base, (size_t)n);
  else if (n == UV_EOF)
    ludo__net_conn_eof(&d->conn);
  else if (n < 0)
    ludo__net_conn_error(&d->conn);
  if (buf->base == d->rbuf)
    d->rbuf_busy = 0;
  else if (buf->base)
    ludo__free(&d->core->heap, buf->base, READ_BUF);
}

static void sink_pause(ludo__net_conn_t *c, int paused) {
  ludo__dial_t *d = DIAL(c);
  if (d->closing) return;
  if (paused)
    uv_read_stop((uv_stream_t *)&d->tcp);
  else
    uv_read_start((uv_stream_t *)&d->tcp, on_alloc, on_read);
}

static void sink_timer(ludo__net_conn_t *c, uint64_t ms) {
  ludo__dial_t *d = DIAL(c);
  if (d->closing) return;
  if (ms == 0)
    uv_timer_stop(&d->timer);
  else
    uv_timer_start(&d->timer, on_dial_timeout, ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  ludo__dial_t *d = req->data;
  if (status != 0 && status != UV_ECANCELED) ludo__net_conn_error(&d->conn);
}

static void sink_close(ludo__net_conn_t *c, int abort) {
  ludo__dial_t *d = DIAL(c);
  if (abort) {
    if (d->closing) return;
    d->closing = 1;
    close_all(d);
    return;
  }
  if (d->shutting || d->closing) return;
  d->shutting = 1;
  d->shut.data = d;
  if (uv_shutdown(&d->shut, (uv_stream_t *)&d->tcp, on_shutdown) != 0) {
    d->closing = 1;
    close_all(d);
  }
}

static const ludo__net_sink_t dial_sink = {sink_write, sink_pause,
                                           sink_timer, sink_close};

/* ---- the API ---------------------------------------------------------- */

int ludo__dial(ludo__core_t *core, const char *host, int port,
               uint32_t timeout_ms, size_t high_water, ludo__dial_cb cb,
               void *ud, ludo__dial_t **out) {
  struct addrinfo hints;
  char service[16];
  ludo__dial_t *d;
  int rc;
  *out = NULL;
  if (host == NULL || strlen(host) >= sizeof d->host || port < 1 ||
      port > 65535 || cb == NULL)
    return LUDO_EINVAL;
  ludo__net_ignore_sigpipe(); /* the server going away must not kill us */
  d = ludo__calloc(&core->heap, sizeof *d);
  if (d == NULL) return LUDO_ENOMEM;
  d->core = core;
  d->cb = cb;
  d->ud = ud;
  d->port = port;
  d->timeout_ms = timeout_ms;
  d->high_water = high_water;
  strcpy(d->host, host);
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  snprintf(service, sizeof service, "%d", port);
  d->gai.data = d;
  rc = uv_getaddrinfo(core->loop, &d->gai, on_resolved, d->host, service,
                      &hints);
  if (rc != 0) {
    ludo__free(&core->heap, d, sizeof *d);
    return rc == UV_ENOMEM ? LUDO_ENOMEM : LUDO_EINVAL;
  }
  d->gai_pending = 1;
  uv_timer_init(core->loop, &d->timer);
  ludo__core_handle_opened(core);
  d->timer_open = 1;
  d->timer.data = d;
  if (timeout_ms > 0)
    uv_timer_start(&d->timer, on_dial_timeout, timeout_ms, 0);
  *out = d;
  return 0;
}

void ludo__dial_cancel(ludo__dial_t *d) {
  if (d == NULL || d->state == D_CONNECTED || d->state == D_FAILED) return;
  d->cancelled = 1;
  if (d->gai_pending) uv_cancel((uv_req_t *)&d->gai);
  d->state = D_FAILED;
  close_all(d);
  maybe_free(d);
}
