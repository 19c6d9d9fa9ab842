/* http.c - HTTP/1.1 server connections on http-parser (see http.h).
 *
 * How a connection runs. Bytes read go straight to the parser; what it
 * cannot take yet (the requests after a pipelined one the handler still
 * holds, or the bytes after an upgrade request) waits in `in`. The
 * parser's callbacks build the current request (`cur`) and pause the
 * parser at the end of the headers (to check the limits on exact byte
 * counts before any body is read) and at the end of the request (so one
 * request at a time leaves the parser). A complete request joins the
 * queue of requests whose responses are not yet written, in arrival
 * order, and goes to the handler. An answer turns its request into
 * response bytes; the responses at the head of the queue that are
 * answered are written, so an answer to a later request waits for the
 * earlier ones.
 *
 * Lifetime. The conn's `closed` callback marks the HTTP connection dead,
 * aborts the requests the handler still holds and frees it. Every entry
 * point counts its depth, and the memory is freed when the outermost one
 * returns, so a handler that answers or closes from inside a callback
 * never pulls the connection from under the parser. */
#include "net/http.h"

#include <http_parser.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "net/response.h"

#define DEFAULT_MAX_HEADER_BYTES ((size_t)16 << 10)
#define DEFAULT_MAX_HEADERS 100u
#define DEFAULT_MAX_BODY_BYTES ((size_t)16 << 20)
/* One request at a time with the handler: RFC 9112 9.3.2, a server must
 * not process pipelined requests that are not safe in parallel (two
 * steps of one session, say); the next waits unparsed in `in`. */
#define DEFAULT_MAX_PIPELINED 1u
#define DEFAULT_HEADER_TIMEOUT_MS 10000u
#define DEFAULT_BODY_TIMEOUT_MS 30000u
/* A body must come at this rate on the whole, past one gap's grace: a
 * client sending a byte just under every gap would otherwise hold the
 * connection for days (slow POST). A chunked body, whose length is not
 * known, gets the time of the largest body allowed. */
#define MIN_BODY_BYTES_PER_S 8192u
#define DEFAULT_IDLE_TIMEOUT_MS 30000u
#define DEFAULT_LINGER_MS 5000u
#define DEFAULT_WRITE_HIGH_WATER ((size_t)1 << 20)
#define DEFAULT_MAX_CONNECTIONS 4096u

/* Bytes waiting in `in` before reading pauses (at least this much, and
 * more than one request's headers). */
#define IN_MIN ((size_t)64 << 10)

enum { RQ_PARSING, RQ_WAITING, RQ_ANSWERED, RQ_ABORTED };
enum { EV_NONE, EV_HEADERS, EV_MESSAGE };
enum { F_NONE, F_URL, F_FIELD, F_VALUE };

typedef struct hdr_off_s {
  size_t name, value; /* offsets into the request's text */
} hdr_off_t;

struct ludo__http_req_s {
  ludo__http_conn_t *hc;
  ludo__http_req_t *next;  /* the queue, in arrival order */
  int state;               /* RQ_* */
  int hdrs_done;
  int version;             /* major * 10 + minor */
  int keep_alive;
  int upgrade;
  int head;                /* HEAD: the body is not sent */
  const char *method;
  /* target\0 name\0 value\0 ... path\0 query\0 */
  ludo__buf_t text;
  size_t path_off, query_off;
  hdr_off_t *hdrs;
  size_t nhdrs, hdrs_cap;
  ludo__buf_t body;
  ludo__buf_t answer;      /* the response bytes, once answered */
  int close_after;         /* the connection ends after this response */
  int close_asked;         /* ... because the handler asked it */
  ludo__http_switch_cb switch_fn; /* set by ludo__http_switch */
  void *switch_ud;
  void *data;              /* the handler's */
};

struct ludo__http_conn_s {
  ludo__core_t *core;
  ludo__alloc_t *heap;
  ludo__net_conn_t *nc;    /* NULL once closed or handed over */
  ludo__http_options_t o;
  ludo__http_handler_t h;
  void *ud;
  http_parser parser;
  ludo__http_req_t *cur;   /* the request being parsed */
  ludo__http_req_t *head, *tail; /* not yet written, in arrival order */
  unsigned waiting;        /* requests the handler holds */
  ludo__buf_t in;          /* read, not yet parsed */
  size_t in_off;           /* parsed part of `in` */
  size_t in_max;
  int event;               /* EV_*: why the parser paused */
  int fail_status;         /* an error chosen inside a parser callback */
  const char *fail_msg;
  size_t hdr_bytes;        /* request line and headers so far */
  char head_prev;          /* the request head's last byte seen so far */
  size_t url_len;
  size_t trailer_bytes;
  uint64_t body_end_ms;    /* the body must have come by then (the
                              loop's clock); 0: no body under way */
  int field;               /* F_*: what the text holds last */
  int stop;                /* parse nothing more (close or error) */
  int upgrade_pending;     /* an upgrade request waits for its answer */
  int closing;             /* a close started */
  int switched;            /* a WebSocket took the connection */
  int dead;                /* the connection is gone */
  int depth;               /* entry points running */
  ludo__task_t resume;     /* parses `in` from the loop */
};

static const ludo__net_proto_t http_proto;
/* The parser's callbacks, the same for every connection of every thread:
 * filled once (pthread_once), read-only after. */
static http_parser_settings settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

void ludo__http_options_init(ludo__http_options_t *o) {
  o->max_header_bytes = DEFAULT_MAX_HEADER_BYTES;
  o->max_headers = DEFAULT_MAX_HEADERS;
  o->max_body_bytes = DEFAULT_MAX_BODY_BYTES;
  o->max_pipelined = DEFAULT_MAX_PIPELINED;
  o->header_timeout_ms = DEFAULT_HEADER_TIMEOUT_MS;
  o->body_timeout_ms = DEFAULT_BODY_TIMEOUT_MS;
  o->idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
  o->linger_ms = DEFAULT_LINGER_MS;
  o->write_high_water = DEFAULT_WRITE_HIGH_WATER;
  o->max_connections = DEFAULT_MAX_CONNECTIONS;
  o->output_budget = NULL;
}

void ludo__http_options_fill(ludo__http_options_t *o,
                             const ludo__http_options_t *in) {
  ludo__http_options_init(o);
  if (in == NULL) return;
#define LUDO__OPT(f) \
  if (in->f) o->f = in->f;
  LUDO__OPT(max_header_bytes)
  LUDO__OPT(max_headers)
  LUDO__OPT(max_body_bytes)
  LUDO__OPT(max_pipelined)
  LUDO__OPT(header_timeout_ms)
  LUDO__OPT(body_timeout_ms)
  LUDO__OPT(idle_timeout_ms)
  LUDO__OPT(linger_ms)
  LUDO__OPT(write_high_water)
  LUDO__OPT(max_connections)
  LUDO__OPT(output_budget)
#undef LUDO__OPT
}

/* ---- requests --------------------------------------------------------- */

static ludo__http_req_t *req_new(ludo__http_conn_t *hc) {
  ludo__http_req_t *r = ludo__calloc(hc->heap, sizeof *r);
  if (r == NULL) return NULL;
  r->hc = hc;
  ludo__buf_init(&r->text, ludo__alloc_fn, hc->heap);
  ludo__buf_init(&r->body, ludo__alloc_fn, hc->heap);
  ludo__buf_init(&r->answer, ludo__alloc_fn, hc->heap);
  return r;
}

static void req_free(ludo__http_conn_t *hc, ludo__http_req_t *r) {
  if (r == NULL) return;
  ludo__buf_free(&r->text);
  ludo__buf_free(&r->body);
  ludo__buf_free(&r->answer);
  if (r->hdrs) ludo__free(hc->heap, r->hdrs, r->hdrs_cap * sizeof *r->hdrs);
  ludo__free(hc->heap, r, sizeof *r);
}

static void enqueue(ludo__http_conn_t *hc, ludo__http_req_t *r) {
  r->next = NULL;
  if (hc->tail)
    hc->tail->next = r;
  else
    hc->head = r;
  hc->tail = r;
}

static ludo__http_req_t *dequeue(ludo__http_conn_t *hc) {
  ludo__http_req_t *r = hc->head;
  hc->head = r->next;
  if (hc->head == NULL) hc->tail = NULL;
  return r;
}

const char *ludo__http_req_method(const ludo__http_req_t *r) {
  return r->method;
}

const char *ludo__http_req_target(const ludo__http_req_t *r) {
  return r->text.p;
}

const char *ludo__http_req_path(const ludo__http_req_t *r) {
  return r->text.p + r->path_off;
}

const char *ludo__http_req_query(const ludo__http_req_t *r) {
  return r->text.p + r->query_off;
}

size_t ludo__http_req_nheaders(const ludo__http_req_t *r) { return r->nhdrs; }

ludo__http_header_t ludo__http_req_header_at(const ludo__http_req_t *r,
                                             size_t i) {
  ludo__http_header_t h = {NULL, NULL};
  if (i < r->nhdrs) {
    h.name = r->text.p + r->hdrs[i].name;
    h.value = r->text.p + r->hdrs[i].value;
  }
  return h;
}

const char *ludo__http_req_header(const ludo__http_req_t *r,
                                  const char *name) {
  size_t i;
  for (i = 0; i < r->nhdrs; i++)
    if (strcasecmp(r->text.p + r->hdrs[i].name, name) == 0)
      return r->text.p + r->hdrs[i].value;
  return NULL;
}

const char *ludo__http_req_body(const ludo__http_req_t *r, size_t *len) {
  if (len) *len = r->body.len;
  return r->body.p ? r->body.p : "";
}

int ludo__http_req_upgrade(const ludo__http_req_t *r) { return r->upgrade; }

int ludo__http_req_version(const ludo__http_req_t *r) { return r->version; }

ludo__core_t *ludo__http_req_core(const ludo__http_req_t *r) {
  return r->hc->core;
}

void ludo__http_req_set_data(ludo__http_req_t *r, void *data) {
  r->data = data;
}

void *ludo__http_req_data(const ludo__http_req_t *r) { return r->data; }

/* ---- the connection's life -------------------------------------------- */

static void hc_free(ludo__http_conn_t *hc) {
  ludo__http_req_t *r;
  ludo__core_unpost(hc->core, &hc->resume);
  while (hc->head) {
    r = dequeue(hc);
    req_free(hc, r);
  }
  req_free(hc, hc->cur);
  ludo__buf_free(&hc->in);
  ludo__free(hc->heap, hc, sizeof *hc);
}

static void enter(ludo__http_conn_t *hc) { hc->depth++; }

/* Leaves an entry point; the outermost frees a connection that ended. */
static void leave(ludo__http_conn_t *hc) {
  if (--hc->depth == 0 && (hc->dead || hc->switched)) hc_free(hc);
}

/* Nothing under way: no request being received or with the handler. */
static int idle(const ludo__http_conn_t *hc) {
  return hc->cur == NULL && hc->waiting == 0 && !hc->upgrade_pending;
}

/* The next request is parsed only while the responses before it are
 * being read: past the write high water the bytes already read wait
 * unparsed too (a peer pipelining cheap requests that answer large, and
 * not reading, would otherwise make the server build every response). */
static int can_parse(const ludo__http_conn_t *hc) {
  return hc->nc != NULL && !hc->closing && !hc->stop &&
         !hc->upgrade_pending && hc->waiting < hc->o.max_pipelined &&
         !ludo__net_conn_write_full(hc->nc);
}

static void timer(ludo__http_conn_t *hc, uint32_t ms) {
  if (hc->nc) ludo__net_conn_timer(hc->nc, ms);
}

static void close_conn(ludo__http_conn_t *hc, int abort) {
  if (hc->nc == NULL) return;
  hc->closing = 1;
  ludo__net_conn_close(hc->nc, abort);
}

/* Ends an idle connection: at once when nothing waits to be sent (no
 * request is under way, so no bytes of the peer wait unread either: a
 * plain close, no reset), else after sending it. */
static void close_quietly(ludo__http_conn_t *hc) {
  if (hc->nc) close_conn(hc, ludo__net_conn_pending(hc->nc) == 0);
}

/* Runs a handler callback with the core's callback count raised. */
static void call_request(ludo__http_conn_t *hc, ludo__http_req_t *r) {
  hc->core->in_callback++;
  hc->h.request(hc->ud, r);
  hc->core->in_callback--;
}

/* Writes the answered responses at the head of the queue, in order, and
 * carries out what the last one asks: close, or hand the connection to a
 * WebSocket. */
static void write_answers(ludo__http_conn_t *hc) {
  while (hc->nc && hc->head && hc->head->state == RQ_ANSWERED &&
         !hc->closing) {
    ludo__http_req_t *r = dequeue(hc);
    int close_after = r->close_after;
    /* A peer that does not read its responses while the server's output
     * is full: the connection ends rather than hold more. */
    if (ludo__net_conn_over_budget(hc->nc, r->answer.len) ||
        ludo__net_conn_write(hc->nc, r->answer.p, r->answer.len) != 0) {
      req_free(hc, r);
      close_conn(hc, 1);
      return;
    }
    if (r->switch_fn) {
      ludo__http_switch_cb fn = r->switch_fn;
      void *ud = r->switch_ud;
      ludo__net_conn_t *nc = hc->nc;
      req_free(hc, r);
      ludo__net_conn_flush(nc);
      hc->upgrade_pending = 0;
      hc->switched = 1;
      hc->nc = NULL;
      ludo__core_unpost(hc->core, &hc->resume);
      ludo__net_conn_set_proto(nc, NULL, NULL);
      ludo__net_conn_pause(nc, LUDO__NET_PAUSE_INPUT, 0);
      fn(ud, nc, hc->in.p ? hc->in.p + hc->in_off : "",
         hc->in.len - hc->in_off);
      return;
    }
    req_free(hc, r);
    if (close_after) {
      close_conn(hc, 0);
      return;
    }
  }
  if (hc->nc == NULL || hc->closing) return;
  ludo__net_conn_flush(hc->nc);
  if (idle(hc)) timer(hc, hc->o.idle_timeout_ms);
}

/* Drops the request being parsed and everything not yet parsed, queues an
 * error response after the responses before it, and ends the connection
 * once it is written. */
static void fail(ludo__http_conn_t *hc, int status, const char *msg) {
  ludo__http_req_t *r;
  req_free(hc, hc->cur);
  hc->cur = NULL;
  hc->stop = 1; /* parse_in drops what waits in `in` */
  if (hc->nc == NULL || hc->closing) return;
  ludo__net_conn_pause(hc->nc, LUDO__NET_PAUSE_INPUT, 1);
  timer(hc, 0);
  r = req_new(hc);
  if (r == NULL || ludo__response_error(&r->answer, status, msg) != 0) {
    req_free(hc, r);
    close_conn(hc, 1);
    return;
  }
  r->state = RQ_ANSWERED;
  r->close_after = 1;
  enqueue(hc, r);
  if (hc->h.refused) hc->h.refused(hc->ud, status);
  write_answers(hc);
}

/* Sets the reason to stop reading when `in` holds too much. */
static void input_pause(ludo__http_conn_t *hc) {
  if (hc->nc)
    ludo__net_conn_pause(hc->nc, LUDO__NET_PAUSE_INPUT,
                         hc->stop || hc->in.len - hc->in_off >= hc->in_max);
}

static void resume_task(ludo__task_t *t);

/* After an answer, or once the peer read enough of the answers: parse
 * what waits in `in`, from the loop. */
static void maybe_resume(ludo__http_conn_t *hc) {
  if (can_parse(hc) && hc->in.len > hc->in_off)
    ludo__core_post(hc->core, &hc->resume);
}

/* ---- parser callbacks ------------------------------------------------- */

#define HC(p) ((ludo__http_conn_t *)(p)->data)

/* Fails the parse from inside a callback: the status to answer with. */
static int cb_fail(ludo__http_conn_t *hc, int status, const char *msg) {
  hc->fail_status = status;
  hc->fail_msg = msg;
  return -1;
}

static int on_message_begin(http_parser *p) {
  ludo__http_conn_t *hc = HC(p);
  hc->cur = req_new(hc);
  if (hc->cur == NULL) return cb_fail(hc, 500, "out of memory");
  hc->cur->state = RQ_PARSING;
  hc->hdr_bytes = 0;
  hc->url_len = 0;
  hc->trailer_bytes = 0;
  hc->field = F_URL;
  timer(hc, hc->o.header_timeout_ms);
  return 0;
}

static int add_text(ludo__http_conn_t *hc, const char *at, size_t n) {
  if (ludo__buf_add(&hc->cur->text, at, n) != 0)
    return cb_fail(hc, 500, "out of memory");
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  ludo__http_conn_t *hc = HC(p);
  hc->url_len += n;
  if (hc->url_len > hc->o.max_header_bytes)
    return cb_fail(hc, 414, "request target longer than the limit");
  return add_text(hc, at, n);
}

/* Trailer fields of a chunked body are counted against the header limit
 * and dropped. */
static int trailer(ludo__http_conn_t *hc, size_t n) {
  hc->trailer_bytes += n;
  if (hc->trailer_bytes > hc->o.max_header_bytes)
    return cb_fail(hc, 431, "trailer fields larger than the limit");
  return 0;
}

/* Ends the text of the current field value: without trailing whitespace
 * (not part of the value, RFC 9110 section 5.5), NUL-terminated. */
static int end_value(ludo__http_conn_t *hc) {
  ludo__http_req_t *r = hc->cur;
  if (hc->field == F_VALUE) {
    size_t start = r->hdrs[r->nhdrs - 1].value;
    while (r->text.len > start &&
           (r->text.p[r->text.len - 1] == ' ' ||
            r->text.p[r->text.len - 1] == '\t'))
      r->text.len--;
  }
  if (ludo__buf_addc(&r->text, '\0') != 0)
    return cb_fail(hc, 500, "out of memory");
  return 0;
}

/* 1 when a field name piece holds a byte outside HTTP's token set
 * (RFC 9110 5.6.2). http-parser 2.9 allows spaces in names ("Content-Length
 * : 2" framed the body); RFC 9112 5.1 makes that a 400. */
static int bad_name(const char *at, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (!ludo__http_tchar((unsigned char)at[i])) return 1;
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  ludo__http_conn_t *hc = HC(p);
  ludo__http_req_t *r = hc->cur;
  if (bad_name(at, n))
    return cb_fail(hc, 400, "a header field name holds a character that "
                            "is not allowed there (a space before ':'?)");
  if (r->hdrs_done) return trailer(hc, n);
  if (hc->field != F_FIELD) {
    if (end_value(hc) != 0) return -1;
    if (r->nhdrs == hc->o.max_headers)
      return cb_fail(hc, 431, "more header fields than the limit");
    if (r->nhdrs == r->hdrs_cap) {
      size_t ncap = r->hdrs_cap ? r->hdrs_cap * 2 : 8;
      hdr_off_t *nh = ludo__realloc(hc->heap, r->hdrs,
                                    r->hdrs_cap * sizeof *nh,
                                    ncap * sizeof *nh);
      if (nh == NULL) return cb_fail(hc, 500, "out of memory");
      r->hdrs = nh;
      r->hdrs_cap = ncap;
    }
    r->hdrs[r->nhdrs].name = r->text.len;
    r->hdrs[r->nhdrs].value = 0;
    r->nhdrs++;
    hc->field = F_FIELD;
  }
  return add_text(hc, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  ludo__http_conn_t *hc = HC(p);
  ludo__http_req_t *r = hc->cur;
  if (r->hdrs_done) return trailer(hc, n);
  if (hc->field != F_VALUE) {
    if (ludo__buf_addc(&r->text, '\0') != 0)
      return cb_fail(hc, 500, "out of memory");
    r->hdrs[r->nhdrs - 1].value = r->text.len;
    hc->field = F_VALUE;
  }
  return add_text(hc, at, n);
}

static int on_headers_complete(http_parser *p) {
  ludo__http_conn_t *hc = HC(p);
  if (end_value(hc) != 0) return -1;
  hc->field = F_NONE;
  hc->cur->hdrs_done = 1;
  hc->event = EV_HEADERS;
  http_parser_pause(p, 1);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  ludo__http_conn_t *hc = HC(p);
  ludo__http_req_t *r = hc->cur;
  if (n > hc->o.max_body_bytes - r->body.len)
    return cb_fail(hc, 413, "request body larger than the limit");
  if (ludo__buf_add(&r->body, at, n) != 0)
    return cb_fail(hc, 500, "out of memory");
  return 0;
}

/* A chunk's size line (http-parser gives the size in content_length):
 * a chunk that would take the body past the limit is refused now, as a
 * Content-Length over it is, not after the body timeout. */
static int on_chunk_header(http_parser *p) {
  ludo__http_conn_t *hc = HC(p);
  if (p->content_length > hc->o.max_body_bytes - hc->cur->body.len)
    return cb_fail(hc, 413, "request body larger than the limit");
  return 0;
}

static int on_message_complete(http_parser *p) {
  ludo__http_conn_t *hc = HC(p);
  hc->cur->keep_alive = http_should_keep_alive(p);
  hc->cur->upgrade = p->upgrade;
  hc->event = EV_MESSAGE;
  http_parser_pause(p, 1);
  return 0;
}

static void settings_fill(void) {
  http_parser_settings_init(&settings);
  settings.on_message_begin = on_message_begin;
  settings.on_url = on_url;
  settings.on_header_field = on_header_field;
  settings.on_header_value = on_header_value;
  settings.on_headers_complete = on_headers_complete;
  settings.on_body = on_body;
  settings.on_chunk_header = on_chunk_header;
  settings.on_message_complete = on_message_complete;
}

/* ---- parsing ---------------------------------------------------------- */

/* Finds the path and query of the target and appends them to the text
 * (NUL-terminated). Returns 0, LUDO_EINVAL or LUDO_ENOMEM. */
static int split_target(ludo__http_req_t *r, int is_connect) {
  struct http_parser_url u;
  size_t tlen = strlen(r->text.p);
  size_t poff = 0, plen = 0, qoff = 0, qlen = 0;
  const char *dflt = "/";
  if (tlen == 1 && r->text.p[0] == '*') {
    dflt = "*";
  } else {
    http_parser_url_init(&u);
    if (http_parser_parse_url(r->text.p, tlen, is_connect, &u) != 0)
      return LUDO_EINVAL;
    if (u.field_set & (1u << UF_PATH)) {
      poff = u.field_data[UF_PATH].off;
      plen = u.field_data[UF_PATH].len;
    }
    if (u.field_set & (1u << UF_QUERY)) {
      qoff = u.field_data[UF_QUERY].off;
      qlen = u.field_data[UF_QUERY].len;
    }
  }
  /* Reserved first: the copies below come from the buffer itself. */
  if (ludo__buf_reserve(&r->text, (plen ? plen : 1) + qlen + 2) != 0)
    return LUDO_ENOMEM;
  r->path_off = r->text.len;
  if (plen)
    ludo__buf_add(&r->text, r->text.p + poff, plen);
  else
    ludo__buf_adds(&r->text, dflt);
  ludo__buf_addc(&r->text, '\0');
  r->query_off = r->text.len;
  ludo__buf_add(&r->text, r->text.p + qoff, qlen);
  ludo__buf_addc(&r->text, '\0');
  return 0;
}

/* The checks once the headers are in, before any body is read. Returns 0
 * or -1 after answering with an error. */
static int headers_done(ludo__http_conn_t *hc) {
  ludo__http_req_t *r = hc->cur;
  http_parser *p = &hc->parser;
  const char *expect, *te;
  size_t i, hosts = 0;
  int rc;
  int has_body = (p->flags & F_CHUNKED) ||
                 (p->content_length > 0 && p->content_length != ULLONG_MAX);
  if (hc->hdr_bytes > hc->o.max_header_bytes) {
    fail(hc, 431, "request line and header fields larger than the limit");
    return -1;
  }
  r->version = p->http_major * 10 + p->http_minor;
  if (p->http_major != 1) {
    fail(hc, 505, "only HTTP/1.0 and HTTP/1.1 are served");
    return -1;
  }
  r->method = http_method_str((enum http_method)p->method);
  r->head = p->method == HTTP_HEAD;
  rc = split_target(r, p->method == HTTP_CONNECT);
  if (rc != 0) {
    fail(hc, rc == LUDO_ENOMEM ? 500 : 400,
         rc == LUDO_ENOMEM ? "out of memory" : "malformed request target");
    return -1;
  }
  for (i = 0; i < r->nhdrs; i++)
    if (strcasecmp(r->text.p + r->hdrs[i].name, "host") == 0) hosts++;
  if (r->version >= 11 && hosts == 0) {
    fail(hc, 400, "HTTP/1.1 request without a Host header field");
    return -1;
  }
  if (hosts > 1) {
    fail(hc, 400, "more than one Host header field");
    return -1;
  }
  te = ludo__http_req_header(r, "transfer-encoding");
  if (te != NULL && strcasecmp(te, "chunked") != 0) {
    fail(hc, 501, "the only transfer coding served is chunked");
    return -1;
  }
  if (p->content_length != ULLONG_MAX &&
      p->content_length > hc->o.max_body_bytes) {
    fail(hc, 413, "request body larger than the limit");
    return -1;
  }
  /* A client waiting for "100 Continue" before its body gets it, unless a
   * response before it is pending (interim responses are in order too;
   * the client then sends its body after its own wait). */
  expect = ludo__http_req_header(r, "expect");
  if (expect && has_body && r->version >= 11 && hc->head == NULL &&
      strcasecmp(expect, "100-continue") == 0 && hc->nc) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (ludo__net_conn_write(hc->nc, cont, sizeof cont - 1) == 0)
      ludo__net_conn_flush(hc->nc);
  }
  hc->body_end_ms = 0;
  if (has_body) {
    uint64_t n = p->content_length != ULLONG_MAX ? p->content_length
                                                 : hc->o.max_body_bytes;
    hc->body_end_ms = uv_now(hc->core->loop) + hc->o.body_timeout_ms +
                      n * 1000u / MIN_BODY_BYTES_PER_S;
  }
  timer(hc, has_body ? hc->o.body_timeout_ms : 0);
  return 0;
}

/* The wait for the next bytes of a body: a gap, and no later than the
 * whole body's end. 0: that end has passed. */
static uint32_t body_wait(const ludo__http_conn_t *hc) {
  uint64_t now = uv_now(hc->core->loop);
  if (hc->body_end_ms == 0) return hc->o.body_timeout_ms;
  if (now >= hc->body_end_ms) return 0;
  return hc->body_end_ms - now < hc->o.body_timeout_ms
             ? (uint32_t)(hc->body_end_ms - now)
             : hc->o.body_timeout_ms;
}

/* Hands a complete request to the handler. Returns 1 when the handler
 * answered it at once (the next request is then parsed from the loop:
 * see parse_in), 0 when it holds it. */
static int dispatch(ludo__http_conn_t *hc, ludo__http_req_t *r) {
  unsigned held = hc->waiting;
  r->state = RQ_WAITING;
  enqueue(hc, r);
  hc->waiting++;
  if (r->upgrade)
    hc->upgrade_pending = 1; /* keeps what follows for the new protocol */
  else if (!r->keep_alive)
    hc->stop = 1;
  timer(hc, 0);
  call_request(hc, r);
  return hc->waiting == held;
}

/* 1 when the n bytes at p (the parser's latest piece of a request head)
 * hold a LF not after a CR: http-parser 2.9 takes bare LFs as line ends,
 * which RFC 9112 2.2 leaves to the server; a proxy in front may not. */
static int bare_lf(ludo__http_conn_t *hc, const char *p, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    if (p[i] == '\n' && (i > 0 ? p[i - 1] : hc->head_prev) != '\r')
      return 1;
  }
  if (n > 0) hc->head_prev = p[n - 1];
  return 0;
}

/* Runs the parser over `p`/`n` until it consumed everything, a request is
 * complete (*done), or an error was answered. Returns the bytes consumed. */
static size_t execute(ludo__http_conn_t *hc, const char *p, size_t n,
                      ludo__http_req_t **done) {
  size_t off = 0;
  *done = NULL;
  while (off < n && can_parse(hc)) {
    int in_headers = hc->cur == NULL || !hc->cur->hdrs_done;
    enum http_errno err;
    size_t k;
    hc->event = EV_NONE;
    hc->fail_status = 0;
    k = http_parser_execute(&hc->parser, &settings, p + off, n - off);
    if (in_headers && bare_lf(hc, p + off, k)) {
      fail(hc, 400, "a line of the request head ends with a bare LF");
      return off + k;
    }
    off += k;
    if (in_headers && hc->cur) hc->hdr_bytes += k;
    err = HTTP_PARSER_ERRNO(&hc->parser);
    if (err == HPE_PAUSED) {
      http_parser_pause(&hc->parser, 0);
      if (hc->event == EV_HEADERS) {
        if (headers_done(hc) != 0) return off;
        continue;
      }
      *done = hc->cur;
      hc->cur = NULL;
      return off;
    }
    if (err != HPE_OK) {
      if (hc->fail_status)
        fail(hc, hc->fail_status, hc->fail_msg);
      else
        fail(hc, err == HPE_HEADER_OVERFLOW ? 431 : 400,
             http_errno_description(err));
      return off;
    }
    if (hc->cur && !hc->cur->hdrs_done &&
        hc->hdr_bytes > hc->o.max_header_bytes) {
      fail(hc, 431, "request line and header fields larger than the limit");
      return off;
    }
    if (k == 0) break;
  }
  return off;
}

/* Keeps bytes the parser cannot take yet. */
static void stash(ludo__http_conn_t *hc, const char *p, size_t n) {
  if (hc->stop || hc->closing || n == 0) return;
  if (ludo__buf_add(&hc->in, p, n) != 0) {
    close_conn(hc, 1);
    return;
  }
  input_pause(hc);
}

/* Parses what waits in `in`, as far as the handler lets it. After a
 * request the handler answered at once (a health check, the schema) it
 * stops: the answer posted the parse of the next to the loop, so a
 * connection's pipelined requests take turns with the loop's other work
 * instead of holding it for as many requests as its bytes hold. */
static void parse_in(ludo__http_conn_t *hc) {
  while (can_parse(hc) && hc->in_off < hc->in.len) {
    ludo__http_req_t *done;
    size_t k = execute(hc, hc->in.p + hc->in_off, hc->in.len - hc->in_off,
                       &done);
    hc->in_off += k;
    if (done && dispatch(hc, done)) break;
    if (!done && k == 0) break;
  }
  if (hc->switched || hc->dead) return;
  if (hc->stop || hc->in_off == hc->in.len) {
    hc->in.len = hc->in_off = 0;
    if (hc->in.cap > hc->in_max) ludo__buf_free(&hc->in);
  } else if (hc->in_off > 0) {
    memmove(hc->in.p, hc->in.p + hc->in_off, hc->in.len - hc->in_off);
    hc->in.len -= hc->in_off;
    hc->in_off = 0;
  }
  input_pause(hc);
}

/* Parses freshly read bytes (nothing waits in `in`). */
static void parse_data(ludo__http_conn_t *hc, const char *p, size_t n) {
  while (n > 0 && can_parse(hc)) {
    ludo__http_req_t *done;
    size_t k = execute(hc, p, n, &done);
    p += k;
    n -= k;
    if (done) {
      /* The rest waits in `in` while the handler runs: an upgrade hands
       * it over from there; the next request is parsed from the loop
       * (see parse_in). */
      stash(hc, p, n);
      if (!dispatch(hc, done)) parse_in(hc);
      return;
    }
    if (k == 0) break;
  }
  stash(hc, p, n);
}

static void resume_task(ludo__task_t *t) {
  ludo__http_conn_t *hc =
      (ludo__http_conn_t *)((char *)t - offsetof(ludo__http_conn_t, resume));
  enter(hc);
  parse_in(hc);
  leave(hc);
}

/* ---- the conn's callbacks --------------------------------------------- */

static void http_read(void *p, const char *data, size_t len) {
  ludo__http_conn_t *hc = p;
  if (hc->stop || hc->closing) return; /* past the last request */
  enter(hc);
  if (hc->cur && hc->cur->hdrs_done) {
    uint32_t ms = body_wait(hc);
    if (ms == 0) {
      fail(hc, 408, "the request body came too slowly");
      leave(hc);
      return;
    }
    timer(hc, ms);
  }
  if (hc->in.len > hc->in_off || !can_parse(hc)) {
    stash(hc, data, len);
    parse_in(hc);
  } else {
    parse_data(hc, data, len);
  }
  leave(hc);
}

/* The peer closed its side: whatever it sent is void (see http.h). */
static void http_eof(void *p) {
  ludo__http_conn_t *hc = p;
  enter(hc);
  close_conn(hc, 0);
  leave(hc);
}

static void http_timeout(void *p) {
  ludo__http_conn_t *hc = p;
  enter(hc);
  if (hc->cur && !hc->cur->hdrs_done)
    fail(hc, 408, "timed out waiting for the request headers");
  else if (hc->cur)
    fail(hc, 408, "timed out waiting for the request body");
  else if (idle(hc))
    close_quietly(hc);
  leave(hc);
}

static void http_written(void *p) {
  ludo__http_conn_t *hc = p;
  if (idle(hc) && !hc->closing) timer(hc, hc->o.idle_timeout_ms);
  maybe_resume(hc); /* the peer read enough: parsing goes on */
}

static void http_shutdown(void *p) {
  ludo__http_conn_t *hc = p;
  enter(hc);
  if (idle(hc))
    close_quietly(hc);
  else
    close_conn(hc, 0);
  leave(hc);
}

/* The connection is gone: the handler hears of every request it holds. */
static void http_closed(void *p) {
  ludo__http_conn_t *hc = p;
  ludo__http_req_t *r;
  enter(hc);
  hc->nc = NULL;
  hc->dead = 1;
  hc->closing = 1;
  ludo__core_unpost(hc->core, &hc->resume);
  for (r = hc->head; r; r = r->next) {
    if (r->switch_fn) { /* accepted, never switched: tell the WebSocket */
      ludo__http_switch_cb fn = r->switch_fn;
      r->switch_fn = NULL;
      fn(r->switch_ud, NULL, NULL, 0);
      continue;
    }
    if (r->state != RQ_WAITING) continue;
    r->state = RQ_ABORTED;
    hc->waiting--;
    if (hc->h.abort) {
      hc->core->in_callback++;
      hc->h.abort(hc->ud, r);
      hc->core->in_callback--;
    }
  }
  leave(hc);
}

static const ludo__net_proto_t http_proto = {
    http_read, http_eof, http_timeout, http_written, http_shutdown,
    http_closed};

int ludo__http_conn_new(ludo__core_t *core, ludo__net_conn_t *nc,
                        const ludo__http_options_t *o,
                        const ludo__http_handler_t *h, void *ud,
                        ludo__http_conn_t **out) {
  ludo__http_conn_t *hc;
  *out = NULL;
  if (h == NULL || h->request == NULL) return LUDO_EINVAL;
  hc = ludo__calloc(&core->heap, sizeof *hc);
  if (hc == NULL) return LUDO_ENOMEM;
  pthread_once(&settings_once, settings_fill);
  hc->core = core;
  hc->heap = &core->heap;
  hc->nc = nc;
  ludo__http_options_fill(&hc->o, o);
  hc->h = *h;
  hc->ud = ud;
  http_parser_init(&hc->parser, HTTP_REQUEST);
  hc->parser.data = hc;
  ludo__buf_init(&hc->in, ludo__alloc_fn, hc->heap);
  hc->in_max = hc->o.max_header_bytes + 1024 > IN_MIN
                   ? hc->o.max_header_bytes + 1024
                   : IN_MIN;
  hc->resume.fn = resume_task;
  ludo__net_conn_set_proto(nc, &http_proto, hc);
  timer(hc, hc->o.idle_timeout_ms);
  *out = hc;
  return 0;
}

/* ---- answers ---------------------------------------------------------- */

/* Turns `req` into an answered request and writes what can be written. */
static void answered(ludo__http_req_t *req) {
  ludo__http_conn_t *hc = req->hc;
  req->state = RQ_ANSWERED;
  hc->waiting--;
  enter(hc);
  write_answers(hc);
  maybe_resume(hc);
  leave(hc);
}

int ludo__http_respond(ludo__http_req_t *req, int status,
                       const ludo__http_header_t *h, size_t n,
                       const void *body, size_t len) {
  ludo__http_conn_t *hc;
  unsigned flags = 0;
  int rc;
  if (req == NULL || (len > 0 && body == NULL)) return LUDO_EINVAL;
  hc = req->hc;
  if (req->state == RQ_ABORTED || hc->dead || hc->closing || hc->nc == NULL)
    return LUDO_ECLOSED;
  if (req->state != RQ_WAITING) return LUDO_EINVAL;
  rc = ludo__response_check(status, h, n, len);
  if (rc != 0) return rc;
  req->close_after = !req->keep_alive || req->upgrade || req->close_asked;
  if (req->close_after)
    flags |= LUDO__RESPONSE_CLOSE;
  else if (req->version == 10)
    flags |= LUDO__RESPONSE_KEEP;
  if (status == 204 || status == 304) flags |= LUDO__RESPONSE_NO_LENGTH;
  if (ludo__response_head(&req->answer, status, h, n, len, flags) != 0 ||
      (!req->head && len > 0 && ludo__buf_add(&req->answer, body, len))) {
    ludo__buf_free(&req->answer);
    return LUDO_ENOMEM;
  }
  answered(req);
  return 0;
}

void ludo__http_req_close_after(ludo__http_req_t *req) {
  if (req == NULL || req->state != RQ_WAITING) return;
  req->close_asked = 1;
  req->hc->stop = 1; /* parse_in drops what waits in `in` */
}

int ludo__http_switch(ludo__http_req_t *req, const char *head, size_t len,
                      ludo__http_switch_cb fn, void *ud) {
  ludo__http_conn_t *hc;
  if (req == NULL || head == NULL || fn == NULL) return LUDO_EINVAL;
  hc = req->hc;
  if (req->state == RQ_ABORTED || hc->dead || hc->closing || hc->nc == NULL)
    return LUDO_ECLOSED;
  if (req->state != RQ_WAITING || !req->upgrade) return LUDO_EINVAL;
  if (ludo__buf_add(&req->answer, head, len) != 0) {
    ludo__buf_free(&req->answer);
    return LUDO_ENOMEM;
  }
  req->switch_fn = fn;
  req->switch_ud = ud;
  answered(req);
  return 0;
}
