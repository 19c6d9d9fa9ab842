/* tools.c - an environment's MCP tools on the C side: their argument
 * schemas, compiled once per environment in the probe state and shared by
 * its sessions, and what each session state is given to run them (a
 * validator per tool, and the tool list as JSON for list_tools). The Lua
 * side is ludo.runner; the declaration is checked by ludo.envinfo. */
#include <lauxlib.h>
#include <string.h>

#include "core/error.h"
#include "env/env.h"
#include "script/json.h"
#include "script/schema.h"

struct ludo__tool_s {
  char *name;
  struct ludo__schema_s *schema;
};

/* Compiles the input schema of tool i (the entry on top) into env->tools[i].
 * [-0, +0, e] */
static void compile_one(lua_State *L, ludo_env_t *env, size_t i) {
  ludo__alloc_t *heap = &env->rt->core.heap;
  char what[160];
  size_t n;
  const char *text;
  struct ludo__tool_s *t = &env->tools[i];
  lua_getfield(L, -1, "name");
  text = lua_tolstring(L, -1, &n);
  t->name = ludo__strndup(heap, text, n);
  lua_pop(L, 1);
  if (t->name == NULL)
    ludo__error_raise(L, LUDO_ENOMEM, "no memory for a tool's name");
  lua_getfield(L, -1, "input_schema");
  ludo__json_tostring(L, -1, LUDO__JSON_MAXDEPTH);
  snprintf(what, sizeof what, "tools.%s.input", t->name);
  ludo__env_compile_schema(L, env, what, &t->schema);
  lua_pop(L, 1);
}

void ludo__tools_describe(lua_State *L, ludo_env_t *env, int info) {
  size_t i, n;
  info = lua_absindex(L, info);
  if (lua_getfield(L, info, "tools") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  n = (size_t)lua_rawlen(L, -1);
  if (n > 0) {
    env->tools = ludo__calloc(&env->rt->core.heap, n * sizeof *env->tools);
    if (env->tools == NULL)
      ludo__error_raise(L, LUDO_ENOMEM, "no memory for the tools");
    env->ntools = n;
    for (i = 0; i < n; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      compile_one(L, env, i);
      lua_pop(L, 1);
    }
  }
  ludo__env_keep_json(L, -1, &env->tools_json);
  lua_pop(L, 1);
}

/* The loader the runner calls on a session's first tool action: returns
 * the validators, the list and ludo.tools. Upvalue 1: the env. */
static int load_tools(lua_State *L) {
  ludo_env_t *env = lua_touserdata(L, lua_upvalueindex(1));
  size_t i;
  lua_createtable(L, 0, (int)env->ntools);
  for (i = 0; i < env->ntools; i++) {
    ludo__schema_push_validator(L, env->tools[i].schema, "arguments");
    lua_setfield(L, -2, env->tools[i].name);
  }
  lua_pushlstring(L, env->tools_json.p, env->tools_json.len);
  ludo__modules_require(L, "ludo.tools");
  return 3;
}

void ludo__tools_push(lua_State *L, ludo_env_t *env) {
  if (env->ntools == 0) {
    lua_pushnil(L);
    return;
  }
  lua_pushlightuserdata(L, env);
  lua_pushcclosure(L, load_tools, 1);
}

void ludo__tools_free(ludo_env_t *env) {
  ludo__alloc_t *heap = &env->rt->core.heap;
  size_t i;
  for (i = 0; i < env->ntools; i++) {
    struct ludo__tool_s *t = &env->tools[i];
    if (t->name) ludo__free(heap, t->name, strlen(t->name) + 1);
    ludo__schema_free(t->schema);
  }
  if (env->tools) ludo__free(heap, env->tools, env->ntools * sizeof *env->tools);
  env->tools = NULL;
  env->ntools = 0;
  ludo__buf_free(&env->tools_json);
}
