/* test-arena.c - the per-state small-object arena (runtime/script/arena.c)
 * on its own: blocks keep their contents across every kind of resize
 * (small to small, small to large and back), freed blocks are reused, the
 * arena stops taking chunks at its limit and hands the rest to the heap,
 * and release returns every byte. Also its inline fast paths and those of
 * the state allocator in front of it (ludo__state_alloc): they must do
 * exactly what the general paths do, and honour the cap and fault
 * injection to the byte. Blocks cut from a chunk span no more cache
 * lines than their size needs, and lose no byte doing so. */
#include "helpers.h"

#include <stdlib.h>
#include <string.h>

#include "script/arena.h"
#include "script/state.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}

static int check(const unsigned char *p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; i++)
    if (p[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

TEST_IMPL(arena_resizes_keep_contents) {
  static const size_t sizes[] = {1, 16, 17, 100, 256, 257, 1000, 24, 8};
  ludo__alloc_t heap;
  ludo__arena_t a;
  unsigned char *p;
  size_t i, prev;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  p = ludo__arena_realloc(&a, NULL, 0, 5);
  ASSERT_NOT_NULL(p);
  fill(p, 5, 3);
  prev = 5;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t keep = prev < sizes[i] ? prev : sizes[i];
    p = ludo__arena_realloc(&a, p, prev, sizes[i]);
    ASSERT_NOT_NULL(p);
    ASSERT_TRUE(check(p, keep, 3));
    fill(p, sizes[i], 3);
    prev = sizes[i];
  }
  ludo__arena_realloc(&a, p, prev, 0);
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

TEST_IMPL(arena_reuse_and_limit) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  void *blocks[40000];
  void *first, *again;
  size_t i, n = sizeof blocks / sizeof blocks[0];
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  first = ludo__arena_realloc(&a, NULL, 0, 40);
  ludo__arena_realloc(&a, first, 40, 0);
  again = ludo__arena_realloc(&a, NULL, 0, 48); /* same class: reused */
  ASSERT_PTR_EQ(again, first);
  ludo__arena_realloc(&a, again, 48, 0);
  /* 40000 blocks of 64 bytes: more than the arena holds. */
  for (i = 0; i < n; i++) {
    blocks[i] = ludo__arena_realloc(&a, NULL, 0, 64);
    ASSERT_NOT_NULL(blocks[i]);
    memset(blocks[i], (int)(i & 0xff), 64);
  }
  ASSERT_LE(a.held, LUDO__ARENA_LIMIT);
  ASSERT_TRUE(a.overflow);
  for (i = 0; i < n; i++) {
    ASSERT_EQ(((unsigned char *)blocks[i])[63], (int)(i & 0xff));
    ludo__arena_realloc(&a, blocks[i], 64, 0);
  }
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
  ASSERT_EQ(test_heap.osize_mismatch, 0);
}

/* Bytes on the arena's free lists (each block's class size). */
static size_t free_bytes(const ludo__arena_t *a) {
  size_t c, n = 0;
  for (c = 0; c < LUDO__ARENA_CLASSES; c++) {
    void *p = a->free[c];
    while (p != NULL) {
      void *next;
      LUDO__ARENA_UNPOISON(p, sizeof(void *));
      next = *(void **)p;
      LUDO__ARENA_POISON(p, sizeof(void *));
      n += (c + 1) << 4;
      p = next;
    }
  }
  return n;
}

/* A block cut from a chunk spans no more 64-byte lines than its size
 * needs (a 64-byte block is one line, a 96-byte one two): a block that
 * would cross one more line boundary starts at the next line, and the
 * space skipped goes to a free list, so no byte of a chunk is lost. */
TEST_IMPL(arena_blocks_within_lines) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  unsigned long rng = 42;
  size_t i, live = 0, chunks;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  for (i = 0; i < 1500; i++) {
    size_t n, size, off;
    unsigned char *p;
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    n = 1 + (rng >> 33) % LUDO__ARENA_MAX;
    size = (n + 15) & ~(size_t)15;
    p = ludo__arena_realloc(&a, NULL, 0, n);
    ASSERT_NOT_NULL(p);
    ASSERT_TRUE(!a.overflow);
    live += size;
    off = (size_t)((uintptr_t)p & 63);
    if (size >= 64) ASSERT_LE(off + size, (size + 63) & ~(size_t)63);
    memset(p, 0x5a, n); /* ASan: the whole block is the caller's */
  }
  /* Every byte of the chunks: the live blocks, the free lists (the
   * skipped space, old chunks' tails), the headers, the unused space. */
  chunks = a.held / 4096;
  ASSERT_EQ(live + free_bytes(&a) + chunks * 16 + (size_t)(a.end - a.bump),
            a.held);
  /* the skipped space is taken again by blocks of its size */
  if (a.free[0] != NULL) {
    void *gap = a.free[0];
    ASSERT_PTR_EQ(ludo__arena_realloc(&a, NULL, 0, 16), gap);
  }
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

/* A heap whose addresses depend only on the sequence of calls made to it:
 * blocks come from one buffer, rounded to 16 bytes, and freed blocks are
 * reused last-in first-out per rounded size. Two arenas given one each
 * and the same calls get blocks at the same offsets. */
#define DET_SIZES 512 /* rounded sizes up to 8 KiB */
typedef struct det_heap_s {
  unsigned char *base;
  size_t off, cap;
  void *free[DET_SIZES];
} det_heap_t;

static void *det_fn(void *ud, void *ptr, size_t osize, size_t nsize) {
  det_heap_t *h = ud;
  size_t r = (nsize + 15) >> 4;
  void *p;
  if (ptr != NULL && osize == 0) abort(); /* the arena passes real sizes */
  if (nsize == 0 || r >= DET_SIZES) {
    if (nsize == 0 && ptr != NULL) {
      *(void **)ptr = h->free[(osize + 15) >> 4];
      h->free[(osize + 15) >> 4] = ptr;
    }
    return NULL;
  }
  if ((p = h->free[r]) != NULL) {
    h->free[r] = *(void **)p;
  } else {
    if (h->off + (r << 4) > h->cap) return NULL;
    p = h->base + h->off;
    h->off += r << 4;
  }
  if (ptr != NULL) {
    memcpy(p, ptr, osize < nsize ? osize : nsize);
    det_fn(ud, ptr, osize, 0);
  }
  return p;
}

/* Random sizes, mostly small (where the fast paths are), some past
 * LUDO__ARENA_MAX, the class edges often. */
static size_t pick_size(unsigned long *rng) {
  unsigned long r;
  *rng = *rng * 6364136223846793005ul + 1442695040888963407ul;
  r = *rng >> 33;
  switch (r % 8) {
  case 0: return 16 * (1 + (r >> 3) % 16);         /* a class's top */
  case 1: return 16 * ((r >> 3) % 16) + 1;         /* a class's bottom */
  case 2: return 257 + (r >> 3) % 700;             /* heap sized */
  default: return 1 + (r >> 3) % LUDO__ARENA_MAX;
  }
}

/* The same random allocations, frees and resizes on two arenas: one
 * through ludo__arena_take/give first (falling back to
 * ludo__arena_realloc when they decline), one through ludo__arena_realloc
 * only. Every block must land at the same place, hold its contents, and
 * both arenas must hold and overflow alike, past the arena's limit too. */
TEST_IMPL(arena_fast_paths_agree) {
  enum { SLOTS = 6000, OPS = 120000 };
  static det_heap_t dh[2];
  static unsigned char *blk[2][SLOTS];
  static size_t size[SLOTS];
  ludo__alloc_t heap[2];
  ludo__arena_t a[2];
  unsigned long rng = 12345;
  size_t i, k, buf = (size_t)24 << 20;
  int j;
  for (j = 0; j < 2; j++) {
    memset(&dh[j], 0, sizeof dh[j]);
    dh[j].base = malloc(buf);
    ASSERT_NOT_NULL(dh[j].base);
    dh[j].cap = buf;
    ludo__alloc_init(&heap[j], det_fn, &dh[j]);
    ludo__arena_init(&a[j], &heap[j]);
  }
  memset(blk, 0, sizeof blk);
  for (k = 0; k < OPS; k++) {
    size_t n, keep;
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    i = (rng >> 33) % SLOTS;
    if (blk[0][i] == NULL) {
      n = pick_size(&rng);
      blk[0][i] = n <= LUDO__ARENA_MAX ? ludo__arena_take(&a[0], n) : NULL;
      if (blk[0][i] == NULL)
        blk[0][i] = ludo__arena_realloc(&a[0], NULL, 0, n);
      blk[1][i] = ludo__arena_realloc(&a[1], NULL, 0, n);
      keep = 0;
    } else if ((rng >> 40) & 1) {
      for (j = 0; j < 2; j++) ASSERT_TRUE(check(blk[j][i], size[i], (unsigned)i));
      if (!ludo__arena_give(&a[0], blk[0][i], size[i]))
        ludo__arena_realloc(&a[0], blk[0][i], size[i], 0);
      ludo__arena_realloc(&a[1], blk[1][i], size[i], 0);
      blk[0][i] = blk[1][i] = NULL;
      continue;
    } else {
      n = pick_size(&rng);
      keep = size[i] < n ? size[i] : n;
      for (j = 0; j < 2; j++)
        blk[j][i] = ludo__arena_realloc(&a[j], blk[j][i], size[i], n);
    }
    ASSERT_NOT_NULL(blk[0][i]);
    ASSERT_NOT_NULL(blk[1][i]);
    ASSERT_EQ(blk[0][i] - dh[0].base, blk[1][i] - dh[1].base);
    for (j = 0; j < 2; j++) {
      ASSERT_TRUE(check(blk[j][i], keep, (unsigned)i));
      fill(blk[j][i], n, (unsigned)i);
    }
    size[i] = n;
    ASSERT_EQ(a[0].held, a[1].held);
    ASSERT_EQ(a[0].overflow, a[1].overflow);
  }
  ASSERT_TRUE(a[0].overflow); /* the run went past the arena's limit */
  for (j = 0; j < 2; j++) {
    ludo__arena_release(&a[j]);
    free(dh[j].base);
  }
}

static void *salloc(ludo__state_t *st, void *p, size_t o, size_t n) {
  return ludo__state_alloc(st, p, o, n);
}

/* The state allocator's fast paths keep every limit of its general path:
 * a fresh small block that would take the state past its cap is refused
 * (one that reaches it exactly is not), shrinking and freeing are never
 * refused, fail_after fails the Nth growth, and used and the shared total
 * follow every call. */
TEST_IMPL(state_alloc_fast_path_limits) {
  ludo__alloc_t heap;
  ludo__state_t st;
  size_t total = 0;
  void *p1, *p2, *p3, *big;
  memset(&st, 0, sizeof st);
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  st.heap = &heap;
  st.total = &total;
  st.fail_after = -1;
  ludo__arena_init(&st.arena, &heap);
  st.cap = 100;
  p1 = salloc(&st, NULL, 4 /* a string's tag */, 64);
  ASSERT_NOT_NULL(p1);
  ASSERT_EQ(st.used, 64);
  ASSERT_NULL(salloc(&st, NULL, 5, 48)); /* 112 > 100 */
  ASSERT_EQ(st.refused, 1);
  ASSERT_EQ(st.failed, 1);
  ASSERT_EQ(st.used, 64);
  p2 = salloc(&st, NULL, 5, 36); /* exactly the cap */
  ASSERT_NOT_NULL(p2);
  ASSERT_EQ(st.used, 100);
  ASSERT_NULL(salloc(&st, NULL, 5, 1));
  ASSERT_EQ(st.refused, 2);
  p1 = salloc(&st, p1, 64, 20); /* shrinking at the cap */
  ASSERT_NOT_NULL(p1);
  ASSERT_EQ(st.used, 56);
  ASSERT_EQ(total, 56);
  salloc(&st, p2, 36, 0);
  ASSERT_EQ(st.used, 20);
  /* No cap (0): nothing is refused. */
  st.cap = 0;
  p2 = salloc(&st, NULL, 5, LUDO__ARENA_MAX);
  big = salloc(&st, NULL, 5, LUDO__ARENA_MAX + 1);
  ASSERT_NOT_NULL(p2);
  ASSERT_NOT_NULL(big);
  ASSERT_EQ(st.used, 20 + 2 * LUDO__ARENA_MAX + 1);
  /* Fault injection: the second growth from here fails, then none. */
  st.fail_after = 1;
  p3 = salloc(&st, NULL, 5, 16);
  ASSERT_NOT_NULL(p3);
  ASSERT_NULL(salloc(&st, NULL, 5, 16));
  ASSERT_EQ(st.failed, 3);
  ASSERT_EQ(st.fail_after, -1);
  salloc(&st, p3, 16, 0);
  p3 = salloc(&st, NULL, 5, 16);
  ASSERT_NOT_NULL(p3);
  ASSERT_EQ(total, st.used);
  salloc(&st, p1, 20, 0);
  salloc(&st, p2, LUDO__ARENA_MAX, 0);
  salloc(&st, big, LUDO__ARENA_MAX + 1, 0);
  salloc(&st, p3, 16, 0);
  ASSERT_EQ(st.used, 0);
  ASSERT_EQ(total, 0);
  ludo__arena_release(&st.arena);
  ASSERT_EQ(heap.live, 0);
  ASSERT_EQ(test_heap.osize_mismatch, 0);
}
