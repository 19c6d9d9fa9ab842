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

/* A folder's shard as "I/N", or "none (run without --shard)". */
static void shard_text(json_t *run, char *buf, size_t n) {
  json_t *sh = json_object_get(run, "shard");
  if (!json_is_object(sh))
    snprintf(buf, n, "none (run without --shard)");
  else
    snprintf(buf, n, "%lld/%lld",
             (long long)json_integer_value(json_object_get(sh, "index")),
             (long long)json_integer_value(json_object_get(sh, "count")));
}

/* Folder i's shard against the first's: both shards, of the same count
 * (slices of one split), with other indices. Says what is wrong and
 * returns -1, or 0. */
static int check_shard(const merge_args_t *m, json_t *first, json_t *run,
                       int i) {
  json_t *a = json_object_get(first, "shard"), *b = json_object_get(run,
                                                                    "shard");
  char sa[64], sb[64];
  shard_text(first, sa, sizeof sa);
  shard_text(run, sb, sizeof sb);
  if (!json_is_object(a) || !json_is_object(b)) {
    ludo__cli_error("%s is not a shard (run without --shard): merge "
                    "combines the folders of one run's --shard I/N",
                    m->dirs[json_is_object(a) ? i : 0]);
    return -1;
  }
  if (!json_equal(json_object_get(a, "count"),
                  json_object_get(b, "count"))) {
    ludo__cli_error("%s is shard %s and %s is shard %s: their shard counts "
                    "differ, so they are not slices of one split (merge the "
                    "folders of one --shard I/N)", m->dirs[0], sa,
                    m->dirs[i], sb);
    return -1;
  }
  if (json_equal(a, b)) {
    ludo__cli_error("%s and %s are both shard %s: the same shard twice",
                    m->dirs[0], m->dirs[i], sa);
    return -1;
  }
  return 0;
}

/* Every folder's run.json must be the first's, shard aside, and its
 * shard of the same count. */
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
    if (diff.len == 0 && check_shard(m, first, run, i) != 0) {
      json_decref(run);
      goto bad;
    }
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

/* The episodes of a folder from its run.json (seed, episodes_total,
 * shard), without their tasks: what eval_record_check needs. Returns 0,
 * or -1 after saying why. */
static int bare_plan(const char *dir, eval_plan_t *plan) {
  json_t *run = eval_run_read(dir), *sh;
  long long seed, i, index = 0, count = 1;
  if (run == NULL) return -1;
  seed = json_integer_value(json_object_get(run, "seed"));
  plan->total = json_integer_value(json_object_get(run, "episodes_total"));
  sh = json_object_get(run, "shard");
  if (json_is_object(sh)) {
    index = json_integer_value(json_object_get(sh, "index"));
    count = json_integer_value(json_object_get(sh, "count"));
  }
  json_decref(run);
  if (count < 1 || index < 0 || index >= count || plan->total < 0) {
    ludo__cli_error("%s/run.json: its shard or episodes_total is not a "
                    "run's", dir);
    return -1;
  }
  plan->n = (size_t)(index < plan->total
                         ? (plan->total - index + count - 1) / count : 0);
  plan->eps = calloc(plan->n + 1, sizeof *plan->eps);
  for (i = 0; i < (long long)plan->n; i++) {
    plan->eps[i].index = index + i * count;
    plan->eps[i].seed = eval_episode_seed(seed, plan->eps[i].index);
    plan->eps[i].task_index = -1;
  }
  return 0;
}

/* One folder's records as its lines are read: each checked as --resume
 * checks it (eval_record_check), the last of each episode kept (NULL:
 * none; JSON null: to run again, cancelled or lost by the transport). */
typedef struct {
  eval_plan_t plan;
  json_t **last;           /* by position in plan.eps */
  char why[300];
} shard_t;

static const char *take_line(void *ud, const eval_line_t *l) {
  shard_t *sh = ud;
  eval_ep_t *e;
  json_t *rec;
  json_error_t jerr;
  if (eval_record_check(&sh->plan, l, sh->why, sizeof sh->why) != NULL)
    return sh->why;
  e = eval_plan_find(&sh->plan, l->episode);
  rec = l->rerun ? json_null() : json_loadb(l->line, l->len, 0, &jerr);
  if (rec == NULL) { /* JSON eval_scan_line took: jansson's own limits */
    snprintf(sh->why, sizeof sh->why, "not a record jansson reads (%s)",
             jerr.text);
    return sh->why;
  }
  json_decref(sh->last[e - sh->plan.eps]);
  sh->last[e - sh->plan.eps] = rec;
  return NULL;
}

/* Adds folder i's last records to `all` (episode -> its folder in
 * `from`), refusing an episode another folder has too. */
static int add_shard(const merge_args_t *m, int i, shard_t *sh, json_t *all,
                     int *from) {
  size_t k;
  for (k = 0; k < sh->plan.n; k++) {
    long long ep = sh->plan.eps[k].index;
    if (sh->last[k] == NULL) continue;
    if (json_is_null(sh->last[k])) {
      if (from[ep] == -1) from[ep] = -2 - i; /* unfinished in folder i */
      continue;
    }
    if (from[ep] >= 0) {
      ludo__cli_error("episode %lld is in both %s and %s: the same shard "
                      "twice?", ep, m->dirs[from[ep]], m->dirs[i]);
      return -1;
    }
    from[ep] = i;
    json_array_append(all, sh->last[k]);
  }
  return 0;
}

/* Reads every folder's records into `all` (episode -> its folder in
 * `from`): the records of a folder must be its run's (episode in its
 * shard, seed, trajectory: eval_record_check) and an episode is in one
 * folder only. */
static int gather(const merge_args_t *m, json_t *all, int *from) {
  int i, rc = 0;
  size_t k;
  for (i = 0; rc == 0 && i < m->ndirs; i++) {
    shard_t sh;
    memset(&sh, 0, sizeof sh);
    rc = bare_plan(m->dirs[i], &sh.plan);
    if (rc == 0) {
      sh.last = calloc(sh.plan.n + 1, sizeof *sh.last);
      rc = eval_results_scan(m->dirs[i], 0, take_line, &sh);
    }
    if (rc == 0) rc = add_shard(m, i, &sh, all, from);
    for (k = 0; sh.last != NULL && k < sh.plan.n; k++)
      json_decref(sh.last[k]);
    free(sh.last);
    eval_plan_free(&sh.plan);
  }
  return rc;
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

/* Copies `fd` (open to read) into the new file `dst`. */
static int copy_fd(int in, const char *dst) {
  char buf[65536];
  ssize_t n = 0;
  int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 0666);
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) n = -1;
  if (out < 0 || n < 0 || close(out) != 0) {
    ludo__cli_error("cannot write %s: %s", dst, strerror(errno));
    return -1;
  }
  return 0;
}

/* Brings episode ep's trajectory from `from_dir` into `to_dir`: only
 * trajectories/NNNNNN.jsonl of the episode's own number is read and
 * written (never a path from a record), a regular file (not a symbolic
 * link), into a new file (O_EXCL). Linked when both folders are on one
 * file system, else copied. A file that is missing is counted in
 * *missing; returns 0, or -1 after saying why it could not be written. */
static int copy_traj(const char *from_dir, const char *to_dir, long long ep,
                     long long *missing) {
  char src[4400], dst[4400];
  struct stat sb;
  int in, rc;
  snprintf(src, sizeof src, "%s/trajectories/%06lld.jsonl", from_dir, ep);
  snprintf(dst, sizeof dst, "%s/trajectories/%06lld.jsonl", to_dir, ep);
  in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0 || fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    ++*missing;
    if (in >= 0) close(in);
    return 0;
  }
  /* linkat without AT_SYMLINK_FOLLOW links what src names, which the
   * open above found to be a regular file. */
  rc = linkat(AT_FDCWD, src, AT_FDCWD, dst, 0) == 0 ? 0 : copy_fd(in, dst);
  close(in);
  return rc;
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
  long long missing = 0;
  int rc = 0;
  memset(&o, 0, sizeof o);
  snprintf(o.dir, sizeof o.dir, "%s", m->out);
  snprintf(path, sizeof path, "%s/trajectories", m->out);
  mkdir(path, 0777);
  snprintf(path, sizeof path, "%s/results.jsonl", m->out);
  o.results = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                             O_CLOEXEC, 0666);
  if (o.results < 0)
    ludo__cli_error("cannot write %s: %s", path, strerror(errno));
  for (k = 0; rc == 0 && k < json_array_size(all); k++) {
    json_t *rec = json_array_get(all, k);
    long long ep = json_integer_value(json_object_get(rec, "episode"));
    rc = o.results >= 0 ? eval_out_append(&o, rec) : -1;
    /* eval_record_check let only the episode's own name through. */
    if (rc == 0 && json_is_string(json_object_get(rec, "trajectory")))
      rc = copy_traj(m->dirs[from[ep]], m->out, ep, &missing);
  }
  eval_out_close(&o);
  if (missing > 0)
    fprintf(stderr, "ludo eval merge: warning: %lld records point to "
            "trajectory files that are missing in their folder (or are not "
            "regular files): not copied\n", missing);
  return rc;
}

/* The merged timing (from the shards' summary.json, when they have
 * one): the shards ran side by side (as an Indexed Job runs them), so the
 * longest shard's wall time, the earliest start, and the episodes and
 * steps their last processes ran, summed: the throughput of the shards
 * together. */
static void shard_timing(const merge_args_t *m, eval_timing_t *timing,
                         char *start, size_t n) {
  int i;
  timing->wall_s = 0;
  timing->episodes = timing->steps = 0;
  snprintf(start, n, "%s", "");
  timing->started_at = start;
  for (i = 0; i < m->ndirs; i++) {
    char path[4400];
    json_t *s, *t;
    const char *at;
    snprintf(path, sizeof path, "%s/summary.json", m->dirs[i]);
    s = json_load_file(path, 0, NULL);
    t = json_object_get(s, "timing");
    if (json_number_value(json_object_get(t, "wall_s")) > timing->wall_s)
      timing->wall_s = json_number_value(json_object_get(t, "wall_s"));
    timing->episodes += json_integer_value(json_object_get(t,
                                                           "episodes_run"));
    timing->steps += json_integer_value(json_object_get(t, "steps_run"));
    at = json_string_value(json_object_get(t, "started_at"));
    if (at != NULL && (start[0] == '\0' || strcmp(at, start) < 0))
      snprintf(start, n, "%s", at);
    json_decref(s);
  }
}

/* A merge that failed after it began writing (a disk full, the summary
 * refusing): what it wrote into --out goes, so the folder is empty again
 * (its lock aside) and the next merge takes it, not a half-written
 * folder. --out was empty and is locked: all of it is this merge's. */
static void unwrite(const merge_args_t *m, json_t *all) {
  static const char *const names[] = {
      "run.json", "results.jsonl", "summary.json", "report.html",
      ".run.json.tmp", ".summary.json.tmp", ".report.html.tmp"};
  char path[4400];
  size_t k;
  for (k = 0; k < sizeof names / sizeof names[0]; k++) {
    snprintf(path, sizeof path, "%s/%s", m->out, names[k]);
    unlink(path);
  }
  for (k = 0; k < json_array_size(all); k++) {
    snprintf(path, sizeof path, "%s/trajectories/%06lld.jsonl", m->out,
             (long long)json_integer_value(json_object_get(
                 json_array_get(all, k), "episode")));
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/trajectories", m->out);
  rmdir(path);
  fprintf(stderr, "ludo eval merge: nothing was merged: %s is left empty\n",
          m->out);
}

static int merge(const merge_args_t *m) {
  json_t *run = check_runs(m), *all = json_array();
  long long total, ep;
  int *from = NULL, rc = 1, lock = -1;
  char *text, start[64];
  eval_timing_t timing;
  if (run == NULL) goto done;
  total = json_integer_value(json_object_get(run, "episodes_total"));
  from = malloc(((size_t)total + 1) * sizeof *from);
  for (ep = 0; ep < total; ep++) from[ep] = -1;
  if (gather(m, all, from) != 0 ||
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
  shard_timing(m, &timing, start, sizeof start);
  text = rc == 0 ? eval_json_dumps(all) : NULL;
  if (rc == 0 && (text == NULL || eval_report_write(m->out, run, text,
                                                    strlen(text),
                                                    &timing) != 0))
    rc = 1;
  free(text);
  if (rc == 0)
    printf("merged %d folders, %lld episodes, into %s\n", m->ndirs, total,
           m->out);
  else
    unwrite(m, all);
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
