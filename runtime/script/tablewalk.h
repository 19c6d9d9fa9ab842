/* tablewalk.h - walking a Lua table from C on the step path: the JSON
 * encoder (json.c) and the schema checker (schema.c) go through the
 * pairs of every object they write or check. */
#ifndef LUDO_SCRIPT_TABLEWALK_H
#define LUDO_SCRIPT_TABLEWALK_H

#include <lua.h>

#include "core/luashare.h"

/* lua_next(L, t), with the same stack discipline (push nil to start,
 * leave the key at the top between calls), and *pos, set to 0 at the
 * start, keeping the place: with ludo's Lua, lua_nextpos goes on from
 * there instead of hashing the key at the top again (about 100
 * instructions an entry); in a stock Lua (libludo's C modules loaded by
 * lua5.4) it is lua_next. Same entries, same order. The walks that use
 * it only read the table they walk (nothing they call sets a field), so
 * lua_next's "invalid key to 'next'" is raised by neither. */
static inline int ludo__walk_next(lua_State *L, int t, unsigned int *pos) {
  return lua_nextpos != NULL ? lua_nextpos(L, t, pos) : lua_next(L, t);
}

#endif
