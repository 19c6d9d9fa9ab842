/* test-tasks.c - an environment's tasks (OpenEnv's Task API): the
 * methods of ludo_session_tasks on each way of declaring them (lists,
 * get with count, get alone), what is derived from what, Python's slices
 * for ranges, the error codes the server turns into statuses, limits
 * inside the tasks' functions, and a reset that selects a task. */
#include "helpers.h"

#include "env/env.h"

#include <string.h>

#define LISTED "spec/fixtures/c/tasks"
#define FETCHED "spec/fixtures/c/tasks_get"
#define SPARSE "spec/fixtures/c/tasks_getonly"

/* The JSON result of a tasks request that must succeed. */
static json_t *tasks_json(ludo_session_t *s, const char *req) {
  const char *out;
  size_t len;
  int rc = ludo_session_tasks(s, req, strlen(req), &out, &len);
  if (rc != 0)
    FAIL("%s: %s: %s", req, ludo_err_name(rc), ludo_session_errmsg(s));
  return JPARSE(out, len);
}

/* The code of a tasks request. */
static int tasks_rc(ludo_session_t *s, const char *req) {
  const char *out;
  size_t len;
  return ludo_session_tasks(s, req, strlen(req), &out, &len);
}

/* The "id" fields of a list of tasks, joined by spaces, into buf. */
static const char *ids(json_t *list, char *buf, size_t n) {
  size_t i, at = 0;
  buf[0] = '\0';
  ASSERT_TRUE(json_is_array(list));
  for (i = 0; i < json_array_size(list); i++) {
    json_t *id = json_object_get(json_array_get(list, i), "id");
    ASSERT_TRUE(json_is_string(id));
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? " " : "",
                           json_string_value(id));
    ASSERT_LT(at, n);
  }
  return buf;
}

/* Splits are normalized to {name, type}: train, validation and test keep
 * their type, other names are validation splits, a table keeps its own
 * fields and type. */
TEST_IMPL(tasks_splits) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  ludo_session_t *f = test_open(test_env_load(rt, FETCHED, NULL));
  json_t *r = tasks_json(s, "{\"method\":\"splits\"}");
  ASSERT_EQ(json_array_size(r), 10);
  ASSERT_STR_EQ(JSTR(json_array_get(r, 0), "name"), "train");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 0), "type"), "train");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 1), "type"), "test");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 2), "name"), "holdout");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 2), "type"), "validation");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 3), "name"), "dev");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 3), "type"), "test");
  /* from a function; a table's other fields stay */
  r = tasks_json(f, "{\"method\":\"splits\"}");
  ASSERT_EQ(json_array_size(r), 5);
  ASSERT_STR_EQ(JSTR(json_array_get(r, 0), "type"), "validation");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 1), "name"), "b");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 1), "note"), "empty");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 1), "type"), "validation");
  ludo_session_close(f);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* With list alone: count, get and range derived from it; an empty split
 * is an empty array. */
TEST_IMPL(tasks_from_list) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  char buf[256];
  json_t *r = tasks_json(s, "{\"method\":\"list\",\"split\":\"test\"}");
  ASSERT_STR_EQ(ids(r, buf, sizeof buf), "test-0 test-1 test-2");
  ASSERT_STR_EQ(JSTR(json_array_get(r, 2), "q"), "9*8");
  r = tasks_json(s, "{\"method\":\"count\",\"split\":\"train\"}");
  ASSERT_EQ(json_integer_value(r), 5);
  r = tasks_json(s, "{\"method\":\"get\",\"split\":\"train\",\"index\":3}");
  ASSERT_STR_EQ(JSTR(r, "id"), "train-3");
  ASSERT_STR_EQ(JSTR(r, "q"), "4+4");
  r = tasks_json(s, "{\"method\":\"range\",\"split\":\"train\","
                    "\"start\":1,\"stop\":3}");
  ASSERT_STR_EQ(ids(r, buf, sizeof buf), "train-1 train-2");
  r = tasks_json(s, "{\"method\":\"list\",\"split\":\"holdout\"}");
  ASSERT_TRUE(json_is_array(r));
  ASSERT_EQ(json_array_size(r), 0);
  r = tasks_json(s, "{\"method\":\"count\",\"split\":\"holdout\"}");
  ASSERT_EQ(json_integer_value(r), 0);
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"holdout\","
                         "\"index\":0}"),
             LUDO_ERANGE);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* range follows Python's slices: start inclusive, stop exclusive, either
 * left out or null, negative values from the end, bounds clamped. */
TEST_IMPL(tasks_range_slices) {
  static const struct {
    const char *bounds, *want;
  } cases[] = {
      {"", "train-0 train-1 train-2 train-3 train-4"},
      {",\"start\":3", "train-3 train-4"},
      {",\"stop\":2", "train-0 train-1"},
      {",\"start\":null,\"stop\":null",
       "train-0 train-1 train-2 train-3 train-4"},
      {",\"start\":-2", "train-3 train-4"},
      {",\"stop\":-1", "train-0 train-1 train-2 train-3"},
      {",\"start\":-9,\"stop\":1", "train-0"},
      {",\"start\":2,\"stop\":99", "train-2 train-3 train-4"},
      {",\"start\":4,\"stop\":2", ""},
      {",\"start\":7", ""},
      {",\"start\":1.0,\"stop\":2.0", "train-1"},
  };
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  ludo_session_t *f = test_open(test_env_load(rt, FETCHED, NULL));
  char req[128], buf[256];
  size_t i;
  json_t *r;
  for (i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(req, sizeof req, "{\"method\":\"range\",\"split\":\"train\"%s}",
             cases[i].bounds);
    ASSERT_STR_EQ(ids(tasks_json(s, req), buf, sizeof buf), cases[i].want);
  }
  /* the same slices from get and count */
  r = tasks_json(f, "{\"method\":\"range\",\"split\":\"a\",\"start\":-3,"
                    "\"stop\":-1}");
  ASSERT_EQ(json_array_size(r), 2);
  ASSERT_EQ(JINT(json_array_get(r, 0), "index"), 1);
  ASSERT_EQ(JINT(json_array_get(r, 1), "index"), 2);
  r = tasks_json(f, "{\"method\":\"range\",\"split\":\"b\"}");
  ASSERT_TRUE(json_is_array(r));
  ASSERT_EQ(json_array_size(r), 0);
  ludo_session_close(f);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* With get and count: list and range derived from them, get checked
 * against count before get runs, indices passed as integers. */
TEST_IMPL(tasks_from_get) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, FETCHED, NULL));
  json_t *r = tasks_json(s, "{\"method\":\"list\",\"split\":\"a\"}");
  ASSERT_EQ(json_array_size(r), 4);
  ASSERT_EQ(JINT(json_array_get(r, 3), "index"), 3);
  ASSERT_STR_EQ(JSTR(json_array_get(r, 3), "mt"), "integer");
  r = tasks_json(s, "{\"method\":\"count\",\"split\":\"a\"}");
  ASSERT_EQ(json_integer_value(r), 4);
  r = tasks_json(s, "{\"method\":\"get\",\"split\":\"a\",\"index\":2.0}");
  ASSERT_EQ(JINT(r, "index"), 2);
  ASSERT_STR_EQ(JSTR(r, "mt"), "integer");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"a\","
                         "\"index\":4}"),
             LUDO_ERANGE);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "ERANGE: no task at index 4 of split 'a'");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"a\","
                         "\"index\":-1}"),
             LUDO_ERANGE);
  /* what get and count return is checked */
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"count\",\"split\":\"neg\"}"),
             LUDO_EVALUE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "tasks.count('neg') must return a whole number >= 0, "
                      "got -1");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"count\",\"split\":\"frac\"}"),
             LUDO_EVALUE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "got 2.5");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"list\",\"split\":\"hole\"}"),
             LUDO_EVALUE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s),
                      "tasks.get('hole', 1) returned nil below "
                      "tasks.count('hole')");
  /* a nil from get is no task */
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"hole\","
                         "\"index\":1}"),
             LUDO_ERANGE);
  ludo_session_close(s);
  test_rt_free(rt);
}

static void never_called(ludo_session_t *s, int status, const char *data,
                         size_t len, void *ud) {
  (void)s;
  (void)status;
  (void)data;
  (void)len;
  (void)ud;
  FAIL("a call that failed at once completed");
}

/* What nothing declared can answer is ENOTSUP, naming what to declare;
 * an environment's own range gets start and stop as sent (nil when left
 * out); get alone answers get. An environment without tasks answers
 * ENOTSUP to every method. */
TEST_IMPL(tasks_not_offered) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, SPARSE, NULL));
  ludo_session_t *e = test_open(test_env_load(rt, "examples/echo", NULL));
  json_t *r;
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"count\",\"split\":\"only\"}"),
             LUDO_ENOTSUP);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "ENOTSUP: environment sparse cannot count its tasks: give "
                "tasks.count, or tasks.list");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"list\",\"split\":\"only\"}"),
             LUDO_ENOTSUP);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "cannot list its tasks");
  r = tasks_json(s, "{\"method\":\"get\",\"split\":\"only\",\"index\":7}");
  ASSERT_STR_EQ(json_string_value(r), "task 7");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"only\","
                         "\"index\":100}"),
             LUDO_ERANGE);
  r = tasks_json(s, "{\"method\":\"range\",\"split\":\"only\",\"stop\":5}");
  ASSERT_STR_EQ(json_string_value(json_array_get(r, 0)), "only");
  ASSERT_STR_EQ(json_string_value(json_array_get(r, 1)), "nil");
  ASSERT_EQ(json_integer_value(json_array_get(r, 2)), 5);
  ASSERT_ERR(tasks_rc(e, "{\"method\":\"splits\"}"), LUDO_ENOTSUP);
  ASSERT_STR_EQ(ludo_session_errmsg(e),
                "ENOTSUP: environment echo_env has no tasks");
  ASSERT_ERR(tasks_rc(e, "{\"method\":\"get\",\"split\":\"test\","
                         "\"index\":0}"),
             LUDO_ENOTSUP);
  /* decided before any Lua runs: the non-blocking form says so at once */
  ASSERT_ERR(ludo_session_tasks_async(e, J("{\"method\":\"splits\"}"),
                                      never_called, NULL),
             LUDO_ENOTSUP);
  ludo_session_close(e);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Malformed requests and unknown splits: ESCHEMA naming the field. */
TEST_IMPL(tasks_bad_requests) {
  static const struct {
    const char *req, *msg;
  } cases[] = {
      {"[]", "ESCHEMA: request: expected an object {\"method\": ...}, got "
             "array"},
      {"7", "ESCHEMA: request: expected an object"},
      {"{}", "ESCHEMA: request.method: required"},
      {"{\"method\":\"all\"}",
       "ESCHEMA: request.method: expected one of splits, list, count, get, "
       "range, got 'all'"},
      {"{\"method\":3}", "got integer"},
      {"{\"method\":\"splits\",\"split\":\"x\"}",
       "ESCHEMA: request.split: unknown field for a splits request"},
      {"{\"method\":\"list\"}", "ESCHEMA: request.split: required"},
      {"{\"method\":\"list\",\"split\":1}",
       "ESCHEMA: request.split: expected string, got integer"},
      {"{\"method\":\"count\",\"split\":\"nope\"}",
       "ESCHEMA: request.split: unknown split 'nope' (the splits are: train,"
       " test, holdout, dev, fn, notlist, map, spin, hog, raise)"},
      {"{\"method\":\"get\",\"split\":\"test\"}",
       "ESCHEMA: request.index: required"},
      {"{\"method\":\"get\",\"split\":\"test\",\"index\":\"1\"}",
       "ESCHEMA: request.index: expected integer, got string"},
      {"{\"method\":\"get\",\"split\":\"test\",\"index\":1.5}",
       "ESCHEMA: request.index: expected integer, got number"},
      {"{\"method\":\"get\",\"split\":\"test\",\"index\":0,\"stop\":1}",
       "ESCHEMA: request.stop: unknown field for a get request"},
      {"{\"method\":\"range\",\"split\":\"test\",\"start\":true}",
       "ESCHEMA: request.start: expected integer, got boolean"},
  };
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  const char *out;
  size_t i, len;
  for (i = 0; i < sizeof cases / sizeof *cases; i++) {
    ASSERT_ERR(tasks_rc(s, cases[i].req), LUDO_ESCHEMA);
    ASSERT_STR_CONTAINS(ludo_session_errmsg(s), cases[i].msg);
  }
  ASSERT_ERR(ludo_session_tasks(s, NULL, 0, &out, &len), LUDO_ESCHEMA);
  ASSERT_ERR(tasks_rc(s, "{\"method\":"), LUDO_EPARSE);
  ASSERT_ERR(ludo_session_tasks(NULL, J("{}"), &out, &len), LUDO_EINVAL);
  /* still usable */
  ASSERT_EQ(json_integer_value(
                tasks_json(s, "{\"method\":\"count\",\"split\":\"test\"}")),
            3);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* The tasks' functions misbehaving: values JSON cannot hold (EVALUE,
 * naming what), errors (ESCRIPT), and the call's limits, which they
 * cannot escape; the session stays usable after each. */
TEST_IMPL(tasks_misbehaving) {
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_session_t *s;
  ludo_error_t e;
  test_options(&o);
  /* Room for the hog to reach the memory cap before the CPU budget, even
   * under ASan on a loaded machine; the spinner still ends with it. */
  o.cpu_budget_ms = 1000;
  o.memory_cap = 8u << 20;
  rt = test_rt_new(&o);
  s = test_open(test_env_load(rt, LISTED, NULL));
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"list\",\"split\":\"fn\"}"),
             LUDO_EVALUE);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "EVALUE: the tasks of split 'fn' cannot be sent as JSON: "
                "cannot encode a function at $[0].run");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"get\",\"split\":\"fn\","
                         "\"index\":0}"),
             LUDO_EVALUE);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "the task at index 0 of split "
                                              "'fn' cannot be sent as JSON");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"list\",\"split\":\"notlist\"}"),
             LUDO_EVALUE);
  ASSERT_STR_EQ(ludo_session_errmsg(s),
                "EVALUE: tasks.list('notlist') must return a list of tasks, "
                "got string");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"count\",\"split\":\"map\"}"),
             LUDO_EVALUE);
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"count\",\"split\":\"raise\"}"),
             LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "no tasks today");
  ASSERT_OK(ludo_session_error(s, &e));
  ASSERT_STR_EQ(e.call, "tasks");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"list\",\"split\":\"spin\"}"),
             LUDO_ETIMEOUT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "during tasks");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "spec/fixtures/c/tasks/env.lua");
  ASSERT_ERR(tasks_rc(s, "{\"method\":\"range\",\"split\":\"hog\"}"),
             LUDO_ENOMEM);
  ASSERT_EQ(json_integer_value(
                tasks_json(s, "{\"method\":\"count\",\"split\":\"train\"}")),
            5);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Tasks calls stay outside the episode: no step counted, the same
 * episode id; the non-blocking form delivers from the loop. */
static void on_tasks(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  json_t *r;
  (void)s;
  ASSERT_OK(status);
  r = JPARSE(data, len);
  ASSERT_STR_EQ(JSTR(r, "id"), "test-1");
  ++*(int *)ud;
}

TEST_IMPL(tasks_outside_episode) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  const char *out;
  size_t len;
  char eid[64];
  int done = 0;
  json_t *st;
  ASSERT_OK(ludo_session_reset(s, J("{\"episode_id\":\"ep\"}"), &out, &len));
  ASSERT_OK(ludo_session_step(s, J("{\"answer\":\"2\"}"), &out, &len));
  tasks_json(s, "{\"method\":\"list\",\"split\":\"train\"}");
  ASSERT_OK(ludo_session_tasks_async(
      s, J("{\"method\":\"get\",\"split\":\"test\",\"index\":1}"), on_tasks,
      &done));
  ASSERT_EQ(done, 0);
  ASSERT_ERR(ludo_session_tasks_async(s, J("{\"method\":\"splits\"}"),
                                      on_tasks, &done),
             LUDO_EBUSY);
  while (done == 0) ludo_runtime_poll(rt, 0);
  ASSERT_EQ(done, 1);
  ASSERT_ERR(ludo_session_tasks_async(s, J("{}"), NULL, NULL), LUDO_EINVAL);
  ASSERT_OK(ludo_session_state(s, &out, &len));
  st = JPARSE(out, len);
  snprintf(eid, sizeof eid, "%s", JSTR(st, "episode_id"));
  ASSERT_STR_EQ(eid, "ep");
  ASSERT_EQ(JINT(st, "step_count"), 1);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* reset {"split","index"}: the environment's reset gets the task as
 * opts.task (and the index as an integer); a split alone is checked and
 * passed on; bad selections fail the reset with ESCHEMA before anything
 * of the episode changes. An environment without tasks gets split and
 * index as they came. */
TEST_IMPL(tasks_reset_selects) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_session_t *s = test_open(test_env_load(rt, LISTED, NULL));
  ludo_session_t *e = test_open(test_env_load(rt, "spec/fixtures/c/reset_opts",
                                              NULL));
  const char *out;
  size_t len;
  json_t *r;
  long long seed;
  ASSERT_OK(ludo_session_reset(s, J("{\"split\":\"test\",\"index\":2,"
                                    "\"seed\":5}"),
                               &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/question"), "9*8");
  ASSERT_STR_EQ(JSTR(r, "observation/split"), "test");
  ASSERT_EQ(JINT(r, "observation/index"), 2);
  seed = JINT(r, "observation/seed");
  /* the same seed gives the same draw: selection consumed no random */
  ASSERT_OK(ludo_session_reset(s, J("{\"split\":\"train\",\"index\":1.0,"
                                    "\"seed\":5}"),
                               &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/question"), "2+2");
  ASSERT_EQ(JINT(r, "observation/index"), 1);
  ASSERT_EQ(JINT(r, "observation/seed"), seed);
  ASSERT_OK(ludo_session_reset(s, J("{\"split\":\"dev\"}"), &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/question"), "none");
  ASSERT_STR_EQ(JSTR(r, "observation/split"), "dev");
  ASSERT_OK(ludo_session_reset(s, J("{\"split\":null,\"index\":null}"), &out,
                               &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/question"), "none");
  ASSERT_OK(ludo_session_reset(s, J("{\"episode_id\":\"kept\"}"), &out,
                               &len));
  {
    static const struct {
      const char *opts, *msg;
    } bad[] = {
        {"{\"split\":\"test\",\"index\":3}",
         "ESCHEMA: reset.index: no task at index 3 of split 'test'"},
        {"{\"split\":\"test\",\"index\":-1}",
         "ESCHEMA: reset.index: no task at index -1 of split 'test'"},
        {"{\"index\":0}",
         "ESCHEMA: reset.split: required with reset.index"},
        {"{\"split\":\"tset\",\"index\":0}",
         "ESCHEMA: reset.split: unknown split 'tset'"},
        {"{\"split\":\"tset\"}", "ESCHEMA: reset.split: unknown split"},
        {"{\"split\":4}", "ESCHEMA: reset.split: expected string, got "
                          "integer"},
        {"{\"split\":\"test\",\"index\":\"0\"}",
         "ESCHEMA: reset.index: expected integer, got string"},
        {"{\"split\":\"test\",\"index\":0,\"task\":{\"q\":\"mine\"}}",
         "ESCHEMA: reset.task: the task is the one split and index select"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
      ASSERT_ERR(ludo_session_reset(s, bad[i].opts, strlen(bad[i].opts),
                                    &out, &len),
                 LUDO_ESCHEMA);
      ASSERT_STR_CONTAINS(ludo_session_errmsg(s), bad[i].msg);
    }
  }
  /* the failed resets changed nothing */
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "episode_id"), "kept");
  /* without tasks, split and index are the environment's business */
  ASSERT_OK(ludo_session_reset(e, J("{\"split\":\"x\",\"index\":\"y\"}"),
                               &out, &len));
  r = JPARSE(out, len);
  ASSERT_STR_EQ(JSTR(r, "observation/opts/split"), "x");
  ASSERT_STR_EQ(JSTR(r, "observation/opts/index"), "y");
  ludo_session_close(e);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* STYLE rule 25 on the tasks' paths, a reset that selects a task and a
 * tasks call (both load the tasks' code into the state first): the
 * runtime's allocator refusing its first, second, ... allocation of them
 * (the session's Lua memory comes from arena chunks, so these are the
 * chunks and the C buffers), and the session's memory cap swept from too
 * small upwards, so that the Lua of the calls runs out at every point.
 * Each failure is a clean ENOMEM, the session then works, nothing leaks
 * (test_rt_free). */
TEST_IMPL(tasks_alloc_faults) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, LISTED, NULL);
  const char *out;
  size_t len;
  long n;
  unsigned long faults = 0;
  for (n = 0;; n++) {
    ludo_session_t *s = test_open(env);
    unsigned long refused = test_heap.refused;
    int rc;
    test_heap.fail_sticky = 0;
    test_heap.fail_at = (long)test_heap.grows + n;
    rc = ludo_session_reset(s, J("{\"split\":\"test\",\"index\":2}"), &out,
                            &len);
    if (rc == 0)
      rc = ludo_session_tasks(
          s, J("{\"method\":\"range\",\"split\":\"train\",\"start\":1}"),
          &out, &len);
    test_heap.fail_at = -1;
    if (test_heap.refused == refused) { /* no allocation left to refuse */
      ASSERT_OK(rc);
      ludo_session_close(s);
      break;
    }
    faults++;
    if (rc != 0) {
      ASSERT_ERR(rc, LUDO_ENOMEM);
      ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ENOMEM");
    }
    ASSERT_OK(ludo_session_reset(s, J("{\"split\":\"test\",\"index\":0}"),
                                 &out, &len));
    ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/question"), "7*6");
    ASSERT_OK(ludo_session_tasks(
        s, J("{\"method\":\"count\",\"split\":\"train\"}"), &out, &len));
    ASSERT_STR_EQ(out, "5");
    ludo_session_close(s);
  }
  ASSERT_GE(faults, 3); /* chunks and buffers: fewer with shared code */
  test_rt_free(rt);
}

/* The same with the session's own Lua memory: its cap set at what the
 * fresh session holds plus 0, 64, 128, ... bytes, so that the two calls
 * run out at every point of the tasks' Lua (loading their code, the
 * lookups, the answer's JSON) until they fit. */
TEST_IMPL(tasks_lua_alloc_faults) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, LISTED, NULL);
  const char *out;
  size_t len, extra;
  unsigned long failures = 0;
  for (extra = 0;; extra += 64) {
    ludo_session_t *s = test_open(env);
    size_t cap = s->ps->st.cap;
    int rc;
    ASSERT_LT(extra, (size_t)1 << 20);
    s->ps->st.cap = s->ps->st.used + extra;
    rc = ludo_session_reset(s, J("{\"split\":\"test\",\"index\":2}"), &out,
                            &len);
    if (rc == 0)
      rc = ludo_session_tasks(
          s, J("{\"method\":\"range\",\"split\":\"train\",\"start\":1}"),
          &out, &len);
    s->ps->st.cap = cap;
    if (rc == 0) {
      ludo_session_close(s);
      break;
    }
    failures++;
    ASSERT_ERR(rc, LUDO_ENOMEM);
    ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ENOMEM");
    ASSERT_OK(ludo_session_reset(s, J("{\"split\":\"test\",\"index\":0}"),
                                 &out, &len));
    ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/question"), "7*6");
    ASSERT_OK(ludo_session_tasks(
        s, J("{\"method\":\"count\",\"split\":\"train\"}"), &out, &len));
    ASSERT_STR_EQ(out, "5");
    ludo_session_close(s);
  }
  ASSERT_GT(failures, 100);
  test_rt_free(rt);
}
