/* state.h - sandboxed Lua states: one per session, with a byte-counting
 * allocator that refuses growth past a cap, a CPU budget per call enforced by
 * a count hook that pcall cannot swallow, and only the safe libraries. */
#ifndef LUDO_SCRIPT_STATE_H
#define LUDO_SCRIPT_STATE_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "script/arena.h"
#include "base/log.h"

#include "core/core.h"

struct ludo__modules_s;

/* Coroutines a call may run through at once (nesting depth). */
#define LUDO__CHAIN_MAX 32

/* CPU time cleanup code may use: pending __close handlers of a call that
 * failed or was cancelled, an environment's close(). */
#define LUDO__CLEANUP_BUDGET_NS 100000000u

/* How deeply coroutine.close may nest (inside __close handlers); Lua
 * 5.4.4 overflows the C stack without a bound (docs/sandbox.md). */
#define LUDO__CLOSE_NEST_MAX 4

/* Instructions between two checks of the budget (the patched Lua charges
 * C work to the same count: calls of C functions, string comparisons). */
#define LUDO__HOOK_COUNT 1000

/* Room for where a call was stopped: two "source:line" (LUA_IDSIZE each)
 * and the words between them. */
#define LUDO__WHERE_MAX 160

/* LLM calls of a state's Lua (ludo.llm, net/lllm.c), cumulative; the
 * fields of ludo_llm_usage_t (ludo.h). */
typedef struct ludo__llm_counts_s {
  uint64_t calls, failures, retries, prompt_tokens, completion_tokens;
  double latency_ms;
} ludo__llm_counts_t;

typedef struct ludo__state_s {
  /* What every call reads and writes comes first, in as few cache lines
   * as it fits (the first 256 bytes): with thousands of sessions each line
   * of it is a miss per step (docs/performance.md, "Session 36"). */
  lua_State *L;
  ludo__alloc_t *heap;        /* runtime allocator (parent); borrowed */
  size_t used;                /* bytes held by this state */
  size_t cap;                 /* refuse growth past this; 0 = no cap */
  unsigned refused;          /* growths refused at the cap in this call */
  unsigned failed;           /* growths that failed in this call, at the
                                cap or not (the heap, fault injection) */
  size_t *total;              /* also counted here when not NULL */
  long fail_after;            /* tests: fail the Nth allocation (<0 off) */
  int gc_pause;               /* the collector's pause (%) the state
                                 opens with; 0: Lua's */

  /* CPU budget of the current call. */
  int count_hook;             /* budgets by a permanent count hook (set
                                 when there is no watchdog or an
                                 instruction limit is wanted) */
  ludo__core_t *core;         /* loop, watchdog, log; borrowed */
  int armed;                  /* budget enforced while 1 */
  volatile int killed;        /* 0, or why the call must end: KILL_* */
  volatile int yield_wanted;  /* the time slice ended: yield when able */
  int sliced;                 /* the last run ended by yielding a slice */
  int running;                /* inside run_begin/run_end */
  unsigned cancel_gen;        /* the watchdog's cancel_gen when the call
                                 was issued: one moved since stops it */
  unsigned issued_gen;        /* set by ludo__state_issue, */
  int issued;                 /* taken by the next ludo__state_arm */
  int close_depth;            /* coroutine.close calls in progress */
  int depth;                  /* coroutines running (chain) */
  uint64_t budget_ns;         /* running time allowed per call; 0 = none */
  uint64_t wall_end_ns;       /* the call's wall-clock deadline (the
                                 clock ludo__clock_precise_for(wall_ns)
                                 picks); 0 = none
                                 (set by the scheduler) */
  uint64_t wall_ns;           /* ... the limit it came from, for messages */
  int wall_first;             /* this run's deadline is the wall's */
  int precise;                /* this run's times are on the precise
                                 clock (base/clock.h) */
  int located;                /* `where` holds where this call was
                                 stopped (ludo__state_locate) */
  uint64_t max_instr;         /* instructions allowed per call; 0 = none */
  uint64_t used_ns;           /* running time used so far in this call */
  uint64_t run_start_ns;      /* start of the current running stretch */
  uint64_t instr;             /* instructions counted in this call */
  size_t log_bytes;           /* log bytes written by the current call */
  void *sched;                /* scheduler data of the call in flight */
  ludo__wd_entry_t wd;        /* this state's watchdog entry */
  lua_State *chain[LUDO__CHAIN_MAX]; /* coroutines running, outermost first */

  char where[LUDO__WHERE_MAX]; /* where a limit stopped the call (when
                                  `located`), see ludo__state_locate */
  const ludo__log_t *log;     /* borrowed */
  const char *who;            /* name used for print(); borrowed */
  struct ludo__modules_s *modules; /* module resolver; borrowed */
  uv_loop_t *loop;            /* loop for waiting primitives; may be NULL */
  void *owner;                /* the session or other owner; opaque */
  int owner_is_session;       /* owner is a ludo_session_t (a script's
                                 state has another owner) */
  int may_connect;            /* its Lua may require ludo.client (reach
                                 the network); set by the owner after
                                 ludo__state_open */
  int may_llm;                /* its Lua may require ludo.llm (LLM APIs
                                 over HTTP); set by the owner after
                                 ludo__state_open */
  ludo__llm_counts_t llm;     /* what its ludo.llm calls spent (zeroed by
                                 ludo__state_open) */
  ludo__arena_t arena;        /* small blocks of this state (its free
                                 lists and chunk are read by allocations;
                                 the rest by the prefetch of the next
                                 session, ahead of its step) */
} ludo__state_t;

/* Why a call is stopped (ludo__state_t.killed). MEMORY: the cap refused
 * LUDO__REFUSALS_MAX growths in one call. Lua treats some refusals as
 * soft (a string table or hash part that cannot grow stays as it is) and
 * runs a full collection before each; a call that keeps asking would burn
 * its CPU budget in collections instead of ending with ENOMEM. */
enum {
  LUDO__KILL_BUDGET = 1, LUDO__KILL_CLOSED = 2, LUDO__KILL_MEMORY = 3,
  LUDO__KILL_INTERRUPTED = 4, /* ludo_runtime_interrupt */
  LUDO__KILL_WALL = 5,        /* the call's wall-clock limit, while it ran */
  LUDO__KILL_OUTER = 6        /* the budget of a call it runs inside (its
                                 host function's caller's) ran out */
};
#define LUDO__REFUSALS_MAX 64

/* The states' allocator (lua_Alloc contract, `ud` the ludo__state_t):
 * counts into st->used and refuses growth past st->cap. C buffers that
 * belong to a session (its result) use it too, so they count. */
void *ludo__state_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* Creates the sandboxed state in st->L. The caller fills heap, cap, log,
 * who, modules, loop, owner, core (may be NULL: count hook) and count_hook
 * first (the rest is zeroed here). Returns 0 or LUDO_ENOMEM. */
int ludo__state_open(ludo__state_t *st);

/* Closes the state; afterwards st->used is 0. Accepts st->L == NULL. */
void ludo__state_close(ludo__state_t *st);

/* The ludo__state_t of any thread of a sandboxed state, or NULL when L is
 * not a ludo state. [-0, +0, -] */
ludo__state_t *ludo__state_of(lua_State *L);

/* Records in st->where where thread L is, unless the call already has a
 * place: "source:line" of its innermost Lua frame that has a line, and
 * when that frame is ludo's library (a "=" chunk, see modules.h),
 * ", from source:line" of the innermost frame of other code, e.g.
 * "lua/ludo/async.lua:40, from examples/sleepy/env.lua:12". Allocates
 * nothing: safe in hooks and at the memory cap. [-0, +0, -] */
void ludo__state_locate(ludo__state_t *st, lua_State *L);

/* Pushes onto `L` (any thread of st's state, even a suspended one) the
 * message `text` of a limit the call ran into, followed by where it was
 * stopped (" (at ...)", when st->where holds a place). Made on the main
 * thread under a protected call with the cap lifted; falls back to the
 * message made when the state was opened. [-0, +1, -] */
void ludo__state_push_limit(ludo__state_t *st, lua_State *L,
                            const char *text);

/* A call of this state is issued (queued, or about to start): the calls
 * issued before a ludo_runtime_interrupt are the ones it stops, when they
 * run Lua. The next ludo__state_arm takes this generation; without it, an
 * arm takes the current one. */
void ludo__state_issue(ludo__state_t *st);

/* Starts the budget of a new call. */
void ludo__state_arm(ludo__state_t *st, uint64_t budget_ns,
                     uint64_t max_instr);
/* Marks the start/end of a stretch of running Lua inside the call (around
 * each lua_resume of thread `co`). `slice_ns` is the end of the time slice
 * (ludo__clock_ns; 0: none): past it, the call thread yields as soon as it
 * can (st->sliced tells). Returns 0, or LUDO_EBUSY when Lua runs nest too
 * deeply on this thread (nothing began). */
int ludo__state_run_begin(ludo__state_t *st, lua_State *co,
                          uint64_t slice_ns);
void ludo__state_run_end(ludo__state_t *st);

/* For loops inside C (JSON, string work): 0 while the running call of L's
 * state is within its budget; otherwise marks it stopped, pushes the
 * timeout message and returns 1 (the caller raises it, and the call ends
 * with ETIMEOUT whatever catches it). Cheap enough to call every few
 * kilobytes. [-0, +(0|1), m] */
int ludo__state_check(lua_State *L);

/* 1 when the running call of L's state was stopped (the watchdog's signal
 * at its budget or wall limit, an interrupt, a failed check): no clock,
 * nothing pushed, so cheap enough for every step of a C loop whose steps
 * may each cost much (walking a hollow table). ludo__state_check then
 * pushes the error. [-0, +0, -] */
int ludo__state_stopped(lua_State *L);

/* ludo__state_stopped on a state already found (NULL: not ludo's), for
 * loops that ask at every step. [-0, +0, -] */
static inline int ludo__state_is_stopped(const ludo__state_t *st) {
  return st != NULL && st->armed && st->running && st->killed != 0;
}

/* ludo__state_stopped(L) for loops below Lua (base/regex.h's `stopped`,
 * with ludo__state_stop as its `stop`). */
int ludo__state_stopped_ud(void *L);

/* The memory cap of L's state in bytes; 0 when it has none or is not
 * ludo's (for ludo__json_set_cap). [-0, +0, -] */
size_t ludo__state_cap(lua_State *L);

/* ludo__state_check without the message: 1 when the running call of L's
 * state is past its limits (and now marked stopped), else 0. Touches no
 * Lua stack and never raises: for C code that cannot unwind (inside
 * pcre2); the caller then gets the message from ludo__state_check. */
int ludo__state_over(lua_State *L);

/* ludo__state_over in the shape C loops take a stop callback in (the
 * regex limits, the code cache's compile): `L` is a lua_State. */
int ludo__state_stop(void *L);

/* A script's error message is cut to this many bytes (and " [... N more
 * bytes]") before ludo prefixes it with its code and adds a traceback:
 * the session keeps 16 KiB of the whole (LUDO__ERRMSG_MAX). */
#define LUDO__SCRIPT_MSG_MAX ((size_t)12 << 10)

/* Most log bytes (print, ludo.log) one call may write; past it the rest
 * of the call's lines are dropped, with one line saying so. */
#define LUDO__LOG_CALL_MAX ((size_t)256 << 10)

/* Writes a log line of the state's Lua code: control characters escaped
 * (a script cannot forge lines or send terminal escapes), named after the
 * session, within LUDO__LOG_CALL_MAX per call. [-0, +0, m] */
void ludo__state_log(lua_State *L, ludo__state_t *st, int level,
                     const char *msg, size_t len);

/* Stops the running call at its next instruction with `why`
 * (LUDO__KILL_*): every coroutine it runs through raises, and pcall cannot
 * catch it. Async-signal-safe. */
void ludo__state_kill(ludo__state_t *st, int why);
/* Ends the call's budget; restores the normal hook on thread `co`. */
void ludo__state_disarm(ludo__state_t *st, lua_State *co);

/* Like ludo__state_error, with thread `tb` (may be NULL; still intact
 * after a failed resume): a script error gets its traceback, a timeout or
 * memory error the place it stopped at (" (at env.lua:12)", from
 * st->where, or where `tb` stopped; see ludo__state_locate). [-1, +1, -] */
int ludo__state_error_tb(ludo__state_t *st, lua_State *L, int status,
                         lua_State *tb);

/* Maps a Lua status after a failed resume/pcall to a LUDO_E* code and
 * replaces the error object on top of L with a message string that begins
 * with the code's name ("ETIMEOUT: ..."). [-1, +1, m] */
int ludo__state_error(ludo__state_t *st, lua_State *L, int status);

#endif
