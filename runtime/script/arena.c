/* arena.c - the small-object allocator of one Lua state (see arena.h). */
#include "script/arena.h"

#include <string.h>

#include "base/cacheprobe.h"
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

void ludo__arena_unlearn(ludo__arena_t *a) {
  memset(a->hot, 0xff, sizeof a->hot);
  memset(a->big_hot, 0xff, sizeof a->big_hot);
  a->learned = 0;
}

void ludo__arena_init(ludo__arena_t *a, ludo__alloc_t *heap) {
  memset(a, 0, sizeof *a);
  a->heap = heap;
  ludo__arena_unlearn(a);
}

static void push_free(ludo__arena_t *a, int c, void *p) {
  ludo__arena_push(a, (size_t)c, p);
}

_Static_assert(CHUNK == LUDO__PAGE, "a chunk is one page of base/pages");

/* A chunk's memory: a page of a->pages (counted in the heap's live
 * bytes), else a block of the heap. NULL when there is none. */
static void *chunk_get(ludo__arena_t *a) {
  void *p;
  if (a->pages == NULL) return ludo__alloc_fn(a->heap, NULL, 0, CHUNK);
  if ((p = ludo__pages_get(a->pages)) != NULL) a->heap->live += CHUNK;
  return p;
}

static void chunk_put(ludo__arena_t *a, void *p) {
  if (a->pages == NULL) {
    ludo__alloc_fn(a->heap, p, CHUNK, 0);
    return;
  }
  ludo__pages_put(a->pages, p);
  a->heap->live -= CHUNK;
}

/* Starts a new chunk; the old chunk's tail goes to the free lists. */
static int new_chunk(ludo__arena_t *a) {
  size_t size = CHUNK, tail = (size_t)(a->end - a->bump), i = a->held / CHUNK;
  ludo__arena_chunk_t *ch = chunk_get(a);
  if (ch == NULL) return -1;
  if (tail >= 16) {
    /* as ludo__arena_take cuts blocks: the part up to the next line on
     * its own, so the rest starts on a line */
    size_t head = ludo__arena_to_line(a->bump);
    if (head != 0 && head < tail) {
      push_free(a, cls_of(head), a->bump);
      a->bump += head;
      tail -= head;
    }
    push_free(a, cls_of(tail & ~(size_t)15), a->bump);
  }
  ch->next = a->chunks;
  ch->size = size;
  a->chunks = ch;
  if (i < LUDO__ARENA_FIRST) {
    /* A chunk begun after learning holds what steps allocated, whose
     * lines move from step to step: nothing of it is asked for until a
     * relearning step finds lines that stay (see ludo__arena_ranges). */
    a->first[i] = ch;
    a->hot[i] = a->learned ? 0 : ~(uint64_t)0;
  }
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
      a->big_hot[i] = ~(uint64_t)0; /* moved: its lines are not known */
      return;
    }
    if (a->big[i] == NULL && empty < 0) empty = i;
  }
  if (nw != NULL && empty >= 0) {
    a->big[empty] = nw;
    a->big_n[empty] = ahead;
    a->big_hot[empty] = ~(uint64_t)0;
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

/* The address of the line holding p, and in *lines how many lines
 * [p, p + n) spans (n > 0). */
static uintptr_t range_lines(const void *p, size_t n, size_t *lines) {
  uintptr_t base = (uintptr_t)p & ~(uintptr_t)63;
  *lines = (((uintptr_t)p + n - 1) >> 6) - (base >> 6) + 1;
  return base;
}

/* Calls fn for the lines of [p, p + n) whose bit is set in `hot` (bit j:
 * the line j lines past p's), a run of neighbours at a time. A range
 * of 65 lines (a chunk not aligned to a line) has its last line always. */
static void hot_ranges(const void *p, size_t n, uint64_t hot,
                       ludo__range_fn fn, void *ud) {
  size_t lines;
  uintptr_t base = range_lines(p, n, &lines);
  if (hot == ~(uint64_t)0) {
    fn(p, n, ud);
    return;
  }
  if (lines < 64) hot &= ((uint64_t)1 << lines) - 1;
  while (hot != 0) {
    int j = __builtin_ctzll(hot), k;
    uint64_t run = hot >> j;
    k = run == ~(uint64_t)0 >> j ? 64 - j : __builtin_ctzll(~run);
    fn((const void *)(base + ((uintptr_t)j << 6)), (size_t)k << 6, ud);
    hot &= k + j >= 64 ? 0 : ~(uint64_t)0 << (j + k);
  }
  if (lines > 64) fn((const void *)(base + ((uintptr_t)64 << 6)), 1, ud);
}

void ludo__arena_ranges(const ludo__arena_t *a, ludo__range_fn fn,
                       void *ud) {
  size_t n = a->held / CHUNK, i;
  for (i = 0; i < n && i < LUDO__ARENA_FIRST; i++)
    hot_ranges(a->first[i], CHUNK, a->hot[i], fn, ud);
  for (i = 0; i < LUDO__ARENA_BIG; i++)
    if (a->big[i] != NULL) hot_ranges(a->big[i], a->big_n[i], a->big_hot[i],
                                      fn, ud);
  if (a->learned == 0) return;
  /* the blocks the step's first allocations take */
  for (i = 0; i < LUDO__ARENA_CLASSES; i++)
    if (a->free[i] != NULL) fn(a->free[i], 1, ud);
  if (a->bump < a->end) fn(a->bump, 1, ud);
}

void ludo__arena_prefetch(const ludo__arena_t *a) {
  ludo__arena_ranges(a, ludo__prefetch_range, NULL);
}

/* ---- learning the lines a step touches -------------------------------- */

/* The ranges learning covers: the first chunks, then the kept larger
 * blocks' first BIG_AHEAD bytes (r: LUDO__ARENA_FIRST + the slot); NULL
 * when range r is not there. */
static const void *learn_range(const ludo__arena_t *a, size_t r, size_t *n) {
  if (r < LUDO__ARENA_FIRST) {
    *n = CHUNK;
    return r < a->held / CHUNK ? a->first[r] : NULL;
  }
  r -= LUDO__ARENA_FIRST;
  *n = a->big_n[r];
  return a->big[r];
}

#define LEARN_RANGES (LUDO__ARENA_FIRST + LUDO__ARENA_BIG)

/* A shuffle's random numbers (xorshift32; any nonzero seed). */
static uint32_t next_rand(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Which lines learning step number `learned` probes: those j lines past
 * a range's first line with j % LUDO__ARENA_PHASES equal to this, in the
 * order 0, 4, 2, 6, 1, 5, 3, 7 (so a line's neighbours are learned in
 * steps far from its own). */
static unsigned phase_of(unsigned learned) {
  unsigned k = learned % LUDO__ARENA_PHASES;
  return (k & 1u) << 2 | (k & 2u) | (k & 4u) >> 2;
}

/* The lines of phase ph: bit j for every j with j % 8 == ph. */
#define PHASE_BITS(ph) (0x0101010101010101ull << (ph))

/* Probes the lines of phase `phase` in the learned ranges (one line of
 * each 512 bytes), in a shuffled order, and returns those found held in
 * seen[r] (bit j: the line j lines past the range's first line's). One
 * line of a region at a time, because the processor's prefetchers bring
 * the rest of a region where several probes missed (on AMD EPYC an
 * untouched line read as held 1.6 % of the time when probed first in its
 * 512 bytes, 16 % after 4 probes there), and shuffled, because probes in
 * an order with a stride (line by line, or the same line of each chunk)
 * are followed too. */
static void held_lines(const ludo__arena_t *a, unsigned threshold,
                       unsigned phase, uint64_t seen[LEARN_RANGES]) {
  enum { MAX = LEARN_RANGES * (64 / LUDO__ARENA_PHASES) };
  unsigned short order[MAX];
  const void *line[MAX];
  unsigned char held[MAX];
  uintptr_t first[LEARN_RANGES];
  size_t count = 0, r, k;
  uint32_t x = ((uint32_t)(uintptr_t)a ^ (a->learned * 2654435761u)) | 1u;
  for (r = 0; r < LEARN_RANGES; r++) {
    size_t n, j, lines;
    const void *p = learn_range(a, r, &n);
    seen[r] = 0;
    if (p == NULL) continue;
    first[r] = range_lines(p, n, &lines);
    for (j = phase; j < lines && j < 64; j += LUDO__ARENA_PHASES)
      order[count++] = (unsigned short)(r << 6 | j);
  }
  for (k = count; k > 1; k--) { /* Fisher-Yates */
    size_t j = next_rand(&x) % k;
    unsigned short t = order[k - 1];
    order[k - 1] = order[j];
    order[j] = t;
  }
  if (count == 0) return;
  for (k = 0; k < count; k++)
    line[k] = (const void *)(first[order[k] >> 6] + ((order[k] & 63u) << 6));
  ludo__cache_probe(line, count, threshold, held);
  for (k = 0; k < count; k++)
    if (held[k]) seen[order[k] >> 6] |= (uint64_t)1 << (order[k] & 63u);
}

void ludo__arena_learn_begin(const ludo__arena_t *a) {
  size_t r, n;
  for (r = 0; r < LEARN_RANGES; r++) {
    const void *p = learn_range(a, r, &n);
    if (p != NULL) ludo__cache_evict(p, n);
  }
}

void ludo__arena_learn_end(ludo__arena_t *a, unsigned threshold) {
  uint64_t seen[LEARN_RANGES];
  unsigned phase = phase_of(a->learned);
  uint64_t mine = PHASE_BITS(phase);
  size_t r;
  held_lines(a, threshold, phase, seen);
  for (r = 0; r < LEARN_RANGES; r++) {
    size_t n;
    uint64_t *hot = r < LUDO__ARENA_FIRST ? &a->hot[r]
                                          : &a->big_hot[r - LUDO__ARENA_FIRST];
    /* this phase's lines as probed now; the other phases' stay as they
     * are (all of them, until learned) */
    if (learn_range(a, r, &n) != NULL) *hot = (*hot & ~mine) | seen[r];
  }
  a->learned++;
}

void ludo__arena_release(ludo__arena_t *a) {
  while (a->chunks != NULL) {
    ludo__arena_chunk_t *ch = a->chunks;
    a->chunks = ch->next;
    UNPOISON(ch, ch->size);
    chunk_put(a, ch);
  }
  memset(a->free, 0, sizeof a->free);
  memset(a->first, 0, sizeof a->first);
  memset(a->big, 0, sizeof a->big);
  memset(a->big_n, 0, sizeof a->big_n);
  ludo__arena_unlearn(a);
  a->bump = a->end = NULL;
  a->held = 0;
  a->overflow = 0;
}
