/* utf8.h - UTF-8 validation (RFC 3629: no overlong forms, no encoded
 * surrogates, nothing above U+10FFFF), for every layer that must refuse
 * invalid text: WebSocket text messages and close reasons. */
#ifndef LUDO_BASE_UTF8_H
#define LUDO_BASE_UTF8_H

#include <stddef.h>

/* The offset of the first byte of `s` (`n` bytes) that does not start a
 * valid UTF-8 sequence, or `n` when all of `s` is valid UTF-8 (a sequence
 * cut by the end of `s` is invalid). Never fails. */
size_t ludo__utf8_check(const char *s, size_t n);

/* How many of the `n` bytes of `s` to keep so as to keep at most `max`,
 * cut before a UTF-8 sequence that would not fit whole: `n` when n <= max.
 * Never fails. */
size_t ludo__utf8_cut(const char *s, size_t n, size_t max);

/* The characters (code points) of the `n` bytes of valid UTF-8 at `s`:
 * what a length limit counts (pydantic's max_length, JSON Schema's
 * maxLength). Never fails. */
size_t ludo__utf8_chars(const char *s, size_t n);

#endif
