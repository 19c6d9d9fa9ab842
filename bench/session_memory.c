/* session_memory.c - what each module costs a session state, in bytes
 * after a full GC: a sandboxed state, then each module named on the
 * command line required in turn (default: the echo env's), then the echo
 * session itself through the public API.
 * usage: build/ludo-memory [module ...]   (run from the repo root) */
#include <lauxlib.h>
#include <stdio.h>

#include "core/registry.h"
#include "ludo.h"
#include "script/modules.h"
#include "script/state.h"

/* ludo's own C modules, registered by the runtime for every session
 * (runtime/env/runtime.c); this program builds a state without a runtime,
 * so it registers them itself. */
LUDO_EXTERN int luaopen_ludo_core(lua_State *L);
LUDO_EXTERN int luaopen_ludo_json(lua_State *L);
LUDO_EXTERN int luaopen_ludo_re(lua_State *L);

/* Requires module arg 1 the way the runtime does (internal modules such
 * as ludo.runner included, which a session's own require refuses) and
 * keeps its value referenced from the registry, since the runtime keeps
 * internal modules out of the state's loaded table. [-1, +0, e] */
static int require_kept(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  ludo__modules_require(L, name);
  luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int main(int argc, char **argv) {
  static const char *const defaults[] = {
      "ludo.null", "ludo.core", "ludo.json", "ludo.runner", "ludo.class",
      "ludo.rubric", "ludo.rubrics", "rubrics.weighted_sum", NULL};
  const char *const *mods = argc > 1 ? (const char *const *)argv + 1
                                     : defaults;
  ludo__alloc_t heap;
  ludo__codecache_t cc;
  ludo__registry_t cmods;
  ludo__modules_t m = {0};
  ludo__state_t st = {0};
  int i;
  ludo__alloc_init(&heap, NULL, NULL);
  if (ludo__codecache_init(&cc, &heap, ".") != 0) return 1;
  ludo__registry_init(&cmods, &heap);
  if (ludo__registry_add(&cmods, "ludo.core", luaopen_ludo_core, NULL) ||
      ludo__registry_add(&cmods, "ludo.json", luaopen_ludo_json, NULL) ||
      ludo__registry_add(&cmods, "ludo.re", luaopen_ludo_re, NULL))
    return 1;
  m.cache = &cc;
  m.global = &cmods;
  st.heap = &heap;
  st.modules = &m;
  if (ludo__state_open(&st) != 0) return 1;
  lua_gc(st.L, LUA_GCCOLLECT);
  printf("%-28s %7zu\n", "sandboxed state", st.used);
  for (i = 0; mods[i] != NULL; i++) {
    size_t before = st.used;
    lua_pushcfunction(st.L, require_kept);
    lua_pushstring(st.L, mods[i]);
    if (lua_pcall(st.L, 1, 0, 0) != LUA_OK) {
      const char *msg = luaL_tolstring(st.L, -1, NULL);
      fprintf(stderr, "ludo-memory: require '%s': %s\n", mods[i], msg);
      return 1;
    }
    lua_gc(st.L, LUA_GCCOLLECT);
    printf("%-28s +%6zu = %zu\n", mods[i], st.used - before, st.used);
  }
  ludo__state_close(&st);
  ludo__registry_free(&cmods);
  ludo__codecache_free(&cc);
  {
    ludo_options_t o;
    ludo_runtime_t *rt;
    ludo_env_t *env;
    ludo_session_t *s;
    const char *out;
    size_t len;
    ludo_options_init(&o);
    o.module_path = ".";
    if (ludo_runtime_new(&rt, &o) != 0 ||
        ludo_env_load(rt, "examples/echo", NULL, &env) != 0 ||
        ludo_session_open(env, &s) != 0)
      return 1;
    ludo_session_reset(s, "{}", 2, &out, &len);
    ludo_session_step(s, "{\"message\":\"hi\"}", 16, &out, &len);
    ludo_session_collect(s);
    printf("%-28s %7zu\n", "echo session (idle)", ludo_session_memory(s));
    ludo_runtime_free(rt);
  }
  return 0;
}
