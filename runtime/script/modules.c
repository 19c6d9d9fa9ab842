/* modules.c - module resolution, compiled-code cache and the sandbox's
 * require() (see modules.h). */
#include "script/modules.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"


static const char cache_key = 'c';  /* registry of C: key -> {bc, chunk} */
static const char loading = 'x';    /* marks a module being loaded */

/* ---- the cache ------------------------------------------------------- */

static int cc_setup(lua_State *C) {
  lua_newtable(C);
  lua_rawsetp(C, LUA_REGISTRYINDEX, &cache_key);
  return 0;
}

int ludo__codecache_init(ludo__codecache_t *cc, ludo__alloc_t *heap,
                         const char *path) {
  const char *p, *q;
  cc->heap = heap;
  cc->roots = NULL;
  cc->nroots = 0;
  cc->strip = getenv("LUDO_DEBUG") == NULL || *getenv("LUDO_DEBUG") == '0';
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

/* Reads a whole file into b. Returns 0, or -1 when it cannot be opened. */
static int read_file(const char *path, ludo__buf_t *b) {
  char tmp[8192];
  size_t n;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
    if (ludo__buf_add(b, tmp, n)) {
      fclose(f);
      return -2;
    }
  }
  fclose(f);
  return 0;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  return ludo__buf_add(ud, p, sz) ? 1 : 0;
}

typedef struct {
  const char *key, *chunk, *src;
  size_t keylen, srclen;
  ludo__buf_t *bc;
  int strip;
} compile_req_t;

/* In C (protected): compiles src, stores {bytecode, chunkname} under key.
 * On a syntax error returns the message. [-0, +1, e] */
static int cc_compile(lua_State *C) {
  compile_req_t *r = lua_touserdata(C, 1);
  if (luaL_loadbufferx(C, r->src, r->srclen, r->chunk, "t") != LUA_OK)
    return 1; /* the message */
  if (lua_dump(C, dump_writer, r->bc, r->strip) != 0)
    return luaL_error(C, "ENOMEM: cannot keep compiled code");
  lua_pop(C, 1);
  lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
  lua_pushlstring(C, r->key, r->keylen);
  lua_createtable(C, 2, 0);
  lua_pushlstring(C, r->bc->p, r->bc->len);
  lua_rawseti(C, -2, 1);
  lua_pushstring(C, r->chunk);
  lua_rawseti(C, -2, 2);
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
} find_req_t;

/* In C (protected): finds key's entry; the strings stay valid because the
 * cache never drops entries. [-0, +0, m] */
static int cc_find(lua_State *C) {
  find_req_t *r = lua_touserdata(C, 1);
  lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
  lua_pushlstring(C, r->key, r->keylen);
  if (lua_rawget(C, -2) == LUA_TTABLE) {
    lua_rawgeti(C, -1, 1);
    lua_rawgeti(C, -2, 2);
    r->bc = lua_tolstring(C, -2, &r->bclen);
    r->chunk = lua_tostring(C, -1);
  }
  return 0;
}

/* Looks key up in the cache; on a hit loads the bytecode into L.
 * Returns 1 on a hit (function pushed on L), 0 on a miss. [-0, +(0|1), e] */
static int cc_lookup(lua_State *L, ludo__codecache_t *cc, const char *key,
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
    luaL_error(L, "ENOMEM: the code cache cannot grow");
  }
  lua_settop(C, top);
  if (r.bc == NULL) return 0;
  if (luaL_loadbufferx(L, r.bc, r.bclen, r.chunk, "b") != LUA_OK)
    lua_error(L);
  return 1;
}

/* Compiles src under key and loads it into L. Raises ELOAD on a syntax
 * error. [-0, +1, e] */
static void cc_add(lua_State *L, ludo__codecache_t *cc, const char *key,
                   size_t keylen, const char *chunk, const char *src,
                   size_t srclen, int strip) {
  ludo__buf_t bc;
  compile_req_t r;
  int rc;
  ludo__buf_init(&bc, ludo__alloc_fn, cc->heap);
  r.key = key;
  r.keylen = keylen;
  r.chunk = chunk;
  r.src = src;
  r.srclen = srclen;
  r.bc = &bc;
  r.strip = strip && cc->strip;
  lua_pushcfunction(cc->C, cc_compile);
  lua_pushlightuserdata(cc->C, &r);
  rc = lua_pcall(cc->C, 1, 1, 0);
  ludo__buf_free(&bc);
  if (rc != LUA_OK || !lua_isnil(cc->C, -1)) {
    const char *msg = lua_tostring(cc->C, -1);
    lua_pushfstring(L, "ELOAD: %s", msg ? msg : "cannot compile");
    lua_pop(cc->C, 1);
    lua_error(L);
  }
  lua_pop(cc->C, 1);
  if (!cc_lookup(L, cc, key, keylen))
    luaL_error(L, "ELOAD: compiled code vanished from the cache");
}

/* ---- resolution ------------------------------------------------------ */

static int valid_name(const char *name) {
  const char *p;
  if (*name == '\0' || *name == '.') return 0;
  if (strstr(name, "..") != NULL) return 0;
  for (p = name; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
      return 0;
  }
  return 1;
}

static int push_buf(lua_State *L) {
  ludo__buf_t *b = lua_touserdata(L, 1);
  lua_pushlstring(L, b->p ? b->p : "", b->len);
  return 1;
}

/* Tries one candidate file. On success compiles/loads it. */
static int try_file(lua_State *L, ludo__modules_t *m, luaL_Buffer *tried,
                    const char *path, int strip) {
  ludo__buf_t src;
  int rc;
  ludo__buf_init(&src, ludo__alloc_fn, m->cache->heap);
  rc = read_file(path, &src);
  if (rc != 0) {
    ludo__buf_free(&src);
    if (rc == -2) luaL_error(L, "ENOMEM: reading %s", path);
    if (tried) {
      luaL_addstring(tried, "\n\t");
      luaL_addstring(tried, path);
    }
    return 0;
  }
  /* Never raise while src is held: copy it into a Lua string under a
   * protected call, then free it. */
  lua_pushcfunction(L, push_buf);
  lua_pushlightuserdata(L, &src);
  rc = lua_pcall(L, 1, 1, 0);
  ludo__buf_free(&src);
  if (rc != LUA_OK) lua_error(L);
  lua_pushfstring(L, "@%s", path); /* src, chunk */
  {
    size_t n;
    const char *s = lua_tolstring(L, -2, &n);
    const char *chunk = lua_tostring(L, -1);
    cc_add(L, m->cache, path, strlen(path), chunk, s, n, strip);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
  return 1;
}

void ludo__modules_loadfile(lua_State *L, ludo__modules_t *m,
                            const char *path) {
  if (cc_lookup(L, m->cache, path, strlen(path))) return;
  if (!try_file(L, m, NULL, path, 0))
    luaL_error(L, "ENOENT: cannot read %s", path);
}

void ludo__modules_load(lua_State *L, ludo__modules_t *m, const char *name) {
  ludo__codecache_t *cc = m->cache;
  luaL_Buffer tried;
  char rel[512], path[4096], key[4200];
  size_t i, n;
  const ludo__embedded_t *e;
  int keylen;
  if (!valid_name(name) || strlen(name) >= sizeof rel)
    luaL_error(L, "ENOENT: invalid module name '%s' (letters, digits, _ . - "
                  "only)", name);
  /* Resolved names are cached per env folder. */
  keylen = snprintf(key, sizeof key, "%s|%s", m->dir ? m->dir : "", name);
  if (keylen > 0 && (size_t)keylen < sizeof key &&
      cc_lookup(L, cc, key, (size_t)keylen))
    return;
  for (i = 0, n = strlen(name); i <= n; i++)
    rel[i] = name[i] == '.' ? '/' : name[i];
  luaL_buffinit(L, &tried);
#define TRY(strip, ...)                                       \
  do {                                                        \
    snprintf(path, sizeof path, __VA_ARGS__);                 \
    if (try_file(L, m, &tried, path, strip)) goto found;      \
  } while (0)
  if (m->dir) {
    TRY(0, "%s/%s.lua", m->dir, rel);
    TRY(0, "%s/%s/init.lua", m->dir, rel);
  }
  for (i = 0; i < cc->nroots; i++) {
    TRY(1, "%s/lua/%s.lua", cc->roots[i], rel);
    TRY(1, "%s/lua/%s/init.lua", cc->roots[i], rel);
    if (strncmp(name, "rubrics.", 8) == 0 || strncmp(name, "features.", 9) == 0)
      TRY(1, "%s/%s.lua", cc->roots[i], rel);
  }
#undef TRY
  for (e = ludo__embedded; e->name; e++) {
    if (strcmp(e->name, name) == 0) {
      char chunk[600];
      snprintf(chunk, sizeof chunk, "@%s", e->path);
      luaL_pushresult(&tried);
      lua_pop(L, 1);
      cc_add(L, cc, key, (size_t)keylen, chunk, e->src, e->len, 1);
      return;
    }
  }
  luaL_addstring(&tried, "\n\t(embedded modules)");
  luaL_pushresult(&tried);
  luaL_error(L, "ENOENT: module '%s' not found; searched:%s", name,
             lua_tostring(L, -1));
found:
  /* stack: tried-buffer stuff..., fn. Cache under the name key too. */
  {
    /* The function is on top; the luaL_Buffer may sit below it. */
    lua_insert(L, -2);
    lua_pop(L, 1);
    if (keylen > 0 && (size_t)keylen < sizeof key) {
      lua_State *C = cc->C;
      /* Alias: name key -> same entry as the path key. */
      lua_rawgetp(C, LUA_REGISTRYINDEX, &cache_key);
      lua_pushstring(C, path);
      lua_rawget(C, -2);
      lua_pushlstring(C, key, (size_t)keylen);
      lua_insert(C, -2);
      lua_rawset(C, -3);
      lua_pop(C, 1);
    }
  }
}

/* ---- require --------------------------------------------------------- */

void ludo__registry_init(ludo__registry_t *r, ludo__alloc_t *heap) {
  memset(r, 0, sizeof *r);
  r->heap = heap;
}

void ludo__registry_free(ludo__registry_t *r) {
  size_t i;
  for (i = 0; i < r->n; i++)
    ludo__free(r->heap, r->v[i].name, strlen(r->v[i].name) + 1);
  if (r->v) ludo__free(r->heap, r->v, r->cap * sizeof *r->v);
  r->v = NULL;
  r->n = r->cap = 0;
}

const ludo__cmod_t *ludo__registry_find(const ludo__registry_t *r,
                                        const char *name) {
  size_t i;
  if (r == NULL) return NULL;
  for (i = 0; i < r->n; i++)
    if (strcmp(r->v[i].name, name) == 0) return &r->v[i];
  return NULL;
}

int ludo__registry_add(ludo__registry_t *r, const char *name,
                       lua_CFunction open, void *ud) {
  ludo__cmod_t *e;
  if (name == NULL || open == NULL || !valid_name(name)) return LUDO_EINVAL;
  e = (ludo__cmod_t *)ludo__registry_find(r, name);
  if (e == NULL) {
    if (r->n == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 8;
      ludo__cmod_t *nv = ludo__realloc(r->heap, r->v, r->cap * sizeof *nv,
                                       ncap * sizeof *nv);
      if (nv == NULL) return LUDO_ENOMEM;
      r->v = nv;
      r->cap = ncap;
    }
    e = &r->v[r->n];
    e->name = ludo__strndup(r->heap, name, strlen(name));
    if (e->name == NULL) return LUDO_ENOMEM;
    r->n++;
  }
  e->open = open;
  e->ud = ud;
  return 0;
}

static const char modules_key = 'm'; /* registry: the state's resolver */

static ludo__modules_t *modules_of(lua_State *L) {
  ludo__modules_t *m;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &modules_key);
  m = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return m;
}

/* Pushes the loader of a registered C module, or returns 0. */
static int push_cmod(lua_State *L, ludo__modules_t *m, const char *name) {
  const ludo__cmod_t *e = ludo__registry_find(m->local, name);
  if (e == NULL) e = ludo__registry_find(m->global, name);
  if (e == NULL) return 0;
  lua_pushlightuserdata(L, e->ud);
  lua_pushcclosure(L, e->open, 1);
  return 1;
}

static int l_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  ludo__modules_t *m = modules_of(L);
  lua_settop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED); /* 2: loaded */
  lua_pushvalue(L, 1);
  if (lua_rawget(L, 2) != LUA_TNIL) {
    if (lua_touserdata(L, -1) == &loading)
      return luaL_error(L, "require: loop while loading module '%s'", name);
    return 1;
  }
  lua_pop(L, 1);
  lua_pushlightuserdata(L, (void *)&loading);
  lua_setfield(L, 2, name);
  /* 3: the loader function */
  if (m == NULL) {
    return luaL_error(L, "ENOENT: module '%s' not found", name);
  } else if (!push_cmod(L, m, name)) {
    ludo__modules_load(L, m, name);
  }
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    /* Forget the "loading" mark so a later require may try again. */
    lua_pushnil(L);
    lua_setfield(L, 2, name);
    return lua_error(L);
  }
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, 2, name);
  return 1;
}

void ludo__modules_install(lua_State *L, ludo__modules_t *m) {
  lua_pushlightuserdata(L, m);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &modules_key);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, LUDO__LOADED);
  /* package holds only `loaded` (the state's own modules, as in stock Lua:
   * code may drop one it no longer needs); no loaders, paths or loadlib. */
  lua_createtable(L, 0, 1);
  lua_insert(L, -2);
  lua_setfield(L, -2, "loaded");
  lua_setglobal(L, "package");
  lua_pushcfunction(L, l_require);
  lua_setglobal(L, "require");
}

void ludo__modules_require(lua_State *L, const char *name) {
  lua_pushcfunction(L, l_require);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
}
