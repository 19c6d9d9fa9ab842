/* test-tablewalk.c - the table walk by position (ludo__walk_next,
 * runtime/script/tablewalk.h, and lua_nextpos of
 * scripts/patches/lua-5.4.4-table-walk.patch): over tables of every
 * shape, the same entries in the same order as lua_next; a table resized
 * while walked ends or goes on without reading out of bounds. */
#include "helpers.h"

#include <lauxlib.h>
#include <lualib.h>

#include "script/tablewalk.h"

/* Builds tables of many shapes (array and hash parts, holes, removed
 * keys, keys of every type, tables shrunk and regrown, weak tables after
 * a collection): returns a list of them. */
static const char *const shapes =
    "local seed = ...\n"
    "math.randomseed(seed)\n"
    "local out, wk = {}, setmetatable({}, {__mode = 'k'})\n"
    "local function key(r)\n"
    "  if r < 0.3 then return math.random(1, 40) end\n"
    "  if r < 0.5 then return 'k' .. math.random(1, 60) end\n"
    "  if r < 0.6 then return math.random() * 100 end\n"
    "  if r < 0.7 then return math.random(-5, 0) end\n"
    "  if r < 0.8 then return {} end\n"
    "  if r < 0.9 then return r < 0.85 end\n"
    "  return print\n"
    "end\n"
    "for _ = 1, 400 do\n"
    "  local t = {}\n"
    "  for i = 1, math.random(0, 30) do t[i] = i end\n"
    "  for _ = 1, math.random(0, 60) do t[key(math.random())] = 1 end\n"
    "  for k in pairs(t) do if math.random() < 0.3 then t[k] = nil end end\n"
    "  out[#out + 1] = t\n"
    "end\n"
    "for i = 1, 50 do wk[{}] = i end\n"
    "local keep = {}\n"
    "for i = 1, 50 do local k = {}; keep[i] = k; wk[k] = i end\n"
    "collectgarbage('collect')\n"
    "out[#out + 1] = wk\n"
    "out[#out + 1] = keep\n"
    "out[#out + 1] = {}\n"
    "return out\n";

/* 1 when walking t (absolute index) with ludo__walk_next gives the entries
 * lua_next gives, in its order. */
static int same_walk(lua_State *L, int t) {
  unsigned int pos = 0;
  int base = lua_gettop(L), n = 0, i, ok = 1, more;
  lua_pushnil(L);
  while (lua_next(L, t)) { /* ..., k1, v1, ..., k */
    if (!lua_checkstack(L, 8)) return 0;
    lua_pushvalue(L, -2);
    n++;
  }
  lua_pushnil(L);
  for (i = 0; ok; i++) {
    more = ludo__walk_next(L, t, &pos);
    if (!more) break;
    ok = i < n && lua_rawequal(L, -2, base + 1 + 2 * i) &&
         lua_rawequal(L, -1, base + 2 + 2 * i);
    lua_pop(L, 1);
  }
  ok = ok && i == n;
  lua_settop(L, base);
  return ok;
}

TEST_IMPL(tablewalk_same_as_lua_next) {
  lua_State *L = luaL_newstate();
  lua_Integer seed;
  luaL_openlibs(L);
  /* The programs link ludo's Lua: the walk by position is what runs. */
  ASSERT_TRUE(lua_nextpos != NULL);
  for (seed = 1; seed <= 5; seed++) {
    lua_Integer i, n;
    ASSERT_EQ(luaL_loadstring(L, shapes), LUA_OK);
    lua_pushinteger(L, seed);
    ASSERT_EQ(lua_pcall(L, 1, 1, 0), LUA_OK);
    n = (lua_Integer)lua_rawlen(L, -1);
    ASSERT_GT(n, 400);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      ASSERT_TRUE(same_walk(L, lua_gettop(L)));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_close(L);
}

TEST_IMPL(tablewalk_resized_while_walked) {
  lua_State *L = luaL_newstate();
  int grow;
  for (grow = 0; grow < 2; grow++) {
    unsigned int pos = 0;
    int t, i, steps = 0;
    lua_createtable(L, 0, 0);
    t = lua_gettop(L);
    for (i = 1; i <= 64; i++) {
      lua_pushinteger(L, i);
      lua_setfield(L, t, lua_pushfstring(L, "k%d", i));
      lua_pop(L, 1);
    }
    lua_pushnil(L);
    while (ludo__walk_next(L, t, &pos)) {
      lua_pop(L, 1);
      /* Each entry seen is in the table; then the table is regrown
       * (many new keys) or shrunk (all removed, one new key rehashes
       * it down): the walk goes on by position, in bounds. */
      lua_pushvalue(L, -1);
      ASSERT_NE(lua_rawget(L, t), LUA_TNIL);
      lua_pop(L, 1);
      if (steps++ == 3) {
        for (i = 1; i <= 64; i++) {
          lua_pushinteger(L, grow ? i : 0);
          lua_setfield(L, t, lua_pushfstring(L, grow ? "n%d" : "k%d", i));
          lua_pop(L, 1);
        }
        if (!grow) {
          lua_pushboolean(L, 1);
          lua_setfield(L, t, "last"); /* the insertion that shrinks it */
        }
      }
      ASSERT_LT(steps, 1000);
    }
    lua_settop(L, t - 1);
  }
  lua_close(L);
}
