/* cli.h - the ludo command line: shared helpers of the subcommands. */
#ifndef LUDO_CLI_CLI_H
#define LUDO_CLI_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "ludo.h"

#define LUDO__CLI_USAGE 2

/* The folder holding lua/, rubrics/, features/ for this binary: $LUDO_PATH
 * (its first root), else ../share/ludo next to the executable, else the
 * source tree it was built from; NULL when none exists. Static buffer. */
const char *ludo__cli_root(void);

/* The folder of the running ludo binary (no trailing '/'); NULL when it
 * cannot be read. Static buffer. */
const char *ludo__cli_exe_dir(void);

/* Prints "ludo: <msg>" to stderr, through ludo__cli_put_text (messages
 * carry a session's error text). */
void ludo__cli_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Writes text that may come from a session (an error's message) to a
 * terminal or a log: control bytes other than tab as \xNN (no escape
 * sequences), and each line after the first indented by 4 spaces, so that
 * the text cannot pass for a line of ludo's own ("episode 9: ..."); a
 * final newline is dropped. */
void ludo__cli_put_text(FILE *f, const char *s);

/* ---- commands and their options (opts.c) -----------------------------
 * Every command declares its options in one table: the parser reads argv
 * with it and `ludo help COMMAND` prints it, so the two cannot differ. */

/* One option. The help text is lines joined by '\n', 56 columns at most
 * (it is printed after a 24-column name column). */
typedef struct ludo__cli_opt_s {
  int id;            /* > 0: what the parser returns; 0 ends the table */
  const char *name;  /* "--episodes" */
  const char *alias; /* "-v", or NULL */
  const char *arg;   /* the value's name ("N"), or NULL for a switch */
  const char *help;
} ludo__cli_opt_t;

/* The id of the -h/--help entry every command has. */
#define LUDO__CLI_OPT_HELP 1
#define LUDO__CLI_HELP_ENTRY \
  {LUDO__CLI_OPT_HELP, "--help", "-h", NULL, "show this help and exit"}

/* Entries that mean the same in `ludo run` and `ludo eval`. */
#define LUDO__CLI_CPU_BUDGET_ENTRY(id)                                    \
  {(id), "--cpu-budget", NULL, "MS",                                      \
   "time each call's Lua (and the policy's) may run,\n"                  \
   "waits excluded, in milliseconds (default 10000)"}
#define LUDO__CLI_TOKEN_ENTRY(id)                                         \
  {(id), "--token", NULL, "T",                                            \
   "with a server's URL: send 'Authorization: Bearer\n"                   \
   "T' (default: $LUDO_TOKEN, else none)"}

typedef struct ludo__cli_cmd_s {
  const char *name;           /* "run" */
  const char *args;           /* the usage line after the name */
  const char *summary;        /* one line for `ludo help` */
  const char *about;          /* printed after the usage line */
  const ludo__cli_opt_t *opts;
  const char *notes;          /* printed after the options, or NULL */
  int (*main)(const struct ludo__cli_cmd_s *cmd, int argc, char **argv);
} ludo__cli_cmd_t;

/* ludo__cli_next's results besides option ids and 0. */
#define LUDO__CLI_END (-1)
#define LUDO__CLI_BAD (-2)

/* Reads the argument after argv[*i] (start with *i = 0 and *rest = 0) and
 * moves *i past it: returns the id of an option (its value in *val when
 * it takes one: "--name VALUE" or "--name=VALUE"), 0 for an argument that
 * is not an option (in *val; everything after "--" is one), LUDO__CLI_END
 * after the last, or LUDO__CLI_BAD after printing what was wrong (an
 * unknown option, a missing value, a value given to a switch). */
int ludo__cli_next(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                   int *i, int *rest, const char **val);

/* Prints `ludo help CMD`: usage, about, the options, notes. */
void ludo__cli_help(const ludo__cli_cmd_t *cmd, FILE *f);
/* Prints the "options:" section alone. */
void ludo__cli_help_options(const ludo__cli_cmd_t *cmd, FILE *f);

/* Reads a command's argv (cmd's table): each option goes to
 * apply(ud, id, value), which returns 0 or the exit status to stop with;
 * the one argument that is not an option goes to *arg (`what` names it in
 * messages: "ENV", "URL"); -h prints the help. Returns -1 to go on, 0
 * after the help, or the exit status (LUDO__CLI_USAGE after saying what
 * was wrong: an unknown option, a second argument, none at all, which
 * `need` describes: "an environment"). */
int ludo__cli_parse(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                    int (*apply)(void *ud, int id, const char *val),
                    void *ud, const char **arg, const char *what,
                    const char *need);

/* Reads `val` as a whole number from min to max into *out, for option
 * `name`. Returns 0, or LUDO__CLI_USAGE after saying what was wrong. */
int ludo__cli_number(const char *name, const char *val, long long min,
                     long long max, long long *out);

/* The commands (one file each). */
extern const ludo__cli_cmd_t ludo__cli_cmd_run;
extern const ludo__cli_cmd_t ludo__cli_cmd_serve;
extern const ludo__cli_cmd_t ludo__cli_cmd_client;
extern const ludo__cli_cmd_t ludo__cli_cmd_eval;

/* ---- host libraries (hostlib.c) ---------------------------------------
 * The one place where the commands that run environments (run; later
 * serve and eval) find and load an environment's host library: open it
 * once, init it for each runtime, close it after every runtime is freed.
 * See docs/environments.md ("Host libraries") for where it is found. */

typedef struct ludo__cli_hostlib_s {
  char path[4096];       /* the library's file; empty: none */
  char origin[4200];     /* who named it, for messages */
  void *handle;          /* dlopen's */
  ludo_host_init_fn init;
} ludo__cli_hostlib_t;

/* Finds and loads the host library of the environment at `env_path`:
 * `override` (--host-lib, relative to the working directory) when not
 * NULL, else the one the environment's manifest names, else none (then
 * h->handle stays NULL). With `disabled` (--no-host-lib) loads nothing,
 * and fails when the manifest names one. Returns 0, or -1 after printing
 * what was wrong: a malformed manifest, a missing file, a file dlopen
 * refuses, no ludo_host_init in it. */
int ludo__cli_hostlib_open(ludo__cli_hostlib_t *h, const char *env_path,
                           const char *override, int disabled);

/* Calls the library's ludo_host_init on `rt` (nothing when none is open).
 * Returns 0, or -1 after printing the library's error. */
int ludo__cli_hostlib_init(ludo__cli_hostlib_t *h, ludo_runtime_t *rt);

/* Unloads the library: only after every runtime it was initialised on is
 * freed (their host functions live in it). Accepts a closed one. */
void ludo__cli_hostlib_close(ludo__cli_hostlib_t *h);

/* ---- text buffers (buf.c) ---------------------------------------------
 * A growable text buffer. Allocation failure ends the process with a
 * message: the CLI has nothing to fall back on. */
typedef struct ludo__cli_buf_s {
  char *p;
  size_t len, cap;
} ludo__cli_buf_t;

void ludo__cli_buf_printf(ludo__cli_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends n bytes of s (kept NUL-terminated). */
void ludo__cli_buf_add(ludo__cli_buf_t *b, const char *s, size_t n);
/* Appends `s` as a JSON string literal. */
void ludo__cli_buf_json_string(ludo__cli_buf_t *b, const char *s);
/* Appends the n bytes of s as a JSON string literal ('"', '\\' and
 * control bytes escaped; other bytes as they are, so UTF-8 stays UTF-8). */
void ludo__cli_buf_json_stringn(ludo__cli_buf_t *b, const char *s, size_t n);
/* The same without the quotes: the escaped bytes, for a literal written
 * in pieces. */
void ludo__cli_buf_json_chars(ludo__cli_buf_t *b, const char *s, size_t n);
/* Appends v as a JSON real: the fewest significant digits (15 to 17) that
 * read back as v, with ".0" when it would read as an integer; NaN and the
 * infinities as null. */
void ludo__cli_buf_json_real(ludo__cli_buf_t *b, double v);
void ludo__cli_buf_reset(ludo__cli_buf_t *b);
void ludo__cli_buf_free(ludo__cli_buf_t *b);

#endif
