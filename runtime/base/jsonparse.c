/* jsonparse.c - a strict JSON parser, bytes in, callbacks out (see
 * jsonparse.h). */
#include "base/jsonparse.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef const unsigned char *pos_t;

typedef struct {
  pos_t s, p, end;
  const ludo__jsonparse_cb_t *cb;
  void *ud;
  ludo__jsonparse_err_t *err;
  size_t tick_at;
  int depth, maxdepth;
  unsigned char objs[LUDO__JSONPARSE_MAXDEPTH / 8]; /* 1 bit per level */
} parser_t;

/* ---- errors ---------------------------------------------------------- */

/* Fills in the line and column of `at` by counting newlines before it. */
static void locate(parser_t *ps, pos_t at) {
  pos_t q = ps->s, bol = ps->s;
  size_t line = 1;
  while (q < at && (q = memchr(q, '\n', (size_t)(at - q))) != NULL) {
    line++;
    bol = ++q;
  }
  ps->err->offset = (size_t)(at - ps->s);
  ps->err->line = line;
  ps->err->column = (size_t)(at - bol) + 1;
}

/* Records an error of `kind` at `at` and returns `rc`. */
static int fail(parser_t *ps, int rc, int kind, pos_t at, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int fail(parser_t *ps, int rc, int kind, pos_t at, const char *fmt,
                ...) {
  va_list ap;
  ps->err->kind = kind;
  locate(ps, at);
  va_start(ap, fmt);
  vsnprintf(ps->err->msg, sizeof ps->err->msg, fmt, ap);
  va_end(ap);
  return rc;
}

/* Tells the caller, before a callback, where the token about to be
 * reported starts (cb->offset: `at`) and where the parser is (cb->pos). */
static void mark(const parser_t *ps, pos_t at) {
  if (ps->cb->offset) *ps->cb->offset = (size_t)(at - ps->s);
  if (ps->cb->pos) *ps->cb->pos = (size_t)(ps->p - ps->s);
}

static int is_delim(unsigned c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' ||
         c == ':' || c == '[' || c == ']' || c == '{' || c == '}';
}

/* Writes "'<token at at>'" (at most 20 bytes, unprintable bytes as '?') or
 * "end of file" into out (n >= 24). */
static void token_text(parser_t *ps, pos_t at, char *out, size_t n) {
  size_t i = 0;
  pos_t q = at;
  if (at >= ps->end) {
    snprintf(out, n, "end of file");
    return;
  }
  out[i++] = '\'';
  do {
    out[i++] = (*q >= 0x20 && *q < 0x7f) ? (char)*q : '?';
    q++;
  } while (q < ps->end && i + 3 < n && i < 21 && !is_delim(*q) &&
           !is_delim(*at));
  out[i++] = '\'';
  out[i] = '\0';
}

/* A syntax error "<what> near <token at at>". */
static int fail_near(parser_t *ps, pos_t at, const char *what) {
  char tok[32];
  token_text(ps, at, tok, sizeof tok);
  return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, at, "%s near %s",
              what, tok);
}

/* A number error "<what> near <token>". */
static int fail_range(parser_t *ps, pos_t at, const char *what) {
  fail_near(ps, at, what);
  ps->err->kind = LUDO__JSONPARSE_ERANGE;
  return LUDO_EPARSE;
}

/* Turns a callback's nonzero result into a parse error: its own value when
 * negative, else LUDO_ECANCELED. */
static int stopped(parser_t *ps, pos_t at, int rc) {
  if (rc == 0) return 0;
  return fail(ps, rc < 0 ? rc : LUDO_ECANCELED, LUDO__JSONPARSE_ECALLBACK, at,
              "stopped by a callback");
}

/* ---- input helpers --------------------------------------------------- */

static void skip_ws(parser_t *ps) {
  pos_t p = ps->p, end = ps->end;
  while (p < end && *p <= ' ' &&
         (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    p++;
  ps->p = p;
}

/* The next byte, or -1 at the end. */
static int peek(parser_t *ps) {
  return ps->p < ps->end ? *ps->p : -1;
}

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

/* Bytes that may continue a number or a literal (for error tokens). */
static int is_word(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '.' || c == '+' || c == '-' || c == '_';
}

/* ---- strings --------------------------------------------------------- */

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Nonzero when one of the 8 bytes of w is '"', '\\', a control character
 * or not ASCII (a few false alarms are fine: those bytes are then looked
 * at one by one). */
static uint64_t special8(uint64_t w) {
  uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');
  return (((q - ONES) & ~q) | ((b - ONES) & ~b) | (w - ONES * 0x20) | w) &
         HIGHS;
}

/* Index of the first byte special8 flagged. The lowest flag is always a
 * true one (a borrow only reaches the bytes above a flagged byte); on a
 * big-endian machine, 0: the bytes are then looked at one by one. */
static size_t first_flagged(uint64_t m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return (size_t)__builtin_ctzll(m) >> 3;
#else
  (void)m;
  return 0;
#endif
}

/* Length of the valid UTF-8 sequence at p (2-4), or 0 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(pos_t p, pos_t end) {
  unsigned c = p[0], lo = 0x80, hi = 0xbf;
  size_t n, i;
  if (c < 0xc2 || c > 0xf4) return 0;
  n = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
  if ((size_t)(end - p) < n) return 0;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  if (p[1] < lo || p[1] > hi) return 0;
  for (i = 2; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* Scans the string whose opening quote is at ps->p: checks its bytes and
 * finds the closing quote (*q). *esc tells whether it holds escapes (those
 * are checked when unescaping). */
static int scan_string(parser_t *ps, pos_t *q, int *esc) {
  pos_t p = ps->p + 1, end = ps->end;
  *esc = 0;
  for (;;) {
    uint64_t w;
    unsigned c;
    while (end - p >= 8) {
      uint64_t m;
      memcpy(&w, p, 8);
      if ((m = special8(w)) != 0) {
        p += first_flagged(m); /* straight to the byte to look at */
        break;
      }
      p += 8;
    }
    if (p >= end)
      return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, end,
                  "unterminated string near end of file");
    c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      p++;
    } else if (c == '"') {
      *q = p;
      return 0;
    } else if (c == '\\') {
      *esc = 1;
      p = end - p > 2 ? p + 2 : end;
    } else if (c < 0x20) {
      return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, p,
                  "control character 0x%02x in string", c);
    } else {
      size_t n = utf8_seq(p, end);
      if (n == 0)
        return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, p,
                    "invalid UTF-8 byte 0x%02x in string", c);
      p += n;
    }
  }
}

/* Reads 4 hex digits at p into *v; 0 when they are not hex. */
static int hex4(pos_t p, pos_t end, unsigned *v) {
  int i;
  *v = 0;
  if (end - p < 4) return 0;
  for (i = 0; i < 4; i++) {
    unsigned c = p[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return 0;
    *v = (*v << 4) | d;
  }
  return 1;
}

/* Writes code point cp (at most U+10FFFF) as UTF-8; returns the end. */
static char *put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    *o++ = (char)cp;
  } else if (cp < 0x800) {
    *o++ = (char)(0xc0 | (cp >> 6));
    *o++ = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *o++ = (char)(0xe0 | (cp >> 12));
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
    *o++ = (char)(0x80 | (cp & 0x3f));
  } else {
    *o++ = (char)(0xf0 | (cp >> 18));
    *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
    *o++ = (char)(0x80 | (cp & 0x3f));
  }
  return o;
}

/* Reads the \u escape at *pp (the backslash) into *cp, a surrogate pair
 * as one code point, and moves *pp past it. [q is the string's end.] */
static int read_u(parser_t *ps, pos_t *pp, pos_t q, unsigned *cp) {
  pos_t p = *pp;
  unsigned lo;
  if (!hex4(p + 2, q, cp)) return fail_near(ps, p, "invalid \\u escape");
  p += 6;
  if (*cp >= 0xdc00 && *cp <= 0xdfff)
    return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, *pp,
                "unpaired surrogate '\\u%04x' in string", *cp);
  if (*cp >= 0xd800 && *cp <= 0xdbff) {
    if (q - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, q, &lo) ||
        lo < 0xdc00 || lo > 0xdfff)
      return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_ESYNTAX, *pp,
                  "unpaired surrogate '\\u%04x' in string", *cp);
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    p += 6;
  }
  *pp = p;
  return 0;
}

/* The byte a one-letter escape stands for, or -1. */
static int simple_escape(unsigned c) {
  switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
  }
}

/* Unescapes the string body [p, q) into o; *olen gets its length, never
 * more than the body's. */
static int unescape(parser_t *ps, pos_t p, pos_t q, char *o, size_t *olen) {
  char *o0 = o;
  while (p < q) {
    unsigned cp;
    int c;
    /* 8 bytes at a time: a word is copied whole, and kept up to its first
     * backslash (a string of quoted JSON has one every few bytes: a memchr
     * and a memcpy per run cost more). o + 8 stays inside the scratch of
     * len bytes, as o - o0 <= p - start. */
    if (q - p >= 8) {
      uint64_t w, b, m;
      memcpy(&w, p, 8);
      memcpy(o, &w, 8);
      b = w ^ (ONES * '\\');
      if ((m = ((b - ONES) & ~b) & HIGHS) == 0) {
        o += 8;
        p += 8;
        continue;
      }
      o += first_flagged(m);
      p += first_flagged(m);
    }
    if (*p != '\\') {
      *o++ = (char)*p++;
      continue;
    }
    if (p[1] == 'u') {
      if (read_u(ps, &p, q, &cp) != 0) return LUDO_EPARSE;
      o = put_utf8(o, cp);
      continue;
    }
    if ((c = simple_escape(p[1])) < 0)
      return fail_near(ps, p, "invalid escape");
    *o++ = (char)c;
    p += 2;
  }
  *olen = (size_t)(o - o0);
  return 0;
}

/* Parses the string at ps->p and reports it as a key or a string value. */
static int parse_string(parser_t *ps, int is_key) {
  int (*fn)(void *, const char *, size_t) =
      is_key ? ps->cb->key : ps->cb->string;
  pos_t start = ps->p, q = NULL;
  const char *text = (const char *)start + 1;
  size_t len;
  int esc, rc = scan_string(ps, &q, &esc);
  if (rc != 0) return rc;
  len = (size_t)(q - start - 1);
  if (esc) {
    char *o = ps->cb->scratch ? ps->cb->scratch(ps->ud, len) : NULL;
    if (o == NULL)
      return fail(ps, LUDO_ENOMEM, LUDO__JSONPARSE_ENOMEM, start,
                  "no memory to unescape a string");
    rc = unescape(ps, start + 1, q, o, &len);
    if (rc != 0) return rc;
    text = o;
  }
  ps->p = q + 1;
  mark(ps, start);
  return fn ? stopped(ps, start, fn(ps->ud, text, len)) : 0;
}

/* ---- numbers --------------------------------------------------------- */

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void) {
  c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* strtod in the C locale (the decimal point is always '.'). */
static double strtod_c(const char *text) {
  pthread_once(&c_locale_once, c_locale_init);
  if (c_locale != (locale_t)0) return strtod_l(text, NULL, c_locale);
  return strtod(text, NULL);
}

/* The digits of a number token, as scanned. */
typedef struct {
  uint64_t m;    /* the first 19 significant digits */
  int nsig;      /* significant digits kept in m */
  int truncated; /* more significant digits than m holds */
  long e10;      /* the value is m * 10^e10 (when not truncated) */
  int is_real, neg;
} num_t;

/* Adds digit d to n; `frac` tells whether it follows the point. */
static void num_digit(num_t *n, unsigned d, int frac) {
  if (n->nsig == 0 && d == 0) {
    if (frac) n->e10--;
    return;
  }
  if (n->nsig < 19) {
    n->m = n->m * 10 + d;
    n->nsig++;
    if (frac) n->e10--;
  } else {
    n->truncated = 1;
    if (!frac) n->e10++;
  }
}

/* Scans the exponent after the 'e' at *pp into n->e10. */
static int scan_exponent(parser_t *ps, pos_t *pp, num_t *n) {
  pos_t p = *pp + 1, end = ps->end;
  long e = 0;
  int neg = 0;
  if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
  if (p >= end || !is_digit(*p)) return -1;
  for (; p < end && is_digit(*p); p++)
    if (e < 100000000) e = e * 10 + (*p - '0');
  n->e10 += neg ? -e : e;
  *pp = p;
  return 0;
}

/* Scans the number token at ps->p into n and *tend (its end); -1 when it
 * is malformed. */
static int scan_number(parser_t *ps, num_t *n, pos_t *tend) {
  pos_t p = ps->p, end = ps->end;
  memset(n, 0, sizeof *n);
  if (*p == '-') n->neg = 1, p++;
  if (p >= end || !is_digit(*p)) return -1;
  if (*p == '0')
    p++;
  else
    for (; p < end && is_digit(*p); p++) num_digit(n, *p - '0', 0);
  if (p < end && *p == '.') {
    n->is_real = 1;
    if (++p >= end || !is_digit(*p)) return -1;
    for (; p < end && is_digit(*p); p++) num_digit(n, *p - '0', 1);
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    n->is_real = 1;
    if (scan_exponent(ps, &p, n) != 0) return -1;
  }
  if (p < end && is_word(*p)) return -1;
  *tend = p;
  return 0;
}

/* Powers of ten that are exact doubles. */
static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                             1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                             1e18, 1e19, 1e20, 1e21, 1e22};

/* The value of a short real when one correctly rounded operation gives it
 * (m and 10^|e10| are exact doubles: Clinger's fast path); else 0. */
static int real_fast(const num_t *n, double *d) {
#if FLT_EVAL_METHOD == 0
  if (n->truncated || n->m > (1ull << 53) || n->e10 < -22 || n->e10 > 22)
    return 0;
  *d = (double)n->m;
  *d = n->e10 < 0 ? *d / p10[-n->e10] : *d * p10[n->e10];
  if (n->neg) *d = -*d;
  return 1;
#else
  (void)n;
  (void)d;
  return 0;
#endif
}

/* Reads the real token [start, tend) with strtod on a NUL-terminated copy
 * (on the stack, or in scratch when long). */
static int real_slow(parser_t *ps, pos_t start, pos_t tend, double *d) {
  char small[64], *copy = small;
  size_t len = (size_t)(tend - start);
  if (len >= sizeof small) {
    copy = ps->cb->scratch ? ps->cb->scratch(ps->ud, len + 1) : NULL;
    if (copy == NULL)
      return fail(ps, LUDO_ENOMEM, LUDO__JSONPARSE_ENOMEM, start,
                  "no memory to read a number");
  }
  memcpy(copy, start, len);
  copy[len] = '\0';
  *d = strtod_c(copy);
  return 0;
}

static int report_integer(parser_t *ps, const num_t *n, pos_t start) {
  uint64_t limit = n->neg ? (1ull << 63) : (1ull << 63) - 1;
  int64_t v;
  if (n->truncated || n->e10 != 0 || n->m > limit)
    return fail_range(ps, start, "integer out of range");
  if (!n->neg)
    v = (int64_t)n->m;
  else
    v = n->m == 0 ? 0 : -(int64_t)(n->m - 1) - 1;
  mark(ps, start);
  return ps->cb->integer ? stopped(ps, start, ps->cb->integer(ps->ud, v))
                         : 0;
}

static int report_real(parser_t *ps, const num_t *n, pos_t start,
                       pos_t tend) {
  double d = 0;
  if (!real_fast(n, &d)) {
    int rc = real_slow(ps, start, tend, &d);
    if (rc != 0) return rc;
  }
  if (isinf(d)) return fail_range(ps, start, "number out of range");
  mark(ps, start);
  return ps->cb->real ? stopped(ps, start, ps->cb->real(ps->ud, d)) : 0;
}

static int parse_number(parser_t *ps) {
  pos_t start = ps->p, tend;
  num_t n;
  if (scan_number(ps, &n, &tend) != 0)
    return fail_near(ps, start, "invalid number");
  ps->p = tend;
  if (n.is_real) return report_real(ps, &n, start, tend);
  return report_integer(ps, &n, start);
}

/* ---- literals and containers ----------------------------------------- */

/* Parses true, false or null. */
static int parse_literal(parser_t *ps) {
  pos_t p = ps->p;
  size_t left = (size_t)(ps->end - p), n = 0;
  int kind = 0, rc = 0;
  if (left >= 4 && memcmp(p, "null", 4) == 0)
    n = 4, kind = 'n';
  else if (left >= 4 && memcmp(p, "true", 4) == 0)
    n = 4, kind = 't';
  else if (left >= 5 && memcmp(p, "false", 5) == 0)
    n = 5, kind = 'f';
  if (n == 0 || (left > n && is_word(p[n])))
    return fail_near(ps, p, "invalid token");
  ps->p = p + n;
  mark(ps, p);
  if (kind == 'n' && ps->cb->null_value)
    rc = ps->cb->null_value(ps->ud);
  else if (kind != 'n' && ps->cb->boolean)
    rc = ps->cb->boolean(ps->ud, kind == 't');
  return stopped(ps, p, rc);
}

static int top_is_object(const parser_t *ps) {
  int d = ps->depth - 1;
  return (ps->objs[d >> 3] >> (d & 7)) & 1;
}

/* Opens an array or object at ps->p (depth checked, callback called). */
static int open_container(parser_t *ps, int is_obj) {
  pos_t at = ps->p;
  int d = ps->depth, rc;
  if (d >= ps->maxdepth)
    return fail(ps, LUDO_EPARSE, LUDO__JSONPARSE_EDEPTH, at,
                "nesting deeper than %d", ps->maxdepth);
  mark(ps, at);
  if (is_obj)
    rc = ps->cb->begin_object ? ps->cb->begin_object(ps->ud) : 0;
  else
    rc = ps->cb->begin_array ? ps->cb->begin_array(ps->ud) : 0;
  if (rc != 0) return stopped(ps, at, rc);
  if (is_obj)
    ps->objs[d >> 3] |= (unsigned char)(1u << (d & 7));
  else
    ps->objs[d >> 3] &= (unsigned char)~(1u << (d & 7));
  ps->depth++;
  ps->p++;
  return 0;
}

/* Closes the innermost container at ps->p. */
static int close_container(parser_t *ps) {
  pos_t at = ps->p;
  int rc, is_obj = top_is_object(ps);
  ps->depth--;
  ps->p++;
  mark(ps, at);
  if (is_obj)
    rc = ps->cb->end_object ? ps->cb->end_object(ps->ud) : 0;
  else
    rc = ps->cb->end_array ? ps->cb->end_array(ps->ud) : 0;
  return stopped(ps, at, rc);
}

/* Reads `"key" :` of an object member. `first`: right after '{'. */
static int member(parser_t *ps, int first) {
  int rc;
  skip_ws(ps);
  if (peek(ps) != '"') {
    if (!first && peek(ps) == '}')
      return fail_near(ps, ps->p, "trailing comma");
    return fail_near(ps, ps->p, first ? "string key or '}' expected"
                                      : "string key expected");
  }
  rc = parse_string(ps, 1);
  if (rc != 0) return rc;
  skip_ws(ps);
  if (peek(ps) != ':') return fail_near(ps, ps->p, "':' expected");
  ps->p++;
  return 0;
}

/* Calls the tick callback; the next call comes LUDO__JSONPARSE_TICK bytes
 * later. */
static int tick(parser_t *ps) {
  size_t off = (size_t)(ps->p - ps->s);
  ps->tick_at = off + LUDO__JSONPARSE_TICK;
  return ps->cb->tick ? stopped(ps, ps->p, ps->cb->tick(ps->ud, off)) : 0;
}

/* Parses the start of a value: a whole scalar or empty container (returns
 * 0), or the opening of a container whose first value follows (returns 1);
 * or an error (negative). */
static int value(parser_t *ps) {
  int c, rc;
  skip_ws(ps);
  if ((size_t)(ps->p - ps->s) >= ps->tick_at && (rc = tick(ps)) != 0)
    return rc;
  c = peek(ps);
  if (c == '"') return parse_string(ps, 0);
  if (c == '-' || is_digit(c)) return parse_number(ps);
  if (c == '{' || c == '[') {
    int close = c == '{' ? '}' : ']';
    if ((rc = open_container(ps, c == '{')) != 0) return rc;
    skip_ws(ps);
    if (peek(ps) == close) return close_container(ps);
    if (c == '{' && (rc = member(ps, 1)) != 0) return rc;
    return 1;
  }
  if (c >= 'a' && c <= 'z') return parse_literal(ps);
  if (c == ']' || c == '}' || c == ',' || c == ':' || c < 0)
    return fail_near(ps, ps->p, "expected a JSON value");
  return fail_near(ps, ps->p, "invalid token");
}

/* After a complete value: closes containers and reads separators. Returns
 * 1 when another value follows, 0 at the end of the text, or an error. */
static int after_value(parser_t *ps) {
  for (;;) {
    int c, rc, is_obj;
    skip_ws(ps);
    if (ps->depth == 0)
      return ps->p == ps->end ? 0
                              : fail_near(ps, ps->p, "end of file expected");
    c = peek(ps);
    is_obj = top_is_object(ps);
    if (c == ',') {
      ps->p++;
      if (is_obj) return (rc = member(ps, 0)) != 0 ? rc : 1;
      skip_ws(ps);
      if (peek(ps) == ']') return fail_near(ps, ps->p, "trailing comma");
      return 1;
    }
    if (c != (is_obj ? '}' : ']'))
      return fail_near(ps, ps->p, is_obj ? "',' or '}' expected"
                                         : "',' or ']' expected");
    if ((rc = close_container(ps)) != 0) return rc;
  }
}

int ludo__jsonparse_run(const char *s, size_t len, int maxdepth,
                        const ludo__jsonparse_cb_t *cb, void *ud,
                        ludo__jsonparse_err_t *err) {
  parser_t ps;
  int rc;
  ps.s = ps.p = (pos_t)s;
  ps.end = ps.s + len;
  ps.cb = cb;
  ps.ud = ud;
  ps.err = err;
  ps.tick_at = LUDO__JSONPARSE_TICK;
  ps.depth = 0;
  ps.maxdepth = maxdepth < 0 || maxdepth > LUDO__JSONPARSE_MAXDEPTH
                    ? LUDO__JSONPARSE_MAXDEPTH
                    : maxdepth;
  memset(err, 0, sizeof *err);
  do {
    rc = value(&ps);
    if (rc == 0) rc = after_value(&ps);
  } while (rc == 1);
  return rc;
}
