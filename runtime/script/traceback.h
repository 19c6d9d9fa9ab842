/* traceback.h - the traceback of a failed call, built from the call
 * stack alone (see traceback.c). */
#ifndef LUDO_SCRIPT_TRACEBACK_H
#define LUDO_SCRIPT_TRACEBACK_H

#include <lua.h>

/* Pushes onto L `msg` (NULL: none), a newline and "stack traceback:"
 * with one line per frame of L1 from `level` on, in luaL_traceback's
 * format (the first 10 and the last 11 frames of a deeper stack). A
 * frame's function is named only from the call that made it (`n` of
 * lua_getinfo: "local 'f'", "global 'error'", "method 'm'"), never by
 * searching the loaded modules for it as luaL_traceback does: that
 * search walks every table a script can fill. [-0, +1, m] */
void ludo__traceback(lua_State *L, lua_State *L1, const char *msg,
                     int level);

#endif
