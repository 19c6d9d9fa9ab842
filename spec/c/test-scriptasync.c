/* test-scriptasync.c - ludo_script_call_async: results from the loop, a
 * waiting script beside one that goes on, errors, EBUSY, free in flight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "helpers.h"
#include "ludo.h"

#define DIR "spec/fixtures/c/ascript"

/* What a callback saw. */
typedef struct {
  int calls, status;
  char out[256];
  double at;             /* when it ran (test_now) */
  ludo_script_t *free_me; /* freed from inside the callback when set */
} got_t;

static void on_done(ludo_script_t *sc, int status, const char *out,
                    size_t len, void *ud) {
  got_t *g = ud;
  g->calls++;
  g->status = status;
  g->at = test_now();
  snprintf(g->out, sizeof g->out, "%.*s", (int)len, out);
  if (g->free_me == sc) ludo_script_free(sc);
}

static ludo_script_t *open_script(ludo_runtime_t *rt) {
  ludo_script_t *sc = NULL;
  ASSERT_OK(ludo_script_open(rt, "ascript", DIR, &sc));
  return sc;
}

/* The result comes from the loop, never from inside the call. */
TEST_IMPL(script_async_result_from_loop) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc = open_script(rt);
  got_t g = {0};
  ASSERT_OK(ludo_script_call_async(sc, "now", J("[7]"), on_done, &g));
  ASSERT_EQ(g.calls, 0);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(g.calls, 1);
  ASSERT_OK(g.status);
  ASSERT_STR_EQ(g.out, "{\"x\":7}");
  /* The blocking form still works after a non-blocking call. */
  {
    const char *out;
    size_t len;
    ASSERT_OK(ludo_script_call(sc, "now", J("[8]"), &out, &len));
    ASSERT_EQ(JINT(JPARSE(out, len), "x"), 8);
  }
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* A script that waits 200 ms does not hold another that answers at once,
 * nor a session step: they finish first. */
TEST_IMPL(script_async_wait_overlaps) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *a = open_script(rt), *b = open_script(rt);
  got_t ga = {0}, gb = {0};
  ASSERT_OK(ludo_script_call_async(a, "nap", J("[200,\"a\"]"), on_done, &ga));
  ASSERT_OK(ludo_script_call_async(b, "now", J("[1]"), on_done, &gb));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(ga.calls, 1);
  ASSERT_EQ(gb.calls, 1);
  ASSERT_STR_EQ(ga.out, "{\"tag\":\"a\"}");
  ASSERT_TRUE(gb.at < ga.at);
  ludo_script_free(a);
  ludo_script_free(b);
  test_rt_free(rt);
}

/* Errors reach the callback with their code and message. */
TEST_IMPL(script_async_errors) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc = open_script(rt);
  got_t g = {0}, g2 = {0};
  ASSERT_OK(ludo_script_call_async(sc, "raise", J("[\"no way\"]"), on_done,
                                   &g));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(g.calls, 1);
  ASSERT_ERR(g.status, LUDO_ESCRIPT);
  ASSERT_TRUE(strstr(g.out, "no way") != NULL);
  ASSERT_TRUE(strstr(ludo_script_errmsg(sc), "no way") != NULL);
  ASSERT_OK(ludo_script_call_async(sc, "missing", NULL, 0, on_done, &g2));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_ERR(g2.status, LUDO_EINVAL);
  ASSERT_TRUE(strstr(g2.out, "missing") != NULL);
  ASSERT_ERR(ludo_script_call_async(NULL, "now", NULL, 0, on_done, &g),
             LUDO_EINVAL);
  ASSERT_ERR(ludo_script_call_async(sc, "now", NULL, 0, NULL, &g),
             LUDO_EINVAL);
  /* empty names are EINVAL at the call (ludo.h's rule), not a failure
   * later */
  ASSERT_ERR(ludo_script_call_async(sc, "", NULL, 0, on_done, &g),
             LUDO_EINVAL);
  {
    const char *out;
    size_t len;
    ludo_script_t *none = NULL;
    ASSERT_ERR(ludo_script_call(sc, "", NULL, 0, &out, &len), LUDO_EINVAL);
    ASSERT_ERR(ludo_script_open(rt, "", NULL, &none), LUDO_EINVAL);
    ASSERT_ERR(ludo_script_open(rt, "policy", "", &none), LUDO_EINVAL);
    ASSERT_NULL(none);
  }
  ASSERT_EQ(g.calls, 1);
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* The arguments are the values of the JSON array, in order, however many
 * (more than the decoder's batch of 16), nested values as they are; a
 * text that is not an array is refused, naming the function. */
TEST_IMPL(script_call_arguments) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc = open_script(rt);
  char args[512], want[512];
  const char *out;
  size_t len, k = 0, w = 0;
  int i;
  ASSERT_OK(ludo_script_call(sc, "args", J("[]"), &out, &len));
  ASSERT_STR_EQ(out, "\"0:\"");
  ASSERT_OK(ludo_script_call(sc, "args", NULL, 0, &out, &len));
  ASSERT_STR_EQ(out, "\"0:\"");
  ASSERT_OK(ludo_script_call(sc, "args",
                             J("[1,null,[2,[3]],{\"a\":[]},\"s\",true]"),
                             &out, &len));
  ASSERT_STR_EQ(out, "\"6:1,null,array2,table,s,true\"");
  args[k++] = '[';
  w += (size_t)snprintf(want, sizeof want, "\"40:");
  for (i = 1; i <= 40; i++) {
    k += (size_t)snprintf(args + k, sizeof args - k, "%s%d", i > 1 ? "," : "",
                          i);
    w += (size_t)snprintf(want + w, sizeof want - w, "%s%d",
                          i > 1 ? "," : "", i);
  }
  args[k++] = ']';
  snprintf(want + w, sizeof want - w, "\"");
  ASSERT_OK(ludo_script_call(sc, "args", args, k, &out, &len));
  ASSERT_STR_EQ(out, want);
  ASSERT_ERR(ludo_script_call(sc, "args", J("{\"a\":1}"), &out, &len),
             LUDO_EINVAL);
  ASSERT_TRUE(strstr(ludo_script_errmsg(sc), "ascript.args must be a JSON "
                                             "array") != NULL);
  ASSERT_ERR(ludo_script_call(sc, "args", J("[1,"), &out, &len),
             LUDO_EPARSE);
  ASSERT_OK(ludo_script_call(sc, "args", J("[[]]"), &out, &len));
  ASSERT_STR_EQ(out, "\"1:array0\"");
  { /* many: the stack grows batch by batch */
    char *many = malloc(3000 * 6 + 2);
    ASSERT_TRUE(many != NULL);
    k = 0;
    many[k++] = '[';
    for (i = 1; i <= 3000; i++)
      k += (size_t)sprintf(many + k, "%s%d", i > 1 ? "," : "", i);
    many[k++] = ']';
    ASSERT_OK(ludo_script_call(sc, "args", many, k, &out, &len));
    free(many);
    ASSERT_TRUE(strncmp(out, "\"3000:1,2,3,", 12) == 0);
    ASSERT_TRUE(len > 14 && strcmp(out + len - 11, ",2999,3000\"") == 0);
  }
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* One call at a time: a second (either form) is EBUSY and its callback
 * never runs. */
TEST_IMPL(script_async_ebusy) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *sc = open_script(rt);
  got_t g = {0}, g2 = {0};
  const char *out;
  size_t len;
  ASSERT_OK(ludo_script_call_async(sc, "nap", J("[20,\"x\"]"), on_done, &g));
  ASSERT_ERR(ludo_script_call_async(sc, "now", NULL, 0, on_done, &g2),
             LUDO_EBUSY);
  ASSERT_ERR(ludo_script_call(sc, "now", NULL, 0, &out, &len), LUDO_EBUSY);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(g.calls, 1);
  ASSERT_EQ(g2.calls, 0);
  ludo_script_free(sc);
  test_rt_free(rt);
}

/* Freeing a script with a call queued or waiting runs its callback with
 * ECANCELED inside the free; freeing from its own callback is fine; the
 * runtime gets every byte back. */
TEST_IMPL(script_async_free_in_flight) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_script_t *a = open_script(rt), *b = open_script(rt),
                *c = open_script(rt);
  got_t ga = {0}, gb = {0}, gc = {0};
  ASSERT_OK(ludo_script_call_async(a, "nap", J("[1000,\"a\"]"), on_done,
                                   &ga));
  ASSERT_OK(ludo_script_call_async(b, "now", J("[2]"), on_done, &gb));
  gc.free_me = c;
  ASSERT_OK(ludo_script_call_async(c, "now", J("[3]"), on_done, &gc));
  ludo_script_free(b); /* queued, never started */
  ASSERT_EQ(gb.calls, 1);
  ASSERT_ERR(gb.status, LUDO_ECANCELED);
  ASSERT_EQ(ludo_runtime_poll(rt, 0) >= 0, 1); /* a starts and waits */
  ASSERT_EQ(gc.calls, 1);                      /* c freed itself */
  ASSERT_EQ(ga.calls, 0);
  ludo_script_free(a);
  ASSERT_EQ(ga.calls, 1);
  ASSERT_ERR(ga.status, LUDO_ECANCELED);
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(ga.calls, 1);
  test_rt_free(rt);
}

static void host_tick(uv_timer_t *t) { (*(int *)t->data)++; }

static void host_timer_closed(uv_handle_t *h) { (void)h; }

/* A blocking call that waits (ludo.sleep, an LLM request) goes on as soon
 * as its operation completes, even when the host keeps other handles on
 * the loop: here a timer due in an hour. The pass of the loop that saw
 * the completion must not then block in its poll until the host's next
 * event. */
TEST_IMPL(script_blocking_wait_beside_host_handles) {
  uv_loop_t loop;
  uv_timer_t timer;
  int ticks = 0;
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_script_t *sc;
  const char *out;
  size_t len;
  ASSERT_OK(uv_loop_init(&loop));
  uv_timer_init(&loop, &timer);
  timer.data = &ticks;
  uv_timer_start(&timer, host_tick, 3600 * 1000, 0);
  test_options(&o);
  o.loop = &loop;
  rt = test_rt_new(&o);
  sc = open_script(rt);
  /* A sleep of 0 completes in the timers that open a pass of the loop,
   * before its poll; a sleep of 20 ms in those after the poll. */
  ASSERT_OK(ludo_script_call(sc, "nap", J("[0, \"a\"]"), &out, &len));
  ASSERT_STR_EQ(out, "{\"tag\":\"a\"}");
  ASSERT_OK(ludo_script_call(sc, "nap", J("[20, \"b\"]"), &out, &len));
  ASSERT_STR_EQ(out, "{\"tag\":\"b\"}");
  ASSERT_EQ(ticks, 0); /* the calls did not wait for the host's timer */
  ludo_script_free(sc);
  ludo_runtime_free(rt);
  uv_run(&loop, UV_RUN_NOWAIT);
  ASSERT_EQ(test_heap.live, 0);
  uv_close((uv_handle_t *)&timer, host_timer_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}
