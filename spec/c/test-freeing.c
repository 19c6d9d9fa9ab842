/* test-freeing.c - what ludo_runtime_free does with what the host left:
 * servers still open or closing (on the runtime's own loop and on a
 * borrowed one), closes owed without a callback, callbacks it runs that
 * try to start work, and a script freed from inside its own non-blocking
 * call. Each must end with the documented outcome, every byte back (the
 * harness's allocator) and no use after free (make asan). Fixtures:
 * spec/fixtures/c/embedder, spec/fixtures/c/freeing. */
#include "helpers.h"

#include <lauxlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define EMB "spec/fixtures/c/embedder"
#define A(s) (s), strlen(s)
#define NAP "{\"mode\":\"sleep\",\"seconds\":3}"

static int nserver_closed, nclient_cb, client_status;

static void server_closed(void *ud) {
  (void)ud;
  nserver_closed++;
}

static void client_cb(ludo_client_t *c, int status, const char *data,
                      size_t len, void *ud) {
  (void)c;
  (void)data;
  (void)len;
  (void)ud;
  nclient_cb++;
  client_status = status;
}

static void set_flag(void *ud) { *(int *)ud = 1; }

/* A server of the embedder environment listening on a free port of
 * 127.0.0.1; its URL in url. */
static ludo_server_t *serve(ludo_env_t *env, char *url, size_t n) {
  ludo_server_t *sv;
  ASSERT_OK(ludo_server_new(env, NULL, &sv));
  if (ludo_server_listen(sv, "127.0.0.1", 0) != 0)
    FAIL("listen: %s", ludo_server_errmsg(sv));
  snprintf(url, n, "http://127.0.0.1:%d", ludo_server_port(sv));
  return sv;
}

/* Runs the loop (the host's, or the runtime's with polls) for `secs`
 * seconds, or until *flag is set. */
static void run_for(ludo_runtime_t *rt, uv_loop_t *loop, double secs,
                    const int *flag) {
  double t0 = test_now();
  while (test_now() - t0 < secs && (flag == NULL || *flag == 0)) {
    if (loop) {
      uv_run(loop, UV_RUN_NOWAIT);
    } else {
      ludo_runtime_poll(rt, 1000);
    }
    usleep(1000);
  }
}

/* A client of the same runtime connected to `url`, with a step of 3 s in
 * flight on the server's session: a session busy, a WebSocket open. */
static void client_busy(ludo_runtime_t *rt, uv_loop_t *loop,
                        const char *url) {
  ludo_client_t *c;
  nclient_cb = 0;
  ASSERT_OK(ludo_client_connect_async(rt, url, NULL, client_cb, NULL, &c));
  run_for(rt, loop, 5.0, &nclient_cb);
  ASSERT_EQ(nclient_cb, 1);
  ASSERT_OK(client_status);
  nclient_cb = 0;
  ASSERT_OK(ludo_client_step_async(c, A(NAP), client_cb, NULL));
  run_for(rt, loop, 0.2, NULL); /* the step reaches the server's session */
  ASSERT_EQ(nclient_cb, 0);
}

/* Frees a runtime on the borrowed `loop`, runs the loop to its end and
 * checks that nothing of ludo's is left on it or in the heap. */
static void free_borrowed(ludo_runtime_t *rt, uv_loop_t *loop) {
  ludo_runtime_free(rt);
  uv_run(loop, UV_RUN_DEFAULT); /* returns: no handle of ludo's left */
  ASSERT_OK(uv_loop_close(loop));
  ASSERT_EQ(test_heap.live, 0);
  ASSERT_EQ(test_heap.blocks, 0);
}

/* A server closed by the host, then the runtime freed on a borrowed loop,
 * as docs/embedding.md orders the shutdown: the server's memory went into
 * the freed runtime's heap (its close callbacks dropped the core's handle
 * count first), and its close callback never ran. Now it runs once, from
 * the free, and the host's next uv_run releases everything. */
static void close_then_free_borrowed(int with_client) {
  uv_loop_t loop;
  ludo_options_t o;
  ludo_runtime_t *rt;
  ludo_server_t *sv;
  char url[64];
  ASSERT_OK(uv_loop_init(&loop));
  test_options(&o);
  o.loop = &loop;
  rt = test_rt_new(&o);
  sv = serve(test_env_load(rt, EMB, NULL), url, sizeof url);
  if (with_client) client_busy(rt, &loop, url);
  nserver_closed = 0;
  ludo_server_close(sv, server_closed, NULL);
  ludo_runtime_free(rt);
  ASSERT_EQ(nserver_closed, 1); /* before anything was freed */
  if (with_client) {
    ASSERT_EQ(nclient_cb, 1);
    ASSERT_EQ(client_status, LUDO_ECANCELED);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(nserver_closed, 1);
  ASSERT_OK(uv_loop_close(&loop));
  ASSERT_EQ(test_heap.live, 0);
  ASSERT_EQ(test_heap.blocks, 0);
}

TEST_IMPL(freeing_server_close_then_free_borrowed) {
  close_then_free_borrowed(0);
}

TEST_IMPL(freeing_server_close_then_free_borrowed_client) {
  close_then_free_borrowed(1);
}

/* The same on the runtime's own loop: the close callback runs once, and
 * the free returns with every byte back. */
TEST_IMPL(freeing_server_close_then_free) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  char url[64];
  ludo_server_t *sv = serve(test_env_load(rt, EMB, NULL), url, sizeof url);
  client_busy(rt, NULL, url);
  nserver_closed = 0;
  ludo_server_close(sv, server_closed, NULL);
  test_rt_free(rt);
  ASSERT_EQ(nserver_closed, 1);
  ASSERT_EQ(nclient_cb, 1);
}

/* A server the host never closed: ludo_runtime_free closes it (it ran
 * its own loop forever before, the listener keeping it alive), without
 * waiting for the peers, also with a WebSocket open and a call of the
 * server's session in flight. */
TEST_IMPL(freeing_server_left_open) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  char url[64];
  double t0;
  serve(test_env_load(rt, EMB, NULL), url, sizeof url);
  client_busy(rt, NULL, url);
  t0 = test_now();
  test_rt_free(rt);
  ASSERT_DBL_LT(test_now() - t0, 2.0); /* the 3 s step was not waited */
  ASSERT_EQ(nclient_cb, 1);
  ASSERT_EQ(client_status, LUDO_ECANCELED);
}

/* The same on a borrowed loop: the host's last uv_run returns (it never
 * did), and the loop closes. */
TEST_IMPL(freeing_server_left_open_borrowed) {
  uv_loop_t loop;
  ludo_options_t o;
  ludo_runtime_t *rt;
  char url[64];
  ASSERT_OK(uv_loop_init(&loop));
  test_options(&o);
  o.loop = &loop;
  rt = test_rt_new(&o);
  serve(test_env_load(rt, EMB, NULL), url, sizeof url);
  client_busy(rt, &loop, url);
  free_borrowed(rt, &loop);
  ASSERT_EQ(nclient_cb, 1);
}

/* An environment a server uses cannot be freed: LUDO_EBUSY, until the
 * server is gone. */
TEST_IMPL(freeing_env_busy_with_server) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, EMB, NULL);
  ludo_server_t *sv;
  int done = 0;
  ASSERT_OK(ludo_server_new(env, NULL, &sv));
  ASSERT_ERR(ludo_env_free(env), LUDO_EBUSY);
  ludo_server_close(sv, set_flag, &done);
  ASSERT_ERR(ludo_env_free(env), LUDO_EBUSY); /* closing: still uses it */
  while (!done) ludo_runtime_poll(rt, 1000);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* A close without a callback is owed work like one with a callback:
 * ludo_runtime_run returned with the session still open (it was not
 * counted), and ludo_env_free then said EBUSY. Clients' too. */
TEST_IMPL(freeing_close_async_without_callback) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = test_env_load(rt, EMB, NULL);
  ludo_session_t *s = test_open(env);
  ludo_client_t *c;
  ludo_stats_t st;
  ASSERT_OK(ludo_client_connect_async(rt, "http://127.0.0.1:1", NULL,
                                      client_cb, NULL, &c));
  ASSERT_OK(ludo_session_close_async(s, NULL, NULL));
  ASSERT_OK(ludo_client_close_async(c, NULL, NULL));
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_UINT_EQ(st.calls, 2); /* both closes are owed */
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_UINT_EQ(st.sessions, 0);
  ASSERT_UINT_EQ(st.calls, 0);
  ASSERT_OK(ludo_env_free(env));
  test_rt_free(rt);
}

/* ---- callbacks run by ludo_runtime_free start nothing ---------------- */

#define MAX_TRIES 40

static struct {
  ludo_runtime_t *rt;
  ludo_env_t *env;
  ludo_session_t *s[2];
  ludo_script_t *sc;
  ludo_client_t *c;
  ludo_server_t *sv;
  const char *name[MAX_TRIES];
  int rc[MAX_TRIES];
  int n, ran, late;
} fc;

static void try_rc(const char *name, int rc) {
  if (fc.n >= MAX_TRIES) FAIL("too many entry points: raise MAX_TRIES");
  fc.name[fc.n] = name;
  fc.rc[fc.n++] = rc;
}

static void late_call(ludo_session_t *s, int st, const char *d, size_t l,
                      void *ud) {
  (void)s, (void)st, (void)d, (void)l, (void)ud;
  fc.late++;
}
static void late_batch(size_t i, ludo_session_t *s, int st, const char *d,
                       size_t l, void *ud) {
  (void)i, (void)s, (void)st, (void)d, (void)l, (void)ud;
  fc.late++;
}
static void late_open(ludo_session_t *s, int st, void *ud) {
  (void)s, (void)st, (void)ud;
  fc.late++;
}
static void late_close(int st, void *ud) {
  (void)st, (void)ud;
  fc.late++;
}
static void late_script(ludo_script_t *sc, int st, const char *d, size_t l,
                        void *ud) {
  (void)sc, (void)st, (void)d, (void)l, (void)ud;
  fc.late++;
}
static void late_client(ludo_client_t *c, int st, const char *d, size_t l,
                        void *ud) {
  (void)c, (void)st, (void)d, (void)l, (void)ud;
  fc.late++;
}
static void late_void(void *ud) {
  (void)ud;
  fc.late++;
}

static int noop_fn(lua_State *L) {
  (void)L;
  return 0;
}

static const ludo_host_func_t noop_funcs[] = {
    {"noop", (int (*)(void *))(void (*)(void))noop_fn}, {NULL, NULL}};

/* Every session entry point that starts work, on s (idle). */
static void try_sessions(ludo_session_t *s) {
  ludo_session_t *ss[1] = {s}, *got;
  const char *acts[1] = {"{\"mode\":\"ok\"}"}, *out;
  size_t lens[1] = {strlen(acts[0])}, ol;
  try_rc("session_open", ludo_session_open(fc.env, &got));
  try_rc("session_open_async",
         ludo_session_open_async(fc.env, late_open, NULL));
  try_rc("session_reset", ludo_session_reset(s, NULL, 0, &out, &ol));
  try_rc("session_step", ludo_session_step(s, A(acts[0]), &out, &ol));
  try_rc("session_state", ludo_session_state(s, &out, &ol));
  try_rc("session_call_tool", ludo_session_call_tool(
                                  s, A("{\"name\":\"x\"}"), &out, &ol));
  try_rc("session_tasks", ludo_session_tasks(
                              s, A("{\"method\":\"splits\"}"), &out, &ol));
  try_rc("session_reset_async",
         ludo_session_reset_async(s, NULL, 0, late_call, NULL));
  try_rc("session_step_async",
         ludo_session_step_async(s, A(acts[0]), late_call, NULL));
  try_rc("session_state_async",
         ludo_session_state_async(s, late_call, NULL));
  try_rc("session_call_tool_async",
         ludo_session_call_tool_async(s, A("{\"name\":\"x\"}"), late_call,
                                      NULL));
  try_rc("session_tasks_async",
         ludo_session_tasks_async(s, A("{\"method\":\"splits\"}"),
                                  late_call, NULL));
  try_rc("step_batch",
         ludo_session_step_batch(ss, acts, lens, 1, late_batch, NULL));
  try_rc("step_batch_async",
         ludo_session_step_batch_async(ss, acts, lens, 1, late_batch,
                                       NULL));
  try_rc("session_close_async",
         ludo_session_close_async(s, late_close, NULL));
}

/* Every client entry point that starts work (the close last: it closes
 * the client all the same). */
static void try_clients(void) {
  ludo_client_t *got;
  const char *out;
  size_t ol;
  try_rc("client_connect",
         ludo_client_connect(fc.rt, "http://127.0.0.1:1", NULL, &got));
  try_rc("client_connect_async",
         ludo_client_connect_async(fc.rt, "http://127.0.0.1:1", NULL,
                                   late_client, NULL, &got));
  try_rc("client_reset", ludo_client_reset(fc.c, NULL, 0, &out, &ol));
  try_rc("client_step", ludo_client_step(fc.c, A("{}"), &out, &ol));
  try_rc("client_state", ludo_client_state(fc.c, &out, &ol));
  try_rc("client_list_tools", ludo_client_list_tools(fc.c, &out, &ol));
  try_rc("client_call_tool",
         ludo_client_call_tool(fc.c, A("{\"name\":\"x\"}"), &out, &ol));
  try_rc("client_info", ludo_client_info(fc.c, &out, &ol));
  try_rc("client_reset_async",
         ludo_client_reset_async(fc.c, NULL, 0, late_client, NULL));
  try_rc("client_step_async",
         ludo_client_step_async(fc.c, A("{}"), late_client, NULL));
  try_rc("client_state_async",
         ludo_client_state_async(fc.c, late_client, NULL));
  try_rc("client_list_tools_async",
         ludo_client_list_tools_async(fc.c, late_client, NULL));
  try_rc("client_call_tool_async",
         ludo_client_call_tool_async(fc.c, A("{\"name\":\"x\"}"),
                                     late_client, NULL));
  try_rc("client_info_async",
         ludo_client_info_async(fc.c, late_client, NULL));
  try_rc("client_close_async",
         ludo_client_close_async(fc.c, late_void, NULL));
}

/* The rest: the runtime, environments, scripts and servers. */
static void try_others(void) {
  ludo_host_module_t m = {"late", noop_funcs, NULL};
  ludo_env_t *env;
  ludo_script_t *sc;
  ludo_server_t *sv;
  const char *out;
  size_t ol;
  try_rc("runtime_add_module", ludo_runtime_add_module(fc.rt, &m));
  try_rc("env_load", ludo_env_load(fc.rt, EMB, NULL, &env));
  try_rc("env_prewarm", ludo_env_prewarm(fc.env, 2));
  try_rc("script_open", ludo_script_open(fc.rt, "napper", EMB, &sc));
  try_rc("script_call",
         ludo_script_call(fc.sc, "nap", "[0]", 3, &out, &ol));
  try_rc("script_call_async",
         ludo_script_call_async(fc.sc, "nap", "[0]", 3, late_script, NULL));
  try_rc("server_new", ludo_server_new(fc.env, NULL, &sv));
  try_rc("server_listen", ludo_server_listen(fc.sv, "127.0.0.1", 0));
}

static void first_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  (void)s;
  (void)data;
  (void)len;
  (void)ud;
  ASSERT_EQ(status, LUDO_ECANCELED);
  fc.ran++;
  try_sessions(fc.s[1]);
  try_clients();
  try_others();
}

/* From a callback ludo_runtime_free runs, every entry point that starts
 * work returns LUDO_ECLOSED and runs no callback (a batch, a connect, a
 * server, a module were accepted; the batch's callback then ran). */
TEST_IMPL(freeing_callbacks_start_nothing) {
  int i;
  memset(&fc, 0, sizeof fc);
  fc.rt = test_rt_new(NULL);
  fc.env = test_env_load(fc.rt, EMB, NULL);
  fc.s[0] = test_open(fc.env);
  fc.s[1] = test_open(fc.env);
  ASSERT_OK(ludo_script_open(fc.rt, "napper", EMB, &fc.sc));
  ASSERT_OK(ludo_client_connect_async(fc.rt, "http://127.0.0.1:1", NULL,
                                      client_cb, NULL, &fc.c));
  ASSERT_OK(ludo_server_new(fc.env, NULL, &fc.sv));
  ASSERT_OK(ludo_session_step_async(fc.s[0], A(NAP), first_cb, NULL));
  test_rt_free(fc.rt);
  ASSERT_EQ(fc.ran, 1);
  ASSERT_EQ(fc.n, 38); /* 15 of sessions, 15 of clients, 8 others */
  for (i = 0; i < fc.n; i++)
    if (fc.rc[i] != LUDO_ECLOSED)
      FAIL("%s from a callback of ludo_runtime_free returned %s, not "
           "ECLOSED", fc.name[i], ludo_err_name(fc.rc[i]));
  ASSERT_EQ(fc.late, 0);
}

/* ---- a script freed from inside its own non-blocking call ------------ */

static ludo_script_t *self_sc;
static int self_ncb, self_status;
static char self_msg[128];

static int free_self(lua_State *L) {
  (void)L;
  ludo_script_free(self_sc);
  return 0;
}

static const ludo_host_func_t self_funcs[] = {
    {"free_self", (int (*)(void *))(void (*)(void))free_self},
    {NULL, NULL}};

static void self_cb(ludo_script_t *sc, int status, const char *data,
                    size_t len, void *ud) {
  (void)ud;
  self_ncb++;
  self_status = status;
  snprintf(self_msg, sizeof self_msg, "%.*s", (int)len, data);
  /* being freed: refused, and a second free does nothing */
  ASSERT_ERR(ludo_script_call_async(sc, "go", NULL, 0, self_cb, NULL),
             LUDO_ECLOSED);
  ludo_script_free(sc);
}

/* ludo_script_free from a host function of the script's own
 * non-blocking call freed the state that ran it (a use after free): it is
 * deferred like the blocking call's, the call ends with ECANCELED and the
 * script goes as its Lua returns. */
TEST_IMPL(freeing_script_free_inside_own_async_call) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_host_module_t m = {"freeing", self_funcs, NULL};
  ludo_stats_t st;
  ASSERT_OK(ludo_runtime_add_module(rt, &m));
  ASSERT_OK(ludo_script_open(rt, "selffree", "spec/fixtures/c/freeing",
                             &self_sc));
  ASSERT_OK(ludo_script_call_async(self_sc, "go", NULL, 0, self_cb, NULL));
  ASSERT_OK(ludo_runtime_run(rt));
  ASSERT_EQ(self_ncb, 1);
  ASSERT_EQ(self_status, LUDO_ECANCELED);
  ASSERT_STR_CONTAINS(self_msg, "the script was freed");
  ASSERT_OK(ludo_runtime_stats(rt, &st));
  ASSERT_UINT_EQ(st.calls, 0);
  test_rt_free(rt);
}
