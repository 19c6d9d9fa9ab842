/* eval_output.c - the output folder of `ludo eval` (docs/eval.md): run.json
 * (the configuration as resolved), results.jsonl (one record per episode,
 * appended and flushed per line), and what --resume reads back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/eval.h"

int eval_write_file(const char *dir, const char *name, const char *text,
                    size_t len) {
  char path[4400], tmp[4400];
  FILE *f;
  int ok, err = 0;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  f = fopen(tmp, "w");
  ok = f != NULL && fwrite(text, 1, len, f) == len;
  if (!ok) err = errno;
  if (f != NULL && fclose(f) != 0 && ok) ok = 0, err = errno;
  if (ok && rename(tmp, path) != 0) ok = 0, err = errno;
  if (!ok) {
    unlink(tmp); /* no part written is left behind */
    ludo__cli_error("cannot write %s: %s", path, strerror(err));
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

/* A line of results.jsonl read with jansson: the record, or NULL with
 * *bad saying why (jansson's message in `err`, or that it is JSON but no
 * object with a whole-number "episode"). */
static json_t *load_record(const char *p, size_t n, json_error_t *err,
                           const char **bad) {
  json_t *rec = json_loadb(p, n, 0, err);
  if (rec == NULL) {
    *bad = err->text;
    return NULL;
  }
  if (!json_is_object(rec) ||
      !json_is_integer(json_object_get(rec, "episode"))) {
    json_decref(rec);
    *bad = NULL;
    return NULL;
  }
  return rec;
}

/* Says line `line` of `path` is not a result record: malformed JSON
 * (`json_err`, jansson's message) or JSON that is not a record (NULL). */
static void not_a_record(const char *path, size_t line, const char *json_err) {
  if (json_err != NULL)
    ludo__cli_error("%s:%zu: not a result record (malformed JSON: %s)", path,
                    line, json_err);
  else
    ludo__cli_error("%s:%zu: not a result record (not a JSON object with a "
                    "whole-number \"episode\")", path, line);
}

/* Parses the complete lines of buf[0..n) into `all`; *torn is where an
 * unterminated last line starts (n when none). */
static int parse_lines(const char *path, const char *buf, size_t n,
                       json_t *all, size_t *torn) {
  size_t at = 0, line = 0;
  json_error_t err;
  const char *bad;
  *torn = n;
  while (at < n) {
    const char *nl = memchr(buf + at, '\n', n - at);
    json_t *rec;
    line++;
    if (nl == NULL) {
      *torn = at;
      break;
    }
    rec = load_record(buf + at, (size_t)(nl - buf) - at, &err, &bad);
    if (rec == NULL) {
      not_a_record(path, line, bad);
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

/* The error classes of the server's failures, not the policy's: the
 * transport (ECONNECT: not reached, EDISCONNECTED: went away, ENOREPLY:
 * no reply in time) and a server at its session limit (ECAPACITY). An
 * episode failing so is lost (docs/eval.md "Server outages"); the list
 * is lua/ludo/eval/summary.lua's LOST too. */
static const char *const lost_classes[] = {"ECONNECT", "EDISCONNECTED",
                                           "ENOREPLY", "ECAPACITY"};
#define NLOST (sizeof lost_classes / sizeof lost_classes[0])

int eval_class_lost(const char *cls) {
  size_t i;
  for (i = 0; cls != NULL && i < NLOST; i++)
    if (!strcmp(cls, lost_classes[i])) return 1;
  return 0;
}

int eval_class_rerun(const char *cls) {
  return cls != NULL && (!strcmp(cls, "ECANCELED") || eval_class_lost(cls));
}

/* The name of episode `ep`'s trajectory file, in the output folder. */
static void traj_name(long long ep, char *name, size_t n) {
  snprintf(name, n, "trajectories/%06lld.jsonl", ep);
}

/* Calls fn for each complete line of buf[0..n) (the file at `path`, its
 * first line numbered first_line + 1); *at is where the lines it read
 * end. Returns 0 or -1 after saying what was wrong. */
static int scan_lines(const char *path, const char *buf, size_t n,
                      size_t first_line, eval_scan_fn fn, void *ud,
                      size_t *at) {
  size_t line = first_line;
  *at = 0;
  while (*at < n) {
    const char *nl = memchr(buf + *at, '\n', n - *at), *why;
    eval_line_t l;
    char bad[300];
    line++;
    if (nl == NULL) break;
    memset(&l, 0, sizeof l);
    l.line = buf + *at;
    l.len = (size_t)(nl - buf) - *at;
    if (eval_scan_line(&l, bad, sizeof bad) != NULL) {
      ludo__cli_error("%s:%zu: not a result record (%s)", path, line, bad);
      return -1;
    }
    if ((why = fn(ud, &l)) != NULL) {
      ludo__cli_error("%s:%zu: %s", path, line, why);
      return -1;
    }
    *at = (size_t)(nl - buf) + 1;
  }
  return 0;
}

/* Calls fn for each complete line of buf[0..n) (the file at `path`);
 * see eval_results_scan. */
static int scan_buf(const char *path, const char *buf, size_t n, int repair,
                    eval_scan_fn fn, void *ud) {
  size_t at;
  if (scan_lines(path, buf, n, 0, fn, ud, &at) != 0) return -1;
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

int eval_results_follow(const char *dir, long long *offset, eval_scan_fn fn,
                        void *ud) {
  char path[4400];
  ludo__cli_buf_t b = {0};
  char chunk[65536];
  size_t at = 0;
  ssize_t got;
  int fd, rc;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return 0; /* none yet */
  while ((got = pread(fd, chunk, sizeof chunk, (off_t)(*offset + (long long)
                                                       b.len))) > 0)
    ludo__cli_buf_add(&b, chunk, (size_t)got);
  close(fd);
  /* Line numbers are not known here: the records are counted from 0. */
  rc = b.len > 0 ? scan_lines(path, b.p, b.len, 0, fn, ud, &at) : 0;
  *offset += (long long)at;
  ludo__cli_buf_free(&b);
  return rc;
}

/* The lines of the records, for eval_results_text. */
typedef struct {
  rec_key_t *keys;
  const char **line;
  size_t *len;
  size_t n, cap;
} lines_t;

static const char *collect(void *ud, const eval_line_t *ln) {
  lines_t *l = ud;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 1024;
    l->keys = realloc(l->keys, l->cap * sizeof *l->keys);
    l->line = realloc(l->line, l->cap * sizeof *l->line);
    l->len = realloc(l->len, l->cap * sizeof *l->len);
  }
  l->keys[l->n].episode = ln->episode;
  l->keys[l->n].pos = l->n;
  l->line[l->n] = ln->line;
  l->len[l->n++] = ln->len;
  return NULL;
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
  if (rc == 0 && l.n > 0) qsort(l.keys, l.n, sizeof *l.keys, key_cmp);
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

const char *eval_record_check(eval_plan_t *plan, const eval_line_t *l,
                              char *why, size_t n) {
  eval_ep_t *e = eval_plan_find(plan, l->episode);
  char own[64];
  if (e == NULL) {
    snprintf(why, n, "episode %lld is not one of this run's%s (0 to %lld): "
             "not this run's record", l->episode,
             plan->n < (size_t)plan->total ? " shard's episodes"
                                           : " episodes",
             plan->total - 1);
    return why;
  }
  if (l->seed != (long long)e->seed) {
    snprintf(why, n, "episode %lld has seed %lld, not this run's %llu: not "
             "this run's record", l->episode, l->seed,
             (unsigned long long)e->seed);
    return why;
  }
  if (l->traj_bad) {
    traj_name(l->episode, own, sizeof own);
    snprintf(why, n, "episode %lld: the field \"trajectory\" must be null "
             "or \"%s\" (the episode's own file), not another path: not "
             "read", l->episode, own);
    return why;
  }
  /* A run writes one final record per episode (--resume runs only those
   * without one): a second is another run's, or an edit. */
  if (e->done && !l->rerun) {
    snprintf(why, n, "episode %lld has a final record on an earlier line "
             "already: a second one is not this run's", l->episode);
    return why;
  }
  e->done = !l->rerun;
  e->error = l->error;
  e->has_traj = l->has_traj;
  e->reward = l->reward;
  return NULL;
}

typedef struct {
  eval_plan_t *plan;
  long long *already;
  char why[300];
} mark_t;

/* An episode with a record counts as done, unless it is to run again
 * (cancelled, or lost by the transport): the last record counts. */
static const char *mark_done(void *ud, const eval_line_t *l) {
  mark_t *m = ud;
  eval_ep_t *e = eval_plan_find(m->plan, l->episode);
  int was = e != NULL && e->done;
  if (eval_record_check(m->plan, l, m->why, sizeof m->why) != NULL)
    return m->why;
  *m->already += e->done - was;
  return NULL;
}

/* Records pointing to trajectory files that are gone: said, not fatal
 * (the records stand; the report links nothing for them). */
static void missing_trajectories(const char *dir, const eval_plan_t *plan) {
  char path[4400];
  size_t i, missing = 0;
  for (i = 0; i < plan->n; i++) {
    if (!plan->eps[i].done || !plan->eps[i].has_traj) continue;
    snprintf(path, sizeof path, "%s/trajectories/%06lld.jsonl", dir,
             plan->eps[i].index);
    missing += access(path, F_OK) != 0;
  }
  if (missing > 0)
    fprintf(stderr, "ludo eval: warning: %zu records of %s/results.jsonl "
            "point to trajectory files that are missing\n", missing, dir);
}

/* --resume: the folder's run must be this one; marks what is done. */
static int resume_read(const eval_cfg_t *cfg, json_t *run, eval_plan_t *plan,
                       long long *already) {
  json_t *old = eval_run_read(cfg->out);
  ludo__cli_buf_t diff = {0};
  mark_t mark;
  memset(&mark, 0, sizeof mark);
  mark.plan = plan;
  mark.already = already;
  if (old == NULL) return -1;
  eval_run_diff(old, run, 0, &diff);
  json_decref(old);
  if (diff.len > 0) {
    ludo__cli_error("--resume: %s/run.json is another run (it differs in: "
                    "%s)%s; resume with the same run file and flags, or use "
                    "another --out", cfg->out, diff.p,
                    strstr(diff.p, "code") != NULL
                        ? " (code: the environment's files or the policy's "
                          "Lua files were edited since)"
                        : "");
    ludo__cli_buf_free(&diff);
    return -1;
  }
  if (eval_results_scan(cfg->out, 1, mark_done, &mark) != 0) return -1;
  missing_trajectories(cfg->out, plan);
  return 0;
}

/* 1 when `dir` holds anything but the lock (or cannot be read as a
 * folder). */
static int non_empty(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int any = 0;
  if (d == NULL) return errno != ENOENT;
  while (!any && (e = readdir(d)) != NULL)
    any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
          strcmp(e->d_name, EVAL_LOCK) != 0;
  closedir(d);
  return any;
}

/* 1 when DIR/name is a file with something in it. */
static int has_bytes(const char *dir, const char *name) {
  char path[4400];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &sb) == 0 && sb.st_size > 0;
}

int eval_out_lock(const char *dir, int *fd) {
  char path[4400];
  *fd = -1;
  if (make_dirs(dir) != 0) {
    ludo__cli_error("cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/%s", dir, EVAL_LOCK);
  *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (*fd < 0) {
    ludo__cli_error("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      ludo__cli_error("another ludo eval is writing into %s (it holds %s): "
                      "wait for it to end, or use another --out", dir, path);
    else
      ludo__cli_error("cannot lock %s: %s", path, strerror(errno));
    close(*fd);
    *fd = -1;
    return -1;
  }
  return 0;
}

int eval_out_fresh(const char *dir, const char *what_to_do) {
  if (non_empty(dir)) {
    ludo__cli_error("the output folder %s is not empty: %s (results of two "
                    "runs are never mixed)", dir, what_to_do);
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
  o->results = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (o->results < 0) {
    ludo__cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* Which way to open the folder: a new run (in an empty folder, or one a
 * run left without records: its setup failed), or --resume. Returns 0
 * (new), 1 (resume) or -1 after saying why neither. */
static int open_how(const eval_cfg_t *cfg) {
  int runjson = has_bytes(cfg->out, "run.json");
  int records = has_bytes(cfg->out, "results.jsonl");
  if (runjson && !records) return 0; /* taken over */
  if (cfg->resume && runjson) return 1;
  if (cfg->resume && non_empty(cfg->out)) {
    ludo__cli_error("--resume: %s/run.json is missing, so the records in %s "
                    "cannot be told to be this run's; use another --out",
                    cfg->out, cfg->out);
    return -1;
  }
  return eval_out_fresh(cfg->out, "give --resume to go on with the run in "
                                  "it, or another --out");
}

static void out_init(eval_out_t *o, const eval_cfg_t *cfg) {
  memset(o, 0, sizeof *o);
  o->lock = o->results = -1;
  snprintf(o->dir, sizeof o->dir, "%s", cfg->out);
}

int eval_out_open_worker(eval_out_t *o, const eval_cfg_t *cfg) {
  out_init(o, cfg);
  return open_results(o, cfg);
}

int eval_out_open(eval_out_t *o, const eval_cfg_t *cfg, json_t *run,
                  eval_plan_t *plan, long long *already) {
  char *text;
  int rc;
  out_init(o, cfg);
  *already = 0;
  if (eval_out_lock(cfg->out, &o->lock) != 0) return -1;
  rc = open_how(cfg);
  if (rc == 1) rc = resume_read(cfg, run, plan, already);
  if (rc != 0) return -1;
  text = json_dumps(run, JSON_SORT_KEYS | JSON_INDENT(2));
  rc = eval_write_file(cfg->out, "run.json", text, strlen(text));
  free(text);
  if (rc != 0) return -1;
  return open_results(o, cfg);
}

/* Writes the n bytes at p (0), or -1 with errno set (a write of none:
 * EIO). */
static int write_all(int fd, const char *p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = EIO;
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

/* Appends line[0..n) whole or not at all: under an exclusive flock of
 * results.jsonl (a run's worker processes append to it too, each on an
 * open file of its own), from the size it has then; a write that fails
 * (a full disk, the file size limit) cuts the file back to that size, so
 * no line is left half written for later records to follow. Returns 0,
 * or -1 with errno the write's error (*cut: 0, or the error that kept
 * the file from being cut back). */
static int append_whole(int fd, const char *line, size_t n, int *cut) {
  struct stat sb;
  int rc, err;
  *cut = 0;
  while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {}
  if (rc != 0) return -1;
  if (fstat(fd, &sb) != 0) {
    err = errno;
    flock(fd, LOCK_UN);
    errno = err;
    return -1;
  }
  rc = write_all(fd, line, n);
  err = errno;
  if (rc != 0 && ftruncate(fd, sb.st_size) != 0) *cut = errno;
  flock(fd, LOCK_UN);
  errno = err;
  return rc;
}

/* A record is one write(): with O_APPEND the kernel puts it whole at the
 * end, so the worker processes of a run (eval_workers.c) append to the
 * same file without mixing their lines. A failed append is said once and
 * marks the output broken: nothing more is appended (the caller stops:
 * a run's --resume runs the episodes without a record). */
int eval_out_append(eval_out_t *o, json_t *record) {
  char *line;
  size_t n;
  int cut;
  if (o->broken) return -1;
  if ((line = eval_json_dumps(record)) == NULL) {
    ludo__cli_error("cannot write %s/results.jsonl: a record could not be "
                    "made (out of memory)", o->dir);
    return -1;
  }
  n = strlen(line) + 1;
  line[n - 1] = '\n'; /* its NUL: the line's end */
  if (append_whole(o->results, line, n, &cut) != 0) {
    int err = errno;
    o->broken = 1;
    ludo__cli_error("cannot write %s/results.jsonl: %s; episode %lld's "
                    "record is not in it, %s%s%s", o->dir, strerror(err),
                    (long long)json_integer_value(json_object_get(record,
                                                                  "episode")),
                    cut ? "and the part written could not be cut (" :
                          "the file is as it was before it",
                    cut ? strerror(cut) : "", cut ? ")" : "");
  }
  free(line);
  return o->broken ? -1 : 0;
}

void eval_out_close(eval_out_t *o) {
  if (o->results >= 0) close(o->results);
  o->results = -1;
}

void eval_out_unlock(eval_out_t *o) {
  if (o->lock > 0) close(o->lock);
  o->lock = -1;
}
