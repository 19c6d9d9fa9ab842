/* core.c - the "ludo.core" module: host primitives of a session state
 * (time, sleep, log, call input, ids, where a function is defined). The
 * Lua face is lua/ludo/init.lua. */
#include <lauxlib.h>
#include <math.h>
#include <string.h>
#include <uv.h>

#include "base/clock.h"
#include "core/error.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/uuid.h"
#include "ludo_defs.h"
#include "script/json.h"
#include "script/sched.h"
#include "script/state.h"

/* ludo.core.now() -> seconds (float) on a monotonic clock. */
static int ludo_l_core_now(lua_State *L) {
  lua_pushnumber(L, (lua_Number)ludo__clock_ns() / 1e9);
  return 1;
}

static void sleep_closed(uv_handle_t *h) {
  ludo__op_t *op = h->data;
  ludo__core_t *core = op->core;
  ludo__op_free(op);
  if (core != NULL) ludo__core_handle_closed(core);
}

static void sleep_cancel(ludo__op_t *op) {
  uv_timer_t *t = op->data;
  uv_timer_stop(t);
  uv_close((uv_handle_t *)t, sleep_closed);
}

static void sleep_fired(uv_timer_t *t) {
  ludo__op_t *op = t->data;
  uv_close((uv_handle_t *)t, sleep_closed);
  ludo__op_complete(op, NULL, NULL);
}

/* ludo.core.sleep(seconds) -> op handle; await it with ludo.async.await.
 * Raises outside a session call. */
static int ludo_l_core_sleep(lua_State *L) {
  lua_Number secs = luaL_checknumber(L, 1);
  ludo__state_t *st = ludo__state_of(L);
  ludo__op_t *op;
  uv_timer_t *t;
  uint64_t ms;
  luaL_argcheck(L, secs >= 0 && secs < 1e9 && !isnan(secs), 1,
                "seconds must be between 0 and 1e9");
  op = ludo__op_new(L, sizeof(uv_timer_t), sleep_cancel);
  t = op->data;
  uv_timer_init(st->loop, t);
  if (op->core != NULL) ludo__core_handle_opened(op->core);
  t->data = op;
  ms = (uint64_t)ceil(secs * 1000.0);
  uv_update_time(st->loop); /* the loop's cached time may be stale */
  uv_timer_start(t, sleep_fired, ms, 0);
  return 1;
}

/* ludo.core.log(level, message): level is "debug"|"info"|"warn"|"error". */
static int ludo_l_core_log(lua_State *L) {
  static const char *const levels[] = {"debug", "info", "warn", "error",
                                       NULL};
  int level = luaL_checkoption(L, 1, NULL, levels);
  size_t len;
  const char *msg = luaL_checklstring(L, 2, &len);
  ludo__state_t *st = ludo__state_of(L);
  ludo__state_log(L, st, level, msg, len);
  return 0;
}

/* ludo.core.input() -> the decoded JSON input of the running call, or nil
 * when the call has none; and true when it is a table (an object or an
 * array: cheaper than type(), which makes a string). Raises EPARSE on
 * malformed input (the decoder's coded error), a memory error at the
 * session's limit, and the check hook's error, as they come. */
static int ludo_l_core_input(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  ludo__sched_t *s = st ? st->sched : NULL;
  if (s == NULL || s->input == NULL || s->input_len == 0) {
    lua_pushnil(L);
    return 1;
  }
  ludo__json_decode(L, s->input, s->input_len, LUDO__JSON_MAXDEPTH);
  lua_pushboolean(L, lua_type(L, -1) == LUA_TTABLE);
  return 2;
}

/* ludo.core.is_score(v) -> true when v is a number or nil (what a
 * rubric's forward may return). Every rubric call asks; math.type would
 * make a string each time. */
static int ludo_l_core_is_score(lua_State *L) {
  int t = lua_type(L, 1);
  lua_pushboolean(L, t == LUA_TNUMBER || t == LUA_TNIL || t == LUA_TNONE);
  return 1;
}

/* ludo.core.uuid() -> a random UUID v4 string. */
static int ludo_l_core_uuid(lua_State *L) {
  char id[LUDO__UUID_LEN + 1];
  if (ludo__uuid4(id) != 0)
    return ludo__error_raise(L, LUDO_EIO, "no random source");
  lua_pushstring(L, id);
  return 1;
}

/* ludo.core.who() -> the session id (or "lua"). */
static int ludo_l_core_who(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  lua_pushstring(L, st && st->who ? st->who : "lua");
  return 1;
}

/* ludo.core.memory() -> bytes used by this state, cap (0: none). */
static int ludo_l_core_memory(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  lua_pushinteger(L, st ? (lua_Integer)st->used : 0);
  lua_pushinteger(L, st ? (lua_Integer)st->cap : 0);
  return 2;
}

/* ludo.core.where(f) -> "chunk:line" where the Lua function f is defined,
 * or nil for a C function and for code compiled without debug information
 * (ludo's own modules). The rubric library names a bad forward with it; a
 * session has no debug library. */
static int ludo_l_core_where(lua_State *L) {
  lua_Debug ar;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  if (lua_getinfo(L, ">S", &ar) && ar.what[0] != 'C' && ar.linedefined > 0 &&
      strcmp(ar.short_src, "?") != 0)
    lua_pushfstring(L, "%s:%d", ar.short_src, ar.linedefined);
  else
    lua_pushnil(L);
  return 1;
}

/* ludo.core.redact(s) -> s with heap addresses hidden (": 0x55..." becomes
 * ": 0x?"), as in every error message that leaves a session
 * (base/redact.h): for texts the library hands out itself, such as a
 * tool's error in an observation. */
static int ludo_l_core_redact(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, len);
  memcpy(p, s, len);
  luaL_pushresultsize(&b, ludo__redact_addresses(p, len));
  return 1;
}

LUDO_EXTERN int luaopen_ludo_core(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"now", ludo_l_core_now},     {"sleep", ludo_l_core_sleep},
      {"log", ludo_l_core_log},     {"input", ludo_l_core_input},
      {"uuid", ludo_l_core_uuid},   {"who", ludo_l_core_who},
      {"memory", ludo_l_core_memory}, {"where", ludo_l_core_where},
      {"redact", ludo_l_core_redact}, {"is_score", ludo_l_core_is_score},
      {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
