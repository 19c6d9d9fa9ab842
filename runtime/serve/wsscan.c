/* wsscan.c - the fields of a /ws message found in one pass of the
 * streaming JSON parser (base/jsonparse.h), without building a tree: the
 * "type" string and the bytes of the "data" object, which go to the
 * session as they came instead of being decoded and encoded again
 * (docs/performance.md, "Server").
 *
 * Only the common shape is accepted; anything else is left to
 * wsproto.c's jansson path, which gives the same answers as before this
 * scan existed (its errors, and its choice among repeated keys). So the
 * scan must never accept a text jansson refuses: a string holding
 * \u0000 (jansson's decoder refuses it without JSON_ALLOW_NUL) is not
 * accepted; every other difference between the two parsers is a text
 * the strict base parser refuses (it is the stricter one). */
#include "serve/internal.h"

#include <stddef.h>
#include <string.h>

#include "base/jsonparse.h"

enum { MEMBER_NONE, MEMBER_TYPE, MEMBER_DATA };

typedef struct scan_s {
  sv_wsmsg_t *m;
  int depth;        /* 1 inside the message object, deeper below */
  int member;       /* the member of the message object being read */
  int seen_type, seen_data;
  size_t off;       /* where the parser is (cb.offset) */
  char scratch[256];
} scan_t;

/* Every callback returns 1 to stop the parse: not a common message. */

static int no_nul(const char *s, size_t len) {
  return memchr(s, '\0', len) == NULL;
}

static int scan_key(void *ud, const char *s, size_t len) {
  scan_t *sc = ud;
  if (!no_nul(s, len)) return 1;
  if (sc->depth != 1) return 0;
  if (len == 4 && memcmp(s, "type", 4) == 0) {
    if (sc->seen_type) return 1;
    sc->seen_type = 1;
    sc->member = MEMBER_TYPE;
    return 0;
  }
  if (len == 4 && memcmp(s, "data", 4) == 0) {
    if (sc->seen_data) return 1;
    sc->seen_data = 1;
    sc->m->has_data = 1;
    sc->member = MEMBER_DATA;
    return 0;
  }
  return 1; /* another member: the slow path names it */
}

static int scan_string(void *ud, const char *s, size_t len) {
  scan_t *sc = ud;
  if (!no_nul(s, len)) return 1;
  if (sc->depth != 1) return 0;
  if (sc->member != MEMBER_TYPE || len >= sizeof sc->m->type) return 1;
  memcpy(sc->m->type, s, len);
  sc->m->type[len] = '\0';
  return 0;
}

/* A number or boolean: fine inside data, not as a member's value. */
static int scan_scalar(scan_t *sc) { return sc->depth == 1; }

static int scan_integer(void *ud, int64_t v) {
  (void)v;
  return scan_scalar(ud);
}

static int scan_real(void *ud, double v) {
  (void)v;
  return scan_scalar(ud);
}

static int scan_boolean(void *ud, int v) {
  (void)v;
  return scan_scalar(ud);
}

static int scan_null(void *ud) {
  scan_t *sc = ud;
  return sc->depth == 1 && sc->member != MEMBER_DATA; /* data: null */
}

static int scan_begin_object(void *ud) {
  scan_t *sc = ud;
  if (sc->depth == 1) {
    if (sc->member != MEMBER_DATA) return 1;
    sc->m->data_object = 1;
    sc->m->data_at = sc->off;
  }
  sc->depth++;
  return 0;
}

static int scan_end_object(void *ud) {
  scan_t *sc = ud;
  sc->depth--;
  if (sc->depth == 1) /* the data object ends here */
    sc->m->data_len = sc->off + 1 - sc->m->data_at;
  return 0;
}

static int scan_begin_array(void *ud) {
  scan_t *sc = ud;
  if (sc->depth <= 1) return 1; /* the message, type or data */
  sc->depth++;
  return 0;
}

static int scan_end_array(void *ud) {
  scan_t *sc = ud;
  sc->depth--;
  return 0;
}

static char *scan_scratch(void *ud, size_t n) {
  scan_t *sc = ud;
  return n <= sizeof sc->scratch ? sc->scratch : NULL;
}

int sv_wsmsg_scan(const char *text, size_t len, sv_wsmsg_t *m) {
  ludo__jsonparse_cb_t cb = {
      scan_null,         scan_boolean,    scan_integer,
      scan_real,         scan_string,     scan_key,
      scan_begin_object, scan_end_object, scan_begin_array,
      scan_end_array,    scan_scratch,    NULL,
      NULL,              NULL};
  ludo__jsonparse_err_t err;
  scan_t sc;
  memset(m, 0, sizeof *m);
  memset(&sc, 0, offsetof(scan_t, scratch));
  sc.m = m;
  cb.offset = &sc.off;
  if (len == 0 || text[0] != '{') return 0; /* not an object, or spaces */
  if (ludo__jsonparse_run(text, len, -1, &cb, &sc, &err) != 0) return 0;
  return sc.seen_type && m->type[0] != '\0';
}
