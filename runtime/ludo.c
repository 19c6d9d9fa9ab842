/* ludo.c - the public C API (include/ludo.h) on top of the layers. */
#include "ludo.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "base/jsonsax.h"
#include "env/env.h"
#include "net/client.h"
#include "serve/serve.h"


/* The rule for the callbacks that ludo_runtime_free runs: they start
 * nothing. Every entry point that starts work (a load, an open, a call,
 * a connect, a server, a module) asks this first and returns
 * LUDO_ECLOSED, running no callback. */
static int rt_freeing(ludo_runtime_t *rt) {
  if (!rt->freeing) return 0;
  ludo__runtime_seterr(rt, "ECLOSED: the runtime is being freed");
  return 1;
}

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

/* The Lua face of the client (net/lclient.c): every runtime's states may
 * require it, and it decides where it may run (ludo_options_t.lua_client). */
LUDO_EXTERN int luaopen_ludo_client(lua_State *L);
/* ludo.llm (net/lllm.c): allowed where ludo_options_t.lua_llm says. */
LUDO_EXTERN int luaopen_ludo_llm(lua_State *L);

LUDO_EXTERN int ludo_runtime_new(ludo_runtime_t **out,
                                 const ludo_options_t *opts) {
  ludo_options_t def;
  int rc;
  if (out == NULL) return LUDO_EINVAL;
  *out = NULL;
  if (opts == NULL) {
    ludo_options_init(&def);
    opts = &def;
  }
  rc = ludo__runtime_new(out, opts);
  if (rc == 0 && (ludo__registry_add(&(*out)->core.cmods, "ludo.client",
                                     luaopen_ludo_client, NULL) != 0 ||
                    ludo__registry_add(&(*out)->core.cmods, "ludo.llm",
                                       luaopen_ludo_llm, NULL) != 0)) {
    ludo__runtime_free(*out);
    *out = NULL;
    return LUDO_ENOMEM;
  }
  return rc;
}

LUDO_EXTERN void ludo_runtime_free(ludo_runtime_t *rt) {
  if (rt == NULL) return;
  if (!ludo__runtime_may_free(rt)) { /* it would free what runs it */
    ludo__log(&rt->core.log, LUDO_LOG_ERROR, "ludo",
              "ludo_runtime_free called from inside a call, callback or "
              "loop pass of this runtime: ignored, the runtime stays");
    return;
  }
  ludo__runtime_free(rt);
}

LUDO_EXTERN int ludo_runtime_poll(ludo_runtime_t *rt, uint32_t budget_us) {
  if (rt == NULL) return LUDO_EINVAL;
  return ludo__runtime_poll(rt, budget_us);
}

LUDO_EXTERN void ludo_runtime_interrupt(ludo_runtime_t *rt) {
  if (rt != NULL) ludo__runtime_interrupt(rt);
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
  if (rt_freeing(rt)) return LUDO_ECLOSED;
  return ludo__runtime_add_module(rt, m);
}

LUDO_EXTERN int ludo_env_load(ludo_runtime_t *rt, const char *path,
                              const ludo_env_options_t *opts,
                              ludo_env_t **out) {
  size_t i;
  if (rt == NULL || path == NULL || out == NULL) return LUDO_EINVAL;
  *out = NULL;
  if (rt_freeing(rt)) return LUDO_ECLOSED;
  rt->errmsg[0] = '\0';
  if (opts != NULL && opts->nmodules > 0) {
    if (opts->modules == NULL) {
      ludo__runtime_seterr(rt, "EINVAL: opts->modules is NULL but "
                           "opts->nmodules is %zu", opts->nmodules);
      return LUDO_EINVAL;
    }
    for (i = 0; i < opts->nmodules; i++)
      if (opts->modules[i].name == NULL) {
        ludo__runtime_seterr(rt, "EINVAL: opts->modules[%zu] has no name",
                             i);
        return LUDO_EINVAL;
      }
  }
  return ludo__env_load(rt, path, opts, out);
}

LUDO_EXTERN int ludo_env_free(ludo_env_t *env) {
  if (env == NULL) return 0;
  /* From a callback ludo_runtime_free runs: it frees env with the rest
   * (it is walking the environments now). */
  if (env->rt->freeing) return 0;
  if (env->nsessions > 0 || env->opening > 0 || env->nservers > 0)
    return LUDO_EBUSY;
  ludo__env_destroy(env);
  return 0;
}

LUDO_EXTERN const char *ludo_env_info(ludo_env_t *env, size_t *len) {
  if (env == NULL || env->info.p == NULL) {
    if (len) *len = 2;
    return "{}";
  }
  if (len) *len = env->info.len;
  return env->info.p;
}

LUDO_EXTERN int ludo_env_prewarm(ludo_env_t *env, unsigned n) {
  if (env == NULL) return LUDO_EINVAL;
  if (rt_freeing(env->rt)) return LUDO_ECLOSED;
  return ludo__env_prewarm(env, n);
}

LUDO_EXTERN int ludo_session_open(ludo_env_t *env, ludo_session_t **out) {
  if (env == NULL || out == NULL) return LUDO_EINVAL;
  *out = NULL;
  if (rt_freeing(env->rt)) return LUDO_ECLOSED;
  return ludo__session_open(env, out);
}

LUDO_EXTERN int ludo_session_open_async(ludo_env_t *env, ludo_open_cb cb,
                                        void *ud) {
  if (env == NULL || cb == NULL) return LUDO_EINVAL;
  if (rt_freeing(env->rt)) return LUDO_ECLOSED;
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
  return s ? s->id : "";
}

LUDO_EXTERN size_t ludo_session_memory(const ludo_session_t *s) {
  return s && s->ps ? s->ps->st.used : 0;
}

LUDO_EXTERN int ludo_session_collect(ludo_session_t *s) {
  if (s == NULL || s->ps == NULL) return LUDO_EINVAL;
  if (ludo__session_busy(s)) return LUDO_EBUSY;
  lua_gc(s->ps->st.L, LUA_GCCOLLECT);
  return 0;
}

LUDO_EXTERN void ludo_session_set_data(ludo_session_t *s, void *data) {
  if (s) s->data = data;
}

LUDO_EXTERN void *ludo_session_get_data(const ludo_session_t *s) {
  return s ? s->data : NULL;
}

LUDO_EXTERN ludo_session_t *ludo_session_from_lua(void *L) {
  ludo__state_t *st = L ? ludo__state_of(L) : NULL;
  return st && st->owner_is_session ? st->owner : NULL;
}

LUDO_EXTERN int ludo_session_set_strict(ludo_session_t *s, int on) {
  if (s == NULL) return LUDO_EINVAL;
  if (s->closing || s->close_requested) return LUDO_ECLOSED;
  if (ludo__session_busy(s)) return LUDO_EBUSY;
  s->strict = on != 0;
  return 0;
}

LUDO_EXTERN const char *ludo_session_errmsg(const ludo_session_t *s) {
  return s && s->err.p ? s->err.p : "";
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
  if (rt == NULL || module == NULL || out == NULL || *module == '\0' ||
      (dir != NULL && *dir == '\0'))
    return LUDO_EINVAL;
  if (rt_freeing(rt)) return LUDO_ECLOSED; /* a callback of the free */
  if (!ludo__runtime_may_block(rt)) return LUDO_EBUSY;
  rt->errmsg[0] = '\0';
  return ludo__script_open(rt, module, dir, out);
}

LUDO_EXTERN int ludo_script_call(ludo_script_t *sc, const char *fn,
                                 const char *args_json, size_t len,
                                 const char **out, size_t *out_len) {
  if (sc == NULL || fn == NULL || *fn == '\0' || out == NULL ||
      out_len == NULL)
    return LUDO_EINVAL;
  return ludo__script_call(sc, fn, args_json, len, out, out_len);
}

LUDO_EXTERN int ludo_script_call_async(ludo_script_t *sc, const char *fn,
                                       const char *args_json, size_t len,
                                       ludo_script_cb cb, void *ud) {
  if (sc == NULL || fn == NULL || *fn == '\0' || cb == NULL)
    return LUDO_EINVAL;
  return ludo__script_call_async(sc, fn, args_json, len, cb, ud);
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

LUDO_EXTERN int ludo_session_llm_usage(const ludo_session_t *s,
                                       ludo_llm_usage_t *out) {
  if (s == NULL || out == NULL) return LUDO_EINVAL;
  ludo__session_llm_usage(s, out);
  return 0;
}

LUDO_EXTERN int ludo_script_llm_usage(const ludo_script_t *sc,
                                      ludo_llm_usage_t *out) {
  if (sc == NULL || out == NULL) return LUDO_EINVAL;
  ludo__script_llm_usage(sc, out);
  return 0;
}

LUDO_EXTERN void ludo_script_free(ludo_script_t *sc) {
  if (sc != NULL) ludo__script_free(sc);
}

LUDO_EXTERN int ludo_json_parse(const char *text, size_t len, int max_depth,
                                const ludo_json_cb_t *cb, void *ud,
                                ludo_json_error_t *err) {
  if ((text == NULL && len > 0) || cb == NULL) return LUDO_EINVAL;
  return ludo__json_sax(text, len, max_depth, cb, ud, err);
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
  if (rt_freeing(env->rt)) return LUDO_ECLOSED;
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

/* ---- clients ----------------------------------------------------------- */

/* A ludo_client_t is the net layer's client (net/client.h), counting its
 * non-blocking calls in the runtime's calls in flight. */

LUDO_EXTERN void ludo_client_options_init(ludo_client_options_t *o) {
  if (o) ludo__client_options_init(o);
}

static int client_new(ludo_runtime_t *rt, const char *url,
                      const ludo_client_options_t *o, ludo_client_t **out) {
  char err[512];
  int rc;
  rt->errmsg[0] = '\0';
  rc = ludo__client_new(&rt->core, &rt->calls, url, o, out, err, sizeof err);
  if (rc != 0)
    ludo__runtime_seterr(rt, "%s: %s", ludo_err_name(rc), err);
  return rc;
}

LUDO_EXTERN int ludo_client_connect(ludo_runtime_t *rt, const char *url,
                                    const ludo_client_options_t *o,
                                    ludo_client_t **out) {
  ludo_client_t *c;
  int rc;
  if (out != NULL) *out = NULL;
  if (rt == NULL || url == NULL || out == NULL) return LUDO_EINVAL;
  if (rt_freeing(rt)) return LUDO_ECLOSED;
  if (!ludo__runtime_may_block(rt)) {
    ludo__runtime_seterr(rt, "EBUSY: a blocking connect cannot be made "
                             "from inside a callback or a host function");
    return LUDO_EBUSY;
  }
  rc = client_new(rt, url, o, &c);
  if (rc != 0) return rc;
  rc = ludo__client_call(c, LUDO__CL_CONNECT, NULL, 0, NULL, NULL, NULL,
                         NULL);
  if (rc != 0) {
    ludo__runtime_seterr(rt, "%s", ludo__client_errmsg(c));
    ludo__client_close(c, NULL, NULL);
    return rc;
  }
  *out = c;
  return 0;
}

LUDO_EXTERN int ludo_client_connect_async(ludo_runtime_t *rt,
                                          const char *url,
                                          const ludo_client_options_t *o,
                                          ludo_client_cb cb, void *ud,
                                          ludo_client_t **out) {
  ludo_client_t *c;
  int rc;
  if (out != NULL) *out = NULL;
  if (rt == NULL || url == NULL || cb == NULL || out == NULL)
    return LUDO_EINVAL;
  if (rt_freeing(rt)) return LUDO_ECLOSED;
  rc = client_new(rt, url, o, &c);
  if (rc != 0) return rc;
  rc = ludo__client_call(c, LUDO__CL_CONNECT, NULL, 0, cb, ud, NULL, NULL);
  if (rc != 0) {
    ludo__runtime_seterr(rt, "%s", ludo__client_errmsg(c));
    ludo__client_close(c, NULL, NULL);
    return rc;
  }
  *out = c;
  return 0;
}

/* The runtime of a client the API made (on the runtime's core). */
static ludo_runtime_t *client_rt(const ludo_client_t *c) {
  return (ludo_runtime_t *)((char *)c->core - offsetof(ludo_runtime_t,
                                                       core));
}

/* A blocking call of kind `kind`. */
static int client_call(ludo_client_t *c, int kind, const char *json,
                       size_t len, const char **out, size_t *out_len) {
  if (c == NULL || out == NULL) return LUDO_EINVAL;
  if (client_rt(c)->freeing) return LUDO_ECLOSED;
  return ludo__client_call(c, kind, json, len, NULL, NULL, out, out_len);
}

/* A non-blocking call of kind `kind`. From a callback ludo_runtime_free
 * runs: LUDO_ECLOSED, as for sessions. */
static int client_call_async(ludo_client_t *c, int kind, const char *json,
                             size_t len, ludo_client_cb cb, void *ud) {
  if (c == NULL || cb == NULL) return LUDO_EINVAL;
  if (client_rt(c)->freeing) return LUDO_ECLOSED;
  return ludo__client_call(c, kind, json, len, cb, ud, NULL, NULL);
}

LUDO_EXTERN int ludo_client_reset(ludo_client_t *c, const char *json,
                                  size_t len, const char **out,
                                  size_t *out_len) {
  return client_call(c, LUDO__CP_RESET, json, len, out, out_len);
}

LUDO_EXTERN int ludo_client_step(ludo_client_t *c, const char *json,
                                 size_t len, const char **out,
                                 size_t *out_len) {
  return client_call(c, LUDO__CP_STEP, json, len, out, out_len);
}

LUDO_EXTERN int ludo_client_state(ludo_client_t *c, const char **out,
                                  size_t *out_len) {
  return client_call(c, LUDO__CP_STATE, NULL, 0, out, out_len);
}

LUDO_EXTERN int ludo_client_list_tools(ludo_client_t *c, const char **out,
                                       size_t *out_len) {
  return client_call(c, LUDO__CP_TOOLS, NULL, 0, out, out_len);
}

LUDO_EXTERN int ludo_client_call_tool(ludo_client_t *c, const char *json,
                                      size_t len, const char **out,
                                      size_t *out_len) {
  return client_call(c, LUDO__CP_CALL_TOOL, json, len, out, out_len);
}

LUDO_EXTERN int ludo_client_info(ludo_client_t *c, const char **out,
                                 size_t *out_len) {
  return client_call(c, LUDO__CL_INFO, NULL, 0, out, out_len);
}

LUDO_EXTERN int ludo_client_reset_async(ludo_client_t *c, const char *json,
                                        size_t len, ludo_client_cb cb,
                                        void *ud) {
  return client_call_async(c, LUDO__CP_RESET, json, len, cb, ud);
}

LUDO_EXTERN int ludo_client_step_async(ludo_client_t *c, const char *json,
                                       size_t len, ludo_client_cb cb,
                                       void *ud) {
  return client_call_async(c, LUDO__CP_STEP, json, len, cb, ud);
}

LUDO_EXTERN int ludo_client_state_async(ludo_client_t *c, ludo_client_cb cb,
                                        void *ud) {
  return client_call_async(c, LUDO__CP_STATE, NULL, 0, cb, ud);
}

LUDO_EXTERN int ludo_client_list_tools_async(ludo_client_t *c,
                                             ludo_client_cb cb, void *ud) {
  return client_call_async(c, LUDO__CP_TOOLS, NULL, 0, cb, ud);
}

LUDO_EXTERN int ludo_client_call_tool_async(ludo_client_t *c,
                                            const char *json, size_t len,
                                            ludo_client_cb cb, void *ud) {
  return client_call_async(c, LUDO__CP_CALL_TOOL, json, len, cb, ud);
}

LUDO_EXTERN int ludo_client_info_async(ludo_client_t *c, ludo_client_cb cb,
                                       void *ud) {
  return client_call_async(c, LUDO__CL_INFO, NULL, 0, cb, ud);
}

LUDO_EXTERN void ludo_client_close(ludo_client_t *c) {
  if (c != NULL) ludo__client_close(c, NULL, NULL);
}

/* The host's close callback (may be NULL), counted as a call in
 * flight. It is also a
 * closer of the core: ludo_runtime_free runs it early (the client's
 * release comes last, after the sessions are gone), while every object
 * the callback may touch is alive. */
typedef struct {
  ludo__closer_t closer;
  ludo__core_t *core;
  unsigned *calls;
  void (*cb)(void *ud);
  void *ud;
  int ran;
} client_closing_t;

static void client_close_notify(client_closing_t *w) {
  ludo__core_remove_closer(w->core, &w->closer);
  w->ran = 1;
  (*w->calls)--;
  if (w->cb == NULL) return;
  w->core->in_callback++;
  w->cb(w->ud);
  w->core->in_callback--;
}

static void client_close_early(ludo__closer_t *cl) {
  client_close_notify((client_closing_t *)cl);
}

/* The client is released. */
static void client_closed(void *p) {
  client_closing_t *w = p;
  if (!w->ran) client_close_notify(w);
  ludo__free(&w->core->heap, w, sizeof *w);
}

LUDO_EXTERN int ludo_client_close_async(ludo_client_t *c,
                                        void (*cb)(void *ud), void *ud) {
  client_closing_t *w;
  if (c == NULL) return LUDO_EINVAL;
  if (c->closing) return LUDO_ECLOSED;
  /* Without a callback too, the release counts as a call in flight:
   * ludo_runtime_run returns once the client is gone. */
  if (client_rt(c)->freeing) {
    ludo__client_close(c, NULL, NULL);
    return cb == NULL ? 0 : LUDO_ECLOSED;
  }
  w = ludo__calloc(&c->core->heap, sizeof *w);
  if (w == NULL) {
    ludo__client_close(c, NULL, NULL); /* closes anyway, unannounced */
    return LUDO_ENOMEM;
  }
  w->closer.fn = client_close_early;
  w->core = c->core;
  w->calls = c->inflight;
  w->cb = cb;
  w->ud = ud;
  (*w->calls)++;
  ludo__core_add_closer(w->core, &w->closer);
  ludo__client_close(c, client_closed, w);
  return 0;
}

LUDO_EXTERN const char *ludo_client_errmsg(const ludo_client_t *c) {
  return c ? ludo__client_errmsg(c) : "EINVAL: no client";
}

LUDO_EXTERN const char *ludo_client_url(const ludo_client_t *c) {
  return c ? c->url.ws : "";
}

LUDO_EXTERN void ludo_client_set_data(ludo_client_t *c, void *data) {
  if (c) c->data = data;
}

LUDO_EXTERN void *ludo_client_get_data(const ludo_client_t *c) {
  return c ? c->data : NULL;
}
