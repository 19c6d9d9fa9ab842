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
 * words ("too big integer"), which mcp.c looks for. */
#include "serve/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/jsonparse.h"

static char *check_scratch(void *ud, size_t n) {
  ludo__buf_t *b = ud;
  b->len = 0;
  return ludo__buf_reserve(b, n) == 0 ? b->p : NULL;
}

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
  ludo__buf_t scratch;
  int rc;
  memset(&cb, 0, sizeof cb);
  cb.scratch = check_scratch;
  ludo__buf_init(&scratch, ludo__alloc_fn, &sv->core->heap);
  rc = ludo__jsonparse_run(text, len, -1, &cb, &scratch, &pe);
  ludo__buf_free(&scratch);
  if (rc == 0 || (pe.kind != LUDO__JSONPARSE_ESYNTAX &&
                  pe.kind != LUDO__JSONPARSE_ERANGE))
    return 0;
  memset(err, 0, sizeof *err);
  err->line = (int)pe.line;
  err->column = (int)pe.column;
  err->position = (int)pe.offset;
  snprintf(err->source, sizeof err->source, "<buffer>");
  if (pe.kind == LUDO__JSONPARSE_ERANGE)
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
