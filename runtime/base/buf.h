/* buf.h - a growable byte buffer on a lua_Alloc-shaped allocator. Functions
 * return 0 or -1 when the allocator refuses; they never raise. */
#ifndef LUDO_BASE_BUF_H
#define LUDO_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "ludo_defs.h"

typedef struct ludo__buf_s {
  char *p;          /* NUL-terminated when cap > 0 */
  size_t len, cap;
  ludo_alloc_fn fn;
  void *ud;
} ludo__buf_t;

void ludo__buf_init(ludo__buf_t *b, ludo_alloc_fn fn, void *ud);
void ludo__buf_free(ludo__buf_t *b);
int ludo__buf_reserve(ludo__buf_t *b, size_t extra);
int ludo__buf_add(ludo__buf_t *b, const void *p, size_t n);
int ludo__buf_addc(ludo__buf_t *b, char c);
int ludo__buf_adds(ludo__buf_t *b, const char *s);
/* Appends at most `max` bytes of the n at p, cut before a UTF-8 sequence
 * that would not fit whole, and when it cut, " [... N more bytes]". Returns
 * 0 or -1 (no memory). */
int ludo__buf_add_clipped(ludo__buf_t *b, const char *p, size_t n,
                          size_t max);
int ludo__buf_printf(ludo__buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ludo__buf_vprintf(ludo__buf_t *b, const char *fmt, va_list ap);
/* Empties the buffer, keeping its memory. */
void ludo__buf_reset(ludo__buf_t *b);
/* Gives back the memory past the contents (and its NUL); when the
 * allocator refuses, the buffer stays as it was. */
void ludo__buf_fit(ludo__buf_t *b);

#endif
