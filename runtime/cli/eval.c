/* eval.c - `ludo eval`: scripted evaluation runs (docs/eval.md). Sets the
 * run up (runtime on a loop of its own that ludo borrows, environment or
 * server, episodes, output folder, slots), runs the loop until every
 * episode has its record or Ctrl-C cancelled the rest, and ends with
 * summary.json and report.html. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/eval.h"

#define EXIT_INTERRUPTED 130

/* Everything a run holds, for one teardown. */
typedef struct {
  eval_cfg_t *cfg;
  uv_loop_t loop;
  ludo__cli_hostlib_t lib;
  eval_run_t r;
  eval_plan_t plan;
  eval_out_t out;
  json_t *run_json;
  char *info;               /* a server's description (owned) */
  uv_async_t wake;          /* a signal wakes the loop */
  int signals, interrupted;
  int traj_only;            /* failed only for trajectories not written */
  long long offset0;        /* results.jsonl's size before this run wrote
                               to it: its records are after (timing) */
} eval_t;

/* Ctrl-C: the first sets the flag and wakes the loop (which cancels the
 * episodes in flight); a second exits at once, even while a policy's Lua
 * runs or the report is written. A plain handler, not a uv_signal_t: the
 * loop may be busy in a long call when the second comes. */
static uv_async_t *wake_handle;
/* The runtime whose Lua the first Ctrl-C stops (a policy's long call),
 * set while the episodes run. */
static ludo_runtime_t *volatile running_rt;

static void on_raw_signal(int signum) {
  (void)signum;
  eval_workers_signal(); /* with --workers: passed on to each */
  if (eval_interrupted) _exit(EXIT_INTERRUPTED); /* a second Ctrl-C */
  eval_interrupted = 1;
  ludo_runtime_interrupt(running_rt); /* signal-safe; NULL: nothing */
  if (wake_handle != NULL) uv_async_send(wake_handle); /* signal-safe */
}

static void on_wake(uv_async_t *h) {
  eval_t *e = h->data;
  e->interrupted = 1;
  eval_slots_cancel(&e->r);
}

static void signals_start(eval_t *e) {
  struct sigaction sa;
  uv_async_init(&e->loop, &e->wake, on_wake);
  e->wake.data = e;
  wake_handle = &e->wake;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_raw_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  e->signals = 1;
}

/* After the report: Ctrl-C kills again. */
static void signals_stop(eval_t *e) {
  if (!e->signals) return;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  wake_handle = NULL;
  uv_close((uv_handle_t *)&e->wake, NULL);
  e->signals = 0;
}

static int runtime_open(eval_t *e) {
  ludo_options_t o;
  const eval_cfg_t *cfg = e->cfg;
  int rc;
  ludo_options_init(&o);
  o.module_path = ludo__cli_root();
  o.prewarm = cfg->concurrency < 64 ? (unsigned)cfg->concurrency : 64;
  o.cpu_budget_ms = (uint32_t)cfg->budget_ms;
  o.memory_cap = (size_t)cfg->cap_mb << 20;
  o.loop = &e->loop;
  o.lua_llm = LUDO_LUA_LLM_SCRIPTS | LUDO_LUA_LLM_SESSIONS;
  if (!cfg->remote &&
      ludo__cli_hostlib_open(&e->lib, cfg->env, NULL, 0) != 0)
    return -1;
  if ((rc = ludo_runtime_new(&e->r.rt, &o)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    return -1;
  }
  return cfg->remote ? 0 : ludo__cli_hostlib_init(&e->lib, e->r.rt);
}

/* A remote run's tasks: the client cannot list them, so the last one the
 * run names (index count - 1 of the split) is reset once at setup: a
 * split the server does not have, or fewer tasks than count, fail here as
 * they do locally, not as one failed episode per task. */
static int remote_tasks_check(eval_t *e, ludo_client_t *c) {
  const eval_cfg_t *cfg = e->cfg;
  ludo__cli_buf_t req = {0};
  const char *out;
  size_t n;
  int rc;
  if (!eval_has_tasks(cfg) || cfg->task_count < 1 || cfg->task_ids != NULL)
    return 0; /* eval_plan says what is missing */
  ludo__cli_buf_printf(&req, "{\"seed\":0,\"split\":");
  ludo__cli_buf_json_string(&req, cfg->split);
  ludo__cli_buf_printf(&req, ",\"index\":%lld}", cfg->task_count - 1);
  rc = ludo_client_reset(c, req.p, req.len, &out, &n);
  ludo__cli_buf_free(&req);
  if (rc != 0)
    ludo__cli_error("tasks: the server has no task %lld in split %s, so "
                    "not the %lld the run asks for (%s)",
                    cfg->task_count - 1, cfg->split, cfg->task_count,
                    ludo_client_errmsg(c));
  return rc != 0 ? -1 : 0;
}

/* The environment's description from a server (a client of its own). */
static int remote_info(eval_t *e) {
  ludo_client_options_t o;
  ludo_client_t *c = NULL;
  const char *info;
  size_t n;
  int rc = -1;
  ludo_client_options_init(&o);
  o.token = e->cfg->token && *e->cfg->token ? e->cfg->token : NULL;
  if (ludo_client_connect(e->r.rt, e->cfg->env, &o, &c) != 0)
    ludo__cli_error("%s", ludo_runtime_errmsg(e->r.rt));
  else if (ludo_client_info(c, &info, &n) != 0)
    ludo__cli_error("%s", ludo_client_errmsg(c));
  else if (remote_tasks_check(e, c) != 0)
    ; /* said */
  else if ((e->info = malloc(n + 1)) != NULL) {
    memcpy(e->info, info, n);
    e->info[n] = '\0';
    e->r.info = e->info;
    e->r.info_len = n;
    rc = 0;
  }
  ludo_client_close(c);
  return rc;
}

/* An environment declared concurrent = false has one session at a time:
 * its episodes run one after the other. */
static void one_at_a_time(eval_t *e) {
  json_t *info = json_loadb(e->r.info, e->r.info_len, 0, NULL);
  if (json_is_false(json_object_get(info, "concurrent")) &&
      e->cfg->concurrency > 1) {
    if (!e->cfg->quiet)
      fprintf(stderr, "ludo eval: %s is not concurrent: one episode at a "
              "time\n", e->cfg->env);
    e->cfg->concurrency = 1;
    e->cfg->workers = 1;
  }
  json_decref(info);
}

/* Loads the environment (or asks the server) and plans the episodes. */
static int env_open(eval_t *e) {
  ludo_session_t *s = NULL;
  int rc;
  if (e->cfg->remote)
    return remote_info(e) != 0 ? -1 : eval_plan(e->cfg, NULL, &e->plan);
  if (ludo_env_load(e->r.rt, e->cfg->env, NULL, &e->r.env) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(e->r.rt));
    return -1;
  }
  e->r.info = ludo_env_info(e->r.env, &e->r.info_len);
  one_at_a_time(e);
  if (eval_has_tasks(e->cfg) && ludo_session_open(e->r.env, &s) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(e->r.rt));
    return -1;
  }
  rc = eval_plan(e->cfg, s, &e->plan);
  ludo_session_close(s);
  return rc;
}

static void now_iso(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Runs the episodes without a record. */
static void run_loop(eval_t *e, long long already) {
  eval_progress_start(&e->r.progress, &e->loop, e->cfg->quiet,
                      e->plan.total > 0 ? (long long)e->plan.n : 0, already);
  eval_progress_prior(&e->r.progress, &e->plan);
  if (eval_interrupted)
    eval_slots_cancel(&e->r); /* before the loop ran: start nothing */
  else
    eval_slots_start(&e->r);
  while (e->r.active > 0) uv_run(&e->loop, UV_RUN_ONCE);
  eval_progress_stop(&e->r.progress);
}

/* summary.json and report.html from every record in the folder. They
 * describe the episodes of this run or shard: a shard's report is given
 * its own episode count (run.json keeps the whole run's, for merge). */
static int report(eval_t *e, double wall_s, const char *started_at) {
  ludo__cli_buf_t recs = {0};
  json_t *run = json_deep_copy(e->run_json);
  eval_timing_t t = {wall_s, started_at, 0, 0};
  long long n;
  int rc = eval_results_text(e->cfg->out, &recs, &n);
  if (e->cfg->shard_count > 0)
    json_object_set_new(run, "episodes_total",
                        json_integer((json_int_t)e->plan.n));
  if (rc == 0) rc = eval_timing_count(e->cfg->out, e->offset0, &t);
  if (rc == 0)
    rc = eval_report_write(e->cfg->out, run, recs.p, recs.len, &t);
  json_decref(run);
  ludo__cli_buf_free(&recs);
  return rc;
}

/* Runs the episodes left in this process: the slots, the loop. Returns
 * 0, or -1 when the slots could not be opened (said). */
static int run_here(eval_t *e, long long already) {
  e->r.cfg = e->cfg;
  e->r.loop = &e->loop;
  e->r.plan = &e->plan;
  e->r.out = &e->out;
  if (eval_slots_open(&e->r) != 0) return -1;
  running_rt = e->r.rt;
  run_loop(e, already);
  running_rt = NULL;
  eval_out_close(&e->out);
  if (eval_traj_report(&e->r)) { /* exits 1 at the end */
    e->traj_only = !e->r.failed;
    e->r.failed = 1;
  }
  return 0;
}

static int interrupted_status(const eval_t *e) {
  return e->interrupted || eval_interrupted ? EXIT_INTERRUPTED : 0;
}

/* Episodes a server outage lost (eval_class_lost) have no final
 * record: the run is not complete, whatever else went well. Says so and
 * returns EVAL_EXIT_LOST, or 0 when none was lost. */
static int lost_status(const eval_t *e) {
  long long n = e->r.progress.lost;
  if (n == 0) return 0;
  fprintf(stderr, "ludo eval: %lld episode%s lost to a server outage "
          "(ECONNECT, EDISCONNECTED, ENOREPLY, ECAPACITY: the server could "
          "not be reached, went away, did not reply or was at capacity); "
          "they are not counted as attempts: when the server is "
          "back, run again with --resume to run them\n", n,
          n == 1 ? " was" : "s were");
  return EVAL_EXIT_LOST;
}

/* A worker process (eval_workers.c): its share of the episodes, no
 * summary or report (the parent writes them). */
static int run_worker(eval_t *e) {
  if (eval_worker_episodes(&e->plan) != 0 ||
      eval_out_open_worker(&e->out, e->cfg) != 0 || run_here(e, 0) != 0)
    return 1;
  if (e->r.failed) return e->traj_only ? EVAL_EXIT_TRAJECTORIES : 1;
  return interrupted_status(e);
}

/* The size of DIR/results.jsonl (0 when absent): where the records of
 * this run will start (a resume's earlier ones are before). */
static long long results_size(const char *dir) {
  char path[4400];
  struct stat sb;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

static int run(eval_t *e, int argc, char **argv) {
  long long already = 0, workers;
  char started_at[32];
  double t0 = eval_now();
  int rc = 0;
  now_iso(started_at, sizeof started_at);
  signals_start(e); /* until the summary and the report are written */
  if (runtime_open(e) != 0 || env_open(e) != 0) return 1;
  if (e->cfg->worker) return run_worker(e);
  e->run_json = eval_run_json(e->cfg, e->plan.total);
  if (eval_out_open(&e->out, e->cfg, e->run_json, &e->plan, &already) != 0)
    return 1;
  e->offset0 = results_size(e->cfg->out);
  workers = eval_workers_count(e->cfg, &e->plan);
  if (workers > 1) {
    eval_progress_start(&e->r.progress, &e->loop, e->cfg->quiet,
                        (long long)e->plan.n, already);
    eval_progress_prior(&e->r.progress, &e->plan);
    rc = eval_workers_run(e->cfg, &e->loop, &e->plan, workers, argc, argv,
                          e->out.lock, &e->r.progress);
    eval_progress_stop(&e->r.progress);
    eval_out_close(&e->out);
  } else if (run_here(e, already) != 0) {
    return 1;
  }
  if (report(e, eval_now() - t0, started_at) != 0 || e->r.failed) return 1;
  if (rc != 0 || interrupted_status(e) != 0)
    return rc != 0 ? rc : interrupted_status(e);
  return lost_status(e);
}

static void teardown(eval_t *e) {
  eval_slots_close(&e->r);
  eval_out_close(&e->out);
  eval_out_unlock(&e->out);
  ludo_runtime_free(e->r.rt);
  signals_stop(e);
  uv_run(&e->loop, UV_RUN_DEFAULT); /* the close callbacks */
  uv_loop_close(&e->loop);
  ludo__cli_hostlib_close(&e->lib);
  eval_plan_free(&e->plan);
  json_decref(e->run_json);
  free(e->info);
}

static int cmd_eval(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  eval_cfg_t cfg;
  eval_t e;
  int rc;
  if (argc >= 2 && strcmp(argv[1], "merge") == 0)
    return eval_merge_main(argc - 1, argv + 1);
  rc = eval_config(cmd, argc, argv, &cfg);
  if (rc >= 0) {
    eval_config_free(&cfg);
    return rc;
  }
  memset(&e, 0, sizeof e);
  e.cfg = &cfg;
  uv_loop_init(&e.loop);
  rc = run(&e, argc, argv);
  teardown(&e);
  eval_config_free(&cfg);
  return rc;
}

const ludo__cli_cmd_t ludo__cli_cmd_eval = {
    "eval", "RUN.lua | ENV [options]",
    "evaluate a policy over many episodes (and merge shards)",
    "Runs the episodes a run file describes (RUN.lua: docs/eval.md), or\n"
    "of the environment ENV (a folder, or a server's ws:// URL) with\n"
    "the flags alone, as concurrent sessions; flags override the run\n"
    "file. Writes OUT/run.json, OUT/results.jsonl (one record per\n"
    "episode), OUT/trajectories/, OUT/summary.json and OUT/report.html.\n"
    "`ludo eval merge DIR... --out DIR` combines shard folders (see\n"
    "`ludo eval merge --help`).\n",
    ludo__cli_eval_opts,
    "Episodes are numbered from 0; episode i is seeded from the run's seed\n"
    "and i alone, so results do not depend on --concurrency, --shard or\n"
    "--resume. An episode that fails (its error class and message are in\n"
    "its record) or takes an invalid action does not stop the run.\n"
    "--workers N runs the episodes in N processes (a loop is one core);\n"
    "the records are the same as with one.\n"
    "Ctrl-C (SIGINT, SIGTERM) cancels the episodes in flight (recorded as\n"
    "ECANCELED, run again by --resume), writes the summary and the report\n"
    "of what finished, and exits 130; a second Ctrl-C exits at once.\n"
    "Exit status: 0 when every episode has a record, 1 when the run could\n"
    "not be set up or written, 2 for a usage error, 75 when a server\n"
    "outage lost episodes (--resume runs them), 130 when interrupted.\n",
    cmd_eval};
