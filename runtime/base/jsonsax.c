/* jsonsax.c - the strict JSON parser behind the public callbacks (see
 * jsonsax.h): each event goes on to the host's callback, whose nonzero
 * return stops the parse with LUDO_ECANCELED; strings holding escapes
 * are unescaped into a buffer of the parse's own. */
#include "base/jsonsax.h"

#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/jsonparse.h"

_Static_assert(sizeof(((ludo_json_error_t *)0)->msg) ==
                   sizeof(((ludo__jsonparse_err_t *)0)->msg),
               "the public error's text is the parser's");

typedef struct {
  const ludo_json_cb_t *cb;
  void *ud;
  ludo__buf_t scratch;
} sax_t;

#define CALL0(name)                                                        \
  static int on_##name(void *p) {                                          \
    sax_t *s = p;                                                          \
    return s->cb->name != NULL && s->cb->name(s->ud) != 0;                 \
  }
#define CALL1(name, type)                                                  \
  static int on_##name(void *p, type v) {                                  \
    sax_t *s = p;                                                          \
    return s->cb->name != NULL && s->cb->name(s->ud, v) != 0;              \
  }
#define CALLS(name)                                                        \
  static int on_##name(void *p, const char *v, size_t n) {                 \
    sax_t *s = p;                                                          \
    return s->cb->name != NULL && s->cb->name(s->ud, v, n) != 0;           \
  }

CALL0(null_value)
CALL1(boolean, int)
CALL1(integer, int64_t)
CALL1(real, double)
CALLS(string)
CALLS(key)
CALL0(begin_object)
CALL0(end_object)
CALL0(begin_array)
CALL0(end_array)

static char *on_scratch(void *p, size_t n) {
  sax_t *s = p;
  s->scratch.len = 0;
  return ludo__buf_reserve(&s->scratch, n) == 0 ? s->scratch.p : NULL;
}

int ludo__json_sax(const char *text, size_t len, int max_depth,
                   const ludo_json_cb_t *cb, void *ud,
                   ludo_json_error_t *err) {
  ludo__jsonparse_cb_t icb;
  ludo__jsonparse_err_t ierr;
  sax_t s;
  int rc;
  memset(&icb, 0, sizeof icb);
  icb.null_value = on_null_value;
  icb.boolean = on_boolean;
  icb.integer = on_integer;
  icb.real = on_real;
  icb.string = on_string;
  icb.key = on_key;
  icb.begin_object = on_begin_object;
  icb.end_object = on_end_object;
  icb.begin_array = on_begin_array;
  icb.end_array = on_end_array;
  icb.scratch = on_scratch;
  s.cb = cb;
  s.ud = ud;
  ludo__buf_init(&s.scratch, ludo__alloc_default, NULL);
  rc = ludo__jsonparse_run(text != NULL ? text : "", len, max_depth, &icb,
                           &s, &ierr);
  ludo__buf_free(&s.scratch);
  if (rc != 0 && err != NULL) {
    err->offset = ierr.offset;
    err->line = ierr.line;
    err->column = ierr.column;
    memcpy(err->msg, ierr.msg, sizeof err->msg);
  }
  return rc;
}
