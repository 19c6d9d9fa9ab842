/* eval_scan.c - one line of results.jsonl read for --resume, merge and the
 * progress of worker processes: a strict JSON pass that builds nothing
 * (ludo_json_parse, the parser ludo.json decodes with, so a line it
 * takes is one the summary can read), keeping the fields the runner needs
 * and checking the type of every field of a record, so a line that is
 * not a record ludo writes is refused here, naming its line, and never
 * later in the summary. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"
#include "ludo.h"

/* JSON value types, as bits. */
enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_REAL = 8, T_STRING = 16,
       T_OBJECT = 32, T_ARRAY = 64 };
#define T_NUMBER (T_INT | T_REAL)

/* The fields of a record: their types, and whether every record has
 * them (the others are checked when present). */
enum { F_EPISODE, F_SEED, F_REWARD, F_STEPS, F_ERROR, F_SUCCESS, F_TASK,
       F_REPEAT, F_RUBRICS, F_DONE, F_TRUNCATED, F_INVALID, F_WALL, F_CPU,
       F_LLM, F_TRAJECTORY, NFIELDS };

static const struct {
  const char *name;
  int types, required;
  const char *want;
} fields[NFIELDS] = {
    {"episode", T_INT, 1, "a whole number"},
    {"seed", T_INT, 1, "a whole number"},
    {"reward", T_NUMBER, 1, "a number"},
    {"steps", T_INT, 1, "a whole number"},
    {"error", T_NULL | T_OBJECT, 1, "null or an object {class, message}"},
    {"success", T_BOOL, 1, "true or false"},
    {"task", T_NULL | T_STRING, 0, "null or a string"},
    {"repeat", T_INT, 0, "a whole number"},
    {"rubrics", T_OBJECT, 0, "an object of numbers"},
    {"done", T_BOOL, 0, "true or false"},
    {"truncated", T_BOOL, 0, "true or false"},
    {"invalid_actions", T_INT, 0, "a whole number"},
    {"wall_ms", T_NUMBER, 0, "a number"},
    {"cpu_ms", T_NUMBER, 0, "a number"},
    {"llm", T_OBJECT, 0, "an object of numbers"},
    {"trajectory", T_NULL | T_STRING, 0, "null or a string"},
};

typedef struct {
  eval_line_t *l;
  int depth;                /* containers open */
  int field;                /* the top-level member being read, or -1 */
  int sub;                  /* in "error": 1 class, 2 message, 0 other */
  unsigned seen;            /* a bit per field read */
  char cls[32];             /* error.class ("" when none or too long) */
  int has_class;
  char traj[64];            /* "trajectory" when a string that fits */
  int traj_string, traj_long;
  char *why;                /* why the line is refused */
  size_t why_n;
} scan_t;

static const char *type_name(int t) {
  switch (t) {
    case T_NULL: return "null";
    case T_BOOL: return "a boolean";
    case T_INT: return "a whole number";
    case T_REAL: return "a number with a fraction or exponent";
    case T_STRING: return "a string";
    case T_OBJECT: return "an object";
    default: return "an array";
  }
}

/* Stops the parse saying why (a positive return: LUDO_ECANCELED). */
static int refuse(scan_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int refuse(scan_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why, s->why_n, fmt, ap);
  va_end(ap);
  return 1;
}

/* Checks a value of type t where it is; 0 to go on. */
static int check(scan_t *s, int t) {
  int f = s->field;
  if (s->depth == 0 && t != T_OBJECT)
    return refuse(s, "%s, not an object", type_name(t));
  if (s->depth == 1 && f >= 0 && !(fields[f].types & t))
    return refuse(s, "the field \"%s\" must be %s, not %s", fields[f].name,
                  fields[f].want, type_name(t));
  if (s->depth == 2 && (f == F_RUBRICS || f == F_LLM) && !(t & T_NUMBER))
    return refuse(s, "the field \"%s\" must be an object of numbers (it "
                  "holds %s)", fields[f].name, type_name(t));
  if (s->depth == 2 && f == F_ERROR && s->sub != 0 && t != T_STRING)
    return refuse(s, "the field \"error\" must have a string \"%s\", not "
                  "%s", s->sub == 1 ? "class" : "message", type_name(t));
  return 0;
}

static int on_null(void *ud) { return check(ud, T_NULL); }
static int on_bool(void *ud, int v) {
  (void)v;
  return check(ud, T_BOOL);
}

static int on_int(void *ud, int64_t v) {
  scan_t *s = ud;
  if (check(s, T_INT)) return 1;
  if (s->depth != 1) return 0;
  if (s->field == F_EPISODE) s->l->episode = v;
  else if (s->field == F_SEED) s->l->seed = v;
  else if (s->field == F_STEPS) s->l->steps = v;
  else if (s->field == F_REWARD) s->l->reward = (double)v;
  return 0;
}

static int on_real(void *ud, double v) {
  scan_t *s = ud;
  if (check(s, T_REAL)) return 1;
  if (s->depth == 1 && s->field == F_REWARD) s->l->reward = v;
  return 0;
}

/* Copies n bytes of p into out[size] when they fit (else 0). */
static int keep(char *out, size_t size, const char *p, size_t n) {
  if (n >= size) return 0;
  memcpy(out, p, n);
  out[n] = '\0';
  return 1;
}

static int on_string(void *ud, const char *p, size_t n) {
  scan_t *s = ud;
  if (check(s, T_STRING)) return 1;
  if (s->depth == 1 && s->field == F_TRAJECTORY) {
    s->traj_string = 1;
    s->traj_long = !keep(s->traj, sizeof s->traj, p, n) ||
                   memchr(p, '\0', n) != NULL;
  } else if (s->depth == 2 && s->field == F_ERROR && s->sub == 1) {
    s->has_class = 1;
    if (!keep(s->cls, sizeof s->cls, p, n)) s->cls[0] = '\0';
  }
  return 0;
}

static int on_key(void *ud, const char *k, size_t n) {
  scan_t *s = ud;
  int f;
  if (s->depth == 2 && s->field == F_ERROR)
    s->sub = n == 5 && !memcmp(k, "class", 5)     ? 1
             : n == 7 && !memcmp(k, "message", 7) ? 2
                                                  : 0;
  if (s->depth != 1) return 0;
  s->field = -1;
  for (f = 0; f < NFIELDS; f++)
    if (strlen(fields[f].name) == n && !memcmp(k, fields[f].name, n)) break;
  if (f == NFIELDS) return 0; /* a field of its own: let be */
  if (s->seen & (1u << f))
    return refuse(s, "the field \"%s\" is given twice", fields[f].name);
  s->seen |= 1u << f;
  s->field = f;
  return 0;
}

static int on_begin(scan_t *s, int t) {
  if (check(s, t)) return 1;
  s->depth++;
  return 0;
}
static int on_begin_object(void *ud) { return on_begin(ud, T_OBJECT); }
static int on_begin_array(void *ud) { return on_begin(ud, T_ARRAY); }

static int on_end(void *ud) {
  scan_t *s = ud;
  s->depth--;
  if (s->depth == 1 && s->field == F_ERROR) {
    if (!s->has_class)
      return refuse(s, "the field \"error\" must be null or an object with "
                    "a string \"class\"");
    s->l->error = 1;
  }
  return 0;
}

static const ludo_json_cb_t CALLBACKS = {
    on_null, on_bool, on_int, on_real, on_string, on_key, on_begin_object,
    on_end, on_begin_array, on_end};

/* What the fields read say of the line: a field missing, the error's
 * class, the trajectory. Returns NULL or why the line is refused. */
static const char *conclude(scan_t *s) {
  eval_line_t *l = s->l;
  char own[64];
  int f;
  for (f = 0; f < NFIELDS; f++)
    if (fields[f].required && !(s->seen & (1u << f))) {
      refuse(s, "no field \"%s\"", fields[f].name);
      return s->why;
    }
  l->cancelled = l->error && strcmp(s->cls, "ECANCELED") == 0;
  l->rerun = l->error && eval_class_rerun(s->cls);
  snprintf(own, sizeof own, "trajectories/%06lld.jsonl", l->episode);
  if (s->traj_string && !s->traj_long && strcmp(s->traj, own) == 0)
    l->has_traj = 1;
  else if (s->traj_string)
    l->traj_bad = 1;
  return NULL;
}

const char *eval_scan_line(eval_line_t *l, char *why, size_t n) {
  scan_t s;
  ludo_json_error_t err;
  int rc;
  memset(&s, 0, sizeof s);
  s.l = l;
  s.field = -1;
  s.why = why;
  s.why_n = n;
  why[0] = '\0';
  l->seed = -1;
  rc = ludo_json_parse(l->line, l->len, 64, &CALLBACKS, &s, &err);
  if (rc != 0 && why[0] == '\0')
    snprintf(why, n, "malformed JSON: %s at column %zu", err.msg,
             err.column);
  return rc != 0 ? why : conclude(&s);
}
