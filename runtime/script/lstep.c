/* lstep.c - the runner's step in C (see lstep.h). */
#include "script/lstep.h"

#include <lauxlib.h>
#include <string.h>

#include "script/json.h"

/* The closure's upvalues: the parts in their order (lstep.h), then what
 * the first checked step found. 14 of them make it 256 bytes, the
 * largest block a state's arena holds (a larger one would come from the
 * heap, apart from the session's other objects). */
enum {
  UP_DOING = 1, UP_INPUT, UP_STEP, UP_CHECK, UP_NULLS_OF, UP_TOOLS,
  UP_TRANSFORM, UP_RUBRIC, UP_SETTLE, UP_NAMED, UP_REPORT, UP_RAISE,
  UP_NAME,
  UP_DROP, /* what nulls() returned: nil until the first checked step */
  UP_COUNT = UP_DROP
};

/* Where a continuation picks up. */
enum { K_NULLS, K_DROP, K_TOOL, K_ENV, K_TRANSFORM, K_SETTLE, K_SCORE,
       K_RUBRIC, K_REPORT };

/* Stack slots of a step: the action, then the observation (the score,
 * when there is one, above it). */
enum { S_ACTION = 1, S_OBS };

#define UP(i) lua_upvalueindex(i)

/* What a tool action's step returns in the score's place (its address,
 * as a light userdata: no value a rubric returns is this one). */
static const char tool_mark;

int ludo__lstep_is_tool_mark(lua_State *L, int idx) {
  return lua_touserdata(L, idx) == (const void *)&tool_mark;
}

static int step_k(lua_State *L, int status, lua_KContext k);

static void set_doing(lua_State *L, lua_Integer what) {
  lua_pushinteger(L, what);
  lua_rawseti(L, UP(UP_DOING), 1);
}

static void count_step(lua_State *L) {
  lua_Integer n;
  lua_rawgeti(L, UP(UP_DOING), 2);
  n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  /* wraps as Lua's own integer arithmetic does (no signed overflow) */
  lua_pushinteger(L, (lua_Integer)((lua_Unsigned)n + 1u));
  lua_rawseti(L, UP(UP_DOING), 2);
}

/* Calls the function under its nargs arguments on top, yieldable:
 * returns to step_k(k) with nres results on top. */
static int call(lua_State *L, int nargs, int nres, int k) {
  lua_callk(L, nargs, nres, k, step_k);
  return step_k(L, LUA_OK, k);
}

/* Raises the runner's error for what `what` returned (at the top) when it
 * is not an observation table. */
static int bad_observation(lua_State *L, const char *what) {
  const char *name = lua_tostring(L, UP(UP_NAME));
  int t = lua_type(L, -1);
  if (t == LUA_TNIL && strcmp(what, "step") == 0)
    return luaL_error(L, "ESCRIPT: step of environment %s returned nil "
                      "(or nothing); it must return an observation table",
                      name);
  ludo__json_pushnull(L);
  lua_pushfstring(L, "ESCRIPT: %s of environment %s must return an "
                  "observation table, got %s", what, name,
                  lua_rawequal(L, -1, -2) ? "null" : lua_typename(L, t));
  return lua_error(L);
}

/* The value at the top is an observation: a table (ludo.null is a
 * userdata in a session); nil is an empty one where `what` is the
 * transform. */
static void check_observation(lua_State *L, const char *what) {
  if (lua_type(L, -1) == LUA_TTABLE) return;
  if (lua_isnil(L, -1) && strcmp(what, "step") != 0) {
    lua_pop(L, 1);
    lua_newtable(L);
    return;
  }
  bad_observation(L, what);
}

/* 1 when the n bytes at s are the string lit, as Lua's == compares. */
static int is(const char *s, size_t n, const char *lit) {
  return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* 1 when the action is {"type": "list_tools" | "call_tool", ...}. */
static int tool_action(lua_State *L) {
  const char *type = NULL;
  size_t n = 0;
  int yes;
  if (lua_type(L, S_ACTION) != LUA_TTABLE) return 0;
  if (lua_getfield(L, S_ACTION, "type") == LUA_TSTRING)
    type = lua_tolstring(L, -1, &n);
  yes = type != NULL && (is(type, n, "list_tools") || is(type, n, "call_tool"));
  lua_pop(L, 1);
  return yes;
}

/* From the checked action on: the environment's step. */
static int run_env(lua_State *L) {
  lua_pushvalue(L, UP(UP_STEP));
  lua_pushvalue(L, S_ACTION);
  return call(L, 1, 1, K_ENV);
}

/* The schema's null-able fields dropped from the action (UP_DROP: a
 * function, or false when there are none). */
static int drop_nulls(lua_State *L) {
  if (!lua_toboolean(L, UP(UP_DROP))) return run_env(L);
  lua_pushvalue(L, UP(UP_DROP));
  lua_pushvalue(L, S_ACTION);
  return call(L, 1, 0, K_DROP);
}

/* After the transform: the rubric, if any. */
static int run_rubric(lua_State *L) {
  if (lua_isnil(L, UP(UP_RUBRIC))) return 1; /* the observation */
  if (!lua_isnil(L, UP(UP_SETTLE))) {
    lua_pushvalue(L, UP(UP_SETTLE));
    return call(L, 0, 1, K_SETTLE);
  }
  return step_k(L, LUA_OK, K_SCORE); /* no stamp to keep */
}

static int step_k(lua_State *L, int status, lua_KContext k) {
  (void)status; /* errors are not caught here */
  switch ((int)k) {
  case K_NULLS: /* drop */
    lua_replace(L, UP(UP_DROP));
    return drop_nulls(L);
  case K_DROP:
    return run_env(L);
  case K_TOOL: /* obs */
    count_step(L);
    lua_pushlightuserdata(L, (void *)&tool_mark); /* neither scored nor
                                                     checked */
    return 2;
  case K_ENV: /* obs */
    check_observation(L, "step");
    count_step(L);
    if (!lua_isnil(L, UP(UP_TRANSFORM))) {
      set_doing(L, 1);
      lua_pushvalue(L, UP(UP_TRANSFORM));
      lua_pushvalue(L, S_OBS);
      lua_pushvalue(L, S_ACTION);
      return call(L, 2, 1, K_TRANSFORM);
    }
    return run_rubric(L);
  case K_TRANSFORM: /* obs, new obs */
    check_observation(L, "the transform");
    lua_replace(L, S_OBS);
    return run_rubric(L);
  case K_SETTLE: /* obs, stamp */
    lua_setfield(L, UP(UP_NAMED), "stamp");
    /* fall through */
  case K_SCORE: /* obs */
    set_doing(L, 2);
    lua_pushvalue(L, UP(UP_RUBRIC));
    lua_pushvalue(L, S_ACTION);
    lua_pushvalue(L, S_OBS);
    return call(L, 2, 1, K_RUBRIC);
  case K_RUBRIC: /* obs, score */
    if (lua_isnil(L, UP(UP_REPORT))) return 2;
    lua_pushvalue(L, UP(UP_REPORT));
    lua_pushvalue(L, S_OBS);
    return call(L, 1, 0, K_REPORT);
  default: /* K_REPORT: obs, score */
    return 2;
  }
}

static int step(lua_State *L) {
  lua_settop(L, 0);
  set_doing(L, 0);
  lua_pushvalue(L, UP(UP_INPUT));
  lua_call(L, 0, 1); /* C: decodes the call's input */
  if (lua_isnil(L, S_ACTION)) {
    lua_pop(L, 1);
    lua_newtable(L);
  }
  if (!lua_isnil(L, UP(UP_TOOLS)) && tool_action(L)) {
    lua_pushvalue(L, UP(UP_TOOLS));
    lua_pushvalue(L, S_ACTION);
    return call(L, 1, 1, K_TOOL);
  }
  if (lua_isnil(L, UP(UP_CHECK))) return run_env(L);
  lua_pushvalue(L, UP(UP_CHECK)); /* C: the schema's validator */
  lua_pushvalue(L, S_ACTION);
  lua_call(L, 1, 2);
  if (!lua_toboolean(L, -2)) {
    lua_pushvalue(L, UP(UP_RAISE));
    lua_pushliteral(L, "ESCHEMA");
    lua_pushvalue(L, -3);
    lua_pushinteger(L, 0);
    lua_call(L, 3, 0); /* raises */
  }
  lua_settop(L, S_ACTION);
  if (lua_isnil(L, UP(UP_DROP))) { /* the first checked step */
    lua_pushvalue(L, UP(UP_NULLS_OF));
    return call(L, 0, 1, K_NULLS);
  }
  return drop_nulls(L);
}

int ludo__lstep_new(lua_State *L) {
  lua_settop(L, UP_NAME);
  luaL_checktype(L, UP_DOING, LUA_TTABLE);
  luaL_checktype(L, UP_INPUT, LUA_TFUNCTION);
  luaL_checktype(L, UP_NAME, LUA_TSTRING);
  if (!lua_isnil(L, UP_CHECK)) luaL_checktype(L, UP_NULLS_OF, LUA_TFUNCTION);
  if (!lua_isnil(L, UP_SETTLE)) luaL_checktype(L, UP_NAMED, LUA_TTABLE);
  lua_pushnil(L); /* UP_DROP */
  lua_pushcclosure(L, step, UP_COUNT);
  return 1;
}
