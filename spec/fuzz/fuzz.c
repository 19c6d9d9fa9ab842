/* fuzz.c - shared setup of the libFuzzer targets (see fuzz.h). */
#include "fuzz.h"

#include <stdlib.h>

#include "script/json.h"

static int open_null(lua_State *L) { return ludo__json_open_null(L); }

lua_State *fuzz_state(void) {
  static lua_State *L;
  if (L != NULL) return L;
  L = luaL_newstate();
  if (L == NULL) abort();
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_null);
  lua_setfield(L, -2, "ludo.null");
  lua_pop(L, 1);
  luaL_requiref(L, "ludo.json", luaopen_ludo_json, 0);
  lua_pop(L, 1);
  return L;
}
