/* sched.c - calls as coroutines of a session state (see sched.h). */
#include "script/sched.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "core/error.h"
#include "ludo_defs.h"
#include "script/modules.h"

static void list_init(ludo__op_t *head) { head->next = head->prev = head; }

static void list_remove(ludo__op_t *op) {
  op->prev->next = op->next;
  op->next->prev = op->prev;
  op->next = op->prev = op;
}

/* Protected: makes a new call thread and keeps it in the registry.
 * [-0, +0, m] */
static int new_thread(lua_State *L) {
  ludo__sched_t *s = lua_touserdata(L, 1);
  lua_State *co = lua_newthread(L);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (s->co_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, s->co_ref);
  s->co = co;
  s->co_ref = ref;
  return 0;
}

/* Replaces the call thread. The old one is released first; the new one is
 * made with the cap lifted, as it is the runtime's bookkeeping, not the
 * script's memory. The old thread is left to the collector: a full
 * collection here would run outside any budget after every failed call,
 * its time growing with the state's live data (64 MiB of small tables:
 * 50-80 ms). Only a state left past its cap (the new thread took the last
 * bytes, e.g. after deep recursion ran into the cap) is collected now, so
 * a dead thread's stack does not hold the session over its cap; anywhere
 * under it, the next growth the cap refuses makes Lua collect anyway. */
static int renew_thread(ludo__sched_t *s) {
  ludo__state_t *st = s->st;
  lua_State *L = st->L;
  size_t cap = st->cap;
  int rc;
  if (s->co_ref != LUA_NOREF) {
    luaL_unref(L, LUA_REGISTRYINDEX, s->co_ref);
    s->co_ref = LUA_NOREF;
    s->co = NULL;
  }
  st->cap = 0;
  lua_pushcfunction(L, new_thread);
  lua_pushlightuserdata(L, s);
  rc = lua_pcall(L, 1, 0, 0);
  st->cap = cap;
  if (rc != LUA_OK) {
    lua_pop(L, 1);
    return LUDO_ENOMEM;
  }
  if (cap != 0 && st->used > cap) lua_gc(L, LUA_GCCOLLECT);
  return 0;
}

int ludo__sched_init(ludo__sched_t *s, ludo__state_t *st) {
  memset(s, 0, sizeof *s);
  s->st = st;
  s->co_ref = s->pending_ref = s->backlog_ref = LUA_NOREF;
  list_init(&s->ops);
  st->sched = s;
  return renew_thread(s);
}

static void cancel_ops(ludo__sched_t *s) {
  while (s->nops > 0) { /* (not s->ops.next: a line of its own) */
    ludo__op_t *op = s->ops.next;
    list_remove(op);
    s->nops--;
    op->sched = NULL;
    if (s->st->L != NULL) luaL_unref(s->st->L, LUA_REGISTRYINDEX, op->ref);
    op->ref = LUA_NOREF;
    op->cancel(op);
  }
}

/* The wall timer's memory outlives the scheduler until its close callback:
 * it carries its own heap and core. */
typedef struct {
  uv_timer_t t;
  ludo__alloc_t *heap;
  ludo__core_t *core;
} wall_timer_t;

static void wall_timer_closed(uv_handle_t *h) {
  wall_timer_t *w = (wall_timer_t *)h;
  ludo__core_t *core = w->core;
  ludo__free(w->heap, w, sizeof *w);
  if (core != NULL) ludo__core_handle_closed(core);
}

void ludo__sched_close(ludo__sched_t *s) {
  cancel_ops(s);
  s->in_call = s->waiting = 0;
  if (s->wall != NULL) {
    uv_timer_stop(s->wall);
    uv_close((uv_handle_t *)s->wall, wall_timer_closed);
    s->wall = NULL;
  }
}

static void finish(ludo__sched_t *s, int status);

/* The call waited past its wall-clock limit. */
static void wall_fired(uv_timer_t *t) {
  ludo__sched_t *s = t->data;
  char text[96];
  if (!s->in_call || !(s->waiting || s->runnable) || s->resuming) return;
  snprintf(text, sizeof text, "ETIMEOUT: the call exceeded its wall-clock "
           "limit of %llu ms", (unsigned long long)(s->wall_ns / 1000000u));
  /* Where it waits (or was sliced): the suspended thread's stack. */
  ludo__state_locate(s->st, s->co);
  ludo__state_push_limit(s->st, s->co, text);
  finish(s, LUDO_ETIMEOUT);
}

/* While the call waits, the wall timer watches its deadline. */
static void wall_arm(ludo__sched_t *s) {
  ludo__state_t *st = s->st;
  uint64_t now;
  if (s->wall_ns == 0 || st->loop == NULL) return;
  if (s->wall == NULL) {
    wall_timer_t *w = ludo__calloc(st->heap, sizeof *w);
    if (w == NULL) return; /* the CPU budget still bounds the call */
    w->heap = st->heap;
    w->core = st->core;
    uv_timer_init(st->loop, &w->t);
    if (w->core != NULL) ludo__core_handle_opened(w->core);
    s->wall = &w->t;
    s->wall->data = s;
  }
  uv_update_time(st->loop);
  now = ludo__clock_for(ludo__clock_precise_for(s->wall_ns));
  uv_timer_start(s->wall, wall_fired,
                 s->wall_end_ns > now
                     ? (s->wall_end_ns - now + 999999u) / 1000000u : 0,
                 0);
}

/* Ends the call: runs done, then clears the thread for the next call. */
/* Runs the pending __close handlers of `co` under the cleanup budget, so
 * a handler that loops is stopped like any other Lua. */
static void close_thread(ludo__sched_t *s, lua_State *co) {
  ludo__state_t *st = s->st;
  ludo__state_arm(st, LUDO__CLEANUP_BUDGET_NS, 0);
  if (ludo__state_run_begin(st, co, 0) == 0) {
    lua_resetthread(co);
    ludo__state_run_end(st);
  }
  ludo__state_disarm(st, co);
  lua_settop(co, 0);
}

static void finish(ludo__sched_t *s, int status) {
  lua_State *co = s->co;
  int stopped = s->st->killed != 0; /* by a hook: hooks are off in co */
  cancel_ops(s);
  if (s->wall != NULL) uv_timer_stop(s->wall);
  s->waiting = s->runnable = 0;
  s->nargs = 0;
  if (s->backlog_ref != LUA_NOREF) {
    luaL_unref(s->st->L, LUA_REGISTRYINDEX, s->backlog_ref);
    s->backlog_ref = LUA_NOREF;
  }
  s->input = NULL;
  s->input_len = 0;
  /* The budget still holds while the owner encodes the results. */
  if (s->done) s->done(s, status, co, s->done_ud);
  ludo__state_disarm(s->st, co);
  if (status == 0) {
    lua_settop(co, 0);
  } else {
    /* A thread that died by an error is not reused: Lua leaves its hooks
     * disabled when the error came from a hook (the CPU budget, a close),
     * and lua_resetthread does not enable them again. A thread stopped by
     * a hook is dropped without closing it: its pending __close handlers
     * would run with hooks off, where nothing could stop them. Others run
     * them under the cleanup budget. */
    if (!stopped) close_thread(s, co);
    cancel_ops(s); /* waits its __close handlers started: theirs, not the
                      next call's */
    renew_thread(s);
  }
  s->in_call = 0;
}

/* Is the value at idx of co ludo.async.PENDING? ludo.async is looked up
 * only when a call yields, so states that never wait never load it. */
static int is_pending(ludo__sched_t *s, lua_State *co, int idx) {
  int ok;
  idx = lua_absindex(co, idx);
  if (s->pending_ref == LUA_NOREF) {
    lua_State *L = s->st->L;
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 3)) return 0;
    lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED);
    if (lua_type(L, -1) == LUA_TTABLE &&
        lua_getfield(L, -1, "ludo.async") == LUA_TTABLE &&
        lua_getfield(L, -1, "PENDING") != LUA_TNIL) {
      s->pending_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      lua_settop(L, top);
    } else {
      lua_settop(L, top);
      return 0;
    }
  }
  lua_rawgeti(co, LUA_REGISTRYINDEX, s->pending_ref);
  ok = lua_rawequal(co, -1, idx);
  lua_pop(co, 1);
  return ok;
}

/* Turns the error object on top of the dead call thread into the call's
 * message ("ECODE: ...", with a traceback for script errors) and returns
 * the code. The work is done on the state's main thread, not on the dead
 * thread, whose stack may be full (deep recursion). [-1, +1, -] (co) */
static int call_error(ludo__sched_t *s, int rc) {
  ludo__state_t *st = s->st;
  lua_State *L = st->L, *co = s->co;
  int code;
  if (!lua_checkstack(L, 4)) {
    lua_pop(co, 1);
    lua_pushliteral(co, "ENOMEM: out of memory");
    return LUDO_ENOMEM;
  }
  lua_xmove(co, L, 1);
  code = ludo__state_error_tb(st, L, rc, co);
  lua_xmove(L, co, 1);
  return code;
}

static void next_completion(ludo__sched_t *s);

static void resume(ludo__sched_t *s, int nargs) {
  ludo__state_t *st = s->st;
  lua_State *co = s->co;
  uint64_t slice = 0;
  int nres = 0, rc;
  s->waiting = s->runnable = 0;
  s->nargs = 0;
  if (s->sliceable && st->core != NULL)
    slice = ludo__core_slice_deadline(st->core);
  if (ludo__state_run_begin(st, co, slice) != 0) {
    lua_pushliteral(co, "EBUSY: Lua runs nest too deeply (host functions "
                        "calling into ludo)");
    finish(s, LUDO_EBUSY);
    return;
  }
  if (st->core) st->core->lua_depth++;
  s->resuming = 1;
  rc = lua_resume(co, NULL, nargs, &nres);
  s->resuming = 0;
  if (st->core) st->core->lua_depth--;
  if (rc == LUA_OK) { /* the results are encoded under the same run */
    finish(s, 0);
    ludo__state_run_end(st);
    return;
  }
  ludo__state_run_end(st);
  if (rc == LUA_YIELD && st->sliced && nres == 0 && !st->killed) {
    s->runnable = 1; /* the time slice ended: go on later */
    if (s->wake) s->wake(s, s->wake_ud);
    return;
  }
  if (rc == LUA_YIELD && st->killed) {
    /* stopped as it yielded (a slice's end or a wait, and an interrupt,
     * a close or a limit at that moment): the call ends as stopped */
    lua_pop(co, nres);
    if (st->killed == LUDO__KILL_MEMORY) {
      lua_pushliteral(co, "not enough memory"); /* Lua's own: made */
      rc = LUA_ERRMEM;
    } else {
      lua_pushnil(co); /* replaced by the limit's message */
      rc = LUA_ERRRUN;
    }
    finish(s, call_error(s, rc));
    return;
  }
  if (rc == LUA_YIELD) {
    int ok = 0;
    if (nres >= 2) ok = is_pending(s, co, -nres);
    lua_pop(co, nres);
    if (ok && (s->nops > 0 || s->backlog_ref != LUA_NOREF)) {
      s->waiting = 1;
      wall_arm(s);
      next_completion(s);
      return;
    }
    lua_pushstring(co, ok ? "ESCRIPT: the call waits, but on nothing that "
                            "can complete"
                          : "ESCRIPT: the call yielded outside the ludo "
                            "protocol (wait with ludo.async.await)");
    finish(s, LUDO_ESCRIPT);
    return;
  }
  finish(s, call_error(s, rc));
}

void ludo__sched_continue(ludo__sched_t *s) {
  if (!s->in_call || !s->runnable || s->resuming) return;
  resume(s, s->nargs);
}

int ludo__sched_start(ludo__sched_t *s, int fnref, lua_Integer arg,
                      const char *input, size_t input_len,
                      ludo__sched_done_cb done, void *ud) {
  if (s->in_call) return LUDO_EBUSY;
  /* The thread may be missing if renewing it failed for lack of memory. */
  if (s->co == NULL && renew_thread(s) != 0) return LUDO_ENOMEM;
  s->in_call = 1;
  s->done = done;
  s->done_ud = ud;
  s->input = input;
  s->input_len = input_len;
  ludo__state_arm(s->st, s->budget_ns, s->max_instr);
  s->wall_end_ns =
      s->wall_ns
          ? ludo__clock_for(ludo__clock_precise_for(s->wall_ns)) + s->wall_ns
          : 0;
  s->st->wall_end_ns = s->wall_end_ns; /* holds while the Lua runs too */
  s->st->wall_ns = s->wall_ns;
  s->nargs = 0;
  lua_settop(s->co, 0);
  lua_rawgeti(s->co, LUA_REGISTRYINDEX, fnref);
  lua_pushinteger(s->co, arg);
  resume(s, 1);
  return 0;
}

void ludo__sched_cancel(ludo__sched_t *s) {
  if (!s->in_call) return;
  /* The message goes on top of the waiting thread; finish runs its
   * pending __close handlers under the cleanup budget. */
  lua_pushliteral(s->co, "ECANCELED: the call was cancelled");
  finish(s, LUDO_ECANCELED);
}

/* ---- operations ------------------------------------------------------ */

/* Is `co` a child of a running ludo.async.gather (in its _gathered)?
 * The table is walked, not indexed: pushing a thread that is not running
 * would touch its stack. [-0, +0, -] */
static int gathered(lua_State *L, int t, lua_State *co) {
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {
    int hit = lua_tothread(L, -2) == co;
    lua_pop(L, 1);
    if (hit) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* Can a wait started in L reach the scheduler? Every coroutine between
 * the call's thread and L (st->chain) must be a gather child: a coroutine
 * of the script's own would get the PENDING yield as values. */
static int wait_reaches_driver(lua_State *L, ludo__state_t *st) {
  int i, n = st->depth < LUDO__CHAIN_MAX ? st->depth : LUDO__CHAIN_MAX;
  int ok = 1, top = lua_gettop(L);
  if (n <= 1) return 1;
  luaL_checkstack(L, 8, "ludo: waiting");
  if (lua_getfield(L, LUA_REGISTRYINDEX, LUDO__LOADED) != LUA_TTABLE ||
      lua_getfield(L, -1, "ludo.async") != LUA_TTABLE ||
      lua_getfield(L, -1, "_gathered") != LUA_TTABLE)
    ok = 0;
  for (i = 1; ok && i < n; i++)
    ok = gathered(L, lua_gettop(L), st->chain[i]);
  lua_settop(L, top);
  return ok;
}

ludo__op_t *ludo__op_new(lua_State *L, size_t extra, ludo__op_cancel_fn c) {
  ludo__state_t *st = ludo__state_of(L);
  ludo__sched_t *s = st ? st->sched : NULL;
  ludo__op_t *op, **box;
  int ref;
  if (s != NULL && s->nops >= LUDO__OPS_MAX)
    ludo__error_raise(L, LUDO_EINVAL, "a call may wait on at most %d "
                      "operations at once", LUDO__OPS_MAX);
  if (s == NULL || !s->in_call || st->loop == NULL)
    ludo__error_raise(L, LUDO_EINVAL,
                      "this primitive waits, and can only be used "
                  "inside a session call");
  if (!wait_reaches_driver(L, st))
    ludo__error_raise(L, LUDO_EINVAL,
                      "a call can wait only in the session's call or in "
                      "ludo.async.gather, not inside coroutine.wrap/resume "
                      "of your own");
  box = lua_newuserdatauv(L, sizeof *box, 0); /* the Lua handle */
  *box = NULL;
  /* The registry's slot first: luaL_ref may raise (no memory), and then
   * nothing of ours is left behind. */
  lua_pushvalue(L, -1);
  ref = luaL_ref(L, LUA_REGISTRYINDEX);
  op = ludo__calloc(st->heap, sizeof *op + extra);
  if (op == NULL) {
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    ludo__error_raise(L, LUDO_ENOMEM, "cannot start an operation");
  }
  *box = op;
  op->size = sizeof *op + extra;
  op->data = extra ? (void *)(op + 1) : NULL;
  op->cancel = c;
  op->heap = st->heap;
  op->core = st->core;
  op->sched = s;
  op->ref = ref;
  s->nops++;
  op->next = s->ops.next;
  op->prev = &s->ops;
  s->ops.next->prev = op;
  s->ops.next = op;
  return op;
}

/* Protected: appends {op, results...} (the top n+1 values of L) to the
 * backlog list. [-(n+1), +0, m] */
static int backlog_add(lua_State *L) {
  ludo__sched_t *s = lua_touserdata(L, 1);
  int n = lua_gettop(L) - 1, i;
  if (s->backlog_ref == LUA_NOREF) {
    lua_newtable(L);
    s->backlog_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->backlog_ref);
  lua_createtable(L, n, 1);
  for (i = 1; i <= n; i++) {
    lua_pushvalue(L, i + 1);
    lua_rawseti(L, -2, i);
  }
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* Hands the oldest backlogged completion to a waiting call. The list is
 * read on the main thread; the values move to the call thread. */
static void next_completion(ludo__sched_t *s) {
  lua_State *L = s->st->L, *co = s->co;
  lua_Integer i, n, len;
  int top = lua_gettop(L);
  if (s->backlog_ref == LUA_NOREF || !lua_checkstack(L, 8)) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->backlog_ref);
  len = (lua_Integer)lua_rawlen(L, -1);
  if (len == 0) {
    lua_settop(L, top);
    return;
  }
  lua_rawgeti(L, -1, 1);                   /* backlog, entry */
  lua_getfield(L, -1, "n");
  n = lua_tointeger(L, -1);
  lua_pop(L, 1);
  for (i = 1; i < len; i++) {              /* shift the list down */
    lua_rawgeti(L, -2, i + 1);
    lua_rawseti(L, -3, i);
  }
  lua_pushnil(L);
  lua_rawseti(L, -3, len);
  if (len == 1) { /* the backlog is empty now */
    luaL_unref(L, LUA_REGISTRYINDEX, s->backlog_ref);
    s->backlog_ref = LUA_NOREF;
  }
  if (!lua_checkstack(L, (int)n + 2) || !lua_checkstack(co, (int)n + 2)) {
    lua_settop(L, top);
    return;
  }
  for (i = 1; i <= n; i++) lua_rawgeti(L, top + 2, i);
  lua_xmove(L, co, (int)n);
  lua_settop(L, top);
  s->nargs = (int)n;
  s->waiting = 0;
  s->runnable = 1;
  if (s->wake) s->wake(s, s->wake_ud);
}

void ludo__op_complete(ludo__op_t *op, int (*push)(lua_State *co, void *ud),
                       void *ud) {
  ludo__sched_t *s = op->sched;
  lua_State *co;
  int n = 0, base;
  if (s == NULL) return;
  list_remove(op);
  s->nops--;
  op->sched = NULL;
  co = s->co;
  if ((!s->waiting && !s->runnable) || s->resuming) {
    /* Completed while the call runs (e.g. synchronously): nothing waits
     * on this yet. Should not happen for loop-driven primitives. */
    luaL_unref(co, LUA_REGISTRYINDEX, op->ref);
    op->ref = LUA_NOREF;
    return;
  }
  if (s->runnable) {
    /* The call already has a completion to take: keep this one in the
     * backlog, built on the main thread (the call thread is suspended,
     * and functions cannot run on it). */
    lua_State *L = s->st->L;
    base = lua_gettop(L);
    if (!lua_checkstack(L, 8)) return;
    lua_pushcfunction(L, backlog_add);
    lua_pushlightuserdata(L, s);
    lua_rawgeti(L, LUA_REGISTRYINDEX, op->ref);
    luaL_unref(L, LUA_REGISTRYINDEX, op->ref);
    op->ref = LUA_NOREF;
    if (push) n = push(L, ud);
    if (lua_pcall(L, n + 2, 0, 0) != LUA_OK) lua_settop(L, base);
    return;
  }
  lua_checkstack(co, 8);
  lua_rawgeti(co, LUA_REGISTRYINDEX, op->ref);
  luaL_unref(co, LUA_REGISTRYINDEX, op->ref);
  op->ref = LUA_NOREF;
  if (push) n = push(co, ud);
  s->nargs = 1 + n;
  s->waiting = 0;
  s->runnable = 1;
  if (s->wake) s->wake(s, s->wake_ud);
}

void ludo__op_free(ludo__op_t *op) {
  ludo__free(op->heap, op, op->size);
}
