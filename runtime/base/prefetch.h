/* prefetch.h - asking the processor for memory ahead of its use.
 *
 * A hint never waits, never faults (any address may be given) and
 * changes nothing; it only makes a later read of the lines cheaper when
 * they would otherwise come from memory. */
#ifndef LUDO_BASE_PREFETCH_H
#define LUDO_BASE_PREFETCH_H

#include <stddef.h>

/* Hints the 64-byte lines of the n bytes at p, from p's line on: to be
 * read (write 0) or written (write 1). A macro: __builtin_prefetch takes
 * `write` only as a constant. */
#define ludo__prefetch(p, n, write)                                         \
  do {                                                                      \
    const char *ludo__pf_p = (const char *)(p);                             \
    size_t ludo__pf_i, ludo__pf_n = (n);                                    \
    for (ludo__pf_i = 0; ludo__pf_i < ludo__pf_n; ludo__pf_i += 64)         \
      __builtin_prefetch(ludo__pf_p + ludo__pf_i, (write), 3);             \
  } while (0)

/* ludo__prefetch of n bytes at p, to be read, as a range callback (fn,
 * ud) for walkers that list ranges (script/arena.h, ludo__arena_ranges). */
static inline void ludo__prefetch_range(const void *p, size_t n, void *ud) {
  (void)ud;
  ludo__prefetch(p, n, 0);
}

#endif
