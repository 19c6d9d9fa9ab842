/* eval_output.c - the output folder of `ludo eval` (docs/eval.md): run.json
 * (the configuration as resolved), results.jsonl (one record per episode,
 * appended and flushed per line), and what --resume reads back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/eval.h"

int eval_write_file(const char *dir, const char *name, const char *text,
                    size_t len) {
  char path[4400], tmp[4400];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  f = fopen(tmp, "w");
  if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0 ||
      rename(tmp, path) != 0) {
    ludo__cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

json_t *eval_run_read(const char *dir) {
  char path[4400];
  json_error_t err;
  json_t *run;
  snprintf(path, sizeof path, "%s/run.json", dir);
  run = json_load_file(path, 0, &err);
  if (!json_is_object(run)) {
    ludo__cli_error("%s: %s", path, run ? "not a JSON object" : err.text);
    json_decref(run);
    return NULL;
  }
  return run;
}

/* 1 when `dir` holds anything (or cannot be read as a folder). */
static int non_empty(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int any = 0;
  if (d == NULL) return errno != ENOENT;
  while (!any && (e = readdir(d)) != NULL)
    any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return any;
}

static int make_dirs(const char *dir) {
  char p[4096];
  size_t i, n = strlen(dir);
  if (n >= sizeof p) return -1;
  memcpy(p, dir, n + 1);
  for (i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    p[i] = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
    p[i] = i < n ? '/' : '\0';
  }
  return 0;
}

/* ---- reading results.jsonl -------------------------------------------- */

/* Reads the whole file (caller frees); *n its size. NULL when absent. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long size;
  *n = 0;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)) &&
      fread(buf, 1, (size_t)size, f) == (size_t)size) {
    *n = (size_t)size;
    buf[size] = '\0';
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

typedef struct {
  long long episode;
  size_t pos;
} rec_key_t;

static int key_cmp(const void *a, const void *b) {
  const rec_key_t *x = a, *y = b;
  if (x->episode != y->episode) return x->episode < y->episode ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Keeps the last record of each episode, ordered by episode. */
static void keep_last(json_t *all, json_t *into) {
  size_t i, n = json_array_size(all);
  rec_key_t *keys = calloc(n + 1, sizeof *keys);
  for (i = 0; i < n; i++) {
    keys[i].episode = json_integer_value(
        json_object_get(json_array_get(all, i), "episode"));
    keys[i].pos = i;
  }
  qsort(keys, n, sizeof *keys, key_cmp);
  for (i = 0; i < n; i++)
    if (i + 1 == n || keys[i + 1].episode != keys[i].episode)
      json_array_append(into, json_array_get(all, keys[i].pos));
  free(keys);
}

/* Parses the complete lines of buf[0..n) into `all`; *torn is where an
 * unterminated last line starts (n when none). */
static int parse_lines(const char *path, const char *buf, size_t n,
                       json_t *all, size_t *torn) {
  size_t at = 0, line = 0;
  *torn = n;
  while (at < n) {
    const char *nl = memchr(buf + at, '\n', n - at);
    json_t *rec;
    line++;
    if (nl == NULL) {
      *torn = at;
      break;
    }
    rec = json_loadb(buf + at, (size_t)(nl - buf) - at, 0, NULL);
    if (!json_is_object(rec) ||
        !json_is_integer(json_object_get(rec, "episode"))) {
      ludo__cli_error("%s:%zu: not a result record", path, line);
      json_decref(rec);
      return -1;
    }
    json_array_append_new(all, rec);
    at = (size_t)(nl - buf) + 1;
  }
  return 0;
}

/* Says a torn last line was found (from `torn` to n) and with `repair`
 * cuts it from the file. Returns 0 or -1. */
static int torn_line(const char *path, size_t torn, size_t n, int repair) {
  if (torn >= n) return 0;
  fprintf(stderr, "ludo: %s: the last line was cut short (%zu bytes, a run "
          "killed while writing it); %s\n", path, n - torn,
          repair ? "removed" : "left out");
  if (repair && truncate(path, (off_t)torn) != 0) {
    ludo__cli_error("cannot cut %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int eval_results_read(const char *dir, int repair, json_t *into) {
  char path[4400];
  size_t n, torn;
  char *buf;
  json_t *all = json_array();
  int rc;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  buf = slurp(path, &n);
  rc = buf ? parse_lines(path, buf, n, all, &torn) : 0;
  if (rc == 0 && buf != NULL) rc = torn_line(path, torn, n, repair);
  if (rc == 0) keep_last(all, into);
  json_decref(all);
  free(buf);
  return rc;
}

/* A line's episode and whether it was cancelled: read at once from a
 * line as ludo writes them ({"episode":N,... "class":"ECANCELED" ...}: a
 * string's quotes are escaped, so no value can fake the key), else with
 * jansson. Returns 0, or -1 for a line that is not a record. */
static int scan_line(const char *p, size_t n, long long *ep, int *cancelled) {
  static const char head[] = "{\"episode\":", cls[] =
      "\"class\":\"ECANCELED\"";
  const size_t hn = sizeof head - 1;
  json_t *rec;
  char *end;
  if (n > hn && memcmp(p, head, hn) == 0) {
    *ep = strtoll(p + hn, &end, 10);
    if (end > p + hn && *end == ',') {
      *cancelled = memmem(p, n, cls, sizeof cls - 1) != NULL;
      return 0;
    }
  }
  rec = json_loadb(p, n, 0, NULL);
  if (!json_is_integer(json_object_get(rec, "episode"))) {
    json_decref(rec);
    return -1;
  }
  *ep = json_integer_value(json_object_get(rec, "episode"));
  *cancelled = !strcmp("ECANCELED", json_string_value(json_object_get(
      json_object_get(rec, "error"), "class")) ?: "");
  json_decref(rec);
  return 0;
}

/* Calls fn for each complete line of buf[0..n) (the file at `path`);
 * see eval_results_scan. */
static int scan_buf(const char *path, const char *buf, size_t n, int repair,
                    eval_scan_fn fn, void *ud) {
  size_t at = 0, line = 0;
  while (at < n) {
    const char *nl = memchr(buf + at, '\n', n - at);
    long long ep;
    int cancelled;
    line++;
    if (nl == NULL) break;
    if (scan_line(buf + at, (size_t)(nl - buf) - at, &ep, &cancelled)) {
      ludo__cli_error("%s:%zu: not a result record", path, line);
      return -1;
    }
    fn(ud, ep, cancelled, buf + at, (size_t)(nl - buf) - at);
    at = (size_t)(nl - buf) + 1;
  }
  return torn_line(path, at, n, repair);
}

int eval_results_scan(const char *dir, int repair, eval_scan_fn fn,
                      void *ud) {
  char path[4400];
  size_t n;
  char *buf;
  int rc;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  buf = slurp(path, &n);
  rc = buf ? scan_buf(path, buf, n, repair, fn, ud) : 0;
  free(buf);
  return rc;
}

/* The lines of the records, for eval_results_text. */
typedef struct {
  rec_key_t *keys;
  const char **line;
  size_t *len;
  size_t n, cap;
} lines_t;

static void collect(void *ud, long long ep, int cancelled, const char *line,
                    size_t len) {
  lines_t *l = ud;
  (void)cancelled;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 1024;
    l->keys = realloc(l->keys, l->cap * sizeof *l->keys);
    l->line = realloc(l->line, l->cap * sizeof *l->line);
    l->len = realloc(l->len, l->cap * sizeof *l->len);
  }
  l->keys[l->n].episode = ep;
  l->keys[l->n].pos = l->n;
  l->line[l->n] = line;
  l->len[l->n++] = len;
}

int eval_results_text(const char *dir, ludo__cli_buf_t *text,
                      long long *count) {
  lines_t l = {0};
  size_t i;
  char path[4400];
  char *buf;
  size_t n;
  int rc;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  buf = slurp(path, &n);
  rc = buf ? scan_buf(path, buf, n, 0, collect, &l) : 0;
  *count = 0;
  ludo__cli_buf_printf(text, "[");
  if (rc == 0) qsort(l.keys, l.n, sizeof *l.keys, key_cmp);
  for (i = 0; rc == 0 && i < l.n; i++) {
    size_t k = l.keys[i].pos;
    if (i + 1 < l.n && l.keys[i + 1].episode == l.keys[i].episode) continue;
    ludo__cli_buf_printf(text, "%s%.*s", *count ? "," : "", (int)l.len[k],
                         l.line[k]);
    ++*count;
  }
  ludo__cli_buf_printf(text, "]");
  free(l.keys);
  free(l.line);
  free(l.len);
  free(buf);
  return rc;
}

/* ---- opening the folder ------------------------------------------------ */

/* The keys two run.json objects differ in, "execution" aside (and the
 * shard too when `but_shard`). Empty: the same run. */
void eval_run_diff(json_t *a, json_t *b, int but_shard, ludo__cli_buf_t *d) {
  const char *k;
  json_t *v;
  json_object_foreach(a, k, v) {
    if (strcmp(k, "execution") == 0 || (but_shard && !strcmp(k, "shard")))
      continue;
    if (!json_equal(v, json_object_get(b, k)))
      ludo__cli_buf_printf(d, "%s%s", d->len ? ", " : "", k);
  }
  json_object_foreach(b, k, v) {
    if (strcmp(k, "execution") == 0 || (but_shard && !strcmp(k, "shard")))
      continue;
    if (json_object_get(a, k) == NULL)
      ludo__cli_buf_printf(d, "%s%s", d->len ? ", " : "", k);
  }
}

typedef struct {
  eval_plan_t *plan;
  long long *already;
} mark_t;

/* An episode with a record counts as done, unless it was cancelled. */
static void mark_done(void *ud, long long ep, int cancelled,
                      const char *line, size_t len) {
  mark_t *m = ud;
  (void)line;
  (void)len;
  eval_ep_t *e = eval_plan_find(m->plan, ep);
  if (e == NULL) return;
  if (!e->done && !cancelled) ++*m->already;
  if (e->done && cancelled) --*m->already; /* cancelled later: again */
  e->done = !cancelled;
}

/* --resume: the folder's run must be this one; marks what is done. */
static int resume_read(const eval_cfg_t *cfg, json_t *run, eval_plan_t *plan,
                       long long *already) {
  json_t *old = eval_run_read(cfg->out);
  ludo__cli_buf_t diff = {0};
  mark_t mark = {plan, already};
  if (old == NULL) return -1;
  eval_run_diff(old, run, 0, &diff);
  json_decref(old);
  if (diff.len > 0) {
    ludo__cli_error("--resume: %s/run.json is another run (it differs in: "
                    "%s); resume with the same run file and flags, or use "
                    "another --out", cfg->out, diff.p);
    ludo__cli_buf_free(&diff);
    return -1;
  }
  return eval_results_scan(cfg->out, 1, mark_done, &mark) == 0 ? 0 : -1;
}

int eval_out_fresh(const char *dir) {
  if (non_empty(dir)) {
    ludo__cli_error("the output folder %s is not empty: give --resume to go "
                    "on with the run in it, or another --out (results of "
                    "two runs are never mixed)", dir);
    return -1;
  }
  if (make_dirs(dir) != 0) {
    ludo__cli_error("cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  return 0;
}

static int open_results(eval_out_t *o, const eval_cfg_t *cfg) {
  char path[4400];
  snprintf(path, sizeof path, "%s/trajectories", cfg->out);
  if (cfg->trajectories && mkdir(path, 0777) != 0 && errno != EEXIST) {
    ludo__cli_error("cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/results.jsonl", cfg->out);
  o->results = fopen(path, "a");
  if (o->results == NULL) {
    ludo__cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int eval_out_open(eval_out_t *o, const eval_cfg_t *cfg, json_t *run,
                  eval_plan_t *plan, long long *already) {
  char path[4400];
  struct stat sb;
  char *text;
  int rc;
  memset(o, 0, sizeof *o);
  snprintf(o->dir, sizeof o->dir, "%s", cfg->out);
  snprintf(path, sizeof path, "%s/run.json", cfg->out);
  *already = 0;
  if (cfg->resume && stat(path, &sb) == 0)
    rc = resume_read(cfg, run, plan, already);
  else
    rc = eval_out_fresh(cfg->out);
  if (rc != 0) return -1;
  text = json_dumps(run, JSON_SORT_KEYS | JSON_INDENT(2));
  rc = eval_write_file(cfg->out, "run.json", text, strlen(text));
  free(text);
  if (rc != 0) return -1;
  return open_results(o, cfg);
}

int eval_out_append(eval_out_t *o, json_t *record) {
  char *line = json_dumps(record, EVAL_JSON_LINE);
  int rc = 0;
  if (line == NULL || fputs(line, o->results) < 0 ||
      fputc('\n', o->results) < 0 || fflush(o->results) != 0) {
    ludo__cli_error("cannot write %s/results.jsonl: %s", o->dir,
                    strerror(errno));
    rc = -1;
  }
  free(line);
  return rc;
}

void eval_out_close(eval_out_t *o) {
  if (o->results != NULL) fclose(o->results);
  o->results = NULL;
}
