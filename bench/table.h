/* table.h - the figures of ludo's benchmarks: one row per figure, beside
 * its baseline from the same run and its target, printed as a table and
 * written as JSON; and the clock and quantiles they are measured with.
 * Shared by every program of bench/ (make bench, make bench-serve, ...),
 * so they all report the same way. */
#ifndef LUDO_BENCH_TABLE_H
#define LUDO_BENCH_TABLE_H

#include <stddef.h>
#include <stdio.h>

enum { T_NONE, T_LE, T_GE };     /* target comparison */
enum { ON_MEASURED, ON_RATIO };  /* what the target applies to */

typedef struct row_s {
  char figure[48];
  char unit[12];       /* "us", "/s", "KB", "%", "B", "ms", "x" */
  double measured;
  char bwhat[40];      /* what the baseline is; "" for none */
  double baseline;     /* NAN: none */
  double ratio;        /* measured / baseline, NAN: none */
  int tkind, ton;      /* T_*, ON_* */
  double tval;
  int met;             /* 1 met, 0 missed, -1 no target */
} row_t;

/* Fills *r: the figure `fig` measured `m` (in `unit`) beside baseline `b`
 * (NAN: none) described by `bwhat`, with the target `tkind` `tval` on the
 * measured value or on the ratio (`ton`); computes the ratio and whether
 * the target is met. */
void bench_row(row_t *r, const char *fig, const char *unit, double m,
               const char *bwhat, double b, int tkind, int ton, double tval);

/* Prints the rows as a table on stdout, with a line saying what the ratio
 * is. */
void bench_print_table(const row_t *rows, size_t n);

/* Writes the rows as the elements of a JSON array ("figures") to f. */
void bench_json_rows(FILE *f, const row_t *rows, size_t n);

/* Writes v as a JSON number (null for NaN and infinities). */
void bench_json_num(FILE *f, double v);

/* Writes "<CPU model>, <n> cores, <kernel>" into b. */
void bench_machine(char *b, size_t n);

/* Monotonic clock, in µs. */
double bench_now_us(void);

/* Sorts v (n values) and returns its p-quantile (nearest rank); NAN when
 * n is 0. */
double bench_pct(double *v, size_t n, double p);
double bench_median(double *v, size_t n);

#endif
