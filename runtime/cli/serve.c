/* serve.c - `ludo serve ENV`: an OpenEnv server for one environment
 * (docs/protocol.md) on N worker threads (docs/serve-workers.md). Each
 * worker owns a loop, lends it to a runtime of its own, loads the
 * environment there and runs a server of one ludo_server_group_t; the
 * main thread is worker 0. A watcher thread (serve_watch.c) takes
 * SIGINT/SIGTERM: on the first every worker stops accepting and closes
 * its connections and sessions (WebSockets with 1001), and the command
 * exits 0 when all are done, or at the latest after a deadline the
 * watcher keeps whatever Lua does on the workers' loops; later signals
 * are ignored.
 *
 * Start-up is one worker at a time: worker 0 loads the environment
 * (which decides how many workers and sessions an environment declared
 * concurrent = false gets), listens (port 0: a free port), then each
 * other worker starts on its thread, listens on that same port, and says
 * so before the next starts; any failure stops the ones already running
 * and exits 1. */
#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "cli/cli.h"
#include "cli/serve_watch.h"

/* How long a stop may take before the command exits anyway. */
#define STOP_DEADLINE_MS 15000

enum {
  OPT_HOST = 2,
  OPT_PORT,
  OPT_MAX_SESSIONS,
  OPT_SESSION_TIMEOUT,
  OPT_MODE,
  OPT_TOKEN,
  OPT_STRICT,
  OPT_NO_STRICT,
  OPT_CPU_BUDGET,
  OPT_MEMORY_CAP,
  OPT_MAX_MESSAGE,
  OPT_MAX_OUTPUT,
  OPT_PING_INTERVAL,
  OPT_DRAIN,
  OPT_HOST_LIB,
  OPT_NO_HOST_LIB,
  OPT_VERBOSE,
  OPT_WORKERS,
  OPT_ALLOW_LLM
};

static const ludo__cli_opt_t serve_opts[] = {
    {OPT_HOST, "--host", NULL, "H",
     "address to listen on (default 127.0.0.1; 0.0.0.0\n"
     "for every interface)"},
    {OPT_PORT, "--port", NULL, "P", "port (default 8000; 0: any free one)"},
    {OPT_MAX_SESSIONS, "--max-sessions", NULL, "N",
     "sessions open at once, of every kind, over all\n"
     "workers (default 1024; 1, the most it allows,\n"
     "for an environment with concurrent = false); at\n"
     "capacity an idle POST /reset session gives way"},
    {OPT_WORKERS, "--workers", NULL, "N",
     "worker threads, each with its own loop, runtime\n"
     "and sessions, sharing the port (default: the\n"
     "number of cores; 1 for an environment with\n"
     "concurrent = false)"},
    {OPT_SESSION_TIMEOUT, "--session-timeout", NULL, "S",
     "close a session idle for S seconds, of every\n"
     "kind, and its WebSocket (default: WebSocket\n"
     "sessions never; those of POST /reset and\n"
     "openenv/session/create after 300 s)"},
    {OPT_MODE, "--mode", NULL, "M",
     "simulation (default) or production (no /reset,\n"
     "/step, /state)"},
    {OPT_TOKEN, "--token", NULL, "T",
     "require 'Authorization: Bearer T' on every route\n"
     "but /health (default: $LUDO_TOKEN, else none)"},
    {OPT_STRICT, "--strict", NULL, NULL,
     "check observations against the environment's\n"
     "observation schema (off by default)"},
    {OPT_NO_STRICT, "--no-strict", NULL, NULL,
     "do not check observations (the default)"},
    {OPT_CPU_BUDGET, "--cpu-budget", NULL, "MS",
     "time each call's Lua may run, waits excluded,\n"
     "in milliseconds (default 10000)"},
    {OPT_MEMORY_CAP, "--memory-cap", NULL, "MB",
     "memory cap of each session's Lua state, in MiB\n"
     "(default 64)"},
    {OPT_MAX_MESSAGE, "--max-message", NULL, "MB",
     "largest WebSocket message or request body, in\n"
     "MiB (default 16)"},
    {OPT_MAX_OUTPUT, "--max-output", NULL, "MB",
     "replies waiting for clients that do not read,\n"
     "all connections together, in MiB (default 256);\n"
     "past it such a client is disconnected"},
    {OPT_PING_INTERVAL, "--ping-interval", NULL, "S",
     "keepalive pings on WebSockets every S seconds\n"
     "(default 20; 0: none)"},
    {OPT_DRAIN, "--drain-timeout", NULL, "S",
     "on SIGTERM/SIGINT, let calls in flight finish\n"
     "for up to S seconds before cancelling them\n"
     "(default 10, at most 14; 0: cancel at once)"},
    {OPT_HOST_LIB, "--host-lib", NULL, "PATH",
     "load the host library PATH instead of the one\n"
     "the environment's manifest.json names"},
    {OPT_NO_HOST_LIB, "--no-host-lib", NULL, NULL,
     "never load native code"},
    {OPT_VERBOSE, "--verbose", "-v", NULL,
     "show print()/ludo.log output of the sessions"},
    {OPT_ALLOW_LLM, "--allow-llm", NULL, NULL,
     "let the environment's rubrics (LLM judges)\n"
     "require(\"ludo.llm\") and call LLM APIs over HTTP\n"
     "(docs/llm.md; off by default)"},
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

typedef struct {
  const char *env_path, *host, *token, *host_lib;
  long long port, max_sessions, timeout_s, budget_ms, cap_mb, max_msg_mb;
  long long ping_s, workers, drain_s, max_out_mb;
  int production, strict, no_host_lib, verbose, allow_llm;
  int token_flag; /* the token came from --token, not $LUDO_TOKEN */
} serve_args_t;

typedef struct serve_s serve_t;

/* One worker: its loop, runtime, environment and server. Worker 0 runs on
 * the main thread; the others each on a thread of their own. */
typedef struct {
  serve_t *s;
  unsigned index;
  pthread_t thread;
  int thread_on;           /* the thread was started (join it) */
  int stop_on;             /* `stop` is set up (under serve_t.lock) */
  uv_loop_t loop;
  uv_async_t stop;         /* the watcher asks it to stop */
  ludo_runtime_t *rt;      /* set and cleared under serve_t.lock */
  ludo_env_t *env;
  ludo_server_t *sv;
  int failed;              /* its start failed (it printed why) */
  sem_t ready;             /* posted when its start ended, either way */
} worker_t;

/* The command's state. Written by the main thread before the workers
 * start and read-only for them after, but for `finished`, and for what
 * `lock` guards: `stopping`, each worker's `stop_on` and `rt` (the
 * watcher reads them). */
struct serve_s {
  const serve_args_t *a;
  ludo__cli_hostlib_t lib;
  ludo_options_t opts;     /* the runtimes' options (loop set per worker) */
  ludo_server_options_t so;
  ludo_server_group_t *group;
  unsigned nworkers;
  worker_t main;           /* worker 0, on the main thread */
  worker_t **w;            /* nworkers of them: w[0] is &main; each stays
                              where it is (its loop is in it) */
  int port;                /* the port worker 0 got */
  ludo__cli_watch_t watch; /* signals, and the stop's bounds */
  pthread_mutex_t lock;
  uv_async_t done;         /* a worker thread finished */
  atomic_uint finished;    /* worker threads that finished */
  unsigned started;        /* worker threads started */
  int solo;                /* one worker for a concurrent = false
                              environment (said after the start line) */
  int main_closed;         /* worker 0's server is closed */
  int stopping;
};

static int apply(void *ud, int id, const char *val) {
  serve_args_t *a = ud;
  switch (id) {
    case OPT_HOST: a->host = val; return 0;
    case OPT_PORT: return ludo__cli_number("--port", val, 0, 65535, &a->port);
    case OPT_MAX_SESSIONS:
      return ludo__cli_number("--max-sessions", val, 1, 1000000, &a->max_sessions);
    case OPT_SESSION_TIMEOUT:
      /* The server counts it in milliseconds in 32 bits: 49.7 days. */
      return ludo__cli_number("--session-timeout", val, 1,
                              UINT32_MAX / 1000, &a->timeout_s);
    case OPT_MODE:
      if (strcmp(val, "simulation") == 0) {
        a->production = 0;
      } else if (strcmp(val, "production") == 0) {
        a->production = 1;
      } else {
        ludo__cli_error("--mode is simulation or production (got '%s')",
                        val);
        return LUDO__CLI_USAGE;
      }
      return 0;
    case OPT_TOKEN: a->token = val; a->token_flag = 1; return 0;
    case OPT_STRICT: a->strict = 1; return 0;
    case OPT_NO_STRICT: a->strict = 0; return 0;
    case OPT_CPU_BUDGET:
      return ludo__cli_number("--cpu-budget", val, 1, 86400000, &a->budget_ms);
    case OPT_MEMORY_CAP:
      return ludo__cli_number("--memory-cap", val, 1, 65536, &a->cap_mb);
    case OPT_MAX_MESSAGE:
      return ludo__cli_number("--max-message", val, 1, 4096, &a->max_msg_mb);
    case OPT_MAX_OUTPUT:
      return ludo__cli_number("--max-output", val, 1, 1 << 20,
                              &a->max_out_mb);
    case OPT_PING_INTERVAL:
      return ludo__cli_number("--ping-interval", val, 0, 86400, &a->ping_s);
    case OPT_DRAIN:
      return ludo__cli_number("--drain-timeout", val, 0,
                              STOP_DEADLINE_MS / 1000 - 1, &a->drain_s);
    case OPT_HOST_LIB: a->host_lib = val; return 0;
    case OPT_NO_HOST_LIB: a->no_host_lib = 1; return 0;
    case OPT_VERBOSE: a->verbose = 1; return 0;
    case OPT_ALLOW_LLM: a->allow_llm = 1; return 0;
    case OPT_WORKERS:
      return ludo__cli_number("--workers", val, 1, LUDO_SERVER_MAX_WORKERS,
                       &a->workers);
    default: return 0;
  }
}

/* Says that a token is needed, and where it came from: $LUDO_TOKEN turns
 * auth on without a flag, and OpenEnv's stock clients, which send no
 * Authorization header, then get 401. Never the token itself. */
static void token_notice(const serve_args_t *a) {
  if (a->token == NULL || a->token[0] == '\0') return;
  fprintf(stderr, "ludo serve: every route but /health needs "
          "\"Authorization: Bearer <token>\" (token from %s); OpenEnv's "
          "stock clients send none\n",
          a->token_flag ? "--token" : "$LUDO_TOKEN");
}

/* Parses argv into *a. Returns -1 to go on, or the exit status. */
static int parse_args(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                      serve_args_t *a) {
  memset(a, 0, sizeof *a);
  a->host = "127.0.0.1";
  a->port = 8000;
  a->budget_ms = 10000;
  a->cap_mb = 64;
  a->max_msg_mb = 16;
  a->max_out_mb = 256;
  a->ping_s = 20;
  a->drain_s = 10;
  a->token = getenv("LUDO_TOKEN");
  return ludo__cli_parse(cmd, argc, argv, apply, a, &a->env_path, "ENV",
                         "an environment");
}

static void verbose_log(void *ud, ludo_log_level_t level, const char *who,
                        const char *msg, size_t len) {
  (void)ud;
  (void)level;
  fprintf(stderr, "[session %.8s] %.*s\n", who, (int)len, msg);
}

static void quiet_log(void *ud, ludo_log_level_t level, const char *who,
                      const char *msg, size_t len) {
  (void)ud;
  if (level >= LUDO_LOG_WARN)
    fprintf(stderr, "ludo: %s: %.*s\n", who, (int)len, msg);
}

static void on_closed_handle(uv_handle_t *h) { (void)h; }

/* ---- a worker's runtime and server ------------------------------------- */

/* Makes worker w's runtime (on w->loop), loads the environment and makes
 * its server. Returns 0, or -1 after printing why. */
static int worker_load(worker_t *w) {
  serve_t *s = w->s;
  ludo_options_t opts = s->opts;
  ludo_runtime_t *rt;
  int rc;
  opts.loop = &w->loop;
  if ((rc = ludo_runtime_new(&rt, &opts)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    return -1;
  }
  pthread_mutex_lock(&s->lock);
  w->rt = rt;
  pthread_mutex_unlock(&s->lock);
  if (ludo__cli_hostlib_init(&s->lib, w->rt) != 0) return -1;
  if (ludo_env_load(w->rt, s->a->env_path, NULL, &w->env) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(w->rt));
    return -1;
  }
  return 0;
}

static int worker_serve(worker_t *w) {
  serve_t *s = w->s;
  ludo_server_options_t so = s->so;
  int rc;
  so.group = s->group;
  so.worker = w->index;
  if ((rc = ludo_server_new(w->env, &so, &w->sv)) != 0) {
    const char *msg = rc == LUDO_EINVAL ? ludo_runtime_errmsg(w->rt)
                                        : ludo_strerror(rc);
    /* A refused token: say where it came from (an empty $LUDO_TOKEN
     * refuses as an empty --token does). */
    if (strncmp(msg, "the token ", 10) == 0)
      ludo__cli_error("%s: %s", s->a->token_flag ? "--token" : "$LUDO_TOKEN",
                      msg);
    else
      ludo__cli_error("%s", msg);
    return -1;
  }
  if (ludo_server_listen(w->sv, s->a->host, w->index ? s->port
                                                     : (int)s->a->port)
      != 0) {
    ludo__cli_error("cannot listen on %s:%d%s: %s", s->a->host,
                    w->index ? s->port : (int)s->a->port,
                    s->nworkers > 1 ? " (SO_REUSEPORT)" : "",
                    ludo_server_errmsg(w->sv));
    ludo_server_close(w->sv, NULL, NULL);
    w->sv = NULL;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    return -1;
  }
  return 0;
}

/* Frees the worker's runtime (with the environment) and runs its loop
 * until ludo's handles are closed. */
static void worker_release(worker_t *w) {
  ludo_runtime_t *rt;
  pthread_mutex_lock(&w->s->lock);
  rt = w->rt; /* the watcher interrupts it no more */
  w->rt = NULL;
  pthread_mutex_unlock(&w->s->lock);
  ludo_runtime_free(rt);
  uv_run(&w->loop, UV_RUN_DEFAULT);
}

/* Frees what a worker thread's start made: its runtime and its loop. */
static void worker_free(worker_t *w) {
  worker_release(w);
  if (uv_loop_close(&w->loop) != 0)
    fprintf(stderr, "ludo serve: worker %u left handles open at exit\n",
            w->index);
}

static void maybe_done(serve_t *s);

static void on_worker_closed(void *ud) {
  worker_t *w = ud;
  w->sv = NULL;
  if (w->index == 0) {
    w->s->main_closed = 1;
    maybe_done(w->s);
  }
}

/* The watcher asks the worker to stop: its server closes, then its loop
 * has nothing left (worker 0's: once the others are done too) and its
 * thread ends. */
static void on_stop(uv_async_t *a) {
  worker_t *w = a->data;
  uv_close((uv_handle_t *)&w->stop, on_closed_handle);
  ludo_server_close(w->sv, on_worker_closed, w);
}

/* A worker thread (index 1 and up). */
static void *worker_main(void *arg) {
  worker_t *w = arg;
  serve_t *s = w->s;
  if (uv_loop_init(&w->loop) != 0) {
    ludo__cli_error("worker %u: cannot start its event loop", w->index);
    w->failed = 1;
    sem_post(&w->ready);
    return NULL;
  }
  if (worker_load(w) != 0 || worker_serve(w) != 0) {
    w->failed = 1;
    worker_free(w);
    sem_post(&w->ready);
    return NULL;
  }
  uv_async_init(&w->loop, &w->stop, on_stop);
  w->stop.data = w;
  sem_post(&w->ready);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  worker_free(w);
  atomic_fetch_add(&s->finished, 1);
  uv_async_send(&s->done);
  return NULL;
}

/* ---- stopping ------------------------------------------------------------ */

/* Ends the main loop once worker 0's server and every worker thread are
 * done. */
static void maybe_done(serve_t *s) {
  if (!s->main_closed || atomic_load(&s->finished) < s->started) return;
  uv_close((uv_handle_t *)&s->done, on_closed_handle);
}

static void on_done(uv_async_t *a) { maybe_done(a->data); }

/* Stops every worker running (on the watcher's thread): each server
 * stops accepting and closes its connections and sessions; a worker
 * still starting is stopped once it has started (start_workers). */
static void stop_all(void *ud) {
  serve_t *s = ud;
  unsigned i;
  pthread_mutex_lock(&s->lock);
  s->stopping = 1;
  for (i = 0; i < s->nworkers; i++)
    if (s->w[i]->stop_on) uv_async_send(&s->w[i]->stop);
  pthread_mutex_unlock(&s->lock);
}

/* Interrupts the Lua running on every worker, and the calls issued
 * there before now (on the watcher's thread, after the drain):
 * ludo_runtime_interrupt may be called from any thread. */
static void interrupt_all(void *ud) {
  serve_t *s = ud;
  unsigned i;
  pthread_mutex_lock(&s->lock);
  for (i = 0; i < s->nworkers; i++)
    if (s->w[i]->rt) ludo_runtime_interrupt(s->w[i]->rt);
  pthread_mutex_unlock(&s->lock);
}

/* Starts the watcher of signals and of the stop's bounds. */
static int watch(serve_t *s) {
  ludo__cli_watch_t *wt = &s->watch;
  wt->stop = stop_all;
  wt->interrupt = interrupt_all;
  wt->ud = s;
  wt->drain_ms = (uint64_t)s->a->drain_s * 1000;
  wt->deadline_ms = STOP_DEADLINE_MS;
  return ludo__cli_watch_start(wt);
}

/* ---- start-up ------------------------------------------------------------ */

/* Whether the environment declared concurrent = true (ludo_env_info). */
static int env_concurrent(ludo_env_t *env) {
  size_t len;
  const char *info = ludo_env_info(env, &len);
  json_t *v = json_loadb(info, len, 0, NULL);
  int yes = v == NULL || json_is_true(json_object_get(v, "concurrent"));
  json_decref(v);
  return yes;
}

/* Decides the worker count: --workers, else the cores, but one for an
 * environment declared concurrent = false (the server refuses more than
 * one when asked, saying why; its sessions default to one too). */
static void plan(serve_t *s, ludo_env_t *env) {
  const serve_args_t *a = s->a;
  unsigned cores = uv_available_parallelism();
  s->nworkers = a->workers ? (unsigned)a->workers : cores ? cores : 1;
  if (s->nworkers > LUDO_SERVER_MAX_WORKERS)
    s->nworkers = LUDO_SERVER_MAX_WORKERS;
  if (!a->workers && !env_concurrent(env)) {
    s->nworkers = 1;
    s->solo = 1;
  }
}

/* The longest a Lua call holds a worker's loop at a time. */
#define SERVE_SLICE_US 20000

static void set_options(serve_t *s) {
  const serve_args_t *a = s->a;
  ludo_options_init(&s->opts);
  s->opts.module_path = ludo__cli_root();
  s->opts.cpu_budget_ms = (uint32_t)a->budget_ms;
  /* A long Lua call yields to the loop every slice: the worker's other
   * sessions, /health and the keepalive go on while it runs. */
  s->opts.slice_us = SERVE_SLICE_US;
  s->opts.memory_cap = (size_t)a->cap_mb << 20;
  s->opts.max_input_bytes = (size_t)a->max_msg_mb << 20;
  s->opts.log = a->verbose ? verbose_log : quiet_log;
  if (a->allow_llm) s->opts.lua_llm = LUDO_LUA_LLM_SESSIONS;
  ludo_server_options_init(&s->so);
  s->so.production = a->production;
  if (a->max_sessions) s->so.max_sessions = (unsigned)a->max_sessions;
  s->so.session_timeout_ms = (uint32_t)(a->timeout_s * 1000);
  /* The flag names every session; without it, HTTP and MCP sessions,
   * which have no socket to end them, keep the server's default. */
  if (a->timeout_s) s->so.http_session_timeout_ms = s->so.session_timeout_ms;
  s->so.token = a->token;
  s->so.strict = a->strict;
  s->so.max_message_bytes = (size_t)a->max_msg_mb << 20;
  s->so.max_output_bytes = (size_t)a->max_out_mb << 20;
  s->so.ping_interval_ms =
      a->ping_s ? (uint32_t)(a->ping_s * 1000) : UINT32_MAX;
  s->so.drain_timeout_ms =
      a->drain_s ? (uint32_t)(a->drain_s * 1000) : UINT32_MAX;
}

/* Starts workers 1 and up, one after the other. Returns 0, or -1 when one
 * failed (it printed why). */
static int start_workers(serve_t *s) {
  unsigned i;
  for (i = 1; i < s->nworkers; i++) {
    worker_t *w = s->w[i];
    int stopping;
    pthread_mutex_lock(&s->lock);
    stopping = s->stopping;
    pthread_mutex_unlock(&s->lock);
    if (stopping) return 0; /* a signal came: start no more */
    w->s = s;
    w->index = i;
    sem_init(&w->ready, 0, 0);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      ludo__cli_error("cannot start worker %u's thread", i);
      w->failed = 1;
      return -1;
    }
    w->thread_on = 1;
    while (sem_wait(&w->ready) != 0) {
    }
    if (w->failed) return -1;
    s->started++;
    pthread_mutex_lock(&s->lock);
    w->stop_on = 1;
    if (s->stopping) uv_async_send(&w->stop); /* it came meanwhile */
    pthread_mutex_unlock(&s->lock);
  }
  return 0;
}

/* Makes the table of workers 1 and up (worker 0 is s->main). */
static int make_workers(serve_t *s) {
  unsigned i;
  s->w = calloc(s->nworkers, sizeof *s->w);
  if (s->w == NULL) return -1;
  s->w[0] = &s->main;
  for (i = 1; i < s->nworkers; i++)
    if ((s->w[i] = calloc(1, sizeof **s->w)) == NULL) return -1;
  return 0;
}

static void free_workers(serve_t *s) {
  unsigned i;
  if (s->w == NULL) return;
  for (i = 1; i < s->nworkers; i++) free(s->w[i]);
  free(s->w);
}

/* Each session holds a socket: raise the open-file limit to its hard
 * limit (the soft one is often 1024), and say so when even that is below
 * what max_sessions asks for. */
static void raise_nofile(const serve_args_t *a) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  if (a->max_sessions > 0 && r.rlim_cur != RLIM_INFINITY &&
      (unsigned long long)a->max_sessions + 64 > r.rlim_cur)
    fprintf(stderr, "ludo serve: warning: the open-file limit (%llu) is "
            "below --max-sessions %lld plus room for the server: raise "
            "it (ulimit -n) or sessions past it will be refused\n",
            (unsigned long long)r.rlim_cur, a->max_sessions);
}

static int serve_main(const serve_args_t *a) {
  serve_t s;
  worker_t *w0 = &s.main;
  unsigned i;
  int rc, status = 1;
  memset(&s, 0, sizeof s);
  s.a = a;
  pthread_mutex_init(&s.lock, NULL);
  raise_nofile(a);
  atomic_init(&s.finished, 0);
  set_options(&s);
  w0->s = &s;
  if (uv_loop_init(&w0->loop) != 0) {
    ludo__cli_error("cannot start the event loop");
    pthread_mutex_destroy(&s.lock);
    return 1;
  }
  if (ludo__cli_hostlib_open(&s.lib, a->env_path, a->host_lib,
                             a->no_host_lib) != 0)
    goto out_loop;
  if (worker_load(w0) != 0) goto out_rt;
  plan(&s, w0->env);
  if (make_workers(&s) != 0) {
    ludo__cli_error("out of memory");
    goto out_rt;
  }
  if (s.nworkers > 1 &&
      (rc = ludo_server_group_new(s.nworkers, &s.group)) != 0) {
    ludo__cli_error("cannot make %u workers: %s", s.nworkers,
                    ludo_strerror(rc));
    goto out_rt;
  }
  if (worker_serve(w0) != 0) goto out_rt;
  s.port = ludo_server_port(w0->sv);
  /* Worker 0's stop, the workers' "done" and the signals first: a
   * signal during start-up stops the workers started so far, and starts
   * no more. */
  uv_async_init(&w0->loop, &s.done, on_done);
  s.done.data = &s;
  uv_async_init(&w0->loop, &w0->stop, on_stop);
  w0->stop.data = w0;
  w0->stop_on = 1;
  if (watch(&s) != 0) {
    w0->stop_on = 0;
    on_stop(&w0->stop);
    uv_run(&w0->loop, UV_RUN_DEFAULT);
    goto out_rt;
  }
  if (start_workers(&s) != 0) {
    ludo__cli_watch_stop(&s.watch);
  } else {
    status = 0;
    /* An IPv6 address goes in brackets, so that the URL is one. */
    fprintf(stderr, "ludo serve: %s on http://%s%s%s:%d (%s mode, %u "
            "worker%s)\n", a->env_path, strchr(a->host, ':') ? "[" : "",
            a->host, strchr(a->host, ':') ? "]" : "", s.port,
            a->production ? "production" : "simulation", s.nworkers,
            s.nworkers == 1 ? "" : "s");
    if (s.solo)
      fprintf(stderr, "ludo serve: %s declares concurrent = false: one "
              "worker, one session at a time\n", a->env_path);
    token_notice(a);
  }
  uv_run(&w0->loop, UV_RUN_DEFAULT);
  for (i = 1; i < s.nworkers; i++) {
    if (s.w[i]->thread_on) pthread_join(s.w[i]->thread, NULL);
    if (s.w[i]->thread_on || s.w[i]->failed) sem_destroy(&s.w[i]->ready);
  }
out_rt:
  worker_release(w0);
  ludo__cli_watch_end(&s.watch); /* after the frees, which it bounds */
  ludo_server_group_free(s.group);
  ludo__cli_hostlib_close(&s.lib);
  free_workers(&s);
out_loop:
  if (uv_loop_close(&w0->loop) != 0 && status == 0)
    fprintf(stderr, "ludo serve: handles were left open at exit\n");
  pthread_mutex_destroy(&s.lock);
  return status;
}

static int cmd_serve(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  serve_args_t a;
  int rc = parse_args(cmd, argc, argv, &a);
  if (rc >= 0) return rc;
  return serve_main(&a);
}

const ludo__cli_cmd_t ludo__cli_cmd_serve = {
    "serve", "ENV [options]",
    "serve an environment over OpenEnv's protocol (HTTP, WebSocket, MCP)",
    "Serves the environment at ENV (a folder with env.lua, or a .lua file)\n"
    "to OpenEnv clients: GET /health, /metadata, /schema, /openapi.json,\n"
    "/metrics; WS /ws (reset, step, state, close, mcp frames); POST and WS\n"
    "/mcp (JSON-RPC: tools/list, tools/call, openenv/session/create and\n"
    "close, MCP's initialize and ping); in simulation mode POST /reset,\n"
    "POST /step and GET /state on sessions named by X-Session-Id. See\n"
    "docs/protocol.md. Worker threads (--workers) share the port and the\n"
    "session count; a call on a session of another worker is passed to it\n"
    "(docs/serve-workers.md). SIGINT or SIGTERM stops it: connections and\n"
    "sessions close (WebSockets with 1001) and it exits 0, within 15 s\n"
    "whatever the environment's Lua does; a second signal is ignored.\n",
    serve_opts, NULL, cmd_serve};
