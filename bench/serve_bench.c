/* serve_bench.c - the figures of `ludo serve` (issue 10), each beside a
 * baseline measured in the same run, over loopback on this machine.
 *
 * The load generator is this process: one libuv loop, many connections,
 * WebSocket framing by wslay's client API (a fixed handshake key whose
 * Sec-WebSocket-Accept is checked), a reply recognised by its first bytes
 * ({"type":"observation"), never parsed. Each connection keeps one request
 * outstanding: it sends the next step when the reply to the last came.
 * The servers are separate processes:
 *
 *   ludo     `build/ludo serve examples/echo --port 0 --max-sessions
 *            12000` (the port read from its log line)
 *   tcp      a bare TCP echo server on libuv (a child of this process): it
 *            writes back every byte it reads. The client sends it the very
 *            bytes of a step frame (masked, as a client sends them) and
 *            counts a round trip when as many came back
 *   python   bench/ws_echo_server.py on /usr/bin/python3 with Debian's
 *            websockets: answers every message with the fixed reply
 *            `ludo serve` gave to the same step
 *
 * Figures (server CPU is utime+stime of the server process from
 * /proc/PID/stat, read at the start and end of the timed window; a
 * window is 2 s after 0.5 s of warm-up; docs/performance.md, "Server"):
 *
 *   echo @64        64 sessions of examples/echo, each reset once, then
 *                   {"type":"step","data":{"message":"hi"}} in a loop:
 *                   steps/s against the Python server's; server CPU per
 *                   step against the TCP echo's CPU per round trip (the
 *                   same 64-connection client); the client's CPU per
 *                   step (it must stay below the server's) and the
 *                   Python server's CPU per step, for comparison. Rounds
 *                   alternate ludo, tcp and python; medians.
 *   latency @1      p50 of one session's step round trip against the TCP
 *                   echo's round trip p50 on one connection.
 *   scale           steps/s at 1,024 sessions against 16 sessions, and
 *                   the server's CPU per step at both.
 *   10k             a fresh server; 10,000 WebSocket sessions opened (at
 *                   most --connecting handshakes in flight, 100 by
 *                   default), each reset and stepped once, then all held
 *                   open and idle: the share that succeeded, connect p50
 *                   (TCP connect to the 101 response) while the earlier
 *                   sessions are open and working, and the server's RSS
 *                   (/proc/PID/statm) with all of them open and idle minus
 *                   its RSS before the first connection, per session.
 *
 * RLIMIT_NOFILE is raised to its hard limit here; the servers inherit it.
 * Client connections end with a reset (SO_LINGER 0), so runs leave no
 * TIME_WAIT sockets behind.
 *
 * usage: build/ludo-serve-bench [--ludo PATH] [--env DIR] [--json PATH]
 *          [--only GROUP,...] [--sessions N] [--connecting N] [--quick]
 *          [--rounds N] [--server PORT:PID] [--scale LO,HI] [--measure S]
 *        (run from the repo root; groups: echo latency scale 10k;
 *        --server measures a `ludo serve` started by hand, under a
 *        profiler say, instead of starting one; --scale sets the scale
 *        group's session counts, 16,1024 by default; 0,N only loads the
 *        server with N sessions; --measure sets each timed window, 2 s by
 *        default: longer for a server under valgrind, whose sessions
 *        then step several times in the window) */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#include <wslay/wslay.h>

#include "table.h"

/* ---- rows (bench/table.h) ------------------------------------------- */

static row_t g_rows[64];
static size_t g_nrows;

static void emit(const char *fig, const char *unit, double m,
                 const char *bwhat, double b, int tkind, int ton,
                 double tval) {
  if (g_nrows == sizeof g_rows / sizeof g_rows[0]) return;
  bench_row(&g_rows[g_nrows++], fig, unit, m, bwhat, b, tkind, ton, tval);
}

/* ---- helpers --------------------------------------------------------- */

/* CPU time (user + system) of this process, in µs. */
static double self_cpu_us(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* utime + stime of process `pid` (all its threads), in µs; NAN when it
 * cannot be read. */
static double proc_cpu_us(pid_t pid) {
  char path[64], buf[1024], *p;
  unsigned long ut = 0, st = 0;
  ssize_t n;
  int fd;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if ((fd = open(path, O_RDONLY)) < 0) return NAN;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return NAN;
  buf[n] = '\0';
  if ((p = strrchr(buf, ')')) == NULL) return NAN;
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
             &ut, &st) != 2)
    return NAN;
  return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

/* Resident set size of process `pid`, in bytes; NAN when unreadable. */
static double proc_rss(pid_t pid) {
  char path[64], buf[128];
  long size = 0, rss = 0;
  ssize_t n;
  int fd;
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  if ((fd = open(path, O_RDONLY)) < 0) return NAN;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return NAN;
  buf[n] = '\0';
  if (sscanf(buf, "%ld %ld", &size, &rss) != 2) return NAN;
  return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the servers ----------------------------------------------------- */

typedef struct proc_s {
  pid_t pid;
  int port;
  int fd;     /* the read end of its stdout (Python), or 0 */
  int extern_; /* not ours: never stopped */
} proc_t;

/* Starts `ludo serve` on a free port with its stderr in `log`; reads the
 * port from its "listening" line. Returns 0 or -1. */
static int start_ludo(proc_t *p, const char *ludo, const char *env,
                      const char *log) {
  char buf[4096];
  double t0 = bench_now_us();
  int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  p->port = 0;
  if (lfd < 0) return -1;
  close(lfd); /* emptied before the child runs: no old port is read */
  if ((p->pid = fork()) < 0) return -1;
  if (p->pid == 0) {
    int fd = open(log, O_WRONLY | O_APPEND);
    int nul = open("/dev/null", O_RDWR);
    if (fd < 0 || nul < 0) _exit(127);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(fd, 2);
    execl(ludo, "ludo", "serve", env, "--port", "0", "--max-sessions",
          "12000", (char *)NULL);
    _exit(127);
  }
  while (bench_now_us() - t0 < 20e6) {
    int fd = open(log, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    const char *at;
    if (fd >= 0) close(fd);
    if (n > 0) {
      buf[n] = '\0';
      if ((at = strstr(buf, " on http://")) != NULL &&
          (at = strchr(at + 11, ':')) != NULL && atoi(at + 1) > 0) {
        p->port = atoi(at + 1);
        return 0;
      }
    }
    if (waitpid(p->pid, NULL, WNOHANG) == p->pid) break;
    sleep_ms(20);
  }
  fprintf(stderr, "serve-bench: ludo serve did not start (see %s)\n", log);
  return -1;
}

/* Starts bench/ws_echo_server.py answering `reply`; reads its port from
 * its stdout. */
static int start_python(proc_t *p, const char *reply) {
  int fds[2];
  char buf[64];
  ssize_t n = 0;
  struct pollfd pf;
  p->port = 0;
  if (pipe(fds) != 0) return -1;
  if ((p->pid = fork()) < 0) return -1;
  if (p->pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    execl("/usr/bin/python3", "python3", "bench/ws_echo_server.py", reply,
          (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  pf.fd = fds[0];
  pf.events = POLLIN;
  if (poll(&pf, 1, 20000) == 1) n = read(fds[0], buf, sizeof buf - 1);
  p->fd = fds[0]; /* kept open: the server may write more */
  if (n > 0) {
    buf[n] = '\0';
    p->port = atoi(buf);
  }
  if (p->port <= 0) {
    fprintf(stderr, "serve-bench: the Python server did not start\n");
    return -1;
  }
  return 0;
}

/* The bare TCP echo server: a libuv loop in a child process. */
static void echo_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  static char buf[65536];
  (void)h;
  (void)want;
  *b = uv_buf_init(buf, sizeof buf);
}

static void echo_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void echo_closed(uv_handle_t *h) { free(h); }

static void echo_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  uv_buf_t out;
  int w;
  if (n < 0) {
    uv_close((uv_handle_t *)s, echo_closed);
    return;
  }
  if (n == 0) return;
  out = uv_buf_init(b->base, (unsigned)n);
  w = uv_try_write(s, &out, 1);
  if (w == UV_EAGAIN) w = 0;
  if (w < 0) {
    uv_close((uv_handle_t *)s, echo_closed);
  } else if (w < n) { /* the rest, copied, after what is queued */
    uv_write_t *req = malloc(sizeof *req + (size_t)(n - w));
    char *copy = (char *)(req + 1);
    memcpy(copy, b->base + w, (size_t)(n - w));
    out = uv_buf_init(copy, (unsigned)(n - w));
    uv_write(req, s, &out, 1, echo_written);
  }
}

static void echo_conn(uv_stream_t *l, int status) {
  uv_tcp_t *c;
  if (status < 0) return;
  c = malloc(sizeof *c);
  uv_tcp_init(l->loop, c);
  if (uv_accept(l, (uv_stream_t *)c) != 0) {
    uv_close((uv_handle_t *)c, echo_closed);
    return;
  }
  uv_tcp_nodelay(c, 1);
  uv_read_start((uv_stream_t *)c, echo_alloc, echo_read);
}

static int start_echo(proc_t *p) {
  int fds[2];
  ssize_t n;
  if (pipe(fds) != 0) return -1;
  if ((p->pid = fork()) < 0) return -1;
  if (p->pid == 0) {
    uv_loop_t loop;
    uv_tcp_t l;
    struct sockaddr_in a;
    struct sockaddr_storage ss;
    int len = sizeof ss, port;
    close(fds[0]);
    uv_loop_init(&loop);
    uv_tcp_init(&loop, &l);
    uv_ip4_addr("127.0.0.1", 0, &a);
    if (uv_tcp_bind(&l, (const struct sockaddr *)&a, 0) != 0 ||
        uv_listen((uv_stream_t *)&l, 511, echo_conn) != 0)
      _exit(1);
    uv_tcp_getsockname(&l, (struct sockaddr *)&ss, &len);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
    close(fds[1]);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(0);
  }
  close(fds[1]);
  n = read(fds[0], &p->port, sizeof p->port);
  close(fds[0]);
  return n == (ssize_t)sizeof p->port ? 0 : -1;
}

static void stop_proc(proc_t *p) {
  int i;
  if (p->fd > 0) close(p->fd);
  p->fd = 0;
  if (p->pid <= 0 || p->extern_) return;
  kill(p->pid, SIGTERM);
  for (i = 0; i < 200; i++) {
    if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
      p->pid = 0;
      return;
    }
    sleep_ms(25);
  }
  kill(p->pid, SIGKILL);
  waitpid(p->pid, NULL, 0);
  p->pid = 0;
}

/* ---- the client ------------------------------------------------------ */

enum { M_WS, M_RAW };                      /* what a load speaks */
enum { PS_IDLE, PS_CONNECTING, PS_HANDSHAKE, PS_OPEN, PS_CLOSING };
enum { W_NONE, W_RESET, W_STEP };          /* the reply a peer waits for */

static const char HS_KEY[] = "dGhlIHNhbXBsZSBub25jZQ==";
static const char HS_ACCEPT[] = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
static const char MSG_RESET[] = "{\"type\":\"reset\",\"data\":{}}";
static const char MSG_STEP[] =
    "{\"type\":\"step\",\"data\":{\"message\":\"hi\"}}";
static const char OBS_PREFIX[] = "{\"type\":\"observation\"";

typedef struct load_s load_t;

typedef struct peer_s {
  uv_tcp_t tcp;
  uv_connect_t creq;
  load_t *ld;
  wslay_event_context_ptr ev;
  int state;                  /* PS_* */
  int waiting;                /* W_* */
  int ended;                  /* counted as succeeded or failed */
  char hs[1024];              /* the handshake response so far */
  size_t hslen;
  const uint8_t *rd;          /* bytes wslay reads now */
  size_t rdlen;
  uint8_t out[1024];          /* frames wslay wrote, not yet sent */
  size_t outlen;
  size_t raw_got;             /* M_RAW: echoed bytes of this round */
  int in_recv;                /* inside wslay_event_recv: queue only */
  double t_start, t_sent;
  uint32_t rng;
} peer_t;

struct load_s {
  uv_loop_t loop;
  uv_timer_t timer;
  int port, mode, n;
  int steady;                 /* step until stopped; else reset+step once */
  int max_connecting;
  pid_t server;
  peer_t *peers;
  int next, connecting;
  int ready, succeeded, failed, closed;
  int phase;
  int measuring, stopping;
  double warm_us, measure_us, timeout_us;
  double t_phase, t0, t1, srv0, srv1, cli0, cli1;
  uint64_t steps, errors;
  double *lat;                /* step round trips while measuring, µs */
  size_t nlat, caplat;
  double *conn_ms;            /* connect to 101, ms */
  size_t nconn;
  double rss_open;            /* burst: server RSS with all sessions open */
  char reply[4096];           /* a step's reply, for the Python server */
  size_t reply_len;
  char why[256];              /* the first failure */
  uint8_t raw[256];           /* M_RAW: the step frame */
  size_t raw_len;
};

static void peer_fail(peer_t *p, const char *fmt, const char *detail);

static void note(load_t *ld, const char *fmt, const char *detail) {
  if (ld->why[0] == '\0')
    snprintf(ld->why, sizeof ld->why, fmt, detail ? detail : "");
}

typedef struct wreq_s {
  uv_write_t req;
  size_t len;
} wreq_t;

static void on_wrote(uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *)req;
  peer_t *p = req->data;
  free(w);
  if (status < 0 && status != UV_ECANCELED)
    peer_fail(p, "write: %s", uv_strerror(status));
}

/* Sends what wslay (or the raw mode) put in p->out. */
static void peer_flush(peer_t *p) {
  uv_buf_t b;
  int n;
  if (p->outlen == 0) return;
  if (p->state == PS_CLOSING) {
    p->outlen = 0;
    return;
  }
  b = uv_buf_init((char *)p->out, (unsigned)p->outlen);
  n = uv_try_write((uv_stream_t *)&p->tcp, &b, 1);
  if (n == UV_EAGAIN) n = 0;
  if (n < 0) {
    p->outlen = 0;
    peer_fail(p, "write: %s", uv_strerror(n));
    return;
  }
  if ((size_t)n < p->outlen) {
    size_t rest = p->outlen - (size_t)n;
    wreq_t *w = malloc(sizeof *w + rest);
    memcpy(w + 1, p->out + n, rest);
    w->len = rest;
    w->req.data = p;
    b = uv_buf_init((char *)(w + 1), (unsigned)rest);
    if (uv_write(&w->req, (uv_stream_t *)&p->tcp, &b, 1, on_wrote) != 0) {
      free(w);
      p->outlen = 0;
      peer_fail(p, "write failed%s", "");
      return;
    }
  }
  p->outlen = 0;
}

static void out_add(peer_t *p, const void *data, size_t len) {
  if (p->outlen + len > sizeof p->out) peer_flush(p);
  if (len > sizeof p->out) len = sizeof p->out; /* never: frames are small */
  memcpy(p->out + p->outlen, data, len);
  p->outlen += len;
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                       int flags, void *ud) {
  peer_t *p = ud;
  size_t n = len < p->rdlen ? len : p->rdlen;
  (void)flags;
  if (n == 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  memcpy(buf, p->rd, n);
  p->rd += n;
  p->rdlen -= n;
  return (ssize_t)n;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
                       size_t len, int flags, void *ud) {
  peer_t *p = ud;
  size_t room;
  (void)ctx;
  (void)flags;
  if (p->outlen == sizeof p->out) peer_flush(p);
  room = sizeof p->out - p->outlen;
  if (len > room) len = room;
  memcpy(p->out + p->outlen, data, len);
  p->outlen += len;
  return (ssize_t)len;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                      void *ud) {
  peer_t *p = ud;
  size_t i;
  (void)ctx;
  for (i = 0; i < len; i++) {
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 17;
    p->rng ^= p->rng << 5;
    buf[i] = (uint8_t)p->rng;
  }
  return 0;
}

static void peer_send(peer_t *p, const char *msg, size_t len, int waiting) {
  load_t *ld = p->ld;
  p->waiting = waiting;
  p->t_sent = bench_now_us();
  if (ld->mode == M_RAW) {
    out_add(p, ld->raw, ld->raw_len);
  } else {
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)msg, len};
    if (wslay_event_queue_msg(p->ev, &m) != 0 ||
        (!p->in_recv && wslay_event_send(p->ev) != 0)) {
      peer_fail(p, "wslay cannot send%s", "");
      return;
    }
  }
}

static void on_peer_closed(uv_handle_t *h) {
  peer_t *p = h->data;
  load_t *ld = p->ld;
  if (p->ev) wslay_event_context_free(p->ev);
  p->ev = NULL;
  ld->closed++;
}

/* Ends the connection with a reset (no TIME_WAIT left behind). */
static void peer_close(peer_t *p) {
  if (p->state == PS_CLOSING || p->state == PS_IDLE) return;
  if (p->state == PS_CONNECTING || p->state == PS_HANDSHAKE)
    p->ld->connecting--;
  p->state = PS_CLOSING;
  p->outlen = 0;
  uv_read_stop((uv_stream_t *)&p->tcp);
  if (uv_tcp_close_reset(&p->tcp, on_peer_closed) != 0)
    uv_close((uv_handle_t *)&p->tcp, on_peer_closed);
}

static void peer_end(peer_t *p, int ok) {
  if (p->ended) return;
  p->ended = 1;
  if (ok)
    p->ld->succeeded++;
  else
    p->ld->failed++;
}

static void peer_fail(peer_t *p, const char *fmt, const char *detail) {
  if (p->state == PS_CLOSING) return;
  note(p->ld, fmt, detail);
  peer_end(p, 0);
  peer_close(p);
}

static void connect_more(load_t *ld);

/* A reply to the request the peer waits for (the whole reply in WS mode;
 * data NULL in raw mode). */
static void on_reply(peer_t *p, const char *data, size_t len) {
  load_t *ld = p->ld;
  int w = p->waiting, ok;
  double rtt = bench_now_us() - p->t_sent;
  ok = data == NULL || (len >= sizeof OBS_PREFIX - 1 &&
                        memcmp(data, OBS_PREFIX, sizeof OBS_PREFIX - 1) == 0);
  p->waiting = W_NONE;
  if (!ok) {
    char text[160];
    snprintf(text, sizeof text, "%.*s", (int)(len < 150 ? len : 150), data);
    ld->errors++;
    if (w == W_RESET || !ld->steady) {
      peer_fail(p, "reply: %s", text);
      return;
    }
    note(ld, "reply: %s", text);
  }
  if (w == W_RESET) {
    ld->ready++;
    peer_send(p, MSG_STEP, sizeof MSG_STEP - 1, W_STEP);
    return;
  }
  if (w != W_STEP) {
    peer_fail(p, "a reply nobody asked for%s", "");
    return;
  }
  if (data != NULL && ld->reply_len == 0 && ok && len < sizeof ld->reply) {
    memcpy(ld->reply, data, len);
    ld->reply[len] = '\0';
    ld->reply_len = len;
  }
  if (ld->measuring) {
    ld->steps++;
    if (ld->nlat < ld->caplat) ld->lat[ld->nlat++] = rtt;
  }
  if (!ld->steady) {
    peer_end(p, 1);
    return;
  }
  if (ld->stopping) {
    peer_close(p);
    return;
  }
  peer_send(p, MSG_STEP, sizeof MSG_STEP - 1, W_STEP);
}

static void ws_on_msg(wslay_event_context_ptr ctx,
                      const struct wslay_event_on_msg_recv_arg *arg,
                      void *ud) {
  peer_t *p = ud;
  (void)ctx;
  if (arg->opcode == WSLAY_TEXT_FRAME)
    on_reply(p, (const char *)arg->msg, arg->msg_length);
  else if (arg->opcode == WSLAY_CONNECTION_CLOSE)
    peer_fail(p, "the server closed the WebSocket%s", "");
}

static const struct wslay_event_callbacks ws_cb = {
    ws_recv, ws_send, ws_genmask, NULL, NULL, NULL, ws_on_msg};

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  static char buf[65536];
  (void)h;
  (void)want;
  *b = uv_buf_init(buf, sizeof buf);
}

static void ws_feed(peer_t *p, const char *data, size_t n) {
  int rc;
  p->rd = (const uint8_t *)data;
  p->rdlen = n;
  p->in_recv = 1;
  rc = wslay_event_recv(p->ev);
  p->in_recv = 0;
  if (rc != 0) {
    peer_fail(p, "bad frames from the server%s", "");
    return;
  }
  if (p->state == PS_OPEN && wslay_event_want_write(p->ev) &&
      wslay_event_send(p->ev) != 0)
    peer_fail(p, "wslay cannot send%s", "");
}

/* The 101 response (or part of it) with what follows it. */
static void handshake_read(peer_t *p, const char *data, size_t n) {
  load_t *ld = p->ld;
  size_t take = n < sizeof p->hs - 1 - p->hslen ? n
                                                : sizeof p->hs - 1 - p->hslen;
  char *end;
  size_t head;
  memcpy(p->hs + p->hslen, data, take);
  p->hslen += take;
  p->hs[p->hslen] = '\0';
  if ((end = strstr(p->hs, "\r\n\r\n")) == NULL) {
    if (p->hslen == sizeof p->hs - 1)
      peer_fail(p, "handshake response too long%s", "");
    return;
  }
  head = (size_t)(end + 4 - p->hs);
  if (strncmp(p->hs, "HTTP/1.1 101", 12) != 0 ||
      strstr(p->hs, HS_ACCEPT) == NULL) {
    p->hs[head < 120 ? head : 120] = '\0';
    peer_fail(p, "handshake refused: %s", p->hs);
    return;
  }
  ld->conn_ms[ld->nconn++] = (bench_now_us() - p->t_start) / 1e3;
  ld->connecting--;
  p->state = PS_OPEN;
  if (wslay_event_context_client_init(&p->ev, &ws_cb, p) != 0) {
    peer_fail(p, "out of memory%s", "");
    return;
  }
  peer_send(p, MSG_RESET, sizeof MSG_RESET - 1, W_RESET);
  /* bytes after the head: frames, fed from the handshake buffer */
  if (p->state == PS_OPEN && p->hslen > head) {
    size_t rest = p->hslen - head;
    char tmp[1024];
    memcpy(tmp, p->hs + head, rest);
    ws_feed(p, tmp, rest);
  }
  /* what did not fit in hs (a reply already) */
  if (p->state == PS_OPEN && take < n) ws_feed(p, data + take, n - take);
  if (p->state == PS_OPEN) peer_flush(p);
  connect_more(ld);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  peer_t *p = s->data;
  load_t *ld = p->ld;
  if (n < 0) {
    peer_fail(p, "read: %s", uv_strerror((int)n));
    return;
  }
  if (n == 0 || p->state == PS_CLOSING) return;
  if (p->state == PS_HANDSHAKE) {
    handshake_read(p, b->base, (size_t)n);
    return;
  }
  if (ld->mode == M_RAW) {
    p->raw_got += (size_t)n;
    while (p->raw_got >= ld->raw_len && p->state == PS_OPEN &&
           p->waiting == W_STEP) {
      p->raw_got -= ld->raw_len;
      on_reply(p, NULL, 0);
    }
  } else {
    ws_feed(p, b->base, (size_t)n);
  }
  if (p->state == PS_OPEN) peer_flush(p);
}

static void on_connect(uv_connect_t *req, int status) {
  peer_t *p = req->data;
  load_t *ld = p->ld;
  char head[512];
  int n;
  if (status < 0) {
    peer_fail(p, "connect: %s", uv_strerror(status));
    connect_more(ld);
    return;
  }
  if (p->state != PS_CONNECTING) return;
  uv_read_start((uv_stream_t *)&p->tcp, on_alloc, on_read);
  if (ld->mode == M_RAW) {
    ld->connecting--;
    p->state = PS_OPEN;
    ld->ready++;
    peer_send(p, NULL, 0, W_STEP);
    peer_flush(p);
    connect_more(ld);
    return;
  }
  p->state = PS_HANDSHAKE;
  n = snprintf(head, sizeof head,
               "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
               ld->port, HS_KEY);
  out_add(p, head, (size_t)n);
  peer_flush(p);
}

static void connect_more(load_t *ld) {
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", ld->port, &a);
  while (ld->next < ld->n && ld->connecting < ld->max_connecting &&
         !ld->stopping) {
    peer_t *p = &ld->peers[ld->next++];
    p->rng = 2463534242u + (uint32_t)(p - ld->peers) * 2654435761u;
    uv_tcp_init(&ld->loop, &p->tcp);
    p->tcp.data = p;
    p->creq.data = p;
    uv_tcp_nodelay(&p->tcp, 1);
    p->state = PS_CONNECTING;
    p->t_start = bench_now_us();
    ld->connecting++;
    if (uv_tcp_connect(&p->creq, &p->tcp, (const struct sockaddr *)&a,
                       on_connect) != 0)
      peer_fail(p, "connect failed%s", "");
  }
}

/* ---- runs ------------------------------------------------------------ */

static void close_all(load_t *ld) {
  int i;
  ld->stopping = 1;
  for (i = 0; i < ld->next; i++) peer_close(&ld->peers[i]);
}

static void start_measure(load_t *ld) {
  ld->measuring = 1;
  ld->steps = 0;
  ld->nlat = 0;
  ld->t0 = bench_now_us();
  ld->srv0 = proc_cpu_us(ld->server);
  ld->cli0 = self_cpu_us();
}

static void stop_measure(load_t *ld) {
  ld->t1 = bench_now_us();
  ld->srv1 = proc_cpu_us(ld->server);
  ld->cli1 = self_cpu_us();
  ld->measuring = 0;
}

/* The run's clock: phases of a steady run (0 connecting, 1 warming up, 2
 * measuring, 3 draining) or of a burst (0 working, 1 settling). */
static void on_tick(uv_timer_t *t) {
  load_t *ld = t->data;
  double now = bench_now_us();
  if (ld->closed == ld->next && ld->stopping) {
    uv_close((uv_handle_t *)t, NULL);
    return;
  }
  if (ld->stopping) {
    if (now - ld->t_phase > 5e6) close_all(ld); /* stragglers */
    return;
  }
  if (now - ld->t_phase > ld->timeout_us && ld->phase == 0) {
    note(ld, "timed out%s", "");
    if (ld->steady) {
      ld->failed = ld->n; /* the run is void */
      close_all(ld);
      ld->t_phase = now;
      return;
    }
    ld->phase = 1; /* burst: what has not ended has failed */
    ld->t_phase = now - 1e6;
  }
  if (ld->steady) {
    if (ld->phase == 0 && ld->failed > 0) {
      close_all(ld);
      ld->t_phase = now;
    } else if (ld->phase == 0 && ld->ready == ld->n) {
      ld->phase = 1;
      ld->t_phase = now;
    } else if (ld->phase == 1 && now - ld->t_phase >= ld->warm_us) {
      start_measure(ld);
      ld->phase = 2;
      ld->t_phase = now;
    } else if (ld->phase == 2 && now - ld->t_phase >= ld->measure_us) {
      stop_measure(ld);
      ld->phase = 3;
      ld->stopping = 1;
      ld->t_phase = now;
    }
    return;
  }
  if (ld->phase == 0 && ld->succeeded + ld->failed == ld->n) {
    ld->phase = 1;
    ld->t_phase = now;
  } else if (ld->phase == 1 && now - ld->t_phase >= 500e3) {
    int i;
    ld->rss_open = proc_rss(ld->server);
    for (i = 0; i < ld->n; i++) peer_end(&ld->peers[i], 0);
    close_all(ld);
    ld->t_phase = now;
  }
}

static void load_init(load_t *ld, int port, int mode, int n, pid_t server) {
  int i;
  memset(ld, 0, sizeof *ld);
  uv_loop_init(&ld->loop);
  ld->port = port;
  ld->mode = mode;
  ld->n = n;
  ld->server = server;
  ld->max_connecting = 100;
  ld->peers = calloc((size_t)n, sizeof *ld->peers);
  for (i = 0; i < n; i++) ld->peers[i].ld = ld;
  ld->conn_ms = calloc((size_t)n, sizeof *ld->conn_ms);
  ld->caplat = 1u << 21;
  ld->lat = malloc(ld->caplat * sizeof *ld->lat);
  ld->timeout_us = 60e6;
  if (mode == M_RAW) { /* the step frame, masked as a client sends it */
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t i, len = sizeof MSG_STEP - 1;
    ld->raw[0] = 0x81;
    ld->raw[1] = (uint8_t)(0x80 | len);
    memcpy(ld->raw + 2, mask, 4);
    for (i = 0; i < len; i++)
      ld->raw[6 + i] = (uint8_t)MSG_STEP[i] ^ mask[i % 4];
    ld->raw_len = 6 + len;
  }
}

static void load_run(load_t *ld) {
  uv_timer_init(&ld->loop, &ld->timer);
  ld->timer.data = ld;
  ld->t_phase = bench_now_us();
  uv_timer_start(&ld->timer, on_tick, 10, 10);
  connect_more(ld);
  uv_run(&ld->loop, UV_RUN_DEFAULT);
}

static void load_free(load_t *ld) {
  uv_loop_close(&ld->loop);
  free(ld->peers);
  free(ld->conn_ms);
  free(ld->lat);
}

typedef struct result_s {
  int ok;
  double per_s;       /* steps (round trips) per second */
  double srv_us;      /* server CPU per step */
  double cli_us;      /* client CPU per step */
  double p50, p99;    /* round trip, µs */
  char reply[4096];
} result_t;

/* `n` connections to `port` stepping for `measure_s` after `warm_s`. */
static int run_steady(const proc_t *srv, int mode, int n, double warm_s,
                      double measure_s, result_t *r) {
  load_t ld;
  double secs;
  memset(r, 0, sizeof *r);
  load_init(&ld, srv->port, mode, n, srv->pid);
  ld.steady = 1;
  ld.warm_us = warm_s * 1e6;
  ld.measure_us = measure_s * 1e6;
  load_run(&ld);
  if (ld.failed > 0 || ld.t1 == 0 || ld.steps == 0) {
    fprintf(stderr, "serve-bench: %s run @%d failed: %s\n",
            mode == M_RAW ? "tcp" : "ws", n, ld.why);
    load_free(&ld);
    return -1;
  }
  if (ld.errors > 0)
    fprintf(stderr, "serve-bench: %llu error replies (%s)\n",
            (unsigned long long)ld.errors, ld.why);
  secs = (ld.t1 - ld.t0) / 1e6;
  r->ok = 1;
  r->per_s = (double)ld.steps / secs;
  r->srv_us = (ld.srv1 - ld.srv0) / (double)ld.steps;
  r->cli_us = (ld.cli1 - ld.cli0) / (double)ld.steps;
  r->p50 = bench_pct(ld.lat, ld.nlat, 0.5);
  r->p99 = bench_pct(ld.lat, ld.nlat, 0.99);
  snprintf(r->reply, sizeof r->reply, "%s", ld.reply);
  load_free(&ld);
  return 0;
}

/* ---- the groups ------------------------------------------------------ */

typedef struct ctx_s {
  const char *ludo, *env;
  int rounds;
  double warm_s, measure_s;
  int sessions, connecting;
  int scale_lo, scale_hi;     /* the scale group's session counts */
  proc_t ludo_srv, echo_srv, py_srv;
  char reply[4096];
} ctx_t;

static void progress(const char *what, const result_t *r) {
  fprintf(stderr, "  %-18s %9.0f /s  server %6.2f us/step  client %6.2f "
          "us/step  p50 %7.1f us  p99 %7.1f us\n",
          what, r->per_s, r->srv_us, r->cli_us, r->p50, r->p99);
}

static int group_echo(ctx_t *c) {
  double ws_rate[9], ws_cpu[9], ws_cli[9], tcp_cpu[9], tcp_rate[9],
      py_rate[9], py_cpu[9];
  int i, k = 0, kp = 0;
  result_t r;
  for (i = 0; i < c->rounds; i++) {
    if (run_steady(&c->ludo_srv, M_WS, 64, c->warm_s, c->measure_s, &r))
      return -1;
    progress("ludo @64", &r);
    if (c->reply[0] == '\0') snprintf(c->reply, sizeof c->reply, "%s",
                                      r.reply);
    ws_rate[k] = r.per_s;
    ws_cpu[k] = r.srv_us;
    ws_cli[k] = r.cli_us;
    if (run_steady(&c->echo_srv, M_RAW, 64, c->warm_s, c->measure_s, &r))
      return -1;
    progress("tcp echo @64", &r);
    tcp_rate[k] = r.per_s;
    tcp_cpu[k] = r.srv_us;
    k++;
    if (c->py_srv.pid == 0 && start_python(&c->py_srv, c->reply) != 0)
      return -1;
    if (run_steady(&c->py_srv, M_WS, 64, c->warm_s, c->measure_s, &r))
      return -1;
    progress("python @64", &r);
    py_cpu[kp] = r.srv_us;
    py_rate[kp++] = r.per_s;
  }
  emit("echo @64 steps/s", "/s", bench_median(ws_rate, k),
       "python websockets @64", bench_median(py_rate, kp), T_GE, ON_RATIO, 10);
  emit("echo @64 server CPU per step", "us", bench_median(ws_cpu, k),
       "tcp echo CPU per round trip", bench_median(tcp_cpu, k), T_LE, ON_RATIO,
       2.5);
  emit("echo @64 client CPU per step", "us", bench_median(ws_cli, k),
       "echo @64 server CPU per step", bench_median(ws_cpu, k), T_NONE, 0, 0);
  emit("tcp echo @64 round trips/s", "/s", bench_median(tcp_rate, k),
       "echo @64 steps/s", bench_median(ws_rate, k), T_NONE, 0, 0);
  emit("python @64 server CPU per step", "us", bench_median(py_cpu, kp),
       "echo @64 server CPU per step", bench_median(ws_cpu, k), T_NONE, 0, 0);
  return 0;
}

static int group_latency(ctx_t *c) {
  double ws[9], tcp[9], ws99[9];
  int i;
  result_t r;
  for (i = 0; i < c->rounds; i++) {
    if (run_steady(&c->ludo_srv, M_WS, 1, c->warm_s, c->measure_s, &r))
      return -1;
    progress("ludo @1", &r);
    ws[i] = r.p50;
    ws99[i] = r.p99;
    if (run_steady(&c->echo_srv, M_RAW, 1, c->warm_s, c->measure_s, &r))
      return -1;
    progress("tcp echo @1", &r);
    tcp[i] = r.p50;
  }
  emit("latency @1 p50 (step round trip)", "us", bench_median(ws, c->rounds),
       "tcp echo round trip p50 @1", bench_median(tcp, c->rounds), T_LE,
       ON_RATIO, 1.5);
  emit("latency @1 p99", "us", bench_median(ws99, c->rounds),
       "latency @1 p50", bench_median(ws, c->rounds), T_NONE, 0, 0);
  return 0;
}

/* The bare TCP echo at the scale group's two counts: how the kernel and
 * the client alone fare with more connections. */
static int scale_tcp(ctx_t *c, double *lo, double *hi) {
  result_t r;
  if (run_steady(&c->echo_srv, M_RAW, c->scale_lo, c->warm_s, c->measure_s,
                 &r))
    return -1;
  progress("tcp echo (scale lo)", &r);
  *lo = r.per_s;
  if (run_steady(&c->echo_srv, M_RAW, c->scale_hi, c->warm_s, c->measure_s,
                 &r))
    return -1;
  progress("tcp echo (scale hi)", &r);
  *hi = r.per_s;
  return 0;
}

static int group_scale(ctx_t *c) {
  double a[9], b[9], cpu_a[9], cpu_b[9], ta[9], tb[9];
  char fa[48], fb[48], ca[48], cb[48], wa[24], wb[24], ea[48], eb[48];
  int i;
  result_t r;
  snprintf(wa, sizeof wa, "ludo @%d", c->scale_lo);
  snprintf(wb, sizeof wb, "ludo @%d", c->scale_hi);
  for (i = 0; i < c->rounds; i++) {
    if (c->scale_lo > 0) {
      if (run_steady(&c->ludo_srv, M_WS, c->scale_lo, c->warm_s,
                     c->measure_s, &r))
        return -1;
      progress(wa, &r);
      a[i] = r.per_s;
      cpu_a[i] = r.srv_us;
      if (!c->ludo_srv.extern_ && scale_tcp(c, &ta[i], &tb[i]) != 0)
        return -1;
    }
    if (run_steady(&c->ludo_srv, M_WS, c->scale_hi, c->warm_s, c->measure_s,
                   &r))
      return -1;
    progress(wb, &r);
    b[i] = r.per_s;
    cpu_b[i] = r.srv_us;
  }
  if (c->scale_lo <= 0) return 0; /* a load for a profiler, no figures */
  snprintf(fa, sizeof fa, "steps/s @%d sessions", c->scale_lo);
  snprintf(fb, sizeof fb, "steps/s @%d sessions", c->scale_hi);
  snprintf(ca, sizeof ca, "server CPU per step @%d", c->scale_lo);
  snprintf(cb, sizeof cb, "server CPU per step @%d", c->scale_hi);
  emit(fa, "/s", bench_median(a, c->rounds), "", NAN, T_NONE, 0, 0);
  emit(fb, "/s", bench_median(b, c->rounds), fa, bench_median(a, c->rounds),
       T_GE, ON_RATIO, 0.75);
  emit(cb, "us", bench_median(cpu_b, c->rounds), ca,
       bench_median(cpu_a, c->rounds), T_NONE, 0, 0);
  if (c->ludo_srv.extern_) return 0;
  snprintf(ea, sizeof ea, "tcp echo round trips/s @%d", c->scale_lo);
  snprintf(eb, sizeof eb, "tcp echo round trips/s @%d", c->scale_hi);
  emit(eb, "/s", bench_median(tb, c->rounds), ea,
       bench_median(ta, c->rounds), T_NONE, 0, 0);
  return 0;
}

static int group_10k(ctx_t *c) {
  proc_t srv = {0, 0, 0, 0};
  load_t ld;
  double rss0, t0, cpu0, secs;
  int n = c->sessions;
  char fig[48], count[16];
  if (c->ludo_srv.extern_)
    srv = c->ludo_srv;
  else if (start_ludo(&srv, c->ludo, c->env, "build/serve-bench-10k.log"))
    return -1;
  sleep_ms(300);
  rss0 = proc_rss(srv.pid);
  load_init(&ld, srv.port, M_WS, n, srv.pid);
  ld.max_connecting = c->connecting;
  ld.timeout_us = 120e6;
  t0 = bench_now_us();
  cpu0 = proc_cpu_us(srv.pid);
  load_run(&ld);
  secs = (bench_now_us() - t0) / 1e6;
  fprintf(stderr, "  %d sessions: %d succeeded, %d failed in %.1f s "
          "(server CPU %.1f s)%s%s\n", n, ld.succeeded, ld.failed, secs,
          (proc_cpu_us(srv.pid) - cpu0) / 1e6, ld.why[0] ? "; first: " : "",
          ld.why);
  if (n % 1000 == 0)
    snprintf(count, sizeof count, "%dk", n / 1000);
  else
    snprintf(count, sizeof count, "%d", n);
  snprintf(fig, sizeof fig, "%s sessions reset+step, success", count);
  emit(fig, "%", 100.0 * ld.succeeded / n, "", NAN, T_GE, ON_MEASURED, 99);
  snprintf(fig, sizeof fig, "%s sessions: connect p50", count);
  emit(fig, "ms", bench_median(ld.conn_ms, ld.nconn), "", NAN, T_LE,
       ON_MEASURED, 50);
  snprintf(fig, sizeof fig, "%s sessions: connect p99", count);
  emit(fig, "ms", bench_pct(ld.conn_ms, ld.nconn, 0.99), "", NAN, T_NONE, 0, 0);
  snprintf(fig, sizeof fig, "%s sessions: server RSS/session", count);
  emit(fig, "KB", (ld.rss_open - rss0) / n / 1024, "", NAN, T_LE,
       ON_MEASURED, 48);
  load_free(&ld);
  stop_proc(&srv);
  return 0;
}

/* ---- the table ------------------------------------------------------- */

static int write_json(const char *path, const row_t *rows, size_t n,
                      const char *date, const char *machine, double load,
                      const ctx_t *c) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fprintf(f, "{\n  \"date\": \"%s\",\n  \"machine\": \"%s\",\n", date,
          machine);
  fprintf(f, "  \"load_before\": %.2f,\n  \"rounds\": %d,\n  "
          "\"window_s\": %.2f,\n  \"sessions\": %d,\n  "
          "\"connecting\": %d,\n", load, c->rounds, c->measure_s,
          c->sessions, c->connecting);
  fprintf(f, "  \"figures\": [\n");
  bench_json_rows(f, rows, n);
  fputs("  ]\n}\n", f);
  return fclose(f);
}


static int wanted(const char *only, const char *name) {
  const char *p;
  size_t l = strlen(name);
  if (only == NULL) return 1;
  for (p = only; (p = strstr(p, name)) != NULL; p += l)
    if ((p == only || p[-1] == ',') && (p[l] == '\0' || p[l] == ','))
      return 1;
  return 0;
}

int main(int argc, char **argv) {
  const char *json = "build/bench-serve.json", *only = NULL;
  ctx_t c;
  struct rlimit rl;
  char date[64], machine[512];
  double load = 0;
  time_t now = time(NULL);
  int i, failed = 0;
  memset(&c, 0, sizeof c);
  c.ludo = "build/ludo";
  c.env = "examples/echo";
  c.rounds = 3;
  c.warm_s = 0.5;
  c.measure_s = 2.0;
  c.sessions = 10000;
  c.connecting = 100;
  c.scale_lo = 16;
  c.scale_hi = 1024;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp(argv[i], "--ludo") == 0 && i + 1 < argc)
      c.ludo = argv[++i];
    else if (strcmp(argv[i], "--env") == 0 && i + 1 < argc)
      c.env = argv[++i];
    else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc &&
             sscanf(argv[i + 1], "%d:%d", &c.ludo_srv.port,
                    &c.ludo_srv.pid) == 2) {
      c.ludo_srv.extern_ = 1;
      i++;
    }
    else if (strcmp(argv[i], "--sessions") == 0 && i + 1 < argc)
      c.sessions = atoi(argv[++i]);
    else if (strcmp(argv[i], "--connecting") == 0 && i + 1 < argc)
      c.connecting = atoi(argv[++i]);
    else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc &&
             sscanf(argv[i + 1], "%d,%d", &c.scale_lo, &c.scale_hi) == 2)
      i++;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      c.rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--measure") == 0 && i + 1 < argc)
      c.measure_s = atof(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) {
      c.rounds = 1;
      c.measure_s = 1.0;
    } else {
      fprintf(stderr,
              "usage: ludo-serve-bench [--ludo PATH] [--env DIR] "
              "[--json PATH] [--only GROUP,...]\n"
              "         [--sessions N] [--connecting N] [--rounds N] "
              "[--quick] [--server PORT:PID]\n"
              "         [--scale LO,HI] [--measure S]\n"
              "groups: echo latency scale 10k\n");
      return 2;
    }
  }
  if (c.rounds < 1 || c.rounds > 9 || c.sessions < 1 || c.connecting < 1 ||
      c.scale_lo < 0 || c.scale_hi < 1 || !(c.measure_s >= 0.1)) {
    fprintf(stderr, "serve-bench: --rounds is 1..9, --sessions, "
            "--connecting and --scale's second count at least 1, "
            "--measure at least 0.1\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  getrlimit(RLIMIT_NOFILE, &rl);
  if (wanted(only, "10k") && rl.rlim_cur < (rlim_t)c.sessions + 100)
    fprintf(stderr, "serve-bench: RLIMIT_NOFILE is %lu: too low for %d "
            "sessions\n", (unsigned long)rl.rlim_cur, c.sessions);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  bench_machine(machine, sizeof machine);
  if (getloadavg(&load, 1) != 1) load = NAN;
  printf("ludo serve bench, %s; %s; load %.2f\n", date, machine, load);
  fflush(stdout);
  if (start_echo(&c.echo_srv) != 0 ||
      (!c.ludo_srv.extern_ &&
       start_ludo(&c.ludo_srv, c.ludo, c.env, "build/serve-bench.log") !=
           0)) {
    stop_proc(&c.echo_srv);
    stop_proc(&c.ludo_srv);
    return 1;
  }
  if (wanted(only, "echo")) {
    fprintf(stderr, "== echo @64\n");
    if (group_echo(&c) != 0) failed = 1;
  }
  if (wanted(only, "latency")) {
    fprintf(stderr, "== latency @1\n");
    if (group_latency(&c) != 0) failed = 1;
  }
  if (wanted(only, "scale")) {
    fprintf(stderr, "== scale: 16 and 1024 sessions\n");
    if (group_scale(&c) != 0) failed = 1;
  }
  stop_proc(&c.py_srv);
  stop_proc(&c.echo_srv);
  stop_proc(&c.ludo_srv); /* not when given by --server */
  if (wanted(only, "10k")) { /* on a fresh server, unless --server */
    fprintf(stderr, "== %d sessions\n", c.sessions);
    if (group_10k(&c) != 0) failed = 1;
  }
  bench_print_table(g_rows, g_nrows);
  if (write_json(json, g_rows, g_nrows, date, machine, load, &c) != 0) {
    fprintf(stderr, "serve-bench: cannot write %s\n", json);
    failed = 1;
  } else {
    printf("(written to %s)\n", json);
  }
  return failed;
}
