/* error.c - error objects (see error.h). */
#include "core/error.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <string.h>

#include "base/errors.h"

static const char mt_key = 'e'; /* registry: the error metatable */

typedef struct {
  int code;
} error_t_;

enum { UV_MESSAGE = 1, UV_WHERE = 2 };

/* err.code, err.message, err.where. [-0, +1, -] */
static int error_index(lua_State *L) {
  error_t_ *e = lua_touserdata(L, 1);
  const char *k = lua_tostring(L, 2);
  if (k == NULL) return 0;
  if (strcmp(k, "code") == 0) {
    lua_pushstring(L, ludo__err_name(e->code));
  } else if (strcmp(k, "message") == 0) {
    lua_getiuservalue(L, 1, UV_MESSAGE);
  } else if (strcmp(k, "where") == 0) {
    lua_getiuservalue(L, 1, UV_WHERE);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int error_tostring(lua_State *L) {
  lua_getiuservalue(L, 1, UV_MESSAGE);
  return 1;
}

/* Pushes the shared metatable, made on first use. [-0, +1, m] */
static void push_mt(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &mt_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushcfunction(L, error_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "ludo.error");
  lua_setfield(L, -2, "__name");
  lua_pushliteral(L, "ludo.error"); /* getmetatable(err) hides the table */
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mt_key);
}

void ludo__error_push(lua_State *L, int code, const char *text, size_t len,
                      int level) {
  const char *name = ludo__err_name(code);
  size_t n = strlen(name);
  int prefixed = len > n && memcmp(text, name, n) == 0 && text[n] == ':';
  error_t_ *e;
  luaL_checkstack(L, 6, "error object");
  e = lua_newuserdatauv(L, sizeof *e, 2);
  e->code = code;
  if (level > 0)
    luaL_where(L, level);
  else
    lua_pushliteral(L, "");
  /* The message: "ENAME: where text", the code's name once. */
  if (prefixed) {
    text += n + 1;
    len -= n + 1;
    while (len > 0 && *text == ' ') text++, len--;
  }
  lua_pushstring(L, name);
  lua_pushliteral(L, ": ");
  lua_pushvalue(L, -3);
  lua_pushlstring(L, text, len);
  lua_concat(L, 4);                      /* e, where, message */
  lua_setiuservalue(L, -3, UV_MESSAGE);
  lua_setiuservalue(L, -2, UV_WHERE);
  push_mt(L);
  lua_setmetatable(L, -2);
}

int ludo__error_raise(lua_State *L, int code, const char *fmt, ...) {
  va_list ap;
  const char *text;
  size_t len;
  va_start(ap, fmt);
  text = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  len = strlen(text);
  ludo__error_push(L, code, text, len, 1);
  return lua_error(L);
}

int ludo__error_code(lua_State *L, int idx) {
  int code = 0;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
    return 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &mt_key) == LUA_TTABLE &&
      lua_rawequal(L, -1, -2))
    code = ((error_t_ *)lua_touserdata(L, idx))->code;
  lua_pop(L, 2);
  return code;
}

void ludo__error_push_message(lua_State *L, int idx) {
  lua_getiuservalue(L, lua_absindex(L, idx), UV_MESSAGE);
}

/* raise(code_name, text [, level]) */
static int l_raise(lua_State *L) {
  size_t n, len;
  const char *name = luaL_checklstring(L, 1, &n);
  const char *text = luaL_checklstring(L, 2, &len);
  int level = (int)luaL_optinteger(L, 3, 1);
  int code = ludo__err_code(name, n);
  if (code == 0) code = LUDO_ESCRIPT;
  ludo__error_push(L, code, text, len, level);
  return lua_error(L);
}

void ludo__error_push_raiser(lua_State *L) { lua_pushcfunction(L, l_raise); }
