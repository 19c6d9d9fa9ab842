/* jsonload.c - a client's JSON text as a jansson tree, or why it is not
 * JSON, without building a tree for a text that is not. jansson finds a
 * syntax error only when it reaches it, having built everything before:
 * for a message of a million keys with a stray byte at its end, seconds
 * on the worker's loop, counted against no budget. The strict streaming
 * parser (base/jsonparse.h) reads the text first, in one pass that
 * allocates nothing but a buffer for escaped strings; only a text it
 * accepts, or one it cannot judge as jansson does (nesting past its
 * depth), goes on to jansson. Its refusals keep jansson's json_error_t
 * shape; a number beyond 64 bits or the double range keeps jansson's own
 * words ("too big integer"). Such a text is JSON all the same: the
 * callers answer it as a value out of range (docs/json.md), named by its
 * path in the text (sv_json_limit_error).
 *
 * jansson's tree costs about a microsecond of the loop for each value
 * (an object, a key and its value: two), built, used and freed, which no
 * CPU budget counts: the pass also counts the values and refuses a text
 * of more than SV_JSON_MAX_VALUES, which would hold the worker's other
 * clients for longer than about 0.1-0.2 s. The callers answer that as a
 * value error too (it is JSON). POST /step and /ws messages of the common
 * shapes never come here: their big part goes to the session as sent
 * (bodyscan.c, wsscan.c), to be decoded under its caps. */
#include "serve/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonparse.h"

static char *check_scratch(void *ud, size_t n) {
  ludo__buf_t *b = ud;
  b->len = 0;
  return ludo__buf_reserve(b, n) == 0 ? b->p : NULL;
}

/* The first pass: the scratch buffer and the count of values. */
typedef struct {
  ludo__buf_t scratch;
  size_t values;
} check_t;

static char *count_scratch(void *ud, size_t n) {
  return check_scratch(&((check_t *)ud)->scratch, n);
}

/* One more value. The pass reads the whole text even past the limit: a
 * text that is not JSON is answered as such, whatever its size. */
static int count_value(void *ud) {
  ((check_t *)ud)->values++;
  return 0;
}
static int count_bool(void *ud, int v) { (void)v; return count_value(ud); }
static int count_int(void *ud, int64_t v) { (void)v; return count_value(ud); }
static int count_real(void *ud, double v) { (void)v; return count_value(ud); }
static int count_str(void *ud, const char *s, size_t n) {
  (void)s;
  (void)n;
  return count_value(ud);
}

/* The message of a text past the limit. */
#define TOO_MANY_VALUES_TEXT(n)                                              \
  "more than " #n " JSON values: the most ludo serve decodes outside a "  \
  "session (docs/protocol.md, \"Limits\")"
#define TOO_MANY_VALUES_(n) TOO_MANY_VALUES_TEXT(n)
#define TOO_MANY_VALUES TOO_MANY_VALUES_(SV_JSON_MAX_VALUES)

/* jansson's words for a number out of range, with the parser's token. */
static void range_text(const ludo__jsonparse_err_t *pe, const char *text,
                       size_t len, json_error_t *err) {
  const char *near = strstr(pe->msg, " near ");
  const char *what = "real number overflow";
  if (strncmp(pe->msg, "integer", 7) == 0)
    what = pe->offset < len && text[pe->offset] == '-'
               ? "too big negative integer" : "too big integer";
  snprintf(err->text, sizeof err->text, "%s%s", what, near ? near : "");
}

/* 1 when `text` is surely not JSON for jansson either (err filled in). */
static int refused(ludo__serve_t *sv, const char *text, size_t len,
                   json_error_t *err) {
  ludo__jsonparse_cb_t cb;
  ludo__jsonparse_err_t pe;
  check_t ck;
  int rc;
  memset(&cb, 0, sizeof cb);
  cb.null_value = count_value;
  cb.boolean = count_bool;
  cb.integer = count_int;
  cb.real = count_real;
  cb.string = count_str;
  cb.begin_object = count_value;
  cb.begin_array = count_value;
  cb.scratch = count_scratch;
  ck.values = 0;
  memset(&pe, 0, sizeof pe); /* no place, for a text past the limit */
  ludo__buf_init(&ck.scratch, ludo__alloc_fn, &sv->core->heap);
  rc = ludo__jsonparse_run(text, len, -1, &cb, &ck, &pe);
  ludo__buf_free(&ck.scratch);
  if (rc == 0 ? ck.values <= SV_JSON_MAX_VALUES
              : pe.kind != LUDO__JSONPARSE_ESYNTAX &&
                    pe.kind != LUDO__JSONPARSE_ERANGE)
    return 0;
  memset(err, 0, sizeof *err);
  err->line = (int)pe.line;
  err->column = (int)pe.column;
  err->position = (int)pe.offset;
  snprintf(err->source, sizeof err->source, "<buffer>");
  if (rc == 0)
    snprintf(err->text, sizeof err->text, "%s", TOO_MANY_VALUES);
  else if (pe.kind == LUDO__JSONPARSE_ERANGE)
    range_text(&pe, text, len, err);
  else
    snprintf(err->text, sizeof err->text, "%s", pe.msg);
  return 1;
}

json_t *sv_json_load(ludo__serve_t *sv, const char *text, size_t len,
                     json_error_t *err) {
  if (refused(sv, text, len, err)) return NULL;
  return json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, err);
}

/* ---- a number out of range: where it is -------------------------------- */

#define PATH_MAX_DEPTH 32 /* levels a path names; deeper ones are cut */

/* The path to the value being read: one frame per open container. */
typedef struct {
  struct {
    int array;          /* an array: `count` values so far */
    size_t count;
    char key[64];       /* an object: the last key (cut to fit) */
    size_t key_len;
  } f[PATH_MAX_DEPTH];
  int depth;            /* open containers (may pass PATH_MAX_DEPTH) */
  size_t values;        /* values so far (SV_JSON_MAX_VALUES) */
  ludo__buf_t scratch;  /* for strings with escapes */
} path_t;

static char *path_scratch(void *ud, size_t n) {
  return check_scratch(&((path_t *)ud)->scratch, n);
}

/* A value starts in the innermost container: an array counts it. */
static int path_value(void *ud) {
  path_t *p = ud;
  if (p->depth > 0 && p->depth <= PATH_MAX_DEPTH &&
      p->f[p->depth - 1].array)
    p->f[p->depth - 1].count++;
  p->values++; /* the whole text is read, as refused() reads it */
  return 0;
}
static int path_null(void *ud) { return path_value(ud); }
static int path_bool(void *ud, int v) { (void)v; return path_value(ud); }
static int path_int(void *ud, int64_t v) { (void)v; return path_value(ud); }
static int path_real(void *ud, double v) { (void)v; return path_value(ud); }
static int path_str(void *ud, const char *s, size_t n) {
  (void)s;
  (void)n;
  return path_value(ud);
}

static int path_key(void *ud, const char *s, size_t n) {
  path_t *p = ud;
  if (p->depth > 0 && p->depth <= PATH_MAX_DEPTH) {
    size_t k = n < sizeof p->f[0].key ? n : sizeof p->f[0].key;
    memcpy(p->f[p->depth - 1].key, s, k);
    p->f[p->depth - 1].key_len = k;
  }
  return 0;
}

static int path_open(path_t *p, int array) {
  if (path_value(p)) return 1;
  if (p->depth < PATH_MAX_DEPTH) {
    p->f[p->depth].array = array;
    p->f[p->depth].count = 0;
    p->f[p->depth].key_len = 0;
  }
  p->depth++;
  return 0;
}
static int path_obj(void *ud) { return path_open(ud, 0); }
static int path_arr(void *ud) { return path_open(ud, 1); }
static int path_close(void *ud) {
  ((path_t *)ud)->depth--;
  return 0;
}

/* The loc of the number the parse stopped at: keys and indexes from the
 * top, after `prefix` (NULL: none). New reference. */
static json_t *path_loc(const path_t *p, const char *prefix) {
  json_t *loc = json_array();
  int i, n = p->depth < PATH_MAX_DEPTH ? p->depth : PATH_MAX_DEPTH;
  if (prefix) json_array_append_new(loc, json_string(prefix));
  for (i = 0; i < n; i++) {
    if (p->f[i].array) /* the number is the value counted last */
      json_array_append_new(loc, json_integer(
                                     (json_int_t)p->f[i].count - 1));
    else
      json_array_append_new(loc, sv_jstr(p->f[i].key, p->f[i].key_len));
  }
  return loc;
}

json_t *sv_json_limit_error(ludo__serve_t *sv, const char *text, size_t len,
                            const char *prefix) {
  ludo__jsonparse_cb_t cb;
  ludo__jsonparse_err_t pe;
  path_t *p = ludo__calloc(&sv->core->heap, sizeof *p);
  json_t *entry = NULL;
  int rc;
  if (p == NULL) return NULL;
  memset(&cb, 0, sizeof cb);
  cb.null_value = path_null;
  cb.boolean = path_bool;
  cb.integer = path_int;
  cb.real = path_real;
  cb.string = path_str;
  cb.key = path_key;
  cb.begin_object = path_obj;
  cb.begin_array = path_arr;
  cb.end_object = path_close;
  cb.end_array = path_close;
  cb.scratch = path_scratch;
  ludo__buf_init(&p->scratch, ludo__alloc_fn, &sv->core->heap);
  rc = ludo__jsonparse_run(text, len, -1, &cb, p, &pe);
  ludo__buf_free(&p->scratch);
  if (rc == 0 && p->values > SV_JSON_MAX_VALUES) {
    entry = json_pack("{s:s,s:o,s:s,s:n}", "type", "value_error", "loc",
                      prefix ? json_pack("[s]", prefix) : json_array(),
                      "msg", TOO_MANY_VALUES, "input");
  } else if (rc != 0 && pe.kind == LUDO__JSONPARSE_ERANGE) {
    int integer = strncmp(pe.msg, "integer", 7) == 0;
    path_value(p); /* the number that stopped the parse had no callback */
    entry = json_pack(
        "{s:s,s:o,s:s,s:n}", "type", "value_error", "loc",
        path_loc(p, prefix), "msg",
        integer ? "integer out of range: at most 64 bits (-2^63 to "
                  "2^63-1) are taken"
                : "number out of range: beyond the range of a double",
        "input");
  }
  ludo__free(&sv->core->heap, p, sizeof *p);
  return entry;
}
