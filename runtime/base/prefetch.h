/* prefetch.h - asking the processor for memory ahead of its use.
 *
 * A hint never waits, never faults (any address may be given) and
 * changes nothing; it only makes a later read of the lines cheaper when
 * they would otherwise come from memory. */
#ifndef LUDO_BASE_PREFETCH_H
#define LUDO_BASE_PREFETCH_H

#include <stddef.h>

/* Hints the 64-byte lines of the n bytes at p, from p's line on, to be
 * read; a range callback (fn, ud; ud unused) for walkers that list ranges
 * (script/arena.h, ludo__arena_ranges). */
static inline void ludo__prefetch_range(const void *p, size_t n, void *ud) {
  const char *c = (const char *)p;
  size_t i;
  (void)ud;
  for (i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 3);
}

#endif
