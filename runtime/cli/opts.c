/* opts.c - commands and their options: one table per command, read by the
 * parser (ludo__cli_next) and printed by `ludo help COMMAND`
 * (ludo__cli_help), so what a command accepts and what its help says
 * cannot differ. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Help layout: option names in a column of this width, then the text. */
#define OPT_COL 24

static const ludo__cli_opt_t *find(const ludo__cli_cmd_t *cmd,
                                   const char *a, size_t n) {
  const ludo__cli_opt_t *o;
  for (o = cmd->opts; o->id != 0; o++) {
    if (strlen(o->name) == n && strncmp(o->name, a, n) == 0) return o;
    if (o->alias && strlen(o->alias) == n && strncmp(o->alias, a, n) == 0)
      return o;
  }
  return NULL;
}

int ludo__cli_next(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                   int *i, int *rest, const char **val) {
  const ludo__cli_opt_t *o;
  const char *a, *eq;
  size_t n;
  *val = NULL;
  if (++*i >= argc) return LUDO__CLI_END;
  a = argv[*i];
  if (!*rest && strcmp(a, "--") == 0) {
    *rest = 1;
    if (++*i >= argc) return LUDO__CLI_END;
    a = argv[*i];
  }
  if (*rest || a[0] != '-' || a[1] == '\0') { /* "-" is a value */
    *val = a;
    return 0;
  }
  eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
  n = eq ? (size_t)(eq - a) : strlen(a);
  o = find(cmd, a, n);
  if (o == NULL) {
    ludo__cli_error("unknown option '%.*s' (see ludo help%s%s)", (int)n, a,
                    cmd->name[0] ? " " : "", cmd->name);
    return LUDO__CLI_BAD;
  }
  if (o->arg == NULL) {
    if (eq != NULL) {
      ludo__cli_error("%s takes no value (got '%s')", o->name, a);
      return LUDO__CLI_BAD;
    }
    return o->id;
  }
  if (eq != NULL) {
    *val = eq + 1;
  } else if (*i + 1 < argc) {
    *val = argv[++*i];
  } else {
    ludo__cli_error("%s needs a value: %s %s (see ludo help%s%s)", o->name,
                    o->name, o->arg, cmd->name[0] ? " " : "", cmd->name);
    return LUDO__CLI_BAD;
  }
  return o->id;
}

/* Prints `text` with every line indented by `indent` spaces after the
 * first, which continues the current line. */
static void put_lines(FILE *f, const char *text, int indent) {
  const char *p = text;
  for (;;) {
    size_t n = strcspn(p, "\n");
    fprintf(f, "%.*s\n", (int)n, p);
    if (p[n] == '\0') break;
    p += n + 1;
    fprintf(f, "%*s", indent, "");
  }
}

void ludo__cli_help_options(const ludo__cli_cmd_t *cmd, FILE *f) {
  const ludo__cli_opt_t *o;
  fputs("options:\n", f);
  for (o = cmd->opts; o->id != 0; o++) {
    char left[96];
    int n = snprintf(left, sizeof left, "  %s%s%s%s%s",
                     o->alias ? o->alias : "", o->alias ? ", " : "",
                     o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    if (n + 2 > OPT_COL)
      fprintf(f, "%s\n%*s", left, OPT_COL, "");
    else
      fprintf(f, "%-*s", OPT_COL, left);
    put_lines(f, o->help, OPT_COL);
  }
}

void ludo__cli_help(const ludo__cli_cmd_t *cmd, FILE *f) {
  fprintf(f, "usage: ludo %s%s%s\n\n", cmd->name, cmd->args[0] ? " " : "",
          cmd->args);
  fputs(cmd->about, f);
  fputc('\n', f);
  ludo__cli_help_options(cmd, f);
  if (cmd->notes != NULL) {
    fputc('\n', f);
    fputs(cmd->notes, f);
  }
}

int ludo__cli_parse(const ludo__cli_cmd_t *cmd, int argc, char **argv,
                    int (*apply)(void *ud, int id, const char *val),
                    void *ud, const char **arg, const char *what,
                    const char *need) {
  const char *val;
  int i = 0, rest = 0, id, rc;
  *arg = NULL;
  while ((id = ludo__cli_next(cmd, argc, argv, &i, &rest, &val)) !=
         LUDO__CLI_END) {
    if (id == LUDO__CLI_BAD) return LUDO__CLI_USAGE;
    if (id == LUDO__CLI_OPT_HELP) {
      ludo__cli_help(cmd, stdout);
      return 0;
    }
    if (id > 0) {
      if ((rc = apply(ud, id, val)) != 0) return rc;
    } else if (*arg == NULL) {
      *arg = val;
    } else {
      ludo__cli_error("unexpected argument '%s' (one %s only)", val, what);
      return LUDO__CLI_USAGE;
    }
  }
  if (*arg == NULL) {
    ludo__cli_error("%s needs %s (see ludo help %s)", cmd->name, need,
                    cmd->name);
    return LUDO__CLI_USAGE;
  }
  return -1;
}

int ludo__cli_number(const char *name, const char *val, long long min,
                     long long max, long long *out) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(val, &end, 10);
  if (errno != 0 || *val == '\0' || *end != '\0' || v < min || v > max) {
    ludo__cli_error("%s takes a whole number from %lld to %lld (got '%s')",
                    name, min, max, val);
    return LUDO__CLI_USAGE;
  }
  *out = v;
  return 0;
}
