/* lclient.c - "ludo.client": the client of OpenEnv servers (net/client.h)
 * as a Lua module, for Lua code that is trusted to reach the network:
 *
 *   local client = require("ludo.client")
 *   local c = assert(client.connect("http://127.0.0.1:8000",
 *                                   {timeout = 30, token = "s3cret"}))
 *   local r = assert(c:reset({seed = 1}))  -- {observation=..., reward=...}
 *   r = assert(c:step({message = "hi"}))
 *   local st = c:state()
 *   local tools = c:list_tools()            -- {{name=..., inputSchema=...}}
 *   local res = c:call_tool("echo_message", {message = "hi"})
 *   local info = c:info()                   -- name, action schema, ...
 *   c:close()
 *
 * Inputs are tables (encoded with ludo.json) or JSON text; results are
 * decoded tables (JSON null is ludo.null). Failures return nil, message,
 * code ("EDISCONNECTED"); wrong arguments raise.
 *
 * Where it is available (docs/client.md):
 *   - in a stock lua5.4 (build/cmod/ludo/client.so, `ludo lua-path`):
 *     calls block, each client running its own loop;
 *   - in ludo's sandboxed states only where the host allows it
 *     (ludo_options_t.lua_client: scripts such as `ludo run --policy`
 *     with --allow-client; environment code never by default, as it
 *     would leave the sandbox, docs/sandbox.md). There calls wait without
 *     blocking: the call yields to the runtime's loop (like ludo.sleep)
 *     and other sessions go on; a call that cannot wait there (at a
 *     module's top level, inside a metamethod) raises, except connect,
 *     which then returns the client at once and lets its first call
 *     connect. A call given up (its session closed, a wall-clock limit)
 *     drops the connection. */
#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "net/client.h"
#include "script/sched.h"
#include "script/state.h"

#define CLIENT_MT "ludo.client"

/* Upvalues of the methods. */
#define UV_ENCODE lua_upvalueindex(1)
#define UV_DECODE lua_upvalueindex(2)
#define UV_PENDING lua_upvalueindex(3)

typedef struct {
  ludo_client_t *c;
  ludo__core_t *own;   /* stock Lua: the client's own core; NULL inside
                          ludo (the runtime's core) */
} box_t;

/* A Lua call waiting on the client (inside ludo). */
typedef struct {
  ludo__op_t *op;
  ludo_client_t *c;
} wait_op_t;

/* ---- helpers ----------------------------------------------------------- */

/* Returns nil, message, code. [-0, +3, m] */
static int push_fail(lua_State *L, int rc, const char *msg) {
  luaL_pushfail(L);
  lua_pushstring(L, msg && *msg ? msg : ludo__strerror(rc));
  lua_pushstring(L, ludo__err_name(rc));
  return 3;
}

static box_t *check_client(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, CLIENT_MT);
  if (b->c == NULL) luaL_error(L, "ludo.client: the client is closed");
  return b;
}

/* The JSON text of the argument at `idx`: a string as it is, a table
 * encoded (nil when the value cannot be JSON: then nil, message, code are
 * pushed and *failed is set). [-0, +(1|3), e] */
static const char *input(lua_State *L, int idx, size_t *len, int *failed) {
  *failed = 0;
  if (lua_type(L, idx) == LUA_TSTRING) {
    lua_pushvalue(L, idx);
    return lua_tolstring(L, -1, len);
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushvalue(L, UV_ENCODE);
  lua_pushvalue(L, idx);
  lua_call(L, 1, 3);
  if (lua_isstring(L, -3)) {
    lua_pop(L, 2);
    return lua_tolstring(L, -1, len);
  }
  *failed = 1;
  return NULL;
}

/* Pushes the outcome of call `kind`: the decoded result, or nil, message,
 * code. [-0, +(1|3), e] */
static int push_outcome(lua_State *L, int kind, int rc, const char *data,
                        size_t len) {
  if (rc != 0) return push_fail(L, rc, data);
  if (kind == LUDO__CL_CONNECT) {
    lua_pushvalue(L, 1);
    return 1;
  }
  lua_pushvalue(L, UV_DECODE);
  lua_pushlstring(L, data, len);
  lua_call(L, 1, 3);
  if (lua_isnil(L, -3)) return 3; /* nil, message, code */
  lua_pop(L, 2);
  if (kind == LUDO__CP_TOOLS) lua_getfield(L, -1, "tools");
  return 1;
}

/* ---- waiting inside ludo ------------------------------------------------ */

typedef struct {
  int status;
  const char *data;
  size_t len;
} outcome_t;

static int push_completion(lua_State *co, void *ud) {
  outcome_t *o = ud;
  lua_pushinteger(co, o->status);
  lua_pushlstring(co, o->data, o->len);
  return 2;
}

/* The client's callback: hands the outcome to the waiting Lua call. */
static void op_done(ludo_client_t *c, int status, const char *data,
                    size_t len, void *ud) {
  wait_op_t *w = ud;
  ludo__op_t *op = w->op;
  outcome_t o = {status, data, len};
  (void)c;
  ludo__op_complete(op, push_completion, &o);
  ludo__op_free(op);
}

/* The Lua call was cancelled: the client gives its call up. */
static void op_cancel(ludo__op_t *op) {
  wait_op_t *w = op->data;
  ludo__client_abandon(w->c);
  ludo__op_free(op);
}

/* After the wait: the stack ends with op, status, data. */
static int call_resumed(lua_State *L, int status, lua_KContext kind) {
  size_t len;
  const char *data = lua_tolstring(L, -1, &len);
  int rc = (int)lua_tointeger(L, -2);
  (void)status;
  return push_outcome(L, (int)kind, rc, data ? data : "", data ? len : 0);
}

/* Makes call `kind` with input `json`/`len` on the client at index 1 and
 * returns its outcome: blocking in stock Lua, yielding inside ludo. */
static int do_call(lua_State *L, box_t *b, int kind, const char *json,
                   size_t len) {
  const char *out = NULL;
  size_t out_len = 0;
  wait_op_t *w;
  ludo__op_t *op;
  int rc;
  if (b->own != NULL) {
    rc = ludo__client_call(b->c, kind, json, len, NULL, NULL, &out,
                           &out_len);
    return rc == 0 ? push_outcome(L, kind, 0, out, out_len)
                   : push_fail(L, rc, ludo__client_errmsg(b->c));
  }
  if (!lua_isyieldable(L))
    return luaL_error(L, "ludo.client: %s waits for the server and cannot "
                      "here (at a module's top level or inside a "
                      "metamethod); call it from a session call or a "
                      "script's function", ludo__clientproto_name(kind));
  op = ludo__op_new(L, sizeof *w, op_cancel); /* may raise */
  w = op->data;
  w->op = op;
  w->c = b->c;
  rc = ludo__client_call(b->c, kind, json, len, op_done, w, NULL, NULL);
  if (rc != 0) {
    ludo__op_complete(op, NULL, NULL); /* nothing waits on it yet */
    ludo__op_free(op);
    lua_pop(L, 1);
    return push_fail(L, rc, ludo__client_errmsg(b->c));
  }
  /* stack: ..., op; yields (PENDING, {op}) as ludo.async.await does */
  lua_pushvalue(L, UV_PENDING);
  lua_createtable(L, 1, 0);
  lua_pushvalue(L, -3);
  lua_rawseti(L, -2, 1);
  return lua_yieldk(L, 2, (lua_KContext)kind, call_resumed);
}

/* ---- methods ------------------------------------------------------------ */

static int l_reset(lua_State *L) {
  box_t *b = check_client(L);
  const char *json = NULL;
  size_t len = 0;
  int failed = 0;
  if (!lua_isnoneornil(L, 2)) {
    json = input(L, 2, &len, &failed);
    if (failed) return 3;
  }
  return do_call(L, b, LUDO__CP_RESET, json, len);
}

static int l_step(lua_State *L) {
  box_t *b = check_client(L);
  size_t len;
  int failed;
  const char *json = input(L, 2, &len, &failed);
  if (failed) return 3;
  return do_call(L, b, LUDO__CP_STEP, json, len);
}

static int l_state(lua_State *L) {
  return do_call(L, check_client(L), LUDO__CP_STATE, NULL, 0);
}

static int l_list_tools(lua_State *L) {
  return do_call(L, check_client(L), LUDO__CP_TOOLS, NULL, 0);
}

static int l_info(lua_State *L) {
  return do_call(L, check_client(L), LUDO__CL_INFO, NULL, 0);
}

/* c:call_tool(name [, arguments]) */
static int l_call_tool(lua_State *L) {
  box_t *b = check_client(L);
  const char *json;
  size_t len;
  int failed;
  luaL_checkstring(L, 2);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  lua_createtable(L, 0, 2); /* {name = ..., arguments = ...} */
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "name");
  if (!lua_isnil(L, 3)) {
    lua_pushvalue(L, 3);
    lua_setfield(L, -2, "arguments");
  }
  json = input(L, 4, &len, &failed);
  if (failed) return 3;
  return do_call(L, b, LUDO__CP_CALL_TOOL, json, len);
}

static int l_url(lua_State *L) {
  lua_pushstring(L, check_client(L)->c->url.ws);
  return 1;
}

static void gone(void *ud) { *(int *)ud = 1; }

/* Frees the client's own core (stock Lua) once its handles closed. */
static void core_closed(ludo__core_t *core) { free(core); }

/* Closes the client; `wait` (stock Lua, an explicit close): lets the
 * server's closing handshake finish first (bounded by 5 s). */
static void box_close(box_t *b, int wait) {
  ludo_client_t *c = b->c;
  int done = 0;
  b->c = NULL;
  if (b->own == NULL) {
    if (c != NULL) ludo__client_close(c, NULL, NULL);
    return;
  }
  if (c != NULL && wait && ludo__core_may_block(b->own)) {
    ludo__client_close(c, gone, &done);
    while (!done) ludo__core_run_once(b->own);
  }
  ludo__core_close(b->own); /* drops what is left, frees the core */
  b->own = NULL;
}

static int l_close(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, CLIENT_MT);
  box_close(b, 1);
  return 0;
}

static int l_gc(lua_State *L) {
  box_close(luaL_checkudata(L, 1, CLIENT_MT), 0);
  return 0;
}

static int l_tostring(lua_State *L) {
  box_t *b = luaL_checkudata(L, 1, CLIENT_MT);
  if (b->c)
    lua_pushfstring(L, "ludo.client (%s)", b->c->url.ws);
  else
    lua_pushliteral(L, "ludo.client (closed)");
  return 1;
}

/* ---- connect ------------------------------------------------------------ */

/* Reads a duration in seconds from opts[key] into *ms (false: none,
 * UINT32_MAX). [-0, +0, e] */
static void opt_ms(lua_State *L, int opts, const char *key, uint32_t *ms,
                   int may_be_none) {
  int t = lua_getfield(L, opts, key);
  if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1) && may_be_none) {
    *ms = UINT32_MAX;
  } else if (t != LUA_TNIL) {
    lua_Number s = lua_tonumber(L, -1);
    if (t != LUA_TNUMBER || !(s > 0) || s > 4e6)
      luaL_error(L, "ludo.client: option %s must be a number of seconds "
                 "above 0%s", key, may_be_none ? ", or false for none" : "");
    *ms = (uint32_t)(s * 1000.0 + 0.5);
    if (*ms == 0) *ms = 1;
  }
  lua_pop(L, 1);
}

/* The options table at `idx` (may be nil). Returns 1 when it sets
 * max_message. [-0, +0, e] */
static int read_options(lua_State *L, int idx, ludo_client_options_t *o) {
  int t, max_given;
  ludo__client_options_init(o);
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  opt_ms(L, idx, "connect_timeout", &o->connect_timeout_ms, 0);
  opt_ms(L, idx, "timeout", &o->timeout_ms, 1);
  opt_ms(L, idx, "ping_interval", &o->ping_interval_ms, 1);
  opt_ms(L, idx, "pong_timeout", &o->pong_timeout_ms, 0);
  t = lua_getfield(L, idx, "max_message");
  max_given = t != LUA_TNIL;
  if (t != LUA_TNIL) {
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
      luaL_error(L, "ludo.client: option max_message must be a number of "
                 "bytes above 0");
    o->max_message_bytes = (size_t)lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  t = lua_getfield(L, idx, "token");
  if (t != LUA_TNIL && t != LUA_TSTRING)
    luaL_error(L, "ludo.client: option token must be a string");
  o->token = t == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  lua_pop(L, 1); /* the string stays in opts, alive for the call */
  t = lua_getfield(L, idx, "reconnect");
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    luaL_error(L, "ludo.client: option reconnect must be a boolean");
  o->no_reconnect = t == LUA_TBOOLEAN && !lua_toboolean(L, -1);
  lua_pop(L, 1);
  return max_given;
}

/* client.connect(url [, options]) -> client | nil, message, code */
static int l_connect(lua_State *L) {
  const char *url = luaL_checkstring(L, 1);
  ludo__state_t *st = ludo__state_of(L);
  ludo_client_options_t o;
  ludo__core_t *core;
  box_t *b;
  char err[512];
  int rc, max_given = read_options(L, 2, &o);
  /* Inside ludo no reply could be decoded past the state's memory cap. */
  if (st != NULL && !max_given && st->cap > 0 &&
      st->cap < o.max_message_bytes)
    o.max_message_bytes = st->cap;
  b = lua_newuserdatauv(L, sizeof *b, 0);
  b->c = NULL;
  b->own = NULL;
  luaL_setmetatable(L, CLIENT_MT);
  if (st != NULL) {
    core = st->core;
  } else {
    core = malloc(sizeof *core);
    if (core == NULL ||
        ludo__core_init(core, NULL, NULL, NULL, NULL, NULL, NULL) != 0) {
      free(core);
      return push_fail(L, LUDO_ENOMEM, "ENOMEM: no memory for a client");
    }
    core->on_closed = core_closed;
    b->own = core;
  }
  rc = ludo__client_new(core, NULL, url, &o, &b->c, err, sizeof err);
  if (rc != 0) {
    box_close(b, 0);
    lua_pushfstring(L, "%s: %s", ludo__err_name(rc), err);
    luaL_pushfail(L);
    lua_insert(L, -2);
    lua_pushstring(L, ludo__err_name(rc));
    return 3;
  }
  b->c->unheld = 1;
  lua_replace(L, 1); /* stack: client, options... */
  if (st != NULL && !lua_isyieldable(L)) { /* connects on first use */
    lua_settop(L, 1);
    return 1;
  }
  return do_call(L, b, LUDO__CL_CONNECT, NULL, 0);
}

LUDO_EXTERN int luaopen_ludo_client(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"reset", l_reset},         {"step", l_step},
      {"state", l_state},         {"list_tools", l_list_tools},
      {"call_tool", l_call_tool}, {"info", l_info},
      {"url", l_url},             {"close", l_close},
      {NULL, NULL}};
  ludo__state_t *st = ludo__state_of(L);
  if (st != NULL && !st->may_connect)
    return luaL_error(L, "ludo.client: this Lua may not reach the network: "
                      "environment code runs sandboxed (docs/sandbox.md); a "
                      "host allows scripts and policies with "
                      "ludo_options_t.lua_client (ludo run --allow-client)");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ludo.json");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "encode");
  lua_getfield(L, -2, "decode");
  lua_remove(L, -3);
  if (st != NULL) {
    lua_getglobal(L, "require");
    lua_pushliteral(L, "ludo.async");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "PENDING");
    lua_remove(L, -2);
  } else {
    lua_pushnil(L);
  }
  /* stack: encode, decode, PENDING */
  if (luaL_newmetatable(L, CLIENT_MT)) {
    lua_createtable(L, 0, 8);
    lua_pushvalue(L, -5);
    lua_pushvalue(L, -5);
    lua_pushvalue(L, -5);
    luaL_setfuncs(L, methods, 3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, CLIENT_MT);
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, -4);
  lua_pushvalue(L, -4);
  lua_pushvalue(L, -4);
  lua_pushcclosure(L, l_connect, 3);
  lua_setfield(L, -2, "connect");
  lua_pushstring(L, LUDO_VERSION_STRING);
  lua_setfield(L, -2, "version");
  return 1;
}
