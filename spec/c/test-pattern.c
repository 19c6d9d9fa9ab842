/* test-pattern.c - the sandbox's pattern functions (runtime/script/
 * pattern.c): the same results and errors as Lua's own over random cases,
 * and backtracking bounded by the call's budget (the abuse cases are in
 * test-abuse.c). */
#include "helpers.h"

#include <lauxlib.h>
#include <lualib.h>

#include "script/pattern.h"

/* A plain state: stock.* holds the library's functions, string.* ludo's. */
static lua_State *diff_state(void) {
  static const char *const fns[] = {"find", "match", "gmatch", "gsub"};
  lua_State *L = luaL_newstate();
  size_t i;
  luaL_openlibs(L);
  lua_newtable(L);
  lua_getglobal(L, "string");
  for (i = 0; i < sizeof fns / sizeof *fns; i++) {
    lua_getfield(L, -1, fns[i]);
    lua_setfield(L, -3, fns[i]);
  }
  lua_pop(L, 1);
  lua_setglobal(L, "stock");
  ludo__pattern_install(L);
  return L;
}

static void differential(lua_Integer seed, lua_Integer cases) {
  lua_State *L = diff_state();
  int rc = luaL_loadfile(L, "spec/fixtures/c/pattern_diff.lua");
  ASSERT_EQ(rc, LUA_OK);
  lua_pushinteger(L, seed);
  lua_pushinteger(L, cases);
  rc = lua_pcall(L, 2, 2, 0);
  if (rc != LUA_OK) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  ASSERT_EQ(rc, LUA_OK);
  if (!lua_isnil(L, -1)) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  ASSERT_TRUE(lua_isnil(L, -1));
  ASSERT_EQ(lua_tointeger(L, -2), cases);
  lua_close(L);
}

/* 200,000 random calls over four seeds agree with the library's. */
TEST_IMPL(pattern_same_as_library) {
  lua_Integer seed;
  for (seed = 1; seed <= 4; seed++) differential(seed, 50000);
}

/* Cases written out: every kind of item, and every error message. */
TEST_IMPL(pattern_cases) {
  static const char *const script =
      "local S, T = stock, string\n"
      "local cases = {\n"
      "  {'find', 'hello world', 'o w'}, {'find', 'hello', 'l+'},\n"
      "  {'find', 'a.b', '.', 1, true}, {'find', 'abc', '', 10},\n"
      "  {'find', 'abc', '', 4}, {'find', '', ''},\n"
      "  {'match', 'key = value', '(%w+)%s*=%s*(%w+)'},\n"
      "  {'match', 'f(a(b)c)d', '%b()'}, {'match', 'THE (quick) fox',\n"
      "   '%f[%a]%a+'}, {'match', 'abcabc', '(abc)%1'},\n"
      "  {'match', 'hello', '()ll()'}, {'match', 'x', '^$'},\n"
      "  {'match', '', '^$'}, {'match', 'a\\0b', '%z'},\n"
      "  {'match', 'a', '%'}, {'match', 'a', '[a'}, {'match', 'a', '%b'},\n"
      "  {'match', 'a', '%fa'}, {'match', 'a', '(a'}, {'match', 'a', 'a)'},\n"
      "  {'match', 'a', '%1'}, {'match', 'a', '(a)%2'},\n"
      "  {'match', ('a'):rep(300), ('(a)'):rep(33)},\n"
      "  {'match', ('a'):rep(300), ('a?'):rep(250)},\n"
      "  {'gsub', 'hello world', '(%w+)', '<%1>'},\n"
      "  {'gsub', 'abc', '', '-'}, {'gsub', 'abc', '%w', '%2'},\n"
      "  {'gsub', 'abc', '%w', '%q'}, {'gsub', 'abc', 'b', {b = true}},\n"
      "  {'gsub', 'abc', '^a', 'X'}, {'gsub', 'aaa', 'a', 'b', 2},\n"
      "  {'gsub', 'abc', 'b', print ~= nil and {}},\n"
      "  {'gsub', 'abc', '()b', '%1'},\n"
      "}\n"
      "for i, c in ipairs(cases) do\n"
      "  local fn = table.remove(c, 1)\n"
      "  local a = table.pack(pcall(S[fn], table.unpack(c, 1, 4)))\n"
      "  local b = table.pack(pcall(T[fn], table.unpack(c, 1, 4)))\n"
      "  local sa, sb = {}, {}\n"
      "  for k = 1, a.n do sa[k] = tostring(a[k]) end\n"
      "  for k = 1, b.n do sb[k] = tostring(b[k]) end\n"
      "  sa, sb = table.concat(sa, '|'), table.concat(sb, '|')\n"
      "  sa = sa:gsub(\"to '[^']*'\", '')\n"
      "  sb = sb:gsub(\"to '[^']*'\", '')\n"
      "  if sa ~= sb then error(i .. ': ' .. sa .. ' vs ' .. sb) end\n"
      "end\n"
      "local it = T.gmatch('one two  three', '%a+', 5)\n"
      "assert(it() == 'two' and it() == 'three' and it() == nil)\n"
      "assert(it() == nil)\n"
      "return #cases\n";
  lua_State *L = diff_state();
  int rc = luaL_loadstring(L, script);
  ASSERT_EQ(rc, LUA_OK);
  rc = lua_pcall(L, 0, 1, 0);
  if (rc != LUA_OK) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  ASSERT_EQ(rc, LUA_OK);
  ASSERT_TRUE(lua_tointeger(L, -1) > 30);
  lua_close(L);
}
