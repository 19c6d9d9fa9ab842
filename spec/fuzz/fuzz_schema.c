/* fuzz_schema.c - JSON Schema compilation and validation: the input is a
 * schema and a value separated by a NUL byte. Compiling any text and
 * checking any value against any compiled schema must end in a verdict,
 * never a crash, and leave no memory behind. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "fuzz.h"
#include "script/json.h"
#include "script/schema.h"

static int validate(lua_State *L) {
  ludo__schema_t *sch = lua_touserdata(L, 1);
  const char *v = lua_touserdata(L, 2);
  size_t n = (size_t)lua_tointeger(L, 3);
  ludo__buf_t *msg = lua_touserdata(L, 4);
  ludo__json_decode(L, v, n, LUDO__JSON_MAXDEPTH);
  ludo__schema_check(L, -1, sch, "value", msg);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lua_State *L = fuzz_state();
  const uint8_t *sep = memchr(data, 0, size);
  size_t slen = sep ? (size_t)(sep - data) : size;
  ludo__alloc_t heap;
  ludo__schema_t *sch = NULL;
  char err[256];
  ludo__buf_t msg;
  /* bounded as a module's declaration is (the default memory cap) */
  ludo__schema_limits_t lim = {NULL, NULL, (size_t)64 << 20};
  ludo__alloc_init(&heap, NULL, NULL);
  ludo__buf_init(&msg, ludo__alloc_fn, &heap);
  if (ludo__schema_compile(&heap, (const char *)data, slen, &lim, &sch, err,
                           sizeof err) == 0) {
    lua_pushcfunction(L, validate);
    lua_pushlightuserdata(L, sch);
    lua_pushlightuserdata(L, (void *)(sep ? sep + 1 : data + size));
    lua_pushinteger(L, (lua_Integer)(sep ? size - slen - 1 : 0));
    lua_pushlightuserdata(L, &msg);
    lua_pcall(L, 4, 0, 0);
    lua_settop(L, 0);
    ludo__buf_free(&msg);
    ludo__schema_free(sch);
  }
  if (heap.live != 0) abort(); /* the schema's memory came back */
  return 0;
}
