/* fuzz_pattern.c - differential: ludo's string.find/match/gmatch/gsub
 * (runtime/script/pattern.c) against Lua's own, on any pattern, subject
 * and start position. Input: init byte, pattern, NUL, subject. Results
 * and error messages must be the same; a difference aborts. Inputs whose
 * pattern could make the library's matcher run for long (more than three
 * repetition items, or a subject over 64 bytes) are skipped: the library
 * has no budget to stop it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "script/pattern.h"

static const char compare[] =
    "local stock, s, p, init = ...\n"
    "local function norm(v)\n"
    "  if type(v) ~= 'string' then return tostring(v) end\n"
    "  return (stock.gsub(v, \"to '[^']*'\", ''))\n"
    "end\n"
    "local function run(fn, ...)\n"
    "  local r = table.pack(pcall(fn, ...))\n"
    "  for i = 1, r.n do r[i] = norm(r[i]) end\n"
    "  return table.concat(r, '|', 1, r.n)\n"
    "end\n"
    "local function all(gmatch)\n"
    "  local out = {}\n"
    "  for a, b in gmatch(s, p, init) do\n"
    "    out[#out + 1] = tostring(a) .. ',' .. tostring(b)\n"
    "    if #out == 100 then break end\n"
    "  end\n"
    "  return table.concat(out, ';')\n"
    "end\n"
    "local repl = { '<%0>', '%1', function(a) return a end, { a = 'A' } }\n"
    "local checks = {\n"
    "  { run(stock.find, s, p, init), run(string.find, s, p, init) },\n"
    "  { run(stock.find, s, p, init, true),\n"
    "    run(string.find, s, p, init, true) },\n"
    "  { run(stock.match, s, p, init), run(string.match, s, p, init) },\n"
    "  { run(all, stock.gmatch), run(all, string.gmatch) },\n"
    "}\n"
    "for _, r in ipairs(repl) do\n"
    "  checks[#checks + 1] = { run(stock.gsub, s, p, r),\n"
    "    run(string.gsub, s, p, r) }\n"
    "end\n"
    "for i, c in ipairs(checks) do\n"
    "  if c[1] ~= c[2] then\n"
    "    return string.format('check %d on %q %q: library %s, ludo %s',\n"
    "      i, s, p, c[1], c[2])\n"
    "  end\n"
    "end\n";

static lua_State *state(void) {
  static lua_State *L;
  static const char *const fns[] = {"find", "match", "gmatch", "gsub"};
  size_t i;
  if (L != NULL) return L;
  L = fuzz_state();
  lua_newtable(L);
  lua_getglobal(L, "string");
  for (i = 0; i < sizeof fns / sizeof *fns; i++) {
    lua_getfield(L, -1, fns[i]);
    lua_setfield(L, -3, fns[i]);
  }
  lua_pop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.stock");
  ludo__pattern_install(L);
  if (luaL_loadstring(L, compare) != LUA_OK) abort();
  lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.compare");
  return L;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_State *L = state();
  const char *p, *end = (const char *)data + size, *p_end;
  size_t i, reps = 0;
  if (size < 2) return 0;
  p = (const char *)data + 1;
  p_end = memchr(p, 0, (size_t)(end - p));
  if (p_end == NULL || end - p_end - 1 > 64) return 0;
  for (i = 0; p + i < p_end; i++)
    if (strchr("*+-?", p[i]) != NULL) reps++;
  if (reps > 3) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.compare");
  lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.stock");
  lua_pushlstring(L, p, (size_t)(p_end - p));
  lua_pushlstring(L, p_end + 1, (size_t)(end - p_end - 1));
  lua_insert(L, -2); /* subject, then pattern */
  lua_pushinteger(L, (int8_t)data[0] % 70);
  if (lua_pcall(L, 4, 1, 0) != LUA_OK || !lua_isnil(L, -1)) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    abort();
  }
  lua_settop(L, 0);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
