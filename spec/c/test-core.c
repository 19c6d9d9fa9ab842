/* test-core.c - the core: a loop the host owns, the run queue, poll with a
 * time budget (time-sliced Lua), asynchronous open/close, the pool of a
 * blocking-only host, and the re-entrancy rule (spec/fixtures/c/reenter
 * calls back into ludo through the host module "reenter"). */
#include "helpers.h"

#include <lauxlib.h>
#include <lua.h>
#include <string.h>
#include <uv.h>

#define REENTER "spec/fixtures/c/reenter"

/* What the host functions act on. */
typedef struct host_s {
  ludo_session_t *other;   /* another session of the runtime */
  ludo_env_t *cold_env;    /* an environment with an empty pool */
  ludo_runtime_t *rt;
  int count;
  int rc[4];               /* codes the host function saw */
  char msg[512];           /* and a message */
} host_t;

static host_t host;

static int push_rc(lua_State *L, int rc) {
  lua_pushinteger(L, rc);
  return 1;
}

/* count(): counts calls. */
static int h_count(lua_State *L) { return push_rc(L, ++host.count); }

/* step_other(): a blocking call from inside a host function. */
static int h_step_other(lua_State *L) {
  const char *out;
  size_t len;
  host.rc[0] = ludo_session_step(host.other, J("{\"op\":\"count\"}"), &out,
                                 &len);
  host.rc[1] = ludo_runtime_poll(host.rt, 0);
  return push_rc(L, host.rc[0]);
}

static int call_count;
static void count_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  (void)s; (void)data; (void)len;
  call_count++;
  *(int *)ud = status;
}

static int async_status = 1;

/* step_other_async(): a non-blocking call from inside: allowed. */
static int h_step_other_async(lua_State *L) {
  host.rc[0] = ludo_session_step_async(host.other, J("{\"op\":\"count\"}"),
                                       count_cb, &async_status);
  return push_rc(L, host.rc[0]);
}

/* step_self_async(): a call into the running session: EBUSY. */
static int h_step_self_async(lua_State *L) {
  host.rc[0] = ludo_session_step_async(ludo_session_from_lua(L),
                                       J("{\"op\":\"count\"}"), count_cb,
                                       &async_status);
  return push_rc(L, host.rc[0]);
}

/* close_self(): closes the session that runs this function. */
static int h_close_self(lua_State *L) {
  ludo_session_close(ludo_session_from_lua(L));
  return push_rc(L, 0);
}

/* open_cold(): builds a session state from inside (its own Lua runs). */
static int h_open_cold(lua_State *L) {
  ludo_session_t *s = NULL;
  host.rc[0] = ludo_session_open(host.cold_env, &s);
  if (s != NULL) ludo_session_close(s);
  return push_rc(L, host.rc[0]);
}

/* load_spin(): loads a module whose top level never ends. */
static int h_load_spin(lua_State *L) {
  ludo_env_t *e = NULL;
  host.rc[0] = ludo_env_load(host.rt, "spec/fixtures/c/loadspin", NULL, &e);
  snprintf(host.msg, sizeof host.msg, "%s", ludo_runtime_errmsg(host.rt));
  if (e != NULL) ludo_env_free(e);
  return push_rc(L, host.rc[0]);
}

#define HOST_FN(f) ((int (*)(void *))(void (*)(void))(f))

static const ludo_host_func_t funcs[] = {
    {"count", HOST_FN(h_count)},
    {"step_other", HOST_FN(h_step_other)},
    {"step_other_async", HOST_FN(h_step_other_async)},
    {"step_self_async", HOST_FN(h_step_self_async)},
    {"close_self", HOST_FN(h_close_self)},
    {"open_cold", HOST_FN(h_open_cold)},
    {"load_spin", HOST_FN(h_load_spin)},
    {NULL, NULL}};

static ludo_env_t *load_reenter(ludo_runtime_t *rt) {
  static ludo_host_module_t m = {"reenter", funcs, NULL};
  ludo_env_options_t o;
  ludo_env_options_init(&o);
  o.modules = &m;
  o.nmodules = 1;
  return test_env_load(rt, REENTER, &o);
}

static int step(ludo_session_t *s, const char *json) {
  const char *out;
  size_t len;
  return ludo_session_step(s, json, strlen(json), &out, &len);
}

/* ---- the host's loop ------------------------------------------------- */

typedef struct loop_host_s {
  int ticks, accepted, calls, status;
  uv_loop_t *loop;
} loop_host_t;

static void tick(uv_timer_t *t) { ((loop_host_t *)t->data)->ticks++; }

static void on_conn(uv_stream_t *srv, int status) {
  (void)status;
  ((loop_host_t *)srv->data)->accepted++;
}

static void loop_step_cb(ludo_session_t *s, int status, const char *data,
                         size_t len, void *ud) {
  loop_host_t *h = ud;
  (void)s; (void)data; (void)len;
  h->calls++;
  h->status = status;
}

/* The runtime lives on the host's loop next to the host's timer and TCP
 * server: completions come from the host's uv_run alone, and after
 * ludo_runtime_free and one more uv_run the host's handles are untouched
 * and uv_loop_close succeeds once the host closes them. */
TEST_IMPL(core_borrowed_loop) {
  uv_loop_t loop;
  uv_timer_t timer;
  uv_tcp_t server;
  struct sockaddr_in addr;
  loop_host_t h = {0, 0, 0, 1, &loop};
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s;
  int i;

  ASSERT_OK(uv_loop_init(&loop));
  uv_timer_init(&loop, &timer);
  timer.data = &h;
  uv_timer_start(&timer, tick, 1, 1);
  uv_tcp_init(&loop, &server);
  server.data = &h;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  ASSERT_OK(uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0));
  ASSERT_OK(uv_listen((uv_stream_t *)&server, 8, on_conn));

  test_options(&o);
  o.loop = &loop;
  rt = test_rt_new(&o);
  env = test_env_load(rt, "examples/echo", NULL);
  s = test_open(env);
  ASSERT_OK(ludo_session_reset_async(s, NULL, 0, loop_step_cb, &h));
  ASSERT_EQ(h.calls, 0);
  for (i = 0; i < 1000 && h.calls == 0; i++) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(h.calls, 1);
  ASSERT_OK(h.status);
  ASSERT_OK(ludo_session_step_async(s, J("{\"message\":\"hi\"}"),
                                    loop_step_cb, &h));
  for (i = 0; i < 1000 && h.calls == 1; i++) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(h.calls, 2);
  ASSERT_OK(h.status);

  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_NOWAIT);
  /* Every byte of ludo's is back; the host's handles are still running. */
  ASSERT_EQ(test_heap.live, 0);
  ASSERT_EQ(test_heap.blocks, 0);
  ASSERT_TRUE(uv_is_active((uv_handle_t *)&timer));
  ASSERT_TRUE(uv_is_active((uv_handle_t *)&server));
  i = h.ticks;
  while (h.ticks < i + 2) uv_run(&loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&timer, NULL);
  uv_close((uv_handle_t *)&server, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}

/* One runtime per host loop: a second on the same loop is refused with
 * EBUSY (its blocking calls would run the loop from inside the first's
 * callbacks); once the first is freed, the loop takes a new one. */
TEST_IMPL(core_one_runtime_per_loop) {
  uv_loop_t loop;
  ludo_options_t o;
  ludo_runtime_t *rt, *rt2 = NULL;
  ASSERT_OK(uv_loop_init(&loop));
  test_options(&o);
  o.loop = &loop;
  rt = test_rt_new(&o);
  ASSERT_ERR(ludo_runtime_new(&rt2, &o), LUDO_EBUSY);
  ASSERT_TRUE(rt2 == NULL);
  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_DEFAULT);
  rt = test_rt_new(&o);
  test_open(test_env_load(rt, "examples/echo", NULL));
  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(test_heap.live, 0);
  ASSERT_OK(uv_loop_close(&loop));
}

/* ---- poll ------------------------------------------------------------ */

static int chain_left;
static void chain_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  (void)data; (void)len;
  call_count++;
  *(int *)ud = status;
  if (--chain_left > 0)
    ASSERT_OK(ludo_session_step_async(s, J("{\"op\":\"count\"}"), chain_cb,
                                      ud));
}

/* A non-blocking call runs no Lua before the loop does, and a callback
 * that starts the next call is delivered in the next poll, not this one. */
TEST_IMPL(core_async_on_the_loop) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(load_reenter(rt));
  int status = 1, i;

  memset(&host, 0, sizeof host);
  call_count = 0;
  chain_left = 5;
  ASSERT_OK(ludo_session_step_async(s, J("{\"op\":\"count\"}"), chain_cb,
                                    &status));
  ASSERT_EQ(host.count, 0);
  for (i = 1; i <= 5; i++) {
    ASSERT_GE(ludo_runtime_poll(rt, 0), 0);
    ASSERT_EQ(call_count, i);
    ASSERT_EQ(host.count, i);
    ASSERT_OK(status);
  }
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(call_count, 5);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Lua that runs 300 ms is sliced by polls of 1 ms: many polls return with
 * the call still in flight, and it completes with its result. */
TEST_IMPL(core_poll_budget_slices) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(load_reenter(rt));
  int status = 1, polls = 0;
  double t0;

  call_count = 0;
  ASSERT_OK(ludo_session_step_async(s, J("{\"op\":\"spin_ms\",\"ms\":300}"),
                                    count_cb, &status));
  t0 = test_now();
  while (call_count == 0 && test_now() - t0 < 10) {
    int n = ludo_runtime_poll(rt, 1000);
    ASSERT_GE(n, 0);
    polls++;
  }
  ASSERT_EQ(call_count, 1);
  ASSERT_OK(status);
  ASSERT_GE(polls, 20);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* ---- asynchronous open and close ------------------------------------- */

static ludo_session_t *opened;
static int open_calls, open_status = 1, close_calls, close_status = 1;

static void open_cb(ludo_session_t *s, int status, void *ud) {
  (void)ud;
  open_calls++;
  open_status = status;
  opened = s;
}

static void close_cb(int status, void *ud) {
  (void)ud;
  close_calls++;
  close_status = status;
}

TEST_IMPL(core_async_open_close) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = load_reenter(rt);
  ludo_stats_t st;
  int status = 1;

  call_count = 0;
  ASSERT_OK(ludo_session_open_async(env, open_cb, NULL));
  ASSERT_EQ(open_calls, 0);
  ASSERT_ERR(ludo_env_free(env), LUDO_EBUSY); /* an open is pending */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(open_calls, 1);
  ASSERT_OK(open_status);
  ASSERT_NOT_NULL(opened);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 1);

  /* A close while a call is queued: the call ends with ECANCELED, then
   * the close completes; new calls are refused at once. */
  ASSERT_OK(ludo_session_step_async(opened, J("{\"op\":\"count\"}"),
                                    count_cb, &status));
  ASSERT_OK(ludo_session_close_async(opened, close_cb, NULL));
  ASSERT_ERR(ludo_session_close_async(opened, close_cb, NULL), LUDO_ECLOSED);
  ASSERT_ERR(step(opened, "{\"op\":\"count\"}"), LUDO_ECLOSED);
  ASSERT_EQ(close_calls, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(call_count, 1);
  ASSERT_ERR(status, LUDO_ECANCELED);
  ASSERT_EQ(close_calls, 1);
  ASSERT_OK(close_status);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 0);
  ASSERT_EQ(st.calls, 0);
  test_rt_free(rt);
}

/* A host that never runs the loop still opens from the pool. */
TEST_IMPL(core_pool_blocking_host) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_stats_t st;
  int i;
  test_options(&o);
  o.prewarm = 2;
  rt = test_rt_new(&o);
  env = test_env_load(rt, "examples/echo", NULL);
  ASSERT_OK(ludo_env_prewarm(env, 2));
  for (i = 0; i < 5; i++) {
    ludo_session_t *s = test_open(env);
    ASSERT_OK(ludo_runtime_stats(rt, &st));
    ASSERT_EQ(st.prewarmed, 1);
    ludo_session_close(s);
    ASSERT_OK(ludo_runtime_stats(rt, &st));
    ASSERT_EQ(st.prewarmed, 2);
  }
  test_rt_free(rt);
}

/* ---- re-entrancy ----------------------------------------------------- */

/* Blocking calls and polls from inside a host function return EBUSY; a
 * non-blocking call on another session is fine; a call into the running
 * session is EBUSY. */
TEST_IMPL(reenter_blocking_ebusy) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = load_reenter(rt);
  ludo_session_t *a = test_open(env), *b = test_open(env);

  memset(&host, 0, sizeof host);
  host.other = b;
  host.rt = rt;
  ASSERT_OK(step(a, "{\"op\":\"step_other\"}"));
  ASSERT_ERR(host.rc[0], LUDO_EBUSY);
  ASSERT_ERR(host.rc[1], LUDO_EBUSY);
  ASSERT_EQ(host.count, 0);

  call_count = 0;
  async_status = 1;
  ASSERT_OK(step(a, "{\"op\":\"step_other_async\"}"));
  ASSERT_OK(host.rc[0]);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(call_count, 1);
  ASSERT_OK(async_status);
  ASSERT_EQ(host.count, 1);

  ASSERT_OK(step(a, "{\"op\":\"step_self_async\"}"));
  ASSERT_ERR(host.rc[0], LUDO_EBUSY);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(call_count, 1);
  ludo_session_close(a);
  ludo_session_close(b);
  test_rt_free(rt);
}

/* Lua run from inside a host function (a cold open builds a state and
 * runs its module) has its own budget and leaves the caller's alone: the
 * caller, spinning afterwards, still ends with ETIMEOUT. */
TEST_IMPL(reenter_outer_budget) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *a;
  test_options(&o);
  o.cpu_budget_ms = 200;
  o.prewarm = 0;
  rt = test_rt_new(&o);
  memset(&host, 0, sizeof host);
  host.cold_env = test_env_load(rt, "examples/echo", NULL);
  ASSERT_OK(ludo_env_prewarm(host.cold_env, 0));
  a = test_open(load_reenter(rt));
  ASSERT_ERR(step(a, "{\"op\":\"open_cold\",\"spin\":true}"), LUDO_ETIMEOUT);
  ASSERT_OK(host.rc[0]);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(a), "ETIMEOUT");
  /* The session stays usable. */
  ASSERT_OK(step(a, "{\"op\":\"count\"}"));
  ludo_session_close(a);
  test_rt_free(rt);
}

/* Lua run from inside a host function that the caller's budget stops
 * (the caller spun most of it first) says so: not that it exceeded a
 * budget of its own, which it did not reach. */
TEST_IMPL(reenter_inner_stopped_by_outer) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *a;
  test_options(&o);
  o.cpu_budget_ms = 400;
  rt = test_rt_new(&o);
  memset(&host, 0, sizeof host);
  host.rt = rt;
  a = test_open(load_reenter(rt));
  ASSERT_ERR(step(a, "{\"op\":\"load_spin\",\"pre_ms\":300}"),
             LUDO_ETIMEOUT);
  ASSERT_ERR(host.rc[0], LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(host.msg, "ETIMEOUT: the call was stopped when the "
                      "budget of the call it ran inside");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(a), "exceeded its CPU budget");
  ludo_session_close(a);
  test_rt_free(rt);
}

/* A host function that closes its own session: the close is deferred, the
 * session's Lua stops at once (even in an endless loop), the call ends
 * with ECANCELED and the session is gone. */
TEST_IMPL(reenter_close_self) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = load_reenter(rt);
  ludo_session_t *a = test_open(env), *b = test_open(env);
  ludo_stats_t st;
  int status = 1;

  ASSERT_ERR(step(a, "{\"op\":\"close_self\",\"spin\":true}"),
             LUDO_ECANCELED);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 1);

  call_count = 0;
  ASSERT_OK(ludo_session_step_async(b, J("{\"op\":\"close_self\"}"),
                                    count_cb, &status));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(call_count, 1);
  ASSERT_ERR(status, LUDO_ECANCELED);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 0);
  ASSERT_EQ(st.calls, 0);
  test_rt_free(rt);
}

/* Freeing the runtime with an open and a close still queued completes
 * both: the open with ECANCELED, the close normally. */
TEST_IMPL(core_free_with_pending_lifecycle) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = load_reenter(rt);
  ludo_session_t *s = test_open(env);
  open_calls = close_calls = 0;
  ASSERT_OK(ludo_session_open_async(env, open_cb, NULL));
  ASSERT_OK(ludo_session_close_async(s, close_cb, NULL));
  test_rt_free(rt);
  ASSERT_EQ(open_calls, 1);
  ASSERT_ERR(open_status, LUDO_ECANCELED);
  ASSERT_EQ(close_calls, 1);
}

/* ---- batched steps --------------------------------------------------- */

typedef struct batch_rec_s {
  int n;
  size_t idx[8];
  int status[8];
  char data[8][256];
} batch_rec_t;

static void batch_rec_cb(size_t i, ludo_session_t *s, int status,
                         const char *data, size_t len, void *ud) {
  batch_rec_t *r = ud;
  (void)s;
  r->idx[r->n] = i;
  r->status[r->n] = status;
  snprintf(r->data[r->n], sizeof r->data[0], "%.*s", (int)len, data);
  r->n++;
}

/* A blocking batch calls back once per index, in order; a session that
 * cannot step gets its own code and the rest of the batch still runs. */
TEST_IMPL(batch_blocking) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *a = test_open(env), *b = test_open(env);
  ludo_session_t *c = test_open(env);
  ludo_session_t *ss[4] = {a, b, a, c};
  const char *acts[4] = {"{\"message\":\"A\"}", "{\"message\":\"B\"}",
                         "{\"message\":\"A2\"}", "{\"message\":7}"};
  size_t lens[4];
  batch_rec_t r;
  const char *out;
  size_t len;
  int i;
  for (i = 0; i < 4; i++) lens[i] = strlen(acts[i]);
  ASSERT_OK(ludo_session_reset(a, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_reset(b, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_reset(c, NULL, 0, &out, &len));
  memset(&r, 0, sizeof r);
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 4, batch_rec_cb, &r));
  ASSERT_EQ(r.n, 4);
  for (i = 0; i < 4; i++) ASSERT_EQ(r.idx[i], i);
  ASSERT_OK(r.status[0]);
  ASSERT_STR_CONTAINS(r.data[0], "\"echoed_message\":\"A\"");
  ASSERT_OK(r.status[1]);
  ASSERT_STR_CONTAINS(r.data[1], "\"echoed_message\":\"B\"");
  ASSERT_ERR(r.status[2], LUDO_EINVAL); /* a twice in one batch */
  ASSERT_ERR(r.status[3], LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(r.data[3], "message");
  /* The sessions step on normally afterwards. */
  ASSERT_OK(ludo_session_step(a, J("{\"message\":\"again\"}"), &out, &len));
  ludo_session_close(a);
  ludo_session_close(b);
  ludo_session_close(c);
  test_rt_free(rt);
}

/* A blocking batch's refusals say what was wrong, and a session given
 * twice is told apart even when its first entry was refused (over
 * max_input_bytes): the second gets EINVAL, and the first keeps its own
 * message. A batch of more entries than memory can count is ENOMEM. */
TEST_IMPL(batch_blocking_refusals_named) {
  ludo_options_t o;
  ludo_runtime_t *rt, *rt2;
  ludo_session_t *a, *other, *ss[4];
  const char *acts[4] = {"{\"message\":\"far too long for the limit\"}",
                         "{\"message\":\"A\"}", "{\"message\":\"B\"}",
                         "{\"message\":\"C\"}"};
  size_t lens[4];
  batch_rec_t r;
  const char *out;
  size_t len;
  int i;
  test_options(&o);
  o.max_input_bytes = 24;
  rt = test_rt_new(&o);
  rt2 = test_rt_new(NULL);
  a = test_open(test_env_load(rt, "examples/echo", NULL));
  other = test_open(test_env_load(rt2, "examples/echo", NULL));
  ASSERT_OK(ludo_session_reset(a, NULL, 0, &out, &len));
  ss[0] = a;
  ss[1] = a;
  ss[2] = NULL;
  ss[3] = other;
  for (i = 0; i < 4; i++) lens[i] = strlen(acts[i]);
  memset(&r, 0, sizeof r);
  ASSERT_OK(ludo_session_step_batch(ss, acts, lens, 4, batch_rec_cb, &r));
  ASSERT_EQ(r.n, 4);
  ASSERT_ERR(r.status[0], LUDO_ETOOBIG);
  ASSERT_STR_CONTAINS(r.data[0], "max_input_bytes");
  ASSERT_ERR(r.status[1], LUDO_EINVAL);
  ASSERT_STR_EQ(r.data[1], "EINVAL: the session is given twice in the batch");
  ASSERT_ERR(r.status[2], LUDO_EINVAL);
  ASSERT_STR_EQ(r.data[2], "EINVAL: the session is NULL");
  ASSERT_ERR(r.status[3], LUDO_EINVAL);
  ASSERT_STR_EQ(r.data[3], "EINVAL: the session is another runtime's");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(a), "max_input_bytes");
  ASSERT_ERR(ludo_session_step_batch(ss, acts, lens, SIZE_MAX, batch_rec_cb,
                                     &r), LUDO_ENOMEM);
  ASSERT_OK(ludo_session_step(a, J("{\"message\":\"on\"}"), &out, &len));
  ludo_session_close(a);
  ludo_session_close(other);
  ludo_runtime_free(rt2); /* test_rt_free counts every runtime's bytes */
  test_rt_free(rt);
}

/* A non-blocking batch queues every step; results come from the loop,
 * and steps that wait overlap. A busy session refuses the whole batch. */
TEST_IMPL(batch_async) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = load_reenter(rt);
  ludo_session_t *ss[3] = {test_open(env), test_open(env), test_open(env)};
  const char *acts[3] = {"{\"op\":\"count\"}", "{\"op\":\"count\"}",
                         "{\"op\":\"count\"}"};
  size_t lens[3] = {14, 14, 14};
  batch_rec_t r;
  int status = 1, i;
  memset(&r, 0, sizeof r);
  memset(&host, 0, sizeof host);
  ASSERT_OK(ludo_session_step_batch_async(ss, acts, lens, 3, batch_rec_cb,
                                          &r));
  ASSERT_EQ(r.n, 0);
  ASSERT_EQ(host.count, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(r.n, 3);
  ASSERT_EQ(host.count, 3);
  for (i = 0; i < 3; i++) ASSERT_OK(r.status[i]);
  ASSERT_OK(ludo_session_step_async(ss[1], J("{\"op\":\"count\"}"),
                                    count_cb, &status));
  ASSERT_ERR(ludo_session_step_batch_async(ss, acts, lens, 3, batch_rec_cb,
                                           &r), LUDO_EBUSY);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(r.n, 3);
  for (i = 0; i < 3; i++) ludo_session_close(ss[i]);
  test_rt_free(rt);
}
