/* test-host.c - host-registered C functions (ludo_host_module_t): their
 * `ud` upvalue, ludo_session_from_lua() and errors raised from C. The
 * fixture spec/fixtures/c/host requires the module "probe". */
#include "helpers.h"

#include <lauxlib.h>
#include <lua.h>

#define HOST_ENV "spec/fixtures/c/host"

/* The host's data behind `ud`. */
typedef struct probe_s {
  const char *tag;
  int calls;
  ludo_session_t *last; /* session of the last call */
} probe_t;

/* probe.twice(n) -> 2n, tag. [-0, +2, v] */
static int probe_twice(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  probe_t *p = lua_touserdata(L, lua_upvalueindex(1));
  p->calls++;
  p->last = ludo_session_from_lua(L);
  lua_pushinteger(L, 2 * n);
  lua_pushstring(L, p->tag);
  return 2;
}

/* probe.fail(n): raises "probe refused <n>". [-0, +0, v] */
static int probe_fail(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  probe_t *p = lua_touserdata(L, lua_upvalueindex(1));
  p->calls++;
  return luaL_error(L, "probe refused %d", (int)n);
}

/* probe.who() -> the calling session's id. [-0, +1, m] */
static int probe_who(lua_State *L) {
  ludo_session_t *s = ludo_session_from_lua(L);
  lua_pushstring(L, s ? ludo_session_id(s) : "(none)");
  return 1;
}

#define HOST_FN(f) ((int (*)(void *))(void (*)(void))(f))

static const ludo_host_func_t probe_funcs[] = {
    {"twice", HOST_FN(probe_twice)},
    {"fail", HOST_FN(probe_fail)},
    {"who", HOST_FN(probe_who)},
    {NULL, NULL}};

static void probe_options(ludo_env_options_t *o, ludo_host_module_t *m,
                          probe_t *p) {
  m->name = "probe";
  m->funcs = probe_funcs;
  m->ud = p;
  ludo_env_options_init(o);
  o->modules = m;
  o->nmodules = 1;
}

/* The function gets its ud, and ludo_session_from_lua() names the session
 * that runs it. */
TEST_IMPL(host_function_ud_and_session) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  probe_t p = {"probe-ud", 0, NULL};
  ludo_host_module_t m;
  ludo_env_options_t o;
  ludo_env_t *env;
  ludo_session_t *s1, *s2;
  const char *out;
  size_t len;
  json_t *r;

  probe_options(&o, &m, &p);
  env = test_env_load(rt, HOST_ENV, &o);
  s1 = test_open(env);
  s2 = test_open(env);
  ASSERT_OK(ludo_session_reset(s1, NULL, 0, &out, &len));
  ASSERT_OK(ludo_session_reset(s2, NULL, 0, &out, &len));
  ASSERT_EQ(p.calls, 0);

  ASSERT_OK(ludo_session_step(s1, J("{\"op\":\"twice\",\"n\":21}"), &out,
                              &len));
  r = JPARSE(out, len);
  ASSERT_EQ(JINT(r, "observation/value"), 42);
  ASSERT_STR_EQ(JSTR(r, "observation/tag"), "probe-ud");
  ASSERT_EQ(p.calls, 1);
  ASSERT_PTR_EQ(p.last, s1);

  ASSERT_OK(ludo_session_step(s2, J("{\"op\":\"twice\",\"n\":-4}"), &out,
                              &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), -8);
  ASSERT_EQ(p.calls, 2);
  ASSERT_PTR_EQ(p.last, s2);

  ASSERT_OK(ludo_session_step(s2, J("{\"op\":\"who\"}"), &out, &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/who"),
                ludo_session_id(s2));
  ASSERT_OK(ludo_session_step(s1, J("{\"op\":\"who\"}"), &out, &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/who"),
                ludo_session_id(s1));

  ludo_session_close(s1);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* luaL_error in a host function: the step fails with ESCRIPT and the
 * message; the session goes on. */
TEST_IMPL(host_function_error) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  probe_t p = {"t", 0, NULL};
  ludo_host_module_t m;
  ludo_env_options_t o;
  ludo_env_t *env;
  ludo_session_t *s;
  const char *out;
  size_t len;

  probe_options(&o, &m, &p);
  env = test_env_load(rt, HOST_ENV, &o);
  s = test_open(env);
  ASSERT_OK(ludo_session_reset(s, NULL, 0, &out, &len));
  ASSERT_ERR(ludo_session_step(s, J("{\"op\":\"fail\",\"n\":7}"), &out, &len),
             LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "ESCRIPT");
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "probe refused 7");
  ASSERT_EQ(p.calls, 1);
  /* A wrong argument type is a Lua error from luaL_checkinteger. */
  ASSERT_ERR(ludo_session_step(s, J("{\"op\":\"fail\",\"n\":1.5}"), &out,
                               &len),
             LUDO_ESCRIPT);
  ASSERT_STR_CONTAINS(ludo_session_errmsg(s), "number has no integer");
  /* Still usable. */
  ASSERT_OK(ludo_session_step(s, J("{\"op\":\"twice\",\"n\":5}"), &out,
                              &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), 10);
  ASSERT_OK(ludo_session_state(s, &out, &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "step_count"), 1);
  ludo_session_close(s);
  test_rt_free(rt);
}

/* Without the host module the environment cannot load; the message says
 * which module is missing. */
TEST_IMPL(host_module_missing) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  ludo_env_t *env = NULL;
  int rc = ludo_env_load(rt, HOST_ENV, NULL, &env);
  ASSERT_TRUE(rc == LUDO_ELOAD || rc == LUDO_ENOENT);
  ASSERT_NULL(env);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "probe");
  test_rt_free(rt);
}

/* ludo_session_from_lua() of a state that is not a session's is NULL. */
TEST_IMPL(host_session_from_foreign_state) {
  lua_State *L = luaL_newstate();
  ASSERT_NOT_NULL(L);
  ASSERT_NULL(ludo_session_from_lua(L));
  ASSERT_NULL(ludo_session_from_lua(NULL));
  lua_close(L);
}

/* ludo_runtime_add_module: every environment of the runtime finds the
 * module, with the same ud and session as an environment's own; an
 * environment's module of the same name comes first; the struct is
 * copied (the caller's may go away). */
TEST_IMPL(host_runtime_module) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  probe_t rtp = {"runtime-ud", 0, NULL}, envp = {"env-ud", 0, NULL};
  ludo_host_module_t m, em;
  ludo_env_options_t o;
  ludo_env_t *env, *env2;
  ludo_session_t *s, *s2;
  const char *out;
  size_t len;

  {
    ludo_host_module_t tmp = {"probe", probe_funcs, &rtp};
    ASSERT_OK(ludo_runtime_add_module(rt, &tmp));
    memset(&tmp, 0, sizeof tmp); /* copied: this does not matter */
  }
  env = test_env_load(rt, HOST_ENV, NULL);
  s = test_open(env);
  ASSERT_OK(ludo_session_step(s, J("{\"op\":\"twice\",\"n\":3}"), &out,
                              &len));
  ASSERT_EQ(JINT(JPARSE(out, len), "observation/value"), 6);
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/tag"), "runtime-ud");
  ASSERT_EQ(rtp.calls, 1);
  ASSERT_PTR_EQ(rtp.last, s);

  /* The environment's own module of that name wins. */
  probe_options(&o, &em, &envp);
  env2 = test_env_load(rt, HOST_ENV, &o);
  s2 = test_open(env2);
  ASSERT_OK(ludo_session_step(s2, J("{\"op\":\"twice\",\"n\":4}"), &out,
                              &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/tag"), "env-ud");
  ASSERT_EQ(envp.calls, 1);
  ASSERT_EQ(rtp.calls, 1);

  /* Refused: a name taken, ludo's own names, bad names, no functions;
   * each says why, and nothing changes. */
  m.name = "probe";
  m.funcs = probe_funcs;
  m.ud = &envp;
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "'probe' is already");
  m.name = "ludo.json";
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "reserved");
  m.name = "ludo";
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  m.name = "ludox"; /* only "ludo" and "ludo.*" are ludo's */
  ASSERT_OK(ludo_runtime_add_module(rt, &m));
  m.name = "no/slash";
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  ASSERT_STR_CONTAINS(ludo_runtime_errmsg(rt), "'no/slash'");
  m.name = "";
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  m.name = "nofuncs";
  m.funcs = NULL;
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  m.name = NULL;
  m.funcs = probe_funcs;
  ASSERT_ERR(ludo_runtime_add_module(rt, &m), LUDO_EINVAL);
  ASSERT_ERR(ludo_runtime_add_module(rt, NULL), LUDO_EINVAL);
  ASSERT_ERR(ludo_runtime_add_module(NULL, &m), LUDO_EINVAL);

  /* Still the first registration. */
  ASSERT_OK(ludo_session_step(s, J("{\"op\":\"twice\",\"n\":1}"), &out,
                              &len));
  ASSERT_STR_EQ(JSTR(JPARSE(out, len), "observation/tag"), "runtime-ud");
  ludo_session_close(s);
  ludo_session_close(s2);
  test_rt_free(rt);
}

/* A module registered after an environment loaded is found by the
 * environment's next require: here a script's (scripts see the runtime's
 * modules too). */
TEST_IMPL(host_runtime_module_late) {
  ludo_runtime_t *rt = test_rt_new(NULL);
  probe_t p = {"late", 0, (ludo_session_t *)&p}; /* not NULL: it is set */
  ludo_host_module_t m = {"probe", probe_funcs, &p};
  ludo_script_t *sc;
  const char *out;
  size_t len;
  ASSERT_OK(ludo_script_open(rt, "uses_probe", "spec/fixtures/c/host_script",
                             &sc));
  ASSERT_ERR(ludo_script_call(sc, "twice", "[2]", 3, &out, &len),
             LUDO_ENOENT);
  ASSERT_STR_CONTAINS(ludo_script_errmsg(sc), "'probe' not found");
  ASSERT_OK(ludo_runtime_add_module(rt, &m));
  ASSERT_OK(ludo_script_call(sc, "twice", "[2]", 3, &out, &len));
  ASSERT_STR_EQ(out, "4");
  ASSERT_EQ(p.calls, 1);
  /* a script's state is no session's (it returned the script, which the
   * host then wrote into as a session) */
  ASSERT_NULL(p.last);
  ludo_script_free(sc);
  test_rt_free(rt);
}
