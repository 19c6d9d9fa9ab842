/* jsonraw.h - the raw text of the members of a JSON object: a strict parse
 * (base/jsonparse.h) that hands back where each wanted member's value
 * lies in the input, so a caller can pass a value on byte for byte (a
 * server's result inside a reply frame, say) without decoding and encoding
 * it again. No I/O; the only memory used is the caller's scratch buffer
 * (for strings with escapes). */
#ifndef LUDO_BASE_JSONRAW_H
#define LUDO_BASE_JSONRAW_H

#include <stddef.h>

#include "base/buf.h"
#include "base/jsonparse.h"

/* One member looked for: its key (NUL-terminated, given by the caller),
 * and where its value lies in the input (text NULL when it is absent). */
typedef struct ludo__jsonraw_s {
  const char *key;
  const char *text;  /* borrowed from the input; NULL: no such member */
  size_t len;
} ludo__jsonraw_t;

/* Parses `s`/`len` (borrowed) as one JSON text, which must be an object
 * nested at most `maxdepth` deep (as ludo__jsonparse_run), and fills in
 * the text of each of the `n` members of `m` found at its top level (a
 * key given twice: the last one, as decoders keep). Keys are compared
 * after unescaping, which uses `scratch` (the caller's buffer: it may
 * grow; the caller frees it). Returns 0; LUDO_EPARSE for malformed JSON
 * (`err` says what and where), LUDO_EINVAL when the text is JSON but not
 * an object (err->msg says so), or LUDO_ENOMEM (the scratch buffer could
 * not grow). */
int ludo__jsonraw_members(const char *s, size_t len, int maxdepth,
                          ludo__jsonraw_t *m, size_t n, ludo__buf_t *scratch,
                          ludo__jsonparse_err_t *err);

/* 1 when the text of a value (as found above) is the JSON null. */
int ludo__jsonraw_is_null(const ludo__jsonraw_t *m);

/* Checks that `s`/`len` is one JSON object (nested at most `maxdepth`
 * deep). Returns 0, LUDO_EPARSE, LUDO_EINVAL or LUDO_ENOMEM as above. */
int ludo__jsonraw_object(const char *s, size_t len, int maxdepth,
                         ludo__buf_t *scratch, ludo__jsonparse_err_t *err);

#endif
