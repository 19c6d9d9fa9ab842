/* eval_result.c - what `ludo eval` reads of a step's result: its reward,
 * done, and the rubric scores under metadata.rubrics, walked over the
 * JSON text without building it (a step's result is parsed once per step:
 * jansson's tree cost more than the rest of the runner's work). The text
 * is JSON from the engine or a server; anything unexpected (a key with an
 * escape, a malformed value) makes the walk give up, and the caller then
 * reads the result with jansson. */
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

typedef struct {
  const char *p, *end;
} cur_t;

/* The bytes that end a scalar: ",}] \n\r\t", and NUL (as strchr of that
 * string found it). */
static const unsigned char ends_scalar[256] = {
    [0] = 1,    [','] = 1,  ['}'] = 1,  [']'] = 1,
    [' '] = 1,  ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

static int is_end(char ch) { return ends_scalar[(unsigned char)ch]; }

static void ws(cur_t *c) {
  /* Engine results have no blanks: one test, most of the time. */
  while (c->p < c->end && (unsigned char)*c->p <= ' ' &&
         (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
    c->p++;
}

static int eat(cur_t *c, char ch) {
  ws(c);
  if (c->p >= c->end || *c->p != ch) return 0;
  c->p++;
  return 1;
}

/* A string: *s and *n its bytes between the quotes; *esc set when it
 * holds an escape. */
static int string(cur_t *c, const char **s, size_t *n, int *esc) {
  ws(c);
  if (c->p >= c->end || *c->p != '"') return 0;
  *s = ++c->p;
  *esc = 0;
  for (;;) { /* to the next quote, over escaped ones (keys and values are
                short: a byte loop beats two memchr calls) */
    if (c->p >= c->end) return 0;
    if (*c->p == '"') break;
    if (*c->p == '\\') {
      *esc = 1;
      if (++c->p >= c->end) return 0; /* and the byte it escapes */
    }
    c->p++;
  }
  *n = (size_t)(c->p++ - *s);
  return 1;
}

/* Skips any value. */
static int skip(cur_t *c) {
  int depth = 0;
  const char *s;
  size_t n;
  int esc;
  ws(c);
  do {
    if (c->p >= c->end) return 0;
    if (*c->p == '"') {
      if (!string(c, &s, &n, &esc)) return 0;
    } else {
      if (*c->p == '{' || *c->p == '[') depth++;
      if (*c->p == '}' || *c->p == ']') depth--;
      c->p++;
      if (depth == 0)  /* a scalar: up to the next delimiter */
        while (c->p < c->end && !is_end(*c->p)) c->p++;
    }
    ws(c);
  } while (depth > 0);
  return depth == 0;
}

/* A short decimal, d[.d][e[+-]d] in JSON's grammar, read exactly without
 * strtod (its text is then valid JSON for the same number): at most
 * 15 digits (the whole of them below 2^53) scaled by a power of ten up
 * to 22, both exact as doubles, so the one product or quotient is
 * correctly rounded, as strtod's answer is (Clinger's fast path). Returns
 * 0 when the number is not such a one (strtod reads it then). */
static int short_decimal(const char *p, const char *end, double *v,
                         const char **e) {
  static const double tens[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                                1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                1e18, 1e19, 1e20, 1e21, 1e22};
  long long m = 0;
  int digits = 0, scale = 0, neg = 0, x = 0, xneg = 0, xd = 0;
  if (p < end && *p == '-') neg = 1, p++;
  if (p >= end || *p < '0' || *p > '9') return 0;
  if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9')
    return 0; /* not JSON's grammar ("07"): its text is not passed on */
  for (; p < end && *p >= '0' && *p <= '9'; p++)
    if ((m = m * 10 + (*p - '0')) != 0 && ++digits > 15) return 0;
  if (p < end && *p == '.') {
    if (++p >= end || *p < '0' || *p > '9') return 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++, scale--)
      if ((m = m * 10 + (*p - '0')) != 0 && ++digits > 15) return 0;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    if (++p < end && (*p == '+' || *p == '-')) xneg = *p++ == '-';
    for (; p < end && *p >= '0' && *p <= '9' && xd < 3; p++, xd++)
      x = x * 10 + (*p - '0');
    if (xd == 0 || xd == 3) return 0;
    scale += xneg ? -x : x;
  }
  if (p < end && !is_end(*p)) return 0;
  if (scale < -22 || scale > 22) return 0;
  *v = scale < 0 ? (double)m / tens[-scale] : (double)m * tens[scale];
  if (neg) *v = -*v;
  *e = p;
  return 1;
}

/* The end of the JSON number at p (RFC 8259's grammar: no leading zeros,
 * no '+', no hex, inf or nan, digits after '.' and 'e'), followed by a
 * delimiter or the end; NULL when the text is not one: the walk then
 * gives up and jansson reads the result (and refuses it). */
static const char *json_number_end(const char *p, const char *end) {
  const char *d;
  if (p < end && *p == '-') p++;
  if (p >= end || *p < '0' || *p > '9') return NULL;
  if (*p == '0')
    p++;
  else
    while (p < end && *p >= '0' && *p <= '9') p++;
  if (p < end && *p == '.') {
    for (d = ++p; p < end && *p >= '0' && *p <= '9'; p++) {}
    if (p == d) return NULL;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    if (++p < end && (*p == '+' || *p == '-')) p++;
    for (d = p; p < end && *p >= '0' && *p <= '9'; p++) {}
    if (p == d) return NULL;
  }
  if (p < end && (*p == 0 || !is_end(*p))) return NULL;
  return p;
}

/* A number (*is_num), or skips another value; *text and *len its text
 * when short_decimal read it (text may be NULL). */
static int number(cur_t *c, double *v, int *is_num, const char **text,
                  size_t *len) {
  const char *f;
  char *e;
  ws(c);
  *is_num = c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'));
  if (!*is_num) return skip(c);
  if (short_decimal(c->p, c->end, v, &f)) {
    if (text != NULL) *text = c->p, *len = (size_t)(f - c->p);
    c->p = f;
    return 1;
  }
  if (text != NULL) *text = NULL;
  if ((f = json_number_end(c->p, c->end)) == NULL) return 0;
  *v = strtod(c->p, &e);
  if (e != f || *v - *v != 0) return 0; /* 1e400: jansson says why */
  c->p = e;
  return 1;
}

/* Calls fn for each key of an object whose value is a number; a null (a
 * rubric that did not score in this step) or any other value is no
 * score, and has no call. */
static int each_number(cur_t *c, eval_score_fn fn, void *ud) {
  const char *k;
  size_t n;
  int esc, is_num;
  double v;
  if (!eat(c, '{')) return 0;
  if (eat(c, '}')) return 1;
  do {
    if (!string(c, &k, &n, &esc) || esc || !eat(c, ':') ||
        !number(c, &v, &is_num, NULL, NULL))
      return 0;
    if (is_num && fn) fn(ud, k, n, v);
  } while (eat(c, ','));
  return eat(c, '}');
}

static int metadata(cur_t *c, eval_score_fn fn, void *ud) {
  const char *k;
  size_t n;
  int esc;
  if (!eat(c, '{')) return skip(c);
  if (eat(c, '}')) return 1;
  do {
    if (!string(c, &k, &n, &esc) || esc || !eat(c, ':')) return 0;
    if (n == 7 && memcmp(k, "rubrics", 7) == 0) {
      ws(c);
      if (c->p < c->end && *c->p == '{' ? !each_number(c, fn, ud)
                                        : !skip(c))
        return 0;
    } else if (!skip(c)) {
      return 0;
    }
  } while (eat(c, ','));
  return eat(c, '}');
}

/* One top-level field. */
static int field(cur_t *c, const char *k, size_t n, eval_step_t *r,
                 eval_score_fn fn, void *ud) {
  if (n == 6 && memcmp(k, "reward", 6) == 0)
    return number(c, &r->reward, &r->has_reward, &r->reward_text,
                  &r->reward_len);
  if (n == 4 && memcmp(k, "done", 4) == 0) {
    ws(c);
    r->done = c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0;
    return skip(c);
  }
  if (n == 8 && memcmp(k, "metadata", 8) == 0) return metadata(c, fn, ud);
  if (n == 11 && memcmp(k, "observation", 11) == 0) {
    ws(c);
    r->obs = c->p;
    if (!skip(c)) return 0;
    r->obs_len = (size_t)(c->p - r->obs);
    while (r->obs_len > 0 && (r->obs[r->obs_len - 1] == ' ' ||
                              r->obs[r->obs_len - 1] == '\n' ||
                              r->obs[r->obs_len - 1] == '\r' ||
                              r->obs[r->obs_len - 1] == '\t'))
      r->obs_len--; /* skip() also passed the blanks after it */
    return 1;
  }
  return skip(c);
}

int eval_step_read(const char *json, size_t len, eval_step_t *r,
                   eval_score_fn fn, void *ud) {
  cur_t c = {json, json + len};
  const char *k;
  size_t n;
  int esc;
  memset(r, 0, sizeof *r);
  if (!eat(&c, '{')) return -1;
  if (eat(&c, '}')) return 0;
  do {
    if (!string(&c, &k, &n, &esc) || esc || !eat(&c, ':') ||
        !field(&c, k, n, r, fn, ud))
      return -1;
  } while (eat(&c, ','));
  return eat(&c, '}') ? 0 : -1;
}
