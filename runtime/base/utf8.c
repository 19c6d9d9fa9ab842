/* utf8.c - UTF-8 validation (see utf8.h). */
#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid multi-byte sequence at p (2-4), or 0. The second
 * byte's range excludes overlong forms (after 0xe0, 0xf0), surrogates
 * (after 0xed) and code points above U+10FFFF (after 0xf4). */
static size_t seq_len(const unsigned char *p, size_t left) {
  unsigned c = p[0], lo = 0x80, hi = 0xbf;
  size_t n, i;
  if (c < 0xc2 || c > 0xf4) return 0;
  n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
  if (left < n) return 0;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  if (p[1] < lo || p[1] > hi) return 0;
  for (i = 2; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  return n;
}

size_t ludo__utf8_check(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    uint64_t w;
    size_t k;
    /* Eight ASCII bytes at a time: JSON text is mostly ASCII. */
    if (n - i >= 8) {
      memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    k = seq_len(p + i, n - i);
    if (k == 0) return i;
    i += k;
  }
  return n;
}

size_t ludo__utf8_cut(const char *s, size_t n, size_t max) {
  size_t keep = max;
  if (n <= max) return n;
  while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80) keep--;
  return keep;
}

size_t ludo__utf8_chars(const char *s, size_t n) {
  size_t i, chars = 0;
  for (i = 0; i < n; i++) /* every byte but a continuation starts one */
    chars += ((unsigned char)s[i] & 0xC0) != 0x80;
  return chars;
}
