/* runtime.c - the runtime: a core plus the environments and sessions
 * built on it, and the driving of its loop for the public API. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/env.h"
#include "script/json.h"
#include "script/lre.h"
#include "script/schema.h"

LUDO_EXTERN int luaopen_ludo_core(lua_State *L);

/* What reset accepts (extra keys pass through to the environment): OpenEnv's
 * ResetRequest, whatever the transport (HTTP, WebSocket, C API). */
static const char reset_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"seed\":{\"type\":[\"integer\",\"null\"],\"minimum\":0},"
    "\"episode_id\":{\"type\":[\"string\",\"null\"],\"maxLength\":255}}}";

void ludo__runtime_seterr(ludo_runtime_t *rt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->errmsg, sizeof rt->errmsg, fmt, ap);
  va_end(ap);
}

static void free_rt(ludo_runtime_t *rt) {
  ludo__alloc_t heap = rt->core.heap;
  ludo__pages_free(&rt->core.pages);
  ludo__alloc_fn(&heap, rt, sizeof *rt, 0);
}

static void core_closed(ludo__core_t *c) {
  free_rt((ludo_runtime_t *)((char *)c - offsetof(ludo_runtime_t, core)));
}

/* ludo's own C modules, and the reset schema. */
static int setup(ludo_runtime_t *rt) {
  ludo__registry_t *r = &rt->core.cmods;
  char err[256];
  if (ludo__registry_add(r, "ludo.core", luaopen_ludo_core, NULL) ||
      ludo__registry_add(r, "ludo.json", luaopen_ludo_json, NULL) ||
      ludo__registry_add(r, "ludo.re", luaopen_ludo_re, NULL) ||
      ludo__registry_add(r, "ludo.null", ludo__json_open_null, NULL))
    return LUDO_ENOMEM;
  if (ludo__schema_compile(&rt->core.heap, reset_schema,
                           sizeof reset_schema - 1, NULL, &rt->reset_schema,
                           err, sizeof err) != 0)
    return LUDO_ENOMEM;
  return 0;
}

/* C loops over JSON check the CPU budget of the call they run for. */
static void install_checks(void) {
  ludo__json_set_check(ludo__state_check, ludo__state_stopped);
  ludo__json_set_cap(ludo__state_cap);
}

int ludo__runtime_new(ludo_runtime_t **out, const ludo_options_t *opts) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  ludo__alloc_t heap;
  ludo_runtime_t *rt;
  const char *path = opts->module_path ? opts->module_path
                                       : getenv("LUDO_PATH");
  int rc;
  pthread_once(&once, install_checks);
  ludo__alloc_init(&heap, opts->alloc, opts->alloc_ud);
  rt = ludo__alloc_fn(&heap, NULL, 0, sizeof *rt);
  if (rt == NULL) return LUDO_ENOMEM;
  memset(rt, 0, sizeof *rt);
  rc = ludo__core_init(&rt->core, opts->alloc, opts->alloc_ud, opts->log,
                       opts->log_ud, opts->loop, path);
  if (rc != 0) {
    rt->core.heap = heap;
    free_rt(rt);
    return rc;
  }
  rt->core.heap.live += sizeof *rt;
  rt->core.on_closed = core_closed;
  rt->core.hint = ludo__session_hint;
  rt->core.hint_ud = rt;
  rt->prefetch_live = LUDO__PREFETCH_LIVE;
  rt->core.slice_ns = (uint64_t)opts->slice_us * 1000u;
  if (rt->core.has_watchdog)
    ludo__watchdog_set_slice(&rt->core.watchdog, rt->core.slice_ns);
  rt->opts = *opts;
  rt->opts.module_path = rt->core.module_path;
  rt->gc_seed = (unsigned)(uintptr_t)rt;
  rc = setup(rt);
  if (rc != 0) {
    ludo__runtime_free(rt);
    return rc;
  }
  *out = rt;
  return 0;
}

/* ludo_runtime_free, first: every callback owed runs now, with
 * ECANCELED (or the outcome that had come), while every object of the
 * runtime is still alive: opens, sessions' calls and close_asyncs,
 * scripts' calls, clients' calls and close_asyncs (their closers). What
 * the callbacks do finds its objects: calls, opens and loads return
 * LUDO_ECLOSED (rt->freeing), closes and frees are left to what
 * follows. */
static void cancel_all(ludo_runtime_t *rt) {
  ludo_env_t *env;
  ludo_session_t *s, *next;
  for (env = rt->envs; env; env = env->next) ludo__session_cancel_opens(env);
  for (s = rt->sessions; s != NULL; s = next) {
    next = s->next; /* a closing one goes now, with its callbacks */
    ludo__session_cancel(s);
  }
  ludo__script_cancel_all(rt);
  ludo__core_run_closers(&rt->core);
}

void ludo__runtime_free(ludo_runtime_t *rt) {
  rt->freeing = 1; /* callbacks run below (ECANCELED) start nothing new */
  cancel_all(rt);
  /* Then the teardown, which owes no callback any more. */
  while (rt->scripts) ludo__script_destroy(rt->scripts);
  while (rt->sessions) ludo__session_destroy(rt->sessions);
  ludo__pstate_reclaim_all(rt);
  while (rt->envs) ludo__env_destroy(rt->envs);
  ludo__runtime_free_hostmods(rt);
  ludo__schema_free(rt->reset_schema);
  rt->reset_schema = NULL;
  ludo__core_close(&rt->core); /* frees rt once its handles are closed */
}

int ludo__runtime_may_free(const ludo_runtime_t *rt) {
  return !rt->freeing && ludo__runtime_may_block(rt) &&
         rt->core.blocking == 0;
}

/* 1 when nothing may drive the loop now: inside a host function, a
 * callback, or the loop itself. */
static int busy(const ludo_runtime_t *rt) {
  return !ludo__runtime_may_block(rt);
}

void ludo__runtime_interrupt(ludo_runtime_t *rt) {
  ludo__watchdog_cancel(&rt->core.watchdog);
}

int ludo__runtime_poll(ludo_runtime_t *rt, uint32_t budget_us) {
  if (busy(rt)) return LUDO_EBUSY;
  ludo__core_poll(&rt->core, (uint64_t)budget_us * 1000u);
  return (int)rt->calls;
}

int ludo__runtime_run(ludo_runtime_t *rt) {
  if (busy(rt)) return LUDO_EBUSY;
  /* A call counts until its callback has run (held back while a blocking
   * call ran the loop, too); a held open is pending as well. Closed
   * sessions' states go to the loop, freed a slice per pass: they are
   * all back before this returns (else a burst of closes driven by run
   * alone kept them until some later pass). */
  while (rt->calls > 0 || ludo__core_held_pending(&rt->core) > 0 ||
         rt->retired != NULL)
    ludo__core_run_once(&rt->core);
  return 0;
}

void ludo__runtime_stats(ludo_runtime_t *rt, ludo_stats_t *st) {
  ludo_env_t *env;
  memset(st, 0, sizeof *st);
  st->lua_bytes = rt->lua_live;
  st->heap_bytes = rt->core.heap.live;
  st->sessions = rt->nsessions;
  st->calls = rt->calls;
  for (env = rt->envs; env; env = env->next) st->prewarmed += env->npool;
}
