/* lllm.c - "ludo.llm": LLM API clients (net/llm.h) as a Lua module, for
 * Lua the host lets reach LLM APIs (docs/llm.md):
 *
 *   local llm = require("ludo.llm")
 *   local c = llm.client{api = "openai", base_url = "http://h:8000/v1",
 *                        model = "m", api_key_env = "OPENAI_API_KEY",
 *                        temperature = 0, max_tokens = 256}
 *   local text, info = c:chat({{role = "system", content = "..."},
 *                              {role = "user", content = "..."}},
 *                             {temperature = 0.7})
 *   -- info: status, latency_ms, prompt_tokens, completion_tokens,
 *   --       attempts, finish_reason, api, model
 *   -- failure: nil, "ELLM: <status> <server's message>", info
 *   local text2 = c:complete("prompt")   -- one user message
 *
 * A call yields the calling coroutine (the ludo.async protocol, like
 * ludo.sleep) while the request runs on the runtime's loop; other
 * sessions go on. A call given up (its session closed, a wall-clock limit)
 * stops its request. Wrong arguments raise; failed calls return nil.
 *
 * Where it is available: only in ludo's states the host allows
 * (ludo_options_t.lua_llm: scripts such as LLM policies, and/or sessions
 * for LLM judges in rubrics; `ludo run --allow-llm`). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "net/llm.h"
#include "script/sched.h"
#include "script/state.h"

#define LLM_MT "ludo.llm.client"
#define UV_PENDING lua_upvalueindex(1)

/* The most messages and stop sequences one call may send. */
#define MAX_MESSAGES 100000
#define MAX_STOP 16

typedef struct {
  ludo__llm_client_t *c;
  ludo__llm_params_t defaults;  /* stop strings: in the uservalue table */
} box_t;

/* A Lua call waiting on its request. */
typedef struct {
  ludo__op_t *op;
  ludo__llm_call_t *call;
  ludo__state_t *st;
  const char *api, *model;      /* static / the client's (alive: the
                                   coroutine holds the client) */
} wait_t;

static box_t *check_client(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, LLM_MT);
  if (b->c == NULL) luaL_error(L, "ludo.llm: the client is closed");
  return b;
}

/* ---- options ------------------------------------------------------------ */

static lua_Integer opt_int(lua_State *L, int t, const char *k, lua_Integer d,
                           lua_Integer lo, lua_Integer hi) {
  lua_Integer v = d;
  if (lua_getfield(L, t, k) != LUA_TNIL) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok || v < lo || v > hi)
      luaL_error(L, "ludo.llm: option %s must be an integer from %I to %I",
                 k, lo, hi);
  }
  lua_pop(L, 1);
  return v;
}

static const char *opt_str(lua_State *L, int t, const char *k) {
  const char *s = NULL;
  int ty = lua_getfield(L, t, k);
  if (ty != LUA_TNIL && ty != LUA_TSTRING)
    luaL_error(L, "ludo.llm: option %s must be a string", k);
  if (ty == LUA_TSTRING) s = lua_tostring(L, -1);
  lua_pop(L, 1); /* the string stays alive in the table */
  return s;
}

/* temperature, max_tokens and stop of table `t` over *p; the stop strings
 * are read from the table at `t` (kept alive by the caller). */
static void read_params(lua_State *L, int t, ludo__llm_params_t *p,
                        const char **stop) {
  size_t i, n;
  if (lua_getfield(L, t, "temperature") != LUA_TNIL) {
    lua_Number v = lua_tonumber(L, -1);
    if (!lua_isnumber(L, -1) || !(v >= 0 && v <= 2)) /* NaN fails too */
      luaL_error(L, "ludo.llm: option temperature must be a number from 0 "
                 "to 2");
    p->has_temperature = 1;
    p->temperature = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  p->max_tokens = (long)opt_int(L, t, "max_tokens", p->max_tokens, 1,
                                1 << 24);
  if (lua_getfield(L, t, "stop") == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  n = lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
  if (!lua_istable(L, -1) || n > MAX_STOP)
    luaL_error(L, "ludo.llm: option stop must be a list of at most %d "
               "strings", MAX_STOP);
  for (i = 0; i < n; i++) {
    if (lua_rawgeti(L, -1, (lua_Integer)i + 1) != LUA_TSTRING)
      luaL_error(L, "ludo.llm: option stop[%d] must be a string",
                 (int)i + 1);
    stop[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  p->stop = stop;
  p->nstop = n;
  lua_pop(L, 1);
}

/* Raises for a key of table `t` not in `known` (a typo would otherwise
 * be ignored). */
static void check_keys(lua_State *L, int t, const char *const *known,
                       const char *what) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    size_t i;
    int found = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (i = 0; known[i] && !found; i++)
        found = strcmp(known[i], lua_tostring(L, -2)) == 0;
    if (!found)
      luaL_error(L, "ludo.llm: unknown %s option %s", what,
                 lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2)
                                                : "(not a string)");
    lua_pop(L, 1);
  }
}

static const char *const CLIENT_KEYS[] = {
    "api", "base_url", "base_url_env", "model", "api_key_env", "temperature",
    "max_tokens",
    "stop", "timeout_ms", "max_concurrency", "retries", "backoff_ms",
    "max_backoff_ms", "max_retry_after_ms", "max_response_bytes", NULL};
static const char *const CALL_KEYS[] = {"temperature", "max_tokens", "stop",
                                        NULL};

static int read_api(lua_State *L, int t) {
  const char *api = opt_str(L, t, "api");
  if (api == NULL || strcmp(api, "openai") == 0) return LUDO__LLM_OPENAI;
  if (strcmp(api, "anthropic") == 0) return LUDO__LLM_ANTHROPIC;
  return luaL_error(L, "ludo.llm: option api must be \"openai\" or "
                    "\"anthropic\"");
}

/* The key from the environment variable named by api_key_env (NULL when
 * none is named). The variable's name may appear in messages, never its
 * value. */
static const char *read_key(lua_State *L, int t) {
  const char *var = opt_str(L, t, "api_key_env"), *key;
  if (var == NULL) return NULL;
  key = getenv(var);
  if (key == NULL || *key == '\0')
    luaL_error(L, "ludo.llm: the environment variable %s (api_key_env) is "
               "not set", var);
  return key;
}

/* The base URL: the environment variable named by base_url_env when it is
 * set and not empty (one run file, another server), else base_url. */
static const char *read_base_url(lua_State *L, int t) {
  const char *var = opt_str(L, t, "base_url_env"), *url;
  if (var != NULL && (url = getenv(var)) != NULL && *url != '\0')
    return url;
  return opt_str(L, t, "base_url");
}

static void read_config(lua_State *L, int t, ludo__llm_config_t *cfg) {
  const lua_Integer day = 86400000;
  ludo__llm_config_init(cfg);
  cfg->api = read_api(L, t);
  cfg->base_url = read_base_url(L, t);
  cfg->model = opt_str(L, t, "model");
  if (cfg->base_url == NULL || cfg->model == NULL)
    luaL_error(L, "ludo.llm: options base_url (or a set base_url_env) and "
               "model are required");
  cfg->api_key = read_key(L, t);
  cfg->timeout_ms = (uint32_t)opt_int(L, t, "timeout_ms", cfg->timeout_ms,
                                      1, day);
  cfg->max_concurrency = (unsigned)opt_int(
      L, t, "max_concurrency", cfg->max_concurrency, 1, 1000000);
  cfg->retries = (unsigned)opt_int(L, t, "retries", cfg->retries, 0, 100);
  cfg->backoff_ms = (uint32_t)opt_int(L, t, "backoff_ms", cfg->backoff_ms,
                                      0, day);
  cfg->max_backoff_ms = (uint32_t)opt_int(L, t, "max_backoff_ms",
                                          cfg->max_backoff_ms, 0, day);
  cfg->max_retry_after_ms = (uint32_t)opt_int(
      L, t, "max_retry_after_ms", cfg->max_retry_after_ms, 0, day);
  cfg->max_response_bytes = (size_t)opt_int(
      L, t, "max_response_bytes", (lua_Integer)cfg->max_response_bytes, 1,
      (lua_Integer)1 << 40);
}

/* ---- llm.client{...} ---------------------------------------------------- */

static int l_client(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  ludo__llm_config_t cfg;
  const char *stop[MAX_STOP];
  box_t *b;
  char err[256];
  int rc;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  check_keys(L, 1, CLIENT_KEYS, "client");
  read_config(L, 1, &cfg);
  b = lua_newuserdatauv(L, sizeof *b, 1);
  memset(b, 0, sizeof *b);
  luaL_setmetatable(L, LLM_MT);
  lua_pushvalue(L, 1); /* keeps the default stop strings alive */
  lua_setiuservalue(L, -2, 1);
  read_params(L, 1, &b->defaults, stop);
  b->defaults.stop = NULL; /* re-read from the uservalue per call */
  b->defaults.nstop = 0;
  rc = ludo__llm_client_new(st->core, &cfg, &b->c, err, sizeof err);
  memset(&cfg, 0, sizeof cfg); /* no copy of the key pointer is left */
  if (rc == LUDO_EINVAL) return luaL_error(L, "ludo.llm: %s", err);
  if (rc != 0) return luaL_error(L, "ludo.llm: %s", ludo__strerror(rc));
  return 1;
}

/* ---- calls -------------------------------------------------------------- */

/* What a finished call hands to the waiting coroutine. */
static int push_result(lua_State *co, void *ud) {
  const ludo__llm_result_t *r = ud;
  lua_checkstack(co, 12);
  lua_pushboolean(co, r->ok);
  if (r->ok)
    lua_pushlstring(co, r->text, r->text_len);
  else
    lua_pushstring(co, r->error);
  lua_pushinteger(co, r->status);
  lua_pushnumber(co, r->latency_ms);
  lua_pushinteger(co, (lua_Integer)r->prompt_tokens);
  lua_pushinteger(co, (lua_Integer)r->completion_tokens);
  lua_pushinteger(co, (lua_Integer)r->attempts);
  if (r->finish)
    lua_pushstring(co, r->finish);
  else
    lua_pushnil(co);
  return 8;
}

static void count(ludo__state_t *st, const ludo__llm_result_t *r) {
  st->llm.calls++;
  st->llm.failures += !r->ok;
  st->llm.retries += r->attempts > 1 ? r->attempts - 1 : 0;
  st->llm.prompt_tokens += r->prompt_tokens;
  st->llm.completion_tokens += r->completion_tokens;
  st->llm.latency_ms += r->latency_ms;
}

static void call_done(const ludo__llm_result_t *r, void *ud) {
  wait_t *w = ud;
  ludo__op_t *op = w->op;
  count(w->st, r);
  ludo__op_complete(op, push_result, (void *)r);
  ludo__op_free(op);
}

static void op_cancel(ludo__op_t *op) {
  wait_t *w = op->data;
  ludo__llm_call_cancel(w->call);
  ludo__op_free(op);
}

/* After the wait: the stack ends with the 8 values of push_result; the
 * client's api and model are upvalue-free: read from the box at 1. */
static int call_resumed(lua_State *L, int status, lua_KContext ctx) {
  box_t *b = luaL_checkudata(L, 1, LLM_MT);
  int top = lua_gettop(L), ok = lua_toboolean(L, top - 7);
  (void)status;
  (void)ctx;
  lua_createtable(L, 0, 8);
  lua_pushvalue(L, top - 5);
  lua_setfield(L, -2, "status");
  lua_pushvalue(L, top - 4);
  lua_setfield(L, -2, "latency_ms");
  lua_pushvalue(L, top - 3);
  lua_setfield(L, -2, "prompt_tokens");
  lua_pushvalue(L, top - 2);
  lua_setfield(L, -2, "completion_tokens");
  lua_pushvalue(L, top - 1);
  lua_setfield(L, -2, "attempts");
  lua_pushvalue(L, top);
  lua_setfield(L, -2, "finish_reason");
  if (b->c != NULL) { /* not closed by another coroutine meanwhile */
    lua_pushstring(L, ludo__llm_client_api(b->c) == LUDO__LLM_ANTHROPIC
                          ? "anthropic" : "openai");
    lua_setfield(L, -2, "api");
    lua_pushstring(L, ludo__llm_client_model(b->c));
    lua_setfield(L, -2, "model");
  }
  if (ok) {
    lua_pushvalue(L, top - 6);
    lua_insert(L, -2);
    return 2; /* text, info */
  }
  luaL_pushfail(L);
  lua_pushvalue(L, top - 6);
  lua_rotate(L, -3, 2);
  return 3; /* nil, message, info */
}

/* Reads messages (table at 2) into an array on the stack. */
static ludo__llm_msg_t *read_messages(lua_State *L, size_t *n) {
  size_t i, len = lua_rawlen(L, 2);
  ludo__llm_msg_t *m;
  if (len == 0 || len > MAX_MESSAGES)
    luaL_error(L, "ludo.llm: messages must be a non-empty list of "
               "{role = ..., content = ...}");
  m = lua_newuserdatauv(L, len * sizeof *m, 0);
  for (i = 0; i < len; i++) {
    const char *role;
    if (lua_rawgeti(L, 2, (lua_Integer)i + 1) != LUA_TTABLE)
      luaL_error(L, "ludo.llm: messages[%d] must be a table", (int)i + 1);
    lua_getfield(L, -1, "role");
    role = lua_tostring(L, -1);
    if (lua_type(L, -1) != LUA_TSTRING ||
        (strcmp(role, "system") && strcmp(role, "user") &&
         strcmp(role, "assistant")))
      luaL_error(L, "ludo.llm: messages[%d].role must be \"system\", "
                 "\"user\" or \"assistant\"", (int)i + 1);
    if (lua_getfield(L, -2, "content") != LUA_TSTRING)
      luaL_error(L, "ludo.llm: messages[%d].content must be a string",
                 (int)i + 1);
    m[i].role = role; /* strings live in the messages table */
    m[i].content = lua_tolstring(L, -1, &m[i].content_len);
    lua_pop(L, 3);
  }
  *n = len;
  return m;
}

/* The call's parameters: the client's defaults, then opts (table at 3). */
static void call_params(lua_State *L, box_t *b, ludo__llm_params_t *p,
                        const char **stop) {
  *p = b->defaults;
  lua_getiuservalue(L, 1, 1);
  read_params(L, lua_gettop(L), p, stop); /* the default stop list */
  lua_pop(L, 1);
  if (lua_isnoneornil(L, 3)) return;
  luaL_checktype(L, 3, LUA_TTABLE);
  check_keys(L, 3, CALL_KEYS, "call");
  read_params(L, 3, p, stop);
}

/* Starts the call of `msgs` and yields until the reply. [-0, +?, e] */
static int start_call(lua_State *L, box_t *b, const ludo__llm_params_t *p,
                      const ludo__llm_msg_t *msgs, size_t n) {
  ludo__op_t *op = ludo__op_new(L, sizeof(wait_t), op_cancel); /* raises */
  wait_t *w = op->data;
  char err[256], *body;
  size_t len;
  int rc = LUDO_EINVAL;
  w->op = op;
  w->st = ludo__state_of(L);
  body = ludo__llm_body(ludo__llm_client_api(b->c),
                        ludo__llm_client_model(b->c), p, msgs, n, &len, err,
                        sizeof err);
  if (body != NULL) {
    rc = ludo__llm_call_start(b->c, body, len, call_done, w, &w->call);
    free(body);
    if (rc != 0) snprintf(err, sizeof err, "%s", ludo__strerror(rc));
  }
  if (rc != 0) {
    ludo__op_complete(op, NULL, NULL);
    ludo__op_free(op);
    return luaL_error(L, "ludo.llm: %s", err);
  }
  lua_pushvalue(L, UV_PENDING);
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, -3);
  lua_rawseti(L, -2, 1);
  return lua_yieldk(L, 2, 0, call_resumed);
}

/* c:chat(messages [, opts]) */
static int l_chat(lua_State *L) {
  box_t *b = check_client(L);
  ludo__llm_params_t p;
  ludo__llm_msg_t *msgs;
  const char *stop[MAX_STOP];
  size_t n;
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  if (!lua_isyieldable(L))
    return luaL_error(L, "ludo.llm: chat waits for the server and cannot "
                      "here (at a module's top level or inside a "
                      "metamethod); call it from a session call or a "
                      "script's function");
  call_params(L, b, &p, stop);
  msgs = read_messages(L, &n);
  luaL_checkstack(L, 16, "ludo.llm");
  return start_call(L, b, &p, msgs, n);
}

/* c:complete(prompt [, opts]) = c:chat({{role = "user", content =
 * prompt}}, opts) */
static int l_complete(lua_State *L) {
  check_client(L);
  luaL_checkstring(L, 2);
  lua_settop(L, 3);
  lua_createtable(L, 1, 0);
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "user");
  lua_setfield(L, -2, "role");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "content");
  lua_rawseti(L, -2, 1);
  lua_replace(L, 2);
  return l_chat(L);
}

static int l_close(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, LLM_MT);
  ludo__llm_client_free(b->c); /* calls in flight keep their hold */
  b->c = NULL;
  return 0;
}

static int l_tostring(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, LLM_MT);
  if (b->c)
    lua_pushfstring(L, "ludo.llm client (%s, %s)",
                    ludo__llm_client_api(b->c) == LUDO__LLM_ANTHROPIC
                        ? "anthropic" : "openai",
                    ludo__llm_client_model(b->c));
  else
    lua_pushliteral(L, "ludo.llm client (closed)");
  return 1;
}

LUDO_EXTERN int luaopen_ludo_llm(lua_State *L) {
  static const luaL_Reg methods[] = {{"chat", l_chat},
                                     {"complete", l_complete},
                                     {"close", l_close},
                                     {NULL, NULL}};
  ludo__state_t *st = ludo__state_of(L);
  if (st == NULL || !st->may_llm)
    return luaL_error(L, "ludo.llm: this Lua may not call LLM APIs: the "
                      "host allows it with ludo_options_t.lua_llm (scripts "
                      "and/or sessions; ludo run --allow-llm), docs/llm.md");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ludo.async");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "PENDING");
  lua_remove(L, -2);
  if (luaL_newmetatable(L, LLM_MT)) {
    lua_createtable(L, 0, 3);
    lua_pushvalue(L, -3);
    luaL_setfuncs(L, methods, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, LLM_MT);
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 2);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_client);
  lua_setfield(L, -2, "client");
  lua_pushstring(L, LUDO_VERSION_STRING);
  lua_setfield(L, -2, "version");
  return 1;
}
