/* guards.h - budget-aware replacements for library functions that loop
 * inside C (see guards.c). */
#ifndef LUDO_SCRIPT_GUARDS_H
#define LUDO_SCRIPT_GUARDS_H

#include <lua.h>

/* Replaces string.rep and table.move in a state being opened (the
 * globals string and table must be set). [-0, +0, m] */
void ludo__guards_install(lua_State *L);

#endif
