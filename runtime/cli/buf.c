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

void ludo__cli_buf_json_string(ludo__cli_buf_t *b, const char *s) {
  ludo__cli_buf_printf(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      ludo__cli_buf_printf(b, "\\%c", c);
    else if (c < 0x20)
      ludo__cli_buf_printf(b, "\\u%04x", c);
    else
      ludo__cli_buf_printf(b, "%c", c);
  }
  ludo__cli_buf_printf(b, "\"");
}

void ludo__cli_buf_reset(ludo__cli_buf_t *b) {
  b->len = 0;
  if (b->p) b->p[0] = '\0';
}

void ludo__cli_buf_free(ludo__cli_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
