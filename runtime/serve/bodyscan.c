/* bodyscan.c - the fields of a POST /step or POST /reset body found in one
 * pass of the streaming JSON parser (base/jsonparse.h), without building
 * a tree: a step's action goes to the session as the bytes the client
 * sent, a reset's body as its options, and only the small fields
 * (timeout_s, request_id, session_id, seed, episode_id) are decoded. The
 * session decodes the action under its own memory cap and CPU budget; a
 * tree of it here would be built on the worker's loop under neither
 * (docs/protocol.md, "Limits").
 *
 * Only the common shape is accepted, and only when every checked field
 * is valid; anything else, valid or not, is left to routes.c's jansson
 * path, which gives the answers it gave before this scan existed (its
 * errors, its choice among repeated keys). So the scan never accepts a
 * text jansson refuses: an object key holding \u0000 (which jansson
 * refuses even with JSON_ALLOW_NUL) is not accepted; every other
 * difference between the two parsers is a text the strict base parser
 * refuses (it is the stricter one). */
#include "serve/internal.h"

#include <string.h>

#include "base/jsonparse.h"
#include "base/utf8.h"

/* The member of the body object being read. */
enum { M_OTHER, M_ACTION, M_TIMEOUT, M_REQUEST_ID, M_SESSION_ID, M_SEED,
       M_EPISODE_ID, M_COUNT };

typedef struct {
  sv_body_t *b;
  int reset;           /* a reset's body: its options */
  int depth;           /* 1 inside the body object, deeper below */
  int member;          /* M_*, at depth 1 */
  int seen[M_COUNT];   /* the checked members met so far */
  size_t off;          /* where the parser is (cb.offset) */
  ludo__buf_t scratch; /* for strings with escapes */
} scan_t;

/* Every callback returns 1 to stop the parse: not the common shape, or
 * a field the jansson path must refuse. */

static int member_of(const scan_t *sc, const char *s, size_t n) {
  static const struct {
    const char *name;
    int member, reset; /* reset: -1 both, 0 a step's, 1 a reset's */
  } names[] = {
      {"action", M_ACTION, 0},         {"timeout_s", M_TIMEOUT, 0},
      {"request_id", M_REQUEST_ID, 0}, {"session_id", M_SESSION_ID, -1},
      {"seed", M_SEED, 1},             {"episode_id", M_EPISODE_ID, 1},
  };
  size_t i;
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((names[i].reset < 0 || names[i].reset == sc->reset) &&
        strlen(names[i].name) == n && memcmp(names[i].name, s, n) == 0)
      return names[i].member;
  return M_OTHER;
}

static int scan_key(void *ud, const char *s, size_t n) {
  scan_t *sc = ud;
  if (memchr(s, '\0', n) != NULL) return 1; /* jansson refuses it */
  if (sc->depth != 1) return 0;
  sc->member = member_of(sc, s, n);
  if (sc->member == M_OTHER) return 0;
  /* a repeated field: jansson's choice of the last is the slow path's;
   * a session_id in a reset's body is taken out of the options there */
  if (sc->seen[sc->member] || (sc->reset && sc->member == M_SESSION_ID))
    return 1;
  sc->seen[sc->member] = 1;
  return 0;
}

/* A field's value that is null: none, as absent (the action: refused). */
static int scan_null(void *ud) {
  scan_t *sc = ud;
  return sc->depth == 1 && sc->member == M_ACTION;
}

static int scan_integer(void *ud, int64_t v) {
  scan_t *sc = ud;
  if (sc->depth != 1) return 0;
  if (sc->member == M_TIMEOUT) {
    sc->b->timeout_s = (double)v;
    return v <= 0;
  }
  if (sc->member == M_SEED) return v < 0;
  return sc->member != M_OTHER;
}

static int scan_real(void *ud, double v) {
  scan_t *sc = ud;
  if (sc->depth != 1) return 0;
  if (sc->member == M_TIMEOUT) {
    sc->b->timeout_s = v;
    return !(v > 0);
  }
  return sc->member != M_OTHER;
}

static int scan_boolean(void *ud, int v) {
  scan_t *sc = ud;
  (void)v;
  return sc->depth == 1 && sc->member != M_OTHER;
}

static int scan_string(void *ud, const char *s, size_t n) {
  scan_t *sc = ud;
  if (sc->depth != 1) return 0;
  switch (sc->member) {
  case M_OTHER:
    return 0;
  case M_REQUEST_ID:
  case M_EPISODE_ID:
    return ludo__utf8_chars(s, n) > 255;
  case M_SESSION_ID:
    if (n >= sizeof sc->b->session_id || memchr(s, '\0', n) != NULL)
      return 1; /* names no session: the slow path says so */
    memcpy(sc->b->session_id, s, n);
    sc->b->session_id[n] = '\0';
    sc->b->has_session_id = 1;
    return 0;
  default:
    return 1;
  }
}

static int scan_begin_object(void *ud) {
  scan_t *sc = ud;
  if (sc->depth == 1) {
    if (sc->member == M_ACTION) sc->b->action_at = sc->off;
    else if (sc->member != M_OTHER) return 1;
  }
  sc->depth++;
  return 0;
}

static int scan_end_object(void *ud) {
  scan_t *sc = ud;
  sc->depth--;
  if (sc->depth == 1 && sc->member == M_ACTION) /* the action ends here */
    sc->b->action_len = sc->off + 1 - sc->b->action_at;
  return 0;
}

static int scan_begin_array(void *ud) {
  scan_t *sc = ud;
  if (sc->depth == 0 || (sc->depth == 1 && sc->member != M_OTHER))
    return 1; /* the body, or a field that must not be one */
  sc->depth++;
  return 0;
}

static int scan_end_array(void *ud) {
  ((scan_t *)ud)->depth--;
  return 0;
}

static char *scan_scratch(void *ud, size_t n) {
  scan_t *sc = ud;
  sc->scratch.len = 0;
  return ludo__buf_reserve(&sc->scratch, n) == 0 ? sc->scratch.p : NULL;
}

int sv_body_scan(ludo__alloc_t *heap, const char *text, size_t len,
                 int reset, sv_body_t *b) {
  ludo__jsonparse_cb_t cb = {
      scan_null,         scan_boolean,    scan_integer,
      scan_real,         scan_string,     scan_key,
      scan_begin_object, scan_end_object, scan_begin_array,
      scan_end_array,    scan_scratch,    NULL,
      NULL,              NULL};
  ludo__jsonparse_err_t err;
  scan_t sc;
  int rc;
  memset(b, 0, sizeof *b);
  memset(&sc, 0, sizeof sc);
  sc.b = b;
  sc.reset = reset;
  cb.offset = &sc.off;
  if (len == 0 || text[0] != '{') return 0; /* not an object, or spaces */
  ludo__buf_init(&sc.scratch, ludo__alloc_fn, heap);
  rc = ludo__jsonparse_run(text, len, -1, &cb, &sc, &err);
  ludo__buf_free(&sc.scratch);
  return rc == 0 && (reset || sc.seen[M_ACTION]);
}
