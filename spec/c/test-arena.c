/* test-arena.c - the per-state small-object arena (runtime/script/arena.c)
 * on its own: blocks keep their contents across every kind of resize
 * (small to small, small to large and back), freed blocks are reused, the
 * arena stops taking chunks at its limit and hands the rest to the heap,
 * and release returns every byte. */
#include "helpers.h"

#include <string.h>

#include "script/arena.h"

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
