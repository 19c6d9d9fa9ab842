/* arena.c - the small-object allocator of one Lua state (see arena.h). */
#include "script/arena.h"

#include <string.h>

#include "base/prefetch.h"

#define POISON LUDO__ARENA_POISON
#define UNPOISON LUDO__ARENA_UNPOISON

/* Chunk size: small, so a session's slack stays small. */
#define CHUNK 4096
/* How much of a larger block ludo__arena_prefetch asks for. */
#define BIG_AHEAD 2048

struct ludo__arena_chunk_s {
  ludo__arena_chunk_t *next;
  size_t size;                 /* of the whole chunk, header included */
};

/* The header keeps blocks 16-byte aligned. */
#define HDR ((sizeof(ludo__arena_chunk_t) + 15) & ~(size_t)15)

static int cls_of(size_t n) { return (int)((n + 15) >> 4) - 1; }

void ludo__arena_init(ludo__arena_t *a, ludo__alloc_t *heap) {
  memset(a, 0, sizeof *a);
  a->heap = heap;
}

static void push_free(ludo__arena_t *a, int c, void *p) {
  ludo__arena_push(a, (size_t)c, p);
}

/* Starts a new chunk; the old chunk's tail goes to a free list. */
static int new_chunk(ludo__arena_t *a) {
  size_t size = CHUNK, tail = (size_t)(a->end - a->bump);
  ludo__arena_chunk_t *ch = ludo__alloc_fn(a->heap, NULL, 0, size);
  if (ch == NULL) return -1;
  if (tail >= 16) push_free(a, cls_of(tail & ~(size_t)15), a->bump);
  ch->next = a->chunks;
  ch->size = size;
  a->chunks = ch;
  if (a->held < LUDO__ARENA_FIRST * CHUNK) a->first[a->held / CHUNK] = ch;
  a->held += size;
  a->bump = (char *)ch + HDR;
  a->end = (char *)ch + size;
  POISON(a->bump, (size_t)(a->end - a->bump));
  return 0;
}

/* A block of `want` bytes (1..LUDO__ARENA_MAX): from its free list or the chunk
 * (ludo__arena_take), else from a new chunk, else from the heap. (A new
 * chunk puts the old one's tail, smaller than the block, on a lower
 * class's list: the second take cuts the block from the new chunk.) */
static void *small_alloc(ludo__arena_t *a, size_t want) {
  void *p = ludo__arena_take(a, want);
  if (p != NULL) return p;
  if (a->held + CHUNK > LUDO__ARENA_LIMIT) {
    a->overflow = 1; /* the arena is full: the heap takes the rest */
    return ludo__alloc_fn(a->heap, NULL, 0, want);
  }
  if (new_chunk(a) != 0) return NULL;
  return ludo__arena_take(a, want);
}

/* Is p a block of the arena's chunks? Asked only once the arena
 * overflowed (until then every small block is the arena's). */
static int in_chunks(const ludo__arena_t *a, const void *p) {
  const ludo__arena_chunk_t *ch;
  for (ch = a->chunks; ch != NULL; ch = ch->next)
    if ((const char *)p >= (const char *)ch &&
        (const char *)p < (const char *)ch + ch->size)
      return 1;
  return 0;
}

/* Keeps the record of the larger blocks: `old` (NULL: none) became `nw`
 * (NULL: freed) of n bytes. A block not yet kept takes a free slot if
 * there is one (a state's first large blocks are its stack and its
 * tables' parts, which every step reads). */
static void big_note(ludo__arena_t *a, const void *old, void *nw, size_t n) {
  unsigned short ahead = (unsigned short)(n < BIG_AHEAD ? n : BIG_AHEAD);
  int i, empty = -1;
  for (i = 0; i < LUDO__ARENA_BIG; i++) {
    if (old != NULL && a->big[i] == old) {
      a->big[i] = nw;
      a->big_n[i] = nw != NULL ? ahead : 0;
      return;
    }
    if (a->big[i] == NULL && empty < 0) empty = i;
  }
  if (nw != NULL && empty >= 0) {
    a->big[empty] = nw;
    a->big_n[empty] = ahead;
  }
}

/* The parent's realloc of a block of the heap, keeping the record of the
 * larger ones (osize > LUDO__ARENA_MAX: it was kept; nsize: it is). */
static void *heap_realloc(ludo__arena_t *a, void *ptr, size_t osize,
                          size_t nsize) {
  void *p = ludo__alloc_fn(a->heap, ptr, osize, nsize);
  int was = ptr != NULL && osize > LUDO__ARENA_MAX;
  if (nsize == 0 || p != NULL) {
    if (nsize > LUDO__ARENA_MAX)
      big_note(a, was ? ptr : NULL, p, nsize);
    else if (was)
      big_note(a, ptr, NULL, 0);
  }
  return p;
}

void *ludo__arena_realloc(ludo__arena_t *a, void *ptr, size_t osize,
                          size_t nsize) {
  int small_o = ptr != NULL && osize <= LUDO__ARENA_MAX &&
                (!a->overflow || in_chunks(a, ptr));
  int small_n = nsize <= LUDO__ARENA_MAX;
  void *p;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    if (small_o)
      push_free(a, cls_of(osize), ptr);
    else if (ptr != NULL)
      heap_realloc(a, ptr, osize, 0);
    return NULL;
  }
  if (small_o && small_n && cls_of(nsize) <= cls_of(osize))
    return ptr; /* fits where it is (a smaller class keeps the block) */
  if (ptr != NULL && !small_o && small_n && osize <= LUDO__ARENA_MAX)
    return ludo__alloc_fn(a->heap, ptr, osize, nsize); /* heap-held small */
  if (!small_o && !small_n) return heap_realloc(a, ptr, osize, nsize);
  p = small_n ? small_alloc(a, nsize) : heap_realloc(a, NULL, 0, nsize);
  if (p == NULL) return NULL;
  if (ptr != NULL) {
    memcpy(p, ptr, osize < nsize ? osize : nsize);
    if (small_o)
      push_free(a, cls_of(osize), ptr);
    else
      heap_realloc(a, ptr, osize, 0);
  }
  return p;
}

void ludo__arena_ranges(const ludo__arena_t *a, ludo__range_fn fn,
                       void *ud) {
  size_t n = a->held / CHUNK, i;
  const ludo__arena_chunk_t *ch = a->chunks;
  for (i = 0; i < n && i < LUDO__ARENA_FIRST; i++) fn(a->first[i], CHUNK, ud);
  for (; i < n && ch != NULL; i++, ch = ch->next) fn(ch, CHUNK, ud);
  for (i = 0; i < LUDO__ARENA_BIG; i++)
    if (a->big[i] != NULL) fn(a->big[i], a->big_n[i], ud);
}

void ludo__arena_prefetch(const ludo__arena_t *a) {
  ludo__arena_ranges(a, ludo__prefetch_range, NULL);
}

void ludo__arena_release(ludo__arena_t *a) {
  while (a->chunks != NULL) {
    ludo__arena_chunk_t *ch = a->chunks;
    a->chunks = ch->next;
    UNPOISON(ch, ch->size);
    ludo__alloc_fn(a->heap, ch, ch->size, 0);
  }
  memset(a->free, 0, sizeof a->free);
  memset(a->first, 0, sizeof a->first);
  memset(a->big, 0, sizeof a->big);
  memset(a->big_n, 0, sizeof a->big_n);
  a->bump = a->end = NULL;
  a->held = 0;
  a->overflow = 0;
}
