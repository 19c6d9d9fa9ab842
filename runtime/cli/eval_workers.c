/* eval_workers.c - `ludo eval --workers N`: the run's episodes spread over
 * N worker processes, so an evaluation uses the machine's cores (one loop
 * runs on one core; docs/eval.md "Worker processes").
 *
 * The parent sets the run up as for one process (the lock, run.json, the
 * resume scan, the plan), then starts N copies of this program with the
 * same arguments (plus --concurrency C/N and --quiet) and
 * LUDO_EVAL_WORKER=<its pid>. Each is sent its share of the episodes left
 * (every N-th of them) on stdin and inherits the folder's lock as fd 3;
 * it runs them as a run of one process does and appends its records to
 * results.jsonl (one write() each, O_APPEND: lines never mix). The parent
 * shows the progress from the records as they arrive and, once every
 * worker exited, writes the summary and the report from the folder, as
 * for one process. Episode i is seeded from the run's seed and i alone,
 * so the records are the same whichever worker ran an episode.
 *
 * Workers run in a session of their own (a terminal's Ctrl-C reaches only
 * the parent): the parent passes on each Ctrl-C or SIGTERM (the first
 * cancels the episodes in flight, the second ends them at once), and a
 * worker dies with its parent (PR_SET_PDEATHSIG, SIGKILL), so a parent
 * killed with -9 leaves nothing running that could write into the folder
 * while a --resume reads it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/eval.h"

#define WORKERS_MAX 256
#define TAIL_EVERY_MS 250
#define LOCK_FD 3

extern char **environ;

/* The workers' pids, for the signal handler (0: none or exited). */
static volatile pid_t worker_pid[WORKERS_MAX];

typedef struct workers_s workers_t;

typedef struct {
  uv_process_t proc;
  uv_pipe_t in;               /* its stdin: the episode list */
  uv_write_t wr;
  ludo__cli_buf_t list;
  workers_t *all;
  int index, spawned, exited, handles;
  int64_t status;
  int term_signal;
} worker_t;

struct workers_s {
  worker_t *w;
  long long n, running;
  const char *dir;
  long long offset;           /* results.jsonl read up to here */
  uv_timer_t tail;
  eval_progress_t *progress;
};

long long eval_workers_count(const eval_cfg_t *cfg, const eval_plan_t *plan) {
  long long left = 0;
  size_t i;
  if (cfg->worker || cfg->workers <= 1) return 1;
  for (i = 0; i < plan->n; i++) left += !plan->eps[i].done;
  return left < cfg->workers ? (left > 1 ? left : 1) : cfg->workers;
}

void eval_workers_signal(void) {
  int i, saved = errno;
  for (i = 0; i < WORKERS_MAX; i++)
    if (worker_pid[i] > 0) kill(worker_pid[i], SIGINT);
  errno = saved;
}

/* ---- the parent ------------------------------------------------------- */

static const char *on_record(void *ud, const eval_line_t *l) {
  eval_progress_episode(ud, l->reward, l->error, l->cancelled,
                        l->rerun && !l->cancelled);
  return NULL;
}

static void tail(workers_t *ws) {
  if (eval_results_follow(ws->dir, &ws->offset, on_record, ws->progress))
    ws->offset = -1; /* said; the progress stops there */
}

static void on_tail(uv_timer_t *t) {
  workers_t *ws = t->data;
  if (ws->offset >= 0) tail(ws);
}

static void on_handle_closed(uv_handle_t *h) {
  worker_t *w = h->data;
  w->handles--;
}

static void on_worker_exit(uv_process_t *p, int64_t status, int term_signal) {
  worker_t *w = p->data;
  w->exited = 1;
  w->status = status;
  w->term_signal = term_signal;
  worker_pid[w->index] = 0;
  w->all->running--;
  uv_close((uv_handle_t *)p, on_handle_closed);
}

static void on_written(uv_write_t *req, int status) {
  worker_t *w = req->data;
  (void)status; /* a worker that died early says so by its exit */
  uv_close((uv_handle_t *)&w->in, on_handle_closed);
}

/* The size of results.jsonl: the records before the workers start. */
static long long results_size(const char *dir) {
  char path[4400];
  struct stat sb;
  snprintf(path, sizeof path, "%s/results.jsonl", dir);
  return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* The argument vector of a worker: this program, the parent's arguments
 * (from "eval" on), then its concurrency and --quiet (later flags win). */
static char **worker_argv(int argc, char **argv, const char *exe,
                          char *conc) {
  char **a = calloc((size_t)argc + 5, sizeof *a);
  int i;
  if (a == NULL) return NULL;
  a[0] = (char *)exe;
  for (i = 0; i < argc; i++) a[i + 1] = argv[i];
  a[argc + 1] = "--concurrency";
  a[argc + 2] = conc;
  a[argc + 3] = "--quiet";
  return a;
}

/* The environment of a worker: this one's with LUDO_EVAL_WORKER set. */
static char **worker_env(char *mark) {
  size_t n = 0, i, k = 0;
  char **env;
  while (environ[n] != NULL) n++;
  if ((env = calloc(n + 2, sizeof *env)) == NULL) return NULL;
  for (i = 0; i < n; i++)
    if (strncmp(environ[i], "LUDO_EVAL_WORKER=", 17) != 0)
      env[k++] = environ[i];
  env[k] = mark;
  return env;
}

/* Worker k's share: every n-th episode left, from the k-th. */
static void share(const eval_plan_t *plan, long long n, long long k,
                  ludo__cli_buf_t *list) {
  size_t i;
  long long left = 0;
  for (i = 0; i < plan->n; i++) {
    if (plan->eps[i].done) continue;
    if (left++ % n == k)
      ludo__cli_buf_printf(list, "%lld\n", plan->eps[i].index);
  }
}

static int spawn(uv_loop_t *loop, worker_t *w, char **argv, char **env,
                 int lock) {
  uv_process_options_t o;
  uv_stdio_container_t io[4];
  uv_buf_t b;
  int rc;
  memset(&o, 0, sizeof o);
  uv_pipe_init(loop, &w->in, 0);
  w->in.data = w;
  w->handles = 1;
  io[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  io[0].data.stream = (uv_stream_t *)&w->in;
  io[1].flags = io[2].flags = io[3].flags = UV_INHERIT_FD;
  io[1].data.fd = 1;
  io[2].data.fd = 2;
  io[3].data.fd = lock;
  o.file = argv[0];
  o.args = argv;
  o.env = env;
  o.stdio = io;
  o.stdio_count = 4;
  o.flags = UV_PROCESS_DETACHED;
  o.exit_cb = on_worker_exit;
  w->proc.data = w;
  if ((rc = uv_spawn(loop, &w->proc, &o)) != 0) {
    ludo__cli_error("cannot start worker %d: %s", w->index, uv_strerror(rc));
    uv_close((uv_handle_t *)&w->in, on_handle_closed);
    return -1;
  }
  w->spawned = 1;
  w->handles++;
  w->all->running++;
  worker_pid[w->index] = w->proc.pid;
  b = uv_buf_init(w->list.p ? w->list.p : "", (unsigned)w->list.len);
  w->wr.data = w;
  if (uv_write(&w->wr, (uv_stream_t *)&w->in, &b, 1, on_written) != 0)
    uv_close((uv_handle_t *)&w->in, on_handle_closed);
  return 0;
}

/* The run's status from the workers' exits (each failure said). */
static int outcome(const workers_t *ws, int started) {
  int rc = started ? 0 : 1;
  long long i;
  for (i = 0; i < ws->n; i++) {
    const worker_t *w = &ws->w[i];
    if (!w->spawned) continue;
    if (w->term_signal != 0) {
      ludo__cli_error("worker %lld was killed by signal %d", i,
                      w->term_signal);
      rc = 1;
    } else if (w->status == 130) {
      if (rc == 0) rc = 130;
    } else if (w->status == EVAL_EXIT_TRAJECTORIES) {
      ludo__cli_error("worker %lld could not write some trajectories (said "
                      "above); its records are complete", i);
      rc = 1;
    } else if (w->status != 0) {
      ludo__cli_error("worker %lld failed (exit status %d): its episodes "
                      "without a record run again with --resume", i,
                      (int)w->status);
      rc = 1;
    }
  }
  return rc;
}

/* Starts the workers (stops at the first that cannot be started, and
 * then asks the others to stop). Returns 1 when all started, else 0. */
static int spawn_all(workers_t *ws, uv_loop_t *loop, const eval_plan_t *plan,
                     char **args, char **env, int lock) {
  long long i;
  for (i = 0; i < ws->n && !eval_interrupted; i++) {
    worker_t *w = &ws->w[i];
    w->all = ws;
    w->index = (int)i;
    share(plan, ws->n, i, &w->list);
    if (spawn(loop, w, args, env, lock) != 0) {
      eval_workers_signal();
      return 0;
    }
  }
  return 1;
}

/* Runs the loop until every worker exited and its handles are closed,
 * reading the records as they come. */
static void wait_all(workers_t *ws, uv_loop_t *loop) {
  long long i;
  uv_timer_init(loop, &ws->tail);
  ws->tail.data = ws;
  uv_timer_start(&ws->tail, on_tail, TAIL_EVERY_MS, TAIL_EVERY_MS);
  while (ws->running > 0) uv_run(loop, UV_RUN_ONCE);
  for (i = 0; i < ws->n; i++)
    while (ws->w[i].handles > 0) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&ws->tail, NULL);
  uv_run(loop, UV_RUN_NOWAIT); /* the timer's close */
  if (ws->offset >= 0) tail(ws);
}

int eval_workers_run(const eval_cfg_t *cfg, uv_loop_t *loop,
                     const eval_plan_t *plan, long long n, int argc,
                     char **argv, int lock, eval_progress_t *progress) {
  workers_t ws;
  char exe[4096], conc[32], mark[64];
  size_t exe_len = sizeof exe;
  char **args = NULL, **env = NULL;
  long long i;
  int rc = 1;
  memset(&ws, 0, sizeof ws);
  ws.n = n > WORKERS_MAX ? WORKERS_MAX : n;
  ws.dir = cfg->out;
  ws.progress = progress;
  ws.offset = results_size(cfg->out);
  snprintf(conc, sizeof conc, "%lld", (cfg->concurrency + ws.n - 1) / ws.n);
  snprintf(mark, sizeof mark, "LUDO_EVAL_WORKER=%ld", (long)getpid());
  if (uv_exepath(exe, &exe_len) != 0 ||
      (ws.w = calloc((size_t)ws.n, sizeof *ws.w)) == NULL ||
      (args = worker_argv(argc, argv, exe, conc)) == NULL ||
      (env = worker_env(mark)) == NULL) {
    ludo__cli_error("cannot start the workers: %s", strerror(errno));
  } else {
    int started = spawn_all(&ws, loop, plan, args, env, lock);
    wait_all(&ws, loop);
    rc = outcome(&ws, started);
    if (rc == 0 && eval_interrupted) rc = 130;
  }
  for (i = 0; ws.w != NULL && i < ws.n; i++)
    ludo__cli_buf_free(&ws.w[i].list);
  free(ws.w);
  free(args);
  free(env);
  return rc;
}

/* ---- a worker --------------------------------------------------------- */

/* A worker dies with its parent, keeps the lock it inherited (fd 3) out
 * of anything it starts, and has no progress line of its own. */
static int worker_setup(void) {
  const char *parent = getenv("LUDO_EVAL_WORKER");
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || parent == NULL ||
      (long)getppid() != strtol(parent, NULL, 10)) {
    ludo__cli_error("worker: the parent ludo eval is gone");
    return -1;
  }
  if (fcntl(LOCK_FD, F_SETFD, FD_CLOEXEC) != 0) {
    ludo__cli_error("worker: no lock inherited (fd %d): %s", LOCK_FD,
                    strerror(errno));
    return -1;
  }
  return 0;
}

int eval_worker_episodes(eval_plan_t *plan) {
  ludo__cli_buf_t in = {0};
  char chunk[65536], *p, *end;
  unsigned char *mine;
  ssize_t got;
  size_t i;
  int rc = 0;
  if (worker_setup() != 0) return -1;
  while ((got = read(STDIN_FILENO, chunk, sizeof chunk)) != 0) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      ludo__cli_error("worker: cannot read its episodes: %s",
                      strerror(errno));
      ludo__cli_buf_free(&in);
      return -1;
    }
    ludo__cli_buf_add(&in, chunk, (size_t)got);
  }
  ludo__cli_buf_add(&in, "", 1);
  mine = calloc(plan->n + 1, 1);
  for (p = in.p; rc == 0 && mine != NULL && *p != '\0'; p = end) {
    long long index = strtoll(p, &end, 10);
    eval_ep_t *e = eval_plan_find(plan, index);
    if (end == p || *end != '\n' || e == NULL) {
      ludo__cli_error("worker: episode list: '%.20s' is not one of the "
                      "run's episodes", p);
      rc = -1;
      break;
    }
    mine[e - plan->eps] = 1;
    end++;
  }
  if (mine == NULL) rc = -1;
  for (i = 0; rc == 0 && i < plan->n; i++)
    if (!mine[i]) plan->eps[i].done = 1;
  free(mine);
  ludo__cli_buf_free(&in);
  return rc;
}
