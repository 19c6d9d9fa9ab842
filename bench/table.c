/* table.c - the figures of ludo's benchmarks (see table.h). */
#include "table.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

void bench_row(row_t *r, const char *fig, const char *unit, double m,
               const char *bwhat, double b, int tkind, int ton,
               double tval) {
  double v;
  memset(r, 0, sizeof *r);
  snprintf(r->figure, sizeof r->figure, "%s", fig);
  snprintf(r->unit, sizeof r->unit, "%s", unit);
  snprintf(r->bwhat, sizeof r->bwhat, "%s", bwhat ? bwhat : "");
  r->measured = m;
  r->baseline = b;
  r->ratio = (!isnan(b) && b > 0) ? m / b : NAN;
  r->tkind = tkind;
  r->ton = ton;
  r->tval = tval;
  v = ton == ON_RATIO ? r->ratio : m;
  r->met = tkind == T_NONE ? -1
           : isnan(v)      ? 0
           : tkind == T_LE ? v <= tval
                           : v >= tval;
}

static void fmt(char *b, size_t n, double v, const char *unit) {
  if (isnan(v))
    snprintf(b, n, "-");
  else if (strcmp(unit, "/s") == 0)
    snprintf(b, n, v >= 1e6 ? "%.2fM/s" : "%.1fk/s",
             v >= 1e6 ? v / 1e6 : v / 1e3);
  else if (strcmp(unit, "us") == 0)
    snprintf(b, n, v < 10 ? "%.2f us" : "%.1f us", v);
  else if (strcmp(unit, "%") == 0)
    snprintf(b, n, v < 10 ? "%.2f %%" : "%.1f %%", v);
  else if (strcmp(unit, "B") == 0)
    snprintf(b, n, "%.0f B", v);
  else
    snprintf(b, n, "%.1f %s", v, unit);
}

static void fmt_target(char *b, size_t n, const row_t *r) {
  char v[32];
  if (r->tkind == T_NONE) {
    snprintf(b, n, "-");
    return;
  }
  if (r->ton == ON_RATIO)
    snprintf(v, sizeof v, "%gx", r->tval);
  else
    fmt(v, sizeof v, r->tval, r->unit);
  snprintf(b, n, "%s %s", r->tkind == T_LE ? "<=" : ">=", v);
}

static void print_row(const row_t *r) {
  char m[32], b[32], bb[80], ra[24], t[48];
  fmt(m, sizeof m, r->measured, r->unit);
  fmt(b, sizeof b, r->baseline, r->unit);
  if (isnan(r->baseline))
    snprintf(bb, sizeof bb, "-");
  else
    snprintf(bb, sizeof bb, "%s %s", b, r->bwhat);
  if (isnan(r->ratio))
    snprintf(ra, sizeof ra, "-");
  else
    snprintf(ra, sizeof ra, r->ratio < 0.1 ? "%.4fx" : "%.2fx", r->ratio);
  fmt_target(t, sizeof t, r);
  printf("%-34s %12s  %-40.40s %8s  ", r->figure, m, bb, ra);
  if (r->met < 0)
    printf("%s\n", t);
  else
    printf("%-12s %s\n", t, r->met ? "met" : "MISSED");
}

void bench_print_table(const row_t *rows, size_t n) {
  size_t i;
  printf("%-34s %12s  %-40s %8s  %s\n", "figure", "measured", "baseline",
         "ratio", "target");
  for (i = 0; i < 116; i++) putchar('-');
  putchar('\n');
  for (i = 0; i < n; i++) print_row(&rows[i]);
  printf("ratio = measured / baseline; a target ending in x applies to "
         "the ratio.\n");
}

void bench_json_num(FILE *f, double v) {
  if (isnan(v) || isinf(v))
    fputs("null", f);
  else
    fprintf(f, "%.6g", v);
}

void bench_json_rows(FILE *f, const row_t *rows, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    const row_t *r = &rows[i];
    fprintf(f, "    {\"figure\": \"%s\", \"measured\": ", r->figure);
    bench_json_num(f, r->measured);
    fprintf(f, ", \"unit\": \"%s\", \"baseline\": ", r->unit);
    bench_json_num(f, r->baseline);
    fprintf(f, ", \"baseline_what\": \"%s\", \"ratio\": ", r->bwhat);
    bench_json_num(f, r->ratio);
    if (r->tkind == T_NONE) {
      fputs(", \"target\": null, \"met\": null}", f);
    } else {
      fprintf(f, ", \"target\": {\"on\": \"%s\", \"op\": \"%s\", "
                 "\"value\": ",
              r->ton == ON_RATIO ? "ratio" : "measured",
              r->tkind == T_LE ? "<=" : ">=");
      bench_json_num(f, r->tval);
      fprintf(f, "}, \"met\": %s}", r->met ? "true" : "false");
    }
    fputs(i + 1 < n ? ",\n" : "\n", f);
  }
}

void bench_machine(char *b, size_t n) {
  struct utsname u;
  char line[256], model[128] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f != NULL) {
    while (fgets(line, sizeof line, f) != NULL)
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c != NULL) {
          snprintf(model, sizeof model, "%s", c + 2);
          model[strcspn(model, "\n\"\\")] = '\0';
        }
        break;
      }
    fclose(f);
  }
  uname(&u);
  snprintf(b, n, "%s, %ld cores, %s %s", model, sysconf(_SC_NPROCESSORS_ONLN),
           u.sysname, u.release);
}

double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_pct(double *v, size_t n, double p) {
  size_t i;
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, cmp_d);
  i = (size_t)ceil(p * (double)n);
  return v[i == 0 ? 0 : (i > n ? n : i) - 1];
}

double bench_median(double *v, size_t n) { return bench_pct(v, n, 0.5); }
