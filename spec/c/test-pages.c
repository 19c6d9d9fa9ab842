/* test-pages.c - the pages the arenas' chunks come from (runtime/base/
 * pages.c): aligned, distinct and writable, 511 to a region; pages given
 * back are handed out first; an emptied region is kept as the one spare
 * or unmapped; an arena takes its chunks there and counts them in its
 * heap; a runtime on the C library's allocator puts its sessions' chunks
 * there, and one on a host's allocator does not; and a runtime freed with
 * sessions open on a borrowed loop gives every page back first. */
#include "helpers.h"

#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "base/pages.h"
#include "env/env.h"
#include "script/arena.h"

enum { PER = (int)(LUDO__PAGES_REGION / LUDO__PAGE) - 1 }; /* 511 */

static uintptr_t region(const void *p) {
  return (uintptr_t)p & ~(uintptr_t)(LUDO__PAGES_REGION - 1);
}

TEST_IMPL(pages_hand_out_aligned_pages) {
  static unsigned char *got[PER + 1];
  ludo__pages_t pg;
  int i, j;
  ludo__pages_init(&pg);
  ASSERT_EQ(pg.regions, 0); /* nothing mapped before the first page */
  for (i = 0; i < PER; i++) {
    got[i] = ludo__pages_get(&pg);
    ASSERT_NOT_NULL(got[i]);
    ASSERT_EQ((uintptr_t)got[i] % LUDO__PAGE, 0);
    ASSERT_EQ(region(got[i]), region(got[0]));
    ASSERT_TRUE((uintptr_t)got[i] > region(got[0])); /* not the record */
    memset(got[i], i & 0xff, LUDO__PAGE);
  }
  ASSERT_EQ(pg.regions, 1);
  for (i = 0; i < PER; i++) /* distinct, and each kept its bytes */
    for (j = 0; j < (int)LUDO__PAGE; j += 512)
      ASSERT_EQ(got[i][j], (unsigned char)(i & 0xff));
  got[PER] = ludo__pages_get(&pg); /* the region is full: a second one */
  ASSERT_NOT_NULL(got[PER]);
  ASSERT_EQ(pg.regions, 2);
  ASSERT_TRUE(region(got[PER]) != region(got[0]));
  ASSERT_EQ(pg.used, PER + 1);
  for (i = 0; i <= PER; i++) ludo__pages_put(&pg, got[i]);
  /* both regions empty: one kept as the spare, the other unmapped */
  ASSERT_EQ(pg.used, 0);
  ASSERT_EQ(pg.regions, 1);
  ludo__pages_free(&pg);
  ASSERT_EQ(pg.regions, 0);
}

TEST_IMPL(pages_given_back_first_and_spare) {
  ludo__pages_t pg;
  void *a, *b, *c, *d;
  uintptr_t spare;
  ludo__pages_init(&pg);
  a = ludo__pages_get(&pg);
  b = ludo__pages_get(&pg);
  c = ludo__pages_get(&pg);
  ASSERT_TRUE(a != b && b != c && a != c);
  ludo__pages_put(&pg, b);
  ASSERT_PTR_EQ(ludo__pages_get(&pg), b); /* a page given back first */
  ludo__pages_put(&pg, a);
  ludo__pages_put(&pg, b);
  ludo__pages_put(&pg, c);
  ASSERT_EQ(pg.used, 0);
  ASSERT_EQ(pg.regions, 1); /* kept as the spare: not unmapped */
  spare = region(a);
  d = ludo__pages_get(&pg); /* from the spare, no new mapping */
  ASSERT_EQ(region(d), spare);
  ASSERT_EQ(pg.regions, 1);
  ludo__pages_put(&pg, d);
  ludo__pages_free(&pg);
  ASSERT_EQ(pg.regions, 0);
}

/* An arena with pages: its chunks are whole aligned pages, counted in the
 * heap's live bytes, and given back on release. */
TEST_IMPL(arena_chunks_from_pages) {
  ludo__alloc_t heap;
  ludo__pages_t pg;
  ludo__arena_t a;
  void *blocks[200];
  int i;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__pages_init(&pg);
  ludo__arena_init(&a, &heap);
  a.pages = &pg;
  for (i = 0; i < 200; i++) {
    blocks[i] = ludo__arena_realloc(&a, NULL, 0, 64);
    ASSERT_NOT_NULL(blocks[i]);
    memset(blocks[i], i, 64);
  }
  ASSERT_EQ(a.held, 4 * 4096);
  ASSERT_EQ(pg.used, 4);
  for (i = 0; i < 4; i++) ASSERT_EQ((uintptr_t)a.first[i] % LUDO__PAGE, 0);
  ASSERT_EQ(heap.live, 4 * 4096); /* the chunks, counted */
  ASSERT_EQ(test_heap.live, 0);   /* and none of them from the heap */
  for (i = 0; i < 200; i++) ludo__arena_realloc(&a, blocks[i], 64, 0);
  ludo__arena_release(&a);
  ASSERT_EQ(pg.used, 0);
  ASSERT_EQ(heap.live, 0);
  ludo__pages_free(&pg);
}

static ludo_runtime_t *default_alloc_rt(void *loop) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  test_options(&o);
  o.alloc = NULL; /* the C library's */
  o.alloc_ud = NULL;
  o.prewarm = 0;
  o.loop = loop;
  ASSERT_OK(ludo_runtime_new(&rt, &o));
  return rt;
}

/* On the C library's allocator the sessions' chunks are pages, counted
 * in the runtime's heap bytes and all back once the sessions close; on a
 * host's allocator the host gets them. */
TEST_IMPL(pages_hold_runtime_chunks) {
  ludo_runtime_t *rt = default_alloc_rt(NULL);
  ludo_env_t *env;
  ludo_session_t *ss[20];
  ludo_stats_t st;
  const char *act = "{\"message\":\"hi\"}", *out;
  size_t len;
  int i;
  ASSERT_OK(ludo_env_load(rt, "examples/echo", NULL, &env));
  for (i = 0; i < 20; i++) {
    ASSERT_OK(ludo_session_open(env, &ss[i]));
    ASSERT_OK(ludo_session_reset(ss[i], "{}", 2, &out, &len));
    ASSERT_OK(ludo_session_step(ss[i], act, strlen(act), &out, &len));
    ASSERT_PTR_EQ(ss[i]->ps->st.arena.pages, &rt->core.pages);
  }
  ASSERT_TRUE(rt->core.pages.used >= 20 * 2);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_TRUE(st.heap_bytes >= rt->core.pages.used * LUDO__PAGE);
  for (i = 0; i < 20; i++) ludo_session_close(ss[i]);
  ludo_runtime_poll(rt, 0); /* teardowns deferred to the loop, if any */
  ASSERT_EQ(rt->core.pages.used, 0);
  ludo_env_free(env);
  ludo_runtime_free(rt);

  rt = test_rt_new(NULL); /* the counting allocator: a host's */
  env = test_env_load(rt, "examples/echo", NULL);
  ss[0] = test_open(env);
  ASSERT_NULL(ss[0]->ps->st.arena.pages);
  ASSERT_EQ(rt->core.pages.regions, 0);
  ludo_session_close(ss[0]);
  test_rt_free(rt);
}

/* Freed with sessions open, on a borrowed loop: every page comes back
 * before the runtime's memory goes (AddressSanitizer would see a page
 * given back to a freed source), and the host's loop closes. */
TEST_IMPL(pages_borrowed_loop_free) {
  uv_loop_t loop;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  const char *out;
  size_t len;
  int i;
  ASSERT_OK(uv_loop_init(&loop));
  rt = default_alloc_rt(&loop);
  ASSERT_OK(ludo_env_load(rt, "examples/echo", NULL, &env));
  for (i = 0; i < 5; i++) {
    ASSERT_OK(ludo_session_open(env, &s));
    ASSERT_OK(ludo_session_reset(s, "{}", 2, &out, &len));
  }
  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}
