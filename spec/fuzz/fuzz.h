/* fuzz.h - shared setup of the libFuzzer targets (spec/fuzz/fuzz_NAME.c): a plain
 * Lua state with ludo's JSON and regex modules, for the targets that test
 * the value layer and ludo.re without a runtime. */
#ifndef LUDO_FUZZ_H
#define LUDO_FUZZ_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>
#include <stdint.h>

/* A state with the standard libraries, "ludo.null" (the session sentinel)
 * preloaded and ludo.json set up. Made once per process. */
lua_State *fuzz_state(void);

#endif
