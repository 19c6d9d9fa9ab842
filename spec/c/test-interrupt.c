/* test-interrupt.c - ludo_runtime_interrupt: the Lua running at that
 * moment ends with LUDO_ECANCELED, from another thread or from a signal
 * handler on the runtime's thread, with the watchdog's signal or with the
 * count hook, through pcall, on the blocking and non-blocking paths; the
 * session stays usable, and an interrupt while no Lua runs is lost.
 * Fixture: spec/fixtures/c/limits (its "loop" modes spin forever; the
 * CPU budget is a minute, so a lost interrupt fails the test with
 * ETIMEOUT instead of ECANCELED). */
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define LIMITS "spec/fixtures/c/limits"
#define MSG "interrupted by the host"

static void step_ok(ludo_session_t *s) {
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_step(s, J("{\"mode\":\"ok\"}"), &out, &len));
  ASSERT_TRUE(json_is_true(JGET(JPARSE(out, len), "observation/ok")));
}

/* A runtime with a minute of CPU budget per call (and with `count_hook`,
 * an instruction limit: budgets by count hook, not by the watchdog). */
static ludo_runtime_t *spin_rt(int count_hook) {
  ludo_options_t o;
  test_options(&o);
  o.cpu_budget_ms = 60000;
  if (count_hook) o.max_instructions = (uint64_t)1 << 50;
  return test_rt_new(&o);
}

static ludo_env_t *spin_env(ludo_runtime_t **rt, int count_hook) {
  *rt = spin_rt(count_hook);
  return test_env_load(*rt, LIMITS, NULL);
}

static ludo_session_t *reset_session(ludo_env_t *env) {
  ludo_session_t *s = test_open(env);
  const char *out;
  size_t len;
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  return s;
}

static ludo_session_t *spin_session(ludo_runtime_t **rt, int count_hook) {
  return reset_session(spin_env(rt, count_hook));
}

/* A thread that interrupts `rt` every 10 ms until told to stop (one
 * interrupt could come before the step runs Lua, and be lost). */
typedef struct {
  ludo_runtime_t *rt;
  volatile int stop;
  unsigned period_us;
  pthread_t th;
} pester_t;

static void *pester_main(void *arg) {
  pester_t *p = arg;
  while (!p->stop) {
    usleep(p->period_us);
    ludo_runtime_interrupt(p->rt);
  }
  return NULL;
}

static void pester_start(pester_t *p, ludo_runtime_t *rt) {
  p->rt = rt;
  p->stop = 0;
  p->period_us = 10000;
  ASSERT_EQ(pthread_create(&p->th, NULL, pester_main, p), 0);
}

/* The same, every `us` microseconds. */
static void pester_start_every(pester_t *p, ludo_runtime_t *rt, unsigned us) {
  p->rt = rt;
  p->stop = 0;
  p->period_us = us;
  ASSERT_EQ(pthread_create(&p->th, NULL, pester_main, p), 0);
}

static void pester_stop(pester_t *p) {
  p->stop = 1;
  pthread_join(p->th, NULL);
}

static void expect_interrupted(ludo_session_t *s, const char *action) {
  const char *out;
  size_t len;
  ASSERT_ERR(ludo_session_step(s, action, strlen(action), &out, &len),
             LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), MSG);
}

/* From another thread, with the watchdog's signal and with the count
 * hook (an instruction limit), a plain loop and loops inside pcall,
 * xpcall and a coroutine. */
TEST_IMPL(interrupt_from_a_thread) {
  static const char *const modes[] = {
      "{\"mode\":\"loop\"}", "{\"mode\":\"pcall_loop\"}",
      "{\"mode\":\"xpcall_loop\"}", "{\"mode\":\"coroutine_loop\"}"};
  int hook;
  size_t i;
  for (hook = 0; hook <= 1; hook++) {
    ludo_runtime_t *rt;
    ludo_session_t *s = spin_session(&rt, hook);
    for (i = 0; i < sizeof modes / sizeof modes[0]; i++) {
      pester_t p;
      pester_start(&p, rt);
      expect_interrupted(s, modes[i]);
      pester_stop(&p);
      step_ok(s); /* usable, and the next call is not interrupted */
    }
    ludo_session_close(s);
    test_rt_free(rt);
  }
}

/* From a signal handler on the runtime's own thread, as a CLI's Ctrl-C
 * handler calls it. */
static ludo_runtime_t *alarm_rt;

static void on_alarm(int sig) {
  (void)sig;
  ludo_runtime_interrupt(alarm_rt);
}

TEST_IMPL(interrupt_from_a_signal_handler) {
  struct sigaction sa, old;
  struct itimerval every = {{0, 20000}, {0, 20000}}, off;
  ludo_runtime_t *rt;
  ludo_session_t *s = spin_session(&rt, 0);
  memset(&sa, 0, sizeof sa);
  memset(&off, 0, sizeof off);
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  alarm_rt = rt;
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  ASSERT_EQ(setitimer(ITIMER_REAL, &every, NULL), 0);
  expect_interrupted(s, "{\"mode\":\"pcall_loop\"}");
  setitimer(ITIMER_REAL, &off, NULL);
  sigaction(SIGALRM, &old, NULL);
  step_ok(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* The non-blocking path: the callback gets ECANCELED. */
static void status_cb(ludo_session_t *s, int status, const char *data,
                      size_t len, void *ud) {
  (void)s;
  (void)data;
  (void)len;
  *(int *)ud = status;
}

TEST_IMPL(interrupt_async_call) {
  ludo_runtime_t *rt;
  ludo_session_t *s = spin_session(&rt, 0);
  pester_t p;
  int status = 1;
  ASSERT_OK(ludo_session_step_async(s, J("{\"mode\":\"loop\"}"), status_cb,
                                    &status));
  pester_start(&p, rt);
  ASSERT_OK(ludo_runtime_run(rt));
  pester_stop(&p);
  ASSERT_ERR(status, LUDO_ECANCELED);
  step_ok(s);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* A script's call (a policy's, for `ludo eval`'s first Ctrl-C). */
static void script_cb(ludo_script_t *sc, int status, const char *out,
                      size_t len, void *ud) {
  (void)sc;
  (void)out;
  (void)len;
  *(int *)ud = status;
}

TEST_IMPL(interrupt_script_call) {
  ludo_runtime_t *rt = spin_rt(0);
  ludo_script_t *sc;
  pester_t p;
  const char *out;
  size_t len;
  int status = 1;
  ASSERT_OK(ludo_script_open(rt, "ascript", "spec/fixtures/c/ascript", &sc));
  pester_start(&p, rt);
  ASSERT_ERR(ludo_script_call(sc, "spin", NULL, 0, &out, &len),
             LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(ludo_script_errmsg(sc), MSG);
  ASSERT_OK(ludo_script_call_async(sc, "spin", NULL, 0, script_cb, &status));
  ASSERT_OK(ludo_runtime_run(rt));
  pester_stop(&p);
  ASSERT_ERR(status, LUDO_ECANCELED);
  ASSERT_OK(ludo_script_call(sc, "now", J("[1]"), &out, &len));
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* Calls issued before the interrupt and still queued fail when they
 * start; calls issued after it run whole. No thread: deterministic. */
TEST_IMPL(interrupt_queued_calls) {
  ludo_runtime_t *rt;
  ludo_env_t *env = spin_env(&rt, 0);
  ludo_session_t *a = reset_session(env), *b = reset_session(env);
  int sa = 1, sb = 1;
  ASSERT_OK(ludo_session_step_async(a, J("{\"mode\":\"loop\"}"), status_cb,
                                    &sa));
  ASSERT_OK(ludo_session_step_async(b, J("{\"mode\":\"loop\"}"), status_cb,
                                    &sb));
  ludo_runtime_interrupt(rt);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_ERR(sa, LUDO_ECANCELED);
  ASSERT_ERR(sb, LUDO_ECANCELED);
  step_ok(a);
  step_ok(b);
  ludo_session_close(a);
  ludo_session_close(b);
  test_rt_free(rt);
}

/* An interrupt while no Lua runs is lost: the next calls run whole. */
TEST_IMPL(interrupt_when_idle_is_lost) {
  int hook;
  ludo_runtime_interrupt(NULL); /* nothing */
  for (hook = 0; hook <= 1; hook++) {
    ludo_runtime_t *rt;
    ludo_session_t *s = spin_session(&rt, hook);
    ludo_runtime_interrupt(rt);
    ludo_runtime_interrupt(rt);
    step_ok(s);
    step_ok(s);
    ludo_session_close(s);
    test_rt_free(rt);
  }
}

static double mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* An interrupt in any instant of a call ends it with ECANCELED and the
 * interrupt's message, never another code: interrupts every 50 us from
 * another thread while short blocking steps run (one landing while the
 * result is encoded read as ETIMEOUT), and while spinning steps run
 * time-sliced by polls (one landing as a slice ends read as ESCRIPT,
 * "yielded outside the ludo protocol"). */
static int n_async_done, async_rc[2];

static void on_async(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  (void)ud;
  (void)data;
  (void)len;
  n_async_done++;
  if (status == LUDO_ECANCELED &&
      strstr(ludo_session_errmsg(s), MSG) != NULL)
    async_rc[0]++;
  else
    async_rc[1]++;
}

/* 1 when a failed call (rc) ended as an interrupt must (ECANCELED with
 * the interrupt's message); fails the test otherwise. */
static int canceled_by_interrupt(const char *what, int rc, const char *msg) {
  if (rc != LUDO_ECANCELED || strstr(msg, MSG) == NULL)
    FAIL("an interrupted %s gave %s: %s", what, ludo_err_name(rc), msg);
  return 1;
}

TEST_IMPL(interrupt_any_instant_is_canceled) {
  ludo_runtime_t *rt;
  ludo_session_t *s = spin_session(&rt, 0);
  pester_t p;
  long canceled = 0, ok = 0;
  double t0;
  pester_start_every(&p, rt, 50);
  for (t0 = mono_ms(); mono_ms() - t0 < 400;) {
    const char *out;
    size_t len;
    int rc = ludo_session_step(s, J("{\"mode\":\"ok\"}"), &out, &len);
    if (rc == 0) {
      ok++;
      continue;
    }
    canceled += canceled_by_interrupt("step", rc, ludo_session_errmsg(s));
  }
  ASSERT_TRUE(canceled > 0 && ok > 0);
  n_async_done = async_rc[0] = async_rc[1] = 0;
  for (t0 = mono_ms(); mono_ms() - t0 < 400;) {
    int want = n_async_done + 1;
    ASSERT_OK(ludo_session_step_async(s, J("{\"mode\":\"loop\"}"),
                                      on_async, NULL));
    while (n_async_done < want) ASSERT_TRUE(ludo_runtime_poll(rt, 300) >= 0);
  }
  pester_stop(&p);
  if (async_rc[1] != 0)
    FAIL("%d of %d interrupted sliced steps did not end ECANCELED",
         async_rc[1], n_async_done);
  step_ok(s);
  ludo_session_close(s);
  test_rt_free(rt);
  /* blocking opens that build their state (the pool is empty): an
   * interrupted build is ECANCELED, not ELOAD (the module is fine) */
  {
    ludo_env_t *env;
    ludo_session_t *open[1000];
    int n = 0, i, failed = 0;
    rt = spin_rt(0);
    env = test_env_load(rt, "examples/echo", NULL);
    pester_start_every(&p, rt, 50);
    for (t0 = mono_ms(); n < 1000 && mono_ms() - t0 < 400;) {
      int rc = ludo_session_open(env, &open[n]);
      if (rc == 0) {
        n++;
        continue;
      }
      failed += canceled_by_interrupt("open", rc, ludo_runtime_errmsg(rt));
    }
    pester_stop(&p);
    ASSERT_TRUE(n > 0);
    for (i = 0; i < n; i++) ludo_session_close(open[i]);
    (void)failed; /* how many builds an interrupt reached varies */
    test_rt_free(rt);
  }
}
