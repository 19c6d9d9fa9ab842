/* clock.h - monotonic time. */
#ifndef LUDO_BASE_CLOCK_H
#define LUDO_BASE_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
uint64_t ludo__clock_ns(void);

/* Monotonic nanoseconds at the kernel tick's resolution (a few ms), about
 * five times cheaper: for CPU budgets, which are checked often and need no
 * precision below a millisecond. */
uint64_t ludo__clock_coarse_ns(void);

/* A limit shorter than this is measured on the precise clock: the coarse
 * one lags it by up to a tick, more after the CPU idled (4-7 ms seen on a
 * virtual machine), so a deadline taken from it comes that much early.
 * Longer limits take the coarse clock, its lag under 1 % of them. */
#define LUDO__CLOCK_COARSE_FROM_NS ((uint64_t)1000000000u)

/* 1 when a limit of `limit_ns` (0: none) is measured on the precise
 * clock. */
static inline int ludo__clock_precise_for(uint64_t limit_ns) {
  return limit_ns != 0 && limit_ns < LUDO__CLOCK_COARSE_FROM_NS;
}

/* ludo__clock_ns() when `precise`, else ludo__clock_coarse_ns(). */
static inline uint64_t ludo__clock_for(int precise) {
  return precise ? ludo__clock_ns() : ludo__clock_coarse_ns();
}

#endif
