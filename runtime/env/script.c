/* script.c - scripts: a Lua module loaded by name into a sandboxed state
 * of its own (the sandbox, memory cap and CPU budget of sessions), whose
 * functions the host calls by name with JSON arguments and a JSON result.
 * `ludo run` drives its policies through them. */
#include <lauxlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "env/env.h"
#include "script/json.h"

struct ludo_script_s {
  int freeing;               /* ludo_script_free runs: calls refused */
  int held;                  /* a blocking call runs: a free waits for it */
  int free_owed;             /* ... and it frees the script on return */
  ludo_runtime_t *rt;
  ludo_script_t *prev, *next;  /* rt->scripts, once open */
  int linked;
  ludo__pstate_t *ps;
  ludo__modules_t modules;
  char *name;                  /* module name (owned) */
  int mod_ref;                 /* the module's value */
  const char *fn;              /* function of the call in flight */
  ludo__buf_t out, err;
  int status, done;
  int runnable;                /* the call waited and can go on */
  /* Non-blocking calls (ludo_script_call_async): the task runs the call
   * from the loop (phase LUDO__PH_*), the input and the function's name
   * are copies. */
  ludo__task_t task;
  ludo__task_t nudge;          /* keeps a blocking call's loop pass from
                                  blocking in its poll after a wake */
  int phase, async;
  ludo_script_cb cb;
  void *cb_ud;
  ludo__buf_t in;
  char fn_copy[128];
  int err_code;                /* the last failure: its code, */
  char err_fn[64];             /* function (cut to fit), */
  char err_where[LUDO__WHERE_MAX]; /* and where a limit stopped it */
};

/* Protected, at open: requires the module and keeps its value. */
static int script_init(lua_State *L) {
  ludo_script_t *sc = lua_touserdata(L, 1);
  ludo__json_setup(L);
  ludo__modules_require_direct(L, sc->name);
  sc->mod_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* After the function returned (also after waits): its first result. */
static int script_call_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return 1;
}

/* The call, in the call thread: module[fn](args...) where args is the
 * decoded JSON array of the input; returns its first result. The function
 * may wait (ludo.sleep): it is called with a continuation, so the call
 * thread can yield across this C function. */
static int script_call(lua_State *L) {
  ludo__state_t *st = ludo__state_of(L);
  ludo_script_t *sc = st->owner;
  ludo__sched_t *s = st->sched;
  int n = 0;
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, sc->mod_ref);
  if (lua_type(L, 1) != LUA_TTABLE ||
      lua_getfield(L, 1, sc->fn) != LUA_TFUNCTION)
    return ludo__error_raise(L, LUDO_EINVAL, "module %s has no function %s",
                             sc->name, sc->fn);
  if (s->input_len > 0) {
    /* The array's values straight onto the stack: no table for them. */
    n = ludo__json_decode_args(L, s->input, s->input_len,
                               LUDO__JSON_MAXDEPTH);
    if (n < 0)
      return ludo__error_raise(L, LUDO_EINVAL, "the arguments of %s.%s "
                               "must be a JSON array", sc->name, sc->fn);
  }
  lua_callk(L, n, 1, 0, script_call_k);
  return script_call_k(L, LUA_OK, 0);
}

/* Protected, on the finished call thread: encodes the result. */
static int encode_first(lua_State *L) {
  ludo_script_t *sc = lua_touserdata(L, 2);
  if (lua_isnil(L, 1))
    return ludo__buf_add(&sc->out, "null", 4) ? luaL_error(L, "ENOMEM") : 0;
  ludo__json_encode(L, 1, &sc->out, LUDO__JSON_MAXDEPTH, NULL);
  return 0;
}

static void script_done(ludo__sched_t *s, int status, lua_State *co,
                        void *ud) {
  ludo_script_t *sc = ud;
  (void)s;
  ludo__buf_reset(&sc->out);
  if (status == 0) {
    lua_settop(co, 1);
    lua_pushcfunction(co, encode_first);
    lua_insert(co, 1);
    lua_pushlightuserdata(co, sc);
    status = lua_pcall(co, 2, 0, 0);
    if (status != 0) {
      status = ludo__state_error(&sc->ps->st, co, status);
      if (status == LUDO_ESCRIPT) status = LUDO_EVALUE;
    }
  }
  if (status != 0) {
    size_t len = 0;
    const char *msg = lua_tolstring(co, -1, &len);
    ludo__buf_reset(&sc->err);
    if (msg == NULL ||
        ludo__buf_add_clipped(&sc->err, msg, len, LUDO__ERRMSG_MAX))
      ludo__buf_reset(&sc->err);
    sc->err_code = status;
    snprintf(sc->err_fn, sizeof sc->err_fn, "%s", sc->fn);
    sc->err_where[0] = '\0';
    /* A limit says where, and in which function of which module. */
    if (status == LUDO_ETIMEOUT || status == LUDO_ENOMEM) {
      memcpy(sc->err_where, sc->ps->st.where, sizeof sc->err_where);
      ludo__buf_printf(&sc->err, " during %s.%s", sc->name, sc->fn);
    }
  }
  sc->status = status;
  sc->done = 1;
  if (sc->async) { /* counted until delivered */
    sc->phase = LUDO__PH_DELIVER;
    ludo__core_post(&sc->rt->core, &sc->task);
  }
}

static void nudged(ludo__task_t *t) { (void)t; }

/* The call waited and can go on: a blocking call resumes it in its own
 * loop (ludo__script_call), a non-blocking one from its task. */
static void script_wake(ludo__sched_t *s, void *ud) {
  ludo_script_t *sc = ud;
  (void)s;
  if (!sc->async) {
    /* ludo__script_call resumes it once uv_run returns; the nudge makes
     * this pass end without blocking in its poll, even when the wake came
     * from a timer or another callback that ran before the poll. */
    sc->runnable = 1;
    ludo__core_post(&sc->rt->core, &sc->nudge);
    return;
  }
  sc->phase = LUDO__PH_RUN;
  ludo__core_post(&sc->rt->core, &sc->task);
}

/* Runs the host's callback of a finished non-blocking call, which counts
 * as in flight until here. The callback may free the script or start its
 * next call: nothing touches sc after. */
static void script_deliver(ludo_script_t *sc) {
  ludo__core_t *c = &sc->rt->core;
  ludo_script_cb cb = sc->cb;
  void *ud = sc->cb_ud;
  int status = sc->status;
  sc->cb = NULL;
  sc->cb_ud = NULL;
  sc->phase = LUDO__PH_IDLE;
  sc->async = 0;
  sc->rt->calls--;
  c->in_callback++;
  if (status == 0)
    cb(sc, 0, sc->out.p ? sc->out.p : "null", sc->out.p ? sc->out.len : 4,
       ud);
  else
    cb(sc, status, ludo__script_errmsg(sc), sc->err.p ? sc->err.len : 0, ud);
  c->in_callback--;
}

/* Makes `msg` the script's last failure, of `code`, in function `fn`. */
static void set_failure(ludo_script_t *sc, int code, const char *fn,
                        const char *msg) {
  ludo__buf_reset(&sc->err);
  if (ludo__buf_adds(&sc->err, msg)) ludo__buf_reset(&sc->err);
  sc->err_code = code;
  snprintf(sc->err_fn, sizeof sc->err_fn, "%s", fn);
  sc->err_where[0] = '\0';
}

/* Refuses an input over max_input_bytes, saying so (ludo_script_errmsg
 * was empty: `ludo run` printed "policy: " and nothing). */
static int too_big(ludo_script_t *sc, const char *fn, size_t len) {
  char msg[200];
  snprintf(msg, sizeof msg, "ETOOBIG: the arguments of %s.%.64s are %zu "
           "bytes; the limit is %zu (max_input_bytes)", sc->name, fn, len,
           sc->rt->opts.max_input_bytes);
  set_failure(sc, LUDO_ETOOBIG, fn, msg);
  return LUDO_ETOOBIG;
}

/* Fails a non-blocking call that could not start (no call thread). */
static void script_fail_start(ludo_script_t *sc, int rc) {
  set_failure(sc, rc, sc->fn, "ENOMEM: no memory left to start the call");
  sc->status = rc;
  sc->done = 1;
  sc->phase = LUDO__PH_DELIVER;
  ludo__core_post(&sc->rt->core, &sc->task);
}

/* After its Lua ran: a free from inside it (free_running) is done now;
 * the call's callback runs inside, with ECANCELED. */
static void free_if_owed(ludo_script_t *sc) {
  if (!sc->free_owed || sc->held) return;
  sc->free_owed = 0;
  ludo__script_destroy(sc);
}

/* The script's task: starts, resumes or delivers its non-blocking call. */
static void script_task(ludo__task_t *t) {
  ludo_script_t *sc =
      (ludo_script_t *)((char *)t - offsetof(ludo_script_t, task));
  int rc;
  switch (sc->phase) {
    case LUDO__PH_START:
      sc->phase = LUDO__PH_IDLE;
      sc->ps->sched.sliceable = 1;
      rc = ludo__sched_start(&sc->ps->sched, sc->ps->dispatch_ref, 0,
                             sc->in.p, sc->in.len, script_done, sc);
      if (rc != 0) script_fail_start(sc, rc);
      free_if_owed(sc);
      break;
    case LUDO__PH_RUN:
      sc->phase = LUDO__PH_IDLE;
      ludo__sched_continue(&sc->ps->sched);
      free_if_owed(sc);
      break;
    case LUDO__PH_DELIVER:
      if (sc->rt->core.blocking) { /* after the blocking call returns */
        ludo__core_post_delivery(&sc->rt->core, &sc->task);
        break;
      }
      script_deliver(sc);
      break;
    default:
      break;
  }
}

int ludo__script_open(ludo_runtime_t *rt, const char *module,
                      const char *dir, ludo_script_t **out) {
  ludo__alloc_t *heap = &rt->core.heap;
  ludo_script_t *sc = ludo__calloc(heap, sizeof *sc);
  int rc;
  *out = NULL;
  if (sc == NULL) return LUDO_ENOMEM;
  sc->rt = rt;
  sc->mod_ref = LUA_NOREF;
  ludo__buf_init(&sc->out, ludo__alloc_fn, heap);
  ludo__buf_init(&sc->err, ludo__alloc_fn, heap);
  ludo__buf_init(&sc->in, ludo__alloc_fn, heap);
  sc->task.fn = script_task;
  sc->nudge.fn = nudged;
  sc->name = ludo__strndup(heap, module, strlen(module));
  sc->modules.cache = &rt->core.cache;
  sc->modules.global = &rt->core.cmods;
  if (dir != NULL) sc->modules.dir = ludo__strndup(heap, dir, strlen(dir));
  if (sc->name == NULL || (dir != NULL && sc->modules.dir == NULL)) {
    ludo__script_destroy(sc);
    return LUDO_ENOMEM;
  }
  rc = ludo__pstate_new(rt, &sc->modules, sc->name, &sc->ps);
  if (rc == 0) {
    sc->ps->st.owner = sc;
    sc->ps->st.may_connect =
        (rt->opts.lua_client & LUDO_LUA_CLIENT_SCRIPTS) != 0;
    sc->ps->st.may_llm = (rt->opts.lua_llm & LUDO_LUA_LLM_SCRIPTS) != 0;
    rc = ludo__pstate_run(rt, sc->ps, script_init, sc, "ELOAD");
  }
  if (rc != 0) {
    ludo__script_destroy(sc);
    return rc;
  }
  lua_pushcfunction(sc->ps->st.L, script_call);
  sc->ps->dispatch_ref = luaL_ref(sc->ps->st.L, LUA_REGISTRYINDEX);
  sc->ps->sched.wake = script_wake;
  sc->ps->sched.wake_ud = sc;
  sc->next = rt->scripts; /* ludo_runtime_free frees what is left */
  if (rt->scripts) rt->scripts->prev = sc;
  rt->scripts = sc;
  sc->linked = 1;
  *out = sc;
  return 0;
}

int ludo__script_call(ludo_script_t *sc, const char *fn, const char *json,
                      size_t len, const char **out, size_t *out_len) {
  ludo_runtime_t *rt = sc->rt;
  int rc;
  if (sc->freeing || rt->freeing) return LUDO_ECLOSED;
  if (!ludo__runtime_may_block(rt) || sc->ps->sched.in_call ||
      sc->phase != LUDO__PH_IDLE)
    return LUDO_EBUSY;
  if (json != NULL && rt->opts.max_input_bytes != 0 &&
      len > rt->opts.max_input_bytes)
    return too_big(sc, fn, len);
  sc->fn = fn;
  sc->done = 0;
  sc->runnable = 0;
  ludo__state_issue(&sc->ps->st); /* for ludo_runtime_interrupt */
  /* A free from a host function, from the start on, waits for the call
   * to return (the call reads sc until then). */
  sc->held = 1;
  rc = ludo__sched_start(&sc->ps->sched, sc->ps->dispatch_ref, 0,
                         json, json ? len : 0, script_done, sc);
  if (rc != 0) {
    sc->held = 0;
    return rc;
  }
  /* The loop runs while the call waits; its completions wake it. */
  ludo__core_block(&rt->core);
  while (!sc->done) {
    if (sc->runnable) {
      sc->runnable = 0;
      ludo__sched_continue(&sc->ps->sched);
      continue;
    }
    ludo__core_run_once(&rt->core);
  }
  sc->held = 0;
  ludo__core_unblock(&rt->core);
  if (sc->free_owed) {
    ludo__script_destroy(sc);
    return LUDO_ECANCELED;
  }
  if (sc->status != 0) return sc->status;
  *out = sc->out.p ? sc->out.p : "null";
  *out_len = sc->out.p ? sc->out.len : 4;
  return 0;
}

int ludo__script_call_async(ludo_script_t *sc, const char *fn,
                            const char *json, size_t len, ludo_script_cb cb,
                            void *ud) {
  ludo_runtime_t *rt = sc->rt;
  size_t fn_len = strlen(fn);
  if (sc->freeing || rt->freeing) /* from a callback a free runs */
    return LUDO_ECLOSED;
  if (sc->ps->sched.in_call || sc->phase != LUDO__PH_IDLE) return LUDO_EBUSY;
  if (fn_len >= sizeof sc->fn_copy) return LUDO_EINVAL;
  if (json == NULL) len = 0;
  if (rt->opts.max_input_bytes != 0 && len > rt->opts.max_input_bytes)
    return too_big(sc, fn, len);
  ludo__buf_reset(&sc->in);
  if (len > 0 && ludo__buf_add(&sc->in, json, len)) return LUDO_ENOMEM;
  memcpy(sc->fn_copy, fn, fn_len + 1);
  sc->fn = sc->fn_copy;
  sc->done = 0;
  sc->async = 1;
  sc->cb = cb;
  sc->cb_ud = ud;
  sc->phase = LUDO__PH_START;
  rt->calls++;
  ludo__state_issue(&sc->ps->st); /* for ludo_runtime_interrupt */
  ludo__core_post(&rt->core, &sc->task);
  return 0;
}

const char *ludo__script_errmsg(const ludo_script_t *sc) {
  return sc->err.p ? sc->err.p : "";
}

void ludo__script_error(const ludo_script_t *sc, ludo_error_t *e) {
  e->code = sc->err_code;
  e->message = ludo__script_errmsg(sc);
  e->call = e->phase = sc->err_fn;
  e->where = sc->err_where;
}

/* Ends a non-blocking call in flight: its callback runs now with
 * ECANCELED (or with its outcome, when that had come). */
static void script_cancel(ludo_script_t *sc) {
  ludo__core_unpost(&sc->rt->core, &sc->task); /* held deliveries too */
  if (sc->phase == LUDO__PH_START) { /* the call never began */
    set_failure(sc, LUDO_ECANCELED, sc->fn,
                "ECANCELED: the call was cancelled");
    sc->status = LUDO_ECANCELED;
    sc->phase = LUDO__PH_DELIVER;
  } else if (sc->ps != NULL && sc->ps->sched.in_call) {
    ludo__sched_cancel(&sc->ps->sched); /* script_done posts... */
    ludo__core_unpost(&sc->rt->core, &sc->task);
  }
  if (sc->phase == LUDO__PH_DELIVER && sc->cb != NULL) script_deliver(sc);
}

/* Frees a script a blocking call of its own runs: the call ends now with
 * ECANCELED (a wait it is in is cancelled; Lua of its own that runs stops
 * at its next instruction) and frees the script when it returns; the
 * nudge keeps its loop pass from blocking in the poll meanwhile. */
static void free_held(ludo_script_t *sc) {
  ludo__sched_t *sched = &sc->ps->sched;
  sc->freeing = 1;
  sc->free_owed = 1;
  if (sched->resuming)
    ludo__state_kill(&sc->ps->st, LUDO__KILL_CLOSED);
  else if (sched->in_call)
    ludo__sched_cancel(sched);
  ludo__core_post(&sc->rt->core, &sc->nudge);
}

/* Frees a script from inside its own non-blocking call's Lua (a host
 * function of that call): the Lua stops at its next instruction with
 * ECANCELED, and the script's task, which runs it, frees the script as
 * the Lua returns to it; the callback runs then, with ECANCELED. Calls
 * meanwhile get LUDO_ECLOSED. */
static void free_running(ludo_script_t *sc) {
  sc->freeing = 1;
  sc->free_owed = 1;
  ludo__state_kill(&sc->ps->st, LUDO__KILL_CLOSED);
}

void ludo__script_cancel_all(ludo_runtime_t *rt) {
  ludo_script_t *sc;
  for (sc = rt->scripts; sc != NULL; sc = sc->next)
    if (sc->async) script_cancel(sc);
}

void ludo__script_free(ludo_script_t *sc) {
  /* From a callback ludo_runtime_free runs, or from one this script's
   * own free runs: that free goes on. */
  if (sc->rt->freeing || sc->freeing) return; /* (or freed already) */
  if (sc->held) {
    free_held(sc);
    return;
  }
  if (sc->async && sc->ps->sched.resuming) {
    free_running(sc);
    return;
  }
  ludo__script_destroy(sc);
}

void ludo__script_destroy(ludo_script_t *sc) {
  ludo__alloc_t *heap = &sc->rt->core.heap;
  sc->freeing = 1;
  if (sc->linked) {
    if (sc->prev)
      sc->prev->next = sc->next;
    else
      sc->rt->scripts = sc->next;
    if (sc->next) sc->next->prev = sc->prev;
  }
  if (sc->async) script_cancel(sc);
  ludo__core_unpost(&sc->rt->core, &sc->nudge);
  if (sc->ps) ludo__pstate_free(sc->rt, sc->ps);
  if (sc->name) ludo__free(heap, sc->name, strlen(sc->name) + 1);
  if (sc->modules.dir)
    ludo__free(heap, sc->modules.dir, strlen(sc->modules.dir) + 1);
  ludo__buf_free(&sc->out);
  ludo__buf_free(&sc->err);
  ludo__buf_free(&sc->in);
  ludo__free(heap, sc, sizeof *sc);
}

const ludo__state_t *ludo__script_state(const ludo_script_t *sc) {
  return &sc->ps->st;
}
