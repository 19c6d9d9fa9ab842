/* main.c - `ludo`: entry point, subcommand dispatch and `ludo help`. */
#include <stdarg.h>
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ludo.h"

#ifndef LUDO_SOURCE_ROOT
#define LUDO_SOURCE_ROOT "."
#endif

void ludo__cli_put_text(FILE *f, const char *s) {
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\n')
      fputs(s[1] != '\0' ? "\n    " : "", f);
    else if ((c < 0x20 && c != '\t') || c == 0x7f)
      fprintf(f, "\\x%02x", c);
    else
      fputc(c, f);
  }
}

void ludo__cli_error(const char *fmt, ...) {
  char small[512], *text = small;
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof small && (text = malloc((size_t)n + 1)) != NULL) {
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  if (text == NULL) text = small; /* cut, but said */
  fputs("ludo: ", stderr);
  ludo__cli_put_text(stderr, text);
  fputc('\n', stderr);
  if (text != small) free(text);
}

static int has_lua(const char *root) {
  char p[4200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/lua/ludo/async.lua", root);
  return stat(p, &sb) == 0;
}

const char *ludo__cli_exe_dir(void) {
  static char buf[4096];
  char *slash;
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return NULL;
  buf[n] = '\0';
  slash = strrchr(buf, '/');
  if (slash == NULL) return NULL;
  *slash = '\0';
  return buf;
}

/* The folder of ludo's Lua C modules next to this binary: installed,
 * PREFIX/lib/ludo/cmod; in a build tree, BUILD/cmod; NULL when neither
 * exists. Static buffer. */
static const char *cmod_dir(void) {
  static char buf[4200];
  char real[4096];
  const char *exe = ludo__cli_exe_dir();
  struct stat sb;
  if (exe == NULL) return NULL;
  snprintf(buf, sizeof buf, "%s/../lib/ludo/cmod", exe);
  if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
    snprintf(buf, sizeof buf, "%s/cmod", exe);
  if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) return NULL;
  if (realpath(buf, real) != NULL) snprintf(buf, sizeof buf, "%s", real);
  return buf;
}

const char *ludo__cli_root(void) {
  static char buf[4200];
  const char *env = getenv("LUDO_PATH"), *exe;
  if (env != NULL && *env == '\0') return NULL; /* embedded copies only */
  if (env != NULL) {
    size_t k = strcspn(env, ";");
    if (k >= sizeof buf) k = sizeof buf - 1;
    memcpy(buf, env, k);
    buf[k] = '\0';
    return buf;
  }
  exe = ludo__cli_exe_dir();
  if (exe != NULL) {
    snprintf(buf, sizeof buf, "%s/../share/ludo", exe);
    if (has_lua(buf)) return buf;
  }
  if (has_lua(LUDO_SOURCE_ROOT)) return LUDO_SOURCE_ROOT;
  return NULL;
}

/* ---- ludo lua-path --------------------------------------------------- */

static const ludo__cli_opt_t lua_path_opts[] = {LUDO__CLI_HELP_ENTRY,
                                                {0, NULL, NULL, NULL, NULL}};

static int cmd_lua_path(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  const char *root, *val, *cmod;
  char real[4096];
  int i = 0, rest = 0, id;
  while ((id = ludo__cli_next(cmd, argc, argv, &i, &rest, &val)) !=
         LUDO__CLI_END) {
    if (id == LUDO__CLI_BAD) return LUDO__CLI_USAGE;
    if (id == LUDO__CLI_OPT_HELP) {
      ludo__cli_help(cmd, stdout);
      return 0;
    }
    ludo__cli_error("lua-path takes no arguments (got '%s')", val);
    return LUDO__CLI_USAGE;
  }
  root = ludo__cli_root();
  if (root == NULL) {
    ludo__cli_error("cannot find ludo's Lua modules; set LUDO_PATH");
    return 1;
  }
  if (realpath(root, real) != NULL) root = real;
  printf("export LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;%s/?.lua;;'\n",
         root, root, root);
  cmod = cmod_dir();
  if (cmod != NULL) printf("export LUA_CPATH='%s/?.so;;'\n", cmod);
  return 0;
}

static const ludo__cli_cmd_t cmd_lua_path_def = {
    "lua-path", "",
    "print LUA_PATH/LUA_CPATH for stock lua5.4 and busted",
    "Prints shell lines that point LUA_PATH at ludo's Lua modules and\n"
    "LUA_CPATH at its Lua C modules (ludo.json, ludo.re, ludo.host,\n"
    "ludo.client), so `require(\"ludo.rubrics\")` and\n"
    "`require(\"ludo.json\")` work in a stock lua5.4 and in\n"
    "`busted --lua=lua5.4`:\n"
    "\n"
    "  eval \"$(ludo lua-path)\"\n",
    lua_path_opts, NULL, cmd_lua_path};

/* ---- ludo help, ludo itself ------------------------------------------ */

static int cmd_help(const ludo__cli_cmd_t *cmd, int argc, char **argv);

static const ludo__cli_opt_t help_opts[] = {LUDO__CLI_HELP_ENTRY,
                                            {0, NULL, NULL, NULL, NULL}};

static const ludo__cli_cmd_t cmd_help_def = {
    "help", "[COMMAND]", "show the options of every command, or of one",
    "Prints the usage and every option of COMMAND (the same as\n"
    "`ludo COMMAND --help`), or without one the list of commands.\n",
    help_opts, NULL, cmd_help};

static const ludo__cli_cmd_t *const commands[] = {
    &ludo__cli_cmd_run, &ludo__cli_cmd_eval, &ludo__cli_cmd_serve, &ludo__cli_cmd_client,
    &cmd_lua_path_def,
    &cmd_help_def, NULL};

enum { TOP_VERSION = 2 };

static const ludo__cli_opt_t top_opts[] = {
    LUDO__CLI_HELP_ENTRY,
    {TOP_VERSION, "--version", "-V", NULL, "print the version and exit"},
    {0, NULL, NULL, NULL, NULL}};

static const ludo__cli_cmd_t top = {
    "", "", "",
    "Run agent and reinforcement-learning environments written in Lua.\n",
    top_opts,
    "Options that take a value accept --name VALUE and --name=VALUE; an\n"
    "argument after -- is never an option.\n",
    NULL};

static void top_help(FILE *f) {
  const ludo__cli_cmd_t *const *c;
  fputs("usage: ludo COMMAND [options]\n"
        "       ludo help COMMAND\n\n", f);
  fputs(top.about, f);
  fputs("\ncommands:\n", f);
  for (c = commands; *c; c++) {
    char left[64];
    int n = snprintf(left, sizeof left, "  %s%s%s", (*c)->name,
                     (*c)->args[0] ? " " : "", (*c)->args);
    if (n + 2 > 24) /* a long usage: the summary on the next line */
      fprintf(f, "%s\n%-24s%s\n", left, "", (*c)->summary);
    else
      fprintf(f, "%-24s%s\n", left, (*c)->summary);
  }
  fputc('\n', f);
  ludo__cli_help_options(&top, f);
  fputc('\n', f);
  fputs(top.notes, f);
}

static const ludo__cli_cmd_t *find_command(const char *name) {
  const ludo__cli_cmd_t *const *c;
  for (c = commands; *c; c++)
    if (strcmp((*c)->name, name) == 0) return *c;
  return NULL;
}

static int cmd_help(const ludo__cli_cmd_t *cmd, int argc, char **argv) {
  const ludo__cli_cmd_t *which = NULL;
  const char *val;
  int i = 0, rest = 0, id;
  while ((id = ludo__cli_next(cmd, argc, argv, &i, &rest, &val)) !=
         LUDO__CLI_END) {
    if (id == LUDO__CLI_BAD) return LUDO__CLI_USAGE;
    if (id == LUDO__CLI_OPT_HELP) {
      ludo__cli_help(cmd, stdout);
      return 0;
    }
    if (which != NULL) {
      ludo__cli_error("help takes one command (got '%s' too)", val);
      return LUDO__CLI_USAGE;
    }
    which = find_command(val);
    if (which == NULL) {
      ludo__cli_error("no command '%s' (see ludo help)", val);
      return LUDO__CLI_USAGE;
    }
  }
  if (which == NULL)
    top_help(stdout);
  else
    ludo__cli_help(which, stdout);
  return 0;
}

/* Blocks of 1 MiB and more (a big observation, its JSON, a reply frame)
 * get their own mappings, given back to the system when freed. glibc's
 * default raises that threshold to the largest block freed so far (up to
 * 32 MiB), after which such blocks come from its heap and stay there:
 * 40 sessions that each returned a 4 MiB observation once held 341 MB of
 * RSS for 170 MB of live data (docs/performance.md, session 20). Only the
 * command does this; the library leaves the host's allocator alone. An
 * environment setting (MALLOC_MMAP_THRESHOLD_) wins. */
static void malloc_policy(void) {
#ifdef __GLIBC__
  if (getenv("MALLOC_MMAP_THRESHOLD_") == NULL)
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

int main(int argc, char **argv) {
  const ludo__cli_cmd_t *cmd;
  const char *val;
  int i = 0, rest = 0, id;
  malloc_policy();
  if (argc < 2) {
    top_help(stderr);
    return LUDO__CLI_USAGE;
  }
  cmd = argv[1][0] == '-' ? NULL : find_command(argv[1]);
  if (cmd != NULL) return cmd->main(cmd, argc - 1, argv + 1);
  if (argv[1][0] != '-') {
    ludo__cli_error("unknown command '%s' (see ludo help)", argv[1]);
    return LUDO__CLI_USAGE;
  }
  id = ludo__cli_next(&top, 2, argv, &i, &rest, &val);
  if (id > 0 && argc > 2) {
    ludo__cli_error("%s takes no arguments (got '%s')", argv[1], argv[2]);
    return LUDO__CLI_USAGE;
  }
  if (id == LUDO__CLI_OPT_HELP) {
    top_help(stdout);
    return 0;
  }
  if (id == TOP_VERSION) {
    printf("ludo %s\n", ludo_version());
    return 0;
  }
  return LUDO__CLI_USAGE; /* ludo__cli_next said what was wrong */
}
