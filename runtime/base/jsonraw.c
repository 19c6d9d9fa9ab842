/* jsonraw.c - the raw text of an object's members (see jsonraw.h).
 *
 * The parser reports, before each callback, the offset it reached
 * (cb->pos). A wanted member's value starts after its key, the ':' and the
 * whitespace around it, and ends at the offset reported with the value's
 * last event: the scalar itself, or the bracket that closes it. */
#include "base/jsonraw.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  const char *s;
  size_t len;       /* of s */
  ludo__buf_t *scratch;
  ludo__jsonraw_t *m;
  size_t n;
  size_t pos;       /* where the parser is (cb->pos) */
  int depth;        /* containers open */
  int started;      /* the first event came */
  long cur;         /* the member whose value is being read, or -1 */
  size_t start;     /* where that value starts */
} raw_t;

/* The offset where the value after a key ending at `at` starts (the
 * text may end there: the parse then fails after this key). */
static size_t value_start(const char *s, size_t len, size_t at) {
  while (at < len && (s[at] == ' ' || s[at] == '\t' || s[at] == '\n' ||
                      s[at] == '\r' || s[at] == ':'))
    at++;
  return at;
}

/* A value ended at the parser's position: records it when wanted. */
static void value_end(raw_t *r) {
  if (r->depth != 1 || r->cur < 0) return;
  r->m[r->cur].text = r->s + r->start;
  r->m[r->cur].len = r->pos - r->start;
  r->cur = -1;
}

/* Every event starts with this: the text must be an object. */
static int first(raw_t *r, int is_object) {
  if (r->started) return 0;
  r->started = 1;
  return is_object ? 0 : 1; /* positive: stops with LUDO_ECANCELED */
}

static int on_scalar(raw_t *r) {
  if (first(r, 0)) return 1;
  value_end(r);
  return 0;
}

static int r_null(void *ud) { return on_scalar(ud); }
static int r_bool(void *ud, int v) {
  (void)v;
  return on_scalar(ud);
}
static int r_int(void *ud, int64_t v) {
  (void)v;
  return on_scalar(ud);
}
static int r_real(void *ud, double v) {
  (void)v;
  return on_scalar(ud);
}
static int r_string(void *ud, const char *s, size_t n) {
  (void)s;
  (void)n;
  return on_scalar(ud);
}

static int r_key(void *ud, const char *k, size_t n) {
  raw_t *r = ud;
  size_t i;
  if (r->depth != 1) return 0;
  r->cur = -1;
  for (i = 0; i < r->n; i++) {
    if (strlen(r->m[i].key) == n && memcmp(r->m[i].key, k, n) == 0) {
      r->cur = (long)i;
      r->start = value_start(r->s, r->len, r->pos);
      break;
    }
  }
  return 0;
}

static int r_begin(raw_t *r, int is_object) {
  if (first(r, is_object)) return 1;
  r->depth++;
  return 0;
}

static int r_end(raw_t *r) {
  r->depth--;
  value_end(r);
  return 0;
}

static int r_begin_object(void *ud) { return r_begin(ud, 1); }
static int r_begin_array(void *ud) { return r_begin(ud, 0); }
static int r_end_any(void *ud) { return r_end(ud); }

/* Strings with escapes are unescaped into the caller's buffer. */
static char *r_scratch(void *ud, size_t n) {
  raw_t *r = ud;
  ludo__buf_reset(r->scratch);
  if (ludo__buf_reserve(r->scratch, n + 1) != 0) return NULL;
  return r->scratch->p;
}

int ludo__jsonraw_members(const char *s, size_t len, int maxdepth,
                          ludo__jsonraw_t *m, size_t n, ludo__buf_t *scratch,
                          ludo__jsonparse_err_t *err) {
  ludo__jsonparse_cb_t cb;
  raw_t r;
  size_t i;
  int rc;
  memset(&cb, 0, sizeof cb);
  memset(&r, 0, sizeof r);
  cb.null_value = r_null;
  cb.boolean = r_bool;
  cb.integer = r_int;
  cb.real = r_real;
  cb.string = r_string;
  cb.key = r_key;
  cb.begin_object = r_begin_object;
  cb.end_object = r_end_any;
  cb.begin_array = r_begin_array;
  cb.end_array = r_end_any;
  cb.scratch = r_scratch;
  cb.pos = &r.pos;
  r.s = s;
  r.len = len;
  r.scratch = scratch;
  r.m = m;
  r.n = n;
  r.cur = -1;
  for (i = 0; i < n; i++) {
    m[i].text = NULL;
    m[i].len = 0;
  }
  rc = ludo__jsonparse_run(s, len, maxdepth, &cb, &r, err);
  if (rc == LUDO_ECANCELED || (rc == 0 && !r.started)) {
    err->kind = LUDO__JSONPARSE_ECALLBACK;
    snprintf(err->msg, sizeof err->msg, "expected a JSON object");
    return LUDO_EINVAL;
  }
  if (rc == LUDO_ENOMEM) return LUDO_ENOMEM;
  return rc == 0 ? 0 : LUDO_EPARSE;
}

int ludo__jsonraw_is_null(const ludo__jsonraw_t *m) {
  return m->text != NULL && m->len == 4 && memcmp(m->text, "null", 4) == 0;
}

int ludo__jsonraw_object(const char *s, size_t len, int maxdepth,
                         ludo__buf_t *scratch, ludo__jsonparse_err_t *err) {
  return ludo__jsonraw_members(s, len, maxdepth, NULL, 0, scratch, err);
}
