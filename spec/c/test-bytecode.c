/* test-bytecode.c - trimming the debug information of binary chunks
 * (runtime/core/bytecode.c) on its own: a trimmed chunk loads, runs and
 * still says where it is (source and lines), without local or upvalue
 * names; keeping everything gives back the dump byte for byte; truncated
 * or foreign chunks are refused without reading past their end. */
#include "helpers.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <string.h>

#include "core/bytecode.h"

/* Every kind of constant, locals, upvalues and nested functions; f(2)
 * raises on line 9. */
static const char chunk_src[] =
    "local up = { 1, 2.5, 'short', ('long'):rep(20), true, false }\n"
    "local function inner(a)\n"
    "  local b = a + 1\n"
    "  return function(c)\n"
    "    local d = c * b + #up\n"
    "    if up[5] and not up[6] and d ~= nil then\n"
    "      local e = math.huge\n"
    "      if c == 2 then\n"
    "        error('boom ' .. tostring(e > d))\n"
    "      end\n"
    "    end\n"
    "    return d\n"
    "  end\n"
    "end\n"
    "return inner(1)\n";

static int writer(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  return ludo__buf_add(ud, p, n);
}

/* Dumps chunk_src compiled as "@spec/chunk.lua". */
static void dump(lua_State *L, ludo__buf_t *b, int strip) {
  ASSERT_EQ(luaL_loadbufferx(L, chunk_src, sizeof chunk_src - 1,
                             "@spec/chunk.lua", "t"), LUA_OK);
  ASSERT_EQ(lua_dump(L, writer, b, strip), 0);
  lua_pop(L, 1);
}

/* Loads the chunk in b and calls the function it returns with `arg`.
 * Returns the status; the result or the message is left on top. */
static int run(lua_State *L, const ludo__buf_t *b, int arg) {
  ASSERT_EQ(luaL_loadbufferx(L, b->p, b->len, "ignored", "b"), LUA_OK);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  lua_pushinteger(L, arg);
  return lua_pcall(L, 1, 1, 0);
}

TEST_IMPL(bytecode_trim_keeps_lines) {
  lua_State *L = luaL_newstate();
  ludo__buf_t full, stripped, lines, all;
  lua_Debug ar;
  const char *name;
  ASSERT_NOT_NULL(L);
  luaL_openlibs(L);
  ludo__buf_init(&full, test_alloc_fn, &test_heap);
  ludo__buf_init(&stripped, test_alloc_fn, &test_heap);
  ludo__buf_init(&lines, test_alloc_fn, &test_heap);
  ludo__buf_init(&all, test_alloc_fn, &test_heap);
  dump(L, &full, 0);
  dump(L, &stripped, 1);

  /* Keeping everything is the dump itself. */
  ASSERT_OK(ludo__bytecode_trim(full.p, full.len,
                                LUDO__BC_LOCALS | LUDO__BC_UPNAMES, &all));
  ASSERT_EQ(all.len, full.len);
  ASSERT_EQ(memcmp(all.p, full.p, full.len), 0);

  /* Lines only: between the stripped and the full dump in size. */
  ASSERT_OK(ludo__bytecode_trim(full.p, full.len, 0, &lines));
  ASSERT_LT(lines.len, full.len);
  ASSERT_GT(lines.len, stripped.len);

  /* It runs like the original... */
  ASSERT_EQ(run(L, &lines, 3), LUA_OK);
  ASSERT_EQ(lua_tointeger(L, -1), 3 * 2 + 6);
  lua_pop(L, 1);
  /* ...and its errors say where: the source and the line. */
  ASSERT_EQ(run(L, &lines, 2), LUA_ERRRUN);
  ASSERT_STR_EQ(lua_tostring(L, -1), "spec/chunk.lua:9: boom true");
  lua_pop(L, 1);
  /* The stripped dump cannot. */
  ASSERT_EQ(run(L, &stripped, 2), LUA_ERRRUN);
  ASSERT_STR_EQ(lua_tostring(L, -1), "boom true");
  lua_pop(L, 1);

  /* Names are gone: the upvalue `up` of the inner function has none, and
   * its lines are still there. */
  ASSERT_EQ(luaL_loadbufferx(L, lines.p, lines.len, "x", "b"), LUA_OK);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  name = lua_getupvalue(L, -1, 1);
  ASSERT_NOT_NULL(name);
  ASSERT_STR_EQ(name, "(no name)");
  lua_pop(L, 1);
  lua_pushvalue(L, -1);
  ASSERT_TRUE(lua_getinfo(L, ">SL", &ar));
  ASSERT_STR_EQ(ar.short_src, "spec/chunk.lua");
  ASSERT_EQ(ar.linedefined, 4);
  ASSERT_EQ(lua_type(L, -1), LUA_TTABLE); /* the lines with code */
  lua_rawgeti(L, -1, 9);
  ASSERT_TRUE(lua_toboolean(L, -1));
  lua_pop(L, 3);
  /* With full information the name is there. */
  ASSERT_EQ(luaL_loadbufferx(L, full.p, full.len, "x", "b"), LUA_OK);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  name = lua_getupvalue(L, -1, 1);
  ASSERT_NOT_NULL(name);
  ASSERT_TRUE(strcmp(name, "up") == 0 || strcmp(name, "b") == 0);
  lua_pop(L, 2);

  lua_close(L);
  ludo__buf_free(&full);
  ludo__buf_free(&stripped);
  ludo__buf_free(&lines);
  ludo__buf_free(&all);
}

/* Every truncation of a dump, and a dump of another format, is refused;
 * each input lives in a block of exactly its size, so a read past the end
 * shows under ASan. */
TEST_IMPL(bytecode_trim_refuses_bad_chunks) {
  lua_State *L = luaL_newstate();
  ludo__buf_t full, out;
  size_t n;
  char *copy;
  ASSERT_NOT_NULL(L);
  ludo__buf_init(&full, test_alloc_fn, &test_heap);
  ludo__buf_init(&out, test_alloc_fn, &test_heap);
  dump(L, &full, 0);
  for (n = 0; n < full.len; n++) {
    copy = test_alloc_fn(&test_heap, NULL, 0, n ? n : 1);
    ASSERT_NOT_NULL(copy);
    memcpy(copy, full.p, n);
    ludo__buf_reset(&out);
    ASSERT_ERR(ludo__bytecode_trim(copy, n, 0, &out), LUDO_EINVAL);
    test_alloc_fn(&test_heap, copy, n ? n : 1, 0);
  }
  /* Trailing bytes, another version byte, a text chunk. */
  ASSERT_OK(ludo__buf_addc(&full, 0));
  ludo__buf_reset(&out);
  ASSERT_ERR(ludo__bytecode_trim(full.p, full.len, 0, &out), LUDO_EINVAL);
  full.len--;
  full.p[4] = 0x53;
  ludo__buf_reset(&out);
  ASSERT_ERR(ludo__bytecode_trim(full.p, full.len, 0, &out), LUDO_EINVAL);
  ludo__buf_reset(&out);
  ASSERT_ERR(ludo__bytecode_trim(chunk_src, sizeof chunk_src - 1, 0, &out),
             LUDO_EINVAL);
  lua_close(L);
  ludo__buf_free(&full);
  ludo__buf_free(&out);
}
