/* fetch.c - one HTTP GET over a new connection (see fetch.h).
 *
 * The fetch is the protocol of its connection: it writes the request when
 * the dial succeeds, feeds what it reads to the response parser, reports
 * once, and closes the connection; it is freed when the connection's
 * `closed` callback came (or at once when the dial failed). */
#include "net/fetch.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "net/conn.h"
#include "net/dial.h"
#include "net/reply.h"

#define MAX_HEAD ((size_t)64 << 10)

struct ludo__fetch_s {
  ludo__core_t *core;
  ludo__dial_t *dial;      /* until the dial's callback */
  ludo__net_conn_t *nc;    /* the connection, until it is gone */
  ludo__buf_t request;
  ludo__reply_t reply;
  uint32_t timeout_ms;
  ludo__fetch_cb cb;
  void *ud;
  int reported;            /* the callback ran (or was cancelled) */
};

static void fetch_free(ludo__fetch_t *f) {
  ludo__buf_free(&f->request);
  ludo__reply_free(&f->reply);
  ludo__free(&f->core->heap, f, sizeof *f);
}

/* Reports once and ends the connection. */
static void report(ludo__fetch_t *f, int status, const char *msg) {
  size_t len = 0;
  const char *body = ludo__reply_body(&f->reply, &len);
  if (!f->reported) {
    f->reported = 1;
    f->core->in_callback++;
    f->cb(f->ud, status, ludo__reply_status(&f->reply), status ? "" : body,
          status ? 0 : len, msg ? msg : "");
    f->core->in_callback--;
  }
  if (f->nc) ludo__net_conn_close(f->nc, status != 0);
}

static void fetch_read(void *p, const char *data, size_t len) {
  ludo__fetch_t *f = p;
  size_t used;
  int rc = ludo__reply_feed(&f->reply, data, len, &used);
  if (rc == 1)
    report(f, 0, NULL);
  else if (rc < 0)
    report(f, rc, f->reply.err);
}

static void fetch_eof(void *p) {
  ludo__fetch_t *f = p;
  int rc = ludo__reply_eof(&f->reply);
  if (rc == 1)
    report(f, 0, NULL);
  else if (ludo__reply_status(&f->reply) == 0)
    report(f, LUDO_ECONNECT, "the server closed the connection without "
                             "answering");
  else
    report(f, LUDO_EPROTO, f->reply.err);
}

static void fetch_timeout(void *p) {
  ludo__fetch_t *f = p;
  char msg[96];
  snprintf(msg, sizeof msg, "no response within %u ms",
           (unsigned)f->timeout_ms);
  report(f, LUDO_ENOREPLY, msg);
}

static void fetch_written(void *p) { (void)p; }

static void fetch_shutdown(void *p) { (void)p; }

static void fetch_closed(void *p) {
  ludo__fetch_t *f = p;
  f->nc = NULL;
  if (!f->reported)
    report(f, LUDO_ECONNECT, "the connection ended before the response");
  fetch_free(f);
}

static const ludo__net_proto_t fetch_proto = {
    fetch_read, fetch_eof, fetch_timeout, fetch_written, fetch_shutdown,
    fetch_closed};

static void on_dialed(void *ud, int status, ludo__net_conn_t *nc,
                      const char *msg) {
  ludo__fetch_t *f = ud;
  f->dial = NULL;
  if (status != 0) {
    report(f, status, msg);
    fetch_free(f);
    return;
  }
  f->nc = nc;
  ludo__net_conn_set_proto(nc, &fetch_proto, f);
  if (ludo__net_conn_write(nc, f->request.p, f->request.len) != 0) {
    report(f, LUDO_ENOMEM, "no memory for the request");
    return;
  }
  ludo__net_conn_flush(nc);
  if (f->timeout_ms) ludo__net_conn_timer(nc, f->timeout_ms);
}

int ludo__fetch(ludo__core_t *core, const char *host, int port,
                const char *hostfield, const char *target, const char *token,
                uint32_t timeout_ms, size_t max_body, ludo__fetch_cb cb,
                void *ud, ludo__fetch_t **out) {
  ludo__fetch_t *f;
  int rc;
  *out = NULL;
  f = ludo__calloc(&core->heap, sizeof *f);
  if (f == NULL) return LUDO_ENOMEM;
  f->core = core;
  f->cb = cb;
  f->ud = ud;
  f->timeout_ms = timeout_ms;
  ludo__buf_init(&f->request, ludo__alloc_fn, &core->heap);
  ludo__reply_init(&f->reply, &core->heap, MAX_HEAD, max_body);
  rc = ludo__buf_printf(&f->request,
                        "GET %s HTTP/1.1\r\nHost: %s\r\n"
                        "User-Agent: ludo/" LUDO_VERSION_STRING "\r\n"
                        "Accept: application/json\r\n"
                        "Connection: close\r\n",
                        target, hostfield);
  if (rc == 0 && token != NULL)
    rc = ludo__buf_printf(&f->request, "Authorization: Bearer %s\r\n", token);
  if (rc == 0) rc = ludo__buf_adds(&f->request, "\r\n");
  if (rc != 0) {
    fetch_free(f);
    return LUDO_ENOMEM;
  }
  rc = ludo__dial(core, host, port, timeout_ms, 0, on_dialed, f, &f->dial);
  if (rc != 0) {
    fetch_free(f);
    return rc;
  }
  *out = f;
  return 0;
}

void ludo__fetch_cancel(ludo__fetch_t *f) {
  if (f == NULL || f->reported) return;
  f->reported = 1;
  if (f->dial) {
    ludo__dial_cancel(f->dial);
    fetch_free(f);
  } else if (f->nc) {
    ludo__net_conn_close(f->nc, 1); /* freed in fetch_closed */
  }
}
