/* serve.c - `ludo serve ENV`: an OpenEnv server for one environment
 * (docs/protocol.md). The command owns the loop and lends it to the
 * runtime, so it can watch SIGINT/SIGTERM: on either it stops accepting,
 * lets the server close its connections and sessions (bounded), and exits
 * 0. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cli/cli.h"

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
  OPT_PING_INTERVAL,
  OPT_HOST_LIB,
  OPT_NO_HOST_LIB,
  OPT_VERBOSE
};

static const ludo__cli_opt_t serve_opts[] = {
    {OPT_HOST, "--host", NULL, "H",
     "address to listen on (default 127.0.0.1; 0.0.0.0\n"
     "for every interface)"},
    {OPT_PORT, "--port", NULL, "P", "port (default 8000; 0: any free one)"},
    {OPT_MAX_SESSIONS, "--max-sessions", NULL, "N",
     "sessions open at once, of every kind (default\n"
     "1024); an environment with concurrent = false\n"
     "allows only 1"},
    {OPT_SESSION_TIMEOUT, "--session-timeout", NULL, "S",
     "close a session idle for S seconds, and its\n"
     "WebSocket (default: never)"},
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
     "CPU time each call may run, in milliseconds\n"
     "(default 10000)"},
    {OPT_MEMORY_CAP, "--memory-cap", NULL, "MB",
     "memory cap of each session's Lua state, in MiB\n"
     "(default 64)"},
    {OPT_MAX_MESSAGE, "--max-message", NULL, "MB",
     "largest WebSocket message or request body, in\n"
     "MiB (default 16)"},
    {OPT_PING_INTERVAL, "--ping-interval", NULL, "S",
     "keepalive pings on WebSockets every S seconds\n"
     "(default 20; 0: none)"},
    {OPT_HOST_LIB, "--host-lib", NULL, "PATH",
     "load the host library PATH instead of the one\n"
     "the environment's manifest.json names"},
    {OPT_NO_HOST_LIB, "--no-host-lib", NULL, NULL,
     "never load native code"},
    {OPT_VERBOSE, "--verbose", "-v", NULL,
     "show print()/ludo.log output of the sessions"},
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

typedef struct {
  const char *env_path, *host, *token, *host_lib;
  long long port, max_sessions, timeout_s, budget_ms, cap_mb, max_msg_mb;
  long long ping_s;
  int production, strict, no_host_lib, verbose;
} serve_args_t;

/* The server's state, reached from the loop's callbacks. */
typedef struct {
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  uv_timer_t deadline;
  ludo_server_t *sv;
  int stopping;
} serve_t;

static int parse_num(const char *name, const char *val, long long min,
                     long long max, long long *out) {
  char *end;
  long long v = strtoll(val, &end, 10);
  if (*val == '\0' || *end != '\0' || v < min || v > max) {
    ludo__cli_error("%s takes a whole number from %lld to %lld (got '%s')",
                    name, min, max, val);
    return -1;
  }
  *out = v;
  return 0;
}

static int apply(serve_args_t *a, int id, const char *val) {
  switch (id) {
    case OPT_HOST: a->host = val; return 0;
    case OPT_PORT: return parse_num("--port", val, 0, 65535, &a->port);
    case OPT_MAX_SESSIONS:
      return parse_num("--max-sessions", val, 1, 1000000, &a->max_sessions);
    case OPT_SESSION_TIMEOUT:
      return parse_num("--session-timeout", val, 1, 86400 * 365,
                       &a->timeout_s);
    case OPT_MODE:
      if (strcmp(val, "simulation") == 0) {
        a->production = 0;
      } else if (strcmp(val, "production") == 0) {
        a->production = 1;
      } else {
        ludo__cli_error("--mode is simulation or production (got '%s')",
                        val);
        return -1;
      }
      return 0;
    case OPT_TOKEN: a->token = val; return 0;
    case OPT_STRICT: a->strict = 1; return 0;
    case OPT_NO_STRICT: a->strict = 0; return 0;
    case OPT_CPU_BUDGET:
      return parse_num("--cpu-budget", val, 1, 86400000, &a->budget_ms);
    case OPT_MEMORY_CAP:
      return parse_num("--memory-cap", val, 1, 65536, &a->cap_mb);
    case OPT_MAX_MESSAGE:
      return parse_num("--max-message", val, 1, 4096, &a->max_msg_mb);
    case OPT_PING_INTERVAL:
      return parse_num("--ping-interval", val, 0, 86400, &a->ping_s);
    case OPT_HOST_LIB: a->host_lib = val; return 0;
    case OPT_NO_HOST_LIB: a->no_host_lib = 1; return 0;
    case OPT_VERBOSE: a->verbose = 1; return 0;
    default: return 0;
  }
}

/* Parses argv into *a. Returns -1 to go on, or the exit status. */
static int parse_args(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                      serve_args_t *a) {
  const char *val;
  int i = 0, rest = 0, id;
  memset(a, 0, sizeof *a);
  a->host = "127.0.0.1";
  a->port = 8000;
  a->budget_ms = 10000;
  a->cap_mb = 64;
  a->max_msg_mb = 16;
  a->ping_s = 20;
  a->token = getenv("LUDO_TOKEN");
  while ((id = ludo__cli_next(cmd, argc, argv, &i, &rest, &val)) !=
         LUDO__CLI_END) {
    if (id == LUDO__CLI_BAD) return LUDO__CLI_USAGE;
    if (id == LUDO__CLI_OPT_HELP) {
      ludo__cli_help(cmd, stdout);
      return 0;
    }
    if (id > 0) {
      if (apply(a, id, val) != 0) return LUDO__CLI_USAGE;
    } else if (a->env_path == NULL) {
      a->env_path = val;
    } else {
      ludo__cli_error("unexpected argument '%s' (one ENV only)", val);
      return LUDO__CLI_USAGE;
    }
  }
  if (a->env_path == NULL) {
    ludo__cli_error("serve needs an environment (see ludo help serve)");
    return LUDO__CLI_USAGE;
  }
  return -1;
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

static void on_server_closed(void *ud) {
  serve_t *s = ud;
  s->sv = NULL;
  uv_close((uv_handle_t *)&s->deadline, on_closed_handle);
}

static void on_deadline(uv_timer_t *t) {
  (void)t;
  fprintf(stderr, "ludo serve: connections did not close in time; "
          "exiting\n");
  exit(0);
}

/* SIGINT/SIGTERM: a graceful stop, bounded by a deadline. */
static void on_signal(uv_signal_t *h, int signum) {
  serve_t *s = h->data;
  (void)signum;
  if (s->stopping) return;
  s->stopping = 1;
  fprintf(stderr, "ludo serve: stopping\n");
  uv_close((uv_handle_t *)&s->sigint, on_closed_handle);
  uv_close((uv_handle_t *)&s->sigterm, on_closed_handle);
  uv_timer_init(&s->loop, &s->deadline);
  uv_timer_start(&s->deadline, on_deadline, 15000, 0);
  uv_unref((uv_handle_t *)&s->deadline);
  ludo_server_close(s->sv, on_server_closed, s);
}

static int serve_main(const serve_args_t *a) {
  serve_t s;
  ludo__cli_hostlib_t lib;
  ludo_options_t opts;
  ludo_server_options_t so;
  ludo_runtime_t *rt = NULL;
  ludo_env_t *env = NULL;
  int rc, status = 1;
  memset(&s, 0, sizeof s);
  if (uv_loop_init(&s.loop) != 0) {
    ludo__cli_error("cannot start the event loop");
    return 1;
  }
  ludo_options_init(&opts);
  opts.loop = &s.loop;
  opts.module_path = ludo__cli_root();
  opts.cpu_budget_ms = (uint32_t)a->budget_ms;
  opts.memory_cap = (size_t)a->cap_mb << 20;
  opts.max_input_bytes = (size_t)a->max_msg_mb << 20;
  opts.log = a->verbose ? verbose_log : quiet_log;
  if (ludo__cli_hostlib_open(&lib, a->env_path, a->host_lib,
                             a->no_host_lib) != 0)
    goto out_loop;
  if ((rc = ludo_runtime_new(&rt, &opts)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    goto out_lib;
  }
  if (ludo__cli_hostlib_init(&lib, rt) != 0) goto out_rt;
  if (ludo_env_load(rt, a->env_path, NULL, &env) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(rt));
    goto out_rt;
  }
  ludo_server_options_init(&so);
  so.production = a->production;
  if (a->max_sessions) so.max_sessions = (unsigned)a->max_sessions;
  so.session_timeout_ms = (uint32_t)(a->timeout_s * 1000);
  so.token = a->token;
  so.strict = a->strict;
  so.max_message_bytes = (size_t)a->max_msg_mb << 20;
  so.ping_interval_ms = a->ping_s ? (uint32_t)(a->ping_s * 1000) : UINT32_MAX;
  if ((rc = ludo_server_new(env, &so, &s.sv)) != 0) {
    ludo__cli_error("%s", rc == LUDO_EINVAL ? ludo_runtime_errmsg(rt)
                                            : ludo_strerror(rc));
    goto out_rt;
  }
  if (ludo_server_listen(s.sv, a->host, (int)a->port) != 0) {
    ludo__cli_error("cannot listen on %s:%lld: %s", a->host, a->port,
                    ludo_server_errmsg(s.sv));
    ludo_server_close(s.sv, NULL, NULL);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    goto out_rt;
  }
  uv_signal_init(&s.loop, &s.sigint);
  uv_signal_init(&s.loop, &s.sigterm);
  s.sigint.data = s.sigterm.data = &s;
  uv_signal_start(&s.sigint, on_signal, SIGINT);
  uv_signal_start(&s.sigterm, on_signal, SIGTERM);
  fprintf(stderr, "ludo serve: %s on http://%s:%d (%s mode)\n",
          a->env_path, a->host, ludo_server_port(s.sv),
          a->production ? "production" : "simulation");
  uv_run(&s.loop, UV_RUN_DEFAULT);
  status = 0;
out_rt:
  ludo_runtime_free(rt);
  uv_run(&s.loop, UV_RUN_DEFAULT); /* ludo's handles close */
out_lib:
  ludo__cli_hostlib_close(&lib);
out_loop:
  if (uv_loop_close(&s.loop) != 0 && status == 0)
    fprintf(stderr, "ludo serve: handles were left open at exit\n");
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
    "docs/protocol.md. SIGINT or SIGTERM stops it: connections and\n"
    "sessions close (WebSockets with 1001) and it exits 0.\n",
    serve_opts, NULL, cmd_serve};
