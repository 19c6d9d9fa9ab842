/* lre.h - ludo.re, the pcre2 regular-expression module for Lua states. */
#ifndef LUDO_SCRIPT_LRE_H
#define LUDO_SCRIPT_LRE_H

#include <lua.h>

#include "ludo_defs.h"

/* Opens the ludo.re module: pushes its table. The first call on a state
 * also creates that state's pattern cache and limits (kept in the registry,
 * shared by later opens). All pcre2 memory comes from the state's lua_Alloc
 * (lua_getallocf), so it counts against a session's memory cap. Use with
 * luaL_requiref(L, "ludo.re", luaopen_ludo_re, 0).
 * [-0, +1, m] */
LUDO_EXTERN int luaopen_ludo_re(lua_State *L);

#endif
