/* fuzz_json.c - JSON text -> Lua value -> JSON text -> Lua -> text: the
 * decoder never crashes on any input, and what it accepts encodes, decodes
 * again and encodes to the same text (the encoder's output is a fixed
 * point). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "script/json.h"

static int round_trip(lua_State *L) {
  const char *s = lua_touserdata(L, 1);
  size_t n = (size_t)lua_tointeger(L, 2), n1, n2;
  const char *t1, *t2;
  ludo__json_decode(L, s, n, LUDO__JSON_MAXDEPTH);
  ludo__json_tostring(L, -1, LUDO__JSON_MAXDEPTH);
  t1 = lua_tolstring(L, -1, &n1);
  ludo__json_decode(L, t1, n1, LUDO__JSON_MAXDEPTH);
  ludo__json_tostring(L, -1, LUDO__JSON_MAXDEPTH);
  t2 = lua_tolstring(L, -1, &n2);
  if (n1 != n2 || memcmp(t1, t2, n1) != 0) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_State *L = fuzz_state();
  lua_pushcfunction(L, round_trip);
  lua_pushlightuserdata(L, (void *)data);
  lua_pushinteger(L, (lua_Integer)size);
  lua_pcall(L, 2, 0, 0); /* a refusal is fine; a crash or abort is not */
  lua_settop(L, 0);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
