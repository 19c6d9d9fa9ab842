/* codecache.h - the runtime-wide compiled-code cache: Lua chunks compiled
 * once (text only) and kept as bytecode under a key (a file path or a
 * module name), so building a session state loads bytecode instead of
 * compiling. Where modules are found is script/modules.h's business; the
 * cache only keeps what it is given, and never drops an entry. */
#ifndef LUDO_CORE_CODECACHE_H
#define LUDO_CORE_CODECACHE_H

#include <lua.h>
#include <stddef.h>

#include "base/alloc.h"
#include "ludo_defs.h"

/* Runtime-wide compiled-code cache. */
typedef struct ludo__codecache_s {
  ludo__alloc_t *heap; /* borrowed */
  lua_State *C;        /* plain state holding bytecode strings */
  char **roots;        /* module path roots (owned copies) */
  size_t nroots;
  int debug;           /* debug information kept in library modules:
                          LUDO__DEBUG_* */
  int share;           /* prototypes shared with the states it opens */
  unsigned int gen;    /* generation of the last function shared */
} ludo__codecache_t;

/* How much debug information library modules keep (LUDO_DEBUG). */
enum {
  LUDO__DEBUG_NONE = 0,  /* none: errors in them read "?:-1" */
  LUDO__DEBUG_LINES = 1, /* source names and lines (the default) */
  LUDO__DEBUG_FULL = 2   /* everything, local and upvalue names too */
};

/* The level the environment asks for: LUDO_DEBUG unset or "lines":
 * LINES; "0" or "none": NONE; "1" or "full": FULL; anything else:
 * LINES. */
int ludo__codecache_debug_level(const char *env);

/* Opens a Lua state (lua_newstate's contract) that clones the cache's
 * compiled functions instead of loading their bytecode: their prototypes,
 * constants and names then exist once per runtime instead of once per
 * state (docs/performance.md, "Shared prototypes"). Plain lua_newstate
 * when cc is NULL, when the Lua linked lacks ludo's patch (libludo.so on
 * the system's liblua5.4), or when LUDO_SHARE_CODE is "0" or "off". The
 * state must be closed before the cache is freed. */
lua_State *ludo__codecache_newstate(ludo__codecache_t *cc, lua_Alloc f,
                                    void *ud);

/* Whether L (opened by ludo__codecache_newstate) clones every function
 * the cache holds: 0 when L opened before some of them were compiled (it
 * loads its own copies of those), 1 otherwise and when nothing is shared. */
int ludo__codecache_current(const ludo__codecache_t *cc, lua_State *L);

/* Creates the cache; `path` is a ';'-separated list of roots (may be NULL).
 * Returns 0 or LUDO_ENOMEM. */
int ludo__codecache_init(ludo__codecache_t *cc, ludo__alloc_t *heap,
                         const char *path);
void ludo__codecache_free(ludo__codecache_t *cc);

/* Looks `key` up; on a hit loads the bytecode into L. Returns 1 on a hit
 * (function pushed), 0 on a miss. Raises ENOMEM. [-0, +(0|1), e] */
int ludo__codecache_lookup(lua_State *L, ludo__codecache_t *cc,
                           const char *key, size_t keylen);

/* Compiles `src` (text only) under `key` with chunk name `chunk` and loads
 * it into L. A library module (`lib`) keeps the debug information the
 * cache's level allows; other code keeps all of it. The parser takes the
 * source in slices, and `stop` (NULL: none) is asked between them: when
 * it says yes the compile is abandoned, nothing is kept or pushed, and 1
 * is returned (the caller raises its limit). Returns 0 with the function
 * pushed; raises "ELOAD: <syntax error>". [-0, +(0|1), e] */
int ludo__codecache_add(lua_State *L, ludo__codecache_t *cc,
                        const char *key, size_t keylen, const char *chunk,
                        const char *src, size_t srclen, int lib,
                        int (*stop)(void *), void *stop_ud);

/* Makes `alias` name the entry of `key` too (no-op when key is absent,
 * or when the cache has no memory left: the alias then misses later). */
void ludo__codecache_alias(ludo__codecache_t *cc, const char *alias,
                           size_t alen, const char *key);

#endif
