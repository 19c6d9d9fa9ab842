/* test-prefetch.c - asking for a step's memory ahead (runtime/env/session.c
 * prefetch, runtime/script/arena.c ludo__arena_prefetch): the arena keeps
 * its first chunks in order, asking reads nothing it must not (ASan: no
 * chunk's poisoned bytes, no freed state), and steps give the same results
 * with it as without, in a batch, in the loop's queue, and with sessions
 * closing between queued steps. */
#include "helpers.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/cacheprobe.h"
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

#define NRANGES 256

typedef struct {
  int n;
  const void *p[NRANGES];
  size_t len[NRANGES];
} ranges_t;

static void note_range(const void *p, size_t n, void *ud) {
  ranges_t *r = ud;
  if (r->n < NRANGES) {
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
  for (i = 0; i < r.n && i < NRANGES; i++)
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

/* Is the line of p inside one of the ranges? */
static int covered(const ranges_t *r, const void *p) {
  int i;
  for (i = 0; i < r->n && i < NRANGES; i++)
    if ((const char *)p >= (const char *)r->p[i] &&
        (const char *)p < (const char *)r->p[i] + r->len[i])
      return 1;
  return 0;
}

/* Blocking steps in turn link each session to the one called after it;
 * the links follow a change of order, a closed session leaves them (no
 * session points to it: ASan), and the results are those of plain steps
 * (with the threshold at 0, every step asks for the next ones). The ranges
 * asked for a session start with its own record, and hold the fields of
 * its records a step reads, not the others. */
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
  /* of the records, the fields a step reads and writes; not the rest */
  ASSERT_EQ(r.len[0], offsetof(ludo_session_t, id));
  ASSERT_TRUE(covered(&r, &ss[0]->after) && covered(&r, &ss[0]->out.len) &&
              covered(&r, &ss[0]->in.p) && covered(&r, &ss[0]->task));
  ASSERT_TRUE(covered(&r, &ss[0]->ps->st.used) &&
              covered(&r, &ss[0]->ps->st.wd) &&
              covered(&r, &ss[0]->ps->st.chain[0]) &&
              covered(&r, &ss[0]->ps->st.arena.free[0]) &&
              covered(&r, &ss[0]->ps->st.arena.big_hot[LUDO__ARENA_BIG - 1]) &&
              covered(&r, &ss[0]->ps->step_ref) &&
              covered(&r, &ss[0]->ps->sched.in_call) &&
              covered(&r, &ss[0]->ps->sched.done_ud));
  ASSERT_TRUE(!covered(&r, ss[0]->id) && !covered(&r, &ss[0]->err) &&
              !covered(&r, ss[0]->ps->st.where) &&
              !covered(&r, &ss[0]->ps->st.chain[1]) &&
              !covered(&r, &ss[0]->ps->sched.ops));
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

/* ---- the lines a step touches, learned ------------------------------- */

/* The ranges asked for the first chunk when its learned mask is `hot`. */
static ranges_t chunk_ranges(ludo__arena_t *a, uint64_t hot) {
  ranges_t r;
  size_t i;
  a->hot[0] = hot;
  for (i = 1; i < LUDO__ARENA_FIRST; i++) a->hot[i] = 0;
  memset(a->big_hot, 0, sizeof a->big_hot);
  memset(&r, 0, sizeof r);
  ludo__arena_ranges(a, note_range, &r);
  return r;
}

/* A learned mask narrows a chunk's range to its lines, a run of
 * neighbours at a time (bit j: the line j lines past the chunk's first
 * line); nothing learned, or forgotten, asks for every line. Once
 * learned, the blocks the next allocations take (each free list's first,
 * the chunk's unused space) are asked for too, and a larger block that
 * moves is asked for whole again. */
TEST_IMPL(arena_learned_ranges) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  void *blocks[300], *big;
  uintptr_t base;
  ranges_t r;
  size_t i, extra;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  /* 16-byte blocks: a chunk holds 255 with nothing left over, and none
   * is moved to start on a line (arena_blocks_within_lines) */
  for (i = 0; i < 300; i++) blocks[i] = ludo__arena_realloc(&a, NULL, 0, 16);
  big = ludo__arena_realloc(&a, NULL, 0, 1000);
  ASSERT_NOT_NULL(big);
  ASSERT_EQ(a.held, 2 * 4096); /* two chunks, the first full */
  ASSERT_EQ(asked(&a, a.first[0]), 4096);
  ASSERT_EQ(asked(&a, big), 1000);
  ludo__arena_realloc(&a, blocks[7], 16, 0); /* a free list's first */
  base = (uintptr_t)a.first[0] & ~(uintptr_t)63;
  a.learned = 1;
  /* nothing learned in the chunks: the ranges left are the blocks the
   * next allocations take (one free list's first, the unused space) and
   * the last line of each chunk not aligned to a line (it spans 65) */
  r = chunk_ranges(&a, 0);
  extra = (size_t)r.n;
  ASSERT_EQ(extra, 2 + ((uintptr_t)a.first[0] % 64 != 0) +
                       ((uintptr_t)a.first[1] % 64 != 0));
  ASSERT_TRUE(covered(&r, blocks[7]));
  ASSERT_TRUE(covered(&r, a.bump));
  if ((uintptr_t)a.first[0] % 64 != 0)
    ASSERT_TRUE(covered(&r, (void *)(base + 64 * 64)));
  /* lines 0-1, 5, 62-63: three runs */
  r = chunk_ranges(&a, 3u | (1u << 5) | ((uint64_t)3 << 62));
  ASSERT_EQ((size_t)r.n, 3 + extra);
  ASSERT_PTR_EQ(r.p[0], (void *)base);
  ASSERT_EQ(r.len[0], 128);
  ASSERT_PTR_EQ(r.p[1], (void *)(base + 5 * 64));
  ASSERT_EQ(r.len[1], 64);
  ASSERT_PTR_EQ(r.p[2], (void *)(base + 62 * 64));
  ASSERT_EQ(r.len[2], 128);
  /* a run to the last bit */
  r = chunk_ranges(&a, ~(uint64_t)0 << 40);
  ASSERT_PTR_EQ(r.p[0], (void *)(base + 40 * 64));
  ASSERT_EQ(r.len[0], 24 * 64);
  /* one line */
  r = chunk_ranges(&a, (uint64_t)1 << 9);
  ASSERT_EQ((size_t)r.n, 1 + extra);
  ASSERT_PTR_EQ(r.p[0], (void *)(base + 9 * 64));
  ASSERT_EQ(r.len[0], 64);
  /* the big block: only its learned lines, then whole once it moved */
  a.big_hot[0] = 2;
  ASSERT_EQ(asked(&a, big), 0); /* its second line only */
  big = ludo__arena_realloc(&a, big, 1000, 3000);
  ASSERT_NOT_NULL(big);
  ASSERT_EQ(asked(&a, big), 2048);
  /* forgotten: every line again, no extra ranges */
  ludo__arena_unlearn(&a);
  ASSERT_EQ(a.learned, 0);
  ASSERT_EQ(asked(&a, a.first[0]), 4096);
  ASSERT_EQ(asked(&a, blocks[7]), 0);
  ludo__arena_realloc(&a, big, 3000, 0);
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

/* Does one of the ranges overlap the 64-byte line at `line`? */
static int overlaps(const ranges_t *r, uintptr_t line) {
  int i;
  for (i = 0; i < r->n && i < NRANGES; i++)
    if ((uintptr_t)r->p[i] < line + 64 &&
        (uintptr_t)r->p[i] + r->len[i] > line)
      return 1;
  return 0;
}

/* How many of the 64 lines from the line of p some asked range
 * overlaps. */
static int lines_asked(const ludo__arena_t *a, const void *p) {
  ranges_t r;
  uintptr_t base = (uintptr_t)p & ~(uintptr_t)63;
  int j, n = 0;
  memset(&r, 0, sizeof r);
  ludo__arena_ranges(a, note_range, &r);
  for (j = 0; j < 64; j++) n += overlaps(&r, base + 64u * (unsigned)j);
  return n;
}

/* The lines of the chunk at `ch` that hold the blocks the next
 * allocations take (a free list's first, the chunk's unused space), as
 * a mask (bit j: its line j), or'ed with `hot`. */
static uint64_t next_lines(const ludo__arena_t *a, const void *ch,
                           uint64_t hot) {
  uintptr_t base = (uintptr_t)ch & ~(uintptr_t)63, p;
  size_t c;
  for (c = 0; c <= LUDO__ARENA_CLASSES; c++) {
    p = c < LUDO__ARENA_CLASSES ? (uintptr_t)a->free[c] : (uintptr_t)a->bump;
    if (p >= base && p < base + 4096) hot |= (uint64_t)1 << ((p - base) / 64);
  }
  return hot;
}

/* Allocates 256-byte blocks until the arena holds `chunks` chunks;
 * returns the first block of the last chunk begun (NULL if none was). */
static void *fill_chunks(ludo__arena_t *a, size_t chunks) {
  void *p, *first = NULL;
  while (a->held < chunks * 4096) {
    size_t held = a->held;
    p = ludo__arena_realloc(a, NULL, 0, 256);
    if (p == NULL) return NULL;
    if (a->held != held) first = p;
  }
  return first;
}

/* A chunk begun after learning is not asked for until relearning finds
 * lines of it (the blocks its next allocations take are); one begun
 * before learning is asked for whole until learned; chunks past the
 * first LUDO__ARENA_FIRST are not asked for. */
TEST_IMPL(arena_new_chunks_asked) {
  ludo__alloc_t heap;
  ludo__arena_t a;
  ranges_t r;
  void *p = NULL;
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  ASSERT_NOT_NULL(fill_chunks(&a, 2));
  ASSERT_EQ(lines_asked(&a, a.first[1]), 64); /* nothing learned: all */
  a.learned = LUDO__ARENA_PHASES;             /* as if learned: */
  a.hot[0] = a.hot[1] = 1;                    /* a line of each */
  ASSERT_NOT_NULL(fill_chunks(&a, 3));
  ASSERT_EQ(a.hot[2], 0);
  /* the third chunk: only the lines its next blocks take (its unused
   * space, and the space skipped to start its first block on a line) */
  ASSERT_EQ(lines_asked(&a, a.first[2]),
            __builtin_popcountll(next_lines(&a, a.first[2], 0)));
  ASSERT_TRUE(lines_asked(&a, a.first[2]) <= 2);
  /* the second: its learned line, and its tail (a free list's first) */
  ASSERT_TRUE(lines_asked(&a, a.first[1]) <= 2);
  /* relearning found its second line: that one too */
  a.hot[2] = 2;
  ASSERT_EQ(lines_asked(&a, a.first[2]),
            __builtin_popcountll(next_lines(&a, a.first[2], 2)));
  ASSERT_TRUE(lines_asked(&a, (const char *)a.first[2] + 64) >= 1);
  /* past the first LUDO__ARENA_FIRST chunks: at most the line of the
   * old chunk's tail (a free list's first) and the next block's */
  ASSERT_NOT_NULL(p = fill_chunks(&a, LUDO__ARENA_FIRST + 1));
  ASSERT_NOT_NULL(fill_chunks(&a, LUDO__ARENA_FIRST + 2));
  ASSERT_TRUE(lines_asked(&a, p) <= 1);
  memset(&r, 0, sizeof r);
  ludo__arena_ranges(&a, note_range, &r);
  ASSERT_TRUE(!covered(&r, p));
  ASSERT_TRUE(covered(&r, a.bump));
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

/* A cache threshold (base/cacheprobe.h) is there on x86-64; elsewhere a
 * test without one has nothing to probe with, and ends. */
#if defined(__x86_64__)
#define NEED_THRESHOLD(t) ASSERT_TRUE((t) > 0)
#else
#define NEED_THRESHOLD(t) \
  do {                    \
    if ((t) == 0) return; \
  } while (0)
#endif

/* LUDO__ARENA_PHASES learning steps (a phase of the lines each), each
 * writing blocks[touch[i]] for i in [from, nt); 0 when the first step
 * left a phase other than its own narrowed (they stay all asked for). */
static int learn_phases(ludo__arena_t *a, char **blocks, const int *touch,
                        int from, int nt, unsigned threshold) {
  int k, t, ok = 1;
  for (k = 0; k < (int)LUDO__ARENA_PHASES; k++) {
    int first = a->learned == 0;
    ludo__arena_learn_begin(a);
    for (t = from; t < nt; t++) blocks[touch[t]][0]++;
    ludo__arena_learn_end(a, threshold);
    if (first) ok = (a->hot[0] | 0x0101010101010101ull) == ~(uint64_t)0;
  }
  return ok;
}

/* Learning through the caches, a phase of the lines per step: after the
 * lines are evicted and a few blocks written (in no order a prefetcher
 * follows, as a step's are), the learned ranges hold every block written
 * and far fewer lines than the chunks; learned anew once a block is no
 * longer written, they drop it. Tried up to 3 times: a context switch
 * between the writes and the probes may evict a written line. */
TEST_IMPL(arena_learns_touched_lines) {
  static const int touch[] = {3,   301, 77,  450, 12,  199, 388, 140,
                              251, 29,  470, 333, 96};
  enum { NB = 8 * 60, NT = sizeof touch / sizeof touch[0] };
  ludo__alloc_t heap;
  ludo__arena_t a;
  char *blocks[NB];
  unsigned threshold = ludo__cache_threshold();
  size_t i, lines = 0;
  int tries, ok = 0, k;
  NEED_THRESHOLD(threshold);
  ludo__alloc_init(&heap, test_alloc_fn, &test_heap);
  ludo__arena_init(&a, &heap);
  for (i = 0; i < NB; i++) {
    blocks[i] = ludo__arena_realloc(&a, NULL, 0, 64);
    ASSERT_NOT_NULL(blocks[i]);
  }
  ASSERT_EQ(a.held, 8 * 4096);
  for (tries = 0; tries < 3 && !ok; tries++) {
    ranges_t r;
    ludo__arena_unlearn(&a);
    ASSERT_TRUE(learn_phases(&a, blocks, touch, 0, NT, threshold));
    ASSERT_EQ(a.learned, LUDO__ARENA_PHASES);
    memset(&r, 0, sizeof r);
    ludo__arena_ranges(&a, note_range, &r);
    ok = r.n <= NRANGES;
    for (k = 0; ok && k < NT; k++) ok = covered(&r, blocks[touch[k]]);
    for (lines = 0, k = 0; k < (int)(a.held / 4096); k++)
      lines += (size_t)__builtin_popcountll(a.hot[k]);
    /* learned anew without the first block: it is no longer asked for */
    learn_phases(&a, blocks, touch, 1, NT, threshold);
    memset(&r, 0, sizeof r);
    ludo__arena_ranges(&a, note_range, &r);
    ok = ok && r.n <= NRANGES && !covered(&r, blocks[touch[0]]);
    for (k = 1; ok && k < NT; k++) ok = covered(&r, blocks[touch[k]]);
  }
  ASSERT_TRUE(ok);
  ASSERT_EQ(a.learned, 2 * LUDO__ARENA_PHASES);
  /* 13 blocks written, a line each (and a neighbour, when the processor
   * brought it along), with what else a prefetcher brought; all lines
   * are 512 */
  ASSERT_TRUE(lines >= 13 && lines <= 96);
  ludo__arena_release(&a);
  ASSERT_EQ(heap.live, 0);
}

/* ludo__cache_probe of the one line at p. */
static int held_now(const void *p, unsigned threshold) {
  unsigned char held;
  ludo__cache_probe(&p, 1, threshold, &held);
  return held;
}

/* The probe itself: a line just read is held, an evicted one is not
 * (most of 16: the timer may be interrupted). Tried up to 5 times, as
 * cache_probe_list is. */
TEST_IMPL(cache_probe_tells_lines_apart) {
  static char lines[16][128] __attribute__((aligned(64)));
  unsigned threshold = ludo__cache_threshold();
  int i, tries, held = 0, evicted = 0;
  NEED_THRESHOLD(threshold);
  for (tries = 0; tries < 5 && (held < 12 || evicted < 12); tries++) {
    for (held = evicted = i = 0; i < 16; i++) {
      lines[i][0] = (char)i;
      held += held_now(lines[i], threshold);
    }
    for (i = 0; i < 16; i++) ludo__cache_evict(lines[i * 5 % 16], 1);
    for (i = 0; i < 16; i++)
      evicted += !held_now(lines[i * 7 % 16], threshold);
  }
  ASSERT_TRUE(held >= 12);
  ASSERT_TRUE(evicted >= 12);
}

/* The probe of a list (ludo__cache_probe, what learning uses): of lines
 * 512 bytes apart (one per region, as learning probes them), evicted and
 * then half of them written, the written read as held and the others not
 * (most of 8 each: the timer may be interrupted). Tried up to 5 times
 * (3 failed once in a full run under ASan, session 35):
 * moved to the other core between the writes and the probes, the process
 * finds none of its lines in its own caches. */
TEST_IMPL(cache_probe_list) {
  static char lines[16][512] __attribute__((aligned(64)));
  const void *list[16];
  unsigned char held[16];
  unsigned threshold = ludo__cache_threshold();
  int i, tries, written = 0, untouched = 0;
  NEED_THRESHOLD(threshold);
  for (i = 0; i < 16; i++) list[i] = lines[i * 7 % 16];
  for (tries = 0; tries < 5 && (written < 6 || untouched < 6); tries++) {
    for (i = 0; i < 16; i++) {
      lines[i][0] = (char)i;
      ludo__cache_evict(lines[i], 1);
    }
    for (i = 0; i < 16; i += 2) lines[i][0]++;
    memset(held, 2, sizeof held);
    ludo__cache_probe(list, 16, threshold, held);
    for (written = untouched = i = 0; i < 16; i++) {
      ASSERT_TRUE(held[i] <= 1);
      if ((i * 7 % 16) % 2 == 0)
        written += held[i];
      else
        untouched += !held[i];
    }
  }
  ASSERT_TRUE(written >= 6);
  ASSERT_TRUE(untouched >= 6);
}

/* Sessions stepped cold learn their lines in their first
 * LUDO__LEARN_STEPS steps, then a phase of them anew in one step of every
 * LUDO__RELEARN_STEPS; steps that learn give the results of plain
 * steps. */
TEST_IMPL(prefetch_learns_lines) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *ss[3];
  const char *act = "{\"message\":\"hi\"}", *out;
  char want[512];
  size_t len, i;
  int round, narrowed = 0;
  expected(env, act, want, sizeof want);
  rt->prefetch_live = 0; /* every session cold */
  for (i = 0; i < 3; i++) {
    ss[i] = test_open(env);
    ASSERT_OK(ludo_session_reset(ss[i], "{\"seed\":1}", 10, &out, &len));
  }
  if (ludo__cache_threshold() == 0) { /* nothing to learn with */
    for (i = 0; i < 3; i++) ludo_session_close(ss[i]);
    test_rt_free(rt);
    return;
  }
  for (round = 0; round < (int)LUDO__LEARN_STEPS + 2; round++)
    for (i = 0; i < 3; i++) {
      ASSERT_OK(ludo_session_step(ss[i], act, strlen(act), &out, &len));
      ASSERT_STR_EQ(strstr(out, "\"observation\""),
                    strstr(want, "\"observation\""));
      ASSERT_EQ(ss[i]->ps->st.arena.learned,
                round + 1 < (int)LUDO__LEARN_STEPS ? (unsigned)round + 1
                                                   : LUDO__LEARN_STEPS);
    }
  for (i = 0; i < 3; i++)
    narrowed += ss[i]->ps->st.arena.hot[0] != ~(uint64_t)0;
  ASSERT_TRUE(narrowed > 0);
  /* then one step in LUDO__RELEARN_STEPS learns a phase anew */
  ss[0]->ps->cold_steps = LUDO__RELEARN_STEPS - 2;
  ASSERT_OK(ludo_session_step(ss[0], act, strlen(act), &out, &len));
  ASSERT_EQ(ss[0]->ps->st.arena.learned, LUDO__LEARN_STEPS);
  ASSERT_EQ(ss[0]->ps->cold_steps, LUDO__RELEARN_STEPS - 1);
  ASSERT_OK(ludo_session_step(ss[1], act, strlen(act), &out, &len));
  ASSERT_OK(ludo_session_step(ss[0], act, strlen(act), &out, &len));
  ASSERT_STR_EQ(strstr(out, "\"observation\""),
                strstr(want, "\"observation\""));
  ASSERT_EQ(ss[0]->ps->st.arena.learned, LUDO__LEARN_STEPS + 1);
  ASSERT_EQ(ss[0]->ps->cold_steps, 0);
  for (i = 0; i < 3; i++) ludo_session_close(ss[i]);
  test_rt_free(rt);
}

/* Sessions opened together do not relearn together (env/pstate.c): each
 * state starts its count of cold steps at its own point of the
 * LUDO__RELEARN_STEPS between two relearning steps, so sessions stepped in
 * rounds relearn in different rounds (before, 256 sessions relearned in
 * one round of 4 ms, against 0.7 ms for the others). */
TEST_IMPL(relearning_spread) {
  enum { N = 16 };
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *ss[N];
  int i, j, distinct = 0;
  for (i = 0; i < N; i++) {
    ss[i] = test_open(env);
    ASSERT_TRUE(ss[i]->ps->cold_steps < LUDO__RELEARN_STEPS);
  }
  for (i = 0; i < N; i++) {
    for (j = 0; j < i && ss[j]->ps->cold_steps != ss[i]->ps->cold_steps; j++)
      ;
    distinct += j == i;
  }
  ASSERT_GE(distinct, N - 2);
  for (i = 0; i < N; i++) ludo_session_close(ss[i]);
  test_rt_free(rt);
}
