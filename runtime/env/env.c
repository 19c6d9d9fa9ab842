/* env.c - loading environment modules and keeping pools of pre-warmed
 * session states. */
#include "env/env.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "base/errors.h"
#include "script/json.h"
#include "script/lstep.h"
#include "script/schema.h"

typedef struct {
  ludo_env_t *env;
  ludo__pstate_t *ps;
} build_req_t;

void ludo__env_compile_schema(lua_State *L, ludo_env_t *env,
                              const char *what, ludo__schema_t **out) {
  char err[512];
  size_t n;
  const char *text = lua_tolstring(L, -1, &n);
  ludo__schema_limits_t lim;
  int rc;
  lim.stop = ludo__state_stop;
  lim.ud = L;
  lim.max_bytes = ludo__state_cap(L);
  rc = ludo__schema_compile(&env->rt->core.heap, text, n, &lim, out, err,
                            sizeof err);
  if (rc == LUDO_ETIMEOUT) ludo__schema_stop(L);
  if (rc != 0)
    ludo__error_raise(L, rc == LUDO_ENOMEM ? LUDO_ENOMEM : LUDO_ELOAD,
                      "%s: %s", what, err);
  lua_pop(L, 1);
}

void ludo__env_keep_json(lua_State *L, int idx, ludo__buf_t *b) {
  size_t n;
  const char *text;
  /* Encoded in the state, under its cap (a readme of control characters
   * grows six times as JSON), then copied into the runtime's memory. */
  ludo__json_tostring(L, idx, LUDO__JSON_MAXDEPTH);
  text = lua_tolstring(L, -1, &n);
  if (ludo__buf_add(b, text, n) != 0)
    ludo__error_raise(L, LUDO_ENOMEM, "no memory for the description");
  lua_pop(L, 1);
}

/* Probe state only: checks the declaration, writes env->info and compiles
 * the action schema. Stack: mod on top. [-0, +0, e] */
static void describe(lua_State *L, ludo_env_t *env) {
  int declared;
  ludo__modules_require(L, "ludo.envinfo");
  lua_getfield(L, -1, "describe");
  lua_pushvalue(L, -3);
  lua_pushstring(L, env->name);
  ludo__error_push_raiser(L);
  lua_call(L, 3, 2);                       /* mod, envinfo, info, declared */
  declared = lua_toboolean(L, -1);
  lua_pop(L, 1);
  ludo__env_keep_json(L, -1, &env->info);
  lua_getfield(L, -1, "concurrent");
  env->concurrent = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, -1, "name");             /* a string: envinfo checked */
  {
    size_t n;
    const char *name = lua_tolstring(L, -1, &n);
    env->label = name ? ludo__strndup(&env->rt->core.heap, name, n) : NULL;
    if (env->label == NULL) ludo__error_raise(L, LUDO_ENOMEM, "no memory");
  }
  lua_pop(L, 1);
  lua_getfield(L, -3, "observation");      /* for strict's messages */
  env->obs_declared = !lua_isnil(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, -3, "tasks");            /* checked by envinfo */
  env->has_tasks = !lua_isnil(L, -1);
  lua_pop(L, 1);
  ludo__tools_describe(L, env, -1);
  if (declared) {
    lua_getfield(L, -1, "action");
    ludo__json_tostring(L, -1, LUDO__JSON_MAXDEPTH);
    ludo__env_compile_schema(L, env, "action schema", &env->action_schema);
    lua_pop(L, 1);
  }
  /* The observation schema, for strict sessions (always declared: an
   * environment without one gets {"type": "object"}). */
  lua_getfield(L, -1, "observation");
  ludo__json_tostring(L, -1, LUDO__JSON_MAXDEPTH);
  ludo__env_compile_schema(L, env, "observation schema", &env->obs_schema);
  lua_pop(L, 1);
  lua_pop(L, 2);                           /* mod */
  /* The other states never load these; drop them so the probe state, the
   * first session's, is as small as the rest. */
  lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED);
  lua_pushnil(L);
  lua_setfield(L, -2, "ludo.envinfo");
  lua_pushnil(L);
  lua_setfield(L, -2, "ludo.schema");
  lua_pop(L, 1);
}

/* Turns the rubric's {name, rubric} pairs on top into {keys, objs}, where
 * keys[i] is the JSON text ',"name":' ready to copy into results.
 * [-1, +1, e] */
static void prepare_named(lua_State *L) {
  lua_Integer i, n;
  int pairs = lua_gettop(L);
  lua_createtable(L, 2, 0);
  if (lua_type(L, pairs) != LUA_TTABLE) {
    lua_remove(L, pairs);
    return;
  }
  n = (lua_Integer)lua_rawlen(L, pairs);
  lua_createtable(L, (int)n, 0); /* keys */
  lua_createtable(L, (int)n, 0); /* objs */
  for (i = 1; i <= n; i++) {
    luaL_Buffer b;
    lua_rawgeti(L, pairs, i);
    luaL_buffinit(L, &b);
    luaL_addstring(&b, ",");
    lua_rawgeti(L, -2, 1);
    ludo__json_tostring(L, -1, 1);  /* the name, quoted and escaped */
    lua_remove(L, -2);
    luaL_addvalue(&b);
    luaL_addchar(&b, ':');
    luaL_pushresult(&b);
    lua_rawseti(L, -4, i);
    lua_rawgeti(L, -1, 2);
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
  lua_rawseti(L, -3, 2);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, pairs); /* its `stamp`: the step's (result.c) */
  lua_rawseti(L, -2, 3);
  lua_remove(L, pairs);
}

/* The runner's way to the module's tasks: tasks(kind) returns
 * ludo.tasks bound to them ({select, ...}), or for kind LUDO__CALL_TASKS
 * ludo.tasks_api bound to that ({call}), loading each into the state (and
 * keeping it as an upvalue) the first time a session needs it: states
 * that never select a task or answer a tasks call hold neither, and those
 * that only select tasks hold no code of the calls. Upvalues: 1 and 2 the
 * bound tables (nil at first), 3 the module's `tasks`, 4 the error
 * raiser, 5 the environment's name. [-0, +1, e] */
static int load_tasks(lua_State *L) {
  int api = luaL_checkinteger(L, 1) == LUDO__CALL_TASKS;
  if (lua_isnil(L, lua_upvalueindex(1))) {
    ludo__modules_require(L, "ludo.tasks");       /* M */
    lua_getfield(L, -1, "bind");
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_pushvalue(L, lua_upvalueindex(4));
    lua_pushvalue(L, lua_upvalueindex(5));
    lua_call(L, 3, 1);                             /* M, bound */
    lua_replace(L, lua_upvalueindex(1));
    lua_pop(L, 1);
  }
  if (api && lua_isnil(L, lua_upvalueindex(2))) {
    ludo__modules_require(L, "ludo.tasks_api");   /* A */
    lua_getfield(L, -1, "bind");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_call(L, 1, 1);                             /* A, bound */
    lua_replace(L, lua_upvalueindex(2));
    lua_pop(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(api ? 2 : 1));
  return 1;
}

/* Runs in the new state, protected and under the CPU budget: loads the
 * runner and the environment module, and keeps runner.dispatch (and
 * runner.step, which a step starts without the dispatch: runner.init
 * builds it).
 * [-0, +0, e] */
static int build_protected(lua_State *L) {
  build_req_t *r = lua_touserdata(L, 1);
  ludo_env_t *env = r->env;
  int mod;
  ludo__json_setup(L);
  ludo__result_push_encoder(L);
  r->ps->encode_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ludo__modules_require(L, "ludo.runner"); /* runner */
  lua_getfield(L, -1, "dispatch");
  r->ps->dispatch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "doing");
  r->ps->doing_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, -1, "init");             /* runner, init */
  ludo__modules_loadfile(L, &env->modules, env->file);
  lua_pushstring(L, env->name);
  lua_call(L, 1, 1);                       /* runner, init, mod */
  mod = lua_gettop(L);
  if (env->info.len == 0) describe(L, env);
  if (env->action_schema != NULL)
    ludo__schema_push_validator(L, env->action_schema, "action");
  else
    lua_pushnil(L);
  ludo__schema_push_validator(L, env->rt->reset_schema, "reset");
  ludo__error_push_raiser(L);
  lua_pushstring(L, env->name);
  ludo__tools_push(L, env);
  if (env->has_tasks) {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_getfield(L, mod, "tasks");
    ludo__error_push_raiser(L);
    lua_pushstring(L, env->label ? env->label : env->name);
    lua_pushcclosure(L, load_tasks, 5);
  } else {
    lua_pushnil(L);
  }
  /* the step's maker, for the runner alone (script/lstep.h) */
  lua_pushcfunction(L, ludo__lstep_new);
  lua_call(L, 8, 1);                       /* runner, named */
  lua_getfield(L, -2, "step");
  r->ps->step_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  prepare_named(L);                        /* runner, {keys, objs} */
  lua_rawgeti(L, LUA_REGISTRYINDEX, r->ps->encode_ref);
  ludo__result_bind_rubrics(L, -1, -2);
  lua_pop(L, 1);
  r->ps->named_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  ludo__pstate_collect(r->env->rt, r->ps, L);
  return 0;
}

int ludo__env_build(ludo_env_t *env, ludo__pstate_t **out) {
  ludo_runtime_t *rt = env->rt;
  ludo__pstate_t *ps;
  build_req_t r;
  int rc;
  *out = NULL;
  rc = ludo__pstate_new(rt, &env->modules, env->name, &ps);
  if (rc != 0) return rc;
  ps->st.may_connect = (rt->opts.lua_client & LUDO_LUA_CLIENT_SESSIONS) != 0;
  ps->st.may_llm = (rt->opts.lua_llm & LUDO_LUA_LLM_SESSIONS) != 0;
  r.env = env;
  r.ps = ps;
  rc = ludo__pstate_run(rt, ps, build_protected, &r, "ELOAD");
  if (rc != 0) {
    ludo__pstate_free(rt, ps);
    return rc;
  }
  *out = ps;
  return 0;
}

/* ---- pool ------------------------------------------------------------ */

static void pool_push(ludo_env_t *env, ludo__pstate_t *ps) {
  ps->next = env->pool;
  env->pool = ps;
  env->npool++;
}

int ludo__env_acquire(ludo_env_t *env, ludo__pstate_t **out) {
  ludo__pstate_t *ps = env->pool;
  if (ps == NULL) return ludo__env_build(env, out);
  env->pool = ps->next;
  env->npool--;
  ps->next = NULL;
  *out = ps;
  return 0;
}

int ludo__env_prewarm(ludo_env_t *env, unsigned n) {
  if (n > env->target) env->target = n;
  while (env->npool < n) {
    ludo__pstate_t *ps;
    int rc = ludo__env_build(env, &ps);
    if (rc != 0) return rc;
    pool_push(env, ps);
  }
  return 0;
}

/* One state per loop pass, so a refill never holds the loop for long. */
static void refill_task(ludo__task_t *t) {
  ludo_env_t *env = (ludo_env_t *)((char *)t - offsetof(ludo_env_t, refill));
  ludo__pstate_t *ps;
  if (env->npool >= env->target || ludo__env_build(env, &ps) != 0) return;
  pool_push(env, ps);
  if (env->npool < env->target) ludo__core_post_later(&env->rt->core, t);
}

void ludo__env_want_refill(ludo_env_t *env) {
  if (env->npool < env->target)
    ludo__core_post_later(&env->rt->core, &env->refill);
}

void ludo__env_refill_blocking(ludo_env_t *env) {
  ludo__pstate_t *ps;
  /* A host that runs the loop gets its refills there. */
  if (env->npool >= env->target || !ludo__runtime_may_block(env->rt) ||
      ludo__core_loop_recent(&env->rt->core))
    return;
  if (ludo__env_build(env, &ps) == 0) pool_push(env, ps);
}

/* ---- load / destroy -------------------------------------------------- */

static char *dup_str(ludo_runtime_t *rt, const char *s, size_t n) {
  return ludo__strndup(&rt->core.heap, s, n);
}

static void free_str(ludo_runtime_t *rt, char *s) {
  if (s) ludo__free(&rt->core.heap, s, strlen(s) + 1);
}

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* ELOAD for `file`, which is there but is no regular file (a FIFO, a
 * device, a directory: reading it would block, never end, or fail). */
static int not_regular(ludo_runtime_t *rt, const char *file) {
  ludo__runtime_seterr(rt, "ELOAD: %s is not a regular file", file);
  return LUDO_ELOAD;
}

/* Upvalue 1: the ludo_host_module_t (borrowed until the environment, or
 * the runtime that registered it, is freed). See env.h. */
int ludo__env_host_module_open(lua_State *L) {
  const ludo_host_module_t *hm = lua_touserdata(L, lua_upvalueindex(1));
  const ludo_host_func_t *f;
  lua_newtable(L);
  for (f = hm->funcs; f && f->name; f++) {
    lua_pushlightuserdata(L, hm->ud);
    lua_pushcclosure(L, (lua_CFunction)(void *)f->fn, 1);
    lua_setfield(L, -2, f->name);
  }
  return 1;
}

static int add_host_modules(ludo_env_t *env, const ludo_env_options_t *o) {
  size_t i;
  int rc;
  if (o == NULL || o->nmodules == 0) return 0;
  env->hostv = ludo__malloc(&env->rt->core.heap,
                            o->nmodules * sizeof *env->hostv);
  if (env->hostv == NULL) return LUDO_ENOMEM;
  memcpy(env->hostv, o->modules, o->nmodules * sizeof *env->hostv);
  env->nhostv = o->nmodules;
  for (i = 0; i < o->nmodules; i++) {
    rc = ludo__hostmod_check(env->rt, &env->host, &o->modules[i],
                             "environment");
    if (rc != 0) return rc;
    rc = ludo__registry_add(&env->host, o->modules[i].name,
                            ludo__env_host_module_open,
                            &env->hostv[i]);
    if (rc != 0) {
      ludo__runtime_seterr(env->rt, "%s: host module name '%s'",
                           ludo__err_name(rc), o->modules[i].name);
      return rc;
    }
  }
  return 0;
}

int ludo__env_load(ludo_runtime_t *rt, const char *path,
                   const ludo_env_options_t *opts, ludo_env_t **out) {
  ludo_env_t *env;
  ludo__pstate_t *ps;
  char file[4200], dir[4096];
  const char *base;
  size_t n = strlen(path);
  int rc;
  while (n > 1 && path[n - 1] == '/') n--;
  if (n == 0 || n >= sizeof dir - 16) {
    ludo__runtime_seterr(rt, "EINVAL: bad environment path");
    return LUDO_EINVAL;
  }
  memcpy(dir, path, n);
  dir[n] = '\0';
  if (is_dir(dir)) {
    snprintf(file, sizeof file, "%s/env.lua", dir);
    if (!exists(file)) snprintf(file, sizeof file, "%s/init.lua", dir);
    if (!exists(file)) {
      ludo__runtime_seterr(rt, "ENOENT: %s has no env.lua or init.lua",
                           dir);
      return LUDO_ENOENT;
    }
    if (!is_file(file)) return not_regular(rt, file);
  } else if (exists(dir) && !is_file(dir)) {
    return not_regular(rt, dir);
  } else if (is_file(dir)) {
    char *slash;
    memcpy(file, dir, n + 1);
    slash = strrchr(dir, '/');
    if (slash == NULL)
      strcpy(dir, ".");
    else if (slash == dir)
      dir[1] = '\0';
    else
      *slash = '\0';
  } else {
    ludo__runtime_seterr(rt, "ENOENT: no environment at %s", dir);
    return LUDO_ENOENT;
  }
  env = ludo__calloc(&rt->core.heap, sizeof *env);
  if (env == NULL) return LUDO_ENOMEM;
  env->rt = rt;
  ludo__buf_init(&env->info, ludo__alloc_fn, &rt->core.heap);
  ludo__buf_init(&env->tools_json, ludo__alloc_fn, &rt->core.heap);
  env->file = dup_str(rt, file, strlen(file));
  env->modules.dir = dup_str(rt, dir, strlen(dir));
  env->modules.cache = &rt->core.cache;
  /* Default name: the folder's name, or the file's without ".lua". */
  {
    const char *nm = strcmp(strrchr(file, '/') ? strrchr(file, '/') + 1
                                               : file,
                            "env.lua") == 0 ||
                             strcmp(strrchr(file, '/') ? strrchr(file, '/') + 1
                                                       : file,
                                    "init.lua") == 0
                         ? dir
                         : file;
    size_t len;
    base = strrchr(nm, '/') ? strrchr(nm, '/') + 1 : nm;
    len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".lua") == 0) len -= 4;
    env->name = dup_str(rt, base, len);
  }
  ludo__registry_init(&env->host, &rt->core.heap);
  env->modules.local = &env->host;
  env->modules.global = &rt->core.cmods;
  rc = env->file == NULL || env->modules.dir == NULL || env->name == NULL
           ? LUDO_ENOMEM
           : add_host_modules(env, opts);
  if (rc != 0) {
    ludo__env_destroy(env);
    return rc;
  }
  env->target = rt->opts.prewarm;
  env->refill.fn = refill_task;
  /* The probe state reads the declaration and becomes the first ready
   * state of the pool, unless it compiled modules after it opened: then
   * it holds its own copies of them, and a state built now clones the
   * shared ones (runtime/core/codecache.h), which costs less than the
   * copies weigh for the session's life. */
  rc = ludo__env_build(env, &ps);
  if (rc == 0 && !ludo__codecache_current(env->modules.cache, ps->st.L)) {
    ludo__pstate_free(rt, ps);
    rc = ludo__env_build(env, &ps);
  }
  if (rc != 0) {
    ludo__env_destroy(env);
    return rc;
  }
  pool_push(env, ps);
  env->next = rt->envs;
  rt->envs = env;
  ludo__env_want_refill(env);
  *out = env;
  return 0;
}

void ludo__env_destroy(ludo_env_t *env) {
  ludo_runtime_t *rt = env->rt;
  ludo_env_t **pp;
  /* States of closed sessions the loop has not freed yet go too: no
   * close is pending here, and lua_bytes is 0 once the sessions are
   * closed and the environments freed. */
  ludo__pstate_reclaim_all(rt);
  for (pp = &rt->envs; *pp; pp = &(*pp)->next) {
    if (*pp == env) {
      *pp = env->next;
      break;
    }
  }
  while (env->pool) {
    ludo__pstate_t *ps = env->pool;
    env->pool = ps->next;
    ludo__pstate_free(rt, ps);
  }
  env->npool = 0;
  ludo__buf_free(&env->info);
  ludo__schema_free(env->action_schema);
  env->action_schema = NULL;
  ludo__schema_free(env->obs_schema);
  env->obs_schema = NULL;
  free_str(rt, env->label);
  ludo__tools_free(env);
  free_str(rt, env->file);
  free_str(rt, env->modules.dir);
  free_str(rt, env->name);
  ludo__registry_free(&env->host);
  if (env->hostv)
    ludo__free(&rt->core.heap, env->hostv, env->nhostv * sizeof *env->hostv);
  ludo__core_unpost(&rt->core, &env->refill);
  ludo__free(&rt->core.heap, env, sizeof *env);
}
