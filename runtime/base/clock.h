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

#endif
