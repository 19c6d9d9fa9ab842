/* host.c - "ludo.host": the public C API (ludo.h) as a Lua module, so a
 * stock lua5.4 (busted specs, Lua tools) can host ludo runtimes:
 *
 *   local host = require("ludo.host")
 *   local rt = host.runtime{memory_cap = 8 << 20, cpu_budget_ms = 50}
 *   local env = assert(rt:load("examples/echo"))
 *   local s = assert(env:open())
 *   local obs = assert(s:reset('{"seed": 1}'))
 *   local out, err, code = s:step('{"message": "hi"}')
 *   local e = s:error() -- {code, message, call, phase, where} or nil
 *
 * Failures return nil, message, code-name ("ESCHEMA"). Built only on
 * ludo.h: this file is a client of the API like any embedding program. */
#include <lauxlib.h>
#include <string.h>

#include "ludo.h"

#define RT_MT "ludo.host.runtime"
#define ENV_MT "ludo.host.env"
#define SESSION_MT "ludo.host.session"

typedef struct {
  ludo_runtime_t *rt;
  lua_State *L;  /* the host thread currently calling in */
  int logs_ref;  /* table of {level, who, msg} */
} rt_box_t;

typedef struct {
  ludo_env_t *env;
  rt_box_t *rtb;
} env_box_t;

typedef struct {
  ludo_session_t *s;
  rt_box_t *rtb;
  int cb_ref;
} session_box_t;

static rt_box_t *check_rt(lua_State *L, int i) {
  rt_box_t *b = luaL_checkudata(L, i, RT_MT);
  if (b->rt == NULL) luaL_error(L, "ludo.host: runtime is closed");
  b->L = L;
  return b;
}

static env_box_t *check_env(lua_State *L, int i) {
  env_box_t *b = luaL_checkudata(L, i, ENV_MT);
  if (b->env == NULL || b->rtb->rt == NULL)
    luaL_error(L, "ludo.host: environment is freed");
  b->rtb->L = L;
  return b;
}

static session_box_t *check_session(lua_State *L, int i) {
  session_box_t *b = luaL_checkudata(L, i, SESSION_MT);
  if (b->s == NULL || b->rtb->rt == NULL)
    luaL_error(L, "ludo.host: session is closed");
  b->rtb->L = L;
  return b;
}

static int push_fail(lua_State *L, int rc, const char *msg) {
  luaL_pushfail(L);
  lua_pushstring(L, msg && *msg ? msg : ludo_strerror(rc));
  lua_pushstring(L, ludo_err_name(rc));
  return 3;
}

static void log_cb(void *ud, ludo_log_level_t level, const char *who,
                   const char *msg, size_t len) {
  rt_box_t *b = ud;
  lua_State *L = b->L;
  static const char *const names[] = {"debug", "info", "warn", "error"};
  if (L == NULL || !lua_checkstack(L, 4)) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->logs_ref);
  lua_createtable(L, 3, 0);
  lua_pushstring(L, names[level & 3]);
  lua_rawseti(L, -2, 1);
  lua_pushstring(L, who);
  lua_rawseti(L, -2, 2);
  lua_pushlstring(L, msg, len);
  lua_rawseti(L, -2, 3);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_pop(L, 1);
}

static lua_Integer opt_field(lua_State *L, const char *k, lua_Integer d) {
  lua_Integer v;
  lua_getfield(L, 1, k);
  v = luaL_optinteger(L, -1, d);
  lua_pop(L, 1);
  return v;
}

/* host.runtime([opts]) -> runtime */
static int ludo_l_host_runtime(lua_State *L) {
  ludo_options_t o;
  rt_box_t *b;
  int rc;
  ludo_options_init(&o);
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    o.memory_cap = (size_t)opt_field(L, "memory_cap", (lua_Integer)o.memory_cap);
    o.cpu_budget_ms = (uint32_t)opt_field(L, "cpu_budget_ms", o.cpu_budget_ms);
    o.max_instructions = (uint64_t)opt_field(L, "max_instructions", 0);
    o.prewarm = (unsigned)opt_field(L, "prewarm", o.prewarm);
    o.max_input_bytes = (size_t)opt_field(L, "max_input_bytes",
                                          (lua_Integer)o.max_input_bytes);
    o.wall_limit_ms = (uint32_t)opt_field(L, "wall_limit_ms",
                                          o.wall_limit_ms);
    o.lua_llm = (unsigned)opt_field(L, "lua_llm", 0); /* LUDO_LUA_LLM_* */
    lua_getfield(L, 1, "module_path");
    o.module_path = lua_tostring(L, -1); /* copied by ludo_runtime_new */
  }
  b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  b->logs_ref = LUA_NOREF;
  luaL_setmetatable(L, RT_MT);
  lua_newtable(L);
  b->logs_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  b->L = L;
  o.log = log_cb;
  o.log_ud = b;
  rc = ludo_runtime_new(&b->rt, &o);
  if (rc != 0) return push_fail(L, rc, NULL);
  return 1;
}

static int rt_close(lua_State *L) {
  rt_box_t *b = luaL_checkudata(L, 1, RT_MT);
  if (b->rt) {
    b->L = L;
    ludo_runtime_free(b->rt);
    b->rt = NULL;
  }
  return 0;
}

static int rt_gc(lua_State *L) {
  rt_box_t *b = luaL_checkudata(L, 1, RT_MT);
  if (b->rt) {
    b->L = NULL; /* no logging into a closing state */
    ludo_runtime_free(b->rt);
    b->rt = NULL;
  }
  return 0;
}

/* rt:load(path) -> env | nil, msg, code */
static int rt_load(lua_State *L) {
  rt_box_t *b = check_rt(L, 1);
  const char *path = luaL_checkstring(L, 2);
  env_box_t *e;
  ludo_env_t *env;
  int rc = ludo_env_load(b->rt, path, NULL, &env);
  if (rc != 0) return push_fail(L, rc, ludo_runtime_errmsg(b->rt));
  e = lua_newuserdatauv(L, sizeof *e, 1);
  e->env = env;
  e->rtb = b;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* keep the runtime alive */
  luaL_setmetatable(L, ENV_MT);
  return 1;
}

/* rt:poll() -> calls in flight */
static int rt_poll(lua_State *L) {
  rt_box_t *b = check_rt(L, 1);
  lua_pushinteger(L, ludo_runtime_poll(b->rt, (uint32_t)luaL_optinteger(L, 2, 0)));
  return 1;
}

/* rt:run() -> true | nil, msg, code */
static int rt_run(lua_State *L) {
  rt_box_t *b = check_rt(L, 1);
  int rc = ludo_runtime_run(b->rt);
  if (rc != 0) return push_fail(L, rc, NULL);
  lua_pushboolean(L, 1);
  return 1;
}

/* rt:stats() -> {lua_bytes, heap_bytes, sessions, prewarmed, calls} */
static int rt_stats(lua_State *L) {
  rt_box_t *b = check_rt(L, 1);
  ludo_stats_t st;
  ludo_runtime_stats(b->rt, &st);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)st.lua_bytes);
  lua_setfield(L, -2, "lua_bytes");
  lua_pushinteger(L, (lua_Integer)st.heap_bytes);
  lua_setfield(L, -2, "heap_bytes");
  lua_pushinteger(L, st.sessions);
  lua_setfield(L, -2, "sessions");
  lua_pushinteger(L, st.prewarmed);
  lua_setfield(L, -2, "prewarmed");
  lua_pushinteger(L, st.calls);
  lua_setfield(L, -2, "calls");
  return 1;
}

/* rt:logs() -> list of {level, who, message}; clears it */
static int rt_logs(lua_State *L) {
  rt_box_t *b = luaL_checkudata(L, 1, RT_MT);
  lua_rawgeti(L, LUA_REGISTRYINDEX, b->logs_ref);
  lua_newtable(L);
  lua_rawseti(L, LUA_REGISTRYINDEX, b->logs_ref);
  return 1;
}

static int env_info(lua_State *L) {
  env_box_t *e = check_env(L, 1);
  size_t n;
  const char *s = ludo_env_info(e->env, &n);
  lua_pushlstring(L, s, n);
  return 1;
}

static int env_prewarm(lua_State *L) {
  env_box_t *e = check_env(L, 1);
  int rc = ludo_env_prewarm(e->env, (unsigned)luaL_checkinteger(L, 2));
  if (rc != 0) return push_fail(L, rc, ludo_runtime_errmsg(e->rtb->rt));
  lua_pushboolean(L, 1);
  return 1;
}

static int env_free(lua_State *L) {
  env_box_t *e = check_env(L, 1);
  int rc = ludo_env_free(e->env);
  if (rc != 0) return push_fail(L, rc, NULL);
  e->env = NULL;
  lua_pushboolean(L, 1);
  return 1;
}

/* env:open() -> session | nil, msg, code */
static int env_open(lua_State *L) {
  env_box_t *e = check_env(L, 1);
  session_box_t *sb;
  ludo_session_t *s;
  int rc = ludo_session_open(e->env, &s);
  if (rc != 0) return push_fail(L, rc, ludo_runtime_errmsg(e->rtb->rt));
  sb = lua_newuserdatauv(L, sizeof *sb, 1);
  sb->s = s;
  sb->rtb = e->rtb;
  sb->cb_ref = LUA_NOREF;
  lua_getiuservalue(L, 1, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, SESSION_MT);
  return 1;
}

static int call_result(lua_State *L, session_box_t *sb, int rc,
                       const char *out, size_t n) {
  if (rc != 0) return push_fail(L, rc, ludo_session_errmsg(sb->s));
  lua_pushlstring(L, out, n);
  return 1;
}

static int s_reset(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  size_t len = 0, n = 0;
  const char *in = luaL_optlstring(L, 2, NULL, &len), *out = NULL;
  int rc = ludo_session_reset(sb->s, in, len, &out, &n);
  return call_result(L, sb, rc, out, n);
}

static int s_step(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  size_t len, n = 0;
  const char *in = luaL_checklstring(L, 2, &len), *out = NULL;
  int rc = ludo_session_step(sb->s, in, len, &out, &n);
  return call_result(L, sb, rc, out, n);
}

static int s_state(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  size_t n = 0;
  const char *out = NULL;
  int rc = ludo_session_state(sb->s, &out, &n);
  return call_result(L, sb, rc, out, n);
}

/* Delivers a completion to the Lua callback: fn(ok, data, code). */
static void async_cb(ludo_session_t *s, int status, const char *data,
                     size_t len, void *ud) {
  session_box_t *sb = ud;
  lua_State *L = sb->rtb->L;
  int ref = sb->cb_ref;
  (void)s;
  sb->cb_ref = LUA_NOREF;
  if (L == NULL) {
    return;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  lua_pushboolean(L, status == 0);
  lua_pushlstring(L, data, len);
  lua_pushstring(L, ludo_err_name(status));
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    /* Keep the error: re-raised by the poll/run that delivered it. */
    lua_setfield(L, LUA_REGISTRYINDEX, "ludo.host.cberror");
  }
}

static int start_async(lua_State *L, int kind) {
  session_box_t *sb = check_session(L, 1);
  size_t len = 0;
  const char *in = NULL;
  int fi = kind == 3 ? 2 : 3, rc;
  if (kind != 3) in = luaL_optlstring(L, 2, NULL, &len);
  luaL_checktype(L, fi, LUA_TFUNCTION);
  if (sb->cb_ref != LUA_NOREF) return push_fail(L, LUDO_EBUSY, NULL);
  lua_pushvalue(L, fi);
  sb->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (kind == 1)
    rc = ludo_session_reset_async(sb->s, in, len, async_cb, sb);
  else if (kind == 2)
    rc = ludo_session_step_async(sb->s, in, len, async_cb, sb);
  else
    rc = ludo_session_state_async(sb->s, async_cb, sb);
  if (rc != 0) {
    luaL_unref(L, LUA_REGISTRYINDEX, sb->cb_ref);
    sb->cb_ref = LUA_NOREF;
    return push_fail(L, rc, NULL);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int s_reset_async(lua_State *L) { return start_async(L, 1); }
static int s_step_async(lua_State *L) { return start_async(L, 2); }
static int s_state_async(lua_State *L) { return start_async(L, 3); }

static int s_close(lua_State *L) {
  session_box_t *sb = luaL_checkudata(L, 1, SESSION_MT);
  if (sb->s != NULL && sb->rtb->rt != NULL) {
    sb->rtb->L = L;
    ludo_session_close(sb->s);
  }
  sb->s = NULL;
  return 0;
}

static int s_gc(lua_State *L) {
  session_box_t *sb = luaL_checkudata(L, 1, SESSION_MT);
  if (sb->s != NULL && sb->rtb->rt != NULL) {
    sb->rtb->L = NULL;
    ludo_session_close(sb->s);
  }
  sb->s = NULL;
  return 0;
}

/* s:llm_usage() -> {calls, failures, retries, prompt_tokens,
 * completion_tokens, latency_ms} (ludo_session_llm_usage) */
static int s_llm_usage(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  ludo_llm_usage_t u;
  ludo_session_llm_usage(sb->s, &u);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)u.calls);
  lua_setfield(L, -2, "calls");
  lua_pushinteger(L, (lua_Integer)u.failures);
  lua_setfield(L, -2, "failures");
  lua_pushinteger(L, (lua_Integer)u.retries);
  lua_setfield(L, -2, "retries");
  lua_pushinteger(L, (lua_Integer)u.prompt_tokens);
  lua_setfield(L, -2, "prompt_tokens");
  lua_pushinteger(L, (lua_Integer)u.completion_tokens);
  lua_setfield(L, -2, "completion_tokens");
  lua_pushnumber(L, u.latency_ms);
  lua_setfield(L, -2, "latency_ms");
  return 1;
}

static int s_id(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  lua_pushstring(L, ludo_session_id(sb->s));
  return 1;
}

static int s_memory(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  lua_pushinteger(L, (lua_Integer)ludo_session_memory(sb->s));
  return 1;
}

/* s:error() -> {code, message, call, phase, where} of the session's last
 * failed call (ludo_session_error; code is the name, "ETIMEOUT"), or nil
 * when no call has failed. */
static int s_error(lua_State *L) {
  session_box_t *sb = check_session(L, 1);
  ludo_error_t e;
  if (ludo_session_error(sb->s, &e) != 0 || e.code == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, 0, 5);
  lua_pushstring(L, ludo_err_name(e.code));
  lua_setfield(L, -2, "code");
  lua_pushstring(L, e.message);
  lua_setfield(L, -2, "message");
  lua_pushstring(L, e.call);
  lua_setfield(L, -2, "call");
  lua_pushstring(L, e.phase);
  lua_setfield(L, -2, "phase");
  lua_pushstring(L, e.where);
  lua_setfield(L, -2, "where");
  return 1;
}

static int check_cberror(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "ludo.host.cberror") != LUA_TNIL) {
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "ludo.host.cberror");
    return lua_error(L);
  }
  lua_pop(L, 1);
  return 0;
}

static int rt_poll_checked(lua_State *L) {
  int n = rt_poll(L);
  check_cberror(L);
  return n;
}

static int rt_run_checked(lua_State *L) {
  int n = rt_run(L);
  check_cberror(L);
  return n;
}

static void newmeta(lua_State *L, const char *name, const luaL_Reg *m,
                    lua_CFunction gc) {
  luaL_newmetatable(L, name);
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
  luaL_setfuncs(L, m, 0);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

static int env_gc(lua_State *L) {
  (void)L;
  return 0; /* environments belong to their runtime */
}

LUDO_EXTERN int luaopen_ludo_host(lua_State *L) {
  static const luaL_Reg rt_m[] = {
      {"load", rt_load},   {"poll", rt_poll_checked}, {"run", rt_run_checked},
      {"stats", rt_stats}, {"logs", rt_logs},         {"close", rt_close},
      {NULL, NULL}};
  static const luaL_Reg env_m[] = {{"info", env_info},
                                   {"prewarm", env_prewarm},
                                   {"open", env_open},
                                   {"free", env_free},
                                   {NULL, NULL}};
  static const luaL_Reg s_m[] = {
      {"reset", s_reset},         {"step", s_step},
      {"state", s_state},         {"reset_async", s_reset_async},
      {"step_async", s_step_async}, {"state_async", s_state_async},
      {"close", s_close},         {"id", s_id},
      {"memory", s_memory},       {"error", s_error},
      {"llm_usage", s_llm_usage}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"runtime", ludo_l_host_runtime},
                                   {NULL, NULL}};
  newmeta(L, RT_MT, rt_m, rt_gc);
  newmeta(L, ENV_MT, env_m, env_gc);
  newmeta(L, SESSION_MT, s_m, s_gc);
  luaL_newlib(L, funcs);
  lua_pushstring(L, ludo_version());
  lua_setfield(L, -2, "version");
  return 1;
}
