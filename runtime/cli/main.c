/* main.c - `ludo`: entry point and subcommand dispatch. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ludo.h"

#ifndef LUDO_SOURCE_ROOT
#define LUDO_SOURCE_ROOT "."
#endif

static const char usage[] =
    "usage: ludo <command> [options]\n"
    "\n"
    "Run agent and reinforcement-learning environments written in Lua.\n"
    "\n"
    "commands:\n"
    "  run ENV        run episodes in-process with a Lua policy\n"
    "  lua-path       print `export LUA_PATH=...` so a stock lua5.4 and\n"
    "                 busted can require ludo's Lua modules (ludo.rubrics)\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (also: ludo <command> --help)\n"
    "  -V, --version  print the version\n";

void ludo__cli_error(const char *fmt, ...) {
  va_list ap;
  fputs("ludo: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static int has_lua(const char *root) {
  char p[4200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/lua/ludo/async.lua", root);
  return stat(p, &sb) == 0;
}

/* The folder of ludo's Lua C modules next to this binary: installed,
 * PREFIX/lib/ludo/cmod; in a build tree, BUILD/cmod; NULL when neither
 * exists. Static buffer. */
static const char *cmod_dir(void) {
  static char buf[4200];
  char exe[4096], *slash;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 64);
  struct stat sb;
  if (n <= 0) return NULL;
  exe[n] = '\0';
  slash = strrchr(exe, '/');
  if (slash == NULL) return NULL;
  *slash = '\0';
  snprintf(buf, sizeof buf, "%s/../lib/ludo/cmod", exe);
  if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
    snprintf(buf, sizeof buf, "%s/cmod", exe);
  if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) return NULL;
  if (realpath(buf, exe) != NULL) snprintf(buf, sizeof buf, "%.4095s", exe);
  return buf;
}

const char *ludo__cli_root(void) {
  static char buf[4096];
  const char *env = getenv("LUDO_PATH");
  ssize_t n;
  if (env != NULL && *env == '\0') return NULL; /* embedded copies only */
  if (env != NULL) {
    size_t k = strcspn(env, ";");
    if (k >= sizeof buf) k = sizeof buf - 1;
    memcpy(buf, env, k);
    buf[k] = '\0';
    return buf;
  }
  n = readlink("/proc/self/exe", buf, sizeof buf - 32);
  if (n > 0) {
    char *slash;
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (slash) {
      strcpy(slash, "/../share/ludo");
      if (has_lua(buf)) return buf;
    }
  }
  if (has_lua(LUDO_SOURCE_ROOT)) return LUDO_SOURCE_ROOT;
  return NULL;
}

static int cmd_lua_path(int argc, char **argv) {
  const char *root;
  if (argc > 1 && (strcmp(argv[1], "-h") == 0 ||
                   strcmp(argv[1], "--help") == 0)) {
    printf("usage: ludo lua-path\n\n"
           "Prints shell lines that point LUA_PATH at ludo's Lua modules\n"
           "and LUA_CPATH at its Lua C modules (ludo.json, ludo.re,\n"
           "ludo.host), so `require(\"ludo.rubrics\")` and\n"
           "`require(\"ludo.json\")` work in a stock lua5.4 and in\n"
           "`busted --lua=lua5.4`:\n\n"
           "  eval \"$(ludo lua-path)\"\n");
    return 0;
  }
  if (argc > 1) {
    ludo__cli_error("lua-path takes no arguments (got '%s')", argv[1]);
    return LUDO__CLI_USAGE;
  }
  root = ludo__cli_root();
  if (root == NULL) {
    ludo__cli_error("cannot find ludo's Lua modules; set LUDO_PATH");
    return 1;
  }
  {
    char real[4096];
    if (realpath(root, real) != NULL) root = real;
    printf("export LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;%s/?.lua;;'\n",
           root, root, root);
  }
  {
    const char *cmod = cmod_dir();
    if (cmod != NULL) printf("export LUA_CPATH='%s/?.so;;'\n", cmod);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return LUDO__CLI_USAGE;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "help") == 0) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("ludo %s\n", ludo_version());
    return 0;
  }
  if (strcmp(argv[1], "run") == 0) return ludo__cli_run(argc - 1, argv + 1);
  if (strcmp(argv[1], "lua-path") == 0)
    return cmd_lua_path(argc - 1, argv + 1);
  ludo__cli_error("unknown command '%s' (try: ludo --help)", argv[1]);
  return LUDO__CLI_USAGE;
}
