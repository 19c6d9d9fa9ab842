/* buf.c - the CLI's growable text buffer (see cli.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void grow(ludo__cli_buf_t *b, size_t need) {
  size_t cap = b->cap ? b->cap : 256;
  char *p;
  while (cap < need) cap *= 2;
  if (cap == b->cap) return;
  p = realloc(b->p, cap);
  if (p == NULL) {
    ludo__cli_error("out of memory");
    exit(1);
  }
  b->p = p;
  b->cap = cap;
}

void ludo__cli_buf_printf(ludo__cli_buf_t *b, const char *fmt, ...) {
  va_list ap;
  int n;
  grow(b, b->len + 1);
  va_start(ap, fmt);
  n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= b->cap - b->len) {
    grow(b, b->len + (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
  }
  b->len += (size_t)n;
}

void ludo__cli_buf_add(ludo__cli_buf_t *b, const char *s, size_t n) {
  grow(b, b->len + n + 1);
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

/* Nonzero when one of the 8 bytes of w needs an escape in a JSON string:
 * '"', '\\' or a control byte (below 0x20; bytes from 0x80 have their top
 * bit set and are never flagged). */
static uint64_t needs_escape8(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
  uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
  return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) &
         high;
}

/* How many bytes of w come before the first one needs_escape8 flagged
 * (the lowest flag is always a true one: a borrow only reaches the bytes
 * above a flagged byte); 0 on a big-endian machine, whose words are then
 * looked at byte by byte. */
static size_t clean_prefix(uint64_t m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return (size_t)__builtin_ctzll(m) >> 3;
#else
  (void)m;
  return 0;
#endif
}

void ludo__cli_buf_json_stringn(ludo__cli_buf_t *b, const char *s,
                                size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t i = 0;
  char *o, *end;
  grow(b, b->len + n + 16);
  o = b->p + b->len;
  end = b->p + b->cap;
  *o++ = '"';
  while (i < n) {
    unsigned char c;
    if (end - o < 16) { /* room for a word or an escape, the quote, NUL */
      size_t at = (size_t)(o - b->p);
      grow(b, at + (n - i) + 16);
      o = b->p + at;
      end = b->p + b->cap;
    }
    if (n - i >= 8) { /* a word: copied; its bytes before a special kept */
      uint64_t w, m;
      size_t k;
      memcpy(&w, s + i, 8);
      memcpy(o, &w, 8);
      if ((m = needs_escape8(w)) == 0) {
        o += 8;
        i += 8;
        continue;
      }
      k = clean_prefix(m);
      o += k;
      i += k;
    }
    c = (unsigned char)s[i++];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20) {
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      o += 6;
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  *o = '\0';
  b->len = (size_t)(o - b->p);
}

void ludo__cli_buf_json_string(ludo__cli_buf_t *b, const char *s) {
  ludo__cli_buf_json_stringn(b, s, strlen(s));
}

void ludo__cli_buf_reset(ludo__cli_buf_t *b) {
  b->len = 0;
  if (b->p) b->p[0] = '\0';
}

void ludo__cli_buf_free(ludo__cli_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
