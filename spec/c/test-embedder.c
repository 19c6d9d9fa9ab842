/* test-embedder.c - what a careless embedder can do to the C API (an
 * embedder-misuse review, issue 7's re-entrancy rule): a session given
 * twice to an asynchronous batch, sessions closed from a batch's callback
 * or from another session's host function while a blocking call waits on
 * them, a script call started from the callback its free runs, work
 * started from the callbacks ludo_runtime_free runs, the wall-clock limit
 * on running Lua, time slices on a borrowed loop, a memory cap of
 * SIZE_MAX, and host modules of an environment checked as the runtime's
 * are. Each must end with the documented code, without a leak (the
 * harness's allocator counts every byte) or a use after free (make
 * asan). Fixture: spec/fixtures/c/embedder. */
#include "helpers.h"

#include <jansson.h>
#include <lauxlib.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#define EMB "spec/fixtures/c/embedder"
#define A(s) (s), strlen(s)

static ludo_session_t *victim;   /* what the host function closes */
static int victim_async;          /* ... with ludo_session_close_async */
static ludo_close_cb victim_ccb;  /* ... and this close callback */
static int close_self;            /* or it closes its own session */
static int close_self_async;      /* ... with ludo_session_close_async */
static ludo_script_t *script_victim; /* or it frees this script */

static int close_victim(lua_State *L) {
  if (close_self_async) {
    ASSERT_OK(ludo_session_close_async(ludo_session_from_lua(L), victim_ccb,
                                       NULL));
  } else if (close_self) {
    ludo_session_close(ludo_session_from_lua(L));
  } else if (script_victim != NULL) {
    ludo_script_free(script_victim);
    script_victim = NULL;
  } else if (victim != NULL && victim_async) {
    ASSERT_OK(ludo_session_close_async(victim, victim_ccb, NULL));
  } else if (victim != NULL) {
    ludo_session_close(victim);
  }
  victim = NULL;
  return 0;
}

static ludo_runtime_t *free_me; /* what free_runtime frees */

static int free_runtime(lua_State *L) {
  (void)L;
  ludo_runtime_free(free_me);
  return 0;
}

static const ludo_host_func_t emb_funcs[] = {
    {"call", (int (*)(void *))(void (*)(void))close_victim},
    {"free_rt", (int (*)(void *))(void (*)(void))free_runtime},
    {NULL, NULL}};

static ludo_env_t *emb_env(ludo_runtime_t *rt) {
  static ludo_host_module_t m = {"embedder", emb_funcs, NULL};
  ludo_env_options_t o;
  ludo_env_options_init(&o);
  o.modules = &m;
  o.nmodules = 1;
  return test_env_load(rt, EMB, &o);
}

static int ncb, statuses[8];

static void count_cb(size_t i, ludo_session_t *s, int status,
                     const char *data, size_t len, void *ud) {
  (void)s;
  (void)data;
  (void)len;
  (void)ud;
  if (i < 8) statuses[i] = status;
  ncb++;
}

/* A session given twice to an asynchronous batch: LUDO_EINVAL, nothing
 * queued (it used to queue one broken call that never completed). */
TEST_IMPL(embedder_batch_async_twice) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(emb_env(rt));
  ludo_session_t *ss[2] = {s, s};
  const char *acts[2] = {"{\"mode\":\"ok\"}", "{\"mode\":\"ok\"}"};
  size_t lens[2] = {strlen(acts[0]), strlen(acts[1])};
  ludo_stats_t st;
  ncb = 0;
  ASSERT_ERR(ludo_session_step_batch_async(ss, acts, lens, 2, count_cb,
                                           NULL), LUDO_EINVAL);
  ASSERT_OK(ludo_runtime_run(rt));
  ludo_runtime_stats(rt, &st);
  ASSERT_EQ(ncb, 0);
  ASSERT_UINT_EQ(st.calls, 0);
  ASSERT_OK(ludo_session_step(s, A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

static ludo_session_t *close_in_cb;

static void closing_cb(size_t i, ludo_session_t *s, int status,
                       const char *data, size_t len, void *ud) {
  count_cb(i, s, status, data, len, ud);
  if (i == 0 && close_in_cb != NULL) ludo_session_close(close_in_cb);
}

/* Steps {a, b} in a blocking batch whose first callback closes `closed`;
 * the first entry succeeds, the second reports `second`. */
static void batch_closing(ludo_session_t *a, ludo_session_t *b,
                          ludo_session_t *closed, int second) {
  ludo_session_t *ss[2] = {a, b};
  const char *acts[2] = {"{\"mode\":\"ok\"}", "{\"mode\":\"ok\"}"};
  size_t lens[2] = {strlen(acts[0]), strlen(acts[1])};
  ncb = 0;
  close_in_cb = closed;
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 2, closing_cb, NULL));
  ASSERT_EQ(ncb, 2);
  ASSERT_EQ(statuses[0], 0);
  ASSERT_EQ(statuses[1], second);
}

/* A blocking batch whose first callback closes a session the batch still
 * holds (another entry, or the same session given twice): the close is
 * deferred to the batch's end, the later entry reports ECANCELED (or
 * EINVAL for the repeat), nothing is read after it is freed. */
TEST_IMPL(embedder_batch_close_in_callback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env), *s1 = test_open(env);
  batch_closing(s0, s1, s1, LUDO_ECANCELED);
  batch_closing(s0, s0, s0, LUDO_EINVAL); /* s0 twice; the first closes */
  close_in_cb = NULL;
  test_rt_free(rt);
}

static void async_done(ludo_session_t *s, int status, const char *data,
                       size_t len, void *ud) {
  (void)s;
  (void)data;
  (void)len;
  *(int *)ud = status;
}

/* A blocking batch's entry that could not start (busy with an async call)
 * and that the first callback closes: held to the batch's end like the
 * started ones, so its own callback reads its message from a live session
 * (the batch read it after the close had freed it); its async call ends
 * once, done or cancelled. */
TEST_IMPL(embedder_batch_close_busy_entry) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env), *s1 = test_open(env);
  int st1 = 1;
  ASSERT_OK(ludo_session_step_async(s1, A("{\"mode\":\"ok\"}"), async_done,
                                    &st1));
  batch_closing(s0, s1, s1, LUDO_EBUSY);
  close_in_cb = NULL;
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_TRUE(st1 == 0 || st1 == LUDO_ECANCELED);
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

/* A session sleeping in an async call is closed by another session's host
 * function during a blocking step: its callback (ECANCELED) is held with
 * the other deliveries and runs after the blocking call returned, never
 * inside it (docs/embedding.md; the teardown ran it inline). */
TEST_IMPL(embedder_close_owed_callback_in_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env), *s1 = test_open(env);
  int st1 = 1;
  double t0 = test_now();
  ASSERT_OK(ludo_session_step_async(
      s1, A("{\"mode\":\"sleep\",\"seconds\":5}"), async_done, &st1));
  ASSERT_TRUE(ludo_runtime_poll(rt, 0) >= 0); /* s1 starts and sleeps */
  victim = s1;
  victim_async = 0;
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"host\"}"), NULL, NULL));
  ASSERT_NULL(victim);
  ASSERT_EQ(st1, 1); /* not inside the blocking call */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st1, LUDO_ECANCELED);
  ASSERT_DBL_LT(test_now() - t0, 4.0); /* not the whole sleep */
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

/* ludo_runtime_free from a host function (the call is running: it would
 * free what runs it) does nothing but log; the runtime goes on and is
 * freed later (it was a use after free). */
TEST_IMPL(embedder_runtime_free_reentrant) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(emb_env(rt));
  free_me = rt;
  ASSERT_OK(ludo_session_step(s, A("{\"mode\":\"free_rt\"}"), NULL, NULL));
  ASSERT_OK(ludo_session_step(s, A("{\"mode\":\"ok\"}"), NULL, NULL));
  free_me = NULL;
  test_rt_free(rt);
}

static ludo_env_t *free_env;
static int free_env_rc = 1;

static void free_env_cb(ludo_session_t *s, int status, void *ud) {
  (void)s;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  free_env_rc = ludo_env_free(free_env);
}

static int script_status = 1, script_calls;

static void script_done(ludo_script_t *sc, int status, const char *data,
                        size_t len, void *ud) {
  (void)sc;
  (void)data;
  (void)len;
  (void)ud;
  script_calls++;
  script_status = status;
}

/* ludo_runtime_free with an open in flight whose callback frees the
 * environment (a host's natural cleanup after a failed open): the free is
 * left to ludo_runtime_free, which was walking the environments (it read
 * the freed one). A script left open with a call in flight is freed too:
 * its callback runs once, ECANCELED, and every byte comes back (the
 * harness's allocator counts them). */
TEST_IMPL(embedder_runtime_free_leftovers) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc;
  free_env = emb_env(rt);
  ASSERT_OK(ludo_session_open_async(free_env, free_env_cb, NULL));
  ASSERT_OK(ludo_script_open(rt, "ludo.policy", NULL, &sc));
  ASSERT_OK(ludo_script_call_async(sc, "reset", "[1, {}]", 7, script_done,
                                   NULL));
  test_rt_free(rt);
  ASSERT_EQ(free_env_rc, 0);
  ASSERT_EQ(script_calls, 1);
  ASSERT_EQ(script_status, LUDO_ECANCELED);
}

/* A blocking step waits (it sleeps); meanwhile another session's host
 * function closes it (ludo_session_close, then close_async): the blocking
 * call ends with ECANCELED and the session goes when it returns, not
 * under it. The same inside a blocking batch. */
static void close_while_blocking(void) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env), *s1 = test_open(env), *ss[1];
  const char *acts[1] = {"{\"mode\":\"sleep\",\"seconds\":5}"};
  size_t lens[1] = {strlen(acts[0])};
  int st0 = 1;
  double t0 = test_now();
  victim = s1;
  ASSERT_OK(ludo_session_step_async(s0, A("{\"mode\":\"host\"}"), async_done,
                                    &st0));
  ASSERT_ERR(ludo_session_step(s1, A("{\"mode\":\"sleep\",\"seconds\":5}"),
                               NULL, NULL), LUDO_ECANCELED);
  ASSERT_DBL_LT(test_now() - t0, 4.0); /* not the whole sleep */
  /* s0's callback was held while the blocking call ran the loop; its call
   * has ended, and ludo_runtime_run still delivers it */
  ASSERT_EQ(st0, 1);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st0, 0);
  s1 = test_open(env);
  victim = s1;
  ss[0] = s1;
  ncb = 0;
  st0 = 1;
  ASSERT_OK(ludo_session_step_async(s0, A("{\"mode\":\"host\"}"), async_done,
                                    &st0));
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 1, count_cb, NULL));
  ASSERT_EQ(ncb, 1);
  ASSERT_EQ(statuses[0], LUDO_ECANCELED);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st0, 0);
  test_rt_free(rt);
}

TEST_IMPL(embedder_close_while_blocking) {
  victim_async = 0;
  close_while_blocking();
  victim_async = 1;
  close_while_blocking();
  victim_async = 0;
}

static int reissue_rc;

static void reissue_cb(ludo_script_t *sc, int status, const char *out,
                       size_t len, void *ud) {
  (void)out;
  (void)len;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  reissue_rc = ludo_script_call_async(sc, "reset", "[1, {}]", 7,
                                      reissue_cb, NULL);
}

/* ludo_script_free with a call in flight: the callback runs inside the
 * free, and a call it starts is refused (it used to queue a task on the
 * freed script). */
TEST_IMPL(embedder_script_free_reissue) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc;
  ASSERT_OK(ludo_script_open(rt, "ludo.policy", NULL, &sc));
  ASSERT_OK(ludo_script_call_async(sc, "reset", "[1, {}]", 7, reissue_cb,
                                   NULL));
  reissue_rc = 0;
  ludo_script_free(sc);
  ASSERT_EQ(reissue_rc, LUDO_ECLOSED);
  ASSERT_OK(ludo_runtime_poll(rt, 0) >= 0 ? 0 : -1);
  test_rt_free(rt);
}

static ludo_env_t *reopen_env;
static int reopen_rc = 1, reopens;

static void reopen_cb(ludo_session_t *s, int status, void *ud) {
  (void)s;
  (void)status;
  (void)ud;
  reopens++;
  reopen_rc = ludo_session_open_async(reopen_env, reopen_cb, NULL);
}

static void restart_cb(ludo_session_t *s, int status, const char *data,
                       size_t len, void *ud) {
  (void)data;
  (void)len;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  reopen_rc = ludo_session_open_async(reopen_env, reopen_cb, NULL);
  (void)s;
}

/* ludo_runtime_free runs the callbacks of what is in flight (ECANCELED);
 * an open or call they start is refused with ECLOSED (it used to leak,
 * or retry for ever). */
TEST_IMPL(embedder_free_refuses_new_work) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s;
  reopen_env = emb_env(rt);
  s = test_open(reopen_env);
  reopens = 0;
  ASSERT_OK(ludo_session_open_async(reopen_env, reopen_cb, NULL));
  ASSERT_OK(ludo_session_step_async(s, A("{\"mode\":\"sleep\","
                                         "\"seconds\":5}"), restart_cb,
                                    NULL));
  ludo_runtime_free(rt); /* the harness's allocator checks for leaks */
  ASSERT_EQ(reopen_rc, LUDO_ECLOSED);
  ASSERT_LE(reopens, 1);
}

/* The wall-clock limit stops running Lua too, with its own message, also
 * when the CPU budget is off. */
TEST_IMPL(embedder_wall_limit_while_running) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  double t0;
  test_options(&o);
  o.cpu_budget_ms = 0;
  o.wall_limit_ms = 300;
  rt = test_rt_new(&o);
  s = test_open(emb_env(rt));
  t0 = test_now();
  ASSERT_ERR(ludo_session_step(s, A("{\"mode\":\"spin\"}"), NULL, NULL),
             LUDO_ETIMEOUT);
  ASSERT_DBL_LT(test_now() - t0, 5.0);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "exceeded its wall-clock limit of 300 ms");
  ASSERT_OK(ludo_session_step(s, A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

static int ticks;

static void tick(uv_timer_t *t) {
  (void)t;
  ticks++;
}

/* On a borrowed loop with slice_us, a spinning step gives the loop back
 * between slices: the host's timer keeps firing while it spins (it used
 * to fire once, when the CPU budget ended the step). */
TEST_IMPL(embedder_slices_on_borrowed_loop) {
  uv_loop_t loop;
  uv_timer_t timer;
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  int st = 1, passes = 0;
  ASSERT_OK(uv_loop_init(&loop));
  uv_timer_init(&loop, &timer);
  uv_timer_start(&timer, tick, 1, 1);
  test_options(&o);
  o.loop = &loop;
  o.slice_us = 2000;
  o.cpu_budget_ms = 400;
  rt = test_rt_new(&o);
  s = test_open(emb_env(rt));
  ticks = 0;
  ASSERT_OK(ludo_session_step_async(s, A("{\"mode\":\"spin\"}"), async_done,
                                    &st));
  while (st == 1 && passes < 100000) {
    uv_run(&loop, UV_RUN_NOWAIT);
    passes++;
  }
  ASSERT_EQ(st, LUDO_ETIMEOUT);
  ASSERT_GT(ticks, 20); /* ~400 ms of spinning in 2 ms slices */
  ludo_runtime_free(rt); /* its handles close on the host's next run */
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}

/* A memory cap of SIZE_MAX: string.rep's size check does not overflow. */
TEST_IMPL(embedder_memory_cap_max) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_script_t *sc;
  const char *out;
  size_t len;
  test_options(&o);
  o.memory_cap = SIZE_MAX;
  rt = test_rt_new(&o);
  ASSERT_OK(ludo_script_open(rt, "ludo.jsontext", NULL, &sc));
  ASSERT_OK(ludo_script_call(sc, "encode", "[\"x\"]", 5, &out, &len));
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* Host modules given to ludo_env_load follow ludo_runtime_add_module's
 * rules: no "ludo"/"ludo.*" name, a function list, no name twice. */
TEST_IMPL(embedder_env_host_modules_checked) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_host_module_t m[2] = {{"ludo.core", emb_funcs, NULL},
                             {"x", emb_funcs, NULL}};
  ludo_env_options_t o;
  ludo_env_t *env;
  ludo_env_options_init(&o);
  o.modules = m;
  o.nmodules = 1;
  ASSERT_ERR(ludo_env_load(rt, EMB, &o, &env), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "is reserved");
  m[0].name = "x";
  o.nmodules = 2;
  ASSERT_ERR(ludo_env_load(rt, EMB, &o, &env), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "already registered");
  m[1].funcs = NULL;
  m[1].name = "y";
  ASSERT_ERR(ludo_env_load(rt, EMB, &o, &env), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "function list");
  o.modules = NULL;
  o.nmodules = 3;
  ASSERT_ERR(ludo_env_load(rt, EMB, &o, &env), LUDO_EINVAL);
  ASSERT_STR_EQ(ludo_runtime_errmsg(rt), "EINVAL: opts->modules is NULL "
                "but opts->nmodules is 3");
  m[1].funcs = emb_funcs;
  m[1].name = NULL;
  o.modules = m;
  o.nmodules = 2;
  ASSERT_ERR(ludo_env_load(rt, EMB, &o, &env), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "opts->modules[1] has no "
                      "name");
  test_rt_free(rt);
}

/* A blocking step whose Lua sleeps, then closes its own session from a
 * host function (the deferred close): the step returns ECANCELED and the
 * session goes when it returns. The teardown used to run in the pass that
 * resumed the Lua, inside the blocking call, which then read the freed
 * session (make asan). */
TEST_IMPL(embedder_self_close_after_wait_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(emb_env(rt));
  ludo_stats_t st;
  close_self = 1;
  ASSERT_ERR(ludo_session_step(s, A("{\"mode\":\"sleephost\"}"), NULL, NULL),
             LUDO_ECANCELED);
  close_self = 0;
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.sessions, 0);
  ASSERT_UINT_EQ(st.calls, 0);
  test_rt_free(rt);
}

/* The same inside a blocking batch: the entry that closed itself reports
 * ECANCELED, the other its result, and the batch tears the session down
 * when it lets go (it read it after the free). */
TEST_IMPL(embedder_self_close_after_wait_batch) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *ss[2] = {test_open(env), test_open(env)};
  const char *acts[2] = {"{\"mode\":\"sleephost\"}", "{\"mode\":\"ok\"}"};
  size_t lens[2] = {strlen(acts[0]), strlen(acts[1])};
  ludo_stats_t st;
  ncb = 0;
  close_self = 1;
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 2, count_cb, NULL));
  close_self = 0;
  ASSERT_EQ(ncb, 2);
  ASSERT_EQ(statuses[0], LUDO_ECANCELED);
  ASSERT_EQ(statuses[1], 0);
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.sessions, 1);
  ASSERT_OK(ludo_session_step(ss[1], A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

/* A blocking ludo_script_call waits (ludo.sleep) while another session's
 * host function frees the script: the free is deferred, the call ends
 * with ECANCELED at once and the script is freed when it returns (the
 * call's loop read the freed script). */
TEST_IMPL(embedder_script_free_during_call) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s0 = test_open(emb_env(rt));
  ludo_script_t *sc;
  const char *out = NULL;
  size_t len = 0;
  int st0 = 1;
  double t0 = test_now();
  ASSERT_OK(ludo_script_open(rt, "napper", EMB, &sc));
  ASSERT_OK(ludo_script_call(sc, "nap", "[0]", 3, &out, &len));
  ASSERT_TRUE(len == 7 && memcmp(out, "\"slept\"", 7) == 0);
  script_victim = sc;
  ASSERT_OK(ludo_session_step_async(s0, A("{\"mode\":\"sleephost\"}"),
                                    async_done, &st0));
  ASSERT_ERR(ludo_script_call(sc, "nap", "[5]", 3, &out, &len),
             LUDO_ECANCELED);
  ASSERT_NULL(script_victim);
  ASSERT_DBL_LT(test_now() - t0, 4.0); /* not the whole nap */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st0, 0);
  test_rt_free(rt);
}

static void chain_closed(int status, void *ud) {
  ASSERT_EQ(status, 0);
  ++*(int *)ud;
}

static void chain_stepped(ludo_session_t *s, int status, const char *data,
                          size_t len, void *ud) {
  (void)data;
  (void)len;
  ASSERT_EQ(status, 0);
  ASSERT_OK(ludo_session_close_async(s, chain_closed, ud));
}

static void chain_opened(ludo_session_t *s, int status, void *ud) {
  ASSERT_EQ(status, 0);
  ASSERT_OK(ludo_session_step_async(s, A("{\"mode\":\"ok\"}"), chain_stepped,
                                    ud));
}

/* Closed sessions' states go to the loop, which frees a few per pass: a
 * host driving with ludo_runtime_run gets them all back before it returns
 * (it returned with the last close, and a burst's states stayed), and
 * ludo_env_free frees those a close left since (lua_bytes is 0 then, as
 * ludo_defs.h says). */
TEST_IMPL(embedder_retired_states_reclaimed_by_run) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  ludo_stats_t st;
  int i, closed = 0;
  test_options(&o);
  o.prewarm = 0; /* no pool: every Lua byte left is a session's */
  rt = test_rt_new(&o);
  env = emb_env(rt);
  for (i = 0; i < 300; i++)
    ASSERT_OK(ludo_session_open_async(env, chain_opened, &closed));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(closed, 300);
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.sessions, 0);
  ASSERT_UINT_EQ(st.prewarmed, 0);
  ASSERT_UINT_EQ(st.lua_bytes, 0);
  s = test_open(env); /* the loop ran lately: its close retires the state */
  ludo_session_close(s);
  ASSERT_OK(ludo_env_free(env));
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.lua_bytes, 0);
  test_rt_free(rt);
}

/* Completion callbacks count as calls in flight until they have run: a
 * batch entry refused with ETOOBIG (never counted: ludo_runtime_run
 * returned at once, its callback still owed and its session busy), and a
 * completed step whose delivery waits behind a time-sliced one (the pass
 * ended between the two: poll said one call in flight for two owed). */
TEST_IMPL(embedder_run_waits_for_owed_callbacks) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *ss[2];
  const char *acts[2] = {"{\"mode\":\"ok\",\"seconds\":0.000000000000001}",
                         NULL}; /* 41 bytes */
  size_t lens[2] = {strlen(acts[0]), 0};
  ludo_stats_t st;
  int polls = 0;
  test_options(&o);
  o.max_input_bytes = 40;
  o.slice_us = 2000;
  rt = test_rt_new(&o);
  env = emb_env(rt);
  ss[0] = test_open(env);
  ss[1] = test_open(env);
  ncb = 0;
  ASSERT_OK(ludo_session_step_batch_async(ss, acts, lens, 1, count_cb, NULL));
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.calls, 1);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(ncb, 1);
  ASSERT_EQ(statuses[0], LUDO_ETOOBIG);
  ASSERT_OK(ludo_session_step(ss[0], A("{\"mode\":\"ok\"}"), NULL, NULL));
  /* ss[0]'s quick step completes first; its delivery is queued behind
   * ss[1]'s start, whose count runs past the pass's slice */
  acts[0] = "{\"mode\":\"ok\"}";
  acts[1] = "{\"mode\":\"busy\",\"n\":3000000}";
  lens[0] = strlen(acts[0]);
  lens[1] = strlen(acts[1]);
  ncb = 0;
  ASSERT_OK(ludo_session_step_batch_async(ss, acts, lens, 2, count_cb, NULL));
  do {
    int n = ludo_runtime_poll(rt, 0);
    ludo_runtime_stats(rt, &st);
    ASSERT_EQ(n, (int)st.calls);
    ASSERT_EQ((int)st.calls + ncb, 2); /* owed = not yet delivered */
  } while (ncb < 2 && ++polls < 100000);
  ASSERT_EQ(statuses[0], 0);
  ASSERT_EQ(statuses[1], 0);
  ncb = 0;
  ASSERT_OK(ludo_session_step_batch_async(ss, acts, lens, 2, count_cb, NULL));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(ncb, 2);
  test_rt_free(rt);
}

static int nclosed;

static void note_closed(int status, void *ud) {
  (void)ud;
  ASSERT_EQ(status, 0);
  nclosed++;
}

/* ludo_session_close_async during a blocking step, from a host function
 * (on a session sleeping in an async step) and from before the call: the
 * step's ECANCELED and both close callbacks are held and run from the
 * next pass, never inside the blocking call (the teardown ran them
 * there). The same for a session that closes itself from its own host
 * function after a wait, during another session's blocking step. */
TEST_IMPL(embedder_close_async_callbacks_held_in_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env), *s1 = test_open(env);
  ludo_session_t *s2 = test_open(env);
  ludo_stats_t st;
  int st1 = 1;
  double t0 = test_now();
  ASSERT_OK(ludo_session_step_async(
      s1, A("{\"mode\":\"sleep\",\"seconds\":5}"), async_done, &st1));
  ASSERT_TRUE(ludo_runtime_poll(rt, 0) >= 0); /* s1 starts and sleeps */
  nclosed = 0;
  ASSERT_OK(ludo_session_close_async(s2, note_closed, NULL));
  victim = s1;
  victim_async = 1;
  victim_ccb = note_closed;
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"hostsleep\","
                                    "\"seconds\":0.1}"), NULL, NULL));
  victim_async = 0;
  victim_ccb = NULL;
  ASSERT_NULL(victim);
  ASSERT_EQ(st1, 1);     /* not inside the blocking call */
  ASSERT_EQ(nclosed, 0); /* nor these */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st1, LUDO_ECANCELED);
  ASSERT_EQ(nclosed, 2);
  ASSERT_DBL_LT(test_now() - t0, 4.0); /* s1's sleep was cancelled */
  /* a session whose async step closes it from its own host function
   * after a wait, while s0's blocking step runs the loop */
  s1 = test_open(env);
  st1 = 1;
  close_self = 1;
  ASSERT_OK(ludo_session_step_async(s1, A("{\"mode\":\"sleephost\"}"),
                                    async_done, &st1));
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"sleep\","
                                    "\"seconds\":0.1}"), NULL, NULL));
  close_self = 0;
  ASSERT_EQ(st1, 1); /* not inside the blocking call */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st1, LUDO_ECANCELED);
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.sessions, 1);
  ASSERT_UINT_EQ(st.calls, 0);
  test_rt_free(rt);
}

static ludo_session_t *opened_s;
static int open_status = 1;

static void note_opened(ludo_session_t *s, int status, void *ud) {
  (void)ud;
  opened_s = s;
  open_status = status;
}

/* An open queued before a blocking step that waits: its callback is held
 * and runs from the next pass (it ran inside the blocking call). */
TEST_IMPL(embedder_open_callback_held_in_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s0 = test_open(env);
  ludo_stats_t st;
  opened_s = NULL;
  open_status = 1;
  ASSERT_OK(ludo_session_open_async(env, note_opened, NULL));
  ASSERT_OK(ludo_session_step(s0, A("{\"mode\":\"sleep\",\"seconds\":0.05}"),
                              NULL, NULL));
  ASSERT_EQ(open_status, 1); /* not inside the blocking call */
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.calls, 1); /* still owed */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(open_status, 0);
  ASSERT_NOT_NULL(opened_s);
  ASSERT_OK(ludo_session_step(opened_s, A("{\"mode\":\"ok\"}"), NULL, NULL));
  test_rt_free(rt);
}

/* ---- jansson's allocator stays the host's ----------------------------- */

static size_t hj_allocs, hj_frees;

static void *hj_malloc(size_t n) {
  hj_allocs++;
  return malloc(n);
}

static void hj_free(void *p) {
  if (p != NULL) hj_frees++;
  free(p);
}

/* A host that gave jansson its own allocator before its first runtime
 * keeps it for its own values, made before or after ludo compiled a
 * schema (ludo routes only its schemas' trees to the session heap). The
 * compile replaced jansson's functions with ones that sent every other
 * block to malloc and free: a host's arena block reached free(). */
TEST_IMPL(embedder_jansson_allocator_kept) {
  ludo_runtime_t *rt;
  json_t *before, *after;
  size_t made;
  json_set_alloc_funcs(hj_malloc, hj_free);
  before = json_pack("{s:[i,i]}", "a", 1, 2);
  rt = test_rt_new(NULL);
  ASSERT_PTR_NE(test_env_load(rt, "examples/echo", NULL), NULL);
  test_rt_free(rt);
  made = hj_allocs;
  after = json_pack("{s:s}", "b", "text");
  ASSERT_GT(hj_allocs, made);
  json_decref(before);
  json_decref(after);
  ASSERT_EQ(hj_frees, hj_allocs);
  json_set_alloc_funcs(malloc, free);
}

static int in_blocking, closed_inside;

static void note_closed_where(int status, void *ud) {
  (void)ud;
  ASSERT_EQ(status, 0);
  if (in_blocking) closed_inside++;
  nclosed++;
}

/* A blocking batch whose first entry's host function closes a later
 * entry before that entry has started (its Lua ran inside the batch's
 * start of entry 0): the close is deferred like any close of a held
 * entry, the later entry reports ECANCELED without running, its close
 * callback runs from the loop after the batch (it was torn down at once,
 * and the batch then read and started the freed session). */
TEST_IMPL(embedder_batch_close_later_entry) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *ss[2];
  const char *acts[2] = {"{\"mode\":\"host\"}", "{\"mode\":\"ok\"}"};
  size_t lens[2] = {strlen(acts[0]), strlen(acts[1])};
  ludo_stats_t st;
  int round;
  for (round = 0; round < 2; round++) { /* close, then close_async */
    ss[0] = test_open(env);
    ss[1] = test_open(env);
    victim = ss[1];
    victim_async = round;
    victim_ccb = note_closed_where;
    nclosed = closed_inside = ncb = 0;
    in_blocking = 1;
    ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 2, count_cb, NULL));
    in_blocking = 0;
    ASSERT_NULL(victim);
    ASSERT_EQ(ncb, 2);
    ASSERT_EQ(statuses[0], 0);
    ASSERT_EQ(statuses[1], LUDO_ECANCELED);
    ASSERT_OK(ludo_runtime_run(rt));
    ASSERT_EQ(nclosed, round);
    ASSERT_EQ(closed_inside, 0);
    ludo_runtime_stats(rt, &st);
    ASSERT_UINT_EQ(st.sessions, 1);
    ASSERT_UINT_EQ(st.calls, 0);
    ludo_session_close(ss[0]);
  }
  victim_async = 0;
  victim_ccb = NULL;
  test_rt_free(rt);
}

/* A host function closes its own session with ludo_session_close_async
 * during a blocking step, and during a blocking batch: the call ends with
 * ECANCELED and the close callback runs from the loop afterwards, never
 * inside the blocking call (the teardown as the call returned ran it). */
TEST_IMPL(embedder_close_async_self_in_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = emb_env(rt);
  ludo_session_t *s = test_open(env), *ss[1];
  const char *acts[1] = {"{\"mode\":\"host\"}"};
  size_t lens[1] = {strlen(acts[0])};
  ludo_stats_t st;
  close_self_async = 1;
  victim_ccb = note_closed_where;
  nclosed = closed_inside = 0;
  in_blocking = 1;
  ASSERT_ERR(ludo_session_step(s, A("{\"mode\":\"host\"}"), NULL, NULL),
             LUDO_ECANCELED);
  in_blocking = 0;
  ASSERT_EQ(nclosed, 0);
  ASSERT_ERR(ludo_session_step(s, A("{\"mode\":\"ok\"}"), NULL, NULL),
             LUDO_ECLOSED);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(nclosed, 1);
  ss[0] = test_open(env);
  ncb = 0;
  in_blocking = 1;
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 1, count_cb, NULL));
  in_blocking = 0;
  ASSERT_EQ(ncb, 1);
  ASSERT_EQ(statuses[0], LUDO_ECANCELED);
  ASSERT_EQ(nclosed, 1);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(nclosed, 2);
  ASSERT_EQ(closed_inside, 0);
  close_self_async = 0;
  victim_ccb = NULL;
  ludo_runtime_stats(rt, &st);
  ASSERT_UINT_EQ(st.sessions, 0);
  ASSERT_UINT_EQ(st.calls, 0);
  test_rt_free(rt);
}

/* What a callback ludo_runtime_free runs may touch: every object of the
 * runtime is still alive then. */
static struct {
  ludo_session_t *s[2];
  ludo_script_t *policy;
  ludo_env_t *env;
  int ncalls, nscript, rc_other, rc_load, rc_prewarm, rc_open, rc_script;
  int rc_close_async;
} fr;

static void free_step_cb(ludo_session_t *s, int status, const char *data,
                         size_t len, void *ud) {
  ludo_env_t *env;
  ludo_script_t *sc;
  (void)data;
  (void)len;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  fr.ncalls++;
  /* the other session, whichever went first */
  fr.rc_other = ludo_session_step_async(s == fr.s[0] ? fr.s[1] : fr.s[0],
                                        A("{\"mode\":\"ok\"}"),
                                        free_step_cb, NULL);
  fr.rc_close_async = ludo_session_close_async(s == fr.s[0] ? fr.s[1]
                                                            : fr.s[0],
                                               note_closed, NULL);
  ludo_session_close(s == fr.s[0] ? fr.s[1] : fr.s[0]); /* left to free */
  ludo_script_free(fr.policy); /* freed with the rest */
  fr.rc_load = ludo_env_load(ludo_session_get_data(s), EMB, NULL, &env);
  fr.rc_prewarm = ludo_env_prewarm(fr.env, 2);
  fr.rc_script = ludo_script_open(ludo_session_get_data(s), "ludo.policy",
                                  NULL, &sc);
}

static void free_script_cb(ludo_script_t *sc, int status, const char *data,
                           size_t len, void *ud) {
  (void)data;
  (void)len;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  fr.nscript++;
  fr.rc_open = ludo_session_open_async(fr.env, note_opened, NULL);
  ludo_session_close(fr.s[0]);
  ludo_script_free(sc);
}

/* ludo_runtime_free with calls queued on two sessions and a script: each
 * callback (ECANCELED) starts a call on the other session, closes it,
 * frees the script, loads an environment, prewarms, opens: each is
 * refused with ECLOSED or left to the free, and nothing it touches was
 * freed yet (a step on a freed session, a double free of the script). */
TEST_IMPL(embedder_free_callbacks_find_objects_alive) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  memset(&fr, 0, sizeof fr);
  fr.env = emb_env(rt);
  fr.s[0] = test_open(fr.env);
  fr.s[1] = test_open(fr.env);
  ludo_session_set_data(fr.s[0], rt);
  ludo_session_set_data(fr.s[1], rt);
  ASSERT_OK(ludo_script_open(rt, "ludo.policy", NULL, &fr.policy));
  ASSERT_OK(ludo_session_step_async(fr.s[0], A("{\"mode\":\"ok\"}"),
                                    free_step_cb, NULL));
  ASSERT_OK(ludo_session_step_async(fr.s[1], A("{\"mode\":\"ok\"}"),
                                    free_step_cb, NULL));
  ASSERT_OK(ludo_script_call_async(fr.policy, "reset", "[1, {}]", 7,
                                   free_script_cb, NULL));
  nclosed = 0;
  open_status = 1;
  test_rt_free(rt); /* the harness's allocator checks for leaks */
  ASSERT_EQ(fr.ncalls, 2);
  ASSERT_EQ(fr.nscript, 1);
  ASSERT_EQ(fr.rc_other, LUDO_ECLOSED);
  ASSERT_EQ(fr.rc_close_async, LUDO_ECLOSED);
  ASSERT_EQ(nclosed, 0);
  ASSERT_EQ(fr.rc_load, LUDO_ECLOSED);
  ASSERT_EQ(fr.rc_prewarm, LUDO_ECLOSED);
  ASSERT_EQ(fr.rc_script, LUDO_ECLOSED);
  ASSERT_EQ(fr.rc_open, LUDO_ECLOSED);
  ASSERT_EQ(open_status, 1);
}

/* ludo_session_collect with a call queued (issued, not yet run): EBUSY,
 * as the call counts in flight (it ran a full collection). */
TEST_IMPL(embedder_collect_busy_while_queued) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(emb_env(rt));
  int st = 1;
  ASSERT_OK(ludo_session_collect(s));
  ASSERT_OK(ludo_session_step_async(s, A("{\"mode\":\"ok\"}"), async_done,
                                    &st));
  ASSERT_ERR(ludo_session_collect(s), LUDO_EBUSY);
  ASSERT_ERR(ludo_session_set_strict(s, 1), LUDO_EBUSY);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st, 0);
  ASSERT_OK(ludo_session_collect(s));
  test_rt_free(rt);
}

static char batch_msg[256];

static void msg_cb(size_t i, ludo_session_t *s, int status, const char *data,
                   size_t len, void *ud) {
  count_cb(i, s, status, data, len, ud);
  snprintf(batch_msg, sizeof batch_msg, "%.*s", (int)len, data);
}

/* A blocking batch's entry over max_input_bytes gets its explanatory
 * message, also after a successful call on the session (the batch gave
 * bare "ETOOBIG": the stale state of the previous call hid it). */
TEST_IMPL(embedder_batch_toobig_message) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *ss[1];
  const char *acts[1] = {"{\"mode\":\"ok\",\"seconds\":0.0000000001}"};
  size_t lens[1] = {strlen(acts[0])};
  test_options(&o);
  o.max_input_bytes = 20;
  rt = test_rt_new(&o);
  ss[0] = test_open(emb_env(rt));
  ASSERT_OK(ludo_session_step(ss[0], A("{\"mode\":\"ok\"}"), NULL, NULL));
  ncb = 0;
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 1, msg_cb, NULL));
  ASSERT_EQ(ncb, 1);
  ASSERT_EQ(statuses[0], LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(batch_msg, "max_input_bytes");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(ss[0]), "max_input_bytes");
  test_rt_free(rt);
}

/* ludo_json_parse: the events in document order with escapes undone, a
 * malformed text named with its place, a callback that stops the parse,
 * the depth limit, and the arguments checked. */
typedef struct {
  char log[256];
  int stop_at_key;
} sax_rec_t;

static void sax_put(sax_rec_t *r, const char *what) {
  size_t n = strlen(r->log);
  snprintf(r->log + n, sizeof r->log - n, "%s;", what);
}
static int sax_null(void *ud) { sax_put(ud, "null"); return 0; }
static int sax_bool(void *ud, int v) {
  sax_put(ud, v ? "true" : "false");
  return 0;
}
static int sax_int(void *ud, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "i%lld", (long long)v);
  sax_put(ud, b);
  return 0;
}
static int sax_real(void *ud, double v) {
  char b[32];
  snprintf(b, sizeof b, "r%g", v);
  sax_put(ud, b);
  return 0;
}
static int sax_str(void *ud, const char *s, size_t n) {
  char b[64];
  snprintf(b, sizeof b, "s%.*s", (int)n, s);
  sax_put(ud, b);
  return 0;
}
static int sax_key(void *ud, const char *s, size_t n) {
  sax_rec_t *r = ud;
  char b[64];
  snprintf(b, sizeof b, "k%.*s", (int)n, s);
  sax_put(r, b);
  return r->stop_at_key;
}
static int sax_bo(void *ud) { sax_put(ud, "{"); return 0; }
static int sax_eo(void *ud) { sax_put(ud, "}"); return 0; }
static int sax_ba(void *ud) { sax_put(ud, "["); return 0; }
static int sax_ea(void *ud) { sax_put(ud, "]"); return 0; }

TEST_IMPL(embedder_json_parse) {
  static const ludo_json_cb_t cb = {sax_null, sax_bool, sax_int, sax_real,
                                    sax_str,  sax_key,  sax_bo,  sax_eo,
                                    sax_ba,   sax_ea};
  const char *text = "{\"a\\u00e9\":[1,2.5,true,null,\"x\\ny\"]}";
  ludo_json_error_t err;
  sax_rec_t r;
  memset(&r, 0, sizeof r);
  ASSERT_OK(ludo_json_parse(text, strlen(text), -1, &cb, &r, &err));
  ASSERT_STR_EQ(r.log, "{;ka\xc3\xa9;[;i1;r2.5;true;null;sx\ny;];};");
  memset(&r, 0, sizeof r);
  ASSERT_ERR(ludo_json_parse("[1,,2]", 6, -1, &cb, &r, &err), LUDO_EPARSE);
  ASSERT_EQ(err.offset, 3);
  ASSERT_EQ(err.column, 4);
  ASSERT_TRUE(err.msg[0] != '\0');
  ASSERT_ERR(ludo_json_parse("1e999", 5, -1, &cb, &r, &err), LUDO_EPARSE);
  memset(&r, 0, sizeof r);
  r.stop_at_key = 7;
  ASSERT_ERR(ludo_json_parse("{\"k\":1}", 7, -1, &cb, &r, NULL),
             LUDO_ECANCELED);
  ASSERT_STR_EQ(r.log, "{;kk;");
  ASSERT_ERR(ludo_json_parse("[[1]]", 5, 1, &cb, &r, &err), LUDO_EPARSE);
  ASSERT_OK(ludo_json_parse("[[1]]", 5, 2, &cb, &r, &err));
  ASSERT_ERR(ludo_json_parse(NULL, 1, -1, &cb, &r, &err), LUDO_EINVAL);
  ASSERT_ERR(ludo_json_parse("1", 1, -1, NULL, &r, &err), LUDO_EINVAL);
  ASSERT_ERR(ludo_json_parse(NULL, 0, -1, &cb, &r, &err), LUDO_EPARSE);
}
