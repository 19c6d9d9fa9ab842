/* luashare.h - the API of ludo's patched Lua: shared prototypes
 * (scripts/patches/lua-5.4.4-shared-protos.patch; each function is
 * documented at its definition in lapi.c and lstate.c there), the
 * table library's loop check and the stop check before calls from C
 * (lua-5.4.4-loop-limits.patch), the emergency collection's check
 * (lua-5.4.4-emergency-gc.patch), the table walk by position
 * (lua-5.4.4-table-walk.patch).
 *
 * The programs link that Lua statically. libludo.so links the system's
 * liblua5.4, which lacks these functions: the references are weak, so
 * there they are NULL and callers fall back to loading bytecode. Test
 * `lua_newstateshared != NULL` before using any of them (lua_nextpos:
 * itself, ludo__walk_next does, falling back to lua_next). */
#ifndef LUDO_CORE_LUASHARE_H
#define LUDO_CORE_LUASHARE_H

#include <lua.h>

/* A state that clones `owner`'s shared prototypes (see lua_sharedgen). */
LUA_API lua_State *lua_newstateshared(lua_Alloc f, void *ud,
                                      lua_State *owner)
    __attribute__((weak));
/* Shares the prototypes of the Lua function at idx of L; returns the
 * handle lua_clonefunction takes (NULL: not a Lua function) and in *gen
 * the generation a sharing state needs. Raises a memory error. */
LUA_API const void *lua_sharefunction(lua_State *L, int idx,
                                      unsigned int *gen)
    __attribute__((weak));
/* The generation L sees of owner's shared strings (0: L is not owner's). */
LUA_API unsigned int lua_sharedgen(lua_State *L, lua_State *owner)
    __attribute__((weak));
/* Pushes a closure of a shared prototype onto L, _ENV set as lua_load
 * sets it. [-0, +1, m] */
LUA_API void lua_clonefunction(lua_State *L, const void *shared)
    __attribute__((weak));

/* lua_next(L, idx) with the walk's position in *pos (0 at the start)
 * instead of the key at the top, which it replaces unread (the same stack
 * effect): the same entries in the same order, without looking the key
 * up again (lua-5.4.4-table-walk.patch). Walk with ludo__walk_next
 * (script/tablewalk.h), which falls back to lua_next. [-1, +(2|0), -] */
LUA_API int lua_nextpos(lua_State *L, int idx, unsigned int *pos)
    __attribute__((weak));

/* Sets the function the table library's loops (insert, remove, concat,
 * sort) call every 1,024 steps; it may raise. Process-wide. */
LUA_API void lua_setloopcheck(void (*f)(lua_State *L)) __attribute__((weak));

/* Sets the function asked before each emergency collection (a refused
 * allocation); when it returns 0 the allocation fails at once.
 * Process-wide (lua-5.4.4-emergency-gc.patch). */
LUA_API void lua_setemergencycheck(int (*f)(lua_State *L))
    __attribute__((weak));

/* The currentline a count hook sees when the patched Lua fires it outside
 * an instruction's boundary: a count of 1 before a call made from C
 * (lua_call, metamethods, any call of a C function), or any count when the
 * work charged to it (calls of C functions, string comparisons) reached
 * its count (lua-5.4.4-loop-limits.patch, 5). The hook may raise there but
 * must not yield. */
#define LUDO__STOPCHECK_LINE (-2)

#endif
