/* traceback.c - the traceback of a failed call (see traceback.h).
 *
 * luaL_traceback names a frame's function first by looking for it in
 * every module of the registry's loaded table (pushglobalfuncname), a
 * walk over all the entries of string, table, _G...: a script that put
 * 2 million keys into `string` made each of its failed calls cost 0.3 s
 * there, after the call's budget ended. Here the work per frame is what
 * lua_getinfo("Slnt") costs: the function's own fields and the calling
 * instruction. */
#include "script/traceback.h"

#include <lauxlib.h>

#define LEVELS1 10 /* frames shown from the top of a deep stack */
#define LEVELS2 11 /* and from its bottom */

/* The number of the last frame of L: a binary search over
 * lua_getstack, as luaL_traceback does. */
static int last_level(lua_State *L) {
  lua_Debug ar;
  int li = 1, le = 1;
  while (lua_getstack(L, le, &ar)) {
    li = le;
    le *= 2;
  }
  while (li < le) {
    int m = (li + le) / 2;
    if (lua_getstack(L, m, &ar))
      li = m + 1;
    else
      le = m;
  }
  return le - 1;
}

/* Pushes the name of frame `ar`'s function. [-0, +1, m] */
static void push_name(lua_State *L, const lua_Debug *ar) {
  if (*ar->namewhat != '\0')
    lua_pushfstring(L, "%s '%s'", ar->namewhat, ar->name);
  else if (*ar->what == 'm')
    lua_pushliteral(L, "main chunk");
  else if (*ar->what != 'C')
    lua_pushfstring(L, "function <%s:%d>", ar->short_src, ar->linedefined);
  else
    lua_pushliteral(L, "?");
}

/* Adds frame `ar` of L1 to b (whose state is L). [-0, +0, m] */
static void add_frame(lua_State *L, luaL_Buffer *b, lua_State *L1,
                      lua_Debug *ar) {
  lua_getinfo(L1, "Slnt", ar);
  if (ar->currentline <= 0)
    lua_pushfstring(L, "\n\t%s: in ", ar->short_src);
  else
    lua_pushfstring(L, "\n\t%s:%d: in ", ar->short_src, ar->currentline);
  luaL_addvalue(b);
  push_name(L, ar);
  luaL_addvalue(b);
  if (ar->istailcall) luaL_addstring(b, "\n\t(...tail calls...)");
}

void ludo__traceback(lua_State *L, lua_State *L1, const char *msg,
                     int level) {
  luaL_Buffer b;
  lua_Debug ar;
  int last = last_level(L1);
  int show = last - level > LEVELS1 + LEVELS2 ? LEVELS1 : -1;
  luaL_buffinit(L, &b);
  if (msg) {
    luaL_addstring(&b, msg);
    luaL_addchar(&b, '\n');
  }
  luaL_addstring(&b, "stack traceback:");
  while (lua_getstack(L1, level++, &ar)) {
    if (show-- == 0) {
      int n = last - level - LEVELS2 + 1; /* frames left out */
      lua_pushfstring(L, "\n\t...\t(skipping %d levels)", n);
      luaL_addvalue(&b);
      level += n;
    } else {
      add_frame(L, &b, L1, &ar);
    }
  }
  luaL_pushresult(&b);
}
