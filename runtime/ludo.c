/* ludo.c - the public C API (include/ludo.h) on top of the layers. */
#include "ludo.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "env/env.h"
#include "script/json.h"
#include "script/lre.h"
#include "script/schema.h"

LUDO_EXTERN int luaopen_ludo_core(lua_State *L);

/* What reset accepts (extra keys pass through to the environment). */
static const char reset_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"seed\":{\"type\":[\"integer\",\"null\"]},"
    "\"episode_id\":{\"type\":[\"string\",\"null\"]}}}";

LUDO_EXTERN const char *ludo_err_name(int err) { return ludo__err_name(err); }

LUDO_EXTERN const char *ludo_strerror(int err) { return ludo__strerror(err); }

LUDO_EXTERN const char *ludo_version(void) { return LUDO_VERSION_STRING; }

LUDO_EXTERN void ludo_options_init(ludo_options_t *o) {
  memset(o, 0, sizeof *o);
  o->memory_cap = (size_t)64 << 20;
  o->cpu_budget_ms = 10000;
  o->prewarm = 4;
}

LUDO_EXTERN void ludo_env_options_init(ludo_env_options_t *o) {
  memset(o, 0, sizeof *o);
}

LUDO_EXTERN int ludo_runtime_new(ludo_runtime_t **out,
                                 const ludo_options_t *opts) {
  ludo_options_t def;
  ludo__alloc_t heap;
  ludo_runtime_t *rt;
  const char *path;
  if (out == NULL) return LUDO_EINVAL;
  *out = NULL;
  if (opts == NULL) {
    ludo_options_init(&def);
    opts = &def;
  }
  ludo__alloc_init(&heap, opts->alloc, opts->alloc_ud);
  rt = ludo__alloc_fn(&heap, NULL, 0, sizeof *rt);
  if (rt == NULL) return LUDO_ENOMEM;
  memset(rt, 0, sizeof *rt);
  rt->heap = heap;
  rt->heap.live = sizeof *rt;
  rt->opts = *opts;
  rt->log.cb = opts->log;
  rt->log.ud = opts->log_ud;
  path = opts->module_path ? opts->module_path : getenv("LUDO_PATH");
  if (path != NULL) {
    rt->module_path = ludo__strndup(&rt->heap, path, strlen(path));
    if (rt->module_path == NULL) goto nomem;
  }
  rt->opts.module_path = rt->module_path;
  if (uv_loop_init(&rt->loop) != 0) goto nomem;
  rt->has_watchdog = ludo__watchdog_init(&rt->watchdog) == 0;
  ludo__registry_init(&rt->cmods, &rt->heap);
  if (ludo__registry_add(&rt->cmods, "ludo.core", luaopen_ludo_core, NULL) ||
      ludo__registry_add(&rt->cmods, "ludo.json", luaopen_ludo_json, NULL) ||
      ludo__registry_add(&rt->cmods, "ludo.re", luaopen_ludo_re, NULL)) {
    ludo__registry_free(&rt->cmods);
    uv_loop_close(&rt->loop);
    goto nomem;
  }
  if (ludo__codecache_init(&rt->cache, &rt->heap, rt->module_path) != 0) {
    ludo__registry_free(&rt->cmods);
    uv_loop_close(&rt->loop);
    goto nomem;
  }
  {
    char err[256];
    if (ludo__schema_compile(&rt->heap, reset_schema, sizeof reset_schema - 1,
                             &rt->reset_schema, err, sizeof err) != 0) {
      ludo__codecache_free(&rt->cache);
      ludo__registry_free(&rt->cmods);
      uv_loop_close(&rt->loop);
      if (rt->has_watchdog) ludo__watchdog_free(&rt->watchdog);
      goto nomem;
    }
  }
  *out = rt;
  return 0;
nomem:
  if (rt->module_path)
    ludo__free(&rt->heap, rt->module_path, strlen(rt->module_path) + 1);
  heap = rt->heap;
  ludo__alloc_fn(&heap, rt, sizeof *rt, 0);
  return LUDO_ENOMEM;
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

LUDO_EXTERN void ludo_runtime_free(ludo_runtime_t *rt) {
  ludo__alloc_t heap;
  if (rt == NULL) return;
  ludo__runtime_drain(rt);
  while (rt->sessions) ludo__session_close(rt->sessions);
  while (rt->envs) ludo__env_destroy(rt->envs);
  uv_run(&rt->loop, UV_RUN_NOWAIT); /* let close callbacks run */
  uv_walk(&rt->loop, close_walk, NULL);
  uv_run(&rt->loop, UV_RUN_DEFAULT);
  uv_loop_close(&rt->loop);
  if (rt->has_watchdog) ludo__watchdog_free(&rt->watchdog);
  ludo__schema_free(rt->reset_schema);
  ludo__codecache_free(&rt->cache);
  ludo__registry_free(&rt->cmods);
  if (rt->module_path)
    ludo__free(&rt->heap, rt->module_path, strlen(rt->module_path) + 1);
  heap = rt->heap;
  ludo__alloc_fn(&heap, rt, sizeof *rt, 0);
}

LUDO_EXTERN int ludo_runtime_poll(ludo_runtime_t *rt) {
  if (rt == NULL) return LUDO_EINVAL;
  if (rt->in_uv) return LUDO_EBUSY;
  ludo__runtime_drain(rt);
  rt->in_uv = 1;
  uv_run(&rt->loop, UV_RUN_NOWAIT);
  rt->in_uv = 0;
  ludo__runtime_drain(rt);
  return (int)rt->calls;
}

LUDO_EXTERN int ludo_runtime_run(ludo_runtime_t *rt) {
  if (rt == NULL) return LUDO_EINVAL;
  if (rt->in_uv || rt->in_callback) return LUDO_EBUSY;
  ludo__runtime_drain(rt);
  while (rt->calls > 0 || rt->ready_head != NULL) {
    rt->in_uv = 1;
    uv_run(&rt->loop, UV_RUN_ONCE);
    rt->in_uv = 0;
    ludo__runtime_drain(rt);
  }
  return 0;
}

LUDO_EXTERN int ludo_runtime_stats(ludo_runtime_t *rt, ludo_stats_t *st) {
  ludo_env_t *env;
  if (rt == NULL || st == NULL) return LUDO_EINVAL;
  memset(st, 0, sizeof *st);
  st->lua_bytes = rt->lua_live;
  st->heap_bytes = rt->heap.live;
  st->sessions = rt->nsessions;
  st->calls = rt->calls;
  for (env = rt->envs; env; env = env->next) st->prewarmed += env->npool;
  return 0;
}

LUDO_EXTERN const char *ludo_runtime_errmsg(ludo_runtime_t *rt) {
  return rt ? rt->errmsg : "EINVAL: no runtime";
}

LUDO_EXTERN int ludo_env_load(ludo_runtime_t *rt, const char *path,
                              const ludo_env_options_t *opts,
                              ludo_env_t **out) {
  size_t i;
  if (rt == NULL || path == NULL || out == NULL) return LUDO_EINVAL;
  *out = NULL;
  rt->errmsg[0] = '\0';
  if (opts != NULL && opts->nmodules > 0) {
    if (opts->modules == NULL) return LUDO_EINVAL;
    for (i = 0; i < opts->nmodules; i++)
      if (opts->modules[i].name == NULL) return LUDO_EINVAL;
  }
  return ludo__env_load(rt, path, opts, out);
}

LUDO_EXTERN int ludo_env_free(ludo_env_t *env) {
  if (env == NULL) return 0;
  if (env->nsessions > 0) return LUDO_EBUSY;
  ludo__env_destroy(env);
  return 0;
}

LUDO_EXTERN const char *ludo_env_info(ludo_env_t *env, size_t *len) {
  if (len) *len = env->info.len;
  return env->info.p ? env->info.p : "{}";
}

LUDO_EXTERN int ludo_env_prewarm(ludo_env_t *env, unsigned n) {
  if (env == NULL) return LUDO_EINVAL;
  if (n > env->target) env->target = n;
  while (env->npool < n) {
    ludo__pstate_t *ps;
    int rc = ludo__env_build(env, &ps);
    if (rc != 0) return rc;
    ps->next = env->pool;
    env->pool = ps;
    env->npool++;
  }
  return 0;
}

LUDO_EXTERN int ludo_session_open(ludo_env_t *env, ludo_session_t **out) {
  if (env == NULL || out == NULL) return LUDO_EINVAL;
  return ludo__session_open(env, out);
}

LUDO_EXTERN void ludo_session_close(ludo_session_t *s) {
  if (s != NULL) ludo__session_close(s);
}

LUDO_EXTERN const char *ludo_session_id(const ludo_session_t *s) {
  return s->id;
}

LUDO_EXTERN size_t ludo_session_memory(const ludo_session_t *s) {
  return s->ps ? s->ps->st.used : 0;
}

LUDO_EXTERN int ludo_session_collect(ludo_session_t *s) {
  if (s == NULL || s->ps == NULL) return LUDO_EINVAL;
  if (s->ps->sched.in_call) return LUDO_EBUSY;
  lua_gc(s->ps->st.L, LUA_GCCOLLECT);
  return 0;
}

LUDO_EXTERN void ludo_session_set_data(ludo_session_t *s, void *data) {
  s->data = data;
}

LUDO_EXTERN void *ludo_session_get_data(const ludo_session_t *s) {
  return s->data;
}

LUDO_EXTERN ludo_session_t *ludo_session_from_lua(void *L) {
  ludo__state_t *st = L ? ludo__state_of(L) : NULL;
  return st ? st->owner : NULL;
}

LUDO_EXTERN const char *ludo_session_errmsg(const ludo_session_t *s) {
  return s->err.p ? s->err.p : "";
}

LUDO_EXTERN int ludo_session_reset(ludo_session_t *s, const char *json,
                                   size_t len, const char **out,
                                   size_t *out_len) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_RESET, json, len, NULL, NULL, out,
                            out_len);
}

LUDO_EXTERN int ludo_session_step(ludo_session_t *s, const char *json,
                                  size_t len, const char **out,
                                  size_t *out_len) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_STEP, json, len, NULL, NULL, out,
                            out_len);
}

LUDO_EXTERN int ludo_session_state(ludo_session_t *s, const char **out,
                                   size_t *out_len) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_STATE, NULL, 0, NULL, NULL, out,
                            out_len);
}

LUDO_EXTERN int ludo_session_reset_async(ludo_session_t *s, const char *json,
                                         size_t len, ludo_call_cb cb,
                                         void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_RESET, json, len, cb, ud, NULL,
                            NULL);
}

LUDO_EXTERN int ludo_session_step_async(ludo_session_t *s, const char *json,
                                        size_t len, ludo_call_cb cb,
                                        void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_STEP, json, len, cb, ud, NULL,
                            NULL);
}

LUDO_EXTERN int ludo_session_state_async(ludo_session_t *s, ludo_call_cb cb,
                                         void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_STATE, NULL, 0, cb, ud, NULL,
                            NULL);
}
