/* main.c - ludo on a host's own libuv loop: a small line server.
 *
 *   usage: hostloop [path-to-examples/echo]
 *
 * The host owns the loop. On it run the host's own handles (a TCP server
 * on 127.0.0.1 and a timer) and a ludo runtime created with
 * ludo_options_t.loop = the host's loop. Every connection gets a session
 * (ludo_session_open_async); every line it sends is an action
 * (ludo_session_step_async) and gets the result JSON back as a line. The
 * host never calls ludo_runtime_poll: its own uv_run delivers ludo's work.
 *
 * To be runnable as a test, the program also plays the client: it connects
 * to its own server, sends a few actions, checks the replies, then shuts
 * down in the order an embedder would: ludo_runtime_free, one more
 * uv_run, then its own handles, and finally uv_loop_close (which must
 * return 0: ludo left nothing on the host's loop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ludo.h"

#define NLINES 3

#define QUEUE 16

/* A connection: its session, the line being read, and the lines waiting
 * for the session (one call at a time per session). */
typedef struct conn_s {
  uv_tcp_t tcp;
  ludo_session_t *s;
  int busy;
  char line[4096];
  size_t len;
  char *queue[QUEUE];
  size_t qlen[QUEUE];
  int head, count;
} conn_t;

static uv_loop_t loop;
static uv_tcp_t server, client;
static uv_timer_t ticker;
static ludo_runtime_t *rt;
static ludo_env_t *env;
static int ticks, replies, failures;
static char reply[8192];
static size_t reply_len;

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  static char slab[65536];
  (void)h;
  (void)hint;
  *buf = uv_buf_init(slab, sizeof slab);
}

static void write_done(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

/* Writes `len` bytes and a newline (the bytes are copied). */
static void send_line(uv_stream_t *to, const char *data, size_t len) {
  uv_write_t *w = malloc(sizeof *w + len + 1);
  char *copy = (char *)(w + 1);
  uv_buf_t buf;
  memcpy(copy, data, len);
  copy[len] = '\n';
  buf = uv_buf_init(copy, (unsigned)len + 1);
  uv_write(w, to, &buf, 1, write_done);
}

/* ---- the server: one session per connection ---------------------------- */

static void step_done(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud);

/* Starts the next waiting line's step when the session is free. */
static void pump(conn_t *c) {
  char *line;
  size_t len;
  if (c->busy || c->count == 0 || c->s == NULL) return;
  line = c->queue[c->head];
  len = c->qlen[c->head];
  c->head = (c->head + 1) % QUEUE;
  c->count--;
  if (ludo_session_step_async(c->s, line, len, step_done, c) == 0)
    c->busy = 1;
  else
    send_line((uv_stream_t *)&c->tcp, "{\"error\":\"busy\"}", 16);
  free(line);
}

static void step_done(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud) {
  conn_t *c = ud;
  (void)s;
  if (status != 0) fprintf(stderr, "hostloop: step: %.*s\n", (int)len, data);
  send_line((uv_stream_t *)&c->tcp, data, len);
  c->busy = 0;
  pump(c); /* runs from the loop's next pass: ludo defers it */
}

static void server_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  conn_t *c = st->data;
  ssize_t i;
  for (i = 0; i < n; i++) {
    if (buf->base[i] != '\n') {
      if (c->len < sizeof c->line) c->line[c->len++] = buf->base[i];
      continue;
    }
    if (c->count < QUEUE) {
      int at = (c->head + c->count) % QUEUE;
      c->queue[at] = malloc(c->len);
      memcpy(c->queue[at], c->line, c->len);
      c->qlen[at] = c->len;
      c->count++;
    } else {
      send_line(st, "{\"error\":\"queue full\"}", 22);
    }
    c->len = 0;
  }
  pump(c);
}

static void conn_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  while (c->count > 0) {
    free(c->queue[c->head]);
    c->head = (c->head + 1) % QUEUE;
    c->count--;
  }
  free(c);
}

static void opened(ludo_session_t *s, int status, void *ud) {
  conn_t *c = ud;
  const char *out;
  size_t len;
  if (status != 0) {
    fprintf(stderr, "hostloop: open: %s\n", ludo_runtime_errmsg(rt));
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    return;
  }
  c->s = s;
  (void)out;
  (void)len;
  if (ludo_session_reset_async(s, "{\"seed\":1}", 10, step_done, c) == 0)
    c->busy = 1;
  uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, server_read);
}

static void on_connection(uv_stream_t *srv, int status) {
  conn_t *c;
  if (status != 0) return;
  c = calloc(1, sizeof *c);
  uv_tcp_init(&loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(srv, (uv_stream_t *)&c->tcp) != 0 ||
      ludo_session_open_async(env, opened, c) != 0)
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* ---- the client: checks the replies ------------------------------------ */

static void check_reply(const char *line, size_t len) {
  replies++;
  if (replies == 1) return; /* the reset */
  if (len == 0 || strstr(line, "\"echoed_message\":\"line") == NULL) {
    fprintf(stderr, "hostloop: unexpected reply %.*s\n", (int)len, line);
    failures++;
  }
  if (replies == NLINES + 1) uv_read_stop((uv_stream_t *)&client);
}

static void client_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  ssize_t i;
  (void)st;
  for (i = 0; i < n; i++) {
    if (buf->base[i] == '\n') {
      check_reply(reply, reply_len);
      reply_len = 0;
    } else if (reply_len < sizeof reply) {
      reply[reply_len++] = buf->base[i];
    }
  }
}

static void connected(uv_connect_t *req, int status) {
  int i;
  if (status != 0) {
    fprintf(stderr, "hostloop: connect: %s\n", uv_strerror(status));
    failures++;
    return;
  }
  uv_read_start(req->handle, alloc_cb, client_read);
  for (i = 1; i <= NLINES; i++) {
    char line[64];
    int n = snprintf(line, sizeof line, "{\"message\":\"line %d\"}", i);
    send_line(req->handle, line, (size_t)n);
  }
}

static void tick(uv_timer_t *t) {
  (void)t;
  ticks++;
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, h == (uv_handle_t *)&server ||
                                         h == (uv_handle_t *)&client ||
                                         h == (uv_handle_t *)&ticker
                                         ? NULL : conn_closed);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/echo";
  struct sockaddr_in addr;
  struct sockaddr_storage bound;
  int namelen = sizeof bound, rc, i;
  ludo_options_t opts;
  uv_connect_t conn;

  uv_loop_init(&loop);
  uv_timer_init(&loop, &ticker);
  uv_timer_start(&ticker, tick, 10, 10);
  uv_tcp_init(&loop, &server);
  uv_ip4_addr("127.0.0.1", 0, &addr);
  uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
  if (uv_listen((uv_stream_t *)&server, 16, on_connection) != 0) {
    fprintf(stderr, "hostloop: cannot listen\n");
    return 1;
  }
  uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &namelen);

  ludo_options_init(&opts);
  opts.loop = &loop;      /* ludo lives on the host's loop */
  opts.slice_us = 5000;   /* Lua yields to the host's handles every 5 ms */
  if ((rc = ludo_runtime_new(&rt, &opts)) != 0 ||
      (rc = ludo_env_load(rt, path, NULL, &env)) != 0) {
    fprintf(stderr, "hostloop: %s\n", rt ? ludo_runtime_errmsg(rt)
                                         : ludo_strerror(rc));
    return 1;
  }

  uv_tcp_init(&loop, &client);
  uv_tcp_connect(&conn, &client, (const struct sockaddr *)&bound, connected);
  /* Until the replies are in and the host's timer has ticked meanwhile. */
  for (i = 0; i < 100000 && (replies < NLINES + 1 || ticks < 2) &&
              failures == 0; i++)
    uv_run(&loop, UV_RUN_ONCE);

  /* Shut down as an embedder does: ludo first, then the host's handles. */
  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_NOWAIT);
  uv_walk(&loop, close_walk, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  rc = uv_loop_close(&loop);
  printf("hostloop: %d replies, %d host timer ticks, uv_loop_close %s\n",
         replies, ticks, rc == 0 ? "ok" : uv_strerror(rc));
  return failures == 0 && replies == NLINES + 1 && ticks >= 2 && rc == 0
             ? 0 : 1;
}
