/* modules.c - module resolution, compiled-code cache and the sandbox's
 * require() (see modules.h). */
#include "script/modules.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "script/srcfile.h"
#include "script/state.h"


static const char loading = 'x';    /* marks a module being loaded */

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

static int push_source(lua_State *L) {
  ludo__srcfile_push(L, lua_touserdata(L, 1));
  return 1;
}

/* Raises the limit that stopped compiling `path`. [-0, +1, v] */
static void stopped(lua_State *L, const char *path) {
  if (ludo__state_check(L)) lua_error(L);
  ludo__error_raise(L, LUDO_ELOAD, "compiling %s was stopped", path);
}

/* One candidate file of a module (or of a file loaded by path). */
typedef struct {
  const char *name; /* the module's name; NULL: a file loaded by path */
  const char *root; /* the folder it was found in, which it may not leave */
  const char *path;
  const char *rel;  /* a library module's path below the root, or NULL */
} cand_t;

/* The cache's key of a file: its folder and its path, so that a file
 * compiled as found in one folder is not taken for one found in another
 * (where it may lead outside). */
static int file_key(char *key, size_t n, const cand_t *c) {
  int k = snprintf(key, n, "%s\n%s", c->root, c->path);
  return k > 0 && (size_t)k < n ? k : -1;
}

/* Raises ELOAD for a refused candidate (srcfile.h). [-0, +0, v] */
static void refused(lua_State *L, const cand_t *c, const char *why) {
  if (c->name)
    ludo__error_raise(L, LUDO_ELOAD, "module '%s': %s refused: %s",
                      c->name, c->path, why);
  ludo__error_raise(L, LUDO_ELOAD, "%s refused: %s", c->path, why);
}

/* Pushes the text of candidate c, or returns 0 when there is no such
 * file; raises when it is refused. [-0, +(0|1), e] */
static int read_source(lua_State *L, const cand_t *c) {
  ludo__srcfile_t f;
  char why[300];
  int rc = ludo__srcfile_open(c->root, c->path, &f, why, sizeof why);
  if (rc == LUDO_ENOENT) return 0;
  if (rc != 0) refused(L, c, why);
  /* Never raise while the file is open: read it under a protected
   * call, into the state's own memory (under its cap), then close. */
  lua_pushcfunction(L, push_source);
  lua_pushlightuserdata(L, &f);
  rc = lua_pcall(L, 1, 1, 0);
  ludo__srcfile_close(&f);
  if (rc != LUA_OK) lua_error(L);
  return 1;
}

/* Tries one candidate file. On success compiles/loads it, cached under
 * its file_key (written into key, n bytes). A library module (c->rel:
 * found under a root of the module path) is named by its path below the
 * root, "=lua/ludo/rubric.lua", whichever root holds it; other files by
 * their path, "@examples/echo/env.lua". */
static int try_file(lua_State *L, ludo__modules_t *m, luaL_Buffer *tried,
                    const cand_t *c, char *key, size_t n) {
  int keylen = file_key(key, n, c);
  if (keylen < 0)
    ludo__error_raise(L, LUDO_ELOAD, "path too long: %s", c->path);
  if (!read_source(L, c)) {
    if (tried) {
      luaL_addstring(tried, "\n\t");
      luaL_addstring(tried, c->path);
    }
    return 0;
  }
  lua_pushfstring(L, "%c%s", c->rel ? '=' : '@', c->rel ? c->rel : c->path);
  {
    size_t len;
    const char *s = lua_tolstring(L, -2, &len);
    const char *chunk = lua_tostring(L, -1);
    /* The cache asks between slices of the source whether the loading
     * call is past its limits: a module's source, untrusted as the code
     * in it, can cost Lua's parser quadratic time, in C. */
    if (ludo__codecache_add(L, m->cache, key, (size_t)keylen, chunk, s,
                            len, c->rel != NULL, ludo__state_stop, L))
      stopped(L, c->path);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
  return 1;
}

/* The folder a file loaded by path must stay in: the environment's, or
 * the file's own. Writes it into buf (n bytes). */
static const char *file_root(const ludo__modules_t *m, const char *path,
                             char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  if (m->dir) return m->dir;
  if (slash == NULL) return ".";
  if (slash == path) return "/";
  snprintf(buf, n, "%.*s", (int)(slash - path), path);
  return buf;
}

void ludo__modules_loadfile(lua_State *L, ludo__modules_t *m,
                            const char *path) {
  char dir[4096], key[8400];
  cand_t c;
  int keylen;
  c.name = NULL;
  c.root = file_root(m, path, dir, sizeof dir);
  c.path = path;
  c.rel = NULL;
  keylen = file_key(key, sizeof key, &c);
  if (keylen > 0 && ludo__codecache_lookup(L, m->cache, key, (size_t)keylen))
    return;
  if (!try_file(L, m, NULL, &c, key, sizeof key))
    ludo__error_raise(L, LUDO_ENOENT, "cannot read %s", path);
}

void ludo__modules_load(lua_State *L, ludo__modules_t *m, const char *name) {
  ludo__codecache_t *cc = m->cache;
  luaL_Buffer tried;
  char rel[512], lib[600], path[4096], key[4200], fkey[8400];
  size_t i, n;
  const ludo__embedded_t *e;
  cand_t c;
  int keylen;
  if (!valid_name(name) || strlen(name) >= sizeof rel)
    ludo__error_raise(L, LUDO_EINVAL,
                      "invalid module name '%s' (letters, digits, _ . - "
                  "only)", name);
  /* Resolved names are cached per env folder. */
  keylen = snprintf(key, sizeof key, "%s|%s", m->dir ? m->dir : "", name);
  if (keylen > 0 && (size_t)keylen < sizeof key &&
      ludo__codecache_lookup(L, cc, key, (size_t)keylen))
    return;
  for (i = 0, n = strlen(name); i <= n; i++)
    rel[i] = name[i] == '.' ? '/' : name[i];
  luaL_buffinit(L, &tried);
  c.name = name;
  c.path = path;
  /* TRY: a file of the environment's folder. TRY_LIB: a library module,
   * named by its path below the root (in lib). */
#define TRY(...)                                                        \
  do {                                                                  \
    snprintf(path, sizeof path, __VA_ARGS__);                           \
    c.root = m->dir;                                                    \
    c.rel = NULL;                                                       \
    if (try_file(L, m, &tried, &c, fkey, sizeof fkey)) goto found;      \
  } while (0)
#define TRY_LIB(...)                                                    \
  do {                                                                  \
    snprintf(lib, sizeof lib, __VA_ARGS__);                             \
    snprintf(path, sizeof path, "%s/%s", cc->roots[i], lib);            \
    c.root = cc->roots[i];                                              \
    c.rel = lib;                                                        \
    if (try_file(L, m, &tried, &c, fkey, sizeof fkey)) goto found;      \
  } while (0)
  if (m->dir) {
    TRY("%s/%s.lua", m->dir, rel);
    TRY("%s/%s/init.lua", m->dir, rel);
  }
  for (i = 0; i < cc->nroots; i++) {
    TRY_LIB("lua/%s.lua", rel);
    TRY_LIB("lua/%s/init.lua", rel);
    if (strncmp(name, "rubrics.", 8) == 0 || strncmp(name, "features.", 9) == 0)
      TRY_LIB("%s.lua", rel);
  }
#undef TRY_LIB
#undef TRY
  for (e = ludo__embedded; e->name; e++) {
    if (strcmp(e->name, name) == 0) {
      char chunk[600];
      snprintf(chunk, sizeof chunk, "=%s", e->path);
      luaL_pushresult(&tried);
      lua_pop(L, 1);
      /* ludo's own library: not stopped midway (its cost is known) */
      ludo__codecache_add(L, cc, key, (size_t)keylen, chunk, e->src, e->len, 1,
                          NULL, NULL);
      return;
    }
  }
  luaL_addstring(&tried, "\n\t(embedded modules)");
  luaL_pushresult(&tried);
  ludo__error_raise(L, LUDO_ENOENT, "module '%s' not found; searched:%s",
                    name,
             lua_tostring(L, -1));
found:
  /* stack: tried-buffer stuff..., fn. Cache under the name key too. */
  {
    /* The function is on top; the luaL_Buffer may sit below it. */
    lua_insert(L, -2);
    lua_pop(L, 1);
    if (keylen > 0 && (size_t)keylen < sizeof key)
      ludo__codecache_alias(cc, key, (size_t)keylen, fkey);
  }
}

/* ---- require --------------------------------------------------------- */

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

/* Modules the runtime loads for itself: a session cannot require them
 * (the runner holds the session's handlers and validators). */
static const char *const internal[] = {"ludo.runner", "ludo.envinfo",
                                       "ludo.tasks", "ludo.tasks_api",
                                       "ludo.tools", NULL};

static int is_internal(const char *name) {
  const char *const *p;
  for (p = internal; *p; p++)
    if (strcmp(*p, name) == 0) return 1;
  return 0;
}

/* Protected: finds module `name`'s loader and runs it. [-0, +1, e] */
static int load_and_run(lua_State *L) {
  ludo__modules_t *m = lua_touserdata(L, 1);
  const char *name = lua_tostring(L, 2);
  if (m == NULL)
    return ludo__error_raise(L, LUDO_ENOENT, "module '%s' not found", name);
  if (!push_cmod(L, m, name)) ludo__modules_load(L, m, name);
  lua_pushvalue(L, 2);
  lua_call(L, 1, 1);
  return 1;
}

/* Loads and runs `name` (index 1) with loaded (index 2) marked; on
 * failure the mark goes and the error is raised again, so the next
 * require reports the module's own error. [-0, +1, e] */
static int require_fresh(lua_State *L, const char *name) {
  lua_pushlightuserdata(L, (void *)&loading);
  lua_setfield(L, 2, name);
  lua_pushcfunction(L, load_and_run);
  lua_pushlightuserdata(L, modules_of(L));
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
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

static int l_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  if (is_internal(name))
    return ludo__error_raise(L, LUDO_ENOENT, "module '%s' is internal to "
                             "the runtime", name);
  lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED); /* 2: loaded */
  lua_pushvalue(L, 1);
  if (lua_rawget(L, 2) != LUA_TNIL) {
    if (lua_touserdata(L, -1) == &loading)
      return luaL_error(L, "require: loop while loading module '%s'", name);
    return 1;
  }
  lua_pop(L, 1);
  return require_fresh(L, name);
}

/* The runtime's own require: internal modules too, and those are not kept
 * in the state's loaded table (nothing can reach them by name). */
static int l_require_internal(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  if (!is_internal(name)) return l_require(L);
  lua_pushcfunction(L, load_and_run);
  lua_pushlightuserdata(L, modules_of(L));
  lua_pushvalue(L, 1);
  lua_call(L, 2, 1);
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

void ludo__modules_require_direct(lua_State *L, const char *name) {
  ludo__modules_t *m = modules_of(L);
  if (is_internal(name))
    ludo__error_raise(L, LUDO_ENOENT, "module '%s' is internal to the "
                      "runtime", name);
  lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED); /* loaded */
  if (lua_getfield(L, -1, name) != LUA_TNIL) {      /* loaded, value */
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lua_pushlightuserdata(L, (void *)&loading);       /* loops show */
  lua_setfield(L, -2, name);
  if (m == NULL || !push_cmod(L, m, name)) {
    if (m == NULL)
      ludo__error_raise(L, LUDO_ENOENT, "module '%s' not found", name);
    ludo__modules_load(L, m, name);
  }
  lua_pushstring(L, name);
  lua_call(L, 1, 1);                                /* loaded, value */
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, name);
  lua_remove(L, -2);
}

void ludo__modules_require(lua_State *L, const char *name) {
  lua_pushcfunction(L, l_require_internal);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
}
