/* client.c - `ludo client URL`: a quick session with an OpenEnv server
 * (ludo serve, or OpenEnv's own), interactive or from a script: one
 * command per line, each reply printed as one JSON line (docs/client.md).
 * Built on the client of ludo.h alone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

enum {
  OPT_SCRIPT = 2,
  OPT_TOKEN,
  OPT_TIMEOUT,
  OPT_CONNECT_TIMEOUT,
  OPT_PING_INTERVAL,
  OPT_MAX_MESSAGE,
  OPT_NO_RECONNECT,
  OPT_QUIET
};

static const ludo__cli_opt_t client_opts[] = {
    {OPT_SCRIPT, "--script", NULL, "FILE",
     "read the commands from FILE (- for stdin)\n"
     "instead of typing them"},
    {OPT_TOKEN, "--token", NULL, "T",
     "send 'Authorization: Bearer T' (ludo serve\n"
     "--token; default: $LUDO_TOKEN, else none)"},
    {OPT_TIMEOUT, "--timeout", NULL, "S",
     "wait at most S seconds for a reply (default 60;\n"
     "0: no limit)"},
    {OPT_CONNECT_TIMEOUT, "--connect-timeout", NULL, "S",
     "connecting and the WebSocket handshake, in\n"
     "seconds (default 10)"},
    {OPT_PING_INTERVAL, "--ping-interval", NULL, "S",
     "keepalive pings after S quiet seconds (default\n"
     "20; 0: none, for tunnels that drop pings)"},
    {OPT_MAX_MESSAGE, "--max-message", NULL, "MB",
     "largest reply accepted, in MiB (default 100)"},
    {OPT_NO_RECONNECT, "--no-reconnect", NULL, NULL,
     "after a lost connection, fail every command\n"
     "instead of connecting again on the next reset"},
    {OPT_QUIET, "--quiet", "-q", NULL,
     "no prompt and no greeting, even on a terminal"},
    LUDO__CLI_HELP_ENTRY,
    {0, NULL, NULL, NULL, NULL}};

typedef struct {
  const char *url, *script, *token;
  long long timeout_s, connect_s, ping_s, max_mb;
  int no_reconnect, quiet;
} client_args_t;

static int apply(void *ud, int id, const char *val) {
  client_args_t *a = ud;
  switch (id) {
    case OPT_SCRIPT: a->script = val; return 0;
    case OPT_TOKEN: a->token = val; return 0;
    case OPT_TIMEOUT:
      return ludo__cli_number("--timeout", val, 0, 86400, &a->timeout_s);
    case OPT_CONNECT_TIMEOUT:
      return ludo__cli_number("--connect-timeout", val, 1, 3600, &a->connect_s);
    case OPT_PING_INTERVAL:
      return ludo__cli_number("--ping-interval", val, 0, 86400, &a->ping_s);
    case OPT_MAX_MESSAGE:
      return ludo__cli_number("--max-message", val, 1, 4096, &a->max_mb);
    case OPT_NO_RECONNECT: a->no_reconnect = 1; return 0;
    case OPT_QUIET: a->quiet = 1; return 0;
    default: return 0;
  }
}

/* Parses argv into *a. Returns -1 to go on, or the exit status. */
static int parse_args(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                      client_args_t *a) {
  memset(a, 0, sizeof *a);
  a->timeout_s = 60;
  a->connect_s = 10;
  a->ping_s = 20;
  a->max_mb = 100;
  a->token = getenv("LUDO_TOKEN");
  return ludo__cli_parse(cmd, argc, argv, apply, a, &a->url, "URL",
                         "a server's URL");
}

static const char commands_help[] =
    "commands (one per line; JSON on the rest of the line):\n"
    "  reset [OPTIONS]    start an episode: reset {\"seed\": 1}\n"
    "  step ACTION        step: step {\"message\": \"hi\"}\n"
    "  state              the episode's state\n"
    "  tools              the environment's MCP tools\n"
    "  call NAME [ARGS]   call a tool: call echo_message {\"message\": "
    "\"hi\"}\n"
    "  info               the environment's name and schemas\n"
    "  help               this list\n"
    "  quit               end the session (also at end of input)\n"
    "Lines starting with # and empty lines are skipped.\n";

/* Skips blanks. */
static const char *skip(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* Runs one command line. Returns 0 (done, printed), 1 (failed, said why
 * on stderr), or 2 for quit. */
static int run_line(ludo_client_t *c, const char *line, long lineno,
                    ludo__cli_buf_t *tmp) {
  const char *p = skip(line), *arg, *out = NULL;
  size_t n = strcspn(p, " \t"), len = 0, alen;
  int rc;
  if (*p == '\0' || *p == '#') return 0;
  arg = skip(p + n);
  alen = strlen(arg);
  while (alen > 0 && (arg[alen - 1] == ' ' || arg[alen - 1] == '\t'))
    alen--;
#define IS(w) (n == sizeof(w) - 1 && strncmp(p, w, n) == 0)
  if (IS("quit") || IS("exit")) return 2;
  if (IS("help")) {
    fputs(commands_help, stdout);
    return 0;
  }
  if (IS("reset")) {
    rc = ludo_client_reset(c, alen ? arg : NULL, alen, &out, &len);
  } else if (IS("step")) {
    rc = ludo_client_step(c, arg, alen, &out, &len);
  } else if (IS("state")) {
    rc = ludo_client_state(c, &out, &len);
  } else if (IS("tools")) {
    rc = ludo_client_list_tools(c, &out, &len);
  } else if (IS("info")) {
    rc = ludo_client_info(c, &out, &len);
  } else if (IS("call")) {
    size_t k = strcspn(arg, " \t");
    char name[256];
    if (k == 0 || k >= sizeof name) {
      ludo__cli_error("line %ld: call needs a tool name: call NAME "
                      "[{...}]", lineno);
      return 1;
    }
    memcpy(name, arg, k);
    name[k] = '\0';
    arg = skip(arg + k);
    alen = strlen(arg);
    while (alen > 0 && (arg[alen - 1] == ' ' || arg[alen - 1] == '\t'))
      alen--;
    ludo__cli_buf_reset(tmp);
    ludo__cli_buf_printf(tmp, "{\"name\":");
    ludo__cli_buf_json_string(tmp, name);
    if (alen > 0) ludo__cli_buf_printf(tmp, ",\"arguments\":%.*s",
                                       (int)alen, arg);
    ludo__cli_buf_printf(tmp, "}");
    rc = ludo_client_call_tool(c, tmp->p, tmp->len, &out, &len);
  } else {
    ludo__cli_error("line %ld: unknown command '%.*s' (try help)", lineno,
                    (int)n, p);
    return 1;
  }
#undef IS
  if (rc != 0) {
    ludo__cli_error("line %ld: %.*s: %s", lineno, (int)n, p,
                    ludo_client_errmsg(c));
    return 1;
  }
  printf("%.*s\n", (int)len, out);
  fflush(stdout);
  return 0;
}

static int cmd_client(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  client_args_t a;
  ludo_runtime_t *rt;
  ludo_client_options_t o;
  ludo_client_t *c;
  ludo__cli_buf_t tmp = {0};
  FILE *in = stdin;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  long lineno = 0;
  int rc = parse_args(cmd, argc, argv, &a), failed = 0, prompt;
  if (rc >= 0) return rc;
  if (a.script != NULL && strcmp(a.script, "-") != 0) {
    in = fopen(a.script, "r");
    if (in == NULL) {
      ludo__cli_error("--script: cannot read %s: %s", a.script,
                      strerror(errno));
      return 1;
    }
  }
  prompt = !a.quiet && a.script == NULL && isatty(0);
  if ((rc = ludo_runtime_new(&rt, NULL)) != 0) {
    ludo__cli_error("cannot start: %s", ludo_strerror(rc));
    if (in != stdin) fclose(in);
    return 1;
  }
  ludo_client_options_init(&o);
  o.token = a.token && *a.token ? a.token : NULL;
  o.timeout_ms = a.timeout_s ? (uint32_t)(a.timeout_s * 1000) : UINT32_MAX;
  o.connect_timeout_ms = (uint32_t)(a.connect_s * 1000);
  o.ping_interval_ms = a.ping_s ? (uint32_t)(a.ping_s * 1000) : UINT32_MAX;
  o.max_message_bytes = (size_t)a.max_mb << 20;
  o.no_reconnect = a.no_reconnect;
  if (ludo_client_connect(rt, a.url, &o, &c) != 0) {
    ludo__cli_error("%s", ludo_runtime_errmsg(rt));
    ludo_runtime_free(rt);
    if (in != stdin) fclose(in);
    return 1;
  }
  if (prompt)
    fprintf(stderr, "connected to %s; type help for the commands\n",
            ludo_client_url(c));
  for (;;) {
    if (prompt) fputs("ludo> ", stderr);
    got = getline(&line, &cap, in);
    if (got < 0) break;
    lineno++;
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
      line[--got] = '\0';
    rc = run_line(c, line, lineno, &tmp);
    if (rc == 2) break;
    failed |= rc;
  }
  if (prompt && got < 0) fputc('\n', stderr);
  free(line);
  ludo__cli_buf_free(&tmp);
  if (in != stdin) fclose(in);
  ludo_client_close(c);
  ludo_runtime_free(rt);
  return failed ? 1 : 0;
}

const ludo__cli_cmd_t ludo__cli_cmd_client = {
    "client", "URL [options]",
    "a quick session with an OpenEnv server",
    "Connects to the OpenEnv server at URL (http://HOST:PORT, as OpenEnv's\n"
    "client takes it, or ws://HOST:PORT/ws) and runs commands typed or read\n"
    "from --script, one per line, printing each reply as one JSON line:\n"
    "\n"
    "  reset [OPTIONS]    start an episode: reset {\"seed\": 1}\n"
    "  step ACTION        step: step {\"message\": \"hi\"}\n"
    "  state              the episode's state\n"
    "  tools              the environment's MCP tools\n"
    "  call NAME [ARGS]   call a tool: call echo_message {\"message\": "
    "\"hi\"}\n"
    "  info               the environment's name and schemas\n"
    "  quit               end the session (also at end of input)\n",
    client_opts,
    "A command that fails prints 'ludo: line N: COMMAND: ECODE: message' to\n"
    "stderr and the session goes on; the exit status is 1 when any command\n"
    "failed or the connection could not be made, 2 for a usage error.\n"
    "When the server ends the connection, the episode is lost: step and\n"
    "state fail until the next reset, which connects again.\n",
    cmd_client};
