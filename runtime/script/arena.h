/* arena.h - the small-object allocator of one Lua state.
 *
 * Lua states allocate mostly small objects (strings, tables, closures,
 * table parts) and free them by size (lua_Alloc passes the old size). A
 * state's blocks of up to LUDO__ARENA_MAX bytes come from chunks it owns:
 * sixteen size classes (16, 32, ... 256 bytes), each with a free list, and
 * a bump pointer in the newest chunk. This takes malloc's bookkeeping off
 * every allocation, keeps one session's objects together in memory (fewer
 * cache misses when thousands of sessions step in turn), and closing a
 * state returns its chunks in a few frees. Larger blocks go to the parent
 * allocator. Chunks are kept until the state closes; a state holds at most
 * LUDO__ARENA_LIMIT bytes of them, and past that its small blocks come from
 * the parent allocator too, so a session that once built a large structure
 * does not keep its memory. The arena keeps the addresses of the first
 * LUDO__ARENA_BIG larger blocks alive (an echo session has 11, 9 KB), so
 * that they can be asked for ahead with the chunks.
 *
 * Under AddressSanitizer free slots and unused chunk space are poisoned,
 * so use-after-free and overflows inside chunks are still caught. */
#ifndef LUDO_SCRIPT_ARENA_H
#define LUDO_SCRIPT_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/pages.h"
#include "base/sanitize.h"

#if LUDO__ASAN
#include <sanitizer/asan_interface.h>
#define LUDO__ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define LUDO__ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define LUDO__ARENA_POISON(p, n) ((void)(p), (void)(n))
#define LUDO__ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define LUDO__ARENA_MAX 256
#define LUDO__ARENA_CLASSES (LUDO__ARENA_MAX / 16)
#define LUDO__ARENA_LIMIT ((size_t)256 << 10)
/* The first chunks, whose addresses and learned lines the arena keeps in
 * order (for ludo__arena_prefetch, which then needs no walk of the
 * list); newer chunks are not asked for. 16: an echo session holds 10-12
 * chunks after its first steps (docs/performance.md, "Session 34"). */
#define LUDO__ARENA_FIRST 16
/* The larger blocks (the parent's) whose addresses the arena keeps, for
 * ludo__arena_prefetch: a state's stack and its bigger tables' parts. */
#define LUDO__ARENA_BIG 12

typedef struct ludo__arena_chunk_s ludo__arena_chunk_t;

typedef struct ludo__arena_s {
  ludo__alloc_t *heap;                    /* larger blocks, and chunks
                                             when `pages` is NULL */
  ludo__pages_t *pages;                   /* chunks, when not NULL (set
                                             after ludo__arena_init; each
                                             counted in heap->live) */
  void *free[LUDO__ARENA_CLASSES];        /* free blocks per class */
  char *bump, *end;                       /* unused space of the chunk */
  ludo__arena_chunk_t *chunks;            /* newest first */
  ludo__arena_chunk_t *first[LUDO__ARENA_FIRST]; /* oldest first */
  void *big[LUDO__ARENA_BIG];             /* larger blocks, oldest kept, */
  unsigned short big_n[LUDO__ARENA_BIG];  /* and the bytes asked of each */
  size_t held;                            /* bytes of chunks */
  int overflow;                           /* small blocks also from heap */
  /* The lines a step touched (ludo__arena_learn_end; bit j: the line j
   * lines past the range's first), of each first chunk and of each kept
   * larger block's first BIG_AHEAD bytes; all set until learned (none
   * for a chunk begun after learning). */
  uint64_t hot[LUDO__ARENA_FIRST];
  uint64_t big_hot[LUDO__ARENA_BIG];
  unsigned learned;                       /* learning steps taken */
} ludo__arena_t;

void ludo__arena_init(ludo__arena_t *a, ludo__alloc_t *heap);

/* lua_Alloc's contract on `a`: frees when nsize is 0, else returns a
 * block of nsize bytes holding the old contents (NULL on failure, leaving
 * ptr untouched). osize must be the size the block was asked with. */
void *ludo__arena_realloc(ludo__arena_t *a, void *ptr, size_t osize,
                          size_t nsize);

/* Bytes from p to the next 64-byte line (0 when p starts one). */
static inline size_t ludo__arena_to_line(const void *p) {
  return (64 - ((uintptr_t)p & 63)) & 63;
}

/* Puts chunk block p of class c on its free list (poisoned there). */
static inline void ludo__arena_push(ludo__arena_t *a, size_t c, void *p) {
  LUDO__ARENA_UNPOISON(p, sizeof(void *));
  *(void **)p = a->free[c];
  a->free[c] = p;
  LUDO__ARENA_POISON(p, (c + 1) << 4);
}

/* The two common cases, inlined into the state's allocator so that most
 * calls do not pay a call to ludo__arena_realloc and its tests of the
 * rare cases. Each does exactly what ludo__arena_realloc would do for its
 * case, and nothing when it cannot, so the caller then falls back to
 * ludo__arena_realloc, which handles every case.
 *
 * ludo__arena_take: a fresh block of n bytes, 1 <= n <= LUDO__ARENA_MAX,
 * from its class's free list or the current chunk; NULL when neither has
 * one (a new chunk or the heap is needed). */
static inline void *ludo__arena_take(ludo__arena_t *a, size_t n) {
  size_t c = (n - 1) >> 4, size = (c + 1) << 4;
  void *p = a->free[c];
  if (p != NULL) {
    LUDO__ARENA_UNPOISON(p, size);
    a->free[c] = *(void **)p;
    return p;
  }
  p = a->bump;
  if (size >= 64) {
    /* A block of 64 bytes or more spans no more lines than its size
     * needs: one that would cross one more line boundary starts at the
     * next line, and the space skipped (16-48 bytes, within one line)
     * goes to its class's free list. (A table's header, a call frame: one
     * line, not two; with thousands of sessions each line is a miss per
     * step. Smaller blocks are not moved: the space skipped would mostly
     * stay unused, a chunk more per session.) */
    size_t gap = ludo__arena_to_line(p);
    if (gap != 0 && 64 - gap + size > ((size + 63) & ~(size_t)63)) {
      if ((size_t)(a->end - a->bump) < gap + size) return NULL;
      ludo__arena_push(a, (gap >> 4) - 1, p);
      p = a->bump += gap;
    }
  }
  if ((size_t)(a->end - a->bump) < size) return NULL;
  a->bump += size;
  LUDO__ARENA_UNPOISON(p, size);
  return p;
}

/* ludo__arena_give: frees p of n bytes (n >= 1, the size it was asked
 * with) when it is surely a chunk block: small, and the arena never
 * overflowed (after that a small block may be the heap's, which
 * ludo__arena_realloc tells apart). Returns 1 when it did, else 0. */
static inline int ludo__arena_give(ludo__arena_t *a, void *p, size_t n) {
  size_t c = (n - 1) >> 4;
  if (n - 1 >= LUDO__ARENA_MAX || a->overflow) return 0; /* n == 0 too */
  ludo__arena_push(a, c, p);
  return 1;
}

/* Asks the processor to bring the lines a step of the state will read
 * into its caches, without waiting for them: its tables, closures,
 * strings, threads, its stack and its bigger tables' parts. Until the
 * arena learned which lines a step touches (ludo__arena_learn_end), every
 * line of its first LUDO__ARENA_FIRST chunks and the first BIG_AHEAD
 * (2 KiB) of each larger block it keeps; after, only the lines learned of
 * those, with the blocks its next allocations will take (each free
 * list's first, the chunk's unused space). A chunk begun after learning
 * starts with no line learned: it holds what steps allocated, a few lines
 * of it touched per step and different ones each step, so asking for all
 * of it (64 lines) costs more than the misses it saves; relearning finds
 * the lines of it that stay. Chunks past the first LUDO__ARENA_FIRST are
 * not asked for. Reads only the arena record; changes nothing. */
void ludo__arena_prefetch(const ludo__arena_t *a);

/* Calls fn(p, n, ud) for each range ludo__arena_prefetch asks for (for
 * tools that measure what it covers: bench/lines_per_step.py). */
typedef void (*ludo__range_fn)(const void *p, size_t n, void *ud);
void ludo__arena_ranges(const ludo__arena_t *a, ludo__range_fn fn, void *ud);

/* Learning which lines a step touches, through the caches
 * (base/cacheprobe.h): ludo__arena_learn_begin evicts every line
 * ludo__arena_prefetch would ask for when nothing is learned; after the
 * step, ludo__arena_learn_end(threshold) records which lines of one
 * phase came back (the lines j lines past a range's first with j %
 * LUDO__ARENA_PHASES the same: one line of each 512 bytes, a different
 * phase at each count of `learned`), and counts the learning in
 * `learned`. So LUDO__ARENA_PHASES steps learn every line; until then
 * the lines not yet learned stay asked for. Each learning replaces what
 * was known of its phase's lines (at first: all of them). threshold: from
 * ludo__cache_threshold, not 0. A step so learned runs slower (its lines
 * come from memory); the arena's record and blocks are not changed. */
#define LUDO__ARENA_PHASES 8u
void ludo__arena_learn_begin(const ludo__arena_t *a);
void ludo__arena_learn_end(ludo__arena_t *a, unsigned threshold);

/* Forgets what was learned: every line is asked for again. */
void ludo__arena_unlearn(ludo__arena_t *a);

/* Returns every chunk to the heap (after lua_close). */
void ludo__arena_release(ludo__arena_t *a);

#endif
