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

static void ws(cur_t *c) {
  while (c->p < c->end &&
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
  while (c->p < c->end && *c->p != '"') {
    if (*c->p == '\\') {
      *esc = 1;
      c->p++;
    }
    c->p++;
  }
  if (c->p >= c->end) return 0;
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
        while (c->p < c->end && !strchr(",}] \n\r\t", *c->p)) c->p++;
    }
    ws(c);
  } while (depth > 0);
  return depth == 0;
}

static int number(cur_t *c, double *v, int *is_num) {
  char *e;
  ws(c);
  *is_num = c->p < c->end && (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'));
  if (!*is_num) return skip(c);
  *v = strtod(c->p, &e);
  c->p = e;
  return 1;
}

/* Calls fn for each key of an object whose values are numbers (others
 * count as 0). */
static int each_number(cur_t *c, eval_score_fn fn, void *ud) {
  const char *k;
  size_t n;
  int esc, is_num;
  double v;
  if (!eat(c, '{')) return 0;
  if (eat(c, '}')) return 1;
  do {
    if (!string(c, &k, &n, &esc) || esc || !eat(c, ':') ||
        !number(c, &v, &is_num))
      return 0;
    fn(ud, k, n, is_num ? v : 0.0);
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
    return number(c, &r->reward, &r->has_reward);
  if (n == 4 && memcmp(k, "done", 4) == 0) {
    ws(c);
    r->done = c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0;
    return skip(c);
  }
  if (n == 8 && memcmp(k, "metadata", 8) == 0) return metadata(c, fn, ud);
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
