/* test-prefetch.c - asking for a step's memory ahead (runtime/env/session.c
 * prefetch, runtime/script/arena.c ludo__arena_prefetch): the arena keeps
 * its first chunks in order, asking reads nothing it must not (ASan: no
 * chunk's poisoned bytes, no freed state), and steps give the same results
 * with it as without, in a batch, in the loop's queue, and with sessions
 * closing between queued steps. */
#include "helpers.h"

#include <stdio.h>
#include <string.h>

#include "env/env.h"
#include "script/arena.h"

/* The arena records its first chunks oldest first; asking for all of them
 * (the first ones from the record, the newer ones from the list) changes
 * nothing; a release forgets them. */
TEST_IMPL(arena_first_chunks) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  void *blocks[2000], *free0;
  size_t i, held;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  ludo__arena_prefetch(&a); /* no chunk yet */
  for (i = 0; i < 2000; i++) {
    blocks[i] = ludo__arena_realloc(&a, NULL, 0, 32);
    ASSERT_NOT_NULL(blocks[i]);
  }
  /* 2000 x 32 bytes: 16 chunks or more, more than the record holds. */
  ASSERT_GE(a.held, 16 * 4096);
  /* The first block came from the first chunk, the record's first entry;
   * every recorded chunk is on the list, the oldest last. */
  ASSERT_TRUE((char *)blocks[0] > (char *)a.first[0] &&
              (char *)blocks[0] < (char *)a.first[0] + 4096);
  for (i = 1; i < LUDO__ARENA_FIRST; i++) {
    ASSERT_NOT_NULL(a.first[i]);
    ASSERT_TRUE(a.first[i] != a.first[i - 1]);
  }
  held = a.held;
  ludo__arena_realloc(&a, blocks[5], 32, 0);
  free0 = a.free[1];
  ludo__arena_prefetch(&a);
  ASSERT_EQ(a.held, held);
  ASSERT_PTR_EQ(a.free[1], free0);
  ASSERT_PTR_EQ(ludo__arena_realloc(&a, NULL, 0, 32), blocks[5]);
  ludo__arena_release(&a);
  for (i = 0; i < LUDO__ARENA_FIRST; i++) ASSERT_NULL(a.first[i]);
  ludo__arena_prefetch(&a); /* released: nothing to ask for */
  ASSERT_EQ(heap.live, 0);
}

#define NS 9

typedef struct {
  int n;
  int status[NS];
  char data[NS][512];
} rec_t;

static void batch_cb(size_t i, ludo_session_t *s, int status,
                     const char *data, size_t len, void *ud) {
  rec_t *r = ud;
  (void)s;
  r->n++;
  r->status[i] = status;
  snprintf(r->data[i], sizeof r->data[0], "%.*s", (int)len, data);
}

static void call_cb(ludo_session_t *s, int status, const char *data,
                    size_t len, void *ud) {
  rec_t *r = ud;
  int i = (int)(intptr_t)ludo_session_get_data(s);
  r->n++;
  r->status[i] = status;
  snprintf(r->data[i], sizeof r->data[0], "%.*s", (int)len, data);
}

/* The result a blocking step of a fresh session gives for `act`. */
static void expected(ludo_env_t *env, const char *act, char *buf, size_t n) {
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, "{\"seed\":1}", 10, &out, &len));
  ASSERT_OK(ludo_session_step(s, act, strlen(act), &out, &len));
  snprintf(buf, n, "%.*s", (int)len, out);
  ludo_session_close(s);
}

/* With the threshold at 0 every step asks ahead: a batch, steps queued
 * on the loop (some sessions closed while queued, one session's state
 * gone before its task runs), and the results are those of plain
 * blocking steps. */
TEST_IMPL(prefetch_ahead_same_results) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *ss[NS];
  const char *acts[NS];
  size_t lens[NS];
  char msgs[NS][64], want[NS][512];
  rec_t r;
  const char *out;
  size_t len;
  int i, round;
  rt->prefetch_live = 0;
  for (i = 0; i < NS; i++) {
    snprintf(msgs[i], sizeof msgs[i], "{\"message\":\"%.*s\"}", i + 1,
             "abcdefghijklmnop");
    acts[i] = msgs[i];
    lens[i] = strlen(msgs[i]);
    expected(env, acts[i], want[i], sizeof want[i]);
  }
  for (round = 0; round < 2; round++) {
    for (i = 0; i < NS; i++) {
      ss[i] = test_open(env);
      ludo_session_set_data(ss[i], (void *)(intptr_t)i);
      ASSERT_OK(ludo_session_reset(ss[i], "{\"seed\":1}", 10, &out, &len));
    }
    memset(&r, 0, sizeof r);
    if (round == 0) {
      ASSERT_OK(ludo_session_step_batch(ss, acts, lens, NS, batch_cb, &r));
    } else {
      for (i = 0; i < NS; i++)
        ASSERT_OK(ludo_session_step_async(ss[i], acts[i], lens[i], call_cb,
                                          &r));
      /* Closed while their steps wait in the queue: told ECANCELED. */
      ASSERT_OK(ludo_session_close_async(ss[2], NULL, NULL));
      ASSERT_OK(ludo_session_close_async(ss[3], NULL, NULL));
      ASSERT_OK(ludo_runtime_run(rt));
    }
    ASSERT_EQ(r.n, NS);
    for (i = 0; i < NS; i++) {
      if (round == 1 && (i == 2 || i == 3)) {
        ASSERT_ERR(r.status[i], LUDO_ECANCELED);
        continue;
      }
      ASSERT_OK(r.status[i]);
      /* the episode ids differ; everything from the observation on */
      ASSERT_STR_EQ(strstr(r.data[i], "\"observation\""),
                    strstr(want[i], "\"observation\""));
    }
    for (i = 0; i < NS; i++)
      if (round == 0 || (i != 2 && i != 3)) ludo_session_close(ss[i]);
  }
  test_rt_free(rt);
}

/* ---- the arena's larger blocks --------------------------------------- */

typedef struct {
  int n;
  const void *p[64];
  size_t len[64];
} ranges_t;

static void note_range(const void *p, size_t n, void *ud) {
  ranges_t *r = ud;
  if (r->n < 64) {
    r->p[r->n] = p;
    r->len[r->n] = n;
  }
  r->n++;
}

/* The length asked for of block p in the arena's ranges; 0 when p is not
 * among them. */
static size_t asked(const ludo__arena_t *a, const void *p) {
  ranges_t r;
  int i;
  memset(&r, 0, sizeof r);
  ludo__arena_ranges(a, note_range, &r);
  for (i = 0; i < r.n && i < 64; i++)
    if (r.p[i] == p) return r.len[i];
  return 0;
}

/* Blocks larger than the chunks' classes come from the heap; the arena
 * keeps the first LUDO__ARENA_BIG of them alive, through every way lua_Alloc
 * moves them (grown, moved back to a chunk, freed), and asks for at most
 * 2 KiB of each. */
TEST_IMPL(arena_big_blocks) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  void *b[LUDO__ARENA_BIG + 2], *small, *p;
  size_t i;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  for (i = 0; i < LUDO__ARENA_BIG + 2; i++) {
    b[i] = ludo__arena_realloc(&a, NULL, 0, 300 + i);
    ASSERT_NOT_NULL(b[i]);
  }
  for (i = 0; i < LUDO__ARENA_BIG; i++) ASSERT_EQ(asked(&a, b[i]), 300 + i);
  /* the record is full: the last two are not kept */
  ASSERT_EQ(asked(&a, b[LUDO__ARENA_BIG]), 0);
  ASSERT_EQ(asked(&a, b[LUDO__ARENA_BIG + 1]), 0);
  /* grown past 2 KiB: kept at its new address, 2 KiB of it asked for */
  p = ludo__arena_realloc(&a, b[0], 300, 10000);
  ASSERT_NOT_NULL(p);
  b[0] = p;
  ASSERT_EQ(asked(&a, b[0]), 2048);
  /* moved back into a chunk: forgotten (a chunk is asked for whole) */
  small = ludo__arena_realloc(&a, b[1], 301, 100);
  ASSERT_NOT_NULL(small);
  ASSERT_EQ(asked(&a, b[1]), 0);
  /* freed: forgotten, and its slot goes to the next large block */
  ludo__arena_realloc(&a, b[2], 302, 0);
  ASSERT_EQ(asked(&a, b[2]), 0);
  p = ludo__arena_realloc(&a, NULL, 0, 5000);
  ASSERT_EQ(asked(&a, p), 2048);
  /* a small block grown into a large one is kept too (a free slot) */
  small = ludo__arena_realloc(&a, small, 100, 400);
  ASSERT_EQ(asked(&a, small), 400);
  ludo__arena_prefetch(&a); /* asks for all of it: changes nothing */
  ASSERT_EQ(asked(&a, small), 400);
  ludo__arena_realloc(&a, small, 400, 0);
  ludo__arena_realloc(&a, p, 5000, 0);
  ludo__arena_realloc(&a, b[0], 10000, 0);
  for (i = 3; i < LUDO__ARENA_BIG + 2; i++)
    ludo__arena_realloc(&a, b[i], 300 + i, 0);
  for (i = 0; i < LUDO__ARENA_BIG; i++) ASSERT_NULL(a.big[i]);
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

/* ---- the learned order of blocking calls ----------------------------- */

static void step_all(ludo_session_t **ss, const int *order, int n,
                     const char *const *acts, char (*want)[512]) {
  const char *out;
  size_t len;
  int i;
  for (i = 0; i < n; i++) {
    int k = order[i];
    ASSERT_OK(ludo_session_step(ss[k], acts[k], strlen(acts[k]), &out, &len));
    ASSERT_STR_EQ(strstr(out, "\"observation\""),
                  strstr(want[k], "\"observation\""));
  }
}

/* Blocking steps in turn link each session to the one called after it;
 * the links follow a change of order, a closed session leaves them (no
 * session points to it: ASan), and the results are those of plain steps
 * (with the threshold at 0, every step asks for the next ones). The ranges
 * asked for a session start with its own record. */
TEST_IMPL(prefetch_learned_order) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *ss[NS];
  const char *acts[NS];
  char msgs[NS][64], want[NS][512];
  int fwd[NS], back[NS], skip[NS - 1], i, round;
  ranges_t r;
  const char *out;
  size_t len;
  rt->prefetch_live = 0;
  for (i = 0; i < NS; i++) {
    snprintf(msgs[i], sizeof msgs[i], "{\"message\":\"%.*s\"}", i + 1,
             "abcdefghijklmnop");
    acts[i] = msgs[i];
    expected(env, acts[i], want[i], sizeof want[i]);
    fwd[i] = i;
    back[i] = NS - 1 - i;
  }
  for (i = 0; i < NS; i++) {
    ss[i] = test_open(env);
    ASSERT_OK(ludo_session_reset(ss[i], "{\"seed\":1}", 10, &out, &len));
  }
  for (round = 0; round < 3; round++) step_all(ss, fwd, NS, acts, want);
  for (i = 0; i + 1 < NS; i++) {
    ASSERT_PTR_EQ(ss[i]->after, ss[i + 1]);
    ASSERT_PTR_EQ(ss[i + 1]->before, ss[i]);
  }
  ASSERT_PTR_EQ(ss[NS - 1]->after, ss[0]); /* round after round */
  for (round = 0; round < 2; round++) step_all(ss, back, NS, acts, want);
  for (i = 1; i < NS; i++) ASSERT_PTR_EQ(ss[i]->after, ss[i - 1]);
  memset(&r, 0, sizeof r);
  ludo__session_ranges(ss[0], note_range, &r);
  ASSERT_PTR_EQ(r.p[0], ss[0]);
  ASSERT_EQ(r.len[0], sizeof *ss[0]);
  /* closing the middle session unlinks it from both sides */
  ludo_session_close(ss[4]);
  ASSERT_NULL(ss[5]->after);
  ASSERT_NULL(ss[3]->before);
  for (i = 0; i < NS - 1; i++) skip[i] = i < 4 ? i : i + 1;
  for (round = 0; round < 3; round++) step_all(ss, skip, NS - 1, acts, want);
  ASSERT_PTR_EQ(ss[3]->after, ss[5]);
  /* the last called session closed: the next call starts a new chain */
  ludo_session_close(ss[NS - 1]);
  ASSERT_NULL(rt->last_blocking);
  step_all(ss, skip, NS - 2, acts, want);
  for (i = 0; i < NS; i++)
    if (i != 4 && i != NS - 1) ludo_session_close(ss[i]);
  ASSERT_NULL(rt->last_blocking);
  test_rt_free(rt);
}
