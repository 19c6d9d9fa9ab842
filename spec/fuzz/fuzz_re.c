/* fuzz_re.c - ludo.re: compile and match any pattern, flags and subject.
 * Input: flags, NUL, pattern, NUL, subject. find, match, gsub and split
 * either return or raise a Lua error; none crashes or runs unbounded (the
 * match limits hold). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "script/lre.h"

static int run(lua_State *L) {
  const char *fn[] = {"find", "match", "gsub", "split"};
  int i;
  for (i = 0; i < 4; i++) {
    lua_getfield(L, 1, fn[i]);
    lua_pushvalue(L, 4); /* subject */
    lua_pushvalue(L, 3); /* pattern */
    if (i == 2) lua_pushliteral(L, "<$0>"); /* gsub's replacement */
    lua_pushvalue(L, 2);                     /* flags */
    lua_pcall(L, i == 2 ? 4 : 3, 0, 0);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_State *L = fuzz_state();
  const char *p = (const char *)data, *end = p + size;
  const char *f_end = memchr(p, 0, size), *pat, *pat_end;
  if (f_end == NULL) return 0;
  pat = f_end + 1;
  pat_end = memchr(pat, 0, (size_t)(end - pat));
  if (pat_end == NULL) return 0;
  lua_pushcfunction(L, run);
  luaL_requiref(L, "ludo.re", luaopen_ludo_re, 0);
  lua_pushlstring(L, p, (size_t)(f_end - p));
  lua_pushlstring(L, pat, (size_t)(pat_end - pat));
  lua_pushlstring(L, pat_end + 1, (size_t)(end - pat_end - 1));
  lua_pcall(L, 4, 0, 0);
  lua_settop(L, 0);
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
