/* test-async.c - the non-blocking path: *_async calls driven by
 * ludo_runtime_poll() or ludo_runtime_run(). Every test counts callbacks
 * exactly and checks that none runs from inside the *_async call that
 * started it. */
#include "helpers.h"

#include <stdio.h>
#include <unistd.h>

#define SLEEPY "spec/fixtures/c/sleepy"
#define SLEEP_S 0.1
#define SLEEP_ACTION "{\"seconds\":0.1}"

/* What one callback saw. */
typedef struct call_s {
  int calls;
  int status;
  char data[1024];
  ludo_session_t *seen;
  void (*then)(struct call_s *c, ludo_session_t *s); /* optional */
  void *arg;
  int n;
} call_t;

static int in_async;        /* 1 while a *_async function runs */
static int sync_violations; /* callbacks run from inside one */

static void record_cb(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud) {
  call_t *c = ud;
  if (in_async) sync_violations++;
  c->calls++;
  c->status = status;
  c->seen = s;
  snprintf(c->data, sizeof c->data, "%.*s", (int)len, data ? data : "");
  if (c->then) c->then(c, s);
}

static int step_async(ludo_session_t *s, const char *json, call_t *c) {
  int rc;
  in_async = 1;
  rc = ludo_session_step_async(s, json, strlen(json), record_cb, c);
  in_async = 0;
  return rc;
}

static int reset_async(ludo_session_t *s, const char *json, call_t *c) {
  int rc;
  in_async = 1;
  rc = ludo_session_reset_async(s, json, json ? strlen(json) : 0, record_cb,
                                c);
  in_async = 0;
  return rc;
}

static int state_async(ludo_session_t *s, call_t *c) {
  int rc;
  in_async = 1;
  rc = ludo_session_state_async(s, record_cb, c);
  in_async = 0;
  return rc;
}

static void blocking_reset(ludo_session_t *s) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
}

static unsigned calls_in_flight(ludo_runtime_t *rt) {
  ludo_stats_t st;
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  return st.calls;
}

/* A call that never waits still completes from poll, not from the
 * *_async function. */
TEST_IMPL(async_not_synchronous) {
  ludo_runtime_t *rt;
  ludo_session_t *s = test_echo_session(&rt);
  call_t r = {0}, st = {0}, c = {0};

  ASSERT_OK(reset_async(s, "{\"episode_id\":\"async-1\"}", &r));
  ASSERT_EQ(r.calls, 0);
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(r.calls, 1);
  ASSERT_OK(r.status);
  ASSERT_PTR_EQ(r.seen, s);
  ASSERT_STR_EQ(JSTR(JPARSE(r.data, strlen(r.data)),
                     "observation/echoed_message"),
                "Echo environment ready!");

  ASSERT_OK(step_async(s, "{\"message\":\"hey\"}", &c));
  ASSERT_EQ(c.calls, 0);
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(c.calls, 1);
  ASSERT_OK(c.status);
  ASSERT_EQ(JINT(JPARSE(c.data, strlen(c.data)),
                 "observation/message_length"), 3);

  ASSERT_OK(state_async(s, &st));
  ASSERT_EQ(st.calls, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(st.calls, 1);
  ASSERT_STR_EQ(JSTR(JPARSE(st.data, strlen(st.data)), "episode_id"),
                "async-1");

  /* An error arrives through the callback too, with the message. */
  c.calls = 0;
  ASSERT_OK(step_async(s, "{\"message\":1}", &c));
  ASSERT_EQ(c.calls, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(c.calls, 1);
  ASSERT_ERR(c.status, LUDO_ESCHEMA);
  ASSERT_STR_CONTAINS(c.data, "action.message");

  /* Nothing more arrives. */
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(r.calls + st.calls + c.calls, 3);
  ASSERT_EQ(sync_violations, 0);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Starts a sleeping step on `n` sessions. */
static void start_sleepers(ludo_session_t **s, call_t *c, int n) {
  int i;
  for (i = 0; i < n; i++) {
    char action[64];
    snprintf(action, sizeof action, "{\"seconds\":%g,\"tag\":\"t%d\"}",
             SLEEP_S, i);
    ASSERT_OK(step_async(s[i], action, &c[i]));
  }
  for (i = 0; i < n; i++) ASSERT_EQ(c[i].calls, 0);
}

/* Checks each sleeper's one callback, and that their waits overlapped:
 * the latest start (ludo.now inside the session) came before the earliest
 * finish. Serial waits could not, however fast or loaded the host: this
 * proves concurrency without a bound on wall time. */
static void check_sleepers(ludo_session_t **s, call_t *c, int n) {
  double latest_start = 0.0, earliest_finish = 0.0;
  int i;
  for (i = 0; i < n; i++) {
    char tag[16];
    json_t *r;
    double start, finish;
    ASSERT_EQ(c[i].calls, 1);
    ASSERT_OK(c[i].status);
    ASSERT_PTR_EQ(c[i].seen, s[i]);
    r = JPARSE(c[i].data, strlen(c[i].data));
    snprintf(tag, sizeof tag, "t%d", i);
    ASSERT_STR_EQ(JSTR(r, "observation/tag"), tag);
    ASSERT_EQ(JINT(r, "observation/count"), 1);
    start = JNUM(r, "observation/start");
    finish = JNUM(r, "observation/finish");
    ASSERT_DBL_GE(finish - start, SLEEP_S - 0.002);
    if (i == 0 || start > latest_start) latest_start = start;
    if (i == 0 || finish < earliest_finish) earliest_finish = finish;
  }
  ASSERT_DBL_LT(latest_start, earliest_finish);
  ASSERT_EQ(sync_violations, 0);
}

/* Three sessions sleeping at once, driven by poll from a frame loop: the
 * sleeps overlap (check_sleepers). */
TEST_IMPL(async_poll_interleaves) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_session_t *s[3];
  call_t c[3] = {{0}};
  int i, frames = 0, inflight;

  for (i = 0; i < 3; i++) {
    s[i] = test_open(env);
    blocking_reset(s[i]);
  }
  start_sleepers(s, c, 3);
  ASSERT_EQ(calls_in_flight(rt), 3);
  do {
    inflight = ludo_runtime_poll(rt, 0);
    ASSERT_GE(inflight, 0);
    ASSERT_LE(inflight, 3);
    ASSERT_EQ(c[0].calls + c[1].calls + c[2].calls, 3 - inflight);
    usleep(1000); /* the host's frame */
    ASSERT_LT(++frames, 100000);
  } while (inflight > 0);
  check_sleepers(s, c, 3);
  /* Later polls deliver nothing more. */
  for (i = 0; i < 5; i++) ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(c[0].calls + c[1].calls + c[2].calls, 3);
  ASSERT_EQ(calls_in_flight(rt), 0);
  for (i = 0; i < 3; i++) ludo_session_close(s[i]);
  test_rt_free(rt);
}

/* The same with ludo_runtime_run, which returns when nothing is in
 * flight. */
TEST_IMPL(async_run_interleaves) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_session_t *s[3];
  call_t c[3] = {{0}};
  int i;

  for (i = 0; i < 3; i++) {
    s[i] = test_open(env);
    blocking_reset(s[i]);
  }
  start_sleepers(s, c, 3);
  ASSERT_OK(ludo_runtime_run(rt));
  check_sleepers(s, c, 3);
  ASSERT_EQ(calls_in_flight(rt), 0);
  ASSERT_OK(ludo_runtime_run(rt)); /* nothing to do: returns at once */
  ASSERT_EQ(c[0].calls + c[1].calls + c[2].calls, 3);
  for (i = 0; i < 3; i++) ludo_session_close(s[i]);
  test_rt_free(rt);
}

/* ludo.sleep(s) waits at least s seconds (measured inside Lua with
 * ludo.now), even when the host did not poll for a while before starting
 * the call (libuv's cached loop time is only refreshed by uv_run, so the
 * timer must start from an updated one). */
TEST_IMPL(async_sleep_lasts) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_session_t *s = test_open(env);
  call_t c = {0};
  const char *out;
  size_t len;
  double t0;

  blocking_reset(s);
  /* Blocking path first. */
  ASSERT_OK(ludo_session_step(s, J(SLEEP_ACTION), &out, &len));
  ASSERT_DBL_GE(JNUM(JPARSE(out, len), "observation/slept"), SLEEP_S - 0.002);
  /* The host spends a while (rendering, say) before the next call. */
  usleep(300 * 1000);
  t0 = test_now();
  ASSERT_OK(step_async(s, SLEEP_ACTION, &c));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(c.calls, 1);
  ASSERT_OK(c.status);
  ASSERT_DBL_GE(test_now() - t0, SLEEP_S - 0.002);
  ASSERT_DBL_GE(JNUM(JPARSE(c.data, strlen(c.data)), "observation/slept"),
                SLEEP_S - 0.002);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A script's function may wait (ludo.sleep) like a session's call: its
 * call thread yields across ludo's own C frame. */
TEST_IMPL(async_script_waits) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc;
  const char *out;
  size_t len;
  json_t *r;
  ASSERT_OK(ludo_script_open(rt, "wscript", "spec/fixtures/c/where", &sc));
  ASSERT_OK(ludo_script_call(sc, "nap", J("[1,\"two\"]"), &out, &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "a"), 1);
  ASSERT_STR_EQ(JSTR(r, "b"), "two");
  /* Twice: the call thread is fine after a wait. */
  ASSERT_OK(ludo_script_call(sc, "nap", J("[3]"), &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "a"), 3);
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* One call per session at a time: EBUSY for any second call, whose
 * callback never runs. */
TEST_IMPL(async_ebusy) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *sleepy = test_env_load(rt, SLEEPY, NULL);
  ludo_env_t *echo = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *s = test_open(sleepy), *e = test_open(echo);
  call_t c1 = {0}, c2 = {0};
  const char *out;
  size_t len;

  blocking_reset(s);
  ASSERT_OK(step_async(s, SLEEP_ACTION, &c1));
  ASSERT_ERR(step_async(s, SLEEP_ACTION, &c2), LUDO_EBUSY);
  ASSERT_ERR(reset_async(s, NULL, &c2), LUDO_EBUSY);
  ASSERT_ERR(state_async(s, &c2), LUDO_EBUSY);
  ASSERT_ERR(ludo_session_step(s, J(SLEEP_ACTION), &out, &len), LUDO_EBUSY);
  ASSERT_ERR(ludo_session_reset(s, NULL, 0, &out, &len), LUDO_EBUSY);
  ASSERT_ERR(ludo_session_state(s, &out, &len), LUDO_EBUSY);
  ASSERT_EQ(calls_in_flight(rt), 1);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(c1.calls, 1);
  ASSERT_OK(c1.status);
  ASSERT_EQ(c2.calls, 0);
  /* Free again: the rejected calls left no trace. */
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 1);

  /* A completion that is queued but not yet delivered also keeps the
   * session busy. */
  blocking_reset(e);
  c1.calls = 0;
  ASSERT_OK(step_async(e, "{\"message\":\"q\"}", &c1));
  ASSERT_ERR(step_async(e, "{\"message\":\"r\"}", &c2), LUDO_EBUSY);
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(c1.calls, 1);
  ASSERT_EQ(c2.calls, 0);
  ASSERT_STR_CONTAINS(c1.data, "\"q\"");
  ASSERT_EQ(sync_violations, 0);

  ludo_session_close(s);
  ludo_session_close(e);
  test_rt_free(rt);
}

/* The callback starts the next call on its own session. */
static void step_again(call_t *c, ludo_session_t *s) {
  if (c->status == 0 && c->n > 1) {
    c->n--;
    ASSERT_OK(step_async(s, (const char *)c->arg, c));
  }
}

TEST_IMPL(async_chain_from_callback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *echo = test_env_load(rt, "examples/echo", NULL);
  ludo_env_t *sleepy = test_env_load(rt, SLEEPY, NULL);
  ludo_session_t *e = test_open(echo), *s = test_open(sleepy);
  call_t ce = {0}, cs = {0};
  const char *out;
  size_t len;

  blocking_reset(e);
  blocking_reset(s);
  ce.then = cs.then = step_again;
  ce.arg = "{\"message\":\"again\"}";
  cs.arg = "{\"seconds\":0.01}";
  ce.n = cs.n = 5;
  ASSERT_OK(step_async(e, ce.arg, &ce));
  ASSERT_OK(step_async(s, cs.arg, &cs));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(ce.calls, 5);
  ASSERT_EQ(cs.calls, 5);
  ASSERT_OK(ludo_session_state(e, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 5);
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 5);
  ASSERT_EQ(sync_violations, 0);
  ludo_session_close(e);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Closing a session with a call in flight completes it with ECANCELED,
 * once, during the close; other sessions are not disturbed. */
TEST_IMPL(async_close_in_flight) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_env_t *echo = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *s1 = test_open(env), *s2 = test_open(env);
  ludo_session_t *e = test_open(echo);
  call_t c1 = {0}, c2 = {0}, ce = {0};
  ludo_stats_t st;

  blocking_reset(s1);
  blocking_reset(s2);
  blocking_reset(e);
  ASSERT_OK(step_async(s1, SLEEP_ACTION, &c1));
  ASSERT_OK(step_async(s2, SLEEP_ACTION, &c2));
  ASSERT_GE(ludo_runtime_poll(rt, 0), 0);
  ludo_session_close(s1);
  ASSERT_EQ(c1.calls, 1); /* s1 is gone: the callback cannot come later */
  ASSERT_ERR(c1.status, LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(c1.data, "ECANCELED");
  ASSERT_EQ(c2.calls, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(c1.calls, 1);
  ASSERT_EQ(c2.calls, 1);
  ASSERT_OK(c2.status);

  /* A completion queued but not delivered yet is delivered by close,
   * exactly once. */
  ASSERT_OK(step_async(e, "{\"message\":\"bye\"}", &ce));
  ludo_session_close(e);
  ASSERT_EQ(ce.calls, 1);
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(ce.calls, 1);

  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 1);
  ASSERT_EQ(st.calls, 0);
  ASSERT_EQ(sync_violations, 0);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* Closing the session from its own completion callback is allowed. */
static void close_self(call_t *c, ludo_session_t *s) {
  (void)c;
  ludo_session_close(s);
}

TEST_IMPL(async_close_from_callback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_env_t *echo = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *s = test_open(env), *e = test_open(echo);
  call_t c = {0}, ce = {0};
  ludo_stats_t st;

  blocking_reset(s);
  blocking_reset(e);
  c.then = ce.then = close_self;
  ASSERT_OK(step_async(s, SLEEP_ACTION, &c));
  ASSERT_OK(step_async(e, "{\"message\":\"x\"}", &ce));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(c.calls, 1);
  ASSERT_OK(c.status);
  ASSERT_EQ(ce.calls, 1);
  ASSERT_OK(ce.status);
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_EQ(st.sessions, 0);
  ASSERT_EQ(st.calls, 0);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* Blocking calls and ludo_runtime_run from inside a callback: EBUSY. */
typedef struct {
  ludo_runtime_t *rt;
  ludo_session_t *other;
  int step_rc, run_rc;
} nested_t;

static void nested_calls(call_t *c, ludo_session_t *s) {
  nested_t *n = c->arg;
  const char *out;
  size_t len;
  (void)s;
  n->step_rc = ludo_session_step(n->other, J("{\"message\":\"in cb\"}"),
                                 &out, &len);
  n->run_rc = ludo_runtime_run(n->rt);
}

TEST_IMPL(async_blocking_inside_callback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, "examples/echo", NULL);
  ludo_session_t *s1 = test_open(env), *s2 = test_open(env);
  call_t c = {0};
  nested_t n = {rt, s2, 1, 1};

  blocking_reset(s1);
  blocking_reset(s2);
  c.then = nested_calls;
  c.arg = &n;
  ASSERT_OK(step_async(s1, "{\"message\":\"x\"}", &c));
  ASSERT_EQ(ludo_runtime_poll(rt, 0), 0);
  ASSERT_EQ(c.calls, 1);
  ASSERT_ERR(n.run_rc, LUDO_EBUSY);
  /* ludo.h: blocking calls return EBUSY "when called from inside a
   * callback" (they would nest uv_run). */
  ASSERT_ERR(n.step_rc, LUDO_EBUSY);
  ludo_session_close(s1);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* ludo_runtime_free with calls in flight: each completes with ECANCELED,
 * once, and every byte comes back. */
TEST_IMPL(async_runtime_free_in_flight) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, SLEEPY, NULL);
  ludo_session_t *s[3];
  call_t c[3] = {{0}};
  int i;

  for (i = 0; i < 3; i++) {
    s[i] = test_open(env);
    blocking_reset(s[i]);
  }
  start_sleepers(s, c, 3);
  ASSERT_GE(ludo_runtime_poll(rt, 0), 0);
  test_rt_free(rt);
  for (i = 0; i < 3; i++) {
    ASSERT_EQ(c[i].calls, 1);
    ASSERT_ERR(c[i].status, LUDO_ECANCELED);
  }
  ASSERT_EQ(sync_violations, 0);
}
