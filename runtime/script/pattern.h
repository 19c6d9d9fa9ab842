/* pattern.h - Lua's pattern functions under the call's CPU budget (see
 * pattern.c). */
#ifndef LUDO_SCRIPT_PATTERN_H
#define LUDO_SCRIPT_PATTERN_H

#include <lua.h>

/* Replaces string.find, string.match, string.gmatch and string.gsub in a
 * state being opened (the global string must be set) with versions that
 * give the library's results and errors and check the call's budget as
 * they work (ludo__state_check). Outside a running, armed call they are
 * never stopped. [-0, +0, m] */
void ludo__pattern_install(lua_State *L);

#endif
