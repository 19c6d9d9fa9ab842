/* eval_merge.c - `ludo eval merge DIR... --out DIR`: combines the folders
 * of a sharded run (--shard I/N) into one: the same run.json (shard
 * null), every record in one results.jsonl ordered by episode, the
 * trajectories, and the summary and report over all of it. Folders of
 * different runs (run.json differing in anything but the shard), an
 * episode in two folders, or episodes none of them has, are refused with
 * what is wrong. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/eval.h"

enum { OPT_OUT = 2 };

static const ludo__cli_opt_t merge_opts[] = {
    {OPT_OUT, "--out", NULL, "DIR", "the merged folder (new, or empty)"},
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

const ludo__cli_cmd_t ludo__cli_cmd_eval_merge = {
    "eval merge", "DIR... --out DIR",
    "merge the folders of a sharded eval run",
    "Combines the output folders of `ludo eval --shard I/N` runs (one per\n"
    "shard) into the folder --out: run.json, results.jsonl (ordered by\n"
    "episode), trajectories/, summary.json and report.html.\n",
    merge_opts,
    "Refuses folders whose run.json differ in anything but the shard, an\n"
    "episode found in two folders, and episodes found in none (it names\n"
    "them): a merged summary covers the whole run or is not written.\n",
    NULL};

typedef struct {
  const char **dirs;
  int ndirs;
  const char *out;
} merge_args_t;

static int parse(int argc, char **argv, merge_args_t *m) {
  const char *val;
  int i = 0, rest = 0, id;
  m->dirs = calloc((size_t)argc + 1, sizeof *m->dirs);
  while ((id = ludo__cli_next(&ludo__cli_cmd_eval_merge, argc, argv, &i,
                              &rest, &val)) != LUDO__CLI_END) {
    if (id == LUDO__CLI_BAD) return LUDO__CLI_USAGE;
    if (id == LUDO__CLI_OPT_HELP) {
      ludo__cli_help(&ludo__cli_cmd_eval_merge, stdout);
      return 0;
    }
    if (id == OPT_OUT)
      m->out = val;
    else
      m->dirs[m->ndirs++] = val;
  }
  if (m->out != NULL && *m->out == '\0') {
    ludo__cli_error("--out takes a folder (got an empty name)");
    return LUDO__CLI_USAGE;
  }
  if (m->ndirs == 0 || m->out == NULL) {
    ludo__cli_error("eval merge needs folders and --out (see ludo eval "
                    "merge --help)");
    return LUDO__CLI_USAGE;
  }
  return -1;
}

/* Every folder's run.json must be the first's, shard aside. */
static json_t *check_runs(const merge_args_t *m) {
  json_t *first = NULL;
  int i;
  for (i = 0; i < m->ndirs; i++) {
    json_t *run = eval_run_read(m->dirs[i]);
    ludo__cli_buf_t diff = {0};
    if (run == NULL) goto bad;
    if (first == NULL) {
      first = run;
      continue;
    }
    eval_run_diff(first, run, 1, &diff);
    json_decref(run);
    if (diff.len > 0) {
      ludo__cli_error("%s is not a shard of the run in %s: run.json differs "
                      "in %s", m->dirs[i], m->dirs[0], diff.p);
      ludo__cli_buf_free(&diff);
      goto bad;
    }
  }
  return first;
bad:
  json_decref(first);
  return NULL;
}

/* Reads every folder's records into `all` (episode -> its folder in
 * `from`), refusing an episode found twice. */
static int gather(const merge_args_t *m, long long total, json_t *all,
                  int *from) {
  int i;
  size_t k;
  for (i = 0; i < m->ndirs; i++) {
    json_t *recs = json_array();
    if (eval_results_read(m->dirs[i], 0, recs) != 0) {
      json_decref(recs);
      return -1;
    }
    for (k = 0; k < json_array_size(recs); k++) {
      json_t *r = json_array_get(recs, k);
      long long ep = json_integer_value(json_object_get(r, "episode"));
      if (ep < 0 || ep >= total) {
        ludo__cli_error("%s: episode %lld is outside the run (0 to %lld)",
                        m->dirs[i], ep, total - 1);
        json_decref(recs);
        return -1;
      }
      if (eval_class_rerun(json_string_value(
              json_object_get(json_object_get(r, "error"), "class")))) {
        if (from[ep] == -1) from[ep] = -2 - i; /* unfinished in folder i */
        continue;
      }
      if (from[ep] >= 0) {
        ludo__cli_error("episode %lld is in both %s and %s: the same shard "
                        "twice?", ep, m->dirs[from[ep]], m->dirs[i]);
        json_decref(recs);
        return -1;
      }
      from[ep] = i;
      json_array_append(all, r);
    }
    json_decref(recs);
  }
  return 0;
}

/* Every episode must have a finished record: none (from -1), or only a
 * cancelled one (from -2 - its folder), is refused. */
static int check_missing(const merge_args_t *m, const int *from,
                         long long total) {
  long long ep, missing = 0, unfinished = 0;
  ludo__cli_buf_t list = {0}, ulist = {0};
  int udir = -1;
  for (ep = 0; ep < total; ep++) {
    if (from[ep] >= 0) continue;
    if (from[ep] == -1) {
      if (++missing <= 10) ludo__cli_buf_printf(&list, " %lld", ep);
      continue;
    }
    if (udir < 0) udir = -2 - from[ep];
    if (++unfinished <= 10) ludo__cli_buf_printf(&ulist, " %lld", ep);
  }
  if (missing > 0)
    ludo__cli_error("%lld of %lld episodes are in none of the folders (a "
                    "shard missing, or unfinished: --resume it):%s%s",
                    missing, total, list.p, missing > 10 ? " ..." : "");
  else if (unfinished > 0)
    ludo__cli_error("%lld of %lld episodes were cancelled or lost by the "
                    "transport (%s and maybe others are unfinished: "
                    "--resume it):%s%s", unfinished, total, m->dirs[udir],
                    ulist.p, unfinished > 10 ? " ..." : "");
  ludo__cli_buf_free(&list);
  ludo__cli_buf_free(&ulist);
  return missing + unfinished > 0 ? -1 : 0;
}

static int cmp_episode(const void *a, const void *b) {
  long long x = json_integer_value(json_object_get(*(json_t *const *)a,
                                                   "episode"));
  long long y = json_integer_value(json_object_get(*(json_t *const *)b,
                                                   "episode"));
  return x < y ? -1 : x > y;
}

/* Copies (or links) a trajectory into the merged folder. */
static void copy_traj(const char *from_dir, const char *to_dir,
                      const char *rel) {
  char src[4400], dst[4400], buf[65536];
  int in, out;
  ssize_t n;
  snprintf(src, sizeof src, "%s/%s", from_dir, rel);
  snprintf(dst, sizeof dst, "%s/%s", to_dir, rel);
  if (link(src, dst) == 0) return;
  if ((in = open(src, O_RDONLY)) < 0) return;
  out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) break;
  close(in);
  if (out >= 0) close(out);
}

/* Orders the records by episode, in place. */
static void sort_records(json_t *all) {
  size_t k, n = json_array_size(all);
  json_t **v = calloc(n + 1, sizeof *v);
  for (k = 0; k < n; k++) v[k] = json_incref(json_array_get(all, k));
  qsort(v, n, sizeof *v, cmp_episode);
  json_array_clear(all);
  for (k = 0; k < n; k++) json_array_append_new(all, v[k]);
  free(v);
}

/* results.jsonl and trajectories/ of the merged folder (`all` in order). */
static int write_results(const merge_args_t *m, json_t *all,
                         const int *from) {
  eval_out_t o;
  char path[4400];
  size_t k;
  int rc = 0;
  memset(&o, 0, sizeof o);
  snprintf(o.dir, sizeof o.dir, "%s", m->out);
  snprintf(path, sizeof path, "%s/trajectories", m->out);
  mkdir(path, 0777);
  snprintf(path, sizeof path, "%s/results.jsonl", m->out);
  o.results = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  for (k = 0; rc == 0 && k < json_array_size(all); k++) {
    json_t *rec = json_array_get(all, k);
    const char *t = json_string_value(json_object_get(rec, "trajectory"));
    long long ep = json_integer_value(json_object_get(rec, "episode"));
    rc = o.results >= 0 ? eval_out_append(&o, rec) : -1;
    if (t != NULL) copy_traj(m->dirs[from[ep]], m->out, t);
  }
  eval_out_close(&o);
  return rc;
}

/* The merged timing: the longest shard's wall time, the earliest start
 * (from the shards' summary.json, when they have one). */
static void shard_timing(const merge_args_t *m, double *wall, char *start,
                         size_t n) {
  int i;
  *wall = 0;
  snprintf(start, n, "%s", "");
  for (i = 0; i < m->ndirs; i++) {
    char path[4400];
    json_t *s, *t;
    const char *at;
    snprintf(path, sizeof path, "%s/summary.json", m->dirs[i]);
    s = json_load_file(path, 0, NULL);
    t = json_object_get(s, "timing");
    if (json_number_value(json_object_get(t, "wall_s")) > *wall)
      *wall = json_number_value(json_object_get(t, "wall_s"));
    at = json_string_value(json_object_get(t, "started_at"));
    if (at != NULL && (start[0] == '\0' || strcmp(at, start) < 0))
      snprintf(start, n, "%s", at);
    json_decref(s);
  }
}

static int merge(const merge_args_t *m) {
  json_t *run = check_runs(m), *all = json_array();
  long long total, ep;
  int *from = NULL, rc = 1, lock = -1;
  char *text, start[64];
  double wall;
  if (run == NULL) goto done;
  total = json_integer_value(json_object_get(run, "episodes_total"));
  from = malloc(((size_t)total + 1) * sizeof *from);
  for (ep = 0; ep < total; ep++) from[ep] = -1;
  if (gather(m, total, all, from) != 0 ||
      check_missing(m, from, total) != 0 ||
      eval_out_lock(m->out, &lock) != 0 ||
      eval_out_fresh(m->out, "merge into a new or empty folder (another "
                             "--out, or empty it first)") != 0)
    goto done;
  sort_records(all);
  json_object_set_new(run, "shard", json_null());
  text = json_dumps(run, JSON_SORT_KEYS | JSON_INDENT(2));
  rc = eval_write_file(m->out, "run.json", text, strlen(text)) != 0 ||
       write_results(m, all, from) != 0;
  free(text);
  shard_timing(m, &wall, start, sizeof start);
  text = rc == 0 ? json_dumps(all, EVAL_JSON_LINE) : NULL;
  if (rc == 0 && (text == NULL || eval_report_write(m->out, run, text,
                                                    strlen(text), wall,
                                                    start) != 0))
    rc = 1;
  free(text);
  if (rc == 0)
    printf("merged %d folders, %lld episodes, into %s\n", m->ndirs, total,
           m->out);
done:
  if (lock >= 0) close(lock);
  free(from);
  json_decref(all);
  json_decref(run);
  return rc;
}

int eval_merge_main(int argc, char **argv) {
  merge_args_t m;
  int rc;
  memset(&m, 0, sizeof m);
  rc = parse(argc, argv, &m);
  if (rc < 0) rc = merge(&m);
  free(m.dirs);
  return rc;
}
