/* error.h - errors as values. ludo's own code raises error objects that
 * carry their LUDO_E* code outside the message text, with the location
 * (chunk:line) where they were raised. A session's Lua cannot make one
 * (the constructor is C-only and the objects are userdata), so whatever a
 * script raises, even the text "ETIMEOUT: ...", reaches the host as
 * LUDO_ESCRIPT.
 *
 * In Lua an error object reads as err.code ("ESCHEMA"), err.message
 * ("ESCHEMA: action.x: expected string, got number"), err.where
 * ("env.lua:12:" or "") and tostring(err) (the message). */
#ifndef LUDO_CORE_ERROR_H
#define LUDO_CORE_ERROR_H

#include <lua.h>
#include <stddef.h>

#include "ludo_defs.h"

/* Pushes an error object with `code` and the message "ENAME: text" (the
 * `len` bytes at `text`), located at stack level `level` (luaL_where; 0
 * for none). [-0, +1, m] */
void ludo__error_push(lua_State *L, int code, const char *text, size_t len,
                      int level);

/* Raises an error object whose text is formatted like lua_pushfstring,
 * located at the Lua function calling the running C function. Never
 * returns. [-0, +0, v] */
int ludo__error_raise(lua_State *L, int code, const char *fmt, ...);

/* The code of the error object at idx, or 0 when the value is not one.
 * [-0, +0, -] */
int ludo__error_code(lua_State *L, int idx);

/* Pushes the message of the error object at idx. [-0, +1, -] */
void ludo__error_push_message(lua_State *L, int idx);

/* Pushes a Lua function raise(code_name, text [, level]) for trusted
 * library code (the runner gets it as an argument; nothing a session can
 * require hands it out). [-0, +1, m] */
void ludo__error_push_raiser(lua_State *L);

#endif
