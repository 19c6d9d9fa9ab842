/* clock.h - monotonic time. */
#ifndef LUDO_BASE_CLOCK_H
#define LUDO_BASE_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
uint64_t ludo__clock_ns(void);

#endif
