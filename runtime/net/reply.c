/* reply.c - an HTTP/1.1 response read by a client (see reply.h).
 *
 * The parser's callbacks store the fields as NUL-terminated pairs in one
 * buffer and the body in another. A 101 response has no body: its head
 * callback returns 2 (no body, no other response on this connection) and
 * the message callback pauses the parser, so the execute call stops right
 * after the head and the bytes after it are the caller's. */
#include "net/reply.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static http_parser_settings settings;
static int settings_ready;

#define R(p) ((ludo__reply_t *)(p)->data)

static int fail(ludo__reply_t *r, int code, const char *msg) {
  r->failed = code;
  snprintf(r->err, sizeof r->err, "%s", msg);
  return -1;
}

/* Counts head bytes against the bound. */
static int head_bytes(ludo__reply_t *r, size_t n) {
  r->head_bytes += n;
  if (r->head_bytes > r->max_head)
    return fail(r, LUDO_ETOOBIG, "the response's head is too long");
  return 0;
}

static int on_status(http_parser *p, const char *at, size_t n) {
  (void)at;
  return head_bytes(R(p), n);
}

/* Ends the string being written in `text` (a value loses its trailing
 * whitespace). */
static int end_string(ludo__reply_t *r, int value) {
  if (value)
    while (r->text.len > 0 && (r->text.p[r->text.len - 1] == ' ' ||
                                r->text.p[r->text.len - 1] == '\t'))
      r->text.len--;
  if (ludo__buf_addc(&r->text, '\0'))
    return fail(r, LUDO_ENOMEM, "out of memory");
  return 0;
}

static int on_field(http_parser *p, const char *at, size_t n) {
  ludo__reply_t *r = R(p);
  if (head_bytes(r, n)) return -1;
  if (r->nfields == 0 || r->in_value) { /* a new field */
    if (r->nfields > 0 && end_string(r, 1)) return -1;
    if (r->nfields == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 16;
      size_t *no = ludo__realloc(r->heap, r->offs, r->cap * 2 * sizeof *no,
                                 ncap * 2 * sizeof *no);
      if (no == NULL) return fail(r, LUDO_ENOMEM, "out of memory");
      r->offs = no;
      r->cap = ncap;
    }
    r->offs[2 * r->nfields] = r->text.len;
    r->offs[2 * r->nfields + 1] = (size_t)-1;
    r->nfields++;
    r->in_value = 0;
  }
  if (ludo__buf_add(&r->text, at, n))
    return fail(r, LUDO_ENOMEM, "out of memory");
  return 0;
}

static int on_value(http_parser *p, const char *at, size_t n) {
  ludo__reply_t *r = R(p);
  if (head_bytes(r, n)) return -1;
  if (r->nfields == 0) return fail(r, LUDO_EPROTO, "a value without a name");
  if (!r->in_value) { /* the name is complete */
    if (end_string(r, 0)) return -1;
    r->offs[2 * r->nfields - 1] = r->text.len;
    r->in_value = 1;
  }
  if (ludo__buf_add(&r->text, at, n))
    return fail(r, LUDO_ENOMEM, "out of memory");
  return 0;
}

static int on_headers(http_parser *p) {
  ludo__reply_t *r = R(p);
  if (r->nfields > 0 && !r->in_value) { /* a field with an empty value */
    if (end_string(r, 0)) return -1;
    r->offs[2 * r->nfields - 1] = r->text.len;
  }
  if (r->nfields > 0 && end_string(r, 1)) return -1;
  r->head_done = 1;
  if (p->status_code == 101) return 2;
  if (p->content_length != (uint64_t)-1 && p->content_length > r->max_body)
    return fail(r, LUDO_ETOOBIG, "the response's body is too long");
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  ludo__reply_t *r = R(p);
  if (r->body.len + n > r->max_body)
    return fail(r, LUDO_ETOOBIG, "the response's body is too long");
  if (ludo__buf_add(&r->body, at, n))
    return fail(r, LUDO_ENOMEM, "out of memory");
  return 0;
}

static int on_complete(http_parser *p) {
  R(p)->done = 1;
  http_parser_pause(p, 1);
  return 0;
}

void ludo__reply_init(ludo__reply_t *r, ludo__alloc_t *heap, size_t max_head,
                      size_t max_body) {
  if (!settings_ready) {
    http_parser_settings_init(&settings);
    settings.on_status = on_status;
    settings.on_header_field = on_field;
    settings.on_header_value = on_value;
    settings.on_headers_complete = on_headers;
    settings.on_body = on_body;
    settings.on_message_complete = on_complete;
    settings_ready = 1;
  }
  memset(r, 0, sizeof *r);
  http_parser_init(&r->parser, HTTP_RESPONSE);
  r->parser.data = r;
  r->heap = heap;
  r->max_head = max_head;
  r->max_body = max_body;
  ludo__buf_init(&r->text, ludo__alloc_fn, heap);
  ludo__buf_init(&r->body, ludo__alloc_fn, heap);
}

void ludo__reply_free(ludo__reply_t *r) {
  ludo__buf_free(&r->text);
  ludo__buf_free(&r->body);
  if (r->offs)
    ludo__free(r->heap, r->offs, r->cap * 2 * sizeof *r->offs);
  r->offs = NULL;
  r->cap = r->nfields = 0;
}

int ludo__reply_feed(ludo__reply_t *r, const char *data, size_t len,
                     size_t *used) {
  size_t n;
  enum http_errno e;
  *used = 0;
  if (r->failed) return r->failed;
  if (r->done) return 1;
  n = http_parser_execute(&r->parser, &settings, data, len);
  *used = n;
  if (r->failed) return r->failed;
  if (r->done) return 1;
  e = HTTP_PARSER_ERRNO(&r->parser);
  if (e != HPE_OK) {
    snprintf(r->err, sizeof r->err, "not an HTTP response: %s",
             http_errno_description(e));
    r->failed = LUDO_EPROTO;
    return r->failed;
  }
  return 0;
}

int ludo__reply_eof(ludo__reply_t *r) {
  if (r->failed) return r->failed;
  if (r->done) return 1;
  if (r->head_done) {
    http_parser_execute(&r->parser, &settings, NULL, 0);
    if (r->done) return 1;
  }
  snprintf(r->err, sizeof r->err, "the connection ended inside the %s",
           r->head_done ? "response's body" : "response");
  r->failed = LUDO_EPROTO;
  return r->failed;
}

int ludo__reply_status(const ludo__reply_t *r) {
  return r->head_done ? (int)r->parser.status_code : 0;
}

size_t ludo__reply_nheaders(const ludo__reply_t *r) {
  return r->head_done ? r->nfields : 0;
}

void ludo__reply_header_at(const ludo__reply_t *r, size_t i,
                           const char **name, const char **value) {
  *name = r->text.p + r->offs[2 * i];
  *value = r->text.p + r->offs[2 * i + 1];
}

const char *ludo__reply_header(const ludo__reply_t *r, const char *name) {
  size_t i, n = ludo__reply_nheaders(r);
  for (i = 0; i < n; i++) {
    const char *k, *v;
    ludo__reply_header_at(r, i, &k, &v);
    if (strcasecmp(k, name) == 0) return v;
  }
  return NULL;
}

const char *ludo__reply_body(const ludo__reply_t *r, size_t *len) {
  *len = r->body.len;
  return r->body.p ? r->body.p : "";
}
