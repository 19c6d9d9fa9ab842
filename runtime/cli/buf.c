/* buf.c - the CLI's growable text buffer (see cli.h). */
#include <stdarg.h>
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

/* What a byte takes in a JSON string: 0 itself, 1 a backslash before it,
 * 2 a \u00XX escape. */
static const unsigned char json_escape[256] = {
    [0x00] = 2, [0x01] = 2, [0x02] = 2, [0x03] = 2, [0x04] = 2, [0x05] = 2,
    [0x06] = 2, [0x07] = 2, [0x08] = 2, [0x09] = 2, [0x0a] = 2, [0x0b] = 2,
    [0x0c] = 2, [0x0d] = 2, [0x0e] = 2, [0x0f] = 2, [0x10] = 2, [0x11] = 2,
    [0x12] = 2, [0x13] = 2, [0x14] = 2, [0x15] = 2, [0x16] = 2, [0x17] = 2,
    [0x18] = 2, [0x19] = 2, [0x1a] = 2, [0x1b] = 2, [0x1c] = 2, [0x1d] = 2,
    [0x1e] = 2, [0x1f] = 2, ['"'] = 1,  ['\\'] = 1};

void ludo__cli_buf_json_real(ludo__cli_buf_t *b, double v) {
  char t[40];
  int prec;
  if (v != v || v - v != 0) {
    ludo__cli_buf_add(b, "null", 4);
    return;
  }
  for (prec = 15; prec < 17; prec++) {
    snprintf(t, sizeof t, "%.*g", prec, v);
    if (strtod(t, NULL) == v) break;
  }
  if (prec == 17) snprintf(t, sizeof t, "%.17g", v);
  if (strpbrk(t, ".eE") == NULL) strcat(t, ".0");
  ludo__cli_buf_add(b, t, strlen(t));
}

void ludo__cli_buf_json_chars(ludo__cli_buf_t *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  size_t i;
  char *o, *end;
  /* Room for every byte doubled and the NUL: only a control byte (6
   * bytes) needs a check. */
  grow(b, b->len + 2 * n + 8);
  o = b->p + b->len;
  end = b->p + b->cap;
  for (i = 0; i < n; i++) { /* a byte at a time: a quoted JSON text has
                               an escape every few bytes */
    unsigned char c = u[i];
    if (json_escape[c] == 0) {
      *o++ = (char)c;
    } else if (json_escape[c] == 1) {
      *o++ = '\\';
      *o++ = (char)c;
    } else {
      if ((size_t)(end - o) < 2 * (n - i) + 12) {
        size_t at = (size_t)(o - b->p);
        grow(b, at + 2 * (n - i) + 12);
        o = b->p + at;
        end = b->p + b->cap;
      }
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      o += 6;
    }
  }
  *o = '\0';
  b->len = (size_t)(o - b->p);
}

void ludo__cli_buf_json_stringn(ludo__cli_buf_t *b, const char *s,
                                size_t n) {
  ludo__cli_buf_add(b, "\"", 1);
  ludo__cli_buf_json_chars(b, s, n);
  ludo__cli_buf_add(b, "\"", 1);
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
