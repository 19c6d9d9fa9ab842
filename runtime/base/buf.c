/* buf.c - growable byte buffer. */
#include "base/buf.h"

#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

void ludo__buf_init(ludo__buf_t *b, ludo_alloc_fn fn, void *ud) {
  b->p = NULL;
  b->len = b->cap = 0;
  b->fn = fn;
  b->ud = ud;
}

void ludo__buf_free(ludo__buf_t *b) {
  if (b->p) b->fn(b->ud, b->p, b->cap, 0);
  b->p = NULL;
  b->len = b->cap = 0;
}

int ludo__buf_reserve(ludo__buf_t *b, size_t extra) {
  size_t need = b->len + extra + 1, ncap;
  char *np;
  if (need <= b->cap) return 0;
  if (need < b->len) return -1; /* overflow */
  ncap = b->cap ? b->cap : 64;
  while (ncap < need) ncap *= 2;
  np = b->fn(b->ud, b->p, b->p ? b->cap : 0, ncap);
  if (np == NULL) return -1;
  b->p = np;
  b->cap = ncap;
  return 0;
}

int ludo__buf_add(ludo__buf_t *b, const void *p, size_t n) {
  if (ludo__buf_reserve(b, n)) return -1;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int ludo__buf_addc(ludo__buf_t *b, char c) {
  if (b->len + 2 > b->cap && ludo__buf_reserve(b, 1)) return -1;
  b->p[b->len++] = c;
  b->p[b->len] = '\0';
  return 0;
}

int ludo__buf_add_clipped(ludo__buf_t *b, const char *p, size_t n,
                          size_t max) {
  size_t keep = ludo__utf8_cut(p, n, max);
  if (ludo__buf_add(b, p, keep)) return -1;
  if (keep == n) return 0;
  return ludo__buf_printf(b, " [... %zu more bytes]", n - keep);
}

int ludo__buf_adds(ludo__buf_t *b, const char *s) {
  return ludo__buf_add(b, s, strlen(s));
}

int ludo__buf_vprintf(ludo__buf_t *b, const char *fmt, va_list ap) {
  va_list cp;
  int n;
  va_copy(cp, ap);
  n = vsnprintf(NULL, 0, fmt, cp);
  va_end(cp);
  if (n < 0 || ludo__buf_reserve(b, (size_t)n)) return -1;
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int ludo__buf_printf(ludo__buf_t *b, const char *fmt, ...) {
  va_list ap;
  int r;
  va_start(ap, fmt);
  r = ludo__buf_vprintf(b, fmt, ap);
  va_end(ap);
  return r;
}

void ludo__buf_reset(ludo__buf_t *b) {
  b->len = 0;
  if (b->p) b->p[0] = '\0';
}

void ludo__buf_fit(ludo__buf_t *b) {
  char *np;
  if (b->p == NULL || b->len + 1 >= b->cap) return;
  np = b->fn(b->ud, b->p, b->cap, b->len + 1);
  if (np == NULL) return;
  b->p = np;
  b->cap = b->len + 1;
}
