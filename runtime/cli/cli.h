/* cli.h - the ludo command line: shared helpers of the subcommands. */
#ifndef LUDO_CLI_CLI_H
#define LUDO_CLI_CLI_H

#include <stddef.h>

#define LUDO__CLI_USAGE 2

/* The folder holding lua/, rubrics/, features/ for this binary: $LUDO_PATH
 * (its first root), else ../share/ludo next to the executable, else the
 * source tree it was built from; NULL when none exists. Static buffer. */
const char *ludo__cli_root(void);

/* Prints "ludo: <msg>" to stderr. */
void ludo__cli_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

int ludo__cli_run(int argc, char **argv);

/* A growable text buffer (buf.c). Allocation failure ends the process
 * with a message: the CLI has nothing to fall back on. */
typedef struct ludo__cli_buf_s {
  char *p;
  size_t len, cap;
} ludo__cli_buf_t;

void ludo__cli_buf_printf(ludo__cli_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends `s` as a JSON string literal. */
void ludo__cli_buf_json_string(ludo__cli_buf_t *b, const char *s);
void ludo__cli_buf_reset(ludo__cli_buf_t *b);
void ludo__cli_buf_free(ludo__cli_buf_t *b);

#endif
