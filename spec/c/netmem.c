/* netmem.c - helpers of the runtime/net tests (see netmem.h). */
#include "netmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>

/* ---- a core ----------------------------------------------------------- */

/* Keeps the last log line in test_log (see helpers.h). */
static void net_log(void *ud, ludo_log_level_t level, const char *who,
                    const char *msg, size_t len) {
  test_log_t *l = ud;
  size_t n = len < sizeof l->last - 1 ? len : sizeof l->last - 1;
  l->lines++;
  l->last_level = (int)level;
  memcpy(l->last, msg, n);
  l->last[n] = '\0';
  snprintf(l->last_who, sizeof l->last_who, "%s", who ? who : "");
}

void net_core_init_on(ludo__core_t *c, uv_loop_t *loop) {
  if (ludo__core_init(c, test_alloc_fn, &test_heap, net_log, &test_log, loop,
                      NULL))
    FAIL("ludo__core_init failed");
}

void net_core_init(ludo__core_t *c) { net_core_init_on(c, NULL); }

void net_core_pump(ludo__core_t *c) { ludo__core_poll(c, 0); }

void net_core__free(const char *file, int line, ludo__core_t *c) {
  ludo__core_close(c);
  if (test_heap.live != 0 || test_heap.blocks != 0)
    test__fail(file, line, "after the core closed: %zu bytes in %zu blocks "
               "still live", test_heap.live, test_heap.blocks);
  if (test_heap.osize_mismatch != 0)
    test__fail(file, line, "a wrong osize was passed %lu times",
               test_heap.osize_mismatch);
}

/* ---- the memory transport --------------------------------------------- */

#define MEM(c) ((mem_t *)(c)->sink_data)

static void mem_write(ludo__net_conn_t *c, char *p, size_t len, size_t cap) {
  mem_t *m = MEM(c);
  if (m->out_len + len + 1 > m->out_cap) {
    size_t ncap = m->out_cap ? m->out_cap : 256;
    while (ncap < m->out_len + len + 1) ncap *= 2;
    m->out = realloc(m->out, ncap);
    if (m->out == NULL) FAIL("out of memory");
    m->out_cap = ncap;
  }
  memcpy(m->out + m->out_len, p, len);
  m->out_len += len;
  m->out[m->out_len] = '\0';
  m->unacked += len;
  m->blocks++;
  if (cap - len > m->slack_max) m->slack_max = cap - len;
  ludo__net_conn_free_block(c, p, cap);
}

static void mem_pause(ludo__net_conn_t *c, int paused) {
  MEM(c)->paused = paused;
}

static void mem_timer(ludo__net_conn_t *c, uint64_t ms) {
  MEM(c)->timer_ms = ms;
}

static void mem_close(ludo__net_conn_t *c, int abort) {
  mem_t *m = MEM(c);
  int want = abort ? 2 : 1;
  if (want > m->close_req) m->close_req = want;
}

static const ludo__net_sink_t mem_sink = {mem_write, mem_pause, mem_timer,
                                          mem_close};

void mem_init(mem_t *m, ludo__core_t *core, size_t high_water) {
  memset(m, 0, sizeof *m);
  ludo__net_conn_init(&m->conn, core, &mem_sink, m, high_water, 0);
}

void mem_feed(mem_t *m, const char *s, size_t n) {
  ludo__net_conn_read(&m->conn, s, n);
}

void mem_ack(mem_t *m) {
  size_t n = m->unacked;
  m->unacked = 0;
  if (n) ludo__net_conn_written(&m->conn, n);
}

void mem_fire(mem_t *m) {
  if (m->timer_ms == 0) FAIL("mem_fire: the timer is not set");
  m->timer_ms = 0;
  ludo__net_conn_timeout(&m->conn);
}

void mem_finish(mem_t *m) {
  if (m->close_req == 0) FAIL("mem_finish: no close was asked");
  if (m->closed) return;
  m->closed = 1;
  ludo__net_conn_closed(&m->conn);
}

const char *mem_take(mem_t *m, size_t *len) {
  static char *last;
  free(last);
  last = m->out ? m->out : calloc(1, 1);
  if (len) *len = m->out_len;
  m->out = NULL;
  m->out_len = m->out_cap = 0;
  return last;
}

void mem_free(mem_t *m) {
  free(m->out);
  m->out = NULL;
  m->out_len = m->out_cap = 0;
}

char *net_strip_date(char *s) {
  char *p = s;
  while ((p = strstr(p, "HTTP/1.1 ")) != NULL) {
    char *end = strstr(p, "\r\n\r\n"), *d = strstr(p, "\r\nDate: ");
    if (strncmp(p, "HTTP/1.1 1", 10) == 0) { /* 1xx: no Date */
      p += 9;
      continue;
    }
    if (d == NULL || end == NULL || d > end)
      FAIL("a response without a Date field: %s", s);
    {
      char *eol = strstr(d + 2, "\r\n");
      memmove(d, eol, strlen(eol) + 1);
    }
    p += 9;
  }
  return s;
}

/* ---- a recording handler ---------------------------------------------- */

static void copy(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

static void rec_request(void *ud, ludo__http_req_t *req) {
  rec_t *r = ud;
  int i = r->n++;
  const char *body;
  size_t len;
  if (i >= REC_MAX) FAIL("more than %d requests", REC_MAX);
  r->req[i] = req;
  copy(r->method[i], sizeof r->method[i], ludo__http_req_method(req));
  copy(r->target[i], sizeof r->target[i], ludo__http_req_target(req));
  copy(r->path[i], sizeof r->path[i], ludo__http_req_path(req));
  copy(r->query[i], sizeof r->query[i], ludo__http_req_query(req));
  body = ludo__http_req_body(req, &len);
  if (len >= sizeof r->body[i]) len = sizeof r->body[i] - 1;
  memcpy(r->body[i], body, len);
  r->body[i][len] = '\0';
  r->body_len[i] = len;
  r->upgrade[i] = ludo__http_req_upgrade(req);
  r->version[i] = ludo__http_req_version(req);
  r->nheaders[i] = ludo__http_req_nheaders(req);
  ludo__http_req_set_data(req, r);
  if (r->answer_now) rec_answer(r, i);
}

static void rec_abort(void *ud, ludo__http_req_t *req) {
  rec_t *r = ud;
  int i;
  if (ludo__http_req_data(req) != r) FAIL("abort of a request not ours");
  r->aborted++;
  r->abort_rc = ludo__http_respond(req, 200, NULL, 0, "late", 4);
  for (i = 0; i < r->n; i++)
    if (r->req[i] == req) r->req[i] = NULL;
}

/* The connection answered a request itself: counted. */
static void rec_refused(void *ud, int status) {
  rec_t *r = ud;
  r->refused++;
  r->refused_status = status;
}

const ludo__http_handler_t rec_handler = {rec_request, rec_abort,
                                          rec_refused};

void rec_answer(rec_t *r, int i) {
  static const ludo__http_header_t h = {"Content-Type", "text/plain"};
  char body[300];
  int n = snprintf(body, sizeof body, "%d:%s", i, r->path[i]);
  int rc;
  if (r->req[i] == NULL) FAIL("request %d is gone", i);
  rc = ludo__http_respond(r->req[i], 200, &h, 1, body, (size_t)n);
  if (rc != 0) FAIL("answering request %d: %s", i, ludo_err_name(rc));
  r->req[i] = NULL;
}

/* ---- frames ----------------------------------------------------------- */

typedef struct rd_s {
  const char *p;
  size_t n;
} rd_t;

static ssize_t frame_recv(uint8_t *buf, size_t len, int flags, void *ud) {
  rd_t *rd = ud;
  size_t k = len < rd->n ? len : rd->n;
  (void)flags;
  memcpy(buf, rd->p, k);
  rd->p += k;
  rd->n -= k;
  return (ssize_t)k;
}

static ssize_t frame_send(const uint8_t *data, size_t len, int flags,
                          void *ud) {
  rd_t *out = ud; /* p is a char * we write through */
  (void)flags;
  memcpy((char *)out->p + out->n, data, len);
  out->n += len;
  return (ssize_t)len;
}

static int frame_mask(uint8_t *buf, size_t len, void *ud) {
  static const uint8_t key[4] = {0x37, 0xfa, 0x21, 0x3d};
  (void)ud;
  memcpy(buf, key, len < 4 ? len : 4);
  return 0;
}

int net__frames(const char *file, int line, const char *p, size_t n,
                frame_t *f, int max) {
  struct wslay_frame_callbacks cb = {frame_send, frame_recv, frame_mask};
  wslay_frame_context_ptr fc;
  rd_t rd = {p, n};
  int count = 0;
  size_t got = 0;
  if (wslay_frame_context_init(&fc, &cb, &rd) != 0)
    test__fail(file, line, "wslay_frame_context_init failed");
  for (;;) {
    struct wslay_frame_iocb io;
    ssize_t r;
    memset(&io, 0, sizeof io);
    r = wslay_frame_recv(fc, &io);
    if (r == WSLAY_ERR_WANT_READ) break;
    if (r < 0) {
      wslay_frame_context_free(fc);
      test__fail(file, line, "not a valid frame (%d)", (int)r);
    }
    if (count >= max) {
      wslay_frame_context_free(fc);
      test__fail(file, line, "more than %d frames", max);
    }
    if (got == 0) {
      f[count].fin = io.fin;
      f[count].opcode = io.opcode;
      f[count].masked = io.mask;
      f[count].len = (size_t)io.payload_length;
    }
    if (got + io.data_length < sizeof f[count].data) {
      memcpy(f[count].data + got, io.data, io.data_length);
      f[count].data[got + io.data_length] = '\0';
    }
    got += io.data_length;
    if (got == io.payload_length) {
      count++;
      got = 0;
    }
  }
  wslay_frame_context_free(fc);
  if (got != 0 || rd.n != 0)
    test__fail(file, line, "bytes left after the last whole frame");
  return count;
}

size_t net_client_frame(char *out, int fin, int opcode, const char *payload,
                        size_t len) {
  struct wslay_frame_callbacks cb = {frame_send, frame_recv, frame_mask};
  wslay_frame_context_ptr fc;
  struct wslay_frame_iocb io;
  rd_t w = {out, 0};
  if (wslay_frame_context_init(&fc, &cb, &w) != 0)
    FAIL("wslay_frame_context_init failed");
  memset(&io, 0, sizeof io);
  io.fin = (uint8_t)fin;
  io.opcode = (uint8_t)opcode;
  io.mask = 1;
  io.payload_length = len;
  io.data = (const uint8_t *)payload;
  io.data_length = len;
  if (wslay_frame_send(fc, &io) != (ssize_t)len)
    FAIL("wslay_frame_send failed");
  wslay_frame_context_free(fc);
  return w.n;
}

const char net_ws_upgrade[] =
    "GET /ws HTTP/1.1\r\n"
    "Host: server.example.com\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n\r\n";
