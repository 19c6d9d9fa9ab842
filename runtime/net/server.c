/* server.c - the TCP listener and the socket transport of connections
 * (see server.h).
 *
 * One accepted connection is a `sock_t`: its uv_tcp_t, its uv_timer_t
 * (the conn's one timer) and its ludo__net_conn_t. A write is first tried
 * at once (uv_try_write): what the kernel takes then is reported to the
 * conn from the run queue (the sock's task; the conn hears nothing
 * inside sink->write), and the rest becomes a uv_write request that owns
 * the block until its callback. Most responses and frames go out whole
 * that way, without a request, and without the epoll_ctl() libuv makes
 * when a uv_write completes (it re-registers the socket). A graceful
 * close is uv_shutdown (sent after the pending writes) while reading goes
 * on, and the handles are closed when the conn asks for an abort (the
 * peer closed too, or the linger time passed). The sock is freed once
 * both handles are closed, after ludo__net_conn_closed().
 *
 * Reads go into one buffer per server: the conn and its protocols copy
 * what they keep before the read callback returns. */
#include "net/server.h"
#include "net/sigpipe.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "net/conn.h"

#define READ_BUF ((size_t)64 << 10)
/* Connections the kernel completes before they are accepted (it caps this
 * at net.core.somaxconn, 4096 on current Linux). A burst past the backlog
 * is dropped and retried by the clients a second later: with 1,000
 * handshakes in flight, 511 gave a connect p99 of 3.5 s, 4096 0.6 s
 * (bench/serve_bench.c --connecting 1000). */
#define BACKLOG 4096

/* What a message touches (the socket, the conn, the report) comes first;
 * the timer, the shutdown request and the list links after. */
typedef struct sock_s {
  uv_tcp_t tcp;
  ludo__net_conn_t conn;
  ludo__server_t *srv;
  size_t sent;                 /* written at once, not yet reported */
  ludo__task_t report;         /* reports `sent` to the conn */
  int handles;                 /* open handles of this sock */
  int shutting;                /* uv_shutdown requested */
  int closing;                 /* uv_close requested */
  uv_timer_t timer;
  uv_shutdown_t shut;
  struct sock_s *prev, *next;
} sock_t;

typedef struct wreq_s {
  uv_write_t req;
  char *p;
  size_t len, cap;             /* the block; len counts what it reports */
} wreq_t;

struct ludo__server_s {
  ludo__core_t *core;
  ludo__http_options_t o;
  ludo__http_handler_t h;
  void *ud;
  uv_tcp_t listener;
  int listener_open;           /* the listener handle is not closed yet */
  int listening;
  int port;
  sock_t *socks;
  unsigned nsocks;
  unsigned refusing;           /* refused connections still closing */
  int closing;
  ludo__server_close_cb close_cb;
  void *close_ud;
  ludo__task_t finish;         /* ends a close with nothing left to wait
                                  for (maybe_finish from the loop) */
  int rbuf_busy;
  char errmsg[256];
  char rbuf[READ_BUF];
};

static const ludo__net_sink_t sock_sink;

#define SOCK(c) ((sock_t *)(c)->sink_data)

/* ---- the server's end ------------------------------------------------- */

/* Frees the server once the listener and every sock are closed. */
static void maybe_finish(ludo__server_t *s) {
  ludo__server_close_cb cb;
  void *ud;
  if (!s->closing || s->listener_open || s->nsocks > 0 || s->refusing > 0)
    return;
  cb = s->close_cb;
  ud = s->close_ud;
  ludo__core_unpost(s->core, &s->finish);
  ludo__free(&s->core->heap, s, sizeof *s);
  if (cb) cb(ud);
}

static void finish_task(ludo__task_t *t) {
  maybe_finish((ludo__server_t *)((char *)t -
                                  offsetof(ludo__server_t, finish)));
}

/* ---- a sock's handles ------------------------------------------------- */

/* In every close callback here the core's count drops last: on a
 * borrowed loop whose runtime is being freed, the last handle's close
 * frees the runtime, its heap with it. */
static void sock_handle_closed(uv_handle_t *h) {
  sock_t *k = h->data;
  ludo__server_t *s = k->srv;
  ludo__core_t *core = s->core;
  if (--k->handles > 0) {
    ludo__core_handle_closed(core);
    return;
  }
  if (k->prev)
    k->prev->next = k->next;
  else
    s->socks = k->next;
  if (k->next) k->next->prev = k->prev;
  s->nsocks--;
  ludo__net_conn_closed(&k->conn);
  ludo__free(&s->core->heap, k, sizeof *k);
  maybe_finish(s);              /* may free s */
  ludo__core_handle_closed(core);
}

static void sock_close(sock_t *k) {
  if (k->closing) return;
  k->closing = 1;
  ludo__core_unpost(k->srv->core, &k->report);
  uv_close((uv_handle_t *)&k->tcp, sock_handle_closed);
  uv_close((uv_handle_t *)&k->timer, sock_handle_closed);
}

/* ---- the sink --------------------------------------------------------- */

static void on_written(uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *)req;
  sock_t *k = req->data;
  size_t len = w->len;
  ludo__net_conn_free_block(&k->conn, w->p, w->cap);
  ludo__free(&k->srv->core->heap, w, sizeof *w);
  if (status == 0)
    ludo__net_conn_written(&k->conn, len);
  else if (status != UV_ECANCELED)
    ludo__net_conn_error(&k->conn);
}

/* The run queue's report of what uv_try_write sent. */
static void report_sent(ludo__task_t *t) {
  sock_t *k = (sock_t *)((char *)t - offsetof(sock_t, report));
  size_t n = k->sent;
  k->sent = 0;
  if (n > 0 && !k->closing) ludo__net_conn_written(&k->conn, n);
}

static void sink_write(ludo__net_conn_t *c, char *p, size_t len,
                       size_t cap) {
  sock_t *k = SOCK(c);
  wreq_t *w;
  uv_buf_t b = uv_buf_init(p, (unsigned)len);
  int n;
  if (k->closing || k->shutting) {
    ludo__net_conn_free_block(c, p, cap);
    return;
  }
  /* UV_EAGAIN also while earlier requests wait: the order is kept. */
  n = uv_try_write((uv_stream_t *)&k->tcp, &b, 1);
  if (n > 0) {
    k->sent += (size_t)n;
    ludo__core_post(k->srv->core, &k->report);
    if ((size_t)n == len) {
      ludo__net_conn_free_block(c, p, cap);
      return;
    }
  } else if (n != UV_EAGAIN) { /* the peer is gone: as a failed write */
    ludo__net_conn_free_block(c, p, cap);
    sock_close(k);
    return;
  } else {
    n = 0;
  }
  w = ludo__malloc(&k->srv->core->heap, sizeof *w);
  if (w == NULL) {
    ludo__net_conn_free_block(c, p, cap);
    sock_close(k);
    return;
  }
  w->p = p;
  w->len = len - (size_t)n;
  w->cap = cap;
  w->req.data = k;
  b = uv_buf_init(p + n, (unsigned)(len - (size_t)n));
  if (uv_write(&w->req, (uv_stream_t *)&k->tcp, &b, 1, on_written) != 0) {
    ludo__net_conn_free_block(c, p, cap);
    ludo__free(&k->srv->core->heap, w, sizeof *w);
    sock_close(k);
  }
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
  sock_t *k = h->data;
  ludo__server_t *s = k->srv;
  (void)want;
  if (!s->rbuf_busy) {
    s->rbuf_busy = 1;
    *buf = uv_buf_init(s->rbuf, (unsigned)sizeof s->rbuf);
    return;
  }
  /* A read inside a read (a loop run from a callback): its own buffer. */
  buf->base = ludo__malloc(&s->core->heap, READ_BUF);
  buf->len = buf->base ? READ_BUF : 0;
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  sock_t *k = st->data;
  ludo__server_t *s = k->srv;
  if (n > 0)
    ludo__net_conn_read(&k->conn, buf->base, (size_t)n);
  else if (n == UV_EOF)
    ludo__net_conn_eof(&k->conn);
  else if (n < 0)
    ludo__net_conn_error(&k->conn);
  if (buf->base == s->rbuf)
    s->rbuf_busy = 0;
  else if (buf->base)
    ludo__free(&s->core->heap, buf->base, READ_BUF);
}

static void sink_pause(ludo__net_conn_t *c, int paused) {
  sock_t *k = SOCK(c);
  if (k->closing) return;
  if (paused)
    uv_read_stop((uv_stream_t *)&k->tcp);
  else
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

static void on_timer(uv_timer_t *t) {
  sock_t *k = t->data;
  ludo__net_conn_timeout(&k->conn);
}

static void sink_timer(ludo__net_conn_t *c, uint64_t ms) {
  sock_t *k = SOCK(c);
  if (k->closing) return;
  if (ms == 0)
    uv_timer_stop(&k->timer);
  else
    uv_timer_start(&k->timer, on_timer, ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  sock_t *k = req->data;
  if (status != 0 && status != UV_ECANCELED) ludo__net_conn_error(&k->conn);
}

static void sink_close(ludo__net_conn_t *c, int abort) {
  sock_t *k = SOCK(c);
  if (abort) {
    sock_close(k);
    return;
  }
  if (k->shutting || k->closing) return;
  k->shutting = 1;
  k->shut.data = k;
  if (uv_shutdown(&k->shut, (uv_stream_t *)&k->tcp, on_shutdown) != 0)
    sock_close(k);
}

static const ludo__net_sink_t sock_sink = {sink_write, sink_pause,
                                           sink_timer, sink_close};

/* ---- accepting -------------------------------------------------------- */

static void refused_closed(uv_handle_t *h) {
  ludo__server_t *s = h->data;
  ludo__core_t *core = s->core;
  ludo__free(&core->heap, h, sizeof(uv_tcp_t));
  s->refusing--;
  maybe_finish(s);              /* may free s */
  ludo__core_handle_closed(core);
}

static void on_connection(uv_stream_t *l, int status) {
  ludo__server_t *s = l->data;
  ludo__core_t *core = s->core;
  ludo__http_conn_t *hc;
  sock_t *k;
  if (status < 0) {
    ludo__log(&core->log, LUDO_LOG_WARN, "ludo", "accept: %s",
              uv_strerror(status));
    return;
  }
  if (s->nsocks >= s->o.max_connections) {
    /* Over the limit: accept and close, so the backlog does not fill
     * with connections that would wait for nothing. */
    uv_tcp_t *t = ludo__malloc(&core->heap, sizeof *t);
    if (t == NULL || uv_tcp_init(core->loop, t) != 0) {
      if (t) ludo__free(&core->heap, t, sizeof *t);
      return;
    }
    ludo__core_handle_opened(core);
    t->data = s;
    uv_accept(l, (uv_stream_t *)t);
    s->refusing++;
    uv_close((uv_handle_t *)t, refused_closed);
    ludo__log(&core->log, LUDO_LOG_WARN, "ludo",
              "connection refused: %u connections open (the limit)",
              s->o.max_connections);
    return;
  }
  k = ludo__calloc(&core->heap, sizeof *k);
  if (k == NULL) return;
  k->srv = s;
  k->report.fn = report_sent;
  uv_tcp_init(core->loop, &k->tcp);
  uv_timer_init(core->loop, &k->timer);
  ludo__core_handle_opened(core);
  ludo__core_handle_opened(core);
  k->handles = 2;
  k->tcp.data = k;
  k->timer.data = k;
  k->next = s->socks;
  if (s->socks) s->socks->prev = k;
  s->socks = k;
  s->nsocks++;
  ludo__net_conn_init(&k->conn, core, &sock_sink, k, s->o.write_high_water,
                      s->o.linger_ms);
  ludo__net_conn_set_budget(&k->conn, s->o.output_budget);
  if (uv_accept(l, (uv_stream_t *)&k->tcp) != 0 ||
      ludo__http_conn_new(core, &k->conn, &s->o, &s->h, s->ud, &hc) != 0) {
    sock_close(k);
    return;
  }
  uv_tcp_nodelay(&k->tcp, 1);
  if (uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read) != 0)
    ludo__net_conn_error(&k->conn);
}

/* ---- the API ---------------------------------------------------------- */

int ludo__server_new(ludo__core_t *core, const ludo__http_options_t *o,
                     const ludo__http_handler_t *h, void *ud,
                     ludo__server_t **out) {
  ludo__server_t *s;
  *out = NULL;
  if (h == NULL || h->request == NULL) return LUDO_EINVAL;
  s = ludo__calloc(&core->heap, sizeof *s);
  if (s == NULL) return LUDO_ENOMEM;
  s->core = core;
  ludo__http_options_fill(&s->o, o);
  s->h = *h;
  s->ud = ud;
  uv_tcp_init(core->loop, &s->listener);
  ludo__core_handle_opened(core);
  s->listener.data = s;
  s->listener_open = 1;
  *out = s;
  return 0;
}

/* The port of a bound socket address. */
static int port_of(const struct sockaddr_storage *ss) {
  return ss->ss_family == AF_INET6
             ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port)
             : ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static void set_port(struct sockaddr_storage *ss, int port) {
  if (ss->ss_family == AF_INET6)
    ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* A bound TCP socket for `ss` (SO_REUSEADDR as libuv's bind sets it, and
 * SO_REUSEPORT when `reuseport`). Returns the descriptor, or a negative
 * errno (UV_E*) value. */
static int bound_socket(const struct sockaddr_storage *ss, int reuseport) {
  socklen_t len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                            : sizeof(struct sockaddr_in);
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0), on = 1, err;
  if (fd < 0) return -errno;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      (reuseport &&
       setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) ||
      bind(fd, (const struct sockaddr *)ss, len) != 0) {
    err = -errno;
    close(fd);
    return err;
  }
  return fd;
}

/* Binds the listener with SO_REUSEPORT (LUDO__LISTEN_REUSEPORT): libuv
 * 1.44 has no flag for it, so the socket is made here and given to the
 * handle with uv_tcp_open. With LUDO__LISTEN_EXCLUSIVE a probe bound
 * without SO_REUSEPORT first fails when anything listens there; for port
 * 0 it also picks the port. Returns 0 or a UV_E* code. */
static int bind_reuseport(ludo__server_t *s, struct sockaddr_storage *ss,
                          unsigned flags) {
  int fd;
  if (flags & LUDO__LISTEN_EXCLUSIVE) {
    struct sockaddr_storage got;
    socklen_t n = sizeof got;
    int probe = bound_socket(ss, 0);
    if (probe < 0) return probe;
    if (getsockname(probe, (struct sockaddr *)&got, &n) == 0)
      set_port(ss, port_of(&got));
    close(probe);
  }
  fd = bound_socket(ss, 1);
  if (fd < 0) return fd;
  if (uv_tcp_open(&s->listener, (uv_os_sock_t)fd) != 0) {
    close(fd);
    return UV_EINVAL;
  }
  return 0;
}

int ludo__server_listen(ludo__server_t *s, const char *host, int port,
                        unsigned flags) {
  struct sockaddr_storage ss;
  int namelen = sizeof ss, rc;
  const char *ip = host;
  s->errmsg[0] = '\0';
  if (s->listening || s->closing) {
    snprintf(s->errmsg, sizeof s->errmsg, "the server listens already");
    return LUDO_EINVAL;
  }
  if (host == NULL || port < 0 || port > 65535) {
    snprintf(s->errmsg, sizeof s->errmsg, "port %d is out of range", port);
    return LUDO_EINVAL;
  }
  if ((flags & ~(unsigned)(LUDO__LISTEN_REUSEPORT | LUDO__LISTEN_EXCLUSIVE)) ||
      ((flags & LUDO__LISTEN_EXCLUSIVE) && !(flags & LUDO__LISTEN_REUSEPORT))) {
    snprintf(s->errmsg, sizeof s->errmsg, "unknown listen flags %#x", flags);
    return LUDO_EINVAL;
  }
  if (strcmp(host, "localhost") == 0) ip = "127.0.0.1";
  memset(&ss, 0, sizeof ss);
  if (uv_ip4_addr(ip, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(ip, port, (struct sockaddr_in6 *)&ss) != 0) {
    snprintf(s->errmsg, sizeof s->errmsg,
             "'%s' is not a numeric IPv4 or IPv6 address", host);
    return LUDO_EINVAL;
  }
  if (flags & LUDO__LISTEN_REUSEPORT)
    rc = bind_reuseport(s, &ss, flags);
  else
    rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&s->listener, BACKLOG, on_connection);
  if (rc != 0) {
    snprintf(s->errmsg, sizeof s->errmsg, "cannot listen on %s port %d: %s",
             host, port, uv_strerror(rc));
    return LUDO_EIO;
  }
  if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &namelen) ==
      0)
    s->port = port_of(&ss);
  s->listening = 1;
  ludo__net_ignore_sigpipe();
  return 0;
}

int ludo__server_port(const ludo__server_t *s) { return s->port; }

const char *ludo__server_errmsg(const ludo__server_t *s) {
  return s->errmsg;
}

unsigned ludo__server_connections(const ludo__server_t *s) {
  return s->nsocks;
}

static void listener_closed(uv_handle_t *h) {
  ludo__server_t *s = h->data;
  ludo__core_t *core = s->core;
  s->listener_open = 0;
  maybe_finish(s);              /* may free s */
  ludo__core_handle_closed(core);
}

void ludo__server_stop_accepting(ludo__server_t *s) {
  if (s->closing || uv_is_closing((uv_handle_t *)&s->listener)) return;
  uv_close((uv_handle_t *)&s->listener, listener_closed);
}

void ludo__server_close(ludo__server_t *s, ludo__server_close_cb cb,
                        void *ud) {
  sock_t *k, *next;
  if (s->closing) return;
  s->closing = 1;
  s->close_cb = cb;
  s->close_ud = ud;
  if (!uv_is_closing((uv_handle_t *)&s->listener))
    uv_close((uv_handle_t *)&s->listener, listener_closed);
  for (k = s->socks; k; k = next) {
    next = k->next;
    ludo__net_conn_shutdown(&k->conn);
  }
  /* The listener closed already (ludo__server_stop_accepting) and no
   * connection is left: no close callback will come to finish. */
  s->finish.fn = finish_task;
  ludo__core_post(s->core, &s->finish);
}

void ludo__server_abort(ludo__server_t *s) {
  sock_t *k, *next;
  if (!s->closing) return;
  for (k = s->socks; k; k = next) {
    next = k->next;
    ludo__net_conn_close(&k->conn, 1);
    sock_close(k); /* a conn closed already left its sock open */
  }
  /* The finish task may never run now (the core drops its queue). */
  maybe_finish(s);
}
