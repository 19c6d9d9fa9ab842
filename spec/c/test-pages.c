/* test-pages.c - the pages the arenas' chunks come from (runtime/base/
 * pages.c): aligned, distinct and writable, 511 to a region; pages given
 * back are handed out first; an emptied region is kept as the one spare
 * or unmapped; an arena takes its chunks there and counts them in its
 * heap; a runtime on the C library's allocator puts its sessions' chunks
 * there, and one on a host's allocator does not; a runtime freed with
 * sessions open on a borrowed loop gives every page back first; and the
 * next region is asked for once the pages run low, mapped on another
 * thread (runtime/core/prefault.c, which blocks every signal) and taken
 * before a new one would be mapped. */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "base/pages.h"
#include "core/prefault.h"
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

/* 1 while the page at p is mapped. */
static int mapped(const void *p) {
  unsigned char v;
  return mincore((void *)((uintptr_t)p & ~(uintptr_t)(LUDO__PAGE - 1)),
                 LUDO__PAGE, &v) == 0 || errno != ENOMEM;
}

static int low_calls;

static void count_low(void *ud) {
  (void)ud;
  low_calls++;
}

static void map_and_offer(void *arg) {
  ludo__pages_t *pg = arg;
  ludo__pages_offer(pg, ludo__pages_map());
}

/* The ask comes once the pages left fall below LUDO__PAGES_LOW, once
 * until its answer is taken; the answer, mapped and offered from another
 * thread, is the region the next get that needs one takes (a spare
 * first); `left` counts the pages not handed out; one offered and never
 * taken is unmapped by the free. */
TEST_IMPL(pages_next_region_asked_ahead) {
  static void *got[2 * PER];
  ludo__pages_t pg;
  uv_thread_t th;
  uintptr_t offered;
  void *spare_page;
  int i, n = 0;
  ludo__pages_init(&pg);
  ludo__pages_on_low(&pg, count_low, NULL);
  low_calls = 0;
  while (n < PER - (int)LUDO__PAGES_LOW) got[n++] = ludo__pages_get(&pg);
  ASSERT_EQ(pg.left, LUDO__PAGES_LOW);
  ASSERT_EQ(low_calls, 0); /* not below yet */
  got[n++] = ludo__pages_get(&pg);
  ASSERT_EQ(low_calls, 1);
  for (i = 0; i < 10; i++) got[n++] = ludo__pages_get(&pg);
  ASSERT_EQ(low_calls, 1); /* asked once */
  ludo__pages_put(&pg, got[--n]);
  ASSERT_EQ(pg.left, LUDO__PAGES_LOW - 10);
  ASSERT_OK(uv_thread_create(&th, map_and_offer, &pg));
  ASSERT_OK(uv_thread_join(&th));
  offered = (uintptr_t)atomic_load(&pg.offered);
  ASSERT_TRUE(offered != 0);
  ASSERT_EQ(pg.regions, 1); /* counted once taken */
  while (n < PER) got[n++] = ludo__pages_get(&pg);
  ASSERT_EQ(pg.left, 0);
  got[n++] = ludo__pages_get(&pg); /* the first full: the offered one */
  ASSERT_EQ(region(got[n - 1]), offered);
  ASSERT_NULL(atomic_load(&pg.offered));
  ASSERT_EQ(pg.regions, 2);
  ASSERT_EQ(pg.left, PER - 1);
  ASSERT_EQ(low_calls, 1);
  while (pg.left >= LUDO__PAGES_LOW) got[n++] = ludo__pages_get(&pg);
  ASSERT_EQ(low_calls, 2); /* taken: may ask again */
  /* a spare goes before an offered region */
  ASSERT_OK(uv_thread_create(&th, map_and_offer, &pg));
  ASSERT_OK(uv_thread_join(&th));
  offered = (uintptr_t)atomic_load(&pg.offered);
  for (i = n - 1; i >= PER; i--) ludo__pages_put(&pg, got[i]);
  n = PER; /* the second region empty: the spare */
  ASSERT_EQ(pg.regions, 2);
  ASSERT_EQ(pg.left, 0); /* the first is full, the spare not open */
  spare_page = ludo__pages_get(&pg);
  ASSERT_EQ(pg.left, PER - 1);
  ASSERT_EQ(region(spare_page), region(got[PER]));
  ASSERT_EQ((uintptr_t)atomic_load(&pg.offered), offered);
  ludo__pages_put(&pg, spare_page);
  for (i = 0; i < n; i++) ludo__pages_put(&pg, got[i]);
  ASSERT_EQ(pg.used, 0);
  ASSERT_TRUE(mapped((void *)offered));
  ludo__pages_free(&pg);
  ASSERT_EQ(pg.regions, 0);
  ASSERT_TRUE(!mapped((void *)offered)); /* offered, never taken: gone */
}

/* Every thread of the process but the calling one blocks SIGINT,
 * SIGTERM, SIGUSR1 and SIGCHLD (SigBlk in /proc/self/task/N/status), and
 * there is at least one. */
static int others_block_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGCHLD};
  long me = (long)syscall(SYS_gettid);
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int ok = 1, others = 0;
  size_t i;
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    char path[300], line[256];
    unsigned long long blk = 0;
    FILE *f;
    if (e->d_name[0] == '.' || atol(e->d_name) == me) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    if ((f = fopen(path, "r")) == NULL) continue; /* ended meanwhile */
    while (fgets(line, sizeof line, f) != NULL)
      if (sscanf(line, "SigBlk: %llx", &blk) == 1) break;
    fclose(f);
    others++;
    for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
      if ((blk & (1ull << (sigs[i] - 1))) == 0) ok = 0;
  }
  closedir(d);
  return ok && others > 0;
}

/* The core's thread answers: a pages source asking through
 * ludo__prefault gets its next region mapped on that thread, with no
 * region mapped by the gets themselves; freeing the thread joins it. */
TEST_IMPL(prefault_maps_next_region) {
  static void *got[PER + 1];
  ludo__pages_t pg;
  ludo__prefault_t pf;
  int i, waited;
  ludo__pages_init(&pg);
  ASSERT_OK(ludo__prefault_init(&pf, &pg));
  ASSERT_EQ(pf.started, 0); /* no thread before the first ask */
  for (i = 0; i < PER - (int)LUDO__PAGES_LOW; i++)
    got[i] = ludo__pages_get(&pg);
  ASSERT_EQ(pf.started, 0);
  got[i++] = ludo__pages_get(&pg); /* low: asks */
  ASSERT_EQ(pf.started, 1);
  /* started with every signal blocked: a host's handlers never run on it */
  ASSERT_TRUE(others_block_signals());
  for (waited = 0; atomic_load(&pg.offered) == NULL && waited < 5000;
       waited++)
    uv_sleep(1);
  ASSERT_NOT_NULL(atomic_load(&pg.offered));
  ASSERT_EQ(pg.regions, 1);
  for (; i <= PER; i++) got[i] = ludo__pages_get(&pg);
  ASSERT_NULL(atomic_load(&pg.offered)); /* taken, not mapped anew */
  ASSERT_EQ(pg.regions, 2);
  ASSERT_TRUE(region(got[PER]) != region(got[0]));
  *(volatile char *)got[PER] = 1; /* writable */
  ludo__prefault_free(&pf);
  ASSERT_NULL(pg.on_low);
  for (i = 0; i <= PER; i++) ludo__pages_put(&pg, got[i]);
  ludo__pages_free(&pg);
  ASSERT_EQ(pg.regions, 0);
}

/* A runtime whose sessions take more than half a region has its next
 * region mapped ahead, and frees cleanly with the thread running (on an
 * own loop and on a borrowed one). */
TEST_IMPL(prefault_runtime_regions) {
  uv_loop_t loop;
  int k;
  ASSERT_OK(uv_loop_init(&loop));
  for (k = 0; k < 2; k++) {
    ludo_runtime_t *rt = default_alloc_rt(k ? &loop : NULL);
    ludo_env_t *env;
    ludo_session_t *s;
    const char *out;
    size_t len;
    int waited;
    ASSERT_OK(ludo_env_load(rt, "examples/echo", NULL, &env));
    while (rt->core.prefault.started == 0 && rt->core.pages.regions < 2) {
      ASSERT_OK(ludo_session_open(env, &s));
      ASSERT_OK(ludo_session_reset(s, "{}", 2, &out, &len));
    }
    ASSERT_EQ(rt->core.prefault.started, 1); /* asked before a 2nd region */
    ASSERT_EQ(rt->core.pages.regions, 1);
    for (waited = 0; atomic_load(&rt->core.pages.offered) == NULL &&
                     waited < 5000;
         waited++)
      uv_sleep(1);
    ASSERT_NOT_NULL(atomic_load(&rt->core.pages.offered));
    ludo_runtime_free(rt);
    if (k) uv_run(&loop, UV_RUN_DEFAULT);
  }
  ASSERT_OK(uv_loop_close(&loop));
}
