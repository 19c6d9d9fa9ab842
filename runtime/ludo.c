/* ludo.c - the public C API (include/ludo.h) on top of the layers. */
#include "ludo.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "env/env.h"
#include "serve/serve.h"


LUDO_EXTERN const char *ludo_err_name(int err) { return ludo__err_name(err); }

LUDO_EXTERN const char *ludo_strerror(int err) { return ludo__strerror(err); }

LUDO_EXTERN const char *ludo_version(void) { return LUDO_VERSION_STRING; }

LUDO_EXTERN void ludo_options_init(ludo_options_t *o) {
  memset(o, 0, sizeof *o);
  o->memory_cap = (size_t)64 << 20;
  o->cpu_budget_ms = 10000;
  o->wall_limit_ms = 60000;
  o->max_input_bytes = (size_t)8 << 20;
  o->prewarm = 4;
}

LUDO_EXTERN void ludo_env_options_init(ludo_env_options_t *o) {
  memset(o, 0, sizeof *o);
}

LUDO_EXTERN int ludo_runtime_new(ludo_runtime_t **out,
                                 const ludo_options_t *opts) {
  ludo_options_t def;
  if (out == NULL) return LUDO_EINVAL;
  *out = NULL;
  if (opts == NULL) {
    ludo_options_init(&def);
    opts = &def;
  }
  return ludo__runtime_new(out, opts);
}

LUDO_EXTERN void ludo_runtime_free(ludo_runtime_t *rt) {
  if (rt != NULL) ludo__runtime_free(rt);
}

LUDO_EXTERN int ludo_runtime_poll(ludo_runtime_t *rt, uint32_t budget_us) {
  if (rt == NULL) return LUDO_EINVAL;
  return ludo__runtime_poll(rt, budget_us);
}

LUDO_EXTERN int ludo_runtime_run(ludo_runtime_t *rt) {
  if (rt == NULL) return LUDO_EINVAL;
  return ludo__runtime_run(rt);
}

LUDO_EXTERN int ludo_runtime_stats(ludo_runtime_t *rt, ludo_stats_t *st) {
  if (rt == NULL || st == NULL) return LUDO_EINVAL;
  ludo__runtime_stats(rt, st);
  return 0;
}

LUDO_EXTERN const char *ludo_runtime_errmsg(ludo_runtime_t *rt) {
  return rt ? rt->errmsg : "EINVAL: no runtime";
}

LUDO_EXTERN int ludo_runtime_add_module(ludo_runtime_t *rt,
                                        const ludo_host_module_t *m) {
  if (rt == NULL) return LUDO_EINVAL;
  if (m == NULL) {
    ludo__runtime_seterr(rt, "EINVAL: no host module given");
    return LUDO_EINVAL;
  }
  return ludo__runtime_add_module(rt, m);
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
  if (env->nsessions > 0 || env->opening > 0) return LUDO_EBUSY;
  ludo__env_destroy(env);
  return 0;
}

LUDO_EXTERN const char *ludo_env_info(ludo_env_t *env, size_t *len) {
  if (len) *len = env->info.len;
  return env->info.p ? env->info.p : "{}";
}

LUDO_EXTERN int ludo_env_prewarm(ludo_env_t *env, unsigned n) {
  if (env == NULL) return LUDO_EINVAL;
  return ludo__env_prewarm(env, n);
}

LUDO_EXTERN int ludo_session_open(ludo_env_t *env, ludo_session_t **out) {
  if (env == NULL || out == NULL) return LUDO_EINVAL;
  return ludo__session_open(env, out);
}

LUDO_EXTERN int ludo_session_open_async(ludo_env_t *env, ludo_open_cb cb,
                                        void *ud) {
  if (env == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_open_async(env, cb, ud);
}

LUDO_EXTERN void ludo_session_close(ludo_session_t *s) {
  if (s != NULL) ludo__session_close(s);
}

LUDO_EXTERN int ludo_session_close_async(ludo_session_t *s, ludo_close_cb cb,
                                         void *ud) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_close_async(s, cb, ud);
}

LUDO_EXTERN const char *ludo_session_id(const ludo_session_t *s) {
  return s->id;
}

LUDO_EXTERN size_t ludo_session_memory(const ludo_session_t *s) {
  return s->ps ? s->ps->st.used : 0;
}

LUDO_EXTERN int ludo_session_collect(ludo_session_t *s) {
  if (s == NULL || s->ps == NULL) return LUDO_EINVAL;
  if (s->ps->sched.in_call || s->ps->sched.resuming) return LUDO_EBUSY;
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

LUDO_EXTERN int ludo_session_set_strict(ludo_session_t *s, int on) {
  if (s == NULL) return LUDO_EINVAL;
  if (s->closing || s->close_requested) return LUDO_ECLOSED;
  if (s->ps->sched.in_call || s->phase != LUDO__PH_IDLE) return LUDO_EBUSY;
  s->strict = on != 0;
  return 0;
}

LUDO_EXTERN const char *ludo_session_errmsg(const ludo_session_t *s) {
  return s->err.p ? s->err.p : "";
}

LUDO_EXTERN int ludo_session_error(const ludo_session_t *s,
                                   ludo_error_t *err) {
  if (s == NULL || err == NULL) return LUDO_EINVAL;
  ludo__session_error(s, err);
  return 0;
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

LUDO_EXTERN int ludo_session_call_tool(ludo_session_t *s, const char *json,
                                       size_t len, const char **out,
                                       size_t *out_len) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_TOOL, json, len, NULL, NULL, out,
                            out_len);
}

LUDO_EXTERN int ludo_session_call_tool_async(ludo_session_t *s,
                                             const char *json, size_t len,
                                             ludo_call_cb cb, void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_TOOL, json, len, cb, ud, NULL,
                            NULL);
}

LUDO_EXTERN int ludo_session_tasks(ludo_session_t *s, const char *json,
                                   size_t len, const char **out,
                                   size_t *out_len) {
  if (s == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_TASKS, json, len, NULL, NULL, out,
                            out_len);
}

LUDO_EXTERN int ludo_session_tasks_async(ludo_session_t *s, const char *json,
                                         size_t len, ludo_call_cb cb,
                                         void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_TASKS, json, len, cb, ud, NULL,
                            NULL);
}

LUDO_EXTERN int ludo_session_state_async(ludo_session_t *s, ludo_call_cb cb,
                                         void *ud) {
  if (s == NULL || cb == NULL) return LUDO_EINVAL;
  return ludo__session_call(s, LUDO__CALL_STATE, NULL, 0, cb, ud, NULL,
                            NULL);
}

static int batch_args(ludo_session_t *const *ss, const char *const *actions,
                      const size_t *lens, size_t n, ludo_batch_cb cb) {
  return ss == NULL || actions == NULL || lens == NULL || n == 0 ||
         cb == NULL || ss[0] == NULL;
}

LUDO_EXTERN int ludo_session_step_batch(ludo_session_t *const *ss,
                                        const char *const *actions,
                                        const size_t *lens, size_t n,
                                        ludo_batch_cb cb, void *ud) {
  if (batch_args(ss, actions, lens, n, cb)) return LUDO_EINVAL;
  return ludo__session_step_batch(ss, actions, lens, n, cb, ud, 1);
}

LUDO_EXTERN int ludo_session_step_batch_async(ludo_session_t *const *ss,
                                              const char *const *actions,
                                              const size_t *lens, size_t n,
                                              ludo_batch_cb cb, void *ud) {
  if (batch_args(ss, actions, lens, n, cb)) return LUDO_EINVAL;
  return ludo__session_step_batch(ss, actions, lens, n, cb, ud, 0);
}

LUDO_EXTERN int ludo_script_open(ludo_runtime_t *rt, const char *module,
                                 const char *dir, ludo_script_t **out) {
  if (out != NULL) *out = NULL;
  if (rt == NULL || module == NULL || out == NULL) return LUDO_EINVAL;
  if (!ludo__runtime_may_block(rt)) return LUDO_EBUSY;
  rt->errmsg[0] = '\0';
  return ludo__script_open(rt, module, dir, out);
}

LUDO_EXTERN int ludo_script_call(ludo_script_t *sc, const char *fn,
                                 const char *args_json, size_t len,
                                 const char **out, size_t *out_len) {
  if (sc == NULL || fn == NULL || out == NULL || out_len == NULL)
    return LUDO_EINVAL;
  return ludo__script_call(sc, fn, args_json, len, out, out_len);
}

LUDO_EXTERN const char *ludo_script_errmsg(const ludo_script_t *sc) {
  return sc ? ludo__script_errmsg(sc) : "EINVAL: no script";
}

LUDO_EXTERN int ludo_script_error(const ludo_script_t *sc,
                                  ludo_error_t *err) {
  if (sc == NULL || err == NULL) return LUDO_EINVAL;
  ludo__script_error(sc, err);
  return 0;
}

LUDO_EXTERN void ludo_script_free(ludo_script_t *sc) {
  if (sc != NULL) ludo__script_free(sc);
}

/* ---- servers ----------------------------------------------------------- */

/* A ludo_server_t * is the ludo__serve_t * itself. */

LUDO_EXTERN void ludo_server_options_init(ludo_server_options_t *o) {
  if (o) ludo__serve_options_init(o);
}

LUDO_EXTERN int ludo_server_new(ludo_env_t *env,
                                const ludo_server_options_t *o,
                                ludo_server_t **out) {
  char msg[256];
  ludo__serve_t *sv;
  int rc;
  if (env == NULL || out == NULL) return LUDO_EINVAL;
  *out = NULL;
  rc = ludo__serve_new(env, o, &sv, msg, sizeof msg);
  if (rc != 0) {
    ludo__runtime_seterr(env->rt, "%s", msg);
    return rc;
  }
  *out = (ludo_server_t *)sv;
  return 0;
}

LUDO_EXTERN int ludo_server_listen(ludo_server_t *s, const char *host,
                                   int port) {
  if (s == NULL || host == NULL) return LUDO_EINVAL;
  return ludo__serve_listen((ludo__serve_t *)s, host, port);
}

LUDO_EXTERN int ludo_server_port(const ludo_server_t *s) {
  return s ? ludo__serve_port((const ludo__serve_t *)s) : 0;
}

LUDO_EXTERN const char *ludo_server_errmsg(const ludo_server_t *s) {
  return s ? ludo__serve_errmsg((const ludo__serve_t *)s) : "";
}

LUDO_EXTERN unsigned ludo_server_sessions(const ludo_server_t *s) {
  return s ? ludo__serve_sessions((const ludo__serve_t *)s) : 0;
}

LUDO_EXTERN void ludo_server_close(ludo_server_t *s, void (*cb)(void *ud),
                                   void *ud) {
  if (s) ludo__serve_close((ludo__serve_t *)s, cb, ud);
}

/* A ludo_server_group_t * is the ludo__serve_group_t * itself. */

LUDO_EXTERN int ludo_server_group_new(unsigned workers,
                                      ludo_server_group_t **out) {
  ludo__serve_group_t *g;
  int rc;
  if (out == NULL) return LUDO_EINVAL;
  *out = NULL;
  rc = ludo__serve_group_new(workers, &g);
  if (rc == 0) *out = (ludo_server_group_t *)g;
  return rc;
}

LUDO_EXTERN void ludo_server_group_free(ludo_server_group_t *g) {
  ludo__serve_group_free((ludo__serve_group_t *)g);
}
