/* jsonparse.h - a strict JSON (RFC 8259) parser: bytes in, callbacks out.
 *
 * It reads one complete JSON text and reports every value to callbacks in
 * document order, as a SAX parser does. It builds no tree, does no I/O and
 * allocates nothing: strings holding escapes are unescaped into a buffer
 * the caller lends through the `scratch` callback, and the nesting stack
 * is a bit array inside the call. A callback may longjmp out of the parse
 * (a Lua error): the parser holds no resource that would leak.
 *
 * Strictness: one value with optional whitespace around it; no trailing
 * commas, comments, leading zeros, leading '+', bare NaN/Infinity, single
 * quotes, raw control characters or invalid UTF-8 in strings, and no
 * unpaired surrogates in \u escapes. A number with '.', 'e' or 'E' is a
 * real (1.0 is real); any other is an integer and must fit in int64_t. Reals
 * are read exactly (correctly rounded); one beyond the double range is an
 * error, one below it becomes 0. Object keys may repeat: the parser reports
 * each one and leaves the choice to the callbacks. */
#ifndef LUDO_BASE_JSONPARSE_H
#define LUDO_BASE_JSONPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "ludo_defs.h"

/* The deepest nesting the parser can track; larger limits are clamped. */
#define LUDO__JSONPARSE_MAXDEPTH 1024

/* Bytes of input between two calls of the `tick` callback. */
#define LUDO__JSONPARSE_TICK 65536

/* What went wrong, in ludo__jsonparse_err_t.kind. */
typedef enum {
  LUDO__JSONPARSE_ESYNTAX = 1, /* malformed text */
  LUDO__JSONPARSE_ERANGE,      /* a number beyond int64_t or double */
  LUDO__JSONPARSE_EDEPTH,      /* nesting deeper than the caller's limit */
  LUDO__JSONPARSE_ENOMEM,      /* the scratch callback returned NULL */
  LUDO__JSONPARSE_ECALLBACK    /* a callback returned nonzero */
} ludo__jsonparse_kind_t;

/* Where and why a parse stopped. */
typedef struct ludo__jsonparse_err_s {
  int kind;          /* a ludo__jsonparse_kind_t */
  size_t offset;     /* 0-based byte offset of the offending byte */
  size_t line;       /* 1-based */
  size_t column;     /* 1-based, in bytes from the start of the line */
  char msg[112];     /* "invalid token near 'nul'", without the position */
} ludo__jsonparse_err_t;

/* The callbacks. Each returns 0 to go on, or nonzero to stop the parse
 * (the parser then returns that value when negative, a LUDO_E* code, and
 * LUDO_ECANCELED when positive). Any of them may be NULL (the event is
 * dropped), except `scratch` when a string may hold escapes. Strings and
 * keys are borrowed until the callback returns, are not NUL-terminated,
 * are valid UTF-8 and may contain NUL bytes (from \u0000). */
typedef struct ludo__jsonparse_cb_s {
  int (*null_value)(void *ud);
  int (*boolean)(void *ud, int value);
  int (*integer)(void *ud, int64_t value);
  int (*real)(void *ud, double value);
  int (*string)(void *ud, const char *s, size_t len);
  int (*key)(void *ud, const char *s, size_t len);
  int (*begin_object)(void *ud);
  int (*end_object)(void *ud);
  int (*begin_array)(void *ud);
  int (*end_array)(void *ud);
  /* Lends a buffer of at least `n` bytes, owned by the caller and used by
   * the parser until the next scratch call or the end of the parse; NULL
   * stops the parse with LUDO_ENOMEM. Used for strings with escapes and
   * for reals longer than 63 bytes. */
  char *(*scratch)(void *ud, size_t n);
  /* Called about every LUDO__JSONPARSE_TICK bytes of input, with the
   * offset reached, so the caller can enforce a CPU budget. */
  int (*tick)(void *ud, size_t offset);
  /* When not NULL, the parser stores here, before each callback but
   * `scratch` and `tick`, the byte offset it reached: just past the token
   * reported (a scalar, a key, a closing bracket), or at the opening
   * bracket for begin_object and begin_array. With it a caller finds the
   * raw text of a value (base/jsonraw.h). */
  size_t *pos;
  /* Not a callback: when not NULL, the parser stores here, before each
   * value callback (null_value to end_array), the 0-based byte offset in
   * the input of what it reports: the opening quote of a string or key,
   * the first byte of a number or literal, the '{' or '[' of a begin
   * callback, the '}' or ']' of an end callback. So a caller can take a
   * value's bytes as they are (from its begin to one past its end)
   * instead of encoding it again. Borrowed for the parse. */
  size_t *offset;
} ludo__jsonparse_cb_t;

/* Parses the `len` bytes at `s` (borrowed; no NUL needed) as one JSON text,
 * calling `cb` with `ud` for each event. `maxdepth` is the deepest nesting
 * of arrays and objects allowed (0: scalars only; below 0 or above
 * LUDO__JSONPARSE_MAXDEPTH: LUDO__JSONPARSE_MAXDEPTH). Returns 0; or
 * LUDO_EPARSE (malformed, out of range, too deep), LUDO_ENOMEM (scratch
 * refused) or a callback's code (see above), with `err` filled in. A
 * failed parse may have called callbacks for the part before the error. */
int ludo__jsonparse_run(const char *s, size_t len, int maxdepth,
                        const ludo__jsonparse_cb_t *cb, void *ud,
                        ludo__jsonparse_err_t *err);

#endif
