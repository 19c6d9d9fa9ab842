/* codecache.c - the runtime-wide compiled-code cache (see codecache.h). */
#include "core/codecache.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "core/bytecode.h"
#include "core/error.h"
#include "core/luashare.h"

static const char cache_key = 'c';  /* registry of C: key -> entry */

/* An entry: {bytecode, chunk name[, shared prototype, generation]}. */
enum { E_BC = 1, E_CHUNK = 2, E_PROTO = 3, E_GEN = 4 };


static int cc_setup(lua_State *C) {
  lua_newtable(C);
  lua_rawsetp(C, LUA_REGISTRYINDEX, &cache_key);
  return 0;
}

int ludo__codecache_debug_level(const char *env) {
  if (env == NULL) return LUDO__DEBUG_LINES;
  if (strcmp(env, "0") == 0 || strcmp(env, "none") == 0)
    return LUDO__DEBUG_NONE;
  if (strcmp(env, "1") == 0 || strcmp(env, "full") == 0)
    return LUDO__DEBUG_FULL;
  return LUDO__DEBUG_LINES;
}

/* Whether an on/off environment variable says off ("0" or "off"). */
static int env_off(const char *env) {
  return env != NULL && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0);
}

lua_State *ludo__codecache_newstate(ludo__codecache_t *cc, lua_Alloc f,
                                    void *ud) {
  if (cc == NULL || !cc->share) return lua_newstate(f, ud);
  return lua_newstateshared(f, ud, cc->C);
}

int ludo__codecache_current(const ludo__codecache_t *cc, lua_State *L) {
  return !cc->share || cc->gen == 0 || lua_sharedgen(L, cc->C) >= cc->gen;
}

int ludo__codecache_init(ludo__codecache_t *cc, ludo__alloc_t *heap,
                         const char *path) {
  const char *p, *q;
  cc->heap = heap;
  cc->gen = 0;
  cc->roots = NULL;
  cc->nroots = 0;
  cc->debug = ludo__codecache_debug_level(getenv("LUDO_DEBUG"));
  cc->share = lua_newstateshared != NULL &&
              !env_off(getenv("LUDO_SHARE_CODE"));
  cc->C = lua_newstate(ludo__alloc_fn, heap);
  if (cc->C == NULL) return LUDO_ENOMEM;
  lua_pushcfunction(cc->C, cc_setup);
  if (lua_pcall(cc->C, 0, 0, 0) != LUA_OK) goto nomem;
  if (path == NULL || *path == '\0') return 0;
  /* Split the ';'-separated roots. */
  for (p = path; *p; p = *q ? q + 1 : q) {
    q = strchr(p, ';');
    if (q == NULL) q = p + strlen(p);
    if (q > p) {
      char **nr = ludo__realloc(heap, cc->roots, cc->nroots * sizeof *nr,
                                (cc->nroots + 1) * sizeof *nr);
      if (nr == NULL) goto nomem;
      cc->roots = nr;
      cc->roots[cc->nroots] = ludo__strndup(heap, p, (size_t)(q - p));
      if (cc->roots[cc->nroots] == NULL) goto nomem;
      cc->nroots++;
    }
  }
  return 0;
nomem:
  ludo__codecache_free(cc);
  return LUDO_ENOMEM;
}

void ludo__codecache_free(ludo__codecache_t *cc) {
  size_t i;
  for (i = 0; i < cc->nroots; i++)
    ludo__free(cc->heap, cc->roots[i], strlen(cc->roots[i]) + 1);
  ludo__free(cc->heap, cc->roots, cc->nroots * sizeof *cc->roots);
  cc->roots = NULL;
  cc->nroots = 0;
  if (cc->C) lua_close(cc->C);
  cc->C = NULL;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  return ludo__buf_add(ud, p, sz) ? 1 : 0;
}

typedef struct {
  const char *key, *chunk, *src;
  size_t keylen, srclen;
  ludo__buf_t *bc, *tmp;
  int debug;            /* LUDO__DEBUG_* */
  int share;            /* share the prototypes too */
  unsigned int gen;     /* out: their generation */
  int (*stop)(void *);  /* asked between slices of the source; NULL: none */
  void *stop_ud;
  int stopped;          /* out: stop said yes, the compile was abandoned */
  size_t fed;           /* bytes of src given to the parser */
} compile_req_t;

/* The parser takes the source COMPILE_SLICE bytes at a time, and between
 * two slices the request's stop is asked: Lua's parser runs in C, where
 * no hook fires, and some inputs cost it quadratic time (a chain of 160k
 * `and`s: 42 s). The slice is that of the sandbox's load (state.c). */
#define COMPILE_SLICE 512

/* Writes the compiled function on top of C into r->bc with the debug
 * information r->debug keeps. Returns 0 or -1 (no memory). */
static int dump_function(lua_State *C, compile_req_t *r) {
  int rc;
  if (r->debug != LUDO__DEBUG_LINES)
    return lua_dump(C, dump_writer, r->bc, r->debug == LUDO__DEBUG_NONE)
               ? -1 : 0;
  /* Lines only: the whole dump, trimmed. A chunk the trimmer does not
   * know (another Lua) keeps everything: lines matter more than bytes. */
  if (lua_dump(C, dump_writer, r->tmp, 0) != 0) return -1;
  rc = ludo__bytecode_trim(r->tmp->p, r->tmp->len, 0, r->bc);
  if (rc == LUDO_EINVAL) {
    ludo__buf_reset(r->bc);
    rc = ludo__buf_add(r->bc, r->tmp->p, r->tmp->len);
  }
  return rc == 0 ? 0 : -1;
}

/* lua_Reader over r->src in slices; when stop says so, raises (the
 * parser's protected call catches it, cc_compile sees r->stopped). */
static const char *cc_reader(lua_State *C, void *ud, size_t *size) {
  compile_req_t *r = ud;
  size_t n = r->srclen - r->fed;
  if (r->stop != NULL && r->fed > 0 && n > 0 && r->stop(r->stop_ud)) {
    r->stopped = 1;
    luaL_error(C, "compiling stopped");
  }
  if (n > COMPILE_SLICE) n = COMPILE_SLICE;
  *size = n;
  r->fed += n;
  return n > 0 ? r->src + r->fed - n : NULL;
}

/* In C (protected): compiles src, stores {bytecode, chunkname} under key.
 * On a syntax error returns the message. [-0, +1, e] */
static int cc_compile(lua_State *C) {
  compile_req_t *r = lua_touserdata(C, 1);
  if (lua_load(C, cc_reader, r, r->chunk, "t") != LUA_OK)
    return 1; /* the message */
  if (dump_function(C, r) != 0)
    return luaL_error(C, "ENOMEM: cannot keep compiled code");
  lua_pop(C, 1);
  lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
  lua_pushlstring(C, r->key, r->keylen);
  lua_createtable(C, 4, 0);
  lua_pushlstring(C, r->bc->p, r->bc->len);
  lua_rawseti(C, -2, E_BC);
  lua_pushstring(C, r->chunk);
  lua_rawseti(C, -2, E_CHUNK);
  if (r->share) {
    /* The prototypes states clone: loaded from the bytecode they would
     * load, so they keep the same debug information. */
    unsigned int gen = 0;
    const void *proto;
    if (luaL_loadbufferx(C, r->bc->p, r->bc->len, r->chunk, "b") != LUA_OK)
      return lua_error(C);
    proto = lua_sharefunction(C, -1, &gen);
    r->gen = gen;
    lua_pop(C, 1);
    lua_pushlightuserdata(C, (void *)proto);
    lua_rawseti(C, -2, E_PROTO);
    lua_pushinteger(C, (lua_Integer)gen);
    lua_rawseti(C, -2, E_GEN);
  }
  lua_rawset(C, -3);
  lua_pop(C, 1);
  lua_pushnil(C);
  return 1;
}

typedef struct {
  const char *key;
  size_t keylen;
  const char *bc, *chunk;
  size_t bclen;
  const void *proto;    /* shared prototype, or NULL */
  unsigned int gen;     /* the generation it needs */
} find_req_t;

/* In C (protected): finds key's entry; the strings stay valid because the
 * cache never drops entries. [-0, +0, m] */
static int cc_find(lua_State *C) {
  find_req_t *r = lua_touserdata(C, 1);
  lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
  lua_pushlstring(C, r->key, r->keylen);
  if (lua_rawget(C, -2) == LUA_TTABLE) {
    lua_rawgeti(C, -1, E_BC);
    lua_rawgeti(C, -2, E_CHUNK);
    lua_rawgeti(C, -3, E_PROTO);
    lua_rawgeti(C, -4, E_GEN);
    r->bc = lua_tolstring(C, -4, &r->bclen);
    r->chunk = lua_tostring(C, -3);
    r->proto = lua_touserdata(C, -2);
    r->gen = (unsigned int)lua_tointeger(C, -1);
  }
  return 0;
}

/* Looks key up in the cache; on a hit loads the bytecode into L.
 * Returns 1 on a hit (function pushed on L), 0 on a miss. [-0, +(0|1), e] */
int ludo__codecache_lookup(lua_State *L, ludo__codecache_t *cc, const char *key,
                     size_t keylen) {
  lua_State *C = cc->C;
  find_req_t r;
  int top = lua_gettop(C);
  memset(&r, 0, sizeof r);
  r.key = key;
  r.keylen = keylen;
  lua_pushcfunction(C, cc_find);
  lua_pushlightuserdata(C, &r);
  if (lua_pcall(C, 1, 0, 0) != LUA_OK) {
    lua_settop(C, top);
    ludo__error_raise(L, LUDO_ENOMEM, "the code cache cannot grow");
  }
  lua_settop(C, top);
  if (r.bc == NULL) return 0;
  /* A state opened before the function was shared loads the bytecode: it
   * may hold its own copies of the strings shared since. */
  if (r.proto != NULL && lua_sharedgen(L, C) >= r.gen) {
    lua_clonefunction(L, r.proto);
    return 1;
  }
  if (luaL_loadbufferx(L, r.bc, r.bclen, r.chunk, "b") != LUA_OK)
    lua_error(L);
  return 1;
}

/* Compiles src under key and loads it into L. Raises ELOAD on a syntax
 * error. [-0, +1, e] */
int ludo__codecache_add(lua_State *L, ludo__codecache_t *cc, const char *key,
                        size_t keylen, const char *chunk, const char *src,
                        size_t srclen, int lib, int (*stop)(void *),
                        void *stop_ud) {
  ludo__buf_t bc, tmp;
  compile_req_t r;
  int rc;
  ludo__buf_init(&bc, ludo__alloc_fn, cc->heap);
  ludo__buf_init(&tmp, ludo__alloc_fn, cc->heap);
  r.key = key;
  r.keylen = keylen;
  r.chunk = chunk;
  r.src = src;
  r.srclen = srclen;
  r.bc = &bc;
  r.tmp = &tmp;
  r.debug = lib ? cc->debug : LUDO__DEBUG_FULL;
  r.share = cc->share;
  r.gen = 0;
  r.stop = stop;
  r.stop_ud = stop_ud;
  r.stopped = 0;
  r.fed = 0;
  lua_pushcfunction(cc->C, cc_compile);
  lua_pushlightuserdata(cc->C, &r);
  rc = lua_pcall(cc->C, 1, 1, 0);
  ludo__buf_free(&bc);
  ludo__buf_free(&tmp);
  if (r.stopped) { /* nothing kept; the caller raises its limit */
    lua_pop(cc->C, 1);
    return 1;
  }
  if (rc != LUA_OK || !lua_isnil(cc->C, -1)) {
    /* Copied out and popped before L can raise (L may be at its memory
     * cap): the cache's stack stays balanced. A message longer than the
     * copy (a syntax error near a long token) is cut. */
    char msg[1024];
    const char *m = lua_tostring(cc->C, -1);
    snprintf(msg, sizeof msg, "%s", m != NULL ? m : "cannot compile");
    lua_pop(cc->C, 1);
    ludo__error_push(L, LUDO_ELOAD, msg, strlen(msg), 0);
    lua_error(L);
  }
  lua_pop(cc->C, 1);
  if (r.gen > cc->gen) cc->gen = r.gen;
  if (!ludo__codecache_lookup(L, cc, key, keylen))
    ludo__error_raise(L, LUDO_ELOAD, "compiled code left the cache");
  return 0;
}


typedef struct {
  const char *alias, *key;
  size_t alen;
} alias_req_t;

/* In C (protected): cache[alias] = cache[key]. [-0, +0, m] */
static int cc_alias(lua_State *C) {
  alias_req_t *r = lua_touserdata(C, 1);
  lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
  lua_pushlstring(C, r->alias, r->alen);
  lua_pushstring(C, r->key);
  lua_rawget(C, -3);
  lua_rawset(C, -3);
  return 0;
}

void ludo__codecache_alias(ludo__codecache_t *cc, const char *alias,
                           size_t alen, const char *key) {
  alias_req_t r;
  int top = lua_gettop(cc->C);
  r.alias = alias;
  r.alen = alen;
  r.key = key;
  lua_pushcfunction(cc->C, cc_alias);
  lua_pushlightuserdata(cc->C, &r);
  (void)lua_pcall(cc->C, 1, 0, 0); /* no memory: no alias, a later miss */
  lua_settop(cc->C, top);
}
