/* pstate.c - prepared states: a sandboxed Lua state with its scheduler,
 * set up with the runtime's limits, and protected runs of C code inside
 * it under the CPU budget (loading modules). Sessions and scripts are both
 * built on them. */
#include <lauxlib.h>
#include <stddef.h>
#include <string.h>

#include "base/clock.h"
#include "base/errors.h"
#include "env/env.h"

/* The collector's pause (%) while a state is built: the same for every
 * state, so that builds of one environment collect at the same points
 * and hold the same chunks, and a little under Lua's 200 %, so less of
 * the build's garbage is there at its peak. The chunks a build leaves
 * are the idle session's memory: with each state's own pause (200-300 %,
 * below) during the build, 44 % of echo's states kept an eighth chunk of
 * 4 KiB; with 190 % none did (docs/performance.md, "Session 37"). A
 * script's state, never collected after its build, keeps this pause. */
#define BUILD_PAUSE 190

/* A number in [0, n) from the runtime's generator (rt->gc_seed), which
 * spreads what states built together would otherwise do together. */
static unsigned spread(ludo_runtime_t *rt, unsigned n) {
  rt->gc_seed = rt->gc_seed * 1103515245u + 12345u;
  return (rt->gc_seed >> 16) % n;
}

int ludo__pstate_new(ludo_runtime_t *rt, ludo__modules_t *modules,
                     const char *who, ludo__pstate_t **out) {
  ludo__pstate_t *ps = ludo__calloc(&rt->core.heap, sizeof *ps);
  int rc;
  *out = NULL;
  if (ps == NULL) return LUDO_ENOMEM;
  ps->dispatch_ref = ps->step_ref = ps->named_ref = ps->encode_ref =
      LUA_NOREF;
  ps->doing_ref = LUA_NOREF;
  ps->st.heap = &rt->core.heap;
  ps->st.cap = rt->opts.memory_cap;
  ps->st.total = &rt->lua_live;
  ps->st.log = &rt->core.log;
  ps->st.who = who;
  ps->st.modules = modules;
  ps->st.loop = rt->core.loop;
  ps->st.core = &rt->core;
  ps->st.count_hook = rt->opts.max_instructions > 0;
  /* States opened together would collect together: spread the pauses.
   * 200-300 %: with the code shared (core/codecache.h) the live heap is
   * about half what it was and made of small objects, so at Lua's 200 % a
   * step paid 2 % more in collections (callgrind, @256); a busy session's
   * peak (live x pause) stays below what it was. That pause is the
   * session's once it is built (ludo__pstate_collect); the build itself
   * runs with BUILD_PAUSE. */
  ps->pause = 200 + (int)spread(rt, 101);
  ps->st.gc_pause = BUILD_PAUSE;
  /* Relearning (session.c, learning) comes every LUDO__RELEARN_STEPS cold
   * steps: states stepped together from the same count would all relearn
   * in the same round (at 256 sessions, a round of 4 ms against 0.7). */
  ps->cold_steps = spread(rt, LUDO__RELEARN_STEPS);
  rc = ludo__state_open(&ps->st);
  if (rc != 0) {
    ludo__runtime_seterr(rt, "ENOMEM: cannot open a Lua state for %s", who);
    ludo__free(&rt->core.heap, ps, sizeof *ps);
    return rc;
  }
  rc = ludo__sched_init(&ps->sched, &ps->st);
  if (rc != 0) {
    ludo__runtime_seterr(rt, "ENOMEM: cannot start the call thread of %s",
                         who);
    ludo__pstate_free(rt, ps);
    return rc;
  }
  ps->sched.budget_ns = (uint64_t)rt->opts.cpu_budget_ms * 1000000u;
  ps->sched.wall_ns = (uint64_t)rt->opts.wall_limit_ms * 1000000u;
  ps->sched.max_instr = rt->opts.max_instructions;
  *out = ps;
  return 0;
}

/* Sets the runtime's message for a failed run: failures other than the
 * limits become `as` (e.g. ELOAD), whatever raised them; a limit says
 * that it hit while loading. */
static int run_failed(ludo_runtime_t *rt, lua_State *L, int rc,
                      const char *as) {
  const char *msg = lua_tostring(L, -1);
  size_t n = strlen(as);
  if (msg == NULL) msg = "unknown error";
  if (rc == LUDO_ENOMEM || rc == LUDO_ETIMEOUT) {
    ludo__runtime_seterr(rt, "%s during load", msg);
    return rc;
  }
  if (rc == LUDO_EBUSY || rc == LUDO_ECANCELED) { /* the host's doing */
    ludo__runtime_seterr(rt, "%s", msg);
    return rc;
  }
  if (strncmp(msg, "ESCRIPT: ", 9) == 0) msg += 9;
  if (strncmp(msg, as, n) == 0 && msg[n] == ':')
    ludo__runtime_seterr(rt, "%s", msg);
  else
    ludo__runtime_seterr(rt, "%s: %s", as, msg);
  return ludo__err_code(as, n);
}

/* Lua keeps the pause in steps of 4 %, so states opened together with
 * pauses of one step would start every cycle in the same step for ever:
 * at 256 sessions stepped in rounds, 10-30 of them swept in one round
 * (docs/performance.md, "Session 35"). After the full collection the
 * collector waits in its pause until the state has allocated `gap` more
 * KB; LUA_GCSTEP with fewer KB than that only moves the wait's end closer
 * and does no work. A random part of the gap puts each state's cycles at
 * its own phase. */
void ludo__pstate_collect(ludo_runtime_t *rt, ludo__pstate_t *ps,
                          lua_State *L) {
  int kb, gap, pause = ps->pause;
  lua_gc(L, LUA_GCINC, pause, 200, 11); /* as state.c sets st.gc_pause */
  lua_gc(L, LUA_GCCOLLECT);
  kb = lua_gc(L, LUA_GCCOUNT);
  /* (4 % below the pause asked for: the one Lua keeps may be lower) */
  gap = pause > 104 ? kb * (pause - 104) / 100 - 1 : 0;
  if (gap > 0) lua_gc(L, LUA_GCSTEP, (int)spread(rt, (unsigned)gap));
}

/* The run happens on the state's call thread, not under lua_pcall on the
 * main one: after a failure the thread's stack is still there, so a
 * memory error can say where it happened (a pcall unwinds before anyone
 * can look, and calls no handler for memory errors). A failed run leaves
 * the thread dead; the state is thrown away then. */
int ludo__pstate_run(ludo_runtime_t *rt, ludo__pstate_t *ps,
                     lua_CFunction fn, void *ud, const char *as) {
  lua_State *L = ps->st.L, *co = ps->sched.co;
  int rc, nres = 0;
  lua_settop(co, 0);
  lua_pushcfunction(co, fn);
  lua_pushlightuserdata(co, ud);
  ludo__state_arm(&ps->st, ps->sched.budget_ns, ps->sched.max_instr);
  rc = ludo__state_run_begin(&ps->st, co, 0);
  if (rc == 0) {
    rt->core.lua_depth++;
    rc = lua_resume(co, NULL, 1, &nres);
    rt->core.lua_depth--;
    ludo__state_run_end(&ps->st);
    if (rc == LUA_YIELD) { /* fn never yields; nothing else can here */
      lua_pushliteral(L, "ESCRIPT: a module yielded while loading");
      rc = LUDO_ESCRIPT;
    } else if (rc != LUA_OK) {
      if (lua_checkstack(L, 4)) {
        lua_xmove(co, L, 1);
        rc = ludo__state_error_tb(&ps->st, L, rc, co);
      } else {
        lua_pushliteral(L, "ENOMEM: out of memory");
        rc = LUDO_ENOMEM;
      }
    }
  } else {
    lua_pushliteral(L, "EBUSY: Lua runs nest too deeply");
  }
  ludo__state_disarm(&ps->st, co);
  /* A dead thread's stack is left as it is: emptying it would run its
   * pending __close handlers, outside any budget. */
  if (rc != 0)
    rc = run_failed(rt, L, rc, as);
  else
    lua_settop(co, 0);
  lua_settop(L, 0);
  return rc;
}

void ludo__pstate_free(ludo_runtime_t *rt, ludo__pstate_t *ps) {
  if (ps == NULL) return;
  ludo__sched_close(&ps->sched);
  ludo__state_close(&ps->st);
  ludo__free(&rt->core.heap, ps, sizeof *ps);
}

/* Time the loop spends freeing retired states per pass. */
#define RECLAIM_SLICE_NS 200000u

static void free_retired(ludo_runtime_t *rt, ludo__pstate_t *ps) {
  size_t bytes = ps->st.used;
  ludo__pstate_free(rt, ps);
  ludo__core_note_freed(&rt->core, bytes);
}

static void reclaim_task(ludo__task_t *t) {
  ludo_runtime_t *rt =
      (ludo_runtime_t *)((char *)t - offsetof(ludo_runtime_t, reclaim));
  uint64_t end = ludo__clock_ns() + RECLAIM_SLICE_NS;
  while (rt->retired != NULL) {
    ludo__pstate_t *ps = rt->retired;
    rt->retired = ps->next;
    free_retired(rt, ps);
    if (ludo__clock_ns() >= end) break;
  }
  if (rt->retired != NULL) ludo__core_post_later(&rt->core, t);
}

void ludo__pstate_retire(ludo_runtime_t *rt, ludo__pstate_t *ps) {
  if (!ludo__core_loop_recent(&rt->core)) {
    free_retired(rt, ps); /* nobody runs the loop: free it now */
    return;
  }
  ps->next = rt->retired;
  rt->retired = ps;
  rt->reclaim.fn = reclaim_task;
  ludo__core_post_later(&rt->core, &rt->reclaim);
}

void ludo__pstate_reclaim_all(ludo_runtime_t *rt) {
  ludo__core_unpost(&rt->core, &rt->reclaim);
  while (rt->retired != NULL) {
    ludo__pstate_t *ps = rt->retired;
    rt->retired = ps->next;
    free_retired(rt, ps);
  }
}
